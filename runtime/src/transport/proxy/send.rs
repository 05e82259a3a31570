//! The sender of the remote engine: the one thread that drains this PE's request ring (in ticket
//! order) and turns its requests into frames on the lanes.
//!
//! - **Lanes by address.** A request to PE `q` at heap offset `o` takes lane `(o >> lane_shift) % L`
//!   of `q` (`Engine::lane_for`): requests to the same bytes take the same lane, and are applied in
//!   ticket order there; a large transfer is cut at the lanes' boundaries and spread over them, so that
//!   more blocks and larger puts use more lanes.
//! - **Coalescing.** A put whose bytes continue the last PUT queued on its lane joins it (one frame for
//!   the neighbouring blocks' pieces of a transfer, or a thread's consecutive small puts), up to
//!   `MAX_PAYLOAD`. Staged bytes travel from the ring's staging chunks where the device wrote them (an
//!   iovec, no copy); an operation of 8 bytes or less is a 32-byte frame. A drained batch leaves with
//!   one gathered `sendmsg` per lane (`Lane::kick`); what the socket does not take, the lane's thread
//!   sends.
//! - **Order across lanes.** A FENCE request marks every PE the sender has sent to; the next request to
//!   such a PE that takes a lane while other lanes carried requests to it since the last such point is
//!   preceded by a MARK on each of those lanes and a WAIT on its own (the target holds that lane until
//!   the others have applied their marks). A fenced request (a barrier's flag) and the signal of a
//!   put-with-signal whose data took several lanes do the same without a FENCE. Requests on one lane
//!   need nothing: they are applied in order.
//! - **Credits.** The answers a lane's requests ask for (GET data, fetched values) must fit the peer's
//!   reply ring: at most half of it is awaited at a time, so the peer's apply code never waits for room
//!   while its ring fills (no cycle of two PEs waiting on each other's replies).
//! - **Completion.** After each batch: a checkpoint (`engine::Completion`), `consumed` for blocking
//!   puts, and the ring's `tail` (slots and staging chunks whose bytes every lane has sent).

use crate::error::{Error, Result};
use crate::log;
use crate::transport::proxy::engine::{Engine, Route, TcpSide};
use crate::transport::proxy::lanes::{Expect, Out, Payload};
use crate::transport::proxy::ring::{self, Drain, Entry};
use crate::transport::proxy::stats;
use crate::transport::wire::{AmoOp, Frames, MAX_PAYLOAD, SIGNAL_OP_ADD, SIGNAL_OP_SET};
use rshmem_common::Backoff;
use rshmem_device::remote::proxy::{op, Request, SUB_FENCED, SUB_RETURN};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The sender's order state per peer PE.
#[derive(Clone, Copy, Default)]
struct PeerOrder {
    /// Lanes (bits, counted from the peer's first) that carried requests since the last ordering
    /// point.
    used: u32,
    /// A FENCE came since: the next request orders itself after every lane in `used`.
    fenced: bool,
    /// The last fence epoch sent to the peer.
    epoch: u64,
}

/// The sender: the ring's drain and what it keeps between requests.
struct Sender {
    eng: Arc<Engine>,
    peers: Vec<PeerOrder>,
    /// Lanes that got frames in this batch.
    dirty: Vec<bool>,
    /// Per lane, the frames of this batch (handed to the lane at its end, one lock per lane and
    /// batch), and how many requests they hold.
    local: Vec<Out>,
    local_requests: Vec<u64>,
    /// Per lane: the next tag of a GET or fetch.
    tags: Vec<u64>,
    /// The heap every PE reserves (`Target::reserved`): requests outside it are refused here.
    heap_size: u64,
    /// The batch being issued (kept to reuse its memory).
    batch: Vec<Entry>,
}

/// The sender's thread: drains until the engine stops (once the ring is idle) or fails.
pub(crate) fn run(eng: Arc<Engine>) {
    let stage_bytes = eng.set.slots * eng.set.chunk as usize;
    let base = eng.chan.host_ptr();
    // SAFETY: the ring and its staging chunks live in `eng.chan`, which this thread keeps alive (Arc)
    // while it drains; this is the only drain of the ring.
    let attached = unsafe { Drain::attach(base, crate::transport::proxy::engine::ring_area(eng.set.slots), base.add(crate::transport::proxy::engine::stage_at(eng.set.slots)), stage_bytes) };
    let mut d: Drain<'static> = match attached {
        Ok(d) => d,
        Err(e) => return eng.fault(e),
    };
    let n = eng.lanes.len();
    let mut s = Sender {
        peers: vec![PeerOrder::default(); eng.npes as usize],
        dirty: vec![false; n],
        local: (0..n).map(|_| Out::new()).collect(),
        local_requests: vec![0; n],
        tags: vec![1; n],
        heap_size: eng.target.reserved().max(1),
        batch: Vec::with_capacity(ring::MAX_BATCH),
        eng,
    };
    if let Err(e) = s.drain(&mut d) {
        if !s.eng.closing.load(Ordering::Acquire) {
            s.eng.fault(e.context("proxy: the sender"));
        }
    }
}

