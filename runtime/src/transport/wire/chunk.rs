//! Cutting a large transfer into frames of at most the chunk limit, so that the receiver can pipeline.

use crate::transport::wire::frame::{Kind, OpHeader, Signal, FLAG_LAST};
use std::ops::Range;

/// One chunk of a transfer: its header and the bytes of the transfer it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The frame header to send (its `payload_len` is the length of `range`).
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

