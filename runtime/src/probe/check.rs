//! One line of `rshmrun --diagnose` ([`Check`]: a name, a status, what was found, what to do), and
//! the time limits every probe runs under.

use std::time::Duration;

/// The outcome of one check.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Status {
    /// The check found what rshmem needs.
    Pass,
    /// The check found a problem; the line says what to do.
    Fail,
    /// Facts that are neither good nor bad (which interface the bootstrap uses, the transport chosen).
    Info,
    /// Not checked, and why is in the detail (e.g. no device to check it on).
    Skip,
}

/// One line of `rshmrun --diagnose`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Check {
    /// What was checked ("RDMA devices", "GPUDirect RDMA", ...).
    pub name: String,
    /// Pass, fail, info or skip.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about a failure.
    pub fix: Option<String>,
}

impl Status {
    /// The tag `rshmrun --diagnose` prints: PASS, FAIL, INFO or SKIP.
    pub fn tag(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Info => "INFO",
            Status::Skip => "SKIP",
        }
    }
}

impl Check {
    /// A check without a fix.
    pub fn new(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
        Check { name: name.into(), status, detail: detail.into(), fix: None }
    }
    /// The same check with what to do about it.
    pub fn with_fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
    /// The check as one line: `[FAIL] name: detail. Fix: fix`.
    pub fn line(&self) -> String {
        let mut s = format!("[{}] {}: {}", self.status.tag(), self.name, self.detail);
        if let Some(fix) = &self.fix {
            if !s.ends_with('.') {
                s.push('.');
            }
            s.push_str(" Fix: ");
            s.push_str(fix);
        }
        s.replace('\n', " ")
    }
}

// ------------------------------------------------------------------ limits

/// How long a sysfs/procfs scan may take (a hung driver can block a sysfs read).
pub(crate) const SYSFS_LIMIT: Duration = Duration::from_secs(10);
/// How long the CUDA driver may take to initialize and answer (cuInit on many GPUs takes seconds).
pub(crate) const CUDA_LIMIT: Duration = Duration::from_secs(30);
/// How long the verbs checks (opening the NIC, DevX, registrations) may take.
pub(crate) const VERBS_LIMIT: Duration = Duration::from_secs(30);

