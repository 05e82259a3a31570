//! Which transport reaches which PE: the one place that decides. `RSHMEM_REMOTE_TRANSPORT` (parsed
//! once, in init's `Config`) and the NIC checks choose the transport for PEs on other nodes
//! ([`local_choice`], [`choose`]), every PE's choice is agreed job-wide ([`decide`]); the registry
//! finds its constructor ([`factory`]); [`route_table`] says, per PE, which transport reaches it.
//! Also the diagnosis behind the choice, for `rshmrun --diagnose`: the host probes of `crate::probe`
//! with the verbs library's checks (feature `verbs`) handed in (the probes import no transport, so
//! the dependency runs one way).
//!
//! The automatic choice, in order: IBGDA when a NIC passes every check ([`nic_usable`]); else the
//! proxy, which itself runs over the NIC's verbs when one is usable for host verbs (an RDMA device
//! with an active port, any vendor, and a heap that registers with it on every PE:
//! `proxy::provider`), else over TCP. `RSHMEM_PROXY_PROVIDER` forces the
//! proxy's provider (tcp, verbs); `rshmrun --diagnose` prints the decision and the reason.

use crate::config::parse::{parse_remote, Remote, REMOTE_VALUES};
use crate::config::{Config, Vars};
use crate::error::{Error, Result};
use crate::probe::check::{Check, Status};
use crate::probe::report::{self as diagnose, VerbsChecks};
use crate::transport::interface::{RemoteFactory, Transport};
use crate::transport::proxy::provider;

/// What a job's PEs use to reach PEs on other nodes: the outcome of `RSHMEM_REMOTE_TRANSPORT` and of
/// the NIC checks (`crate::probe`). `rshmrun --diagnose` prints it; init acts on it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RemoteChoice {
    /// No remote transport: other nodes' PEs are not reachable (single-node job, or `none`).
    None,
    /// The CPU proxy (its provider, verbs or TCP, is agreed when it starts: `proxy::provider`).
    Proxy,
    /// IBGDA on a real ConnectX NIC (the `verbs` feature, and every NIC check passed).
    IbgdaNic,
    /// IBGDA through the emulated mlx5 NIC (asked for with `ibgda`, no usable NIC).
    IbgdaEmulated,
}

impl RemoteChoice {
    /// One line for users: what is used and why.
    pub fn describe(self) -> &'static str {
        match self {
            RemoteChoice::None => "none: PEs on other nodes are not reachable",
            RemoteChoice::Proxy => "proxy: a CPU proxy thread per PE carries remote operations (RDMA through the NIC's verbs when usable, else TCP: see the proxy provider line)",
            RemoteChoice::IbgdaNic => "ibgda: GPU threads post mlx5 work requests to the NIC themselves",
            RemoteChoice::IbgdaEmulated => "ibgda (emulated NIC): GPU threads post mlx5 work requests to rshmem's software NIC, which carries them over TCP; no usable NIC was found",
        }
    }
}

/// Picks the remote transport from `RSHMEM_REMOTE_TRANSPORT` (parsed: init's configuration), whether
/// the job spans nodes, and whether a real NIC passed every check (`crate::probe::diagnose`):
/// - `auto` (unset): nothing for a single-node job; `ibgda` on a usable NIC, else `proxy`;
/// - `ibgda`: the NIC when usable, else the emulated NIC (init says so once);
/// - `proxy`: the proxy across nodes; nothing for a single-node job, where no PE could use it and its
///   channels would only add reads of host memory to every `quiet` (1.4 us on 2 x H200, 2026-11-27);
/// - `none`: as named.
pub fn choose(remote: Remote, spans_nodes: bool, nic_usable: bool) -> RemoteChoice {
    match remote {
        Remote::Auto if !spans_nodes => RemoteChoice::None,
        Remote::Auto if nic_usable => RemoteChoice::IbgdaNic,
        Remote::Auto => RemoteChoice::Proxy,
        Remote::None => RemoteChoice::None,
        Remote::Proxy if !spans_nodes => RemoteChoice::None,
        Remote::Proxy => RemoteChoice::Proxy,
        Remote::Ibgda if nic_usable => RemoteChoice::IbgdaNic,
        Remote::Ibgda => RemoteChoice::IbgdaEmulated,
    }
}

