//! The configuration of one init: the process environment read once ([`Vars`]), then every variable of
//! the table (`config::env::VARS`) checked and parsed into typed fields ([`Config`]). The runtime reads
//! it at the start of init and hands it down (the platform's constructor, the host synchronization,
//! the transports through `RemoteSetup`, the log level); nothing below reads a variable of its own, and
//! nothing keeps a value past the runtime that read it, so the next init reads the environment again.

use crate::config::env::{self, IbgdaEmulator, ProxyProvider};
use crate::config::parse::{parse_hca_list, parse_remote, HcaList, Remote};
use crate::error::{Error, Result};
use rshmem_ibgda::emu::FaultConfig;
use std::collections::BTreeMap;
use std::time::Duration;

/// The process environment as read at one moment: every variable's name and value (a value that is not
/// UTF-8 kept lossily, so that a check can name it). [`Vars::from_process`] is the one place that reads
/// the environment for the runtime.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vars {
    map: BTreeMap<String, String>,
}

impl Vars {
    /// This process's environment, now.
    pub fn from_process() -> Vars {
        Vars {
            map: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
                .collect(),
        }
    }

    /// The variables `pairs` and no others (tests, and programs that configure rshmem themselves).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Vars {
        Vars { map: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect() }
    }

    /// The value of exactly `name` (an empty value included), if set.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    /// `name`'s value, else (when `name` has one) its NVSHMEM alias's, with the name that was set (for
    /// messages): the rshmem name wins when both are set. An empty value is returned as set.
    pub fn lookup<'a>(&'a self, name: &'a str) -> Option<(&'a str, &'a str)> {
        if let Some(v) = self.raw(name) {
            return Some((name, v));
        }
        let alias = env::ALIASES.iter().find(|(_, r)| *r == name).map(|(a, _)| *a)?;
        self.raw(alias).map(|v| (alias, v))
    }

    /// `name`'s value (else its alias's) as text, None when unset or empty: the lookup the bootstrap's
    /// parsers take (`bootstrap::parse_launch_env`). Init refuses an empty value of a variable of the
    /// table before any of them runs.
    pub fn get(&self, name: &str) -> Option<String> {
        self.lookup(name).map(|(_, v)| v.to_string()).filter(|v| !v.is_empty())
    }

    /// Every (name, value).
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// The backend `RSHMEM_BACKEND` asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BackendKind {
    /// CUDA when a GPU is usable, else the CPU backend.
    Auto,
    /// The CPU backend: PEs are host processes, device code runs on the CPU.
    Cpu,
    /// The CUDA backend; init fails without a usable GPU.
    Cuda,
}

/// The log level `RSHMEM_DEBUG` sets, most severe first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum LogLevel {
    /// Failures only.
    Error = 0,
    /// Failures and warnings (the default).
    Warn = 1,
    /// What the runtime chose and found.
    Info = 2,
    /// Details for debugging rshmem itself (`debug`, or `trace`, which also logs every proxy request).
    Debug = 3,
}

/// The network settings the bootstrap, the proxy and `rshmrun --diagnose` read (each trimmed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetEnv {
    /// RSHMEM_BOOTSTRAP.
    pub bootstrap: Option<String>,
    /// RSHMEM_BOOTSTRAP_IFNAME.
    pub bootstrap_ifname: Option<String>,
    /// RSHMEM_PROXY_IFNAME.
    pub proxy_ifname: Option<String>,
}

impl NetEnv {
    /// The settings among `vars` (empty values as unset: `rshmrun --diagnose` reports them).
    pub fn from_vars(vars: &Vars) -> NetEnv {
        let get = |n: &str| vars.get(n).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        NetEnv { bootstrap: get(env::BOOTSTRAP), bootstrap_ifname: get(env::BOOTSTRAP_IFNAME), proxy_ifname: get(env::PROXY_IFNAME) }
    }
}

