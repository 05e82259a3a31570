//! Teams and collectives on the host: team creation and destruction (the team table in every member's
//! internal heap area), and the host-initiated and on-stream collectives. The collectives themselves
//! are the device library's (`rshmem_device::coll`): on GPUs a one-block kernel of the runtime's module
//! runs them (`rshmemi_collective`), on the CPU backend the calling thread does.

use crate::error::{Error, Result};
use crate::runtime::{self, Runtime};
pub use crate::teams::TeamConfig;
use crate::teams::Teams;
use rshmem_device::coll::{self as dc, host_op};
use rshmem_device::state::{Internal, TeamDesc, TeamSync, MAX_TEAMS, PES_LISTED, TEAMS_MIN, TEAM_INVALID, TEAM_NODE, TEAM_SHARED, TEAM_VALID, TEAM_WORLD};
use std::mem::{offset_of, size_of};

pub use rshmem_device::coll::{dtype, op, Bf16, DoubleLoc, F16};

/// Threads of the block that runs a host collective on GPUs. The runtime's module is JIT-compiled
/// without a register cap, and rshmemi_collective (every collective, every reduction type) needs more
/// registers than 512 threads can have: on an H100, 512 failed with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
/// (bench/results/2026-11-23-h100-cpp-self.md). 128 threads fit even at 255 registers per thread.
const HOST_COLL_THREADS: u32 = 128;
/// Threads per block, and the most blocks, of the grid that runs the bulk of a large collective
/// (`launch_grid`).
const GRID_THREADS: u32 = 128;
const GRID_MAX_BLOCKS: u64 = 1024;

fn desc_of(rt: &Runtime, call: &str, team: i32) -> Result<TeamDesc> {
    let teams = rt.teams.lock().unwrap_or_else(|e| e.into_inner());
    match usize::try_from(team).ok().and_then(|t| teams.desc.get(t)) {
        Some(d) if d.valid == TEAM_VALID => Ok(*d),
        _ => Err(Error::new(format!("{call}: team {team} does not exist (never created, or destroyed)"))),
    }
}

/// Team `team`'s descriptor, which this PE must be a member of.
fn member_desc_of(rt: &Runtime, call: &str, team: i32) -> Result<TeamDesc> {
    let d = desc_of(rt, call, team)?;
    if d.my_index < 0 {
        return Err(Error::new(format!("{call}: this PE is not a member of team {team}")));
    }
    Ok(d)
}

/// The PE's index in `team`, -1 when it is not a member or the team does not exist.
pub fn team_my_pe(team: i32) -> i32 {
    runtime::get("rshmem_team_my_pe").ok().and_then(|rt| desc_of(&rt, "", team).ok()).map_or(-1, |d| d.my_index)
}
/// The number of PEs in `team`, -1 when the team does not exist.
pub fn team_n_pes(team: i32) -> i32 {
    runtime::get("rshmem_team_n_pes").ok().and_then(|rt| desc_of(&rt, "", team).ok()).map_or(-1, |d| d.size)
}
/// Member `pe` of team `src` as a member index of team `dest`, or -1 (NVSHMEM's rule). From the
/// host's copy of the team table: the one in the heap is device memory on GPUs.
pub fn team_translate_pe(src: i32, pe: i32, dest: i32) -> i32 {
    let Ok(rt) = runtime::get("rshmem_team_translate_pe") else { return -1 };
    let (Ok(s), Ok(d)) = (desc_of(&rt, "", src), desc_of(&rt, "", dest)) else { return -1 };
    if pe < 0 || pe >= s.size {
        return -1;
    }
    let teams = rt.teams.lock().unwrap_or_else(|e| e.into_inner());
    dc::index_of_in(&d, pe_of(&rt, &teams, &s, pe), rt.state.node_n_pes, |j| node_pe(&rt, j), |r, j| teams.listed(r, j))
}

/// The job PE of node PE `j` from the host's copy of the node's PE table (-1 past its end).
fn node_pe(rt: &Runtime, j: i32) -> i32 {
    rt.state.node_pe.get(j as usize).copied().unwrap_or(-1)
}

/// The job PE of member `i` of team `d`, from the host's copies of the node's PE table and the
/// member tables (the device library's `member` reads the device's).
pub(crate) fn pe_of(rt: &Runtime, teams: &Teams, d: &TeamDesc, i: i32) -> i32 {
    dc::member_of(d, i, |j| node_pe(rt, j), |r, j| teams.listed(r, j))
}

