//! The proxy transport: every PE on another node is reached through this PE's CPU proxy.
//!
//! # Shape
//! - **Channel.** One request ring per PE (`ring`, layout in `rshmem_device::remote::proxy`) and its
//!   return area, in `Backend::host_shared` memory (pinned and mapped on CUDA). Device threads and host
//!   threads (`putmem`/`getmem`/`quiet` here, the on-stream calls through `cuLaunchHostFunc`) post into
//!   the same ring.
//! - **Threads.** One *drain* thread per PE takes requests off the ring in ticket order, frees their
//!   slots at once (`Drain::poll_entries`) and sends them to the target's proxy. Completion is decoupled
//!   from draining ([`Completion`]): a request is complete when its effect is done *at the target*, and
//!   the ring's `completed` is the largest complete prefix. Per connection a *receiver* thread applies
//!   what the peer sends (its requests, and the answers to ours) and a *responder* thread sends the
//!   answers to the peer's requests (GET data the receiver read, fetched values, QUIET completions),
//!   so that the receiver never blocks on sending: two receivers each blocked on sending to the
//!   other would deadlock. A *listener* thread refuses (or, with a valid hello, cuts off) connections opened after setup.
//! - **Connections.** One TCP connection per pair of PEs on different nodes (lower PE connects, higher
//!   accepts; hello with the job key, `tcp`). One connection per pair carries every frame between
//!   them in order, which gives `fence` (per-target ordering) for free. Frames are the wire's
//!   (`wire`), validated on receipt by its decoder: nothing outside the heap is ever written.
//! - **Completion at the target.** PUT, PUT_INLINE, SIGNAL, PUT_SIGNAL and non-fetching AMOs are
//!   acknowledged in batches: after each drained batch, one QUIET per peer that got such requests;
//!   the peer's QUIET completion (sent once everything before the QUIET was applied there) completes
//!   them. GETs complete when their last response chunk has been written locally; fetching AMOs when
//!   their response arrived (the old value goes to the request's return slot, `ReturnSlot` protocol).
//! - **At the target.** AMOs, signals and small aligned puts (1, 2, 4 or 8 bytes: `p`, barrier epochs)
//!   go through the inbound queue (`rshmem_device::remote::inbound`): device threads of this PE that
//!   wait for the proxy apply them, so they are atomic with the GPU's own atomics and need no CUDA call
//!   (`Inner::inbound`). Larger PUT data is written with `Backend::copy` (complete when it returns). A
//!   PUT_SIGNAL's signal is applied after its data, behind a fence.
//! - **Failures.** A peer connection that fails (EOF without CLOSE, reset, timeout, a bad frame) is
//!   fatal for this PE: the error, naming the peer and what was in flight, goes to the log's error path
//!   and the process exits with 1, so rshmrun ends the job; nothing waits on a dead peer. Finalize sends
//!   CLOSE on every connection after the final barrier, so a clean job reports nothing.
//! - **Providers.** The engine talks to its peers through [`FrameLink`] (send a frame, receive one,
//!   close), implemented by the TCP provider's [`tcp::Connection`]; only the setup in [`Proxy::new`]
//!   (listen, connect, accept, split into halves) is TCP's. A verbs provider implements `FrameLink` and
//!   its own setup; the engine (draining, completion, applying frames, answers) stays as it is.
//!
//! PUT data is staged through two pinned buffers: the staging copy of chunk k+1 overlaps the send of
//! chunk k. A GET is read at the target when its request arrives (in the connection's order, so a
//! later write to the range is not seen), into a host buffer the responder sends from.
//!
//! Not done yet: several connections (lanes) per pair (not measured to help yet); GPU figures of the
//! inbound queue (AMO latency with waiting device threads applying them) are still to be measured.

use super::ring::{self, Completion, Drain, Request, RingRef};
use super::tcp::{self, Connection, Endpoint};
use super::wire::{self, AmoOp, Chunks, Message, Signal, SignalOp, Width};
use super::{DeviceChannel, RemoteSetup, Transport};
use crate::backend::{Backend, HostShared};
use crate::error::{Error, Result};
use crate::{env, log};
use rshmem_device::remote::inbound::{self, InboundOp};
use rshmem_ibgda::emu::{Access, MrTable, Reason, RemoteDone, RemoteError, RemoteOp};
use rshmem_ibgda::mlx5::syndrome;
use rshmem_device::remote::proxy::{amo, op, post_with, return_area_bytes, ring_bytes, wait_completed_with, ReturnSlot, RETURN_SLOT_BYTES, SUB_RETURN};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

// The wire forwards device AMO codes unchanged.
const _: () = {
    assert!(amo::FETCH as u8 == AmoOp::Fetch as u8 && amo::SET as u8 == AmoOp::Set as u8);
    assert!(amo::COMPARE_SWAP as u8 == AmoOp::CompareSwap as u8 && amo::XOR as u8 == AmoOp::Xor as u8);
    assert!(amo::FETCH_ADD as u8 == AmoOp::FetchAdd as u8 && amo::LAST as u8 == AmoOp::Xor as u8);
};

/// Default slots of the request ring (`RSHMEM_PROXY_SLOTS`).
pub const DEFAULT_SLOTS: usize = 4096;
/// How long finalize waits for a peer's CLOSE.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long a PE keeps running after a peer's connection ended without CLOSE while nothing was in flight.
const GONE_GRACE: Duration = Duration::from_secs(4);
/// Keepalive period of the peer connections (`tcp::Connection::set_liveness`).
const LIVENESS: Duration = Duration::from_secs(1);
/// How often idle receivers look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// One direction of a connection to a peer PE, as the engine uses it: frames of the wire protocol
/// (`wire`), validated by the receiving side before anything is applied. The sending half and the
/// receiving half of one connection are two `FrameLink`s used by different threads.
pub trait FrameLink: Send {
    /// The PE on the other end.
    fn peer(&self) -> u32;
    /// The largest payload one frame to the peer may carry.
    fn send_chunk(&self) -> u32;
    /// Sends one frame (header and payload); a frame the peer would refuse is an error, not sent.
    fn send(&mut self, h: &wire::OpHeader, payload: &[u8]) -> Result<()>;
    /// Sends a message (`Message::encode`).
    fn send_message(&mut self, m: &Message<'_>) -> Result<()>;
    /// Waits at most `idle` for a frame; Ok(true): [`FrameLink::current`] holds it (validated).
    fn recv_timeout(&mut self, idle: Duration) -> Result<bool>;
    /// The frame the last successful receive read.
    fn current(&self) -> Result<Message<'_>>;
    /// Ends the sending direction in order (a CLOSE frame).
    fn close(self: Box<Self>) -> Result<()>;
}

impl FrameLink for Connection {
    fn peer(&self) -> u32 {
        Connection::peer(self)
    }
    fn send_chunk(&self) -> u32 {
        Connection::send_chunk(self)
    }
    fn send(&mut self, h: &wire::OpHeader, payload: &[u8]) -> Result<()> {
        Connection::send(self, h, payload)
    }
    fn send_message(&mut self, m: &Message<'_>) -> Result<()> {
        Connection::send_message(self, m)
    }
    fn recv_timeout(&mut self, idle: Duration) -> Result<bool> {
        Connection::recv_timeout(self, idle)
    }
    fn current(&self) -> Result<Message<'_>> {
        Connection::current(self)
    }
    fn close(self: Box<Self>) -> Result<()> {
        Connection::close(*self)
    }
}

/// A GET awaiting its response: where the bytes go.
struct PendingGet {
    dst: u64,
    offset: u64,
    len: u64,
    got: u64,
    /// `g`: into the return slot (len <= 8), accumulated here.
    ret: Option<[u8; 8]>,
}

/// A fetching AMO awaiting its old value.
struct PendingAmo {
    ret: bool,
    dst: u64,
    width: u32,
}

#[derive(Default)]
struct Pending {
    gets: HashMap<u64, PendingGet>,
    amos: HashMap<u64, PendingAmo>,
    /// Requests completed by the next QUIET completion that covers them, in order.
    acks: VecDeque<u64>,
}

/// What a responder thread sends for the receiver.
enum Job {
    /// A GET's bytes, read at the target when the request arrived (see `apply`).
    Get { seq: u64, offset: u64, data: Vec<u8> },
    Amo { seq: u64, width: Width, value: u64 },
    QuietAck { seq: u64 },
    /// The answer to a NIC frame: status and fetched value.
    NicAck { seq: u64, status: std::result::Result<u64, RemoteError> },
    /// A NIC READ's bytes.
    NicRead { seq: u64, data: Vec<u8> },
}

/// Where a receiver delivers the outcome of a NIC frame this PE sent: (peer, seq, outcome).
pub(crate) type NicAnswer = dyn Fn(u32, u64, std::result::Result<RemoteDone, RemoteError>) + Send + Sync;

/// What the IBGDA transport's emulated NIC adds to the engine (`super::ibgda`): the regions its
/// responder checks incoming NIC frames against (this PE's registered heap), and where the answers to
/// this PE's own NIC frames go.
pub(crate) struct NicHooks {
    pub regions: Arc<MrTable>,
    /// Called by a receiver with (peer, seq, outcome) for every answered NIC frame this PE sent.
    pub answer: Box<NicAnswer>,
}

/// Per-link state of NIC frames.
#[derive(Default)]
struct NicLink {
    /// The failure of the multi-chunk NIC WRITE being received (answered at its last chunk).
    write_failed: Option<RemoteError>,
    /// READs this PE asked for, whose bytes are arriving: seq -> bytes so far.
    reads: HashMap<u64, Vec<u8>>,
    /// NIC frames sent to the peer and not yet answered.
    outstanding: u64,
}

