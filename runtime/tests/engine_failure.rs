//! A failure of the remote engine reaches the program as an error; no helper thread of the library
//! ends the process under it. Two PEs on two simulated nodes, started without rshmrun (so no launcher
//! ends the job for them), through the proxy transport: PE 1 leaves right after the first barrier
//! (its process exits without finalize, so the kernel closes its connections mid-job); PE 0 keeps
//! putting to PE 1 and calling quiet. PE 0's put or quiet must return an error that names the lost
//! peer, PE 0 must still be running to print it, and its finalize must return (an error or not) instead
//! of hanging. Each PE is this test binary run again as the `probe` test.

mod common;

use common::*;
use std::time::{Duration, Instant};

const KEY: &str = "8899aabbccddeeff0011223344556677";
const PROBE_VAR: &str = "ENGINE_FAILURE_PROBE";
/// Set in a child: after the error, PE 0 launches a kernel that posts to the failed engine.
const STRANDED_VAR: &str = "ENGINE_FAILURE_STRANDED";

fn pe() -> Result<String, String> {
    let e2s = |e: rshmem::Error| e.to_string();
    rshmem::init().map_err(e2s)?;
    let me = rshmem::my_pe();
    let slot = rshmem::Sym::<u64>::zeroed().map_err(e2s)?;
    if !rshmem::ptr(slot.as_ptr().cast::<u8>(), 1 - me).is_null() {
        return Err(format!("PE {me} maps the other PE's heap: the two PEs are not on two nodes"));
    }
    slot.put_to(1 - me, 1).map_err(e2s)?;
    rshmem::barrier_all().map_err(e2s)?;
    if me == 1 {
        // Gone without finalize: the kernel closes this process's connections.
        println!("PE 1 leaves");
        std::process::exit(0);
    }
    let start = Instant::now();
    let mut puts = 0u64;
    let err = loop {
        if start.elapsed() > Duration::from_secs(30) {
            return Err(format!("PE 0: {puts} puts and quiets to the departed PE 1 all succeeded for 30 s"));
        }
        if let Err(e) = slot.put_to(1, puts).and_then(|()| rshmem::quiet()) {
            break e.to_string();
        }
        puts += 1;
    };
    println!("PE 0: the error reached the program after {puts} puts: {err}");
    if !err.contains("PE 1") {
        return Err(format!("the error does not name PE 1: {err}"));
    }
    if std::env::var_os(STRANDED_VAR).is_some() {
        // A kernel that puts to the failed engine can never complete: the PE must end, naming why,
        // instead of waiting forever.
        println!("PE 0 launches a kernel that puts to PE 1");
        let dst = slot.as_ptr();
        let dst = dst as usize;
        rshmem::cpu::launch(1, 1, || {
            // SAFETY: `dst` is the symmetric slot (alive until finalize); PE 1 is a valid PE number.
            unsafe {
                rshmem_device::p(dst as *mut u64, 9u64, 1);
                rshmem_device::quiet();
            }
        });
        return Err("the kernel that put to the failed engine returned".into());
    }
    // Still alive a while later (no helper thread ended the process), and later calls fail by name too.
    std::thread::sleep(Duration::from_secs(4));
    let again = slot.put_to(1, 7).and_then(|()| rshmem::quiet());
    let again = again.err().map(|e| e.to_string()).ok_or("a put to the departed PE 1 succeeded after the failure")?;
    let fin = Instant::now();
    let r = rshmem::finalize();
    Ok(format!(
        "pe=0 told: {err} | again: {again} | finalize after {:?}: {}",
        fin.elapsed(),
        r.map_or_else(|e| format!("error: {e}"), |()| "ok".into())
    ))
}

#[test]
fn probe() {
    if std::env::var_os(PROBE_VAR).is_some() {
        exit_with(pe())
    }
}

/// PE 0 and PE 1 as above; `stranded`: PE 0's kernel posts after the failure.
fn job(stranded: bool) -> Vec<Outcome> {
    let port = free_port();
    let procs = (0..2)
        .map(|pe| {
            let mut cmd = node_pe_command(pe, 2, port, KEY, "4343", PROBE_VAR);
            cmd.env("RSHMEM_WAIT_TIMEOUT", "60");
            if stranded {
                cmd.env(STRANDED_VAR, "1");
            }
            start(pe, cmd)
        })
        .collect();
    wait_all(procs, Duration::from_secs(90))
}

#[test]
fn an_engine_failure_is_returned_to_the_program_not_an_exit() {
    let outs = job(false);
    let (pe0, pe1) = (&outs[0], &outs[1]);
    assert!(pe1.out.contains("PE 1 leaves"), "PE 1 did not get to leave: {}", pe1.out);
    assert_eq!(pe0.code, Some(0), "PE 0 was ended instead of being told (exit {:?}): {}", pe0.code, pe0.out);
    assert!(pe0.out.contains("the error reached the program") && pe0.out.contains("OK pe=0 told"), "{}", pe0.out);
    // finalize returned promptly (its barrier cannot complete without PE 1).
    let took = pe0.out.split("finalize after ").nth(1).and_then(|s| s.split(':').next()).unwrap_or("?");
    assert!(pe0.elapsed < Duration::from_secs(60), "PE 0 took {:?} (finalize {took}): {}", pe0.elapsed, pe0.out);
    println!("{}", pe0.out);
}

/// After the program was told, a kernel that posts to the failed engine is stranded: the PE ends
/// (exit 1) naming why within the engine's limit (10 s), long before RSHMEM_WAIT_TIMEOUT (60 s here).
#[test]
fn a_kernel_stranded_on_a_failed_engine_ends_the_pe_naming_it() {
    let outs = job(true);
    let pe0 = &outs[0];
    assert!(pe0.out.contains("the error reached the program") && pe0.out.contains("launches a kernel"), "{}", pe0.out);
    assert_eq!(pe0.code, Some(1), "PE 0 did not end with 1: {}", pe0.out);
    assert!(pe0.out.contains("can never complete: ending this PE") && !pe0.out.contains("kernel that put to the failed engine returned"), "{}", pe0.out);
    assert!(pe0.elapsed < Duration::from_secs(45), "PE 0 took {:?}: {}", pe0.elapsed, pe0.out);
}
