//! Thin, checked wrappers over the CUDA driver calls the backend uses. Every failure names the call.

use crate::error::{Error, Result};
use cudarc::driver::sys as cu;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A driver result for messages: its name and `cuGetErrorString`'s text.
pub fn err_text(r: cu::CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorString writes a pointer to a static string (or leaves it null).
    unsafe { cu::cuGetErrorString(r, &mut p) };
    if p.is_null() {
        format!("{r:?}")
    } else {
        // SAFETY: non-null result is a NUL-terminated static string.
        format!("{r:?}: {}", unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy())
    }
}

/// `Ok` for `CUDA_SUCCESS`, else an error "`what` failed: ..." naming the result.
pub fn check(r: cu::CUresult, what: &str) -> Result<()> {
    if r == cu::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::new(format!("{what} failed: {}", err_text(r))))
    }
}

/// Like `check`, adding a hint when the error comes from an earlier kernel (sticky errors).
pub fn check_ctx(r: cu::CUresult, what: &str) -> Result<()> {
    check(r, what).map_err(|e| {
        if matches!(r, cu::CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION | cu::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS | cu::CUresult::CUDA_ERROR_LAUNCH_FAILED) {
            e.context("a kernel of this PE failed (see the device message above, e.g. a bad PE number or address in an rshmem call)")
        } else {
            e
        }
    })
}

/// Returns when everything enqueued on stream `s` so far has run, by polling an event between
/// back-offs instead of parking in the driver (`cuStreamSynchronize`, `cuCtxSynchronize`): while a
/// kernel waits for the proxy or the emulated NIC, their threads' CUDA calls must get through, and a
/// thread parked in the driver was seen to keep them from it (2 x H200 and 2 x H100: the suite's remote
/// scenarios, a host AMO through IBGDA with the return slots in GPU memory). `what` names the wait in
/// errors.
///
/// # Safety
/// `s` must be a live stream of the current context, or null (the legacy default stream).
pub unsafe fn wait_stream_polling(s: cu::CUstream, what: &str) -> Result<()> {
    let mut ev: cu::CUevent = std::ptr::null_mut();
    // SAFETY: out-pointer to a local; a timing-free event.
    check(unsafe { cu::cuEventCreate(&mut ev, cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32) }, "cuEventCreate")?;
    let r = (|| {
        // SAFETY: ev is a live event of the current context; `s` is a live stream of it or null (the
        // caller's contract).
        check_ctx(unsafe { cu::cuEventRecord(ev, s) }, "cuEventRecord")?;
        // SAFETY: ev is a live, recorded event of the current context.
        unsafe { wait_event_polling(ev, what) }
    })();
    // SAFETY: ev was created above and is destroyed once.
    unsafe { cu::cuEventDestroy_v2(ev) };
    r
}

/// Returns when recorded event `ev` has completed, polling it between back-offs (not
/// `cuEventSynchronize`, for `wait_stream_polling`'s reason). `what` names the wait in errors.
///
/// # Safety
/// `ev` must be a live event of the current context.
pub unsafe fn wait_event_polling(ev: cu::CUevent, what: &str) -> Result<()> {
    let mut backoff = rshmem_common::Backoff::new();
    loop {
        // SAFETY: ev is live (the caller's contract).
        match unsafe { cu::cuEventQuery(ev) } {
            cu::CUresult::CUDA_SUCCESS => return Ok(()),
            cu::CUresult::CUDA_ERROR_NOT_READY => {}
            other => return check_ctx(other, what),
        }
        backoff.snooze();
    }
}

/// Number of GPUs, or why none is usable.
pub fn device_count() -> std::result::Result<usize, String> {
    // SAFETY: probing for the library has no preconditions.
    if !unsafe { cu::is_culib_present() } {
        return Err("libcuda.so not found".into());
    }
    // SAFETY: cuInit may be called any number of times.
    let r = unsafe { cu::cuInit(0) };
    if r != cu::CUresult::CUDA_SUCCESS {
        return Err(format!("cuInit failed: {}", err_text(r)));
    }
    let mut n = 0;
    // SAFETY: out-pointer to a local.
    let r = unsafe { cu::cuDeviceGetCount(&mut n) };
    if r != cu::CUresult::CUDA_SUCCESS || n <= 0 {
        return Err(format!("no CUDA device ({})", err_text(r)));
    }
    Ok(n as usize)
}

