//! Device discovery and the opened NIC: listing RDMA devices, choosing one (`RSHMEM_IB_HCA`, else the
//! first with an active port), querying its ports (state, link layer, MTU, LID, GID) and opening it
//! with DevX where the provider is mlx5.

use super::prm::{self, HcaCaps, Mailbox};
use super::sys::{self, errno_text, Zeroed};
use crate::config::parse::HcaList;
use crate::probe::rdma::{Gid, RdmaPort};
use crate::error::{Error, Result};
use rdma_sys::{ibv_context, ibv_device, ibv_device_attr, ibv_gid, ibv_gid_entry, ibv_pd, ibv_port_attr, ibv_port_state};
use std::ffi::c_int;
use std::sync::Arc;

/// `IBV_LINK_LAYER_*` (an anonymous enum in verbs.h, so not in rdma-sys).
const IBV_LINK_LAYER_UNSPECIFIED: u8 = 0;
const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// What to do when no RDMA device is visible.
pub const NO_DEVICE_FIX: &str = "install the NIC driver (NVIDIA MLNX_OFED/DOCA-OFED, or the kernel's mlx5_ib module with rdma-core) \
and check that `ibv_devices` lists the NIC";

/// A port's link layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand (also what an unspecified link layer means).
    InfiniBand,
    /// RoCE.
    Ethernet,
}

impl LinkLayer {
    /// From `ibv_port_attr.link_layer` (unspecified means InfiniBand, as libibverbs documents).
    pub fn from_verbs(v: u8) -> std::result::Result<LinkLayer, String> {
        match v {
            IBV_LINK_LAYER_UNSPECIFIED | IBV_LINK_LAYER_INFINIBAND => Ok(LinkLayer::InfiniBand),
            IBV_LINK_LAYER_ETHERNET => Ok(LinkLayer::Ethernet),
            other => Err(format!("unknown link layer {other}")),
        }
    }
    /// The `ibv_port_attr.link_layer` value ([`RcHandle`](super::RcHandle) carries it).
    pub fn to_verbs(self) -> u8 {
        match self {
            LinkLayer::InfiniBand => IBV_LINK_LAYER_INFINIBAND,
            LinkLayer::Ethernet => IBV_LINK_LAYER_ETHERNET,
        }
    }
    /// As sysfs and `ibv_devinfo` name it.
    pub fn name(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
        }
    }
}

/// A port state's name (`ibv_port_state_str`'s words).
pub fn port_state_name(s: ibv_port_state::Type) -> &'static str {
    match s {
        ibv_port_state::IBV_PORT_NOP => "NOP",
        ibv_port_state::IBV_PORT_DOWN => "DOWN",
        ibv_port_state::IBV_PORT_INIT => "INIT",
        ibv_port_state::IBV_PORT_ARMED => "ARMED",
        ibv_port_state::IBV_PORT_ACTIVE => "ACTIVE",
        ibv_port_state::IBV_PORT_ACTIVE_DEFER => "ACTIVE_DEFER",
        _ => "unknown",
    }
}

/// An `enum ibv_mtu` value in bytes (0 for an invalid value).
pub fn mtu_bytes(mtu: u8) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

/// One port as the verbs library reports it, with the GID rshmem uses on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// The port number (from 1).
    pub num: u8,
    /// The port's state ([`port_state_name`] names it).
    pub state: ibv_port_state::Type,
    /// InfiniBand or Ethernet (RoCE).
    pub link_layer: LinkLayer,
    /// `enum ibv_mtu` (1 = 256 .. 5 = 4096 bytes), the encoding the QP context uses too.
    pub active_mtu: u8,
    /// The port's LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The GID chosen ([`RdmaPort::chosen_gid`]'s rule: RoCE v2, IPv4-mapped first; InfiniBand:
    /// index 0); None when the port has none usable.
    pub gid: Option<(u8, [u8; 16])>,
}

