//! The configuration through real PEs under `rshmrun` (CPU backend): every variable is read and checked
//! at each init, into the configuration that init hands down; nothing keeps a value of an earlier init.
//! - a second init in the same process with other values uses them: RSHMEM_DEBUG (the log level) and
//!   RSHMEM_WAIT_TIMEOUT (the CPU backend's device waits), and a bad value then fails naming it;
//! - an empty value is an error naming the variable, not the default;
//! - NVSHMEM_SYMMETRIC_SIZE=0 is reported under that name;
//! - a bad value of a variable the bootstrap uses (RSHMEM_BOOTSTRAP_TIMEOUT) stops init naming it and
//!   the PE, before any PE waits for another: the bootstrap gets it from init's configuration.

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `rshmrun -np 1 rshmem-test-pe SCENARIO` on the CPU backend with `vars`; (exit code, output, time).
fn run(scenario: &str, vars: &[(&str, &str)]) -> (Option<i32>, String, Duration) {
    run_np(1, scenario, vars)
}

/// [`run`] with `np` PEs.
fn run_np(np: usize, scenario: &str, vars: &[(&str, &str)]) -> (Option<i32>, String, Duration) {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["-np", &np.to_string(), "--timeout", "30"]).arg(tool("rshmem-test-pe")).arg(scenario);
    cmd.env("RSHMEM_BACKEND", "cpu");
    for v in ["RSHMEM_WAIT_TIMEOUT", "RSHMEM_DEBUG", "RSHMEM_SYMMETRIC_SIZE", "NVSHMEM_SYMMETRIC_SIZE", "RSHMEM_PROXY_SPIN", "RSHMEM_BOOTSTRAP_TIMEOUT"] {
        cmd.env_remove(v);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    (out.status.code(), text(&out), start.elapsed())
}

#[test]
fn a_second_init_reads_the_environment_again() {
    let (code, text, took) = run("reinit_env", &[]);
    // A bad value at the second init fails it, naming the variable.
    assert!(text.contains("RSHMEM_PROXY_SPIN=\"sometimes\" is not valid"), "the bad value was not named:\n{text}");
    // RSHMEM_DEBUG=info since the re-init: init's info line.
    assert!(text.contains("rshmem info [PE 0]: PE 0/1: cpu backend"), "RSHMEM_DEBUG=info set before the second init was not used:\n{text}");
    // RSHMEM_WAIT_TIMEOUT=1 since the re-init: the wait stops the PE by name after about a second,
    // long before rshmrun's --timeout 30.
    assert_eq!(code, Some(1), "expected the timed-out wait to stop the PE:\n{text}");
    assert!(text.contains("rshmem_wait_until: wait timed out (RSHMEM_WAIT_TIMEOUT)"), "RSHMEM_WAIT_TIMEOUT=1 set before the second init was not used:\n{text}");
    assert!(took < Duration::from_secs(20), "took {took:?}:\n{text}");
}

#[test]
fn an_empty_value_is_an_error_naming_the_variable() {
    for var in ["RSHMEM_WAIT_TIMEOUT", "RSHMEM_DEBUG", "NVSHMEM_SYMMETRIC_SIZE", "RSHMEM_REMOTE_TRANSPORT"] {
        let (code, text, _) = run("ring", &[(var, "")]);
        assert_ne!(code, Some(0), "{var}=\"\" was taken as the default:\n{text}");
        assert!(text.contains(&format!("rshmem_init: {var} is set but empty")), "{var}=\"\": the error does not name it:\n{text}");
    }
}

#[test]
fn a_zero_heap_size_is_reported_under_the_name_set() {
    for var in ["NVSHMEM_SYMMETRIC_SIZE", "RSHMEM_SYMMETRIC_SIZE"] {
        let (code, text, _) = run("ring", &[(var, "0")]);
        assert_ne!(code, Some(0), "{var}=0 succeeded:\n{text}");
        assert!(text.contains(&format!("{var}=0: the symmetric heap needs at least one byte")), "{var}=0 is not reported by that name:\n{text}");
    }
}

#[test]
fn a_bad_bootstrap_timeout_stops_init_naming_it_and_the_pe() {
    for bad in ["soon", "0", "-1"] {
        let (code, text, took) = run_np(2, "ring", &[("RSHMEM_BOOTSTRAP_TIMEOUT", bad)]);
        assert_ne!(code, Some(0), "RSHMEM_BOOTSTRAP_TIMEOUT={bad:?} was accepted:\n{text}");
        assert!(!text.contains("ring ok") && !text.contains("received message"), "RSHMEM_BOOTSTRAP_TIMEOUT={bad:?}: a PE ran past init:\n{text}");
        // Each PE that reports (rshmrun ends the others after the first failure) names the variable, its
        // value and its own PE number (known from the launcher's variables although init failed).
        let want = |pe: usize| format!("[pe {pe}] PE {pe}: FAILED: rshmem_init: RSHMEM_BOOTSTRAP_TIMEOUT={bad:?} is not valid: expected a positive number of seconds");
        assert!((0..2).any(|pe| text.contains(&want(pe))), "RSHMEM_BOOTSTRAP_TIMEOUT={bad:?}: no PE names it ({}):\n{text}", want(0));
        assert!(!text.contains("PE ?") && !text.contains("PE -1"), "RSHMEM_BOOTSTRAP_TIMEOUT={bad:?}: a PE without its number:\n{text}");
        // Refused before the bootstrap: no PE waited for another (the bootstrap would wait up to 30 s).
        assert!(took < Duration::from_secs(15), "RSHMEM_BOOTSTRAP_TIMEOUT={bad:?}: took {took:?}:\n{text}");
    }
}
