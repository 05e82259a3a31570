//! End to end: host threads post through the no_std posting code (`QpDesc`) to the emulated NIC
//! (loopback), with both CQ kinds, several threads on one QP, the 16-bit index wrapping past 65536,
//! every fault mode, and error completions.

mod common;

use common::{Mem, Rig, TimedSys};
use rshmem_ibgda::emu::{Access, FaultConfig, FaultCounts, HostQueuesConfig, Nic, QpStats, Reason};
use rshmem_ibgda::mlx5::{fm_ce_se, opcode, syndrome};
use rshmem_ibgda::qp::QpDesc;
use rshmem_ibgda::{Amo, Atomic, Local, PollError, Remote, Wqe};
use std::time::Duration;

const LKEY: u32 = 0x11;
const RKEY: u32 = 0x22;

fn sys() -> TimedSys {
    TimedSys::default()
}

fn post(d: &QpDesc, wqes: &[Wqe]) -> u64 {
    // SAFETY: `d` is a live HostQueues' descriptor; the buffers the WQEs name are registered and live.
    unsafe { d.post(&sys(), wqes) }.unwrap_or_else(|e| panic!("post: {e}"))
}

fn wait(d: &QpDesc, idx: u64) {
    // SAFETY: as above.
    unsafe { d.poll(&sys(), idx) }.unwrap_or_else(|e| panic!("poll: {e}"))
}

fn quiet(d: &QpDesc) {
    // SAFETY: as above.
    unsafe { d.quiet(&sys()) }.unwrap_or_else(|e| panic!("quiet: {e}"))
}

/// The NIC's fault counts are its one QP's; none without a fault configured.
fn check_fault_counts(nic: &Nic, st: &QpStats, fault: &FaultConfig) {
    let counts = FaultCounts {
        delayed_fetches: st.delayed_fetches,
        dropped_doorbells: st.doorbells_dropped,
        index_wraps: st.index_wraps,
        holds: st.holds,
        slow_cqes: st.slow_cqes,
        scans_with_work: st.scans_with_work,
        wqes: st.wqes,
    };
    assert_eq!(nic.fault_counts(), counts);
    if !fault.any() {
        assert!(counts.modes().iter().all(|&(_, n)| n == 0), "no fault configured, yet counted: {counts}");
    }
    if fault.start_index != 0 {
        assert_eq!(st.index_wraps, (st.hw_ci >> 16) - (fault.start_index >> 16), "{st:?}");
    }
}

