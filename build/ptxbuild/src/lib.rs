//! Used from build scripts: compiles a `no_std` crate of this workspace to PTX (nightly rustc,
//! `-Zbuild-std=core`, `--emit=asm`) so the ordinary stable `cargo build` also produces the device code.
//! When nightly or its rust-src is missing, the build still succeeds: an empty PTX is written, a
//! cargo warning says why, and the CUDA backend reports it at run time.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `package` (at `crate_dir`, which must be in this workspace) for `arch` and writes
/// `$OUT_DIR/<file_name>`. Returns the path.
pub fn build(package: &str, crate_dir: &Path, arch: &str, file_name: &str) -> PathBuf {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let out = out_dir.join(file_name);
    println!("cargo:rerun-if-env-changed=RSHMEM_SKIP_PTX");
    println!("cargo:rerun-if-changed={}", crate_dir.join("src").display());
    println!("cargo:rerun-if-changed={}", crate_dir.join("Cargo.toml").display());
    let ws = workspace_root(crate_dir);
    // The device crate is compiled into every PTX: rebuild when it changes too.
    println!("cargo:rerun-if-changed={}", ws.join("device/src").display());
    if std::env::var_os("RSHMEM_SKIP_PTX").is_some() {
        return write_empty(&out, "RSHMEM_SKIP_PTX is set");
    }
    if let Some(why) = nightly_missing() {
        return write_empty(&out, &why);
    }
    let target_dir = ws.join("target").join(format!("ptx-{arch}"));
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", "cargo", "rustc", "-q", "-p", package, "--release"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core", "--manifest-path"])
        .arg(ws.join("Cargo.toml"))
        .args(["--", "-C", &format!("target-cpu={arch}"), "--emit=asm"]);
    // A clean environment: the outer (stable) build's variables must not leak into the nightly one.
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO") || k.starts_with("RUSTC") || k == "RUSTFLAGS" || k == "RUSTDOCFLAGS" || k == "RUSTUP_TOOLCHAIN" {
            cmd.env_remove(&k);
        }
    }
    cmd.env("CARGO_TARGET_DIR", &target_dir)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .env("RUSTFLAGS", "-Zunstable-options -Cpanic=immediate-abort");
    let deps = target_dir.join("nvptx64-nvidia-cuda/release/deps");
    let stem = package.replace('-', "_");
    let deps_dir = deps.clone();
    let find = move || {
        std::fs::read_dir(&deps_dir)
            .ok()
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().to_string();
                n.starts_with(&format!("{stem}-")) && n.ends_with(".s")
            })
            .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
            .map(|e| e.path())
    };
    for attempt in 0..2 {
        match cmd.output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!("PTX build of {package} failed:\n{}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => return write_empty(&out, &format!("rustup not runnable: {e}")),
        }
        if find().is_some() || attempt == 1 {
            break;
        }
        // Up to date but its .s was removed: clean that package and build again.
        let _ = Command::new("rustup")
            .args(["run", "nightly", "cargo", "clean", "-q", "-p", package, "--release", "--target", "nvptx64-nvidia-cuda"])
            .arg("--manifest-path")
            .arg(ws.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target_dir)
            .status();
    }
    let newest = find();
    match newest {
        Some(p) => {
            std::fs::copy(p, &out).expect("copy PTX");
        }
        None => return write_empty(&out, "nightly build produced no PTX"),
    }
    out
}

/// Why the nightly PTX toolchain cannot be used here, if it cannot (scripts/setup.sh installs it).
fn nightly_missing() -> Option<String> {
    let out = Command::new("rustup").args(["component", "list", "--toolchain", "nightly", "--installed"]).output();
    match out {
        Err(e) => Some(format!("rustup not runnable: {e}")),
        Ok(o) if !o.status.success() => Some("the nightly toolchain is not installed (run scripts/setup.sh)".into()),
        Ok(o) if !String::from_utf8_lossy(&o.stdout).contains("rust-src") => {
            Some("nightly's rust-src is not installed (run scripts/setup.sh)".into())
        }
        Ok(_) => None,
    }
}

fn write_empty(out: &Path, why: &str) -> PathBuf {
    println!("cargo:warning=no PTX built ({why}); the CUDA backend will be unavailable in this build");
    std::fs::write(out, "").expect("write empty PTX");
    out.to_path_buf()
}

fn workspace_root(crate_dir: &Path) -> PathBuf {
    let mut d = crate_dir.to_path_buf();
    loop {
        let m = d.join("Cargo.toml");
        if m.exists() && std::fs::read_to_string(&m).map(|t| t.contains("[workspace]")).unwrap_or(false) {
            return d;
        }
        if !d.pop() {
            return crate_dir.to_path_buf();
        }
    }
}
