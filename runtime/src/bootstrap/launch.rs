//! What the launcher told this process: PE number and count, node-local numbering, the rendezvous
//! address, the job key and the init timeout. Parsing takes a lookup function instead of reading the
//! process environment, so that it can be tested with any set of variables.

use crate::config::env;
use crate::config::parse::decode_job_key;
use crate::error::{Error, Result};
use std::time::Duration;

/// The launch environment of one PE.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchEnv {
    /// This PE's number.
    pub pe: usize,
    /// The number of PEs in the job.
    pub npes: usize,
    /// Node-local numbering when the launcher gives it (checked against the bootstrap's own view).
    pub local_pe: Option<usize>,
    /// The number of PEs on this node, when the launcher gives it.
    pub local_npes: Option<usize>,
    /// RSHMEM_NODE_ID: the simulated node `rshmrun --nodes` put this PE on (part of its host identity,
    /// see `net::host_identity`); None when unset, as under mpirun/srun.
    pub node_id: Option<usize>,
    /// Which launcher the numbers came from, and through which variables (for messages).
    pub source: &'static str,
    /// host:port of the rendezvous (RSHMEM_BOOTSTRAP).
    pub bootstrap: Option<String>,
    /// Listening socket handed down by rshmrun (PE 0 only).
    pub bootstrap_fd: Option<i32>,
    /// RSHMEM_JOB_KEY; None when unset (refused for jobs of several PEs).
    pub job_key: Option<[u8; 16]>,
    /// The launcher's identity of this job ("Slurm job 1234.0", "Open MPI job 978124801"; "" when
    /// the launcher gives none, as with rshmrun, whose key is new for every job). It is public
    /// information, so it authenticates nothing; it only keeps two jobs that share a key and a
    /// port from merging.
    pub job_id: String,
    /// RSHMEM_BOOTSTRAP_TIMEOUT.
    pub timeout: Duration,
    /// The launcher's key-value store, if the environment names one (PMIx, or a PMI socket): used when
    /// RSHMEM_BOOTSTRAP or RSHMEM_JOB_KEY is missing. An error (a malformed `PMI_FD`) counts only then.
    pub launcher_kvs: Result<Option<super::kvs::KvsFound>>,
}

pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;

/// One launcher's variables for PE number/count and node-local number/count.
struct Source {
    label: &'static str,
    pe: &'static str,
    npes: &'static str,
    local_pe: &'static str,
    local_npes: &'static str,
}

/// Most specific first. rshmrun's own variables win. Open MPI's and PMI's variables are set for each
/// application process by mpirun / mpiexec; under a Slurm allocation those processes also inherit
/// SLURM_PROCID etc. from the daemon srun started on their node (one per node, not per process), so
/// Slurm's variables are only trusted when no MPI launcher's are present (direct `srun` launch).
const SOURCES: &[Source] = &[
    Source {
        label: "rshmrun (RSHMEM_PE, RSHMEM_NPES)",
        pe: env::PE,
        npes: env::NPES,
        local_pe: env::LOCAL_PE,
        local_npes: env::LOCAL_NPES,
    },
    Source {
        label: "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)",
        pe: "OMPI_COMM_WORLD_RANK",
        npes: "OMPI_COMM_WORLD_SIZE",
        local_pe: "OMPI_COMM_WORLD_LOCAL_RANK",
        local_npes: "OMPI_COMM_WORLD_LOCAL_SIZE",
    },
    Source {
        label: "PMI (PMI_RANK, PMI_SIZE)",
        pe: "PMI_RANK",
        npes: "PMI_SIZE",
        // Set by MPICH's Hydra next to PMI_RANK.
        local_pe: "MPI_LOCALRANKID",
        local_npes: "MPI_LOCALNRANKS",
    },
    Source {
        label: "Slurm (SLURM_PROCID, SLURM_NTASKS)",
        pe: "SLURM_PROCID",
        npes: "SLURM_NTASKS",
        local_pe: "SLURM_LOCALID",
        // Computed below from the step layout.
        local_npes: "",
    },
];

