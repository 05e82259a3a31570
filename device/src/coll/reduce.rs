//! Reductions and reducescatter: push for small ones, pull for large ones (see the `coll` module
//! docs).

use crate::coll::data::{check_sym, push_order};
use crate::coll::elem::{dtype, dtype_size, op, valid_reduction, Bf16, DoubleLoc, Elem, F16};
use crate::coll::sync::{inbox, scratch, tag, team_exchange_scoped, Order};
use crate::coll::teams::{team, Team};
use crate::ops;
use crate::route::{fail, St};
use crate::state::SCRATCH_BYTES;
use crate::types::{Kind, Problem, Scope};
use core::mem::size_of;
use core::ptr;

/// `$call!(T, OP)` for the operator `$o` of the element type `T`, among those `T` has.
macro_rules! on_ops {
    ($o:expr, $t:ty, $call:ident; $($op:ident)*) => {
        match $o {
            $(op::$op => $call!($t, { op::$op }),)*
            _ => {}
        }
    };
}

/// `$call!(T, OP)` for the element type `$dt` and operator `$o` of a reduction (the pair checked by
/// the caller with `valid_reduction`): the one list of the reductions' types and operators.
macro_rules! on_reduction {
    ($dt:expr, $o:expr, $call:ident) => {
        match $dt {
            dtype::I8 => on_ops!($o, i8, $call; AND OR XOR MIN MAX SUM PROD),
            dtype::I16 => on_ops!($o, i16, $call; AND OR XOR MIN MAX SUM PROD),
            dtype::I32 => on_ops!($o, i32, $call; AND OR XOR MIN MAX SUM PROD),
            dtype::I64 => on_ops!($o, i64, $call; AND OR XOR MIN MAX SUM PROD),
            dtype::U8 => on_ops!($o, u8, $call; AND OR XOR MIN MAX SUM PROD),
            dtype::U16 => on_ops!($o, u16, $call; AND OR XOR MIN MAX SUM PROD),
            dtype::U32 => on_ops!($o, u32, $call; AND OR XOR MIN MAX SUM PROD),
            dtype::U64 => on_ops!($o, u64, $call; AND OR XOR MIN MAX SUM PROD),
            dtype::F16 => on_ops!($o, F16, $call; MIN MAX SUM PROD),
            dtype::BF16 => on_ops!($o, Bf16, $call; MIN MAX SUM PROD),
            dtype::F32 => on_ops!($o, f32, $call; MIN MAX SUM PROD),
            dtype::F64 => on_ops!($o, f64, $call; MIN MAX SUM PROD),
            _ => on_ops!($o, DoubleLoc, $call; MAXLOC),
        }
    };
}

/// Reduction of `n` elements of type `dt` with operator `o` over team `team_id`: `dest` on every member
/// gets the combination of all members' `src` (`scatter`: member `i` gets only block `i`, of `n`
/// elements, of the combination of all members' `size * n`-element `src`).
///
/// # Safety
/// `dest` and `src` symmetric, aligned for the type and of the sizes above (the ranges are checked);
/// every member calls with the same arguments.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, n: usize, dt: u32, o: u32, scatter: bool, call: &'static str) {
    if !valid_reduction(dt, o) {
        fail(call, Problem::BadReduction, dt as i32, o as usize, 0);
    }
    macro_rules! run_as {
        ($t:ty, $op:expr) => {
            // SAFETY: the caller's contract, for the element type `dt` names (the pair is valid:
            // checked above).
            unsafe { reduce_as::<$t, $op>(scope, team_id, dest as *mut $t, src as *const $t, n, scatter, call) }
        };
    }
    on_reduction!(dt, o, run_as);
}

/// What a reduction needs besides its element loops (those are per type and operator; everything else
/// is here once, out of line, so that the 70-odd instances stay small).
struct Red {
    t: Team,
    tg: u16,
    /// This PE's symmetric source address of its block (`src`, or block `me` for reducescatter).
    first: *const u8,
    in_place: bool,
    all_mapped: bool,
}

