//! C ABI of the host library (`librshmem.so` / `librshmem.a`), declared in `rshmem.h`; `nvshmem.h`
//! maps NVSHMEM's names onto these. Errors are printed with the call's name; calls that cannot report
//! an error through their C signature stop the program (exit 1), as NVSHMEM does, rather than go on with
//! a broken job.
//!
//! Every entry point runs its body through `entry`, which also catches panics: no unwind ever crosses
//! the C ABI (that would abort the process with SIGABRT and no useful message). A panic becomes the
//! call's error return, or, where the C signature has none, a clean exit(1) with a message naming the
//! call.

use crate::error::Error;
use crate::bootstrap::UniqueId;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

fn report(call: &str, e: &Error) {
    let msg = if e.message().starts_with(call) { e.to_string() } else { format!("{call}: {e}") };
    match crate::runtime::known_pe() {
        Some(pe) => eprintln!("rshmem: PE {pe}: {msg}"),
        None => eprintln!("rshmem: {msg}"),
    }
}

/// What an entry point does when its body fails.
enum OnFail<T> {
    /// Report the error (or panic) and return this: the C signature's error value.
    Return(T),
    /// Report an error and return this (the job stays usable, e.g. a bad pointer to rshmem_free); a
    /// panic, which has no error return here, exits.
    Report(T),
    /// Report and exit(1): a void call whose failure leaves the job unusable (a failed collective).
    Exit,
}

/// Runs the body of C entry point `call`: catches panics and reports errors as `on_fail` says.
fn entry<T>(call: &str, on_fail: OnFail<T>, body: impl FnOnce() -> crate::error::Result<T>) -> T {
    // AssertUnwindSafe: after a panic nothing the body borrowed is used again; the runtime's shared
    // state is behind locks that tolerate poisoning (runtime::get).
    let (r, panicked) = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => (r, false),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            (Err(Error::new(format!("{call}: internal error (panic: {what}); this is a bug in rshmem, please report it"))), true)
        }
    };
    match r {
        Ok(v) => v,
        Err(e) => {
            report(call, &e);
            match on_fail {
                OnFail::Return(v) => v,
                OnFail::Report(v) if !panicked => v,
                OnFail::Report(_) | OnFail::Exit => {
                    eprintln!("rshmem: {call} failed and cannot return an error: stopping this PE (exit 1)");
                    std::process::exit(1)
                }
            }
        }
    }
}

/// The unique-id object of the C API (128 bytes, opaque).
#[repr(C)]
pub struct RshmemUniqueId {
    /// The id's bytes, as `rshmem_get_unique_id` wrote them.
    pub internal: [u8; 128],
}

/// `nvshmem_init`: initializes rshmem from the launcher's environment (collective); 0 on success, 1 on error (printed).
#[no_mangle]
pub extern "C" fn rshmem_init() -> i32 {
    entry("rshmem_init", OnFail::Return(1), || crate::runtime::init().map(|()| 0))
}

/// 0 when rshmem is not initialized in this process, 2 when it is (`nvshmemx_init_status`).
#[no_mangle]
pub extern "C" fn rshmem_init_status() -> i32 {
    if crate::runtime::get("rshmem_init_status").is_ok() {
        2
    } else {
        0
    }
}

/// # Safety
/// `id` must point to a unique id from `rshmem_get_unique_id` (on PE 0, passed to the others).
#[no_mangle]
pub unsafe extern "C" fn rshmem_init_unique_id(id: *const RshmemUniqueId, pe: i32, npes: i32) -> i32 {
    entry("rshmem_init_unique_id", OnFail::Return(1), || {
        if id.is_null() || pe < 0 || npes < 1 || pe >= npes {
            return Err(Error::new(format!("rshmem_init_unique_id: bad arguments (id {id:p}, pe {pe}, npes {npes})")));
        }
        // SAFETY: `id` is not null, and the caller promises it points to a unique id (# Safety).
        let uid = UniqueId(unsafe { (*id).internal });
        crate::runtime::init_with_unique_id(&uid, pe as usize, npes as usize).map(|()| 0)
    })
}

/// # Safety
/// `id` must point to writable storage for one unique id.
#[no_mangle]
pub unsafe extern "C" fn rshmem_get_unique_id(id: *mut RshmemUniqueId) -> i32 {
    entry("rshmem_get_unique_id", OnFail::Return(1), || {
        if id.is_null() {
            return Err(Error::new("rshmem_get_unique_id: null id"));
        }
        let u = crate::api::host::get_unique_id()?;
        // SAFETY: `id` is not null, and the caller promises it points to writable storage for one id.
        unsafe { (*id).internal = u.0 };
        Ok(0)
    })
}

/// `nvshmem_finalize`: collective; a failure is printed and exits this PE (status 1).
#[no_mangle]
pub extern "C" fn rshmem_finalize() {
    // A failed finalize is a failed collective (a mismatch, a stuck or dead peer): the job is broken and
    // must not end with status 0.
    entry("rshmem_finalize", OnFail::Exit, crate::runtime::finalize)
}

/// `nvshmem_my_pe`: this PE's number, -1 before init.
#[no_mangle]
pub extern "C" fn rshmem_my_pe() -> i32 {
    entry("rshmem_my_pe", OnFail::Return(-1), || Ok(crate::runtime::my_pe()))
}
/// `nvshmem_n_pes`: the number of PEs, 0 before init.
#[no_mangle]
pub extern "C" fn rshmem_n_pes() -> i32 {
    entry("rshmem_n_pes", OnFail::Return(-1), || Ok(crate::runtime::n_pes()))
}
/// `nvshmem_team_my_pe`: this PE's index in `team`, -1 when not a member or no such team.
#[no_mangle]
pub extern "C" fn rshmem_team_my_pe(team: i32) -> i32 {
    entry("rshmem_team_my_pe", OnFail::Return(-1), || Ok(crate::api::coll::team_my_pe(team)))
}
/// `nvshmem_team_n_pes`: the number of PEs in `team`, -1 when no such team.
#[no_mangle]
pub extern "C" fn rshmem_team_n_pes(team: i32) -> i32 {
    entry("rshmem_team_n_pes", OnFail::Return(-1), || Ok(crate::api::coll::team_n_pes(team)))
}

