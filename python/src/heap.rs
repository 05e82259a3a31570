//! Symmetric memory as Python objects: an [`Allocation`] owns a collective allocation (or names a
//! peer's copy, `nvshmem_ptr`), and an [`Exporter`] hands it to NumPy or torch through DLPack without
//! a copy (the array or tensor keeps the `Allocation` alive). Freeing is explicit and collective
//! (`free`); an allocation whose last array or tensor goes away without it stays allocated until
//! finalize and says so in a warning, as the runtime's own `SymSlice` does.
//!
//! Finalize unmaps the heap. Arrays and tensors that outlive it must not point at unmapped memory:
//! on the CPU backend, where the heap is this process's memory, `finalize` puts private memory with
//! the same contents at the addresses they use (no longer symmetric, but safe to read and write); on
//! GPUs they must not be used after finalize (the warning says so).

use crate::dtype::DType;
use crate::mem;
use crate::errors::{err, not_initialized, Error, LeakWarning};
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What an [`Allocation`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A collective allocation of this PE's heap, freed by `free`.
    Owned,
    /// A view of a peer's copy, mapped into this process (never freed here).
    Peer,
}

/// Where an alive [`Allocation`]'s memory is, for finalize.
struct Alive {
    addr: usize,
    nbytes: usize,
    kind: Kind,
    generation: u64,
    freed: Arc<AtomicBool>,
    /// Its memory is no longer mapped (an earlier finalize could not keep it): never touched again.
    lost: Arc<AtomicBool>,
}

/// Every alive `Allocation` object, by id.
static ALIVE: Mutex<BTreeMap<u64, Alive>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Bumped by every finalize: an allocation of an earlier generation is gone with its runtime.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// A symmetric allocation (or a peer's copy of one) that arrays and tensors are made over.
#[pyclass(module = "rshmem._rshmem", frozen, weakref)]
pub struct Allocation {
    id: u64,
    addr: usize,
    nbytes: usize,
    kind: Kind,
    generation: u64,
    freed: Arc<AtomicBool>,
}

impl Allocation {
    fn new(addr: usize, nbytes: usize, kind: Kind) -> Allocation {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let freed = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicBool::new(false));
        let generation = GENERATION.load(Ordering::Acquire);
        ALIVE.lock().unwrap_or_else(PoisonError::into_inner).insert(id, Alive { addr, nbytes, kind, generation, freed: freed.clone(), lost });
        Allocation { id, addr, nbytes, kind, generation, freed }
    }
}

#[pymethods]
impl Allocation {
    /// This PE's address of the allocation.
    #[getter]
    fn address(&self) -> usize {
        self.addr
    }
    /// Its size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }
    /// Whether `rshmem.free` freed it.
    #[getter]
    fn freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
    fn __repr__(&self) -> String {
        let what = if self.kind == Kind::Peer { "peer view" } else { "allocation" };
        format!("<rshmem symmetric {what} at {:#x}, {} bytes{}>", self.addr, self.nbytes, if self.freed() { ", freed" } else { "" })
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        ALIVE.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
        let leaked = self.kind == Kind::Owned
            && !self.freed.load(Ordering::Acquire)
            && self.generation == GENERATION.load(Ordering::Acquire)
            && rshmem::my_pe() >= 0;
        if !leaked {
            return;
        }
        let msg = format!(
            "an rshmem symmetric array/tensor of {} bytes was dropped without rshmem.free(): its symmetric memory stays allocated until finalize (freeing is collective, so it is never done when an object goes away; call rshmem.free(x) on every PE)",
            self.nbytes
        );
        // A drop runs where the interpreter holds its lock (the object's deallocation); a warning that
        // a filter turns into an error cannot propagate from here, so it is reported as unraisable.
        Python::try_attach(|py| {
            let category = py.get_type::<LeakWarning>();
            let text = std::ffi::CString::new(msg).unwrap_or_default();
            if let Err(e) = PyErr::warn(py, category.as_any(), &text, 1) {
                e.write_unraisable(py, None);
            }
        });
    }
}

// ---------------------------------------------------------------- DLPack
// Both forms of the protocol: the versioned capsule ("dltensor_versioned", DLPack 1.0, which says the
// memory is writable: NumPy makes read-only arrays of the legacy form) for consumers that ask for it
// with `max_version`, and the legacy one ("dltensor") for the others.

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}
#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}
#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}
#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}
#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

