//! The process-wide runtime: init/finalize, PE queries, the collective symmetric allocator, host
//! barrier and host RMA. One instance per process, reached through the free functions of the crate.

use crate::node::exchange::Collective;
use crate::platform::backend::Backend;
use crate::bootstrap::{Bootstrap, UniqueId};
use crate::error::{Error, Result};
use crate::node::fdpass::FdServer;
use crate::heap::alloc::Allocator;
use crate::platform::hostsync::HostSync;
use crate::node::jobstatus::JobStatus;
use crate::transport::interface::{RemoteSetup, Transport};
use crate::transport::p2p::P2p;
use crate::transport::select::{self, RemoteChoice};
use crate::config::env;
use crate::config::parse::Remote;
use crate::config::{Config, Vars};
use crate::log;
use rshmem_device::state::{DeviceState, INTERNAL_BYTES, MAX_PES, ROUTE_NONE, ROUTE_P2P, STATE_MAGIC};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

/// The state of an initialized PE: its bootstrap, platform backend, transports and routes, symmetric
/// allocator, device state, host synchronization and team table. Made by [`init`], dropped by
/// [`finalize`].
pub struct Runtime {
    pub(crate) boot: Bootstrap,
    pub(crate) backend: Arc<dyn Backend>,
    /// The transports: p2p first (node-local PEs), then the remote one if `RSHMEM_REMOTE_TRANSPORT`
    /// names one.
    transports: Vec<Box<dyn Transport>>,
    /// `route[pe]`: index in `transports` of the one that reaches PE `pe` (None: no transport does).
    /// Decided once at init by `transport::route_table`.
    route: Vec<Option<usize>>,
    alloc: Mutex<Allocator>,
    pub(crate) state: Box<DeviceState>,
    /// Shared-memory host barrier and collective announcements (None: PEs on several nodes).
    sync: Option<HostSync>,
    fds: FdServer,
    job: [u8; 16],
    /// rshmrun's job status board (None outside rshmrun): every host collective is recorded there.
    status: Option<Arc<JobStatus>>,
    /// The team table as this PE wrote it into its internal area.
    pub(crate) teams: Mutex<crate::teams::Teams>,
    /// `RSHMEM_ONSTREAM_GRID_MIN`, read at init: the smallest host or on-stream collective (bytes)
    /// whose data runs on a whole grid (`coll::grid_plan`).
    pub(crate) onstream_grid_min: usize,
    /// This init's configuration (every variable, read and checked once at its start).
    pub(crate) config: Arc<Config>,
}

static RT: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);
static MY_PE: AtomicI32 = AtomicI32::new(-1);
static N_PES: AtomicI32 = AtomicI32::new(0);
/// The job's remote transport: this PE's own choice (`RSHMEM_REMOTE_TRANSPORT`, its NIC), all-gathered
/// when the job spans nodes and decided alike on every PE (`select::decide`: PEs that chose differently
/// would hang or mix wires).
fn agree_remote(boot: &Bootstrap, cfg: &Config, spans_nodes: bool) -> Result<RemoteChoice> {
    let var = env::REMOTE_TRANSPORT;
    let local = select::local_choice(cfg, spans_nodes, boot.pe());
    if !spans_nodes {
        return Ok(local);
    }
    let all = boot.allgather("rshmem_init (remote transport)", &[local.code()])?;
    let choices = all
        .iter()
        .enumerate()
        .map(|(pe, v)| match v.as_slice() {
            [c] => RemoteChoice::from_code(*c).ok_or_else(|| Error::new(format!("PE {pe} sent remote transport code {c}"))),
            _ => Err(Error::new(format!("PE {pe} sent {} bytes for its remote transport", v.len()))),
        })
        .collect::<Result<Vec<_>>>()?;
    let (choice, note) = select::decide(var, cfg.remote == Remote::Ibgda, &choices)?;
    if let (Some(n), 0) = (note, boot.pe()) {
        log::warn(n);
    }
    Ok(choice)
}

/// The PE number messages should carry: known before init completes, and after a failed init (kept by
/// `log`, which the runtime tells as soon as it knows).
pub fn known_pe() -> Option<usize> {
    log::pe()
}
fn note_pe(pe: usize) {
    log::set_pe(pe);
}

pub(crate) fn get(call: &str) -> Result<Arc<Runtime>> {
    // A panic elsewhere (caught at the C ABI) must not make every later call panic on a poisoned lock:
    // the slot holds a plain Option, valid whatever happened while it was held.
    RT.read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .ok_or_else(|| Error::new(format!("{call}: rshmem is not initialized (call rshmem init first)")))
}

/// Which backend to use (`RSHMEM_BACKEND`).
pub use crate::config::BackendKind;

