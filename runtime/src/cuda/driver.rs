//! Thin, checked wrappers over the CUDA driver calls the backend uses. Every failure names the call.

use crate::error::{Error, Result};
use cudarc::driver::sys as cu;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
pub fn bind_primary(ordinal: i32) -> Result<(cu::CUdevice, cu::CUcontext)> {
    let mut dev = 0;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: out-pointers to locals; the context stays retained for the process's life.
    unsafe {
        check(cu::cuDeviceGet(&mut dev, ordinal), "cuDeviceGet")?;
        check(cu::cuDevicePrimaryCtxRetain(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
        check(cu::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")?;
    }
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

pub fn granularity(dev: cu::CUdevice) -> Result<usize> {
    let p = prop(dev);
    let mut g = 0usize;
    // SAFETY: valid prop and out-pointer.
    check(
        unsafe { cu::cuMemGetAllocationGranularity(&mut g, &p, cu::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) },
        "cuMemGetAllocationGranularity",
    )?;
    Ok(g.max(2 << 20))
}

pub fn reserve(size: usize, align: usize) -> Result<u64> {
    let mut va = 0;
    // SAFETY: out-pointer; no fixed address requested.
    check(unsafe { cu::cuMemAddressReserve(&mut va, size, align, 0, 0) }, "cuMemAddressReserve")?;
    Ok(va)
}
pub fn unreserve(va: u64, size: usize) {
    // SAFETY: va/size come from a successful reserve, nothing is mapped there any more.
    unsafe { cu::cuMemAddressFree(va, size) };
}

pub fn create(dev: cu::CUdevice, size: usize) -> Result<cu::CUmemGenericAllocationHandle> {
    let p = prop(dev);
    let mut h = 0;
    // SAFETY: valid prop; size is a multiple of the granularity.
    check(unsafe { cu::cuMemCreate(&mut h, size, &p, 0) }, &format!("cuMemCreate({size} bytes of GPU memory)"))?;
    Ok(h)
}

/// Maps `h` at `va` and gives this process's GPU read/write access.
pub fn map(va: u64, size: usize, h: cu::CUmemGenericAllocationHandle, dev: cu::CUdevice) -> Result<()> {
    // SAFETY: va..va+size lies in a range we reserved and is unmapped; h is a live handle of `size`.
    check(unsafe { cu::cuMemMap(va, size, 0, h, 0) }, "cuMemMap")?;
    // SAFETY: zeroed access descriptor is valid; fields set below.
    let mut d: cu::CUmemAccessDesc = unsafe { std::mem::zeroed() };
    d.location.type_ = cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = dev;
    d.flags = cu::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    // SAFETY: the range was just mapped.
    check(unsafe { cu::cuMemSetAccess(va, size, &d, 1) }, "cuMemSetAccess")
}
pub fn unmap(va: u64, size: usize) {
    // SAFETY: the range was mapped by `map` and no kernel runs (caller synchronized).
    unsafe { cu::cuMemUnmap(va, size) };
}
pub fn release(h: cu::CUmemGenericAllocationHandle) {
    // SAFETY: h is a live handle; mappings keep their own reference.
    unsafe { cu::cuMemRelease(h) };
}

pub fn export_fd(h: cu::CUmemGenericAllocationHandle) -> Result<OwnedFd> {
    let mut fd: i32 = -1;
    // SAFETY: for POSIX fds the shareable handle is an int written through the pointer.
    check(
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

pub fn import_fd(fd: &OwnedFd) -> Result<cu::CUmemGenericAllocationHandle> {
    let mut h = 0;
    // SAFETY: for POSIX fds the OS handle is the descriptor value cast to a pointer.
    check(
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

pub fn htod(dst: u64, src: *const u8, bytes: usize) -> Result<()> {
    // SAFETY: src is readable for bytes; dst is device memory of at least bytes (caller).
    check_ctx(unsafe { cu::cuMemcpyHtoD_v2(dst, src as *const std::ffi::c_void, bytes) }, "cuMemcpyHtoD")
}
pub fn dtoh(dst: *mut u8, src: u64, bytes: usize) -> Result<()> {
    // SAFETY: dst is writable for bytes; src is device memory of at least bytes (caller).
    check_ctx(unsafe { cu::cuMemcpyDtoH_v2(dst as *mut std::ffi::c_void, src, bytes) }, "cuMemcpyDtoH")
}
