//! Compiles a `no_std` crate of kernels to PTX from a build script (nightly rustc,
//! `-Zbuild-std=core`, `--emit=asm`), so that the ordinary stable `cargo build` of a host program also
//! produces its device code.
//!
//! # Use
//! A host crate that launches the kernels of a kernel crate names this crate as a build-dependency
//! and compiles the kernel crate from its `build.rs`:
//! ```no_run
//! // build.rs of the host crate, in its `fn main`; the kernel crate lies in `kernels/` beside it.
//! // Writes $OUT_DIR/<the kernel crate's library name>.ptx, e.g. my_app_kernels.ptx.
//! rshmem_ptxbuild::PtxBuilder::new("kernels").build();
//! ```
//! The host code then embeds it: `include_str!(concat!(env!("OUT_DIR"), "/my_app_kernels.ptx"))`
//! (see `rshmem::kernels::KernelSet`).
//!
//! The kernel crate can lie anywhere: in the caller's workspace or its own, with rshmem as a path,
//! git or registry dependency. Nothing here assumes where rshmem's own crates are:
//! - the nightly build runs on the kernel crate's own manifest, in the kernel crate's directory, so
//!   cargo resolves its dependencies (`rshmem-device` among them) from the kernel crate's workspace
//!   and its `Cargo.lock`, exactly as the host build resolves them;
//! - its target directory is `ptx-<arch>` inside the target directory of the build that runs the build
//!   script (found from `OUT_DIR`), so each project keeps its own;
//! - the files that make up the PTX (the kernel crate's sources and those of every path dependency,
//!   `rshmem-device` and `rshmem-ibgda` included) are those listed by the nightly build's dep-info
//!   file, and the build script is re-run when any of them, or the workspace's `Cargo.lock`, changes.
//!
//! A crate of another workspace than the calling package's (`rshmem-device`, compiled by rshmem's own
//! build script, when rshmem is a package unpacked from a registry), or in cargo's own directory (a git
//! checkout), or in no workspace with a `Cargo.lock`, is resolved with a lock file of its own in that
//! target directory (`resolver.lockfile-path`), starting from the one the package ships, so no file is
//! ever written into the source tree of a dependency.
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
//! Besides the sources (above), the build script watches the nightly toolchain itself (its
//! `lib/rustlib/components` list, rewritten when a component is added or removed, and its `rustc`,
//! replaced on `rustup update`), so a toolchain change rebuilds the PTX.
//!
//! # CPU-only builds on purpose
//! `RSHMEM_SKIP_PTX=1` writes an empty PTX and records why in the `RSHMEM_PTX_MISSING_WHY` compile-time
//! variable of the crate being built (empty when the PTX was built), so the CUDA backend's run-time
//! error states the real reason. `RSHMEM_SKIP_PTX=0` or empty means "build the PTX"; any other value
//! is an error. On docs.rs (`DOCS_RS` set), which documents crates without network or rustup, the PTX
//! is empty in the same way.
//!
//! Several build scripts that use this may run at the same time (rshmem's own and the caller's): a
//! file lock in the target directory serializes the toolchain check, any install, and the nightly
//! build.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The command that installs everything the PTX build needs on a machine with rustup.
const INSTALL_ALL: &str = "rustup toolchain install nightly --profile minimal --component rust-src";
/// The command that adds the missing component when nightly itself is there.
const ADD_SRC: &str = "rustup component add rust-src --toolchain nightly";
/// The GPU architecture the PTX is built for unless [`PtxBuilder::arch`] says otherwise (Hopper).
pub const DEFAULT_ARCH: &str = "sm_90";

/// Compiles one kernel crate to PTX; see the [crate documentation](crate).
#[derive(Clone, Debug)]
#[must_use = "nothing is built until `build` is called"]
pub struct PtxBuilder {
    crate_dir: PathBuf,
    arch: String,
    file_name: Option<String>,
}

impl PtxBuilder {
    /// The kernel crate in `crate_dir` (the directory of its `Cargo.toml`); a relative path is taken
    /// from the directory of the package whose build script runs (`CARGO_MANIFEST_DIR`).
    pub fn new(crate_dir: impl Into<PathBuf>) -> PtxBuilder {
        PtxBuilder { crate_dir: crate_dir.into(), arch: DEFAULT_ARCH.to_string(), file_name: None }
    }

