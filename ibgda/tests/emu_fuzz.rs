//! Property test of the emulated NIC: random and mutated WQEs (seeded, many iterations) never touch
//! memory outside registered regions and always end in a CQE, success or error.
//!
//! The regions sit between PROT_NONE guard pages, so any access past a region's ends kills the test;
//! a region registered in the middle of a page is surrounded by canary bytes, an unregistered page and
//! a read-only region hold patterns, and all of them are checked after the run. Every WQE is posted
//! with CQ_UPDATE forced on after mutation, so each WQE the NIC consumes must produce exactly one CQE;
//! the CQ memory itself is checked (owner bits and WQE counters of a normal CQ, slot 0 of a collapsed
//! one).

use rshmem_ibgda::emu::{Access, FaultConfig, HostQp, HostQpConfig, Loopback, MrTable, Nic, Reason};
use rshmem_ibgda::mlx5::{self, cqe_opcode, fm_ce_se, opcode, CtrlSeg, DataSeg, RaddrSeg};
use rshmem_ibgda::qp::HostSys;
use rshmem_ibgda::{Amo, Atomic, Local, Remote, Wqe};
use std::sync::Arc;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

const PAGE: usize = 4096;

/// Pages: guard, A (2 pages), guard, B, guard, C, guard, D-page, E (unregistered), guard.
struct Arena {
    base: *mut u8,
    len: usize,
}

impl Arena {
    fn new() -> Arena {
        let len = 11 * PAGE;
        // SAFETY: an anonymous private mapping; checked below.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base as *mut u8;
        for g in [0, 3, 5, 7, 10] {
            // SAFETY: a page of the mapping above.
            assert_eq!(unsafe { libc::mprotect(base.add(g * PAGE) as *mut libc::c_void, PAGE, libc::PROT_NONE) }, 0);
        }
        Arena { base, len }
    }
    fn page(&self, i: usize) -> *mut u8 {
        // SAFETY: inside the mapping.
        unsafe { self.base.add(i * PAGE) }
    }
}

/// `n` bytes at `p` of the arena.
///
/// # Safety
/// `p..p + n` must be a readable, writable range of a live arena (never a guard page), not accessed
/// by the NIC while the slice lives.
unsafe fn bytes<'a>(p: *mut u8, n: usize) -> &'a mut [u8] {
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(p, n) }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

struct Layout {
    regions: Vec<(u32, u64, u64)>,
    d_page: *mut u8,
    e_page: *mut u8,
    c_page: *mut u8,
}

const D_OFF: usize = 100;
const D_LEN: usize = 1000;

