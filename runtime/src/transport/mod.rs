//! Transports: how this PE reaches another PE's symmetric heap.
//!
//! This is where the runtime's transport layer goes (issue 8, design.md "Where the code goes next").
//! One interface, chosen per peer PE, with one sibling module per transport:
//! - `p2p`: the peer's heap is mapped into this process (same node): the device code loads, stores and
//!   runs atomics on it directly;
//! - `proxy`: otherwise: the device code posts a request into a channel, and this PE's CPU proxy thread
//!   carries it over the network to the peer's proxy, which applies it to the peer's heap and answers
//!   gets and fetching AMOs (TCP always, verbs later);
//! - `ibgda`: the GPU drives an mlx5 NIC itself (next issue).
//!
//! The device state says which transport each PE uses; heap growth is registered with every transport.
//!
//! Built so far: the proxy transport's wire protocol ([`wire`]: fixed headers, validation, chunking,
//! a frame reader over any byte stream) and its TCP provider ([`tcp`]: connect with retry, the hello
//! with the job key, framed send and receive with deadlines), and the host side of the proxy's request
//! ring ([`ring`]: device threads post requests with `rshmem_device::remote::proxy`, the proxy thread
//! drains them). These are the pieces the proxy transport builds on; the `p2p`, `proxy` and `ibgda`
//! modules come next.

pub mod ring;
pub mod tcp;
pub mod wire;
