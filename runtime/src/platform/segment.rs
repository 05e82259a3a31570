//! Shared-memory segments mapped by every PE of a node: a memfd per PE, handed to the node's other PEs
//! through the fd server by the same-node exchange (`node::exchange`). Used for the CPU
//! platform's symmetric heap and for the host-side synchronization area both platforms use.

use crate::node::exchange::Collective;
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use crate::node::fdpass::{memfd, FdServer};
use crate::node::exchange::{exchange, Export};
use std::os::fd::{AsRawFd, OwnedFd};

/// Segments are mapped at addresses aligned to this, so `rshmem_align` can promise absolute
/// alignment up to it on every PE.
pub const SEGMENT_ALIGN: usize = 2 << 20;

/// A shared mapping of a whole segment file at a SEGMENT_ALIGN-aligned address; unmapped on drop.
///
/// Hand-written with libc rather than memmap2 (which the job status board uses): memmap2 lets the
/// kernel choose the address and offers no fixed placement, while a segment must start on a
/// SEGMENT_ALIGN boundary (reserve a larger range, then `MAP_FIXED` the file inside it), so that
/// `rshmem_align` can promise absolute alignment on every PE.
struct Mapping {
    addr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(fd: &OwnedFd, len: usize) -> std::io::Result<Mapping> {
        // Reserve len + alignment of address space, then map the file at the aligned start inside it
        // and give the unused head and tail back.
        let span = len + SEGMENT_ALIGN;
        // SAFETY: an anonymous PROT_NONE reservation touches no existing mapping.
        let r = unsafe { libc::mmap(std::ptr::null_mut(), span, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0) };
        if r == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let start = (r as usize + SEGMENT_ALIGN - 1) & !(SEGMENT_ALIGN - 1);
        // SAFETY: [start, start+len) lies inside our own reservation, so MAP_FIXED replaces only it.
        let m = unsafe {
            libc::mmap(start as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_FIXED, fd.as_raw_fd(), 0)
        };
        if m == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            // SAFETY: releasing our own reservation.
            unsafe { libc::munmap(r, span) };
            return Err(e);
        }
        // SAFETY: head and tail are parts of our reservation outside the file mapping.
        unsafe {
            if start > r as usize {
                libc::munmap(r, start - r as usize);
            }
            let tail = start + len;
            let end = r as usize + span;
            if end > tail {
                libc::munmap(tail as *mut libc::c_void, end - tail);
            }
        }
        Ok(Mapping { addr: start as *mut u8, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own this mapping; nothing uses the heap after the runtime is dropped.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// One segment per PE of the node, each mapped here. `base(pe)` is None for PEs on other nodes.
pub struct Segment {
    maps: Vec<Option<Mapping>>,
    size: usize,
}

// SAFETY: the mappings are plain shared memory; all access goes through raw pointers whose use the
// runtime's protocols (atomics, barriers) order.
unsafe impl Send for Segment {}
// SAFETY: as for Send above: shared access is through raw pointers ordered by the runtime's protocols.
unsafe impl Sync for Segment {}

impl Segment {
    /// Collective over all PEs: every PE creates its segment `id` of `size` bytes and maps every
    /// same-node PE's segment of the same id.
    pub fn create(boot: &Bootstrap, fds: &FdServer, job: [u8; 16], id: u32, size: usize, what: &str) -> Result<Segment> {
        let me = boot.pe();
        let fd = memfd(&format!("rshmem-{what}-pe{me}"), size as u64)?;
        let local = Mapping::new(&fd, size)
            .map_err(|e| Error::os(format!("cannot map this PE's {what} ({size} bytes)"), e))?;
        let mut maps: Vec<Option<Mapping>> = (0..boot.npes()).map(|_| None).collect();
        let export = Export {
            id,
            fd: fd.try_clone().map_err(|e| Error::os("dup", e))?,
            size: size as u64,
            what,
            size_var: crate::config::env::SYMMETRIC_SIZE,
        };
        // Everyone maps everyone's; then the descriptors are no longer needed (the mappings keep the
        // memory alive; when the last process unmaps, it is gone — nothing is left behind).
        exchange(Collective { boot, fds, job }, "rshmem_init", export, |pe, pfd| {
            let m = Mapping::new(&pfd, size)
                .map_err(|e| Error::os(format!("cannot map PE {pe}'s {what} ({size} bytes)"), e))?;
            maps[pe] = Some(m);
            Ok(())
        })?;
        maps[me] = Some(local);
        Ok(Segment { maps, size })
    }

    /// Where PE `pe`'s segment is mapped in this process; None for a PE on another node.
    pub fn base(&self, pe: usize) -> Option<*mut u8> {
        self.maps.get(pe).and_then(|m| m.as_ref()).map(|m| m.addr)
    }
    /// Bytes of each PE's segment.
    pub fn size(&self) -> usize {
        self.size
    }
}