/// `nvshmem_malloc` (collective): the symmetric allocation, or null on error (printed); null without a
/// message (and without a barrier) for 0 bytes, as OpenSHMEM says.
#[no_mangle]
pub extern "C" fn rshmem_malloc(bytes: usize) -> *mut c_void {
    entry("rshmem_malloc", OnFail::Return(std::ptr::null_mut()), || crate::api::host::malloc(bytes).map(|p| p as *mut c_void))
}
/// `nvshmem_calloc` (collective): `count * size` zeroed symmetric bytes, or null on error (printed);
/// null for 0 bytes, as `rshmem_malloc`.
#[no_mangle]
pub extern "C" fn rshmem_calloc(count: usize, size: usize) -> *mut c_void {
    entry("rshmem_calloc", OnFail::Return(std::ptr::null_mut()), || crate::api::host::calloc(count, size).map(|p| p as *mut c_void))
}
/// `nvshmem_align` (collective): a symmetric allocation aligned to `alignment`, or null on error
/// (printed); null for 0 bytes, as `rshmem_malloc`.
#[no_mangle]
pub extern "C" fn rshmem_align(alignment: usize, bytes: usize) -> *mut c_void {
    entry("rshmem_align", OnFail::Return(std::ptr::null_mut()), || crate::api::host::align(alignment, bytes).map(|p| p as *mut c_void))
}
/// `nvshmem_free` (collective): null is a no-op; an error is printed and the call returns.
#[no_mangle]
pub extern "C" fn rshmem_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    entry("rshmem_free", OnFail::Report(()), || crate::api::host::free(p as *mut u8))
}
/// `nvshmem_ptr`: the address through which this process reaches `p` on `pe` (a PE of this node), else null.
#[no_mangle]
pub extern "C" fn rshmem_ptr(p: *const c_void, pe: i32) -> *mut c_void {
    entry("rshmem_ptr", OnFail::Return(std::ptr::null_mut()), || Ok(crate::api::host::ptr(p as *const u8, pe) as *mut c_void))
}
/// `nvshmem_barrier_all` from the host; a failure is printed and exits this PE (status 1).
#[no_mangle]
pub extern "C" fn rshmem_barrier_all() {
    entry("rshmem_barrier_all", OnFail::Exit, crate::api::host::barrier_all)
}
/// `nvshmem_sync_all` from the host (a barrier here); a failure is printed and exits this PE (status 1).
#[no_mangle]
pub extern "C" fn rshmem_sync_all() {
    entry("rshmem_sync_all", OnFail::Exit, crate::api::host::barrier_all)
}
/// `nvshmem_quiet` from the host; a failure is printed and exits this PE (status 1).
#[no_mangle]
pub extern "C" fn rshmem_quiet() {
    entry("rshmem_quiet", OnFail::Exit, crate::api::host::quiet)
}
/// # Safety
/// `src` readable for `bytes`; `dst` symmetric (checked).
#[no_mangle]
pub unsafe extern "C" fn rshmem_putmem(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32) {
    // SAFETY: the local side is the caller's promise (# Safety); the symmetric side is checked.
    entry("rshmem_putmem", OnFail::Exit, || unsafe { crate::api::host::putmem(dst as *mut u8, src as *const u8, bytes, pe) })
}
/// # Safety
/// `dst` writable for `bytes`; `src` symmetric (checked).
#[no_mangle]
pub unsafe extern "C" fn rshmem_getmem(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32) {
    // SAFETY: as in rshmem_putmem.
    entry("rshmem_getmem", OnFail::Exit, || unsafe { crate::api::host::getmem(dst as *mut u8, src as *const u8, bytes, pe) })
}

/// The host's `putmem_nbi` (`nvshmem_putmem_nbi` from host code): complete by the next quiet. A name
/// of its own: `rshmem_putmem_nbi` is the device library's.
///
/// # Safety
/// As `rshmem_putmem`; `src` unchanged until the next quiet.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_putmem_nbi(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32) {
    // SAFETY: as in rshmem_putmem.
    entry("rshmem_putmem_nbi", OnFail::Exit, || unsafe { crate::api::host::putmem_nbi(dst as *mut u8, src as *const u8, bytes, pe) })
}
/// The host's `getmem_nbi`: complete by the next quiet.
///
/// # Safety
/// As `rshmem_getmem`; `dst` not read before the next quiet.
#[no_mangle]
pub unsafe extern "C" fn rshmem_host_getmem_nbi(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32) {
    // SAFETY: as in rshmem_putmem.
    entry("rshmem_getmem_nbi", OnFail::Exit, || unsafe { crate::api::host::getmem_nbi(dst as *mut u8, src as *const u8, bytes, pe) })
}

// ---------------------------------------------------------------- on-stream
// On a GPU, enqueued on the stream; the CPU backend has no streams, so there they run at once, in the
// calling thread's program order (as its on-stream collectives and point operations do).
use crate::api::stream::{self, Stream};

/// The stream a C caller handed to an `_on_stream` entry point, as rshmem's [`Stream`].
///
/// # Safety
/// `s` is NULL (the legacy default stream) or a `cudaStream_t` (`CUstream`) created in this PE's
/// context (the primary context of its GPU, which rshmem and the CUDA runtime use), not destroyed
/// before the work enqueued on it has run. Every entry point that takes a stream has this in its
/// contract (`rshmem.h` says so where it defines the stream type): the C caller promises it, as
/// NVSHMEM's `_on_stream` calls require of theirs; nothing here can check a stream handle.
unsafe fn c_stream(s: *mut c_void) -> Stream {
    // SAFETY: the caller's contract is `Stream::from_raw`'s.
    unsafe { Stream::from_raw(s as _) }
}

