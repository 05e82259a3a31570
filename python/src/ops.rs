//! The operations, each one runtime call: on the CUDA backend enqueued on a stream (the runtime's
//! `*_on_stream` calls), on the CPU backend, which has no streams, run at once (the runtime's blocking
//! host calls). Buffers are read with `mem::describe` (never raw addresses); what the runtime checks
//! (PEs, symmetric ranges, teams, roots, reduction types) it checks, with its message; what only the
//! binding knows (element types and counts of the two sides) is checked here first.
//!
//! The interpreter's lock is released while the runtime works (a barrier, a wait, a blocking put), so
//! other Python threads run meanwhile.

use crate::dtype::DType;
use crate::mem::{self, Mem};
use crate::errors::{err, not_initialized};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rshmem::coll;
use rshmem_device::coll::host_op;
use rshmem::cuda::Stream;
use rshmem_device::state::TEAM_WORLD;

/// Whether the job runs on the CUDA backend; an error naming `call` before init or after finalize.
fn on_gpu(call: &str) -> PyResult<bool> {
    match rshmem::backend_name() {
        Ok(b) => Ok(b == "cuda"),
        Err(_) => Err(not_initialized(call)),
    }
}

/// The stream `handle` names (0: the legacy default stream).
fn stream_of(handle: usize) -> Stream {
    // SAFETY: the handle comes from the caller's stream object (the package reads it from a torch or
    // CUDA stream, or the current torch stream): a live stream of this PE's GPU, as every on-stream call
    // of NVSHMEM requires of its caller. An invalid handle is refused by the CUDA driver, whose error the
    // runtime reports.
    unsafe { Stream::from_raw(handle as _) }
}

fn same_type(call: &str, a: &Mem<'_>, b: &Mem<'_>, an: &str, bn: &str) -> PyResult<()> {
    if a.dtype != b.dtype {
        return Err(PyValueError::new_err(format!(
            "{call}: dtype mismatch: {an} is {} and {bn} is {}",
            a.dtype.name(),
            b.dtype.name()
        )));
    }
    Ok(())
}

fn same_count(call: &str, a: &Mem<'_>, b: &Mem<'_>, an: &str, bn: &str) -> PyResult<()> {
    if a.count != b.count {
        return Err(PyValueError::new_err(format!("{call}: {an} has {} values and {bn} has {}: they must be equal", a.count, b.count)));
    }
    Ok(())
}

/// Put (`put` true: `dst` symmetric on `pe`, `src` local) or get (`src` symmetric on `pe`, `dst` local) of
/// equal element types and counts.
fn rma(py: Python<'_>, call: &str, put: bool, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, pe: i32, stream: usize) -> PyResult<()> {
    let gpu = on_gpu(call)?;
    let d = mem::describe(call, "dst", dst, true)?;
    let s = mem::describe(call, "src", src, false)?;
    same_type(call, &d, &s, "dst", "src")?;
    same_count(call, &d, &s, "dst", "src")?;
    if !gpu && (d.cuda || s.cuda) {
        return Err(PyValueError::new_err(format!("{call}: a CUDA tensor on the CPU backend (this job's memory is host memory)")));
    }
    let (da, sa, n) = (d.addr, s.addr, d.nbytes);
    let r = py.detach(|| {
        let (dp, sp) = (da as *mut u8, sa as *const u8);
        // SAFETY: the local side is the memory of a live object held for the call (`mem::describe`),
        // of `n` bytes; the symmetric side is checked by the runtime. On a stream, the object must stay
        // alive until the stream has run the copy (the caller's part, as with every on-stream call).
        unsafe {
            match (gpu, put) {
                (true, true) => rshmem::cuda::putmem_on_stream(dp, sp, n, pe, stream_of(stream)),
                (true, false) => rshmem::cuda::getmem_on_stream(dp, sp, n, pe, stream_of(stream)),
                (false, true) => rshmem::putmem(dp, sp, n, pe),
                (false, false) => rshmem::getmem(dp, sp, n, pe),
            }
        }
    });
    r.map_err(|e| err(e.context(call)))
}

