//! Command line of rshmrun.

use std::ffi::OsString;

use clap::{CommandFactory, FromArgMatches, Parser};
use rshmem::config::env;

const USAGE: &str = "rshmrun -np N [--nodes K [--netns]] [--timeout SECS] [--no-tag] [--no-pe-limit] [--pmi] [--bind-to core] PROGRAM [ARGS]...\n       rshmrun --info\n       rshmrun --diagnose\n       rshmrun --selftest";

/// The most PEs an rshmem job can have: the size of the per-PE tables in the device state.
pub const MAX_PES: usize = rshmem_device::state::MAX_PES;

/// Starts an rshmem job: N processes (PEs) of PROGRAM on this host.
///
/// Each PE gets its PE number, the job size, the address of the bootstrap rendezvous and a job key in its
/// environment (listed below), so that `rshmem::init()` (or `rshmem_init()`) finds the other PEs. Output
/// of every PE is forwarded line by line, prefixed with `[pe N] `. When a PE fails (non-zero exit or
/// death by a signal), rshmrun terminates the others and exits non-zero.
#[derive(Parser, Debug)]
#[command(name = "rshmrun", version, override_usage = USAGE)]
pub struct Cli {
    /// Number of PEs (processes) to start on this host; at least 1, at most the number of PEs an rshmem
    /// job can have (see below). `-np N` works too, as for mpirun.
    #[arg(
        short = 'n',
        long = "np",
        value_name = "N",
        value_parser = parse_np,
        allow_negative_numbers = true,
        required_unless_present_any = ["info", "diagnose", "selftest"]
    )]
    pub np: Option<u32>,

    /// Split the PEs into K simulated nodes on this host: contiguous blocks of PEs (node 0 gets the first
    /// block; when K does not divide N, the first N % K nodes get one PE more). PEs of different nodes
    /// share nothing (no mapped heaps, no shared-memory host barrier), exactly as on separate machines:
    /// they reach each other only through the bootstrap and the remote transport. K is 1 to N.
    #[arg(long, value_name = "K", value_parser = parse_nodes, allow_negative_numbers = true)]
    pub nodes: Option<u32>,

    /// Run each node in its own private network namespace (needs root), joined to the others by a
    /// bridge: node k has address 10.99.0.(k+1) and its own loopback, and the bootstrap listens on node
    /// 0's address, so traffic between nodes crosses real (virtual) network interfaces. The namespaces
    /// vanish with the job, on every exit path. Without --nodes, one node.
    #[arg(long)]
    pub netns: bool,

    /// Terminate the job if it runs longer than SECS seconds, start-up included (rshmrun then names the
    /// PEs still running and, where the PEs record it, the collective they wait in, and exits with 124).
    #[arg(long, value_name = "SECS", value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: Option<u64>,

    /// Forward the PEs' output without the `[pe N] ` prefix (still line by line).
    #[arg(long)]
    pub no_tag: bool,

    /// Allow more PEs than an rshmem job can have, for programs that do not use rshmem (e.g. to start
    /// thousands of plain processes with rshmrun's output tagging and failure handling). An rshmem
    /// program started this way fails in its init. When the limit of open files is too low for all PEs'
    /// pipes at once, start-up then waits for earlier PEs to end instead of refusing the job.
    #[arg(long)]
    pub no_pe_limit: bool,

    /// Serve PMI-1 to the PEs (the "simple PMI" wire of MPICH's process managers): each PE also gets
    /// PMI_FD, PMI_RANK and PMI_SIZE, so that a program whose bootstrap is a PMI-1 client (NVSHMEM's
    /// default) starts under rshmrun unchanged. A PE's `PMI_Abort(code)` ends the job with that status,
    /// naming the PE (1 for a code whose low 8 bits are 0, such as 256); a PE that spoke PMI and exits
    /// or closes PMI_FD without PMI finalize ends the job at once, named. The key-value space holds at
    /// most 4096 keys and 1 MiB per PE.
    #[arg(long)]
    pub pmi: bool,

    /// Bind each PE to CPUs of its own: `core` splits the CPUs rshmrun may use (its affinity mask) into
    /// equal contiguous shares in PE order, the first PEs getting one more when they do not divide
    /// evenly; when PEs outnumber CPUs, PE i gets CPU i mod the count alone. `none` (the default): the
    /// PEs inherit rshmrun's CPUs. Every thread a PE starts (its blocks on the CPU backend, its proxy
    /// threads) stays in its share; with --nodes, the simulated nodes' PEs share this host's CPUs.
    #[arg(long = "bind-to", value_name = "WHAT", value_enum, default_value = "none")]
    pub bind_to: crate::bind::BindTo,

    /// Print the environment variables rshmem reads and those rshmrun sets, then exit.
    #[arg(long, exclusive = true)]
    pub info: bool,

    /// Check this host for GPU-initiated RDMA (IBGDA) and the network a job would use, one line per
    /// check (RDMA devices and ports, GPUDirect RDMA, DevX and the GPU-mapped UAR, GPU-NIC PCIe
    /// affinity, bootstrap and proxy interfaces, the remote transport chosen), then exit (status 0).
    #[arg(long, exclusive = true)]
    pub diagnose: bool,

    /// Run every remote operation over each remote transport this machine can use (IBGDA on the NIC or
    /// the emulated NIC, the TCP proxy) between two simulated nodes, check the results, and print one
    /// line per check with what it measured and what to do on a failure; then exit (status 0: all
    /// passed). Runs rshmem-test-pe and rshmem-bench from rshmrun's directory.
    #[arg(long, exclusive = true)]
    pub selftest: bool,

    /// The program each PE runs, and its arguments (passed through unchanged, even those starting with
    /// `-`).
    #[arg(value_name = "PROGRAM", trailing_var_arg = true, num_args = 1.., required_unless_present_any = ["info", "diagnose", "selftest"])]
    pub command: Vec<OsString>,
}

