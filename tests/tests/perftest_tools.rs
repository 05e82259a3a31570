//! The perftest comparison tools without a GPU: `bench/perftest_score.py --self-test`,
//! `bench/hw_bounds.py --self-test` (issue 20's hardware-bound and C++ figures from synthetic logs, read
//! back by the score's Targets section), and
//! `bench/perftest-run.sh` over a made-up set of "programs" (shell scripts that print NVSHMEM's
//! machine-readable lines) under the real rshmrun: each runs with its argument lines (SHORT=1 capping
//! the iteration counts), the NVSHMEM set under `rshmrun --pmi` (its scripts check that PMI_FD is
//! there), and the score says which rows lose.

mod common;

use common::{text, tool};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn score_self_test() {
    let out = Command::new("python3").arg(root().join("bench/perftest_score.py")).arg("--self-test").output().expect("python3");
    assert!(out.status.success() && text(&out).contains("self-test: ok"), "{}", text(&out));
}

#[test]
fn hw_bounds_self_test() {
    let out = Command::new("python3").arg(root().join("bench/hw_bounds.py")).arg("--self-test").output().expect("python3");
    assert!(out.status.success() && text(&out).contains("hw_bounds self-test: ok"), "{}", text(&out));
}

/// A fake program: PE 0 prints its arguments and one bandwidth row (`+`) and one latency row (`-`).
fn program(path: &Path, bw: &str, lat: &str, needs_pmi: bool) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let check = if needs_pmi { "[ -n \"$PMI_FD\" ] || { echo 'no PMI_FD' >&2; exit 3; }\n" } else { "" };
    let script = format!(
        "#!/bin/sh\n{check}[ \"${{RSHMEM_PE:-$PMI_RANK}}\" = 0 ] || exit 0\necho \"args: $*\"\n\
         echo \"&&&& PERF fake___uni___size__4096___BW {bw} +GB/sec\"\n\
         echo \"&&&& PERF fake___lat___size__8___latency {lat} -us\"\n"
    );
    fs::write(path, script).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn run_and_score_a_made_up_set() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("perftest-run");
    let _ = fs::remove_dir_all(&dir);
    // rshmem: twice the bandwidth, but twice the latency: scores 2.0 and 0.5.
    program(&dir.join("rshmem/device/pt-to-pt/fake"), "8.0", "4.0", false);
    program(&dir.join("nvshmem/device/pt-to-pt/fake"), "4.0", "2.0", true);
    fs::create_dir_all(dir.join("args/device/pt-to-pt")).unwrap();
    fs::write(dir.join("args/device/pt-to-pt/fake.args"), "-n 200 -w 20 -b 4 -e 8\n").unwrap();
    // A figure another program of the same call measured (PERFTEST_EXTRA): marked against its target.
    let extra = dir.join("extra");
    fs::create_dir_all(&extra).unwrap();
    fs::write(extra.join("compare.md"), "# rshmem vs NVSHMEM\n\nput_bw_ratio: 1.200\n").unwrap();
    let out = Command::new("bash")
        .arg(root().join("bench/perftest-run.sh"))
        .arg(&dir)
        .env("RSHMRUN", tool("rshmrun"))
        .env("NVSHMEM_HOME", &dir)
        .env("SHORT", "1")
        .env("T", "30")
        .env("PERFTEST_EXTRA", &extra)
        .output()
        .expect("run perftest-run.sh");
    let t = text(&out);
    assert!(out.status.success(), "perftest-run.sh failed:\n{t}");
    let log = |lib: &str| fs::read_to_string(dir.join(format!("logs/{lib}/fake.log"))).unwrap();
    for lib in ["rshmem", "nvshmem"] {
        assert!(log(lib).contains("args: -n 20 -w 5 -b 4 -e 8"), "{lib}: SHORT=1 did not cap -n and -w:\n{}", log(lib));
        assert!(log(lib).contains("# exit: 0"), "{lib} run failed:\n{}", log(lib));
    }
    assert!(log("nvshmem").contains(" --pmi "), "the NVSHMEM set ran without --pmi:\n{}", log("nvshmem"));
    assert!(t.contains("| fake | 2 | 1.000 | 0.500 (fake/lat 8 B latency: 4 vs 2 us)"), "{t}");
    assert!(t.contains("perftest_min_geomean: 1.000 (fake)") && t.contains("perftest_worst_row: 0.500"), "{t}");
    // The targets: fake is no collective; its rows fail "no row below 0.9"; put_bw_ratio comes from
    // PERFTEST_EXTRA; the hardware bounds are measured by no program here.
    assert!(t.contains("## Targets (issue 20)"), "{t}");
    assert!(t.contains("| no row below 0.9 | worst 0.500 (fake: fake/lat 8 B latency, 4 vs 2 us); 1 of 2 rows below | >= 0.9 | miss |"), "{t}");
    assert!(t.contains("| 1.2 (from compare.md) | >= 1.08 | **pass** |"), "{t}");
    assert!(t.contains("| not measured by this script |"), "{t}");
    assert!(t.contains("perftest_targets: 2 pass, 1 miss, 5 not measured"), "{t}");
    assert!(dir.join("perftest-score.md").exists() && dir.join("perftest-score.csv").exists());
}
