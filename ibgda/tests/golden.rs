//! Golden bytes: every WQE kind the posting code emits, the doorbell record and doorbell, and the CQEs
//! the emulator writes, compared byte for byte with the same things built by a C program against the
//! system's rdma-core header `<infiniband/mlx5dv.h>` (tests/golden/mlx5_golden.c: its structs,
//! `mlx5dv_set_ctrl_seg`, `mlx5dv_set_data_seg`, constants), for fixed and seeded random parameters;
//! plus every struct offset, size and constant of the header against this crate's.
//!
//! Needs a C compiler and the header (`apt-get install libibverbs-dev`; scripts/setup.sh installs it).
//! Without the header the tests are skipped with a one-line message, or fail under scripts/test.sh
//! (`RSHMEM_TEST_NO_SKIP=1`, `rshmem_test_support::skip`).

use rshmem_ibgda::emu::{Access, FaultConfig, HostQueues, HostQueuesConfig, Loopback, MrTable, Nic};
use rshmem_ibgda::mlx5::{self, cqe_opcode, fm_ce_se, opcode, syndrome, AtomicSeg, CtrlSeg, Cqe64, DataSeg, ErrCqe, InlineHdr, RaddrSeg};
use rshmem_ibgda::qp::HostSys;
use rshmem_ibgda::wqe::MAX_INLINE;
use rshmem_ibgda::{Atomic, Local, Remote, Wqe};
use std::io::{BufRead, BufReader, Write};
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

/// The C program, built once per test binary; `None` (after saying why in one line, or failing under
/// scripts/test.sh) when the header or a C compiler is missing.
fn golden_program() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    match BUILT.get_or_init(build_golden_program) {
        Ok(exe) => Some(exe.clone()),
        Err(why) => {
            rshmem_test_support::skip("an mlx5 golden-byte test", why);
            None
        }
    }
}

/// The C program, or why it cannot be built here (a missing header or compiler); other failures panic.
fn build_golden_program() -> Result<PathBuf, String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/mlx5_golden.c");
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mlx5_golden");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).args(["-O1", "-Wall", "-Wextra", "-Werror", "-o"]).arg(&exe).arg(&src).output();
    match out {
        Ok(o) if o.status.success() => Ok(exe),
        other => {
            let why = match &other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => format!("cannot run {cc}: {e}"),
            };
            let header_missing = why.contains("mlx5dv.h") || other.is_err();
            if header_missing {
                let first = why.lines().find(|l| l.contains("error")).unwrap_or(why.trim());
                return Err(format!(
                    "rdma-core's <infiniband/mlx5dv.h> or a C compiler ({cc}) is missing; libibverbs-dev (scripts/setup.sh installs it) lets it check the WQE/CQE bytes: {first}"
                ));
            }
            panic!("building {} failed:\n{why}", src.display());
        }
    }
}

/// Runs the C program on `requests` (one per line) and returns its answer lines.
fn ask(exe: &PathBuf, requests: &[String]) -> Vec<String> {
    let mut child = Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("run mlx5_golden");
    let mut stdin = child.stdin.take().unwrap();
    let input = requests.join("\n") + "\n";
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap()).lines().map(Result::unwrap).collect();
    writer.join().unwrap().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(lines.len(), requests.len(), "one answer per request");
    lines
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One WQE case: the request for the C program and the WQE the crate builds.
struct Case {
    req: String,
    wqe: Wqe,
    pi: u64,
    qpn: u32,
}

