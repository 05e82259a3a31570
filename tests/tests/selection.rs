//! How a job across nodes settles on its remote transport, through real processes (`rshmrun --nodes 2`,
//! CPU backend), with the test hook `RSHMEM_TEST_NIC_USABLE` making PEs believe they have a usable NIC
//! (no NIC here): under `auto`, PEs that disagree all take the proxy, and a NIC that cannot be set up on
//! every PE makes every PE fall back to the proxy, saying why; with `RSHMEM_REMOTE_TRANSPORT=ibgda` both
//! stop the job with the reason instead of stranding it.

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};

fn job(np: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--nodes", "2", "-np", np, "--timeout", "60"]).arg(tool("rshmem-test-pe")).args(["ring", "rma", "amo"]);
    cmd.env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "64m").env_remove("RSHMEM_REMOTE_TRANSPORT").env_remove("RSHMEM_DEBUG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    (out.status.success(), text(&out))
}

#[test]
fn a_nic_that_cannot_be_set_up_falls_back_to_the_proxy() {
    let (ok, t) = job("2", &[("RSHMEM_TEST_NIC_USABLE", "all")]);
    assert!(ok, "the job did not fall back to the proxy:\n{t}");
    assert!(t.contains("ibgda: the NIC could not be set up") && t.contains("every PE uses the proxy instead"), "no fallback said:\n{t}");
    assert!(t.contains("PE 1: amo ok"), "{t}");
}

#[test]
fn pes_that_disagree_take_the_proxy_together() {
    let (ok, t) = job("4", &[("RSHMEM_TEST_NIC_USABLE", "0")]);
    assert!(ok, "the job failed:\n{t}");
    assert!(t.contains("a usable NIC on PE 0, none on PEs 1-3: every PE uses the proxy"), "no agreement said:\n{t}");
    assert!(t.contains("PE 3: amo ok"), "{t}");
}

#[test]
fn ibgda_asked_for_stops_with_the_reason() {
    // A NIC on some PEs only: the emulated NIC cannot talk to a real one.
    let (ok, t) = job("2", &[("RSHMEM_TEST_NIC_USABLE", "1"), ("RSHMEM_REMOTE_TRANSPORT", "ibgda")]);
    assert!(!ok && t.contains("a usable NIC on PE 1, none on PE 0") && t.contains("RSHMEM_REMOTE_TRANSPORT=proxy"), "{t}");
    // A NIC on every PE that cannot be set up: no fallback when asked for.
    let (ok, t) = job("2", &[("RSHMEM_TEST_NIC_USABLE", "all"), ("RSHMEM_REMOTE_TRANSPORT", "ibgda")]);
    assert!(!ok && t.contains("ibgda: the NIC could not be set up") && !t.contains("uses the proxy instead"), "{t}");
}