/// Every operation kind once, results checked: pointer and inline WRITEs, READ, every AMO at 4 and 8
/// bytes (standard and masked atomics), NOP and DUMP.
fn every_operation(collapsed: bool, fault: FaultConfig) {
    let rig = Rig::new(HostQueuesConfig { collapsed, log_sq: 6, log_cq: 6, ..Default::default() }, fault.clone());
    let mut local = Mem::new(&rig.mrs, LKEY, 512, Access::ALL);
    let remote = Mem::new(&rig.mrs, RKEY, 512, Access::ALL);
    let d = rig.qp.desc();
    let r = |off: usize| Remote { addr: remote.addr(off), rkey: RKEY };
    let lbase = local.addr(0);
    let l = |off: usize| Local { addr: lbase + off as u64, lkey: LKEY };

    // Pointer WRITE of 200 bytes.
    for (i, b) in local.bytes_mut()[..200].iter_mut().enumerate() {
        *b = i as u8 ^ 0x5a;
    }
    let end = post(&d, &[Wqe::rdma_write(0, r(8), l(0), 200)]);
    wait(&d, end);
    assert_eq!(&remote.bytes()[8..208], &local.bytes()[..200]);

    // Inline WRITEs: every size of `p` (1..8 bytes), then 13 and MAX_INLINE bytes.
    for n in 1..=8u32 {
        let v = 0x1122_3344_5566_7788u64;
        let end = post(&d, &[Wqe::rdma_write_inline_value(0, r(1024 + 16 * n as usize), v, n)]);
        wait(&d, end);
        assert_eq!(&remote.bytes()[1024 + 16 * n as usize..][..n as usize], &v.to_le_bytes()[..n as usize]);
    }
    for n in [13usize, rshmem_ibgda::wqe::MAX_INLINE] {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
        let end = post(&d, &[Wqe::rdma_write_inline(0, r(1200), &data).unwrap()]);
        wait(&d, end);
        assert_eq!(&remote.bytes()[1200..1200 + n], &data[..]);
    }

    // READ back 200 bytes into another place.
    let end = post(&d, &[Wqe::rdma_read(0, r(8), l(2048), 200)]);
    wait(&d, end);
    assert_eq!(&local.bytes()[2048..2248], &local.bytes()[..200]);

    // AMOs at 4 and 8 bytes, fetched values and results.
    let ops = [Amo::Fetch, Amo::Swap, Amo::Add, Amo::And, Amo::Or, Amo::Xor, Amo::CompareSwap];
    for bytes in [4u32, 8] {
        let mask = if bytes == 4 { 0xffff_ffffu64 } else { u64::MAX };
        for (k, &op) in ops.iter().enumerate() {
            for &(old, v, cmp) in &[(0xf0f0_1234_5678_9abcu64, 0x0ff0_00ff_1111_2222u64, 0xf0f0_1234_5678_9abcu64), (77, 5, 76)] {
                let off = 3000 + 8 * k;
                let target = remote.buf.as_ptr() as usize + off;
                // SAFETY: an aligned word of the registered remote buffer, not in use by the NIC now.
                unsafe {
                    if bytes == 4 {
                        *(target as *mut u32) = old as u32;
                    } else {
                        *(target as *mut u64) = old;
                    }
                }
                let a = Atomic::amo(op, bytes, v, cmp);
                let end = post(&d, &[Wqe::atomic(0, r(off), l(4000), a)]);
                wait(&d, end);
                let raw: [u8; 8] = local.bytes()[4000..4008].try_into().unwrap();
                assert_eq!(a.fetched(raw), old & mask, "{op:?} {bytes} fetched");
                // SAFETY: as above; the NIC completed the operation.
                let now = unsafe { if bytes == 4 { *(target as *const u32) as u64 } else { *(target as *const u64) } };
                assert_eq!(now, a.apply(old) & mask, "{op:?} {bytes} result");
                let want = match op {
                    Amo::Fetch => old,
                    Amo::Swap => v,
                    Amo::Add => old.wrapping_add(v),
                    Amo::And => old & v,
                    Amo::Or => old | v,
                    Amo::Xor => old ^ v,
                    Amo::CompareSwap => {
                        if old & mask == cmp & mask {
                            v
                        } else {
                            old
                        }
                    }
                };
                assert_eq!(now, want & mask, "{op:?} {bytes} semantics");
            }
        }
    }

    // A group: WRITE, fenced atomic (put_signal's shape), NOP, DUMP; one doorbell, one CQE.
    let end = post(
        &d,
        &[
            Wqe::rdma_write(0, r(0), l(0), 8),
            Wqe::atomic(fm_ce_se::FM_FENCE, r(3000), l(4000), Atomic::Fa64 { add: 1 }),
            Wqe::nop(0),
            Wqe::dump(fm_ce_se::FM_FENCE, l(0), 1),
        ],
    );
    wait(&d, end);
    quiet(&d);
    let mut rig = rig;
    let nic = rig.stop();
    let st = nic.stats(0);
    check_fault_counts(&nic, &st, &fault);
    assert_eq!(st.error_cqes, 0, "{st:?}");
    assert_eq!(st.first_error, None);
    assert_eq!(st.doorbell_ahead_of_dbr, 0);
    assert_eq!(st.hw_ci, rig.qp.counters().prod_idx);
    drop(local);
}

#[test]
fn every_operation_collapsed_cq() {
    every_operation(true, FaultConfig::default());
}

#[test]
fn every_operation_normal_cq() {
    every_operation(false, FaultConfig::default());
}

