//! Used from build scripts: compiles a `no_std` crate of this workspace to PTX (nightly rustc,
//! `-Zbuild-std=core`, `--emit=asm`) so the ordinary stable `cargo build` also produces the device code.
//!
//! # What happens when the PTX toolchain is missing
//! The PTX build needs rustup's `nightly` toolchain with its `rust-src` component. When either is
//! missing, the build script **installs it**, saying so in `cargo:warning` lines
//! (`rustup toolchain install nightly --profile minimal --component rust-src`, or
//! `rustup component add rust-src --toolchain nightly`). When that is impossible (no rustup, offline,
//! the install fails) the build **stops** with an error that gives the one command to run and says that
//! `RSHMEM_SKIP_PTX=1` makes a CPU-only build on purpose.
//!
//! Why install first, then stop, and never fall back to an empty PTX: the README's first command,
//! `cargo build --release && rshmrun ...`, must give a GPU-capable build on a fresh machine, and a cargo
//! warning is easy to miss. A silent CPU-only build used to be left behind, and because a *successful*
//! build script is not re-run until a file it watches changes, installing `rust-src` afterwards did not
//! help: the empty PTX stayed until `cargo clean`, and the run-time error then blamed a toolchain state
//! that was no longer true. A build script that stops is re-run by every later `cargo build`, so it
//! recovers by itself once the toolchain is there. Installing a toolchain component from a build
//! script is unusual, but it is what `scripts/setup.sh` would do anyway, it touches only rustup's own
//! directory, and it is announced; without rustup or network it costs one failed attempt.
//!
//! # When the build re-runs
//! Besides the sources, the build script watches the nightly toolchain itself (its
//! `lib/rustlib/components` list, rewritten when a component is added or removed, and its `rustc`,
//! replaced on `rustup update`), so a toolchain change rebuilds the PTX.
//!
//! # CPU-only builds on purpose
//! `RSHMEM_SKIP_PTX=1` writes an empty PTX and records why in the `RSHMEM_PTX_MISSING_WHY` compile-time
//! variable of the crate being built (empty when the PTX was built), so the CUDA backend's run-time
//! error states the real reason. `RSHMEM_SKIP_PTX=0` or empty means "build the PTX"; any other value
//! is an error.
//!
//! The three build scripts that use this (runtime, examples, tests) may run at the same time: a file
//! lock in the target directory serializes the toolchain check, any install, and the nightly build.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The command that installs everything the PTX build needs on a machine with rustup.
const INSTALL_ALL: &str = "rustup toolchain install nightly --profile minimal --component rust-src";
/// The command that adds the missing component when nightly itself is there.
const ADD_SRC: &str = "rustup component add rust-src --toolchain nightly";

