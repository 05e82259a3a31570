//! Tests of the probes on synthetic sysfs trees.

use crate::config::parse::*;
use crate::node::iface::*;
use crate::probe::affinity::*;
use crate::probe::check::*;
use crate::probe::gpu::*;
use crate::probe::net::*;
use crate::probe::pci::*;
use crate::probe::rdma::*;
use crate::probe::report::*;
use crate::probe::sysfs::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A synthetic root (sys/, proc/) in a temporary directory, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new(what: &str) -> Tree {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!("rshmem-diag-{}-{what}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tree(dir)
    }
    fn root(&self) -> &Path {
        &self.0
    }
    fn file(&self, rel: &str, text: &str) {
        let p = under(&self.0, rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
    }
    fn link(&self, rel: &str, target: &str) {
        let p = under(&self.0, rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }
    /// A PCI device at `path` below /sys/devices ("pci0000:15/0000:15:01.0/0000:17:00.0"), with
    /// its NUMA node and driver, listed in /sys/bus/pci/devices as on a host (relative links).
    fn pci(&self, path: &str, numa: i32, driver: Option<&str>) {
        let bdf = path.rsplit('/').next().unwrap();
        self.file(&format!("/sys/devices/{path}/numa_node"), &numa.to_string());
        if let Some(d) = driver {
            self.file(&format!("/sys/bus/pci/drivers/{d}/bind"), "");
            let depth = path.split('/').count() + 1; // up to sys/
            self.link(&format!("/sys/devices/{path}/driver"), &format!("{}bus/pci/drivers/{d}", "../".repeat(depth)));
        }
        self.link(&format!("/sys/bus/pci/devices/{bdf}"), &format!("../../../devices/{path}"));
    }
    /// An RDMA device on the PCI device at `pci_path` (None: a software device), with ports.
    fn ib(&self, name: &str, pci_path: Option<&str>, ports: &[(u32, Port)]) {
        let dev_dir = match pci_path {
            Some(p) => format!("/sys/devices/{p}/infiniband/{name}"),
            None => format!("/sys/devices/virtual/infiniband/{name}"),
        };
        self.file(&format!("{dev_dir}/fw_ver"), "28.39.1002");
        if let Some(p) = pci_path {
            let bdf = p.rsplit('/').next().unwrap();
            self.link(&format!("{dev_dir}/device"), &format!("../../../{bdf}"));
        }
        self.link(&format!("/sys/class/infiniband/{name}"), &format!("../../{}", dev_dir.trim_start_matches("/sys/")));
        for (n, p) in ports {
            let d = format!("{dev_dir}/ports/{n}");
            self.file(&format!("{d}/state"), p.state);
            self.file(&format!("{d}/phys_state"), p.phys);
            self.file(&format!("{d}/link_layer"), p.layer);
            self.file(&format!("{d}/lid"), p.lid);
            self.file(&format!("{d}/rate"), "100 Gb/sec (4X EDR)");
            for i in 0..8 {
                let (gid, kind) = p.gids.iter().find(|g| g.0 == i).map(|g| (g.1, Some(g.2))).unwrap_or(("0000:0000:0000:0000:0000:0000:0000:0000", None));
                self.file(&format!("{d}/gids/{i}"), gid);
                if let Some(k) = kind {
                    self.file(&format!("{d}/gid_attrs/types/{i}"), k);
                    if p.layer == "Ethernet" {
                        self.file(&format!("{d}/gid_attrs/ndevs/{i}"), "eth2");
                    }
                }
            }
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Clone)]
struct Port {
    state: &'static str,
    phys: &'static str,
    layer: &'static str,
    lid: &'static str,
    gids: Vec<(u32, &'static str, &'static str)>,
}

const LL: &str = "fe80:0000:0000:0000:0a00:27ff:fe00:0001";
const V4: &str = "0000:0000:0000:0000:0000:ffff:c0a8:0105";

fn roce_active() -> Port {
    Port {
        state: "4: ACTIVE",
        phys: "5: LinkUp",
        layer: "Ethernet",
        lid: "0x0",
        gids: vec![(0, LL, "IB/RoCE v1"), (1, LL, "RoCE v2"), (2, V4, "IB/RoCE v1"), (3, V4, "RoCE v2")],
    }
}
fn ib(state: &'static str, phys: &'static str, lid: &'static str) -> Port {
    Port { state, phys, layer: "InfiniBand", lid, gids: vec![(0, LL, "IB/RoCE v1")] }
}

const SW_GPU: &str = "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0";
const SW_NIC: &str = "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0";
const OTHER_SOCKET_NIC: &str = "pci0000:ae/0000:ae:02.0/0000:af:00.0";

fn lines(checks: &[Check]) -> String {
    checks.iter().map(Check::line).collect::<Vec<_>>().join("\n")
}
fn find<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no {name:?} line in:\n{}", lines(checks)))
}
fn scan(t: &Tree, hca: Option<&str>) -> (Vec<RdmaDevice>, Vec<Check>, bool) {
    let devices = rdma_devices(t.root());
    let (c, usable) = rdma_checks(t.root(), &devices, hca);
    (devices, c, !usable.is_empty())
}

#[test]
fn active_roce_port_with_a_v2_gid_passes() {
    let t = Tree::new("roce");
    t.pci(SW_NIC, 0, Some("mlx5_core"));
    t.ib("mlx5_0", Some(SW_NIC), &[(1, roce_active())]);
    let (devices, checks, ok) = scan(&t, None);
    assert!(ok, "{}", lines(&checks));
    assert_eq!(devices.len(), 1);
    let d = &devices[0];
    assert!(d.is_mlx5());
    assert_eq!(d.pci.as_ref().unwrap().bdf(), "0000:19:00.0");
    assert_eq!(d.pci.as_ref().unwrap().numa, Some(0));
    assert_eq!(d.ports[0].gids.len(), 4);
    assert_eq!(d.ports[0].chosen_gid().unwrap().index, 3, "the IPv4-mapped RoCE v2 GID");
    let sum = find(&checks, "RDMA devices");
    assert_eq!(sum.status, Status::Pass);
    assert!(sum.detail.contains("usable for IBGDA: mlx5_0:1"), "{}", sum.line());
    let dev = find(&checks, "RDMA device mlx5_0");
    assert_eq!(dev.status, Status::Pass);
    assert!(dev.detail.contains("mlx5_core") && dev.detail.contains("PCI 0000:19:00.0") && dev.detail.contains("NUMA node 0"), "{}", dev.line());
    let port = find(&checks, "RDMA port mlx5_0:1");
    assert_eq!(port.status, Status::Pass);
    for want in ["Ethernet (RoCE)", "state ACTIVE", "LinkUp", "netdev eth2", "GID index 3 ::ffff:192.168.1.5 (RoCE v2)"] {
        assert!(port.detail.contains(want), "{want:?} missing: {}", port.line());
    }
    assert_eq!(usable_ports(&devices, &HcaList::default()), vec![("mlx5_0".to_string(), 1)]);
    // RoCE v1 GIDs only: not usable, and the fix says where v2 GIDs come from.
    let t2 = Tree::new("roce-v1");
    t2.pci(SW_NIC, 0, Some("mlx5_core"));
    let mut v1 = roce_active();
    v1.gids.retain(|g| g.2 != "RoCE v2");
    t2.ib("mlx5_0", Some(SW_NIC), &[(1, v1)]);
    let (_, checks, ok) = scan(&t2, None);
    assert!(!ok);
    let port = find(&checks, "RDMA port mlx5_0:1");
    assert_eq!(port.status, Status::Fail);
    assert!(port.detail.contains("no RoCE v2 GID") && port.fix.as_ref().unwrap().contains("dev eth2"), "{}", port.line());
}

#[test]
fn down_infiniband_port_fails_with_what_to_do() {
    let t = Tree::new("ib-down");
    t.pci(SW_NIC, 0, Some("mlx5_core"));
    t.ib("mlx5_1", Some(SW_NIC), &[(1, ib("1: DOWN", "2: Polling", "0x0")), (2, ib("2: INIT", "5: LinkUp", "0x0"))]);
    let (devices, checks, ok) = scan(&t, None);
    assert!(!ok);
    assert!(usable_ports(&devices, &HcaList::default()).is_empty());
    let sum = find(&checks, "RDMA devices");
    assert_eq!(sum.status, Status::Fail);
    assert!(sum.detail.contains("1 found (mlx5_1)") && sum.detail.contains("no port is usable"), "{}", sum.line());
    let p1 = find(&checks, "RDMA port mlx5_1:1");
    assert_eq!(p1.status, Status::Fail);
    assert!(p1.detail.contains("InfiniBand, state DOWN, physical state Polling"), "{}", p1.line());
    assert!(p1.fix.as_ref().unwrap().contains("cable"), "{}", p1.line());
    let p2 = find(&checks, "RDMA port mlx5_1:2");
    assert!(p2.fix.as_ref().unwrap().contains("subnet manager"), "{}", p2.line());
    // Active, with a LID: passes, showing the LID and GID 0.
    let t2 = Tree::new("ib-up");
    t2.pci(SW_NIC, 0, Some("mlx5_core"));
    t2.ib("mlx5_1", Some(SW_NIC), &[(1, ib("4: ACTIVE", "5: LinkUp", "0x1a"))]);
    let (_, checks, ok) = scan(&t2, None);
    assert!(ok, "{}", lines(&checks));
    let p = find(&checks, "RDMA port mlx5_1:1");
    assert!(p.detail.contains("LID 0x1a") && p.detail.contains("GID 0 fe80::a00:27ff:fe00:1"), "{}", p.line());
    // Active without a LID: the subnet manager again.
    let t3 = Tree::new("ib-nolid");
    t3.pci(SW_NIC, 0, Some("mlx5_core"));
    t3.ib("mlx5_1", Some(SW_NIC), &[(1, ib("4: ACTIVE", "5: LinkUp", "0x0"))]);
    let (_, checks, ok) = scan(&t3, None);
    assert!(!ok);
    assert!(find(&checks, "RDMA port mlx5_1:1").fix.as_ref().unwrap().contains("subnet manager"));
}

#[test]
fn no_rdma_device() {
    let t = Tree::new("empty");
    for _ in 0..2 {
        let (devices, checks, ok) = scan(&t, None);
        assert!(devices.is_empty() && !ok);
        assert_eq!(checks.len(), 1);
        let c = &checks[0];
        assert_eq!((c.name.as_str(), c.status), ("RDMA devices", Status::Fail));
        assert!(c.detail.starts_with("no RDMA device (/sys/class/infiniband is empty or missing): the kernel drives no"), "{}", c.line());
        assert!(c.fix.as_ref().unwrap().contains("mlx5_ib") && c.fix.as_ref().unwrap().contains("rdma-core"), "{}", c.line());
        assert!(c.line().starts_with("[FAIL] RDMA devices: no RDMA device (/sys/class/infiniband is empty or missing): "), "{}", c.line());
        assert!(c.line().contains(". Fix: on a host with a ConnectX"), "{}", c.line());
        std::fs::create_dir_all(under(t.root(), "/sys/class/infiniband")).unwrap(); // empty now
    }
    assert!(!usable_at(t.root(), None, Some(|_| Vec::new())));
    // mlx5_core bound without mlx5_ib, and a ConnectX without any driver: the hint names them.
    t.pci(SW_NIC, 0, Some("mlx5_core"));
    t.link("/sys/bus/pci/drivers/mlx5_core/0000:19:00.0", "../../../../devices/pci0000:15");
    let (_, checks, _) = scan(&t, None);
    assert!(checks[0].detail.contains("mlx5_core drives 0000:19:00.0") && checks[0].detail.contains("mlx5_ib"), "{}", checks[0].line());
    let t2 = Tree::new("unbound");
    t2.pci(OTHER_SOCKET_NIC, 1, None);
    t2.file(&format!("/sys/devices/{OTHER_SOCKET_NIC}/vendor"), "0x15b3");
    t2.file(&format!("/sys/devices/{OTHER_SOCKET_NIC}/class"), "0x020000");
    let (_, checks, _) = scan(&t2, None);
    assert!(checks[0].detail.contains("0000:af:00.0 is a Mellanox/NVIDIA network device without a driver"), "{}", checks[0].line());
}

#[test]
fn device_without_the_mlx5_driver_is_not_used() {
    let t = Tree::new("not-mlx5");
    t.pci(SW_NIC, 0, Some("irdma"));
    t.ib("irdma0", Some(SW_NIC), &[(1, roce_active())]);
    t.ib("rxe0", None, &[(1, roce_active())]);
    let (devices, checks, ok) = scan(&t, None);
    assert!(!ok, "{}", lines(&checks));
    assert_eq!(devices.len(), 2);
    assert!(usable_ports(&devices, &HcaList::default()).is_empty());
    let c = find(&checks, "RDMA device irdma0");
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("driver irdma") && c.detail.contains("not an mlx5"), "{}", c.line());
    let c = find(&checks, "RDMA device rxe0");
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("software device"), "{}", c.line());
    assert!(!checks.iter().any(|c| c.name.starts_with("RDMA port")), "ports of non-mlx5 devices are not listed:\n{}", lines(&checks));
    assert_eq!(find(&checks, "RDMA devices").status, Status::Fail);
}

