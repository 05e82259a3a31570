//! The host probes: the NIC and network checks behind `rshmrun --diagnose` and behind the choice of the
//! remote transport (`crate::transport::select::choose_remote`): a real NIC is used only when every check here passes.
//!
//! Layering: this module probes the host (sysfs, the CUDA driver, network interfaces) and imports no
//! transport. The two things it needs from the transport layer are handed in: the verbs library's
//! checks (`crate::transport::verbs`, feature `verbs`) and the line naming the transport a job would
//! use (`crate::transport::choose_remote`). `crate::transport::select` wires them in (`report`,
//! `nic_usable`), and the verbs module uses this module's sysfs model.
//!
//! The checks, in the order `rshmrun --diagnose` prints them (one [`Check`](check::Check) per line):
//! 1. **RDMA devices** (sysfs `/sys/class/infiniband`): a summary line, then per device its driver
//!    (IBGDA drives mlx5 ConnectX NICs, `mlx5_core`), PCI address and NUMA node, and per port the link
//!    layer (InfiniBand or Ethernet = RoCE), state, physical state and the GID IBGDA would use (RoCE:
//!    a RoCE v2 GID, IPv4-mapped first; InfiniBand: GID 0 and a LID). `RSHMEM_IB_HCA` narrows the
//!    devices considered ([`HcaList`](crate::config::parse::HcaList)).
//! 2. **GPUDirect RDMA**: dma-buf (Linux ≥ 5.12 and the CUDA driver's
//!    `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` on every GPU), else the peer-memory module
//!    (`nvidia_peermem` or `nv_peer_mem`).
//! 3. **DevX, dma-buf registration, a UAR mapped into the GPU**: `crate::transport::verbs::diagnose`
//!    (the `verbs` feature); a build without the feature says so in one FAIL line.
//! 4. **GPU–NIC affinity**: per GPU, every NIC's PCIe distance (NCCL's and NVSHMEM's PIX/PXB/PHB/SYS,
//!    [`PciDistance`](pci::PciDistance)) from the sysfs paths and NUMA nodes, the nearest NIC and the `RSHMEM_IB_HCA` to
//!    set for the PE on that GPU.
//! 5. **Bootstrap and proxy interfaces**: the address the bootstrap and the proxy would use (the
//!    logic of `bootstrap::local_ipv4` and of the proxy's listen address, with
//!    `RSHMEM_BOOTSTRAP_IFNAME`, `RSHMEM_PROXY_IFNAME` and `RSHMEM_BOOTSTRAP`).
//! 6. **Remote transport**: what a job with PEs on other nodes would use (`choose_remote` with
//!    `RSHMEM_REMOTE_TRANSPORT` and [`nic_usable`](crate::transport::select::nic_usable)).
//!
//! Statuses: PASS and FAIL for what IBGDA on a real NIC needs; INFO for facts (interfaces, the
//! transport chosen, a NIC that works but is far from a GPU); SKIP for what cannot or need not be
//! checked here. **A missing GPU is a SKIP, not a FAIL**: GPUDirect RDMA and the GPU–NIC affinity
//! concern GPU memory, and without a GPU rshmem runs on the CPU backend, whose heap is host memory
//! that a NIC reaches without GPUDirect; a machine without a GPU is normal (CI). A SKIP never makes
//! the NIC unusable. A GPU the kernel driver lists but CUDA cannot use is a FAIL.
//!
//! The NIC is usable ([`nic_usable`](crate::transport::select::nic_usable)) when: at least one mlx5 port passes (and `RSHMEM_IB_HCA`
//! allows it), the build has the `verbs` feature, GPUDirect RDMA does not FAIL, and no verbs check
//! FAILs. A FAIL of one port while another passes leaves the NIC usable (that port is not used).
//!
//! Every probe is bounded: sysfs scans, the CUDA driver, name resolution and the verbs checks run on
//! a helper thread with a time limit, and a probe that does not answer becomes a FAIL line that says
//! so. The sysfs and procfs readers take a root directory ("/" on a host), so tests build synthetic
//! trees.
//!
//! Files, bottom to top: [`check`] (one line of the report, the time limits), [`sysfs`], [`pci`],
//! [`rdma`], [`gpu`], [`affinity`], [`net`], [`report`] (the whole report and the decision).

pub mod affinity;
pub mod check;
pub mod gpu;
pub mod net;
pub mod pci;
pub mod rdma;
pub mod report;
pub mod sysfs;
#[cfg(test)]
mod tests;
