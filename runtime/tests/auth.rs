//! Jobs started without rshmrun (Open MPI's variables, RSHMEM_BOOTSTRAP and RSHMEM_JOB_KEY, as under
//! mpirun) against strangers: raw TCP clients on the bootstrap port, raw clients on a PE's fd-passing
//! socket, a second job on the same port, a job without a key, and a PE that stalls a collective.
//! Every PE is a real process: this test binary run again, restricted to the `probe` test (see
//! there), with the variables mpirun would give it. Every wait is bounded: a hang fails the test.

mod common;

use common::*;
use rshmem::bootstrap::Bootstrap;
use rshmem::node::fdpass::FdServer;
use rshmem::platform::segment::Segment;
use rshmem_test_support::{skip, OtherUserDir};
use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KEY: &str = "0123456789abcdef0123456789abcdef";
const OTHER_KEY: &str = "fedcba9876543210fedcba9876543210";
/// Set in a child: "<scenario> <arg>" for `probe` to run.
const PROBE_VAR: &str = "AUTH_TEST_PROBE";
/// Set in a child of the fd-server test: the file whose creation lets the PEs set up their segment.
const GATE_VAR: &str = "AUTH_TEST_GATE";
/// Set in a flooder of the flood test: the file whose creation ends the flood.
const STOP_VAR: &str = "AUTH_TEST_STOP";

// ---- the PE side: runs in the child processes ----

fn e2s(e: rshmem::Error) -> String {
    e.to_string()
}

/// Scenarios:
///   runtime      the whole runtime: init (CPU backend), malloc, barrier_all, finalize
///   init         bootstrap only: one barrier
///   fdgate       bootstrap, a job id from PE 0, the fd server (prints its socket name), then waits for
///                the gate file and sets up a shared segment (the heap's code path), timing it, and
///                checks that every PE sees every other PE's segment
///   stall K      everyone allgathers "stall_first"; PE K then sleeps 4 s; then everyone enters the
///                barrier "stall_wait"
///   stall_nothing K   PE K sleeps 4 s at once; the others enter the barrier "stall_wait"
///   fdsquat NAME binds the abstract socket NAME (as a stranger could), reports what a client sends
///   fdpeer NAME  connects to the fd server NAME with the right key (RSHMEM_JOB_KEY), asks for
///                segment 7, reports how many reply bytes came
///   flood PORT   holds up to 400 silent connections to 127.0.0.1:PORT, replacing the 64 oldest
///                every round, until the file STOP_VAR names exists; reports how many connections
///                PE 0 dropped saying it was a flood
fn scenario(name: &str, text_arg: &str) -> Result<String, String> {
    let arg: usize = text_arg.parse().unwrap_or(0);
    match name {
        "flood" => return flood(arg as u16),
        "fdsquat" => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(text_arg.as_bytes()).map_err(|e| e.to_string())?;
            let l = std::os::unix::net::UnixListener::bind_addr(&addr).map_err(|e| e.to_string())?;
            println!("BOUND");
            let (mut c, _) = l.accept().map_err(|e| e.to_string())?;
            c.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
            let mut got = Vec::new();
            let _ = c.read_to_end(&mut got);
            return Ok(format!("squatter got {} bytes", got.len()));
        }
        "fdpeer" => {
            let mut c = fd_client(text_arg);
            let key = std::env::var("RSHMEM_JOB_KEY").map_err(|e| e.to_string())?;
            let mut req: Vec<u8> = (0..16).map(|i| u8::from_str_radix(&key[2 * i..2 * i + 2], 16).unwrap()).collect();
            req.extend_from_slice(&7u32.to_le_bytes());
            let _ = c.write_all(&req);
            c.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
            let mut got = Vec::new();
            let _ = c.read_to_end(&mut got);
            return Ok(format!("peer got {} reply bytes", got.len()));
        }
        _ => {}
    }
    match name {
        "runtime" => {
            rshmem::init().map_err(e2s)?;
            let p = rshmem::malloc(64).map_err(e2s)?;
            rshmem::barrier_all().map_err(e2s)?;
            rshmem::free(p).map_err(e2s)?;
            let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
            rshmem::finalize().map_err(e2s)?;
            return Ok(format!("runtime pe={me} npes={n}"));
        }
        "fdgate" => return fdgate(),
        _ => {}
    }
    let b = Bootstrap::from_env().map_err(e2s)?;
    let me = b.pe();
    match name {
        "init" => {
            b.barrier("init").map_err(e2s)?;
            Ok(format!("init pe={me} npes={}", b.npes()))
        }
        "stall" | "stall_nothing" => {
            if name == "stall" {
                b.allgather("stall_first", &[me as u8]).map_err(e2s)?;
            }
            if me == arg {
                std::thread::sleep(Duration::from_secs(4));
            }
            b.barrier("stall_wait").map_err(e2s)?;
            Ok("no error?".into())
        }
        other => Err(format!("unknown scenario {other:?}")),
    }
}