/// Copies `src` (local: an array or tensor) into symmetric `dst` on PE `pe`.
#[pyfunction]
pub fn put(py: Python<'_>, call: &str, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, pe: i32, stream: usize) -> PyResult<()> {
    rma(py, call, true, dst, src, pe, stream)
}

/// Copies symmetric `src` on PE `pe` into `dst` (local).
#[pyfunction]
pub fn get(py: Python<'_>, call: &str, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, pe: i32, stream: usize) -> PyResult<()> {
    rma(py, call, false, dst, src, pe, stream)
}

/// The first element of a signal array (a symmetric uint64 or int64 array).
fn signal_addr(call: &str, sig: &Bound<'_, PyAny>) -> PyResult<usize> {
    let m = mem::describe(call, "the signal", sig, true)?;
    if !matches!(m.dtype, DType::U64 | DType::I64) || m.count == 0 {
        return Err(PyValueError::new_err(format!(
            "{call}: the signal must be a symmetric uint64 (or int64) array of at least one value; got {} values of {}",
            m.count,
            m.dtype.name()
        )));
    }
    Ok(m.addr)
}

/// `put`, then the signal update `op` (SET or ADD) of `value` on `sig`'s first value at `pe`, which
/// lands after the data: in stream order on GPUs (as `nvshmemx_putmem_signal_on_stream`), after a
/// quiet on the CPU backend.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn put_signal(
    py: Python<'_>,
    call: &str,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    sig: &Bound<'_, PyAny>,
    value: u64,
    op: i32,
    pe: i32,
    stream: usize,
) -> PyResult<()> {
    let gpu = on_gpu(call)?;
    let sa = signal_addr(call, sig)?;
    rma(py, call, true, dst, src, pe, stream)?;
    py.detach(|| {
        if gpu {
            rshmem::point::signal_op(call, sa as *mut u64, value, op, pe, Some(stream_of(stream)))
        } else {
            rshmem::quiet()?;
            rshmem::point::signal_op(call, sa as *mut u64, value, op, pe, None)
        }
    })
    .map_err(err)
}

/// The signal update alone.
#[pyfunction]
pub fn signal_op(py: Python<'_>, call: &str, sig: &Bound<'_, PyAny>, value: u64, op: i32, pe: i32, stream: usize) -> PyResult<()> {
    let gpu = on_gpu(call)?;
    let sa = signal_addr(call, sig)?;
    let s = gpu.then(|| stream_of(stream));
    py.detach(|| rshmem::point::signal_op(call, sa as *mut u64, value, op, pe, s)).map_err(err)
}

/// Waits until this PE's `var` (the first value of an integer array of 2, 4 or 8 bytes) compares true
/// with `cmp` against `value`: later work on the stream waits (GPUs), or this call does (CPU backend).
#[pyfunction]
pub fn wait_until(py: Python<'_>, call: &str, var: &Bound<'_, PyAny>, cmp: i32, value: i128, stream: usize) -> PyResult<()> {
    let gpu = on_gpu(call)?;
    let m = mem::describe(call, "the variable", var, false)?;
    if !m.dtype.is_integer() || m.count == 0 {
        return Err(PyValueError::new_err(format!(
            "{call}: the variable must be a symmetric integer array (2, 4 or 8 bytes per value) of at least one value; got {} values of {}",
            m.count,
            m.dtype.name()
        )));
    }
    let (lo, hi) = if m.dtype.is_signed_integer() { (-(1i128 << (m.dtype.size() * 8 - 1)), (1i128 << (m.dtype.size() * 8 - 1)) - 1) } else { (0, (1i128 << (m.dtype.size() * 8)) - 1) };
    if value < lo || value > hi {
        return Err(PyValueError::new_err(format!("{call}: value {value} does not fit the variable's type {}", m.dtype.name())));
    }
    let (addr, width, signed) = (m.addr, m.dtype.size() as u32, m.dtype.is_signed_integer());
    drop(m);
    let s = gpu.then(|| stream_of(stream));
    py.detach(|| rshmem::point::wait_until(call, addr as *mut u8, width, signed, cmp, value as u64, s)).map_err(err)
}

