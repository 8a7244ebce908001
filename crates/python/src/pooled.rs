//! JSON lines handed to Python without a copy ([`JsonLines`]): the lines the engine wrote, in place or on its
//! thread pool (the engine's `sinks/pooled.rs`).

use pyo3::prelude::*;

/// JSON lines handed to Python without a copy: a read-only buffer (`memoryview(lines)`, a binary file's
/// `write(lines)`, `bytes(lines)`) over the bytes the core wrote. A gigabyte of `--json` copied into bytes objects
/// took a tenth of the interpreter thread's time.
#[pyclass(frozen, module = "dissector._core")]
pub struct JsonLines {
    data: Vec<u8>,
}

impl JsonLines {
    pub fn new(data: Vec<u8>) -> JsonLines {
        JsonLines { data }
    }
}

#[pymethods]
impl JsonLines {
    /// # Safety
    /// `view` is the Py_buffer Python asks to fill; the bytes live as long as this immutable object, which the
    /// view holds a reference to.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let data = &slf.get().data;
        // SAFETY: as above; PyBuffer_FillInfo refuses a writable view (readonly = 1) with an exception set
        let filled = unsafe {
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                data.as_ptr() as *mut std::ffi::c_void,
                data.len() as isize,
                1,
                flags,
            )
        };
        if filled == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}

    fn __len__(&self) -> usize {
        self.data.len()
    }
}
