//! The proxy's data port under attack (issue 19, item 7), with real processes under `rshmrun --nodes K`
//! (CPU backend, RSHMEM_REMOTE_TRANSPORT=proxy). Scenarios in tests/src/port.rs; the local attacker
//! that watches for new listeners is [`Squatter`] here.
//!
//! - A squatter that holds idle connections to every new listener of the job while it starts neither
//!   stops the job nor slows its init (`--nodes 2 -np 4` and `--nodes 4 -np 16`).
//! - Refused hellos (another wire version with the right or a wrong key, a wrong key, another PE count,
//!   heap size or target PE) carry their status and nothing of the refusing PE's identity.
//! - A flood of stranger connections to a PE's proxy port prints a bounded number of lines.
//! - A link cut (`--netns`, root: node 1's port on the bridge goes down) ends the job with a message
//!   naming the network failure, the peer and the errno, within a bounded time, both with idle links
//!   and with traffic in flight.

mod common;

use common::{text, tool};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `rshmrun --nodes K -np N [--netns] --timeout T rshmem-test-pe SCENARIOS...` with the proxy transport.
fn job(nodes: usize, np: usize, netns: bool, timeout: Duration, scenarios: &[&str]) -> Command {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--nodes", &nodes.to_string(), "-np", &np.to_string(), "--timeout", &timeout.as_secs().to_string()]);
    if netns {
        cmd.arg("--netns");
    }
    cmd.arg(tool("rshmem-test-pe")).args(scenarios);
    cmd.env("RSHMEM_REMOTE_TRANSPORT", "proxy").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "16m");
    cmd.env("RSHMEM_BOOTSTRAP_TIMEOUT", "20").env_remove("RSHMEM_TEST_NETNS").env_remove("RSHMEM_DEBUG");
    cmd.stdin(Stdio::null());
    cmd
}

/// Runs `cmd` to its end; (success, output).
fn run(mut cmd: Command) -> (bool, String) {
    let out = cmd.output().expect("run rshmrun");
    (out.status.success(), text(&out))
}

/// The processes under `root` (its children, theirs, ...), from /proc/*/stat.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent: HashMap<u32, u32> = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parent.insert(pid, ppid);
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent.iter().filter(|(_, &pp)| pp == p).map(|(&c, _)| c));
        i += 1;
    }
    out
}

// ---------------------------------------------------------------- the squatter

/// A local process's view of the machine's TCP listeners: (address, socket inode) of every IPv4
/// socket in LISTEN state, as any unprivileged process may read them: from the kernel's socket
/// diagnostics (netlink, what `ss -ltn` uses; filtered to listeners by the kernel, so it stays fast
/// on a machine with many connections), else from /proc/net/tcp.
fn listeners() -> Vec<(SocketAddr, u64)> {
    diag_listeners().unwrap_or_else(|_| proc_listeners())
}

/// A listener's address as a client reaches it (a wildcard listener through 127.0.0.1).
fn reachable(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(if ip.is_unspecified() { Ipv4Addr::LOCALHOST } else { ip }, port))
}

fn proc_listeners() -> Vec<(SocketAddr, u64)> {
    let Ok(t) = std::fs::read_to_string("/proc/net/tcp") else { return Vec::new() };
    t.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" {
                return None;
            }
            let (ip, port) = f[1].split_once(':')?;
            // The kernel prints the address as the u32 of its network-order bytes.
            let ip = Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.to_le_bytes());
            Some((reachable(ip, u16::from_str_radix(port, 16).ok()?), f[9].parse().ok()?))
        })
        .collect()
}

