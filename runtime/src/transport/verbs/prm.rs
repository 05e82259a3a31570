//! The mlx5 PRM commands rshmem sends through DevX (`mlx5dv_devx_*`): their layouts as data, a
//! bit-field writer over the PRM's big-endian, MSB-first mailboxes, and the builders of the commands
//! NVSHMEM's IBGDA host setup sends (research note §5): QUERY_HCA_CAP, CREATE_CQ, CREATE_QP and the
//! RST2INIT / INIT2RTR / RTR2RTS state transitions.
//!
//! # Layouts
//! A PRM structure is a sequence of bit fields; `mlx5_ifc.h` writes field `f` of width `w` as
//! `u8 f[w]`, in order, so a field's position is the sum of the widths before it, counted in bits from
//! the most significant bit of byte 0 (bit `k` is bit `7 - k % 8` of byte `k / 8`; 32-bit words are
//! big-endian, so this is also DEVX_SET's numbering). The layouts below are that data, one module per
//! structure, each [`Field`] with its bit offset and width as `mlx5_ifc.h` gives them. Sources (the
//! `reserved_at_<bit>` names there anchor the offsets):
//! - rdma-core @691953d8 `providers/mlx5/mlx5_ifc.h`: `query_hca_cap_in/out`, `cmd_hca_cap`,
//!   `atomic_caps`, `create_qp_in/out`, `qpc`, `ads`, `rst2init_qp_in`, `init2rtr_qp_in`,
//!   `rtr2rts_qp_in`, `create_cq_out`, `mbox_out`;
//! - NVSHMEM @2d7d25f0 `src/modules/transport/common/mlx5_prm.h` (from DPDK): `cqc`, `create_cq_in`
//!   (rdma-core's header has no CQ context), and its `mlx5_ifc.h` for `create_qp_in.wq_umem_offset`
//!   (rdma-core's names those bits `reserved_at_800`).
//!
//! The unit tests check every field against offsets computed from those headers by a script, and every
//! command built here byte for byte against the same command built with rdma-core's `DEVX_SET` macros
//! over those headers (golden bytes).

use crate::error::{Error, Result};

/// One field of a PRM structure: `mlx5_ifc.h`'s name, bit offset from the structure's start (MSB
/// first) and width in bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// `mlx5_ifc.h`'s name, as `structure.field` (for error messages).
    pub name: &'static str,
    /// Bit offset from the structure's start, counted from the most significant bit of byte 0.
    pub bit: u32,
    /// Width in bits.
    pub width: u32,
}

impl Field {
    /// The field `name` at bit offset `bit`, `width` bits wide.
    pub const fn new(name: &'static str, bit: u32, width: u32) -> Field {
        Field { name, bit, width }
    }
    /// The same field in a structure embedded at bit `base` of another (the `qpc` in `create_qp_in`).
    pub const fn at(self, base: u32) -> Field {
        Field { name: self.name, bit: base + self.bit, width: self.width }
    }
}

