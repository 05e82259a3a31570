//! The remote engine of one PE: what its threads share (see `transport::proxy` for the shape).
//!
//! - the request ring (`ring`), with its return area and staging chunks, that device threads (and
//!   host threads) post to, and its counters: `completed` (`Completion`) and `consumed`;
//! - the lanes (`lanes`): `L` connections to every PE on another node, each with its receive and
//!   reply rings and its thread;
//! - this PE as a target (`target`): the table of lanes the apply code walks, and who applies (the
//!   lane threads on the CPU backend, the apply kernel on a GPU);
//! - the failure of the engine (`Engine::fault`): recorded once, with its cause; every thread of the
//!   engine stops, host calls that wait on the engine return the error, and the PE is ended from one
//!   place (the engine's reaper) once its threads stopped.
//!
//! # Completion: one counter per lane, one watermark for the ring
//! The sender counts the requests it queues on each lane (`Lane::issued`); the peer acknowledges them
//! by count (`Lane::acked`). At the end of every drained batch the sender takes a *checkpoint*: the
//! ticket count drained, and for each lane with requests not yet acknowledged, its `issued`. When
//! every lane of the oldest checkpoint has been acknowledged that far, the ring's `completed` becomes
//! its ticket count (release): a quiet that read `head` waits until `completed` reaches it, with no
//! bookkeeping per request and no round trip of its own; any number of waiters share the counter.

use crate::error::{Error, Result};
use crate::log;
use crate::node::jobstatus::JobStatus;
use crate::platform::services::{DeviceMem, HostShared, Services};
use crate::transport::proxy::lanes::Lane;
use crate::transport::proxy::ring::{self, Channel};
use crate::transport::proxy::ring::Entry;
use crate::transport::proxy::stats::Stats;
use crate::transport::proxy::target::{Nic, Target, Verdict};
use rshmem_common::Backoff;
use rshmem_device::remote::proxy::{ReturnSlot, COMPLETED_OFF, CONSUMED_OFF, RETURN_SLOT_BYTES};
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;


/// Where a request the RDMA provider was offered goes ([`Rdma::issue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub(crate) enum Route {
    /// Carried by the RDMA path (complete once its `batch_done` returns).
    Rdma,
    /// Left to the lanes, whole.
    Tcp,
    /// A put-with-signal whose data the RDMA path wrote (complete at the target): only its signal is
    /// left to the lanes.
    SignalOnly,
}

/// What the RDMA provider may ask of the lanes: that every request sent to a PE through them be
/// complete at the target (before an RDMA operation that must not pass them).
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub(crate) trait TcpSide {
    /// Sends what is queued for `pe` and waits until the lanes to it are acknowledged.
    fn settle(&mut self, pe: u32) -> Result<()>;
}

/// A provider that carries requests as RDMA instead of frames (the proxy over verbs,
/// `proxy::verbs`): offered every request before the lanes, and told when a batch ends (before its
/// checkpoint, so that it waits there for what it posted). The lanes stay for what it leaves them.
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub(crate) trait Rdma: Send + Sync {
    /// Carries request `e`, or leaves it (or its signal) to the lanes.
    fn issue(&self, eng: &Engine, e: &Entry, tcp: &mut dyn TcpSide) -> Result<Route>;
    /// The end of a drained batch: every operation it posted completed, and its requests with it.
    fn batch_done(&self, eng: &Engine) -> Result<()>;
}

/// The engine's settings (from the runtime's configuration).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    /// Slots of the request ring (a power of two).
    pub(crate) slots: usize,
    /// Bytes of a staging chunk.
    pub(crate) chunk: u64,
    /// A thread's puts up to this many bytes are staged.
    pub(crate) thread_stage: u64,
    /// `Channel::flags`.
    pub(crate) flags: u64,
    /// Bytes of a lane's receive ring and reply ring (powers of two).
    pub(crate) ring_bytes: u64,
    pub(crate) reply_bytes: u64,
    /// Heap bytes a lane serves before the next: a request's lane is its heap offset shifted right by
    /// this, modulo the lanes.
    pub(crate) lane_shift: u32,
    /// Whether the engine's threads poll briefly before they sleep.
    pub(crate) spin: bool,
    /// How long a host wait on the engine may last.
    pub(crate) wait_limit: Duration,
    /// How long the apply kernel lingers without work.
    pub(crate) linger: Duration,
    /// Every request and frame is logged.
    pub(crate) trace: bool,
    /// The stages are counted (`RSHMEM_PROXY_STATS`).
    pub(crate) stats: bool,
}

