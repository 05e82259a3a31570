//! Unit tests of the remote engine's target side, through a real lane: a lane of an engine of PE 0
//! (CPU services, a heap of our own, its thread applying as on the CPU backend) on one end of a TCP
//! connection on 127.0.0.1, and on the other end this test, speaking the wire by hand as PE 1.
//!
//! - random streams of valid requests, written in random pieces (frames split anywhere, rings that
//!   wrap often), against a model of the heap: every byte, every fetched value and every GET's data
//!   as the model says, and the ACKs count every request;
//! - random garbage after valid frames: the lane fails naming the peer (PE 1), answers with an ERROR,
//!   and nothing of the bad frame, nor anything after it, reaches the heap.

use crate::error::Result;
use crate::platform::backend::Backend;
use crate::platform::cpu::CpuServices;
use crate::platform::services::Services;
use crate::transport::proxy::engine::{Engine, Settings};
use crate::transport::proxy::lanes::{self, Lane};
use crate::transport::proxy::target::Target;
use crate::transport::test_rng::Rng;
use crate::transport::wire::{self, AmoOp, Checked, Frames, Head, HEAD_BYTES};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const HEAP: usize = 1 << 20;

/// A heap of our own as the platform, backed up to its second field (a GPU heap grows; the CPU
/// backend's is backed whole).
struct Heap(Box<[u64]>, usize);

impl Backend for Heap {
    fn name(&self) -> &'static str {
        "test"
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn heap_base(&self) -> usize {
        self.0.as_ptr() as usize
    }
    fn heap_size(&self) -> usize {
        HEAP
    }
    fn backed(&self) -> usize {
        self.1
    }
    fn peer_base(&self, _pe: usize) -> usize {
        0
    }
    fn zero(&self, _off: usize, _len: usize) -> Result<()> {
        unreachable!()
    }
    fn quiet(&self) -> Result<()> {
        Ok(())
    }
    unsafe fn putmem(&self, _dst: *mut u8, _src: *const u8, _bytes: usize, _pe: i32) -> Result<()> {
        unreachable!()
    }
    unsafe fn getmem(&self, _dst: *mut u8, _src: *const u8, _bytes: usize, _pe: i32) -> Result<()> {
        unreachable!()
    }
    unsafe fn copy_in(&self, _dst: *mut u8, _src: &[u8]) -> Result<()> {
        unreachable!()
    }
    unsafe fn copy_out(&self, _dst: &mut [u8], _src: *const u8) -> Result<()> {
        unreachable!()
    }
    fn services(&self) -> Arc<dyn Services> {
        Arc::new(CpuServices)
    }
}

/// PE 0's engine with one lane to PE 1 (rings of `ring` bytes), its thread running, and PE 1's end of
/// the connection.
fn lane_pair(ring: u64) -> (Arc<Engine>, Arc<Heap>, TcpStream, std::thread::JoinHandle<()>) {
    lane_pair_backed(ring, HEAP)
}

/// `lane_pair` with PE 0's heap backed only up to `backed` bytes.
fn lane_pair_backed(ring: u64, backed: usize) -> (Arc<Engine>, Arc<Heap>, TcpStream, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mine, _) = l.accept().unwrap();
    mine.set_nonblocking(true).unwrap();
    let heap = Arc::new(Heap(vec![0u64; HEAP / 8].into_boxed_slice(), backed));
    let services: Arc<dyn Services> = Arc::new(CpuServices);
    let mem = services.host_shared(Lane::mem_bytes(ring, ring)).unwrap();
    let bounce = services.host_shared(wire::MAX_PAYLOAD as usize).unwrap();
    let lane = Arc::new(Lane::new(1, 0, 1, mine, mem, ring, ring, bounce).unwrap());
    let peer_lanes = vec![0..0, 0..1];
    let target = Target::new(heap.clone(), services.clone(), std::slice::from_ref(&lane), &peer_lanes, Duration::from_millis(1)).unwrap();
    let set = Settings {
        slots: 64,
        chunk: 1024,
        thread_stage: 4096,
        flags: 0,
        ring_bytes: ring,
        reply_bytes: ring,
        lane_shift: 14,
        spin: false,
        wait_limit: Duration::from_secs(30),
        linger: Duration::from_millis(1),
        trace: false,
        stats: false,
    };
    let eng = Arc::new(Engine::new(0, 2, set, services, vec![lane], peer_lanes, target).unwrap());
    let h = lanes::thread::spawn(&eng, 0).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    (eng, heap, peer, h)
}

