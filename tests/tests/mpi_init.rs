//! NVSHMEM's NVSHMEMX_INIT_WITH_MPI_COMM through rshmem's nvshmemx.h: an MPI program in C
//! (tests/c/mpi_init.c), compiled with Open MPI's mpicc against the host library and run under mpirun,
//! once with MPI_COMM_WORLD (one job of 4 PEs) and once with MPI_COMM_WORLD split into two
//! communicators (two independent jobs of 2 PEs). Skipped, saying so in one line, where Open MPI's
//! mpicc/mpirun are missing; a failure then under scripts/test.sh, whose scripts/setup.sh installs them.

mod common;
use common::{bin_dir, text};
use std::path::Path;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success())
}

fn build() -> Option<std::path::PathBuf> {
    if !have("mpicc") || !have("mpirun") {
        rshmem_test_support::skip("the NVSHMEMX_INIT_WITH_MPI_COMM test", "Open MPI's mpicc/mpirun are not installed (scripts/setup.sh installs them)");
        return None;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let lib = bin_dir();
    assert!(lib.join("librshmem.so").exists(), "librshmem.so not built in {}", lib.display());
    let out = lib.join("mpi_init_c");
    let o = Command::new("mpicc")
        .arg("-O1")
        .arg("-I")
        .arg(root.join("device/include"))
        .arg(root.join("tests/c/mpi_init.c"))
        .arg(format!("-L{}", lib.display()))
        .arg("-lrshmem")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "mpicc failed:\n{}", text(&o));
    Some(out)
}

fn run(prog: &Path, mode: &str) -> String {
    let o = Command::new("timeout")
        .args(["120", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4", "-x", "RSHMEM_BACKEND", "-x", "RSHMEM_SYMMETRIC_SIZE"])
        .arg(prog)
        .arg(mode)
        .env("RSHMEM_BACKEND", "cpu")
        .env("RSHMEM_SYMMETRIC_SIZE", "16m")
        .env("OMPI_MCA_plm_rsh_agent", "")
        // No launcher variables of rshmem: the communicator alone must make the job.
        .env_remove("RSHMEM_BOOTSTRAP")
        .env_remove("RSHMEM_JOB_KEY")
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "mpirun {mode} failed:\n{t}");
    t
}

#[test]
fn init_with_mpi_comm_world_and_split_communicators() {
    let Some(prog) = build() else { return };
    let t = run(&prog, "world");
    for r in 0..4 {
        // One job: PE r receives world rank r-1.
        assert!(t.contains(&format!("rank {r}: PE {r} of 4 received {} ok", (r + 3) % 4)), "world:\n{t}");
    }
    let t = run(&prog, "split");
    for r in 0..4 {
        // Two jobs of the even and the odd ranks: PE r/2 of 2 receives the other rank of its parity.
        assert!(t.contains(&format!("rank {r}: PE {} of 2 received {} ok", r / 2, (r + 2) % 4)), "split:\n{t}");
    }
}
