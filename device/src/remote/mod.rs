//! The device side of the remote transports: what a thread does to reach a PE whose heap is not mapped
//! into its process (a PE on another node).
//!
//! Every device call first translates the target address (`route::locate`); a PE whose heap is mapped
//! here is reached with loads, stores and atomics, and that is the hot path. Only when the PE has no
//! mapping does a call come here, through one `#[cold] #[inline(never)]` function per kind of
//! operation (`put_inline`, `get_inline`, `put`, `get`, `amo`, `signal`, `quiet`, `fence`), so the P2P
//! code carries no code of the remote path but a test and a call it never takes. Here the PE's route
//! (`DeviceState::route`) picks the transport:
//! - `ROUTE_PROXY` ([`proxy`]): a request into this PE's request ring (host memory), drained by the
//!   PE's remote engine on the host, which carries it to the target over one of the lanes to that PE
//!   (`rshmem::transport::proxy`). The ring is one per PE, so every request of the PE has its place
//!   in one order (its ticket), which the engine keeps where it matters: requests to one PE and one
//!   address range take one lane and are applied in ticket order at the target; a `fence` (a request
//!   of its own, [`proxy::op::FENCE`]) and a fenced request (`SUB_FENCED`: a barrier's flag) are
//!   applied after every earlier request to their PE, whatever lanes those took; a put-with-signal's
//!   signal after its data.
//! - Puts of a warp or block, and a thread's puts up to the ring's `thread_stage` bytes
//!   (`RSHMEM_PROXY_THREAD_STAGE`), travel in the ring: the group copies the bytes into the staging
//!   chunks of its tickets (pinned host memory on a GPU) and the engine sends them from there with no
//!   copy of its own (`op::PUT_STAGED`); a thread's put of at most 8 bytes travels in the request
//!   itself (`op::PUT_INLINE`). A thread's larger puts name their source, which the engine copies
//!   (a DMA on GPUs).
//! - `ROUTE_IBGDA` ([`ibgda`]): this thread builds mlx5 WQEs in the QP's send queue, updates the
//!   doorbell record and rings the doorbell itself, and polls the CQ (a real NIC, or rshmem's
//!   emulated one: the code is the same).
//! - anything else (no transport): the call stops the PE naming the call and the PE.
//!
//! Blocking puts return once their source may be reused: at once for bytes that travel in the ring,
//! after the engine read a named source otherwise (`consumed`). Blocking gets wait for their data.
//! `_nbi` calls, `p`, non-fetching AMOs and signals only post; `quiet` (and `barrier_all`) complete
//! them: `quiet` waits until the engine reports every ticket handed out before it complete
//! (`completed`, which the engine raises as the targets acknowledge the lanes' requests). Fetching
//! calls (`g`, fetching AMOs) get their value through the request's return slot.
//!
//! What arrives from other PEs is applied by [`lane`]'s code; a thread that waits for something
//! remote also applies it when no apply kernel runs ([`wait`]).

pub mod frame;
pub mod ibgda;
pub mod lane;
pub mod proxy;
pub mod wait;

use crate::arch;
use crate::route::{fail, heap_offset as offset, route};
use crate::state::{Channel, Field, CHANNEL_FENCE_EVERY, ROUTE_IBGDA, ROUTE_PROXY, SIGNAL_ADD, SIGNAL_SET};
use crate::types::{Problem, Scope, Sig};
use core::mem::offset_of;
use proxy::{op, Request, ReturnSlot, MAX_STAGED, RETURN_SLOT_BYTES, SUB_FENCED, SUB_RETURN};
use wait::idle;

/// This PE's request ring as the device state holds it (`ring == 0`: none).
#[inline(always)]
fn channel() -> Channel {
    Channel {
        ring: arch::state_u64(Field::channel(0, 0)),
        slots: arch::state_u64(Field::channel(0, 1)),
        ret: arch::state_u64(Field::channel(0, 2)),
        stage: arch::state_u64(Field::channel(0, 3)),
        chunk: arch::state_u64(Field::channel(0, 4)),
        counters: arch::state_u64(Field::channel(0, 5)),
        thread_stage: arch::state_u64(Field::channel(0, 6)),
        flags: arch::state_u64(Field::channel(0, 7)),
    }
}

