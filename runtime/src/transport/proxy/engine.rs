//! The proxy engine: the threads that carry this PE's requests to their targets and apply what peers
//! send (see `transport::proxy` for the shape). A PE has one engine per *channel*; each has its own
//! ring, its own drain thread and its own connection (lane) to every peer, and all share this PE as
//! the target (`Target`).
//!
//! - **Draining.** The channel's *drain* thread takes requests off its ring in ticket order
//!   (`Drain::poll_entries`) and queues their frames on the peers' connections: a staged put's bytes
//!   are sent from the ring's staging chunks where the device wrote them, with no copy; every frame of
//!   a batch leaves in one gathered `sendmsg` per peer, followed by one QUIET per peer that got
//!   acknowledged requests. The slots and chunks are freed (`Drain::release`) once the batch is sent.
//!   Completion is decoupled from draining ([`Completion`]): a request is complete when its effect is
//!   done *at the target*, and the ring's `completed` is the largest complete prefix.
//! - **Receiving and answering.** Per connection a *receiver* thread applies what the peer sends (its
//!   requests, through `Target` and the receiver's `Applier`, and the answers to ours) and a
//!   *responder* thread sends the answers to the peer's requests (GET data the receiver read, fetched
//!   values, QUIET completions), so that the receiver never blocks on sending: two receivers each
//!   blocked on sending to the other would deadlock. A receiver applies puts in bursts: when a burst
//!   ends (no further frame is ready) it starts the burst's copies and goes on without waiting for
//!   them; it *settles* (the copies landed, the inbound operations applied) before a QUIET's
//!   acknowledgement, when inbound operations wait to be applied, and before anything whose order
//!   needs it (`target`).
//! - **Completion at the target.** PUTs, inline puts, signals and non-fetching AMOs are acknowledged in
//!   batches: after each drained batch, one QUIET per peer that got such requests; the peer's QUIET
//!   completion (sent once everything before the QUIET was settled there) completes them. GETs
//!   complete when their last response chunk has been written locally; fetching AMOs when their
//!   response arrived (the old value goes to the request's return slot, `ReturnSlot` protocol).
//! - **Failures.** A peer connection that fails (EOF without CLOSE, reset, timeout, a bad frame) is
//!   fatal for this PE: the error, naming the peer and what was in flight, goes to the log's error path
//!   and the process exits with 1, so rshmrun ends the job; nothing waits on a dead peer.
//! - **Extensions.** Frames the engine does not serve itself (the emulated NIC's) go to an
//!   `Extension` its creator hands in (the IBGDA transport's responder); the engine knows no NIC.
//!
//! A put that names its source (a thread's put larger than the staging limit, a host put) is staged
//! through two pinned buffers: the staging copy of chunk k+1 overlaps the send of chunk k. A GET is
//! read at the target when its request arrives (in the connection's order, so a later write to the
//! range is not seen), into a host buffer the responder sends from.

use crate::config::env;
use crate::error::{Error, Result};
use crate::log;
use crate::platform::services::{DeviceMem, HostShared};
use crate::transport::proxy::link::{next_job, FrameLink, Job, Link, PendingAmo, PendingGet};
use crate::transport::proxy::ring::{self, Channel, Completion, Drain, Entry};
use crate::transport::proxy::target::{Applier, Target, CLOSE_WAIT};
use crate::transport::proxy::{stats, tcp};
use crate::transport::wire::{self, AmoOp, Chunks, Message, Signal, SignalOp, Width};
use rshmem_common::Backoff;
use rshmem_device::remote::proxy::{op, return_area_bytes, ring_bytes, ReturnSlot, COUNTERS_BYTES, RETURN_SLOT_BYTES, SUB_RETURN};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long a PE keeps running after a peer's connection ended without CLOSE while nothing was in flight.
const GONE_GRACE: Duration = Duration::from_secs(4);
/// How often idle receivers look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Where a request the RDMA path was offered goes ([`Rdma::issue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub(crate) enum Route {
    /// Carried (posted, or completed) by the RDMA path.
    Rdma,
    /// Left to the TCP frame path, whole.
    Tcp,
    /// A put-with-signal whose data the RDMA path wrote (complete at the target): only its signal is
    /// left to the TCP path.
    SignalOnly,
}

/// A provider that carries requests as RDMA instead of frames (the proxy over verbs,
/// `proxy::verbs`): offered every request before the TCP path, and told when a batch ends (before its
/// staging chunks are released, so it waits there for what reads them). The TCP connections stay for
/// what it leaves to them.
pub(crate) trait Rdma: Send + Sync {
    /// Carries request `e` of `engine`'s ring, or leaves it (or its signal) to the TCP path.
    fn issue(&self, engine: &Engine, e: &Entry, b: &mut Batch) -> Result<Route>;
    /// The end of a drained batch: every operation it posted completed, and its requests with it.
    fn batch_done(&self, engine: &Engine) -> Result<()>;
}