fn heap_bytes(h: &Heap) -> &[u8] {
    // SAFETY: the heap's words as bytes (read while the lane thread is idle: after its ACKs).
    unsafe { std::slice::from_raw_parts(h.0.as_ptr() as *const u8, HEAP) }
}

/// One request of the random stream and what the model expects back.
enum Want {
    Nothing,
    Fetch(u64),
    Get(Vec<u8>),
}

/// A random valid request, applied to the model; its frame appended to `out`.
fn random_request(rng: &mut Rng, model: &mut [u8], out: &mut Vec<u8>, tag: u64) -> Want {
    match rng.below(5) {
        0 | 1 => {
            let len = [1, 3, 8, 16, 100, 4096, 70_000][rng.below(7) as usize];
            let off = rng.below((HEAP - len) as u64) as usize;
            let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            model[off..off + len].copy_from_slice(&data);
            Frames::put_head(out, off as u64, len as u32);
            out.extend_from_slice(&data);
            out.extend_from_slice(wire::pad(len));
            Want::Nothing
        }
        2 => {
            let width = if rng.below(2) == 0 { 4usize } else { 8 };
            let off = rng.below((HEAP / width) as u64) as usize * width;
            let op = [AmoOp::FetchAdd, AmoOp::Add, AmoOp::Swap, AmoOp::CompareSwap, AmoOp::FetchXor, AmoOp::Set, AmoOp::Fetch][rng.below(7) as usize];
            let mask = if width == 4 { u32::MAX as u64 } else { u64::MAX };
            let value = if op == AmoOp::Fetch { 0 } else { rng.next() & mask };
            let mut cur = [0u8; 8];
            cur[..width].copy_from_slice(&model[off..off + width]);
            let old = u64::from_le_bytes(cur);
            let compare = if op == AmoOp::CompareSwap { if rng.below(2) == 0 { old } else { rng.next() & mask } } else { 0 };
            let new = match op {
                AmoOp::FetchAdd | AmoOp::Add => old.wrapping_add(value) & mask,
                AmoOp::Swap | AmoOp::Set => value,
                AmoOp::CompareSwap => if old == compare { value } else { old },
                AmoOp::FetchXor => old ^ value,
                _ => old,
            };
            model[off..off + width].copy_from_slice(&new.to_le_bytes()[..width]);
            Frames::amo(out, op as u8, width as u8, off as u64, value, compare, op.fetches().then_some(tag as u32));
            if op.fetches() { Want::Fetch(old) } else { Want::Nothing }
        }
        3 => {
            let off = rng.below((HEAP / 8) as u64) as usize * 8;
            let value = rng.next();
            let add = rng.below(2) == 0;
            let old = u64::from_le_bytes(model[off..off + 8].try_into().unwrap());
            let new = if add { old.wrapping_add(value) } else { value };
            model[off..off + 8].copy_from_slice(&new.to_le_bytes());
            Frames::signal(out, if add { wire::SIGNAL_OP_ADD } else { wire::SIGNAL_OP_SET }, off as u64, value);
            Want::Nothing
        }
        _ => {
            let len = [1usize, 8, 300, 5000][rng.below(4) as usize];
            let off = rng.below((HEAP - len) as u64) as usize;
            Frames::get(out, off as u64, len as u32, tag);
            Want::Get(model[off..off + len].to_vec())
        }
    }
}