/// The checks, tag and algorithm facts of a reduction of `n` elements of `sz` bytes.
///
/// # Safety
/// As `reduce`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn red_setup(call: &'static str, team_id: i32, dest: *mut u8, src: *const u8, n: usize, sz: usize, scatter: bool, dt: u32, o: u32) -> Red {
    let t = team(call, team_id);
    let (kind, src_len) = if scatter { (Kind::Reducescatter, n * t.size() as usize) } else { (Kind::Reduce, n) };
    check_sym(call, dest as usize, n * sz);
    check_sym(call, src as usize, src_len * sz);
    let (d0, d1) = (dest as usize, dest as usize + n * sz);
    let (s0, s1) = (src as usize, src as usize + src_len * sz);
    // SAFETY: block `me` < size of a source of `size * n` elements (reducescatter; checked above).
    let first = if scatter { unsafe { src.add(t.me() as usize * n * sz) } } else { src };
    let all_mapped = (0..t.size()).all(|i| peer_base(t.pe(i)) != 0);
    Red { t, tg: tag(kind, [n as u64, dt as u64, o as u64]), first, in_place: d0 < s1 && s0 < d1, all_mapped }
}

#[inline(always)]
fn peer_base(pe: i32) -> usize {
    St.peer_base(pe as usize) as usize
}

/// The push of a small reduction: every member's (block of the) source into my inbox, published by one
/// synchronization. Returns the inbox (member `j`'s data at `j * slot`).
///
/// # Safety
/// As `reduce`; `slot * size` fits half the scratch.
#[inline(never)]
unsafe fn red_push(scope: Scope, call: &'static str, r: &Red, src: *const u8, slot: usize, scatter: bool) -> *const u8 {
    let t = &r.t;
    // SAFETY: `r.t` is a live team of this PE (`red_setup`).
    let buf = unsafe { inbox(t.id) };
    for k in 0..t.size() {
        let i = push_order(t, k);
        // SAFETY: block `i` < size of the checked source (reducescatter) or the source itself, `slot`
        // bytes; slot `me` of the inbox, within half the scratch (`slot * size` fits: the caller's
        // contract), a symmetric address; the source stays unchanged until the exchange with quiet.
        unsafe {
            let block = if scatter { src.add(i as usize * slot) } else { src };
            ops::put_scoped(scope, buf.add(t.me() as usize * slot), block, slot, t.pe(i), call, false);
        }
    }
    // SAFETY: a live team; every member calls with the same arguments (the caller's contract).
    unsafe { team_exchange_scoped(scope, call, t, r.tg, Order::Quiet) };
    buf
}

/// One synchronization of a reduction, out of line: `Order::Release` when it says this PE's source is
/// ready (the others read it next), `Order::Enter` when it says this PE is done reading theirs.
///
/// # Safety
/// As `team_exchange_scoped`.
#[inline(never)]
unsafe fn red_exchange(scope: Scope, call: &'static str, r: &Red, order: Order) {
    // SAFETY: the caller's contract.
    unsafe { team_exchange_scoped(scope, call, &r.t, r.tg, order) };
}

/// Member `i`'s chunk `[c0, c0 + bytes)` of the reduced block, readable here: in its heap when mapped,
/// else fetched into `fetch`. The scope is synchronized after.
///
/// # Safety
/// As `reduce`; `fetch` is this PE's scratch with room for `bytes`.
#[inline(never)]
unsafe fn red_chunk(scope: Scope, call: &'static str, r: &Red, i: i32, c0: usize, bytes: usize, fetch: *mut u8) -> *const u8 {
    let pe = r.t.pe(i);
    let heap = St.heap_base() as usize;
    let base = peer_base(pe);
    let p = if base != 0 {
        (base + (r.first as usize - heap) + c0) as *const u8
    } else {
        // SAFETY: `[c0, c0 + bytes)` of the checked source block, symmetric; `fetch` has room for
        // `bytes` (the caller's contract); a blocking get.
        unsafe { ops::get_scoped(scope, fetch, r.first.add(c0), bytes, pe, call, true) };
        fetch as *const u8
    };
    scope.sync();
    p
}

