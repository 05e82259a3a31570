//! Synchronization of a team: collective tags, the team exchange every collective ends with, team
//! sync and the barriers (see the `coll` module docs).

use crate::arch;
use crate::coll::teams::{team, Team};
use crate::ops;
use crate::remote;
use crate::remote::wait::idle;
use crate::route::{fail, locate, St};
use crate::state::{Field, Internal, TeamSync, SCRATCH_BYTES, TEAM_WORLD};
use crate::types::{Kind, Problem, Rmw, Scope};
use core::mem::{offset_of, size_of};
use core::ptr;

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

/// This PE's synchronization words of team `id`.
#[inline(always)]
fn sync_words(id: i32) -> *mut TeamSync {
    let base = St.heap_base() as usize;
    (base + offset_of!(Internal, sync) + id as usize * size_of::<TeamSync>()) as *mut TeamSync
}

/// This PE's scratch of team `id`.
#[inline(always)]
pub(super) fn scratch(id: i32) -> *mut u8 {
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
pub(super) unsafe fn inbox(id: i32) -> *mut u8 {
    let sync = sync_words(id);
    // SAFETY: team `id`'s synchronization words and scratch lie in the internal area of this PE's
    // heap, mapped while rshmem is initialized (the caller's contract); the epoch is written only by
    // this PE's thread in a synchronization of the team, which the scope's threads are not in now.
    unsafe {
        let next = arch::load_acquire_u64_gpu(ptr::addr_of!((*sync).epoch)) + 1;
        scratch(id).add((next as usize & 1) * (SCRATCH_BYTES / 2))
    }
}

/// What a synchronization orders before this PE's announcement.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Order {
    /// No publication: the announcement says only that this PE has entered (its buffers may now be
    /// written by the others) or is done reading the others' data (they may now change it). A
    /// block-scope fence after the scope's barrier has this thread's earlier reads performed (their
    /// values returned; the scope's other threads consumed theirs before the barrier: stored into the
    /// destination or copied out) before the announcement leaves, and nothing else needs ordering. A
    /// system-scope fence costs 1.6 us on 2 x H100 (`x_quiet_only`, bench/results/2026-11-27-h100x2.md),
    /// and NVSHMEM's synchronizations pay none.
    Enter,
    /// A release fence: every store this PE (its scope, after the scope's barrier) made before is
    /// visible to a member that sees the announcement (a sync; the sources a pulled reduction's
    /// members will read).
    Release,
    /// A quiet: this PE's outstanding operations are complete at their targets (a barrier; data this
    /// PE pushed into the others' memory).
    Quiet,
}

/// One synchronization of team `t` by one thread of this PE: announce, then wait for every member
/// (see the module doc), `order` saying what the announcement orders before it.
///
/// # Safety
/// rshmem initialized; `t` a live team this PE is a member of; one thread of this PE at a time per team.
#[inline(always)]
pub unsafe fn team_exchange(call: &'static str, t: &Team, tag: u16, order: Order) {
    let sync = sync_words(t.id);
    // SAFETY: the team's synchronization words lie in the internal area of this PE's heap, mapped while
    // rshmem is initialized (the caller's contract); `addr_of_mut!` makes no reference.
    let (epoch_ctr, flags) = unsafe { (ptr::addr_of_mut!((*sync).epoch), ptr::addr_of_mut!((*sync).flags) as *mut u64) };
    // The counter is advanced before the fence so that its round trip overlaps the fence's wait. An
    // atomic add at GPU scope (the counter is this PE's alone), not a load and a later store: the
    // increment is made at the GPU's L2 whatever SM the kernel of the previous synchronization ran
    // on, so no kernel can start from a count an earlier one already passed (sync_latency hung on
    // 2 x H100 with one PE re-announcing counts five below the other's).
    // SAFETY: the epoch is this PE's counter, an aligned u64 of its internal area, touched only by the
    // one thread of this PE in a synchronization of the team (the caller's contract) and read by the
    // scope's threads before it (`inbox`).
    let epoch = unsafe { arch::rmw_u64_gpu(Rmw::Add, epoch_ctr, 1) } + 1;
    // A quiet of the world team with a remote engine overlaps the flags' journey: the flags to PEs
    // the engine reaches go fenced (each is applied after everything this PE sent that PE before), so
    // the wait for this PE's earlier requests to complete (`barrier_complete`, below) need not come
    // first: a barrier of two nodes costs one exchange, not a round trip and then an exchange. Every
    // PE of the world team gets such a flag, so each sees this PE's data before it sees the flag.
    let overlap = order == Order::Quiet && t.id == TEAM_WORLD && arch::state_u64(Field::PROXY_RING_HEADER) != 0;
    let mark = if overlap {
        arch::fence_sc();
        remote::barrier_mark()
    } else {
        match order {
            // Remote PEs: this PE's requests must be complete at their targets before any PE can
            // leave (a PE that leaves may read what we put on a third PE).
            Order::Quiet => ops::quiet(),
            Order::Release => arch::fence_acq_rel(),
            Order::Enter => arch::fence_acq_rel_cta(),
        }
        0
    };
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
                    remote::put_inline_with(call, my_slot, 8, word, pe, overlap);
                }
            }
        }
    }
    if overlap {
        remote::barrier_complete(mark);
    }
    let mut spins = 0u64;
    let mut since = 0u64;
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
            if spins.is_multiple_of(DEADLINE_EVERY) {
                deadline(call, &mut since, t.pe(i), epoch, v >> 16);
            }
        }
    }
}

