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
//! until the send queue is full, slow completions. The whole suite passes under each.
//! `RSHMEM_IBGDA_EMULATOR=ack` makes the NIC complete every WQE without moving data, to measure the
//! posting side alone.

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

/// Answers to this PE's NIC frames, per QP, as the receivers deliver them.
struct Answers {
    /// `owner[q]`: the PE QP `q` is connected to.
    owner: Vec<u32>,
    queues: Vec<Mutex<VecDeque<(u64, std::result::Result<RemoteDone, RemoteError>)>>>,
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
    fn poll(&mut self) -> Option<(u64, std::result::Result<RemoteDone, RemoteError>)> {
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

/// The IBGDA transport of one PE.
pub struct Ibgda {
    proxy: Proxy,
    nic: Mutex<Option<NicThread>>,
    remote: Vec<bool>,
    platform: Arc<dyn Backend>,
    regions: Arc<MrTable>,
    /// The QPs' queues and return slots (shared with device code).
    _queues: HostShared,
    /// The posting counters and the table (device memory).
    dmem: DeviceMem,
    table_at: u64,
    locals_at: u64,
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

/// The registry's constructor for `ibgda` on a real NIC (every `--diagnose` check passed).
pub fn create_nic(_s: &RemoteSetup) -> Result<Box<dyn Transport>> {
    Err(Error::new("RSHMEM_REMOTE_TRANSPORT=ibgda: the real-NIC setup is not wired into this build (rebuild with --features rshmem/verbs); unset RSHMEM_REMOTE_TRANSPORT to use the proxy"))
}

impl Ibgda {
    fn new_emulated(s: &RemoteSetup) -> Result<Ibgda> {
        let boot = s.boot;
        let platform = s.platform.clone();
        let (me, n) = (boot.pe(), boot.npes());
        let var = |name: &str| env::get(name);
        let qps_per_pe = var(env::IBGDA_QPS_PER_PE).map(|v| env::parse_ibgda_qps(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::IBGDA_QPS_PER_PE)))).transpose()?.unwrap_or(2);
        let log_sq = var(env::IBGDA_QP_DEPTH).map(|v| env::parse_ibgda_depth(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::IBGDA_QP_DEPTH)))).transpose()?.unwrap_or(9);
        let fault = var(env::IBGDA_FAULTS).map(|v| FaultConfig::parse(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::IBGDA_FAULTS)))).transpose()?.unwrap_or_default();
        let ack_only = var(env::IBGDA_EMULATOR).map(|v| env::parse_ibgda_emulator(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::IBGDA_EMULATOR)))).transpose()?.unwrap_or(false);
        if fault.any() && me == 0 {
            log::warn(format!("ibgda: the emulated NIC injects faults ({}): {fault:?}", env::IBGDA_FAULTS));
        }
        if ack_only && me == 0 {
            log::warn(format!("ibgda: {}=ack: the emulated NIC completes WQEs without moving data; results are not valid", env::IBGDA_EMULATOR));
        }
        let remote: Vec<bool> = (0..n).map(|pe| !boot.node_pes().contains(&pe)).collect();
        let peers: Vec<usize> = (0..n).filter(|&pe| remote[pe]).collect();
        let nqp = peers.len() * qps_per_pe as usize;
        let owner: Vec<u32> = peers.iter().flat_map(|&pe| std::iter::repeat_n(pe as u32, qps_per_pe as usize)).collect();
        let answers = Arc::new(Answers { owner: owner.clone(), queues: (0..nqp).map(|_| Mutex::new(VecDeque::new())).collect() });

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

        // 2. The queues (shared memory) and the counters and table (device memory).
        let layout = QpLayout { log_sq };
        let queues = platform.host_shared((nqp * layout.bytes()).max(4096))?;
        // SAFETY: the return slots of every QP, in `queues`, alive until the NIC stopped; the NIC
        // writes fetched values there (local writes only: no remote access).
        unsafe { regions.register(RET_KEY, queues.host_ptr(), queues.len() as u64, Access::LOCAL_WRITE) }
            .map_err(|e| Error::new(format!("ibgda: registering the return slots: {e}")))?;
        let counters_stride = size_of::<QpCounters>().next_multiple_of(64);
        let counters_bytes = (nqp * counters_stride).next_multiple_of(256);
        let table_at = counters_bytes;
        let qps_at = table_at + size_of::<Table>().next_multiple_of(64);
        let bases_at = qps_at + n * qps_per_pe as usize * size_of::<QpEntry>();
        let rkeys_at = bases_at + 8 * n;
        let lkeys_at = rkeys_at + 4 * n * chunks;
        let locals_at = (lkeys_at + 4 * chunks).next_multiple_of(64);
        let total = locals_at + MAX_LOCAL_REGIONS * size_of::<LocalRegion>();
        let dmem = platform.device_mem(total)?;
        let d = |off: usize| dmem.addr + off as u64;
        // The QPs, host side (what the NIC gets) and device side (what the table holds).
        let mut nic = Nic::new(regions.clone(), fault.clone());
        nic.set_ack_only(ack_only);
        let start = fault.start_index;
        let mut entries = vec![QpEntry::default(); n * qps_per_pe as usize];
        for (q, &pe) in owner.iter().enumerate() {
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
            let slot = pe as usize * qps_per_pe as usize + q % qps_per_pe as usize;
            entries[slot] = QpEntry {
                desc: QpDesc {
                    sq: devp(layout.sq()),
                    dbr: devp(layout.dbr()),
                    db: devp(layout.db()),
                    cq: devp(layout.cq()),
                    cq_dbr: 0,
                    counters: d(q * counters_stride),
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

        // 3. Every PE's heap address and rkeys.
        let mut mine = Vec::with_capacity(8 + 4 * chunks);
        mine.extend_from_slice(&heap_base.to_le_bytes());
        for c in 0..chunks {
            mine.extend_from_slice(&heap_key(me, c).to_le_bytes());
        }
        let all = boot.allgather("rshmem_init (ibgda keys)", &mine)?;
        let mut bases = vec![0u64; n];
        let mut rkeys = vec![0u32; n * chunks];
        for (pe, p) in all.iter().enumerate() {
            if p.len() != mine.len() {
                return Err(boot.abort(Error::new(format!("ibgda: PE {pe} sent {} bytes of keys, this PE {} (different heap sizes?)", p.len(), mine.len()))));
            }
            bases[pe] = u64::from_le_bytes(p[..8].try_into().expect("8 bytes"));
            for c in 0..chunks {
                rkeys[pe * chunks + c] = u32::from_le_bytes(p[8 + 4 * c..12 + 4 * c].try_into().expect("4 bytes"));
            }
        }

        // 4. The device memory: counters, table, QP entries, bases, keys.
        let mut blob = vec![0u8; locals_at];
        for q in 0..nqp {
            blob[q * counters_stride..q * counters_stride + size_of::<QpCounters>()].copy_from_slice(bytemuck::bytes_of(&QpCounters::new(start)));
        }
        let table = Table {
            magic: TABLE_MAGIC,
            npes: n as u32,
            qps_per_pe,
            key_shift: KEY_SHIFT,
            key_chunks: chunks as u32,
            max_wqe: EMU_MAX_WQE,
            qps: d(qps_at),
            remote_base: d(bases_at),
            rkeys: d(rkeys_at),
            lkeys: d(lkeys_at),
            locals: d(locals_at),
            nlocals: 0,
            ret_lkey: RET_KEY,
        };
        blob[table_at..table_at + size_of::<Table>()].copy_from_slice(bytemuck::bytes_of(&table));
        blob[qps_at..bases_at].copy_from_slice(bytemuck::cast_slice(&entries));
        blob[bases_at..rkeys_at].copy_from_slice(bytemuck::cast_slice(&bases));
        blob[rkeys_at..lkeys_at].copy_from_slice(bytemuck::cast_slice(&rkeys));
        blob[lkeys_at..lkeys_at + 4 * chunks].copy_from_slice(bytemuck::cast_slice(&rkeys[me * chunks..(me + 1) * chunks]));
        // SAFETY: dmem holds `total` >= blob.len() bytes; nothing reads it yet.
        unsafe { platform.copy(dmem.addr as *mut u8, blob.as_ptr(), blob.len())? };
        let wait_limit = env::wait_timeout().ok().flatten().unwrap_or(Duration::from_secs(365 * 24 * 3600));
        log::info(format!(
            "ibgda: PE {me}: emulated NIC, {qps_per_pe} QPs to each of {} PEs on other nodes, {} WQEBBs each, {chunks} key chunks",
            peers.len(),
            1u32 << log_sq
        ));
        Ok(Ibgda {
            proxy,
            nic: Mutex::new(Some(nic.spawn())),
            remote,
            platform,
            regions,
            _queues: queues,
            table_at: d(table_at),
            locals_at: d(locals_at),
            dmem,
            locals: Mutex::new(Vec::new()),
            wait_limit,
        })
    }

    /// Writes the registered local buffers into the device table.
    fn publish_locals(&self, l: &[(u64, u64, u32)]) -> Result<()> {
        let regions: Vec<LocalRegion> = l.iter().map(|&(start, len, lkey)| LocalRegion { start, len, lkey, _pad: 0 }).collect();
        // SAFETY: the table's local-region array (MAX_LOCAL_REGIONS entries; l is at most that long)
        // and its count, in our device memory; registrations happen between kernels.
        unsafe {
            self.platform.copy(self.locals_at as *mut u8, bytemuck::cast_slice::<LocalRegion, u8>(&regions).as_ptr(), regions.len() * size_of::<LocalRegion>())?;
            let n = l.len() as u32;
            self.platform.copy((self.table_at + std::mem::offset_of!(Table, nlocals) as u64) as *mut u8, n.to_le_bytes().as_ptr(), 4)
        }
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
        self.table_at
    }
    fn register(&self, c: Collective, range: std::ops::Range<usize>) -> Result<()> {
        // The emulated NIC registered the whole reserved heap at init (the responder checks what is
        // backed on every access).
        self.proxy.register(c, range)
    }
    fn register_buffer(&self, addr: usize, len: usize) -> Result<()> {
        let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
        if l.len() >= MAX_LOCAL_REGIONS {
            return Err(Error::new(format!("rshmem_buffer_register: the ibgda transport holds at most {MAX_LOCAL_REGIONS} registered buffers")));
        }
        let key = (0..).map(|i| LOCAL_KEY0 + i).find(|k| !l.iter().any(|e| e.2 == *k)).expect("a free key");
        let dma: Arc<dyn Dma> = Arc::new(PlatformDma(self.platform.clone()));
        // SAFETY: the program promises the buffer stays valid while registered (the NVSHMEM contract of
        // nvshmemx_buffer_register); unregister removes it before the program frees it.
        unsafe { self.regions.register_with(key, addr as *mut u8, len as u64, Access::LOCAL_WRITE, Some(dma)) }
            .map_err(|e| Error::new(format!("rshmem_buffer_register: {e}")))?;
        l.push((addr as u64, len as u64, key));
        self.publish_locals(&l)
    }
    fn unregister_buffer(&self, addr: usize) -> Result<()> {
        let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = l.iter().position(|e| e.0 == addr as u64) {
            let (_, _, key) = l.remove(i);
            self.publish_locals(&l)?;
            self.regions.deregister(key);
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
        if let Some(nic) = self.nic.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if !nic.settled(self.wait_limit) {
                return Err(Error::new(format!("rshmem quiet: the emulated NIC did not complete this PE's work requests within {:?}", self.wait_limit)));
            }
        }
        Ok(())
    }
    fn shutdown(&self, clean: bool) -> Result<()> {
        // Everything is complete (the final barrier quieted): nothing will be posted any more.
        if let Some(nic) = self.nic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let nic = nic.stop();
            let _ = nic; // statistics would go to a debug log here
        }
        self.proxy.shutdown(clean)
    }
}

impl Drop for Ibgda {
    fn drop(&mut self) {
        // The NIC thread reads the queues: stop it before they are freed.
        if let Some(nic) = self.nic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            drop(nic.stop());
        }
        let _ = &self.dmem;
    }
}
