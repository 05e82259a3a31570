//! Data shared by the host runtime and the device library: the device state (one per PE and loaded
//! module), the layout of the internal area at the start of every symmetric heap, and the constants of
//! the C API. One definition, used by host and device code alike.

/// Most PEs a job may have. The device state holds one peer base per PE.
pub const MAX_PES: usize = 512;

/// Declares the device state (`.extern .const rshmemi_device_state`) in the PTX of the crate that
/// invokes it: every crate whose GPU code calls the device API needs this once (`kernels!` does it).
/// The runtime links the definition in when it loads the module.
#[macro_export]
#[cfg_attr(target_arch = "nvptx64", allow_internal_unstable(asm_experimental_arch))]
macro_rules! declare_device_state {
    () => {
        #[cfg(target_arch = "nvptx64")]
        ::core::arch::global_asm!(
            ".extern .const .align 8 .b8 rshmemi_device_state[{n}];",
            n = const ::core::mem::size_of::<$crate::state::DeviceState>()
        );
    };
}
// This crate's own declaration: the state reads of `arch::nvptx` name the symbol.
declare_device_state!();

/// `DeviceState::route` values: no transport reaches the PE; its heap is mapped (loads and stores);
/// the CPU proxy carries requests to it; the GPU drives a NIC to it (IBGDA).
pub const ROUTE_NONE: u8 = 0;
/// `DeviceState::route`: the PE's heap is mapped in this process (`peer_base[pe] != 0`), so device
/// code reaches it with loads, stores and atomics (P2P, or shared memory on the CPU backend).
pub const ROUTE_P2P: u8 = 1;
/// `DeviceState::route`: the CPU proxy carries requests to the PE (`remote::proxy`).
pub const ROUTE_PROXY: u8 = 2;
/// `DeviceState::route`: device threads post work requests to a NIC queue pair to the PE themselves
/// (`remote::ibgda`, through the table at `DeviceState::ibgda`).
pub const ROUTE_IBGDA: u8 = 3;

/// `DeviceState::magic` once the runtime has filled the state in.
pub const STATE_MAGIC: u64 = 0x5253_484d_454d_0004; // "RSHMEM" v4 (v2: routes and the proxy ring; v3: the IBGDA table; v4: proxy channels)

/// Name of the device state variable in every GPU module (PTX text in `declare_device_state!`, the
/// inline assembly of `arch::nvptx`, and the runtime's definition must spell it the same way).
pub const STATE_SYMBOL: &str = "rshmemi_device_state";

/// Bytes reserved at the start of every symmetric heap for the runtime's own synchronization
/// variables (`Internal`). User allocations start after it.
pub const INTERNAL_BYTES: usize = 1024 * 1024;

/// Most slots a proxy request ring may have (1 Mi slots = 64 MiB of host memory).
pub const MAX_SLOTS: u64 = 1 << 20;

/// What device code holds to post to a proxy request ring (`remote::proxy`, which has the ring's
/// layout and protocol): the header's address (in this process / as the GPU sees it) and the slot
/// count. Kept by the caller (the device state's `proxy_ring`) so a post reads nothing of the header
/// but `tail`: on a GPU the header is in host memory, and every read of it is a PCIe round trip. The
/// host makes it (`rshmem::transport::proxy::ring`) after setting the ring up.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, Debug, PartialEq, Eq, Default)]
pub struct RingRef {
    /// Address of the `RingHeader` (64-aligned), followed by `slots` slots.
    pub header: u64,
    /// Slot count: a power of two in 1..=MAX_SLOTS.
    pub slots: u64,
}

const _: () = assert!(core::mem::size_of::<RingRef>() == 16);

impl RingRef {
    /// Whether it can name a ring: a non-null 64-aligned header and a valid slot count.
    #[inline(always)]
    pub fn is_valid(self) -> bool {
        self.header != 0 && self.header.is_multiple_of(64) && self.slots != 0 && self.slots <= MAX_SLOTS && self.slots.is_power_of_two()
    }
}

/// Most proxy channels a PE may have (`RSHMEM_PROXY_CHANNELS`).
pub const MAX_CHANNELS: usize = 8;

