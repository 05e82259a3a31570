//! The host C ABI of teams and collectives through NVSHMEM's names: tests/c/host_collectives.c, compiled
//! as C99 against rshmem's nvshmem.h and linked with librshmem.so, run under `rshmrun` on the CPU backend
//! (one node with 2, 3 and 4 PEs; two simulated nodes, so the proxy carries part of every collective).

mod common;

use common::{bin_dir, text, tool};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The C program, built once per test process; None without a C compiler (after saying so in one line,
/// or failing under scripts/test.sh).
fn program() -> Option<&'static Path> {
    static PROGRAM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = PROGRAM.get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
            let lib = bin_dir();
            assert!(lib.join("librshmem.so").exists(), "{} not built: run `cargo build --workspace` first", lib.join("librshmem.so").display());
            let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
            if Command::new(&cc).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
                return Err(format!("no C compiler ({cc}; set CC)"));
            }
            let out = lib.join("c_api_host_collectives");
            let built = Command::new(&cc)
                .args(["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I"])
                .arg(root.join("device/include"))
                .arg(root.join("tests/c/host_collectives.c"))
                .arg("-L")
                .arg(&lib)
                .arg("-lrshmem")
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                .arg("-o")
                .arg(&out)
                .output()
                .expect("run the C compiler");
            assert!(built.status.success(), "compiling tests/c/host_collectives.c failed:\n{}", text(&built));
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
    let Some(prog) = program() else { return };
    let out = Command::new(tool("rshmrun"))
        .args(args)
        .args(["--timeout", "60"])
        .arg(prog)
        .env("RSHMEM_BACKEND", "cpu")
        .stdin(Stdio::null())
        .output()
        .expect("run rshmrun");
    let t = text(&out);
    assert!(out.status.success(), "rshmrun {} host_collectives failed:\n{t}", args.join(" "));
    let np: usize = args[args.iter().position(|a| *a == "-np").unwrap() + 1].parse().unwrap();
    for pe in 0..np {
        assert!(t.contains(&format!("PE {pe}: ok")), "PE {pe} did not report ok:\n{t}");
    }
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