/// Whether this job runs on the CUDA backend (an uninitialized runtime answers through the call).
fn on_gpu(call: &str) -> crate::error::Result<bool> {
    Ok(crate::runtime::get(call)?.backend().name() == "cuda")
}

/// `nvshmemx_barrier_all_on_stream` (at once on the CPU backend); a failure is printed and exits this PE (status 1).
///
/// # Safety
/// `s` is NULL or a live stream of this PE's context until the barrier has run ([`Stream::from_raw`]'s contract).
#[no_mangle]
pub unsafe extern "C" fn rshmem_barrier_all_on_stream(s: *mut c_void) {
    let call = "rshmem_barrier_all_on_stream";
    // SAFETY: `s` is a valid stream: this function's contract (# Safety).
    entry(call, OnFail::Exit, || if on_gpu(call)? { stream::barrier_all_on_stream(unsafe { c_stream(s) }) } else { crate::api::host::barrier_all() })
}
/// `nvshmemx_sync_all_on_stream` (at once on the CPU backend); a failure is printed and exits this PE (status 1).
///
/// # Safety
/// As `rshmem_barrier_all_on_stream`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_sync_all_on_stream(s: *mut c_void) {
    let call = "rshmem_sync_all_on_stream";
    // SAFETY: `s` is a valid stream: this function's contract (# Safety).
    entry(call, OnFail::Exit, || if on_gpu(call)? { stream::sync_all_on_stream(unsafe { c_stream(s) }) } else { crate::api::host::barrier_all() })
}
/// `nvshmemx_quiet_on_stream` (at once on the CPU backend); a failure is printed and exits this PE (status 1).
///
/// # Safety
/// As `rshmem_barrier_all_on_stream`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_quiet_on_stream(s: *mut c_void) {
    let call = "rshmem_quiet_on_stream";
    // SAFETY: `s` is a valid stream: this function's contract (# Safety).
    entry(call, OnFail::Exit, || if on_gpu(call)? { stream::quiet_on_stream(unsafe { c_stream(s) }) } else { crate::api::host::quiet() })
}
/// # Safety
/// As `rshmem_putmem`; the copy runs later on `s`, so `src` must stay valid until then; `s` is NULL or
/// a live stream of this PE's context until then ([`Stream::from_raw`]'s contract).
#[no_mangle]
pub unsafe extern "C" fn rshmem_putmem_on_stream(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32, s: *mut c_void) {
    let call = "rshmem_putmem_on_stream";
    // SAFETY: the local side and the stream are the caller's promise (# Safety); the symmetric side is
    // checked.
    entry(call, OnFail::Exit, || unsafe {
        if on_gpu(call)? {
            stream::putmem_on_stream(dst as *mut u8, src as *const u8, bytes, pe, c_stream(s))
        } else {
            crate::api::host::putmem(dst as *mut u8, src as *const u8, bytes, pe)
        }
    })
}
/// # Safety
/// As `rshmem_getmem`, completing later on `s` (a stream as in `rshmem_putmem_on_stream`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_getmem_on_stream(dst: *mut c_void, src: *const c_void, bytes: usize, pe: i32, s: *mut c_void) {
    let call = "rshmem_getmem_on_stream";
    // SAFETY: as in rshmem_putmem_on_stream.
    entry(call, OnFail::Exit, || unsafe {
        if on_gpu(call)? {
            stream::getmem_on_stream(dst as *mut u8, src as *const u8, bytes, pe, c_stream(s))
        } else {
            crate::api::host::getmem(dst as *mut u8, src as *const u8, bytes, pe)
        }
    })
}

// ---------------------------------------------------------------- teams and collectives
// NVSHMEM's int-returning calls: 0 on success; an error is printed naming the call and 1 returned.
use crate::api::coll::{self as coll, TeamConfig};
use rshmem_device::coll::host_op;

/// NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS / _UNIQUEID: the fields of a config that a split takes.
const CONFIG_MASK_NUM_CONTEXTS: i64 = 1;
const CONFIG_MASK_UNIQUEID: i64 = 2;

/// The configuration a split records: the fields of `*config` that `mask` selects, the defaults for
/// the others; None without a config.
///
/// # Safety
/// `config` null or readable for 64 bytes (an `nvshmem_team_config_t`).
unsafe fn read_config(config: *const c_void, mask: i64) -> Option<TeamConfig> {
    if config.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: 64 readable bytes, any alignment.
    let given: TeamConfig = bytemuck::pod_read_unaligned(unsafe { std::slice::from_raw_parts(config as *const u8, 64) });
    let mut c = TeamConfig::default();
    if mask & CONFIG_MASK_NUM_CONTEXTS != 0 {
        c.num_contexts = given.num_contexts;
    }
    if mask & CONFIG_MASK_UNIQUEID != 0 {
        c.uniqueid = given.uniqueid;
    }
    Some(c)
}

/// # Safety
/// `config` null or readable for 64 bytes; `new_team` writable.
#[no_mangle]
pub unsafe extern "C" fn rshmem_team_split_strided(parent: i32, start: i32, stride: i32, size: i32, config: *const c_void, mask: i64, new_team: *mut i32) -> i32 {
    entry("rshmem_team_split_strided", OnFail::Return(1), || {
        if new_team.is_null() {
            return Err(Error::new("rshmem_team_split_strided: new_team is null"));
        }
        // SAFETY: the caller's contract (# Safety).
        let cfg = unsafe { read_config(config, mask) };
        let t = coll::team_split_strided(parent, start, stride, size, cfg);
        // SAFETY: `new_team` is not null and writable (# Safety); NVSHMEM's rule: TEAM_INVALID on failure.
        unsafe { *new_team = *t.as_ref().unwrap_or(&rshmem_device::TEAM_INVALID) };
        t.map(|_| 0)
    })
}

