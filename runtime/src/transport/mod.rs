//! Transports: how this PE reaches another PE's symmetric heap.
//!
//! The runtime has two layers below it (design.md "Where the code goes next: the transport line"):
//! - the *platform* (`crate::backend::Backend`, implemented by `crate::cpu` and `crate::cuda`): where
//!   kernels run and the heap lives, copies between host and heap, zeroing, quiet, and exporting the
//!   heap's memory as file descriptors (memfd segments resp. cuMem granules);
//! - the *transports* (this module): which PEs this PE reaches and how. One interface, [`Transport`],
//!   one sibling module per transport, found by name in one registry ([`remote_by_name`]):
//!   - [`p2p`]: the peer's heap is mapped into this process (same node): device code loads, stores and
//!     runs atomics on it directly. It always serves the node-local PEs. The same-node descriptor
//!     exchange both platforms use is written once there ([`p2p::exchange`]);
//!   - [`proxy`]: the device code (or a host thread) posts a request into a channel, and this PE's CPU
//!     proxy thread carries it over the network to the peer's proxy (TCP now, verbs later). Its pieces:
//!     the wire protocol ([`wire`]), the TCP provider ([`tcp`]), the request ring ([`ring`]) and the
//!     engine ([`proxy`]);
//!   - [`ibgda`]: device threads drive an mlx5 NIC themselves: a real ConnectX (feature `verbs`,
//!     [`verbs`]) when every `rshmrun --diagnose` check passes, else rshmem's emulated mlx5 NIC, which
//!     carries the work requests over the proxy's TCP connections.
//!
//! `RSHMEM_REMOTE_TRANSPORT` (`auto` | `none` | `proxy` | `ibgda`, default `auto`) names the transport
//! for PEs on other nodes; [`choose_remote`] is the one place that decides. The runtime asks the transports, per PE, which one reaches it ([`route_table`]: the one
//! place that decides) and keeps the answer; heap growth is registered with every transport
//! ([`Transport::register`]).
//!
//! This module imports nothing of the runtime above it: what a transport needs (the bootstrap, the fd
//! server, the platform for copies) is passed down.

pub mod ibgda;
pub mod p2p;
pub mod proxy;
pub mod ring;
pub mod select;
pub mod tcp;
#[cfg(feature = "verbs")]
pub mod verbs;
pub mod wire;

use crate::backend::{Backend, Collective};
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use rshmem_device::remote::proxy::RingRef;
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
    /// Completes this PE's operations issued through this transport.
    fn quiet(&self) -> Result<()> {
        Ok(())
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
    fn register_buffer(&self, _addr: usize, _len: usize) -> Result<()> {
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

/// Where device code finds a remote transport's channel (device addresses): the request ring, its
/// return area, and the inbound queue (`rshmem_device::remote::inbound`).
#[derive(Clone, Copy, Debug)]
pub struct DeviceChannel {
    pub ring: RingRef,
    pub ret: u64,
    pub inbound: u64,
}

/// What a remote transport gets to set itself up (collectively, at init).
pub struct RemoteSetup<'a> {
    pub boot: &'a Bootstrap,
    /// The platform, shared with the transport's threads (copies, AMOs, host-shared memory).
    pub platform: Arc<dyn Backend>,
}

/// Builds a remote transport (collective: every PE calls it at init).
pub type RemoteFactory = fn(&RemoteSetup) -> Result<Box<dyn Transport>>;

/// The transport chosen for PEs on other nodes (`RSHMEM_REMOTE_TRANSPORT`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Remote {
    /// The default: `proxy` when the job has PEs on other nodes, else nothing.
    Auto,
    None,
    Proxy,
    Ibgda,
}

/// The values `RSHMEM_REMOTE_TRANSPORT` takes, for messages and `rshmrun --info`.
pub const REMOTE_VALUES: &str = "auto, none, proxy or ibgda";

/// Parses a `RSHMEM_REMOTE_TRANSPORT` value (unset: `none`). Case-insensitive, surrounding blanks
/// ignored; anything else is an error saying what is expected.
pub fn parse_remote(v: Option<&str>) -> std::result::Result<Remote, String> {
    match v.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        None | Some("auto") => Ok(Remote::Auto),
        Some("none") => Ok(Remote::None),
        Some("proxy") => Ok(Remote::Proxy),
        Some("ibgda") => Ok(Remote::Ibgda),
        Some(other) => Err(format!("{other:?} is not a transport: expected {REMOTE_VALUES}")),
    }
}

