//! The TCP provider of the proxy transport: one [`Connection`] carries frames of `transport::wire`
//! between two PEs over a `std::net::TcpStream`.
//!
//! - `super::connect` opens a connection and sends a `wire::Hello`; the accepting side (`super::accept`)
//!   answers with its own hello or a refusal. Both sides check the job key (in constant time), the PE
//!   count, the heap size and that the connection is meant for them; a mismatch drops the connection
//!   with an error naming the peer on both sides. A refusal carries its status alone: nothing of the
//!   acceptor's identity.
//! - [`Connection::send`] writes a header and its payload with one `sendmsg` (no copy, no SIGPIPE),
//!   checking first that the peer would accept the frame; [`Connection::recv`] reads and validates
//!   one frame with a read deadline. TCP_NODELAY is on: proxy traffic is many small frames.
//! - A peer that closes, stalls or sends garbage gives an error naming it and what was in flight, and
//!   the connection is unusable afterwards; for garbage, the peer is told why (an ERROR frame) first.
//!   A network link that fails (the kernel ends the connection with ETIMEDOUT, EHOSTUNREACH, ...) is
//!   named as one, with the errno ([`link_failed`] tells it apart from a peer that closed).
//! - Several connections per pair: `lane` of `lanes` in the hello. No threads of its own.

use crate::transport::wire::{
    self, check_header, Chunks, Context, FrameReader, Kind, Message, OpHeader, ReadError, Signal, HEADER_LEN, HELLO_LEN,
    MAX_CHUNK, MIN_CHUNK,
};
use crate::error::{Error, Result};
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default bound on waiting for a frame's bytes, or for the peer to take ours.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(10);
/// A connecting client must send its hello within this time.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// This PE as the wire sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The job key both ends of a connection must share.
    pub key: [u8; 16],
    /// This PE.
    pub pe: u32,
    /// PEs in the job.
    pub npes: u32,
    /// This PE's symmetric heap size (the same on every PE of a job).
    pub heap_size: u64,
    /// The largest payload this PE accepts in one frame (MIN_CHUNK..=MAX_CHUNK).
    pub max_chunk: u32,
}

impl Endpoint {
    pub(crate) fn check(&self) -> Result<()> {
        if self.pe >= self.npes {
            return Err(Error::new(format!("transport: PE {} is not below the PE count {}", self.pe, self.npes)));
        }
        if !(MIN_CHUNK..=MAX_CHUNK).contains(&self.max_chunk) {
            return Err(Error::new(format!(
                "transport: chunk size {} is outside {MIN_CHUNK}..={MAX_CHUNK} bytes",
                self.max_chunk
            )));
        }
        Ok(())
    }
}

/// Constant-time comparison of job keys (no early exit on the first differing byte).
pub(crate) fn key_eq(a: &[u8; 16], b: &[u8; 16]) -> bool {
    std::hint::black_box(a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y))) == 0
}

/// One connection to a peer PE.
pub struct Connection {
    stream: TcpStream,
    ctx: Context,
    /// The largest payload the peer accepts.
    peer_max_chunk: u32,
    lane: u16,
    peer_addr: SocketAddr,
    reader: FrameReader,
    io_timeout: Duration,
    /// The read timeout set on the socket now.
    read_timeout: Option<Duration>,
    /// Set once the connection failed: every later call gives this error.
    broken: Option<Error>,
    /// The halves of a split connection: the first failure either half saw (see `link_cause`).
    halves: Option<Arc<Mutex<Option<Error>>>>,
    /// Requests sent that await an answer (GET, fetching AMO, QUIET).
    awaiting: u64,
    last_sent: Option<OpHeader>,
    /// When the last frame arrived: a receive soon after one polls before it sleeps (`recv_timeout`).
    last_frame: Option<Instant>,
    /// Frames queued by `queue`, sent together by `flush` (or before the next `send`).
    out: Outbox,
    /// Bytes read from the socket ahead of the frame being read (one `read` takes many small frames).
    inbuf: InBuf,
}