/// Retains device `ordinal`'s primary context (the one the CUDA runtime uses) and makes it current.
///
/// The context is retained once per device and process and never released, so it outlives every
/// runtime instance: handles made in it (modules, events, device memory a program keeps across
/// `finalize` and a second `init`) stay valid handles, and a second `init` binds the same context
/// instead of adding one more retain each time.
pub fn bind_primary(ordinal: i32) -> Result<(cu::CUdevice, cu::CUcontext)> {
    /// (ordinal, device, context) of every primary context retained so far.
    struct Retained(Vec<(i32, cu::CUdevice, usize)>);
    static RETAINED: std::sync::Mutex<Retained> = std::sync::Mutex::new(Retained(Vec::new()));
    let mut held = RETAINED.lock().unwrap_or_else(|e| e.into_inner());
    let (dev, ctx) = match held.0.iter().find(|r| r.0 == ordinal) {
        Some(&(_, dev, ctx)) => (dev, ctx as cu::CUcontext),
        None => {
            let mut dev = 0;
            let mut ctx = std::ptr::null_mut();
            // SAFETY: out-pointers to locals; the retained context is recorded in RETAINED and never
            // released, so it stays valid for the process's life.
            unsafe {
                check(cu::cuDeviceGet(&mut dev, ordinal), "cuDeviceGet")?;
                check(cu::cuDevicePrimaryCtxRetain(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
            }
            held.0.push((ordinal, dev, ctx as usize));
            (dev, ctx)
        }
    };
    // SAFETY: ctx is a retained primary context (above), valid for the process's life.
    check(unsafe { cu::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")?;
    Ok((dev, ctx))
}

fn prop(dev: cu::CUdevice) -> cu::CUmemAllocationProp {
    // SAFETY: a zeroed CUmemAllocationProp is valid (all-integer/pointer C struct); fields set below.
    let mut p: cu::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = cu::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes = cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p.location.type_ = cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    p
}

/// The recommended allocation granularity of pinned device memory on `dev`, at least 2 MiB.
pub fn granularity(dev: cu::CUdevice) -> Result<usize> {
    let p = prop(dev);
    let mut g = 0usize;
    check(
        // SAFETY: valid prop and out-pointer.
        unsafe { cu::cuMemGetAllocationGranularity(&mut g, &p, cu::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) },
        "cuMemGetAllocationGranularity",
    )?;
    Ok(g.max(2 << 20))
}

/// Reserves `size` bytes of device virtual address space aligned to `align` (`cuMemAddressReserve`).
pub fn reserve(size: usize, align: usize) -> Result<u64> {
    let mut va = 0;
    // SAFETY: out-pointer; no fixed address requested.
    check(unsafe { cu::cuMemAddressReserve(&mut va, size, align, 0, 0) }, "cuMemAddressReserve")?;
    Ok(va)
}
/// Gives back an address range from `reserve`.
///
/// # Safety
/// `va`/`size` must be exactly a range returned by `reserve` and not yet given back, with nothing
/// mapped in it any more; no pointer into it may be used afterwards (the driver may hand the range
/// out again).
pub unsafe fn unreserve(va: u64, size: usize) {
    // SAFETY: the caller's contract above.
    unsafe { cu::cuMemAddressFree(va, size) };
}

/// Creates `size` bytes (a multiple of the granularity) of pinned memory on `dev`, exportable as a
/// POSIX fd (`cuMemCreate`).
pub fn create(dev: cu::CUdevice, size: usize) -> Result<cu::CUmemGenericAllocationHandle> {
    let p = prop(dev);
    let mut h = 0;
    // SAFETY: valid prop; size is a multiple of the granularity.
    check(unsafe { cu::cuMemCreate(&mut h, size, &p, 0) }, &format!("cuMemCreate({size} bytes of GPU memory)"))?;
    Ok(h)
}

/// Maps `h` at `va` and gives this process's GPU read/write access.
pub fn map(va: u64, size: usize, h: cu::CUmemGenericAllocationHandle, dev: cu::CUdevice) -> Result<()> {
    // SAFETY: the driver checks that va..va+size lies in a reserved range with nothing mapped and
    // that h is a live handle of at least `size` bytes (an error otherwise); mapping fresh memory into
    // an unmapped range changes no existing object.
    check(unsafe { cu::cuMemMap(va, size, 0, h, 0) }, "cuMemMap")?;
    // SAFETY: zeroed access descriptor is valid; fields set below.
    let mut d: cu::CUmemAccessDesc = unsafe { std::mem::zeroed() };
    d.location.type_ = cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = dev;
    d.flags = cu::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    // SAFETY: the range was just mapped by us (above); d is a valid descriptor.
    check(unsafe { cu::cuMemSetAccess(va, size, &d, 1) }, "cuMemSetAccess")
}
/// Unmaps a range mapped by `map`.
///
/// # Safety
/// `va`/`size` must be exactly a range mapped by `map` and still mapped; no kernel, copy or host
/// pointer may use it any more (the caller synchronized), since the memory behind it may go away.
pub unsafe fn unmap(va: u64, size: usize) {
    // SAFETY: the caller's contract above.
    unsafe { cu::cuMemUnmap(va, size) };
}
/// Releases an allocation handle from `create` or `import_fd` (mappings of it keep their own
/// reference, so they stay usable until unmapped).
///
/// # Safety
/// `h` must be a live handle that the caller owns and does not use again (a released handle value may
/// be reused by the driver for another allocation).
pub unsafe fn release(h: cu::CUmemGenericAllocationHandle) {
    // SAFETY: the caller's contract above.
    unsafe { cu::cuMemRelease(h) };
}

/// Exports an allocation from [`create`] as a POSIX fd that a node-local peer can import.
pub fn export_fd(h: cu::CUmemGenericAllocationHandle) -> Result<OwnedFd> {
    let mut fd: i32 = -1;
    check(
        // SAFETY: for POSIX fds the shareable handle is an int written through the pointer.
        unsafe {
            cu::cuMemExportToShareableHandle(
                &mut fd as *mut i32 as *mut std::ffi::c_void,
                h,
                cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        },
        "cuMemExportToShareableHandle",
    )?;
    // SAFETY: the driver returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Imports a peer's allocation from the fd it exported (the handle is the caller's to [`release`]).
pub fn import_fd(fd: &OwnedFd) -> Result<cu::CUmemGenericAllocationHandle> {
    let mut h = 0;
    check(
        // SAFETY: for POSIX fds the OS handle is the descriptor value cast to a pointer.
        unsafe {
            cu::cuMemImportFromShareableHandle(
                &mut h,
                fd.as_raw_fd() as usize as *mut std::ffi::c_void,
                cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        },
        "cuMemImportFromShareableHandle",
    )?;
    Ok(h)
}

/// Copies `bytes` from host memory at `src` to device memory at `dst` (synchronous).
///
/// # Safety
/// `src` must be readable for `bytes`; `dst..dst+bytes` must be device memory (or unified memory)
/// of the current context that the caller may overwrite: no other object may live there.
pub unsafe fn htod(dst: u64, src: *const u8, bytes: usize) -> Result<()> {
    // SAFETY: the caller's contract above.
    check_ctx(unsafe { cu::cuMemcpyHtoD_v2(dst, src as *const std::ffi::c_void, bytes) }, "cuMemcpyHtoD")
}
/// Copies `bytes` from device memory at `src` to host memory at `dst` (synchronous).
///
/// # Safety
/// `dst` must be writable for `bytes` and not aliased by any live reference; `src..src+bytes` must be
/// readable device memory of the current context.
pub unsafe fn dtoh(dst: *mut u8, src: u64, bytes: usize) -> Result<()> {
    // SAFETY: the caller's contract above.
    check_ctx(unsafe { cu::cuMemcpyDtoH_v2(dst as *mut std::ffi::c_void, src, bytes) }, "cuMemcpyDtoH")
}
