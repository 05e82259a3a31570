//! TCP bootstrap: all-gather, broadcast and barrier of byte buffers among the PEs of a job.
//!
//! A star through PE 0. PE 0 listens (on the socket rshmrun handed down in RSHMEM_BOOTSTRAP_FD, on
//! RSHMEM_BOOTSTRAP's address, or on the listener `get_unique_id` made); every other PE connects,
//! retrying until PE 0 listens or RSHMEM_BOOTSTRAP_TIMEOUT runs out, and says hello: magic, protocol
//! version, a random nonce, PE number, PE count, host identity and the launcher's job identity. PE 0
//! answers with a challenge that proves it knows the job key, and the PE answers with its own proof
//! (auth.rs): the key itself never goes over the wire, and a PE sends nothing that depends on it to a
//! process that did not prove it first. PE 0 refuses connections that cannot prove the key or that
//! name another job identity, telling them why (and keeps waiting for the right ones), fails the job
//! on disagreements among its own PEs (PE count, duplicate PE numbers), and once every PE is in sends
//! everyone the table of host identities, from which each PE derives the PEs of its node.
//!
//! Authentication: every job of several PEs has a secret key. rshmrun and `get_unique_id` draw a
//! random one. Under another launcher, RSHMEM_BOOTSTRAP and RSHMEM_JOB_KEY may be set by hand; where
//! they are not, and the launcher offers a key-value store (PMIx under Open MPI's mpirun and
//! `srun --mpi=pmix`, PMI-1 or PMI-2 on `PMI_FD` under MPICH's hydra and `rshmrun --pmi`: kvs/), PE 0
//! draws the key, listens on a free port of its bootstrap interface, and publishes both there for the
//! other PEs (a variable that is set wins). Otherwise a job of several PEs is refused at init with the
//! fix. PE 0 binds only the address RSHMEM_BOOTSTRAP names (or the interface it chose), never all
//! interfaces.
//!
//! Each collective is one request per PE to PE 0 — the call's name, a per-PE sequence number, the
//! operation and the payload — and one result back. PE 0 checks that all requests name the same
//! collective and reports a mismatch, naming both calls, as soon as one differs. A PE that dies is
//! noticed at once (PE 0 polls every connection) and named in the error every other PE gets. After
//! any failure the bootstrap is poisoned: every later call returns the same error immediately.
//!
//! Messages are framed (wire.rs): a kind byte, a u64 length, the body; lengths are checked against
//! per-kind limits before anything is allocated.

mod auth;
#[cfg(test)]
mod fuzz;
mod kvs;
mod launch;
mod leaf;
mod net;
mod ratelimit;
mod root;
mod setup;
mod wire;

pub use kvs::{find_kvs, pmix_library, KvsFound, LauncherKvs};
pub use launch::{launcher_pe, parse_launch_env, pe_list, LaunchEnv};
pub(crate) use ratelimit::WarnLimiter;
pub(crate) use wire::poll;

/// The IPv4 address this host would use on interface `ifname` (None: the default route's interface,
/// else the first non-loopback one, else loopback), for other listeners (the proxy transport's).
/// `var`: the variable that named `ifname` (an error names it).
pub(crate) fn local_ipv4(ifname: Option<&str>, var: &str) -> Result<std::net::Ipv4Addr> {
    net::choose_ipv4(ifname, var).map(|(ip, _)| ip)
}
/// Resolves a host:port (for other listeners that follow the bootstrap's address).
pub(crate) fn resolve_addr(addr: &str) -> std::io::Result<Vec<std::net::SocketAddr>> {
    net::resolve(addr)
}

use crate::config::{env, Config, Vars};
use crate::error::{Error, Result};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::{Mutex, PoisonError};
use setup::{check_local, Setup};
use wire::{HostId, Op};

/// The opaque id of the unique-id API (like NVSHMEM's): PE 0 makes it with `get_unique_id`, hands it
/// to the other PEs by its own means, and every PE passes it to `Bootstrap::from_unique_id`.
///
/// Layout: "RSUI", version (u16 LE), address family (4), 0, IPv4 address, port (big endian), 0, 0,
/// job key (16 bytes); the rest zero.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UniqueId(pub [u8; 128]);

const UID_MAGIC: [u8; 4] = *b"RSUI";
const UID_VERSION: u16 = 1;

impl UniqueId {
    fn new(addr: SocketAddrV4, key: [u8; 16]) -> UniqueId {
        let mut b = [0u8; 128];
        b[0..4].copy_from_slice(&UID_MAGIC);
        b[4..6].copy_from_slice(&UID_VERSION.to_le_bytes());
        b[6] = 4;
        b[8..12].copy_from_slice(&addr.ip().octets());
        b[12..14].copy_from_slice(&addr.port().to_be_bytes());
        b[16..32].copy_from_slice(&key);
        UniqueId(b)
    }

    /// The rendezvous address and job key the id carries.
    fn decode(&self) -> Result<(SocketAddrV4, [u8; 16])> {
        let b = &self.0;
        if b[0..4] != UID_MAGIC {
            return Err(Error::new(
                "rshmem bootstrap: not an rshmem unique id (bad magic; was it made by get_unique_id and passed on unchanged?)",
            ));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != UID_VERSION || b[6] != 4 {
            return Err(Error::new(format!(
                "rshmem bootstrap: unique id of version {version} (address family {}); this rshmem reads version {UID_VERSION}: mixed rshmem builds?",
                b[6]
            )));
        }
        let ip = Ipv4Addr::new(b[8], b[9], b[10], b[11]);
        let port = u16::from_be_bytes([b[12], b[13]]);
        if port == 0 || ip.is_unspecified() {
            return Err(Error::new("rshmem bootstrap: the unique id holds no address (corrupted id?)"));
        }
        Ok((SocketAddrV4::new(ip, port), b[16..32].try_into().unwrap()))
    }

    /// 256 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        crate::config::parse::encode_hex(&self.0)
    }

