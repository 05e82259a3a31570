//! Teams and collectives, written once for both backends on top of the RMA calls of `ops`.
//!
//! # Teams
//! A team is a strided set of PEs (`state::TeamDesc`): member `i` is job PE `start + i * stride`, or for
//! the node teams and their splits the `start + i * stride`-th PE of this node. The host makes and
//! destroys teams (a split is collective over the parent team) and writes the table into the internal
//! area of every member's heap; device code reads it from there.
//!
//! # Synchronization
//! Every collective of a team ends with one exchange of that team ([`team_exchange`]): each member
//! announces `epoch << 16 | tag` in its slot on every other member and waits until every slot here has
//! reached the epoch. The tag says which collective, and a hash of its arguments (root, count, type,
//! operator), so members that entered different collectives, or the same one with different arguments,
//! fail with a message naming what the other PE is in instead of hanging or mixing data.
//!
//! # Algorithms, and why
//! - broadcast, fcollect, collect, alltoall push: each PE writes its contribution to every member
//!   (NVLink stores for mapped PEs, one proxy request per member for the others), then one exchange with
//!   quiet completes and publishes them. No PE writes a member's destination before that member has
//!   entered the collective (`deliver`): small data lands in the member's inbox and is copied out after
//!   the one round; large data is written in place after an opening round. With direct writes every
//!   byte crosses a link once. Ring or tree schedules pay off when a PE's links are the bottleneck; with
//!   one NVLink switch domain (every GPU pair at full rate) direct writes are as fast and have the
//!   fewest rounds.
//! - small reductions (all members' data fit half the team's scratch, 8 KiB) push: each PE writes its
//!   source (its block `i`, for reducescatter) into an inbox in member `i`'s scratch, one exchange
//!   publishes them, and each PE combines its inbox locally in team order (so every PE computes bitwise
//!   the same result, floats included). One round: latency is what counts at these sizes.
//! - larger reductions pull: after an opening exchange (every member's source is ready), each PE reads
//!   every member's source, combines in team order and writes only its own destination; a closing
//!   exchange keeps sources unchanged until all have read them. Two rounds, but each source byte
//!   crosses a link once per reader and no scratch limits the size. When every member is mapped, one
//!   pass combines in registers; otherwise (PEs on other nodes, or an in-place reduction) chunks go
//!   through the team's scratch. Reducescatter is the same with each PE reducing only its own block, so
//!   each source byte is read once in total.

use crate::arch;
use crate::ops;
use crate::remote::wait::idle;
use crate::remote;
use crate::route::{fail, locate, state, St};
use crate::state::*;
use crate::types::{Problem, Scope};
use core::mem::{offset_of, size_of};
use core::ptr;

// ---------------------------------------------------------------- collective kinds (tags)

// The kinds are defined with the failures that name them (`Problem::Mismatch`), below this layer.
pub use crate::types::Kind;

/// The tag of a collective: its kind and 12 bits of a hash of its arguments.
#[inline(always)]
pub fn tag(kind: Kind, args: [u64; 3]) -> u16 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64;
    for a in args {
        h = (h ^ a).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 29;
    }
    ((kind as u16) << 12) | (h >> 52) as u16
}

// ---------------------------------------------------------------- teams

/// A team as one collective call sees it.
#[derive(Clone, Copy)]
pub struct Team {
    pub id: i32,
    pub d: TeamDesc,
}

impl Team {
    /// The job PE number of member `i`.
    #[inline(always)]
    pub fn pe(&self, i: i32) -> i32 {
        member(&self.d, i)
    }
    #[inline(always)]
    pub fn size(&self) -> i32 {
        self.d.size
    }
    #[inline(always)]
    pub fn me(&self) -> i32 {
        self.d.my_index
    }
}

/// The job PE number of member `i` of a team.
#[inline(always)]
pub fn member(d: &TeamDesc, i: i32) -> i32 {
    let j = d.start + i * d.stride;
    if d.node_list != 0 {
        St.node_pe(j)
    } else {
        j
    }
}

/// Team `team`'s descriptor on this PE, or None for a handle with no live team.
#[inline(always)]
pub fn lookup(call: &'static str, team: i32) -> Option<TeamDesc> {
    let s = state(call);
    if team == TEAM_WORLD {
        // The world's descriptor from the device state (constant memory on GPUs), no heap load: the
        // barrier on it is the latency-critical one.
        let n = s.n_pes();
        return Some(TeamDesc { start: 0, stride: 1, size: n, my_index: s.my_pe(), node_list: 0, valid: TEAM_VALID, parent: -1, _pad: 0 });
    }
    if team < 0 || team as usize >= MAX_TEAMS {
        return None;
    }
    let p = s.heap_base() as usize + offset_of!(Internal, teams) + team as usize * size_of::<TeamDesc>();
    // SAFETY: the team table lies in the internal area at the start of this PE's heap (mapped while the
    // state's magic is set, checked by `state`); the host writes it only between kernels.
    let d = unsafe { ptr::read_volatile(p as *const TeamDesc) };
    (d.valid == TEAM_VALID).then_some(d)
}

/// Team `team`, which this PE must be a member of; a failure naming `call` otherwise.
#[inline(always)]
pub fn team(call: &'static str, team: i32) -> Team {
    let Some(d) = lookup(call, team) else { fail(call, Problem::BadTeam, team, 0, 0) };
    if d.my_index < 0 {
        fail(call, Problem::NotMember, team, 0, 0);
    }
    Team { id: team, d }
}

/// This PE's index in `team`, -1 if it is not a member or there is no such team.
#[inline]
pub fn team_my_pe(team: i32) -> i32 {
    lookup("rshmem_team_my_pe\0", team).map_or(-1, |d| d.my_index)
}
/// The number of PEs of `team`, -1 if there is no such team.
#[inline]
pub fn team_n_pes(team: i32) -> i32 {
    lookup("rshmem_team_n_pes\0", team).map_or(-1, |d| d.size)
}

