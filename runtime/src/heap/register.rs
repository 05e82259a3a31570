//! `nvshmemx_buffer_register` / `unregister`: local (non-symmetric) buffers a program will use as the
//! local side of RMA to PEs on other nodes. The p2p and proxy transports need no registration (NVLink
//! peers read and write the program's memory directly; the proxy moves data with copies that reach any
//! host or device memory of the process); the ibgda transport registers the buffer with its NIC
//! (`Runtime::buffer_register` hands it to every transport). Here are NVSHMEM's checks: the buffer
//! must not overlap the symmetric heap or another registration, and only registered buffers can be
//! unregistered.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Registered buffers: start -> length.
static REGISTERED: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

/// Registers `[addr, addr + len)`; `heap` is the symmetric heap's range, which needs no registration.
pub fn register(addr: usize, len: usize, heap: std::ops::Range<usize>) -> Result<()> {
    let call = "rshmem_buffer_register";
    if addr == 0 || len == 0 {
        return Err(Error::new(format!("{call}: buffer {addr:#x} of {len} bytes: null or empty")));
    }
    let end = addr.checked_add(len).ok_or_else(|| Error::new(format!("{call}: {addr:#x} + {len} bytes overflows")))?;
    if addr < heap.end && heap.start < end {
        return Err(Error::new(format!(
            "{call}: {addr:#x} + {len} bytes overlaps the symmetric heap ({:#x}..{:#x}), which needs no registration",
            heap.start, heap.end
        )));
    }
    let mut r = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    // The registration starting at or before addr, and the first after it, are the only ones that can
    // overlap.
    let before = r.range(..=addr).next_back().map(|(&a, &l)| (a, l));
    let after = r.range(addr..).next().map(|(&a, &l)| (a, l));
    for (a, l) in before.into_iter().chain(after) {
        if a < end && addr < a + l {
            return Err(Error::new(format!(
                "{call}: {addr:#x} + {len} bytes overlaps the registered buffer {a:#x} + {l} bytes (unregister it first)"
            )));
        }
    }
    r.insert(addr, len);
    Ok(())
}

/// Unregisters the buffer registered at `addr`.
pub fn unregister(addr: usize) -> Result<()> {
    let mut r = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    r.remove(&addr)
        .map(|_| ())
        .ok_or_else(|| Error::new(format!("rshmem_buffer_unregister: {addr:#x} is not the start of a registered buffer")))
}

/// The start of every registered buffer, lowest first.
pub fn registered() -> Vec<usize> {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).keys().copied().collect()
}

/// Forgets every registration (finalize).
pub fn clear() {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_are_checked() {
        let heap = 0x1000_0000..0x2000_0000;
        register(0x100, 0x100, heap.clone()).unwrap();
        assert!(register(0x180, 0x10, heap.clone()).unwrap_err().to_string().contains("overlaps the registered buffer 0x100"));
        assert!(register(0x80, 0x81, heap.clone()).unwrap_err().to_string().contains("overlaps the registered"));
        register(0x200, 0x10, heap.clone()).unwrap(); // adjacent, no overlap
        assert!(register(0x1000_0800, 8, heap.clone()).unwrap_err().to_string().contains("symmetric heap"));
        assert!(register(0, 8, heap.clone()).unwrap_err().to_string().contains("null or empty"));
        assert!(unregister(0x180).unwrap_err().to_string().contains("not the start of a registered buffer"));
        unregister(0x100).unwrap();
        unregister(0x200).unwrap();
        assert!(unregister(0x100).is_err());
    }
}
