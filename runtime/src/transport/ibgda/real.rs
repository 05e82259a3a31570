//! IBGDA on a real ConnectX NIC (feature `verbs`; chosen only when every `rshmrun --diagnose` check
//! passes, `super::super::select::nic_usable`). The setup of NVSHMEM's IBGDA transport
//! (`shared/research/ibgda-mlx5.md` §5) through `super::super::verbs`:
//! 1. open the NIC (`RSHMEM_IB_HCA`, else the first usable port) and its DevX context;
//! 2. register the backed heap in key chunks of `1 << KEY_SHIFT` bytes (dma-buf, else peer memory),
//!    and the return slots (GPU memory, beside the CQs, that the NIC writes fetched values into);
//! 3. create `qps_per_pe` RC QPs to every PE on another node, their send queues, doorbell records and
//!    collapsed CQs in GPU memory and the UAR mapped into the GPU, all-gather their handles and
//!    connect each to its twin on the peer (QP k of PE a to PE b <-> QP k of PE b to PE a);
//! 4. all-gather the heap addresses and rkeys, and write the same device table as the emulated NIC's.
//!
//! The device code is the emulated NIC's, unchanged: only the addresses in the table differ. Heap
//! growth registers the new chunks and all-gathers their keys (collective, like the growth itself).
//! Host-initiated operations go through the proxy (TCP), as NVSHMEM leaves them to its CPU
//! transport.
//!
//! Not run on hardware here: no machine of this project has a NIC (docs/transports.md; README, "Simulated nodes and remote PEs").

use crate::transport::agree::agree_failure;
use crate::transport::ibgda::setup::{exchange_keys, peers, settings, Built, DeviceTable, Settings, BATCH, KEY_SHIFT, SETUP_FAILED};
use crate::node::exchange::Collective;
use crate::platform::backend::Backend;
use crate::platform::services::{DeviceMem, Services};
use crate::error::{Error, Result};
use crate::transport::verbs::{IbgdaNic, IbgdaQp, IbgdaQpConfig, Mr, Nic, RcHandle};
use crate::transport::interface::RemoteSetup;
use crate::transport::proxy::Proxy;
use crate::log;
use rshmem_device::remote::ibgda::{ret_bytes, QpEntry, Table};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most bytes one WQE moves on a real NIC (mlx5 takes up to 2 GiB; NVSHMEM splits at 1 GiB).
const NIC_MAX_WQE: u64 = 1 << 30;

/// The return slots and their registration (fields drop in order: the registration before the memory).
///
/// Where they are, and why (NVSHMEM's placement: its fetch buffer in GPU memory beside the CQs). A `g` or
/// fetching AMO posts a work request whose response data the NIC writes into the slot, and then the
/// CQE of that request into the CQ; the posting thread waits for the CQE, then reads the slot. Both
/// writes are PCIe posted writes from the NIC. PCIe keeps posted writes from one requester to one
/// completer in order unless a write carries the relaxed-ordering attribute, which the NIC sets only
/// for memory registered with relaxed ordering (never here: `verbs::mr::ACCESS`). With the slots and
/// the CQs in the same GPU's memory, the slot's write therefore lands before the CQE's, and the thread's
/// acquire load of the CQE (`rshmem_ibgda`'s completion test) orders its later load of the slot. With
/// the slots in host memory (as this path had them before) the two writes go to different completers,
/// which PCIe does not order: a thread could see its CQE before its value.
struct RetArea {
    _mr: Mr,
    _mem: DeviceMem,
}

/// The return area is registered with dma-buf (or peer memory), which wants whole pages of a GPU
/// allocation: 2 MiB (a GPU allocation of this size starts on a 2 MiB boundary).
const RET_AREA_ALIGN: usize = 2 << 20;

/// What the real NIC keeps.
pub(super) struct Real {
    nic: Arc<Nic>,
    /// The QPs (destroyed, with their GPU queues and UARs, when this is dropped), then the DevX
    /// context they were made in.
    _qps: Vec<IbgdaQp>,
    _ibgda: Arc<IbgdaNic>,
    /// What device code posts to, per QP (for the host's quiet).
    descs: Vec<rshmem_ibgda::QpDesc>,
    _ret: RetArea,
    /// Heap chunk registrations (chunk index -> MR), and every PE's rkeys per chunk.
    heap: Mutex<HeapKeys>,
    /// Registered local buffers: key -> MR.
    locals: Mutex<Vec<Mr>>,
    heap_base: u64,
}