#[test]
fn hca_list_parsing_and_filtering() {
    let l = parse_hca_list(" mlx5_0:1, mlx5_3 ").unwrap();
    assert_eq!(l.entries, vec![("mlx5_0".to_string(), Some(1)), ("mlx5_3".to_string(), None)]);
    assert!(l.allows("mlx5_0", 1) && !l.allows("mlx5_0", 2) && l.allows("mlx5_3", 2) && !l.allows("mlx5_1", 1));
    assert!(l.allows_device("mlx5_0") && !l.allows_device("mlx5_10"));
    let x = parse_hca_list("^mlx5_2,mlx5_0:2").unwrap();
    assert!(x.exclude && !x.allows("mlx5_2", 1) && x.allows("mlx5_0", 1) && !x.allows("mlx5_0", 2) && x.allows("mlx5_1", 1));
    assert!(!x.allows_device("mlx5_2") && x.allows_device("mlx5_0"));
    for bad in ["", "^", "a,,b", "mlx5_0:x", "mlx5_0:0", ":1", "mlx 5", "a/b"] {
        assert!(parse_hca_list(bad).is_err(), "{bad:?}");
        assert!(check_hca_list(bad).unwrap_err().contains("comma-separated"), "{bad:?}");
    }
    // The filter in the report: a device left out is a SKIP, a name not present is said.
    let t = Tree::new("hca");
    t.pci(SW_NIC, 0, Some("mlx5_core"));
    t.pci(OTHER_SOCKET_NIC, 1, Some("mlx5_core"));
    t.ib("mlx5_0", Some(SW_NIC), &[(1, roce_active())]);
    t.ib("mlx5_1", Some(OTHER_SOCKET_NIC), &[(1, roce_active())]);
    let (_, checks, ok) = scan(&t, Some("mlx5_1,mlx5_7"));
    assert!(ok);
    assert_eq!(find(&checks, "RDMA device mlx5_0").status, Status::Skip);
    let sum = find(&checks, "RDMA devices");
    assert!(sum.detail.contains("usable for IBGDA: mlx5_1:1") && sum.detail.contains("names mlx5_7, not present"), "{}", sum.line());
    let (_, checks, ok) = scan(&t, Some("mlx5_7"));
    assert!(!ok && find(&checks, "RDMA devices").status == Status::Fail);
    let (_, checks, ok) = scan(&t, Some("mlx5_0:"));
    assert!(!ok && find(&checks, "RDMA devices").detail.contains("RSHMEM_IB_HCA=\"mlx5_0:\" is not valid"), "{}", lines(&checks));
    assert!(!usable_at(t.root(), Some("mlx5_0:"), Some(|_| Vec::new())));
}