impl PortInfo {
    /// Reads what rshmem uses from `ibv_port_attr` (`gid` is chosen separately).
    pub fn from_attr(num: u8, a: &ibv_port_attr) -> std::result::Result<PortInfo, String> {
        Ok(PortInfo {
            num,
            state: a.state,
            link_layer: LinkLayer::from_verbs(a.link_layer)?,
            active_mtu: a.active_mtu as u8,
            lid: a.lid,
            gid: None,
        })
    }
    /// Whether the port is ACTIVE (`IBV_PORT_ACTIVE`), the only state that passes traffic.
    pub fn is_active(&self) -> bool {
        self.state == ibv_port_state::IBV_PORT_ACTIVE
    }
    /// One line: "port 1: ACTIVE, Ethernet, MTU 4096, GID 3 ::ffff:10.0.0.1".
    pub fn summary(&self) -> String {
        let gid = match self.gid {
            Some((i, g)) => format!(", GID {i} {}", std::net::Ipv6Addr::from(g)),
            None => ", no usable GID".into(),
        };
        let lid = if self.link_layer == LinkLayer::InfiniBand { format!(", LID {:#x}", self.lid) } else { String::new() };
        format!(
            "port {}: {}, {}, MTU {}{lid}{gid}",
            self.num,
            port_state_name(self.state),
            self.link_layer.name(),
            mtu_bytes(self.active_mtu)
        )
    }
}

/// A port as queried, or why it could not be.
pub type PortResult = std::result::Result<PortInfo, String>;

/// A GID table entry as the verbs library reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// The entry's index in the port's GID table.
    pub index: u32,
    /// The GID's 16 bytes, in network order.
    pub gid: [u8; 16],
    /// Whether the GID is of type RoCE v2 (`IBV_GID_TYPE_ROCE_V2`).
    pub roce_v2: bool,
}

/// The GID rshmem uses among `entries`: the rule of `rshmrun --diagnose` ([`RdmaPort::chosen_gid`]),
/// applied to what the verbs library reports. Zero GIDs (empty slots) are ignored.
pub fn choose_gid(link: LinkLayer, entries: &[GidEntry]) -> Option<GidEntry> {
    let gids = entries
        .iter()
        .filter(|e| e.gid != [0; 16])
        .map(|e| Gid {
            index: e.index,
            // sysfs's form: eight groups of four hex digits.
            gid: e.gid.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":"),
            kind: Some(if e.roce_v2 { "RoCE v2" } else { "IB/RoCE v1" }.into()),
            ndev: None,
        })
        .collect();
    let port = RdmaPort {
        num: 0,
        state: String::new(),
        phys_state: String::new(),
        link_layer: link.name().into(),
        lid: None,
        rate: None,
        gids,
    };
    let chosen = port.chosen_gid()?.index;
    entries.iter().find(|e| e.index == chosen).copied()
}

/// The first port `hca` allows that is active, over devices listed as (name, ports); the error says
/// what was found instead, and what to do.
pub fn choose_port(devices: &[(String, Vec<PortResult>)], hca: &HcaList) -> std::result::Result<(usize, u8), String> {
    if devices.is_empty() {
        return Err(format!("no RDMA device: {NO_DEVICE_FIX}"));
    }
    let mut seen = Vec::new();
    for (d, (name, ports)) in devices.iter().enumerate() {
        for port in ports {
            match port {
                Ok(p) if !hca.allows(name, p.num.into()) => seen.push(format!("{name}:{} (not in RSHMEM_IB_HCA)", p.num)),
                Ok(p) if !p.is_active() => seen.push(format!("{name}:{} {}", p.num, port_state_name(p.state))),
                Ok(p) if p.gid.is_none() => seen.push(format!("{name}:{} has no usable GID", p.num)),
                Ok(p) => return Ok((d, p.num)),
                Err(e) => seen.push(format!("{name}: {e}")),
            }
        }
        if ports.is_empty() {
            seen.push(format!("{name}: no port could be queried"));
        }
    }
    Err(format!(
        "no usable RDMA port ({}); bring a port up (`ibstat`/`ibv_devinfo` show their state; an InfiniBand port needs a subnet manager, a RoCE port an IP address) or set RSHMEM_IB_HCA",
        seen.join("; ")
    ))
}