/// The index of job PE `pe` in team `d`, or -1.
#[inline]
pub fn index_of(d: &TeamDesc, pe: i32) -> i32 {
    let j = if d.node_list != 0 {
        // The position of `pe` among this node's PEs.
        match (0..St.node_n_pes()).find(|&k| St.node_pe(k) == pe) {
            Some(k) => k,
            None => return -1,
        }
    } else {
        pe
    };
    let rel = j - d.start;
    if d.stride <= 0 || rel < 0 || rel % d.stride != 0 || rel / d.stride >= d.size {
        return -1;
    }
    rel / d.stride
}

/// Member `src_pe` of team `src` as a member index of team `dest`: -1 when either team does not
/// exist, `src_pe` is out of range, or that PE is not in `dest` (NVSHMEM's rule).
#[inline]
pub fn team_translate_pe(src: i32, src_pe: i32, dest: i32) -> i32 {
    let call = "rshmem_team_translate_pe\0";
    let (Some(s), Some(d)) = (lookup(call, src), lookup(call, dest)) else { return -1 };
    if src_pe < 0 || src_pe >= s.size {
        return -1;
    }
    index_of(&d, member(&s, src_pe))
}

// ---------------------------------------------------------------- synchronization

/// This PE's synchronization words of team `id`.
#[inline(always)]
fn sync_words(id: i32) -> *mut TeamSync {
    let base = St.heap_base() as usize;
    (base + offset_of!(Internal, sync) + id as usize * size_of::<TeamSync>()) as *mut TeamSync
}

/// This PE's scratch of team `id`.
#[inline(always)]
fn scratch(id: i32) -> *mut u8 {
    let base = St.heap_base() as usize;
    (base + offset_of!(Internal, scratch) + id as usize * SCRATCH_BYTES) as *mut u8
}

/// Where the data that the next synchronization of team `id` publishes may be written into this PE's
/// scratch by other members: the half of the scratch of that synchronization's epoch parity.
///
/// Why this is safe: a member writes into my half `x % 2` only data that synchronization `x` publishes,
/// so it is past synchronization `x - 1`, which I have announced: I am done with what synchronization
/// `x - 2` published into the same half (I read it before announcing `x - 1`). Every thread of a scope
/// reads the counter before the scope's synchronization, so all pick the same half.
///
/// # Safety
/// rshmem initialized; `id` a live team.
#[inline(always)]
unsafe fn inbox(id: i32) -> *mut u8 {
    let sync = sync_words(id);
    // SAFETY: team `id`'s synchronization words and scratch lie in the internal area of this PE's
    // heap, mapped while rshmem is initialized (the caller's contract); the epoch is written only by
    // this PE's thread in a synchronization of the team, which the scope's threads are not in now.
    unsafe {
        let next = ptr::read_volatile(ptr::addr_of!((*sync).epoch)) + 1;
        scratch(id).add((next as usize & 1) * (SCRATCH_BYTES / 2))
    }
}

/// One synchronization of team `t` by one thread of this PE: announce, then wait for every member
/// (see the module doc). `with_quiet`: complete this PE's outstanding operations first (barrier);
/// else a release fence (sync).
///
/// # Safety
/// rshmem initialized; `t` a live team this PE is a member of; one thread of this PE at a time per team.
#[inline(always)]
pub unsafe fn team_exchange(call: &'static str, t: &Team, tag: u16, with_quiet: bool) {
    let sync = sync_words(t.id);
    // SAFETY: the team's synchronization words lie in the internal area of this PE's heap, mapped while
    // rshmem is initialized (the caller's contract); `addr_of_mut!` makes no reference.
    let (epoch_ctr, flags) = unsafe { (ptr::addr_of_mut!((*sync).epoch), ptr::addr_of_mut!((*sync).flags) as *mut u64) };
    // The counter is read before the fence so that its load overlaps the fence's wait.
    // SAFETY: the epoch is this PE's counter, touched only by the one thread of this PE in a
    // synchronization of the team (the caller's contract).
    let epoch = unsafe { ptr::read_volatile(epoch_ctr) } + 1;
    if with_quiet {
        // Remote PEs: this PE's requests must be complete at their targets before any PE can leave (a
        // PE that leaves may read what we put on a third PE).
        ops::quiet();
    } else {
        arch::fence_acq_rel();
    }
    let (me, n) = (t.me(), t.size());
    let word = (epoch << 16) | tag as u64;
    // SAFETY: `me` < size <= MAX_PES: a slot of the flags array.
    let my_slot = unsafe { flags.add(me as usize) } as usize;
    // My own slot is neither written nor polled: the counter says where I am.
    for i in 0..n {
        if i != me {
            let pe = t.pe(i);
            let (r, mapped) = locate(call, my_slot, 8, pe);
            // SAFETY: `my_slot` is a u64 of the internal area, at the same offset on every member
            // (checked by `locate`): `r` is its mapping on `pe`; the flags are accessed only
            // atomically.
            unsafe {
                if mapped {
                    arch::store_relaxed_u64(r as *mut u64, word);
                } else {
                    remote::put_inline(call, my_slot, 8, word, pe);
                }
            }
        }
    }
    // SAFETY: as for the read of the epoch above.
    unsafe { ptr::write_volatile(epoch_ctr, epoch) };
    let mut spins = 0u64;
    for i in 0..n {
        if i == me {
            continue;
        }
        loop {
            // SAFETY: slot `i` < n <= MAX_PES of this PE's flags (in the internal area), which the
            // members write only atomically.
            let v = unsafe { arch::load_acquire_u64(flags.add(i as usize)) };
            if v >> 16 >= epoch {
                // A member may already be one synchronization further (it saw everyone's
                // announcement and went on): only a slot at this very epoch says what it entered.
                if v >> 16 == epoch && v as u16 != tag {
                    fail(call, Problem::Mismatch(Kind::from_tag(v as u16)), t.pe(i), 0, 0);
                }
                break;
            }
            idle(&mut spins, call);
        }
    }
}