/// Completes this PE's outstanding operations (on the stream on GPUs).
#[pyfunction]
pub fn quiet(py: Python<'_>, call: &str, stream: usize) -> PyResult<()> {
    let gpu = on_gpu(call)?;
    py.detach(|| if gpu { rshmem::cuda::quiet_on_stream(stream_of(stream)) } else { rshmem::quiet() }).map_err(|e| err(e.context(call)))
}

/// Barrier (`barrier` true: completes this PE's operations first) or sync of `team`.
#[pyfunction]
pub fn team_sync(py: Python<'_>, call: &str, team: i32, barrier: bool, stream: usize) -> PyResult<()> {
    let gpu = on_gpu(call)?;
    py.detach(|| match (gpu, barrier, team == TEAM_WORLD) {
        (true, true, true) => rshmem::cuda::barrier_all_on_stream(stream_of(stream)),
        (true, false, true) => rshmem::cuda::sync_all_on_stream(stream_of(stream)),
        (true, _, false) => {
            let what = if barrier { host_op::BARRIER } else { host_op::SYNC };
            // SAFETY: a barrier or sync has no buffers; the stream as in `stream_of`.
            unsafe { coll::collective_on_stream(what, team, std::ptr::null_mut(), std::ptr::null(), 0, 0, 0, stream as _) }
        }
        (false, true, _) => coll::barrier(team),
        (false, false, _) => coll::team_sync(team),
    })
    .map_err(|e| err(e.context(call)))
}

/// A symmetric buffer of a collective: its memory, which must lie inside one live allocation made by
/// this package (the runtime's collectives trust their buffers to be symmetric and of the sizes they
/// are told).
fn symmetric<'py>(call: &str, what: &str, obj: &Bound<'py, PyAny>, writable: bool) -> PyResult<Mem<'py>> {
    let m = mem::describe(call, what, obj, writable)?;
    if !crate::heap::is_live_symmetric(m.addr, m.nbytes) {
        return Err(crate::errors::Error::new_err(format!(
            "{call}: {what} ({:#x}, {} bytes) is not inside a live symmetric allocation (make it with rshmem.array or rshmem.tensor; it must not be freed)",
            m.addr, m.nbytes
        )));
    }
    Ok(m)
}

/// The member count of `team`, or the runtime's error.
fn team_size(call: &str, team: i32) -> PyResult<usize> {
    usize::try_from(coll::team_n_pes(team)).map_err(|_| crate::errors::Error::new_err(format!("{call}: team {team} does not exist (never created, or destroyed)")))
}

/// Reduction operator codes by name.
fn reduce_op(call: &str, op: &str) -> PyResult<u32> {
    use rshmem::coll::op as o;
    Ok(match op {
        "sum" => o::SUM,
        "min" => o::MIN,
        "max" => o::MAX,
        "prod" => o::PROD,
        "and" | "band" => o::AND,
        "or" | "bor" => o::OR,
        "xor" | "bxor" => o::XOR,
        _ => return Err(PyValueError::new_err(format!("{call}: reduction operator {op:?} is not one of sum, min, max, prod, and, or, xor"))),
    })
}

/// Collective `what` of `team` over `dst` and `src`, all runtime arguments given: `n` (bytes, or
/// elements for reductions), `a`, `b`.
#[allow(clippy::too_many_arguments)]
fn collective(py: Python<'_>, call: &str, gpu: bool, what: u32, team: i32, d: Mem<'_>, s: Mem<'_>, n: usize, a: u64, b: u64, stream: usize) -> PyResult<()> {
    let (da, sa) = (d.addr, s.addr);
    let st = if gpu { stream } else { 0 };
    let r = py.detach(|| {
        // SAFETY: both buffers lie inside live symmetric allocations (`symmetric`), of the sizes the
        // collective reads and writes (checked by the callers against the team's size); on a stream
        // they stay allocated until it has run (free waits for this PE's device work); the stream as in
        // `stream_of` (null on the CPU backend, which runs the collective at once).
        unsafe { coll::collective_on_stream(what, team, da as *mut u8, sa as *const u8, n, a, b, st as _) }
    });
    r.map_err(|e| err(e.context(call)))
}

