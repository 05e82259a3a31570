//! The proxy transport's TCP wire between real processes on 127.0.0.1. The test itself is PE 1 (it
//! listens, accepts and serves a heap); PE 0 is this test binary re-run as a child restricted to the
//! `probe` test (see there), which connects. Some scenarios speak the wire by hand, from a raw socket,
//! to send what a correct peer never would. Every wait is bounded: a hang fails the test.

mod common;

use common::*;
use rshmem::transport::proxy::accept::{accept as tcp_accept, Acceptor, MAX_PENDING};
use rshmem::transport::proxy::connect;
use rshmem::transport::proxy::tcp::{Connection, Endpoint};
use rshmem::transport::wire::{self, AmoOp, Context, FrameReader, Hello, Message, OpHeader, Signal, SignalOp, Width};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Set in a child: "<scenario> <arg> <port>" for `probe` to run.
const PROBE_VAR: &str = "WIRE_TEST_PROBE";
const KEY: [u8; 16] = *b"wire-test-key-01";
/// The transfer lands behind a first page that holds the signal word.
const DATA_AT: u64 = 4096;
const DATA_LEN: u64 = 64 << 20;
const HEAP: u64 = DATA_AT + DATA_LEN;

fn endpoint(pe: u32) -> Endpoint {
    Endpoint { key: KEY, pe, npes: 2, heap_size: HEAP, max_chunk: wire::DEFAULT_MAX_CHUNK }
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(0x9e37_79b9) >> 7) as u8 ^ salt).collect()
}

// ---- PE 0: runs in the child process ----

