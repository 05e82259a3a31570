//! The IBGDA transport: device threads reach PEs on other nodes by driving an mlx5 NIC themselves
//! (`rshmem_device::remote::ibgda` posts the WQEs, rings the doorbell and polls the CQ).
//!
//! # Two NICs, one device path
//! - **A real ConnectX** (the `verbs` feature, selected only when every `rshmrun --diagnose` check
//!   passes): queues in GPU memory, the UAR mapped into the GPU (`super::verbs`).
//! - **The emulated mlx5 NIC** (`rshmem_ibgda::emu`), when `RSHMEM_REMOTE_TRANSPORT=ibgda` finds no
//!   usable NIC (init says so once). Each PE runs one emulated NIC on a host thread. It owns this PE's
//!   QPs, whose send queues, doorbell records, doorbell registers and CQs lie in memory device threads
//!   and the NIC thread share (pinned host memory mapped into the GPU on CUDA: NVSHMEM's "NIC buffers
//!   in host memory"; ordinary memory on the CPU backend), laid out exactly as on hardware. It reads
//!   the WQEs as a ConnectX does, checks them by the PRM, and carries their remote halves over the proxy
//!   transport's TCP connections (NIC frames of `super::wire`) to the target PE, whose engine answers
//!   as the peer NIC's responder: it checks the rkey and the range against the target's registered
//!   memory, and the frames are applied in order by the same apply code as the proxy's own (the apply
//!   kernel on GPUs, with native atomics, so they are atomic with the target's own atomics). The
//!   answers become CQEs. The device code cannot tell the two NICs apart: only the addresses in the
//!   table it reads differ.
//!
//! # What each PE sets up (collectively, at init)
//! 1. The proxy engine (`super::proxy::Proxy`) with the NIC hooks: its lanes (connections, receive
//!    rings, the apply code), and the request ring for host-initiated operations (`putmem` from the host, on-stream
//!    calls), which IBGDA leaves to the proxy as NVSHMEM leaves them to its CPU transport.
//! 2. Memory regions: the heap in key chunks of `1 << KEY_SHIFT` bytes (one lkey = rkey per chunk, as a
//!    NIC registers a heap granule by granule), and the QPs' return slots (local writes only).
//! 3. `qps_per_pe` RC QPs to every PE on another node: queues in shared memory, posting counters and
//!    the table device code reads (`Table`) in device memory.
//! 4. An all-gather of every PE's heap address and rkeys (what a real NIC's setup exchanges with the
//!    QPNs), then the table.
//!
//! # Fault injection
//! `RSHMEM_IBGDA_FAULTS` turns on the emulator's fault modes (`FaultConfig::parse`): a delay between the
//! doorbell and the WQE fetch, dropped doorbells, WQE counts starting near a 16-bit wrap, WQEs held
//! until the send queue is full, slow completions. The whole suite passes under each. While the variable
//! is set, finalize prints one line per PE with how often its NIC injected each fault.
//! `RSHMEM_IBGDA_EMULATOR=ack` makes the NIC complete every WQE without moving data, to measure the
//! posting side alone; `RSHMEM_IBGDA_EMULATOR=device` does the same with every queue in device memory
//! and the NIC a persistent GPU kernel (`devnic`: what posting costs GPU threads on a real ConnectX).
//!
//! Files: [`setup`] (what both NICs share: settings, the device table, the key exchange),
//! [`emulated`] (the emulated NIC), `devnic` (its device-resident model), `real` (a ConnectX,
//! feature `verbs`), [`responder`] (the emulated NIC's remote half, on the proxy engine's
//! connections).

mod devnic;
pub mod emulated;
#[cfg(feature = "verbs")]
mod real;
pub mod responder;
pub mod setup;

use crate::config::env;
use crate::error::{Error, Result};
use crate::log;
use crate::node::exchange::Collective;
use crate::platform::backend::Backend;
use crate::platform::services::Services;
use crate::transport::ibgda::emulated::Emulated;
use crate::transport::ibgda::setup::{wait_limit, Built};
use crate::transport::interface::{DeviceChannel, RemoteSetup, Transport};
use rshmem_device::remote::ibgda::MAX_LOCAL_REGIONS;
use rshmem_ibgda::emu::Nic;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which NIC the device code posts to.
enum Engine {
    Emulated(Emulated),
    #[cfg(feature = "verbs")]
    Real(real::Real),
}

/// The IBGDA transport of one PE.
pub struct Ibgda {
    built: Built,
    engine: Engine,
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    platform: Arc<dyn Backend>,
    services: Arc<dyn Services>,
    /// Registered local buffers: (start, len, key).
    locals: Mutex<Vec<(u64, u64, u32)>>,
    wait_limit: Duration,
    /// RSHMEM_IBGDA_FAULTS as set at init (None: unset), for the line at shutdown.
    faults: Option<String>,
}

/// The registry's constructor for `ibgda` without a usable NIC. Collective.
pub fn create_emulated(s: &RemoteSetup) -> Result<Box<dyn Transport>> {
    if s.boot.pe() == 0 {
        log::warn(
            "RSHMEM_REMOTE_TRANSPORT=ibgda: no usable RDMA NIC here (rshmrun --diagnose says why), so GPU threads post their mlx5 work requests to rshmem's emulated NIC, which carries them to the other nodes over TCP",
        );
    }
    let (built, e) = emulated::new(s)?;
    Ok(Box::new(Ibgda::new(s, built, Engine::Emulated(e))))
}

