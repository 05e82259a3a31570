//! The p2p transport: PEs of this node, whose heaps are mapped into this process. Device code reaches
//! them with plain loads, stores and atomics at `peer_base[pe] + offset`; host put/get are the
//! platform's copies to the mapped address.
//!
//! The mapping itself belongs to the platform (it owns the memory: memfd segments on the CPU, cuMem
//! granules on the GPU); what the two share is the exchange, written once here: every PE offers its
//! descriptor on the fd server, fetches every node-local peer's, and hands it to the platform to map.

use super::Transport;
use crate::backend::{Backend, Collective};
use crate::error::{Error, Result};
use std::os::fd::OwnedFd;

/// The p2p transport: where each PE's heap is mapped here (0: not mapped, another node).
pub struct P2p {
    bases: Vec<usize>,
}

impl P2p {
    /// `bases[pe]`: the address of PE `pe`'s heap in this process, 0 for PEs this PE cannot map.
    pub fn new(bases: Vec<usize>) -> P2p {
        P2p { bases }
    }
}

impl Transport for P2p {
    fn name(&self) -> &'static str {
        "p2p"
    }
    fn reaches(&self, pe: usize) -> bool {
        self.peer_base(pe) != 0
    }
    fn peer_base(&self, pe: usize) -> usize {
        self.bases.get(pe).copied().unwrap_or(0)
    }
    unsafe fn putmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        let pe = i32::try_from(pe).map_err(|_| Error::new(format!("PE {pe} out of range")))?;
        // SAFETY: our caller's contract (src readable, dst range inside the heap, pe reached here, so
        // mapped) is the platform's.
        unsafe { platform.putmem(dst, src, bytes, pe) }
    }
    unsafe fn getmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        let pe = i32::try_from(pe).map_err(|_| Error::new(format!("PE {pe} out of range")))?;
        // SAFETY: as in putmem, with dst writable.
        unsafe { platform.getmem(dst, src, bytes, pe) }
    }
}

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
