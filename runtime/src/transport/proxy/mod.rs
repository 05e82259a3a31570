//! The proxy transport: every PE on another node is reached through this PE's CPU proxy.
//!
//! # Shape
//! - **Channels.** Each PE has `RSHMEM_PROXY_CHANNELS` channels (`ring`, layout in
//!   `rshmem_device::remote::proxy`): a request ring with its return area and staging chunks in
//!   `Services::host_shared` memory (pinned and mapped on CUDA), and its counters in device memory. A
//!   warp always posts to the same channel (`rshmem_device::remote::channel_of`); host threads (the
//!   host API, the on-stream calls) post to channel 0.
//! - **Engines** ([`engine`]): one per channel, with its drain thread and, per connection, a receiver
//!   and a responder; what a peer's frames do to this PE's heap is [`target`]'s (shared by the
//!   channels, with the inbound queue); the per-peer state is [`link`]'s.
//! - **Connections** ([`setup`], [`tcp`], [`accept`]). One TCP connection per pair of PEs on different nodes and
//!   per channel (its *lane*; lower PE connects, higher accepts; hello with the job key). Channel `c`
//!   of every PE sends on lane `c`, so a channel's frames to a peer arrive in order, which gives the
//!   order of one thread's requests to one PE (`fence` with one channel) for free. Frames are the
//!   wire's (`transport::wire`), validated on receipt by its decoder: nothing outside the heap is ever
//!   written. The listener serves all its connections at once, at setup and after it (a listener
//!   thread then refuses, or with a valid hello cuts off, every connection: the job's are all made);
//!   its warnings about strangers are rate-limited.
//! - **Providers.** The engine talks to its peers through `link::FrameLink` (send, queue and flush
//!   frames, receive one, close), implemented by the TCP provider's `tcp::Connection`; only the setup
//!   is TCP's. With the `verbs` feature and a usable NIC ([`provider`]: `RSHMEM_PROXY_PROVIDER`, the
//!   host checks, a job-wide agreement), each engine also gets an RDMA path (`engine::Rdma`, the
//!   `verbs` module, planned by `rdma`): RDMA WRITE/READ/atomics on an RC QP per peer, with the TCP
//!   connections kept for what the NIC cannot do. A verbs setup that fails on any PE leaves every PE
//!   on TCP (auto) or stops the job (`verbs` asked for).
//! - **Extensions.** The IBGDA transport runs this engine with its emulated NIC's responder
//!   (`engine::Extension`, on channel 0's engine), which serves the NIC frames; the proxy itself knows
//!   no NIC.

pub mod accept;
pub mod connect;
pub mod engine;
pub mod link;
pub mod provider;
#[cfg(feature = "verbs")]
pub(crate) mod rdma;
pub mod ring;
pub mod setup;
pub mod target;
pub mod stats;
pub mod tcp;
#[cfg(test)]
mod tests;
#[cfg(feature = "verbs")]
pub(crate) mod verbs;

use crate::config::env;
use crate::error::{Error, Result};
use crate::log;
use crate::platform::backend::Backend;
use crate::transport::interface::{DeviceChannel, RemoteSetup, Transport};
use crate::transport::proxy::engine::{Engine, Extension};
use crate::transport::proxy::link::{FrameLink, Link};
use crate::transport::proxy::provider::{Provider, Want};
use crate::transport::proxy::ring::{Channel, Request};
use crate::transport::proxy::target::Target;
use crate::transport::proxy::tcp::{Connection, Endpoint};
use crate::transport::wire::{self, AmoOp};
use rshmem_device::remote::proxy::{amo, op, post_with, wait_completed_with, DEFAULT_CHUNK, HEAD_OFF};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

// The wire forwards device AMO codes unchanged.
const _: () = {
    assert!(amo::FETCH as u8 == AmoOp::Fetch as u8 && amo::SET as u8 == AmoOp::Set as u8);
    assert!(amo::COMPARE_SWAP as u8 == AmoOp::CompareSwap as u8 && amo::XOR as u8 == AmoOp::Xor as u8);
    assert!(amo::FETCH_ADD as u8 == AmoOp::FetchAdd as u8 && amo::LAST as u8 == AmoOp::Xor as u8);
};

