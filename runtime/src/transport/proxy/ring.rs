//! The host side of the proxy request channel (layout and protocol: `rshmem_device::remote::proxy`,
//! the one definition shared with the device code): setting a ring up in memory the caller provides
//! (pinned mapped host memory on CUDA, shared memory on the CPU backend), checking a ring found in
//! shared memory, and the drain loop the proxy engine runs ([`Drain::run`]).
//!
//! The drain, for the ticket `t` it expects next (slot `t % slots`):
//! 1. poll the slot's `seq` with an acquire load until it reads `t + 1` (0: not yet published; any
//!    other value: a broken ring, reported as an error, never read);
//! 2. copy the body out (after the acquire, so never torn), clear `seq` to 0;
//! 3. after a batch of consecutive published entries, store `tail` (release): posters waiting for those
//!    slots may now reuse them (their acquire of `tail` orders our reads and clears before their
//!    writes). The slots are freed before the callbacks run, since the entries were copied out;
//! 4. hand each entry to the callback, in ticket order. Completion is decoupled from draining: whoever
//!    finishes an operation marks it done in the ring's [`Completion`], which stores `completed`
//!    (release) as the largest complete prefix; `wait_completed` on the device acquires it. An
//!    operation that moves data into GPU memory must have finished that copy (synchronized) before it
//!    is marked done, so the GPU never sees `completed` ahead of the data.

use crate::error::{Error, Result};
pub use rshmem_device::remote::proxy::{op, ring_bytes, Request, RingHeader, RingRef, HEADER_BYTES, MAX_SLOTS, RING_MAGIC, SLOT_BYTES};
use rshmem_device::remote::proxy::{COMPLETED_OFF, HEAD_OFF, MAGIC_OFF, SEQ_OFF, SLOTS_OFF, TAIL_OFF};
use rshmem_common::Backoff;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Most entries the drain takes in one batch before it frees their slots (one `tail` store).
pub const MAX_BATCH: usize = 64;

fn check_slots(slots: u64) -> Result<()> {
    if slots == 0 || slots > MAX_SLOTS || !slots.is_power_of_two() {
        return Err(Error::new(format!("proxy ring: {slots} slots (must be a power of two from 1 to {MAX_SLOTS})")));
    }
    Ok(())
}

fn check_memory(base: *const u8, bytes: usize, slots: u64) -> Result<()> {
    if base.is_null() || !(base as usize).is_multiple_of(64) {
        return Err(Error::new(format!("proxy ring: base address {base:p} is not 64-byte aligned")));
    }
    let need = ring_bytes(slots as usize);
    if bytes < need {
        return Err(Error::new(format!("proxy ring: {bytes} bytes of memory, {slots} slots need {need}")));
    }
    Ok(())
}

/// # Safety
/// `base + off` must be an 8-aligned u64 inside memory mapped for the caller's lifetime `'a`, accessed
/// only atomically.
unsafe fn word<'a>(base: *mut u8, off: usize) -> &'a AtomicU64 {
    // SAFETY: forwarded contract.
    unsafe { AtomicU64::from_ptr(base.add(off) as *mut u64) }
}

/// Sets up a ring of `slots` slots in the `bytes` bytes at `base`: zeroes it and then publishes the
/// header (slot count, then the magic with a release store, so a poster that sees the magic sees the
/// slot count). Returns the `RingRef` device code posts to.
///
/// # Safety
/// `base` must be writable for `bytes` bytes and stay mapped while the ring is used; nobody may use the
/// memory as a ring while this runs.
pub unsafe fn init_ring(base: *mut u8, bytes: usize, slots: usize) -> Result<RingRef> {
    check_slots(slots as u64)?;
    check_memory(base, bytes, slots as u64)?;
    // SAFETY: the caller gives us the memory (writable, unused); ring_bytes(slots) <= bytes (checked).
    unsafe {
        std::ptr::write_bytes(base, 0, ring_bytes(slots));
        word(base, SLOTS_OFF).store(slots as u64, Ordering::Relaxed);
        word(base, MAGIC_OFF).store(RING_MAGIC, Ordering::Release);
    }
    Ok(RingRef { header: base as u64, slots: slots as u64 })
}

