//! The engine's receiving side against random and mutated frames: whatever a peer sends, the frames
//! that pass the wire's decoder and the engine's own checks (answers to requests this PE made) write
//! only inside the heap or inside the destination of a pending GET, and never panic.
use crate::error::Result;
use crate::platform::backend::Backend;
use crate::platform::services::{CopyList, CopyQueue, HostShared, Services};
use crate::transport::ibgda::responder::NicResponder;
use crate::transport::proxy::engine::{Engine, Extension};
use crate::transport::proxy::link::{Link, PendingGet};
use crate::transport::proxy::target::{Applier, Target};
use crate::transport::wire::{self, Message, Width};
use rshmem_device::remote::inbound::{self, InboundOp};
use rshmem_ibgda::emu::{Access, MrTable};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const HEAP: usize = 1 << 16;
const LOCAL: usize = 4096;

/// A platform whose heap and one local buffer are plain memory; every write is checked.
struct Fake {
    heap: HostShared,
    local: HostShared,
    writes: AtomicUsize,
    /// The engine's inbound queue (host address), set once the engine exists.
    queue: AtomicUsize,
    /// The queue's cursor and lock words (outside the heap here: random frames write all over this
    /// heap).
    claim: AtomicU64,
    lock: AtomicU64,
    /// Receivers' copies land late (`LazyQueue`) instead of at once.
    lazy: bool,
}
impl Fake {
    fn inside(&self, p: usize, len: usize) -> bool {
        let within = |m: &HostShared, n: usize| p >= m.host_ptr() as usize && p + len <= m.host_ptr() as usize + n;
        within(&self.heap, HEAP) || within(&self.local, LOCAL)
    }
}
impl Backend for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn heap_base(&self) -> usize {
        self.heap.host_ptr() as usize
    }
    fn heap_size(&self) -> usize {
        HEAP
    }
    fn peer_base(&self, _: usize) -> usize {
        0
    }
    fn zero(&self, _: usize, _: usize) -> Result<()> {
        Ok(())
    }
    fn quiet(&self) -> Result<()> {
        Ok(())
    }
    unsafe fn putmem(&self, _: *mut u8, _: *const u8, _: usize, _: i32) -> Result<()> {
        unreachable!()
    }
    unsafe fn getmem(&self, _: *mut u8, _: *const u8, _: usize, _: i32) -> Result<()> {
        unreachable!()
    }
    unsafe fn copy_in(&self, _: *mut u8, _: &[u8]) -> Result<()> {
        unreachable!()
    }
    unsafe fn copy_out(&self, _: &mut [u8], _: *const u8) -> Result<()> {
        unreachable!()
    }
    fn services(&self) -> Arc<dyn Services> {
        unreachable!("the engine under test is handed the fake's services directly")
    }
}
impl Services for Fake {
    fn host_shared(&self, bytes: usize) -> Result<HostShared> {
        HostShared::host_alloc(bytes)
    }
    fn device_mem(&self, bytes: usize) -> Result<crate::platform::services::DeviceMem> {
        let h = HostShared::host_alloc(bytes)?;
        Ok(crate::platform::services::DeviceMem { addr: h.device_addr(), bytes, _keep: Box::new(h) })
    }
    fn inbound_on_host(&self) -> bool {
        // As the CPU backend: memory is plain memory, and kick_inbound applies the queue at once.
        true
    }
    fn copy_queue(&self) -> Result<Option<Box<dyn CopyQueue>>> {
        Ok(self.lazy.then(|| Box::new(LazyQueue::default()) as Box<dyn CopyQueue>))
    }
    unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<()> {
        if self.inside(dst as usize, len) {
            self.writes.fetch_add(1, Ordering::Relaxed);
        } else {
            // Not a write into our memory: then it is a read of the heap (a GET's bytes) into a
            // buffer of the engine's own, and the read must lie inside the heap.
            let h = self.heap.host_ptr() as usize;
            assert!(src as usize >= h && src as usize + len <= h + HEAP, "a copy of {len} bytes from {src:p} to {dst:p}: neither a write into the heap or local buffer nor a read of the heap");
        }
        // SAFETY: dst checked inside our memory; src is the frame's payload.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        Ok(())
    }
    fn kick_inbound(&self) -> Result<()> {
        // The queued operation must name a range inside the heap (the engine checked it before
        // queueing): look before applying it as device threads would.
        let q = self.queue.load(Ordering::Acquire);
        let heap = self.heap.host_ptr() as usize;
        if q != 0 {
            for i in 0..inbound::SLOTS as usize {
                // SAFETY: q is the engine's queue (set by engine()); the body is read only.
                let op = unsafe { std::ptr::read_volatile((q + i * inbound::SLOT_BYTES) as *const InboundOp) };
                if op.seq != 0 && op.done != op.seq {
                    assert!(self.inside(heap + op.offset as usize, op.width as usize), "inbound op at heap offset {:#x}", op.offset);
                    self.writes.fetch_add(1, Ordering::Relaxed);
                }
            }
            // SAFETY: the queue and the heap of this test's engine; ranges checked just above.
            unsafe { inbound::progress_at(q, heap, self.claim.as_ptr(), self.lock.as_ptr(), u32::MAX) };
        }
        Ok(())
    }

}