/// The device list of `ibv_get_device_list`, freed on drop.
pub(crate) struct DeviceList {
    list: *mut *mut ibv_device,
    n: usize,
}

impl DeviceList {
    /// The device list; the error says what went wrong and what to do.
    pub(crate) fn get() -> Result<DeviceList> {
        DeviceList::get_or_why().map_err(|why| Error::new(format!("{why}; {NO_DEVICE_FIX}")))
    }

    /// The device list, or what went wrong (without what to do).
    fn get_or_why() -> std::result::Result<DeviceList, String> {
        let v = sys::verbs().map_err(|e| e.to_string())?;
        let mut n: c_int = 0;
        // SAFETY: out-pointer to a local; the list is freed in Drop.
        let list = unsafe { (v.ibv_get_device_list)(&mut n) };
        if list.is_null() {
            let err = std::io::Error::last_os_error();
            let why = if err.raw_os_error() == Some(libc::ENOSYS) {
                "the kernel has no RDMA user-space support (no ib_uverbs device)"
            } else {
                "cannot list RDMA devices"
            };
            return Err(format!("ibv_get_device_list: {}: {why}", sys::io_text(&err)));
        }
        Ok(DeviceList { list, n: n.max(0) as usize })
    }

    pub(crate) fn len(&self) -> usize {
        self.n
    }

    pub(crate) fn device(&self, i: usize) -> *mut ibv_device {
        assert!(i < self.n);
        // SAFETY: i < n, the list's length.
        unsafe { *self.list.add(i) }
    }

    pub(crate) fn name(&self, i: usize) -> String {
        let v = sys::verbs().expect("loaded to make the list");
        // SAFETY: a device of the live list; its name is a NUL-terminated string the list owns.
        unsafe { sys::c_text((v.ibv_get_device_name)(self.device(i))) }
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        if let Ok(v) = sys::verbs() {
            // SAFETY: the list from ibv_get_device_list, freed once.
            unsafe { (v.ibv_free_device_list)(self.list) };
        }
    }
}

/// An open device context, closed on drop.
pub(crate) struct Context {
    pub(crate) ctx: *mut ibv_context,
    pub(crate) name: String,
    /// Ok: opened with DevX (`mlx5dv_open_device`); Err: why not (not mlx5, or DevX refused).
    pub(crate) devx: std::result::Result<(), String>,
}

impl Context {
    /// Opens device `i` of `list`: with DevX when the provider is mlx5, else (or when DevX is refused)
    /// as a plain verbs context, saying why in `devx`.
    pub(crate) fn open(list: &DeviceList, i: usize) -> Result<Context> {
        let v = sys::verbs()?;
        let dev = list.device(i);
        let name = list.name(i);
        let devx = match sys::mlx5() {
            Err(e) => Err(e.to_string()),
            // SAFETY: a device of the live list.
            Ok(m) if !unsafe { (m.mlx5dv_is_supported)(dev) } => Err("not an mlx5 device (IBGDA needs a ConnectX-4 or newer NIC)".to_string()),
            Ok(m) => {
                let mut attr = sys::Mlx5dvContextAttr::zeroed();
                attr.flags = sys::MLX5DV_CONTEXT_FLAGS_DEVX;
                // SAFETY: a device of the live list and a zeroed attr with the DevX flag.
                let ctx = unsafe { (m.mlx5dv_open_device)(dev, &mut attr) };
                if !ctx.is_null() {
                    return Ok(Context { ctx, name, devx: Ok(()) });
                }
                Err(format!(
                    "mlx5dv_open_device with DevX on {name}: {}; DevX needs rdma-core v24+ and a kernel with mlx5 DevX \
                     (some kernels allow it only with CAP_NET_RAW)",
                    errno_text()
                ))
            }
        };
        // SAFETY: a device of the live list.
        let ctx = unsafe { (v.ibv_open_device)(dev) };
        if ctx.is_null() {
            return Err(Error::new(format!("ibv_open_device on {name}: {}", errno_text())));
        }
        Ok(Context { ctx, name, devx })
    }

