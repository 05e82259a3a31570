//! NVSHMEM's environment variable names that rshmem honours (`rshmem::config::env::ALIASES`), through real
//! processes under `rshmrun` (CPU backend): the alias sets the heap size, the rshmem name wins when both
//! are set, and a bad value fails at init naming the alias.

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};

/// `rshmrun -np 1 rshmem-test-pe alloc` with the given variables; returns (success, output).
fn alloc(vars: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["-np", "1", "--timeout", "30"]).arg(tool("rshmem-test-pe")).arg("alloc");
    cmd.env("RSHMEM_BACKEND", "cpu").env_remove("RSHMEM_SYMMETRIC_SIZE").env_remove("NVSHMEM_SYMMETRIC_SIZE");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    (out.status.success(), text(&out))
}

/// The heap size the `alloc` scenario's expected out-of-memory error reports.
fn heap_size(text: &str) -> u64 {
    let at = text.find(" bytes free of ").unwrap_or_else(|| panic!("no heap size in the output:\n{text}"));
    text[at + 15..].split(' ').next().unwrap().parse().unwrap_or_else(|_| panic!("bad heap size in:\n{text}"))
}

#[test]
fn nvshmem_symmetric_size_sets_the_heap_size() {
    let (ok, text) = alloc(&[("NVSHMEM_SYMMETRIC_SIZE", "96m")]);
    assert!(ok, "alloc failed with NVSHMEM_SYMMETRIC_SIZE=96m:\n{text}");
    assert_eq!(heap_size(&text), 96 << 20, "NVSHMEM_SYMMETRIC_SIZE=96m was not honoured:\n{text}");
}

#[test]
fn the_rshmem_name_wins_over_the_alias() {
    let (ok, text) = alloc(&[("NVSHMEM_SYMMETRIC_SIZE", "96m"), ("RSHMEM_SYMMETRIC_SIZE", "64m")]);
    assert!(ok, "alloc failed:\n{text}");
    assert_eq!(heap_size(&text), 64 << 20, "RSHMEM_SYMMETRIC_SIZE should win over NVSHMEM_SYMMETRIC_SIZE:\n{text}");
}

#[test]
fn a_bad_alias_value_fails_at_init_naming_the_alias() {
    let (ok, text) = alloc(&[("NVSHMEM_SYMMETRIC_SIZE", "lots")]);
    assert!(!ok, "NVSHMEM_SYMMETRIC_SIZE=lots succeeded:\n{text}");
    assert!(text.contains("rshmem_init: NVSHMEM_SYMMETRIC_SIZE=\"lots\" is not valid"), "the error does not name the alias:\n{text}");
}

#[test]
fn rshmrun_info_lists_the_alias() {
    let out = Command::new(tool("rshmrun")).arg("--info").output().expect("run rshmrun --info");
    let text = text(&out);
    assert!(text.contains("also read as NVSHMEM_SYMMETRIC_SIZE"), "rshmrun --info does not list the alias:\n{text}");
}

/// `rshmrun -np 2 rshmem-test-pe SCENARIO` on the CPU backend with the given variables.
fn scenario(name: &str, vars: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["-np", "2", "--timeout", "30"]).arg(tool("rshmem-test-pe")).arg(name);
    cmd.env("RSHMEM_BACKEND", "cpu").env_remove("RSHMEM_SYMMETRIC_SIZE").env_remove("NVSHMEM_SYMMETRIC_SIZE");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    (out.status.success(), text(&out))
}

/// As in NVSHMEM, the size is the room for the program's allocations; the runtime's own area comes on
/// top. NVSHMEM's collective perftests ask for exactly their two buffers (8192 bytes for 4 KiB ones);
/// rshmem refused anything under 2 MiB before.
#[test]
fn a_small_size_is_room_for_the_programs_allocations() {
    let (ok, text) = scenario("ring", &[("NVSHMEM_SYMMETRIC_SIZE", "8192")]);
    assert!(ok, "a ring of 4-byte allocations failed with NVSHMEM_SYMMETRIC_SIZE=8192:\n{text}");
    let (ok, text) = scenario("ring", &[("RSHMEM_SYMMETRIC_SIZE", "0")]);
    assert!(!ok && text.contains("RSHMEM_SYMMETRIC_SIZE=0: the symmetric heap needs at least one byte"), "size 0 was not refused clearly:\n{text}");
}