/// The team of members `start + i * stride` (`i < size`) of team `parent` (descriptor `p`), with this
/// PE at `my_index`, to live in `slot`: a strided view of the parent's numbering, or for a parent of
/// arbitrary members a member table of its own. Returns the descriptor and that table (empty when
/// strided).
#[allow(clippy::too_many_arguments)]
fn sub_team(rt: &Runtime, teams: &Teams, parent: i32, p: &TeamDesc, start: i32, stride: i32, size: i32, my_index: i32, slot: usize) -> (TeamDesc, Vec<i32>) {
    let base = TeamDesc { start: 0, stride: 1, size, my_index, node_list: p.node_list, valid: TEAM_VALID, parent, list: 0 };
    if p.node_list == PES_LISTED {
        let members = (0..size).map(|i| pe_of(rt, teams, p, start + i * stride)).collect();
        (TeamDesc { list: slot as u32, ..base }, members)
    } else {
        (TeamDesc { start: p.start + start * p.stride, stride: p.stride * stride, ..base }, Vec::new())
    }
}
/// The configuration `team` was made with.
pub fn team_get_config(team: i32) -> Result<TeamConfig> {
    let call = "rshmem_team_get_config";
    let rt = runtime::get(call)?;
    desc_of(&rt, call, team)?;
    let config = rt.teams.lock().unwrap_or_else(|e| e.into_inner()).config[team as usize];
    Ok(config)
}

/// Collective over `parent`: the team of its members `start, start + stride, ...` (`size` of them).
/// Returns the new team's handle on its members and `TEAM_INVALID` on the other members of the parent.
pub fn team_split_strided(parent: i32, start: i32, stride: i32, size: i32, config: Option<TeamConfig>) -> Result<i32> {
    let call = "rshmem_team_split_strided";
    let rt = runtime::get(call)?;
    let p = member_desc_of(&rt, call, parent)?;
    let stride = if size == 1 { 1 } else { stride };
    if start < 0 || size < 1 || stride < 1 || start as i64 + (size as i64 - 1) * stride as i64 >= p.size as i64 {
        return Err(Error::new(format!(
            "{call}: start {start}, stride {stride}, size {size} do not select PEs of the parent team {parent} ({} PEs): need start >= 0, size >= 1, stride >= 1 and start + (size - 1) * stride < {}",
            p.size, p.size
        )));
    }
    let my_index = {
        let rel = p.my_index - start;
        if rel >= 0 && rel % stride == 0 && rel / stride < size { rel / stride } else { -1 }
    };
    let slots = agree_slots(&rt, call, parent, 1, [start as u64, stride as u64, size as u64])?;
    let mut teams = rt.teams.lock().unwrap_or_else(|e| e.into_inner());
    if my_index < 0 {
        return Ok(TEAM_INVALID);
    }
    let (child, members) = sub_team(&rt, &teams, parent, &p, start, stride, size, my_index, slots[0]);
    teams.install(rt.backend(), slots[0], child, config.unwrap_or_default(), members)?;
    Ok(slots[0] as i32)
}

/// Collective over `parent`: splits it into rows of `xrange` members (the x-axis teams) and the columns
/// across them (the y-axis teams). Returns this PE's (x team, y team).
pub fn team_split_2d(parent: i32, xrange: i32, xconfig: Option<TeamConfig>, yconfig: Option<TeamConfig>) -> Result<(i32, i32)> {
    let call = "rshmem_team_split_2d";
    let rt = runtime::get(call)?;
    let p = member_desc_of(&rt, call, parent)?;
    if xrange < 1 {
        return Err(Error::new(format!("{call}: xrange {xrange} must be at least 1")));
    }
    let x = xrange.min(p.size);
    let slots = agree_slots(&rt, call, parent, 2, [x as u64, u64::MAX, 0])?;
    let (row, col) = (p.my_index / x, p.my_index % x);
    let row_start = row * x;
    let mut teams = rt.teams.lock().unwrap_or_else(|e| e.into_inner());
    let (xdesc, xmembers) = sub_team(&rt, &teams, parent, &p, row_start, 1, x.min(p.size - row_start), col, slots[0]);
    let (ydesc, ymembers) = sub_team(&rt, &teams, parent, &p, col, x, (p.size - col + x - 1) / x, row, slots[1]);
    teams.install(rt.backend(), slots[0], xdesc, xconfig.unwrap_or_default(), xmembers)?;
    teams.install(rt.backend(), slots[1], ydesc, yconfig.unwrap_or_default(), ymembers)?;
    Ok((slots[0] as i32, slots[1] as i32))
}

