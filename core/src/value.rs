//! The decoder's plain data in Rust: a tree of values, what a dict of the JSON contract holds on the Python
//! side. Rust code reads it (`get`, `as_i64`, ...); the binding turns it into Python objects in one step
//! (`to_py`); the native output writes it as JSON (`write_json`: byte for byte what
//! `dissector/output/jsonl.dumps` writes).
//!
//! Keys and names the contract declares (schema fields, enum values, record keys, finding ids) are
//! [`Name`]s: static text plus the interned Python string made of it once, so neither decoding nor
//! conversion allocates a key.

use std::borrow::Cow;
use std::fmt;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use pyo3::{ffi, Borrowed, IntoPyObjectExt};

/// A name the contract declares: its text, and the interned Python string made of it the first time it
/// crosses the binding. That string is held by a plain pointer, never released (an interned name lives as
/// long as the interpreter anyway): so nothing in decoding refers to Python, and Rust alone can decode.
pub struct Name {
    text: Cow<'static, str>,
    python: AtomicPtr<ffi::PyObject>,
    /// Nothing in it to escape in JSON (true of every name the contract declares): written as it is.
    json_plain: bool,
    /// `,"text":`, made the first time the name is written as a JSON object's key (a record writes a few keys
    /// per message: one copy each instead of four pushes).
    json_key: std::sync::OnceLock<Box<[u8]>>,
}

impl Name {
    pub const fn new(text: &'static str) -> Name {
        Name {
            text: Cow::Borrowed(text),
            python: AtomicPtr::new(ptr::null_mut()),
            json_plain: json_plain(text.as_bytes()),
            json_key: std::sync::OnceLock::new(),
        }
    }

    /// A name read at run time (the schema's): it lives as long as the table holding it.
    pub fn owned(text: String) -> Name {
        let json_plain = json_plain(text.as_bytes());
        Name { text: Cow::Owned(text), python: AtomicPtr::new(ptr::null_mut()), json_plain, json_key: std::sync::OnceLock::new() }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn to_py<'a, 'py>(&'a self, py: Python<'py>) -> Borrowed<'a, 'py, PyString> {
        let mut object = self.python.load(Ordering::Acquire);
        if object.is_null() {
            let interned = PyString::intern(py, &self.text).into_ptr();
            object = match self.python.compare_exchange(ptr::null_mut(), interned, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => interned,
                Err(first) => {
                    // SAFETY: our own new reference, which another thread's string replaced
                    unsafe { ffi::Py_DecRef(interned) };
                    first
                }
            };
        }
        // SAFETY: a str object this name holds a reference to for ever
        unsafe { Borrowed::from_ptr(py, object).cast_unchecked() }
    }

    /// The name as an object's key: `"text":`, after a comma unless `first`.
    pub fn write_json_key(&self, first: bool, out: &mut Vec<u8>) {
        let key = self.json_key.get_or_init(|| {
            let mut key = vec![b','];
            self.write_json(&mut key);
            key.push(b':');
            key.into_boxed_slice()
        });
        out.extend_from_slice(if first { &key[1..] } else { key });
    }

    pub fn write_json(&self, out: &mut Vec<u8>) {
        if self.json_plain {
            out.push(b'"');
            out.extend_from_slice(self.text.as_bytes());
            out.push(b'"');
        } else {
            write_json_str(&self.text, out);
        }
    }
}

/// `name!("text")`: a `&'static Name` made once per call site (as PyO3's `intern!`).
#[macro_export]
macro_rules! name {
    ($text:expr) => {{
        static NAME: $crate::value::Name = $crate::value::Name::new($text);
        &NAME
    }};
}

/// A string value or a map key: a declared name, or text read off the wire.
#[derive(Clone)]
pub enum Text {
    Name(&'static Name),
    Owned(String),
}

impl Text {
    pub fn as_str(&self) -> &str {
        match self {
            Text::Name(name) => name.as_str(),
            Text::Owned(text) => text,
        }
    }

    pub fn to_py<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        match self {
            Text::Name(name) => name.to_py(py).to_owned(),
            Text::Owned(text) => PyString::new(py, text),
        }
    }

    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Text::Name(name) => name.write_json(out),
            Text::Owned(text) => write_json_str(text, out),
        }
    }
}

