//! The IBGDA transport: device threads reach PEs on other nodes by driving an mlx5 NIC themselves
//! (`rshmem_device::remote::ibgda` posts the WQEs, rings the doorbell and polls the CQ).
//!
//! # Two NICs, one device path
//! - **A real ConnectX** (the `verbs` feature, selected only when every `rshmrun --diagnose` check
//!   passes): queues in GPU memory, the UAR mapped into the GPU (`super::verbs`).
//! - **The emulated mlx5 NIC** (`rshmem_ibgda::emu`), when `RSHMEM_REMOTE_TRANSPORT=ibgda` finds no
//!   usable NIC (init says so once). Each PE runs one emulated NIC on a host thread. It owns this PE's
//!   QPs, whose send queues, doorbell records, doorbell registers and CQs lie in memory device threads
//!   and the NIC thread share (pinned host memory mapped into the GPU on CUDA: NVSHMEM's "NIC buffers
//!   in host memory"; ordinary memory on the CPU backend), laid out exactly as on hardware. It reads
//!   the WQEs as a ConnectX does, checks them by the PRM, and carries their remote halves over the proxy
//!   transport's TCP connections (NIC frames of `super::wire`) to the target PE, whose engine answers
//!   as the peer NIC's responder: it checks the rkey and the range against the target's registered
//!   memory and applies the data with the platform's copies, and atomics through the target's inbound
//!   queue (device threads of the target execute them, so they are atomic with its own atomics). The
//!   answers become CQEs. The device code cannot tell the two NICs apart: only the addresses in the
//!   table it reads differ.
//!
//! # What each PE sets up (collectively, at init)
//! 1. The proxy engine (`super::proxy::Proxy`) with the NIC hooks: connections, receivers, the inbound
//!    queue, and the proxy ring for host-initiated operations (`putmem` from the host, on-stream
//!    calls), which IBGDA leaves to the proxy as NVSHMEM leaves them to its CPU transport.
//! 2. Memory regions: the heap in key chunks of `1 << KEY_SHIFT` bytes (one lkey = rkey per chunk, as a
//!    NIC registers a heap granule by granule), and the QPs' return slots (local writes only).
//! 3. `qps_per_pe` RC QPs to every PE on another node: queues in shared memory, posting counters and
//!    the table device code reads (`Table`) in device memory.
//! 4. An all-gather of every PE's heap address and rkeys (what a real NIC's setup exchanges with the
//!    QPNs), then the table.
//!
//! # Fault injection
//! `RSHMEM_IBGDA_FAULTS` turns on the emulator's fault modes (`FaultConfig::parse`): a delay between the
//! doorbell and the WQE fetch, dropped doorbells, WQE counts starting near a 16-bit wrap, WQEs held
//! until the send queue is full, slow completions. The whole suite passes under each. While the variable
//! is set, finalize prints one line per PE with how often its NIC injected each fault.
//! `RSHMEM_IBGDA_EMULATOR=ack` makes the NIC complete every WQE without moving data, to measure the
//! posting side alone.

#[cfg(feature = "verbs")]
mod real;

use super::proxy::{NicHooks, NicPort, Proxy};
use super::{DeviceChannel, RemoteSetup, Transport};
use crate::backend::{Backend, Collective, DeviceMem, HostShared};
use crate::error::{Error, Result};
use crate::{env, log};
use rshmem_device::remote::ibgda::{self as dev, LocalRegion, QpEntry, Table, MAX_LOCAL_REGIONS, TABLE_MAGIC};
use rshmem_ibgda::emu::{Access, Dma, FaultConfig, MrTable, Nic, NicThread, QpSetup, CqSetup, Remote, RemoteDone, RemoteError, RemoteOp};
use rshmem_ibgda::mlx5;
use rshmem_ibgda::qp::{self, QpCounters, QpDesc, QP_CQ_COLLAPSED};
use std::collections::VecDeque;
use std::mem::size_of;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// log2 of a key chunk of the heap: 64 MiB (one lkey/rkey per chunk, as NICs register heap granules).
const KEY_SHIFT: u32 = 26;
/// The most bytes one WRITE or READ WQE moves through the emulated NIC (it stages a WQE's data in host
/// memory).
const EMU_MAX_WQE: u64 = 4 << 20;
/// Doorbell batching: ring at least every this many WQEBBs (NVSHMEM's NUM_REQUESTS_IN_BATCH).
const BATCH: u32 = 32;
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
struct PlatformDma(Arc<dyn Backend>);

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
struct Emulated {
    thread: Mutex<Option<NicThread>>,
    regions: Arc<MrTable>,
    /// The QPs' queues and return slots (shared with device code).
    _queues: HostShared,
}

