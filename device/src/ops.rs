//! The device API, written once for both backends on top of `arch`'s primitives.
//!
//! Ordering rules (design.md, "Memory ordering"): peers are other GPUs (or other processes), so every
//! store that publishes data (signals, barrier flags, `p`) is a system-scope strong store, every wait is
//! a system-scope acquire load, and `fence`/`quiet` are `fence.sc.sys`. Bulk data moves with plain
//! (weak) vector accesses, published by a fence before the flag.

use crate::arch;
use crate::remote::proxy::amo as code;
use crate::remote::wait::idle;
use crate::remote;
use crate::route::{check_local, fail, locate, state};
use crate::state::*;
use crate::types::{Problem, Rmw, Sig};
use core::ptr;

// The vocabulary of the API's signatures, defined below this layer (`types`, `route`) and re-exported
// here for the paths `ops::Scope` etc. (and the crate root's `pub use ops::*`).
pub use crate::route::translate;
pub use crate::types::{Amo, AmoBits, AmoInt, Scope};

/// The bits of a value of at most 8 bytes, zero-extended (for the remote arm of `p`).
#[inline(always)]
fn to_bits<T: Copy>(v: T) -> u64 {
    const { assert!(core::mem::size_of::<T>() <= 8) };
    let mut b = 0u64;
    // SAFETY: T is Copy and at most 8 bytes (asserted); both ranges are valid and disjoint.
    unsafe { ptr::copy_nonoverlapping(&v as *const T as *const u8, &mut b as *mut u64 as *mut u8, core::mem::size_of::<T>()) };
    b
}
/// The inverse of `to_bits`.
///
/// # Safety
/// The low `size_of::<T>()` bytes of `b` must be a valid `T` (they came from a `T` in the heap).
#[inline(always)]
unsafe fn from_bits<T: Copy>(b: u64) -> T {
    const { assert!(core::mem::size_of::<T>() <= 8) };
    // SAFETY: at least size_of::<T>() readable bytes (asserted); validity is the caller's promise.
    unsafe { ptr::read_unaligned(&b as *const u64 as *const T) }
}

// ---------------------------------------------------------------- PE queries

/// This PE's number in the job, `0..n_pes()` (`nvshmem_my_pe`). Stops the PE, naming the call,
/// when rshmem is not initialized.
#[inline]
pub fn my_pe() -> i32 {
    state("rshmem_my_pe\0").my_pe()
}
/// Number of PEs in the job (`nvshmem_n_pes`). Stops the PE, naming the call, when rshmem is not
/// initialized.
#[inline]
pub fn n_pes() -> i32 {
    state("rshmem_n_pes\0").n_pes()
}
/// Direct pointer to `dest` on `pe` when loads/stores reach it (same node), else null.
pub fn ptr<T>(dest: *const T, pe: i32) -> *mut T {
    let s = state("rshmem_ptr\0");
    let off = (dest as usize).wrapping_sub(s.heap_base() as usize);
    if pe < 0 || pe >= s.n_pes() || off >= s.heap_size() as usize {
        return ptr::null_mut();
    }
    let base = s.peer_base(pe as usize) as usize;
    if base == 0 { ptr::null_mut() } else { (base + off) as *mut T }
}

// ---------------------------------------------------------------- RMA

/// Stores one element into `dst` on `pe`.
///
/// # Safety
/// `dst` must be a symmetric address of a `T` (checked unless checks are off).
#[inline(always)]
pub unsafe fn p<T: Copy>(dst: *mut T, value: T, pe: i32) {
    let call = "rshmem_p\0";
    let (r, mapped) = locate(call, dst as usize, core::mem::size_of::<T>(), pe);
    if !mapped {
        // SAFETY: `dst` is a symmetric address of a `T` (checked by `locate`, else the caller's
        // contract).
        return unsafe { remote::put_inline(call, dst as usize, core::mem::size_of::<T>(), to_bits(value), pe) };
    }
    // SAFETY: `r` is `dst`'s mapping on `pe` (`locate`; the address is checked, else the caller's
    // contract); a volatile store is a strong (relaxed, system-scope) store on the GPU, so a later
    // fence orders it.
    unsafe { ptr::write_volatile(r as *mut T, value) }
}

