//! The proxy transport: every PE on another node is reached through this PE's remote engine.
//!
//! # Shape (the files, in the order a remote put meets them)
//! ```text
//! device threads --(requests; staged payload)--> ring: the request ring, host memory
//!   --> send: the sender drains it in ticket order, frames on the lanes by address, coalesced
//!   --> lanes: L connections to every peer (providers: tcp), one gathered sendmsg per burst
//!   --> the peer's lane thread: recv() straight into its receive ring (pinned, mapped into the GPU),
//!       checked in place, `written` published
//!   --> target: the apply code (GPU: the apply kernel; CPU backend: the lane thread) applies the
//!       frames in order; `applied` published
//!   --> the peer's lane thread acknowledges by count (ACK); our lanes' `acked` moves, and with it
//!       the ring's `completed` (engine::Completion), which quiet waits for
//! ```
//! - [`ring`]: the request ring's host side (set-up, the drain); its layout and the device side are
//!   `rshmem_device::remote::proxy`.
//! - [`send`]: the sender thread (coalescing, lanes by address, fences across lanes, credits).
//! - [`lanes`]: a lane's memory, queue and thread (receive, check, acknowledge, reply, send).
//! - [`target`]: this PE's target table and who applies (`rshmem_device::remote::lane` has the apply
//!   code and the layouts); the emulated NIC's hooks.
//! - [`engine`]: what they share: completion, failure (recorded once; the reaper ends the PE).
//! - Providers: [`tcp`] (with [`setup`], [`accept`], [`connect`]: listening, the hellos); with the
//!   `verbs` feature, `verbs`/`rdma` (RDMA for what a NIC can carry; see [`provider`]).
//! - [`stats`][]: the stage counters that `RSHMEM_PROXY_STATS` prints.
//!
//! The IBGDA transport runs this engine too (host-initiated operations, and the emulated NIC's frames
//! through the same lanes and apply code).

pub mod accept;
pub mod connect;
pub mod engine;
pub mod lanes;
pub mod provider;
#[cfg(feature = "verbs")]
pub(crate) mod rdma;
pub mod ring;
pub mod send;
pub mod setup;
pub mod stats;
pub mod target;
pub mod tcp;
#[cfg(test)]
mod tests;
#[cfg(feature = "verbs")]
pub(crate) mod verbs;

use crate::config::env;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::log;
use crate::platform::backend::Backend;
use crate::platform::services::HostShared;
use crate::transport::interface::{DeviceChannel, RemoteSetup, Transport};
use crate::transport::proxy::engine::{Engine, Settings};
use crate::transport::proxy::lanes::Lane;
use crate::transport::proxy::provider::{Provider, Want};
use crate::transport::proxy::ring::{Channel, Request};
use crate::transport::proxy::target::Target;
use crate::transport::proxy::tcp::Endpoint;
use crate::transport::wire::{self, AmoOp};
use rshmem_device::remote::proxy::{amo, op, post_with, DEFAULT_CHUNK};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
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
/// Keepalive period of the lanes (`tcp::Connection::set_liveness`).
const LIVENESS: Duration = Duration::from_secs(1);
/// Most lanes `RSHMEM_PROXY_LANES=auto` gives a pair of PEs.
const AUTO_LANES: usize = 4;
/// Bytes of the pinned buffer host gets go through on a GPU (the apply code cannot write pageable
/// host memory).
const HOST_GET_BOUNCE: usize = 1 << 20;

/// The proxy transport of one PE.
pub struct Proxy {
    eng: Arc<Engine>,
    /// `remote[pe]`: the proxy reaches PE `pe` (it is on another node).
    remote: Vec<bool>,
    /// The engine's threads (sender, lanes, reaper), all joined at shutdown: they hold the engine,
    /// whose memory (the lanes' rings) must be gone when finalize returns.
    threads: Mutex<Vec<(String, JoinHandle<()>)>>,
    /// Pinned memory for host gets on GPUs (None on the CPU backend), one get at a time.
    get_bounce: Option<Mutex<HostShared>>,
    /// The verbs provider's shared state (heap keys), for heap growth.
    #[cfg(feature = "verbs")]
    verbs: Option<Arc<verbs::Shared>>,
}

