//! The platform: what the CPU or the CUDA backend provides to the runtime — where kernels run and the
//! heap lives, copies, zeroing, quiet, and the heap's memory exported as descriptors (memfd segments,
//! cuMem granules) that the same-node exchange (`node::exchange`) hands to node-local peers, which map
//! them. Which PEs are reached, and how, is the transports' business (`crate::transport`): the runtime
//! builds the p2p transport from `peer_base` and asks the transports per PE. What a host thread that
//! serves device code needs (the proxy, the emulated NIC) is the platform's other interface,
//! [`Services`], handed out by [`Backend::services`].
//!
//! The platforms are `platform::cpu` and `platform::cuda`.

use crate::error::Result;
use crate::node::exchange::Collective;
use crate::platform::services::Services;
use std::sync::Arc;

/// A platform backend (CPU or CUDA): where this PE's heap lives and its device work runs. The runtime
/// makes one at init and holds it for the job.
pub trait Backend: Send + Sync + std::any::Any {
    /// "cpu" or "cuda", for messages and checks.
    fn name(&self) -> &'static str;
    /// The backend as `Any`, to reach the concrete type (`cuda::with_backend`).
    fn as_any(&self) -> &dyn std::any::Any;
    /// Address of this PE's heap in this process (device address on GPUs).
    fn heap_base(&self) -> usize;
    /// The heap's reserved size in bytes: the symmetric size plus the internal area (on GPUs rounded
    /// up to whole granules).
    fn heap_size(&self) -> usize;
    /// Where PE `pe`'s heap is mapped here (by the p2p exchange), 0 when not mapped. The runtime reads
    /// it once, to build the p2p transport.
    fn peer_base(&self, pe: usize) -> usize;
    /// Collective: makes `[0, upto)` of every node-local heap usable here (GPU heap growth: new
    /// granules, exchanged with node-local peers through `node::exchange`). Called by every PE
    /// with the same `upto` inside the collective allocation (`Runtime::grow`, which then registers the
    /// new range with every transport).
    fn ensure_backed(&self, _c: Collective, _upto: usize) -> Result<()> {
        Ok(())
    }
    /// How many bytes from the heap's start are backed (usable) now: the whole heap on the CPU.
    fn backed(&self) -> usize {
        self.heap_size()
    }
    /// Zeroes `len` bytes at heap offset `off` of this PE (calloc). An error, writing nothing, when the
    /// range is not inside the heap (on GPUs: inside its backed part).
    fn zero(&self, off: usize, len: usize) -> Result<()>;
    /// Completes this PE's outstanding device work that touches the heap (host view).
    fn quiet(&self) -> Result<()>;
    /// Host-initiated blocking put/get to a mapped (node-local) PE (dst resp. src symmetric, already
    /// range-checked): the p2p transport's host copies.
    ///
    /// # Safety
    /// The local buffer must be valid for `bytes`; the symmetric range must lie in the heap.
    unsafe fn putmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()>;
    /// # Safety
    /// As `putmem`.
    unsafe fn getmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()>;
    /// `putmem` that may complete later, at this PE's next `quiet` (a host `putmem_nbi`): CUDA queues
    /// the copy on its host-RMA stream. The default is the blocking copy.
    ///
    /// # Safety
    /// As `putmem`; `src` stays valid and unchanged until the next `quiet`.
    unsafe fn putmem_nbi(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.putmem(dst, src, bytes, pe) }
    }
    /// `getmem` that may complete later, at this PE's next `quiet`.
    ///
    /// # Safety
    /// As `getmem`; `dst` is not read before the next `quiet`.
    unsafe fn getmem_nbi(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.getmem(dst, src, bytes, pe) }
    }
    /// Copies between host memory and this PE's memory (heap or, on GPUs, any device memory).
    ///
    /// # Safety
    /// `dst` / `src` must be valid for `len` bytes in this PE's memory.
    unsafe fn copy_in(&self, dst: *mut u8, src: &[u8]) -> Result<()>;
    /// # Safety
    /// As `copy_in`.
    unsafe fn copy_out(&self, dst: &mut [u8], src: *const u8) -> Result<()>;
    /// Writes the device state wherever device code reads it (GPU: every registered module).
    fn publish_state(&self, _state: &rshmem_device::state::DeviceState) -> Result<()> {
        Ok(())
    }
    /// What host threads that serve this PE's device code (the proxy, the emulated NIC) use: memory
    /// both sides see, copies, and posting or applying operations the way device code does.
    fn services(&self) -> Arc<dyn Services>;
}
