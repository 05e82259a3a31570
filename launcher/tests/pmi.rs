//! `rshmrun --pmi` with a real PMI-1 client (`tests/pmi/pmi_client.c`, compiled here with the system C
//! compiler): the PEs exchange values through the key-value space and barriers, a PMI abort ends the
//! job with its code naming the PE, and without `--pmi` the client finds no PMI_FD. A PE that leaves
//! PMI without finalize (it exits, or closes PMI_FD) ends the job at once, named; the key-value space is
//! capped.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// `rshmrun --pmi -np NP pmi_client ARGS` without --timeout: rshmrun must end the job by itself. Waits
/// at most 30 s (then kills rshmrun, whose PEs get SIGTERM from their parent-death signal, and fails).
/// Returns (exit code, stdout, stderr, how long it ran).
fn job(np: usize, args: &[&str]) -> (Option<i32>, String, String, Duration) {
    let t = Instant::now();
    let mut child = Command::new(RSHMRUN)
        .args(["--pmi", "-np", &np.to_string()])
        .arg(client())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rshmrun");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rshmrun --pmi -np {np} pmi_client {args:?} still ran after 30 s (a hang):\n{}", e.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = t.elapsed();
    (status.code(), o.join().unwrap(), e.join().unwrap(), took)
}

/// A PE that exits without PMI finalize, while the others wait in a PMI barrier, ends the job at once:
/// rshmrun names the PE and its status, and exits with that status (1 for a status of 0).
#[test]
fn a_pe_that_exits_without_finalize_ends_the_job() {
    for (pe, status, want) in [(1, 0, 1), (2, 5, 5)] {
        let (code, o, e, took) = job(3, &["exit", &pe.to_string(), &status.to_string()]);
        assert_eq!(code, Some(want), "PE {pe} exiting with {status}:\n{o}\n{e}");
        assert!(e.contains(&format!("PE {pe} exited with status {status} without PMI finalize")), "{e}");
        assert!(e.contains("terminating the other PEs"), "{e}");
        assert!(took < Duration::from_secs(5), "took {took:?}:\n{e}");
    }
}

/// A PE that closes PMI_FD without finalize and keeps running ends the job at once, named.
#[test]
fn a_pe_that_closes_its_pmi_connection_ends_the_job() {
    let (code, o, e, took) = job(3, &["close", "1"]);
    assert_eq!(code, Some(1), "{o}\n{e}");
    assert!(o.contains("[pe 1] rank 1 closed PMI_FD"), "{o}");
    assert!(e.contains("PE 1 closed its PMI connection without finalize"), "{e}");
    assert!(took < Duration::from_secs(5), "took {took:?}:\n{e}");
}

/// PMI abort with a code whose low 8 bits are 0 never ends the job with status 0: rshmrun exits with 1
/// and names the code.
#[test]
fn pmi_abort_with_code_256_exits_1() {
    let (code, o, e, took) = job(3, &["abort", "1", "256"]);
    assert_eq!(code, Some(1), "{o}\n{e}");
    assert!(e.contains("PE 1 called PMI abort with exit code 256"), "{e}");
    assert!(e.contains("an exit status keeps only the low 8 bits of 256") && e.contains("rshmrun exits with 1 instead"), "{e}");
    assert!(took < Duration::from_secs(5), "took {took:?}:\n{e}");
}

/// The key-value space refuses puts beyond its cap on keys (tiny values) and on bytes (large values),
/// with the cap in the answer to the PE and on rshmrun's stderr; the job then completes.
#[test]
fn the_key_value_space_is_capped() {
    for (pe, len) in ["0 1", "1 500"].iter().map(|a| a.split_once(' ').unwrap()) {
        let (code, o, e, _) = job(2, &["flood", pe, len]);
        assert_eq!(code, Some(0), "flood by PE {pe} with {len}-byte values:\n{o}\n{e}");
        let cap = "at_most_8192_keys_and_2097152_bytes_of_keys_and_values_(4096_keys_and_1048576_bytes_per_PE_of_the_job)";
        let refused = o.lines().find(|l| l.contains(&format!("[pe {pe}] put "))).unwrap_or_else(|| panic!("no put refused:\n{o}\n{e}"));
        assert!(refused.contains("refused: cmd=put_result rc=-1 msg=the_key-value_space_is_full") && refused.contains(cap), "{refused}");
        // Tiny values reach the cap on keys (8192, less the 2 keys of the exchange), large ones that on bytes.
        let n: usize = refused.split("put ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        if len == "1" {
            assert_eq!(n, 8190, "{refused}");
        } else {
            assert!((4000..4200).contains(&n), "{refused}");
        }
        assert!(e.contains(&format!("rshmrun: PE {pe}: PMI: the key-value space is full: it holds at most 8192 keys and 2097152 bytes")), "{e}");
        for p in 0..2 {
            assert!(o.contains(&format!("[pe {p}] rank {p} of 2: ok")), "{o}");
        }
    }
}
