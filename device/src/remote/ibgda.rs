//! The IBGDA path: device threads reach a PE on another node by building mlx5 work-queue entries
//! themselves, updating the doorbell record and ringing the NIC's doorbell, then polling the CQ
//! (design.md "Transports"; `shared/research/ibgda-mlx5.md` §6). No CPU thread sits on the data path
//! of a real NIC. Without one, the IBGDA transport gives device code the queues of rshmem's emulated
//! mlx5 NIC instead, laid out as on hardware: this code cannot tell the difference (only the addresses
//! in the [`Table`] differ). The posting protocol itself (WQEBB reservation, the ready chain, doorbell
//! batching, CQ polling) is `rshmem_ibgda::qp`, shared with the host tests and the emulator's.
//!
//! # What each call posts
//! - `putmem` and friends: RDMA WRITEs from the local buffer (in the symmetric heap, or registered with
//!   `rshmem_buffer_register`), split at the key chunks of both heaps and at the table's largest WQE;
//!   up to 12 bytes from anywhere (a thread-local variable too) as one inline WRITE. Several WQEs of one
//!   call are posted as groups that ring the doorbell once. `put_signal` appends the signal's atomic to
//!   the last group: RC executes it after the WRITEs, so the signal is never visible before the data.
//! - `p`: one inline WRITE. `p`s, non-fetching AMOs and signals of the lanes of a warp that go to one QP
//!   at the same moment are posted as one group (`post_one`: one reservation, one doorbell). `g` and fetching AMOs: a READ or an atomic whose result the NIC writes
//!   into the return slot of its WQE's first WQEBB (below), then a wait for its completion.
//! - AMOs: NVSHMEM's mapping to standard and masked atomics (`rshmem_ibgda::Atomic::amo`); signals:
//!   SET is a masked swap, ADD a 64-bit fetch-add.
//! - `fence`: RC executes the WRITEs and atomics of one QP in order at the target, and a thread's calls
//!   to a PE all go through one QP, so puts, AMOs and signals need nothing. A READ a `get_nbi` left
//!   in flight could still be re-executed after a later WRITE (a retried READ reads memory again), so
//!   while one is outstanding on a QP of this thread (`QpCounters::read_head`) fence posts a NOP with
//!   the fence bit there: the NIC starts nothing after it before the earlier READs and atomics
//!   finished.
//! - `quiet`: every QP's completion through what was ready when it was called.
//!
//! # Queue pairs
//! `qps_per_pe` RC QPs to each remote PE; a thread uses the one of its warp (the warp's index in the
//! grid modulo `qps_per_pe`), so every call of a thread to a PE goes through one QP, in order, and
//! warps of one block spread over the QPs (a QP is in-order: one warp's WQEs never wait behind
//! another's on a different QP). Block-scoped calls are posted by thread 0, through its warp's QP;
//! `quiet` covers every QP.
//!
//! # Return slots
//! A READ for `g` and an atomic's old value need a local buffer the NIC writes: each QP has one
//! [`RetSlot`] per WQEBB of its send queue, used by the WQE whose first WQEBB has that index. The slot
//! is claimed with its `busy` word (the WQEBB count + 1) after the reservation and freed after the value
//! is read: a reservation one ring later (possible as soon as the WQE completed, before its poster read
//! the value) waits for the slot instead of letting the NIC overwrite it. Non-fetching atomics write
//! their (unused) old value into the QP's last slot, which nobody reads.
//!
//! # Errors
//! An error completion (a bad key or address at the target, an unreachable PE, a malformed WQE) stops
//! the PE with a message naming the call, the operation, the target PE and the PRM syndrome
//! (`types::Problem::Nic`). A local buffer the NIC cannot reach (not in the heap, not registered, more
//! than 12 bytes) stops it naming the buffer. Waits go through `wait::idle`: the CPU backend enforces
//! RSHMEM_WAIT_TIMEOUT, and waiting threads apply the inbound operations of other nodes.

