//! CPU-backend primitives. A CPU "kernel" is run by host threads of each PE process; the runtime
//! installs hooks that give each thread its coordinates and block/warp barriers. Memory shared between
//! PEs is shared memory mapped by every process, so Rust's atomics (lock-free, address-based) are
//! atomic across processes too, and SeqCst fences order across processes as they do across threads.

use crate::state::{is_u32_field, is_u64_field, DeviceState, Field};
use crate::types::{Failure, Rmw};
use core::cell::UnsafeCell;
use core::sync::atomic::{fence, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// Where the current thread stands in its CPU kernel launch.
#[derive(Clone, Copy)]
pub struct Coords {
    /// Linear index of the thread in its block (x fastest).
    pub thread: u32,
    /// Threads per block (the product of `block_dim`).
    pub threads: u32,
    /// Linear index of the block in the grid (x fastest).
    pub block: u32,
    /// Blocks in the grid (the product of `grid_dim`).
    pub blocks: u32,
    /// The block's shape.
    pub block_dim: crate::types::Dim3,
    /// The grid's shape.
    pub grid_dim: crate::types::Dim3,
}

impl Coords {
    /// Outside a kernel, and a one-thread launch: thread 0 of 1, block 0 of 1.
    pub const ONE: Coords = Coords { thread: 0, threads: 1, block: 0, blocks: 1, block_dim: crate::types::Dim3::new(1, 1, 1), grid_dim: crate::types::Dim3::new(1, 1, 1) };
}

/// Hooks the runtime installs for the CPU backend.
pub struct Hooks {
    /// Coordinates of the calling thread (outside a kernel: thread 0 of 1, block 0 of 1).
    pub coords: fn() -> Coords,
    /// Barrier of all threads of the caller's block / of the caller's warp (32 consecutive threads).
    pub sync_block: fn(),
    /// Barrier of the threads of the caller's warp (as `sync_block`, for the warp).
    pub sync_warp: fn(),
    /// `v` of the first thread of the caller's block (resp. warp) to every thread of it (all call it).
    pub bcast_block: fn(u64) -> u64,
    /// `v` of the first thread of the caller's warp to every thread of the warp (as `bcast_block`).
    pub bcast_warp: fn(u64) -> u64,
    /// Called in every spin of a wait loop with the spin count: backs off (yield, sleep) and enforces
    /// RSHMEM_WAIT_TIMEOUT for `call`.
    pub idle: fn(spins: u64, call: &'static str),
    /// Reports a failed device call and ends the process.
    pub fail: fn(&Failure) -> !,
}

fn default_coords() -> Coords {
    Coords::ONE
}
fn no_sync() {}
fn default_idle(spins: u64, _call: &'static str) {
    if spins % 64 == 63 {
        core::hint::spin_loop();
    }
}
fn default_fail(f: &Failure) -> ! {
    panic!("rshmem: {}: {} (target PE {}, address {:#x}, {} bytes)", trim(f.call), trim(f.problem.text()), f.pe, f.addr, f.len)
}

/// Strips the NUL terminator the device side needs for printf.
pub fn trim(s: &'static str) -> &'static str {
    s.strip_suffix('\0').unwrap_or(s)
}

fn own_value(v: u64) -> u64 {
    v
}

static DEFAULT_HOOKS: Hooks = Hooks {
    coords: default_coords,
    sync_block: no_sync,
    sync_warp: no_sync,
    bcast_block: own_value,
    bcast_warp: own_value,
    idle: default_idle,
    fail: default_fail,
};
static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(core::ptr::null_mut());

/// This process's device state (CPU backend, and the host-side queries of every backend): one
/// allocation for the life of the process, rewritten by every `init` and cleared by `finalize`.
///
/// Every access to it is atomic and of the field's own width (u64 fields as `AtomicU64`, i32/u32
/// fields as `AtomicU32`), and no reference to it is ever handed out. So a thread that still runs
/// device code while another thread finalizes and initializes again races only on atomics: it may read
/// a mix of old and new values (a use of rshmem across finalize is the caller's error, and the device
/// calls that would then touch memory are `unsafe fn`s whose contract includes a live runtime), but
/// never causes a data race, and the storage never dangles. This replaces one leaked state per init.
struct StateCell(UnsafeCell<DeviceState>);

// SAFETY: all accesses to the cell's contents are atomic (see `StateCell`); no `&DeviceState` into it
// is ever created.
unsafe impl Sync for StateCell {}

static STATE: StateCell = StateCell(UnsafeCell::new(DeviceState::ZERO));

const MAGIC_OFF: usize = core::mem::offset_of!(DeviceState, magic);

#[inline(always)]
fn state_ptr() -> *mut u8 {
    STATE.0.get() as *mut u8
}

/// Installs the runtime's hooks (CPU backend).
pub fn install_hooks(h: &'static Hooks) {
    HOOKS.store(h as *const Hooks as *mut Hooks, Ordering::Release);
}

fn store_u64(off: usize, v: u64) {
    assert!(is_u64_field(off), "store_u64: not the offset of a u64 field of DeviceState");
    // SAFETY: checked above: the offset of a u64 field of DeviceState, so the address is inside STATE
    // and 8-aligned (repr(C), align 8); every access to that field is an 8-byte atomic.
    unsafe { AtomicU64::from_ptr(state_ptr().add(off) as *mut u64) }.store(v, Ordering::Relaxed)
}
fn store_u32(off: usize, v: u32) {
    assert!(is_u32_field(off), "store_u32: not the offset of a 4-byte field of DeviceState");
    // SAFETY: as store_u64, for a 4-byte field (checked above).
    unsafe { AtomicU32::from_ptr(state_ptr().add(off) as *mut u32) }.store(v, Ordering::Relaxed)
}

/// Points the device library at a copy of `s` (the runtime calls it at the end of `init`). The fields
/// are written with the magic cleared first and set last (release), so a reader that sees the magic
/// (acquire) sees the fields written before it. Every access is atomic, so a race is never a data
/// race; what a race could break is what the state promises, hence the contract.
///
/// # Safety
/// While the state stays published (until [`clear_state`] or the next `set_state`), every address `s`
/// names must be what device calls take it for: the heap (`heap_base`, `heap_size`) and every nonzero
/// `peer_base` mapped in this process with the runtime's internal area at its start, the proxy's
/// channels (ring, return area, staging, counters), the inbound queue and the IBGDA table live and laid
/// out as the device library expects. No other thread may call `set_state` or [`clear_state`] at the
/// same time (two publications racing could leave fields of both, with the magic set). The runtime
/// calls it only from init, which holds the runtime's slot.
pub unsafe fn set_state(s: &DeviceState) {
    use core::mem::offset_of;
    store_u64(MAGIC_OFF, 0);
    fence(Ordering::Release);
    store_u32(offset_of!(DeviceState, my_pe), s.my_pe as u32);
    store_u32(offset_of!(DeviceState, n_pes), s.n_pes as u32);
    store_u64(offset_of!(DeviceState, heap_base), s.heap_base);
    store_u64(offset_of!(DeviceState, heap_size), s.heap_size);
    store_u32(offset_of!(DeviceState, checks), s.checks);
    store_u32(offset_of!(DeviceState, wait_timeout_ms), s.wait_timeout_ms);
    store_u32(offset_of!(DeviceState, node_my_pe), s.node_my_pe as u32);
    store_u32(offset_of!(DeviceState, node_n_pes), s.node_n_pes as u32);
    store_u64(offset_of!(DeviceState, proxy_ring), s.proxy_ring.header);
    store_u64(offset_of!(DeviceState, proxy_ring) + 8, s.proxy_ring.slots);
    store_u64(offset_of!(DeviceState, proxy_ret), s.proxy_ret);
    store_u64(offset_of!(DeviceState, target), s.target);
    for (i, w) in s.route.chunks_exact(4).enumerate() {
        store_u32(offset_of!(DeviceState, route) + 4 * i, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    }
    for (i, &b) in s.peer_base.iter().enumerate() {
        store_u64(offset_of!(DeviceState, peer_base) + 8 * i, b);
    }
    for (i, &p) in s.node_pe.iter().enumerate() {
        store_u32(offset_of!(DeviceState, node_pe) + 4 * i, p as u32);
    }
    store_u64(offset_of!(DeviceState, ibgda), s.ibgda);
    store_u64(offset_of!(DeviceState, proxy_channels), s.proxy_channels);
    for (c, ch) in s.proxy.iter().enumerate() {
        let words: [u64; 8] = bytemuck::cast(*ch);
        for (w, &v) in words.iter().enumerate() {
            store_u64(offset_of!(DeviceState, proxy) + 64 * c + 8 * w, v);
        }
    }
    // SAFETY: the magic field: 8-aligned inside STATE, only ever accessed as an 8-byte atomic.
    unsafe { AtomicU64::from_ptr(state_ptr().add(MAGIC_OFF) as *mut u64) }.store(s.magic, Ordering::Release);
}

/// Marks the device state uninitialized (the runtime calls it in `finalize`): device calls made after
/// it fail naming the call ("called before rshmem init completed") instead of using the addresses of
/// a heap that is being unmapped. Only the magic is cleared: every device call that reads an address
/// of the state checks the magic first.
///
/// # Safety
/// The caller is the runtime that published the state with [`set_state`], withdrawing it before it
/// releases what the state names; no other thread calls `set_state` at the same time. (Withdrawing a
/// live runtime's state makes its device calls stop the PE.)
///
/// Only code that takes on that contract can call it (or [`set_state`]):
/// ```
/// use rshmem_device::{arch, state::DeviceState};
/// // SAFETY: no runtime runs in this process: there is no state to withdraw.
/// unsafe { arch::clear_state() };
/// // Compiled, never called: publishing is the caller's promise.
/// fn publish(s: &DeviceState) {
///     // SAFETY: (an example that only has to compile)
///     unsafe { arch::set_state(s) }
/// }
/// ```
/// Safe code cannot, so neither of these compiles:
/// ```compile_fail,E0133
/// rshmem_device::arch::clear_state();
/// ```
/// ```compile_fail,E0133
/// use rshmem_device::{arch, state::DeviceState};
/// fn publish(s: &DeviceState) {
///     arch::set_state(s)
/// }
/// ```
pub unsafe fn clear_state() {
    store_u64(MAGIC_OFF, 0);
}

#[inline(always)]
fn hooks() -> &'static Hooks {
    let p = HOOKS.load(Ordering::Acquire);
    // SAFETY: only `&'static Hooks` are ever stored.
    if p.is_null() { &DEFAULT_HOOKS } else { unsafe { &*p } }
}

/// Reads a u64 field of the device state (see the nvptx version). The magic is read with acquire, so
/// the fields read after a check of it are those `set_state` wrote before it.
#[inline(always)]
pub fn state_u64(f: Field<u64>) -> u64 {
    let order = if f == Field::MAGIC { Ordering::Acquire } else { Ordering::Relaxed };
    // SAFETY: a `Field<u64>` is an 8-aligned u64 inside STATE (checked when it was made), only ever
    // accessed as an 8-byte atomic.
    unsafe { AtomicU64::from_ptr(state_ptr().add(f.offset()) as *mut u64) }.load(order)
}
/// Two u64 fields of the device state (see the nvptx version for why the pair exists).
#[inline(always)]
pub fn state_u64_pair(a: Field<u64>, b: Field<u64>) -> (u64, u64) {
    (state_u64(a), state_u64(b))
}
/// Reads an i32/u32 field of the device state.
#[inline(always)]
pub fn state_u32(f: Field<u32>) -> u32 {
    // SAFETY: a `Field<u32>` is a 4-aligned u32 inside STATE (checked when it was made), only ever
    // accessed as a 4-byte atomic.
    unsafe { AtomicU32::from_ptr(state_ptr().add(f.offset()) as *mut u32) }.load(Ordering::Relaxed)
}

/// This process's PE number from the device state (-1 before init), for messages.
pub fn state_my_pe() -> i32 {
    state_u32(Field::MY_PE) as i32
}

/// Linear index of this thread in its block (`x` fastest, as CUDA numbers threads).
#[inline(always)]
pub fn block_rank() -> u32 {
    (hooks().coords)().thread
}
/// Number of threads in this thread's block.
#[inline(always)]
pub fn block_size() -> u32 {
    (hooks().coords)().threads
}
/// The block's x index (as on GPUs: in a 2-D or 3-D grid, its x coordinate only).
#[inline(always)]
pub fn block_index() -> u32 {
    let c = (hooks().coords)();
    c.block % c.grid_dim.x.max(1)
}
/// The grid's x size (as on GPUs).
#[inline(always)]
pub fn grid_size() -> u32 {
    (hooks().coords)().grid_dim.x
}
/// This thread's position in its block (CUDA's `threadIdx`).
#[inline(always)]
pub fn thread_idx() -> crate::types::Dim3 {
    let c = (hooks().coords)();
    c.block_dim.position(c.thread)
}
/// The shape of the block (CUDA's `blockDim`).
#[inline(always)]
pub fn block_dim() -> crate::types::Dim3 {
    (hooks().coords)().block_dim
}
/// This block's position in the grid (CUDA's `blockIdx`).
#[inline(always)]
pub fn block_idx() -> crate::types::Dim3 {
    let c = (hooks().coords)();
    c.grid_dim.position(c.block)
}
/// The shape of the grid (CUDA's `gridDim`).
#[inline(always)]
pub fn grid_dim() -> crate::types::Dim3 {
    (hooks().coords)().grid_dim
}
/// This thread's lane in its warp (`block_rank() % 32`).
#[inline(always)]
pub fn warp_rank() -> u32 {
    block_rank() & 31
}
/// Number of threads in this thread's warp: 32, or fewer in the last warp of a block whose size is
/// not a multiple of 32.
#[inline(always)]
pub fn warp_size() -> u32 {
    let c = (hooks().coords)();
    core::cmp::min(32, c.threads - (c.thread & !31))
}
/// `v` of the block's first thread to every thread of the block (all call it).
#[inline(always)]
pub fn block_bcast_u64(v: u64) -> u64 {
    (hooks().bcast_block)(v)
}
/// `v` of the warp's first thread to every thread of the warp (all call it).
#[inline(always)]
pub fn warp_group_bcast_u64(v: u64) -> u64 {
    (hooks().bcast_warp)(v)
}

/// Barrier of every thread of the block (CUDA's `__syncthreads`); all of them must call it.
#[inline(always)]
pub fn sync_block() {
    (hooks().sync_block)()
}
/// Barrier of the threads of this thread's warp (CUDA's `__syncwarp`); all of them must call it.
#[inline(always)]
pub fn sync_warp() {
    (hooks().sync_warp)()
}

/// Whether `p` is in thread-local memory: never on the host, where every address of the process is
/// reachable by the proxy thread.
#[inline(always)]
pub fn is_local(_p: *const u8) -> bool {
    false
}

/// Back-off of a contended wait (the GPU backend's is a nanosleep). CPU backend: the hooks' `idle`
/// already yields and sleeps; nothing more.
#[inline(always)]
pub fn backoff(_spins: u64) {}

/// CPU backend: every thread posts on its own (warp-level aggregation is a GPU optimization): a group
/// of one, lane 0.
#[inline(always)]
pub fn warp_peers(_key: u64) -> (u32, u32) {
    (1, 0)
}
/// CPU backend: groups of one ([`warp_peers`]): the value itself.
#[inline(always)]
pub fn warp_bcast_u64(_mask: u32, _src: u32, v: u64) -> u64 {
    v
}
/// CPU backend: groups of one: nothing to wait for.
#[inline(always)]
pub fn warp_sync_mask(_mask: u32) {}

/// Keeps the compiler from moving memory accesses across this point (no instruction).
#[inline(always)]
pub fn compiler_barrier() {
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// `fence_sc` (the nvptx version takes a value computed before it; see there).
#[inline(always)]
pub fn fence_sc_after(_after: u64) {
    fence_sc()
}
/// Sequentially consistent fence: completes and orders this thread's earlier memory operations
/// before its later ones, across processes too (the GPU's `fence.sc.sys`).
#[inline(always)]
pub fn fence_sc() {
    fence(Ordering::SeqCst)
}
/// Acquire-release fence: orders earlier loads before every later access, and every earlier access
/// before later stores (the GPU's `fence.acq_rel.sys`).
#[inline(always)]
pub fn fence_acq_rel() {
    fence(Ordering::AcqRel)
}
/// The GPU's global timer in nanoseconds; the host layer has no clock of its own (`no_std`): 0, which
/// callers read as "no time taken here".
#[inline(always)]
pub fn globaltimer_ns() -> u64 {
    0
}
// The nvptx layer's narrower scopes (`fence.sc.gpu`, `fence.acq_rel.cta`, `fence.acq_rel.gpu`): on the
// host there is one scope, the process's, so they are the same fences.
pub use fence_acq_rel as fence_acq_rel_cta;
pub use fence_acq_rel as fence_acq_rel_gpu;
pub use fence_sc as fence_sc_gpu;

macro_rules! width_ops {
    ($t:ty, $at:ty, $load_acq:ident, $load_rlx:ident, $store_rel:ident, $store_rlx:ident, $rmw:ident, $cas:ident) => {
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $load_acq(p: *const $t) -> $t {
            // SAFETY: the function's contract is `from_ptr`'s (aligned, live, accessed only atomically).
            unsafe { <$at>::from_ptr(p as *mut $t) }.load(Ordering::Acquire)
        }
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $load_rlx(p: *const $t) -> $t {
            // SAFETY: as above.
            unsafe { <$at>::from_ptr(p as *mut $t) }.load(Ordering::Relaxed)
        }
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $store_rel(p: *mut $t, v: $t) {
            // SAFETY: as above.
            unsafe { <$at>::from_ptr(p) }.store(v, Ordering::Release)
        }
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $store_rlx(p: *mut $t, v: $t) {
            // SAFETY: as above.
            unsafe { <$at>::from_ptr(p) }.store(v, Ordering::Relaxed)
        }
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $rmw(op: Rmw, p: *mut $t, v: $t) -> $t {
            // SAFETY: as above.
            let a = unsafe { <$at>::from_ptr(p) };
            match op {
                Rmw::Add => a.fetch_add(v, Ordering::Relaxed),
                Rmw::And => a.fetch_and(v, Ordering::Relaxed),
                Rmw::Or => a.fetch_or(v, Ordering::Relaxed),
                Rmw::Xor => a.fetch_xor(v, Ordering::Relaxed),
                Rmw::Swap => a.swap(v, Ordering::Relaxed),
                Rmw::Max => a.fetch_max(v, Ordering::Relaxed),
            }
        }
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $cas(p: *mut $t, cond: $t, v: $t) -> $t {
            // SAFETY: as above.
            match unsafe { <$at>::from_ptr(p) }.compare_exchange(cond, v, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(x) | Err(x) => x,
            }
        }
    };
}
width_ops!(u32, AtomicU32, load_acquire_u32, load_relaxed_u32, store_release_u32, store_relaxed_u32, rmw_u32, cas_u32);
width_ops!(u64, AtomicU64, load_acquire_u64, load_relaxed_u64, store_release_u64, store_relaxed_u64, rmw_u64, cas_u64);
// The GPU-scope names of the nvptx layer: on the host there is one scope, the process's, so they are
// the same operations.
pub use {
    cas_u32 as cas_u32_gpu, cas_u64 as cas_u64_gpu, load_acquire_u32 as load_acquire_u32_gpu, load_acquire_u64 as load_acquire_u64_gpu,
    load_relaxed_u32 as load_relaxed_u32_gpu, load_relaxed_u64 as load_relaxed_u64_gpu, rmw_u32 as rmw_u32_gpu, rmw_u64 as rmw_u64_gpu,
    store_relaxed_u32 as store_relaxed_u32_gpu, store_relaxed_u64 as store_relaxed_u64_gpu, store_release_u32 as store_release_u32_gpu,
    store_release_u64 as store_release_u64_gpu,
};

/// Acquire load of a 16-bit value.
///
/// # Safety
/// As the width ops above, for a 2-byte value.
#[inline(always)]
pub unsafe fn load_acquire_u16(p: *const u16) -> u16 {
    // SAFETY: as for the width ops above (the function's contract is `from_ptr`'s).
    unsafe { AtomicU16::from_ptr(p as *mut u16) }.load(Ordering::Acquire)
}

/// Called in every spin of a wait loop: counts the spin in `spins` and hands it to the hooks' `idle`,
/// which backs off and enforces RSHMEM_WAIT_TIMEOUT (stopping the PE naming `call`).
#[inline(always)]
pub fn idle(spins: &mut u64, call: &'static str) {
    *spins += 1;
    (hooks().idle)(*spins, call)
}

/// Copies `n` bytes as member `rank` of a group of `size` threads: each thread copies one contiguous
/// share (cache-friendly on CPUs), cut at 64-byte boundaries.
///
/// # Safety
/// `src` must be readable and `dst` writable for `n` bytes, both in memory mapped here, and the two
/// ranges must not overlap; every member of the group must call with the same `dst`, `src`, `n` and
/// `size` (each copies its own share).
#[inline(always)]
pub unsafe fn copy(dst: *mut u8, src: *const u8, n: usize, rank: u32, size: u32) {
    let (rank, size) = (rank as usize, size as usize);
    let share = (n.div_ceil(size) + 63) & !63;
    let start = core::cmp::min(n, rank * share);
    let end = core::cmp::min(n, start + share);
    if end > start {
        // SAFETY: the caller guarantees both ranges are valid for `n` bytes (start <= end <= n) and do
        // not overlap; shares of different ranks don't overlap either.
        unsafe { core::ptr::copy(src.add(start), dst.add(start), end - start) };
    }
}

/// Analysis variant (see the nvptx version): on the host the same contiguous copy.
///
/// # Safety
/// As `copy`, for `16 * units` bytes.
#[inline(always)]
pub unsafe fn copy16_deep(dst: *mut u8, src: *const u8, units: usize, rank: usize, size: usize) {
    // SAFETY: the caller's contract, for `16 * units` bytes.
    unsafe { copy(dst, src, units * 16, rank as u32, size as u32) }
}

/// Reports the failed call `f` through the hooks' `fail`, which ends the process (without hooks: a
/// panic with the message).
#[cold]
#[inline]
pub fn fail(f: Failure) -> ! {
    (hooks().fail)(&f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    /// set_state publishes every field at its own width, clear_state only withdraws the magic, and an
    /// offset that is not a field of the right width is refused rather than read. (One test: the
    /// state is process-wide.)
    #[test]
    fn state_publish_clear_and_offset_checks() {
        let mut s = DeviceState::ZERO;
        s.magic = crate::state::STATE_MAGIC;
        s.my_pe = 3;
        s.n_pes = 7;
        s.heap_base = 0x1234_5678_9abc_def0;
        s.heap_size = 1 << 30;
        s.node_my_pe = 1;
        s.node_n_pes = 2;
        s.peer_base[6] = 0xfeed_0000;
        s.node_pe[1] = 5;
        // SAFETY: (test) nothing dereferences the made-up addresses: only the fields are read back, and
        // this is the only test that publishes a state.
        unsafe { set_state(&s) };
        assert_eq!(state_u64(Field::MAGIC), crate::state::STATE_MAGIC);
        assert_eq!(state_my_pe(), 3);
        assert_eq!(state_u32(Field::N_PES), 7);
        assert_eq!(state_u64(Field::HEAP_BASE), 0x1234_5678_9abc_def0);
        assert_eq!(state_u64(Field::peer_base(6)), 0xfeed_0000);
        assert_eq!(state_u32(Field::node_pe(1)), 5);
        // SAFETY: (test) withdraws the state this test published.
        unsafe { clear_state() };
        assert_eq!(state_u64(Field::MAGIC), 0);
        assert_eq!(state_my_pe(), 3, "messages after finalize still name the PE");
        // A second init overwrites everything.
        s.my_pe = 0;
        s.peer_base[6] = 0;
        // SAFETY: as above.
        unsafe { set_state(&s) };
        assert_eq!(state_my_pe(), 0);
        assert_eq!(state_u64(Field::peer_base(6)), 0);
        assert!(!is_u64_field(offset_of!(DeviceState, my_pe)), "a 4-byte field is not a u64 field");
        assert!(!is_u64_field(offset_of!(DeviceState, peer_base) + 4), "misaligned");
        assert!(!is_u64_field(core::mem::size_of::<DeviceState>()), "past the end");
        assert!(!is_u32_field(offset_of!(DeviceState, heap_base)), "half of a u64 field");
        assert!(!is_u32_field(core::mem::size_of::<DeviceState>()), "past the end");
        // Fields are made only from such offsets; array elements wrap into their array.
        extern crate std;
        assert!(std::panic::catch_unwind(|| Field::u64(offset_of!(DeviceState, my_pe))).is_err());
        assert!(std::panic::catch_unwind(|| Field::u32(offset_of!(DeviceState, heap_base))).is_err());
        assert_eq!(Field::peer_base(crate::state::MAX_PES + 6), Field::peer_base(6));
        assert_eq!(Field::node_pe(crate::state::MAX_PES + 1), Field::node_pe(1));
        assert_eq!(Field::route_word(7).offset(), offset_of!(DeviceState, route) + 4);
    }
}
