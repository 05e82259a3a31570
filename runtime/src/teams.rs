//! The team table: the predefined teams and every team made by a split, as this PE wrote it into its
//! internal heap area (where device code reads it), with each team's configuration. The runtime holds
//! it; the team API (`coll`) changes it.

use crate::error::Result;
use crate::platform::backend::Backend;
use rshmem_device::state::{Internal, TeamDesc, TeamInitCall, MAX_PES, MAX_TEAMS, PES_JOB, PES_LISTED, PES_NODE, TEAMS_MIN, TEAM_NODE, TEAM_SHARED, TEAM_UID_NONE, TEAM_VALID, TEAM_WORLD};
use std::mem::{offset_of, size_of};

/// NVSHMEM's team configuration (`nvshmem_team_config_t`, 64 bytes): kept with the team and given back
/// by `team_get_config`. rshmem has no per-team contexts, so `num_contexts` is only recorded.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TeamConfig {
    /// NVSHMEM's version word: the major version (2) << 16 plus the struct's size.
    pub version: i32,
    /// Contexts the team asks for (recorded only).
    pub num_contexts: i32,
    /// The id that PEs joining one team by `nvshmemx_team_init` share.
    pub uniqueid: u64,
    /// Reserved (rshmem keeps it zero).
    pub padding: [u8; 48],
}
const _: () = assert!(size_of::<TeamConfig>() == 64);

impl Default for TeamConfig {
    fn default() -> TeamConfig {
        // NVSHMEM's version word: 2 << 16 plus the struct's size.
        TeamConfig { version: (2 << 16) + 64, num_contexts: 0, uniqueid: 0, padding: [0; 48] }
    }
}

/// The host's copy of the team table (what it wrote into the internal area), with each team's config
/// and, for teams of arbitrary members (`PES_LISTED`), the member table.
pub(crate) struct Teams {
    pub(crate) desc: [TeamDesc; MAX_TEAMS],
    pub(crate) config: [TeamConfig; MAX_TEAMS],
    pub(crate) members: [Vec<i32>; MAX_TEAMS],
}

impl Teams {
    /// The predefined teams of a PE: the world, and the node teams (TEAM_SHARED and TEAM_NODE, the PEs
    /// of this node, which share memory).
    pub(crate) fn new(me: usize, n: usize, node_me: usize, node_n: usize) -> Teams {
        let mut desc = [TeamDesc::default(); MAX_TEAMS];
        desc[TEAM_WORLD as usize] = TeamDesc { start: 0, stride: 1, size: n as i32, my_index: me as i32, node_list: PES_JOB, valid: TEAM_VALID, parent: -1, list: 0 };
        let node = TeamDesc { start: 0, stride: 1, size: node_n as i32, my_index: node_me as i32, node_list: PES_NODE, valid: TEAM_VALID, parent: -1, list: 0 };
        desc[TEAM_SHARED as usize] = node;
        desc[TEAM_NODE as usize] = node;
        Teams { desc, config: [TeamConfig::default(); MAX_TEAMS], members: std::array::from_fn(|_| Vec::new()) }
    }
    /// Entry `j` of member table `row` (as `rshmem_device::coll::member_of` asks for it), -1 past its end.
    pub(crate) fn listed(&self, row: u32, j: i32) -> i32 {
        self.members.get(row as usize).and_then(|m| usize::try_from(j).ok().and_then(|j| m.get(j))).copied().unwrap_or(-1)
    }
    /// Puts team `desc` with `config` into `slot` (its member table too, for a listed team), and writes
    /// the table (member table first, then the descriptor that names it) into this PE's internal area.
    pub(crate) fn install(&mut self, backend: &dyn Backend, slot: usize, desc: TeamDesc, config: TeamConfig, members: Vec<i32>) -> Result<()> {
        if desc.node_list == PES_LISTED {
            debug_assert!(desc.list as usize == slot && members.len() == desc.size as usize && members.len() <= MAX_PES);
            let at = backend.heap_base() + offset_of!(Internal, members) + slot * MAX_PES * size_of::<i32>();
            // SAFETY: the member table row `slot` lies in the internal area at the start of this PE's
            // heap, backed from init on; `members` has at most MAX_PES entries (a team has at most
            // n_pes <= MAX_PES members). No descriptor names the row until `publish` below.
            unsafe { backend.copy_in(at as *mut u8, bytemuck::cast_slice(&members))? };
        }
        self.desc[slot] = desc;
        self.config[slot] = config;
        self.members[slot] = members;
        self.publish(backend)
    }
    /// Frees `slot` and writes the table.
    pub(crate) fn remove(&mut self, backend: &dyn Backend, slot: usize) -> Result<()> {
        self.desc[slot] = TeamDesc::default();
        self.members[slot] = Vec::new();
        self.publish(backend)
    }
    /// Writes this PE's `team_init` announcement (`TeamInitCall`) into its internal area: everything
    /// but the id, then the id, each write complete before the next, so a PE that reads the id (with
    /// one host get) and then the rest (with another) sees this call's values.
    pub(crate) fn announce_init(backend: &dyn Backend, call: TeamInitCall) -> Result<()> {
        let at = backend.heap_base() + offset_of!(Internal, team_init);
        let bytes = bytemuck::bytes_of(&call);
        // SAFETY: the announcement lies in the internal area at the start of this PE's heap, backed from
        // init on; other PEs only read it. `copy_in` returns when the bytes are written.
        unsafe {
            backend.copy_in((at + 8) as *mut u8, &bytes[8..])?;
            backend.copy_in(at as *mut u8, &bytes[..8])
        }
    }
    /// The announcement of a PE that is not inside `team_init`.
    pub(crate) fn no_init() -> TeamInitCall {
        TeamInitCall { uid: TEAM_UID_NONE, ..TeamInitCall::default() }
    }
    /// Writes the table into this PE's internal area.
    pub(crate) fn publish(&self, backend: &dyn Backend) -> Result<()> {
        let at = backend.heap_base() + offset_of!(Internal, teams);
        // SAFETY: the team table lies in the internal area at the start of this PE's heap, backed
        // from init on.
        unsafe { backend.copy_in(at as *mut u8, bytemuck::cast_slice(&self.desc)) }
    }
    /// The mask of team slots free here (bit i: slot i).
    pub(crate) fn free_mask(&self) -> u64 {
        (TEAMS_MIN as usize..MAX_TEAMS).filter(|&i| self.desc[i].valid != TEAM_VALID).fold(0, |m, i| m | 1 << i)
    }
}

