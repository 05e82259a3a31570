//! Simulated nodes under the real rshmrun: `--nodes K` (the split and the variables each PE gets, bad
//! counts refused before anything starts) and `--netns` (root only: a network namespace per node, which
//! disappears with the job on every exit path, SIGKILL of rshmrun included).
//!
//! The PEs here are plain `sh` processes; the rshmem side (node team, heaps, host RMA across nodes)
//! is tested by `tests/tests/nodes.rs` with the real PE program.

mod common;

use common::collect;
use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant};

const RSHMRUN: &str = env!("CARGO_BIN_EXE_rshmrun");
/// How fast a job's network namespaces must be gone after rshmrun ended.
const PROMPT: Duration = Duration::from_secs(5);

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// True when the `--netns` tests can run (as root); otherwise says so, or fails under scripts/test.sh.
fn netns_allowed(test: &str) -> bool {
    if is_root() {
        return true;
    }
    rshmem_test_support::skip(test, "--netns needs root (scripts/test.sh runs as root)");
    false
}

/// An rshmrun job whose output is collected by two threads; ended (SIGKILL) if a test fails half-way.
struct Job {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Job {
    fn start(mut cmd: Command) -> Job {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start rshmrun");
        let (out, err) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let readers =
            vec![collect(child.stdout.take().unwrap(), Arc::clone(&out)), collect(child.stderr.take().unwrap(), Arc::clone(&err))];
        Job { child, out, err, readers }
    }

    fn text(&self) -> String {
        format!("{}{}", String::from_utf8_lossy(&self.out.lock().unwrap()), String::from_utf8_lossy(&self.err.lock().unwrap()))
    }