/// The link to one peer PE.
struct Link {
    peer: u32,
    /// The sending half (None once closed).
    tx: Mutex<Option<Box<dyn FrameLink>>>,
    pending: Mutex<Pending>,
    /// Work for the responder thread (None once finalize closed it).
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    /// Set when the peer sent CLOSE.
    closed: AtomicBool,
    /// Set when the connection ended without CLOSE while nothing was in flight (see `receive`).
    gone: AtomicBool,
    nic: Mutex<NicLink>,
}

struct Inner {
    me: u32,
    npes: u32,
    platform: Arc<dyn Backend>,
    heap_base: u64,
    heap_size: u64,
    /// `remote[pe]`: the proxy reaches PE `pe` (it is on another node).
    remote: Vec<bool>,
    /// The ring (header, slots) followed by the return area.
    chan: HostShared,
    slots: usize,
    completion: Completion,
    links: Vec<Option<Link>>,
    /// The drain thread stops once the ring is idle.
    stop: AtomicBool,
    /// Finalize has begun: a peer's end of stream is no longer an error.
    closing: AtomicBool,
    /// Set by a finalize whose final barrier failed: nothing waits for the peers' CLOSE.
    abort: AtomicBool,
    max_chunk: u32,
    /// How long a host call waits for a free slot or a completion.
    wait_limit: Duration,
    /// Tickets handed out in the inbound queue (held for a whole inbound operation: one at a time).
    inbound_next: Mutex<u64>,
    /// The emulated NIC's hooks, when the IBGDA transport runs this engine.
    nic: Option<NicHooks>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Before `chan` (which holds the inbound queue) is freed: nothing may read it afterwards.
        self.platform.inbound_release();
    }
}

/// The proxy transport of one PE.
pub struct Proxy {
    inner: Arc<Inner>,
    threads: Mutex<Vec<(String, JoinHandle<()>)>>,
    #[allow(dead_code)]
    listen: SocketAddr,
}

/// Ends this PE: a failed peer connection (or a broken ring) is fatal. The message names the peer
/// and what was in flight; rshmrun sees exit code 1 and ends the job.
fn fatal(what: impl std::fmt::Display) -> ! {
    // The log's error path prefixes the PE ("rshmem error [PE n]: proxy: ...").
    log::error(format!("proxy: {what}"));
    std::process::exit(1)
}

/// Whether every request and frame is logged (RSHMEM_DEBUG=trace): for finding where a job stops.
fn tracing() -> bool {
    static T: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *T.get_or_init(|| env::get(env::DEBUG).is_some_and(|v| v.trim().eq_ignore_ascii_case("trace")))
}

/// Offset of the inbound queue in the channel memory: after the ring and the return area, 64-aligned.
fn inbound_at(slots: usize) -> usize {
    (ring_area(slots) + return_area_bytes(slots)).next_multiple_of(64)
}

fn ring_area(slots: usize) -> usize {
    ring_bytes(slots).next_multiple_of(64)
}

/// The IPv4 address this PE's proxy listens on (`crate::diagnose::proxy_listen_ip`, which
/// `rshmrun --diagnose` reports too): RSHMEM_PROXY_IFNAME's, else the address this host uses to reach
/// the bootstrap rendezvous (with `--netns` every node has its own), else the default interface's.
fn listen_ip() -> Result<IpAddr> {
    crate::diagnose::proxy_listen_ip(&crate::diagnose::NetEnv::current()).map(|(ip, _)| ip)
}

/// This process's proxy channel as host threads address it: (ring, return area) — for tests and tools
/// that post requests the way device code does. None when no proxy transport is running.
static HOST_CHANNEL: Mutex<Option<(RingRef, u64)>> = Mutex::new(None);
/// This process's proxy listen address, while a proxy transport runs.
static LISTEN: Mutex<Option<SocketAddr>> = Mutex::new(None);