/// Loads one element from `src` on `pe`.
///
/// # Safety
/// `src` must be a symmetric address of a `T`.
#[inline(always)]
pub unsafe fn g<T: Copy>(src: *const T, pe: i32) -> T {
    let call = "rshmem_g\0";
    let (r, mapped) = locate(call, src as usize, core::mem::size_of::<T>(), pe);
    if !mapped {
        // SAFETY: `src` is a symmetric address of a `T` (checked by `locate`, else the caller's
        // contract), so the bytes fetched from it are a valid `T`.
        return unsafe { from_bits(remote::get_inline(call, src as usize, core::mem::size_of::<T>(), pe)) };
    }
    // A weak load, as NVSHMEM's: on GPUs it may be served from L1 until this thread's next acquire
    // (wait, barrier, fence), which is what the memory model allows for a get of data not
    // synchronized since. The compiler fence makes every call load (never hoisted out of a loop or
    // merged with an earlier call), so a loop on `g` still makes progress on the CPU backend, and on
    // GPUs as soon as the line leaves L1; `atomic_fetch` or `wait_until` are the calls for polling.
    arch::compiler_barrier();
    // SAFETY: as in `p`: `r` is `src`'s mapping on `pe`.
    unsafe { ptr::read(r as *const T) }
}

/// Copies `bytes` from local `src` to symmetric `dst` on `pe`, the work split over `scope`'s threads.
///
/// # Safety
/// `dst` symmetric, `src` readable for `bytes`; with Warp/Block scope every thread of the group calls.
#[inline(always)]
pub unsafe fn putmem_scoped(scope: Scope, dst: *mut u8, src: *const u8, bytes: usize, pe: i32, call: &'static str) {
    // SAFETY: the caller's contract (a blocking put).
    unsafe { put_scoped(scope, dst, src, bytes, pe, call, true) }
}

/// `putmem_scoped`, blocking or not (`_nbi`: a remote put only posts; P2P stores are the same).
///
/// # Safety
/// As `putmem_scoped`; for a non-blocking put, `src` must stay unchanged until the next quiet.
#[inline(always)]
pub unsafe fn put_scoped(scope: Scope, dst: *mut u8, src: *const u8, bytes: usize, pe: i32, call: &'static str, blocking: bool) {
    let (r, mapped) = locate(call, dst as usize, bytes, pe);
    if !mapped {
        // SAFETY: the caller's contract (`dst` checked by `locate`).
        return unsafe { remote::put(scope, call, dst as usize, src, bytes, pe, blocking, None) };
    }
    // SAFETY: `r` is `dst`'s mapping on `pe`, writable for `bytes` (`locate`), `src` readable for
    // `bytes` (the caller's contract); a local buffer and a symmetric one do not overlap; every thread
    // of the scope calls with the same arguments (the caller's contract).
    unsafe { arch::copy(r as *mut u8, src, bytes, scope.rank(), scope.size()) };
    scope.sync();
}

/// Copies `bytes` from symmetric `src` on `pe` to local `dst`.
///
/// # Safety
/// As `putmem_scoped`, with the roles of the buffers swapped.
#[inline(always)]
pub unsafe fn getmem_scoped(scope: Scope, dst: *mut u8, src: *const u8, bytes: usize, pe: i32, call: &'static str) {
    // SAFETY: the caller's contract (a blocking get).
    unsafe { get_scoped(scope, dst, src, bytes, pe, call, true) }
}