    fn wait_until(&mut self, what: &str, limit: Duration, mut ready: impl FnMut(&str) -> bool) {
        let deadline = Instant::now() + limit;
        while !ready(&self.text()) {
            if let Some(s) = self.child.try_wait().unwrap() {
                panic!("rshmrun ended ({s}) before {what}:\n{}", self.text());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", self.text());
            sleep(Duration::from_millis(20));
        }
    }

    /// Waits for rshmrun to exit; returns its status, all its output, and when it ended.
    fn finish(&mut self, limit: Duration) -> (ExitStatus, String, Instant) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "rshmrun still running after {limit:?}:\n{}", self.text());
            sleep(Duration::from_millis(10));
        };
        let ended = Instant::now();
        for r in self.readers.drain(..) {
            r.join().unwrap();
        }
        (status, self.text(), ended)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn rshmrun(args: &[&str]) -> Command {
    let mut cmd = Command::new(RSHMRUN);
    cmd.args(args).env_remove("RSHMEM_NODE_ID").env_remove("RSHMEM_BOOTSTRAP_FD");
    cmd
}

/// A path in a fresh scratch directory, removed when dropped.
struct Scratch(PathBuf);
impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("rshmrun-nodes-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `--nodes 5 -np 4`, `--nodes 0`, `--netns` with more nodes than its subnet holds: refused at once with
/// a message naming the problem, exit status 2, and no PE ever started (no PE leaves its mark).
#[test]
fn bad_node_counts_are_refused_before_anything_starts() {
    let scratch = Scratch::new("bad");
    let mark = scratch.0.join("started");
    let prog = format!("touch {}", mark.display());
    for (args, want) in [
        (&["--nodes", "5", "-np", "4"][..], "--nodes 5: more nodes than the 4 PEs of -np 4"),
        (&["--nodes", "0", "-np", "4"], "--nodes 0: a job runs on at least one node"),
        (&["-np", "4", "--nodes", "-1"], "--nodes"),
        (&["--no-pe-limit", "--netns", "--nodes", "255", "-np", "300"], "--netns gives at most 254 nodes"),
    ] {
        let t = Instant::now();
        let mut cmd = rshmrun(args);
        cmd.args(["sh", "-c", &prog]);
        let (status, text, _) = Job::start(cmd).finish(Duration::from_secs(10));
        assert_eq!(status.code(), Some(2), "{args:?}:\n{text}");
        assert!(text.contains(want), "{args:?}: expected {want:?} in:\n{text}");
        assert!(t.elapsed() < Duration::from_secs(2), "{args:?} took {:?}", t.elapsed());
        assert!(!mark.exists(), "{args:?}: a PE was started");
    }
}

/// Each PE gets its node and the node-local numbering of its node: 7 PEs on 3 nodes are 0-2, 3-4, 5-6.
/// Without --nodes no PE gets RSHMEM_NODE_ID, even when rshmrun's own environment has one.
#[test]
fn every_pe_gets_its_node() {
    let show = "echo \"at $RSHMEM_PE node=$RSHMEM_NODE_ID local=$RSHMEM_LOCAL_PE/$RSHMEM_LOCAL_NPES\"";
    let mut cmd = rshmrun(&["--nodes", "3", "-np", "7", "sh", "-c", show]);
    cmd.env("RSHMEM_NODE_ID", "9");
    let (status, text, _) = Job::start(cmd).finish(Duration::from_secs(30));
    assert!(status.success(), "{text}");
    let want = [(0, 0, 3), (0, 1, 3), (0, 2, 3), (1, 0, 2), (1, 1, 2), (2, 0, 2), (2, 1, 2)];
    for (pe, (node, local, n)) in want.iter().enumerate() {
        let line = format!("[pe {pe}] at {pe} node={node} local={local}/{n}\n");
        assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    }
    let mut cmd = rshmrun(&["-np", "2", "sh", "-c", show]);
    cmd.env("RSHMEM_NODE_ID", "9");
    let (status, text, _) = Job::start(cmd).finish(Duration::from_secs(30));
    assert!(status.success(), "{text}");
    for pe in 0..2 {
        let line = format!("[pe {pe}] at {pe} node= local={pe}/2\n");
        assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    }
}

/// `--netns` without root is refused before anything starts, saying that root is needed. As root the
/// job runs as an unprivileged user (setpriv), so the refusal is tested there too.
#[test]
fn netns_without_root_is_refused() {
    // A directory the unprivileged user can reach and write (the checkout may lie under one only its
    // owner can enter), holding a copy of rshmrun for that user to run.
    let scratch = rshmem_test_support::OtherUserDir::new("rshmrun-noroot").unwrap();
    let mark = scratch.path().join("started");
    let prog = format!("touch {}", mark.display());
    let args = ["--nodes", "2", "--netns", "-np", "2", "sh", "-c", &prog];
    let mut cmd = if is_root() {
        // Writable by anyone, so an unprivileged PE could leave the mark.
        scratch.set_mode(0o777).unwrap();
        let rshmrun = scratch.copy_program(std::path::Path::new(RSHMRUN)).unwrap();
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]).arg(rshmrun).args(args);
        c.current_dir(scratch.path());
        c
    } else {
        rshmrun(&args)
    };
    cmd.env_remove("RSHMEM_NODE_ID");
    let (status, text, _) = Job::start(cmd).finish(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(text.contains("--netns needs root") && text.contains("nothing was started"), "{text}");
    assert!(!mark.exists(), "a PE was started");
}

/// Every process and descriptor that refers to one of `namespaces` ("net:[inode]"), as "pid (comm)".
/// Threads are scanned too: a thread can sit in another namespace than its process.
fn holders(namespaces: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else { return found };
    for p in procs.flatten() {
        let name = p.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let comm = fs::read_to_string(p.path().join("comm")).unwrap_or_default();
        let who = format!("pid {name} ({})", comm.trim());
        let mut refs = Vec::new();
        if let Ok(tasks) = fs::read_dir(p.path().join("task")) {
            refs.extend(tasks.flatten().filter_map(|t| fs::read_link(t.path().join("ns/net")).ok()));
        }
        if let Ok(fds) = fs::read_dir(p.path().join("fd")) {
            refs.extend(fds.flatten().filter_map(|f| fs::read_link(f.path()).ok()));
        }
        if refs.iter().any(|r| namespaces.contains(&r.to_string_lossy().into_owned())) {
            found.push(who);
        }
    }
    found
}

/// How a `--netns` job ends.
#[derive(Debug, Clone, Copy)]
enum End {
    /// Every PE exits 0.
    Normal,
    /// One PE fails; rshmrun ends the others.
    PeFails,
    /// SIGTERM to rshmrun.
    Term,
    /// SIGKILL to rshmrun: nothing of rshmrun runs any more; the PEs get SIGTERM from the kernel.
    Kill,
}

/// One namespace per node, not this process's, each shared by its node's PEs; and after the job, on
/// every exit path, no process and no descriptor anywhere refers to any of them (so the namespaces, and
/// the links in them, are gone), and no bridge or veth appeared in this namespace.
#[test]
fn netns_namespaces_vanish_on_every_exit_path() {
    if !netns_allowed("netns_namespaces_vanish_on_every_exit_path") {
        return;
    }
    let own = fs::read_link("/proc/self/ns/net").unwrap().to_string_lossy().into_owned();
    for end in [End::Normal, End::PeFails, End::Term, End::Kill] {
        let scratch = Scratch::new(&format!("{end:?}"));
        let go = scratch.0.join("go");
        // Each PE says where it is, then waits for `go` (or for the end), and exits 0 (PE 3 exits 3 in
        // PeFails); it gives up after about 30 s, so that a failed test leaves nothing running for long.
        let script = format!(
            "echo \"ns $RSHMEM_NODE_ID $(readlink /proc/self/ns/net) $RSHMEM_BOOTSTRAP\"; \
             i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; \
             if [ {fail} = 1 ] && [ $RSHMEM_PE = 3 ]; then exit 3; fi; exec true",
            go = go.display(),
            fail = u8::from(matches!(end, End::PeFails))
        );
        let mut job = Job::start(rshmrun(&["--nodes", "2", "--netns", "-np", "4", "sh", "-c", &script]));
        job.wait_until("every PE to report its namespace", Duration::from_secs(20), |t| t.matches("] ns ").count() == 4);
        let text = job.text();
        let mut by_node: Vec<BTreeSet<String>> = vec![BTreeSet::new(); 2];
        for line in text.lines().filter(|l| l.contains("] ns ")) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let node: usize = f[3].parse().unwrap();
            by_node[node].insert(f[4].to_string());
            assert!(f.get(5).is_some_and(|b| b.starts_with("10.99.0.1:")), "bootstrap not on node 0's address: {line}");
        }
        assert!(by_node.iter().all(|s| s.len() == 1), "{end:?}: a node's PEs are in different namespaces:\n{text}");
        let namespaces: BTreeSet<String> = by_node.iter().flatten().cloned().collect();
        assert_eq!(namespaces.len(), 2, "{end:?}: the nodes share a namespace:\n{text}");
        assert!(!namespaces.contains(&own), "{end:?}: a node runs in the test's own namespace");
        // The scan sees the namespaces while the job runs (so that an empty scan below means something).
        assert!(holders(&namespaces).len() >= 4, "{end:?}: the scan does not see the PEs: {:?}", holders(&namespaces));
        match end {
            End::Normal | End::PeFails => fs::write(&go, b"").unwrap(),
            End::Term => assert!(Command::new("kill").args(["-TERM", &job.child.id().to_string()]).status().unwrap().success()),
            End::Kill => job.child.kill().unwrap(),
        }
        let (status, text, ended) = job.finish(Duration::from_secs(15));
        let want = match end {
            End::Normal => Some(0),
            End::PeFails => Some(3),
            End::Term => Some(128 + libc::SIGTERM),
            End::Kill => None,
        };
        assert_eq!(status.code(), want, "{end:?}: {status}\n{text}");
        let mut left = holders(&namespaces);
        while !left.is_empty() && ended.elapsed() < PROMPT {
            sleep(Duration::from_millis(20));
            left = holders(&namespaces);
        }
        assert!(left.is_empty(), "{end:?}: {PROMPT:?} after rshmrun ended, still in the nodes' namespaces: {left:?}\n{text}");
        for link in ["rsbr0", "n0", "n1"] {
            assert!(!std::path::Path::new("/sys/class/net").join(link).exists(), "{end:?}: {link} appeared in the caller's namespace");
        }
    }
}

/// `--info` describes both options and the variable.
#[test]
fn info_describes_nodes_and_netns() {
    let out = Command::new(RSHMRUN).arg("--info").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for want in ["--nodes K", "--netns", "RSHMEM_NODE_ID", "10.99.0.1"] {
        assert!(text.contains(want), "--info lacks {want:?}:\n{text}");
    }
}