/// [`choose`] from `RSHMEM_REMOTE_TRANSPORT`'s text (`var` names it in messages): what
/// `rshmrun --diagnose` reports, where a bad value is a line, not an error of init.
pub fn choose_remote(var: &str, value: Option<&str>, spans_nodes: bool, nic_usable: bool) -> Result<RemoteChoice> {
    Ok(choose(parse_remote(value).map_err(|e| Error::new(format!("{var}: {e}")))?, spans_nodes, nic_usable))
}

/// PE `pe`'s own choice ([`choose`]) under init's configuration `cfg`, asking whether its NIC is usable
/// ([`nic_usable_on`]) only when the answer matters: the job spans nodes and the value is `auto` or
/// `ibgda`. Init all-gathers every PE's, [`decide`]s, and calls [`factory`] on the outcome (`None`: no
/// remote transport, as for `none` or a single-node job under `auto`: no threads, no sockets).
pub fn local_choice(cfg: &Config, spans_nodes: bool, pe: usize) -> RemoteChoice {
    let asks_nic = spans_nodes && matches!(cfg.remote, Remote::Auto | Remote::Ibgda);
    choose(cfg.remote, spans_nodes, asks_nic && nic_usable_on(cfg, pe))
}

/// Whether this PE's real NIC is usable ([`nic_usable`], with `cfg`'s RSHMEM_IB_HCA), or what the test
/// hook says: `RSHMEM_TEST_NIC_USABLE` ([`NIC_HOOK`]) = `all` or a comma-separated list of PEs makes
/// those PEs (and only them) believe they have a usable NIC, so that the agreement and the fallback
/// below run where no NIC is.
pub fn nic_usable_on(cfg: &Config, pe: usize) -> bool {
    match &cfg.hooks.nic_usable {
        Some(set) => set.names(pe),
        None => nic_usable(cfg.ib_hca_text.as_deref()),
    }
}
/// The test hook of [`nic_usable_on`].
pub use crate::config::NIC_HOOK;

impl RemoteChoice {
    /// A byte for the agreement's all-gather.
    pub fn code(self) -> u8 {
        match self {
            RemoteChoice::None => 0,
            RemoteChoice::Proxy => 1,
            RemoteChoice::IbgdaNic => 2,
            RemoteChoice::IbgdaEmulated => 3,
        }
    }
    /// The choice a [`RemoteChoice::code`] byte names; None for an unknown byte.
    pub fn from_code(c: u8) -> Option<RemoteChoice> {
        Some(match c {
            0 => RemoteChoice::None,
            1 => RemoteChoice::Proxy,
            2 => RemoteChoice::IbgdaNic,
            3 => RemoteChoice::IbgdaEmulated,
            _ => return None,
        })
    }
}