/// Names and texts compare and print as their text.
macro_rules! compared_and_printed_as_text {
    ($($t:ty),*) => {$(
        impl PartialEq for $t {
            fn eq(&self, other: &$t) -> bool {
                self.as_str() == other.as_str()
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self.as_str(), f)
            }
        }
    )*};
}
compared_and_printed_as_text!(Name, Text);

/// A map's entries in insertion order (the order of a Python dict, and of the JSON object); keys unique.
pub type Map = Vec<(Text, Value)>;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    /// Only for a uint64 above `i64::MAX`: every other integer is an `Int`.
    UInt(u64),
    Float(f64),
    Str(Text),
    /// Kept as bytes on the Python side (a message's `payload`, `ordering_key`); never in the JSON contract.
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Map(Map),
}

/// One map entry under a declared key.
pub fn entry(key: &'static Name, value: impl Into<Value>) -> (Text, Value) {
    (Text::Name(key), value.into())
}

macro_rules! int_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(v.into())
            }
        }
    )*};
}
int_from!(i32, u32, i64);

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        match i64::try_from(v) {
            Ok(v) => Value::Int(v),
            Err(_) => Value::UInt(v),
        }
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::from(v as u64)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(Text::Owned(v))
    }
}

impl From<&'static Name> for Value {
    fn from(v: &'static Name) -> Value {
        Value::Str(Text::Name(v))
    }
}

impl From<Text> for Value {
    fn from(v: Text) -> Value {
        Value::Str(v)
    }
}

impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Value {
        Value::List(v)
    }
}

impl From<Map> for Value {
    fn from(v: Map) -> Value {
        Value::Map(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

impl Value {
    /// The value under `key` of a map (None for a missing key or a value that is not a map).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map()?.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Python's truth value of the value (what `if value:` decides).
    pub fn truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Int(v) => *v != 0,
            Value::UInt(v) => *v != 0,
            Value::Float(v) => *v != 0.0,
            Value::Str(text) => !text.as_str().is_empty(),
            Value::Bytes(bytes) => !bytes.is_empty(),
            Value::List(items) => !items.is_empty(),
            Value::Map(entries) => !entries.is_empty(),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(v) => u64::try_from(*v).ok(),
            Value::UInt(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(t) => Some(t.as_str()),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    // ---------------------------------------------------------------------------------------------- JSON

    /// The value as JSON, exactly as `dissector/output/jsonl.dumps` writes it: orjson's form (no spaces,
    /// non-ASCII raw, shortest round-trip floats, NaN and infinities as null), then C1 controls escaped.
    /// Bytes, which the contract never holds, are written as `jsonl`'s fallback writes them: text with
    /// `\xNN` for what is not UTF-8.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            Value::Int(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
            Value::UInt(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
            Value::Float(v) if v.is_finite() => out.extend_from_slice(zmij::Buffer::new().format_finite(*v).as_bytes()),
            Value::Float(_) => out.extend_from_slice(b"null"),
            Value::Str(text) => text.write_json(out),
            Value::Bytes(bytes) => write_json_str(&text_lossless(bytes), out),
            Value::List(items) => write_json_array(items, out, Value::write_json),
            Value::Map(entries) => write_json_map(entries, out),
        }
    }

    // -------------------------------------------------------------------------------------------- Python

    /// The value as the Python object the contract's dicts hold.
    pub fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.to_py_tree(py)?.0)
    }

    /// The object, and whether it is a tree of dicts and atoms (no list anywhere). Such dicts are taken off
    /// the garbage collector's list: they cannot be part of a cycle as built, and a dict that later gets a
    /// container inserted goes back on it by itself (CPython's own rule for dicts of atoms, extended to
    /// nested dicts). A batch of a thousand messages would otherwise make thousands of tracked dicts and a
    /// collection every few hundred of them.
    fn to_py_tree<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, bool)> {
        Ok(match self {
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

    /// A Python value of the contract's kinds (None, bool, int, float, str, bytes, list or tuple, dict with
    /// str keys) as a value.
    pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
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
            Self::from_py_container(obj)
        } else if let Ok(v) = obj.extract::<i64>() {
            Ok(Value::Int(v))
        } else if let Ok(v) = obj.extract::<u64>() {
            Ok(Value::UInt(v))
        } else {
            Err(PyTypeError::new_err("an int beyond 64 bits is not a plain value"))
        }
    }

    fn from_py_container(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
        if let Ok(b) = obj.cast::<PyBytes>() {
            Ok(Value::Bytes(b.as_bytes().to_vec()))
        } else if obj.is_instance_of::<PyDict>() {
            map_from_py(obj).map(Value::Map)
        } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<pyo3::types::PyTuple>() {
            obj.try_iter()?.map(|item| Value::from_py(&item?)).collect::<PyResult<_>>().map(Value::List)
        } else {
            Err(PyTypeError::new_err(format!("{} is not a plain value", obj.get_type().name()?)))
        }
    }
}

/// A Python dict with str keys (and values as [`Value::from_py`] takes them) as a map.
pub fn map_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Map> {
    let dict = obj.cast::<PyDict>()?;
    let mut entries = Map::with_capacity(dict.len());
    for (k, v) in dict.iter() {
        let key = k.cast::<PyString>().map_err(|_| PyTypeError::new_err("dict keys must be str"))?;
        entries.push((Text::Owned(key.to_str()?.to_owned()), Value::from_py(&v)?));
    }
    Ok(entries)
}

/// The map as a Python dict.
pub fn map_to_py<'py>(py: Python<'py>, entries: &Map) -> PyResult<Bound<'py, PyDict>> {
    Ok(map_to_py_tree(py, entries)?.0)
}

