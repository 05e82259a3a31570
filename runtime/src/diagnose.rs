//! The NIC and network checks behind `rshmrun --diagnose` and behind the choice of the remote
//! transport (`crate::transport::choose_remote`): a real NIC is used only when every check here passes.
//! (Being written: see the module's functions.)

/// The outcome of one check.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Status {
    Pass,
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
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about a failure.
    pub fix: Option<String>,
}

/// Whether a real RDMA NIC is usable for IBGDA by this process: every NIC check passes.
pub fn nic_usable() -> bool {
    false
}
