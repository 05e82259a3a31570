//! Starting the PEs of a job and watching them until it ends.
//!
//! The main thread spawns the PEs (each in its own process group), then polls every [`POLL`] with
//! `waitpid(-1, WNOHANG)`, pending signals and the deadlines below. The first PE that fails makes rshmrun
//! send SIGTERM to every PE's process group, then SIGKILL [`GRACE`] later to what is left.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use rshmem::env;

use crate::output::{say, Readers, Sink};
use crate::signals;

/// How often the wait loop looks at the PEs, signals and deadlines.
const POLL: Duration = Duration::from_millis(10);
/// Time between SIGTERM (or a forwarded SIGINT) and SIGKILL.
const GRACE: Duration = Duration::from_secs(2);
/// Time after SIGKILL after which rshmrun stops waiting for a PE (stuck in the kernel, e.g. a GPU driver).
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Time that output pipes may stay open, with nothing flowing, after every PE is gone and their process
/// groups are empty; then they must be held by processes that left the groups, and rshmrun stops waiting.
const DRAIN_IDLE: Duration = Duration::from_secs(1);
/// Exit status after `--timeout`, as timeout(1).
const TIMEOUT_EXIT: i32 = 124;

/// What to run.
pub struct JobSpec {
    pub np: u32,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub tag: bool,
    pub timeout: Option<Duration>,
}

/// Runs the job to its end and returns rshmrun's exit status.
pub fn run(spec: &JobSpec) -> i32 {
    let key = match job_key() {
        Ok(k) => k,
        Err(e) => {
            say(format!("cannot read /dev/urandom for the job key: {e}"));
            return 1;
        }
    };
    let listener = match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))) {
        Ok(l) => l,
        Err(e) => {
            say(format!("cannot open the bootstrap listener on 127.0.0.1: {e}"));
            return 1;
        }
    };
    let bootstrap = match listener.local_addr() {
        Ok(a) => a.to_string(),
        Err(e) => {
            say(format!("cannot read the address of the bootstrap listener: {e}"));
            return 1;
        }
    };
    if let Err(e) = signals::install() {
        say(format!("cannot install signal handlers: {e}"));
        return 1;
    }
    become_subreaper();

    let mut job = Job::default();
    let mut readers = Readers::default();
    let started = Instant::now();
    for pe in 0..spec.np {
        let listen_fd = (pe == 0).then(|| listener.as_raw_fd());
        if let Err((e, code)) = start_pe(spec, pe, &bootstrap, &key, listen_fd, &mut job, &mut readers) {
            say(e);
            if job.pes.is_empty() {
                return code;
            }
            job.startup_failure = Some(code);
            job.begin_termination();
            break;
        }
    }
    job.watch(spec.timeout.map(|t| (t, started)));
    job.finish(readers);
    // rshmrun keeps the listener open (never accepting on it) until the job is over; PE 0 has its own copy.
    drop(listener);
    job.exit_code()
}