/// Reads whole frames from PE 0's side until `acks` reaches `want`, checking every answer against
/// `wants` in order.
fn read_answers(s: &mut TcpStream, wants: &mut std::collections::VecDeque<(u64, Want)>, want_acks: u64) {
    let mut acked = 0;
    let mut buf = Vec::new();
    let start = Instant::now();
    while acked < want_acks || !wants.iter().all(|w| matches!(w.1, Want::Nothing)) {
        assert!(start.elapsed() < Duration::from_secs(30), "answers stopped: {acked} of {want_acks} acknowledged");
        let mut b = [0u8; 65536];
        let n = match s.read(&mut b) {
            // A timed wait interrupted (the process stopped and resumed): read again.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.expect("read answers"),
        };
        assert!(n > 0, "PE 0 closed");
        buf.extend_from_slice(&b[..n]);
        loop {
            if buf.len() < HEAD_BYTES {
                break;
            }
            let h: Head = bytemuck::pod_read_unaligned(&buf[..HEAD_BYTES]);
            let size = wire::frame_bytes(&h).expect("a known kind");
            if buf.len() < size {
                break;
            }
            let f: Vec<u8> = buf.drain(..size).collect();
            let ctx = wire::Context { peer: 0, lanes: 1, lane: 0, backed: HEAP as u64 };
            match wire::check(&f, &ctx).expect("PE 0 sent a valid frame") {
                Checked::Ack { count } => {
                    assert!(count >= acked && count <= want_acks, "ACK {count} after {acked} of {want_acks}");
                    acked = count;
                }
                Checked::AmoReply { tag, value } => {
                    while matches!(wants.front(), Some((_, Want::Nothing))) {
                        wants.pop_front();
                    }
                    let (t, w) = wants.pop_front().expect("an answer nobody asked for");
                    assert_eq!(tag as u64, t, "answers out of order");
                    let Want::Fetch(v) = w else { panic!("a fetched value for a GET") };
                    assert_eq!(value, v, "fetched value of tag {t}");
                }
                Checked::GetData { tag, len } => {
                    while matches!(wants.front(), Some((_, Want::Nothing))) {
                        wants.pop_front();
                    }
                    let (t, w) = wants.pop_front().expect("an answer nobody asked for");
                    assert_eq!(tag, t, "answers out of order");
                    let Want::Get(v) = w else { panic!("GET data for a fetch") };
                    assert_eq!(&f[HEAD_BYTES..HEAD_BYTES + len as usize], &v[..], "GET data of tag {t}");
                }
                other => panic!("unexpected answer {other:?}"),
            }
        }
        while matches!(wants.front(), Some((_, Want::Nothing))) {
            wants.pop_front();
        }
    }
}

/// Random valid streams, cut into random pieces, through a ring of 1 MiB (the smallest a lane takes: it wraps
/// every few dozen frames): the heap ends as the model says, every answer is right, every request acknowledged.
#[test]
fn random_streams_apply_as_the_model_says() {
    for seed in 1..=4u64 {
        let (eng, heap, mut s, h) = lane_pair(1 << 20);
        let mut rng = Rng(seed * 0x9e37_79b9_7f4a_7c15);
        let mut model = vec![0u8; HEAP];
        let mut wants = std::collections::VecDeque::new();
        let mut total = 0u64;
        for round in 0..6 {
            let mut out = Vec::new();
            for _ in 0..(200 + round * 50) {
                total += 1;
                let w = random_request(&mut rng, &mut model, &mut out, total);
                wants.push_back((total, w));
            }
            // In random pieces: frames split anywhere.
            let mut at = 0;
            while at < out.len() {
                let n = (1 + rng.below(9000) as usize).min(out.len() - at);
                s.write_all(&out[at..at + n]).unwrap();
                at += n;
            }
            read_answers(&mut s, &mut wants, total);
        }
        assert!(eng.failed().is_none(), "{:?}", eng.failed());
        assert!(heap_bytes(&heap) == &model[..], "seed {seed}: the heap differs from the model");
        assert!(!eng.lanes[0].ended.load(Ordering::Acquire));
        eng.abort.store(true, Ordering::Release);
        eng.lanes[0].wake();
        h.join().unwrap();
    }
}

