//! The emulated mlx5 NIC (host side, feature `emulator`).
//!
//! It consumes exactly what a ConnectX would: the send queue, the QP doorbell record, the doorbell
//! register (in a UAR-like page) and the CQ, laid out as on hardware ([`crate::mlx5`]), at addresses
//! the caller gives ([`QpSetup`]), so the same posting code ([`crate::qp`]) drives it and a real NIC.
//! Each WQE is parsed strictly by the PRM and executed against registered memory regions
//! ([`MrTable`]: key -> base, length, access); remote operations go through a [`Remote`] (the peer's
//! responder: [`Loopback`] in-process, later the proxy transport's TCP wire). Completions are CQEs
//! with the owner bit, or in slot 0 of a collapsed CQ.
//!
//! Bad input never panics and never touches memory outside a registered region: unknown opcodes, a
//! bad `ds`, unknown keys and accesses outside a region or without the rights complete with an error
//! CQE carrying the PRM syndrome (and an emulator-specific [`Reason`] in `vendor_err_synd`); the QP
//! then goes to the error state and flushes what follows, as hardware does.
//!
//! Fault injection ([`FaultConfig`], research note §8): a delay between the doorbell and the WQE fetch,
//! dropped doorbells (the doorbell record still honoured), a start index near a 16-bit wrap, holding
//! WQEs until the send queue is full, slow completions. The NIC counts each fault it injects
//! ([`FaultCounts`]), so that a test run under a fault mode can check it met the fault.

//
// The files, bottom to top (each names only those before it): `fault` and `reason` (leaves), `mr`,
// `remote`, `nic`, `queues`; this file only declares them and re-exports their items.

mod engine;
mod fault;
mod mr;
mod nic;
mod queues;
mod reason;
mod remote;
mod setup;

pub use fault::{FaultConfig, FaultCounts};
pub use mr::{respond_atomic, respond_read, respond_write, Access, Dma, MrError, MrTable, Region};
pub use nic::{Nic, NicThread};
pub use setup::{CqSetup, ErrorInfo, QpId, QpSetup, QpStats, SetupError};
pub use queues::{HostQueues, HostQueuesConfig};
pub use reason::{Reason, RemoteError};
pub use remote::{respond, Loopback, Remote, RemoteDone, RemoteOp};