/// Builds `package` (at `crate_dir`, which must be in this workspace) for `arch` and writes
/// `$OUT_DIR/<file_name>`. Returns the path. When the PTX cannot be built, the build stops with an
/// error (see the module documentation); with `RSHMEM_SKIP_PTX=1` the file is empty.
pub fn build(package: &str, crate_dir: &Path, arch: &str, file_name: &str) -> PathBuf {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let out = out_dir.join(file_name);
    // Never leave an older PTX behind when this run stops.
    let _ = std::fs::remove_file(&out);
    println!("cargo:rerun-if-env-changed=RSHMEM_SKIP_PTX");
    println!("cargo:rerun-if-env-changed=RUSTUP_HOME");
    println!("cargo:rerun-if-changed={}", crate_dir.join("src").display());
    println!("cargo:rerun-if-changed={}", crate_dir.join("Cargo.toml").display());
    let ws = workspace_root(crate_dir);
    // The device crate, and the ibgda crate it uses, are compiled into every PTX: rebuild when they
    // change too.
    println!("cargo:rerun-if-changed={}", ws.join("device/src").display());
    println!("cargo:rerun-if-changed={}", ws.join("ibgda/src").display());
    match skip_requested() {
        Err(e) => stop(&[e]),
        Ok(true) => {
            let why = "RSHMEM_SKIP_PTX=1 was set when it was built (a CPU-only build on purpose); \
                       rebuild without it (`cargo build --release`) to use GPUs";
            println!("cargo:warning=no PTX built for {package}: RSHMEM_SKIP_PTX=1 is set; this build runs on the CPU backend only");
            println!("cargo:rustc-env=RSHMEM_PTX_MISSING_WHY={why}");
            std::fs::write(&out, "").unwrap_or_else(|e| stop(&[format!("cannot write {}: {e}", out.display())]));
            return out;
        }
        Ok(false) => println!("cargo:rustc-env=RSHMEM_PTX_MISSING_WHY="),
    }

    let target_root = ws.join("target");
    let target_dir = target_root.join(format!("ptx-{arch}"));
    // Held until this function returns: one build script at a time checks, installs and builds.
    let _lock = lock(&target_root);
    let sysroot = ensure_toolchain().unwrap_or_else(|e| stop(&e));
    println!("cargo:rerun-if-changed={}", sysroot.join("lib/rustlib/components").display());
    println!("cargo:rerun-if-changed={}", sysroot.join("bin/rustc").display());

    let mut cmd = rustup();
    cmd.args(["run", "nightly", "cargo", "rustc", "-q", "-p", package, "--release"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core", "--manifest-path"])
        .arg(ws.join("Cargo.toml"))
        .args(["--", "-C", &format!("target-cpu={arch}"), "--emit=asm"]);
    // A clean environment: the outer (stable) build's variables must not leak into the nightly one.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO") || k.starts_with("RUSTC") || k == "RUSTFLAGS" || k == "RUSTDOCFLAGS" {
            cmd.env_remove(&*k);
        }
    }
    cmd.env("CARGO_TARGET_DIR", &target_dir)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .env("RUSTFLAGS", "-Zunstable-options -Cpanic=immediate-abort");
    let deps = target_dir.join("nvptx64-nvidia-cuda/release/deps");
    let stem = package.replace('-', "_");
    let find = || {
        std::fs::read_dir(&deps)
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
            Ok(o) => stop(&[
                format!("the PTX build of {package} (nightly cargo) failed:"),
                tail(&o.stderr, 40),
                "For a CPU-only build on purpose, build with RSHMEM_SKIP_PTX=1.".to_string(),
            ]),
            Err(e) => stop(&[format!("cannot run rustup for the PTX build of {package}: {e}")]),
        }
        if find().is_some() || attempt == 1 {
            break;
        }
        // Up to date but its .s was removed: clean that package and build again.
        let _ = rustup()
            .args(["run", "nightly", "cargo", "clean", "-q", "-p", package, "--release", "--target", "nvptx64-nvidia-cuda"])
            .arg("--manifest-path")
            .arg(ws.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target_dir)
            .output();
    }
    let Some(ptx) = find() else {
        stop(&[format!("the nightly build of {package} succeeded but left no PTX (*.s) in {}", deps.display())])
    };
    std::fs::copy(&ptx, &out).unwrap_or_else(|e| stop(&[format!("cannot copy {} to {}: {e}", ptx.display(), out.display())]));
    out
}

/// `Ok(true)` for `RSHMEM_SKIP_PTX=1`, `Ok(false)` when unset, empty or `0`.
fn skip_requested() -> Result<bool, String> {
    match std::env::var_os("RSHMEM_SKIP_PTX") {
        None => Ok(false),
        Some(v) => match v.to_str() {
            Some("1") => Ok(true),
            Some("0") | Some("") => Ok(false),
            _ => Err(format!("RSHMEM_SKIP_PTX={v:?} is not valid: use RSHMEM_SKIP_PTX=1 for a CPU-only build, or leave it unset")),
        },
    }
}

/// A `rustup` command that never installs anything by itself and prints no backtraces.
fn rustup() -> Command {
    let mut c = Command::new("rustup");
    c.env("RUSTUP_AUTO_INSTALL", "0").env("RUST_BACKTRACE", "0").env_remove("RUSTUP_TOOLCHAIN");
    c
}

/// What the PTX build is missing.
enum Missing {
    Nightly,
    RustSrc,
}

