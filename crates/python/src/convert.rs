//! The engine's plain data as Python objects and back, in one step: [`Value`] trees as the contract's dicts,
//! lists and atoms; [`Name`]s as interned strings kept in the name's front-end slot (made once, never
//! released: an interned name lives as long as the interpreter anyway).

use std::ptr;
use std::sync::atomic::Ordering;

use engine::value::{Map, Name, Text, Value};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{ffi, Borrowed, IntoPyObjectExt};

/// The engine's names and texts as Python strings.
pub trait StrToPy {
    fn to_py<'py>(&self, py: Python<'py>) -> Bound<'py, PyString>;
}

/// The interned Python string of a name, kept in its front-end slot.
pub fn name_to_py<'a, 'py>(name: &'a Name, py: Python<'py>) -> Borrowed<'a, 'py, PyString> {
    let slot = name.front_slot();
    let mut object = slot.load(Ordering::Acquire) as *mut ffi::PyObject;
    if object.is_null() {
        let interned = PyString::intern(py, name.as_str()).into_ptr();
        object = match slot.compare_exchange(ptr::null_mut(), interned.cast(), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => interned,
            Err(first) => {
                // SAFETY: our own new reference, which another thread's string replaced
                unsafe { ffi::Py_DecRef(interned) };
                first.cast()
            }
        };
    }
    // SAFETY: only this function writes the slot, always with a str object the name holds a reference to
    // for ever
    unsafe { Borrowed::from_ptr(py, object).cast_unchecked() }
}

impl StrToPy for Name {
    fn to_py<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        name_to_py(self, py).to_owned()
    }
}

impl StrToPy for Text {
    fn to_py<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        match self {
            Text::Name(name) => name_to_py(name, py).to_owned(),
            Text::Owned(text) => PyString::new(py, text),
        }
    }
}

/// A value as the Python object the contract's dicts hold.
pub trait ValueToPy {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

impl ValueToPy for Value {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(to_py_tree(self, py)?.0)
    }
}

/// The object, and whether it is a tree of dicts and atoms (no list anywhere). Such dicts are taken off the
/// garbage collector's list: they cannot be part of a cycle as built, and a dict that later gets a container
/// inserted goes back on it by itself (CPython's own rule for dicts of atoms, extended to nested dicts). A
/// batch of a thousand messages would otherwise make thousands of tracked dicts and a collection every few
/// hundred of them.
fn to_py_tree<'py>(value: &Value, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, bool)> {
    Ok(match value {
        Value::Null => (py.None().into_bound(py), true),
        Value::Bool(b) => (PyBool::new(py, *b).to_owned().into_any(), true),
        Value::Int(v) => (v.into_bound_py_any(py)?, true),
        Value::UInt(v) => (v.into_bound_py_any(py)?, true),
        Value::Float(v) => (PyFloat::new(py, *v).into_any(), true),
        Value::Str(text) => (text.to_py(py).into_any(), true),
        Value::Bytes(bytes) => (PyBytes::new(py, bytes).into_any(), true),
        Value::List(items) => (list_to_py(py, items)?.into_any(), false),
        Value::Map(entries) => {
            let (dict, tree) = map_to_py_tree(py, entries)?;
            (dict.into_any(), tree)
        }
    })
}

/// A Python value of the contract's kinds (None, bool, int, float, str, bytes, list or tuple, dict with str
/// keys) as a value.
pub fn value_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    // the cheap type checks first: a failed integer extraction raises (and clears) a Python exception
    if obj.is_none() {
        Ok(Value::Null)
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(Value::Str(Text::Owned(s.to_str()?.to_owned())))
    } else if let Ok(v) = obj.cast::<PyFloat>() {
        Ok(Value::Float(v.value()))
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if !obj.is_instance_of::<PyInt>() {
        container_from_py(obj)
    } else if let Ok(v) = obj.extract::<i64>() {
        Ok(Value::Int(v))
    } else if let Ok(v) = obj.extract::<u64>() {
        Ok(Value::UInt(v))
    } else {
        Err(PyTypeError::new_err("an int beyond 64 bits is not a plain value"))
    }
}

fn container_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(Value::Bytes(b.as_bytes().to_vec()))
    } else if obj.is_instance_of::<PyDict>() {
        map_from_py(obj).map(Value::Map)
    } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        obj.try_iter()?.map(|item| value_from_py(&item?)).collect::<PyResult<_>>().map(Value::List)
    } else {
        Err(PyTypeError::new_err(format!("{} is not a plain value", obj.get_type().name()?)))
    }
}

/// A Python dict with str keys (and values as [`value_from_py`] takes them) as a map.
pub fn map_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Map> {
    let dict = obj.cast::<PyDict>()?;
    let mut entries = Map::with_capacity(dict.len());
    for (k, v) in dict.iter() {
        let key = k.cast::<PyString>().map_err(|_| PyTypeError::new_err("dict keys must be str"))?;
        entries.push((Text::Owned(key.to_str()?.to_owned()), value_from_py(&v)?));
    }
    Ok(entries)
}

/// The map as a Python dict.
pub fn map_to_py<'py>(py: Python<'py>, entries: &Map) -> PyResult<Bound<'py, PyDict>> {
    Ok(map_to_py_tree(py, entries)?.0)
}

fn map_to_py_tree<'py>(py: Python<'py>, entries: &Map) -> PyResult<(Bound<'py, PyDict>, bool)> {
    dict_of(py, entries, |_, value| to_py_tree(value, py))
}

/// A dict of the entries, each value's object (and whether it is a tree) made by `object`; untracked when it
/// is a tree (see [`to_py_tree`]).
pub fn dict_of<'py, 'v>(
    py: Python<'py>,
    entries: &'v Map,
    mut object: impl FnMut(&'v Text, &'v Value) -> PyResult<(Bound<'py, PyAny>, bool)>,
) -> PyResult<(Bound<'py, PyDict>, bool)> {
    let dict = PyDict::new(py);
    let mut tree = true;
    for (key, value) in entries {
        let (value, value_tree) = object(key, value)?;
        tree &= value_tree;
        match key {
            Text::Name(name) => dict.set_item(name_to_py(name, py), value)?,
            Text::Owned(text) => dict.set_item(PyString::new(py, text), value)?,
        }
    }
    if tree {
        // SAFETY: a dict we made and hold a reference to; untracking any dict is allowed.
        unsafe { ffi::PyObject_GC_UnTrack(dict.as_ptr().cast()) };
    }
    Ok((dict, tree))
}

/// A Python list of the values, filled in place (no intermediate vector of objects).
pub fn list_to_py<'py>(py: Python<'py>, items: &[Value]) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: PyList_New gives a new list of `len` empty slots (or NULL and an exception); each slot is set
    // once, by PyList_SetItem, which steals the reference. A slot left empty on error is fine to free.
    unsafe {
        let list = Bound::from_owned_ptr_or_err(py, ffi::PyList_New(items.len() as ffi::Py_ssize_t))?;
        for (i, item) in items.iter().enumerate() {
            let obj = item.to_py(py)?;
            if ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, obj.into_ptr()) != 0 {
                return Err(PyErr::fetch(py));
            }
        }
        Ok(list.cast_into_unchecked())
    }
}
