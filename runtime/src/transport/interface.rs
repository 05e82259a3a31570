//! The one interface every transport implements ([`Transport`]), what device code is handed of a
//! remote transport ([`DeviceChannel`]), and what a remote transport gets to set itself up
//! ([`RemoteSetup`]). The transports are found by name in `transport::select`.

use crate::node::exchange::Collective;
use crate::platform::backend::Backend;
use crate::platform::services::Services;
use crate::bootstrap::Bootstrap;
use crate::config::Config;
use crate::error::{Error, Result};
use rshmem_device::state::Channel;
use std::ops::Range;
use std::sync::Arc;

/// What a transport does for the runtime.
pub trait Transport: Send + Sync {
    /// The registry name ("p2p", "proxy", "ibgda").
    fn name(&self) -> &'static str;
    /// Whether this transport reaches PE `pe` (this PE included, for p2p).
    fn reaches(&self, pe: usize) -> bool;
    /// The address through which device code reaches PE `pe`'s heap directly (the device state's
    /// `peer_base`): the mapped address for p2p, 0 for transports that do not map peers.
    fn peer_base(&self, _pe: usize) -> usize {
        0
    }
    /// Collective (every PE, same range, inside the collective allocation): the heap range `range` (heap
    /// offsets) has just become backed on every PE; a transport that must register memory (a NIC, a
    /// proxy's view of the heap) does so here.
    fn register(&self, _c: Collective, _range: Range<usize>) -> Result<()> {
        Ok(())
    }
    /// Host-initiated blocking put to PE `pe`, which this transport reaches (the runtime checked the
    /// symmetric range and the route).
    ///
    /// # Safety
    /// `src` must be readable for `bytes`; `[dst, dst+bytes)` must lie in the symmetric heap.
    unsafe fn putmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()>;
    /// Host-initiated blocking get from PE `pe`.
    ///
    /// # Safety
    /// `dst` must be writable for `bytes`; `[src, src+bytes)` must lie in the symmetric heap.
    unsafe fn getmem(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()>;
    /// Host-initiated put that completes by this PE's next quiet (default: the blocking one).
    ///
    /// # Safety
    /// As `putmem`; `src` stays valid and unchanged until the next quiet.
    unsafe fn putmem_nbi(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.putmem(platform, dst, src, bytes, pe) }
    }
    /// Host-initiated get that completes by this PE's next quiet (default: the blocking one).
    ///
    /// # Safety
    /// As `getmem`; `dst` is not read before the next quiet.
    unsafe fn getmem_nbi(&self, platform: &dyn Backend, dst: *mut u8, src: *const u8, bytes: usize, pe: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.getmem(platform, dst, src, bytes, pe) }
    }
    /// Completes this PE's operations issued through this transport.
    fn quiet(&self) -> Result<()> {
        Ok(())
    }
    /// The transport's failure, if its engine failed, as host call `call`'s error: the runtime asks
    /// before it waits for device work that could only complete through that engine, so the program
    /// gets the cause instead of a wait that times out. Returning it tells the transport that the
    /// program was told.
    fn failure(&self, _call: &str) -> Option<Error> {
        None
    }
    /// The device state's `route` value for PEs this transport reaches (`ROUTE_*`); the runtime uses
    /// ROUTE_P2P for the p2p transport.
    fn route_code(&self) -> u8 {
        rshmem_device::state::ROUTE_NONE
    }
    /// The request channel device code posts to, as device code addresses it.
    fn device_channel(&self) -> Option<DeviceChannel> {
        None
    }
    /// The IBGDA table device code reads (`DeviceState::ibgda`), 0 for other transports.
    fn device_table(&self) -> u64 {
        0
    }
    /// A local buffer the program registered (`rshmem_buffer_register`) as the local side of transfers
    /// to other nodes: a transport whose NIC must reach it registers it (the runtime checked it).
    ///
    /// # Safety
    /// `[addr, addr + len)` must stay valid memory of this process (not freed, not unmapped) until
    /// `unregister_buffer(addr)` or the transport's shutdown: a NIC may write into it until then.
    unsafe fn register_buffer(&self, _addr: usize, _len: usize) -> Result<()> {
        Ok(())
    }
    /// Undoes `register_buffer` (the buffer was registered).
    fn unregister_buffer(&self, _addr: usize) -> Result<()> {
        Ok(())
    }
    /// Collective end, after the runtime's final host barrier (everything is complete): closes the
    /// transport's connections and stops its threads.
    /// `clean`: the final barrier succeeded, so every peer is finalizing too and closes in order;
    /// otherwise the transport does not wait for the peers.
    fn shutdown(&self, _clean: bool) -> Result<()> {
        Ok(())
    }
}

/// Where device code finds a remote transport's engine (device addresses): its request ring (return
/// area, staging and counters) and its target table (`rshmem_device::remote::lane`).
#[derive(Clone, Debug)]
pub struct DeviceChannel {
    /// The request ring, return area, staging and counters (one: the engine's).
    pub channels: Vec<Channel>,
    /// Device address of the target table (`rshmem_device::remote::lane::TargetTable`).
    pub target: u64,
}

/// What a remote transport gets to set itself up (collectively, at init).
pub struct RemoteSetup<'a> {
    /// The job's bootstrap (the transport's collectives at init).
    pub boot: &'a Bootstrap,
    /// The platform (the heap's place and size).
    pub platform: Arc<dyn Backend>,
    /// The platform's services, shared with the transport's threads (copies, host-shared memory,
    /// posting and applying operations the way device code does).
    pub services: Arc<dyn Services>,
    /// This init's configuration: every setting a transport reads (`RSHMEM_PROXY_*`, `RSHMEM_IBGDA_*`,
    /// `RSHMEM_IB_HCA`, the network settings, RSHMEM_WAIT_TIMEOUT, RSHMEM_BOOTSTRAP_TIMEOUT, the debug
    /// level, the test hooks), read and checked once at the start of init. A transport's threads may
    /// keep the `Arc`; nothing may read the environment instead.
    pub config: Arc<Config>,
    /// rshmrun's job status board (None outside rshmrun): a transport that fails records its cause
    /// there once, so that rshmrun and the other PEs can name it.
    pub status: Option<Arc<crate::node::jobstatus::JobStatus>>,
}

/// Builds a remote transport (collective: every PE calls it at init).
pub type RemoteFactory = fn(&RemoteSetup) -> Result<Box<dyn Transport>>;