use super::proxy::amo as code;
use super::wait::{idle, idle_every};
use crate::arch;
use crate::route::{fail, route, St};
use crate::state::{Field, MAX_PES, ROUTE_IBGDA, SIGNAL_SET};
use crate::types::{Problem, Rmw, Scope, Sig};
use bytemuck::{Pod, Zeroable};
use core::mem::offset_of;
use rshmem_ibgda::mlx5::fm_ce_se;
use rshmem_ibgda::PollError;
use rshmem_ibgda::qp::{QpDesc, Sys};
use rshmem_ibgda::wqe::{Amo, Atomic, Local, Remote, Wqe, INLINE_DS3};

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
    pub magic: u64,
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
    pub nlocals: u32,
    /// The lkey of the return slots (every QP's).
    pub ret_lkey: u32,
}

/// One QP as device code posts to it.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default, PartialEq, Eq)]
pub struct QpEntry {
    pub desc: QpDesc,
    /// The QP's `sq_size + 1` [`RetSlot`]s (the last one takes the results nobody reads).
    pub ret: u64,
}

/// Where the NIC writes a fetched value (see the module docs).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default, PartialEq, Eq)]
pub struct RetSlot {
    pub value: u64,
    /// 0: free; else the WQEBB count + 1 of the WQE whose result it holds.
    pub busy: u64,
}
pub const RET_SLOT_BYTES: usize = 16;

/// A registered local buffer: `[start, start + len)` under `lkey`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default, PartialEq, Eq)]
pub struct LocalRegion {
    pub start: u64,
    pub len: u64,
    pub lkey: u32,
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<QpEntry>() == 80);
const _: () = assert!(core::mem::size_of::<RetSlot>() == RET_SLOT_BYTES);
const _: () = assert!(core::mem::size_of::<Table>() == 80);

/// Bytes of a QP's return slots.
pub const fn ret_bytes(log_sq: u32) -> usize {
    ((1usize << log_sq) + 1) * RET_SLOT_BYTES
}

/// Stops the PE on a failed reservation or completion (`PollError`), naming the call and the PE.
#[cold]
#[inline(never)]
fn fail_poll(call: &'static str, pe: i32, e: PollError) -> ! {
    match e {
        PollError::Cqe(c) => fail(call, Problem::Nic { syndrome: c.syndrome, vendor: c.vendor_syndrome, opcode: c.wqe_opcode }, pe, c.wqe_counter as usize, 0),
        PollError::Timeout { idx, .. } => fail(call, Problem::WaitTimeout, pe, idx as usize, 0),
        PollError::TooLarge { wqebbs, sq_size } => fail(call, Problem::NotInitialized, pe, wqebbs as usize, sq_size as usize),
    }
}

/// The atomics and fences the posting code runs on, for device threads: system scope (the queues are
/// in host memory for the emulated NIC, and NIC-visible memory for a real one), waits through
/// `wait::idle` (which applies inbound operations and, on the CPU backend, enforces the wait limit).
struct Dev {
    call: &'static str,
}

