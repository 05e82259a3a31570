//! A PMIx client through the PMIx library loaded at run time (`dlopen`), the way rshmem finds MPI and
//! CUDA: nothing is linked, so a build runs where PMIx is absent, and a program that links PMIx itself
//! (MPI does) shares the one copy already loaded.
//!
//! Only the stable core of the PMIx ABI is used (unchanged since PMIx 2): `PMIx_Init`, `PMIx_Put` of a
//! string, `PMIx_Commit`, `PMIx_Fence_nb` of the whole namespace without info, `PMIx_Get_nb`,
//! `PMIx_Finalize`; `pmix_proc_t` (a 256-byte namespace and a 32-bit rank) and the head of
//! `pmix_value_t` (a 16-bit type, the data at offset 8). The non-blocking calls let every wait be
//! bounded by the bootstrap's timeout.

use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

const PMIX_SUCCESS: c_int = 0;
/// Returned by a non-blocking call that completed at once: its callback is not called.
const PMIX_OPERATION_SUCCEEDED: c_int = -157;
const PMIX_STRING: u16 = 3;
const PMIX_GLOBAL: u8 = 3;
const NSLEN: usize = 256;
/// How long a PE waits, after PMIx reported a failed fence, before it fails itself (see `fence`).
const LAUNCHER_FIRST: Duration = Duration::from_secs(1);
/// The library's names, most specific first.
const LIBS: [&CStr; 2] = [c"libpmix.so.2", c"libpmix.so"];

/// `pmix_proc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; NSLEN],
    rank: u32,
}

/// The head of `pmix_value_t`: its type and, at offset 8, the data (for a string, the pointer). The
/// tail only pads this well past the largest `pmix_value_t` (32 bytes in PMIx 4), for the library to
/// read as it likes.
#[repr(C)]
struct Value {
    kind: u16,
    data: *mut c_char,
    tail: [u64; 8],
}