/// DLPack's device types.
const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DLTENSOR: &CStr = c"dltensor";
const DLTENSOR_VERSIONED: &CStr = c"dltensor_versioned";

/// A managed tensor (one of the two forms is handed out) with the shape and strides it points to and
/// the object that keeps its memory alive.
struct Holder {
    legacy: DLManagedTensor,
    versioned: DLManagedTensorVersioned,
    shape: Vec<i64>,
    strides: Vec<i64>,
    // Held (not read) so the memory outlives the consumer's array: dropped by the deleter.
    _owner: Option<Py<Allocation>>,
}

/// Takes back and drops the `Holder` leaked by `__dlpack__` (`ctx` is its box).
///
/// # Safety
/// `ctx` is the `manager_ctx` of a managed tensor handed out by `Exporter::__dlpack__`, not yet
/// deleted; called once per such tensor.
unsafe fn drop_holder(ctx: *mut c_void) {
    // SAFETY: this function's contract: the Box<Holder> leaked by __dlpack__, taken back once.
    let holder = unsafe { Box::from_raw(ctx as *mut Holder) };
    let mut holder = Some(holder);
    // Dropping the owner needs the interpreter; at its shutdown the holder is leaked instead.
    if Python::try_attach(|_py| drop(holder.take())).is_none() {
        std::mem::forget(holder);
    }
}

/// The legacy managed tensor's deleter: the consumer calls it when its array or tensor goes away (or
/// the capsule's destructor does when no consumer took it).
///
/// # Safety
/// `m` is the `legacy` field of a `Holder` made by `Exporter::__dlpack__`; called once.
unsafe extern "C" fn dl_deleter(m: *mut DLManagedTensor) {
    if !m.is_null() {
        // SAFETY: the function's contract; `manager_ctx` is the holder's box.
        unsafe { drop_holder((*m).manager_ctx) }
    }
}

/// The versioned managed tensor's deleter (as `dl_deleter`).
///
/// # Safety
/// `m` is the `versioned` field of a `Holder` made by `Exporter::__dlpack__`; called once.
unsafe extern "C" fn dl_deleter_versioned(m: *mut DLManagedTensorVersioned) {
    if !m.is_null() {
        // SAFETY: the function's contract; `manager_ctx` is the holder's box.
        unsafe { drop_holder((*m).manager_ctx) }
    }
}

/// The capsules' destructor: a capsule still under its first name was never consumed, so its managed
/// tensor is ours to delete; a consumer renames it ("used_...") and deletes the tensor itself.
///
/// # Safety
/// `capsule` is a live capsule object (CPython calls this from its deallocation, holding the lock).
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: `capsule` is a live capsule; IsValid never fails, and GetPointer with the name it
    // checked returns the pointer __dlpack__ stored: a live managed tensor of that form in a Holder.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
            dl_deleter(ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()) as *mut DLManagedTensor);
        } else if ffi::PyCapsule_IsValid(capsule, DLTENSOR_VERSIONED.as_ptr()) == 1 {
            dl_deleter_versioned(ffi::PyCapsule_GetPointer(capsule, DLTENSOR_VERSIONED.as_ptr()) as *mut DLManagedTensorVersioned);
        }
    }
}

/// Hands an [`Allocation`]'s memory to NumPy (`numpy.from_dlpack`) or torch (`torch.from_dlpack`) as an
/// array of `shape` and `dtype`, C order, writable, without a copy.
#[pyclass(module = "rshmem._rshmem", frozen)]
pub struct Exporter {
    owner: Py<Allocation>,
    addr: usize,
    shape: Vec<i64>,
    dtype: DType,
    device: (i32, i32),
}

