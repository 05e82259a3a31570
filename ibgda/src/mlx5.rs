//! mlx5 (ConnectX) send-queue, completion-queue and doorbell layouts, as the NIC reads and writes them.
//!
//! One `bytemuck::Pod` struct per layout. Multi-byte fields are stored as the big-endian bytes the NIC
//! sees ([`Be16`], [`Be32`], [`Be64`]); their getters and setters convert. Sizes and field offsets are
//! asserted at compile time against the PRM values of the research note
//! (`shared/research/ibgda-mlx5.md`, §1 WQE format, §3 doorbells, §4 CQE), which cites rdma-core's
//! `mlx5dv.h` and `wqe.h`, the kernel's `mlx5/qp.h` and NVSHMEM's IBGDA headers. The golden-byte test
//! (`tests/golden.rs`) checks the same offsets against the system's `infiniband/mlx5dv.h`.
//!
//! Everything here is `no_std`, allocation-free and panic-free: it is compiled to PTX.

use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};

/// One WQE basic block: the unit the send queue is indexed by.
pub const WQEBB: usize = 64;
/// log2 of [`WQEBB`] (`MLX5_SEND_WQE_SHIFT`).
pub const WQEBB_SHIFT: u32 = 6;
/// One data-size unit (`ds` counts these, control segment included).
pub const DS: usize = 16;
/// `ds` is a 6-bit field (`MLX5_WQE_CTRL_DS_MASK`).
pub const DS_MASK: u8 = 0x3f;
/// DS units per WQEBB.
pub const DS_PER_WQEBB: u32 = (WQEBB / DS) as u32;
/// The kernel's cap on one WQE (`MLX5_SEND_WQE_MAX_WQEBBS`).
pub const MAX_WQEBBS_PER_WQE: u32 = 16;
/// Size of one CQE (the 64-byte format, `cqe_sz = 0`).
pub const CQE_SIZE: usize = 64;
/// An lkey that ends a scatter/gather list together with a zero byte count (`MLX5_INVALID_LKEY`).
pub const INVALID_LKEY: u32 = 0x100;
/// Bit 31 of an inline segment's header (`MLX5_INLINE_SEG`).
pub const INLINE_SEG: u32 = 0x8000_0000;
/// Index of the send counter in the QP doorbell record, in 32-bit words (`MLX5_SND_DBR`).
pub const SND_DBR: usize = 1;
/// Index of the receive counter in the QP doorbell record (`MLX5_RCV_DBR`).
pub const RCV_DBR: usize = 0;
/// Offset of the BlueFlame registers in a UAR page (`MLX5_BF_OFFSET`).
pub const BF_OFFSET: usize = 0x800;
/// Size of a UAR page.
pub const UAR_PAGE: usize = 4096;
/// The largest one RDMA WRITE/READ may move ("MLX5 accepts up to 2 GiB per command", NVSHMEM).
pub const MAX_MSG: u32 = 1 << 31;

/// WQE opcodes (control segment byte 3) [note §1.3].
pub mod opcode {
    pub const NOP: u8 = 0x00;
    pub const SEND_INVAL: u8 = 0x01;
    pub const RDMA_WRITE: u8 = 0x08;
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    pub const SEND: u8 = 0x0a;
    pub const SEND_IMM: u8 = 0x0b;
    pub const RDMA_READ: u8 = 0x10;
    /// 64-bit compare-and-swap.
    pub const ATOMIC_CS: u8 = 0x11;
    /// 64-bit fetch-and-add.
    pub const ATOMIC_FA: u8 = 0x12;
    /// Masked ("extended") compare-and-swap; the size is in the opmod byte.
    pub const ATOMIC_MASKED_CS: u8 = 0x14;
    /// Masked ("extended") fetch-and-add; the size is in the opmod byte.
    pub const ATOMIC_MASKED_FA: u8 = 0x15;
    pub const LOCAL_INVAL: u8 = 0x1b;
    /// NVSHMEM's "DUMP": the NIC reads a local buffer; used as a cheap flush point.
    pub const DUMP: u8 = 0x23;
    pub const UMR: u8 = 0x25;