impl Sender {
    fn drain(&mut self, d: &mut Drain<'static>) -> Result<()> {
        let mut idle = Backoff::new();
        let mut last_work = Instant::now();
        loop {
            if self.eng.abort.load(Ordering::Acquire) {
                return Ok(());
            }
            let t = stats::Timer::start(self.eng.stats.is_some());
            let mut batch = std::mem::take(&mut self.batch);
            let n = d.poll_entries(|e| {
                batch.push(e);
                Ok(())
            })?;
            let issued = self.issue_batch(&mut batch);
            batch.clear();
            self.batch = batch;
            issued?;
            if n > 0 {
                self.end_batch(d)?;
                t.stop(self.eng.stats.as_deref(), |s| &s.send_ns);
                self.eng.count(|s| &s.requests, n as u64);
                self.eng.count(|s| &s.batches, 1);
                idle.reset();
                last_work = Instant::now();
                continue;
            }
            // Nothing new: lanes may have sent what the tail waits for.
            self.release(d);
            if idle.rounds().is_multiple_of(64) && self.eng.stop.load(Ordering::Acquire) {
                return Ok(());
            }
            if self.eng.set.spin && last_work.elapsed() < Duration::from_millis(1) {
                std::hint::spin_loop();
            } else {
                idle.snooze();
            }
        }
    }

    /// The end of a drained batch: every lane that got frames sends them; a checkpoint; `consumed`;
    /// the tail.
    fn end_batch(&mut self, d: &mut Drain<'static>) -> Result<()> {
        if let Some(r) = self.eng.rdma() {
            r.batch_done(&self.eng)?;
        }
        for i in 0..self.dirty.len() {
            if self.dirty[i] {
                self.hand_over(i)?;
            }
        }
        let drained = d.next();
        self.eng.drained.store(drained, Ordering::Release);
        self.eng.completion.checkpoint(drained, &self.eng.lanes);
        self.eng.consumed_moved();
        self.release(d);
        Ok(())
    }

    /// Frees the ring's slots and staging chunks up to the oldest ticket a lane still sends from.
    fn release(&self, d: &mut Drain<'static>) {
        let oldest = self.eng.lanes.iter().map(|l| l.oldest_ticket.load(Ordering::Acquire)).min().unwrap_or(u64::MAX);
        d.release_to(oldest);
        self.eng.consumed_moved();
    }

    /// Hands lane `i` this batch's frames (counted before they can leave: an ACK never names more
    /// requests than `issued`) and sends what the socket takes.
    fn hand_over(&mut self, i: usize) -> Result<()> {
        self.dirty[i] = false;
        let lane = &self.eng.lanes[i];
        {
            let mut out = lane.out.lock().unwrap_or_else(|e| e.into_inner());
            lane.issued.fetch_add(std::mem::take(&mut self.local_requests[i]), Ordering::AcqRel);
            out.append(&mut self.local[i]);
            lane.publish_oldest(&out);
        }
        lane.kick(&self.eng)
    }

    /// Queues frames on lane `i` (built by `f` into our own bytes), counting `requests` requests.
    fn queue(&mut self, i: usize, requests: u64, f: impl FnOnce(&mut Vec<u8>)) {
        let mut b = Vec::with_capacity(64);
        f(&mut b);
        self.local[i].frames(&b);
        self.local_requests[i] += requests;
        self.dirty[i] = true;
    }

