//! The connection hello and its codes, the AMO codes, and the frames after it: their one definition is
//! the device crate's (`rshmem_device::remote::frame`, re-exported here), which the apply code on the
//! GPU reads too; [`Frames`] builds them.

use bytemuck::{Pod, Zeroable};
pub use rshmem_device::remote::frame::*;

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
/// Bumped on any incompatible change of the hello or the frames (4: the frames of the lanes,
/// `rshmem_device::remote::frame`).
pub const VERSION: u32 = 4;
/// Size of [`Hello`] on the wire.
pub const HELLO_LEN: usize = 64;
/// The largest frame payload every PE accepts (announced in the hello as `max_chunk`).
pub const DEFAULT_MAX_CHUNK: u32 = rshmem_device::remote::frame::MAX_PAYLOAD;
/// Smallest chunk limit a PE may announce (bounds of the hello's `max_chunk`, with [`MAX_CHUNK`]).
pub const MIN_CHUNK: u32 = 4096;
/// Largest chunk limit a PE may announce.
pub const MAX_CHUNK: u32 = 64 << 20;
/// Most connections (lanes) between one pair of PEs.
pub const MAX_LANES: u32 = rshmem_device::remote::frame::MAX_LANES as u32;

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


/// Builds frames into a byte vector (the sender's own bytes: heads, bodies, compact payloads and
/// padding). Payloads that travel by reference are the caller's: [`Frames::put_head`] writes the head
/// of a PUT whose payload the caller sends next, then [`pad`] zeros.
pub struct Frames;

/// Zeros to pad a payload to 16 bytes.
pub const PAD: [u8; 16] = [0; 16];

/// The zero bytes after a payload of `n` bytes.
pub fn pad(n: usize) -> &'static [u8] {
    &PAD[..pad16(n) - n]
}

fn push_head(out: &mut Vec<u8>, h: Head) {
    out.extend_from_slice(bytemuck::bytes_of(&h));
}

fn push_pair(out: &mut Vec<u8>, a: u64, b: u64) {
    out.extend_from_slice(&a.to_le_bytes());
    out.extend_from_slice(&b.to_le_bytes());
}

impl Frames {
    /// The head of a PUT of `len` bytes to heap offset `offset` (the payload and its padding follow).
    pub fn put_head(out: &mut Vec<u8>, offset: u64, len: u32) {
        push_head(out, Head { kind: PUT, len, offset, ..Head::default() });
    }
    /// A whole PUT of `data` (at most 16 bytes are worth copying; larger payloads go by reference).
    pub fn put(out: &mut Vec<u8>, offset: u64, data: &[u8]) {
        Self::put_head(out, offset, data.len() as u32);
        out.extend_from_slice(data);
        out.extend_from_slice(pad(data.len()));
    }
    /// An AMO (`op` an `AmoOp` code) of `width` bytes; `fetch` with its tag.
    pub fn amo(out: &mut Vec<u8>, op: u8, width: u8, offset: u64, value: u64, compare: u64, fetch: Option<u32>) {
        let (flags, len) = match fetch {
            Some(tag) => (FLAG_FETCH, tag),
            None => (0, 0),
        };
        push_head(out, Head { kind: AMO, op, width, flags, len, offset });
        push_pair(out, value, compare);
    }
    /// A signal (`op` SIGNAL_OP_SET or SIGNAL_OP_ADD) of `value` on the word at `offset`.
    pub fn signal(out: &mut Vec<u8>, op: u8, offset: u64, value: u64) {
        push_head(out, Head { kind: SIGNAL, op, width: 8, offset, ..Head::default() });
        push_pair(out, value, 0);
    }
    /// A GET of `len` bytes at `offset`, answered with `tag`.
    pub fn get(out: &mut Vec<u8>, offset: u64, len: u32, tag: u64) {
        push_head(out, Head { kind: GET, len, offset, ..Head::default() });
        push_pair(out, tag, 0);
    }
    /// This lane's mark of fence epoch `epoch`.
    pub fn mark(out: &mut Vec<u8>, epoch: u64) {
        push_head(out, Head { kind: MARK, offset: epoch, ..Head::default() });
    }
    /// A wait for the lanes of `mask` to mark `epoch`.
    pub fn wait(out: &mut Vec<u8>, epoch: u64, mask: u32) {
        push_head(out, Head { kind: WAIT, len: mask, offset: epoch, ..Head::default() });
    }
    /// An acknowledgement of `count` requests.
    pub fn ack(out: &mut Vec<u8>, count: u64) {
        push_head(out, Head { kind: ACK, offset: count, ..Head::default() });
    }
    /// The emulated NIC's WRITE head (its payload of `len` bytes and padding follow).
    pub fn nic_write_head(out: &mut Vec<u8>, key: u32, raddr: u64, len: u32, seq: u64, last: bool) {
        push_head(out, Head { kind: NIC_WRITE, flags: if last { FLAG_LAST } else { 0 }, len, offset: raddr, ..Head::default() });
        push_pair(out, key as u64, seq);
    }
    /// The emulated NIC's READ of `len` bytes (the part of a READ at `at`; `last` its last part).
    pub fn nic_read(out: &mut Vec<u8>, key: u32, raddr: u64, len: u32, seq: u64, at: u32, last: bool) {
        push_head(out, Head { kind: NIC_READ, flags: if last { FLAG_LAST } else { 0 }, len, offset: raddr, ..Head::default() });
        push_pair(out, key as u64 | (at as u64) << 32, seq);
    }
    /// The emulated NIC's atomic (`kind` of `rshmem_ibgda::Atomic::encode`, its four operands).
    pub fn nic_atomic(out: &mut Vec<u8>, key: u32, raddr: u64, kind: u8, width: u8, seq: u64, ops: [u64; 4]) {
        push_head(out, Head { kind: NIC_ATOMIC, op: kind, width, offset: raddr, ..Head::default() });
        push_pair(out, key as u64, seq);
        push_pair(out, ops[0], ops[1]);
        push_pair(out, ops[2], ops[3]);
    }
    /// An ERROR with `text` (cut to `MAX_ERROR_TEXT` bytes at a character boundary).
    pub fn error(out: &mut Vec<u8>, text: &str) {
        let mut n = text.len().min(MAX_ERROR_TEXT as usize);
        while !text.is_char_boundary(n) {
            n -= 1;
        }
        push_head(out, Head { kind: ERROR, len: n as u32, ..Head::default() });
        out.extend_from_slice(&text.as_bytes()[..n]);
        out.extend_from_slice(pad(n));
    }
    /// A CLOSE.
    pub fn close(out: &mut Vec<u8>) {
        push_head(out, Head { kind: CLOSE, ..Head::default() });
    }
}

/// A kind's name, for messages.
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        PUT => "PUT",
        AMO => "AMO",
        SIGNAL => "SIGNAL",
        GET => "GET",
        MARK => "MARK",
        WAIT => "WAIT",
        NIC_WRITE => "NIC_WRITE",
        NIC_READ => "NIC_READ",
        NIC_ATOMIC => "NIC_ATOMIC",
        NIC_REFUSED => "NIC_REFUSED",
        ACK => "ACK",
        AMO_REPLY => "AMO_REPLY",
        GET_DATA => "GET_DATA",
        NIC_ACK => "NIC_ACK",
        NIC_READ_DATA => "NIC_READ_DATA",
        ERROR => "ERROR",
        CLOSE => "CLOSE",
        WRAP => "WRAP",
        _ => "unknown",
    }
}
