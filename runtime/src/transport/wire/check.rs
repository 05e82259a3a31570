//! Validation of frames from a peer: every header is checked against the connection's [`Context`]
//! before its payload is read, and a checked frame becomes a [`Message`].

use crate::error::Error;
use crate::transport::wire::frame::{AmoOp, Context, Kind, Message, OpHeader, Signal, SignalOp, Width, FLAG_LAST, HEADER_LEN, MAX_ERROR_TEXT};
use rshmem_ibgda::Atomic;

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
        Kind::Quiet | Kind::QuietAck | Kind::Close => 0,
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
    /// The frame's kind.
    pub kind: Kind,
    /// Payload bytes after the header (within the chunk limit, or the error text limit).
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
        Kind::Signal | Kind::Quiet | Kind::QuietAck | Kind::Close => {}
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
        Kind::Quiet => Message::Quiet { seq },
        Kind::QuietAck => Message::QuietAck { seq },
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
/// the streaming path is [`FrameReader`](super::reader::FrameReader).
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