/// The proxy's side of one ring: the next ticket it expects, and the ring's geometry as checked when
/// it attached (the header lives in memory other processes write, so it is read and checked once).
pub struct Drain<'a> {
    base: *mut u8,
    slots: u64,
    next: u64,
    _mem: std::marker::PhantomData<&'a [u8]>,
}

// SAFETY: the ring is shared memory accessed only through atomics and the protocol; the drain may
// move to the proxy thread.
unsafe impl Send for Drain<'_> {}

/// How a drain loop ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainStats {
    /// Requests completed by this drain.
    pub requests: u64,
    /// Batches (tail stores).
    pub batches: u64,
}

impl<'a> Drain<'a> {
    /// Attaches to a ring set up by `init_ring` (possibly in another process) in the `bytes` bytes at
    /// `base`. The header is checked: magic, slot count, size. The drain starts at the ring's `tail`.
    ///
    /// # Safety
    /// `base` must be readable and writable for `bytes` bytes, mapped for `'a`; only one drain may use
    /// a ring at a time.
    pub unsafe fn attach(base: *mut u8, bytes: usize) -> Result<Drain<'a>> {
        if base.is_null() || !(base as usize).is_multiple_of(64) {
            return Err(Error::new(format!("proxy ring: base address {base:p} is not 64-byte aligned")));
        }
        if bytes < HEADER_BYTES {
            return Err(Error::new(format!("proxy ring: {bytes} bytes of memory, less than the {HEADER_BYTES}-byte header")));
        }
        // SAFETY: the header lies in the caller's memory (bytes >= HEADER_BYTES), 64-aligned base.
        let (magic, slots, tail) = unsafe {
            (
                word(base, MAGIC_OFF).load(Ordering::Acquire),
                word(base, SLOTS_OFF).load(Ordering::Relaxed),
                word(base, TAIL_OFF).load(Ordering::Acquire),
            )
        };
        if magic != RING_MAGIC {
            return Err(Error::new(format!("proxy ring: bad magic {magic:#x} (expected {RING_MAGIC:#x}): not a set-up ring")));
        }
        check_slots(slots)?;
        check_memory(base, bytes, slots)?;
        Ok(Drain { base, slots, next: tail, _mem: std::marker::PhantomData })
    }

    pub fn slots(&self) -> u64 {
        self.slots
    }
    /// The next ticket this drain expects (= requests drained so far on this ring).
    pub fn next(&self) -> u64 {
        self.next
    }

    fn seq_word(&self, ticket: u64) -> &'a AtomicU64 {
        let slot = HEADER_BYTES + (ticket & (self.slots - 1)) as usize * SLOT_BYTES;
        // SAFETY: slot < slots, and attach checked that ring_bytes(slots) bytes are mapped for 'a.
        unsafe { word(self.base, slot + SEQ_OFF) }
    }

    /// Takes every published entry in order (at most `MAX_BATCH`) and frees their slots (one `tail`
    /// store), without completing them: `f` gets each entry with its sequence number, in order, and
    /// completion is reported separately (a [`Completion`]). Returns how many it took (0: the next slot
    /// is not published yet). A slot holding a foreign sequence number is an error; an error of `f`
    /// ends the drain and names the request.
    pub fn poll_entries(&mut self, mut f: impl FnMut(u64, &Request) -> Result<()>) -> Result<usize> {
        let mut batch = [Request::default(); MAX_BATCH];
        let mut n = 0;
        while n < MAX_BATCH {
            let t = self.next + n as u64;
            let w = self.seq_word(t);
            let seq = w.load(Ordering::Acquire);
            if seq == 0 {
                break;
            }
            if seq != t + 1 {
                return Err(Error::new(format!(
                    "proxy ring: slot {} holds sequence number {seq} where {} (or 0) was expected: a poster broke \
                     the ring protocol or its memory was overwritten",
                    t & (self.slots - 1),
                    t + 1
                )));
            }
            let slot = HEADER_BYTES + (t & (self.slots - 1)) as usize * SLOT_BYTES;
            // SAFETY: the slot lies in the mapped ring (see seq_word); its body was published by the
            // release store of `seq` that our acquire load read, so it is complete and no poster
            // writes it until we advance `tail` past t. A volatile read: the memory is shared with
            // other processes, so the compiler must not assume anything about it.
            batch[n] = unsafe { std::ptr::read_volatile(self.base.add(slot) as *const Request) };
            w.store(0, Ordering::Relaxed);
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        let first = self.next;
        self.next += n as u64;
        // SAFETY: tail is an 8-aligned u64 in the checked header.
        let tail = unsafe { word(self.base, TAIL_OFF) };
        // Release: our reads of the bodies and the clears of `seq` happen before a poster's reuse.
        tail.store(self.next, Ordering::Release);
        for (i, r) in batch[..n].iter().enumerate() {
            let seq = first + i as u64 + 1;
            f(seq, r).map_err(|e| e.context(format!("proxy ring: request {seq} (op {}, target PE {})", r.op, r.pe)))?;
        }
        Ok(n)
    }

    /// As [`Drain::poll_entries`], completing each entry as soon as `f` returns Ok for it (`completed`
    /// stored with release after the callback, so its effects happen before a poster's acquire).
    pub fn poll(&mut self, mut f: impl FnMut(&Request) -> Result<()>) -> Result<usize> {
        // SAFETY: completed is an 8-aligned u64 in the header checked at attach.
        let completed = unsafe { word(self.base, COMPLETED_OFF) };
        self.poll_entries(|seq, r| {
            f(r)?;
            completed.store(seq, Ordering::Release);
            Ok(())
        })
    }

    /// The drain loop the proxy engine runs: polls until `stop()` returns true while the ring is idle,
    /// handing every request to `entry(state, seq, request)` in order (`poll_entries`: completion is
    /// the caller's, through a [`Completion`]), and calling `batch_done(state)` after each batch (the
    /// engine sends its QUIETs there). Idle back-off: `rshmem_common::Backoff`. An error of either
    /// callback ends the loop.
    pub fn run<S>(
        &mut self,
        state: &mut S,
        mut stop: impl FnMut() -> bool,
        mut entry: impl FnMut(&mut S, u64, &Request) -> Result<()>,
        mut batch_done: impl FnMut(&mut S) -> Result<()>,
    ) -> Result<DrainStats> {
        let mut stats = DrainStats { requests: 0, batches: 0 };
        let mut idle = Backoff::new();
        loop {
            let n = self.poll_entries(|seq, r| entry(state, seq, r))?;
            if n > 0 {
                batch_done(state)?;
                stats.requests += n as u64;
                stats.batches += 1;
                idle.reset();
                continue;
            }
            if idle.rounds().is_multiple_of(64) && stop() {
                return Ok(stats);
            }
            idle.snooze();
        }
    }
}