fn lookup(get: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

fn number(get: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<Option<usize>> {
    match lookup(get, name) {
        None => Ok(None),
        Some(v) => v
            .parse::<usize>()
            .map(Some)
            .map_err(|_| Error::new(format!("rshmem bootstrap: {name}={v:?} is not a non-negative integer"))),
    }
}

/// Expands Slurm's compressed task counts ("2(x3),1" = 2,2,2,1).
pub(crate) fn parse_slurm_tasks_per_node(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let (count, times) = match item.split_once("(x") {
            Some((c, rest)) => (c, rest.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (item, 1),
        };
        let count = count.parse::<usize>().ok()?;
        if times > 1 << 20 {
            return None;
        }
        out.extend(std::iter::repeat_n(count, times));
    }
    (!out.is_empty()).then_some(out)
}

/// The number of tasks of this Slurm step on this node, when Slurm's variables say it exactly: from
/// the step's per-node task counts (right even when nodes hold different numbers of tasks), else
/// from SLURM_NTASKS_PER_NODE when the tasks are spread evenly over SLURM_NNODES nodes. Otherwise
/// the bootstrap computes it from the host identities.
fn slurm_local_npes(get: &dyn Fn(&str) -> Option<String>, npes: usize) -> Result<Option<usize>> {
    let per_node = lookup(get, "SLURM_STEP_TASKS_PER_NODE").and_then(|t| parse_slurm_tasks_per_node(&t));
    if let (Some(list), Some(node)) = (per_node, number(get, "SLURM_NODEID")?) {
        if list.iter().sum::<usize>() == npes {
            if let Some(&n) = list.get(node) {
                return Ok(Some(n));
            }
        }
    }
    let nodes = match number(get, "SLURM_STEP_NUM_NODES")? {
        Some(n) => Some(n),
        None => number(get, "SLURM_NNODES")?,
    };
    match (number(get, "SLURM_NTASKS_PER_NODE")?, nodes) {
        (Some(per), Some(nodes)) if per.checked_mul(nodes) == Some(npes) => Ok(Some(per)),
        _ => Ok(None),
    }
}

/// Parses RSHMEM_BOOTSTRAP_TIMEOUT (seconds, fractions allowed).
fn parse_timeout(get: &dyn Fn(&str) -> Option<String>) -> Result<Duration> {
    let name = env::BOOTSTRAP_TIMEOUT;
    match lookup(get, name) {
        None => Ok(Duration::from_secs_f64(DEFAULT_TIMEOUT_SECS)),
        Some(v) => env::parse_positive_secs(&v).map_err(|why| Error::new(format!("rshmem bootstrap: {name}={v:?}: {why}"))),
    }
}

/// Parses RSHMEM_JOB_KEY (32 hex digits); None when unset.
///
/// There is deliberately no fallback that derives a key from the launcher's variables (job id, node
/// list, ...): those are visible to every user of the machine (ps, squeue, /proc), so a key made
/// from them would authenticate nothing. A job of several PEs without a key is refused instead
/// (`Bootstrap::from_launch_env`).
pub fn parse_job_key(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<[u8; 16]>> {
    let name = env::JOB_KEY;
    let Some(v) = lookup(get, name) else { return Ok(None) };
    decode_job_key(&v).map(Some).map_err(|why| Error::new(format!("rshmem bootstrap: {name} {why}")))
}

/// The job identity that the launcher of `source_pe_var` gives (see `LaunchEnv::job_id`).
fn job_identity(get: &dyn Fn(&str) -> Option<String>, source_pe_var: &str) -> String {
    let id = match source_pe_var {
        "OMPI_COMM_WORLD_RANK" => lookup(get, "PMIX_NAMESPACE")
            .or_else(|| lookup(get, "OMPI_MCA_ess_base_jobid"))
            .map(|j| format!("Open MPI job {j}")),
        "PMI_RANK" => lookup(get, "PMIX_NAMESPACE")
            .or_else(|| lookup(get, "PMI_KVSNAME"))
            .map(|j| format!("PMI job {j}")),
        "SLURM_PROCID" => lookup(get, "SLURM_JOB_ID").or_else(|| lookup(get, "SLURM_JOBID")).map(|j| {
            match lookup(get, "SLURM_STEP_ID").or_else(|| lookup(get, "SLURM_STEPID")) {
                Some(step) => format!("Slurm job {j}.{step}"),
                None => format!("Slurm job {j}"),
            }
        }),
        _ => None,
    };
    id.map(|s| super::wire::truncate(&s, super::wire::MAX_JOB_ID).to_string()).unwrap_or_default()
}

/// The first launcher (most specific first) whose PE number and count `get` gives: the source, the
/// PE and the count (None: no launcher's variables, a single PE).
fn find_source(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<(&'static Source, usize, usize)>> {
    for src in SOURCES {
        let pe = number(get, src.pe)?;
        let npes = number(get, src.npes)?;
        match (pe, npes) {
            (None, None) => continue,
            (Some(pe), Some(npes)) => return Ok(Some((src, pe, npes))),
            (Some(_), None) | (None, Some(_)) => {
                let (have, miss) = if pe.is_some() { (src.pe, src.npes) } else { (src.npes, src.pe) };
                return Err(Error::new(format!(
                    "rshmem bootstrap: {have} is set but {miss} is not: both are needed to place this PE"
                )));
            }
        }
    }
    Ok(None)
}

/// This process's PE number as the launcher's variables give it (through `get`), when they give a
/// valid one: for messages before the launch environment is checked, so that an error about any
/// other variable still names the PE.
pub fn launcher_pe(get: impl Fn(&str) -> Option<String>) -> Option<usize> {
    match find_source(&get) {
        Ok(Some((_, pe, npes))) => (pe < npes).then_some(pe),
        Ok(None) => Some(0),
        Err(_) => None,
    }
}

/// Reads the launch environment through `get` (a variable's value, None when unset).
pub fn parse_launch_env(get: impl Fn(&str) -> Option<String>) -> Result<LaunchEnv> {
    let get: &dyn Fn(&str) -> Option<String> = &get;
    let found = find_source(get)?;
    let job_id = found.map(|(src, _, _)| job_identity(get, src.pe)).unwrap_or_default();
    let (source, pe, npes, local_pe, local_npes) = match found {
        None => ("no launcher variables (a single PE)", 0, 1, None, None),
        Some((src, pe, npes)) => {
            let local_pe = number(get, src.local_pe)?;
            let local_npes =
                if src.pe == "SLURM_PROCID" { slurm_local_npes(get, npes)? } else { number(get, src.local_npes)? };
            if let Some(n) = local_npes {
                if n == 0 || n > npes {
                    return Err(Error::new(format!(
                        "rshmem bootstrap: {}: {n} PEs on this node, but {npes} in the whole job",
                        src.label
                    )));
                }
            }
            (src.label, pe, npes, local_pe, local_npes)
        }
    };
    if npes == 0 {
        return Err(Error::new(format!("rshmem bootstrap: {source}: the number of PEs is 0")));
    }
    if pe >= npes {
        return Err(Error::new(format!("rshmem bootstrap: {source}: PE {pe} is out of range for {npes} PEs")));
    }
    if npes > u32::MAX as usize {
        return Err(Error::new(format!("rshmem bootstrap: {source}: {npes} PEs is too many")));
    }
    if let Some(lp) = local_pe {
        let n = local_npes.unwrap_or(npes);
        if lp >= n {
            return Err(Error::new(format!(
                "rshmem bootstrap: {source}: node-local PE {lp} is out of range for {n} PEs on this node"
            )));
        }
    }
    let node_id = number(get, env::NODE_ID)?;
    let bootstrap = lookup(get, env::BOOTSTRAP);
    let bootstrap_fd = match lookup(get, env::BOOTSTRAP_FD) {
        None => None,
        Some(v) => Some(v.parse::<i32>().ok().filter(|&fd| fd >= 0).ok_or_else(|| {
            Error::new(format!("rshmem bootstrap: {}={v:?} is not a file descriptor number", env::BOOTSTRAP_FD))
        })?),
    };
    Ok(LaunchEnv {
        pe,
        npes,
        local_pe,
        local_npes,
        node_id,
        source,
        bootstrap,
        bootstrap_fd,
        job_key: parse_job_key(get)?,
        job_id,
        timeout: parse_timeout(get)?,
        launcher_kvs: super::kvs::find_kvs(get),
    })
}

pub(crate) use super::wire::secs;

/// "PE 3" / "PEs 1, 4-7, 9": a PE list for messages, ranges compressed and at most eight runs shown
/// ("... and 12 more"), so that a thousand PEs make a short line. `pes` ascending. The one formatting of
/// PE lists for the runtime and rshmrun.
pub fn pe_list(pes: &[usize]) -> String {
    const SHOWN: usize = 8;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &p in pes {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == p => *last = p,
            _ => runs.push((p, p)),
        }
    }
    let items: Vec<String> = runs
        .iter()
        .take(SHOWN)
        .map(|&(a, b)| match b - a {
            0 => a.to_string(),
            1 => format!("{a}, {b}"),
            _ => format!("{a}-{b}"),
        })
        .collect();
    let mut s = format!("{} {}", if pes.len() == 1 { "PE" } else { "PEs" }, items.join(", "));
    if runs.len() > SHOWN {
        let more: usize = runs[SHOWN..].iter().map(|&(a, b)| b - a + 1).sum();
        s.push_str(&format!(" and {more} more"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn nothing_set_is_a_single_pe() {
        let e = parse_launch_env(env_of(&[])).unwrap();
        assert_eq!((e.pe, e.npes, e.local_pe, e.local_npes), (0, 1, None, None));
        assert_eq!(e.node_id, None);
        assert_eq!(e.job_key, None);
        assert_eq!(e.job_id, "");
        assert_eq!(e.timeout, Duration::from_secs(30));
        assert_eq!(e.bootstrap, None);
    }

    #[test]
    fn rshmrun_vars() {
        let e = parse_launch_env(env_of(&[
            ("RSHMEM_PE", "2"),
            ("RSHMEM_NPES", "4"),
            ("RSHMEM_LOCAL_PE", "0"),
            ("RSHMEM_LOCAL_NPES", "2"),
            ("RSHMEM_BOOTSTRAP", "127.0.0.1:4567"),
            ("RSHMEM_JOB_KEY", "000102030405060708090a0b0c0d0e0f"),
            ("RSHMEM_BOOTSTRAP_TIMEOUT", "0.5"),
            ("RSHMEM_BOOTSTRAP_FD", "7"),
            // Lower-priority launchers' variables are ignored.
            ("OMPI_COMM_WORLD_RANK", "9"),
            ("SLURM_PROCID", "9"),
        ]))
        .unwrap();
        assert_eq!((e.pe, e.npes, e.local_pe, e.local_npes), (2, 4, Some(0), Some(2)));
        assert_eq!(e.bootstrap.as_deref(), Some("127.0.0.1:4567"));
        assert_eq!(e.bootstrap_fd, Some(7));
        assert_eq!(e.job_key, Some(std::array::from_fn(|i| i as u8)));
        assert_eq!(e.job_id, "");
        assert_eq!(e.timeout, Duration::from_millis(500));
        assert!(e.source.starts_with("rshmrun"));
    }

    #[test]
    fn node_id() {
        let base = [("RSHMEM_PE", "3"), ("RSHMEM_NPES", "4"), ("RSHMEM_LOCAL_PE", "1"), ("RSHMEM_LOCAL_NPES", "2")];
        let with = |v: &'static str| {
            let mut pairs = base.to_vec();
            pairs.push(("RSHMEM_NODE_ID", v));
            parse_launch_env(env_of(&pairs))
        };
        assert_eq!(with("1").unwrap().node_id, Some(1));
        assert_eq!(with(" 0 ").unwrap().node_id, Some(0));
        assert_eq!(parse_launch_env(env_of(&base)).unwrap().node_id, None);
        for bad in ["-1", "x", "1.5", "node1"] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.contains("RSHMEM_NODE_ID") && e.contains("not a non-negative integer"), "{bad}: {e}");
        }
    }

    #[test]
    fn open_mpi_vars() {
        let e = parse_launch_env(env_of(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            // Inherited from the per-node daemon under a Slurm allocation: must not win.
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_ID", "77"),
            ("OMPI_MCA_ess_base_jobid", "978124801"),
        ]))
        .unwrap();
        assert_eq!((e.pe, e.npes, e.local_pe, e.local_npes), (5, 8, Some(1), Some(4)));
        assert!(e.source.starts_with("Open MPI"));
        // The identity comes from the launcher that placed the PE, not from the allocation around it.
        assert_eq!(e.job_id, "Open MPI job 978124801");
    }

    #[test]
    fn slurm_vars() {
        let e = parse_launch_env(env_of(&[
            ("SLURM_PROCID", "6"),
            ("SLURM_NTASKS", "7"),
            ("SLURM_LOCALID", "2"),
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "4,3"),
            ("SLURM_NTASKS_PER_NODE", "4"),
            ("SLURM_JOB_ID", "1234"),
            ("SLURM_STEP_ID", "0"),
        ]))
        .unwrap();
        assert_eq!((e.pe, e.npes, e.local_pe, e.local_npes), (6, 7, Some(2), Some(3)));
        assert_eq!(e.job_id, "Slurm job 1234.0");
        assert!(e.source.starts_with("Slurm"));
        // Without the step layout: SLURM_NTASKS_PER_NODE, when the tasks are spread evenly.
        let e = parse_launch_env(env_of(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NTASKS_PER_NODE", "2"),
            ("SLURM_NNODES", "2"),
        ]))
        .unwrap();
        assert_eq!((e.pe, e.npes, e.local_pe, e.local_npes), (1, 4, Some(1), Some(2)));
        // Uneven (--ntasks-per-node=4 with 6 tasks): not exact, so left to the bootstrap.
        let e = parse_launch_env(env_of(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "6"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NTASKS_PER_NODE", "4"),
            ("SLURM_NNODES", "2"),
        ]))
        .unwrap();
        assert_eq!((e.pe, e.npes, e.local_pe, e.local_npes), (5, 6, Some(1), None));
        // Neither: computed at bootstrap.
        let e =
            parse_launch_env(env_of(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4"), ("SLURM_LOCALID", "3")])).unwrap();
        assert_eq!((e.pe, e.npes, e.local_pe, e.local_npes), (3, 4, Some(3), None));
    }

    #[test]
    fn pmi_vars() {
        let e = parse_launch_env(env_of(&[("PMI_RANK", "3"), ("PMI_SIZE", "4")])).unwrap();
        assert_eq!((e.pe, e.npes, e.local_pe, e.local_npes), (3, 4, None, None));
        assert!(e.source.starts_with("PMI"));
    }

    #[test]
    fn slurm_task_counts() {
        assert_eq!(parse_slurm_tasks_per_node("2(x3),1"), Some(vec![2, 2, 2, 1]));
        assert_eq!(parse_slurm_tasks_per_node("4"), Some(vec![4]));
        assert_eq!(parse_slurm_tasks_per_node("x"), None);
        assert_eq!(parse_slurm_tasks_per_node("2(x3"), None);
    }

    #[test]
    fn the_pe_is_known_when_another_launch_variable_is_bad() {
        let pe = |pairs: &[(&str, &str)]| launcher_pe(env_of(pairs));
        assert_eq!(pe(&[("RSHMEM_PE", "1"), ("RSHMEM_NPES", "2"), ("RSHMEM_BOOTSTRAP_TIMEOUT", "soon"), ("RSHMEM_NODE_ID", "x")]), Some(1));
        assert_eq!(pe(&[("OMPI_COMM_WORLD_RANK", "3"), ("OMPI_COMM_WORLD_SIZE", "4"), ("RSHMEM_JOB_KEY", "abc")]), Some(3));
        assert_eq!(pe(&[("RSHMEM_BOOTSTRAP_TIMEOUT", "soon")]), Some(0));
        assert_eq!(pe(&[("RSHMEM_PE", "2"), ("RSHMEM_NPES", "2")]), None);
        assert_eq!(pe(&[("RSHMEM_PE", "x"), ("RSHMEM_NPES", "2")]), None);
        assert_eq!(pe(&[("RSHMEM_PE", "1")]), None);
    }

    #[test]
    fn bad_values_are_named() {
        let err = |pairs: &[(&str, &str)]| parse_launch_env(env_of(pairs)).unwrap_err().to_string();
        assert!(err(&[("RSHMEM_PE", "x"), ("RSHMEM_NPES", "2")]).contains("RSHMEM_PE=\"x\""));
        assert!(err(&[("RSHMEM_PE", "1")]).contains("RSHMEM_NPES is not"));
        assert!(err(&[("RSHMEM_PE", "4"), ("RSHMEM_NPES", "4")]).contains("out of range"));
        assert!(err(&[("RSHMEM_JOB_KEY", "abc")]).contains("32 hex digits"));
        assert!(err(&[("RSHMEM_JOB_KEY", &"0".repeat(32))]).contains("all zeros"));
        assert!(err(&[("RSHMEM_BOOTSTRAP_TIMEOUT", "-1")]).contains("RSHMEM_BOOTSTRAP_TIMEOUT"));
        assert!(err(&[("RSHMEM_BOOTSTRAP_TIMEOUT", "soon")]).contains("positive number"));
        assert!(err(&[("RSHMEM_BOOTSTRAP_FD", "-3")]).contains("RSHMEM_BOOTSTRAP_FD"));
        assert!(err(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
        ])
        .contains("node-local PE 3"));
        assert!(err(&[("RSHMEM_PE", "1"), ("RSHMEM_NPES", "2"), ("RSHMEM_LOCAL_NPES", "4")])
            .contains("4 PEs on this node, but 2"));
    }

    #[test]
    fn formatting() {
        assert_eq!(pe_list(&[3]), "PE 3");
        assert_eq!(pe_list(&[2, 3]), "PEs 2, 3");
        assert_eq!(pe_list(&[1, 4, 5, 6, 7, 9]), "PEs 1, 4-7, 9");
        assert_eq!(pe_list(&(0..10).collect::<Vec<_>>()), "PEs 0-9");
        let odd: Vec<usize> = (1..40).step_by(2).collect();
        assert_eq!(pe_list(&odd), "PEs 1, 3, 5, 7, 9, 11, 13, 15 and 12 more");
        assert_eq!(secs(Duration::from_secs(30)), "30");
        assert_eq!(secs(Duration::from_millis(500)), "0.5");
    }
}
