//! Scenarios of careless programs, each of which must get a clear error (or OpenSHMEM's answer), never
//! a crash or a silent default. Driven by tests/tests/soundness.rs and tests/tests/config.rs.
//!
//! - `quiet_after_finalize`, `fence_after_finalize`: `rshmem_device::quiet()` / `fence()` called after
//!   `rshmem::finalize()` (under `--nodes 2`, where they would read the freed proxy ring): the PE stops
//!   naming the call.
//! - `null_rma`: host puts and gets with a NULL local buffer or a NULL symmetric address are errors
//!   naming the call and the NULL side; `null_c_put` / `null_c_get`: the same through the C ABI, which
//!   prints it and stops the PE (its calls have no error return).
//! - `internal_area`: host puts and gets into the runtime's own area at the start of the heap (below the
//!   first allocation) are refused; the first allocation itself is not.
//! - `alloc_zero`: `malloc(0)`, `calloc` with a 0, `align(_, 0)` and `realloc(NULL, 0)` return NULL
//!   (OpenSHMEM and NVSHMEM), `free(NULL)` does nothing, the C ABI agrees, and typed empty slices work.
//! - `reinit_env`: after finalize, a second init in the same process with other values of
//!   RSHMEM_DEBUG and RSHMEM_WAIT_TIMEOUT uses the new ones (an info line; a device wait that times
//!   out), and one with a bad value fails naming it.

use super::{barrier, ck, die, Ctx};
use rshmem_device::CMP_EQ;
use std::ptr::{null, null_mut};

/// `r` must be an error whose message contains `want`.
fn expect_err<T>(r: rshmem::Result<T>, want: &str) {
    match r {
        Ok(_) => die(format!("expected an error containing {want:?}, but the call succeeded")),
        Err(e) if e.to_string().contains(want) => println!("PE {}: expected error: {e}", rshmem::my_pe()),
        Err(e) => die(format!("expected an error containing {want:?}, got: {e}")),
    }
}

/// `quiet_after_finalize` / `fence_after_finalize`: finalizes, then makes the device call, which must stop
/// the PE naming it (the CPU backend's failure hook prints the call and exits 1).
pub(crate) fn after_finalize(c: &Ctx, what: &str) -> ! {
    barrier();
    ck(rshmem::finalize());
    println!("PE {}: finalized; calling rshmem_device::{what}()", c.me);
    match what {
        "quiet" => rshmem_device::quiet(),
        _ => rshmem_device::fence(),
    }
    die(format!("rshmem_device::{what}() returned after finalize instead of stopping the PE by name"))
}

/// `null_rma`: NULL on either side of a host put or get is an error naming it.
pub(crate) fn null_rma(c: &Ctx) {
    let buf = ck(rshmem::malloc(64));
    let mut local = [0u8; 8];
    let pe = ((c.me + 1) % c.n) as i32;
    // SAFETY: the NULL is the point (here and in each call below); the call must refuse it before any
    // access, and the other side is a live 64-byte symmetric allocation or an 8-byte local array.
    expect_err(unsafe { rshmem::putmem(buf, null(), 8, pe) }, "rshmem_putmem: the source is NULL");
    // SAFETY: as above.
    expect_err(unsafe { rshmem::getmem(null_mut(), buf, 8, pe) }, "rshmem_getmem: the destination is NULL");
    // SAFETY: as above.
    expect_err(unsafe { rshmem::putmem_nbi(buf, null(), 8, pe) }, "rshmem_putmem_nbi: the source is NULL");
    // SAFETY: as above.
    expect_err(unsafe { rshmem::getmem_nbi(null_mut(), buf, 8, pe) }, "rshmem_getmem_nbi: the destination is NULL");
    // SAFETY: as above.
    expect_err(unsafe { rshmem::putmem(null_mut(), local.as_ptr(), 8, pe) }, "rshmem_putmem: the symmetric address is NULL");
    // SAFETY: as above.
    expect_err(unsafe { rshmem::getmem(local.as_mut_ptr(), null(), 8, pe) }, "rshmem_getmem: the symmetric address is NULL");
    // The job goes on: a real put still works.
    let bytes = [c.me as u8 + 1; 8];
    // SAFETY: a live 64-byte symmetric allocation and an 8-byte local array.
    ck(unsafe { rshmem::putmem(buf, bytes.as_ptr(), 8, pe) });
    barrier();
    // SAFETY: as above.
    ck(unsafe { rshmem::getmem(local.as_mut_ptr(), buf, 8, c.me as i32) });
    let from = ((c.me + c.n - 1) % c.n) as u8 + 1;
    if local != [from; 8] {
        die(format!("after the refused calls, a put from PE {} left {local:?}", from - 1));
    }
    barrier();
    ck(rshmem::free(buf));
}

/// `null_c_put` / `null_c_get`: the C ABI's putmem/getmem with a NULL local buffer print the error and
/// stop the PE (exit 1).
pub(crate) fn null_c(c: &Ctx, put: bool) -> ! {
    let buf = ck(rshmem::malloc(64));
    let pe = ((c.me + 1) % c.n) as i32;
    // SAFETY: the NULL local buffer is the point: the call must refuse it before any access (and, with no
    // error return, stop this PE); `buf` is a live 64-byte symmetric allocation.
    unsafe {
        if put {
            rshmem::capi::rshmem_putmem(buf.cast(), null(), 8, pe)
        } else {
            rshmem::capi::rshmem_getmem(null_mut(), buf.cast(), 8, pe)
        }
    }
    die("the C ABI's call with a NULL local buffer returned")
}

