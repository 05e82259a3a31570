//! CPU-backend primitives. A CPU "kernel" is run by host threads of each PE process; the runtime
//! installs hooks that give each thread its coordinates and block/warp barriers. Memory shared between
//! PEs is shared memory mapped by every process, so Rust's atomics (lock-free, address-based) are
//! atomic across processes too, and SeqCst fences order across processes as they do across threads.

use super::{Failure, Rmw};
use crate::state::DeviceState;
use core::sync::atomic::{fence, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// Where the current thread stands in its CPU kernel launch.
#[derive(Clone, Copy)]
pub struct Coords {
    pub thread: u32,
    pub threads: u32,
    pub block: u32,
    pub blocks: u32,
}

/// Hooks the runtime installs for the CPU backend.
pub struct Hooks {
    /// Coordinates of the calling thread (outside a kernel: thread 0 of 1, block 0 of 1).
    pub coords: fn() -> Coords,
    /// Barrier of all threads of the caller's block / of the caller's warp (32 consecutive threads).
    pub sync_block: fn(),
    pub sync_warp: fn(),
    /// Called in every spin of a wait loop with the spin count: backs off (yield, sleep) and enforces
    /// RSHMEM_WAIT_TIMEOUT for `call`.
    pub idle: fn(spins: u64, call: &'static str),
    /// Reports a failed device call and ends the process.
    pub fail: fn(&Failure) -> !,
}

fn default_coords() -> Coords {
    Coords { thread: 0, threads: 1, block: 0, blocks: 1 }
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

static DEFAULT_HOOKS: Hooks =
    Hooks { coords: default_coords, sync_block: no_sync, sync_warp: no_sync, idle: default_idle, fail: default_fail };
static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(core::ptr::null_mut());
static STATE: AtomicPtr<DeviceState> = AtomicPtr::new(core::ptr::null_mut());
static ZERO_STATE: DeviceState = DeviceState::ZERO;

/// Installs the runtime's hooks (CPU backend).
pub fn install_hooks(h: &'static Hooks) {
    HOOKS.store(h as *const Hooks as *mut Hooks, Ordering::Release);
}

/// Points the device library at this process's device state (CPU backend). The state must stay valid
/// and unchanged while device calls run.
pub fn set_state(s: &'static DeviceState) {
    STATE.store(s as *const DeviceState as *mut DeviceState, Ordering::Release);
}

#[inline(always)]
fn hooks() -> &'static Hooks {
    let p = HOOKS.load(Ordering::Acquire);
    // SAFETY: only `&'static Hooks` are ever stored.
    if p.is_null() { &DEFAULT_HOOKS } else { unsafe { &*p } }
}

#[inline(always)]
pub fn state() -> &'static DeviceState {
    let p = STATE.load(Ordering::Acquire);
    // SAFETY: only `&'static DeviceState` are ever stored.
    if p.is_null() { &ZERO_STATE } else { unsafe { &*p } }
}

/// Reads a field of the device state (see the nvptx version).
#[inline(always)]
pub fn state_u64(off: usize) -> u64 {
    // SAFETY: off is a field offset inside DeviceState (callers use offset_of!).
    unsafe { core::ptr::read((state() as *const DeviceState as *const u8).add(off) as *const u64) }
}
#[inline(always)]
pub fn state_u32(off: usize) -> u32 {
    // SAFETY: as state_u64.
    unsafe { core::ptr::read((state() as *const DeviceState as *const u8).add(off) as *const u32) }
}

#[inline(always)]
pub fn block_rank() -> u32 {
    (hooks().coords)().thread
}
#[inline(always)]
pub fn block_size() -> u32 {
    (hooks().coords)().threads
}
#[inline(always)]
pub fn block_index() -> u32 {
    (hooks().coords)().block
}
#[inline(always)]
pub fn grid_size() -> u32 {
    (hooks().coords)().blocks
}
#[inline(always)]
pub fn warp_rank() -> u32 {
    block_rank() & 31
}
#[inline(always)]
pub fn warp_size() -> u32 {
    let c = (hooks().coords)();
    core::cmp::min(32, c.threads - (c.thread & !31))
}
#[inline(always)]
pub fn sync_block() {
    (hooks().sync_block)()
}
#[inline(always)]
pub fn sync_warp() {
    (hooks().sync_warp)()
}

/// Keeps the compiler from moving memory accesses across this point (no instruction).
#[inline(always)]
pub fn compiler_barrier() {
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

#[inline(always)]
pub fn fence_sc() {
    fence(Ordering::SeqCst)
}
#[inline(always)]
pub fn fence_acq_rel() {
    fence(Ordering::AcqRel)
}

macro_rules! width_ops {
    ($t:ty, $at:ty, $load_acq:ident, $load_rlx:ident, $store_rel:ident, $store_rlx:ident, $rmw:ident, $cas:ident) => {
        // SAFETY (all below): callers pass a valid, aligned pointer into mapped memory that is only
        // accessed atomically by the runtime's protocol while these run.
        #[inline(always)]
        pub unsafe fn $load_acq(p: *const $t) -> $t {
            <$at>::from_ptr(p as *mut $t).load(Ordering::Acquire)
        }
        #[inline(always)]
        pub unsafe fn $load_rlx(p: *const $t) -> $t {
            <$at>::from_ptr(p as *mut $t).load(Ordering::Relaxed)
        }
        #[inline(always)]
        pub unsafe fn $store_rel(p: *mut $t, v: $t) {
            <$at>::from_ptr(p).store(v, Ordering::Release)
        }
        #[inline(always)]
        pub unsafe fn $store_rlx(p: *mut $t, v: $t) {
            <$at>::from_ptr(p).store(v, Ordering::Relaxed)
        }
        #[inline(always)]
        pub unsafe fn $rmw(op: Rmw, p: *mut $t, v: $t) -> $t {
            let a = <$at>::from_ptr(p);
            match op {
                Rmw::Add => a.fetch_add(v, Ordering::Relaxed),
                Rmw::And => a.fetch_and(v, Ordering::Relaxed),
                Rmw::Or => a.fetch_or(v, Ordering::Relaxed),
                Rmw::Xor => a.fetch_xor(v, Ordering::Relaxed),
                Rmw::Swap => a.swap(v, Ordering::Relaxed),
            }
        }
        #[inline(always)]
        pub unsafe fn $cas(p: *mut $t, cond: $t, v: $t) -> $t {
            match <$at>::from_ptr(p).compare_exchange(cond, v, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(x) | Err(x) => x,
            }
        }
    };
}
width_ops!(u32, AtomicU32, load_acquire_u32, load_relaxed_u32, store_release_u32, store_relaxed_u32, rmw_u32, cas_u32);
width_ops!(u64, AtomicU64, load_acquire_u64, load_relaxed_u64, store_release_u64, store_relaxed_u64, rmw_u64, cas_u64);

#[inline(always)]
pub unsafe fn load_acquire_u16(p: *const u16) -> u16 {
    // SAFETY: as for the width ops above.
    AtomicU16::from_ptr(p as *mut u16).load(Ordering::Acquire)
}

#[inline(always)]
pub fn idle(spins: &mut u64, call: &'static str) {
    *spins += 1;
    (hooks().idle)(*spins, call)
}

/// Copies `n` bytes as member `rank` of a group of `size` threads: each thread copies one contiguous
/// share (cache-friendly on CPUs), cut at 64-byte boundaries.
#[inline(always)]
pub unsafe fn copy(dst: *mut u8, src: *const u8, n: usize, rank: u32, size: u32) {
    let (rank, size) = (rank as usize, size as usize);
    let share = (n.div_ceil(size) + 63) & !63;
    let start = core::cmp::min(n, rank * share);
    let end = core::cmp::min(n, start + share);
    if end > start {
        // SAFETY: the caller guarantees both ranges are valid; shares of different ranks don't overlap.
        core::ptr::copy(src.add(start), dst.add(start), end - start);
    }
}

/// Analysis variant (see the nvptx version): on the host the same contiguous copy.
#[inline(always)]
pub unsafe fn copy16_deep(dst: *mut u8, src: *const u8, units: usize, rank: usize, size: usize) {
    copy(dst, src, units * 16, rank as u32, size as u32)
}

#[cold]
#[inline]
pub fn fail(f: Failure) -> ! {
    (hooks().fail)(&f)
}