/// `text` as a whole number from `min` up to `T`'s largest, or an error saying what `what` takes (a
/// negative number, zero or garbage is named as such, never mistaken for an option).
fn whole<T: TryFrom<u128>>(text: &str, min: u128, what: &str) -> Result<T, String> {
    let t = text.trim();
    let takes = format!("{what} takes a whole number of at least {min}");
    if t.starts_with('-') && t[1..].bytes().all(|b| b.is_ascii_digit()) && t.len() > 1 {
        return Err(format!("{t} is negative: {takes}"));
    }
    match t.parse::<u128>() {
        Ok(n) if n < min => Err(format!("{n} is too small: {takes}")),
        Ok(n) => T::try_from(n).map_err(|_| format!("{n} is too large: {takes}")),
        Err(_) => Err(format!("{t:?} is not a number: {takes}")),
    }
}

/// `-np N`: a number of PEs, at least 1.
fn parse_np(text: &str) -> Result<u32, String> {
    whole(text, 1, "-np (the number of PEs)")
}
/// `--nodes K`: checked against -np after parsing.
fn parse_nodes(text: &str) -> Result<u32, String> {
    whole(text, 0, "--nodes (the number of simulated nodes)")
}
/// `--timeout SECS`: at least 1 s.
fn parse_timeout(text: &str) -> Result<u64, String> {
    whole(text, 1, "--timeout (seconds)")
}

/// What `--info` says about simulated nodes.
pub const NODES_INFO: &str = "Simulated nodes:\n\n  \
    --nodes K  splits the PEs into K nodes of contiguous PEs (the first N % K nodes get one more); PEs of \
    different nodes share no memory and no host barrier, as on separate hosts\n  \
    --netns    (root) each node in its own network namespace, joined by a bridge; node k is 10.99.0.(k+1) \
    and the bootstrap listens on node 0's 10.99.0.1\n";