    /// The GPU architecture (`sm_90`, the default, `sm_90a`, ...), passed as `-C target-cpu`. On GPUs
    /// the kernels are JIT-linked with the device library PTX that rshmem embeds, built for
    /// [`DEFAULT_ARCH`]: another architecture is for a device library built for it too.
    pub fn arch(mut self, arch: impl Into<String>) -> PtxBuilder {
        self.arch = arch.into();
        self
    }

    /// The name of the file written in `OUT_DIR` (default: the kernel crate's library name with
    /// `.ptx`, e.g. `my_app_kernels.ptx` for a package `my-app-kernels`).
    pub fn file_name(mut self, name: impl Into<String>) -> PtxBuilder {
        self.file_name = Some(name.into());
        self
    }

    /// Builds the PTX and writes it to `$OUT_DIR/<file name>`; returns that path. When the PTX cannot
    /// be built, the build stops with an error that says why and what to do (see the
    /// [crate documentation](crate)); with `RSHMEM_SKIP_PTX=1` the file is empty.
    pub fn build(self) -> PathBuf {
        let out_dir = PathBuf::from(env_or_stop("OUT_DIR"));
        let crate_dir = if self.crate_dir.is_absolute() {
            self.crate_dir.clone()
        } else {
            PathBuf::from(env_or_stop("CARGO_MANIFEST_DIR")).join(&self.crate_dir)
        };
        let manifest = crate_dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
            stop(&[format!(
                "rshmem-ptxbuild: cannot read {} ({e}): PtxBuilder::new takes the directory of the kernel crate's Cargo.toml",
                manifest.display()
            )])
        });
        let lib = lib_name(&text).unwrap_or_else(|e| stop(&[format!("rshmem-ptxbuild: {}: {e}", manifest.display())]));
        if let Err(e) = check_arch(&self.arch) {
            stop(&[format!("rshmem-ptxbuild: {e}")]);
        }
        let file_name = self.file_name.clone().unwrap_or_else(|| format!("{lib}.ptx"));
        if file_name.is_empty() || file_name.contains('/') || file_name == "." || file_name == ".." {
            stop(&[format!("rshmem-ptxbuild: the file name {file_name:?} is not a plain file name (it is written in OUT_DIR)")]);
        }
        let out = out_dir.join(&file_name);
        // Never leave an older PTX behind when this run stops.
        let _ = std::fs::remove_file(&out);
        println!("cargo:rerun-if-env-changed=RSHMEM_SKIP_PTX");
        println!("cargo:rerun-if-env-changed=RUSTUP_HOME");
        println!("cargo:rerun-if-changed={}", crate_dir.join("src").display());
        println!("cargo:rerun-if-changed={}", manifest.display());
        // docs.rs documents crates with no network and no rustup to install rust-src with: the docs
        // need no device code.
        println!("cargo:rerun-if-env-changed=DOCS_RS");
        if std::env::var_os("DOCS_RS").is_some() {
            println!("cargo:rustc-env=RSHMEM_PTX_MISSING_WHY=it was built for its documentation (DOCS_RS), with no device code");
            std::fs::write(&out, "").unwrap_or_else(|e| stop(&[format!("cannot write {}: {e}", out.display())]));
            return out;
        }
        match skip_requested() {
            Err(e) => stop(&[e]),
            Ok(true) => {
                let why = "RSHMEM_SKIP_PTX=1 was set when it was built (a CPU-only build on purpose); \
                           rebuild without it (`cargo build --release`) to use GPUs";
                println!("cargo:warning=no PTX built for {lib}: RSHMEM_SKIP_PTX=1 is set; this build runs on the CPU backend only");
                println!("cargo:rustc-env=RSHMEM_PTX_MISSING_WHY={why}");
                std::fs::write(&out, "").unwrap_or_else(|e| stop(&[format!("cannot write {}: {e}", out.display())]));
                return out;
            }
            Ok(false) => println!("cargo:rustc-env=RSHMEM_PTX_MISSING_WHY="),
        }

        let root = target_root(&out_dir);
        let target_dir = root.join(format!("ptx-{}", self.arch));
        // Held until this function returns: one build script at a time checks, installs and builds.
        let _lock = lock(&root);
        let sysroot = ensure_toolchain().unwrap_or_else(|e| stop(&e));
        println!("cargo:rerun-if-changed={}", sysroot.join("lib/rustlib/components").display());
        println!("cargo:rerun-if-changed={}", sysroot.join("bin/rustc").display());

        // The kernel crate's workspace and its lock file: used in place, as the host build uses it,
        // when that is the workspace of the package whose build script runs (the usual case: a kernel
        // crate beside its host crate). Otherwise (rshmem's device library, when rshmem is a package
        // unpacked from a registry or checked out by cargo) and wherever the workspace lies in cargo's
        // own directory or has no lock file, a lock file of this build's own in the target directory,
        // starting from the package's when it ships one: nothing is written into a dependency's sources.
        let ws = workspace_root(&manifest).unwrap_or_else(|e| stop(&[e]));
        let caller = workspace_root(&PathBuf::from(env_or_stop("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap_or_else(|e| stop(&[e]));
        let ws_lock = ws.join("Cargo.lock");
        let mut config: Vec<String> = Vec::new();
        if ws_lock.is_file() && ws == caller && !in_cargo_home(&ws) {
            println!("cargo:rerun-if-changed={}", ws_lock.display());
        } else {
            let private = target_dir.join("lock").join(&lib).join("Cargo.lock");
            let _ = std::fs::create_dir_all(private.parent().unwrap());
            if ws_lock.is_file() {
                println!("cargo:rerun-if-changed={}", ws_lock.display());
                std::fs::copy(&ws_lock, &private)
                    .unwrap_or_else(|e| stop(&[format!("cannot copy {} to {}: {e}", ws_lock.display(), private.display())]));
            }
            config.push(format!("resolver.lockfile-path={}", toml_string(&private.display().to_string())));
        }

        let mut cmd = rustup();
        cmd.current_dir(&crate_dir)
            .args(["run", "nightly", "cargo", "rustc", "-q", "--message-format", "json", "--release", "--manifest-path"])
            .arg(&manifest)
            .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"]);
        for c in &config {
            cmd.arg("--config").arg(c);
        }
        cmd.args(["--lib", "--", "-C", &format!("target-cpu={}", self.arch), "--emit=asm"]);
        clean_env(&mut cmd);
        cmd.env("CARGO_TARGET_DIR", &target_dir)
            .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
            .env("RUSTFLAGS", "-Zunstable-options -Cpanic=immediate-abort");
        let release = target_dir.join("nvptx64-nvidia-cuda/release");
        let deps = release.join("deps");
        // The .s of this very build: cargo's report of the kernel crate's artifact names its files
        // (`deps/lib<lib>-<hash>.rmeta`), and rustc wrote `deps/<lib>-<hash>.s` beside them. (Another
        // project sharing this target directory may have a crate of the same name.)
        let mut ptx = None;
        for attempt in 0..2 {
            let o = match cmd.output() {
                Ok(o) if o.status.success() => o,
                Ok(o) => stop(&[
                    format!("the PTX build of {} (nightly cargo) failed:", crate_dir.display()),
                    tail(&o.stderr, 40),
                    "For a CPU-only build on purpose, build with RSHMEM_SKIP_PTX=1.".to_string(),
                ]),
                Err(e) => stop(&[format!("cannot run rustup for the PTX build of {}: {e}", crate_dir.display())]),
            };
            let Some(hash) = artifact_hash(&String::from_utf8_lossy(&o.stdout), &manifest, &lib) else {
                stop(&[format!(
                    "the nightly build of {} succeeded but cargo reported no artifact of library {lib} for {}",
                    crate_dir.display(),
                    manifest.display()
                )])
            };
            let s = deps.join(format!("{lib}-{hash}.s"));
            if s.is_file() {
                ptx = Some(s);
                break;
            }
            if attempt == 1 {
                break;
            }
            // Up to date but its .s was removed: clean that package and build again.
            let mut clean = rustup();
            clean
                .current_dir(&crate_dir)
                .args(["run", "nightly", "cargo", "clean", "-q", "--release", "--target", "nvptx64-nvidia-cuda", "--manifest-path"])
                .arg(&manifest);
            for c in &config {
                clean.arg("--config").arg(c);
            }
            clean_env(&mut clean);
            let _ = clean.env("CARGO_TARGET_DIR", &target_dir).output();
        }
        let Some(ptx) = ptx else {
            stop(&[format!("the nightly build of {} succeeded but left no PTX ({lib}-<hash>.s) in {}", crate_dir.display(), deps.display())])
        };
        // Every source file of the PTX: the kernel crate's and its path dependencies' (rshmem-device's
        // and rshmem-ibgda's wherever they lie), from cargo's dep-info of the nightly build.
        let dep_info = release.join(format!("lib{lib}.d"));
        match std::fs::read_to_string(&dep_info) {
            Ok(d) => {
                for f in dep_info_files(&d) {
                    println!("cargo:rerun-if-changed={f}");
                }
            }
            Err(e) => stop(&[format!("the nightly build of {} left no dep-info {} ({e})", crate_dir.display(), dep_info.display())]),
        }
        std::fs::copy(&ptx, &out).unwrap_or_else(|e| stop(&[format!("cannot copy {} to {}: {e}", ptx.display(), out.display())]));
        out
    }
}

/// The value of a variable cargo sets for build scripts; stops the build outside one.
fn env_or_stop(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        stop(&[format!("rshmem-ptxbuild: {name} is not set: PtxBuilder::build runs from a build script (build.rs), which cargo gives {name}")])
    })
}

