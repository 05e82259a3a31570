//! The NIC and network checks behind `rshmrun --diagnose` and behind the choice of the remote
//! transport (`crate::transport::choose_remote`): a real NIC is used only when every check here passes.
//!
//! Layering: this module probes the host (sysfs, the CUDA driver, network interfaces) and imports no
//! transport. The two things it needs from the transport layer are handed in: the verbs library's
//! checks (`crate::transport::verbs`, feature `verbs`) and the line naming the transport a job would
//! use (`crate::transport::choose_remote`). `crate::transport::select` wires them in (`report`,
//! `nic_usable`), and the verbs module uses this module's sysfs model.
//!
//! The checks, in the order `rshmrun --diagnose` prints them (one [`Check`] per line):
//! 1. **RDMA devices** (sysfs `/sys/class/infiniband`): a summary line, then per device its driver
//!    (IBGDA drives mlx5 ConnectX NICs, `mlx5_core`), PCI address and NUMA node, and per port the link
//!    layer (InfiniBand or Ethernet = RoCE), state, physical state and the GID IBGDA would use (RoCE:
//!    a RoCE v2 GID, IPv4-mapped first; InfiniBand: GID 0 and a LID). `RSHMEM_IB_HCA` narrows the
//!    devices considered ([`HcaList`]).
//! 2. **GPUDirect RDMA**: dma-buf (Linux ≥ 5.12 and the CUDA driver's
//!    `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` on every GPU), else the peer-memory module
//!    (`nvidia_peermem` or `nv_peer_mem`).
//! 3. **DevX, dma-buf registration, a UAR mapped into the GPU**: `crate::transport::verbs::diagnose`
//!    (the `verbs` feature); a build without the feature says so in one FAIL line.
//! 4. **GPU–NIC affinity**: per GPU, every NIC's PCIe distance (NCCL's and NVSHMEM's PIX/PXB/PHB/SYS,
//!    [`PciDistance`]) from the sysfs paths and NUMA nodes, the nearest NIC and the `RSHMEM_IB_HCA` to
//!    set for the PE on that GPU.
//! 5. **Bootstrap and proxy interfaces**: the address the bootstrap and the proxy would use (the
//!    logic of `bootstrap::local_ipv4` and of the proxy's listen address, with
//!    `RSHMEM_BOOTSTRAP_IFNAME`, `RSHMEM_PROXY_IFNAME` and `RSHMEM_BOOTSTRAP`).
//! 6. **Remote transport**: what a job with PEs on other nodes would use (`choose_remote` with
//!    `RSHMEM_REMOTE_TRANSPORT` and [`nic_usable`]).
//!
//! Statuses: PASS and FAIL for what IBGDA on a real NIC needs; INFO for facts (interfaces, the
//! transport chosen, a NIC that works but is far from a GPU); SKIP for what cannot or need not be
//! checked here. **A missing GPU is a SKIP, not a FAIL**: GPUDirect RDMA and the GPU–NIC affinity
//! concern GPU memory, and without a GPU rshmem runs on the CPU backend, whose heap is host memory
//! that a NIC reaches without GPUDirect; a machine without a GPU is normal (CI). A SKIP never makes
//! the NIC unusable. A GPU the kernel driver lists but CUDA cannot use is a FAIL.
//!
//! The NIC is usable ([`nic_usable`]) when: at least one mlx5 port passes (and `RSHMEM_IB_HCA`
//! allows it), the build has the `verbs` feature, GPUDirect RDMA does not FAIL, and no verbs check
//! FAILs. A FAIL of one port while another passes leaves the NIC usable (that port is not used).
//!
//! Every probe is bounded: sysfs scans, the CUDA driver, name resolution and the verbs checks run on
//! a helper thread with a time limit, and a probe that does not answer becomes a FAIL line that says
//! so. The sysfs and procfs readers take a root directory ("/" on a host), so tests build synthetic
//! trees.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The outcome of one check.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Status {
    Pass,
    Fail,
    /// Facts that are neither good nor bad (which interface the bootstrap uses, the transport chosen).
    Info,
    /// Not checked, and why is in the detail (e.g. no device to check it on).
    Skip,
}

/// One line of `rshmrun --diagnose`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Check {
    /// What was checked ("RDMA devices", "GPUDirect RDMA", ...).
    pub name: String,
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about a failure.
    pub fix: Option<String>,
}

impl Status {
    /// The tag `rshmrun --diagnose` prints: PASS, FAIL, INFO or SKIP.
    pub fn tag(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Info => "INFO",
            Status::Skip => "SKIP",
        }
    }
}

impl Check {
    pub fn new(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
        Check { name: name.into(), status, detail: detail.into(), fix: None }
    }
    /// The same check with what to do about it.
    pub fn with_fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
    /// The check as one line: `[FAIL] name: detail. Fix: fix`.
    pub fn line(&self) -> String {
        let mut s = format!("[{}] {}: {}", self.status.tag(), self.name, self.detail);
        if let Some(fix) = &self.fix {
            if !s.ends_with('.') {
                s.push('.');
            }
            s.push_str(" Fix: ");
            s.push_str(fix);
        }
        s.replace('\n', " ")
    }
}

// ------------------------------------------------------------------ limits

