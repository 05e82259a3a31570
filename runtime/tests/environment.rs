//! The library never changes the environment of the process it runs in: a job of two PEs on two
//! simulated nodes (RSHMEM_NODE_ID 0 and 1), started without rshmrun (Open MPI's variables,
//! RSHMEM_BOOTSTRAP and RSHMEM_JOB_KEY) and without CUDA_DEVICE_MAX_CONNECTIONS, through the proxy
//! transport: every variable is the same before init, after init and a put across the nodes, and after
//! finalize. (Setting a variable races every other thread's reads of the environment; the library only
//! names the variables that matter.) Each PE is this test binary run again as the `probe` test.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

const KEY: &str = "00112233445566778899aabbccddeeff";
/// Set in a child: the probe runs one PE.
const PROBE_VAR: &str = "ENV_TEST_PROBE";

fn environment() -> BTreeMap<OsString, OsString> {
    std::env::vars_os().collect()
}

/// What changed from `before` to `after`, one `NAME: old -> new` per variable.
fn changes(before: &BTreeMap<OsString, OsString>, after: &BTreeMap<OsString, OsString>) -> Vec<String> {
    let names: std::collections::BTreeSet<&OsString> = before.keys().chain(after.keys()).collect();
    names
        .into_iter()
        .filter(|n| before.get(*n) != after.get(*n))
        .map(|n| format!("{}: {:?} -> {:?}", n.to_string_lossy(), before.get(n), after.get(n)))
        .collect()
}

/// One PE: init, a put to the other PE (on the other node), barrier, finalize, comparing the whole
/// environment at each step with the one before init.
fn pe() -> Result<String, String> {
    let e2s = |e: rshmem::Error| e.to_string();
    let before = environment();
    rshmem::init().map_err(e2s)?;
    let mut changed = changes(&before, &environment());
    let (me, n) = (rshmem::my_pe(), rshmem::n_pes());
    let slot = rshmem::Sym::<u64>::zeroed().map_err(e2s)?;
    // The other PE is on the other node: its heap is not mapped here, the put goes through the proxy.
    if !rshmem::ptr(slot.as_ptr().cast::<u8>(), (me + 1) % n).is_null() {
        return Err(format!("PE {me} maps PE {}'s heap: the two PEs are not on two nodes", (me + 1) % n));
    }
    slot.put_to((me + 1) % n, 0x5000 + me as u64).map_err(e2s)?;
    rshmem::barrier_all().map_err(e2s)?;
    let got = slot.read().map_err(e2s)?;
    let want = 0x5000 + ((me + n - 1) % n) as u64;
    slot.free().map_err(e2s)?;
    changed.extend(changes(&before, &environment()));
    rshmem::finalize().map_err(e2s)?;
    changed.extend(changes(&before, &environment()));
    if got != want {
        return Err(format!("PE {me} holds {got:#x}, expected {want:#x}"));
    }
    changed.dedup();
    if !changed.is_empty() {
        return Err(format!("the environment changed: {}", changed.join("; ")));
    }
    Ok(format!("pe={me} environment unchanged"))
}

/// In a child process (PROBE_VAR set): runs one PE. In the test run itself: does nothing.
#[test]
fn probe() {
    if std::env::var_os(PROBE_VAR).is_some() {
        exit_with(pe())
    }
}

#[test]
fn init_and_finalize_leave_the_environment_unchanged() {
    let port = free_port();
    let procs = (0..2)
        .map(|pe| {
            let mut cmd = node_pe_command(pe, 2, port, KEY, "4242", PROBE_VAR);
            cmd.env_remove("CUDA_DEVICE_MAX_CONNECTIONS");
            start(pe, cmd)
        })
        .collect();
    let outs = wait_all(procs, Duration::from_secs(60));
    assert_all_ok(&outs);
    for o in &outs {
        assert!(o.out.contains("environment unchanged"), "PE {}: {}", o.pe, o.out);
    }
}
