//! Starting the PEs of a job and watching them until it ends.
//!
//! The main thread starts the PEs one after the other (each in its own process group). Before each one
//! it reaps PEs that exited, takes pending signals and checks the deadlines, so a signal, a failed PE or
//! `--timeout` during start-up stops it at once. Then it waits, woken by SIGCHLD and the caught signals
//! (see `signals::wait`) or by the next deadline. The first PE that fails makes rshmrun send SIGTERM to
//! every PE's process group, then SIGKILL [`GRACE`] later to what is left. One more thread forwards the
//! output of all PEs (`output::Forwarder`): rshmrun runs two threads whatever the number of PEs.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rshmem::bootstrap::pe_list;
use rshmem::config::env;
use rshmem::node::jobstatus::JobStatus;

use crate::child::ChildSetup;
use crate::netns::{self, SimNet};
use crate::output::{say, Forwarder, Sink};
use crate::signals;

/// Longest sleep of the loops that also watch the output (start-up waiting for open files, the drain at
/// the end); they wake earlier on a signal (SIGCHLD included).
const POLL: Duration = Duration::from_millis(10);
/// Longest sleep of the wait loop while the PEs run: it wakes on every signal (SIGCHLD included: a PE or
/// an orphan ended) and at the next deadline, so this only bounds the effect of a lost wake-up.
const IDLE: Duration = Duration::from_millis(100);
/// Time between SIGTERM (or a forwarded SIGINT) and SIGKILL.
const GRACE: Duration = Duration::from_secs(2);
/// Time after SIGKILL after which rshmrun stops waiting for a PE (stuck in the kernel, e.g. a GPU driver).
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Time that output pipes may stay open, with nothing flowing, after every PE is gone and their process
/// groups are empty; then they must be held by processes that left the groups, and rshmrun stops waiting.
const DRAIN_IDLE: Duration = Duration::from_secs(1);
/// Exit status after `--timeout`, as timeout(1).
const TIMEOUT_EXIT: i32 = 124;
/// With `--pmi`: how long after a PE's PMI connection closed before finalize rshmrun waits to see the
/// PE exit (then it says "exited with status N"; else "closed its PMI connection"), and how long after a
/// PE that spoke PMI exited it waits for the server to read the rest of what the PE sent (a finalize).
const PMI_EOF_WAIT: Duration = Duration::from_millis(250);
/// Open files rshmrun needs besides the two pipes per PE: stdio, the listener, the status board, the
/// epoll instance and wake-up pipes, and the pipes of the PE being started.
const FD_RESERVE: u64 = 64;

/// What to run.
pub struct JobSpec {
    pub np: u32,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub tag: bool,
    pub timeout: Option<Duration>,
    /// `--no-pe-limit`: the program is not an rshmem program, its PEs need not all run at once.
    pub no_pe_limit: bool,
    /// `--nodes K`: the PEs are split into K simulated nodes (checked by the command line: 1..=np).
    pub nodes: Option<u32>,
    /// `--netns`: each node in its own network namespace.
    pub netns: bool,
    /// `--pmi`: serve PMI-1 to the PEs (`crate::pmi`).
    pub pmi: bool,
    /// Set `CUDA_DEVICE_MAX_CONNECTIONS` (`crate::cli::CUDA_CONNECTIONS`) in each PE's environment:
    /// rshmrun's own environment does not set it.
    pub cuda_connections: bool,
    /// `--bind-to`.
    pub bind_to: crate::bind::BindTo,
}

