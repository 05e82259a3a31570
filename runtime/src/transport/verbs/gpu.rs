//! The CUDA side of a real NIC: GPU memory for the NIC's queues, dma-buf file descriptors for GPU
//! ranges (`cuMemGetHandleForAddressRange`), and mapping NIC registers (a UAR) into the GPU's address
//! space (`cuMemHostRegister` with `CU_MEMHOSTREGISTER_IOMEMORY`, then `cuMemHostGetDevicePointer`).
//!
//! The driver is cudarc's run-time-loaded one; every call here needs a current CUDA context on the
//! calling thread (the runtime's, or `crate::platform::cuda::driver::bind_primary`).

use crate::platform::cuda::driver::check;
use crate::error::{Error, Result};
use cudarc::driver::sys as cu;
use std::os::fd::{FromRawFd, OwnedFd};

/// Whether the CUDA driver library is there (every function below needs it).
pub fn ready() -> Result<()> {
    // SAFETY: probing for the library has no preconditions.
    if unsafe { cu::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::new("the CUDA driver (libcuda.so) is not installed"))
    }
}

/// The host's page size.
pub fn host_page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// The page-aligned range covering `[addr, addr + len)`: `(start, len)` with `start` a multiple of
/// `page` (a power of two) and `addr - start < page`. A dma-buf export and a host registration take
/// whole pages; the object then sits at `addr - start` inside the range.
pub fn page_span(addr: u64, len: u64, page: u64) -> (u64, u64) {
    debug_assert!(page.is_power_of_two());
    let start = addr & !(page - 1);
    let end = (addr + len.max(1)).div_ceil(page) * page;
    (start, end - start)
}

/// A GPU allocation aligned to `align` bytes inside a larger `cuMemAlloc` (NVSHMEM's
/// `ibgda_gpu_mem_alloc`), freed on drop.
pub struct GpuMem {
    base: cu::CUdeviceptr,
    ptr: u64,
    len: usize,
}

