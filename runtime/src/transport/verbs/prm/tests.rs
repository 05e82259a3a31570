//! The PRM layouts and commands against rdma-core's and NVSHMEM's headers.

use super::*;

/// Every field's (bit offset, width), as a script computed them from the headers by summing the
/// `u8 name[width]` declarations (rdma-core @691953d8 `providers/mlx5/mlx5_ifc.h`; NVSHMEM @2d7d25f0
/// `src/modules/transport/common/{mlx5_ifc.h,mlx5_prm.h}` for `cqc`, `create_cq_in` and
/// `create_qp_in.wq_umem_offset`), and each structure's size (`DEVX_ST_SZ_BYTES`).
const FROM_HEADERS: &[(&str, u32, u32)] = &[
    ("mbox_out.status", 0x0, 8),
    ("mbox_out.syndrome", 0x20, 32),
    ("query_hca_cap_in.opcode", 0x0, 16),
    ("query_hca_cap_in.op_mod", 0x30, 16),
    ("query_hca_cap_out.capability", 0x80, 32768),
    ("cmd_hca_cap.log_max_qp_sz", 0x88, 8),
    ("cmd_hca_cap.log_max_cq_sz", 0xc8, 8),
    ("cmd_hca_cap.port_type", 0x1b6, 2),
    ("cmd_hca_cap.log_max_msg", 0x1c3, 5),
    ("cmd_hca_cap.cqe_version", 0x1fc, 4),
    ("cmd_hca_cap.roce", 0x21d, 1),
    ("cmd_hca_cap.atomic", 0x21e, 1),
    ("cmd_hca_cap.cq_oi", 0x220, 1),
    ("cmd_hca_cap.uar_4k", 0x240, 1),
    ("cmd_hca_cap.log_bf_reg_size", 0x26b, 5),
    ("atomic_caps.atomic_req_8B_endianness_mode", 0x40, 2),
    ("atomic_caps.supported_atomic_req_8B_endianness_mode_1", 0x46, 1),
    ("atomic_caps.atomic_operations", 0x90, 16),
    ("atomic_caps.atomic_size_qp", 0xb0, 16),
    ("atomic_caps.atomic_size_dc", 0xd0, 16),
    ("create_cq_in.opcode", 0x0, 16),
    ("create_cq_in.cq_context", 0x80, 512),
    ("create_cq_in.cq_umem_offset", 0x280, 64),
    ("create_cq_in.cq_umem_id", 0x2c0, 32),
    ("create_cq_in.cq_umem_valid", 0x2e0, 1),
    ("create_cq_out.cqn", 0x48, 24),
    ("cqc.dbr_umem_valid", 0x6, 1),
    ("cqc.cqe_sz", 0x8, 3),
    ("cqc.cc", 0xb, 1),
    ("cqc.oi", 0xe, 1),
    ("cqc.dbr_umem_id", 0x20, 32),
    ("cqc.log_cq_size", 0x63, 5),
    ("cqc.uar_page", 0x68, 24),
    ("cqc.c_eqn", 0xb8, 8),
    ("cqc.log_page_size", 0xc3, 5),
    ("cqc.dbr_addr", 0x1c0, 64),
    ("create_qp_in.opcode", 0x0, 16),
    ("create_qp_in.qpc", 0xc0, 1856),
    ("create_qp_in.wq_umem_offset", 0x800, 64),
    ("create_qp_in.wq_umem_id", 0x840, 32),
    ("create_qp_in.wq_umem_valid", 0x860, 1),
    ("create_qp_out.qpn", 0x48, 24),
    // rst2init_qp_in, init2rtr_qp_in and rtr2rts_qp_in: the same offsets.
    ("modify_qp_in.opcode", 0x0, 16),
    ("modify_qp_in.qpn", 0x48, 24),
    ("modify_qp_in.opt_param_mask", 0x80, 32),
    ("modify_qp_in.qpc", 0xc0, 1856),
    ("qpc.st", 0x8, 8),
    ("qpc.pm_state", 0x13, 2),
    ("qpc.pd", 0x28, 24),
    ("qpc.mtu", 0x40, 3),
    ("qpc.log_msg_max", 0x43, 5),
    ("qpc.log_rq_size", 0x49, 4),
    ("qpc.no_sq", 0x50, 1),
    ("qpc.log_sq_size", 0x51, 4),
    ("qpc.counter_set_id", 0x60, 8),
    ("qpc.uar_page", 0x68, 24),
    ("qpc.user_index", 0x88, 24),
    ("qpc.log_page_size", 0xa3, 5),
    ("qpc.remote_qpn", 0xa8, 24),
    ("qpc.primary_address_path", 0xc0, 352),
    ("qpc.log_ack_req_freq", 0x380, 4),
    ("qpc.log_sra_max", 0x388, 3),
    ("qpc.retry_count", 0x38d, 3),
    ("qpc.rnr_retry", 0x390, 3),
    ("qpc.next_send_psn", 0x3c8, 24),
    ("qpc.cqn_snd", 0x3e8, 24),
    ("qpc.log_rra_max", 0x488, 3),
    ("qpc.atomic_mode", 0x48c, 4),
    ("qpc.rre", 0x490, 1),
    ("qpc.rwe", 0x491, 1),
    ("qpc.rae", 0x492, 1),
    ("qpc.page_offset", 0x494, 6),
    ("qpc.min_rnr_nak", 0x4a3, 5),
    ("qpc.cqn_rcv", 0x4e8, 24),
    ("qpc.dbr_addr", 0x500, 64),
    ("qpc.rq_type", 0x565, 3),
    ("qpc.srqn_rmpn_xrqn", 0x568, 24),
    ("qpc.cs_req", 0x630, 8),
    ("qpc.cs_res", 0x638, 8),
    ("qpc.dbr_umem_valid", 0x683, 1),
    ("qpc.dbr_umem_id", 0x720, 32),
    ("ads.pkey_index", 0x10, 16),
    ("ads.grh", 0x28, 1),
    ("ads.mlid", 0x29, 7),
    ("ads.rlid", 0x30, 16),
    ("ads.ack_timeout", 0x40, 5),
    ("ads.src_addr_index", 0x48, 8),
    ("ads.hop_limit", 0x58, 8),
    ("ads.tclass", 0x64, 8),
    ("ads.rgid_rip", 0x80, 128),
    ("ads.dscp", 0x10a, 6),
    ("ads.udp_sport", 0x110, 16),
    ("ads.eth_prio", 0x121, 3),
    ("ads.sl", 0x124, 4),
    ("ads.vhca_port_num", 0x128, 8),
    ("ads.rmac_47_32", 0x130, 16),
    ("ads.rmac_31_0", 0x140, 32),
];