/// The proxy transport's settings (`RSHMEM_PROXY_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyConfig {
    /// RSHMEM_PROXY_SLOTS: slots of the request ring.
    pub slots: usize,
    /// RSHMEM_PROXY_LANES: lanes between two PEs; None for auto.
    pub lanes: Option<usize>,
    /// RSHMEM_PROXY_RING: bytes of each lane's receive and reply rings.
    pub ring: u64,
    /// RSHMEM_PROXY_LANE_BYTES: heap bytes one lane serves before the next.
    pub lane_bytes: u64,
    /// RSHMEM_PROXY_THREAD_STAGE: the largest single-thread put the thread stages itself (bytes).
    pub thread_stage: u64,
    /// RSHMEM_PROXY_GROUP_FENCE: every thread of a staged group put fences (`every`), not one (`one`).
    pub group_fence_every: bool,
    /// RSHMEM_PROXY_SPIN: Some(on/off), None for auto ([`ProxyConfig::busy_poll`]).
    pub spin: Option<bool>,
    /// RSHMEM_PROXY_STATS: every PE prints its proxy statistics at finalize.
    pub stats: bool,
    /// RSHMEM_PROXY_PROVIDER: how the proxy reaches its peers.
    pub provider: ProxyProvider,
}

impl ProxyConfig {
    /// Whether the proxy's threads poll briefly before they sleep: RSHMEM_PROXY_SPIN, or under auto
    /// when this process may use at least 8 CPUs.
    pub fn busy_poll(&self) -> bool {
        self.spin.unwrap_or_else(|| std::thread::available_parallelism().is_ok_and(|n| n.get() >= 8))
    }
}

/// The IBGDA transport's settings (`RSHMEM_IBGDA_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IbgdaConfig {
    /// RSHMEM_IBGDA_QPS_PER_PE.
    pub qps_per_pe: u32,
    /// RSHMEM_IBGDA_QP_DEPTH, as log2 of the WQEBBs.
    pub log_sq: u32,
    /// RSHMEM_IBGDA_FAULTS, parsed.
    pub faults: FaultConfig,
    /// RSHMEM_IBGDA_FAULTS as set (None: unset), for messages.
    pub faults_text: Option<String>,
    /// RSHMEM_IBGDA_EMULATOR.
    pub emulator: IbgdaEmulator,
    /// RSHMEM_IBGDA_RET_SLOTS=device.
    pub ret_in_device: bool,
}

/// PEs a test hook names: `all`, or a comma-separated list of PE numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeSet {
    /// Every PE.
    All,
    /// These PEs.
    List(Vec<usize>),
}

impl PeSet {
    /// Parses a hook's value; `Err` says what is expected.
    pub fn parse(v: &str) -> std::result::Result<PeSet, String> {
        if v.trim() == "all" {
            return Ok(PeSet::All);
        }
        v.split(',')
            .map(|p| p.trim().parse::<usize>().map_err(|_| format!("expected all or a comma-separated list of PE numbers ({:?} is not one)", p.trim())))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(PeSet::List)
    }
    /// Whether the set names PE `pe`.
    pub fn names(&self, pe: usize) -> bool {
        match self {
            PeSet::All => true,
            PeSet::List(l) => l.contains(&pe),
        }
    }
}

/// The test hooks (`RSHMEM_TEST_*` variables the runtime reads: they make chosen PEs believe something
/// of their NIC, so that the agreement and the fallbacks run where no NIC is).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestHooks {
    /// `RSHMEM_TEST_NIC_USABLE` (`transport::select::NIC_HOOK`): these PEs believe their NIC usable for IBGDA.
    pub nic_usable: Option<PeSet>,
    /// `RSHMEM_TEST_VERBS_USABLE` (`transport::proxy::provider::VERBS_HOOK`): these PEs believe their
    /// NIC usable for host verbs.
    pub verbs_usable: Option<PeSet>,
}