/// Scenarios:
///   transfer        a 64 MiB put with signal, quiet, fetch_add, a 64 MiB get; every byte checked
///   refuse WHAT     connect with another key / PE count / heap size; prints the refusal
///   die             a hand-made hello, then half a PUT frame, then SIGKILL
///   stall           the same, then silence
///   garbage WHAT    a hand-made hello, a valid PUT, then a PUT outside the heap (offset) or random
///                   bytes (random); prints the ERROR frame PE 1 answers with
fn scenario(name: &str, arg: &str, addr: SocketAddr) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    match name {
        "transfer" => {
            let mut c = connect::connect(addr, &endpoint(0), 1, 0, 1, deadline).map_err(|e| e.to_string())?;
            let data = pattern(DATA_LEN as usize, 0x5a);
            let signal = Signal { offset: 0, op: SignalOp::Add, value: 1 };
            c.put(1, DATA_AT, &data, Some(signal)).map_err(|e| e.to_string())?;
            c.send_message(&Message::Quiet { seq: 2 }).map_err(|e| e.to_string())?;
            match c.recv().map_err(|e| e.to_string())? {
                Message::QuietAck { seq: 2 } => {}
                m => return Err(format!("expected the quiet completion, got {m:?}")),
            }
            let amo = Message::Amo { seq: 3, op: AmoOp::FetchAdd, width: Width::W8, offset: 0, value: 5, compare: 0 };
            c.send_message(&amo).map_err(|e| e.to_string())?;
            match c.recv().map_err(|e| e.to_string())? {
                Message::AmoResponse { seq: 3, width: Width::W8, value: 1 } => {}
                m => return Err(format!("expected fetch_add to return the signal (1), got {m:?}")),
            }
            c.send_message(&Message::GetRequest { seq: 4, offset: 0, len: HEAP }).map_err(|e| e.to_string())?;
            let mut got = vec![0u8; HEAP as usize];
            let mut chunks = 0;
            loop {
                match c.recv().map_err(|e| e.to_string())? {
                    Message::GetResponse { seq: 4, offset, data, last } => {
                        got[offset as usize..][..data.len()].copy_from_slice(data);
                        chunks += 1;
                        if last {
                            break;
                        }
                    }
                    m => return Err(format!("expected a GET response, got {m:?}")),
                }
            }
            if got[..8] != 6u64.to_le_bytes() {
                return Err(format!("signal word after signal + fetch_add: {:?}", &got[..8]));
            }
            if got[DATA_AT as usize..] != data[..] {
                return Err("the GET returned other bytes than the PUT wrote".into());
            }
            if c.awaiting() != 0 {
                return Err(format!("{} requests still awaiting", c.awaiting()));
            }
            c.close().map_err(|e| e.to_string())?;
            Ok(format!("transfer checked, GET in {chunks} chunks"))
        }
        "refuse" => {
            let mut me = endpoint(0);
            match arg {
                "key" => me.key[3] ^= 1,
                "npes" => me.npes = 3,
                "heap" => me.heap_size += 4096,
                other => return Err(format!("unknown refusal {other}")),
            }
            match connect::connect(addr, &me, 1, 0, 1, deadline) {
                Ok(_) => Err("connected with a bad hello".into()),
                Err(e) => Ok(format!("REFUSED: {e}")),
            }
        }
        "die" | "stall" => {
            let mut s = raw_connect(addr)?;
            let h = OpHeader { kind: wire::Kind::Put as u8, src_pe: 0, seq: 9, offset: 0, len: 1 << 20, payload_len: 1 << 20, ..Default::default() };
            s.write_all(bytemuck::bytes_of(&h)).map_err(|e| e.to_string())?;
            s.write_all(&vec![7u8; 100 << 10]).map_err(|e| e.to_string())?;
            s.flush().map_err(|e| e.to_string())?;
            println!("HALF SENT");
            if name == "die" {
                std::thread::sleep(Duration::from_millis(100));
                // SAFETY: kill(2) on this process: it ends here, as a crashing PE would.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_secs(30));
            Err("not killed".into())
        }
        "garbage" => {
            let mut s = raw_connect(addr)?;
            let ok = OpHeader { kind: wire::Kind::Put as u8, flags: wire::FLAG_LAST, src_pe: 0, seq: 1, offset: 8, len: 16, payload_len: 16, ..Default::default() };
            let mut bytes = wire::encode_frame(&ok, &[1u8; 16]);
            match arg {
                "offset" => {
                    let bad = OpHeader { offset: HEAP - 8, ..ok };
                    bytes.extend(wire::encode_frame(&bad, &[2u8; 16]));
                }
                "random" => {
                    let mut x = 0x1234_5678_9abc_def0u64;
                    bytes.extend((0..256).map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    }));
                }
                other => return Err(format!("unknown garbage {other}")),
            }
            s.write_all(&bytes).map_err(|e| e.to_string())?;
            let ctx = Context { me: 0, peer: 1, npes: 2, heap_size: HEAP, max_chunk: wire::DEFAULT_MAX_CHUNK };
            s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
            let mut r = FrameReader::new();
            match r.read(&mut s, &ctx) {
                Ok(Message::Error { text }) => Ok(format!("GOT ERROR: {text}")),
                Ok(m) => Err(format!("expected an ERROR frame, got {m:?}")),
                Err(e) => Err(format!("expected an ERROR frame: {e:?}")),
            }
        }
        other => Err(format!("unknown scenario {other:?}")),
    }
}

/// A connection with a hand-made hello (so that what follows can be anything).
fn raw_connect(addr: SocketAddr) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let me = endpoint(0);
    let h = Hello {
        magic: wire::MAGIC,
        version: wire::VERSION,
        key: me.key,
        src_pe: 0,
        dst_pe: 1,
        npes: 2,
        lane: 0,
        lanes: 1,
        heap_size: me.heap_size,
        max_chunk: me.max_chunk,
        ..bytemuck::Zeroable::zeroed()
    };
    s.write_all(bytemuck::bytes_of(&h)).map_err(|e| e.to_string())?;
    let mut answer = [0u8; wire::HELLO_LEN];
    s.read_exact(&mut answer).map_err(|e| format!("reading the answer to the hello: {e}"))?;
    let a: Hello = bytemuck::pod_read_unaligned(&answer);
    if a.status != 0 {
        return Err(format!("hello refused with status {}", a.status));
    }
    Ok(s)
}

