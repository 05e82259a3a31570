//! The whole report of `rshmrun --diagnose` and the decision behind automatic selection: whether a
//! real NIC is usable for IBGDA (every check passes). The verbs library's checks and the transport line
//! are handed in by the transport layer (`crate::transport::select`): the probes import no transport.

use crate::config::parse::HcaList;
use crate::config::{env, Vars};
use crate::node::iface::NetEnv;
use crate::probe::affinity::affinity_checks;
use crate::probe::check::{Check, Status, SYSFS_LIMIT, VERBS_LIMIT};
use crate::probe::gpu::{gpudirect_check, probe_gpus, GpuProbe};
use crate::probe::net::{bootstrap_check, proxy_check};
use crate::probe::rdma::{hca_filter, rdma_checks, rdma_devices, usable_ports};
use rshmem_common::bounded;
use std::path::Path;

/// The verbs library's checks (`crate::transport::verbs::diagnose` or `quick_checks`, handed in by the
/// transport layer), given the devices and ports `RSHMEM_IB_HCA` allows.
pub type VerbsChecks = fn(&HcaList) -> Vec<Check>;

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
pub(crate) fn bounded_verbs(verbs: impl FnOnce() -> Vec<Check> + Send + 'static) -> Vec<Check> {
    bounded(VERBS_LIMIT, verbs).unwrap_or_else(|| {
        vec![Check::new(
            "DevX and GPU-mapped UAR",
            Status::Fail,
            format!("the verbs checks did not answer within {} s (opening the NIC hangs?)", VERBS_LIMIT.as_secs()),
        )
        .with_fix("check the NIC with `ibv_devinfo`; a hung firmware command shows in `dmesg`")]
    })
}


/// The decision from the checks' outcomes: a usable port, GPUDirect RDMA not failing (a SKIP is no
/// obstacle), and no verbs check failing (without the `verbs` feature there is one FAIL).
pub(crate) fn decide(port_usable: bool, gpudirect: &Check, verbs: &[Check]) -> bool {
    port_usable && gpudirect.status != Status::Fail && verbs.iter().all(|c| c.status != Status::Fail)
}

/// The decision without the report: stops at the first obstacle, in the order of their cost (sysfs,
/// then the feature, then the GPU driver, then the verbs library: `verbs`, None without the
/// feature). No GPU is touched when no RDMA port is usable.
pub(crate) fn usable_at(root: &Path, hca: Option<&str>, verbs: Option<VerbsChecks>) -> bool {
    let Ok(filter) = hca_filter(hca) else { return false };
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
    decide(port_usable, &gpudirect, &bounded_verbs(move || verbs(&filter)))
}

/// Whether a real RDMA NIC is usable for IBGDA by this process, with the verbs library's checks
/// `verbs` (the transport layer's `crate::transport::verbs::quick_checks`; None in a build without the
/// `verbs` feature, where it is never usable): every NIC check passes (see the module's
/// documentation). `hca`: RSHMEM_IB_HCA's value (None: unset; a bad one: not usable). Cheap when no
/// RDMA device exists (a sysfs listing, no GPU driver call).
pub fn usable_with(verbs: Option<VerbsChecks>, hca: Option<&str>) -> bool {
    usable_at(Path::new("/"), hca, verbs)
}

/// Every check of `rshmrun --diagnose`, on the host under `root` with the given settings (`hca`:
/// RSHMEM_IB_HCA), the verbs library's checks (`verbs`, None without the feature) and the line that
/// says which transport a job would use given the NIC decision (`transport`). Returns the lines and
/// the NIC decision.
pub(crate) fn report_at(root: &Path, hca: Option<&str>, net: &NetEnv, gpus: GpuProbe, verbs: Option<VerbsChecks>, transport: &dyn Fn(bool) -> Check) -> (Vec<Check>, bool) {
    let r = root.to_path_buf();
    let h = hca.map(str::to_string);
    let scanned = bounded(SYSFS_LIMIT, move || {
        let devices = rdma_devices(&r);
        let (lines, usable) = rdma_checks(&r, &devices, h.as_deref());
        (devices, lines, usable)
    });
    let (devices, mut checks, ports) = scanned.unwrap_or_else(|| {
        let c = Check::new("RDMA devices", Status::Fail, format!("reading /sys/class/infiniband did not finish within {} s", SYSFS_LIMIT.as_secs()))
            .with_fix("a driver blocks sysfs reads: check `dmesg` for the RDMA driver");
        (Vec::new(), vec![c], Vec::new())
    });
    let gpudirect = gpudirect_check(root, &gpus);
    checks.push(gpudirect.clone());
    let verbs = match (verbs, hca_filter(hca)) {
        (None, _) => vec![no_verbs_check()],
        (Some(v), Ok(filter)) => bounded_verbs(move || v(&filter)),
        // The RDMA lines above name the bad value.
        (Some(_), Err(why)) => vec![Check::new("DevX and GPU-mapped UAR", Status::Fail, format!("not checked: {why}"))],
    };
    checks.extend(verbs.iter().cloned());
    checks.extend(affinity_checks(root, &gpus, &devices, &ports));
    checks.push(bootstrap_check(net));
    checks.push(proxy_check(net));
    let usable = decide(!ports.is_empty(), &gpudirect, &verbs);
    checks.push(transport(usable));
    (checks, usable)
}

/// Every check of `rshmrun --diagnose` on this host, with the environment `vars` (rshmrun's), the
/// verbs library's checks and the transport line handed in by the transport layer
/// (`crate::transport::select::report`). Never hangs (every probe is bounded) and never fails: a
/// check that cannot be made is a line that says so (a bad value of a variable too).
pub fn report_with(vars: &Vars, verbs: Option<VerbsChecks>, transport: &dyn Fn(bool) -> Check) -> Vec<Check> {
    let hca = vars.lookup(env::IB_HCA).map(|(_, v)| v);
    let root = Path::new("/");
    let mut checks = report_at(root, hca, &NetEnv::from_vars(vars), probe_gpus(root), verbs, transport).0;
    let at = checks.iter().position(|c| c.name == "bootstrap interface").unwrap_or(checks.len());
    checks.insert(at, bootstrap_route_check(&crate::bootstrap::bootstrap_choice(&|n: &str| vars.get(n))));
    checks
}

/// Which bootstrap this environment selects, and why, as a line.
pub(crate) fn bootstrap_route_check(c: &crate::bootstrap::BootstrapChoice) -> Check {
    let line = Check::new("bootstrap", if c.ok { Status::Info } else { Status::Fail }, format!("{}: {}", c.route, c.detail));
    if c.ok {
        line
    } else {
        line.with_fix(format!(
            "set {} and {} for every PE, or start the job under rshmrun or a launcher with PMIx or PMI",
            crate::config::env::BOOTSTRAP,
            crate::config::env::JOB_KEY
        ))
    }
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