#[pymethods]
impl Exporter {
    /// A DLPack capsule of the memory: the versioned form (1.0) when `max_version` allows it, else the
    /// legacy one. The stream and copy arguments of the protocol need nothing: the memory is ready
    /// (allocation is collective and complete) and never copied.
    #[pyo3(signature = (*_args, **kwargs))]
    fn __dlpack__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        let mut versioned = false;
        if let Some(kw) = kwargs {
            if let Some(v) = kw.get_item("max_version")? {
                if !v.is_none() {
                    let (major, _minor): (u32, u32) = v.extract()?;
                    versioned = major >= 1;
                }
            }
        }
        let ndim = self.shape.len();
        let mut strides = vec![1i64; ndim];
        for i in (0..ndim.saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.shape[i + 1].max(1);
        }
        let (code, bits) = self.dtype.dlpack();
        let tensor = || DLTensor {
            data: self.addr as *mut c_void,
            device: DLDevice { device_type: self.device.0, device_id: self.device.1 },
            ndim: ndim as i32,
            dtype: DLDataType { code, bits, lanes: 1 },
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let holder = Box::new(Holder {
            legacy: DLManagedTensor { dl_tensor: tensor(), manager_ctx: std::ptr::null_mut(), deleter: Some(dl_deleter) },
            versioned: DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(dl_deleter_versioned),
                flags: 0,
                dl_tensor: tensor(),
            },
            shape: self.shape.clone(),
            strides,
            _owner: Some(self.owner.clone_ref(py)),
        });
        let raw = Box::into_raw(holder);
        // SAFETY: `raw` is a live, leaked Box<Holder>, which does not move from here on; the vectors'
        // buffers are owned by it. The managed tensors point into it and name it as their context.
        let (managed, name) = unsafe {
            let h = &mut *raw;
            for t in [&mut h.legacy.dl_tensor, &mut h.versioned.dl_tensor] {
                t.shape = h.shape.as_mut_ptr();
                t.strides = h.strides.as_mut_ptr();
            }
            h.legacy.manager_ctx = raw as *mut c_void;
            h.versioned.manager_ctx = raw as *mut c_void;
            if versioned {
                (std::ptr::addr_of_mut!(h.versioned) as *mut c_void, DLTENSOR_VERSIONED)
            } else {
                (std::ptr::addr_of_mut!(h.legacy) as *mut c_void, DLTENSOR)
            }
        };
        // SAFETY: a new capsule over the managed tensor with a static name; the destructor deletes it
        // unless a consumer renamed (took) it.
        let cap = unsafe { ffi::PyCapsule_New(managed, name.as_ptr(), Some(capsule_destructor)) };
        if cap.is_null() {
            // SAFETY: no capsule holds the managed tensor: this is its only owner.
            unsafe { drop_holder(raw as *mut c_void) };
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `cap` is a new (owned) reference to a live object.
        Ok(unsafe { Bound::from_owned_ptr(py, cap) }.unbind())
    }

    /// (DLPack device type, device index): CPU (1, 0) or CUDA (2, the PE's GPU).
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.device
    }

    /// The allocation the memory belongs to.
    #[getter]
    fn allocation(&self, py: Python<'_>) -> Py<Allocation> {
        self.owner.clone_ref(py)
    }
}

// ---------------------------------------------------------------- the calls

/// Whether `[addr, addr + nbytes)` lies inside one live (not freed) allocation of this runtime made by
/// `alloc`.
pub fn is_live_symmetric(addr: usize, nbytes: usize) -> bool {
    let generation = GENERATION.load(Ordering::Acquire);
    let end = addr.saturating_add(nbytes);
    ALIVE.lock().unwrap_or_else(PoisonError::into_inner).values().any(|a| {
        a.kind == Kind::Owned && a.generation == generation && !a.freed.load(Ordering::Acquire) && a.addr <= addr && end <= a.addr + a.nbytes
    })
}

fn initialized(call: &str) -> PyResult<()> {
    if rshmem::my_pe() < 0 {
        return Err(not_initialized(call));
    }
    Ok(())
}

/// The DLPack device of the heap: the CPU, or this PE's GPU; `device` ("cpu", "cuda" or "cuda:N", or
/// None for the heap's own) must name it.
fn heap_device(call: &str, device: Option<&str>) -> PyResult<(i32, i32)> {
    let backend = rshmem::backend_name().map_err(err)?;
    if backend != "cuda" {
        return match device {
            None | Some("cpu") => Ok((DL_CPU, 0)),
            Some(d) => Err(PyValueError::new_err(format!(
                "{call}: device {d:?}: this job runs on the {backend} backend, whose symmetric heap is host memory (device \"cpu\")"
            ))),
        };
    }
    let ordinal = rshmem::cuda::device_ordinal(call).map_err(err)? as i32;
    match device {
        None | Some("cuda") => Ok((DL_CUDA, ordinal)),
        Some(d) if d.strip_prefix("cuda:").and_then(|n| n.parse::<i32>().ok()) == Some(ordinal) => Ok((DL_CUDA, ordinal)),
        Some(d) => Err(PyValueError::new_err(format!(
            "{call}: device {d:?}: this PE's symmetric heap is on GPU {ordinal} (device \"cuda\" or \"cuda:{ordinal}\")"
        ))),
    }
}

