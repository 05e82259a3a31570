//! The remote side of an emulated RC connection.

use std::prelude::rust_2021::*;
use super::{mr, MrTable, Reason};
use crate::wqe::Atomic;
use std::sync::Arc;

/// A failed remote operation: the syndrome the requester's error CQE carries and why.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RemoteError {
    pub syndrome: u8,
    pub reason: Reason,
}

/// The peer an emulated QP is connected to: executes the remote half of RDMA WRITE, READ and atomics
/// against the peer's registered memory (its responder). [`Loopback`] does it in this process; a
/// transport implementation carries the same three calls to the peer node's emulator, whose responder
/// calls [`mr::respond_write`] and friends. A transport that cannot reach the peer answers
/// `RemoteError { syndrome: TRANSPORT_RETRY_EXC, reason: Unreachable }`.
pub trait Remote: Send {
    /// Store `data` at `raddr` under `rkey` (REMOTE_WRITE).
    fn write(&mut self, rkey: u32, raddr: u64, data: &[u8]) -> Result<(), RemoteError>;
    /// Read `out.len()` bytes at `raddr` under `rkey` (REMOTE_READ).
    fn read(&mut self, rkey: u32, raddr: u64, out: &mut [u8]) -> Result<(), RemoteError>;
    /// Apply `op` at `raddr` under `rkey` (REMOTE_ATOMIC, naturally aligned); returns the old value.
    fn atomic(&mut self, rkey: u32, raddr: u64, op: Atomic) -> Result<u64, RemoteError>;
}

/// A peer in this process: the responder works on the given region table directly (the QP is
/// connected to itself when that is the NIC's own table).
#[derive(Clone, Debug)]
pub struct Loopback(pub Arc<MrTable>);

impl Remote for Loopback {
    fn write(&mut self, rkey: u32, raddr: u64, data: &[u8]) -> Result<(), RemoteError> {
        mr::respond_write(&self.0, rkey, raddr, data)
    }
    fn read(&mut self, rkey: u32, raddr: u64, out: &mut [u8]) -> Result<(), RemoteError> {
        mr::respond_read(&self.0, rkey, raddr, out)
    }
    fn atomic(&mut self, rkey: u32, raddr: u64, op: Atomic) -> Result<u64, RemoteError> {
        mr::respond_atomic(&self.0, rkey, raddr, op)
    }
}
