//! The device-resident NIC model (`RSHMEM_IBGDA_EMULATOR=device`): for measuring what posting costs GPU
//! threads when, as on a real ConnectX, the send queues, doorbell records, doorbell words, posting
//! counters and CQs are all in GPU memory. The NIC is `rshmem_ibgda::nicmodel` (it checks every WQE as
//! a NIC would and completes it without moving data: results are not valid), run
//! - on CUDA by the device library's `rshmemi_nic_model` kernel: one block, a thread per QP, on a
//!   non-blocking stream of its own made at setup (`Services::service_kernel`);
//! - on the CPU backend by one host thread over the same memory (the PE's memory there).
//!
//! # Why the kernel is (re)started by a host thread
//! The CUDA backend synchronizes its context in a host quiet, a barrier and a calloc
//! (`cuCtxSynchronize`), which would wait forever for a kernel that never ends. So the kernel ends
//! after about 5 ms in which none of its threads found work (`nicmodel::serve`: its thread 0 decides
//! and sets the header's `end` word, on which every thread ends, so that no thread leaves its QPs
//! unserved while another keeps the kernel running), and a watcher thread starts it again, `end`
//! zeroed first, whenever a doorbell record moved past what the model read while it was not running
//! (and once at setup). While posting goes on, it runs without a break; a host quiet, barrier or calloc
//! waits at most those 5 ms for it.
//!
//! # Memory (one allocation of `Services::device_mem`)
//! A header (the model's [`ModelHeader`]: its `busy` counter and `end` word), the [`ModelQp`]s, one
//! 256-byte control area per QP (doorbell record at 0, doorbell word at 64, collapsed CQ at 128), then
//! the send queues, page-aligned. The stop word is in `Services::host_shared` memory (pinned, mapped
//! host memory on CUDA), which the host sets once at the end; the model reads it (and `end`) only when
//! idle and every 1024 busy passes.

use crate::error::{Error, Result};
use crate::log;
use crate::platform::services::{DeviceMem, HostShared, ServiceKernel, Services};
use rshmem_common::Backoff;
use rshmem_ibgda::mlx5::{self, CQE_SIZE, WQEBB};
use rshmem_ibgda::nicmodel::{serve, ModelHeader, ModelQp, Served};
use rshmem_ibgda::qp::{self, HostSys};
use rshmem_ibgda::CqeError;
use std::mem::size_of;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The device library's kernel that runs the model on CUDA.
const KERNEL: &str = "rshmemi_nic_model";
/// How long stopping waits for the kernel (or thread) to end before it gives up with an error.
const STOP_LIMIT: Duration = Duration::from_secs(5);
/// How often the watcher reads the doorbell records while the kernel is not running.
const WATCH_IDLE: Duration = Duration::from_micros(200);
/// Bytes of one QP's control area: doorbell record, doorbell word, CQ, each on its own 64 bytes.
const CTL_BYTES: usize = 256;
const DBR_AT: usize = 0;
const DB_AT: usize = 64;
const CQ_AT: usize = 128;
/// Where the `ModelQp`s start (after the header, a `ModelHeader` at 0).
const MODELS_AT: usize = 256;
const _: () = assert!(size_of::<ModelHeader>() <= MODELS_AT);

/// Where one QP's queues are (device addresses; host addresses on the CPU backend).
#[derive(Clone, Copy, Debug)]
pub(super) struct Queues {
    pub(super) sq: u64,
    pub(super) dbr: u64,
    pub(super) db: u64,
    pub(super) cq: u64,
}

/// What runs the model.
enum Runner {
    /// The CPU backend: a host thread serving every QP until the stop word.
    Host(JoinHandle<Served>),
    /// CUDA: the watcher thread, which (re)starts the kernel and, once told to stop, waits for it.
    Gpu { watcher: JoinHandle<Result<()>>, quit: Arc<AtomicBool> },
}

/// The device-resident NIC of one PE: its memory and what runs it.
pub(super) struct DevNic {
    services: Arc<dyn Services>,
    mem: Arc<DeviceMem>,
    stop: Arc<HostShared>,
    nqp: usize,
    sq_at: usize,
    sq_bytes: usize,
    runner: Mutex<Option<Runner>>,
}

/// The byte offsets of QP `q`'s model state and control area.
fn model_at(q: usize) -> usize {
    MODELS_AT + q * size_of::<ModelQp>()
}
fn ctl_at(nqp: usize, q: usize) -> usize {
    (model_at(nqp)).next_multiple_of(CTL_BYTES) + q * CTL_BYTES
}

