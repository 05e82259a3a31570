//! The p2p transport: PEs of this node, whose heaps are mapped into this process. Device code reaches
//! them with plain loads, stores and atomics at `peer_base[pe] + offset`; host put/get are the
//! platform's copies to the mapped address.
//!
//! The mapping itself belongs to the platform (it owns the memory: memfd segments on the CPU, cuMem
//! granules on the GPU), through the same-node exchange both platforms use (`node::exchange`).

use crate::transport::interface::Transport;
use crate::platform::backend::Backend;
use crate::error::{Error, Result};

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
    unsafe fn putmem_nbi(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        let pe = i32::try_from(pe).map_err(|_| Error::new(format!("PE {pe} out of range")))?;
        // SAFETY: as in putmem, with src unchanged until the next quiet (our caller's contract).
        unsafe { platform.putmem_nbi(dst, src, bytes, pe) }
    }
    unsafe fn getmem_nbi(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        let pe = i32::try_from(pe).map_err(|_| Error::new(format!("PE {pe} out of range")))?;
        // SAFETY: as in getmem, with dst not read before the next quiet (our caller's contract).
        unsafe { platform.getmem_nbi(dst, src, bytes, pe) }
    }
}
