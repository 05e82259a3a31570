//! The short soak: `rshmem-soak` under the real `rshmrun` with 4 PEs on the CPU backend (real
//! processes, TCP bootstrap, shared-memory heaps), about 10^5 device calls checked against the model;
//! and proof that its checker fails when one value is wrong.

mod common;

use common::tool;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn soak(args: &[&str]) -> (Output, String) {
    let deadline = Duration::from_secs(120);
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["-np", "4", "--timeout", &deadline.as_secs().to_string()]).arg(tool("rshmem-soak")).args(args);
    // A small heap: the churn's blocks and the moving soak buffer spread over a good part of it.
    cmd.env("RSHMEM_SYMMETRIC_SIZE", "16m").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_WAIT_TIMEOUT", "60");
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    assert!(start.elapsed() < deadline + Duration::from_secs(10), "rshmrun overran its own --timeout");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out, text)
}

#[test]
fn soak_short_matches_model() {
    let (out, t) = soak(&["--seed", "20261123", "--ops", "100000", "--threads", "4", "--blocks", "2"]);
    assert!(out.status.success(), "soak failed:\n{t}");
    assert!(t.contains("[pe 0] rshmem-soak: seed 20261123 (4 PEs, cpu backend, 2 blocks x 4 threads per PE"), "{t}");
    let line = t.lines().find(|l| l.contains("rshmem-soak: PASSED: ")).unwrap_or_else(|| panic!("no PASSED line:\n{t}"));
    let ops: u64 = line.split("PASSED: ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{line}"));
    assert!((100_000..130_000).contains(&ops), "operation count {ops}: {line}");
    // Every kind of call ran.
    let kinds = t.lines().find(|l| l.contains("calls by kind:")).unwrap_or_else(|| panic!("{t}"));
    for k in [
        "p ", "g ", "putmem ", "putmem_nbi ", "getmem ", "getmem_nbi ", "put (typed)", "get (typed)", "putmem_warp", "putmem_nbi_block",
        "getmem_block", "getmem_nbi_warp", "atomic_fetch_add", "atomic_add", "atomic_fetch_inc", "atomic_inc", "atomic_compare_swap",
        "atomic_swap", "atomic_set", "atomic_fetch ", "atomic_fetch_and", "atomic_and", "atomic_fetch_or", "atomic_or", "atomic_fetch_xor",
        "atomic_xor", "putmem_signal ", "putmem_signal_warp", "putmem_signal_block", "signal_op", "p(flag)", "signal_wait_until",
        "wait_until + 2 test", "fence", "quiet", "lock", "barrier_all", "sync_all",
    ] {
        assert!(kinds.contains(k), "no {k:?} calls in {kinds}");
    }
    let churn = t.lines().find(|l| l.contains("heap churn:")).unwrap_or_else(|| panic!("{t}"));
    assert!(!churn.contains(" 0 allocations"), "{churn}");
}

#[test]
fn soak_checker_reports_an_injected_fault() {
    let (out, t) = soak(&["--seed", "77", "--ops", "3000", "--inject-fault"]);
    assert!(!out.status.success(), "a corrupted byte went unnoticed:\n{t}");
    let line = t.lines().find(|l| l.contains("MISMATCH")).unwrap_or_else(|| panic!("no MISMATCH report:\n{t}"));
    // The report names the seed, the round, the PE, the operation (kind, size, scope, writer, target)
    // and the expected and actual values.
    for want in ["[pe 3]", "seed 77", "round 0", "PE 3, buffer offset", "expected 0x", "actual 0x", "written last by operation #", "putmem", "bytes, scope thread", "target PE 3"] {
        assert!(line.contains(want), "{want:?} missing from the report: {line}");
    }
    assert!(t.contains("reproduce with: rshmrun -np 4 rshmem-soak --seed 77"), "{t}");
}
