//! The IBGDA path: device threads reach a PE on another node by building mlx5 work-queue entries
//! themselves, updating the doorbell record and ringing the NIC's doorbell, then polling the CQ
//! (design.md "Transports"; `shared/research/ibgda-mlx5.md` §6). No CPU thread sits on the data path
//! of a real NIC. Without one, the IBGDA transport gives device code the queues of rshmem's emulated
//! mlx5 NIC instead, laid out as on hardware: this code cannot tell the difference (only the addresses
//! in the [`Table`] differ). The posting protocol itself (WQEBB reservation, the ready chain, doorbell
//! batching, CQ polling) is `rshmem_ibgda::qp`, shared with the host tests and the emulator's.
//!
//! # What each call posts
//! - `putmem` and friends: RDMA WRITEs from the local buffer (in the symmetric heap, or registered with
//!   `rshmem_buffer_register`), split at the key chunks of both heaps and at the table's largest WQE;
//!   up to 12 bytes from anywhere (a thread-local variable too) as one inline WRITE. Several WQEs of one
//!   call are posted as groups that ring the doorbell once. `put_signal` appends the signal's atomic to
//!   the last group: RC executes it after the WRITEs, so the signal is never visible before the data.
//! - `p`: one inline WRITE. `p`s, non-fetching AMOs and signals of the lanes of a warp that go to one QP
//!   at the same moment are posted as one group (`post_one`: one reservation, one doorbell). `g` and fetching AMOs: a READ or an atomic whose result the NIC writes
//!   into the return slot of its WQE's first WQEBB (below), then a wait for its completion.
//! - AMOs: NVSHMEM's mapping to standard and masked atomics (`rshmem_ibgda::Atomic::amo`); signals:
//!   SET is a masked swap, ADD a 64-bit fetch-add.
//! - `fence`: RC executes the WRITEs and atomics of one QP in order at the target, and a thread's calls
//!   to a PE all go through one QP, so puts, AMOs and signals need nothing. A READ a `get_nbi` left
//!   in flight could still be re-executed after a later WRITE (a retried READ reads memory again), so
//!   while one is outstanding on a QP of this thread (`QpCounters::read_head`) fence posts a NOP with
//!   the fence bit there: the NIC starts nothing after it before the earlier READs and atomics
//!   finished.
//! - `quiet`: every QP's completion through what was ready when it was called.
//!
//! # Queue pairs
//! `qps_per_pe` RC QPs to each remote PE; a thread uses the one of its warp (the warp's index in the
//! grid modulo `qps_per_pe`), so every call of a thread to a PE goes through one QP, in order, and
//! warps of one block spread over the QPs (a QP is in-order: one warp's WQEs never wait behind
//! another's on a different QP). Block-scoped calls are posted by thread 0, through its warp's QP;
//! `quiet` covers every QP.
//!
//! # Return slots
//! A READ for `g` and an atomic's old value need a local buffer the NIC writes: each QP has one
//! [`RetSlot`] per WQEBB of its send queue, used by the WQE whose first WQEBB has that index. The slot
//! is claimed with its `busy` word (the WQEBB count + 1) after the reservation and freed after the value
//! is read: a reservation one ring later (possible as soon as the WQE completed, before its poster read
//! the value) waits for the slot instead of letting the NIC overwrite it. Non-fetching atomics write
//! their (unused) old value into the QP's last slot, which nobody reads.
//!
//! # Errors
//! An error completion (a bad key or address at the target, an unreachable PE, a malformed WQE) stops
//! the PE with a message naming the call, the operation, the target PE and the PRM syndrome
//! (`types::Problem::Nic`). A local buffer the NIC cannot reach (not in the heap, not registered, more
//! than 12 bytes) stops it naming the buffer. Waits go through `wait::idle`: the CPU backend enforces
//! RSHMEM_WAIT_TIMEOUT, and waiting threads apply the inbound operations of other nodes.
//!
//! # Files
//! - `table`: the runtime's [`Table`] and what it points to, and the checked reads of it (the QP of a
//!   thread, remote addresses and keys, local keys).
//! - `post`: posting to one QP: a group, a warp's group, a fetch through a return slot, a wait; the
//!   device-resident NIC model's kernel body (`serve_model`, `RSHMEM_IBGDA_EMULATOR=device`).
//! - `calls`: what the remote layer calls for PEs routed IBGDA (put, get, AMOs, signals, quiet,
//!   fence) and the test hooks.
//!
//! Bottom to top: table, post, calls; this file only declares them and re-exports their items.

mod calls;
mod post;
mod table;

pub use calls::{raw_write, remote_address};
pub use post::serve_model;
pub(crate) use calls::{amo, fence, get, get_inline, put, put_inline, quiet, signal};
pub use table::{ret_bytes, LocalRegion, QpEntry, RetSlot, Table, MAX_LOCAL_REGIONS, MAX_QPS_PER_PE, RET_SLOT_BYTES, TABLE_MAGIC};
