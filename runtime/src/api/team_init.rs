//! Teams of arbitrary members from a unique id (NVSHMEM's `nvshmemx_team_get_uniqueid` and
//! `nvshmemx_team_init`): the PEs that pass the same id make one team, each at the index it passes, with
//! no parent team and no collective over PEs that are not members.
//!
//! # The rendezvous
//! Each caller announces (id, member count, its index, its free team slots) in its internal area
//! (`Internal::team_init`, id written last), then reads the announcement of every other PE of the job
//! with host gets (id first, then the rest), until it has found the other `npes - 1` members. Every
//! member thus sees the same announcements, and takes the lowest slot free on all members and the
//! same member table (ordered by index). A sync of the new team then says every member has read every
//! announcement, and only then does each clear its own: none is withdrawn while a member may still
//! be looking for it.

use crate::api::coll::{self, TeamConfig};
use crate::config::env;
use crate::error::{Error, Result};
use crate::log;
use crate::runtime::{self, Runtime};
use crate::teams::Teams;
use rshmem_device::state::{Internal, TeamDesc, TeamInitCall, MAX_TEAMS, PES_LISTED, TEAM_UID_NONE, TEAM_VALID};
use std::mem::{offset_of, size_of};
use std::time::{Duration, Instant};

/// A fresh team unique id (never NVSHMEM's invalid id, all ones), for [`team_init`]: one PE gets it and
/// hands it to the others (through symmetric memory, MPI, ...).
pub fn team_get_uniqueid() -> Result<u64> {
    runtime::get("rshmem_team_get_uniqueid")?;
    loop {
        let r = runtime::random16();
        let id = u64::from_le_bytes(r[..8].try_into().unwrap()) ^ u64::from_le_bytes(r[8..].try_into().unwrap());
        // 0 is excluded too: it is what a PE's announcement reads as before rshmem_init wrote it.
        if id != TEAM_UID_NONE && id != 0 {
            return Ok(id);
        }
    }
}

/// Collective over the `npes` PEs that call it with the same `config.uniqueid` (and no others): makes a
/// team of them in which this PE is member `index`. Returns the new team's handle.
pub fn team_init(config: TeamConfig, npes: i32, index: i32) -> Result<i32> {
    let call = "rshmem_team_init";
    let rt = runtime::get(call)?;
    let uid = config.uniqueid;
    let n = rt.npes() as i32;
    if uid == TEAM_UID_NONE {
        return Err(Error::new(format!(
            "{call}: the config's uniqueid is not set (all ones, NVSHMEM_TEAM_CONFIG_INITIALIZER's value): get one with nvshmemx_team_get_uniqueid on one PE, hand it to the members, and pass NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID"
        )));
    }
    if npes < 1 || npes > n {
        return Err(Error::new(format!("{call}: npes {npes} out of range: a team has 1 to n_pes ({n}) members")));
    }
    if index < 0 || index >= npes {
        return Err(Error::new(format!("{call}: pe_idx_in_team {index} out of range for a team of {npes} PEs (0 to {})", npes - 1)));
    }
    rt.on_board(call, || {
        let free = rt.teams.lock().unwrap_or_else(|e| e.into_inner()).free_mask();
        Teams::announce_init(rt.backend(), TeamInitCall { uid, npes, index, free, ..TeamInitCall::default() })?;
        let found = rendezvous(&rt, call, uid, npes, index, free);
        let made = found.and_then(|(members, mask)| install(&rt, call, config, members, index, mask));
        // On success after the team's sync (every member has read this PE's announcement); on failure
        // at once: the error ends this PE's part, and a member still looking for it is told by its own
        // wait's end (RSHMEM_WAIT_TIMEOUT, or rshmrun's --timeout).
        let cleared = Teams::announce_init(rt.backend(), Teams::no_init());
        let team = made?;
        cleared?;
        Ok(team)
    })
}

