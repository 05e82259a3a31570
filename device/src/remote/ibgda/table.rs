//! The IBGDA table the runtime writes and the checked reads of it (see the module docs of `ibgda`).

use crate::arch;
use crate::route::{fail, route};
use crate::state::{Field, MAX_PES, ROUTE_IBGDA};
use crate::types::Problem;
use bytemuck::{Pod, Zeroable};
use rshmem_ibgda::qp::QpDesc;
use rshmem_ibgda::wqe::{Local, Remote};

/// `Table::magic` of a table the runtime filled in ("RSHIBGDA" v1).
pub const TABLE_MAGIC: u64 = 0x5253_4849_4247_0001;
/// Most registered local buffers the table lists.
pub const MAX_LOCAL_REGIONS: usize = 64;
/// Most QPs per remote PE.
pub const MAX_QPS_PER_PE: u32 = 16;

/// What device code reads to reach PEs routed `ROUTE_IBGDA` (`DeviceState::ibgda` points to it): in
/// device memory on GPUs, written by the host at init (and `nlocals`/the local regions when buffers
/// are registered, between kernels). Every address in it is one device code uses.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// `TABLE_MAGIC` once the runtime has filled the table in.
    pub magic: u64,
    /// The job's PE count: the length, in PEs, of the per-PE arrays below.
    pub npes: u32,
    /// QPs to each remote PE (1..=MAX_QPS_PER_PE).
    pub qps_per_pe: u32,
    /// Heap offsets `[c << key_shift, (c + 1) << key_shift)` are registered under one key (chunk c).
    pub key_shift: u32,
    /// Key chunks of a heap.
    pub key_chunks: u32,
    /// The most bytes one WRITE or READ WQE moves (transfers are split above it).
    pub max_wqe: u64,
    /// `npes * qps_per_pe` [`QpEntry`]s, PE-major (zeroed for PEs not routed IBGDA).
    pub qps: u64,
    /// `npes` u64: the address of each PE's heap as its NIC addresses it (the remote address base).
    pub remote_base: u64,
    /// `npes * key_chunks` u32: the rkey of chunk c of PE p's heap at `p * key_chunks + c`.
    pub rkeys: u64,
    /// `key_chunks` u32: the lkeys of this PE's heap chunks.
    pub lkeys: u64,
    /// `MAX_LOCAL_REGIONS` [`LocalRegion`]s, the first `nlocals` valid: registered local buffers.
    pub locals: u64,
    /// How many of `locals` are valid (at most `MAX_LOCAL_REGIONS`; rewritten between kernels).
    pub nlocals: u32,
    /// The lkey of the return slots (every QP's).
    pub ret_lkey: u32,
}

/// One QP as device code posts to it.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default, PartialEq, Eq)]
pub struct QpEntry {
    /// The QP's queues, doorbells and counters as device code posts to them (`sq == 0`: no QP).
    pub desc: QpDesc,
    /// The QP's `sq_size + 1` [`RetSlot`]s (the last one takes the results nobody reads).
    pub ret: u64,
}

/// Where the NIC writes a fetched value (see the module docs).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default, PartialEq, Eq)]
pub struct RetSlot {
    /// The 8 bytes the NIC wrote: a READ's data or an atomic's old value.
    pub value: u64,
    /// 0: free; else the WQEBB count + 1 of the WQE whose result it holds.
    pub busy: u64,
}
/// Bytes of one [`RetSlot`].
pub const RET_SLOT_BYTES: usize = 16;

/// A registered local buffer: `[start, start + len)` under `lkey`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default, PartialEq, Eq)]
pub struct LocalRegion {
    /// The buffer's first address (as device code sees it).
    pub start: u64,
    /// The buffer's length in bytes.
    pub len: u64,
    /// The local key of the buffer's memory registration (the lkey of WQEs that use it).
    pub lkey: u32,
    /// Padding to 24 bytes (0).
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<QpEntry>() == 80);
const _: () = assert!(core::mem::size_of::<RetSlot>() == RET_SLOT_BYTES);
const _: () = assert!(core::mem::size_of::<Table>() == 80);

/// Bytes of a QP's return slots.
pub const fn ret_bytes(log_sq: u32) -> usize {
    ((1usize << log_sq) + 1) * RET_SLOT_BYTES
}

