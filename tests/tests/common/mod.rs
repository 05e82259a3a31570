//! Helpers shared by the multi-process tests of this crate (suite.rs, suite_nodes.rs, coll.rs, nodes.rs, soak.rs);
//! `suite` is the one definition of the multi-process suite.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Output;

/// The directory of the workspace's binaries: target/<profile>/deps/TEST-xxxx -> target/<profile>.
pub fn bin_dir() -> PathBuf {
    let mut p = std::env::current_exe().unwrap();
    p.pop();
    if p.ends_with("deps") {
        p.pop();
    }
    p
}

/// A workspace binary (rshmrun, rshmem-test-pe, rshmem-soak), which must have been built.
pub fn tool(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(p.exists(), "{} not built: run `cargo build --workspace` (or scripts/test.sh) first", p.display());
    p
}

/// stdout then stderr of a finished process, as text.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

pub mod suite;