/// Removes the outer build's variables: the stable build's `CARGO*`/`RUSTC*`/`RUSTFLAGS` must not
/// leak into the nightly one. Kept: where cargo keeps its downloads and how it reaches the network
/// and registries (`CARGO_HOME`, `CARGO_NET_*`, `CARGO_HTTP_*`, `CARGO_REGISTRIES_*`,
/// `CARGO_REGISTRY_*`).
fn clean_env(cmd: &mut Command) {
    const KEEP: &[&str] = &["CARGO_HOME", "CARGO_NET_", "CARGO_HTTP_", "CARGO_REGISTRIES_", "CARGO_REGISTRY_"];
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let keep = KEEP.iter().any(|p| if p.ends_with('_') { k.starts_with(p) } else { k == *p });
        if !keep && (k.starts_with("CARGO") || k.starts_with("RUSTC") || k == "RUSTFLAGS" || k == "RUSTDOCFLAGS") {
            cmd.env_remove(&*k);
        }
    }
}

/// `sm_` followed by digits and an optional letter suffix (`sm_90`, `sm_90a`).
fn check_arch(arch: &str) -> Result<(), String> {
    let ok = arch.strip_prefix("sm_").is_some_and(|rest| {
        let digits = rest.trim_end_matches(|c: char| c.is_ascii_lowercase());
        !digits.is_empty() && digits.len() + 1 >= rest.len() && digits.chars().all(|c| c.is_ascii_digit())
    });
    if ok {
        Ok(())
    } else {
        Err(format!("the architecture {arch:?} is not a GPU architecture such as sm_90 or sm_90a"))
    }
}

