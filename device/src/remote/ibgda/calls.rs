//! The IBGDA calls of the remote layer, for PEs routed `ROUTE_IBGDA`: put and get (`p`/`g` too),
//! AMOs, signals, quiet, fence, and the test hooks (see the module docs of `ibgda`).

use crate::arch;
use crate::remote::ibgda::post::{discard, fail_poll, fetch, post, post_one, wait, Dev};
use crate::remote::ibgda::table::{each_qp, heap, local_of, qp_for, remote_of, table, table_or_fail, Qp, Tbl};
use crate::remote::proxy::amo as code;
use crate::route::{fail, route, St};
use crate::state::{ROUTE_IBGDA, SIGNAL_SET};
use crate::types::{Problem, Scope, Sig};
use rshmem_ibgda::mlx5::fm_ce_se;
use rshmem_ibgda::wqe::{Amo, Atomic, Local, Remote, Wqe, INLINE_DS3};

/// `p` of `len` (1..=8) bytes of `bits` to heap address `local` on `pe`: one inline WRITE, completed by
/// quiet.
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA`, and `[local, local + len)` must lie in this PE's heap (what
/// `route::locate` checks; with checks off, the API's contract).
pub(crate) unsafe fn put_inline(call: &'static str, local: usize, len: usize, bits: u64, pe: i32) {
    let t = table_or_fail(call, pe);
    // SAFETY: `pe` is routed IBGDA and `local` lies in the heap (the caller's contract); an inline
    // WRITE has no local buffer.
    unsafe {
        let qp = qp_for(call, t, pe);
        let (r, _) = remote_of(t, pe, local as u64 - heap().0);
        post_one(call, pe, qp, Wqe::rdma_write_inline_value(0, r, bits, len as u32));
    }
}

/// `g` of `len` (1..=8) bytes at heap address `local` on `pe`: a READ into the return slot.
///
/// # Safety
/// As [`put_inline`].
pub(crate) unsafe fn get_inline(call: &'static str, local: usize, len: usize, pe: i32) -> u64 {
    let t = table_or_fail(call, pe);
    // SAFETY: as in `put_inline`; the READ's local buffer is the slot `fetch` gives it.
    let raw = unsafe {
        let qp = qp_for(call, t, pe);
        let (r, _) = remote_of(t, pe, local as u64 - heap().0);
        fetch(call, pe, t, qp, |l| Wqe::rdma_read(0, r, l, len as u32))
    };
    let mut b = [0u8; 8];
    b[..len].copy_from_slice(&raw[..len]);
    u64::from_le_bytes(b)
}

/// The largest number of WQEs posted as one group (one doorbell) by a transfer.
const GROUP: usize = 4;

/// Posts the WQEs of a transfer of `bytes` between the local address `local` (in the heap or a
/// registered buffer: the caller checked its start) and heap offset `remote_off` on `pe`: one
/// `make(remote, local, n)` per piece, split where a key chunk of either side or the largest WQE ends,
/// posted in groups of `GROUP` (one doorbell each); `tail` (put_signal's atomic) joins the last group.
/// Returns the count to poll for (0 when nothing was posted).
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA`, `[remote_off, remote_off + bytes)` must lie in the heap, and the
/// local range (and `tail`'s buffers) must stay valid until the WQEs complete; `make` must build a
/// WQE whose only local buffer is the one it is given.
#[allow(clippy::too_many_arguments)]
unsafe fn post_pieces(call: &'static str, pe: i32, t: Tbl, qp: Qp, local: u64, remote_off: u64, bytes: u64, make: impl Fn(Remote, Local, u32) -> Wqe, tail: Option<Wqe>) -> u64 {
    let mut group: [Wqe; GROUP + 1] = [Wqe::nop(0); GROUP + 1];
    let (mut k, mut done, mut end) = (0, 0u64, 0);
    while done < bytes {
        let (l, lleft) = match local_of(t, local + done) {
            Some(x) => x,
            None => fail(call, Problem::Unregistered, pe, (local + done) as usize, (bytes - done) as usize),
        };
        // SAFETY: `pe` is routed IBGDA and remote_off + done < remote_off + bytes lies in the heap
        // (the caller's contract).
        let (r, rleft) = unsafe { remote_of(t, pe, remote_off + done) };
        let n = (bytes - done).min(lleft).min(rleft).min(t.max_wqe.max(1));
        group[k] = make(r, l, n as u32);
        k += 1;
        done += n;
        if k == GROUP && done < bytes {
            // SAFETY: the pieces' buffers stay valid until completion (the caller's contract).
            end = unsafe { post(call, pe, qp, &group[..k]) };
            k = 0;
        }
    }
    if let Some(w) = tail {
        group[k] = w;
        k += 1;
    }
    if k > 0 {
        // SAFETY: as above, and for `tail` (the caller's contract).
        end = unsafe { post(call, pe, qp, &group[..k]) };
    }
    end
}

