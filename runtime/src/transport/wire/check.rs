//! Validation of the frames a peer sends on a lane: the decoder of bytes that come from outside. A
//! receiver calls [`frame_size`] as soon as a head is in (so that it never waits for, nor makes room
//! for, more than one frame of at most `MAX_PAYLOAD` bytes), then [`check`] on the whole frame before
//! anything of it is applied or believed. Every error names the peer, the kind and the field.
//!
//! What is checked: a known kind that may travel (never `WRAP`), the flags the kind allows, zero in
//! every field and reserved word the kind does not use, payload and GET lengths from 1 to
//! `MAX_PAYLOAD`, heap ranges inside what this PE has backed (without overflow), AMO codes, widths and
//! alignment, signal operators, wait masks of existing other lanes, and an ERROR's UTF-8 text. What
//! a frame names of this PE's own requests (an ACK's count, an answer's tag) is checked by the lane
//! against what it sent.

use crate::transport::wire::frame::{self as f, AmoOp, Head, HEAD_BYTES};

/// What the receiving side knows when it checks a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// The peer PE (for messages).
    pub peer: u32,
    /// Lanes between the two PEs, and this one's index.
    pub lanes: u32,
    /// This lane's index.
    pub lane: u32,
    /// Bytes of this PE's heap backed now: every heap range must lie below it.
    pub backed: u64,
}

/// A frame that passed [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// A request for the apply code (PUT, AMO, SIGNAL, GET, MARK, WAIT).
    Request,
    /// An emulated NIC's request (NIC_WRITE, NIC_READ, NIC_ATOMIC): its key and remote address are
    /// the NIC responder's to check; the frame is rewritten before the apply code sees it.
    Nic {
        /// The rkey.
        key: u32,
        /// The remote address.
        raddr: u64,
        /// Bytes it touches.
        len: u64,
        /// The requester's tag.
        seq: u64,
    },
    /// An acknowledgement of `count` of this PE's requests.
    Ack {
        /// Requests applied at the peer.
        count: u64,
    },
    /// A fetched value for the fetch tagged `tag`.
    AmoReply {
        /// The fetch's tag.
        tag: u32,
        /// The old value.
        value: u64,
    },
    /// `len` bytes for the GET tagged `tag`.
    GetData {
        /// The GET's tag.
        tag: u64,
        /// Its bytes.
        len: u32,
    },
    /// An emulated NIC's answer (NIC_ACK, NIC_READ_DATA): the NIC's to act on.
    NicAnswer,
    /// The peer's last word.
    Error(String),
    /// An orderly end.
    Close,
}

fn bad(peer: u32, kind: u8, field: &str, why: impl std::fmt::Display) -> String {
    format!("PE {peer} sent a bad {} frame: field `{field}` {why}", f::kind_name(kind))
}

/// The whole size of the frame whose head is `h` (what the receiver must have before `check`), after
/// checking the kind and the length against their limits.
pub fn frame_size(h: &Head, ctx: &Context) -> Result<usize, String> {
    let peer = ctx.peer;
    if h.kind == f::WRAP || f::fixed_bytes(h.kind).is_none() || h.kind == f::NIC_REFUSED {
        return Err(format!("PE {peer} sent a frame of unknown kind {} (field `kind`)", h.kind));
    }
    if f::has_payload(h.kind) {
        let max = if h.kind == f::ERROR { f::MAX_ERROR_TEXT } else { f::MAX_PAYLOAD };
        if h.len == 0 && h.kind != f::ERROR || h.len > max {
            return Err(bad(peer, h.kind, "len", format_args!("is {} (from 1 to {max})", h.len)));
        }
    }
    Ok(f::frame_bytes(h).expect("a known kind"))
}

fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

