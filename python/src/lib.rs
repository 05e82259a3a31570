//! `rshmem._rshmem`, the extension module of the Python package `rshmem` (python/rshmem/): the runtime's
//! calls for Python, a thin layer over the Rust API. The package's Python code picks streams and
//! builds NumPy arrays and torch tensors from what this module exports; every check of PEs, symmetric
//! ranges, teams and sizes is the runtime's, with its message, raised as `rshmem.Error`.
//!
//! Since the module links the whole runtime, it also exports the runtime's C ABI (`rshmem_*`,
//! `nvshmem.h`'s host calls): a CUDA C++ extension loaded into the same process calls the runtime this
//! module initialized (docs/python.md).

mod dtype;
mod errors;
mod heap;
mod mem;
mod ops;

use errors::{err, not_initialized, Error, LeakWarning};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Collective: initializes this process as a PE of the job its launcher's environment describes
/// (rshmrun, mpirun, srun, or a single PE without any).
#[pyfunction]
fn init(py: Python<'_>) -> PyResult<()> {
    py.detach(rshmem::init).map_err(err)
}

/// Collective: initializes this process as PE `pe` of `npes` from the unique id (256 hex digits) that
/// PE 0 made with `get_unique_id`.
#[pyfunction]
fn init_unique_id(py: Python<'_>, uid: &str, pe: usize, npes: usize) -> PyResult<()> {
    let id = rshmem::UniqueId::from_hex(uid).map_err(err)?;
    if pe >= npes {
        return Err(PyValueError::new_err(format!("rshmem.init: rank {pe} is not below nranks {npes}")));
    }
    py.detach(|| rshmem::init_with_unique_id(&id, pe, npes)).map_err(err)
}

/// A unique id (256 hex digits) for `init_unique_id`; made by PE 0, which then initializes with it.
#[pyfunction]
fn get_unique_id() -> PyResult<String> {
    rshmem::get_unique_id().map(|id| id.to_hex()).map_err(err)
}

/// This PE's number, -1 when not initialized.
#[pyfunction]
fn my_pe() -> i32 {
    rshmem::my_pe()
}

/// The number of PEs, 0 when not initialized.
#[pyfunction]
fn n_pes() -> i32 {
    rshmem::n_pes()
}

/// "cpu" or "cuda".
#[pyfunction]
fn backend() -> PyResult<&'static str> {
    rshmem::backend_name().map_err(|_| not_initialized("rshmem.backend"))
}

/// The GPU this PE runs on (CUDA backend).
#[pyfunction]
fn device_ordinal() -> PyResult<usize> {
    rshmem::cuda::device_ordinal("rshmem.device_ordinal").map_err(err)
}

/// The size in bytes of this PE's symmetric heap (0 when not initialized).
#[pyfunction]
fn heap_size() -> usize {
    rshmem::heap_size()
}

#[pyfunction]
fn team_my_pe(team: i32) -> i32 {
    rshmem::team_my_pe(team)
}

#[pyfunction]
fn team_n_pes(team: i32) -> i32 {
    rshmem::team_n_pes(team)
}

#[pyfunction]
fn team_translate_pe(src: i32, pe: i32, dest: i32) -> i32 {
    rshmem::team_translate_pe(src, pe, dest)
}

/// Collective over `parent`: the team of its members `start, start + stride, ...` (`size`); None on
/// the members it leaves out.
#[pyfunction]
fn team_split_strided(py: Python<'_>, parent: i32, start: i32, stride: i32, size: i32) -> PyResult<Option<i32>> {
    py.detach(|| rshmem::Team(parent).split_strided(start, stride, size)).map(|t| t.map(|t| t.0)).map_err(err)
}

/// Collective over `team`: destroys it.
#[pyfunction]
fn team_destroy(py: Python<'_>, team: i32) -> PyResult<()> {
    py.detach(|| rshmem::Team(team).destroy()).map_err(err)
}

#[pymodule]
fn _rshmem(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("LeakWarning", py.get_type::<LeakWarning>())?;
    m.add("TEAM_WORLD", rshmem_device::state::TEAM_WORLD)?;
    m.add("TEAM_SHARED", rshmem_device::state::TEAM_SHARED)?;
    m.add("TEAM_NODE", rshmem_device::state::TEAM_NODE)?;
    m.add("TEAM_INVALID", rshmem_device::state::TEAM_INVALID)?;
    m.add("SIGNAL_SET", rshmem_device::state::SIGNAL_SET)?;
    m.add("SIGNAL_ADD", rshmem_device::state::SIGNAL_ADD)?;
    use rshmem_device::state as s;
    m.add("CMP", vec![("eq", s::CMP_EQ), ("ne", s::CMP_NE), ("gt", s::CMP_GT), ("ge", s::CMP_GE), ("lt", s::CMP_LT), ("le", s::CMP_LE)])?;
    m.add("DTYPES", dtype::DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>())?;
    m.add_class::<heap::Allocation>()?;
    m.add_class::<heap::Exporter>()?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(init_unique_id, m)?)?;
    m.add_function(wrap_pyfunction!(get_unique_id, m)?)?;
    m.add_function(wrap_pyfunction!(heap::finalize, m)?)?;
    m.add_function(wrap_pyfunction!(my_pe, m)?)?;
    m.add_function(wrap_pyfunction!(n_pes, m)?)?;
    m.add_function(wrap_pyfunction!(backend, m)?)?;
    m.add_function(wrap_pyfunction!(device_ordinal, m)?)?;
    m.add_function(wrap_pyfunction!(heap_size, m)?)?;
    m.add_function(wrap_pyfunction!(team_my_pe, m)?)?;
    m.add_function(wrap_pyfunction!(team_n_pes, m)?)?;
    m.add_function(wrap_pyfunction!(team_translate_pe, m)?)?;
    m.add_function(wrap_pyfunction!(team_split_strided, m)?)?;
    m.add_function(wrap_pyfunction!(team_destroy, m)?)?;
    m.add_function(wrap_pyfunction!(heap::alloc, m)?)?;
    m.add_function(wrap_pyfunction!(heap::free, m)?)?;
    m.add_function(wrap_pyfunction!(heap::peer, m)?)?;
    m.add_function(wrap_pyfunction!(ops::put, m)?)?;
    m.add_function(wrap_pyfunction!(ops::get, m)?)?;
    m.add_function(wrap_pyfunction!(ops::put_signal, m)?)?;
    m.add_function(wrap_pyfunction!(ops::signal_op, m)?)?;
    m.add_function(wrap_pyfunction!(ops::wait_until, m)?)?;
    m.add_function(wrap_pyfunction!(ops::quiet, m)?)?;
    m.add_function(wrap_pyfunction!(ops::team_sync, m)?)?;
    m.add_function(wrap_pyfunction!(ops::broadcast, m)?)?;
    m.add_function(wrap_pyfunction!(ops::fcollect, m)?)?;
    m.add_function(wrap_pyfunction!(ops::alltoall, m)?)?;
    m.add_function(wrap_pyfunction!(ops::reduce, m)?)?;
    Ok(())
}
