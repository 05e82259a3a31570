//! Fault injection of the emulated NIC ([`FaultConfig`]).

use std::prelude::rust_2021::*;
use std::time::Duration;

/// Fault-injection modes of the emulated NIC (all off by default). A later change maps environment
/// variables onto this.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// Wait this long between seeing a doorbell and fetching the WQEs it announces (catches WQE slots
    /// reused before their completion, and missing fences, that a fast NIC would hide).
    pub fetch_delay: Duration,
    /// Drop every n-th doorbell (0: none). The doorbell record is still honoured: a later doorbell, or
    /// the doorbell-record scan, processes everything it announces (catches a stale doorbell record).
    pub drop_doorbell_every: u32,
    /// Read the doorbell record this often even without a doorbell (doorbell recovery). `None`: only
    /// when doorbells are dropped, every millisecond.
    pub dbr_scan: Option<Duration>,
    /// First WQE count of every QP (0 normally; e.g. `65536 - 64` wraps the 16-bit WQE index and
    /// doorbell-record counter soon). The posting side must start there too ([`crate::qp::QpCounters::new`];
    /// `HostQueues` does both).
    pub start_index: u64,
    /// Hold WQEs until the send queue is full, or until the doorbell record has not moved for this
    /// long (forces posters into the wait for free slots).
    pub hold_until_full: Option<Duration>,
    /// Wait this long before writing each CQE.
    pub cqe_delay: Duration,
}

impl FaultConfig {
    /// The modes a fault list names (for messages).
    pub const MODES: &'static str = "none, delay[=DURATION] (doorbell to WQE fetch, default 200us), drop[=N] (every N-th doorbell, default 3), wrap[=START] (first WQE count, default 65536-48), full[=DURATION] (hold WQEs until the send queue is full or the doorbell record is quiet that long, default 2ms), slow[=DURATION] (before each CQE, default 50us), scan=DURATION (doorbell-record scans), all";

    /// Parses a comma-separated list of fault modes (`RSHMEM_IBGDA_FAULTS`), e.g. `delay=300us,drop=2`
    /// or `all`. Durations take `ns`, `us`, `ms` or `s`. An error names the bad item and the modes.
    pub fn parse(list: &str) -> Result<FaultConfig, String> {
        let mut f = FaultConfig::default();
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = match item.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (item, None),
            };
            let dur = |d: Duration| value.map_or(Ok(d), |v| parse_duration(v).ok_or_else(|| format!("{item:?}: {v:?} is not a duration (e.g. 300us, 2ms)")));
            let num = |d: u64| value.map_or(Ok(d), |v| v.parse::<u64>().map_err(|_| format!("{item:?}: {v:?} is not a number")));
            match name.to_ascii_lowercase().as_str() {
                "none" => {}
                "delay" => f.fetch_delay = dur(Duration::from_micros(200))?,
                "drop" => {
                    let n = num(3)?;
                    if n == 0 || n > u32::MAX as u64 {
                        return Err(format!("{item:?}: N must be at least 1"));
                    }
                    f.drop_doorbell_every = n as u32;
                }
                "wrap" => f.start_index = num(0x1_0000 - 48)?,
                "full" => f.hold_until_full = Some(dur(Duration::from_millis(2))?),
                "slow" => f.cqe_delay = dur(Duration::from_micros(50))?,
                "scan" => f.dbr_scan = Some(dur(Duration::from_micros(500))?),
                "all" if value.is_none() => {
                    f = FaultConfig {
                        fetch_delay: Duration::from_micros(100),
                        drop_doorbell_every: 3,
                        dbr_scan: Some(Duration::from_micros(500)),
                        start_index: 0x1_0000 - 48,
                        hold_until_full: Some(Duration::from_millis(1)),
                        cqe_delay: Duration::from_micros(20),
                    }
                }
                _ => return Err(format!("{item:?} is not a fault mode; expected a comma-separated list of: {}", Self::MODES)),
            }
        }
        Ok(f)
    }

    /// Whether any fault is switched on.
    pub fn any(&self) -> bool {
        *self != FaultConfig::default()
    }
    /// Whether any fault other than `wrap` ([`start_index`](Self::start_index)) is switched on: those
    /// the device-resident NIC model (`crate::nicmodel`, which starts its QPs at any WQE count) cannot
    /// inject.
    pub fn any_but_wrap(&self) -> bool {
        FaultConfig { start_index: 0, ..self.clone() }.any()
    }
    pub(crate) fn scan_interval(&self) -> Option<Duration> {
        match (self.dbr_scan, self.drop_doorbell_every) {
            (Some(d), _) => Some(d),
            (None, 0) => None,
            (None, _) => Some(Duration::from_millis(1)),
        }
    }
}

