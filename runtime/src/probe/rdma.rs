//! RDMA devices and their ports as sysfs shows them (`/sys/class/infiniband`), and the checks of
//! `rshmrun --diagnose`'s first lines: which mlx5 ports IBGDA could use, and why the others not.

use crate::config::parse::{parse_hca_list, HcaList};
use crate::probe::check::{Check, Status};
use crate::probe::pci::{pci_loc, PciLoc};
use crate::probe::sysfs::{entries, is_bdf, read, under};
use std::path::Path;

/// One GID of a port (only non-zero entries are kept).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Gid {
    /// The GID table index (`ports/<n>/gids/<index>`).
    pub index: u32,
    /// As sysfs writes it: eight groups of four hex digits.
    pub gid: String,
    /// `gid_attrs/types/<i>`: "RoCE v2" or "IB/RoCE v1".
    pub kind: Option<String>,
    /// `gid_attrs/ndevs/<i>`: the netdev the GID belongs to (RoCE).
    pub ndev: Option<String>,
}

impl Gid {
    /// Whether sysfs types the GID as RoCE v2.
    pub fn is_roce_v2(&self) -> bool {
        self.kind.as_deref().is_some_and(|k| k.eq_ignore_ascii_case("RoCE v2"))
    }
    /// The GID as an IPv6 address (IPv4-mapped GIDs print as ::ffff:a.b.c.d).
    pub fn addr(&self) -> Option<std::net::Ipv6Addr> {
        self.gid.parse().ok()
    }
    /// Readable form: the address when it parses, else the raw text.
    pub fn pretty(&self) -> String {
        self.addr().map(|a| a.to_string()).unwrap_or_else(|| self.gid.clone())
    }
}

/// One port of an RDMA device.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RdmaPort {
    /// The port number (from 1).
    pub num: u32,
    /// The logical state after "N: " ("ACTIVE", "DOWN", "INIT", "ARMED").
    pub state: String,
    /// The physical state after "N: " ("LinkUp", "Polling", "Disabled").
    pub phys_state: String,
    /// "InfiniBand" or "Ethernet".
    pub link_layer: String,
    /// InfiniBand LID (0: none assigned).
    pub lid: Option<u32>,
    /// "100 Gb/sec (4X EDR)".
    pub rate: Option<String>,
    /// The port's non-zero GIDs, by index.
    pub gids: Vec<Gid>,
}

impl RdmaPort {
    /// Whether the link layer is Ethernet (RoCE).
    pub fn is_ethernet(&self) -> bool {
        self.link_layer.eq_ignore_ascii_case("Ethernet")
    }
    /// Whether the link layer is InfiniBand.
    pub fn is_infiniband(&self) -> bool {
        self.link_layer.eq_ignore_ascii_case("InfiniBand")
    }
    /// The GID IBGDA would use: RoCE: a RoCE v2 GID, IPv4-mapped first, then a global IPv6 one,
    /// then a link-local one; InfiniBand: the lowest index (GID 0, the port GID).
    pub fn chosen_gid(&self) -> Option<&Gid> {
        if self.is_infiniband() {
            return self.gids.first();
        }
        let v2 = || self.gids.iter().filter(|g| g.is_roce_v2());
        let mapped = |g: &&Gid| g.addr().is_some_and(|a| a.to_ipv4_mapped().is_some());
        let link_local = |g: &&Gid| g.addr().is_some_and(|a| a.segments()[0] & 0xffc0 == 0xfe80);
        v2().find(mapped).or_else(|| v2().find(|g| !link_local(g))).or_else(|| v2().next())
    }
}

/// One RDMA device of /sys/class/infiniband.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RdmaDevice {
    /// The device name (`mlx5_0`).
    pub name: String,
    /// The PCI driver of the device behind it ("mlx5_core"); None for software devices (rxe, siw).
    pub driver: Option<String>,
    /// Where the PCI device behind it sits (None for software devices).
    pub pci: Option<PciLoc>,
    /// The firmware version sysfs shows (`fw_ver`).
    pub fw_ver: Option<String>,
    /// The device's ports, by number.
    pub ports: Vec<RdmaPort>,
}

impl RdmaDevice {
    /// Whether the device is an mlx5 ConnectX NIC (the only kind IBGDA drives).
    pub fn is_mlx5(&self) -> bool {
        self.driver.as_deref() == Some("mlx5_core")
    }
}

/// The RDMA devices under `root` (sysfs /sys/class/infiniband), in natural name order.
pub fn rdma_devices(root: &Path) -> Vec<RdmaDevice> {
    let class = under(root, "/sys/class/infiniband");
    entries(&class).into_iter().map(|name| rdma_device(root, &class.join(&name), name)).collect()
}