/// `team_exchange` by one thread of `scope`, with the scope synchronized before and after.
///
/// # Safety
/// As `team_exchange`; every thread of the scope calls it.
#[inline(always)]
pub unsafe fn team_exchange_scoped(scope: Scope, call: &'static str, t: &Team, tag: u16, with_quiet: bool) {
    scope.sync();
    if scope.rank() == 0 {
        // SAFETY: the caller's contract; one thread of the scope (its rank 0) exchanges.
        unsafe { team_exchange(call, t, tag, with_quiet) };
    }
    scope.sync();
}

/// barrier (`with_quiet`) or sync of team `team` by `scope`.
///
/// # Safety
/// rshmem initialized; every thread of the scope calls it; one scope per PE and team at a time.
#[inline(always)]
pub unsafe fn team_sync_scoped(scope: Scope, team_id: i32, with_quiet: bool, call: &'static str) {
    let t = team(call, team_id);
    // SAFETY: the caller's contract; `team` checked that the team is live and this PE a member.
    unsafe { team_exchange_scoped(scope, call, &t, tag(Kind::Sync, [0; 3]), with_quiet) };
}

/// The barrier (`with_quiet`) or sync of all PEs: the world team's synchronization.
///
/// # Safety
/// rshmem must be initialized and stay so until this returns, every PE must take part, and only one
/// scope of this PE may be in a synchronization of the world team at a time.
#[inline(always)]
unsafe fn barrier_scoped(scope: Scope, with_quiet: bool, call: &'static str) {
    // SAFETY: the caller's contract, for the world team.
    unsafe { team_sync_scoped(scope, TEAM_WORLD, with_quiet, call) }
}

/// Completes this PE's outstanding operations and waits for all PEs (one calling thread per PE).
#[inline]
pub fn barrier_all() {
    // SAFETY: the internal area is at the heap base of every PE (runtime invariant).
    unsafe { barrier_scoped(Scope::Thread, true, "rshmem_barrier_all\0") }
}
/// Waits for all PEs without completing outstanding operations (one calling thread per PE).
#[inline]
pub fn sync_all() {
    // SAFETY: as above.
    unsafe { barrier_scoped(Scope::Thread, false, "rshmem_sync_all\0") }
}
/// Block-scoped barrier_all: every thread of one block per PE calls it.
#[inline]
pub fn barrier_all_block() {
    // SAFETY: as above.
    unsafe { barrier_scoped(Scope::Block, true, "rshmem_barrier_all_block\0") }
}
#[inline]
pub fn barrier_all_warp() {
    // SAFETY: as above.
    unsafe { barrier_scoped(Scope::Warp, true, "rshmem_barrier_all_warp\0") }
}
#[inline]
pub fn sync_all_block() {
    // SAFETY: as above.
    unsafe { barrier_scoped(Scope::Block, false, "rshmem_sync_all_block\0") }
}
#[inline]
pub fn sync_all_warp() {
    // SAFETY: as above.
    unsafe { barrier_scoped(Scope::Warp, false, "rshmem_sync_all_warp\0") }
}

// ---------------------------------------------------------------- data movement

/// Checks that `[p, p + bytes)` lies in this PE's heap (symmetric buffers of collectives).
#[inline(always)]
fn check_sym(call: &'static str, p: usize, bytes: usize) {
    let me = St.my_pe();
    locate(call, p, bytes, me);
}

/// Members in the order a PE writes to them: the next one first, itself last, so that concurrent
/// pushes of all members start on different targets.
#[inline(always)]
fn push_order(t: &Team, k: i32) -> i32 {
    (t.me() + 1 + k) % t.size()
}

/// The delivery of a data collective that lands `landing` bytes in every member's `dest`: `push(base)`
/// writes this PE's contributions relative to `base` on each target (the same symmetric address on
/// every member), then a synchronization with quiet publishes them.
///
/// No PE writes into another member's `dest` before that member has entered the collective (NVSHMEM's
/// collectives behave so, and programs rely on it: a broadcast right after reading the result of the
/// last one). Small deliveries (`landing` fits half the scratch) therefore land in the inbox, and each
/// PE copies its inbox into its `dest` after the one synchronization; large ones first synchronize
/// (every member has entered, and mismatched arguments are caught before any data moves), then write
/// straight into `dest`.
///
/// # Safety
/// As the collectives: `dest` symmetric with `landing` bytes (checked by the caller); every member
/// calls with the same `landing` and tag.
#[inline(always)]
unsafe fn deliver(scope: Scope, call: &'static str, t: &Team, tg: u16, dest: *mut u8, landing: usize, push: impl Fn(*mut u8)) {
    let small = landing <= SCRATCH_BYTES / 2;
    // SAFETY: `t` is a live team of this PE (`team`) and every member calls with the same arguments
    // (the caller's contract): the exchanges pair up, and the inbox is the half of the scratch the
    // next one publishes (`inbox`).
    let base = unsafe {
        if small {
            inbox(t.id)
        } else {
            team_exchange_scoped(scope, call, t, tg, false);
            dest
        }
    };
    push(base);
    // SAFETY: as above.
    unsafe { team_exchange_scoped(scope, call, t, tg, true) };
    if small {
        // SAFETY: `landing` bytes: `dest` is symmetric of that size (checked by the caller) and the
        // inbox holds them (at most half the scratch); the exchange published them; the inbox (scratch)
        // and `dest` (a user allocation) do not overlap.
        unsafe { arch::copy(dest, base, landing, scope.rank(), scope.size()) };
        scope.sync();
    }
}