    /// Parses [`UniqueId::to_hex`]'s form; an error when it is not 256 hex digits or names no address.
    pub fn from_hex(s: &str) -> Result<UniqueId> {
        let s = s.trim();
        let bytes = crate::config::parse::decode_hex(s).filter(|b| b.len() == 128).ok_or_else(|| {
            Error::new(format!("rshmem bootstrap: a unique id is 256 hex digits (got {} characters)", s.len()))
        })?;
        let id = UniqueId(bytes.try_into().unwrap());
        id.decode()?;
        Ok(id)
    }

    /// The rendezvous address the id names.
    pub fn addr(&self) -> Result<SocketAddrV4> {
        self.decode().map(|(a, _)| a)
    }
}

/// Listeners made by `get_unique_id` in this process, waiting for `from_unique_id` on PE 0.
static UID_LISTENERS: Mutex<Vec<(SocketAddrV4, TcpListener)>> = Mutex::new(Vec::new());

/// Makes a unique id: picks an interface (`cfg`'s RSHMEM_BOOTSTRAP_IFNAME, else the default route's,
/// else the first non-loopback one, else loopback), listens on a free port there, draws a random job
/// key. Called by PE 0 of a program with its own launcher; PE 0 must then call `from_unique_id` in
/// this same process, which uses the listener made here.
pub fn get_unique_id(cfg: &Config) -> Result<UniqueId> {
    let (ip, ifname) = net::choose_ipv4(cfg.net.bootstrap_ifname.as_deref(), env::BOOTSTRAP_IFNAME)?;
    let listener = TcpListener::bind((ip, 0))
        .map_err(|e| Error::os(format!("rshmem bootstrap: cannot listen on {ip} (interface {ifname})"), e))?;
    let port = listener.local_addr().map_err(|e| Error::os("rshmem bootstrap: listener address", e))?.port();
    let addr = SocketAddrV4::new(ip, port);
    let id = UniqueId::new(addr, net::random16()?);
    crate::log::debug(format!("rshmem bootstrap: unique id listens on {addr} (interface {ifname})"));
    UID_LISTENERS.lock().unwrap_or_else(PoisonError::into_inner).push((addr, listener));
    Ok(id)
}

/// The launchers whose key-value store rshmem uses, for messages.
const KVS_LAUNCHERS: &str =
    "a launcher with PMIx (Open MPI's mpirun, srun --mpi=pmix) or PMI on PMI_FD (MPICH's mpiexec, srun --mpi=pmi2, rshmrun --pmi)";

/// The error for a job of several PEs started without RSHMEM_JOB_KEY outside rshmrun.
fn no_key_error(pe: usize, npes: usize, source: &str) -> Error {
    Error::new(format!(
        "rshmem bootstrap: this process is PE {pe} of {npes} according to {source}, but {key} is not set, and the launcher offers no key-value store to exchange one ({KVS_LAUNCHERS} does): outside rshmrun, the PEs of a job must share a secret key, or any local user could join the job, read its memory or stop it. Fix: export {key}=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n') before starting the job, and pass it to every PE: mpirun -x {key} -x {boot} ... (srun passes the environment by default)",
        key = env::JOB_KEY,
        boot = env::BOOTSTRAP,
    ))
}

/// The key under which PE 0 publishes the bootstrap in the launcher's store.
const KVS_KEY: &str = "rshmem_bootstrap";
/// The published value: "rshmem1,ADDR,KEY" (KEY: 32 hex digits, or empty when PE 0's own
/// RSHMEM_JOB_KEY was set, which then every PE must have).
const KVS_TAG: &str = "rshmem1";

/// The rendezvous address the launcher's store gave this process (for other listeners that follow
/// the bootstrap's address, as they follow RSHMEM_BOOTSTRAP).
static LAUNCHER_ADDR: Mutex<Option<String>> = Mutex::new(None);

/// The rendezvous address this process got through the launcher's store, if it did.
pub(crate) fn launcher_addr() -> Option<String> {
    LAUNCHER_ADDR.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Parses PE 0's published value: the address and the key (None: PE 0 used its own RSHMEM_JOB_KEY).
fn parse_published(v: &str, via: &str) -> Result<(String, Option<[u8; 16]>)> {
    let bad = |why: &str| {
        Error::new(format!(
            "rshmem bootstrap: PE 0's {KVS_KEY} in {via} is {:?}, not what rshmem publishes ({why}): mixed rshmem builds?",
            wire::truncate(v, 200)
        ))
    };
    let mut parts = v.split(',');
    let (Some(tag), Some(addr), Some(key), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad("three fields"));
    };
    if tag != KVS_TAG {
        return Err(bad(&format!("version {KVS_TAG}")));
    }
    crate::config::parse::addr_syntax(addr).map_err(&bad)?;
    let key = if key.is_empty() { None } else { Some(crate::config::parse::decode_job_key(key).map_err(|why| bad(&why))?) };
    Ok((addr.to_string(), key))
}

/// Which bootstrap an environment selects, and why: for `rshmrun --info` and `rshmrun --diagnose`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapChoice {
    /// "single PE", "RSHMEM_BOOTSTRAP", "launcher key-value store" or "none".
    pub route: &'static str,
    /// Why, and what happens at init.
    pub detail: String,
    /// False when init would fail (what is missing is in `detail`).
    pub ok: bool,
}

