//! Teams: the table the host writes into the internal area, [`Team`], member numbers and the team
//! queries (see the `coll` module docs).

use crate::route::{fail, state, St};
use crate::state::{Internal, TeamDesc, MAX_PES, MAX_TEAMS, PES_JOB, PES_LISTED, PES_NODE, TEAM_VALID, TEAM_WORLD};
use crate::types::Problem;
use core::mem::{offset_of, size_of};
use core::ptr;

/// A team as one collective call sees it.
#[derive(Clone, Copy)]
pub struct Team {
    /// The team handle (`TEAM_WORLD`, `TEAM_SHARED`, `TEAM_NODE`, or one from `TEAMS_MIN` on).
    pub id: i32,
    /// The team's descriptor as the call looked it up ([`lookup`]: the world's from the device state,
    /// the others' from this PE's team table).
    pub d: TeamDesc,
}

impl Team {
    /// The job PE number of member `i`.
    #[inline(always)]
    pub fn pe(&self, i: i32) -> i32 {
        member(&self.d, i)
    }
    /// The number of members.
    #[inline(always)]
    pub fn size(&self) -> i32 {
        self.d.size
    }
    /// This PE's member index (at least 0 for a `Team` that [`team`] returned).
    #[inline(always)]
    pub fn me(&self) -> i32 {
        self.d.my_index
    }
}

/// The job PE number of member `i` of a team.
#[inline(always)]
pub fn member(d: &TeamDesc, i: i32) -> i32 {
    member_of(d, i, |j| St.node_pe(j), listed)
}

/// `member` with the node's PE table read through `node_pe` and the member tables through `listed`
/// (row, position) (the device state and heap on the device; the host runtime hands in its own
/// copies).
#[inline(always)]
pub fn member_of(d: &TeamDesc, i: i32, node_pe: impl FnOnce(i32) -> i32, listed: impl FnOnce(u32, i32) -> i32) -> i32 {
    let j = d.start + i * d.stride;
    match d.node_list {
        PES_NODE => node_pe(j),
        PES_LISTED => listed(d.list, j),
        _ => j,
    }
}

/// Entry `j` of member table `row` in this PE's internal area (both indexes taken modulo the table's
/// bounds). Stops the PE when rshmem is not initialized: the table lies in the heap, unmapped after
/// finalize (a descriptor can outlive the runtime that gave it).
#[inline(always)]
fn listed(row: u32, j: i32) -> i32 {
    let at = state("rshmem_team (member table)\0").heap_base() as usize
        + offset_of!(Internal, members)
        + (row as usize % MAX_TEAMS) * MAX_PES * size_of::<i32>()
        + (j as usize % MAX_PES) * size_of::<i32>();
    // SAFETY: the member tables lie in the internal area at the start of this PE's heap, mapped while
    // the state's magic is set (checked just above); the host writes a row only before it publishes the
    // descriptor that names it.
    unsafe { ptr::read_volatile(at as *const i32) }
}

/// Team `team`'s descriptor on this PE, or None for a handle with no live team.
#[inline(always)]
pub fn lookup(call: &'static str, team: i32) -> Option<TeamDesc> {
    let s = state(call);
    if team == TEAM_WORLD {
        // The world's descriptor from the device state (constant memory on GPUs), no heap load: the
        // barrier on it is the latency-critical one.
        let n = s.n_pes();
        return Some(TeamDesc { start: 0, stride: 1, size: n, my_index: s.my_pe(), node_list: PES_JOB, valid: TEAM_VALID, parent: -1, list: 0 });
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
    index_of_in(d, pe, St.node_n_pes(), |k| St.node_pe(k), listed)
}

/// `index_of` with this node's PE count and table, and the member tables, handed in (as `member_of`).
#[inline]
pub fn index_of_in(d: &TeamDesc, pe: i32, node_n_pes: i32, node_pe: impl Fn(i32) -> i32, listed: impl Fn(u32, i32) -> i32) -> i32 {
    let j = match d.node_list {
        // The position of `pe` among this node's PEs.
        PES_NODE => match (0..node_n_pes).find(|&k| node_pe(k) == pe) {
            Some(k) => k,
            None => return -1,
        },
        // A listed team has no order to exploit: its table is searched.
        PES_LISTED => return (0..d.size).find(|&i| listed(d.list, d.start + i * d.stride) == pe).unwrap_or(-1),
        _ => pe,
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
