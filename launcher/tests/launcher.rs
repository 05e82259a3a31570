//! Integration tests of rshmrun: real jobs of sh, sleep and awk processes.
//!
//! Every job runs under a [`Running`] guard that ends it (and so its PEs) if the test fails half-way, and
//! every wait is bounded, so a broken rshmrun fails the tests instead of hanging them.

mod common;

use common::collect;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant};

const RSHMRUN: &str = env!("CARGO_BIN_EXE_rshmrun");
/// Bound on jobs that should end by themselves; generous for a loaded machine.
const JOB_LIMIT: Duration = Duration::from_secs(60);
/// How fast rshmrun must end a job after a PE failed or it was signalled (the requirement).
const PROMPT: Duration = Duration::from_secs(5);

/// An rshmrun process whose stdout and stderr are collected by two threads.
struct Running {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
    started: Instant,
    done: bool,
}

/// A job that ended.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    /// When rshmrun's exit was noticed.
    ended: Instant,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        Running::start_env(args, &[])
    }

    fn start_env(args: &[&str], envs: &[(&str, &Path)]) -> Running {
        let mut cmd = Command::new(RSHMRUN);
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        // The tests check what rshmrun sets; do not let a variable of the test's environment confuse them.
        cmd.env_remove("RSHMEM_BOOTSTRAP_FD");
        // rshmrun keeps a signal ignored when it starts with it ignored (as `nohup` asks), and a
        // background job of a non-interactive shell (`scripts/test.sh &`) starts with SIGINT ignored:
        // the signal tests then saw rshmrun ignore SIGINT. rshmrun starts here as from a terminal.
        // SAFETY: between fork and exec only async-signal-safe calls: signal(2) with constants.
        unsafe {
            cmd.pre_exec(|| {
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                Ok(())
            })
        };
        let mut child = cmd.spawn().expect("start rshmrun");
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), Arc::clone(&out)),
            collect(child.stderr.take().unwrap(), Arc::clone(&err)),
        ];
        Running { child, out, err, readers, started: Instant::now(), done: false }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stdout_now(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn stderr_now(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned()
    }

    /// Polls until `ready` holds, panicking (the guard then ends the job) after `limit`.
    fn wait_until(&mut self, what: &str, limit: Duration, mut ready: impl FnMut(&Running) -> bool) {
        let deadline = Instant::now() + limit;
        while !ready(self) {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.done = true;
                panic!(
                    "rshmrun ended ({status}) before {what}\nstdout:\n{}\nstderr:\n{}",
                    self.stdout_now(),
                    self.stderr_now()
                );
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\nstdout:\n{}\nstderr:\n{}",
                self.stdout_now(),
                self.stderr_now()
            );
            sleep(Duration::from_millis(20));
        }
    }

    /// Waits for rshmrun to exit, at most `limit`, and returns what it printed.
    fn finish(mut self, limit: Duration) -> Finished {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "rshmrun still running after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                self.stdout_now(),
                self.stderr_now()
            );
            sleep(Duration::from_millis(10));
        };
        let ended = Instant::now();
        self.done = true;
        for r in self.readers.drain(..) {
            r.join().unwrap();
        }
        Finished { status, stdout: self.stdout_now(), stderr: self.stderr_now(), ended }
    }
}