/// Whether nightly with rust-src is installed; `Err` when rustup cannot tell us.
fn probe() -> Result<Option<Missing>, String> {
    let o = rustup()
        .args(["component", "list", "--toolchain", "nightly", "--installed"])
        .output()
        .map_err(|e| format!("rustup cannot be run ({e}); the PTX build needs rustup (https://rustup.rs) and its nightly toolchain"))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        if err.contains("not installed") {
            return Ok(Some(Missing::Nightly));
        }
        return Err(format!("`rustup component list --toolchain nightly --installed` failed: {}", tail(&o.stderr, 5)));
    }
    let has_src = String::from_utf8_lossy(&o.stdout).lines().any(|l| l.split_whitespace().next() == Some("rust-src"));
    Ok(if has_src { None } else { Some(Missing::RustSrc) })
}

/// Makes sure nightly with rust-src is installed, installing what is missing; returns nightly's
/// sysroot. `Err` holds the lines of the error that stops the build.
fn ensure_toolchain() -> Result<PathBuf, Vec<String>> {
    let give_up = |what: String, cmd: &str| {
        vec![
            format!("cannot build the device library PTX: {what}"),
            format!("Run this once, then build again:    {cmd}"),
            "(scripts/setup.sh installs it too, with everything the tests need.)".to_string(),
            "For a CPU-only build on purpose (no CUDA backend), build with RSHMEM_SKIP_PTX=1.".to_string(),
        ]
    };
    let missing = probe().map_err(|e| give_up(e, INSTALL_ALL))?;
    if let Some(m) = missing {
        let (what, cmd, args): (&str, &str, &[&str]) = match m {
            Missing::Nightly => (
                "the nightly toolchain with rust-src",
                INSTALL_ALL,
                &["toolchain", "install", "nightly", "--profile", "minimal", "--component", "rust-src"],
            ),
            Missing::RustSrc => ("nightly's rust-src component", ADD_SRC, &["component", "add", "rust-src", "--toolchain", "nightly"]),
        };
        println!("cargo:warning=the device library PTX needs {what}, which is missing: installing it now with `{cmd}`");
        let o: Output = rustup().args(args).output().map_err(|e| give_up(format!("rustup cannot be run ({e})"), cmd))?;
        if !o.status.success() {
            return Err(give_up(format!("{what} is missing, and `{cmd}` failed: {}", tail(&o.stderr, 5)), cmd));
        }
        match probe() {
            Ok(None) => println!("cargo:warning=installed {what} for the device library PTX"),
            Ok(Some(_)) => return Err(give_up(format!("{what} is still missing after `{cmd}` succeeded"), cmd)),
            Err(e) => return Err(give_up(e, cmd)),
        }
    }
    let o = rustup()
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .output()
        .map_err(|e| give_up(format!("rustup cannot be run ({e})"), INSTALL_ALL))?;
    if !o.status.success() {
        return Err(give_up(format!("nightly rustc does not run: {}", tail(&o.stderr, 5)), INSTALL_ALL));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
}

/// An exclusive lock on `<dir>/.rshmem-ptx.lock`, released when the file is dropped.
fn lock(dir: &Path) -> std::fs::File {
    let path = dir.join(".rshmem-ptx.lock");
    let f = std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path))
        .unwrap_or_else(|e| stop(&[format!("cannot open the PTX build lock {}: {e}", path.display())]));
    f.lock().unwrap_or_else(|e| stop(&[format!("cannot lock {}: {e}", path.display())]));
    f
}

/// Stops the build: cargo prints each line as an error and fails. No PTX file is written, so even a
/// cargo that ignored the directive could not compile the crate.
fn stop(lines: &[String]) -> ! {
    for l in lines {
        for part in l.lines() {
            println!("cargo::error={part}");
        }
    }
    std::process::exit(0)
}

/// The last `n` non-empty lines of a command's output.
fn tail(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let t = lines[lines.len().saturating_sub(n)..].join("\n");
    if t.is_empty() { "(no output)".into() } else { t }
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