pub(crate) fn rdma_device(root: &Path, dir: &Path, name: String) -> RdmaDevice {
    let dev = dir.join("device");
    let driver = std::fs::read_link(dev.join("driver")).ok().and_then(|t| t.file_name().map(|f| f.to_string_lossy().into_owned()));
    let ports_dir = dir.join("ports");
    let ports = entries(&ports_dir)
        .into_iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .map(|num| rdma_port(&ports_dir.join(num.to_string()), num))
        .collect();
    RdmaDevice { name, driver, pci: pci_loc(root, &dev), fw_ver: read(&dir.join("fw_ver")), ports }
}

pub(crate) fn rdma_port(dir: &Path, num: u32) -> RdmaPort {
    let after_colon = |s: String| s.split_once(':').map(|(_, t)| t.trim().to_string()).unwrap_or(s);
    let mut gids = Vec::new();
    let gid_dir = dir.join("gids");
    for i in entries(&gid_dir).into_iter().filter_map(|e| e.parse::<u32>().ok()) {
        let Some(gid) = read(&gid_dir.join(i.to_string())) else { continue };
        if gid.is_empty() || gid.chars().all(|c| c == '0' || c == ':') {
            continue; // an unused entry
        }
        let kind = read(&dir.join("gid_attrs/types").join(i.to_string())).filter(|s| !s.is_empty());
        let ndev = read(&dir.join("gid_attrs/ndevs").join(i.to_string())).filter(|s| !s.is_empty());
        gids.push(Gid { index: i, gid, kind, ndev });
    }
    RdmaPort {
        num,
        state: read(&dir.join("state")).map(after_colon).unwrap_or_else(|| "unknown".into()),
        phys_state: read(&dir.join("phys_state")).map(after_colon).unwrap_or_else(|| "unknown".into()),
        link_layer: read(&dir.join("link_layer")).unwrap_or_else(|| "unknown".into()),
        lid: read(&dir.join("lid")).and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()),
        rate: read(&dir.join("rate")).filter(|s| !s.is_empty()),
        gids,
    }
}

/// What keeps a port from use (by IBGDA or host verbs alike): the reason as data, [`port_check`]
/// says it at length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortFault {
    /// The logical state is not ACTIVE.
    NotActive,
    /// An InfiniBand port without a LID.
    NoLid,
    /// An Ethernet port without a RoCE v2 GID.
    NoRoceV2Gid,
    /// Neither InfiniBand nor Ethernet.
    LinkLayer,
}

impl PortFault {
    /// A few words for a list of ports.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            PortFault::NotActive => "not ACTIVE",
            PortFault::NoLid => "no LID assigned",
            PortFault::NoRoceV2Gid => "no RoCE v2 GID",
            PortFault::LinkLayer => "neither InfiniBand nor Ethernet",
        }
    }
}

/// What keeps port `p` from use; None when it is usable (ACTIVE, with a LID on InfiniBand or a
/// RoCE v2 GID on Ethernet).
pub(crate) fn port_fault(p: &RdmaPort) -> Option<PortFault> {
    if !p.state.eq_ignore_ascii_case("ACTIVE") {
        Some(PortFault::NotActive)
    } else if p.is_infiniband() {
        (p.lid.unwrap_or(0) == 0).then_some(PortFault::NoLid)
    } else if p.is_ethernet() {
        p.chosen_gid().is_none().then_some(PortFault::NoRoceV2Gid)
    } else {
        Some(PortFault::LinkLayer)
    }
}