/// A flooder of the bootstrap port (see `scenario`).
fn flood(port: u16) -> Result<String, String> {
    const HOLD: usize = 400;
    let stop = PathBuf::from(std::env::var(STOP_VAR).map_err(|_| "no stop file")?);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut conns: std::collections::VecDeque<TcpStream> = Default::default();
    let (mut busy, mut other_close, mut opened) = (0u64, 0u64, 0u64);
    let mut buf = [0u8; 4096];
    while !stop.exists() {
        for _ in 0..64.min(conns.len()) {
            conns.pop_front();
        }
        while conns.len() < HOLD {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(20)) {
                Ok(c) => {
                    c.set_nonblocking(true).map_err(|e| e.to_string())?;
                    conns.push_back(c);
                    opened += 1;
                }
                // Nobody listens (between jobs), or the queue is full.
                Err(_) => break,
            }
        }
        // Connections PE 0 dropped: did it say why?
        conns.retain_mut(|c| match c.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => true,
            Ok(n) if n > 9 && buf[0] == 10 && String::from_utf8_lossy(&buf[9..n]).contains("a flood of connections") => {
                busy += 1;
                false
            }
            _ => {
                other_close += 1;
                false
            }
        });
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(format!("flood opened={opened} busy={busy} other_close={other_close}"))
}