/// A fresh unique id for `rshmem_team_init` (`nvshmemx_team_get_uniqueid`).
///
/// # Safety
/// `uniqueid` writable for 8 bytes.
#[no_mangle]
pub unsafe extern "C" fn rshmem_team_get_uniqueid(uniqueid: *mut u64) -> i32 {
    entry("rshmem_team_get_uniqueid", OnFail::Return(1), || {
        if uniqueid.is_null() {
            return Err(Error::new("rshmem_team_get_uniqueid: uniqueid is null"));
        }
        let id = crate::api::team_init::team_get_uniqueid()?;
        // SAFETY: not null and writable (# Safety); any alignment.
        unsafe { uniqueid.write_unaligned(id) };
        Ok(0)
    })
}

/// `nvshmemx_team_init`: collective over the `npes` PEs passing the same `config->uniqueid`, this one
/// as member `pe_idx_in_team`. The id is read whatever the mask (as NVSHMEM does); the mask selects
/// num_contexts. `*team` is the new team, or RSHMEM_TEAM_INVALID on failure.
///
/// # Safety
/// `team` writable; `config` readable for 64 bytes (an `nvshmem_team_config_t`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_team_init(team: *mut i32, config: *const c_void, mask: i64, npes: i32, pe_idx_in_team: i32) -> i32 {
    let call = "rshmem_team_init";
    entry(call, OnFail::Return(1), || {
        if team.is_null() {
            return Err(Error::new(format!("{call}: team is null")));
        }
        // SAFETY: not null and writable (# Safety); NVSHMEM's rule: TEAM_INVALID until made.
        unsafe { *team = rshmem_device::TEAM_INVALID };
        if config.is_null() {
            return Err(Error::new(format!("{call}: config is null; a team made from a unique id needs one carrying the uniqueid")));
        }
        // SAFETY: the caller's contract: 64 readable bytes, any alignment.
        let given: TeamConfig = bytemuck::pod_read_unaligned(unsafe { std::slice::from_raw_parts(config as *const u8, 64) });
        if given.version >> 16 != 2 {
            return Err(Error::new(format!(
                "{call}: config version {:#x} is not a version-2 nvshmem_team_config_t (start from NVSHMEM_TEAM_CONFIG_INITIALIZER)",
                given.version
            )));
        }
        // SAFETY: as above.
        let mut c = unsafe { read_config(config, mask) }.unwrap_or_default();
        c.uniqueid = given.uniqueid;
        let t = crate::api::team_init::team_init(c, npes, pe_idx_in_team)?;
        // SAFETY: as above.
        unsafe { *team = t };
        Ok(0)
    })
}

/// # Safety
/// Each config null or readable for 64 bytes; `xaxis_team` and `yaxis_team` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn rshmem_team_split_2d(
    parent: i32,
    xrange: i32,
    xaxis_config: *const c_void,
    xaxis_mask: i64,
    xaxis_team: *mut i32,
    yaxis_config: *const c_void,
    yaxis_mask: i64,
    yaxis_team: *mut i32,
) -> i32 {
    entry("rshmem_team_split_2d", OnFail::Return(1), || {
        if xaxis_team.is_null() || yaxis_team.is_null() {
            return Err(Error::new("rshmem_team_split_2d: xaxis_team or yaxis_team is null"));
        }
        // SAFETY: the caller's contract (# Safety).
        let (xc, yc) = unsafe { (read_config(xaxis_config, xaxis_mask), read_config(yaxis_config, yaxis_mask)) };
        let r = coll::team_split_2d(parent, xrange, xc, yc);
        let (x, y) = *r.as_ref().unwrap_or(&(rshmem_device::TEAM_INVALID, rshmem_device::TEAM_INVALID));
        // SAFETY: both are not null and writable (# Safety).
        unsafe {
            *xaxis_team = x;
            *yaxis_team = y;
        }
        r.map(|_| 0)
    })
}

/// `nvshmem_team_destroy` (collective over the team); 0 on success, 1 on error (printed).
#[no_mangle]
pub extern "C" fn rshmem_team_destroy(team: i32) -> i32 {
    entry("rshmem_team_destroy", OnFail::Return(1), || coll::team_destroy(team).map(|()| 0))
}

/// # Safety
/// `config` writable for 64 bytes (an `nvshmem_team_config_t`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_team_get_config(team: i32, config: *mut c_void) -> i32 {
    entry("rshmem_team_get_config", OnFail::Return(1), || {
        if config.is_null() {
            return Err(Error::new("rshmem_team_get_config: config is null"));
        }
        let c = coll::team_get_config(team)?;
        // SAFETY: `config` is not null and writable for 64 bytes (# Safety), any alignment.
        unsafe { std::ptr::copy_nonoverlapping(bytemuck::bytes_of(&c).as_ptr(), config as *mut u8, 64) };
        Ok(0)
    })
}

/// `nvshmem_team_translate_pe`: member `src_pe` of `src_team` as an index in `dest_team`, or -1.
#[no_mangle]
pub extern "C" fn rshmem_team_translate_pe(src_team: i32, src_pe: i32, dest_team: i32) -> i32 {
    entry("rshmem_team_translate_pe", OnFail::Return(-1), || Ok(coll::team_translate_pe(src_team, src_pe, dest_team)))
}

/// `nvshmem_barrier` from the host; 0 on success, 1 on error (printed).
#[no_mangle]
pub extern "C" fn rshmem_barrier(team: i32) -> i32 {
    entry("rshmem_barrier", OnFail::Return(1), || coll::barrier(team).map(|()| 0))
}
/// `nvshmem_team_sync` from the host; 0 on success, 1 on error (printed).
#[no_mangle]
pub extern "C" fn rshmem_team_sync(team: i32) -> i32 {
    entry("rshmem_team_sync", OnFail::Return(1), || coll::team_sync(team).map(|()| 0))
}

