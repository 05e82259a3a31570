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
//! - `ROUTE_PROXY` ([`proxy`]): a request into one of this PE's proxy channels (a ring in host memory
//!   each, drained by its own CPU proxy thread, with its own connection to every peer). Every thread of
//!   a group posts to the group's channel: a thread's and a warp's calls to their warp's, a block's to
//!   its block's ([`channel_of`]). Each channel is drained in ticket order and applied in order at the
//!   target, and a thread's requests get increasing tickets, so its requests of one scope to one PE
//!   are applied in program order. With one channel `fence` needs nothing more;
//!   with several, `fence` waits for every channel's requests (another thread's block-scoped put may be
//!   on another channel). `quiet` waits until every channel has completed every ticket handed out
//!   before it (completion is in ticket order, and a put counts as complete only once the target
//!   acknowledged it).
//! - Puts of a warp or block, and a thread's puts up to the channel's `thread_stage` bytes
//!   (`RSHMEM_PROXY_THREAD_STAGE`), travel in the channel: the group copies the bytes into the staging
//!   chunks of its tickets (pinned host memory on a GPU) and the proxy sends them from there, with no
//!   copy of its own (`op::PUT_STAGED`). A thread's larger puts name their source, which the proxy
//!   copies with the platform's copy engine: one GPU thread moves about one load's latency worth of
//!   bytes at a time, slower than a DMA for large transfers, while a warp or a block copies together.
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
use crate::state::{Channel, Field, CHANNEL_FENCE_EVERY, MAX_CHANNELS, ROUTE_IBGDA, ROUTE_PROXY, SIGNAL_ADD, SIGNAL_SET};
use crate::types::{Problem, Scope, Sig};
use core::mem::offset_of;
use proxy::{op, Request, ReturnSlot, MAX_STAGED, RETURN_SLOT_BYTES, SUB_RETURN};
use wait::idle;

/// Proxy channel `c` of this PE as the device state holds it (`ring == 0`: none).
#[inline(always)]
fn channel(c: usize) -> Channel {
    Channel {
        ring: arch::state_u64(Field::channel(c, 0)),
        slots: arch::state_u64(Field::channel(c, 1)),
        ret: arch::state_u64(Field::channel(c, 2)),
        stage: arch::state_u64(Field::channel(c, 3)),
        chunk: arch::state_u64(Field::channel(c, 4)),
        counters: arch::state_u64(Field::channel(c, 5)),
        thread_stage: arch::state_u64(Field::channel(c, 6)),
        flags: arch::state_u64(Field::channel(c, 7)),
    }
}

/// How many proxy channels this PE has (0: no proxy transport).
#[inline(always)]
fn channels() -> usize {
    (arch::state_u64(Field::PROXY_CHANNELS) as usize).min(MAX_CHANNELS)
}

/// The channel a call of `scope` posts to, the same for every thread of the group and for every call
/// of a thread at that scope (so its requests stay in order): a thread's and a warp's calls go to their
/// warp's channel, a block's to its block's (its first warp's), spread over the channels by block and
/// warp.
#[inline(always)]
pub fn channel_of(scope: Scope) -> usize {
    let n = channels();
    if n <= 1 {
        return 0;
    }
    let warp = match scope {
        Scope::Block => 0,
        _ => (arch::block_rank() / 32) as usize,
    };
    (arch::block_index() as usize + warp) % n
}

/// The channel for a request of `scope` to `pe`, or a failure naming the call: no transport reaches
/// `pe`.
#[inline(always)]
fn proxy_for(scope: Scope, call: &'static str, pe: i32, local: usize, len: usize) -> Channel {
    let ch = channel(channel_of(scope));
    if route(pe) != ROUTE_PROXY || ch.ring == 0 {
        fail(call, Problem::NoTransport, pe, local, len);
    }
    ch
}

/// Posts `req` to `ch` (waiting while the ring is full).
#[inline(always)]
unsafe fn post(ch: &Channel, req: &Request) -> u64 {
    // SAFETY: `ch` is one of the runtime's channels for this PE (non-zero ring, checked by the caller),
    // mapped and set up before the state was published, and alive until finalize.
    unsafe { proxy::post(ch, req) }
}

/// Waits until `ch` has completed request `seq`.
#[inline(always)]
unsafe fn wait(ch: &Channel, seq: u64) {
    // SAFETY: as in `post`.
    unsafe { proxy::wait_completed(ch, seq) }
}

/// Posts `req` and, when `blocking`, waits until the proxy has completed it.
///
/// # Safety
/// As `post`.
#[inline(always)]
unsafe fn submit(ch: &Channel, req: &Request, blocking: bool) {
    // SAFETY: forwarded contract.
    unsafe {
        let seq = post(ch, req);
        if blocking {
            wait(ch, seq);
        }
    }
}

/// Waits for the value the proxy delivers to request `seq`'s return slot of `ch` and frees the slot.
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
    let ch = proxy_for(Scope::Thread, call, pe, local, len);
    let req = Request { op: op::PUT_INLINE, pe: pe as u32, offset: offset(local), len: len as u64, value: bits, ..Request::default() };
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
    let ch = proxy_for(Scope::Thread, call, pe, local, len);
    let req = Request { op: op::GET, sub: SUB_RETURN, pe: pe as u32, offset: offset(local), len: len as u64, ..Request::default() };
    // SAFETY: see `post`; the return slot protocol in `take_return`.
    unsafe {
        let seq = post(&ch, &req);
        take_return(call, &ch, seq)
    }
}