/// The running proxy's request ring and return area (host addresses), for tests and tools that post
/// requests as device code does (`rshmem_device::remote::proxy::post`); None without a proxy.
pub fn host_channel() -> Option<(RingRef, u64)> {
    *HOST_CHANNEL.lock().unwrap_or_else(|e| e.into_inner())
}
/// The address the running proxy listens on (None without a proxy).
pub fn listen_addr() -> Option<SocketAddr> {
    *LISTEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The registry's constructor (`RSHMEM_REMOTE_TRANSPORT=proxy`). Collective: every PE calls it.
pub fn create(s: &RemoteSetup) -> Result<Box<dyn Transport>> {
    Ok(Box::new(Proxy::new(s, None)?))
}

/// The engine's services for the emulated NIC: sending the remote halves of its WQEs to their peer.
#[derive(Clone)]
pub(crate) struct NicPort(Arc<Inner>);

impl NicPort {
    /// Sends `op` (tagged `seq`, echoed by the answer) to PE `pe`. An error when the peer cannot be
    /// reached (not linked, gone, the connection failed): what a NIC reports as retries exceeded.
    pub(crate) fn start(&self, pe: u32, seq: u64, op: RemoteOp) -> std::result::Result<(), RemoteError> {
        let unreachable = RemoteError { syndrome: syndrome::TRANSPORT_RETRY_EXC, reason: Reason::Unreachable };
        let inner = &self.0;
        let link = inner.link(pe).map_err(|_| unreachable)?;
        if link.gone.load(Ordering::Acquire) || link.closed.load(Ordering::Acquire) {
            return Err(unreachable);
        }
        link.nic.lock().unwrap_or_else(|e| e.into_inner()).outstanding += 1;
        let sent = match &op {
            RemoteOp::Write { rkey, raddr, data } => inner.send(link, |c| {
                let chunk = c.send_chunk().min(inner.max_chunk);
                for ch in Chunks::nic_write(inner.me, seq, *rkey, *raddr, data.len() as u64, chunk) {
                    c.send(&ch.header, &data[ch.range])?;
                }
                Ok(())
            }),
            RemoteOp::Read { rkey, raddr, len } => inner.send(link, |c| c.send_message(&Message::NicRead { seq, rkey: *rkey, raddr: *raddr, len: *len as u64 })),
            RemoteOp::Atomic { rkey, raddr, op } => inner.send(link, |c| c.send_message(&Message::NicAtomic { seq, rkey: *rkey, raddr: *raddr, op: *op })),
        };
        if tracing() {
            log::debug(format!("proxy trace: NIC {seq:#x} to PE {pe}: {op:?}"));
        }
        sent.map_err(|e| {
            log::debug(format!("proxy: NIC frame {seq:#x} to PE {pe}: {e}"));
            unreachable
        })
    }
}

impl Proxy {
    /// The engine's sending side for the emulated NIC.
    pub(crate) fn nic_port(&self) -> NicPort {
        NicPort(self.inner.clone())
    }

    /// Collective: sets up the channel, listens, exchanges listen addresses through the bootstrap,
    /// connects to every PE on another node and starts the threads. `nic`: the emulated NIC's hooks
    /// when the IBGDA transport runs the engine.
    pub(crate) fn new(s: &RemoteSetup, nic: Option<NicHooks>) -> Result<Proxy> {
        let boot = s.boot;
        let (me, n) = (boot.pe() as u32, boot.npes() as u32);
        let platform = s.platform.clone();
        let slots = match env::get(env::PROXY_SLOTS) {
            Some(v) => env::parse_proxy_slots(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::PROXY_SLOTS)))?,
            None => DEFAULT_SLOTS,
        };
        platform.prepare_proxy()?;
        let chan = platform.host_shared(inbound_at(slots) + inbound::queue_bytes())?;
        // SAFETY: chan is ours, zeroed, 64-aligned and holds ring_bytes(slots); nobody posts yet.
        unsafe { ring::init_ring(chan.host_ptr(), ring_area(slots), slots)? };
        // SAFETY: the header was just set up; chan lives in Inner as long as the Completion.
        let completion = unsafe { Completion::attach(chan.host_ptr()) };
        let local: Vec<bool> = (0..n as usize).map(|pe| boot.node_pes().contains(&pe)).collect();
        let remote: Vec<bool> = local.iter().map(|l| !l).collect();

        let ip = listen_ip()?;
        let listener = TcpListener::bind((ip, 0)).map_err(|e| Error::os(format!("proxy: PE {me}: cannot listen on {ip}"), e))?;
        let listen = listener.local_addr().map_err(|e| Error::os("proxy: listener address", e))?;
        log::info(format!("proxy: PE {me} listens on {listen}"));
        let all = boot.allgather("rshmem_init (proxy addresses)", listen.to_string().as_bytes())?;
        let mut addrs = Vec::with_capacity(n as usize);
        for (pe, a) in all.iter().enumerate() {
            let text = String::from_utf8_lossy(a);
            let addr: SocketAddr = text
                .parse()
                .map_err(|_| boot.abort(Error::new(format!("proxy: PE {pe} sent {text:?} as its proxy address (expected ip:port)"))))?;
            addrs.push(addr);
        }

        let heap_size = platform.heap_size() as u64;
        let ep = Endpoint { key: boot.job_key(), pe: me, npes: n, heap_size, max_chunk: wire::DEFAULT_MAX_CHUNK };
        let timeout = env::get(env::BOOTSTRAP_TIMEOUT).and_then(|v| env::parse_positive_secs(&v).ok()).unwrap_or(Duration::from_secs(30));
        let deadline = Instant::now() + timeout;
        let expect_accept: Vec<u32> = (0..me).filter(|&q| remote[q as usize]).collect();
        let mut conns: Vec<Option<Connection>> = (0..n).map(|_| None).collect();
        std::thread::scope(|sc| -> Result<()> {
            let acceptor = sc.spawn(|| -> Result<Vec<Connection>> {
                let mut got: Vec<Connection> = Vec::new();
                while got.len() < expect_accept.len() {
                    if Instant::now() >= deadline {
                        let missing: Vec<u32> = expect_accept.iter().copied().filter(|q| !got.iter().any(|c| c.peer() == *q)).collect();
                        return Err(Error::new(format!("proxy: PE {me}: PEs {missing:?} did not connect within {timeout:?}")));
                    }
                    match tcp::accept(&listener, &ep, deadline) {
                        Ok(c) if expect_accept.contains(&c.peer()) && !got.iter().any(|g| g.peer() == c.peer()) => got.push(c),
                        Ok(c) => log::warn(format!("proxy: PE {me}: unexpected connection from PE {} during setup: dropped", c.peer())),
                        Err(e) => log::warn(format!("proxy: {e}")),
                    }
                }
                Ok(got)
            });
            let mut first_err = None;
            for q in (me + 1)..n {
                if remote[q as usize] {
                    match tcp::connect(addrs[q as usize], &ep, q, 0, 1, deadline) {
                        Ok(c) => conns[q as usize] = Some(c),
                        Err(e) => {
                            first_err = Some(e);
                            break;
                        }
                    }
                }
            }
            let accepted = acceptor.join().map_err(|_| Error::new("proxy: the setup thread panicked"))?;
            if let Some(e) = first_err {
                return Err(e);
            }
            for c in accepted? {
                let q = c.peer() as usize;
                conns[q] = Some(c);
            }
            Ok(())
        })
        .map_err(|e| e.context(format!("rshmem_init: proxy transport of PE {me}")))?;

        let mut links = Vec::with_capacity(n as usize);
        let mut halves = Vec::new();
        let mut job_rx = Vec::new();
        for (q, c) in conns.into_iter().enumerate() {
            match c {
                Some(c) => {
                    // A peer host that vanishes without closing is noticed within about 4 s when
                    // the connection is quiet, 10 s with data in flight.
                    c.set_liveness(LIVENESS, Duration::from_secs(10))?;
                    let (tx, rx) = c.split()?;
                    let (jtx, jrx) = mpsc::channel();
                    links.push(Some(Link {
                        peer: q as u32,
                        tx: Mutex::new(Some(Box::new(tx))),
                        pending: Mutex::new(Pending::default()),
                        jobs: Mutex::new(Some(jtx)),
                        closed: AtomicBool::new(false),
                        gone: AtomicBool::new(false),
                        nic: Mutex::new(NicLink::default()),
                    }));
                    halves.push(Box::new(rx) as Box<dyn FrameLink>);
                    job_rx.push((q, jrx));
                }
                None => links.push(None),
            }
        }
        let wait_limit = env::wait_timeout().ok().flatten().unwrap_or(Duration::from_secs(365 * 24 * 3600));
        let inner = Arc::new(Inner {
            me,
            npes: n,
            heap_base: platform.heap_base() as u64,
            heap_size,
            platform,
            remote,
            chan,
            slots,
            completion,
            links,
            stop: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            max_chunk: wire::DEFAULT_MAX_CHUNK,
            wait_limit,
            inbound_next: Mutex::new(0),
            nic,
        });
        let mut threads = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| -> Result<(String, JoinHandle<()>)> {
            let h = std::thread::Builder::new().name(name.clone()).spawn(f).map_err(|e| Error::os(format!("proxy: starting thread {name}"), e))?;
            Ok((name, h))
        };
        for rx in halves {
            let q = rx.peer();
            let i = inner.clone();
            threads.push(spawn(format!("rshmem-proxy-rx{q}"), Box::new(move || i.receive(rx)))?);
        }
        // The drain's staging buffers are made here, before the threads start, so that init has
        // allocated all it will (a caller measuring memory after init sees the same every time).
        for (q, jrx) in job_rx {
            let i = inner.clone();
            threads.push(spawn(format!("rshmem-proxy-tx{q}"), Box::new(move || i.respond(q, jrx)))?);
        }
        let i = inner.clone();
        let st = inner.staging()?;
        threads.push(spawn("rshmem-proxy-drain".into(), Box::new(move || i.drain(st)))?);
        let i = inner.clone();
        threads.push(spawn("rshmem-proxy-listen".into(), Box::new(move || i.listen(listener, ep)))?);
        let p = Proxy { inner, threads: Mutex::new(threads), listen };
        *HOST_CHANNEL.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((p.host_ring(), p.inner.chan.host_ptr() as u64 + ring_area(p.inner.slots) as u64));
        *LISTEN.lock().unwrap_or_else(|e| e.into_inner()) = Some(listen);
        Ok(p)
    }

    fn host_ring(&self) -> RingRef {
        RingRef { header: self.inner.chan.host_ptr() as u64, slots: self.inner.slots as u64 }
    }

    /// Posts `r` from a host thread and waits for its completion.
    fn post_and_wait(&self, call: &str, r: &Request) -> Result<()> {
        // On GPUs the request is posted by a GPU thread (see `Backend::post_request`), which also
        // waits for its completion.
        // SAFETY: the caller checked the request; its buffers stay valid until this returns.
        if unsafe { self.inner.platform.post_request(r, None) }.map_err(|e| e.context(format!("{call}: proxy request to PE {}", r.pe)))? {
            return Ok(());
        }
        let ring = self.host_ring();
        let limit = self.inner.wait_limit;
        // SAFETY: the ring is set up in self.inner.chan, which lives as long as self.
        let seq = unsafe { post_with(ring, r, ring::deadline(limit)) }
            .map_err(|s| Error::new(format!("{call}: proxy request to PE {}: no free slot in the request ring within {limit:?} ({s:?})", r.pe)))?;
        // SAFETY: as above.
        unsafe { wait_completed_with(ring, seq, ring::deadline(limit)) }
            .map_err(|s| Error::new(format!("{call}: proxy request to PE {}: not completed within {limit:?} ({s:?})", r.pe)))
    }
}

/// How long an inbound operation waits for a device thread of this PE (one waiting for the proxy polls
/// the queue every few microseconds) before the service kernel is launched for it. A launch costs a
/// few microseconds and runs beside any waiting thread (the claim decides who applies it), so a short
/// wait only saves launches when threads are waiting, and a long one is added to every remote `p` or
/// AMO on a GPU whose kernels are not waiting for the proxy.
const KICK_AFTER: Duration = Duration::from_micros(3);
/// How often the kick is repeated while the operation waits (see `inbound`).
const KICK_AGAIN: Duration = Duration::from_micros(100);

impl Inner {
    /// Has operation `code` (an AMO code or `inbound::STORE`) of `width` bytes applied at heap offset
    /// `offset` of this PE through the inbound queue (`rshmem_device::remote::inbound`), and returns the
    /// old value. Device threads of this PE that wait for the proxy apply it; if none does quickly, the
    /// platform is asked to (`Backend::kick_inbound`: the CPU backend runs it on this thread, a GPU
    /// launches a service kernel without waiting for it). The heap range was checked by the caller.
    fn inbound(&self, code: u32, width: u32, offset: u64, value: u64, compare: u64) -> Result<u64> {
        self.inbound_with(code, width, offset, value, compare, [0; 2])
    }