/// The runtime's table, as only [`table`] hands it out. For a table whose magic is `TABLE_MAGIC` the
/// runtime guarantees (the *table invariant*, on which the reads through its pointers rely):
/// - the table and the arrays it points to stay in place until finalize, unchanged but for `nlocals`
///   and the local regions, which are written between kernels;
/// - `npes` is the job's PE count and `qps_per_pe` is in `1..=MAX_QPS_PER_PE`; `qps` holds
///   `npes * qps_per_pe` entries, `remote_base` `npes` bases, `rkeys` `npes * key_chunks` keys,
///   `lkeys` `key_chunks` keys, `locals` `MAX_LOCAL_REGIONS` regions;
/// - the key chunks cover the heap: every offset below `heap_size` is in a chunk below `key_chunks`;
/// - a PE is routed `ROUTE_IBGDA` (`route::route`, which takes the PE modulo `MAX_PES`) only if it is
///   below `npes`;
/// - an entry with a non-zero `sq` names the live queues, counters and `sq_size + 1` return slots of
///   one QP of the NIC (or the emulated NIC), which the runtime keeps until finalize.
#[derive(Clone, Copy)]
pub(super) struct Tbl(&'static Table);

impl core::ops::Deref for Tbl {
    type Target = Table;
    #[inline(always)]
    fn deref(&self) -> &Table {
        self.0
    }
}

/// A QP entry of the runtime's table with a send queue (`sq != 0`), as only [`qp_for`] and [`each_qp`]
/// hand it out: by the table invariant its queues, counters and return slots are live.
#[derive(Clone, Copy)]
pub(super) struct Qp(&'static QpEntry);

impl core::ops::Deref for Qp {
    type Target = QpEntry;
    #[inline(always)]
    fn deref(&self) -> &QpEntry {
        self.0
    }
}

/// The table, when this PE has the IBGDA transport.
#[inline(always)]
pub(super) fn table() -> Option<Tbl> {
    let t = arch::state_u64(Field::IBGDA) as usize;
    if t == 0 {
        return None;
    }
    // SAFETY: a non-zero `ibgda` is the runtime's table, written before the state was published and
    // alive until finalize; device calls require an initialized rshmem.
    let t = unsafe { &*(t as *const Table) };
    (t.magic == TABLE_MAGIC).then_some(Tbl(t))
}

#[inline(always)]
pub(super) fn table_or_fail(call: &'static str, pe: i32) -> Tbl {
    match table() {
        Some(t) => t,
        None => {
            // The PE is routed IBGDA but the table is missing (address 0) or not initialized (its
            // address, and the magic found there as the length).
            let at = arch::state_u64(Field::IBGDA);
            // SAFETY: read only for the message; a non-zero `ibgda` is the runtime's table address.
            let magic = if at == 0 { 0 } else { unsafe { core::ptr::read_volatile(at as *const u64) } };
            fail(call, if at == 0 { Problem::NoTransport } else { Problem::NotInitialized }, pe, at as usize, magic as usize)
        }
    }
}

/// QP entry `i` of the table (PE-major: `pe * qps_per_pe + k`).
///
/// # Safety
/// `i < t.npes * t.qps_per_pe`.
#[inline(always)]
unsafe fn qp_entry(t: Tbl, i: usize) -> &'static QpEntry {
    // SAFETY: the runtime's array of npes * qps_per_pe entries, alive until finalize (the table
    // invariant); `i` is below that (the caller's contract).
    unsafe { &*((t.0.qps as usize + i * core::mem::size_of::<QpEntry>()) as *const QpEntry) }
}

/// Which of a PE's `n` QPs this thread uses: its warp's (the warp's index in the grid, modulo `n`).
#[inline(always)]
fn my_qp(n: u32) -> u32 {
    let warps = arch::block_size().div_ceil(32);
    (arch::block_index().wrapping_mul(warps) + arch::block_rank() / 32) % n.max(1)
}

/// The QP this thread uses to reach `pe`.
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA` (then `pe % MAX_PES < t.npes`: the table invariant).
#[inline(always)]
pub(super) unsafe fn qp_for(call: &'static str, t: Tbl, pe: i32) -> Qp {
    let n = t.qps_per_pe.max(1);
    let i = (pe as u32 & (MAX_PES as u32 - 1)) * n + my_qp(n);
    // SAFETY: pe % MAX_PES < npes (the caller's contract) and my_qp(n) < n = qps_per_pe (at least 1:
    // the table invariant), so i < npes * qps_per_pe.
    let q = unsafe { qp_entry(t, i as usize) };
    if q.desc.sq == 0 {
        // A PE routed IBGDA without a QP: the table is not what the runtime wrote (the address is
        // the table's, the length the entry's index).
        fail(call, Problem::NoTransport, pe, t.0 as *const Table as usize, i as usize);
    }
    Qp(q)
}

#[inline(always)]
pub(super) fn heap() -> (u64, u64) {
    (arch::state_u64(Field::HEAP_BASE), arch::state_u64(Field::HEAP_SIZE))
}

#[inline(always)]
fn chunk_of(t: &Table, off: u64) -> (u32, u64) {
    if t.key_shift >= 63 {
        return (0, u64::MAX - off);
    }
    let c = off >> t.key_shift;
    (c as u32, ((c + 1) << t.key_shift) - off)
}

/// The remote address and rkey of heap offset `off` on `pe`, and how many bytes from there share the key.
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA` (as for [`qp_for`]) and `off` must be an offset inside the heap
/// (below `heap_size`, the same on every PE).
#[inline(always)]
pub(super) unsafe fn remote_of(t: Tbl, pe: i32, off: u64) -> (Remote, u64) {
    let (c, left) = chunk_of(&t, off);
    let p = pe as usize & (MAX_PES - 1);
    // SAFETY: the runtime's arrays of npes bases and npes * key_chunks rkeys (the table invariant);
    // p < npes for a PE routed IBGDA and c < key_chunks for an offset inside the heap (the caller's
    // contract and the table invariant).
    let (base, rkey) = unsafe {
        (
            *((t.remote_base as usize + 8 * p) as *const u64),
            *((t.rkeys as usize + 4 * (p * t.key_chunks as usize + c as usize)) as *const u32),
        )
    };
    (Remote { addr: base.wrapping_add(off), rkey }, left)
}

/// The lkey of local address `addr` (in this PE's heap or a registered buffer) and how many bytes from
/// there share it; None when the NIC cannot reach it.
#[inline(always)]
pub(super) fn local_of(t: Tbl, addr: u64) -> Option<(Local, u64)> {
    let (base, size) = heap();
    let off = addr.wrapping_sub(base);
    if off < size {
        let (c, left) = chunk_of(&t, off);
        // SAFETY: the runtime's key_chunks lkeys (the table invariant); c < key_chunks for an offset
        // inside the heap (checked above; the key chunks cover the heap).
        let lkey = unsafe { *((t.lkeys as usize + 4 * c as usize) as *const u32) };
        return Some((Local { addr, lkey }, left.min(size - off)));
    }
    let n = (t.nlocals as usize).min(MAX_LOCAL_REGIONS);
    for i in 0..n {
        // SAFETY: the runtime's MAX_LOCAL_REGIONS regions (the table invariant); i is below that.
        let r = unsafe { *((t.locals as usize + i * core::mem::size_of::<LocalRegion>()) as *const LocalRegion) };
        let off = addr.wrapping_sub(r.start);
        if off < r.len {
            return Some((Local { addr, lkey: r.lkey }, r.len - off));
        }
    }
    None
}

/// Calls `f` with every QP entry of PEs routed IBGDA (this thread's one per PE when `mine`).
#[inline(always)]
pub(super) fn each_qp(t: Tbl, mine: bool, mut f: impl FnMut(i32, Qp)) {
    let n = (t.npes as usize).min(MAX_PES);
    let per = t.qps_per_pe.max(1);
    for pe in 0..n {
        if route(pe as i32) != ROUTE_IBGDA {
            continue;
        }
        for q in 0..per {
            if mine && q != my_qp(per) {
                continue;
            }
            // SAFETY: pe < npes and q < per = qps_per_pe (at least 1: the table invariant).
            let e = unsafe { qp_entry(t, pe * per as usize + q as usize) };
            if e.desc.sq != 0 {
                f(pe as i32, Qp(e));
            }
        }
    }
}