/// `getmem_scoped`, blocking or not (`_nbi`: a remote get only posts; `dst` is valid after quiet).
///
/// # Safety
/// As `getmem_scoped`.
#[inline(always)]
pub unsafe fn get_scoped(scope: Scope, dst: *mut u8, src: *const u8, bytes: usize, pe: i32, call: &'static str, blocking: bool) {
    let (r, mapped) = locate(call, src as usize, bytes, pe);
    if !mapped {
        // SAFETY: the caller's contract (`src` checked by `locate`).
        return unsafe { remote::get(scope, call, dst, src as usize, bytes, pe, blocking) };
    }
    // SAFETY: `r` is `src`'s mapping on `pe`, readable for `bytes` (`locate`), `dst` writable for
    // `bytes` (the caller's contract); as in `put_scoped`.
    unsafe { arch::copy(dst, r as *const u8, bytes, scope.rank(), scope.size()) };
    scope.sync();
}

macro_rules! rma_fns {
    ($($name:ident, $scope:expr, $dir:ident, $blocking:expr, $call:literal;)*) => {$(
        /// # Safety
        /// See `putmem_scoped` / `getmem_scoped`.
        #[inline(always)]
        pub unsafe fn $name(dst: *mut u8, src: *const u8, bytes: usize, pe: i32) {
            // SAFETY: the caller's contract, which is the scoped call's.
            unsafe { $dir($scope, dst, src, bytes, pe, concat!($call, "\0"), $blocking) }
        }
    )*};
}
rma_fns! {
    putmem, Scope::Thread, put_scoped, true, "rshmem_putmem";
    putmem_nbi, Scope::Thread, put_scoped, false, "rshmem_putmem_nbi";
    putmem_warp, Scope::Warp, put_scoped, true, "rshmem_putmem_warp";
    putmem_nbi_warp, Scope::Warp, put_scoped, false, "rshmem_putmem_nbi_warp";
    putmem_block, Scope::Block, put_scoped, true, "rshmem_putmem_block";
    putmem_nbi_block, Scope::Block, put_scoped, false, "rshmem_putmem_nbi_block";
    getmem, Scope::Thread, get_scoped, true, "rshmem_getmem";
    getmem_nbi, Scope::Thread, get_scoped, false, "rshmem_getmem_nbi";
    getmem_warp, Scope::Warp, get_scoped, true, "rshmem_getmem_warp";
    getmem_nbi_warp, Scope::Warp, get_scoped, false, "rshmem_getmem_nbi_warp";
    getmem_block, Scope::Block, get_scoped, true, "rshmem_getmem_block";
    getmem_nbi_block, Scope::Block, get_scoped, false, "rshmem_getmem_nbi_block";
}

/// Typed put of `nelems` elements.
///
/// # Safety
/// See `putmem_scoped`.
#[inline(always)]
pub unsafe fn put<T>(dst: *mut T, src: *const T, nelems: usize, pe: i32) {
    // SAFETY: the caller's contract, for the `nelems` elements' bytes.
    unsafe { putmem_scoped(Scope::Thread, dst as *mut u8, src as *const u8, nelems * core::mem::size_of::<T>(), pe, "rshmem_put\0") }
}
/// Typed get of `nelems` elements.
///
/// # Safety
/// See `getmem_scoped`.
#[inline(always)]
pub unsafe fn get<T>(dst: *mut T, src: *const T, nelems: usize, pe: i32) {
    // SAFETY: the caller's contract, for the `nelems` elements' bytes.
    unsafe { getmem_scoped(Scope::Thread, dst as *mut u8, src as *const u8, nelems * core::mem::size_of::<T>(), pe, "rshmem_get\0") }
}

// ---------------------------------------------------------------- ordering

