//! The proxy request channel (device side `rshmem_device::remote::proxy`, host side
//! `rshmem::transport::proxy::ring`) on the CPU backend: real threads, and real processes sharing one ring through
//! a memfd mapping. Every request carries a checksum of its fields; the proxy checks that each arrives
//! exactly once, intact, in per-poster order, and posters check that `wait_completed` returns only
//! after the proxy finished the request.

use rshmem::platform::services::HostShared;
use rshmem::transport::proxy::ring::{check_request, deadline, init_ring, op, ring_bytes, Channel, Drain, DrainStats, Request, COUNTERS_BYTES};
use rshmem::{Error, Result};
use rshmem_device::remote::proxy::{head, post, post_with, publish, reserve_with, stage_copy, tickets, wait_completed, wait_completed_with, Stalled, HEADER_BYTES, SEQ_OFF, SLOT_BYTES};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD_VAR: &str = "RSHMEM_TEST_RING_CHILD";

/// A channel in host memory of this process, as the CPU backend's proxy has it (`HostShared`): a
/// ring, its counters, and (with `chunk`) its staging chunks.
struct RingBuf {
    mem: HostShared,
    counters: HostShared,
    stage: HostShared,
    slots: usize,
    chunk: u64,
}

impl RingBuf {
    fn new(slots: usize) -> Result<RingBuf> {
        RingBuf::staged(slots, 0)
    }
    fn staged(slots: usize, chunk: u64) -> Result<RingBuf> {
        let mem = HostShared::host_alloc(ring_bytes(slots))?;
        // SAFETY: fresh zeroed memory of ring_bytes(slots) bytes, 64-aligned, owned here.
        unsafe { init_ring(mem.host_ptr(), mem.len(), slots, chunk)? };
        let counters = HostShared::host_alloc(COUNTERS_BYTES)?;
        let stage = HostShared::host_alloc(slots * chunk as usize)?;
        Ok(RingBuf { mem, counters, stage, slots, chunk })
    }
    fn channel(&self) -> Channel {
        Channel {
            ring: self.mem.host_ptr() as u64,
            slots: self.slots as u64,
            ret: 0,
            stage: if self.chunk == 0 { 0 } else { self.stage.host_ptr() as u64 },
            chunk: self.chunk,
            counters: self.counters.host_ptr() as u64,
            thread_stage: 0, flags: 0,
        }
    }
    /// (head, tail, completed): the counters' head and the header's tail and completed.
    fn counters(&self) -> (u64, u64, u64) {
        let ch = self.channel();
        // SAFETY: the channel is this RingBuf's, alive.
        unsafe {
            let (t, c) = rshmem::transport::proxy::ring::counters(ch.ring_ref());
            (head(&ch), t, c)
        }
    }
    fn drain(&self) -> Result<Drain<'_>> {
        // SAFETY: the memory is this RingBuf's, mapped for the borrow's lifetime; one drain per test.
        unsafe { Drain::attach(self.mem.host_ptr(), self.mem.len(), self.stage.host_ptr(), self.slots * self.chunk as usize) }
    }
    /// Runs the drain loop (`Drain::run`), completing each request (in order: the ring's `completed`
    /// stored with release) when `f` returns Ok for it.
    fn run(&self, stop: impl FnMut() -> bool, mut f: impl FnMut(&Request) -> Result<()>) -> Result<DrainStats> {
        // SAFETY: `completed` is an 8-aligned word of this RingBuf's header, alive for this call and
        // accessed atomically.
        let completed = unsafe { std::sync::atomic::AtomicU64::from_ptr(self.mem.host_ptr().add(rshmem_device::remote::proxy::COMPLETED_OFF) as *mut u64) };
        self.drain()?.run(
            &mut (),
            stop,
            |_, e| {
                let mut r = e.req;
                r.seq = e.seq;
                f(&r)?;
                completed.store(e.seq + e.tickets - 1, std::sync::atomic::Ordering::Release);
                Ok(())
            },
            |_| Ok(()),
        )
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x100_0000_01b3).rotate_left(29)
}