/// Declares one PRM structure: its size in bytes and its fields.
macro_rules! prm_struct {
    ($(#[$m:meta])* $module:ident = $cname:literal, $bytes:expr; { $($(#[$fm:meta])* $F:ident = $fname:literal @ $bit:literal : $w:literal;)* }) => {
        $(#[$m])*
        pub mod $module {
            #[allow(unused_imports)]
            use super::Field;
            /// `mlx5_ifc.h`'s name of the structure.
            pub const NAME: &str = $cname;
            /// Size in bytes (`DEVX_ST_SZ_BYTES`).
            pub const BYTES: usize = $bytes;
            $(
                $(#[$fm])*
                #[doc = ""]
                #[doc = concat!("`", $cname, ".", $fname, "`: bit offset ", stringify!($bit), ", width ", stringify!($w), ".")]
                pub const $F: Field = Field::new(concat!($cname, ".", $fname), $bit, $w);
            )*
            /// Every field declared here (the tests check them all).
            pub const FIELDS: &[Field] = &[$($F),*];
        }
    };
}

prm_struct! {
    /// The header of every command's output (`mlx5_ifc_mbox_out_bits`).
    mbox_out = "mbox_out", 16; {
        /// Command status: 0 is success; anything else is an error, `syndrome` says which.
        STATUS = "status" @ 0x0 : 8;
        /// The firmware's syndrome: a code identifying the failure (for the vendor's tools).
        SYNDROME = "syndrome" @ 0x20 : 32;
    }
}

prm_struct! {
    /// QUERY_HCA_CAP input (`query_hca_cap_in`).
    query_hca_cap_in = "query_hca_cap_in", 16; {
        /// [`QUERY_HCA_CAP`](super::op::QUERY_HCA_CAP).
        OPCODE = "opcode" @ 0x0 : 16;
        /// Which capability structure, current or maximum values ([`super::cap_op_mod`]).
        OP_MOD = "op_mod" @ 0x30 : 16;
    }
}

prm_struct! {
    /// QUERY_HCA_CAP output (`query_hca_cap_out`): the capability structure starts at bit 0x80.
    query_hca_cap_out = "query_hca_cap_out", 4112; {
        /// The capability structure asked for ([`super::cmd_hca_cap`], [`super::atomic_caps`]).
        CAPABILITY = "capability" @ 0x80 : 0x8000;
    }
}

prm_struct! {
    /// The general device capabilities (`cmd_hca_cap`), inside `query_hca_cap_out.capability`.
    cmd_hca_cap = "cmd_hca_cap", 256; {
        /// log2 of the most WQEBBs a QP's send queue may have.
        LOG_MAX_QP_SZ = "log_max_qp_sz" @ 0x88 : 8;
        /// log2 of the most CQEs a CQ may have.
        LOG_MAX_CQ_SZ = "log_max_cq_sz" @ 0xc8 : 8;
        /// The port type: 0 InfiniBand, 1 Ethernet.
        PORT_TYPE = "port_type" @ 0x1b6 : 2;
        /// log2 of the largest message (bytes) a QP may send.
        LOG_MAX_MSG = "log_max_msg" @ 0x1c3 : 5;
        /// Must be 1 (CQE version 1: user index in the CQE) for IBGDA.
        CQE_VERSION = "cqe_version" @ 0x1fc : 4;
        /// 1: RoCE is supported.
        ROCE = "roce" @ 0x21d : 1;
        /// 1: RDMA atomics are supported (the atomic capabilities are valid).
        ATOMIC = "atomic" @ 0x21e : 1;
        /// 1: CQs may ignore overruns (`cqc.oi`).
        CQ_OI = "cq_oi" @ 0x220 : 1;
        /// 1: the device supports 4 KiB UAR pages.
        UAR_4K = "uar_4k" @ 0x240 : 1;
        /// log2 of a BlueFlame register's size in bytes (both halves).
        LOG_BF_REG_SIZE = "log_bf_reg_size" @ 0x26b : 5;
    }
}

prm_struct! {
    /// The atomic capabilities (`atomic_caps`), inside `query_hca_cap_out.capability`.
    atomic_caps = "atomic_caps", 256; {
        /// The byte-order mode of 8-byte atomic requests in effect.
        ATOMIC_REQ_8B_ENDIANNESS_MODE = "atomic_req_8B_endianness_mode" @ 0x40 : 2;
        /// 1: the HCA supports 8-byte atomic endianness mode 1.
        SUPPORTED_ATOMIC_REQ_8B_ENDIANNESS_MODE_1 = "supported_atomic_req_8B_endianness_mode_1" @ 0x46 : 1;
        /// The atomic operations supported ([`super::atomic_op`] bits).
        ATOMIC_OPERATIONS = "atomic_operations" @ 0x90 : 16;
        /// The atomic operand sizes supported on RC QPs ([`super::atomic_size`] bits).
        ATOMIC_SIZE_QP = "atomic_size_qp" @ 0xb0 : 16;
        /// The atomic operand sizes supported on DC transport ([`super::atomic_size`] bits).
        ATOMIC_SIZE_DC = "atomic_size_dc" @ 0xd0 : 16;
    }
}

prm_struct! {
    /// CREATE_CQ input (`create_cq_in`, NVSHMEM's `mlx5_prm.h`).
    create_cq_in = "create_cq_in", 272; {
        /// [`CREATE_CQ`](super::op::CREATE_CQ).
        OPCODE = "opcode" @ 0x0 : 16;
        /// The CQ context ([`super::cqc`]).
        CQ_CONTEXT = "cq_context" @ 0x80 : 512;
        /// The CQ buffer's offset in its umem.
        CQ_UMEM_OFFSET = "cq_umem_offset" @ 0x280 : 64;
        /// The umem holding the CQ buffer.
        CQ_UMEM_ID = "cq_umem_id" @ 0x2c0 : 32;
        /// 1: the CQ buffer is in umem `cq_umem_id` (not a page list in the command).
        CQ_UMEM_VALID = "cq_umem_valid" @ 0x2e0 : 1;
    }
}

prm_struct! {
    /// CREATE_CQ output (`create_cq_out`).
    create_cq_out = "create_cq_out", 16; {
        /// The new CQ's number.
        CQN = "cqn" @ 0x48 : 24;
    }
}

prm_struct! {
    /// The CQ context (`cqc`, NVSHMEM's `mlx5_prm.h`).
    cqc = "cqc", 64; {
        /// 1: the doorbell record is in umem `dbr_umem_id`, at offset `dbr_addr`.
        DBR_UMEM_VALID = "dbr_umem_valid" @ 0x6 : 1;
        /// 0: 64-byte CQEs.
        CQE_SZ = "cqe_sz" @ 0x8 : 3;
        /// Collapsed CQ: every CQE goes to entry 0.
        CC = "cc" @ 0xb : 1;
        /// Overrun ignore.
        OI = "oi" @ 0xe : 1;
        /// The umem holding the CQ's doorbell record.
        DBR_UMEM_ID = "dbr_umem_id" @ 0x20 : 32;
        /// log2 of the number of CQEs.
        LOG_CQ_SIZE = "log_cq_size" @ 0x63 : 5;
        /// The UAR page of the CQ's doorbells (arming).
        UAR_PAGE = "uar_page" @ 0x68 : 24;
        /// The event queue completion events go to.
        C_EQN = "c_eqn" @ 0xb8 : 8;
        /// log2 of the buffer's page size in 4 KiB units.
        LOG_PAGE_SIZE = "log_page_size" @ 0xc3 : 5;
        /// With `dbr_umem_valid`: the doorbell record's offset in its umem.
        DBR_ADDR = "dbr_addr" @ 0x1c0 : 64;
    }
}

prm_struct! {
    /// CREATE_QP input (`create_qp_in`).
    create_qp_in = "create_qp_in", 272; {
        /// [`CREATE_QP`](super::op::CREATE_QP).
        OPCODE = "opcode" @ 0x0 : 16;
        /// The QP context ([`super::qpc`]).
        QPC = "qpc" @ 0xc0 : 1856;
        /// NVSHMEM's `mlx5_ifc.h` (rdma-core: `reserved_at_800`).
        WQ_UMEM_OFFSET = "wq_umem_offset" @ 0x800 : 64;
        /// The umem holding the work queue (the send queue).
        WQ_UMEM_ID = "wq_umem_id" @ 0x840 : 32;
        /// 1: the work queue is in umem `wq_umem_id` at `wq_umem_offset` (not a page list).
        WQ_UMEM_VALID = "wq_umem_valid" @ 0x860 : 1;
    }
}

prm_struct! {
    /// CREATE_QP output (`create_qp_out`).
    create_qp_out = "create_qp_out", 16; {
        /// The new QP's number.
        QPN = "qpn" @ 0x48 : 24;
    }
}

prm_struct! {
    /// RST2INIT_QP, INIT2RTR_QP and RTR2RTS_QP input (`rst2init_qp_in`, `init2rtr_qp_in`,
    /// `rtr2rts_qp_in`: the same layout); their outputs are a bare [`mbox_out`].
    modify_qp_in = "modify_qp_in", 272; {
        /// [`RST2INIT_QP`](super::op::RST2INIT_QP), [`INIT2RTR_QP`](super::op::INIT2RTR_QP) or
        /// [`RTR2RTS_QP`](super::op::RTR2RTS_QP).
        OPCODE = "opcode" @ 0x0 : 16;
        /// The QP to move to the next state.
        QPN = "qpn" @ 0x48 : 24;
        /// Which optional QP context fields the transition also sets (0: none).
        OPT_PARAM_MASK = "opt_param_mask" @ 0x80 : 32;
        /// The QP context ([`super::qpc`]).
        QPC = "qpc" @ 0xc0 : 1856;
    }
}

prm_struct! {
    /// The QP context (`qpc`).
    qpc = "qpc", 232; {
        /// Service type: 0 RC.
        ST = "st" @ 0x8 : 8;
        /// Path migration state: 3 migrated.
        PM_STATE = "pm_state" @ 0x13 : 2;
        /// The protection domain's number.
        PD = "pd" @ 0x28 : 24;
        /// Path MTU (`enum ibv_mtu`'s encoding: 1 = 256 .. 5 = 4096).
        MTU = "mtu" @ 0x40 : 3;
        /// log2 of the largest message (bytes).
        LOG_MSG_MAX = "log_msg_max" @ 0x43 : 5;
        /// log2 of the receive queue's WQEs (0 with an SRQ).
        LOG_RQ_SIZE = "log_rq_size" @ 0x49 : 4;
        /// 1: the QP has no send queue.
        NO_SQ = "no_sq" @ 0x50 : 1;
        /// log2 of the send queue's size in WQEBBs.
        LOG_SQ_SIZE = "log_sq_size" @ 0x51 : 4;
        /// The counter set (Q counter) that counts the QP's events.
        COUNTER_SET_ID = "counter_set_id" @ 0x60 : 8;
        /// The UAR page of the QP's doorbell register.
        UAR_PAGE = "uar_page" @ 0x68 : 24;
        /// The user index the QP's CQEs report (CQE version 1).
        USER_INDEX = "user_index" @ 0x88 : 24;
        /// log2 of the work queue's page size in 4 KiB units.
        LOG_PAGE_SIZE = "log_page_size" @ 0xa3 : 5;
        /// The connected peer QP's number (RC).
        REMOTE_QPN = "remote_qpn" @ 0xa8 : 24;
        /// The primary address path ([`super::ads`]).
        PRIMARY_ADDRESS_PATH = "primary_address_path" @ 0xc0 : 352;
        /// log2 of how many packets go between ACK requests (0: every packet).
        LOG_ACK_REQ_FREQ = "log_ack_req_freq" @ 0x380 : 4;
        /// log2 of the RDMA READs/atomics the QP may have outstanding as requester.
        LOG_SRA_MAX = "log_sra_max" @ 0x388 : 3;
        /// How often a packet is resent after a timeout or NAK before the QP fails.
        RETRY_COUNT = "retry_count" @ 0x38d : 3;
        /// How often a packet is resent after a receiver-not-ready NAK (7: forever).
        RNR_RETRY = "rnr_retry" @ 0x390 : 3;
        /// The first packet sequence number the QP sends.
        NEXT_SEND_PSN = "next_send_psn" @ 0x3c8 : 24;
        /// The CQ send completions go to.
        CQN_SND = "cqn_snd" @ 0x3e8 : 24;
        /// log2 of the RDMA READs/atomics the QP may serve at once as responder.
        LOG_RRA_MAX = "log_rra_max" @ 0x488 : 3;
        /// Which atomic operations and sizes the QP allows as responder
        /// ([`ATOMIC_MODE_UP_TO_64BIT`](super::value::ATOMIC_MODE_UP_TO_64BIT)).
        ATOMIC_MODE = "atomic_mode" @ 0x48c : 4;
        /// 1: remote reads enabled.
        RRE = "rre" @ 0x490 : 1;
        /// 1: remote writes enabled.
        RWE = "rwe" @ 0x491 : 1;
        /// 1: remote atomics enabled.
        RAE = "rae" @ 0x492 : 1;
        /// The work queue's offset in its first page (0: page-aligned).
        PAGE_OFFSET = "page_offset" @ 0x494 : 6;
        /// The RNR NAK timer the QP asks senders to wait, as responder (IB's encoded timer value).
        MIN_RNR_NAK = "min_rnr_nak" @ 0x4a3 : 5;
        /// The CQ receive completions go to.
        CQN_RCV = "cqn_rcv" @ 0x4e8 : 24;
        /// With `dbr_umem_valid`: the doorbell record's offset in its umem.
        DBR_ADDR = "dbr_addr" @ 0x500 : 64;
        /// 1: the receive side is an SRQ.
        RQ_TYPE = "rq_type" @ 0x565 : 3;
        /// The SRQ (with `rq_type` SRQ) the receive side uses.
        SRQN_RMPN_XRQN = "srqn_rmpn_xrqn" @ 0x568 : 24;
        /// CQE scatter on the requester side (0: READ and atomic data is never put into the CQE).
        CS_REQ = "cs_req" @ 0x630 : 8;
        /// CQE scatter on the responder side (0: off).
        CS_RES = "cs_res" @ 0x638 : 8;
        /// 1: the doorbell record is in umem `dbr_umem_id`, at offset `dbr_addr`.
        DBR_UMEM_VALID = "dbr_umem_valid" @ 0x683 : 1;
        /// The umem holding the QP's doorbell record.
        DBR_UMEM_ID = "dbr_umem_id" @ 0x720 : 32;
    }
}

prm_struct! {
    /// An address path (`ads`), inside the QP context.
    ads = "ads", 44; {
        /// The P_Key table index (InfiniBand).
        PKEY_INDEX = "pkey_index" @ 0x10 : 16;
        /// 1: packets carry a global route header (GRH).
        GRH = "grh" @ 0x28 : 1;
        /// The source LID's path bits (InfiniBand).
        MLID = "mlid" @ 0x29 : 7;
        /// The remote LID (InfiniBand).
        RLID = "rlid" @ 0x30 : 16;
        /// Local ACK timeout: 4.096 us * 2^`ack_timeout` (0: infinite).
        ACK_TIMEOUT = "ack_timeout" @ 0x40 : 5;
        /// The source GID's index in the port's GID table.
        SRC_ADDR_INDEX = "src_addr_index" @ 0x48 : 8;
        /// The GRH hop limit (RoCE: IP TTL).
        HOP_LIMIT = "hop_limit" @ 0x58 : 8;
        /// The GRH traffic class.
        TCLASS = "tclass" @ 0x64 : 8;
        /// The remote GID (RoCE: the remote IP address as a GID).
        RGID_RIP = "rgid_rip" @ 0x80 : 128;
        /// RoCE: the IP DSCP (the traffic class's top six bits).
        DSCP = "dscp" @ 0x10a : 6;
        /// RoCE v2: the UDP source port.
        UDP_SPORT = "udp_sport" @ 0x110 : 16;
        /// RoCE: the Ethernet priority (PCP).
        ETH_PRIO = "eth_prio" @ 0x121 : 3;
        /// The service level (InfiniBand).
        SL = "sl" @ 0x124 : 4;
        /// The port number on the HCA.
        VHCA_PORT_NUM = "vhca_port_num" @ 0x128 : 8;
        /// RoCE: bits 47..32 of the next hop's MAC address.
        RMAC_47_32 = "rmac_47_32" @ 0x130 : 16;
        /// RoCE: bits 31..0 of the next hop's MAC address.
        RMAC_31_0 = "rmac_31_0" @ 0x140 : 32;
    }
}

/// Command opcodes (`MLX5_CMD_OP_*`, mlx5_ifc.h).
pub mod op {
    /// `MLX5_CMD_OP_QUERY_HCA_CAP`: read a capability structure.
    pub const QUERY_HCA_CAP: u16 = 0x100;
    /// `MLX5_CMD_OP_CREATE_CQ`.
    pub const CREATE_CQ: u16 = 0x400;
    /// `MLX5_CMD_OP_CREATE_QP`: the new QP is in the RESET state.
    pub const CREATE_QP: u16 = 0x500;
    /// `MLX5_CMD_OP_RST2INIT_QP`: RESET to INIT.
    pub const RST2INIT_QP: u16 = 0x502;
    /// `MLX5_CMD_OP_INIT2RTR_QP`: INIT to ready-to-receive.
    pub const INIT2RTR_QP: u16 = 0x503;
    /// `MLX5_CMD_OP_RTR2RTS_QP`: ready-to-receive to ready-to-send.
    pub const RTR2RTS_QP: u16 = 0x504;
}

/// QUERY_HCA_CAP `op_mod`: `(capability type << 1) | current` (`MLX5_CAP_*`, `HCA_CAP_OPMOD_GET_CUR`).
pub mod cap_op_mod {
    /// The general capabilities ([`super::cmd_hca_cap`], type 0), current values.
    pub const GENERAL_CUR: u16 = 0x1;
    /// The atomic capabilities ([`super::atomic_caps`], type 3), current values.
    pub const ATOMIC_CUR: u16 = 0x7;
}

/// `atomic_caps.atomic_operations` bits (NVSHMEM's transport_mlx5_common.h).
pub mod atomic_op {
    /// Compare-and-swap.
    pub const CAS: u16 = 0x1;
    /// Fetch-and-add.
    pub const FA: u16 = 0x2;
    /// Masked compare-and-swap.
    pub const MASKED_CAS: u16 = 0x4;
    /// Masked fetch-and-add.
    pub const MASKED_FA: u16 = 0x8;
}

/// `atomic_caps.atomic_size_qp` bits.
pub mod atomic_size {
    /// 4-byte atomics.
    pub const B4: u16 = 0x4;
    /// 8-byte atomics.
    pub const B8: u16 = 0x8;
}

/// The values NVSHMEM's IBGDA setup puts into the contexts (ibgda.cpp's `IBGDA_*` constants).
pub mod value {
    /// `qpc.st`: RC.
    pub const ST_RC: u64 = 0x0;
    /// `qpc.pm_state`: migrated.
    pub const PM_STATE_MIGRATED: u64 = 0x3;
    /// `qpc.rq_type`: SRQ.
    pub const RQ_TYPE_SRQ: u64 = 0x1;
    /// `qpc.atomic_mode`: atomics up to 64 bits.
    pub const ATOMIC_MODE_UP_TO_64BIT: u64 = 0x3;
    /// `qpc.log_msg_max`: 1 GiB messages, the most an IB QP allows.
    pub const LOG_MSG_MAX: u64 = 30;
    /// `qpc.min_rnr_nak`.
    pub const MIN_RNR_NAK: u64 = 12;
    /// `ads.hop_limit` on RoCE.
    pub const HOP_LIMIT: u64 = 255;
    /// `ads.udp_sport` base for RoCE v2 (`| lid`).
    pub const ROCE_V2_UDP_SPORT_BASE: u16 = 0xc000;
    /// `ads.ack_timeout`: 4.096 us * 2^20, about 4.3 s.
    pub const ACK_TIMEOUT: u64 = 20;
    /// `qpc.retry_count` and `qpc.rnr_retry`: the most (7 = infinite RNR retries).
    pub const RETRY_COUNT: u64 = 7;
    /// `qpc.rnr_retry`: 7, retry receiver-not-ready NAKs forever.
    pub const RNR_RETRY: u64 = 7;
    /// `cqc.cqe_sz`: 64-byte CQEs.
    pub const CQE_SIZE_64B: u64 = 0x0;
    /// A `*_umem_valid` bit's "use the umem" value.
    pub const UMEM_VALID: u64 = 1;
    /// The NIC's page shift (`MLX5_ADAPTER_PAGE_SHIFT`): page sizes are given as log2 of 4 KiB units.
    pub const ADAPTER_PAGE_SHIFT: u32 = 12;
}

/// A command mailbox (input to build, or output to read), zeroed at creation.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Mailbox {
    bytes: Vec<u8>,
}

impl Mailbox {
    /// A zeroed mailbox of `bytes` bytes (a layout's `BYTES`).
    pub fn new(bytes: usize) -> Mailbox {
        Mailbox { bytes: vec![0; bytes] }
    }

    /// Wraps received bytes for reading.
    pub fn from_bytes(bytes: Vec<u8>) -> Mailbox {
        Mailbox { bytes }
    }

    /// The mailbox's bytes (what a command sends).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The mailbox's bytes, writable (where a command's output is received).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Writes `v` into field `f` (at most 64 bits wide). Fails, naming the field, when `v` does not fit
    /// or the field lies outside the mailbox.
    pub fn set(&mut self, f: Field, v: u64) -> Result<&mut Mailbox> {
        if f.width == 0 || f.width > 64 {
            return Err(Error::new(format!("PRM field {} is {} bits wide: set it as bytes", f.name, f.width)));
        }
        if f.width < 64 && v >> f.width != 0 {
            return Err(Error::new(format!("PRM field {} is {} bits wide: {v:#x} does not fit", f.name, f.width)));
        }
        self.check_span(f)?;
        for i in 0..f.width {
            let pos = (f.bit + i) as usize;
            let mask = 0x80u8 >> (pos % 8);
            if (v >> (f.width - 1 - i)) & 1 == 1 {
                self.bytes[pos / 8] |= mask;
            } else {
                self.bytes[pos / 8] &= !mask;
            }
        }
        Ok(self)
    }

    /// Copies `b` into a byte-aligned field as wide as `b` (a GID, a MAC).
    pub fn set_bytes(&mut self, f: Field, b: &[u8]) -> Result<&mut Mailbox> {
        if !f.bit.is_multiple_of(8) || f.width as usize != b.len() * 8 {
            return Err(Error::new(format!(
                "PRM field {} (bit {:#x}, {} bits) cannot take {} bytes",
                f.name,
                f.bit,
                f.width,
                b.len()
            )));
        }
        self.check_span(f)?;
        let start = f.bit as usize / 8;
        self.bytes[start..start + b.len()].copy_from_slice(b);
        Ok(self)
    }

    /// Reads field `f` (at most 64 bits wide; 0 for bits past the mailbox's end).
    pub fn get(&self, f: Field) -> u64 {
        (0..f.width.min(64)).fold(0u64, |acc, i| {
            let pos = (f.bit + i) as usize;
            let bit = self.bytes.get(pos / 8).map_or(0, |b| (b >> (7 - pos % 8)) & 1);
            (acc << 1) | bit as u64
        })
    }

    fn check_span(&self, f: Field) -> Result<()> {
        if (f.bit + f.width).div_ceil(8) as usize > self.bytes.len() {
            return Err(Error::new(format!("PRM field {} ends past the {}-byte mailbox", f.name, self.bytes.len())));
        }
        Ok(())
    }

    /// The output header: `(status, syndrome)`.
    pub fn status(&self) -> (u8, u32) {
        (self.get(mbox_out::STATUS) as u8, self.get(mbox_out::SYNDROME) as u32)
    }
}

/// QUERY_HCA_CAP for the capability `op_mod` ([`cap_op_mod`]).
pub fn query_hca_cap_in(op_mod: u16) -> Result<Mailbox> {
    let mut m = Mailbox::new(query_hca_cap_in::BYTES);
    m.set(query_hca_cap_in::OPCODE, op::QUERY_HCA_CAP.into())?.set(query_hca_cap_in::OP_MOD, op_mod.into())?;
    Ok(m)
}

/// What CREATE_CQ needs for NVSHMEM's collapsed CQ: buffer and doorbell record in umems (GPU memory),
/// 64-byte CQEs, `cc = 1`, `oi = 1`, never armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CqParams {
    /// log2 of the number of CQEs.
    pub log_cq_size: u32,
    /// The (unmapped) UAR page the CQ context must name.
    pub uar_page: u32,
    /// The completion EQ (`mlx5dv_devx_query_eqn(ctx, 0)`).
    pub eqn: u32,
    /// The umem holding the CQ buffer.
    pub cq_umem_id: u32,
    /// The CQ buffer's offset in that umem.
    pub cq_umem_offset: u64,
    /// The umem holding the CQ's doorbell record.
    pub dbr_umem_id: u32,
    /// The doorbell record's offset in that umem (`cqc.dbr_addr`).
    pub dbr_offset: u64,
    /// log2 of the CQ buffer's page size in 4 KiB units (NVSHMEM: 4, 64 KiB pages).
    pub log_page_size: u32,
}

/// CREATE_CQ (NVSHMEM's `ibgda_create_cq`).
pub fn create_cq_in(p: &CqParams) -> Result<Mailbox> {
    use create_cq_in as c;
    let cq = |f: Field| f.at(c::CQ_CONTEXT.bit);
    let mut m = Mailbox::new(c::BYTES);
    m.set(c::OPCODE, op::CREATE_CQ.into())?
        .set(c::CQ_UMEM_ID, p.cq_umem_id.into())?
        .set(c::CQ_UMEM_VALID, value::UMEM_VALID)?
        .set(c::CQ_UMEM_OFFSET, p.cq_umem_offset)?
        .set(cq(cqc::DBR_UMEM_VALID), value::UMEM_VALID)?
        .set(cq(cqc::CQE_SZ), value::CQE_SIZE_64B)?
        .set(cq(cqc::CC), 1)?
        .set(cq(cqc::OI), 1)?
        .set(cq(cqc::DBR_UMEM_ID), p.dbr_umem_id.into())?
        .set(cq(cqc::LOG_CQ_SIZE), p.log_cq_size.into())?
        .set(cq(cqc::UAR_PAGE), p.uar_page.into())?
        .set(cq(cqc::C_EQN), p.eqn.into())?
        .set(cq(cqc::LOG_PAGE_SIZE), p.log_page_size.into())?
        .set(cq(cqc::DBR_ADDR), p.dbr_offset)?;
    Ok(m)
}

/// What CREATE_QP needs for an IBGDA RC QP: send queue and doorbell record in umems (GPU memory), the
/// GPU-mapped UAR, the GPU CQ for sends, a host SRQ and CQ for the (unused) receive side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QpParams {
    /// The protection domain's number (from `mlx5dv_init_obj`).
    pub pdn: u32,
    /// The doorbell UAR's page (the one mapped into the GPU).
    pub uar_page: u32,
    /// log2 of the send queue's size in WQEBBs.
    pub log_sq_size: u32,
    /// The CQ send completions go to (the GPU's collapsed CQ).
    pub cqn_snd: u32,
    /// The CQ receive completions go to (the host CQ, never used).
    pub cqn_rcv: u32,
    /// The host SRQ the receive side uses.
    pub srqn: u32,
    /// The umem holding the send queue.
    pub wq_umem_id: u32,
    /// The send queue's offset in that umem.
    pub wq_umem_offset: u64,
    /// The umem holding the QP's doorbell record.
    pub dbr_umem_id: u32,
    /// The doorbell record's offset in that umem (`qpc.dbr_addr`).
    pub dbr_offset: u64,
    /// The user index the QP's CQEs report.
    pub user_index: u32,
}