/// Makes processes that the PEs leave behind (orphans) rshmrun's children instead of init's, so that
/// rshmrun reaps them as soon as they die: a process group holding only zombies then disappears at once,
/// which [`Job::finish`] relies on (an init that reaps lazily would otherwise keep them visible for a
/// while). Best effort: without it rshmrun still works, only slower to see the groups empty.
fn become_subreaper() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes a flag and no pointers; it only changes who reaps orphans.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// 16 random bytes as 32 lowercase hex digits.
fn job_key() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Starts PE `pe` and the threads that forward its output. On failure returns the message and the exit
/// status rshmrun should end with (127: not found, 126: not executable, 1: anything else).
fn start_pe(
    spec: &JobSpec,
    pe: u32,
    bootstrap: &str,
    key: &str,
    listen_fd: Option<RawFd>,
    job: &mut Job,
    readers: &mut Readers,
) -> Result<(), (String, i32)> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env(env::PE, pe.to_string())
        .env(env::NPES, spec.np.to_string())
        .env(env::LOCAL_PE, pe.to_string())
        .env(env::LOCAL_NPES, spec.np.to_string())
        .env(env::BOOTSTRAP, bootstrap)
        .env(env::JOB_KEY, key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // The child keeps descriptor numbers across fork and exec, so PE 0 finds the listener under rshmrun's
    // number. That number is above 2 (Rust's runtime opens /dev/null on a closed stdin, stdout or stderr
    // at startup), so the child's stdio setup cannot overwrite it.
    match listen_fd {
        Some(fd) => cmd.env(env::BOOTSTRAP_FD, fd.to_string()),
        None => cmd.env_remove(env::BOOTSTRAP_FD),
    };
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-safe system
    // calls (prctl, getppid, fcntl) on values copied into it; it allocates nothing and takes no locks.
    unsafe { cmd.pre_exec(move || child_setup(parent, listen_fd)) };

    let program = spec.program.to_string_lossy();
    let mut child = cmd.spawn().map_err(|e| {
        let code = match e.kind() {
            io::ErrorKind::NotFound => 127,
            io::ErrorKind::PermissionDenied => 126,
            _ => 1,
        };
        let hint = if e.kind() == io::ErrorKind::NotFound && !program.contains('/') { " (searched PATH)" } else { "" };
        (format!("cannot run '{program}' for PE {pe}: {e}{hint}"), code)
    })?;
    let pid = child.id() as libc::pid_t;
    job.add(pid);

    let prefix = if spec.tag { format!("[pe {pe}] ") } else { String::new() };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        unreachable!("stdout and stderr of the PEs are piped");
    };
    // `child` is dropped here without waiting: the wait loop reaps the PEs itself with waitpid(-1).
    readers
        .spawn(stdout, prefix.clone(), format!("PE {pe} stdout"), Sink::Stdout)
        .and_then(|()| readers.spawn(stderr, prefix, format!("PE {pe} stderr"), Sink::Stderr))
        .map_err(|e| (format!("cannot start the output thread for PE {pe}: {e}"), 1))
}