fn cases() -> Vec<Case> {
    let mut rng = Rng(0x1bd4_9c3a_0f5e_7781);
    let flags = [0u8, fm_ce_se::CQ_UPDATE, fm_ce_se::CQ_UPDATE_EQE, fm_ce_se::CQ_UPDATE | fm_ce_se::SOLICITED, fm_ce_se::FM_INITIATOR_SMALL_FENCE, fm_ce_se::FM_FENCE, fm_ce_se::FM_FENCE | fm_ce_se::CQ_UPDATE, fm_ce_se::FM_STRONG_ORDERING, fm_ce_se::FM_FENCE_AND_SMALL];
    let mut out = Vec::new();
    for i in 0..3000 {
        // Fixed corner values first, then random ones; the count's high bits exercise the 16-bit cut.
        let pi = match i {
            0 => 0,
            1 => 0xffff,
            2 => 0x1_0000,
            _ => rng.next() & 0x3_ffff,
        };
        let qpn = match i % 7 {
            0 => 0x00ff_ffff,
            1 => 0,
            _ => rng.below(1 << 24) as u32,
        };
        let fm = flags[rng.below(flags.len() as u64) as usize];
        let raddr = if i % 11 == 0 { u64::MAX - 7 } else { rng.next() };
        let rkey = rng.next() as u32;
        let laddr = rng.next();
        let lkey = rng.next() as u32;
        let len = if i % 13 == 0 { 0x8000_0000 - 1 } else { rng.below(1 << 31) as u32 };
        let r = Remote { addr: raddr, rkey };
        let l = Local { addr: laddr, lkey };
        let p = pi as u16;
        let (req, wqe) = match i % 12 {
            0 => (format!("W {p:x} {qpn:x} {fm:x} {raddr:x} {rkey:x} {laddr:x} {lkey:x} {len:x}"), Wqe::rdma_write(fm, r, l, len)),
            1 => (format!("R {p:x} {qpn:x} {fm:x} {raddr:x} {rkey:x} {laddr:x} {lkey:x} {len:x}"), Wqe::rdma_read(fm, r, l, len)),
            2 | 3 => {
                let n = if i % 12 == 2 { rng.below(13) as usize } else { rng.below(MAX_INLINE as u64 + 1) as usize };
                let data: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                let h = if n == 0 { "-".to_string() } else { hex(&data) };
                (format!("I {p:x} {qpn:x} {fm:x} {raddr:x} {rkey:x} {n:x} {h}"), Wqe::rdma_write_inline(fm, r, &data).unwrap())
            }
            4 => {
                let n = 1 + rng.below(8) as u32;
                let v = rng.next();
                let h = hex(&v.to_le_bytes()[..n as usize]);
                (format!("I {p:x} {qpn:x} {fm:x} {raddr:x} {rkey:x} {n:x} {h}"), Wqe::rdma_write_inline_value(fm, r, v, n))
            }
            5..=10 => {
                let kind = i % 12 - 5;
                let (a, b, c, d) = (rng.next(), rng.next(), rng.next(), rng.next());
                let (a32, b32, c32, d32) = (a as u32 as u64, b as u32 as u64, c as u32 as u64, d as u32 as u64);
                let (op, args) = match kind {
                    0 => (Atomic::Fa64 { add: a }, (a, 0, 0, 0)),
                    1 => (Atomic::Cs64 { compare: a, swap: b }, (a, b, 0, 0)),
                    2 => (Atomic::MaskedFa32 { add: a as u32, boundary: b as u32 }, (a32, b32, 0, 0)),
                    3 => (Atomic::MaskedCs32 { swap: a as u32, compare: b as u32, swap_mask: c as u32, compare_mask: d as u32 }, (a32, b32, c32, d32)),
                    4 => (Atomic::MaskedFa64 { add: a, boundary: b }, (a, b, 0, 0)),
                    _ => (Atomic::MaskedCs64 { swap: a, compare: b, swap_mask: c, compare_mask: d }, (a, b, c, d)),
                };
                let (a, b, c, d) = args;
                (format!("A {p:x} {qpn:x} {fm:x} {raddr:x} {rkey:x} {laddr:x} {lkey:x} {kind:x} {a:x} {b:x} {c:x} {d:x}"), Wqe::atomic(fm, r, l, op))
            }
            _ => {
                if rng.below(2) == 0 {
                    (format!("N {p:x} {qpn:x} {fm:x}"), Wqe::nop(fm))
                } else {
                    (format!("D {p:x} {qpn:x} {fm:x} {laddr:x} {lkey:x} {len:x}"), Wqe::dump(fm, l, len))
                }
            }
        };
        out.push(Case { req, wqe, pi, qpn });
    }
    // Every AMO mapping of the device path (NVSHMEM's), at both widths, once more through `amo`.
    for bytes in [4u32, 8] {
        for op in [rshmem_ibgda::Amo::Fetch, rshmem_ibgda::Amo::Swap, rshmem_ibgda::Amo::Add, rshmem_ibgda::Amo::And, rshmem_ibgda::Amo::Or, rshmem_ibgda::Amo::Xor, rshmem_ibgda::Amo::CompareSwap] {
            let (v, cmp) = (0x0123_4567_89ab_cdefu64, 0xfedc_ba98_7654_3210u64);
            let a = Atomic::amo(op, bytes, v, cmp);
            let (kind, args) = match a {
                Atomic::Fa64 { add } => (0, (add, 0, 0, 0)),
                Atomic::Cs64 { compare, swap } => (1, (compare, swap, 0, 0)),
                Atomic::MaskedFa32 { add, boundary } => (2, (add as u64, boundary as u64, 0, 0)),
                Atomic::MaskedCs32 { swap, compare, swap_mask, compare_mask } => (3, (swap as u64, compare as u64, swap_mask as u64, compare_mask as u64)),
                Atomic::MaskedFa64 { add, boundary } => (4, (add, boundary, 0, 0)),
                Atomic::MaskedCs64 { swap, compare, swap_mask, compare_mask } => (5, (swap, compare, swap_mask, compare_mask)),
            };
            let (x, y, z, w) = args;
            let r = Remote { addr: 0x7f00_1234_5670, rkey: 0xabcd };
            let l = Local { addr: 0x7f00_dead_0000, lkey: 0x1234 };
            out.push(Case {
                req: format!("A fffe 123 8 {:x} {:x} {:x} {:x} {kind:x} {x:x} {y:x} {z:x} {w:x}", r.addr, r.rkey, l.addr, l.lkey),
                wqe: Wqe::atomic(fm_ce_se::CQ_UPDATE, r, l, a),
                pi: 0xfffe,
                qpn: 0x123,
            });
        }
    }
    out
}

