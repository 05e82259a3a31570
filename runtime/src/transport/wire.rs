//! The wire protocol of the proxy transport: what one PE's proxy sends another over a byte stream.
//!
//! A connection between two PEs starts with a [`Hello`] each way (job key, PE numbers, PE count, heap
//! size, chunk limit; checked by `tcp.rs`), then carries frames. A frame is one fixed 64-byte
//! [`OpHeader`] followed by `payload_len` bytes of payload (data for PUT and GET responses, text for
//! ERROR, nothing otherwise). Both headers are `bytemuck` Pod structs defined here once, `#[repr(C)]`,
//! with explicit padding and size asserts, and go on the wire as their in-memory bytes. **The wire is
//! little-endian**: the crate refuses to build for a big-endian target (see the assert below), so the
//! in-memory bytes are the wire bytes.
//!
//! Nothing here knows about TCP: the header is transport-agnostic, so a verbs provider can carry the
//! same header in a send (or as RDMA-write immediate metadata) later. [`FrameReader`] reads frames from
//! any `std::io::Read`.
//!
//! Every frame from a peer is validated against the connection's [`Context`] before its payload is
//! read ([`check_header`]): a known kind, known flags, zero reserved and unused fields, the source PE
//! of the connection, a known AMO op and width, an aligned AMO or signal offset, `offset + len` inside
//! the target's heap (without overflow), and a payload length equal to what the kind implies and
//! within the chunk limit. A bad frame gives an error naming the peer PE and the field; the reader
//! never allocates more than the chunk limit, and no accepted PUT, GET, AMO or signal reaches outside
//! the heap. Large transfers are cut into chunks by [`Chunks`] so that the receiver can pipeline.
//!
//! Kinds (offsets are in the receiver's symmetric heap; frames on one connection arrive in order):
//! - PUT: `len` payload bytes to `offset`; a transfer is one or more chunks with the same `seq`, the
//!   last with [`FLAG_LAST`]. PUT_SIGNAL is the last chunk of a put-with-signal: its data, then the
//!   signal (`op` set/add of `value` on the 8-byte word at `signal_offset`).
//! - GET request (`offset`, `len`, any size inside the heap) → GET responses: chunks of the bytes,
//!   echoing `seq` and their `offset`, the last with [`FLAG_LAST`].
//! - AMO request (`op`, `width` 4 or 8, aligned `offset`, `value`, `compare`) → for fetching ops, an
//!   AMO response (`seq`, `width`, the old value in `value`).
//! - SIGNAL: a signal update alone.
//! - FENCE: operations after it must not be applied before those ahead of it (a marker for a
//!   receiver that applies frames from several connections or out of order).
//! - QUIET request → QUIET completion with the same `seq`, once everything received before it on
//!   this connection has been applied.
//! - BARRIER arrival: `value` is the barrier epoch.
//! - ERROR: UTF-8 text (at most [`MAX_ERROR_TEXT`] bytes), the sender's last word before it closes.
//! - CLOSE: an orderly end; nothing follows.
//!
//! The emulated NIC of the IBGDA transport (`super::ibgda`) sends the remote halves of its WQEs as NIC
//! frames. They name *remote virtual addresses* under an rkey, exactly what the WQE carried, not heap
//! offsets: the responder checks them against its registered memory regions (the peer NIC's job) and
//! answers a bad key or address with an error status, which becomes the requester's error CQE. So the
//! decoder checks only their framing here. `seq` is the requester's tag (its QP and WQE), echoed.
//! - NIC_WRITE: `len` payload bytes to `offset` (the remote address) under `key` (the rkey); a WRITE of
//!   several chunks has one frame per chunk, the last with [`FLAG_LAST`], which the NIC_ACK answers.
//! - NIC_READ: `len` bytes (at most 2 GiB, the mlx5 message limit) at `offset` under `key` →
//!   NIC_READ_RESPONSE chunks (`offset` = position in the READ, the last with [`FLAG_LAST`]), or a
//!   NIC_ACK with an error status.
//! - NIC_ATOMIC: the atomic `op` (a kind code of `rshmem_ibgda::Atomic::encode`) of `width` bytes at
//!   `offset` under `key`, its four operands in `value`, `compare`, `signal_offset` and `len` (in
//!   `encode`'s order) → NIC_ACK with the old value.
//! - NIC_ACK: `op` = the status (0, or the PRM syndrome of the error CQE), `width` = the emulator's
//!   reason code (`rshmem_ibgda::emu::Reason`), `value` = an atomic's old value.

use crate::bootstrap::truncate;
use crate::error::Error;
use bytemuck::{Pod, Zeroable};
use rshmem_ibgda::Atomic;
use std::io::{self, Read};
use std::ops::Range;

// The headers are sent as their in-memory bytes, which is little-endian only on little-endian hosts.
const _: () = assert!(cfg!(target_endian = "little"), "the rshmem wire is little-endian: big-endian hosts are not supported");

/// First bytes of a hello: an rshmem proxy-transport connection.
pub const MAGIC: [u8; 8] = *b"RSHMWIRE";
/// Bumped on any incompatible change of the headers or kinds below.
pub const VERSION: u32 = 2;
/// Size of [`Hello`] and of [`OpHeader`] on the wire.
pub const HELLO_LEN: usize = 64;
pub const HEADER_LEN: usize = 64;
/// Default largest payload of one frame (the chunk of a large transfer).
pub const DEFAULT_MAX_CHUNK: u32 = 1 << 20;
/// Bounds of a configurable chunk limit.
pub const MIN_CHUNK: u32 = 4096;
pub const MAX_CHUNK: u32 = 64 << 20;
/// Largest ERROR text.
pub const MAX_ERROR_TEXT: u32 = 4096;
/// Most connections between one pair of PEs.
pub const MAX_LANES: u32 = 16;

/// Connection hello, sent by the connecting side and answered by the accepting side (with `status`
/// saying whether it accepts; a refusal carries no key).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq)]
pub struct Hello {
    pub magic: [u8; 8],
    pub version: u32,
    /// [`HelloStatus`] in an answer; 0 in the request.
    pub status: u32,
    pub key: [u8; 16],
    /// The PE sending this hello, and the PE it means to reach.
    pub src_pe: u32,
    pub dst_pe: u32,
    pub npes: u32,
    /// This connection's index among `lanes` connections of the pair.
    pub lane: u16,
    pub lanes: u16,
    /// The sender's symmetric heap size (the same on every PE of a job).
    pub heap_size: u64,
    /// The largest frame payload the sender accepts.
    pub max_chunk: u32,
    pub _reserved: u32,
}
const _: () = assert!(std::mem::size_of::<Hello>() == HELLO_LEN);