impl Drop for Running {
    /// Ends a job that a failed test left running: SIGTERM to rshmrun (which ends its PEs), SIGKILL
    /// after 5 s.
    fn drop(&mut self) {
        if self.done || matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        send_signal(self.pid(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(args: &[&str]) -> Finished {
    Running::start(args).finish(JOB_LIMIT)
}

fn send_signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
}

/// True when `pid` is a live (not zombie) process whose command line contains `what`.
fn alive(pid: u32, what: &str) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
    if state == Some("Z") {
        return false;
    }
    fs::read(format!("/proc/{pid}/cmdline")).map(|c| String::from_utf8_lossy(&c).contains(what)).unwrap_or(false)
}

/// A scratch directory that kills the `sleep` processes whose pids were written into it, and removes
/// itself, when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("rshmrun-test-{}-{name}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The pids written as files `PREFIX.N` (`N` a PE number), complete ones only.
    fn pids(&self, prefix: &str) -> HashMap<usize, u32> {
        let mut pids = HashMap::new();
        for entry in fs::read_dir(&self.0).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pe) = name.strip_prefix(prefix).and_then(|s| s.strip_prefix('.')).and_then(|s| s.parse().ok())
            else {
                continue;
            };
            let text = fs::read_to_string(entry.path()).unwrap_or_default();
            if let (true, Ok(pid)) = (text.ends_with('\n'), text.trim().parse()) {
                pids.insert(pe, pid);
            }
        }
        pids
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for prefix in ["pid", "bg"] {
            for pid in self.pids(prefix).values() {
                if alive(*pid, "sleep") {
                    send_signal(*pid, "KILL");
                }
            }
        }
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

#[test]
fn tags_stdout_and_stderr_lines() {
    let f = run(&["-np", "3", "sh", "-c", "echo hello from $RSHMEM_PE; echo err $RSHMEM_PE >&2"]);
    assert!(f.status.success(), "{}", f.stderr);
    assert_eq!(sorted_lines(&f.stdout), ["[pe 0] hello from 0", "[pe 1] hello from 1", "[pe 2] hello from 2"]);
    assert_eq!(sorted_lines(&f.stderr), ["[pe 0] err 0", "[pe 1] err 1", "[pe 2] err 2"]);
}

#[test]
fn no_tag_prints_lines_unchanged() {
    let f = run(&["-np", "3", "--no-tag", "sh", "-c", "echo hello from $RSHMEM_PE; echo err $RSHMEM_PE >&2"]);
    assert!(f.status.success(), "{}", f.stderr);
    assert_eq!(sorted_lines(&f.stdout), ["hello from 0", "hello from 1", "hello from 2"]);
    assert_eq!(sorted_lines(&f.stderr), ["err 0", "err 1", "err 2"]);
}

#[test]
fn last_line_without_newline_is_printed() {
    let f = run(&["-np", "2", "sh", "-c", "printf 'a\\nno newline %s' $RSHMEM_PE; printf 'e%s' $RSHMEM_PE >&2"]);
    assert!(f.status.success(), "{}", f.stderr);
    assert_eq!(sorted_lines(&f.stdout), ["[pe 0] a", "[pe 0] no newline 0", "[pe 1] a", "[pe 1] no newline 1"]);
    assert!(f.stdout.ends_with('\n'));
    assert_eq!(sorted_lines(&f.stderr), ["[pe 0] e0", "[pe 1] e1"]);
}

#[test]
fn np_spellings_and_argument_pass_through() {
    for np in [&["-n", "2"][..], &["--np", "2"], &["--np=2"], &["-np", "2"]] {
        let mut args = np.to_vec();
        args.extend(["sh", "-c", "echo pe $RSHMEM_PE of $RSHMEM_NPES: $0 $1", "zero", "-x"]);
        let f = run(&args);
        assert!(f.status.success(), "{np:?}: {}", f.stderr);
        assert_eq!(sorted_lines(&f.stdout), ["[pe 0] pe 0 of 2: zero -x", "[pe 1] pe 1 of 2: zero -x"], "{np:?}");
    }
}

/// A CPU list as /proc prints it ("0-3,8") as CPU numbers.
fn cpu_list(text: &str) -> Vec<usize> {
    text.trim()
        .split(',')
        .flat_map(|r| match r.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<usize>>(),
            None => vec![r.parse().unwrap()],
        })
        .collect()
}

/// Each PE's CPUs, as every PE and a thread it started read them from /proc (`[pe N] N LIST LIST`).
fn pe_cpus(args: &[&str]) -> Vec<Vec<usize>> {
    let mut a = args.to_vec();
    // The PE's own mask, and that of a child it starts (what its threads and helpers inherit).
    a.extend(["sh", "-c", "echo $RSHMEM_PE $(grep Cpus_allowed_list /proc/self/status | cut -f2) $(sh -c 'grep Cpus_allowed_list /proc/self/status' | cut -f2)"]);
    let f = run(&a);
    assert!(f.status.success(), "{args:?}: {}", f.stderr);
    let mut by_pe: Vec<(usize, Vec<usize>)> = f
        .stdout
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w.len(), 5, "{l}");
            assert_eq!(w[3], w[4], "a PE's child left its CPUs: {l}");
            (w[2].parse().unwrap(), cpu_list(w[3]))
        })
        .collect();
    by_pe.sort();
    by_pe.into_iter().map(|(_, c)| c).collect()
}

/// `--bind-to core` gives every PE its own equal share of rshmrun's CPUs, in PE order, and every CPU to
/// one PE; more PEs than CPUs get one CPU each, round robin; without it every PE has all of them.
#[test]
fn bind_to_core_gives_each_pe_its_own_cpus() {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let mine = cpu_list(status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap());
    let n = mine.len();
    assert_eq!(pe_cpus(&["-np", "2"]), vec![mine.clone(), mine.clone()]);
    if n < 2 {
        // One CPU: nothing to split (CI's machine has two).
        return;
    }
    let two = pe_cpus(&["-np", "2", "--bind-to", "core"]);
    assert_eq!(two, vec![mine[..n.div_ceil(2)].to_vec(), mine[n.div_ceil(2)..].to_vec()]);
    let more = pe_cpus(&["-np", &(n + 1).to_string(), "--bind-to", "core", "--nodes", "2"]);
    let expect: Vec<Vec<usize>> = (0..=n).map(|i| vec![mine[i % n]]).collect();
    assert_eq!(more, expect);
    let f = run(&["-np", "2", "--bind-to", "socket", "true"]);
    assert!(!f.status.success() && f.stderr.contains("socket") && f.stderr.contains("core"), "{}", f.stderr);
}

