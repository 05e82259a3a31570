//! The frames of the wire: the connection hello, the frame header, the codes, and the messages a
//! validated frame carries (see the protocol's description in `transport::wire`).

use crate::bootstrap::truncate;
use bytemuck::{Pod, Zeroable};
use rshmem_ibgda::Atomic;

/// An enum of wire codes: its numbers, its conversion from the raw number (None for an unknown one),
/// its list and its names, all from one table. Every code of the wire is one of these.
macro_rules! codes {
    ($(#[$m:meta])* $name:ident: $repr:ident, $from:ident { $($v:ident = $n:expr, $text:expr;)* }) => {
        $(#[$m])*
        #[repr($repr)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $(#[doc = concat!("Wire code ", stringify!($n), ": ", $text, ".")] $v = $n,)* }
        impl $name {
            /// Every code, in the order of the table.
            pub const ALL: &'static [$name] = &[$($name::$v,)*];
            /// The code with wire number `v`, or `None` for a number this wire version does not define.
            pub fn $from(v: $repr) -> Option<$name> {
                match v { $($n => Some($name::$v),)* _ => None }
            }
            /// How errors and log messages name the code.
            pub fn name(self) -> &'static str {
                match self { $($name::$v => $text,)* }
            }
        }
    };
}

// The headers are sent as their in-memory bytes, which is little-endian only on little-endian hosts.
const _: () = assert!(cfg!(target_endian = "little"), "the rshmem wire is little-endian: big-endian hosts are not supported");

/// First bytes of a hello: an rshmem proxy-transport connection.
pub const MAGIC: [u8; 8] = *b"RSHMWIRE";
/// Bumped on any incompatible change of the headers or kinds (3: FENCE and BARRIER, never sent, removed).
pub const VERSION: u32 = 3;
/// Size of [`Hello`] on the wire.
pub const HELLO_LEN: usize = 64;
/// Size of [`OpHeader`] on the wire.
pub const HEADER_LEN: usize = 64;
/// Default largest payload of one frame (the chunk of a large transfer).
pub const DEFAULT_MAX_CHUNK: u32 = 1 << 20;
/// Smallest chunk limit a PE may announce (bounds of a configurable chunk limit, with [`MAX_CHUNK`]).
pub const MIN_CHUNK: u32 = 4096;
/// Largest chunk limit a PE may announce.
pub const MAX_CHUNK: u32 = 64 << 20;
/// Largest ERROR text.
pub const MAX_ERROR_TEXT: u32 = 4096;
/// Most connections between one pair of PEs.
pub const MAX_LANES: u32 = 16;

/// Connection hello, sent by the connecting side and answered by the accepting side (with `status`
/// saying whether it accepts; a refusal carries its status alone, see `proxy::accept::refusal`).
/// Its first 32 bytes (magic, version, status, key) keep their place in every wire version, so that
/// an acceptor checks the key of a hello of any version before anything else.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub struct Hello {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// The sender's [`VERSION`] (0 in a refusal, except a `WrongVersion` one, which carries the acceptor's).
    pub version: u32,
    /// [`HelloStatus`] in an answer; 0 in the request.
    pub status: u32,
    /// The job key (`RSHMEM_JOB_KEY`) both sides must share; zero in a refusal.
    pub key: [u8; 16],
    /// The PE sending this hello.
    pub src_pe: u32,
    /// The PE it means to reach.
    pub dst_pe: u32,
    /// PEs in the sender's job.
    pub npes: u32,
    /// This connection's index among `lanes` connections of the pair.
    pub lane: u16,
    /// Connections between this pair of PEs (1..=[`MAX_LANES`]).
    pub lanes: u16,
    /// The sender's symmetric heap size (the same on every PE of a job).
    pub heap_size: u64,
    /// The largest frame payload the sender accepts.
    pub max_chunk: u32,
    /// Must be 0.
    pub _reserved: u32,
}
const _: () = assert!(std::mem::size_of::<Hello>() == HELLO_LEN);