/// Frames the engine does not serve itself, and their bookkeeping: the IBGDA transport's emulated NIC
/// (its responder answers NIC frames; the answers to this PE's own NIC frames go back to its NIC).
pub(crate) trait Extension: Send + Sync {
    /// Applies one such frame from `link`'s peer (answers go through `link.push`).
    fn frame(&self, engine: &Engine, link: &Link, m: Message<'_>) -> Result<()>;
    /// How many of this PE's own frames to `peer` await an answer.
    fn outstanding(&self, peer: u32) -> u64;
}

/// The engine of one channel of a PE: its ring, return area and staging chunks, its counters, its
/// links (one connection to each PE of another node), and this PE as a target (shared by the PE's
/// channels).
pub(crate) struct Engine {
    /// The RDMA provider, when the proxy runs over verbs (set before the threads start). First, so
    /// that it drops first: its registrations cover the channel memory below.
    pub(crate) rdma: Option<Box<dyn Rdma>>,
    pub(crate) target: Arc<Target>,
    /// The channel's number, which is also the lane of its connections.
    pub(crate) index: usize,
    npes: u32,
    /// The ring (header, slots), then the return area, then the staging chunks.
    pub(crate) chan: HostShared,
    /// The channel's `ChannelCounters` (device memory: posters update them).
    pub(crate) counters: DeviceMem,
    pub(crate) slots: usize,
    /// Bytes of a staging chunk.
    pub(crate) chunk: u64,
    /// A thread's puts up to this many bytes are staged (`Channel::thread_stage`).
    pub(crate) thread_stage: u64,
    /// `Channel::flags` (`RSHMEM_PROXY_GROUP_FENCE`).
    pub(crate) flags: u64,
    pub(crate) completion: Completion,
    pub(crate) links: Vec<Option<Link>>,
    /// The drain thread stops once the ring is idle.
    pub(crate) stop: AtomicBool,
    /// Set by a finalize whose final barrier failed: nothing waits for the peers' CLOSE.
    pub(crate) abort: AtomicBool,
    pub(crate) max_chunk: u32,
    ext: Option<Arc<dyn Extension>>,
}

/// Ends this PE: a failed peer connection (or a broken ring) is fatal. The message names the peer
/// and what was in flight; rshmrun sees exit code 1 and ends the job.
pub(crate) fn fatal(what: impl std::fmt::Display) -> ! {
    // The log's error path prefixes the PE ("rshmem error [PE n]: proxy: ...").
    log::error(format!("proxy: {what}"));
    std::process::exit(1)
}

/// Whether every request and frame is logged (RSHMEM_DEBUG=trace): for finding where a job stops.
pub(crate) fn tracing() -> bool {
    static T: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *T.get_or_init(|| env::get(env::DEBUG).is_some_and(|v| v.trim().eq_ignore_ascii_case("trace")))
}

/// `RSHMEM_PROXY_THREAD_STAGE`'s default: a GPU thread copies about one load latency's worth of bytes
/// at a time (a few hundred bytes per microsecond), so beyond a few KiB the proxy's DMA copy is
/// faster; below, staging saves the proxy a synchronous copy per request.
pub(crate) const DEFAULT_THREAD_STAGE: u64 = 4096;

/// Bytes of the ring (header and slots) in the channel memory, 64-aligned: the return area follows.
pub(crate) fn ring_area(slots: usize) -> usize {
    ring_bytes(slots).next_multiple_of(64)
}

/// Offset of the staging chunks in the channel memory: after the ring and the return area, 64-aligned.
pub(crate) fn stage_at(slots: usize) -> usize {
    (ring_area(slots) + return_area_bytes(slots)).next_multiple_of(64)
}

/// Bytes of a channel's memory: ring, return area and `slots` staging chunks of `chunk` bytes.
pub(crate) fn chan_bytes(slots: usize, chunk: u64) -> usize {
    stage_at(slots) + slots * chunk as usize
}

/// What the drain gathers over one batch: per target PE, the last request the batch's QUIET to it
/// acknowledges, and which links have queued frames.
pub(crate) struct Batch {
    quiet: Vec<Option<u64>>,
    dirty: Vec<bool>,
}

impl Engine {
    /// The engine of channel `index`: makes its memory (`slots` slots, staging chunks of `chunk`
    /// bytes, counters) and sets its ring up; `links` are its connections to the peers.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(target: Arc<Target>, index: usize, npes: u32, slots: usize, chunk: u64, links: Vec<Option<Link>>, max_chunk: u32, ext: Option<Arc<dyn Extension>>) -> Result<Engine> {
        let services = target.services();
        let chan = services.host_shared(chan_bytes(slots, chunk))?;
        let counters = services.device_mem(COUNTERS_BYTES)?;
        // SAFETY: chan is ours, zeroed, 64-aligned and holds ring_area(slots); nobody posts yet.
        unsafe { ring::init_ring(chan.host_ptr(), ring_area(slots), slots, chunk)? };
        // SAFETY: the header was just set up; chan lives in the engine as long as the Completion.
        let completion = unsafe { Completion::attach(chan.host_ptr()) };
        let thread_stage = match env::get(env::PROXY_THREAD_STAGE) {
            Some(v) => env::parse_thread_stage(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::PROXY_THREAD_STAGE)))?,
            None => DEFAULT_THREAD_STAGE,
        };
        let flags = match env::get(env::PROXY_GROUP_FENCE) {
            Some(v) => match env::parse_group_fence(&v) {
                Ok(true) => rshmem_device::state::CHANNEL_FENCE_EVERY,
                Ok(false) => 0,
                Err(e) => return Err(Error::new(format!("{}={v:?}: {e}", env::PROXY_GROUP_FENCE))),
            },
            None => 0,
        };
        Ok(Engine { rdma: None, target, index, npes, chan, counters, slots, chunk, thread_stage, flags, completion, links, stop: AtomicBool::new(false), abort: AtomicBool::new(false), max_chunk, ext })
    }

    /// The channel as device code addresses it.
    pub(crate) fn device_channel(&self) -> Channel {
        let d = self.chan.device_addr();
        Channel { ring: d, slots: self.slots as u64, ret: d + ring_area(self.slots) as u64, stage: d + stage_at(self.slots) as u64, chunk: self.chunk, counters: self.counters.addr, thread_stage: self.thread_stage, flags: self.flags }
    }

    /// The channel as host threads address it (the counters as `device_mem` gave them: host memory
    /// on the CPU backend only).
    pub(crate) fn host_channel(&self) -> Channel {
        let h = self.chan.host_ptr() as u64;
        Channel { ring: h, slots: self.slots as u64, ret: h + ring_area(self.slots) as u64, stage: h + stage_at(self.slots) as u64, chunk: self.chunk, counters: self.counters.addr, thread_stage: self.thread_stage, flags: self.flags }
    }

    /// The link to PE `pe`, or an error when the proxy does not reach it.
    pub(crate) fn link(&self, pe: u32) -> Result<&Link> {
        self.links
            .get(pe as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::new(format!("proxy: PE {pe} is not reached by the proxy (it is on this node, or not in the job)")))
    }

    /// How many of this PE's frames to `peer` an extension still awaits answers for.
    fn ext_outstanding(&self, peer: u32) -> u64 {
        self.ext.as_ref().map_or(0, |e| e.outstanding(peer))
    }

    fn ret_slot(&self, seq: u64) -> *mut u8 {
        let i = ((seq - 1) % self.slots as u64) as usize;
        // SAFETY: pointer arithmetic only: the return area follows the ring in chan and holds `slots`
        // slots; i < slots.
        unsafe { self.chan.host_ptr().add(ring_area(self.slots) + i * RETURN_SLOT_BYTES) }
    }

    /// Delivers `value` to request `seq`'s return slot (ReturnSlot protocol: wait until the previous
    /// user gave it back, write the value, publish `seq` with release).
    pub(crate) fn deliver(&self, seq: u64, value: u64) {
        if tracing() {
            log::debug(format!("proxy trace: deliver {seq} = {value:#x}"));
        }
        let slot = self.ret_slot(seq);
        // SAFETY: the slot is 16-aligned in chan (alive with self); `seq` is only accessed atomically,
        // `value` only by us (before the release) and the poster (after its acquire).
        let seq_w = unsafe { AtomicU64::from_ptr(slot.add(std::mem::offset_of!(ReturnSlot, seq)) as *mut u64) };
        let mut backoff = Backoff::new();
        while seq_w.load(Ordering::Acquire) != 0 {
            if self.target.closing.load(Ordering::Acquire) {
                return;
            }
            backoff.snooze();
        }
        // SAFETY: as above; the slot is free (seq 0), so nobody reads `value` until our release store.
        unsafe { std::ptr::write_volatile(slot.add(std::mem::offset_of!(ReturnSlot, value)) as *mut u64, value) };
        seq_w.store(seq, Ordering::Release);
    }


    // ------------------------------------------------------------ the drain thread

    pub(crate) fn drain(self: Arc<Self>, staging: [HostShared; 2]) {
        let stage_bytes = self.slots * self.chunk as usize;
        // SAFETY: the ring and its staging chunks live in self.chan, which this thread keeps alive
        // (Arc) while it drains; this is the only drain of the ring.
        let attached = unsafe { Drain::attach(self.chan.host_ptr(), ring_area(self.slots), self.chan.host_ptr().add(stage_at(self.slots)), stage_bytes) };
        let mut d: Drain<'static> = match attached {
            Ok(d) => d,
            Err(e) => fatal(e),
        };
        let n = self.npes as usize;
        let mut batch = Batch { quiet: vec![None; n], dirty: vec![false; n] };
        let r = d.run(
            &mut batch,
            || self.stop.load(Ordering::Acquire),
            |b, e| {
                let t = stats::Timer::start();
                let r = self.issue(e, &staging, b);
                t.stop(|s| &s.send_ns);
                stats::add(|s| &s.requests, 1);
                r
            },
            |b| {
                let t = stats::Timer::start();
                let r = self.batch_done(b);
                t.stop(|s| &s.send_ns);
                stats::add(|s| &s.batches, 1);
                r
            },
        );
        if let Err(e) = r {
            fatal(e);
        }
    }

    /// The end of a drained batch: one QUIET to every peer that got acknowledged requests, then every
    /// queued frame sent (before the drain frees the batch's staging chunks).
    fn batch_done(&self, b: &mut Batch) -> Result<()> {
        if let Some(r) = &self.rdma {
            r.batch_done(self)?;
        }
        for q in 0..b.quiet.len() {
            self.flush_peer(b, q)?;
        }
        Ok(())
    }

    /// Sends what the batch queued for PE `q`, after a QUIET for its acknowledged requests.
    fn flush_peer(&self, b: &mut Batch, q: usize) -> Result<()> {
        if let Some(seq) = b.quiet[q].take() {
            let link = self.links[q].as_ref().expect("a quiet only for linked peers");
            link.send(|c| c.queue_message(&Message::Quiet { seq })).map_err(|e| e.context(format!("sending QUIET (request {seq}) to PE {q}")))?;
            b.dirty[q] = true;
        }
        if std::mem::take(&mut b.dirty[q]) {
            let link = self.links[q].as_ref().expect("frames only for linked peers");
            link.send(|c| c.flush()).map_err(|e| e.context(format!("sending requests to PE {q}")))?;
        }
        Ok(())
    }

    /// Sends what is queued for PE `q` and waits until every request sent to it over TCP is complete
    /// at the target (acknowledged, answered): what the RDMA path waits for before an operation that
    /// must not pass them.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub(crate) fn settle_tcp(&self, b: &mut Batch, q: usize) -> Result<()> {
        self.flush_peer(b, q)?;
        let link = self.link(q as u32)?;
        let limit = self.target.wait_limit;
        let mut go_on = ring::deadline(limit);
        let mut spins = 0u64;
        while !self.nothing_in_flight(link) {
            spins += 1;
            if !go_on(spins) {
                return Err(Error::new(format!("PE {q} did not complete the requests sent to it over TCP within {limit:?}{}", self.in_flight(link))));
            }
        }
        Ok(())
    }

    /// Queues request `e`'s frames to its target (or completes it, for a NOP).
    fn issue(&self, e: Entry, staging: &[HostShared; 2], b: &mut Batch) -> Result<()> {
        let (seq, r) = (e.seq, &e.req);
        ring::check_request(r, self.npes, self.target.heap_size)?;
        if tracing() {
            log::debug(format!("proxy trace: channel {} issue {seq}: op {} sub {:#x} to PE {} offset {:#x} len {} value {:#x}", self.index, r.op, r.sub, r.pe, r.offset, r.len, r.value));
        }
        if r.op == op::NOP {
            self.completion.done_tickets(seq, e.tickets);
            return Ok(());
        }
        let link = self.link(r.pe)?;
        if link.gone.load(Ordering::Acquire) {
            fatal(format!("request {seq} to PE {}: that PE closed its connection earlier (it exited or crashed)", r.pe));
        }
        let pe = r.pe as usize;
        let me = self.target.me;
        let signal = || -> Result<Signal> {
            let op = match r.sub as i32 {
                rshmem_device::SIGNAL_SET => SignalOp::Set,
                rshmem_device::SIGNAL_ADD => SignalOp::Add,
                s => return Err(Error::new(format!("unknown signal operator {s}"))),
            };
            Ok(Signal { offset: r.sig_offset, op, value: r.sig_value })
        };
        let acked = |b: &mut Batch| {
            link.pending.lock().unwrap().acks.push_back((seq, e.tickets));
            b.quiet[pe] = Some(seq);
        };
        if let Some(rdma) = &self.rdma {
            match rdma.issue(self, &e, b)? {
                Route::Rdma => return Ok(()),
                Route::Tcp => {}
                Route::SignalOnly => {
                    // The data is at the target (its WRITEs completed): the signal follows it.
                    let signal = signal()?;
                    acked(b);
                    link.send(|c| c.queue_message(&Message::Signal { seq, signal }))?;
                    return Ok(());
                }
            }
        }
        b.dirty[pe] = true;
        match r.op {
            op::PUT_STAGED | op::PUT_SIGNAL_STAGED => {
                let sig = if r.op == op::PUT_SIGNAL_STAGED { Some(signal()?) } else { None };
                acked(b);
                // SAFETY: the staged bytes stay valid and unchanged until the drain releases this
                // batch, which it does only after `batch_done` flushed every queued frame.
                let [p0, p1] = unsafe { e.staged() };
                link.send(|c| {
                    let chunk = c.send_chunk().min(self.max_chunk);
                    for ch in Chunks::put(me, seq, r.offset, r.len, chunk, sig) {
                        let (a, z) = (ch.range.start, ch.range.end);
                        let first = &p0[a.min(p0.len())..z.min(p0.len())];
                        let second = &p1[a.saturating_sub(p0.len())..z.saturating_sub(p0.len())];
                        // SAFETY: as above: both pieces outlive the flush in `batch_done`.
                        unsafe { c.queue(&ch.header, [first, second])? };
                    }
                    Ok(())
                })?;
            }
            op::PUT | op::PUT_SIGNAL => {
                let sig = if r.op == op::PUT_SIGNAL { Some(signal()?) } else { None };
                acked(b);
                let chunk = link.send(|c| Ok(c.send_chunk()))?.min(self.max_chunk);
                // The poster promises `src` readable for `len` bytes until completion.
                self.staged_send(link, staging, Chunks::put(me, seq, r.offset, r.len, chunk, sig), r.src as usize)?;
            }
            op::PUT_INLINE => {
                acked(b);
                let bytes = r.value.to_le_bytes();
                link.send(|c| c.queue_message(&Message::Put { seq, offset: r.offset, data: &bytes[..r.len as usize], last: true }))?;
            }
            op::SIGNAL => {
                let signal = signal()?;
                acked(b);
                link.send(|c| c.queue_message(&Message::Signal { seq, signal }))?;
            }
            op::GET => {
                let to_ret = r.sub & SUB_RETURN != 0;
                if to_ret && r.len > 8 {
                    return Err(Error::new(format!("GET of {} bytes into a return slot (at most 8)", r.len)));
                }
                if r.len == 0 {
                    self.completion.done(seq);
                    return Ok(());
                }
                let p = PendingGet { dst: r.src, offset: r.offset, len: r.len, got: 0, ret: to_ret.then_some([0; 8]) };
                link.pending.lock().unwrap().gets.insert(seq, p);
                link.send(|c| c.queue_message(&Message::GetRequest { seq, offset: r.offset, len: r.len }))?;
            }
            op::AMO => {
                let code = (r.sub & 0xff) as u8;
                let aop = AmoOp::from_u8(code).ok_or_else(|| Error::new(format!("unknown AMO code {code}")))?;
                let width = if r.len == 4 { Width::W4 } else { Width::W8 };
                let mask = if r.len == 4 { u32::MAX as u64 } else { u64::MAX };
                let value = if aop.has_operand() { r.value & mask } else { 0 };
                let compare = if aop == AmoOp::CompareSwap { r.sig_value & mask } else { 0 };
                if aop.fetches() {
                    let p = PendingAmo { ret: r.sub & SUB_RETURN != 0, dst: r.src, width: r.len as u32 };
                    link.pending.lock().unwrap().amos.insert(seq, p);
                } else {
                    acked(b);
                }
                link.send(|c| c.queue_message(&Message::Amo { seq, op: aop, width, offset: r.offset, value, compare }))?;
            }
            other => return Err(Error::new(format!("unknown operation {other}"))),
        }
        Ok(())
    }

    // ------------------------------------------------------------ receivers

    pub(crate) fn receive(self: Arc<Self>, mut rx: Box<dyn FrameLink>, mut ap: Applier) {
        let peer = rx.peer();
        let link = self.links[peer as usize].as_ref().expect("a receiver only for linked peers");
        let mut closing_since: Option<Instant> = None;
        loop {
            // The end of a burst: start its copies, or settle it (and acknowledge its QUIETs) where
            // something waits for it, before waiting for more.
            if ap.pending() && !rx.ready() {
                let r = if ap.must_settle() { self.settle(link, &mut ap) } else { self.target.start_copies(&mut ap) };
                if let Err(e) = r {
                    if self.target.closing.load(Ordering::Acquire) {
                        log::debug(format!("proxy: after finalize: {e}"));
                        return;
                    }
                    fatal(format!("applying what PE {peer} sent: {e}"));
                }
            }
            if self.target.closing.load(Ordering::Acquire) {
                let since = *closing_since.get_or_insert_with(Instant::now);
                if self.abort.load(Ordering::Acquire) || since.elapsed() > CLOSE_WAIT {
                    log::debug(format!("proxy: PE {peer} sent no CLOSE within {CLOSE_WAIT:?} of finalize"));
                    return;
                }
            }
            match rx.recv_timeout(POLL) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(e) => {
                    if self.target.closing.load(Ordering::Acquire) {
                        log::debug(format!("proxy: after finalize: {e}"));
                        return;
                    }
                    // A failed network link (ETIMEDOUT, EHOSTUNREACH...) is named at once, not
                    // waited out as a peer that closed.
                    if self.nothing_in_flight(link) && !tcp::link_failed(&e) {
                        // The peer went away while we owed it nothing and it owed us nothing: most
                        // often a PE that reported an error and exited. This PE may be about to
                        // report its own; it ends only if it is still running after GONE_GRACE (then
                        // something may wait on the dead peer), or at once when it next needs it.
                        link.gone.store(true, Ordering::Release);
                        log::debug(format!("proxy: PE {peer} closed its connection: {e}"));
                        let me = self.clone();
                        std::thread::spawn(move || {
                            std::thread::sleep(GONE_GRACE);
                            if !me.target.closing.load(Ordering::Acquire) {
                                fatal(format!(
                                    "PE {peer} closed its connection {GONE_GRACE:?} ago without finalizing (it exited or crashed: {e}); ending this PE so that nothing waits on it"
                                ));
                            }
                        });
                        return;
                    }
                    fatal(format!("connection to PE {peer} failed: {e}{}", self.in_flight(link)));
                }
            }
            let m = match rx.current() {
                Ok(m) => m,
                Err(e) => fatal(format!("connection to PE {peer}: {e}")),
            };
            match self.apply(link, &mut ap, m) {
                Ok(true) => {}
                Ok(false) => {
                    link.closed.store(true, Ordering::Release);
                    return;
                }
                Err(e) => fatal(format!("connection to PE {peer}: {e}{}", self.in_flight(link))),
            }
        }
    }

    /// Whether this PE awaits nothing from `link`'s peer.
    fn nothing_in_flight(&self, link: &Link) -> bool {
        let p = link.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.gets.is_empty() && p.amos.is_empty() && p.acks.is_empty() && self.ext_outstanding(link.peer) == 0
    }

    /// What this PE still awaits from `link`'s peer, for error messages.
    fn in_flight(&self, link: &Link) -> String {
        let p = link.pending.lock().unwrap_or_else(|e| e.into_inner());
        let (g, a, k) = (p.gets.len(), p.amos.len(), p.acks.len());
        let nic = self.ext_outstanding(link.peer);
        if g + a + k == 0 && nic == 0 {
            return "; nothing was in flight to it".into();
        }
        if g + a + k == 0 {
            return format!("; in flight to it: {nic} emulated-NIC operations (IBGDA WQEs) awaiting their answer");
        }
        let first = p.gets.keys().chain(p.amos.keys()).copied().chain(p.acks.iter().map(|a| a.0)).min().unwrap_or(0);
        let bytes: u64 = p.gets.values().map(|g| g.len - g.got).sum();
        format!(
            "; in flight to it: {g} gets ({bytes} bytes not yet received), {a} fetching atomics, {k} puts/signals/atomics awaiting acknowledgement (oldest request {first})"
        )
    }

    /// Settles what the receiver of `link` holds (`Target::settle`) and acknowledges its QUIETs.
    pub(crate) fn settle(&self, link: &Link, ap: &mut Applier) -> Result<()> {
        let t = stats::Timer::start();
        self.target.settle(ap)?;
        t.stop(|s| &s.settle_ns);
        stats::add(|s| &s.settles, 1);
        // A QUIET completion covers every request up to it: the last one answers them all.
        if let Some(seq) = ap.acks.drain(..).max() {
            link.push(Job::QuietAck { seq });
        }
        Ok(())
    }

    /// Applies one frame from `link`'s peer (its operations through the receiver's applier `ap`).
    /// Ok(false): the peer closed in order.
    pub(crate) fn apply(&self, link: &Link, ap: &mut Applier, m: Message<'_>) -> Result<bool> {
        let peer = link.peer;
        if tracing() {
            log::debug(format!("proxy trace: channel {} from PE {peer}: {:?}", self.index, m.kind()));
        }
        let t = &*self.target;
        stats::add(|s| &s.frames, 1);
        match m {
            Message::Put { offset, data, .. } => t.write(ap, peer, offset, data)?,
            Message::PutSignal { offset, data, signal, .. } => {
                t.write(ap, peer, offset, data)?;
                t.signal(ap, peer, signal)?;
            }
            Message::Signal { signal, .. } => t.signal(ap, peer, signal)?,
            Message::Amo { seq, op, width, offset, value, compare } => {
                if let Some(old) = t.amo(ap, peer, op, width, offset, value, compare)? {
                    if tracing() {
                        log::debug(format!("proxy trace: applied AMO {seq} from PE {peer}: {} at {offset:#x} -> old {old:#x}", op.name()));
                    }
                    link.push(Job::Amo { seq, width, value: old });
                }
            }
            Message::GetRequest { seq, offset, len } => {
                // The bytes are read here, in the connection's order, after everything before the
                // request is settled, not later by the responder: a write the peer sent after this
                // GET (ordered behind it by a fence, e.g. reusing the range) must not be seen by it.
                // The cost is a host buffer of the GET's size until it is sent; the responder sends it
                // without blocking this receiver.
                self.settle(link, ap)?;
                let data = t.load(peer, offset, len)?;
                link.push(Job::Get { seq, offset, data });
            }
            Message::Quiet { seq } => ap.acks.push(seq),
            Message::GetResponse { seq, offset, data, last } => {
                let mut p = link.pending.lock().unwrap();
                let g = p.gets.get_mut(&seq).ok_or_else(|| Error::new(format!("PE {peer} answered GET {seq}, which this PE did not ask it")))?;
                let end = g.offset + g.len;
                let dlen = data.len() as u64;
                if offset < g.offset || offset + dlen > end {
                    return Err(Error::new(format!(
                        "PE {peer} answered GET {seq} with bytes [{offset:#x}, +{dlen:#x}) outside the requested [{:#x}, +{:#x})",
                        g.offset, g.len
                    )));
                }
                let at = (offset - g.offset) as usize;
                match &mut g.ret {
                    Some(buf) => buf[at..at + data.len()].copy_from_slice(data),
                    // SAFETY: the poster promised `dst` writable for `len` bytes until completion;
                    // at + data.len() <= len (checked above).
                    None => unsafe { self.target.services().copy((g.dst as usize + at) as *mut u8, data.as_ptr(), data.len())? },
                }
                g.got += dlen;
                if last {
                    let g = p.gets.remove(&seq).expect("present");
                    drop(p);
                    if g.got != g.len {
                        return Err(Error::new(format!("PE {peer} answered GET {seq} with {} of {} bytes", g.got, g.len)));
                    }
                    if let Some(buf) = g.ret {
                        self.deliver(seq, u64::from_le_bytes(buf));
                    }
                    self.completion.done(seq);
                }
            }
            Message::AmoResponse { seq, width: _, value } => {
                let a = link
                    .pending
                    .lock()
                    .unwrap()
                    .amos
                    .remove(&seq)
                    .ok_or_else(|| Error::new(format!("PE {peer} answered atomic {seq}, which this PE did not ask it")))?;
                if a.ret {
                    self.deliver(seq, value);
                } else if a.dst != 0 {
                    let b = value.to_le_bytes();
                    // SAFETY: the poster promised `src` writable for the AMO's width.
                    unsafe { self.target.services().copy(a.dst as *mut u8, b.as_ptr(), a.width as usize)? };
                }
                self.completion.done(seq);
            }
            Message::QuietAck { seq } => {
                if tracing() {
                    log::debug(format!("proxy trace: QUIET completion {seq} from PE {peer}"));
                }
                let done: Vec<(u64, u64)> = {
                    let mut p = link.pending.lock().unwrap();
                    let mut v = Vec::new();
                    while let Some(&a) = p.acks.front().filter(|a| a.0 <= seq) {
                        p.acks.pop_front();
                        v.push(a);
                    }
                    v
                };
                for (s, k) in done {
                    self.completion.done_tickets(s, k);
                }
            }
            m @ (Message::NicWrite { .. } | Message::NicRead { .. } | Message::NicAtomic { .. } | Message::NicReadResponse { .. } | Message::NicAck { .. }) => {
                let ext = self.ext.as_ref().ok_or_else(|| {
                    Error::new(format!("PE {peer} sent an emulated-NIC frame, but this PE's remote transport is the proxy (set RSHMEM_REMOTE_TRANSPORT the same on every PE)"))
                })?;
                // The NIC's operations apply at once: after everything before them.
                self.settle(link, ap)?;
                ext.frame(self, link, m)?;
            }
            Message::Error { text } => return Err(Error::new(format!("PE {peer} reported an error and closed: {text}"))),
            Message::Close => {
                self.settle(link, ap)?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    // ------------------------------------------------------------ responders

    pub(crate) fn respond(self: Arc<Self>, q: usize, jobs: mpsc::Receiver<Job>) {
        let link = self.links[q].as_ref().expect("a responder only for linked peers");
        let mut last = Instant::now();
        while let Some(j) = next_job(&jobs, &mut last) {
            let r = match j {
                Job::QuietAck { seq } => link.send(|c| c.send_message(&Message::QuietAck { seq })),
                Job::Amo { seq, width, value } => link.send(|c| c.send_message(&Message::AmoResponse { seq, width, value })),
                Job::Get { seq, offset, data } => self.get_response(link, seq, offset, &data),
                Job::Send(f) => link.send(f),
            };
            if let Err(e) = r {
                if self.target.closing.load(Ordering::Acquire) {
                    return;
                }
                fatal(format!("answering PE {q}: {e}"));
            }
        }
    }

    fn get_response(&self, link: &Link, seq: u64, offset: u64, data: &[u8]) -> Result<()> {
        let chunk = link.send(|c| Ok(c.send_chunk()))?.min(self.max_chunk);
        for ch in Chunks::get_response(self.target.me, seq, offset, data.len() as u64, chunk) {
            link.send(|c| c.send(&ch.header, &data[ch.range.clone()]))?;
        }
        Ok(())
    }

    /// Two pinned staging buffers of a chunk each (one being filled while the other is sent).
    pub(crate) fn staging(&self) -> Result<[HostShared; 2]> {
        Ok([self.target.services().host_shared(self.max_chunk as usize)?, self.target.services().host_shared(self.max_chunk as usize)?])
    }

    /// Sends the chunks of a transfer whose bytes start at `src` (any address the platform copies
    /// from: host memory, the heap, GPU memory), staged through pinned buffers. With several chunks
    /// the staging copy of chunk k+1 (a helper thread) overlaps the send of chunk k.
    fn staged_send(&self, link: &Link, staging: &[HostShared; 2], chunks: Chunks, src: usize) -> Result<()> {
        let chunks: Vec<wire::Chunk> = chunks.collect();
        let stage = |b: usize, ch: &wire::Chunk| -> Result<()> {
            // SAFETY: the caller guarantees src..src+len readable (the transfer's bytes); the chunk's
            // range lies inside the transfer; staging[b] holds max_chunk >= range.len() bytes and is
            // written only by the one stager while the sender does not read it (buffer hand-off
            // through the channels below).
            unsafe { self.target.services().copy(staging[b].host_ptr(), (src + ch.range.start) as *const u8, ch.range.len()) }
        };
        let bytes = |b: usize, n: usize| {
            // SAFETY: staging[b] holds range.len() bytes just staged into it, not written again until
            // the buffer is handed back.
            unsafe { std::slice::from_raw_parts(staging[b].host_ptr(), n) }
        };
        if chunks.len() == 1 {
            let ch = &chunks[0];
            stage(0, ch)?;
            return link.send(|c| c.send(&ch.header, bytes(0, ch.range.len())));
        }
        std::thread::scope(|sc| {
            let (full_tx, full_rx) = mpsc::sync_channel::<(usize, Result<()>)>(2);
            let (free_tx, free_rx) = mpsc::sync_channel::<usize>(2);
            let _ = free_tx.send(0);
            let _ = free_tx.send(1);
            let list = &chunks;
            let stage = &stage;
            sc.spawn(move || {
                for ch in list {
                    let Ok(b) = free_rx.recv() else { return };
                    let r = stage(b, ch);
                    let failed = r.is_err();
                    if full_tx.send((b, r)).is_err() || failed {
                        return;
                    }
                }
            });
            for ch in &chunks {
                let (b, r) = full_rx.recv().map_err(|_| Error::new("proxy: the staging thread stopped"))?;
                r?;
                link.send(|c| c.send(&ch.header, bytes(b, ch.range.len())))?;
                let _ = free_tx.send(b);
            }
            Ok(())
        })
    }

}