/// CREATE_QP (NVSHMEM's `ibgda_create_qp` for RC): no CQE scatter (`cs_req = cs_res = 0`), no RQ of
/// its own (`log_rq_size = 0`, SRQ).
pub fn create_qp_in(p: &QpParams) -> Result<Mailbox> {
    use create_qp_in as c;
    let q = |f: Field| f.at(c::QPC.bit);
    let mut m = Mailbox::new(c::BYTES);
    m.set(c::OPCODE, op::CREATE_QP.into())?
        .set(c::WQ_UMEM_ID, p.wq_umem_id.into())?
        .set(c::WQ_UMEM_OFFSET, p.wq_umem_offset)?
        .set(c::WQ_UMEM_VALID, value::UMEM_VALID)?
        .set(q(qpc::ST), value::ST_RC)?
        .set(q(qpc::PM_STATE), value::PM_STATE_MIGRATED)?
        .set(q(qpc::PD), p.pdn.into())?
        .set(q(qpc::UAR_PAGE), p.uar_page.into())?
        .set(q(qpc::RQ_TYPE), value::RQ_TYPE_SRQ)?
        .set(q(qpc::SRQN_RMPN_XRQN), p.srqn.into())?
        .set(q(qpc::CQN_SND), p.cqn_snd.into())?
        .set(q(qpc::CQN_RCV), p.cqn_rcv.into())?
        .set(q(qpc::LOG_SQ_SIZE), p.log_sq_size.into())?
        .set(q(qpc::LOG_RQ_SIZE), 0)?
        .set(q(qpc::CS_REQ), 0)?
        .set(q(qpc::CS_RES), 0)?
        .set(q(qpc::DBR_UMEM_VALID), value::UMEM_VALID)?
        .set(q(qpc::DBR_ADDR), p.dbr_offset)?
        .set(q(qpc::DBR_UMEM_ID), p.dbr_umem_id.into())?
        .set(q(qpc::USER_INDEX), p.user_index.into())?
        .set(q(qpc::PAGE_OFFSET), 0)?;
    Ok(m)
}