/// The name of the IBGDA test hook (`TestHooks::nic_usable`).
pub const NIC_HOOK: &str = "RSHMEM_TEST_NIC_USABLE";
/// The name of the proxy-over-verbs test hook (`TestHooks::verbs_usable`).
pub const VERBS_HOOK: &str = "RSHMEM_TEST_VERBS_USABLE";

/// Every setting of one init, checked and typed. Made by [`Config::from_env`] (or
/// [`Config::from_vars`]) at the start of init, then handed to the layers that need it.
#[derive(Clone, Debug)]
pub struct Config {
    /// The environment it was read from (the bootstrap's launcher variables are looked up here).
    pub vars: Vars,
    /// RSHMEM_BACKEND.
    pub backend: BackendKind,
    /// RSHMEM_SYMMETRIC_SIZE (or NVSHMEM_SYMMETRIC_SIZE): bytes of room for allocations, at least 1.
    pub symmetric_size: usize,
    /// The name the size was set under (RSHMEM_SYMMETRIC_SIZE when unset), for messages.
    pub symmetric_size_var: &'static str,
    /// RSHMEM_ONSTREAM_GRID_MIN (bytes).
    pub onstream_grid_min: usize,
    /// RSHMEM_CUMEM_GRANULE (bytes).
    pub cumem_granule: usize,
    /// RSHMEM_DEBUG's level.
    pub log_level: LogLevel,
    /// RSHMEM_DEBUG=trace: every proxy request and frame is logged.
    pub trace: bool,
    /// RSHMEM_WAIT_TIMEOUT; None: wait forever.
    pub wait_timeout: Option<Duration>,
    /// RSHMEM_BOOTSTRAP_TIMEOUT.
    pub bootstrap_timeout: Duration,
    /// RSHMEM_NODE_ID: the simulated node `rshmrun --nodes` put this PE on (part of its host identity
    /// at the bootstrap); None when unset, as under mpirun/srun.
    pub node_id: Option<usize>,
    /// RSHMEM_STATUS_FD: the job status board rshmrun handed down, if any.
    pub status_fd: Option<i32>,
    /// RSHMEM_BOOTSTRAP, RSHMEM_BOOTSTRAP_IFNAME, RSHMEM_PROXY_IFNAME.
    pub net: NetEnv,
    /// RSHMEM_REMOTE_TRANSPORT, parsed (the one parse of it at init).
    pub remote: Remote,
    /// RSHMEM_IB_HCA as set (None: unset), for the probes and messages.
    pub ib_hca_text: Option<String>,
    /// RSHMEM_IB_HCA, parsed (every device when unset).
    pub ib_hca: HcaList,
    /// The proxy transport's settings.
    pub proxy: ProxyConfig,
    /// The IBGDA transport's settings.
    pub ibgda: IbgdaConfig,
    /// The test hooks.
    pub hooks: TestHooks,
}

impl Config {
    /// Reads this process's environment once ([`Vars::from_process`]) and checks it ([`Config::from_vars`]).
    pub fn from_env() -> Result<(Config, Vec<String>)> {
        Config::from_vars(Vars::from_process())
    }