    /// Orders the next request to `pe` on lane `i` after every lane that carried requests to it since
    /// the last ordering point, when a FENCE asked for it or `full`: a MARK on each such lane, a WAIT
    /// on lane `i`.
    fn order(&mut self, pe: u32, i: usize, full: bool) {
        let first = self.eng.peer_lanes[pe as usize].start;
        let bit = 1u32 << (i - first);
        let p = self.peers[pe as usize];
        if p.fenced || full {
            let others = p.used & !bit;
            if others != 0 {
                let epoch = p.epoch + 1;
                for l in 0..32 {
                    if others & (1 << l) != 0 {
                        self.queue(first + l, 1, |b| Frames::mark(b, epoch));
                    }
                }
                self.queue(i, 1, |b| Frames::wait(b, epoch, others));
                self.peers[pe as usize].epoch = epoch;
                self.eng.count(|s| &s.fences, 1);
            } else if p.used & bit != 0 {
                // The same lane carried what the fence orders: a MARK there ends the open put (nothing
                // after the fence merges into a frame before it) and makes the apply code order the
                // lane's earlier stores before what follows (it fences at a MARK).
                let epoch = p.epoch + 1;
                self.queue(i, 1, |b| Frames::mark(b, epoch));
                self.peers[pe as usize].epoch = epoch;
                self.eng.count(|s| &s.fences, 1);
            }
            self.peers[pe as usize].used = bit;
            self.peers[pe as usize].fenced = false;
        } else {
            self.peers[pe as usize].used |= bit;
        }
    }

    /// Waits until lane `i` may await `need` more bytes of answers (its credit).
    fn credit(&mut self, i: usize, need: u64) -> Result<()> {
        let lane = self.eng.lanes[i].clone();
        let cap = lane.reply_bytes / 2;
        let mut wait: Option<(Instant, Backoff)> = None;
        while lane.credit_used.load(Ordering::Acquire) - lane.credit_back.load(Ordering::Acquire) + need > cap {
            let (since, b) = wait.get_or_insert_with(|| (Instant::now(), Backoff::new()));
            if self.dirty[i] {
                self.hand_over(i)?;
            }
            if self.eng.abort.load(Ordering::Acquire) {
                return Err(Error::new("proxy: the engine stopped"));
            }
            if since.elapsed() > self.eng.set.wait_limit {
                return Err(Error::new(format!("proxy: PE {} answered none of this PE's GETs and fetches for {:?} ({})", lane.peer, self.eng.set.wait_limit, lane.in_flight())));
            }
            b.snooze();
        }
        if wait.is_some() {
            self.eng.count(|s| &s.credit_waits, 1);
        }
        lane.credit_used.fetch_add(need, Ordering::AcqRel);
        Ok(())
    }

    /// Queues the bytes `[offset, offset + len)` to `pe`, cut at the lanes' boundaries (and at
    /// MAX_PAYLOAD), each piece's payload from `src(at, n)`. Returns the lanes used (bits from the
    /// peer's first) and the last one.
    fn put_bytes(&mut self, pe: u32, offset: u64, len: u64, mut src: impl FnMut(u64, u64) -> (Payload, u64)) -> (u32, usize) {
        let first = self.eng.peer_lanes[pe as usize].start;
        let shift = self.eng.set.lane_shift;
        let (mut used, mut last) = (0u32, first);
        let mut at = 0u64;
        while at < len {
            let o = offset + at;
            let boundary = ((o >> shift) + 1) << shift;
            let (payload, most) = src(at, len - at);
            let n = (len - at).min(boundary - o).min(MAX_PAYLOAD as u64).min(most);
            let i = self.eng.lane_for(pe, o);
            self.order(pe, i, false);
            let new = self.local[i].put(o, payload, n as u32);
            if new {
                self.local_requests[i] += 1;
            }
            if !new {
                self.eng.count(|s| &s.merged, 1);
            }
            self.dirty[i] = true;
            used |= 1 << (i - first);
            last = i;
            at += n;
        }
        (used, last)
    }

    /// Queues a drained batch in an order that merges more: each run of plain puts (no signal, no
    /// fence) is reordered by `merge_order`, the rest stays in ring order.
    fn issue_batch(&mut self, batch: &mut [Entry]) -> Result<()> {
        let mut i = 0;
        while i < batch.len() {
            let j = i + batch[i..].iter().take_while(|e| plain_put(&e.req)).count();
            if j - i < 2 {
                let e = batch[i];
                self.issue(e, e.seq - 1)?;
                i += 1;
                continue;
            }
            let run = &mut batch[i..j];
            // The ring's tail and `consumed` follow the oldest ticket a lane still holds, found as
            // the first queued part's: parts of a reordered run all carry the run's oldest ticket,
            // so tickets stay in queue order.
            let floor = run.iter().map(|e| e.seq - 1).min().unwrap_or(0);
            merge_order(run);
            for e in run.iter() {
                self.issue(*e, floor)?;
            }
            i = j;
        }
        Ok(())
    }