/// Orders this thread's earlier puts/AMOs to each PE before its later ones to the same PE. P2P: the
/// fence. Remote engine: a FENCE request, after which the engine applies every request to a PE after
/// every earlier one to it (see `crate::remote`). IBGDA: fenced NOPs on the thread's QPs
/// (`remote::ibgda`). Stops the PE, naming the call, when rshmem is not initialized (before init,
/// after finalize): the remote part reads the state's addresses.
#[inline(always)]
pub fn fence() {
    let (magic, ibgda) = arch::state_u64_pair(Field::MAGIC, Field::IBGDA);
    let channels = arch::state_u64(Field::PROXY_CHANNELS);
    if magic != STATE_MAGIC {
        fail("rshmem_fence\0", Problem::NotInitialized, -1, 0, 0);
    }
    arch::fence_sc_after(ibgda | channels);
    if ibgda != 0 || channels != 0 {
        remote::fence();
    }
}
/// Completes all of this thread's outstanding puts, gets and AMOs: P2P stores become visible
/// system-wide (the fence); requests to remote PEs complete at their targets (the proxy's part,
/// taken only when this PE has a remote transport). Stops the PE, naming the call, when rshmem is not
/// initialized (before init, after finalize): the remote part reads the state's addresses.
#[inline(always)]
pub fn quiet() {
    let (magic, proxy) = arch::state_u64_pair(Field::MAGIC, Field::PROXY_RING_HEADER);
    if magic != STATE_MAGIC {
        fail("rshmem_quiet\0", Problem::NotInitialized, -1, 0, 0);
    }
    arch::fence_sc_after(proxy);
    if proxy != 0 {
        remote::quiet();
    }
}

// ---------------------------------------------------------------- atomics

/// Where the AMO on `dst` at `pe` operates in this process (checked as every RMA address is), and
/// whether it is mapped here. The AMO that uses the address needs `dst` to be a naturally aligned `T`
/// of a live symmetric allocation.
#[inline(always)]
fn amo_target<T>(call: &'static str, dst: *const T, pe: i32) -> (*mut T, bool) {
    let (r, mapped) = locate(call, dst as usize, core::mem::size_of::<T>(), pe);
    (r as *mut T, mapped)
}

/// The remote arm of an AMO on `dst` at `pe` (not mapped here): AMO `code` through the PE's transport.
/// `fetch`: wait for and return the old value.
///
/// # Safety
/// As the AMO calls: `dst` a symmetric, naturally aligned `T` (checked by `translate`).
#[inline(always)]
unsafe fn amo_remote<T: Amo>(call: &'static str, dst: *const T, code: u16, value: T::Bits, compare: T::Bits, pe: i32, fetch: bool) -> T {
    let width = core::mem::size_of::<T::Bits>();
    // SAFETY: `dst` is a checked, naturally aligned symmetric address of `width` bytes (the caller's
    // contract).
    let old = unsafe { remote::amo(call, dst as usize, width, code, value.to_u64(), compare.to_u64(), pe, fetch) };
    T::from_bits(T::Bits::from_u64(old))
}

macro_rules! amo_rmw {
    ($($fetch:ident, $plain:ident, $op:expr, $fcode:ident, $pcode:ident, $call:literal;)*) => {$(
        /// Atomic read-modify-write on `dst` at `pe`; returns the old value.
        ///
        /// # Safety
        /// `dst` must be a symmetric, naturally aligned `T`.
        #[inline(always)]
        pub unsafe fn $fetch<T: AmoInt>(dst: *mut T, value: T, pe: i32) -> T {
            let call = concat!("rshmem_atomic_fetch_", $call, "\0");
            let (r, mapped) = amo_target(call, dst, pe);
            // SAFETY: `dst` is a naturally aligned `T` of a live symmetric allocation (the caller's
            // contract; its range checked by `amo_target`), which the AMO API accesses only
            // atomically; `r` is its mapping on `pe` when mapped.
            unsafe {
                if !mapped {
                    return amo_remote(call, dst, code::$fcode, value.to_bits(), value.to_bits(), pe, true);
                }
                T::from_bits(T::Bits::rmw($op, r as *mut T::Bits, value.to_bits()))
            }
        }
        /// Same without returning the old value.
        ///
        /// # Safety
        /// As the fetching form.
        #[inline(always)]
        pub unsafe fn $plain<T: AmoInt>(dst: *mut T, value: T, pe: i32) {
            let call = concat!("rshmem_atomic_", $call, "\0");
            let (r, mapped) = amo_target(call, dst, pe);
            // SAFETY: as in the fetching form.
            unsafe {
                if !mapped {
                    amo_remote::<T>(call, dst, code::$pcode, value.to_bits(), value.to_bits(), pe, false);
                    return;
                }
                T::Bits::rmw($op, r as *mut T::Bits, value.to_bits());
            }
        }
    )*};
}
amo_rmw! {
    atomic_fetch_add, atomic_add, Rmw::Add, FETCH_ADD, ADD, "add";
    atomic_fetch_and, atomic_and, Rmw::And, FETCH_AND, AND, "and";
    atomic_fetch_or, atomic_or, Rmw::Or, FETCH_OR, OR, "or";
    atomic_fetch_xor, atomic_xor, Rmw::Xor, FETCH_XOR, XOR, "xor";
}