/// Why an accepting side refuses a connection (the `status` of its answer).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloStatus {
    Accepted = 0,
    WrongKey = 1,
    WrongVersion = 2,
    WrongPeCount = 3,
    WrongHeapSize = 4,
    WrongTargetPe = 5,
    BadLane = 6,
    Malformed = 7,
}

impl HelloStatus {
    pub fn from_u32(v: u32) -> Option<HelloStatus> {
        use HelloStatus::*;
        [Accepted, WrongKey, WrongVersion, WrongPeCount, WrongHeapSize, WrongTargetPe, BadLane, Malformed]
            .into_iter()
            .find(|s| *s as u32 == v)
    }
    pub fn describe(self) -> &'static str {
        match self {
            HelloStatus::Accepted => "accepted",
            HelloStatus::WrongKey => "wrong job key",
            HelloStatus::WrongVersion => "another wire protocol version",
            HelloStatus::WrongPeCount => "another PE count (another job?)",
            HelloStatus::WrongHeapSize => "another symmetric heap size (another job?)",
            HelloStatus::WrongTargetPe => "the connection was meant for another PE",
            HelloStatus::BadLane => "bad connection index",
            HelloStatus::Malformed => "malformed hello",
        }
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
    /// AMO operand; AMO response: the fetched value; SIGNAL, PUT_SIGNAL: the signal operand;
    /// BARRIER: the barrier epoch.
    pub value: u64,
    /// Compare operand of a compare-and-swap.
    pub compare: u64,
    /// Heap offset of the 8-byte signal word (SIGNAL, PUT_SIGNAL).
    pub signal_offset: u64,
}
const _: () = assert!(std::mem::size_of::<OpHeader>() == HEADER_LEN);

/// The last chunk of a transfer (PUT, PUT_SIGNAL, GET response).
pub const FLAG_LAST: u8 = 1;

macro_rules! codes {
    ($(#[$m:meta])* $name:ident { $($v:ident = $n:expr, $text:expr;)* }) => {
        $(#[$m])*
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($v = $n,)* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v,)*];
            pub fn from_u8(v: u8) -> Option<$name> {
                match v { $($n => Some($name::$v),)* _ => None }
            }
            pub fn name(self) -> &'static str {
                match self { $($name::$v => $text,)* }
            }
        }
    };
}