/// The ring for a request to `pe`, or a failure naming the call: no transport reaches `pe`.
#[inline(always)]
fn proxy_for(call: &'static str, pe: i32, local: usize, len: usize) -> Channel {
    let ch = channel();
    if route(pe) != ROUTE_PROXY || ch.ring == 0 {
        fail(call, Problem::NoTransport, pe, local, len);
    }
    ch
}

/// Posts `req` to `ch` (waiting while the ring is full).
#[inline(always)]
unsafe fn post(ch: &Channel, req: &Request) -> u64 {
    // SAFETY: `ch` is the runtime's ring for this PE (non-zero ring, checked by the caller), mapped and
    // set up before the state was published, and alive until finalize.
    unsafe { proxy::post(ch, req) }
}

/// Waits until the engine has completed request `seq` (and every one before it).
#[inline(always)]
unsafe fn wait(ch: &Channel, seq: u64) {
    // SAFETY: as in `post`.
    unsafe { proxy::wait_completed(ch, seq) }
}

/// Waits for the value the engine delivers to request `seq`'s return slot of `ch` and frees the slot.
#[inline(always)]
unsafe fn take_return(call: &'static str, ch: &Channel, seq: u64) -> u64 {
    if ch.ret == 0 {
        fail(call, Problem::NoTransport, -1, 0, 0);
    }
    let slot = (ch.ret as usize + ((seq - 1) & (ch.slots - 1)) as usize * RETURN_SLOT_BYTES) as *mut u64;
    let seq_p = slot.wrapping_add(offset_of!(ReturnSlot, seq) / 8);
    let value_p = slot.wrapping_add(offset_of!(ReturnSlot, value) / 8);
    let mut spins = 0u64;
    // SAFETY: the return area has `slots` slots (runtime invariant, set up with the ring); the slot's
    // words are accessed only atomically, per the ReturnSlot protocol: the engine writes `value`, then
    // `seq` with release; our acquire of `seq == seq` makes `value` visible; we free the slot with a
    // release store of 0 after reading `value`, so the engine's next write of it comes after our read.
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
    // SAFETY: forwarded contract.
    unsafe { put_inline_with(call, local, len, bits, pe, false) }
}

/// `put_inline`, fenced when `fenced`: applied at the target after every earlier request of this PE
/// to it (a barrier's flag).
///
/// # Safety
/// As `put_inline`.
#[inline(always)]
pub(crate) unsafe fn put_inline_with(call: &'static str, local: usize, len: usize, bits: u64, pe: i32, fenced: bool) {
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); `local` is checked (the caller's contract).
        return unsafe { ibgda::put_inline(call, local, len, bits, pe) };
    }
    let ch = proxy_for(call, pe, local, len);
    let sub = if fenced { SUB_FENCED } else { 0 };
    let req = Request { op: op::PUT_INLINE, sub, pe: pe as u32, offset: offset(local), len: len as u64, value: bits, ..Request::default() };
    // SAFETY: see `post`.
    unsafe { post(&ch, &req) };
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
    let ch = proxy_for(call, pe, local, len);
    let req = Request { op: op::GET, sub: SUB_RETURN, pe: pe as u32, offset: offset(local), len: len as u64, ..Request::default() };
    // SAFETY: see `post`; the return slot protocol in `take_return`.
    unsafe {
        let seq = post(&ch, &req);
        take_return(call, &ch, seq)
    }
}

/// The bytes at `src` (at most 8, any alignment), zero-extended: what a thread's small put carries in
/// its request.
///
/// # Safety
/// `src` must be readable for `n <= 8` bytes.
#[inline(always)]
unsafe fn small_bits(src: *const u8, n: usize) -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: the caller's `n <= 8` readable bytes into the 8-byte local.
    unsafe { core::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), n) };
    u64::from_le_bytes(b)
}