    /// The opcode's name (for error messages), NUL-terminated so C and PTX `printf` can take it.
    pub const fn name(op: u8) -> &'static str {
        match op {
            NOP => "NOP\0",
            SEND_INVAL => "SEND_INVAL\0",
            RDMA_WRITE => "RDMA WRITE\0",
            RDMA_WRITE_IMM => "RDMA WRITE with immediate\0",
            SEND => "SEND\0",
            SEND_IMM => "SEND with immediate\0",
            RDMA_READ => "RDMA READ\0",
            ATOMIC_CS => "atomic compare-and-swap\0",
            ATOMIC_FA => "atomic fetch-and-add\0",
            ATOMIC_MASKED_CS => "masked atomic compare-and-swap\0",
            ATOMIC_MASKED_FA => "masked atomic fetch-and-add\0",
            LOCAL_INVAL => "LOCAL_INVAL\0",
            DUMP => "DUMP\0",
            UMR => "UMR\0",
            _ => "unknown opcode\0",
        }
    }
}

/// Opmod values of the masked atomics (control segment byte 0) [note §1.3, NVSHMEM].
pub mod opmod {
    /// 4-byte masked atomic (`IBGDA_4_BYTE_EXT_AMO_OPMOD >> 24`).
    pub const EXT_AMO_4: u8 = 0x08;
    /// 8-byte masked atomic (`IBGDA_8_BYTE_EXT_AMO_OPMOD >> 24`).
    pub const EXT_AMO_8: u8 = 0x09;
}

/// Bits of the control segment's `fm_ce_se` byte [note §1.2].
pub mod fm_ce_se {
    /// Solicited event.
    pub const SOLICITED: u8 = 0x02;
    /// CE field (bits 3..2).
    pub const CE_MASK: u8 = 0x0c;
    /// Write a CQE when this WQE completes (`MLX5_WQE_CTRL_CQ_UPDATE`).
    pub const CQ_UPDATE: u8 = 0x08;
    /// Write a CQE and an EQE.
    pub const CQ_UPDATE_EQE: u8 = 0x0c;
    /// FM field (bits 7..5).
    pub const FM_MASK: u8 = 0xe0;
    pub const FM_INITIATOR_SMALL_FENCE: u8 = 0x20;
    /// Wait for earlier READs and atomics (NVSHMEM's `IBGDA_MLX5_FM_FENCE`).
    pub const FM_FENCE: u8 = 0x40;
    pub const FM_STRONG_ORDERING: u8 = 0x60;
    /// Small fence and fence; rdma-core's `MLX5_WQE_CTRL_FENCE` (IBV_SEND_FENCE).
    pub const FM_FENCE_AND_SMALL: u8 = 0x80;
}

/// CQE opcodes (top nibble of `op_own`) [note §4.1].
pub mod cqe_opcode {
    pub const REQ: u8 = 0;
    pub const RESP_WR_IMM: u8 = 1;
    pub const RESP_SEND: u8 = 2;
    pub const RESP_SEND_IMM: u8 = 3;
    pub const RESP_SEND_INV: u8 = 4;
    pub const REQ_ERR: u8 = 13;
    pub const RESP_ERR: u8 = 14;
    pub const INVALID: u8 = 15;
}

/// Error CQE syndromes (`syndrome` byte, offset 55) [note §4.1].
pub mod syndrome {
    pub const LOCAL_LENGTH: u8 = 0x01;
    pub const LOCAL_QP_OP: u8 = 0x02;
    pub const LOCAL_PROT: u8 = 0x04;
    pub const WR_FLUSH: u8 = 0x05;
    pub const MW_BIND: u8 = 0x06;
    pub const BAD_RESP: u8 = 0x10;
    pub const LOCAL_ACCESS: u8 = 0x11;
    pub const REMOTE_INVAL_REQ: u8 = 0x12;
    pub const REMOTE_ACCESS: u8 = 0x13;
    pub const REMOTE_OP: u8 = 0x14;
    pub const TRANSPORT_RETRY_EXC: u8 = 0x15;
    pub const RNR_RETRY_EXC: u8 = 0x16;
    pub const REMOTE_ABORTED: u8 = 0x22;