/// Checksum over every body field but `sig_value` (which carries it).
fn checksum(r: &Request) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325;
    for v in [r.op as u64, r.sub as u64, r.pe as u64, r.offset, r.len, r.src, r.value, r.sig_offset] {
        h = mix(h, v);
    }
    h
}

/// Request `i` of poster `who`: random contents, its poster in `pe`, its index in `offset`.
fn request(rng: &mut Rng, who: u32, i: u64) -> Request {
    // Every kind but the staged puts (these rings have no staging).
    let mut r = Request {
        op: (rng.next() % op::NOP as u64) as u16 + 1,
        sub: rng.next() as u16,
        pe: who,
        offset: i,
        len: rng.next(),
        src: rng.next(),
        value: rng.next(),
        sig_offset: rng.next(),
        sig_value: 0,
        seq: rng.next(), // ignored by post: the seq word is the ticket's
    };
    r.sig_value = checksum(&r);
    r
}

/// Sets the flag when dropped, also while unwinding: a failing poster must not leave the proxy thread
/// of a `thread::scope` running forever (the scope would then never end).
struct SetOnDrop<'a>(&'a AtomicBool);
impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The proxy's check of each request: intact, from a known poster, next in that poster's order, the
/// next sequence number overall. Records the poster's progress in `done` (for `wait_completed` checks).
struct Checker {
    next_of: Vec<u64>,
    last_seq: u64,
    done: Arc<Vec<AtomicU64>>,
}

impl Checker {
    fn new(posters: usize, done: Arc<Vec<AtomicU64>>) -> Checker {
        Checker { next_of: vec![0; posters], last_seq: 0, done }
    }
    fn check(&mut self, r: &Request) -> Result<()> {
        if r.sig_value != checksum(r) {
            return Err(Error::new(format!("torn or corrupt entry {r:?}")));
        }
        if r.seq != self.last_seq + 1 {
            return Err(Error::new(format!("sequence {} after {}", r.seq, self.last_seq)));
        }
        self.last_seq = r.seq;
        let who = r.pe as usize;
        let Some(next) = self.next_of.get_mut(who) else { return Err(Error::new(format!("unknown poster {who}"))) };
        if r.offset != *next {
            return Err(Error::new(format!("poster {who}: request {} arrived, {} expected", r.offset, *next)));
        }
        *next += 1;
        self.done[who].store(*next, Ordering::Relaxed);
        Ok(())
    }
}

