//! The Python package (python/): its pytest suite (python/tests) run by every PE under rshmrun on the
//! CPU backend, with -np 2, -np 4, across two simulated nodes (--nodes 2 -np 4), and
//! once on torch CPU tensors instead of NumPy arrays. The package is the workspace's build of the
//! extension (target/<profile>/lib_rshmem.so) beside python/rshmem's sources, so this tests the code
//! of this checkout; scripts/check-python.sh tests the `pip install` path.
//!
//! Needs python3 with numpy and pytest (and torch for the torch run and the torch.distributed test);
//! scripts/setup.sh installs them. Without them the tests skip, saying so, or fail under
//! RSHMEM_TEST_NO_SKIP=1 (scripts/test.sh), as does the suite itself for a test it cannot run.

mod common;

use common::{bin_dir, text, tool};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn python() -> String {
    std::env::var("RSHMEM_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether `python` imports `modules`; the reason when it does not.
fn imports(modules: &str) -> Result<(), String> {
    let out = Command::new(python()).args(["-c", &format!("import {modules}")]).stdin(Stdio::null()).output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("{} cannot import {modules} ({}); scripts/setup.sh installs them", python(), text(&o).trim())),
        Err(e) => Err(format!("no {} ({e}); scripts/setup.sh installs Python's packages", python())),
    }
}

/// A directory holding the package `rshmem` as this checkout builds it: python/rshmem's sources and
/// the workspace's extension module, made once per test process.
fn package_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = bin_dir().join("lib_rshmem.so");
        assert!(lib.exists(), "{} not built: run `cargo build --workspace --release` first", lib.display());
        let dir = bin_dir().join("python-test");
        let pkg = dir.join("rshmem");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&pkg).unwrap();
        for entry in std::fs::read_dir(root().join("python/rshmem")).unwrap() {
            let p = entry.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, pkg.join(p.file_name().unwrap())).unwrap();
            }
        }
        std::fs::copy(&lib, pkg.join("_rshmem.so")).unwrap();
        dir
    })
}

/// `rshmrun LAUNCH python3 -m pytest python/tests` with `env`; asserts that every PE passed every test
/// (at least `min_passed`), with `xfailed` expected failures (named in the suite) and no skip where
/// skips fail. None when Python's packages are missing (after the skip).
fn pytest(launch: &[&str], env: &[(&str, &str)], min_passed: usize, xfailed: usize) -> Option<String> {
    if let Err(why) = imports("numpy, pytest") {
        rshmem_test_support::skip("the Python package's tests", &why);
        return None;
    }
    let np: usize = launch.windows(2).find(|w| w[0] == "-np").map(|w| w[1].parse().unwrap()).unwrap();
    let out = Command::new(tool("rshmrun"))
        .args(launch)
        .args(["--timeout", "600"])
        .arg(python())
        .args(["-m", "pytest", "-q", "-rfEsxX", "-p", "no:cacheprovider"])
        .arg(root().join("python/tests"))
        .current_dir(root())
        .env("PYTHONPATH", package_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("RSHMEM_BACKEND", "cpu")
        .env("RSHMEM_WAIT_TIMEOUT", "120")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run rshmrun");
    let t = text(&out);
    assert!(out.status.success(), "rshmrun {launch:?} pytest failed (exit {:?}):\n{t}", out.status.code());
    for pe in 0..np {
        let prefix = format!("[pe {pe}] ");
        // pytest's last line: "250 passed, 2 xfailed in 15.91s".
        let summary = t
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .rfind(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(" in "))
            .unwrap_or_else(|| panic!("PE {pe} printed no pytest summary:\n{t}"));
        let counts: Vec<(String, usize)> = summary[..summary.rfind(" in ").unwrap()]
            .split(", ")
            .filter_map(|part| {
                let (n, what) = part.trim().split_once(' ')?;
                Some((what.to_string(), n.parse().ok()?))
            })
            .collect();
        let count = |what: &str| counts.iter().find(|(w, _)| w == what).map_or(0, |(_, n)| *n);
        assert!(count("passed") >= min_passed, "PE {pe}: {} passed, expected at least {min_passed}: {summary}\n{t}", count("passed"));
        for bad in ["failed", "error", "errors", "xpassed"] {
            assert_eq!(count(bad), 0, "PE {pe}: {summary}\n{t}");
        }
        assert_eq!(count("xfailed"), xfailed, "PE {pe}: expected {xfailed} expected failures: {summary}\n{t}");
        if rshmem_test_support::skips_fail() {
            assert_eq!(count("skipped"), 0, "PE {pe} skipped tests under {}=1: {summary}\n{t}", rshmem_test_support::NO_SKIP);
        }
    }
    Some(t)
}

/// The suite's size (the tests collected on NumPy arrays); a run that collects far fewer is broken.
const MIN_NUMPY: usize = 240;
const MIN_TORCH: usize = 250;

#[test]
fn pytest_two_pes() {
    pytest(&["-np", "2"], &[], MIN_NUMPY, 0);
}

#[test]
fn pytest_four_pes() {
    pytest(&["-np", "4"], &[], MIN_NUMPY, 0);
}

/// Two simulated nodes of two PEs: puts, gets, signals and collectives cross the proxy transport,
/// peer views of the other node are None; init from a unique id and from a torch.distributed group,
/// and finalize, across nodes.
#[test]
fn pytest_two_nodes() {
    pytest(&["--nodes", "2", "-np", "4"], &[], MIN_NUMPY, 0);
}

/// The same tests on torch CPU tensors over the heap (bfloat16 included).
#[test]
fn pytest_torch_tensors() {
    if let Err(why) = imports("torch") {
        rshmem_test_support::skip("the Python package's tests on torch tensors", &why);
        return;
    }
    pytest(&["-np", "2"], &[("RSHMEM_TEST_ARRAYS", "torch")], MIN_TORCH, 0);
}