/// The CUDA variable rshmrun sets for the PEs unless its own environment sets it, and the value: the
/// most hardware work queues per GPU, so that the streams of the CUDA backend's proxy (copies, atomics)
/// do not share a queue with a user kernel that spins waiting for them. The library itself never sets
/// a variable; under another launcher it prints a hint naming this one.
pub const CUDA_CONNECTIONS: (&str, &str) = ("CUDA_DEVICE_MAX_CONNECTIONS", "32");

/// The variables rshmrun sets in each PE's environment, with their meaning.
pub fn pe_variables() -> Vec<(&'static str, &'static str)> {
    vec![
        (env::PE, "this PE's number, 0 to N-1"),
        (env::NPES, "N, the number of PEs"),
        (env::LOCAL_PE, "this PE's number among the PEs of its node (same as RSHMEM_PE without --nodes)"),
        (env::LOCAL_NPES, "the number of PEs on this PE's node (N without --nodes)"),
        (env::NODE_ID, "with --nodes K only: this PE's simulated node, 0 to K-1 (part of its host identity)"),
        (
            env::BOOTSTRAP,
            "127.0.0.1:PORT (with --netns 10.99.0.1:PORT, node 0's address), the bootstrap rendezvous; PE 0 \
             accepts on it, the others connect",
        ),
        (
            env::BOOTSTRAP_FD,
            "PE 0 only: number of the inherited file descriptor of the listening socket bound to \
             RSHMEM_BOOTSTRAP (rshmrun binds it before starting the PEs, so the port cannot be taken)",
        ),
        (env::JOB_KEY, "32 random hex digits, the same for all PEs of this job and new for every job"),
        (
            env::STATUS_FD,
            "number of the inherited file descriptor of the job status board (shared memory where each PE \
             records the host collective it is in; rshmrun reads it to name a stuck PE on --timeout); \
             unset when rshmrun could not create one",
        ),
        (
            CUDA_CONNECTIONS.0,
            "32 unless rshmrun's own environment sets it: the most hardware work queues per GPU, so that \
             the streams of rshmem's proxy never queue behind a user kernel that waits for them",
        ),
        ("PMI_FD", "with --pmi only: number of the inherited file descriptor of this PE's connection to rshmrun's PMI-1 server"),
        ("PMI_RANK", "with --pmi only: this PE's number (as RSHMEM_PE)"),
        ("PMI_SIZE", "with --pmi only: N (as RSHMEM_NPES)"),
    ]
}

/// The variable table as text, one variable per line.
pub fn pe_variables_text() -> String {
    let width = pe_variables().iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut s = String::new();
    for (name, meaning) in pe_variables() {
        s.push_str(&format!("  {name:width$}  {meaning}\n"));
    }
    s
}