/// What a job's PEs use to reach PEs on other nodes: the outcome of `RSHMEM_REMOTE_TRANSPORT` and of
/// the NIC checks (`crate::diagnose`). `rshmrun --diagnose` prints it; init acts on it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RemoteChoice {
    /// No remote transport: other nodes' PEs are not reachable (single-node job, or `none`).
    None,
    /// The CPU proxy over TCP.
    Proxy,
    /// IBGDA on a real ConnectX NIC (the `verbs` feature, and every NIC check passed).
    IbgdaNic,
    /// IBGDA through the emulated mlx5 NIC (asked for with `ibgda`, no usable NIC).
    IbgdaEmulated,
}

impl RemoteChoice {
    /// One line for users: what is used and why.
    pub fn describe(self) -> &'static str {
        match self {
            RemoteChoice::None => "none: PEs on other nodes are not reachable",
            RemoteChoice::Proxy => "proxy: a CPU proxy thread per PE carries remote operations over TCP",
            RemoteChoice::IbgdaNic => "ibgda: GPU threads post mlx5 work requests to the NIC themselves",
            RemoteChoice::IbgdaEmulated => "ibgda (emulated NIC): GPU threads post mlx5 work requests to rshmem's software NIC, which carries them over TCP; no usable NIC was found",
        }
    }
}

/// Picks the remote transport from `RSHMEM_REMOTE_TRANSPORT`'s value (`var` names it in messages),
/// whether the job spans nodes, and whether a real NIC passed every check (`crate::diagnose`):
/// - `auto` (unset): nothing for a single-node job; `ibgda` on a usable NIC, else `proxy`;
/// - `ibgda`: the NIC when usable, else the emulated NIC (init says so once);
/// - `proxy`, `none`: as named.
pub fn choose_remote(var: &str, value: Option<&str>, spans_nodes: bool, nic_usable: bool) -> Result<RemoteChoice> {
    Ok(match parse_remote(value).map_err(|e| Error::new(format!("{var}: {e}")))? {
        Remote::Auto if !spans_nodes => RemoteChoice::None,
        Remote::Auto if nic_usable => RemoteChoice::IbgdaNic,
        Remote::Auto => RemoteChoice::Proxy,
        Remote::None => RemoteChoice::None,
        Remote::Proxy => RemoteChoice::Proxy,
        Remote::Ibgda if nic_usable => RemoteChoice::IbgdaNic,
        Remote::Ibgda => RemoteChoice::IbgdaEmulated,
    })
}

/// The registry: the constructor of the transport for PEs on other nodes, by name. `var` is the
/// variable that named it (for messages). `Ok(None)`: no remote transport (`none`, or a single-node
/// job under `auto`: no threads, no sockets). The runtime calls the constructor once the platform
/// exists. Whether a real NIC is usable is asked ([`select::nic_usable`]) only when the answer matters:
/// the job spans nodes and the value is `auto` or `ibgda`.
pub fn remote_by_name(var: &str, value: Option<&str>, spans_nodes: bool) -> Result<Option<RemoteFactory>> {
    let asks_nic = spans_nodes && matches!(parse_remote(value), Ok(Remote::Auto | Remote::Ibgda));
    let nic = asks_nic && select::nic_usable();
    Ok(factory(choose_remote(var, value, spans_nodes, nic)?))
}

/// The constructor of a chosen remote transport.
pub fn factory(c: RemoteChoice) -> Option<RemoteFactory> {
    match c {
        RemoteChoice::None => None,
        RemoteChoice::Proxy => Some(proxy::create),
        RemoteChoice::IbgdaNic => Some(ibgda::create_nic),
        RemoteChoice::IbgdaEmulated => Some(ibgda::create_emulated),
    }
}

/// xorshift64*: a dependency-free generator, reproducible from its seed, for the wire's and the proxy
/// engine's randomized tests.
#[cfg(test)]
pub(crate) mod test_rng {
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }
}

/// Which transport reaches each PE: `table[pe]` is the index in `transports` of the first one that
/// reaches `pe` (the p2p transport first, so node-local PEs always go through it), None when none does.
pub fn route_table(npes: usize, transports: &[&dyn Transport]) -> Vec<Option<usize>> {
    (0..npes).map(|pe| transports.iter().position(|t| t.reaches(pe))).collect()
}

#[cfg(test)]
mod tests {
    use super::p2p::P2p;
    use super::*;