codes! {
    /// Why an accepting side refuses a connection (the `status` of its answer).
    HelloStatus: u32, from_u32 {
        Accepted = 0, "accepted";
        WrongKey = 1, "wrong job key";
        WrongVersion = 2, "another wire protocol version";
        WrongPeCount = 3, "another PE count (another job?)";
        WrongHeapSize = 4, "another symmetric heap size (another job?)";
        WrongTargetPe = 5, "the connection was meant for another PE";
        BadLane = 6, "bad connection index";
        Malformed = 7, "malformed hello";
    }
}

impl HelloStatus {
    /// What the status means, for messages.
    pub fn describe(self) -> &'static str {
        self.name()
    }
}

/// Header of every frame after the hello. Fields a kind does not use must be zero.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct OpHeader {
    /// [`Kind`].
    pub kind: u8,
    /// [`FLAG_LAST`].
    pub flags: u8,
    /// [`AmoOp`] (AMO), or [`SignalOp`] (SIGNAL, PUT_SIGNAL).
    pub op: u8,
    /// AMO operand width in bytes: 4 or 8.
    pub width: u8,
    /// The PE that sent the frame (must be the connection's peer).
    pub src_pe: u32,
    /// Sequence number of the operation; answers echo the request's.
    pub seq: u64,
    /// Offset in the target's symmetric heap (PUT, PUT_SIGNAL, GET request and response, AMO).
    pub offset: u64,
    /// Bytes of the heap range (PUT, PUT_SIGNAL, GET request and response).
    pub len: u64,
    /// Bytes of payload after the header.
    pub payload_len: u32,
    /// The rkey of a NIC frame (NIC_WRITE, NIC_READ, NIC_ATOMIC); 0 otherwise.
    pub key: u32,
    /// AMO operand; AMO response: the fetched value; SIGNAL, PUT_SIGNAL: the signal operand.
    pub value: u64,
    /// Compare operand of a compare-and-swap.
    pub compare: u64,
    /// Heap offset of the 8-byte signal word (SIGNAL, PUT_SIGNAL).
    pub signal_offset: u64,
}
const _: () = assert!(std::mem::size_of::<OpHeader>() == HEADER_LEN);

/// The last chunk of a transfer (PUT, PUT_SIGNAL, GET response).
pub const FLAG_LAST: u8 = 1;

codes! {
    /// Frame kinds.
    Kind: u8, from_u8 {
        Put = 1, "PUT";
        PutSignal = 2, "PUT_SIGNAL";
        GetRequest = 3, "GET request";
        GetResponse = 4, "GET response";
        Amo = 5, "AMO request";
        AmoResponse = 6, "AMO response";
        Signal = 7, "SIGNAL";
        Quiet = 9, "QUIET request";
        QuietAck = 10, "QUIET completion";
        Error = 12, "ERROR";
        Close = 13, "CLOSE";
        NicWrite = 14, "NIC_WRITE";
        NicRead = 15, "NIC_READ";
        NicAtomic = 16, "NIC_ATOMIC";
        NicReadResponse = 17, "NIC_READ_RESPONSE";
        NicAck = 18, "NIC_ACK";
    }
}

codes! {
    /// Atomic operations at the target. `Fetch*`, `Fetch`, `Swap` and `CompareSwap` answer with the
    /// old value (an AMO response); the others do not.
    AmoOp: u8, from_u8 {
        Fetch = 1, "fetch";
        Set = 2, "set";
        Swap = 3, "swap";
        CompareSwap = 4, "compare_swap";
        FetchAdd = 5, "fetch_add";
        Add = 6, "add";
        FetchAnd = 7, "fetch_and";
        And = 8, "and";
        FetchOr = 9, "fetch_or";
        Or = 10, "or";
        FetchXor = 11, "fetch_xor";
        Xor = 12, "xor";
    }
}