/// # Safety
/// `dst` must be a symmetric, naturally aligned `T`.
#[inline(always)]
pub unsafe fn atomic_fetch_inc<T: AmoInt>(dst: *mut T, pe: i32) -> T {
    let call = "rshmem_atomic_fetch_inc\0";
    let (r, mapped) = amo_target(call, dst, pe);
    // SAFETY: `dst` is a naturally aligned `T` of a live symmetric allocation (the caller's contract;
    // its range checked by `amo_target`), which the AMO API accesses only atomically; `r` is its
    // mapping on `pe` when mapped.
    unsafe {
        if !mapped {
            return amo_remote(call, dst, code::FETCH_ADD, T::Bits::one(), T::Bits::one(), pe, true);
        }
        T::from_bits(T::Bits::rmw(Rmw::Add, r as *mut T::Bits, T::Bits::one()))
    }
}
/// # Safety
/// As `atomic_fetch_inc`.
#[inline(always)]
pub unsafe fn atomic_inc<T: AmoInt>(dst: *mut T, pe: i32) {
    let call = "rshmem_atomic_inc\0";
    let (r, mapped) = amo_target(call, dst, pe);
    // SAFETY: `dst` is a naturally aligned `T` of a live symmetric allocation (the caller's contract;
    // its range checked by `amo_target`), which the AMO API accesses only atomically; `r` is its
    // mapping on `pe` when mapped.
    unsafe {
        if !mapped {
            amo_remote::<T>(call, dst, code::ADD, T::Bits::one(), T::Bits::one(), pe, false);
            return;
        }
        T::Bits::rmw(Rmw::Add, r as *mut T::Bits, T::Bits::one());
    }
}
/// # Safety
/// `dst` must be a symmetric, naturally aligned `T`.
#[inline(always)]
pub unsafe fn atomic_swap<T: Amo>(dst: *mut T, value: T, pe: i32) -> T {
    let call = "rshmem_atomic_swap\0";
    let (r, mapped) = amo_target(call, dst, pe);
    // SAFETY: `dst` is a naturally aligned `T` of a live symmetric allocation (the caller's contract;
    // its range checked by `amo_target`), which the AMO API accesses only atomically; `r` is its
    // mapping on `pe` when mapped.
    unsafe {
        if !mapped {
            return amo_remote(call, dst, code::SWAP, value.to_bits(), value.to_bits(), pe, true);
        }
        T::from_bits(T::Bits::rmw(Rmw::Swap, r as *mut T::Bits, value.to_bits()))
    }
}
/// # Safety
/// As `atomic_swap`.
#[inline(always)]
pub unsafe fn atomic_compare_swap<T: Amo>(dst: *mut T, cond: T, value: T, pe: i32) -> T {
    let call = "rshmem_atomic_compare_swap\0";
    let (r, mapped) = amo_target(call, dst, pe);
    // SAFETY: `dst` is a naturally aligned `T` of a live symmetric allocation (the caller's contract;
    // its range checked by `amo_target`), which the AMO API accesses only atomically; `r` is its
    // mapping on `pe` when mapped.
    unsafe {
        if !mapped {
            return amo_remote(call, dst, code::COMPARE_SWAP, value.to_bits(), cond.to_bits(), pe, true);
        }
        T::from_bits(T::Bits::cas(r as *mut T::Bits, cond.to_bits(), value.to_bits()))
    }
}
/// # Safety
/// As `atomic_swap`.
#[inline(always)]
pub unsafe fn atomic_fetch<T: Amo>(src: *const T, pe: i32) -> T {
    let call = "rshmem_atomic_fetch\0";
    let (r, mapped) = amo_target(call, src, pe);
    // SAFETY: `src` is a naturally aligned `T` of a live symmetric allocation (the caller's contract;
    // its range checked by `amo_target`), which the AMO API accesses only atomically; `r` is its
    // mapping on `pe` when mapped.
    unsafe {
        if !mapped {
            let zero = T::Bits::from_u64(0);
            return amo_remote(call, src, code::FETCH, zero, zero, pe, true);
        }
        T::from_bits(T::Bits::load(r as *const T::Bits))
    }
}
/// # Safety
/// As `atomic_swap`.
#[inline(always)]
pub unsafe fn atomic_set<T: Amo>(dst: *mut T, value: T, pe: i32) {
    let call = "rshmem_atomic_set\0";
    let (r, mapped) = amo_target(call, dst, pe);
    // SAFETY: `dst` is a naturally aligned `T` of a live symmetric allocation (the caller's contract;
    // its range checked by `amo_target`), which the AMO API accesses only atomically; `r` is its
    // mapping on `pe` when mapped.
    unsafe {
        if !mapped {
            amo_remote::<T>(call, dst, code::SET, value.to_bits(), value.to_bits(), pe, false);
            return;
        }
        T::Bits::store(r as *mut T::Bits, value.to_bits())
    }
}