fn loc(root: &str, chain: &[&str], numa: Option<u32>) -> PciLoc {
    PciLoc { root: root.into(), chain: chain.iter().map(|s| s.to_string()).collect(), numa }
}

#[test]
fn pci_distances() {
    let gpu = loc("pci0000:15", &["0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"], Some(0));
    let same_switch = loc("pci0000:15", &["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"], Some(0));
    let upper_switch = loc("pci0000:15", &["0000:15:01.0", "0000:1a:00.0"], Some(0));
    let other_port = loc("pci0000:15", &["0000:15:02.0", "0000:20:00.0"], Some(0));
    let other_root = loc("pci0000:30", &["0000:30:01.0", "0000:31:00.0"], Some(0));
    let other_socket = loc("pci0000:ae", &["0000:ae:02.0", "0000:af:00.0"], Some(1));
    assert_eq!(pci_distance(&gpu, &same_switch), PciDistance::Pix);
    assert_eq!(pci_distance(&gpu, &upper_switch), PciDistance::Pxb);
    assert_eq!(pci_distance(&gpu, &other_port), PciDistance::Phb);
    assert_eq!(pci_distance(&gpu, &other_root), PciDistance::Phb);
    assert_eq!(pci_distance(&gpu, &other_socket), PciDistance::Sys);
    assert_eq!(pci_distance(&same_switch, &gpu), PciDistance::Pix);
    let unknown_numa = loc("pci0000:ae", &["0000:ae:02.0", "0000:af:00.0"], None);
    assert_eq!(pci_distance(&gpu, &unknown_numa), PciDistance::Phb);
    assert!(is_bdf("0000:17:00.0") && is_bdf("10000:e1:1f.7") && !is_bdf("pci0000:15") && !is_bdf("0000:17:00.8"));
}

