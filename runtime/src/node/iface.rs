//! Which local address a listener of this PE binds, and the host's interfaces: the proxy's listen
//! address ([`proxy_listen_ip`], the one definition: the proxy transport listens there and
//! `rshmrun --diagnose` reports it), resolution of the bootstrap rendezvous with a time limit, and the
//! interface that holds an address.

use crate::config::env;
use crate::error::Result;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// How long a host name (RSHMEM_BOOTSTRAP) may take to resolve.
pub const DNS_LIMIT: Duration = Duration::from_secs(5);

/// The interface that holds IPv4 address `ip` (getifaddrs).
pub fn iface_of(ip: Ipv4Addr) -> Option<String> {
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

/// `ip` for messages, with the name of the interface that holds it when this host has it: "10.0.0.5 (eth0)".
pub fn with_iface(ip: IpAddr) -> String {
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
    /// The environment's settings (the variables, trimmed; empty ones as unset). Without
    /// RSHMEM_BOOTSTRAP, the rendezvous address this process got through the launcher's key-value
    /// store, if it did.
    pub fn current() -> NetEnv {
        let get = |n: &str| env::get(n).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        NetEnv {
            bootstrap: get(env::BOOTSTRAP).or_else(crate::bootstrap::launcher_addr),
            bootstrap_ifname: get(env::BOOTSTRAP_IFNAME),
            proxy_ifname: get(env::PROXY_IFNAME),
        }
    }
}

/// RSHMEM_BOOTSTRAP resolved (bounded): its first IPv4 address, or why not.
pub fn resolve_bootstrap(addr: &str) -> std::result::Result<SocketAddr, String> {
    let a = addr.to_string();
    match rshmem_common::bounded(DNS_LIMIT, move || crate::bootstrap::resolve_addr(&a)) {
        None => Err(format!("did not resolve within {} s (name service?)", DNS_LIMIT.as_secs())),
        Some(Err(e)) => Err(format!("cannot resolve: {e}")),
        Some(Ok(v)) => v.into_iter().find(|a| a.is_ipv4()).ok_or_else(|| "resolves to no IPv4 address".to_string()),
    }
}

/// The source address this host uses to reach `a` (a UDP connect sends nothing).
pub fn route_source(a: SocketAddr) -> std::io::Result<IpAddr> {
    let s = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    s.connect(a)?;
    Ok(s.local_addr()?.ip())
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
pub fn proxy_listen_ip(e: &NetEnv) -> Result<(IpAddr, ListenWhy)> {
    if let Some(i) = &e.proxy_ifname {
        return crate::bootstrap::local_ipv4(Some(i), env::PROXY_IFNAME).map(|ip| (IpAddr::V4(ip), ListenWhy::Ifname(i.clone())));
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
    crate::bootstrap::local_ipv4(e.bootstrap_ifname.as_deref(), env::BOOTSTRAP_IFNAME).map(|ip| (IpAddr::V4(ip), ListenWhy::BootstrapInterface))
}

//END
