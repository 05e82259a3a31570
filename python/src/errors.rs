//! The exceptions and warnings of the package, and the conversion of runtime errors into them.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyUserWarning};
use pyo3::PyErr;

create_exception!(_rshmem, Error, PyRuntimeError, "An error of the rshmem runtime; the message names the call and the problem.");
create_exception!(
    _rshmem,
    LeakWarning,
    PyUserWarning,
    "Symmetric memory that was never freed: rshmem.free is collective and explicit."
);

/// A runtime error as a Python exception.
pub fn err(e: rshmem::Error) -> PyErr {
    Error::new_err(e.to_string())
}

/// The error of a call made before init or after finalize.
pub fn not_initialized(call: &str) -> PyErr {
    Error::new_err(format!("{call}: rshmem is not initialized (call rshmem.init() first; after rshmem.finalize(), init again)"))
}
