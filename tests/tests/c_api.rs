//! The host C ABI of teams and collectives through NVSHMEM's names: tests/c/host_collectives.c, compiled
//! as C99 against rshmem's nvshmem.h and linked with librshmem.so, run under `rshmrun` on the CPU backend
//! (one node with 2, 3 and 4 PEs; two simulated nodes, so the proxy carries part of every collective).

mod common;

use common::{bin_dir, text, tool};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A C program of tests/c/, built once per test process; None without a C compiler (after saying so in
/// one line, or failing under scripts/test.sh).
fn program(name: &str) -> Option<&'static Path> {
    static HOST_COLLECTIVES: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static POINT_OPS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static GLOBAL_EXIT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static TEAM_INIT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let cell = match name {
        "team_init" => &TEAM_INIT,
        "host_collectives" => &HOST_COLLECTIVES,
        "point_ops" => &POINT_OPS,
        "global_exit" => &GLOBAL_EXIT,
        _ => panic!("no C program {name}"),
    };
    let built = cell.get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
            let lib = bin_dir();
            assert!(lib.join("librshmem.so").exists(), "{} not built: run `cargo build --workspace` first", lib.join("librshmem.so").display());
            let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
            if Command::new(&cc).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
                return Err(format!("no C compiler ({cc}; set CC)"));
            }
            let out = lib.join(format!("c_api_{name}"));
            let built = Command::new(&cc)
                .args(["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I"])
                .arg(root.join("device/include"))
                .arg(root.join(format!("tests/c/{name}.c")))
                .arg("-L")
                .arg(&lib)
                .arg("-lrshmem")
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                .arg("-o")
                .arg(&out)
                .output()
                .expect("run the C compiler");
            assert!(built.status.success(), "compiling tests/c/{name}.c failed:\n{}", text(&built));
            Ok(out)
        });
    match built {
        Ok(p) => Some(p),
        Err(why) => {
            rshmem_test_support::skip("a C API test", why);
            None
        }
    }
}

fn run(args: &[&str]) {
    run_program("host_collectives", args)
}

/// `rshmrun LAUNCH --timeout 60 <C program NAME> ARGS` on the CPU backend with the extra environment
/// `env`: (exit code, output), or None without a C compiler.
fn job(name: &str, launch: &[&str], args: &[&str], env: &[(&str, &str)]) -> Option<(i32, String)> {
    let prog = program(name)?;
    let out = Command::new(tool("rshmrun"))
        .args(launch)
        .args(["--timeout", "60"])
        .arg(prog)
        .args(args)
        .env("RSHMEM_BACKEND", "cpu")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run rshmrun");
    Some((out.status.code().unwrap_or(-1), text(&out)))
}

/// Asserts that every PE of `launch`'s `-np` printed "PE n: ok" in `t`.
fn every_pe_ok(launch: &[&str], t: &str) {
    let np: usize = launch[launch.iter().position(|a| *a == "-np").unwrap() + 1].parse().unwrap();
    for pe in 0..np {
        assert!(t.contains(&format!("PE {pe}: ok")), "PE {pe} did not report ok:\n{t}");
    }
}

fn run_program(name: &str, launch: &[&str]) {
    let Some((code, t)) = job(name, launch, &[], &[]) else { return };
    assert_eq!(code, 0, "rshmrun {} {name} failed:\n{t}", launch.join(" "));
    every_pe_ok(launch, &t);
}

#[test]
fn host_collectives_from_c_on_2_pes() {
    run(&["-np", "2"]);
}

#[test]
fn host_collectives_from_c_on_3_pes() {
    run(&["-np", "3"]);
}

#[test]
fn host_collectives_from_c_on_4_pes() {
    run(&["-np", "4"]);
}

#[test]
fn host_collectives_from_c_across_two_nodes() {
    run(&["--nodes", "2", "-np", "4"]);
}

/// Host AMOs, strided RMA and the on-stream point operations (tests/c/point_ops.c) on one node, and
/// across two simulated nodes, where every operation on a PE of the other node goes through the proxy.
#[test]
fn point_ops_from_c_on_3_pes() {
    run_program("point_ops", &["-np", "3"]);
}

#[test]
fn point_ops_from_c_across_two_nodes() {
    run_program("point_ops", &["--nodes", "2", "-np", "4"]);
}

/// Teams of arbitrary members from unique ids (tests/c/team_init.c): two teams made at once by the odd
/// and the even PEs (PE 0 in neither), numbered against the job order, used for collectives and split;
/// on one node, and across two simulated nodes, where the rendezvous reads announcements through the
/// proxy.
#[test]
fn team_init_from_c_on_5_pes() {
    run_program("team_init", &["-np", "5"]);
}