    /// `ibv_query_device`.
    pub(crate) fn device_attr(&self) -> Result<DeviceAttr> {
        let v = sys::verbs()?;
        let mut a = ibv_device_attr::zeroed();
        // SAFETY: a live context and an out-struct of the header's layout.
        let rc = unsafe { (v.ibv_query_device)(self.ctx, &mut a) };
        if rc != 0 {
            return Err(Error::new(format!("ibv_query_device on {}: {}", self.name, sys::io_text(&std::io::Error::from_raw_os_error(rc)))));
        }
        Ok(DeviceAttr::from_attr(&a))
    }

    /// `ibv_query_port` and the port's GID table.
    pub(crate) fn port(&self, num: u8) -> PortResult {
        let v = sys::verbs().map_err(|e| e.to_string())?;
        let mut a = ibv_port_attr::zeroed();
        // SAFETY: a live context; the exported ibv_query_port fills the struct's leading fields.
        let rc = unsafe { (v.ibv_query_port)(self.ctx, num, &mut a) };
        if rc != 0 {
            return Err(format!("ibv_query_port {}:{num}: {}", self.name, sys::io_text(&std::io::Error::from_raw_os_error(rc))));
        }
        let mut p = PortInfo::from_attr(num, &a).map_err(|e| format!("{}:{num}: {e}", self.name))?;
        let gids = self.gid_table(num, a.gid_tbl_len.max(0) as u32);
        p.gid = choose_gid(p.link_layer, &gids).map(|e| (e.index as u8, e.gid));
        Ok(p)
    }

    /// The non-empty GIDs of port `num` with their types (`ibv_query_gid_ex`; with older libraries
    /// `ibv_query_gid` and sysfs's `gid_attrs/types`).
    fn gid_table(&self, num: u8, len: u32) -> Vec<GidEntry> {
        let Ok(v) = sys::verbs() else { return Vec::new() };
        let mut out = Vec::new();
        // GID indexes go into an 8-bit field of the address path.
        for index in 0..len.min(256) {
            let entry = match v._ibv_query_gid_ex {
                Some(query) => {
                    let mut e = ibv_gid_entry::zeroed();
                    // SAFETY: a live context, an out-struct of the header's layout and its size.
                    let rc = unsafe { query(self.ctx, num.into(), index, &mut e, 0, size_of::<ibv_gid_entry>()) };
                    // SAFETY: ibv_gid is a union of a byte array and two u64s: the bytes are always valid.
                    (rc == 0).then_some(GidEntry { index, gid: unsafe { e.gid.raw }, roce_v2: e.gid_type == rdma_sys::IBV_GID_TYPE_ROCE_V2 })
                }
                None => {
                    let mut g = ibv_gid::zeroed();
                    // SAFETY: a live context and an out-union of 16 bytes.
                    let rc = unsafe { (v.ibv_query_gid)(self.ctx, num, index as c_int, &mut g) };
                    let kind = std::fs::read_to_string(format!("/sys/class/infiniband/{}/ports/{num}/gid_attrs/types/{index}", self.name));
                    // SAFETY: see above: the bytes of the union.
                    (rc == 0).then(|| GidEntry { index, gid: unsafe { g.raw }, roce_v2: kind.is_ok_and(|k| k.trim().eq_ignore_ascii_case("RoCE v2")) })
                }
            };
            out.extend(entry.filter(|e| e.gid != [0; 16]));
        }
        out
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if let Ok(v) = sys::verbs() {
            // SAFETY: the context opened in `open`, closed once after everything made from it (the
            // owners of PDs, QPs and MRs hold an Arc of the Nic that owns this context).
            unsafe { (v.ibv_close_device)(self.ctx) };
        }
    }
}