fn fdgate() -> Result<String, String> {
    let b = Bootstrap::from_env().map_err(e2s)?;
    let me = b.pe();
    let mut job = [0u8; 16];
    File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut job)).map_err(|e| e.to_string())?;
    let job: [u8; 16] = b.broadcast("auth_job", 0, &job).map_err(e2s)?.try_into().map_err(|_| "job id")?;
    let fds = FdServer::start(job, b.job_key(), me).map_err(e2s)?;
    println!("FDSERVER {}", String::from_utf8_lossy(fds.name()));
    let gate = PathBuf::from(std::env::var(GATE_VAR).map_err(|_| "no gate")?);
    let t = Instant::now();
    while !gate.exists() {
        if t.elapsed() > Duration::from_secs(20) {
            return Err("the gate never opened".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let t = Instant::now();
    let seg = Segment::create(&b, &fds, job, 7, 1 << 20, "test segment").map_err(e2s)?;
    let ms = t.elapsed().as_millis();
    let base = seg.base(me).ok_or("no own segment")?;
    // SAFETY: `base` maps this PE's 1 MiB segment; 8 bytes at its start are in bounds and aligned.
    unsafe { (base as *mut u64).write_volatile(0xabc0 + me as u64) };
    b.barrier("auth_written").map_err(e2s)?;
    for pe in 0..b.npes() {
        let p = seg.base(pe).ok_or(format!("PE {pe}'s segment is not mapped"))?;
        // SAFETY: every PE's segment is mapped here (same node), 1 MiB, page aligned.
        let v = unsafe { (p as *const u64).read_volatile() };
        if v != 0xabc0 + pe as u64 {
            return Err(format!("PE {pe}'s segment holds {v:#x}"));
        }
    }
    b.barrier("auth_read").map_err(e2s)?;
    // Stay up 3 s after the gate opened, so that the test sees the fd server itself drop its silent
    // clients (after 2 s), not the end of the process.
    std::thread::sleep(Duration::from_secs(3).saturating_sub(t.elapsed()));
    Ok(format!("segment_ms={ms}"))
}

/// In a child process (PROBE_VAR set): runs one PE's scenario, prints "OK ..." and exits 0, or prints
/// "ERROR: <message>" and exits 1. In the test run itself: does nothing.
#[test]
fn probe() {
    let Ok(spec) = std::env::var(PROBE_VAR) else { return };
    let mut words = spec.split_whitespace();
    let name = words.next().unwrap_or("init").to_string();
    let arg = words.next().unwrap_or("").to_string();
    exit_with(scenario(&name, &arg))
}

// ---- the launcher side ----


/// Starts PE `pe` of an Open MPI-style job: OMPI_COMM_WORLD_RANK/SIZE, the Open MPI job id, and
/// RSHMEM_BOOTSTRAP (and RSHMEM_JOB_KEY when `key` is not empty), as `mpirun -x ...` would give it.
/// Launcher variables inherited from the environment running the tests are removed.
fn spawn(pe: usize, npes: usize, port: u16, key: &str, jobid: &str, env: &[(&str, &str)], args: &str) -> Proc {
    let mut cmd = probe_command();
    cmd.env(PROBE_VAR, args)
        .env("OMPI_COMM_WORLD_RANK", pe.to_string())
        .env("OMPI_COMM_WORLD_SIZE", npes.to_string())
        .env("OMPI_MCA_ess_base_jobid", jobid)
        .env("RSHMEM_BOOTSTRAP", format!("127.0.0.1:{port}"))
        .env("RSHMEM_BOOTSTRAP_TIMEOUT", "20")
        .env("RSHMEM_BACKEND", "cpu")
        .env("RSHMEM_SYMMETRIC_SIZE", "16m")
        .env("RSHMEM_DEBUG", "warn");
    if !key.is_empty() {
        cmd.env("RSHMEM_JOB_KEY", key);
    }
    apply_env(&mut cmd, env);
    start(pe, cmd)
}

fn job(npes: usize, port: u16, key: &str, jobid: &str, env: &[(&str, &str)], args: &str) -> Vec<Proc> {
    (0..npes).map(|pe| spawn(pe, npes, port, key, jobid, env, args)).collect()
}



/// Waits until something listens on the port (PE 0 has bound it).
fn wait_listening(port: u16) {
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(20), "PE 0 never listened on port {port}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A well-formed hello frame (bootstrap protocol version 3, with nonce `nonce`) from a process that
/// is no PE of the job.
fn hello_frame(nonce: [u8; 16], pe: u32, npes: u32, job: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"RSHM");
    body.extend_from_slice(&3u32.to_le_bytes());
    body.extend_from_slice(&nonce);
    body.extend_from_slice(&pe.to_le_bytes());
    body.extend_from_slice(&npes.to_le_bytes());
    for s in ["stranger-host", "0000", job] {
        body.extend_from_slice(&(s.len() as u16).to_le_bytes());
        body.extend_from_slice(s.as_bytes());
    }
    let mut f = vec![1u8];
    f.extend_from_slice(&(body.len() as u64).to_le_bytes());
    f.extend_from_slice(&body);
    f
}

/// Reads until the peer closes (at most `limit`); returns what arrived.
fn read_to_close(s: &mut TcpStream, limit: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut v = Vec::new();
    match s.read_to_end(&mut v) {
        Ok(_) => {}
        // Closed with our bytes unread: a reset, which is a close too.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the connection was not closed within {limit:?}: {e}"),
    }
    v
}

fn count(text: &str, what: &str) -> usize {
    text.matches(what).count()
}

/// The frames (kind, body) in `bytes`; a cut last frame is left out.
fn frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u64::from_le_bytes(bytes[1..9].try_into().unwrap()) as usize;
        if bytes.len() - 9 < len {
            break;
        }
        out.push((bytes[0], bytes[9..9 + len].to_vec()));
        bytes = &bytes[9 + len..];
    }
    out
}

/// Reads one frame (kind, body), waiting at most `limit`.
fn read_frame(s: &mut TcpStream, limit: Duration) -> (u8, Vec<u8>) {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut hdr = [0u8; 9];
    s.read_exact(&mut hdr).unwrap();
    let mut body = vec![0u8; u64::from_le_bytes(hdr[1..].try_into().unwrap()) as usize];
    s.read_exact(&mut body).unwrap();
    (hdr[0], body)
}

