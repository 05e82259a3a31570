//! GPU–NIC affinity: per GPU, every NIC's PCIe distance, the nearest NIC and the `RSHMEM_IB_HCA` to set
//! for the PE on that GPU.

use crate::config::parse::HcaList;
use crate::probe::check::{Check, Status};
use crate::probe::gpu::GpuProbe;
use crate::probe::pci::{pci_distance, pci_loc_of, PciDistance};
use crate::probe::rdma::{rdma_devices, usable_ports, RdmaDevice};
use std::path::Path;

/// The nearest usable port (after `RSHMEM_IB_HCA`) to the GPU at PCI address `gpu_bus_id`, as
/// (device, port), from sysfs under `root`; None when no port is usable or the GPU is not found.
/// Ties go to the first device in name order.
pub fn nearest_port(root: &Path, gpu_bus_id: &str, hca: &HcaList) -> Option<(String, u32)> {
    let devices = rdma_devices(root);
    let usable = usable_ports(&devices, hca);
    let gpu = pci_loc_of(root, &gpu_bus_id.to_ascii_lowercase())?;
    usable
        .into_iter()
        .filter_map(|(d, p)| {
            let loc = devices.iter().find(|x| x.name == d)?.pci.as_ref()?;
            Some((pci_distance(&gpu, loc), d, p))
        })
        .min_by(|x, y| x.0.cmp(&y.0))
        .map(|(_, d, p)| (d, p))
}

/// One line per GPU: its NUMA node, each NIC's distance, the nearest NIC and the RSHMEM_IB_HCA to set
/// for the PE on that GPU. NICs with a usable port are compared (all mlx5 NICs when none is usable).
pub(crate) fn affinity_checks(root: &Path, gpus: &GpuProbe, devices: &[RdmaDevice], usable: &[(String, u32)]) -> Vec<Check> {
    const NAME: &str = "GPU-NIC affinity";
    let gpus = match gpus {
        GpuProbe::Found { gpus, .. } if !gpus.is_empty() => gpus,
        GpuProbe::Found { .. } | GpuProbe::Missing(_) => {
            return vec![Check::new(NAME, Status::Skip, "no GPU: nothing to place near a NIC")];
        }
        GpuProbe::Failed(why) => return vec![Check::new(NAME, Status::Skip, format!("the GPUs could not be listed: {why}"))],
    };
    let any_usable = !usable.is_empty();
    let nics: Vec<&RdmaDevice> = devices
        .iter()
        .filter(|d| d.is_mlx5() && d.pci.is_some())
        .filter(|d| !any_usable || usable.iter().any(|(n, _)| *n == d.name))
        .collect();
    if nics.is_empty() {
        return vec![Check::new(NAME, Status::Skip, "no mlx5 RDMA device on the PCI bus to place relative to the GPUs")];
    }
    let mut out = Vec::new();
    for g in gpus {
        let name = format!("{NAME}, {}", g.label());
        let Some(gloc) = pci_loc_of(root, &g.bus_id) else {
            out.push(Check::new(name, Status::Info, format!("{} is not in /sys/bus/pci/devices: its PCIe position is unknown", g.bus_id)));
            continue;
        };
        let mut dists: Vec<(PciDistance, &RdmaDevice)> = nics.iter().map(|d| (pci_distance(&gloc, d.pci.as_ref().unwrap()), *d)).collect();
        dists.sort_by_key(|(dist, _)| *dist);
        let (best, nearest) = (dists[0].0, dists[0].1);
        let numa = gloc.numa.map(|n| format!("NUMA node {n}")).unwrap_or_else(|| "NUMA node unknown".into());
        let list: Vec<String> = dists
            .iter()
            .map(|(dist, d)| {
                let numa = d.pci.as_ref().and_then(|l| l.numa).map(|n| format!(", NUMA node {n}")).unwrap_or_default();
                format!("{} {} ({}{numa})", d.name, dist.name(), dist.meaning())
            })
            .collect();
        // Name the port when the device has several and only some are usable.
        let ports: Vec<u32> = usable.iter().filter(|(n, _)| *n == nearest.name).map(|(_, p)| *p).collect();
        let hca = if ports.len() == 1 && nearest.ports.len() > 1 { format!("{}:{}", nearest.name, ports[0]) } else { nearest.name.clone() };
        let head = format!("{} on {numa}: {}", g.bus_id, list.join("; "));
        let c = if !any_usable {
            Check::new(name, Status::Info, format!("{head}; no NIC is usable, so none is chosen"))
        } else if best <= PciDistance::Pxb {
            Check::new(name, Status::Pass, format!("{head}; nearest: {} — for the PE on this GPU set RSHMEM_IB_HCA={hca}", nearest.name))
        } else {
            Check::new(
                name,
                Status::Info,
                format!("{head}; nearest: {} ({}), no NIC shares a PCIe switch with this GPU, so its RDMA traffic crosses the CPU (slower) — for the PE on this GPU set RSHMEM_IB_HCA={hca}", nearest.name, best.name()),
            )
        };
        out.push(c);
    }
    out
}