/// Completion decoupled from draining: requests are complete in any order ([`Completion::done`]),
/// and the ring's `completed` is advanced (release store) to the largest complete prefix of sequence
/// numbers, which is what `wait_completed` on the device requires. Shared by the proxy's threads.
pub struct Completion {
    completed: &'static AtomicU64,
    state: std::sync::Mutex<Prefix>,
}

/// `base`: every sequence number `<= base` is complete; `done[i]` says whether `base + 1 + i` is.
struct Prefix {
    base: u64,
    done: std::collections::VecDeque<bool>,
}

impl Completion {
    /// Over the ring whose header is at `base`, starting at its current `completed`.
    ///
    /// # Safety
    /// `base` must point to a set-up ring header that stays mapped while the Completion is used (the
    /// caller keeps the memory alive); only this Completion stores `completed` from now on.
    pub unsafe fn attach(base: *mut u8) -> Completion {
        // SAFETY: the caller's contract: the header's completed word, mapped while we are used.
        let completed: &'static AtomicU64 = unsafe { word(base, COMPLETED_OFF) };
        let start = completed.load(Ordering::Acquire);
        Completion { completed, state: std::sync::Mutex::new(Prefix { base: start, done: Default::default() }) }
    }
    /// Marks request `seq` complete (its effects must be finished and visible) and advances
    /// `completed` over every complete prefix. Marking a sequence number twice, or one at or below the
    /// prefix, is a no-op.
    pub fn done(&self, seq: u64) {
        let mut p = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if seq <= p.base {
            return;
        }
        let i = (seq - p.base - 1) as usize;
        if p.done.len() <= i {
            p.done.resize(i + 1, false);
        }
        p.done[i] = true;
        let mut advanced = 0u64;
        while p.done.front() == Some(&true) {
            p.done.pop_front();
            advanced += 1;
        }
        if advanced > 0 {
            p.base += advanced;
            // Release: the effects of every request up to base happen before a poster's acquire.
            self.completed.store(p.base, Ordering::Release);
        }
    }
    /// The largest complete prefix.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }
}