    /// A short English name of a syndrome (for error messages), NUL-terminated so C and PTX `printf`
    /// can take it as it is.
    pub const fn name(s: u8) -> &'static str {
        match s {
            LOCAL_LENGTH => "local length error\0",
            LOCAL_QP_OP => "local QP operation error (malformed WQE)\0",
            LOCAL_PROT => "local protection error (lkey or local address range)\0",
            WR_FLUSH => "work request flushed (QP in error state)\0",
            MW_BIND => "memory window bind error\0",
            BAD_RESP => "bad response\0",
            LOCAL_ACCESS => "local access error\0",
            REMOTE_INVAL_REQ => "remote invalid request\0",
            REMOTE_ACCESS => "remote access error (rkey, remote address range or rights)\0",
            REMOTE_OP => "remote operation error\0",
            TRANSPORT_RETRY_EXC => "transport retry counter exceeded\0",
            RNR_RETRY_EXC => "RNR retry counter exceeded\0",
            REMOTE_ABORTED => "remote aborted\0",
            _ => "unknown syndrome\0",
        }
    }
}

macro_rules! be_type {
    ($(#[$m:meta])* $name:ident, $t:ty, $n:literal) => {
        $(#[$m])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
        pub struct $name(pub [u8; $n]);
        impl $name {
            /// Stores `v` as big-endian bytes.
            #[inline(always)]
            pub const fn new(v: $t) -> Self {
                Self(v.to_be_bytes())
            }
            /// The value (converted from big-endian).
            #[inline(always)]
            pub const fn get(self) -> $t {
                <$t>::from_be_bytes(self.0)
            }
            #[inline(always)]
            pub fn set(&mut self, v: $t) {
                self.0 = v.to_be_bytes();
            }
        }
        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{:#x}", self.get())
            }
        }
    };
}
be_type!(
    /// A big-endian 16-bit field.
    Be16, u16, 2
);
be_type!(
    /// A big-endian 32-bit field.
    Be32, u32, 4
);
be_type!(
    /// A big-endian 64-bit field.
    Be64, u64, 8
);

/// Control segment, always first in a WQE (`mlx5_wqe_ctrl_seg`) [note §1.2].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct CtrlSeg {
    /// opmod (bits 31..24) | WQE index (23..8) | opcode (7..0).
    pub opmod_idx_opcode: Be32,
    /// QPN (31..8) | ds (5..0).
    pub qpn_ds: Be32,
    pub signature: u8,
    /// Reserved for RC (rdma-core: `dci_stream_channel_id`).
    pub dci_stream_channel_id: Be16,
    pub fm_ce_se: u8,
    /// Immediate data / invalidation key / mkey.
    pub imm: Be32,
}

impl CtrlSeg {
    /// `mlx5dv_set_ctrl_seg` with signature 0 and imm 0 (the stored `imm` is taken as given there;
    /// here it is a value stored big-endian, which is what WRITE_IMM's immediate is on the wire).
    #[inline(always)]
    pub const fn new(opcode: u8, opmod: u8, idx: u16, qpn: u32, ds: u8, fm_ce_se: u8) -> Self {
        CtrlSeg {
            opmod_idx_opcode: Be32::new(((opmod as u32) << 24) | ((idx as u32) << 8) | opcode as u32),
            qpn_ds: Be32::new((qpn << 8) | (ds & DS_MASK) as u32),
            signature: 0,
            dci_stream_channel_id: Be16::new(0),
            fm_ce_se,
            imm: Be32::new(0),
        }
    }
    #[inline(always)]
    pub const fn opcode(&self) -> u8 {
        self.opmod_idx_opcode.0[3]
    }
    #[inline(always)]
    pub const fn opmod(&self) -> u8 {
        self.opmod_idx_opcode.0[0]
    }
    /// The WQE index: the free-running WQEBB count of the WQE's first WQEBB, mod 2^16.
    #[inline(always)]
    pub const fn wqe_index(&self) -> u16 {
        u16::from_be_bytes([self.opmod_idx_opcode.0[1], self.opmod_idx_opcode.0[2]])
    }
    #[inline(always)]
    pub const fn qpn(&self) -> u32 {
        self.qpn_ds.get() >> 8
    }
    #[inline(always)]
    pub const fn ds(&self) -> u8 {
        self.qpn_ds.0[3] & DS_MASK
    }
    /// Whether the WQE asks for a CQE: its completion-event bits say CQ update (with or without an
    /// event), which is what a NIC checks.
    #[inline(always)]
    pub const fn signalled(&self) -> bool {
        let ce = self.fm_ce_se & fm_ce_se::CE_MASK;
        ce == fm_ce_se::CQ_UPDATE || ce == fm_ce_se::CQ_UPDATE_EQE
    }
    #[inline(always)]
    pub fn set_wqe_index(&mut self, idx: u16) {
        let b = idx.to_be_bytes();
        self.opmod_idx_opcode.0[1] = b[0];
        self.opmod_idx_opcode.0[2] = b[1];
    }
    #[inline(always)]
    pub fn set_qpn_ds(&mut self, qpn: u32, ds: u8) {
        self.qpn_ds = Be32::new((qpn << 8) | (ds & DS_MASK) as u32);
    }
}