codes! {
    /// Frame kinds.
    Kind {
        Put = 1, "PUT";
        PutSignal = 2, "PUT_SIGNAL";
        GetRequest = 3, "GET request";
        GetResponse = 4, "GET response";
        Amo = 5, "AMO request";
        AmoResponse = 6, "AMO response";
        Signal = 7, "SIGNAL";
        Fence = 8, "FENCE";
        Quiet = 9, "QUIET request";
        QuietAck = 10, "QUIET completion";
        Barrier = 11, "BARRIER arrival";
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
    AmoOp {
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
    SignalOp {
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

/// AMO operand width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    W4 = 4,
    W8 = 8,
}

impl Width {
    pub fn bytes(self) -> u64 {
        self as u64
    }
    fn from_u8(v: u8) -> Option<Width> {
        match v {
            4 => Some(Width::W4),
            8 => Some(Width::W8),
            _ => None,
        }
    }
    fn fits(self, v: u64) -> bool {
        self == Width::W8 || v <= u32::MAX as u64
    }
}

/// A signal update: `op` with `value` on the 8-byte word at heap offset `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal {
    pub offset: u64,
    pub op: SignalOp,
    pub value: u64,
}

/// What the local side knows about a connection; every frame from the peer is checked against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// This PE.
    pub me: u32,
    /// The PE on the other end.
    pub peer: u32,
    pub npes: u32,
    /// This PE's symmetric heap size: every range a frame names must lie inside it.
    pub heap_size: u64,
    /// The largest payload this side accepts in one frame.
    pub max_chunk: u32,
}

/// A validated frame. Payloads borrow the reader's buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Put { seq: u64, offset: u64, data: &'a [u8], last: bool },
    /// The last chunk of a put-with-signal: the data, then the signal.
    PutSignal { seq: u64, offset: u64, data: &'a [u8], signal: Signal },
    GetRequest { seq: u64, offset: u64, len: u64 },
    GetResponse { seq: u64, offset: u64, data: &'a [u8], last: bool },
    Amo { seq: u64, op: AmoOp, width: Width, offset: u64, value: u64, compare: u64 },
    AmoResponse { seq: u64, width: Width, value: u64 },
    Signal { seq: u64, signal: Signal },
    Fence { seq: u64 },
    Quiet { seq: u64 },
    QuietAck { seq: u64 },
    Barrier { seq: u64, epoch: u64 },
    Error { text: String },
    Close,
    /// One chunk of an emulated NIC's RDMA WRITE (`raddr` of this chunk, under `rkey`).
    NicWrite { seq: u64, rkey: u32, raddr: u64, data: &'a [u8], last: bool },
    NicRead { seq: u64, rkey: u32, raddr: u64, len: u64 },
    NicAtomic { seq: u64, rkey: u32, raddr: u64, op: Atomic },
    /// One chunk of a READ's bytes; `offset` is its position in the READ.
    NicReadResponse { seq: u64, offset: u64, data: &'a [u8], last: bool },
    /// The answer to a NIC_WRITE (after its last chunk), a failed NIC_READ, or a NIC_ATOMIC: `syndrome`
    /// 0 for success, else the error CQE's PRM syndrome and the emulator's `reason` code.
    NicAck { seq: u64, syndrome: u8, reason: u8, value: u64 },
}

impl Message<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            Message::Put { .. } => Kind::Put,
            Message::PutSignal { .. } => Kind::PutSignal,
            Message::GetRequest { .. } => Kind::GetRequest,
            Message::GetResponse { .. } => Kind::GetResponse,
            Message::Amo { .. } => Kind::Amo,
            Message::AmoResponse { .. } => Kind::AmoResponse,
            Message::Signal { .. } => Kind::Signal,
            Message::Fence { .. } => Kind::Fence,
            Message::Quiet { .. } => Kind::Quiet,
            Message::QuietAck { .. } => Kind::QuietAck,
            Message::Barrier { .. } => Kind::Barrier,
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
            Message::Fence { seq } | Message::Quiet { seq } | Message::QuietAck { seq } => {
                h.seq = *seq;
                &[]
            }
            Message::Barrier { seq, epoch } => {
                (h.seq, h.value) = (*seq, *epoch);
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

// Which header fields each kind uses (the others must be zero).
const F_OP: u16 = 1;
const F_WIDTH: u16 = 2;
const F_OFFSET: u16 = 4;
const F_LEN: u16 = 8;
const F_VALUE: u16 = 16;
const F_COMPARE: u16 = 32;
const F_SIGNAL: u16 = 64;
const F_PAYLOAD: u16 = 128;
const F_KEY: u16 = 256;

fn fields(kind: Kind) -> u16 {
    match kind {
        Kind::Put | Kind::GetResponse => F_OFFSET | F_LEN | F_PAYLOAD,
        Kind::PutSignal => F_OFFSET | F_LEN | F_PAYLOAD | F_OP | F_VALUE | F_SIGNAL,
        Kind::GetRequest => F_OFFSET | F_LEN,
        Kind::Amo => F_OP | F_WIDTH | F_OFFSET | F_VALUE | F_COMPARE,
        Kind::AmoResponse => F_WIDTH | F_VALUE,
        Kind::Signal => F_OP | F_VALUE | F_SIGNAL,
        Kind::Fence | Kind::Quiet | Kind::QuietAck | Kind::Close => 0,
        Kind::Barrier => F_VALUE,
        Kind::Error => F_PAYLOAD,
        Kind::NicWrite => F_KEY | F_OFFSET | F_LEN | F_PAYLOAD,
        Kind::NicRead => F_KEY | F_OFFSET | F_LEN,
        Kind::NicAtomic => F_KEY | F_OFFSET | F_OP | F_WIDTH | F_VALUE | F_COMPARE | F_SIGNAL | F_LEN,
        Kind::NicReadResponse => F_OFFSET | F_LEN | F_PAYLOAD,
        Kind::NicAck => F_OP | F_WIDTH | F_VALUE,
    }
}

/// A header that passed [`check_header`]: its kind and how many payload bytes follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked {
    pub kind: Kind,
    pub payload_len: usize,
}

/// Validates a header from the peer against the connection's context. The error names the peer PE,
/// the kind and the field.
pub fn check_header(h: &OpHeader, ctx: &Context) -> Result<Checked, Error> {
    let peer = ctx.peer;
    let Some(kind) = Kind::from_u8(h.kind) else {
        return Err(Error::new(format!("PE {peer} sent a frame of unknown kind {} (field `kind`)", h.kind)));
    };
    let bad = |field: &str, why: String| Error::new(format!("PE {peer} sent a bad {} frame (seq {}): field `{field}` {why}", kind.name(), h.seq));
    if h.src_pe != peer {
        return Err(bad("src_pe", format!("is {}, but this connection is from PE {peer}", h.src_pe)));
    }
    let used = fields(kind);
    let allowed_flags = match kind {
        Kind::Put | Kind::PutSignal | Kind::GetResponse | Kind::NicWrite | Kind::NicReadResponse => FLAG_LAST,
        _ => 0,
    };
    if h.flags & !allowed_flags != 0 {
        return Err(bad("flags", format!("has unknown bits {:#04x}", h.flags & !allowed_flags)));
    }
    for (bit, name, v) in [
        (F_KEY, "key", h.key as u64),
        (F_OP, "op", h.op as u64),
        (F_WIDTH, "width", h.width as u64),
        (F_OFFSET, "offset", h.offset),
        (F_LEN, "len", h.len),
        (F_VALUE, "value", h.value),
        (F_COMPARE, "compare", h.compare),
        (F_SIGNAL, "signal_offset", h.signal_offset),
        (F_PAYLOAD, "payload_len", h.payload_len as u64),
    ] {
        if used & bit == 0 && v != 0 {
            return Err(bad(name, format!("is {v:#x}, but a {} frame does not use it (must be 0)", kind.name())));
        }
    }
    let heap = ctx.heap_size;
    // A range [offset, offset + len) inside this PE's heap, without overflow.
    let in_heap = |field: &str, offset: u64, len: u64| -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= heap => Ok(()),
            _ => Err(bad(field, format!("names heap bytes [{offset:#x}, +{len:#x}) outside this PE's heap of {heap:#x} bytes"))),
        }
    };
    if used & F_SIGNAL != 0 && kind != Kind::NicAtomic {
        if SignalOp::from_u8(h.op).is_none() {
            return Err(bad("op", format!("is {}, not a signal operation (1 set, 2 add)", h.op)));
        }
        if !h.signal_offset.is_multiple_of(8) {
            return Err(bad("signal_offset", format!("{:#x} is not 8-byte aligned", h.signal_offset)));
        }
        in_heap("signal_offset", h.signal_offset, 8)?;
    }
    let mut payload_len = 0usize;
    match kind {
        Kind::Put | Kind::PutSignal | Kind::GetResponse => {
            if h.len > ctx.max_chunk as u64 {
                return Err(bad("len", format!("{} exceeds the chunk limit of {} bytes", h.len, ctx.max_chunk)));
            }
            if h.payload_len as u64 != h.len {
                return Err(bad("payload_len", format!("is {}, but `len` is {}", h.payload_len, h.len)));
            }
            in_heap("offset", h.offset, h.len)?;
            payload_len = h.len as usize;
        }
        Kind::GetRequest => in_heap("offset", h.offset, h.len)?,
        Kind::Amo => {
            let op = AmoOp::from_u8(h.op).ok_or_else(|| bad("op", format!("is {}, not an AMO operation", h.op)))?;
            let w = Width::from_u8(h.width).ok_or_else(|| bad("width", format!("is {}, not 4 or 8", h.width)))?;
            if !h.offset.is_multiple_of(w.bytes()) {
                return Err(bad("offset", format!("{:#x} is not aligned to the {}-byte operand", h.offset, w.bytes())));
            }
            in_heap("offset", h.offset, w.bytes())?;
            if !op.has_operand() && h.value != 0 {
                return Err(bad("value", format!("is {:#x}, but {} takes no operand", h.value, op.name())));
            }
            if !w.fits(h.value) {
                return Err(bad("value", format!("{:#x} does not fit the 4-byte operand", h.value)));
            }
            if op != AmoOp::CompareSwap && h.compare != 0 {
                return Err(bad("compare", format!("is {:#x}, but only compare_swap uses it", h.compare)));
            }
            if !w.fits(h.compare) {
                return Err(bad("compare", format!("{:#x} does not fit the 4-byte operand", h.compare)));
            }
        }
        Kind::AmoResponse => {
            let w = Width::from_u8(h.width).ok_or_else(|| bad("width", format!("is {}, not 4 or 8", h.width)))?;
            if !w.fits(h.value) {
                return Err(bad("value", format!("{:#x} does not fit the 4-byte operand", h.value)));
            }
        }
        Kind::Error => {
            if h.payload_len > MAX_ERROR_TEXT {
                return Err(bad("payload_len", format!("{} exceeds the error text limit of {MAX_ERROR_TEXT}", h.payload_len)));
            }
            payload_len = h.payload_len as usize;
        }
        Kind::Signal | Kind::Fence | Kind::Quiet | Kind::QuietAck | Kind::Barrier | Kind::Close => {}
        // NIC frames: framing only; the responder checks the rkey and the range (module docs).
        Kind::NicWrite | Kind::NicReadResponse => {
            if h.len > ctx.max_chunk as u64 {
                return Err(bad("len", format!("{} exceeds the chunk limit of {} bytes", h.len, ctx.max_chunk)));
            }
            if h.payload_len as u64 != h.len {
                return Err(bad("payload_len", format!("is {}, but `len` is {}", h.payload_len, h.len)));
            }
            if h.offset.checked_add(h.len).is_none() {
                return Err(bad("offset", format!("{:#x} + {} bytes wraps around the address space", h.offset, h.len)));
            }
            payload_len = h.len as usize;
        }
        Kind::NicRead => {
            if h.len > rshmem_ibgda::mlx5::MAX_MSG as u64 {
                return Err(bad("len", format!("{} exceeds the 2 GiB an RDMA READ may move", h.len)));
            }
            if h.offset.checked_add(h.len).is_none() {
                return Err(bad("offset", format!("{:#x} + {} bytes wraps around the address space", h.offset, h.len)));
            }
        }
        Kind::NicAtomic => {
            let (width, operands) = Atomic::kind_shape(h.op).ok_or_else(|| bad("op", format!("is {}, not a NIC atomic (1..=6)", h.op)))?;
            let name = Atomic::kind_name(h.op);
            if h.width as u32 != width {
                return Err(bad("width", format!("is {}, but a {name} is {width} bytes wide", h.width)));
            }
            let o = [h.value, h.compare, h.signal_offset, h.len];
            for (i, (field, v)) in ["value", "compare", "signal_offset", "len"].into_iter().zip(o).enumerate() {
                if i >= operands && v != 0 {
                    return Err(bad(field, format!("is {v:#x}, but a {name} has {operands} operands")));
                }
                if width == 4 && v > u32::MAX as u64 {
                    return Err(bad(field, format!("{v:#x} does not fit the 4-byte operand")));
                }
            }
        }
        Kind::NicAck => {}
    }
    Ok(Checked { kind, payload_len })
}

/// Builds the message of a checked header and its payload (`payload.len()` must be the checked
/// length; anything else is an error, never a panic).
pub fn message<'a>(h: &OpHeader, checked: Checked, payload: &'a [u8], ctx: &Context) -> Result<Message<'a>, Error> {
    if payload.len() != checked.payload_len {
        return Err(Error::new(format!(
            "PE {}: {} frame with {} payload bytes where its header announces {}",
            ctx.peer,
            checked.kind.name(),
            payload.len(),
            checked.payload_len
        )));
    }
    let signal = || Signal { offset: h.signal_offset, op: SignalOp::from_u8(h.op).unwrap_or(SignalOp::Set), value: h.value };
    let width = || Width::from_u8(h.width).unwrap_or(Width::W8);
    let seq = h.seq;
    Ok(match checked.kind {
        Kind::Put => Message::Put { seq, offset: h.offset, data: payload, last: h.flags & FLAG_LAST != 0 },
        Kind::PutSignal => Message::PutSignal { seq, offset: h.offset, data: payload, signal: signal() },
        Kind::GetRequest => Message::GetRequest { seq, offset: h.offset, len: h.len },
        Kind::GetResponse => Message::GetResponse { seq, offset: h.offset, data: payload, last: h.flags & FLAG_LAST != 0 },
        Kind::Amo => Message::Amo {
            seq,
            op: AmoOp::from_u8(h.op).unwrap_or(AmoOp::Fetch),
            width: width(),
            offset: h.offset,
            value: h.value,
            compare: h.compare,
        },
        Kind::AmoResponse => Message::AmoResponse { seq, width: width(), value: h.value },
        Kind::Signal => Message::Signal { seq, signal: signal() },
        Kind::Fence => Message::Fence { seq },
        Kind::Quiet => Message::Quiet { seq },
        Kind::QuietAck => Message::QuietAck { seq },
        Kind::Barrier => Message::Barrier { seq, epoch: h.value },
        Kind::Error => Message::Error { text: sanitize(payload) },
        Kind::Close => Message::Close,
        Kind::NicWrite => Message::NicWrite { seq, rkey: h.key, raddr: h.offset, data: payload, last: h.flags & FLAG_LAST != 0 },
        Kind::NicRead => Message::NicRead { seq, rkey: h.key, raddr: h.offset, len: h.len },
        Kind::NicAtomic => Message::NicAtomic {
            seq,
            rkey: h.key,
            raddr: h.offset,
            op: Atomic::decode(h.op, [h.value, h.compare, h.signal_offset, h.len]).unwrap_or(Atomic::Fa64 { add: 0 }),
        },
        Kind::NicReadResponse => Message::NicReadResponse { seq, offset: h.offset, data: payload, last: h.flags & FLAG_LAST != 0 },
        Kind::NicAck => Message::NicAck { seq, syndrome: h.op, reason: h.width, value: h.value },
    })
}

