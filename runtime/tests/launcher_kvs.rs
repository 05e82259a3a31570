//! The bootstrap through the launcher's key-value store, under a real launcher: Open MPI's mpirun
//! (PMIx) runs this test binary as the PEs, restricted to the `probe` test (see there), with no
//! RSHMEM_BOOTSTRAP and no RSHMEM_JOB_KEY. A job joins; a PE that dies during the PMIx exchange ends
//! the job with a clear error; a PE that leaves the exchange early makes the others fail (at once, or
//! within RSHMEM_BOOTSTRAP_TIMEOUT), naming the fence. Every run is bounded: a hang fails the test. Skipped,
//! saying so in one line, where mpirun is missing (a failure under scripts/test.sh, whose
//! scripts/setup.sh installs Open MPI).

mod common;

use common::exit_with;
use rshmem::bootstrap::{find_kvs, parse_launch_env, Bootstrap, LauncherKvs};
use std::process::Command;
use std::time::{Duration, Instant};

/// Set in a child: "<scenario> <arg>" for `probe` to run.
const PROBE_VAR: &str = "KVS_TEST_PROBE";

fn e2s(e: rshmem::Error) -> String {
    e.to_string()
}

/// Scenarios:
///   join        bootstrap, an allgather of the PE numbers (checked), the key's first bytes
///   twice       the same twice in one process (a second init draws a new key)
///   crash K     PE K connects to the launcher's store and is killed (SIGKILL) while the others are
///               in the exchange
///   leave K     PE K connects to the launcher's store, leaves it properly and exits 0 while the
///               others are in the exchange
fn scenario(name: &str, arg: usize) -> Result<String, String> {
    let get = |k: &str| std::env::var(k).ok();
    let le = parse_launch_env(get).map_err(e2s)?;
    if matches!(name, "crash" | "leave") && le.pe == arg {
        let found = find_kvs(&get).map_err(e2s)?.ok_or("no launcher store in the environment")?;
        let store = LauncherKvs::open(&found, le.pe, le.npes, Duration::from_secs(30)).map_err(e2s)?;
        println!("PE {arg} in {} goes away", store.name());
        if name == "leave" {
            store.finish().map_err(e2s)?;
            std::process::exit(0);
        }
        // SAFETY: kill on this process with SIGKILL: it ends here, as a crash would.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    let mut keys = Vec::new();
    // "twice": a second bootstrap in the same process (as after finalize and a second init).
    for round in 0..if name == "twice" { 2 } else { 1 } {
        let b = Bootstrap::from_env().map_err(e2s)?;
        let all = b.allgather("kvs_join", &[b.pe() as u8, round]).map_err(e2s)?;
        if all.iter().enumerate().any(|(pe, v)| v != &[pe as u8, round]) {
            return Err(format!("wrong allgather: {all:?}"));
        }
        keys.push(format!("{:02x?}", &b.job_key()[..4]));
    }
    let le = parse_launch_env(get).map_err(e2s)?;
    Ok(format!("{name} pe={} npes={} key={}", le.pe, le.npes, keys.join(" then ")))
}

/// In a child process (PROBE_VAR set): runs one PE's scenario, prints "OK ..." and exits 0, or prints
/// "ERROR: <message>" and exits 1. In the test run itself: does nothing.
#[test]
fn probe() {
    let Ok(spec) = std::env::var(PROBE_VAR) else { return };
    let mut words = spec.split_whitespace();
    let name = words.next().unwrap_or("join").to_string();
    let arg = words.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    exit_with(scenario(&name, arg))
}

struct Ran {
    ok: bool,
    out: String,
    took: Duration,
}

/// `mpirun -np N` of this test binary's probe with scenario `spec`; None (after saying why) where
/// mpirun is missing.
fn mpirun(np: usize, spec: &str, env: &[(&str, &str)]) -> Option<Ran> {
    if !Command::new("sh").args(["-c", "command -v mpirun"]).output().is_ok_and(|o| o.status.success()) {
        rshmem_test_support::skip("the bootstrap through PMIx", "Open MPI's mpirun is not installed (scripts/setup.sh installs it)");
        return None;
    }
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "90", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", &np.to_string()])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "probe", "--nocapture", "--test-threads=1", "-q"]);
    for (k, _) in std::env::vars() {
        if ["RSHMEM_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCAL"].iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(k);
        }
    }
    // mpirun hands its own environment to the PEs it starts on this host: no -x needed.
    cmd.env(PROBE_VAR, spec).env("RSHMEM_DEBUG", "warn").env("OMPI_MCA_plm_rsh_agent", "");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let o = cmd.output().unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_ne!(o.status.code(), Some(124), "mpirun did not end within 90 s:\n{out}");
    Some(Ran { ok: o.status.success(), out, took: t.elapsed() })
}