/// Which NIC the device code posts to.
enum Engine {
    Emulated(Emulated),
    #[cfg(feature = "verbs")]
    Real(real::Real),
}

/// The IBGDA transport of one PE.
pub struct Ibgda {
    proxy: Proxy,
    engine: Engine,
    remote: Vec<bool>,
    platform: Arc<dyn Backend>,
    /// The posting counters and the table device code reads.
    table: DeviceTable,
    /// Registered local buffers: (start, len, key).
    locals: Mutex<Vec<(u64, u64, u32)>>,
    wait_limit: Duration,
}

/// The registry's constructor for `ibgda` without a usable NIC. Collective.
pub fn create_emulated(s: &RemoteSetup) -> Result<Box<dyn Transport>> {
    if s.boot.pe() == 0 {
        log::warn(
            "RSHMEM_REMOTE_TRANSPORT=ibgda: no usable RDMA NIC here (rshmrun --diagnose says why), so GPU threads post their mlx5 work requests to rshmem's emulated NIC, which carries them to the other nodes over TCP",
        );
    }
    Ok(Box::new(Ibgda::new_emulated(s)?))
}

/// The registry's constructor for `ibgda` on a real NIC (every `--diagnose` check passed, which needs
/// the `verbs` feature). Collective.
pub fn create_nic(s: &RemoteSetup) -> Result<Box<dyn Transport>> {
    #[cfg(feature = "verbs")]
    return Ok(Box::new(real::new(s)?));
    #[cfg(not(feature = "verbs"))]
    {
        let _ = s;
        Err(Error::new("RSHMEM_REMOTE_TRANSPORT=ibgda on a real NIC needs the `verbs` feature (cargo build --release --features rshmem/verbs)"))
    }
}

/// The transport's settings (`RSHMEM_IBGDA_*`), checked.
struct Settings {
    qps_per_pe: u32,
    log_sq: u32,
    fault: FaultConfig,
    ack_only: bool,
}

/// How long the host's quiet waits for the NIC: RSHMEM_WAIT_TIMEOUT, else (0 or unset) a year.
fn wait_limit() -> Duration {
    env::wait_timeout().ok().flatten().unwrap_or(Duration::from_secs(365 * 24 * 3600))
}

fn settings() -> Result<Settings> {
    fn parsed<T>(name: &str, parse: impl Fn(&str) -> std::result::Result<T, String>) -> Result<Option<T>> {
        env::get(name).map(|v| parse(&v).map_err(|e| Error::new(format!("{name}={v:?}: {e}")))).transpose()
    }
    Ok(Settings {
        qps_per_pe: parsed(env::IBGDA_QPS_PER_PE, env::parse_ibgda_qps)?.unwrap_or(2),
        log_sq: parsed(env::IBGDA_QP_DEPTH, env::parse_ibgda_depth)?.unwrap_or(9),
        fault: parsed(env::IBGDA_FAULTS, FaultConfig::parse)?.unwrap_or_default(),
        ack_only: parsed(env::IBGDA_EMULATOR, env::parse_ibgda_emulator)?.unwrap_or(false),
    })
}

/// The device memory device code reads (one allocation): every QP's posting counters, the [`Table`],
/// the QP entries, the PEs' heap addresses, the rkeys, this PE's lkeys, the registered local buffers.
struct DeviceTable {
    mem: DeviceMem,
    n: usize,
    chunks: usize,
    counters_stride: usize,
    table_at: usize,
    qps_at: usize,
    bases_at: usize,
    rkeys_at: usize,
    lkeys_at: usize,
    locals_at: usize,
}

