//! Reductions and reducescatter: push for small ones, pull for large ones (see the `coll` module
//! docs).

use crate::coll::data::{check_sym, push_order};
use crate::coll::elem::{dtype, op, valid_reduction, Bf16, DoubleLoc, Elem, F16};
use crate::coll::sync::{inbox, scratch, tag, team_exchange_scoped};
use crate::coll::teams::{team, Team};
use crate::ops;
use crate::route::{fail, St};
use crate::state::SCRATCH_BYTES;
use crate::types::{Kind, Problem, Scope};
use core::mem::size_of;
use core::ptr;

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
    macro_rules! go {
        ($t:ty; $($o:ident)*) => {
            match o {
                // SAFETY: the caller's contract, for the element type `dt` names (the pair is valid:
                // checked above).
                $(op::$o => unsafe { reduce_as::<$t, { op::$o }>(scope, team_id, dest as *mut $t, src as *const $t, n, scatter, call) },)*
                _ => {}
            }
        };
    }
    match dt {
        dtype::I8 => go!(i8; AND OR XOR MIN MAX SUM PROD),
        dtype::I16 => go!(i16; AND OR XOR MIN MAX SUM PROD),
        dtype::I32 => go!(i32; AND OR XOR MIN MAX SUM PROD),
        dtype::I64 => go!(i64; AND OR XOR MIN MAX SUM PROD),
        dtype::U8 => go!(u8; AND OR XOR MIN MAX SUM PROD),
        dtype::U16 => go!(u16; AND OR XOR MIN MAX SUM PROD),
        dtype::U32 => go!(u32; AND OR XOR MIN MAX SUM PROD),
        dtype::U64 => go!(u64; AND OR XOR MIN MAX SUM PROD),
        dtype::F16 => go!(F16; MIN MAX SUM PROD),
        dtype::BF16 => go!(Bf16; MIN MAX SUM PROD),
        dtype::F32 => go!(f32; MIN MAX SUM PROD),
        dtype::F64 => go!(f64; MIN MAX SUM PROD),
        _ => go!(DoubleLoc; MAXLOC),
    }
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
    unsafe { team_exchange_scoped(scope, call, t, r.tg, true) };
    buf
}

/// One synchronization of a reduction, out of line.
///
/// # Safety
/// As `team_exchange_scoped`.
#[inline(never)]
unsafe fn red_exchange(scope: Scope, call: &'static str, r: &Red) {
    // SAFETY: the caller's contract.
    unsafe { team_exchange_scoped(scope, call, &r.t, r.tg, false) };
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
    if slot * t.size() as usize <= SCRATCH_BYTES / 2 {
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
    unsafe { red_exchange(scope, call, &r) };
    if r.all_mapped && !r.in_place {
        // One pass, combined in registers, in team order.
        let heap = St.heap_base() as usize;
        let off = r.first as usize - heap;
        let peer = |i: i32| (peer_base(t.pe(i)) + off) as *const T;
        let mut e = rank;
        while e < n {
            // SAFETY: every member's heap is mapped here (`all_mapped`): `peer(i)` is member `i`'s
            // source block of `n` `T`s (symmetric, checked in `red_setup`), ready (the exchange above)
            // and unchanged until the closing exchange; `dest` holds `n` `T`s and is not a source
            // (not in place); e < n.
            unsafe {
                let mut acc = ptr::read(peer(0).add(e));
                for i in 1..t.size() {
                    acc = T::combine::<OP>(acc, ptr::read(peer(i).add(e)));
                }
                ptr::write(dest.add(e), acc);
            }
            e += threads;
        }
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
                unsafe { red_exchange(scope, call, &r) };
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
    // No member changes its source before every member has read it.
    // SAFETY: as the exchange above.
    unsafe { red_exchange(scope, call, &r) };
}