fn map_to_py_tree<'py>(py: Python<'py>, entries: &Map) -> PyResult<(Bound<'py, PyDict>, bool)> {
    dict_of(py, entries, |_, value| value.to_py_tree(py))
}

/// A dict of the entries, each value's object (and whether it is a tree) made by `object`; untracked when
/// it is a tree (see [`Value::to_py_tree`]).
fn dict_of<'py, 'v>(
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
            Text::Name(name) => dict.set_item(name.to_py(py), value)?,
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

/// Writes a JSON object field by field, for code that holds its fields apart rather than as a [`Map`].
pub struct JsonObject<'o> {
    out: &'o mut Vec<u8>,
    empty: bool,
}

impl<'o> JsonObject<'o> {
    pub fn start(out: &'o mut Vec<u8>) -> JsonObject<'o> {
        out.push(b'{');
        JsonObject { out, empty: true }
    }

    /// The key, and the output to write its value to.
    pub fn key(&mut self, key: &Name) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        key.write_json(self.out);
        self.out.push(b':');
        self.out
    }

    /// A key known only at run time (a note's, a table's), and the output to write its value to.
    pub fn key_str(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        write_json_str(key, self.out);
        self.out.push(b':');
        self.out
    }

    pub fn field(&mut self, key: &Name, value: &Value) {
        value.write_json(self.key(key));
    }

    pub fn field_or_null(&mut self, key: &Name, value: Option<&Value>) {
        value.unwrap_or(&Value::Null).write_json(self.key(key));
    }

    pub fn end(self) {
        self.out.push(b'}');
    }
}

pub fn write_json_map(entries: &Map, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        key.write_json(out);
        out.push(b':');
        value.write_json(out);
    }
    out.push(b'}');
}

/// `[...]`, each item written by `write`.
pub fn write_json_array<T>(items: &[T], out: &mut Vec<u8>, write: impl Fn(&T, &mut Vec<u8>)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(item, out);
    }
    out.push(b']');
}

/// What each byte of a string becomes in JSON: 0 itself, `u` `\u00xx`, [`C1_LEAD`] `\u00xx` of the next
/// byte when that makes a C1 control (U+0080..U+009F, which a terminal would obey), [`E2_LEAD`] `\u20xx`
/// when the three bytes are a line or paragraph separator or a bidi control (U+2028..U+202E,
/// U+2066..U+2069: JSON allows them raw, but they end lines for `str.splitlines` and JavaScript, and
/// reorder what a terminal shows), else `\` and the letter. DEL (0x7f) is `\u007f`.
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[0x7f] = b'u';
    table[0xc2] = C1_LEAD;
    table[0xe2] = E2_LEAD;
    table
};
const C1_LEAD: u8 = 0xc2;
const E2_LEAD: u8 = 0xe2;