/// broadcast: `bytes` from `src` on member `root` into `dest` on every member (the root included).
///
/// # Safety
/// `dest` and `src` symmetric and `bytes` long (checked); every member calls with the same arguments.
pub unsafe fn broadcast(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, root: i32, call: &'static str) {
    let t = team(call, team_id);
    if root < 0 || root >= t.size() {
        fail(call, Problem::BadRoot, root, 0, 0);
    }
    check_sym(call, dest as usize, bytes);
    check_sym(call, src as usize, bytes);
    let tg = tag(Kind::Broadcast, [bytes as u64, root as u64, 0]);
    let push = |base: *mut u8| {
        if t.me() == root {
            for k in 0..t.size() {
                let i = push_order(&t, k);
                if i == root && core::ptr::eq(base, src) {
                    continue;
                }
                // SAFETY: `base` is symmetric with room for `bytes` (`dest`, or the inbox), `src`
                // holds `bytes` (checked above) and stays unchanged until the exchange with quiet
                // that completes the put (`deliver`).
                unsafe { ops::put_scoped(scope, base, src, bytes, t.pe(i), call, false) };
            }
        }
    };
    // SAFETY: `dest` is symmetric with `bytes` (checked above); same arguments on every member.
    unsafe { deliver(scope, call, &t, tg, dest, bytes, push) };
}

/// fcollect: every member's `bytes` from `src` into `dest + index * bytes` on every member.
///
/// # Safety
/// `dest` symmetric of `size * bytes`, `src` of `bytes` (checked); same arguments everywhere.
pub unsafe fn fcollect(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, call: &'static str) {
    let t = team(call, team_id);
    let total = bytes * t.size() as usize;
    check_sym(call, dest as usize, total);
    check_sym(call, src as usize, bytes);
    let tg = tag(Kind::Fcollect, [bytes as u64, 0, 0]);
    let push = |base: *mut u8| {
        // SAFETY: block `me` < size of a landing area of `size * bytes`.
        let at = unsafe { base.add(t.me() as usize * bytes) };
        for k in 0..t.size() {
            let i = push_order(&t, k);
            if i == t.me() && core::ptr::eq(at, src) {
                continue;
            }
            // SAFETY: `at` is symmetric with room for `bytes`, `src` holds `bytes` (checked above)
            // and stays unchanged until the exchange with quiet that completes the put (`deliver`).
            unsafe { ops::put_scoped(scope, at, src, bytes, t.pe(i), call, false) };
        }
    };
    // SAFETY: `dest` is symmetric with `total` bytes (checked above); same arguments on every member.
    unsafe { deliver(scope, call, &t, tg, dest, total, push) };
}

/// alltoall: block `i` (of `bytes`) of my `src` goes to block `my index` of `dest` on member `i`.
///
/// # Safety
/// `dest` and `src` symmetric of `size * bytes` (checked); same arguments everywhere.
pub unsafe fn alltoall(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, call: &'static str) {
    let t = team(call, team_id);
    let total = bytes * t.size() as usize;
    check_sym(call, dest as usize, total);
    check_sym(call, src as usize, total);
    let tg = tag(Kind::Alltoall, [bytes as u64, 0, 0]);
    let push = |base: *mut u8| {
        // SAFETY: block `me` < size of a landing area of `size * bytes`.
        let at = unsafe { base.add(t.me() as usize * bytes) };
        for k in 0..t.size() {
            let i = push_order(&t, k);
            // SAFETY: `at` is symmetric with room for `bytes`; block `i` < size of `src` (checked
            // above) holds `bytes` and stays unchanged until the exchange with quiet (`deliver`).
            unsafe { ops::put_scoped(scope, at, src.add(i as usize * bytes), bytes, t.pe(i), call, false) };
        }
    };
    // SAFETY: `dest` is symmetric with `total` bytes (checked above); same arguments on every member.
    unsafe { deliver(scope, call, &t, tg, dest, total, push) };
}

/// collect: like fcollect with a different `bytes` on each member; member `i`'s block starts after
/// those of members `0..i`. The sizes are exchanged through the team's scratch first.
///
/// # Safety
/// `dest` symmetric and large enough for the sum of all members' `bytes` (checked against this PE's
/// heap), `src` of `bytes`; every member calls.
pub unsafe fn collect(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, bytes: usize, call: &'static str) {
    let t = team(call, team_id);
    check_sym(call, src as usize, bytes);
    // SAFETY: `t` is a live team of this PE (`team`).
    let sizes = unsafe { inbox(t.id) } as *mut u64;
    scope.sync();
    if scope.rank() == 0 {
        for k in 0..t.size() {
            let i = push_order(&t, k);
            // SAFETY: slot `me` < size <= MAX_PES of the inbox (half the scratch: 8 KiB of u64s), a
            // symmetric address in the internal area.
            unsafe { ops::p(sizes.add(t.me() as usize), bytes as u64, t.pe(i)) };
        }
    }
    // SAFETY: a live team; every member calls (the caller's contract).
    unsafe { team_exchange_scoped(scope, call, &t, tag(Kind::Collect, [1, 0, 0]), true) };
    let mut offset = 0usize;
    let mut total = 0usize;
    for i in 0..t.size() {
        // SAFETY: slot `i` < size of the inbox, published by the exchange above.
        let b = unsafe { ptr::read_volatile(sizes.add(i as usize)) } as usize;
        if i < t.me() {
            offset += b;
        }
        total += b;
    }
    check_sym(call, dest as usize, total);
    for k in 0..t.size() {
        let i = push_order(&t, k);
        // SAFETY: `dest + offset` has room for `bytes` (`dest` holds `total`, checked above), `src`
        // holds `bytes` (checked above) and stays unchanged until the exchange with quiet below.
        unsafe { ops::put_scoped(scope, dest.add(offset), src, bytes, t.pe(i), call, false) };
    }
    // SAFETY: as above.
    unsafe { team_exchange_scoped(scope, call, &t, tag(Kind::Collect, [2, 0, 0]), true) };
}

// ---------------------------------------------------------------- reductions

/// Reduction operators (NVSHMEM's `rdxn_ops_t` values).
pub mod op {
    pub const AND: u32 = 0;
    pub const OR: u32 = 1;
    pub const XOR: u32 = 2;
    pub const MIN: u32 = 3;
    pub const MAX: u32 = 4;
    pub const SUM: u32 = 5;
    pub const PROD: u32 = 6;
    pub const MAXLOC: u32 = 7;
}