/// Default slots of a channel's request ring (`RSHMEM_PROXY_SLOTS`).
pub const DEFAULT_SLOTS: usize = 4096;
/// Keepalive period of the peer connections (`tcp::Connection::set_liveness`).
const LIVENESS: Duration = Duration::from_secs(1);
/// Most channels `RSHMEM_PROXY_CHANNELS=auto` gives a PE.
const AUTO_CHANNELS: usize = 4;

/// The proxy transport of one PE.
pub struct Proxy {
    engines: Vec<Arc<Engine>>,
    target: Arc<Target>,
    /// `remote[pe]`: the proxy reaches PE `pe` (it is on another node).
    remote: Vec<bool>,
    threads: Mutex<Vec<(String, JoinHandle<()>)>>,
    /// The verbs provider's shared state (heap keys), for heap growth.
    #[cfg(feature = "verbs")]
    verbs: Option<Arc<verbs::Shared>>,
}

/// This process's first proxy channel as host threads address it — for tests and tools that post
/// requests the way device code does. None when no proxy transport is running.
static HOST_CHANNEL: Mutex<Option<Channel>> = Mutex::new(None);
/// This process's proxy listen address, while a proxy transport runs.
static LISTEN: Mutex<Option<SocketAddr>> = Mutex::new(None);