/// putmem (and put_signal) to `pe` of `bytes` from `src` to the symmetric `dst_local`, by every
/// thread of `scope`. `blocking`: wait until the request is complete.
///
/// Staged (warp and block puts, and a thread's up to `thread_stage` bytes): in requests of at most
/// `MAX_STAGED` bytes, the group's first thread reserves the tickets, the group copies the bytes into
/// their chunks, and the first thread publishes the request; the signal of a put_signal rides on the
/// last one. Otherwise one request names the source, which the proxy reads (a DMA on GPUs).
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
    let ch = proxy_for(scope, call, pe, dst_local, bytes);
    scope.sync();
    let staged = ch.chunk != 0 && (scope != Scope::Thread || bytes as u64 <= ch.thread_stage);
    if staged {
        // SAFETY: the caller's contract; the channel is the runtime's.
        unsafe { put_staged(scope, &ch, dst_local, src, bytes, pe, blocking, sig) };
    } else if scope.rank() == 0 {
        if arch::is_local(src) {
            // A local variable (GPU thread stack) the proxy cannot read, too large to stage.
            fail(call, Problem::LocalBuffer, pe, src as usize, bytes);
        }
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
            unsafe { submit(&ch, &req, blocking) };
        }
    }
    scope.sync();
}

/// The staged put of `put` (see there), by every thread of `scope`.
///
/// # Safety
/// As `put`; `ch` is the runtime's channel with a staging area.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn put_staged(scope: Scope, ch: &Channel, dst_local: usize, src: *const u8, bytes: usize, pe: i32, blocking: bool, sig: Option<Sig>) {
    let (rank, size) = (scope.rank(), scope.size());
    let mut done = 0usize;
    let mut last_seq = 0u64;
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
        // after every thread's staged stores are visible to the proxy).
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
                    // before the release of the request. One fence per group, not one per warp: with
                    // 1024 threads a block put cost 32 system fences. (A block put's bytes past its
                    // first warp once read as zeros on an H100: the cause was the channel each warp
                    // posted to, ed40d17, not this order.)
                    arch::fence_sc();
                }
                last_seq = proxy::publish(ch, t, &req);
            }
        }
        done += n;
        if last {
            break;
        }
    }
    if blocking && rank == 0 && last_seq != 0 {
        // SAFETY: as above.
        unsafe { wait(ch, last_seq) };
    }
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
    let ch = proxy_for(scope, call, pe, src_local, bytes);
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
        unsafe { submit(&ch, &req, blocking) };
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
    let ch = proxy_for(Scope::Thread, call, pe, local, width);
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
    let ch = proxy_for(Scope::Thread, call, pe, sig_local, 8);
    let req = Request { op: op::SIGNAL, sub: sig_op as u16, pe: pe as u32, sig_offset: offset(sig_local), sig_value: value, ..Request::default() };
    // SAFETY: see `post`.
    unsafe { post(&ch, &req) };
}

/// The remote part of `quiet`: waits until every proxy channel has completed every ticket handed out
/// so far (this thread's among them), and every IBGDA QP has completed what was ready.
#[cold]
#[inline(never)]
pub(crate) fn quiet() {
    ibgda::quiet();
    proxy_quiet();
}

/// Waits for every channel's tickets handed out so far.
#[inline(always)]
fn proxy_quiet() {
    for c in 0..channels() {
        let ch = channel(c);
        if ch.ring == 0 {
            continue;
        }
        // SAFETY: one of the runtime's channels (non-zero ring), as in `post`.
        unsafe {
            let head = proxy::head(&ch);
            if head != 0 {
                wait(&ch, head);
            }
        }
    }
}

/// The remote part of `fence`: IBGDA's fenced NOPs; proxy requests of one channel are applied in order
/// already, and with several channels every channel's requests are waited for (a block's put may have
/// gone through another channel than this thread's next request).
#[cold]
#[inline(never)]
pub(crate) fn fence() {
    ibgda::fence();
    if channels() > 1 {
        proxy_quiet();
    }
}

/// Posts `req` (built by the host) to this PE's first proxy channel from device code and, with `wait`, waits
/// for its completion: the host API's and the on-stream API's remote requests on GPUs go through here
/// (`rshmemi_proxy_request`), because the channel's `head` is advanced by GPU atomics in device memory.
///
/// # Safety
/// `req` must be a valid request for this PE's heap (the host checked it); its local address must be
/// readable/writable by the proxy until completion.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
pub(crate) unsafe fn post_from_device(req: &Request, wait: bool) {
    let ch = channel(0);
    if ch.ring == 0 {
        fail("rshmemi_proxy_request\0", Problem::NoTransport, req.pe as i32, 0, 0);
    }
    // SAFETY: see `post`; the request's contract is the caller's.
    unsafe { submit(&ch, req, wait) };
}
