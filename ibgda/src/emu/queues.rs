//! A QP's queues in host memory, laid out as on hardware, for the emulator and the CPU backend: the
//! send queue, the doorbell record, a UAR-like doorbell page, the CQ with its doorbell record, and the
//! posting counters. Gives the posting side its [`QpDesc`] and the NIC its [`QpSetup`].

use std::prelude::rust_2021::*;
use super::nic::{CqSetup, QpSetup};
use crate::mlx5;
use crate::qp::{self, QpCounters, QpDesc, QP_CQ_COLLAPSED};
use std::alloc::{alloc_zeroed, dealloc, Layout};

/// Zeroed, aligned heap memory.
struct Buf {
    ptr: *mut u8,
    layout: Layout,
}

impl Buf {
    fn new(len: usize, align: usize) -> Buf {
        let layout = Layout::from_size_align(len.max(1), align).expect("queue buffer layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Buf { ptr, layout }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// The shape of a [`HostQp`].
#[derive(Clone, Copy, Debug)]
pub struct HostQpConfig {
    pub qpn: u32,
    /// log2 of the send queue's WQEBBs (at most 15).
    pub log_sq: u32,
    /// log2 of the CQ's entries (a collapsed CQ uses slot 0 only).
    pub log_cq: u32,
    /// NVSHMEM's collapsed CQ; otherwise a normal CQ with owner bits and an overrun check.
    pub collapsed: bool,
    /// First WQE count ([`FaultConfig::start_index`](super::fault::FaultConfig::start_index)).
    pub start: u64,
    /// Doorbell batching ([`QpDesc::batch`]).
    pub batch: u32,
}

impl Default for HostQpConfig {
    fn default() -> Self {
        HostQpConfig { qpn: 0x100, log_sq: 7, log_cq: 7, collapsed: true, start: 0, batch: 32 }
    }
}

/// One QP's queues in host memory. Keep it alive as long as the NIC (or a NIC thread) that was given
/// its [`setup`](Self::setup) runs, and as long as anything posts through its [`desc`](Self::desc).
pub struct HostQp {
    cfg: HostQpConfig,
    sq: Buf,
    dbr: Buf,
    uar: Buf,
    cq: Buf,
    cq_dbr: Buf,
    counters: Buf,
}

// SAFETY: the buffers are plain heap memory; everything that shares them (posting threads, the NIC)
// accesses them through atomics as the posting code and the emulator do.
unsafe impl Send for HostQp {}
// SAFETY: as above.
unsafe impl Sync for HostQp {}

impl HostQp {
    pub fn new(cfg: HostQpConfig) -> HostQp {
        let cfg = HostQpConfig { log_sq: cfg.log_sq.min(15), log_cq: cfg.log_cq.min(24), ..cfg };
        let q = HostQp {
            cfg,
            sq: Buf::new(mlx5::WQEBB << cfg.log_sq, 4096),
            dbr: Buf::new(64, 64),
            uar: Buf::new(mlx5::UAR_PAGE, 4096),
            cq: Buf::new(mlx5::CQE_SIZE << cfg.log_cq, 4096),
            cq_dbr: Buf::new(64, 64),
            counters: Buf::new(std::mem::size_of::<QpCounters>(), 64),
        };
        q.reset();
        q
    }

    /// Puts the queues and counters back in their initial state at `cfg.start` (with the NIC stopped
    /// or its QP reset to the same start).
    pub fn reset(&self) {
        self.reset_at(self.cfg.start)
    }

    /// As [`reset`](Self::reset), at WQE count `start`.
    pub fn reset_at(&self, start: u64) {
        // SAFETY: the buffers are this QP's, of the sizes allocated in `new`; nobody uses them now
        // (the caller's contract for a reset).
        unsafe {
            std::ptr::write_bytes(self.sq.ptr, 0, mlx5::WQEBB << self.cfg.log_sq);
            qp::init_dbr(self.dbr.ptr, start);
            qp::init_cq(self.cq.ptr, self.cfg.log_cq, self.cfg.collapsed, start);
            std::ptr::write_bytes(self.cq_dbr.ptr, 0, 8);
            std::ptr::write_bytes(self.uar.ptr, 0, mlx5::UAR_PAGE);
            std::ptr::write(self.counters.ptr as *mut QpCounters, QpCounters::new(start));
        }
    }

    pub fn config(&self) -> HostQpConfig {
        self.cfg
    }

    /// The doorbell register: the first BlueFlame register of the UAR page.
    pub fn doorbell(&self) -> *mut u8 {
        // SAFETY: BF_OFFSET + 8 is inside the 4 KiB page.
        unsafe { self.uar.ptr.add(mlx5::BF_OFFSET) }
    }

    /// The send queue's first byte.
    pub fn sq(&self) -> *mut u8 {
        self.sq.ptr
    }

    /// The CQ's first byte.
    pub fn cq(&self) -> *mut u8 {
        self.cq.ptr
    }

    /// The QP doorbell record.
    pub fn dbr(&self) -> *mut u8 {
        self.dbr.ptr
    }

    /// The posting counters.
    pub fn counters(&self) -> QpCounters {
        // SAFETY: an aligned QpCounters; read for diagnostics (a racy snapshot while posting runs).
        unsafe { std::ptr::read_volatile(self.counters.ptr as *const QpCounters) }
    }

    /// What the posting side needs.
    pub fn desc(&self) -> QpDesc {
        QpDesc {
            sq: self.sq.ptr as u64,
            dbr: self.dbr.ptr as u64,
            db: self.doorbell() as u64,
            cq: self.cq.ptr as u64,
            cq_dbr: if self.cfg.collapsed { 0 } else { self.cq_dbr.ptr as u64 },
            counters: self.counters.ptr as u64,
            qpn: self.cfg.qpn,
            log_sq: self.cfg.log_sq,
            log_cq: self.cfg.log_cq,
            flags: if self.cfg.collapsed { QP_CQ_COLLAPSED } else { 0 },
            batch: self.cfg.batch,
            reserved: 0,
        }
    }

    /// What the NIC needs ([`Nic::add_qp`](super::nic::Nic::add_qp)).
    pub fn setup(&self) -> QpSetup {
        QpSetup {
            qpn: self.cfg.qpn,
            sq: self.sq.ptr,
            log_sq: self.cfg.log_sq,
            dbr: self.dbr.ptr,
            db: self.doorbell(),
            cq: CqSetup {
                base: self.cq.ptr,
                log_n: self.cfg.log_cq,
                collapsed: self.cfg.collapsed,
                dbr: if self.cfg.collapsed { std::ptr::null() } else { self.cq_dbr.ptr },
                overrun_ignore: self.cfg.collapsed,
            },
            start: self.cfg.start,
        }
    }
}