/// Frames queued for one `sendmsg`: headers (and small payloads) copied into `bytes`, larger payloads
/// by address (`Part::Ext`: the caller of `queue` keeps them valid until the flush).
#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    parts: Vec<Part>,
    /// Payload bytes queued (own and borrowed).
    total: usize,
}

enum Part {
    Own(std::ops::Range<usize>),
    Ext(*const u8, usize),
}

// SAFETY: the borrowed parts are addresses the caller of `queue` keeps valid and unchanged until the
// flush (its contract); they are only read, by the thread that owns the connection.
unsafe impl Send for Outbox {}

impl Outbox {
    /// Adds `bytes[r]` as the next piece, merged with the previous one where they touch.
    fn push_own(&mut self, r: std::ops::Range<usize>) {
        if r.is_empty() {
            return;
        }
        match self.parts.last_mut() {
            Some(Part::Own(prev)) if prev.end == r.start => prev.end = r.end,
            _ => self.parts.push(Part::Own(r)),
        }
    }
}

/// Most iovecs one `sendmsg` gets (the kernel's limit is IOV_MAX, 1024).
const MAX_IOV: usize = 512;
/// Queued bytes past which `queue` flushes by itself.
const OUTBOX_FLUSH: usize = 4 << 20;
/// Payloads up to this size are copied into the outbox rather than borrowed.
const OUTBOX_COPY: usize = 256;
/// Bytes of the receive buffer.
const INBUF_BYTES: usize = 64 << 10;

/// Bytes read ahead from the socket: `buf[start..end]` not consumed yet.
struct InBuf {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Default for InBuf {
    fn default() -> Self {
        InBuf { buf: vec![0u8; INBUF_BYTES].into_boxed_slice(), start: 0, end: 0 }
    }
}

/// Sends all of `parts` with `sendmsg` (gathering, MSG_NOSIGNAL: a closed peer gives EPIPE, not a
/// signal that would kill a C program). Waits at most `timeout` for the peer to make room.
pub(crate) fn send_all(s: &TcpStream, parts: &[&[u8]], timeout: Duration) -> io::Result<()> {
    let fd = s.as_raw_fd();
    let deadline = Instant::now() + timeout;
    let mut parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut first = 0;
    while first < parts.len() {
        let mut iov: Vec<libc::iovec> = parts[first..]
            .iter()
            .map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() })
            .collect();
        // SAFETY: zeroed msghdr is valid (no name, no control data); it points at `iov`, which lives
        // until after the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        // SAFETY: `fd` is the open socket of `s`, borrowed for the call; every iovec names a live,
        // readable slice of `parts` (the kernel only reads through them).
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                // EAGAIN: the send buffer is full (or SO_SNDTIMEO expired). ETIMEDOUT is the
                // kernel ending the connection: an error.
                io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, format!("the peer took no data for {timeout:?}")));
                    }
                    let mut fds = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
                    crate::bootstrap::poll(&mut fds, Some(left))?;
                    continue;
                }
                _ => return Err(e),
            }
        }
        let mut n = n as usize;
        while n > 0 && first < parts.len() {
            let p = parts[first];
            if n >= p.len() {
                n -= p.len();
                first += 1;
            } else {
                parts[first] = &p[n..];
                n = 0;
            }
        }
    }
    Ok(())
}

/// Whether `errno` says the network path to a peer failed rather than the peer's process: the
/// kernel gave up on the connection (retransmissions, keepalive probes or TCP_USER_TIMEOUT went
/// unanswered: ETIMEDOUT), or has no route to the peer's host any more. A reset (ECONNRESET) or a
/// closed pipe (EPIPE) came from the peer's kernel, which is alive: its process ended or closed.
fn link_errno(errno: i32) -> bool {
    matches!(errno, libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN | libc::ENETDOWN)
}

/// Whether `e`, an error of a [`Connection`], reports a failed network link (see `link_errno`)
/// rather than a peer that closed: its node stopped answering, or cannot be reached any more. The
/// proxy engine ends the PE at once then, where a peer that closed gets a grace period.
pub fn link_failed(e: &Error) -> bool {
    e.errno().is_some_and(link_errno)
}