/// Initializes this process as a PE of the job the launcher's environment describes (`nvshmem_init`):
/// reads and checks every `RSHMEM_*` variable (once: this init's [`Config`]), bootstraps, then builds
/// the runtime. Collective over all PEs; an error if already initialized.
pub fn init() -> Result<()> {
    let vars = Vars::from_process();
    // The PE number from the launcher's variables, for messages, before anything can fail (a bad value
    // of those is reported by the check of the configuration, or by the bootstrap, below; a bad value of
    // any other variable is reported with the PE number).
    let hint = crate::bootstrap::launcher_pe(|n| vars.get(n));
    init_with(vars, hint, Bootstrap::from_config)
}

/// Initializes this process as PE `pe` of `npes`, bootstrapping through the unique id PE 0 made
/// (`nvshmemx_init_attr` with `NVSHMEMX_INIT_WITH_UNIQUEID`). Collective over all PEs.
pub fn init_with_unique_id(id: &UniqueId, pe: usize, npes: usize) -> Result<()> {
    init_with(Vars::from_process(), (pe < npes).then_some(pe), |cfg| Bootstrap::from_unique_id(id, pe, npes, cfg))
}

fn init_with(vars: Vars, pe_hint: Option<usize>, make: impl FnOnce(&Config) -> Result<Bootstrap>) -> Result<()> {
    let mut slot = RT.write().unwrap_or_else(PoisonError::into_inner);
    if slot.is_some() {
        return Err(Error::new("rshmem_init: already initialized (call finalize first)"));
    }
    if let Some(pe) = pe_hint {
        note_pe(pe);
    }
    let ctx = |e: Error| if e.message().starts_with("rshmem_init") { e } else { e.context("rshmem_init") };
    // Every variable is read (above) and checked here, once, before anything uses one; the layers get
    // the typed result.
    let (cfg, warnings) = Config::from_vars(vars).map_err(ctx)?;
    log::set_level(cfg.log_level);
    for w in warnings {
        log::warn(w);
    }
    let cfg = Arc::new(cfg);
    let boot = make(&cfg).map_err(ctx)?;
    note_pe(boot.pe());
    let status = JobStatus::from_fd(cfg.status_fd, boot.pe(), boot.npes()).map_err(ctx)?.map(Arc::new);
    let rt = build(boot, status, cfg).map_err(ctx)?;
    MY_PE.store(rt.state.my_pe, Ordering::Release);
    N_PES.store(rt.state.n_pes, Ordering::Release);
    *slot = Some(Arc::new(rt));
    Ok(())
}

/// The payloads of an all-gather of fixed-size records: one per PE, each exactly `L` bytes. A peer's
/// payload is data from another process: a wrong count or length is an error naming the peer.
fn fixed_payloads<const L: usize>(call: &str, what: &str, all: &[Vec<u8>], npes: usize) -> Result<Vec<[u8; L]>> {
    if all.len() != npes {
        return Err(Error::new(format!(
            "{call}: the all-gather of {what} returned {} payloads for {npes} PEs",
            all.len()
        )));
    }
    all.iter()
        .enumerate()
        .map(|(pe, p)| {
            <[u8; L]>::try_from(p.as_slice()).map_err(|_| {
                Error::new(format!(
                    "{call}: PE {pe} sent {} bytes as its {what} in the all-gather (expected {L}): is PE {pe} running the same rshmem and calling {call} too?",
                    p.len()
                ))
            })
        })
        .collect()
}

/// The root's payload of a broadcast of a fixed-size record.
fn fixed_payload<const L: usize>(call: &str, what: &str, root: usize, p: &[u8]) -> Result<[u8; L]> {
    <[u8; L]>::try_from(p).map_err(|_| {
        Error::new(format!("{call}: PE {root} broadcast {} bytes as {what} (expected {L}): is PE {root} running the same rshmem?", p.len()))
    })
}