/// The check of one port of an mlx5 device: PASS when IBGDA could use it ([`port_fault`] is None).
pub(crate) fn port_check(dev: &RdmaDevice, p: &RdmaPort) -> Check {
    let name = format!("RDMA port {}:{}", dev.name, p.num);
    let layer = if p.is_ethernet() {
        "Ethernet (RoCE)".to_string()
    } else {
        p.link_layer.clone()
    };
    let netdev = p.gids.iter().find_map(|g| g.ndev.clone()).map(|n| format!(", netdev {n}")).unwrap_or_default();
    let rate = p.rate.as_ref().map(|r| format!(", {r}")).unwrap_or_default();
    let facts = format!("{layer}, state {}, physical state {}{rate}{netdev}", p.state, p.phys_state);
    match port_fault(p) {
        Some(PortFault::NotActive) => {
            let fix = if p.is_infiniband() && p.phys_state.eq_ignore_ascii_case("LinkUp") {
                "the link is up but no subnet manager has configured the port: run a subnet manager on the fabric (opensm on one node, or the switch's), then check with `ibstat`".to_string()
            } else if p.is_ethernet() {
                let nd = p.gids.iter().find_map(|g| g.ndev.clone()).unwrap_or_else(|| "<netdev>".into());
                format!("bring the link up: check the cable and the switch port, and `ip link set {nd} up` (`rdma link` shows the port's netdev)")
            } else {
                "no link: check the cable and the switch port (`ibstat` shows the physical state); or leave this port out with RSHMEM_IB_HCA".to_string()
            };
            Check::new(name, Status::Fail, format!("{facts}: not ACTIVE, so IBGDA cannot use it")).with_fix(fix)
        }
        Some(PortFault::NoLid) => Check::new(name, Status::Fail, format!("{facts}, but no LID is assigned"))
            .with_fix("a subnet manager assigns LIDs: run one on the fabric (opensm), then check with `ibstat`"),
        Some(PortFault::NoRoceV2Gid) => {
            let nd = p.gids.iter().find_map(|g| g.ndev.clone()).unwrap_or_else(|| "the port's netdev".into());
            let have = if p.gids.is_empty() {
                "no GID at all".to_string()
            } else {
                format!("only {} GID(s) of other types", p.gids.len())
            };
            Check::new(name, Status::Fail, format!("{facts}; no RoCE v2 GID ({have})")).with_fix(format!(
                "RoCE v2 GIDs follow the IP addresses of {nd}: give it an IPv4 address (`ip addr add ADDR/PREFIX dev {nd}`); `rdma link` and `show_gids` list them"
            ))
        }
        Some(PortFault::LinkLayer) => Check::new(name, Status::Fail, format!("{facts}: link layer {:?}; IBGDA needs InfiniBand or Ethernet (RoCE)", p.link_layer)),
        None if p.is_infiniband() => {
            let gid = p.chosen_gid().map(|g| format!(", GID {} {}", g.index, g.pretty())).unwrap_or_default();
            Check::new(name, Status::Pass, format!("{facts}, LID {:#x}{gid}", p.lid.unwrap_or(0)))
        }
        None => {
            let gid = p.chosen_gid().map(|g| format!("; GID index {} {} (RoCE v2)", g.index, g.pretty())).unwrap_or_default();
            Check::new(name, Status::Pass, format!("{facts}{gid}"))
        }
    }
}

/// `RSHMEM_IB_HCA`'s value (`hca`, None: unset) parsed; `Err` names the variable and what is wrong.
pub(crate) fn hca_filter(hca: Option<&str>) -> std::result::Result<HcaList, String> {
    match hca {
        None => Ok(HcaList::default()),
        Some(v) => parse_hca_list(v).map_err(|why| format!("{}={v:?} is not valid: {why}", crate::config::env::IB_HCA)),
    }
}

/// The ports of the devices `vendor` accepts that `hca` allows, each with what keeps it from use
/// ([`port_fault`]; None: usable), in device and port order.
pub(crate) fn allowed_ports<'a>(
    devices: &'a [RdmaDevice],
    hca: &'a HcaList,
    vendor: impl Fn(&RdmaDevice) -> bool + 'a,
) -> impl Iterator<Item = (&'a RdmaDevice, &'a RdmaPort, Option<PortFault>)> + 'a {
    devices
        .iter()
        .filter(move |d| vendor(d))
        .flat_map(move |d| d.ports.iter().filter(move |p| hca.allows(&d.name, p.num)).map(move |p| (d, p, port_fault(p))))
}

/// The usable ports of the devices `vendor` accepts, allowed by `hca`, as (device, port).
pub(crate) fn usable_ports_by(devices: &[RdmaDevice], hca: &HcaList, vendor: impl Fn(&RdmaDevice) -> bool) -> Vec<(String, u32)> {
    allowed_ports(devices, hca, vendor).filter(|(.., f)| f.is_none()).map(|(d, p, _)| (d.name.clone(), p.num)).collect()
}

/// The ports IBGDA could use, as (device, port): mlx5 devices, allowed by `hca`, ports that pass.
pub fn usable_ports(devices: &[RdmaDevice], hca: &HcaList) -> Vec<(String, u32)> {
    usable_ports_by(devices, hca, RdmaDevice::is_mlx5)
}

/// When no RDMA device exists: what the PCI bus says about ConnectX NICs (a bound mlx5_core without
/// mlx5_ib, a Mellanox/NVIDIA network device without a driver).
pub(crate) fn missing_device_hint(root: &Path) -> Option<String> {
    let bound: Vec<String> = entries(&under(root, "/sys/bus/pci/drivers/mlx5_core")).into_iter().filter(|e| is_bdf(e)).collect();
    if !bound.is_empty() {
        return Some(format!(
            "mlx5_core drives {} but no RDMA device exists: the mlx5_ib module is not loaded",
            bound.join(", ")
        ));
    }
    let pci = under(root, "/sys/bus/pci/devices");
    let unbound: Vec<String> = entries(&pci)
        .into_iter()
        .filter(|b| {
            let d = pci.join(b);
            read(&d.join("vendor")).as_deref() == Some("0x15b3")
                && read(&d.join("class")).is_some_and(|c| c.starts_with("0x02"))
                && std::fs::read_link(d.join("driver")).is_err()
        })
        .collect();
    (!unbound.is_empty()).then(|| format!("{} is a Mellanox/NVIDIA network device without a driver (mlx5_core is not loaded)", unbound.join(", ")))
}