/// `threads` threads post to one QP at once: each group reserves its WQEBBs once and writes several
/// WQEs (as a warp does), then submits; fetch-adds on one counter and puts into per-thread slots.
fn shared_qp(cfg: HostQueuesConfig, fault: FaultConfig, threads: usize, groups: usize) -> rshmem_ibgda::emu::QpStats {
    let rig = Rig::new(cfg, fault.clone());
    let local = Mem::new(&rig.mrs, LKEY, 64 * threads, Access::ALL);
    let remote = Mem::new(&rig.mrs, RKEY, 64 * threads + 8, Access::ALL);
    let d = rig.qp.desc();
    std::thread::scope(|sc| {
        for t in 0..threads {
            let (local, remote) = (&local, &remote);
            sc.spawn(move || {
                let s = sys();
                for g in 0..groups {
                    // 1 to 3 WQEs per group; a masked 8-byte CS (two WQEBBs) in every fourth.
                    let mut w = vec![Wqe::atomic(0, Remote { addr: remote.addr(0), rkey: RKEY }, Local { addr: local.addr(64 * t * 8), lkey: LKEY }, Atomic::Fa64 { add: 1 })];
                    for k in 0..g % 3 {
                        w.push(Wqe::rdma_write_inline_value(0, Remote { addr: remote.addr(8 + 8 * (64 * t + k)), rkey: RKEY }, g as u64, 8));
                    }
                    if g % 4 == 3 {
                        let a = Atomic::amo(Amo::Or, 8, 1 << (g % 64), 0);
                        w.push(Wqe::atomic(0, Remote { addr: remote.addr(8 + 8 * (64 * t + 8)), rkey: RKEY }, Local { addr: local.addr(8 * (64 * t + 1)), lkey: LKEY }, a));
                    }
                    if g % 5 == 4 {
                        // The single-thread helper.
                        // SAFETY: the rig's live descriptor and registered buffers.
                        unsafe { d.post(&s, &w) }.unwrap_or_else(|e| panic!("post: {e}"));
                    } else {
                        // Warp style: one reservation, each WQE written at its place, one submission.
                        let n: u32 = w.iter().map(|x| x.wqebbs()).sum::<u32>() + 1;
                        // SAFETY: as above.
                        unsafe {
                            let base = d.reserve(&s, n).unwrap_or_else(|e| panic!("reserve: {e}"));
                            let mut pos = base;
                            for x in &w {
                                d.write(&s, pos, x);
                                pos += x.wqebbs() as u64;
                            }
                            d.write(&s, pos, &Wqe::nop(fm_ce_se::CQ_UPDATE));
                            d.submit(&s, base, n).unwrap_or_else(|e| panic!("submit: {e}"));
                        }
                    }
                    if g % 16 == 15 {
                        // SAFETY: as above.
                        unsafe { d.quiet(&s) }.unwrap_or_else(|e| panic!("quiet: {e}"));
                    }
                }
                // SAFETY: as above.
                unsafe { d.quiet(&s) }.unwrap_or_else(|e| panic!("quiet: {e}"));
            });
        }
    });
    quiet(&d);
    assert_eq!(remote.word(0), (threads * groups) as u64, "fetch-add count");
    for t in 0..threads {
        let last_with = |k: usize| (0..groups).rev().find(|g| g % 3 > k).map(|g| g as u64).unwrap_or(0);
        assert_eq!(remote.word(1 + 64 * t), last_with(0));
        assert_eq!(remote.word(1 + 64 * t + 1), last_with(1));
        let ors = (0..groups).filter(|g| g % 4 == 3).fold(0u64, |a, g| a | 1 << (g % 64));
        assert_eq!(remote.word(1 + 64 * t + 8), ors);
    }
    let mut rig = rig;
    let nic = rig.stop();
    let st = nic.stats(0);
    check_fault_counts(&nic, &st, &fault);
    assert_eq!(st.error_cqes, 0, "{st:?}");
    assert_eq!(st.doorbell_ahead_of_dbr, 0, "{st:?}");
    let c = rig.qp.counters();
    assert_eq!((c.resv_head, c.ready_head, c.prod_idx), (st.hw_ci, st.hw_ci, st.hw_ci));
    assert!(c.cons_idx >= c.prod_idx, "{c:?}");
    st
}

fn small(collapsed: bool) -> HostQueuesConfig {
    HostQueuesConfig { collapsed, log_sq: 6, log_cq: 6, batch: 8, ..Default::default() }
}

#[test]
fn threads_share_a_qp_collapsed_cq() {
    shared_qp(small(true), FaultConfig::default(), 4, 300);
}

#[test]
fn threads_share_a_qp_normal_cq() {
    shared_qp(small(false), FaultConfig::default(), 4, 300);
}

#[test]
fn wrap_past_65536() {
    // Start 3000 WQEBBs before the 16-bit wrap and post well past it, twice the size of a 64-WQEBB
    // ring many times over, from one thread and then from four; both CQ kinds.
    for collapsed in [true, false] {
        let fault = FaultConfig { start_index: 0x1_0000 - 3000, ..FaultConfig::default() };
        let st = shared_qp(small(collapsed), fault.clone(), 1, 1500);
        assert!(st.hw_ci > 0x1_0000 + 1000, "{st:?}");
        assert_eq!(st.index_wraps, 1, "{st:?}");
        let st = shared_qp(small(collapsed), FaultConfig { start_index: 0x2_0000 - 500, ..fault }, 4, 300);
        assert!(st.hw_ci > 0x2_0000, "{st:?}");
        assert_eq!(st.index_wraps, 1, "{st:?}");
    }
}