#[test]
fn team_init_from_c_on_2_pes() {
    run_program("team_init", &["-np", "2"]);
}

#[test]
fn team_init_from_c_across_two_nodes() {
    run_program("team_init", &["--nodes", "2", "-np", "6"]);
}

/// A member that never comes: the caller's wait ends at its RSHMEM_WAIT_TIMEOUT (1 s, set by the
/// program; the job's is 30 s) with an error naming the missing index, returned to the program (which
/// goes on), instead of a hang.
#[test]
fn team_init_names_the_member_that_never_came() {
    let launch = ["-np", "3"];
    let Some((code, t)) = job("team_init", &launch, &["lonely"], &[("RSHMEM_WAIT_TIMEOUT", "30")]) else { return };
    assert_eq!(code, 0, "rshmrun team_init lonely failed:\n{t}");
    assert!(t.contains("1 of the 2 members of the team of uniqueid") && t.contains("missing the members of index 1"), "no error naming the missing member:\n{t}");
    every_pe_ok(&launch, &t);
}

/// `rshmrun -np N [--nodes 2] global_exit ARGS` on the CPU backend: (exit code, output), or None without
/// a C compiler.
fn global_exit_job(np: &str, nodes: bool, args: &[&str]) -> Option<(i32, String)> {
    let launch: &[&str] = if nodes { &["--nodes", "2", "-np", np] } else { &["-np", np] };
    job("global_exit", launch, args, &[])
}

/// nvshmem_global_exit(status) from one PE ends every PE (the others wait in a barrier it never
/// enters) and rshmrun exits with that status, 0 included; rshmrun names the PE.
#[test]
fn global_exit_ends_every_pe_with_the_status() {
    for (np, nodes, status) in [("3", false, 7), ("2", false, 0), ("4", true, 5)] {
        let Some((code, t)) = global_exit_job(np, nodes, &["global_exit", &status.to_string()]) else { return };
        let last = np.parse::<usize>().unwrap() - 1;
        assert_eq!(code, status, "rshmrun -np {np}: exit code {code}, expected {status}:\n{t}");
        assert!(t.contains(&format!("PE {last} called nvshmem_global_exit({status})")), "{t}");
        assert!(!t.contains("FAILED") && !t.contains("exceeded --timeout"), "{t}");
        for pe in 0..=last {
            assert!(t.contains(&format!("PE {pe}: before global_exit")), "PE {pe}'s output was lost:\n{t}");
        }
    }
}

/// nvshmem_global_exit(256): an exit status keeps only the low 8 bits of a code, and those of 256 are 0,
/// which would read as success. Under rshmrun the job ends with 1 and rshmrun names the code; without
/// rshmrun (one PE) the process itself exits with 1, saying why.
#[test]
fn global_exit_with_256_never_ends_with_0() {
    let Some((code, t)) = global_exit_job("2", false, &["global_exit", "256"]) else { return };
    assert_eq!(code, 1, "{t}");
    assert!(t.contains("PE 1 called nvshmem_global_exit(256)"), "{t}");
    assert!(t.contains("an exit status keeps only the low 8 bits of 256, which are 0 (success); rshmrun exits with 1 instead"), "{t}");

    let prog = program("global_exit").unwrap();
    // Alone, outside any launcher: none of the test's environment may make it a PE of some job.
    let out = Command::new(prog)
        .args(["global_exit", "256"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RSHMEM_BACKEND", "cpu")
        .env("RSHMEM_SYMMETRIC_SIZE", "16m")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("PE 0: before global_exit"), "{t}");
    assert!(
        t.contains("nvshmem_global_exit(256): an exit status keeps only the low 8 bits of 256, which are 0 (success); exiting with status 1 instead"),
        "{t}"
    );
}

/// NVSHMEMX_INIT_WITH_SHMEM needs an OpenSHMEM bootstrap that rshmem does not have: a clear exit.
#[test]
fn init_with_shmem_is_refused_by_name() {
    let Some((code, t)) = global_exit_job("1", false, &["init_shmem"]) else { return };
    assert_eq!(code, 1, "{t}");
    assert!(t.contains("NVSHMEMX_INIT_WITH_SHMEM needs an OpenSHMEM library's bootstrap"), "{t}");
}

/// A host AMO with an operation code that is none: an exit naming the code as given.
#[test]
fn host_amo_with_a_bad_code_is_refused_by_name() {
    let Some((code, t)) = global_exit_job("1", false, &["bad_amo"]) else { return };
    assert_eq!(code, 1, "{t}");
    assert!(t.contains("rshmem_host_amo: atomic operation code -5 is not valid (1 to 12)") && !t.contains("FAILED"), "{t}");
}