/// Stops the PE when the NIC cannot reach the local buffer of a transfer larger than the inline limit.
#[inline(always)]
fn check_reachable(call: &'static str, t: Tbl, pe: i32, local: *const u8, bytes: usize) {
    if local_of(t, local as u64).is_none() {
        let why = if arch::is_local(local) { Problem::LocalBuffer } else { Problem::Unregistered };
        fail(call, why, pe, local as usize, bytes);
    }
}

/// putmem (and put_signal) of `bytes` from `src` to heap address `dst_local` on `pe`, by every thread of
/// `scope` (thread 0 posts). `blocking`: return once the source may be reused.
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA`; as `ops::putmem_scoped`: `[dst_local, dst_local + bytes)` (and
/// the signal word) lie in the heap (checked by `route::locate`, or the API's contract with checks
/// off), `src` readable for `bytes` (by the NIC: see the module docs), unchanged until the call
/// returns (blocking) or the next quiet (nbi).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn put(scope: Scope, call: &'static str, dst_local: usize, src: *const u8, bytes: usize, pe: i32, blocking: bool, sig: Option<Sig>) {
    let t = table_or_fail(call, pe);
    // SAFETY: `pe` is routed IBGDA (the caller's contract).
    let qp = unsafe { qp_for(call, t, pe) };
    scope.sync();
    if scope.rank() == 0 {
        let heap_base = heap().0;
        let dst_off = dst_local as u64 - heap_base;
        let signal = sig.map(|s| {
            // SAFETY: the signal word lies in the heap (the caller's contract).
            let (r, _) = unsafe { remote_of(t, pe, s.local as u64 - heap_base) };
            Wqe::atomic(0, r, discard(t, qp), Atomic::amo(amo_of(signal_code(s.op)), 8, s.value, 0))
        });
        let end = if bytes <= INLINE_DS3 && bytes != 0 {
            // Small: the bytes travel in the WQE (from any memory, a local variable too).
            let mut b = [0u8; INLINE_DS3];
            // SAFETY: src readable for bytes <= 12 (the caller's contract); b holds 12 bytes.
            unsafe { core::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), bytes) };
            // SAFETY: `dst_off` lies in the heap (the caller's contract); an inline WRITE has no local
            // buffer, the signal's atomic writes into the discard slot.
            unsafe {
                let (r, _) = remote_of(t, pe, dst_off);
                let w = Wqe::rdma_write_inline(0, r, &b[..bytes]).unwrap_or(Wqe::nop(0));
                match signal {
                    Some(sw) => post(call, pe, qp, &[w, sw]),
                    None => post(call, pe, qp, &[w]),
                }
            }
        } else {
            if bytes != 0 {
                check_reachable(call, t, pe, src, bytes);
                // The NIC reads the source outside this thread (DMA): make every store the group
                // made to it visible at system scope first.
                arch::fence_sc();
            }
            // SAFETY: the destination range lies in the heap and `src` stays valid until completion
            // (the caller's contract: the call waits below when blocking, else quiet does).
            unsafe { post_pieces(call, pe, t, qp, src as u64, dst_off, bytes as u64, |r, l, n| Wqe::rdma_write(0, r, l, n), signal) }
        };
        if blocking && end != 0 {
            wait(call, pe, qp, end);
        }
    }
    scope.sync();
}

/// getmem of `bytes` from heap address `src_local` on `pe` to `dst`, by every thread of `scope` (thread
/// 0 posts). `blocking`: wait until the data is here.
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA`; as `ops::getmem_scoped`: `[src_local, src_local + bytes)` lies
/// in the heap (checked by `route::locate`, or the API's contract with checks off), `dst` writable for
/// `bytes` and not read before the call returns (blocking) or the next quiet (nbi).
pub(crate) unsafe fn get(scope: Scope, call: &'static str, dst: *mut u8, src_local: usize, bytes: usize, pe: i32, blocking: bool) {
    let t = table_or_fail(call, pe);
    // SAFETY: `pe` is routed IBGDA (the caller's contract).
    let qp = unsafe { qp_for(call, t, pe) };
    scope.sync();
    if scope.rank() == 0 && bytes != 0 {
        let src_off = src_local as u64 - heap().0;
        if bytes <= 8 && local_of(t, dst as u64).is_none() {
            // Up to 8 bytes into memory the NIC cannot reach: through the return slot, as `g`.
            // SAFETY: `src_off` lies in the heap (the caller's contract); the READ's local buffer is
            // the slot `fetch` gives it.
            let raw = unsafe {
                let (r, _) = remote_of(t, pe, src_off);
                fetch(call, pe, t, qp, |l| Wqe::rdma_read(0, r, l, bytes as u32))
            };
            // SAFETY: dst writable for bytes <= 8 (the caller's contract).
            unsafe { core::ptr::copy_nonoverlapping(raw.as_ptr(), dst, bytes) };
        } else {
            check_reachable(call, t, pe, dst, bytes);
            // SAFETY: the source range lies in the heap and `dst` stays valid until completion (the
            // caller's contract: the call waits below when blocking, else quiet does).
            let end = unsafe { post_pieces(call, pe, t, qp, dst as u64, src_off, bytes as u64, |r, l, n| Wqe::rdma_read(0, r, l, n), None) };
            if blocking {
                wait(call, pe, qp, end);
            } else {
                // A READ left in flight: a fence must not let later WQEs overtake it.
                // SAFETY: the QP's counters (a `Qp`: live), accessed only atomically.
                unsafe { qp.desc.note_read(&Dev::new(call, &qp.desc), end) };
            }
        }
    }
    scope.sync();
}

