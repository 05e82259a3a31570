//! The data collectives: broadcast, fcollect, alltoall and collect, and the delivery they share (see
//! the `coll` module docs).

use crate::arch;
use crate::coll::sync::{inbox, tag, team_exchange_scoped, Order};
use crate::coll::teams::{team, Team};
use crate::ops;
use crate::route::{fail, locate, St};
use crate::state::SCRATCH_BYTES;
use crate::types::{Kind, Problem, Scope};
use core::ptr;

/// Checks that `[p, p + bytes)` lies in this PE's heap (symmetric buffers of collectives).
#[inline(always)]
pub(super) fn check_sym(call: &'static str, p: usize, bytes: usize) {
    let me = St.my_pe();
    locate(call, p, bytes, me);
}

/// Members in the order a PE writes to them: the next one first, itself last, so that concurrent
/// pushes of all members start on different targets.
#[inline(always)]
pub(super) fn push_order(t: &Team, k: i32) -> i32 {
    (t.me() + 1 + k) % t.size()
}

/// The delivery of a data collective that lands `landing` bytes in every member's `dest`: `push(base)`
/// writes this PE's contributions relative to `base` on each target (the same symmetric address on
/// every member), then a synchronization with quiet publishes them.
///
/// No PE writes into another member's `dest` before that member has entered the collective (NVSHMEM's
/// collectives behave so, and programs rely on it: a broadcast right after reading the result of the
/// last one). Small deliveries (`landing` fits half the scratch) therefore land in the inbox, and each
/// PE copies its inbox into its `dest` after the one synchronization; large ones first synchronize
/// (every member has entered, and mismatched arguments are caught before any data moves), then write
/// straight into `dest`.
///
/// # Safety
/// As the collectives: `dest` symmetric with `landing` bytes (checked by the caller); every member
/// calls with the same `landing` and tag.
#[inline(always)]
unsafe fn deliver(scope: Scope, call: &'static str, t: &Team, tg: u16, dest: *mut u8, landing: usize, push: impl Fn(*mut u8)) {
    let small = !lands_direct(landing);
    // SAFETY: `t` is a live team of this PE (`team`) and every member calls with the same arguments
    // (the caller's contract): the exchanges pair up, and the inbox is the half of the scratch the
    // next one publishes (`inbox`).
    let base = unsafe {
        if small {
            inbox(t.id)
        } else {
            // Every member has entered: nothing published yet.
            team_exchange_scoped(scope, call, t, tg, Order::Enter);
            dest
        }
    };
    push(base);
    // SAFETY: as above.
    unsafe { team_exchange_scoped(scope, call, t, tg, Order::Quiet) };
    if small {
        // SAFETY: `landing` bytes: `dest` is symmetric of that size (checked by the caller) and the
        // inbox holds them (at most half the scratch); the exchange published them; the inbox (scratch)
        // and `dest` (a user allocation) do not overlap.
        unsafe { arch::copy(dest, base, landing, scope.rank(), scope.size()) };
        scope.sync();
    }
}

/// A broadcast's checks (the team, the root, both ranges) and its tag.
#[inline(always)]
fn bcast_setup(call: &'static str, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, root: i32) -> (Team, u16) {
    let t = team(call, team_id);
    if root < 0 || root >= t.size() {
        fail(call, Problem::BadRoot, root, 0, 0);
    }
    check_sym(call, dest as usize, bytes);
    check_sym(call, src as usize, bytes);
    (t, tag(Kind::Broadcast, [bytes as u64, root as u64, 0]))
}

/// broadcast: `bytes` from `src` on member `root` into `dest` on every member (the root included).
///
/// # Safety
/// `dest` and `src` symmetric and `bytes` long (checked); every member calls with the same arguments.
pub unsafe fn broadcast(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, root: i32, call: &'static str) {
    let (t, tg) = bcast_setup(call, team_id, dest, src, bytes, root);
    let push = |base: *mut u8| {
        if t.me() == root {
            for k in 0..t.size() {
                let i = push_order(&t, k);
                if i == root && core::ptr::eq(base, src) {
                    continue;
                }
                // SAFETY: `base` is symmetric with room for `bytes` (`dest`, or the inbox), `src`
                // holds `bytes` (checked above) and stays unchanged until the exchange with quiet
                // that completes the put (`deliver`).
                unsafe { ops::put_scoped(scope, base, src, bytes, t.pe(i), call, false) };
            }
        }
    };
    // SAFETY: `dest` is symmetric with `bytes` (checked above); same arguments on every member.
    unsafe { deliver(scope, call, &t, tg, dest, bytes, push) };
}

/// Whether a data collective that lands `bytes` in every member's `dest` writes straight into it
/// (too large for the inbox: `deliver`'s large path). The host asks the same question to run a large
/// broadcast's copies on a whole grid (`broadcast_grid`).
#[inline(always)]
pub const fn lands_direct(bytes: usize) -> bool {
    bytes > SCRATCH_BYTES / 2
}