/// A peer's text made safe to print: lossy UTF-8, control characters other than newline and tab
/// replaced.
pub fn sanitize(b: &[u8]) -> String {
    String::from_utf8_lossy(b).chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { '?' } else { c }).collect()
}

/// Decodes exactly one frame from `bytes` (header and payload, nothing after). For tests and tools;
/// the streaming path is [`FrameReader`].
pub fn decode_frame<'a>(bytes: &'a [u8], ctx: &Context) -> Result<Message<'a>, Error> {
    if bytes.len() < HEADER_LEN {
        return Err(Error::new(format!("PE {}: truncated frame header ({} of {HEADER_LEN} bytes)", ctx.peer, bytes.len())));
    }
    let h: OpHeader = bytemuck::pod_read_unaligned(&bytes[..HEADER_LEN]);
    let checked = check_header(&h, ctx)?;
    message(&h, checked, &bytes[HEADER_LEN..], ctx)
}

/// What was on the wire when a read stopped: "PUT frame (seq 5, offset 0x1000, 1048576 payload bytes)".
pub fn describe(h: &OpHeader) -> String {
    let kind = Kind::from_u8(h.kind).map(Kind::name).unwrap_or("unknown");
    format!("{kind} frame (seq {}, offset {:#x}, {} payload bytes)", h.seq, h.offset, h.payload_len)
}