/// The engine of one PE.
pub(crate) struct Engine {
    pub(crate) me: u32,
    pub(crate) npes: u32,
    pub(crate) set: Settings,
    pub(crate) services: Arc<dyn Services>,
    /// The request ring (header, slots), then its return area, then the staging chunks.
    pub(crate) chan: HostShared,
    /// The ring's `ChannelCounters` (device memory: posters update them).
    pub(crate) counters: DeviceMem,
    /// Every lane, grouped by peer (`peer_lanes`).
    pub(crate) lanes: Vec<Arc<Lane>>,
    /// `peer_lanes[pe]`: the indices in `lanes` of PE `pe`'s lanes (empty for this node's PEs).
    pub(crate) peer_lanes: Vec<Range<usize>>,
    pub(crate) target: Target,
    pub(crate) completion: Completion,
    /// Tickets below it are drained (the sender's count), for `consumed`.
    pub(crate) drained: AtomicU64,
    /// Finalize has begun: lanes close in order, and a peer's end is no longer an error.
    pub(crate) closing: AtomicBool,
    /// Every thread of the engine stops (a fault, or a finalize whose final barrier failed).
    pub(crate) abort: AtomicBool,
    /// The sender stops once the ring is idle.
    pub(crate) stop: AtomicBool,
    fault: Mutex<Option<Error>>,
    fault_cv: Condvar,
    /// A host call returned the failure to the program (`failure_for`): the program decides what
    /// happens next, and the reaper leaves the process alone.
    told: AtomicBool,
    /// The highest sequence number a host call posted and then gave up on (the engine failed): such
    /// requests stay in the ring with nobody waiting for them (`watch_stranded`).
    pub(crate) host_gave_up: AtomicU64,
    nic: OnceLock<Arc<dyn Nic>>,
    /// The stage counters, when counting is on.
    pub(crate) stats: Option<Arc<Stats>>,
    /// The RDMA provider, when the proxy runs over verbs (set before the threads start).
    rdma: OnceLock<Box<dyn Rdma>>,
    /// rshmrun's job status board, where a failure is recorded (None outside rshmrun).
    board: OnceLock<Arc<JobStatus>>,
}

/// Bytes of the ring (header and slots) in the channel memory, 64-aligned: the return area follows.
pub(crate) fn ring_area(slots: usize) -> usize {
    rshmem_device::remote::proxy::ring_bytes(slots).next_multiple_of(64)
}

/// Offset of the staging chunks in the channel memory: after the ring and the return area, 64-aligned.
pub(crate) fn stage_at(slots: usize) -> usize {
    (ring_area(slots) + rshmem_device::remote::proxy::return_area_bytes(slots)).next_multiple_of(64)
}

/// Bytes of a channel's memory: ring, return area and `slots` staging chunks of `chunk` bytes.
pub(crate) fn chan_bytes(slots: usize, chunk: u64) -> usize {
    stage_at(slots) + slots * chunk as usize
}

