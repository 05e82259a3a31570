//! The real-NIC ("verbs") path: setting up a ConnectX (mlx5) NIC for IBGDA, where GPU threads post
//! mlx5 work requests themselves, and for the proxy transport's host-posted RDMA (the proxy over
//! verbs, any vendor's NIC). Behind the cargo
//! feature `verbs`. It follows NVSHMEM's IBGDA host setup (shared/research/ibgda-mlx5.md §5).
//!
//! # Pieces
//! - [`sys`]: libibverbs and libmlx5, loaded at run time; the mlx5dv structs.
//! - [`device`]: listing RDMA devices, choosing one (`RSHMEM_IB_HCA`, else the first with an active
//!   port), its ports (state, link layer, MTU, LID, GID: RoCE v2 for Ethernet), the opened [`Nic`]
//!   (DevX context, PD) and its HCA capabilities.
//! - [`mr`]: registering the GPU heap (dma-buf, else nvidia-peermem) and host buffers: [`Mr`] with
//!   lkey/rkey.
//! - [`prm`]: the PRM command layouts as data and the bit-field writer; the DevX commands.
//! - [`devx`]: IBGDA's RC QPs through DevX: send queue, doorbell record and collapsed CQ in GPU memory,
//!   the UAR mapped into the GPU, the state transitions, and the [`QpDesc`](rshmem_ibgda::QpDesc) for
//!   the posting code (identical on real and emulated NICs; only the addresses differ).
//! - [`handle`]: the [`RcHandle`] PEs all-gather, and the path to a peer derived from it.
//! - [`rc`]: host-posted RDMA WRITE/READ/atomics on a verbs RC QP ([`HostQp`]) for the proxy.
//! - [`peer`]: what PEs exchange to run the proxy over verbs (per QP: heap base, QP address, first
//!   packet number; per heap segment: its rkey), as checked plain bytes.
//! - [`gpu`]: the CUDA calls (GPU memory, dma-buf export, mapping a UAR into the GPU).
//! - [`diagnose`]: the checks of `rshmrun --diagnose`; [`quick_checks`]: the same without the GPU ones.
//!
//! # Using it
//! IBGDA (every call with the GPU's CUDA context current):
//! ```text
//! let nic = Nic::open_with(&config.ib_hca)?;               // init's RSHMEM_IB_HCA, else the first active port
//! let ibgda = IbgdaNic::new(nic.clone())?;                  // DevX + caps + shared SRQ/CQ/EQ
//! let heap = nic.register_gpu(heap_base, heap_len)?;        // heap.lkey / heap.rkey for the key tables
//! let mut qp = IbgdaQp::create(&ibgda, &IbgdaQpConfig::default())?;
//! let mine: RcHandle = qp.handle();                          // all-gather these (bytemuck::bytes_of)
//! qp.connect(&theirs, peer_pe)?;
//! let desc: QpDesc = qp.desc(counters_gpu_addr, 32);        // for the device state's QP table
//! ```
//! Proxy (`transport::proxy::verbs`): `HostQp::create(&nic, depth, Traffic::default(), psn)`,
//! `handle()` and `psn()` to the peer, `connect(&theirs, their_psn, pe)`, then `post(&Request{..},
//! wr_id)` and `poll(&mut completions, max)`.
//!
//! # Crates, and loading the libraries at run time
//! - `rdma-sys` (bindgen over the system's `<infiniband/verbs.h>` at build time) gives the verbs
//!   types, with the system's layouts, and the verbs `verbs.h` defines inline (`ibv_post_send`,
//!   `ibv_poll_cq`) as Rust. Its `extern` functions are not called (see below).
//! - `ibverbs` (the crate the user named) is not used. It builds here (54 s from clean: its
//!   `ibverbs-sys` configures a vendored rdma-core with cmake, then runs bindgen), but its safe API
//!   does not fit: `Context` opens with `ibv_open_device` (no DevX context, which IBGDA needs), only
//!   port 1 and only when that port is active, its raw `ibv_context`/`ibv_pd` pointers are private
//!   (so mlx5dv/DevX calls cannot use its objects), memory registration covers only memory it
//!   allocates itself (not the GPU heap, no dma-buf), and posting only SENDs (no RDMA READ/WRITE or
//!   atomics). Using it would also link libibverbs (below). Its `ffi` duplicates `rdma-sys`'s types
//!   from the vendored headers instead of the system's.
//! - No crate binds mlx5dv/DevX; [`sys`] declares the few functions and structs used.
//! - libibverbs.so.1 and libmlx5.so.1 are loaded with `dlopen` when first needed, not linked: a linked
//!   binary (every test, `rshmrun`, programs using librshmem) would not even start on a machine
//!   without rdma-core, and `rshmrun --diagnose` could not report the missing library. (The linker
//!   drops `rdma-sys`'s `-libverbs -lrdmacm` since no symbol of theirs is referenced; a static-library
//!   user's link line may list them, harmlessly with `--as-needed`.)

pub mod device;
pub mod devx;
mod diag;
pub mod gpu;
pub mod handle;
pub mod mr;
pub mod peer;
pub mod prm;
pub mod rc;
pub mod sys;

pub use device::{LinkLayer, Nic, PortInfo};
pub use devx::{IbgdaNic, IbgdaQp, IbgdaQpConfig, QueueAddrs};
pub use diag::{diagnose, quick_checks};
pub use handle::{RcHandle, RemotePath, Traffic};
pub use mr::{Mr, Via};
pub use rc::{Completion, HostQp, LocalBuf, RdmaOp, RemoteBuf, Request};
