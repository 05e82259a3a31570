//! Shared helpers of the integration tests.
#![allow(dead_code)]

use rshmem_ibgda::emu::{Access, FaultConfig, HostQueues, HostQueuesConfig, Loopback, MrTable, Nic, NicThread};
use rshmem_ibgda::qp::HostSys;
use rshmem_ibgda::Sys;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// HostSys whose waits give up after `timeout` (a hang becomes a test failure) and yield the CPU
/// (the test machine may have two cores shared by posters and the NIC thread).
pub struct TimedSys {
    pub timeout: Duration,
}

impl Default for TimedSys {
    fn default() -> Self {
        TimedSys { timeout: Duration::from_secs(20) }
    }
}

fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

// SAFETY: delegates every atomic and fence to HostSys.
unsafe impl Sys for TimedSys {
    unsafe fn fetch_add_u64(&self, p: *mut u64, v: u64) -> u64 {
        // SAFETY: caller's contract, passed on.
        unsafe { HostSys.fetch_add_u64(p, v) }
    }
    unsafe fn fetch_max_u64(&self, p: *mut u64, v: u64) -> u64 {
        // SAFETY: as above.
        unsafe { HostSys.fetch_max_u64(p, v) }
    }
    unsafe fn cas_u64(&self, p: *mut u64, c: u64, n: u64) -> u64 {
        // SAFETY: as above.
        unsafe { HostSys.cas_u64(p, c, n) }
    }
    unsafe fn cas_u32(&self, p: *mut u32, c: u32, n: u32) -> u32 {
        // SAFETY: as above.
        unsafe { HostSys.cas_u32(p, c, n) }
    }
    unsafe fn load_u64(&self, p: *const u64) -> u64 {
        // SAFETY: as above.
        unsafe { HostSys.load_u64(p) }
    }
    unsafe fn load_acquire_u32(&self, p: *const u32) -> u32 {
        // SAFETY: as above.
        unsafe { HostSys.load_acquire_u32(p) }
    }
    unsafe fn load_u32(&self, p: *const u32) -> u32 {
        // SAFETY: as above.
        unsafe { HostSys.load_u32(p) }
    }
    unsafe fn store_u32(&self, p: *mut u32, v: u32) {
        // SAFETY: as above.
        unsafe { HostSys.store_u32(p, v) }
    }
    unsafe fn store_release_u32(&self, p: *mut u32, v: u32) {
        // SAFETY: as above.
        unsafe { HostSys.store_release_u32(p, v) }
    }
    unsafe fn store_release_u64(&self, p: *mut u64, v: u64) {
        // SAFETY: as above.
        unsafe { HostSys.store_release_u64(p, v) }
    }
    fn fence_acq_rel(&self) {
        HostSys.fence_acq_rel()
    }
    fn fence_nic(&self) {
        HostSys.fence_nic()
    }
    fn idle(&self, spins: &mut u64) -> bool {
        if *spins == 0 {
            *spins = now_ns();
            return true;
        }
        std::thread::yield_now();
        now_ns() - *spins < self.timeout.as_nanos() as u64
    }
}

/// A heap buffer registered as a memory region.
pub struct Mem {
    pub buf: Vec<u64>,
    pub key: u32,
}

impl Mem {
    pub fn new(mrs: &MrTable, key: u32, words: usize, access: Access) -> Mem {
        let mut buf = vec![0u64; words];
        // SAFETY: the buffer lives as long as the Mem, which every test keeps until the NIC stopped.
        unsafe { mrs.register(key, buf.as_mut_ptr() as *mut u8, (words * 8) as u64, access).unwrap() };
        Mem { buf, key }
    }
    pub fn addr(&self, byte_off: usize) -> u64 {
        self.buf.as_ptr() as u64 + byte_off as u64
    }
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the buffer's own bytes (read after the NIC completed the writes).
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr() as *const u8, self.buf.len() * 8) }
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr() as *mut u8, self.buf.len() * 8) }
    }
    /// Atomic read of word `i` (the NIC may write it concurrently).
    pub fn word(&self, i: usize) -> u64 {
        // SAFETY: an aligned word of the buffer.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(self.buf.as_ptr().add(i) as *mut u64) }.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// One QP in host memory, looped back to its own NIC's region table, the NIC on its thread.
pub struct Rig {
    pub mrs: Arc<MrTable>,
    pub qp: HostQueues,
    pub nic: Option<NicThread>,
}

impl Rig {
    pub fn new(cfg: HostQueuesConfig, fault: FaultConfig) -> Rig {
        let mrs = Arc::new(MrTable::new());
        let cfg = HostQueuesConfig { start: fault.start_index, ..cfg };
        let qp = HostQueues::new(cfg);
        let mut nic = Nic::new(mrs.clone(), fault);
        // SAFETY: the HostQueues outlives the NIC thread (Rig::stop / drop order: nic first).
        unsafe { nic.add_qp(qp.setup(), Box::new(Loopback::new(mrs.clone()))).unwrap() };
        Rig { mrs, qp, nic: Some(nic.spawn()) }
    }
    pub fn stop(&mut self) -> Nic {
        self.nic.take().expect("NIC running").stop()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        drop(self.nic.take());
    }
}