fn element_count(call: &str, shape: &[i64]) -> PyResult<usize> {
    shape.iter().try_fold(1usize, |n, &d| {
        let d = usize::try_from(d).map_err(|_| PyValueError::new_err(format!("{call}: shape {shape:?} has a negative dimension")))?;
        n.checked_mul(d).ok_or_else(|| PyValueError::new_err(format!("{call}: shape {shape:?} overflows")))
    })
}

/// Collective: a zeroed allocation for `shape` values of `dtype` on every PE, as an [`Exporter`] (on
/// `device`, see `heap_device`). An empty shape still allocates (one byte), so that every array has
/// an allocation to free.
#[pyfunction]
#[pyo3(signature = (call, shape, dtype, device=None))]
pub fn alloc(py: Python<'_>, call: &str, shape: Vec<i64>, dtype: &str, device: Option<&str>) -> PyResult<Exporter> {
    initialized(call)?;
    let dt = DType::from_name(dtype)
        .ok_or_else(|| PyValueError::new_err(format!("{call}: dtype {dtype:?} is not one rshmem handles ({})", DType::names())))?;
    let count = element_count(call, &shape)?;
    let dev = heap_device(call, device)?;
    let nbytes = count.checked_mul(dt.size()).ok_or_else(|| PyValueError::new_err(format!("{call}: shape {shape:?} overflows")))?;
    let addr = py.detach(|| rshmem::calloc(1, nbytes.max(1)).map(|p| p as usize)).map_err(|e| err(e.context(call)))?;
    let owner = Py::new(py, Allocation::new(addr, nbytes.max(1), Kind::Owned))?;
    Ok(Exporter { owner, addr, shape, dtype: dt, device: dev })
}

/// Collective: frees the allocation `obj` (an array or tensor from `alloc`) starts at, on every PE.
/// The runtime checks it (on every PE: a PE that passes something else makes every PE fail, naming
/// it).
#[pyfunction]
pub fn free(py: Python<'_>, call: &str, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    initialized(call)?;
    let m = mem::describe(call, "the object", obj, false)?;
    let addr = m.addr;
    drop(m);
    if addr == 0 {
        return Err(PyValueError::new_err(format!("{call}: the object has no memory (a null data pointer), so it is not a symmetric allocation")));
    }
    py.detach(|| rshmem::free(addr as *mut u8)).map_err(|e| err(e.context(call)))?;
    // The allocation (or a later one at the same address: the runtime freed this one) is freed: its
    // object must not warn.
    for a in ALIVE.lock().unwrap_or_else(PoisonError::into_inner).values() {
        if a.kind == Kind::Owned && a.addr == addr && !a.freed.load(Ordering::Acquire) {
            a.freed.store(true, Ordering::Release);
        }
    }
    Ok(())
}

/// PE `pe`'s copy of the symmetric memory of `obj`, as an [`Exporter`] of `shape`, where this process
/// maps it (`nvshmem_ptr`); None where it does not.
#[pyfunction]
pub fn peer(py: Python<'_>, call: &str, obj: &Bound<'_, PyAny>, shape: Vec<i64>, pe: i32) -> PyResult<Option<Exporter>> {
    initialized(call)?;
    let m = mem::describe(call, "the object", obj, false)?;
    let n = rshmem::n_pes();
    if pe < 0 || pe >= n {
        return Err(Error::new_err(format!("{call}: PE {pe} out of range (n_pes {n})")));
    }
    if element_count(call, &shape)? != m.count {
        return Err(PyValueError::new_err(format!("{call}: shape {shape:?} does not hold the object's {} values", m.count)));
    }
    let last = m.addr + m.nbytes.max(1) - 1;
    if rshmem::heap_offset(m.addr as *const u8).is_none() || rshmem::heap_offset(last as *const u8).is_none() {
        return Err(Error::new_err(format!(
            "{call}: the object ({:#x}, {} bytes) is not on the symmetric heap (make it with rshmem.array or rshmem.tensor)",
            m.addr, m.nbytes
        )));
    }
    let p = rshmem::ptr(m.addr as *const u8, pe) as usize;
    if p == 0 {
        return Ok(None);
    }
    let dev = heap_device(call, None)?;
    let owner = Py::new(py, Allocation::new(p, m.nbytes, Kind::Peer))?;
    Ok(Some(Exporter { owner, addr: p, shape, dtype: m.dtype, device: dev }))
}