/// The name of the library a package's manifest builds (`[lib] name`, else `[package] name` with `-`
/// as `_`): the stem of the files rustc writes.
fn lib_name(manifest: &str) -> Result<String, String> {
    let mut table = String::new();
    let (mut package, mut lib) = (None, None);
    for line in manifest.lines() {
        let line = line.trim();
        if let Some(h) = line.strip_prefix('[') {
            table = h.trim_start_matches('[').split(']').next().unwrap_or("").trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = key.trim().trim_matches('"');
        let dotted = (table.as_str(), key);
        let slot = match dotted {
            ("package", "name") | ("", "package.name") => &mut package,
            ("lib", "name") | ("", "lib.name") => &mut lib,
            _ => continue,
        };
        let value = value.trim();
        let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'');
        let Some(q) = quote else { return Err(format!("cannot read `{line}`: the name is not a string")) };
        let Some(end) = value[1..].find(q) else { return Err(format!("cannot read `{line}`: unterminated string")) };
        *slot = Some(value[1..1 + end].to_string());
    }
    match (lib, package) {
        (Some(l), _) => Ok(l.replace('-', "_")),
        (None, Some(p)) => Ok(p.replace('-', "_")),
        (None, None) => Err("no [package] name: not the manifest of a package (the kernel crate's directory is expected)".into()),
    }
}

/// From cargo's JSON messages (`--message-format json`), the hash of the library `lib` built from
/// `manifest`: its `compiler-artifact` message lists `.../deps/lib<lib>-<hash>.rmeta`.
fn artifact_hash(messages: &str, manifest: &Path, lib: &str) -> Option<String> {
    let want = format!("\"manifest_path\":{}", json_string(&manifest.display().to_string()));
    let prefix = format!("/deps/lib{lib}-");
    messages
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains(&want))
        .find_map(|l| {
            let start = l.find(&prefix)? + prefix.len();
            let rest = &l[start..];
            let hash = &rest[..rest.find(".rmeta\"")?];
            (!hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit())).then(|| hash.to_string())
        })
}

