//! C ABI of the device library (GPU only): the `rshmem_*` device functions that `rshmem.h` declares and
//! that nvcc-compiled kernels link against (`-rdc=true`). Typed C entry points (`nvshmem_int_p`,
//! `nvshmem_float_put`, ...) are inline wrappers in the headers over these sized ones, so each
//! operation exists once here.

use crate::coll;
use crate::ops;
use crate::point;
use crate::types::Scope;
use core::ffi::c_void;

// ---------------------------------------------------------------- queries
/// This PE's number (`nvshmem_my_pe`).
#[no_mangle]
pub extern "C" fn rshmem_my_pe() -> i32 {
    ops::my_pe()
}
/// The number of PEs of the job (`nvshmem_n_pes`).
#[no_mangle]
pub extern "C" fn rshmem_n_pes() -> i32 {
    ops::n_pes()
}
/// This PE's index in `team`, -1 if it is not a member or there is no such team
/// (`nvshmem_team_my_pe`).
#[no_mangle]
pub extern "C" fn rshmem_team_my_pe(team: i32) -> i32 {
    coll::team_my_pe(team)
}
/// The number of PEs of `team`, -1 if there is no such team (`nvshmem_team_n_pes`).
#[no_mangle]
pub extern "C" fn rshmem_team_n_pes(team: i32) -> i32 {
    coll::team_n_pes(team)
}
/// A pointer through which loads and stores reach symmetric `dest` on `pe`, or null when `pe`'s heap
/// is not mapped here (another node) or `dest`/`pe` is out of range (`nvshmem_ptr`).
#[no_mangle]
pub extern "C" fn rshmem_ptr(dest: *const c_void, pe: i32) -> *mut c_void {
    ops::ptr(dest, pe)
}

// ---------------------------------------------------------------- p / g by size
macro_rules! pg {
    ($($p:ident, $g:ident, $t:ty;)*) => {$(
        /// # Safety
        /// `dst` symmetric; checked.
        #[no_mangle]
        pub unsafe extern "C" fn $p(dst: *mut c_void, value: $t, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::p(dst as *mut $t, value, pe) }
        }
        /// # Safety
        /// `src` symmetric; checked.
        #[no_mangle]
        pub unsafe extern "C" fn $g(src: *const c_void, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::g(src as *const $t, pe) }
        }
    )*};
}
pg! {
    rshmem_p8, rshmem_g8, u8;
    rshmem_p16, rshmem_g16, u16;
    rshmem_p32, rshmem_g32, u32;
    rshmem_p64, rshmem_g64, u64;
}

// ---------------------------------------------------------------- put / get
macro_rules! rma {
    ($($name:ident => $f:ident;)*) => {$(
        /// # Safety
        /// See `ops::putmem_scoped` / `ops::getmem_scoped`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::$f(dst as *mut u8, src as *const u8, bytes, pe) }
        }
    )*};
}
rma! {
    rshmem_putmem => putmem; rshmem_putmem_nbi => putmem_nbi;
    rshmem_putmem_warp => putmem_warp; rshmem_putmem_nbi_warp => putmem_nbi_warp;
    rshmem_putmem_block => putmem_block; rshmem_putmem_nbi_block => putmem_nbi_block;
    rshmem_getmem => getmem; rshmem_getmem_nbi => getmem_nbi;
    rshmem_getmem_warp => getmem_warp; rshmem_getmem_nbi_warp => getmem_nbi_warp;
    rshmem_getmem_block => getmem_block; rshmem_getmem_nbi_block => getmem_nbi_block;
}