fn build(boot: Bootstrap, status: Option<Arc<JobStatus>>, cfg: Arc<Config>) -> Result<Runtime> {
    let (me, n) = (boot.pe(), boot.npes());
    if n > MAX_PES {
        return Err(Error::new(format!("{n} PEs requested; this build supports at most {MAX_PES}")));
    }
    // RSHMEM_SYMMETRIC_SIZE (or NVSHMEM_SYMMETRIC_SIZE) is the room for the program's allocations, as
    // in NVSHMEM: the runtime's internal area comes on top of it, so a program that asks for exactly
    // what it allocates (NVSHMEM's collective perftests ask for 2 x 4 KiB) gets it. Its name in
    // messages is the one the user set.
    let (user_size, size_var) = (cfg.symmetric_size, cfg.symmetric_size_var);
    let onstream_grid_min = cfg.onstream_grid_min;
    let heap_size = user_size
        .checked_add(INTERNAL_BYTES)
        .ok_or_else(|| Error::new(format!("{size_var}={user_size} is too large for this machine's address space")))?;
    // All PEs must agree on the heap size (offsets must mean the same everywhere).
    let sizes = boot.allgather("rshmem_init", &(heap_size as u64).to_le_bytes())?;
    // A malformed payload fails the whole job's bootstrap, so every PE learns which peer sent it.
    let sizes = fixed_payloads::<8>("rshmem_init", "heap size", &sizes, n).map_err(|e| boot.abort(e))?;
    for (pe, s) in sizes.into_iter().enumerate() {
        let s = u64::from_le_bytes(s);
        if s != heap_size as u64 {
            return Err(Error::new(format!("{size_var} differs between PEs: PE {me} has {heap_size} bytes, PE {pe} has {s}")));
        }
    }
    // A random id for this job's local sockets, chosen by PE 0.
    let mut job = [0u8; 16];
    if me == 0 {
        job = random16();
    }
    let job = boot.broadcast("rshmem_init", 0, &job)?;
    let job: [u8; 16] = fixed_payload("rshmem_init", "the job id", 0, &job).map_err(|e| boot.abort(e))?;
    // The remote transport is chosen (and a bad or unbuilt one refused) before anything is mapped.
    let spans_nodes = boot.node_pes().len() < n;
    let choice = agree_remote(&boot, &cfg, spans_nodes)?;
    let explicit = cfg.remote == Remote::Ibgda;
    let remote = select::factory(choice);
    let fds = FdServer::start(job, boot.job_key(), me)?;
    let backend = make_backend(&boot, &fds, job, heap_size, &cfg)?;
    if remote.is_some() && backend.name() == "cuda" && me == 0 {
        hint_cuda_connections(&cfg);
    }
    let mut transports: Vec<Box<dyn Transport>> = vec![Box::new(P2p::new((0..n).map(|pe| backend.peer_base(pe)).collect()))];
    if let Some(make) = remote {
        let setup = RemoteSetup { boot: &boot, platform: backend.clone(), services: backend.services(), config: cfg.clone(), status: status.clone() };
        let t = match make(&setup) {
            Ok(t) => t,
            // Every PE got this error before any collective of the NIC's setup (the setup agrees on it
            // first), so every PE falls back alike; asked for explicitly, it stops the job instead.
            Err(e) if choice == RemoteChoice::IbgdaNic && !explicit && crate::transport::ibgda::setup::agreed_setup_failure(&e) => {
                if me == 0 {
                    log::warn(format!("{e}; every PE uses the proxy instead ({}=ibgda stops the job here instead)", env::REMOTE_TRANSPORT));
                }
                crate::transport::proxy::create(&setup)?
            }
            Err(e) => return Err(e),
        };
        transports.push(t);
    }
    let route = crate::transport::select::route_table(n, &transports.iter().map(|t| &**t).collect::<Vec<_>>());
    // What the platform backed at its start (the whole heap on the CPU, the first granule on GPUs) is
    // registered like every later growth.
    for t in &transports {
        t.register(Collective { boot: &boot, fds: &fds, job }, 0..backend.backed())
            .map_err(|e| e.context(format!("registering the heap with the {} transport", t.name())))?;
    }
    let sync = if boot.node_pes().len() == n && n > 1 {
        Some(HostSync::new(Collective { boot: &boot, fds: &fds, job }, cfg.wait_timeout)?)
    } else {
        None
    };

    let mut st = Box::new(DeviceState::ZERO);
    st.my_pe = me as i32;
    st.n_pes = n as i32;
    st.heap_base = backend.heap_base() as u64;
    st.heap_size = backend.heap_size() as u64;
    st.checks = 1;
    // Team synchronizations inside kernels stop the PE naming the member they wait for after this
    // long (the CPU backend's device waits go through the idle hook instead).
    st.wait_timeout_ms = cfg.wait_timeout.map_or(0, |d| d.as_millis().clamp(1, u32::MAX as u128) as u32);
    st.node_my_pe = boot.local_pe() as i32;
    st.node_n_pes = boot.node_pes().len() as i32;
    for (pe, r) in route.iter().enumerate() {
        // Only a transport that maps the peer gives a base (p2p); others give 0 (not mapped).
        st.peer_base[pe] = r.map_or(0, |t| transports[t].peer_base(pe)) as u64;
        // Transport 0 is p2p (mapped); the others say which route they are.
        st.route[pe] = match *r {
            None => ROUTE_NONE,
            Some(0) => ROUTE_P2P,
            Some(t) => transports[t].route_code(),
        };
    }
    if let Some(ch) = transports.iter().find_map(|t| t.device_channel()) {
        if ch.channels.is_empty() || ch.channels.len() > st.proxy.len() {
            return Err(Error::new(format!("remote transport: {} channels (1 to {})", ch.channels.len(), st.proxy.len())));
        }
        st.proxy_channels = ch.channels.len() as u64;
        st.proxy[..ch.channels.len()].copy_from_slice(&ch.channels);
        st.proxy_ring = ch.channels[0].ring_ref();
        st.proxy_ret = ch.channels[0].ret;
        st.target = ch.target;
    }
    st.ibgda = transports.iter().map(|t| t.device_table()).find(|&a| a != 0).unwrap_or(0);
    for (i, &pe) in boot.node_pes().iter().enumerate() {
        st.node_pe[i] = pe as i32;
    }
    st.magic = STATE_MAGIC;
    let state: &DeviceState = &st;
    backend.publish_state(state)?;
    // The runtime's own area at the start of the heap starts zeroed on every PE, then gets the table of
    // the predefined teams.
    backend.zero(0, INTERNAL_BYTES)?;
    let teams = crate::teams::Teams::new(me, n, boot.local_pe(), boot.node_pes().len());
    teams.publish(&*backend)?;
    crate::teams::Teams::announce_init(&*backend, crate::teams::Teams::no_init())?;
    boot.barrier("rshmem_init")?;
    // Last, when nothing can fail any more: a failed init must not leave device calls pointed at a heap
    // that is unmapped when the backend is dropped.
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: init holds the runtime's slot (no other init or finalize runs), and every address the
    // state names (the heap, the peers' mappings, the transports' channels) stays valid until finalize
    // calls `clear_state` before it releases them; nothing of the runtime is dropped past this point
    // of a successful init.
    unsafe {
        rshmem_device::arch::host::set_state(state)
    };
    log::info(format!("PE {me}/{n}: {} backend, heap {heap_size} bytes at {:#x}", backend.name(), state.heap_base));
    if let Some(s) = &status {
        s.leave(); // init done
    }
    Ok(Runtime {
        boot,
        alloc: Mutex::new(Allocator::new(INTERNAL_BYTES, backend.heap_size())),
        backend,
        transports,
        route,
        state: st,
        sync,
        fds,
        job,
        status,
        teams: Mutex::new(teams),
        onstream_grid_min,
        config: cfg,
    })
}

