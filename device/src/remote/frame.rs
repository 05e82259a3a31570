//! The frames of the remote engine: the ONE definition of what travels on a lane (a connection
//! between two PEs on different nodes) and of what lies in a lane's receive and reply rings, used by
//! the host's sender, receiver and validator (`rshmem::transport::proxy`) and by the apply code that
//! GPU threads (or, on the CPU backend, host threads) run over the receive ring (`remote::lane`).
//!
//! # Shape
//! Every frame starts with a 16-byte [`Head`] and is a multiple of 16 bytes long: a payload (PUT, GET
//! data, NIC data) follows the head (and the kind's body, if any) and is padded with zeros to the
//! next 16 bytes. Frames therefore start 16-byte aligned in a ring, so the apply code moves payloads
//! with 16-byte loads and stores. **Little-endian**: the structs go on the wire as their in-memory
//! bytes (the crate refuses big-endian targets).
//!
//! # Kinds
//! *Requests* (counted: the target acknowledges them by number, [`ACK`]):
//! - [`PUT`]: `len` payload bytes to heap offset `offset`. An operation of 8 bytes or less is 32 bytes
//!   on the wire (a compact frame).
//! - [`AMO`]: `op` (an AMO code, `remote::proxy::amo`) of `width` (4 or 8) bytes at the aligned heap
//!   offset `offset`, operands in an [`AmoBody`]; with [`FLAG_FETCH`] the target answers an
//!   [`AMO_REPLY`] whose `len` echoes the request's `len` (the requester's fetch tag).
//! - [`SIGNAL`]: `op` ([`SIGNAL_OP_SET`] or [`SIGNAL_OP_ADD`]) of `AmoBody::value` on the 8-byte word
//!   at `offset`.
//! - [`GET`]: `len` bytes at heap offset `offset`, answered by a [`GET_DATA`] carrying
//!   `GetBody::tag`.
//! - [`MARK`] and [`WAIT`]: cross-lane order (a fence). `MARK` says "every frame before me on this
//!   lane is applied" as epoch `offset` of this lane; `WAIT` holds its lane until every lane in the
//!   mask `len` has applied its `MARK` of epoch `offset`. The sender puts them where a fenced
//!   operation (an `nvshmem_fence`, the signal of a put-with-signal whose data went on several lanes,
//!   a barrier's flag) must follow frames that went on other lanes to the same PE.
//! - [`NIC_WRITE`], [`NIC_READ`], [`NIC_ATOMIC`]: the emulated NIC's remote halves of its WQEs, naming
//!   remote virtual addresses under an rkey ([`NicBody`]). The receiver checks the key and the range
//!   and rewrites the head's `offset` to the heap offset before the apply code sees the frame; a frame
//!   it refuses becomes [`NIC_REFUSED`] (answered with the error status, nothing applied).
//!
//! *Answers and control* (not counted):
//! - [`ACK`]: `offset` = how many of the receiver's requests on this lane the sender has applied.
//! - [`AMO_REPLY`]: the old value (`offset`) of a fetching AMO, `len` the request's tag.
//! - [`GET_DATA`]: `len` bytes answering the GET whose tag is `offset`. The receiver rewrites `offset`
//!   to the local destination address before the apply code copies the bytes there (or delivers a
//!   value of at most 8 bytes to a return slot itself, and marks the frame [`FLAG_TAKEN`]).
//! - [`NIC_ACK`], [`NIC_READ_DATA`]: the emulated NIC's answers ([`NicAckBody`], [`NicDataBody`]).
//! - [`ERROR`] (`len` bytes of UTF-8 text) and [`CLOSE`]: the sender's last frame.
//!
//! *In rings only*: [`WRAP`] (the rest of the ring up to its end is unused; the next frame is at its
//! start).

use bytemuck::{Pod, Zeroable};

const _: () = assert!(cfg!(target_endian = "little"), "rshmem frames are little-endian");