type InitFn = unsafe extern "C" fn(*mut Proc, *mut c_void, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const c_void, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type OpCb = unsafe extern "C" fn(c_int, *mut c_void);
type FenceNbFn = unsafe extern "C" fn(*const Proc, usize, *const c_void, usize, OpCb, *mut c_void) -> c_int;
type ValueCb = unsafe extern "C" fn(c_int, *mut Value, *mut c_void);
type GetNbFn = unsafe extern "C" fn(*const Proc, *const c_char, *const c_void, usize, ValueCb, *mut c_void) -> c_int;
type ErrStrFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// The library's entry points.
struct Lib {
    name: &'static str,
    init: InitFn,
    finalize: FinalizeFn,
    put: PutFn,
    commit: CommitFn,
    fence_nb: FenceNbFn,
    get_nb: GetNbFn,
    error_string: Option<ErrStrFn>,
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call on this
    // thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn load() -> std::result::Result<Lib, String> {
    let mut errors = Vec::new();
    for name in LIBS {
        // SAFETY: dlopen with a NUL-terminated name; loading PMIx runs its constructors, which only
        // set the library up. The handle is never closed (the library may run threads).
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if h.is_null() {
            errors.push(dlerror());
            continue;
        }
        let sym = |s: &CStr| -> std::result::Result<*mut c_void, String> {
            // SAFETY: dlsym on a live handle with a NUL-terminated name only looks the symbol up.
            let p = unsafe { libc::dlsym(h, s.as_ptr()) };
            if p.is_null() {
                Err(format!("{} has no {}", name.to_string_lossy(), s.to_string_lossy()))
            } else {
                Ok(p)
            }
        };
        let found = (|| {
            // SAFETY: each transmute turns a symbol of PMIx into a function pointer of its C
            // signature (pmix.h, the same in every PMIx version since 2).
            unsafe {
                Ok::<_, String>(Lib {
                    name: name.to_str().unwrap_or("libpmix"),
                    init: std::mem::transmute::<*mut c_void, InitFn>(sym(c"PMIx_Init")?),
                    finalize: std::mem::transmute::<*mut c_void, FinalizeFn>(sym(c"PMIx_Finalize")?),
                    put: std::mem::transmute::<*mut c_void, PutFn>(sym(c"PMIx_Put")?),
                    commit: std::mem::transmute::<*mut c_void, CommitFn>(sym(c"PMIx_Commit")?),
                    fence_nb: std::mem::transmute::<*mut c_void, FenceNbFn>(sym(c"PMIx_Fence_nb")?),
                    get_nb: std::mem::transmute::<*mut c_void, GetNbFn>(sym(c"PMIx_Get_nb")?),
                    error_string: sym(c"PMIx_Error_string").ok().map(|p| std::mem::transmute::<*mut c_void, ErrStrFn>(p)),
                })
            }
        })();
        match found {
            Ok(lib) => return Ok(lib),
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; "))
}

fn lib() -> std::result::Result<&'static Lib, String> {
    static LIB: OnceLock<std::result::Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Where the library was found, or why it cannot be loaded.
pub(super) fn library_check() -> std::result::Result<String, String> {
    lib().map(|l| l.name.to_string())
}

/// A result that a PMIx callback hands to the waiting thread.
struct Waiter<T> {
    slot: Mutex<Option<T>>,
    cv: Condvar,
}

impl<T> Waiter<T> {
    fn new() -> Arc<Waiter<T>> {
        Arc::new(Waiter { slot: Mutex::new(None), cv: Condvar::new() })
    }

    fn set(&self, v: T) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(v);
        self.cv.notify_all();
    }

    /// The result, or None when `limit` passed first.
    fn wait(&self, limit: Duration) -> Option<T> {
        let deadline = Instant::now() + limit;
        let mut g = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(v) = g.take() {
                return Some(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            g = self.cv.wait_timeout(g, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

unsafe extern "C" fn op_done(status: c_int, cbdata: *mut c_void) {
    // SAFETY: `cbdata` is the Arc<Waiter<c_int>> reference handed over with Arc::into_raw when the
    // operation was started; PMIx calls this once, so it is taken back once.
    let w = unsafe { Arc::from_raw(cbdata as *const Waiter<c_int>) };
    w.set(status);
}

unsafe extern "C" fn value_done(status: c_int, kv: *mut Value, cbdata: *mut c_void) {
    // SAFETY: as in `op_done`, for an Arc<Waiter<(c_int, Option<String>)>>.
    let w = unsafe { Arc::from_raw(cbdata as *const Waiter<(c_int, Option<String>)>) };
    let text = if status == PMIX_SUCCESS && !kv.is_null() {
        // SAFETY: PMIx hands a valid pmix_value_t for the duration of the callback; its type is
        // read first, and the data is read as a string pointer only when the type says string.
        unsafe {
            let v = &*kv;
            (v.kind == PMIX_STRING && !v.data.is_null()).then(|| CStr::from_ptr(v.data).to_string_lossy().into_owned())
        }
    } else {
        None
    };
    w.set((status, text));
}

/// A PMIx client of this process (initialized; finalized by [`Client::finish`]).
pub(super) struct Client {
    lib: &'static Lib,
    me: Proc,
    timeout: Duration,
}

impl Client {
    /// Loads the library and connects to the launcher's PMIx server (`PMIx_Init`).
    pub(super) fn init(timeout: Duration) -> Result<Client> {
        let lib = lib().map_err(|why| {
            Error::new(format!(
                "rshmem bootstrap: the launcher offers PMIx (PMIX_SERVER_URI* is set), but the PMIx client library cannot be loaded ({why}): install PMIx (libpmix2), or set RSHMEM_BOOTSTRAP and RSHMEM_JOB_KEY for every PE"
            ))
        })?;
        let mut me = Proc { nspace: [0; NSLEN], rank: 0 };
        // SAFETY: PMIx_Init writes this process's identity into `me` (a pmix_proc_t); no info.
        let rc = unsafe { (lib.init)(&mut me, std::ptr::null_mut(), 0) };
        if rc != PMIX_SUCCESS {
            return Err(Error::new(format!(
                "rshmem bootstrap: PMIx_Init failed: {} (is this process a child of the launcher that set PMIX_SERVER_URI*?)",
                status_text(lib, rc)
            )));
        }
        me.nspace[NSLEN - 1] = 0;
        Ok(Client { lib, me, timeout })
    }

    pub(super) fn namespace(&self) -> String {
        // SAFETY: `nspace` is NUL-terminated (its last byte is set to 0 in `init`).
        unsafe { CStr::from_ptr(self.me.nspace.as_ptr()) }.to_string_lossy().into_owned()
    }

    pub(super) fn rank(&self) -> usize {
        self.me.rank as usize
    }

    pub(super) fn library(&self) -> &'static str {
        self.lib.name
    }

    pub(super) fn put(&mut self, key: &str, value: &str) -> Result<()> {
        let k = CString::new(key).map_err(|_| Error::new("rshmem bootstrap: a PMIx key with a NUL byte"))?;
        let v = CString::new(value).map_err(|_| Error::new("rshmem bootstrap: a PMIx value with a NUL byte"))?;
        let mut val = Value { kind: PMIX_STRING, data: v.as_ptr() as *mut c_char, tail: [0; 8] };
        // SAFETY: PMIx_Put copies the key and the string value it is given; both outlive the call.
        let rc = unsafe { (self.lib.put)(PMIX_GLOBAL, k.as_ptr(), &mut val) };
        if rc != PMIX_SUCCESS {
            return Err(Error::new(format!("rshmem bootstrap: PMIx_Put of {key} failed: {}", status_text(self.lib, rc))));
        }
        // SAFETY: PMIx_Commit takes no arguments; it sends what was put to the local server.
        let rc = unsafe { (self.lib.commit)() };
        if rc != PMIX_SUCCESS {
            return Err(Error::new(format!("rshmem bootstrap: PMIx_Commit failed: {}", status_text(self.lib, rc))));
        }
        Ok(())
    }

    pub(super) fn fence(&mut self) -> Result<()> {
        let w = Waiter::<c_int>::new();
        let data = Arc::into_raw(Arc::clone(&w)) as *mut c_void;
        // SAFETY: no procs (the whole namespace) and no info; `op_done` gets `data` once if the call
        // returns PMIX_SUCCESS, and never otherwise (then the reference is taken back below).
        let rc = unsafe { (self.lib.fence_nb)(std::ptr::null(), 0, std::ptr::null(), 0, op_done, data) };
        if rc != PMIX_SUCCESS {
            // SAFETY: the callback will not run: the reference handed over is ours again.
            drop(unsafe { Arc::from_raw(data as *const Waiter<c_int>) });
            if rc == PMIX_OPERATION_SUCCEEDED {
                return Ok(());
            }
            return Err(Error::new(format!("rshmem bootstrap: PMIx_Fence_nb failed: {}", status_text(self.lib, rc))));
        }
        match w.wait(self.timeout) {
            Some(PMIX_SUCCESS) => Ok(()),
            Some(rc) => {
                // A PE left or died. The launcher knows which and usually ends the job at once,
                // naming it; give it a moment to say so before this PE's exit, less precise, is
                // the first failure it reports.
                std::thread::sleep(LAUNCHER_FIRST);
                Err(Error::new(format!(
                "rshmem bootstrap: PE {}: the PMIx fence of namespace {} failed ({}): not every PE of the job reached it (one may have left, exited or crashed; the launcher's output names it)",
                self.me.rank,
                self.namespace(),
                status_text(self.lib, rc)
                )))
            }
            None => Err(Error::new(format!(
                "rshmem bootstrap: PE {}: the PMIx fence of namespace {} did not complete within {} s ({}): not every PE of the job reached it (one may have exited or crashed; the launcher's output names it)",
                self.me.rank,
                self.namespace(),
                super::super::wire::secs(self.timeout),
                crate::config::env::BOOTSTRAP_TIMEOUT
            ))),
        }
    }

    pub(super) fn get(&mut self, pe: usize, key: &str) -> Result<String> {
        let k = CString::new(key).map_err(|_| Error::new("rshmem bootstrap: a PMIx key with a NUL byte"))?;
        let proc_ = Proc { nspace: self.me.nspace, rank: pe as u32 };
        let w = Waiter::<(c_int, Option<String>)>::new();
        let data = Arc::into_raw(Arc::clone(&w)) as *mut c_void;
        // SAFETY: `proc_` and the key outlive the call (PMIx copies what it keeps); `value_done` gets
        // `data` once if the call returns PMIX_SUCCESS, and never otherwise.
        let rc = unsafe { (self.lib.get_nb)(&proc_, k.as_ptr(), std::ptr::null(), 0, value_done, data) };
        if rc != PMIX_SUCCESS {
            // SAFETY: the callback will not run: the reference handed over is ours again.
            drop(unsafe { Arc::from_raw(data as *const Waiter<(c_int, Option<String>)>) });
            return Err(Error::new(format!("rshmem bootstrap: PMIx_Get_nb of {key} failed: {}", status_text(self.lib, rc))));
        }
        match w.wait(self.timeout) {
            Some((PMIX_SUCCESS, Some(v))) => Ok(v),
            Some((PMIX_SUCCESS, None)) => {
                Err(Error::new(format!("rshmem bootstrap: PMIx: PE {pe}'s {key} is not a string (another program's key?)")))
            }
            Some((rc, _)) => Err(Error::new(format!(
                "rshmem bootstrap: PMIx: cannot read PE {pe}'s {key}: {} (did PE {pe} exit or crash?)",
                status_text(self.lib, rc)
            ))),
            None => Err(Error::new(format!(
                "rshmem bootstrap: PMIx: reading PE {pe}'s {key} did not complete within {} s ({})",
                super::super::wire::secs(self.timeout),
                crate::config::env::BOOTSTRAP_TIMEOUT
            ))),
        }
    }

    pub(super) fn finish(self) -> Result<()> {
        // SAFETY: no info; this process initialized PMIx in `init` (PMIx counts inits and finalizes,
        // so a program that uses PMIx itself keeps its own).
        let rc = unsafe { (self.lib.finalize)(std::ptr::null(), 0) };
        if rc != PMIX_SUCCESS {
            return Err(Error::new(format!("rshmem bootstrap: PMIx_Finalize failed: {}", status_text(self.lib, rc))));
        }
        Ok(())
    }
}

fn status_text(lib: &Lib, rc: c_int) -> String {
    let name = lib.error_string.and_then(|f| {
        // SAFETY: PMIx_Error_string returns a static NUL-terminated string for any status.
        let p = unsafe { f(rc) };
        // SAFETY: non-null, static, NUL-terminated.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    });
    match name {
        Some(n) => format!("{n} (status {rc})"),
        None => format!("status {rc}"),
    }
}