/// Element types of the reductions (the C ABI's codes).
pub mod dtype {
    pub const I8: u32 = 0;
    pub const I16: u32 = 1;
    pub const I32: u32 = 2;
    pub const I64: u32 = 3;
    pub const U8: u32 = 4;
    pub const U16: u32 = 5;
    pub const U32: u32 = 6;
    pub const U64: u32 = 7;
    pub const F16: u32 = 8;
    pub const BF16: u32 = 9;
    pub const F32: u32 = 10;
    pub const F64: u32 = 11;
    /// A (value, location) pair of f64s, for maxloc (NVSHMEM's double2).
    pub const DOUBLE2: u32 = 12;
}

/// IEEE half precision, as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct F16(pub u16);
/// bfloat16, as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bf16(pub u16);
/// A maxloc pair (NVSHMEM's double2: x is the value, y the location).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct DoubleLoc {
    pub value: f64,
    pub loc: f64,
}

impl F16 {
    /// Exact widening.
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = if exp == 0 {
            if man == 0 {
                sign
            } else {
                // Subnormal: normalize.
                let mut e = 127 - 15 + 1;
                let mut m = man;
                while m & 0x400 == 0 {
                    m <<= 1;
                    e -= 1;
                }
                sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
            }
        } else if exp == 0x1f {
            sign | 0x7f80_0000 | (man << 13)
        } else {
            sign | ((exp + 127 - 15) << 23) | (man << 13)
        };
        f32::from_bits(bits)
    }
    /// Rounded to nearest, ties to even.
    pub fn from_f32(f: f32) -> F16 {
        let x = f.to_bits();
        let sign = ((x >> 16) & 0x8000) as u16;
        let exp = ((x >> 23) & 0xff) as i32;
        let man = x & 0x7f_ffff;
        if exp == 0xff {
            return F16(sign | 0x7c00 | if man != 0 { 0x200 } else { 0 });
        }
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e <= 0 {
            if e < -10 {
                return F16(sign);
            }
            let m = man | 0x80_0000;
            let shift = (14 - e) as u32;
            let half = 1u32 << (shift - 1);
            let rest = m & ((1 << shift) - 1);
            let mut r = m >> shift;
            if rest > half || (rest == half && r & 1 == 1) {
                r += 1;
            }
            return F16(sign | r as u16);
        }
        let mut r = ((e as u32) << 10) | (man >> 13);
        let rest = man & 0x1fff;
        if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
            r += 1; // may carry into the exponent, up to infinity: correct
        }
        F16(sign | r as u16)
    }
}

impl Bf16 {
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
    /// Rounded to nearest, ties to even.
    pub fn from_f32(f: f32) -> Bf16 {
        let x = f.to_bits();
        if f.is_nan() {
            return Bf16(((x >> 16) | 0x40) as u16);
        }
        Bf16(((x + 0x7fff + ((x >> 16) & 1)) >> 16) as u16)
    }
}

/// Element types of reductions: the operators each has.
pub trait Elem: Copy {
    const DTYPE: u32;
    /// `a OP b`; `OP` is one of `op::*` that this type has (checked before any call).
    fn combine<const OP: u32>(a: Self, b: Self) -> Self;
}

macro_rules! int_elems {
    ($($t:ty => $d:ident;)*) => {$(
        impl Elem for $t {
            const DTYPE: u32 = dtype::$d;
            #[inline(always)]
            fn combine<const OP: u32>(a: $t, b: $t) -> $t {
                match OP {
                    op::AND => a & b,
                    op::OR => a | b,
                    op::XOR => a ^ b,
                    op::MIN => if b < a { b } else { a },
                    op::MAX => if b > a { b } else { a },
                    op::SUM => a.wrapping_add(b),
                    _ => a.wrapping_mul(b),
                }
            }
        }
    )*};
}
int_elems! { i8 => I8; i16 => I16; i32 => I32; i64 => I64; u8 => U8; u16 => U16; u32 => U32; u64 => U64; }

macro_rules! float_elems {
    ($($t:ty => $d:ident, $wide:ty, $to:expr, $from:expr;)*) => {$(
        impl Elem for $t {
            const DTYPE: u32 = dtype::$d;
            #[inline(always)]
            fn combine<const OP: u32>(a: $t, b: $t) -> $t {
                let (x, y): ($wide, $wide) = ($to(a), $to(b));
                $from(match OP {
                    op::MIN => if y < x { y } else { x },
                    op::MAX => if y > x { y } else { x },
                    op::SUM => x + y,
                    _ => x * y,
                })
            }
        }
    )*};
}
float_elems! {
    f32 => F32, f32, |v| v, |v| v;
    f64 => F64, f64, |v| v, |v| v;
    F16 => F16, f32, F16::to_f32, F16::from_f32;
    Bf16 => BF16, f32, Bf16::to_f32, Bf16::from_f32;
}

impl Elem for DoubleLoc {
    const DTYPE: u32 = dtype::DOUBLE2;
    #[inline(always)]
    fn combine<const OP: u32>(a: DoubleLoc, b: DoubleLoc) -> DoubleLoc {
        // The larger value; on a tie, the smaller location (OpenSHMEM's MAXLOC).
        if b.value > a.value || (b.value == a.value && b.loc < a.loc) { b } else { a }
    }
}

/// Whether type `dt` has operator `o`.
pub const fn valid_reduction(dt: u32, o: u32) -> bool {
    match dt {
        dtype::I8..=dtype::U64 => o <= op::PROD,
        dtype::F16..=dtype::F64 => o >= op::MIN && o <= op::PROD,
        dtype::DOUBLE2 => o == op::MAXLOC,
        _ => false,
    }
}

