//! This PE as the target of remote operations: what the proxy engine (and the emulated NIC's
//! responder) does to this PE's heap for a peer — writes, reads, signals and atomics, each checked
//! against what the platform backs.
//!
//! - AMOs, signals and small aligned puts (1, 2, 4 or 8 bytes: `p`, barrier epochs) go through the
//!   inbound queue (`rshmem_device::remote::inbound`): device threads of this PE apply them in order,
//!   atomically with the GPU's own atomics, with no CUDA call.
//! - Larger writes are applied in bursts (`Applier`): a receiver copies each frame's bytes into its
//!   pinned bounce buffer (merging writes to consecutive heap ranges) and, when the burst ends,
//!   *starts* the whole burst's copies to the heap on its copy queue (`Services::copy_queue`: on CUDA
//!   the copy engine, on the CPU backend a copy thread) and goes on reading frames while they land: no
//!   frame waits for a copy of its own, and no burst waits for the previous one. The bounce buffer is
//!   used in `SEGMENTS` segments in turn; a receiver waits for a segment's copies only when it comes
//!   back to that segment.
//!
//! # Order at the target
//! A peer's frames on one connection are applied in the order sent: where an operation of one kind
//! (copy, inbound operation) follows pending ones of the other, the receiver first waits for what is
//! pending (the queued inbound operations before it starts copies; the started copies before it queues
//! an inbound operation), so a signal is never visible before the data of the put it follows, and two
//! writes to one word land in the order sent (copies land in the order started). A GET reads the heap
//! only after *settling* (everything pending complete and visible to this PE's device code), and a
//! QUIET is acknowledged only after everything before it is settled.

