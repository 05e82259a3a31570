//! Every environment variable rshmem reads, in one table, with the check of each value and the parsers
//! of the values. `rshmrun --info` prints this table (`config::info_text`); init reads the environment
//! once and types it from this table (`config::Config`), so the table cannot fall behind the code.

use crate::error::{Error, Result};

/// One environment variable: name, default (as text; "" = unset), meaning, and the check its value
/// must pass (run for every set variable at init by [`validate_vars`]; `Err` says what is expected).
pub struct EnvVar {
    /// The variable's name (`RSHMEM_...`).
    pub name: &'static str,
    /// The value used when it is unset, as text ("": none).
    pub default: &'static str,
    /// What it does, as `rshmrun --info` prints it.
    pub meaning: &'static str,
    /// Validates a set value; `Err` says what is expected.
    pub check: fn(&str) -> std::result::Result<(), String>,
}

/// This process's PE number (set by rshmrun, else taken from the launcher's rank variable).
pub const PE: &str = "RSHMEM_PE";
/// Number of PEs in the job.
pub const NPES: &str = "RSHMEM_NPES";
/// This PE's number among the PEs of its node.
pub const LOCAL_PE: &str = "RSHMEM_LOCAL_PE";
/// Number of PEs on this node.
pub const LOCAL_NPES: &str = "RSHMEM_LOCAL_NPES";
/// The simulated node of this PE (`rshmrun --nodes N`).
pub const NODE_ID: &str = "RSHMEM_NODE_ID";
/// `host:port` of the bootstrap rendezvous, where PE 0 listens.
pub const BOOTSTRAP: &str = "RSHMEM_BOOTSTRAP";
/// Internal: the listening socket rshmrun hands to PE 0.
pub const BOOTSTRAP_FD: &str = "RSHMEM_BOOTSTRAP_FD";
/// The secret shared by the PEs of one job (32 hex digits); connections without it are refused.
pub const JOB_KEY: &str = "RSHMEM_JOB_KEY";
/// Seconds to wait for every PE to reach the bootstrap at init.
pub const BOOTSTRAP_TIMEOUT: &str = "RSHMEM_BOOTSTRAP_TIMEOUT";
/// Network interface of the unique-id API's bootstrap listener (NVSHMEM: `NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME`).
pub const BOOTSTRAP_IFNAME: &str = "RSHMEM_BOOTSTRAP_IFNAME";
/// Bytes of room for symmetric allocations per PE (NVSHMEM: `NVSHMEM_SYMMETRIC_SIZE`, honoured as an alias).
pub const SYMMETRIC_SIZE: &str = "RSHMEM_SYMMETRIC_SIZE";
/// The platform backend: auto, cuda or cpu.
pub const BACKEND: &str = "RSHMEM_BACKEND";
/// Log level: error, warn, info or debug (NVSHMEM: `NVSHMEM_DEBUG`).
pub const DEBUG: &str = "RSHMEM_DEBUG";
/// Seconds a wait may last before the PE fails naming what it waits for (0: forever).
pub const WAIT_TIMEOUT: &str = "RSHMEM_WAIT_TIMEOUT";
/// Internal: the job status board (a memfd) rshmrun hands to each PE.
pub const STATUS_FD: &str = "RSHMEM_STATUS_FD";
/// CUDA backend: the size of the granules that back the heap.
pub const CUMEM_GRANULE: &str = "RSHMEM_CUMEM_GRANULE";
/// CUDA backend: the smallest host-issued or on-stream collective whose bulk runs on a whole grid.
pub const ONSTREAM_GRID_MIN: &str = "RSHMEM_ONSTREAM_GRID_MIN";
/// `RSHMEM_ONSTREAM_GRID_MIN`'s default (bytes).
pub const ONSTREAM_GRID_MIN_DEFAULT: u64 = 0;
/// Transport to PEs on other nodes: auto, none, proxy or ibgda (NVSHMEM: `NVSHMEM_REMOTE_TRANSPORT`).
pub const REMOTE_TRANSPORT: &str = "RSHMEM_REMOTE_TRANSPORT";
/// Proxy transport: slots of the request ring.
pub const PROXY_SLOTS: &str = "RSHMEM_PROXY_SLOTS";
/// Proxy transport: network interface whose IPv4 address the proxy listens on.
pub const PROXY_IFNAME: &str = "RSHMEM_PROXY_IFNAME";
/// Proxy transport: whether the engine's threads poll before they sleep (auto, on, off).
pub const PROXY_SPIN: &str = "RSHMEM_PROXY_SPIN";
/// Proxy transport: lanes (connections) between two PEs on different nodes, or auto.
pub const PROXY_LANES: &str = "RSHMEM_PROXY_LANES";
/// Proxy transport: bytes of each lane's receive ring (and of its reply ring).
pub const PROXY_RING: &str = "RSHMEM_PROXY_RING";
/// Proxy transport: heap bytes one lane serves before the next (a request's lane is its offset).
pub const PROXY_LANE_BYTES: &str = "RSHMEM_PROXY_LANE_BYTES";
/// Proxy transport: largest single-thread put the thread copies into the request ring itself.
pub const PROXY_THREAD_STAGE: &str = "RSHMEM_PROXY_THREAD_STAGE";
/// Proxy transport: whether every PE prints its proxy statistics at finalize.
pub const PROXY_STATS: &str = "RSHMEM_PROXY_STATS";
/// Proxy transport: which threads of a warp's or block's staged put fence (one or every).
pub const PROXY_GROUP_FENCE: &str = "RSHMEM_PROXY_GROUP_FENCE";
/// How the proxy carries remote operations: auto, tcp or verbs (`parse_proxy_provider`, [`ProxyProvider`]).
pub const PROXY_PROVIDER: &str = "RSHMEM_PROXY_PROVIDER";
/// RDMA devices (and ports) the ibgda transport may use (NVSHMEM: `NVSHMEM_HCA_LIST`).
pub const IB_HCA: &str = "RSHMEM_IB_HCA";