use super::super::test_rng::Rng;

/// A copy queue whose copies land as late as its contract allows: only when waited for, or one batch
/// at every third look, in order (as a copy engine would, slowly). It reads the sources when the copies
/// land: an applier that reused bounce memory before its copies landed would write the wrong bytes.
#[derive(Default)]
struct LazyQueue {
    batches: std::collections::VecDeque<(u64, CopyList)>,
    next: u64,
    landed: u64,
    looks: u64,
}
impl LazyQueue {
    fn land_one(&mut self) {
        if let Some((m, list)) = self.batches.pop_front() {
            for (d, s, n) in list {
                // SAFETY: `start`'s contract: valid, unchanged until this mark lands.
                unsafe { std::ptr::copy_nonoverlapping(s as *const u8, d as *mut u8, n) };
            }
            self.landed = m;
        }
    }
}
impl CopyQueue for LazyQueue {
    unsafe fn start(&mut self, copies: &[(*mut u8, *const u8, usize)]) -> Result<u64> {
        self.next += 1;
        self.batches.push_back((self.next, copies.iter().map(|&(d, s, n)| (d as usize, s as usize, n)).collect()));
        Ok(self.next)
    }
    fn landed(&mut self, mark: u64) -> Result<bool> {
        self.looks += 1;
        if self.looks.is_multiple_of(3) {
            self.land_one();
        }
        Ok(mark <= self.landed)
    }
    fn wait(&mut self, mark: u64) -> Result<()> {
        while self.landed < mark {
            self.land_one();
        }
        Ok(())
    }
}

fn engine() -> (Arc<Engine>, Arc<Fake>, Applier) {
    engine_with(false)
}

fn engine_with(lazy: bool) -> (Arc<Engine>, Arc<Fake>, Applier) {
    let fake = Arc::new(Fake {
        heap: HostShared::host_alloc(HEAP).unwrap(),
        local: HostShared::host_alloc(LOCAL).unwrap(),
        writes: AtomicUsize::new(0),
        queue: AtomicUsize::new(0),
        claim: AtomicU64::new(0),
        lock: AtomicU64::new(0),
        lazy,
    });
    let target = Arc::new(Target::new(0, fake.clone(), fake.clone(), Duration::from_secs(1)).unwrap());
    let ap = target.applier().unwrap();
    fake.queue.store(target.queue_host_addr(), Ordering::Release);
    let responder: Arc<dyn Extension> = Arc::new(NicResponder::new(2, nic_regions(&fake), Box::new(|_, _, _| {})));
    let engine = Engine::new(target, 0, 2, 64, 1024, vec![None, Some(Link::new(1, None, None))], wire::MIN_CHUNK, Some(responder)).unwrap();
    (Arc::new(engine), fake, ap)
}

/// The emulated NIC's key of the test heap's first half (the second half is not registered).
const NIC_KEY: u32 = 7;

