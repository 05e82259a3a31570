//! Addresses and listeners: the host identity, the interface choice of the unique-id API, the
//! listening socket rshmrun hands to PE 0, and binding/resolving RSHMEM_BOOTSTRAP addresses.

use super::wire::{HostId, MAX_BOOT_ID, MAX_HOSTNAME};
use crate::config::env;
use crate::config::parse::addr_syntax;
use crate::error::{Error, Result};
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::{FromRawFd, RawFd};
use std::sync::{Mutex, PoisonError};

/// This node's identity: host name and kernel boot id (two containers or two boots of one name differ),
/// and the simulated node `node` (RSHMEM_NODE_ID, from the launch environment or init's configuration;
/// None when unset) when it is set (`rshmrun --nodes`): PEs with different node ids are then on
/// different nodes although they share a host, exactly as on separate machines.
pub(super) fn host_identity(node: Option<usize>) -> HostId {
    with_node(real_host_identity(), node)
}

/// `host` as simulated node `node` (None: the host's own identity). The node goes into the host name,
/// which every bootstrap message prints, so that "host gpu7/node1" names the node. A value of
/// RSHMEM_NODE_ID that is not a non-negative integer never gets here: init's check and the launch
/// environment refuse it, naming the variable.
pub(super) fn with_node(mut host: HostId, node: Option<usize>) -> HostId {
    if let Some(node) = node {
        let suffix = format!("/node{node}");
        let keep = MAX_HOSTNAME.saturating_sub(suffix.len());
        host.hostname = format!("{}{}", super::wire::truncate(&host.hostname, keep), super::wire::truncate(&suffix, MAX_HOSTNAME));
    }
    host
}

/// The host's own identity, without RSHMEM_NODE_ID.
fn real_host_identity() -> HostId {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for `buf.len()` bytes; gethostname NUL-terminates within it (or
    // truncates, which we handle by stopping at the first NUL or the end).
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let hostname = if r == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
    };
    let boot_id =
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default();
    let hostname = if hostname.is_empty() { "unknown-host".to_string() } else { hostname };
    HostId {
        hostname: super::wire::truncate(&hostname, MAX_HOSTNAME).to_string(),
        boot_id: super::wire::truncate(&boot_id, MAX_BOOT_ID).to_string(),
    }
}

/// 16 random bytes from the kernel.
pub(super) fn random16() -> Result<[u8; 16]> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| Error::os("rshmem bootstrap: cannot read /dev/urandom for the job key", e))?;
    Ok(b)
}

/// Checks the text form of a rendezvous address (`host:port`, `[v6]:port`) without resolving it.
pub(super) fn check_addr_syntax(addr: &str) -> Result<()> {
    addr_syntax(addr).map_err(|why| {
        Error::new(format!("rshmem bootstrap: {}={addr:?} is not host:port ({why}; example: node001:29500)", env::BOOTSTRAP))
    })
}

pub(super) fn resolve(addr: &str) -> std::io::Result<Vec<SocketAddr>> {
    let v: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    if v.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "the name resolves to no address"));
    }
    Ok(v)
}

/// PE 0 listens on `addr` itself (no listener was handed down): on the address it names and on no
/// other, never on all interfaces. A name that resolves to no address of this host is an error that
/// says where PE 0 must run, or which of this host's addresses to name instead; a port in use is an
/// error that says so (most likely another job chose the same port). `host`: this host's name as the
/// bootstrap shows it (its identity's), for messages.
pub(super) fn bind(addr: &str, host: &str) -> Result<TcpListener> {
    let addrs = resolve(addr).map_err(|e| Error::os(format!("rshmem bootstrap: cannot resolve {addr}"), e))?;
    let mut errors = Vec::new();
    for a in &addrs {
        match TcpListener::bind(a) {
            Ok(l) => return Ok(l),
            Err(e) => errors.push((*a, e)),
        }
    }
    if let Some((a, _)) = errors.iter().find(|(_, e)| e.kind() == std::io::ErrorKind::AddrInUse) {
        return Err(Error::new(format!(
            "rshmem bootstrap: PE 0 cannot listen on {addr} ({a}): port in use — another job? choose another {} port",
            env::BOOTSTRAP
        )));
    }
    if errors.iter().all(|(_, e)| e.kind() == std::io::ErrorKind::AddrNotAvailable) {
        let names: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
        let here = interfaces()
            .map(|ifs| {
                let v: Vec<String> =
                    ifs.iter().filter_map(|i| i.addr.map(|a| format!("{a} ({})", i.name))).collect();
                v.join(", ")
            })
            .unwrap_or_else(|e| e.to_string());
        return Err(Error::new(format!(
            "rshmem bootstrap: {}={addr} names {}, which is not an address of this host ({}): PE 0 listens there, so PE 0 must run on that host; or name one of this host's addresses: {here}",
            env::BOOTSTRAP,
            names.join(", "),
            host,
        )));
    }
    let (a, e) = errors.into_iter().next().expect("at least one address");
    Err(Error::new(format!("rshmem bootstrap: PE 0 cannot listen on {addr} ({a}): {e}")))
}