/// `posters` threads each post `per` requests into a ring of `slots` slots while a proxy thread
/// drains it; every 61st request a poster waits for its completion and checks the proxy has seen it.
fn threads_run(slots: usize, posters: usize, per: u64) {
    let ring = RingBuf::new(slots).unwrap();
    let done: Arc<Vec<AtomicU64>> = Arc::new((0..posters).map(|_| AtomicU64::new(0)).collect());
    let finished = AtomicBool::new(false);
    let rref = ring.channel();
    std::thread::scope(|s| {
        let _end = SetOnDrop(&finished);
        let proxy = s.spawn(|| {
            let mut checker = Checker::new(posters, done.clone());
            let stats = ring.run(|| finished.load(Ordering::Acquire), |r| checker.check(r)).unwrap();
            // Everything posted was drained (run stops only when idle after `finished`).
            assert_eq!(stats.requests, posters as u64 * per);
            assert_eq!(checker.next_of, vec![per; posters]);
        });
        let handles: Vec<_> = (0..posters)
            .map(|who| {
                let done = done.clone();
                s.spawn(move || {
                    let ring = &rref;
                    let mut rng = Rng(who as u64 * 7919 + 1);
                    for i in 0..per {
                        let r = request(&mut rng, who as u32, i);
                        // SAFETY: the ring lives in `ring` (RingBuf) for the whole scope.
                        let seq = unsafe { post_with(ring, &r, deadline(Duration::from_secs(30))) }.unwrap();
                        if i % 61 == 60 || i + 1 == per {
                            // SAFETY: as above.
                            unsafe { wait_completed_with(ring, seq, deadline(Duration::from_secs(30))) }.unwrap();
                            let seen = done[who].load(Ordering::Relaxed);
                            assert!(seen > i, "poster {who}: wait_completed({seq}) returned before the proxy saw request {i} (it has seen {seen})");
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        finished.store(true, Ordering::Release);
        proxy.join().unwrap();
    });
    let (head, tail, completed) = ring.counters();
    assert_eq!((head, tail, completed), (posters as u64 * per, posters as u64 * per, posters as u64 * per));
}

#[test]
fn threads_post_exactly_once_in_order_64_slots() {
    threads_run(64, 16, 2500);
}

#[test]
fn threads_stress_2_slots() {
    threads_run(2, 8, 1500);
}

#[test]
fn one_slot_ring_works() {
    threads_run(1, 3, 500);
}

/// The plain `post` / `wait_completed` (waiting through the arch idle hook) on one thread.
#[test]
fn plain_post_and_wait_completed() {
    let ring = RingBuf::new(4).unwrap();
    let rref = &ring.channel();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let _end = SetOnDrop(&stop);
        let proxy = s.spawn(|| {
            let mut c = Checker::new(1, Arc::new(vec![AtomicU64::new(0)]));
            ring.run(|| stop.load(Ordering::Acquire), |r| c.check(r)).unwrap()
        });
        let mut rng = Rng(5);
        for i in 0..200 {
            let r = request(&mut rng, 0, i);
            // SAFETY: the ring outlives the scope.
            let seq = unsafe { post(rref, &r) };
            assert_eq!(seq, i + 1);
            // SAFETY: as above.
            unsafe { wait_completed(rref, seq) };
        }
        stop.store(true, Ordering::Release);
        assert_eq!(proxy.join().unwrap().requests, 200);
    });
}

/// wait_completed does not return before the proxy has completed the request (the proxy is not
/// running: it must time out), and returns once it has.
#[test]
fn wait_completed_waits_for_the_proxy() {
    let ring = RingBuf::new(8).unwrap();
    let ch = &ring.channel();
    let r = Request { op: op::NOP, ..Request::default() };
    // SAFETY: the ring is alive.
    let s1 = unsafe { post_with(ch, &r, deadline(Duration::from_secs(1))) }.unwrap();
    // SAFETY: as above.
    let s2 = unsafe { post_with(ch, &r, deadline(Duration::from_secs(1))) }.unwrap();
    assert_eq!((s1, s2), (1, 2));
    // SAFETY: as above.
    let e = unsafe { wait_completed_with(ch, s1, deadline(Duration::from_millis(50))) };
    assert_eq!(e, Err(Stalled::NotCompleted { seq: 1, completed: 0 }));
    let mut d = ring.drain().unwrap();
    // The callback sees `completed` not yet advanced for its own request.
    let mut seen = 0;
    let n = d
        .poll(|_| {
            seen += 1;
            // SAFETY: the ring is alive.
            let c = unsafe { rshmem_device::remote::proxy::completed(ch) };
            if c >= seen {
                return Err(Error::new(format!("completed {c} before the callback of {seen} returned")));
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(n, 2);
    // SAFETY: as above.
    unsafe { wait_completed_with(ch, s2, deadline(Duration::from_millis(50))) }.unwrap();
}

/// A proxy that stops is detected by a waiting poster within its deadline: the ring fills, the next
/// post gives up with RingFull, and a wait for an undrained request gives up with NotCompleted.
#[test]
fn stopped_proxy_is_detected_by_a_waiting_poster() {
    let ring = RingBuf::new(4).unwrap();
    let stop = AtomicBool::new(false);
    let rref = ring.channel();
    std::thread::scope(|s| {
        let _end = SetOnDrop(&stop);
        let proxy = s.spawn(|| ring.run(|| stop.load(Ordering::Acquire), |_| Ok(())).unwrap());
        let r = Request { op: op::NOP, ..Request::default() };
        let ring = &rref;
        for _ in 0..10 {
            // SAFETY: the ring outlives the scope.
            let seq = unsafe { post_with(ring, &r, deadline(Duration::from_secs(10))) }.unwrap();
            // SAFETY: as above.
            unsafe { wait_completed_with(ring, seq, deadline(Duration::from_secs(10))) }.unwrap();
        }
        stop.store(true, Ordering::Release);
        assert_eq!(proxy.join().unwrap().requests, 10);
        // The proxy is gone: 4 slots fill, the 5th post gives up after its deadline.
        for _ in 0..4 {
            // SAFETY: as above.
            unsafe { post_with(ring, &r, deadline(Duration::from_secs(1))) }.unwrap();
        }
        let t0 = Instant::now();
        // SAFETY: as above.
        let e = unsafe { post_with(ring, &r, deadline(Duration::from_millis(200))) };
        let waited = t0.elapsed();
        assert_eq!(e, Err(Stalled::RingFull { seq: 15, tail: 10 }));
        assert!(waited >= Duration::from_millis(200) && waited < Duration::from_secs(3), "gave up after {waited:?}");
        // SAFETY: as above.
        let e = unsafe { wait_completed_with(ring, 14, deadline(Duration::from_millis(100))) };
        assert_eq!(e, Err(Stalled::NotCompleted { seq: 14, completed: 10 }));
    });
}

/// A callback error ends the drain with a message naming the request and its target PE.
#[test]
fn callback_error_names_the_request() {
    let ring = RingBuf::new(4).unwrap();
    let r = Request { op: op::PUT, pe: 3, ..Request::default() };
    // SAFETY: the ring is alive.
    unsafe { post_with(&ring.channel(), &r, deadline(Duration::from_secs(1))) }.unwrap();
    let e = ring.run(|| true, |_| Err(Error::new("connection to PE 3 lost"))).unwrap_err();
    assert_eq!(e.message(), "proxy ring: request 1 (op 1, target PE 3): connection to PE 3 lost");
    // Drained (taken off the ring) but not completed.
    assert_eq!(ring.counters(), (1, 0, 0));
}

/// Writes `v` into the seq word of slot `i` of the ring at `base` (test corruption).
fn set_seq(base: *mut u8, i: usize, v: u64) {
    // SAFETY: callers pass a live ring with more than `i` slots.
    unsafe { AtomicU64::from_ptr(base.add(HEADER_BYTES + i * SLOT_BYTES + SEQ_OFF) as *mut u64) }.store(v, Ordering::Release)
}

#[test]
fn bad_rings_are_errors() {
    for (slots, what) in [(0, "0 slots (must be a power of two"), (3, "3 slots"), (1 << 21, "2097152 slots")] {
        let mem = HostShared::host_alloc(ring_bytes(4)).unwrap();
        // SAFETY: the memory is ours; the slot count is refused before anything is written.
        let e = unsafe { init_ring(mem.host_ptr(), mem.len(), slots, 0) }.err().unwrap();
        assert!(e.message().contains(what), "{e}");
    }

    let mut mem = vec![0u64; ring_bytes(8) / 8 + 8];
    let base = mem.as_mut_ptr() as *mut u8;
    let base = base.wrapping_add(base.align_offset(64));
    // In every call below, `mem` (alive to the end of the test, used by nothing else) holds at least
    // ring_bytes(8) bytes from the 64-aligned `base`; each call is given a length within them.
    // SAFETY: as just said.
    let e = unsafe { Drain::attach(base, ring_bytes(8), std::ptr::null(), 0) }.err().unwrap();
    assert!(e.message().contains("bad magic 0x0"), "{e}");
    // SAFETY: `mem` has ring_bytes(8) + 64 bytes and `base` lies at most 56 bytes into it, so base + 8
    // still has ring_bytes(8) bytes.
    assert!(unsafe { init_ring(base.wrapping_add(8), ring_bytes(8), 8, 0) }.err().unwrap().message().contains("not 64-byte aligned"));
    // SAFETY: as above.
    assert!(unsafe { init_ring(base, ring_bytes(8) - 1, 8, 0) }.err().unwrap().message().contains("need 768"));
    // SAFETY: as above.
    assert!(unsafe { init_ring(base, ring_bytes(8), 8, 100) }.err().unwrap().message().contains("staging chunks of 100 bytes"));
    // SAFETY: as above.
    unsafe { init_ring(base, ring_bytes(8), 8, 64) }.unwrap();
    // SAFETY: as above: a ring with staging needs its staging area.
    assert!(unsafe { Drain::attach(base, ring_bytes(8), std::ptr::null(), 0) }.err().unwrap().message().contains("need 512 bytes of staging"));
    // SAFETY: as above.
    unsafe { init_ring(base, ring_bytes(8), 8, 0) }.unwrap();
    // SAFETY: as above (a shorter length than the memory holds).
    assert!(unsafe { Drain::attach(base, ring_bytes(4), std::ptr::null(), 0) }.err().unwrap().message().contains("8 slots need 768"));
    // SAFETY: as above.
    assert!(unsafe { Drain::attach(base, 100, std::ptr::null(), 0) }.err().unwrap().message().contains("less than the 256-byte header"));
    // A foreign seq in the expected slot: an error naming the slot, and the entry is not handed out.
    // SAFETY: as above: the ring initialized there, 8 slots.
    let mut d = unsafe { Drain::attach(base, ring_bytes(8), std::ptr::null(), 0) }.unwrap();
    set_seq(base, 0, 9);
    let e = d.poll(|_| panic!("a corrupt entry was handed out")).unwrap_err();
    assert!(e.message().contains("slot 0 holds sequence number 9 where 1 (or 0) was expected"), "{e}");
    // A channel that names no ring is refused before any access (the addresses are never
    // dereferenced: not mapped memory).
    let buf = RingBuf::new(4).unwrap();
    let good = buf.channel();
    for bad in [
        Channel { ring: 0, ..good },
        Channel { ring: good.ring + 8, ..good },
        Channel { slots: 0, ..good },
        Channel { slots: 3, ..good },
        Channel { slots: 1 << 21, ..good },
        Channel { counters: 0, ..good },
        Channel { counters: good.counters + 8, ..good },
        Channel { chunk: 100, ..good },
    ] {
        // SAFETY: refused by the validity check before any access.
        assert_eq!(unsafe { post_with(&bad, &Request::default(), |_| true) }, Err(Stalled::NotARing), "{bad:?}");
        // SAFETY: as above.
        assert_eq!(unsafe { wait_completed_with(&bad, 1, |_| true) }, Err(Stalled::NotARing), "{bad:?}");
    }
    // More tickets than the ring has slots: refused before anything is reserved.
    // SAFETY: the channel is buf's, alive.
    assert_eq!(unsafe { reserve_with(&good, 5, |_| true) }, Err(Stalled::NotARing));
    assert_eq!(buf.counters(), (0, 0, 0));
}

/// Random and mutated ring memory (the header and slots live in memory other processes write): attach
/// and poll never panic, never hand out an entry whose seq was not the expected one, and fail with a
/// message.
#[test]
fn fuzz_ring_memory_never_panics() {
    let mut rng = Rng(42);
    let slots = 4usize;
    let bytes = ring_bytes(slots);
    let mut mem = vec![0u64; bytes / 8 + 8];
    let base = mem.as_mut_ptr() as *mut u8;
    let base = base.wrapping_add(base.align_offset(64));
    let words = bytes / 8;
    let (mut attached, mut handed, mut errors) = (0, 0, 0);
    for round in 0..20_000 {
        // SAFETY: `mem` holds `bytes` bytes from `base`; no other thread touches it.
        unsafe { init_ring(base, bytes, slots, 0) }.unwrap();
        let w = base as *mut u64;
        // Mutations: a valid ring with published entries, then random words overwritten.
        for t in 0..(rng.next() % 5) {
            set_seq(base, t as usize, t + 1);
        }
        for _ in 0..(rng.next() % 6) {
            let i = (rng.next() % words as u64) as usize;
            let v = match rng.next() % 5 {
                0 => 0,
                1 => rng.next() % 8,
                2 => u64::MAX,
                3 => rshmem::transport::proxy::ring::RING_MAGIC,
                _ => rng.next(),
            };
            // SAFETY: i < words: inside the ring memory.
            unsafe { AtomicU64::from_ptr(w.add(i)) }.store(v, Ordering::Relaxed);
        }
        if round % 3 == 0 {
            // Fully random header.
            for i in 0..4 {
                // SAFETY: header words.
                unsafe { AtomicU64::from_ptr(w.add(i)) }.store(rng.next() % 16, Ordering::Relaxed);
            }
        }
        // SAFETY: as above.
        let Ok(mut d) = (unsafe { Drain::attach(base, bytes, std::ptr::null(), 0) }) else {
            errors += 1;
            continue;
        };
        attached += 1;
        assert!(d.slots().is_power_of_two() && rshmem::transport::proxy::ring::ring_bytes(d.slots() as usize) <= bytes);
        for _ in 0..3 {
            let mut expect = d.next() + 1;
            match d.poll_entries(|e| {
                assert_eq!(e.seq, expect, "an entry with a foreign seq was handed out");
                expect += e.tickets;
                handed += 1;
                Ok(())
            }) {
                Ok(_) => {}
                Err(e) => {
                    assert!(e.message().starts_with("proxy ring: slot") || e.message().contains("cannot hold"), "{e}");
                    errors += 1;
                    break;
                }
            }
        }
    }
    assert!(attached > 1000 && handed > 1000 && errors > 1000, "coverage: {attached} {handed} {errors}");
}

/// `check_request` on random and edge-value requests: never panics; what it accepts is in range.
#[test]
fn fuzz_check_request() {
    let mut rng = Rng(7);
    let heap = 1u64 << 20;
    let edge = |rng: &mut Rng| match rng.next() % 6 {
        0 => 0,
        1 => heap - (rng.next() % 16),
        2 => u64::MAX - (rng.next() % 16),
        3 => rng.next() % 64,
        4 => 8 * (rng.next() % (heap / 8)),
        _ => rng.next(),
    };
    let mut ok = 0;
    for _ in 0..200_000 {
        let r = Request {
            op: (rng.next() % 9) as u16,
            sub: (rng.next() % 3) as u16,
            pe: (rng.next() % 6) as u32,
            offset: edge(&mut rng),
            len: [1, 2, 4, 8, 3, 0][(rng.next() % 6) as usize] * if rng.next().is_multiple_of(4) { 1 << (rng.next() % 20) } else { 1 },
            src: edge(&mut rng),
            value: rng.next(),
            sig_offset: edge(&mut rng),
            sig_value: rng.next(),
            seq: 0,
        };
        match check_request(&r, 4, heap) {
            Ok(()) => {
                ok += 1;
                if r.op != op::NOP {
                    assert!(r.pe < 4);
                }
                if matches!(r.op, op::PUT | op::PUT_INLINE | op::GET | op::AMO | op::PUT_SIGNAL) {
                    assert!(r.offset.checked_add(r.len).unwrap() <= heap, "{r:?}");
                }
                if matches!(r.op, op::SIGNAL | op::PUT_SIGNAL) {
                    assert!(r.sig_offset + 8 <= heap && r.sig_offset.is_multiple_of(8), "{r:?}");
                }
            }
            Err(e) => assert!(e.message().starts_with(&format!("proxy request to PE {}: ", r.pe)), "{e}"),
        }
    }
    assert!(ok > 1000, "only {ok} accepted");
    let put = |pe, offset, len| Request { op: op::PUT, pe, offset, len, src: 64, ..Request::default() };
    assert_eq!(check_request(&put(9, 0, 8), 4, heap).unwrap_err().message(), "proxy request to PE 9: PE out of range (the job has 4 PEs)");
    assert!(check_request(&put(1, heap - 4, 8), 4, heap).unwrap_err().message().contains("outside the 1048576-byte heap"));
    assert!(check_request(&put(1, u64::MAX, 2), 4, heap).is_err());
    assert!(check_request(&Request { op: 99, ..put(1, 0, 8) }, 4, heap).unwrap_err().message().contains("unknown operation 99"));
    // `g`: a GET of at most 8 bytes into the return slot has no local address; with one, or longer,
    // it is refused; a plain GET still needs its address.
    use rshmem_device::remote::proxy::SUB_RETURN;
    let g = |len, src| Request { op: op::GET, sub: SUB_RETURN, pe: 1, offset: 64, len, src, ..Request::default() };
    for len in [1, 2, 4, 8] {
        check_request(&g(len, 0), 4, heap).unwrap();
    }
    assert!(check_request(&g(16, 0), 4, heap).unwrap_err().message().contains("return slot of 16 bytes"));
    assert!(check_request(&g(8, 64), 4, heap).unwrap_err().message().contains("return slot"));
    assert!(check_request(&Request { sub: 0, ..g(8, 0) }, 4, heap).unwrap_err().message().contains("null local address"));
}

// ---------------------------------------------------------------- processes sharing one ring

const CHILD_PER: u64 = 4000;

/// In a child process (CHILD_VAR = "FD WHO"): maps the ring from the inherited memfd, posts CHILD_PER
/// requests as poster WHO, waits for their completion, prints "OK" and exits. In the test run itself:
/// does nothing.
#[test]
fn child_poster() {
    let Ok(spec) = std::env::var(CHILD_VAR) else { return };
    let mut it = spec.split_whitespace().map(|w| w.parse::<u64>().unwrap());
    let (fd, who) = (it.next().unwrap() as i32, it.next().unwrap());
    let bytes = ring_bytes(64) + COUNTERS_BYTES;
    // SAFETY: mapping an inherited memfd of `bytes` bytes, shared.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    assert_ne!(p, libc::MAP_FAILED);
    // The ring, then its counters (shared by the posting processes), in the one mapping.
    let ring = &Channel { ring: p as u64, slots: 64, ret: 0, stage: 0, chunk: 0, counters: p as u64 + ring_bytes(64) as u64, thread_stage: 0, flags: 0 };
    let mut rng = Rng(who * 31 + 3);
    let mut last = 0;
    for i in 0..CHILD_PER {
        let r = request(&mut rng, who as u32, i);
        // SAFETY: the mapping stays for the life of the process.
        last = unsafe { post_with(ring, &r, deadline(Duration::from_secs(30))) }.unwrap();
    }
    // SAFETY: as above.
    unsafe { wait_completed_with(ring, last, deadline(Duration::from_secs(30))) }.unwrap();
    println!("OK {who} {last}");
    std::process::exit(0);
}

#[test]
fn processes_share_ring_through_memfd() {
    let children = 4u64;
    let bytes = ring_bytes(64) + COUNTERS_BYTES;
    // No CLOEXEC: the children inherit the descriptor.
    // SAFETY: a plain syscall with a valid C string.
    let fd = unsafe { libc::memfd_create(c"rshmem-test-ring".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: sizing and mapping our own fresh memfd.
    let p = unsafe {
        assert_eq!(libc::ftruncate(fd, bytes as libc::off_t), 0);
        libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    // SAFETY: the mapping is ours, `bytes` long, page-aligned.
    unsafe { init_ring(p as *mut u8, ring_bytes(64), 64, 0) }.unwrap();
    let exe = std::env::current_exe().unwrap();
    let procs: Vec<_> = (0..children)
        .map(|who| {
            std::process::Command::new(&exe)
                .args(["--exact", "child_poster", "--nocapture", "--test-threads=1"])
                .env(CHILD_VAR, format!("{fd} {who}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let done: Arc<Vec<AtomicU64>> = Arc::new((0..children).map(|_| AtomicU64::new(0)).collect());
    let mut checker = Checker::new(children as usize, done);
    // SAFETY: the mapping lives until the munmap below.
    let mut d = unsafe { Drain::attach(p as *mut u8, ring_bytes(64), std::ptr::null(), 0) }.unwrap();
    let t0 = Instant::now();
    while d.next() < children * CHILD_PER {
        assert!(t0.elapsed() < Duration::from_secs(60), "drained only {} requests", d.next());
        if d.poll(|r| checker.check(r)).unwrap() == 0 {
            std::thread::yield_now();
        }
    }
    for (who, c) in procs.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains(&format!("OK {who} ")), "child {who}: {text} {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(checker.next_of, vec![CHILD_PER; children as usize]);
    // SAFETY: unmapping and closing what we created.
    unsafe {
        libc::munmap(p, bytes);
        libc::close(fd);
    }
}

/// The plain `post` with a channel that names no ring stops (here: the default hook panics; under
/// the runtime the PE exits) with a message naming the call, instead of writing anywhere.
#[test]
fn plain_post_on_a_bad_channel_fails_naming_the_call() {
    let ring = RingBuf::new(4).unwrap();
    let bad = Channel { slots: 6, ..ring.channel() };
    let e = std::panic::catch_unwind(|| {
        // SAFETY: refused before any access.
        unsafe { post(&bad, &Request::default()) }
    })
    .unwrap_err();
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("rshmem proxy post (not a request channel: null or misaligned ring, bad slot count or chunk, no counters"), "{msg}");
    // Nothing was reserved or written.
    assert_eq!(ring.counters(), (0, 0, 0));
}

/// Staged puts (`op::PUT_STAGED`): posters reserve a request's tickets, copy its bytes into their
/// staging chunks (wrapping at the end of the staging area) and publish; the drain hands out each
/// request once, with exactly the bytes posted, its tickets counted, in per-poster order, while the
/// posters keep the small ring (16 slots of 64-byte chunks) full.
#[test]
fn staged_puts_arrive_intact_across_the_wrap() {
    const SLOTS: usize = 16;
    const CHUNK: u64 = 64;
    const PER: u64 = 3000;
    const POSTERS: usize = 4;
    let ring = RingBuf::staged(SLOTS, CHUNK).unwrap();
    let ch = ring.channel();
    let finished = AtomicBool::new(false);
    // The bytes of request i of poster `who`: `len` bytes from a generator seeded by both.
    let bytes = |who: u64, i: u64, len: usize| -> Vec<u8> {
        let mut r = Rng(who * 1_000_003 + i);
        (0..len).map(|_| r.next() as u8).collect()
    };
    let len_of = |who: u64, i: u64| (Rng(who ^ (i << 8)).next() % (8 * CHUNK + 1)) as usize;
    std::thread::scope(|s| {
        let _end = SetOnDrop(&finished);
        let proxy = s.spawn(|| {
            let mut d = ring.drain().unwrap();
            let mut next_of = [0u64; POSTERS];
            let mut wrapped = 0;
            let t0 = Instant::now();
            while !(finished.load(Ordering::Acquire) && next_of.iter().all(|&n| n == PER)) {
                assert!(t0.elapsed() < Duration::from_secs(60), "drained only {next_of:?}");
                let n = d
                    .poll_entries(|e| {
                        let (who, i) = (e.req.pe as u64, e.req.offset);
                        assert_eq!(e.req.op, op::PUT_STAGED);
                        assert_eq!(i, next_of[who as usize], "poster {who} out of order");
                        assert_eq!(e.tickets, tickets(op::PUT_STAGED, e.req.len, CHUNK));
                        // SAFETY: before `release`.
                        let [a, b] = unsafe { e.staged() };
                        wrapped += !b.is_empty() as u32;
                        let got = [a, b].concat();
                        assert_eq!(got, bytes(who, i, len_of(who, i)), "poster {who} request {i}: staged bytes differ");
                        next_of[who as usize] += 1;
                        Ok(())
                    })
                    .unwrap();
                d.release();
                if n == 0 {
                    std::thread::yield_now();
                }
            }
            assert!(wrapped > 10, "only {wrapped} requests wrapped at the end of the staging area");
        });
        let hs: Vec<_> = (0..POSTERS as u64)
            .map(|who| {
                let ch = &ch;
                s.spawn(move || {
                    for i in 0..PER {
                        let data = bytes(who, i, len_of(who, i));
                        let r = Request { op: op::PUT_STAGED, pe: who as u32, offset: i, len: data.len() as u64, ..Request::default() };
                        let k = tickets(r.op, r.len, CHUNK);
                        // SAFETY: the channel is the RingBuf's, alive for the scope; the tickets are
                        // ours, staged once and published once.
                        unsafe {
                            let t = reserve_with(ch, k, deadline(Duration::from_secs(30))).unwrap();
                            stage_copy(ch, t, data.as_ptr(), data.len(), 0, 1);
                            publish(ch, t, &r);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        finished.store(true, Ordering::Release);
        proxy.join().unwrap();
    });
}