/// The bootstrap the environment read through `get` selects (the same rules as
/// [`Bootstrap::from_launch_env`]), without connecting anywhere.
pub fn bootstrap_choice(get: &dyn Fn(&str) -> Option<String>) -> BootstrapChoice {
    let (b, k) = (env::BOOTSTRAP, env::JOB_KEY);
    let le = match parse_launch_env(get) {
        Ok(le) => le,
        Err(e) => return BootstrapChoice { route: "none", detail: format!("the launch variables are not valid: {e}"), ok: false },
    };
    if le.npes == 1 {
        return BootstrapChoice {
            route: "single PE",
            detail: format!(
                "{}: nothing to connect. A job of several PEs gets {b} and {k} from rshmrun; under {KVS_LAUNCHERS}, PE 0 publishes them through the launcher's store; under another launcher, set both for every PE",
                le.source
            ),
            ok: true,
        };
    }
    if let (Some(addr), Some(_)) = (&le.bootstrap, le.job_key) {
        let by = if le.bootstrap_fd.is_some() { " (by rshmrun)" } else { "" };
        return BootstrapChoice {
            route: "RSHMEM_BOOTSTRAP",
            detail: format!("{b}={addr} and {k} are set{by}: PE 0 listens there and the other PEs connect to it; they win over any launcher store"),
            ok: true,
        };
    }
    let given = |set: bool, name: &str, what: &str| if set { format!("{name} is set (used)") } else { format!("{name} is unset (PE 0 {what})") };
    match &le.launcher_kvs {
        Err(e) => BootstrapChoice { route: "none", detail: e.to_string(), ok: false },
        Ok(Some(found)) => {
            let lib = match found {
                KvsFound::Pmix { .. } => match pmix_library() {
                    Ok(l) => Ok(format!("; the PMIx client library {l} is loaded at run time")),
                    Err(why) => Err(format!(
                        "; but the PMIx client library cannot be loaded ({why}): install PMIx (libpmix2), or set {b} and {k} for every PE"
                    )),
                },
                KvsFound::PmiFd { .. } => Ok(String::new()),
            };
            let ok = lib.is_ok();
            BootstrapChoice {
                route: "launcher key-value store",
                detail: format!(
                    "{} starts PE {} of {}, and {} found: {}; {}; PE 0 publishes what the others need through the store{}",
                    le.source,
                    le.pe,
                    le.npes,
                    found.describe(),
                    given(le.bootstrap.is_some(), b, "listens on a free port of its bootstrap interface"),
                    given(le.job_key.is_some(), k, "draws a random key"),
                    lib.unwrap_or_else(|e| e)
                ),
                ok,
            }
        }
        Ok(None) => {
            let missing: Vec<&str> = [(le.bootstrap.is_none(), b), (le.job_key.is_none(), k)].iter().filter(|m| m.0).map(|m| m.1).collect();
            BootstrapChoice {
                route: "none",
                detail: format!(
                    "{} starts PE {} of {}, but {} not set and no launcher key-value store was found (PMIx: PMIX_NAMESPACE, PMIX_RANK and PMIX_SERVER_URI*; PMI: PMI_FD): init stops saying so. Set them for every PE, or start the job under {KVS_LAUNCHERS}",
                    le.source,
                    le.pe,
                    le.npes,
                    missing.join(" and ") + if missing.len() == 1 { " is" } else { " are" },
                ),
                ok: false,
            }
        }
    }
}

/// `rshmrun --info`'s section on the bootstrap: the rules, and what the environment `vars` selects.
pub fn bootstrap_info(vars: &Vars) -> String {
    let c = bootstrap_choice(&|n: &str| vars.get(n));
    format!(
        "How the PEs of a job find each other (the bootstrap), in this order:\n\
         \x20 1. one PE: nothing to connect;\n\
         \x20 2. {b} and {k} both set (rshmrun sets them; set them by hand under any launcher): used as they are;\n\
         \x20 3. a launcher's key-value store: PMIx (Open MPI's mpirun or prterun, srun --mpi=pmix; the client library libpmix.so.2 is loaded at run time), else PMI-1 or PMI-2 on PMI_FD (MPICH's mpiexec, srun --mpi=pmi2, rshmrun --pmi): PE 0 draws the job key, listens on a free port of its bootstrap interface ({ifn}, else the default route's), and publishes both through the store; {b} or {k}, when set, wins;\n\
         \x20 4. otherwise a job of several PEs stops at init, saying what to set.\n\
         In this environment: {}: {}\n",
        c.route,
        c.detail,
        b = env::BOOTSTRAP,
        k = env::JOB_KEY,
        ifn = env::BOOTSTRAP_IFNAME,
    )
}

enum Link {
    /// One PE: nothing to talk to.
    Single,
    Root(root::Root),
    Leaf(leaf::Leaf),
    /// After a failure.
    Closed,
}

struct State {
    seq: u64,
    failed: Option<Error>,
    link: Link,
}

/// The bootstrap of one PE. Collectives take `&self` and are serialized inside; every PE must call
/// the same collectives in the same order.
pub struct Bootstrap {
    pe: usize,
    npes: usize,
    local_pe: usize,
    local_npes: usize,
    node_pes: Vec<usize>,
    hosts: Vec<HostId>,
    key: [u8; 16],
    state: Mutex<State>,
}

impl std::fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrap")
            .field("pe", &self.pe)
            .field("npes", &self.npes)
            .field("local_pe", &self.local_pe)
            .field("local_npes", &self.local_npes)
            .field("node_pes", &self.node_pes)
            .finish_non_exhaustive()
    }
}

impl Bootstrap {
    /// For a program that uses the bootstrap alone: reads this process's environment once and checks
    /// every variable, as init does ([`Config::from_env`]; a bad value is an error naming it), then
    /// [`Bootstrap::from_config`]. Init itself hands its own configuration to `from_config`.
    pub fn from_env() -> Result<Bootstrap> {
        let (cfg, _warnings) = Config::from_env()?;
        Self::from_config(&cfg)
    }

    /// The bootstrap of the launch environment in `cfg`'s variables: PE number and count from
    /// rshmrun's variables, else Open MPI's, PMI's or Slurm's; the rendezvous address from
    /// RSHMEM_BOOTSTRAP (needed whenever there is more than one PE). One PE and no address: a single-PE
    /// bootstrap without sockets.
    pub fn from_config(cfg: &Config) -> Result<Bootstrap> {
        Self::from_launch_env(parse_launch_env(|n| cfg.vars.get(n))?, cfg)
    }