/// ibgda transport: RC queue pairs to each PE on another node (NVSHMEM: `NVSHMEM_IBGDA_NUM_RC_PER_PE`).
pub const IBGDA_QPS_PER_PE: &str = "RSHMEM_IBGDA_QPS_PER_PE";
/// ibgda transport: WQEBBs of each send queue (NVSHMEM: `NVSHMEM_QP_DEPTH`).
pub const IBGDA_QP_DEPTH: &str = "RSHMEM_IBGDA_QP_DEPTH";
/// ibgda transport, emulated NIC: the faults to inject.
pub const IBGDA_FAULTS: &str = "RSHMEM_IBGDA_FAULTS";
/// ibgda transport, emulated NIC: full, or ack (complete WQEs without moving data).
pub const IBGDA_EMULATOR: &str = "RSHMEM_IBGDA_EMULATOR";
/// ibgda transport, emulated NIC: where the return slots live (queues or device).
pub const IBGDA_RET_SLOTS: &str = "RSHMEM_IBGDA_RET_SLOTS";

/// Every variable the runtime reads, with its default, meaning and check (`rshmrun --info` prints it).
pub const VARS: &[EnvVar] = &[
    EnvVar { name: PE, default: "", meaning: "this process's PE number (set by rshmrun; else taken from SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK)", check: is_count },
    EnvVar { name: NPES, default: "", meaning: "number of PEs in the job (set by rshmrun; else SLURM_NTASKS, OMPI_COMM_WORLD_SIZE or PMI_SIZE)", check: is_positive },
    EnvVar { name: LOCAL_PE, default: "", meaning: "PE number among the PEs of this node (set by rshmrun; else SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK; else computed at bootstrap from host identity)", check: is_count },
    EnvVar { name: LOCAL_NPES, default: "", meaning: "number of PEs on this node (set by rshmrun; else computed at bootstrap)", check: is_positive },
    EnvVar { name: NODE_ID, default: "", meaning: "simulated node of this PE (set by `rshmrun --nodes N`): PEs with different node ids are on different nodes even on one host (no mapped heaps, no shared host barrier), as on separate machines; unset under mpirun/srun, where the host decides", check: is_count },
    EnvVar { name: BOOTSTRAP, default: "", meaning: "host:port of the bootstrap rendezvous (PE 0 listens there). rshmrun sets it; under Slurm/Open MPI/PMI set it yourself to PE 0's host and a free port", check: is_host_port },
    EnvVar { name: BOOTSTRAP_FD, default: "", meaning: "internal: listening socket handed to PE 0 by rshmrun", check: is_fd },
    EnvVar { name: JOB_KEY, default: "", meaning: "secret shared by the PEs of one job (32 hex digits, not all zero); bootstrap and fd-passing connections without it are refused. rshmrun and the unique-id API make a random one; outside rshmrun a job of several PEs must set it (export RSHMEM_JOB_KEY=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n'))", check: is_job_key },
    EnvVar { name: BOOTSTRAP_TIMEOUT, default: "30", meaning: "seconds to wait for all PEs to reach the bootstrap at init; after that every PE fails, naming the missing PEs", check: is_positive_secs },
    EnvVar { name: BOOTSTRAP_IFNAME, default: "", meaning: "network interface for the bootstrap listener (unique-id API); default: the interface of the default route, else the first non-loopback IPv4 interface, else loopback", check: is_ifname },
    EnvVar { name: SYMMETRIC_SIZE, default: "1G", meaning: "room for symmetric allocations per PE in bytes (the runtime's 1 MiB internal area comes on top, as in NVSHMEM); suffixes k, m, g, t (powers of 1024)", check: is_size },
    EnvVar { name: ONSTREAM_GRID_MIN, default: "0", meaning: "CUDA backend: a host-issued or on-stream broadcast, fcollect, alltoall or reduction of at least this many bytes (the bytes each member receives or, for a reduction, reads from all members) and above 8 KiB, among PEs of this node, runs in three kernels: a synchronization, the data on a whole grid, a synchronization; a smaller one runs in one kernel of one block (one launch instead of three, one block's copies). 0: every one above 8 KiB uses the grid (2 x H100: 64k and 1m were no faster overall, bench/results/2026-11-27-h100x2.md call W). Suffixes k, m", check: is_size },
    EnvVar { name: CUMEM_GRANULE, default: "512m", meaning: "CUDA backend: the heap is backed (and grows) in granules of this size (rounded up to the GPU's allocation granularity)", check: is_size },
    EnvVar { name: BACKEND, default: "auto", meaning: "auto (CUDA when a GPU is usable, else CPU), cuda or cpu", check: is_backend },
    EnvVar { name: REMOTE_TRANSPORT, default: "auto", meaning: "transport for PEs on other nodes: auto (when the job has PEs on other nodes: ibgda on a NIC that passes every `rshmrun --diagnose` check, else proxy; nothing for a single-node job), none (they are not reachable; device calls to them fail naming the PE), proxy (a CPU proxy thread per PE carries requests over TCP to the peer's proxy) or ibgda (GPU threads post mlx5 work requests to the NIC themselves; without a usable NIC, to rshmem's emulated NIC, which carries them over TCP; `rshmrun --diagnose` says which). PEs of this node always use p2p (mapped heaps)", check: is_remote_transport },
    EnvVar { name: PROXY_SLOTS, default: "4096", meaning: "proxy transport: slots of the PE's request ring (a power of two from 1 to 1048576); each slot is 64 bytes plus a 1 KiB staging chunk (puts travel in the ring), in pinned host memory on CUDA", check: is_proxy_slots },
    EnvVar { name: PROXY_LANES, default: "auto", meaning: "proxy transport: lanes (TCP connections, each with its receive ring and thread) between two PEs on different nodes, 1 to 16; a request takes lane (heap offset / RSHMEM_PROXY_LANE_BYTES) modulo this. auto: one per two CPUs this process may use per PE of its node, at most 4. The job uses the largest count any PE asks for", check: is_proxy_lanes },
    EnvVar { name: PROXY_RING, default: "4m", meaning: "proxy transport: bytes of each lane's receive ring and of its reply ring (a power of two of at least 1m), in pinned host memory mapped into the GPU on CUDA: what a lane may have received and not yet applied. Suffixes k, m", check: is_proxy_ring },
    EnvVar { name: PROXY_LANE_BYTES, default: "16k", meaning: "proxy transport: heap bytes one lane serves before the next (a power of two from 4k to 1g): requests to the same bytes take one lane and keep their order; a larger transfer is spread over the lanes. Suffixes k, m, g", check: is_lane_bytes },
    EnvVar { name: PROXY_THREAD_STAGE, default: "4k", meaning: "proxy transport: a single thread's put of at most this many bytes is copied into the request ring by the thread itself (the proxy sends it from there); a larger one is read by the proxy with a DMA copy. Warp and block puts are always copied in by their threads. Suffixes k, m", check: is_thread_stage },
    EnvVar { name: PROXY_IFNAME, default: "", meaning: "proxy transport: network interface whose IPv4 address the proxy listens on; default: the address this PE uses to reach the bootstrap rendezvous (RSHMEM_BOOTSTRAP), else as RSHMEM_BOOTSTRAP_IFNAME", check: is_ifname },
    EnvVar { name: PROXY_SPIN, default: "auto", meaning: "proxy transport: on (the engine's sender polls its request ring for up to 1 ms, and its lane threads their sockets for up to 50 us, after each piece of work before they sleep, saving a scheduler wake-up per hop), off (they sleep at once), auto (on when this process may use at least 8 CPUs: on the 2-core CI machine polling threads took the CPUs the PEs needed)", check: is_proxy_spin },
    EnvVar { name: PROXY_GROUP_FENCE, default: "one", meaning: "proxy transport: in a warp's or block's put staged into the request ring, one (the thread that posts the request fences at system scope after the group's barrier) or every (every thread fences before the barrier: one system fence per warp; for measuring the difference)", check: is_group_fence },
    EnvVar { name: PROXY_PROVIDER, default: "auto", meaning: "proxy transport: how the proxy thread reaches its peers: auto (RDMA WRITE/READ/atomics through the NIC's verbs when an RDMA device has an active port and the heap registers with it on every PE, else TCP; init says which and why), verbs (or its alias rdma: the same, but a job where it cannot be set up stops with the reason) or tcp (frames over TCP to the peer's proxy). Operations the NIC cannot do (32-bit atomics, set/swap/and/or/xor, signal set) always go over TCP. Not used by the ibgda transport's own proxy", check: is_proxy_provider },
    EnvVar { name: PROXY_STATS, default: "off", meaning: "proxy transport: on (every PE prints at finalize one line `rshmem proxy stats [PE n]: ...`: the requests its sender drained, the time it spent framing them, the puts merged, fences and credit waits, the sendmsg calls and bytes, the recv calls, bytes and frames of its lanes, apply-kernel launches, ACKs and replies: which stage limits a remote figure) or off", check: is_switch },
    EnvVar { name: IBGDA_QPS_PER_PE, default: "2", meaning: "ibgda transport: RC queue pairs to each PE on another node (1 to 16); a thread uses its warp's (the warp's index in the grid modulo this)", check: is_ibgda_qps },
    EnvVar { name: IBGDA_QP_DEPTH, default: "512", meaning: "ibgda transport: WQEBBs (64-byte units) of each send queue, a power of two from 64 to 32768 (NVSHMEM_QP_DEPTH); a real NIC needs at least 128", check: is_ibgda_depth },
    EnvVar { name: IBGDA_FAULTS, default: "none", meaning: "ibgda transport, emulated NIC: fault injection to expose ordering bugs in the posting code, a comma-separated list of: delay[=DURATION] (between a doorbell and the WQE fetch), drop[=N] (every N-th doorbell; the doorbell record still counts), wrap[=START] (WQE counts start near a 16-bit wrap), full[=DURATION] (hold WQEs until the send queue is full), slow[=DURATION] (before each completion), scan=DURATION, all", check: is_ibgda_faults },
    EnvVar { name: IBGDA_RET_SLOTS, default: "queues", meaning: "ibgda transport, emulated NIC: where the return slots (fetched values) live: queues (beside its CQs, in the memory its queues share with the GPU) or device (GPU memory, as on a real NIC, written through the platform's copies before the CQE)", check: is_ibgda_ret_slots },
    EnvVar { name: IBGDA_EMULATOR, default: "full", meaning: "ibgda transport, emulated NIC: full (executes every operation at its target over TCP), ack (completes every well-formed WQE at once without moving data: measures the posting side alone; results are not valid) or device (as ack, with the send queues, doorbell records, doorbell words and CQs in GPU memory and the NIC a persistent GPU kernel, a host thread on the CPU backend: what posting costs GPU threads on a real ConnectX; for rshmem-bench --posting; results are not valid)", check: is_ibgda_emulator },
    EnvVar { name: DEBUG, default: "warn", meaning: "log level: error, warn, info or debug", check: is_level },
    EnvVar { name: WAIT_TIMEOUT, default: "0", meaning: "seconds a wait may last before the PE fails naming what it waits for: every host-side wait (host barriers, the runtime's and the bootstrap's collectives, waits on the proxy and the IBGDA NIC) and, on the CPU backend, device-side waits (wait_until, signal_wait_until, barriers); on GPUs, of the waits inside kernels only a team synchronization's (barriers, syncs, the collectives' exchanges: the PE stops naming the member it waits for and both synchronization counts); other device waits: use rshmrun --timeout. The error names the PEs not yet arrived and what they last entered; 0 = wait forever", check: is_secs },
    EnvVar { name: STATUS_FD, default: "", meaning: "internal: the job status board rshmrun hands to each PE (a memfd; see --timeout)", check: is_fd },
    EnvVar { name: IB_HCA, default: "", meaning: "ibgda transport: the RDMA devices (and ports) it may use, comma-separated names with an optional :port (mlx5_0:1,mlx5_3); a leading ^ excludes the listed ones instead (^mlx5_2). Default: every mlx5 (ConnectX) device with a usable port. `rshmrun --diagnose` checks them and names the one nearest each GPU", check: crate::config::parse::check_hca_list },
];