/// One proxy channel as device code sees it (`remote::proxy` has the protocol): a request ring and its
/// return area and staging chunks in host memory that the channel's proxy thread drains, and the
/// channel's counters in device memory that posters update. 64 bytes; `ring == 0`: no channel.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, Debug, PartialEq, Eq, Default)]
pub struct Channel {
    /// Address of the `RingHeader` (host memory, 64-aligned), followed by `slots` request slots.
    pub ring: u64,
    /// Slot count: a power of two in 1..=MAX_SLOTS.
    pub slots: u64,
    /// The return area: `slots` `ReturnSlot`s (host memory).
    pub ret: u64,
    /// The staging chunks: `slots` chunks of `chunk` bytes (host memory); ticket `t` owns chunk
    /// `t % slots`.
    pub stage: u64,
    /// Bytes of one staging chunk (a power of two).
    pub chunk: u64,
    /// The channel's `ChannelCounters` (device memory).
    pub counters: u64,
    /// A thread's puts up to this many bytes are staged (copied into the channel by the thread);
    /// larger ones name their source, which the proxy copies (`RSHMEM_PROXY_THREAD_STAGE`).
    pub thread_stage: u64,
    /// `CHANNEL_*` flags.
    pub flags: u64,
}

/// `Channel::flags`: in a warp's or block's staged put every thread fences at system scope before the
/// group's barrier (`RSHMEM_PROXY_GROUP_FENCE=every`). Without it only the publishing thread fences,
/// after the barrier: the barrier orders the group's staged stores before that fence at block scope,
/// and the fence is cumulative (the PTX memory model; NCCL's proxy FIFOs in host memory rely on the
/// same barrier-then-one-fence pattern). The flag is there to measure the difference, and as a switch
/// should a GPU ever show the single fence short.
pub const CHANNEL_FENCE_EVERY: u64 = 1;
const _: () = assert!(core::mem::size_of::<Channel>() == 64);

impl Channel {
    /// The ring of this channel.
    #[inline(always)]
    pub fn ring_ref(&self) -> RingRef {
        RingRef { header: self.ring, slots: self.slots }
    }
    /// Whether it describes a usable channel: a valid ring, staging chunks of a power-of-two size,
    /// and counters.
    #[inline(always)]
    pub fn is_valid(&self) -> bool {
        self.ring_ref().is_valid() && self.counters != 0 && self.counters.is_multiple_of(64) && (self.chunk == 0 || self.chunk.is_power_of_two())
    }
}

