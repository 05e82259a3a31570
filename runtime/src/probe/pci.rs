//! Where PCI devices sit (from sysfs paths and NUMA nodes) and how far apart two are, in NCCL's and
//! NVSHMEM's terms.

use crate::probe::sysfs::{is_bdf, numa_of, under};
use std::path::Path;

/// Where a PCI device sits: the PCI root (what precedes the first PCI address in its sysfs path,
/// `pci0000:15`), the chain of PCI addresses from the root port down to the device, and its NUMA node.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PciLoc {
    /// The PCI root (`pci0000:15`).
    pub root: String,
    /// PCI addresses from the root port down to the device (the device last).
    pub chain: Vec<String>,
    /// The device's NUMA node (None: unknown).
    pub numa: Option<u32>,
}

impl PciLoc {
    /// The device's own PCI address.
    pub fn bdf(&self) -> &str {
        self.chain.last().map(String::as_str).unwrap_or("?")
    }
}

/// The location of the PCI device whose sysfs directory (or a link to it) is `dev`, under `root`.
pub(crate) fn pci_loc(root: &Path, dev: &Path) -> Option<PciLoc> {
    let real = std::fs::canonicalize(dev).ok()?;
    let base = std::fs::canonicalize(under(root, "/sys/devices")).ok()?;
    let rel = real.strip_prefix(&base).ok()?;
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let first = parts.iter().position(|p| is_bdf(p))?;
    let chain: Vec<String> = parts[first..].iter().take_while(|p| is_bdf(p)).cloned().collect();
    if first + chain.len() != parts.len() {
        return None; // the path goes on below a PCI device (not a PCI device itself)
    }
    Some(PciLoc { root: parts[..first].join("/"), chain, numa: numa_of(&real) })
}

/// The location of PCI device `bdf` (via /sys/bus/pci/devices).
pub fn pci_loc_of(root: &Path, bdf: &str) -> Option<PciLoc> {
    pci_loc(root, &under(root, "/sys/bus/pci/devices").join(bdf))
}

/// How far apart two PCI devices are, in NCCL's and NVSHMEM's terms (nearest first).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum PciDistance {
    /// Under one PCIe switch (at most one switch between them).
    Pix,
    /// Several PCIe switches between them, not through the CPU.
    Pxb,
    /// Through the CPU's PCIe host bridge (different root ports or root complexes of one CPU).
    Phb,
    /// Through the link between sockets (different NUMA nodes).
    Sys,
}

impl PciDistance {
    /// NCCL's and NVSHMEM's name for the distance: PIX, PXB, PHB or SYS.
    pub fn name(self) -> &'static str {
        match self {
            PciDistance::Pix => "PIX",
            PciDistance::Pxb => "PXB",
            PciDistance::Phb => "PHB",
            PciDistance::Sys => "SYS",
        }
    }
    pub(crate) fn meaning(self) -> &'static str {
        match self {
            PciDistance::Pix => "same PCIe switch",
            PciDistance::Pxb => "several PCIe switches, not through the CPU",
            PciDistance::Phb => "through the CPU's PCIe host bridge",
            PciDistance::Sys => "across sockets",
        }
    }
}

/// The distance between two PCI devices: SYS on different NUMA nodes; PHB on different PCI roots or
/// root ports; below a shared root port, PIX when each is at most one switch (upstream + downstream
/// port) below their closest common bridge, else PXB. (NCCL merges a switch's upstream and
/// downstream ports into one node the same way.)
pub fn pci_distance(a: &PciLoc, b: &PciLoc) -> PciDistance {
    if let (Some(x), Some(y)) = (a.numa, b.numa) {
        if x != y {
            return PciDistance::Sys;
        }
    }
    if a.root != b.root {
        return PciDistance::Phb;
    }
    let common = a.chain.iter().zip(&b.chain).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return PciDistance::Phb;
    }
    let (da, db) = (a.chain.len() - common, b.chain.len() - common);
    if da <= 2 && db <= 2 {
        PciDistance::Pix
    } else {
        PciDistance::Pxb
    }
}
