//! The device side of the remote transports: what a thread does to reach a PE whose heap is not mapped
//! into its process (a PE on another node).
//!
//! Every device call first translates the target address (`route::locate`); a PE whose heap is mapped
//! here is reached with loads, stores and atomics, and that is the hot path. Only when the PE has no
//! mapping does a call come here, through one `#[cold] #[inline(never)]` function per kind of
//! operation (`put_inline`, `get_inline`, `put`, `get`, `amo`, `signal`, `quiet`, `fence`), so the P2P
//! code carries no code of the remote path but a test and a call it never takes (`rshmem_p32`'s PTX:
//! 87 instructions, not 170 with the remote arm pasted in; the P2P path is the same instructions).
//! Here the PE's route (`DeviceState::route`) picks the transport:
//! - `ROUTE_PROXY` ([`proxy`]): a request into the ring in host memory; this PE's CPU proxy thread
//!   carries it over the network. Ordering: one ring per PE, drained in ticket order, one connection
//!   per peer, applied in order at the target. A thread's requests get increasing tickets (its
//!   fetch_adds of `head` are ordered), so its requests to one PE are applied in program order:
//!   `fence` needs nothing more than the P2P fence. `quiet` waits until the proxy has completed every
//!   ticket handed out before it (completion is in ticket order, and a put counts as complete only
//!   once the target acknowledged it).
//! - `ROUTE_IBGDA` ([`ibgda`]): this thread builds mlx5 WQEs in the QP's send queue, updates the
//!   doorbell record and rings the doorbell itself, and polls the CQ (a real NIC, or rshmem's
//!   emulated one: the code is the same).
//! - anything else (no transport): the call stops the PE naming the call and the PE.
//!
//! Blocking calls (`putmem`, `getmem`, blocking put_signal) wait for their request's completion, which
//! also means the proxy has finished reading the source buffer. `_nbi` calls, `p`, non-fetching AMOs
//! and signals only post; `quiet` (and `barrier_all`) complete them. Fetching calls (`g`, fetching
//! AMOs) get their value through the request's return slot.
//!
//! Warp- and block-scoped calls: the group synchronizes (its threads' source data is then written),
//! one thread posts ONE request for the whole range after a system-scope fence (the proxy reads the
//! source with a DMA copy, outside this SM), and the group synchronizes again after the wait.

pub mod ibgda;
pub mod inbound;
pub mod proxy;
pub mod wait;

use crate::arch;
use crate::route::{fail, heap_offset as offset, route};
use crate::state::{Field, RingRef, ROUTE_IBGDA, ROUTE_PROXY, SIGNAL_ADD, SIGNAL_SET};
use crate::types::{Problem, Scope, Sig};
use core::mem::offset_of;
use proxy::{op, Request, ReturnSlot, RETURN_SLOT_BYTES, SUB_RETURN};
use wait::idle;

/// This PE's proxy ring (header 0: none).
#[inline(always)]
fn ring() -> RingRef {
    RingRef { header: arch::state_u64(Field::PROXY_RING_HEADER), slots: arch::state_u64(Field::PROXY_RING_SLOTS) }
}

/// The ring to post requests for `pe` to, or a failure naming the call: no transport reaches `pe`.
#[inline(always)]
fn proxy_for(call: &'static str, pe: i32, local: usize, len: usize) -> RingRef {
    let r = ring();
    if route(pe) != ROUTE_PROXY || r.header == 0 {
        fail(call, Problem::NoTransport, pe, local, len);
    }
    r
}

/// Posts `req` to `ring` (waiting while the ring is full).
#[inline(always)]
unsafe fn post(ring: RingRef, req: &Request) -> u64 {
    // SAFETY: `ring` is the runtime's ring for this PE (non-zero header, checked by the caller), mapped
    // and set up before the state was published, and alive until finalize.
    unsafe { proxy::post(ring, req) }
}