/// The symbolic name of an errno a connection may end with.
fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EHOSTDOWN => "EHOSTDOWN",
        libc::ENETDOWN => "ENETDOWN",
        libc::ECONNRESET => "ECONNRESET",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::EPIPE => "EPIPE",
        _ => "errno",
    }
}

/// The error of a connection whose receive (`sending` None) or send of a frame (`sending`: what it
/// was) failed with `e`; `who` names the peer PE and its address. An errno is named (its text, symbol
/// and number); a failed link says so, and what it means.
fn io_failure(who: &str, sending: Option<String>, e: &io::Error) -> Error {
    let doing = match &sending {
        Some(frame) => format!("sending a {frame} to {who}"),
        None => format!("reading from {who}"),
    };
    let Some(n) = e.raw_os_error() else {
        return Error::new(format!("transport: {doing}: {e}"));
    };
    // "Connection timed out (os error 110)" -> "connection timed out".
    let text = io::Error::from_raw_os_error(n).to_string();
    let text = text.rsplit_once(" (os error").map_or(text.as_str(), |(t, _)| t);
    let mut chars = text.chars();
    let text: String = chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default();
    let errno = format!("{text} ({}, errno {n})", errno_name(n));
    if !link_errno(n) {
        return Error::with_errno(format!("transport: {doing}: {errno}"), Some(n));
    }
    let meaning = if n == libc::ETIMEDOUT {
        "its node stopped answering (a cut link, a host that froze or lost power, or a firewall that drops the traffic)"
    } else {
        "its node cannot be reached any more (a link or interface went down, its address stopped answering ARP, or a router reported it unreachable)"
    };
    let when = sending.map(|f| format!(" while sending a {f}")).unwrap_or_default();
    Error::with_errno(format!("transport: the network link to {who} failed{when}: {errno}: {meaning}"), Some(n))
}

