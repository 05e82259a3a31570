//! GPU primitives (nvptx64). All cross-PE atomics, loads and stores that synchronize use system scope:
//! peers are other GPUs, for which GPU scope is not enough.

use crate::state::Field;
use crate::types::{Failure, Problem, Rmw};
use core::arch::asm;
use core::arch::nvptx;

// The device state lives in the constant bank (`.const`), as `rshmemi_device_state`: reads are
// uniform constant-cache loads that system fences do not invalidate (a fence.sc.sys ends with
// CCTL.IVALL, which sent the old `.global` state back to L2 on every call after a quiet), and ptxas
// folds fixed offsets into instruction operands (`c[0x3][off]`).
//
// Every PTX that uses the device API only *declares* it (`.extern`, see `declare_device_state!`); the
// definition comes from where the code is linked: the runtime links a one-line PTX defining it with
// its modules, and nvcc programs get it from `rshmem_device_init.cu` in `librshmem_device.a`. The
// runtime writes it (cuModuleGetGlobal / cudaGetSymbolAddress, then a copy) after init and heap
// growth, between kernels, never while one runs. The name is `state::STATE_SYMBOL`; this crate's own
// declaration is made in `state` (the macro is defined there), which the reads below rely on.

#[inline(always)]
fn tid_linear() -> u32 {
    // SAFETY: reading special registers has no preconditions.
    unsafe {
        let (x, y, z) = (nvptx::_thread_idx_x() as u32, nvptx::_thread_idx_y() as u32, nvptx::_thread_idx_z() as u32);
        let (nx, ny) = (nvptx::_block_dim_x() as u32, nvptx::_block_dim_y() as u32);
        x + nx * (y + ny * z)
    }
}

/// Linear index of this thread in its block, and the block's thread count.
#[inline(always)]
pub fn block_rank() -> u32 {
    tid_linear()
}
/// Number of threads in this thread's block (`blockDim.x * blockDim.y * blockDim.z`).
#[inline(always)]
pub fn block_size() -> u32 {
    // SAFETY: special registers.
    unsafe { (nvptx::_block_dim_x() * nvptx::_block_dim_y() * nvptx::_block_dim_z()) as u32 }
}
/// Block index (x) and block count (x) of the grid.
#[inline(always)]
pub fn block_index() -> u32 {
    // SAFETY: special register.
    unsafe { nvptx::_block_idx_x() as u32 }
}
/// Number of blocks along the grid's x dimension (CUDA's `gridDim.x`).
#[inline(always)]
pub fn grid_size() -> u32 {
    // SAFETY: special register.
    unsafe { nvptx::_grid_dim_x() as u32 }
}
/// This thread's position in its block (CUDA's `threadIdx`).
#[inline(always)]
pub fn thread_idx() -> crate::types::Dim3 {
    // SAFETY: special registers.
    unsafe { crate::types::Dim3::new(nvptx::_thread_idx_x() as u32, nvptx::_thread_idx_y() as u32, nvptx::_thread_idx_z() as u32) }
}
/// The shape of the block (CUDA's `blockDim`).
#[inline(always)]
pub fn block_dim() -> crate::types::Dim3 {
    // SAFETY: special registers.
    unsafe { crate::types::Dim3::new(nvptx::_block_dim_x() as u32, nvptx::_block_dim_y() as u32, nvptx::_block_dim_z() as u32) }
}
/// This block's position in the grid (CUDA's `blockIdx`).
#[inline(always)]
pub fn block_idx() -> crate::types::Dim3 {
    // SAFETY: special registers.
    unsafe { crate::types::Dim3::new(nvptx::_block_idx_x() as u32, nvptx::_block_idx_y() as u32, nvptx::_block_idx_z() as u32) }
}
/// The shape of the grid (CUDA's `gridDim`).
#[inline(always)]
pub fn grid_dim() -> crate::types::Dim3 {
    // SAFETY: special registers.
    unsafe { crate::types::Dim3::new(nvptx::_grid_dim_x() as u32, nvptx::_grid_dim_y() as u32, nvptx::_grid_dim_z() as u32) }
}
/// Lane in the warp and the number of threads of this warp (the last warp of a block may be partial).
#[inline(always)]
pub fn warp_rank() -> u32 {
    tid_linear() & 31
}
/// Number of threads in this thread's warp: 32, or fewer in the last warp of a block whose size is
/// not a multiple of 32.
#[inline(always)]
pub fn warp_size() -> u32 {
    let start = tid_linear() & !31;
    core::cmp::min(32, block_size() - start)
}
/// Barrier of every thread of the block (`bar.sync`, CUDA's `__syncthreads`); all of them must call
/// it.
#[inline(always)]
pub fn sync_block() {
    // SAFETY: bar.sync is called by every thread of the block (block-scoped API contract).
    unsafe { nvptx::_syncthreads() }
}
/// Barrier of the threads of this thread's warp (`bar.warp.sync` over the warp's lanes, CUDA's
/// `__syncwarp`); all of them must call it.
#[inline(always)]
pub fn sync_warp() {
    let n = warp_size();
    if n >= 32 {
        // A full warp (the usual case): a constant mask, which needs no run-time mask check.
        // SAFETY: every thread of the warp calls the warp-scoped API, so all 32 threads arrive.
        unsafe { asm!("bar.warp.sync -1;") }
    } else {
        let mask: u32 = (1u32 << n) - 1;
        // SAFETY: as above, for the threads of this partial warp (the bits of `mask`).
        unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask) }
    }
}