/// Per-PE state the device library reads. On GPUs it is a global in device memory (`rshmemi_device_state`)
/// of every module that contains the device library; on the CPU backend a process global.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DeviceState {
    /// `STATE_MAGIC` when initialized; 0 before `init` (device calls then fail, naming the call).
    pub magic: u64,
    /// This PE's number in the job, `0..n_pes` (`nvshmem_my_pe`); -1 in [`DeviceState::ZERO`].
    pub my_pe: i32,
    /// Number of PEs in the job (`nvshmem_n_pes`), at most [`MAX_PES`].
    pub n_pes: i32,
    /// Address of this PE's heap in this process, and its size in bytes (the whole reserved range).
    pub heap_base: u64,
    /// Size in bytes of this PE's heap (the whole reserved range, the same on every PE).
    pub heap_size: u64,
    /// 1: check PE numbers and heap ranges on every call (the default); 0: skip the checks.
    pub checks: u32,
    /// RSHMEM_WAIT_TIMEOUT in milliseconds (0: none): how long a team synchronization inside a GPU
    /// kernel may wait for a member's announcement before the PE stops naming it (`coll::sync`).
    pub wait_timeout_ms: u32,
    /// Node-local PEs of this PE's node: `team_node_my_pe`, count, and the first global PE of the node.
    pub node_my_pe: i32,
    /// Number of PEs on this PE's node (the size of `TEAM_NODE`); `node_pe[..node_n_pes]` are valid.
    pub node_n_pes: i32,
    /// The proxy transport's request ring as device code sees it (`header == 0`: no proxy transport).
    /// One ring per PE, shared by every thread that reaches a PE routed `ROUTE_PROXY`.
    pub proxy_ring: RingRef,
    /// Address (as device code sees it) of the ring's return area: `proxy_ring.slots`
    /// [`ReturnSlot`](crate::remote::proxy::ReturnSlot)s, where the proxy delivers fetched values. 0
    /// when there is no proxy transport.
    pub proxy_ret: u64,
    /// Address (as device code sees it) of this PE's target table (`remote::lane::TargetTable`): the
    /// lanes whose frames device threads apply; 0 without a remote engine.
    pub target: u64,
    /// `route[pe]`: how device code reaches PE `pe` (`ROUTE_*`). Read only on the cold path: a PE with
    /// a non-zero `peer_base` is reached by loads and stores whatever this says.
    pub route: [u8; MAX_PES],
    /// `peer_base[pe]`: where PE `pe`'s heap is mapped in this process, or 0 when it is not mapped
    /// (a PE on another node). `peer_base[my_pe] == heap_base`.
    pub peer_base: [u64; MAX_PES],
    /// `node_pe[i]`: global PE number of the i-th PE of this node (for NVSHMEMX_TEAM_NODE).
    pub node_pe: [i32; MAX_PES],
    /// Address (as device code sees it) of the IBGDA transport's table (`remote::ibgda::Table`), 0
    /// without that transport. After the arrays, so that the offsets the C++ fast paths read stay put.
    pub ibgda: u64,
    /// How many of `proxy` are in use (0: no proxy transport). Device code picks a channel by its
    /// warp (`remote::proxy::channel_of`).
    pub proxy_channels: u64,
    /// The proxy transport's channels (`proxy[0]` is also `proxy_ring`, `proxy_ret`).
    pub proxy: [Channel; MAX_CHANNELS],
}

impl DeviceState {
    /// The state of an uninitialized PE: magic 0 (every device call fails as called before init), no
    /// PE (`my_pe` and `node_my_pe` -1), no heap, no PE routed, no transport; checks on.
    pub const ZERO: DeviceState = DeviceState {
        magic: 0,
        my_pe: -1,
        n_pes: 0,
        heap_base: 0,
        heap_size: 0,
        checks: 1,
        wait_timeout_ms: 0,
        node_my_pe: -1,
        node_n_pes: 0,
        proxy_ring: RingRef { header: 0, slots: 0 },
        proxy_ret: 0,
        target: 0,
        route: [ROUTE_NONE; MAX_PES],
        peer_base: [0; MAX_PES],
        node_pe: [0; MAX_PES],
        ibgda: 0,
        proxy_channels: 0,
        proxy: [Channel { ring: 0, slots: 0, ret: 0, stage: 0, chunk: 0, counters: 0, thread_stage: 0, flags: 0 }; MAX_CHANNELS],
    };
}

/// Whether `off` is the offset of a u64 field of [`DeviceState`] (or of an element of its u64 arrays):
/// what [`Field<u64>`] and the CPU backend's state writes accept.
pub const fn is_u64_field(off: usize) -> bool {
    use core::mem::offset_of;
    let peers = offset_of!(DeviceState, peer_base);
    off == offset_of!(DeviceState, magic)
        || off == offset_of!(DeviceState, heap_base)
        || off == offset_of!(DeviceState, heap_size)
        || off == offset_of!(DeviceState, proxy_ring)
        || off == offset_of!(DeviceState, proxy_ring) + 8
        || off == offset_of!(DeviceState, proxy_ret)
        || off == offset_of!(DeviceState, target)
        || off == offset_of!(DeviceState, ibgda)
        || off == offset_of!(DeviceState, proxy_channels)
        || (off >= offset_of!(DeviceState, proxy) && off < offset_of!(DeviceState, proxy) + 64 * MAX_CHANNELS && off.is_multiple_of(8))
        || (off >= peers && off < peers + 8 * MAX_PES && (off - peers).is_multiple_of(8))
}
/// Whether `off` is the offset of a 4-byte field of [`DeviceState`] (or of an element of `node_pe`, or
/// of a word of four `route` bytes).
pub const fn is_u32_field(off: usize) -> bool {
    use core::mem::offset_of;
    let nodes = offset_of!(DeviceState, node_pe);
    let routes = offset_of!(DeviceState, route);
    off == offset_of!(DeviceState, my_pe)
        || off == offset_of!(DeviceState, n_pes)
        || off == offset_of!(DeviceState, checks)
        || off == offset_of!(DeviceState, wait_timeout_ms)
        || off == offset_of!(DeviceState, node_my_pe)
        || off == offset_of!(DeviceState, node_n_pes)
        || (off >= nodes && off < nodes + 4 * MAX_PES && (off - nodes).is_multiple_of(4))
        || (off >= routes && off < routes + MAX_PES && (off - routes).is_multiple_of(4))
}

