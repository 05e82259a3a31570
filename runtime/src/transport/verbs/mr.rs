//! Memory registration: host memory (`ibv_reg_mr`) and GPU memory, through dma-buf
//! (`cuMemGetHandleForAddressRange` + `ibv_reg_dmabuf_mr`) or else through the peer-memory module
//! (`ibv_reg_mr` on the device address; needs nvidia-peermem), as NVSHMEM registers its heap.
//! Access: local write, remote write, read and atomic.

use super::device::Nic;
use super::gpu;
use crate::log::size_text;
use super::sys::{self, errno_text};
use crate::error::{Error, Result};
use rdma_sys::ibv_mr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// `IBV_ACCESS_LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC`.
pub const ACCESS: i32 = 0x1 | 0x2 | 0x4 | 0x8;

/// How a range was registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Host memory, `ibv_reg_mr`.
    Host,
    /// GPU memory exported as a dma-buf, `ibv_reg_dmabuf_mr`.
    DmaBuf,
    /// GPU memory through the peer-memory kernel module (nvidia-peermem), `ibv_reg_mr`.
    PeerMem,
}

/// A registered memory region, deregistered on drop. Addresses in `[addr, addr + len)` are reachable
/// with `lkey` (local) and `rkey` (remote); the range may start before and end after what was asked
/// for (whole pages, for dma-buf).
pub struct Mr {
    raw: *mut ibv_mr,
    /// The local key: what this process's work requests name the region by.
    pub lkey: u32,
    /// The remote key: what peers' RDMA requests name the region by.
    pub rkey: u32,
    /// Start of the registered range.
    pub addr: u64,
    /// Length of the registered range in bytes.
    pub len: u64,
    /// How the range was registered.
    pub via: Via,
    /// The dma-buf, kept open while registered.
    _dmabuf: Option<OwnedFd>,
    nic: Arc<Nic>,
}

// SAFETY: the MR is immutable after registration; ibv_dereg_mr is thread-safe.
unsafe impl Send for Mr {}
// SAFETY: see Send.
unsafe impl Sync for Mr {}

impl Mr {
    fn new(nic: &Arc<Nic>, raw: *mut ibv_mr, via: Via, dmabuf: Option<OwnedFd>, addr: u64, len: u64) -> Mr {
        // SAFETY: a non-null MR just returned by the library.
        let (lkey, rkey) = unsafe { ((*raw).lkey, (*raw).rkey) };
        Mr { raw, lkey, rkey, addr, len, via, _dmabuf: dmabuf, nic: nic.clone() }
    }

    /// Whether `[addr, addr + len)` lies in the region.
    pub fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr && addr.checked_add(len).is_some_and(|end| end <= self.addr + self.len)
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        if let Ok(v) = sys::verbs() {
            // SAFETY: the MR registered in this PD, deregistered once; its NIC is alive (we hold it).
            let rc = unsafe { (v.ibv_dereg_mr)(self.raw) };
            if rc != 0 {
                crate::log::warn(format!("ibv_dereg_mr on {}: errno {rc}", self.nic.name()));
            }
        }
    }
}

impl Nic {
    /// Registers host memory `[addr, addr + len)`.
    ///
    /// # Safety
    /// The range must stay allocated (and not be remapped) while the returned [`Mr`] lives.
    pub unsafe fn register_host(self: &Arc<Self>, addr: *mut u8, len: usize) -> Result<Mr> {
        let v = sys::verbs()?;
        // SAFETY: the caller's live range in this NIC's PD.
        let mr = unsafe { (v.ibv_reg_mr)(self.pd(), addr.cast(), len, ACCESS) };
        if mr.is_null() {
            return Err(Error::new(format!(
                "ibv_reg_mr on {} for {} of host memory at {addr:p}: {}; is the locked-memory limit (ulimit -l) too low?",
                self.name(),
                size_text(len as u64),
                errno_text()
            )));
        }
        Ok(Mr::new(self, mr, Via::Host, None, addr as u64, len as u64))
    }

    /// Registers GPU memory `[ptr, ptr + len)`: as a dma-buf when the library and the drivers allow,
    /// else through nvidia-peermem. The error names both attempts.
    ///
    /// A CUDA context must be current on the calling thread.
    pub fn register_gpu(self: &Arc<Self>, ptr: u64, len: u64) -> Result<Mr> {
        let dmabuf_err = match self.register_dmabuf(ptr, len) {
            Ok(mr) => return Ok(mr),
            Err(e) => e,
        };
        let v = sys::verbs()?;
        // SAFETY: the caller's GPU range; the peer-memory module resolves device addresses (and the call
        // fails cleanly without it).
        let mr = unsafe { (v.ibv_reg_mr)(self.pd(), ptr as *mut std::ffi::c_void, len as usize, ACCESS) };
        if mr.is_null() {
            return Err(Error::new(format!(
                "registering {} of GPU memory at {ptr:#x} on {} failed both ways: {dmabuf_err}; ibv_reg_mr: {}; \
                 GPU memory needs dma-buf (CUDA driver 515+ with the open kernel modules, Linux 5.12+, rdma-core v34+) \
                 or the nvidia-peermem module (modprobe nvidia-peermem)",
                size_text(len),
                self.name(),
                errno_text()
            )));
        }
        Ok(Mr::new(self, mr, Via::PeerMem, None, ptr, len))
    }

    /// `ibv_reg_dmabuf_mr` of the pages covering the range (NVSHMEM's `reg_mem_handle`).
    fn register_dmabuf(self: &Arc<Self>, ptr: u64, len: u64) -> Result<Mr> {
        let v = sys::verbs()?;
        let reg = v.ibv_reg_dmabuf_mr.ok_or_else(|| Error::new(format!("{} has no ibv_reg_dmabuf_mr (rdma-core older than v34)", sys::LIBIBVERBS)))?;
        let (start, span) = gpu::page_span(ptr, len, gpu::host_page_size());
        let fd = gpu::dmabuf_fd(start, span)?;
        // SAFETY: a dma-buf of the range [start, start+span), registered at iova `start` in our PD.
        let mr = unsafe { reg(self.pd(), 0, span as usize, start, fd.as_raw_fd(), ACCESS) };
        if mr.is_null() {
            return Err(Error::new(format!(
                "ibv_reg_dmabuf_mr on {} for {} of GPU memory: {}; is the kernel older than 5.12, or the NIC driver without dma-buf support?",
                self.name(),
                size_text(span),
                errno_text()
            )));
        }
        Ok(Mr::new(self, mr, Via::DmaBuf, Some(fd), start, span))
    }
}