/// One SOCK_DIAG_BY_FAMILY dump of the IPv4 TCP sockets in LISTEN state (linux/inet_diag.h).
fn diag_listeners() -> std::io::Result<Vec<(SocketAddr, u64)>> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const TCP_LISTEN: u32 = 10;
    // SAFETY: socket(2) takes no pointers; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a descriptor we just opened and own alone.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // nlmsghdr (16 bytes) + inet_diag_req_v2 (56 bytes): family, protocol, ext, pad, states, sockid.
    let mut req = Vec::with_capacity(72);
    req.extend_from_slice(&72u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&[0u8; 8]);
    req.extend_from_slice(&[libc::AF_INET as u8, libc::IPPROTO_TCP as u8, 0, 0]);
    req.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    req.extend_from_slice(&[0u8; 48]);
    // SAFETY: req is a live buffer of req.len() bytes; send(2) only reads it.
    if unsafe { libc::send(raw, req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        // SAFETY: buf is a live, writable buffer of buf.len() bytes.
        let n = unsafe { libc::recv(raw, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut at = 0usize;
        let n = n as usize;
        while at + 16 <= n {
            let len = u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().unwrap());
            if len < 16 || at + len > n {
                return Err(std::io::Error::other("a truncated netlink message"));
            }
            match kind as i32 {
                libc::NLMSG_DONE => return Ok(out),
                libc::NLMSG_ERROR => return Err(std::io::Error::other("SOCK_DIAG_BY_FAMILY refused")),
                _ => {}
            }
            // inet_diag_msg: family, state, timer, retrans, then the sockid (sport and the source
            // address in network order), expires, rqueue, wqueue, uid, inode.
            let m = &buf[at + 16..at + len];
            if m.len() >= 72 {
                let port = u16::from_be_bytes([m[4], m[5]]);
                let ip = Ipv4Addr::new(m[8], m[9], m[10], m[11]);
                let inode = u32::from_ne_bytes(m[68..72].try_into().unwrap()) as u64;
                out.push((reachable(ip, port), inode));
            }
            at += len.next_multiple_of(4);
        }
    }
}

/// The socket inodes of process `pid`'s descriptors.
fn socket_inodes(pid: u32) -> HashSet<u64> {
    let mut set = HashSet::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
        if let Ok(l) = std::fs::read_link(e.path()) {
            if let Some(n) = l.to_str().and_then(|s| s.strip_prefix("socket:[")).and_then(|s| s.strip_suffix(']')) {
                if let Ok(n) = n.parse() {
                    set.insert(n);
                }
            }
        }
    }
    set
}

/// A local process that watches /proc/net/tcp for new listeners and opens `per_listener` idle
/// connections to each as soon as it appears, holding them until stopped (the attack of issue 19).
/// Only listeners of the job's own processes are squatted: other jobs on this machine are left alone.
struct Squatter {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<(SocketAddr, usize)>>,
}

impl Squatter {
    /// Starts watching: `job` is rshmrun's pid, `procs` the number of its processes (rshmrun and its
    /// PEs); listeners that exist already are not the job's.
    fn start(job: u32, procs: usize, per_listener: usize, before: HashSet<u64>) -> Squatter {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut seen = before;
            let mut held: Vec<TcpStream> = Vec::new();
            let mut squatted = Vec::new();
            let mut pids: Vec<u32> = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                // rshmrun and its PEs, looked up until all are there.
                if pids.len() < procs {
                    pids = descendants(job);
                }
                for (addr, inode) in listeners() {
                    if !seen.insert(inode) {
                        continue;
                    }
                    // Whose is it? The known processes of the job first (cheap), then a fresh look.
                    let mut ours = pids.iter().any(|&p| socket_inodes(p).contains(&inode));
                    if !ours {
                        pids = descendants(job);
                        ours = pids.iter().any(|&p| socket_inodes(p).contains(&inode));
                    }
                    if !ours {
                        continue;
                    }
                    let n = (0..per_listener).filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()).map(|s| held.push(s)).count();
                    squatted.push((addr, n));
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            drop(held);
            squatted
        });
        Squatter { stop, handle }
    }

    /// Stops, closes the connections held, and returns the listeners squatted and the connections
    /// made to each.
    fn stop(self) -> Vec<(SocketAddr, usize)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("the squatter panicked")
    }
}