#[test]
fn a_job_under_mpirun_joins_through_pmix_without_variables() {
    for np in [2, 3] {
        let Some(r) = mpirun(np, "join", &[]) else { return };
        assert!(r.ok, "{}", r.out);
        for pe in 0..np {
            assert!(r.out.contains(&format!("OK join pe={pe} npes={np} key=")), "{}", r.out);
        }
        // One key for the job, drawn by PE 0.
        let keys: Vec<&str> = r.out.lines().filter_map(|l| l.split("key=").nth(1)).collect();
        assert!(keys.len() == np && keys.iter().all(|k| *k == keys[0]), "{}", r.out);
    }
}

#[test]
fn a_second_bootstrap_in_the_same_processes_goes_through_pmix_again() {
    let Some(r) = mpirun(2, "twice", &[]) else { return };
    assert!(r.ok, "{}", r.out);
    let keys: Vec<&str> = r.out.lines().filter_map(|l| l.split("key=").nth(1)).collect();
    assert_eq!(keys.len(), 2, "{}", r.out);
    assert_eq!(keys[0], keys[1], "the PEs disagree on the keys: {}", r.out);
    let (first, second) = keys[0].split_once(" then ").unwrap();
    assert_ne!(first, second, "the second bootstrap reused the first key: {}", r.out);
}

#[test]
fn a_pe_that_dies_during_the_pmix_exchange_ends_the_job_with_a_clear_error() {
    let Some(r) = mpirun(3, "crash 1", &[("RSHMEM_BOOTSTRAP_TIMEOUT", "20")]) else { return };
    assert!(!r.ok, "the job succeeded without PE 1:\n{}", r.out);
    assert!(r.out.contains("PE 1 in PMIx (namespace"), "PE 1 did not reach the store:\n{}", r.out);
    // mpirun names the PE that died (the others, told by PMIx that the fence failed, leave it a
    // moment to do so); nobody waits for the timeout.
    assert!(r.out.contains("rank 1") && r.out.contains("signal 9"), "{}", r.out);
    assert!(r.took < Duration::from_secs(15), "took {:?}:\n{}", r.took, r.out);
}

#[test]
fn a_pe_that_leaves_the_pmix_exchange_makes_the_others_fail_naming_the_fence() {
    let Some(r) = mpirun(3, "leave 1", &[("RSHMEM_BOOTSTRAP_TIMEOUT", "3")]) else { return };
    assert!(!r.ok, "the job succeeded without PE 1:\n{}", r.out);
    assert!(r.out.contains("PE 1 in PMIx (namespace"), "PE 1 did not reach the store:\n{}", r.out);
    // PMIx reports the fence as failed (partial success) once PE 1 has left, or it never completes
    // and the timeout ends it: either way the error names the fence and why. (The first PE to fail
    // makes mpirun end the job, so the other may not get to say it.)
    let lines: Vec<&str> = r.out.lines().filter(|l| l.contains(": the PMIx fence of namespace ")).collect();
    assert!(!lines.is_empty(), "no PE named the fence:\n{}", r.out);
    for line in lines {
        assert!(line.starts_with("ERROR: rshmem bootstrap: PE 0: ") || line.starts_with("ERROR: rshmem bootstrap: PE 2: "), "{line}");
        assert!(line.contains("not every PE of the job reached it"), "{line}");
        assert!(line.contains("failed (") || line.contains("did not complete within 3 s (RSHMEM_BOOTSTRAP_TIMEOUT)"), "{line}");
    }
    assert!(r.took < Duration::from_secs(30), "took {:?}:\n{}", r.took, r.out);
}
