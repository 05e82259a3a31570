//! How the proxy reaches its peers (its *provider*): RDMA through the NIC's verbs (`verbs`: the proxy
//! thread posts WRITE/READ/atomics on an RC QP per peer, as NVSHMEM's IBRC does) or frames over TCP
//! to the peer's proxy (`tcp`: always available). `RSHMEM_PROXY_PROVIDER` (auto, tcp, verbs) and the
//! host checks decide per PE ([`local_choice`]); the PEs agree job-wide ([`agree`]); a verbs setup that
//! fails on any PE falls back to TCP on every PE under `auto`, and stops the job when `verbs` was asked
//! for (`transport::proxy`).
//!
//! Usable for host verbs ([`verbs_usable_at`]): the build has the `verbs` feature and an RDMA device
//! (any vendor: host verbs need no DevX) has an ACTIVE port allowed by `RSHMEM_IB_HCA`, with a LID
//! (InfiniBand) or a RoCE v2 GID (Ethernet). Whether the heap registers with the NIC (GPU memory:
//! dma-buf or peer memory; host memory on the CPU backend) is learnt by trying, at setup.

use crate::config::env;
use crate::probe::check::{Check, Status, SYSFS_LIMIT};
use crate::probe::rdma::{allowed_ports, hca_filter, rdma_devices};
use crate::transport::agree;
use std::path::Path;

/// What carries the proxy's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Frames over TCP to the peer's proxy.
    Tcp,
    /// RDMA through the NIC's verbs (and TCP for what the NIC cannot do).
    Verbs,
}

impl Provider {
    /// Its name in messages and `RSHMEM_PROXY_PROVIDER`.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Tcp => "tcp",
            Provider::Verbs => "verbs",
        }
    }
    /// A byte for the agreement's all-gather.
    pub fn code(self) -> u8 {
        match self {
            Provider::Tcp => 1,
            Provider::Verbs => 2,
        }
    }
    /// The provider a [`Provider::code`] byte names.
    pub fn from_code(c: u8) -> Option<Provider> {
        match c {
            1 => Some(Provider::Tcp),
            2 => Some(Provider::Verbs),
            _ => None,
        }
    }
}

/// `RSHMEM_PROXY_PROVIDER`'s value: auto (verbs when usable, else TCP; the default), tcp or verbs
/// (verbs, or the job stops with the reason).
pub use crate::config::env::ProxyProvider as Want;

/// Parses `RSHMEM_PROXY_PROVIDER`'s value (None: unset, auto); the error names the variable.
pub fn parse_want(value: Option<&str>) -> std::result::Result<Want, String> {
    let Some(v) = value.filter(|v| !v.trim().is_empty()) else { return Ok(Want::Auto) };
    env::parse_proxy_provider(v).map_err(|e| format!("{}={v:?}: {e}", env::PROXY_PROVIDER))
}