/// Why [`FrameReader::read`] returned no message.
#[derive(Debug)]
pub enum ReadError {
    /// The stream ended at a frame boundary.
    Closed,
    /// No byte arrived within the read timeout, at a frame boundary (the stream is still in step).
    Idle,
    /// The stream ended inside a frame: what was in flight and how much of it arrived.
    Truncated { what: String, got: usize, want: usize },
    /// The read timed out inside a frame (the stream is out of step).
    Stalled { what: String, got: usize, want: usize },
    /// The frame is invalid (the message names the peer and the field).
    Invalid(Error),
    Io(io::Error),
}

/// Reads frames from a stream into one reusable buffer of at most the chunk limit.
pub struct FrameReader {
    header: OpHeader,
    /// Set when `header` and the payload in `buf` form a complete, checked frame.
    checked: Option<Checked>,
    buf: Vec<u8>,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader::new()
    }
}

impl FrameReader {
    pub fn new() -> FrameReader {
        FrameReader { header: OpHeader::default(), checked: None, buf: Vec::new() }
    }

    /// Bytes the payload buffer holds (never more than the largest accepted payload).
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The header of the last frame read (or being read).
    pub fn last_header(&self) -> &OpHeader {
        &self.header
    }

    /// Reads one frame and returns it: the header, checked against `ctx` before anything is
    /// allocated, then the payload. A blocking stream with a read timeout gives `Idle` or `Stalled`
    /// when it expires.
    pub fn read<'s>(&'s mut self, r: &mut impl Read, ctx: &Context) -> Result<Message<'s>, ReadError> {
        self.read_frame(r, ctx)?;
        self.current(ctx).map_err(ReadError::Invalid)
    }

    /// Reads one frame into the reader ([`FrameReader::current`] gives it as a message).
    pub fn read_frame(&mut self, r: &mut impl Read, ctx: &Context) -> Result<(), ReadError> {
        self.checked = None;
        let mut hb = [0u8; HEADER_LEN];
        match fill(r, &mut hb) {
            Ok(()) => {}
            Err((0, Fill::Eof)) => return Err(ReadError::Closed),
            Err((0, Fill::Timeout)) => return Err(ReadError::Idle),
            Err((got, Fill::Eof)) => return Err(ReadError::Truncated { what: "frame header".into(), got, want: HEADER_LEN }),
            Err((got, Fill::Timeout)) => return Err(ReadError::Stalled { what: "frame header".into(), got, want: HEADER_LEN }),
            Err((_, Fill::Io(e))) => return Err(ReadError::Io(e)),
        }
        self.header = bytemuck::pod_read_unaligned(&hb);
        let checked = check_header(&self.header, ctx).map_err(ReadError::Invalid)?;
        let n = checked.payload_len;
        if self.buf.len() < n {
            // `n` is at most the chunk limit (or the error text limit): checked above. Exact, so the
            // buffer never grows past the largest payload accepted.
            self.buf.reserve_exact(n - self.buf.len());
            self.buf.resize(n, 0);
        }
        match fill(r, &mut self.buf[..n]) {
            Ok(()) => {}
            Err((got, Fill::Eof)) => return Err(ReadError::Truncated { what: describe(&self.header), got, want: n }),
            Err((got, Fill::Timeout)) => return Err(ReadError::Stalled { what: describe(&self.header), got, want: n }),
            Err((_, Fill::Io(e))) => return Err(ReadError::Io(e)),
        }
        self.checked = Some(checked);
        Ok(())
    }

    /// The frame the last successful [`FrameReader::read_frame`] read.
    pub fn current(&self, ctx: &Context) -> Result<Message<'_>, Error> {
        let Some(checked) = self.checked else {
            return Err(Error::new(format!("no complete frame from PE {} to read", ctx.peer)));
        };
        message(&self.header, checked, &self.buf[..checked.payload_len], ctx)
    }
}

enum Fill {
    Eof,
    Timeout,
    Io(io::Error),
}

/// Fills `buf` from `r`; on failure, how many bytes arrived and why it stopped.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> Result<(), (usize, Fill)> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => return Err((got, Fill::Eof)),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Err((got, Fill::Timeout)),
            Err(e) => return Err((got, Fill::Io(e))),
        }
    }
    Ok(())
}

/// One chunk of a transfer: its header and the bytes of the transfer it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub header: OpHeader,
    /// Range within the transfer's buffer (0-based).
    pub range: Range<usize>,
}

/// Cuts a transfer of `len` bytes at heap offset `offset` into frames of at most `max_chunk` bytes.
/// Every chunk has the transfer's sequence number; the last has [`FLAG_LAST`]. A put with a signal
/// sends its last chunk as PUT_SIGNAL, so the signal travels behind the data. A zero-length transfer
/// is one empty chunk (a put-with-signal of 0 bytes still signals).
#[derive(Clone, Debug)]
pub struct Chunks {
    template: OpHeader,
    signal: Option<Signal>,
    max: u64,
    len: u64,
    done: u64,
    finished: bool,
}

impl Chunks {
    /// Chunks of a PUT (or PUT_SIGNAL with `signal`).
    pub fn put(src_pe: u32, seq: u64, offset: u64, len: u64, max_chunk: u32, signal: Option<Signal>) -> Chunks {
        Chunks::new(Kind::Put, src_pe, seq, offset, len, max_chunk, signal)
    }
    /// Chunks of the answer to a GET request.
    pub fn get_response(src_pe: u32, seq: u64, offset: u64, len: u64, max_chunk: u32) -> Chunks {
        Chunks::new(Kind::GetResponse, src_pe, seq, offset, len, max_chunk, None)
    }
    /// Chunks of an emulated NIC's RDMA WRITE of `len` bytes to remote address `raddr` under `rkey`.
    pub fn nic_write(src_pe: u32, seq: u64, rkey: u32, raddr: u64, len: u64, max_chunk: u32) -> Chunks {
        let mut c = Chunks::new(Kind::NicWrite, src_pe, seq, raddr, len, max_chunk, None);
        c.template.key = rkey;
        c
    }
    /// Chunks of the answer to a NIC READ of `len` bytes (`offset`: the position in the READ).
    pub fn nic_read_response(src_pe: u32, seq: u64, len: u64, max_chunk: u32) -> Chunks {
        Chunks::new(Kind::NicReadResponse, src_pe, seq, 0, len, max_chunk, None)
    }
    fn new(kind: Kind, src_pe: u32, seq: u64, offset: u64, len: u64, max_chunk: u32, signal: Option<Signal>) -> Chunks {
        let template = OpHeader { kind: kind as u8, src_pe, seq, offset, ..OpHeader::default() };
        Chunks { template, signal, max: max_chunk.max(1) as u64, len, done: 0, finished: false }
    }
}