/// The running proxy's first channel (host addresses; its counters are host memory on the CPU
/// backend only), for tests and tools that post requests as device code does
/// (`rshmem_device::remote::proxy::post`); None without a proxy.
pub fn host_channel() -> Option<Channel> {
    *HOST_CHANNEL.lock().unwrap_or_else(|e| e.into_inner())
}
/// The address the running proxy listens on (None without a proxy).
pub fn listen_addr() -> Option<SocketAddr> {
    *LISTEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The registry's constructor (`RSHMEM_REMOTE_TRANSPORT=proxy`), with the provider
/// `RSHMEM_PROXY_PROVIDER` and the NIC decide (verbs when usable on every PE, else TCP). Collective:
/// every PE calls it.
pub fn create(s: &RemoteSetup) -> Result<Box<dyn Transport>> {
    Ok(Box::new(Proxy::build(s, None, true)?))
}

/// The provider the PEs agree on (collective): each PE's own choice (`RSHMEM_PROXY_PROVIDER`, its
/// NIC) all-gathered with its reason, then `provider::agree`. Returns it and what was asked for.
fn agree_provider(s: &RemoteSetup) -> Result<(Provider, Want)> {
    let boot = s.boot;
    let want = provider::parse_want(env::get(env::PROXY_PROVIDER).as_deref()).map_err(Error::new)?;
    let (mine, why) = provider::local_choice(want, &provider::verbs_usable_on(boot.pe()));
    let all = boot.allgather("rshmem_init (proxy provider)", &[&[mine.code()][..], why.as_bytes()].concat())?;
    let mut choices = Vec::with_capacity(all.len());
    for (pe, b) in all.iter().enumerate() {
        let p = b.first().and_then(|&c| Provider::from_code(c)).ok_or_else(|| Error::new(format!("PE {pe} sent {b:?} as its proxy provider")))?;
        choices.push((p, String::from_utf8_lossy(&b[1..]).into_owned()));
    }
    let (p, note) = provider::agree(want, &choices).map_err(Error::new)?;
    log::info(format!("proxy provider: {} ({why})", p.name()));
    if let (Some(n), 0) = (note, boot.pe()) {
        log::warn(n);
    }
    Ok((p, want))
}

/// Collective: the verbs provider on every PE's engines, or the agreed failure (`provider::SETUP_FAILED`).
#[cfg(feature = "verbs")]
fn start_verbs(s: &RemoteSetup, engines: &mut [Engine], remote: &[bool], explicit: bool) -> Result<Option<Arc<verbs::Shared>>> {
    verbs::setup(s, engines, remote, explicit).map(Some)
}

/// Without the `verbs` feature the setup fails alike on every PE (a PE can only get here through the
/// test hook `provider::VERBS_HOOK`).
#[cfg(not(feature = "verbs"))]
fn start_verbs(s: &RemoteSetup, _engines: &mut [Engine], _remote: &[bool], _explicit: bool) -> Result<Option<()>> {
    provider::agree_step(s.boot, "opening the NIC", Err("this build of rshmem lacks the `verbs` feature".into()))?;
    Ok(None)
}

/// The channels this PE asks for: `RSHMEM_PROXY_CHANNELS`, or (auto) one per two CPUs this process
/// may use per PE of its node, from 1 to `AUTO_CHANNELS`.
fn wanted_channels(local_pes: usize) -> Result<usize> {
    if let Some(v) = env::get(env::PROXY_CHANNELS) {
        if let Some(n) = env::parse_proxy_channels(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::PROXY_CHANNELS)))? {
            return Ok(n);
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok((cpus / (2 * local_pes.max(1))).clamp(1, AUTO_CHANNELS))
}

impl Proxy {
    /// Channel 0's engine, for an extension's sending side (the emulated NIC's).
    pub(crate) fn engine(&self) -> Arc<Engine> {
        self.engines[0].clone()
    }

    /// Collective: sets up the channels, listens, exchanges listen addresses through the bootstrap,
    /// connects to every PE on another node (one connection per channel) and starts the threads.
    /// `ext`: the frames an extension serves (the emulated NIC's, when the IBGDA transport runs the
    /// engine).
    pub(crate) fn new(s: &RemoteSetup, ext: Option<Arc<dyn Extension>>) -> Result<Proxy> {
        Proxy::build(s, ext, false)
    }

    /// [`Proxy::new`], choosing the provider (`choose`: verbs when agreed, else TCP) or TCP only.
    fn build(s: &RemoteSetup, ext: Option<Arc<dyn Extension>>, choose: bool) -> Result<Proxy> {
        let boot = s.boot;
        let (me, n) = (boot.pe() as u32, boot.npes() as u32);
        let slots = match env::get(env::PROXY_SLOTS) {
            Some(v) => env::parse_proxy_slots(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::PROXY_SLOTS)))?,
            None => DEFAULT_SLOTS,
        };
        let wanted = wanted_channels(boot.node_pes().len())?;
        s.services.prepare_proxy()?;
        let remote: Vec<bool> = (0..n as usize).map(|pe| !boot.node_pes().contains(&pe)).collect();

        let (listener, listen, addrs, channels) = setup::listen(boot, wanted)?;
        let ep = Endpoint { key: boot.job_key(), pe: me, npes: n, heap_size: s.platform.heap_size() as u64, max_chunk: wire::DEFAULT_MAX_CHUNK };
        let conns = setup::connect_all(boot, &listener, &addrs, &ep, &remote, channels)?;
        let mut conns: Vec<std::vec::IntoIter<Connection>> = conns.into_iter().map(|v| v.into_iter()).collect();

        let wait_limit = env::wait_timeout().ok().flatten().unwrap_or(Duration::from_secs(365 * 24 * 3600));
        let target = Arc::new(Target::new(me, s.platform.clone(), s.services.clone(), wait_limit)?);
        let (mut provider, want) = if choose { agree_provider(s)? } else { (Provider::Tcp, Want::Tcp) };
        let mut engines = Vec::with_capacity(channels);
        // Per channel: its receiving halves (with an applier each) and its responders' queues.
        let mut receivers = Vec::new();
        for c in 0..channels {
            let mut links = Vec::with_capacity(n as usize);
            let mut halves = Vec::new();
            let mut job_rx = Vec::new();
            for (q, lane) in conns.iter_mut().enumerate() {
                match lane.next() {
                    Some(conn) => {
                        // A peer host that vanishes without closing is noticed within about 4 s when
                        // the connection is quiet, 10 s with data in flight.
                        conn.set_liveness(LIVENESS, Duration::from_secs(10))?;
                        let (tx, rx) = conn.split()?;
                        let (jtx, jrx) = mpsc::channel();
                        links.push(Some(Link::new(q as u32, Some(Box::new(tx)), Some(jtx))));
                        halves.push((Box::new(rx) as Box<dyn FrameLink>, target.applier()?));
                        job_rx.push((q, jrx));
                    }
                    None => links.push(None),
                }
            }
            let e = Engine::new(target.clone(), c, n, slots, DEFAULT_CHUNK, links, wire::DEFAULT_MAX_CHUNK, if c == 0 { ext.clone() } else { None })?;
            engines.push(e);
            receivers.push((halves, job_rx));
        }
        #[allow(unused_variables)]
        let verbs = match provider {
            Provider::Tcp => None,
            Provider::Verbs => match start_verbs(s, &mut engines, &remote, want == Want::Verbs) {
                Ok(v) => v,
                // Agreed: every PE got it, so every PE goes on over TCP alike.
                Err(e) if want != Want::Verbs && provider::agreed_setup_failure(&e) => {
                    if me == 0 {
                        log::warn(format!("{e}; every PE's proxy uses TCP instead ({}=verbs stops the job here instead)", env::PROXY_PROVIDER));
                    }
                    provider = Provider::Tcp;
                    None
                }
                Err(e) => return Err(e),
            },
        };
        let engines: Vec<Arc<Engine>> = engines.into_iter().map(Arc::new).collect();
        let mut threads = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| -> Result<(String, JoinHandle<()>)> {
            let h = std::thread::Builder::new().name(name.clone()).spawn(f).map_err(|e| Error::os(format!("proxy: starting thread {name}"), e))?;
            Ok((name, h))
        };
        for (c, (halves, job_rx)) in receivers.into_iter().enumerate() {
            let engine = &engines[c];
            for (rx, ap) in halves {
                let q = rx.peer();
                let i = engine.clone();
                threads.push(spawn(format!("rshmem-proxy{c}-rx{q}"), Box::new(move || i.receive(rx, ap)))?);
            }
            for (q, jrx) in job_rx {
                let i = engine.clone();
                threads.push(spawn(format!("rshmem-proxy{c}-tx{q}"), Box::new(move || i.respond(q, jrx)))?);
            }
            // The drain's staging buffers are made here, before the threads start, so that init has
            // allocated all it will (a caller measuring memory after init sees the same every time).
            let i = engine.clone();
            let st = engine.staging()?;
            threads.push(spawn(format!("rshmem-proxy{c}-drain"), Box::new(move || i.drain(st)))?);
        }
        let t = target.clone();
        threads.push(spawn("rshmem-proxy-listen".into(), Box::new(move || setup::serve_late(t, listener, ep)))?);
        log::info(format!("proxy: PE {me} listens on {listen}, {channels} channels of {slots} slots, over {}", provider.name()));
        let p = Proxy {
            engines,
            target,
            remote,
            threads: Mutex::new(threads),
            #[cfg(feature = "verbs")]
            verbs,
        };
        *HOST_CHANNEL.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.engines[0].host_channel());
        *LISTEN.lock().unwrap_or_else(|e| e.into_inner()) = Some(listen);
        Ok(p)
    }

    /// Posts `r` from a host thread and waits for its completion.
    fn post_and_wait(&self, call: &str, r: &Request) -> Result<()> {
        // On GPUs the request is posted by a GPU thread (see `Services::post_request`), which also
        // waits for its completion.
        // SAFETY: the caller checked the request; its buffers stay valid until this returns.
        if unsafe { self.target.services().post_request(r, None) }.map_err(|e| e.context(format!("{call}: proxy request to PE {}", r.pe)))? {
            return Ok(());
        }
        let ch = self.engines[0].host_channel();
        let limit = self.target.wait_limit;
        // SAFETY: the channel is set up in engine 0's memory, which lives as long as self; its counters
        // are host memory here (the platform posts itself otherwise, above).
        let seq = unsafe { post_with(&ch, r, ring::deadline(limit)) }
            .map_err(|s| Error::new(format!("{call}: proxy request to PE {}: no free slot in the request ring within {limit:?} ({s:?})", r.pe)))?;
        // SAFETY: as above.
        unsafe { wait_completed_with(&ch, seq, ring::deadline(limit)) }
            .map_err(|s| Error::new(format!("{call}: proxy request to PE {}: not completed within {limit:?} ({s:?})", r.pe)))
    }
}