fn key_bytes(hex: &str) -> [u8; 16] {
    std::array::from_fn(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_strangers_hello_is_refused_and_the_job_completes() {
    let port = free_port();
    let pe0 = spawn(0, 3, port, KEY, "4242", &[], "runtime");
    wait_listening(port);

    // A well-formed hello, claiming to be PE 1: PE 0 answers with its challenge (a nonce and its
    // proof). The stranger, who does not know the key, answers with PE 0's own proof: refused, with
    // a frame saying why.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(&hello_frame([0x5a; 16], 1, 3, "Open MPI job 4242")).unwrap();
    let (kind, challenge) = read_frame(&mut s, Duration::from_secs(5));
    assert_eq!((kind, challenge.len()), (8, 48), "no challenge: {challenge:?}");
    let mut proof = vec![9u8];
    proof.extend_from_slice(&32u64.to_le_bytes());
    proof.extend_from_slice(&challenge[16..]);
    s.write_all(&proof).unwrap();
    let reply = read_to_close(&mut s, Duration::from_secs(5));
    assert!(reply.len() > 9 && reply[0] == 3, "no refusal frame: {reply:?}");
    let text = String::from_utf8_lossy(&reply[9..]);
    assert!(text.contains("wrong job key"), "{text}");

    // Garbage: the connection is closed, nothing else happens. 21 of them: the warnings are limited.
    for _ in 0..21 {
        let mut g = TcpStream::connect(("127.0.0.1", port)).unwrap();
        g.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(read_to_close(&mut g, Duration::from_secs(5)).is_empty());
    }

    // The real PEs 1 and 2 (PE 1 after a stranger claimed that number): the job runs to the end.
    let mut procs = vec![pe0];
    procs.extend((1..3).map(|pe| spawn(pe, 3, port, KEY, "4242", &[], "runtime")));
    let outs = wait_all(procs, Duration::from_secs(60));
    assert_all_ok(&outs);
    for o in &outs {
        assert!(o.out.contains(&format!("runtime pe={} npes=3", o.pe)), "{}", o.out);
    }
    // PE 0 warned about the refused hello and the garbage: 5 lines, then one summary with the count.
    let t = &outs[0].out;
    assert!(t.contains("refused a connection from 127.0.0.1:") && t.contains("(claiming to be PE 1): wrong job key"), "{t}");
    assert_eq!(count(t, "rshmem bootstrap: refused") + count(t, "rshmem bootstrap: ignoring"), 5, "{t}");
    assert!(t.contains("17 more warnings about connections to the bootstrap port"), "{t}");
}

/// A client of a PE's fd-passing socket (abstract name).
fn fd_client(name: &str) -> UnixStream {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    UnixStream::connect_addr(&addr).unwrap()
}

fn wait_for_line(p: &Path, prefix: &str) -> String {
    let t = Instant::now();
    loop {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.starts_with(prefix)) {
            return l[prefix.len()..].trim().to_string();
        }
        assert!(!text.contains("ERROR"), "{text}");
        assert!(t.elapsed() < Duration::from_secs(30), "no {prefix:?} line in {}: {text}", p.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_fd_server_refuses_strangers_and_a_silent_client_stalls_nothing() {
    let port = free_port();
    let gate = temp("gate");
    let g = gate.to_str().unwrap().to_string();
    let procs = job(3, port, KEY, "777", &[(GATE_VAR, &g)], "fdgate");
    let names: Vec<String> = procs.iter().map(|p| wait_for_line(&p.out, "FDSERVER ")).collect();

    // Clients that connect and say nothing (or too little), to PE 0 and PE 1.
    let silent: Vec<UnixStream> =
        vec![fd_client(&names[0]), fd_client(&names[0]), fd_client(&names[1]), fd_client(&names[0])];
    silent[3].try_clone().unwrap().write_all(&[1, 2, 3, 4, 5]).unwrap();
    let connected = Instant::now();
    // A stranger's request with another key: refused at once (the size word u64::MAX, no descriptor).
    let mut wrong = fd_client(&names[0]);
    let mut req = [0x5au8; 20];
    req[16..].copy_from_slice(&7u32.to_le_bytes());
    wrong.write_all(&req).unwrap();
    wrong.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut size = [0u8; 8];
    wrong.read_exact(&mut size).unwrap();
    assert_eq!(u64::from_le_bytes(size), u64::MAX, "the wrong key was not refused");
    assert!(connected.elapsed() < Duration::from_secs(1), "the refusal waited for the silent clients");

    // Now the PEs set up the segment while the silent clients still hold their connections.
    File::create(&gate).unwrap();
    // The silent clients are dropped after the server's 2 s deadline, while the PEs still run.
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 8];
        // A timed socket wait returns EINTR when the process is stopped and resumed (a sandbox's
        // freezer does that): read again.
        let n = loop {
            match s.read(&mut b) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.unwrap(),
            }
        };
        assert_eq!(n, 0, "a silent client got an answer");
        let at = connected.elapsed();
        assert!(at > Duration::from_millis(1500) && at < Duration::from_millis(2900), "silent client dropped after {at:?}");
    }
    let outs = wait_all(procs, Duration::from_secs(60));
    let _ = std::fs::remove_file(&gate);
    assert_all_ok(&outs);
    for o in &outs {
        let ms: u64 = o.out.split("segment_ms=").nth(1).unwrap().trim().parse().unwrap();
        assert!(ms < 1500, "PE {}: segment setup took {ms} ms with silent clients connected: {}", o.pe, o.out);
    }
    let t = &outs[0].out;
    assert!(t.contains("refused a request for segment 7 from pid") && t.contains("wrong job key"), "{t}");
    assert!(t.contains("dropped a client (pid") && t.contains("sent no complete request within 2 s"), "{t}");
}

#[test]
fn a_job_of_several_pes_without_a_key_outside_rshmrun_is_refused_with_the_fix() {
    let port = free_port();
    let outs = wait_all(job(2, port, "", "31", &[], "init"), Duration::from_secs(30));
    for o in &outs {
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
        assert!(o.out.contains("RSHMEM_JOB_KEY is not set"), "{}", o.out);
        assert!(o.out.contains("export RSHMEM_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')"), "{}", o.out);
        assert!(o.out.contains("mpirun -x RSHMEM_JOB_KEY -x RSHMEM_BOOTSTRAP"), "{}", o.out);
        assert!(o.elapsed < Duration::from_secs(10), "PE {} took {:?}", o.pe, o.elapsed);
    }
    // One PE needs no key (nobody to authenticate).
    let outs = wait_all(job(1, port, "", "32", &[], "init"), Duration::from_secs(30));
    assert_all_ok(&outs);
}

#[test]
fn two_jobs_on_one_port_fail_clearly_and_never_merge() {
    let port = free_port();
    // Job A: PE 0 first; its PEs 1 and 2 come later.
    let a0 = spawn(0, 3, port, KEY, "1001", &[], "runtime");
    wait_listening(port);
    // Job B reuses A's key (one exported key, two mpirun jobs); job C has its own key.
    let b = job(3, port, KEY, "1002", &[], "runtime");
    let c = job(3, port, OTHER_KEY, "1003", &[], "runtime");
    let t = Instant::now();
    let b = wait_all(b, Duration::from_secs(30));
    let c = wait_all(c, Duration::from_secs(30));
    assert!(t.elapsed() < Duration::from_secs(8), "the second jobs took {:?} to fail", t.elapsed());
    for o in b.iter().chain(&c) {
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
        if o.pe == 0 {
            assert!(o.out.contains("port in use — another job? choose another RSHMEM_BOOTSTRAP port"), "{}", o.out);
        }
    }
    for o in b.iter().filter(|o| o.pe != 0) {
        assert!(
            o.out.contains("refused the connection: another job: PE 0 there belongs to Open MPI job 1001, this PE to Open MPI job 1002"),
            "{}",
            o.out
        );
    }
    for o in c.iter().filter(|o| o.pe != 0) {
        assert!(o.out.contains(&format!("the process at 127.0.0.1:{port} did not prove that it knows the job key")), "{}", o.out);
        assert!(o.out.contains("wrong job key"), "{}", o.out);
    }
    // Job A is unaffected: its own PEs join and it completes.
    let mut a = vec![a0];
    a.extend((1..3).map(|pe| spawn(pe, 3, port, KEY, "1001", &[], "runtime")));
    let a = wait_all(a, Duration::from_secs(60));
    assert_all_ok(&a);
    assert!(a[0].out.contains("another job: PE 0 there belongs to Open MPI job 1001"), "{}", a[0].out);
}

#[test]
fn a_stalled_pe_is_named_by_the_others() {
    let wait = [("RSHMEM_WAIT_TIMEOUT", "1")];
    // X: PE 2 stops after the first collective. Y: PE 1 never enters one. Z: PE 0 (the root) stops.
    let (px, py, pz) = (free_port(), free_port(), free_port());
    let x = job(3, px, KEY, "1", &wait, "stall 2");
    let y = job(3, py, KEY, "2", &wait, "stall_nothing 1");
    let z = job(2, pz, KEY, "3", &wait, "stall 0");
    // One wait for all three, so that each exit is seen when it happens.
    let mut all = wait_all(x.into_iter().chain(y).chain(z).collect(), Duration::from_secs(30));
    let z = all.split_off(6);
    let y = all.split_off(3);
    let x = all;
    for o in x.iter().chain(&y).chain(&z) {
        assert_eq!(o.code, Some(1), "PE {}: {}", o.pe, o.out);
    }
    for o in x.iter().filter(|o| o.pe != 2) {
        assert!(
            o.out.contains("stall_wait (barrier, collective #2) did not complete within RSHMEM_WAIT_TIMEOUT=1 s: PE 0 waits for PE 2 of 3 to enter it: PE 2 (host "),
            "PE {}: {}",
            o.pe,
            o.out
        );
        assert!(o.out.contains("last entered stall_first (allgather, collective #1)"), "PE {}: {}", o.pe, o.out);
        assert!(o.elapsed < Duration::from_secs(4), "PE {} took {:?}", o.pe, o.elapsed);
    }
    for o in y.iter().filter(|o| o.pe != 1) {
        assert!(
            o.out.contains("stall_wait (barrier, collective #1) did not complete within RSHMEM_WAIT_TIMEOUT=1 s: PE 0 waits for PE 1 of 3"),
            "PE {}: {}",
            o.pe,
            o.out
        );
        assert!(o.out.contains("has not entered any collective since init"), "PE {}: {}", o.pe, o.out);
        assert!(o.elapsed < Duration::from_secs(4), "PE {} took {:?}", o.pe, o.elapsed);
    }
    let o = &z[1];
    assert!(
        o.out.contains("PE 1: PE 0 (host ") && o.out.contains("did not answer stall_wait (barrier, collective #2) within RSHMEM_WAIT_TIMEOUT=1 s"),
        "{}",
        o.out
    );
    assert!(o.elapsed < Duration::from_secs(4), "PE 1 took {:?}", o.elapsed);
}

/// Runs one probe scenario as the user `nobody` (uid 65534): `exe` is a copy of this test binary
/// where that user can reach it (the checkout may lie under a directory only its owner can enter).
fn spawn_as_nobody(exe: &OtherUserDir, args: &str, env: &[(&str, &str)]) -> Proc {
    use std::os::unix::process::CommandExt;
    let out = temp("nobody.log");
    let f = File::create(&out).unwrap();
    let me = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe.path().join(me.file_name().unwrap()));
    cmd.args(["--exact", "probe", "--nocapture", "--test-threads=1", "-q"]).env(PROBE_VAR, args).uid(65534).gid(65534);
    cmd.current_dir(exe.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null()).stdout(f.try_clone().unwrap()).stderr(f);
    Proc { pe: 99, child: cmd.spawn().unwrap(), out, started: Instant::now() }
}