/// A modify command's mailbox with its opcode and QPN set.
fn modify_qp_in(opcode: u16, qpn: u32) -> Result<Mailbox> {
    let mut m = Mailbox::new(modify_qp_in::BYTES);
    m.set(modify_qp_in::OPCODE, opcode.into())?.set(modify_qp_in::QPN, qpn.into())?;
    Ok(m)
}

/// A field of the QP context in a modify command.
fn mq(f: Field) -> Field {
    f.at(modify_qp_in::QPC.bit)
}

/// A field of the primary address path in a modify command.
fn mpath(f: Field) -> Field {
    f.at(qpc::PRIMARY_ADDRESS_PATH.bit).at(modify_qp_in::QPC.bit)
}

/// RST2INIT_QP for an RC QP: remote write, read and atomic access, atomics up to 64 bits, the port,
/// P_Key index 0 on InfiniBand.
pub fn rst2init_qp_in(qpn: u32, port: u8, infiniband: bool) -> Result<Mailbox> {
    let mut m = modify_qp_in(op::RST2INIT_QP, qpn)?;
    m.set(mq(qpc::RWE), 1)?
        .set(mq(qpc::RRE), 1)?
        .set(mq(qpc::RAE), 1)?
        .set(mq(qpc::ATOMIC_MODE), value::ATOMIC_MODE_UP_TO_64BIT)?
        .set(mpath(ads::VHCA_PORT_NUM), port.into())?
        .set(mq(qpc::PM_STATE), value::PM_STATE_MIGRATED)?
        .set(mq(qpc::COUNTER_SET_ID), 0)?;
    if infiniband {
        m.set(mpath(ads::PKEY_INDEX), 0)?;
    }
    Ok(m)
}