    /// Like [`Bootstrap::from_config`], from a launch environment already parsed (from `cfg.vars`, or
    /// from variables of its own in tests). The placement, rendezvous, key, node and bootstrap timeout
    /// are `le`'s; the wait limit (RSHMEM_WAIT_TIMEOUT) and the bootstrap interface are `cfg`'s.
    pub fn from_launch_env(le: LaunchEnv, cfg: &Config) -> Result<Bootstrap> {
        let me = net::host_identity(le.node_id);
        if le.npes == 1 {
            if let (0, Some(fd)) = (le.pe, le.bootstrap_fd) {
                // Nobody will connect; take the listener over anyway, so that it is not inherited by
                // programs this one starts.
                if let Err(e) = net::handed_listener(fd) {
                    crate::log::debug(e.to_string());
                }
            }
            // A single PE without a key still gets a secret one: it also guards the fd server.
            let key = match le.job_key {
                Some(k) => k,
                None => net::random16()?,
            };
            return Self::finish(0, 1, vec![me], key, (le.local_pe, le.local_npes), le.source, Link::Single);
        }
        if le.bootstrap.is_none() || le.job_key.is_none() {
            match &le.launcher_kvs {
                Ok(Some(found)) => {
                    let found = found.clone();
                    return Self::through_launcher(le, &found, cfg);
                }
                Err(e) => return Err(e.clone()),
                Ok(None) => {}
            }
        }
        let addr = le.bootstrap.clone().ok_or_else(|| {
            Error::new(format!(
                "rshmem bootstrap: this process is PE {} of {} according to {}, but {} is not set, and the launcher offers no key-value store to exchange it ({KVS_LAUNCHERS} does): set it, for every PE, to host:port of a free port on PE 0's node (e.g. {}=node001:29500; rshmrun sets it by itself)",
                le.pe,
                le.npes,
                le.source,
                env::BOOTSTRAP,
                env::BOOTSTRAP
            ))
        })?;
        net::check_addr_syntax(&addr)?;
        let key = le.job_key.ok_or_else(|| no_key_error(le.pe, le.npes, le.source))?;
        let wait = cfg.wait_timeout;
        let listener = if le.pe == 0 {
            Some(match le.bootstrap_fd {
                Some(fd) => net::handed_listener(fd)?,
                None => net::bind(&addr, &me.hostname)?,
            })
        } else {
            None
        };
        let setup =
            Setup { pe: le.pe, npes: le.npes, key, job: &le.job_id, timeout: le.timeout, wait, addr: &addr, me: &me };
        Self::connect(&setup, listener, (le.local_pe, le.local_npes), le.source)
    }

    /// A job of several PEs without RSHMEM_BOOTSTRAP or RSHMEM_JOB_KEY, under a launcher with a
    /// key-value store: PE 0 listens (on RSHMEM_BOOTSTRAP's address if set, else on a free port of the
    /// bootstrap interface), draws the key (unless RSHMEM_JOB_KEY is set) and publishes both; the
    /// others read them (their own variables win). Two fences: after the first every PE can read, after
    /// the second every PE has read, so that PE 0 can leave the store.
    fn through_launcher(le: LaunchEnv, found: &KvsFound, cfg: &Config) -> Result<Bootstrap> {
        let mut store = LauncherKvs::open(found, le.pe, le.npes, le.timeout)?;
        let via = store.name().to_string();
        let wait = cfg.wait_timeout;
        let me = net::host_identity(le.node_id);
        let (listener, addr, key) = if le.pe == 0 {
            let (listener, addr) = match &le.bootstrap {
                Some(a) => {
                    net::check_addr_syntax(a)?;
                    let l = match le.bootstrap_fd {
                        Some(fd) => net::handed_listener(fd)?,
                        None => net::bind(a, &me.hostname)?,
                    };
                    (l, a.clone())
                }
                None => {
                    let (ip, ifname) = net::choose_ipv4(cfg.net.bootstrap_ifname.as_deref(), env::BOOTSTRAP_IFNAME)?;
                    let l = TcpListener::bind((ip, 0))
                        .map_err(|e| Error::os(format!("rshmem bootstrap: cannot listen on {ip} (interface {ifname})"), e))?;
                    let port = l.local_addr().map_err(|e| Error::os("rshmem bootstrap: listener address", e))?.port();
                    (l, SocketAddrV4::new(ip, port).to_string())
                }
            };
            let key = match le.job_key {
                Some(k) => k,
                None => net::random16()?,
            };
            // The key goes through the store only when PE 0 drew it.
            let shared = if le.job_key.is_some() { String::new() } else { crate::config::parse::encode_hex(&key) };
            store.put(KVS_KEY, &format!("{KVS_TAG},{addr},{shared}"))?;
            store.fence()?;
            (Some(listener), addr, key)
        } else {
            store.fence()?;
            let (addr0, key0) = parse_published(&store.get(0, KVS_KEY)?, &via)?;
            let key = match (le.job_key, key0) {
                (Some(k), _) | (None, Some(k)) => k,
                (None, None) => {
                    return Err(Error::new(format!(
                        "rshmem bootstrap: PE {}: PE 0 has {k} set, so it did not publish a key through {via}, but this PE has none: set {k} for every PE, or for none",
                        le.pe,
                        k = env::JOB_KEY
                    )))
                }
            };
            (None, le.bootstrap.clone().unwrap_or(addr0), key)
        };
        store.fence()?;
        store.finish()?;
        crate::log::debug(format!("rshmem bootstrap: PE {} of {}: through {via}: PE 0 listens on {addr}", le.pe, le.npes));
        *LAUNCHER_ADDR.lock().unwrap_or_else(PoisonError::into_inner) = Some(addr.clone());
        let setup =
            Setup { pe: le.pe, npes: le.npes, key, job: &le.job_id, timeout: le.timeout, wait, addr: &addr, me: &me };
        Self::connect(&setup, listener, (le.local_pe, le.local_npes), le.source)
    }