/// The part of `--help` after the options.
fn long_help_tail() -> String {
    format!(
        "Environment of each PE, set by rshmrun:\n{}\n\
         Every other variable (RSHMEM_SYMMETRIC_SIZE, RSHMEM_BOOTSTRAP_TIMEOUT, ...) is passed through from \
         rshmrun's environment; `rshmrun --info` lists every variable rshmem reads.\n\n\
         Processes: each PE runs in its own process group, with stdin from /dev/null and its stdout and \
         stderr forwarded line by line to rshmrun's stdout and stderr. Processes that a PE leaves running in its \
         process group when it exits are terminated.\n\n\
         Failures and signals: when a PE exits non-zero or is killed by a signal, rshmrun sends SIGTERM to \
         the process groups of the other PEs, SIGKILL 2 s later to those still running, and exits with that \
         PE's exit code (128 + the signal number if it was killed). SIGINT and SIGTERM sent to rshmrun are \
         forwarded to every PE (SIGHUP is forwarded as SIGTERM); PEs still running 2 s later are killed. \
         A second signal kills all PEs at once. Signals ignored when rshmrun starts (as under nohup) stay \
         ignored, for the PEs too. --timeout ends the job the same way and exits with 124, after naming the PEs still running and, from \
         the job status board (RSHMEM_STATUS_FD), which PE the others wait for and what it last entered. \
         If rshmrun itself dies, its PEs get SIGTERM.\n\n\
         Start-up: rshmrun starts the PEs one after the other. A PE that fails while the others are \
         still being started, a signal, or --timeout stops the start-up at once: the PEs not yet started \
         are never started. Each PE takes two of rshmrun's open files (its stdout and stderr pipes); \
         rshmrun raises its soft limit of open files (ulimit -n) as far as the hard limit allows (the PEs \
         get the limit rshmrun was started with) and refuses, before starting anything, a job that would \
         not fit; with --no-pe-limit it starts such a job anyway, waiting during start-up for earlier PEs \
         to end whenever it holds as many pipes as the limit allows. -np is limited to the {MAX_PES} PEs an \
         rshmem job can have in this build; --no-pe-limit lifts that for programs that do not use rshmem.\n\n\
         Simulated nodes: --nodes K splits the N PEs into K nodes of contiguous PEs (N=4, K=3: PEs 0-1, 2, \
         3). Each PE gets RSHMEM_NODE_ID and the node-local RSHMEM_LOCAL_PE and RSHMEM_LOCAL_NPES of its \
         node; the runtime makes the node id part of the host identity, so PEs of different nodes map no \
         heaps of each other and share no host barrier, as on separate hosts (the same binaries run \
         across real hosts under mpirun or srun, where the variable is unset). --netns (root only) also \
         puts each node in its own network namespace, joined by a bridge (node k is 10.99.0.(k+1)); the \
         namespaces disappear with the job.\n\n\
         Diagnosis: `rshmrun --diagnose` checks, one line each (PASS, FAIL, INFO or SKIP, with what to do \
         about a FAIL), what GPU-initiated RDMA (IBGDA) needs on a real NIC: the RDMA devices and per port \
         the link layer, state and GID (/sys/class/infiniband); GPUDirect RDMA (dma-buf or nvidia_peermem); \
         DevX and mapping a UAR into the GPU (builds with the `verbs` feature); which NIC is nearest each GPU \
         on PCIe (PIX, PXB, PHB, SYS) and the RSHMEM_IB_HCA to set; then the interfaces the bootstrap and \
         the proxy would use and the remote transport a job spanning nodes would use \
         (RSHMEM_REMOTE_TRANSPORT). Without a GPU the GPU checks are SKIP lines. It reads sysfs and asks the \
         CUDA driver, every probe with a time limit, starts nothing, and exits 0 once the report is printed: \
         a FAIL line is information, not an error.\n\n\
         Exit status: 0 when every PE exited 0; the failed PE's status as above; 128 + N after signal N \
         reached rshmrun (SIGHUP gives 129); 124 after --timeout; 126 or 127 when PROGRAM cannot be run; 2 \
         for a bad command line; 1 when the job cannot be started for another reason.\n\n\
         Example:\n  rshmrun -np 4 ./my_app --size 1m",
        pe_variables_text()
    )
}

/// Rewrites `-np` (the spelling of mpirun and nvshmrun) to `--np`: clap has no single-dash long options,
/// and would read `-np 4` as `-n p`. Only rshmrun's own options are rewritten: scanning stops at `--` or
/// at the first argument that is neither an option nor an option's value, which is PROGRAM.
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    while let Some(arg) = args.next() {
        let bytes = arg.as_encoded_bytes();
        if bytes == b"--" || !bytes.starts_with(b"-") {
            out.push(arg);
            break;
        }
        let takes_value = matches!(bytes, b"-np" | b"-n" | b"--np" | b"--timeout" | b"--nodes");
        if bytes == b"-np" {
            out.push("--np".into());
        } else if let Some(value) = arg.to_str().and_then(|a| a.strip_prefix("-np=")) {
            out.push(format!("--np={value}").into());
        } else {
            out.push(arg);
        }
        if takes_value {
            if let Some(value) = args.next() {
                out.push(value);
            }
        }
    }
    out.extend(args);
    out
}

