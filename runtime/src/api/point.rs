//! The host's point operations: host AMOs, strided puts and gets from the host, and the `_on_stream`
//! forms of `p`, `g`, signal updates and waits. Each is checked here (PE, symmetric range, alignment,
//! stride, width, operator), then run by the device library's one implementation
//! (`rshmem_device::point`): a one-thread kernel on a GPU, on the caller's stream or on the runtime's
//! host stream and waited for; a direct call on the CPU backend, whose "device" code runs on host
//! threads (the CPU backend has no streams: an on-stream call there runs at once, in program order).

use crate::api::stream::Stream;
use crate::error::{Error, Result};
use crate::runtime::{self, Runtime};
use rshmem_device::point::{what, Op};
use rshmem_device::remote::proxy::amo as code;
use rshmem_device::state::{CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, CMP_NE, SIGNAL_ADD, SIGNAL_SET};

/// Runs `op` after the checks: now (`stream` None, the host API) or enqueued on `stream`. Returns the
/// value the operation produces (waited for when `want`).
///
/// # Safety
/// Local buffers that `op` names (`aux` of IPUT, `dest` of IGET, the status and value arrays of a
/// wait) must be valid for its extent until it has run.
pub(crate) unsafe fn run(call: &str, op: Op, stream: Option<Stream>, want: bool) -> Result<u64> {
    let rt = runtime::get(call)?;
    check(&rt, call, &op)?;
    if rt.backend().name() == "cuda" {
        // SAFETY: checked above; the local buffers are our caller's promise.
        return crate::api::stream::with_backend(call, |be| unsafe { be.point_op(call, &op, stream, want) });
    }
    // SAFETY: as above; on the CPU backend device operations run on the calling thread.
    Ok(unsafe { rshmem_device::point::run(&op) })
}

/// The operation's symmetric extent, PE, alignment, strides and codes, with an error naming the call
/// and the bad argument.
fn check(rt: &Runtime, call: &str, op: &Op) -> Result<()> {
    let w = op.width as usize;
    let widths: &[usize] = match op.what {
        what::AMO => &[4, 8],
        what::WAIT => &[2, 4, 8],
        what::IPUT | what::IGET => &[1, 2, 4, 8, 16],
        _ => &[1, 2, 4, 8],
    };
    if !widths.contains(&w) {
        return Err(Error::new(format!("{call}: element width {w} bytes is not one of {widths:?}")));
    }
    let pe = if op.what == what::WAIT { runtime::my_pe() } else { op.pe };
    match op.what {
        what::AMO if op.code == 0 || op.code > code::LAST as u32 => {
            return Err(Error::new(format!("{call}: atomic operation code {} is not valid (1 to {})", op.code as i32, code::LAST)))
        }
        what::SIGNAL_OP if op.code as i32 != SIGNAL_SET && op.code as i32 != SIGNAL_ADD => {
            return Err(Error::new(format!(
                "{call}: signal operator {} is not NVSHMEM_SIGNAL_SET ({SIGNAL_SET}) or NVSHMEM_SIGNAL_ADD ({SIGNAL_ADD})",
                op.code as i32
            )))
        }
        what::WAIT if ![CMP_EQ, CMP_NE, CMP_GT, CMP_GE, CMP_LT, CMP_LE].contains(&(op.code as i32)) => {
            return Err(Error::new(format!("{call}: comparison {} is not one of NVSHMEM_CMP_EQ .. NVSHMEM_CMP_GE", op.code as i32)))
        }
        _ => {}
    }
    let (sym, stride) = match op.what {
        what::IPUT => (op.dest, op.dst),
        what::IGET => (op.aux, op.sst),
        _ => (op.dest, 1),
    };
    if matches!(op.what, what::IPUT | what::IGET) && (op.dst < 1 || op.sst < 1) {
        return Err(Error::new(format!("{call}: strides must be at least 1 element (dst {}, sst {})", op.dst, op.sst)));
    }
    if sym % w.min(8) as u64 != 0 {
        return Err(Error::new(format!("{call}: {sym:#x} is not aligned to its {w}-byte elements")));
    }
    let n = op.n.max(1);
    let extent = (n - 1)
        .checked_mul(stride as u64)
        .and_then(|e| e.checked_add(1))
        .and_then(|e| e.checked_mul(w as u64))
        .ok_or_else(|| Error::new(format!("{call}: {n} elements at stride {stride} overflow the address space")))?;
    if matches!(op.what, what::IPUT | what::IGET) && op.n == 0 {
        return Ok(());
    }
    rt.check_rma(call, sym as *const u8, extent as usize, pe).map(|_| ())
}