fn gpus_at(t: &Tree, bdfs: &[&str]) -> GpuProbe {
    for b in bdfs {
        t.file(&format!("/proc/driver/nvidia/gpus/{b}/information"), "Model: \t NVIDIA H100 80GB HBM3\nBus Location: \t 0000:18:00.0");
    }
    probe_gpus(t.root())
}

#[test]
fn gpu_and_nic_under_one_switch_vs_other_socket() {
    let t = Tree::new("affinity");
    t.pci(SW_GPU, 0, Some("nvidia"));
    t.pci(SW_NIC, 0, Some("mlx5_core"));
    t.pci(OTHER_SOCKET_NIC, 1, Some("mlx5_core"));
    t.ib("mlx5_0", Some(SW_NIC), &[(1, roce_active())]);
    t.ib("mlx5_1", Some(OTHER_SOCKET_NIC), &[(1, roce_active())]);
    let gpus = gpus_at(&t, &["0000:18:00.0"]);
    match &gpus {
        GpuProbe::Found { gpus, .. } => assert_eq!(gpus[0].name.as_deref(), Some("NVIDIA H100 80GB HBM3")),
        other => panic!("{other:?}"),
    }
    let devices = rdma_devices(t.root());
    let usable = usable_ports(&devices, &HcaList::default());
    assert_eq!(usable.len(), 2);
    let checks = affinity_checks(t.root(), &gpus, &devices, &usable);
    assert_eq!(checks.len(), 1);
    let c = &checks[0];
    assert_eq!(c.status, Status::Pass, "{}", c.line());
    assert_eq!(c.name, "GPU-NIC affinity, GPU 0000:18:00.0");
    for want in ["NUMA node 0", "mlx5_0 PIX (same PCIe switch", "mlx5_1 SYS (across sockets, NUMA node 1)", "RSHMEM_IB_HCA=mlx5_0"] {
        assert!(c.detail.contains(want), "{want:?} missing: {}", c.line());
    }
    assert_eq!(nearest_port(t.root(), "0000:18:00.0", &HcaList::default()), Some(("mlx5_0".to_string(), 1)));
    // Only the NIC of the other socket allowed: the GPU's traffic crosses sockets (INFO, not FAIL).
    let only1 = parse_hca_list("mlx5_1").unwrap();
    let usable = usable_ports(&devices, &only1);
    let c = &affinity_checks(t.root(), &gpus, &devices, &usable)[0];
    assert_eq!(c.status, Status::Info, "{}", c.line());
    assert!(c.detail.contains("nearest: mlx5_1 (SYS)") && c.detail.contains("crosses the CPU"), "{}", c.line());
    assert_eq!(nearest_port(t.root(), "0000:18:00.0", &only1), Some(("mlx5_1".to_string(), 1)));
    // No GPU, no NIC: SKIP lines.
    let none = affinity_checks(t.root(), &GpuProbe::Missing("libcuda.so not found".into()), &devices, &usable);
    assert_eq!(none[0].status, Status::Skip);
    let nonic = affinity_checks(t.root(), &gpus, &[], &[]);
    assert_eq!(nonic[0].status, Status::Skip);
}