/// The NVSHMEM AMO of a device AMO code (`proxy::amo`).
#[inline(always)]
fn amo_of(code: u16) -> Amo {
    use code::*;
    match code {
        FETCH => Amo::Fetch,
        SET | SWAP => Amo::Swap,
        COMPARE_SWAP => Amo::CompareSwap,
        FETCH_ADD | ADD => Amo::Add,
        FETCH_AND | AND => Amo::And,
        FETCH_OR | OR => Amo::Or,
        _ => Amo::Xor,
    }
}

/// An AMO (`code`, a `proxy::amo` code) of `width` bytes at heap address `local` on `pe`. `fetch`: wait for
/// and return the old value; else posted (completed by quiet) and 0 returned.
///
/// # Safety
/// As [`put_inline`], for the `width` bytes at `local`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn amo(call: &'static str, local: usize, width: usize, code: u16, value: u64, compare: u64, pe: i32, fetch_old: bool) -> u64 {
    let t = table_or_fail(call, pe);
    let a = Atomic::amo(amo_of(code), width as u32, value, compare);
    // SAFETY: `pe` is routed IBGDA and `local` lies in the heap (the caller's contract); the atomic's
    // local buffer is its return slot (`fetch`) or the discard slot.
    unsafe {
        let qp = qp_for(call, t, pe);
        let (r, _) = remote_of(t, pe, local as u64 - heap().0);
        if fetch_old {
            a.fetched(fetch(call, pe, t, qp, |l| Wqe::atomic(0, r, l, a)))
        } else {
            post_one(call, pe, qp, Wqe::atomic(0, r, discard(t, qp), a));
            0
        }
    }
}

/// signal_op (SIGNAL_SET / SIGNAL_ADD, checked by the caller) of `value` on the u64 at heap address
/// `sig_local` on `pe`: posted, completed by quiet.
///
/// # Safety
/// As [`put_inline`], for the 8 bytes at `sig_local`.
pub(crate) unsafe fn signal(call: &'static str, sig_local: usize, value: u64, sig_op: i32, pe: i32) {
    // SAFETY: the caller's contract.
    unsafe { amo(call, sig_local, 8, signal_code(sig_op), value, 0, pe, false) };
}