/// The `k` lowest team slots free on every member of `parent`, agreed by all of them; `args` are the
/// split's arguments, which must be the same everywhere. Over the world team the bootstrap carries the
/// agreement (so a PE in another host collective is named); over other teams, a device collective of
/// the parent does.
fn agree_slots(rt: &Runtime, call: &str, parent: i32, k: usize, args: [u64; 3]) -> Result<Vec<usize>> {
    let mine = rt.teams.lock().unwrap_or_else(|e| e.into_inner()).free_mask();
    let mask = if parent == TEAM_WORLD {
        let mut payload = mine.to_le_bytes().to_vec();
        for a in args {
            payload.extend_from_slice(&a.to_le_bytes());
        }
        let all = rt.host_allgather(call, &payload)?;
        let mut mask = u64::MAX;
        for (pe, r) in all.iter().enumerate() {
            let r: [u8; 32] = r.as_slice().try_into().map_err(|_| {
                Error::new(format!("{call}: PE {pe} sent {} bytes in the split's agreement (expected 32): is it running the same rshmem?", r.len()))
            })?;
            let w = |i: usize| u64::from_le_bytes(r[8 * i..8 * i + 8].try_into().unwrap());
            if [w(1), w(2), w(3)] != args {
                return Err(Error::new(format!(
                    "{call}: PEs split the team with different arguments: PE {} passed ({}), PE {pe} passed ({}); every member of the parent must pass the same",
                    rt.pe(),
                    show_args(args),
                    show_args([w(1), w(2), w(3)])
                )));
            }
            mask &= w(0);
        }
        mask
    } else {
        let base = rt.backend().heap_base() + offset_of!(Internal, team_work);
        // SAFETY: the team work words lie in this PE's internal area; the device collective reads word
        // 0 on every member and writes word 1 here.
        unsafe {
            rt.backend().copy_in(base as *mut u8, &mine.to_le_bytes())?;
            let h = dc::tag(dc::Kind::Split, args) as u64;
            run_blocking(rt, host_op::SPLIT, parent, (base + 8) as *mut u8, base as *const u8, 1, h, 0)?;
            let mut out = [0u8; 8];
            rt.backend().copy_out(&mut out, (base + 8) as *const u8)?;
            u64::from_le_bytes(out)
        }
    };
    let slots: Vec<usize> = (0..MAX_TEAMS).filter(|&i| mask >> i & 1 == 1).take(k).collect();
    if slots.len() < k {
        return Err(Error::new(format!(
            "{call}: no free team slot on every member of the parent team (at most {} teams at once, the predefined ones included); destroy teams no longer used",
            MAX_TEAMS
        )));
    }
    Ok(slots)
}

fn show_args(a: [u64; 3]) -> String {
    if a[1] == u64::MAX {
        format!("xrange {}", a[0])
    } else {
        format!("start {}, stride {}, size {}", a[0], a[1], a[2])
    }
}

/// Destroys `team` on this PE after a barrier of the team (every member calls it).
pub fn team_destroy(team: i32) -> Result<()> {
    let call = "rshmem_team_destroy";
    let rt = runtime::get(call)?;
    if team == TEAM_INVALID {
        return Ok(());
    }
    if (0..TEAMS_MIN).contains(&team) {
        return Err(Error::new(format!("{call}: team {team} is predefined and cannot be destroyed")));
    }
    desc_of(&rt, call, team)?;
    barrier(team)?;
    // The slot's synchronization words start over: the next team made in this slot may have other
    // members, which used the slot for other teams (other epochs) or never. Every member has seen this
    // barrier's announcements here, so nothing more arrives for this team.
    let sync = rt.backend().heap_base() + offset_of!(Internal, sync) + team as usize * size_of::<TeamSync>();
    // SAFETY: the team's synchronization words lie in this PE's internal area; no device code uses
    // them now (the team is being destroyed on every member, past its last barrier).
    unsafe { rt.backend().copy_in(sync as *mut u8, &[0u8; size_of::<TeamSync>()])? };
    let mut teams = rt.teams.lock().unwrap_or_else(|e| e.into_inner());
    teams.remove(rt.backend(), team as usize)
}

