//! `rshmrun --selftest` on the CPU backend: every check passes over the emulated NIC and the TCP proxy
//! with a line each, and the proxy over verbs is skipped naming why (no NIC here); a broken setting fails the checks naming the error and what to do; missing helper
//! programs are named.

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};

fn selftest(env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.arg("--selftest").env("RSHMEM_BACKEND", "cpu").env_remove("RSHMEM_REMOTE_TRANSPORT").env_remove("RSHMEM_DEBUG").stdin(Stdio::null());
    cmd.env_remove("RSHMEM_PROXY_PROVIDER").env_remove("RSHMEM_TEST_VERBS_USABLE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run rshmrun --selftest");
    (out.status.success(), text(&out))
}

#[test]
fn every_check_passes_over_both_transports() {
    let (ok, t) = selftest(&[]);
    assert!(ok, "rshmrun --selftest failed:\n{t}");
    for label in ["ibgda (emulated NIC", "proxy (TCP)"] {
        for s in ["ring", "rma", "amo", "fence", "put_signal", "barrier", "host_rma"] {
            assert!(t.lines().any(|l| l.starts_with("rshmrun selftest: PASS ") && l.contains(label) && l.ends_with(&format!(": {s}"))), "no PASS line for {label} {s}:\n{t}");
        }
        assert!(t.lines().any(|l| l.contains(label) && l.contains("p + quiet ") && l.contains(" GB/s") && !l.contains("n/a")), "no measurements for {label}:\n{t}");
    }
    assert!(t.contains("rshmrun selftest: every check passed"), "{t}");
    // No RDMA NIC here (or a build without the verbs feature): the verbs proxy is skipped, saying why.
    let skip = t.lines().find(|l| l.starts_with("rshmrun selftest: SKIP proxy (verbs): skipped: ")).unwrap_or_else(|| panic!("no skip line for the verbs proxy:\n{t}"));
    assert!(skip.contains("no RDMA device") || skip.contains("`verbs` feature") || skip.contains("no RDMA port"), "{skip}");
}

#[test]
fn a_broken_setting_fails_naming_it() {
    let (ok, t) = selftest(&[("RSHMEM_PROXY_SLOTS", "1000")]);
    assert!(!ok, "the self-test passed with a bad RSHMEM_PROXY_SLOTS:\n{t}");
    assert!(t.contains("rshmrun selftest: FAIL proxy (TCP): ring"), "{t}");
    assert!(t.contains("RSHMEM_PROXY_SLOTS") && t.contains("rshmrun --diagnose"), "the failure names neither the setting nor what to do:\n{t}");
    assert!(t.contains("checks failed"), "{t}");
}

#[test]
fn missing_helpers_are_named() {
    let (ok, t) = selftest(&[("RSHMRUN_SELFTEST_DIR", "/nonexistent")]);
    assert!(!ok && t.contains("FAIL /nonexistent/rshmem-test-pe not found") && t.contains("cargo build --release"), "{t}");
}