/// The lanes of this thread's warp that run this code at this moment with the same `key` as this
/// thread (a mask, this lane included), and this thread's lane (`activemask` + `match.any.sync`).
#[inline(always)]
pub fn warp_peers(key: u64) -> (u32, u32) {
    let (mask, peers, lane): (u32, u32, u32);
    // SAFETY: reading the active mask and the lane id has no preconditions; match.any.sync is called
    // by exactly the lanes in `mask` (those active here, which all execute this same instruction).
    unsafe {
        asm!("activemask.b32 {m};", m = out(reg32) mask);
        asm!("match.any.sync.b64 {p}, {k}, {m};", p = out(reg32) peers, k = in(reg64) key, m = in(reg32) mask);
        asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane);
    }
    (peers, lane)
}
/// `v` of lane `src`, to every lane of `mask` (all of which call it).
#[inline(always)]
pub fn warp_bcast_u64(mask: u32, src: u32, v: u64) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: shfl.sync by exactly the lanes of `mask` (the caller's contract), `src` one of them.
    unsafe {
        asm!("shfl.sync.idx.b32 {d}, {a}, {s}, 31, {m};", d = out(reg32) lo, a = in(reg32) v as u32, s = in(reg32) src, m = in(reg32) mask);
        asm!("shfl.sync.idx.b32 {d}, {a}, {s}, 31, {m};", d = out(reg32) hi, a = in(reg32) (v >> 32) as u32, s = in(reg32) src, m = in(reg32) mask);
    }
    (hi as u64) << 32 | lo as u64
}
/// `v` of lane 0 of this thread's warp to every lane of it (every thread of the warp calls it, as the
/// warp-scoped API requires; a partial last warp of the block is its lanes).
#[inline(always)]
pub fn warp_group_bcast_u64(v: u64) -> u64 {
    let n = warp_size();
    let mask = if n >= 32 { u32::MAX } else { (1u32 << n) - 1 };
    warp_bcast_u64(mask, 0, v)
}

// The block's broadcast word (`block_bcast_u64`), in the shared memory of every block whose kernel
// calls it. Only the device library's out-of-line functions use it, so only the library's PTX names it.
core::arch::global_asm!(".shared .align 8 .b64 rshmemi_bcast;");

