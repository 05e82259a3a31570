//! Issue 19's scaling test (CPU backend, `rshmrun --nodes 2 -np 2`, the proxy transport): the same
//! bytes sent to a PE on another node by 32 concurrent streams of small puts must not take longer
//! than by one stream. The shapes are NVSHMEM's shmem_put_bw at 1 x 32 and 32 x 32 ("more blocks never
//! slower"): one stream puts 128 KiB per call, 32 streams put 4 KiB per call each, 16 MiB in all
//! (scenario `remote_scaling`, tests/src/scaling.rs; best of 5 launches of each shape, every byte
//! checked at the target). A ratio, not a time: 32 streams / one stream <= 1.5, which a machine of
//! 2 cores meets when the engine keeps many small requests in flight and does not serialize them
//! (the bound is generous: a concurrent engine is expected near 1 or below). The job runs up to 3
//! times; the test passes as soon as one run meets the bound and prints every run's times.

mod common;

use common::{text, tool};
use std::process::{Command, Stdio};

const BOUND: f64 = 1.5;

/// One job: the scenario's line (the times and the ratio), or the job's output when it failed.
fn run_once() -> Result<(String, f64), String> {
    let mut cmd = Command::new(tool("rshmrun"));
    cmd.args(["--nodes", "2", "-np", "2", "--timeout", "120"]).arg(tool("rshmem-test-pe")).arg("remote_scaling");
    cmd.env("RSHMEM_REMOTE_TRANSPORT", "proxy").env("RSHMEM_BACKEND", "cpu").env("RSHMEM_SYMMETRIC_SIZE", "128m");
    cmd.env("RSHMEM_BOOTSTRAP_TIMEOUT", "10").env("RSHMEM_WAIT_TIMEOUT", "100");
    for k in ["RSHMEM_DEBUG", "RSHMEM_TEST_SCALE_BYTES", "RSHMEM_TEST_SCALE_PIECE", "RSHMEM_TEST_SCALE_REPS", "RSHMEM_TEST_NETNS"] {
        cmd.env_remove(k);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run rshmrun");
    let t = text(&out);
    if !out.status.success() {
        return Err(format!("the remote_scaling job failed:\n{t}"));
    }
    let line = t.lines().find(|l| l.contains("PE 0: remote_scaling:")).ok_or_else(|| format!("no remote_scaling line:\n{t}"))?;
    let ratio = line
        .rsplit("one stream ")
        .next()
        .and_then(|r| r.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("no ratio in {line:?}"))?;
    Ok((line.trim().to_string(), ratio))
}

#[test]
fn thirty_two_streams_of_small_puts_are_not_slower_than_one_stream() {
    let mut seen = vec![];
    for attempt in 1..=3 {
        let (line, ratio) = run_once().unwrap_or_else(|e| panic!("{e}"));
        // Both times, whatever the outcome (cargo test shows them with --nocapture, and on failure).
        println!("attempt {attempt}: {line}");
        seen.push(line);
        if ratio <= BOUND {
            return;
        }
    }
    panic!(
        "32 concurrent streams of 4 KiB puts took more than {BOUND} x the time of one stream of 128 KiB puts (the same 16 MiB to a PE on another node, proxy transport) in every one of 3 runs:\n{}",
        seen.join("\n")
    );
}