/// What rshmem uses of `ibv_device_attr`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DeviceAttr {
    /// The firmware version (`fw_ver`).
    pub fw_ver: String,
    /// The number of physical ports (numbered from 1).
    pub phys_port_cnt: u8,
    /// The most outstanding work requests a queue may hold (`max_qp_wr`).
    pub max_qp_wr: i32,
    /// Outstanding RDMA READs/atomics a QP may be the target of (`max_dest_rd_atomic`, `log_rra_max`).
    pub max_qp_rd_atom: i32,
    /// Outstanding RDMA READs/atomics a QP may initiate (`max_rd_atomic`, `log_sra_max`).
    pub max_qp_init_rd_atom: i32,
    /// `enum ibv_atomic_cap`: 0 none, 1 HCA, 2 global.
    pub atomic_cap: u32,
}

impl DeviceAttr {
    /// Copies what rshmem uses out of `ibv_query_device`'s result.
    pub fn from_attr(a: &ibv_device_attr) -> DeviceAttr {
        let fw: Vec<u8> = a.fw_ver.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        DeviceAttr {
            fw_ver: String::from_utf8_lossy(&fw).into_owned(),
            phys_port_cnt: a.phys_port_cnt,
            max_qp_wr: a.max_qp_wr,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            atomic_cap: a.atomic_cap,
        }
    }
}

/// floor(log2(n)) for n >= 1, 0 for n <= 0 (NVSHMEM's `IBGDA_ILOG2_OR0`).
pub fn ilog2_or0(n: i32) -> u8 {
    if n <= 0 {
        0
    } else {
        (31 - (n as u32).leading_zeros()) as u8
    }
}

/// One RDMA device as [`survey`] finds it.
#[derive(Debug)]
pub struct DeviceSurvey {
    /// The device's name ("mlx5_0").
    pub name: String,
    /// Ok: DevX context; Err: why not.
    pub devx: std::result::Result<(), String>,
    /// Its attributes, or why the device could not be opened or queried.
    pub attr: std::result::Result<DeviceAttr, String>,
    /// Its ports (1 to `phys_port_cnt`), each as queried or why it could not be.
    pub ports: Vec<PortResult>,
}

fn probe(list: &DeviceList, i: usize) -> Result<(Context, DeviceAttr, Vec<PortResult>)> {
    let ctx = Context::open(list, i)?;
    let attr = ctx.device_attr()?;
    let ports = (1..=attr.phys_port_cnt).map(|p| ctx.port(p)).collect();
    Ok((ctx, attr, ports))
}

/// Every RDMA device with its ports, through the verbs library (for `rshmrun --diagnose`); the error
/// says what went wrong ([`NO_DEVICE_FIX`] says what to do).
pub fn survey() -> std::result::Result<Vec<DeviceSurvey>, String> {
    let list = DeviceList::get_or_why()?;
    Ok((0..list.len())
        .map(|i| match probe(&list, i) {
            Ok((ctx, attr, ports)) => DeviceSurvey { name: ctx.name.clone(), devx: ctx.devx.clone(), attr: Ok(attr), ports },
            Err(e) => DeviceSurvey { name: list.name(i), devx: Err("not opened".into()), attr: Err(e.to_string()), ports: Vec::new() },
        })
        .collect())
}

/// An opened RDMA NIC port: the device context (with DevX on mlx5), a protection domain, and the
/// port's attributes. Shared (`Arc`) by everything made from it, which keeps it open.
pub struct Nic {
    pd: *mut ibv_pd,
    ctx: Context,
    attr: DeviceAttr,
    port: PortInfo,
}

// SAFETY: libibverbs and libmlx5 calls are thread-safe (rdma-core documents every verb as such); the
// Nic's own fields are immutable after `open`.
unsafe impl Send for Nic {}
// SAFETY: see Send.
unsafe impl Sync for Nic {}