#[test]
fn fault_fetch_delay() {
    let fault = FaultConfig { fetch_delay: Duration::from_micros(300), ..FaultConfig::default() };
    for collapsed in [true, false] {
        let st = shared_qp(small(collapsed), fault.clone(), 3, 60);
        // Every doorbell the NIC acted on waited (a doorbell arriving while one waits joins it).
        assert!(st.delayed_fetches > 0 && st.delayed_fetches <= st.doorbells, "{st:?}");
    }
}

#[test]
fn fault_dropped_doorbells() {
    for every in [1, 2, 3] {
        let fault = FaultConfig { drop_doorbell_every: every, ..FaultConfig::default() };
        let st = shared_qp(small(true), fault, 3, 100);
        assert!(st.doorbells_dropped > 0, "{st:?}");
        assert!(st.scans_with_work > 0 || every > 1, "{st:?}");
        if every == 1 {
            assert_eq!(st.doorbells_dropped, st.doorbells, "{st:?}");
        }
    }
}

#[test]
fn fault_full_send_queue() {
    let fault = FaultConfig { hold_until_full: Some(Duration::from_millis(2)), ..FaultConfig::default() };
    for collapsed in [true, false] {
        let st = shared_qp(small(collapsed), fault.clone(), 3, 150);
        assert!(st.holds > 0, "{st:?}");
    }
}

#[test]
fn fault_slow_completions() {
    let fault = FaultConfig { cqe_delay: Duration::from_micros(200), ..FaultConfig::default() };
    for collapsed in [true, false] {
        let st = shared_qp(small(collapsed), fault.clone(), 3, 60);
        assert!(st.slow_cqes > 0 && st.slow_cqes == st.cqes, "every CQE is late: {st:?}");
    }
}

#[test]
fn fault_wrap_start_with_every_operation() {
    for collapsed in [true, false] {
        every_operation(collapsed, FaultConfig { start_index: 0x1_0000 - 7, ..FaultConfig::default() });
    }
}

#[test]
fn all_faults_at_once() {
    let fault = FaultConfig {
        fetch_delay: Duration::from_micros(100),
        drop_doorbell_every: 2,
        dbr_scan: Some(Duration::from_micros(500)),
        start_index: 0x1_0000 - 100,
        hold_until_full: Some(Duration::from_millis(1)),
        cqe_delay: Duration::from_micros(20),
    };
    assert!(fault.any());
    for collapsed in [true, false] {
        let st = shared_qp(small(collapsed), fault.clone(), 3, 80);
        assert!(st.delayed_fetches > 0 && st.doorbells_dropped > 0 && st.index_wraps == 1 && st.slow_cqes > 0, "{st:?}");
    }
}

/// The counts name every mode `FaultConfig::parse` knows, in one line.
#[test]
fn fault_counts_name_every_mode() {
    let c = FaultCounts { delayed_fetches: 1, dropped_doorbells: 2, index_wraps: 3, holds: 4, slow_cqes: 5, scans_with_work: 6, wqes: 70 };
    assert_eq!(c.to_string(), "delay 1, drop 2, wrap 3, full 4, slow 5, scan 6 (70 WQEs)");
    for (mode, n) in c.modes() {
        assert!(FaultConfig::parse(mode).is_ok_and(|f| f.any()), "{mode} is not a fault mode");
        assert!(FaultConfig::MODES.contains(mode), "{mode}");
        assert_eq!(c.of(mode), Some(n));
    }
    assert_eq!(c.of("none"), None);
}

fn expect_error(r: Result<(), PollError>, syn: u8, reason: Reason, wqe_opcode: u8) {
    match r {
        Err(PollError::Cqe(e)) => {
            assert_eq!((e.syndrome, e.vendor_syndrome, e.wqe_opcode), (syn, reason as u8, wqe_opcode), "{e:?}");
            assert!(PollError::Cqe(e).to_string().contains("error completion"));
        }
        other => panic!("expected an error CQE, got {other:?}"),
    }
}

