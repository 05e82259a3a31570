//! The network a job uses, as `rshmrun --diagnose` reports it: where the bootstrap and the proxy
//! listen (the logic itself is `node::iface`'s and the bootstrap's).

use crate::config::env;
use crate::node::iface::{iface_of, proxy_listen_ip, resolve_bootstrap, route_source, with_iface, ListenWhy, NetEnv};
use crate::probe::check::{Check, Status};
use std::net::IpAddr;

/// What the bootstrap would use: RSHMEM_BOOTSTRAP's address, or the unique-id API's interface.
pub(crate) fn bootstrap_check(e: &NetEnv) -> Check {
    const NAME: &str = "bootstrap interface";
    let var = env::BOOTSTRAP;
    let ifvar = env::BOOTSTRAP_IFNAME;
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
                "{var} unset: rshmrun gives its jobs 127.0.0.1:PORT (with --netns 10.99.0.1:PORT); under a launcher with PMIx or PMI, PE 0 listens on the interface below and publishes its address through the launcher; under another launcher set it to PE 0's host:port. The unique-id API listens on {}: {why}",
                with_iface(IpAddr::V4(ip))
            );
            if ip.is_loopback() {
                detail.push_str("; that is loopback, which PEs on other hosts cannot reach");
            }
            Check::new(NAME, Status::Info, detail)
        }
    }
}


/// Where the proxy would listen ([`proxy_listen_ip`]), as a line.
pub(crate) fn proxy_check(e: &NetEnv) -> Check {
    const NAME: &str = "proxy interface";
    let pvar = env::PROXY_IFNAME;
    let bvar = env::BOOTSTRAP;
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
            .with_fix(format!("set {} or {pvar} to one of this host's interfaces", env::BOOTSTRAP_IFNAME)),
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