// ---------------------------------------------------------------- point-to-point synchronization

/// Types that can be waited on (wait_until / test): loaded with acquire, compared in their own type.
pub trait Wait: Copy + PartialOrd {
    /// Acquire load.
    ///
    /// # Safety
    /// `p` must be non-null, aligned for `Self` and point to memory mapped in this process that, while
    /// this runs, is accessed only atomically (the arch width ops' contract).
    unsafe fn load_acquire(p: *const Self) -> Self;
}
macro_rules! wait_types {
    ($($t:ty => $u:ty, $ld:ident;)*) => {$(
        impl Wait for $t {
            #[inline(always)]
            unsafe fn load_acquire(p: *const $t) -> $t {
                // SAFETY: the method's contract is the arch load's, for a value of the same width.
                unsafe { arch::$ld(p as *const $u) as $t }
            }
        }
    )*};
}
wait_types! {
    i16 => u16, load_acquire_u16; u16 => u16, load_acquire_u16;
    i32 => u32, load_acquire_u32; u32 => u32, load_acquire_u32;
    i64 => u64, load_acquire_u64; u64 => u64, load_acquire_u64;
    isize => u64, load_acquire_u64; usize => u64, load_acquire_u64;
}

#[inline(always)]
fn check_cmp(call: &'static str, cmp: i32) {
    if !(CMP_EQ..=CMP_GE).contains(&cmp) {
        fail(call, Problem::BadCmp, cmp, 0, 0);
    }
}

#[inline(always)]
fn compare<T: PartialOrd>(cmp: i32, a: T, b: T) -> bool {
    match cmp {
        CMP_EQ => a == b,
        CMP_NE => a != b,
        CMP_GT => a > b,
        CMP_LE => a <= b,
        CMP_LT => a < b,
        _ => a >= b,
    }
}

/// Spins until `ivar` compares true; returns the value that did.
///
/// # Safety
/// `ivar` must be a naturally aligned `T` of a live symmetric allocation of this PE (that it lies in
/// the heap is checked), written by others only atomically.
#[inline(always)]
unsafe fn spin_until<T: Wait>(call: &'static str, ivar: *const T, cmp: i32, value: T) -> T {
    check_cmp(call, cmp);
    check_local(call, ivar as usize, core::mem::size_of::<T>());
    let mut spins = 0u64;
    loop {
        // SAFETY: a naturally aligned `T` of a live allocation of this PE's heap, which others write
        // only atomically (the caller's contract).
        let v = unsafe { T::load_acquire(ivar) };
        if compare(cmp, v, value) {
            return v;
        }
        // What is waited for may come from another node: this thread also applies what arrives
        // when no apply kernel runs (remote::wait::idle).
        idle(&mut spins, call);
    }
}

