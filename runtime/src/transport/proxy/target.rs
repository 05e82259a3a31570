//! This PE as the target of the remote engine: the table of lanes the apply code walks
//! (`rshmem_device::remote::lane`), and who applies their frames.
//!
//! - **CPU backend**: each lane's thread applies the frames it received, at once, with the device
//!   code's `apply` on a host thread (the platform has no service kernel).
//! - **GPU**: the apply kernel (`rshmemi_apply`, a warp per lane at a time) on a stream of its own:
//!   launched by a lane's thread when frames wait and none runs (`Target::ensure_running`); it
//!   lingers while frames come and ends after a quiet spell, so that nothing (a
//!   `cudaDeviceSynchronize`, the runtime's own context synchronizations) waits on it for longer.
//!   Device threads that wait for something remote apply frames themselves whenever no apply kernel is
//!   active (`remote::lane::help`): a kernel that fills the GPU while it waits still sees its data.
//!
//! The emulated NIC of the IBGDA transport checks its frames' keys through `Nic`, installed on
//! the engine; the apply code then applies them like any other frame.

use crate::error::{Error, Result};
use crate::platform::backend::Backend;
use crate::platform::services::{DeviceMem, HostShared, ServiceKernel, Services};
use crate::transport::proxy::lanes::Lane;
use rshmem_device::remote::frame::MAX_LANES;
use rshmem_device::remote::lane::{self as dev, LaneDesc, LaneWords, TargetTable, DESC_BYTES, TABLE_BYTES, TABLE_MAGIC};
use rshmem_device::types::Scope;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the NIC hooks say of a NIC request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Apply it at this heap offset.
    Apply(u64),
    /// Apply nothing; answer with this (syndrome, reason).
    Refuse(u8, u8),
    /// Apply nothing and answer nothing (a piece of a WRITE whose failure its last piece answers).
    Skip,
}

/// The emulated NIC's hooks (the IBGDA transport's responder and port).
pub(crate) trait Nic: Send + Sync {
    /// Checks a NIC request from `peer` of `kind` (NIC_WRITE, NIC_READ, NIC_ATOMIC) for `len` bytes
    /// at `raddr` under `key`, tagged `seq` (`last`: the last piece of its operation), as a responder
    /// NIC does.
    #[allow(clippy::too_many_arguments)]
    fn check(&self, peer: u32, kind: u8, key: u32, raddr: u64, len: u64, seq: u64, last: bool) -> Verdict;
    /// An answer (a NIC_ACK or NIC_READ_DATA frame, checked) from `peer` to one of this PE's NIC frames.
    fn answer(&self, peer: u32, frame: &[u8]) -> Result<()>;
    /// How many of this PE's NIC frames to `peer` await an answer.
    fn outstanding(&self, peer: u32) -> u64;
}

/// Frames a lane's thread applies in one pass on the CPU backend.
const HOST_BUDGET: u32 = 4096;
/// How long (device ns) the apply kernel waits with nothing to do before it ends.
pub(crate) const DEFAULT_LINGER: Duration = Duration::from_micros(500);

/// This PE as the engine's target.
pub(crate) struct Target {
    platform: Arc<dyn Backend>,
    /// The table in device memory (header, descriptors, lane words, fence marks).
    table: Mutex<Option<DeviceMem>>,
    /// The descriptors (host copy: the CPU backend's lane threads apply through them).
    descs: Vec<LaneDesc>,
    /// The apply kernel (GPU) and its launch counter (host-shared memory, read by each launch).
    kernel: Option<Box<dyn ServiceKernel>>,
    gen: HostShared,
    launch: Mutex<()>,
    /// When the host last saw the apply kernel running (ns since `epoch`), to query the driver less.
    seen_running: AtomicU64,
    epoch: Instant,
    /// Launches made (the stats' `apply_launches`).
    pub(crate) launches: AtomicU64,
}

impl Target {
    /// The target of this PE: the table for `lanes` (grouped by peer: `peer_lanes`), and the apply
    /// kernel where the platform has one. `linger`: how long it waits for work before it ends.
    pub(crate) fn new(platform: Arc<dyn Backend>, services: Arc<dyn Services>, lanes: &[Arc<Lane>], peer_lanes: &[Range<usize>], linger: Duration) -> Result<Target> {
        let n = lanes.len();
        let peers: Vec<&Range<usize>> = peer_lanes.iter().filter(|r| !r.is_empty()).collect();
        let words_at = TABLE_BYTES + n * DESC_BYTES;
        let marks_at = words_at + n * std::mem::size_of::<LaneWords>();
        let bytes = marks_at + peers.len() * MAX_LANES * 8;
        let table = services.device_mem(bytes.max(256))?;
        let heap = platform.heap_base() as u64;
        let mut descs = Vec::with_capacity(n);
        for (pi, r) in peers.iter().enumerate() {
            for (i, l) in lanes.iter().enumerate().take(r.end).skip(r.start) {
                let (ctl, ring, reply) = l.device_addrs();
                descs.push((
                    i,
                    LaneDesc {
                        ring,
                        ctl,
                        reply,
                        marks: table.addr + (marks_at + pi * MAX_LANES * 8) as u64,
                        words: table.addr + (words_at + i * std::mem::size_of::<LaneWords>()) as u64,
                        sizes: l.ring_bytes | l.reply_bytes << 32,
                        who: l.peer as u64 | (l.index as u64) << 32,
                        heap,
                    },
                ));
            }
        }
        descs.sort_by_key(|d| d.0);
        let descs: Vec<LaneDesc> = descs.into_iter().map(|d| d.1).collect();
        let gen = services.host_shared(64)?;
        // One warp per lane at a time, at most 16 warps (a launch of the platform's service kernel: a
        // block; none on the CPU backend, whose lane threads apply).
        let kernel = if n == 0 { None } else { services.service_kernel("rshmemi_apply", (32 * n.min(16)) as u32, &[gen.device_addr(), linger.as_nanos() as u64])? };
        Target::finish(platform, services, table, descs, kernel, gen)
    }