/// Host collective `what` (`host_op`), now (`stream` None) or enqueued on a stream.
///
/// # Safety
/// The buffers satisfy the collective's contract (`coll::collective`); on a stream they stay valid until
/// it has run, and the stream is NULL or a live stream of this PE's context until then ([`Stream::from_raw`]'s contract).
#[allow(clippy::too_many_arguments)]
unsafe fn host_collective(call: &str, what: u32, team: i32, dest: *mut c_void, src: *const c_void, n: usize, a: u64, b: u64, stream: Option<*mut c_void>) -> i32 {
    entry(call, OnFail::Return(1), || {
        let (d, s) = (dest as *mut u8, src as *const u8);
        // SAFETY: forwarded contract (# Safety): the buffers, and the stream, which is
        // `collective_on_stream`'s as it is `c_stream`'s.
        unsafe {
            match stream {
                None => coll::collective(what, team, d, s, n, a, b),
                Some(st) => coll::collective_on_stream(what, team, d, s, n, a, b, st),
            }
        }
        .map(|()| 0)
    })
}

/// `nvshmemx_barrier_on_stream`; 0 on success, 1 on error (printed).
///
/// # Safety
/// `stream` is NULL or a live stream of this PE's context until the barrier has run ([`Stream::from_raw`]'s contract).
#[no_mangle]
pub unsafe extern "C" fn rshmem_barrier_on_stream(team: i32, stream: *mut c_void) -> i32 {
    // SAFETY: a synchronization has no buffers; the stream is this function's contract.
    unsafe { host_collective("rshmem_barrier_on_stream", host_op::BARRIER, team, std::ptr::null_mut(), std::ptr::null(), 0, 0, 0, Some(stream)) }
}
/// `nvshmemx_team_sync_on_stream`; 0 on success, 1 on error (printed).
///
/// # Safety
/// As `rshmem_barrier_on_stream`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_team_sync_on_stream(team: i32, stream: *mut c_void) -> i32 {
    // SAFETY: a synchronization has no buffers; the stream is this function's contract.
    unsafe { host_collective("rshmem_team_sync_on_stream", host_op::SYNC, team, std::ptr::null_mut(), std::ptr::null(), 0, 0, 0, Some(stream)) }
}

/// # Safety
/// `dest` and `src` symmetric, `bytes` long (the ranges are checked).
#[no_mangle]
pub unsafe extern "C" fn rshmem_broadcastmem(team: i32, dest: *mut c_void, src: *const c_void, bytes: usize, root: i32) -> i32 {
    // SAFETY: this function's contract (symmetric buffers of `bytes`) is host_collective's.
    unsafe { host_collective("rshmem_broadcastmem", host_op::BROADCAST, team, dest, src, bytes, root as i64 as u64, 0, None) }
}
/// # Safety
/// As `rshmem_broadcastmem`, valid until the stream has run it; `stream` is NULL or a live stream of
/// this PE's context until then ([`Stream::from_raw`]'s contract).
#[no_mangle]
pub unsafe extern "C" fn rshmem_broadcastmem_on_stream(team: i32, dest: *mut c_void, src: *const c_void, bytes: usize, root: i32, stream: *mut c_void) -> i32 {
    // SAFETY: this function's contract (symmetric buffers and the stream, valid until the stream ran
    // it) is host_collective's.
    unsafe { host_collective("rshmem_broadcastmem_on_stream", host_op::BROADCAST, team, dest, src, bytes, root as i64 as u64, 0, Some(stream)) }
}

macro_rules! host_gather {
    ($($name:ident, $on_stream:ident => $what:expr;)*) => {$(
        /// # Safety
        /// `dest` and `src` symmetric and large enough for the collective (the ranges are checked).
        #[no_mangle]
        pub unsafe extern "C" fn $name(team: i32, dest: *mut c_void, src: *const c_void, bytes: usize) -> i32 {
            // SAFETY: this function's contract (the buffers' sizes and lifetimes) is host_collective's.
            unsafe { host_collective(stringify!($name), $what, team, dest, src, bytes, 0, 0, None) }
        }
        /// # Safety
        /// As the call without `_on_stream`, the buffers valid until the stream has run it; `stream`
        /// is NULL or a live stream of this PE's context until then ([`Stream::from_raw`]'s contract).
        #[no_mangle]
        pub unsafe extern "C" fn $on_stream(team: i32, dest: *mut c_void, src: *const c_void, bytes: usize, stream: *mut c_void) -> i32 {
            // SAFETY: this function's contract (the buffers' sizes and lifetimes, the stream) is
            // host_collective's.
            unsafe { host_collective(stringify!($on_stream), $what, team, dest, src, bytes, 0, 0, Some(stream)) }
        }
    )*};
}
host_gather! {
    rshmem_fcollectmem, rshmem_fcollectmem_on_stream => host_op::FCOLLECT;
    rshmem_collectmem, rshmem_collectmem_on_stream => host_op::COLLECT;
    rshmem_alltoallmem, rshmem_alltoallmem_on_stream => host_op::ALLTOALL;
}

