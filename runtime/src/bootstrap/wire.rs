//! Wire format of the bootstrap and the socket plumbing under it.
//!
//! Every message is one frame: a 9-byte header (kind: u8, body length: u64 little-endian) and the body.
//! The reader checks the kind against the kinds expected at that point and the length against a
//! per-kind limit before it allocates anything, so garbage on a socket gives a clear error, not a
//! huge allocation or a hang; and the body buffer grows with the bytes that actually arrive, so a
//! header that announces a large frame costs nothing until the bytes follow. Every count and length
//! inside a body is checked against what is left of the body before it is used. Integers in bodies
//! are little-endian; strings are a u16 length and UTF-8 bytes; payloads a u64 length and the bytes.

use super::auth::{NONCE, PROOF};
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// First bytes of a hello: identifies an rshmem bootstrap client.
pub(super) const MAGIC: [u8; 4] = *b"RSHM";
/// Bumped on any incompatible change of the messages below.
/// Version 2: the hello carries the launcher's job identity.
/// Version 3: the hello carries a nonce instead of the job key; PE 0 answers with a challenge (its
/// nonce and its proof of the key), the PE with its proof (auth.rs).
pub(super) const VERSION: u32 = 3;
/// Versions before 3 carried the job key in clear at bytes 8..24 of the hello.
const LAST_CLEAR_KEY_VERSION: u32 = 2;
/// Largest payload of one PE in one collective.
pub(super) const MAX_PAYLOAD: usize = 1 << 30;
/// Largest text message (errors, refusals), and the most of a call name we put on the wire.
pub(super) const MAX_TEXT: usize = 64 << 10;
pub(super) const MAX_CALL: usize = 1024;
/// Largest host name / boot id we accept.
pub(super) const MAX_HOSTNAME: usize = 1024;
pub(super) const MAX_BOOT_ID: usize = 128;
/// Largest job identity (launcher's job id, e.g. "Slurm job 1234.0").
pub(super) const MAX_JOB_ID: usize = 256;
/// Largest hello (magic, version, nonce, pe, npes, host identity, job identity).
pub(super) const MAX_HELLO: usize = 4 + 4 + 16 + 4 + 4 + 2 + MAX_HOSTNAME + 2 + MAX_BOOT_ID + 2 + MAX_JOB_ID;
/// The first allocation for a frame body; it then grows (doubling) as the bytes arrive.
const BODY_CHUNK: usize = 64 << 10;
pub(super) const HEADER: usize = 9;

// Frame kinds. PE -> root: HELLO, PROOF, REFUSE (PE 0's proof failed), REQUEST, ABORT. Root -> PE:
// CHALLENGE, WELCOME, REFUSE, BUSY, ERROR, RESULT.
pub(super) const K_HELLO: u8 = 1;
pub(super) const K_WELCOME: u8 = 2;
pub(super) const K_REFUSE: u8 = 3;
pub(super) const K_ERROR: u8 = 4;
pub(super) const K_REQUEST: u8 = 5;
pub(super) const K_RESULT: u8 = 6;
pub(super) const K_ABORT: u8 = 7;
pub(super) const K_CHALLENGE: u8 = 8;
pub(super) const K_PROOF: u8 = 9;
/// PE 0 dropped the connection unidentified because of a flood of connections; the PE may retry.
pub(super) const K_BUSY: u8 = 10;
/// Largest REFUSE a PE sends PE 0 (its proof did not check).
pub(super) const MAX_LEAF_REFUSE: usize = 1024;

pub(super) fn kind_name(kind: u8) -> &'static str {
    match kind {
        K_HELLO => "hello",
        K_WELCOME => "welcome",
        K_REFUSE => "refusal",
        K_ERROR => "error",
        K_REQUEST => "collective request",
        K_RESULT => "collective result",
        K_ABORT => "abort",
        K_CHALLENGE => "challenge",
        K_PROOF => "proof",
        K_BUSY => "busy",
        _ => "unknown",
    }
}

/// The operation of a collective; part of what all PEs must agree on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Op {
    Allgather,
    Broadcast(usize),
    Barrier,
}