/// Finds the other members of team `uid`: returns the member table (job PEs by index) and the AND of
/// every member's free slots.
fn rendezvous(rt: &Runtime, call: &str, uid: u64, npes: i32, index: i32, free: u64) -> Result<(Vec<i32>, u64)> {
    let me = rt.pe();
    let mut members = vec![-1i32; npes as usize];
    members[index as usize] = me as i32;
    let mut mask = free;
    let mut have = 1;
    let mut seen = vec![false; rt.npes()];
    seen[me] = true;
    let at = rt.backend().heap_base() + offset_of!(Internal, team_init);
    let limit = rt.config.wait_timeout;
    let start = Instant::now();
    let mut warned = false;
    let mut backoff = rshmem_common::Backoff::new();
    while have < npes {
        let before = have;
        let unseen: Vec<usize> = (0..seen.len()).filter(|&pe| !seen[pe]).collect();
        for pe in unseen {
            let mut id = [0u8; 8];
            // SAFETY: `id` is 8 writable bytes; `at` is the announcement's symmetric address.
            unsafe { rt.get_internal(call, id.as_mut_ptr(), at as *const u8, 8, pe as i32)? };
            if u64::from_le_bytes(id) != uid {
                continue;
            }
            let mut rest = [0u8; size_of::<TeamInitCall>()];
            // SAFETY: as above, for the whole announcement; read after the id (which its PE wrote
            // last), so these are the values of the call that id belongs to.
            unsafe { rt.get_internal(call, rest.as_mut_ptr(), at as *const u8, rest.len(), pe as i32)? };
            let c: TeamInitCall = bytemuck::pod_read_unaligned(&rest);
            if c.uid != uid {
                continue; // that PE left this call between the two reads: it was not one of ours
            }
            if c.npes != npes {
                return Err(Error::new(format!("{call}: PEs disagree on the team's size: PE {me} passed npes {npes}, PE {pe} passed npes {} (same uniqueid {uid:#x})", c.npes)));
            }
            if c.index < 0 || c.index >= npes {
                return Err(Error::new(format!("{call}: PE {pe} announced index {} for a team of {npes} PEs", c.index)));
            }
            let slot = &mut members[c.index as usize];
            if *slot >= 0 {
                return Err(Error::new(format!(
                    "{call}: PEs {} and {pe} both passed pe_idx_in_team {} for the team of uniqueid {uid:#x}; each member needs its own index",
                    *slot, c.index
                )));
            }
            *slot = pe as i32;
            seen[pe] = true;
            mask &= c.free;
            have += 1;
            if have == npes {
                break;
            }
        }
        if have == npes {
            break;
        }
        let waited = start.elapsed();
        let late = limit.filter(|&l| waited >= l);
        if late.is_some() || (!warned && waited >= Duration::from_secs(10)) {
            let missing: Vec<String> = (0..npes).filter(|&i| members[i as usize] < 0).map(|i| i.to_string()).collect();
            let msg = format!(
                "{call}: after {:.1} s, {have} of the {npes} members of the team of uniqueid {uid:#x} have arrived; missing the members of index {} (do they call rshmem_team_init / nvshmemx_team_init with the same uniqueid and npes?)",
                waited.as_secs_f64(),
                missing.join(", ")
            );
            if let Some(l) = late {
                return Err(Error::new(format!("{msg}; gave up ({}={})", env::WAIT_TIMEOUT, l.as_secs())));
            }
            log::warn(msg);
            warned = true;
        }
        // rshmem's one waiting policy (spin, yield, sleep), started over whenever a member arrives.
        if have > before {
            backoff.reset();
        }
        backoff.snooze();
    }
    Ok((members, mask))
}

/// Installs the team (the lowest slot free on every member), then syncs it.
fn install(rt: &Runtime, call: &str, config: TeamConfig, members: Vec<i32>, index: i32, mask: u64) -> Result<i32> {
    let Some(slot) = (0..MAX_TEAMS).find(|&i| mask >> i & 1 == 1) else {
        return Err(Error::new(format!(
            "{call}: no team slot is free on every member (at most {MAX_TEAMS} teams at once, the predefined ones included); destroy teams no longer used"
        )));
    };
    let desc = TeamDesc { start: 0, stride: 1, size: members.len() as i32, my_index: index, node_list: PES_LISTED, valid: TEAM_VALID, parent: -1, list: slot as u32 };
    rt.teams.lock().unwrap_or_else(|e| e.into_inner()).install(rt.backend(), slot, desc, config, members)?;
    if let Err(e) = coll::team_sync(slot as i32) {
        // Leave no half-made team behind on this PE.
        let _ = rt.teams.lock().unwrap_or_else(|e| e.into_inner()).remove(rt.backend(), slot);
        return Err(e);
    }
    Ok(slot as i32)
}

impl coll::Team {
    /// A fresh unique id for [`Self::from_unique_id`] (see [`team_get_uniqueid`]).
    pub fn unique_id() -> Result<u64> {
        team_get_uniqueid()
    }
    /// Collective over the `npes` PEs that pass the same `uid`: the team of them, with this PE as
    /// member `index` (see [`team_init`]).
    pub fn from_unique_id(uid: u64, npes: i32, index: i32) -> Result<coll::Team> {
        team_init(TeamConfig { uniqueid: uid, ..TeamConfig::default() }, npes, index).map(coll::Team)
    }
}