/// Reads and discards what a peer sent until it closes (at most 200 ms, 1 MiB), so that closing does
/// not reset the connection and destroy the ERROR frame just sent to it.
fn drain(s: &mut TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut scratch = [0u8; 4096];
    let mut total = 0usize;
    while total < (1 << 20) {
        match s.read(&mut scratch) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}

impl Connection {
    /// A connection over `stream` whose hellos were exchanged and checked.
    pub(crate) fn new(stream: TcpStream, me: &Endpoint, peer: u32, peer_max_chunk: u32, lane: u16, peer_addr: SocketAddr) -> Connection {
        let ctx = Context { me: me.pe, peer, npes: me.npes, heap_size: me.heap_size, max_chunk: me.max_chunk };
        // A blocking send returns (EAGAIN) when the peer takes nothing for this long.
        let _ = stream.set_write_timeout(Some(DEFAULT_IO_TIMEOUT));
        Connection {
            stream,
            ctx,
            peer_max_chunk,
            lane,
            peer_addr,
            reader: FrameReader::new(),
            io_timeout: DEFAULT_IO_TIMEOUT,
            read_timeout: None,
            broken: None,
            halves: None,
            awaiting: 0,
            last_sent: None,
            last_frame: None,
            out: Outbox::default(),
            inbuf: InBuf::default(),
        }
    }

    /// The PE on the other end.
    pub fn peer(&self) -> u32 {
        self.ctx.peer
    }
    /// This connection's index among the connections of the pair.
    pub fn lane(&self) -> u16 {
        self.lane
    }
    /// The peer's address: where this side connected, or where the accepted connection came from.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }
    /// The largest payload one frame to the peer may carry (the peer's chunk limit).
    pub fn send_chunk(&self) -> u32 {
        self.peer_max_chunk
    }
    /// Requests sent that await an answer (GET, fetching AMO, QUIET).
    pub fn awaiting(&self) -> u64 {
        self.awaiting
    }
    /// Bounds the wait for the rest of a frame, and for the peer to take what we send.
    pub fn set_io_timeout(&mut self, t: Duration) {
        self.io_timeout = t.max(Duration::from_millis(1));
        let _ = self.stream.set_write_timeout(Some(self.io_timeout));
    }

    fn who(&self) -> String {
        format!("PE {} ({}, connection {})", self.ctx.peer, self.peer_addr, self.lane)
    }

    /// What was in flight, for errors: requests awaiting answers and the last frame sent.
    fn in_flight(&self) -> String {
        let mut s = String::new();
        if self.awaiting > 0 {
            s.push_str(&format!("; {} requests were awaiting an answer", self.awaiting));
        }
        if let Some(h) = &self.last_sent {
            s.push_str(&format!("; last sent: {}", wire::describe(h)));
        }
        s
    }

    fn fail(&mut self, e: Error) -> Error {
        // A peer that closed or reset may be the sign of a failed link the other half saw first.
        let e = if link_failed(&e) { e } else { self.link_cause().unwrap_or(e) };
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(h) = &self.halves {
            h.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| e.clone());
        }
        self.broken = Some(e.clone());
        e
    }

    /// The failed link behind an end of stream, a reset or a broken pipe on one half of a split
    /// connection, when the other half saw it: the kernel reports ETIMEDOUT (or EHOSTUNREACH...) once,
    /// to whichever call on the socket comes first, and every later call sees a closed connection.
    /// Only for a socket that ended abruptly (TCP state CLOSE: a reset, or the kernel gave up on the
    /// link; a peer's orderly close leaves CLOSE_WAIT), and then waits a moment for the other half's
    /// verdict, which it records right after its call returned.
    fn link_cause(&self) -> Option<Error> {
        const TCP_CLOSE: u8 = 7;
        let halves = self.halves.as_ref()?;
        let mut info = [0u8; 8];
        let mut len = info.len() as libc::socklen_t;
        // SAFETY: our open socket; TCP_INFO writes at most `len` bytes into `info`, a live buffer of
        // that size (its first byte is tcpi_state), and sets `len`.
        let r = unsafe { libc::getsockopt(self.stream.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len) };
        if r != 0 || len < 1 || info[0] != TCP_CLOSE {
            return None;
        }
        let until = Instant::now() + Duration::from_millis(200);
        loop {
            if let Some(e) = halves.lock().unwrap_or_else(|p| p.into_inner()).as_ref().filter(|e| link_failed(e)) {
                return Some(e.clone());
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn check_usable(&self) -> Result<()> {
        match &self.broken {
            Some(e) => Err(Error::with_errno(format!("transport: the connection to {} failed earlier: {e}", self.who()), e.errno())),
            None => Ok(()),
        }
    }

    /// Checks a frame as the peer will check it: a frame the peer would refuse is an error here and is
    /// never sent. Returns its kind.
    fn check_out(&self, h: &OpHeader, payload_len: usize) -> Result<Kind> {
        self.check_usable()?;
        let peer_view = Context {
            me: self.ctx.peer,
            peer: self.ctx.me,
            npes: self.ctx.npes,
            heap_size: self.ctx.heap_size,
            max_chunk: self.peer_max_chunk,
        };
        let checked = check_header(h, &peer_view)
            .map_err(|e| Error::new(format!("transport: refusing to send to {}: {e}", self.who())))?;
        if checked.payload_len != payload_len {
            return Err(Error::new(format!(
                "transport: refusing to send to {}: {} header announces {} payload bytes, {} given",
                self.who(),
                checked.kind.name(),
                checked.payload_len,
                payload_len
            )));
        }
        Ok(checked.kind)
    }

    /// Bookkeeping of a frame sent (or queued): answers it awaits, the last frame for errors.
    fn sent(&mut self, h: &OpHeader, kind: Kind) {
        match kind {
            Kind::GetRequest | Kind::Quiet => self.awaiting += 1,
            Kind::Amo if wire::AmoOp::from_u8(h.op).is_some_and(|op| op.fetches()) => self.awaiting += 1,
            _ => {}
        }
        self.last_sent = Some(*h);
    }

    /// Sends one frame: `h` and its payload, after any queued frames. The frame is first checked as
    /// the peer will check it, so a frame the peer would refuse is an error here and never sent.
    pub fn send(&mut self, h: &OpHeader, payload: &[u8]) -> Result<()> {
        let kind = self.check_out(h, payload.len())?;
        self.flush()?;
        if let Err(e) = send_all(&self.stream, &[bytemuck::bytes_of(h), payload], self.io_timeout) {
            let err = io_failure(&self.who(), Some(wire::describe(h)), &e);
            let err = Error::with_errno(format!("{err}{}", self.in_flight()), err.errno());
            return Err(self.fail(err));
        }
        self.sent(h, kind);
        Ok(())
    }

    /// Queues one frame (`h` and its payload, the concatenation of `payload`'s pieces) to go with the
    /// next [`Connection::flush`] (or before the next `send`): many small frames leave in one
    /// `sendmsg`. Checked as `send` checks. Payload pieces larger than a few hundred bytes are not
    /// copied.
    ///
    /// # Safety
    /// The bytes of `payload` must stay valid and unchanged until the next flush or send on this
    /// connection (or its drop).
    pub unsafe fn queue(&mut self, h: &OpHeader, payload: [&[u8]; 2]) -> Result<()> {
        let len = payload[0].len() + payload[1].len();
        let kind = self.check_out(h, len)?;
        let o = &mut self.out;
        let mut own = o.bytes.len();
        o.bytes.extend_from_slice(bytemuck::bytes_of(h));
        for p in payload.iter().filter(|p| !p.is_empty()) {
            if p.len() <= OUTBOX_COPY {
                o.bytes.extend_from_slice(p);
            } else {
                let end = o.bytes.len();
                o.push_own(own..end);
                o.parts.push(Part::Ext(p.as_ptr(), p.len()));
                own = end;
            }
        }
        let end = o.bytes.len();
        o.push_own(own..end);
        o.total += HEADER_LEN + len;
        self.sent(h, kind);
        if self.out.total >= OUTBOX_FLUSH {
            self.flush()?;
        }
        Ok(())
    }

    /// Sends every queued frame (gathered `sendmsg`s, at most `MAX_IOV` pieces each).
    pub fn flush(&mut self) -> Result<()> {
        if self.out.parts.is_empty() {
            return Ok(());
        }
        let o = std::mem::take(&mut self.out);
        let pieces: Vec<&[u8]> = o
            .parts
            .iter()
            .map(|p| match p {
                Part::Own(r) => &o.bytes[r.clone()],
                // SAFETY: `queue`'s contract: the caller keeps these bytes valid until this flush.
                Part::Ext(ptr, n) => unsafe { std::slice::from_raw_parts(*ptr, *n) },
            })
            .filter(|p| !p.is_empty())
            .collect();
        for group in pieces.chunks(MAX_IOV) {
            if let Err(e) = send_all(&self.stream, group, self.io_timeout) {
                let err = io_failure(&self.who(), Some(format!("batch of {} queued bytes", o.total)), &e);
                let err = Error::with_errno(format!("{err}{}", self.in_flight()), err.errno());
                return Err(self.fail(err));
            }
        }
        // Keep the allocation for the next burst.
        let mut bytes = o.bytes;
        bytes.clear();
        let mut parts = o.parts;
        parts.clear();
        self.out = Outbox { bytes, parts, total: 0 };
        Ok(())
    }

    /// Whether a frame (or part of one) can be read without waiting: bytes read ahead, or the socket
    /// readable.
    pub fn ready(&self) -> bool {
        if self.inbuf.start < self.inbuf.end {
            return true;
        }
        let mut fds = [libc::pollfd { fd: self.stream.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        // SAFETY: one valid pollfd for a socket we own, timeout 0 (returns at once).
        unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) > 0 }
    }

    /// Sends a message (see [`Message::encode`]).
    pub fn send_message(&mut self, m: &Message<'_>) -> Result<()> {
        let (h, payload) = m.encode(self.ctx.me);
        self.send(&h, payload)
    }

    /// Queues a message (see [`Connection::queue`]); its payload is copied (a large one is sent at
    /// once, after what is queued).
    pub fn queue_message(&mut self, m: &Message<'_>) -> Result<()> {
        let (h, payload) = m.encode(self.ctx.me);
        if payload.len() > OUTBOX_COPY {
            return self.send(&h, payload);
        }
        // SAFETY: payloads up to OUTBOX_COPY bytes are copied into the outbox, borrowing nothing.
        unsafe { self.queue(&h, [payload, &[]]) }
    }

    /// Sends `data` to heap offset `offset` of the peer, in chunks of at most the peer's limit; with a
    /// signal, the last chunk is a PUT_SIGNAL.
    pub fn put(&mut self, seq: u64, offset: u64, data: &[u8], signal: Option<Signal>) -> Result<()> {
        for c in Chunks::put(self.ctx.me, seq, offset, data.len() as u64, self.peer_max_chunk, signal) {
            self.send(&c.header, &data[c.range])?;
        }
        Ok(())
    }

    /// Answers a GET request: `data` (the heap bytes at `offset`) in chunks.
    pub fn get_response(&mut self, seq: u64, offset: u64, data: &[u8]) -> Result<()> {
        for c in Chunks::get_response(self.ctx.me, seq, offset, data.len() as u64, self.peer_max_chunk) {
            self.send(&c.header, &data[c.range])?;
        }
        Ok(())
    }

    /// Receives one frame, waiting at most the I/O timeout. A peer's ERROR frame comes back as
    /// `Message::Error` (its last word: the connection ends after it).
    pub fn recv(&mut self) -> Result<Message<'_>> {
        let t = self.io_timeout;
        match self.recv_timeout(t)? {
            true => self.current(),
            false => Err(Error::new(format!(
                "transport: no frame from {} within {t:?}{}",
                self.who(),
                self.in_flight()
            ))),
        }
    }

    /// Waits at most `idle` for a frame to start (then at most the I/O timeout for the rest of it).
    /// `Ok(false)`: nothing arrived, the connection is still in step. After `Ok(true)`,
    /// [`Connection::current`] gives the frame.
    pub fn recv_timeout(&mut self, idle: Duration) -> Result<bool> {
        self.check_usable()?;
        let idle = idle.max(Duration::from_millis(1));
        if self.inbuf.start == self.inbuf.end {
            // Soon after a frame, poll the socket before sleeping in `read` (see `poll_briefly`).
            let mut fds = [libc::pollfd { fd: self.stream.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
            poll_briefly(self.last_frame, || {
                fds[0].revents = 0;
                // SAFETY: one valid pollfd for a socket we own, timeout 0 (returns at once). Readable,
                // an error or a hangup all end the poll; the read reports them.
                unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) != 0 }
            });
        }
        // The first byte may take `idle`; once a frame started, the rest gets the I/O timeout.
        let mut timed = TimedRead { s: &self.stream, buf: &mut self.inbuf, set: &mut self.read_timeout, started: false, io_timeout: self.io_timeout, idle };
        let res = self.reader.read_frame(&mut timed, &self.ctx);
        match res {
            Ok(()) => {
                self.last_frame = Some(Instant::now());
                let h = self.reader.last_header();
                let answers = match Kind::from_u8(h.kind) {
                    Some(Kind::GetResponse) => h.flags & wire::FLAG_LAST != 0,
                    Some(Kind::AmoResponse | Kind::QuietAck) => true,
                    _ => false,
                };
                if answers {
                    self.awaiting = self.awaiting.saturating_sub(1);
                }
                Ok(true)
            }
            Err(ReadError::Idle) => Ok(false),
            Err(e) => Err(self.read_failed(e)),
        }
    }

    /// The frame the last successful receive read.
    pub fn current(&self) -> Result<Message<'_>> {
        self.reader.current(&self.ctx)
    }

    fn read_failed(&mut self, e: ReadError) -> Error {
        let who = self.who();
        let flight = self.in_flight();
        let err = match e {
            ReadError::Closed => Error::new(format!("transport: {who} closed the connection{flight}")),
            ReadError::Idle => Error::new(format!("transport: no frame from {who}")),
            ReadError::Truncated { what, got, want } => Error::new(format!(
                "transport: {who} closed the connection in the middle of a {what} ({got} of {want} bytes arrived){flight}"
            )),
            ReadError::Stalled { what, got, want } => Error::new(format!(
                "transport: {who} sent nothing for {:?} in the middle of a {what} ({got} of {want} bytes arrived){flight}",
                self.io_timeout
            )),
            ReadError::Io(e) => {
                let err = io_failure(&who, None, &e);
                Error::with_errno(format!("{err}{flight}"), err.errno())
            }
            ReadError::Invalid(e) => {
                // Tell the peer why it is cut off, then drop it.
                let text = format!("PE {} dropped the connection: {e}", self.ctx.me);
                let msg = Message::Error { text };
                let (h, payload) = msg.encode(self.ctx.me);
                let _ = send_all(&self.stream, &[bytemuck::bytes_of(&h), payload], Duration::from_secs(1));
                let _ = self.stream.shutdown(Shutdown::Write);
                // Unread bytes at close would make the kernel reset the connection, which can
                // destroy the ERROR frame before the peer reads it.
                drain(&mut self.stream);
                Error::new(format!("transport: dropped the connection to {who}: {e}"))
            }
        };
        self.fail(err)
    }

    /// Splits the connection into a sending half and a receiving half over the same socket (for a
    /// proxy whose sender and receiver are different threads). Each half keeps its own bookkeeping;
    /// a failure of either shuts the socket down, so the other half fails too.
    pub fn split(self) -> Result<(Connection, Connection)> {
        self.check_usable()?;
        let stream = self.stream.try_clone().map_err(|e| Error::os(format!("transport: splitting the connection to {}", self.who()), e))?;
        let halves = Some(Arc::new(Mutex::new(None)));
        let tx = Connection { halves: halves.clone(), ..self };
        let rx = Connection {
            stream,
            ctx: tx.ctx,
            peer_max_chunk: tx.peer_max_chunk,
            lane: tx.lane,
            peer_addr: tx.peer_addr,
            reader: FrameReader::new(),
            io_timeout: tx.io_timeout,
            read_timeout: None,
            broken: None,
            halves,
            awaiting: 0,
            last_sent: None,
            last_frame: None,
            out: Outbox::default(),
            inbuf: InBuf::default(),
        };
        Ok((tx, rx))
    }

    /// Detects a peer host that vanished without closing (power loss, cable, a frozen node): TCP
    /// keepalive probes after `idle` of silence, every `idle`, 3 unanswered ones end the connection
    /// (about `4 * idle` while the connection is quiet); data that stays unacknowledged (or unsent
    /// for a zero window) for `user_timeout` ends it too (TCP_USER_TIMEOUT). Keep `user_timeout`
    /// well above the longest time the peer's receiver may legitimately stop reading. A dead
    /// *process* is seen at once (its kernel closes the socket); this bounds the rest.
    pub fn set_liveness(&self, idle: Duration, user_timeout: Duration) -> Result<()> {
        let fd = self.stream.as_raw_fd();
        let secs = idle.as_secs().max(1) as libc::c_int;
        let user_ms = user_timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        for (level, name, v, what) in [
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1, "SO_KEEPALIVE"),
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs, "TCP_KEEPIDLE"),
            (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, secs, "TCP_KEEPINTVL"),
            (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3, "TCP_KEEPCNT"),
            (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, user_ms, "TCP_USER_TIMEOUT"),
        ] {
            // SAFETY: fd is our open socket; the option value is a live c_int of the size passed.
            let r = unsafe {
                libc::setsockopt(fd, level, name, &v as *const libc::c_int as *const libc::c_void, std::mem::size_of::<libc::c_int>() as libc::socklen_t)
            };
            if r != 0 {
                return Err(Error::os(format!("transport: {what} on the connection to {}", self.who()), io::Error::last_os_error()));
            }
        }
        Ok(())
    }

    /// Stops sending (the peer reads end-of-stream after what was sent); the receiving half of a
    /// split connection keeps reading.
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// Ends the connection: a CLOSE frame, then no more sending.
    pub fn close(mut self) -> Result<()> {
        self.send_message(&Message::Close)?;
        let _ = self.stream.shutdown(Shutdown::Write);
        Ok(())
    }
}