/// The registry's constructor for `ibgda` on a real NIC (every `--diagnose` check passed, which needs
/// the `verbs` feature). Collective.
pub fn create_nic(s: &RemoteSetup) -> Result<Box<dyn Transport>> {
    #[cfg(feature = "verbs")]
    {
        let (built, r) = real::new(s)?;
        Ok(Box::new(Ibgda::new(s, built, Engine::Real(r))))
    }
    #[cfg(not(feature = "verbs"))]
    {
        let _ = s;
        // The same on every PE, before any collective: an agreed failure.
        Err(Error::new(format!("{}: IBGDA on a real NIC needs the `verbs` feature (cargo build --release --features rshmem/verbs)", setup::SETUP_FAILED)))
    }
}


impl Ibgda {
    fn new(s: &RemoteSetup, built: Built, engine: Engine) -> Ibgda {
        Ibgda {
            built,
            engine,
            platform: s.platform.clone(),
            services: s.services.clone(),
            locals: Mutex::new(Vec::new()),
            wait_limit: wait_limit(&s.config),
            faults: s.config.ibgda.faults_text.clone(),
        }
    }

    /// Stops the emulated NIC's thread (it reads the queues), if it runs; returns the NIC.
    fn stop_nic(&self) -> Option<Nic> {
        match &self.engine {
            Engine::Emulated(e) => e.stop(),
            #[cfg(feature = "verbs")]
            Engine::Real(_) => None,
        }
    }
}

impl Transport for Ibgda {
    fn name(&self) -> &'static str {
        "ibgda"
    }
    fn reaches(&self, pe: usize) -> bool {
        self.built.remote.get(pe).copied().unwrap_or(false)
    }
    fn route_code(&self) -> u8 {
        rshmem_device::state::ROUTE_IBGDA
    }
    fn device_channel(&self) -> Option<DeviceChannel> {
        self.built.proxy.device_channel()
    }
    fn device_table(&self) -> u64 {
        self.built.table.at(self.built.table.table_at)
    }
    fn register(&self, c: Collective, range: std::ops::Range<usize>) -> Result<()> {
        match &self.engine {
            // The emulated NIC registered the whole reserved heap at init (its responder checks what
            // is backed on every access).
            Engine::Emulated(_) => {}
            #[cfg(feature = "verbs")]
            Engine::Real(r) => r.register(c, &self.built.table, &*self.platform, &*self.services, range.clone())?,
        }
        self.built.proxy.register(c, range)
    }
    unsafe fn register_buffer(&self, addr: usize, len: usize) -> Result<()> {
        let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
        if l.len() >= MAX_LOCAL_REGIONS {
            return Err(Error::new(format!("rshmem_buffer_register: the ibgda transport holds at most {MAX_LOCAL_REGIONS} registered buffers")));
        }
        let key = match &self.engine {
            // SAFETY: our caller's contract (valid until unregistered) is register_local's.
            Engine::Emulated(e) => unsafe { e.register_local(addr, len)? },
            #[cfg(feature = "verbs")]
            Engine::Real(r) => r.register_local(addr, len)?,
        };
        l.push((addr as u64, len as u64, key));
        self.built.table.write_locals(&*self.services, &l)
    }
    fn unregister_buffer(&self, addr: usize) -> Result<()> {
        let mut l = self.locals.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = l.iter().position(|e| e.0 == addr as u64) {
            let (_, _, key) = l.remove(i);
            self.built.table.write_locals(&*self.services, &l)?;
            match &self.engine {
                Engine::Emulated(e) => e.deregister_local(key),
                #[cfg(feature = "verbs")]
                Engine::Real(r) => r.deregister_local(key),
            }
        }
        Ok(())
    }
    unsafe fn putmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        // SAFETY: forwarded contract (host-initiated operations go through the proxy, module docs).
        unsafe { self.built.proxy.putmem(platform, dst, src, bytes, pe) }
    }
    unsafe fn getmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.built.proxy.getmem(platform, dst, src, bytes, pe) }
    }
    fn quiet(&self) -> Result<()> {
        self.built.proxy.quiet()?;
        // Device code quieted its own WQEs; what a kernel left behind (nbi calls without quiet) is
        // complete once the NIC has nothing announced and unanswered.
        match &self.engine {
            Engine::Emulated(e) => {
                if !e.settled(self.wait_limit)? {
                    return Err(Error::new(format!("rshmem quiet: the emulated NIC did not complete this PE's work requests within {:?}", self.wait_limit)));
                }
            }
            #[cfg(feature = "verbs")]
            Engine::Real(r) => r.quiet(&*self.services, &self.built.table, self.wait_limit)?,
        }
        Ok(())
    }
    fn shutdown(&self, clean: bool) -> Result<()> {
        // Everything is complete (the final barrier quieted): nothing will be posted any more.
        let nic = self.stop_nic();
        // With RSHMEM_IBGDA_FAULTS set, one line saying how often each fault was injected here.
        if let (Some(nic), Some(list)) = (nic, &self.faults) {
            log::warn(format!("ibgda: {}={list:?}: this PE's emulated NIC injected {}", env::IBGDA_FAULTS, nic.fault_counts()));
        }
        self.built.proxy.shutdown(clean)
    }
}

impl Drop for Ibgda {
    fn drop(&mut self) {
        // The NIC thread reads the queues: stop it before they are freed.
        self.stop_nic();
    }
}