// ---------------------------------------------------------------- atomics by size
macro_rules! amo {
    ($($t:ty: $fadd:ident $add:ident $fand:ident $and:ident $for:ident $or:ident $fxor:ident $xor:ident
        $finc:ident $inc:ident $swap:ident $cswap:ident $fetch:ident $set:ident;)*) => {$(
        /// # Safety
        /// `dst` symmetric and aligned (all AMOs below).
        #[no_mangle]
        pub unsafe extern "C" fn $fadd(d: *mut c_void, v: $t, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_fetch_add(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $add(d: *mut c_void, v: $t, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_add(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $fand(d: *mut c_void, v: $t, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_fetch_and(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $and(d: *mut c_void, v: $t, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_and(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $for(d: *mut c_void, v: $t, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_fetch_or(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $or(d: *mut c_void, v: $t, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_or(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $fxor(d: *mut c_void, v: $t, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_fetch_xor(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $xor(d: *mut c_void, v: $t, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_xor(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $finc(d: *mut c_void, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_fetch_inc(d as *mut $t, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $inc(d: *mut c_void, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_inc(d as *mut $t, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $swap(d: *mut c_void, v: $t, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_swap(d as *mut $t, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $cswap(d: *mut c_void, c: $t, v: $t, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_compare_swap(d as *mut $t, c, v, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $fetch(d: *const c_void, pe: i32) -> $t {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_fetch(d as *const $t, pe) }
        }
        /// # Safety
        /// As above: `d` symmetric and aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $set(d: *mut c_void, v: $t, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::atomic_set(d as *mut $t, v, pe) }
        }
    )*};
}
amo! {
    u32: rshmem_atomic_fetch_add32 rshmem_atomic_add32 rshmem_atomic_fetch_and32 rshmem_atomic_and32
         rshmem_atomic_fetch_or32 rshmem_atomic_or32 rshmem_atomic_fetch_xor32 rshmem_atomic_xor32
         rshmem_atomic_fetch_inc32 rshmem_atomic_inc32 rshmem_atomic_swap32 rshmem_atomic_compare_swap32
         rshmem_atomic_fetch32 rshmem_atomic_set32;
    u64: rshmem_atomic_fetch_add64 rshmem_atomic_add64 rshmem_atomic_fetch_and64 rshmem_atomic_and64
         rshmem_atomic_fetch_or64 rshmem_atomic_or64 rshmem_atomic_fetch_xor64 rshmem_atomic_xor64
         rshmem_atomic_fetch_inc64 rshmem_atomic_inc64 rshmem_atomic_swap64 rshmem_atomic_compare_swap64
         rshmem_atomic_fetch64 rshmem_atomic_set64;
}

// ---------------------------------------------------------------- wait / test (signedness matters)
macro_rules! wait {
    ($($t:ty: $w:ident $tst:ident;)*) => {$(
        /// # Safety
        /// `ivar` a symmetric variable of this PE.
        #[no_mangle]
        pub unsafe extern "C" fn $w(ivar: *const c_void, cmp: i32, v: $t) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::wait_until(ivar as *const $t, cmp, v) }
        }
        /// # Safety
        /// As above: `ivar` a symmetric variable of this PE, aligned for the type.
        #[no_mangle]
        pub unsafe extern "C" fn $tst(ivar: *const c_void, cmp: i32, v: $t) -> i32 {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::test(ivar as *const $t, cmp, v) as i32 }
        }
    )*};
}
wait! {
    i16: rshmem_wait_until_i16 rshmem_test_i16;
    u16: rshmem_wait_until_u16 rshmem_test_u16;
    i32: rshmem_wait_until_i32 rshmem_test_i32;
    u32: rshmem_wait_until_u32 rshmem_test_u32;
    i64: rshmem_wait_until_i64 rshmem_test_i64;
    u64: rshmem_wait_until_u64 rshmem_test_u64;
}

// ---------------------------------------------------------------- signals
macro_rules! put_signal {
    ($($name:ident => $scope:expr, $blocking:expr;)*) => {$(
        /// # Safety
        /// See `ops::putmem_signal_scoped`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(dst: *mut c_void, src: *const c_void, bytes: usize, sig: *mut u64, value: u64, op: i32, pe: i32) {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { ops::putmem_signal_scoped($scope, dst as *mut u8, src as *const u8, bytes, sig, value, op, pe, concat!(stringify!($name), "\0"), $blocking) }
        }
    )*};
}
put_signal! {
    rshmem_putmem_signal => Scope::Thread, true; rshmem_putmem_signal_nbi => Scope::Thread, false;
    rshmem_putmem_signal_warp => Scope::Warp, true; rshmem_putmem_signal_nbi_warp => Scope::Warp, false;
    rshmem_putmem_signal_block => Scope::Block, true; rshmem_putmem_signal_nbi_block => Scope::Block, false;
}
/// # Safety
/// `sig` a symmetric u64.
#[no_mangle]
pub unsafe extern "C" fn rshmem_signal_op(sig: *mut u64, value: u64, op: i32, pe: i32) {
    // SAFETY: the caller's contract (above) is the Rust call's.
    unsafe { ops::signal_op(sig, value, op, pe) }
}
/// # Safety
/// `sig` a symmetric u64 of this PE.
#[no_mangle]
pub unsafe extern "C" fn rshmem_signal_wait_until(sig: *const u64, cmp: i32, value: u64) -> u64 {
    // SAFETY: the caller's contract (above) is the Rust call's.
    unsafe { ops::signal_wait_until(sig, cmp, value) }
}
/// # Safety
/// `sig` a symmetric u64 of this PE.
#[no_mangle]
pub unsafe extern "C" fn rshmem_signal_fetch(sig: *const u64) -> u64 {
    // SAFETY: the caller's contract (above) is the Rust call's.
    unsafe { ops::signal_fetch(sig) }
}

// ---------------------------------------------------------------- strided put / get
macro_rules! strided {
    ($($put:ident, $get:ident, $scope:expr;)*) => {$(
        /// Strided put of `nelems` elements of `width` bytes: element i of local `src` (stride `sst`
        /// elements) to symmetric `dest` (stride `dst`) on `pe` (`point::strided`).
        ///
        /// # Safety
        /// `dest` symmetric (each element's range is checked), `src` readable at every element; at warp
        /// or block scope every thread of the group calls with the same arguments.
        #[no_mangle]
        pub unsafe extern "C" fn $put(dest: *mut c_void, src: *const c_void, dst: isize, sst: isize, nelems: usize, width: u32, pe: i32) {
            let op = point::Op { what: point::what::IPUT, width, pe, dest: dest as u64, aux: src as u64, n: nelems as u64, dst: dst as i64, sst: sst as i64, ..Default::default() };
            // SAFETY: the caller's contract (above) is `point::strided`'s.
            unsafe { point::strided(&op, $scope) }
        }
        /// Strided get: element i of symmetric `src` on `pe` (stride `sst`) to local `dest` (stride
        /// `dst`).
        ///
        /// # Safety
        /// As the put, with the roles of the buffers swapped.
        #[no_mangle]
        pub unsafe extern "C" fn $get(dest: *mut c_void, src: *const c_void, dst: isize, sst: isize, nelems: usize, width: u32, pe: i32) {
            let op = point::Op { what: point::what::IGET, width, pe, dest: dest as u64, aux: src as u64, n: nelems as u64, dst: dst as i64, sst: sst as i64, ..Default::default() };
            // SAFETY: as in the put.
            unsafe { point::strided(&op, $scope) }
        }
    )*};
}
strided! {
    rshmem_iputmem, rshmem_igetmem, Scope::Thread;
    rshmem_iputmem_warp, rshmem_igetmem_warp, Scope::Warp;
    rshmem_iputmem_block, rshmem_igetmem_block, Scope::Block;
}

// ---------------------------------------------------------------- ordering and barriers
/// Orders this thread's earlier puts and AMOs to each PE before its later ones to the same PE
/// (`nvshmem_fence`).
#[no_mangle]
pub extern "C" fn rshmem_fence() {
    ops::fence()
}
/// Completes all of this thread's outstanding puts, gets and AMOs (`nvshmem_quiet`).
#[no_mangle]
pub extern "C" fn rshmem_quiet() {
    ops::quiet()
}
/// Completes this PE's outstanding operations and waits for all PEs; one thread per PE calls it
/// (`nvshmem_barrier_all`).
#[no_mangle]
pub extern "C" fn rshmem_barrier_all() {
    coll::barrier_all()
}
/// Waits for all PEs without completing outstanding operations; one thread per PE calls it
/// (`nvshmem_sync_all`).
#[no_mangle]
pub extern "C" fn rshmem_sync_all() {
    coll::sync_all()
}
/// Block-scoped `rshmem_barrier_all`: every thread of one block per PE calls it
/// (`nvshmemx_barrier_all_block`).
#[no_mangle]
pub extern "C" fn rshmem_barrier_all_block() {
    coll::barrier_all_block()
}
/// Warp-scoped `rshmem_barrier_all`: every thread of one warp per PE calls it
/// (`nvshmemx_barrier_all_warp`).
#[no_mangle]
pub extern "C" fn rshmem_barrier_all_warp() {
    coll::barrier_all_warp()
}
/// Block-scoped `rshmem_sync_all`: every thread of one block per PE calls it
/// (`nvshmemx_sync_all_block`).
#[no_mangle]
pub extern "C" fn rshmem_sync_all_block() {
    coll::sync_all_block()
}
/// Warp-scoped `rshmem_sync_all`: every thread of one warp per PE calls it
/// (`nvshmemx_sync_all_warp`).
#[no_mangle]
pub extern "C" fn rshmem_sync_all_warp() {
    coll::sync_all_warp()
}

// ---------------------------------------------------------------- teams and collectives
// Each returns 0, as NVSHMEM's do: a failure (no such team, a PE that is not a member, a mismatched
// collective, a bad range) stops the PE with a message naming the call instead (`coll`).

/// Member `src_pe` of `src_team` as a member index of `dest_team`; -1 when either team does not
/// exist, `src_pe` is out of range, or that PE is not in `dest_team` (`nvshmem_team_translate_pe`).
#[no_mangle]
pub extern "C" fn rshmem_team_translate_pe(src_team: i32, src_pe: i32, dest_team: i32) -> i32 {
    coll::team_translate_pe(src_team, src_pe, dest_team)
}

macro_rules! team_sync {
    ($($name:ident => $scope:expr, $with_quiet:expr;)*) => {$(
        /// Every thread of the scope calls it (one scope per PE and team at a time).
        #[no_mangle]
        pub extern "C" fn $name(team: i32) -> i32 {
            // SAFETY: a synchronization touches only the team's words in the internal area, which the
            // runtime maps on every PE; the team is checked.
            unsafe { coll::team_sync_scoped($scope, team, $with_quiet, concat!(stringify!($name), "\0")) };
            0
        }
    )*};
}
team_sync! {
    rshmem_barrier => Scope::Thread, true; rshmem_barrier_warp => Scope::Warp, true;
    rshmem_barrier_block => Scope::Block, true;
    rshmem_team_sync => Scope::Thread, false; rshmem_team_sync_warp => Scope::Warp, false;
    rshmem_team_sync_block => Scope::Block, false;
}

macro_rules! broadcast {
    ($($name:ident => $scope:expr;)*) => {$(
        /// # Safety
        /// See `coll::broadcast` (`bytes` bytes; the ranges are checked).
        #[no_mangle]
        pub unsafe extern "C" fn $name(team: i32, dest: *mut c_void, src: *const c_void, bytes: usize, root: i32) -> i32 {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { coll::broadcast($scope, team, dest as *mut u8, src as *const u8, bytes, root, concat!(stringify!($name), "\0")) };
            0
        }
    )*};
}
broadcast! {
    rshmem_broadcastmem => Scope::Thread; rshmem_broadcastmem_warp => Scope::Warp;
    rshmem_broadcastmem_block => Scope::Block;
}

macro_rules! gather {
    ($($name:ident => $f:ident, $scope:expr;)*) => {$(
        /// # Safety
        /// See `coll::fcollect` / `coll::collect` / `coll::alltoall` (`bytes` bytes per member block;
        /// the ranges are checked).
        #[no_mangle]
        pub unsafe extern "C" fn $name(team: i32, dest: *mut c_void, src: *const c_void, bytes: usize) -> i32 {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { coll::$f($scope, team, dest as *mut u8, src as *const u8, bytes, concat!(stringify!($name), "\0")) };
            0
        }
    )*};
}
gather! {
    rshmem_fcollectmem => fcollect, Scope::Thread; rshmem_fcollectmem_warp => fcollect, Scope::Warp;
    rshmem_fcollectmem_block => fcollect, Scope::Block;
    rshmem_collectmem => collect, Scope::Thread; rshmem_collectmem_warp => collect, Scope::Warp;
    rshmem_collectmem_block => collect, Scope::Block;
    rshmem_alltoallmem => alltoall, Scope::Thread; rshmem_alltoallmem_warp => alltoall, Scope::Warp;
    rshmem_alltoallmem_block => alltoall, Scope::Block;
}

macro_rules! reduce {
    ($($name:ident => $scope:expr, $scatter:expr;)*) => {$(
        /// `dtype` and `op`: the codes of `coll::dtype` and `coll::op` (a pair without that operator
        /// stops the PE naming the call).
        ///
        /// # Safety
        /// See `coll::reduce` (`nreduce` elements; the ranges are checked).
        #[no_mangle]
        pub unsafe extern "C" fn $name(team: i32, dest: *mut c_void, src: *const c_void, nreduce: usize, dtype: i32, op: i32) -> i32 {
            // SAFETY: the caller's contract (above) is the Rust call's.
            unsafe { coll::reduce($scope, team, dest as *mut u8, src as *const u8, nreduce, dtype as u32, op as u32, $scatter, concat!(stringify!($name), "\0")) };
            0
        }
    )*};
}
reduce! {
    rshmem_reduce => Scope::Thread, false; rshmem_reduce_warp => Scope::Warp, false;
    rshmem_reduce_block => Scope::Block, false;
    rshmem_reducescatter => Scope::Thread, true; rshmem_reducescatter_warp => Scope::Warp, true;
    rshmem_reducescatter_block => Scope::Block, true;
}

// ---------------------------------------------------------------- kernels the host runtime launches
/// `barrier_all_on_stream`: one thread runs a device barrier_all.
#[no_mangle]
pub extern "ptx-kernel" fn rshmemi_barrier_all_kernel() {
    coll::barrier_all()
}
/// Host-initiated and on-stream collectives (`coll::run`), run by one block.
///
/// # Safety
/// The arguments must satisfy the collective's contract (`coll::run`); launched with one block.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn rshmemi_collective(what: u32, team: i32, dest: u64, src: u64, n: u64, a: u64, b: u64) {
    if crate::arch::block_index() != 0 {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { coll::run(what, Scope::Block, team, dest as *mut u8, src as *const u8, n, a, b) }
}
/// The element pass of a pulled reduction (`coll::reduce::pull`) by every thread of the grid, between
/// `rshmemi_collective` launches of `host_op::REDUCE_SYNC` and `REDUCE_CLOSE` (or the REDUCESCATTER ones) on the same
/// stream: a large host or on-stream reduction over PEs mapped here uses the whole GPU, where one
/// block of the collective kernel read one element of each member at a time. `scatter` != 0:
/// reducescatter.
///
/// # Safety
/// As `coll::reduce::pull`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn rshmemi_reduce_pull(team: i32, dest: u64, src: u64, n: u64, dt: u32, o: u32, scatter: u32) {
    let idx = crate::arch::block_index() as usize * crate::arch::block_size() as usize + crate::arch::block_rank() as usize;
    let stride = crate::arch::grid_size() as usize * crate::arch::block_size() as usize;
    // SAFETY: the caller's contract.
    unsafe { coll::pull(team, dest as *mut u8, src as *const u8, n as usize, dt, o, scatter != 0, idx, stride, "rshmem_reduce (pulled, on the grid)\0") }
}
/// The copies of a large broadcast (`coll::broadcast_grid`) by every thread of the grid on the root,
/// between `rshmemi_collective` launches of `host_op::BROADCAST_OPEN` and `BROADCAST_CLOSE` on the same
/// stream: the root writes into every member's `dest` through its mapping with the whole GPU.
///
/// # Safety
/// As `coll::broadcast_grid`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rshmemi_broadcast_grid(team: i32, dest: u64, src: u64, bytes: u64, root: i32) {
    let idx = crate::arch::block_index() * crate::arch::block_size() + crate::arch::block_rank();
    let stride = crate::arch::grid_size() * crate::arch::block_size();
    // SAFETY: the caller's contract.
    unsafe { coll::broadcast_grid(team, dest as *mut u8, src as *const u8, bytes as usize, root, idx, stride, "rshmem_broadcast (on the grid)\0") }
}
/// One point operation the host asked for (`point::run`: a host AMO, an on-stream p, g, signal op or
/// wait, a host or on-stream strided put or get) by one thread; `w0` is `point::Op::word`. A value it
/// returns is stored at `result` (device or host-mapped memory) when `result` is not 0.
///
/// # Safety
/// The host checked the operation (`point::run`'s contract); `result` is 0 or writable for 8 bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn rshmemi_point_op(w0: u64, dest: u64, value: u64, cond: u64, n: u64, aux: u64, dst: u64, sst: u64, result: u64) {
    if crate::arch::block_rank() != 0 || crate::arch::block_index() != 0 {
        return;
    }
    let op = point::Op::from_word(w0, dest, value, cond, n, aux, dst as i64, sst as i64);
    // SAFETY: the caller's contract.
    let v = unsafe { point::run(&op) };
    if result != 0 {
        // SAFETY: `result` is writable for 8 bytes (the caller's contract).
        unsafe { core::ptr::write_volatile(result as *mut u64, v) };
        ops::quiet();
    }
}
/// The copies of a large fcollect (`alltoall` 0) or alltoall (1) by every thread of the grid on every
/// member (`coll::push_grid`), between `rshmemi_collective` launches of `host_op::FCOLLECT_OPEN` /
/// `_CLOSE` (or `ALLTOALL_*`) on the same stream.
///
/// # Safety
/// As `coll::push_grid`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rshmemi_push_grid(team: i32, alltoall: u32, dest: u64, src: u64, bytes: u64) {
    let idx = crate::arch::block_index() * crate::arch::block_size() + crate::arch::block_rank();
    let stride = crate::arch::grid_size() * crate::arch::block_size();
    let call = if alltoall != 0 { "rshmem_alltoall (on the grid)\0" } else { "rshmem_fcollect (on the grid)\0" };
    // SAFETY: the caller's contract.
    unsafe { coll::push_grid(team, alltoall != 0, dest as *mut u8, src as *const u8, bytes as usize, idx, stride, call) }
}
/// The device-resident NIC model (`RSHMEM_IBGDA_EMULATOR=device`, the runtime's
/// `transport::ibgda::devnic`): plays the NIC of this PE's IBGDA QPs over queues in GPU memory, for
/// measuring what posting costs GPU threads. Launched by the runtime on a stream of its own (one block;
/// thread `i` serves QPs `i`, `i + blockDim`, ...); ends when the stop word is set or, all threads
/// together, after about 5 ms without work (thread 0 decides).
///
/// # Safety
/// As `remote::ibgda::serve_model`: `qps` holds `nqp` model QPs, `stop` is the host's stop word,
/// `header` the model's own header (`nicmodel::ModelHeader`, its `end` word zeroed by the host
/// before each launch).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rshmemi_nic_model(qps: u64, nqp: u64, stop: u64, header: u64) {
    // SAFETY: the caller's contract.
    unsafe { crate::remote::ibgda::serve_model(qps, nqp as u32, stop, header) };
}
/// `quiet_on_stream`: completes everything earlier on the stream at system scope.
#[no_mangle]
pub extern "ptx-kernel" fn rshmemi_quiet_kernel() {
    ops::quiet()
}
/// `sync_all_on_stream`.
#[no_mangle]
pub extern "ptx-kernel" fn rshmemi_sync_all_kernel() {
    coll::sync_all()
}

/// One proxy request posted from the GPU on the host's behalf (the host API's and the on-stream API's
/// requests to PEs on other nodes; see `remote::post_from_device`). The request travels in the kernel
/// parameters: `w0` = op | sub << 16 | pe << 32, then the other fields; `wait` != 0: wait until the
/// proxy has completed it (blocking host call, or stream order for the on-stream calls).
///
/// # Safety
/// The fields must form a request the host checked against this PE's heap and route.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn rshmemi_proxy_request(w0: u64, offset: u64, len: u64, src: u64, value: u64, sig_offset: u64, sig_value: u64, wait: u64) {
    if crate::arch::block_rank() != 0 || crate::arch::block_index() != 0 {
        return;
    }
    let req = crate::remote::proxy::Request {
        op: w0 as u16,
        sub: (w0 >> 16) as u16,
        pe: (w0 >> 32) as u32,
        offset,
        len,
        src,
        value,
        sig_offset,
        sig_value,
        seq: 0,
    };
    // SAFETY: the caller's contract.
    unsafe { crate::remote::post_from_device(&req, wait != 0) }
}

/// The runtime's apply kernel (`remote::lane::serve`): its warps apply the frames that arrive on this
/// PE's lanes, in order, until none has come for `linger_ns`. Launched by the host on a stream of its
/// own when frames arrive and no apply kernel runs; a kernel that waits for something remote applies
/// them itself meanwhile (`remote::lane::help`). `gen` points to the launch's number.
///
/// # Safety
/// Launched by the runtime only while initialized; it waits for the kernel to end before it frees
/// the lanes.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rshmemi_apply(gen: *const u64, linger_ns: u64) {
    // SAFETY: the caller's contract: `gen` is the host's launch counter (host-shared memory), written
    // before the launch.
    unsafe { crate::remote::lane::serve(crate::arch::load_acquire_u64(gen), linger_ns) }
}