/// Size in bytes of an element of type `dt` (0 for an unknown code).
pub const fn dtype_size(dt: u32) -> usize {
    match dt {
        dtype::I8 | dtype::U8 => 1,
        dtype::I16 | dtype::U16 | dtype::F16 | dtype::BF16 => 2,
        dtype::I32 | dtype::U32 | dtype::F32 => 4,
        dtype::I64 | dtype::U64 | dtype::F64 => 8,
        dtype::DOUBLE2 => 16,
        _ => 0,
    }
}

/// Reduction of `n` elements of type `dt` with operator `o` over team `team_id`: `dest` on every member
/// gets the combination of all members' `src` (`scatter`: member `i` gets only block `i`, of `n`
/// elements, of the combination of all members' `size * n`-element `src`).
///
/// # Safety
/// `dest` and `src` symmetric, aligned for the type and of the sizes above (the ranges are checked);
/// every member calls with the same arguments.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, n: usize, dt: u32, o: u32, scatter: bool, call: &'static str) {
    if !valid_reduction(dt, o) {
        fail(call, Problem::BadReduction, dt as i32, o as usize, 0);
    }
    macro_rules! go {
        ($t:ty; $($o:ident)*) => {
            match o {
                // SAFETY: the caller's contract, for the element type `dt` names (the pair is valid:
                // checked above).
                $(op::$o => unsafe { reduce_as::<$t, { op::$o }>(scope, team_id, dest as *mut $t, src as *const $t, n, scatter, call) },)*
                _ => {}
            }
        };
    }
    match dt {
        dtype::I8 => go!(i8; AND OR XOR MIN MAX SUM PROD),
        dtype::I16 => go!(i16; AND OR XOR MIN MAX SUM PROD),
        dtype::I32 => go!(i32; AND OR XOR MIN MAX SUM PROD),
        dtype::I64 => go!(i64; AND OR XOR MIN MAX SUM PROD),
        dtype::U8 => go!(u8; AND OR XOR MIN MAX SUM PROD),
        dtype::U16 => go!(u16; AND OR XOR MIN MAX SUM PROD),
        dtype::U32 => go!(u32; AND OR XOR MIN MAX SUM PROD),
        dtype::U64 => go!(u64; AND OR XOR MIN MAX SUM PROD),
        dtype::F16 => go!(F16; MIN MAX SUM PROD),
        dtype::BF16 => go!(Bf16; MIN MAX SUM PROD),
        dtype::F32 => go!(f32; MIN MAX SUM PROD),
        dtype::F64 => go!(f64; MIN MAX SUM PROD),
        _ => go!(DoubleLoc; MAXLOC),
    }
}

/// What a reduction needs besides its element loops (those are per type and operator; everything else
/// is here once, out of line, so that the 70-odd instances stay small).
struct Red {
    t: Team,
    tg: u16,
    /// This PE's symmetric source address of its block (`src`, or block `me` for reducescatter).
    first: *const u8,
    in_place: bool,
    all_mapped: bool,
}

/// The checks, tag and algorithm facts of a reduction of `n` elements of `sz` bytes.
///
/// # Safety
/// As `reduce`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn red_setup(call: &'static str, team_id: i32, dest: *mut u8, src: *const u8, n: usize, sz: usize, scatter: bool, dt: u32, o: u32) -> Red {
    let t = team(call, team_id);
    let (kind, src_len) = if scatter { (Kind::Reducescatter, n * t.size() as usize) } else { (Kind::Reduce, n) };
    check_sym(call, dest as usize, n * sz);
    check_sym(call, src as usize, src_len * sz);
    let (d0, d1) = (dest as usize, dest as usize + n * sz);
    let (s0, s1) = (src as usize, src as usize + src_len * sz);
    // SAFETY: block `me` < size of a source of `size * n` elements (reducescatter; checked above).
    let first = if scatter { unsafe { src.add(t.me() as usize * n * sz) } } else { src };
    let all_mapped = (0..t.size()).all(|i| peer_base(t.pe(i)) != 0);
    Red { t, tg: tag(kind, [n as u64, dt as u64, o as u64]), first, in_place: d0 < s1 && s0 < d1, all_mapped }
}

#[inline(always)]
fn peer_base(pe: i32) -> usize {
    St.peer_base(pe as usize) as usize
}

/// The push of a small reduction: every member's (block of the) source into my inbox, published by one
/// synchronization. Returns the inbox (member `j`'s data at `j * slot`).
///
/// # Safety
/// As `reduce`; `slot * size` fits half the scratch.
#[inline(never)]
unsafe fn red_push(scope: Scope, call: &'static str, r: &Red, src: *const u8, slot: usize, scatter: bool) -> *const u8 {
    let t = &r.t;
    // SAFETY: `r.t` is a live team of this PE (`red_setup`).
    let buf = unsafe { inbox(t.id) };
    for k in 0..t.size() {
        let i = push_order(t, k);
        // SAFETY: block `i` < size of the checked source (reducescatter) or the source itself, `slot`
        // bytes; slot `me` of the inbox, within half the scratch (`slot * size` fits: the caller's
        // contract), a symmetric address; the source stays unchanged until the exchange with quiet.
        unsafe {
            let block = if scatter { src.add(i as usize * slot) } else { src };
            ops::put_scoped(scope, buf.add(t.me() as usize * slot), block, slot, t.pe(i), call, false);
        }
    }
    // SAFETY: a live team; every member calls with the same arguments (the caller's contract).
    unsafe { team_exchange_scoped(scope, call, t, r.tg, true) };
    buf
}

/// One synchronization of a reduction, out of line.
///
/// # Safety
/// As `team_exchange_scoped`.
#[inline(never)]
unsafe fn red_exchange(scope: Scope, call: &'static str, r: &Red) {
    // SAFETY: the caller's contract.
    unsafe { team_exchange_scoped(scope, call, &r.t, r.tg, false) };
}