/// How long a sysfs/procfs scan may take (a hung driver can block a sysfs read).
const SYSFS_LIMIT: Duration = Duration::from_secs(10);
/// How long the CUDA driver may take to initialize and answer (cuInit on many GPUs takes seconds).
const CUDA_LIMIT: Duration = Duration::from_secs(30);
/// How long a host name (RSHMEM_BOOTSTRAP) may take to resolve.
const DNS_LIMIT: Duration = Duration::from_secs(5);
/// How long the verbs checks (opening the NIC, DevX, registrations) may take.
const VERBS_LIMIT: Duration = Duration::from_secs(30);

/// Runs `f` on a helper thread and waits at most `limit` for its answer. None: no answer in time (the
/// thread is left behind, blocked where it is), or it could not start, or it panicked.
fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("rshmem-diagnose".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(limit).ok()
}

fn secs(d: Duration) -> u64 {
    d.as_secs()
}

// ------------------------------------------------------------------ small sysfs helpers

/// A sysfs/procfs attribute, trimmed; None when absent or unreadable.
fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// `root` joined with an absolute-looking path ("/sys/class/infiniband" → root/sys/class/infiniband).
fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Names of the entries of a directory, in natural order (mlx5_2 before mlx5_10).
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort_by_key(|s| natural_key(s));
    v
}

fn natural_key(s: &str) -> (String, u64, String) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = s.split_at(s.len() - digits);
    (head.to_string(), tail.parse().unwrap_or(0), s.to_string())
}

/// Whether `s` looks like a PCI address, `DDDD:BB:DD.F` (hex, domain of 4 or more digits).
fn is_bdf(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    let hex = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_hexdigit());
    if parts.len() != 3 || parts[0].len() < 4 || !hex(parts[0]) || parts[1].len() != 2 || !hex(parts[1]) {
        return false;
    }
    match parts[2].split_once('.') {
        Some((dev, func)) => dev.len() == 2 && hex(dev) && func.len() == 1 && func.chars().all(|c| ('0'..='7').contains(&c)),
        None => false,
    }
}

/// A sysfs NUMA node: None for "-1" (unknown, as on one-socket hosts and most VMs).
fn numa_of(dev_dir: &Path) -> Option<u32> {
    read(&dev_dir.join("numa_node")).and_then(|s| s.parse::<i64>().ok()).and_then(|n| u32::try_from(n).ok())
}

// ------------------------------------------------------------------ RSHMEM_IB_HCA

/// `RSHMEM_IB_HCA`: which RDMA devices (and ports) IBGDA may use. Comma-separated `name[:port]`
/// entries (`mlx5_0:1,mlx5_3`); a leading `^` makes it an exclusion list (`^mlx5_2`). Names match
/// exactly. Unset: every device.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct HcaList {
    /// `^`: the entries are excluded, everything else is allowed.
    pub exclude: bool,
    /// (device, port: None = every port).
    pub entries: Vec<(String, Option<u32>)>,
}

impl HcaList {
    /// Whether port `port` of device `dev` may be used.
    pub fn allows(&self, dev: &str, port: u32) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        let listed = self.entries.iter().any(|(d, p)| d == dev && p.is_none_or(|p| p == port));
        listed != self.exclude
    }
    /// Whether the list keeps any port of device `dev` (an exclusion of some ports keeps the others).
    pub fn allows_device(&self, dev: &str) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        if self.exclude {
            !self.entries.iter().any(|(d, p)| d == dev && p.is_none())
        } else {
            self.entries.iter().any(|(d, _)| d == dev)
        }
    }
}

/// Parses a `RSHMEM_IB_HCA` value (see [`HcaList`]); `Err` says what is expected.
pub fn parse_hca_list(v: &str) -> std::result::Result<HcaList, String> {
    const EXPECTED: &str = "expected RDMA device names with an optional :port, comma-separated (mlx5_0:1,mlx5_1), or ^ and such a list to exclude them (^mlx5_2)";
    let v = v.trim();
    let (exclude, list) = match v.strip_prefix('^') {
        Some(rest) => (true, rest.trim()),
        None => (false, v),
    };
    let mut entries = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        let (name, port) = match item.split_once(':') {
            Some((n, p)) => match p.trim().parse::<u32>() {
                Ok(p) if p >= 1 => (n.trim(), Some(p)),
                _ => return Err(format!("{EXPECTED}; {item:?} has a bad port")),
            },
            None => (item, None),
        };
        if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
            return Err(format!("{EXPECTED}; {item:?} is not a device name"));
        }
        entries.push((name.to_string(), port));
    }
    Ok(HcaList { exclude, entries })
}

/// The `RSHMEM_IB_HCA` check for `crate::env::VARS`.
pub fn check_hca_list(v: &str) -> std::result::Result<(), String> {
    parse_hca_list(v).map(|_| ())
}

/// This process's `RSHMEM_IB_HCA` as text, if set.
fn hca_env() -> Option<String> {
    crate::env::get(crate::env::IB_HCA)
}

// ------------------------------------------------------------------ RDMA devices (sysfs)

/// One GID of a port (only non-zero entries are kept).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Gid {
    pub index: u32,
    /// As sysfs writes it: eight groups of four hex digits.
    pub gid: String,
    /// `gid_attrs/types/<i>`: "RoCE v2" or "IB/RoCE v1".
    pub kind: Option<String>,
    /// `gid_attrs/ndevs/<i>`: the netdev the GID belongs to (RoCE).
    pub ndev: Option<String>,
}

