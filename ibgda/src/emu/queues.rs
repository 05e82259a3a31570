//! A QP's queues in host memory, laid out as on hardware, for the emulator and the CPU backend: the
//! send queue, the doorbell record, a UAR-like doorbell page, the CQ with its doorbell record, and the
//! posting counters ([`HostQueues`]). Gives the posting side its [`QpDesc`] and the NIC its
//! [`QpSetup`]. (Not the runtime's verbs QP: this is memory only, driven by the posting code and the
//! emulated NIC.)

use std::prelude::rust_2021::*;
use super::setup::{CqSetup, QpSetup};
use crate::mlx5;
use crate::qp::{self, QpCounters, QpDesc, QP_CQ_COLLAPSED};
use core::mem::offset_of;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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

/// The shape of a [`HostQueues`].
#[derive(Clone, Copy, Debug)]
pub struct HostQueuesConfig {
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

impl Default for HostQueuesConfig {
    fn default() -> Self {
        HostQueuesConfig { qpn: 0x100, log_sq: 7, log_cq: 7, collapsed: true, start: 0, batch: 32 }
    }
}

/// One QP's queues in host memory. Keep it alive as long as the NIC (or a NIC thread) that was given
/// its [`setup`](Self::setup) runs, and as long as anything posts through its [`desc`](Self::desc).
pub struct HostQueues {
    cfg: HostQueuesConfig,
    sq: Buf,
    dbr: Buf,
    uar: Buf,
    cq: Buf,
    cq_dbr: Buf,
    counters: Buf,
}

// SAFETY: the buffers are plain heap memory owned by the value (freed on drop, never moved); the
// pointers are not tied to a thread.
unsafe impl Send for HostQueues {}
// SAFETY: what `&self` does with the buffers from several threads is atomic or does not touch their
// contents: `counters` reads the counters with atomic loads (the posting code accesses them only
// atomically), the other safe methods only hand out addresses; the non-atomic writes of a reset are
// behind the `unsafe` `reset`/`reset_at`, whose callers guarantee that nobody else uses the queues.
unsafe impl Sync for HostQueues {}

impl HostQueues {
    pub fn new(cfg: HostQueuesConfig) -> HostQueues {
        let cfg = HostQueuesConfig { log_sq: cfg.log_sq.min(15), log_cq: cfg.log_cq.min(24), ..cfg };
        let q = HostQueues {
            cfg,
            sq: Buf::new(mlx5::WQEBB << cfg.log_sq, 4096),
            dbr: Buf::new(64, 64),
            uar: Buf::new(mlx5::UAR_PAGE, 4096),
            cq: Buf::new(mlx5::CQE_SIZE << cfg.log_cq, 4096),
            cq_dbr: Buf::new(64, 64),
            counters: Buf::new(std::mem::size_of::<QpCounters>(), 64),
        };
        // SAFETY: the buffers were just allocated; nobody else has their addresses yet.
        unsafe { q.reset() };
        q
    }

    /// Puts the queues and counters back in their initial state at `cfg.start` (with the NIC's QP
    /// reset to the same start before it runs again).
    ///
    /// # Safety
    /// Nothing else may access the queues while this runs: no NIC (or NIC thread) given this QP's
    /// [`setup`](Self::setup) may be running, and no thread may be posting or polling through its
    /// [`desc`](Self::desc) or reading [`counters`](Self::counters). The reset's plain stores are
    /// not atomic.
    pub unsafe fn reset(&self) {
        // SAFETY: the caller's contract.
        unsafe { self.reset_at(self.cfg.start) }
    }

    /// As [`reset`](Self::reset), at WQE count `start`.
    ///
    /// # Safety
    /// As [`reset`](Self::reset).
    pub unsafe fn reset_at(&self, start: u64) {
        // SAFETY: the buffers are this QP's, of the sizes allocated in `new`; nobody else accesses them
        // while this runs (the caller's contract).
        unsafe {
            std::ptr::write_bytes(self.sq.ptr, 0, mlx5::WQEBB << self.cfg.log_sq);
            qp::init_dbr(self.dbr.ptr, start);
            qp::init_cq(self.cq.ptr, self.cfg.log_cq, self.cfg.collapsed, start);
            std::ptr::write_bytes(self.cq_dbr.ptr, 0, 8);
            std::ptr::write_bytes(self.uar.ptr, 0, mlx5::UAR_PAGE);
            std::ptr::write(self.counters.ptr as *mut QpCounters, QpCounters::new(start));
        }
    }

    pub fn config(&self) -> HostQueuesConfig {
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

    /// The posting counters, each read with an atomic load (a snapshot that may mix moments while
    /// posting runs: for diagnostics and tests).
    pub fn counters(&self) -> QpCounters {
        let p = self.counters.ptr;
        // SAFETY: an 8-aligned u64 of this QP's QpCounters (64-aligned allocation of its size), which
        // the posting code accesses only atomically.
        let u64_at = |off: usize| unsafe { AtomicU64::from_ptr(p.add(off) as *mut u64) }.load(Ordering::Acquire);
        // SAFETY: as above, for a 4-aligned u32 of the counters.
        let u32_at = |off: usize| unsafe { AtomicU32::from_ptr(p.add(off) as *mut u32) }.load(Ordering::Acquire);
        QpCounters {
            resv_head: u64_at(offset_of!(QpCounters, resv_head)),
            ready_head: u64_at(offset_of!(QpCounters, ready_head)),
            prod_idx: u64_at(offset_of!(QpCounters, prod_idx)),
            cons_idx: u64_at(offset_of!(QpCounters, cons_idx)),
            cq_ci: u64_at(offset_of!(QpCounters, cq_ci)),
            error: u64_at(offset_of!(QpCounters, error)),
            rung: u32_at(offset_of!(QpCounters, rung)),
            poll_lock: u32_at(offset_of!(QpCounters, poll_lock)),
            read_head: u64_at(offset_of!(QpCounters, read_head)),
        }
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