/// A reader over the socket, through the connection's read-ahead buffer, that waits at most the idle
/// timeout for the first byte of a frame and the I/O timeout for the rest. The socket's read timeout
/// is set only when the socket is read and the wanted timeout differs from the one set.
struct TimedRead<'a> {
    s: &'a TcpStream,
    buf: &'a mut InBuf,
    /// The read timeout set on the socket now.
    set: &'a mut Option<Duration>,
    started: bool,
    io_timeout: Duration,
    idle: Duration,
}

impl Read for TimedRead<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let b = &mut *self.buf;
        if b.start == b.end {
            let want = if self.started { self.io_timeout } else { self.idle };
            if *self.set != Some(want) {
                self.s.set_read_timeout(Some(want))?;
                *self.set = Some(want);
            }
            if out.len() >= b.buf.len() {
                // A large payload: straight into the caller's buffer.
                let n = (&*self.s).read(out)?;
                self.started |= n > 0;
                return Ok(n);
            }
            let n = (&*self.s).read(&mut b.buf)?;
            (b.start, b.end) = (0, n);
            if n == 0 {
                return Ok(0);
            }
        }
        let n = out.len().min(b.end - b.start);
        out[..n].copy_from_slice(&b.buf[b.start..b.start + n]);
        b.start += n;
        self.started |= n > 0;
        Ok(n)
    }
}