#[inline(always)]
unsafe fn wait(ring: RingRef, seq: u64) {
    const CALL: &str = "rshmem proxy quiet (waiting for the proxy to complete requests)\0";
    let mut s = 0u64;
    // SAFETY: as in `post`. The policy never gives up, so the only error is a ring that is none.
    let r = unsafe {
        proxy::wait_completed_with(ring, seq, |_| {
            idle(&mut s, CALL);
            true
        })
    };
    if r.is_err() {
        fail(CALL, Problem::NotInitialized, -1, ring.header as usize, ring.slots as usize);
    }
}

/// Posts `req` and, when `blocking`, waits until the proxy has completed it.
///
/// # Safety
/// As `post`.
#[inline(always)]
unsafe fn submit(ring: RingRef, req: &Request, blocking: bool) {
    // SAFETY: forwarded contract.
    unsafe {
        let seq = post(ring, req);
        if blocking {
            wait(ring, seq);
        }
    }
}

/// Waits for the value the proxy delivers to request `seq`'s return slot and frees the slot.
#[inline(always)]
unsafe fn take_return(call: &'static str, ring: RingRef, seq: u64) -> u64 {
    let ret = arch::state_u64(Field::PROXY_RET) as usize;
    if ret == 0 {
        fail(call, Problem::NoTransport, -1, 0, 0);
    }
    let slot = (ret + ((seq - 1) & (ring.slots - 1)) as usize * RETURN_SLOT_BYTES) as *mut u64;
    let seq_p = slot.wrapping_add(offset_of!(ReturnSlot, seq) / 8);
    let value_p = slot.wrapping_add(offset_of!(ReturnSlot, value) / 8);
    let mut spins = 0u64;
    // SAFETY: the return area has `slots` slots (runtime invariant, set up with the ring); the slot's
    // words are accessed only atomically, per the ReturnSlot protocol: the proxy writes `value`, then
    // `seq` with release; our acquire of `seq == seq` makes `value` visible; we free the slot with a
    // release store of 0 after reading `value`, so the proxy's next write of it comes after our read.
    unsafe {
        while arch::load_acquire_u64(seq_p) != seq {
            idle(&mut spins, call);
        }
        let v = arch::load_relaxed_u64(value_p);
        arch::store_release_u64(seq_p, 0);
        v
    }
}

/// `p` of `len` bytes (`bits` holds them, zero-extended) to `local` on `pe`: posted, completed by
/// quiet.
///
/// # Safety
/// `local` is a checked symmetric address of `len` bytes.
#[cold]
#[inline(never)]
pub(crate) unsafe fn put_inline(call: &'static str, local: usize, len: usize, bits: u64, pe: i32) {
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); `local` is checked (the caller's contract).
        return unsafe { ibgda::put_inline(call, local, len, bits, pe) };
    }
    let ring = proxy_for(call, pe, local, len);
    let req = Request { op: op::PUT_INLINE, pe: pe as u32, offset: offset(local), len: len as u64, value: bits, ..Request::default() };
    // SAFETY: see `post`.
    unsafe { post(ring, &req) };
}

/// `g` of `len` (1..=8) bytes at `local` on `pe`: the bytes, zero-extended.
///
/// # Safety
/// `local` is a checked symmetric address of `len` bytes.
#[cold]
#[inline(never)]
pub(crate) unsafe fn get_inline(call: &'static str, local: usize, len: usize, pe: i32) -> u64 {
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); `local` is checked (the caller's contract).
        return unsafe { ibgda::get_inline(call, local, len, pe) };
    }
    let ring = proxy_for(call, pe, local, len);
    let req = Request { op: op::GET, sub: SUB_RETURN, pe: pe as u32, offset: offset(local), len: len as u64, ..Request::default() };
    // SAFETY: see `post`; the return slot protocol in `take_return`.
    unsafe {
        let seq = post(ring, &req);
        take_return(call, ring, seq)
    }
}