#[test]
fn gpudirect_needs_dma_buf_or_peermem_and_skips_without_a_gpu() {
    let t = Tree::new("gdr");
    t.file("/proc/sys/kernel/osrelease", "5.10.0-21-amd64");
    let gpu = |dma: bool| GpuProbe::Found {
        gpus: vec![Gpu { ordinal: Some(0), bus_id: "0000:18:00.0".into(), name: None, dma_buf: Some(dma) }],
        cuda_version: Some(12040),
        cuda_error: None,
    };
    let c = gpudirect_check(t.root(), &gpu(true));
    assert_eq!(c.status, Status::Fail, "{}", c.line());
    assert!(c.detail.contains("older than 5.12") && c.fix.as_ref().unwrap().contains("nvidia_peermem"), "{}", c.line());
    t.file("/proc/modules", "nvidia_peermem 16384 0 - Live 0x0000000000000000\nnvidia 56000000 1 nvidia_peermem, Live 0x0");
    let c = gpudirect_check(t.root(), &gpu(true));
    assert_eq!(c.status, Status::Pass, "{}", c.line());
    assert!(c.detail.contains("through the peer-memory module") && c.detail.contains("nvidia_peermem loaded"), "{}", c.line());
    let t2 = Tree::new("gdr-dmabuf");
    t2.file("/proc/sys/kernel/osrelease", "6.8.0-45-generic");
    let c = gpudirect_check(t2.root(), &gpu(true));
    assert_eq!(c.status, Status::Pass, "{}", c.line());
    assert!(c.detail.contains("through dma-buf") && c.detail.contains("CUDA driver 12.4 reports dma-buf support on the GPU"), "{}", c.line());
    let c = gpudirect_check(t2.root(), &gpu(false));
    assert_eq!(c.status, Status::Fail, "{}", c.line());
    assert!(c.detail.contains("no dma-buf support on GPU 0 (0000:18:00.0)"), "{}", c.line());
    let c = gpudirect_check(t2.root(), &GpuProbe::Missing("libcuda.so not found".into()));
    assert_eq!(c.status, Status::Skip, "{}", c.line());
    assert!(c.detail.starts_with("no GPU (libcuda.so not found)") && c.detail.contains("6.8.0-45-generic"), "{}", c.line());
    // The kernel driver lists a GPU that CUDA cannot use: FAIL, unless peermem is there.
    let listed = gpus_at(&t2, &["0000:18:00.0"]);
    let c = gpudirect_check(t2.root(), &listed);
    assert_eq!(c.status, Status::Fail, "{}", c.line());
    assert!(c.fix.as_ref().unwrap().contains("libcuda.so"), "{}", c.line());
    let c = gpudirect_check(t2.root(), &GpuProbe::Failed("the CUDA driver did not answer within 30 s".into()));
    assert_eq!(c.status, Status::Fail);
    assert_eq!(kernel_version(t2.root()).map(|k| (k.0, k.1)), Some((6, 8)));
}

