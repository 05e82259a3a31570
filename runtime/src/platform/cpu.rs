//! CPU backend: the symmetric heap is a shared-memory segment per PE, mapped by every PE of the node,
//! and a "kernel" is a function run by host threads. The device API (crate `rshmem-device`) runs
//! unchanged on it through the hooks installed here.

use crate::bootstrap::Bootstrap;
use crate::error::Result;
use crate::node::fdpass::FdServer;
use crate::platform::backend::Backend;
use crate::platform::segment::Segment;
use crate::platform::services::{DeviceMem, HostShared, Services};
use rshmem_device::arch::host::{install_hooks, Coords, Hooks};
use rshmem_device::Dim3;
use rshmem_device::Failure;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The CPU backend: the symmetric heap is a shared-memory segment every PE of the node maps, and
/// "kernels" run on host threads of the PE ([`launch`]).
pub struct CpuBackend {
    heap: Segment,
    me: usize,
}

impl CpuBackend {
    /// Creates this PE's heap segment of `heap_size` bytes (collective over the node's PEs, which map
    /// each other's) and installs the device library's host hooks.
    pub fn new(boot: &Bootstrap, fds: &FdServer, job: [u8; 16], heap_size: usize) -> Result<CpuBackend> {
        install_hooks(&HOOKS);
        let heap = Segment::create(boot, fds, job, crate::node::exchange::SEG_HEAP, heap_size, "symmetric heap")?;
        Ok(CpuBackend { heap, me: boot.pe() })
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn heap_base(&self) -> usize {
        self.heap.base(self.me).unwrap() as usize
    }
    fn heap_size(&self) -> usize {
        self.heap.size()
    }
    fn peer_base(&self, pe: usize) -> usize {
        self.heap.base(pe).map(|p| p as usize).unwrap_or(0)
    }
    fn zero(&self, off: usize, len: usize) -> Result<()> {
        let size = self.heap.size();
        if off > size || len > size - off {
            return Err(crate::error::Error::new(format!("zeroing {len} bytes at heap offset {off}: outside the {size}-byte heap")));
        }
        // SAFETY: [off, off+len) lies inside this PE's heap mapping (checked above), which lives as
        // long as self; it holds only symmetric objects, which device code accesses through raw
        // pointers (no Rust reference into the heap exists to be invalidated).
        unsafe { std::ptr::write_bytes((self.heap_base() + off) as *mut u8, 0, len) };
        Ok(())
    }
    fn quiet(&self) -> Result<()> {
        rshmem_device::quiet();
        Ok(())
    }
    unsafe fn copy_in(&self, dst: *mut u8, src: &[u8]) -> Result<()> {
        // SAFETY: caller guarantees dst is valid for src.len() bytes.
        unsafe { std::ptr::copy(src.as_ptr(), dst, src.len()) };
        Ok(())
    }
    unsafe fn copy_out(&self, dst: &mut [u8], src: *const u8) -> Result<()> {
        // SAFETY: caller guarantees src is valid for dst.len() bytes.
        unsafe { std::ptr::copy(src, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
    unsafe fn putmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        // SAFETY: the device API checks that dst lies in the heap and pe is valid.
        unsafe { rshmem_device::putmem(dst, src, bytes, pe) };
        Ok(())
    }
    unsafe fn getmem(&self, dst: *mut u8, src: *const u8, bytes: usize, pe: i32) -> Result<()> {
        // SAFETY: as in putmem, with src checked.
        unsafe { rshmem_device::getmem(dst, src, bytes, pe) };
        Ok(())
    }
    fn services(&self) -> Arc<dyn Services> {
        Arc::new(CpuServices)
    }
}

/// The CPU platform's services: device code runs on host threads, so memory both sides see is ordinary
/// memory, and the remote engine's lane threads apply what arrives themselves (no service kernel).
pub struct CpuServices;

impl Services for CpuServices {
    fn host_shared(&self, bytes: usize) -> Result<HostShared> {
        HostShared::host_alloc(bytes)
    }
    fn device_mem(&self, bytes: usize) -> Result<DeviceMem> {
        let h = HostShared::host_alloc(bytes)?;
        Ok(DeviceMem { addr: h.device_addr(), bytes, _keep: Box::new(h) })
    }
    unsafe fn load_u64(&self, addr: u64) -> Result<u64> {
        // SAFETY: the caller's contract: an aligned word of a live allocation, updated only atomically.
        Ok(unsafe { std::sync::atomic::AtomicU64::from_ptr(addr as *mut u64) }.load(std::sync::atomic::Ordering::Acquire))
    }
    unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { cpu_copy(dst, src, len) };
        Ok(())
    }
}

/// `CpuServices::copy`: a small aligned copy (a proxied `p`, a device barrier's epoch, a signal word)
/// is one atomic store with release, so that a device thread polling the word with acquire loads never
/// sees it torn, and sees what this thread wrote before it. memcpy promises neither.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping.
unsafe fn cpu_copy(dst: *mut u8, src: *const u8, len: usize) {
    use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU8, Ordering::Release};
    if matches!(len, 1 | 2 | 4 | 8) && (dst as usize).is_multiple_of(len) {
        // SAFETY: dst is writable for len bytes and aligned to len (checked), so it is a valid atomic of
        // that width; src is readable for len bytes (read unaligned).
        unsafe {
            match len {
                1 => AtomicU8::from_ptr(dst).store(src.read(), Release),
                2 => AtomicU16::from_ptr(dst as *mut u16).store((src as *const u16).read_unaligned(), Release),
                4 => AtomicU32::from_ptr(dst as *mut u32).store((src as *const u32).read_unaligned(), Release),
                _ => AtomicU64::from_ptr(dst as *mut u64).store((src as *const u64).read_unaligned(), Release),
            }
        }
        return;
    }
    // SAFETY: the caller's contract (readable src, writable dst, no overlap). Heap memory is shared with
    // other processes and device threads, which access it through raw pointers only.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
}


// ------------------------------------------------------------------ CPU kernels

struct Launch {
    block: Arc<Barrier>,
    warp: Arc<Barrier>,
    /// The block's and the warp's broadcast words (`bcast_block`, `bcast_warp`).
    block_word: Arc<AtomicU64>,
    warp_word: Arc<AtomicU64>,
}

thread_local! {
    static COORDS: Cell<Coords> = const { Cell::new(Coords::ONE) };
    static LAUNCH: RefCell<Option<Launch>> = const { RefCell::new(None) };
    static WAIT_START: Cell<Option<Instant>> = const { Cell::new(None) };
}

fn coords() -> Coords {
    COORDS.with(|c| c.get())
}
fn sync_block() {
    LAUNCH.with(|l| {
        if let Some(l) = l.borrow().as_ref() {
            l.block.wait();
        }
    })
}
fn sync_warp() {
    LAUNCH.with(|l| {
        if let Some(l) = l.borrow().as_ref() {
            l.warp.wait();
        }
    })
}
/// The group's first thread stores `v` in the group's word; after a barrier every thread reads it; a
/// second barrier keeps the next broadcast from overwriting it before everyone read it.
fn bcast(v: u64, block: bool) -> u64 {
    LAUNCH.with(|l| match l.borrow().as_ref() {
        Some(l) => {
            let (word, barrier, first) = if block {
                (&l.block_word, &l.block, coords().thread == 0)
            } else {
                (&l.warp_word, &l.warp, coords().thread.is_multiple_of(32))
            };
            if first {
                word.store(v, Ordering::Relaxed);
            }
            barrier.wait();
            let r = word.load(Ordering::Relaxed);
            barrier.wait();
            r
        }
        None => v,
    })
}
fn bcast_block(v: u64) -> u64 {
    bcast(v, true)
}
fn bcast_warp(v: u64) -> u64 {
    bcast(v, false)
}

/// RSHMEM_WAIT_TIMEOUT of the running init (None: no limit), as that init published it in the device
/// state (`DeviceState::wait_timeout_ms`, from its configuration). Nothing is kept here: the next init
/// publishes its own.
fn wait_timeout() -> Option<Duration> {
    let ms = rshmem_device::arch::host::state_u32(rshmem_device::state::Field::WAIT_TIMEOUT_MS);
    (ms != 0).then(|| Duration::from_millis(ms as u64))
}

/// Back-off for device wait loops (`rshmem_common::backoff`: spin, then yield, then sleep — PEs may
/// outnumber cores), and RSHMEM_WAIT_TIMEOUT for them.
fn idle(spins: u64, call: &'static str) {
    if spins == 1 {
        WAIT_START.with(|w| w.set(Some(Instant::now())));
    }
    rshmem_common::backoff::snooze_at(spins);
    if spins.is_multiple_of(256) {
        if let (Some(limit), Some(start)) = (wait_timeout(), WAIT_START.with(|w| w.get())) {
            if start.elapsed() > limit {
                fail(&Failure { call, problem: rshmem_device::Problem::WaitTimeout, pe: -1, addr: 0, len: 0 });
            }
        }
    }
}

fn fail(f: &Failure) -> ! {
    use rshmem_device::arch::host::trim;
    let me = rshmem_device::arch::host::state_my_pe();
    let c = coords();
    if let rshmem_device::Problem::Nic { syndrome, vendor, opcode } = f.problem {
        let why = rshmem_ibgda::emu::Reason::from_u8(vendor).map(|r| format!(": {}", r.describe())).unwrap_or_default();
        eprintln!(
            "rshmem: PE {me}: {}: {} ({} to PE {}: syndrome {syndrome:#x}, vendor syndrome {vendor:#x}{why}; WQE index {}; block {} thread {})",
            trim(f.call),
            trim(f.problem.text()),
            trim(rshmem_ibgda::mlx5::opcode::name(opcode)),
            f.pe,
            f.addr,
            c.block,
            c.thread
        );
        std::process::exit(1)
    }
    eprintln!(
        "rshmem: PE {me}: {}: {} (target PE {}, address {:#x}, {} bytes; block {} thread {})",
        trim(f.call),
        trim(f.problem.text()),
        f.pe,
        f.addr,
        f.len,
        c.block,
        c.thread
    );
    std::process::exit(1)
}

static HOOKS: Hooks = Hooks { coords, sync_block, sync_warp, bcast_block, bcast_warp, idle, fail };

/// Aborts the process when dropped during a panic (the host analogue of a device trap).
struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("rshmem: a kernel thread panicked; aborting this PE");
            std::process::abort();
        }
    }
}

