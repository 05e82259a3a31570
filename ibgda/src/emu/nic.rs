//! The emulated NIC: its QPs and the region table of its protection domain ([`Nic`]), and the host
//! thread that runs it ([`NicThread`]). What one QP does is `engine`'s.

use std::prelude::rust_2021::*;
use super::engine::{dbr_counter, load_u64, poll_qp, EmuQp};
use super::fault::{FaultConfig, FaultCounts};
use super::mr::MrTable;
use super::remote::Remote;
use super::setup::{QpId, QpSetup, QpStats, SetupError};
use crate::mlx5;
use rshmem_common::Backoff;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// An emulated mlx5 NIC: QPs, each with its CQ and remote peer, and the region table of its
/// protection domain.
pub struct Nic {
    qps: Vec<EmuQp>,
    mrs: Arc<MrTable>,
    fault: FaultConfig,
    ack_only: bool,
}

impl Nic {
    /// A NIC whose protection domain is `mrs` (the local regions its WQEs' lkeys name).
    pub fn new(mrs: Arc<MrTable>, fault: FaultConfig) -> Nic {
        Nic { qps: Vec::new(), mrs, fault, ack_only: false }
    }

    /// Acknowledge-only mode (for measuring the posting side alone): every well-formed WQE completes
    /// successfully at once, without moving data or reaching the peer. Malformed WQEs still fail.
    pub fn set_ack_only(&mut self, on: bool) {
        self.ack_only = on;
    }

    pub fn fault(&self) -> &FaultConfig {
        &self.fault
    }

    pub fn regions(&self) -> &Arc<MrTable> {
        &self.mrs
    }

    /// Adds a QP in the ready-to-send state, connected to `remote`.
    ///
    /// # Safety
    /// Every address in `setup` must stay valid (the SQ, doorbell record and doorbell readable, the
    /// CQ writable) while the NIC lives, and be accessed by others only atomically or as the posting
    /// code does (WQE words written before the doorbell record announces them).
    pub unsafe fn add_qp(&mut self, setup: QpSetup, remote: Box<dyn Remote>) -> Result<QpId, SetupError> {
        let s = setup;
        if s.qpn > 0x00ff_ffff || self.qps.iter().any(|q| q.s.qpn == s.qpn) {
            return Err(SetupError::BadQpn(s.qpn));
        }
        if s.sq.is_null() || !(s.sq as usize).is_multiple_of(mlx5::WQEBB) {
            return Err(SetupError::Misaligned("send queue"));
        }
        if s.dbr.is_null() || !(s.dbr as usize).is_multiple_of(4) {
            return Err(SetupError::Misaligned("doorbell record"));
        }
        if s.db.is_null() || !(s.db as usize).is_multiple_of(8) {
            return Err(SetupError::Misaligned("doorbell register"));
        }
        if s.cq.base.is_null() || !(s.cq.base as usize).is_multiple_of(mlx5::CQE_SIZE) {
            return Err(SetupError::Misaligned("CQ"));
        }
        if !s.cq.dbr.is_null() && !(s.cq.dbr as usize).is_multiple_of(4) {
            return Err(SetupError::Misaligned("CQ doorbell record"));
        }
        if s.log_sq > 15 {
            return Err(SetupError::BadSize("log2 of the send queue size (at most 15)"));
        }
        if s.cq.log_n > 24 {
            return Err(SetupError::BadSize("log2 of the CQ size (at most 24)"));
        }
        let now = Instant::now();
        // SAFETY: the caller's doorbell register and record (checked aligned and non-null above).
        let (last_db, last_dbr) = unsafe { (load_u64(s.db), dbr_counter(s.dbr)) };
        self.qps.push(EmuQp {
            s,
            remote,
            hw_ci: s.start,
            cq_pi: 0,
            error: false,
            last_db,
            pending: None,
            last_dbr,
            dbr_moved: now,
            holding: false,
            last_scan: now,
            target: s.start as u16,
            inflight: VecDeque::new(),
            inflight_bytes: 0,
            next_tag: 0,
            stats: QpStats { hw_ci: s.start, ..QpStats::default() },
        });
        Ok(self.qps.len() - 1)
    }

    /// Puts a QP back in the ready state at WQE count `start`, its CQ producer at 0 (what a transition
    /// through RESET does), and forgets its first error (the counters stay). The caller re-initializes
    /// the CQ, doorbell record and posting counters.
    pub fn reset_qp(&mut self, id: QpId, start: u64) {
        if let Some(q) = self.qps.get_mut(id) {
            q.hw_ci = start;
            q.target = start as u16;
            q.inflight.clear();
            q.inflight_bytes = 0;
            q.cq_pi = 0;
            q.error = false;
            q.pending = None;
            q.holding = false;
            // Whatever the doorbell register holds next counts as a new doorbell (one equal to the
            // last seen before the reset must not be missed); a stale one finds nothing to do.
            q.last_db = u64::MAX;
            // SAFETY: add_qp's contract.
            q.last_dbr = unsafe { dbr_counter(q.s.dbr) };
            q.stats.in_error = false;
            q.stats.first_error = None;
            q.stats.cq_overrun = false;
            q.stats.hw_ci = start;
        }
    }