#[test]
fn the_whole_report_on_a_synthetic_host() {
    let t = Tree::new("report");
    t.file("/proc/sys/kernel/osrelease", "6.8.0");
    t.pci(SW_GPU, 0, Some("nvidia"));
    t.pci(SW_NIC, 0, Some("mlx5_core"));
    t.ib("mlx5_0", Some(SW_NIC), &[(1, roce_active())]);
    let gpus = GpuProbe::Found {
        gpus: vec![Gpu { ordinal: Some(0), bus_id: "0000:18:00.0".into(), name: None, dma_buf: Some(true) }],
        cuda_version: Some(13000),
        cuda_error: None,
    };
    let net = NetEnv { bootstrap: Some("127.0.0.1:29500".into()), ..NetEnv::default() };
    // Without the verbs library's checks (a build without the feature): never usable, one FAIL
    // line; with checks that pass: usable. The transport line is the caller's.
    let transport = |u: bool| Check::new("remote transport", Status::Info, format!("usable: {u}"));
    let (with_verbs, usable) = report_at(t.root(), None, &net, gpus.clone(), Some(|_| vec![Check::new("DevX", Status::Pass, "ok")]), &transport);
    assert!(usable, "{}", lines(&with_verbs));
    assert_eq!(with_verbs.last().unwrap().detail, "usable: true");
    let (checks, usable) = report_at(t.root(), None, &net, gpus, None, &transport);
    let text = lines(&checks);
    assert!(!usable, "{text}");
    assert_eq!(find(&checks, "RDMA devices").status, Status::Pass, "{text}");
    assert_eq!(find(&checks, "GPUDirect RDMA").status, Status::Pass, "{text}");
    assert_eq!(find(&checks, "GPU-NIC affinity, GPU 0 (0000:18:00.0)").status, Status::Pass, "{text}");
    assert!(find(&checks, "bootstrap interface").detail.contains("loopback"), "{text}");
    assert!(find(&checks, "proxy interface").detail.contains("127.0.0.1"), "{text}");
    let v = find(&checks, "DevX and GPU-mapped UAR");
    assert_eq!(v.status, Status::Fail);
    assert!(v.fix.as_ref().unwrap().contains("cargo build --release --features rshmem/verbs"), "{text}");
    assert_eq!(find(&checks, "remote transport").detail, "usable: false", "{text}");
    assert_eq!(checks.last().unwrap().name, "remote transport");
    // Every line is one line with a tag.
    let r = render(&checks);
    assert!(r.lines().skip(2).all(|l| ["[PASS] ", "[FAIL] ", "[INFO] ", "[SKIP] "].iter().any(|t| l.starts_with(t))), "{r}");
}