/// putmem (and put_signal) to `pe` of `bytes` from `src` to the symmetric `dst_local`, by every
/// thread of `scope` (one request for the whole range). `blocking`: wait until the request is complete.
///
/// # Safety
/// As `ops::putmem_scoped`: `dst_local` checked, `src` readable for `bytes` by the proxy (memory of
/// this process or GPU), unchanged until the call returns (blocking) or the next quiet (nbi).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn put(scope: Scope, call: &'static str, dst_local: usize, src: *const u8, bytes: usize, pe: i32, blocking: bool, sig: Option<Sig>) {
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); the rest is the caller's contract.
        return unsafe { ibgda::put(scope, call, dst_local, src, bytes, pe, blocking, sig) };
    }
    let ring = proxy_for(call, pe, dst_local, bytes);
    scope.sync();
    if scope.rank() == 0 && arch::is_local(src) {
        // A local variable (GPU thread stack): the proxy cannot read it. Up to 8 bytes travel in the
        // request itself; more is an error naming the call.
        if bytes > 8 {
            fail(call, Problem::LocalBuffer, pe, src as usize, bytes);
        }
        let mut bits = 0u64;
        // SAFETY: src is readable for bytes <= 8 (the caller's contract); bits has 8 bytes.
        unsafe { core::ptr::copy_nonoverlapping(src, &mut bits as *mut u64 as *mut u8, bytes) };
        if bytes != 0 {
            let req = Request { op: op::PUT_INLINE, pe: pe as u32, offset: offset(dst_local), len: bytes as u64, value: bits, ..Request::default() };
            // SAFETY: see `post`.
            unsafe { post(ring, &req) };
        }
        if let Some(s) = sig {
            // Posted after the data by the same thread, so applied after it at the target.
            // SAFETY: the signal word was checked by the caller.
            unsafe { signal(call, s.local, s.value, s.op, pe) };
        }
        if blocking {
            quiet();
        }
    } else if scope.rank() == 0 {
        // The proxy reads the source outside this thread (DMA on GPUs): make every store the group
        // made to it visible at system scope first.
        arch::fence_sc();
        let mut req = Request { op: op::PUT, pe: pe as u32, offset: offset(dst_local), len: bytes as u64, src: src as u64, ..Request::default() };
        if let Some(s) = sig {
            req.op = if bytes == 0 { op::SIGNAL } else { op::PUT_SIGNAL };
            req.sub = s.op as u16;
            req.sig_offset = offset(s.local);
            req.sig_value = s.value;
            if bytes == 0 {
                (req.offset, req.len, req.src) = (0, 0, 0);
            }
        }
        if bytes != 0 || sig.is_some() {
            // SAFETY: see `post`; the source's contract is the caller's.
            unsafe { submit(ring, &req, blocking) };
        }
    }
    scope.sync();
}

/// getmem from `pe`: `bytes` from the symmetric `src_local` to the local `dst`, by every thread of
/// `scope`. `blocking`: wait until the data is here.
///
/// # Safety
/// As `ops::getmem_scoped`: `src_local` checked, `dst` writable for `bytes` by the proxy and not
/// read before the call returns (blocking) or the next quiet (nbi).
#[cold]
#[inline(never)]
pub(crate) unsafe fn get(scope: Scope, call: &'static str, dst: *mut u8, src_local: usize, bytes: usize, pe: i32, blocking: bool) {
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); the rest is the caller's contract.
        return unsafe { ibgda::get(scope, call, dst, src_local, bytes, pe, blocking) };
    }
    let ring = proxy_for(call, pe, src_local, bytes);
    scope.sync();
    if scope.rank() == 0 && bytes != 0 && arch::is_local(dst) {
        // A local variable: up to 8 bytes come back through the return slot, as for `g`.
        if bytes > 8 {
            fail(call, Problem::LocalBuffer, pe, dst as usize, bytes);
        }
        // SAFETY: as `get_inline`; dst is writable for bytes <= 8 (the caller's contract).
        unsafe {
            let bits = get_inline(call, src_local, bytes, pe);
            core::ptr::copy_nonoverlapping(&bits as *const u64 as *const u8, dst, bytes);
        }
    } else if scope.rank() == 0 && bytes != 0 {
        let req = Request { op: op::GET, pe: pe as u32, offset: offset(src_local), len: bytes as u64, src: dst as u64, ..Request::default() };
        // SAFETY: see `post`; the destination's contract is the caller's.
        unsafe { submit(ring, &req, blocking) };
    }
    scope.sync();
}