/// Host barrier of `team`: completes this PE's operations, then waits for every member.
pub fn barrier(team: i32) -> Result<()> {
    if team == TEAM_WORLD {
        return runtime::get("rshmem_barrier_all")?.host_barrier("rshmem_barrier_all");
    }
    let rt = runtime::get("rshmem_barrier")?;
    // A bad team is an error here, not a stopped PE (the device collective's check).
    precheck(&rt, host_op::BARRIER, team, 0, 0)?;
    rt.quiet()?;
    // SAFETY: a synchronization has no buffers.
    unsafe { run_blocking(&rt, host_op::BARRIER, team, std::ptr::null_mut(), std::ptr::null(), 0, 0, 0) }
}
/// Host sync of `team`: waits for every member (outstanding operations are not completed).
pub fn team_sync(team: i32) -> Result<()> {
    let rt = runtime::get("rshmem_team_sync")?;
    precheck(&rt, host_op::SYNC, team, 0, 0)?;
    // SAFETY: a synchronization has no buffers.
    unsafe { run_blocking(&rt, host_op::SYNC, team, std::ptr::null_mut(), std::ptr::null(), 0, 0, 0) }
}

/// Runs host collective `what` (`host_op`) and waits for it.
///
/// # Safety
/// The buffers must satisfy the collective's contract (`rshmem_device::coll`): symmetric, of the sizes
/// it reads and writes (ranges are checked against the heap).
#[allow(clippy::too_many_arguments)]
pub unsafe fn collective(what: u32, team: i32, dest: *mut u8, src: *const u8, n: usize, a: u64, b: u64) -> Result<()> {
    let rt = runtime::get(name_of(what))?;
    precheck(&rt, what, team, a, b)?;
    // SAFETY: forwarded contract.
    unsafe { run_blocking(&rt, what, team, dest, src, n as u64, a, b) }
}

/// Enqueues host collective `what` on `stream` (GPUs; the CPU backend runs it at once).
///
/// # Safety
/// As `collective`; the buffers must stay valid until the stream has run it; `stream` is null (the
/// legacy default stream) or a stream of this PE's context that stays alive until then
/// (`Stream::from_raw`'s contract).
#[allow(clippy::too_many_arguments)]
pub unsafe fn collective_on_stream(what: u32, team: i32, dest: *mut u8, src: *const u8, n: usize, a: u64, b: u64, stream: *mut std::ffi::c_void) -> Result<()> {
    let call = name_of(what);
    let rt = runtime::get(call)?;
    precheck(&rt, what, team, a, b)?;
    if rt.backend().name() != "cuda" {
        // SAFETY: forwarded contract.
        return unsafe { run_blocking(&rt, what, team, dest, src, n as u64, a, b) };
    }
    // SAFETY: `stream` is null or a live stream of this PE's context (this function's contract).
    let s = unsafe { crate::api::stream::Stream::from_raw(stream as _) };
    if let Some(plan) = grid_plan(&rt, what, team, dest, src, n as u64, a) {
        // SAFETY: forwarded contract; `grid_plan` checked the path's conditions.
        return unsafe { launch_grid(call, plan, team, dest, src, n as u64, a, b, s) };
    }
    // SAFETY: forwarded contract; the kernel's parameters match rshmemi_collective's.
    unsafe { launch(call, what, team, dest, src, n as u64, a, b, s) }
}

/// A collective whose bulk runs on a whole grid between two one-block synchronizations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Grid {
    /// A pulled reduction: `host_op::REDUCE_SYNC` or `REDUCESCATTER_SYNC`, `rshmemi_reduce_pull`.
    Reduce(u32),
    /// A large broadcast: `BROADCAST_OPEN`, `rshmemi_broadcast_grid`, `BROADCAST_CLOSE`.
    Broadcast,
    /// A large fcollect (false) or alltoall (true): `FCOLLECT_OPEN` / `ALLTOALL_OPEN`,
    /// `rshmemi_push_grid`, `..._CLOSE`.
    Push(bool),
}