/// rshmrun's listener, once taken over. It stays open for the life of the process (rshmrun holds it
/// open anyway), so that a second init after finalize can listen on it again, rather than take a
/// descriptor number that may meanwhile name another file, or fail to bind a port still in use.
static HANDED: Mutex<Option<TcpListener>> = Mutex::new(None);

/// The listening socket rshmrun handed down in RSHMEM_BOOTSTRAP_FD (a duplicate of it; the original
/// stays in HANDED). The descriptor is checked to be a listening TCP socket before it is used.
pub(super) fn handed_listener(fd: RawFd) -> Result<TcpListener> {
    let mut handed = HANDED.lock().unwrap_or_else(PoisonError::into_inner);
    if handed.is_none() {
        check_listener_fd(fd)?;
        // SAFETY: `fd` is an open, listening TCP socket (checked above) that rshmrun handed to this
        // process for the bootstrap alone; HANDED makes this the only owner, taken once per process.
        let listener = unsafe { TcpListener::from_raw_fd(fd) };
        // SAFETY: F_SETFD on a descriptor we own; it only sets its close-on-exec flag.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            crate::log::debug(format!("rshmem bootstrap: FD_CLOEXEC on fd {fd}: {}", std::io::Error::last_os_error()));
        }
        *handed = Some(listener);
    }
    handed
        .as_ref()
        .unwrap()
        .try_clone()
        .map_err(|e| Error::os(format!("rshmem bootstrap: cannot duplicate {}={fd}", env::BOOTSTRAP_FD), e))
}

/// Checks that `fd` is an open, listening TCP socket.
pub(super) fn check_listener_fd(fd: RawFd) -> Result<()> {
    let name = env::BOOTSTRAP_FD;
    let sockopt = |opt: libc::c_int| -> std::io::Result<libc::c_int> {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `v`, a c_int, and updates `len`; a bad or
        // non-socket descriptor makes it fail with an error, nothing else.
        let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, opt, (&mut v as *mut libc::c_int).cast(), &mut len) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(v)
    };
    let not = |what: &str, e: Option<std::io::Error>| {
        let why = e.map(|e| format!(": {e}")).unwrap_or_default();
        Error::new(format!("rshmem bootstrap: {name}={fd} is not {what}{why} (only rshmrun should set it)"))
    };
    let domain = sockopt(libc::SO_DOMAIN).map_err(|e| not("a socket", Some(e)))?;
    if domain != libc::AF_INET && domain != libc::AF_INET6 {
        return Err(not("an IP socket", None));
    }
    if sockopt(libc::SO_TYPE).map_err(|e| not("a socket", Some(e)))? != libc::SOCK_STREAM {
        return Err(not("a TCP socket", None));
    }
    if sockopt(libc::SO_ACCEPTCONN).map_err(|e| not("a listening socket", Some(e)))? == 0 {
        return Err(not("a listening socket", None));
    }
    Ok(())
}

// ---- interface choice for the unique-id API ----

pub(super) struct Iface {
    pub name: String,
    pub addr: Option<Ipv4Addr>,
    pub up: bool,
    pub loopback: bool,
}