codes! {
    /// Signal update of a SIGNAL or PUT_SIGNAL (on a 64-bit word).
    SignalOp: u8, from_u8 {
        Set = 1, "set";
        Add = 2, "add";
    }
}

impl AmoOp {
    /// Whether the target answers with the old value.
    pub fn fetches(self) -> bool {
        matches!(
            self,
            AmoOp::Fetch | AmoOp::Swap | AmoOp::CompareSwap | AmoOp::FetchAdd | AmoOp::FetchAnd | AmoOp::FetchOr | AmoOp::FetchXor
        )
    }
    /// Whether the request carries an operand in `value` (all but fetch).
    pub fn has_operand(self) -> bool {
        self != AmoOp::Fetch
    }
}

codes! {
    /// AMO operand width.
    Width: u8, from_u8 {
        W4 = 4, "4 bytes";
        W8 = 8, "8 bytes";
    }
}

impl Width {
    /// The operand width in bytes.
    pub fn bytes(self) -> u64 {
        self as u64
    }
    /// Whether `v` fits an operand of this width.
    pub fn fits(self, v: u64) -> bool {
        self == Width::W8 || v <= u32::MAX as u64
    }
}

/// A signal update: `op` with `value` on the 8-byte word at heap offset `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal {
    /// Heap offset of the signal word (8-byte aligned).
    pub offset: u64,
    /// Set or add.
    pub op: SignalOp,
    /// The value set or added.
    pub value: u64,
}

/// What the local side knows about a connection; every frame from the peer is checked against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// This PE.
    pub me: u32,
    /// The PE on the other end.
    pub peer: u32,
    /// PEs in the job.
    pub npes: u32,
    /// This PE's symmetric heap size: every range a frame names must lie inside it.
    pub heap_size: u64,
    /// The largest payload this side accepts in one frame.
    pub max_chunk: u32,
}