/// A host AMO: `code` (`remote::proxy::amo`) on the `width`-byte `dest` at `pe`; returns the old value
/// for the fetching codes.
///
/// # Safety
/// None beyond the checks (the operation touches only symmetric memory).
pub fn amo(call: &str, code: i32, width: u32, dest: *mut u8, value: u64, cond: u64, pe: i32) -> Result<u64> {
    // A negative code stays visible as itself in `check`'s message (`op.code as i32`).
    let op = Op { what: what::AMO, code: code as u32, width, pe, dest: dest as u64, value, cond, ..Op::default() };
    // SAFETY: an AMO names no local buffer.
    unsafe { run(call, op, None, true) }
}

/// A strided put (`get` false) or get of `nelems` elements of `width` bytes, from the host (`stream`
/// None: complete on return; the local side may be host or device memory) or on a stream (the local
/// side device-accessible).
///
/// # Safety
/// The local side (`src` of a put, `dest` of a get) must be valid for every element at its stride
/// until the operation has run.
#[allow(clippy::too_many_arguments)]
pub unsafe fn strided(call: &str, get: bool, dest: *mut u8, src: *const u8, dst: isize, sst: isize, nelems: usize, width: u32, pe: i32, stream: Option<Stream>) -> Result<()> {
    let op = Op {
        what: if get { what::IGET } else { what::IPUT },
        width,
        pe,
        dest: dest as u64,
        aux: src as u64,
        n: nelems as u64,
        dst: dst as i64,
        sst: sst as i64,
        ..Op::default()
    };
    if stream.is_some() {
        // SAFETY: our caller's contract (the local side device-accessible until the stream runs it).
        return unsafe { run(call, op, stream, false).map(|_| ()) };
    }
    // From the host the local side may be pageable host memory, which a kernel cannot read: the
    // checked extent is moved element by element through the host RMA calls (a contiguous transfer at
    // once), which reach every PE by its route, then completed.
    let rt = runtime::get(call)?;
    check(&rt, call, &op)?;
    if nelems == 0 {
        return Ok(());
    }
    let w = width as usize;
    // SAFETY: every element lies in the checked symmetric extent and, by our caller's contract, in the
    // local buffer.
    unsafe {
        if dst == 1 && sst == 1 {
            let bytes = nelems * w;
            return if get { rt.getmem(dest, src, bytes, pe) } else { rt.putmem(dest, src, bytes, pe) };
        }
        for i in 0..nelems {
            let d = dest.offset(i as isize * dst * w as isize);
            let s = src.offset(i as isize * sst * w as isize);
            if get {
                rt.getmem_nbi(d, s, w, pe)?;
            } else {
                rt.putmem_nbi(d, s, w, pe)?;
            }
        }
    }
    rt.quiet()
}

/// A signal update: `op` ([`SIGNAL_SET`] or [`SIGNAL_ADD`]) of `value` on the u64 `sig` at `pe`, from
/// the host and complete on return (`stream` None), or enqueued on `stream` (on the CPU backend, which
/// has no streams, it runs at once). `call` names the caller in errors. The PE, the symmetric address,
/// its alignment and the operator are checked.
pub fn signal_op(call: &str, sig: *mut u64, value: u64, op: i32, pe: i32, stream: Option<Stream>) -> Result<()> {
    let o = Op { what: what::SIGNAL_OP, code: op as u32, width: 8, pe, dest: sig as u64, value, ..Op::default() };
    // SAFETY: a signal update names no local buffer (only the checked symmetric `sig`); a `Stream` is a
    // live stream of this PE's context by `Stream::from_raw`'s contract.
    unsafe { run(call, o, stream, false).map(|_| ()) }
}

/// Waits until this PE's `width`-byte (2, 4 or 8) integer `ivar`, read as `signed` or not, compares
/// true with `cmp` (`CMP_EQ` .. `CMP_GE`) against `value`: from the host, returning when it does
/// (`stream` None), or making the work enqueued later on `stream` wait for it (on the CPU backend, a
/// wait on this thread either way). Bounded by `RSHMEM_WAIT_TIMEOUT` where that applies. `call` names
/// the caller in errors; the address, its alignment, the width and the comparison are checked.
pub fn wait_until(call: &str, ivar: *mut u8, width: u32, signed: bool, cmp: i32, value: u64, stream: Option<Stream>) -> Result<()> {
    let o = Op { what: what::WAIT, code: cmp as u32, width, signed, dest: ivar as u64, value, n: 1, ..Op::default() };
    // SAFETY: a wait on one variable names no local buffer (no status or value array: `aux` and `cond`
    // are 0), only the checked symmetric `ivar`; the stream as in `signal_op`.
    unsafe { run(call, o, stream, false).map(|_| ()) }
}