/// Whether collective `what` runs its bulk on a whole grid: large (the device's own tests, `dc::pulls`
/// and `dc::lands_direct`, so the synchronizations are the ones its one-block path makes), every
/// member mapped here (as the device sees it: its `peer_base`), and for a reduction the destination not
/// overlapping the source.
fn grid_plan(rt: &Runtime, what: u32, team: i32, dest: *mut u8, src: *const u8, n: u64, a: u64) -> Option<Grid> {
    let d = desc_of(rt, "", team).ok()?;
    let size = d.size as usize;
    // Below RSHMEM_ONSTREAM_GRID_MIN bytes one block's kernel takes the whole collective.
    let grid_min = rt.onstream_grid_min;
    let plan = match what {
        host_op::REDUCE | host_op::REDUCESCATTER => {
            let sz = dc::dtype_size(a as u32);
            if sz == 0 || !dc::pulls(n as usize, sz, size) || (n as usize) * sz * size < grid_min {
                return None;
            }
            let src_len = if what == host_op::REDUCESCATTER { n as usize * size } else { n as usize };
            let (d0, d1, s0, s1) = (dest as usize, dest as usize + n as usize * sz, src as usize, src as usize + src_len * sz);
            if d0 < s1 && s0 < d1 {
                return None;
            }
            Grid::Reduce(if what == host_op::REDUCE { host_op::REDUCE_SYNC } else { host_op::REDUCESCATTER_SYNC })
        }
        host_op::BROADCAST if dc::lands_direct(n as usize) && n as usize >= grid_min => Grid::Broadcast,
        host_op::FCOLLECT | host_op::ALLTOALL if dc::lands_direct(n as usize * size) && n as usize * size >= grid_min => Grid::Push(what == host_op::ALLTOALL),
        _ => return None,
    };
    let teams = rt.teams.lock().unwrap_or_else(|e| e.into_inner());
    let mapped = |i: i32| usize::try_from(pe_of(rt, &teams, &d, i)).ok().and_then(|pe| rt.state.peer_base.get(pe)).is_some_and(|&b| b != 0);
    (0..d.size).all(mapped).then_some(plan)
}

/// The closing synchronization of a pulled reduction whose opening one is `sync` (`REDUCE_SYNC` or
/// `REDUCESCATTER_SYNC`): every member has read the sources.
fn reduce_close(sync: u32) -> u32 {
    if sync == host_op::REDUCESCATTER_SYNC {
        host_op::REDUCESCATTER_CLOSE
    } else {
        host_op::REDUCE_CLOSE
    }
}

/// The opening and closing synchronizations of a grid fcollect (`alltoall` false) or alltoall.
fn push_ops(alltoall: bool) -> (u32, u32) {
    if alltoall {
        (host_op::ALLTOALL_OPEN, host_op::ALLTOALL_CLOSE)
    } else {
        (host_op::FCOLLECT_OPEN, host_op::FCOLLECT_CLOSE)
    }
}