/// `internal_area`: the runtime's own area below the first allocation takes no host put or get.
pub(crate) fn internal_area(c: &Ctx) {
    let buf = ck(rshmem::malloc(64));
    let off = rshmem::heap_offset(buf).unwrap_or_else(|| die("the allocation is not in the heap"));
    let internal = rshmem_device::state::INTERNAL_BYTES;
    if off < internal {
        die(format!("the first allocation is at heap offset {off:#x}, inside the internal area of {internal:#x} bytes"));
    }
    let base = buf.wrapping_sub(off);
    let pe = ((c.me + 1) % c.n) as i32;
    let mut local = [7u8; 8];
    for at in [0, 64, internal - 8] {
        let sym = base.wrapping_add(at);
        // SAFETY: `sym` lies in the heap (its internal area), which the call must refuse before any
        // access; `local` is an 8-byte local array.
        expect_err(unsafe { rshmem::putmem(sym, local.as_ptr(), 8, pe) }, "is in the runtime's internal area");
        // SAFETY: as above.
        expect_err(unsafe { rshmem::getmem(local.as_mut_ptr(), sym, 8, pe) }, "is in the runtime's internal area");
    }
    // The first allocation, right above it, is the program's.
    // SAFETY: a live 64-byte symmetric allocation and an 8-byte local array.
    ck(unsafe { rshmem::putmem(buf, local.as_ptr(), 8, pe) });
    barrier();
    ck(rshmem::free(buf));
}

/// `alloc_zero`: size 0 allocates nothing and returns NULL (OpenSHMEM, NVSHMEM), NULL frees nothing.
pub(crate) fn alloc_zero(c: &Ctx) {
    let nulls = [
        ("malloc(0)", ck(rshmem::malloc(0))),
        ("calloc(0, 8)", ck(rshmem::calloc(0, 8))),
        ("calloc(8, 0)", ck(rshmem::calloc(8, 0))),
        ("align(64, 0)", ck(rshmem::align(64, 0))),
        // SAFETY: a null pointer is `malloc`.
        ("realloc(NULL, 0)", ck(unsafe { rshmem::realloc(null_mut(), 0) })),
        ("rshmem_malloc(0)", rshmem::capi::rshmem_malloc(0).cast()),
        ("rshmem_calloc(0, 4)", rshmem::capi::rshmem_calloc(0, 4).cast()),
        ("rshmem_align(64, 0)", rshmem::capi::rshmem_align(64, 0).cast()),
    ];
    for (what, p) in nulls {
        if !p.is_null() {
            die(format!("{what} returned {p:p}, not NULL"));
        }
    }
    ck(rshmem::free(null_mut()));
    rshmem::capi::rshmem_free(null_mut());
    // Allocation goes on, symmetric, and typed empty slices work.
    let p = ck(rshmem::malloc(64));
    let q = ck(rshmem::malloc(64));
    if p.is_null() || q.is_null() || p == q {
        die(format!("after the zero-size calls, two mallocs gave {p:p} and {q:p}"));
    }
    let empty = ck(rshmem::SymSlice::<u64>::zeroed(0));
    if !empty.is_empty() || !ck(empty.to_vec()).is_empty() {
        die("an empty SymSlice is not empty");
    }
    ck(empty.free());
    barrier();
    ck(rshmem::free(q));
    ck(rshmem::free(p));
    println!("PE {}: alloc_zero: every zero-size allocation is NULL", c.me);
}

/// A device wait on a zeroed symmetric word of this PE until it is 1 (on one host thread, as a kernel
/// of one thread); `set_after`: another thread sets it after that long (None: nobody does).
fn wait_on_word(set_after: Option<std::time::Duration>) {
    let word = ck(rshmem::calloc(1, 8)) as usize;
    let me = rshmem::my_pe();
    std::thread::scope(|s| {
        if let Some(d) = set_after {
            s.spawn(move || {
                std::thread::sleep(d);
                // SAFETY: `word` is a live symmetric u64 of this PE, written only atomically.
                unsafe { rshmem_device::p(word as *mut u64, 1u64, me) };
            });
        }
        // SAFETY: as above; this is the only waiter.
        rshmem::cpu::launch(1, 1, || unsafe { rshmem_device::wait_until(word as *const u64, CMP_EQ, 1u64) });
    });
    ck(rshmem::free(word as *mut u8));
}

/// `reinit_env`: the first init (by the caller) ran with RSHMEM_DEBUG and RSHMEM_WAIT_TIMEOUT unset; a
/// device wait of 300 ms runs under it (long enough for a value cached per process to be taken). Then a
/// re-init with a bad value fails naming it, and one with RSHMEM_DEBUG=info and RSHMEM_WAIT_TIMEOUT=1 must
/// print init's info line and stop a device wait nobody ends after about a second.
pub(crate) fn reinit_env(c: &Ctx) -> ! {
    if c.n != 1 {
        die("reinit_env runs on one PE");
    }
    wait_on_word(Some(std::time::Duration::from_millis(300)));
    ck(rshmem::finalize());
    std::env::set_var("RSHMEM_PROXY_SPIN", "sometimes");
    expect_err(rshmem::init(), "RSHMEM_PROXY_SPIN=\"sometimes\" is not valid");
    std::env::remove_var("RSHMEM_PROXY_SPIN");
    std::env::set_var("RSHMEM_DEBUG", "info");
    std::env::set_var("RSHMEM_WAIT_TIMEOUT", "1");
    println!("PE 0: re-init with RSHMEM_DEBUG=info RSHMEM_WAIT_TIMEOUT=1");
    ck(rshmem::init());
    println!("PE 0: waiting on a word nobody sets");
    wait_on_word(None);
    die("a device wait nobody ends returned")
}