/// The offset of a `W`-wide field of [`DeviceState`] (`W` is `u64` or `u32`), or of one element of its
/// arrays: what the arch layer's `state_u64`/`state_u32` read. Valid by construction, so those reads
/// need no check of their own: the named fields are constants checked at compile time, and the array
/// constructors take the index modulo [`MAX_PES`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Field<W> {
    off: usize,
    _w: core::marker::PhantomData<W>,
}

impl<W> Field<W> {
    /// The byte offset in [`DeviceState`].
    #[inline(always)]
    pub const fn offset(self) -> usize {
        self.off
    }
}

impl Field<u64> {
    /// The u64 field at byte offset `off`; panics unless [`is_u64_field`]`(off)` (a compile-time error
    /// where it is evaluated as a constant, as the named fields below are).
    #[inline(always)]
    pub const fn u64(off: usize) -> Self {
        assert!(is_u64_field(off), "not the offset of a u64 field of DeviceState");
        Field { off, _w: core::marker::PhantomData }
    }
    /// `magic`: `STATE_MAGIC` once the runtime has filled the state in (the CPU backend reads it
    /// with acquire).
    pub const MAGIC: Self = Self::u64(core::mem::offset_of!(DeviceState, magic));
    /// `heap_base`: the address of this PE's heap in this process.
    pub const HEAP_BASE: Self = Self::u64(core::mem::offset_of!(DeviceState, heap_base));
    /// `heap_size`: the heap's size in bytes.
    pub const HEAP_SIZE: Self = Self::u64(core::mem::offset_of!(DeviceState, heap_size));
    /// `proxy_ring.header` and `proxy_ring.slots`.
    pub const PROXY_RING_HEADER: Self = Self::u64(core::mem::offset_of!(DeviceState, proxy_ring));
    /// `proxy_ring.slots`: the slot count of the proxy's request ring (0 without a proxy transport).
    pub const PROXY_RING_SLOTS: Self = Self::u64(core::mem::offset_of!(DeviceState, proxy_ring) + 8);
    /// `proxy_ret`: the address of the proxy ring's return area (0 without a proxy transport).
    pub const PROXY_RET: Self = Self::u64(core::mem::offset_of!(DeviceState, proxy_ret));
    /// `target`: the address of this PE's target table (0 without a remote engine).
    pub const TARGET: Self = Self::u64(core::mem::offset_of!(DeviceState, target));
    /// `ibgda`: the address of the IBGDA table (0 without that transport).
    pub const IBGDA: Self = Self::u64(core::mem::offset_of!(DeviceState, ibgda));
    /// `proxy_channels`: how many proxy channels are in use (0: no proxy transport).
    pub const PROXY_CHANNELS: Self = Self::u64(core::mem::offset_of!(DeviceState, proxy_channels));
    /// Word `word` (0..8: ring, slots, ret, stage, chunk, counters, thread_stage, flags) of channel `c % MAX_CHANNELS`.
    #[inline(always)]
    pub const fn channel(c: usize, word: usize) -> Self {
        Field { off: core::mem::offset_of!(DeviceState, proxy) + 64 * (c % MAX_CHANNELS) + 8 * (word % 8), _w: core::marker::PhantomData }
    }
    /// `peer_base[pe % MAX_PES]`.
    #[inline(always)]
    pub const fn peer_base(pe: usize) -> Self {
        Field { off: core::mem::offset_of!(DeviceState, peer_base) + 8 * (pe & (MAX_PES - 1)), _w: core::marker::PhantomData }
    }
}