#[test]
fn error_completions_name_the_syndrome() {
    for collapsed in [true, false] {
        let mut rig = Rig::new(small(collapsed), FaultConfig::default());
        let local = Mem::new(&rig.mrs, LKEY, 64, Access::ALL);
        let remote = Mem::new(&rig.mrs, RKEY, 64, Access::REMOTE_READ);
        let d = rig.qp.desc();
        let s = sys();
        let l = Local { addr: local.addr(0), lkey: LKEY };
        let cases: Vec<(Wqe, u8, Reason, u8)> = vec![
            (Wqe::rdma_write(0, Remote { addr: remote.addr(0), rkey: 0x999 }, l, 8), syndrome::REMOTE_ACCESS, Reason::UnknownRkey, opcode::RDMA_WRITE),
            (Wqe::rdma_write(0, Remote { addr: remote.addr(0), rkey: RKEY }, l, 8), syndrome::REMOTE_ACCESS, Reason::RemoteRights, opcode::RDMA_WRITE),
            (Wqe::rdma_read(0, Remote { addr: remote.addr(510), rkey: RKEY }, l, 8), syndrome::REMOTE_ACCESS, Reason::RemoteRange, opcode::RDMA_READ),
            (Wqe::rdma_read(0, Remote { addr: remote.addr(0), rkey: RKEY }, Local { addr: local.addr(0), lkey: 0x777 }, 8), syndrome::LOCAL_PROT, Reason::UnknownLkey, opcode::RDMA_READ),
            (Wqe::rdma_write(0, Remote { addr: remote.addr(0), rkey: RKEY }, Local { addr: local.addr(508), lkey: LKEY }, 8), syndrome::LOCAL_PROT, Reason::LocalRange, opcode::RDMA_WRITE),
        ];
        for (w, syn, reason, op) in cases {
            // SAFETY: the rig's live descriptor; registered buffers (the bad ones are refused by the NIC).
            let r = unsafe { d.post(&s, &[w]).and_then(|end| d.poll(&s, end)) };
            expect_error(r, syn, reason, op);
            // The QP is in the error state: later WQEs are flushed, and waits report the first error.
            // SAFETY: as above.
            let r = unsafe { d.post(&s, &[Wqe::nop(0)]).and_then(|end| d.poll(&s, end)) };
            expect_error(r, syn, reason, op);
            // Reset (what a transition through RESET does) and go on.
            let mut nic = rig.stop();
            let st = nic.stats(0);
            assert_eq!(st.first_error.map(|e| (e.syndrome, e.reason)), Some((syn, reason)), "{st:?}");
            assert!(st.in_error);
            // SAFETY: the NIC thread is stopped (`rig.stop` above) and nothing posts or polls now.
            unsafe { rig.qp.reset_at(0) };
            nic.reset_qp(0, 0);
            rig.nic = Some(nic.spawn());
        }
        // A misaligned atomic on a region with the rights.
        let remote2 = Mem::new(&rig.mrs, RKEY + 1, 64, Access::ALL);
        // SAFETY: as above.
        let r = unsafe { d.post(&s, &[Wqe::atomic(0, Remote { addr: remote2.addr(4), rkey: RKEY + 1 }, l, Atomic::Fa64 { add: 1 })]).and_then(|end| d.poll(&s, end)) };
        expect_error(r, syndrome::REMOTE_INVAL_REQ, Reason::Misaligned, opcode::ATOMIC_FA);
        let nic = rig.stop();
        let st = nic.stats(0);
        assert!(st.error_cqes >= 1, "{st:?}");
        drop((local, remote, remote2));
    }
}

#[test]
fn too_large_reservation_is_refused() {
    let rig = Rig::new(small(true), FaultConfig::default());
    let d = rig.qp.desc();
    // SAFETY: the rig's live descriptor.
    let r = unsafe { d.reserve(&sys(), 65) };
    assert_eq!(r, Err(PollError::TooLarge { wqebbs: 65, sq_size: 64 }));
}

#[test]
fn stuck_wait_times_out_instead_of_hanging() {
    // A NIC that never runs: the poll must give up (Sys::idle), naming what it waited for.
    let rig = Rig::new(small(true), FaultConfig::default());
    let mut rig = rig;
    drop(rig.stop());
    let d = rig.qp.desc();
    let s = TimedSys { timeout: Duration::from_millis(50) };
    // SAFETY: the rig's live descriptor.
    let r = unsafe { d.post(&s, &[Wqe::nop(0)]).and_then(|end| d.poll(&s, end)) };
    match r {
        Err(PollError::Timeout { idx: 1, prod: 1, cons: 0 }) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
}