/// The device AMO code of a signal operation (SIGNAL_SET: a swap, SIGNAL_ADD: an add).
#[inline(always)]
fn signal_code(sig_op: i32) -> u16 {
    if sig_op == SIGNAL_SET {
        code::SET
    } else {
        code::ADD
    }
}

/// The IBGDA part of `quiet`: every QP completes what was ready when it was called (this thread's WQEs
/// are among them).
pub(crate) fn quiet() {
    const CALL: &str = "rshmem_quiet (IBGDA: waiting for completions)\0";
    let Some(t) = table() else { return };
    each_qp(t, false, |pe, qp| {
        // SAFETY: the QP's queues, counters and CQ (a `Qp`: live).
        if let Err(e) = unsafe { qp.desc.quiet(&Dev::new(CALL, &qp.desc)) } {
            fail_poll(CALL, pe, e);
        }
    });
    arch::fence_acq_rel();
}

/// The IBGDA part of `fence`: a fenced NOP on each of this thread's QPs with a READ outstanding (see
/// the module docs: nothing else needs one).
pub(crate) fn fence() {
    const CALL: &str = "rshmem_fence (IBGDA)\0";
    let Some(t) = table() else { return };
    each_qp(t, true, |pe, qp| {
        // SAFETY: the QP's counters (a `Qp`: live), read atomically; a NOP has no buffers.
        unsafe {
            if qp.desc.reads_outstanding(&Dev::new(CALL, &qp.desc)) {
                post(CALL, pe, qp, &[Wqe::nop(fm_ce_se::FM_FENCE)]);
            }
        }
    });
}

/// Test hook for the bad-input scenarios: a blocking RDMA WRITE of `bytes` from the heap address `src`
/// to the raw remote address `raddr` under `rkey` on `pe`, as a program that bypassed rshmem's checks
/// (or a corrupted key table) would post it. The NIC's answer decides: a bad key or address ends in an
/// error completion, which stops this PE naming the call.
///
/// A PE that is not routed IBGDA stops this PE (`NoTransport`).
///
/// # Safety
/// rshmem must be initialized; `src` must be a local heap address readable for `bytes`; what happens
/// at the target is the NIC's check's business (it is the point of the hook).
#[doc(hidden)]
pub unsafe fn raw_write(pe: i32, src: *const u8, bytes: usize, raddr: u64, rkey: u32) {
    const CALL: &str = "rshmem test hook raw_write (IBGDA)\0";
    if pe < 0 || pe >= St.n_pes() || route(pe) != ROUTE_IBGDA {
        fail(CALL, Problem::NoTransport, pe, src as usize, bytes);
    }
    let t = table_or_fail(CALL, pe);
    // SAFETY: `pe` is routed IBGDA (checked above).
    let qp = unsafe { qp_for(CALL, t, pe) };
    let Some((l, _)) = local_of(t, src as u64) else { fail(CALL, Problem::Unregistered, pe, src as usize, bytes) };
    arch::fence_sc();
    // SAFETY: `src` stays readable until the WRITE completed (the caller's contract; waited for below).
    let end = unsafe { post(CALL, pe, qp, &[Wqe::rdma_write(0, Remote { addr: raddr, rkey }, l, bytes as u32)]) };
    wait(CALL, pe, qp, end);
}

/// The remote address and rkey of the symmetric address `local` on `pe`, as the table gives them (for
/// the test hook's callers, which perturb them). None without the IBGDA transport, and for a PE that
/// is not routed IBGDA or an address outside the heap.
#[doc(hidden)]
pub fn remote_address(pe: i32, local: *const u8) -> Option<(u64, u32)> {
    let t = table()?;
    let (base, size) = heap();
    let off = (local as u64).wrapping_sub(base);
    if pe < 0 || pe >= St.n_pes() || route(pe) != ROUTE_IBGDA || off >= size {
        return None;
    }
    // SAFETY: `pe` is routed IBGDA and `off` lies in the heap (both checked above).
    let (r, _) = unsafe { remote_of(t, pe, off) };
    Some((r.addr, r.rkey))
}
