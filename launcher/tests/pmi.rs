//! `rshmrun --pmi` with a real PMI-1 client (`tests/pmi/pmi_client.c`, compiled here with the system C
//! compiler): the PEs exchange values through the key-value space and barriers, a PMI abort ends the
//! job with its code naming the PE, and without `--pmi` the client finds no PMI_FD.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const RSHMRUN: &str = env!("CARGO_BIN_EXE_rshmrun");

/// The client, compiled once per test binary into the target directory.
fn client() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/pmi/pmi_client.c");
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pmi_client");
            let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
            let st = Command::new(&cc).args(["-O1", "-Wall", "-Werror", "-o"]).arg(&out).arg(&src).status();
            match st {
                Ok(s) if s.success() => out,
                other => panic!("cannot compile {} with {cc}: {other:?} (a C compiler is needed for this test)", src.display()),
            }
        })
        .clone()
}

fn run(args: &[&str]) -> (Output, String, String) {
    let out = Command::new(RSHMRUN).args(args).arg(client()).stdin(Stdio::null()).output().expect("run rshmrun");
    let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    (out, o, e)
}

#[test]
fn pes_exchange_values_through_the_pmi_server() {
    for np in [1usize, 4, 16] {
        let (out, o, e) = run(&["--pmi", "--timeout", "60", "-np", &np.to_string()]);
        assert!(out.status.success(), "np {np}: rshmrun --pmi failed: {:?}\nstdout:\n{o}\nstderr:\n{e}", out.status);
        for pe in 0..np {
            assert!(o.contains(&format!("[pe {pe}] rank {pe} of {np}: ok")), "np {np}: PE {pe} did not finish:\n{o}\n{e}");
        }
    }
}

#[test]
fn pmi_abort_ends_the_job_with_its_code() {
    let out = Command::new(RSHMRUN)
        .args(["--pmi", "--timeout", "60", "-np", "3"])
        .arg(client())
        .args(["abort", "1", "7"])
        .stdin(Stdio::null())
        .output()
        .expect("run rshmrun");
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{e}");
    assert!(e.contains("PE 1 called PMI abort with exit code 7"), "{e}");
}

#[test]
fn without_pmi_the_client_finds_no_server() {
    let (out, _, e) = run(&["--timeout", "60", "-np", "2"]);
    assert!(!out.status.success() && e.contains("PMI_FD, PMI_RANK or PMI_SIZE not set"), "{e}");
}