/// `reduce` for one type and operator: only the element loops are per type.
///
/// # Safety
/// As `reduce`.
#[inline(never)]
pub unsafe fn reduce_as<T: Elem, const OP: u32>(scope: Scope, team_id: i32, dest: *mut T, src: *const T, n: usize, scatter: bool, call: &'static str) {
    let sz = size_of::<T>();
    // SAFETY: the caller's contract (`red_setup` checks the ranges and the team).
    let r = unsafe { red_setup(call, team_id, dest as *mut u8, src as *const u8, n, sz, scatter, T::DTYPE, OP) };
    let t = &r.t;
    let (rank, threads) = (scope.rank() as usize, scope.size() as usize);
    let slot = n * sz;
    if !pulls(n, sz, t.size() as usize) {
        // Small: push. Every member gets every member's (block of the) source in its inbox, one
        // synchronization publishes them, and each PE combines locally: one round instead of two.
        // SAFETY: the caller's contract; `slot * size` fits half the scratch (tested above).
        let b = unsafe { red_push(scope, call, &r, src as *const u8, slot, scatter) } as *const T;
        let mut e = rank;
        while e < n {
            // SAFETY: the inbox holds `size` blocks of `n` `T`s, published by `red_push`'s exchange;
            // `dest` holds `n` `T`s (checked in `red_setup`); e < n.
            unsafe {
                let mut acc = ptr::read(b.add(e));
                for j in 1..t.size() as usize {
                    acc = T::combine::<OP>(acc, ptr::read(b.add(j * n + e)));
                }
                ptr::write(dest.add(e), acc);
            }
            e += threads;
        }
        scope.sync();
        return;
    }
    // Large: pull. Every member's source is ready.
    // SAFETY: a live team; every member calls with the same arguments (the caller's contract).
    unsafe { red_exchange(scope, call, &r, Order::Release) };
    if r.all_mapped && !r.in_place {
        // SAFETY: every member mapped, not in place (tested), sources ready (the exchange above) and
        // unchanged until the closing exchange.
        unsafe { pull_slice::<T, OP>(t, r.first as usize - St.heap_base() as usize, dest, n, rank, threads) };
    } else {
        // Chunks through the scratch: the first half accumulates, the second receives what is fetched
        // from PEs not mapped here.
        let acc = scratch(t.id) as *mut T;
        // SAFETY: the second half of this team's scratch.
        let fetch = unsafe { scratch(t.id).add(SCRATCH_BYTES / 2) };
        let chunk = SCRATCH_BYTES / 2 / sz;
        let mut c0 = 0;
        while c0 < n {
            let len = core::cmp::min(chunk, n - c0);
            for i in 0..t.size() {
                // SAFETY: `[c0, c0 + len)` of the `n`-element block; `fetch` has room for
                // `len * sz <= SCRATCH_BYTES / 2` bytes.
                let p = unsafe { red_chunk(scope, call, &r, i, c0 * sz, len * sz, fetch) } as *const T;
                let mut e = rank;
                while e < len {
                    // SAFETY: `p` holds the chunk's `len` `T`s (`red_chunk`), `acc` room for `chunk`
                    // >= len `T`s (the first half of the scratch); e < len.
                    unsafe {
                        let v = ptr::read(p.add(e));
                        ptr::write(acc.add(e), if i == 0 { v } else { T::combine::<OP>(ptr::read(acc.add(e)), v) });
                    }
                    e += threads;
                }
                scope.sync();
            }
            if r.in_place {
                // Every member has read this chunk of my source before I overwrite it.
                // SAFETY: as the exchange above.
                unsafe { red_exchange(scope, call, &r, Order::Enter) };
            }
            let mut e = rank;
            while e < len {
                // SAFETY: `dest` holds `n` `T`s (checked), c0 + e < n; `acc` holds the chunk's.
                unsafe { ptr::write(dest.add(c0 + e), ptr::read(acc.add(e))) };
                e += threads;
            }
            scope.sync();
            c0 += len;
        }
    }
    // No member changes its source before every member has read it (what this PE read is in `dest`).
    // SAFETY: as the exchange above.
    unsafe { red_exchange(scope, call, &r, Order::Enter) };
}