/// Remote-address segment (`mlx5_wqe_raddr_seg`) [note §1.4].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct RaddrSeg {
    pub raddr: Be64,
    pub rkey: Be32,
    pub reserved: [u8; 4],
}

impl RaddrSeg {
    #[inline(always)]
    pub const fn new(raddr: u64, rkey: u32) -> Self {
        RaddrSeg { raddr: Be64::new(raddr), rkey: Be32::new(rkey), reserved: [0; 4] }
    }
}

/// Data (pointer) segment (`mlx5_wqe_data_seg`) [note §1.5].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct DataSeg {
    /// Bit 31 must be 0 (set, the same word is an inline header).
    pub byte_count: Be32,
    pub lkey: Be32,
    pub addr: Be64,
}

impl DataSeg {
    /// `mlx5dv_set_data_seg`.
    #[inline(always)]
    pub const fn new(len: u32, lkey: u32, addr: u64) -> Self {
        DataSeg { byte_count: Be32::new(len), lkey: Be32::new(lkey), addr: Be64::new(addr) }
    }
}

/// Header of an inline data segment (`mlx5_wqe_inl_data_seg`): `len | INLINE_SEG`, big-endian; the
/// payload follows at offset 4 and the segment is padded to 16 bytes [note §1.6].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct InlineHdr {
    pub byte_count: Be32,
}

impl InlineHdr {
    #[inline(always)]
    pub const fn new(len: u32) -> Self {
        InlineHdr { byte_count: Be32::new(len | INLINE_SEG) }
    }
    #[inline(always)]
    pub const fn is_inline(&self) -> bool {
        self.byte_count.get() & INLINE_SEG != 0
    }
    /// The payload length (the header without its inline bit).
    #[inline(always)]
    pub const fn len(&self) -> u32 {
        self.byte_count.get() & !INLINE_SEG
    }
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// DS units an inline segment of `len` payload bytes takes (header included, padded to 16 bytes).
#[inline(always)]
pub const fn inline_ds(len: u32) -> u32 {
    (4 + len).div_ceil(DS as u32)
}

/// Standard atomic segment for ATOMIC_CS / ATOMIC_FA (`mlx5_wqe_atomic_seg`) [note §1.7].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct AtomicSeg {
    /// Swap value (CS) or addend (FA).
    pub swap_add: Be64,
    /// Compare value (CS only).
    pub compare: Be64,
}

/// Masked fetch-and-add, 4 bytes (opmod 0x08) [note §1.7, NVSHMEM `ibgda_atomic_32_masked_fa_seg_t`].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct MaskedFa32Seg {
    pub add: Be32,
    /// A set bit stops the carry out of that bit (all ones: XOR; zero: plain add).
    pub field_boundary: Be32,
    pub reserved: [u8; 8],
}

/// Masked compare-and-swap, 4 bytes (opmod 0x08) [note §1.7, NVSHMEM `ibgda_atomic_32_masked_cs_seg_t`].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct MaskedCs32Seg {
    pub swap: Be32,
    pub compare: Be32,
    pub swap_mask: Be32,
    pub compare_mask: Be32,
}

/// Masked fetch-and-add, 8 bytes (opmod 0x09) [note §1.7, NVSHMEM `ibgda_atomic_64_masked_fa_seg_t`].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct MaskedFa64Seg {
    pub add: Be64,
    pub field_boundary: Be64,
}

/// Masked compare-and-swap, 8 bytes (opmod 0x09): two 16-byte segments, [swap, compare] then
/// [swap_mask, compare_mask] (rdma-core `mlx5_wqe_masked_atomic_seg`) [note §1.7].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct MaskedCs64Seg {
    pub swap: Be64,
    pub compare: Be64,
    pub swap_mask: Be64,
    pub compare_mask: Be64,
}