/// In a child process (PROBE_VAR set): runs PE 0's scenario, prints "OK ..." and exits 0, or prints
/// "ERROR: <message>" and exits 1. In the test run itself: does nothing.
#[test]
fn probe() {
    let Ok(spec) = std::env::var(PROBE_VAR) else { return };
    let words: Vec<&str> = spec.split_whitespace().collect();
    let [name, arg, port] = words[..] else { panic!("bad {PROBE_VAR}: {spec}") };
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    exit_with(scenario(name, arg, addr))
}

// ---- PE 1: the test ----

/// Starts PE 0 running `scenario arg`, against a listener of ours.
fn start_pe0(scenario: &str, arg: &str) -> (TcpListener, Proc) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut cmd = probe_command();
    cmd.env(PROBE_VAR, format!("{scenario} {arg} {port}"));
    (listener, start(0, cmd))
}

fn accept(listener: &TcpListener) -> rshmem::Result<Connection> {
    tcp_accept(listener, &endpoint(1), Instant::now() + Duration::from_secs(20))
}

/// PE 1's side of a proxy, enough for the tests: applies puts, signals and AMOs to `heap` and answers
/// quiet, AMO and get requests, until CLOSE. Every range comes from the decoder: if it let an
/// out-of-heap range through, the slicing here would panic.
fn serve(c: &mut Connection, heap: &mut [u8]) -> rshmem::Result<u64> {
    let mut frames = 0;
    let signal = |heap: &mut [u8], s: Signal| {
        let w = &mut heap[s.offset as usize..][..8];
        let old = u64::from_le_bytes(w.try_into().unwrap());
        let new = match s.op {
            SignalOp::Set => s.value,
            SignalOp::Add => old.wrapping_add(s.value),
        };
        w.copy_from_slice(&new.to_le_bytes());
    };
    loop {
        frames += 1;
        match c.recv()? {
            Message::Put { offset, data, .. } => heap[offset as usize..][..data.len()].copy_from_slice(data),
            Message::PutSignal { offset, data, signal: s, .. } => {
                heap[offset as usize..][..data.len()].copy_from_slice(data);
                signal(heap, s);
            }
            Message::Signal { signal: s, .. } => signal(heap, s),
            Message::Quiet { seq } => c.send_message(&Message::QuietAck { seq })?,
            Message::Amo { seq, op: AmoOp::FetchAdd, width: Width::W8, offset, value, .. } => {
                let w = &mut heap[offset as usize..][..8];
                let old = u64::from_le_bytes(w.try_into().unwrap());
                w.copy_from_slice(&old.wrapping_add(value).to_le_bytes());
                c.send_message(&Message::AmoResponse { seq, width: Width::W8, value: old })?;
            }
            Message::GetRequest { seq, offset, len } => c.get_response(seq, offset, &heap[offset as usize..][..len as usize])?,
            Message::Close => return Ok(frames),
            m => return Err(rshmem::Error::new(format!("the test's server does not handle {m:?}"))),
        }
    }
}

fn outcome(p: Proc) -> Outcome {
    wait_all(vec![p], Duration::from_secs(30)).pop().unwrap()
}

#[test]
fn a_64_mib_transfer_in_chunks_arrives_intact() {
    let (listener, pe0) = start_pe0("transfer", "-");
    let mut c = accept(&listener).unwrap();
    assert_eq!((c.peer(), c.lane(), c.send_chunk()), (0, 0, wire::DEFAULT_MAX_CHUNK));
    let mut heap = vec![0u8; HEAP as usize];
    let frames = serve(&mut c, &mut heap).unwrap();
    let o = outcome(pe0);
    assert_eq!(o.code, Some(0), "PE 0: {}", o.out);
    assert!(o.out.contains("OK transfer checked, GET in 65 chunks"), "{}", o.out);
    // 64 chunks of 1 MiB, the quiet, the AMO, the GET request, the CLOSE.
    assert_eq!(frames, 64 + 4);
    assert!(heap[DATA_AT as usize..] == pattern(DATA_LEN as usize, 0x5a)[..]);
    assert_eq!(heap[..8], 6u64.to_le_bytes());
}