/// The CUDA variable whose value matters to a job with a remote transport on GPUs.
const CUDA_CONNECTIONS: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// Says once per process, when this job runs a remote transport on GPUs and the environment does not
/// set `CUDA_DEVICE_MAX_CONNECTIONS`, that it should be set (rshmrun sets it for its PEs). The proxy's
/// copies and atomics must never queue behind a user kernel that spins waiting for them: streams share
/// the device's hardware work queues round-robin (8 by default), and with the most (32) the proxy's
/// few early streams get queues of their own. The library does not set it: changing a process's
/// environment races every other thread's reads of it, and it counts only before the CUDA context is
/// made.
fn hint_cuda_connections(cfg: &Config) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if cfg.vars.raw(CUDA_CONNECTIONS).is_none() && !SAID.swap(true, Ordering::Relaxed) {
        log::warn(format!(
            "{CUDA_CONNECTIONS} is not set: this job's remote transport shares the GPU's 8 default work queues with the program's streams, \
             so a kernel that waits for a remote operation can hold up the proxy's copies; set {CUDA_CONNECTIONS}=32 in every PE's \
             environment (rshmrun does so for its PEs)"
        ));
    }
}

fn make_backend(boot: &Bootstrap, fds: &FdServer, job: [u8; 16], heap_size: usize, cfg: &Config) -> Result<Arc<dyn Backend>> {
    let kind = cfg.backend;
    if kind != BackendKind::Cpu {
        match crate::platform::cuda::backend::CudaBackend::new(boot, fds, job, heap_size, cfg) {
            Ok(b) => return Ok(Arc::new(b)),
            Err(e) if kind == BackendKind::Auto && e.is_no_gpu() => {
                log::info(format!("no usable GPU ({e}); using the CPU backend"));
            }
            Err(e) => return Err(e.into_error()),
        }
    }
    Ok(Arc::new(crate::platform::cpu::CpuBackend::new(boot, fds, job, heap_size)?))
}

pub(crate) fn random16() -> [u8; 16] {
    use std::io::Read;
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        b[..16].copy_from_slice(&(t ^ ((std::process::id() as u128) << 64)).to_le_bytes());
    }
    b
}

/// Ends this PE's part in the job (`nvshmem_finalize`): a final host barrier, then the transports shut
/// down and the heap is released. Collective; an error if not initialized or if the barrier failed.
pub fn finalize() -> Result<()> {
    let rt = RT.write().unwrap_or_else(PoisonError::into_inner).take().ok_or_else(|| Error::new("rshmem_finalize: rshmem is not initialized"))?;
    let r = rt.host_barrier("rshmem_finalize");
    // After the final barrier every operation is complete: the transports close their connections
    // (a peer then sees an orderly CLOSE, not a failure) and stop their threads.
    for t in &rt.transports {
        if let Err(e) = t.shutdown(r.is_ok()) {
            log::warn(format!("rshmem_finalize: the {} transport: {e}", t.name()));
        }
    }
    // Device calls from now on fail naming the call instead of using the heap unmapped below.
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: finalize took the runtime out of its slot (no init runs until it returns); clearing only
    // withdraws the state, which makes every later device call fail by name.
    unsafe {
        rshmem_device::arch::host::clear_state()
    };
    MY_PE.store(-1, Ordering::Release);
    N_PES.store(0, Ordering::Release);
    crate::heap::register::clear();
    drop(rt);
    r
}

