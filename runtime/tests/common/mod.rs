//! Process plumbing shared by the multi-process tests of this crate (bootstrap.rs, auth.rs, environment.rs, engine_failure.rs): each PE is
//! this test binary re-run with `--exact probe`, its output in a temporary file.
#![allow(dead_code)]

use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub struct Proc {
    pub pe: usize,
    pub child: Child,
    pub out: PathBuf,
    pub started: Instant,
}

#[derive(Debug)]
pub struct Outcome {
    pub pe: usize,
    pub code: Option<i32>,
    pub out: String,
    pub elapsed: Duration,
}

/// A fresh temporary file name for this test process.
pub fn temp(what: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!("rshmem-test-{}-{}-{what}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)))
}

/// This test binary run as the `probe` test (one PE), with the launcher variables inherited from the
/// environment running the tests removed.
pub fn probe_command() -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    for (k, _) in std::env::vars() {
        if ["RSHMEM_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCAL"].iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(k);
        }
    }
    cmd.args(["--exact", "probe", "--nocapture", "--test-threads=1", "-q"]);
    cmd
}

/// The probe as PE `pe` of a job of `n` PEs started without rshmrun (Open MPI's variables,
/// RSHMEM_BOOTSTRAP on `port`, RSHMEM_JOB_KEY `key`, job id `job`), each PE on its own simulated node
/// (RSHMEM_NODE_ID = pe), through the proxy transport on the CPU backend with a 16 MiB heap; `probe`
/// is the variable that makes the child run one PE.
pub fn node_pe_command(pe: usize, n: usize, port: u16, key: &str, job: &str, probe: &str) -> Command {
    let mut cmd = probe_command();
    cmd.env(probe, "1")
        .env("OMPI_COMM_WORLD_RANK", pe.to_string())
        .env("OMPI_COMM_WORLD_SIZE", n.to_string())
        .env("OMPI_MCA_ess_base_jobid", job)
        .env("RSHMEM_BOOTSTRAP", format!("127.0.0.1:{port}"))
        .env("RSHMEM_BOOTSTRAP_TIMEOUT", "20")
        .env("RSHMEM_JOB_KEY", key)
        .env("RSHMEM_NODE_ID", pe.to_string())
        .env("RSHMEM_REMOTE_TRANSPORT", "proxy")
        .env("RSHMEM_BACKEND", "cpu")
        .env("RSHMEM_SYMMETRIC_SIZE", "16m");
    cmd
}

/// Applies a test's variables last (an empty value removes the variable).
pub fn apply_env(cmd: &mut Command, env: &[(&str, &str)]) {
    for (k, v) in env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
}

/// Starts `cmd` as PE `pe`, stdout and stderr into a temporary file.
pub fn start(pe: usize, mut cmd: Command) -> Proc {
    let out = temp(&format!("pe{pe}.log"));
    let f = File::create(&out).unwrap();
    cmd.stdin(Stdio::null()).stdout(f.try_clone().unwrap()).stderr(f);
    Proc { pe, child: cmd.spawn().unwrap(), out, started: Instant::now() }
}

/// Waits for all, at most `limit`; on a hang kills everyone and fails with their output.
pub fn wait_all(mut procs: Vec<Proc>, limit: Duration) -> Vec<Outcome> {
    let deadline = Instant::now() + limit;
    let mut done: Vec<Option<(Option<i32>, Duration)>> = procs.iter().map(|_| None).collect();
    while done.iter().any(Option::is_none) {
        for (i, p) in procs.iter_mut().enumerate() {
            if done[i].is_none() {
                if let Some(st) = p.child.try_wait().unwrap() {
                    done[i] = Some((st.code(), p.started.elapsed()));
                }
            }
        }
        if Instant::now() > deadline {
            let mut report = String::new();
            for (i, p) in procs.iter_mut().enumerate() {
                if done[i].is_none() {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                }
                let out = std::fs::read_to_string(&p.out).unwrap_or_default();
                report.push_str(&format!("PE {} ({:?}): {out}\n", p.pe, done[i]));
                let _ = std::fs::remove_file(&p.out);
            }
            panic!("processes still running after {limit:?}:\n{report}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    procs
        .into_iter()
        .zip(done)
        .map(|(p, d)| {
            let (code, elapsed) = d.unwrap();
            let out = std::fs::read_to_string(&p.out).unwrap_or_default();
            let _ = std::fs::remove_file(&p.out);
            Outcome { pe: p.pe, code, out, elapsed }
        })
        .collect()
}

pub fn assert_all_ok(outs: &[Outcome]) {
    for o in outs {
        assert_eq!(o.code, Some(0), "PE {} failed: {}", o.pe, o.out);
        assert!(o.out.contains("OK"), "PE {}: {}", o.pe, o.out);
    }
}

/// Ends a probe (one PE run as a child process): prints "OK msg" and exits 0, or "ERROR: e" and exits 1;
/// the parent test reads that line.
pub fn exit_with(r: Result<String, String>) -> ! {
    match r {
        Ok(msg) => {
            println!("OK {msg}");
            std::process::exit(0);
        }
        Err(e) => {
            println!("ERROR: {e}");
            std::process::exit(1);
        }
    }
}