/// `s` as a JSON string, as cargo writes it.
fn json_string(s: &str) -> String {
    let mut t = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => t.push_str("\\\""),
            '\\' => t.push_str("\\\\"),
            '\n' => t.push_str("\\n"),
            '\t' => t.push_str("\\t"),
            '\r' => t.push_str("\\r"),
            c if (c as u32) < 0x20 => t.push_str(&format!("\\u{:04x}", c as u32)),
            c => t.push(c),
        }
    }
    t.push('"');
    t
}

/// The files of a cargo dep-info file (`target: file file ...`, spaces in names escaped as `\ `).
fn dep_info_files(text: &str) -> Vec<String> {
    let mut files = Vec::new();
    for line in text.lines() {
        let mut words = Vec::new();
        let mut cur = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                ' ' | '\t' => {
                    if !cur.is_empty() {
                        words.push(std::mem::take(&mut cur));
                    }
                }
                _ => cur.push(c),
            }
        }
        if !cur.is_empty() {
            words.push(cur);
        }
        // The first word is the target, ending in ':'; the rest are its files.
        match words.first() {
            Some(t) if t.ends_with(':') => files.extend(words.into_iter().skip(1)),
            _ => {}
        }
    }
    files
}

/// The target directory of the build that runs this build script, from `OUT_DIR`:
/// `<target>/[<triple>/]<profile>/build/<package>-<hash>/out`. A `<triple>` level (cross builds) is
/// recognized by its name (a target triple has dashes) and by the files cargo keeps in the target
/// directory itself (`.rustc_info.json`, `CACHEDIR.TAG`), which it lacks and its parent has. `OUT_DIR` itself where the path has another shape (a build of its
/// own, slower but correct).
fn target_root(out_dir: &Path) -> PathBuf {
    let build = out_dir.ancestors().skip(1).take(3).find(|a| a.file_name().is_some_and(|n| n == "build"));
    let Some(parent) = build.and_then(Path::parent).and_then(Path::parent) else {
        return out_dir.to_path_buf();
    };
    let is_root = |d: &Path| d.join(".rustc_info.json").exists() || d.join("CACHEDIR.TAG").exists();
    match parent.parent() {
        Some(up) if !is_root(parent) && is_root(up) && parent.file_name().is_some_and(|n| n.to_string_lossy().contains('-')) => {
            up.to_path_buf()
        }
        _ => parent.to_path_buf(),
    }
}

/// The root directory of the workspace of the package whose manifest is `manifest`, asked of cargo
/// (`cargo locate-project --workspace`), which also reports a package that is in no workspace although
/// a workspace above it would claim it.
fn workspace_root(manifest: &Path) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new(&cargo)
        .args(["locate-project", "--workspace", "--message-format", "plain", "--manifest-path"])
        .arg(manifest)
        .output()
        .map_err(|e| format!("cannot run cargo ({}) to find the workspace of {}: {e}", Path::new(&cargo).display(), manifest.display()))?;
    if !o.status.success() {
        return Err(format!("cargo cannot find the workspace of {}: {}", manifest.display(), tail(&o.stderr, 12)));
    }
    let root = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    Ok(root.parent().map(Path::to_path_buf).unwrap_or(root))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut t = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => t.push_str("\\\""),
            '\\' => t.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => t.push_str(&format!("\\u{:04x}", c as u32)),
            c => t.push(c),
        }
    }
    t.push('"');
    t
}