impl Gid {
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
    pub gids: Vec<Gid>,
}

impl RdmaPort {
    pub fn is_ethernet(&self) -> bool {
        self.link_layer.eq_ignore_ascii_case("Ethernet")
    }
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

/// Where a PCI device sits: the PCI root (what precedes the first PCI address in its sysfs path,
/// `pci0000:15`), the chain of PCI addresses from the root port down to the device, and its NUMA node.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PciLoc {
    pub root: String,
    pub chain: Vec<String>,
    pub numa: Option<u32>,
}

impl PciLoc {
    /// The device's own PCI address.
    pub fn bdf(&self) -> &str {
        self.chain.last().map(String::as_str).unwrap_or("?")
    }
}

/// The location of the PCI device whose sysfs directory (or a link to it) is `dev`, under `root`.
fn pci_loc(root: &Path, dev: &Path) -> Option<PciLoc> {
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

/// One RDMA device of /sys/class/infiniband.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RdmaDevice {
    pub name: String,
    /// The PCI driver of the device behind it ("mlx5_core"); None for software devices (rxe, siw).
    pub driver: Option<String>,
    pub pci: Option<PciLoc>,
    pub fw_ver: Option<String>,
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

fn rdma_device(root: &Path, dir: &Path, name: String) -> RdmaDevice {
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

fn rdma_port(dir: &Path, num: u32) -> RdmaPort {
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

/// The check of one port of an mlx5 device: PASS when IBGDA could use it.
fn port_check(dev: &RdmaDevice, p: &RdmaPort) -> Check {
    let name = format!("RDMA port {}:{}", dev.name, p.num);
    let layer = if p.is_ethernet() {
        "Ethernet (RoCE)".to_string()
    } else {
        p.link_layer.clone()
    };
    let netdev = p.gids.iter().find_map(|g| g.ndev.clone()).map(|n| format!(", netdev {n}")).unwrap_or_default();
    let rate = p.rate.as_ref().map(|r| format!(", {r}")).unwrap_or_default();
    let facts = format!("{layer}, state {}, physical state {}{rate}{netdev}", p.state, p.phys_state);
    if !p.state.eq_ignore_ascii_case("ACTIVE") {
        let fix = if p.is_infiniband() && p.phys_state.eq_ignore_ascii_case("LinkUp") {
            "the link is up but no subnet manager has configured the port: run a subnet manager on the fabric (opensm on one node, or the switch's), then check with `ibstat`".to_string()
        } else if p.is_ethernet() {
            let nd = p.gids.iter().find_map(|g| g.ndev.clone()).unwrap_or_else(|| "<netdev>".into());
            format!("bring the link up: check the cable and the switch port, and `ip link set {nd} up` (`rdma link` shows the port's netdev)")
        } else {
            "no link: check the cable and the switch port (`ibstat` shows the physical state); or leave this port out with RSHMEM_IB_HCA".to_string()
        };
        return Check::new(name, Status::Fail, format!("{facts}: not ACTIVE, so IBGDA cannot use it")).with_fix(fix);
    }
    if p.is_infiniband() {
        let lid = p.lid.unwrap_or(0);
        if lid == 0 {
            return Check::new(name, Status::Fail, format!("{facts}, but no LID is assigned"))
                .with_fix("a subnet manager assigns LIDs: run one on the fabric (opensm), then check with `ibstat`");
        }
        let gid = p.chosen_gid().map(|g| format!(", GID {} {}", g.index, g.pretty())).unwrap_or_default();
        return Check::new(name, Status::Pass, format!("{facts}, LID {lid:#x}{gid}"));
    }
    if p.is_ethernet() {
        return match p.chosen_gid() {
            Some(g) => Check::new(name, Status::Pass, format!("{facts}; GID index {} {} (RoCE v2)", g.index, g.pretty())),
            None => {
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
        };
    }
    Check::new(name, Status::Fail, format!("{facts}: link layer {:?}; IBGDA needs InfiniBand or Ethernet (RoCE)", p.link_layer))
}

/// The ports IBGDA could use, as (device, port): mlx5 devices, allowed by `hca`, ports that pass.
pub fn usable_ports(devices: &[RdmaDevice], hca: &HcaList) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for d in devices.iter().filter(|d| d.is_mlx5()) {
        for p in &d.ports {
            if hca.allows(&d.name, p.num) && port_check(d, p).status == Status::Pass {
                out.push((d.name.clone(), p.num));
            }
        }
    }
    out
}

/// When no RDMA device exists: what the PCI bus says about ConnectX NICs (a bound mlx5_core without
/// mlx5_ib, a Mellanox/NVIDIA network device without a driver).
fn missing_device_hint(root: &Path) -> Option<String> {
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
fn rdma_checks(root: &Path, devices: &[RdmaDevice], hca: Option<&str>) -> (Vec<Check>, Vec<(String, u32)>) {
    const NAME: &str = "RDMA devices";
    let var = crate::env::IB_HCA;
    let filter = match hca.map(parse_hca_list) {
        None => HcaList::default(),
        Some(Ok(f)) => f,
        Some(Err(why)) => {
            let c = Check::new(NAME, Status::Fail, format!("{var}={:?} is not valid: {why}", hca.unwrap_or("")))
                .with_fix(format!("correct {var} or unset it"));
            return (vec![c], Vec::new());
        }
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

// ------------------------------------------------------------------ GPUs

/// One GPU, as CUDA (ordinal, name, dma-buf support) or the kernel driver (/proc/driver/nvidia/gpus)
/// sees it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Gpu {
    /// The CUDA ordinal (None: seen by the kernel driver only).
    pub ordinal: Option<usize>,
    /// PCI address, lowercase (0000:17:00.0).
    pub bus_id: String,
    pub name: Option<String>,
    /// CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (None: unknown).
    pub dma_buf: Option<bool>,
}

impl Gpu {
    fn label(&self) -> String {
        match self.ordinal {
            Some(o) => format!("GPU {o} ({})", self.bus_id),
            None => format!("GPU {}", self.bus_id),
        }
    }
}

/// What the GPU probe found.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum GpuProbe {
    /// GPUs; `cuda_error` says why CUDA could not be asked when the list comes from the kernel driver.
    Found { gpus: Vec<Gpu>, cuda_version: Option<i32>, cuda_error: Option<String> },
    /// No GPU on this host, and how we know.
    Missing(String),
    /// The probe did not answer (the CUDA driver hung).
    Failed(String),
}

/// The GPUs the kernel driver lists (/proc/driver/nvidia/gpus/<bus id>).
fn proc_gpus(root: &Path) -> Vec<Gpu> {
    entries(&under(root, "/proc/driver/nvidia/gpus"))
        .into_iter()
        .filter(|b| is_bdf(&b.to_ascii_lowercase()))
        .map(|b| {
            let info = read(&under(root, "/proc/driver/nvidia/gpus").join(&b).join("information")).unwrap_or_default();
            let name = info.lines().find_map(|l| l.strip_prefix("Model:")).map(|m| m.trim().to_string());
            Gpu { ordinal: None, bus_id: b.to_ascii_lowercase(), name, dma_buf: None }
        })
        .collect()
}

/// The GPUs CUDA sees, with their PCI addresses and dma-buf support, and the driver's CUDA version.
/// Creates no context (cuInit and device attributes only).
fn cuda_gpus() -> std::result::Result<(Vec<Gpu>, Option<i32>), String> {
    use cudarc::driver::sys as cu;
    let n = crate::cuda::driver::device_count()?;
    let mut version = 0;
    // SAFETY: out-pointer to a local; device_count loaded the driver and ran cuInit.
    let cuda_version = (unsafe { cu::cuDriverGetVersion(&mut version) } == cu::CUresult::CUDA_SUCCESS).then_some(version);
    let mut gpus = Vec::new();
    for ordinal in 0..n {
        let mut dev: cu::CUdevice = 0;
        // SAFETY: out-pointer to a local; ordinal is below the device count.
        let r = unsafe { cu::cuDeviceGet(&mut dev, ordinal as i32) };
        crate::cuda::driver::check(r, "cuDeviceGet").map_err(|e| e.to_string())?;
        let attr = |a: cu::CUdevice_attribute| {
            let mut v = 0;
            // SAFETY: out-pointer to a local; dev is a valid device handle (cuDeviceGet above).
            (unsafe { cu::cuDeviceGetAttribute(&mut v, a, dev) } == cu::CUresult::CUDA_SUCCESS).then_some(v)
        };
        use cu::CUdevice_attribute as A;
        let (domain, bus, device) = (
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID).unwrap_or(0),
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID).unwrap_or(0),
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID).unwrap_or(0),
        );
        // An unknown attribute (a driver older than CUDA 11.7) reads as "no dma-buf".
        let dma_buf = Some(attr(A::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).unwrap_or(0) != 0);
        let mut buf = [0 as std::ffi::c_char; 256];
        // SAFETY: the buffer is 256 bytes and the length passed is 255, so the name stays NUL-terminated.
        let named = unsafe { cu::cuDeviceGetName(buf.as_mut_ptr(), 255, dev) } == cu::CUresult::CUDA_SUCCESS;
        let name = named.then(|| {
            // SAFETY: the driver wrote a NUL-terminated string into buf (zeroed, one byte kept spare).
            unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
        });
        gpus.push(Gpu { ordinal: Some(ordinal), bus_id: format!("{domain:04x}:{bus:02x}:{device:02x}.0"), name, dma_buf });
    }
    Ok((gpus, cuda_version))
}

/// The GPUs of this host (root "/": CUDA, bounded; else the kernel driver's list under `root`).
pub fn probe_gpus(root: &Path) -> GpuProbe {
    let listed = proc_gpus(root);
    if root != Path::new("/") {
        // A synthetic tree: only its kernel-driver list.
        return if listed.is_empty() {
            GpuProbe::Missing("no GPU in /proc/driver/nvidia/gpus".into())
        } else {
            GpuProbe::Found { gpus: listed, cuda_version: None, cuda_error: Some("not asked (synthetic tree)".into()) }
        };
    }
    match bounded(CUDA_LIMIT, cuda_gpus) {
        Some(Ok((gpus, cuda_version))) => GpuProbe::Found { gpus, cuda_version, cuda_error: None },
        Some(Err(why)) if listed.is_empty() => GpuProbe::Missing(why),
        Some(Err(why)) => GpuProbe::Found { gpus: listed, cuda_version: None, cuda_error: Some(why) },
        None => GpuProbe::Failed(format!("the CUDA driver did not answer within {} s (cuInit or a device query hangs)", secs(CUDA_LIMIT))),
    }
}

// ------------------------------------------------------------------ GPUDirect RDMA

/// (major, minor) of the running kernel (procfs `sys/kernel/osrelease` under `root`).
fn kernel_version(root: &Path) -> Option<(u32, u32, String)> {
    let rel = read(&under(root, "/proc/sys/kernel/osrelease"))?;
    let mut it = rel.split(['.', '-']).map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??, rel))
}

