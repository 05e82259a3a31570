//! The remote side of an emulated RC connection.

use std::prelude::rust_2021::*;
use super::mr::{self, MrTable};
use super::reason::RemoteError;
use crate::wqe::Atomic;
use std::collections::VecDeque;
use std::sync::Arc;

/// The remote half of one WQE, as the requester sends it to the responder.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RemoteOp {
    /// RDMA WRITE: store `data` at `raddr` under `rkey` (REMOTE_WRITE).
    Write { rkey: u32, raddr: u64, data: Vec<u8> },
    /// RDMA READ: `len` bytes at `raddr` under `rkey` (REMOTE_READ).
    Read { rkey: u32, raddr: u64, len: u32 },
    /// An atomic at `raddr` under `rkey` (REMOTE_ATOMIC, naturally aligned).
    Atomic { rkey: u32, raddr: u64, op: Atomic },
}

/// What a finished [`RemoteOp`] gives back.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RemoteDone {
    Written,
    /// The bytes a READ fetched.
    Read(Vec<u8>),
    /// The old value of an atomic's target.
    Fetched(u64),
}

/// The peer an emulated QP is connected to: carries the remote half of RDMA WRITE, READ and atomics to
/// the peer's responder, which checks them against the peer's registered memory.
///
/// Operations are started in WQE order and may finish later ([`Remote::poll`]), as on a real RC
/// connection, where the requester keeps sending while earlier requests await their
/// acknowledgements: the NIC keeps several WQEs in flight and writes their CQEs in order once they are
/// answered. [`Loopback`] answers at once, in this process; the runtime's implementation carries the
/// operations over the proxy transport's TCP wire to the peer node, whose responder calls
/// [`mr::respond_write`] and friends (or its platform's copies). A transport that cannot reach the
/// peer answers `RemoteError { syndrome: TRANSPORT_RETRY_EXC, reason: Unreachable }`.
pub trait Remote: Send {
    /// Starts `op`, identified by `tag` (tags increase with WQE order). An error is an immediate
    /// failure: the operation did not start and `poll` never reports it.
    fn start(&mut self, tag: u64, op: RemoteOp) -> Result<(), RemoteError>;
    /// The outcome of one started operation, if one has arrived (in any order).
    fn poll(&mut self) -> Option<(u64, Result<RemoteDone, RemoteError>)>;
}

/// A peer in this process: the responder works on the given region table directly (the QP is
/// connected to itself when that is the NIC's own table). Every operation is answered at once.
#[derive(Debug)]
pub struct Loopback {
    mrs: Arc<MrTable>,
    done: VecDeque<(u64, Result<RemoteDone, RemoteError>)>,
}

impl Loopback {
    pub fn new(mrs: Arc<MrTable>) -> Loopback {
        Loopback { mrs, done: VecDeque::new() }
    }
}

/// Runs `op` against the responder's region table `mrs` (what a peer node's NIC does on receipt).
pub fn respond(mrs: &MrTable, op: RemoteOp) -> Result<RemoteDone, RemoteError> {
    match op {
        RemoteOp::Write { rkey, raddr, data } => mr::respond_write(mrs, rkey, raddr, &data).map(|_| RemoteDone::Written),
        RemoteOp::Read { rkey, raddr, len } => {
            let mut out = vec![0u8; len as usize];
            mr::respond_read(mrs, rkey, raddr, &mut out).map(|_| RemoteDone::Read(out))
        }
        RemoteOp::Atomic { rkey, raddr, op } => mr::respond_atomic(mrs, rkey, raddr, op).map(RemoteDone::Fetched),
    }
}

impl Remote for Loopback {
    fn start(&mut self, tag: u64, op: RemoteOp) -> Result<(), RemoteError> {
        let r = respond(&self.mrs, op);
        self.done.push_back((tag, r));
        Ok(())
    }
    fn poll(&mut self) -> Option<(u64, Result<RemoteDone, RemoteError>)> {
        self.done.pop_front()
    }
}