impl DeviceTable {
    /// Device memory for `nqp` QPs, `n` PEs of `qps_per_pe` QP slots each, `chunks` key chunks.
    fn alloc(platform: &dyn Backend, nqp: usize, n: usize, qps_per_pe: usize, chunks: usize) -> Result<DeviceTable> {
        let counters_stride = size_of::<QpCounters>().next_multiple_of(64);
        let table_at = (nqp * counters_stride).next_multiple_of(256);
        let qps_at = table_at + size_of::<Table>().next_multiple_of(64);
        let bases_at = qps_at + n * qps_per_pe * size_of::<QpEntry>();
        let rkeys_at = bases_at + 8 * n;
        let lkeys_at = rkeys_at + 4 * n * chunks;
        let locals_at = (lkeys_at + 4 * chunks).next_multiple_of(64);
        let mem = platform.device_mem(locals_at + MAX_LOCAL_REGIONS * size_of::<LocalRegion>())?;
        Ok(DeviceTable { mem, n, chunks, counters_stride, table_at, qps_at, bases_at, rkeys_at, lkeys_at, locals_at })
    }
    fn at(&self, off: usize) -> u64 {
        self.mem.addr + off as u64
    }
    /// The device address of QP `q`'s counters.
    fn counters(&self, q: usize) -> u64 {
        self.at(q * self.counters_stride)
    }
    /// Writes everything: `nqp` counters starting at WQE count `start`, the table (its array
    /// addresses filled in here), the QP entries, heap addresses, rkeys and lkeys.
    #[allow(clippy::too_many_arguments)]
    fn write(&self, platform: &dyn Backend, nqp: usize, start: u64, mut table: Table, entries: &[QpEntry], bases: &[u64], rkeys: &[u32], lkeys: &[u32]) -> Result<()> {
        let mut blob = vec![0u8; self.locals_at];
        for q in 0..nqp {
            let at = q * self.counters_stride;
            blob[at..at + size_of::<QpCounters>()].copy_from_slice(bytemuck::bytes_of(&QpCounters::new(start)));
        }
        table.magic = TABLE_MAGIC;
        table.npes = self.n as u32;
        table.key_chunks = self.chunks as u32;
        (table.qps, table.remote_base, table.rkeys, table.lkeys, table.locals) =
            (self.at(self.qps_at), self.at(self.bases_at), self.at(self.rkeys_at), self.at(self.lkeys_at), self.at(self.locals_at));
        blob[self.table_at..self.table_at + size_of::<Table>()].copy_from_slice(bytemuck::bytes_of(&table));
        blob[self.qps_at..self.bases_at].copy_from_slice(bytemuck::cast_slice(entries));
        blob[self.bases_at..self.rkeys_at].copy_from_slice(bytemuck::cast_slice(bases));
        blob[self.rkeys_at..self.lkeys_at].copy_from_slice(bytemuck::cast_slice(rkeys));
        blob[self.lkeys_at..self.lkeys_at + 4 * self.chunks].copy_from_slice(bytemuck::cast_slice(lkeys));
        // SAFETY: the allocation holds more than blob.len() bytes; no device code reads it yet (init).
        unsafe { platform.copy(self.mem.addr as *mut u8, blob.as_ptr(), blob.len()) }
    }
    /// Rewrites the key arrays (heap growth on a real NIC), between kernels.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    fn write_keys(&self, platform: &dyn Backend, rkeys: &[u32], lkeys: &[u32]) -> Result<()> {
        // SAFETY: the key arrays of the allocation, of these sizes; written between kernels.
        unsafe {
            platform.copy(self.at(self.rkeys_at) as *mut u8, bytemuck::cast_slice::<u32, u8>(rkeys).as_ptr(), 4 * rkeys.len())?;
            platform.copy(self.at(self.lkeys_at) as *mut u8, bytemuck::cast_slice::<u32, u8>(lkeys).as_ptr(), 4 * lkeys.len())
        }
    }
    /// Writes the registered local buffers and their count.
    fn write_locals(&self, platform: &dyn Backend, l: &[(u64, u64, u32)]) -> Result<()> {
        let regions: Vec<LocalRegion> = l.iter().map(|&(start, len, lkey)| LocalRegion { start, len, lkey, _pad: 0 }).collect();
        // SAFETY: the local-region array (MAX_LOCAL_REGIONS entries; l is at most that long) and the
        // table's count, in our allocation; registrations happen between kernels.
        unsafe {
            platform.copy(self.at(self.locals_at) as *mut u8, bytemuck::cast_slice::<LocalRegion, u8>(&regions).as_ptr(), regions.len() * size_of::<LocalRegion>())?;
            let n = l.len() as u32;
            platform.copy(self.at(self.table_at + std::mem::offset_of!(Table, nlocals)) as *mut u8, n.to_le_bytes().as_ptr(), 4)
        }
    }
}

