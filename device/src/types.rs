//! The vocabulary every layer of the device library shares, at the bottom of it: no item here names
//! anything of this crate outside this file (only `rshmem_ibgda`'s constants).
//!
//! - [`Scope`]: which threads cooperate in a call (its methods, which read thread coordinates, are in
//!   `arch`);
//! - [`Rmw`], and the AMO type traits [`AmoBits`], [`Amo`], [`AmoInt`] (the `AmoBits` implementations,
//!   which are the arch layer's atomics, are in `arch`);
//! - [`Problem`] and [`Failure`]: what a failed device call reports, with [`nic_text`] and the
//!   collective [`Kind`] its messages name;
//! - `Sig`: the signal of a put-with-signal as the remote transports carry it.

/// Which threads cooperate in a call: the calling thread alone, its warp, or its block. Warp- and
/// block-scoped calls must be made by every thread of the warp/block with the same arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The calling thread alone.
    Thread,
    /// Every thread of the caller's warp: 32 consecutive threads of the block (fewer in a partial
    /// last warp; on the CPU backend the same grouping of the block's host threads).
    Warp,
    /// Every thread of the caller's block.
    Block,
}

/// The read-modify-write operations of the AMO API, and the unsigned maximum the IBGDA posting
/// counters advance with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Rmw {
    /// Wrapping addition.
    Add,
    /// Bitwise AND.
    And,
    /// Bitwise OR.
    Or,
    /// Bitwise XOR.
    Xor,
    /// Replaces the value with the operand.
    Swap,
    /// Unsigned maximum.
    Max,
}