/// One synchronization of a grid broadcast (`host_op::BROADCAST_OPEN` without quiet: every member has
/// entered; `BROADCAST_CLOSE` with quiet: the data has landed): `deliver`'s large path split so that
/// the copies between the two run on a whole grid (`broadcast_grid`). The same two synchronizations
/// with the same tag, so members may take either form.
///
/// # Safety
/// As `broadcast`; `lands_direct(bytes)`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn broadcast_sync(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, root: i32, with_quiet: bool, call: &'static str) {
    let (t, tg) = bcast_setup(call, team_id, dest, src, bytes, root);
    let order = if with_quiet { Order::Quiet } else { Order::Enter };
    // SAFETY: a live team; every member calls with the same arguments (the caller's contract).
    unsafe { team_exchange_scoped(scope, call, &t, tg, order) };
}

/// The copies of a grid broadcast, by thread `idx` of `stride` (all the grid's) on the root, between its
/// two `broadcast_sync`s: `bytes` from `src` into every member's `dest` through its mapping, the next
/// member first. Every member must be mapped here (the host checked; a root where one is not stops
/// naming the call).
///
/// # Safety
/// As `broadcast`; between the two synchronizations of the same arguments on every member.
#[allow(clippy::too_many_arguments)]
pub unsafe fn broadcast_grid(team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, root: i32, idx: u32, stride: u32, call: &'static str) {
    let t = team(call, team_id);
    if t.me() != root {
        return;
    }
    check_sym(call, dest as usize, bytes);
    check_sym(call, src as usize, bytes);
    for k in 0..t.size() {
        let i = push_order(&t, k);
        let (r, mapped) = locate(call, dest as usize, bytes, t.pe(i));
        if !mapped {
            fail(call, Problem::NoTransport, t.pe(i), dest as usize, bytes);
        }
        if i == t.me() && core::ptr::eq(dest as *const u8, src) {
            continue;
        }
        // SAFETY: `r` is member i's `dest` (symmetric, `bytes` long: checked) through its mapping;
        // `src` holds `bytes` and is unchanged until the closing synchronization; every member has
        // entered (the opening one); the grid's threads copy disjoint parts (`idx` of `stride`).
        unsafe { arch::copy(r as *mut u8, src, bytes, idx, stride) };
    }
}

/// fcollect: every member's `bytes` from `src` into `dest + index * bytes` on every member.
///
/// # Safety
/// `dest` symmetric of `size * bytes`, `src` of `bytes` (checked); same arguments everywhere.
pub unsafe fn fcollect(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, call: &'static str) {
    let t = team(call, team_id);
    let total = bytes * t.size() as usize;
    check_sym(call, dest as usize, total);
    check_sym(call, src as usize, bytes);
    let tg = tag(Kind::Fcollect, [bytes as u64, 0, 0]);
    let push = |base: *mut u8| {
        // SAFETY: block `me` < size of a landing area of `size * bytes`.
        let at = unsafe { base.add(t.me() as usize * bytes) };
        for k in 0..t.size() {
            let i = push_order(&t, k);
            if i == t.me() && core::ptr::eq(at, src) {
                continue;
            }
            // SAFETY: `at` is symmetric with room for `bytes`, `src` holds `bytes` (checked above)
            // and stays unchanged until the exchange with quiet that completes the put (`deliver`).
            unsafe { ops::put_scoped(scope, at, src, bytes, t.pe(i), call, false) };
        }
    };
    // SAFETY: `dest` is symmetric with `total` bytes (checked above); same arguments on every member.
    unsafe { deliver(scope, call, &t, tg, dest, total, push) };
}

/// fcollect's and alltoall's checks and tag: `alltoall` picks which. Returns the team, the tag and
/// the bytes that land in every member's `dest`.
#[inline(always)]
fn push_setup(call: &'static str, team_id: i32, alltoall: bool, dest: *mut u8, src: *const u8, bytes: usize) -> (Team, u16, usize) {
    let t = team(call, team_id);
    let total = bytes * t.size() as usize;
    check_sym(call, dest as usize, total);
    check_sym(call, src as usize, if alltoall { total } else { bytes });
    let kind = if alltoall { Kind::Alltoall } else { Kind::Fcollect };
    (t, tag(kind, [bytes as u64, 0, 0]), total)
}

/// One synchronization of a grid fcollect or alltoall (`alltoall` picks which; `with_quiet` false:
/// every member has entered; true: the data has landed): `deliver`'s large path split so that the
/// copies between the two run on a whole grid (`push_grid`), as `broadcast_sync` does for broadcast.
/// The same synchronizations with the same tag as the one-block path, so members may take either.
///
/// # Safety
/// As `fcollect` / `alltoall`; `lands_direct(n_pes * bytes)`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn push_sync(scope: Scope, team_id: i32, alltoall: bool, dest: *mut u8, src: *const u8, bytes: usize, with_quiet: bool, call: &'static str) {
    let (t, tg, _) = push_setup(call, team_id, alltoall, dest, src, bytes);
    let order = if with_quiet { Order::Quiet } else { Order::Enter };
    // SAFETY: a live team; every member calls with the same arguments (the caller's contract).
    unsafe { team_exchange_scoped(scope, call, &t, tg, order) };
}