/// Parses rshmrun's command line; prints the error or help and exits on bad input, `--help`, `--version`.
pub fn parse() -> Cli {
    parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// Parses `args` (the first one is the program name).
pub fn parse_from(args: impl IntoIterator<Item = OsString>) -> Result<Cli, clap::Error> {
    let mut command = Cli::command().after_long_help(long_help_tail());
    let matches = command.try_get_matches_from_mut(normalize_args(args))?;
    let cli = Cli::from_arg_matches(&matches)?;
    if let (Some(nodes), Some(np)) = (cli.nodes, cli.np) {
        let why = if nodes == 0 {
            Some("a job runs on at least one node".to_string())
        } else if nodes > np {
            Some(format!("more nodes than the {np} PEs of -np {np}: every node needs at least one PE"))
        } else if cli.netns && nodes as usize > crate::netns::MAX_NODES {
            Some(format!("--netns gives at most {} nodes (addresses 10.99.0.1 to 10.99.0.254)", crate::netns::MAX_NODES))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(command.error(
                clap::error::ErrorKind::ValueValidation,
                format!("--nodes {nodes}: {why}; nothing was started. --nodes takes 1 to {np} here"),
            ));
        }
    }
    if let Some(np) = cli.np {
        if np as usize > MAX_PES && !cli.no_pe_limit {
            return Err(command.error(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "-np {np} is more than the {MAX_PES} PEs an rshmem job can have in this build \
                     (rshmem_device::state::MAX_PES); nothing was started. To start more processes of a \
                     program that does not use rshmem, add --no-pe-limit"
                ),
            ));
        }
    }
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn np_spellings() {
        for a in [
            &["rshmrun", "-np", "3", "prog"][..],
            &["rshmrun", "-np=3", "prog"],
            &["rshmrun", "-n", "3", "prog"],
            &["rshmrun", "-n3", "prog"],
            &["rshmrun", "--np", "3", "prog"],
            &["rshmrun", "--np=3", "prog"],
        ] {
            let cli = parse_from(args(a)).unwrap();
            assert_eq!(cli.np, Some(3), "{a:?}");
            assert_eq!(cli.command, args(&["prog"]));
        }
    }

    #[test]
    fn program_arguments_pass_through() {
        let cli = parse_from(args(&[
            "rshmrun",
            "--no-tag",
            "-np",
            "2",
            "--timeout",
            "5",
            "sh",
            "-c",
            "exit 3",
            "-np",
            "--info",
        ]))
        .unwrap();
        assert_eq!(cli.np, Some(2));
        assert_eq!(cli.timeout, Some(5));
        assert!(cli.no_tag);
        assert_eq!(cli.command, args(&["sh", "-c", "exit 3", "-np", "--info"]));
        let cli = parse_from(args(&["rshmrun", "-np", "1", "--", "prog", "-x"])).unwrap();
        assert_eq!(cli.command, args(&["prog", "-x"]));
    }

    #[test]
    fn bad_command_lines() {
        for a in [
            &["rshmrun", "-np", "0", "prog"][..],
            &["rshmrun", "-np", "2"],
            &["rshmrun", "prog"],
            &["rshmrun"],
            &["rshmrun", "-np", "2", "--timeout", "0", "prog"],
            &["rshmrun", "--info", "-np", "2"],
            &["rshmrun", "--diagnose", "-np", "2", "prog"],
            &["rshmrun", "--diagnose", "--info"],
            &["rshmrun", "--diagnose", "prog"],
        ] {
            assert!(parse_from(args(a)).is_err(), "{a:?}");
        }
        assert!(parse_from(args(&["rshmrun", "--info"])).unwrap().info);
        let cli = parse_from(args(&["rshmrun", "--diagnose"])).unwrap();
        assert!(cli.diagnose && !cli.info && cli.np.is_none() && cli.command.is_empty());
    }

    #[test]
    fn negative_and_bad_numbers_are_named() {
        for (a, want) in [
            (&["rshmrun", "-np", "-1", "prog"][..], "invalid value '-1' for '--np <N>': -1 is negative: -np (the number of PEs) takes a whole number of at least 1"),
            (&["rshmrun", "-np=-4", "prog"], "-4 is negative: -np (the number of PEs)"),
            (&["rshmrun", "-n", "-2", "prog"], "-2 is negative: -np"),
            (&["rshmrun", "-np", "0", "prog"], "0 is too small: -np (the number of PEs) takes a whole number of at least 1"),
            (&["rshmrun", "-np", "x", "prog"], "\"x\" is not a number: -np"),
            (&["rshmrun", "-np", "99999999999", "prog"], "99999999999 is too large: -np"),
            (&["rshmrun", "-np", "2", "--timeout", "-5", "prog"], "-5 is negative: --timeout (seconds)"),
            (&["rshmrun", "-np", "2", "--nodes", "-1", "prog"], "-1 is negative: --nodes"),
        ] {
            let e = parse_from(args(a)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{a:?}");
            assert!(e.to_string().contains(want), "{a:?}: {e}");
            assert!(!e.to_string().contains("unexpected argument"), "{a:?}: {e}");
        }
    }

    #[test]
    fn nodes() {
        let cli = parse_from(args(&["rshmrun", "--nodes", "2", "-np", "4", "--netns", "prog", "--nodes", "9"])).unwrap();
        assert_eq!((cli.nodes, cli.np, cli.netns), (Some(2), Some(4), true));
        assert_eq!(cli.command, args(&["prog", "--nodes", "9"]));
        let cli = parse_from(args(&["rshmrun", "-np", "3", "--nodes=3", "prog"])).unwrap();
        assert_eq!((cli.nodes, cli.netns), (Some(3), false));
        for (a, want) in [
            (&["rshmrun", "--nodes", "5", "-np", "4", "prog"][..], "--nodes 5: more nodes than the 4 PEs"),
            (&["rshmrun", "--nodes", "0", "-np", "4", "prog"], "--nodes 0: a job runs on at least one node"),
            (&["rshmrun", "--nodes", "x", "-np", "4", "prog"], "invalid value 'x'"),
        ] {
            let e = parse_from(args(a)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{a:?}");
            assert!(e.to_string().contains(want), "{a:?}: {e}");
        }
    }

    #[test]
    fn pe_limit() {
        let max = MAX_PES.to_string();
        let over = (MAX_PES + 1).to_string();
        assert_eq!(parse_from(args(&["rshmrun", "-np", &max, "prog"])).unwrap().np, Some(MAX_PES as u32));
        let e = parse_from(args(&["rshmrun", "-np", &over, "prog"])).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(msg.contains(&max) && msg.contains(&over) && msg.contains("--no-pe-limit"), "{msg}");
        let cli = parse_from(args(&["rshmrun", "--no-pe-limit", "-np", "10000", "prog"])).unwrap();
        assert_eq!((cli.np, cli.no_pe_limit), (Some(10000), true));
    }

    #[test]
    fn help_lists_the_variables() {
        let e = parse_from(args(&["rshmrun", "--help"])).unwrap_err();
        let help = e.to_string();
        for (name, _) in pe_variables() {
            assert!(help.contains(name), "{name} missing from --help");
        }
        assert!(help.contains("-np N"));
        assert!(help.contains("--nodes <K>") && help.contains("--netns") && help.contains("RSHMEM_NODE_ID"), "{help}");
        assert!(help.contains("rshmrun --diagnose") && help.contains("RSHMEM_IB_HCA"), "{help}");
    }
}