/// A 64-byte CQE (`mlx5_cqe64`), the fields a requester CQE uses named; the responder/Ethernet area
/// is kept as bytes [note §4.1].
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct Cqe64 {
    pub rsvd0: [u8; 2],
    pub wqe_id: Be16,
    pub rsvd4: [u8; 13],
    pub ml_path: u8,
    pub rsvd18: [u8; 4],
    pub slid: Be16,
    pub flags_rqpn: Be32,
    pub hds_ip_ext: u8,
    pub l4_hdr_type_etc: u8,
    pub vlan_info: Be16,
    /// Low 24 bits: user index (CQE version 1).
    pub srqn_uidx: Be32,
    pub imm_inval_pkey: Be32,
    pub app: u8,
    pub app_op: u8,
    pub app_info: Be16,
    pub byte_cnt: Be32,
    pub timestamp: Be64,
    /// Requester CQEs: WQE opcode (31..24) | QPN (23..0).
    pub sop_drop_qpn: Be32,
    /// WQE index of the completed WQE (of its first WQEBB).
    pub wqe_counter: Be16,
    pub signature: u8,
    /// opcode (7..4) | format (3..2) | SE (1) | owner (0).
    pub op_own: u8,
}

impl Default for Cqe64 {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl Cqe64 {
    /// A successful requester CQE.
    #[inline]
    pub fn req(wqe_opcode: u8, qpn: u32, wqe_counter: u16, byte_cnt: u32, owner: bool) -> Self {
        let mut c = Self::zeroed();
        c.byte_cnt = Be32::new(byte_cnt);
        c.sop_drop_qpn = Be32::new(((wqe_opcode as u32) << 24) | (qpn & 0x00ff_ffff));
        c.wqe_counter = Be16::new(wqe_counter);
        c.op_own = (cqe_opcode::REQ << 4) | owner as u8;
        c
    }
    #[inline(always)]
    pub const fn opcode(&self) -> u8 {
        self.op_own >> 4
    }
    #[inline(always)]
    pub const fn owner(&self) -> bool {
        self.op_own & 1 != 0
    }
}

/// The error view of a CQE (`mlx5_err_cqe`, with NVSHMEM's `hw_err_synd`/`hw_synd_type` split of
/// rdma-core's reserved bytes) [note §4.1].
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct ErrCqe {
    pub rsvd0: [u8; 32],
    pub srqn: Be32,
    pub rsvd1: [u8; 16],
    pub hw_err_synd: u8,
    pub hw_synd_type: u8,
    pub vendor_err_synd: u8,
    pub syndrome: u8,
    /// WQE opcode (31..24) | QPN (23..0).
    pub s_wqe_opcode_qpn: Be32,
    pub wqe_counter: Be16,
    pub signature: u8,
    pub op_own: u8,
}

impl Default for ErrCqe {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl ErrCqe {
    /// A requester error CQE.
    #[inline]
    pub fn req_err(wqe_opcode: u8, qpn: u32, wqe_counter: u16, syndrome: u8, vendor_err_synd: u8, owner: bool) -> Self {
        let mut c = Self::zeroed();
        c.syndrome = syndrome;
        c.vendor_err_synd = vendor_err_synd;
        c.s_wqe_opcode_qpn = Be32::new(((wqe_opcode as u32) << 24) | (qpn & 0x00ff_ffff));
        c.wqe_counter = Be16::new(wqe_counter);
        c.op_own = (cqe_opcode::REQ_ERR << 4) | owner as u8;
        c
    }
}

/// The QP doorbell record: receive counter, then send counter (next free WQEBB & 0xffff), both BE32
/// [note §3.1].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct DbRec {
    pub rcv_counter: Be32,
    pub snd_counter: Be32,
}

/// The CQ doorbell record: `set_ci` (consumer index & 0xffffff), then the arm word [note §3.4].
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Pod, Zeroable)]
pub struct CqDbRec {
    pub set_ci: Be32,
    pub arm: Be32,
}

/// The value of the DBR send counter for producer count `prod`, as the 32-bit word to store
/// (`htobe32(prod & 0xffff)` in memory order).
#[inline(always)]
pub const fn dbr_word(prod: u64) -> u32 {
    u32::from_ne_bytes(((prod & 0xffff) as u32).to_be_bytes())
}