fn nic_regions(fake: &Fake) -> Arc<MrTable> {
    let r = Arc::new(MrTable::new());
    // SAFETY: the first half of the fake heap, alive as long as the engine under test.
    unsafe { r.register(NIC_KEY, fake.heap.host_ptr(), HEAP as u64 / 2, Access::ALL) }.unwrap();
    r
}

#[test]
fn random_frames_write_only_inside_the_heap_or_a_pending_destination() {
    let (inner, fake, mut ap) = engine();
    let link = inner.links[1].as_ref().unwrap();
    let ctx = wire::Context { me: 0, peer: 1, npes: 2, heap_size: HEAP as u64, max_chunk: wire::MIN_CHUNK };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut applied, mut refused, mut nic_applied) = (0, 0, 0u64);
    let edge = |rng: &mut Rng| match rng.below(5) {
        0 => rng.below(HEAP as u64 + 64),
        1 => HEAP as u64 - rng.below(16),
        2 => u64::MAX - rng.below(16),
        3 => 8 * rng.below(HEAP as u64 / 8),
        _ => rng.next(),
    };
    let payload = vec![0xabu8; wire::MIN_CHUNK as usize + 64];
    for i in 0..100_000u64 {
        // Some GETs of this PE await answers into the local buffer (seq 1..=8, ranges of the heap).
        if i % 1000 == 0 {
            let mut p = link.pending.lock().unwrap();
            p.gets.clear();
            for seq in 1..=8u64 {
                let len = 1 + rng.below(LOCAL as u64 - 1);
                let offset = rng.below(HEAP as u64 - len);
                p.gets.insert(seq, PendingGet { dst: fake.local.host_ptr() as u64, offset, len, got: 0, ret: None });
            }
        }
        let mut h = wire::OpHeader {
            kind: if rng.below(50) == 0 { rng.below(256) as u8 } else { wire::Kind::ALL[rng.below(wire::Kind::ALL.len() as u64) as usize] as u8 },
            flags: rng.below(2) as u8,
            op: rng.below(14) as u8,
            width: [0u8, 4, 8, 3][rng.below(4) as usize],
            src_pe: if rng.below(20) == 0 { rng.below(3) as u32 } else { 1 },
            seq: rng.below(10),
            offset: edge(&mut rng),
            len: [rng.below(64), rng.below(wire::MIN_CHUNK as u64 + 2), edge(&mut rng)][rng.below(3) as usize],
            payload_len: 0,
            key: 0,
            value: if rng.below(2) == 0 { rng.below(1 << 32) } else { rng.next() },
            compare: if rng.below(3) == 0 { rng.below(1 << 32) } else { 0 },
            signal_offset: edge(&mut rng),
        };
        h.payload_len = if rng.below(4) == 0 { rng.below(wire::MIN_CHUNK as u64 + 64) as u32 } else { h.len.min(u32::MAX as u64) as u32 };
        // Clear, now and then, the fields a kind does not use, so that many frames pass the decoder.
        if rng.below(2) == 0 {
            let (k, _) = (h.kind, 0);
            if !matches!(k, 2 | 7) {
                h.signal_offset = 0;
            }
            if !matches!(k, 5) {
                h.compare = 0;
            }
            if !matches!(k, 5 | 6) {
                h.width = 0;
            }
            if !matches!(k, 2 | 5 | 7) {
                h.op = 0;
            }
            if matches!(k, 3 | 5 | 6 | 7 | 8 | 9 | 10 | 11 | 13) {
                h.payload_len = 0;
            }
            if matches!(k, 6 | 7 | 8 | 9 | 10 | 13 | 12) {
                h.offset = 0;
                h.len = 0;
            }
            if matches!(k, 3 | 8 | 9 | 10 | 12 | 13 | 1 | 4) {
                h.value = 0;
            }
            if matches!(k, 12) {
                h.payload_len = rng.below(64) as u32;
            }
            // Data frames mostly well formed: a small payload inside the heap.
            if matches!(k, 1 | 2 | 4) && rng.below(4) != 0 {
                h.len = rng.below(64);
                h.offset = rng.below(HEAP as u64 - h.len + 8);
                h.payload_len = h.len as u32;
            }
            // NIC frames: a remote address near the registered half, under its key or another.
            if matches!(k, 14..=16) {
                h.key = if rng.below(4) != 0 { NIC_KEY } else { rng.below(16) as u32 };
                h.len = if k == 16 { 0 } else { rng.below(80) };
                h.offset = fake.heap.host_ptr() as u64 + rng.below(HEAP as u64 / 2 + 64) - 8;
                h.payload_len = if k == 14 { h.len as u32 } else { 0 };
                if k == 16 {
                    let kind = 1 + rng.below(6) as u8;
                    h.op = kind;
                    h.width = rshmem_ibgda::Atomic::kind_shape(kind).map_or(8, |s| s.0 as u8);
                    h.offset &= !7;
                    (h.value, h.compare, h.signal_offset) = (rng.below(1 << 20), rng.below(4), 0);
                    if kind == 1 {
                        h.compare = 0;
                    }
                }
            }
            if matches!(k, 17 | 18) {
                h.key = 0;
            }
        }
        let plen = (h.payload_len as usize).min(payload.len());
        let frame = wire::encode_frame(&h, &payload[..plen]);
        match wire::decode_frame(&frame, &ctx) {
            Ok(m) => {
                if matches!(m, Message::Close) {
                    continue;
                }
                let nic = matches!(m.kind(), wire::Kind::NicWrite | wire::Kind::NicRead | wire::Kind::NicAtomic);
                // Settled after every frame, as a receiver settles at the end of a burst.
                match inner.apply(link, &mut ap, m).and_then(|_| inner.settle(link, &mut ap)) {
                    Ok(_) => {
                        applied += 1;
                        nic_applied += nic as u64;
                    }
                    Err(e) => {
                        assert!(e.message().contains("PE 1"), "{e}");
                        refused += 1
                    }
                }
            }
            Err(e) => assert!(e.message().contains("PE 1"), "{e}"),
        }
    }
    assert!(applied > 1000 && refused > 100, "applied {applied}, refused {refused}: the generator misses the interesting frames");
    assert!(nic_applied > 1000, "only {nic_applied} NIC frames reached the responder");
    assert!(fake.writes.load(Ordering::Relaxed) > 1000, "too few frames wrote anything");
}