/// Member `i`'s chunk `[c0, c0 + bytes)` of the reduced block, readable here: in its heap when mapped,
/// else fetched into `fetch`. The scope is synchronized after.
///
/// # Safety
/// As `reduce`; `fetch` is this PE's scratch with room for `bytes`.
#[inline(never)]
unsafe fn red_chunk(scope: Scope, call: &'static str, r: &Red, i: i32, c0: usize, bytes: usize, fetch: *mut u8) -> *const u8 {
    let pe = r.t.pe(i);
    let heap = St.heap_base() as usize;
    let base = peer_base(pe);
    let p = if base != 0 {
        (base + (r.first as usize - heap) + c0) as *const u8
    } else {
        // SAFETY: `[c0, c0 + bytes)` of the checked source block, symmetric; `fetch` has room for
        // `bytes` (the caller's contract); a blocking get.
        unsafe { ops::get_scoped(scope, fetch, r.first.add(c0), bytes, pe, call, true) };
        fetch as *const u8
    };
    scope.sync();
    p
}

/// `reduce` for one type and operator: only the element loops are per type.
///
/// # Safety
/// As `reduce`.
#[inline(never)]
pub unsafe fn reduce_as<T: Elem, const OP: u32>(scope: Scope, team_id: i32, dest: *mut T, src: *const T, n: usize, scatter: bool, call: &'static str) {
    let sz = size_of::<T>();
    // SAFETY: the caller's contract (`red_setup` checks the ranges and the team).
    let r = unsafe { red_setup(call, team_id, dest as *mut u8, src as *const u8, n, sz, scatter, T::DTYPE, OP) };
    let t = &r.t;
    let (rank, threads) = (scope.rank() as usize, scope.size() as usize);
    let slot = n * sz;
    if slot * t.size() as usize <= SCRATCH_BYTES / 2 {
        // Small: push. Every member gets every member's (block of the) source in its inbox, one
        // synchronization publishes them, and each PE combines locally: one round instead of two.
        // SAFETY: the caller's contract; `slot * size` fits half the scratch (tested above).
        let b = unsafe { red_push(scope, call, &r, src as *const u8, slot, scatter) } as *const T;
        let mut e = rank;
        while e < n {
            // SAFETY: the inbox holds `size` blocks of `n` `T`s, published by `red_push`'s exchange;
            // `dest` holds `n` `T`s (checked in `red_setup`); e < n.
            unsafe {
                let mut acc = ptr::read(b.add(e));
                for j in 1..t.size() as usize {
                    acc = T::combine::<OP>(acc, ptr::read(b.add(j * n + e)));
                }
                ptr::write(dest.add(e), acc);
            }
            e += threads;
        }
        scope.sync();
        return;
    }
    // Large: pull. Every member's source is ready.
    // SAFETY: a live team; every member calls with the same arguments (the caller's contract).
    unsafe { red_exchange(scope, call, &r) };
    if r.all_mapped && !r.in_place {
        // One pass, combined in registers, in team order.
        let heap = St.heap_base() as usize;
        let off = r.first as usize - heap;
        let peer = |i: i32| (peer_base(t.pe(i)) + off) as *const T;
        let mut e = rank;
        while e < n {
            // SAFETY: every member's heap is mapped here (`all_mapped`): `peer(i)` is member `i`'s
            // source block of `n` `T`s (symmetric, checked in `red_setup`), ready (the exchange above)
            // and unchanged until the closing exchange; `dest` holds `n` `T`s and is not a source
            // (not in place); e < n.
            unsafe {
                let mut acc = ptr::read(peer(0).add(e));
                for i in 1..t.size() {
                    acc = T::combine::<OP>(acc, ptr::read(peer(i).add(e)));
                }
                ptr::write(dest.add(e), acc);
            }
            e += threads;
        }
    } else {
        // Chunks through the scratch: the first half accumulates, the second receives what is fetched
        // from PEs not mapped here.
        let acc = scratch(t.id) as *mut T;
        // SAFETY: the second half of this team's scratch.
        let fetch = unsafe { scratch(t.id).add(SCRATCH_BYTES / 2) };
        let chunk = SCRATCH_BYTES / 2 / sz;
        let mut c0 = 0;
        while c0 < n {
            let len = core::cmp::min(chunk, n - c0);
            for i in 0..t.size() {
                // SAFETY: `[c0, c0 + len)` of the `n`-element block; `fetch` has room for
                // `len * sz <= SCRATCH_BYTES / 2` bytes.
                let p = unsafe { red_chunk(scope, call, &r, i, c0 * sz, len * sz, fetch) } as *const T;
                let mut e = rank;
                while e < len {
                    // SAFETY: `p` holds the chunk's `len` `T`s (`red_chunk`), `acc` room for `chunk`
                    // >= len `T`s (the first half of the scratch); e < len.
                    unsafe {
                        let v = ptr::read(p.add(e));
                        ptr::write(acc.add(e), if i == 0 { v } else { T::combine::<OP>(ptr::read(acc.add(e)), v) });
                    }
                    e += threads;
                }
                scope.sync();
            }
            if r.in_place {
                // Every member has read this chunk of my source before I overwrite it.
                // SAFETY: as the exchange above.
                unsafe { red_exchange(scope, call, &r) };
            }
            let mut e = rank;
            while e < len {
                // SAFETY: `dest` holds `n` `T`s (checked), c0 + e < n; `acc` holds the chunk's.
                unsafe { ptr::write(dest.add(c0 + e), ptr::read(acc.add(e))) };
                e += threads;
            }
            scope.sync();
            c0 += len;
        }
    }
    // No member changes its source before every member has read it.
    // SAFETY: as the exchange above.
    unsafe { red_exchange(scope, call, &r) };
}

// ---------------------------------------------------------------- host-initiated collectives

