//! The emulated NIC's set-up types: how a QP's queues are laid out in memory ([`QpSetup`],
//! [`CqSetup`]), what can be wrong with them ([`SetupError`]), and what a QP reports ([`QpStats`],
//! [`ErrorInfo`]).

use std::prelude::rust_2021::*;
use super::reason::Reason;

/// Index of a QP in its [`Nic`].
pub type QpId = usize;

/// Where a QP's CQ is.
#[derive(Clone, Copy, Debug)]
pub struct CqSetup {
    /// CQE 0 (64-byte aligned; `64 << log_n` bytes).
    pub base: *mut u8,
    pub log_n: u32,
    /// NVSHMEM's collapsed CQ (`cc = 1`): every CQE goes to slot 0 (owner bit written as 0).
    pub collapsed: bool,
    /// The CQ doorbell record (its `set_ci` word tells how far software consumed), or null. Read only
    /// for the overrun check of a normal CQ without `overrun_ignore`.
    pub dbr: *const u8,
    /// `oi = 1`: never check for overrun (NVSHMEM sets it).
    pub overrun_ignore: bool,
}

/// Where one QP's queues are, as the NIC sees them: what `CREATE_QP`/`CREATE_CQ` would be given.
#[derive(Clone, Copy, Debug)]
pub struct QpSetup {
    pub qpn: u32,
    /// WQEBB 0 of the send queue (64-byte aligned), `1 << log_sq` WQEBBs. The NIC only reads it.
    pub sq: *const u8,
    pub log_sq: u32,
    /// The QP doorbell record (8 bytes, 4-byte aligned). The NIC only reads it.
    pub dbr: *const u8,
    /// The doorbell register (8 bytes, 8-byte aligned), e.g. `UAR + 0x800`. The NIC only reads it.
    pub db: *const u8,
    pub cq: CqSetup,
    /// The WQE count the QP starts at (hardware: 0 after RST->INIT; the wrap fault starts elsewhere).
    pub start: u64,
}

/// Why [`Nic::add_qp`] refused a setup.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SetupError {
    /// A null or misaligned address (which one).
    Misaligned(&'static str),
    /// A queue size out of range (which one).
    BadSize(&'static str),
    /// The QPN is taken or wider than 24 bits.
    BadQpn(u32),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::Misaligned(w) => write!(f, "emulated NIC: {w} is null or misaligned"),
            SetupError::BadSize(w) => write!(f, "emulated NIC: {w} out of range"),
            SetupError::BadQpn(q) => write!(f, "emulated NIC: QPN {q:#x} is in use or wider than 24 bits"),
        }
    }
}
impl std::error::Error for SetupError {}

/// The first error a QP completed with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ErrorInfo {
    pub wqe_counter: u16,
    pub wqe_opcode: u8,
    pub syndrome: u8,
    pub reason: Reason,
}

/// What one QP of the emulator did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QpStats {
    /// WQEs consumed (executed, failed or flushed).
    pub wqes: u64,
    pub wqebbs: u64,
    pub cqes: u64,
    pub error_cqes: u64,
    /// Doorbells seen for this QP (dropped ones included).
    pub doorbells: u64,
    pub doorbells_dropped: u64,
    /// Doorbell writes that named another QPN (ignored).
    pub doorbells_foreign: u64,
    /// Doorbells whose producer count was ahead of the doorbell record when the NIC read it: the
    /// doorbell was written before the record (an ordering bug in the posting code).
    pub doorbell_ahead_of_dbr: u64,
    /// Doorbell-record scans that found work no doorbell had announced (dropped doorbells recovered).
    pub scans_with_work: u64,
    /// Times the NIC held WQEs back waiting for a full send queue (fault `hold_until_full`).
    pub holds: u64,
    /// Doorbells whose WQE fetch waited the fault's `fetch_delay` (fault `delay`).
    pub delayed_fetches: u64,
    /// Times the WQE count crossed a multiple of 65536, wrapping the 16-bit WQE index and doorbell
    /// record counter (what fault `wrap`'s start index is for).
    pub index_wraps: u64,
    /// CQEs written after the fault's `cqe_delay` (fault `slow`).
    pub slow_cqes: u64,
    /// The NIC's consumer count (next WQEBB it will read).
    pub hw_ci: u64,
    pub first_error: Option<ErrorInfo>,
    pub in_error: bool,
    /// A CQE found the (normal, non-`oi`) CQ full and was lost; the QP went to the error state.
    pub cq_overrun: bool,
}