impl Op {
    fn code(self) -> (u8, u32) {
        match self {
            Op::Allgather => (1, 0),
            Op::Broadcast(root) => (2, root as u32),
            Op::Barrier => (3, 0),
        }
    }
    fn from_code(code: u8, root: u32) -> Option<Op> {
        match code {
            1 => Some(Op::Allgather),
            2 => Some(Op::Broadcast(root as usize)),
            3 => Some(Op::Barrier),
            _ => None,
        }
    }
    pub(super) fn describe(self) -> String {
        match self {
            Op::Allgather => "allgather".into(),
            Op::Broadcast(root) => format!("broadcast from PE {root}"),
            Op::Barrier => "barrier".into(),
        }
    }
}

/// Who a PE is: PEs with equal identities share a node (and its memory).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(super) struct HostId {
    pub hostname: String,
    pub boot_id: String,
}

/// Builds one frame.
pub(super) struct FrameBuf(Vec<u8>);

impl FrameBuf {
    pub(super) fn new(kind: u8, capacity: usize) -> FrameBuf {
        let mut v = Vec::with_capacity(HEADER + capacity);
        v.push(kind);
        v.extend_from_slice(&[0u8; 8]);
        FrameBuf(v)
    }
    pub(super) fn u8(&mut self, x: u8) -> &mut Self {
        self.0.push(x);
        self
    }
    pub(super) fn u32(&mut self, x: u32) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    pub(super) fn u64(&mut self, x: u64) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    pub(super) fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    /// A string of at most `max` bytes (cut at a character boundary).
    pub(super) fn str16(&mut self, s: &str, max: usize) -> &mut Self {
        let s = truncate(s, max.min(u16::MAX as usize));
        self.0.extend_from_slice(&(s.len() as u16).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    pub(super) fn bytes64(&mut self, b: &[u8]) -> &mut Self {
        self.u64(b.len() as u64);
        self.raw(b)
    }
    pub(super) fn finish(mut self) -> Vec<u8> {
        let len = (self.0.len() - HEADER) as u64;
        self.0[1..HEADER].copy_from_slice(&len.to_le_bytes());
        self.0
    }
}

/// Seconds for messages: "30", "0.5".
pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{}", (s * 1000.0).round() / 1000.0)
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary (shared with the
/// proxy's wire, which carries peer text the same way).
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Parses a frame body; every read is bounds-checked and names what was being read.
pub(super) struct BodyReader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> BodyReader<'a> {
    pub(super) fn new(buf: &'a [u8], what: &'static str) -> BodyReader<'a> {
        BodyReader { buf, pos: 0, what }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.buf.len() - self.pos < n {
            return Err(format!(
                "truncated {} ({} bytes, needed {} more at offset {})",
                self.what,
                self.buf.len(),
                n,
                self.pos
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub(super) fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub(super) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    pub(super) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    pub(super) fn str16(&mut self, max: usize) -> Result<String, String> {
        let n = u16::from_le_bytes(self.take(2)?.try_into().unwrap()) as usize;
        if n > max {
            return Err(format!("string of {n} bytes in {} (limit {max})", self.what));
        }
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| format!("invalid UTF-8 in {}", self.what))
    }
    pub(super) fn bytes64(&mut self, max: usize) -> Result<&'a [u8], String> {
        let n = self.u64()?;
        if n > max as u64 {
            return Err(format!("payload of {n} bytes in {} (limit {max})", self.what));
        }
        self.take(n as usize)
    }
    pub(super) fn pos(&self) -> usize {
        self.pos
    }
    /// Bytes not read yet.
    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub(super) fn end(&self) -> Result<(), String> {
        if self.pos != self.buf.len() {
            return Err(format!("{} trailing bytes after the {}", self.buf.len() - self.pos, self.what));
        }
        Ok(())
    }
}

// ---- messages ----

#[derive(Debug, PartialEq)]
pub(super) struct Hello {
    /// The PE's fresh random nonce (auth.rs).
    pub nonce: [u8; NONCE],
    pub pe: usize,
    pub npes: usize,
    pub host: HostId,
    /// The launcher's identity of the job ("" when the launcher gives none): two jobs that happen to
    /// share a key (and a port) are still told apart.
    pub job: String,
}

pub(super) fn encode_hello(nonce: &[u8; NONCE], pe: usize, npes: usize, host: &HostId, job: &str) -> Vec<u8> {
    let mut f = FrameBuf::new(K_HELLO, MAX_HELLO);
    f.raw(&MAGIC)
        .u32(VERSION)
        .raw(nonce)
        .u32(pe as u32)
        .u32(npes as u32)
        .str16(&host.hostname, MAX_HOSTNAME)
        .str16(&host.boot_id, MAX_BOOT_ID)
        .str16(job, MAX_JOB_ID);
    f.finish()
}

/// What a hello says, as far as it could be read. Magic and version sit at fixed offsets in every
/// protocol version, so a peer of another version can still be told apart from a stranger.
pub(super) enum HelloParse {
    /// Not an rshmem bootstrap client at all.
    NotRshmem,
    /// An rshmem client of another protocol version. Versions before 3 sent the job key in clear
    /// (`clear_key`), which tells "another job" from "another build"; later versions cannot be checked.
    OtherVersion {
        version: u32,
        clear_key: Option<[u8; 16]>,
    },
    Ok(Hello),
    Garbled(String),
}

pub(super) fn decode_hello(body: &[u8]) -> HelloParse {
    if body.len() < 24 || body[..4] != MAGIC {
        return HelloParse::NotRshmem;
    }
    let version = u32::from_le_bytes(body[4..8].try_into().unwrap());
    let nonce: [u8; NONCE] = body[8..24].try_into().unwrap();
    if version != VERSION {
        let clear_key = (version <= LAST_CLEAR_KEY_VERSION).then_some(nonce);
        return HelloParse::OtherVersion { version, clear_key };
    }
    let mut r = BodyReader::new(&body[24..], "hello");
    let parsed = (|| -> Result<Hello, String> {
        let pe = r.u32()? as usize;
        let npes = r.u32()? as usize;
        let hostname = r.str16(MAX_HOSTNAME)?;
        let boot_id = r.str16(MAX_BOOT_ID)?;
        let job = r.str16(MAX_JOB_ID)?;
        r.end()?;
        Ok(Hello { nonce, pe, npes, host: HostId { hostname, boot_id }, job })
    })();
    match parsed {
        Ok(h) => HelloParse::Ok(h),
        Err(e) => HelloParse::Garbled(e),
    }
}

/// CHALLENGE: PE 0's nonce and its proof of the key.
pub(super) fn encode_challenge(nonce: &[u8; NONCE], proof: &[u8; PROOF]) -> Vec<u8> {
    let mut f = FrameBuf::new(K_CHALLENGE, NONCE + PROOF);
    f.raw(nonce).raw(proof);
    f.finish()
}

pub(super) fn decode_challenge(body: &[u8]) -> Result<([u8; NONCE], [u8; PROOF]), String> {
    if body.len() != NONCE + PROOF {
        return Err(format!("challenge of {} bytes, expected {}", body.len(), NONCE + PROOF));
    }
    Ok((body[..NONCE].try_into().unwrap(), body[NONCE..].try_into().unwrap()))
}

/// PROOF: a PE's answer to the challenge.
pub(super) fn encode_proof(proof: &[u8; PROOF]) -> Vec<u8> {
    let mut f = FrameBuf::new(K_PROOF, PROOF);
    f.raw(proof);
    f.finish()
}

pub(super) fn decode_proof(body: &[u8]) -> Result<[u8; PROOF], String> {
    body.try_into().map_err(|_| format!("proof of {} bytes, expected {PROOF}", body.len()))
}

pub(super) fn encode_welcome(hosts: &[HostId]) -> Vec<u8> {
    let mut f = FrameBuf::new(K_WELCOME, hosts.len() * 64);
    f.u32(hosts.len() as u32);
    for h in hosts {
        f.str16(&h.hostname, MAX_HOSTNAME).str16(&h.boot_id, MAX_BOOT_ID);
    }
    f.finish()
}

pub(super) fn decode_welcome(body: &[u8], npes: usize) -> Result<Vec<HostId>, String> {
    let mut r = BodyReader::new(body, "welcome");
    let n = r.u32()? as usize;
    if n != npes {
        return Err(format!("welcome lists {n} PEs, expected {npes}"));
    }
    // Each entry takes at least 4 bytes: never reserve more than the body can hold.
    let mut hosts = Vec::with_capacity(n.min(r.remaining() / 4));
    for _ in 0..n {
        let hostname = r.str16(MAX_HOSTNAME)?;
        let boot_id = r.str16(MAX_BOOT_ID)?;
        hosts.push(HostId { hostname, boot_id });
    }
    r.end()?;
    Ok(hosts)
}

pub(super) fn max_welcome(npes: usize) -> usize {
    4usize.saturating_add(npes.saturating_mul(4 + MAX_HOSTNAME + MAX_BOOT_ID))
}

/// A text frame (REFUSE, BUSY, ERROR, ABORT).
pub(super) fn encode_text(kind: u8, text: &str) -> Vec<u8> {
    let t = truncate(text, MAX_TEXT);
    let mut f = FrameBuf::new(kind, t.len());
    f.raw(t.as_bytes());
    f.finish()
}

/// The text of a REFUSE/BUSY/ERROR/ABORT frame, with control characters (other than newline and tab)
/// replaced, so that a peer's message cannot drive the terminal it is printed on.
pub(super) fn decode_text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { '?' } else { c }).collect()
}

pub(super) struct Request {
    pub seq: u64,
    pub op: Op,
    pub call: String,
    pub payload: Vec<u8>,
}

pub(super) fn encode_request(seq: u64, op: Op, call: &str, payload: &[u8]) -> Vec<u8> {
    let (code, root) = op.code();
    let mut f = FrameBuf::new(K_REQUEST, 8 + 1 + 4 + 2 + call.len().min(MAX_CALL) + 8 + payload.len());
    f.u64(seq).u8(code).u32(root).str16(call, MAX_CALL).bytes64(payload);
    f.finish()
}

pub(super) const MAX_REQUEST: usize = 8 + 1 + 4 + 2 + MAX_CALL + 8 + MAX_PAYLOAD;

pub(super) fn decode_request(mut body: Vec<u8>) -> Result<Request, String> {
    let mut r = BodyReader::new(&body, "collective request");
    let seq = r.u64()?;
    let code = r.u8()?;
    let root = r.u32()?;
    let op = Op::from_code(code, root).ok_or_else(|| format!("unknown collective operation code {code}"))?;
    let call = r.str16(MAX_CALL)?;
    let n = r.bytes64(MAX_PAYLOAD)?.len();
    r.end()?;
    let start = r.pos() - n;
    // The payload is the tail of the body: keep the allocation, drop the fields in front.
    body.drain(..start);
    Ok(Request { seq, op, call, payload: body })
}

/// RESULT: the sequence number and the parts (allgather: one per PE; broadcast: one; barrier: none).
pub(super) fn encode_result(seq: u64, parts: &[&[u8]]) -> Vec<u8> {
    let total: usize = parts.iter().map(|p| p.len() + 8).sum();
    let mut f = FrameBuf::new(K_RESULT, 12 + total);
    f.u64(seq).u32(parts.len() as u32);
    for p in parts {
        f.bytes64(p);
    }
    f.finish()
}

pub(super) fn max_result(npes: usize) -> usize {
    12usize.saturating_add(npes.saturating_mul(MAX_PAYLOAD + 8))
}

pub(super) fn decode_result(body: &[u8]) -> Result<(u64, Vec<Vec<u8>>), String> {
    let mut r = BodyReader::new(body, "collective result");
    let seq = r.u64()?;
    let n = r.u32()? as usize;
    // Each part takes at least its 8-byte length: never reserve more than the body can hold.
    let mut parts = Vec::with_capacity(n.min(r.remaining() / 8));
    for _ in 0..n {
        parts.push(r.bytes64(MAX_PAYLOAD)?.to_vec());
    }
    r.end()?;
    Ok((seq, parts))
}

// ---- what each side expects, and how large ----

/// PE 0, from a connection that has not said hello yet.
pub(super) fn hello_limit(kind: u8) -> Option<usize> {
    (kind == K_HELLO).then_some(MAX_HELLO)
}

/// PE 0, from a connection it has sent its challenge: the PE's proof, or its refusal of PE 0's proof.
pub(super) fn proof_limit(kind: u8) -> Option<usize> {
    match kind {
        K_PROOF => Some(PROOF),
        K_REFUSE => Some(MAX_LEAF_REFUSE),
        _ => None,
    }
}

/// PE 0, from a PE that has joined: its collective requests, or its abort.
pub(super) fn peer_limit(kind: u8) -> Option<usize> {
    match kind {
        K_REQUEST => Some(MAX_REQUEST),
        K_ABORT => Some(MAX_TEXT),
        _ => None,
    }
}

/// A PE, from PE 0 during the handshake: the challenge, the welcome, a refusal, a flood notice or an
/// error.
pub(super) fn handshake_limit(npes: usize) -> impl Fn(u8) -> Option<usize> {
    move |kind| match kind {
        K_CHALLENGE => Some(NONCE + PROOF),
        K_WELCOME => Some(max_welcome(npes)),
        K_REFUSE | K_ERROR | K_BUSY => Some(MAX_TEXT),
        _ => None,
    }
}

/// A PE, from PE 0 after the handshake: a collective's result or an error.
pub(super) fn result_limit(npes: usize) -> impl Fn(u8) -> Option<usize> {
    move |kind| match kind {
        K_RESULT => Some(max_result(npes)),
        K_ERROR => Some(MAX_TEXT),
        _ => None,
    }
}

// ---- reading frames ----

pub(super) enum Pumped {
    Frame(u8, Vec<u8>),
    /// Nothing more to read now (non-blocking socket, or a read timeout expired).
    Pending,
    /// The peer closed the connection.
    Eof,
}

pub(super) enum ReadFail {
    Io(io::Error),
    /// The bytes are not a frame we expect here.
    Bad(String),
}

/// Reads frames incrementally from a socket, blocking or not.
#[derive(Default)]
pub(super) struct FrameReader {
    hdr: [u8; HEADER],
    hdr_got: usize,
    kind: u8,
    /// The body's length (from the header, checked against the kind's limit).
    len: usize,
    /// Received body bytes are `body[..body_got]`; `body` grows ahead of them by at most doubling.
    body: Vec<u8>,
    body_got: usize,
    in_body: bool,
}

impl FrameReader {
    /// Whether part of a frame has arrived and waits for the rest.
    pub(super) fn started(&self) -> bool {
        self.hdr_got > 0 || self.in_body
    }