impl Field<u32> {
    /// The 4-byte field at byte offset `off`; panics unless [`is_u32_field`]`(off)` (as [`Field::u64`]).
    #[inline(always)]
    pub const fn u32(off: usize) -> Self {
        assert!(is_u32_field(off), "not the offset of a 4-byte field of DeviceState");
        Field { off, _w: core::marker::PhantomData }
    }
    /// `my_pe`: this PE's number (an i32 read as its bits).
    pub const MY_PE: Self = Self::u32(core::mem::offset_of!(DeviceState, my_pe));
    /// `n_pes`: the job's PE count.
    pub const N_PES: Self = Self::u32(core::mem::offset_of!(DeviceState, n_pes));
    /// `checks`: 1 when PE numbers and heap ranges are checked on every call, 0 when not.
    pub const CHECKS: Self = Self::u32(core::mem::offset_of!(DeviceState, checks));
    /// `wait_timeout_ms`: RSHMEM_WAIT_TIMEOUT in milliseconds, 0 for none.
    pub const WAIT_TIMEOUT_MS: Self = Self::u32(core::mem::offset_of!(DeviceState, wait_timeout_ms));
    /// `node_my_pe`: this PE's index among the PEs of its node (an i32 read as its bits).
    pub const NODE_MY_PE: Self = Self::u32(core::mem::offset_of!(DeviceState, node_my_pe));
    /// `node_n_pes`: the number of PEs on this PE's node.
    pub const NODE_N_PES: Self = Self::u32(core::mem::offset_of!(DeviceState, node_n_pes));
    /// `node_pe[i % MAX_PES]`.
    #[inline(always)]
    pub const fn node_pe(i: usize) -> Self {
        Field { off: core::mem::offset_of!(DeviceState, node_pe) + 4 * (i & (MAX_PES - 1)), _w: core::marker::PhantomData }
    }
    /// The little-endian word of the four routes `route[j..j + 4]` that holds `route[pe % MAX_PES]`
    /// (`j = pe % MAX_PES` rounded down to a multiple of 4).
    #[inline(always)]
    pub const fn route_word(pe: usize) -> Self {
        Field { off: core::mem::offset_of!(DeviceState, route) + ((pe & (MAX_PES - 1)) & !3), _w: core::marker::PhantomData }
    }
}

/// Most teams a job may have at once, the predefined ones included (NVSHMEM's default
/// NVSHMEM_MAX_TEAMS). Each has its descriptor, synchronization words and scratch in `Internal`.
pub const MAX_TEAMS: usize = 32;

/// Bytes of collective scratch per team and PE (`Internal::scratch`): the chunk buffers of reductions
/// that fetch from PEs whose heap is not mapped here, or that reduce in place.
pub const SCRATCH_BYTES: usize = 16 * 1024;

/// A team as device code sees it: member `i` is PE `start + i * stride` of the job (`node_list ==
/// PES_JOB`); for the node teams and their splits the PE `node_pe[start + i * stride]` of this node
/// (`PES_NODE`); for a team of arbitrary members (`team_init`, and splits of such a team) the PE
/// `Internal::members[list][start + i * stride]` (`PES_LISTED`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TeamDesc {
    /// Member 0's number (a job PE, an index into `node_pe`, or a position in the member table, as
    /// `node_list` says).
    pub start: i32,
    /// Distance between the numbers of consecutive members.
    pub stride: i32,
    /// Number of members (NVSHMEM's `nvshmem_team_n_pes`).
    pub size: i32,
    /// This PE's index in the team (-1: not a member).
    pub my_index: i32,
    /// How member numbers map to job PEs: `PES_JOB`, `PES_NODE` or `PES_LISTED`.
    pub node_list: u32,
    /// `TEAM_VALID` while the team exists; anything else: no such team (never made, or destroyed).
    pub valid: u32,
    /// The team it was split from (-1 for the predefined teams and those made by `team_init`).
    pub parent: i32,
    /// For `PES_LISTED`: the row of `Internal::members` holding the members (the team's own slot).
    pub list: u32,
}