impl Iterator for Chunks {
    type Item = Chunk;
    fn next(&mut self) -> Option<Chunk> {
        if self.finished {
            return None;
        }
        let n = (self.len - self.done).min(self.max);
        let mut h = self.template;
        h.offset = self.template.offset.wrapping_add(self.done);
        h.len = n;
        h.payload_len = n as u32;
        let range = self.done as usize..(self.done + n) as usize;
        self.done += n;
        if self.done == self.len {
            self.finished = true;
            h.flags = FLAG_LAST;
            if let Some(s) = self.signal {
                h.kind = Kind::PutSignal as u8;
                h.op = s.op as u8;
                h.value = s.value;
                h.signal_offset = s.offset;
            }
        }
        Some(Chunk { header: h, range })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = if self.finished { 0 } else { ((self.len - self.done).div_ceil(self.max)).max(1) as usize };
        (n, Some(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAP: u64 = 1 << 20;

    fn ctx() -> Context {
        Context { me: 1, peer: 2, npes: 4, heap_size: HEAP, max_chunk: 64 << 10 }
    }

    fn sig() -> Signal {
        Signal { offset: 0x100, op: SignalOp::Add, value: 7 }
    }

    /// One valid message of every kind (and every AMO op and width).
    fn samples(data: &[u8]) -> Vec<Message<'_>> {
        let mut v = vec![
            Message::Put { seq: 1, offset: 0x40, data, last: false },
            Message::Put { seq: 2, offset: HEAP - data.len() as u64, data, last: true },
            Message::PutSignal { seq: 3, offset: 0, data, signal: sig() },
            Message::GetRequest { seq: 4, offset: 8, len: HEAP - 8 },
            Message::GetResponse { seq: 4, offset: 8, data, last: true },
            Message::AmoResponse { seq: 6, width: Width::W4, value: 0xffff_ffff },
            Message::AmoResponse { seq: 6, width: Width::W8, value: u64::MAX },
            Message::Signal { seq: 7, signal: Signal { offset: HEAP - 8, op: SignalOp::Set, value: 1 } },
            Message::Fence { seq: 8 },
            Message::Quiet { seq: 9 },
            Message::QuietAck { seq: 9 },
            Message::Barrier { seq: 10, epoch: 3 },
            Message::Error { text: "out of memory on PE 2".into() },
            Message::Close,
            Message::NicWrite { seq: 11, rkey: 0x10001, raddr: 0x7f00_0000_1000, data, last: true },
            Message::NicWrite { seq: 12, rkey: 7, raddr: u64::MAX - data.len() as u64, data, last: false },
            Message::NicRead { seq: 13, rkey: 0x10001, raddr: 0x7f00_0000_1000, len: 1 << 31 },
            Message::NicReadResponse { seq: 13, offset: 4096, data, last: true },
            Message::NicAck { seq: 14, syndrome: 0, reason: 0, value: u64::MAX },
            Message::NicAck { seq: 15, syndrome: 0x13, reason: 0xf0, value: 0 },
        ];
        for op in [
            Atomic::Fa64 { add: u64::MAX },
            Atomic::Cs64 { compare: 1, swap: 2 },
            Atomic::MaskedFa32 { add: 3, boundary: u32::MAX },
            Atomic::MaskedCs32 { swap: 1, compare: 2, swap_mask: 3, compare_mask: u32::MAX },
            Atomic::MaskedFa64 { add: 5, boundary: 1 << 63 },
            Atomic::MaskedCs64 { swap: 1, compare: 2, swap_mask: u64::MAX, compare_mask: 4 },
        ] {
            v.push(Message::NicAtomic { seq: 16, rkey: 9, raddr: 0x1000, op });
        }
        for &op in AmoOp::ALL {
            for width in [Width::W4, Width::W8] {
                let value = if op.has_operand() { 5 } else { 0 };
                let compare = if op == AmoOp::CompareSwap { 9 } else { 0 };
                v.push(Message::Amo { seq: 5, op, width, offset: HEAP - width.bytes(), value, compare });
            }
        }
        v
    }

    #[test]
    fn every_kind_round_trips() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let msgs = samples(&data);
        for k in Kind::ALL {
            assert!(msgs.iter().any(|m| m.kind() == *k), "no sample of {k:?}");
        }
        for m in &msgs {
            let (h, payload) = m.encode(2);
            let bytes = encode_frame(&h, payload);
            let got = decode_frame(&bytes, &ctx()).unwrap_or_else(|e| panic!("{m:?}: {e}"));
            assert_eq!(&got, m);
            // Through the streaming reader as well, several frames back to back.
            let twice = [bytes.clone(), bytes].concat();
            let mut r = FrameReader::new();
            let mut src = &twice[..];
            assert_eq!(&r.read(&mut src, &ctx()).unwrap(), m);
            assert_eq!(&r.read(&mut src, &ctx()).unwrap(), m);
            assert!(matches!(r.read(&mut src, &ctx()), Err(ReadError::Closed)));
        }
    }

    #[test]
    fn hello_layout() {
        let h = Hello { magic: MAGIC, version: VERSION, npes: 3, heap_size: 0x0102, ..Hello::zeroed() };
        let b = bytemuck::bytes_of(&h);
        assert_eq!(&b[..8], b"RSHMWIRE");
        assert_eq!(&b[8..12], &VERSION.to_le_bytes());
        assert_eq!(&b[40..44], &3u32.to_le_bytes());
        assert_eq!(&b[48..56], &0x0102u64.to_le_bytes());
        for s in 0..8 {
            assert_eq!(HelloStatus::from_u32(s).map(|x| x as u32), Some(s));
        }
        assert_eq!(HelloStatus::from_u32(8), None);
    }

    fn err_of(h: OpHeader, payload: &[u8]) -> String {
        decode_frame(&encode_frame(&h, payload), &ctx()).expect_err("accepted").to_string()
    }

    #[test]
    fn bad_fields_are_named() {
        let put = |offset: u64, len: u64| OpHeader { kind: 1, src_pe: 2, offset, len, payload_len: len as u32, ..Default::default() };
        let e = err_of(put(HEAP - 4, 8), &[0; 8]);
        assert!(e.contains("PE 2") && e.contains("`offset`") && e.contains("outside"), "{e}");
        let e = err_of(put(u64::MAX - 3, 8), &[0; 8]);
        assert!(e.contains("`offset`"), "{e}");
        let e = err_of(put(0, 100_000), &[]);
        assert!(e.contains("`len`") && e.contains("chunk limit"), "{e}");
        let mut h = put(0, 8);
        h.payload_len = 9;
        assert!(err_of(h, &[0; 9]).contains("`payload_len`"));
        let mut h = put(0, 8);
        h.src_pe = 3;
        let e = err_of(h, &[0; 8]);
        assert!(e.contains("`src_pe`") && e.contains("PE 2"), "{e}");
        let mut h = put(0, 8);
        h.flags = 0x80;
        assert!(err_of(h, &[0; 8]).contains("`flags`"));
        let mut h = put(0, 8);
        h.compare = 1;
        assert!(err_of(h, &[0; 8]).contains("`compare`"));
        // Payload shorter or longer than announced.
        let e = err_of(put(0, 8), &[0; 4]);
        assert!(e.contains("PE 2") && e.contains("4 payload bytes"), "{e}");
        assert!(decode_frame(&encode_frame(&put(0, 8), &[0; 12]), &ctx()).is_err());

        let amo = |op: u8, width: u8, offset: u64| OpHeader { kind: 5, src_pe: 2, op, width, offset, ..Default::default() };
        assert!(err_of(amo(99, 8, 0), &[]).contains("`op`"));
        assert!(err_of(amo(5, 2, 0), &[]).contains("`width`"));
        assert!(err_of(amo(5, 8, 4), &[]).contains("not aligned"));
        assert!(err_of(amo(5, 8, HEAP), &[]).contains("outside"));
        let mut h = amo(5, 4, 0);
        h.value = 1 << 32;
        assert!(err_of(h, &[]).contains("does not fit"));
        let mut h = amo(5, 8, 0);
        h.compare = 1;
        assert!(err_of(h, &[]).contains("only compare_swap"));

        let s = OpHeader { kind: 7, src_pe: 2, op: 1, signal_offset: 4, ..Default::default() };
        assert!(err_of(s, &[]).contains("`signal_offset`"));
        let s = OpHeader { kind: 7, src_pe: 2, op: 3, signal_offset: 8, ..Default::default() };
        assert!(err_of(s, &[]).contains("`op`"));
        let e = OpHeader { kind: 12, src_pe: 2, payload_len: 5000, ..Default::default() };
        assert!(err_of(e, &[]).contains("error text limit"));
        // NIC frames: framing is checked, addresses are the responder's business.
        let nw = |offset: u64, len: u64| OpHeader { kind: Kind::NicWrite as u8, src_pe: 2, key: 5, offset, len, payload_len: len as u32, ..Default::default() };
        assert!(err_of(nw(u64::MAX - 3, 8), &[0; 8]).contains("wraps"));
        assert!(err_of(nw(0, 100_000), &[]).contains("chunk limit"));
        let mut h = nw(0, 8);
        h.value = 1;
        assert!(err_of(h, &[0; 8]).contains("`value`"));
        assert!(err_of(OpHeader { kind: Kind::Put as u8, src_pe: 2, key: 1, ..Default::default() }, &[]).contains("`key`"));
        let nr = OpHeader { kind: Kind::NicRead as u8, src_pe: 2, key: 5, len: (1 << 31) + 1, ..Default::default() };
        assert!(err_of(nr, &[]).contains("2 GiB"));
        let na = |op: u8, width: u8| OpHeader { kind: Kind::NicAtomic as u8, src_pe: 2, key: 5, op, width, ..Default::default() };
        assert!(err_of(na(7, 8), &[]).contains("`op`"));
        assert!(err_of(na(3, 8), &[]).contains("`width`"));
        let mut h = na(3, 4);
        h.value = 1 << 32;
        assert!(err_of(h, &[]).contains("does not fit"));
        let mut h = na(1, 8);
        h.compare = 1;
        assert!(err_of(h, &[]).contains("operands"));
        assert!(err_of(OpHeader { kind: 0, ..Default::default() }, &[]).contains("unknown kind 0"));
        assert!(err_of(OpHeader { kind: 8, src_pe: 2, len: 1, ..Default::default() }, &[]).contains("`len`"));
    }

    #[test]
    fn error_text_is_sanitized() {
        let h = OpHeader { kind: 12, src_pe: 2, payload_len: 6, ..Default::default() };
        let Message::Error { text } = decode_frame(&encode_frame(&h, b"a\x1b[2Jb"), &ctx()).unwrap() else { panic!() };
        assert_eq!(text, "a?[2Jb");
    }

    #[test]
    fn chunks_cover_the_range() {
        for (len, max) in [(0u64, 4096u32), (1, 4096), (4096, 4096), (4097, 4096), (10 << 20, 1 << 20), (12345, 1000)] {
            for signal in [None, Some(sig())] {
                let chunks: Vec<Chunk> = Chunks::put(0, 9, 0x1000, len, max, signal).collect();
                assert_eq!(chunks.len(), (len.div_ceil(max as u64)).max(1) as usize);
                assert_eq!(Chunks::put(0, 9, 0x1000, len, max, signal).size_hint().0, chunks.len());
                let mut next = 0usize;
                for (i, c) in chunks.iter().enumerate() {
                    let last = i + 1 == chunks.len();
                    assert_eq!(c.range.start, next);
                    assert!(c.range.len() <= max as usize);
                    assert_eq!(c.header.offset, 0x1000 + next as u64);
                    assert_eq!((c.header.len, c.header.payload_len as usize), (c.range.len() as u64, c.range.len()));
                    assert_eq!(c.header.flags & FLAG_LAST != 0, last);
                    let want = if last && signal.is_some() { Kind::PutSignal } else { Kind::Put };
                    assert_eq!(c.header.kind, want as u8);
                    assert_eq!(c.header.seq, 9);
                    next = c.range.end;
                }
                assert_eq!(next as u64, len);
            }
        }
        // Every chunk of a valid transfer passes the receiver's checks.
        let c = Context { max_chunk: 4096, ..ctx() };
        for ch in Chunks::get_response(2, 1, 0, HEAP, 4096).chain(Chunks::put(2, 1, 0, 10_000, 4096, Some(sig()))) {
            check_header(&ch.header, &c).unwrap();
        }
        // An emulated NIC's WRITE and READ answer: the chunks decode to the messages the responder and
        // the requester act on, each at its place, the last one flagged.
        let payload = vec![0x5au8; 10_000];
        let raddr = 0x7f00_0000_1000u64;
        for (write, chunks) in [(true, Chunks::nic_write(2, 77, 0x1234, raddr, 10_000, 4096)), (false, Chunks::nic_read_response(2, 78, 10_000, 4096))] {
            let chunks: Vec<Chunk> = chunks.collect();
            assert_eq!(chunks.len(), 3);
            for (i, ch) in chunks.iter().enumerate() {
                let checked = check_header(&ch.header, &c).unwrap();
                let data = &payload[ch.range.clone()];
                let last = i + 1 == chunks.len();
                match message(&ch.header, checked, data, &c).unwrap() {
                    Message::NicWrite { seq, rkey, raddr: at, data: d, last: l } if write => {
                        assert_eq!((seq, rkey, at, d.len(), l), (77, 0x1234, raddr + ch.range.start as u64, ch.range.len(), last))
                    }
                    Message::NicReadResponse { seq, offset, data: d, last: l } if !write => {
                        assert_eq!((seq, offset, d.len(), l), (78, ch.range.start as u64, ch.range.len(), last))
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    use super::super::test_rng::Rng;

    /// Checks what the decoder accepted: every range it lets through lies inside the heap.
    fn assert_in_heap(m: &Message<'_>, c: &Context) {
        let inside = |off: u64, len: u64| off.checked_add(len).is_some_and(|e| e <= c.heap_size);
        match m {
            Message::Put { offset, data, .. } | Message::GetResponse { offset, data, .. } => {
                assert!(inside(*offset, data.len() as u64) && data.len() <= c.max_chunk as usize, "{m:?}")
            }
            Message::PutSignal { offset, data, signal, .. } => {
                assert!(inside(*offset, data.len() as u64) && inside(signal.offset, 8) && signal.offset % 8 == 0, "{m:?}")
            }
            Message::GetRequest { offset, len, .. } => assert!(inside(*offset, *len), "{m:?}"),
            Message::Amo { offset, width, .. } => assert!(inside(*offset, width.bytes()) && offset % width.bytes() == 0, "{m:?}"),
            Message::Signal { signal, .. } => assert!(inside(signal.offset, 8) && signal.offset % 8 == 0, "{m:?}"),
            Message::Error { text } => assert!(text.len() <= 3 * MAX_ERROR_TEXT as usize),
            _ => {}
        }
    }

    /// Random, mutated, truncated and extended frames, through both the one-frame decoder and the
    /// streaming reader: never a panic, never a buffer beyond the chunk limit, never an accepted range
    /// outside the heap; every refusal names the peer.
    #[test]
    fn fuzz_frames() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let data: Vec<u8> = (0..700u32).map(|i| i as u8).collect();
        let base: Vec<Vec<u8>> = samples(&data[..300])
            .iter()
            .chain(samples(&data[..0]).iter())
            .map(|m| {
                let (h, p) = m.encode(2);
                encode_frame(&h, p)
            })
            .collect();
        let c = Context { me: 1, peer: 2, npes: 4, heap_size: HEAP, max_chunk: 512 };
        let (mut accepted, mut refused) = (0u64, 0u64);
        let mut reader = FrameReader::new();
        let start = std::time::Instant::now();
        for i in 0..400_000u64 {
            let mut f = base[rng.below(base.len() as u64) as usize].clone();
            match i % 8 {
                // Flip a few bits, header fields most often.
                0..=2 => {
                    for _ in 0..1 + rng.below(4) {
                        let at = if rng.below(4) == 0 { rng.below(f.len() as u64) } else { rng.below(HEADER_LEN as u64) } as usize;
                        f[at] ^= 1 << rng.below(8);
                    }
                }
                // Overwrite a header field with an interesting value.
                3 => {
                    let at = (rng.below(HEADER_LEN as u64 / 4) * 4) as usize;
                    let vals = [0u64, 1, 7, 8, HEAP - 8, HEAP, HEAP + 1, u32::MAX as u64, u64::MAX, u64::MAX - 7, 1 << 40];
                    let v = vals[rng.below(vals.len() as u64) as usize].to_le_bytes();
                    let n = if at.is_multiple_of(8) && rng.below(2) == 0 { 8 } else { 4 };
                    f[at..at + n].copy_from_slice(&v[..n]);
                }
                // Truncate.
                4 => f.truncate(rng.below(f.len() as u64) as usize),
                // Extend with junk.
                5 => f.extend((0..1 + rng.below(100)).map(|_| rng.next() as u8)),
                // Random bytes, with a plausible kind and source PE half the time.
                _ => {
                    f = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
                    if f.len() >= 8 && rng.below(2) == 0 {
                        f[0] = 1 + rng.below(Kind::ALL.len() as u64) as u8;
                        f[1] &= 1;
                        f[4..8].copy_from_slice(&2u32.to_le_bytes());
                    }
                }
            }
            match decode_frame(&f, &c) {
                Ok(m) => {
                    assert_in_heap(&m, &c);
                    accepted += 1;
                }
                Err(e) => {
                    assert!(e.message().contains("PE 2"), "error without the peer: {e}");
                    refused += 1;
                }
            }
            let mut src = &f[..];
            loop {
                match reader.read(&mut src, &c) {
                    Ok(m) => assert_in_heap(&m, &c),
                    Err(ReadError::Invalid(e)) => {
                        assert!(e.message().contains("PE 2"), "{e}");
                        break;
                    }
                    Err(ReadError::Closed | ReadError::Truncated { .. }) => break,
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
            assert!(reader.buffer_capacity() <= (c.max_chunk.max(MAX_ERROR_TEXT)) as usize);
        }
        assert!(accepted > 10_000 && refused > 10_000, "accepted {accepted}, refused {refused}");
        eprintln!("fuzz_frames: {accepted} accepted, {refused} refused in {:?}", start.elapsed());
    }
}