    /// Reads until a whole frame is in, the socket has nothing more (`Pending`) or is closed.
    /// `limit(kind)` gives the largest body accepted for a kind, None for kinds not expected here.
    pub(super) fn pump(&mut self, s: &mut impl Read, limit: &dyn Fn(u8) -> Option<usize>) -> Result<Pumped, ReadFail> {
        loop {
            let res = if !self.in_body {
                if self.hdr_got == HEADER {
                    let kind = self.hdr[0];
                    let len = u64::from_le_bytes(self.hdr[1..].try_into().unwrap());
                    let max = limit(kind)
                        .ok_or_else(|| ReadFail::Bad(format!("unexpected frame kind {kind} ({})", kind_name(kind))))?;
                    if len > max as u64 {
                        return Err(ReadFail::Bad(format!(
                            "{} frame of {len} bytes exceeds the limit of {max}",
                            kind_name(kind)
                        )));
                    }
                    self.kind = kind;
                    self.len = len as usize;
                    self.body = Vec::new();
                    self.body_got = 0;
                    self.in_body = true;
                    continue;
                }
                s.read(&mut self.hdr[self.hdr_got..])
            } else {
                if self.body_got == self.len {
                    self.in_body = false;
                    self.hdr_got = 0;
                    let mut body = std::mem::take(&mut self.body);
                    body.truncate(self.len);
                    return Ok(Pumped::Frame(self.kind, body));
                }
                if self.body_got == self.body.len() {
                    // Room for more: at most as much again as has arrived (or one chunk), never past
                    // the frame's end. A header announcing 1 GiB followed by silence costs 64 KiB.
                    let room = self.len.min(self.body_got.saturating_mul(2).max(BODY_CHUNK));
                    self.body.resize(room, 0);
                }
                s.read(&mut self.body[self.body_got..])
            };
            match res {
                Ok(0) => return Ok(Pumped::Eof),
                Ok(n) if self.in_body => self.body_got += n,
                Ok(n) => self.hdr_got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Ok(Pumped::Pending)
                }
                Err(e) => return Err(ReadFail::Io(e)),
            }
        }
    }
}