/// Runs the job to its end and returns rshmrun's exit status.
pub fn run(spec: &JobSpec) -> i32 {
    let started = Instant::now();
    // Before anything else: a job that cannot fit is refused before any PE exists.
    let fds = match fd_budget(spec.np, spec.no_pe_limit) {
        Ok(f) => f,
        Err(e) => {
            say(e);
            return 1;
        }
    };
    let key = match job_key() {
        Ok(k) => k,
        Err(e) => {
            say(format!("cannot read /dev/urandom for the job key: {e}"));
            return 1;
        }
    };
    let nodes = spec.nodes.unwrap_or(1);
    // The simulated network, before any PE exists; it lives until the end of this function (the
    // namespaces then vanish with the last PE: nothing to clean up on any exit path).
    let net = if spec.netns {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            say("--netns needs root (it creates network namespaces and links: CAP_SYS_ADMIN and CAP_NET_ADMIN); \
                 run rshmrun as root, or leave out --netns (--nodes alone needs no privileges); nothing was started");
            return 1;
        }
        let t = Instant::now();
        match SimNet::new(nodes as usize) {
            Ok(net) => {
                rshmem::log::debug(format!(
                    "rshmrun: {nodes} simulated node namespaces and their bridge set up in {:.1} ms",
                    t.elapsed().as_secs_f64() * 1e3
                ));
                Some(net)
            }
            Err(e) => {
                say(format!("cannot set up the simulated nodes of --netns: {e}; nothing was started"));
                return 1;
            }
        }
    } else {
        None
    };
    let bind_addr = net.as_ref().map_or(Ipv4Addr::LOCALHOST, |n| n.nodes[0].addr);
    let bound = match &net {
        // Inside node 0's namespace, on node 0's address: PE 0 accepts there, the PEs of other nodes
        // reach it over the bridge.
        Some(n) => netns::in_netns(n.nodes[0].ns(), || TcpListener::bind(SocketAddr::from((bind_addr, 0)))),
        None => TcpListener::bind(SocketAddr::from((bind_addr, 0))),
    };
    let listener = match bound {
        Ok(l) => l,
        Err(e) => {
            say(format!("cannot open the bootstrap listener on {bind_addr}: {e}"));
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
    let (board, board_fd) = match JobStatus::create(spec.np as usize) {
        Ok((board, fd)) => (Some(board), Some(fd)),
        Err(e) => {
            rshmem::log::debug(format!("rshmrun: no job status board ({e}); a stalled job is not described"));
            (None, None)
        }
    };
    let mut output = match Forwarder::start() {
        Ok(f) => f,
        Err(e) => {
            say(format!("cannot start the output thread: {e}"));
            return 1;
        }
    };

    let cpus = match spec.bind_to {
        crate::bind::BindTo::None => Vec::new(),
        crate::bind::BindTo::Core => match crate::bind::allowed_cpus() {
            Ok(allowed) => {
                let shares = crate::bind::shares(&allowed, spec.np as usize);
                rshmem::log::debug(format!(
                    "rshmrun: --bind-to core: {}",
                    shares.iter().enumerate().map(|(pe, s)| format!("PE {pe} on CPUs {}", crate::bind::list(s))).collect::<Vec<_>>().join(", ")
                ));
                shares.iter().map(|s| crate::bind::cpu_set(s)).collect()
            }
            Err(e) => {
                say(format!("--bind-to core: cannot read the CPUs rshmrun may use (sched_getaffinity): {e}; nothing was started"));
                return 1;
            }
        },
    };
    let mut pmi = if spec.pmi {
        match crate::pmi::Server::start(spec.np as usize, signals::wake) {
            Ok(s) => Some(s),
            Err(e) => {
                say(format!("cannot start the PMI server of --pmi: {e}; nothing was started"));
                return 1;
            }
        }
    } else {
        None
    };
    let launch = Launch {
        spec,
        bootstrap,
        key,
        listen_fd: listener.as_raw_fd(),
        status_fd: board_fd.as_ref().map(|fd| fd.as_raw_fd()),
        restore_nofile: fds.restore,
        nodes: spec.nodes,
        ns_fds: net.as_ref().map(|n| n.nodes.iter().map(|node| node.ns_fd()).collect()).unwrap_or_default(),
        pmi_fds: pmi.as_ref().map(|p| (0..spec.np as usize).filter_map(|pe| p.child_fd(pe)).collect()).unwrap_or_default(),
        cpus,
    };
    let mut job = Job { deadline: spec.timeout.map(|t| (t, started + t)), board, pmi: pmi.as_ref().map(|p| p.watch()), ..Job::default() };
    for pe in 0..spec.np {
        job.service();
        if output.open_pipes() as u64 + 2 > fds.pipes {
            job.wait_for_fds(&output, fds.pipes);
        }
        if job.ending() {
            let rest: Vec<usize> = (pe as usize..spec.np as usize).collect();
            say(format!("start-up stopped: {} not started", pe_list(&rest)));
            break;
        }
        let started = start_pe(&launch, pe, &mut job, &mut output);
        if let Some(p) = pmi.as_mut() {
            p.started(pe as usize);
        }
        if let Err((e, code)) = started {
            say(e);
            if job.pes.is_empty() {
                return code;
            }
            let rest: Vec<usize> = (pe as usize..spec.np as usize).collect();
            say(format!("start-up stopped: {} not started", pe_list(&rest)));
            job.startup_failure = Some(code);
            job.begin_termination();
            break;
        }
    }
    let took = started.elapsed();
    rshmem::log::debug(format!(
        "rshmrun: started {} of {} PEs in {:.3} s ({:.0} PEs/s)",
        job.pes.len(),
        spec.np,
        took.as_secs_f64(),
        job.pes.len() as f64 / took.as_secs_f64().max(1e-9)
    ));
    job.watch();
    job.finish(output);
    // rshmrun keeps the listener and the board open (never accepting on the listener) until the job is
    // over; the PEs have their own copies.
    drop(listener);
    drop(board_fd);
    drop(net);
    job.exit_code()
}

/// What the limit of open files allows.
struct FdBudget {
    /// The limit rshmrun was started with, to set back in the PEs, when rshmrun raised its own.
    restore: Option<libc::rlimit>,
    /// How many PE pipes rshmrun may hold open at once.
    pipes: u64,
}

/// Makes sure rshmrun may hold the two pipes (stdout, stderr) of every PE: raises the soft limit of open
/// files (RLIMIT_NOFILE) as far as needed and the hard limit allows. When even the hard limit is too low,
/// an rshmem job (`paced == false`: its PEs must all run at once) is refused, naming the limit; with
/// `--no-pe-limit` (`paced == true`) the job goes ahead, and start-up waits for earlier PEs' pipes to
/// close whenever the budget is used up.
fn fd_budget(np: u32, paced: bool) -> Result<FdBudget, String> {
    let needed = 2 * np as u64 + FD_RESERVE;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!("cannot read the limit of open files: {}", io::Error::last_os_error()));
    }
    let budget = |limit: libc::rlim_t| limit.saturating_sub(FD_RESERVE);
    if lim.rlim_cur == libc::RLIM_INFINITY || lim.rlim_cur >= needed {
        return Ok(FdBudget { restore: None, pipes: budget(lim.rlim_cur) });
    }
    let hard_too_low = lim.rlim_max != libc::RLIM_INFINITY && lim.rlim_max < needed;
    if hard_too_low && !paced {
        return Err(format!(
            "-np {np} needs {needed} open files (2 pipes per PE for its stdout and stderr, and {FD_RESERVE} \
             more), but the hard limit of open files is {} (ulimit -Hn); nothing was started. Start at most \
             {} PEs, or raise the limit (e.g. `ulimit -n {needed}` as root, or in /etc/security/limits.conf)",
            lim.rlim_max,
            budget(lim.rlim_max) / 2
        ));
    }
    let target = if hard_too_low { lim.rlim_max } else { needed };
    let raised = libc::rlimit { rlim_cur: target, rlim_max: lim.rlim_max };
    // SAFETY: `raised` is a valid rlimit that setrlimit only reads; a soft limit up to the hard one is
    // always allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        let e = io::Error::last_os_error();
        if paced {
            return Ok(FdBudget { restore: None, pipes: budget(lim.rlim_cur) });
        }
        return Err(format!(
            "-np {np} needs {needed} open files but the limit is {} and raising it failed: {e}; nothing was \
             started",
            lim.rlim_cur
        ));
    }
    Ok(FdBudget { restore: Some(lim), pipes: budget(target) })
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