/// Collective `plan` on `s`: its first synchronization (one block), the bulk on a grid
/// (`rshmemi_reduce_pull`, `rshmemi_broadcast_grid`), its second synchronization; stream order keeps
/// them apart. The same two synchronizations as the one-block kernel's path, so members may take
/// either.
///
/// # Safety
/// As `collective_on_stream`; `grid_plan` said `plan`.
#[allow(clippy::too_many_arguments)]
unsafe fn launch_grid(call: &str, plan: Grid, team: i32, dest: *mut u8, src: *const u8, n: u64, a: u64, b: u64, s: crate::api::stream::Stream) -> Result<()> {
    let (open, close) = match plan {
        Grid::Reduce(sync) => (sync, reduce_close(sync)),
        Grid::Broadcast => (host_op::BROADCAST_OPEN, host_op::BROADCAST_CLOSE),
        Grid::Push(alltoall) => push_ops(alltoall),
    };
    // SAFETY: forwarded contract.
    unsafe { launch(call, open, team, dest, src, n, a, b, s)? };
    let (mut team_a, mut dest_a, mut src_a, mut n_a) = (team, dest as u64, src as u64, n);
    let (mut dt, mut o, mut scatter, mut root) = (a as u32, b as u32, u32::from(open == host_op::REDUCESCATTER_SYNC), a as i32);
    crate::api::stream::with_backend(call, |be| match plan {
        Grid::Reduce(_) => {
            let blocks = n.div_ceil(GRID_THREADS as u64 * 4).clamp(1, GRID_MAX_BLOCKS) as u32;
            let mut args: [*mut std::ffi::c_void; 7] = [
                &mut team_a as *mut i32 as _,
                &mut dest_a as *mut u64 as _,
                &mut src_a as *mut u64 as _,
                &mut n_a as *mut u64 as _,
                &mut dt as *mut u32 as _,
                &mut o as *mut u32 as _,
                &mut scatter as *mut u32 as _,
            ];
            // SAFETY: the parameters match rshmemi_reduce_pull(i32, u64, u64, u64, u32, u32, u32) in
            // order and size.
            unsafe { be.module()?.launch("rshmemi_reduce_pull", blocks, GRID_THREADS, 0, s, &mut args) }
        }
        Grid::Broadcast => {
            // 16-byte units, several per thread.
            let blocks = n.div_ceil(GRID_THREADS as u64 * 64).clamp(1, GRID_MAX_BLOCKS) as u32;
            let mut args: [*mut std::ffi::c_void; 5] =
                [&mut team_a as *mut i32 as _, &mut dest_a as *mut u64 as _, &mut src_a as *mut u64 as _, &mut n_a as *mut u64 as _, &mut root as *mut i32 as _];
            // SAFETY: the parameters match rshmemi_broadcast_grid(i32, u64, u64, u64, i32) in order and
            // size.
            unsafe { be.module()?.launch("rshmemi_broadcast_grid", blocks, GRID_THREADS, 0, s, &mut args) }
        }
        Grid::Push(alltoall) => {
            // Each member copies one block to every member: 16-byte units, several per thread.
            let blocks = n.div_ceil(GRID_THREADS as u64 * 64).clamp(1, GRID_MAX_BLOCKS) as u32;
            let mut kind = u32::from(alltoall);
            let mut args: [*mut std::ffi::c_void; 5] =
                [&mut team_a as *mut i32 as _, &mut kind as *mut u32 as _, &mut dest_a as *mut u64 as _, &mut src_a as *mut u64 as _, &mut n_a as *mut u64 as _];
            // SAFETY: the parameters match rshmemi_push_grid(i32, u32, u64, u64, u64) in order and size.
            unsafe { be.module()?.launch("rshmemi_push_grid", blocks, GRID_THREADS, 0, s, &mut args) }
        }
    })?;
    // SAFETY: forwarded contract.
    unsafe { launch(call, close, team, dest, src, n, a, b, s) }
}

fn name_of(what: u32) -> &'static str {
    match what {
        host_op::SYNC => "rshmem_team_sync",
        host_op::BARRIER => "rshmem_barrier",
        host_op::BROADCAST => "rshmem_broadcast",
        host_op::FCOLLECT => "rshmem_fcollect",
        host_op::COLLECT => "rshmem_collect",
        host_op::ALLTOALL => "rshmem_alltoall",
        host_op::REDUCE => "rshmem_reduce",
        host_op::REDUCESCATTER => "rshmem_reducescatter",
        host_op::SPLIT => "rshmem_team_split",
        _ => "rshmem collective",
    }
}

/// What the host can check before starting a collective, as errors rather than a stopped PE.
fn precheck(rt: &Runtime, what: u32, team: i32, a: u64, b: u64) -> Result<()> {
    let call = name_of(what);
    let d = member_desc_of(rt, call, team)?;
    match what {
        host_op::BROADCAST if a as i64 >= d.size as i64 || (a as i64) < 0 => {
            Err(Error::new(format!("{call}: root {} is not a member index of team {team} ({} PEs)", a as i64, d.size)))
        }
        host_op::REDUCE | host_op::REDUCESCATTER if !dc::valid_reduction(a as u32, b as u32) => {
            Err(Error::new(format!("{call}: type code {a} has no operator {b} (bitwise operators are for integer types, maxloc for double2)")))
        }
        host_op::SYNC | host_op::BARRIER | host_op::BROADCAST | host_op::FCOLLECT | host_op::COLLECT | host_op::ALLTOALL | host_op::REDUCE
        | host_op::REDUCESCATTER => Ok(()),
        _ => Err(Error::new(format!("rshmem collective: unknown operation {what}"))),
    }
}

