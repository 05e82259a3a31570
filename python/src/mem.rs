//! What memory a Python object is: its address, size, element type and device, read from the object
//! itself (the buffer protocol for NumPy arrays and anything else that exports one; a torch tensor's
//! own accessors), never from an address the caller passes. Every operation takes its buffers through
//! here, so the local side of a put or get is always memory its owner vouches for.

use crate::dtype::DType;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

/// The memory of one object, valid while `_keep` (the exported buffer, or the object) lives.
pub struct Mem<'py> {
    /// Address of the first element.
    pub addr: usize,
    /// Size in bytes.
    pub nbytes: usize,
    /// Number of elements.
    pub count: usize,
    /// Element type.
    pub dtype: DType,
    /// Whether it is CUDA device memory (a CUDA tensor); host memory otherwise.
    pub cuda: bool,
    _keep: Keep<'py>,
}

enum Keep<'py> {
    Buffer(#[allow(dead_code)] PyUntypedBuffer),
    Object(#[allow(dead_code)] Bound<'py, PyAny>),
}

/// torch.Tensor, once torch is imported (by the user: this package never imports it).
static TORCH_TENSOR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn torch_tensor_type(py: Python<'_>) -> Option<&Bound<'_, PyType>> {
    if let Some(t) = TORCH_TENSOR.get(py) {
        return Some(t.bind(py));
    }
    let modules = py.import("sys").ok()?.getattr("modules").ok()?;
    let modules = modules.cast::<PyDict>().ok()?;
    let torch = modules.get_item("torch").ok()??;
    let t = torch.getattr("Tensor").ok()?.cast_into::<PyType>().ok()?;
    let _ = TORCH_TENSOR.set(py, t.unbind());
    TORCH_TENSOR.get(py).map(|t| t.bind(py))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// The memory of `obj`, the argument `what` of `call`: a C-contiguous NumPy array (or any object
/// with a C-contiguous buffer of a supported type) or a contiguous torch tensor. `writable`: the
/// operation writes it (a read-only buffer is refused).
pub fn describe<'py>(call: &str, what: &str, obj: &Bound<'py, PyAny>, writable: bool) -> PyResult<Mem<'py>> {
    let py = obj.py();
    if let Some(t) = TORCH_TENSOR.get(py) {
        if obj.is_instance(t.bind(py))? {
            return torch_mem(call, what, obj);
        }
    }
    match PyUntypedBuffer::get(obj) {
        Ok(buf) => buffer_mem(call, what, buf, writable),
        // A 0-d NumPy array exports a buffer without a shape, which the buffer reader refuses: its
        // one-element view has the same memory.
        Err(_) if obj.getattr("ndim").and_then(|n| n.extract::<usize>()).ok() == Some(0) && obj.hasattr("reshape")? => {
            let flat = obj.call_method1("reshape", (1,))?;
            let buf = PyUntypedBuffer::get(&flat)?;
            buffer_mem(call, what, buf, writable)
        }
        Err(_) => match torch_tensor_type(py) {
            Some(t) if obj.is_instance(t)? => torch_mem(call, what, obj),
            _ => Err(PyTypeError::new_err(format!(
                "{call}: {what} must be a NumPy array or a torch tensor (or another object with a C-contiguous buffer), not {}",
                type_name(obj)
            ))),
        },
    }
}

fn buffer_mem<'py>(call: &str, what: &str, buf: PyUntypedBuffer, writable: bool) -> PyResult<Mem<'py>> {
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{call}: {what} is not contiguous (strided views are not supported: pass a contiguous slice, or a copy)"
        )));
    }
    if writable && buf.readonly() {
        return Err(PyValueError::new_err(format!("{call}: {what} is read-only, and this operation writes it")));
    }
    let format = buf.format().to_string_lossy().into_owned();
    let dtype = DType::from_buffer_format(&format, buf.item_size()).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{call}: {what} has elements of format {format:?} ({} bytes), which rshmem does not handle (types: {})",
            buf.item_size(),
            DType::names()
        ))
    })?;
    Ok(Mem { addr: buf.buf_ptr() as usize, nbytes: buf.len_bytes(), count: buf.item_count(), dtype, cuda: false, _keep: Keep::Buffer(buf) })
}

fn torch_mem<'py>(call: &str, what: &str, obj: &Bound<'py, PyAny>) -> PyResult<Mem<'py>> {
    if !obj.call_method0("is_contiguous")?.extract::<bool>()? {
        return Err(PyValueError::new_err(format!(
            "{call}: {what} is not contiguous (strided views are not supported: pass a contiguous slice, or .contiguous())"
        )));
    }
    let dt = obj.getattr("dtype")?.str()?.to_string();
    let dtype = DType::from_name(&dt)
        .ok_or_else(|| PyTypeError::new_err(format!("{call}: {what} is a tensor of {dt}, which rshmem does not handle (types: {})", DType::names())))?;
    let count: usize = obj.call_method0("numel")?.extract()?;
    let addr: usize = obj.call_method0("data_ptr")?.extract()?;
    let cuda: bool = obj.getattr("is_cuda")?.extract()?;
    Ok(Mem { addr, nbytes: count * dtype.size(), count, dtype, cuda, _keep: Keep::Object(obj.clone()) })
}