    /// Joins the job whose PE 0 made `id` with `get_unique_id`, as PE `pe` of `npes`. The node-local
    /// numbering is computed from the PEs' host identities. `cfg`'s RSHMEM_BOOTSTRAP_TIMEOUT,
    /// RSHMEM_WAIT_TIMEOUT and RSHMEM_NODE_ID apply.
    pub fn from_unique_id(id: &UniqueId, pe: usize, npes: usize, cfg: &Config) -> Result<Bootstrap> {
        if npes == 0 || pe >= npes || npes > u32::MAX as usize {
            return Err(Error::new(format!("rshmem bootstrap: PE {pe} of {npes} PEs is not a valid placement")));
        }
        let (addr, key) = id.decode()?;
        let (timeout, wait) = (cfg.bootstrap_timeout, cfg.wait_timeout);
        let me = net::host_identity(cfg.node_id);
        let made_here = if pe == 0 {
            let mut l = UID_LISTENERS.lock().unwrap_or_else(PoisonError::into_inner);
            l.iter().position(|(a, _)| *a == addr).map(|i| l.swap_remove(i).1)
        } else {
            None
        };
        if npes == 1 {
            return Self::finish(0, 1, vec![me], key, (None, None), "the unique id", Link::Single);
        }
        let listener = if pe == 0 {
            Some(match made_here {
                Some(l) => l,
                None => TcpListener::bind(addr).map_err(|e| {
                    Error::os(
                        format!(
                            "rshmem bootstrap: PE 0 cannot listen on {addr}, the address in the unique id (call get_unique_id in PE 0's own process)"
                        ),
                        e,
                    )
                })?,
            })
        } else {
            None
        };
        let addr_text = addr.to_string();
        // The key in the id is drawn per id, so it identifies the job too.
        let setup = Setup { pe, npes, key, job: "", timeout, wait, addr: &addr_text, me: &me };
        Self::connect(&setup, listener, (None, None), "the unique id")
    }

    fn connect(
        s: &Setup,
        listener: Option<TcpListener>,
        local: (Option<usize>, Option<usize>),
        source: &str,
    ) -> Result<Bootstrap> {
        let (link, hosts) = match listener {
            Some(l) => {
                let (r, hosts) = root::init(s, l)?;
                (Link::Root(r), hosts)
            }
            None => {
                let (l, hosts) = leaf::init(s)?;
                (Link::Leaf(l), hosts)
            }
        };
        Self::finish(s.pe, s.npes, hosts, s.key, local, source, link)
    }

    /// Derives the node layout from the host table and checks it against the launcher's view.
    fn finish(
        pe: usize,
        npes: usize,
        hosts: Vec<HostId>,
        key: [u8; 16],
        (env_local_pe, env_local_npes): (Option<usize>, Option<usize>),
        source: &str,
        mut link: Link,
    ) -> Result<Bootstrap> {
        let node_pes: Vec<usize> = (0..npes).filter(|&p| hosts[p] == hosts[pe]).collect();
        let local_pe = node_pes.iter().position(|&p| p == pe).expect("a PE is on its own node");
        let local_npes = node_pes.len();
        if env_local_pe.is_some_and(|v| v != local_pe) || env_local_npes.is_some_and(|v| v != local_npes) {
            let show = |v: Option<usize>| v.map_or("?".to_string(), |v| v.to_string());
            let err = Error::new(format!(
                "rshmem bootstrap: {source} makes PE {pe} node-local PE {} of {}, but its host {} (same host name and boot id) runs {}, which makes it node-local PE {local_pe} of {local_npes}: the launcher's node-local variables disagree with where the PEs run",
                show(env_local_pe),
                show(env_local_npes),
                hosts[pe].hostname,
                launch::pe_list(&node_pes)
            ));
            match &mut link {
                Link::Root(r) => return Err(r.fail(err)),
                Link::Leaf(l) => l.abort(err.message()),
                _ => {}
            }
            return Err(err);
        }
        Ok(Bootstrap {
            pe,
            npes,
            local_pe,
            local_npes,
            node_pes,
            hosts,
            key,
            state: Mutex::new(State { seq: 0, failed: None, link }),
        })
    }

    /// This PE's number.
    pub fn pe(&self) -> usize {
        self.pe
    }
    /// The number of PEs in the job.
    pub fn npes(&self) -> usize {
        self.npes
    }
    /// This PE's number among the PEs of its node.
    pub fn local_pe(&self) -> usize {
        self.local_pe
    }
    /// The number of PEs on this PE's node.
    pub fn local_npes(&self) -> usize {
        self.local_npes
    }
    /// PEs on the same node as me (same host identity), ascending; includes me.
    pub fn node_pes(&self) -> &[usize] {
        &self.node_pes
    }
    /// Host name of `pe` (for messages).
    pub fn hostname(&self, pe: usize) -> &str {
        self.hosts.get(pe).map_or("?", |h| h.hostname.as_str())
    }
    /// The job's secret key (RSHMEM_JOB_KEY, rshmrun's or the unique id's; a random one for a single
    /// PE started without one).
    pub fn job_key(&self) -> [u8; 16] {
        self.key
    }

    /// `result[pe]` is that PE's data; sizes may differ per PE. `call` names the collective in errors.
    pub fn allgather(&self, call: &str, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.run(call, Op::Allgather, data)
    }

    /// `root`'s data on every PE; the other PEs' data is ignored.
    pub fn broadcast(&self, call: &str, root: usize, data: &[u8]) -> Result<Vec<u8>> {
        let mut parts = self.run(call, Op::Broadcast(root), data)?;
        Ok(parts.pop().unwrap_or_default())
    }

    /// Fails the job's bootstrap with `err` from outside a collective (e.g. a mismatch found by a
    /// shared-memory collective): every PE gets the error at its current or next bootstrap operation,
    /// and later calls here return it. Returns the error to report.
    pub fn abort(&self, err: Error) -> Error {
        let mut st = self.state.lock().unwrap();
        if let Some(f) = &st.failed {
            return f.clone();
        }
        let out = match &mut st.link {
            Link::Root(r) => r.fail(err),
            Link::Leaf(l) => {
                l.abort(err.message());
                err
            }
            _ => err,
        };
        st.failed = Some(out.clone());
        out
    }