    /// Checks every variable of the table that `vars` sets (the first bad or empty one is the error,
    /// naming the variable as it was set and its value) and makes the typed settings (the table's
    /// default where a variable is unset). Also returns one warning per unknown `RSHMEM_*` name.
    pub fn from_vars(vars: Vars) -> Result<(Config, Vec<String>)> {
        let pairs: Vec<(String, String)> = vars.pairs().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let warnings = env::validate_vars(&pairs)?;
        let symmetric_size_var = vars.lookup(env::SYMMETRIC_SIZE).map_or(env::SYMMETRIC_SIZE, |(n, _)| static_name(n));
        let symmetric_size = typed(&vars, env::SYMMETRIC_SIZE, |v| env::parse_size(v).ok_or_else(|| "not a size".to_string()))?;
        if symmetric_size == 0 {
            let v = vars.lookup(env::SYMMETRIC_SIZE).map_or("0", |(_, v)| v);
            return Err(Error::new(format!("{symmetric_size_var}={v}: the symmetric heap needs at least one byte")));
        }
        let symmetric_size = usize::try_from(symmetric_size)
            .map_err(|_| Error::new(format!("{symmetric_size_var}={symmetric_size} is too large for this machine's address space")))?;
        let size = |name: &'static str| typed(&vars, name, |v| env::parse_size(v).map(|n| n as usize).ok_or_else(|| "not a size".to_string()));
        let debug = vars.lookup(env::DEBUG).map(|(_, v)| v.trim().to_ascii_lowercase());
        let config = Config {
            backend: typed(&vars, env::BACKEND, |v| match env::parse_backend(v) {
                Some("cpu") => Ok(BackendKind::Cpu),
                Some("cuda") => Ok(BackendKind::Cuda),
                Some(_) => Ok(BackendKind::Auto),
                None => Err("expected auto, cpu or cuda".to_string()),
            })?,
            symmetric_size,
            symmetric_size_var,
            onstream_grid_min: size(env::ONSTREAM_GRID_MIN)?,
            cumem_granule: size(env::CUMEM_GRANULE)?,
            log_level: typed(&vars, env::DEBUG, |v| match env::parse_level(v) {
                Some(0) => Ok(LogLevel::Error),
                Some(1) => Ok(LogLevel::Warn),
                Some(2) => Ok(LogLevel::Info),
                Some(_) => Ok(LogLevel::Debug),
                None => Err("expected error, warn, info or debug".to_string()),
            })?,
            trace: debug.as_deref() == Some("trace"),
            wait_timeout: typed(&vars, env::WAIT_TIMEOUT, env::parse_wait_secs)?,
            bootstrap_timeout: typed(&vars, env::BOOTSTRAP_TIMEOUT, env::parse_positive_secs)?,
            node_id: optional(&vars, env::NODE_ID, |v| v.trim().parse::<usize>().map_err(|_| "expected a non-negative integer".to_string()))?,
            status_fd: optional(&vars, env::STATUS_FD, |v| v.trim().parse::<i32>().ok().filter(|&fd| fd >= 0).ok_or_else(|| "expected a file descriptor number".to_string()))?,
            net: NetEnv::from_vars(&vars),
            remote: typed(&vars, env::REMOTE_TRANSPORT, |v| parse_remote(Some(v)))?,
            ib_hca_text: vars.get(env::IB_HCA),
            ib_hca: optional(&vars, env::IB_HCA, parse_hca_list)?.unwrap_or_default(),
            proxy: ProxyConfig {
                slots: typed(&vars, env::PROXY_SLOTS, env::parse_proxy_slots)?,
                lanes: typed(&vars, env::PROXY_LANES, env::parse_proxy_lanes)?,
                ring: typed(&vars, env::PROXY_RING, env::parse_proxy_ring)?,
                lane_bytes: typed(&vars, env::PROXY_LANE_BYTES, env::parse_lane_bytes)?,
                thread_stage: typed(&vars, env::PROXY_THREAD_STAGE, env::parse_thread_stage)?,
                group_fence_every: typed(&vars, env::PROXY_GROUP_FENCE, env::parse_group_fence)?,
                spin: typed(&vars, env::PROXY_SPIN, env::parse_proxy_spin)?,
                stats: typed(&vars, env::PROXY_STATS, |v| env::parse_switch(v).ok_or_else(|| "expected on or off".to_string()))?,
                provider: typed(&vars, env::PROXY_PROVIDER, env::parse_proxy_provider)?,
            },
            ibgda: IbgdaConfig {
                qps_per_pe: typed(&vars, env::IBGDA_QPS_PER_PE, env::parse_ibgda_qps)?,
                log_sq: typed(&vars, env::IBGDA_QP_DEPTH, env::parse_ibgda_depth)?,
                faults: typed(&vars, env::IBGDA_FAULTS, FaultConfig::parse)?,
                faults_text: vars.get(env::IBGDA_FAULTS),
                emulator: typed(&vars, env::IBGDA_EMULATOR, env::parse_ibgda_emulator)?,
                ret_in_device: typed(&vars, env::IBGDA_RET_SLOTS, env::parse_ibgda_ret_slots)?,
            },
            hooks: TestHooks { nic_usable: optional(&vars, NIC_HOOK, PeSet::parse)?, verbs_usable: optional(&vars, VERBS_HOOK, PeSet::parse)? },
            vars,
        };
        Ok((config, warnings))
    }
}