use crate::error::{Error, Result};
use crate::platform::backend::Backend;
use crate::platform::services::{CopyQueue, HostShared, Services};
use crate::transport::proxy::stats;
use crate::transport::wire::{AmoOp, Signal, SignalOp, Width};
use rshmem_common::Backoff;
use rshmem_device::remote::inbound::{self, InboundOp};
use rshmem_device::remote::proxy::amo;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an inbound operation waits for a device thread of this PE (one waiting for the proxy polls
/// the queue every few microseconds) before the service kernel is launched for it. A launch costs a
/// few microseconds and runs beside any waiting thread (the lock decides who applies it), so a short
/// wait only saves launches when threads are waiting, and a long one is added to every remote `p` or
/// AMO on a GPU whose kernels are not waiting for the proxy.
const KICK_AFTER: Duration = Duration::from_micros(3);
/// How often the kick is repeated while the operation waits (see `inbound_wait`).
const KICK_AGAIN: Duration = Duration::from_micros(100);
/// How long, once finalize has begun, an inbound operation may still wait for a device thread.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// Bytes of a receiver's bounce buffer.
pub(crate) const BOUNCE_BYTES: usize = 1 << 20;
/// Segments of the bounce buffer, used in turn: while one fills, the copies of the others may still
/// be landing.
const SEGMENTS: usize = 4;
/// Bytes of a segment: the most put data a burst holds before its copies are started.
const SEGMENT_BYTES: usize = BOUNCE_BYTES / SEGMENTS;
/// Most separate copies a burst holds before they are started.
const BURST_COPIES: usize = 256;

/// This PE's heap as remote operations reach it.
pub(crate) struct Target {
    pub(crate) me: u32,
    platform: Arc<dyn Backend>,
    services: Arc<dyn Services>,
    pub(crate) heap_base: u64,
    pub(crate) heap_size: u64,
    /// The inbound queue (`inbound::queue_bytes()` bytes).
    queue: HostShared,
    /// Tickets handed out in the inbound queue.
    inbound_next: Mutex<u64>,
    /// How long an operation may wait for the device threads.
    pub(crate) wait_limit: Duration,
    /// Finalize has begun: a peer's end of stream is no longer an error, and waits end soon.
    pub(crate) closing: AtomicBool,
}

impl Drop for Target {
    fn drop(&mut self) {
        // Before the queue is freed: whatever the platform started to apply it must end first.
        self.services.inbound_release();
    }
}

/// A receiver's pending work at the target: copies gathered in its bounce buffer and not started yet,
/// copies started and perhaps not landed, the last inbound operation it queued and has not waited for,
/// and the QUIETs to acknowledge once all is settled.
pub(crate) struct Applier {
    /// Where the receiver's copies land in the background (None: `Services::copy_batch`, synchronous).
    queue: Option<Box<dyn CopyQueue>>,
    bounce: HostShared,
    /// The segment being filled, and its bytes used.
    seg: usize,
    used: usize,
    /// Per segment, the mark of the last copies started from it (0: none).
    seg_mark: [u64; SEGMENTS],
    /// The last mark started (0: none) and whether it may not have landed yet.
    started: u64,
    in_flight: bool,
    /// (heap address, offset in the bounce buffer, bytes), in arrival order, not started.
    copies: Vec<(u64, usize, usize)>,
    inbound: Option<u64>,
    /// QUIETs received (their request numbers), acknowledged after the next settle.
    pub(crate) acks: Vec<u64>,
}

impl Applier {
    /// Whether anything waits to be started, settled or acknowledged.
    pub(crate) fn pending(&self) -> bool {
        !self.copies.is_empty() || self.inbound.is_some() || !self.acks.is_empty()
    }
    /// Whether the end of a burst must settle (wait for everything): a QUIET to acknowledge, or an
    /// inbound operation to see applied (waiting is what asks for the service kernel when no device
    /// thread takes it). Otherwise it only starts the burst's copies.
    pub(crate) fn must_settle(&self) -> bool {
        self.inbound.is_some() || !self.acks.is_empty()
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        // The copies started read the bounce buffer, which goes with this.
        if let (Some(q), true) = (self.queue.as_mut(), self.in_flight) {
            if let Err(e) = q.wait(self.started) {
                crate::log::debug(format!("proxy: waiting for a receiver's copies at its end: {e}"));
            }
        }
    }
}

impl Target {
    /// The target of this PE's heap, with a new inbound queue.
    pub(crate) fn new(me: u32, platform: Arc<dyn Backend>, services: Arc<dyn Services>, wait_limit: Duration) -> Result<Target> {
        let queue = services.host_shared(inbound::queue_bytes())?;
        Ok(Target {
            me,
            heap_base: platform.heap_base() as u64,
            heap_size: platform.heap_size() as u64,
            platform,
            services,
            queue,
            inbound_next: Mutex::new(0),
            wait_limit,
            closing: AtomicBool::new(false),
        })
    }

    /// The platform's services (copies, host-shared memory).
    pub(crate) fn services(&self) -> &dyn Services {
        &*self.services
    }

    /// The inbound queue as device code addresses it (`DeviceState::inbound`).
    pub(crate) fn queue_device_addr(&self) -> u64 {
        self.queue.device_addr()
    }
    /// The inbound queue's host address.
    pub(crate) fn queue_host_addr(&self) -> usize {
        self.queue.host_ptr() as usize
    }

    /// A receiver's applier, with its bounce buffer (made at setup: pinned memory allocated later may
    /// wait for the device).
    pub(crate) fn applier(&self) -> Result<Applier> {
        Ok(Applier {
            queue: self.services.copy_queue()?,
            bounce: self.services.host_shared(BOUNCE_BYTES)?,
            seg: 0,
            used: 0,
            seg_mark: [0; SEGMENTS],
            started: 0,
            in_flight: false,
            copies: Vec::new(),
            inbound: None,
            acks: Vec::new(),
        })
    }

    /// How many bytes from the heap's start are backed now.
    pub(crate) fn backed(&self) -> u64 {
        self.platform.backed() as u64
    }

    fn slot_word(&self, t: u64, field: usize) -> &AtomicU64 {
        let slot = self.queue_host_addr() + (t % inbound::SLOTS) as usize * inbound::SLOT_BYTES;
        // SAFETY: the word lies in the queue (alive with self), 8-aligned; `seq` and `done` are only
        // accessed atomically (the inbound protocol).
        unsafe { AtomicU64::from_ptr((slot + field) as *mut u64) }
    }

    /// Queues operation `code` (an AMO code, `inbound::STORE` or `inbound::NIC_ATOMIC | kind`) of
    /// `width` bytes at heap offset `offset` (checked by the caller) and returns its ticket, without
    /// waiting for it to be applied (`inbound_wait`). Operations are applied in ticket order.
    pub(crate) fn inbound_post(&self, code: u32, width: u32, offset: u64, value: u64, compare: u64, extra: [u64; 2]) -> Result<u64> {
        let mut next = self.inbound_next.lock().unwrap_or_else(|e| e.into_inner());
        let t = *next;
        if t >= inbound::SLOTS && !self.inbound_done(t - inbound::SLOTS) {
            // The slot's previous lap must be applied before it is written again.
            self.inbound_wait(t - inbound::SLOTS)?;
        }
        let slot = (self.queue_host_addr() + (t % inbound::SLOTS) as usize * inbound::SLOT_BYTES) as *mut InboundOp;
        // SAFETY: the slot lies in the queue (alive with self); its body is written only by us, holding
        // `next`, after its previous lap was applied (waited for above), and read by a consumer only
        // after our release store of `seq`.
        unsafe {
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).code), code);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).width), width);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).offset), offset);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).value), value);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).compare), compare);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*slot).extra), extra);
        }
        self.slot_word(t, std::mem::offset_of!(InboundOp, seq)).store(t + 1, Ordering::Release);
        *next = t + 1;
        stats::add(|s| &s.inbound_ops, 1);
        Ok(t)
    }

    /// Waits until inbound operation `t` (and so every one before it) is applied, and returns its old
    /// value. Device threads of this PE that wait for the proxy apply it; if none does quickly, the
    /// platform is asked to (`Services::kick_inbound`: the CPU backend runs it on this thread, a GPU
    /// launches a service kernel without waiting for it).
    pub(crate) fn inbound_wait(&self, t: u64) -> Result<u64> {
        let timer = stats::Timer::start();
        let start = Instant::now();
        let on_host = self.services.inbound_on_host();
        let mut next_kick = KICK_AFTER;
        let mut backoff = Backoff::new();
        loop {
            if self.inbound_done(t) {
                break;
            }
            // The CPU backend applies it here at once; a GPU gets KICK_AFTER for a waiting thread to
            // take it, then a request for a launch of the service (made by another thread: this one
            // keeps polling), and again every KICK_AGAIN (a service kernel that was ending as the
            // operation came skips it).
            if on_host || start.elapsed() > next_kick {
                stats::add(|s| &s.kicks, 1);
                self.services.kick_inbound()?;
                next_kick = start.elapsed() + KICK_AGAIN;
            }
            if self.closing.load(Ordering::Acquire) && start.elapsed() > CLOSE_WAIT {
                return Err(Error::new("inbound operation not applied before finalize"));
            }
            if start.elapsed() > self.wait_limit {
                return Err(Error::new(format!("inbound operation {t} not applied within {:?}", self.wait_limit)));
            }
            backoff.snooze();
        }
        timer.stop(|s| &s.inbound_wait_ns);
        stats::add(|s| &s.inbound_waits, 1);
        let slot = self.queue_host_addr() + (t % inbound::SLOTS) as usize * inbound::SLOT_BYTES;
        // SAFETY: `result` was written before `done` was published (release); our acquire above
        // orders this read after it.
        Ok(unsafe { std::ptr::read_volatile((slot + std::mem::offset_of!(InboundOp, result)) as *const u64) })
    }

    /// Whether inbound operation `t` is applied (acquire: its effects and result are visible after).
    /// Applied in order: `done` of its slot is t + 1, or a later lap's (t + 1 + k * SLOTS: then it was
    /// applied long ago, and its result is gone; only callers that wait for the slot's previous lap
    /// see that, and they need no result).
    fn inbound_done(&self, t: u64) -> bool {
        let d = self.slot_word(t, std::mem::offset_of!(InboundOp, done)).load(Ordering::Acquire);
        d > t && (d - t - 1).is_multiple_of(inbound::SLOTS)
    }

    /// Queues operation `code` and waits for its old value (`inbound_post`, `inbound_wait`): the
    /// synchronous form, for callers with nothing else pending (the emulated NIC's responder).
    pub(crate) fn inbound_with(&self, code: u32, width: u32, offset: u64, value: u64, compare: u64, extra: [u64; 2]) -> Result<u64> {
        let t = self.inbound_post(code, width, offset, value, compare, extra)?;
        self.inbound_wait(t)
    }

    /// Heap address of `[offset, offset + len)`, checked against what the platform backs (the wire
    /// checked the heap size already).
    pub(crate) fn heap_addr(&self, peer: u32, offset: u64, len: u64) -> Result<*mut u8> {
        let backed = self.backed();
        if offset.checked_add(len).is_none_or(|e| e > backed) {
            return Err(Error::new(format!(
                "PE {peer} names heap bytes [{offset:#x}, +{len:#x}) beyond the {backed:#x} bytes backed on PE {}",
                self.me
            )));
        }
        Ok((self.heap_base + offset) as *mut u8)
    }

    /// Whether a write of `len` bytes at `offset` is one store by a device thread (an inline put: never
    /// torn, no CUDA call).
    fn is_word(offset: u64, len: usize) -> bool {
        matches!(len, 1 | 2 | 4 | 8) && offset.is_multiple_of(len as u64)
    }

    fn word(data: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        b[..data.len()].copy_from_slice(data);
        u64::from_le_bytes(b)
    }

    /// Writes `data` at heap offset `offset` of this PE now, complete when it returns (the emulated
    /// NIC's WRITEs; the caller has nothing pending).
    pub(crate) fn store(&self, peer: u32, offset: u64, data: &[u8]) -> Result<()> {
        let dst = self.heap_addr(peer, offset, data.len() as u64)?;
        if Self::is_word(offset, data.len()) {
            self.inbound_with(inbound::STORE, data.len() as u32, offset, Self::word(data), 0, [0; 2])?;
            return Ok(());
        }
        // SAFETY: dst..dst+len lies in this PE's backed heap (checked); data is the frame's payload
        // in the reader's buffer, not overlapping the heap.
        unsafe { self.services.copy(dst, data.as_ptr(), data.len()) }
    }

    /// Reads `len` bytes at heap offset `offset` of this PE now (checked against what is backed); a
    /// receiver settles its applier first.
    pub(crate) fn load(&self, peer: u32, offset: u64, len: u64) -> Result<Vec<u8>> {
        let src = self.heap_addr(peer, offset, len)?;
        let mut data = vec![0u8; len as usize];
        // SAFETY: src..src+len lies in the backed heap (checked); data holds len bytes.
        unsafe { self.services.copy(data.as_mut_ptr(), src, len as usize)? };
        Ok(data)
    }

    // ------------------------------------------------------------ a receiver's operations

    /// Starts the copies `ap` gathered (after its pending inbound operation, which is waited for
    /// first: the copies must land after it), without waiting for them to land.
    pub(crate) fn start_copies(&self, ap: &mut Applier) -> Result<()> {
        if ap.copies.is_empty() {
            return Ok(());
        }
        if let Some(t) = ap.inbound.take() {
            self.inbound_wait(t)?;
        }
        let base = ap.bounce.host_ptr() as usize;
        let list: Vec<(*mut u8, *const u8, usize)> = ap.copies.iter().map(|&(dst, at, n)| (dst as *mut u8, (base + at) as *const u8, n)).collect();
        ap.copies.clear();
        stats::add(|s| &s.copy_batches, 1);
        stats::add(|s| &s.copies, list.len() as u64);
        stats::add(|s| &s.copy_bytes, list.iter().map(|c| c.2 as u64).sum());
        let timer = stats::Timer::start();
        match ap.queue.as_mut() {
            Some(q) => {
                // SAFETY: every destination was checked against the backed heap when gathered; every
                // source is bytes written into the bounce buffer (alive with ap, which waits for the
                // started copies before it goes), not written again before the mark lands: a segment
                // is reused only after its last mark landed (`write`).
                let mark = unsafe { q.start(&list)? };
                ap.seg_mark[ap.seg] = mark;
                ap.started = mark;
                ap.in_flight = true;
            }
            None => {
                // SAFETY: as above; the copies are complete when this returns.
                unsafe { self.services.copy_batch(&list)? };
            }
        }
        timer.stop(|s| &s.copy_ns);
        Ok(())
    }

    /// Waits until every copy `ap` started has landed.
    fn copies_landed(&self, ap: &mut Applier) -> Result<()> {
        if let (Some(q), true) = (ap.queue.as_mut(), ap.in_flight) {
            let timer = stats::Timer::start();
            q.wait(ap.started)?;
            timer.stop(|s| &s.copy_ns);
            ap.in_flight = false;
        }
        Ok(())
    }

    /// Settles everything `ap` holds: starts its gathered copies (after its last inbound operation),
    /// waits for that operation (and so all before it) and for every copy started. Afterwards every
    /// operation the receiver applied so far is complete and visible to this PE's device code; the
    /// QUIETs in `ap.acks` may be acknowledged.
    pub(crate) fn settle(&self, ap: &mut Applier) -> Result<()> {
        self.start_copies(ap)?;
        if let Some(t) = ap.inbound.take() {
            self.inbound_wait(t)?;
        }
        self.copies_landed(ap)
    }

    /// Writes `data` (a PUT's bytes) at heap offset `offset`: a word goes to the inbound queue, more
    /// into the burst (see the module's notes for the order).
    pub(crate) fn write(&self, ap: &mut Applier, peer: u32, offset: u64, data: &[u8]) -> Result<()> {
        let n = data.len();
        let dst = self.heap_addr(peer, offset, n as u64)?;
        if n == 0 {
            return Ok(());
        }
        if Self::is_word(offset, n) {
            return self.post(ap, inbound::STORE, n as u32, offset, Self::word(data), 0);
        }
        if n > SEGMENT_BYTES {
            // Too large to bounce: after everything before it, copied on its own.
            self.settle(ap)?;
            // SAFETY: as in `store`.
            return unsafe { self.services.copy(dst, data.as_ptr(), n) };
        }
        if ap.copies.len() >= BURST_COPIES {
            self.start_copies(ap)?;
        }
        if ap.used + n > SEGMENT_BYTES {
            // The segment is full: start its copies and go on in the next one, once the copies that
            // last read from that one have landed.
            self.start_copies(ap)?;
            ap.seg = (ap.seg + 1) % SEGMENTS;
            ap.used = 0;
            let mark = ap.seg_mark[ap.seg];
            if mark != 0 {
                if let Some(q) = ap.queue.as_mut() {
                    if !q.landed(mark)? {
                        let timer = stats::Timer::start();
                        q.wait(mark)?;
                        timer.stop(|s| &s.copy_ns);
                    }
                }
            }
        }
        let at = ap.seg * SEGMENT_BYTES + ap.used;
        // SAFETY: at + n lies inside the current segment (above), which holds no bytes of copies not
        // landed past `used`; data is the frame's payload, not overlapping it.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ap.bounce.host_ptr().add(at), n) };
        ap.used += n;
        match ap.copies.last_mut() {
            // The next bytes of the previous write, both in the heap and in the bounce buffer: one copy.
            Some((d, a, len)) if *d + *len as u64 == dst as u64 && *a + *len == at => *len += n,
            _ => ap.copies.push((dst as u64, at, n)),
        }
        Ok(())
    }

    /// Queues an inbound operation after everything `ap` holds (the burst is copied first, so the
    /// operation lands after it).
    fn post(&self, ap: &mut Applier, code: u32, width: u32, offset: u64, value: u64, compare: u64) -> Result<()> {
        if !ap.copies.is_empty() || ap.in_flight {
            self.start_copies(ap)?;
            self.copies_landed(ap)?;
        }
        ap.inbound = Some(self.inbound_post(code, width, offset, value, compare, [0; 2])?);
        Ok(())
    }

    /// Applies a signal update after everything before it (an aligned u64: the wire checked the
    /// alignment; the range is checked here).
    pub(crate) fn signal(&self, ap: &mut Applier, peer: u32, s: Signal) -> Result<()> {
        self.heap_addr(peer, s.offset, 8)?;
        let code = match s.op {
            SignalOp::Set => amo::SET,
            SignalOp::Add => amo::ADD,
        };
        self.post(ap, code as u32, 8, s.offset, s.value, 0)
    }

    /// Applies an AMO after everything before it; a fetching one is waited for and returns the old
    /// value (masked to its width).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn amo(&self, ap: &mut Applier, peer: u32, op: AmoOp, width: Width, offset: u64, value: u64, compare: u64) -> Result<Option<u64>> {
        // Inside the backed heap (checked here) and aligned (the wire checked).
        self.heap_addr(peer, offset, width.bytes())?;
        self.post(ap, op as u32, width.bytes() as u32, offset, value, compare)?;
        if !op.fetches() {
            return Ok(None);
        }
        let t = ap.inbound.take().expect("just posted");
        let old = self.inbound_wait(t)?;
        Ok(Some(if width == Width::W4 { old & u32::MAX as u64 } else { old }))
    }
}