/// `v` of the block's thread 0 to every thread of the block (every thread of the block calls it, as
/// the block-scoped API requires). Out of line: the shared word is the device library's.
#[inline(never)]
pub fn block_bcast_u64(v: u64) -> u64 {
    let r: u64;
    // SAFETY: every thread of the block calls it (the caller's contract), so both barriers are met by
    // all; thread 0 writes the block's own shared word before the first barrier, everyone reads it
    // between the barriers, and the second keeps a next broadcast from overwriting it too early.
    unsafe {
        if block_rank() == 0 {
            asm!("st.shared.u64 [rshmemi_bcast], {v};", v = in(reg64) v);
        }
        nvptx::_syncthreads();
        asm!("ld.shared.u64 {r}, [rshmemi_bcast];", r = out(reg64) r);
        nvptx::_syncthreads();
    }
    r
}

/// Barrier of the lanes of `mask` (all of which call it); orders their memory accesses before it
/// before those after it.
#[inline(always)]
pub fn warp_sync_mask(mask: u32) {
    // SAFETY: every lane of `mask` calls it (the caller's contract).
    unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask) }
}

/// Keeps the compiler from moving memory accesses across this point or caching loaded values in
/// registers across it (no instruction: an empty asm statement that may touch memory).
#[inline(always)]
pub fn compiler_barrier() {
    // SAFETY: an empty asm statement does nothing at run time.
    unsafe { asm!("", options(nostack, preserves_flags)) }
}

/// Whether `p` (a generic address) points into this thread's local memory (its stack: a local
/// variable), which nothing outside the thread can reach — not a peer, not a DMA copy.
#[inline(always)]
pub fn is_local(p: *const u8) -> bool {
    let r: u32;
    // SAFETY: isspacep only inspects the address value.
    unsafe { asm!("{{ .reg .pred q; isspacep.local q, {a}; selp.u32 {r}, 1, 0, q; }}", a = in(reg64) p as u64, r = out(reg32) r, options(pure, nomem, nostack)) };
    r != 0
}

/// Completes and orders all earlier memory operations of this thread at system scope.
#[inline(always)]
pub fn fence_sc() {
    // SAFETY: a fence has no memory-safety preconditions.
    unsafe { asm!("fence.sc.sys;") }
}
/// `fence_sc` that takes `_after` as an input: a value computed before it (a device-state field that
/// `quiet` tests after the fence) must be computed before the fence, so its read is not sunk below
/// it. A separate pure read ahead of the fence is then hoisted out of a caller's loop like any other
/// state read; read after the fence (or inside it), it cost a constant-cache miss per call (the
/// system fence evicts the constant cache: `x_quiet_only` went from 0.586 to 0.636 us).
#[inline(always)]
pub fn fence_sc_after(_after: u64) {
    // SAFETY: a fence has no memory-safety preconditions; the operand is only named in a comment.
    unsafe { asm!("fence.sc.sys; // {0}", in(reg64) _after) }
}
/// Orders earlier stores before later stores (release/acquire fence at system scope).
#[inline(always)]
pub fn fence_acq_rel() {
    // SAFETY: as above.
    unsafe { asm!("fence.acq_rel.sys;") }
}
/// `fence_sc` at GPU scope (`fence.sc.gpu`): orders this thread's memory operations for the other
/// threads of this GPU only.
#[inline(always)]
pub fn fence_sc_gpu() {
    // SAFETY: as above.
    unsafe { asm!("fence.sc.gpu;") }
}
/// `fence_acq_rel` at block scope (`fence.acq_rel.cta`, NVSHMEM's `IBGDA_MFENCE`): this thread's
/// earlier accesses, loads included (their values returned), are performed before its later ones;
/// costs a fraction of a system-scope fence.
#[inline(always)]
pub fn fence_acq_rel_cta() {
    // SAFETY: as above.
    unsafe { asm!("fence.acq_rel.cta;") }
}
/// `fence_acq_rel` at GPU scope (`fence.acq_rel.gpu`).
#[inline(always)]
pub fn fence_acq_rel_gpu() {
    // SAFETY: as above.
    unsafe { asm!("fence.acq_rel.gpu;") }
}