/// `nvshmem_global_exit(status)`: ends every PE of the job with exit status `status`. Under rshmrun the
/// request goes on the job status board, and rshmrun ends all PEs and exits with `status`; this PE waits
/// for that (up to 30 s) and then exits itself. Without rshmrun this process exits with `status`, and its
/// peers see a PE that exited. An exit status keeps only the low 8 bits of `status`: a nonzero status
/// whose low 8 bits are 0 (256, ...) exits with 1 instead, saying so, never with 0.
pub fn global_exit(status: i32) -> ! {
    let me = my_pe();
    let code = crate::node::jobstatus::exit_status_of(status);
    // Output the program wrote through C's stdio must not be lost with the process.
    // SAFETY: fflush(NULL) flushes every open output stream; no pointer is involved.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    let rt = RT.read().unwrap_or_else(PoisonError::into_inner).clone();
    let board = rt.as_ref().and_then(|r| r.status.as_deref());
    if let (Some(b), true) = (board, me >= 0) {
        b.request_exit(me as usize, status);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        log::warn(format!("nvshmem_global_exit({status}): rshmrun did not end the job within 30 s; exiting this PE"));
    }
    if code != status & 0xff {
        log::warn(format!(
            "nvshmem_global_exit({status}): an exit status keeps only the low 8 bits of {status}, which are 0 (success); exiting with status {code} instead"
        ));
    }
    std::process::exit(code)
}

/// This PE's number, -1 when rshmem is not initialized.
pub fn my_pe() -> i32 {
    MY_PE.load(Ordering::Acquire)
}
/// The number of PEs in the job, 0 when rshmem is not initialized.
pub fn n_pes() -> i32 {
    N_PES.load(Ordering::Acquire)
}

/// A host collective this PE is in, on the job status board.
struct Inside<'a>(Option<&'a JobStatus>);
impl Inside<'_> {
    /// Records that the collective completed. A failed one stays recorded as entered and not left: the
    /// PE did not get through it, and the board should say where the job stopped.
    fn left<T>(self, r: &Result<T>) {
        if let (Some(s), Ok(_)) = (self.0, r) {
            s.leave();
        }
    }
}

/// What one PE asks a collective allocation for; all PEs must ask the same.
#[derive(Clone, Copy, PartialEq, Eq)]
struct AllocRequest {
    bytes: u64,
    align: u64,
}

impl Runtime {
    /// This PE's number.
    pub fn pe(&self) -> usize {
        self.boot.pe()
    }
    /// The number of PEs in the job.
    pub fn npes(&self) -> usize {
        self.boot.npes()
    }

    /// Collective allocation. Every PE must call with the same arguments in the same order. `bytes` 0
    /// is no allocation: null, at once and without a barrier (OpenSHMEM's and NVSHMEM's `malloc`,
    /// `calloc` and `align` with size 0).
    pub fn alloc(&self, call: &str, bytes: usize, align: usize, zero: bool) -> Result<*mut u8> {
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        if align == 0 || !align.is_power_of_two() {
            return Err(Error::new(format!("{call}: alignment {align} is not a power of two")));
        }
        let base_align = 1usize << (self.state.heap_base.trailing_zeros().min(40));
        if align > base_align {
            return Err(Error::new(format!("{call}: alignment {align} is larger than the heap's base alignment ({base_align} bytes)")));
        }
        let req = AllocRequest { bytes: bytes as u64, align: align as u64 };
        let mut payload = req.bytes.to_le_bytes().to_vec();
        payload.extend_from_slice(&req.align.to_le_bytes());
        let all = self.collective(call, |b| b.allgather(call, &payload))?;
        let reqs: Vec<AllocRequest> = fixed_payloads::<16>(call, "allocation request", &all, self.npes())
            .map_err(|e| self.boot.abort(e))?
            .iter()
            .map(|p| {
                let (b, a) = p.split_at(8);
                AllocRequest { bytes: u64::from_le_bytes(b.try_into().unwrap()), align: u64::from_le_bytes(a.try_into().unwrap()) }
            })
            .collect();
        if let Some((pe, other)) = reqs.iter().enumerate().find(|(_, r)| **r != reqs[0]) {
            let detail: Vec<String> =
                reqs.iter().enumerate().map(|(p, r)| format!("PE {p}: {} bytes (align {})", r.bytes, r.align)).collect();
            return Err(Error::new(format!(
                "{call}: PEs asked for different sizes (PE 0 asked for {} bytes, PE {pe} for {} bytes); every PE must call {call} with the same size in the same order [{}]",
                reqs[0].bytes,
                other.bytes,
                detail.join(", ")
            )));
        }
        let mut alloc = self.alloc.lock().unwrap();
        let off = alloc.alloc(bytes, align).ok_or_else(|| {
            Error::new(format!(
                "{call}({bytes} bytes): symmetric heap exhausted: largest free block {} bytes, {} bytes free of {} for allocations ({} sets the size)",
                alloc.largest_free(),
                alloc.total_free(),
                alloc.size() - INTERNAL_BYTES,
                self.config.symmetric_size_var
            ))
        })?;
        if let Err(e) = self.grow(alloc.high_water()) {
            alloc.free(off);
            return Err(e.context(call));
        }
        if zero {
            self.backend.zero(off, bytes)?;
        }
        drop(alloc);
        if zero {
            // Zeroing must be complete everywhere before any PE writes into the new block.
            self.host_barrier(call)?;
        }
        Ok((self.state.heap_base as usize + off) as *mut u8)
    }

