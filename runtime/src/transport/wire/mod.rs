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
//! - QUIET request → QUIET completion with the same `seq`, once everything received before it on
//!   this connection has been applied.
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
//!
//! Files: [`frame`] (the hello, the header, the codes, the messages), [`check`] (validation),
//! [`reader`] (frames from a stream), [`chunk`] (large transfers in frames).

pub mod check;
pub mod chunk;
pub mod frame;
pub mod reader;
#[cfg(test)]
mod tests;

pub use check::{check_header, decode_frame, describe, message, sanitize, Checked};
pub use chunk::{Chunk, Chunks};
pub use frame::*;
pub use reader::{FrameReader, ReadError};
