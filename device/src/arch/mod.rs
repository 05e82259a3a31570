//! The primitives the device API is built from. Everything above this module is one generic
//! implementation shared by the GPU and CPU backends; only these primitives differ:
//! - `nvptx`: special registers, `bar.sync`, PTX atomics and fences at system scope, 16-byte copies;
//! - `host`: the CPU backend, where a "kernel" is run by host threads of each PE process (their
//!   coordinates and block barriers come from hooks the runtime installs) and memory is shared memory.

#[cfg(target_arch = "nvptx64")]
mod nvptx;
#[cfg(target_arch = "nvptx64")]
pub use nvptx::*;

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

/// What went wrong in a device call, for the message printed before the PE is stopped.
#[derive(Clone, Copy)]
pub enum Problem {
    NotInitialized,
    PeOutOfRange,
    NotInHeap,
    NoTransport,
    BadCmp,
    BadSignalOp,
    WaitTimeout,
    LocalBuffer,
    /// Team handle out of range, never made, or destroyed.
    BadTeam,
    /// This PE is not a member of the team.
    NotMember,
    /// Root PE out of the team's range.
    BadRoot,
    /// Reduction type/operator pair unknown or not allowed (bitwise on floats, maxloc on non-pairs).
    BadReduction,
    /// Team members entered different collectives, or the same one with different arguments: the
    /// variant says what the other PE (the failure's PE) is in.
    Mismatch(crate::coll::Kind),
    /// The local buffer of a transfer to another node is neither in the symmetric heap nor registered,
    /// so the NIC (IBGDA) cannot reach it.
    Unregistered,
    /// An IBGDA work request completed with an error: the PRM syndrome, the NIC's vendor syndrome (the
    /// emulated NIC's reason code) and the failed WQE's opcode. The failure's `addr` is the WQE index.
    Nic { syndrome: u8, vendor: u8, opcode: u8 },
}

impl Problem {
    pub const fn text(self) -> &'static str {
        match self {
            Problem::NotInitialized => "called before rshmem init completed (or with no device state in this module)\0",
            Problem::PeOutOfRange => "PE number out of range\0",
            Problem::NotInHeap => "address range is not inside the symmetric heap\0",
            Problem::NoTransport => "no transport reaches this PE (not mapped: another node?)\0",
            Problem::BadCmp => "invalid comparison operator (use CMP_EQ..CMP_GE)\0",
            Problem::BadSignalOp => "invalid signal operator (use SIGNAL_SET or SIGNAL_ADD)\0",
            Problem::WaitTimeout => "wait timed out (RSHMEM_WAIT_TIMEOUT)\0",
            Problem::LocalBuffer => "the local buffer is a thread-local variable, which the transport to another node cannot reach (use global memory: rshmem_malloc, cudaMalloc or a __device__ array)\0",
            Problem::BadTeam => "invalid team (out of range, never created, or destroyed; target PE is the team handle)\0",
            Problem::NotMember => "this PE is not a member of the team (target PE is the team handle)\0",
            Problem::BadRoot => "root out of the team's range (target PE is the root given)\0",
            Problem::BadReduction => "unknown reduction type or operator, or an operator the type does not have (bitwise operators are for integers; target PE is the type code, address the operator)\0",
            Problem::Mismatch(k) => k.mismatch_text(),
            Problem::Unregistered => "the local buffer is neither in the symmetric heap nor registered (rshmemx_buffer_register / nvshmemx_buffer_register), so the NIC cannot reach it; up to 12 bytes (puts) or 8 bytes (gets) may come from anywhere\0",
            Problem::Nic { syndrome, .. } => nic_text(syndrome),
        }
    }
}

/// What an IBGDA error completion with PRM syndrome `s` means, for the message that stops the PE.
pub const fn nic_text(s: u8) -> &'static str {
    use rshmem_ibgda::mlx5::syndrome as x;
    match s {
        x::REMOTE_ACCESS => "IBGDA: the NIC completed the work request with a remote access error: the target PE's NIC does not know the rkey, or the remote address range lies outside its registered memory\0",
        x::REMOTE_INVAL_REQ => "IBGDA: the NIC completed the work request with a remote invalid request error (e.g. a misaligned atomic)\0",
        x::REMOTE_OP => "IBGDA: the NIC completed the work request with a remote operation error: the target could not execute it\0",
        x::LOCAL_PROT => "IBGDA: the NIC completed the work request with a local protection error: the local buffer's lkey is unknown or the buffer lies outside its registered memory\0",
        x::LOCAL_QP_OP => "IBGDA: the NIC completed the work request with a local QP operation error: the WQE is malformed\0",
        x::LOCAL_LENGTH => "IBGDA: the NIC completed the work request with a local length error\0",
        x::WR_FLUSH => "IBGDA: the work request was flushed: an earlier one on the same queue pair failed\0",
        x::TRANSPORT_RETRY_EXC => "IBGDA: the NIC gave up on the work request (transport retries exceeded): the target PE is unreachable (it exited, or its node is down)\0",
        x::RNR_RETRY_EXC => "IBGDA: the NIC gave up on the work request (receiver not ready)\0",
        _ => "IBGDA: the NIC completed the work request with an error\0",
    }
}

/// Describes a failed call: the call's name (NUL-terminated), the problem, the PE and address involved.
#[derive(Clone, Copy)]
pub struct Failure {
    pub call: &'static str,
    pub problem: Problem,
    pub pe: i32,
    pub addr: u64,
    pub len: u64,
}

/// The read-modify-write operations of the AMO API, and the unsigned maximum the IBGDA posting
/// counters advance with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Rmw {
    Add,
    And,
    Or,
    Xor,
    Swap,
    /// Unsigned maximum.
    Max,
}