#[test]
fn fd_sockets_never_talk_to_another_user() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return skip("fd_sockets_never_talk_to_another_user", "not running as root, so there is no other user to run a process as");
    }
    // This test binary, copied where uid 65534 can run it (removed at the end of the test).
    let exe = OtherUserDir::new("auth-test").unwrap();
    exe.copy_program(&std::env::current_exe().unwrap()).unwrap();
    // A server of this user; a process of another user with the right key gets nothing.
    let job = [0x42u8; 16];
    let key: [u8; 16] = std::array::from_fn(|i| u8::from_str_radix(&KEY[2 * i..2 * i + 2], 16).unwrap());
    let server = FdServer::start(job, key, 0).unwrap();
    server.offer(7, rshmem::node::fdpass::memfd("auth-test", 4096).unwrap(), 4096);
    let name = String::from_utf8_lossy(server.name()).to_string();
    let peer = spawn_as_nobody(&exe, &format!("fdpeer {name}"), &[("RSHMEM_JOB_KEY", KEY)]);
    let o = wait_all(vec![peer], Duration::from_secs(20));
    assert!(o[0].out.contains("OK peer got 0 reply bytes"), "{}", o[0].out);
    drop(server);

    // A stranger of another user holds the name a PE's server would have (which only a holder of the
    // job key can know): the PE does not send it the key.
    let job = [0x43u8; 16];
    let squat = String::from_utf8(rshmem::node::fdpass::socket_name(&key, &job, 5)).unwrap();
    let squatter = spawn_as_nobody(&exe, &format!("fdsquat {squat}"), &[]);
    wait_for_line(&squatter.out, "BOUND");
    let me = FdServer::start(job, key, 0).unwrap();
    let e = me.fetch(job, 5, 7).unwrap_err().to_string();
    assert!(e.contains("PE 5's fd-passing socket is held by a process of another user") && e.contains("uid 65534"), "{e}");
    assert!(e.contains("not sending it the job key"), "{e}");
    let o = wait_all(vec![squatter], Duration::from_secs(20));
    assert!(o[0].out.contains("OK squatter got 0 bytes"), "{}", o[0].out);
}