/// Whether the NIC under `root` (sysfs) is usable for host verbs: Ok(the port, for messages) or
/// Err(why not). `hca`: `RSHMEM_IB_HCA`'s value; `built`: the build has the `verbs` feature.
pub fn verbs_usable_at(root: &Path, hca: Option<&str>, built: bool) -> std::result::Result<String, String> {
    if !built {
        return Err("this build of rshmem lacks the `verbs` feature (rebuild with --features rshmem/verbs)".into());
    }
    let filter = hca_filter(hca)?;
    let devices = rdma_devices(root);
    if devices.is_empty() {
        return Err("no RDMA device (/sys/class/infiniband is empty or missing)".into());
    }
    let mut why = Vec::new();
    // Any vendor: host verbs need no DevX.
    for (d, p, fault) in allowed_ports(&devices, &filter, |_| true) {
        match fault {
            None => return Ok(format!("{}:{} ({})", d.name, p.num, p.link_layer)),
            Some(f) => why.push(format!("{}:{} {}", d.name, p.num, f.describe())),
        }
    }
    if why.is_empty() {
        return Err(format!("no port of {} is allowed by {}", devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "), env::IB_HCA));
    }
    Err(format!("no RDMA port is usable ({})", why.join("; ")))
}

/// [`verbs_usable_at`] for this host, with the devices `hca` allows (`RSHMEM_IB_HCA`'s text).
pub fn verbs_usable(hca: Option<&str>) -> std::result::Result<String, String> {
    let hca = hca.map(str::to_string);
    rshmem_common::bounded(SYSFS_LIMIT, move || verbs_usable_at(Path::new("/"), hca.as_deref(), cfg!(feature = "verbs")))
        .unwrap_or_else(|| Err("reading /sys/class/infiniband did not finish in time".into()))
}

/// Whether PE `pe`'s NIC is usable for host verbs under this init's configuration, or what its test
/// hook (`RSHMEM_TEST_VERBS_USABLE`) says.
pub fn verbs_usable_on(config: &crate::config::Config, pe: usize) -> std::result::Result<String, String> {
    match &config.hooks.verbs_usable {
        Some(set) if set.names(pe) => Ok(format!("{} says so", crate::config::VERBS_HOOK)),
        Some(_) => Err(format!("{} says no", crate::config::VERBS_HOOK)),
        None => verbs_usable(config.ib_hca_text.as_deref()),
    }
}

/// This PE's own choice from `want` and whether its NIC is usable: the provider and why.
pub fn local_choice(want: Want, usable: &std::result::Result<String, String>) -> (Provider, String) {
    match (want, usable) {
        (Want::Tcp, _) => (Provider::Tcp, format!("{}=tcp", env::PROXY_PROVIDER)),
        (_, Ok(port)) => (Provider::Verbs, format!("RDMA port {port}")),
        (_, Err(why)) => (Provider::Tcp, why.clone()),
    }
}

/// The job's provider from every PE's choice and reason (all-gathered): all verbs → verbs; under
/// auto a mix → TCP for all, with the note naming the PEs without a usable NIC and why; with
/// `RSHMEM_PROXY_PROVIDER=verbs` any PE without one stops the job, naming it and the reason.
pub fn agree(want: Want, choices: &[(Provider, String)]) -> std::result::Result<(Provider, Option<String>), String> {
    let without: Vec<usize> = (0..choices.len()).filter(|&i| choices[i].0 == Provider::Tcp).collect();
    let Some(&first) = without.first() else { return Ok((Provider::Verbs, None)) };
    let pes = crate::bootstrap::pe_list(&without);
    match want {
        Want::Verbs => Err(format!(
            "{}=verbs: no NIC usable for the proxy over verbs on {pes} (PE {first}: {}); fix it (rshmrun --diagnose) or set {}=auto to fall back to TCP",
            env::PROXY_PROVIDER,
            choices[first].1,
            env::PROXY_PROVIDER
        )),
        _ if without.len() == choices.len() => Ok((Provider::Tcp, None)),
        _ => Ok((Provider::Tcp, Some(format!("proxy over verbs: no usable NIC on {pes} (PE {first}: {}): every PE's proxy uses TCP", choices[first].1)))),
    }
}

/// What an agreed failure of the verbs setup starts with (init falls back to TCP on it under auto).
pub const SETUP_FAILED: &str = "proxy over verbs: the NIC could not be set up";

/// Collective: every PE says how its part of a step went (`mine`); Ok when it went well everywhere,
/// else the same error on every PE, starting with [`SETUP_FAILED`], naming the PEs it failed on and
/// the first one's reason (`transport::agree`). `what` names the step.
pub fn agree_step(boot: &crate::bootstrap::Bootstrap, what: &str, mine: std::result::Result<(), String>) -> crate::error::Result<()> {
    agree::agree_failure(boot, &format!("rshmem_init (proxy over verbs: {what})"), SETUP_FAILED, what, mine)
}

/// Whether `e` is an agreed failure of the verbs setup (see [`SETUP_FAILED`]).
pub fn agreed_setup_failure(e: &crate::error::Error) -> bool {
    agree::is_agreed_failure(e, SETUP_FAILED)
}

/// The line of `rshmrun --diagnose` saying how a proxy started here would reach its peers.
pub fn provider_check(value: Option<&str>, usable: &std::result::Result<String, String>) -> Check {
    const NAME: &str = "proxy provider";
    let want = match parse_want(value) {
        Ok(w) => w,
        Err(e) => return Check::new(NAME, Status::Fail, e).with_fix(format!("set {} to auto, tcp or verbs (or unset it)", env::PROXY_PROVIDER)),
    };
    let (p, why) = local_choice(want, usable);
    let setting = match value {
        None => format!("{} unset (auto)", env::PROXY_PROVIDER),
        Some(v) => format!("{}={}", env::PROXY_PROVIDER, v.trim()),
    };
    match (p, want) {
        (Provider::Tcp, Want::Verbs) => Check::new(NAME, Status::Fail, format!("{setting}, but the proxy over verbs is not usable here: {why}; a job spanning nodes through the proxy stops"))
            .with_fix(format!("fix the NIC (the lines above), or set {}=auto", env::PROXY_PROVIDER)),
        (Provider::Verbs, _) => Check::new(NAME, Status::Info, format!("{setting}: the proxy posts RDMA WRITE/READ/atomics through {why} (TCP for what the NIC cannot do; TCP for all if the heap does not register with the NIC on every PE)")),
        (Provider::Tcp, _) => Check::new(NAME, Status::Info, format!("{setting}: the proxy carries remote operations over TCP ({why})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_and_the_agreement() {
        assert_eq!(parse_want(None), Ok(Want::Auto));
        assert_eq!(parse_want(Some(" VERBS ")), Ok(Want::Verbs));
        assert_eq!(parse_want(Some("tcp")), Ok(Want::Tcp));
        assert!(parse_want(Some("udp")).unwrap_err().contains("RSHMEM_PROXY_PROVIDER=\"udp\": expected auto, tcp or verbs"));
        let yes: std::result::Result<String, String> = Ok("mlx5_0:1 (InfiniBand)".into());
        let no: std::result::Result<String, String> = Err("no RDMA device".into());
        assert_eq!(local_choice(Want::Auto, &yes).0, Provider::Verbs);
        assert_eq!(local_choice(Want::Auto, &no), (Provider::Tcp, "no RDMA device".into()));
        assert_eq!(local_choice(Want::Tcp, &yes).0, Provider::Tcp);
        let v = (Provider::Verbs, "port".to_string());
        let t = (Provider::Tcp, "no RDMA device".to_string());
        assert_eq!(agree(Want::Auto, &[v.clone(), v.clone()]), Ok((Provider::Verbs, None)));
        assert_eq!(agree(Want::Auto, &[t.clone(), t.clone()]), Ok((Provider::Tcp, None)));
        let (p, note) = agree(Want::Auto, &[v.clone(), t.clone(), t.clone()]).unwrap();
        assert_eq!(p, Provider::Tcp);
        assert!(note.unwrap().contains("no usable NIC on PEs 1, 2 (PE 1: no RDMA device)"));
        let e = agree(Want::Verbs, &[v.clone(), t.clone()]).unwrap_err();
        assert!(e.contains("RSHMEM_PROXY_PROVIDER=verbs") && e.contains("PE 1: no RDMA device") && e.contains("=auto"), "{e}");
        for p in [Provider::Tcp, Provider::Verbs] {
            assert_eq!(Provider::from_code(p.code()), Some(p));
        }
        assert_eq!(Provider::from_code(0), None);
    }

    #[test]
    fn the_diagnose_line() {
        let no: std::result::Result<String, String> = Err("no RDMA device".into());
        let c = provider_check(None, &no);
        assert_eq!(c.status, Status::Info);
        assert!(c.detail.contains("over TCP (no RDMA device)"), "{}", c.line());
        let c = provider_check(Some("verbs"), &no);
        assert_eq!(c.status, Status::Fail);
        assert!(c.line().contains("not usable here: no RDMA device"), "{}", c.line());
        let c = provider_check(None, &Ok("mlx5_0:1 (InfiniBand)".into()));
        assert!(c.detail.contains("through RDMA port mlx5_0:1"), "{}", c.line());
        assert_eq!(provider_check(Some("x"), &no).status, Status::Fail);
    }

    #[test]
    fn without_the_feature_verbs_are_never_usable() {
        let e = verbs_usable_at(Path::new("/nonexistent"), None, false).unwrap_err();
        assert!(e.contains("lacks the `verbs` feature"), "{e}");
        let e = verbs_usable_at(Path::new("/nonexistent"), None, true).unwrap_err();
        assert!(e.contains("no RDMA device"), "{e}");
        assert!(verbs_usable_at(Path::new("/nonexistent"), Some(""), true).is_err());
    }
}