    /// Waits until every PE has entered this barrier. `call` names the collective in errors.
    pub fn barrier(&self, call: &str) -> Result<()> {
        self.run(call, Op::Barrier, &[]).map(|_| ())
    }

    fn run(&self, call: &str, op: Op, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = &st.failed {
            return Err(e.clone());
        }
        st.seq += 1;
        let seq = st.seq;
        let res = match &mut st.link {
            Link::Single => check_local(1, call, op, data)
                .map(|()| match op {
                    Op::Barrier => Vec::new(),
                    _ => vec![data.to_vec()],
                })
                .map_err(|m| Error::new(format!("rshmem bootstrap: {m}"))),
            Link::Root(r) => r.collective(self.npes, seq, call, op, data),
            Link::Leaf(l) => l.collective(seq, call, op, data),
            Link::Closed => Err(Error::new("rshmem bootstrap: closed")),
        };
        if let Err(e) = &res {
            st.failed = Some(e.clone());
            st.link = Link::Closed;
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use std::io::Write;
    use std::net::TcpStream;
    use std::sync::Arc;
    use std::time::Instant;

    fn assert_send_sync<T: Send + Sync>() {}

    /// The configuration of an environment that sets nothing (every default).
    fn defaults() -> Config {
        Config::from_vars(Vars::default()).unwrap().0
    }

    #[test]
    fn bootstrap_is_send_and_sync() {
        assert_send_sync::<Bootstrap>();
    }

    fn local_id() -> UniqueId {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = match l.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let id = UniqueId::new(addr, [7u8; 16]);
        UID_LISTENERS.lock().unwrap().push((addr, l));
        id
    }

    /// Runs `f(pe, bootstrap)` on `npes` threads joined through `id`.
    fn on_threads<T: Send + 'static>(
        id: UniqueId,
        npes: usize,
        f: impl Fn(usize, Result<Bootstrap>) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let f = Arc::new(f);
        let threads: Vec<_> = (0..npes)
            .map(|pe| {
                let f = f.clone();
                std::thread::spawn(move || f(pe, Bootstrap::from_unique_id(&id, pe, npes, &defaults())))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    #[test]
    fn unique_id_hex_round_trip() {
        let id = UniqueId::new(SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 4567), [0xab; 16]);
        let hex = id.to_hex();
        assert_eq!(hex.len(), 256);
        assert_eq!(UniqueId::from_hex(&hex).unwrap(), id);
        assert_eq!(id.addr().unwrap().to_string(), "10.1.2.3:4567");
        assert!(UniqueId::from_hex("abc").unwrap_err().to_string().contains("256 hex digits"));
        assert!(UniqueId::from_hex(&"0".repeat(256)).unwrap_err().to_string().contains("not an rshmem unique id"));
    }

    #[test]
    fn single_pe_needs_no_sockets() {
        let le = parse_launch_env(|_| None).unwrap();
        let b = Bootstrap::from_launch_env(le, &defaults()).unwrap();
        assert_eq!((b.pe(), b.npes(), b.local_pe(), b.local_npes(), b.node_pes()), (0, 1, 0, 1, &[0usize][..]));
        assert_eq!(b.allgather("t", b"xy").unwrap(), vec![b"xy".to_vec()]);
        assert_eq!(b.broadcast("t", 0, b"z").unwrap(), b"z".to_vec());
        b.barrier("t").unwrap();
        let e = b.broadcast("rshmem_bcast", 1, b"z").unwrap_err();
        assert!(e.to_string().contains("broadcast root PE 1 does not exist"), "{e}");
        // Poisoned: the same error again.
        assert_eq!(b.barrier("t").unwrap_err(), e);
    }

    #[test]
    fn pe0_uses_the_handed_listener() {
        use std::os::fd::IntoRawFd;
        // As rshmrun does: a listener made before PE 0 starts, its descriptor in the environment.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let fd = l.into_raw_fd();
        let env_of = |pe: usize, fd: Option<i32>| {
            let addr = addr.clone();
            parse_launch_env(move |k| match k {
                "RSHMEM_PE" => Some(pe.to_string()),
                "RSHMEM_NPES" => Some("2".into()),
                "RSHMEM_BOOTSTRAP" => Some(addr.clone()),
                "RSHMEM_BOOTSTRAP_FD" => fd.map(|f| f.to_string()),
                "RSHMEM_JOB_KEY" => Some("0f".repeat(16)),
                _ => None,
            })
            .unwrap()
        };
        // Twice, as after finalize and a second init: the listener is reused.
        for round in 0..2u8 {
            let e1 = env_of(1, None);
            let leaf =
                std::thread::spawn(move || Bootstrap::from_launch_env(e1, &defaults()).unwrap().broadcast("b", 0, b"").unwrap());
            let b = Bootstrap::from_launch_env(env_of(0, Some(fd)), &defaults()).unwrap();
            assert_eq!(b.job_key(), [0x0f; 16]);
            assert_eq!(b.broadcast("b", 0, &[round]).unwrap(), vec![round]);
            assert_eq!(leaf.join().unwrap(), vec![round]);
        }
    }

    #[test]
    fn multi_pe_without_address_is_a_clear_error() {
        let le = parse_launch_env(|k| match k {
            "SLURM_PROCID" => Some("1".into()),
            "SLURM_NTASKS" => Some("4".into()),
            _ => None,
        })
        .unwrap();
        let e = Bootstrap::from_launch_env(le, &defaults()).unwrap_err().to_string();
        assert!(e.contains("RSHMEM_BOOTSTRAP is not set") && e.contains("Slurm"), "{e}");
    }

    #[test]
    fn multi_pe_without_key_outside_rshmrun_is_refused_with_the_fix() {
        for (rank, size) in [("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")] {
            let le = parse_launch_env(|k| match k {
                k if k == rank => Some("0".into()),
                k if k == size => Some("2".into()),
                "RSHMEM_BOOTSTRAP" => Some("127.0.0.1:1".into()),
                _ => None,
            })
            .unwrap();
            let e = Bootstrap::from_launch_env(le, &defaults()).unwrap_err().to_string();
            assert!(e.contains("RSHMEM_JOB_KEY is not set"), "{e}");
            assert!(e.contains("export RSHMEM_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')"), "{e}");
            assert!(e.contains("mpirun -x RSHMEM_JOB_KEY -x RSHMEM_BOOTSTRAP"), "{e}");
        }
    }

    /// Runs PE `pe` of `npes` through a Setup on `l` (PE 0) or towards `addr` (the others).
    fn setup_pe(
        pe: usize,
        npes: usize,
        addr: String,
        l: Option<TcpListener>,
        job: &'static str,
        wait: Option<Duration>,
    ) -> Result<Bootstrap> {
        let me = net::host_identity(None);
        let s = Setup { pe, npes, key: [3; 16], job, wait, timeout: Duration::from_secs(10), addr: &addr, me: &me };
        Bootstrap::connect(&s, l, (None, None), "test")
    }

    #[test]
    fn another_job_with_the_same_key_is_refused_and_the_job_goes_on() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let a = addr.clone();
        let pe0 = std::thread::spawn(move || {
            setup_pe(0, 2, a, Some(l), "Open MPI job 1", None).unwrap().allgather("x", b"0").unwrap()
        });
        // PE 1 of another job with the same key: refused at once, saying why; PE 0 goes on waiting.
        let t = Instant::now();
        let e = setup_pe(1, 2, addr.clone(), None, "Open MPI job 2", None).unwrap_err().to_string();
        assert!(t.elapsed() < Duration::from_secs(3));
        assert!(e.contains("refused the connection: another job: PE 0 there belongs to Open MPI job 1, this PE to Open MPI job 2"), "{e}");
        let b = setup_pe(1, 2, addr, None, "Open MPI job 1", None).unwrap();
        assert_eq!(b.allgather("x", b"1").unwrap(), vec![b"0".to_vec(), b"1".to_vec()]);
        assert_eq!(pe0.join().unwrap(), vec![b"0".to_vec(), b"1".to_vec()]);
    }

    #[test]
    fn a_stalled_collective_names_the_pes_waited_for() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let wait = Some(Duration::from_millis(300));
        let mut ls = Some(l);
        let threads: Vec<_> = (0..4)
            .map(|pe| {
                let (a, l) = (addr.clone(), if pe == 0 { ls.take() } else { None });
                std::thread::spawn(move || {
                    let b = setup_pe(pe, 4, a, l, "", wait).unwrap();
                    if pe == 3 {
                        std::thread::sleep(Duration::from_millis(1500));
                        return b.barrier("first").unwrap_err().to_string();
                    }
                    b.allgather("first", b"").unwrap_err().to_string()
                })
            })
            .collect();
        let t = Instant::now();
        let out: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        // PE 3 has not entered "first" (#1): that collective stalls, naming PE 3 only, on every PE.
        for e in &out {
            assert!(e.contains("first (allgather, collective #1) did not complete within RSHMEM_WAIT_TIMEOUT=0.3 s"), "{e}");
            assert!(e.contains("waits for PE 3 of 4"), "{e}");
            assert!(e.contains("has not entered any collective since init"), "{e}");
        }
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn threads_collectives() {
        let id = local_id();
        let out = on_threads(id, 4, |pe, b| {
            let b = b.unwrap();
            assert_eq!(b.pe(), pe);
            assert_eq!(b.node_pes(), &[0, 1, 2, 3]);
            assert_eq!((b.local_pe(), b.local_npes()), (pe, 4));
            assert_eq!(b.job_key(), [7u8; 16]);
            for round in 0..50usize {
                let mine: Vec<u8> = (0..(round * 37 + pe) % 300).map(|i| (i + pe) as u8).collect();
                let all = b.allgather("t_allgather", &mine).unwrap();
                for (p, d) in all.iter().enumerate() {
                    let want: Vec<u8> = (0..(round * 37 + p) % 300).map(|i| (i + p) as u8).collect();
                    assert_eq!(d, &want);
                }
                let root = round % 4;
                let v = b.broadcast("t_bcast", root, &[root as u8; 5][..if pe == root { 5 } else { pe % 2 }]).unwrap();
                assert_eq!(v, vec![root as u8; 5]);
                b.barrier("t_barrier").unwrap();
            }
        });
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn strangers_and_wrong_keys_do_not_disturb_the_job() {
        let id = local_id();
        let addr = id.addr().unwrap();
        // A stranger that sends garbage, one that sends nothing, and one with another job's key,
        // all before the real PEs connect.
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        let mut other = id;
        other.0[16] ^= 1;
        let stranger = std::thread::spawn(move || Bootstrap::from_unique_id(&other, 1, 2, &defaults()).unwrap_err().to_string());
        let pe0 = std::thread::spawn(move || {
            let b = Bootstrap::from_unique_id(&id, 0, 2, &defaults()).unwrap();
            b.allgather("x", b"0").unwrap()
        });
        let e = stranger.join().unwrap();
        assert!(e.contains("did not prove that it knows the job key") && e.contains("wrong job key"), "{e}");
        let pe1 = Bootstrap::from_unique_id(&id, 1, 2, &defaults()).unwrap();
        assert_eq!(pe1.allgather("x", b"1").unwrap(), vec![b"0".to_vec(), b"1".to_vec()]);
        assert_eq!(pe0.join().unwrap(), vec![b"0".to_vec(), b"1".to_vec()]);
    }

    /// PE 0 tells a connection it drops under a flood so (a BUSY frame): the PE connects again, and
    /// when its time runs out its error names the flood, not a crash of PE 0.
    #[test]
    fn a_pe_dropped_for_a_flood_connects_again_and_names_the_flood() {
        use wire::{encode_text, FrameReader, Pumped, K_BUSY};
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        l.set_nonblocking(true).unwrap();
        let busy = std::thread::spawn(move || {
            let t = Instant::now();
            let mut hellos = 0;
            while t.elapsed() < Duration::from_secs(3) {
                let Ok((mut c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                };
                c.set_nonblocking(false).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                if let Ok(Pumped::Frame(..)) = FrameReader::default().pump(&mut c, &wire::hello_limit) {
                    hellos += 1;
                }
                c.write_all(&encode_text(K_BUSY, "a flood here")).unwrap();
            }
            hellos
        });
        let me = net::host_identity(None);
        let s = Setup { pe: 1, npes: 2, key: [3; 16], job: "", wait: None, timeout: Duration::from_millis(800), addr: &addr, me: &me };
        let t = Instant::now();
        let e = Bootstrap::connect(&s, None, (None, None), "test").unwrap_err().to_string();
        assert!(t.elapsed() < Duration::from_secs(3), "took {:?}", t.elapsed());
        assert!(e.contains(&format!("PE 1 could not join PE 0 at {addr} within 0.8 s")), "{e}");
        assert!(e.contains("because of a flood of connections to its port (last notice: a flood here)"), "{e}");
        assert!(!e.contains("exited or crashed"), "{e}");
        assert!(busy.join().unwrap() >= 2, "the PE did not connect again");
    }

    #[test]
    fn duplicate_pe_fails_everyone() {
        let id = local_id();
        let pe0 = std::thread::spawn(move || Bootstrap::from_unique_id(&id, 0, 3, &defaults()).unwrap_err().to_string());
        let a = std::thread::spawn(move || Bootstrap::from_unique_id(&id, 1, 3, &defaults()).unwrap_err().to_string());
        let b = std::thread::spawn(move || Bootstrap::from_unique_id(&id, 1, 3, &defaults()).unwrap_err().to_string());
        for e in [pe0.join().unwrap(), a.join().unwrap(), b.join().unwrap()] {
            assert!(e.contains("two processes claim to be PE 1"), "{e}");
        }
    }

    #[test]
    fn npes_disagreement_fails_everyone() {
        let id = local_id();
        let pe0 = std::thread::spawn(move || Bootstrap::from_unique_id(&id, 0, 3, &defaults()).unwrap_err().to_string());
        let e = Bootstrap::from_unique_id(&id, 1, 2, &defaults()).unwrap_err().to_string();
        assert!(e.contains("was started with 2 PEs, but PE 0 with 3"), "{e}");
        assert_eq!(pe0.join().unwrap(), e);
    }

    #[test]
    fn timeout_names_missing_pes() {
        // Only PE 0 and PE 2 of 4; a short deadline through the setup directly (no env changes).
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let me = net::host_identity(None);
        let t0 = Instant::now();
        let a2 = addr.clone();
        let leaf = std::thread::spawn(move || {
            let me = net::host_identity(None);
            let s = Setup { pe: 2, npes: 4, key: [0; 16], job: "", wait: None, timeout: Duration::from_millis(800), addr: &a2, me: &me };
            Bootstrap::connect(&s, None, (None, None), "test").unwrap_err().to_string()
        });
        let s = Setup { pe: 0, npes: 4, key: [0; 16], job: "", wait: None, timeout: Duration::from_millis(500), addr: &addr, me: &me };
        let e = Bootstrap::connect(&s, Some(l), (None, None), "test").unwrap_err().to_string();
        assert!(e.contains("timed out after 0.5 s waiting for PEs 1, 3 of 4"), "{e}");
        assert_eq!(leaf.join().unwrap(), e);
        assert!(t0.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn unreachable_root_is_reported() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let me = net::host_identity(None);
        let s = Setup { pe: 1, npes: 2, key: [0; 16], job: "", wait: None, timeout: Duration::from_millis(300), addr: &addr, me: &me };
        let e = Bootstrap::connect(&s, None, (None, None), "test").unwrap_err().to_string();
        assert!(e.contains(&format!("could not reach PE 0 at {addr} within 0.3 s")), "{e}");
    }

    #[test]
    fn inconsistent_local_numbering_is_an_error() {
        let id = local_id();
        let addr = id.addr().unwrap().to_string();
        let l = {
            let mut ls = UID_LISTENERS.lock().unwrap();
            let i = ls.iter().position(|(a, _)| *a == id.addr().unwrap()).unwrap();
            ls.swap_remove(i).1
        };
        let a1 = addr.clone();
        let leaf = std::thread::spawn(move || {
            let me = net::host_identity(None);
            let s = Setup { pe: 1, npes: 2, key: [0; 16], job: "", wait: None, timeout: Duration::from_secs(10), addr: &a1, me: &me };
            let b = Bootstrap::connect(&s, None, (Some(1), Some(2)), "test").unwrap();
            b.barrier("rshmem_init").unwrap_err().to_string()
        });
        let me = net::host_identity(None);
        let s = Setup { pe: 0, npes: 2, key: [0; 16], job: "", wait: None, timeout: Duration::from_secs(10), addr: &addr, me: &me };
        let e = Bootstrap::connect(&s, Some(l), (Some(0), Some(3)), "the launcher").unwrap_err().to_string();
        assert!(e.contains("node-local PE 0 of 3") && e.contains("node-local PE 0 of 2"), "{e}");
        assert_eq!(leaf.join().unwrap(), e);
    }

    #[test]
    fn local_failure_is_passed_on() {
        let id = local_id();
        let out = on_threads(id, 3, |pe, b| {
            let b = b.unwrap();
            // PE 2 asks for a broadcast from a PE that does not exist; the others wait for it.
            let r = if pe == 2 { b.broadcast("rshmem_bcast", 9, b"") } else { b.broadcast("rshmem_bcast", 0, b"x") };
            r.unwrap_err().to_string()
        });
        for e in &out {
            assert!(e.contains("broadcast root PE 9 does not exist"), "{e}");
        }
    }
}
