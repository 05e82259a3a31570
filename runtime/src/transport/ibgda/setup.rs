//! What both NICs of the IBGDA transport (the emulated one and a real ConnectX) set up alike: the
//! settings, the table device code reads (`DeviceTable`), the exchange of heap addresses and keys,
//! and which PEs the QPs connect to.

use crate::bootstrap::Bootstrap;
use crate::config::{env, Config};
use crate::error::{Error, Result};
use crate::platform::services::{DeviceMem, Services};
use crate::transport::proxy::Proxy;
use rshmem_device::remote::ibgda::{LocalRegion, QpEntry, Table, MAX_LOCAL_REGIONS, TABLE_MAGIC};
use rshmem_ibgda::emu::FaultConfig;
use rshmem_ibgda::qp::QpCounters;
use std::mem::size_of;
use std::time::Duration;

/// log2 of a key chunk of the heap: 64 MiB (one lkey/rkey per chunk, as NICs register heap granules).
pub(super) const KEY_SHIFT: u32 = 26;
/// Doorbell batching: ring at least every this many WQEBBs (NVSHMEM's NUM_REQUESTS_IN_BATCH).
pub(super) const BATCH: u32 = 32;

/// What either NIC's setup gives the transport: the proxy engine (host-initiated operations, and the
/// emulated NIC's wire), which PEs are remote, and the device table.
pub(super) struct Built {
    pub(super) proxy: Proxy,
    pub(super) remote: Vec<bool>,
    pub(super) table: DeviceTable,
}

/// The transport's settings (`RSHMEM_IBGDA_*`), from init's configuration.
pub(super) struct Settings {
    pub(super) qps_per_pe: u32,
    pub(super) log_sq: u32,
    pub(super) fault: FaultConfig,
    /// What the emulated NIC does (`RSHMEM_IBGDA_EMULATOR`).
    pub(super) emulator: env::IbgdaEmulator,
    /// The emulated NIC's return slots in device memory (`RSHMEM_IBGDA_RET_SLOTS=device`).
    pub(super) ret_in_device: bool,
}

/// How long the host's quiet waits for the NIC: RSHMEM_WAIT_TIMEOUT of init's configuration, else (0 or
/// unset) a year.
pub(super) fn wait_limit(cfg: &Config) -> Duration {
    cfg.wait_timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600))
}

/// The settings from init's configuration.
pub(super) fn settings(cfg: &Config) -> Settings {
    let i = &cfg.ibgda;
    Settings { qps_per_pe: i.qps_per_pe, log_sq: i.log_sq, fault: i.faults.clone(), emulator: i.emulator, ret_in_device: i.ret_in_device }
}

/// The device memory device code reads (one allocation): every QP's posting counters, the [`Table`],
/// the QP entries, the PEs' heap addresses, the rkeys, this PE's lkeys, the registered local buffers.
pub(super) struct DeviceTable {
    mem: DeviceMem,
    n: usize,
    chunks: usize,
    counters_stride: usize,
    pub(super) table_at: usize,
    qps_at: usize,
    bases_at: usize,
    rkeys_at: usize,
    lkeys_at: usize,
    locals_at: usize,
}

impl DeviceTable {
    /// Device memory for `nqp` QPs, `n` PEs of `qps_per_pe` QP slots each, `chunks` key chunks.
    pub(super) fn alloc(platform: &dyn Services, nqp: usize, n: usize, qps_per_pe: usize, chunks: usize) -> Result<DeviceTable> {
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
    pub(super) fn at(&self, off: usize) -> u64 {
        self.mem.addr + off as u64
    }
    /// The device address of QP `q`'s counters.
    pub(super) fn counters(&self, q: usize) -> u64 {
        self.at(q * self.counters_stride)
    }
    /// Writes everything: `nqp` counters starting at WQE count `start`, the table (its array
    /// addresses filled in here), the QP entries, heap addresses, rkeys and lkeys.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write(&self, platform: &dyn Services, nqp: usize, start: u64, mut table: Table, entries: &[QpEntry], bases: &[u64], rkeys: &[u32], lkeys: &[u32]) -> Result<()> {
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
    pub(super) fn write_keys(&self, platform: &dyn Services, rkeys: &[u32], lkeys: &[u32]) -> Result<()> {
        // SAFETY: the key arrays of the allocation, of these sizes; written between kernels.
        unsafe {
            platform.copy(self.at(self.rkeys_at) as *mut u8, bytemuck::cast_slice::<u32, u8>(rkeys).as_ptr(), 4 * rkeys.len())?;
            platform.copy(self.at(self.lkeys_at) as *mut u8, bytemuck::cast_slice::<u32, u8>(lkeys).as_ptr(), 4 * lkeys.len())
        }
    }
    /// Writes the registered local buffers and their count.
    pub(super) fn write_locals(&self, platform: &dyn Services, l: &[(u64, u64, u32)]) -> Result<()> {
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
pub(super) fn exchange_keys(boot: &Bootstrap, call: &str, heap_base: u64, mine: &[u32]) -> Result<(Vec<u64>, Vec<Vec<u32>>)> {
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
pub(super) fn peers(boot: &Bootstrap, qps_per_pe: u32) -> (Vec<bool>, Vec<(u32, u32)>) {
    let remote: Vec<bool> = (0..boot.npes()).map(|pe| !boot.node_pes().contains(&pe)).collect();
    let qps = (0..boot.npes()).filter(|&pe| remote[pe]).flat_map(|pe| (0..qps_per_pe).map(move |k| (pe as u32, k))).collect();
    (remote, qps)
}


/// How an error of the real NIC's setup (`ibgda::create_nic`) that every PE of the job got alike, before
/// any collective step of it, begins ([`agreed_setup_failure`]): init may then fall back to the proxy on
/// every PE.
pub(crate) const SETUP_FAILED: &str = "ibgda: the NIC could not be set up";

/// Whether `e` is an agreed failure of the real NIC's setup (see [`SETUP_FAILED`]).
pub(crate) fn agreed_setup_failure(e: &Error) -> bool {
    crate::transport::agree::is_agreed_failure(e, SETUP_FAILED)
}
