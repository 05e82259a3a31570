//! The team table: the predefined teams and every team made by a split, as this PE wrote it into its
//! internal heap area (where device code reads it), with each team's configuration. The runtime holds
//! it; the team API (`coll`) changes it.

use crate::error::Result;
use crate::platform::backend::Backend;
use rshmem_device::state::{Internal, TeamDesc, MAX_TEAMS, TEAMS_MIN, TEAM_NODE, TEAM_SHARED, TEAM_VALID, TEAM_WORLD};
use std::mem::{offset_of, size_of};

/// NVSHMEM's team configuration (`nvshmem_team_config_t`, 64 bytes): kept with the team and given back
/// by `team_get_config`. rshmem has no per-team contexts, so `num_contexts` is only recorded.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TeamConfig {
    pub version: i32,
    pub num_contexts: i32,
    pub uniqueid: u64,
    pub padding: [u8; 48],
}
const _: () = assert!(size_of::<TeamConfig>() == 64);

impl Default for TeamConfig {
    fn default() -> TeamConfig {
        // NVSHMEM's version word: 2 << 16 plus the struct's size.
        TeamConfig { version: (2 << 16) + 64, num_contexts: 0, uniqueid: 0, padding: [0; 48] }
    }
}

/// The host's copy of the team table (what it wrote into the internal area), with each team's config.
pub(crate) struct Teams {
    pub(crate) desc: [TeamDesc; MAX_TEAMS],
    pub(crate) config: [TeamConfig; MAX_TEAMS],
}

impl Teams {
    /// The predefined teams of a PE: the world, and the node teams (TEAM_SHARED and TEAM_NODE, the PEs
    /// of this node, which share memory).
    pub(crate) fn new(me: usize, n: usize, node_me: usize, node_n: usize) -> Teams {
        let mut desc = [TeamDesc::default(); MAX_TEAMS];
        desc[TEAM_WORLD as usize] = TeamDesc { start: 0, stride: 1, size: n as i32, my_index: me as i32, node_list: 0, valid: TEAM_VALID, parent: -1, _pad: 0 };
        let node = TeamDesc { start: 0, stride: 1, size: node_n as i32, my_index: node_me as i32, node_list: 1, valid: TEAM_VALID, parent: -1, _pad: 0 };
        desc[TEAM_SHARED as usize] = node;
        desc[TEAM_NODE as usize] = node;
        Teams { desc, config: [TeamConfig::default(); MAX_TEAMS] }
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