    /// `inbound` with the extra operands of a NIC atomic (`inbound::NIC_ATOMIC`).
    fn inbound_with(&self, code: u32, width: u32, offset: u64, value: u64, compare: u64, extra: [u64; 2]) -> Result<u64> {
        let mut next = self.inbound_next.lock().unwrap_or_else(|e| e.into_inner());
        let t = *next;
        *next += 1;
        let slot = (self.chan.host_ptr() as usize + inbound_at(self.slots) + (t % inbound::SLOTS) as usize * inbound::SLOT_BYTES) as *mut u64;
        let word = |f: usize| slot.wrapping_add(f / 8);
        // SAFETY: the slot lies in chan (alive with self); seq and done are accessed only atomically,
        // the body only by us before the release of seq (its previous lap is done: we waited for it,
        // holding `next`, before this ticket was handed out).
        unsafe {
            let op = slot as *mut InboundOp;
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).code), code);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).width), width);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).offset), offset);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).value), value);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).compare), compare);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*op).extra), extra);
            AtomicU64::from_ptr(word(std::mem::offset_of!(InboundOp, seq))).store(t + 1, Ordering::Release);
        }
        // SAFETY: as above.
        let done = unsafe { AtomicU64::from_ptr(word(std::mem::offset_of!(InboundOp, done))) };
        let start = Instant::now();
        let on_host = self.platform.inbound_on_host();
        let mut next_kick = KICK_AFTER;
        let mut spins = 0u64;
        while done.load(Ordering::Acquire) != t + 1 {
            spins += 1;
            // The CPU backend applies it here at once; a GPU gets KICK_AFTER for a waiting thread to
            // take it, then a request for a launch of the service (made by another thread: this one
            // keeps polling, and whichever of them claims the operation first applies it), and again
            // every KICK_AGAIN (a service kernel that was ending as the operation came skips it).
            if on_host || start.elapsed() > next_kick {
                self.platform.kick_inbound()?;
                next_kick = start.elapsed() + KICK_AGAIN;
            }
            if self.closing.load(Ordering::Acquire) && start.elapsed() > CLOSE_WAIT {
                return Err(Error::new("inbound operation not applied before finalize"));
            }
            if start.elapsed() > self.wait_limit {
                return Err(Error::new(format!("inbound operation {t} (code {code:#x}) not applied within {:?}", self.wait_limit)));
            }
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // SAFETY: done was published (release) after result; our acquire above orders this read.
        Ok(unsafe { std::ptr::read_volatile(word(std::mem::offset_of!(InboundOp, result))) })
    }

    fn link(&self, pe: u32) -> Result<&Link> {
        self.links
            .get(pe as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::new(format!("proxy: PE {pe} is not reached by the proxy (it is on this node, or not in the job)")))
    }

    fn ret_slot(&self, seq: u64) -> *mut u8 {
        let i = ((seq - 1) % self.slots as u64) as usize;
        // SAFETY (pointer arithmetic only): the return area follows the ring in chan and holds `slots`
        // slots; i < slots.
        unsafe { self.chan.host_ptr().add(ring_area(self.slots) + i * RETURN_SLOT_BYTES) }
    }

    /// Delivers `value` to request `seq`'s return slot (ReturnSlot protocol: wait until the previous
    /// user gave it back, write the value, publish `seq` with release).
    fn deliver(&self, seq: u64, value: u64) {
        if tracing() {
            log::debug(format!("proxy trace: deliver {seq} = {value:#x}"));
        }
        let slot = self.ret_slot(seq);
        // SAFETY: the slot is 16-aligned in chan (alive with self); `seq` is only accessed atomically,
        // `value` only by us (before the release) and the poster (after its acquire).
        let seq_w = unsafe { AtomicU64::from_ptr(slot.add(std::mem::offset_of!(ReturnSlot, seq)) as *mut u64) };
        let mut spins = 0u64;
        while seq_w.load(Ordering::Acquire) != 0 {
            if self.closing.load(Ordering::Acquire) {
                return;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // SAFETY: as above; the slot is free (seq 0), so nobody reads `value` until our release store.
        unsafe { std::ptr::write_volatile(slot.add(std::mem::offset_of!(ReturnSlot, value)) as *mut u64, value) };
        seq_w.store(seq, Ordering::Release);
    }

    /// Heap address of `[offset, offset + len)`, checked against what the platform backs (the wire
    /// checked the heap size already).
    fn heap_addr(&self, peer: u32, offset: u64, len: u64) -> Result<*mut u8> {
        let backed = self.platform.backed() as u64;
        if offset.checked_add(len).is_none_or(|e| e > backed) {
            return Err(Error::new(format!(
                "PE {peer} names heap bytes [{offset:#x}, +{len:#x}) beyond the {backed:#x} bytes backed on PE {}",
                self.me
            )));
        }
        Ok((self.heap_base + offset) as *mut u8)
    }

    fn send<T>(&self, link: &Link, f: impl FnOnce(&mut dyn FrameLink) -> Result<T>) -> Result<T> {
        let mut tx = link.tx.lock().unwrap_or_else(|e| e.into_inner());
        match tx.as_mut() {
            Some(c) => f(&mut **c),
            None => Err(Error::new(format!("proxy: the connection to PE {} is closed", link.peer))),
        }
    }

    // ------------------------------------------------------------ the drain thread

    fn drain(self: Arc<Self>, staging: [HostShared; 2]) {
        // SAFETY: the ring lives in self.chan, which this thread keeps alive (Arc) while it drains;
        // this is the only drain of the ring.
        let mut d: Drain<'static> = match unsafe { Drain::attach(self.chan.host_ptr(), ring_area(self.slots)) } {
            Ok(d) => d,
            Err(e) => fatal(e),
        };
        let mut quiet: Vec<Option<u64>> = vec![None; self.npes as usize];
        let mut idle = 0u64;
        loop {
            let r = d.poll_entries(|seq, r| self.issue(seq, r, &staging, &mut quiet));
            let n = match r {
                Ok(n) => n,
                Err(e) => fatal(e),
            };
            for (q, s) in quiet.iter_mut().enumerate() {
                if let Some(seq) = s.take() {
                    let link = self.links[q].as_ref().expect("a quiet only for linked peers");
                    if let Err(e) = self.send(link, |c| c.send_message(&Message::Quiet { seq })) {
                        fatal(e.context(format!("sending QUIET (request {seq}) to PE {q}")));
                    }
                }
            }
            if n > 0 {
                idle = 0;
                continue;
            }
            idle += 1;
            if idle.is_multiple_of(64) && self.stop.load(Ordering::Acquire) {
                return;
            }
            if idle < 64 {
                std::hint::spin_loop();
            } else if idle < 20_000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// Sends request `seq` to its target (or completes it, for a NOP).
    fn issue(&self, seq: u64, r: &Request, staging: &[HostShared; 2], quiet: &mut [Option<u64>]) -> Result<()> {
        ring::check_request(r, self.npes, self.heap_size)?;
        if tracing() {
            log::debug(format!("proxy trace: issue {seq}: op {} sub {:#x} to PE {} offset {:#x} len {} value {:#x}", r.op, r.sub, r.pe, r.offset, r.len, r.value));
        }
        if r.op == op::NOP {
            self.completion.done(seq);
            return Ok(());
        }
        let link = self.link(r.pe)?;
        if link.gone.load(Ordering::Acquire) {
            fatal(format!("request {seq} to PE {}: that PE closed its connection earlier (it exited or crashed)", r.pe));
        }
        let me = self.me;
        let signal = || -> Result<Signal> {
            let op = match r.sub as i32 {
                rshmem_device::SIGNAL_SET => SignalOp::Set,
                rshmem_device::SIGNAL_ADD => SignalOp::Add,
                s => return Err(Error::new(format!("unknown signal operator {s}"))),
            };
            Ok(Signal { offset: r.sig_offset, op, value: r.sig_value })
        };
        let acked = |quiet: &mut [Option<u64>]| {
            link.pending.lock().unwrap().acks.push_back(seq);
            quiet[r.pe as usize] = Some(seq);
        };
        match r.op {
            op::PUT | op::PUT_SIGNAL => {
                let sig = if r.op == op::PUT_SIGNAL { Some(signal()?) } else { None };
                acked(quiet);
                let chunk = self.send(link, |c| Ok(c.send_chunk()))?.min(self.max_chunk);
                // The poster promises `src` readable for `len` bytes until completion.
                self.staged_send(link, staging, Chunks::put(me, seq, r.offset, r.len, chunk, sig), r.src as usize)?;
            }
            op::PUT_INLINE => {
                acked(quiet);
                let bytes = r.value.to_le_bytes();
                self.send(link, |c| c.send_message(&Message::Put { seq, offset: r.offset, data: &bytes[..r.len as usize], last: true }))?;
            }
            op::SIGNAL => {
                let signal = signal()?;
                acked(quiet);
                self.send(link, |c| c.send_message(&Message::Signal { seq, signal }))?;
            }
            op::GET => {
                let to_ret = r.sub & SUB_RETURN != 0;
                if to_ret && r.len > 8 {
                    return Err(Error::new(format!("GET of {} bytes into a return slot (at most 8)", r.len)));
                }
                if r.len == 0 {
                    self.completion.done(seq);
                    return Ok(());
                }
                let p = PendingGet { dst: r.src, offset: r.offset, len: r.len, got: 0, ret: to_ret.then_some([0; 8]) };
                link.pending.lock().unwrap().gets.insert(seq, p);
                self.send(link, |c| c.send_message(&Message::GetRequest { seq, offset: r.offset, len: r.len }))?;
            }
            op::AMO => {
                let code = (r.sub & 0xff) as u8;
                let aop = AmoOp::from_u8(code).ok_or_else(|| Error::new(format!("unknown AMO code {code}")))?;
                let width = if r.len == 4 { Width::W4 } else { Width::W8 };
                let mask = if r.len == 4 { u32::MAX as u64 } else { u64::MAX };
                let value = if aop.has_operand() { r.value & mask } else { 0 };
                let compare = if aop == AmoOp::CompareSwap { r.sig_value & mask } else { 0 };
                if aop.fetches() {
                    let p = PendingAmo { ret: r.sub & SUB_RETURN != 0, dst: r.src, width: r.len as u32 };
                    link.pending.lock().unwrap().amos.insert(seq, p);
                } else {
                    acked(quiet);
                }
                self.send(link, |c| c.send_message(&Message::Amo { seq, op: aop, width, offset: r.offset, value, compare }))?;
            }
            other => return Err(Error::new(format!("unknown operation {other}"))),
        }
        Ok(())
    }

    // ------------------------------------------------------------ receivers

    fn receive(self: Arc<Self>, mut rx: Box<dyn FrameLink>) {
        let peer = rx.peer();
        let link = self.links[peer as usize].as_ref().expect("a receiver only for linked peers");
        let mut closing_since: Option<Instant> = None;
        loop {
            if self.closing.load(Ordering::Acquire) {
                let since = *closing_since.get_or_insert_with(Instant::now);
                if self.abort.load(Ordering::Acquire) || since.elapsed() > CLOSE_WAIT {
                    log::debug(format!("proxy: PE {peer} sent no CLOSE within {CLOSE_WAIT:?} of finalize"));
                    return;
                }
            }
            match rx.recv_timeout(POLL) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(e) => {
                    if self.closing.load(Ordering::Acquire) {
                        log::debug(format!("proxy: after finalize: {e}"));
                        return;
                    }
                    if self.nothing_in_flight(link) {
                        // The peer went away while we owed it nothing and it owed us nothing: most
                        // often a PE that reported an error and exited. This PE may be about to
                        // report its own; it ends only if it is still running after GONE_GRACE (then
                        // something may wait on the dead peer), or at once when it next needs it.
                        link.gone.store(true, Ordering::Release);
                        log::debug(format!("proxy: PE {peer} closed its connection: {e}"));
                        let me = self.clone();
                        std::thread::spawn(move || {
                            std::thread::sleep(GONE_GRACE);
                            if !me.closing.load(Ordering::Acquire) {
                                fatal(format!(
                                    "PE {peer} closed its connection {GONE_GRACE:?} ago without finalizing (it exited or crashed: {e}); ending this PE so that nothing waits on it"
                                ));
                            }
                        });
                        return;
                    }
                    fatal(format!("connection to PE {peer} failed: {e}{}", self.in_flight(link)));
                }
            }
            let m = match rx.current() {
                Ok(m) => m,
                Err(e) => fatal(format!("connection to PE {peer}: {e}")),
            };
            match self.apply(link, m) {
                Ok(true) => {}
                Ok(false) => {
                    link.closed.store(true, Ordering::Release);
                    return;
                }
                Err(e) => fatal(format!("connection to PE {peer}: {e}{}", self.in_flight(link))),
            }
        }
    }

    /// Whether this PE awaits nothing from `link`'s peer.
    fn nothing_in_flight(&self, link: &Link) -> bool {
        let p = link.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.gets.is_empty() && p.amos.is_empty() && p.acks.is_empty() && link.nic.lock().unwrap_or_else(|e| e.into_inner()).outstanding == 0
    }

    /// What this PE still awaits from `link`'s peer, for error messages.
    fn in_flight(&self, link: &Link) -> String {
        let p = link.pending.lock().unwrap_or_else(|e| e.into_inner());
        let (g, a, k) = (p.gets.len(), p.amos.len(), p.acks.len());
        let nic = link.nic.lock().unwrap_or_else(|e| e.into_inner()).outstanding;
        if g + a + k == 0 && nic == 0 {
            return "; nothing was in flight to it".into();
        }
        if g + a + k == 0 {
            return format!("; in flight to it: {nic} emulated-NIC operations (IBGDA WQEs) awaiting their answer");
        }
        let first = p.gets.keys().chain(p.amos.keys()).chain(p.acks.iter()).min().copied().unwrap_or(0);
        let bytes: u64 = p.gets.values().map(|g| g.len - g.got).sum();
        format!(
            "; in flight to it: {g} gets ({bytes} bytes not yet received), {a} fetching atomics, {k} puts/signals/atomics awaiting acknowledgement (oldest request {first})"
        )
    }

    /// Applies one frame from `link`'s peer. Ok(false): the peer closed in order.
    fn apply(&self, link: &Link, m: Message<'_>) -> Result<bool> {
        let peer = link.peer;
        if tracing() {
            log::debug(format!("proxy trace: from PE {peer}: {:?}", m.kind()));
        }
        let jobs = || link.jobs.lock().unwrap().clone();
        let push = |j: Job| {
            if let Some(tx) = jobs() {
                let _ = tx.send(j);
            }
        };
        match m {
            Message::Put { offset, data, .. } => self.store(peer, offset, data)?,
            Message::PutSignal { offset, data, signal, .. } => {
                let dst = self.heap_addr(peer, offset, data.len() as u64)?;
                // SAFETY: as for Put.
                unsafe { self.platform.copy(dst, data.as_ptr(), data.len())? };
                // The data is complete (copy returned) before the signal: never visible before it.
                std::sync::atomic::fence(Ordering::SeqCst);
                self.signal(peer, signal)?;
            }
            Message::Signal { signal, .. } => self.signal(peer, signal)?,
            Message::Amo { seq, op, width, offset, value, compare } => {
                // Inside the backed heap (checked here) and aligned (the wire checked).
                self.heap_addr(peer, offset, width.bytes())?;
                let old = self.inbound(op as u32, width.bytes() as u32, offset, value, compare)?;
                if tracing() {
                    log::debug(format!("proxy trace: applied AMO {seq} from PE {peer}: {} at {offset:#x} -> old {old:#x}", op.name()));
                }
                if op.fetches() {
                    let old = if width == Width::W4 { old & u32::MAX as u64 } else { old };
                    push(Job::Amo { seq, width, value: old });
                }
            }
            Message::GetRequest { seq, offset, len } => {
                // The bytes are read here, in the connection's order, not later by the responder: a
                // write the peer sent after this GET (ordered behind it by a fence, e.g. reusing the
                // range) must not be seen by it. The cost is a host buffer of the GET's size until
                // it is sent; the responder sends it without blocking this receiver.
                let data = self.load(peer, offset, len)?;
                push(Job::Get { seq, offset, data });
            }
            Message::Quiet { seq } => push(Job::QuietAck { seq }),
            Message::Fence { .. } => {}
            Message::GetResponse { seq, offset, data, last } => {
                let mut p = link.pending.lock().unwrap();
                let g = p.gets.get_mut(&seq).ok_or_else(|| Error::new(format!("PE {peer} answered GET {seq}, which this PE did not ask it")))?;
                let end = g.offset + g.len;
                let dlen = data.len() as u64;
                if offset < g.offset || offset + dlen > end {
                    return Err(Error::new(format!(
                        "PE {peer} answered GET {seq} with bytes [{offset:#x}, +{dlen:#x}) outside the requested [{:#x}, +{:#x})",
                        g.offset, g.len
                    )));
                }
                let at = (offset - g.offset) as usize;
                match &mut g.ret {
                    Some(buf) => buf[at..at + data.len()].copy_from_slice(data),
                    // SAFETY: the poster promised `dst` writable for `len` bytes until completion;
                    // at + data.len() <= len (checked above).
                    None => unsafe { self.platform.copy((g.dst as usize + at) as *mut u8, data.as_ptr(), data.len())? },
                }
                g.got += dlen;
                if last {
                    let g = p.gets.remove(&seq).expect("present");
                    drop(p);
                    if g.got != g.len {
                        return Err(Error::new(format!("PE {peer} answered GET {seq} with {} of {} bytes", g.got, g.len)));
                    }
                    if let Some(buf) = g.ret {
                        self.deliver(seq, u64::from_le_bytes(buf));
                    }
                    self.completion.done(seq);
                }
            }
            Message::AmoResponse { seq, width: _, value } => {
                let a = link
                    .pending
                    .lock()
                    .unwrap()
                    .amos
                    .remove(&seq)
                    .ok_or_else(|| Error::new(format!("PE {peer} answered atomic {seq}, which this PE did not ask it")))?;
                if a.ret {
                    self.deliver(seq, value);
                } else if a.dst != 0 {
                    let b = value.to_le_bytes();
                    // SAFETY: the poster promised `src` writable for the AMO's width.
                    unsafe { self.platform.copy(a.dst as *mut u8, b.as_ptr(), a.width as usize)? };
                }
                self.completion.done(seq);
            }
            Message::QuietAck { seq } => {
                if tracing() {
                    log::debug(format!("proxy trace: QUIET completion {seq} from PE {peer}"));
                }
                let done: Vec<u64> = {
                    let mut p = link.pending.lock().unwrap();
                    let mut v = Vec::new();
                    while p.acks.front().is_some_and(|&s| s <= seq) {
                        v.push(p.acks.pop_front().unwrap());
                    }
                    v
                };
                for s in done {
                    self.completion.done(s);
                }
            }
            Message::NicWrite { seq, rkey, raddr, data, last } => {
                let hooks = self.nic_hooks(peer)?;
                let mut nic = link.nic.lock().unwrap_or_else(|e| e.into_inner());
                if nic.write_failed.is_none() {
                    let r = self.nic_target(hooks, rkey, raddr, data.len() as u64, Access::REMOTE_WRITE).and_then(|offset| {
                        self.store(peer, offset, data).map_err(|e| {
                            log::warn(format!("proxy: NIC WRITE from PE {peer}: {e}"));
                            RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed }
                        })
                    });
                    nic.write_failed = r.err();
                }
                if last {
                    let status = nic.write_failed.take().map_or(Ok(0), Err);
                    drop(nic);
                    push(Job::NicAck { seq, status });
                }
            }
            Message::NicRead { seq, rkey, raddr, len } => {
                let hooks = self.nic_hooks(peer)?;
                let r = self.nic_target(hooks, rkey, raddr, len, Access::REMOTE_READ).and_then(|offset| {
                    self.load(peer, offset, len).map_err(|e| {
                        log::warn(format!("proxy: NIC READ from PE {peer}: {e}"));
                        RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed }
                    })
                });
                match r {
                    Ok(data) => push(Job::NicRead { seq, data }),
                    Err(e) => push(Job::NicAck { seq, status: Err(e) }),
                }
            }
            Message::NicAtomic { seq, rkey, raddr, op } => {
                let hooks = self.nic_hooks(peer)?;
                let n = op.bytes() as u64;
                let r = self.nic_target(hooks, rkey, raddr, n, Access::REMOTE_ATOMIC).and_then(|offset| {
                    if !raddr.is_multiple_of(n) {
                        return Err(RemoteError { syndrome: syndrome::REMOTE_INVAL_REQ, reason: Reason::Misaligned });
                    }
                    let (kind, o) = op.encode();
                    self.inbound_with(inbound::NIC_ATOMIC | kind as u32, n as u32, offset, o[0], o[1], [o[2], o[3]]).map_err(|e| {
                        log::warn(format!("proxy: NIC atomic from PE {peer}: {e}"));
                        RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed }
                    })
                });
                push(Job::NicAck { seq, status: r.map(|old| if n == 4 { old & u32::MAX as u64 } else { old }) });
            }
            Message::NicReadResponse { seq, offset, data, last } => {
                let hooks = self.nic_hooks(peer)?;
                let mut nic = link.nic.lock().unwrap_or_else(|e| e.into_inner());
                let buf = nic.reads.entry(seq).or_default();
                if offset != buf.len() as u64 {
                    return Err(Error::new(format!("PE {peer} answered NIC READ {seq:#x} with bytes at {offset:#x} after {:#x} bytes", buf.len())));
                }
                buf.extend_from_slice(data);
                if last {
                    let bytes = nic.reads.remove(&seq).unwrap_or_default();
                    nic.outstanding = nic.outstanding.saturating_sub(1);
                    drop(nic);
                    (hooks.answer)(peer, seq, Ok(RemoteDone::Read(bytes)));
                }
            }
            Message::NicAck { seq, syndrome: syn, reason, value } => {
                let hooks = self.nic_hooks(peer)?;
                {
                    let mut nic = link.nic.lock().unwrap_or_else(|e| e.into_inner());
                    nic.reads.remove(&seq);
                    nic.outstanding = nic.outstanding.saturating_sub(1);
                }
                let r = if syn == 0 {
                    // WRITEs are answered with 0; atomics with the old value (the NIC thread knows which).
                    Ok(RemoteDone::Fetched(value))
                } else {
                    Err(RemoteError { syndrome: syn, reason: Reason::from_u8(reason).unwrap_or(Reason::Unreachable) })
                };
                (hooks.answer)(peer, seq, r);
            }
            Message::Barrier { .. } => return Err(Error::new(format!("PE {peer} sent a BARRIER frame, which the proxy does not use"))),
            Message::Error { text } => return Err(Error::new(format!("PE {peer} reported an error and closed: {text}"))),
            Message::Close => return Ok(false),
        }
        Ok(true)
    }

    /// Writes `data` at heap offset `offset` of this PE (a PUT's or NIC WRITE's bytes, checked here
    /// against what is backed).
    fn store(&self, peer: u32, offset: u64, data: &[u8]) -> Result<()> {
        if matches!(data.len(), 1 | 2 | 4 | 8) && offset.is_multiple_of(data.len() as u64) {
            // A small aligned put (`p`, a barrier's epoch): one store by a device thread
            // (inbound queue), never torn, and no CUDA call.
            self.heap_addr(peer, offset, data.len() as u64)?;
            let mut b = [0u8; 8];
            b[..data.len()].copy_from_slice(data);
            self.inbound(inbound::STORE, data.len() as u32, offset, u64::from_le_bytes(b), 0)?;
            return Ok(());
        }
        let dst = self.heap_addr(peer, offset, data.len() as u64)?;
        // SAFETY: dst..dst+len lies in this PE's backed heap (checked); data is the frame's payload
        // in the reader's buffer, not overlapping the heap.
        unsafe { self.platform.copy(dst, data.as_ptr(), data.len()) }
    }

    /// Reads `len` bytes at heap offset `offset` of this PE (checked against what is backed).
    fn load(&self, peer: u32, offset: u64, len: u64) -> Result<Vec<u8>> {
        let src = self.heap_addr(peer, offset, len)?;
        let mut data = vec![0u8; len as usize];
        // SAFETY: src..src+len lies in the backed heap (checked); data holds len bytes.
        unsafe { self.platform.copy(data.as_mut_ptr(), src, len as usize)? };
        Ok(data)
    }

    /// The NIC hooks, or an error: a peer sent a NIC frame to a PE whose transport is not IBGDA.
    fn nic_hooks(&self, peer: u32) -> Result<&NicHooks> {
        self.nic.as_ref().ok_or_else(|| Error::new(format!("PE {peer} sent an emulated-NIC frame, but this PE's remote transport is the proxy (set RSHMEM_REMOTE_TRANSPORT the same on every PE)")))
    }

    /// What a responder NIC checks of a remote access: the rkey names a region of this PE with the
    /// right `need`, and `[raddr, raddr + len)` lies inside it and inside the backed heap. Returns the
    /// heap offset.
    fn nic_target(&self, hooks: &NicHooks, rkey: u32, raddr: u64, len: u64, need: Access) -> std::result::Result<u64, RemoteError> {
        hooks.regions.check_remote(rkey, raddr, len, need)?;
        let off = raddr.wrapping_sub(self.heap_base);
        if off >= self.heap_size || len > self.heap_size - off || off + len > self.platform.backed() as u64 {
            return Err(RemoteError { syndrome: syndrome::REMOTE_ACCESS, reason: Reason::RemoteRange });
        }
        Ok(off)
    }

    fn signal(&self, peer: u32, s: Signal) -> Result<()> {
        // An aligned (the wire checked) u64 in the backed heap (checked here).
        self.heap_addr(peer, s.offset, 8)?;
        let code = match s.op {
            SignalOp::Set => amo::SET,
            SignalOp::Add => amo::ADD,
        };
        self.inbound(code as u32, 8, s.offset, s.value, 0)?;
        Ok(())
    }

    // ------------------------------------------------------------ responders

    fn respond(self: Arc<Self>, q: usize, jobs: mpsc::Receiver<Job>) {
        let link = self.links[q].as_ref().expect("a responder only for linked peers");
        let mut last = Instant::now();
        while let Some(j) = next_job(&jobs, &mut last) {
            let r = match j {
                Job::QuietAck { seq } => self.send(link, |c| c.send_message(&Message::QuietAck { seq })),
                Job::Amo { seq, width, value } => self.send(link, |c| c.send_message(&Message::AmoResponse { seq, width, value })),
                Job::Get { seq, offset, data } => self.get_response(link, seq, offset, &data),
                Job::NicAck { seq, status } => {
                    let m = match status {
                        Ok(value) => Message::NicAck { seq, syndrome: 0, reason: 0, value },
                        Err(e) => Message::NicAck { seq, syndrome: e.syndrome, reason: e.reason as u8, value: 0 },
                    };
                    self.send(link, |c| c.send_message(&m))
                }
                Job::NicRead { seq, data } => self.nic_read_response(link, seq, &data),
            };
            if let Err(e) = r {
                if self.closing.load(Ordering::Acquire) {
                    return;
                }
                fatal(format!("answering PE {q}: {e}"));
            }
        }
    }

    fn get_response(&self, link: &Link, seq: u64, offset: u64, data: &[u8]) -> Result<()> {
        let chunk = self.send(link, |c| Ok(c.send_chunk()))?.min(self.max_chunk);
        for ch in Chunks::get_response(self.me, seq, offset, data.len() as u64, chunk) {
            self.send(link, |c| c.send(&ch.header, &data[ch.range.clone()]))?;
        }
        Ok(())
    }

    fn nic_read_response(&self, link: &Link, seq: u64, data: &[u8]) -> Result<()> {
        let chunk = self.send(link, |c| Ok(c.send_chunk()))?.min(self.max_chunk);
        for ch in Chunks::nic_read_response(self.me, seq, data.len() as u64, chunk) {
            self.send(link, |c| c.send(&ch.header, &data[ch.range.clone()]))?;
        }
        Ok(())
    }

    /// Two pinned staging buffers of a chunk each (one being filled while the other is sent).
    fn staging(&self) -> Result<[HostShared; 2]> {
        Ok([self.platform.host_shared(self.max_chunk as usize)?, self.platform.host_shared(self.max_chunk as usize)?])
    }

    /// Sends the chunks of a transfer whose bytes start at `src` (any address the platform copies
    /// from: host memory, the heap, GPU memory), staged through pinned buffers. With several chunks
    /// the staging copy of chunk k+1 (a helper thread) overlaps the send of chunk k.
    fn staged_send(&self, link: &Link, staging: &[HostShared; 2], chunks: Chunks, src: usize) -> Result<()> {
        let chunks: Vec<wire::Chunk> = chunks.collect();
        let stage = |b: usize, ch: &wire::Chunk| -> Result<()> {
            // SAFETY: the caller guarantees src..src+len readable (the transfer's bytes); the chunk's
            // range lies inside the transfer; staging[b] holds max_chunk >= range.len() bytes and is
            // written only by the one stager while the sender does not read it (buffer hand-off
            // through the channels below).
            unsafe { self.platform.copy(staging[b].host_ptr(), (src + ch.range.start) as *const u8, ch.range.len()) }
        };
        // SAFETY (both slices below): staging[b] holds range.len() bytes just staged into it, not
        // written again until the buffer is handed back.
        let bytes = |b: usize, n: usize| unsafe { std::slice::from_raw_parts(staging[b].host_ptr(), n) };
        if chunks.len() == 1 {
            let ch = &chunks[0];
            stage(0, ch)?;
            return self.send(link, |c| c.send(&ch.header, bytes(0, ch.range.len())));
        }
        std::thread::scope(|sc| {
            let (full_tx, full_rx) = mpsc::sync_channel::<(usize, Result<()>)>(2);
            let (free_tx, free_rx) = mpsc::sync_channel::<usize>(2);
            let _ = free_tx.send(0);
            let _ = free_tx.send(1);
            let list = &chunks;
            let stage = &stage;
            sc.spawn(move || {
                for ch in list {
                    let Ok(b) = free_rx.recv() else { return };
                    let r = stage(b, ch);
                    let failed = r.is_err();
                    if full_tx.send((b, r)).is_err() || failed {
                        return;
                    }
                }
            });
            for ch in &chunks {
                let (b, r) = full_rx.recv().map_err(|_| Error::new("proxy: the staging thread stopped"))?;
                r?;
                self.send(link, |c| c.send(&ch.header, bytes(b, ch.range.len())))?;
                let _ = free_tx.send(b);
            }
            Ok(())
        })
    }

    // ------------------------------------------------------------ late connections

    /// Serves the listener after setup: every connection opened now is a stranger (the job's
    /// connections are all made at init). A wrong key is refused by the hello; a valid hello is cut
    /// off at its first frame (a bad one is named). Neither ends this PE, and nothing is applied.
    fn listen(self: Arc<Self>, listener: TcpListener, ep: Endpoint) {
        while !self.closing.load(Ordering::Acquire) {
            let mut fds = [libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
            if crate::bootstrap::poll(&mut fds, Some(Duration::from_millis(100))).is_err() || fds[0].revents == 0 {
                continue;
            }
            match tcp::accept(&listener, &ep, Instant::now() + Duration::from_secs(2)) {
                Err(e) => log::error(format!("proxy: {e}")),
                Ok(mut c) => {
                    let peer = c.peer();
                    c.set_io_timeout(Duration::from_secs(2));
                    let why = match c.recv_timeout(Duration::from_secs(2)) {
                        Ok(true) => match c.current() {
                            Ok(m) => format!("its first frame ({}) was not applied", m.kind().name()),
                            Err(e) => e.to_string(),
                        },
                        Ok(false) => "it sent nothing".to_string(),
                        Err(e) => e.to_string(),
                    };
                    log::error(format!(
                        "proxy: PE {}: cut off a connection from {} claiming to be PE {peer}, opened after setup: {why}",
                        self.me,
                        c.peer_addr()
                    ));
                }
            }
        }
    }
}