#[test]
fn a_bad_hello_is_refused_on_both_sides() {
    for (what, here, there) in [
        ("key", "refused the connection from 127.0.0.1", "refused the connection: wrong job key"),
        ("npes", "another PE count (another job?) (3 PEs, this job 2)", "(this PE has 3 PEs and a heap of"),
        ("heap", "another symmetric heap size (another job?)", "refused the connection: another symmetric heap size"),
    ] {
        let (listener, pe0) = start_pe0("refuse", what);
        let err = accept(&listener).err().unwrap_or_else(|| panic!("{what}: accepted")).to_string();
        assert!(err.contains("PE 1 refused the connection from 127.0.0.1") && err.contains("claims PE 0"), "{what}: {err}");
        assert!(err.contains(here), "{what}: {err}");
        if what == "key" {
            assert!(err.contains("wrong job key"), "{err}");
        }
        let o = outcome(pe0);
        assert_eq!(o.code, Some(0), "{what}: PE 0: {}", o.out);
        assert!(o.out.contains("REFUSED: transport: PE 1 at 127.0.0.1:"), "{what}: {}", o.out);
        assert!(o.out.contains(there), "{what}: {}", o.out);
    }
}

#[test]
fn a_peer_killed_mid_frame_is_named() {
    let (listener, pe0) = start_pe0("die", "-");
    let mut c = accept(&listener).unwrap();
    c.set_io_timeout(Duration::from_secs(5));
    let t = Instant::now();
    let err = c.recv().expect_err("a frame from a dead PE").to_string();
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
    assert!(err.contains("PE 0 (127.0.0.1:"), "{err}");
    assert!(err.contains("closed the connection in the middle of a PUT frame (seq 9, offset 0x0, 1048576 payload bytes)"), "{err}");
    assert!(err.contains("(102400 of 1048576 bytes arrived)"), "{err}");
    // The connection stays failed.
    let again = c.recv().err().unwrap().to_string();
    assert!(again.contains("failed earlier") && again.contains("PE 0"), "{again}");
    let o = outcome(pe0);
    assert_eq!(o.code, None, "PE 0 was not killed: {}", o.out);
    assert!(o.out.contains("HALF SENT"), "{}", o.out);
}

#[test]
fn a_peer_stalled_mid_frame_is_named_within_the_deadline() {
    let (listener, mut pe0) = start_pe0("stall", "-");
    let mut c = accept(&listener).unwrap();
    c.set_io_timeout(Duration::from_secs(1));
    let t = Instant::now();
    let err = c.recv().expect_err("a frame from a silent PE").to_string();
    let took = t.elapsed();
    let _ = pe0.child.kill();
    let o = outcome(pe0);
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(err.contains("PE 0 (127.0.0.1:") && err.contains("sent nothing for 1s in the middle of a PUT frame"), "{err}");
    assert!(o.out.contains("HALF SENT"), "{}", o.out);
}