/// putmem (and put_signal) to `pe` of `bytes` from `src` to the symmetric `dst_local`, by every
/// thread of `scope`. `blocking`: return once `src` may be reused.
///
/// Staged (warp and block puts, and a thread's up to `thread_stage` bytes): in requests of at most
/// `MAX_STAGED` bytes, the group's first thread reserves the tickets, the group copies the bytes into
/// their chunks, and the first thread publishes the request; the signal of a put_signal rides on the
/// last one. A thread's put of at most 8 bytes without a signal travels in its request. Otherwise one
/// request names the source, which the engine reads (a DMA on GPUs); a blocking one waits for that.
///
/// # Safety
/// As `ops::putmem_scoped`: `dst_local` checked, `src` readable for `bytes` (memory of this process or
/// GPU), unchanged until the call returns (blocking) or the next quiet (nbi: staged bytes are copied
/// before the call returns, so only an unstaged source must stay).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn put(scope: Scope, call: &'static str, dst_local: usize, src: *const u8, bytes: usize, pe: i32, blocking: bool, sig: Option<Sig>) {
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); the rest is the caller's contract.
        return unsafe { ibgda::put(scope, call, dst_local, src, bytes, pe, blocking, sig) };
    }
    let ch = proxy_for(call, pe, dst_local, bytes);
    if scope == Scope::Thread && sig.is_none() && (1..=8).contains(&bytes) {
        // SAFETY: `src` readable for `bytes` (the caller's contract); `dst_local` checked.
        return unsafe { put_inline_with(call, dst_local, bytes, small_bits(src, bytes), pe, false) };
    }
    scope.sync();
    let staged = ch.chunk != 0 && (scope != Scope::Thread || bytes as u64 <= ch.thread_stage);
    if staged {
        // SAFETY: the caller's contract; the channel is the runtime's.
        unsafe { put_staged(scope, &ch, dst_local, src, bytes, pe, sig) };
    } else if scope.rank() == 0 {
        if arch::is_local(src) {
            // A local variable (GPU thread stack) the engine cannot read, too large to stage.
            fail(call, Problem::LocalBuffer, pe, src as usize, bytes);
        }
        // The engine reads the source outside this thread (DMA on GPUs): make every store the group
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
            unsafe {
                let seq = post(&ch, &req);
                if blocking && bytes != 0 {
                    proxy::wait_consumed(&ch, seq);
                }
            }
        }
    }
    scope.sync();
}

/// The staged put of `put` (see there), by every thread of `scope`. Its source is copied before it
/// returns, so blocking or not it waits for nothing else.
///
/// # Safety
/// As `put`; `ch` is the runtime's channel with a staging area.
#[inline(always)]
unsafe fn put_staged(scope: Scope, ch: &Channel, dst_local: usize, src: *const u8, bytes: usize, pe: i32, sig: Option<Sig>) {
    let (rank, size) = (scope.rank(), scope.size());
    let mut done = 0usize;
    // At most MAX_STAGED bytes per request, and at most half the ring's chunks (a small ring).
    let most = (MAX_STAGED as usize).min((ch.slots as usize / 2).max(1) * ch.chunk as usize);
    loop {
        let n = (bytes - done).min(most);
        let last = done + n == bytes;
        let mut req = Request { op: op::PUT_STAGED, pe: pe as u32, offset: offset(dst_local + done), len: n as u64, ..Request::default() };
        if let (true, Some(s)) = (last, sig) {
            req.op = op::PUT_SIGNAL_STAGED;
            req.sub = s.op as u16;
            req.sig_offset = offset(s.local);
            req.sig_value = s.value;
        }
        if n == 0 && sig.is_none() {
            break;
        }
        let k = proxy::tickets(req.op, n as u64, ch.chunk);
        // SAFETY: the channel is the runtime's (see `post`); the first thread reserves, the group
        // copies into the reserved chunks (src + done is readable for n bytes: the caller's contract),
        // the group synchronizes, and the first thread fences and publishes (its release store comes
        // after every thread's staged stores are visible to the engine).
        unsafe {
            let t = if rank == 0 { proxy::reserve(ch, k) } else { 0 };
            let t = scope.bcast(t);
            proxy::stage_copy(ch, t, src.add(done), n, rank, size);
            if size > 1 && ch.flags & CHANNEL_FENCE_EVERY != 0 {
                arch::fence_sc();
            }
            scope.sync();
            if rank == 0 {
                if size > 1 {
                    // The group's staged stores precede this thread's fence (the barrier orders them
                    // at block scope; the fence is cumulative), so they are visible at system scope
                    // before the release of the request. One fence per group, not one per warp.
                    arch::fence_sc();
                }
                proxy::publish(ch, t, &req);
            }
        }
        done += n;
        if last {
            break;
        }
    }
}