/// Structure sizes in bytes, from the same headers.
const SIZES: &[(&str, usize)] = &[
    ("mbox_out", 16),
    ("query_hca_cap_in", 16),
    ("query_hca_cap_out", 4112),
    ("cmd_hca_cap", 256),
    ("atomic_caps", 256),
    ("create_cq_in", 272),
    ("create_cq_out", 16),
    ("cqc", 64),
    ("create_qp_in", 272),
    ("create_qp_out", 16),
    ("modify_qp_in", 272),
    ("qpc", 232),
    ("ads", 44),
];

fn all_structs() -> Vec<(&'static str, usize, &'static [Field])> {
    vec![
        (mbox_out::NAME, mbox_out::BYTES, mbox_out::FIELDS),
        (query_hca_cap_in::NAME, query_hca_cap_in::BYTES, query_hca_cap_in::FIELDS),
        (query_hca_cap_out::NAME, query_hca_cap_out::BYTES, query_hca_cap_out::FIELDS),
        (cmd_hca_cap::NAME, cmd_hca_cap::BYTES, cmd_hca_cap::FIELDS),
        (atomic_caps::NAME, atomic_caps::BYTES, atomic_caps::FIELDS),
        (create_cq_in::NAME, create_cq_in::BYTES, create_cq_in::FIELDS),
        (create_cq_out::NAME, create_cq_out::BYTES, create_cq_out::FIELDS),
        (cqc::NAME, cqc::BYTES, cqc::FIELDS),
        (create_qp_in::NAME, create_qp_in::BYTES, create_qp_in::FIELDS),
        (create_qp_out::NAME, create_qp_out::BYTES, create_qp_out::FIELDS),
        (modify_qp_in::NAME, modify_qp_in::BYTES, modify_qp_in::FIELDS),
        (qpc::NAME, qpc::BYTES, qpc::FIELDS),
        (ads::NAME, ads::BYTES, ads::FIELDS),
    ]
}