/// All interfaces, with their first IPv4 address if any.
pub(super) fn interfaces() -> Result<Vec<Iface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(Error::os("rshmem bootstrap: getifaddrs", std::io::Error::last_os_error()));
    }
    let mut out: Vec<Iface> = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, valid until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        let flags = ifa.ifa_flags as libc::c_int;
        let mut addr = None;
        // SAFETY: a non-null ifa_addr points to a sockaddr whose family field is always readable.
        if !ifa.ifa_addr.is_null() && i32::from(unsafe { (*ifa.ifa_addr).sa_family }) == libc::AF_INET {
            // SAFETY: the family is AF_INET, so the sockaddr is a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            addr = Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
        }
        match out.iter_mut().find(|i| i.name == name) {
            Some(i) => {
                if i.addr.is_none() {
                    i.addr = addr;
                }
            }
            None => {
                out.push(Iface { name, addr, up: flags & libc::IFF_UP != 0, loopback: flags & libc::IFF_LOOPBACK != 0 })
            }
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The interface of the default IPv4 route (lowest metric), from /proc/net/route.
pub(super) fn default_route_iface(route_table: &str) -> Option<String> {
    let mut best: Option<(u32, String)> = None;
    for line in route_table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let (iface, dest, flags, metric, mask) = (f[0], f[1], f[3], f[6], f[7]);
        let flags = u32::from_str_radix(flags, 16).unwrap_or(0);
        if dest != "00000000" || mask != "00000000" || flags & 1 == 0 {
            continue;
        }
        let metric = metric.parse::<u32>().unwrap_or(u32::MAX);
        if best.as_ref().is_none_or(|(m, _)| metric < *m) {
            best = Some((metric, iface.to_string()));
        }
    }
    best.map(|(_, i)| i)
}

/// The IPv4 address the unique-id listener binds: RSHMEM_BOOTSTRAP_IFNAME, else the default route's
/// interface, else the first non-loopback interface that is up, else loopback.
/// `var`: the variable that named `ifname`, for messages (the bootstrap's or the proxy's).
pub(super) fn choose_ipv4(ifname: Option<&str>, var: &str) -> Result<(Ipv4Addr, String)> {
    let ifs = interfaces()?;
    let listing = || {
        let v: Vec<String> = ifs
            .iter()
            .map(|i| match i.addr {
                Some(a) => format!("{} ({a})", i.name),
                None => format!("{} (no IPv4)", i.name),
            })
            .collect();
        v.join(", ")
    };
    if let Some(name) = ifname {
        return match ifs.iter().find(|i| i.name == name) {
            None => Err(Error::new(format!("rshmem: {var}={name}: no such interface (available: {})", listing()))),
            Some(Iface { addr: None, .. }) => Err(Error::new(format!(
                "rshmem: {var}={name}: the interface has no IPv4 address (available: {})",
                listing()
            ))),
            Some(Iface { addr: Some(a), .. }) => Ok((*a, name.to_string())),
        };
    }
    if let Some(dev) = std::fs::read_to_string("/proc/net/route").ok().and_then(|t| default_route_iface(&t)) {
        if let Some(i) = ifs.iter().find(|i| i.name == dev && i.up && i.addr.is_some()) {
            return Ok((i.addr.unwrap(), i.name.clone()));
        }
    }
    if let Some(i) = ifs.iter().find(|i| i.up && !i.loopback && i.addr.is_some_and(|a| !a.is_loopback())) {
        return Ok((i.addr.unwrap(), i.name.clone()));
    }
    Ok((Ipv4Addr::LOCALHOST, "loopback".into()))
}

