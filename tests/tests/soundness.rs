//! Careless calls through real PEs under `rshmrun` (CPU backend): each gets a clear error naming the call,
//! or OpenSHMEM's answer, never a crash. The scenarios are in `tests/src/robust.rs`.
//! - `rshmem_device::quiet()` / `fence()` after `rshmem::finalize()` across two simulated nodes (where they
//!   would read the freed proxy ring) stop the PE by name, with status 1, not a SIGSEGV;
//! - NULL on either side of a host put or get is an error naming the call and the side (the C ABI prints it
//!   and stops the PE);
//! - host puts and gets into the runtime's internal area below the first allocation are refused;
//! - `malloc(0)` and its kin return NULL and `free(NULL)` does nothing (OpenSHMEM, NVSHMEM).

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};

/// `rshmrun [--nodes 2] -np N rshmem-test-pe SCENARIO` on the CPU backend; (exit code, output).
fn run(nodes: bool, np: u32, scenario: &str, vars: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(tool("rshmrun"));
    if nodes {
        cmd.args(["--nodes", "2"]);
    }
    cmd.args(["-np", &np.to_string(), "--timeout", "60"]).arg(tool("rshmem-test-pe")).arg(scenario);
    cmd.env("RSHMEM_BACKEND", "cpu").env_remove("RSHMEM_WAIT_TIMEOUT").env_remove("RSHMEM_DEBUG");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    (out.status.code(), text(&out))
}

/// The device call after finalize: status 1 and the call's name with the reason, from every PE that got
/// there first (rshmrun then ends the other).
fn after_finalize(call: &str, vars: &[(&str, &str)]) {
    let scenario = format!("{}_after_finalize", call.trim_start_matches("rshmem_"));
    let (code, text) = run(true, 2, &scenario, vars);
    assert_eq!(code, Some(1), "{scenario}: expected exit status 1 (the PE stopped by name):\n{text}");
    assert!(text.contains(&format!("{call}: called before rshmem init completed")), "{scenario}: the call is not named:\n{text}");
    assert!(!text.contains("SIGSEGV") && !text.contains("returned after finalize"), "{scenario}:\n{text}");
}

#[test]
fn quiet_after_finalize_fails_by_name_across_nodes() {
    after_finalize("rshmem_quiet", &[]);
}

#[test]
fn fence_after_finalize_fails_by_name_across_nodes() {
    // Two channels, so that the fence takes the proxy's path (what reads the freed channels).
    after_finalize("rshmem_fence", &[("RSHMEM_PROXY_LANES", "2")]);
}

#[test]
fn null_buffers_in_host_rma_are_errors_naming_the_side() {
    let (code, text) = run(false, 2, "null_rma", &[]);
    assert_eq!(code, Some(0), "null_rma:\n{text}");
    for want in ["rshmem_putmem: the source is NULL", "rshmem_getmem: the destination is NULL", "rshmem_putmem: the symmetric address is NULL"] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
    for (scenario, want) in [("null_c_put", "rshmem_putmem: the source is NULL"), ("null_c_get", "rshmem_getmem: the destination is NULL")] {
        let (code, text) = run(false, 2, scenario, &[]);
        assert_eq!(code, Some(1), "{scenario}: expected the C ABI to stop the PE with status 1:\n{text}");
        assert!(text.contains(want) && text.contains("cannot return an error: stopping this PE"), "{scenario}:\n{text}");
    }
}

#[test]
fn host_rma_into_the_internal_area_is_refused() {
    let (code, text) = run(false, 2, "internal_area", &[]);
    assert_eq!(code, Some(0), "internal_area:\n{text}");
    assert!(text.contains("is in the runtime's internal area (the first 1 MiB of the symmetric heap"), "{text}");
}

#[test]
fn zero_size_allocations_are_null() {
    let (code, text) = run(false, 2, "alloc_zero", &[]);
    assert_eq!(code, Some(0), "alloc_zero:\n{text}");
    assert!(text.contains("PE 1: alloc_zero: every zero-size allocation is NULL"), "{text}");
    assert!(!text.contains("rshmem_malloc:"), "malloc(0) printed an error:\n{text}");
}