struct HeapKeys {
    mrs: Vec<Option<Mr>>,
    /// `rkeys[pe * chunks + c]`.
    rkeys: Vec<u32>,
}

/// Builds the transport on a real NIC. Collective.
pub(super) fn new(s: &RemoteSetup) -> Result<(Built, Real)> {
    let boot = s.boot;
    let platform = s.platform.clone();
    let services = s.services.clone();
    let (me, n) = (boot.pe(), boot.npes());
    let Settings { qps_per_pe, log_sq, .. } = settings(&s.config);
    let hca = s.config.ib_hca.clone();
    let (remote, qps) = peers(boot, qps_per_pe);
    let nqp = qps.len();
    let heap_base = platform.heap_base() as u64;
    let heap_size = platform.heap_size() as u64;
    let chunks = heap_size.div_ceil(1 << KEY_SHIFT) as usize;
    let per_qp = ret_bytes(log_sq).next_multiple_of(64);

    // This PE's part, which may fail on one node and not on another (no NIC there, no DevX, no
    // GPU memory registration): nothing collective happens before every PE has said how it went.
    let local = || -> Result<_> {
        // First every check `rshmrun --diagnose` runs, the GPU ones included (registering GPU memory,
        // mapping a UAR into the GPU), which automatic selection skipped: now this PE's own GPU context
        // is bound, so they cost no context on another GPU. Bounded in time (a hung firmware command
        // fails the check instead of hanging init), once per init. A failure here is this PE's share of
        // the agreed failure below: every PE falls back to the proxy, naming the check, unless IBGDA was
        // asked for explicitly.
        let for_checks = hca.clone();
        let checks = crate::probe::report::bounded_verbs(move || crate::transport::verbs::diagnose(&for_checks));
        if let Some(c) = checks.iter().find(|c| c.status == crate::probe::check::Status::Fail) {
            return Err(Error::new(format!("ibgda: the check \"{}\" failed: {}", c.name, c.detail)));
        }
        let nic = Nic::open_with(&hca).map_err(|e| e.context("ibgda: opening the NIC"))?;
        let ibgda = IbgdaNic::new(nic.clone()).map_err(|e| e.context(format!("ibgda: DevX on {}", nic.name())))?;
        log::info(format!("ibgda: PE {me}: real NIC {} port {}", nic.name(), nic.port_name()));
        // The heap, chunk by chunk (what is backed now; growth registers the rest).
        let mut mrs: Vec<Option<Mr>> = (0..chunks).map(|_| None).collect();
        register_chunks(&nic, heap_base, heap_size, 0..platform.backed() as u64, &mut mrs)?;
        // Return slots: GPU memory beside the CQs (see RetArea for the ordering this gives).
        let ret = services.device_mem((nqp * per_qp).max(64).next_multiple_of(RET_AREA_ALIGN))?;
        // `ret` is kept with its registration in a RetArea, which drops the registration first.
        let ret_mr = nic.register_gpu(ret.addr, ret.bytes as u64).map_err(|e| e.context("ibgda: registering the return slots (GPU memory)"))?;
        // The QPs (connected to their twins below, once every PE made its own).
        let cfg = IbgdaQpConfig { log_depth: log_sq, ..IbgdaQpConfig::default() };
        let mut made = Vec::with_capacity(nqp);
        for &(pe, k) in &qps {
            let qp = IbgdaQp::create(&ibgda, &IbgdaQpConfig { user_index: pe * qps_per_pe + k, ..cfg })
                .map_err(|e| e.context(format!("ibgda: QP {k} to PE {pe}")))?;
            made.push(qp);
        }
        Ok((nic, ibgda, mrs, ret, ret_mr, made))
    };
    let mine = local();
    // Every PE returns the same agreed failure (init may fall back to the proxy on all of them).
    agree_failure(
        boot,
        "rshmem_init (ibgda NIC set up?)",
        SETUP_FAILED,
        "the checks, opening the NIC, registering the heap and the return slots, making the QPs",
        mine.as_ref().map(|_| ()).map_err(|e| e.to_string()),
    )?;
    let (nic, ibgda, mrs, ret, ret_mr, mut made) = mine?;
    let proxy = Proxy::new(s)?;

    // The QPs' handles all-gathered, each connected to its twin.
    let mut handles = vec![RcHandle::default(); n * qps_per_pe as usize];
    for (q, &(pe, k)) in qps.iter().enumerate() {
        handles[pe as usize * qps_per_pe as usize + k as usize] = made[q].handle();
    }
    let all = boot.allgather("rshmem_init (ibgda QP handles)", bytemuck::cast_slice(&handles))?;
    for (q, &(pe, k)) in qps.iter().enumerate() {
        let theirs: &[RcHandle] = bytemuck::try_cast_slice(&all[pe as usize])
            .map_err(|_| boot.abort(Error::new(format!("ibgda: PE {pe} sent {} bytes of QP handles", all[pe as usize].len()))))?;
        let twin = theirs.get(me * qps_per_pe as usize + k as usize).copied().unwrap_or_default();
        made[q].connect(&twin, pe as usize).map_err(|e| e.context(format!("ibgda: connecting QP {k} to PE {pe}")))?;
    }

    // Keys and the device table.
    let table = DeviceTable::alloc(&*services, nqp, n, qps_per_pe as usize, chunks)?;
    let (mine, lkeys) = keys_of(&mrs);
    let (bases, keys) = exchange_keys(boot, "rshmem_init (ibgda keys)", heap_base, &mine)?;
    let rkeys = keys.concat();
    let mut entries = vec![QpEntry::default(); n * qps_per_pe as usize];
    for (q, &(pe, k)) in qps.iter().enumerate() {
        entries[pe as usize * qps_per_pe as usize + k as usize] =
            QpEntry { desc: made[q].desc(table.counters(q), BATCH), ret: ret.addr + (q * per_qp) as u64 };
    }
    let t = Table { qps_per_pe, key_shift: KEY_SHIFT, max_wqe: NIC_MAX_WQE, ret_lkey: ret_mr.lkey, ..Table::default() };
    table.write(&*services, nqp, 0, t, &entries, &bases, &rkeys, &lkeys)?;
    let descs = qps.iter().map(|&(pe, k)| entries[pe as usize * qps_per_pe as usize + k as usize].desc).collect();
    let real = Real {
        nic,
        _qps: made,
        _ibgda: ibgda,
        descs,
        _ret: RetArea { _mr: ret_mr, _mem: ret },
        heap: Mutex::new(HeapKeys { mrs, rkeys }),
        locals: Mutex::new(Vec::new()),
        heap_base,
    };
    Ok((Built { proxy, remote, table }, real))
}