    /// Collective (inside an allocation): makes `[0, upto)` of the heap usable. The platform backs it
    /// (on GPUs, granule by granule, mapping node-local peers' through the p2p exchange), then the
    /// newly backed range is registered with every transport.
    fn grow(&self, upto: usize) -> Result<()> {
        let c = Collective { boot: &self.boot, fds: &self.fds, job: self.job };
        let before = self.backend.backed();
        self.backend.ensure_backed(c, upto)?;
        let after = self.backend.backed();
        if after > before {
            for t in &self.transports {
                t.register(c, before..after).map_err(|e| e.context(format!("registering heap growth with the {} transport", t.name())))?;
            }
        }
        Ok(())
    }

    /// The size of the live allocation that starts at `p`, or an error naming `call`.
    pub fn allocation_size(&self, call: &str, p: *mut u8) -> Result<usize> {
        let off = (p as usize).wrapping_sub(self.state.heap_base as usize);
        let size = if off < self.backend.heap_size() { self.alloc.lock().unwrap().size_of(off) } else { None };
        size.ok_or_else(|| Error::new(format!("{call}: {p:p} is not the start of a live symmetric allocation")))
    }

    /// Collective free. A null `p` is no action, at once and without a barrier (OpenSHMEM's and
    /// NVSHMEM's `free`), so the null of a `malloc(0)` can be freed like any allocation.
    pub fn free(&self, call: &str, p: *mut u8) -> Result<()> {
        if p.is_null() {
            return Ok(());
        }
        // Work already enqueued (a kernel, an on-stream collective) may still use the memory: it runs
        // to completion before the memory can be handed out again (NVSHMEM's free implies a barrier).
        self.backend.quiet()?;
        let off = (p as usize).wrapping_sub(self.state.heap_base as usize);
        let valid = (off < self.backend.heap_size()) && self.alloc.lock().unwrap().size_of(off).is_some();
        let mine = if valid { off as u64 } else { u64::MAX };
        let all = self.collective(call, |b| b.allgather(call, &mine.to_le_bytes()))?;
        let offs: Vec<u64> = fixed_payloads::<8>(call, "heap offset", &all, self.npes())
            .map_err(|e| self.boot.abort(e))?
            .into_iter()
            .map(u64::from_le_bytes)
            .collect();
        if let Some(first_bad) = offs.iter().position(|&o| o == u64::MAX) {
            let bad = if offs[self.pe()] == u64::MAX { self.pe() } else { first_bad };
            return Err(Error::new(if bad == self.pe() {
                format!("{call}({p:p}): pointer is not the start of a live symmetric allocation (not from rshmem_malloc, or already freed)")
            } else {
                format!("{call}: PE {bad} passed a pointer that is not a live symmetric allocation")
            }));
        }
        if let Some(pe) = offs.iter().position(|&o| o != offs[0]) {
            return Err(Error::new(format!(
                "{call}: PEs freed different objects (PE 0 offset {:#x}, PE {pe} offset {:#x}); free in the same order on every PE",
                offs[0], offs[pe]
            )));
        }
        self.alloc.lock().unwrap().free(off);
        Ok(())
    }

    /// Host barrier of all PEs: completes this PE's outstanding operations first.
    pub fn host_barrier(&self, call: &str) -> Result<()> {
        self.quiet()?;
        match &self.sync {
            // All PEs on this node: in shared memory, with mismatches, dead peers and (with
            // RSHMEM_WAIT_TIMEOUT) stuck peers detected. It announces the collective itself.
            Some(s) => {
                let inside = self.enter(call);
                let r = s.barrier(Collective { boot: &self.boot, fds: &self.fds, job: self.job }, call, self.status.as_deref());
                inside.left(&r);
                // A peer that never arrives may be stuck in a device synchronization: say where this
                // PE's device synchronizations stand.
                r.map_err(|e| match self.world_sync_words() {
                    w if w.is_empty() => e,
                    w => Error::new(format!("{e}\n{w}")),
                })
            }
            // Through the bootstrap: every collective carries its name and sequence number.
            None => self.collective(call, |b| b.barrier(call)),
        }
    }