/// An AMO on the `width`-byte word at `local` on `pe`. `fetch`: wait for the old value and return it
/// (else posted, completed by quiet, and 0 is returned).
///
/// # Safety
/// `local` is a checked symmetric address, aligned to `width`.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn amo(call: &'static str, local: usize, width: usize, code: u16, value: u64, compare: u64, pe: i32, fetch: bool) -> u64 {
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); `local` is checked (the caller's contract).
        return unsafe { ibgda::amo(call, local, width, code, value, compare, pe, fetch) };
    }
    let ring = proxy_for(call, pe, local, width);
    let req = Request {
        op: op::AMO,
        sub: code | if fetch { SUB_RETURN } else { 0 },
        pe: pe as u32,
        offset: offset(local),
        len: width as u64,
        value,
        sig_value: compare,
        ..Request::default()
    };
    // SAFETY: see `post`; the return slot protocol in `take_return`.
    unsafe {
        let seq = post(ring, &req);
        if fetch { take_return(call, ring, seq) } else { 0 }
    }
}

/// signal_op on `pe`: posted, completed by quiet.
///
/// # Safety
/// `sig_local` is a checked symmetric u64.
#[cold]
#[inline(never)]
pub(crate) unsafe fn signal(call: &'static str, sig_local: usize, value: u64, sig_op: i32, pe: i32) {
    debug_assert!(sig_op == SIGNAL_SET || sig_op == SIGNAL_ADD);
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); `sig_local` is checked (the caller's contract).
        return unsafe { ibgda::signal(call, sig_local, value, sig_op, pe) };
    }
    let ring = proxy_for(call, pe, sig_local, 8);
    let req = Request { op: op::SIGNAL, sub: sig_op as u16, pe: pe as u32, sig_offset: offset(sig_local), sig_value: value, ..Request::default() };
    // SAFETY: see `post`.
    unsafe { post(ring, &req) };
}

/// The remote part of `quiet`: waits until every proxy request handed out so far (this thread's among
/// them) is complete at its target, and every IBGDA QP has completed what was ready.
#[cold]
#[inline(never)]
pub(crate) fn quiet() {
    ibgda::quiet();
    let ring = ring();
    if ring.header == 0 {
        return;
    }
    // SAFETY: the runtime's ring (non-zero header), as in `post`; `head` is accessed only atomically.
    unsafe {
        let head = arch::load_acquire_u64((ring.header as usize + proxy::HEAD_OFF) as *const u64);
        wait(ring, head);
    }
}

/// The remote part of `fence` (IBGDA's fenced NOPs; proxy requests are applied in order already).
#[cold]
#[inline(never)]
pub(crate) fn fence() {
    ibgda::fence();
}

/// Posts `req` (built by the host) to this PE's proxy ring from device code and, with `wait`, waits
/// for its completion: the host API's and the on-stream API's remote requests on GPUs go through here
/// (`rshmemi_proxy_request`), because the ring's `head` is advanced by GPU atomics, and a CPU's atomic
/// on the same pinned word is not atomic with them.
///
/// # Safety
/// `req` must be a valid request for this PE's heap (the host checked it); its local address must be
/// readable/writable by the proxy until completion.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
pub(crate) unsafe fn post_from_device(req: &Request, wait: bool) {
    let ring = ring();
    if ring.header == 0 {
        fail("rshmemi_proxy_request\0", Problem::NoTransport, req.pe as i32, 0, 0);
    }
    // SAFETY: see `post`; the request's contract is the caller's.
    unsafe { submit(ring, req, wait) };
}
