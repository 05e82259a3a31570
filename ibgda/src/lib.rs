//! GPU-initiated networking (IBGDA) for rshmem: the mlx5 pieces GPU threads use to drive a ConnectX
//! NIC directly, and an emulated NIC that runs them without hardware.
//!
//! - [`mlx5`]: the WQE segments, CQE, doorbell record and doorbell layouts (`bytemuck` Pod structs with
//!   big-endian accessors and compile-time offset checks), opcodes, `fm_ce_se` bits, syndromes.
//! - [`wqe`]: building RDMA WRITE (pointer and inline), READ, atomics (standard and masked), NOP and
//!   DUMP WQEs as values.
//! - [`qp`]: where a QP's queues and counters are ([`qp::QpDesc`] holds their addresses,
//!   [`qp::QpCounters`]), the atomics, fences and spin policy the posting code is generic over
//!   ([`qp::Sys`]), its errors, the collapsed CQ's completion test, CQ and doorbell-record set-up.
//! - `post`: what a posting thread runs, as methods of [`qp::QpDesc`]: WQEBB reservation with an
//!   atomic producer counter, writing WQEs into the ring, the ready chain, the doorbell record and the
//!   doorbell (release stores, in that order), CQ polling (collapsed or normal with owner bits).
//! - [`nicmodel`]: the consumer half of a send queue reduced to what posters observe (WQE checks,
//!   collapsed-CQ completions without data), one function for a persistent GPU kernel and a host
//!   thread: the device-resident NIC that measures posting cost (`RSHMEM_IBGDA_EMULATOR=device`).
//! - `emu` (feature `emulator`, std): the emulated mlx5 NIC.
//! - [`codes!`]: enums of wire and register codes written once as a table (the emulator's
//!   `emu::Reason`, [`wqe::AtomicKind`], the device library's collective kinds).
//!
//! Without the `emulator`/`std` features the crate is `no_std`, allocation-free and compiles to PTX
//! (`cargo +nightly build -p rshmem-ibgda --target nvptx64-nvidia-cuda -Zbuild-std=core --release`).
//! Layouts and their sources: `shared/research/ibgda-mlx5.md`.
#![no_std]

#[cfg(feature = "std")]
extern crate std;

// The layers, bottom to top (each module names only those before it): codes, mlx5, wqe, qp, post,
// nicmodel, emu (fault, reason, mr, remote, nic, queues, then its mod.rs), and this file.
#[macro_use]
mod codes;
pub mod mlx5;
pub mod nicmodel;
mod post;
pub mod qp;
pub mod wqe;

#[cfg(feature = "emulator")]
pub mod emu;

pub use qp::{collapsed_state, CqState, CqeError, PollError, QpCounters, QpDesc, Sys};
pub use wqe::{Amo, Atomic, AtomicKind, Local, Remote, Wqe};