/// Runs in the child between fork and exec: asks for SIGTERM when rshmrun dies, and lets the listening
/// socket of PE 0 survive exec.
fn child_setup(parent: libc::pid_t, listen_fd: Option<RawFd>) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_PDEATHSIG takes a signal number and no pointers.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: getppid has no preconditions. If rshmrun already died before the prctl above, the
        // death signal will never come: do not start a PE nobody watches.
        if unsafe { libc::getppid() } != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
    if let Some(fd) = listen_fd {
        // SAFETY: `fd` is the listener rshmrun holds open, inherited by this child. Clearing FD_CLOEXEC
        // changes only this child's descriptor table, not rshmrun's.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One PE: its pid, which is also its process group id.
struct Pe {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
}

/// The PEs and the state of the wait loop.
#[derive(Default)]
struct Job {
    pes: Vec<Pe>,
    by_pid: HashMap<libc::pid_t, usize>,
    running: usize,
    /// The first PE failure, unless rshmrun was already ending the job: (PE, status).
    first_failure: Option<(usize, ExitStatus)>,
    /// Exit status when not every PE could be started.
    startup_failure: Option<i32>,
    /// rshmrun sent SIGTERM to end the job (a PE failed, --timeout, or startup failed).
    terminating: bool,
    /// A signal rshmrun received and forwarded.
    interrupted: Option<libc::c_int>,
    timed_out: bool,
    /// When to send SIGKILL to the PEs still running.
    kill_at: Option<Instant>,
    /// When SIGKILL was sent.
    killed_at: Option<Instant>,
    /// The last signal sent to all PEs, for messages.
    last_sent: Option<libc::c_int>,
}

impl Job {
    fn add(&mut self, pid: libc::pid_t) {
        self.by_pid.insert(pid, self.pes.len());
        self.pes.push(Pe { pid, status: None });
        self.running += 1;
    }

    /// Waits until every PE exited (or, after SIGKILL, until [`KILL_WAIT`] passed).
    fn watch(&mut self, timeout: Option<(Duration, Instant)>) {
        loop {
            self.reap();
            if self.running == 0 {
                return;
            }
            for sig in signals::take_pending() {
                self.on_signal(sig);
            }
            let now = Instant::now();
            if let Some((limit, started)) = timeout {
                if !self.timed_out && !self.terminating && now.duration_since(started) >= limit {
                    say(format!("job exceeded --timeout of {} s; terminating all PEs", limit.as_secs()));
                    self.timed_out = true;
                    self.begin_termination();
                }
            }
            if self.killed_at.is_none() && self.kill_at.is_some_and(|at| now >= at) {
                say(format!(
                    "{} still running {} s after {}; sending SIGKILL",
                    pe_list(&self.running_pes()),
                    GRACE.as_secs(),
                    signals::name(self.last_sent.unwrap_or(libc::SIGTERM))
                ));
                self.kill_now();
            }
            if self.killed_at.is_some_and(|at| now.duration_since(at) >= KILL_WAIT) {
                for i in self.running_pes() {
                    say(format!("PE {i} (pid {}) did not exit after SIGKILL; not waiting for it", self.pes[i].pid));
                }
                return;
            }
            sleep(POLL);
        }
    }

    /// Collects every PE that exited since the last call.
    fn reap(&mut self) {
        loop {
            let mut status: libc::c_int = 0;
            // SAFETY: `status` is a valid place for the kernel to write to; WNOHANG makes the call return at
            // once. rshmrun's only children are the PEs and their orphans, so it reaps nothing that other
            // code waits for.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return; // 0: none exited since; -1: no children left (ECHILD) or interrupted (retried next poll)
            }
            // Pids that are not PEs are orphans left by the PEs (see `become_subreaper`): just reaped.
            if let Some(&i) = self.by_pid.get(&pid) {
                self.on_exit(i, ExitStatus::from_raw(status));
            }
        }
    }

    fn on_exit(&mut self, i: usize, status: ExitStatus) {
        if self.pes[i].status.is_some() {
            return;
        }
        self.pes[i].status = Some(status);
        self.running -= 1;
        if status.success() || self.terminating || self.killed_at.is_some() || self.first_failure.is_some() {
            return;
        }
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(sig)) => {
                let core = if status.core_dumped() { " (core dumped)" } else { "" };
                format!("was killed by signal {}{core}", signals::name(sig))
            }
            (None, None) => format!("ended with {status}"),
        };
        let rest = if self.running > 0 { "; terminating the other PEs" } else { "" };
        say(format!("PE {i} (pid {}) {how}{rest}", self.pes[i].pid));
        self.first_failure = Some((i, status));
        self.begin_termination();
    }

    fn on_signal(&mut self, sig: libc::c_int) {
        if self.killed_at.is_some() {
            return;
        }
        if self.interrupted.is_some() || self.terminating {
            say(format!("received {} while ending the job; killing all PEs", signals::name(sig)));
            self.kill_now();
            return;
        }
        let forward = if sig == libc::SIGHUP { libc::SIGTERM } else { sig };
        say(format!("received {}; forwarding {} to all PEs", signals::name(sig), signals::name(forward)));
        self.interrupted = Some(sig);
        self.signal_groups(forward);
        self.kill_at = Some(Instant::now() + GRACE);
    }

    /// Sends SIGTERM to every PE and schedules SIGKILL.
    fn begin_termination(&mut self) {
        if self.terminating {
            return;
        }
        self.terminating = true;
        self.signal_groups(libc::SIGTERM);
        let at = Instant::now() + GRACE;
        self.kill_at = Some(self.kill_at.map_or(at, |k| k.min(at)));
    }

    fn kill_now(&mut self) {
        self.signal_groups(libc::SIGKILL);
        self.killed_at = Some(Instant::now());
    }

    /// Sends `sig` to the process group of every PE, the exited ones included: processes they started may
    /// still be running in it.
    fn signal_groups(&mut self, sig: libc::c_int) {
        self.last_sent = Some(sig);
        for pe in &self.pes {
            // SAFETY: kill has no memory-safety preconditions. `-pid` names the PE's process group
            // (process_group(0) made the PE its leader); an id that names no group gives ESRCH.
            unsafe { libc::kill(-pe.pid, sig) };
        }
    }

    /// PEs whose process group still has members.
    fn live_groups(&self) -> Vec<usize> {
        (0..self.pes.len())
            .filter(|&i| {
                // SAFETY: signal 0 only checks that the group exists and may be signalled.
                unsafe { libc::kill(-self.pes[i].pid, 0) == 0 }
            })
            .collect()
    }

    fn running_pes(&self) -> Vec<usize> {
        (0..self.pes.len()).filter(|&i| self.pes[i].status.is_none()).collect()
    }

    /// After the PEs are gone: ends processes they left behind in their process groups, then waits for
    /// the output threads to forward everything.
    fn finish(&mut self, readers: Readers) {
        // A process that was just killed stays visible (as a zombie) until it is reaped.
        let settle = Instant::now() + Duration::from_millis(100);
        let mut left = self.live_groups();
        while !left.is_empty() && Instant::now() < settle {
            sleep(POLL);
            self.reap();
            left = self.live_groups();
        }
        if !left.is_empty() {
            if !self.terminating && self.interrupted.is_none() {
                say(format!(
                    "{} exited but left processes running in {}; terminating them",
                    pe_list(&left),
                    if left.len() == 1 { "its process group" } else { "their process groups" }
                ));
            }
            self.signal_groups(libc::SIGTERM);
            let kill_at = Instant::now() + GRACE;
            while !self.live_groups().is_empty() && Instant::now() < kill_at {
                sleep(POLL);
                self.reap();
            }
            self.signal_groups(libc::SIGKILL);
        }

        let mut last_activity = readers.activity();
        let mut quiet_since = Instant::now();
        while !readers.all_done() {
            if !signals::take_pending().is_empty() {
                say("received a signal; not waiting for the rest of the PEs' output");
                return;
            }
            let activity = readers.activity();
            if activity != last_activity || readers.any_busy() {
                last_activity = activity;
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() >= DRAIN_IDLE {
                say(format!(
                    "{} still open, held by processes outside the PEs' process groups; not waiting for them",
                    readers.pending().join(", ")
                ));
                return;
            }
            sleep(POLL);
            self.reap();
        }
        readers.join();
    }

    fn exit_code(&self) -> i32 {
        if self.timed_out {
            return TIMEOUT_EXIT;
        }
        if let Some((_, status)) = self.first_failure {
            return match (status.code(), status.signal()) {
                (Some(code), _) => code,
                (None, Some(sig)) => 128 + sig,
                (None, None) => 1,
            };
        }
        if let Some(code) = self.startup_failure {
            return code;
        }
        if let Some(sig) = self.interrupted {
            return 128 + sig;
        }
        if self.killed_at.is_some() {
            return 1;
        }
        0
    }
}