    /// What this PE's device-side synchronization words of the world team hold (its synchronization
    /// count and what each PE last announced to it), for the message of a host collective that timed
    /// out while a PE may be stuck in a device synchronization. Empty if they cannot be read.
    fn world_sync_words(&self) -> String {
        use rshmem_device::state::{Internal, TeamSync, MAX_PES, TEAM_WORLD};
        use std::mem::{offset_of, size_of};
        let n = self.boot.npes().min(MAX_PES);
        let at = self.backend().heap_base() + offset_of!(Internal, sync) + TEAM_WORLD as usize * size_of::<TeamSync>();
        let mut buf = vec![0u8; offset_of!(TeamSync, flags) + 8 * n];
        // SAFETY: the world team's synchronization words lie in this PE's internal area (heap offset
        // 0), `buf.len()` bytes of it; a plain read of them.
        if unsafe { self.backend().copy_out(&mut buf, at as *const u8) }.is_err() {
            return String::new();
        }
        let word = |o: usize| u64::from_le_bytes(buf[o..o + 8].try_into().expect("8 bytes"));
        let flags: Vec<String> = (0..n).map(|j| format!("PE {j}: {}", word(offset_of!(TeamSync, flags) + 8 * j) >> 16)).collect();
        format!("device synchronizations of the world team on this PE: {} entered; last announced here by {}", word(0), flags.join(", "))
    }

    /// An all-gather of `payload` among all PEs through the bootstrap, as host collective `call` (named
    /// on the status board, so a PE in another collective is reported).
    pub(crate) fn host_allgather(&self, call: &str, payload: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.collective(call, |b| b.allgather(call, payload))
    }

    /// Runs bootstrap collective `call`, announced in the host sync records and on the job status
    /// board. If it fails after RSHMEM_WAIT_TIMEOUT (the bootstrap's stuck-PE error), the error gets the
    /// board's view of what every PE is doing.
    fn collective<T>(&self, call: &str, f: impl FnOnce(&Bootstrap) -> Result<T>) -> Result<T> {
        if let Some(s) = &self.sync {
            s.announce(call);
        }
        let inside = self.enter(call);
        let start = Instant::now();
        let r = f(&self.boot);
        inside.left(&r);
        r.map_err(|e| {
            // The stuck-PE error may reach a PE that entered after the root did (the root's timeout
            // fired, not ours): that error is late too, whatever our own clock says.
            let late = self.config.wait_timeout.is_some_and(|l| start.elapsed() >= l)
                || e.message().contains("did not complete within");
            match (late, self.status.as_deref().and_then(JobStatus::describe_stall)) {
                (true, Some(d)) => Error::new(format!("{e}\njob status: {}", d.replace('\n', "\njob status: "))),
                _ => e,
            }
        })
    }

    /// Runs `f`, recorded on the job status board as host collective `call` (a team collective, whose
    /// synchronization is not the bootstrap's).
    pub(crate) fn on_board<T>(&self, call: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let inside = self.enter(call);
        let r = f();
        inside.left(&r);
        r
    }