#[test]
fn garbage_drops_the_connection_naming_the_peer() {
    for (what, field) in [("offset", "field `offset` names heap bytes"), ("random", "PE 0 sent")] {
        let (listener, pe0) = start_pe0("garbage", what);
        let mut c = accept(&listener).unwrap();
        let mut heap = vec![0u8; HEAP as usize];
        match c.recv().unwrap() {
            Message::Put { offset: 8, data, last: true, .. } => heap[8..24].copy_from_slice(data),
            m => panic!("{what}: first frame {m:?}"),
        }
        let err = c.recv().err().unwrap_or_else(|| panic!("{what}: garbage accepted")).to_string();
        assert!(err.contains("dropped the connection to PE 0 (127.0.0.1:"), "{what}: {err}");
        assert!(err.contains(field), "{what}: {err}");
        let again = c.recv().err().unwrap().to_string();
        assert!(again.contains("failed earlier"), "{again}");
        let o = outcome(pe0);
        assert_eq!(o.code, Some(0), "{what}: PE 0: {}", o.out);
        assert!(o.out.contains("GOT ERROR: PE 1 dropped the connection: PE 0 sent"), "{what}: {}", o.out);
        assert!(o.out.contains(field), "{what}: {}", o.out);
        // Nothing but the valid PUT reached the heap.
        assert!(heap[8..24].iter().all(|&b| b == 1));
        assert_eq!(heap.iter().filter(|&&b| b != 0).count(), 16, "{what}");
    }
}

/// Single-stream loopback throughput of the send/recv path (receiver copies into its heap), for many
/// 64 KiB transfers and one 256 MiB transfer. Prints the figures; checks the bytes.
#[test]
fn loopback_throughput() {
    const BIG: usize = 256 << 20;
    const SMALL: usize = 64 << 10;
    const SMALL_COUNT: usize = 4096;
    let ep = |pe| Endpoint { key: KEY, pe, npes: 2, heap_size: BIG as u64, max_chunk: wire::DEFAULT_MAX_CHUNK };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let mut c = tcp_accept(&listener, &ep(1), Instant::now() + Duration::from_secs(10)).unwrap();
        let mut heap = vec![0u8; BIG];
        serve(&mut c, &mut heap).unwrap();
        heap
    });
    let mut c = connect::connect(addr, &ep(0), 1, 0, 1, Instant::now() + Duration::from_secs(10)).unwrap();
    let small = pattern(SMALL, 1);
    let big = pattern(BIG, 2);
    let quiet = |c: &mut Connection, seq| {
        c.send_message(&Message::Quiet { seq }).unwrap();
        assert_eq!(c.recv().unwrap(), Message::QuietAck { seq });
    };
    quiet(&mut c, 0);
    let t = Instant::now();
    for i in 0..SMALL_COUNT {
        c.put(i as u64, (i % (BIG / SMALL) * SMALL) as u64, &small, None).unwrap();
    }
    quiet(&mut c, 1);
    let small_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    c.put(2, 0, &big, None).unwrap();
    quiet(&mut c, 3);
    let big_s = t.elapsed().as_secs_f64();
    c.close().unwrap();
    let heap = server.join().unwrap();
    assert!(heap == big, "the 256 MiB put arrived damaged");
    let gbs = |bytes: usize, s: f64| bytes as f64 / s / 1e9;
    println!(
        "loopback_throughput: 64 KiB puts: {:.2} GB/s ({} transfers, {:.1} us each); 256 MiB put: {:.2} GB/s ({:.1} ms)",
        gbs(SMALL * SMALL_COUNT, small_s),
        SMALL_COUNT,
        small_s * 1e6 / SMALL_COUNT as f64,
        gbs(BIG, big_s),
        big_s * 1e3
    );
}

/// The medium's limit next to `loopback_throughput`: the same bytes through a bare TcpStream
/// (write_all of each block, read_exact into the destination), no headers, no checks.
#[test]
fn loopback_baseline() {
    const BIG: usize = 256 << 20;
    const SMALL: usize = 64 << 10;
    const SMALL_COUNT: usize = 4096;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut heap = vec![0u8; BIG];
        for i in 0..SMALL_COUNT {
            let at = i % (BIG / SMALL) * SMALL;
            s.read_exact(&mut heap[at..at + SMALL]).unwrap();
        }
        s.write_all(&[1]).unwrap();
        for c in heap.chunks_mut(1 << 20) {
            s.read_exact(c).unwrap();
        }
        s.write_all(&[2]).unwrap();
        heap
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let small = pattern(SMALL, 1);
    let big = pattern(BIG, 2);
    let mut ack = [0u8];
    let t = Instant::now();
    for _ in 0..SMALL_COUNT {
        s.write_all(&small).unwrap();
    }
    s.read_exact(&mut ack).unwrap();
    let small_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for c in big.chunks(1 << 20) {
        s.write_all(c).unwrap();
    }
    s.read_exact(&mut ack).unwrap();
    let big_s = t.elapsed().as_secs_f64();
    assert!(server.join().unwrap() == big);
    let gbs = |bytes: usize, s: f64| bytes as f64 / s / 1e9;
    println!(
        "loopback_baseline: 64 KiB writes: {:.2} GB/s; 256 MiB in 1 MiB writes: {:.2} GB/s",
        gbs(SMALL * SMALL_COUNT, small_s),
        gbs(BIG, big_s)
    );
}