macro_rules! width_ops {
    ($t:ty, $reg:ident, $b:literal, $sc:literal, $load_acq:ident, $load_rlx:ident, $store_rel:ident, $store_rlx:ident, $rmw:ident, $cas:ident) => {
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $load_acq(p: *const $t) -> $t {
            let v: $t;
            // SAFETY: one access at the macro's scope (`sys` or `gpu`) of `p`'s width to `p`, which the caller guarantees is
            // aligned, mapped and accessed only atomically.
            unsafe { asm!(concat!("ld.acquire.", $sc, ".b", $b, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) p) };
            v
        }
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $load_rlx(p: *const $t) -> $t {
            let v: $t;
            // SAFETY: one access at the macro's scope (`sys` or `gpu`) of `p`'s width to `p`, which the caller guarantees is
            // aligned, mapped and accessed only atomically.
            unsafe { asm!(concat!("ld.relaxed.", $sc, ".b", $b, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) p) };
            v
        }
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $store_rel(p: *mut $t, v: $t) {
            // SAFETY: one access at the macro's scope (`sys` or `gpu`) of `p`'s width to `p`, which the caller guarantees is
            // aligned, mapped and accessed only atomically.
            unsafe { asm!(concat!("st.release.", $sc, ".b", $b, " [{p}], {v};"), v = in($reg) v, p = in(reg64) p) };
        }
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $store_rlx(p: *mut $t, v: $t) {
            // SAFETY: one access at the macro's scope (`sys` or `gpu`) of `p`'s width to `p`, which the caller guarantees is
            // aligned, mapped and accessed only atomically.
            unsafe { asm!(concat!("st.relaxed.", $sc, ".b", $b, " [{p}], {v};"), v = in($reg) v, p = in(reg64) p) };
        }
        /// Atomic read-modify-write at the macro's scope; returns the old value.
        ///
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $rmw(op: Rmw, p: *mut $t, v: $t) -> $t {
            let old: $t;
            // SAFETY: one access at the macro's scope (`sys` or `gpu`) of `p`'s width to `p`, which the caller guarantees is
            // aligned, mapped and accessed only atomically.
            unsafe {
                match op {
                    Rmw::Add => asm!(concat!("atom.relaxed.", $sc, ".add.u", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v),
                    Rmw::And => asm!(concat!("atom.relaxed.", $sc, ".and.b", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v),
                    Rmw::Or => asm!(concat!("atom.relaxed.", $sc, ".or.b", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v),
                    Rmw::Xor => asm!(concat!("atom.relaxed.", $sc, ".xor.b", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v),
                    Rmw::Swap => asm!(concat!("atom.relaxed.", $sc, ".exch.b", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v),
                    Rmw::Max => asm!(concat!("atom.relaxed.", $sc, ".max.u", $b, " {o}, [{p}], {v};"), o = out($reg) old, p = in(reg64) p, v = in($reg) v),
                }
            }
            old
        }
        /// Atomic compare-and-swap at the macro's scope; returns the old value.
        ///
        /// # Safety
        /// `p` must be non-null, aligned for the type and point to memory mapped in this process
        /// (heap, device or shared memory) that, while this runs, is accessed only atomically.
        #[inline(always)]
        pub unsafe fn $cas(p: *mut $t, cond: $t, v: $t) -> $t {
            let old: $t;
            // SAFETY: one access at the macro's scope (`sys` or `gpu`) of `p`'s width to `p`, which the caller guarantees is
            // aligned, mapped and accessed only atomically.
            unsafe { asm!(concat!("atom.relaxed.", $sc, ".cas.b", $b, " {o}, [{p}], {c}, {v};"), o = out($reg) old, p = in(reg64) p, c = in($reg) cond, v = in($reg) v) };
            old
        }
    };
}
width_ops!(u32, reg32, "32", "sys", load_acquire_u32, load_relaxed_u32, store_release_u32, store_relaxed_u32, rmw_u32, cas_u32);
width_ops!(u64, reg64, "64", "sys", load_acquire_u64, load_relaxed_u64, store_release_u64, store_relaxed_u64, rmw_u64, cas_u64);

// The same at GPU scope: for memory only this GPU's threads (and a NIC reading GPU memory through its
// L2) share, where a system-scope access pays for ordering against the host it does not need.
width_ops!(u32, reg32, "32", "gpu", load_acquire_u32_gpu, load_relaxed_u32_gpu, store_release_u32_gpu, store_relaxed_u32_gpu, rmw_u32_gpu, cas_u32_gpu);
width_ops!(u64, reg64, "64", "gpu", load_acquire_u64_gpu, load_relaxed_u64_gpu, store_release_u64_gpu, store_relaxed_u64_gpu, rmw_u64_gpu, cas_u64_gpu);

/// Acquire load of a 16-bit value (wait_until on short types).
///
/// # Safety
/// As the width ops above, for a 2-byte value.
#[inline(always)]
pub unsafe fn load_acquire_u16(p: *const u16) -> u16 {
    let v: u16;
    // SAFETY: one 2-byte system-scope load of `p`, aligned, mapped and accessed only atomically (the
    // caller's contract).
    unsafe { asm!("ld.acquire.sys.b16 {v}, [{p}];", v = out(reg16) v, p = in(reg64) p) };
    v
}

/// Called in every spin of a wait loop: pure spinning first (a sleep would add its length to every
/// wake-up), short sleeps after ~64k spins to keep long waits from flooding the memory system.
#[inline(always)]
pub fn idle(spins: &mut u64, _call: &'static str) {
    *spins += 1;
    if *spins > (1 << 16) {
        // SAFETY: nanosleep has no preconditions.
        unsafe { asm!("nanosleep.u32 100;") }
    }
}

/// Exponential back-off of a contended wait after its first 16 spins: a nanosleep of up to 1 us, so
/// that thousands of threads spinning on one word leave the memory system to the one that can make
/// progress.
#[inline(always)]
pub fn backoff(spins: u64) {
    if spins > 16 {
        let ns = (8u64 << ((spins - 16).min(7))) as u32;
        // SAFETY: nanosleep has no preconditions.
        unsafe { asm!("nanosleep.u32 {n};", n = in(reg32) ns) }
    }
}

/// The GPU's global timer, in nanoseconds (`%globaltimer`; its update granularity is about a
/// microsecond on recent GPUs, fine for waits of tens of microseconds).
#[inline(always)]
pub fn globaltimer_ns() -> u64 {
    let t: u64;
    // SAFETY: reads a special register; no memory access.
    unsafe { asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack)) };
    t
}

/// Reads a field of the device state (constant bank). The state never changes while a kernel runs,
/// so the read is declared a pure function of the offset (`nomem`): the compiler may keep the value in
/// a register across fences and loop iterations, or read it again; both give the same value.
macro_rules! state_read {
    ($name:ident, $t:ty, $reg:ident, $ptx:literal) => {
        #[doc = concat!("Reads the ", stringify!($t), " field `f` of the device state (`", $ptx, "`).")]
        #[inline(always)]
        pub fn $name(f: Field<$t>) -> $t {
            let v: $t;
            // SAFETY: a `Field<$t>` is the offset of a field (or array element) of that width inside
            // the state (checked when it was made: `state::Field`), so the load stays inside the
            // constant variable and is aligned; see above for `nomem`.
            unsafe {
                asm!(concat!("{{ .reg .u64 a; mov.u64 a, rshmemi_device_state; add.u64 a, a, {o}; ", $ptx, " {v}, [a]; }}"),
                     o = in(reg64) f.offset() as u64, v = out($reg) v, options(pure, nomem, nostack))
            };
            v
        }
    };
}
state_read!(state_u64, u64, reg64, "ld.const.u64");

/// Two u64 fields of the device state in one statement. `route::locate` reads the magic (tested first)
/// and the peer base (tested last) together, so the peer base is loaded where the magic is: in a
/// caller's loop that is the loop header, from which the compiler hoists both out of the loop. Read
/// separately, the peer base load was sunk next to its last use, inside the loop, and its latency
/// landed on every `g`'s address.
#[inline(always)]
pub fn state_u64_pair(a: Field<u64>, b: Field<u64>) -> (u64, u64) {
    let (x, y): (u64, u64);
    // SAFETY: both are u64 fields inside the state (as for `state_u64`).
    unsafe {
        asm!("{{ .reg .u64 a; mov.u64 a, rshmemi_device_state; add.u64 a, a, {oa}; ld.const.u64 {x}, [a]; mov.u64 a, rshmemi_device_state; add.u64 a, a, {ob}; ld.const.u64 {y}, [a]; }}",
             oa = in(reg64) a.offset() as u64, ob = in(reg64) b.offset() as u64, x = out(reg64) x, y = out(reg64) y, options(pure, nomem, nostack))
    };
    (x, y)
}
state_read!(state_u32, u32, reg32, "ld.const.u32");

/// Copies a few bytes (a head or tail) with the widest accesses both pointers allow.
///
/// # Safety
/// `s` must be readable and `d` writable for `n` bytes; the ranges must not overlap.
#[inline(always)]
unsafe fn copy_small(mut d: *mut u8, mut s: *const u8, mut n: usize) {
    while n > 0 {
        let a = (d as usize | s as usize) & 7;
        // SAFETY: `n` bytes remain readable at `s` and writable at `d` (the caller's contract, less
        // what was copied); each access is at most `n` bytes wide and aligned to its width (`a`).
        unsafe {
            if n >= 8 && a == 0 {
                *(d as *mut u64) = *(s as *const u64);
                d = d.add(8);
                s = s.add(8);
                n -= 8;
            } else if n >= 4 && a & 3 == 0 {
                *(d as *mut u32) = *(s as *const u32);
                d = d.add(4);
                s = s.add(4);
                n -= 4;
            } else if n >= 2 && a & 1 == 0 {
                *(d as *mut u16) = *(s as *const u16);
                d = d.add(2);
                s = s.add(2);
                n -= 2;
            } else {
                *d = *s;
                d = d.add(1);
                s = s.add(1);
                n -= 1;
            }
        }
    }
}

/// Copies `n` bytes from `src` to `dst` as member `rank` of a group of `size` threads (each thread
/// copies a strided share). When both pointers have the same position within 16 bytes, the body moves
/// in 16-byte accesses (several in flight per thread) and the group's first thread copies the head and
/// tail with the widest accesses they allow; otherwise units of the pointers' common alignment.
///
/// # Safety
/// `src` must be readable and `dst` writable for `n` bytes, both in memory mapped here, and the two
/// ranges must not overlap; every member of the group must call with the same `dst`, `src`, `n` and
/// `size` (each copies its own share).
#[inline(always)]
pub unsafe fn copy(dst: *mut u8, src: *const u8, n: usize, rank: u32, size: u32) {
    let (rank, size) = (rank as usize, size as usize);
    let (d, s) = (dst as usize, src as usize);
    // Fast paths, decided by tests that are uniform across the group: a small copy is one thread's
    // few accesses; a 16-byte-aligned one needs no head or tail.
    if n <= 16 {
        if rank == 0 {
            // SAFETY: the caller's `n` bytes.
            unsafe { copy_small(dst, src, n) };
        }
        return;
    }
    if (d | s | n) & 15 == 0 {
        // SAFETY: the caller's `n` bytes: `n / 16` whole, 16-byte aligned units.
        unsafe { copy16(dst, src, n / 16, rank, size) };
        return;
    }
    if (d ^ s) & 15 == 0 {
        let head = core::cmp::min(n, (16 - (d & 15)) & 15);
        let body = (n - head) / 16;
        let tail = n - head - 16 * body;
        // Head and tail by different threads (the first and the last of the group), beside the body.
        // SAFETY: head + 16 * body + tail = n: the three pieces of the caller's `n` bytes; after the
        // head both pointers are 16-byte aligned (they share their position within 16 bytes).
        unsafe {
            if rank == 0 {
                copy_small(dst, src, head);
            }
            if rank == size - 1 {
                copy_small(dst.add(head + 16 * body), src.add(head + 16 * body), tail);
            }
            copy16(dst.add(head), src.add(head), body, rank, size);
        }
        return;
    }
    let w = if (d | s) & 7 == 0 { 8 } else if (d | s) & 3 == 0 { 4 } else { 1 };
    let units = n / w;
    let mut k = rank;
    // SAFETY: unit `k` < units = n / w of the caller's `n` bytes, both pointers aligned to `w`; the
    // rest (`n - units * w` bytes) after them.
    unsafe {
        match w {
            8 => {
                while k < units {
                    *(dst as *mut u64).add(k) = *(src as *const u64).add(k);
                    k += size;
                }
            }
            4 => {
                while k < units {
                    *(dst as *mut u32).add(k) = *(src as *const u32).add(k);
                    k += size;
                }
            }
            _ => {
                while k < units {
                    *dst.add(k) = *src.add(k);
                    k += size;
                }
            }
        }
        if rank == 0 {
            copy_small(dst.add(units * w), src.add(units * w), n - units * w);
        }
    }
}

/// Analysis variant of the 16-byte copy with eight loads in flight per thread (used by the benchmark
/// to measure whether more memory-level parallelism moves NVLink put bandwidth).
///
/// # Safety
/// `src` must be readable and `dst` writable for `16 * units` bytes, both 16-byte aligned and not
/// overlapping; every member of the group calls with the same arguments but its own `rank`.
#[inline(always)]
pub unsafe fn copy16_deep(dst: *mut u8, src: *const u8, units: usize, rank: usize, size: usize) {
    let mut k = rank;
    // SAFETY: every unit accessed is below `units` (k + 7 * size < units in the first loop, k < units
    // in the second) of the caller's 16-byte aligned ranges.
    unsafe {
        while k + 7 * size < units {
            let mut v = [(0u64, 0u64); 8];
            for (j, x) in v.iter_mut().enumerate() {
                *x = ld16(src.add(16 * (k + j * size)));
            }
            for (j, x) in v.iter().enumerate() {
                st16(dst.add(16 * (k + j * size)), *x);
            }
            k += 8 * size;
        }
        while k < units {
            st16(dst.add(16 * k), ld16(src.add(16 * k)));
            k += size;
        }
    }
}

/// # Safety
/// `p` must be 16-byte aligned and readable for 16 bytes.
#[inline(always)]
unsafe fn ld16(p: *const u8) -> (u64, u64) {
    let (a, b): (u64, u64);
    // SAFETY: one 16-byte load of the caller's aligned, readable 16 bytes.
    unsafe { asm!("ld.v2.u64 {{{a}, {b}}}, [{p}];", a = out(reg64) a, b = out(reg64) b, p = in(reg64) p) };
    (a, b)
}
/// # Safety
/// `p` must be 16-byte aligned and writable for 16 bytes.
#[inline(always)]
unsafe fn st16(p: *mut u8, v: (u64, u64)) {
    // SAFETY: one 16-byte store to the caller's aligned, writable 16 bytes.
    unsafe { asm!("st.v2.u64 [{p}], {{{a}, {b}}};", a = in(reg64) v.0, b = in(reg64) v.1, p = in(reg64) p) };
}

/// Copies `units` 16-byte units, four loads in flight per thread before the stores.
///
/// # Safety
/// As `copy16_deep`.
#[inline(always)]
unsafe fn copy16(dst: *mut u8, src: *const u8, units: usize, rank: usize, size: usize) {
    let mut k = rank;
    // SAFETY: every unit accessed is below `units` (k + 3 * size < units in the first loop, k < units
    // in the second) of the caller's 16-byte aligned ranges.
    unsafe {
        while k + 3 * size < units {
            let a = ld16(src.add(16 * k));
            let b = ld16(src.add(16 * (k + size)));
            let c = ld16(src.add(16 * (k + 2 * size)));
            let d = ld16(src.add(16 * (k + 3 * size)));
            st16(dst.add(16 * k), a);
            st16(dst.add(16 * (k + size)), b);
            st16(dst.add(16 * (k + 2 * size)), c);
            st16(dst.add(16 * (k + 3 * size)), d);
            k += 4 * size;
        }
        while k < units {
            st16(dst.add(16 * k), ld16(src.add(16 * k)));
            k += size;
        }
    }
}

/// Prints what went wrong (device printf) and stops the kernel with a trap, so the host sees
/// `CUDA_ERROR_ILLEGAL_INSTRUCTION` / launch failure instead of memory written elsewhere.
#[cold]
#[inline]
pub fn fail(f: Failure) -> ! {
    if let Problem::Nic { syndrome, vendor, opcode } = f.problem {
        let args = NicArgs {
            my_pe: state_u32(Field::MY_PE) as i32,
            call: f.call.as_ptr(),
            what: f.problem.text().as_ptr(),
            op: rshmem_ibgda::mlx5::opcode::name(opcode).as_ptr(),
            pe: f.pe,
            syndrome: syndrome as u32,
            vendor: vendor as u32,
            index: f.addr as u32,
            block: block_index(),
            thread: block_rank(),
        };
        // SAFETY: as below, for NicArgs' fields (int, three pointers, int, four unsigned ints, one more).
        unsafe {
            nvptx::vprintf(
                c"rshmem: PE %d: %s: %s (%s to PE %d: syndrome 0x%x, vendor syndrome 0x%x, WQE index %u; block %u thread %u)\n".as_ptr().cast(),
                &args as *const NicArgs as *const core::ffi::c_void,
            );
            nvptx::trap()
        }
    }
    let args = FailArgs {
        my_pe: state_u32(Field::MY_PE) as i32,
        call: f.call.as_ptr(),
        what: f.problem.text().as_ptr(),
        pe: f.pe,
        addr: f.addr,
        len: f.len,
        block: block_index(),
        thread: block_rank(),
    };
    // SAFETY: the format string is NUL-terminated and its conversions match FailArgs' fields in order
    // and alignment (int, two pointers, int, two 64-bit ints, two unsigned ints); trap never returns.
    unsafe {
        nvptx::vprintf(
            c"rshmem: PE %d: %s: %s (target PE %d, address 0x%llx, %llu bytes; block %u thread %u)\n".as_ptr().cast(),
            &args as *const FailArgs as *const core::ffi::c_void,
        );
        nvptx::trap()
    }
}

/// The argument block of a NIC error's message, in the order of its format string.
#[repr(C)]
struct NicArgs {
    my_pe: i32,
    call: *const u8,
    what: *const u8,
    op: *const u8,
    pe: i32,
    syndrome: u32,
    vendor: u32,
    index: u32,
    block: u32,
    thread: u32,
}

/// The argument block in the order of the format string (vprintf reads it field by field, each at its
/// natural alignment).
#[repr(C)]
struct FailArgs {
    my_pe: i32,
    call: *const u8,
    what: *const u8,
    pe: i32,
    addr: u64,
    len: u64,
    block: u32,
    thread: u32,
}