/// The 8-byte doorbell (BlueFlame register) value for producer count `prod`: the first 8 bytes of a
/// control segment {opmod 0, index = prod, opcode 0, QPN, ds 0}, as the 64-bit word to store [note §3.3].
#[inline(always)]
pub const fn doorbell_word(prod: u64, qpn: u32) -> u64 {
    let pi = (prod & 0xffff) as u16;
    let p = pi.to_be_bytes();
    let q = qpn.to_be_bytes();
    u64::from_ne_bytes([0, p[0], p[1], 0, q[1], q[2], q[3], 0])
}

// Compile-time checks against the PRM layouts of the research note.
macro_rules! check_layout {
    ($t:ty, $size:expr, $($f:ident @ $off:expr),* $(,)?) => {
        const _: () = assert!(size_of::<$t>() == $size);
        $(const _: () = assert!(offset_of!($t, $f) == $off);)*
    };
}
check_layout!(CtrlSeg, 16, opmod_idx_opcode @ 0, qpn_ds @ 4, signature @ 8, dci_stream_channel_id @ 9, fm_ce_se @ 11, imm @ 12);
check_layout!(RaddrSeg, 16, raddr @ 0, rkey @ 8, reserved @ 12);
check_layout!(DataSeg, 16, byte_count @ 0, lkey @ 4, addr @ 8);
check_layout!(InlineHdr, 4, byte_count @ 0);
check_layout!(AtomicSeg, 16, swap_add @ 0, compare @ 8);
check_layout!(MaskedFa32Seg, 16, add @ 0, field_boundary @ 4, reserved @ 8);
check_layout!(MaskedCs32Seg, 16, swap @ 0, compare @ 4, swap_mask @ 8, compare_mask @ 12);
check_layout!(MaskedFa64Seg, 16, add @ 0, field_boundary @ 8);
check_layout!(MaskedCs64Seg, 32, swap @ 0, compare @ 8, swap_mask @ 16, compare_mask @ 24);
check_layout!(Cqe64, 64, wqe_id @ 2, ml_path @ 17, slid @ 22, flags_rqpn @ 24, srqn_uidx @ 32, imm_inval_pkey @ 36, app @ 40, byte_cnt @ 44, timestamp @ 48, sop_drop_qpn @ 56, wqe_counter @ 60, signature @ 62, op_own @ 63);
check_layout!(ErrCqe, 64, srqn @ 32, hw_err_synd @ 52, hw_synd_type @ 53, vendor_err_synd @ 54, syndrome @ 55, s_wqe_opcode_qpn @ 56, wqe_counter @ 60, signature @ 62, op_own @ 63);
check_layout!(DbRec, 8, rcv_counter @ 0, snd_counter @ 4);
check_layout!(CqDbRec, 8, set_ci @ 0, arm @ 4);
const _: () = assert!(SND_DBR * 4 == offset_of!(DbRec, snd_counter));
const _: () = assert!(DS_PER_WQEBB == 4);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_fields_round_trip() {
        let c = CtrlSeg::new(opcode::ATOMIC_MASKED_CS, opmod::EXT_AMO_8, 0xbeef, 0x12_3456, 5, fm_ce_se::CQ_UPDATE);
        let b: [u8; 16] = bytemuck::cast(c);
        assert_eq!(&b[..8], &[0x09, 0xbe, 0xef, 0x14, 0x12, 0x34, 0x56, 0x05]);
        assert_eq!(b[11], 0x08);
        assert_eq!((c.opcode(), c.opmod(), c.wqe_index(), c.qpn(), c.ds()), (0x14, 0x09, 0xbeef, 0x12_3456, 5));
    }

    #[test]
    fn doorbell_and_dbr_bytes() {
        assert_eq!(dbr_word(0x1_2345).to_ne_bytes(), [0, 0, 0x23, 0x45]);
        assert_eq!(doorbell_word(0x1_2345, 0xab_cdef).to_ne_bytes(), [0, 0x23, 0x45, 0, 0xab, 0xcd, 0xef, 0]);
    }

    #[test]
    fn names_are_nul_terminated() {
        for v in 0..=255u8 {
            assert!(opcode::name(v).ends_with('\0') && syndrome::name(v).ends_with('\0'));
        }
    }

    #[test]
    fn inline_ds_counts_header_and_padding() {
        assert_eq!(inline_ds(0), 1);
        assert_eq!(inline_ds(12), 1);
        assert_eq!(inline_ds(13), 2);
        assert_eq!(inline_ds(28), 2);
        assert_eq!(inline_ds(29), 3);
    }
}