/// Runs `what` and waits: on GPUs a one-block kernel on the default stream, on the CPU backend this
/// thread.
///
/// # Safety
/// As `collective`.
#[allow(clippy::too_many_arguments)]
unsafe fn run_blocking(rt: &Runtime, what: u32, team: i32, dest: *mut u8, src: *const u8, n: u64, a: u64, b: u64) -> Result<()> {
    let call = name_of(what);
    // On the job status board, so that rshmrun's stall report says a PE is in this team collective.
    rt.on_board(call, || {
        let plan = grid_plan(rt, what, team, dest, src, n, a);
        if rt.backend().name() == "cuda" {
            match plan {
                // SAFETY: forwarded contract; `grid_plan` checked the path's conditions.
                Some(plan) => unsafe { launch_grid(call, plan, team, dest, src, n, a, b, crate::api::stream::Stream::DEFAULT)? },
                // SAFETY: forwarded contract.
                None => unsafe { launch(call, what, team, dest, src, n, a, b, crate::api::stream::Stream::DEFAULT)? },
            }
            return crate::api::stream::wait_default_stream(call);
        }
        // SAFETY: forwarded contract; on the CPU backend device code runs on host threads, this one a
        // one-thread "block" (and, for a collective with a grid plan, a one-thread grid: the same three
        // steps as on a GPU).
        unsafe {
            let scope = rshmem_device::ops::Scope::Thread;
            match plan {
                Some(Grid::Reduce(sync)) => {
                    dc::run(sync, scope, team, dest, src, n, a, b);
                    dc::pull(team, dest, src, n as usize, a as u32, b as u32, sync == host_op::REDUCESCATTER_SYNC, 0, 1, "rshmem_reduce (pulled)\0");
                    dc::run(reduce_close(sync), scope, team, dest, src, n, a, b);
                }
                Some(Grid::Broadcast) => {
                    dc::run(host_op::BROADCAST_OPEN, scope, team, dest, src, n, a, b);
                    dc::broadcast_grid(team, dest, src, n as usize, a as i32, 0, 1, "rshmem_broadcast (on the grid)\0");
                    dc::run(host_op::BROADCAST_CLOSE, scope, team, dest, src, n, a, b);
                }
                Some(Grid::Push(alltoall)) => {
                    let (open, close) = push_ops(alltoall);
                    dc::run(open, scope, team, dest, src, n, a, b);
                    dc::push_grid(team, alltoall, dest, src, n as usize, 0, 1, "rshmem_fcollect / alltoall (on the grid)\0");
                    dc::run(close, scope, team, dest, src, n, a, b);
                }
                None => dc::run(what, scope, team, dest, src, n, a, b),
            }
        }
        Ok(())
    })
}

/// # Safety
/// As `collective`.
#[allow(clippy::too_many_arguments)]
unsafe fn launch(call: &str, what: u32, team: i32, dest: *mut u8, src: *const u8, n: u64, a: u64, b: u64, s: crate::api::stream::Stream) -> Result<()> {
    let (mut what, mut team, mut dest, mut src, mut n, mut a, mut b) = (what, team, dest as u64, src as u64, n, a, b);
    let mut args: [*mut std::ffi::c_void; 7] = [
        &mut what as *mut u32 as _,
        &mut team as *mut i32 as _,
        &mut dest as *mut u64 as _,
        &mut src as *mut u64 as _,
        &mut n as *mut u64 as _,
        &mut a as *mut u64 as _,
        &mut b as *mut u64 as _,
    ];
    crate::api::stream::with_backend(call, |be| {
        // SAFETY: the parameters match rshmemi_collective(u32, i32, u64 x 5) in order and size.
        unsafe { be.module()?.launch("rshmemi_collective", 1, HOST_COLL_THREADS, 0, s, &mut args) }
    })
}

// ---------------------------------------------------------------- typed Rust API

/// A team handle (NVSHMEM's `nvshmem_team_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Team(pub i32);

impl Team {
    /// Every PE of the job (`NVSHMEM_TEAM_WORLD`).
    pub const WORLD: Team = Team(TEAM_WORLD);
    /// The PEs of this node, which share memory (`NVSHMEM_TEAM_SHARED`).
    pub const SHARED: Team = Team(TEAM_SHARED);
    /// The PEs of this node (`NVSHMEMX_TEAM_NODE`).
    pub const NODE: Team = Team(TEAM_NODE);
    /// No team: what a split gives the PEs it leaves out (`NVSHMEM_TEAM_INVALID`).
    pub const INVALID: Team = Team(TEAM_INVALID);

