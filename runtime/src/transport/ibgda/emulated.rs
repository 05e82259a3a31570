//! The IBGDA transport on rshmem's emulated mlx5 NIC (`rshmem_ibgda::emu`), when
//! `RSHMEM_REMOTE_TRANSPORT=ibgda` finds no usable NIC: each PE runs one emulated NIC on a host thread,
//! which owns this PE's QPs (queues in memory device threads and the NIC thread share, laid out as on
//! hardware) and carries the remote halves of their WQEs over the proxy engine's connections
//! (`responder`). With `RSHMEM_IBGDA_EMULATOR=device` the queues are in device memory and the NIC is
//! the device-resident model (`devnic`) instead of the NIC thread.

use crate::error::{Error, Result};
use crate::log;
use crate::platform::services::{DeviceMem, HostShared, Services};
use crate::transport::ibgda::devnic::{DevNic, Queues};
use crate::transport::ibgda::responder::{NicPort, NicResponder};
use crate::transport::ibgda::setup::{exchange_keys, peers, settings, Built, DeviceTable, Settings, BATCH, KEY_SHIFT};
use crate::transport::interface::RemoteSetup;
use crate::transport::proxy::Proxy;
use crate::config::env;
use rshmem_device::remote::ibgda::{self as dev, QpEntry, Table};
use rshmem_ibgda::emu::{Access, CqSetup, Dma, MrTable, Nic, NicThread, QpSetup, Remote, RemoteDone, RemoteError, RemoteOp};
use rshmem_ibgda::mlx5;
use rshmem_ibgda::qp::{self, QpDesc, QP_CQ_COLLAPSED, QP_GPU_MEMORY};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most bytes one WRITE or READ WQE moves through the emulated NIC (it stages a WQE's data in host
/// memory).
const EMU_MAX_WQE: u64 = 4 << 20;
/// The key of the QPs' return slots, and the first key of registered local buffers.
const RET_KEY: u32 = 0x0fff_f000;
const LOCAL_KEY0: u32 = 0x2000_0000;
/// QPN of the first QP.
const QPN0: u32 = 0x100;
/// Bits of a NIC frame's `seq` that carry the WQE tag; the QP index is above them.
const TAG_BITS: u32 = 40;

/// The key of heap chunk `c` of PE `pe` (unique per NIC; never MLX5_INVALID_LKEY).
fn heap_key(pe: usize, c: usize) -> u32 {
    0x1000_0000 | ((pe as u32 & 0xffff) << 11) | (c as u32 & 0x7ff)
}

/// The platform's copies as the emulated NIC's DMA into this PE's heap (GPU memory on CUDA).
struct PlatformDma(Arc<dyn Services>);

impl Dma for PlatformDma {
    unsafe fn read(&self, addr: u64, out: &mut [u8]) -> std::result::Result<(), String> {
        // SAFETY: the caller's contract: [addr, addr + len) inside the heap, registered with us.
        unsafe { self.0.copy(out.as_mut_ptr(), addr as *const u8, out.len()) }.map_err(|e| e.to_string())
    }
    unsafe fn write(&self, addr: u64, data: &[u8]) -> std::result::Result<(), String> {
        // SAFETY: as in read.
        unsafe { self.0.copy(addr as *mut u8, data.as_ptr(), data.len()) }.map_err(|e| e.to_string())
    }
}

/// A WQE's tag and its remote half's outcome.
type Answer = (u64, std::result::Result<RemoteDone, RemoteError>);

/// Answers to this PE's NIC frames, per QP, as the receivers deliver them.
struct Answers {
    /// `owner[q]`: the PE QP `q` is connected to.
    owner: Vec<u32>,
    queues: Vec<Mutex<VecDeque<Answer>>>,
}

/// The emulated QP's peer: the proxy engine's connection to the target PE.
struct WireRemote {
    port: NicPort,
    pe: u32,
    qp: usize,
    answers: Arc<Answers>,
}

impl Remote for WireRemote {
    fn start(&mut self, tag: u64, op: RemoteOp) -> std::result::Result<(), RemoteError> {
        self.port.start(self.pe, (self.qp as u64) << TAG_BITS | (tag & ((1 << TAG_BITS) - 1)), op)
    }
    fn poll(&mut self) -> Option<Answer> {
        self.answers.queues[self.qp].lock().unwrap_or_else(|e| e.into_inner()).pop_front()
    }
}

/// Byte layout of one QP's queues in the shared area (offsets from the QP's start).
#[derive(Clone, Copy)]
struct QpLayout {
    log_sq: u32,
}

impl QpLayout {
    fn sq(&self) -> usize {
        0
    }
    fn cq(&self) -> usize {
        mlx5::WQEBB << self.log_sq
    }
    fn dbr(&self) -> usize {
        self.cq() + mlx5::CQE_SIZE
    }
    fn db(&self) -> usize {
        self.dbr() + 64
    }
    fn ret(&self) -> usize {
        self.db() + 64
    }
    /// Bytes of one QP, rounded to a page (every send queue starts page-aligned).
    fn bytes(&self) -> usize {
        (self.ret() + dev::ret_bytes(self.log_sq)).next_multiple_of(4096)
    }
}

/// What the emulated NIC keeps: its thread, which reads the queues.
pub(super) struct Emulated {
    thread: Mutex<Option<NicThread>>,
    /// The device-resident NIC model instead of the NIC thread (`RSHMEM_IBGDA_EMULATOR=device`).
    model: Option<DevNic>,
    regions: Arc<MrTable>,
    /// The QPs' queues and (by default) their return slots (shared with device code); with the
    /// device-resident model, a minimal allocation nothing uses (its queues are in `model`).
    _queues: HostShared,
    /// The return slots when they are in device memory (`RSHMEM_IBGDA_RET_SLOTS=device`).
    _ret_device: Option<DeviceMem>,
    /// The platform's copies, as the NIC's DMA.
    dma: Arc<dyn Dma>,
    /// Keys of registered local buffers.
    locals: Mutex<Vec<u32>>,
}

impl Emulated {
    /// Registers a local buffer with the NIC; returns its key.
    ///
    /// # Safety
    /// `[addr, addr + len)` must stay valid memory of this process until `deregister_local` of the
    /// key (NVSHMEM's contract of nvshmemx_buffer_register): the NIC thread may write into it.
    pub(super) unsafe fn register_local(&self, addr: usize, len: usize) -> Result<u32> {
        let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
        let key = (0..).map(|i| LOCAL_KEY0 + i).find(|k| !l.contains(k)).expect("a free key");
        // SAFETY: the buffer is valid for len bytes until `deregister_local` (the caller's contract).
        unsafe { self.regions.register_with(key, addr as *mut u8, len as u64, Access::LOCAL_WRITE, Some(self.dma.clone())) }
            .map_err(|e| Error::new(format!("rshmem_buffer_register: {e}")))?;
        l.push(key);
        Ok(key)
    }
    /// Removes a registration of `register_local`.
    pub(super) fn deregister_local(&self, key: u32) {
        self.locals.lock().unwrap_or_else(|e| e.into_inner()).retain(|&k| k != key);
        self.regions.deregister(key);
    }
    /// Waits until a pass of the NIC found nothing announced and unanswered, or `limit` passed.
    pub(super) fn settled(&self, limit: Duration) -> Result<bool> {
        if let Some(m) = &self.model {
            return m.settled(limit);
        }
        Ok(self.thread.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_none_or(|nic| nic.settled(limit)))
    }
    /// Stops the NIC's thread (it reads the queues), if it runs; returns the NIC (its statistics). The
    /// device-resident model stops too, and says what it did (or why it did not stop) in the log.
    pub(super) fn stop(&self) -> Option<Nic> {
        if let Some(m) = &self.model {
            match m.stop() {
                Ok(line) if !line.is_empty() => log::info(format!("ibgda: {line}")),
                Ok(_) => {}
                Err(e) => log::warn(e.to_string()),
            }
        }
        self.thread.lock().unwrap_or_else(|e| e.into_inner()).take().map(NicThread::stop)
    }
}

/// Builds the transport on the emulated NIC. Collective.
pub(super) fn new(s: &RemoteSetup) -> Result<(Built, Emulated)> {
    let boot = s.boot;
    let platform = s.platform.clone();
    let services = s.services.clone();
    let (me, n) = (boot.pe(), boot.npes());
    let Settings { qps_per_pe, log_sq, fault, emulator, ret_in_device } = settings(&s.config);
    let device = emulator == env::IbgdaEmulator::Device;
    let ack_only = emulator != env::IbgdaEmulator::Full;
    // The model starts its QPs at any WQE count (`wrap`), and injects no other fault.
    if device && fault.any_but_wrap() {
        return Err(Error::new(format!("ibgda: {}=device has no fault injection but wrap: unset {} or leave only wrap[=START] in it", env::IBGDA_EMULATOR, env::IBGDA_FAULTS)));
    }
    if fault.any() && me == 0 {
        log::warn(format!("ibgda: the emulated NIC injects faults ({}): {fault:?}", env::IBGDA_FAULTS));
    }
    if emulator == env::IbgdaEmulator::Ack && me == 0 {
        log::warn(format!("ibgda: {}=ack: the emulated NIC completes WQEs without moving data; results are not valid", env::IBGDA_EMULATOR));
    }
    if device && me == 0 {
        log::warn(format!(
            "ibgda: {}=device: the NIC is a model in device memory that completes WQEs without moving data (for rshmem-bench --posting); results are not valid",
            env::IBGDA_EMULATOR
        ));
    }
    let (remote, qps) = peers(boot, qps_per_pe);
    let nqp = qps.len();
    let answers = Arc::new(Answers { owner: qps.iter().map(|q| q.0).collect(), queues: (0..nqp).map(|_| Mutex::new(VecDeque::new())).collect() });

    // 1. The regions, then the engine with the NIC's hooks (its receivers answer NIC frames).
    let regions = Arc::new(MrTable::new());
    let heap_base = platform.heap_base() as u64;
    let heap_size = platform.heap_size() as u64;
    let chunks = heap_size.div_ceil(1 << KEY_SHIFT) as usize;
    if chunks > 0x800 {
        return Err(Error::new(format!("ibgda: a heap of {heap_size} bytes has more than 2048 key chunks of {} bytes", 1u64 << KEY_SHIFT)));
    }
    let dma: Arc<dyn Dma> = Arc::new(PlatformDma(services.clone()));
    for c in 0..chunks {
        let start = (c as u64) << KEY_SHIFT;
        let len = (1u64 << KEY_SHIFT).min(heap_size - start);
        // SAFETY: the chunk lies in this PE's heap, which lives as long as the runtime (the NIC
        // is stopped in shutdown, before the heap goes); the accessor copies through the
        // platform, which reaches it (GPU memory too).
        unsafe { regions.register_with(heap_key(me, c), (heap_base + start) as *mut u8, len, Access::ALL, Some(dma.clone())) }
            .map_err(|e| Error::new(format!("ibgda: registering heap chunk {c}: {e}")))?;
    }
    let a = answers.clone();
    let answer = Box::new(move |peer, seq, r| {
        let q = (seq >> TAG_BITS) as usize;
        match a.owner.get(q) {
            Some(&o) if o == peer => a.queues[q].lock().unwrap_or_else(|e| e.into_inner()).push_back((seq & ((1 << TAG_BITS) - 1), r)),
            _ => log::warn(format!("ibgda: PE {peer} answered NIC frame {seq:#x}, which names none of this PE's queue pairs to it; ignored")),
        }
    });
    let responder = Arc::new(NicResponder::new(n, regions.clone(), heap_base, heap_size, answer));
    let proxy = Proxy::new(s)?;
    let port = NicPort::new(proxy.engine(), responder);

    // 2. The queues (shared memory), the NIC's QPs, and the device table's entries. The device-resident
    // model keeps its queues (and the return slots) in device memory: the host queues are then a
    // minimal allocation nothing uses, and there is no NIC thread to set up.
    let layout = QpLayout { log_sq };
    let queues = services.host_shared(if device { 64 } else { (nqp * layout.bytes()).max(4096) })?;
    // The return slots: beside the CQs in `queues` (default), or in device memory apart from them
    // (`RSHMEM_IBGDA_RET_SLOTS=device`, the real NIC's kind of memory: real.rs). Either way the NIC
    // thread writes a fetched value (directly, or with the platform's copy, which is complete when it
    // returns) before it writes the CQE of its work request, and the posting thread reads the value
    // after an acquire of that CQE: the order real.rs's placement gets from PCIe.
    let per_qp_ret = dev::ret_bytes(log_sq).next_multiple_of(64);
    let ret_device = if ret_in_device || device { Some(services.device_mem((nqp * per_qp_ret).max(64))?) } else { None };
    // The device-resident model's queues, all in device memory (`devnic`), and the model running.
    let model = if device { Some(DevNic::new(services.clone(), &(0..nqp).map(|q| QPN0 + q as u32).collect::<Vec<_>>(), log_sq, fault.start_index)?) } else { None };
    // SAFETY: the return slots of every QP, in `queues` or `ret_device`, both kept until the NIC has
    // stopped; the NIC writes fetched values there (local writes only: no remote access), through the
    // platform's copies for device memory.
    unsafe {
        match &ret_device {
            None => regions.register(RET_KEY, queues.host_ptr(), queues.len() as u64, Access::LOCAL_WRITE),
            Some(m) => regions.register_with(RET_KEY, m.addr as *mut u8, m.bytes as u64, Access::LOCAL_WRITE, Some(dma.clone())),
        }
    }
    .map_err(|e| Error::new(format!("ibgda: registering the return slots: {e}")))?;
    let table = DeviceTable::alloc(&*services, nqp, n, qps_per_pe as usize, chunks)?;
    let mut nic = if device {
        None
    } else {
        let mut nic = Nic::new(regions.clone(), fault.clone());
        nic.set_ack_only(ack_only);
        Some(nic)
    };
    let start = fault.start_index;
    let mut entries = vec![QpEntry::default(); n * qps_per_pe as usize];
    for (q, &(pe, k)) in qps.iter().enumerate() {
        let base = q * layout.bytes();
        let devp = |off: usize| queues.device_addr() + (base + off) as u64;
        let qpn = QPN0 + q as u32;
        let at = match (&model, &mut nic) {
            (Some(m), _) => m.queues(q),
            (None, None) => unreachable!("the NIC thread's NIC is made whenever the model is not"),
            (None, Some(nic)) => {
                let host = |off: usize| queues.host_ptr() as usize + base + off;
                // SAFETY: the CQ and DBR of QP q inside `queues` (zeroed, not yet used by anyone).
                unsafe {
                    qp::init_cq(host(layout.cq()) as *mut u8, 0, true, start);
                    qp::init_dbr(host(layout.dbr()) as *mut u8, start);
                }
                let setup = QpSetup {
                    qpn,
                    sq: host(layout.sq()) as *const u8,
                    log_sq,
                    dbr: host(layout.dbr()) as *const u8,
                    db: host(layout.db()) as *const u8,
                    cq: CqSetup { base: host(layout.cq()) as *mut u8, log_n: 0, collapsed: true, dbr: std::ptr::null(), overrun_ignore: true },
                    start,
                };
                let wire = WireRemote { port: port.clone(), pe, qp: q, answers: answers.clone() };
                // SAFETY: every address lies in `queues`, which this transport keeps until the NIC
                // thread is stopped (shutdown, and Drop), laid out as the emulator expects.
                unsafe { nic.add_qp(setup, Box::new(wire)) }.map_err(|e| Error::new(format!("ibgda: QP {q}: {e}")))?;
                Queues { sq: devp(layout.sq()), dbr: devp(layout.dbr()), db: devp(layout.db()), cq: devp(layout.cq()) }
            }
        };
        entries[pe as usize * qps_per_pe as usize + k as usize] = QpEntry {
            desc: QpDesc {
                sq: at.sq,
                dbr: at.dbr,
                db: at.db,
                cq: at.cq,
                cq_dbr: 0,
                counters: table.counters(q),
                qpn,
                log_sq,
                log_cq: 0,
                // The model's queues are in device memory (GPU scope: `QP_GPU_MEMORY`); the NIC
                // thread's are in host memory it reads (system scope).
                flags: QP_CQ_COLLAPSED | if device { QP_GPU_MEMORY } else { 0 },
                batch: BATCH,
                reserved: 0,
            },
            ret: match &ret_device {
                None => devp(layout.ret()),
                Some(m) => m.addr + (q * per_qp_ret) as u64,
            },
        };
    }

    // 3. Every PE's heap address and rkeys, then the device table.
    let mine: Vec<u32> = (0..chunks).map(|c| heap_key(me, c)).collect();
    let (bases, keys) = exchange_keys(boot, "rshmem_init (ibgda keys)", heap_base, &mine)?;
    let rkeys: Vec<u32> = keys.concat();
    let t = Table { qps_per_pe, key_shift: KEY_SHIFT, max_wqe: EMU_MAX_WQE, ret_lkey: RET_KEY, ..Table::default() };
    table.write(&*services, nqp, start, t, &entries, &bases, &rkeys, &mine)?;
    log::info(format!(
        "ibgda: PE {me}: emulated NIC, {qps_per_pe} QPs to each of {} PEs on other nodes, {} WQEBBs each, {chunks} key chunks",
        nqp / qps_per_pe.max(1) as usize,
        1u32 << log_sq
    ));
    let thread = nic.map(Nic::spawn);
    let emulated = Emulated { thread: Mutex::new(thread), model, regions, _queues: queues, _ret_device: ret_device, dma, locals: Mutex::new(Vec::new()) };
    Ok((Built { proxy, remote, table }, emulated))
}