/// Checks the whole frame `b` (head, body, payload, padding: `frame_size` bytes) from the peer.
pub fn check(b: &[u8], ctx: &Context) -> Result<Checked, String> {
    let peer = ctx.peer;
    if b.len() < HEAD_BYTES {
        return Err(format!("PE {peer}: a frame of {} bytes, shorter than its head", b.len()));
    }
    let h: Head = bytemuck::pod_read_unaligned(&b[..HEAD_BYTES]);
    let size = frame_size(&h, ctx)?;
    if b.len() != size {
        return Err(format!("PE {peer}: a {} frame of {} bytes where its head says {size}", f::kind_name(h.kind), b.len()));
    }
    let k = h.kind;
    let e = |field: &str, why: String| bad(peer, k, field, why);
    let zero = |field: &str, v: u64| if v != 0 { Err(e(field, format!("is {v:#x} (must be 0 for this kind)"))) } else { Ok(()) };
    let flags_ok = |allowed: u8| if h.flags & !allowed != 0 { Err(e("flags", format!("has unknown bits {:#x}", h.flags & !allowed))) } else { Ok(()) };
    let in_heap = |offset: u64, len: u64| {
        if offset.checked_add(len).is_none_or(|end| end > ctx.backed) {
            Err(e("offset", format!("names heap bytes [{offset:#x}, +{len:#x}) beyond the {:#x} bytes backed here", ctx.backed)))
        } else {
            Ok(())
        }
    };
    let payload_at = f::fixed_bytes(k).expect("checked");
    // The padding after a payload is zero (so that no byte of a frame is unchecked).
    if f::has_payload(k) && b[payload_at + h.len as usize..].iter().any(|&x| x != 0) {
        return Err(e("padding", "is not zero".into()));
    }
    match k {
        f::PUT => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(0)?;
            in_heap(h.offset, h.len as u64)?;
            Ok(Checked::Request)
        }
        f::AMO => {
            flags_ok(f::FLAG_FETCH)?;
            let Some(op) = AmoOp::from_u8(h.op) else { return Err(e("op", format!("is {} (not an AMO code)", h.op))) };
            if h.width != 4 && h.width != 8 {
                return Err(e("width", format!("is {} (4 or 8)", h.width)));
            }
            if !h.offset.is_multiple_of(h.width as u64) {
                return Err(e("offset", format!("{:#x} is not aligned to the width {}", h.offset, h.width)));
            }
            in_heap(h.offset, h.width as u64)?;
            let fetch = h.flags & f::FLAG_FETCH != 0;
            if fetch != op.fetches() {
                return Err(e("flags", format!("{} a fetch for {}", if fetch { "ask" } else { "do not ask" }, op.name())));
            }
            if !fetch {
                zero("len", h.len as u64)?;
            }
            let (value, compare) = (word(b, 16), word(b, 24));
            let mask = if h.width == 4 { u32::MAX as u64 } else { u64::MAX };
            if value & !mask != 0 {
                return Err(e("value", format!("{value:#x} does not fit {} bytes", h.width)));
            }
            if op == AmoOp::CompareSwap {
                if compare & !mask != 0 {
                    return Err(e("compare", format!("{compare:#x} does not fit {} bytes", h.width)));
                }
            } else {
                zero("compare", compare)?;
            }
            Ok(Checked::Request)
        }
        f::SIGNAL => {
            if h.op != f::SIGNAL_OP_SET && h.op != f::SIGNAL_OP_ADD {
                return Err(e("op", format!("is {} (1 set or 2 add)", h.op)));
            }
            if h.width != 8 {
                return Err(e("width", format!("is {} (8)", h.width)));
            }
            flags_ok(0)?;
            zero("len", h.len as u64)?;
            if !h.offset.is_multiple_of(8) {
                return Err(e("offset", format!("{:#x} is not 8-byte aligned", h.offset)));
            }
            in_heap(h.offset, 8)?;
            zero("compare", word(b, 24))?;
            Ok(Checked::Request)
        }
        f::GET => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(0)?;
            if h.len == 0 || h.len > f::MAX_PAYLOAD {
                return Err(e("len", format!("is {} (from 1 to {})", h.len, f::MAX_PAYLOAD)));
            }
            in_heap(h.offset, h.len as u64)?;
            zero("reserved", word(b, 24))?;
            Ok(Checked::Request)
        }
        f::MARK => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(0)?;
            zero("len", h.len as u64)?;
            Ok(Checked::Request)
        }
        f::WAIT => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(0)?;
            let all = if ctx.lanes >= 32 { u32::MAX } else { (1u32 << ctx.lanes) - 1 };
            if h.len == 0 || h.len & !all != 0 || h.len & (1 << ctx.lane) != 0 {
                return Err(e("len", format!("{:#x} is not a mask of other lanes of the {} (this is lane {})", h.len, ctx.lanes, ctx.lane)));
            }
            Ok(Checked::Request)
        }
        f::NIC_WRITE | f::NIC_READ | f::NIC_ATOMIC => {
            let (kw, seq) = (word(b, 16), word(b, 24));
            let key = kw as u32;
            let at = (kw >> 32) as u32;
            let len = match k {
                f::NIC_WRITE => {
                    zero("op", h.op as u64)?;
                    zero("width", h.width as u64)?;
                    flags_ok(f::FLAG_LAST)?;
                    zero("reserved", at as u64)?;
                    h.len as u64
                }
                f::NIC_READ => {
                    zero("op", h.op as u64)?;
                    zero("width", h.width as u64)?;
                    flags_ok(f::FLAG_LAST)?;
                    if h.len == 0 || h.len > f::MAX_PAYLOAD {
                        return Err(e("len", format!("is {} (from 1 to {})", h.len, f::MAX_PAYLOAD)));
                    }
                    h.len as u64
                }
                _ => {
                    flags_ok(0)?;
                    zero("len", h.len as u64)?;
                    zero("reserved", at as u64)?;
                    let ops = [word(b, 32), word(b, 40), word(b, 48), word(b, 56)];
                    let Some(a) = rshmem_ibgda::Atomic::decode(h.op, ops) else {
                        return Err(e("op", format!("{} with operands {ops:x?} is not a NIC atomic", h.op)));
                    };
                    if a.bytes() as u8 != h.width {
                        return Err(e("width", format!("is {} but the atomic is {} bytes", h.width, a.bytes())));
                    }
                    a.bytes() as u64
                }
            };
            Ok(Checked::Nic { key, raddr: h.offset, len, seq })
        }
        f::ACK => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(0)?;
            zero("len", h.len as u64)?;
            Ok(Checked::Ack { count: h.offset })
        }
        f::AMO_REPLY => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(0)?;
            Ok(Checked::AmoReply { tag: h.len, value: h.offset })
        }
        f::GET_DATA => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(0)?;
            Ok(Checked::GetData { tag: h.offset, len: h.len })
        }
        f::NIC_ACK => {
            flags_ok(0)?;
            zero("len", h.len as u64)?;
            zero("offset", h.offset)?;
            Ok(Checked::NicAnswer)
        }
        f::NIC_READ_DATA => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(f::FLAG_LAST)?;
            zero("offset", h.offset)?;
            Ok(Checked::NicAnswer)
        }
        f::ERROR => {
            let text = &b[HEAD_BYTES..HEAD_BYTES + h.len as usize];
            Ok(Checked::Error(sanitize(text)))
        }
        f::CLOSE => {
            zero("op", h.op as u64)?;
            zero("width", h.width as u64)?;
            flags_ok(0)?;
            zero("len", h.len as u64)?;
            zero("offset", h.offset)?;
            Ok(Checked::Close)
        }
        _ => Err(format!("PE {peer} sent a frame of unknown kind {k} (field `kind`)")),
    }
}

/// Text from a peer as this PE prints it: invalid UTF-8 replaced, control characters but newlines
/// and tabs shown as `?`.
pub fn sanitize(b: &[u8]) -> String {
    String::from_utf8_lossy(b).chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { '?' } else { c }).collect()
}

/// What a head says, for messages: "PUT frame (offset 0x1000, 4096 bytes)".
pub fn describe(h: &Head) -> String {
    format!("{} frame (offset {:#x}, len {})", f::kind_name(h.kind), h.offset, h.len)
}