#[test]
fn answers_outside_the_request_are_refused() {
    let (inner, fake, mut ap) = engine();
    let link = inner.links[1].as_ref().unwrap();
    let dst = fake.local.host_ptr() as u64;
    link.pending.lock().unwrap().gets.insert(5, PendingGet { dst, offset: 0x100, len: 16, got: 0, ret: None });
    let data = [7u8; 16];
    for (offset, len, what) in [(0xf8u64, 16usize, "outside the requested"), (0x108, 16, "outside the requested"), (0x100, 0, "")] {
        let m = Message::GetResponse { seq: 5, offset, data: &data[..len], last: false };
        let r = inner.apply(link, &mut ap, m);
        if what.is_empty() {
            r.unwrap();
        } else {
            assert!(r.unwrap_err().message().contains(what));
        }
    }
    let e = inner.apply(link, &mut ap, Message::GetResponse { seq: 6, offset: 0x100, data: &data, last: true }).unwrap_err();
    assert!(e.message().contains("did not ask"), "{e}");
    let e = inner.apply(link, &mut ap, Message::AmoResponse { seq: 9, width: Width::W8, value: 1 }).unwrap_err();
    assert!(e.message().contains("did not ask"), "{e}");
    // Short answer: the last chunk arrives with bytes missing.
    let e = inner.apply(link, &mut ap, Message::GetResponse { seq: 5, offset: 0x100, data: &data[..8], last: true }).unwrap_err();
    assert!(e.message().contains("8 of 16 bytes"), "{e}");
    // A complete one completes the request and lands in the destination.
    link.pending.lock().unwrap().gets.insert(1, PendingGet { dst, offset: 0x200, len: 16, got: 0, ret: None });
    inner.apply(link, &mut ap, Message::GetResponse { seq: 1, offset: 0x200, data: &data, last: true }).unwrap();
    assert_eq!(inner.completion.completed(), 1);
    // SAFETY: the local buffer holds LOCAL bytes.
    assert_eq!(unsafe { std::slice::from_raw_parts(fake.local.host_ptr(), 16) }, &data);
}