/// getmem from `pe`: `bytes` from the symmetric `src_local` to the local `dst`, by every thread of
/// `scope`. `blocking`: wait until the data is here.
///
/// # Safety
/// As `ops::getmem_scoped`: `src_local` checked, `dst` writable for `bytes` by the engine and not
/// read before the call returns (blocking) or the next quiet (nbi).
#[cold]
#[inline(never)]
pub(crate) unsafe fn get(scope: Scope, call: &'static str, dst: *mut u8, src_local: usize, bytes: usize, pe: i32, blocking: bool) {
    if route(pe) == ROUTE_IBGDA {
        // SAFETY: routed IBGDA (tested above); the rest is the caller's contract.
        return unsafe { ibgda::get(scope, call, dst, src_local, bytes, pe, blocking) };
    }
    let ch = proxy_for(call, pe, src_local, bytes);
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
        unsafe {
            let seq = post(&ch, &req);
            if blocking {
                wait(&ch, seq);
            }
        }
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
    let ch = proxy_for(call, pe, local, width);
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
        let seq = post(&ch, &req);
        if fetch { take_return(call, &ch, seq) } else { 0 }
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
    let ch = proxy_for(call, pe, sig_local, 8);
    let req = Request { op: op::SIGNAL, sub: sig_op as u16, pe: pe as u32, sig_offset: offset(sig_local), sig_value: value, ..Request::default() };
    // SAFETY: see `post`.
    unsafe { post(&ch, &req) };
}

/// The remote part of `quiet`: waits until the engine has completed every ticket handed out so far
/// (this thread's among them), and every IBGDA QP has completed what was ready.
#[cold]
#[inline(never)]
pub(crate) fn quiet() {
    ibgda::quiet();
    // SAFETY: `proxy_head` reads the runtime's ring counters (checked non-zero there).
    let h = unsafe { proxy_head() };
    if h != 0 {
        // SAFETY: as in `post` (the ring exists: `proxy_head` returned a ticket count).
        unsafe { wait(&channel(), h) };
    }
}

/// Tickets handed out so far on this PE's request ring (0 without one).
///
/// # Safety
/// rshmem initialized.
#[inline(always)]
unsafe fn proxy_head() -> u64 {
    let ch = channel();
    if ch.ring == 0 {
        return 0;
    }
    // SAFETY: the runtime's ring (non-zero).
    unsafe { proxy::head(&ch) }
}

/// The remote part of `fence`: IBGDA's fenced NOPs; for the engine, a FENCE request: every later
/// request to a PE is applied after every earlier one to it (the engine orders the lanes).
#[cold]
#[inline(never)]
pub(crate) fn fence() {
    ibgda::fence();
    let ch = channel();
    if ch.ring != 0 {
        // SAFETY: the runtime's ring (non-zero), see `post`.
        unsafe { post(&ch, &Request { op: op::FENCE, ..Request::default() }) };
    }
}

/// What a barrier of the world team does in place of a quiet before it announces itself to members
/// reached through the engine: returns the ring's ticket count before the barrier's flags are
/// posted (the flags go fenced: each is applied after everything this PE sent its PE before); the
/// caller posts its flags, then waits with [`barrier_complete`], so that the wait for this PE's
/// earlier requests overlaps the flags' journey instead of preceding it.
#[inline(always)]
pub(crate) fn barrier_mark() -> u64 {
    ibgda::quiet();
    // SAFETY: as in `quiet`.
    unsafe { proxy_head() }
}

/// The second half of [`barrier_mark`]: waits until the engine completed the tickets below `h`.
#[cold]
#[inline(never)]
pub(crate) fn barrier_complete(h: u64) {
    if h != 0 {
        // SAFETY: as in `quiet`.
        unsafe { wait(&channel(), h) };
    }
}

/// Posts `req` (built by the host) to this PE's request ring from device code and, with `wait`, waits
/// for its completion: the host API's and the on-stream API's remote requests on GPUs go through here
/// (`rshmemi_proxy_request`), because the ring's `head` is advanced by GPU atomics in device memory.
///
/// # Safety
/// `req` must be a valid request for this PE's heap (the host checked it); its local address must be
/// readable/writable by the engine until completion.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
pub(crate) unsafe fn post_from_device(req: &Request, wait_done: bool) {
    let ch = channel();
    if ch.ring == 0 {
        fail("rshmemi_proxy_request\0", Problem::NoTransport, req.pe as i32, 0, 0);
    }
    // SAFETY: see `post`; the request's contract is the caller's.
    unsafe {
        let seq = post(&ch, req);
        if wait_done {
            wait(&ch, seq);
        }
    }
}