    /// Queues request `e` (checked first); `ticket`: the ticket its queued parts carry (its own, or
    /// an older one of its batch: see `issue_batch`).
    fn issue(&mut self, e: Entry, ticket: u64) -> Result<()> {
        let r = e.req;
        let eng = self.eng.clone();
        ring::check_request(&r, eng.npes, self.heap_size)?;
        if eng.set.trace {
            log::debug(format!("proxy trace: issue {}: op {} sub {:#x} to PE {} offset {:#x} len {} value {:#x}", e.seq, r.op, r.sub, r.pe, r.offset, r.len, r.value));
        }
        if r.op == op::NOP {
            return Ok(());
        }
        if r.op == op::FENCE {
            for p in self.peers.iter_mut() {
                if p.used != 0 {
                    p.fenced = true;
                }
            }
            return Ok(());
        }
        let pe = r.pe;
        if !eng.reaches(pe) {
            return Err(Error::new(format!("proxy: request {} to PE {pe}, which the engine does not reach (it is on this node)", e.seq)));
        }
        if let Some(rdma) = eng.rdma() {
            match rdma.issue(&eng, &e, self)? {
                Route::Rdma => return Ok(()),
                Route::Tcp => {}
                Route::SignalOnly => {
                    // The data is at the target (its WRITEs completed): the signal follows it.
                    let sop = if r.sub as i32 == rshmem_device::SIGNAL_ADD { SIGNAL_OP_ADD } else { SIGNAL_OP_SET };
                    let i = eng.lane_for(pe, r.sig_offset);
                    self.order(pe, i, false);
                    self.queue(i, 1, |b| Frames::signal(b, sop, r.sig_offset, r.sig_value));
                    return Ok(());
                }
            }
        }
        let signal_op = |sub: u16| -> Result<u8> {
            match sub as i32 {
                rshmem_device::SIGNAL_SET => Ok(SIGNAL_OP_SET),
                rshmem_device::SIGNAL_ADD => Ok(SIGNAL_OP_ADD),
                s => Err(Error::new(format!("unknown signal operator {s}"))),
            }
        };
        match r.op {
            op::PUT_STAGED | op::PUT_SIGNAL_STAGED | op::PUT | op::PUT_SIGNAL => {
                let staged = matches!(r.op, op::PUT_STAGED | op::PUT_SIGNAL_STAGED);
                let direct = eng.target.host_applies();
                let pieces = e.staged;
                let (used, last) = self.put_bytes(pe, r.offset, r.len, |at, _| {
                    if staged {
                        // The staged bytes are one or two pieces of the staging area (two when they
                        // wrap at its end).
                        let (p0, n0) = pieces[0];
                        if at < n0 as u64 {
                            (Payload::Staged { ptr: p0.wrapping_add(at as usize), ticket }, n0 as u64 - at)
                        } else {
                            let (p1, n1) = pieces[1];
                            let b = at - n0 as u64;
                            (Payload::Staged { ptr: p1.wrapping_add(b as usize), ticket }, n1 as u64 - b)
                        }
                    } else if direct {
                        // Host memory (the CPU backend): sent from where it is.
                        (Payload::Src { ptr: (r.src + at) as *const u8, ticket }, u64::MAX)
                    } else {
                        (Payload::Copy { src: r.src + at, ticket }, u64::MAX)
                    }
                });
                if matches!(r.op, op::PUT_SIGNAL_STAGED | op::PUT_SIGNAL) {
                    let sop = signal_op(r.sub)?;
                    let (i, full) = if r.len == 0 { (eng.lane_for(pe, r.sig_offset), false) } else { (last, used & !(1 << (last - eng.peer_lanes[pe as usize].start)) != 0) };
                    self.order(pe, i, full);
                    self.queue(i, 1, |b| Frames::signal(b, sop, r.sig_offset, r.sig_value));
                }
            }
            op::PUT_INLINE => {
                let i = eng.lane_for(pe, r.offset);
                self.order(pe, i, r.sub & SUB_FENCED != 0);
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&r.value.to_le_bytes());
                if self.local[i].put(r.offset, Payload::Inline(b), r.len as u32) {
                    self.local_requests[i] += 1;
                } else {
                    self.eng.count(|s| &s.merged, 1);
                }
                self.dirty[i] = true;
            }
            op::SIGNAL => {
                let sop = signal_op(r.sub)?;
                let i = eng.lane_for(pe, r.sig_offset);
                self.order(pe, i, r.sub & SUB_FENCED != 0);
                self.queue(i, 1, |b| Frames::signal(b, sop, r.sig_offset, r.sig_value));
            }
            op::AMO => {
                let code = (r.sub & 0xff) as u8;
                let aop = AmoOp::from_u8(code).ok_or_else(|| Error::new(format!("unknown AMO code {code}")))?;
                let width = r.len as u32;
                let mask = if width == 4 { u32::MAX as u64 } else { u64::MAX };
                let value = if aop.has_operand() { r.value & mask } else { 0 };
                let compare = if aop == AmoOp::CompareSwap { r.sig_value & mask } else { 0 };
                let i = eng.lane_for(pe, r.offset);
                self.order(pe, i, r.sub & SUB_FENCED != 0);
                let fetch = if aop.fetches() {
                    let tag = self.tags[i];
                    self.tags[i] += 1;
                    let x = Expect::Fetch { tag: tag as u32, ret: r.sub & SUB_RETURN != 0, dst: r.src, width, seq: e.seq };
                    self.credit(i, x.credit())?;
                    eng.lanes[i].expect.lock().unwrap_or_else(|e| e.into_inner()).push_back(x);
                    Some(tag as u32)
                } else {
                    None
                };
                self.queue(i, 1, |b| Frames::amo(b, code, width as u8, r.offset, value, compare, fetch));
            }
            op::GET => {
                let ret = r.sub & SUB_RETURN != 0;
                let shift = eng.set.lane_shift;
                let mut at = 0u64;
                while at < r.len {
                    let o = r.offset + at;
                    let boundary = ((o >> shift) + 1) << shift;
                    // A return-slot GET (at most 8 bytes) is one frame wherever it lies.
                    let n = if ret { r.len } else { (r.len - at).min(boundary - o).min(MAX_PAYLOAD as u64) };
                    let i = eng.lane_for(pe, o);
                    self.order(pe, i, false);
                    let tag = self.tags[i];
                    self.tags[i] += 1;
                    let x = Expect::Get { tag, len: n as u32, dst: if ret { 0 } else { r.src + at }, ret, seq: e.seq };
                    self.credit(i, x.credit())?;
                    eng.lanes[i].expect.lock().unwrap_or_else(|e| e.into_inner()).push_back(x);
                    self.queue(i, 1, |b| Frames::get(b, o, n as u32, tag));
                    at += n;
                }
            }
            other => return Err(Error::new(format!("unknown operation {other}"))),
        }
        Ok(())
    }
}