/// A stranger that listens on RSHMEM_BOOTSTRAP's port before PE 0 does (a rendezvous outside
/// rshmrun, where the port is chosen by hand and any local user can bind it first) gets PE 1's
/// connection. Whatever it answers (a challenge it cannot prove, a welcome at once, or nothing), it
/// must not learn the job key: the bytes it receives do not contain it, and replayed to the real PE 0
/// of that job they do not make it PE 1. PE 1 fails with a clear error naming the address, in bounded
/// time.
#[test]
fn a_stranger_on_the_bootstrap_port_learns_nothing_and_the_pe_fails_clearly() {
    let key = key_bytes(KEY);
    let cases = ["challenge", "welcome", "silent"].map(|how| {
        std::thread::spawn(move || {
            let stranger = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = stranger.local_addr().unwrap().port();
            let pe1 = spawn(1, 2, port, KEY, "5150", &[("RSHMEM_BOOTSTRAP_TIMEOUT", "1")], "init");
            stranger.set_nonblocking(true).unwrap();
            let t = Instant::now();
            let mut c = loop {
                match stranger.accept() {
                    Ok((c, _)) => break c,
                    Err(_) if t.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(5)),
                    Err(e) => panic!("{how}: PE 1 never connected: {e}"),
                }
            };
            c.set_nonblocking(false).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut got = vec![0u8; 9];
            c.read_exact(&mut got).unwrap();
            let mut body = vec![0u8; u64::from_le_bytes(got[1..9].try_into().unwrap()) as usize];
            c.read_exact(&mut body).unwrap();
            got.extend_from_slice(&body);
            let answer: Vec<u8> = match how {
                // A challenge as PE 0 would send it: a nonce and 32 bytes in place of a proof.
                "challenge" => [&[8u8][..], &48u64.to_le_bytes(), &[0x33; 48]].concat(),
                // A welcome for 2 PEs, as if the handshake were over.
                "welcome" => {
                    let mut b = 2u32.to_le_bytes().to_vec();
                    for _ in 0..2 {
                        b.extend_from_slice(&[4, 0]);
                        b.extend_from_slice(b"evil");
                        b.extend_from_slice(&[0, 0]);
                    }
                    [&[2u8][..], &(b.len() as u64).to_le_bytes(), &b].concat()
                }
                _ => Vec::new(),
            };
            c.write_all(&answer).unwrap();
            got.extend(read_to_close(&mut c, Duration::from_secs(15)));
            let pe1 = wait_all(vec![pe1], Duration::from_secs(30)).remove(0);
            (how, port, got, pe1)
        })
    });
    for case in cases {
        let (how, port, got, pe1) = case.join().unwrap();
        // The stranger learned nothing: not the key, not its text.
        assert!(!contains(&got, &key), "{how}: the stranger received the job key: {got:02x?}");
        assert!(!contains(&got.to_ascii_lowercase(), KEY.as_bytes()), "{how}: the stranger received the key's text");
        assert_eq!(pe1.code, Some(1), "{how}: {}", pe1.out);
        assert!(pe1.out.contains(&format!("127.0.0.1:{port}")), "{how}: the error does not name the address: {}", pe1.out);
        let want = match how {
            "challenge" => "did not prove that it knows the job key, so this PE sent it nothing secret",
            "welcome" => "sent a welcome without a challenge: it did not prove that it knows the job key",
            _ => "but PE 0 did not complete the bootstrap within 6 s",
        };
        assert!(pe1.out.contains(want), "{how}: {}", pe1.out);
        assert!(pe1.elapsed < Duration::from_secs(10), "{how}: PE 1 took {:?}", pe1.elapsed);
        // Only the hello (and, after a bad challenge, the PE's refusal) went out.
        let kinds: Vec<u8> = frames(&got).iter().map(|f| f.0).collect();
        assert!(kinds == [1] || kinds == [1, 3], "{how}: PE 1 sent frames {kinds:?}");

        // What it received cannot make it PE 1 of the real job: replayed to the real PE 0, it is
        // answered with a fresh challenge, never a welcome, and PE 0 still waits for PE 1.
        let port0 = free_port();
        let pe0 = spawn(0, 2, port0, KEY, "5150", &[("RSHMEM_BOOTSTRAP_TIMEOUT", "3")], "init");
        wait_listening(port0);
        let mut r = TcpStream::connect(("127.0.0.1", port0)).unwrap();
        r.write_all(&got).unwrap();
        let reply = read_to_close(&mut r, Duration::from_secs(15));
        let kinds: Vec<u8> = frames(&reply).iter().map(|f| f.0).collect();
        assert!(!kinds.contains(&2), "{how}: the replay was welcomed: frames {kinds:?}");
        let pe0 = wait_all(vec![pe0], Duration::from_secs(30)).remove(0);
        assert_eq!(pe0.code, Some(1), "{how}: {}", pe0.out);
        assert!(pe0.out.contains("timed out after 3 s waiting for PE 1 of 2"), "{how}: {}", pe0.out);
    }
}