// ---- socket helpers ----

/// Sends all of `buf` (blocking or non-blocking socket) without raising SIGPIPE when the peer is gone
/// (a C program linking the library keeps the default SIGPIPE action, which would kill it).
/// `timeout` bounds the wait for buffer space; None waits as long as it takes.
pub(super) fn send_all(s: &TcpStream, mut buf: &[u8], timeout: Option<Duration>) -> io::Result<()> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let fd = s.as_raw_fd();
    while !buf.is_empty() {
        // SAFETY: `fd` is the open socket of `s`, borrowed for the call; `buf` is a valid readable
        // slice of `buf.len()` bytes.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n >= 0 {
            buf = &buf[n as usize..];
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                let wait = match deadline {
                    None => None,
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            return Err(io::Error::new(io::ErrorKind::TimedOut, "peer is not reading"));
                        }
                        Some(d - now)
                    }
                };
                let mut p = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
                poll(&mut p, wait)?;
            }
            _ => return Err(e),
        }
    }
    Ok(())
}

/// poll(2) on `fds`; `timeout` None waits forever. Returns the number of ready descriptors (0 on
/// timeout or when interrupted by a signal: callers loop).
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ms: libc::c_int = match timeout {
        None => -1,
        // Round up so that a short remaining time does not become a busy loop of 0 ms polls.
        Some(t) => t.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int,
    };
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd structures.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