/// A validated frame. Payloads borrow the reader's buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// One chunk of a put: `data` goes to heap offset `offset`.
    Put {
        /// The transfer's sequence number (the same on all its chunks).
        seq: u64,
        /// Heap offset of this chunk's first byte.
        offset: u64,
        /// The chunk's bytes.
        data: &'a [u8],
        /// Whether this is the transfer's last chunk ([`FLAG_LAST`]).
        last: bool,
    },
    /// The last chunk of a put-with-signal: the data, then the signal.
    PutSignal {
        /// The transfer's sequence number.
        seq: u64,
        /// Heap offset of this chunk's first byte.
        offset: u64,
        /// The chunk's bytes.
        data: &'a [u8],
        /// The update applied after the data.
        signal: Signal,
    },
    /// A request for `len` bytes at heap offset `offset`, answered by GET responses.
    GetRequest {
        /// Sequence number, echoed by the responses.
        seq: u64,
        /// Heap offset of the first byte asked for.
        offset: u64,
        /// Bytes asked for (any size inside the heap).
        len: u64,
    },
    /// One chunk of the answer to a GET request.
    GetResponse {
        /// The request's sequence number.
        seq: u64,
        /// Heap offset (at the responder) of this chunk's first byte.
        offset: u64,
        /// The chunk's bytes.
        data: &'a [u8],
        /// Whether this is the answer's last chunk ([`FLAG_LAST`]).
        last: bool,
    },
    /// An atomic operation on the target's heap; fetching ops are answered by an AMO response.
    Amo {
        /// Sequence number, echoed by the response.
        seq: u64,
        /// The operation.
        op: AmoOp,
        /// Operand width.
        width: Width,
        /// Heap offset of the operand, aligned to its width.
        offset: u64,
        /// The operand (0 for `Fetch`).
        value: u64,
        /// The compare operand of `CompareSwap` (0 otherwise).
        compare: u64,
    },
    /// The old value of a fetching AMO.
    AmoResponse {
        /// The request's sequence number.
        seq: u64,
        /// The request's operand width.
        width: Width,
        /// The value at the target before the operation.
        value: u64,
    },
    /// A signal update alone.
    Signal {
        /// Sequence number of the operation.
        seq: u64,
        /// The update.
        signal: Signal,
    },
    /// A request to be answered once everything received before it on this connection is applied.
    Quiet {
        /// Sequence number, echoed by the completion.
        seq: u64,
    },
    /// The completion of a QUIET request.
    QuietAck {
        /// The request's sequence number.
        seq: u64,
    },
    /// The sender's last word before it closes the connection.
    Error {
        /// The text, sanitized for printing.
        text: String,
    },
    /// An orderly end of the connection; nothing follows.
    Close,
    /// One chunk of an emulated NIC's RDMA WRITE (`raddr` of this chunk, under `rkey`).
    NicWrite {
        /// The requester's tag (its QP and WQE), echoed by the NIC_ACK.
        seq: u64,
        /// The remote key the WQE carried.
        rkey: u32,
        /// Remote virtual address of this chunk's first byte.
        raddr: u64,
        /// The chunk's bytes.
        data: &'a [u8],
        /// Whether this is the WRITE's last chunk ([`FLAG_LAST`]), which the NIC_ACK answers.
        last: bool,
    },
    /// An emulated NIC's RDMA READ, answered by NIC_READ_RESPONSE chunks or an error NIC_ACK.
    NicRead {
        /// The requester's tag, echoed by the answer.
        seq: u64,
        /// The remote key the WQE carried.
        rkey: u32,
        /// Remote virtual address of the first byte to read.
        raddr: u64,
        /// Bytes to read (at most 2 GiB).
        len: u64,
    },
    /// An emulated NIC's atomic, answered by a NIC_ACK with the old value.
    NicAtomic {
        /// The requester's tag, echoed by the NIC_ACK.
        seq: u64,
        /// The remote key the WQE carried.
        rkey: u32,
        /// Remote virtual address of the operand.
        raddr: u64,
        /// The atomic and its operands.
        op: Atomic,
    },
    /// One chunk of a READ's bytes; `offset` is its position in the READ.
    NicReadResponse {
        /// The READ's tag.
        seq: u64,
        /// Position of this chunk's first byte in the READ.
        offset: u64,
        /// The chunk's bytes.
        data: &'a [u8],
        /// Whether this is the READ's last chunk ([`FLAG_LAST`]).
        last: bool,
    },
    /// The answer to a NIC_WRITE (after its last chunk), a failed NIC_READ, or a NIC_ATOMIC: `syndrome`
    /// 0 for success, else the error CQE's PRM syndrome and the emulator's `reason` code.
    NicAck {
        /// The request's tag.
        seq: u64,
        /// 0 for success, else the PRM syndrome of the error CQE.
        syndrome: u8,
        /// The emulator's reason code (`rshmem_ibgda::emu::Reason`).
        reason: u8,
        /// An atomic's old value (0 otherwise).
        value: u64,
    },
}

