//! Host-side helpers shared by the runtime and the emulated NIC: the lowest crate of the workspace (it
//! depends on nothing of rshmem), so that a waiting policy is written once.

pub mod backoff;
pub mod bounded;
pub use backoff::Backoff;
pub use bounded::bounded;