impl Transport for Proxy {
    fn name(&self) -> &'static str {
        "proxy"
    }
    fn reaches(&self, pe: usize) -> bool {
        self.inner.remote.get(pe).copied().unwrap_or(false)
    }
    fn route_code(&self) -> u8 {
        rshmem_device::state::ROUTE_PROXY
    }
    fn device_channel(&self) -> Option<DeviceChannel> {
        let c = &self.inner.chan;
        let slots = self.inner.slots;
        Some(DeviceChannel {
            ring: RingRef { header: c.device_addr(), slots: slots as u64 },
            ret: c.device_addr() + ring_area(slots) as u64,
            inbound: c.device_addr() + inbound_at(slots) as u64,
        })
    }
    unsafe fn putmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let offset = dst as u64 - platform.heap_base() as u64;
        let r = Request { op: op::PUT, pe: pe as u32, offset, len: bytes as u64, src: src as u64, ..Request::default() };
        self.post_and_wait("rshmem_putmem", &r)
    }
    unsafe fn getmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let offset = src as u64 - platform.heap_base() as u64;
        let r = Request { op: op::GET, pe: pe as u32, offset, len: bytes as u64, src: dst as u64, ..Request::default() };
        self.post_and_wait("rshmem_getmem", &r)
    }
    fn quiet(&self) -> Result<()> {
        let ring = self.host_ring();
        // SAFETY: the ring lives in self.inner.chan.
        let (head, _, _) = unsafe { ring::counters(ring) };
        if head == 0 {
            return Ok(());
        }
        let limit = self.inner.wait_limit;
        // SAFETY: as above.
        unsafe { wait_completed_with(ring, head, ring::deadline(limit)) }
            .map_err(|s| Error::new(format!("rshmem quiet: the proxy did not complete this PE's requests within {limit:?} ({s:?})")))
    }
    fn shutdown(&self, clean: bool) -> Result<()> {
        if !clean {
            self.inner.abort.store(true, Ordering::Release);
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap());
        if threads.is_empty() {
            return Ok(());
        }
        *HOST_CHANNEL.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *LISTEN.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let inner = &self.inner;
        // Everything is complete (the final barrier quieted): stop the drain, then the responders.
        inner.stop.store(true, Ordering::Release);
        let (mut drain, mut rest): (Vec<_>, Vec<_>) = threads.into_iter().partition(|(n, _)| n == "rshmem-proxy-drain");
        for (_, h) in drain.drain(..) {
            let _ = h.join();
        }
        inner.closing.store(true, Ordering::Release);
        for l in inner.links.iter().flatten() {
            l.jobs.lock().unwrap().take();
        }
        let (tx_threads, others): (Vec<_>, Vec<_>) = rest.drain(..).partition(|(n, _)| n.starts_with("rshmem-proxy-tx"));
        for (_, h) in tx_threads {
            let _ = h.join();
        }
        for l in inner.links.iter().flatten() {
            if let Some(c) = l.tx.lock().unwrap().take() {
                if let Err(e) = c.close() {
                    log::debug(format!("proxy: closing the connection to PE {}: {e}", l.peer));
                }
            }
        }
        for (_, h) in others {
            let _ = h.join();
        }
        Ok(())
    }
}