/// The head of every frame.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct Head {
    /// The frame's kind (`PUT`, ...).
    pub kind: u8,
    /// The kind's operation: an AMO code, a signal operator, a NIC atomic kind, a NIC status.
    pub op: u8,
    /// Operand width (AMO, NIC_ATOMIC), or a NIC reason code (NIC_ACK).
    pub width: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Payload bytes (PUT, GET, GET_DATA, NIC data), a fetch tag (AMO, AMO_REPLY), a lane mask (WAIT).
    pub len: u32,
    /// Heap offset, epoch, value, tag or address: see each kind.
    pub offset: u64,
}
/// Bytes of a [`Head`].
pub const HEAD_BYTES: usize = 16;
const _: () = assert!(core::mem::size_of::<Head>() == HEAD_BYTES);

/// The operands of an AMO or a SIGNAL (after the head).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct AmoBody {
    /// The operand (the signal's value).
    pub value: u64,
    /// The compare value of a compare-and-swap (0 otherwise).
    pub compare: u64,
}

/// The body of a GET request.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct GetBody {
    /// The requester's tag, echoed in the `GET_DATA` answer's `offset`.
    pub tag: u64,
    /// Reserved (0).
    pub _r: u64,
}

/// The body of a NIC frame (after the head, before a NIC_WRITE's payload): the rkey and the
/// requester's tag (its QP and WQE), echoed by the answers.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct NicBody {
    /// The rkey the remote address is named under.
    pub key: u32,
    /// Reserved (0).
    pub _r: u32,
    /// The requester's tag.
    pub seq: u64,
}

/// The operands of a NIC_ATOMIC (after its [`NicBody`]), in `rshmem_ibgda::Atomic::encode`'s order.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct NicOperands {
    /// The four operands.
    pub ops: [u64; 4],
}

/// The body of a NIC_ACK: the requester's tag and an atomic's old value.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct NicAckBody {
    /// The requester's tag.
    pub seq: u64,
    /// An atomic's old value (0 otherwise).
    pub value: u64,
}

/// The body of a NIC_READ_DATA: the requester's tag and the position of the payload in the READ.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq, Eq, Default)]
pub struct NicDataBody {
    /// The requester's tag.
    pub seq: u64,
    /// Where in the READ the payload's first byte belongs.
    pub at: u64,
}

// ------------------------------------------------------------------------------------------ kinds

/// Request: put `len` bytes at `offset`.
pub const PUT: u8 = 1;
/// Request: an atomic operation ([`AmoBody`]).
pub const AMO: u8 = 2;
/// Request: a signal update ([`AmoBody`]).
pub const SIGNAL: u8 = 3;
/// Request: read `len` bytes at `offset` ([`GetBody`]).
pub const GET: u8 = 4;
/// Request: this lane's mark of fence epoch `offset`.
pub const MARK: u8 = 5;
/// Request: wait for every lane of mask `len` to have marked epoch `offset`.
pub const WAIT: u8 = 6;
/// Request: the emulated NIC's RDMA WRITE (a [`NicBody`], then `len` payload bytes).
pub const NIC_WRITE: u8 = 7;
/// Request: the emulated NIC's RDMA READ of `len` bytes (a [`NicBody`]).
pub const NIC_READ: u8 = 8;
/// Request: the emulated NIC's atomic (a [`NicBody`], then [`NicOperands`]).
pub const NIC_ATOMIC: u8 = 9;
/// Request (in a receive ring only): a NIC frame the receiver refused; answered with `op` as the
/// error status and `width` as the reason, nothing applied. Keeps the refused frame's [`NicBody`]
/// (its tag) and its size: `len` counts the bytes that follow the body.
pub const NIC_REFUSED: u8 = 10;
/// Answer: requests applied so far (`offset`).
pub const ACK: u8 = 16;
/// Answer: a fetched old value (`offset`), for the fetch tagged `len`.
pub const AMO_REPLY: u8 = 17;
/// Answer: GET bytes (`len` of them) for the tag in `offset`.
pub const GET_DATA: u8 = 18;
/// Answer: a NIC operation's completion ([`NicAckBody`]; `op` the status, `width` the reason).
pub const NIC_ACK: u8 = 19;
/// Answer: READ bytes ([`NicDataBody`], then `len` bytes; [`FLAG_LAST`] on the READ's last piece).
pub const NIC_READ_DATA: u8 = 20;
/// The sender's last word before it closes: `len` bytes of UTF-8 text.
pub const ERROR: u8 = 30;
/// An orderly end of the lane: nothing follows.
pub const CLOSE: u8 = 31;
/// Ring only: nothing more up to the end of the ring; the next frame is at its start.
pub const WRAP: u8 = 0x40;