#[test]
fn every_field_sits_where_the_headers_put_it() {
    let mut seen = 0;
    for (name, bytes, fields) in all_structs() {
        let size = SIZES.iter().find(|s| s.0 == name).unwrap_or_else(|| panic!("no size for {name}")).1;
        assert_eq!(bytes, size, "{name}: size");
        for f in fields {
            let (_, bit, width) =
                FROM_HEADERS.iter().find(|e| e.0 == f.name).unwrap_or_else(|| panic!("{} is not in the header table", f.name));
            assert_eq!((f.bit, f.width), (*bit, *width), "{}", f.name);
            assert!((f.bit + f.width) as usize <= bytes * 8, "{} ends past {name}", f.name);
            seen += 1;
        }
    }
    assert_eq!(seen, FROM_HEADERS.len(), "every header entry is declared once");
    // Embedded structures fill their slots exactly.
    assert_eq!(qpc::BYTES * 8, create_qp_in::QPC.width as usize);
    assert_eq!(qpc::BYTES * 8, modify_qp_in::QPC.width as usize);
    assert_eq!(cqc::BYTES * 8, create_cq_in::CQ_CONTEXT.width as usize);
    assert_eq!(ads::BYTES * 8, qpc::PRIMARY_ADDRESS_PATH.width as usize);
    assert!(cmd_hca_cap::BYTES * 8 <= query_hca_cap_out::CAPABILITY.width as usize);
}