#[test]
fn network_lines() {
    let c = bootstrap_check(&NetEnv::default());
    assert_eq!(c.status, Status::Info, "{}", c.line());
    assert!(c.detail.contains("unique-id API listens on"), "{}", c.line());
    let bad = NetEnv { bootstrap_ifname: Some("no-such-if0".into()), ..NetEnv::default() };
    let c = bootstrap_check(&bad);
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("no-such-if0") && c.detail.contains("no such interface"), "{}", c.line());
    let c = proxy_check(&NetEnv { proxy_ifname: Some("no-such-if0".into()), ..NetEnv::default() });
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("RSHMEM_PROXY_IFNAME=no-such-if0"), "{}", c.line());
    let lo = NetEnv { proxy_ifname: Some("lo".into()), ..NetEnv::default() };
    assert!(proxy_check(&lo).detail.contains("127.0.0.1 (lo): RSHMEM_PROXY_IFNAME=lo"), "{}", proxy_check(&lo).line());
    let c = bootstrap_check(&NetEnv { bootstrap: Some("127.0.0.1:4000".into()), ..NetEnv::default() });
    assert!(c.detail.contains("loopback"), "{}", c.line());
    let c = bootstrap_check(&NetEnv { bootstrap: Some("no-such-host.invalid:4000".into()), ..NetEnv::default() });
    assert_eq!(c.status, Status::Fail, "{}", c.line());
}

#[test]
fn check_lines() {
    let c = Check::new("x", Status::Fail, "bad").with_fix("do y");
    assert_eq!(c.line(), "[FAIL] x: bad. Fix: do y");
    let c = Check::new("x", Status::Pass, "fine.\nreally");
    assert_eq!(c.line(), "[PASS] x: fine. really");
}