/// A squatter holding 12 idle connections to every listener of the job (the proxy's and the
/// bootstrap's) as each appears must not stop the job, and init must stay fast: below the proxy's
/// 5 s hello deadline, which a one-at-a-time acceptor waits out for every idle connection ahead of a
/// PE's.
#[test]
fn a_squatter_during_setup_neither_stops_nor_slows_init() {
    // Twice at 4 PEs: a squatter wins its race against a PE's connection in most jobs, not all.
    for (nodes, np, limit) in [(2, 4, Duration::from_secs(3)), (2, 4, Duration::from_secs(3)), (4, 16, Duration::from_secs(4))] {
        let before: HashSet<u64> = listeners().into_iter().map(|(_, i)| i).collect();
        let mut cmd = job(nodes, np, false, Duration::from_secs(90), &["port_init"]);
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start rshmrun");
        let squatter = Squatter::start(child.id(), np + 1, 12, before);
        let out = child.wait_with_output().expect("wait for rshmrun");
        let squatted = squatter.stop();
        let t = text(&out);
        let what = format!("--nodes {nodes} -np {np} with a squatter on {} listeners ({squatted:?})", squatted.len());
        assert!(out.status.success(), "{what}: the job failed:\n{t}");
        // Each PE of a node with a PE of a lower node accepts; every proxy has a listener.
        assert!(squatted.len() >= np, "{what}: the squatter found fewer listeners than PEs:\n{t}");
        assert!(squatted.iter().all(|&(_, n)| n == 12), "{what}: the squatter could not open all its connections:\n{t}");
        for pe in 0..np {
            let ms: u64 = t
                .lines()
                .find_map(|l| l.strip_prefix(&format!("[pe {pe}] PE {pe}: init took ")))
                .and_then(|r| r.strip_suffix(" ms")?.parse().ok())
                .unwrap_or_else(|| panic!("{what}: PE {pe} did not say how long its init took:\n{t}"));
            assert!(Duration::from_millis(ms) < limit, "{what}: PE {pe}'s init took {ms} ms (at most {limit:?}):\n{t}");
        }
        let slowest = t.lines().filter_map(|l| l.split(": init took ").nth(1)?.strip_suffix(" ms")?.parse::<u64>().ok()).max().unwrap_or(0);
        eprintln!("{what}: ok, slowest init {slowest} ms");
    }
}

// ---------------------------------------------------------------- hellos and floods

/// A wrong-version hello with the job's key or a wrong one, and every other refused hello, get a
/// refusal that carries its status and nothing else (checked byte by byte by PE 2, a raw client).
#[test]
fn a_refused_hello_carries_no_identity() {
    let (ok, t) = run(job(2, 4, false, Duration::from_secs(60), &["port_hello"]));
    assert!(ok, "port_hello failed:\n{t}");
    for (what, status) in [("another wire version with the job's key", 2), ("another wire version with a wrong key", 1), ("another PE count", 3), ("another heap size", 4)] {
        assert!(t.contains(&format!("PE 2: {what}: refused with status {status} and nothing else")), "{what}:\n{t}");
    }
    // PE 0 names each refused connection; the wrong key one without its claims mattering.
    assert!(t.contains("refused the connection from 127.0.0.1") && t.contains("wrong job key"), "{t}");
}

/// 3000 stranger connections to PE 0's proxy port (garbage, wrong keys, connect-and-close) with a
/// few idle ones held: PE 0 prints a few lines and a count, not one line each, and the job's own
/// connections still carry the right bytes.
#[test]
fn a_flood_of_strangers_prints_a_bounded_number_of_lines() {
    let (ok, t) = run(job(2, 4, false, Duration::from_secs(90), &["port_flood"]));
    assert!(ok, "port_flood failed:\n{t}");
    assert!(t.contains("PE 2: 3000 stranger connections to PE 0's proxy port"), "{t}");
    let lines: Vec<&str> = t.lines().filter(|l| l.starts_with("[pe 0] rshmem ")).collect();
    assert!(lines.len() <= 12, "PE 0 wrote {} lines about the flood (at most 12):\n{}", lines.len(), lines.join("\n"));
    assert!(
        lines.iter().any(|l| l.contains("more warnings about connections to the proxy port")),
        "no summary line counting the warnings not shown:\n{}",
        lines.join("\n")
    );
}

// ---------------------------------------------------------------- a cut link

/// Whether the `--netns` part `what` can run (as root); otherwise says so in one line, or fails under
/// scripts/test.sh (`rshmem_test_support::skip`).
fn netns_allowed(what: &str) -> bool {
    if rshmem_test_support::is_root() {
        return true;
    }
    rshmem_test_support::skip(what, "--netns needs root (scripts/test.sh runs as root)");
    false
}

