//! The vocabulary every layer of the device library shares, at the bottom of it: no item here names
//! anything of this crate outside this file (only `rshmem_ibgda`'s constants).
//!
//! - [`Scope`]: which threads cooperate in a call (its methods, which read thread coordinates, are in
//!   `arch`);
//! - [`Rmw`], and the AMO type traits [`AmoBits`], [`Amo`], [`AmoInt`] (the `AmoBits` implementations,
//!   which are the arch layer's atomics, are in `arch`);
//! - [`Problem`] and [`Failure`]: what a failed device call reports, with [`nic_text`] and the
//!   collective [`Kind`] its messages name;
//! - [`Sig`]: the signal of a put-with-signal as the remote transports carry it.

/// Which threads cooperate in a call: the calling thread alone, its warp, or its block. Warp- and
/// block-scoped calls must be made by every thread of the warp/block with the same arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Thread,
    Warp,
    Block,
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

rshmem_ibgda::codes! {
    /// Which collective a team synchronization belongs to (the high bits of its tag), with the message
    /// of a mismatch whose other PE is in this kind of collective.
    #[derive(Debug)]
    pub enum Kind: u16 [from_repr, mismatch_text] {
        Sync = 1 => "collective mismatch: the target PE (a member of this team) is in a barrier or sync of the team; every member must call the same collectives in the same order\0",
        Broadcast = 2 => "collective mismatch: the target PE (a member of this team) is in a broadcast of the team, or in this call with different arguments (root, count); every member must call the same collectives in the same order with the same arguments\0",
        Fcollect = 3 => "collective mismatch: the target PE (a member of this team) is in an fcollect of the team, or in this call with a different count\0",
        Collect = 4 => "collective mismatch: the target PE (a member of this team) is in a collect of the team\0",
        Alltoall = 5 => "collective mismatch: the target PE (a member of this team) is in an alltoall of the team, or in this call with a different count\0",
        Reduce = 6 => "collective mismatch: the target PE (a member of this team) is in a reduction of the team, or in this call with a different count, type or operator\0",
        Reducescatter = 7 => "collective mismatch: the target PE (a member of this team) is in a reducescatter of the team, or in this call with a different count, type or operator\0",
        Split = 8 => "collective mismatch: the target PE (a member of the parent team) is in a team split, or in this split with different arguments (start, stride, size)\0",
        Other = 15 => "collective mismatch: the target PE (a member of this team) is in another collective of the team\0",
    }
}

impl Kind {
    /// The kind of a synchronization tag (`coll::tag`: the kind in the top four bits); `Other` for a
    /// code no kind has.
    #[inline(always)]
    pub const fn from_tag(tag: u16) -> Kind {
        match Kind::from_repr(tag >> 12) {
            Some(k) => k,
            None => Kind::Other,
        }
    }
}

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
    Mismatch(Kind),
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

/// A put signal as the remote transports carry it: `op` (SIGNAL_SET / SIGNAL_ADD, checked by the
/// caller) of `value` on the u64 at the symmetric address `local` on the target.
#[derive(Clone, Copy)]
pub(crate) struct Sig {
    pub local: usize,
    pub value: u64,
    pub op: i32,
}

// ---------------------------------------------------------------- AMO types

/// Bit patterns the hardware operates on atomically (`u32` and `u64`; implemented in `arch` with its
/// atomics).
pub trait AmoBits: Copy {
    /// Atomic read-modify-write; returns the old value.
    ///
    /// # Safety
    /// `p` must be non-null, aligned for `Self` and point to memory mapped in this process that, while
    /// this runs, is accessed only atomically (the arch width ops' contract).
    unsafe fn rmw(op: Rmw, p: *mut Self, v: Self) -> Self;
    /// Atomic compare-and-swap; returns the old value.
    ///
    /// # Safety
    /// `p` must be non-null, aligned for `Self` and point to memory mapped in this process that, while
    /// this runs, is accessed only atomically (the arch width ops' contract).
    unsafe fn cas(p: *mut Self, cond: Self, v: Self) -> Self;
    /// Relaxed atomic load.
    ///
    /// # Safety
    /// `p` must be non-null, aligned for `Self` and point to memory mapped in this process that, while
    /// this runs, is accessed only atomically (the arch width ops' contract).
    unsafe fn load(p: *const Self) -> Self;
    /// Relaxed atomic store.
    ///
    /// # Safety
    /// `p` must be non-null, aligned for `Self` and point to memory mapped in this process that, while
    /// this runs, is accessed only atomically (the arch width ops' contract).
    unsafe fn store(p: *mut Self, v: Self);
    fn one() -> Self;
    /// Zero-extended to 64 bits, and back (the remote arm's operands and results).
    fn to_u64(self) -> u64;
    fn from_u64(v: u64) -> Self;
}

/// Types usable with swap/set/fetch/compare_swap (NVSHMEM's extended AMO types).
pub trait Amo: Copy {
    type Bits: AmoBits;
    fn to_bits(self) -> Self::Bits;
    fn from_bits(b: Self::Bits) -> Self;
}
/// Integer types usable with every AMO (add, inc, and, or, xor too).
pub trait AmoInt: Amo {}

macro_rules! amo_types {
    ($($t:ty => $b:ty, $int:tt;)*) => {$(
        impl Amo for $t {
            type Bits = $b;
            #[inline(always)] fn to_bits(self) -> $b { amo_types!(@to $int, self, $b) }
            #[inline(always)] fn from_bits(b: $b) -> $t { amo_types!(@from $int, b, $t) }
        }
        amo_types!(@int $int, $t);
    )*};
    (@to int, $v:expr, $b:ty) => { $v as $b };
    (@to float, $v:expr, $b:ty) => { $v.to_bits() };
    (@from int, $v:expr, $t:ty) => { $v as $t };
    (@from float, $v:expr, $t:ty) => { <$t>::from_bits($v) };
    (@int int, $t:ty) => { impl AmoInt for $t {} };
    (@int float, $t:ty) => {};
}
amo_types! {
    i32 => u32, int; u32 => u32, int; i64 => u64, int; u64 => u64, int;
    isize => u64, int; usize => u64, int; f32 => u32, float; f64 => u64, float;
}