/// The collectives the host runtime starts (`run`'s `what`): host calls, `*_on_stream` calls and the
/// runtime's own team operations, run by a kernel on GPUs and by the calling thread on the CPU backend.
pub mod host_op {
    pub const SYNC: u32 = 0;
    pub const BARRIER: u32 = 1;
    pub const BROADCAST: u32 = 2;
    pub const FCOLLECT: u32 = 3;
    pub const COLLECT: u32 = 4;
    pub const ALLTOALL: u32 = 5;
    pub const REDUCE: u32 = 6;
    pub const REDUCESCATTER: u32 = 7;
    /// A team split's agreement: an exchange tagged with the split's arguments (`a`: their hash), then
    /// an AND of the u64 masks of free team slots at `src` into `dest`.
    pub const SPLIT: u32 = 8;
}

/// Runs host operation `what` (`host_op`) with `scope`: `n` is the byte count of the data collectives
/// (`COLLECT`: this PE's) and the element count of reductions; `a` is broadcast's root and the
/// reductions' type, `b` the reductions' operator.
///
/// # Safety
/// As the collective it runs; every member of the team calls with the same arguments.
#[allow(clippy::too_many_arguments)]
pub unsafe fn run(what: u32, scope: Scope, team_id: i32, dest: *mut u8, src: *const u8, n: u64, a: u64, b: u64) {
    let n = n as usize;
    // SAFETY: the caller's contract is that of the collective `what` names (for SPLIT: an exchange
    // of the live team `team` checked, then a reduction of one u64).
    unsafe {
        match what {
            host_op::SYNC => team_sync_scoped(scope, team_id, false, "rshmem_team_sync (host)\0"),
            host_op::BARRIER => team_sync_scoped(scope, team_id, true, "rshmem_barrier (host)\0"),
            host_op::BROADCAST => broadcast(scope, team_id, dest, src, n, a as i32, "rshmem_broadcast (host)\0"),
            host_op::FCOLLECT => fcollect(scope, team_id, dest, src, n, "rshmem_fcollect (host)\0"),
            host_op::COLLECT => collect(scope, team_id, dest, src, n, "rshmem_collect (host)\0"),
            host_op::ALLTOALL => alltoall(scope, team_id, dest, src, n, "rshmem_alltoall (host)\0"),
            host_op::REDUCE => reduce(scope, team_id, dest, src, n, a as u32, b as u32, false, "rshmem_reduce (host)\0"),
            host_op::REDUCESCATTER => reduce(scope, team_id, dest, src, n, a as u32, b as u32, true, "rshmem_reducescatter (host)\0"),
            host_op::SPLIT => {
                let call = "rshmem_team_split (agreement)\0";
                let t = team(call, team_id);
                team_exchange_scoped(scope, call, &t, tag(Kind::Split, [a, 0, 0]), false);
                reduce_as::<u64, { op::AND }>(scope, team_id, dest as *mut u64, src as *const u64, 1, false, call);
            }
            _ => fail("rshmem host collective\0", Problem::BadReduction, what as i32, 0, 0),
        }
    }
}

// ---------------------------------------------------------------- tests of the pure parts

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trips_every_value() {
        for h in 0..=u16::MAX {
            let f = F16(h).to_f32();
            let back = F16::from_f32(f);
            if f.is_nan() {
                assert!(F16::from_f32(f).to_f32().is_nan());
            } else {
                assert_eq!(back, F16(h), "{h:#x} -> {f} -> {:#x}", back.0);
            }
        }
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        assert_eq!(F16::from_f32(1.0), F16(0x3c00));
        assert_eq!(F16::from_f32(65504.0), F16(0x7bff));
        assert_eq!(F16::from_f32(65520.0), F16(0x7c00)); // halfway to the next: rounds up to inf
        assert_eq!(F16::from_f32(1.0 + 1.0 / 2048.0), F16(0x3c00)); // tie: to even
        assert_eq!(F16::from_f32(1.0 + 3.0 / 2048.0), F16(0x3c02)); // tie: to even (up)
        assert_eq!(F16::from_f32(5.960_464_5e-8), F16(1)); // smallest subnormal
        assert_eq!(F16::from_f32(2.0e-8), F16(0));
        assert_eq!(F16::from_f32(-2.0), F16(0xc000));
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(Bf16::from_f32(1.0), Bf16(0x3f80));
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f80_8000)), Bf16(0x3f80)); // tie, even stays
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f81_8000)), Bf16(0x3f82)); // tie, odd goes up
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f80_8001)), Bf16(0x3f81));
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        for b in 0..=u16::MAX {
            let f = Bf16(b).to_f32();
            if !f.is_nan() {
                assert_eq!(Bf16::from_f32(f), Bf16(b));
            }
        }
    }

    #[test]
    fn tags_name_their_kind_and_differ_by_arguments() {
        let a = tag(Kind::Broadcast, [64, 0, 0]);
        assert_eq!(Kind::from_tag(a), Kind::Broadcast);
        assert_ne!(a, tag(Kind::Broadcast, [64, 1, 0]));
        assert_ne!(a, tag(Kind::Broadcast, [128, 0, 0]));
        assert_eq!(Kind::from_tag(tag(Kind::Reduce, [1, 2, 3])), Kind::Reduce);
    }

    #[test]
    fn reduction_table() {
        assert!(valid_reduction(dtype::I32, op::XOR));
        assert!(!valid_reduction(dtype::F32, op::XOR));
        assert!(valid_reduction(dtype::BF16, op::PROD));
        assert!(valid_reduction(dtype::DOUBLE2, op::MAXLOC));
        assert!(!valid_reduction(dtype::DOUBLE2, op::SUM));
        assert!(!valid_reduction(13, op::SUM));
        let m = DoubleLoc::combine::<{ op::MAXLOC }>(DoubleLoc { value: 2.0, loc: 5.0 }, DoubleLoc { value: 2.0, loc: 3.0 });
        assert_eq!(m, DoubleLoc { value: 2.0, loc: 3.0 });
        assert_eq!(i8::combine::<{ op::SUM }>(100, 100), -56);
        assert_eq!(u16::combine::<{ op::MIN }>(3, 2), 2);
    }
}