/// `TeamDesc::node_list`: member numbers are job PE numbers.
pub const PES_JOB: u32 = 0;
/// `TeamDesc::node_list`: member numbers index this node's PEs (`DeviceState::node_pe`).
pub const PES_NODE: u32 = 1;
/// `TeamDesc::node_list`: member numbers index a member table (`Internal::members[list]`).
pub const PES_LISTED: u32 = 2;

/// `TeamDesc::valid` of a live team.
pub const TEAM_VALID: u32 = 0x7ea3_0001;

/// A PE's announcement while it makes a team from a unique id (`team_init`): the id last (written
/// after the rest, read first), so a reader that sees the id sees the rest.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TeamInitCall {
    /// The team's unique id, or `TEAM_UID_NONE`.
    pub uid: u64,
    /// The number of members this PE was told.
    pub npes: i32,
    /// This PE's index in the team.
    pub index: i32,
    /// The team slots free on this PE (bit i: slot i).
    pub free: u64,
    /// Padding to 64 bytes, one cache line (0).
    pub _pad: [u64; 5],
}

/// `TeamInitCall::uid` of a PE that is not making a team (NVSHMEM's invalid unique id, all ones).
pub const TEAM_UID_NONE: u64 = u64::MAX;

/// One team's synchronization words on one PE.
#[repr(C)]
pub struct TeamSync {
    /// Number of synchronizations this PE has entered in this team (touched only by the PE's caller).
    pub epoch: u64,
    /// Keeps `flags`, which other PEs write, off the cache line of `epoch` (64 bytes in all).
    pub _pad: [u64; 7],
    /// `flags[j]`: what team member `j` last announced here: `epoch << 16 | tag` (`crate::coll`).
    pub flags: [u64; MAX_PES],
}

/// The runtime's synchronization variables, at offset 0 of every PE's symmetric heap.
#[repr(C)]
pub struct Internal {
    /// Reserved (0): `teams` starts at 128.
    pub _reserved: [u64; 16],
    /// The team table (written by the host at init and at every split and destroy).
    pub teams: [TeamDesc; MAX_TEAMS],
    /// Source and result words of the host's own team operations (the slot agreement of a split).
    pub team_work: [u64; 16],
    /// What this PE announces while it is inside `team_init` (`TeamInitCall`), read by the other PEs
    /// of the job with host gets; `TEAM_UID_NONE` in `uid` when it is not.
    pub team_init: TeamInitCall,
    /// Per team slot: the job PE of each member of a team of arbitrary members (`PES_LISTED`).
    pub members: [[i32; MAX_PES]; MAX_TEAMS],
    /// Per team: the synchronization words every collective of the team uses (team 0, the world,
    /// is also barrier_all's and sync_all's).
    pub sync: [TeamSync; MAX_TEAMS],
    /// Per team: this PE's collective scratch.
    pub scratch: [[u8; SCRATCH_BYTES]; MAX_TEAMS],
}

const _: () = assert!(core::mem::size_of::<Internal>() <= INTERNAL_BYTES);
// `route` is read as little-endian u32 words of four routes (host: one atomic per word).
const _: () = assert!(core::mem::offset_of!(DeviceState, route).is_multiple_of(4) && MAX_PES.is_multiple_of(4));
const _: () = assert!(cfg!(target_endian = "little"));

// Comparison operators of wait_until / test / signal_wait_until (NVSHMEM_CMP_* values).
/// The value equals the operand (`NVSHMEM_CMP_EQ`).
pub const CMP_EQ: i32 = 0;
/// The value differs from the operand (`NVSHMEM_CMP_NE`).
pub const CMP_NE: i32 = 1;
/// The value is greater than the operand (`NVSHMEM_CMP_GT`).
pub const CMP_GT: i32 = 2;
/// The value is less than or equal to the operand (`NVSHMEM_CMP_LE`).
pub const CMP_LE: i32 = 3;
/// The value is less than the operand (`NVSHMEM_CMP_LT`).
pub const CMP_LT: i32 = 4;
/// The value is greater than or equal to the operand (`NVSHMEM_CMP_GE`).
pub const CMP_GE: i32 = 5;

