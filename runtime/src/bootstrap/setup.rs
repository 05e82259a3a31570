//! What both sides of the bootstrap's star (the root, PE 0, and the leaves) share: their setup and the
//! checks and names of a collective.

use crate::bootstrap::wire::{HostId, Op, MAX_PAYLOAD};
use std::time::Duration;

/// What both sides of the star need to set up.
pub(super) struct Setup<'a> {
    pub(super) pe: usize,
    pub(super) npes: usize,
    pub(super) key: [u8; 16],
    /// The launcher's job identity ("" when none): PE 0 refuses PEs of another job even with this key.
    pub(super) job: &'a str,
    pub(super) timeout: Duration,
    /// RSHMEM_WAIT_TIMEOUT: the longest wait in a collective (None: no limit).
    pub(super) wait: Option<Duration>,
    /// The rendezvous address as given (for connecting and for messages).
    pub(super) addr: &'a str,
    pub(super) me: &'a HostId,
}

/// Checks a PE can make of its own arguments; the message names the call.
pub(super) fn check_local(npes: usize, call: &str, op: Op, payload: &[u8]) -> std::result::Result<(), String> {
    if let Op::Broadcast(root) = op {
        if root >= npes {
            return Err(format!("{call}: broadcast root PE {root} does not exist ({npes} PEs)"));
        }
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(format!(
            "{call}: {} bytes is more than the bootstrap carries in one collective (at most {MAX_PAYLOAD} bytes per PE)",
            payload.len()
        ));
    }
    Ok(())
}

/// "rshmem_malloc (allgather, collective #3)"
pub(super) fn describe(call: &str, op: Op, seq: u64) -> String {
    format!("{call} ({}, collective #{seq})", op.describe())
}