impl Engine {
    /// The engine over `lanes` (grouped by peer as `peer_lanes` says), with a new request ring and
    /// this PE as `target`.
    pub(crate) fn new(me: u32, npes: u32, set: Settings, services: Arc<dyn Services>, lanes: Vec<Arc<Lane>>, peer_lanes: Vec<Range<usize>>, target: Target) -> Result<Engine> {
        let chan = services.host_shared(chan_bytes(set.slots, set.chunk))?;
        let counters = services.device_mem(rshmem_device::remote::proxy::COUNTERS_BYTES)?;
        // SAFETY: chan is ours, zeroed, 64-aligned and holds ring_area(slots); nobody posts yet.
        unsafe { ring::init_ring(chan.host_ptr(), ring_area(set.slots), set.slots, set.chunk)? };
        // SAFETY: the header lives in `chan`, which the engine keeps as long as the Completion.
        let completion = unsafe { Completion::attach(chan.host_ptr()) };
        Ok(Engine {
            me,
            npes,
            set,
            services,
            chan,
            counters,
            lanes,
            peer_lanes,
            target,
            completion,
            drained: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            fault: Mutex::new(None),
            fault_cv: Condvar::new(),
            told: AtomicBool::new(false),
            host_gave_up: AtomicU64::new(0),
            nic: OnceLock::new(),
            stats: set.stats.then(|| Arc::new(Stats::default())),
            rdma: OnceLock::new(),
            board: OnceLock::new(),
        })
    }

    /// The request ring as device code addresses it.
    pub(crate) fn device_channel(&self) -> Channel {
        let d = self.chan.device_addr();
        let s = self.set.slots;
        Channel { ring: d, slots: s as u64, ret: d + ring_area(s) as u64, stage: d + stage_at(s) as u64, chunk: self.set.chunk, counters: self.counters.addr, thread_stage: self.set.thread_stage, flags: self.set.flags }
    }

    /// The request ring as host threads address it (the counters as `device_mem` gave them: host
    /// memory on the CPU backend only).
    pub(crate) fn host_channel(&self) -> Channel {
        let h = self.chan.host_ptr() as u64;
        let s = self.set.slots;
        Channel { ring: h, slots: s as u64, ret: h + ring_area(s) as u64, stage: h + stage_at(s) as u64, chunk: self.set.chunk, counters: self.counters.addr, thread_stage: self.set.thread_stage, flags: self.set.flags }
    }

    /// Adds `v` to the stage counter `f` picks, when counting is on.
    #[inline]
    pub(crate) fn count(&self, f: impl FnOnce(&Stats) -> &AtomicU64, v: u64) {
        if let Some(s) = &self.stats {
            s.add(f, v);
        }
    }

    /// Records failures on rshmrun's job status board too.
    pub(crate) fn set_board(&self, b: Arc<JobStatus>) {
        let _ = self.board.set(b);
    }