/// Finds the inode of a listening TCP socket on 127.0.0.1:`port` in /proc/net/tcp.
fn listening_inode(port: u16) -> Option<String> {
    let table = fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let want = format!("0100007F:{port:04X}");
        (f.len() > 9 && f[1] == want && f[3] == "0A").then(|| f[9].to_string())
    })
}

#[test]
fn environment_of_the_pes() {
    let dir = Scratch::new("env");
    let script = r#"
        fd=${RSHMEM_BOOTSTRAP_FD-none}
        link=$(readlink "/proc/$$/fd/$fd" 2>/dev/null)
        sockets=$(for f in /proc/$$/fd/*; do readlink "$f"; done | grep -c socket)
        ids="pe=$RSHMEM_PE npes=$RSHMEM_NPES lpe=$RSHMEM_LOCAL_PE lnpes=$RSHMEM_LOCAL_NPES"
        echo "$ids boot=$RSHMEM_BOOTSTRAP key=$RSHMEM_JOB_KEY fd=$fd link=$link sockets=$sockets"
        if [ "$RSHMEM_PE" = 0 ]; then
            i=0
            while [ ! -e "$RSHMRUN_TEST_DIR/done" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
        fi
    "#;
    let mut job = Running::start_env(&["-np", "3", "sh", "-c", script], &[("RSHMRUN_TEST_DIR", &dir.0)]);
    job.wait_until("3 lines from the PEs", JOB_LIMIT, |j| j.stdout_now().lines().count() == 3);

    let out = job.stdout_now();
    let mut seen = HashMap::new();
    for line in out.lines() {
        let (tag, rest) = line.split_once("] ").expect("tagged line");
        let fields: HashMap<&str, &str> = rest.split(' ').filter_map(|kv| kv.split_once('=')).collect();
        assert_eq!(tag, format!("[pe {}", fields["pe"]), "{line}");
        seen.insert(fields["pe"].to_string(), fields);
    }
    assert_eq!(seen.len(), 3, "distinct RSHMEM_PE values: {out}");
    let key = seen["0"]["key"];
    assert_eq!(key.len(), 32, "{key}");
    assert!(key.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{key}");
    let boot = seen["0"]["boot"];
    let port: u16 = boot.strip_prefix("127.0.0.1:").expect("RSHMEM_BOOTSTRAP on loopback").parse().unwrap();
    assert_ne!(port, 0);
    for pe in ["0", "1", "2"] {
        let f = &seen[pe];
        assert_eq!((f["npes"], f["lpe"], f["lnpes"]), ("3", pe, "3"), "PE {pe}");
        assert_eq!(f["key"], key, "same job key on every PE");
        assert_eq!(f["boot"], boot, "same bootstrap address on every PE");
        if pe != "0" {
            assert_eq!((f["fd"], f["link"], f["sockets"]), ("none", "", "0"), "PE {pe} must get no listener");
        }
    }
    // PE 0 got the fd, it is a socket, its only one, and it is the listener bound to RSHMEM_BOOTSTRAP.
    let link = seen["0"]["link"];
    assert!(seen["0"]["fd"].parse::<u32>().is_ok(), "RSHMEM_BOOTSTRAP_FD={}", seen["0"]["fd"]);
    assert_eq!(seen["0"]["sockets"], "1");
    let inode =
        link.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')).unwrap_or_else(|| panic!("fd is {link:?}"));
    assert_eq!(listening_inode(port).as_deref(), Some(inode), "the fd is the socket listening on {boot}");

    fs::write(dir.0.join("done"), "").unwrap();
    let f = job.finish(JOB_LIMIT);
    assert!(f.status.success(), "{}", f.stderr);

    // A new job gets a new key.
    let f = run(&["-np", "1", "sh", "-c", "echo $RSHMEM_JOB_KEY"]);
    assert_ne!(f.stdout.trim_start_matches("[pe 0] ").trim(), key);
}

#[test]
fn failing_pe_ends_the_job_with_its_exit_code() {
    let job = Running::start(&["-np", "3", "sh", "-c", "if [ $RSHMEM_PE = 1 ]; then exit 3; fi; sleep 30"]);
    let started = job.started;
    let f = job.finish(JOB_LIMIT);
    assert_eq!(f.status.code(), Some(3), "{}", f.stderr);
    assert!(f.ended - started < PROMPT, "took {:?}", f.ended - started);
    assert!(f.stderr.contains("PE 1 ") && f.stderr.contains("code 3"), "{}", f.stderr);
}

#[test]
fn killed_pe_ends_the_job() {
    let dir = Scratch::new("kill");
    let script =
        r#"cd "$RSHMRUN_TEST_DIR" && echo $$ > tmp.$RSHMEM_PE && mv tmp.$RSHMEM_PE pid.$RSHMEM_PE; exec sleep 30"#;
    let mut job = Running::start_env(&["-np", "3", "sh", "-c", script], &[("RSHMRUN_TEST_DIR", &dir.0)]);
    job.wait_until("3 PEs running sleep", JOB_LIMIT, |_| {
        let pids = dir.pids("pid");
        pids.len() == 3 && pids.values().all(|&p| alive(p, "sleep"))
    });
    let pids = dir.pids("pid");

    send_signal(pids[&1], "KILL");
    let killed = Instant::now();
    let f = job.finish(JOB_LIMIT);
    assert!(f.ended - killed < PROMPT, "took {:?} after the kill", f.ended - killed);
    assert_eq!(f.status.code(), Some(128 + 9), "{}", f.stderr);
    assert!(f.stderr.contains(&format!("PE 1 (pid {})", pids[&1])) && f.stderr.contains("SIGKILL"), "{}", f.stderr);
    for pe in [0, 2] {
        assert!(!alive(pids[&pe], "sleep"), "PE {pe} (pid {}) still running", pids[&pe]);
    }
}

#[test]
fn timeout_ends_the_job_with_124() {
    let job = Running::start(&["--timeout", "1", "-np", "2", "sleep", "30"]);
    let started = job.started;
    let f = job.finish(JOB_LIMIT);
    assert_eq!(f.status.code(), Some(124), "{}", f.stderr);
    assert!(f.ended - started < Duration::from_secs(4), "took {:?}", f.ended - started);
    assert!(f.stderr.contains("--timeout of 1 s"), "{}", f.stderr);
}

#[test]
fn sigterm_is_forwarded_to_the_pes() {
    let script = r#"trap "echo got term; exit 7" TERM; echo ready; while true; do sleep 0.1; done"#;
    let mut job = Running::start(&["-np", "2", "sh", "-c", script]);
    job.wait_until("both PEs ready", JOB_LIMIT, |j| {
        let out = j.stdout_now();
        out.contains("[pe 0] ready") && out.contains("[pe 1] ready")
    });
    send_signal(job.pid(), "TERM");
    let signalled = Instant::now();
    let f = job.finish(JOB_LIMIT);
    assert!(f.ended - signalled < PROMPT, "took {:?} after SIGTERM", f.ended - signalled);
    assert!(!f.status.success(), "{}", f.stderr);
    assert!(f.stdout.contains("[pe 0] got term") && f.stdout.contains("[pe 1] got term"), "{}", f.stdout);
    assert!(f.stderr.contains("received SIGTERM"), "{}", f.stderr);
}

#[test]
fn signal_ignored_by_the_pes_still_ends_the_job() {
    let script = r#"trap "" INT TERM; echo ready; while true; do sleep 0.1; done"#;
    let mut job = Running::start(&["-np", "2", "sh", "-c", script]);
    job.wait_until("both PEs ready", JOB_LIMIT, |j| j.stdout_now().matches("ready").count() == 2);
    send_signal(job.pid(), "INT");
    let signalled = Instant::now();
    let f = job.finish(JOB_LIMIT);
    assert!(f.ended - signalled < PROMPT, "took {:?} after SIGINT", f.ended - signalled);
    assert_eq!(f.status.code(), Some(128 + 2), "{}", f.stderr);
    assert!(f.stderr.contains("SIGKILL"), "{}", f.stderr);
}

/// The text PE `pe` prints as line `i` in `lines_never_mix`: 200 characters.
fn long_line(pe: usize, i: usize) -> String {
    let mut s = format!("pe{pe} line {i:05} ");
    while s.len() < 200 {
        s.push_str("abcdefghij");
    }
    s.truncate(200);
    s
}

#[test]
fn lines_never_mix() {
    const PES: usize = 4;
    const LINES: usize = 2000;
    // awk writes in large blocks, so lines arrive split across reads of the pipe.
    let program = format!(
        r#"BEGIN {{ pe = ENVIRON["RSHMEM_PE"]; for (i = 0; i < {LINES}; i++) {{
            s = sprintf("pe%d line %05d ", pe, i); while (length(s) < 200) s = s "abcdefghij"
            print substr(s, 1, 200) }} }}"#
    );
    let f = run(&["-np", &PES.to_string(), "awk", &program]);
    assert!(f.status.success(), "{}", f.stderr);
    let mut next = [0usize; PES];
    for line in f.stdout.lines() {
        let (tag, text) = line.split_once("] ").unwrap_or_else(|| panic!("untagged line {line:?}"));
        let pe: usize =
            tag.strip_prefix("[pe ").and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("bad tag in {line:?}"));
        assert!(pe < PES, "{line:?}");
        assert_eq!(text, long_line(pe, next[pe]), "line {} of PE {pe} mangled", next[pe]);
        next[pe] += 1;
    }
    assert_eq!(next, [LINES; PES]);
}

#[test]
fn processes_left_behind_by_a_pe_are_ended() {
    let dir = Scratch::new("bg");
    let script =
        r#"cd "$RSHMRUN_TEST_DIR" || exit 1; sleep 30 & echo $! > tmp.$RSHMEM_PE && mv tmp.$RSHMEM_PE bg.$RSHMEM_PE"#;
    let job = Running::start_env(&["-np", "2", "sh", "-c", script], &[("RSHMRUN_TEST_DIR", &dir.0)]);
    let started = job.started;
    let f = job.finish(JOB_LIMIT);
    assert!(f.status.success(), "{}", f.stderr);
    assert!(f.ended - started < PROMPT, "took {:?}", f.ended - started);
    assert!(f.stderr.contains("left processes running"), "{}", f.stderr);
    let bg = dir.pids("bg");
    assert_eq!(bg.len(), 2);
    for pid in bg.values() {
        assert!(!alive(*pid, "sleep"), "background sleep {pid} still running");
    }
}

#[test]
fn info_lists_the_variables() {
    let f = run(&["--info"]);
    assert!(f.status.success(), "{}", f.stderr);
    for var in ["RSHMEM_SYMMETRIC_SIZE", "RSHMEM_BOOTSTRAP_TIMEOUT", "RSHMEM_BOOTSTRAP_FD", "RSHMEM_JOB_KEY"] {
        assert!(f.stdout.contains(var), "{var} missing:\n{}", f.stdout);
    }
}

#[test]
fn help_documents_the_variables() {
    let f = run(&["--help"]);
    assert!(f.status.success(), "{}", f.stderr);
    for var in
        ["RSHMEM_PE", "RSHMEM_NPES", "RSHMEM_LOCAL_PE", "RSHMEM_BOOTSTRAP", "RSHMEM_BOOTSTRAP_FD", "RSHMEM_JOB_KEY"]
    {
        assert!(f.stdout.contains(var), "{var} missing:\n{}", f.stdout);
    }
}

#[test]
fn program_that_cannot_run() {
    let f = run(&["-np", "2", "rshmrun-test-no-such-program"]);
    assert_eq!(f.status.code(), Some(127), "{}", f.stderr);
    assert!(f.stderr.contains("rshmrun-test-no-such-program"), "{}", f.stderr);
    assert!(f.stdout.is_empty());

    let f = run(&["-np", "1", "/nonexistent/rshmrun-test-prog"]);
    assert_eq!(f.status.code(), Some(127), "{}", f.stderr);
    assert!(f.stderr.contains("/nonexistent/rshmrun-test-prog"), "{}", f.stderr);

    let dir = Scratch::new("noexec");
    let script = dir.0.join("not-executable.sh");
    fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let f = run(&["-np", "1", script.to_str().unwrap()]);
    assert_eq!(f.status.code(), Some(126), "{}", f.stderr);
    assert!(f.stderr.contains("not-executable.sh"), "{}", f.stderr);
}

#[test]
fn bad_command_lines_are_refused() {
    for (args, mention) in [
        (&["-np", "0", "true"][..], "0"),
        (&["-np", "2"], "PROGRAM"),
        (&["true"], "--np"),
        (&["-np", "x", "true"], "x"),
    ] {
        let f = run(args);
        assert_eq!(f.status.code(), Some(2), "{args:?}: {}", f.stderr);
        assert!(f.stderr.contains(mention), "{args:?}: {}", f.stderr);
    }
}

/// A `sleep` argument no other test or process uses: "SECS.<this test process's pid>", so that the PEs of
/// one test can be found in /proc by their command line.
fn marked_sleep(secs: u32) -> String {
    format!("{secs}.{:07}", std::process::id())
}

/// Live (not zombie) processes whose command line is `sleep MARK`.
fn sleeping_with(mark: &str) -> Vec<u32> {
    let want = format!("sleep\0{mark}\0");
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        if cmdline.ends_with(want.as_bytes()) && alive(pid, "sleep") {
            found.push(pid);
        }
    }
    found
}

/// Kills (SIGKILL) the `sleep MARK` processes a failed test may have left.
struct KillMarked(String);

impl Drop for KillMarked {
    fn drop(&mut self) {
        for pid in sleeping_with(&self.0) {
            send_signal(pid, "KILL");
        }
    }
}

/// The value of `Field:` in /proc/PID/status.
fn proc_status_field(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.trim().parse().ok())
}

/// Zombie children of `parent`.
fn zombie_children(parent: u32) -> usize {
    let mut n = 0;
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let mut rest = stat.rsplit(')').next().unwrap_or("").split_whitespace();
        let (state, ppid) = (rest.next(), rest.next().and_then(|p| p.parse::<u32>().ok()));
        if state == Some("Z") && ppid == Some(parent) {
            n += 1;
        }
    }
    n
}

#[test]
fn sigterm_during_startup_ends_the_job_at_once() {
    const NP: usize = 500;
    for (sig, name, code) in [("TERM", "SIGTERM", 143), ("INT", "SIGINT", 130), ("HUP", "SIGHUP", 129)] {
        let mark = marked_sleep(29);
        let _cleanup = KillMarked(mark.clone());
        let mut job = Running::start(&["-np", &NP.to_string(), "sleep", &mark]);
        // Signal while rshmrun is still starting PEs: a few are up, most are not (starting 500 takes about
        // a second, much more on a loaded machine).
        job.wait_until("the first PEs running", JOB_LIMIT, |_| sleeping_with(&mark).len() >= 5);
        send_signal(job.pid(), sig);
        let signalled = Instant::now();
        let f = job.finish(JOB_LIMIT);
        let took = f.ended - signalled;
        assert_eq!(f.status.code(), Some(code), "{name}: {}", f.stderr);
        assert!(took < Duration::from_secs(1), "took {took:?} after {name}\n{}", f.stderr);
        assert!(f.stderr.contains(&format!("received {name}")), "{}", f.stderr);
        assert!(f.stderr.contains("not started"), "{name} came after start-up; nothing tested\n{}", f.stderr);
        let left = sleeping_with(&mark);
        assert!(left.is_empty(), "PEs still running after rshmrun exited on {name}: {left:?}");
    }
}

#[test]
fn failing_pe_during_startup_stops_the_start() {
    const NP: usize = 500;
    let mark = marked_sleep(28);
    let _cleanup = KillMarked(mark.clone());
    let script = format!(r#"echo up; if [ "$RSHMEM_PE" = 2 ]; then exit 5; fi; exec sleep {mark}"#);
    let job = Running::start(&["-np", &NP.to_string(), "sh", "-c", &script]);
    let started = job.started;
    let f = job.finish(JOB_LIMIT);
    assert_eq!(f.status.code(), Some(5), "{}", f.stderr);
    assert!(f.ended - started < PROMPT, "took {:?}", f.ended - started);
    assert!(f.stderr.contains("PE 2 ") && f.stderr.contains("code 5"), "{}", f.stderr);
    assert!(f.stderr.contains("not started"), "{}", f.stderr);
    // Every PE printed "up" first (unless the SIGTERM that ended the job came before): far fewer than NP
    // may have run. Without the check during start-up, all NP would run.
    let ran = f.stdout.lines().filter(|l| l.ends_with("] up")).count();
    assert!(ran < NP / 2, "{ran} of {NP} PEs were started\n{}", f.stderr);
    let left = sleeping_with(&mark);
    assert!(left.is_empty(), "PEs still running after rshmrun exited: {left:?}");
}

#[test]
fn np_above_the_pe_limit_is_refused_at_once() {
    let job = Running::start(&["-np", "600", "sh", "-c", "echo started"]);
    let started = job.started;
    let f = job.finish(JOB_LIMIT);
    assert!(f.ended - started < Duration::from_millis(500), "took {:?}", f.ended - started);
    assert_eq!(f.status.code(), Some(2), "{}", f.stderr);
    assert!(f.stderr.contains("-np 600") && f.stderr.contains("512"), "{}", f.stderr);
    assert!(f.stderr.contains("--no-pe-limit"), "{}", f.stderr);
    assert!(f.stdout.is_empty(), "PEs were started: {}", f.stdout);
}

#[test]
fn many_short_lived_pes_keep_threads_and_zombies_bounded() {
    const NP: usize = 2000;
    let mut job = Running::start(&["--no-pe-limit", "-np", &NP.to_string(), "sh", "-c", "echo up; sleep 0.2"]);
    let pid = job.pid();
    let (mut threads, mut zombies, mut samples) = (0, 0, 0);
    let deadline = Instant::now() + JOB_LIMIT;
    while job.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "rshmrun still running after {JOB_LIMIT:?}");
        if let Some(t) = proc_status_field(pid, "Threads") {
            threads = threads.max(t);
            samples += 1;
        }
        if samples % 10 == 0 {
            zombies = zombies.max(zombie_children(pid));
        }
        sleep(Duration::from_millis(10));
    }
    let f = job.finish(JOB_LIMIT);
    assert!(f.status.success(), "{}", f.stderr);
    assert_eq!(f.stdout.lines().filter(|l| l.ends_with("] up")).count(), NP);
    assert!(samples >= 10, "only {samples} samples of rshmrun's threads");
    // The main thread and the output thread.
    assert!(threads <= 2, "rshmrun ran {threads} threads");
    // PEs are reaped as they end, during start-up too. A loaded machine may deschedule rshmrun for a while,
    // so a few dozen may wait at once; without reaping during start-up, most of the 2000 would.
    assert!(zombies < NP / 10, "{zombies} PEs were left unreaped at once");
}

#[test]
fn timeout_names_the_pes_still_running() {
    let mark = marked_sleep(27);
    let _cleanup = KillMarked(mark.clone());
    let script = format!(r#"if [ "$RSHMEM_PE" = 1 ]; then exec sleep {mark}; fi"#);
    let f = run(&["--timeout", "1", "-np", "3", "sh", "-c", &script]);
    assert_eq!(f.status.code(), Some(124), "{}", f.stderr);
    assert!(f.stderr.contains("--timeout of 1 s with PE 1 still running"), "{}", f.stderr);
}

#[test]
fn open_file_limit_is_checked_before_starting() {
    // Runs rshmrun ARGS under the shell's `ulimit` command LIMIT.
    let limited = |limit: &str, args: &[&str]| {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("{limit} && exec \"$0\" \"$@\"")).arg(RSHMRUN).args(args);
        cmd.stdin(Stdio::null());
        let out = cmd.output().expect("run sh");
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (out.status, text(&out.stdout), text(&out.stderr))
    };
    // A hard limit of 100 open files cannot hold the pipes of 100 PEs: refused, nothing started.
    let (status, stdout, stderr) = limited("ulimit -n 100", &["-np", "100", "sh", "-c", "echo up"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("open files") && stderr.contains("100 (ulimit -Hn)"), "{stderr}");
    assert!(stdout.is_empty(), "PEs were started: {stdout}");

    // With --no-pe-limit the same job runs, starting PEs as earlier ones end (they live long enough for
    // the pipes of the running ones to fill the budget).
    let (status, stdout, stderr) =
        limited("ulimit -n 100", &["--no-pe-limit", "-np", "100", "sh", "-c", "echo up; sleep 0.1"]);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout.lines().filter(|l| l.ends_with("] up")).count(), 100, "{stderr}");
    assert!(stderr.contains("as earlier ones end"), "{stderr}");

    // A low soft limit under a high hard one is raised for rshmrun, and set back for the PEs.
    let (status, stdout, stderr) = limited("ulimit -S -n 100", &["-np", "100", "sh", "-c", "ulimit -n"]);
    assert!(status.success(), "{stderr}");
    let lines = sorted_lines(&stdout);
    assert_eq!(lines.len(), 100, "{stdout}\n{stderr}");
    assert!(lines.iter().all(|l| l.ends_with("] 100")), "{stdout}");
}

#[test]
fn status_board_descriptor_is_inherited_or_unset() {
    // rshmrun sets RSHMEM_STATUS_FD only when it made a board, and then the descriptor is open in every
    // PE; a value in rshmrun's own environment never reaches the PEs.
    let script = r#"fd=${RSHMEM_STATUS_FD-none}
        if [ "$fd" = none ]; then echo none
        else readlink "/proc/$$/fd/$fd" >/dev/null && echo "open $fd" || echo "closed $fd"; fi"#;
    let job = Running::start_env(&["-np", "3", "sh", "-c", script], &[("RSHMEM_STATUS_FD", Path::new("987"))]);
    let f = job.finish(JOB_LIMIT);
    assert!(f.status.success(), "{}", f.stderr);
    assert_eq!(f.stdout.lines().count(), 3, "{}", f.stdout);
    let lines: Vec<&str> = sorted_lines(&f.stdout).into_iter().map(|l| l.split_once("] ").unwrap().1).collect();
    assert!(lines.iter().all(|l| *l == lines[0]), "PEs disagree: {lines:?}");
    assert!(lines[0] == "none" || (lines[0].starts_with("open ") && lines[0] != "open 987"), "{lines:?}");
}

#[test]
fn sigterm_ends_the_job_when_nobody_reads_its_output() {
    // rshmrun's stdout is a pipe nobody reads: once it is full, the output thread blocks writing to it.
    // rshmrun must still act on SIGTERM (its own message must not wait behind that write) and end.
    let mut child = Command::new(RSHMRUN)
        .args(["-np", "2", "sh", "-c", "echo ready >&2; exec yes 'a line of output'"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rshmrun");
    let _unread = child.stdout.take();
    let err = Arc::new(Mutex::new(Vec::new()));
    let reader = collect(child.stderr.take().unwrap(), Arc::clone(&err));
    sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "rshmrun ended early");
    send_signal(child.id(), "TERM");
    let signalled = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if signalled.elapsed() > PROMPT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rshmrun still running {PROMPT:?} after SIGTERM: {}", String::from_utf8_lossy(&err.lock().unwrap()));
        }
        sleep(Duration::from_millis(10));
    };
    reader.join().unwrap();
    let stderr = String::from_utf8_lossy(&err.lock().unwrap()).into_owned();
    assert_eq!(status.code(), Some(128 + 15), "{stderr}");
    assert!(stderr.contains("received SIGTERM"), "{stderr}");
}

#[test]
fn a_negative_number_of_pes_is_named() {
    for args in [&["-np", "-1", "true"][..], &["-np=-1", "true"], &["-n", "-1", "true"]] {
        let f = run(args);
        assert_eq!(f.status.code(), Some(2), "{args:?}: {}", f.stderr);
        assert!(f.stderr.contains("-1 is negative: -np (the number of PEs) takes a whole number of at least 1"), "{args:?}: {}", f.stderr);
        assert!(!f.stderr.contains("unexpected argument"), "{args:?}: {}", f.stderr);
    }
}

#[test]
fn a_script_whose_interpreter_is_missing_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Scratch::new("interp");
    let script = dir.0.join("x.sh");
    fs::write(&script, "#!/no/such/sh -e\necho hi\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let f = run(&["-np", "2", script.to_str().unwrap()]);
    assert_eq!(f.status.code(), Some(127), "{}", f.stderr);
    assert!(
        f.stderr.contains(&format!("cannot run '{}' for PE 0: its interpreter /no/such/sh does not exist", script.display())),
        "{}",
        f.stderr
    );
    assert!(!f.stderr.contains("No such file"), "{}", f.stderr);
}

/// `bytes` repeated to `len` bytes, in a file of `dir`.
fn pattern_file(dir: &Scratch, name: &str, bytes: [u8; 8], len: usize) -> PathBuf {
    let p = dir.0.join(name);
    fs::write(&p, bytes.iter().copied().cycle().take(len).collect::<Vec<u8>>()).unwrap();
    p
}

/// A PE that writes over the job status board (as a stray pointer could) is not believed: rshmrun says
/// the board is corrupt instead of acting on a global-exit request no PE made, or quoting garbage as
/// what the PEs wait for.
#[test]
fn a_scribbled_status_board_is_called_corrupt() {
    let dir = Scratch::new("board");
    // The whole board of 2 PEs (64 + 2 x 128 bytes) holding the word that read as "PE 215850783 called
    // nvshmem_global_exit(-1618508988)" where the global-exit word lies.
    let word = (1u64 << 63) | (215_850_783u64 << 32) | (-1_618_508_988i32 as u32 as u64);
    let all = pattern_file(&dir, "all", word.to_le_bytes(), 320);
    let scribble = r#"[ -n "$RSHMEM_STATUS_FD" ] || { echo "no board"; exit 9; }
        if [ "$RSHMEM_PE" = 0 ]; then dd if="$0" of=/proc/self/fd/$RSHMEM_STATUS_FD bs=64 seek="$1" conv=notrunc status=none || exit 8; fi
        sleep "$2""#;
    let f = run(&["-np", "2", "sh", "-c", scribble, all.to_str().unwrap(), "0", "2"]);
    assert_eq!(f.status.code(), Some(0), "{}{}", f.stdout, f.stderr);
    assert!(f.stderr.contains("rshmrun: the job status board is corrupt (its header was overwritten"), "{}", f.stderr);
    assert!(!f.stderr.contains("nvshmem_global_exit("), "{}", f.stderr);

    // Only the records (after the 64-byte header): on --timeout no stall is described from them.
    let records = pattern_file(&dir, "records", 0xfedc_ba98_7654_3210u64.to_le_bytes(), 256);
    let job = Running::start(&["-np", "2", "--timeout", "2", "sh", "-c", scribble, records.to_str().unwrap(), "1", "30"]);
    let f = job.finish(JOB_LIMIT);
    assert_eq!(f.status.code(), Some(124), "{}{}", f.stdout, f.stderr);
    assert!(
        f.stderr.contains("rshmrun: the job status board is corrupt (PE 0's record: its in-a-collective flag is 0xfedcba9876543210): it cannot say what the PEs wait for"),
        "{}",
        f.stderr
    );
    assert!(!f.stderr.contains("stalled:"), "{}", f.stderr);
}
