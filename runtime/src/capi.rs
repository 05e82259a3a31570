//! C ABI of the host library (`librshmem.so` / `librshmem.a`), declared in `rshmem.h`; `nvshmem.h`
//! maps NVSHMEM's names onto these. Errors are printed with the call's name; calls that cannot report
//! an error through their C signature stop the program (exit 1), as NVSHMEM does, rather than go on with
//! a broken job.

use crate::error::Error;
use crate::UniqueId;
use std::ffi::c_void;

fn report(e: &Error) {
    eprintln!("rshmem: PE {}: {e}", crate::my_pe());
}
/// For calls whose C signature has no error channel: a failed collective leaves the job unusable.
fn fatal(e: Error) -> ! {
    report(&e);
    std::process::exit(1)
}

/// The unique-id object of the C API (128 bytes, opaque).
#[repr(C)]
pub struct RshmemUniqueId {
    pub internal: [u8; 128],
}

#[no_mangle]
pub extern "C" fn rshmem_init() -> i32 {
    match crate::init() {
        Ok(()) => 0,
        Err(e) => {
            report(&e);
            1
        }
    }
}

/// # Safety
/// `id` must point to a unique id from `rshmem_get_unique_id` (on PE 0, passed to the others).
#[no_mangle]
pub unsafe extern "C" fn rshmem_init_unique_id(id: *const RshmemUniqueId, pe: i32, npes: i32) -> i32 {
    if id.is_null() || pe < 0 || npes < 1 || pe >= npes {
        report(&Error::new(format!("rshmem_init_unique_id: bad arguments (id {id:p}, pe {pe}, npes {npes})")));
        return 1;
    }
    let uid = UniqueId((*id).internal);
    match crate::init_with_unique_id(&uid, pe as usize, npes as usize) {
        Ok(()) => 0,
        Err(e) => {
            report(&e);
            1
        }
    }
}

/// # Safety
/// `id` must point to writable storage for one unique id.
#[no_mangle]
pub unsafe extern "C" fn rshmem_get_unique_id(id: *mut RshmemUniqueId) -> i32 {
    if id.is_null() {
        report(&Error::new("rshmem_get_unique_id: null id"));
        return 1;
    }
    match crate::get_unique_id() {
        Ok(u) => {
            (*id).internal = u.0;
            0
        }
        Err(e) => {
            report(&e);
            1
        }
    }
}

#[no_mangle]
pub extern "C" fn rshmem_finalize() {
    if let Err(e) = crate::finalize() {
        report(&e);
    }
}

#[no_mangle]
pub extern "C" fn rshmem_my_pe() -> i32 {
    crate::my_pe()
}
#[no_mangle]
pub extern "C" fn rshmem_n_pes() -> i32 {
    crate::n_pes()
}
#[no_mangle]
pub extern "C" fn rshmem_team_my_pe(team: i32) -> i32 {
    crate::team_my_pe(team)
}
#[no_mangle]
pub extern "C" fn rshmem_team_n_pes(team: i32) -> i32 {
    crate::team_n_pes(team)
}