macro_rules! host_reduce {
    ($($name:ident, $on_stream:ident => $what:expr;)*) => {$(
        /// `dtype`, `op`: the codes of `coll::dtype` / `coll::op`.
        ///
        /// # Safety
        /// `dest` and `src` symmetric and large enough for the reduction (the ranges are checked).
        #[no_mangle]
        pub unsafe extern "C" fn $name(team: i32, dest: *mut c_void, src: *const c_void, nreduce: usize, dtype: i32, op: i32) -> i32 {
            // SAFETY: this function's contract (the buffers' sizes and lifetimes) is host_collective's.
            unsafe { host_collective(stringify!($name), $what, team, dest, src, nreduce, dtype as u32 as u64, op as u32 as u64, None) }
        }
        /// # Safety
        /// As the call without `_on_stream`, the buffers valid until the stream has run it; `stream`
        /// is NULL or a live stream of this PE's context until then ([`Stream::from_raw`]'s contract).
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $on_stream(team: i32, dest: *mut c_void, src: *const c_void, nreduce: usize, dtype: i32, op: i32, stream: *mut c_void) -> i32 {
            // SAFETY: this function's contract (the buffers' sizes and lifetimes, the stream) is
            // host_collective's.
            unsafe { host_collective(stringify!($on_stream), $what, team, dest, src, nreduce, dtype as u32 as u64, op as u32 as u64, Some(stream)) }
        }
    )*};
}
host_reduce! {
    rshmem_reduce, rshmem_reduce_on_stream => host_op::REDUCE;
    rshmem_reducescatter, rshmem_reducescatter_on_stream => host_op::REDUCESCATTER;
}

/// Called by the device library's init hook (compiled into nvcc programs) with the device address of
/// that program's `rshmemi_device_state`, which the runtime then fills in.
///
/// # Safety
/// Internal to the device library (rshmem.h): `addr` must be the device address of the calling
/// program's `rshmemi_device_state` (`bytes` its size), in a module loaded for the program's life; the
/// runtime writes the device state there now and at every later init.
#[no_mangle]
pub unsafe extern "C" fn rshmemi_register_device_state(addr: *mut c_void, bytes: usize) -> i32 {
    // SAFETY: the caller's contract above is register_device_state's.
    entry("rshmem_init (device library)", OnFail::Return(1), || unsafe { register_device_state(addr, bytes) })
}

/// # Safety
/// As `rshmemi_register_device_state`.
unsafe fn register_device_state(addr: *mut c_void, bytes: usize) -> crate::error::Result<i32> {
    let want = std::mem::size_of::<rshmem_device::state::DeviceState>();
    if bytes != 0 && bytes != want {
        return Err(Error::new(format!(
            "rshmem_init (device library): the program's device state is {bytes} bytes but this librshmem expects \
             {want}: librshmem_device.a and librshmem.so come from different rshmem builds; rebuild the program \
             against the matching device library"
        )));
    }
    // SAFETY: this function's contract (# Safety): `addr` is the program's own rshmemi_device_state
    // (cudaGetSymbolAddress in the device library's init hook), of the size checked above, in a module
    // that stays loaded for the program's life.
    stream::with_backend("rshmem_init (device library)", |b| unsafe { b.modules().register_state(addr as u64) }).map(|()| 0)
}

/// `rshmem_cumodule_init`: fills in the device state of a module the program loaded itself (and keeps
/// it filled in) until `rshmem_cumodule_finalize`.
///
/// # Safety
/// `module` must be a CUmodule loaded in the runtime's context, and stay loaded until
/// `rshmem_cumodule_finalize(module)` (or finalize).
#[no_mangle]
pub unsafe extern "C" fn rshmem_cumodule_init(module: *mut c_void) -> i32 {
    // SAFETY: the caller's contract above is register_module's.
    entry("rshmem_cumodule_init", OnFail::Report(1), || stream::with_backend("rshmem_cumodule_init", |b| unsafe { b.register_module(module as _) }).map(|()| 0))
}

/// `rshmem_cumodule_finalize`: stops filling in the module's device state (before it is unloaded).
#[no_mangle]
pub extern "C" fn rshmem_cumodule_finalize(module: *mut c_void) -> i32 {
    entry("rshmem_cumodule_finalize", OnFail::Report(1), || stream::with_backend("rshmem_cumodule_finalize", |b| b.unregister_module(module as _)).map(|()| 0))
}

/// # Safety
/// `mpi_comm` must point to a valid `MPI_Comm` of the MPI the program is linked with (see `crate::api::mpi`).
#[no_mangle]
pub unsafe extern "C" fn rshmem_init_mpi_comm(mpi_comm: *const c_void) -> i32 {
    // SAFETY: the caller's contract is init_with_mpi_comm's.
    entry("rshmem_init_mpi_comm", OnFail::Return(1), || unsafe { crate::api::mpi::init_with_mpi_comm(mpi_comm) }.map(|()| 0))
}

