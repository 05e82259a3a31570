//! Reading frames from a byte stream into one reusable buffer, checked before anything is allocated.

use crate::error::Error;
use crate::transport::wire::check::{check_header, describe, message, Checked};
use crate::transport::wire::frame::{Context, Message, OpHeader, HEADER_LEN};
use std::io::{self, Read};

/// Why [`FrameReader::read`] returned no message.
#[derive(Debug)]
pub enum ReadError {
    /// The stream ended at a frame boundary.
    Closed,
    /// No byte arrived within the read timeout, at a frame boundary (the stream is still in step).
    Idle,
    /// The stream ended inside a frame: what was in flight and how much of it arrived.
    Truncated {
        /// The part in flight: the frame header, or the frame whose payload was cut ([`describe`]).
        what: String,
        /// Bytes of it that arrived.
        got: usize,
        /// Its size in bytes.
        want: usize,
    },
    /// The read timed out inside a frame (the stream is out of step).
    Stalled {
        /// The part in flight: the frame header, or the frame whose payload stalled ([`describe`]).
        what: String,
        /// Bytes of it that arrived.
        got: usize,
        /// Its size in bytes.
        want: usize,
    },
    /// The frame is invalid (the message names the peer and the field).
    Invalid(Error),
    /// Reading the stream failed (a reset, or ETIMEDOUT when the kernel gave up on the link).
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
    /// A reader with an empty buffer (it grows to the largest payload read).
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
///
/// A read timeout (SO_RCVTIMEO) expires as EAGAIN, `WouldBlock`: the stream is alive and merely
/// quiet. `TimedOut` is ETIMEDOUT, the kernel ending the connection (retransmissions, keepalive
/// probes or TCP_USER_TIMEOUT went unanswered): a failed link, an I/O error like a reset.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> Result<(), (usize, Fill)> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => return Err((got, Fill::Eof)),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err((got, Fill::Timeout)),
            Err(e) => return Err((got, Fill::Io(e))),
        }
    }
    Ok(())
}

