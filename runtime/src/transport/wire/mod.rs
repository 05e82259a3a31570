//! The wire of the remote engine: what one PE sends another over a lane (a byte stream).
//!
//! A connection between two PEs starts with a [`Hello`] each way (job key, PE numbers, PE count, heap
//! size, the lane's index and count, the chunk limit; checked by `proxy::accept` and
//! `proxy::connect`), then carries frames. The frames' one definition is the device crate's
//! (`rshmem_device::remote::frame`, re-exported by [`frame`]): the GPU's apply code reads them in
//! the receive ring as they came off the wire. A frame is a 16-byte head, a body for some kinds, and
//! a payload padded to 16 bytes. **The wire is little-endian**: the crates refuse to build for a
//! big-endian target, so the in-memory bytes are the wire bytes.
//!
//! Nothing here knows about TCP. Every frame from a peer is validated (`check`) before anything of
//! it is applied or believed: a known kind, the flags it allows, zero in the fields it does not use,
//! lengths within `MAX_PAYLOAD`, heap ranges inside what is backed, AMO codes, widths and alignment.
//! No accepted frame reaches outside the heap.
//!
//! Files: `frame` (the hello, its codes, the AMO codes, frame builders), `check` (validation).

pub mod check;
pub mod frame;
#[cfg(test)]
mod tests;

pub use check::{check, describe, frame_size, sanitize, Checked, Context};
pub use frame::*;