/// A waiting policy for `post_with` / `wait_completed_with` on the host: back off like every host wait
/// (`rshmem_common::Backoff`), and give up once `limit` has passed since the first spin.
pub fn deadline(limit: Duration) -> impl FnMut(u64) -> bool {
    let start = Instant::now();
    let mut backoff = Backoff::new();
    move |spins| {
        backoff.snooze();
        !(spins.is_multiple_of(64) && start.elapsed() > limit)
    }
}

/// Checks a request against the job and the target's heap before the proxy acts on it: a known
/// kind, a PE in range, every range inside `heap_bytes`, a length the kind allows. The error names the
/// problem and the PE.
pub fn check_request(r: &Request, n_pes: u32, heap_bytes: u64) -> Result<()> {
    let pe = r.pe;
    let bad = |what: String| Err(Error::new(format!("proxy request to PE {pe}: {what}")));
    if r.op == 0 || r.op > op::LAST {
        return bad(format!("unknown operation {}", r.op));
    }
    if r.op == op::NOP {
        return Ok(());
    }
    if pe >= n_pes {
        return bad(format!("PE out of range (the job has {n_pes} PEs)"));
    }
    let in_heap = |off: u64, len: u64| off.checked_add(len).is_some_and(|end| end <= heap_bytes);
    let data = matches!(r.op, op::PUT | op::PUT_INLINE | op::GET | op::AMO | op::PUT_SIGNAL);
    if data && !in_heap(r.offset, r.len) {
        return bad(format!("{} bytes at heap offset {:#x} are outside the {heap_bytes}-byte heap", r.len, r.offset));
    }
    match r.op {
        op::PUT_INLINE if !matches!(r.len, 1 | 2 | 4 | 8) => return bad(format!("inline put of {} bytes (1, 2, 4 or 8)", r.len)),
        op::AMO if !matches!(r.len, 4 | 8) || !r.offset.is_multiple_of(r.len.max(1)) => {
            return bad(format!("atomic on {} bytes at offset {:#x} (4 or 8, aligned)", r.len, r.offset))
        }
        // `g`: a GET of at most 8 bytes into the request's return slot has no local address.
        op::GET if r.sub & rshmem_device::remote::proxy::SUB_RETURN != 0 && (r.len > 8 || r.src != 0) => {
            return bad(format!("GET into the return slot of {} bytes with local address {:#x} (at most 8 bytes, no address)", r.len, r.src));
        }
        op::GET if r.sub & rshmem_device::remote::proxy::SUB_RETURN != 0 => {}
        op::PUT | op::GET | op::PUT_SIGNAL if r.len > 0 && r.src == 0 => return bad("null local address".into()),
        _ => {}
    }
    if matches!(r.op, op::SIGNAL | op::PUT_SIGNAL) {
        if !in_heap(r.sig_offset, 8) || !r.sig_offset.is_multiple_of(8) {
            return bad(format!("signal word at heap offset {:#x} is not an aligned u64 inside the heap", r.sig_offset));
        }
        if !matches!(r.sub as i32, rshmem_device::SIGNAL_SET | rshmem_device::SIGNAL_ADD) {
            return bad(format!("unknown signal operator {}", r.sub));
        }
    }
    Ok(())
}

/// Reads the ring's `head` (tickets handed out), `tail` and `completed`, for diagnostics.
///
/// # Safety
/// `ring.header` must point to a mapped ring header.
pub unsafe fn counters(ring: RingRef) -> (u64, u64, u64) {
    let b = ring.header as usize as *mut u8;
    // SAFETY: forwarded contract: three 8-aligned u64 words of the header, accessed atomically.
    unsafe {
        (
            word(b, HEAD_OFF).load(Ordering::Relaxed),
            word(b, TAIL_OFF).load(Ordering::Acquire),
            word(b, COMPLETED_OFF).load(Ordering::Acquire),
        )
    }
}