/// The job's remote transport from every PE's own choice (`choices[pe]`, all-gathered at init): a job
/// whose PEs chose differently would hang or mix wires, so
/// - the same choice everywhere: that one;
/// - under `auto` (`explicit` false), some PEs with a usable NIC and some without: the proxy for all
///   (and the message to log, naming the PEs without one);
/// - anything else (`RSHMEM_REMOTE_TRANSPORT=ibgda` with a real NIC on some PEs and the emulated one on
///   others, or the variable set differently on different PEs): an error naming the PEs of each choice
///   and what to do.
pub fn decide(var: &str, explicit: bool, choices: &[RemoteChoice]) -> Result<(RemoteChoice, Option<String>)> {
    let Some(&first) = choices.first() else { return Ok((RemoteChoice::None, None)) };
    if choices.iter().all(|&c| c == first) {
        return Ok((first, None));
    }
    let pes = |want: RemoteChoice| crate::bootstrap::pe_list(&(0..choices.len()).filter(|&i| choices[i] == want).collect::<Vec<_>>());
    let only = |a: RemoteChoice, b: RemoteChoice| choices.iter().all(|&c| c == a || c == b);
    if !explicit && only(RemoteChoice::IbgdaNic, RemoteChoice::Proxy) {
        return Ok((
            RemoteChoice::Proxy,
            Some(format!(
                "a usable NIC on {}, none on {}: every PE uses the proxy (rshmrun --diagnose on a node without one says why)",
                pes(RemoteChoice::IbgdaNic),
                pes(RemoteChoice::Proxy)
            )),
        ));
    }
    if only(RemoteChoice::IbgdaNic, RemoteChoice::IbgdaEmulated) {
        return Err(Error::new(format!(
            "{var}=ibgda: a usable NIC on {}, none on {} (which would use the emulated NIC, and it cannot talk to a real one): \
             make the NICs usable everywhere (rshmrun --diagnose says why not) or set {var}=proxy",
            pes(RemoteChoice::IbgdaNic),
            pes(RemoteChoice::IbgdaEmulated)
        )));
    }
    let list: Vec<String> = [RemoteChoice::None, RemoteChoice::Proxy, RemoteChoice::IbgdaNic, RemoteChoice::IbgdaEmulated]
        .into_iter()
        .filter(|&c| choices.contains(&c))
        .map(|c| format!("{}: {}", pes(c), c.describe()))
        .collect();
    Err(Error::new(format!("the PEs chose different remote transports ({}); set {var} the same on every PE", list.join("; "))))
}

/// The constructor of a chosen remote transport.
pub fn factory(c: RemoteChoice) -> Option<RemoteFactory> {
    match c {
        RemoteChoice::None => None,
        RemoteChoice::Proxy => Some(crate::transport::proxy::create),
        RemoteChoice::IbgdaNic => Some(crate::transport::ibgda::create_nic),
        RemoteChoice::IbgdaEmulated => Some(crate::transport::ibgda::create_emulated),
    }
}

/// Which transport reaches each PE: `table[pe]` is the index in `transports` of the first one that
/// reaches `pe` (the p2p transport first, so node-local PEs always go through it), None when none does.
pub fn route_table(npes: usize, transports: &[&dyn Transport]) -> Vec<Option<usize>> {
    (0..npes).map(|pe| transports.iter().position(|t| t.reaches(pe))).collect()
}

/// The verbs library's checks for the decision (without the GPU allocations of the full set), when
/// this build has the `verbs` feature. The full set runs once the choice is IBGDA on a real NIC, at
/// the start of its setup (`ibgda::real`), in the PE's own GPU context and bounded in time; a failure
/// there is agreed job-wide and falls back to the proxy (or stops the job when IBGDA was asked for).
fn verbs_quick() -> Option<VerbsChecks> {
    #[cfg(feature = "verbs")]
    return Some(super::verbs::quick_checks);
    #[cfg(not(feature = "verbs"))]
    None
}

/// All of the verbs library's checks (`rshmrun --diagnose`), when this build has the `verbs` feature.
fn verbs_full() -> Option<VerbsChecks> {
    #[cfg(feature = "verbs")]
    return Some(super::verbs::diagnose);
    #[cfg(not(feature = "verbs"))]
    None
}

/// Whether a real RDMA NIC is usable for IBGDA by this process: every NIC check of `crate::probe::diagnose`
/// passes (a build without the `verbs` feature never has one), on the devices and ports `hca`
/// (RSHMEM_IB_HCA's value; None: unset) allows. Cheap when no RDMA device exists; asked anew each time
/// (init asks once).
pub fn nic_usable(hca: Option<&str>) -> bool {
    diagnose::usable_with(verbs_quick(), hca)
}