impl GpuMem {
    /// `len` bytes at an `align`-byte boundary (a power of two), every byte set to `fill`, with
    /// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` (memory operations on it are synchronous, as the NIC and
    /// the GPU both access it).
    pub fn alloc(len: usize, align: usize, fill: u8) -> Result<GpuMem> {
        ready()?;
        let total = len + align - 1;
        let mut base: cu::CUdeviceptr = 0;
        // SAFETY: out-pointer to a local; freed in Drop (or below on error).
        check(unsafe { cu::cuMemAlloc_v2(&mut base, total) }, &format!("cuMemAlloc of {} for NIC queues", crate::log::size_text(total as u64)))?;
        let mem = GpuMem { base, ptr: base.next_multiple_of(align as u64), len };
        let mut one: std::ffi::c_uint = 1;
        check(
            // SAFETY: the attribute value is a c_uint as the driver documents; `base` is live.
            unsafe { cu::cuPointerSetAttribute((&mut one as *mut std::ffi::c_uint).cast(), cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, base) },
            "cuPointerSetAttribute(SYNC_MEMOPS)",
        )?;
        // SAFETY: the whole allocation is live and ours.
        check(unsafe { cu::cuMemsetD8_v2(base, fill, total) }, "cuMemsetD8")?;
        // cuMemsetD8 on device memory may return before it ran (it is queued on the legacy stream,
        // which non-blocking streams do not wait for: seen on an H100 with the runtime's own tables):
        // the queues must hold `fill` before the NIC or a kernel reads them.
        // SAFETY: a current context on this thread (the module's precondition).
        check(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize after cuMemsetD8")?;
        Ok(mem)
    }

    /// The aligned device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The length asked for, in bytes, from [`ptr`](Self::ptr).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the length is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for GpuMem {
    fn drop(&mut self) {
        // SAFETY: the allocation made in `alloc`, freed once; the NIC's registration of it (umem) was
        // dropped before (owners declare the registration first).
        unsafe { cu::cuMemFree_v2(self.base) };
    }
}

/// A dma-buf file descriptor for the GPU range `[ptr, ptr + len)` (page-aligned start and length, as
/// `cuMemGetHandleForAddressRange` requires).
pub fn dmabuf_fd(ptr: u64, len: u64) -> Result<OwnedFd> {
    ready()?;
    let mut fd: std::ffi::c_int = -1;
    // SAFETY: the handle out-parameter is an int for DMA_BUF_FD; the range is the caller's GPU memory.
    let r = unsafe {
        cu::cuMemGetHandleForAddressRange(
            (&mut fd as *mut std::ffi::c_int).cast(),
            ptr,
            len as usize,
            cu::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
            0,
        )
    };
    check(r, &format!("cuMemGetHandleForAddressRange(DMA_BUF_FD) for {} at {ptr:#x}", crate::log::size_text(len)))
        .map_err(|e| e.context("the GPU driver cannot export dma-buf (needs driver 515+ with the open kernel modules, and Linux 5.12+)"))?;
    // SAFETY: the driver returned a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Host I/O memory (a NIC's UAR page) mapped into the GPU's address space; unmapped on drop.
pub struct IoMap {
    /// The page-aligned host range registered.
    host: u64,
    len: u64,
    /// Its device address.
    dev: u64,
}

impl IoMap {
    /// Maps the pages covering `[addr, addr + len)` (`cuMemHostRegister` with PORTABLE | DEVICEMAP |
    /// IOMEMORY, then `cuMemHostGetDevicePointer`).
    pub fn map(addr: u64, len: u64) -> Result<IoMap> {
        ready()?;
        let (host, span) = page_span(addr, len, host_page_size());
        let flags = cu::CU_MEMHOSTREGISTER_PORTABLE | cu::CU_MEMHOSTREGISTER_DEVICEMAP | cu::CU_MEMHOSTREGISTER_IOMEMORY;
        // SAFETY: the range is a live mapping of the NIC's registers (the caller's UAR), unregistered in
        // Drop before the UAR is freed.
        check(unsafe { cu::cuMemHostRegister_v2(host as *mut std::ffi::c_void, span as usize, flags) }, "cuMemHostRegister(IOMEMORY) of the NIC doorbell")
            .map_err(|e| {
                e.context(
                    "the GPU cannot map the NIC's doorbell page (needs the nvidia module option NVreg_EnableStreamMemOPs=1, \
                     and PeerMappingOverride=1 in NVreg_RegistryDwords)",
                )
            })?;
        let map = IoMap { host, len: span, dev: 0 };
        let mut dev: cu::CUdeviceptr = 0;
        // SAFETY: out-pointer to a local; the host range was just registered.
        check(unsafe { cu::cuMemHostGetDevicePointer_v2(&mut dev, host as *mut std::ffi::c_void, 0) }, "cuMemHostGetDevicePointer of the NIC doorbell")?;
        Ok(IoMap { dev, ..map })
    }

    /// The device address of host address `addr` inside the mapped range.
    pub fn device_addr(&self, addr: u64) -> u64 {
        assert!(addr >= self.host && addr < self.host + self.len, "{addr:#x} is outside the mapped range");
        self.dev + (addr - self.host)
    }
}

impl Drop for IoMap {
    fn drop(&mut self) {
        // SAFETY: the range registered in `map`, unregistered once.
        unsafe { cu::cuMemHostUnregister(self.host as *mut std::ffi::c_void) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_spans_cover_the_object() {
        // A UAR's 8-byte doorbell at offset 0x800 of its page.
        assert_eq!(page_span(0x7f00_1234_5800, 8, 4096), (0x7f00_1234_5000, 4096));
        // A BlueFlame register pair (2 x 256 bytes) at 0x800 stays in one page.
        assert_eq!(page_span(0x7f00_0000_0800, 512, 4096), (0x7f00_0000_0000, 4096));
        // A GPU range straddling a page boundary takes both pages; an aligned one exactly itself.
        assert_eq!(page_span(0x1_0000_0ff0, 0x20, 4096), (0x1_0000_0000, 0x2000));
        assert_eq!(page_span(0x20_0000, 1 << 30, 65536), (0x20_0000, 1 << 30));
        // 64 KiB pages (aarch64 hosts).
        assert_eq!(page_span(0x12_3456, 10, 65536), (0x12_0000, 65536));
        // Empty ranges still cover their address.
        assert_eq!(page_span(0x5000, 0, 4096), (0x5000, 4096));
        for (addr, len) in [(0u64, 1u64), (4095, 2), (12345, 67890), (1 << 40, 4096)] {
            let (s, l) = page_span(addr, len, 4096);
            assert!(s <= addr && addr + len <= s + l && s % 4096 == 0 && l % 4096 == 0 && addr - s < 4096);
        }
    }

    #[test]
    fn without_a_gpu_driver_the_calls_say_so() {
        if ready().is_ok() {
            return; // a machine with the driver: nothing to check here
        }
        let e = GpuMem::alloc(4096, 65536, 0).err().unwrap().to_string();
        assert!(e.contains("libcuda.so") && e.contains("not installed"), "{e}");
        assert!(dmabuf_fd(0x1000, 4096).unwrap_err().to_string().contains("libcuda.so"));
        assert!(IoMap::map(0x1000, 8).err().unwrap().to_string().contains("libcuda.so"));
    }
}
