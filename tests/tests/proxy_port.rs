//! The proxy's data port under attack (issue 19, item 7), with real processes under `rshmrun --nodes K`
//! (CPU backend, RSHMEM_REMOTE_TRANSPORT=proxy). Scenarios in tests/src/port.rs.
//!
//! - Refused hellos (another wire version with the right or a wrong key, a wrong key, another PE count,
//!   heap size or target PE) carry their status and nothing of the refusing PE's identity.
//! - A link cut (`--netns`, root: node 1's port on the bridge goes down) ends the job with a message
//!   naming the network failure, the peer and the errno, within a bounded time, both with idle links
//!   and with traffic in flight.

mod common;

use common::{text, tool};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
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
/// as a PE that exited or crashed.
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
        let named = t.lines().find(|l| l.contains("rshmem error") && l.contains("the network link to PE"));
        let line = named.unwrap_or_else(|| panic!("{scenario}: no PE named the network failure:\n{t}"));
        assert!(line.contains("(10.99.0."), "{scenario}: the peer's address is not named: {line}\n{t}");
        assert!(["ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH"].iter().any(|e| line.contains(e)) && line.contains("errno"), "{scenario}: no errno named: {line}\n{t}");
        assert!(!t.contains("without finalizing") && !t.contains("closed the connection"), "{scenario}: the cut was reported as a PE that closed or crashed:\n{t}");
        eprintln!("{scenario}: ended {took:?} after the cut: {line}");
    }
}