/// Threads, real sockets: several connections per pair, a stranger, a connection meant for another
/// PE, and a frame the peer would refuse, which `send` refuses instead of sending.
#[test]
fn lanes_strangers_and_wrong_targets() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let deadline = || Instant::now() + Duration::from_secs(10);

    // Three lanes between PE 0 and PE 1, each answered as its own index.
    let client = std::thread::spawn(move || connect::connect_lanes(addr, &endpoint(0), 1, 3, deadline()).unwrap());
    let mut served: Vec<u16> = (0..3).map(|_| accept(&listener).unwrap().lane()).collect();
    let lanes: Vec<u16> = client.join().unwrap().iter().map(|c| c.lane()).collect();
    served.sort();
    assert_eq!((lanes, served), (vec![0, 1, 2], vec![0, 1, 2]));

    // Not an rshmem peer: dropped without an answer.
    let stranger = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&[b'G'; 64]).unwrap();
        let mut rest = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.read_to_end(&mut rest);
        rest.len()
    });
    let err = accept(&listener).err().expect("a stranger accepted").to_string();
    assert!(err.contains("is not an rshmem proxy"), "{err}");
    assert_eq!(stranger.join().unwrap(), 0, "a stranger got an answer");

    // PE 0 of 3 means PE 2, but reached PE 1.
    let three = |pe| Endpoint { npes: 3, ..endpoint(pe) };
    let client = std::thread::spawn(move || connect::connect(addr, &three(0), 2, 0, 1, deadline()).err().unwrap().to_string());
    let err = tcp_accept(&listener, &three(1), deadline()).err().unwrap().to_string();
    assert!(err.contains("claims PE 0 of 3") && err.contains("meant for another PE (it wants PE 2)"), "{err}");
    let err = client.join().unwrap();
    assert!(err.contains("PE 2 at 127.0.0.1") && err.contains("meant for another PE"), "{err}");

    // A frame outside the peer's heap is refused before it is sent; the connection stays usable.
    let client = std::thread::spawn(move || {
        let mut c = connect::connect(addr, &endpoint(0), 1, 0, 1, deadline()).unwrap();
        let err = c.put(1, HEAP - 4, &[0u8; 8], None).unwrap_err().to_string();
        assert!(err.contains("refusing to send to PE 1") && err.contains("`offset`"), "{err}");
        let err = c.send(&OpHeader { kind: 99, src_pe: 0, ..Default::default() }, &[]).unwrap_err().to_string();
        assert!(err.contains("unknown kind 99"), "{err}");
        c.put(2, HEAP - 8, &[3u8; 8], None).unwrap();
        c.close().unwrap();
    });
    let mut c = accept(&listener).unwrap();
    let mut heap = vec![0u8; HEAP as usize];
    assert_eq!(serve(&mut c, &mut heap).unwrap(), 2);
    client.join().unwrap();
    assert_eq!(heap[HEAP as usize - 8..], [3u8; 8]);
}

/// A raw client's hello, answered: the 64 bytes of the answer (empty when none came).
fn raw_hello(addr: SocketAddr, h: &Hello) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytemuck::bytes_of(h)).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    answer
}

