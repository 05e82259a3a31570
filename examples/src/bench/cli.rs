//! The command line of rshmem-bench, and the options its sections share.

use clap::Parser;

/// A byte count: a number with an optional k, m or g suffix (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mul) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1usize << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (&t[..], 1),
    };
    num.parse::<usize>().ok().and_then(|n| n.checked_mul(mul)).ok_or_else(|| format!("{s:?} is not a byte count (e.g. 4096, 64k, 256m)"))
}

/// The sections of `--cases`.
pub const SECTIONS: &[&str] = &["bw", "lat", "pingpong", "barrier", "all_pairs", "host", "rate", "quiet"];
pub const DEFAULT_SECTIONS: &[&str] = &["bw", "lat", "pingpong", "barrier", "all_pairs", "host"];

#[derive(Parser, Debug)]
#[command(name = "rshmem-bench", about = "rshmem's benchmarks between PE 0 and a peer (run under rshmrun -np 2 or more)")]
pub struct Cli {
    /// Blocks per launch of the bandwidth and rate kernels (default: 132 on GPUs, 1 on the CPU backend).
    #[arg(long)]
    pub grid: Option<u32>,
    /// Threads per block (default: 512 on GPUs, 2 on the CPU backend).
    #[arg(long)]
    pub threads: Option<u32>,
    /// Fewer sizes (x16 steps) and 3 repeats instead of 5.
    #[arg(long)]
    pub quick: bool,
    /// Microseconds the host waits between the timed launches of a case (default 0: back to back). A
    /// harness that did work between launches (as this one once allocated and freed each launch's
    /// argument buffer) left the GPU idle meanwhile; this compares like with like.
    #[arg(long, default_value_t = 0)]
    pub rep_pause_us: u64,
    /// Largest transfer (bytes; k/m/g suffixes; default 256m on GPUs, 16m on the CPU backend).
    #[arg(long, value_parser = parse_bytes)]
    pub max_bytes: Option<usize>,
    /// bw: the rounds of a row rotate over this many bytes of both buffers (k/m/g suffixes), region
    /// after region of the row's size, so that they measure the link and not lines cached from the
    /// round before (the device method: rotate inputs larger than the caches). Default 0: every round
    /// moves the same bytes, as NVSHMEM's perftests do. A row larger than this does not rotate.
    #[arg(long, value_parser = parse_bytes, default_value = "0")]
    pub rotate_bytes: usize,
    /// PE 0's partner (default: the first PE on another node, else PE 1).
    #[arg(long)]
    pub peer: Option<usize>,
    /// Only the posting-rate measurement (see `posting`), then exit.
    #[arg(long)]
    pub posting: bool,
    /// --posting: threads per block of the grid cases, comma-separated (default 32,64,128,256 on GPUs,
    /// 1,2 on the CPU backend); each runs on --grid blocks.
    #[arg(long, value_delimiter = ',')]
    pub posting_threads: Option<Vec<u32>>,
    /// Sections, comma-separated: bw, lat, pingpong, barrier, all_pairs, host, rate, quiet; `default`
    /// (the first six) or `all`.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub cases: Vec<String>,
    /// rate: blocks per launch, comma-separated (default 1,32,132 on GPUs, 1,4 on the CPU backend).
    #[arg(long, value_delimiter = ',')]
    pub rate_grids: Option<Vec<u32>>,
    /// rate: put sizes, comma-separated (default 8,64,512,4k).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    pub rate_sizes: Option<Vec<usize>>,
    /// rate: operations per launch, all blocks together (default 20000 to another node, 200000 to a
    /// mapped peer; the CPU backend 2000).
    #[arg(long)]
    pub rate_ops: Option<u64>,
    /// quiet: bytes per launch, comma-separated (default 1m,16m,256m; sizes above --max-bytes are left out).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    pub quiet_sizes: Option<Vec<usize>>,
    /// quiet: blocks (default 32 on GPUs, 2 on the CPU backend).
    #[arg(long)]
    pub quiet_grid: Option<u32>,
    /// quiet: threads per block (default 1024 on GPUs, 4 on the CPU backend).
    #[arg(long)]
    pub quiet_threads: Option<u32>,
    /// quiet: putmem_nbi_block calls per block (default 100).
    #[arg(long, default_value_t = 100)]
    pub quiet_calls: u64,
}

#[derive(Clone, Copy)]
pub struct Opt {
    pub grid: u32,
    pub threads: u32,
    pub quick: bool,
    pub max_bytes: usize,
    pub reps: usize,
    pub peer: Option<usize>,
    /// "p2p" or "remote": how PE 0 reaches its peer (printed in every RESULT line).
    pub route: &'static str,
    /// `--posting`: only the posting-rate measurement (`posting`), then exit.
    pub posting: bool,
}

/// `--posting-threads`, checked (1 to 1024 each).
pub fn posting_threads(cli: &Cli, gpu: bool) -> Result<Vec<u32>, rshmem::Error> {
    let v = cli.posting_threads.clone().unwrap_or(if gpu { vec![32, 64, 128, 256] } else { vec![1, 2] });
    if v.is_empty() || v.iter().any(|&t| t == 0 || t > 1024) {
        return Err(rshmem::Error::new(format!("--posting-threads {v:?}: 1 to 1024 threads per block each")));
    }
    Ok(v)
}

pub fn opts(cli: &Cli, gpu: bool) -> Result<Opt, rshmem::Error> {
    let o = Opt {
        grid: cli.grid.unwrap_or(if gpu { 132 } else { 1 }),
        threads: cli.threads.unwrap_or(if gpu { 512 } else { 2 }),
        quick: cli.quick,
        max_bytes: cli.max_bytes.unwrap_or(if gpu { 256 << 20 } else { 16 << 20 }),
        reps: if cli.quick { 3 } else { 5 },
        peer: cli.peer,
        route: "p2p",
        posting: cli.posting,
    };
    if o.grid == 0 || o.threads == 0 || o.threads > 1024 {
        return Err(rshmem::Error::new(format!("--grid {} --threads {}: at least 1 block and 1 to 1024 threads", o.grid, o.threads)));
    }
    Ok(o)
}

/// The sections `--cases` asks for.
pub fn sections(cli: &Cli) -> Result<Vec<&'static str>, rshmem::Error> {
    let mut v = vec![];
    for c in &cli.cases {
        match c.trim() {
            "default" => v.extend_from_slice(DEFAULT_SECTIONS),
            "all" => v.extend_from_slice(SECTIONS),
            name => match SECTIONS.iter().find(|s| **s == name) {
                Some(s) => v.push(*s),
                None => return Err(rshmem::Error::new(format!("--cases: unknown section {name:?} (one of {}, default, all)", SECTIONS.join(", ")))),
            },
        }
    }
    Ok(v)
}