#[test]
fn wqe_bytes_match_rdma_core() {
    let Some(exe) = golden_program() else { return };
    let cases = cases();
    let answers = ask(&exe, &cases.iter().map(|c| c.req.clone()).collect::<Vec<_>>());
    // The crate writes each WQE into a 16-WQEBB ring at its count (wrapping at the end), as posting
    // does; the ring is read back in WQE order.
    let qp = HostQueues::new(HostQueuesConfig { log_sq: 4, ..Default::default() });
    let mut kinds = std::collections::BTreeSet::new();
    for (c, want) in cases.iter().zip(&answers) {
        let mut d = qp.desc();
        d.qpn = c.qpn;
        // SAFETY: the HostQueues' own ring; no NIC runs.
        unsafe { d.write(&HostSys, c.pi, &c.wqe) };
        let mut got = Vec::new();
        for k in 0..c.wqe.wqebbs() as u64 {
            // SAFETY: a WQEBB of the ring.
            got.extend_from_slice(unsafe { std::slice::from_raw_parts(d.wqebb_addr(c.pi + k) as *const u8, 64) });
        }
        got.truncate(c.wqe.ds as usize * 16);
        assert_eq!(&hex(&got), want, "request {:?}", c.req);
        let ctrl = c.wqe.ctrl();
        kinds.insert((ctrl.opcode(), ctrl.opmod(), c.wqe.ds));
    }
    // Every WQE kind the device path emits was covered.
    for k in [(0x00, 0, 2), (0x08, 0, 3), (0x08, 0, 4), (0x08, 0, 8), (0x10, 0, 3), (0x11, 0, 4), (0x12, 0, 4), (0x14, 8, 4), (0x14, 9, 5), (0x15, 8, 4), (0x15, 9, 4), (0x23, 0, 2)] {
        assert!(kinds.contains(&k), "kind {k:x?} not covered");
    }
    eprintln!("{} WQEs byte-identical to rdma-core's mlx5dv.h construction", cases.len());
}