/// The path to the remote QP, as INIT2RTR needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathParams {
    /// InfiniBand, same subnet: no GRH.
    Ib {
        /// The remote port's LID (`ads.rlid`).
        rlid: u16,
        /// The service level (`ads.sl`).
        sl: u8,
        /// The traffic class (`ads.tclass`).
        tclass: u8,
    },
    /// RoCE: the next hop's MAC and the remote GID (from an address handle), this port's GID index.
    Roce {
        /// The next hop's MAC address (`ads.rmac_47_32`, `ads.rmac_31_0`).
        rmac: [u8; 6],
        /// The remote GID (`ads.rgid_rip`).
        rgid: [u8; 16],
        /// This port's GID index, the source address (`ads.src_addr_index`).
        sgid_index: u8,
        /// The RoCE v2 UDP source port (`ads.udp_sport`).
        udp_sport: u16,
        /// The Ethernet priority (`ads.eth_prio`).
        eth_prio: u8,
        /// The traffic class; its top six bits become `ads.dscp`.
        tclass: u8,
    },
}

/// INIT2RTR_QP for an RC QP (NVSHMEM's `ibgda_rc_init2rtr`).
pub fn init2rtr_qp_in(qpn: u32, mtu: u8, remote_qpn: u32, log_rra_max: u8, path: &PathParams) -> Result<Mailbox> {
    let mut m = modify_qp_in(op::INIT2RTR_QP, qpn)?;
    m.set(mq(qpc::MTU), mtu.into())?
        .set(mq(qpc::LOG_MSG_MAX), value::LOG_MSG_MAX)?
        .set(mq(qpc::REMOTE_QPN), remote_qpn.into())?
        .set(mq(qpc::MIN_RNR_NAK), value::MIN_RNR_NAK)?
        .set(mq(qpc::LOG_RRA_MAX), log_rra_max.into())?;
    match *path {
        PathParams::Ib { rlid, sl, tclass } => {
            m.set(mpath(ads::TCLASS), tclass.into())?
                .set(mpath(ads::RLID), rlid.into())?
                .set(mpath(ads::MLID), 0)?
                .set(mpath(ads::SL), sl.into())?
                .set(mpath(ads::GRH), 0)?;
        }
        PathParams::Roce { rmac, rgid, sgid_index, udp_sport, eth_prio, tclass } => {
            // rmac_47_32 and rmac_31_0 are adjacent: the MAC's six bytes in order.
            let rmac_field = Field::new("ads.rmac", ads::RMAC_47_32.bit, 48);
            m.set_bytes(mpath(rmac_field), &rmac)?
                .set(mpath(ads::HOP_LIMIT), value::HOP_LIMIT)?
                .set(mpath(ads::SRC_ADDR_INDEX), sgid_index.into())?
                .set(mpath(ads::ETH_PRIO), eth_prio.into())?
                .set(mpath(ads::UDP_SPORT), udp_sport.into())?
                .set(mpath(ads::DSCP), (tclass >> 2).into())?
                .set_bytes(mpath(ads::RGID_RIP), &rgid)?;
        }
    }
    Ok(m)
}