/// NVSHMEM's names honoured as aliases of rshmem's variables, as (NVSHMEM name, rshmem name). Programs
/// written for NVSHMEM set them before init (NVSHMEM's perftests set NVSHMEM_SYMMETRIC_SIZE). The
/// rshmem name wins when both are set; an alias's value gets the same check, under its own name.
pub const ALIASES: &[(&str, &str)] = &[("NVSHMEM_SYMMETRIC_SIZE", SYMMETRIC_SIZE)];

/// The NVSHMEM alias of rshmem variable `name`, if it has one.
pub(crate) fn alias_of(name: &str) -> Option<&'static str> {
    ALIASES.iter().find(|(_, r)| *r == name).map(|(a, _)| *a)
}

// ------------------------------------------------------------------ per-variable checks

fn is_count(v: &str) -> std::result::Result<(), String> {
    v.trim().parse::<usize>().map(|_| ()).map_err(|_| "expected a non-negative integer".into())
}
fn is_positive(v: &str) -> std::result::Result<(), String> {
    match v.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(()),
        _ => Err("expected a positive integer".into()),
    }
}
fn is_fd(v: &str) -> std::result::Result<(), String> {
    match v.trim().parse::<i32>() {
        Ok(n) if n >= 0 => Ok(()),
        _ => Err("expected a file descriptor number".into()),
    }
}
fn is_host_port(v: &str) -> std::result::Result<(), String> {
    crate::config::parse::addr_syntax(v.trim()).map_err(|why| format!("expected host:port, e.g. node001:29500 ({why})"))
}
fn is_job_key(v: &str) -> std::result::Result<(), String> {
    crate::config::parse::decode_job_key(v.trim()).map(|_| ())
}
fn is_secs(v: &str) -> std::result::Result<(), String> {
    parse_secs(v).map(|_| ()).ok_or_else(|| "expected a number of seconds (examples: 30, 0.5; 0 = no limit)".into())
}
fn is_positive_secs(v: &str) -> std::result::Result<(), String> {
    parse_positive_secs(v).map(|_| ())
}
fn is_ifname(v: &str) -> std::result::Result<(), String> {
    if v.trim().is_empty() || v.len() >= 16 || v.contains(['/', ' ']) {
        Err("expected a network interface name (e.g. eth0)".into())
    } else {
        Ok(())
    }
}
fn is_size(v: &str) -> std::result::Result<(), String> {
    parse_size(v).map(|_| ()).ok_or_else(|| "expected a size in bytes, with an optional k/m/g/t suffix (examples: 1073741824, 512m, 2g)".into())
}
fn is_backend(v: &str) -> std::result::Result<(), String> {
    parse_backend(v).map(|_| ()).ok_or_else(|| "expected auto, cpu or cuda".into())
}
fn is_proxy_provider(v: &str) -> std::result::Result<(), String> {
    parse_proxy_provider(v).map(|_| ())
}
/// What `RSHMEM_PROXY_PROVIDER` asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum ProxyProvider {
    /// `auto`: verbs when usable, else TCP.
    #[default]
    Auto,
    /// `tcp`: always TCP.
    Tcp,
    /// `verbs` (or `rdma`): verbs, or the job stops with the reason.
    Verbs,
}
/// RSHMEM_PROXY_PROVIDER's value: auto, tcp or verbs (`rdma` = verbs; any case, spaces trimmed).
pub fn parse_proxy_provider(v: &str) -> std::result::Result<ProxyProvider, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(ProxyProvider::Auto),
        "tcp" => Ok(ProxyProvider::Tcp),
        "verbs" | "rdma" => Ok(ProxyProvider::Verbs),
        _ => Err(format!("expected auto, tcp or verbs (got {v:?})")),
    }
}
/// RSHMEM_BACKEND's value, canonical: "auto", "cpu" or "cuda" ("gpu" = "cuda"); None when garbage.
pub fn parse_backend(v: &str) -> Option<&'static str> {
    match v.trim().to_ascii_lowercase().as_str() {
        "auto" => Some("auto"),
        "cpu" => Some("cpu"),
        "cuda" | "gpu" => Some("cuda"),
        _ => None,
    }
}
fn is_proxy_slots(v: &str) -> std::result::Result<(), String> {
    parse_proxy_slots(v).map(|_| ())
}
/// A `RSHMEM_PROXY_SLOTS` value: a power of two from 1 to the ring's maximum.
pub fn parse_proxy_slots(v: &str) -> std::result::Result<usize, String> {
    let max = rshmem_device::remote::proxy::MAX_SLOTS;
    match v.trim().parse::<u64>() {
        Ok(n) if n >= 1 && n <= max && n.is_power_of_two() => Ok(n as usize),
        _ => Err(format!("expected a power of two from 1 to {max}")),
    }
}
fn is_thread_stage(v: &str) -> std::result::Result<(), String> {
    parse_thread_stage(v).map(|_| ())
}
/// A `RSHMEM_PROXY_THREAD_STAGE` value: bytes, at most the largest staged request.
pub fn parse_thread_stage(v: &str) -> std::result::Result<u64, String> {
    let max = rshmem_device::remote::proxy::MAX_STAGED;
    match parse_size(v) {
        Some(n) if n <= max => Ok(n),
        _ => Err(format!("expected a size from 0 to {max} bytes (suffixes k, m)")),
    }
}
fn is_proxy_lanes(v: &str) -> std::result::Result<(), String> {
    parse_proxy_lanes(v).map(|_| ())
}
/// A `RSHMEM_PROXY_LANES` value: Some(count), None for auto.
pub fn parse_proxy_lanes(v: &str) -> std::result::Result<Option<usize>, String> {
    let max = rshmem_device::remote::frame::MAX_LANES;
    match v.trim() {
        "auto" => Ok(None),
        t => match t.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(Some(n)),
            _ => Err(format!("expected auto or a number of lanes from 1 to {max}")),
        },
    }
}
fn is_proxy_ring(v: &str) -> std::result::Result<(), String> {
    parse_proxy_ring(v).map(|_| ())
}
/// A `RSHMEM_PROXY_RING` value: bytes, a power of two from 1 MiB (two frames of the largest payload)
/// to 1 GiB.
pub fn parse_proxy_ring(v: &str) -> std::result::Result<u64, String> {
    match parse_size(v) {
        Some(n) if n.is_power_of_two() && ((1 << 20)..=(1 << 30)).contains(&n) => Ok(n),
        _ => Err("expected a power of two from 1m to 1g (suffixes k, m, g)".to_string()),
    }
}
fn is_lane_bytes(v: &str) -> std::result::Result<(), String> {
    parse_lane_bytes(v).map(|_| ())
}
/// A `RSHMEM_PROXY_LANE_BYTES` value: bytes, a power of two from 4 KiB to 1 GiB.
pub fn parse_lane_bytes(v: &str) -> std::result::Result<u64, String> {
    match parse_size(v) {
        Some(n) if n.is_power_of_two() && ((4 << 10)..=(1 << 30)).contains(&n) => Ok(n),
        _ => Err("expected a power of two from 4k to 1g (suffixes k, m, g)".to_string()),
    }
}
fn is_remote_transport(v: &str) -> std::result::Result<(), String> {
    crate::config::parse::parse_remote(Some(v)).map(|_| ())
}
fn is_ibgda_qps(v: &str) -> std::result::Result<(), String> {
    parse_ibgda_qps(v).map(|_| ())
}
/// A `RSHMEM_IBGDA_QPS_PER_PE` value.
pub fn parse_ibgda_qps(v: &str) -> std::result::Result<u32, String> {
    let max = rshmem_device::remote::ibgda::MAX_QPS_PER_PE;
    match v.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a number of queue pairs from 1 to {max}")),
    }
}
fn is_ibgda_depth(v: &str) -> std::result::Result<(), String> {
    parse_ibgda_depth(v).map(|_| ())
}
/// A `RSHMEM_IBGDA_QP_DEPTH` value: log2 of the WQEBBs.
pub fn parse_ibgda_depth(v: &str) -> std::result::Result<u32, String> {
    match v.trim().parse::<u32>() {
        Ok(n) if (64..=32768).contains(&n) && n.is_power_of_two() => Ok(n.trailing_zeros()),
        _ => Err("expected a power of two from 64 to 32768".into()),
    }
}
fn is_ibgda_faults(v: &str) -> std::result::Result<(), String> {
    rshmem_ibgda::emu::FaultConfig::parse(v).map(|_| ())
}
fn is_ibgda_emulator(v: &str) -> std::result::Result<(), String> {
    parse_ibgda_emulator(v).map(|_| ())
}
fn is_ibgda_ret_slots(v: &str) -> std::result::Result<(), String> {
    parse_ibgda_ret_slots(v).map(|_| ())
}
/// A `RSHMEM_IBGDA_RET_SLOTS` value: whether the emulated NIC's return slots are in device memory.
pub fn parse_ibgda_ret_slots(v: &str) -> std::result::Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "queues" => Ok(false),
        "device" => Ok(true),
        _ => Err("expected queues or device".into()),
    }
}
/// What the IBGDA transport's emulated NIC does (`RSHMEM_IBGDA_EMULATOR`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum IbgdaEmulator {
    /// `full`: executes every operation at its target over TCP.
    #[default]
    Full,
    /// `ack`: completes every well-formed WQE at once without moving data (queues in pinned host
    /// memory, the NIC on a host thread).
    Ack,
    /// `device`: as `ack`, with the queues, doorbell record, doorbell word and CQ in GPU memory and
    /// the NIC a persistent GPU kernel (a host thread over the PE's memory on the CPU backend): what
    /// posting costs GPU threads on a real ConnectX.
    Device,
}