/// What every PE of the job is started with.
struct Launch<'a> {
    spec: &'a JobSpec,
    bootstrap: String,
    key: String,
    /// The bootstrap listener, inherited by PE 0.
    listen_fd: RawFd,
    /// The job status board, inherited by every PE.
    status_fd: Option<RawFd>,
    /// Limit of open files to set back in the PEs (rshmrun raised its own).
    restore_nofile: Option<libc::rlimit>,
    /// `--nodes`.
    nodes: Option<u32>,
    /// With `--netns`: node k's network namespace, which its PEs enter before exec.
    ns_fds: Vec<RawFd>,
    /// With `--pmi`: PE k's end of its PMI socket pair.
    pmi_fds: Vec<RawFd>,
    /// With `--bind-to core`: PE k's CPUs.
    cpus: Vec<libc::cpu_set_t>,
}

/// Starts PE `pe` and hands its stdout and stderr to the forwarder. On failure returns the message and the
/// exit status rshmrun should end with (127: not found, 126: not executable, 1: anything else).
fn start_pe(launch: &Launch, pe: u32, job: &mut Job, output: &mut Forwarder) -> Result<(), (String, i32)> {
    let spec = launch.spec;
    let (node, local_pe, local_npes) = crate::split::block_of(pe, spec.np, launch.nodes.unwrap_or(1));
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env(env::PE, pe.to_string())
        .env(env::NPES, spec.np.to_string())
        .env(env::LOCAL_PE, local_pe.to_string())
        .env(env::LOCAL_NPES, local_npes.to_string())
        .env(env::BOOTSTRAP, &launch.bootstrap)
        .env(env::JOB_KEY, &launch.key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // The child keeps descriptor numbers across fork and exec, so PE 0 finds the listener (and every PE
    // the board) under rshmrun's number. Those numbers are above 2 (Rust's runtime opens /dev/null on a
    // closed stdin, stdout or stderr at startup), so the child's stdio setup cannot overwrite them.
    let listen_fd = (pe == 0).then_some(launch.listen_fd);
    match listen_fd {
        Some(fd) => cmd.env(env::BOOTSTRAP_FD, fd.to_string()),
        None => cmd.env_remove(env::BOOTSTRAP_FD),
    };
    match launch.status_fd {
        Some(fd) => cmd.env(env::STATUS_FD, fd.to_string()),
        None => cmd.env_remove(env::STATUS_FD),
    };
    let pmi_fd = launch.pmi_fds.get(pe as usize).copied();
    if let Some(fd) = pmi_fd {
        // PMI_PORT and PMI_ID would make a client connect elsewhere instead of using PMI_FD.
        cmd.env("PMI_FD", fd.to_string()).env("PMI_RANK", pe.to_string()).env("PMI_SIZE", spec.np.to_string()).env_remove("PMI_PORT").env_remove("PMI_ID");
    }
    if spec.cuda_connections {
        cmd.env(crate::cli::CUDA_CONNECTIONS.0, crate::cli::CUDA_CONNECTIONS.1);
    }
    // Without --nodes the variable is not set (the host decides, as ever), and one inherited from
    // rshmrun's own environment must not put every PE on one made-up node.
    match launch.nodes {
        Some(_) => cmd.env(env::NODE_ID, node.to_string()),
        None => cmd.env_remove(env::NODE_ID),
    };
    let setup = ChildSetup {
        parent: std::process::id() as libc::pid_t,
        keep_fds: [listen_fd, launch.status_fd, pmi_fd],
        nofile: launch.restore_nofile,
        netns: launch.ns_fds.get(node as usize).copied(),
        cpus: launch.cpus.get(pe as usize).copied(),
    };
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-safe system
    // calls (setns, prctl, getppid, fcntl, setrlimit, sched_setaffinity) on values copied into it; it allocates nothing and
    // takes no locks.
    unsafe { cmd.pre_exec(move || setup.run()) };

    let program = spec.program.to_string_lossy();
    let mut child = cmd.spawn().map_err(|e| {
        let code = match e.kind() {
            io::ErrorKind::NotFound => 127,
            io::ErrorKind::PermissionDenied => 126,
            _ => 1,
        };
        // ENOENT for a file that exists: what the kernel could not find is the file's interpreter.
        if e.kind() == io::ErrorKind::NotFound {
            if let Some(why) = missing_interpreter(&spec.program) {
                return (format!("cannot run '{program}' for PE {pe}: {why}"), code);
            }
        }
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
    output
        .add(OwnedFd::from(stdout), &prefix, format!("PE {pe} stdout"), Sink::Stdout)
        .and_then(|()| output.add(OwnedFd::from(stderr), &prefix, format!("PE {pe} stderr"), Sink::Stderr))
        .map_err(|e| (format!("cannot forward the output of PE {pe}: {e}"), 1))
}

/// The file `program` names, as exec finds it (through PATH when it has no `/`), if it exists.
fn program_file(program: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::path::{Path, PathBuf};
    if program.as_encoded_bytes().contains(&b'/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// Why exec of an existing `program` failed with "No such file or directory": the interpreter its
/// first line names (`#!/no/such/sh`), or the ELF program interpreter (dynamic loader) it asks for, does
/// not exist. None when the file does not exist (the plain error says it) or neither is the cause.
fn missing_interpreter(program: &std::ffi::OsStr) -> Option<String> {
    use std::io::{Seek, SeekFrom};
    use std::path::Path;
    let file = program_file(program)?;
    let mut f = File::open(&file).ok()?;
    let mut head = [0u8; 256];
    let n = f.read(&mut head).ok()?;
    let head = &head[..n];
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
        let line = String::from_utf8_lossy(line);
        let interp = line.split_whitespace().next()?;
        if Path::new(interp).exists() {
            return None;
        }
        return Some(format!("its interpreter {interp} does not exist (the script's first line is #!{})", line.trim_end()));
    }
    // A 64-bit little-endian ELF file: its PT_INTERP segment names the dynamic loader.
    if n < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]) as u64;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (u64_at(head, 0x20), u16_at(0x36), u16_at(0x38));
    if phentsize < 56 {
        return None;
    }
    for i in 0..phnum.min(64) {
        let mut ph = [0u8; 56];
        f.seek(SeekFrom::Start(phoff.checked_add(i * phentsize)?)).ok()?;
        f.read_exact(&mut ph).ok()?;
        if u32::from_le_bytes(ph[..4].try_into().unwrap()) != 3 {
            continue; // not PT_INTERP
        }
        let (off, size) = (u64_at(&ph, 8), u64_at(&ph, 32).min(4096));
        let mut name = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(off)).ok()?;
        f.read_exact(&mut name).ok()?;
        let name = String::from_utf8_lossy(&name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())]).into_owned();
        if Path::new(&name).exists() {
            return None;
        }
        return Some(format!("its ELF interpreter (dynamic loader) {name} does not exist on this machine (built for another system?)"));
    }
    None
}