/// RTR2RTS_QP (NVSHMEM's `ibgda_qp_rtr2rts`): ack every packet, PSN 0, the most retries, ~4 s timeout.
pub fn rtr2rts_qp_in(qpn: u32, log_sra_max: u8) -> Result<Mailbox> {
    let mut m = modify_qp_in(op::RTR2RTS_QP, qpn)?;
    m.set(mq(qpc::LOG_ACK_REQ_FREQ), 0)?
        .set(mq(qpc::LOG_SRA_MAX), log_sra_max.into())?
        .set(mq(qpc::NEXT_SEND_PSN), 0)?
        .set(mq(qpc::RETRY_COUNT), value::RETRY_COUNT)?
        .set(mq(qpc::RNR_RETRY), value::RNR_RETRY)?
        .set(mpath(ads::ACK_TIMEOUT), value::ACK_TIMEOUT)?;
    Ok(m)
}

/// What IBGDA needs from the HCA, read from QUERY_HCA_CAP's outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HcaCaps {
    /// `cmd_hca_cap.cqe_version` (IBGDA needs 1).
    pub cqe_version: u8,
    /// `cmd_hca_cap.atomic`: RDMA atomics are supported.
    pub atomic: bool,
    /// `cmd_hca_cap.roce`: RoCE is supported.
    pub roce: bool,
    /// `cmd_hca_cap.cq_oi`: CQs may ignore overruns.
    pub cq_oi: bool,
    /// `cmd_hca_cap.log_max_qp_sz`: log2 of the largest send queue (WQEBBs).
    pub log_max_qp_sz: u8,
    /// `cmd_hca_cap.log_max_cq_sz`: log2 of the largest CQ (CQEs).
    pub log_max_cq_sz: u8,
    /// `cmd_hca_cap.log_max_msg`: log2 of the largest message (bytes).
    pub log_max_msg: u8,
    /// `cmd_hca_cap.log_bf_reg_size`: log2 of a BlueFlame register's size (bytes).
    pub log_bf_reg_size: u8,
    /// `atomic_caps.atomic_operations` ([`atomic_op`]); 0 when the atomic capabilities were not read.
    pub atomic_operations: u16,
    /// `atomic_caps.atomic_size_qp` ([`atomic_size`]).
    pub atomic_size_qp: u16,
}