/// A receiver's writes, signals and atomics in random order against one small range, with copies that
/// land late (`LazyQueue`), bursts ending at random and settles in between: after every settle the heap
/// equals a model that applied every operation in the order received, and every fetched value is the
/// model's. Catches a copy started before an earlier inbound operation was applied, an inbound
/// operation queued before an earlier copy landed, and bounce memory reused before its copies landed.
#[test]
fn late_copies_keep_the_order_of_the_frames() {
    let (engine, fake, mut ap) = engine_with(true);
    let t = &*engine.target;
    let heap = fake.heap.host_ptr();
    let mut model = vec![0u8; HEAP];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let check = |model: &[u8], step: usize| {
        // SAFETY: the fake heap holds HEAP bytes; nothing writes it while the test reads (settled).
        let now = unsafe { std::slice::from_raw_parts(heap, HEAP) };
        if let Some(i) = (0..HEAP).find(|&i| now[i] != model[i]) {
            panic!("step {step}: heap byte {i:#x} is {:#04x}, the model says {:#04x}", now[i], model[i]);
        }
    };
    let (mut settles, mut words, mut big) = (0, 0, 0);
    for step in 0..20_000 {
        // One step in ten of a hundred: a stream of writes and burst ends only (nothing that waits for
        // the copies), so that the bounce buffer wraps while copies are still to land.
        let streaming = step % 1000 >= 900;
        let pick = if streaming { [0, 9][usize::from(rng.below(4) == 0)] } else { rng.below(12) };
        match pick {
            0..=5 => {
                // Mostly inside the first 4 KiB, so that writes overlap; now and then most of the heap
                // (a segment of the bounce buffer fills in a few of those).
                let len = if streaming { [3, 100, 60_000][rng.below(3) as usize] } else { [1, 2, 4, 8, 3, 24, 100, 1000, 60_000][rng.below(9) as usize] } as usize;
                let room = if len > 4096 { HEAP } else { 4096 };
                let mut off = rng.below((room - len) as u64) as usize;
                if matches!(len, 1 | 2 | 4 | 8) && rng.below(2) == 0 {
                    off -= off % len;
                }
                if matches!(len, 1 | 2 | 4 | 8) && off.is_multiple_of(len) {
                    words += 1;
                }
                big += usize::from(len > 4096);
                let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                t.write(&mut ap, 1, off as u64, &data).unwrap();
                model[off..off + len].copy_from_slice(&data);
            }
            6 | 7 => {
                let off = 8 * rng.below(512) as usize;
                let v = rng.next();
                let add = rng.below(2) == 0;
                t.signal(&mut ap, 1, wire::Signal { offset: off as u64, op: if add { wire::SignalOp::Add } else { wire::SignalOp::Set }, value: v }).unwrap();
                let old = u64::from_le_bytes(model[off..off + 8].try_into().unwrap());
                model[off..off + 8].copy_from_slice(&(if add { old.wrapping_add(v) } else { v }).to_le_bytes());
            }
            8 => {
                let off = 8 * rng.below(512) as usize;
                let v = rng.next();
                let old = t.amo(&mut ap, 1, wire::AmoOp::FetchAdd, Width::W8, off as u64, v, 0).unwrap().unwrap();
                let want = u64::from_le_bytes(model[off..off + 8].try_into().unwrap());
                assert_eq!(old, want, "step {step}: fetch_add at {off:#x} fetched {old:#x}, the model holds {want:#x}");
                model[off..off + 8].copy_from_slice(&want.wrapping_add(v).to_le_bytes());
            }
            9 | 10 => t.start_copies(&mut ap).unwrap(),
            _ => {
                t.settle(&mut ap).unwrap();
                check(&model, step);
                settles += 1;
            }
        }
    }
    t.settle(&mut ap).unwrap();
    check(&model, 20_000);
    assert!(settles > 1000 && words > 1000 && big > 100, "the mix did not cover the cases: {settles} settles, {words} word writes, {big} large writes");
}