pub(super) fn is_self_connection(s: &std::net::TcpStream) -> bool {
    matches!((s.local_addr(), s.peer_addr()), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_route_parsing() {
        let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eth1\t00000000\t0102A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n\
                     eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
                     eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(default_route_iface(table).as_deref(), Some("eth0"));
        assert_eq!(default_route_iface("Iface\tDestination\n"), None);
    }

    #[test]
    fn interface_choice() {
        let ifs = interfaces().unwrap();
        assert!(ifs.iter().any(|i| i.loopback), "no loopback interface?");
        let (ip, _) = choose_ipv4(None, env::BOOTSTRAP_IFNAME).unwrap();
        assert!(!ip.is_unspecified());
        let lo = ifs.iter().find(|i| i.loopback && i.addr.is_some()).unwrap();
        assert_eq!(choose_ipv4(Some(&lo.name), env::BOOTSTRAP_IFNAME).unwrap().0, lo.addr.unwrap());
        let e = choose_ipv4(Some("no-such-if0"), env::PROXY_IFNAME).unwrap_err().to_string();
        assert!(e.contains("no such interface") && e.contains(&lo.name), "{e}");
        assert!(e.contains("RSHMEM_PROXY_IFNAME=no-such-if0"), "the message names the variable that named it: {e}");
    }

    #[test]
    fn addr_syntax() {
        assert!(check_addr_syntax("127.0.0.1:4567").is_ok());
        assert!(check_addr_syntax("[::1]:4567").is_ok());
        assert!(check_addr_syntax("node01:1").is_ok());
        assert!(check_addr_syntax("node01").unwrap_err().to_string().contains("no port"));
        assert!(check_addr_syntax("node01:0").is_err());
        assert!(check_addr_syntax(":44").is_err());
    }

    #[test]
    fn only_listening_tcp_sockets_are_accepted_as_the_handed_listener() {
        use std::os::fd::AsRawFd;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(check_listener_fd(l.as_raw_fd()).is_ok());
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(check_listener_fd(c.as_raw_fd()).unwrap_err().to_string().contains("not a listening socket"));
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(check_listener_fd(u.as_raw_fd()).unwrap_err().to_string().contains("not a TCP socket"));
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(check_listener_fd(f.as_raw_fd()).unwrap_err().to_string().contains("not a socket"));
        assert!(check_listener_fd(987_654).unwrap_err().to_string().contains("RSHMEM_BOOTSTRAP_FD=987654"));
    }

    #[test]
    fn pe0_binds_only_the_named_address() {
        // A port in use: the message says so and what to do.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let e = bind(&addr, "here").unwrap_err().to_string();
        assert!(e.contains("port in use — another job? choose another RSHMEM_BOOTSTRAP port"), "{e}");
        // An address of another host (TEST-NET-1, never local): no silent fallback to 0.0.0.0.
        let e = bind("192.0.2.77:29500", "here/node1").unwrap_err().to_string();
        assert!(e.contains("not an address of this host (here/node1)") && e.contains("PE 0 must run on that host"), "{e}");
        assert!(e.contains("127.0.0.1 (lo"), "{e}");
        // The named address, and not all interfaces.
        let l = bind("127.0.0.1:0", "here").unwrap();
        assert_eq!(l.local_addr().unwrap().ip(), std::net::IpAddr::from(Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn host_identity_is_stable() {
        let a = host_identity(None);
        assert_eq!(a, host_identity(None));
        assert!(!a.hostname.is_empty());
        assert_eq!(host_identity(Some(2)), host_identity(Some(2)));
    }

    /// RSHMEM_NODE_ID splits one host into nodes: same host, different node ids, different identities;
    /// the same id, the same identity; unset, the host's own.
    #[test]
    fn node_id_is_part_of_the_identity() {
        let host = real_host_identity();
        assert_eq!(with_node(host.clone(), None), host);
        let (n0, n1) = (with_node(host.clone(), Some(0)), with_node(host.clone(), Some(1)));
        assert_ne!(n0, n1);
        assert_ne!(n0, host);
        assert_eq!(n1, with_node(host.clone(), Some(1)), "the same number is the same node");
        assert!(n1.hostname.ends_with("/node1") && n1.boot_id == host.boot_id, "{n1:?}");
        // A host name at the wire's limit keeps the node suffix and stays within the limit.
        let long = HostId { hostname: "h".repeat(MAX_HOSTNAME), boot_id: host.boot_id.clone() };
        let l = with_node(long, Some(7));
        assert!(l.hostname.len() <= MAX_HOSTNAME && l.hostname.ends_with("/node7"));
    }
}
