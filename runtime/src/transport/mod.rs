//! Transports: how this PE reaches another PE's symmetric heap.
//!
//! One interface ([`interface::Transport`]), one module per transport, found by name in one registry
//! (`select::local_choice`, then `select::factory`):
//! - [`p2p`]: the peer's heap is mapped into this process (same node): device code loads, stores and
//!   runs atomics on it directly. It always serves the node-local PEs;
//! - [`proxy`]: the device code (or a host thread) posts a request into a channel, and this PE's CPU
//!   proxy engine carries it over the network (TCP) to the peer's proxy;
//! - [`ibgda`]: device threads drive an mlx5 NIC themselves: a real ConnectX (feature `verbs`, the
//!   `verbs` module) when every `rshmrun --diagnose` check passes, else rshmem's emulated mlx5 NIC,
//!   which carries the work requests over the proxy engine's connections.
//!
//! The proxy and the emulated NIC speak the same [`wire`] protocol. `RSHMEM_REMOTE_TRANSPORT` (`auto` |
//! `none` | `proxy` | `ibgda`, default `auto`) names the transport for PEs on other nodes;
//! [`select`] is the one place that decides, and says per PE which transport reaches it
//! (`select::route_table`). Heap growth is registered with every transport
//! (`Transport::register`).
//!
//! Nothing here imports the runtime above it: what a transport needs (the bootstrap, the platform and
//! its services) is passed down (`interface::RemoteSetup`).

pub(crate) mod agree;
pub mod ibgda;
pub mod interface;
pub mod p2p;
pub mod proxy;
pub mod select;
#[cfg(feature = "verbs")]
pub mod verbs;
pub mod wire;

#[cfg(test)]
/// xorshift64*: a dependency-free generator, reproducible from its seed, for the wire's and the proxy
/// engine's randomized tests.
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