/// All-gathers every PE's heap address and its rkeys for `chunks` (a list: the chunks registered
/// now), as a NIC's setup does. Returns (heap addresses, rkeys per PE in the order of `chunks`).
fn exchange_keys(boot: &crate::bootstrap::Bootstrap, call: &str, heap_base: u64, mine: &[u32]) -> Result<(Vec<u64>, Vec<Vec<u32>>)> {
    let mut payload = Vec::with_capacity(8 + 4 * mine.len());
    payload.extend_from_slice(&heap_base.to_le_bytes());
    for k in mine {
        payload.extend_from_slice(&k.to_le_bytes());
    }
    let all = boot.allgather(call, &payload)?;
    let mut bases = Vec::with_capacity(all.len());
    let mut keys = Vec::with_capacity(all.len());
    for (pe, p) in all.iter().enumerate() {
        if p.len() != payload.len() {
            return Err(boot.abort(Error::new(format!("ibgda: PE {pe} sent {} bytes of keys, this PE {} (different heap sizes?)", p.len(), payload.len()))));
        }
        bases.push(u64::from_le_bytes(p[..8].try_into().expect("8 bytes")));
        keys.push(p[8..].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect());
    }
    Ok((bases, keys))
}

/// The PEs on other nodes, and `(owner PE, QP index)` of each of this PE's QPs (PE-major).
fn peers(boot: &crate::bootstrap::Bootstrap, qps_per_pe: u32) -> (Vec<bool>, Vec<(u32, u32)>) {
    let remote: Vec<bool> = (0..boot.npes()).map(|pe| !boot.node_pes().contains(&pe)).collect();
    let qps = (0..boot.npes()).filter(|&pe| remote[pe]).flat_map(|pe| (0..qps_per_pe).map(move |k| (pe as u32, k))).collect();
    (remote, qps)
}