impl HcaCaps {
    /// Reads the general capabilities and, if given, the atomic ones (QUERY_HCA_CAP outputs).
    pub fn parse(general: &Mailbox, atomic: Option<&Mailbox>) -> HcaCaps {
        let base = query_hca_cap_out::CAPABILITY.bit;
        let g = |f: Field| general.get(f.at(base));
        let a = |f: Field| atomic.map_or(0, |m| m.get(f.at(base)));
        HcaCaps {
            cqe_version: g(cmd_hca_cap::CQE_VERSION) as u8,
            atomic: g(cmd_hca_cap::ATOMIC) == 1,
            roce: g(cmd_hca_cap::ROCE) == 1,
            cq_oi: g(cmd_hca_cap::CQ_OI) == 1,
            log_max_qp_sz: g(cmd_hca_cap::LOG_MAX_QP_SZ) as u8,
            log_max_cq_sz: g(cmd_hca_cap::LOG_MAX_CQ_SZ) as u8,
            log_max_msg: g(cmd_hca_cap::LOG_MAX_MSG) as u8,
            log_bf_reg_size: g(cmd_hca_cap::LOG_BF_REG_SIZE) as u8,
            atomic_operations: a(atomic_caps::ATOMIC_OPERATIONS) as u16,
            atomic_size_qp: a(atomic_caps::ATOMIC_SIZE_QP) as u16,
        }
    }