const fn json_plain(bytes: &[u8]) -> bool {
    let mut i = 0;
    while i < bytes.len() {
        if ESCAPE[bytes[i] as usize] != 0 {
            return false;
        }
        i += 1;
    }
    true
}

/// How many bytes from `i` (a lead byte in [`ESCAPE`]) make one character to escape: 2 for a C1 control,
/// 3 for U+2028..U+202E or U+2066..U+2069, else 0 (the character is written as it is).
fn escaped_run(code: u8, bytes: &[u8], i: usize) -> usize {
    match code {
        C1_LEAD => usize::from(matches!(bytes.get(i + 1), Some(0x80..=0x9f))) * 2,
        E2_LEAD => match (bytes.get(i + 1), bytes.get(i + 2)) {
            (Some(0x80), Some(0xa8..=0xae)) | (Some(0x81), Some(0xa6..=0xa9)) => 3,
            _ => 0,
        },
        _ => 1,
    }
}

/// A string as JSON: orjson's escapes (the short ones, else `\u00xx`), and C1 controls, DEL, U+2028/U+2029 and
/// bidi controls as `\uXXXX` (as `dissector/output/jsonl.py` writes them).
pub fn write_json_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let u00 = |control: u8| [b'\\', b'u', b'0', b'0', HEX[(control >> 4) as usize], HEX[(control & 15) as usize]];
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut done, mut i) = (0, 0);
    while i < bytes.len() {
        // most text has nothing to escape: skip it eight bytes at a time
        if let Some(word) = bytes.get(i..i + 8) {
            if !may_need_escape(u64::from_le_bytes(word.try_into().unwrap_or_default())) {
                i += 8;
                continue;
            }
        }
        let code = ESCAPE[bytes[i] as usize];
        if code == 0 {
            i += 1;
            continue;
        }
        let run = escaped_run(code, bytes, i);
        if run == 0 {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[done..i]);
        match code {
            C1_LEAD => out.extend_from_slice(&u00(bytes[i + 1])),
            // U+2028..U+202E: E2 80 A8..AE; U+2066..U+2069: E2 81 A6..A9 (the low byte is 0x28.. / 0x66..)
            E2_LEAD => {
                let low = if bytes[i + 1] == 0x80 { bytes[i + 2] - 0x80 } else { bytes[i + 2] - 0x40 };
                out.extend_from_slice(&[b'\\', b'u', b'2', b'0', HEX[(low >> 4) as usize], HEX[(low & 15) as usize]]);
            }
            b'u' => out.extend_from_slice(&u00(bytes[i])),
            letter => out.extend_from_slice(&[b'\\', letter]),
        }
        i += run;
        done = i;
    }
    out.extend_from_slice(&bytes[done..]);
    out.push(b'"');
}

/// Whether any of eight bytes may be one [`ESCAPE`] marks: a control (below 0x20), `"`, `\\`, DEL or any byte
/// from 0x80 (the leads of C1 controls and of U+2028.., which the table then looks at). Never a false "no"; a
/// false "yes" only sends those bytes through the table.
#[inline]
fn may_need_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |n: u64| word.wrapping_sub(ONES * n) & !word & HIGH; // some byte < n (n <= 128)
    let equal = |b: u64| {
        let x = word ^ (ONES * b);
        x.wrapping_sub(ONES) & !x & HIGH
    };
    (below(0x20) | equal(b'"' as u64) | equal(b'\\' as u64) | equal(0x7f) | (word & HIGH)) != 0
}