/// The responder's next job: soon after the previous one (`last`), the queue is polled before the
/// responder sleeps in `recv` (`super::poll_briefly`). None: the receiver is gone.
fn next_job(jobs: &mpsc::Receiver<Job>, last: &mut Instant) -> Option<Job> {
    let mut got = None;
    super::poll_briefly(Some(*last), || match jobs.try_recv() {
        Ok(j) => {
            got = Some(Some(j));
            true
        }
        Err(mpsc::TryRecvError::Empty) => false,
        Err(mpsc::TryRecvError::Disconnected) => {
            got = Some(None);
            true
        }
    });
    let j = got.unwrap_or_else(|| jobs.recv().ok());
    *last = Instant::now();
    j
}

#[cfg(test)]
mod tests {
    //! The engine's receiving side against random and mutated frames: whatever a peer sends, the
    //! frames that pass the wire's decoder and the engine's own checks (answers to requests this PE
    //! made) write only inside the heap or inside the destination of a pending GET, and never panic.
    use super::*;
    use crate::backend::Backend;
    use std::sync::atomic::AtomicUsize;

    const HEAP: usize = 1 << 16;
    const LOCAL: usize = 4096;

    /// A platform whose heap and one local buffer are plain memory; every write is checked.
    struct Fake {
        heap: HostShared,
        local: HostShared,
        writes: AtomicUsize,
        /// The engine's inbound queue (host address), set once the engine exists.
        queue: AtomicUsize,
        /// The queue's claim word (outside the heap here: random frames write all over this heap).
        claim: AtomicU64,
    }
    impl Fake {
        fn inside(&self, p: usize, len: usize) -> bool {
            let within = |m: &HostShared, n: usize| p >= m.host_ptr() as usize && p + len <= m.host_ptr() as usize + n;
            within(&self.heap, HEAP) || within(&self.local, LOCAL)
        }
    }
    impl Backend for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn inbound_on_host(&self) -> bool {
            // As the CPU backend: memory is plain memory, and kick_inbound applies the queue at once.
            true
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn heap_base(&self) -> usize {
            self.heap.host_ptr() as usize
        }
        fn heap_size(&self) -> usize {
            HEAP
        }
        fn peer_base(&self, _: usize) -> usize {
            0
        }
        fn zero(&self, _: usize, _: usize) -> Result<()> {
            Ok(())
        }
        fn quiet(&self) -> Result<()> {
            Ok(())
        }
        unsafe fn putmem(&self, _: *mut u8, _: *const u8, _: usize, _: i32) -> Result<()> {
            unreachable!()
        }
        unsafe fn getmem(&self, _: *mut u8, _: *const u8, _: usize, _: i32) -> Result<()> {
            unreachable!()
        }
        unsafe fn copy_in(&self, _: *mut u8, _: &[u8]) -> Result<()> {
            unreachable!()
        }
        unsafe fn copy_out(&self, _: &mut [u8], _: *const u8) -> Result<()> {
            unreachable!()
        }
        unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<()> {
            if self.inside(dst as usize, len) {
                self.writes.fetch_add(1, Ordering::Relaxed);
            } else {
                // Not a write into our memory: then it is a read of the heap (a GET's bytes) into a
                // buffer of the engine's own, and the read must lie inside the heap.
                let h = self.heap.host_ptr() as usize;
                assert!(src as usize >= h && src as usize + len <= h + HEAP, "a copy of {len} bytes from {src:p} to {dst:p}: neither a write into the heap or local buffer nor a read of the heap");
            }
            // SAFETY: dst checked inside our memory; src is the frame's payload.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
            Ok(())
        }
        fn kick_inbound(&self) -> Result<()> {
            // The queued operation must name a range inside the heap (the engine checked it before
            // queueing): look before applying it as device threads would.
            let q = self.queue.load(Ordering::Acquire);
            let heap = self.heap.host_ptr() as usize;
            if q != 0 {
                for i in 0..inbound::SLOTS as usize {
                    // SAFETY: q is the engine's queue (set by engine()); the body is read only.
                    let op = unsafe { std::ptr::read_volatile((q + i * inbound::SLOT_BYTES) as *const InboundOp) };
                    if op.seq != 0 && op.done != op.seq {
                        assert!(self.inside(heap + op.offset as usize, op.width as usize), "inbound op at heap offset {:#x}", op.offset);
                        self.writes.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // SAFETY: the queue and the heap of this test's engine; ranges checked just above.
                unsafe { inbound::progress_at(q, heap, self.claim.as_ptr(), u32::MAX) };
            }
            Ok(())
        }

    }

    use super::super::test_rng::Rng;

    fn engine() -> (Arc<Inner>, Arc<Fake>) {
        let fake = Arc::new(Fake { heap: HostShared::host_alloc(HEAP).unwrap(), local: HostShared::host_alloc(LOCAL).unwrap(), writes: AtomicUsize::new(0), queue: AtomicUsize::new(0), claim: AtomicU64::new(0) });
        let slots = 64;
        let chan = HostShared::host_alloc(inbound_at(slots) + inbound::queue_bytes()).unwrap();
        // SAFETY: fresh zeroed memory of the right size; chan lives in Inner with the Completion.
        unsafe { ring::init_ring(chan.host_ptr(), ring_area(slots), slots).unwrap() };
        // SAFETY: as above.
        let completion = unsafe { Completion::attach(chan.host_ptr()) };
        let link = Link {
            peer: 1,
            tx: Mutex::new(None),
            pending: Mutex::new(Pending::default()),
            jobs: Mutex::new(None),
            closed: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            nic: Mutex::new(NicLink::default()),
        };
        let inner = Inner {
            me: 0,
            npes: 2,
            heap_base: fake.heap.host_ptr() as u64,
            heap_size: HEAP as u64,
            platform: fake.clone(),
            remote: vec![false, true],
            chan,
            slots,
            completion,
            links: vec![None, Some(link)],
            stop: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            max_chunk: wire::MIN_CHUNK,
            wait_limit: Duration::from_secs(1),
            inbound_next: Mutex::new(0),
            nic: Some(NicHooks { regions: nic_regions(&fake), answer: Box::new(|_, _, _| {}) }),
        };
        fake.queue.store(inner.chan.host_ptr() as usize + inbound_at(slots), Ordering::Release);
        (Arc::new(inner), fake)
    }

    /// The emulated NIC's key of the test heap's first half (the second half is not registered).
    const NIC_KEY: u32 = 7;

    fn nic_regions(fake: &Fake) -> Arc<MrTable> {
        let r = Arc::new(MrTable::new());
        // SAFETY: the first half of the fake heap, alive as long as the engine under test.
        unsafe { r.register(NIC_KEY, fake.heap.host_ptr(), HEAP as u64 / 2, Access::ALL) }.unwrap();
        r
    }

    #[test]
    fn random_frames_write_only_inside_the_heap_or_a_pending_destination() {
        let (inner, fake) = engine();
        let link = inner.links[1].as_ref().unwrap();
        let ctx = wire::Context { me: 0, peer: 1, npes: 2, heap_size: HEAP as u64, max_chunk: wire::MIN_CHUNK };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut applied, mut refused, mut nic_applied) = (0, 0, 0u64);
        let edge = |rng: &mut Rng| match rng.below(5) {
            0 => rng.below(HEAP as u64 + 64),
            1 => HEAP as u64 - rng.below(16),
            2 => u64::MAX - rng.below(16),
            3 => 8 * rng.below(HEAP as u64 / 8),
            _ => rng.next(),
        };
        let payload = vec![0xabu8; wire::MIN_CHUNK as usize + 64];
        for i in 0..100_000u64 {
            // Some GETs of this PE await answers into the local buffer (seq 1..=8, ranges of the heap).
            if i % 1000 == 0 {
                let mut p = link.pending.lock().unwrap();
                p.gets.clear();
                for seq in 1..=8u64 {
                    let len = 1 + rng.below(LOCAL as u64 - 1);
                    let offset = rng.below(HEAP as u64 - len);
                    p.gets.insert(seq, PendingGet { dst: fake.local.host_ptr() as u64, offset, len, got: 0, ret: None });
                }
            }
            let mut h = wire::OpHeader {
                kind: 1 + rng.below(wire::Kind::ALL.len() as u64) as u8,
                flags: rng.below(2) as u8,
                op: rng.below(14) as u8,
                width: [0u8, 4, 8, 3][rng.below(4) as usize],
                src_pe: if rng.below(20) == 0 { rng.below(3) as u32 } else { 1 },
                seq: rng.below(10),
                offset: edge(&mut rng),
                len: [rng.below(64), rng.below(wire::MIN_CHUNK as u64 + 2), edge(&mut rng)][rng.below(3) as usize],
                payload_len: 0,
                key: 0,
                value: if rng.below(2) == 0 { rng.below(1 << 32) } else { rng.next() },
                compare: if rng.below(3) == 0 { rng.below(1 << 32) } else { 0 },
                signal_offset: edge(&mut rng),
            };
            h.payload_len = if rng.below(4) == 0 { rng.below(wire::MIN_CHUNK as u64 + 64) as u32 } else { h.len.min(u32::MAX as u64) as u32 };
            // Clear, now and then, the fields a kind does not use, so that many frames pass the decoder.
            if rng.below(2) == 0 {
                let (k, _) = (h.kind, 0);
                if !matches!(k, 2 | 7) {
                    h.signal_offset = 0;
                }
                if !matches!(k, 5) {
                    h.compare = 0;
                }
                if !matches!(k, 5 | 6) {
                    h.width = 0;
                }
                if !matches!(k, 2 | 5 | 7) {
                    h.op = 0;
                }
                if matches!(k, 3 | 5 | 6 | 7 | 8 | 9 | 10 | 11 | 13) {
                    h.payload_len = 0;
                }
                if matches!(k, 6 | 7 | 8 | 9 | 10 | 13 | 12) {
                    h.offset = 0;
                    h.len = 0;
                }
                if matches!(k, 3 | 8 | 9 | 10 | 12 | 13 | 1 | 4) {
                    h.value = 0;
                }
                if matches!(k, 12) {
                    h.payload_len = rng.below(64) as u32;
                }
                // Data frames mostly well formed: a small payload inside the heap.
                if matches!(k, 1 | 2 | 4) && rng.below(4) != 0 {
                    h.len = rng.below(64);
                    h.offset = rng.below(HEAP as u64 - h.len + 8);
                    h.payload_len = h.len as u32;
                }
                // NIC frames: a remote address near the registered half, under its key or another.
                if matches!(k, 14..=16) {
                    h.key = if rng.below(4) != 0 { NIC_KEY } else { rng.below(16) as u32 };
                    h.len = if k == 16 { 0 } else { rng.below(80) };
                    h.offset = fake.heap.host_ptr() as u64 + rng.below(HEAP as u64 / 2 + 64) - 8;
                    h.payload_len = if k == 14 { h.len as u32 } else { 0 };
                    if k == 16 {
                        let kind = 1 + rng.below(6) as u8;
                        h.op = kind;
                        h.width = rshmem_ibgda::Atomic::kind_shape(kind).map_or(8, |s| s.0 as u8);
                        h.offset &= !7;
                        (h.value, h.compare, h.signal_offset) = (rng.below(1 << 20), rng.below(4), 0);
                        if kind == 1 {
                            h.compare = 0;
                        }
                    }
                }
                if matches!(k, 17 | 18) {
                    h.key = 0;
                }
            }
            let plen = (h.payload_len as usize).min(payload.len());
            let frame = wire::encode_frame(&h, &payload[..plen]);
            match wire::decode_frame(&frame, &ctx) {
                Ok(m) => {
                    if matches!(m, Message::Close) {
                        continue;
                    }
                    let nic = matches!(m.kind(), wire::Kind::NicWrite | wire::Kind::NicRead | wire::Kind::NicAtomic);
                    match inner.apply(link, m) {
                        Ok(_) => {
                            applied += 1;
                            nic_applied += nic as u64;
                        }
                        Err(e) => {
                            assert!(e.message().contains("PE 1"), "{e}");
                            refused += 1
                        }
                    }
                }
                Err(e) => assert!(e.message().contains("PE 1"), "{e}"),
            }
        }
        assert!(applied > 1000 && refused > 100, "applied {applied}, refused {refused}: the generator misses the interesting frames");
        assert!(nic_applied > 1000, "only {nic_applied} NIC frames reached the responder");
        assert!(fake.writes.load(Ordering::Relaxed) > 1000, "too few frames wrote anything");
    }