/// The loaded peer-memory module (nvidia_peermem, or the older nv_peer_mem), if any.
fn peermem(root: &Path) -> Option<&'static str> {
    let modules = read(&under(root, "/proc/modules")).unwrap_or_default();
    ["nvidia_peermem", "nv_peer_mem"].into_iter().find(|m| {
        modules.lines().any(|l| l.split_whitespace().next() == Some(m)) || under(root, "/sys/module").join(m).is_dir()
    })
}

/// Whether GPU memory can be registered with the NIC: dma-buf (Linux ≥ 5.12 and the CUDA driver's
/// support on every GPU) or the peer-memory module. No GPU: SKIP (the CPU backend needs neither).
pub fn gpudirect_check(root: &Path, gpus: &GpuProbe) -> Check {
    const NAME: &str = "GPUDirect RDMA";
    let kernel = kernel_version(root);
    let kernel_ok = kernel.as_ref().is_some_and(|(a, b, _)| (*a, *b) >= (5, 12));
    let ktext = match &kernel {
        Some((_, _, rel)) if kernel_ok => format!("Linux {rel} has dma-buf (5.12 or later)"),
        Some((_, _, rel)) => format!("Linux {rel} is older than 5.12 (no dma-buf for GPU memory)"),
        None => "the kernel version is unknown".to_string(),
    };
    let pm = peermem(root);
    let pmtext = match pm {
        Some(m) => format!("peer-memory module {m} loaded"),
        None => "peer-memory module (nvidia_peermem, nv_peer_mem) not loaded".to_string(),
    };
    let fix = "use dma-buf: Linux 5.12 or later with NVIDIA's open GPU kernel modules (R515 or later; CUDA 11.7 or later), or load the peer-memory module: modprobe nvidia_peermem (ships with the driver)";
    match gpus {
        GpuProbe::Missing(why) => Check::new(
            NAME,
            Status::Skip,
            format!("no GPU ({why}), so nothing to check: GPUDirect RDMA is for a heap in GPU memory, and the CPU backend's heap is host memory. For information: {ktext}; {pmtext}"),
        ),
        GpuProbe::Failed(why) => Check::new(NAME, Status::Fail, format!("{why}; {ktext}; {pmtext}"))
            .with_fix("check the GPU driver (nvidia-smi); a persistence daemon (nvidia-persistenced) makes cuInit fast"),
        GpuProbe::Found { gpus, cuda_version, cuda_error } => {
            let cuda = cuda_version.map(|v| format!("CUDA driver {}.{}", v / 1000, (v % 1000) / 10)).unwrap_or_else(|| "the CUDA driver".into());
            let dma = match cuda_error {
                Some(why) => format!("dma-buf support of the GPUs unknown: the CUDA driver cannot be used ({why})"),
                None => {
                    let without: Vec<String> = gpus.iter().filter(|g| g.dma_buf != Some(true)).map(Gpu::label).collect();
                    if without.is_empty() {
                        format!("{cuda} reports dma-buf support on {}", if gpus.len() == 1 { "the GPU".to_string() } else { format!("all {} GPUs", gpus.len()) })
                    } else {
                        format!("{cuda} reports no dma-buf support on {} (it needs NVIDIA's open GPU kernel modules)", without.join(", "))
                    }
                }
            };
            let dma_ok = kernel_ok && cuda_error.is_none() && gpus.iter().all(|g| g.dma_buf == Some(true));
            let how = match (dma_ok, pm) {
                (true, _) => "dma-buf",
                (false, Some(_)) => "the peer-memory module",
                (false, None) => "",
            };
            if how.is_empty() {
                let mut c = Check::new(NAME, Status::Fail, format!("neither dma-buf nor a peer-memory module: {ktext}; {dma}; {pmtext}")).with_fix(fix);
                if cuda_error.is_some() {
                    c.fix = Some(format!("install the CUDA driver library (libcuda.so) that matches the kernel driver; {fix}"));
                }
                c
            } else {
                Check::new(NAME, Status::Pass, format!("through {how}: {ktext}; {dma}; {pmtext}"))
            }
        }
    }
}