/// What a job with PEs on other nodes would use, for `RSHMEM_REMOTE_TRANSPORT`'s value `value` and
/// whether the real NIC is usable: the last line of `rshmrun --diagnose`.
pub fn transport_check(value: Option<&str>, nic_usable: bool) -> Check {
    const NAME: &str = "remote transport";
    let var = crate::config::env::REMOTE_TRANSPORT;
    match choose_remote(var, value, true, nic_usable) {
        Err(e) => Check::new(NAME, Status::Fail, e.to_string()).with_fix(format!("set {var} to one of {REMOTE_VALUES} (or unset it)")),
        Ok(choice) => {
            let setting = match value {
                None => format!("{var} unset (auto)"),
                Some(v) => format!("{var}={}", v.trim()),
            };
            let auto = parse_remote(value) == Ok(Remote::Auto);
            let why = match choice {
                RemoteChoice::Proxy if auto && !nic_usable => " (no usable NIC: auto picks ibgda only on a NIC that passes every check above)",
                _ => "",
            };
            Check::new(NAME, Status::Info, format!("a job with PEs on other nodes and {setting} uses {}{why}; PEs of one node always use p2p", choice.describe()))
        }
    }
}

/// Every check of `rshmrun --diagnose` on this host, with the environment `vars` (rshmrun's): the
/// probes' lines, the proxy provider's line, then the transport line. A bad value of a variable is a
/// FAIL line naming it.
pub fn report(vars: &Vars) -> Vec<Check> {
    let text = |name: &str| vars.lookup(name).map(|(_, v)| v.to_string());
    let remote = text(crate::config::env::REMOTE_TRANSPORT);
    let mut lines = diagnose::report_with(vars, verbs_full(), &|usable| transport_check(remote.as_deref(), usable));
    let p = provider::provider_check(text(crate::config::env::PROXY_PROVIDER).as_deref(), &provider::verbs_usable(text(crate::config::env::IB_HCA).as_deref()));
    lines.insert(lines.len().saturating_sub(1), p);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::backend::Backend;
    use crate::transport::p2p::P2p;

    /// A remote transport that reaches every PE it is told to (the shape a proxy will have: every PE of
    /// the job). Only the table logic is under test here.
    struct Everyone;
    impl Transport for Everyone {
        fn name(&self) -> &'static str {
            "everyone"
        }
        fn reaches(&self, _pe: usize) -> bool {
            true
        }
        unsafe fn putmem(&self, _: &dyn Backend, _: *mut u8, _: *const u8, _: usize, _: usize) -> Result<()> {
            unreachable!()
        }
        unsafe fn getmem(&self, _: &dyn Backend, _: *mut u8, _: *const u8, _: usize, _: usize) -> Result<()> {
            unreachable!()
        }
    }

    #[test]
    fn node_local_pes_go_through_p2p_others_through_the_remote_transport_or_none() {
        // PEs 0..4 on this node (mapped at some addresses), 4..8 on another.
        let bases: Vec<usize> = (0..8).map(|pe| if pe < 4 { 0x1000_0000 * (pe + 1) } else { 0 }).collect();
        let p2p = P2p::new(bases.clone());
        for (pe, &base) in bases.iter().enumerate() {
            assert_eq!(p2p.peer_base(pe), base);
            assert_eq!(p2p.reaches(pe), pe < 4);
        }
        assert!(!p2p.reaches(8), "a PE past the job must not be reached");
        let only = route_table(8, &[&p2p]);
        assert_eq!(only, vec![Some(0), Some(0), Some(0), Some(0), None, None, None, None]);
        let with_remote = route_table(8, &[&p2p, &Everyone]);
        assert_eq!(with_remote, vec![Some(0), Some(0), Some(0), Some(0), Some(1), Some(1), Some(1), Some(1)]);
        // A single PE, and the other node first in the job.
        assert_eq!(route_table(1, &[&P2p::new(vec![0x1000])]), vec![Some(0)]);
        let p = P2p::new(vec![0, 0, 0x2000, 0x3000]);
        assert_eq!(route_table(4, &[&p, &Everyone]), vec![Some(1), Some(1), Some(0), Some(0)]);
    }

    #[test]
    fn remote_transport_values() {
        assert_eq!(parse_remote(None), Ok(Remote::Auto));
        assert_eq!(parse_remote(Some(" Auto")), Ok(Remote::Auto));
        assert_eq!(parse_remote(Some("none")), Ok(Remote::None));
        assert_eq!(parse_remote(Some(" Proxy ")), Ok(Remote::Proxy));
        assert_eq!(parse_remote(Some("IBGDA")), Ok(Remote::Ibgda));
        for bad in ["", "tcp", "p2p", "proxy,ibgda", "nonee"] {
            let e = parse_remote(Some(bad)).unwrap_err();
            assert!(e.contains(REMOTE_VALUES) && e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
        }
        const V: &str = "RSHMEM_REMOTE_TRANSPORT";
        // The registry under init's configuration (no NIC here: RSHMEM_IB_HCA names none).
        let by_name = |value: Option<&str>, spans: bool| {
            let mut vars = vec![("RSHMEM_IB_HCA", "no-such-hca0")];
            vars.extend(value.map(|v| (V, v)));
            let (cfg, _) = Config::from_vars(Vars::from_pairs(vars)).unwrap();
            factory(local_choice(&cfg, spans, 0))
        };
        // auto (unset): the proxy exactly when the job spans nodes.
        assert!(by_name(None, false).is_none());
        assert!(by_name(None, true).is_some());
        assert!(by_name(Some("auto"), true).is_some());
        assert!(by_name(Some("none"), true).is_none());
        assert!(by_name(Some("proxy"), false).is_none(), "no proxy for a single-node job");
        assert!(by_name(Some("proxy"), true).is_some(), "proxy is built");
        assert!(by_name(Some(" PROXY "), true).is_some());
        assert!(by_name(Some("ibgda"), true).is_some(), "ibgda is built (emulated without a NIC)");
        // The choice itself, with and without a usable NIC.
        assert_eq!(choose_remote(V, None, false, true).unwrap(), RemoteChoice::None);
        assert_eq!(choose_remote(V, None, true, false).unwrap(), RemoteChoice::Proxy);
        assert_eq!(choose_remote(V, None, true, true).unwrap(), RemoteChoice::IbgdaNic);
        assert_eq!(choose_remote(V, Some("ibgda"), true, false).unwrap(), RemoteChoice::IbgdaEmulated);
        assert_eq!(choose_remote(V, Some("ibgda"), false, false).unwrap(), RemoteChoice::IbgdaEmulated);
        assert_eq!(choose_remote(V, Some("ibgda"), true, true).unwrap(), RemoteChoice::IbgdaNic);
        assert_eq!(choose_remote(V, Some("proxy"), true, true).unwrap(), RemoteChoice::Proxy);
        assert_eq!(choose_remote(V, Some("proxy"), false, false).unwrap(), RemoteChoice::None);
        assert_eq!(choose_remote(V, Some("none"), true, true).unwrap(), RemoteChoice::None);
        let e = choose_remote(V, Some("tcp"), true, false).err().unwrap().to_string();
        assert!(e.starts_with(V) && e.contains("\"tcp\""), "{e}");
        let e = Config::from_vars(Vars::from_pairs([(V, "tcp")])).err().unwrap().to_string();
        assert!(e.starts_with(V) && e.contains("\"tcp\""), "{e}");
    }


    #[test]
    fn the_transport_line() {
        let c = transport_check(None, false);
        assert_eq!(c.status, Status::Info);
        assert!(c.detail.contains("RSHMEM_REMOTE_TRANSPORT unset (auto) uses ") && c.detail.contains(RemoteChoice::Proxy.describe()), "{}", c.line());
        assert!(c.detail.contains("no usable NIC"), "{}", c.line());
        assert!(!transport_check(Some("proxy"), false).detail.contains("no usable NIC"));
        let c = transport_check(Some("ibgda"), false);
        assert!(c.detail.contains("RSHMEM_REMOTE_TRANSPORT=ibgda uses ") && c.detail.contains(RemoteChoice::IbgdaEmulated.describe()), "{}", c.line());
        assert!(transport_check(Some("ibgda"), true).detail.contains(RemoteChoice::IbgdaNic.describe()));
        assert!(transport_check(None, true).detail.contains(RemoteChoice::IbgdaNic.describe()));
        assert!(transport_check(Some("none"), true).detail.contains(RemoteChoice::None.describe()));
        let c = transport_check(Some("tcp"), false);
        assert_eq!(c.status, Status::Fail);
        assert!(c.line().contains("\"tcp\" is not a transport") && c.line().contains("auto, none, proxy or ibgda"), "{}", c.line());
    }

    #[test]
    fn nic_usable_is_false_without_a_nic_here_and_follows_the_hook() {
        let here = std::fs::read_dir("/sys/class/infiniband").map(|d| d.count()).unwrap_or(0);
        if here == 0 || !cfg!(feature = "verbs") {
            assert!(!nic_usable(None));
        }
        assert!(!nic_usable(Some("no-such-hca0")), "RSHMEM_IB_HCA allows no device here");
        let (cfg, _) = Config::from_vars(Vars::from_pairs([(NIC_HOOK, "1,2"), ("RSHMEM_IB_HCA", "no-such-hca0")])).unwrap();
        assert_eq!((nic_usable_on(&cfg, 0), nic_usable_on(&cfg, 1), nic_usable_on(&cfg, 2)), (false, true, true));
    }

    /// A port of [`fake_sysfs`]: (state, link layer, LID, RoCE v2 GID or "").
    type FakePort<'a> = (&'a str, &'a str, &'a str, &'a str);

    /// A synthetic sysfs tree with RDMA devices: (name, driver, ports).
    fn fake_sysfs(what: &str, devices: &[(&str, &str, &[FakePort])]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("rshmem-select-{}-{what}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let w = |rel: String, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{text}\n")).unwrap();
        };
        for (name, driver, ports) in devices {
            let dir = format!("sys/class/infiniband/{name}");
            w(format!("sys/bus/pci/drivers/{driver}/bind"), "");
            std::fs::create_dir_all(root.join(&dir).join("device")).unwrap();
            std::os::unix::fs::symlink(root.join(format!("sys/bus/pci/drivers/{driver}")), root.join(&dir).join("device/driver")).unwrap();
            for (i, (state, layer, lid, gid)) in ports.iter().enumerate() {
                let pd = format!("{dir}/ports/{}", i + 1);
                w(format!("{pd}/state"), state);
                w(format!("{pd}/phys_state"), "5: LinkUp");
                w(format!("{pd}/link_layer"), layer);
                w(format!("{pd}/lid"), lid);
                w(format!("{pd}/gids/0"), if gid.is_empty() { "fe80:0000:0000:0000:0000:0000:0000:0001" } else { gid });
                if !gid.is_empty() {
                    w(format!("{pd}/gid_attrs/types/0"), "RoCE v2");
                }
            }
        }
        root
    }

    /// The proxy's provider on synthetic hosts: verbs on any vendor's device with an active, addressed
    /// port (where IBGDA needs mlx5); TCP with the reason otherwise.
    #[test]
    fn the_proxy_runs_over_verbs_on_any_active_rdma_port() {
        use crate::transport::proxy::provider::verbs_usable_at;
        let ib_active: &[FakePort] = &[("4: ACTIVE", "InfiniBand", "0x12", "")];
        let root = fake_sysfs("ib", &[("mlx5_0", "mlx5_core", ib_active)]);
        assert_eq!(verbs_usable_at(&root, None, true), Ok("mlx5_0:1 (InfiniBand)".into()));
        let e = verbs_usable_at(&root, None, false).unwrap_err();
        assert!(e.contains("lacks the `verbs` feature"), "{e}");
        // Another vendor's NIC: no IBGDA (mlx5 only), but host verbs.
        let roce: &[FakePort] = &[("1: DOWN", "Ethernet", "0x0", "0000:0000:0000:0000:0000:ffff:0a00:0002"), ("4: ACTIVE", "Ethernet", "0x0", "0000:0000:0000:0000:0000:ffff:0a00:0003")];
        let root = fake_sysfs("irdma", &[("irdma0", "irdma", roce)]);
        assert_eq!(verbs_usable_at(&root, None, true), Ok("irdma0:2 (Ethernet)".into()));
        assert!(!crate::probe::report::usable_at(&root, None, None), "IBGDA is not usable there");
        // RSHMEM_IB_HCA leaves the active port out.
        let e = verbs_usable_at(&root, Some("irdma0:1"), true).unwrap_err();
        assert!(e.contains("no RDMA port is usable") && e.contains("irdma0:1"), "{e}");
        let e = verbs_usable_at(&root, Some("mlx5_9"), true).unwrap_err();
        assert!(e.contains("no port of irdma0 is allowed by RSHMEM_IB_HCA"), "{e}");
        // A port that is down, an InfiniBand port without a LID, a RoCE port without a RoCE v2 GID.
        let bad: &[FakePort] = &[("1: DOWN", "InfiniBand", "0x5", ""), ("4: ACTIVE", "InfiniBand", "0x0", ""), ("4: ACTIVE", "Ethernet", "0x0", "")];
        let root = fake_sysfs("bad", &[("mlx5_1", "mlx5_core", bad)]);
        let e = verbs_usable_at(&root, None, true).unwrap_err();
        assert!(e.contains("mlx5_1:1") && e.contains("mlx5_1:2") && e.contains("mlx5_1:3"), "{e}");
        let root = fake_sysfs("none", &[]);
        assert_eq!(verbs_usable_at(&root, None, true), Err("no RDMA device (/sys/class/infiniband is empty or missing)".into()));
        for w in ["ib", "irdma", "bad", "none"] {
            let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("rshmem-select-{}-{w}", std::process::id())));
        }
    }

    /// The agreement: the same choice stays; under auto a mix of NIC and proxy is the proxy (named);
    /// ibgda asked for with and without a NIC, or different values per PE, are errors naming the PEs.
    #[test]
    fn the_job_agrees_on_one_remote_transport() {
        const V: &str = "RSHMEM_REMOTE_TRANSPORT";
        use RemoteChoice as R;
        assert_eq!(decide(V, false, &[R::Proxy, R::Proxy]).unwrap(), (R::Proxy, Option::None));
        assert_eq!(decide(V, false, &[R::IbgdaNic, R::IbgdaNic]).unwrap().0, R::IbgdaNic);
        let (c, note) = decide(V, false, &[R::IbgdaNic, R::Proxy, R::Proxy, R::IbgdaNic]).unwrap();
        assert_eq!(c, R::Proxy);
        let note = note.unwrap();
        assert!(note.contains("a usable NIC on PEs 0, 3, none on PEs 1, 2"), "{note}");
        let e = decide(V, true, &[R::IbgdaNic, R::IbgdaEmulated]).unwrap_err().to_string();
        assert!(e.contains("a usable NIC on PE 0, none on PE 1") && e.contains("=proxy"), "{e}");
        let e = decide(V, false, &[R::Proxy, R::None]).unwrap_err().to_string();
        assert!(e.contains("different remote transports") && e.contains("the same on every PE"), "{e}");
        for c in [R::None, R::Proxy, R::IbgdaNic, R::IbgdaEmulated] {
            assert_eq!(R::from_code(c.code()), Some(c));
        }
        assert_eq!(R::from_code(9), Option::None);
    }
}
