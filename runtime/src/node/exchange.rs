//! The same-node exchange of exported memory, written once for both platforms: every PE offers its
//! descriptor (a memfd segment on the CPU, a cuMem granule on the GPU) on the fd server, fetches every
//! node-local peer's, and hands it to the platform to map.

use crate::error::{Error, Result};
use crate::bootstrap::Bootstrap;
use crate::node::fdpass::FdServer;
use std::os::fd::OwnedFd;

/// What a collective operation over the node (the exchange, a platform's heap growth, a transport's
/// registration) needs: the bootstrap, the fd server and the job id.
#[derive(Clone, Copy)]
pub struct Collective<'a> {
    /// The job's bootstrap (barriers, node-local PEs).
    pub boot: &'a Bootstrap,
    /// This PE's fd server.
    pub fds: &'a FdServer,
    /// The job id that names the PEs' fd servers.
    pub job: [u8; 16],
}

/// Fd-server segment ids.
pub const SEG_HEAP: u32 = 0;
/// CUDA heap granules use ids from here on (one per granule).
pub const SEG_GRANULE0: u32 = 16;

/// One exported piece of this PE's memory, for [`exchange`].
pub struct Export<'a> {
    /// Fd-server id (the same on every PE for the same piece).
    pub id: u32,
    /// The descriptor (memfd or cuMem shareable handle); the fd server keeps it until withdrawn.
    pub fd: OwnedFd,
    /// Its size in bytes: every PE's must be the same.
    pub size: u64,
    /// What it is, for messages ("symmetric heap", "heap granule 3").
    pub what: &'a str,
    /// What to set the same everywhere when sizes differ ("RSHMEM_SYMMETRIC_SIZE").
    pub size_var: &'a str,
}

/// Collective over the PEs of the job (`call` names it in barrier errors): offers `mine` on the fd
/// server, fetches every other node-local PE's piece of the same id, checks its size and hands it to
/// `import(pe, fd)` (which maps it). When every PE has imported every peer's, the offer is withdrawn:
/// the mappings keep the memory alive, no descriptor is left behind.
pub fn exchange(c: Collective, call: &str, mine: Export, mut import: impl FnMut(usize, OwnedFd) -> Result<()>) -> Result<()> {
    let me = c.boot.pe();
    let Export { id, fd, size, what, size_var } = mine;
    c.fds.offer(id, fd, size);
    c.boot.barrier(call)?;
    for &pe in c.boot.node_pes() {
        if pe == me {
            continue;
        }
        let (pfd, psize) = c.fds.fetch(c.job, pe, id)?;
        if psize != size {
            return Err(Error::new(format!(
                "PE {pe}'s {what} is {psize} bytes but this PE's is {size}: set the same {size_var} on every PE"
            )));
        }
        import(pe, pfd)?;
    }
    c.boot.barrier(call)?;
    c.fds.withdraw(id);
    Ok(())
}