impl TcpSide for Sender {
    fn settle(&mut self, pe: u32) -> Result<()> {
        let r = self.eng.peer_lanes[pe as usize].clone();
        for i in r.clone() {
            if self.dirty[i] {
                self.hand_over(i)?;
            }
        }
        let start = Instant::now();
        let mut b = Backoff::new();
        while !r.clone().all(|i| self.eng.lanes[i].idle()) {
            if self.eng.abort.load(Ordering::Acquire) {
                return Err(Error::new("proxy: the engine stopped"));
            }
            if start.elapsed() > self.eng.set.wait_limit {
                let what: Vec<String> = r.clone().map(|i| self.eng.lanes[i].in_flight()).collect();
                return Err(Error::new(format!("PE {pe} did not complete the requests sent to it over TCP within {:?} ({})", self.eng.set.wait_limit, what.join("; "))));
            }
            b.snooze();
        }
        Ok(())
    }
}

/// A put that carries no signal and no fence: runs of them may be reordered (`merge_order`).
fn plain_put(r: &Request) -> bool {
    r.len > 0 && (matches!(r.op, op::PUT_STAGED | op::PUT) || (r.op == op::PUT_INLINE && r.sub & SUB_FENCED == 0))
}

/// Reorders a run of plain puts so that puts to adjacent bytes follow each other and merge into one
/// frame, across the blocks that posted them (NVSHMEM's shmem_put_bw: the blocks of a grid put
/// neighbouring slices, again and again). Puts without a fence between them have no order of
/// delivery (OpenSHMEM), except what this keeps: puts to the same bytes stay in the order they were
/// posted. So the run is sorted by layer, then PE and address, where a put's layer is the number of
/// earlier puts in the run to exactly its bytes; a run where two puts overlap without naming the same
/// bytes keeps its order.
fn merge_order(run: &mut [Entry]) {
    // Already in order (each put after the previous one's end, or on a later PE): nothing to do, in
    // one pass and without allocating (a block's own stream, one block).
    if run.windows(2).all(|w| (w[0].req.pe, w[0].req.offset.saturating_add(w[0].req.len)) <= (w[1].req.pe, w[1].req.offset)) {
        return;
    }
    let mut idx: Vec<(u32, u64, u64, u32)> = run.iter().enumerate().map(|(i, e)| (e.req.pe, e.req.offset, e.req.len, i as u32)).collect();
    idx.sort_unstable();
    let mut layer = vec![0u32; run.len()];
    let mut layers = 1usize;
    for w in 1..idx.len() {
        let (a, b) = (idx[w - 1], idx[w]);
        if (a.0, a.1, a.2) == (b.0, b.1, b.2) {
            layer[b.3 as usize] = layer[a.3 as usize] + 1;
            layers = layers.max(layer[b.3 as usize] as usize + 1);
        } else if a.0 == b.0 && a.1.saturating_add(a.2) > b.1 {
            // Overlapping, different bytes: keep the ring's order.
            return;
        }
    }
    // (Distinct ranges sorted by start do not overlap once neighbours do not: a longer earlier range
    // would overlap its neighbour.) Ties (same bytes, same layer) cannot occur.
    // The order is (layer, PE, address): `idx` is sorted by PE and address, so a stable pass that
    // buckets it by layer gives it without a second sort.
    let mut at = vec![0usize; layers + 1];
    for &l in &layer {
        at[l as usize + 1] += 1;
    }
    for l in 1..=layers {
        at[l] += at[l - 1];
    }
    let copy: Vec<Entry> = run.to_vec();
    for &(_, _, _, i) in &idx {
        let l = layer[i as usize] as usize;
        run[at[l]] = copy[i as usize];
        at[l] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, pe: u32, offset: u64, len: u64) -> Entry {
        Entry { seq, tickets: 1, req: Request { op: op::PUT, pe, offset, len, ..Request::default() }, staged: [(std::ptr::null(), 0); 2] }
    }

    /// Applies the run to a memory model: each put writes its sequence number over its bytes.
    fn apply(run: &[Entry]) -> Vec<u64> {
        let mut m = vec![0u64; 2 * 512];
        for e in run {
            for b in e.req.offset..e.req.offset + e.req.len {
                m[e.req.pe as usize * 512 + b as usize] = e.seq;
            }
        }
        m
    }

    /// Random runs (slices of a grid, repeated, sometimes overlapping): the reordered run is a
    /// permutation that leaves every byte as the ring's order does, and adjacent slices follow each
    /// other when nothing overlaps.
    #[test]
    fn merge_order_keeps_what_each_byte_ends_as() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut reordered = 0;
        for _ in 0..2000 {
            let slices = 1 + rnd(8);
            let width = 8 << rnd(3);
            let n = 2 + rnd(40) as usize;
            let run: Vec<Entry> = (0..n)
                .map(|i| {
                    let (pe, s) = (rnd(2) as u32, rnd(slices));
                    let (o, l) = if rnd(30) == 0 { (rnd(400), 1 + rnd(100)) } else { (s * width, width) };
                    entry(i as u64 + 1, pe, o, l)
                })
                .collect();
            let mut got = run.clone();
            merge_order(&mut got);
            let mut seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
            seqs.sort_unstable();
            assert_eq!(seqs, (1..=n as u64).collect::<Vec<_>>(), "not a permutation");
            assert_eq!(apply(&got), apply(&run), "a byte ends differently");
            if got.iter().zip(&run).any(|(a, b)| a.seq != b.seq) {
                reordered += 1;
            }
        }
        assert!(reordered > 500, "only {reordered} runs were reordered");
        // A grid's slices posted twice, interleaved: one contiguous pass, then the second.
        let run: Vec<Entry> = [3u64, 1, 0, 2, 1, 3, 2, 0].iter().enumerate().map(|(i, &s)| entry(i as u64 + 1, 0, s * 64, 64)).collect();
        let mut got = run.clone();
        merge_order(&mut got);
        assert_eq!(got.iter().map(|e| e.req.offset / 64).collect::<Vec<_>>(), vec![0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3, 2, 4, 1, 8, 5, 7, 6]);
    }
}