/// `nvshmemx_buffer_register`: 0, or non-zero with a message (see `crate::heap::register`). As with
/// NVSHMEM, the buffer must stay valid until `rshmem_buffer_unregister` (or finalize): the IBGDA
/// transport's NIC may write into it until then.
#[no_mangle]
pub extern "C" fn rshmem_buffer_register(addr: *mut c_void, len: usize) -> i32 {
    entry("rshmem_buffer_register", OnFail::Report(1), || {
        // SAFETY: the C API's contract (NVSHMEM's for nvshmemx_buffer_register): the buffer stays valid
        // until the program unregisters it (or finalizes).
        unsafe { crate::runtime::get("rshmem_buffer_register")?.buffer_register(addr as usize, len) }.map(|()| 0)
    })
}
/// `nvshmemx_buffer_unregister_all`: every registered buffer unregistered; 0, or non-zero with a
/// message.
#[no_mangle]
pub extern "C" fn rshmem_buffer_unregister_all() -> i32 {
    entry("rshmem_buffer_unregister_all", OnFail::Report(1), || crate::runtime::get("rshmem_buffer_unregister_all")?.buffer_unregister_all().map(|()| 0))
}
/// `nvshmemx_buffer_unregister`: 0, or non-zero with a message.
#[no_mangle]
pub extern "C" fn rshmem_buffer_unregister(addr: *mut c_void) -> i32 {
    entry("rshmem_buffer_unregister", OnFail::Report(1), || {
        crate::runtime::get("rshmem_buffer_unregister")?.buffer_unregister(addr as usize).map(|()| 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_error_return() {
        assert_eq!(entry("rshmem_test_call", OnFail::Return(7), || -> crate::error::Result<i32> { panic!("boom") }), 7);
        assert_eq!(entry("rshmem_test_call", OnFail::Return(7), || Err(Error::new("bad"))), 7);
        assert_eq!(entry("rshmem_test_call", OnFail::Report(3), || Err(Error::new("bad"))), 3);
        assert_eq!(entry("rshmem_test_call", OnFail::<i32>::Exit, || Ok(5)), 5);
        // Not initialized: an error return, not a panic or an exit.
        assert!(rshmem_malloc(8).is_null());
        // SAFETY: a null module is rejected before it is used.
        assert_eq!(unsafe { rshmem_cumodule_init(std::ptr::null_mut()) }, 1);
        assert_eq!(rshmem_cumodule_finalize(std::ptr::null_mut()), 1);
    }
}

// ---------------------------------------------------------------- point operations (crate::api::point)
// Host AMOs, host strided RMA, and the on-stream p / g / signal / wait forms: checked, then run by the
// device library's implementation (a one-thread kernel on a GPU; a direct call on the CPU backend).
use crate::api::point;
use rshmem_device::point::{what as pw, Op as PointOp};

/// A host AMO: `code` (1 fetch, 2 set, 3 swap, 4 compare_swap, 5 fetch_add, 6 add, 7 fetch_and, 8 and,
/// 9 fetch_or, 10 or, 11 fetch_xor, 12 xor) on the `width`-byte (4 or 8) symmetric `dest` at `pe`.
/// Returns the old value for the fetching codes; on an error it prints it and exits (NVSHMEM's AMOs
/// have no error return).
#[no_mangle]
pub extern "C" fn rshmem_host_amo(code: i32, width: u32, dest: *mut c_void, value: u64, cond: u64, pe: i32) -> u64 {
    entry("rshmem_host_amo", OnFail::Exit, || point::amo("rshmem_host_amo", code, width, dest as *mut u8, value, cond, pe))
}

macro_rules! strided_host {
    ($($name:ident, $stream_name:ident, $get:expr;)*) => {$(
        /// Host strided RMA of `nelems` elements of `width` bytes (strides in elements, at least 1);
        /// complete on return.
        ///
        /// # Safety
        /// The local buffer must hold every element at its stride.
        #[no_mangle]
        pub unsafe extern "C" fn $name(dest: *mut c_void, src: *const c_void, dst: isize, sst: isize, nelems: usize, width: u32, pe: i32) {
            // SAFETY: the caller's contract (above).
            entry(stringify!($name), OnFail::Exit, || unsafe {
                point::strided(stringify!($name), $get, dest as *mut u8, src as *const u8, dst, sst, nelems, width, pe, None)
            })
        }
        /// The same, enqueued on `stream` (the local buffer must be device-accessible and stay valid until
        /// it has run).
        ///
        /// # Safety
        /// As above, until the operation has run on the stream; `stream` is NULL or a live stream of
        /// this PE's context until then ([`Stream::from_raw`]'s contract).
        #[no_mangle]
        pub unsafe extern "C" fn $stream_name(dest: *mut c_void, src: *const c_void, dst: isize, sst: isize, nelems: usize, width: u32, pe: i32, stream: *mut c_void) {
            // SAFETY: the caller's contract (above): the local buffer and the stream.
            entry(stringify!($stream_name), OnFail::Exit, || unsafe {
                point::strided(stringify!($stream_name), $get, dest as *mut u8, src as *const u8, dst, sst, nelems, width, pe, Some(c_stream(stream)))
            })
        }
    )*};
}
strided_host! {
    rshmem_iputmem, rshmem_iputmem_on_stream, false;
    rshmem_igetmem, rshmem_igetmem_on_stream, true;
}

/// Runs a point operation that names no local buffer, on `stream`; `want`: wait and return its value.
///
/// # Safety
/// `stream` is NULL or a live stream of this PE's context until the operation has run ([`Stream::from_raw`]'s contract).
unsafe fn point_on_stream(call: &str, op: PointOp, stream: *mut c_void, want: bool) -> u64 {
    // SAFETY: `op` names no local buffer (p, g, signal_op, a single wait); the stream is this
    // function's contract.
    entry(call, OnFail::Exit, || unsafe { point::run(call, op, Some(c_stream(stream)), want) })
}

/// `p` of the low `width` bytes of `value` to `dest` on `pe`, enqueued on `stream`.
///
/// # Safety
/// `stream` is NULL or a live stream of this PE's context until the operation has run ([`Stream::from_raw`]'s contract).
#[no_mangle]
pub unsafe extern "C" fn rshmem_p_on_stream(dest: *mut c_void, value: u64, width: u32, pe: i32, stream: *mut c_void) {
    let op = PointOp { what: pw::P, width, pe, dest: dest as u64, value, ..PointOp::default() };
    // SAFETY: the stream is this function's contract.
    unsafe { point_on_stream("rshmem_p_on_stream", op, stream, false) };
}
/// `g` of `width` bytes of `src` on `pe`, in `stream`'s order; waits for the stream up to it.
///
/// # Safety
/// As `rshmem_p_on_stream`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_g_on_stream(src: *const c_void, width: u32, pe: i32, stream: *mut c_void) -> u64 {
    let op = PointOp { what: pw::G, width, pe, dest: src as u64, ..PointOp::default() };
    // SAFETY: the stream is this function's contract.
    unsafe { point_on_stream("rshmem_g_on_stream", op, stream, true) }
}
/// signal_op from the host: `op` (SIGNAL_SET / SIGNAL_ADD) of `value` on the u64 `sig` at `pe`,
/// complete on return.
#[no_mangle]
pub extern "C" fn rshmem_signal_op(sig: *mut u64, value: u64, op: i32, pe: i32) {
    let o = PointOp { what: pw::SIGNAL_OP, code: op as u32, width: 8, pe, dest: sig as u64, value, ..PointOp::default() };
    // SAFETY: names no local buffer.
    entry("rshmem_signal_op", OnFail::Exit, || unsafe { point::run("rshmem_signal_op", o, None, false).map(|_| ()) })
}
/// The same, enqueued on `stream`.
///
/// # Safety
/// As `rshmem_p_on_stream`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_signal_op_on_stream(sig: *mut u64, value: u64, op: i32, pe: i32, stream: *mut c_void) {
    let o = PointOp { what: pw::SIGNAL_OP, code: op as u32, width: 8, pe, dest: sig as u64, value, ..PointOp::default() };
    // SAFETY: the stream is this function's contract.
    unsafe { point_on_stream("rshmem_signal_op_on_stream", o, stream, false) };
}
/// Work later on `stream` waits until this PE's `ivar` (`width` bytes, `signed`) compares true.
///
/// # Safety
/// As `rshmem_p_on_stream`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_wait_until_on_stream(ivar: *mut c_void, cmp: i32, value: u64, width: u32, signed: bool, stream: *mut c_void) {
    let op = PointOp { what: pw::WAIT, code: cmp as u32, width, signed, dest: ivar as u64, value, n: 1, ..PointOp::default() };
    // SAFETY: the stream is this function's contract.
    unsafe { point_on_stream("rshmem_wait_until_on_stream", op, stream, false) };
}
/// Work later on `stream` waits until every element of `ivars` not excluded by `status` (NULL, or
/// device-accessible `nelems` ints; non-zero excludes) compares true against `value`, or, with
/// `values` not NULL (device-accessible `nelems` elements), against its own value.
///
/// # Safety
/// `status` and `values` as above, valid until the wait has run on the stream; `stream` is NULL or a
/// live stream of this PE's context until then ([`Stream::from_raw`]'s contract).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn rshmem_wait_until_all_on_stream(
    ivars: *mut c_void,
    nelems: usize,
    status: *const i32,
    cmp: i32,
    value: u64,
    values: *const c_void,
    width: u32,
    signed: bool,
    stream: *mut c_void,
) {
    let call = "rshmem_wait_until_all_on_stream";
    if nelems == 0 {
        return;
    }
    let op = PointOp {
        what: pw::WAIT,
        code: cmp as u32,
        width,
        signed,
        dest: ivars as u64,
        value,
        cond: values as u64,
        n: nelems as u64,
        aux: status as u64,
        ..PointOp::default()
    };
    // SAFETY: the caller's contract (above): the buffers and the stream.
    entry(call, OnFail::Exit, || unsafe { point::run(call, op, Some(c_stream(stream)), false).map(|_| ()) })
}