// ------------------------------------------------------------------ PCIe affinity

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
    pub fn name(self) -> &'static str {
        match self {
            PciDistance::Pix => "PIX",
            PciDistance::Pxb => "PXB",
            PciDistance::Phb => "PHB",
            PciDistance::Sys => "SYS",
        }
    }
    fn meaning(self) -> &'static str {
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
fn affinity_checks(root: &Path, gpus: &GpuProbe, devices: &[RdmaDevice], usable: &[(String, u32)]) -> Vec<Check> {
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

// ------------------------------------------------------------------ network interfaces

/// The interface that holds IPv4 address `ip` (getifaddrs).
fn iface_of(ip: Ipv4Addr) -> Option<String> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() && found.is_none() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, valid until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        // SAFETY: a non-null ifa_addr points to a sockaddr whose family field is always readable.
        if ifa.ifa_name.is_null() || ifa.ifa_addr.is_null() || i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: the family is AF_INET, so the sockaddr is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        if Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)) == ip {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            found = Some(unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned());
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found
}

fn with_iface(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => match iface_of(v4) {
            Some(i) => format!("{ip} ({i})"),
            None => ip.to_string(),
        },
        IpAddr::V6(_) => ip.to_string(),
    }
}

/// The network settings the bootstrap and the proxy read.
#[derive(Clone, Debug, Default)]
pub struct NetEnv {
    /// RSHMEM_BOOTSTRAP.
    pub bootstrap: Option<String>,
    /// RSHMEM_BOOTSTRAP_IFNAME.
    pub bootstrap_ifname: Option<String>,
    /// RSHMEM_PROXY_IFNAME.
    pub proxy_ifname: Option<String>,
}