/// One PE: its pid, which is also its process group id.
struct Pe {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
    /// Its process group was seen empty (the PE reaped and nothing left in the group): it is never
    /// signalled again, as its number may now belong to an unrelated process group.
    gone: bool,
}

/// The PEs and the state of the wait loop.
#[derive(Default)]
struct Job {
    pes: Vec<Pe>,
    by_pid: HashMap<libc::pid_t, usize>,
    running: usize,
    /// `--timeout` and the instant it expires.
    deadline: Option<(Duration, Instant)>,
    /// The job status board, to describe a stall on `--timeout`.
    board: Option<JobStatus>,
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
    /// Start-up had to wait for open files, and said so.
    fd_wait_said: bool,
    /// The job status board held what no PE writes, and rshmrun said so: it is not read again for
    /// global-exit requests.
    board_corrupt: bool,
    /// With `--pmi`: the PEs' PMI connections.
    pmi: Option<crate::pmi::Watch>,
    /// PEs that spoke PMI and exited before the server saw their connection through: (PE, status,
    /// when), decided in `check_pmi`.
    pmi_exits: Vec<(usize, ExitStatus, Instant)>,
}

/// How a PE left PMI without finalize.
enum PmiEnd {
    Exited(ExitStatus),
    Closed,
}

/// "exited with status 3", "was killed by signal SIGKILL (core dumped)".
fn describe_status(status: ExitStatus, word: &str) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with {word} {code}"),
        (None, Some(sig)) => {
            let core = if status.core_dumped() { " (core dumped)" } else { "" };
            format!("was killed by signal {}{core}", signals::name(sig))
        }
        (None, None) => format!("ended with {status}"),
    }
}