#[test]
fn the_writer_numbers_bits_from_the_msb_in_big_endian_words() {
    let mut m = Mailbox::new(16);
    // DEVX_SET(.., bit 0x0, 16 bits) = 0x0500 writes bytes 0..2 big-endian.
    m.set(Field::new("a", 0, 16), 0x0500).unwrap();
    assert_eq!(&m.bytes()[..2], &[0x05, 0x00]);
    // A 24-bit field at bit 0x48 (a QPN) takes bytes 9..12.
    m.set(Field::new("b", 0x48, 24), 0xabcdef).unwrap();
    assert_eq!(&m.bytes()[8..12], &[0x00, 0xab, 0xcd, 0xef]);
    // Fields narrower than a byte and crossing bytes; neighbours are kept.
    m.set(Field::new("c", 0x63, 5), 0x1f).unwrap();
    assert_eq!(m.bytes()[12], 0x1f);
    m.set(Field::new("d", 0x3e, 4), 0b1011).unwrap();
    assert_eq!((m.bytes()[7], m.bytes()[8]), (0b10, 0b1100_0000));
    assert_eq!(m.get(Field::new("d", 0x3e, 2)), 0b10);
    // Rewriting clears the old bits.
    m.set(Field::new("c", 0x63, 5), 0b00100).unwrap();
    assert_eq!(m.bytes()[12], 0b00100);
    // 64-bit fields are big-endian 64-bit words.
    let mut w = Mailbox::new(16);
    w.set(Field::new("e", 64, 64), 0x0102_0304_0506_0708).unwrap();
    assert_eq!(&w.bytes()[8..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(w.get(Field::new("e", 64, 64)), 0x0102_0304_0506_0708);
    // Every value round-trips through every position and width.
    for width in 1..=64u32 {
        for bit in [0u32, 1, 7, 13, 31, 32, 33] {
            let f = Field::new("r", bit, width);
            let v = 0xa5a5_5a5a_c3c3_3c3cu64 & if width == 64 { u64::MAX } else { (1 << width) - 1 };
            let mut m = Mailbox::new(16);
            m.set(f, v).unwrap();
            assert_eq!(m.get(f), v, "bit {bit} width {width}");
            let ones: u32 = m.bytes().iter().map(|b| b.count_ones()).sum();
            assert_eq!(ones, v.count_ones(), "nothing outside the field is touched");
        }
    }
}

#[test]
fn the_writer_refuses_what_does_not_fit() {
    let mut m = Mailbox::new(modify_qp_in::BYTES);
    let e = m.set(modify_qp_in::QPN, 1 << 24).unwrap_err().to_string();
    assert!(e.contains("modify_qp_in.qpn") && e.contains("24 bits") && e.contains("0x1000000"), "{e}");
    let e = m.set(Field::new("x.far", 272 * 8 - 4, 8), 1).unwrap_err().to_string();
    assert!(e.contains("x.far") && e.contains("272-byte"), "{e}");
    let e = m.set(ads::RGID_RIP, 0).unwrap_err().to_string();
    assert!(e.contains("128 bits") && e.contains("as bytes"), "{e}");
    let e = m.set_bytes(ads::RGID_RIP, &[0; 4]).unwrap_err().to_string();
    assert!(e.contains("cannot take 4 bytes"), "{e}");
    assert!(Mailbox::new(16).set(Field::new("y", 0, 1), 2).is_err());
}

/// Golden bytes: the same commands built by a C program with rdma-core's `DEVX_SET`/`DEVX_SET64`
/// (`<infiniband/mlx5dv.h>`, v44) over NVSHMEM's `mlx5_ifc.h` and `mlx5_prm.h` (prm/devx_golden.c, which
/// says how to rerun it), as (size, nonzero bytes).
mod golden {
    pub const QUERY_HCA_CAP_GENERAL: (usize, &[(usize, u8)]) = (16, &[(0, 0x01), (7, 0x01)]);
    pub const QUERY_HCA_CAP_ATOMIC: (usize, &[(usize, u8)]) = (16, &[(0, 0x01), (7, 0x07)]);
    pub const CREATE_CQ: (usize, &[(usize, u8)]) = (272, &[(0, 0x04), (16, 0x02), (17, 0x12), (23, 0x22), (28, 0x0a), (30, 0x12), (31, 0x34), (39, 0x07), (40, 0x04), (72, 0x11), (73, 0x22), (74, 0x33), (75, 0x44), (76, 0x55), (77, 0x66), (78, 0x77), (79, 0x88), (80, 0x01), (81, 0x02), (82, 0x03), (83, 0x04), (84, 0x05), (85, 0x06), (86, 0x07), (87, 0x08), (91, 0x11), (92, 0x80)]);
    pub const CREATE_QP: (usize, &[(usize, u8)]) = (272, &[(0, 0x05), (26, 0x18), (29, 0x0a), (30, 0xbc), (31, 0xde), (34, 0x50), (37, 0x05), (38, 0x43), (39, 0x21), (41, 0x05), (42, 0xa5), (43, 0xa5), (150, 0x01), (151, 0x23), (182, 0x04), (183, 0x56), (191, 0x08), (196, 0x01), (198, 0x07), (199, 0x89), (232, 0x10), (255, 0x44), (262, 0x10), (267, 0x33), (268, 0x80)]);
    pub const RST2INIT_ETH: (usize, &[(usize, u8)]) = (272, &[(0, 0x05), (1, 0x02), (9, 0xab), (10, 0xcd), (11, 0xef), (26, 0x18), (85, 0x02), (169, 0x03), (170, 0xe0)]);
    pub const RST2INIT_IB: (usize, &[(usize, u8)]) = (272, &[(0, 0x05), (1, 0x02), (9, 0xab), (10, 0xcd), (11, 0xef), (26, 0x18), (85, 0x02), (169, 0x03), (170, 0xe0)]);
    pub const INIT2RTR_IB: (usize, &[(usize, u8)]) = (272, &[(0, 0x05), (1, 0x03), (9, 0xab), (10, 0xcd), (11, 0xef), (32, 0xbe), (45, 0x12), (46, 0x34), (47, 0x56), (54, 0x12), (55, 0x34), (60, 0x02), (61, 0x80), (84, 0x03), (169, 0x80), (172, 0x0c)]);
    pub const INIT2RTR_ROCE: (usize, &[(usize, u8)]) = (272, &[(0, 0x05), (1, 0x03), (9, 0xab), (10, 0xcd), (11, 0xef), (32, 0x7e), (45, 0x12), (46, 0x34), (47, 0x56), (57, 0x03), (59, 0xff), (74, 0xff), (75, 0xff), (76, 0x0a), (79, 0x02), (81, 0x1a), (82, 0xc0), (84, 0x50), (86, 0x02), (87, 0x11), (88, 0x22), (89, 0x33), (90, 0x44), (91, 0x55), (169, 0x80), (172, 0x0c)]);
    pub const RTR2RTS: (usize, &[(usize, u8)]) = (272, &[(0, 0x05), (1, 0x04), (9, 0xab), (10, 0xcd), (11, 0xef), (56, 0xa0), (137, 0x87), (138, 0xe0)]);
    pub const CAP_GENERAL_OUT: (usize, &[(usize, u8)]) = (4112, &[(33, 0x0f), (41, 0x16), (72, 0x1e), (79, 0x01), (83, 0x06), (84, 0x80), (93, 0x09)]);
    pub const CAP_ATOMIC_OUT: (usize, &[(usize, u8)]) = (4112, &[(35, 0x0f), (39, 0x0c), (43, 0x08)]);
}

fn expand((size, nonzero): (usize, &[(usize, u8)])) -> Vec<u8> {
    let mut b = vec![0u8; size];
    for &(i, v) in nonzero {
        b[i] = v;
    }
    b
}

fn assert_golden(what: &str, m: &Mailbox, g: (usize, &[(usize, u8)])) {
    let want = expand(g);
    assert_eq!(m.bytes().len(), want.len(), "{what}: size");
    let diff: Vec<String> = (0..want.len())
        .filter(|&i| m.bytes()[i] != want[i])
        .map(|i| format!("byte {i}: {:#04x}, DEVX_SET gives {:#04x}", m.bytes()[i], want[i]))
        .collect();
    assert!(diff.is_empty(), "{what}:\n{}", diff.join("\n"));
}

#[test]
fn commands_match_devx_set_byte_for_byte() {
    assert_golden("QUERY_HCA_CAP general", &query_hca_cap_in(cap_op_mod::GENERAL_CUR).unwrap(), golden::QUERY_HCA_CAP_GENERAL);
    assert_golden("QUERY_HCA_CAP atomic", &query_hca_cap_in(cap_op_mod::ATOMIC_CUR).unwrap(), golden::QUERY_HCA_CAP_ATOMIC);
    let cq = CqParams {
        log_cq_size: 10,
        uar_page: 0x1234,
        eqn: 7,
        cq_umem_id: 0x11,
        cq_umem_offset: 0x0102_0304_0506_0708,
        dbr_umem_id: 0x22,
        dbr_offset: 0x1122_3344_5566_7788,
        log_page_size: 4,
    };
    assert_golden("CREATE_CQ", &create_cq_in(&cq).unwrap(), golden::CREATE_CQ);
    let qp = QpParams {
        pdn: 0xabcde,
        uar_page: 0x54321,
        log_sq_size: 10,
        cqn_snd: 0x123,
        cqn_rcv: 0x456,
        srqn: 0x789,
        wq_umem_id: 0x33,
        wq_umem_offset: 0x1000,
        dbr_umem_id: 0x44,
        dbr_offset: 0x8,
        user_index: 0x5a5a5,
    };
    assert_golden("CREATE_QP", &create_qp_in(&qp).unwrap(), golden::CREATE_QP);
    assert_golden("RST2INIT (Ethernet)", &rst2init_qp_in(0xabcdef, 2, false).unwrap(), golden::RST2INIT_ETH);
    assert_golden("RST2INIT (InfiniBand)", &rst2init_qp_in(0xabcdef, 2, true).unwrap(), golden::RST2INIT_IB);
    let ib = PathParams::Ib { rlid: 0x1234, sl: 3, tclass: 0x28 };
    assert_golden("INIT2RTR (InfiniBand)", &init2rtr_qp_in(0xabcdef, 5, 0x123456, 4, &ib).unwrap(), golden::INIT2RTR_IB);
    let roce = PathParams::Roce {
        rmac: [0x02, 0x11, 0x22, 0x33, 0x44, 0x55],
        rgid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2],
        sgid_index: 3,
        udp_sport: 0xc000,
        eth_prio: 5,
        tclass: 0x68,
    };
    assert_golden("INIT2RTR (RoCE)", &init2rtr_qp_in(0xabcdef, 3, 0x123456, 4, &roce).unwrap(), golden::INIT2RTR_ROCE);
    assert_golden("RTR2RTS", &rtr2rts_qp_in(0xabcdef, 4).unwrap(), golden::RTR2RTS);
}

#[test]
fn capabilities_are_read_where_devx_get_reads_them() {
    let general = Mailbox::from_bytes(expand(golden::CAP_GENERAL_OUT));
    let atomic = Mailbox::from_bytes(expand(golden::CAP_ATOMIC_OUT));
    let caps = HcaCaps::parse(&general, Some(&atomic));
    assert_eq!(
        caps,
        HcaCaps {
            cqe_version: 1,
            atomic: true,
            roce: true,
            cq_oi: true,
            log_max_qp_sz: 15,
            log_max_cq_sz: 22,
            log_max_msg: 30,
            log_bf_reg_size: 9,
            atomic_operations: 0xf,
            atomic_size_qp: 0xc,
        }
    );
    assert!(caps.ibgda_gaps(10).is_empty(), "{:?}", caps.ibgda_gaps(10));
    assert!(caps.ibgda_gaps(16)[0].contains("2^16"));
    // Without the atomic capabilities, or with CQE version 0, IBGDA is refused with the reason.
    let gaps = HcaCaps::parse(&general, None).ibgda_gaps(10);
    assert!(gaps.iter().any(|g| g.contains("compare-swap")) && gaps.iter().any(|g| g.contains("8-byte")), "{gaps:?}");
    let old = HcaCaps { cqe_version: 0, ..caps };
    assert_eq!(old.ibgda_gaps(10), vec!["cqe_version is 0 (IBGDA's CQ polling needs 1)".to_string()]);
    // Command status and syndrome come from the output header.
    let mut out = Mailbox::new(16);
    out.bytes_mut()[..8].copy_from_slice(&[0x03, 0, 0, 0, 0x12, 0x34, 0x56, 0x78]);
    assert_eq!(out.status(), (3, 0x1234_5678));
}

#[test]
fn the_collapsed_cq_and_the_qp_ask_for_what_ibgda_needs() {
    // Read back through the field table: the values NVSHMEM's setup uses.
    let cq = create_cq_in(&CqParams { log_cq_size: 10, log_page_size: 4, ..CqParams::default() }).unwrap();
    let c = |f: Field| cq.get(f.at(create_cq_in::CQ_CONTEXT.bit));
    assert_eq!((c(cqc::CC), c(cqc::OI), c(cqc::CQE_SZ), c(cqc::DBR_UMEM_VALID)), (1, 1, 0, 1));
    assert_eq!(cq.get(create_cq_in::CQ_UMEM_VALID), 1);
    let qp = create_qp_in(&QpParams { log_sq_size: 15, ..QpParams::default() }).unwrap();
    let q = |f: Field| qp.get(f.at(create_qp_in::QPC.bit));
    assert_eq!((q(qpc::ST), q(qpc::PM_STATE), q(qpc::RQ_TYPE), q(qpc::LOG_SQ_SIZE)), (0, 3, 1, 15));
    assert_eq!((q(qpc::CS_REQ), q(qpc::CS_RES), q(qpc::DBR_UMEM_VALID)), (0, 0, 1));
    assert!(create_qp_in(&QpParams { log_sq_size: 16, ..QpParams::default() }).is_err(), "log_sq_size is 4 bits");
    let rts = rtr2rts_qp_in(1, 4).unwrap();
    assert_eq!(rts.get(mpath(ads::ACK_TIMEOUT)), 20);
    assert_eq!((rts.get(mq(qpc::RETRY_COUNT)), rts.get(mq(qpc::RNR_RETRY))), (7, 7));
}