/// Two flooders hold hundreds of silent connections to the bootstrap port, more than PE 0 keeps in
/// its handshake at once, and keep replacing them, while 30 jobs of 4 PEs start one after the other
/// on that port (PE 0 first, the others once the flood has reached it). No job fails (PE 0 reads a PE's hello before it drops anything, drops silent
/// connections first, and a PE it drops connects again), and what is dropped is told it was a flood.
#[test]
fn a_flood_of_connections_fails_no_job_and_is_named() {
    let port = free_port();
    let stop = temp("flood-stop");
    let flooders: Vec<Proc> = (0..2)
        .map(|i| {
            let mut cmd = probe_command();
            cmd.env(PROBE_VAR, format!("flood {port}")).env(STOP_VAR, &stop);
            start(100 + i, cmd)
        })
        .collect();
    let mut warned = 0;
    let mut failed = Vec::new();
    for j in 0..30 {
        let jobid = format!("{}", 6000 + j);
        // PE 0 first, and the others once the flood has reached it.
        let mut procs = vec![spawn(0, 4, port, KEY, &jobid, &[], "init")];
        wait_listening(port);
        std::thread::sleep(Duration::from_millis(100));
        procs.extend((1..4).map(|pe| spawn(pe, 4, port, KEY, &jobid, &[], "init")));
        let outs = wait_all(procs, Duration::from_secs(60));
        for o in &outs {
            if o.code != Some(0) || !o.out.contains("OK init") {
                failed.push(format!("job {j}, PE {}: {}", o.pe, o.out));
            }
        }
        warned += usize::from(outs[0].out.contains(&format!("a flood of connections to 127.0.0.1:{port}")));
    }
    File::create(&stop).unwrap();
    let flooders = wait_all(flooders, Duration::from_secs(30));
    let _ = std::fs::remove_file(&stop);
    assert_all_ok(&flooders);
    assert!(failed.is_empty(), "{} PEs failed under the flood:\n{}", failed.len(), failed.join("\n"));
    let busy: u64 = flooders
        .iter()
        .map(|o| o.out.split("busy=").nth(1).unwrap().split_whitespace().next().unwrap().parse::<u64>().unwrap())
        .sum();
    let stats = |o: &Outcome| o.out.lines().find(|l| l.starts_with("OK flood")).unwrap_or_default().to_string();
    eprintln!("flood: {} / {}; PE 0 named the flood in {warned} of 30 jobs", stats(&flooders[0]), stats(&flooders[1]));
    assert!(busy > 0, "no connection was told it was dropped for a flood: {flooders:?}");
    assert!(warned > 0, "no PE 0 named the flood");
}