fn alloc_or_null(r: crate::Result<*mut u8>) -> *mut c_void {
    match r {
        Ok(p) => p as *mut c_void,
        Err(e) => {
            report(&e);
            std::ptr::null_mut()
        }
    }
}
#[no_mangle]
pub extern "C" fn rshmem_malloc(bytes: usize) -> *mut c_void {
    alloc_or_null(crate::malloc(bytes))
}
#[no_mangle]
pub extern "C" fn rshmem_calloc(count: usize, size: usize) -> *mut c_void {
    alloc_or_null(crate::calloc(count, size))
}
#[no_mangle]
pub extern "C" fn rshmem_align(alignment: usize, bytes: usize) -> *mut c_void {
    alloc_or_null(crate::align(alignment, bytes))
}
#[no_mangle]
pub extern "C" fn rshmem_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    if let Err(e) = crate::free(p as *mut u8) {
        report(&e);
    }
}
#[no_mangle]
pub extern "C" fn rshmem_ptr(p: *const c_void, pe: i32) -> *mut c_void {
    crate::ptr(p as *const u8, pe) as *mut c_void
}
#[no_mangle]
pub extern "C" fn rshmem_barrier_all() {
    crate::barrier_all().unwrap_or_else(|e| fatal(e))
}
#[no_mangle]
pub extern "C" fn rshmem_sync_all() {
    crate::barrier_all().unwrap_or_else(|e| fatal(e))
}
#[no_mangle]
pub extern "C" fn rshmem_quiet() {
    crate::quiet().unwrap_or_else(|e| fatal(e))
}
/// # Safety
/// `src` readable for `bytes`; `dst` symmetric (checked).
#[no_mangle]
pub unsafe extern "C" fn rshmem_putmem(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32) {
    crate::putmem(dst as *mut u8, src as *const u8, bytes, pe).unwrap_or_else(|e| fatal(e))
}
/// # Safety
/// `dst` writable for `bytes`; `src` symmetric (checked).
#[no_mangle]
pub unsafe extern "C" fn rshmem_getmem(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32) {
    crate::getmem(dst as *mut u8, src as *const u8, bytes, pe).unwrap_or_else(|e| fatal(e))
}

// ---------------------------------------------------------------- on-stream (CUDA backend)
use crate::cuda::{self, Stream};

#[no_mangle]
pub extern "C" fn rshmem_barrier_all_on_stream(s: *mut c_void) {
    cuda::barrier_all_on_stream(Stream(s as _)).unwrap_or_else(|e| fatal(e))
}
#[no_mangle]
pub extern "C" fn rshmem_sync_all_on_stream(s: *mut c_void) {
    cuda::sync_all_on_stream(Stream(s as _)).unwrap_or_else(|e| fatal(e))
}
#[no_mangle]
pub extern "C" fn rshmem_quiet_on_stream(s: *mut c_void) {
    cuda::quiet_on_stream(Stream(s as _)).unwrap_or_else(|e| fatal(e))
}
/// # Safety
/// As `rshmem_putmem`; the copy runs later on `s`, so `src` must stay valid until then.
#[no_mangle]
pub unsafe extern "C" fn rshmem_putmem_on_stream(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32, s: *mut c_void) {
    // SAFETY: this function's contract (src readable until the copy ran on s) is putmem_on_stream's.
    unsafe { cuda::putmem_on_stream(dst as *mut u8, src as *const u8, bytes, pe, Stream(s as _)) }.unwrap_or_else(|e| fatal(e))
}
/// # Safety
/// As `rshmem_getmem`, completing later on `s`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_getmem_on_stream(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32, s: *mut c_void) {
    // SAFETY: this function's contract (dst writable until the copy ran on s) is getmem_on_stream's.
    unsafe { cuda::getmem_on_stream(dst as *mut u8, src as *const u8, bytes, pe, Stream(s as _)) }.unwrap_or_else(|e| fatal(e))
}

/// Called by the device library's init hook (compiled into nvcc programs) with the device address of
/// that program's `rshmemi_device_state`, which the runtime then fills in.
#[no_mangle]
pub extern "C" fn rshmemi_register_device_state(addr: *mut c_void, bytes: usize) -> i32 {
    let want = std::mem::size_of::<rshmem_device::state::DeviceState>();
    if bytes != 0 && bytes != want {
        report(&Error::new(format!(
            "rshmem_init (device library): the program's device state is {bytes} bytes but this librshmem expects \
             {want}: librshmem_device.a and librshmem.so come from different rshmem builds; rebuild the program \
             against the matching device library"
        )));
        return 1;
    }
    // SAFETY: only the device library's rshmemi_bind_device_library calls this (rshmem.h: internal),
    // with its own module's rshmemi_device_state (cudaGetSymbolAddress), of the size checked above, in
    // a module that stays loaded for the program's life. (Any other caller could pass any address:
    // this entry point should itself be `unsafe extern "C"`.)
    match cuda::with_backend("rshmem_init (device library)", |b| unsafe { b.register_state(addr as u64) }) {
        Ok(()) => 0,
        Err(e) => {
            report(&e);
            1
        }
    }
}