/// Finalizes the runtime (collective), keeping every array and tensor still alive safe to touch on
/// the CPU backend (module doc); warns about allocations that were never freed.
#[pyfunction]
pub fn finalize(py: Python<'_>) -> PyResult<()> {
    let call = "rshmem.finalize";
    initialized(call)?;
    let cpu = rshmem::backend_name().map(|b| b != "cuda").unwrap_or(false);
    let (saved, leaked) = {
        let alive = ALIVE.lock().unwrap_or_else(PoisonError::into_inner);
        let leaked: Vec<usize> =
            alive.values().filter(|a| a.kind == Kind::Owned && !a.freed.load(Ordering::Acquire)).map(|a| a.nbytes).collect();
        let mut saved = Vec::new();
        if cpu {
            for a in alive.values().filter(|a| a.nbytes > 0 && !a.lost.load(Ordering::Acquire)) {
                let mut bytes = vec![0u8; a.nbytes];
                // SAFETY: an alive allocation that is not lost lies in memory mapped now: this
                // runtime's heap or a peer's heap mapped here, or the private copy an earlier finalize
                // put in place (a range it could not map is marked lost and skipped).
                unsafe { std::ptr::copy_nonoverlapping(a.addr as *const u8, bytes.as_mut_ptr(), a.nbytes) };
                saved.push((a.addr, bytes, a.lost.clone()));
            }
        }
        (saved, leaked)
    };
    let r = py.detach(rshmem::finalize);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    if cpu {
        keep_mapped(saved);
    }
    if !leaked.is_empty() {
        let total: usize = leaked.iter().sum();
        let after = if cpu {
            "they now hold private copies of their last contents (no longer symmetric)"
        } else {
            "their GPU memory is released: do not use them"
        };
        let msg = format!(
            "rshmem.finalize: {} symmetric array(s)/tensor(s) ({total} bytes) were never freed and are still referenced; {after}. Free them with rshmem.free(x) before finalize",
            leaked.len()
        );
        let text = std::ffi::CString::new(msg).unwrap_or_default();
        PyErr::warn(py, py.get_type::<LeakWarning>().as_any(), &text, 1)?;
    }
    r.map_err(err)
}

/// The pages `keep_mapped` mapped (never unmapped: arrays may use them until the process ends).
static KEPT_PAGES: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

/// After finalize unmapped the heap: private memory at each saved range's pages, filled with the saved
/// bytes. It never replaces a mapping that exists (`MAP_FIXED_NOREPLACE`): a page that is mapped
/// already is used only if an earlier finalize mapped it here (`KEPT_PAGES`); a range with a page that
/// is neither is marked lost, and never touched again.
fn keep_mapped(saved: Vec<(usize, Vec<u8>, Arc<AtomicBool>)>) {
    // SAFETY: sysconf has no memory effects.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
    let mut spans: Vec<(usize, usize)> = saved.iter().map(|(a, b, _)| (a / page * page, (a + b.len()).div_ceil(page) * page)).collect();
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut kept = KEPT_PAGES.lock().unwrap_or_else(PoisonError::into_inner);
    // Maps `len` bytes at `at` unless anything is mapped there; true when it did.
    let map_at = |at: usize, len: usize| -> bool {
        // SAFETY: an anonymous private mapping that may not replace any existing one
        // (MAP_FIXED_NOREPLACE); on kernels without the flag the address is only a hint, and a mapping
        // made elsewhere is unmapped again at once.
        let r = unsafe {
            libc::mmap(at as *mut c_void, len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE, -1, 0)
        };
        if r != libc::MAP_FAILED && r as usize != at {
            // SAFETY: the mapping just made elsewhere, ours alone and unused.
            unsafe { libc::munmap(r, len) };
        }
        r as usize == at
    };
    for (s, e) in merged {
        if map_at(s, e - s) {
            kept.extend((s..e).step_by(page));
            continue;
        }
        // Some page is mapped already (kept by an earlier finalize, or not ours): page by page.
        for p in (s..e).step_by(page) {
            if !kept.contains(&p) && map_at(p, page) {
                kept.insert(p);
            }
        }
    }
    for (addr, bytes, lost) in saved {
        let first = addr / page * page;
        if (first..addr + bytes.len()).step_by(page).all(|p| kept.contains(&p)) {
            // SAFETY: every page of the range is a private, writable mapping this function made (now
            // or at an earlier finalize) and never unmaps.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
        } else {
            lost.store(true, Ordering::Release);
        }
    }
}
