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
//! 4. hand each entry to the callback, in ticket order. Completion is decoupled from draining: the
//!    remote engine raises `completed` (release) as the targets acknowledge the lanes' requests
//!    (`engine::Completion`); `wait_completed` on the device acquires it.

use crate::error::{Error, Result};
pub use rshmem_device::remote::proxy::{op, ring_bytes, tickets, Request, RingHeader, RingRef, COUNTERS_BYTES, HEADER_BYTES, MAX_SLOTS, RING_MAGIC, SLOT_BYTES};
use rshmem_device::remote::proxy::{CHUNK_OFF, COMPLETED_OFF, MAGIC_OFF, SEQ_OFF, SLOTS_OFF, TAIL_OFF};
pub use rshmem_device::state::Channel;
use rshmem_common::Backoff;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Most entries the drain takes in one batch before it frees their slots (one `tail` store); the
/// sender reorders runs of puts within a batch to merge them (`send::merge_order`).
pub const MAX_BATCH: usize = 256;

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

/// Sets up a ring of `slots` slots in the `bytes` bytes at `base`, for staging chunks of `chunk` bytes
/// (0: none): zeroes it and then publishes the header (slot count and chunk, then the magic with a
/// release store, so a poster that sees the magic sees them). Returns the `RingRef` of the ring.
///
/// # Safety
/// `base` must be writable for `bytes` bytes and stay mapped while the ring is used; nobody may use the
/// memory as a ring while this runs.
pub unsafe fn init_ring(base: *mut u8, bytes: usize, slots: usize, chunk: u64) -> Result<RingRef> {
    check_slots(slots as u64)?;
    check_memory(base, bytes, slots as u64)?;
    if chunk != 0 && (!chunk.is_power_of_two() || chunk < 64) {
        return Err(Error::new(format!("proxy ring: staging chunks of {chunk} bytes (must be a power of two of at least 64)")));
    }
    // SAFETY: the caller gives us the memory (writable, unused); ring_bytes(slots) <= bytes (checked).
    unsafe {
        std::ptr::write_bytes(base, 0, ring_bytes(slots));
        word(base, SLOTS_OFF).store(slots as u64, Ordering::Relaxed);
        word(base, CHUNK_OFF).store(chunk, Ordering::Relaxed);
        word(base, MAGIC_OFF).store(RING_MAGIC, Ordering::Release);
    }
    Ok(RingRef { header: base as u64, slots: slots as u64 })
}

/// The proxy's side of one ring: the next ticket it expects, and the ring's geometry as checked when
/// it attached (the header lives in memory other processes write, so it is read and checked once).
pub struct Drain<'a> {
    base: *mut u8,
    slots: u64,
    /// Bytes of a staging chunk (0: no staging), and the staging area (`slots` chunks).
    chunk: u64,
    stage: *const u8,
    next: u64,
    _mem: std::marker::PhantomData<&'a [u8]>,
}

// SAFETY: the ring is shared memory accessed only through atomics and the protocol; the drain may
// move to the proxy thread.
unsafe impl Send for Drain<'_> {}

/// How a drain loop ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainStats {
    /// Requests handed out by this drain.
    pub requests: u64,
    /// Batches (tail stores).
    pub batches: u64,
}

/// One request taken off the ring: its sequence number, how many tickets it holds, its body, and (a
/// staged put) where its bytes are: one or two pieces of the staging area (two when they wrap at its
/// end). The pieces stay valid until the drain's next `release`.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Its sequence number: its first ticket + 1 (what its poster waits on).
    pub seq: u64,
    /// Ring slots (tickets) the request holds: 1, or more for a staged put's chunks.
    pub tickets: u64,
    /// The request body, as the poster wrote it.
    pub req: Request,
    /// A staged put's bytes as (address, length) pieces in the staging area; (null, 0) when unused.
    pub staged: [(*const u8, usize); 2],
}