/// The inode of a namespace link ("net:[4026532]").
fn ns_inode(link: &std::path::Path) -> Option<u64> {
    let l = std::fs::read_link(link).ok()?;
    l.to_str()?.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// The descriptor path, in rshmrun's /proc, of the switch namespace of its simulated network (the one
/// with the bridge and the host side of every node's veth): a network namespace rshmrun holds open
/// that is neither its own nor any of its PEs'.
fn switch_namespace(rshmrun: u32) -> Option<std::path::PathBuf> {
    let mut taken: HashSet<u64> = descendants(rshmrun).iter().filter_map(|p| ns_inode(format!("/proc/{p}/ns/net").as_ref())).collect();
    taken.extend(ns_inode("/proc/self/ns/net".as_ref()));
    std::fs::read_dir(format!("/proc/{rshmrun}/fd")).ok()?.flatten().map(|e| e.path()).find(|p| ns_inode(p).is_some_and(|i| !taken.contains(&i)))
}

/// Cuts node `node`'s cable at the switch: its veth's bridge side goes down, so that neither side
/// hears from the other and nothing tells either (a silent link loss).
fn cut_link(rshmrun: u32, node: usize) -> Result<(), String> {
    let ns = switch_namespace(rshmrun).ok_or("found no switch namespace among rshmrun's descriptors")?;
    let out = Command::new("nsenter")
        .arg(format!("--net={}", ns.display()))
        .args(["ip", "link", "set", &format!("n{node}"), "down"])
        .output()
        .map_err(|e| format!("nsenter ip link: {e}"))?;
    if !out.status.success() {
        return Err(format!("nsenter ip link set n{node} down: {}", text(&out)));
    }
    Ok(())
}

/// A running job whose output is read line by line as it comes.
struct Streamed {
    child: Child,
    lines: mpsc::Receiver<String>,
    all: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl Streamed {
    fn start(mut cmd: Command) -> Streamed {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start rshmrun");
        let (tx, lines) = mpsc::channel();
        let all = Arc::new(Mutex::new(String::new()));
        let out: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().unwrap());
        let err: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().unwrap());
        let readers = [out, err]
            .into_iter()
            .map(|r| {
                let (tx, all) = (tx.clone(), all.clone());
                std::thread::spawn(move || {
                    for l in BufReader::new(r).lines().map_while(Result::ok) {
                        all.lock().unwrap().push_str(&format!("{l}\n"));
                        let _ = tx.send(l);
                    }
                })
            })
            .collect();
        Streamed { child, lines, all, readers }
    }

    /// Waits at most `limit` for a line containing `needle`.
    fn wait_for(&self, needle: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    /// Waits for the end of the job; (success, its whole output).
    fn finish(mut self) -> (bool, String) {
        let status = self.child.wait().expect("wait for rshmrun");
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let t = self.all.lock().unwrap().clone();
        (status.success(), t)
    }
}

/// Node 1's link is cut at the switch while the PEs wait with idle links, then while they stream
/// puts and gets across it: the job ends within 25 s of the cut (TCP_USER_TIMEOUT is 10 s), with a
/// message naming the network failure, a PE of the other node with its address, and the errno, not
/// as a PE that exited or crashed (by the engine, or by a PE's own put or get that returned it).
#[test]
fn a_cut_link_is_named_as_one() {
    if !netns_allowed("a_cut_link_is_named_as_one (--netns)") {
        return;
    }
    for scenario in ["port_cut_idle", "port_cut_busy"] {
        let job = Streamed::start(job(2, 4, true, Duration::from_secs(90), &[scenario]));
        let ready = job.wait_for("PE 0: ready for the cut", Duration::from_secs(60));
        let pid = job.child.id();
        let cut = ready.then(|| cut_link(pid, 1));
        let cut_at = Instant::now();
        let (ok, t) = job.finish();
        let took = cut_at.elapsed();
        assert!(ready, "{scenario}: PE 0 never said it was ready for the cut:\n{t}");
        if let Some(Err(e)) = cut {
            panic!("{scenario}: could not cut node 1's link: {e}\n{t}");
        }
        assert!(!ok, "{scenario}: the job succeeded although node 1 was cut off:\n{t}");
        assert!(took < Duration::from_secs(25), "{scenario}: the job ended {took:?} after the cut (at most 25 s):\n{t}");
        // By the engine (its reaper), or by the PE's own put or get that returned the failure.
        let named = t.lines().find(|l| (l.contains("rshmem error") || l.contains(": FAILED: ")) && l.contains("the network link to PE"));
        let line = named.unwrap_or_else(|| panic!("{scenario}: no PE named the network failure:\n{t}"));
        assert!(line.contains("(10.99.0."), "{scenario}: the peer's address is not named: {line}\n{t}");
        assert!(["ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH"].iter().any(|e| line.contains(e)) && line.contains("errno"), "{scenario}: no errno named: {line}\n{t}");
        assert!(!t.contains("without finalizing") && !t.contains("closed the connection"), "{scenario}: the cut was reported as a PE that closed or crashed:\n{t}");
        eprintln!("{scenario}: ended {took:?} after the cut: {line}");
    }
}