/// The key is checked before anything else, and a refusal says nothing but its status: another wire
/// version with a wrong key is refused for the key; with the job's key, for the version (and then
/// names this side's version, nothing else); other refusals carry no PE, PE count or heap size.
#[test]
fn a_refusal_carries_its_status_alone() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let me = endpoint(0);
    let good = Hello {
        magic: wire::MAGIC,
        version: wire::VERSION,
        key: me.key,
        src_pe: 0,
        dst_pe: 1,
        npes: 2,
        lane: 0,
        lanes: 1,
        heap_size: me.heap_size,
        max_chunk: me.max_chunk,
        ..bytemuck::Zeroable::zeroed()
    };
    let mut bad_key = good;
    bad_key.key[9] ^= 0x40;
    let cases = [
        ("another version, the job's key", Hello { version: wire::VERSION + 7, ..good }, 2, wire::VERSION),
        ("another version, a wrong key", Hello { version: wire::VERSION + 7, ..bad_key }, 1, 0),
        ("a wrong key", bad_key, 1, 0),
        ("another PE count", Hello { npes: 3, ..good }, 3, 0),
        ("another heap size", Hello { heap_size: HEAP + 4096, ..good }, 4, 0),
        ("another target PE", Hello { dst_pe: 0, npes: 3, ..good }, 5, 0),
        ("a bad lane", Hello { lane: 2, lanes: 2, ..good }, 6, 0),
        ("a malformed hello", Hello { max_chunk: 1, ..good }, 7, 0),
    ];
    for (what, h, status, version) in cases {
        let client = std::thread::spawn(move || raw_hello(addr, &h));
        let err = accept(&listener).err().unwrap_or_else(|| panic!("{what}: accepted")).to_string();
        let answer = client.join().unwrap();
        assert_eq!(answer.len(), wire::HELLO_LEN, "{what}: {answer:?}");
        let a: Hello = bytemuck::pod_read_unaligned(&answer);
        let expected = Hello { magic: wire::MAGIC, version, status, ..bytemuck::Zeroable::zeroed() };
        assert_eq!(a, expected, "{what}: the refusal carries more than its status");
        assert!(err.contains("PE 1 refused the connection from 127.0.0.1"), "{what}: {err}");
    }
}

/// Idle connections made before a PE's do not delay it: the acceptor answers the PE at once, with
/// the idle ones still waiting; beyond MAX_PENDING the oldest are dropped, each named.
#[test]
fn idle_strangers_delay_no_peer() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut acc = Acceptor::new(&listener, &endpoint(1)).unwrap();
    // The strangers connect first (while the acceptor runs: the listen backlog is short), then the PE.
    let (tx, rx) = std::sync::mpsc::channel();
    let client = std::thread::spawn(move || {
        let idle: Vec<TcpStream> = (0..MAX_PENDING + 10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let t = Instant::now();
        let _ = tx.send(t);
        let peer = connect::connect(addr, &endpoint(0), 1, 0, 1, Instant::now() + Duration::from_secs(10)).map(|c| c.peer());
        (peer, t.elapsed(), idle)
    });
    let mut dropped = 0;
    let c = loop {
        match acc.next(Instant::now() + Duration::from_secs(10)).expect("no connection within 10 s") {
            Ok(c) => break c,
            Err(e) => {
                assert!(e.to_string().contains("connections wait for their hello: dropped the oldest"), "{e}");
                dropped += 1;
            }
        }
    };
    let started = rx.recv().unwrap();
    let (peer, took, idle) = client.join().unwrap();
    assert_eq!((c.peer(), peer.unwrap()), (0, 1));
    assert!(took < Duration::from_secs(2) && started.elapsed() < Duration::from_secs(3), "the PE waited {took:?} behind idle connections");
    assert!(dropped >= 10 && acc.pending() <= MAX_PENDING, "{dropped} dropped, {} pending", acc.pending());
    drop(idle);
}