    /// What QP `id` did so far.
    pub fn stats(&self, id: QpId) -> QpStats {
        self.qps.get(id).map(|q| q.stats.clone()).unwrap_or_default()
    }

    /// How often each fault mode was injected, over every QP of this NIC (and how many WQEs they ran).
    pub fn fault_counts(&self) -> FaultCounts {
        self.qps.iter().fold(FaultCounts::default(), |mut c, q| {
            let s = &q.stats;
            c.delayed_fetches += s.delayed_fetches;
            c.dropped_doorbells += s.doorbells_dropped;
            c.index_wraps += s.index_wraps;
            c.holds += s.holds;
            c.slow_cqes += s.slow_cqes;
            c.scans_with_work += s.scans_with_work;
            c.wqes += s.wqes;
            c
        })
    }

    /// One pass over every QP: act on new doorbells (and doorbell-record scans), start the WQEs they
    /// announce, and complete those whose peer answered. Returns the number of WQEs completed (with a
    /// peer that answers at once, such as [`Loopback`](super::remote::Loopback), every WQE read in this pass).
    pub fn poll(&mut self) -> usize {
        let mut n = 0;
        for q in self.qps.iter_mut() {
            n += poll_qp(q, &self.mrs, &self.fault, self.ack_only).0;
        }
        n
    }

    /// One pass over every QP; returns whether anything happened (WQEs read or completed).
    fn progress(&mut self) -> bool {
        let mut any = false;
        for q in self.qps.iter_mut() {
            let (done, read) = poll_qp(q, &self.mrs, &self.fault, self.ack_only);
            any |= done + read > 0;
        }
        any
    }

    /// Whether every QP has completed everything its doorbell record announced (nothing read and
    /// unanswered, nothing announced and unread): what a host-side quiet waits for.
    pub fn is_idle(&self) -> bool {
        self.qps.iter().all(|q| {
            // SAFETY: add_qp's contract (aligned, live doorbell record).
            let dbr = unsafe { dbr_counter(q.s.dbr) };
            q.inflight.is_empty() && (q.error || q.hw_ci as u16 == dbr)
        })
    }

    /// Runs the NIC on its own thread until [`NicThread::stop`].
    pub fn spawn(self) -> NicThread {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        // Pass count << 1 | idle after that pass: a waiter that saw count c knows a pass that
        // started after it has ended once the count reaches c + 2.
        let state = Arc::new(AtomicU64::new(1));
        let state_out = state.clone();
        let handle = std::thread::Builder::new()
            .name("emulated-mlx5".into())
            .spawn(move || {
                let mut nic = self;
                let mut idle = Backoff::new();
                let mut passes = 0u64;
                while !st.load(Ordering::Acquire) {
                    let progressed = nic.progress();
                    passes += 1;
                    state.store(passes << 1 | nic.is_idle() as u64, Ordering::Release);
                    if progressed {
                        idle.reset();
                        continue;
                    }
                    // The workspace's one waiting policy (spin, yield, sleep): the posting threads
                    // may need the CPU on a small machine.
                    idle.snooze();
                }
                nic
            })
            .expect("spawn the emulated NIC thread");
        NicThread { stop, state: state_out, handle: Some(handle) }
    }
}

/// A NIC running on its own thread.
pub struct NicThread {
    stop: Arc<AtomicBool>,
    /// Passes done << 1 | whether the NIC was idle after the last one.
    state: Arc<AtomicU64>,
    handle: Option<JoinHandle<Nic>>,
}

impl NicThread {
    /// Waits until a pass of the NIC that started after this call ended with the NIC idle
    /// ([`Nic::is_idle`]: everything its doorbell records announced is complete), or `limit` passed.
    /// Returns whether it did.
    pub fn settled(&self, limit: Duration) -> bool {
        let start = Instant::now();
        let first = self.state.load(Ordering::Acquire) >> 1;
        let mut backoff = Backoff::new();
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s >> 1 >= first + 2 && s & 1 == 1 {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            backoff.snooze();
        }
    }

    /// Stops the thread after its current pass and returns the NIC (for its statistics).
    pub fn stop(mut self) -> Nic {
        self.stop.store(true, Ordering::Release);
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(nic)) => nic,
            Some(Err(p)) => std::panic::resume_unwind(p),
            None => unreachable!("NicThread stopped twice"),
        }
    }
}

impl Drop for NicThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