/// The copies of a grid fcollect or alltoall, by thread `idx` of `stride` (all the grid's) on every
/// member, between its two `push_sync`s: this PE's block (fcollect: `src`; alltoall: block `i` of
/// `src`) into block `my index` of every member `i`'s `dest`, through its mapping, the next member
/// first. Every member must be mapped here (the host checked; one that is not stops the PE naming the
/// call).
///
/// # Safety
/// As `push_sync`, between its two synchronizations of the same arguments on every member.
#[allow(clippy::too_many_arguments)]
pub unsafe fn push_grid(team_id: i32, alltoall: bool, dest: *mut u8, src: *const u8, bytes: usize, idx: u32, stride: u32, call: &'static str) {
    let (t, _, _) = push_setup(call, team_id, alltoall, dest, src, bytes);
    let at = t.me() as usize * bytes;
    for k in 0..t.size() {
        let i = push_order(&t, k);
        let (r, mapped) = locate(call, dest as usize + at, bytes, t.pe(i));
        if !mapped {
            fail(call, Problem::NoTransport, t.pe(i), dest as usize + at, bytes);
        }
        let from = if alltoall { src.wrapping_add(i as usize * bytes) } else { src };
        if core::ptr::eq(r as *const u8, from) {
            continue;
        }
        // SAFETY: `r` is block `me` of member i's `dest` (symmetric, checked) through its mapping;
        // `from` holds `bytes` (checked) and is unchanged until the closing synchronization; every
        // member has entered (the opening one); the grid's threads copy disjoint parts (`idx` of
        // `stride`).
        unsafe { arch::copy(r as *mut u8, from, bytes, idx, stride) };
    }
}

/// alltoall: block `i` (of `bytes`) of my `src` goes to block `my index` of `dest` on member `i`.
///
/// # Safety
/// `dest` and `src` symmetric of `size * bytes` (checked); same arguments everywhere.
pub unsafe fn alltoall(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, call: &'static str) {
    let t = team(call, team_id);
    let total = bytes * t.size() as usize;
    check_sym(call, dest as usize, total);
    check_sym(call, src as usize, total);
    let tg = tag(Kind::Alltoall, [bytes as u64, 0, 0]);
    let push = |base: *mut u8| {
        // SAFETY: block `me` < size of a landing area of `size * bytes`.
        let at = unsafe { base.add(t.me() as usize * bytes) };
        for k in 0..t.size() {
            let i = push_order(&t, k);
            // SAFETY: `at` is symmetric with room for `bytes`; block `i` < size of `src` (checked
            // above) holds `bytes` and stays unchanged until the exchange with quiet (`deliver`).
            unsafe { ops::put_scoped(scope, at, src.add(i as usize * bytes), bytes, t.pe(i), call, false) };
        }
    };
    // SAFETY: `dest` is symmetric with `total` bytes (checked above); same arguments on every member.
    unsafe { deliver(scope, call, &t, tg, dest, total, push) };
}

/// collect: like fcollect with a different `bytes` on each member; member `i`'s block starts after
/// those of members `0..i`. The sizes are exchanged through the team's scratch first.
///
/// # Safety
/// `dest` symmetric and large enough for the sum of all members' `bytes` (checked against this PE's
/// heap), `src` of `bytes`; every member calls.
pub unsafe fn collect(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, call: &'static str) {
    let t = team(call, team_id);
    check_sym(call, src as usize, bytes);
    // SAFETY: `t` is a live team of this PE (`team`).
    let sizes = unsafe { inbox(t.id) } as *mut u64;
    scope.sync();
    if scope.rank() == 0 {
        for k in 0..t.size() {
            let i = push_order(&t, k);
            // SAFETY: slot `me` < size <= MAX_PES of the inbox (half the scratch: 8 KiB of u64s), a
            // symmetric address in the internal area.
            unsafe { ops::p(sizes.add(t.me() as usize), bytes as u64, t.pe(i)) };
        }
    }
    // SAFETY: a live team; every member calls (the caller's contract).
    unsafe { team_exchange_scoped(scope, call, &t, tag(Kind::Collect, [1, 0, 0]), Order::Quiet) };
    let mut offset = 0usize;
    let mut total = 0usize;
    for i in 0..t.size() {
        // SAFETY: slot `i` < size of the inbox, published by the exchange above.
        let b = unsafe { ptr::read_volatile(sizes.add(i as usize)) } as usize;
        if i < t.me() {
            offset += b;
        }
        total += b;
    }
    check_sym(call, dest as usize, total);
    for k in 0..t.size() {
        let i = push_order(&t, k);
        // SAFETY: `dest + offset` has room for `bytes` (`dest` holds `total`, checked above), `src`
        // holds `bytes` (checked above) and stays unchanged until the exchange with quiet below.
        unsafe { ops::put_scoped(scope, dest.add(offset), src, bytes, t.pe(i), call, false) };
    }
    // SAFETY: as above.
    unsafe { team_exchange_scoped(scope, call, &t, tag(Kind::Collect, [2, 0, 0]), Order::Quiet) };
}
