//! A hostile local user cannot stop a job by taking its fd-passing socket names: a squatter
//! (tests/c/fd_squatter.c) runs as uid 65534, watches /proc/net/unix and binds every name of rshmem's
//! that it can predict from the names it sees, while 20 jobs of `rshmrun -np 8 ring_shift` run one
//! after the other on the CPU backend. Every job must succeed. (With names of the form
//! `@rshmem-<job>-<pe>`, one PE's name gave away the others', and most such jobs failed in init with
//! "Address already in use".)

mod common;

use common::{text, tool};
use rshmem_test_support::{is_root, skip, OtherUserDir};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const JOBS: usize = 20;

#[test]
fn a_squatter_as_another_user_fails_no_job() {
    if !is_root() {
        return skip("a_squatter_as_another_user_fails_no_job", "not running as root, so there is no other user to run the squatter as");
    }
    if Command::new("setpriv").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        return skip("a_squatter_as_another_user_fails_no_job", "no setpriv (util-linux) to run the squatter as uid 65534");
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        return skip("a_squatter_as_another_user_fails_no_job", &format!("no C compiler ({cc}; set CC) for the squatter"));
    }
    // The squatter, built where uid 65534 can run it (removed at the end).
    let dir = OtherUserDir::new("fd-squat").unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("c/fd_squatter.c");
    let squatter = dir.path().join("fd_squatter");
    let built = Command::new(&cc).args(["-O1", "-Wall", "-Wextra", "-Werror", "-o"]).arg(&squatter).arg(&src).output().unwrap();
    assert!(built.status.success(), "compiling {} failed:\n{}", src.display(), text(&built));
    let (rshmrun, ring) = (tool("rshmrun"), tool("ring_shift"));

    // It runs until its standard input closes (bounded by 300 s in case this test dies).
    let mut sq = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(&squatter)
        .arg("300")
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    let n = sq.stdout.as_mut().unwrap().read(&mut first).unwrap();
    let hello = String::from_utf8_lossy(&first[..n]).into_owned();
    assert!(hello.starts_with("squatter: watching as uid 65534"), "the squatter did not start as uid 65534: {hello:?}");

    let mut failed = Vec::new();
    let t = Instant::now();
    for job in 0..JOBS {
        let out = Command::new(&rshmrun)
            .args(["-np", "8", "--timeout", "60"])
            .arg(&ring)
            .env("RSHMEM_BACKEND", "cpu")
            .env("RSHMEM_SYMMETRIC_SIZE", "16m")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let t = text(&out);
        let all_received = (0..8).all(|pe| t.contains(&format!("[pe {pe}] {pe}: received message {}", (pe + 7) % 8)));
        if !out.status.success() || !all_received {
            failed.push(format!("job {job}: {:?}\n{t}", out.status));
        }
    }
    let took = t.elapsed();
    drop(sq.stdin.take());
    let end = Instant::now() + Duration::from_secs(20);
    while sq.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "the squatter did not stop when its input closed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut report = String::new();
    sq.stdout.take().unwrap().read_to_string(&mut report).unwrap();
    let mut err = String::new();
    sq.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(failed.is_empty(), "{} of {JOBS} jobs failed beside the squatter ({report}{err}):\n{}", failed.len(), failed.join("\n"));
    // The squatter really watched: it saw the jobs' names (8 per job; it polls every 0.2 ms).
    let saw: usize = report
        .split("saw ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary from the squatter: {report:?} {err}"));
    assert!(saw >= JOBS, "the squatter saw only {saw} socket names in {JOBS} jobs ({took:?}): it did not watch ({report}{err})");
    assert!(report.contains("bound 0 predicted names"), "{report}");
}