/// `300us`, `2ms`, `1s`, `500ns` (a bare number is microseconds).
fn parse_duration(v: &str) -> Option<Duration> {
    let v = v.trim();
    let (num, unit) = v.find(|c: char| !c.is_ascii_digit() && c != '.').map_or((v, "us"), |i| (&v[..i], &v[i..]));
    let x: f64 = num.parse().ok().filter(|x: &f64| x.is_finite() && *x >= 0.0)?;
    let ns = match unit.trim() {
        "ns" => x,
        "us" => x * 1e3,
        "ms" => x * 1e6,
        "s" => x * 1e9,
        _ => return None,
    };
    (ns < 60e9).then(|| Duration::from_nanos(ns as u64))
}

/// How often an emulated NIC injected each fault mode of its [`FaultConfig`], over all its QPs
/// ([`Nic::fault_counts`](crate::emu::nic::Nic::fault_counts)): the evidence that a test run under a fault mode met the fault.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// `delay`: doorbells whose WQE fetch waited the fetch delay.
    pub delayed_fetches: u64,
    /// `drop`: doorbells dropped.
    pub dropped_doorbells: u64,
    /// `wrap`: times a QP's WQE count crossed a multiple of 65536 (the 16-bit WQE index wrapped).
    pub index_wraps: u64,
    /// `full`: times WQEs were held back until the send queue filled or the doorbell record went quiet.
    pub holds: u64,
    /// `slow`: CQEs written late.
    pub slow_cqes: u64,
    /// `scan`: doorbell-record scans that found work no doorbell had announced.
    pub scans_with_work: u64,
    /// WQEs the NIC consumed (not a fault: how much work met the faults).
    pub wqes: u64,
}

impl FaultCounts {
    /// The count of fault mode `mode` (a name of [`FaultConfig::parse`]), or None for another name.
    pub fn of(&self, mode: &str) -> Option<u64> {
        self.modes().into_iter().find(|(m, _)| *m == mode).map(|(_, n)| n)
    }
    /// (mode name, count) for every fault mode, in [`FaultConfig::MODES`] order.
    pub fn modes(&self) -> [(&'static str, u64); 6] {
        [
            ("delay", self.delayed_fetches),
            ("drop", self.dropped_doorbells),
            ("wrap", self.index_wraps),
            ("full", self.holds),
            ("slow", self.slow_cqes),
            ("scan", self.scans_with_work),
        ]
    }
}

/// `delay 3, drop 5, wrap 0, full 0, slow 0, scan 5 (120 WQEs)`.
impl core::fmt::Display for FaultCounts {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, (mode, n)) in self.modes().into_iter().enumerate() {
            write!(f, "{}{mode} {n}", if i == 0 { "" } else { ", " })?;
        }
        write!(f, " ({} WQEs)", self.wqes)
    }
}

#[cfg(test)]
mod tests {
    use super::FaultConfig;

    #[test]
    fn wrap_alone_is_a_fault_the_model_can_take() {
        let wrap = FaultConfig::parse("wrap").unwrap();
        assert!(wrap.any() && !wrap.any_but_wrap());
        assert!(FaultConfig::parse("wrap,delay").unwrap().any_but_wrap());
        assert!(FaultConfig::parse("all").unwrap().any_but_wrap());
        assert!(!FaultConfig::default().any_but_wrap());
    }
}
