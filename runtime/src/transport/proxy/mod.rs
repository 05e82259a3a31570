//! The proxy transport: every PE on another node is reached through this PE's CPU proxy.
//!
//! # Shape
//! - **Channel.** One request ring per PE (`ring`, layout in `rshmem_device::remote::proxy`), its
//!   return area and the inbound queue, in `Services::host_shared` memory (pinned and mapped on CUDA).
//!   Device threads and host threads (`putmem`/`getmem`/`quiet` here, the on-stream calls) post into
//!   the same ring.
//! - **Engine** ([`engine`]): the drain thread, per connection a receiver and a responder; what a
//!   peer's frames do to this PE's heap is [`target`]'s; the per-peer state is [`link`]'s.
//! - **Connections** ([`setup`], [`tcp`], [`accept`]). One TCP connection per pair of PEs on different
//!   nodes (lower PE connects, higher accepts; hello with the job key). One connection per pair carries every frame
//!   between them in order, which gives `fence` (per-target ordering) for free. Frames are the wire's
//!   (`transport::wire`), validated on receipt by its decoder: nothing outside the heap is ever
//!   written. The listener serves all its connections at once, at setup and after it (a listener
//!   thread then refuses, or with a valid hello cuts off, every connection: the job's are all made);
//!   its warnings about strangers are rate-limited.
//! - **Providers.** The engine talks to its peers through `link::FrameLink` (send a frame, receive
//!   one, close), implemented by the TCP provider's `tcp::Connection`; only the setup is TCP's.
//! - **Extensions.** The IBGDA transport runs this engine with its emulated NIC's responder
//!   (`engine::Extension`), which serves the NIC frames; the proxy itself knows no NIC.
//!
//! Not done yet: several connections (lanes) per pair.

pub mod accept;
pub mod engine;
pub mod link;
pub mod ring;
pub mod setup;
pub mod target;
pub mod tcp;
#[cfg(test)]
mod tests;

use crate::config::env;
use crate::error::{Error, Result};
use crate::log;
use crate::platform::backend::Backend;
use crate::transport::interface::{DeviceChannel, RemoteSetup, Transport};
use crate::transport::proxy::engine::{inbound_at, ring_area, Engine, Extension};
use crate::transport::proxy::link::{FrameLink, Link};
use crate::transport::proxy::ring::{Request, RingRef};
use crate::transport::proxy::target::Target;
use crate::transport::proxy::tcp::Endpoint;
use crate::transport::wire::{self, AmoOp};
use rshmem_device::remote::inbound;
use rshmem_device::remote::proxy::{amo, op, post_with, wait_completed_with};
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

/// Default slots of the request ring (`RSHMEM_PROXY_SLOTS`).
pub const DEFAULT_SLOTS: usize = 4096;
/// Keepalive period of the peer connections (`tcp::Connection::set_liveness`).
const LIVENESS: Duration = Duration::from_secs(1);

/// The proxy transport of one PE.
pub struct Proxy {
    inner: Arc<Engine>,
    /// `remote[pe]`: the proxy reaches PE `pe` (it is on another node).
    remote: Vec<bool>,
    threads: Mutex<Vec<(String, JoinHandle<()>)>>,
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

impl Proxy {
    /// The engine, for an extension's sending side (the emulated NIC's).
    pub(crate) fn engine(&self) -> Arc<Engine> {
        self.inner.clone()
    }