/// A `RSHMEM_IBGDA_EMULATOR` value.
pub fn parse_ibgda_emulator(v: &str) -> std::result::Result<IbgdaEmulator, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "full" => Ok(IbgdaEmulator::Full),
        "ack" => Ok(IbgdaEmulator::Ack),
        "device" => Ok(IbgdaEmulator::Device),
        _ => Err("expected full, ack or device".into()),
    }
}
fn is_proxy_spin(v: &str) -> std::result::Result<(), String> {
    parse_proxy_spin(v).map(|_| ())
}
/// A `RSHMEM_PROXY_SPIN` value: Some(on/off), None for auto.
pub fn parse_proxy_spin(v: &str) -> std::result::Result<Option<bool>, String> {
    match v.trim() {
        "auto" => Ok(None),
        "on" | "1" => Ok(Some(true)),
        "off" | "0" => Ok(Some(false)),
        _ => Err("expected auto, on or off".into()),
    }
}
fn is_group_fence(v: &str) -> std::result::Result<(), String> {
    parse_group_fence(v).map(|_| ())
}
/// A `RSHMEM_PROXY_GROUP_FENCE` value: whether every thread fences.
pub fn parse_group_fence(v: &str) -> std::result::Result<bool, String> {
    match v.trim() {
        "one" => Ok(false),
        "every" => Ok(true),
        _ => Err("expected one or every".into()),
    }
}
fn is_switch(v: &str) -> std::result::Result<(), String> {
    parse_switch(v).map(|_| ()).ok_or_else(|| "expected on or off".into())
}
/// An on/off value (on, 1, off, 0).
pub fn parse_switch(v: &str) -> Option<bool> {
    match v.trim() {
        "on" | "1" => Some(true),
        "off" | "0" => Some(false),
        _ => None,
    }
}
fn is_level(v: &str) -> std::result::Result<(), String> {
    parse_level(v).map(|_| ()).ok_or_else(|| "expected error, warn, info or debug".into())
}