    #[test]
    fn answers_outside_the_request_are_refused() {
        let (inner, fake) = engine();
        let link = inner.links[1].as_ref().unwrap();
        let dst = fake.local.host_ptr() as u64;
        link.pending.lock().unwrap().gets.insert(5, PendingGet { dst, offset: 0x100, len: 16, got: 0, ret: None });
        let data = [7u8; 16];
        for (offset, len, what) in [(0xf8u64, 16usize, "outside the requested"), (0x108, 16, "outside the requested"), (0x100, 0, "")] {
            let m = Message::GetResponse { seq: 5, offset, data: &data[..len], last: false };
            let r = inner.apply(link, m);
            if what.is_empty() {
                r.unwrap();
            } else {
                assert!(r.unwrap_err().message().contains(what));
            }
        }
        let e = inner.apply(link, Message::GetResponse { seq: 6, offset: 0x100, data: &data, last: true }).unwrap_err();
        assert!(e.message().contains("did not ask"), "{e}");
        let e = inner.apply(link, Message::AmoResponse { seq: 9, width: Width::W8, value: 1 }).unwrap_err();
        assert!(e.message().contains("did not ask"), "{e}");
        // Short answer: the last chunk arrives with bytes missing.
        let e = inner.apply(link, Message::GetResponse { seq: 5, offset: 0x100, data: &data[..8], last: true }).unwrap_err();
        assert!(e.message().contains("8 of 16 bytes"), "{e}");
        // A complete one completes the request and lands in the destination.
        link.pending.lock().unwrap().gets.insert(1, PendingGet { dst, offset: 0x200, len: 16, got: 0, ret: None });
        inner.apply(link, Message::GetResponse { seq: 1, offset: 0x200, data: &data, last: true }).unwrap();
        assert_eq!(inner.completion.completed(), 1);
        // SAFETY: the local buffer holds LOCAL bytes.
        assert_eq!(unsafe { std::slice::from_raw_parts(fake.local.host_ptr(), 16) }, &data);
    }
}