/// The `&'static` spelling of a name of the table or an alias (the names a lookup returns).
fn static_name(n: &str) -> &'static str {
    env::VARS.iter().map(|v| v.name).chain(env::ALIASES.iter().map(|(a, _)| *a)).find(|&k| k == n).unwrap_or(env::SYMMETRIC_SIZE)
}

/// Variable `name` of the table parsed: its value (or its alias's) when set, else the table's default.
/// A bad or empty value is an error naming the variable as it was set.
fn typed<T>(vars: &Vars, name: &'static str, parse: impl Fn(&str) -> std::result::Result<T, String>) -> Result<T> {
    match vars.lookup(name) {
        Some(_) => Ok(optional(vars, name, parse)?.expect("set")),
        None => {
            let default = env::VARS.iter().find(|v| v.name == name).map_or("", |v| v.default);
            parse(default).map_err(|e| Error::new(format!("{name}: the default {default:?} does not parse ({e}); this is a bug in rshmem")))
        }
    }
}

/// Variable `name` parsed when set (None when unset); a bad or empty value is an error naming it.
fn optional<T>(vars: &Vars, name: &'static str, parse: impl Fn(&str) -> std::result::Result<T, String>) -> Result<Option<T>> {
    match vars.lookup(name) {
        None => Ok(None),
        Some((set, v)) if v.trim().is_empty() => Err(Error::new(format!("{set} is set but empty: give it a value or unset it"))),
        Some((set, v)) => parse(v).map(Some).map_err(|why| Error::new(format!("{set}={v:?} is not valid: {why}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Config> {
        Config::from_vars(Vars::from_pairs(pairs.iter().copied())).map(|(c, _)| c)
    }

    #[test]
    fn defaults_come_from_the_table() {
        let c = config(&[]).unwrap();
        assert_eq!(c.backend, BackendKind::Auto);
        assert_eq!((c.symmetric_size, c.symmetric_size_var), (1 << 30, env::SYMMETRIC_SIZE));
        assert_eq!(c.cumem_granule, 512 << 20);
        assert_eq!((c.log_level, c.trace), (LogLevel::Warn, false));
        assert_eq!(c.wait_timeout, None);
        assert_eq!((c.bootstrap_timeout, c.node_id, &c.net), (Duration::from_secs(30), None, &NetEnv::default()));
        assert_eq!(c.remote, Remote::Auto);
        assert_eq!(c.proxy, ProxyConfig { slots: 4096, lanes: None, ring: 4 << 20, lane_bytes: 16 << 10, thread_stage: 4096, group_fence_every: false, spin: None, stats: false, provider: ProxyProvider::Auto });
        assert_eq!((c.ibgda.qps_per_pe, c.ibgda.log_sq, c.ibgda.emulator, c.ibgda.ret_in_device), (2, 9, IbgdaEmulator::Full, false));
        assert_eq!(c.ibgda.faults, FaultConfig::default());
        assert_eq!(c.hooks, TestHooks::default());
    }

    #[test]
    fn values_are_typed_once() {
        let c = config(&[
            ("RSHMEM_DEBUG", "trace"),
            ("RSHMEM_WAIT_TIMEOUT", "2.5"),
            ("RSHMEM_REMOTE_TRANSPORT", " Proxy "),
            ("RSHMEM_PROXY_SPIN", "off"),
            ("RSHMEM_PROXY_STATS", "on"),
            ("RSHMEM_PROXY_LANES", "3"),
            ("RSHMEM_IB_HCA", "^mlx5_2"),
            ("RSHMEM_TEST_NIC_USABLE", "1, 3"),
            ("NVSHMEM_SYMMETRIC_SIZE", "96m"),
            ("RSHMEM_BOOTSTRAP_TIMEOUT", "0.5"),
            ("RSHMEM_NODE_ID", " 3 "),
            ("RSHMEM_BOOTSTRAP_IFNAME", "lo"),
        ])
        .unwrap();
        assert_eq!((c.log_level, c.trace), (LogLevel::Debug, true));
        assert_eq!(c.wait_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(c.remote, Remote::Proxy);
        assert_eq!((c.proxy.spin, c.proxy.stats, c.proxy.lanes), (Some(false), true, Some(3)));
        assert!(!c.proxy.busy_poll());
        assert!(c.ib_hca.exclude && !c.ib_hca.allows_device("mlx5_2"));
        assert_eq!(c.hooks.nic_usable, Some(PeSet::List(vec![1, 3])));
        assert_eq!((c.symmetric_size, c.symmetric_size_var), (96 << 20, "NVSHMEM_SYMMETRIC_SIZE"));
        // What the bootstrap receives (it reads no variable of its own).
        assert_eq!((c.bootstrap_timeout, c.node_id), (Duration::from_millis(500), Some(3)));
        assert_eq!(c.net.bootstrap_ifname.as_deref(), Some("lo"));
    }

    #[test]
    fn bad_and_empty_values_are_errors_naming_the_variable_as_set() {
        for (name, bad, want) in [
            ("NVSHMEM_SYMMETRIC_SIZE", "0", "NVSHMEM_SYMMETRIC_SIZE=0: the symmetric heap needs at least one byte"),
            ("RSHMEM_SYMMETRIC_SIZE", "0", "RSHMEM_SYMMETRIC_SIZE=0: the symmetric heap needs at least one byte"),
            ("RSHMEM_DEBUG", "", "RSHMEM_DEBUG is set but empty"),
            ("NVSHMEM_SYMMETRIC_SIZE", "", "NVSHMEM_SYMMETRIC_SIZE is set but empty"),
            ("RSHMEM_PROXY_SPIN", "sometimes", "RSHMEM_PROXY_SPIN=\"sometimes\" is not valid"),
            ("RSHMEM_TEST_VERBS_USABLE", "x", "RSHMEM_TEST_VERBS_USABLE=\"x\" is not valid"),
            ("RSHMEM_TEST_NIC_USABLE", "", "RSHMEM_TEST_NIC_USABLE is set but empty"),
            ("RSHMEM_NODE_ID", "node1", "RSHMEM_NODE_ID=\"node1\" is not valid: expected a non-negative integer"),
            ("RSHMEM_NODE_ID", " ", "RSHMEM_NODE_ID is set but empty"),
            ("RSHMEM_BOOTSTRAP_TIMEOUT", "0", "RSHMEM_BOOTSTRAP_TIMEOUT=\"0\" is not valid: expected a positive number of seconds"),
            ("RSHMEM_BOOTSTRAP_IFNAME", "", "RSHMEM_BOOTSTRAP_IFNAME is set but empty"),
        ] {
            let e = config(&[(name, bad)]).expect_err(name).to_string();
            assert!(e.contains(want), "{name}={bad:?}: {e}");
        }
    }

    #[test]
    fn pe_sets() {
        assert!(PeSet::parse(" all ").unwrap().names(7));
        let l = PeSet::parse(" 1, 3 ").unwrap();
        assert_eq!((l.names(1), l.names(2), l.names(3)), (true, false, true));
        assert!(PeSet::parse("1,,2").is_err());
    }
}
