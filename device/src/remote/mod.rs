//! The device side of the remote transports: what a GPU thread does to reach a PE whose heap is not
//! mapped into its process. `proxy`: a request channel (a ring in host memory the GPU writes and a CPU
//! proxy thread drains). The IBGDA transport will be a sibling module.

pub mod proxy;