/// Elements `idx, idx + stride, ...` below `n` of a large reduction whose members are all mapped here:
/// `dest[e]` = the combination, in team order, of member `i`'s `n`-element source block at heap offset
/// `off` (in its heap, read through its mapping). Four elements per thread are in flight at once: the
/// loads of all members for them are issued before any is combined (a reduction that read one element
/// of each member at a time waited a peer load's latency per element: 0.5 GB/s from one block).
///
/// # Safety
/// Every member's heap is mapped here; its block at `off` holds `n` `T`s, ready and unchanged while
/// this runs; `dest` holds `n` `T`s and overlaps no source.
#[inline(always)]
pub unsafe fn pull_slice<T: Elem, const OP: u32>(t: &Team, off: usize, dest: *mut T, n: usize, idx: usize, stride: usize) {
    const U: usize = 4;
    let peer = |i: i32| (peer_base(t.pe(i)) + off) as *const T;
    let mut e = idx;
    while e + (U - 1) * stride < n {
        // SAFETY: e + k * stride < n for k < U (the loop test); every read is of member i's block of n
        // `T`s, every write of `dest` (the caller's contract).
        unsafe {
            let p0 = peer(0);
            let mut acc = [ptr::read(p0.add(e)), ptr::read(p0.add(e + stride)), ptr::read(p0.add(e + 2 * stride)), ptr::read(p0.add(e + 3 * stride))];
            for i in 1..t.size() {
                let p = peer(i);
                let v = [ptr::read(p.add(e)), ptr::read(p.add(e + stride)), ptr::read(p.add(e + 2 * stride)), ptr::read(p.add(e + 3 * stride))];
                for k in 0..U {
                    acc[k] = T::combine::<OP>(acc[k], v[k]);
                }
            }
            for (k, a) in acc.into_iter().enumerate() {
                ptr::write(dest.add(e + k * stride), a);
            }
        }
        e += U * stride;
    }
    while e < n {
        // SAFETY: as above, e < n.
        unsafe {
            let mut acc = ptr::read(peer(0).add(e));
            for i in 1..t.size() {
                acc = T::combine::<OP>(acc, ptr::read(peer(i).add(e)));
            }
            ptr::write(dest.add(e), acc);
        }
        e += stride;
    }
}

/// Whether a reduction of `n` elements of `sz` bytes over a team of `size` members takes the pull
/// path (`reduce_as`: too large to push through the scratch). The host asks the same question to run
/// that path's element pass over the whole GPU (`pull`).
#[inline(always)]
pub const fn pulls(n: usize, sz: usize, size: usize) -> bool {
    n * sz * size > SCRATCH_BYTES / 2
}

/// One of the two synchronizations of a pulled reduction: the first (`host_op::REDUCE_SYNC`, `close`
/// false) says every member's source is ready, the second (`REDUCE_CLOSE`) that every member has read
/// it. With `pull` between the two, this is `reduce_as`'s pull path split so that the element pass
/// runs on a whole grid.
///
/// # Safety
/// As `reduce`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn pull_sync(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, n: usize, dt: u32, o: u32, scatter: bool, close: bool, call: &'static str) {
    if !valid_reduction(dt, o) {
        fail(call, Problem::BadReduction, dt as i32, o as usize, 0);
    }
    // SAFETY: the caller's contract (`red_setup` checks the ranges and the team).
    let r = unsafe { red_setup(call, team_id, dest, src, n, dtype_size(dt), scatter, dt, o) };
    // SAFETY: a live team; every member calls with the same arguments (the caller's contract).
    unsafe { red_exchange(scope, call, &r, if close { Order::Enter } else { Order::Release }) };
}

/// The element pass of a pulled reduction, by thread `idx` of `stride` threads (all the grid's), between
/// the two `pull_sync`s: every member must be mapped here and `dest` must not overlap the source (the
/// host checked; a PE where it does not hold stops naming the call).
///
/// # Safety
/// As `reduce`; between the two `pull_sync`s of the same arguments on every member.
#[allow(clippy::too_many_arguments)]
pub unsafe fn pull(team_id: i32, dest: *mut u8, src: *const u8, n: usize, dt: u32, o: u32, scatter: bool, idx: usize, stride: usize, call: &'static str) {
    if !valid_reduction(dt, o) {
        fail(call, Problem::BadReduction, dt as i32, o as usize, 0);
    }
    // SAFETY: the caller's contract (`red_setup` checks the ranges and the team).
    let r = unsafe { red_setup(call, team_id, dest, src, n, dtype_size(dt), scatter, dt, o) };
    if r.in_place {
        fail(call, Problem::BadReduction, dt as i32, o as usize, n);
    }
    if let Some(i) = (0..r.t.size()).find(|&i| peer_base(r.t.pe(i)) == 0) {
        fail(call, Problem::NoTransport, r.t.pe(i), 0, 0);
    }
    let off = r.first as usize - St.heap_base() as usize;
    macro_rules! pull_as {
        ($t:ty, $op:expr) => {
            // SAFETY: every member mapped, not in place (tested above); the sources are ready and
            // unchanged between the two synchronizations (the caller's contract).
            unsafe { pull_slice::<$t, $op>(&r.t, off, dest as *mut $t, n, idx, stride) }
        };
    }
    on_reduction!(dt, o, pull_as);
}