/// The RDMA lines: a summary ("RDMA devices"), then per device and per port. `hca` is
/// `RSHMEM_IB_HCA`'s value. Returns the lines and the usable ports ([`usable_ports`]).
pub(crate) fn rdma_checks(root: &Path, devices: &[RdmaDevice], hca: Option<&str>) -> (Vec<Check>, Vec<(String, u32)>) {
    const NAME: &str = "RDMA devices";
    let var = crate::config::env::IB_HCA;
    let filter = match hca_filter(hca) {
        Ok(f) => f,
        Err(why) => return (vec![Check::new(NAME, Status::Fail, why).with_fix(format!("correct {var} or unset it"))], Vec::new()),
    };
    if devices.is_empty() {
        let hint = missing_device_hint(root).unwrap_or_else(|| "the kernel drives no InfiniBand or RoCE NIC on this host".into());
        let detail = format!("no RDMA device (/sys/class/infiniband is empty or missing): {hint}");
        let c = Check::new(NAME, Status::Fail, detail).with_fix(
            "on a host with a ConnectX (mlx5) NIC, install rdma-core and load its drivers (modprobe mlx5_core mlx5_ib), then check with `ibv_devices` or `rdma link`; in a container, pass the NIC in (/dev/infiniband and its sysfs). Without a NIC, jobs spanning nodes use the proxy over TCP, or with RSHMEM_REMOTE_TRANSPORT=ibgda the emulated NIC",
        );
        return (vec![c], Vec::new());
    }
    let mut lines = Vec::new();
    for d in devices {
        let dname = format!("RDMA device {}", d.name);
        if !filter.allows_device(&d.name) {
            lines.push(Check::new(dname, Status::Skip, format!("not used: {var}={}", hca.unwrap_or("").trim())));
            continue;
        }
        let pci = match &d.pci {
            Some(l) => format!(", PCI {}{}", l.bdf(), l.numa.map(|n| format!(", NUMA node {n}")).unwrap_or_default()),
            None => String::new(),
        };
        let fw = d.fw_ver.as_ref().map(|f| format!(", firmware {f}")).unwrap_or_default();
        let nports = format!(", {} port{}", d.ports.len(), if d.ports.len() == 1 { "" } else { "s" });
        if !d.is_mlx5() {
            let what = match &d.driver {
                Some(drv) => format!("driver {drv}{pci}{fw}{nports}: not an mlx5 (ConnectX) NIC"),
                None => format!("no PCI device behind it (a software device such as rxe or siw){nports}"),
            };
            lines.push(
                Check::new(dname, Status::Fail, format!("{what}; IBGDA drives only ConnectX-4 or later NICs through mlx5_core"))
                    .with_fix(format!("use a ConnectX NIC, or leave this device out with {var}")),
            );
            continue;
        }
        lines.push(Check::new(dname, Status::Pass, format!("driver mlx5_core{pci}{fw}{nports}")));
        for p in &d.ports {
            if filter.allows(&d.name, p.num) {
                lines.push(port_check(d, p));
            } else {
                lines.push(Check::new(format!("RDMA port {}:{}", d.name, p.num), Status::Skip, format!("not used: {var}")));
            }
        }
    }
    let usable = usable_ports(devices, &filter);
    let names: Vec<String> = devices.iter().map(|d| d.name.clone()).collect();
    let missing: Vec<&str> = if filter.exclude {
        Vec::new()
    } else {
        filter.entries.iter().map(|(d, _)| d.as_str()).filter(|d| !names.iter().any(|n| n == d)).collect()
    };
    let mut detail = format!("{} found ({})", names.len(), names.join(", "));
    if !missing.is_empty() {
        detail.push_str(&format!("; {var} names {}, not present here", missing.join(", ")));
    }
    let summary = if usable.is_empty() {
        Check::new(NAME, Status::Fail, format!("{detail}; no port is usable for IBGDA (see the lines below)")).with_fix(format!(
            "fix a port below, or name a usable device in {var}; until then jobs spanning nodes use the proxy over TCP (with RSHMEM_REMOTE_TRANSPORT=ibgda: the emulated NIC)"
        ))
    } else {
        let list: Vec<String> = usable.iter().map(|(d, p)| format!("{d}:{p}")).collect();
        Check::new(NAME, Status::Pass, format!("{detail}; usable for IBGDA: {}", list.join(", ")))
    };
    lines.insert(0, summary);
    (lines, usable)
}