/// `Head::flags` of an AMO: the target answers with the old value.
pub const FLAG_FETCH: u8 = 1;
/// `Head::flags` of a NIC_WRITE or NIC_READ_DATA: the last piece of the operation.
pub const FLAG_LAST: u8 = 2;
/// `Head::flags` of a frame in a receive ring that the receiving host already dealt with (a GET_DATA
/// it delivered to a return slot, a refused piece of a NIC WRITE that is not its last): the apply
/// code skips it. Never valid on the wire.
pub const FLAG_TAKEN: u8 = 4;

/// `Head::op` of a SIGNAL: set.
pub const SIGNAL_OP_SET: u8 = 1;
/// `Head::op` of a SIGNAL: add.
pub const SIGNAL_OP_ADD: u8 = 2;

/// Most payload bytes of one frame (a larger put travels as several frames).
pub const MAX_PAYLOAD: u32 = 256 << 10;
/// Most bytes of an ERROR's text.
pub const MAX_ERROR_TEXT: u32 = 4096;
/// Most lanes between two PEs (a WAIT's mask has a bit per lane).
pub const MAX_LANES: usize = 16;

/// `n` rounded up to a multiple of 16.
#[inline(always)]
pub const fn pad16(n: usize) -> usize {
    (n + 15) & !15
}

/// Bytes before the payload of a frame of `kind` (head and body), or None for an unknown kind.
#[inline(always)]
pub const fn fixed_bytes(kind: u8) -> Option<usize> {
    Some(match kind {
        PUT | GET_DATA | MARK | WAIT | ACK | AMO_REPLY | ERROR | CLOSE | WRAP => HEAD_BYTES,
        AMO | SIGNAL | GET | NIC_READ | NIC_WRITE | NIC_ACK | NIC_READ_DATA | NIC_REFUSED => HEAD_BYTES + 16,
        NIC_ATOMIC => HEAD_BYTES + 16 + 32,
        _ => return None,
    })
}

/// Whether a frame of `kind` carries `Head::len` payload bytes after its fixed part.
#[inline(always)]
pub const fn has_payload(kind: u8) -> bool {
    matches!(kind, PUT | GET_DATA | NIC_WRITE | NIC_READ_DATA | ERROR)
}

/// Whether a frame of `kind` is a request (counted, acknowledged by number).
#[inline(always)]
pub const fn is_request(kind: u8) -> bool {
    matches!(kind, PUT | AMO | SIGNAL | GET | MARK | WAIT | NIC_WRITE | NIC_READ | NIC_ATOMIC | NIC_REFUSED)
}

/// The whole size of a frame with head `h` (fixed part, payload, padding), or None for an unknown
/// kind. A NIC_REFUSED keeps the size of the frame it replaced: its `len` says how many bytes follow
/// its fixed part.
#[inline(always)]
pub const fn frame_bytes(h: &Head) -> Option<usize> {
    let Some(f) = fixed_bytes(h.kind) else { return None };
    if has_payload(h.kind) || h.kind == NIC_REFUSED {
        Some(f + pad16(h.len as usize))
    } else {
        Some(f)
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn every_frame_is_a_multiple_of_sixteen_bytes() {
        for kind in 0..=255u8 {
            for len in [0u32, 1, 8, 15, 16, 17, 4096, MAX_PAYLOAD] {
                if let Some(n) = frame_bytes(&Head { kind, len, ..Head::default() }) {
                    assert_eq!(n % 16, 0, "kind {kind} len {len}");
                    assert!(n >= HEAD_BYTES);
                }
            }
        }
        // A compact put: 8 bytes of data in a 32-byte frame.
        assert_eq!(frame_bytes(&Head { kind: PUT, len: 8, ..Head::default() }), Some(32));
        assert_eq!(frame_bytes(&Head { kind: AMO, len: 7, ..Head::default() }), Some(32));
        assert_eq!(frame_bytes(&Head { kind: 99, ..Head::default() }), None);
    }
}