/// Waits until the local symmetric `ivar` compares true against `value` (`cmp` is one of CMP_*).
///
/// # Safety
/// `ivar` must be a symmetric, naturally aligned `T` of this PE.
#[inline(always)]
pub unsafe fn wait_until<T: Wait>(ivar: *const T, cmp: impl Into<i32>, value: T) {
    let cmp = cmp.into();
    // SAFETY: the caller's contract (written by others only atomically: the API's stores and AMOs).
    unsafe { spin_until("rshmem_wait_until\0", ivar, cmp, value) };
}
/// Tests once whether `ivar` compares true against `value`.
///
/// # Safety
/// As `wait_until`.
#[inline(always)]
pub unsafe fn test<T: Wait>(ivar: *const T, cmp: impl Into<i32>, value: T) -> bool {
    let cmp = cmp.into();
    let call = "rshmem_test\0";
    check_cmp(call, cmp);
    check_local(call, ivar as usize, core::mem::size_of::<T>());
    // SAFETY: as in `spin_until` (the caller's contract).
    compare(cmp, unsafe { T::load_acquire(ivar) }, value)
}

// ---------------------------------------------------------------- signals

/// Sets or adds to the signal word `sig` on `pe`; with `release`, after a release fence (what
/// put-with-signal needs: the data before the signal). A signal operation alone is an atomic update
/// with no ordering against this thread's earlier puts (OpenSHMEM's and NVSHMEM's `signal_op`: a
/// program that needs it calls `fence` first), so on a mapped peer it is one store or atomic: the
/// system-scope fence is what made `shmem_signal_ping_pong_latency` 2.1 x NVSHMEM's round trip on
/// 2 x H100 (6.67 against 3.17 us, bench/results/2026-11-27-h100x2.md, call E).
///
/// # Safety
/// `sig` must be an 8-byte-aligned u64 of a live symmetric allocation (the range is checked), accessed
/// only atomically.
#[inline(always)]
unsafe fn signal_update(call: &'static str, sig: *mut u64, value: u64, op: i32, pe: i32, release: bool) {
    let (r, mapped) = locate(call, sig as usize, 8, pe);
    let r = r as *mut u64;
    if !mapped {
        if op != SIGNAL_SET && op != SIGNAL_ADD {
            fail(call, Problem::BadSignalOp, pe, sig as usize, 8);
        }
        // Posted after this thread's earlier requests, so applied after them at the target.
        // SAFETY: `sig` is a checked symmetric u64 (`locate`, else the caller's contract).
        return unsafe { remote::signal(call, sig as usize, value, op, pe) };
    }
    if release {
        // Everything this thread (and, after a group sync, its group) wrote before is visible to
        // whoever observes the signal.
        arch::fence_acq_rel();
    }
    match op {
        // SAFETY: `r` is the mapping on `pe` of an 8-aligned u64 of a live symmetric allocation, accessed
        // only atomically (the caller's contract; the range checked by `locate`).
        SIGNAL_SET => unsafe { arch::store_relaxed_u64(r, value) },
        SIGNAL_ADD => {
            // SAFETY: as above.
            unsafe { arch::rmw_u64(Rmw::Add, r, value) };
        }
        _ => fail(call, Problem::BadSignalOp, pe, sig as usize, 8),
    }
}

/// Atomically updates the signal `sig` on `pe` (SIGNAL_SET or SIGNAL_ADD). Not ordered after this
/// thread's earlier puts: `fence` first, or `putmem_signal`, when the signal must follow data.
///
/// # Safety
/// `sig` must be a symmetric u64.
#[inline(always)]
pub unsafe fn signal_op(sig: *mut u64, value: u64, op: i32, pe: i32) {
    // SAFETY: the caller's contract (a signal word: an aligned u64 accessed only atomically).
    unsafe { signal_update("rshmem_signal_op\0", sig, value, op, pe, false) }
}