// SAFETY: every method is the arch layer's system-scope atomic (or fence) on the given word, which the
// posting code's callers guarantee is aligned, live and accessed only atomically; the fences are
// system-scope.
unsafe impl Sys for Dev {
    #[inline(always)]
    unsafe fn fetch_add_u64(&self, p: *mut u64, v: u64) -> u64 {
        // SAFETY: the trait's contract.
        unsafe { arch::rmw_u64(Rmw::Add, p, v) }
    }
    #[inline(always)]
    unsafe fn fetch_max_u64(&self, p: *mut u64, v: u64) -> u64 {
        // SAFETY: the trait's contract.
        unsafe { arch::rmw_u64(Rmw::Max, p, v) }
    }
    #[inline(always)]
    unsafe fn cas_u64(&self, p: *mut u64, current: u64, new: u64) -> u64 {
        // SAFETY: the trait's contract.
        unsafe { arch::cas_u64(p, current, new) }
    }
    #[inline(always)]
    unsafe fn cas_u32(&self, p: *mut u32, current: u32, new: u32) -> u32 {
        // SAFETY: the trait's contract.
        unsafe { arch::cas_u32(p, current, new) }
    }
    #[inline(always)]
    unsafe fn load_u64(&self, p: *const u64) -> u64 {
        // SAFETY: the trait's contract.
        unsafe { arch::load_relaxed_u64(p) }
    }
    #[inline(always)]
    unsafe fn load_acquire_u32(&self, p: *const u32) -> u32 {
        // SAFETY: the trait's contract.
        unsafe { arch::load_acquire_u32(p) }
    }
    #[inline(always)]
    unsafe fn store_u32(&self, p: *mut u32, v: u32) {
        // SAFETY: the trait's contract.
        unsafe { arch::store_relaxed_u32(p, v) }
    }
    #[inline(always)]
    unsafe fn store_release_u32(&self, p: *mut u32, v: u32) {
        // SAFETY: the trait's contract.
        unsafe { arch::store_release_u32(p, v) }
    }
    #[inline(always)]
    unsafe fn store_release_u64(&self, p: *mut u64, v: u64) {
        // SAFETY: the trait's contract.
        unsafe { arch::store_release_u64(p, v) }
    }
    #[inline(always)]
    fn fence_acq_rel(&self) {
        arch::fence_acq_rel()
    }
    #[inline(always)]
    fn fence_nic(&self) {
        arch::fence_sc()
    }
    #[inline(always)]
    fn idle(&self, spins: &mut u64) -> bool {
        // Posting waits are on other threads of this PE (the ready chain, the doorbell lock) or on
        // the NIC: look at the inbound queue rarely and back off, so that thousands of waiting
        // threads do not flood the host memory the queue lives in.
        idle_every(spins, self.call, 255);
        true
    }
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
struct Tbl(&'static Table);

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
struct Qp(&'static QpEntry);

impl core::ops::Deref for Qp {
    type Target = QpEntry;
    #[inline(always)]
    fn deref(&self) -> &QpEntry {
        self.0
    }
}

/// The table, when this PE has the IBGDA transport.
#[inline(always)]
fn table() -> Option<Tbl> {
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
fn table_or_fail(call: &'static str, pe: i32) -> Tbl {
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
unsafe fn qp_for(call: &'static str, t: Tbl, pe: i32) -> Qp {
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
fn heap() -> (u64, u64) {
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
unsafe fn remote_of(t: Tbl, pe: i32, off: u64) -> (Remote, u64) {
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
fn local_of(t: Tbl, addr: u64) -> Option<(Local, u64)> {
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

/// Posts `wqes` to `qp` as one group (one doorbell at most); returns the count to poll for.
///
/// # Safety
/// The WQEs' local buffers (and remote ranges) must stay valid until the WQEs complete.
#[inline(always)]
unsafe fn post(call: &'static str, pe: i32, qp: Qp, wqes: &[Wqe]) -> u64 {
    // SAFETY: the runtime's queues (a `Qp`: live by the table invariant); the WQEs' buffers are valid
    // until completion (the caller's contract).
    match unsafe { qp.desc.post(&Dev { call }, wqes) } {
        Ok(end) => end,
        Err(e) => fail_poll(call, pe, e),
    }
}

/// Posts `w`, a WQE nobody waits for (`p`, a non-fetching AMO or signal), together with the lanes of
/// this warp that post to the same QP at this moment, as NVSHMEM does: one reservation by the group's
/// leader for all of them, each lane writes its WQE into its slot, the warp synchronizes (ordering the
/// lanes' WQE stores before the leader's release fence in `mark_ready`), and the leader marks the
/// group ready and rings at most once; only the group's last WQE asks for a CQE. A warp whose lanes
/// all `p` to one PE thus costs one pass through the ready chain instead of 32 (on the GPU; the CPU
/// backend's threads post alone). WQEs of two WQEBBs go alone.
///
/// # Safety
/// As [`post`], for `w`.
#[inline(always)]
unsafe fn post_one(call: &'static str, pe: i32, qp: Qp, w: Wqe) {
    if w.wqebbs() != 1 {
        // SAFETY: the caller's contract.
        unsafe { post(call, pe, qp, &[w]) };
        return;
    }
    let (peers, lane) = arch::warp_peers(qp.0 as *const QpEntry as u64);
    if peers == 1 << lane {
        // SAFETY: the caller's contract.
        unsafe { post(call, pe, qp, &[w]) };
        return;
    }
    let leader = peers.trailing_zeros();
    let n = peers.count_ones();
    let rank = (peers & ((1u32 << lane) - 1)).count_ones();
    let s = Dev { call };
    let d = &qp.desc;
    let mut base = 0;
    if lane == leader {
        // SAFETY: the QP's queues and counters (a `Qp`: live).
        base = match unsafe { d.reserve(&s, n) } {
            Ok(b) => b,
            Err(e) => fail_poll(call, pe, e),
        };
    }
    let base = arch::warp_bcast_u64(peers, leader, base);
    let mut w = w;
    if rank == n - 1 {
        w.set_flags(w.flags() | fm_ce_se::CQ_UPDATE);
    }
    // SAFETY: WQEBB base + rank is this lane's, reserved by the leader for the group; `w`'s buffers
    // stay valid until it completes (the caller's contract).
    unsafe { d.write(&s, base + rank as u64, &w) };
    arch::warp_sync_mask(peers);
    if lane == leader {
        // SAFETY: the group's WQEBBs are all written (the warp barrier above).
        if let Err(e) = unsafe { d.submit(&s, base, n) } {
            fail_poll(call, pe, e);
        }
    }
}

/// Waits until `qp` has completed everything below `end`.
#[inline(always)]
fn wait(call: &'static str, pe: i32, qp: Qp, end: u64) {
    // SAFETY: the QP's queues, counters and CQ (a `Qp`: live).
    if let Err(e) = unsafe { qp.desc.poll(&Dev { call }, end) } {
        fail_poll(call, pe, e);
    }
    arch::fence_acq_rel();
}

/// The slot for results nobody reads (non-fetching atomics).
#[inline(always)]
fn discard(t: Tbl, qp: Qp) -> Local {
    let last = qp.desc.sq_size() as usize;
    Local { addr: (qp.ret as usize + last * RET_SLOT_BYTES) as u64, lkey: t.ret_lkey }
}

/// Posts one fetching WQE (`build` makes it from the local buffer it gets: its return slot) and returns
/// the 8 bytes the NIC wrote there.
///
/// # Safety
/// The WQE `build` makes must use the local buffer it is given as its only local buffer, and its
/// remote range must stay valid until it completes.
#[inline(always)]
unsafe fn fetch(call: &'static str, pe: i32, t: Tbl, qp: Qp, build: impl Fn(Local) -> Wqe) -> [u8; 8] {
    let s = Dev { call };
    let d = &qp.desc;
    // SAFETY: the runtime's queues, counters and return slots (a `Qp`: live); the WQE writes only into
    // its return slot (the caller's contract); the slot protocol of the module docs: the busy word is written only by the holder of the reservation of its WQEBB
    // (set after the previous holder cleared it, cleared after the value is read); the value is read
    // after the completion, whose CQE the NIC wrote after the value.
    unsafe {
        let probe = build(Local { addr: 0, lkey: 0 });
        let tail = probe.wqebbs() > 1;
        let n = probe.wqebbs().max(1) + tail as u32;
        let base = match d.reserve(&s, n) {
            Ok(b) => b,
            Err(e) => fail_poll(call, pe, e),
        };
        let slot = qp.ret as usize + (base & (d.sq_size() as u64 - 1)) as usize * RET_SLOT_BYTES;
        let busy = (slot + offset_of!(RetSlot, busy)) as *mut u64;
        let mut spins = 0;
        while arch::load_acquire_u64(busy) != 0 {
            idle(&mut spins, call);
        }
        arch::store_relaxed_u64(busy, base + 1);
        let mut w = build(Local { addr: (slot + offset_of!(RetSlot, value)) as u64, lkey: t.ret_lkey });
        if tail {
            d.write(&s, base, &w);
            d.write(&s, base + n as u64 - 1, &Wqe::nop(fm_ce_se::CQ_UPDATE));
        } else {
            w.set_flags(w.flags() | fm_ce_se::CQ_UPDATE);
            d.write(&s, base, &w);
        }
        if let Err(e) = d.submit(&s, base, n) {
            fail_poll(call, pe, e);
        }
        wait(call, pe, qp, base + n as u64);
        let v = arch::load_relaxed_u64((slot + offset_of!(RetSlot, value)) as *const u64);
        arch::store_release_u64(busy, 0);
        v.to_le_bytes()
    }
}

/// `p` of `len` (1..=8) bytes of `bits` to heap address `local` on `pe`: one inline WRITE, completed by
/// quiet.
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA`, and `[local, local + len)` must lie in this PE's heap (what
/// `route::locate` checks; with checks off, the API's contract).
pub(crate) unsafe fn put_inline(call: &'static str, local: usize, len: usize, bits: u64, pe: i32) {
    let t = table_or_fail(call, pe);
    // SAFETY: `pe` is routed IBGDA and `local` lies in the heap (the caller's contract); an inline
    // WRITE has no local buffer.
    unsafe {
        let qp = qp_for(call, t, pe);
        let (r, _) = remote_of(t, pe, local as u64 - heap().0);
        post_one(call, pe, qp, Wqe::rdma_write_inline_value(0, r, bits, len as u32));
    }
}

/// `g` of `len` (1..=8) bytes at heap address `local` on `pe`: a READ into the return slot.
///
/// # Safety
/// As [`put_inline`].
pub(crate) unsafe fn get_inline(call: &'static str, local: usize, len: usize, pe: i32) -> u64 {
    let t = table_or_fail(call, pe);
    // SAFETY: as in `put_inline`; the READ's local buffer is the slot `fetch` gives it.
    let raw = unsafe {
        let qp = qp_for(call, t, pe);
        let (r, _) = remote_of(t, pe, local as u64 - heap().0);
        fetch(call, pe, t, qp, |l| Wqe::rdma_read(0, r, l, len as u32))
    };
    let mut b = [0u8; 8];
    b[..len].copy_from_slice(&raw[..len]);
    u64::from_le_bytes(b)
}

/// The largest number of WQEs posted as one group (one doorbell) by a transfer.
const GROUP: usize = 4;

/// Posts the WQEs of a transfer of `bytes` between the local address `local` (in the heap or a
/// registered buffer: the caller checked its start) and heap offset `remote_off` on `pe`: one
/// `make(remote, local, n)` per piece, split where a key chunk of either side or the largest WQE ends,
/// posted in groups of `GROUP` (one doorbell each); `tail` (put_signal's atomic) joins the last group.
/// Returns the count to poll for (0 when nothing was posted).
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA`, `[remote_off, remote_off + bytes)` must lie in the heap, and the
/// local range (and `tail`'s buffers) must stay valid until the WQEs complete; `make` must build a
/// WQE whose only local buffer is the one it is given.
#[allow(clippy::too_many_arguments)]
unsafe fn post_pieces(call: &'static str, pe: i32, t: Tbl, qp: Qp, local: u64, remote_off: u64, bytes: u64, make: impl Fn(Remote, Local, u32) -> Wqe, tail: Option<Wqe>) -> u64 {
    let mut group: [Wqe; GROUP + 1] = [Wqe::nop(0); GROUP + 1];
    let (mut k, mut done, mut end) = (0, 0u64, 0);
    while done < bytes {
        let (l, lleft) = match local_of(t, local + done) {
            Some(x) => x,
            None => fail(call, Problem::Unregistered, pe, (local + done) as usize, (bytes - done) as usize),
        };
        // SAFETY: `pe` is routed IBGDA and remote_off + done < remote_off + bytes lies in the heap
        // (the caller's contract).
        let (r, rleft) = unsafe { remote_of(t, pe, remote_off + done) };
        let n = (bytes - done).min(lleft).min(rleft).min(t.max_wqe.max(1));
        group[k] = make(r, l, n as u32);
        k += 1;
        done += n;
        if k == GROUP && done < bytes {
            // SAFETY: the pieces' buffers stay valid until completion (the caller's contract).
            end = unsafe { post(call, pe, qp, &group[..k]) };
            k = 0;
        }
    }
    if let Some(w) = tail {
        group[k] = w;
        k += 1;
    }
    if k > 0 {
        // SAFETY: as above, and for `tail` (the caller's contract).
        end = unsafe { post(call, pe, qp, &group[..k]) };
    }
    end
}

/// Stops the PE when the NIC cannot reach the local buffer of a transfer larger than the inline limit.
#[inline(always)]
fn check_reachable(call: &'static str, t: Tbl, pe: i32, local: *const u8, bytes: usize) {
    if local_of(t, local as u64).is_none() {
        let why = if arch::is_local(local) { Problem::LocalBuffer } else { Problem::Unregistered };
        fail(call, why, pe, local as usize, bytes);
    }
}

/// putmem (and put_signal) of `bytes` from `src` to heap address `dst_local` on `pe`, by every thread of
/// `scope` (thread 0 posts). `blocking`: return once the source may be reused.
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA`; as `ops::putmem_scoped`: `[dst_local, dst_local + bytes)` (and
/// the signal word) lie in the heap (checked by `route::locate`, or the API's contract with checks
/// off), `src` readable for `bytes` (by the NIC: see the module docs), unchanged until the call
/// returns (blocking) or the next quiet (nbi).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn put(scope: Scope, call: &'static str, dst_local: usize, src: *const u8, bytes: usize, pe: i32, blocking: bool, sig: Option<Sig>) {
    let t = table_or_fail(call, pe);
    // SAFETY: `pe` is routed IBGDA (the caller's contract).
    let qp = unsafe { qp_for(call, t, pe) };
    scope.sync();
    if scope.rank() == 0 {
        let heap_base = heap().0;
        let dst_off = dst_local as u64 - heap_base;
        let signal = sig.map(|s| {
            // SAFETY: the signal word lies in the heap (the caller's contract).
            let (r, _) = unsafe { remote_of(t, pe, s.local as u64 - heap_base) };
            Wqe::atomic(0, r, discard(t, qp), Atomic::amo(amo_of(signal_code(s.op)), 8, s.value, 0))
        });
        let end = if bytes <= INLINE_DS3 && bytes != 0 {
            // Small: the bytes travel in the WQE (from any memory, a local variable too).
            let mut b = [0u8; INLINE_DS3];
            // SAFETY: src readable for bytes <= 12 (the caller's contract); b holds 12 bytes.
            unsafe { core::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), bytes) };
            // SAFETY: `dst_off` lies in the heap (the caller's contract); an inline WRITE has no local
            // buffer, the signal's atomic writes into the discard slot.
            unsafe {
                let (r, _) = remote_of(t, pe, dst_off);
                let w = Wqe::rdma_write_inline(0, r, &b[..bytes]).unwrap_or(Wqe::nop(0));
                match signal {
                    Some(sw) => post(call, pe, qp, &[w, sw]),
                    None => post(call, pe, qp, &[w]),
                }
            }
        } else {
            if bytes != 0 {
                check_reachable(call, t, pe, src, bytes);
                // The NIC reads the source outside this thread (DMA): make every store the group
                // made to it visible at system scope first.
                arch::fence_sc();
            }
            // SAFETY: the destination range lies in the heap and `src` stays valid until completion
            // (the caller's contract: the call waits below when blocking, else quiet does).
            unsafe { post_pieces(call, pe, t, qp, src as u64, dst_off, bytes as u64, |r, l, n| Wqe::rdma_write(0, r, l, n), signal) }
        };
        if blocking && end != 0 {
            wait(call, pe, qp, end);
        }
    }
    scope.sync();
}

/// getmem of `bytes` from heap address `src_local` on `pe` to `dst`, by every thread of `scope` (thread
/// 0 posts). `blocking`: wait until the data is here.
///
/// # Safety
/// `pe` must be routed `ROUTE_IBGDA`; as `ops::getmem_scoped`: `[src_local, src_local + bytes)` lies
/// in the heap (checked by `route::locate`, or the API's contract with checks off), `dst` writable for
/// `bytes` and not read before the call returns (blocking) or the next quiet (nbi).
pub(crate) unsafe fn get(scope: Scope, call: &'static str, dst: *mut u8, src_local: usize, bytes: usize, pe: i32, blocking: bool) {
    let t = table_or_fail(call, pe);
    // SAFETY: `pe` is routed IBGDA (the caller's contract).
    let qp = unsafe { qp_for(call, t, pe) };
    scope.sync();
    if scope.rank() == 0 && bytes != 0 {
        let src_off = src_local as u64 - heap().0;
        if bytes <= 8 && local_of(t, dst as u64).is_none() {
            // Up to 8 bytes into memory the NIC cannot reach: through the return slot, as `g`.
            // SAFETY: `src_off` lies in the heap (the caller's contract); the READ's local buffer is
            // the slot `fetch` gives it.
            let raw = unsafe {
                let (r, _) = remote_of(t, pe, src_off);
                fetch(call, pe, t, qp, |l| Wqe::rdma_read(0, r, l, bytes as u32))
            };
            // SAFETY: dst writable for bytes <= 8 (the caller's contract).
            unsafe { core::ptr::copy_nonoverlapping(raw.as_ptr(), dst, bytes) };
        } else {
            check_reachable(call, t, pe, dst, bytes);
            // SAFETY: the source range lies in the heap and `dst` stays valid until completion (the
            // caller's contract: the call waits below when blocking, else quiet does).
            let end = unsafe { post_pieces(call, pe, t, qp, dst as u64, src_off, bytes as u64, |r, l, n| Wqe::rdma_read(0, r, l, n), None) };
            if blocking {
                wait(call, pe, qp, end);
            } else {
                // A READ left in flight: a fence must not let later WQEs overtake it.
                // SAFETY: the QP's counters (a `Qp`: live), accessed only atomically.
                unsafe { qp.desc.note_read(&Dev { call }, end) };
            }
        }
    }
    scope.sync();
}

/// The NVSHMEM AMO of a device AMO code (`proxy::amo`).
#[inline(always)]
fn amo_of(code: u16) -> Amo {
    use code::*;
    match code {
        FETCH => Amo::Fetch,
        SET | SWAP => Amo::Swap,
        COMPARE_SWAP => Amo::CompareSwap,
        FETCH_ADD | ADD => Amo::Add,
        FETCH_AND | AND => Amo::And,
        FETCH_OR | OR => Amo::Or,
        _ => Amo::Xor,
    }
}

/// An AMO (`code`, a `proxy::amo` code) of `width` bytes at heap address `local` on `pe`. `fetch`: wait for
/// and return the old value; else posted (completed by quiet) and 0 returned.
///
/// # Safety
/// As [`put_inline`], for the `width` bytes at `local`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn amo(call: &'static str, local: usize, width: usize, code: u16, value: u64, compare: u64, pe: i32, fetch_old: bool) -> u64 {
    let t = table_or_fail(call, pe);
    let a = Atomic::amo(amo_of(code), width as u32, value, compare);
    // SAFETY: `pe` is routed IBGDA and `local` lies in the heap (the caller's contract); the atomic's
    // local buffer is its return slot (`fetch`) or the discard slot.
    unsafe {
        let qp = qp_for(call, t, pe);
        let (r, _) = remote_of(t, pe, local as u64 - heap().0);
        if fetch_old {
            a.fetched(fetch(call, pe, t, qp, |l| Wqe::atomic(0, r, l, a)))
        } else {
            post_one(call, pe, qp, Wqe::atomic(0, r, discard(t, qp), a));
            0
        }
    }
}

/// signal_op (SIGNAL_SET / SIGNAL_ADD, checked by the caller) of `value` on the u64 at heap address
/// `sig_local` on `pe`: posted, completed by quiet.
///
/// # Safety
/// As [`put_inline`], for the 8 bytes at `sig_local`.
pub(crate) unsafe fn signal(call: &'static str, sig_local: usize, value: u64, sig_op: i32, pe: i32) {
    // SAFETY: the caller's contract.
    unsafe { amo(call, sig_local, 8, signal_code(sig_op), value, 0, pe, false) };
}

/// The device AMO code of a signal operation (SIGNAL_SET: a swap, SIGNAL_ADD: an add).
#[inline(always)]
fn signal_code(sig_op: i32) -> u16 {
    if sig_op == SIGNAL_SET {
        code::SET
    } else {
        code::ADD
    }
}

/// Calls `f` with every QP entry of PEs routed IBGDA (this thread's one per PE when `mine`).
#[inline(always)]
fn each_qp(t: Tbl, mine: bool, mut f: impl FnMut(i32, Qp)) {
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

/// The IBGDA part of `quiet`: every QP completes what was ready when it was called (this thread's WQEs
/// are among them).
pub(crate) fn quiet() {
    const CALL: &str = "rshmem_quiet (IBGDA: waiting for completions)\0";
    let Some(t) = table() else { return };
    each_qp(t, false, |pe, qp| {
        // SAFETY: the QP's queues, counters and CQ (a `Qp`: live).
        if let Err(e) = unsafe { qp.desc.quiet(&Dev { call: CALL }) } {
            fail_poll(CALL, pe, e);
        }
    });
    arch::fence_acq_rel();
}

/// The IBGDA part of `fence`: a fenced NOP on each of this thread's QPs with a READ outstanding (see
/// the module docs: nothing else needs one).
pub(crate) fn fence() {
    const CALL: &str = "rshmem_fence (IBGDA)\0";
    let Some(t) = table() else { return };
    each_qp(t, true, |pe, qp| {
        // SAFETY: the QP's counters (a `Qp`: live), read atomically; a NOP has no buffers.
        unsafe {
            if qp.desc.reads_outstanding(&Dev { call: CALL }) {
                post(CALL, pe, qp, &[Wqe::nop(fm_ce_se::FM_FENCE)]);
            }
        }
    });
}

/// Test hook for the bad-input scenarios: a blocking RDMA WRITE of `bytes` from the heap address `src`
/// to the raw remote address `raddr` under `rkey` on `pe`, as a program that bypassed rshmem's checks
/// (or a corrupted key table) would post it. The NIC's answer decides: a bad key or address ends in an
/// error completion, which stops this PE naming the call.
///
/// A PE that is not routed IBGDA stops this PE (`NoTransport`).
///
/// # Safety
/// rshmem must be initialized; `src` must be a local heap address readable for `bytes`; what happens
/// at the target is the NIC's check's business (it is the point of the hook).
#[doc(hidden)]
pub unsafe fn raw_write(pe: i32, src: *const u8, bytes: usize, raddr: u64, rkey: u32) {
    const CALL: &str = "rshmem test hook raw_write (IBGDA)\0";
    if pe < 0 || pe >= St.n_pes() || route(pe) != ROUTE_IBGDA {
        fail(CALL, Problem::NoTransport, pe, src as usize, bytes);
    }
    let t = table_or_fail(CALL, pe);
    // SAFETY: `pe` is routed IBGDA (checked above).
    let qp = unsafe { qp_for(CALL, t, pe) };
    let Some((l, _)) = local_of(t, src as u64) else { fail(CALL, Problem::Unregistered, pe, src as usize, bytes) };
    arch::fence_sc();
    // SAFETY: `src` stays readable until the WRITE completed (the caller's contract; waited for below).
    let end = unsafe { post(CALL, pe, qp, &[Wqe::rdma_write(0, Remote { addr: raddr, rkey }, l, bytes as u32)]) };
    wait(CALL, pe, qp, end);
}

/// The remote address and rkey of the symmetric address `local` on `pe`, as the table gives them (for
/// the test hook's callers, which perturb them). None without the IBGDA transport, and for a PE that
/// is not routed IBGDA or an address outside the heap.
#[doc(hidden)]
pub fn remote_address(pe: i32, local: *const u8) -> Option<(u64, u32)> {
    let t = table()?;
    let (base, size) = heap();
    let off = (local as u64).wrapping_sub(base);
    if pe < 0 || pe >= St.n_pes() || route(pe) != ROUTE_IBGDA || off >= size {
        return None;
    }
    // SAFETY: `pe` is routed IBGDA and `off` lies in the heap (both checked above).
    let (r, _) = unsafe { remote_of(t, pe, off) };
    Some((r.addr, r.rkey))
}
