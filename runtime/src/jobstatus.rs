//! Job status board: one shared-memory page per job that rshmrun creates and every PE writes into, so that
//! when a job stalls the launcher (on `--timeout`) and the PEs themselves can say which PE everyone waits
//! for and what that PE last entered.
//!
//! rshmrun creates it with [`JobStatus::create`] and hands the descriptor to each PE in
//! `RSHMEM_STATUS_FD` (inherited, like the bootstrap listener). A PE opens it with
//! [`JobStatus::from_env`] during init and records each host collective it enters and leaves
//! ([`JobStatus::enter`], [`JobStatus::leave`]). Outside rshmrun there is no board and these do nothing.
//!
//! INTERFACE STUB: the layout and the reader are filled in by the hardening work (issue 7); the
//! launcher codes against these signatures.

use crate::error::Result;
use std::os::fd::OwnedFd;

/// What one PE last recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeStatus {
    pub pe: usize,
    /// Host collectives this PE has entered so far (0: none yet).
    pub seq: u64,
    /// Name of the last host collective it entered ("" before any).
    pub call: String,
    /// True while it is inside that collective (entered, not yet left).
    pub inside: bool,
    /// Process id that wrote the record (0: the PE has not initialized).
    pub pid: u32,
}

pub struct JobStatus {
    _private: (),
}

impl JobStatus {
    /// Launcher side: a zeroed board for `npes` PEs and the descriptor to hand down (not close-on-exec
    /// is the caller's business).
    pub fn create(npes: usize) -> Result<(JobStatus, OwnedFd)> {
        let _ = npes;
        Err(crate::error::Error::new("job status board: not implemented yet"))
    }
    /// PE side: the board rshmrun handed down, if any.
    pub fn from_env(pe: usize, npes: usize) -> Result<Option<JobStatus>> {
        let _ = (pe, npes);
        Ok(None)
    }
    pub fn enter(&self, call: &str) -> u64 {
        let _ = call;
        0
    }
    pub fn leave(&self) {}
    pub fn snapshot(&self) -> Vec<PeStatus> {
        Vec::new()
    }
    /// One line per group of PEs for a stalled job, e.g. "PEs 0, 2-3 wait in rshmem_barrier_all (host
    /// collective #5) for PE 1, which last entered rshmem_malloc (#4) and left it"; None if nothing useful
    /// is recorded.
    pub fn describe_stall(&self) -> Option<String> {
        None
    }
}