rshmem_ibgda::codes! {
    /// Which collective a team synchronization belongs to (the high bits of its tag), with the message
    /// of a mismatch whose other PE is in this kind of collective.
    #[derive(Debug)]
    pub enum Kind: u16 [from_repr, mismatch_text] {
        /// A barrier or sync of the team (`team_sync`, `barrier`; for the world team also
        /// `barrier_all`, `sync_all`).
        Sync = 1 => "collective mismatch: the target PE (a member of this team) is in a barrier or sync of the team; every member must call the same collectives in the same order\0",
        /// A broadcast (its tag hashes the byte count and the root).
        Broadcast = 2 => "collective mismatch: the target PE (a member of this team) is in a broadcast of the team, or in this call with different arguments (root, count); every member must call the same collectives in the same order with the same arguments\0",
        /// An fcollect (its tag hashes the byte count).
        Fcollect = 3 => "collective mismatch: the target PE (a member of this team) is in an fcollect of the team, or in this call with a different count\0",
        /// A collect (members' counts may differ: its tags name only the round).
        Collect = 4 => "collective mismatch: the target PE (a member of this team) is in a collect of the team\0",
        /// An alltoall (its tag hashes the byte count).
        Alltoall = 5 => "collective mismatch: the target PE (a member of this team) is in an alltoall of the team, or in this call with a different count\0",
        /// A reduction (its tag hashes the element count, type and operator).
        Reduce = 6 => "collective mismatch: the target PE (a member of this team) is in a reduction of the team, or in this call with a different count, type or operator\0",
        /// A reducescatter (its tag hashes the element count, type and operator).
        Reducescatter = 7 => "collective mismatch: the target PE (a member of this team) is in a reducescatter of the team, or in this call with a different count, type or operator\0",
        /// The agreement of a team split, over the parent team (its tag hashes the split's arguments).
        Split = 8 => "collective mismatch: the target PE (a member of the parent team) is in a team split, or in this split with different arguments (start, stride, size)\0",
        /// A code no other kind has (`from_tag`'s answer for an unknown one).
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
    /// rshmem is not initialized here: the device state's magic is not `STATE_MAGIC` (before init,
    /// after finalize, or a module without the runtime's state), or a transport's structure the call
    /// needs (a proxy channel, the IBGDA table) is not set up.
    NotInitialized,
    /// A PE number outside `0..n_pes` (the failure's `pe`).
    PeOutOfRange,
    /// The address range `[addr, addr + len)` that must be symmetric is not inside the symmetric heap.
    NotInHeap,
    /// No transport reaches the target PE: it is routed `ROUTE_NONE`, or its transport lacks what the
    /// call needs (e.g. a QP to the PE).
    NoTransport,
    /// A comparison operator outside `CMP_EQ..=CMP_GE`.
    BadCmp,
    /// A signal operator other than `SIGNAL_SET` and `SIGNAL_ADD`.
    BadSignalOp,
    /// A wait ran past RSHMEM_WAIT_TIMEOUT (or an IBGDA completion poll gave up).
    WaitTimeout,
    /// A team synchronization inside a kernel waited past RSHMEM_WAIT_TIMEOUT for a member's
    /// announcement (the failure's `pe`); `addr` is the synchronization count it waited for and `len`
    /// the count that member last announced here.
    SyncTimeout,
    /// The local buffer of a transfer to another node is in thread-local memory, which neither the
    /// proxy nor the NIC can reach.
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
    Nic {
        /// The error CQE's PRM syndrome (`rshmem_ibgda::mlx5::syndrome`).
        syndrome: u8,
        /// The NIC's vendor syndrome (the emulated NIC's reason code).
        vendor: u8,
        /// The opcode of the failed WQE.
        opcode: u8,
    },
}

impl Problem {
    /// The message printed for this problem, NUL-terminated (the GPU prints it with `printf`).
    pub const fn text(self) -> &'static str {
        match self {
            Problem::NotInitialized => "called before rshmem init completed (or with no device state in this module)\0",
            Problem::PeOutOfRange => "PE number out of range\0",
            Problem::NotInHeap => "address range is not inside the symmetric heap\0",
            Problem::NoTransport => "no transport reaches this PE (not mapped: another node?)\0",
            Problem::BadCmp => "invalid comparison operator (use CMP_EQ..CMP_GE)\0",
            Problem::BadSignalOp => "invalid signal operator (use SIGNAL_SET or SIGNAL_ADD)\0",
            Problem::WaitTimeout => "wait timed out (RSHMEM_WAIT_TIMEOUT)\0",
            Problem::SyncTimeout => "team synchronization timed out (RSHMEM_WAIT_TIMEOUT) waiting for the target PE: address = the synchronization this PE is in, bytes = the last one the target PE announced to it (equal counts with different collectives are a mismatch; a lower count: that PE is behind or stopped)\0",
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
    /// The failed call's name, NUL-terminated (e.g. `"rshmem_putmem\0"`).
    pub call: &'static str,
    /// What went wrong.
    pub problem: Problem,
    /// The target PE, or the number [`Problem::text`] names in its place (a team handle, a root, a
    /// type code); -1 when there is none.
    pub pe: i32,
    /// The address involved, or another number some problems report here (a reduction operator, a
    /// WQE index, a table address); 0 when there is none.
    pub addr: u64,
    /// The byte count involved, or another number some problems report here (a slot count, an entry
    /// index, a magic found); 0 when there is none.
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
    /// The value 1 (the operand of `inc` and `fetch_inc`).
    fn one() -> Self;
    /// Zero-extended to 64 bits, and back (the remote arm's operands and results).
    fn to_u64(self) -> u64;
    /// The low bits of `v` (the inverse of `to_u64`).
    fn from_u64(v: u64) -> Self;
}

/// Types usable with swap/set/fetch/compare_swap (NVSHMEM's extended AMO types).
pub trait Amo: Copy {
    /// The bit pattern the atomics operate on: `u32` for the 4-byte types, `u64` for the 8-byte ones.
    type Bits: AmoBits;
    /// The value's bits (an integer's two's complement, a float's IEEE 754 encoding).
    fn to_bits(self) -> Self::Bits;
    /// The value whose bits are `b` (the inverse of `to_bits`).
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

/// Three dimensions of a kernel launch, or a thread's or block's position in one (CUDA's `dim3`): a
/// grid's blocks, a block's threads, `thread::thread_idx` and `thread::block_idx`. Unused dimensions
/// are 1 in a shape and 0 in a position.
///
/// ```
/// use rshmem_device::Dim3;
/// let block = Dim3::from((32, 4)); // 32 x 4 threads
/// assert_eq!(block.count(), Some(128));
/// assert_eq!(block.position(37), Dim3::new(5, 1, 0)); // thread 37: x fastest, as CUDA numbers them
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Dim3 {
    /// The fastest-varying dimension (CUDA's `x`).
    pub x: u32,
    /// The second dimension (`y`).
    pub y: u32,
    /// The slowest-varying dimension (`z`).
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }
    /// The number of elements of a shape (`x * y * z`), None when it overflows `u32`.
    pub const fn count(self) -> Option<u32> {
        match self.x.checked_mul(self.y) {
            Some(xy) => xy.checked_mul(self.z),
            None => None,
        }
    }
    /// The position of linear index `i` in this shape (`x` fastest, as CUDA numbers threads).
    pub const fn position(self, i: u32) -> Dim3 {
        let (nx, ny) = (if self.x == 0 { 1 } else { self.x }, if self.y == 0 { 1 } else { self.y });
        Dim3 { x: i % nx, y: i / nx % ny, z: i / nx / ny }
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3 { x, y, z: 1 }
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3 { x, y, z }
    }
}

/// A pointer to `T` as a kernel argument: plain data (`bytemuck::Pod`, 8 bytes), so it can sit in a
/// typed kernel's argument struct, where a raw pointer cannot. Made on the host from a symmetric
/// allocation (`rshmem::SymSlice::dev_ptr`) or any address device code may use; read in the kernel
/// with [`DevPtr::as_ptr`].
///
/// ```
/// use rshmem_device::DevPtr;
/// #[repr(C)]
/// #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
/// struct Args {
///     data: DevPtr<f32>, // 8 bytes, plain data
///     n: u64,
/// }
/// let buf = [0f32; 4];
/// let a = Args { data: DevPtr::new(buf.as_ptr()), n: 4 };
/// assert_eq!(a.data.wrapping_add(1).addr(), buf.as_ptr() as u64 + 4);
/// assert_eq!(std::mem::size_of::<Args>(), 16);
/// ```
#[repr(transparent)]
pub struct DevPtr<T> {
    addr: u64,
    _t: core::marker::PhantomData<fn() -> T>,
}

impl<T> DevPtr<T> {
    /// The null pointer.
    pub const fn null() -> DevPtr<T> {
        DevPtr { addr: 0, _t: core::marker::PhantomData }
    }
    /// The pointer `p`.
    pub fn new(p: *const T) -> DevPtr<T> {
        DevPtr { addr: p as usize as u64, _t: core::marker::PhantomData }
    }
    /// The pointer at address `addr`.
    pub const fn from_addr(addr: u64) -> DevPtr<T> {
        DevPtr { addr, _t: core::marker::PhantomData }
    }
    /// The address.
    pub const fn addr(self) -> u64 {
        self.addr
    }
    /// The pointer, for device code.
    #[inline(always)]
    pub fn as_ptr(self) -> *mut T {
        self.addr as usize as *mut T
    }
    /// The pointer `count` elements further (wrapping arithmetic, as `pointer::wrapping_add`).
    #[inline(always)]
    pub fn wrapping_add(self, count: usize) -> DevPtr<T> {
        DevPtr::from_addr(self.addr.wrapping_add((count * core::mem::size_of::<T>()) as u64))
    }
    /// The pointer `bytes` bytes further (wrapping arithmetic).
    #[inline(always)]
    pub const fn wrapping_byte_add(self, bytes: usize) -> DevPtr<T> {
        DevPtr::from_addr(self.addr.wrapping_add(bytes as u64))
    }
    /// The same address as a pointer to `U` (as `pointer::cast`).
    #[inline(always)]
    pub const fn cast<U>(self) -> DevPtr<U> {
        DevPtr::from_addr(self.addr)
    }
}

impl<T> Clone for DevPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevPtr<T> {}
impl<T> core::fmt::Debug for DevPtr<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DevPtr({:#x})", self.addr)
    }
}
impl<T> PartialEq for DevPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}
impl<T> Eq for DevPtr<T> {}
// SAFETY: DevPtr is `repr(transparent)` over a u64 (the PhantomData is a zero-sized marker): every
// bit pattern is a valid value, the all-zero one included (null), and it has no padding.
unsafe impl<T: 'static> bytemuck::Zeroable for DevPtr<T> {}
// SAFETY: as above; `T: 'static` as Pod requires, and no reference or pointer is stored, only an address.
unsafe impl<T: 'static> bytemuck::Pod for DevPtr<T> {}