    /// What the HCA lacks for IBGDA with send queues of `2^log_sq` WQEBBs (empty: nothing).
    pub fn ibgda_gaps(&self, log_sq: u32) -> Vec<String> {
        let mut gaps = Vec::new();
        if self.cqe_version != 1 {
            gaps.push(format!("cqe_version is {} (IBGDA's CQ polling needs 1)", self.cqe_version));
        }
        if !self.atomic {
            gaps.push("no RDMA atomics (cmd_hca_cap.atomic = 0)".into());
        }
        let need_ops = atomic_op::CAS | atomic_op::FA | atomic_op::MASKED_CAS | atomic_op::MASKED_FA;
        if self.atomic_operations & need_ops != need_ops {
            gaps.push(format!(
                "atomic operations {:#x} lack some of compare-swap, fetch-add and their masked forms (need {need_ops:#x})",
                self.atomic_operations
            ));
        }
        let need_sizes = atomic_size::B4 | atomic_size::B8;
        if self.atomic_size_qp & need_sizes != need_sizes {
            gaps.push(format!("QP atomic sizes {:#x} lack 4- or 8-byte atomics", self.atomic_size_qp));
        }
        if u32::from(self.log_max_qp_sz) < log_sq || u32::from(self.log_max_cq_sz) < log_sq {
            gaps.push(format!(
                "queues of 2^{log_sq} entries exceed the HCA's limits (QP 2^{}, CQ 2^{})",
                self.log_max_qp_sz, self.log_max_cq_sz
            ));
        }
        gaps
    }
}

#[cfg(test)]
mod tests;