/// This process's request ring as host threads address it — for tests and tools that post requests
/// the way device code does. None when no proxy transport is running.
static HOST_CHANNEL: Mutex<Option<Channel>> = Mutex::new(None);
/// This process's proxy listen address, while a proxy transport runs.
static LISTEN: Mutex<Option<SocketAddr>> = Mutex::new(None);

/// The running proxy's request ring (host addresses; its counters are host memory on the CPU
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
    Ok(Box::new(Proxy::build(s, true)?))
}

/// The provider the PEs agree on (collective): each PE's own choice (`RSHMEM_PROXY_PROVIDER`, its
/// NIC) all-gathered with its reason, then `provider::agree`. Returns it and what was asked for.
fn agree_provider(s: &RemoteSetup) -> Result<(Provider, Want)> {
    let boot = s.boot;
    let want = s.config.proxy.provider;
    let (mine, why) = provider::local_choice(want, &provider::verbs_usable_on(&s.config, boot.pe()));
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

/// Collective: the verbs provider on the engine, or the agreed failure (`provider::SETUP_FAILED`).
#[cfg(feature = "verbs")]
fn start_verbs(s: &RemoteSetup, eng: &Arc<Engine>, remote: &[bool], explicit: bool) -> Result<Option<Arc<verbs::Shared>>> {
    verbs::setup(s, eng, remote, explicit).map(Some)
}

/// Without the `verbs` feature the setup fails alike on every PE (a PE can only get here through the
/// test hook `provider::VERBS_HOOK`).
#[cfg(not(feature = "verbs"))]
fn start_verbs(s: &RemoteSetup, _eng: &Arc<Engine>, _remote: &[bool], _explicit: bool) -> Result<Option<()>> {
    provider::agree_step(s.boot, "opening the NIC", Err("this build of rshmem lacks the `verbs` feature".into()))?;
    Ok(None)
}

/// The lanes this PE asks for per peer: `RSHMEM_PROXY_LANES`, or (auto) one per two CPUs this process
/// may use per PE of its node, from 1 to `AUTO_LANES`.
fn wanted_lanes(config: &Config, local_pes: usize) -> usize {
    config.proxy.lanes.unwrap_or_else(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cpus / (2 * local_pes.max(1))).clamp(1, AUTO_LANES)
    })
}

/// The engine's settings from this init's configuration.
fn settings(config: &Config) -> Settings {
    let p = &config.proxy;
    Settings {
        slots: p.slots,
        chunk: DEFAULT_CHUNK,
        thread_stage: p.thread_stage,
        flags: if p.group_fence_every { rshmem_device::state::CHANNEL_FENCE_EVERY } else { 0 },
        ring_bytes: p.ring,
        reply_bytes: p.ring,
        lane_shift: p.lane_bytes.trailing_zeros(),
        spin: p.busy_poll(),
        wait_limit: config.wait_timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600)),
        linger: target::DEFAULT_LINGER,
        trace: config.trace,
        stats: p.stats,
    }
}

impl Proxy {
    /// The engine, for an extension (the IBGDA transport's emulated NIC).
    pub(crate) fn engine(&self) -> Arc<Engine> {
        self.eng.clone()
    }

    /// Collective: the engine over TCP (the IBGDA transport's: its NIC hooks go on the engine).
    pub(crate) fn new(s: &RemoteSetup) -> Result<Proxy> {
        Proxy::build(s, false)
    }