/// The model's state of each QP and the doorbell record's send counter, as read from the memory the
/// model and the posters update (`snapshot`).
type Snapshot = Vec<(ModelQp, u16)>;

impl DevNic {
    /// Allocates and initializes the queues of `qpns.len()` QPs of `1 << log_sq` WQEBBs whose first WQE
    /// has count `start`, and starts the model (the kernel on CUDA, a thread on the CPU backend).
    pub(super) fn new(services: Arc<dyn Services>, qpns: &[u32], log_sq: u32, start: u64) -> Result<DevNic> {
        let nqp = qpns.len();
        let sq_bytes = (WQEBB << log_sq).next_multiple_of(4096);
        let sq_at = ctl_at(nqp, nqp).next_multiple_of(4096);
        let mem = Arc::new(services.device_mem(sq_at + nqp * sq_bytes)?);
        let stop = Arc::new(services.host_shared(64)?);
        let nic = DevNic { services, mem, stop, nqp, sq_at, sq_bytes, runner: Mutex::new(None) };
        // The header, models and control areas, written once before anything runs (the send queues
        // are zero, as device_mem leaves them).
        let mut blob = vec![0u8; sq_at];
        for (q, &qpn) in qpns.iter().enumerate() {
            let c = nic.queues(q);
            let m = ModelQp::new(c.sq, c.dbr, c.cq, qpn, log_sq, start);
            blob[model_at(q)..model_at(q + 1)].copy_from_slice(bytemuck::bytes_of(&m));
            let ctl = ctl_at(nqp, q);
            // SAFETY: the doorbell record (8 bytes) and the CQ (one 64-byte entry) inside `blob`.
            unsafe {
                qp::init_dbr(blob[ctl + DBR_AT..].as_mut_ptr(), start);
                qp::init_cq(blob[ctl + CQ_AT..ctl + CQ_AT + CQE_SIZE].as_mut_ptr(), 0, true, start);
            }
        }
        // SAFETY: the allocation holds sq_at bytes or more; nothing reads it yet.
        unsafe { nic.services.copy(nic.mem.addr as *mut u8, blob.as_ptr(), blob.len())? };
        nic.start()?;
        Ok(nic)
    }

    /// Where QP `q`'s queues are.
    pub(super) fn queues(&self, q: usize) -> Queues {
        let ctl = self.mem.addr + ctl_at(self.nqp, q) as u64;
        Queues { sq: self.mem.addr + (self.sq_at + q * self.sq_bytes) as u64, dbr: ctl + DBR_AT as u64, db: ctl + DB_AT as u64, cq: ctl + CQ_AT as u64 }
    }

    fn models(&self) -> *mut ModelQp {
        (self.mem.addr as usize + MODELS_AT) as *mut ModelQp
    }
    fn header(&self) -> *mut ModelHeader {
        self.mem.addr as *mut ModelHeader
    }
    fn stop_word(&self) -> &AtomicU32 {
        // SAFETY: the first 4 bytes of our host-shared allocation (64-aligned), read by the model with
        // atomic loads, written only here.
        unsafe { AtomicU32::from_ptr(self.stop.host_ptr() as *mut u32) }
    }

    /// Starts the model: the watcher of the kernel on CUDA, the model's thread on the CPU backend.
    fn start(&self) -> Result<()> {
        let nqp = self.nqp as u32;
        let (models, header) = (self.models() as u64, self.header() as u64);
        let kernel = self.services.service_kernel(KERNEL, nqp.clamp(1, 1024), &[models, nqp as u64, self.stop.device_addr(), header])?;
        let runner = match kernel {
            None => {
                let (mem, stop) = (self.mem.clone(), self.stop.clone());
                let h = std::thread::Builder::new()
                    .name("rshmem-nic-model".into())
                    .spawn(move || {
                        let _keep = (&mem, &stop);
                        // SAFETY: the models, queues and words are in `mem`/`stop`, which this thread
                        // keeps alive; only this thread serves the QPs (it is the launch's first, with
                        // `end` 0 from setup); the CPU backend's device memory is this process's memory.
                        unsafe { serve(&HostSys, models as *mut ModelQp, nqp, 0, 1, stop.host_ptr() as *const u32, header as *mut ModelHeader) }
                    })
                    .map_err(|e| Error::os("ibgda: starting the NIC model's thread", e))?;
                Runner::Host(h)
            }
            Some(k) => {
                // The first launch here, so that a kernel that cannot start fails init, naming it.
                self.launch(&*k).map_err(|e| Error::new(format!("ibgda: starting the device-resident NIC model ({KERNEL}): {e}")))?;
                let quit = Arc::new(AtomicBool::new(false));
                let q = quit.clone();
                let watcher = DevNic { services: self.services.clone(), mem: self.mem.clone(), stop: self.stop.clone(), nqp: self.nqp, sq_at: self.sq_at, sq_bytes: self.sq_bytes, runner: Mutex::new(None) };
                let h = std::thread::Builder::new()
                    .name("rshmem-nic-model".into())
                    .spawn(move || watcher.watch(k, &q))
                    .map_err(|e| Error::os("ibgda: starting the NIC model's watcher", e))?;
                Runner::Gpu { watcher: h, quit }
            }
        };
        *self.runner.lock().unwrap_or_else(|e| e.into_inner()) = Some(runner);
        Ok(())
    }