/// Puts `bytes` and then updates `sig` on `pe`; the signal is never visible before the data. A remote
/// put-with-signal is one request: the target applies the data, then the signal. `blocking`: return
/// once `src` may be reused (`_nbi`: it must stay unchanged until the next quiet).
///
/// # Safety
/// As `putmem_scoped`; `sig` a symmetric u64.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn putmem_signal_scoped(
    scope: Scope,
    dst: *mut u8,
    src: *const u8,
    bytes: usize,
    sig: *mut u64,
    value: u64,
    op: i32,
    pe: i32,
    call: &'static str,
    blocking: bool,
) {
    if op != SIGNAL_SET && op != SIGNAL_ADD {
        fail(call, Problem::BadSignalOp, pe, sig as usize, 8);
    }
    let (r, mapped) = locate(call, dst as usize, bytes, pe);
    if !mapped {
        // The signal word is checked like every symmetric address.
        locate(call, sig as usize, 8, pe);
        let s = Sig { local: sig as usize, value, op };
        // SAFETY: the caller's contract (`dst` and `sig` checked by `locate`).
        return unsafe { remote::put(scope, call, dst as usize, src, bytes, pe, blocking, Some(s)) };
    }
    // SAFETY: as in `put_scoped`.
    unsafe { arch::copy(r as *mut u8, src, bytes, scope.rank(), scope.size()) };
    scope.sync();
    if scope.rank() == 0 {
        // SAFETY: `sig` is a symmetric u64 (the caller's contract).
        unsafe { signal_update(call, sig, value, op, pe, true) };
    }
    scope.sync();
}

macro_rules! put_signal_fns {
    ($($name:ident, $scope:expr, $blocking:expr, $call:literal;)*) => {$(
        /// # Safety
        /// See `putmem_signal_scoped`.
        #[inline(always)]
        pub unsafe fn $name(dst: *mut u8, src: *const u8, bytes: usize, sig: *mut u64, value: u64, op: i32, pe: i32) {
            // SAFETY: the caller's contract, which is the scoped call's.
            unsafe { putmem_signal_scoped($scope, dst, src, bytes, sig, value, op, pe, concat!($call, "\0"), $blocking) }
        }
    )*};
}
put_signal_fns! {
    putmem_signal, Scope::Thread, true, "rshmem_putmem_signal";
    putmem_signal_nbi, Scope::Thread, false, "rshmem_putmem_signal_nbi";
    putmem_signal_warp, Scope::Warp, true, "rshmem_putmem_signal_warp";
    putmem_signal_nbi_warp, Scope::Warp, false, "rshmem_putmem_signal_nbi_warp";
    putmem_signal_block, Scope::Block, true, "rshmem_putmem_signal_block";
    putmem_signal_nbi_block, Scope::Block, false, "rshmem_putmem_signal_nbi_block";
}

/// Waits until the local signal `sig` compares true against `value`; returns the signal's value.
///
/// # Safety
/// `sig` must be a symmetric u64 of this PE.
#[inline(always)]
pub unsafe fn signal_wait_until(sig: *const u64, cmp: impl Into<i32>, value: u64) -> u64 {
    let cmp = cmp.into();
    // SAFETY: the caller's contract (a signal word: an aligned u64 written only atomically).
    unsafe { spin_until("rshmem_signal_wait_until\0", sig, cmp, value) }
}
/// Reads the local signal `sig`.
///
/// # Safety
/// As `signal_wait_until`.
#[inline(always)]
pub unsafe fn signal_fetch(sig: *const u64) -> u64 {
    check_local("rshmem_signal_fetch\0", sig as usize, 8);
    // SAFETY: as in `signal_wait_until`.
    unsafe { arch::load_acquire_u64(sig) }
}