/// The (rkeys, lkeys) of the heap chunks, 0 for a chunk not registered yet.
fn keys_of(mrs: &[Option<Mr>]) -> (Vec<u32>, Vec<u32>) {
    mrs.iter().map(|m| m.as_ref().map_or((0, 0), |m| (m.rkey, m.lkey))).unzip()
}

/// Registers the key chunks that `range` (heap offsets) touches and that are not registered yet.
fn register_chunks(nic: &Arc<Nic>, heap_base: u64, heap_size: u64, range: std::ops::Range<u64>, mrs: &mut [Option<Mr>]) -> Result<Vec<usize>> {
    let mut new = Vec::new();
    if range.is_empty() {
        return Ok(new);
    }
    let first = (range.start >> KEY_SHIFT) as usize;
    let last = ((range.end - 1) >> KEY_SHIFT) as usize;
    for c in first..=last.min(mrs.len().saturating_sub(1)) {
        if mrs[c].is_some() {
            continue;
        }
        let start = (c as u64) << KEY_SHIFT;
        let len = (1u64 << KEY_SHIFT).min(heap_size - start).min(range.end.max(start) - start);
        mrs[c] = Some(nic.register_gpu(heap_base + start, len).map_err(|e| e.context(format!("ibgda: registering heap chunk {c}")))?);
        new.push(c);
    }
    Ok(new)
}