/// Valid frames, then garbage: the lane fails naming PE 1 and the field, answers with an ERROR, and
/// nothing after the last valid frame reaches the heap.
#[test]
fn garbage_fails_the_lane_naming_the_peer_and_writes_nothing() {
    let mut rng = Rng(0x1234_5678);
    for case in 0..24 {
        let (eng, heap, mut s, h) = lane_pair(1 << 20);
        let mut model = vec![0u8; HEAP];
        let mut out = Vec::new();
        let mut wants = std::collections::VecDeque::new();
        for i in 0..20u64 {
            // Puts only: their effect is the model's whatever answers come.
            let mut tmp = Vec::new();
            match random_request(&mut rng, &mut model, &mut tmp, i + 1) {
                Want::Nothing if tmp[0] == wire::PUT => out.extend_from_slice(&tmp),
                _ => {
                    // Undo what the model applied for a request we do not send: redo from the heap's
                    // view, i.e. only keep puts (rebuild the model from the frames sent).
                }
            }
            wants.push_back((i + 1, Want::Nothing));
        }
        // Rebuild the model from the puts actually sent.
        let mut model = vec![0u8; HEAP];
        let mut at = 0;
        let mut puts = 0u64;
        while at < out.len() {
            let hd: Head = bytemuck::pod_read_unaligned(&out[at..at + 16]);
            let size = wire::frame_bytes(&hd).unwrap();
            model[hd.offset as usize..hd.offset as usize + hd.len as usize].copy_from_slice(&out[at + 16..at + 16 + hd.len as usize]);
            at += size;
            puts += 1;
        }
        // Then a bad frame: a PUT outside the heap, an unknown kind, a bad AMO, random bytes.
        let mut bad = Vec::new();
        let expect = match case % 4 {
            0 => {
                Frames::put(&mut bad, HEAP as u64 - 4, &[0xee; 8]);
                "beyond the"
            }
            1 => {
                bad.extend_from_slice(&[99u8; 16]);
                "unknown kind"
            }
            2 => {
                Frames::amo(&mut bad, 77, 8, 0, 1, 0, None);
                "not an AMO code"
            }
            _ => {
                bad.push(wire::PUT);
                bad.extend((0..200).map(|_| rng.next() as u8));
                "PE 1"
            }
        };
        s.write_all(&out).unwrap();
        s.write_all(&bad).unwrap();
        // A valid put after the garbage: never applied.
        let mut after = Vec::new();
        Frames::put(&mut after, 0, &[0x77; 8]);
        let _ = s.write_all(&after);
        h.join().unwrap();
        let e = eng.failed().expect("the lane did not fail").to_string();
        assert!(e.contains("PE 1") && e.contains(expect), "case {case}: {e}");
        // The ERROR came back, naming the problem.
        let mut back = Vec::new();
        let _ = s.read_to_end(&mut back);
        let text = String::from_utf8_lossy(&back).into_owned();
        assert!(text.contains(expect) || case % 4 == 3, "case {case}: no ERROR naming it in {text:?}");
        assert!(heap_bytes(&heap) == &model[..], "case {case}: the heap differs from the {puts} valid puts");
        let _ = wants;
    }
}

/// The sender bounds a request by the heap every PE reserves, not by what its own heap had backed
/// when the sender started: on GPUs the heap starts with one granule backed and grows as allocations
/// reach further, so a put to a later allocation on another node lies past that first granule. (The
/// sender once took the backed size at start and failed every such put: "4 bytes at heap offset
/// 0x20100100 are outside the 2097152-byte heap", seen on an H100.)
#[test]
fn the_sender_takes_puts_past_what_was_backed_when_it_started() {
    use rshmem_device::remote::proxy::{op, post_with, Request};
    let (eng, _heap, mut peer, _lane) = lane_pair_backed(1 << 20, HEAP / 4);
    let e = eng.clone();
    let sender = std::thread::spawn(move || crate::transport::proxy::send::run(e));
    let ch = eng.host_channel();
    let value = 0x5eed_u64;
    let offset = (3 * HEAP / 4) as u64;
    let r = Request { op: op::PUT, pe: 1, offset, len: 8, src: &value as *const u64 as u64, ..Request::default() };
    // SAFETY: the engine's ring (alive with `eng`); the source lives until the frame was read below.
    let seq = unsafe { post_with(&ch, &r, &mut |_| true) }.expect("posting the put");
    assert!(seq >= 1);
    // PE 1's end receives the PUT frame, with the value in it; the engine did not fail.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let until = Instant::now() + Duration::from_secs(10);
    while !got.windows(8).any(|w| w == value.to_le_bytes()) {
        assert!(eng.failed().is_none(), "the engine failed: {:?}", eng.failed());
        assert!(Instant::now() < until, "no frame with the put's value reached PE 1 in 10 s ({} bytes)", got.len());
        match peer.read(&mut buf) {
            Ok(0) => panic!("PE 0 closed the connection: {:?}", eng.failed()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {}
            Err(e) => panic!("reading PE 1's end: {e}"),
        }
    }
    assert!(eng.failed().is_none(), "the engine failed: {:?}", eng.failed());
    eng.closing.store(true, Ordering::Release);
    eng.abort.store(true, Ordering::Release);
    eng.stop.store(true, Ordering::Release);
    for l in &eng.lanes {
        l.wake();
    }
    let _ = sender.join();
}