impl NetEnv {
    /// The environment's settings (the variables, trimmed; empty ones as unset).
    pub fn current() -> NetEnv {
        let get = |n: &str| crate::env::get(n).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        NetEnv {
            bootstrap: get(crate::env::BOOTSTRAP),
            bootstrap_ifname: get(crate::env::BOOTSTRAP_IFNAME),
            proxy_ifname: get(crate::env::PROXY_IFNAME),
        }
    }
}

/// RSHMEM_BOOTSTRAP resolved (bounded): its first IPv4 address, or why not.
fn resolve_bootstrap(addr: &str) -> std::result::Result<SocketAddr, String> {
    let a = addr.to_string();
    match bounded(DNS_LIMIT, move || crate::bootstrap::resolve_addr(&a)) {
        None => Err(format!("did not resolve within {} s (name service?)", secs(DNS_LIMIT))),
        Some(Err(e)) => Err(format!("cannot resolve: {e}")),
        Some(Ok(v)) => v.into_iter().find(|a| a.is_ipv4()).ok_or_else(|| "resolves to no IPv4 address".to_string()),
    }
}

/// The source address this host uses to reach `a` (a UDP connect sends nothing).
fn route_source(a: SocketAddr) -> std::io::Result<IpAddr> {
    let s = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    s.connect(a)?;
    Ok(s.local_addr()?.ip())
}

/// What the bootstrap would use: RSHMEM_BOOTSTRAP's address, or the unique-id API's interface.
fn bootstrap_check(e: &NetEnv) -> Check {
    const NAME: &str = "bootstrap interface";
    let var = crate::env::BOOTSTRAP;
    let ifvar = crate::env::BOOTSTRAP_IFNAME;
    if let Some(b) = &e.bootstrap {
        return match resolve_bootstrap(b) {
            Err(why) => Check::new(NAME, Status::Fail, format!("{var}={b}: {why}"))
                .with_fix(format!("set {var} to PE 0's host and a free port, e.g. node001:29500")),
            Ok(a) if a.ip().is_loopback() => Check::new(NAME, Status::Info, format!("{var}={b} ({a}): loopback, so a job on this host only")),
            Ok(a) => match (&a.ip(), route_source(a)) {
                (IpAddr::V4(v4), _) if iface_of(*v4).is_some() => Check::new(
                    NAME,
                    Status::Info,
                    format!("{var}={b}: {}, an address of this host, where PE 0 listens; the other PEs connect to it", with_iface(a.ip())),
                ),
                (_, Ok(src)) => Check::new(
                    NAME,
                    Status::Info,
                    format!("{var}={b} ({a}): PE 0 listens there (it must run on that host); this host reaches it from {}", with_iface(src)),
                ),
                (_, Err(err)) => Check::new(NAME, Status::Fail, format!("{var}={b} ({a}): no route from this host: {err}"))
                    .with_fix(format!("check the network, or set {var} to an address this host can reach")),
            },
        };
    }
    let ifname = e.bootstrap_ifname.as_deref();
    match crate::bootstrap::local_ipv4(ifname, ifvar) {
        Err(err) => Check::new(NAME, Status::Fail, err.to_string()).with_fix(format!("set {ifvar} to one of this host's interfaces, or unset it")),
        Ok(ip) => {
            let why = match ifname {
                Some(i) => format!("{ifvar}={i}"),
                None => format!("the default route's interface, else the first non-loopback one; {ifvar} overrides"),
            };
            let mut detail = format!(
                "{var} unset: rshmrun gives its jobs 127.0.0.1:PORT (with --netns 10.99.0.1:PORT); under mpirun or srun set it to PE 0's host:port. The unique-id API listens on {}: {why}",
                with_iface(IpAddr::V4(ip))
            );
            if ip.is_loopback() {
                detail.push_str("; that is loopback, which PEs on other hosts cannot reach");
            }
            Check::new(NAME, Status::Info, detail)
        }
    }
}