impl Message<'_> {
    /// The frame kind that carries this message.
    pub fn kind(&self) -> Kind {
        match self {
            Message::Put { .. } => Kind::Put,
            Message::PutSignal { .. } => Kind::PutSignal,
            Message::GetRequest { .. } => Kind::GetRequest,
            Message::GetResponse { .. } => Kind::GetResponse,
            Message::Amo { .. } => Kind::Amo,
            Message::AmoResponse { .. } => Kind::AmoResponse,
            Message::Signal { .. } => Kind::Signal,
            Message::Quiet { .. } => Kind::Quiet,
            Message::QuietAck { .. } => Kind::QuietAck,
            Message::Error { .. } => Kind::Error,
            Message::Close => Kind::Close,
            Message::NicWrite { .. } => Kind::NicWrite,
            Message::NicRead { .. } => Kind::NicRead,
            Message::NicAtomic { .. } => Kind::NicAtomic,
            Message::NicReadResponse { .. } => Kind::NicReadResponse,
            Message::NicAck { .. } => Kind::NicAck,
        }
    }

    /// The header and payload that carry this message from `src_pe`.
    pub fn encode(&self, src_pe: u32) -> (OpHeader, &[u8]) {
        let mut h = OpHeader { kind: self.kind() as u8, src_pe, ..OpHeader::default() };
        let set_sig = |h: &mut OpHeader, s: &Signal| {
            h.op = s.op as u8;
            h.value = s.value;
            h.signal_offset = s.offset;
        };
        let payload: &[u8] = match self {
            Message::Put { seq, offset, data, last } | Message::GetResponse { seq, offset, data, last } => {
                (h.seq, h.offset, h.len, h.payload_len) = (*seq, *offset, data.len() as u64, data.len() as u32);
                h.flags = if *last { FLAG_LAST } else { 0 };
                data
            }
            Message::PutSignal { seq, offset, data, signal } => {
                (h.seq, h.offset, h.len, h.payload_len) = (*seq, *offset, data.len() as u64, data.len() as u32);
                h.flags = FLAG_LAST;
                set_sig(&mut h, signal);
                data
            }
            Message::GetRequest { seq, offset, len } => {
                (h.seq, h.offset, h.len) = (*seq, *offset, *len);
                &[]
            }
            Message::Amo { seq, op, width, offset, value, compare } => {
                (h.seq, h.op, h.width, h.offset, h.value, h.compare) = (*seq, *op as u8, *width as u8, *offset, *value, *compare);
                &[]
            }
            Message::AmoResponse { seq, width, value } => {
                (h.seq, h.width, h.value) = (*seq, *width as u8, *value);
                &[]
            }
            Message::Signal { seq, signal } => {
                h.seq = *seq;
                set_sig(&mut h, signal);
                &[]
            }
            Message::Quiet { seq } | Message::QuietAck { seq } => {
                h.seq = *seq;
                &[]
            }
            Message::Error { text } => {
                let t = truncate(text, MAX_ERROR_TEXT as usize);
                h.payload_len = t.len() as u32;
                t.as_bytes()
            }
            Message::Close => &[],
            Message::NicWrite { seq, rkey, raddr, data, last } => {
                (h.seq, h.key, h.offset, h.len, h.payload_len) = (*seq, *rkey, *raddr, data.len() as u64, data.len() as u32);
                h.flags = if *last { FLAG_LAST } else { 0 };
                data
            }
            Message::NicRead { seq, rkey, raddr, len } => {
                (h.seq, h.key, h.offset, h.len) = (*seq, *rkey, *raddr, *len);
                &[]
            }
            Message::NicAtomic { seq, rkey, raddr, op } => {
                let (kind, o) = op.encode();
                (h.seq, h.key, h.offset, h.op, h.width) = (*seq, *rkey, *raddr, kind, op.bytes() as u8);
                (h.value, h.compare, h.signal_offset, h.len) = (o[0], o[1], o[2], o[3]);
                &[]
            }
            Message::NicReadResponse { seq, offset, data, last } => {
                (h.seq, h.offset, h.len, h.payload_len) = (*seq, *offset, data.len() as u64, data.len() as u32);
                h.flags = if *last { FLAG_LAST } else { 0 };
                data
            }
            Message::NicAck { seq, syndrome, reason, value } => {
                (h.seq, h.op, h.width, h.value) = (*seq, *syndrome, *reason, *value);
                &[]
            }
        };
        (h, payload)
    }
}


/// A frame's bytes (header, then payload): for tests and tools; the TCP path sends the two parts
/// without joining them.
pub fn encode_frame(h: &OpHeader, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER_LEN + payload.len());
    v.extend_from_slice(bytemuck::bytes_of(h));
    v.extend_from_slice(payload);
    v
}