    /// A remote transport that reaches every PE it is told to (the shape a proxy will have: every PE of
    /// the job). Only the table logic is under test here.
    struct Everyone;
    impl Transport for Everyone {
        fn name(&self) -> &'static str {
            "everyone"
        }
        fn reaches(&self, _pe: usize) -> bool {
            true
        }
        unsafe fn putmem(&self, _: &dyn Backend, _: *mut u8, _: *const u8, _: usize, _: usize) -> Result<()> {
            unreachable!()
        }
        unsafe fn getmem(&self, _: &dyn Backend, _: *mut u8, _: *const u8, _: usize, _: usize) -> Result<()> {
            unreachable!()
        }
    }

    #[test]
    fn node_local_pes_go_through_p2p_others_through_the_remote_transport_or_none() {
        // PEs 0..4 on this node (mapped at some addresses), 4..8 on another.
        let bases: Vec<usize> = (0..8).map(|pe| if pe < 4 { 0x1000_0000 * (pe + 1) } else { 0 }).collect();
        let p2p = P2p::new(bases.clone());
        for (pe, &base) in bases.iter().enumerate() {
            assert_eq!(p2p.peer_base(pe), base);
            assert_eq!(p2p.reaches(pe), pe < 4);
        }
        assert!(!p2p.reaches(8), "a PE past the job must not be reached");
        let only = route_table(8, &[&p2p]);
        assert_eq!(only, vec![Some(0), Some(0), Some(0), Some(0), None, None, None, None]);
        let with_remote = route_table(8, &[&p2p, &Everyone]);
        assert_eq!(with_remote, vec![Some(0), Some(0), Some(0), Some(0), Some(1), Some(1), Some(1), Some(1)]);
        // A single PE, and the other node first in the job.
        assert_eq!(route_table(1, &[&P2p::new(vec![0x1000])]), vec![Some(0)]);
        let p = P2p::new(vec![0, 0, 0x2000, 0x3000]);
        assert_eq!(route_table(4, &[&p, &Everyone]), vec![Some(1), Some(1), Some(0), Some(0)]);
    }

    #[test]
    fn remote_transport_values() {
        assert_eq!(parse_remote(None), Ok(Remote::Auto));
        assert_eq!(parse_remote(Some(" Auto")), Ok(Remote::Auto));
        assert_eq!(parse_remote(Some("none")), Ok(Remote::None));
        assert_eq!(parse_remote(Some(" Proxy ")), Ok(Remote::Proxy));
        assert_eq!(parse_remote(Some("IBGDA")), Ok(Remote::Ibgda));
        for bad in ["", "tcp", "p2p", "proxy,ibgda", "nonee"] {
            let e = parse_remote(Some(bad)).unwrap_err();
            assert!(e.contains(REMOTE_VALUES) && e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
        }
        const V: &str = "RSHMEM_REMOTE_TRANSPORT";
        // auto (unset): the proxy exactly when the job spans nodes.
        assert!(remote_by_name(V, None, false).unwrap().is_none());
        assert!(remote_by_name(V, None, true).unwrap().is_some());
        assert!(remote_by_name(V, Some("auto"), true).unwrap().is_some());
        assert!(remote_by_name(V, Some("none"), true).unwrap().is_none());
        assert!(remote_by_name(V, Some("proxy"), false).unwrap().is_some(), "proxy is built");
        assert!(remote_by_name(V, Some(" PROXY "), true).unwrap().is_some());
        assert!(remote_by_name(V, Some("ibgda"), true).unwrap().is_some(), "ibgda is built (emulated without a NIC)");
        // The choice itself, with and without a usable NIC.
        assert_eq!(choose_remote(V, None, false, true).unwrap(), RemoteChoice::None);
        assert_eq!(choose_remote(V, None, true, false).unwrap(), RemoteChoice::Proxy);
        assert_eq!(choose_remote(V, None, true, true).unwrap(), RemoteChoice::IbgdaNic);
        assert_eq!(choose_remote(V, Some("ibgda"), true, false).unwrap(), RemoteChoice::IbgdaEmulated);
        assert_eq!(choose_remote(V, Some("ibgda"), false, false).unwrap(), RemoteChoice::IbgdaEmulated);
        assert_eq!(choose_remote(V, Some("ibgda"), true, true).unwrap(), RemoteChoice::IbgdaNic);
        assert_eq!(choose_remote(V, Some("proxy"), true, true).unwrap(), RemoteChoice::Proxy);
        assert_eq!(choose_remote(V, Some("none"), true, true).unwrap(), RemoteChoice::None);
        let e = remote_by_name(V, Some("tcp"), true).err().unwrap().to_string();
        assert!(e.starts_with(V) && e.contains("\"tcp\""), "{e}");
    }
}

/// Whether the proxy's threads poll briefly before they sleep (`RSHMEM_PROXY_SPIN`: off by default;
/// auto: when this process may use at least 8 CPUs). Off by default because it is not yet measured on
/// the GPU machines: on the 2-core CI machine, always-on polling made remote latencies 3 to 4 times
/// worse (the polling threads took the CPUs the PEs' threads needed). Read once per process (init
/// validated the value).
fn busy_poll() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match crate::env::get(crate::env::PROXY_SPIN).map(|v| crate::env::parse_proxy_spin(&v)) {
        Some(Ok(Some(on))) => on,
        Some(Ok(None)) => std::thread::available_parallelism().is_ok_and(|n| n.get() >= 8),
        _ => false,
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