/// RSHMEM_DEBUG's levels, most severe first: 0 error, 1 warn, 2 info, 3 debug ("trace" = debug).
pub fn parse_level(v: &str) -> Option<u8> {
    match v.trim().to_ascii_lowercase().as_str() {
        "error" => Some(0),
        "warn" | "warning" => Some(1),
        "info" => Some(2),
        "debug" | "trace" => Some(3),
        _ => None,
    }
}

/// `RSHMEM_*` names that rshmem's build, tools and tests read, not the runtime: never warned about.
const NOT_RUNTIME: &[&str] = &["RSHMEM_SKIP_PTX", "RSHMEM_PTX_MISSING_WHY", "RSHMEM_LIBDIR", "RSHMEM_TEST_"];

/// Checks every set variable of [`VARS`] (the first bad one is the error, naming the variable and its
/// value) and returns one warning per unknown `RSHMEM_*` name in `vars` (with the closest known name).
/// `vars` is the environment as (name, value) pairs; the runtime passes the process environment.
pub fn validate_vars(vars: &[(String, String)]) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    for (name, value) in vars {
        let target = ALIASES.iter().find(|(a, _)| a == name).map(|(_, r)| *r).unwrap_or(name.as_str());
        if let Some(v) = VARS.iter().find(|v| v.name == target) {
            if value.trim().is_empty() {
                // An empty value is a mistake (a script that meant to set it), not the default.
                return Err(Error::new(format!("{name} is set but empty: give it a value or unset it")));
            }
            if let Err(why) = (v.check)(value) {
                return Err(Error::new(format!("{name}={value:?} is not valid: {why}")));
            }
        } else if name.starts_with("RSHMEM_") && !NOT_RUNTIME.iter().any(|p| name.starts_with(p)) {
            let near = VARS.iter().min_by_key(|v| edit_distance(v.name, name)).map(|v| v.name).unwrap_or(WAIT_TIMEOUT);
            warnings.push(format!(
                "{name} is not a variable rshmem reads (ignored); did you mean {near}? (`rshmrun --info` lists them all)"
            ));
        }
    }
    Ok(warnings)
}