impl Real {
    /// Heap growth (collective): registers the new chunks, all-gathers their rkeys, rewrites the
    /// device table's keys.
    pub(super) fn register(&self, c: Collective, table: &DeviceTable, platform: &dyn Backend, services: &dyn Services, range: std::ops::Range<usize>) -> Result<()> {
        let mut h = self.heap.lock().unwrap_or_else(|e| e.into_inner());
        let chunks = h.mrs.len();
        let new = register_chunks(&self.nic, self.heap_base, platform.heap_size() as u64, range.start as u64..range.end as u64, &mut h.mrs)?;
        let (mine, lkeys) = keys_of(&h.mrs);
        let (_, keys) = exchange_keys(c.boot, "rshmem_malloc (ibgda keys of new heap chunks)", self.heap_base, &mine)?;
        h.rkeys = keys.concat();
        debug_assert_eq!(h.rkeys.len(), chunks * c.boot.npes());
        if !new.is_empty() {
            log::debug(format!("ibgda: registered heap chunks {new:?}"));
        }
        table.write_keys(services, &h.rkeys, &lkeys)
    }

    /// A registered local buffer (`rshmem_buffer_register`): its lkey.
    pub(super) fn register_local(&self, addr: usize, len: usize) -> Result<u32> {
        let mr = self.nic.register_gpu(addr as u64, len as u64).or_else(|gpu_err| {
            // Host memory (pinned or not): the host registration.
            // SAFETY: the program keeps the buffer valid while registered (NVSHMEM's contract).
            unsafe { self.nic.register_host(addr as *mut u8, len) }.map_err(|host_err| Error::new(format!("rshmem_buffer_register: {gpu_err}; as host memory: {host_err}")))
        })?;
        let key = mr.lkey;
        self.locals.lock().unwrap_or_else(|e| e.into_inner()).push(mr);
        Ok(key)
    }

    pub(super) fn deregister_local(&self, key: u32) {
        self.locals.lock().unwrap_or_else(|e| e.into_inner()).retain(|m| m.lkey != key);
    }

    /// Host quiet: every QP's collapsed CQ shows the completion of everything announced to the NIC
    /// (`prod_idx` of the posting counters), read from GPU memory; nbi work a kernel left behind
    /// completes without any device thread polling for it.
    pub(super) fn quiet(&self, platform: &dyn Services, table: &DeviceTable, limit: Duration) -> Result<()> {
        let start = Instant::now();
        for (q, d) in self.descs.iter().enumerate() {
            loop {
                let mut c = [0u8; std::mem::size_of::<rshmem_ibgda::QpCounters>()];
                let mut cqe = [0u8; rshmem_ibgda::mlx5::CQE_SIZE];
                // SAFETY: QP q's counters in the table's allocation, and CQE 0 of its CQ (GPU memory).
                unsafe {
                    platform.copy(c.as_mut_ptr(), table.counters(q) as *const u8, c.len())?;
                    platform.copy(cqe.as_mut_ptr(), d.cq as *const u8, cqe.len())?;
                }
                let c: rshmem_ibgda::QpCounters = bytemuck::pod_read_unaligned(&c);
                let e: rshmem_ibgda::mlx5::Cqe64 = bytemuck::pod_read_unaligned(&cqe);
                let op = e.opcode();
                // The device's completion test (requester and responder errors included).
                let state = rshmem_ibgda::collapsed_state(op, e.wqe_counter.get(), c.prod_idx, d.sq_size());
                if state == rshmem_ibgda::CqState::Error || c.error != 0 {
                    return Err(Error::new(format!("rshmem quiet: QP {q} of the NIC completed a work request with an error (CQE opcode {op})")));
                }
                if c.cons_idx >= c.prod_idx || state == rshmem_ibgda::CqState::Done {
                    break;
                }
                if start.elapsed() > limit {
                    return Err(Error::new(format!("rshmem quiet: QP {q} of the NIC did not complete its work requests within {limit:?}")));
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(())
    }
}