/// "PE 3" or "PEs 0, 1, 2" (at most 8 listed).
fn pe_list(pes: &[usize]) -> String {
    const SHOWN: usize = 8;
    let mut s = if pes.len() == 1 { "PE ".to_string() } else { "PEs ".to_string() };
    s.push_str(&pes.iter().take(SHOWN).map(|p| p.to_string()).collect::<Vec<_>>().join(", "));
    if pes.len() > SHOWN {
        s.push_str(&format!(" and {} more", pes.len() - SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_32_lowercase_hex() {
        let k = job_key().unwrap();
        assert_eq!(k.len(), 32);
        assert!(k.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_ne!(k, job_key().unwrap());
    }

    #[test]
    fn pe_lists() {
        assert_eq!(pe_list(&[3]), "PE 3");
        assert_eq!(pe_list(&[0, 2]), "PEs 0, 2");
        assert_eq!(pe_list(&(0..10).collect::<Vec<_>>()), "PEs 0, 1, 2, 3, 4, 5, 6, 7 and 2 more");
    }

    #[test]
    fn exit_codes() {
        let mut job = Job::default();
        assert_eq!(job.exit_code(), 0);
        job.interrupted = Some(libc::SIGINT);
        assert_eq!(job.exit_code(), 130);
        job.first_failure = Some((1, ExitStatus::from_raw(3 << 8)));
        assert_eq!(job.exit_code(), 3);
        job.first_failure = Some((1, ExitStatus::from_raw(libc::SIGKILL)));
        assert_eq!(job.exit_code(), 137);
        job.timed_out = true;
        assert_eq!(job.exit_code(), 124);
    }
}