impl Nic {
    /// Opens the first active port `hca` allows (init's `RSHMEM_IB_HCA`, `config::Config::ib_hca`: every
    /// device when unset). The error names what was found and what to do ("no RDMA device: install ...").
    pub fn open_with(hca: &HcaList) -> Result<Arc<Nic>> {
        let list = DeviceList::get()?;
        let mut found = Vec::new();
        let mut contexts = Vec::new();
        for i in 0..list.len() {
            if !hca.allows_device(&list.name(i)) {
                found.push((list.name(i), vec![Err("not in RSHMEM_IB_HCA".into())]));
                contexts.push(None);
                continue;
            }
            match probe(&list, i) {
                Ok((ctx, attr, ports)) => {
                    found.push((ctx.name.clone(), ports));
                    contexts.push(Some((ctx, attr)));
                }
                Err(e) => {
                    found.push((list.name(i), vec![Err(e.to_string())]));
                    contexts.push(None);
                }
            }
        }
        let (d, num) = choose_port(&found, hca).map_err(Error::new)?;
        let (ctx, attr) = contexts.swap_remove(d).expect("a chosen device was opened");
        let port = found.swap_remove(d).1.into_iter().flatten().find(|p| p.num == num).expect("the chosen port");
        let v = sys::verbs()?;
        // SAFETY: a live context.
        let pd = unsafe { (v.ibv_alloc_pd)(ctx.ctx) };
        if pd.is_null() {
            return Err(Error::new(format!("ibv_alloc_pd on {}: {}", ctx.name, errno_text())));
        }
        Ok(Arc::new(Nic { pd, ctx, attr, port }))
    }

    /// The device's name ("mlx5_0").
    pub fn name(&self) -> &str {
        &self.ctx.name
    }

    /// "mlx5_0:1".
    pub fn port_name(&self) -> String {
        format!("{}:{}", self.ctx.name, self.port.num)
    }

    /// The opened port's attributes and GID.
    pub fn port(&self) -> &PortInfo {
        &self.port
    }

    /// The device's attributes (`ibv_query_device`).
    pub fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    /// Whether the context has DevX (IBGDA needs it), or why not.
    pub fn devx(&self) -> Result<()> {
        self.ctx.devx.clone().map_err(Error::new)
    }

    pub(crate) fn ctx(&self) -> *mut ibv_context {
        self.ctx.ctx
    }

    pub(crate) fn pd(&self) -> *mut ibv_pd {
        self.pd
    }

    /// Runs a DevX general command (a query), naming `what` and the firmware's status and syndrome on
    /// failure.
    pub fn devx_cmd(&self, what: &str, input: &Mailbox, out_bytes: usize) -> Result<Mailbox> {
        self.devx()?;
        let m = sys::mlx5()?;
        let mut out = Mailbox::new(out_bytes);
        // SAFETY: a live DevX context; the mailboxes are valid for their lengths.
        let rc = unsafe {
            (m.mlx5dv_devx_general_cmd)(
                self.ctx(),
                input.bytes().as_ptr().cast(),
                input.bytes().len(),
                out.bytes_mut().as_mut_ptr().cast(),
                out_bytes,
            )
        };
        if rc != 0 {
            return Err(devx_error("mlx5dv_devx_general_cmd", what, self.name(), rc, &out));
        }
        Ok(out)
    }

    /// The HCA capabilities IBGDA depends on (QUERY_HCA_CAP, general and atomic).
    pub fn hca_caps(&self) -> Result<HcaCaps> {
        let out = prm::query_hca_cap_out::BYTES;
        let general = self.devx_cmd("QUERY_HCA_CAP (general)", &prm::query_hca_cap_in(prm::cap_op_mod::GENERAL_CUR)?, out)?;
        let atomic = self.devx_cmd("QUERY_HCA_CAP (atomic)", &prm::query_hca_cap_in(prm::cap_op_mod::ATOMIC_CUR)?, out)?;
        Ok(HcaCaps::parse(&general, Some(&atomic)))
    }
}

