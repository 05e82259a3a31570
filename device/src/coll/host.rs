//! The collectives the host runtime starts (see the `coll` module docs).

use crate::coll::data::{alltoall, broadcast, broadcast_sync, collect, fcollect, push_sync};
use crate::coll::elem::op;
use crate::coll::reduce::{pull_sync, reduce, reduce_as};
use crate::coll::sync::{tag, team_exchange_scoped, team_sync_scoped, Order};
use crate::coll::teams::team;
use crate::route::fail;
use crate::types::{Kind, Problem, Scope};

/// The collectives the host runtime starts (`run`'s `what`): host calls, `*_on_stream` calls and the
/// runtime's own team operations, run by a kernel on GPUs and by the calling thread on the CPU backend.
pub mod host_op {
    /// `team_sync`: the team's synchronization, without completing outstanding operations.
    pub const SYNC: u32 = 0;
    /// `barrier`: completes this PE's outstanding operations (quiet), then the team's synchronization.
    pub const BARRIER: u32 = 1;
    /// `broadcast` of `n` bytes from member `a` (the root) to every member's `dest`.
    pub const BROADCAST: u32 = 2;
    /// `fcollect`: every member's `n` bytes, in member order, into every member's `dest`.
    pub const FCOLLECT: u32 = 3;
    /// `collect`: as FCOLLECT, with a byte count `n` of this PE's own (members' counts may differ).
    pub const COLLECT: u32 = 4;
    /// `alltoall`: block j (`n` bytes) of every member's `src` to member j.
    pub const ALLTOALL: u32 = 5;
    /// `reduce` of `n` elements of type `a` (`dtype::*`) with operator `b` (`op::*`).
    pub const REDUCE: u32 = 6;
    /// `reducescatter`: as REDUCE over `n_pes * n` elements, member i keeping block i (`n` elements).
    pub const REDUCESCATTER: u32 = 7;
    /// A team split's agreement: an exchange tagged with the split's arguments (`a`: their hash), then
    /// an AND of the u64 masks of free team slots at `src` into `dest`.
    pub const SPLIT: u32 = 8;
    /// One synchronization of a pulled reduction (`reduce::pull_sync`; `a`, `b`, `n` as REDUCE): the
    /// host runs REDUCE as this, the element pass on a whole grid (`reduce::pull`), and this again.
    pub const REDUCE_SYNC: u32 = 9;
    /// The same for REDUCESCATTER.
    pub const REDUCESCATTER_SYNC: u32 = 10;
    /// The second synchronization of a pulled reduction (every member has read the sources; no
    /// fence: `sync::Order::Enter`), after the element pass.
    pub const REDUCE_CLOSE: u32 = 17;
    /// The same for REDUCESCATTER.
    pub const REDUCESCATTER_CLOSE: u32 = 18;
    /// The opening and closing synchronizations of a large broadcast whose copies run on a whole grid
    /// (`data::broadcast_sync`, `data::broadcast_grid`; `n`, `a` as BROADCAST).
    pub const BROADCAST_OPEN: u32 = 11;
    /// The closing synchronization of such a broadcast (with quiet: the data has landed).
    pub const BROADCAST_CLOSE: u32 = 12;
    /// The same for a large fcollect and alltoall whose copies run on a whole grid
    /// (`data::push_sync`, `data::push_grid`; `n` as FCOLLECT / ALLTOALL).
    pub const FCOLLECT_OPEN: u32 = 13;
    /// The closing synchronization of such an fcollect (with quiet: the data has landed).
    pub const FCOLLECT_CLOSE: u32 = 14;
    /// The opening synchronization of a large alltoall run on a whole grid (every member has entered).
    pub const ALLTOALL_OPEN: u32 = 15;
    /// The closing synchronization of such an alltoall (with quiet: the data has landed).
    pub const ALLTOALL_CLOSE: u32 = 16;
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
            host_op::BROADCAST_OPEN => broadcast_sync(scope, team_id, dest, src, n, a as i32, false, "rshmem_broadcast (host, on the grid)\0"),
            host_op::BROADCAST_CLOSE => broadcast_sync(scope, team_id, dest, src, n, a as i32, true, "rshmem_broadcast (host, on the grid)\0"),
            host_op::FCOLLECT_OPEN | host_op::FCOLLECT_CLOSE | host_op::ALLTOALL_OPEN | host_op::ALLTOALL_CLOSE => {
                let alltoall = what == host_op::ALLTOALL_OPEN || what == host_op::ALLTOALL_CLOSE;
                let close = what == host_op::FCOLLECT_CLOSE || what == host_op::ALLTOALL_CLOSE;
                let call = if alltoall { "rshmem_alltoall (host, on the grid)\0" } else { "rshmem_fcollect (host, on the grid)\0" };
                push_sync(scope, team_id, alltoall, dest, src, n, close, call)
            }
            host_op::REDUCE_SYNC | host_op::REDUCE_CLOSE => {
                pull_sync(scope, team_id, dest, src, n, a as u32, b as u32, false, what == host_op::REDUCE_CLOSE, "rshmem_reduce (host, pulled)\0")
            }
            host_op::REDUCESCATTER_SYNC | host_op::REDUCESCATTER_CLOSE => {
                pull_sync(scope, team_id, dest, src, n, a as u32, b as u32, true, what == host_op::REDUCESCATTER_CLOSE, "rshmem_reducescatter (host, pulled)\0")
            }
            host_op::SPLIT => {
                let call = "rshmem_team_split (agreement)\0";
                let t = team(call, team_id);
                team_exchange_scoped(scope, call, &t, tag(Kind::Split, [a, 0, 0]), Order::Release);
                reduce_as::<u64, { op::AND }>(scope, team_id, dest as *mut u64, src as *const u64, 1, false, call);
            }
            _ => fail("rshmem host collective\0", Problem::BadReduction, what as i32, 0, 0),
        }
    }
}
