//! What host threads that serve this PE's device code need from the platform: the remote engine's
//! threads and the emulated NIC use it (`Backend::services` hands it out). Kept apart from the
//! platform's own interface (`platform::backend::Backend`: the heap, copies in and out, quiet), which
//! the runtime uses.
//!
//! Host threads call these concurrently, while the user's kernels may be running and spinning until
//! those threads complete their requests: none of them may wait for the user's work (no legacy
//! default stream, no context synchronize).

use crate::error::Result;

/// The platform's services for host threads that serve device code.
pub trait Services: Send + Sync {
    /// `bytes` of zeroed memory that device code and host threads both read and write, 64-aligned.
    fn host_shared(&self, bytes: usize) -> Result<HostShared>;
    /// `bytes` of zeroed memory that device code reads and updates fastest (GPU memory on CUDA, an
    /// aligned host allocation on the CPU backend), 256-aligned. The host writes it with `copy`.
    fn device_mem(&self, bytes: usize) -> Result<DeviceMem>;
    /// Copies `len` bytes between any two addresses of this process (host memory, this PE's heap, GPU
    /// memory), complete when it returns. Safe to call from several threads at once.
    ///
    /// # Safety
    /// `src` must be readable and `dst` writable for `len` bytes; the ranges must not overlap.
    unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<()>;
    /// Reads the u64 at `addr` (device memory from `device_mem`, which device code updates with
    /// atomics) from a host thread: CUDA: a copy of 8 bytes; CPU backend: an atomic load.
    ///
    /// # Safety
    /// `addr` must be an 8-aligned word of a live `device_mem` allocation.
    unsafe fn load_u64(&self, addr: u64) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: forwarded contract; v is a local of 8 bytes.
        unsafe { self.copy(&mut v as *mut u64 as *mut u8, addr as *const u8, 8)? };
        Ok(v)
    }
    /// Prepares `copy` and the service kernels at the remote engine's setup, so that the first remote
    /// request does not pay for it (CUDA: loading the runtime's module, which JIT-compiles the device
    /// library, can take seconds that a peer's sends would otherwise wait for).
    fn prepare_proxy(&self) -> Result<()> {
        Ok(())
    }
    /// Posts `req` into this PE's proxy ring the way device code does, when the host may not post
    /// itself: on a GPU the ring's `head` is advanced by the GPU's atomics on pinned host memory, and a
    /// CPU atomic on the same word is not atomic with them (CUDA: "atomic operations on mapped
    /// page-locked memory are not atomic from the point of view of the host"). CUDA: a one-thread
    /// kernel (`rshmemi_proxy_request`) on `stream` (None: the platform's own non-blocking stream, then
    /// synchronized, so the request is complete when this returns) that posts the request and waits
    /// for its completion. Returns false where host threads post directly (CPU backend: device code
    /// runs on host threads, and the ring is ordinary memory with ordinary atomics).
    ///
    /// # Safety
    /// `req` must be checked against the heap and route; its local buffer must stay valid until the
    /// request is complete (with a stream: until the stream has run it); `stream` a live stream of this
    /// PE's context (Some(0): the legacy default stream) or None.
    unsafe fn post_request(&self, _req: &rshmem_device::remote::proxy::Request, _stream: Option<u64>) -> Result<bool> {
        Ok(false)
    }
    /// Kernel `name` of the runtime's device library, taking `args` (each a u64 parameter), in one
    /// block of `threads` threads, on a non-blocking stream of its own made now (at setup, so that it
    /// gets a hardware queue of its own and never waits behind a user kernel that waits for it),
    /// launched with [`ServiceKernel::launch`]. None where device code runs on host threads (CPU
    /// backend): the caller runs the same work on a host thread instead.
    fn service_kernel(&self, _name: &'static str, _threads: u32, _args: &[u64]) -> Result<Option<Box<dyn ServiceKernel>>> {
        Ok(None)
    }
}

/// A kernel of the runtime's device library that a host thread (re)starts: `Services::service_kernel`
/// (the remote engine's apply kernel, `transport::proxy::target`; the device-resident NIC model of
/// `transport::ibgda::devnic`).
pub trait ServiceKernel: Send + Sync {
    /// Launches the kernel on its stream (after the previous launch, in stream order).
    fn launch(&self) -> Result<()>;
    /// Whether the last launch still runs; never blocks.
    fn running(&self) -> Result<bool>;
}

/// Memory device code reads and updates fastest (`Services::device_mem`): its device address, freed on
/// drop by whatever made it.
pub struct DeviceMem {
    /// The device address.
    pub addr: u64,
    /// Its size in bytes.
    pub bytes: usize,
    /// Frees the memory when dropped.
    pub(crate) _keep: Box<dyn Send + Sync>,
}

/// Zeroed memory that device code and host threads both read and write (the proxy's request ring and
/// return area, argument blocks of service kernels), 64-byte aligned: pinned, mapped host memory on
/// CUDA (`cuMemHostAlloc(DEVICEMAP | PORTABLE)`), an aligned allocation on the CPU backend. Freed on
/// drop by the platform that made it.
pub struct HostShared {
    host: *mut u8,
    device: u64,
    bytes: usize,
    free: Option<Box<dyn FnOnce(*mut u8) + Send + Sync>>,
}

// SAFETY: the memory is plain bytes shared with device code; HostShared only hands out its addresses
// and frees it once, on drop. Users access it through atomics or their own protocol.
unsafe impl Send for HostShared {}
// SAFETY: as above (no interior state besides the addresses).
unsafe impl Sync for HostShared {}

impl HostShared {
    /// Wraps memory a platform allocated: `host` (this process's address), `device` (the address device
    /// code uses), `bytes`, and how to free it.
    ///
    /// # Safety
    /// `host` must be zeroed, 64-aligned and valid for `bytes` bytes until `free` runs (exactly once,
    /// on drop); `device` must name the same memory for device code.
    pub unsafe fn from_raw(host: *mut u8, device: u64, bytes: usize, free: Box<dyn FnOnce(*mut u8) + Send + Sync>) -> HostShared {
        HostShared { host, device, bytes, free: Some(free) }
    }
    /// The memory's address in this process.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }
    /// The address device code uses for it (the host address on the CPU backend).
    pub fn device_addr(&self) -> u64 {
        self.device
    }
    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }
    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
    /// An aligned, zeroed host allocation (the CPU platform's `host_shared`; device code runs on host
    /// threads there, so the device address is the host address).
    pub fn host_alloc(bytes: usize) -> Result<HostShared> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(64), 64)
            .map_err(|e| crate::error::Error::new(format!("host_shared({bytes} bytes): {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(crate::error::Error::new(format!("host_shared: cannot allocate {bytes} bytes")));
        }
        // SAFETY: a fresh zeroed 64-aligned allocation of layout.size() >= bytes; freed once with the
        // same layout.
        Ok(unsafe { HostShared::from_raw(p, p as u64, bytes, Box::new(move |p| std::alloc::dealloc(p, layout))) })
    }
}

impl Drop for HostShared {
    fn drop(&mut self) {
        if let Some(f) = self.free.take() {
            f(self.host);
        }
    }
}
