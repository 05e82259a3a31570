//! rshmrun: starts an rshmem job of N PEs on this host and watches it.
//!
//! `rshmrun -np N [--nodes K [--netns]] [--timeout SECS] [--no-tag] [--no-pe-limit] [--pmi] [--bind-to core] PROGRAM [ARGS...]` and
//! `rshmrun --info`; `rshmrun --selftest` (every remote operation over each usable transport, between
//! two simulated nodes, one line per check); `rshmrun --diagnose` (the checks for GPU-initiated RDMA and the network, see
//! `rshmem::probe::diagnose`); `rshmrun --help`
//! describes the environment each PE gets and what happens when a PE fails.

mod bind;
mod child;
mod cli;
mod job;
mod netns;
mod output;
mod pmi;
mod selftest;
mod signals;
mod split;

use std::io::Write;
use std::time::Duration;

/// Writes `text` to stdout (`--info`, `--diagnose`); a closed stdout is not an error.
fn print_text(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn main() {
    let cli = cli::parse();
    // The environment, read once: what --info shows, what --diagnose and --selftest check.
    let vars = rshmem::config::Vars::from_process();
    if cli.info {
        return print_text(&format!(
            "{}\nEnvironment variables rshmrun sets for each PE:\n\n{}\n{}\n{}",
            rshmem::config::info_text(&vars),
            cli::pe_variables_text(),
            cli::NODES_INFO,
            rshmem::bootstrap::bootstrap_info(&vars)
        ));
    }
    if cli.diagnose {
        // Every check is bounded and a failing one is a line of the report, not an error: exit 0.
        return print_text(&rshmem::probe::report::render(&rshmem::transport::select::report(&vars)));
    }
    if cli.selftest {
        std::process::exit(selftest::run(&vars));
    }
    let mut command = cli.command.into_iter();
    let program = command.next().expect("clap requires PROGRAM unless --info or --diagnose");
    let spec = job::JobSpec {
        np: cli.np.expect("clap requires -np unless --info or --diagnose"),
        program,
        args: command.collect(),
        tag: !cli.no_tag,
        timeout: cli.timeout.map(Duration::from_secs),
        no_pe_limit: cli.no_pe_limit,
        nodes: cli.nodes,
        netns: cli.netns,
        pmi: cli.pmi,
        bind_to: cli.bind_to,
        cuda_connections: vars.raw(cli::CUDA_CONNECTIONS.0).is_none(),
    };
    let code = job::run(&spec);
    std::process::exit(code);
}