    fn finish(platform: Arc<dyn Backend>, services: Arc<dyn Services>, table: DeviceMem, descs: Vec<LaneDesc>, kernel: Option<Box<dyn ServiceKernel>>, gen: HostShared) -> Result<Target> {
        let header = TargetTable {
            magic: TABLE_MAGIC,
            lanes: descs.len() as u64,
            descs: table.addr + TABLE_BYTES as u64,
            host_applies: kernel.is_none() as u64,
            ..TargetTable::default()
        };
        // SAFETY: the table is ours, `bytes` long (header and descriptors fit: see `new`); the host
        // writes it once, before the device state names it.
        unsafe {
            services.copy(table.addr as *mut u8, bytemuck::bytes_of(&header).as_ptr(), TABLE_BYTES)?;
            if !descs.is_empty() {
                let b: &[u8] = bytemuck::cast_slice(&descs);
                services.copy((table.addr + TABLE_BYTES as u64) as *mut u8, b.as_ptr(), b.len())?;
            }
        }
        Ok(Target { platform, table: Mutex::new(Some(table)), descs, kernel, gen, launch: Mutex::new(()), seen_running: AtomicU64::new(0), epoch: Instant::now(), launches: AtomicU64::new(0) })
    }

    /// The table as device code addresses it (`DeviceState::target`).
    pub(crate) fn table_addr(&self) -> u64 {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map_or(0, |t| t.addr)
    }

    /// Bytes of this PE's heap backed now (every frame's range is checked against it).
    pub(crate) fn backed(&self) -> u64 {
        self.platform.backed() as u64
    }

    /// Bytes of the heap every PE reserves (the symmetric size and the internal area): the bound of
    /// a request's range at the sender. A GPU heap is backed only as far as allocations reached, and
    /// grows (collectively) later, so the sender must not bound requests by what was backed when it
    /// started; the target checks each frame against its backed bytes on receipt.
    pub(crate) fn reserved(&self) -> u64 {
        self.platform.heap_size() as u64
    }

    /// Whether the lanes' threads apply their frames themselves (the CPU backend).
    pub(crate) fn host_applies(&self) -> bool {
        self.kernel.is_none()
    }

    /// The CPU backend: applies what lane `gl` received (the device code, on this host thread).
    pub(crate) fn apply_lane(&self, gl: usize) {
        if let Some(d) = self.descs.get(gl) {
            // SAFETY: the descriptor names the lane's rings and control block (alive with the engine,
            // which outlives its lanes' threads), the table's words and marks; every frame below
            // `written` was checked by the lane's thread.
            unsafe { dev::apply(d, Scope::Thread, HOST_BUDGET) };
        }
    }

    /// A GPU: makes sure an apply kernel runs (frames wait since `since`). Launches one when none runs;
    /// asks the driver at most every few microseconds while one was seen running.
    pub(crate) fn ensure_running(&self, _since: Instant) -> Result<()> {
        let Some(k) = &self.kernel else { return Ok(()) };
        let now = self.epoch.elapsed().as_nanos() as u64;
        if now.saturating_sub(self.seen_running.load(Ordering::Relaxed)) < 5_000 {
            return Ok(());
        }
        let _g = self.launch.lock().unwrap_or_else(|e| e.into_inner());
        if k.running()? {
            self.seen_running.store(now, Ordering::Relaxed);
            return Ok(());
        }
        // SAFETY: the launch counter is the first word of `gen` (host-shared, alive with self); only
        // the launcher (holding `launch`) writes it, the kernel reads it at its start.
        let g = unsafe { AtomicU64::from_ptr(self.gen.host_ptr() as *mut u64) };
        g.fetch_add(1, Ordering::Release);
        k.launch().map_err(|e| e.context("proxy: launching the apply kernel"))?;
        self.launches.fetch_add(1, Ordering::Relaxed);
        self.seen_running.store(now, Ordering::Relaxed);
        Ok(())
    }

    /// Before the lanes go: waits (at most `limit`) for the last apply kernel to end; an error if it
    /// still runs (its memory is then left behind, not freed under it).
    pub(crate) fn stop(&self, limit: Duration) -> Result<()> {
        let Some(k) = &self.kernel else { return Ok(()) };
        let start = Instant::now();
        while k.running()? {
            if start.elapsed() > limit {
                return Err(Error::new(format!("proxy: the apply kernel still ran {limit:?} after finalize began")));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }
}