/// Why the proxy listens where it does ([`proxy_listen_ip`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ListenWhy {
    /// RSHMEM_PROXY_IFNAME names the interface.
    Ifname(String),
    /// RSHMEM_BOOTSTRAP (this value) is a loopback address: a job on this host.
    LoopbackRendezvous(String),
    /// The address this host uses to reach RSHMEM_BOOTSTRAP (this value).
    RouteTo(String),
    /// The bootstrap's interface (RSHMEM_BOOTSTRAP_IFNAME, else the default route's).
    BootstrapInterface,
}

/// The IPv4 address the proxy listens on, and why: RSHMEM_PROXY_IFNAME's; else the address this host
/// uses to reach RSHMEM_BOOTSTRAP's host (127.0.0.1 for a loopback rendezvous; with `--netns` every
/// node has its own); else the bootstrap's interface. The one definition, used by the proxy
/// transport and by `rshmrun --diagnose`; name resolution is bounded.
pub fn proxy_listen_ip(e: &NetEnv) -> crate::error::Result<(IpAddr, ListenWhy)> {
    if let Some(i) = &e.proxy_ifname {
        return crate::bootstrap::local_ipv4(Some(i), crate::env::PROXY_IFNAME).map(|ip| (IpAddr::V4(ip), ListenWhy::Ifname(i.clone())));
    }
    if let Some(b) = &e.bootstrap {
        if let Ok(a) = resolve_bootstrap(b) {
            if a.ip().is_loopback() {
                return Ok((IpAddr::V4(Ipv4Addr::LOCALHOST), ListenWhy::LoopbackRendezvous(b.clone())));
            }
            if let Ok(src) = route_source(a) {
                return Ok((src, ListenWhy::RouteTo(b.clone())));
            }
        }
    }
    crate::bootstrap::local_ipv4(e.bootstrap_ifname.as_deref(), crate::env::BOOTSTRAP_IFNAME).map(|ip| (IpAddr::V4(ip), ListenWhy::BootstrapInterface))
}

/// Where the proxy would listen ([`proxy_listen_ip`]), as a line.
fn proxy_check(e: &NetEnv) -> Check {
    const NAME: &str = "proxy interface";
    let pvar = crate::env::PROXY_IFNAME;
    let bvar = crate::env::BOOTSTRAP;
    match proxy_listen_ip(e) {
        Ok((ip, ListenWhy::Ifname(i))) => Check::new(NAME, Status::Info, format!("the proxy listens on {}: {pvar}={i}", with_iface(ip))),
        Err(err) if e.proxy_ifname.is_some() => Check::new(NAME, Status::Fail, err.to_string())
            .with_fix(format!("set {pvar} to one of this host's interfaces, or unset it")),
        Ok((_, ListenWhy::LoopbackRendezvous(b))) => Check::new(NAME, Status::Info, format!("the proxy listens on 127.0.0.1: {bvar}={b} is loopback, so a job on this host")),
        Ok((ip, ListenWhy::RouteTo(b))) => Check::new(
            NAME,
            Status::Info,
            format!("the proxy listens on {}: the address this host uses to reach {bvar}={b}; {pvar} overrides", with_iface(ip)),
        ),
        Err(err) => Check::new(NAME, Status::Fail, err.to_string())
            .with_fix(format!("set {} or {pvar} to one of this host's interfaces", crate::env::BOOTSTRAP_IFNAME)),
        Ok((ip, ListenWhy::BootstrapInterface)) if ip.is_loopback() => Check::new(
            NAME,
            Status::Fail,
            format!("the proxy would listen on {ip}, loopback: PEs on other hosts cannot reach it"),
        )
        .with_fix(format!("give this host a non-loopback IPv4 address, or name its interface in {pvar}")),
        Ok((ip, ListenWhy::BootstrapInterface)) => Check::new(
            NAME,
            Status::Info,
            format!(
                "the proxy listens on {}: the bootstrap's interface, as {bvar} is unset (under mpirun or srun: the address that reaches {bvar}'s host); {pvar} overrides",
                with_iface(ip)
            ),
        ),
    }
}

// ------------------------------------------------------------------ the verbs checks' place

/// The line that stands for the verbs checks in a build without the `verbs` feature.
pub fn no_verbs_check() -> Check {
    Check::new(
        "DevX and GPU-mapped UAR",
        Status::Fail,
        "not checked: this build of rshmem lacks the `verbs` feature, so it cannot open a NIC (DevX objects, dma-buf registration, mapping a UAR into the GPU) and IBGDA never uses a real NIC",
    )
    .with_fix("install the RDMA development packages (rdma-core, libibverbs-dev) and rebuild with the feature: cargo build --release --features rshmem/verbs")
}

/// Runs the verbs checks (`crate::transport::verbs`, handed in by the transport layer) bounded like
/// every probe: a NIC that hangs gives a FAIL line.
fn bounded_verbs(verbs: fn() -> Vec<Check>) -> Vec<Check> {
    bounded(VERBS_LIMIT, verbs).unwrap_or_else(|| {
        vec![Check::new(
            "DevX and GPU-mapped UAR",
            Status::Fail,
            format!("the verbs checks did not answer within {} s (opening the NIC hangs?)", secs(VERBS_LIMIT)),
        )
        .with_fix("check the NIC with `ibv_devinfo`; a hung firmware command shows in `dmesg`")]
    })
}

// ------------------------------------------------------------------ the report and the decision