/// The exit status rshmrun ends with for a PE's abort or global exit with `code` (never 0 for a
/// nonzero code: `rshmem::node::jobstatus::exit_status_of`), and a line to say when it is not the code's
/// low 8 bits.
fn requested_status(code: i32, what: &str) -> (ExitStatus, Option<String>) {
    let status = rshmem::node::jobstatus::exit_status_of(code);
    let note = (status != code & 0xff).then(|| {
        format!("{what} {code}: an exit status keeps only the low 8 bits of {code}, which are 0 (success); rshmrun exits with {status} instead")
    });
    (ExitStatus::from_raw(status << 8), note)
}

impl Job {
    fn add(&mut self, pid: libc::pid_t) {
        // A pid can come back during a long start-up of short-lived PEs; the map then names the new PE.
        self.by_pid.insert(pid, self.pes.len());
        self.pes.push(Pe { pid, status: None, gone: false });
        self.running += 1;
    }

    /// True once the job is being ended (a PE failed, a signal, --timeout): start no more PEs.
    fn ending(&self) -> bool {
        self.terminating || self.interrupted.is_some() || self.killed_at.is_some()
    }

    /// One round of the wait loop, without blocking: reaps the PEs that exited, acts on pending signals,
    /// and on the timeout and SIGKILL deadlines.
    fn service(&mut self) {
        self.reap();
        for sig in signals::take_pending() {
            self.on_signal(sig);
        }
        if let Some((pe, code)) = crate::pmi::take_abort() {
            self.on_abort(pe, code);
        }
        if !self.board_corrupt {
            match self.board.as_ref().map(|b| b.exit_request()) {
                Some(Ok(Some((pe, code)))) => self.on_global_exit(pe, code),
                Some(Err(e)) => {
                    say(format!(
                        "the job status board is corrupt ({e}): a PE wrote over it; rshmrun ignores it from now on (no \
                         nvshmem_global_exit through it, no description of a stall)"
                    ));
                    self.board_corrupt = true;
                }
                _ => {}
            }
        }
        self.check_pmi();
        let now = Instant::now();
        if let Some((limit, at)) = self.deadline {
            if !self.timed_out && !self.ending() && now >= at {
                self.on_timeout(limit);
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
    }

    /// How long the wait loop may sleep: until the next deadline, at most [`IDLE`].
    fn sleep_time(&self) -> Duration {
        let now = Instant::now();
        let mut next = now + IDLE;
        if let Some((_, at)) = self.deadline.filter(|_| !self.timed_out && !self.ending()) {
            next = next.min(at);
        }
        if let Some(at) = self.kill_at.filter(|_| self.killed_at.is_none()) {
            next = next.min(at);
        }
        if let Some(at) = self.killed_at {
            next = next.min(at + KILL_WAIT);
        }
        if let (Some(w), false) = (&self.pmi, self.ending()) {
            for (_, _, at) in &self.pmi_exits {
                next = next.min(*at + PMI_EOF_WAIT);
            }
            for (_, at) in w.closed_unfinished() {
                next = next.min(at + PMI_EOF_WAIT);
            }
        }
        next.saturating_duration_since(now)
    }

    /// Waits until every PE exited (or, after SIGKILL, until [`KILL_WAIT`] passed).
    fn watch(&mut self) {
        loop {
            self.service();
            if self.running == 0 && self.pmi_exits.is_empty() {
                return;
            }
            if self.killed_at.is_some_and(|at| at.elapsed() >= KILL_WAIT) {
                for i in self.running_pes() {
                    say(format!("PE {i} (pid {}) did not exit after SIGKILL; not waiting for it", self.pes[i].pid));
                }
                return;
            }
            signals::wait(self.sleep_time());
        }
    }

    /// Start-up used up the open files rshmrun may hold (only with `--no-pe-limit`): waits, still
    /// reacting to signals, failures and deadlines, until earlier PEs' pipes closed.
    fn wait_for_fds(&mut self, output: &Forwarder, pipes: u64) {
        if !self.fd_wait_said {
            self.fd_wait_said = true;
            say(format!(
                "the limit of open files lets rshmrun hold the pipes of {} PEs at once; starting the next \
                 PEs as earlier ones end",
                pipes / 2
            ));
        }
        while output.open_pipes() as u64 + 2 > pipes {
            self.service();
            if self.ending() {
                return;
            }
            signals::wait(POLL);
        }
    }

    /// `--timeout` expired: says which PEs are still running and, from the status board, what they wait
    /// for, then ends the job.
    fn on_timeout(&mut self, limit: Duration) {
        let running = self.running_pes();
        let which = if running.is_empty() {
            String::new()
        } else {
            let pids: Vec<String> = running.iter().take(8).map(|&i| self.pes[i].pid.to_string()).collect();
            let more = if running.len() > 8 { ", ..." } else { "" };
            format!(" with {} still running (pid {}{more})", pe_list(&running), pids.join(", "))
        };
        say(format!("job exceeded --timeout of {} s{which}; terminating all PEs", limit.as_secs()));
        match self.board.as_ref().filter(|_| !self.board_corrupt).map(|b| b.stall_report()) {
            Some(Ok(Some(stall))) => {
                for line in stall.lines().filter(|l| !l.trim().is_empty()) {
                    say(format!("stalled: {line}"));
                }
            }
            Some(Err(e)) => say(format!("the job status board is corrupt ({e}): it cannot say what the PEs wait for")),
            _ => {}
        }
        self.timed_out = true;
        self.begin_termination();
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
                return; // 0: none exited since; -1: no children left (ECHILD) or interrupted (retried next round)
            }
            // Pids that are not PEs are orphans left by the PEs (see `become_subreaper`): just reaped.
            if let Some(i) = self.by_pid.remove(&pid) {
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
        // Most PEs leave nothing behind: note the empty group now, so that it is never signalled again.
        self.pes[i].gone = !group_alive(self.pes[i].pid);
        if self.ending() || self.first_failure.is_some() {
            return;
        }
        // A PE that spoke PMI: did it finalize? Decided once the server has read all it sent.
        if let Some(c) = self.pmi.as_ref().map(|w| w.conn(i)).filter(|c| c.unfinished()) {
            if c.closed.is_some() {
                self.pmi_failure(i, PmiEnd::Exited(status));
            } else {
                self.pmi_exits.push((i, status, Instant::now()));
            }
            return;
        }
        self.exit_failure(i, status);
    }

    /// PE `i` ended with `status` (its PMI, if any, finalized): a failure unless it exited 0.
    fn exit_failure(&mut self, i: usize, status: ExitStatus) {
        if status.success() {
            return;
        }
        let how = describe_status(status, "code");
        let rest = if self.running > 0 { "; terminating the other PEs" } else { "" };
        say(format!("PE {i} (pid {}) {how}{rest}", self.pes[i].pid));
        self.first_failure = Some((i, status));
        self.begin_termination();
    }

    /// PE `pe` asked for the job's end with status `code` (`--pmi`: PMI abort): as a PE failing with
    /// that exit code.
    fn on_abort(&mut self, pe: usize, code: i32) {
        if self.ending() || self.first_failure.is_some() {
            return;
        }
        let rest = if self.running > 1 { "; terminating the other PEs" } else { "" };
        say(format!("PE {pe} called PMI abort with exit code {code}{rest}"));
        let (status, note) = requested_status(code, "PMI abort with exit code");
        if let Some(note) = note {
            say(note);
        }
        self.first_failure = Some((pe, status));
        self.begin_termination();
    }

    /// With `--pmi`: ends the job when a PE that spoke PMI left it without finalize, exited or not.
    /// Decides the exits `on_exit` deferred (the server read everything the PE sent, or
    /// [`PMI_EOF_WAIT`] passed), and connections closed by PEs still running [`PMI_EOF_WAIT`] later.
    fn check_pmi(&mut self) {
        let Some(w) = self.pmi.clone() else { return };
        if self.ending() || self.first_failure.is_some() {
            self.pmi_exits.clear();
            return;
        }
        for (pe, status, at) in std::mem::take(&mut self.pmi_exits) {
            let c = w.conn(pe);
            if self.ending() || self.first_failure.is_some() {
                break;
            }
            if !c.unfinished() {
                self.exit_failure(pe, status);
            } else if c.closed.is_some() || at.elapsed() >= PMI_EOF_WAIT {
                self.pmi_failure(pe, PmiEnd::Exited(status));
            } else {
                self.pmi_exits.push((pe, status, at));
            }
        }
        if self.ending() || self.first_failure.is_some() {
            self.pmi_exits.clear();
            return;
        }
        for (pe, at) in w.closed_unfinished() {
            let running = self.pes.get(pe).is_some_and(|p| p.status.is_none());
            if running && at.elapsed() >= PMI_EOF_WAIT {
                self.pmi_failure(pe, PmiEnd::Closed);
                return;
            }
        }
    }

    /// PE `pe` left PMI without finalize: the job ends now, naming the PE and what it did; rshmrun exits
    /// with the PE's status, or 1 where that was 0 (or the PE still runs).
    fn pmi_failure(&mut self, pe: usize, end: PmiEnd) {
        let pid = self.pes[pe].pid;
        let (what, status) = match end {
            PmiEnd::Exited(s) => (
                format!("{} without PMI finalize (pid {pid})", describe_status(s, "status")),
                if s.success() { ExitStatus::from_raw(1 << 8) } else { s },
            ),
            PmiEnd::Closed => (format!("closed its PMI connection without finalize (pid {pid}, still running)"), ExitStatus::from_raw(1 << 8)),
        };
        let others = self.running_pes().into_iter().filter(|&p| p != pe).count();
        let rest = if others > 0 { "; terminating the other PEs" } else { "" };
        say(format!("PE {pe} {what}{rest}"));
        self.first_failure = Some((pe, status));
        self.begin_termination();
    }

    /// PE `pe` called `nvshmem_global_exit(code)` (the job status board): every PE ends, and rshmrun
    /// exits with `code`, 0 included.
    fn on_global_exit(&mut self, pe: usize, code: i32) {
        if self.ending() || self.first_failure.is_some() {
            return;
        }
        let rest = if self.running > 0 { "; ending every PE" } else { "" };
        say(format!("PE {pe} called nvshmem_global_exit({code}){rest}"));
        let (status, note) = requested_status(code, "nvshmem_global_exit with status");
        if let Some(note) = note {
            say(note);
        }
        self.first_failure = Some((pe, status));
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

    /// Sends `sig` to the process group of every PE, the exited ones included (processes they started may
    /// still be running in it), except groups already seen empty.
    fn signal_groups(&mut self, sig: libc::c_int) {
        self.last_sent = Some(sig);
        for pe in &mut self.pes {
            if pe.gone {
                continue;
            }
            // SAFETY: kill has no memory-safety preconditions. `-pid` names the PE's process group
            // (process_group(0) made the PE its leader); an id that names no group gives ESRCH.
            if unsafe { libc::kill(-pe.pid, sig) } != 0 && pe.status.is_some() {
                pe.gone = io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            }
        }
    }

    /// PEs whose process group still has members (notes the others as gone).
    fn live_groups(&mut self) -> Vec<usize> {
        let mut live = Vec::new();
        for (i, pe) in self.pes.iter_mut().enumerate() {
            if !pe.gone {
                if group_alive(pe.pid) {
                    live.push(i);
                } else if pe.status.is_some() {
                    pe.gone = true;
                }
            }
        }
        live
    }

    fn running_pes(&self) -> Vec<usize> {
        (0..self.pes.len()).filter(|&i| self.pes[i].status.is_none()).collect()
    }

    /// Sleeps at most [`POLL`] (less on a signal or an exiting child), then reaps.
    fn nap(&mut self) {
        signals::wait(POLL);
        self.reap();
    }

    /// After the PEs are gone: ends processes they left behind in their process groups, then waits for
    /// the forwarder to write everything they printed.
    fn finish(&mut self, output: Forwarder) {
        // A process that was just killed stays visible (as a zombie) until it is reaped.
        let settle = Instant::now() + Duration::from_millis(100);
        let mut left = self.live_groups();
        while !left.is_empty() && Instant::now() < settle {
            self.nap();
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
                self.nap();
            }
            self.signal_groups(libc::SIGKILL);
        }

        // After a signal to rshmrun or --timeout, a consumer of rshmrun's output that does not read (the
        // forwarder blocked writing) does not hold the job up either.
        let hard_end = self.interrupted.is_some() || self.timed_out;
        let mut last_activity = output.activity();
        let mut quiet_since = Instant::now();
        while !output.all_done() {
            if !signals::take_pending().is_empty() {
                say("received a signal; not waiting for the rest of the PEs' output");
                return;
            }
            let activity = output.activity();
            if activity != last_activity || (output.busy() && !hard_end) {
                last_activity = activity;
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() >= DRAIN_IDLE {
                if output.busy() {
                    say("rshmrun's output is not being read; not waiting to write the rest of the PEs' output");
                    return;
                }
                let pending = output.pending();
                let shown: Vec<&str> = pending.iter().take(8).map(String::as_str).collect();
                let more = if pending.len() > 8 { format!(" and {} more", pending.len() - 8) } else { String::new() };
                say(format!(
                    "{}{more} still open, held by processes outside the PEs' process groups; not waiting for them",
                    shown.join(", ")
                ));
                return;
            }
            self.nap();
        }
        output.join();
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

/// True when process group `pgid` has a member (a zombie not yet reaped counts).
fn group_alive(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the group exists and may be signalled.
    unsafe { libc::kill(-pgid, 0) == 0 }
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
