//! Which transport reaches PEs on other nodes, and the diagnosis behind that choice, for the layers
//! above (the runtime's init and `rshmrun --diagnose`): the host probes of `crate::diagnose` with the
//! verbs library's checks (`super::verbs`, feature `verbs`) and the choice itself
//! (`super::choose_remote`) handed in. (`crate::diagnose` imports no transport, so the dependency
//! runs one way.)

use super::{choose_remote, parse_remote, Remote, RemoteChoice, REMOTE_VALUES};
use crate::diagnose::{self, Check, Status};
use std::sync::OnceLock;

/// The verbs library's checks for the decision (without the GPU allocations of the full set), when
/// this build has the `verbs` feature.
fn verbs_quick() -> Option<fn() -> Vec<Check>> {
    #[cfg(feature = "verbs")]
    return Some(super::verbs::quick_checks);
    #[cfg(not(feature = "verbs"))]
    None
}

/// All of the verbs library's checks (`rshmrun --diagnose`), when this build has the `verbs` feature.
fn verbs_full() -> Option<fn() -> Vec<Check>> {
    #[cfg(feature = "verbs")]
    return Some(super::verbs::diagnose);
    #[cfg(not(feature = "verbs"))]
    None
}

/// Whether a real RDMA NIC is usable for IBGDA by this process: every NIC check of `crate::diagnose`
/// passes (a build without the `verbs` feature never has one). Cheap when no RDMA device exists;
/// computed once per process (`RSHMEM_IB_HCA` as set at the first call).
pub fn nic_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| diagnose::usable_with(verbs_quick()))
}

/// What a job with PEs on other nodes would use, for `RSHMEM_REMOTE_TRANSPORT`'s value `value` and
/// whether the real NIC is usable: the last line of `rshmrun --diagnose`.
pub fn transport_check(value: Option<&str>, nic_usable: bool) -> Check {
    const NAME: &str = "remote transport";
    let var = crate::env::REMOTE_TRANSPORT;
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

/// Every check of `rshmrun --diagnose` on this host, with this process's environment.
pub fn report() -> Vec<Check> {
    let remote = crate::env::get(crate::env::REMOTE_TRANSPORT);
    diagnose::report_with(verbs_full(), &|usable| transport_check(remote.as_deref(), usable))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn nic_usable_is_cached_and_false_without_a_nic_here() {
        let here = std::fs::read_dir("/sys/class/infiniband").map(|d| d.count()).unwrap_or(0);
        let first = nic_usable();
        assert_eq!(first, nic_usable());
        if here == 0 || !cfg!(feature = "verbs") {
            assert!(!first);
        }
    }
}