/// Spins of a synchronization's wait between looks at the clock.
const DEADLINE_EVERY: u64 = 4096;

/// The time limit of a synchronization's wait inside a GPU kernel (RSHMEM_WAIT_TIMEOUT, from the
/// device state; none when 0): the first look starts the clock (`since`), a later one past the limit
/// stops the PE naming member `pe`, the synchronization count this PE waits for and the last one
/// `pe` announced here. Where there is no device clock (the CPU backend, whose waits the idle hook
/// times) it does nothing.
#[cold]
#[inline(never)]
fn deadline(call: &'static str, since: &mut u64, pe: i32, epoch: u64, seen: u64) {
    let limit_ms = arch::state_u32(Field::WAIT_TIMEOUT_MS) as u64;
    let now = arch::globaltimer_ns();
    if limit_ms == 0 || now == 0 {
        return;
    }
    if *since == 0 {
        *since = now;
    } else if now.saturating_sub(*since) > limit_ms * 1_000_000 {
        fail(call, Problem::SyncTimeout, pe, epoch as usize, seen as usize);
    }
}

/// `team_exchange` by one thread of `scope`, with the scope synchronized before and after.
///
/// # Safety
/// As `team_exchange`; every thread of the scope calls it.
#[inline(always)]
pub unsafe fn team_exchange_scoped(scope: Scope, call: &'static str, t: &Team, tag: u16, order: Order) {
    scope.sync();
    if scope.rank() == 0 {
        // SAFETY: the caller's contract; one thread of the scope (its rank 0) exchanges.
        unsafe { team_exchange(call, t, tag, order) };
    }
    scope.sync();
}

/// barrier (`with_quiet`: a quiet first) or sync (a release fence first: OpenSHMEM's sync makes this
/// PE's earlier stores visible) of team `team` by `scope`.
///
/// # Safety
/// rshmem initialized; every thread of the scope calls it; one scope per PE and team at a time.
#[inline(always)]
pub unsafe fn team_sync_scoped(scope: Scope, team_id: i32, with_quiet: bool, call: &'static str) {
    let t = team(call, team_id);
    let order = if with_quiet { Order::Quiet } else { Order::Release };
    // SAFETY: the caller's contract; `team` checked that the team is live and this PE a member.
    unsafe { team_exchange_scoped(scope, call, &t, tag(Kind::Sync, [0; 3]), order) };
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
/// Warp-scoped barrier_all: every thread of one warp per PE calls it.
#[inline]
pub fn barrier_all_warp() {
    // SAFETY: as above.
    unsafe { barrier_scoped(Scope::Warp, true, "rshmem_barrier_all_warp\0") }
}
/// Block-scoped sync_all: every thread of one block per PE calls it.
#[inline]
pub fn sync_all_block() {
    // SAFETY: as above.
    unsafe { barrier_scoped(Scope::Block, false, "rshmem_sync_all_block\0") }
}
/// Warp-scoped sync_all: every thread of one warp per PE calls it.
#[inline]
pub fn sync_all_warp() {
    // SAFETY: as above.
    unsafe { barrier_scoped(Scope::Warp, false, "rshmem_sync_all_warp\0") }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn tags_name_their_kind_and_differ_by_arguments() {
        let a = tag(Kind::Broadcast, [64, 0, 0]);
        assert_eq!(Kind::from_tag(a), Kind::Broadcast);
        assert_ne!(a, tag(Kind::Broadcast, [64, 1, 0]));
        assert_ne!(a, tag(Kind::Broadcast, [128, 0, 0]));
        assert_eq!(Kind::from_tag(tag(Kind::Reduce, [1, 2, 3])), Kind::Reduce);
    }
}