#[test]
fn doorbell_record_and_doorbell_match_rdma_core() {
    let Some(exe) = golden_program() else { return };
    let mut rng = Rng(42);
    let qp = HostQueues::new(HostQueuesConfig::default());
    let mut reqs = Vec::new();
    let mut got = Vec::new();
    for i in 0..500 {
        let new = match i {
            0 => 1,
            1 => 0x1_0000,
            2 => 0xffff,
            _ => 1 + rng.below(1 << 40),
        };
        let qpn = rng.below(1 << 24) as u32;
        // SAFETY: no NIC runs and this thread is the only user of the queues.
        unsafe { qp.reset_at(new - 1) };
        let mut d = qp.desc();
        d.qpn = qpn;
        // SAFETY: the HostQueues' own queues; no NIC runs. Everything below `new` counts as ready.
        unsafe { d.post_send(&HostSys, new) }.unwrap();
        let mut b = [0u8; 16];
        // SAFETY: the 8-byte doorbell record and the 8-byte doorbell register of the HostQueues.
        unsafe {
            std::ptr::copy_nonoverlapping(qp.dbr(), b.as_mut_ptr(), 8);
            std::ptr::copy_nonoverlapping(qp.doorbell(), b.as_mut_ptr().add(8), 8);
        }
        reqs.push(format!("B {:x} {qpn:x}", new as u16));
        got.push(hex(&b));
    }
    assert_eq!(ask(&exe, &reqs), got);
}

#[test]
fn cqes_match_rdma_core() {
    let Some(exe) = golden_program() else { return };
    // The constructors.
    let mut rng = Rng(7);
    let mut reqs = Vec::new();
    let mut got = Vec::new();
    for _ in 0..300 {
        let (qpn, counter, op) = (rng.below(1 << 24) as u32, rng.next() as u16, rng.next() as u8);
        let (bc, owner) = (rng.next() as u32, rng.below(2) as u8);
        reqs.push(format!("C {qpn:x} {counter:x} {op:x} {bc:x} {owner:x}"));
        got.push(hex(bytemuck::bytes_of(&Cqe64::req(op, qpn, counter, bc, owner == 1))));
        let (syn, vendor) = (rng.next() as u8, rng.next() as u8);
        reqs.push(format!("E {qpn:x} {counter:x} {op:x} {syn:x} {vendor:x} {owner:x}"));
        got.push(hex(bytemuck::bytes_of(&ErrCqe::req_err(op, qpn, counter, syn, vendor, owner == 1))));
    }
    assert_eq!(ask(&exe, &reqs), got);

    // What the emulator writes into CQ memory: a normal CQ of two entries over three laps (owner bit
    // 0, then 1, then 0), a collapsed CQ, and an error CQE.
    for collapsed in [false, true] {
        let mrs = Arc::new(MrTable::new());
        let qp = HostQueues::new(HostQueuesConfig { qpn: 0xab_cdef, log_sq: 2, log_cq: 1, collapsed, start: 0xfffe, batch: 1 });
        let mut nic = Nic::new(mrs.clone(), FaultConfig::default());
        // SAFETY: the HostQueues outlives the NIC (both local; the NIC is dropped first).
        unsafe { nic.add_qp(qp.setup(), Box::new(Loopback::new(mrs.clone()))).unwrap() };
        let d = qp.desc();
        let mut reqs = Vec::new();
        let mut got = Vec::new();
        for lap in 0..6u64 {
            // SAFETY: the HostQueues' descriptor; no other poster.
            let end = unsafe { d.post(&HostSys, &[Wqe::nop(0)]) }.unwrap();
            nic.poll();
            // SAFETY: as above.
            unsafe { d.poll(&HostSys, end) }.unwrap();
            let slot = if collapsed { 0 } else { lap % 2 };
            let owner = if collapsed { 0 } else { (lap / 2) % 2 };
            // SAFETY: a slot of the HostQueues' CQ, written by the NIC (which is not running now).
            got.push(hex(unsafe { std::slice::from_raw_parts(qp.cq().add(64 * slot as usize), 64) }));
            reqs.push(format!("C abcdef {:x} {:x} 0 {owner:x}", (0xfffe + lap) as u16, opcode::NOP));
        }
        // An error CQE: a WRITE with an unknown rkey.
        let mut local = vec![0u64; 8];
        // SAFETY: `local` outlives the NIC.
        unsafe { mrs.register(5, local.as_mut_ptr() as *mut u8, 64, Access::ALL).unwrap() };
        // SAFETY: as above.
        let end = unsafe { d.post(&HostSys, &[Wqe::rdma_write(0, Remote { addr: 0x1000, rkey: 0x999 }, Local { addr: local.as_ptr() as u64, lkey: 5 }, 8)]) }.unwrap();
        nic.poll();
        // SAFETY: as above.
        let e = unsafe { d.poll(&HostSys, end) }.unwrap_err();
        assert!(matches!(e, rshmem_ibgda::PollError::Cqe(c) if c.syndrome == syndrome::REMOTE_ACCESS && c.cqe_opcode == cqe_opcode::REQ_ERR), "{e:?}");
        let slot = 0; // collapsed, or the 7th CQE of a two-entry CQ
        let owner = if collapsed { 0 } else { (6 / 2) % 2 };
        // SAFETY: as above.
        got.push(hex(unsafe { std::slice::from_raw_parts(qp.cq().add(64 * slot), 64) }));
        reqs.push(format!("E abcdef {:x} {:x} {:x} {:x} {owner:x}", (0xfffe + 6u64) as u16, opcode::RDMA_WRITE, syndrome::REMOTE_ACCESS, rshmem_ibgda::emu::Reason::UnknownRkey as u8));
        assert_eq!(ask(&exe, &reqs), got, "collapsed {collapsed}");
        drop(nic);
        drop(local);
    }
}