/// The error of a failed DevX call: the call, the command, the device, errno and the firmware's
/// status/syndrome from the output mailbox (when it wrote them).
pub(crate) fn devx_error(call: &str, what: &str, dev: &str, rc: c_int, out: &Mailbox) -> Error {
    let errno = if rc > 0 { rc } else { std::io::Error::last_os_error().raw_os_error().unwrap_or(0) };
    let (status, syndrome) = out.status();
    let fw = if status != 0 { format!(", firmware status {status:#x} syndrome {syndrome:#x}") } else { String::new() };
    Error::new(format!("{call} {what} on {dev}: {}{fw}", sys::io_text(&std::io::Error::from_raw_os_error(errno))))
}

impl Drop for Nic {
    fn drop(&mut self) {
        if let Ok(v) = sys::verbs() {
            // SAFETY: the PD allocated in `open`; everything registered in it holds an Arc of this Nic,
            // so nothing uses it any more. The context closes after (field order).
            unsafe { (v.ibv_dealloc_pd)(self.pd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(num: u8, state: ibv_port_state::Type, gid: bool) -> PortResult {
        Ok(PortInfo {
            num,
            state,
            link_layer: LinkLayer::Ethernet,
            active_mtu: 5,
            lid: 0,
            gid: gid.then_some((3, [0; 16])),
        })
    }

    #[test]
    fn no_device_is_a_clear_error() {
        let e = choose_port(&[], &HcaList::default()).unwrap_err();
        assert!(e.starts_with("no RDMA device: install the NIC driver") && e.contains("ibv_devices"), "{e}");
    }

    #[test]
    fn the_first_active_allowed_port_is_chosen() {
        let devs = vec![
            ("mlx5_0".to_string(), vec![port(1, ibv_port_state::IBV_PORT_DOWN, true)]),
            ("mlx5_1".to_string(), vec![port(1, ibv_port_state::IBV_PORT_ACTIVE, false), port(2, ibv_port_state::IBV_PORT_ACTIVE, true)]),
            ("mlx5_2".to_string(), vec![port(1, ibv_port_state::IBV_PORT_ACTIVE, true)]),
        ];
        assert_eq!(choose_port(&devs, &HcaList::default()), Ok((1, 2)));
        let only2 = crate::config::parse::parse_hca_list("mlx5_2").unwrap();
        assert_eq!(choose_port(&devs, &only2), Ok((2, 1)));
        let not2 = crate::config::parse::parse_hca_list("^mlx5_1:2,mlx5_2").unwrap();
        let e = choose_port(&devs, &not2).unwrap_err();
        assert!(e.contains("mlx5_0:1 DOWN") && e.contains("mlx5_1:1 has no usable GID") && e.contains("mlx5_1:2 (not in RSHMEM_IB_HCA)"), "{e}");
        assert!(e.contains("subnet manager"), "{e}");
        let broken = vec![("mlx5_9".to_string(), vec![Err("ibv_query_port mlx5_9:1: Input/output error (errno 5)".to_string())])];
        assert!(choose_port(&broken, &HcaList::default()).unwrap_err().contains("mlx5_9: ibv_query_port"));
    }

    #[test]
    fn gids_are_chosen_by_the_diagnose_rule() {
        let v4 = |last: u8| {
            let mut g = [0u8; 16];
            g[10] = 0xff;
            g[11] = 0xff;
            g[12..].copy_from_slice(&[10, 0, 0, last]);
            g
        };
        let mut link_local = [0u8; 16];
        link_local[0] = 0xfe;
        link_local[1] = 0x80;
        link_local[15] = 1;
        let entries = [
            GidEntry { index: 0, gid: link_local, roce_v2: false },
            GidEntry { index: 1, gid: link_local, roce_v2: true },
            GidEntry { index: 2, gid: v4(1), roce_v2: false },
            GidEntry { index: 3, gid: v4(1), roce_v2: true },
            GidEntry { index: 4, gid: [0; 16], roce_v2: true },
        ];
        assert_eq!(choose_gid(LinkLayer::Ethernet, &entries).map(|e| e.index), Some(3), "RoCE v2, IPv4-mapped");
        assert_eq!(choose_gid(LinkLayer::Ethernet, &entries[..3]).map(|e| e.index), Some(1), "RoCE v2 link-local last");
        assert_eq!(choose_gid(LinkLayer::Ethernet, &[entries[0], entries[2]]), None, "RoCE v1 only: none");
        assert_eq!(choose_gid(LinkLayer::InfiniBand, &entries).map(|e| e.index), Some(0), "InfiniBand: the port GID");
        assert_eq!(choose_gid(LinkLayer::Ethernet, &[entries[4]]), None, "empty slots are skipped");
    }

    #[test]
    fn port_attributes_are_parsed() {
        let mut a = ibv_port_attr::zeroed();
        a.state = ibv_port_state::IBV_PORT_ACTIVE;
        a.active_mtu = rdma_sys::ibv_mtu::IBV_MTU_4096;
        a.lid = 0x12;
        a.link_layer = IBV_LINK_LAYER_INFINIBAND;
        let mut p = PortInfo::from_attr(1, &a).unwrap();
        assert!(p.is_active());
        assert_eq!((p.link_layer, p.active_mtu, p.lid), (LinkLayer::InfiniBand, 5, 0x12));
        p.gid = Some((0, [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]));
        assert_eq!(p.summary(), "port 1: ACTIVE, InfiniBand, MTU 4096, LID 0x12, GID 0 fe80::1");
        a.link_layer = IBV_LINK_LAYER_UNSPECIFIED;
        assert_eq!(PortInfo::from_attr(1, &a).unwrap().link_layer, LinkLayer::InfiniBand);
        a.link_layer = IBV_LINK_LAYER_ETHERNET;
        a.state = ibv_port_state::IBV_PORT_DOWN;
        let e = PortInfo::from_attr(2, &a).unwrap();
        assert_eq!((e.link_layer, e.is_active()), (LinkLayer::Ethernet, false));
        assert_eq!(LinkLayer::from_verbs(e.link_layer.to_verbs()), Ok(LinkLayer::Ethernet));
        a.link_layer = 7;
        assert!(PortInfo::from_attr(1, &a).unwrap_err().contains("unknown link layer 7"));
        assert_eq!((mtu_bytes(1), mtu_bytes(3), mtu_bytes(5), mtu_bytes(0), mtu_bytes(6)), (256, 1024, 4096, 0, 0));
        assert_eq!((ilog2_or0(0), ilog2_or0(1), ilog2_or0(16), ilog2_or0(17), ilog2_or0(-3)), (0, 0, 4, 4, 0));
        let mut d = ibv_device_attr::zeroed();
        for (i, c) in b"20.39.1002".iter().enumerate() {
            d.fw_ver[i] = *c as _;
        }
        d.max_qp_rd_atom = 16;
        d.phys_port_cnt = 2;
        let da = DeviceAttr::from_attr(&d);
        assert_eq!((da.fw_ver.as_str(), da.max_qp_rd_atom, da.phys_port_cnt), ("20.39.1002", 16, 2));
    }

    #[test]
    fn opening_without_a_device_says_what_is_missing() {
        // On a machine with a usable NIC this opens it; everywhere else the error must say what is
        // missing (no library, no kernel support, no device, or no active port).
        match Nic::open_with(&HcaList::default()) {
            Ok(nic) => assert!(!nic.name().is_empty()),
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("cannot load libibverbs")
                        || e.contains("no RDMA device")
                        || e.contains("no RDMA user-space support")
                        || e.contains("no usable RDMA port"),
                    "{e}"
                );
                assert!(e.contains("install") || e.contains("RSHMEM_IB_HCA"), "{e}");
            }
        }
    }
}
