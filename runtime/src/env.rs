//! Every environment variable rshmem reads, in one table. `rshmrun --info` prints this table; the runtime
//! reads variables only through the helpers here, so the table cannot fall behind the code.

use crate::error::{Error, Result};

/// One environment variable: name, default (as text; "" = unset) and meaning.
pub struct EnvVar {
    pub name: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

pub const PE: &str = "RSHMEM_PE";
pub const NPES: &str = "RSHMEM_NPES";
pub const LOCAL_PE: &str = "RSHMEM_LOCAL_PE";
pub const LOCAL_NPES: &str = "RSHMEM_LOCAL_NPES";
pub const BOOTSTRAP: &str = "RSHMEM_BOOTSTRAP";
pub const BOOTSTRAP_FD: &str = "RSHMEM_BOOTSTRAP_FD";
pub const JOB_KEY: &str = "RSHMEM_JOB_KEY";
pub const BOOTSTRAP_TIMEOUT: &str = "RSHMEM_BOOTSTRAP_TIMEOUT";
pub const BOOTSTRAP_IFNAME: &str = "RSHMEM_BOOTSTRAP_IFNAME";
pub const SYMMETRIC_SIZE: &str = "RSHMEM_SYMMETRIC_SIZE";
pub const BACKEND: &str = "RSHMEM_BACKEND";
pub const DEBUG: &str = "RSHMEM_DEBUG";
pub const WAIT_TIMEOUT: &str = "RSHMEM_WAIT_TIMEOUT";
pub const STATUS_FD: &str = "RSHMEM_STATUS_FD";
pub const CUMEM_GRANULE: &str = "RSHMEM_CUMEM_GRANULE";

pub const VARS: &[EnvVar] = &[
    EnvVar { name: PE, default: "", meaning: "this process's PE number (set by rshmrun; else taken from SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK)" },
    EnvVar { name: NPES, default: "", meaning: "number of PEs in the job (set by rshmrun; else SLURM_NTASKS, OMPI_COMM_WORLD_SIZE or PMI_SIZE)" },
    EnvVar { name: LOCAL_PE, default: "", meaning: "PE number among the PEs of this node (set by rshmrun; else SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK; else computed at bootstrap from host identity)" },
    EnvVar { name: LOCAL_NPES, default: "", meaning: "number of PEs on this node (set by rshmrun; else computed at bootstrap)" },
    EnvVar { name: BOOTSTRAP, default: "", meaning: "host:port of the bootstrap rendezvous (PE 0 listens there). rshmrun sets it; under Slurm/Open MPI/PMI set it yourself to PE 0's host and a free port" },
    EnvVar { name: BOOTSTRAP_FD, default: "", meaning: "internal: listening socket handed to PE 0 by rshmrun" },
    EnvVar { name: JOB_KEY, default: "", meaning: "secret shared by the PEs of one job (32 hex digits); bootstrap connections without it are refused. rshmrun makes a random one; unset outside rshmrun means no key" },
    EnvVar { name: BOOTSTRAP_TIMEOUT, default: "30", meaning: "seconds to wait for all PEs to reach the bootstrap at init; after that every PE fails, naming the missing PEs" },
    EnvVar { name: BOOTSTRAP_IFNAME, default: "", meaning: "network interface for the bootstrap listener (unique-id API); default: the interface of the default route, else the first non-loopback IPv4 interface, else loopback" },
    EnvVar { name: SYMMETRIC_SIZE, default: "1G", meaning: "symmetric heap size per PE in bytes; suffixes k, m, g, t (powers of 1024)" },
    EnvVar { name: CUMEM_GRANULE, default: "512m", meaning: "CUDA backend: the heap is backed (and grows) in granules of this size (rounded up to the GPU's allocation granularity)" },
    EnvVar { name: BACKEND, default: "auto", meaning: "auto (CUDA when a GPU is usable, else CPU), cuda or cpu" },
    EnvVar { name: DEBUG, default: "warn", meaning: "log level: error, warn, info or debug" },
    EnvVar { name: WAIT_TIMEOUT, default: "0", meaning: "CPU backend: seconds a wait_until/signal_wait_until/barrier may spin before the PE aborts naming the call (0 = wait forever)" },
];

/// Reads a variable as text ("" when unset).
pub fn get(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.is_empty())
}

/// Reads a variable that must parse as an integer, naming the variable and the value on error.
pub fn get_usize(name: &str) -> Result<Option<usize>> {
    match get(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|_| Error::new(format!("{name}={v:?} is not a non-negative integer"))),
    }
}

/// Parses a size with an optional k/m/g/t suffix (powers of 1024).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()?.to_ascii_lowercase() {
        'k' => (&t[..t.len() - 1], 1u64 << 10),
        'm' => (&t[..t.len() - 1], 1u64 << 20),
        'g' => (&t[..t.len() - 1], 1u64 << 30),
        't' => (&t[..t.len() - 1], 1u64 << 40),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// Reads a size variable, default when unset, clear error when malformed.
pub fn get_size(name: &str, default: u64) -> Result<u64> {
    match get(name) {
        None => Ok(default),
        Some(v) => parse_size(&v).ok_or_else(|| {
            Error::new(format!("{name}={v:?} is not a size (examples: 1073741824, 512m, 2g)"))
        }),
    }
}

/// Reads a duration in seconds (fractions allowed; 0 means "none"), naming the variable on error.
pub fn get_secs(name: &str) -> Result<Option<std::time::Duration>> {
    match get(name) {
        None => Ok(None),
        Some(v) => match v.trim().parse::<f64>() {
            Ok(s) if s == 0.0 => Ok(None),
            Ok(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Ok(Some(std::time::Duration::from_secs_f64(s))),
            _ => Err(Error::new(format!("{name}={v:?} is not a number of seconds (examples: 30, 0.5; 0 = no limit)"))),
        },
    }
}

/// RSHMEM_WAIT_TIMEOUT: how long any wait (device waits on the CPU backend, host barriers, collectives)
/// may last before the PE fails naming what it waits for; None = wait forever.
pub fn wait_timeout() -> Result<Option<std::time::Duration>> {
    get_secs(WAIT_TIMEOUT)
}

/// Renders the table for `rshmrun --info`.
pub fn info_text() -> String {
    let mut s = String::from("Environment variables read by rshmem:\n\n");
    for v in VARS {
        let dflt = if v.default.is_empty() { "(unset)" } else { v.default };
        let cur = get(v.name).map(|c| format!("  [now: {c}]")).unwrap_or_default();
        s.push_str(&format!("{}\n    default: {dflt}{cur}\n    {}\n", v.name, v.meaning));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes() {
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("512m"), Some(512 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }
}