    /// Records on the job status board that this PE is inside host collective `call`, until
    /// [`Inside::left`].
    fn enter(&self, call: &str) -> Inside<'_> {
        if let Some(s) = &self.status {
            s.enter(call);
        }
        Inside(self.status.as_deref())
    }

    /// Checks a host RMA's PE and symmetric range; returns the transport that reaches the PE. The range
    /// must lie in the part of the heap the program allocates from: the runtime's internal area at the
    /// heap's start (team tables, synchronization words) is refused like any address outside the heap.
    pub(crate) fn check_rma(&self, call: &str, sym: *const u8, bytes: usize, pe: i32) -> Result<&dyn Transport> {
        self.check_range(call, sym, bytes, pe, false)
    }

    /// [`Runtime::check_rma`], the internal area allowed when `internal` (the runtime's own reads).
    fn check_range(&self, call: &str, sym: *const u8, bytes: usize, pe: i32, internal: bool) -> Result<&dyn Transport> {
        if pe < 0 || pe as usize >= self.npes() {
            return Err(Error::new(format!("{call}: PE {pe} out of range (n_pes {})", self.npes())));
        }
        if sym.is_null() {
            return Err(Error::new(format!("{call}: the symmetric address is NULL")));
        }
        let off = (sym as usize).wrapping_sub(self.state.heap_base as usize);
        if off >= self.backend.heap_size() || bytes > self.backend.heap_size() - off {
            return Err(Error::new(format!("{call}: {sym:p} + {bytes} bytes is not inside the symmetric heap")));
        }
        if off < INTERNAL_BYTES && !internal {
            return Err(Error::new(format!(
                "{call}: {sym:p} is in the runtime's internal area (the first {} of the symmetric heap, below every allocation), not in a symmetric allocation",
                log::size_text(INTERNAL_BYTES as u64)
            )));
        }
        self.transport_to(call, pe as usize)
    }

    /// [`Runtime::check_rma`] of a host put (`put`) or get, with its local buffer `local` (the source of
    /// a put, the destination of a get), which must not be NULL.
    pub(crate) fn check_rma_local(&self, call: &str, sym: *const u8, local: *const u8, bytes: usize, pe: i32, put: bool) -> Result<&dyn Transport> {
        if local.is_null() {
            let what = if put { "source" } else { "destination" };
            return Err(Error::new(format!("{call}: the {what} is NULL (a local buffer of {bytes} bytes was expected)")));
        }
        self.check_rma(call, sym, bytes, pe)
    }

    /// The transport that reaches PE `pe` (in range), from the per-PE table; an error naming the PE and
    /// the transports asked when none does.
    fn transport_to(&self, call: &str, pe: usize) -> Result<&dyn Transport> {
        match self.route.get(pe).copied().flatten() {
            Some(t) => Ok(&*self.transports[t]),
            None => {
                let asked: Vec<&str> = self.transports.iter().map(|t| t.name()).collect();
                let remote = match self.transports.len() {
                    1 => format!("; {}=none, so no transport serves other nodes", env::REMOTE_TRANSPORT),
                    _ => String::new(),
                };
                Err(Error::new(format!(
                    "{call}: PE {pe} is on another node; no transport reaches it (asked: {}{remote})",
                    asked.join(", ")
                )))
            }
        }
    }

    /// # Safety
    /// `src` must be readable for `bytes`.
    pub unsafe fn putmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        let t = self.check_rma_local("rshmem_putmem", dst, src, bytes, pe, true)?;
        // SAFETY: the symmetric range and the route were checked; the local one is the caller's promise.
        unsafe { t.putmem(&*self.backend, dst, src, bytes, pe as usize) }
    }
    /// # Safety
    /// `dst` must be writable for `bytes`.
    pub unsafe fn getmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        let t = self.check_rma_local("rshmem_getmem", src, dst, bytes, pe, false)?;
        // SAFETY: as in putmem.
        unsafe { t.getmem(&*self.backend, dst, src, bytes, pe as usize) }
    }
    /// The runtime's own blocking get of `bytes` at `src` on `pe`, which may lie in the internal area
    /// (a peer's team-init announcement); `call` names it in errors.
    ///
    /// # Safety
    /// `dst` must be writable for `bytes`.
    pub(crate) unsafe fn get_internal(&self, call: &str, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        let t = self.check_range(call, src, bytes, pe, true)?;
        // SAFETY: as in getmem.
        unsafe { t.getmem(&*self.backend, dst, src, bytes, pe as usize) }
    }
    /// # Safety
    /// As `putmem`; `src` stays valid and unchanged until the next quiet.
    pub unsafe fn putmem_nbi(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        let t = self.check_rma_local("rshmem_putmem_nbi", dst, src, bytes, pe, true)?;
        // SAFETY: as in putmem.
        unsafe { t.putmem_nbi(&*self.backend, dst, src, bytes, pe as usize) }
    }
    /// # Safety
    /// As `getmem`; `dst` is not read before the next quiet.
    pub unsafe fn getmem_nbi(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        let t = self.check_rma_local("rshmem_getmem_nbi", src, dst, bytes, pe, false)?;
        // SAFETY: as in getmem.
        unsafe { t.getmem_nbi(&*self.backend, dst, src, bytes, pe as usize) }
    }
    /// Completes this PE's outstanding operations: the platform's device work, then every transport's.
    pub fn quiet(&self) -> Result<()> {
        // A failed engine never completes what device work posted to it: its cause is the error.
        if let Some(e) = self.transports.iter().find_map(|t| t.failure("rshmem_quiet")) {
            return Err(e);
        }
        self.backend.quiet()?;
        for t in &self.transports {
            t.quiet()?;
        }
        Ok(())
    }
    /// The platform backend (CPU or CUDA) that holds the heap and runs device work.
    pub fn backend(&self) -> &dyn Backend {
        &*self.backend
    }
    /// `rshmem_buffer_register`: checks the buffer (`crate::heap::register`), then registers it with every
    /// transport whose NIC must reach it.
    ///
    /// # Safety
    /// `[addr, addr + len)` must stay valid memory of this process until `buffer_unregister(addr)` or
    /// finalize: a NIC (the emulated one too) may write into it until then.
    pub unsafe fn buffer_register(&self, addr: usize, len: usize) -> Result<()> {
        let base = self.backend.heap_base();
        crate::heap::register::register(addr, len, base..base + self.backend.heap_size())?;
        for (i, t) in self.transports.iter().enumerate() {
            // SAFETY: our caller's contract (valid until unregistered or finalize) is the transport's.
            if let Err(e) = unsafe { t.register_buffer(addr, len) } {
                // Undo what succeeded, so that a failed registration leaves nothing behind.
                for done in &self.transports[..i] {
                    let _ = done.unregister_buffer(addr);
                }
                let _ = crate::heap::register::unregister(addr);
                return Err(e);
            }
        }
        Ok(())
    }
    /// `rshmem_buffer_unregister`.
    pub fn buffer_unregister(&self, addr: usize) -> Result<()> {
        crate::heap::register::unregister(addr)?;
        for t in &self.transports {
            t.unregister_buffer(addr)?;
        }
        Ok(())
    }
    /// `rshmem_buffer_unregister_all`: unregisters every registered buffer (the first failure is the
    /// error, after the others were tried).
    pub fn buffer_unregister_all(&self) -> Result<()> {
        let mut first = None;
        for addr in crate::heap::register::registered() {
            if let Err(e) = self.buffer_unregister(addr) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}