/// The decision from the checks' outcomes: a usable port, GPUDirect RDMA not failing (a SKIP is no
/// obstacle), and no verbs check failing (without the `verbs` feature there is one FAIL).
fn decide(port_usable: bool, gpudirect: &Check, verbs: &[Check]) -> bool {
    port_usable && gpudirect.status != Status::Fail && verbs.iter().all(|c| c.status != Status::Fail)
}

/// The decision without the report: stops at the first obstacle, in the order of their cost (sysfs,
/// then the feature, then the GPU driver, then the verbs library: `verbs`, None without the
/// feature). No GPU is touched when no RDMA port is usable.
fn usable_at(root: &Path, hca: Option<&str>, verbs: Option<fn() -> Vec<Check>>) -> bool {
    let filter = match hca.map(parse_hca_list) {
        None => HcaList::default(),
        Some(Ok(f)) => f,
        Some(Err(_)) => return false,
    };
    let r = root.to_path_buf();
    let Some(devices) = bounded(SYSFS_LIMIT, move || rdma_devices(&r)) else { return false };
    let port_usable = !usable_ports(&devices, &filter).is_empty();
    let Some(verbs) = verbs.filter(|_| port_usable) else {
        return false;
    };
    let gpudirect = gpudirect_check(root, &probe_gpus(root));
    if gpudirect.status == Status::Fail {
        return false;
    }
    decide(port_usable, &gpudirect, &bounded_verbs(verbs))
}

/// Whether a real RDMA NIC is usable for IBGDA by this process, with the verbs library's checks
/// `verbs` (the transport layer's `crate::transport::verbs::quick_checks`; None in a build without the
/// `verbs` feature, where it is never usable): every NIC check passes (see the module's
/// documentation). Cheap when no RDMA device exists (a sysfs listing, no GPU driver call). The
/// transport layer caches it (`crate::transport::select::nic_usable`).
pub fn usable_with(verbs: Option<fn() -> Vec<Check>>) -> bool {
    usable_at(Path::new("/"), hca_env().as_deref(), verbs)
}

/// Every check of `rshmrun --diagnose`, on the host under `root` with the given settings (`hca`:
/// RSHMEM_IB_HCA), the verbs library's checks (`verbs`, None without the feature) and the line that
/// says which transport a job would use given the NIC decision (`transport`). Returns the lines and
/// the NIC decision.
fn report_at(root: &Path, hca: Option<&str>, net: &NetEnv, gpus: GpuProbe, verbs: Option<fn() -> Vec<Check>>, transport: &dyn Fn(bool) -> Check) -> (Vec<Check>, bool) {
    let r = root.to_path_buf();
    let h = hca.map(str::to_string);
    let scanned = bounded(SYSFS_LIMIT, move || {
        let devices = rdma_devices(&r);
        let (lines, usable) = rdma_checks(&r, &devices, h.as_deref());
        (devices, lines, usable)
    });
    let (devices, mut checks, ports) = scanned.unwrap_or_else(|| {
        let c = Check::new("RDMA devices", Status::Fail, format!("reading /sys/class/infiniband did not finish within {} s", secs(SYSFS_LIMIT)))
            .with_fix("a driver blocks sysfs reads: check `dmesg` for the RDMA driver");
        (Vec::new(), vec![c], Vec::new())
    });
    let gpudirect = gpudirect_check(root, &gpus);
    checks.push(gpudirect.clone());
    let verbs = verbs.map_or_else(|| vec![no_verbs_check()], bounded_verbs);
    checks.extend(verbs.iter().cloned());
    checks.extend(affinity_checks(root, &gpus, &devices, &ports));
    checks.push(bootstrap_check(net));
    checks.push(proxy_check(net));
    let usable = decide(!ports.is_empty(), &gpudirect, &verbs);
    checks.push(transport(usable));
    (checks, usable)
}

/// Every check of `rshmrun --diagnose` on this host, with this process's environment, the verbs
/// library's checks and the transport line handed in by the transport layer
/// (`crate::transport::select::report`). Never hangs (every probe is bounded) and never fails: a
/// check that cannot be made is a line that says so.
pub fn report_with(verbs: Option<fn() -> Vec<Check>>, transport: &dyn Fn(bool) -> Check) -> Vec<Check> {
    let hca = hca_env();
    let root = Path::new("/");
    report_at(root, hca.as_deref(), &NetEnv::current(), probe_gpus(root), verbs, transport).0
}

/// The report as `rshmrun --diagnose` prints it: a header, then one line per check.
pub fn render(checks: &[Check]) -> String {
    let mut s = String::from(
        "rshmem diagnose: what GPU-initiated RDMA (IBGDA) needs on a real NIC, then the network a job uses.\n\
         PASS/FAIL: a check IBGDA on a real NIC needs (a FAIL says what to do; the job then falls back, as the last line says); \
         INFO: a fact; SKIP: not checked here, and why.\n",
    );
    for c in checks {
        s.push_str(&c.line());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert!(!usable_at(t.root(), None, Some(Vec::new)));
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
        assert!(!usable_at(t.root(), Some("mlx5_0:"), Some(Vec::new)));
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
        let (with_verbs, usable) = report_at(t.root(), None, &net, gpus.clone(), Some(|| vec![Check::new("DevX", Status::Pass, "ok")]), &transport);
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
}