const _: () = assert!(HEADER_LEN == HELLO_LEN);
/// Whether the proxy's threads poll briefly before they sleep (`RSHMEM_PROXY_SPIN`: on, off, or auto,
/// the default: when this process may use at least 8 CPUs). On the 2-core CI machine always-on polling
/// made remote latencies 3 to 4 times worse (the polling threads took the CPUs the PEs' threads
/// needed). Read once per process (init validated the value).
pub(crate) fn busy_poll() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        let v = crate::config::env::get(crate::config::env::PROXY_SPIN).map(|v| crate::config::env::parse_proxy_spin(&v));
        match v {
            Some(Ok(Some(on))) => on,
            Some(Err(_)) => false,
            None | Some(Ok(None)) => std::thread::available_parallelism().is_ok_and(|n| n.get() >= 8),
        }
    })
}

/// The proxy's threads (a receiver reading its socket, a responder its job queue) wait for the next
/// event this way before they sleep: within BUSY_WINDOW of the previous event (`last`), and when
/// polling is on (`busy_poll`), `ready` is polled without sleeping for up to BUSY_SPIN. A sleeping
/// thread is woken by the scheduler, which adds several microseconds to every hop of a request and its
/// answer (a remote `p` + `quiet` is four hops); on a busy link the poll usually sees the next event
/// first, and an idle link sleeps at once. Returns whether `ready` said yes.
pub(crate) fn poll_briefly(last: Option<std::time::Instant>, mut ready: impl FnMut() -> bool) -> bool {
    const BUSY_WINDOW: std::time::Duration = std::time::Duration::from_millis(1);
    const BUSY_SPIN: std::time::Duration = std::time::Duration::from_micros(50);
    if last.is_none_or(|t| t.elapsed() >= BUSY_WINDOW) || !busy_poll() {
        return false;
    }
    let start = std::time::Instant::now();
    while start.elapsed() < BUSY_SPIN {
        if ready() {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}