    /// Installs the RDMA provider (the proxy over verbs), before the sender starts.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub(crate) fn set_rdma(&self, r: Box<dyn Rdma>) {
        let _ = self.rdma.set(r);
    }

    /// The RDMA provider, if any.
    pub(crate) fn rdma(&self) -> Option<&dyn Rdma> {
        self.rdma.get().map(|b| &**b)
    }

    /// Installs the emulated NIC's hooks (the IBGDA transport), before any NIC frame can arrive.
    pub(crate) fn set_nic(&self, nic: Arc<dyn Nic>) {
        let _ = self.nic.set(nic);
    }

    /// The lane a request to `pe` at heap offset `offset` takes (`pe` is reached by the engine).
    pub(crate) fn lane_for(&self, pe: u32, offset: u64) -> usize {
        let r = &self.peer_lanes[pe as usize];
        r.start + ((offset >> self.set.lane_shift) as usize % r.len())
    }

    /// Whether the engine reaches `pe`.
    pub(crate) fn reaches(&self, pe: u32) -> bool {
        self.peer_lanes.get(pe as usize).is_some_and(|r| !r.is_empty())
    }

    // ------------------------------------------------------------------ what the lanes report

    /// A lane's `acked` moved: the completion may advance.
    pub(crate) fn acked_moved(&self) {
        self.completion.advance(&self.lanes);
    }

    /// A lane sent queued bytes: the ring's tail may advance (the sender looks on its next pass).
    pub(crate) fn tickets_moved(&self) {}

    /// A lane read a named source: `consumed` may advance.
    pub(crate) fn consumed_moved(&self) {
        let drained = self.drained.load(Ordering::Acquire);
        let oldest = self.lanes.iter().map(|l| l.oldest_copy.load(Ordering::Acquire)).min().unwrap_or(u64::MAX);
        let c = drained.min(oldest);
        // SAFETY: an 8-aligned word of the ring header (alive with self), accessed atomically.
        let w = unsafe { AtomicU64::from_ptr(self.chan.host_ptr().add(CONSUMED_OFF) as *mut u64) };
        w.fetch_max(c, Ordering::AcqRel);
    }

    /// Delivers `value` to request `seq`'s return slot (ReturnSlot protocol: wait until the previous
    /// user gave it back, write the value, publish `seq` with release).
    pub(crate) fn deliver(&self, seq: u64, value: u64) {
        let i = ((seq - 1) % self.set.slots as u64) as usize;
        // SAFETY: the return area follows the ring in `chan` and holds `slots` slots; i < slots.
        let slot = unsafe { self.chan.host_ptr().add(ring_area(self.set.slots) + i * RETURN_SLOT_BYTES) };
        // SAFETY: the slot is 16-aligned in chan (alive with self); `seq` is only accessed atomically,
        // `value` only by us (before the release) and the poster (after its acquire).
        let seq_w = unsafe { AtomicU64::from_ptr(slot.add(std::mem::offset_of!(ReturnSlot, seq)) as *mut u64) };
        let mut backoff = Backoff::new();
        while seq_w.load(Ordering::Acquire) != 0 {
            if self.abort.load(Ordering::Acquire) {
                return;
            }
            backoff.snooze();
        }
        // SAFETY: as above; the slot is free (seq 0), so nobody reads `value` until our release store.
        unsafe { std::ptr::write_volatile(slot.add(std::mem::offset_of!(ReturnSlot, value)) as *mut u64, value) };
        seq_w.store(seq, Ordering::Release);
    }

    /// The NIC hooks' verdict on a NIC request from `peer`; without them (a proxy-only job whose
    /// peer runs IBGDA) an error.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn nic_check(&self, peer: u32, kind: u8, key: u32, raddr: u64, len: u64, seq: u64, last: bool) -> Result<Verdict> {
        match self.nic.get() {
            Some(n) => Ok(n.check(peer, kind, key, raddr, len, seq, last)),
            None => Err(Error::new(format!(
                "PE {peer} sent an emulated-NIC frame, but this PE's remote transport is the proxy (set RSHMEM_REMOTE_TRANSPORT the same on every PE)"
            ))),
        }
    }

    /// A NIC answer from `peer` for this PE's NIC.
    pub(crate) fn nic_answer(&self, peer: u32, frame: &[u8]) -> Result<()> {
        match self.nic.get() {
            Some(n) => n.answer(peer, frame),
            None => Err(Error::new(format!(
                "PE {peer} sent an emulated-NIC answer, but this PE's remote transport is the proxy (set RSHMEM_REMOTE_TRANSPORT the same on every PE)"
            ))),
        }
    }

    /// How many of this PE's NIC frames to `peer` await an answer.
    pub(crate) fn nic_outstanding(&self, peer: u32) -> u64 {
        self.nic.get().map_or(0, |n| n.outstanding(peer))
    }

    // ------------------------------------------------------------------ failure

    /// Records the engine's failure (the first one wins) and stops its threads; the reaper ends the
    /// PE once they stopped (`reap`), host waits on the engine return the error meanwhile.
    pub(crate) fn fault(&self, e: Error) {
        let mut f = self.fault.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() && !self.closing.load(Ordering::Acquire) {
            if let Some(b) = self.board.get() {
                // What rshmrun names when it reports this PE (its last entry on the board).
                b.enter(&format!("remote engine failed: {e}"));
            }
            *f = Some(e);
            self.abort.store(true, Ordering::Release);
            for l in &self.lanes {
                l.wake();
            }
            self.fault_cv.notify_all();
        }
    }

    /// The engine's failure, if it failed. Host waits ask in every round: the lock is taken only once
    /// `abort` is set (a fault sets it, under the lock, after recording itself).
    pub(crate) fn failed(&self) -> Option<Error> {
        if !self.abort.load(Ordering::Acquire) {
            return None;
        }
        self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The engine's failure as host call `call`'s error, if it failed; the program has then been told
    /// (the reaper leaves the process to it).
    pub(crate) fn failure_for(&self, call: &str) -> Option<Error> {
        let e = self.failed()?;
        self.told.store(true, Ordering::Release);
        self.fault_cv.notify_all();
        Some(e.context(call.to_string()))
    }

    /// How long the reaper waits, after the engine's threads stopped, for a host call to return the
    /// failure to the program before it ends the PE itself.
    pub(crate) const TELL_GRACE: Duration = Duration::from_secs(2);

    /// The reaper: waits for a failure (or the engine's end), then, once the engine's threads stop
    /// (`joined`, at most a second), waits up to `TELL_GRACE` for a host call to return the failure to
    /// the program (`failure_for`). A program that was told decides what happens next: its calls that
    /// need the engine keep failing with the cause, and finalize ends what is left. One that was not
    /// told (its threads wait in kernels, which cannot see an error) is ended here, naming the cause:
    /// the one place a failure of the engine ends the process, and never before the engine's threads
    /// stopped.
    pub(crate) fn reap(&self, joined: impl FnOnce(Duration)) {
        let e = {
            let mut f = self.fault.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(e) = f.clone() {
                    break e;
                }
                if self.closing.load(Ordering::Acquire) {
                    return;
                }
                f = self.fault_cv.wait_timeout(f, Duration::from_millis(200)).unwrap_or_else(|p| p.into_inner()).0;
            }
        };
        joined(Duration::from_secs(1));
        let start = std::time::Instant::now();
        let mut f = self.fault.lock().unwrap_or_else(|p| p.into_inner());
        while !self.told.load(Ordering::Acquire) && !self.closing.load(Ordering::Acquire) {
            let Some(left) = Self::TELL_GRACE.checked_sub(start.elapsed()) else { break };
            f = self.fault_cv.wait_timeout(f, left.min(Duration::from_millis(50))).unwrap_or_else(|p| p.into_inner()).0;
        }
        drop(f);
        if self.closing.load(Ordering::Acquire) {
            return;
        }
        if self.told.load(Ordering::Acquire) {
            log::warn(format!("proxy: {e} (returned to the program; this PE's remote operations fail from here on)"));
            if !self.watch_stranded() {
                return;
            }
            log::error(format!(
                "proxy: {e}; requests that device code posted to the failed engine waited {:?} and can never complete: ending this PE",
                Self::STRANDED_LIMIT
            ));
            std::process::exit(1)
        }
        // The log's error path prefixes the PE ("rshmem error [PE n]: proxy: ...").
        log::error(format!("proxy: {e}"));
        std::process::exit(1)
    }

    /// How long requests may wait in the ring of a failed engine, after the program was told, before
    /// the reaper ends the PE: a kernel that posted them waits for a completion that cannot come.
    pub(crate) const STRANDED_LIMIT: Duration = Duration::from_secs(10);

    /// After the program was told of the failure: watches the request ring until finalize. Returns
    /// true if requests stayed in it, never to be drained (device code posted to the failed engine,
    /// and a kernel waits on them), for `STRANDED_LIMIT`; false once finalize begins. Host calls never
    /// post to a failed engine (they return the failure first).
    fn watch_stranded(&self) -> bool {
        let mut since: Option<std::time::Instant> = None;
        let mut f = self.fault.lock().unwrap_or_else(|p| p.into_inner());
        while !self.closing.load(Ordering::Acquire) {
            let head = self.head().unwrap_or(0);
            if head > self.drained.load(Ordering::Acquire).max(self.host_gave_up.load(Ordering::Acquire)) {
                if since.get_or_insert_with(std::time::Instant::now).elapsed() >= Self::STRANDED_LIMIT {
                    return true;
                }
            } else {
                since = None;
            }
            f = self.fault_cv.wait_timeout(f, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
        false
    }

    /// The ring's `head`: the tickets posters have taken so far.
    pub(crate) fn head(&self) -> Result<u64> {
        // SAFETY: the counters are this engine's device memory (alive with it), read as a whole word.
        unsafe { self.services.load_u64(self.counters.addr + rshmem_device::remote::proxy::HEAD_OFF as u64) }
    }

    /// Wakes the reaper (finalize).
    pub(crate) fn end_reaper(&self) {
        // Under the reaper's lock: between its look at `closing` and its wait it holds the lock, so
        // it cannot miss this wake-up (and sleep out its timeout while finalize joins it).
        let _f = self.fault.lock().unwrap_or_else(|p| p.into_inner());
        self.fault_cv.notify_all();
    }

    /// Waits (the host's way) until the ring's `completed` reaches `seq`; the engine's failure or the
    /// wait limit is an error naming `call`.
    pub(crate) fn wait_completed_host(&self, call: &str, seq: u64) -> Result<()> {
        let limit = self.set.wait_limit;
        let mut policy = ring::deadline(limit);
        let mut spins = 0u64;
        loop {
            if self.completion.completed() >= seq {
                return Ok(());
            }
            if let Some(e) = self.failure_for(call) {
                return Err(e);
            }
            spins += 1;
            if !policy(spins) {
                let lanes: Vec<String> = self.lanes.iter().filter(|l| !l.idle()).map(|l| format!("PE {} lane {}: {}", l.peer, l.index, l.in_flight())).collect();
                return Err(Error::new(format!(
                    "{call}: the remote engine did not complete this PE's requests within {limit:?} (waiting for request {seq}, completed {}; {})",
                    self.completion.completed(),
                    if lanes.is_empty() { "no lane awaits anything".into() } else { lanes.join("; ") }
                )));
            }
        }
    }
}

/// The ring's `completed`, advanced by checkpoints (see the module's notes).
pub(crate) struct Completion {
    completed: &'static AtomicU64,
    checkpoints: Mutex<VecDeque<Checkpoint>>,
}

/// A drained ticket count and, per lane still owing acknowledgements then, its count of requests.
struct Checkpoint {
    tickets: u64,
    need: Vec<(usize, u64)>,
}

impl Completion {
    /// # Safety
    /// `base` must point to a set-up ring header that stays mapped while the Completion is used (the
    /// caller keeps the memory alive); only this Completion stores `completed` from now on.
    unsafe fn attach(base: *mut u8) -> Completion {
        // SAFETY: the caller's contract; `completed` is an 8-aligned u64 of the header.
        let completed = unsafe { AtomicU64::from_ptr(base.add(COMPLETED_OFF) as *mut u64) };
        Completion { completed, checkpoints: Mutex::new(VecDeque::new()) }
    }

    /// The ring's `completed` now.
    pub(crate) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    /// Requests below ticket count `tickets` are drained: complete once every lane has been
    /// acknowledged as far as it has issued now.
    pub(crate) fn checkpoint(&self, tickets: u64, lanes: &[Arc<Lane>]) {
        let need: Vec<(usize, u64)> = lanes
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let issued = l.issued.load(Ordering::Acquire);
                (l.acked.load(Ordering::Acquire) < issued).then_some((i, issued))
            })
            .collect();
        let mut q = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = q.back_mut() {
            if last.need.is_empty() || need == last.need {
                // Nothing new to wait for since the last one: it covers these tickets too.
                last.tickets = tickets;
                last.need = need;
                drop(q);
                return self.advance(lanes);
            }
        }
        if need.is_empty() && q.is_empty() {
            self.completed.fetch_max(tickets, Ordering::AcqRel);
            return;
        }
        q.push_back(Checkpoint { tickets, need });
        drop(q);
        self.advance(lanes);
    }

    /// Raises `completed` past every checkpoint whose lanes have been acknowledged far enough.
    pub(crate) fn advance(&self, lanes: &[Arc<Lane>]) {
        let mut q = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = None;
        while let Some(c) = q.front() {
            if c.need.iter().all(|&(i, n)| lanes[i].acked.load(Ordering::Acquire) >= n) {
                done = Some(c.tickets);
                q.pop_front();
            } else {
                break;
            }
        }
        if let Some(t) = done {
            self.completed.fetch_max(t, Ordering::AcqRel);
        }
    }
}