/// Whether `dir` lies in cargo's own directory (`CARGO_HOME`, by default `~/.cargo`), where cargo
/// unpacks registry packages and checks out git dependencies.
fn in_cargo_home(dir: &Path) -> bool {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    match home.and_then(|h| h.canonicalize().ok()) {
        Some(h) => dir.canonicalize().is_ok_and(|d| d.starts_with(h)),
        None => false,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lib_name_reads_the_package_and_lib_tables() {
        let m = "[package]\nname = \"my-app-kernels\" # the kernels\nversion = \"0.1.0\"\n\n[dependencies]\nname = \"not this\"\n";
        assert_eq!(lib_name(m).unwrap(), "my_app_kernels");
        let m = "[package]\nname = 'a-b'\n[lib]\nname = \"c_d\"\n";
        assert_eq!(lib_name(m).unwrap(), "c_d");
        let m = "package.name = \"dotted-name\"\n";
        assert_eq!(lib_name(m).unwrap(), "dotted_name");
        let err = lib_name("[workspace]\nmembers = [\"a\"]\n").unwrap_err();
        assert!(err.contains("no [package] name"), "{err}");
        let err = lib_name("[package]\nname = 3\n").unwrap_err();
        assert!(err.contains("not a string"), "{err}");
    }

    #[test]
    fn dep_info_lists_every_file_with_escaped_spaces() {
        let d = "/t/libk.rlib: /w/k/src/lib.rs /w/my\\ dir/device/src/lib.rs /w/ibgda/src/wqe.rs\n\n/w/k/src/lib.rs:\n";
        assert_eq!(dep_info_files(d), ["/w/k/src/lib.rs", "/w/my dir/device/src/lib.rs", "/w/ibgda/src/wqe.rs"]);
    }

    #[test]
    fn arch_names() {
        for ok in ["sm_90", "sm_80", "sm_90a", "sm_100"] {
            assert!(check_arch(ok).is_ok(), "{ok}");
        }
        for bad in ["", "sm_", "90", "sm_9x0", "compute_90", "sm_90ab"] {
            let e = check_arch(bad).unwrap_err();
            assert!(e.contains("not a GPU architecture"), "{bad}: {e}");
        }
    }

    #[test]
    fn target_root_is_the_target_directory_of_out_dir() {
        let base = std::env::temp_dir().join(format!("rshmem-ptxbuild-test-{}", std::process::id()));
        // A target directory inside another one (as target/consumer-check in a clone's target/).
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("CACHEDIR.TAG"), "Signature: 8a477f597d28d172789f06886806bc55").unwrap();
        let tgt = base.join("tgt");
        let out = tgt.join("release/build/k-0123/out");
        std::fs::create_dir_all(&out).unwrap();
        assert_eq!(target_root(&out), tgt);
        std::fs::write(tgt.join(".rustc_info.json"), "{}").unwrap();
        assert_eq!(target_root(&out), tgt);
        // A cross build: <target>/<triple>/<profile>/build/...
        let cross = tgt.join("x86_64-unknown-linux-gnu/release/build/k-0123/out");
        std::fs::create_dir_all(&cross).unwrap();
        assert_eq!(target_root(&cross), tgt);
        // cargo's newer build-dir layout: <build-dir>/<profile>/build/<package>/<hash>/out
        let new = tgt.join("release/build/k/0123/out");
        std::fs::create_dir_all(&new).unwrap();
        assert_eq!(target_root(&new), tgt);
        // Another shape: OUT_DIR itself.
        let odd = base.join("somewhere/out");
        assert_eq!(target_root(&odd), odd);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn artifact_hash_is_that_of_the_kernel_crate() {
        let m = Path::new("/w/my \"app\"/kernels/Cargo.toml");
        let msgs = [
            r#"{"reason":"compiler-artifact","package_id":"x","manifest_path":"/w/dev/Cargo.toml","target":{"name":"rshmem_device"},"filenames":["/t/release/librshmem_device.rlib","/t/release/deps/librshmem_device-0123456789abcdef.rmeta"],"fresh":true}"#,
            r#"{"reason":"compiler-artifact","package_id":"y","manifest_path":"/w/other/kernels/Cargo.toml","target":{"name":"k"},"filenames":["/t/release/deps/libk-1111111111111111.rmeta"],"fresh":false}"#,
            r#"{"reason":"compiler-artifact","package_id":"z","manifest_path":"/w/my \"app\"/kernels/Cargo.toml","target":{"name":"k"},"filenames":["/t/release/libk.rlib","/t/release/deps/libk-fedcba9876543210.rmeta"],"fresh":false}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(artifact_hash(&msgs, m, "k").as_deref(), Some("fedcba9876543210"));
        assert_eq!(artifact_hash(&msgs, m, "other"), None);
        assert_eq!(artifact_hash(&msgs, Path::new("/w/none/Cargo.toml"), "k"), None);
    }

    #[test]
    fn toml_quoting() {
        assert_eq!(toml_string(r#"/a "b"\c"#), r#""/a \"b\"\\c""#);
    }
}