impl Transport for Proxy {
    fn name(&self) -> &'static str {
        "proxy"
    }
    fn register(&self, c: crate::node::exchange::Collective, range: std::ops::Range<usize>) -> Result<()> {
        #[cfg(feature = "verbs")]
        if let Some(v) = &self.verbs {
            return v.register(c, range);
        }
        let _ = (c, range);
        Ok(())
    }
    fn reaches(&self, pe: usize) -> bool {
        self.remote.get(pe).copied().unwrap_or(false)
    }
    fn route_code(&self) -> u8 {
        rshmem_device::state::ROUTE_PROXY
    }
    fn device_channel(&self) -> Option<DeviceChannel> {
        Some(DeviceChannel { channels: self.engines.iter().map(|e| e.device_channel()).collect(), inbound: self.target.queue_device_addr() })
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
        let limit = self.target.wait_limit;
        for e in &self.engines {
            // SAFETY: the counters are the engine's device memory (alive with it), read as a whole word.
            let head = unsafe { self.target.services().load_u64(e.counters.addr + HEAD_OFF as u64)? };
            if head == 0 {
                continue;
            }
            // SAFETY: the ring header lives in the engine's memory, alive with self.
            unsafe { ring::wait_completed_host(e.host_channel().ring_ref(), head, limit) }.map_err(|(seq, c)| {
                Error::new(format!(
                    "rshmem quiet: the proxy did not complete this PE's requests on channel {} within {limit:?} (waiting for {seq}, completed {c})",
                    e.index
                ))
            })?;
        }
        Ok(())
    }
    fn shutdown(&self, clean: bool) -> Result<()> {
        if !clean {
            for e in &self.engines {
                e.abort.store(true, Ordering::Release);
            }
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap());
        if threads.is_empty() {
            return Ok(());
        }
        *HOST_CHANNEL.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *LISTEN.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // Everything is complete (the final barrier quieted): stop the drains, then the responders.
        for e in &self.engines {
            e.stop.store(true, Ordering::Release);
        }
        let (mut drain, mut rest): (Vec<_>, Vec<_>) = threads.into_iter().partition(|(n, _)| n.ends_with("-drain"));
        for (_, h) in drain.drain(..) {
            let _ = h.join();
        }
        self.target.closing.store(true, Ordering::Release);
        let links = || self.engines.iter().flat_map(|e| e.links.iter().flatten());
        for l in links() {
            l.jobs.lock().unwrap().take();
        }
        let (tx_threads, others): (Vec<_>, Vec<_>) = rest.drain(..).partition(|(n, _)| n.contains("-tx"));
        for (_, h) in tx_threads {
            let _ = h.join();
        }
        for l in links() {
            if let Some(c) = l.tx.lock().unwrap().take() {
                if let Err(e) = c.close() {
                    log::debug(format!("proxy: closing the connection to PE {}: {e}", l.peer));
                }
            }
        }
        for (_, h) in others {
            let _ = h.join();
        }
        if let Some(line) = stats::report() {
            eprintln!("rshmem proxy stats [PE {}]: {line}", self.target.me);
        }
        Ok(())
    }
}