pub(super) fn pollfd(s: &impl AsRawFd) -> libc::pollfd {
    libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 }
}

/// TCP_NODELAY (collectives are small request/reply exchanges) and keepalive (so that a peer host
/// that vanishes without closing the connection is noticed within minutes, not never).
pub(super) fn tune(s: &TcpStream) {
    if let Err(e) = s.set_nodelay(true) {
        crate::log::debug(format!("bootstrap: TCP_NODELAY: {e}"));
    }
    let fd = s.as_raw_fd();
    for (level, opt, val) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 60),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6),
    ] {
        let v: libc::c_int = val;
        // SAFETY: `fd` is the open socket of `s`; the option value is a c_int of the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            crate::log::debug(format!("bootstrap: setsockopt({level}, {opt}): {}", io::Error::last_os_error()));
        }
    }
}

/// Reads and discards what a peer has sent, without blocking (bounded), so that closing the socket
/// does not turn into a reset that could destroy the error message just sent to that peer.
pub(super) fn drain(s: &mut TcpStream) {
    if s.set_nonblocking(true).is_err() {
        return;
    }
    let mut scratch = [0u8; 16384];
    let mut total = 0usize;
    while total < (64 << 20) {
        match s.read(&mut scratch) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_kinds(k: u8) -> Option<usize> {
        match k {
            1..=10 => Some(1 << 20),
            _ => None,
        }
    }

    fn read_one(bytes: &[u8]) -> Result<Pumped, ReadFail> {
        let mut r = FrameReader::default();
        let mut src = bytes;
        r.pump(&mut src, &all_kinds)
    }

    #[test]
    fn request_round_trip() {
        let payload: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let f = encode_request(7, Op::Broadcast(3), "rshmem_malloc", &payload);
        let Ok(Pumped::Frame(K_REQUEST, body)) = read_one(&f) else { panic!("no frame") };
        let req = decode_request(body).unwrap();
        assert_eq!(req.seq, 7);
        assert_eq!(req.op, Op::Broadcast(3));
        assert_eq!(req.call, "rshmem_malloc");
        assert_eq!(req.payload, payload);
    }

    #[test]
    fn result_round_trip() {
        let parts: [&[u8]; 3] = [b"", b"abc", &[9u8; 5000]];
        let f = encode_result(42, &parts);
        let Ok(Pumped::Frame(K_RESULT, body)) = read_one(&f) else { panic!("no frame") };
        let (seq, got) = decode_result(&body).unwrap();
        assert_eq!(seq, 42);
        assert_eq!(got.len(), 3);
        for (a, b) in got.iter().zip(parts) {
            assert_eq!(a.as_slice(), b);
        }
    }

    #[test]
    fn hello_and_welcome_round_trip() {
        let host = HostId { hostname: "node7".into(), boot_id: "abc-def".into() };
        let f = encode_hello(&[5u8; 16], 3, 8, &host, "Slurm job 12.0");
        let Ok(Pumped::Frame(K_HELLO, body)) = read_one(&f) else { panic!("no frame") };
        let HelloParse::Ok(h) = decode_hello(&body) else { panic!("bad hello") };
        assert_eq!((h.pe, h.npes, h.nonce, h.job.as_str()), (3, 8, [5u8; 16], "Slurm job 12.0"));
        assert_eq!(h.host, host);
        let mut other = body.clone();
        other[4] = 99;
        assert!(matches!(decode_hello(&other), HelloParse::OtherVersion { version: 99, clear_key: None }));
        // Version 2 carried the key in clear where the nonce is now.
        other[4] = 2;
        assert!(matches!(decode_hello(&other), HelloParse::OtherVersion { version: 2, clear_key: Some(k) } if k == [5u8; 16]));

        let f = encode_challenge(&[1u8; NONCE], &[2u8; PROOF]);
        let Ok(Pumped::Frame(K_CHALLENGE, body)) = read_one(&f) else { panic!("no frame") };
        assert_eq!(decode_challenge(&body).unwrap(), ([1u8; NONCE], [2u8; PROOF]));
        assert!(decode_challenge(&body[1..]).is_err());
        let f = encode_proof(&[3u8; PROOF]);
        let Ok(Pumped::Frame(K_PROOF, body)) = read_one(&f) else { panic!("no frame") };
        assert_eq!(decode_proof(&body).unwrap(), [3u8; PROOF]);
        assert!(decode_proof(&body[1..]).is_err());
        assert!(matches!(decode_hello(b"GET / HTTP/1.1\r\n\r\n......"), HelloParse::NotRshmem));

        let hosts = vec![host.clone(), HostId { hostname: "n2".into(), boot_id: String::new() }];
        let f = encode_welcome(&hosts);
        let Ok(Pumped::Frame(K_WELCOME, body)) = read_one(&f) else { panic!("no frame") };
        assert_eq!(decode_welcome(&body, 2).unwrap(), hosts);
        assert!(decode_welcome(&body, 3).is_err());
    }

    #[test]
    fn garbage_is_rejected() {
        // Unknown kind.
        assert!(matches!(read_one(b"\x63\x01\0\0\0\0\0\0\0x"), Err(ReadFail::Bad(_))));
        // Length over the limit.
        let mut h = vec![K_REQUEST];
        h.extend_from_slice(&(u64::MAX).to_le_bytes());
        match read_one(&h) {
            Err(ReadFail::Bad(m)) => assert!(m.contains("exceeds the limit"), "{m}"),
            _ => panic!("accepted a huge frame"),
        }
        // Closed in the middle of a frame.
        let f = encode_text(K_ERROR, "boom");
        assert!(matches!(read_one(&f[..5]), Ok(Pumped::Eof)));
        assert!(matches!(read_one(b""), Ok(Pumped::Eof)));
        // A request whose inner length disagrees with the frame.
        let mut f = encode_request(1, Op::Barrier, "x", b"abc");
        let n = f.len();
        f[n - 11] = 200; // payload length low byte
        let Ok(Pumped::Frame(_, body)) = read_one(&f) else { panic!() };
        assert!(decode_request(body).is_err());
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