    /// Collective: listens, exchanges listen addresses through the bootstrap, connects `L` lanes to
    /// every PE on another node, sets the engine up and starts its threads. `choose`: the provider
    /// the PEs agree on (verbs when agreed, else TCP); otherwise TCP.
    fn build(s: &RemoteSetup, choose: bool) -> Result<Proxy> {
        let boot = s.boot;
        let (me, n) = (boot.pe() as u32, boot.npes() as u32);
        let wanted = wanted_lanes(&s.config, boot.node_pes().len());
        // The platform's copies and service kernels ready before any kernel runs (CUDA: the runtime's
        // module loaded, pinned buffers and streams made).
        s.services.prepare_proxy()?;
        let remote: Vec<bool> = (0..n as usize).map(|pe| !boot.node_pes().contains(&pe)).collect();
        // Without RSHMEM_BOOTSTRAP, the rendezvous address the launcher's store gave (the proxy listens
        // where this PE reaches it).
        let mut net = s.config.net.clone();
        if net.bootstrap.is_none() {
            net.bootstrap = crate::bootstrap::launcher_addr();
        }
        let (listener, listen, addrs, lanes_n) = setup::listen(boot, &net, wanted)?;
        let set = settings(&s.config);
        let ep = Endpoint { key: boot.job_key(), pe: me, npes: n, heap_size: s.platform.heap_size() as u64, max_chunk: wire::DEFAULT_MAX_CHUNK };
        let conns = setup::connect_all(boot, &listener, &addrs, &ep, &remote, lanes_n, s.config.bootstrap_timeout)?;
        let services = s.services.clone();
        let mut lanes = Vec::new();
        let mut peer_lanes = Vec::with_capacity(n as usize);
        for (q, cs) in conns.into_iter().enumerate() {
            let start = lanes.len();
            let count = cs.len() as u32;
            for c in cs {
                // A peer host that vanishes without closing is noticed within about 4 s when the lane
                // is quiet, 10 s with data in flight.
                c.set_liveness(LIVENESS, Duration::from_secs(10))?;
                let index = c.lane() as u32;
                let sock = c.into_stream()?;
                let mem = services.host_shared(Lane::mem_bytes(set.ring_bytes, set.reply_bytes))?;
                let bounce = services.host_shared(wire::MAX_PAYLOAD as usize)?;
                lanes.push(Arc::new(Lane::new(q as u32, index, count, sock, mem, set.ring_bytes, set.reply_bytes, bounce)?));
            }
            peer_lanes.push(start..lanes.len());
        }
        let target = Target::new(s.platform.clone(), services.clone(), &lanes, &peer_lanes, set.linger)?;
        let (mut provider, want) = if choose { agree_provider(s)? } else { (Provider::Tcp, Want::Tcp) };
        let eng = Arc::new(Engine::new(me, n, set, services.clone(), lanes, peer_lanes, target)?);
        if let Some(b) = &s.status {
            eng.set_board(b.clone());
        }
        #[allow(unused_variables)]
        let verbs = match provider {
            Provider::Tcp => None,
            Provider::Verbs => match start_verbs(s, &eng, &remote, want == Want::Verbs) {
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
        let get_bounce = if eng.target.host_applies() { None } else { Some(Mutex::new(services.host_shared(HOST_GET_BOUNCE)?)) };
        let mut threads = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| -> Result<(String, JoinHandle<()>)> {
            let h = std::thread::Builder::new().name(name.clone()).spawn(f).map_err(|e| Error::os(format!("proxy: starting thread {name}"), e))?;
            Ok((name, h))
        };
        for i in 0..eng.lanes.len() {
            let name = format!("rshmem-lane{}-pe{}", eng.lanes[i].index, eng.lanes[i].peer);
            threads.push((name, lanes::thread::spawn(&eng, i)?));
        }
        let e = eng.clone();
        threads.push(spawn("rshmem-proxy-send".into(), Box::new(move || send::run(e)))?);
        let e = eng.clone();
        threads.push(spawn("rshmem-proxy-listen".into(), Box::new(move || setup::serve_late(e, listener, ep)))?);
        log::info(format!(
            "proxy: PE {me} listens on {listen}, {lanes_n} lanes per peer, a ring of {} slots, over {}",
            eng.set.slots,
            provider.name()
        ));
        let mut p = Proxy {
            eng,
            remote,
            threads: Mutex::new(threads),
            get_bounce,
            #[cfg(feature = "verbs")]
            verbs,
        };
        let reaper = p.eng.clone();
        let lanes_of: Vec<Arc<Lane>> = p.eng.lanes.clone();
        let reaper = std::thread::Builder::new()
            .name("rshmem-proxy-reaper".into())
            .spawn(move || {
                reaper.reap(|limit| {
                    // The engine's threads stop on the fault; give them `limit` to go.
                    let start = std::time::Instant::now();
                    while lanes_of.iter().any(|l| !l.ended.load(Ordering::Acquire)) && start.elapsed() < limit {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                })
            })
            .map_err(|e| Error::os("proxy: starting the reaper thread", e))?;
        p.threads.get_mut().unwrap_or_else(|e| e.into_inner()).push(("rshmem-proxy-reaper".into(), reaper));
        *HOST_CHANNEL.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.eng.host_channel());
        *LISTEN.lock().unwrap_or_else(|e| e.into_inner()) = Some(listen);
        Ok(p)
    }

    /// Posts `r` from a host thread and waits for its completion.
    fn post_and_wait(&self, call: &str, r: &Request) -> Result<()> {
        if let Some(e) = self.eng.failure_for(call) {
            return Err(e);
        }
        // On GPUs the request is posted by a GPU thread (see `Services::post_request`), which also
        // waits for its completion.
        // SAFETY: the caller checked the request; its buffers stay valid until this returns.
        if unsafe { self.eng.services.post_request(r, None) }.map_err(|e| e.context(format!("{call}: proxy request to PE {}", r.pe)))? {
            return match self.eng.failure_for(call) {
                Some(e) => Err(e),
                None => Ok(()),
            };
        }
        let ch = self.eng.host_channel();
        let limit = self.eng.set.wait_limit;
        // SAFETY: the ring is the engine's (alive with self); its counters are host memory here (the
        // platform posts itself otherwise, above).
        let mut policy = ring::deadline(limit);
        // A full ring whose engine failed waits no longer: the failure is this call's error.
        let mut wait = |spins: u64| !(spins.is_multiple_of(64) && self.eng.failed().is_some()) && policy(spins);
        // SAFETY: as above.
        let seq = unsafe { post_with(&ch, r, &mut wait) }.map_err(|s| match self.eng.failure_for(call) {
            Some(e) => e,
            None => Error::new(format!("{call}: proxy request to PE {}: no free slot in the request ring within {limit:?} ({s:?})", r.pe)),
        })?;
        self.eng.wait_completed_host(call, seq).inspect_err(|_| {
            // Every ticket of this request (a staged one takes several) lies below the head now.
            let head = self.eng.head().unwrap_or(seq);
            self.eng.host_gave_up.fetch_max(head.max(seq), Ordering::AcqRel);
        })
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
        Some(DeviceChannel { channels: vec![self.eng.device_channel()], target: self.eng.target.table_addr() })
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
        let Some(bounce) = &self.get_bounce else {
            let r = Request { op: op::GET, pe: pe as u32, offset, len: bytes as u64, src: dst as u64, ..Request::default() };
            return self.post_and_wait("rshmem_getmem", &r);
        };
        // On a GPU the apply kernel writes the bytes: through pinned memory, then to `dst` (which may
        // be pageable host memory).
        let b = bounce.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = 0usize;
        while at < bytes {
            let n = (bytes - at).min(b.len());
            let r = Request { op: op::GET, pe: pe as u32, offset: offset + at as u64, len: n as u64, src: b.device_addr(), ..Request::default() };
            self.post_and_wait("rshmem_getmem", &r)?;
            // SAFETY: the caller promised `dst` writable for `bytes`; the bounce holds the `n` bytes
            // just received (the GET is complete); the ranges are distinct memory.
            unsafe { self.eng.services.copy(dst.add(at), b.host_ptr(), n)? };
            at += n;
        }
        Ok(())
    }
    fn failure(&self, call: &str) -> Option<Error> {
        self.eng.failure_for(call)
    }
    fn quiet(&self) -> Result<()> {
        let head = self.eng.head()?;
        if head == 0 {
            return Ok(());
        }
        self.eng.wait_completed_host("rshmem quiet", head)
    }
    fn shutdown(&self, clean: bool) -> Result<()> {
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        if threads.is_empty() {
            return Ok(());
        }
        if !clean {
            self.eng.abort.store(true, Ordering::Release);
        }
        *HOST_CHANNEL.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *LISTEN.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // Everything is complete (the final barrier quieted): stop the sender, then close the lanes
        // (each sends CLOSE once its queue is out, and ends on the peer's).
        self.eng.stop.store(true, Ordering::Release);
        let (send, rest): (Vec<_>, Vec<_>) = threads.into_iter().partition(|(n, _)| n.ends_with("-send"));
        for (_, h) in send {
            let _ = h.join();
        }
        self.eng.closing.store(true, Ordering::Release);
        self.eng.end_reaper();
        for l in &self.eng.lanes {
            l.wake();
        }
        // The lanes, then the reaper (it sees `closing` at once: end_reaper woke it under its lock).
        for (_, h) in rest {
            let _ = h.join();
        }
        let stopped = self.eng.target.stop(Duration::from_secs(2));
        if let Some(st) = &self.eng.stats {
            eprintln!("rshmem proxy stats [PE {}]: {}", self.eng.me, stats::report(st));
        }
        stopped
    }
}