    /// Collective: sets up the channel, listens, exchanges listen addresses through the bootstrap,
    /// connects to every PE on another node and starts the threads. `ext`: the frames an extension
    /// serves (the emulated NIC's, when the IBGDA transport runs the engine).
    pub(crate) fn new(s: &RemoteSetup, ext: Option<Arc<dyn Extension>>) -> Result<Proxy> {
        let boot = s.boot;
        let (me, n) = (boot.pe() as u32, boot.npes() as u32);
        let slots = match env::get(env::PROXY_SLOTS) {
            Some(v) => env::parse_proxy_slots(&v).map_err(|e| Error::new(format!("{}={v:?}: {e}", env::PROXY_SLOTS)))?,
            None => DEFAULT_SLOTS,
        };
        s.services.prepare_proxy()?;
        let chan = s.services.host_shared(inbound_at(slots) + inbound::queue_bytes())?;
        // SAFETY: chan is ours, zeroed, 64-aligned and holds ring_bytes(slots); nobody posts yet.
        unsafe { ring::init_ring(chan.host_ptr(), ring_area(slots), slots)? };
        let remote: Vec<bool> = (0..n as usize).map(|pe| !boot.node_pes().contains(&pe)).collect();

        let (listener, listen, addrs) = setup::listen(boot)?;
        let ep = Endpoint { key: boot.job_key(), pe: me, npes: n, heap_size: s.platform.heap_size() as u64, max_chunk: wire::DEFAULT_MAX_CHUNK };
        let conns = setup::connect_all(boot, &listener, &addrs, &ep, &remote)?;

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
                    links.push(Some(Link::new(q as u32, Some(Box::new(tx)), Some(jtx))));
                    halves.push(Box::new(rx) as Box<dyn FrameLink>);
                    job_rx.push((q, jrx));
                }
                None => links.push(None),
            }
        }
        let wait_limit = env::wait_timeout().ok().flatten().unwrap_or(Duration::from_secs(365 * 24 * 3600));
        let queue = chan.host_ptr() as usize + inbound_at(slots);
        let target = Target::new(me, s.platform.clone(), s.services.clone(), queue, wait_limit);
        let inner = Arc::new(Engine::new(target, n, chan, slots, links, wire::DEFAULT_MAX_CHUNK, ext));
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
        for (q, jrx) in job_rx {
            let i = inner.clone();
            threads.push(spawn(format!("rshmem-proxy-tx{q}"), Box::new(move || i.respond(q, jrx)))?);
        }
        // The drain's staging buffers are made here, before the threads start, so that init has
        // allocated all it will (a caller measuring memory after init sees the same every time).
        let i = inner.clone();
        let st = inner.staging()?;
        threads.push(spawn("rshmem-proxy-drain".into(), Box::new(move || i.drain(st)))?);
        let i = inner.clone();
        threads.push(spawn("rshmem-proxy-listen".into(), Box::new(move || setup::serve_late(i, listener, ep)))?);
        log::info(format!("proxy: PE {me} listens on {listen}"));
        let p = Proxy { inner, remote, threads: Mutex::new(threads) };
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
        // On GPUs the request is posted by a GPU thread (see `Services::post_request`), which also
        // waits for its completion.
        // SAFETY: the caller checked the request; its buffers stay valid until this returns.
        if unsafe { self.inner.target.services().post_request(r, None) }.map_err(|e| e.context(format!("{call}: proxy request to PE {}", r.pe)))? {
            return Ok(());
        }
        let ring = self.host_ring();
        let limit = self.inner.target.wait_limit;
        // SAFETY: the ring is set up in self.inner.chan, which lives as long as self.
        let seq = unsafe { post_with(ring, r, ring::deadline(limit)) }
            .map_err(|s| Error::new(format!("{call}: proxy request to PE {}: no free slot in the request ring within {limit:?} ({s:?})", r.pe)))?;
        // SAFETY: as above.
        unsafe { wait_completed_with(ring, seq, ring::deadline(limit)) }
            .map_err(|s| Error::new(format!("{call}: proxy request to PE {}: not completed within {limit:?} ({s:?})", r.pe)))
    }
}

impl Transport for Proxy {
    fn name(&self) -> &'static str {
        "proxy"
    }
    fn reaches(&self, pe: usize) -> bool {
        self.remote.get(pe).copied().unwrap_or(false)
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
        let limit = self.inner.target.wait_limit;
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
        inner.target.closing.store(true, Ordering::Release);
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