// ---------------------------------------------------------------- global_exit, realloc, library init
/// `nvshmem_global_exit` from the host: every PE of the job ends with `status` (`crate::runtime::global_exit`).
#[no_mangle]
pub extern "C" fn rshmem_global_exit(status: i32) {
    crate::runtime::global_exit(status)
}
/// `nvshmem_realloc` (collective): see `crate::api::host::realloc`. NULL on an error (printed), the old allocation
/// kept.
///
/// # Safety
/// `ptr` is NULL or a live symmetric allocation that nothing uses while it moves.
#[no_mangle]
pub unsafe extern "C" fn rshmem_realloc(ptr: *mut c_void, bytes: usize) -> *mut c_void {
    // SAFETY: the caller's contract (above) is crate::api::host::realloc's.
    entry("rshmem_realloc", OnFail::Report(std::ptr::null_mut()), || unsafe { crate::api::host::realloc(ptr as *mut u8, bytes) }.map(|p| p as *mut c_void))
}
/// `nvshmemx_culibrary_init`: the module of a CUlibrary the program loaded (cuLibraryGetModule), as
/// `rshmem_cumodule_init`.
///
/// # Safety
/// `library` must be a CUlibrary loaded in the runtime's context, kept loaded until
/// `rshmem_culibrary_finalize(library)` (or finalize).
#[no_mangle]
pub unsafe extern "C" fn rshmem_culibrary_init(library: *mut c_void) -> i32 {
    // SAFETY: the caller's contract above.
    entry("rshmem_culibrary_init", OnFail::Report(1), || unsafe {
        let m = library_module("rshmem_culibrary_init", library)?;
        stream::with_backend("rshmem_culibrary_init", |b| b.register_module(m)).map(|()| 0)
    })
}
/// `nvshmemx_culibrary_finalize`: as `rshmem_cumodule_finalize` for the library's module.
///
/// # Safety
/// As `rshmem_culibrary_init`.
#[no_mangle]
pub unsafe extern "C" fn rshmem_culibrary_finalize(library: *mut c_void) -> i32 {
    // SAFETY: the caller's contract above.
    entry("rshmem_culibrary_finalize", OnFail::Report(1), || unsafe {
        let m = library_module("rshmem_culibrary_finalize", library)?;
        stream::with_backend("rshmem_culibrary_finalize", |b| b.unregister_module(m)).map(|()| 0)
    })
}
/// The CUmodule of a CUlibrary in the current context.
///
/// # Safety
/// `library` must be a loaded CUlibrary.
unsafe fn library_module(call: &str, library: *mut c_void) -> crate::error::Result<cudarc::driver::sys::CUmodule> {
    use cudarc::driver::sys as cu;
    if library.is_null() {
        return Err(Error::new(format!("{call}: the library is NULL")));
    }
    let mut m: cu::CUmodule = std::ptr::null_mut();
    // SAFETY: out-pointer to a local; `library` is a loaded CUlibrary (the caller's contract).
    let r = unsafe { cu::cuLibraryGetModule(&mut m, library as cu::CUlibrary) };
    if r != cu::CUresult::CUDA_SUCCESS {
        return Err(Error::new(format!("{call}: cuLibraryGetModule failed ({r:?}): is the library loaded in this context?")));
    }
    Ok(m)
}