    /// The watcher (CUDA): launches the kernel again whenever it has ended while a doorbell record
    /// announced WQEs it has not read, until `quit`; then waits (bounded) for it to end. A failure (the
    /// kernel faulted, a launch failed) is logged at once, since posters may wait for the model.
    fn watch(&self, k: Box<dyn ServiceKernel>, quit: &AtomicBool) -> Result<()> {
        let r = self.keep_running(&*k, quit);
        if let Err(e) = &r {
            log::warn(format!("ibgda: the device-resident NIC model stopped serving: {e}"));
        }
        let t0 = Instant::now();
        while k.running()? {
            if t0.elapsed() > STOP_LIMIT {
                return Err(Error::new(format!("ibgda: the device-resident NIC model ({KERNEL}) did not stop within {STOP_LIMIT:?} of being told to (a GPU fault, or a kernel of this PE holding the GPU?)")));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        r
    }

    /// `watch`'s loop until `quit`. While the kernel runs it only asks the driver (an event query, no
    /// GPU work); while it does not, it reads the doorbell records (a copy from the GPU) every
    /// [`WATCH_IDLE`], so that a PE that posts nothing puts next to no work on a GPU it may share.
    fn keep_running(&self, k: &dyn ServiceKernel, quit: &AtomicBool) -> Result<()> {
        let mut backoff = Backoff::new();
        while !quit.load(Ordering::Acquire) {
            if k.running()? {
                backoff.snooze();
                continue;
            }
            if self.snapshot()?.iter().any(|(m, dbr)| !m.settled(*dbr)) {
                self.launch(k)?;
                backoff.reset();
            } else {
                std::thread::sleep(WATCH_IDLE);
            }
        }
        Ok(())
    }

    /// Launches the kernel (which has ended, or never ran) after zeroing its header's `end` word, which
    /// the previous launch's thread 0 set when it ended (`nicmodel::serve`).
    fn launch(&self, k: &dyn ServiceKernel) -> Result<()> {
        let zero = 0u32;
        let end = self.mem.addr as usize + std::mem::offset_of!(ModelHeader, end);
        // SAFETY: the 4-aligned `end` word of our live allocation's header; no launch runs (the
        // caller's knowledge), and `copy` is complete when it returns, before the launch below.
        unsafe { self.services.copy(end as *mut u8, (&zero as *const u32).cast(), size_of::<u32>())? };
        k.launch()
    }

    /// Each QP's model state and doorbell-record send counter.
    fn snapshot(&self) -> Result<Snapshot> {
        let cpu = matches!(*self.runner.lock().unwrap_or_else(|e| e.into_inner()), Some(Runner::Host(_)));
        let read_dbr = |bytes: &[u8]| u32::from_be_bytes(bytes[4 * mlx5::SND_DBR..4 * mlx5::SND_DBR + 4].try_into().expect("4 bytes")) as u16;
        if cpu {
            // The CPU backend: this is the process's memory, updated atomically by the model's thread
            // and the posting threads.
            return Ok((0..self.nqp)
                .map(|q| {
                    let p = self.mem.addr as usize;
                    // SAFETY: 8-aligned words of ModelQp q and the 4-aligned send counter of its doorbell
                    // record, in our live allocation, written by others only atomically.
                    let at = |off: usize| unsafe { AtomicU64::from_ptr((p + model_at(q) + off) as *mut u64) }.load(Ordering::Acquire);
                    // SAFETY: as above.
                    let dbr = unsafe { AtomicU32::from_ptr((p + ctl_at(self.nqp, q) + DBR_AT + 4 * mlx5::SND_DBR) as *mut u32) }.load(Ordering::Acquire);
                    let m = ModelQp {
                        hw_ci: at(std::mem::offset_of!(ModelQp, hw_ci)),
                        wqes: at(std::mem::offset_of!(ModelQp, wqes)),
                        cqes: at(std::mem::offset_of!(ModelQp, cqes)),
                        error: at(std::mem::offset_of!(ModelQp, error)),
                        ..ModelQp::default()
                    };
                    (m, u32::from_be_bytes(dbr.to_ne_bytes()) as u16)
                })
                .collect());
        }
        let mut b = vec![0u8; ctl_at(self.nqp, self.nqp)];
        // SAFETY: the header, models and control areas of our live allocation (a copy of device memory
        // the model updates: each word is read whole, which is all a snapshot needs).
        unsafe { self.services.copy(b.as_mut_ptr(), self.mem.addr as *const u8, b.len())? };
        Ok((0..self.nqp)
            .map(|q| {
                let c = ctl_at(self.nqp, q) + DBR_AT;
                (bytemuck::pod_read_unaligned(&b[model_at(q)..model_at(q + 1)]), read_dbr(&b[c..c + 8]))
            })
            .collect())
    }

    /// Waits until the model has read everything the doorbell records announced (or its QP is in the
    /// error state), or `limit` passed; returns whether it did (a host-side quiet).
    pub(super) fn settled(&self, limit: Duration) -> Result<bool> {
        let t0 = Instant::now();
        let mut backoff = Backoff::new();
        loop {
            if self.snapshot()?.iter().all(|(m, dbr)| m.settled(*dbr)) {
                return Ok(true);
            }
            if t0.elapsed() >= limit {
                return Ok(false);
            }
            backoff.snooze();
        }
    }

    /// Stops the model (sets the stop word, waits a bounded time for the thread or kernel to end) and
    /// says what it did: one line with the WQEs and CQEs of every QP and the first error, if any.
    pub(super) fn stop(&self) -> Result<String> {
        let Some(r) = self.runner.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Ok(String::new()) };
        self.stop_word().store(1, Ordering::Release);
        match r {
            Runner::Host(h) => {
                let t0 = Instant::now();
                while !h.is_finished() {
                    if t0.elapsed() > STOP_LIMIT {
                        return Err(Error::new(format!("ibgda: the NIC model's thread did not stop within {STOP_LIMIT:?}")));
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                let _ = h.join();
            }
            Runner::Gpu { watcher, quit } => {
                quit.store(true, Ordering::Release);
                let joined = watcher.join().map_err(|_| Error::new("ibgda: the NIC model's watcher thread panicked"))?;
                joined?;
            }
        }
        // Read after the model ended: a plain copy is exact now.
        let mut b = vec![0u8; model_at(self.nqp)];
        // SAFETY: the models of our live allocation; nothing writes them any more.
        unsafe { self.services.copy(b.as_mut_ptr(), self.mem.addr as *const u8, b.len())? };
        let models: Vec<ModelQp> = (0..self.nqp).map(|q| bytemuck::pod_read_unaligned(&b[model_at(q)..model_at(q + 1)])).collect();
        let (wqes, cqes) = models.iter().fold((0, 0), |(w, c), m| (w + m.wqes, c + m.cqes));
        let mut line = format!("the device-resident NIC model completed {wqes} WQEs with {cqes} CQEs over {} QPs", self.nqp);
        if let Some((q, e)) = models.iter().enumerate().find_map(|(q, m)| CqeError::decode(m.error).map(|e| (q, e))) {
            line += &format!("; QP {q} is in the error state: {}", rshmem_ibgda::PollError::Cqe(e));
        }
        Ok(line)
    }
}

impl Drop for DevNic {
    fn drop(&mut self) {
        // The model reads the queues: stop it before they are freed (a watcher-side clone has no runner).
        if let Err(e) = self.stop() {
            log::warn(format!("{e}; its memory is left allocated"));
            // The kernel may still read the memory: keep it (leak) rather than free it under it.
            std::mem::forget(self.mem.clone());
            std::mem::forget(self.stop.clone());
        }
    }
}