fn setup(arena: &Arena, mrs: &MrTable) -> Layout {
    let a = arena.page(1);
    let b = arena.page(4);
    let c = arena.page(6);
    let d = arena.page(8);
    let e = arena.page(9);
    // SAFETY: accessible pages of the arena; no NIC runs yet.
    for (i, x) in unsafe { bytes(c, PAGE) }.iter_mut().enumerate() {
        *x = (i * 31 + 7) as u8;
    }
    // SAFETY: as above.
    unsafe { bytes(d, PAGE) }.fill(0xcd);
    // SAFETY: as above.
    unsafe { bytes(e, PAGE) }.fill(0xee);
    // SAFETY: pages of the arena, which outlives the NIC.
    unsafe {
        mrs.register(0x10, a, 2 * PAGE as u64, Access::ALL).unwrap();
        mrs.register(0x20, b, PAGE as u64, Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
        mrs.register(0x30, c, PAGE as u64, Access::REMOTE_READ).unwrap();
        mrs.register(0x40, d.add(D_OFF), D_LEN as u64, Access::ALL).unwrap();
    }
    Layout {
        regions: vec![(0x10, a as u64, 2 * PAGE as u64), (0x20, b as u64, PAGE as u64), (0x30, c as u64, PAGE as u64), (0x40, d as u64 + D_OFF as u64, D_LEN as u64), (0x55, e as u64, PAGE as u64)],
        d_page: d,
        e_page: e,
        c_page: c,
    }
}

fn check_untouched(l: &Layout) {
    // SAFETY: accessible pages of the arena; the NIC is not running (it only runs
    // inside `nic.poll()`).
    let d = unsafe { bytes(l.d_page, PAGE) };
    assert!(d[..D_OFF].iter().all(|&x| x == 0xcd), "canary before region D written");
    assert!(d[D_OFF + D_LEN..].iter().all(|&x| x == 0xcd), "canary after region D written");
    // SAFETY: as above.
    assert!(unsafe { bytes(l.e_page, PAGE) }.iter().all(|&x| x == 0xee), "unregistered page written");
    // SAFETY: as above.
    assert!(unsafe { bytes(l.c_page, PAGE) }.iter().enumerate().all(|(i, &x)| x == (i * 31 + 7) as u8), "read-only region written");
}

fn key(rng: &mut Rng, l: &Layout) -> u32 {
    match rng.below(8) {
        0 => mlx5::INVALID_LKEY,
        1 => rng.next() as u32,
        _ => l.regions[rng.below(l.regions.len() as u64) as usize].0,
    }
}

/// A key and an address: mostly of the same region, at its edges more often than not.
fn target(rng: &mut Rng, l: &Layout) -> (u32, u64) {
    if rng.chance(4) {
        return (key(rng, l), addr(rng, l, None));
    }
    let i = rng.below(l.regions.len() as u64) as usize;
    (l.regions[i].0, addr(rng, l, Some(i)))
}

fn addr(rng: &mut Rng, l: &Layout, region: Option<usize>) -> u64 {
    if region.is_none() && rng.chance(10) {
        return rng.next();
    }
    let (_, base, len) = l.regions[region.unwrap_or_else(|| rng.below(l.regions.len() as u64) as usize)];
    let off = match rng.below(4) {
        0 => rng.below(len),
        1 => len.wrapping_sub(rng.below(80)),
        2 => rng.below(80).wrapping_neg(),
        _ => len + rng.below(80),
    };
    base.wrapping_add(off) & if rng.chance(3) { !7 } else { !0 }
}

fn len(rng: &mut Rng) -> u32 {
    match rng.below(6) {
        0 => 0,
        1 => 1 + rng.below(16) as u32,
        2 | 3 => rng.below(600) as u32,
        4 => rng.below(3 * PAGE as u64) as u32,
        _ => rng.next() as u32,
    }
}

fn random_wqe(rng: &mut Rng, l: &Layout) -> Wqe {
    let (rkey, raddr) = target(rng, l);
    let (lkey, laddr) = target(rng, l);
    let r = Remote { addr: raddr, rkey };
    let lo = Local { addr: laddr, lkey };
    let fm = [0, fm_ce_se::FM_FENCE, fm_ce_se::FM_FENCE_AND_SMALL, fm_ce_se::SOLICITED][rng.below(4) as usize];
    match rng.below(10) {
        0 => Wqe::rdma_write(fm, r, lo, len(rng)),
        1 => Wqe::rdma_read(fm, r, lo, len(rng)),
        2 => {
            let n = rng.below(rshmem_ibgda::wqe::MAX_INLINE as u64 + 1) as usize;
            let data: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            Wqe::rdma_write_inline(fm, r, &data).unwrap()
        }
        3 | 4 => {
            let ops = [Amo::Fetch, Amo::Swap, Amo::Add, Amo::And, Amo::Or, Amo::Xor, Amo::CompareSwap];
            let op = ops[rng.below(7) as usize];
            let a = Atomic::amo(op, if rng.chance(2) { 4 } else { 8 }, rng.next(), rng.next());
            Wqe::atomic(fm, r, lo, a)
        }
        5 => Wqe::nop(fm),
        6 => Wqe::dump(fm, lo, len(rng)),
        7 | 8 => {
            // Gather/scatter lists of 1-6 data segments, sometimes ended by the 0x100 terminator.
            let k = 1 + rng.below(6) as usize;
            let mut w = Wqe::raw((2 + k) as u8);
            let op = if rng.chance(2) { opcode::RDMA_WRITE } else { opcode::RDMA_READ };
            w.set_ctrl(CtrlSeg::new(op, 0, 0, 0, w.ds, fm));
            w.seg[1] = bytemuck::cast(RaddrSeg::new(r.addr, r.rkey));
            for i in 0..k {
                let d = if rng.chance(5) { DataSeg::new(0, mlx5::INVALID_LKEY, 0) } else {
                    let (k, a) = target(rng, l);
                    DataSeg::new(len(rng) % 700, k, a)
                };
                w.seg[2 + i] = bytemuck::cast(d);
            }
            w
        }
        _ => {
            // Random bytes with a random opcode and ds.
            let ds = 1 + rng.below(rshmem_ibgda::wqe::MAX_DS as u64) as u8;
            let mut w = Wqe::raw(ds);
            for s in w.seg.iter_mut().take(ds as usize) {
                for b in s.iter_mut() {
                    *b = rng.next() as u8;
                }
            }
            let op = [0x00, 0x08, 0x09, 0x0a, 0x10, 0x11, 0x12, 0x14, 0x15, 0x23, 0x25, rng.next() as u8][rng.below(12) as usize];
            w.set_ctrl(CtrlSeg::new(op, rng.next() as u8 & if rng.chance(2) { 0x0f } else { 0 }, 0, 0, ds, rng.next() as u8));
            w
        }
    }
}

fn fuzz(collapsed: bool, seed: u64, iterations: usize) {
    let arena = Arena::new();
    let mrs = Arc::new(MrTable::new());
    let l = setup(&arena, &mrs);
    let log_cq = 12;
    let qp = HostQp::new(HostQpConfig { qpn: 0x77, log_sq: 5, log_cq, collapsed, start: 0xfff0, batch: 1 });
    let mut nic = Nic::new(mrs.clone(), FaultConfig::default());
    // SAFETY: the HostQp and the arena outlive the NIC (dropped at the end of this function, NIC first).
    unsafe { nic.add_qp(qp.setup(), Box::new(Loopback::new(mrs.clone()))).unwrap() };
    let mut rng = Rng(seed);
    let d = qp.desc();
    let mut sw_ci = 0u64; // normal CQ: CQEs read so far
    let (mut ok, mut err, mut resets) = (0u64, 0u64, 0u64);
    let mut reasons = std::collections::BTreeSet::new();
    for it in 0..iterations {
        let before = nic.stats(0);
        let pos = before.hw_ci;
        let mut w = random_wqe(&mut rng, &l);
        // SAFETY: the HostQp's ring; the NIC runs only inside `nic.poll()` below.
        unsafe { d.write(&HostSys, pos, &w) };
        let n = w.wqebbs().max(1) as u64;
        // Mutations in the ring, then CQ_UPDATE forced on.
        if rng.chance(2) {
            for _ in 0..1 + rng.below(4) {
                let off = rng.below(n * 64);
                let p = (d.wqebb_addr(pos + off / 64) + off % 64) as *mut u8;
                // SAFETY: a byte of the ring.
                unsafe {
                    match rng.below(3) {
                        0 => *p ^= 1 << rng.below(8),
                        1 => *p = rng.next() as u8,
                        _ => *(d.wqebb_addr(pos) as *mut u8).add(7) = rng.below(64) as u8, // ds
                    }
                }
            }
        }
        // SAFETY: the ctrl segment's fm_ce_se byte.
        unsafe { *(d.wqebb_addr(pos) as *mut u8).add(11) |= fm_ce_se::CQ_UPDATE };
        w.ds = 0; // (the value is not used below; the ring holds the truth now)
        // Sometimes announce more WQEBBs than written (stale ring contents follow).
        let extra = if rng.chance(20) { 1 + rng.below(3) } else { 0 };
        // SAFETY: the HostQp's queues; everything below pos + n + extra counts as ready.
        unsafe { d.post_send(&HostSys, pos + n + extra) }.unwrap();
        let consumed = nic.poll();
        let after = nic.stats(0);
        assert_eq!(after.hw_ci, pos + n + extra, "iteration {it}: the NIC consumed exactly what the doorbell record announced");
        let wqes = after.wqes - before.wqes;
        assert_eq!(wqes as usize, consumed);
        assert!(wqes >= 1);
        assert_eq!(after.cqes - before.cqes, wqes, "iteration {it}: every consumed WQE ends in a CQE: {after:?}");
        let errs = after.error_cqes - before.error_cqes;
        err += errs;
        ok += wqes - errs;
        if let Some(e) = after.first_error {
            reasons.insert(e.reason);
            assert!(Reason::from_u8(e.reason as u8).is_some());
        }
        // The CQ memory.
        let in_range = |c: u16| (c.wrapping_sub(pos as u16) as u64) < n + extra;
        if collapsed {
            // SAFETY: slot 0 of the HostQp's CQ, written by the NIC (not running now).
            let c: rshmem_ibgda::mlx5::Cqe64 = unsafe { std::ptr::read(qp.cq() as *const _) };
            assert!(c.opcode() == cqe_opcode::REQ || c.opcode() == cqe_opcode::REQ_ERR, "{c:?}");
            assert!(in_range(c.wqe_counter.get()), "iteration {it}: CQE counter {:#x} not in the WQEs just posted at {pos:#x}", c.wqe_counter.get());
        } else {
            let mut last = None;
            for _ in 0..wqes {
                let slot = (sw_ci & ((1 << log_cq) - 1)) as usize;
                // SAFETY: a slot of the HostQp's CQ.
                let c: rshmem_ibgda::mlx5::Cqe64 = unsafe { std::ptr::read(qp.cq().add(64 * slot) as *const _) };
                assert_eq!(c.owner() as u64, (sw_ci >> log_cq) & 1, "iteration {it}: owner bit");
                assert!(c.opcode() == cqe_opcode::REQ || c.opcode() == cqe_opcode::REQ_ERR, "{c:?}");
                let ctr = c.wqe_counter.get();
                assert!(in_range(ctr), "iteration {it}: CQE counter {ctr:#x} at {pos:#x}");
                if let Some(prev) = last {
                    assert!(ctr.wrapping_sub(pos as u16) > prev, "counters increase");
                }
                last = Some(ctr.wrapping_sub(pos as u16));
                sw_ci += 1;
            }
            // Tell the NIC how far the CQ was read (its overrun check).
            let set_ci = ((sw_ci & 0xff_ffff) as u32).to_be_bytes();
            // SAFETY: the CQ doorbell record of the HostQp.
            unsafe { std::ptr::write_volatile(d.cq_dbr as *mut u32, u32::from_ne_bytes(set_ci)) };
            // The next slot is not valid yet.
            let slot = (sw_ci & ((1 << log_cq) - 1)) as usize;
            // SAFETY: as above.
            let c: rshmem_ibgda::mlx5::Cqe64 = unsafe { std::ptr::read(qp.cq().add(64 * slot) as *const _) };
            assert!(c.opcode() == cqe_opcode::INVALID || c.owner() as u64 != (sw_ci >> log_cq) & 1);
        }
        if after.in_error || rng.chance(500) {
            // Back to a fresh QP (RESET), sometimes at a count near a 16-bit wrap.
            let start = if rng.chance(2) { 0xffff - rng.below(40) } else { rng.below(1 << 20) };
            qp.reset_at(start);
            nic.reset_qp(0, start);
            sw_ci = 0;
            resets += 1;
        }
        if it % 1000 == 0 {
            check_untouched(&l);
        }
    }
    check_untouched(&l);
    eprintln!("{} CQ: {iterations} iterations, {ok} successful and {err} failed WQEs, {resets} resets; reasons seen: {reasons:?}", if collapsed { "collapsed" } else { "normal" });
    assert!(ok > iterations as u64 / 20, "enough valid WQEs succeed");
    for r in [Reason::UnknownOpcode, Reason::BadDs, Reason::WqeIndexMismatch, Reason::UnknownLkey, Reason::UnknownRkey, Reason::LocalRange, Reason::RemoteRange, Reason::RemoteRights, Reason::BeyondProducer] {
        assert!(reasons.contains(&r), "{r:?} never provoked");
    }
    drop(nic);
}

#[test]
fn random_and_mutated_wqes_stay_in_regions_and_complete_collapsed_cq() {
    fuzz(true, 0x5eed_0001, 40_000);
}

#[test]
fn random_and_mutated_wqes_stay_in_regions_and_complete_normal_cq() {
    fuzz(false, 0x5eed_0002, 40_000);
}