    /// This PE's index in the team, -1 when it is not a member or the team does not exist.
    pub fn my_pe(self) -> i32 {
        team_my_pe(self.0)
    }
    /// The number of PEs in the team, -1 when the team does not exist.
    pub fn n_pes(self) -> i32 {
        team_n_pes(self.0)
    }
    /// My member `pe` of this team as a member index of `dest`, or None.
    pub fn translate_pe(self, pe: i32, dest: Team) -> Option<i32> {
        let r = team_translate_pe(self.0, pe, dest.0);
        (r >= 0).then_some(r)
    }
    /// Collective over this team: the members `start, start + stride, ...`; None on the others.
    pub fn split_strided(self, start: i32, stride: i32, size: i32) -> Result<Option<Team>> {
        team_split_strided(self.0, start, stride, size, None).map(|t| (t != TEAM_INVALID).then_some(Team(t)))
    }
    /// Collective over this team: (row team, column team) of a grid `xrange` members wide.
    pub fn split_2d(self, xrange: i32) -> Result<(Team, Team)> {
        team_split_2d(self.0, xrange, None, None).map(|(x, y)| (Team(x), Team(y)))
    }
    /// Collective over this team: destroys it after a barrier of its members ([`team_destroy`]).
    pub fn destroy(self) -> Result<()> {
        team_destroy(self.0)
    }
    /// Host barrier of the team: completes this PE's operations, then waits for every member.
    pub fn barrier(self) -> Result<()> {
        barrier(self.0)
    }
    /// Host sync of the team: waits for every member without completing operations.
    pub fn sync(self) -> Result<()> {
        team_sync(self.0)
    }
}

/// Element types of the typed reductions: the device library's (`rshmem_device::coll::Elem`), so the
/// host and device typed APIs take the same types.
pub use rshmem_device::coll::Elem as ReduceElem;
/// Reduction operators of the typed API: the device library's enum (`rshmem_device::coll::typed::Op`).
pub use rshmem_device::coll::typed::Op as ReduceOp;

/// Host broadcast of `nelems` elements from `src` on member `root` into `dest` on every member.
///
/// # Safety
/// `dest` and `src` symmetric, each of `nelems` elements.
pub unsafe fn broadcast<T: Copy>(team: Team, dest: *mut T, src: *const T, nelems: usize, root: i32) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { collective(host_op::BROADCAST, team.0, dest as *mut u8, src as *const u8, nelems * size_of::<T>(), root as u64, 0) }
}
/// Host fcollect: every member's `nelems` elements, in member order, on every member.
///
/// # Safety
/// `dest` symmetric of `n_pes * nelems` elements, `src` of `nelems`.
pub unsafe fn fcollect<T: Copy>(team: Team, dest: *mut T, src: *const T, nelems: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { collective(host_op::FCOLLECT, team.0, dest as *mut u8, src as *const u8, nelems * size_of::<T>(), 0, 0) }
}
/// Host collect: like fcollect with a different `nelems` on each member.
///
/// # Safety
/// `dest` symmetric and large enough for all members' elements, `src` of `nelems`.
pub unsafe fn collect<T: Copy>(team: Team, dest: *mut T, src: *const T, nelems: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { collective(host_op::COLLECT, team.0, dest as *mut u8, src as *const u8, nelems * size_of::<T>(), 0, 0) }
}
/// Host alltoall: block `i` of my `src` to block `my index` of `dest` on member `i`.
///
/// # Safety
/// `dest` and `src` symmetric of `n_pes * nelems` elements.
pub unsafe fn alltoall<T: Copy>(team: Team, dest: *mut T, src: *const T, nelems: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { collective(host_op::ALLTOALL, team.0, dest as *mut u8, src as *const u8, nelems * size_of::<T>(), 0, 0) }
}
/// Host reduction of `nreduce` elements with `op` into `dest` on every member.
///
/// # Safety
/// `dest` and `src` symmetric of `nreduce` elements.
pub unsafe fn reduce<T: ReduceElem>(team: Team, op: ReduceOp, dest: *mut T, src: *const T, nreduce: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { collective(host_op::REDUCE, team.0, dest as *mut u8, src as *const u8, nreduce, T::DTYPE as u64, op.code() as u64) }
}
/// Host reducescatter: member `i` gets block `i` (of `nreduce` elements) of the reduction of all
/// members' `n_pes * nreduce`-element `src`.
///
/// # Safety
/// `dest` symmetric of `nreduce` elements, `src` of `n_pes * nreduce`.
pub unsafe fn reducescatter<T: ReduceElem>(team: Team, op: ReduceOp, dest: *mut T, src: *const T, nreduce: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { collective(host_op::REDUCESCATTER, team.0, dest as *mut u8, src as *const u8, nreduce, T::DTYPE as u64, op.code() as u64) }
}