/// The comparisons of `wait_until`, `test` and `signal_wait_until` (whose `cmp` takes this or one of
/// the `CMP_*` codes, NVSHMEM's `NVSHMEM_CMP_*` values).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// [`CMP_EQ`]: equal.
    Eq = CMP_EQ,
    /// [`CMP_NE`]: not equal.
    Ne = CMP_NE,
    /// [`CMP_GT`]: greater than.
    Gt = CMP_GT,
    /// [`CMP_LE`]: less than or equal.
    Le = CMP_LE,
    /// [`CMP_LT`]: less than.
    Lt = CMP_LT,
    /// [`CMP_GE`]: greater than or equal.
    Ge = CMP_GE,
}
impl From<Cmp> for i32 {
    fn from(c: Cmp) -> i32 {
        c as i32
    }
}

// Signal operators of put_signal / signal_op: NVSHMEM's own values (its nvshmemx_signal_op_t), so a
// program that passes the numbers rather than the names behaves the same under both libraries.
/// Stores the signal value into the signal word (`NVSHMEM_SIGNAL_SET`).
pub const SIGNAL_SET: i32 = 9;
/// Adds the signal value to the signal word, atomically (`NVSHMEM_SIGNAL_ADD`).
pub const SIGNAL_ADD: i32 = 10;

// Team handles, NVSHMEM's values: the predefined teams, and the first index of teams made by splits
// (3..5 are NVSHMEM's internal teams, which rshmem does not make).
/// No team (`NVSHMEM_TEAM_INVALID`): a split's result on the parent's members outside the new team,
/// and the result of a failed team creation.
pub const TEAM_INVALID: i32 = -1;
/// Every PE of the job (`NVSHMEM_TEAM_WORLD`); its synchronization words are also barrier_all's.
pub const TEAM_WORLD: i32 = 0;
/// The PEs that share memory with this one (`NVSHMEM_TEAM_SHARED`): in rshmem the PEs of this node,
/// the same members as `TEAM_NODE`.
pub const TEAM_SHARED: i32 = 1;
/// The PEs of this node (`NVSHMEMX_TEAM_NODE`); member `i` is `DeviceState::node_pe[i]`.
pub const TEAM_NODE: i32 = 2;
/// The first handle of a team made by a split or `team_init` (NVSHMEM's first such handle).
pub const TEAMS_MIN: i32 = 6;

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use core::mem::offset_of;

    /// The C++ fast paths (include/rshmem_inline.h) read the device state at fixed offsets: they must be
    /// this struct's.
    #[test]
    fn inline_header_matches_the_device_state() {
        let h = include_str!("../include/rshmem_inline.h");
        let def = |name: &str| -> u64 {
            let rest = h
                .lines()
                .find_map(|l| l.strip_prefix("#define ").and_then(|r| r.strip_prefix(name)).filter(|r| r.starts_with(' ')))
                .unwrap_or_else(|| panic!("{name} not in rshmem_inline.h"));
            let v = rest.trim().trim_end_matches("ULL");
            if let Some(x) = v.strip_prefix("0x") { u64::from_str_radix(x, 16).unwrap() } else { v.parse().unwrap() }
        };
        assert_eq!(def("RSHMEMI_STATE_MAGIC"), STATE_MAGIC);
        assert_eq!(def("RSHMEMI_OFF_MAGIC"), offset_of!(DeviceState, magic) as u64);
        assert_eq!(def("RSHMEMI_OFF_N_PES"), offset_of!(DeviceState, n_pes) as u64);
        assert_eq!(def("RSHMEMI_OFF_HEAP_BASE"), offset_of!(DeviceState, heap_base) as u64);
        assert_eq!(def("RSHMEMI_OFF_HEAP_SIZE"), offset_of!(DeviceState, heap_size) as u64);
        assert_eq!(def("RSHMEMI_OFF_CHECKS"), offset_of!(DeviceState, checks) as u64);
        assert_eq!(def("RSHMEMI_OFF_PEER_BASE"), offset_of!(DeviceState, peer_base) as u64);
        assert_eq!(def("RSHMEMI_MAX_PES"), MAX_PES as u64);
    }
}