/// A collective's operands: whether the job runs on GPUs, then `dst` (symmetric, writable) and `src`
/// (symmetric), of one element type.
fn coll_operands<'py>(call: &str, dst: &Bound<'py, PyAny>, src: &Bound<'py, PyAny>) -> PyResult<(bool, Mem<'py>, Mem<'py>)> {
    let gpu = on_gpu(call)?;
    let (d, s) = (symmetric(call, "dst", dst, true)?, symmetric(call, "src", src, false)?);
    same_type(call, &d, &s, "dst", "src")?;
    Ok((gpu, d, s))
}

/// `src` on member `root` of `team` into `dst` on every member.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn broadcast(py: Python<'_>, call: &str, team: i32, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, root: i32, stream: usize) -> PyResult<()> {
    let (gpu, d, s) = coll_operands(call, dst, src)?;
    same_count(call, &d, &s, "dst", "src")?;
    let n = s.nbytes;
    collective(py, call, gpu, host_op::BROADCAST, team, d, s, n, root as i64 as u64, 0, stream)
}

/// Every member's `src`, in member order, into `dst` (team size x `src` values).
#[pyfunction]
pub fn fcollect(py: Python<'_>, call: &str, team: i32, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, stream: usize) -> PyResult<()> {
    let (gpu, d, s) = coll_operands(call, dst, src)?;
    let size = team_size(call, team)?;
    if d.count != size * s.count {
        return Err(PyValueError::new_err(format!(
            "{call}: dst has {} values; the team's {size} members' src of {} values need {}",
            d.count,
            s.count,
            size * s.count
        )));
    }
    let n = s.nbytes;
    collective(py, call, gpu, host_op::FCOLLECT, team, d, s, n, 0, 0, stream)
}

/// Block i of `src` to member i's `dst`, at block `my index` (`src` and `dst` of team size x block).
#[pyfunction]
pub fn alltoall(py: Python<'_>, call: &str, team: i32, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, stream: usize) -> PyResult<()> {
    let (gpu, d, s) = coll_operands(call, dst, src)?;
    let size = team_size(call, team)?;
    same_count(call, &d, &s, "dst", "src")?;
    if s.count % size != 0 {
        return Err(PyValueError::new_err(format!("{call}: src has {} values, not a multiple of the team's {size} members", s.count)));
    }
    let n = s.nbytes / size;
    collective(py, call, gpu, host_op::ALLTOALL, team, d, s, n, 0, 0, stream)
}

/// The reduction with `op` of every member's `src` into `dst` on every member (`reducescatter`:
/// member i gets block i of it, `src` being team size x `dst`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn reduce(py: Python<'_>, call: &str, team: i32, dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, op: &str, scatter: bool, stream: usize) -> PyResult<()> {
    let (gpu, d, s) = coll_operands(call, dst, src)?;
    let code = reduce_op(call, op)?;
    let size = team_size(call, team)?;
    if scatter && s.count != size * d.count {
        return Err(PyValueError::new_err(format!(
            "{call}: src has {} values; the team's {size} members' blocks of dst's {} values need {}",
            s.count,
            d.count,
            size * d.count
        )));
    }
    if !scatter {
        same_count(call, &d, &s, "dst", "src")?;
    }
    // The runtime checks that the operator applies to the type; its message names both by code.
    let named = format!("{call}(op {op:?}, dtype {})", d.dtype.name());
    let (n, dt) = (d.count, d.dtype.reduce_code());
    let what = if scatter { host_op::REDUCESCATTER } else { host_op::REDUCE };
    collective(py, &named, gpu, what, team, d, s, n, dt as u64, code as u64, stream)
}
