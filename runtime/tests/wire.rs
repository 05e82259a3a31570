//! The proxy transport's connection set-up (the hellos of `proxy::connect` and `proxy::accept`)
//! between real processes on 127.0.0.1. The test itself is PE 1 (it listens and accepts); PE 0 is this
//! test binary re-run as a child restricted to the `probe` test (see there), which connects. Some
//! tests speak the hello by hand, from a raw socket, to send what a correct peer never would. Every
//! wait is bounded: a hang fails the test. (What follows the hellos, the frames, is tested by the
//! wire's own unit tests and, against real engines, by the multi-process suites.)

mod common;

use common::*;
use rshmem::transport::proxy::accept::{accept as tcp_accept, Acceptor, MAX_PENDING};
use rshmem::transport::proxy::connect;
use rshmem::transport::proxy::tcp::{Connection, Endpoint};
use rshmem::transport::wire::{self, Hello};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Set in a child: "<scenario> <arg> <port>" for `probe` to run.
const PROBE_VAR: &str = "WIRE_TEST_PROBE";
const KEY: [u8; 16] = *b"wire-test-key-01";
const HEAP: u64 = 64 << 20;

fn endpoint(pe: u32) -> Endpoint {
    Endpoint { key: KEY, pe, npes: 2, heap_size: HEAP, max_chunk: wire::DEFAULT_MAX_CHUNK }
}

// ---- PE 0: runs in the child process ----

/// Scenarios:
///   refuse WHAT     connect with another key / PE count / heap size; prints the refusal
fn scenario(name: &str, arg: &str, addr: SocketAddr) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    match name {
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
        other => Err(format!("unknown scenario {other:?}")),
    }
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

fn outcome(p: Proc) -> Outcome {
    wait_all(vec![p], Duration::from_secs(30)).pop().unwrap()
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

/// Threads, real sockets: several connections per pair, a stranger, and a connection meant for
/// another PE.
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
