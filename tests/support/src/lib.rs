//! What the tests of every rshmem crate share (a dev-dependency of each), so that the rules are
//! written once:
//!
//! - [`skip`]: a test that cannot run on this machine (it needs root, a tool, a header) either fails or
//!   says in one line what it skips and why. `scripts/test.sh` exports [`NO_SKIP`]`=1`, which makes
//!   every skip a failure: under the project's test command nothing passes without testing.
//! - [`OtherUserDir`]: a test that runs a program as another user (uid 65534) copies it into a
//!   directory that user can reach, whatever the checkout's location (a clone under a mode-700
//!   directory such as `/root` or `mktemp -d` is unreachable for other users), and removes it after.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Set to `1` (scripts/test.sh does): a test that would be skipped fails instead, saying why. Its
/// name starts with `RSHMEM_TEST_`, which the runtime's check of `RSHMEM_*` variables leaves alone.
pub const NO_SKIP: &str = "RSHMEM_TEST_NO_SKIP";

/// Whether skips are failures here ([`NO_SKIP`] set to anything but empty or `0`).
pub fn skips_fail() -> bool {
    std::env::var_os(NO_SKIP).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Test `what` cannot run here because of `why` (which should say how to make it run). Under
/// [`NO_SKIP`] this panics (the test fails); otherwise it prints one line, `SKIPPED what: why`, to the
/// real stderr (past the test harness's capture, so that it shows for a passing test too), and the
/// caller returns without testing.
#[track_caller]
pub fn skip(what: &str, why: &str) {
    if skips_fail() {
        panic!("{what} cannot run here: {why} ({NO_SKIP}=1, as scripts/test.sh sets, makes this a failure instead of a skip)");
    }
    // std::io::stderr() directly: libtest captures only the print!/eprint! macros.
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {what}: {why}");
}

/// Whether this process runs as root (effective uid 0, from /proc/self/status).
pub fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).expect("a Uid line in /proc/self/status");
    uid.split_whitespace().nth(1) == Some("0")
}

/// A fresh directory that every user can enter and read (mode 755, every ancestor searchable by
/// all), under the temporary directory or else `/tmp`; removed with everything in it when dropped.
pub struct OtherUserDir {
    path: PathBuf,
}

impl OtherUserDir {
    /// Makes the directory; `tag` goes into its name. Fails, naming the candidates, where no
    /// temporary directory is reachable by other users.
    pub fn new(tag: &str) -> std::io::Result<OtherUserDir> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let candidates = [std::env::temp_dir(), PathBuf::from("/tmp")];
        let base = candidates.iter().find(|d| searchable_by_all(d)).ok_or_else(|| {
            std::io::Error::other(format!(
                "no temporary directory other users can reach: {} (each needs every directory on its path searchable by all, mode o+x)",
                candidates.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
            ))
        })?;
        let path = base.join(format!("rshmem-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path)?;
        let dir = OtherUserDir { path };
        dir.set_mode(0o755)?;
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets the directory's mode (e.g. 0o777 where the other user must create files in it).
    pub fn set_mode(&self, mode: u32) -> std::io::Result<()> {
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(mode))
    }

    /// Copies the program `exe` into this directory (mode 755) and returns the copy's path.
    pub fn copy_program(&self, exe: &Path) -> std::io::Result<PathBuf> {
        let name = exe.file_name().ok_or_else(|| std::io::Error::other(format!("{} names no file", exe.display())))?;
        let to = self.path.join(name);
        std::fs::copy(exe, &to).map_err(|e| std::io::Error::other(format!("copying {} to {}: {e}", exe.display(), to.display())))?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))?;
        Ok(to)
    }
}

impl Drop for OtherUserDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Whether every directory from `/` down to `dir` (symlinks resolved) lets everyone search it.
fn searchable_by_all(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else { return false };
    dir.ancestors().all(|d| std::fs::metadata(d).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o001 != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_user_dir_is_reachable_and_goes_away() {
        let d = OtherUserDir::new("support-test").unwrap();
        assert!(searchable_by_all(d.path()), "{}", d.path().display());
        let copy = d.copy_program(&std::env::current_exe().unwrap()).unwrap();
        assert_eq!(std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777, 0o755);
        let path = d.path().to_path_buf();
        drop(d);
        assert!(!path.exists());
    }

    #[test]
    fn a_mode_700_directory_is_not_reachable() {
        let d = OtherUserDir::new("support-700").unwrap();
        let inner = d.path().join("private");
        std::fs::create_dir(&inner).unwrap();
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(!searchable_by_all(&inner));
        assert!(searchable_by_all(d.path()));
    }
}
