//! A plain rshmem program (examples/src/ring_shift.rs) started by a launcher that offers a key-value
//! store, with no rshmem variable set: under Open MPI's mpirun (PMIx; no `-x`) on 2 and 4 PEs, and
//! under `rshmrun --pmi` with rshmrun's own rendezvous variables removed, as MPICH's hydra starts a
//! program (PMI-1 on PMI_FD). Variables that are set win over the store. `rshmrun --info` and
//! `rshmrun --diagnose` say which bootstrap the environment selects and why. Skipped, saying so in one
//! line, where mpirun is missing (a failure under scripts/test.sh, whose scripts/setup.sh installs
//! Open MPI).

mod common;
use common::{text, tool};
use std::process::{Command, Output};

fn have_mpirun() -> bool {
    let ok = Command::new("sh").args(["-c", "command -v mpirun"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        rshmem_test_support::skip("the bootstrap through the launcher", "Open MPI's mpirun is not installed (scripts/setup.sh installs it)");
    }
    ok
}

/// `cmd` with no launcher or rshmem variable from the environment running the tests, the CPU
/// backend, a small heap and debug logging (which names the bootstrap each PE took).
fn clean(mut cmd: Command) -> Command {
    for (k, _) in std::env::vars() {
        if ["RSHMEM_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCAL"].iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(k);
        }
    }
    cmd.env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "16m").env("RSHMEM_DEBUG", "debug").env("OMPI_MCA_plm_rsh_agent", "");
    cmd
}

/// `mpirun -np N` of `prog` (no `-x`: mpirun hands its environment to the PEs it starts here).
fn mpirun(np: usize, prog: &[&str]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "120", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", &np.to_string()]).args(prog);
    clean(cmd)
}

fn run(mut cmd: Command) -> (Output, String) {
    let o = cmd.output().unwrap();
    let t = text(&o);
    assert_ne!(o.status.code(), Some(124), "did not end within 120 s:\n{t}");
    (o, t)
}

fn assert_ring(t: &str, np: usize) {
    for i in 0..np {
        assert!(t.contains(&format!("{i}: received message {}", (i + np - 1) % np)), "{t}");
    }
}

#[test]
fn ring_shift_under_mpirun_needs_no_variables() {
    if !have_mpirun() {
        return;
    }
    let ring = tool("ring_shift");
    for np in [2, 4] {
        let (o, t) = run(mpirun(np, &[ring.to_str().unwrap()]));
        assert!(o.status.success(), "mpirun -np {np} ring_shift failed:\n{t}");
        assert_ring(&t, np);
        for pe in 0..np {
            assert!(t.contains(&format!("rshmem bootstrap: PE {pe} of {np}: through PMIx (namespace ")), "PE {pe}:\n{t}");
        }
    }
}

#[test]
fn ring_shift_under_rshmrun_pmi_needs_no_variables() {
    // rshmrun --pmi serves PMI-1 on PMI_FD and also sets its own RSHMEM_BOOTSTRAP and RSHMEM_JOB_KEY;
    // without them the PE sees what MPICH's hydra gives it.
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--pmi", "--timeout", "60", "-np", "4", "env", "-u", "RSHMEM_BOOTSTRAP", "-u", "RSHMEM_JOB_KEY", "-u", "RSHMEM_BOOTSTRAP_FD"])
        .arg(tool("ring_shift"));
    let (o, t) = run(clean(cmd));
    assert!(o.status.success(), "{t}");
    assert_ring(&t, 4);
    for pe in 0..4 {
        assert!(t.contains(&format!("rshmem bootstrap: PE {pe} of 4: through PMI-1 on PMI_FD=")), "PE {pe}:\n{t}");
    }
}

#[test]
fn variables_that_are_set_win_over_the_launchers_store() {
    if !have_mpirun() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let key = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
    let mut cmd = mpirun(2, &[tool("ring_shift").to_str().unwrap()]);
    cmd.env("RSHMEM_BOOTSTRAP", format!("127.0.0.1:{port}")).env("RSHMEM_JOB_KEY", key);
    let (o, t) = run(cmd);
    assert!(o.status.success(), "{t}");
    assert_ring(&t, 2);
    assert!(!t.contains("through PMIx"), "the PMIx store was used although both variables are set:\n{t}");
    assert!(t.contains(&format!("all 2 PEs connected to 127.0.0.1:{port}")), "{t}");
    // Only the address set: PE 0 listens there and draws the key, which goes through PMIx.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cmd = mpirun(2, &[tool("ring_shift").to_str().unwrap()]);
    cmd.env("RSHMEM_BOOTSTRAP", format!("127.0.0.1:{port}"));
    let (o, t) = run(cmd);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("through PMIx (namespace") && t.contains(&format!("PE 0 listens on 127.0.0.1:{port}")), "{t}");
}

#[test]
fn info_and_diagnose_say_which_bootstrap_and_why() {
    let rshmrun = tool("rshmrun");
    let mut cmd = clean(Command::new(&rshmrun));
    cmd.arg("--info");
    let (o, t) = run(cmd);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("How the PEs of a job find each other (the bootstrap), in this order:"), "{t}");
    assert!(t.contains("In this environment: single PE: "), "{t}");
    // Several PEs, neither variable, no store: diagnose says init would stop, and what to set.
    let mut cmd = clean(Command::new(&rshmrun));
    cmd.arg("--diagnose").env("SLURM_PROCID", "1").env("SLURM_NTASKS", "2");
    let (_, t) = run(cmd);
    assert!(t.contains("[FAIL] bootstrap: none: Slurm (SLURM_PROCID, SLURM_NTASKS) starts PE 1 of 2, but RSHMEM_BOOTSTRAP and RSHMEM_JOB_KEY are not set"), "{t}");
    // Both set: used as they are.
    let mut cmd = clean(Command::new(&rshmrun));
    cmd.arg("--diagnose").env("SLURM_PROCID", "1").env("SLURM_NTASKS", "2").env("RSHMEM_BOOTSTRAP", "127.0.0.1:29999").env("RSHMEM_JOB_KEY", "0f".repeat(16));
    let (_, t) = run(cmd);
    assert!(t.contains("[INFO] bootstrap: RSHMEM_BOOTSTRAP: RSHMEM_BOOTSTRAP=127.0.0.1:29999 and RSHMEM_JOB_KEY are set"), "{t}");
    if !have_mpirun() {
        return;
    }
    // Under mpirun: the PMIx store, on every rank.
    let (o, t) = run(mpirun(2, &[rshmrun.to_str().unwrap(), "--diagnose"]));
    assert!(o.status.success(), "{t}");
    for pe in 0..2 {
        assert!(
            t.contains(&format!("[INFO] bootstrap: launcher key-value store: Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) starts PE {pe} of 2, and a PMIx server (PMIX_SERVER_URI")),
            "{t}"
        );
    }
    assert!(t.contains("RSHMEM_JOB_KEY is unset (PE 0 draws a random key)") && t.contains("the PMIx client library libpmix.so"), "{t}");
    let (o, t) = run(mpirun(1, &[rshmrun.to_str().unwrap(), "--info"]));
    assert!(o.status.success(), "{t}");
    // One rank: a single PE, whatever the launcher offers.
    assert!(t.contains("In this environment: single PE: Open MPI"), "{t}");
}