// SAFETY: the staged pieces are addresses in the ring's staging area, read only by whoever holds the
// entry before the drain releases it (the protocol); nothing in an Entry is tied to a thread.
unsafe impl Send for Entry {}

impl Entry {
    /// The staged bytes (empty pieces for a request that is not a staged put).
    ///
    /// # Safety
    /// Only until the drain that produced the entry calls `release` (the bytes' chunks may be reused
    /// after it).
    pub unsafe fn staged(&self) -> [&[u8]; 2] {
        // SAFETY: each piece lies in the staging area, holding the request's bytes (the drain checked
        // the request's length against its tickets), valid until release (the caller's contract).
        self.staged.map(|(p, n)| if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(p, n) } })
    }
}

impl<'a> Drain<'a> {
    /// Attaches to a ring set up by `init_ring` (possibly in another process) in the `bytes` bytes at
    /// `base`, with its staging area of `stage_bytes` bytes at `stage` (null and 0 without staging).
    /// The header is checked: magic, slot count, chunk, sizes. The drain starts at the ring's `tail`.
    ///
    /// # Safety
    /// `base` must be readable and writable for `bytes` bytes, and `stage` readable for `stage_bytes`
    /// bytes, mapped for `'a`; only one drain may use a ring at a time.
    pub unsafe fn attach(base: *mut u8, bytes: usize, stage: *const u8, stage_bytes: usize) -> Result<Drain<'a>> {
        if base.is_null() || !(base as usize).is_multiple_of(64) {
            return Err(Error::new(format!("proxy ring: base address {base:p} is not 64-byte aligned")));
        }
        if bytes < HEADER_BYTES {
            return Err(Error::new(format!("proxy ring: {bytes} bytes of memory, less than the {HEADER_BYTES}-byte header")));
        }
        // SAFETY: the header lies in the caller's memory (bytes >= HEADER_BYTES), 64-aligned base.
        let (magic, slots, chunk, tail) = unsafe {
            (
                word(base, MAGIC_OFF).load(Ordering::Acquire),
                word(base, SLOTS_OFF).load(Ordering::Relaxed),
                word(base, CHUNK_OFF).load(Ordering::Relaxed),
                word(base, TAIL_OFF).load(Ordering::Acquire),
            )
        };
        if magic != RING_MAGIC {
            return Err(Error::new(format!("proxy ring: bad magic {magic:#x} (expected {RING_MAGIC:#x}): not a set-up ring")));
        }
        check_slots(slots)?;
        check_memory(base, bytes, slots)?;
        if chunk != 0 {
            let need = slots.saturating_mul(chunk);
            if !chunk.is_power_of_two() || stage.is_null() || (stage_bytes as u64) < need {
                return Err(Error::new(format!(
                    "proxy ring: staging chunks of {chunk} bytes for {slots} slots need {need} bytes of staging, {stage_bytes} given"
                )));
            }
        }
        Ok(Drain { base, slots, chunk, stage, next: tail, _mem: std::marker::PhantomData })
    }

    /// The ring's slot count.
    pub fn slots(&self) -> u64 {
        self.slots
    }
    /// Bytes of a staging chunk (0: no staging).
    pub fn chunk(&self) -> u64 {
        self.chunk
    }
    /// The next ticket this drain expects (= tickets drained so far on this ring).
    pub fn next(&self) -> u64 {
        self.next
    }

    fn seq_word(&self, ticket: u64) -> &'a AtomicU64 {
        let slot = HEADER_BYTES + (ticket & (self.slots - 1)) as usize * SLOT_BYTES;
        // SAFETY: slot < slots, and attach checked that ring_bytes(slots) bytes are mapped for 'a.
        unsafe { word(self.base, slot + SEQ_OFF) }
    }

    /// Where the staged bytes of a request at ticket `t` of `len` bytes are.
    fn staged_of(&self, t: u64, len: u64) -> [(*const u8, usize); 2] {
        let first = (t & (self.slots - 1)) as usize;
        let room = (self.slots as usize - first) * self.chunk as usize;
        let a = (len as usize).min(room);
        // Pointer arithmetic only: inside the staging area (slots * chunk bytes, checked at attach).
        let p = self.stage.wrapping_add(first * self.chunk as usize);
        [(p, a), (self.stage, len as usize - a)]
    }

    /// Takes every published request in order (at most `MAX_BATCH`), without freeing their slots or
    /// completing them: `f` gets each with its sequence number and tickets, in order; the caller frees
    /// the slots with [`Drain::release`] once it no longer needs their staged bytes, and reports
    /// completion separately. Returns how many it took (0: the next slot is not
    /// published yet). A slot holding a foreign sequence number, or a request claiming more tickets
    /// or staged bytes than the ring holds, is an error; an error of `f` ends the drain and names the
    /// request.
    pub fn poll_entries(&mut self, mut f: impl FnMut(Entry) -> Result<()>) -> Result<usize> {
        let mut batch = [Request::default(); MAX_BATCH];
        let mut firsts = [0u64; MAX_BATCH];
        let mut n = 0;
        let mut t = self.next;
        while n < MAX_BATCH {
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
            let r = unsafe { std::ptr::read_volatile(self.base.add(slot) as *const Request) };
            w.store(0, Ordering::Relaxed);
            let k = tickets(r.op, r.len, self.chunk);
            let staged = matches!(r.op, op::PUT_STAGED | op::PUT_SIGNAL_STAGED);
            if staged && (self.chunk == 0 || k > (self.slots / 2).max(1) || r.len > rshmem_device::remote::proxy::MAX_STAGED) {
                return Err(Error::new(format!(
                    "proxy ring: request {} stages {} bytes, which this ring ({} slots of {} staged bytes) cannot hold",
                    t + 1,
                    r.len,
                    self.slots,
                    self.chunk
                )));
            }
            batch[n] = r;
            firsts[n] = t;
            t += k;
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        self.next = t;
        for (r, &first) in batch[..n].iter().zip(&firsts[..n]) {
            let staged = matches!(r.op, op::PUT_STAGED | op::PUT_SIGNAL_STAGED);
            let e = Entry {
                seq: first + 1,
                tickets: tickets(r.op, r.len, self.chunk),
                req: *r,
                staged: if staged { self.staged_of(first, r.len) } else { [(std::ptr::null(), 0); 2] },
            };
            f(e).map_err(|err| err.context(format!("proxy ring: request {} (op {}, target PE {})", e.seq, r.op, r.pe)))?;
        }
        Ok(n)
    }

    /// Frees the slots and staging chunks of the requests taken so far below ticket `t` (one `tail`
    /// store, release, when it moves: see `release`). The sender keeps those whose staged bytes a
    /// lane has not sent yet.
    pub fn release_to(&mut self, t: u64) {
        let t = t.min(self.next);
        // SAFETY: tail is an 8-aligned u64 in the checked header.
        let w = unsafe { word(self.base, TAIL_OFF) };
        if w.load(Ordering::Relaxed) < t {
            w.store(t, Ordering::Release);
        }
    }

    /// Frees the slots and staging chunks of every request taken so far (one `tail` store, release:
    /// our reads of their bodies and staged bytes and the clears of `seq` happen before a poster's
    /// reuse).
    pub fn release(&mut self) {
        // SAFETY: tail is an 8-aligned u64 in the checked header.
        unsafe { word(self.base, TAIL_OFF) }.store(self.next, Ordering::Release);
    }

    /// As [`Drain::poll_entries`] and then `release`, completing each request as soon as `f` returns
    /// Ok for it (`completed` stored with release after the callback, so its effects happen before a
    /// poster's acquire).
    pub fn poll(&mut self, mut f: impl FnMut(&Request) -> Result<()>) -> Result<usize> {
        // SAFETY: completed is an 8-aligned u64 in the header checked at attach.
        let completed = unsafe { word(self.base, COMPLETED_OFF) };
        let n = self.poll_entries(|e| {
            f(&e.req)?;
            completed.store(e.seq + e.tickets - 1, Ordering::Release);
            Ok(())
        })?;
        self.release();
        Ok(n)
    }

    /// The drain loop the proxy engine runs: polls until `stop()` returns true while the ring is idle,
    /// handing every request to `entry(state, entry)` in order (`poll_entries`: completion is the
    /// caller's), calling `batch_done(state)` after each batch (the engine
    /// sends the batch's frames and its QUIETs there), then releasing the batch's slots. Idle back-off:
    /// `rshmem_common::Backoff`. An error of either callback ends the loop.
    pub fn run<S>(
        &mut self,
        state: &mut S,
        mut stop: impl FnMut() -> bool,
        mut entry: impl FnMut(&mut S, Entry) -> Result<()>,
        mut batch_done: impl FnMut(&mut S) -> Result<()>,
    ) -> Result<DrainStats> {
        let mut stats = DrainStats { requests: 0, batches: 0 };
        let mut idle = Backoff::new();
        loop {
            let n = self.poll_entries(|e| entry(state, e))?;
            if n > 0 {
                batch_done(state)?;
                self.release();
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
    let data = matches!(r.op, op::PUT | op::PUT_INLINE | op::GET | op::AMO | op::PUT_SIGNAL | op::PUT_STAGED | op::PUT_SIGNAL_STAGED);
    if data && !in_heap(r.offset, r.len) {
        return bad(format!("{} bytes at heap offset {:#x} are outside the {heap_bytes}-byte heap", r.len, r.offset));
    }
    match r.op {
        op::PUT_INLINE if !(1..=8).contains(&r.len) => return bad(format!("inline put of {} bytes (1 to 8)", r.len)),
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
    if matches!(r.op, op::PUT_STAGED | op::PUT_SIGNAL_STAGED) && r.src != 0 {
        return bad(format!("staged put with a local address {:#x} (its bytes travel in the channel)", r.src));
    }
    if matches!(r.op, op::SIGNAL | op::PUT_SIGNAL | op::PUT_SIGNAL_STAGED) {
        if !in_heap(r.sig_offset, 8) || !r.sig_offset.is_multiple_of(8) {
            return bad(format!("signal word at heap offset {:#x} is not an aligned u64 inside the heap", r.sig_offset));
        }
        if !matches!(r.sub as i32, rshmem_device::SIGNAL_SET | rshmem_device::SIGNAL_ADD) {
            return bad(format!("unknown signal operator {}", r.sub));
        }
    }
    Ok(())
}

/// Reads the ring's `tail` and `completed` (host memory), for diagnostics and host waits.
///
/// # Safety
/// `ring.header` must point to a mapped ring header.
pub unsafe fn counters(ring: RingRef) -> (u64, u64) {
    let b = ring.header as usize as *mut u8;
    // SAFETY: forwarded contract: two 8-aligned u64 words of the header, accessed atomically.
    unsafe { (word(b, TAIL_OFF).load(Ordering::Acquire), word(b, COMPLETED_OFF).load(Ordering::Acquire)) }
}

/// Waits (the host's way: `deadline(limit)`) until the ring's `completed` reaches `seq`.
///
/// # Safety
/// `ring.header` must point to a mapped ring header.
pub unsafe fn wait_completed_host(ring: RingRef, seq: u64, limit: Duration) -> std::result::Result<(), (u64, u64)> {
    let mut policy = deadline(limit);
    let mut spins = 0u64;
    loop {
        // SAFETY: forwarded contract.
        let (_, c) = unsafe { counters(ring) };
        if c >= seq {
            return Ok(());
        }
        spins += 1;
        if !policy(spins) {
            return Err((seq, c));
        }
    }
}