/// Bytes as text: UTF-8 where they are, each byte that is not as `\xNN` (Python's `backslashreplace`), so
/// nothing on the wire is hidden.
pub fn text_lossless(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// A protobuf ``string`` (proto2 does not check UTF-8) as text, see [`text_lossless`].
pub fn text(bytes: &[u8]) -> Text {
    Text::Owned(match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => text_lossless(bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(v: &Value) -> String {
        let mut out = Vec::new();
        v.write_json(&mut out);
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// The escapes written one character at a time, as `serde_json` would read them back plus ours: the
    /// reference the word-at-a-time skip in `write_json_str` must equal.
    fn escaped_by_char(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                }
                _ => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn word_skip_escapes_every_position() {
        let specials = ["\"", "\\", "\n", "\u{1}", "\u{7f}", "\u{85}", "\u{2028}", "\u{202e}", "\u{2069}", "é", "\u{2030}", "€"];
        for len in 0..20 {
            for at in 0..=len {
                for special in specials {
                    let text: String = "a".repeat(at) + special + &"b".repeat(len - at);
                    let mut out = Vec::new();
                    write_json_str(&text, &mut out);
                    assert_eq!(String::from_utf8(out).unwrap(), escaped_by_char(&text), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn scalars() {
        assert_eq!(json(&Value::Null), "null");
        assert_eq!(json(&Value::Bool(true)), "true");
        assert_eq!(json(&Value::Int(i64::MIN)), "-9223372036854775808");
        assert_eq!(json(&Value::from(u64::MAX)), "18446744073709551615");
        assert_eq!(Value::from(u64::MAX), Value::UInt(u64::MAX));
        assert_eq!(Value::from(7u64), Value::Int(7));
    }

    #[test]
    fn floats_as_orjson() {
        // orjson 3.13's forms (checked against it on many more values by tests/test_core_values.py)
        let cases = [
            (0.0, "0.0"), (-0.0, "-0.0"), (1.0, "1.0"), (0.1, "0.1"), (1e-7, "1e-7"), (1e-5, "0.00001"),
            (1e15, "1000000000000000.0"), (1e16, "1e+16"), (1.2345678901234568e20, "1.2345678901234568e+20"),
            (5e-324, "5e-324"), (1.0 / 3.0, "0.3333333333333333"), (f64::NAN, "null"), (f64::INFINITY, "null"),
            (f64::NEG_INFINITY, "null"),
        ];
        for (v, expected) in cases {
            assert_eq!(json(&Value::Float(v)), expected, "{v:?}");
        }
    }

    #[test]
    fn strings_escaped_as_orjson_then_c1() {
        let s = "a\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f}\u{7f}\"\\/ é\u{80}\u{85}\u{9f}\u{a0}\u{2028}";
        assert_eq!(
            json(&Value::from(s.to_string())),
            "\"a\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f\\u007f\\\"\\\\/ é\\u0080\\u0085\\u009f\u{a0}\\u2028\""
        );
        assert_eq!(json(&Value::from("Â".to_string())), "\"Â\""); // U+00C2 is 0xC3 0x82: no escape
        assert_eq!(json(&Value::from("\u{c2}x".to_string())), "\"\u{c2}x\"");
    }

    #[test]
    fn separators_and_bidi_controls_escaped() {
        let s = "\u{2027}\u{2028}\u{2029}\u{202a}\u{202e}\u{202f}\u{2065}\u{2066}\u{2069}\u{206a}→…";
        assert_eq!(json(&Value::from(s.to_string())),
                   "\"\u{2027}\\u2028\\u2029\\u202a\\u202e\u{202f}\u{2065}\\u2066\\u2069\u{206a}→…\"");
        assert_eq!(json(&Value::from("\u{2028}".to_string())), "\"\\u2028\""); // at the very end
    }

    #[test]
    fn bytes_as_the_fallback_writes_them() {
        assert_eq!(json(&Value::Bytes(b"ok\xff\xc3".to_vec())), "\"ok\\\\xff\\\\xc3\"");
        assert_eq!(text_lossless(b"a\xe2\x82b\xf0\x9f\x98\x80"), "a\\xe2\\x82b\u{1f600}");
    }

    #[test]
    fn containers_keep_their_order() {
        let v = Value::Map(vec![
            entry(crate::name!("b"), 1i64),
            (Text::Owned("a".into()), Value::List(vec![Value::Null, Value::from(Some(2i64)), Value::Map(Vec::new())])),
        ]);
        assert_eq!(json(&v), "{\"b\":1,\"a\":[null,2,{}]}");
        assert_eq!(v.get("a").and_then(Value::as_list).map(<[Value]>::len), Some(3));
        assert_eq!(v.get("b").and_then(Value::as_i64), Some(1));
        assert_eq!(v.get("c"), None);
        assert_eq!(json(&Value::List(Vec::new())), "[]");
    }
}