/// Runs `kernel` on `blocks` x `threads` host threads of this PE and waits for all of them, as a GPU
/// kernel launch followed by a stream synchronize. Inside, `rshmem_device::thread::*` give each thread
/// its coordinates; warp- and block-scoped calls synchronize the warp's/block's threads.
pub fn launch<F: Fn() + Sync>(blocks: u32, threads: u32, kernel: F) {
    launch_shaped(Dim3::from(blocks), Dim3::from(threads), kernel)
}

/// [`launch`] with a 1-D, 2-D or 3-D grid of `grid` blocks of `block` threads (their products are the
/// block and thread counts; every dimension at least 1).
pub fn launch_shaped<F: Fn() + Sync>(grid: Dim3, block: Dim3, kernel: F) {
    let (blocks, threads) = (grid.count().unwrap_or(0), block.count().unwrap_or(0));
    assert!(blocks >= 1 && threads >= 1, "rshmem::cpu::launch: grid {grid:?} and block {block:?} need every dimension >= 1 (and fewer than 2^32 in all)");
    let (grid_dim, block_dim) = (grid, block);
    let kernel = &kernel;
    std::thread::scope(|s| {
        for b in 0..blocks {
            let block = Arc::new(Barrier::new(threads as usize));
            let block_word = Arc::new(AtomicU64::new(0));
            let warps: Vec<(Arc<Barrier>, Arc<AtomicU64>)> = (0..threads.div_ceil(32))
                .map(|w| (Arc::new(Barrier::new(std::cmp::min(32, threads - 32 * w) as usize)), Arc::new(AtomicU64::new(0))))
                .collect();
            for t in 0..threads {
                let (warp, warp_word) = warps[(t / 32) as usize].clone();
                let launch = Launch { block: block.clone(), warp, block_word: block_word.clone(), warp_word };
                std::thread::Builder::new()
                    .name(format!("rshmem-b{b}t{t}"))
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, move || {
                        COORDS.with(|c| c.set(Coords { thread: t, threads, block: b, blocks, block_dim, grid_dim }));
                        LAUNCH.with(|l| *l.borrow_mut() = Some(launch));
                        // A panicking kernel thread must not leave its block's other threads waiting
                        // in a barrier forever: like a GPU trap, it ends the whole PE (rshmrun then
                        // names it and stops the others).
                        let _trap = AbortOnPanic;
                        kernel();
                        LAUNCH.with(|l| *l.borrow_mut() = None);
                    })
                    .expect("rshmem::cpu::launch: cannot start a kernel thread");
            }
        }
    });
}