#[test]
fn layouts_and_constants_match_rdma_core() {
    let Some(exe) = golden_program() else { return };
    let line = ask(&exe, &["L".to_string()]).remove(0);
    let toks: Vec<&str> = line.split_whitespace().collect();
    let header: std::collections::BTreeMap<&str, u64> = toks.chunks(2).map(|p| (p[0], p[1].parse().unwrap())).collect();
    let ours: Vec<(&str, u64)> = vec![
        ("sizeof.mlx5_wqe_ctrl_seg", size_of::<CtrlSeg>() as u64),
        ("mlx5_wqe_ctrl_seg.opmod_idx_opcode", offset_of!(CtrlSeg, opmod_idx_opcode) as u64),
        ("mlx5_wqe_ctrl_seg.qpn_ds", offset_of!(CtrlSeg, qpn_ds) as u64),
        ("mlx5_wqe_ctrl_seg.signature", offset_of!(CtrlSeg, signature) as u64),
        ("mlx5_wqe_ctrl_seg.dci_stream_channel_id", offset_of!(CtrlSeg, dci_stream_channel_id) as u64),
        ("mlx5_wqe_ctrl_seg.fm_ce_se", offset_of!(CtrlSeg, fm_ce_se) as u64),
        ("mlx5_wqe_ctrl_seg.imm", offset_of!(CtrlSeg, imm) as u64),
        ("sizeof.mlx5_wqe_raddr_seg", size_of::<RaddrSeg>() as u64),
        ("mlx5_wqe_raddr_seg.raddr", offset_of!(RaddrSeg, raddr) as u64),
        ("mlx5_wqe_raddr_seg.rkey", offset_of!(RaddrSeg, rkey) as u64),
        ("mlx5_wqe_raddr_seg.reserved", offset_of!(RaddrSeg, reserved) as u64),
        ("sizeof.mlx5_wqe_data_seg", size_of::<DataSeg>() as u64),
        ("mlx5_wqe_data_seg.byte_count", offset_of!(DataSeg, byte_count) as u64),
        ("mlx5_wqe_data_seg.lkey", offset_of!(DataSeg, lkey) as u64),
        ("mlx5_wqe_data_seg.addr", offset_of!(DataSeg, addr) as u64),
        ("sizeof.mlx5_wqe_inl_data_seg", size_of::<InlineHdr>() as u64),
        ("mlx5_wqe_inl_data_seg.byte_count", offset_of!(InlineHdr, byte_count) as u64),
        ("sizeof.mlx5_wqe_atomic_seg", size_of::<AtomicSeg>() as u64),
        ("mlx5_wqe_atomic_seg.swap_add", offset_of!(AtomicSeg, swap_add) as u64),
        ("mlx5_wqe_atomic_seg.compare", offset_of!(AtomicSeg, compare) as u64),
        ("sizeof.mlx5_cqe64", size_of::<Cqe64>() as u64),
        ("mlx5_cqe64.wqe_id", offset_of!(Cqe64, wqe_id) as u64),
        ("mlx5_cqe64.ml_path", offset_of!(Cqe64, ml_path) as u64),
        ("mlx5_cqe64.slid", offset_of!(Cqe64, slid) as u64),
        ("mlx5_cqe64.flags_rqpn", offset_of!(Cqe64, flags_rqpn) as u64),
        ("mlx5_cqe64.srqn_uidx", offset_of!(Cqe64, srqn_uidx) as u64),
        ("mlx5_cqe64.imm_inval_pkey", offset_of!(Cqe64, imm_inval_pkey) as u64),
        ("mlx5_cqe64.app", offset_of!(Cqe64, app) as u64),
        ("mlx5_cqe64.byte_cnt", offset_of!(Cqe64, byte_cnt) as u64),
        ("mlx5_cqe64.timestamp", offset_of!(Cqe64, timestamp) as u64),
        ("mlx5_cqe64.sop_drop_qpn", offset_of!(Cqe64, sop_drop_qpn) as u64),
        ("mlx5_cqe64.wqe_counter", offset_of!(Cqe64, wqe_counter) as u64),
        ("mlx5_cqe64.signature", offset_of!(Cqe64, signature) as u64),
        ("mlx5_cqe64.op_own", offset_of!(Cqe64, op_own) as u64),
        ("sizeof.mlx5_err_cqe", size_of::<ErrCqe>() as u64),
        ("mlx5_err_cqe.srqn", offset_of!(ErrCqe, srqn) as u64),
        ("mlx5_err_cqe.vendor_err_synd", offset_of!(ErrCqe, vendor_err_synd) as u64),
        ("mlx5_err_cqe.syndrome", offset_of!(ErrCqe, syndrome) as u64),
        ("mlx5_err_cqe.s_wqe_opcode_qpn", offset_of!(ErrCqe, s_wqe_opcode_qpn) as u64),
        ("mlx5_err_cqe.wqe_counter", offset_of!(ErrCqe, wqe_counter) as u64),
        ("mlx5_err_cqe.signature", offset_of!(ErrCqe, signature) as u64),
        ("mlx5_err_cqe.op_own", offset_of!(ErrCqe, op_own) as u64),
        ("MLX5_OPCODE_NOP", opcode::NOP as u64),
        ("MLX5_OPCODE_SEND_INVAL", opcode::SEND_INVAL as u64),
        ("MLX5_OPCODE_RDMA_WRITE", opcode::RDMA_WRITE as u64),
        ("MLX5_OPCODE_RDMA_WRITE_IMM", opcode::RDMA_WRITE_IMM as u64),
        ("MLX5_OPCODE_SEND", opcode::SEND as u64),
        ("MLX5_OPCODE_SEND_IMM", opcode::SEND_IMM as u64),
        ("MLX5_OPCODE_RDMA_READ", opcode::RDMA_READ as u64),
        ("MLX5_OPCODE_ATOMIC_CS", opcode::ATOMIC_CS as u64),
        ("MLX5_OPCODE_ATOMIC_FA", opcode::ATOMIC_FA as u64),
        ("MLX5_OPCODE_ATOMIC_MASKED_CS", opcode::ATOMIC_MASKED_CS as u64),
        ("MLX5_OPCODE_ATOMIC_MASKED_FA", opcode::ATOMIC_MASKED_FA as u64),
        ("MLX5_OPCODE_LOCAL_INVAL", opcode::LOCAL_INVAL as u64),
        ("MLX5_OPCODE_UMR", opcode::UMR as u64),
        ("MLX5_WQE_CTRL_CQ_UPDATE", fm_ce_se::CQ_UPDATE as u64),
        ("MLX5_WQE_CTRL_SOLICITED", fm_ce_se::SOLICITED as u64),
        ("MLX5_WQE_CTRL_FENCE", fm_ce_se::FM_FENCE_AND_SMALL as u64),
        ("MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE", fm_ce_se::FM_INITIATOR_SMALL_FENCE as u64),
        ("MLX5_INLINE_SEG", mlx5::INLINE_SEG as u64),
        ("MLX5_INVALID_LKEY", mlx5::INVALID_LKEY as u64),
        ("MLX5_SEND_WQE_BB", mlx5::WQEBB as u64),
        ("MLX5_SEND_WQE_SHIFT", mlx5::WQEBB_SHIFT as u64),
        ("MLX5_SND_DBR", mlx5::SND_DBR as u64),
        ("MLX5_RCV_DBR", mlx5::RCV_DBR as u64),
        ("MLX5_CQE_REQ", cqe_opcode::REQ as u64),
        ("MLX5_CQE_RESP_WR_IMM", cqe_opcode::RESP_WR_IMM as u64),
        ("MLX5_CQE_RESP_SEND", cqe_opcode::RESP_SEND as u64),
        ("MLX5_CQE_RESP_SEND_IMM", cqe_opcode::RESP_SEND_IMM as u64),
        ("MLX5_CQE_RESP_SEND_INV", cqe_opcode::RESP_SEND_INV as u64),
        ("MLX5_CQE_REQ_ERR", cqe_opcode::REQ_ERR as u64),
        ("MLX5_CQE_RESP_ERR", cqe_opcode::RESP_ERR as u64),
        ("MLX5_CQE_INVALID", cqe_opcode::INVALID as u64),
        ("MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR", syndrome::LOCAL_LENGTH as u64),
        ("MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR", syndrome::LOCAL_QP_OP as u64),
        ("MLX5_CQE_SYNDROME_LOCAL_PROT_ERR", syndrome::LOCAL_PROT as u64),
        ("MLX5_CQE_SYNDROME_WR_FLUSH_ERR", syndrome::WR_FLUSH as u64),
        ("MLX5_CQE_SYNDROME_MW_BIND_ERR", syndrome::MW_BIND as u64),
        ("MLX5_CQE_SYNDROME_BAD_RESP_ERR", syndrome::BAD_RESP as u64),
        ("MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR", syndrome::LOCAL_ACCESS as u64),
        ("MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR", syndrome::REMOTE_INVAL_REQ as u64),
        ("MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR", syndrome::REMOTE_ACCESS as u64),
        ("MLX5_CQE_SYNDROME_REMOTE_OP_ERR", syndrome::REMOTE_OP as u64),
        ("MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR", syndrome::TRANSPORT_RETRY_EXC as u64),
        ("MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR", syndrome::RNR_RETRY_EXC as u64),
        ("MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR", syndrome::REMOTE_ABORTED as u64),
    ];
    assert_eq!(ours.len(), header.len(), "every value the C program prints is compared");
    for (name, v) in ours {
        assert_eq!(header.get(name), Some(&v), "{name}");
    }
}