/// Levenshtein distance (for "did you mean").
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// A positive number of seconds (RSHMEM_BOOTSTRAP_TIMEOUT), or why not.
pub fn parse_positive_secs(v: &str) -> std::result::Result<std::time::Duration, String> {
    match parse_secs(v) {
        Some(Some(d)) => Ok(d),
        _ => Err("expected a positive number of seconds (examples: 30, 0.5)".into()),
    }
}

/// A `RSHMEM_WAIT_TIMEOUT` value: None for 0 (no limit), else the duration; `Err` says what is expected.
pub fn parse_wait_secs(v: &str) -> std::result::Result<Option<std::time::Duration>, String> {
    parse_secs(v).ok_or_else(|| "expected a number of seconds (examples: 30, 0.5; 0 = no limit)".into())
}

/// Seconds: None when malformed, Some(None) for 0 (no limit), Some(Some(d)) otherwise.
fn parse_secs(v: &str) -> Option<Option<std::time::Duration>> {
    match v.trim().parse::<f64>() {
        Ok(0.0) => Some(None),
        Ok(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Some(Some(std::time::Duration::from_secs_f64(s))),
        _ => None,
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

    #[test]
    fn nvshmem_aliases_are_checked_under_their_own_name() {
        let e = validate_vars(&vars(&[("NVSHMEM_SYMMETRIC_SIZE", "lots")])).unwrap_err().to_string();
        assert!(e.contains("NVSHMEM_SYMMETRIC_SIZE=\"lots\""), "{e}");
        assert!(validate_vars(&vars(&[("NVSHMEM_SYMMETRIC_SIZE", "2G")])).unwrap().is_empty());
        // Every alias names a variable of the table.
        for (a, r) in ALIASES {
            assert!(VARS.iter().any(|v| v.name == *r), "{a} aliases {r}, which is not in VARS");
        }
    }

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn garbage_values_name_the_variable() {
        for (name, bad) in [
            (WAIT_TIMEOUT, "soon"),
            (WAIT_TIMEOUT, "-1"),
            (DEBUG, "loud"),
            (SYMMETRIC_SIZE, "lots"),
            (BACKEND, "tpu"),
            (JOB_KEY, "abc"),
            (PE, "x"),
            (NPES, "0"),
            (BOOTSTRAP, "nohost"),
            (STATUS_FD, "-3"),
            (BOOTSTRAP_TIMEOUT, "0"),
            (CUMEM_GRANULE, "1q"),
            (REMOTE_TRANSPORT, "tcp"),
            (REMOTE_TRANSPORT, "p2p"),
            (DEBUG, ""),
            (PROXY_SPIN, " "),
        ] {
            let e = validate_vars(&vars(&[(name, bad)])).expect_err(name).to_string();
            assert!(e.contains(name) && (e.contains(bad) || e.contains("is set but empty")), "{e}");
        }
    }

    #[test]
    fn good_values_pass_and_unknown_names_warn() {
        let ok = [
            (WAIT_TIMEOUT, "2"),
            (WAIT_TIMEOUT, "0.5"),
            (DEBUG, "Info"),
            (SYMMETRIC_SIZE, "64m"),
            (BACKEND, "cpu"),
            (JOB_KEY, "0123456789abcdef0123456789ABCDEF"),
            (BOOTSTRAP, "127.0.0.1:4000"),
            (STATUS_FD, "5"),
            (REMOTE_TRANSPORT, "none"),
            (REMOTE_TRANSPORT, "proxy"),
            (REMOTE_TRANSPORT, "IBGDA"),
            ("RSHMEM_TEST_THREADS", "4"),
            ("RSHMEM_SKIP_PTX", "1"),
        ];
        assert_eq!(validate_vars(&vars(&ok)).unwrap(), Vec::<String>::new());
        let w = validate_vars(&vars(&[("RSHMEM_WAIT_TIMOUT", "2")])).unwrap();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("RSHMEM_WAIT_TIMOUT") && w[0].contains("did you mean RSHMEM_WAIT_TIMEOUT"), "{}", w[0]);
    }
}