impl Ibgda {
    fn new_emulated(s: &RemoteSetup) -> Result<Ibgda> {
        let boot = s.boot;
        let platform = s.platform.clone();
        let (me, n) = (boot.pe(), boot.npes());
        let Settings { qps_per_pe, log_sq, fault, ack_only } = settings()?;
        if fault.any() && me == 0 {
            log::warn(format!("ibgda: the emulated NIC injects faults ({}): {fault:?}", env::IBGDA_FAULTS));
        }
        if ack_only && me == 0 {
            log::warn(format!("ibgda: {}=ack: the emulated NIC completes WQEs without moving data; results are not valid", env::IBGDA_EMULATOR));
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
        let dma: Arc<dyn Dma> = Arc::new(PlatformDma(platform.clone()));
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
        let hooks = NicHooks {
            regions: regions.clone(),
            answer: Box::new(move |peer, seq, r| {
                let q = (seq >> TAG_BITS) as usize;
                match a.owner.get(q) {
                    Some(&o) if o == peer => a.queues[q].lock().unwrap_or_else(|e| e.into_inner()).push_back((seq & ((1 << TAG_BITS) - 1), r)),
                    _ => log::warn(format!("ibgda: PE {peer} answered NIC frame {seq:#x}, which names none of this PE's queue pairs to it; ignored")),
                }
            }),
        };
        let proxy = Proxy::new(s, Some(hooks))?;

        // 2. The queues (shared memory), the NIC's QPs, and the device table's entries.
        let layout = QpLayout { log_sq };
        let queues = platform.host_shared((nqp * layout.bytes()).max(4096))?;
        // SAFETY: the return slots of every QP, in `queues`, alive until the NIC stopped; the NIC
        // writes fetched values there (local writes only: no remote access).
        unsafe { regions.register(RET_KEY, queues.host_ptr(), queues.len() as u64, Access::LOCAL_WRITE) }
            .map_err(|e| Error::new(format!("ibgda: registering the return slots: {e}")))?;
        let table = DeviceTable::alloc(&*platform, nqp, n, qps_per_pe as usize, chunks)?;
        let mut nic = Nic::new(regions.clone(), fault.clone());
        nic.set_ack_only(ack_only);
        let start = fault.start_index;
        let mut entries = vec![QpEntry::default(); n * qps_per_pe as usize];
        for (q, &(pe, k)) in qps.iter().enumerate() {
            let base = q * layout.bytes();
            let host = |off: usize| queues.host_ptr() as usize + base + off;
            let devp = |off: usize| queues.device_addr() + (base + off) as u64;
            // SAFETY: the CQ and DBR of QP q inside `queues` (zeroed, not yet used by anyone).
            unsafe {
                qp::init_cq(host(layout.cq()) as *mut u8, 0, true, start);
                qp::init_dbr(host(layout.dbr()) as *mut u8, start);
            }
            let qpn = QPN0 + q as u32;
            let setup = QpSetup {
                qpn,
                sq: host(layout.sq()) as *const u8,
                log_sq,
                dbr: host(layout.dbr()) as *const u8,
                db: host(layout.db()) as *const u8,
                cq: CqSetup { base: host(layout.cq()) as *mut u8, log_n: 0, collapsed: true, dbr: std::ptr::null(), overrun_ignore: true },
                start,
            };
            let wire = WireRemote { port: proxy.nic_port(), pe, qp: q, answers: answers.clone() };
            // SAFETY: every address lies in `queues`, which this transport keeps until the NIC thread
            // is stopped (shutdown, and Drop), laid out as the emulator expects.
            unsafe { nic.add_qp(setup, Box::new(wire)) }.map_err(|e| Error::new(format!("ibgda: QP {q}: {e}")))?;
            entries[pe as usize * qps_per_pe as usize + k as usize] = QpEntry {
                desc: QpDesc {
                    sq: devp(layout.sq()),
                    dbr: devp(layout.dbr()),
                    db: devp(layout.db()),
                    cq: devp(layout.cq()),
                    cq_dbr: 0,
                    counters: table.counters(q),
                    qpn,
                    log_sq,
                    log_cq: 0,
                    flags: QP_CQ_COLLAPSED,
                    batch: BATCH,
                    reserved: 0,
                },
                ret: devp(layout.ret()),
            };
        }

        // 3. Every PE's heap address and rkeys, then the device table.
        let mine: Vec<u32> = (0..chunks).map(|c| heap_key(me, c)).collect();
        let (bases, keys) = exchange_keys(boot, "rshmem_init (ibgda keys)", heap_base, &mine)?;
        let rkeys: Vec<u32> = keys.concat();
        let t = Table { qps_per_pe, key_shift: KEY_SHIFT, max_wqe: EMU_MAX_WQE, ret_lkey: RET_KEY, ..Table::default() };
        table.write(&*platform, nqp, start, t, &entries, &bases, &rkeys, &mine)?;
        log::info(format!(
            "ibgda: PE {me}: emulated NIC, {qps_per_pe} QPs to each of {} PEs on other nodes, {} WQEBBs each, {chunks} key chunks",
            nqp / qps_per_pe.max(1) as usize,
            1u32 << log_sq
        ));
        Ok(Ibgda {
            proxy,
            engine: Engine::Emulated(Emulated { thread: Mutex::new(Some(nic.spawn())), regions, _queues: queues }),
            remote,
            platform,
            table,
            locals: Mutex::new(Vec::new()),
            wait_limit: wait_limit(),
        })
    }

    /// Stops the emulated NIC's thread (it reads the queues), if it runs; returns the NIC.
    #[allow(irrefutable_let_patterns)]
    fn stop_nic(&self) -> Option<Nic> {
        if let Engine::Emulated(e) = &self.engine {
            return e.thread.lock().unwrap_or_else(|e| e.into_inner()).take().map(NicThread::stop);
        }
        None
    }
}

impl Transport for Ibgda {
    fn name(&self) -> &'static str {
        "ibgda"
    }
    fn reaches(&self, pe: usize) -> bool {
        self.remote.get(pe).copied().unwrap_or(false)
    }
    fn route_code(&self) -> u8 {
        rshmem_device::state::ROUTE_IBGDA
    }
    fn device_channel(&self) -> Option<DeviceChannel> {
        self.proxy.device_channel()
    }
    fn device_table(&self) -> u64 {
        self.table.at(self.table.table_at)
    }
    fn register(&self, c: Collective, range: std::ops::Range<usize>) -> Result<()> {
        match &self.engine {
            // The emulated NIC registered the whole reserved heap at init (its responder checks what
            // is backed on every access).
            Engine::Emulated(_) => {}
            #[cfg(feature = "verbs")]
            Engine::Real(r) => r.register(c, &self.table, &*self.platform, range.clone())?,
        }
        self.proxy.register(c, range)
    }
    fn register_buffer(&self, addr: usize, len: usize) -> Result<()> {
        let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
        if l.len() >= MAX_LOCAL_REGIONS {
            return Err(Error::new(format!("rshmem_buffer_register: the ibgda transport holds at most {MAX_LOCAL_REGIONS} registered buffers")));
        }
        let key = match &self.engine {
            Engine::Emulated(e) => {
                let key = (0..).map(|i| LOCAL_KEY0 + i).find(|k| !l.iter().any(|x| x.2 == *k)).expect("a free key");
                let dma: Arc<dyn Dma> = Arc::new(PlatformDma(self.platform.clone()));
                // SAFETY: the program promises the buffer stays valid while registered (NVSHMEM's
                // contract of nvshmemx_buffer_register); unregister removes it before the program frees it.
                unsafe { e.regions.register_with(key, addr as *mut u8, len as u64, Access::LOCAL_WRITE, Some(dma)) }
                    .map_err(|e| Error::new(format!("rshmem_buffer_register: {e}")))?;
                key
            }
            #[cfg(feature = "verbs")]
            Engine::Real(r) => r.register_local(addr, len)?,
        };
        l.push((addr as u64, len as u64, key));
        self.table.write_locals(&*self.platform, &l)
    }
    fn unregister_buffer(&self, addr: usize) -> Result<()> {
        let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = l.iter().position(|e| e.0 == addr as u64) {
            let (_, _, key) = l.remove(i);
            self.table.write_locals(&*self.platform, &l)?;
            match &self.engine {
                Engine::Emulated(e) => {
                    e.regions.deregister(key);
                }
                #[cfg(feature = "verbs")]
                Engine::Real(r) => r.deregister_local(key),
            }
        }
        Ok(())
    }
    unsafe fn putmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        // SAFETY: forwarded contract (host-initiated operations go through the proxy, module docs).
        unsafe { self.proxy.putmem(platform, dst, src, bytes, pe) }
    }
    unsafe fn getmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.proxy.getmem(platform, dst, src, bytes, pe) }
    }
    fn quiet(&self) -> Result<()> {
        self.proxy.quiet()?;
        // Device code quieted its own WQEs; what a kernel left behind (nbi calls without quiet) is
        // complete once the NIC has nothing announced and unanswered.
        match &self.engine {
            Engine::Emulated(e) => {
                if let Some(nic) = e.thread.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                    if !nic.settled(self.wait_limit) {
                        return Err(Error::new(format!("rshmem quiet: the emulated NIC did not complete this PE's work requests within {:?}", self.wait_limit)));
                    }
                }
            }
            #[cfg(feature = "verbs")]
            Engine::Real(r) => r.quiet(&*self.platform, &self.table, self.wait_limit)?,
        }
        Ok(())
    }
    fn shutdown(&self, clean: bool) -> Result<()> {
        // Everything is complete (the final barrier quieted): nothing will be posted any more.
        let nic = self.stop_nic();
        // With RSHMEM_IBGDA_FAULTS set, one line saying how often each fault was injected here.
        if let (Some(nic), Some(list)) = (nic, env::get(env::IBGDA_FAULTS)) {
            log::warn(format!("ibgda: {}={list:?}: this PE's emulated NIC injected {}", env::IBGDA_FAULTS, nic.fault_counts()));
        }
        self.proxy.shutdown(clean)
    }
}

impl Drop for Ibgda {
    fn drop(&mut self) {
        // The NIC thread reads the queues: stop it before they are freed.
        self.stop_nic();
    }
}
