//! The Python module `dissector._core`, the only code that names Python: the engine's functions here,
//! its stages' classes in a file each (`capture`, `transport`, `analysis`, `stats`, `timeline`, `records`),
//! conversions of its plain data in `convert`. It names no protocol: it reaches each through the engine's
//! registry by name (`decode`, `tables`), and a frame's body through the `DecodedBody` and `Protocol` traits.
//! Decoding needs no Python (the GIL is released around it for frames from 4 KiB); its Rust plain data is then
//! converted in one step into the classes Python bound once (`bind`: `Decoded`, `Finding`; `bind_body`: a
//! protocol's body class, such as Pulsar's `PayloadSection`). The pipeline uses the same decode and conversion
//! (`decode_detached`, `decoded_to_py`).

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt;

use engine::model::{Body, BodyField, Decoded, DecodedBody, Finding};
use engine::protocols::{self, Depth, Protocol};
use engine::value::{Map, Text};

use crate::convert::{list_to_py, map_to_py, value_from_py, StrToPy, ValueToPy};

mod analysis;
mod arrow;
mod capture;
mod convert;
mod journeys;
mod pipeline;
mod pooled;
mod protocol;
mod records;
mod stats;
mod text;
mod timeline;
mod transport;

/// The Python classes of the plain data, bound once.
struct Classes {
    decoded: Py<PyAny>,
    finding: Py<PyAny>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// The Python class a protocol's frames' body is made of, by the protocol's name (`bind_body`); a protocol
/// without one has its body as a dict.
static BODY_CLASSES: Mutex<Vec<(&'static str, Py<PyAny>)>> = Mutex::new(Vec::new());

/// The field of a body's class that holds its findings (`BodyField::Findings`).
const FINDINGS_FIELD: &str = "findings";

fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get(py).ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("dissector._core.bind() was not called"))
}

fn body_class<'py>(py: Python<'py>, protocol: &str) -> Option<Bound<'py, PyAny>> {
    let classes = BODY_CLASSES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    classes.iter().find(|(name, _)| *name == protocol).map(|(_, class)| class.bind(py).clone())
}

/// The protocol compiled in under `name`, or Python's ValueError.
fn protocol_named(name: &str) -> PyResult<&'static dyn Protocol> {
    protocols::by_name(name)
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("the core has no protocol named {name:?}")))
}

impl Classes {
    fn finding<'py>(&self, py: Python<'py>, finding: &Finding) -> PyResult<Bound<'py, PyAny>> {
        self.finding.bind(py).call1((finding.id.to_py(py), map_to_py(py, &finding.params)?))
    }

    fn findings<'py>(&self, py: Python<'py>, findings: &[Finding]) -> PyResult<Vec<Bound<'py, PyAny>>> {
        findings.iter().map(|f| self.finding(py, f)).collect()
    }

    /// The body as Python holds it — an object of its protocol's bound class (fields by position, in the
    /// protocol's `body_fields` order, checked by `bind_body`), else a dict — and its findings' objects
    /// (which the frame's findings list holds too).
    fn body<'py>(
        &self,
        py: Python<'py>,
        body: &dyn DecodedBody,
    ) -> PyResult<(Bound<'py, PyAny>, Vec<Bound<'py, PyAny>>)> {
        let (mut fields, mut findings, mut failed) = (Vec::with_capacity(16), Vec::new(), None);
        body.fields(&mut |name, field| {
            if failed.is_none() {
                match self.field(py, field, &mut findings) {
                    Ok(value) => fields.push((name, value)),
                    Err(error) => failed = Some(error),
                }
            }
        });
        if let Some(error) = failed {
            return Err(error);
        }
        let object = match body_class(py, body.protocol()) {
            Some(class) => class.call1(PyTuple::new(py, fields.into_iter().map(|(_, value)| value))?)?,
            None => {
                let dict = PyDict::new(py);
                for (name, value) in fields {
                    dict.set_item(pyo3::types::PyString::intern(py, name), value)?;
                }
                dict.into_any()
            }
        };
        Ok((object, findings))
    }

    /// One field of a body as Python holds it; its findings' objects also kept in `findings`.
    fn field<'py>(
        &self,
        py: Python<'py>,
        field: BodyField<'_>,
        findings: &mut Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(match field {
            BodyField::Null => py.None().into_bound(py),
            BodyField::Bool(flag) => PyBool::new(py, flag).to_owned().into_any(),
            BodyField::Int(number) => number.into_bound_py_any(py)?,
            BodyField::Name(name) => name.to_py(py).into_any(),
            BodyField::Value(value) => value.to_py(py)?,
            BodyField::Owned(value) => value.to_py(py)?,
            BodyField::Map(map) => map_to_py(py, map)?.into_any(),
            BodyField::List(items) => list_to_py(py, &items)?.into_any(),
            BodyField::Findings(own) => {
                *findings = self.findings(py, own)?;
                PyList::new(py, findings.iter())?.into_any()
            }
        })
    }

    fn decoded<'py>(&self, py: Python<'py>, d: &Decoded) -> PyResult<Bound<'py, PyAny>> {
        let (body, body_findings) = match &d.body {
            Some(body) => {
                let (object, findings) = self.body(py, body.as_ref())?;
                (Some(object), findings)
            }
            None => (None, Vec::new()),
        };
        // the frame's findings end with its body's: the same objects in both lists
        let own = &d.findings[..d.findings.len().saturating_sub(body_findings.len())];
        let mut findings = self.findings(py, own)?;
        findings.extend(body_findings);
        let args = (d.type_name.to_py(py), optional(py, d.command.as_ref())?, d.size, PyList::new(py, findings)?, body);
        self.decoded.bind(py).call1(args)
    }
}

fn optional<'py>(py: Python<'py>, value: Option<&engine::value::Value>) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Some(v) => v.to_py(py),
        None => Ok(py.None().into_bound(py)),
    }
}

/// A frame's body Python holds made back into its protocol's: an object of a class a protocol bound
/// (`bind_body`), or a dict of `protocol`'s (the frame's). None: neither, or a protocol the core does not
/// have (a protocol declared in Python gives its body's record keys itself).
pub(crate) fn body_from_py(protocol: &str, body: &Bound<'_, PyAny>) -> PyResult<Option<Body>> {
    if body.is_none() {
        return Ok(None);
    }
    let py = body.py();
    let bound = {
        let classes = BODY_CLASSES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        classes.iter().find(|(_, class)| body.is_instance(class.bind(py)).unwrap_or(false)).map(|(name, _)| *name)
    };
    if let Some(name) = bound {
        let Some(protocol) = protocols::by_name(name) else { return Ok(None) };
        let (mut fields, mut findings) = (Map::new(), Vec::new());
        for &field in protocol.body_fields() {
            let value = body.getattr(field)?;
            if field == FINDINGS_FIELD {
                findings = crate::records::findings_from_py(&value)?;
            } else {
                fields.push((Text::Owned(field.to_owned()), value_from_py(&value)?));
            }
        }
        return Ok(protocol.body_from_fields(fields, findings));
    }
    match (body.cast::<PyDict>(), protocols::by_name(protocol)) {
        (Ok(dict), Some(protocol)) => Ok(protocol.body_from_fields(crate::convert::map_from_py(dict)?, Vec::new())),
        _ => Ok(None),
    }
}

/// The fields of the Python classes the core builds positionally, in order.
const DECODED_FIELDS: [&str; 5] = ["type", "command", "size", "findings", "body"];

pub(crate) fn check_fields(cls: &Bound<'_, PyAny>, expected: &[&str]) -> PyResult<()> {
    let fields: Vec<String> = cls
        .getattr("__dataclass_fields__")?
        .call_method0("keys")?
        .try_iter()?
        .map(|k| k.and_then(|k| k.extract::<String>()))
        .collect::<PyResult<_>>()?;
    if fields != expected {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "{} has fields {fields:?}; the core builds it with {expected:?}",
            cls.getattr("__name__")?
        )));
    }
    Ok(())
}

/// Give the core the classes of the plain data it returns: Decoded and Finding (checked: the core fills their
/// fields by position).
#[pyfunction]
fn bind(py: Python<'_>, decoded: Py<PyAny>, finding: Py<PyAny>) -> PyResult<()> {
    check_fields(decoded.bind(py), &DECODED_FIELDS)?;
    let _ = CLASSES.get_or_init(py, || Classes { decoded, finding });
    Ok(())
}

/// Give the core the class of a protocol's frames' body (checked: its fields are the protocol's
/// `body_fields`, in order, which the core fills by position).
#[pyfunction]
fn bind_body(py: Python<'_>, protocol: &str, cls: Py<PyAny>) -> PyResult<()> {
    let protocol = protocol_named(protocol)?;
    check_fields(cls.bind(py), protocol.body_fields())?;
    let mut classes = BODY_CLASSES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    classes.retain(|(name, _)| *name != protocol.name());
    classes.push((protocol.name(), cls));
    Ok(())
}

/// A frame shorter than this decodes in about a microsecond: releasing the GIL and taking it back would cost
/// a tenth of that, and no other thread would get far meanwhile.
pub(crate) const RELEASE_GIL_FROM: usize = 4096;

/// Decode one frame of `protocol` in Rust, the GIL released when that is worth it.
pub(crate) fn decode_detached(
    py: Python<'_>,
    protocol: &dyn Protocol,
    frame: &[u8],
    missing: usize,
    max_decompressed: u64,
    depth: Depth,
) -> Decoded {
    let caps = engine::protocols::DecodeCaps::decompressing(max_decompressed);
    let decode = || protocol.decode(frame, missing, caps, depth);
    if frame.len() < RELEASE_GIL_FROM {
        decode()
    } else {
        py.detach(decode)
    }
}

/// The Python ``Decoded`` of a decoded frame: the one conversion of the decoder's data.
pub(crate) fn decoded_to_py<'py>(py: Python<'py>, decoded: &Decoded) -> PyResult<Bound<'py, PyAny>> {
    classes(py)?.decoded(py, decoded)
}

/// Decode one frame of the protocol named ``protocol`` (``missing`` bytes lost at its end); returns a
/// ``Decoded``.
#[pyfunction]
#[pyo3(signature = (protocol, frame, missing=0, max_decompressed=64 * 1024 * 1024, brief=false))]
fn decode<'py>(
    py: Python<'py>,
    protocol: &str,
    frame: &[u8],
    missing: usize,
    max_decompressed: u64,
    brief: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let (classes, protocol) = (classes(py)?, protocol_named(protocol)?);
    classes.decoded(py, &decode_detached(py, protocol, frame, missing, max_decompressed, Depth::brief(brief)))
}

/// The named tables of the protocol named ``protocol`` (Pulsar's command types, TubeMQ's methods): a dict of
/// each table's name to its rows, tuples of plain values.
#[pyfunction]
fn tables<'py>(py: Python<'py>, protocol: &str) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (name, rows) in protocol_named(protocol)?.tables() {
        let rows =
            rows.iter().map(|row| PyTuple::new(py, row.iter().map(|v| v.to_py(py)).collect::<PyResult<Vec<_>>>()?));
        out.set_item(name, PyList::new(py, rows.collect::<PyResult<Vec<_>>>()?)?)?;
    }
    Ok(out)
}

/// Test support: a plain Python value written by the core's JSON writer (to compare with
/// ``dissector.output.jsonl.dumps``).
#[pyfunction]
fn _json_dumps<'py>(py: Python<'py>, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    value_from_py(&value)?.write_json(&mut out);
    Ok(PyBytes::new(py, &out))
}

/// Benchmark support: decode every frame and write it as JSON (``Decoded::write_json``, one line each) in
/// Rust alone, without the GIL and without a Python object per frame. Returns the bytes of JSON written and
/// the seconds it took.
#[pyfunction]
#[pyo3(signature = (protocol, frames, max_decompressed=64 * 1024 * 1024, brief=false))]
fn _decode_to_json(
    py: Python<'_>,
    protocol: &str,
    frames: Vec<Bound<'_, PyBytes>>,
    max_decompressed: u64,
    brief: bool,
) -> PyResult<(usize, f64)> {
    let protocol = protocol_named(protocol)?;
    let caps = engine::protocols::DecodeCaps::decompressing(max_decompressed);
    let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
    Ok(py.detach(|| {
        let start = std::time::Instant::now();
        let (mut out, mut written) = (Vec::with_capacity(1 << 20), 0);
        for frame in frames {
            protocol.decode(frame, 0, caps, Depth::brief(brief)).write_json(&mut out, brief);
            out.push(b'\n');
            written += out.len();
            out.clear(); // the native output would write them to a file here
        }
        (written, start.elapsed().as_secs_f64())
    }))
}

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::tune_allocator();
    m.add_function(wrap_pyfunction!(bind, m)?)?;
    m.add_function(wrap_pyfunction!(bind_body, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(crate::records::finding_text, m)?)?;
    m.add_function(wrap_pyfunction!(tables, m)?)?;
    m.add_function(wrap_pyfunction!(_json_dumps, m)?)?;
    m.add_function(wrap_pyfunction!(crate::arrow::record_tables, m)?)?;
    m.add_function(wrap_pyfunction!(crate::arrow::merge_summaries, m)?)?;
    m.add_class::<crate::arrow::RecordBatches>()?;
    m.add_function(wrap_pyfunction!(_decode_to_json, m)?)?;
    crate::capture::register(m)?;
    crate::transport::register(m)?;
    crate::analysis::register(m)?;
    crate::stats::register(m)?;
    crate::text::register(m)?;
    crate::journeys::register(m)?;
    m.add_class::<crate::timeline::TimelineFormat>()?;
    Ok(())
}

/// The core allocates and frees many small values per frame (commands, messages, records): mimalloc's
/// per-thread free lists make that a fraction of glibc malloc's cost (the Python objects keep Python's).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc commits its arenas eagerly by default: over a long capture the freed parts of an arena stay
/// resident, and peak RSS grew with the capture's length (stats: 123 → 154 → 186 MiB at 0.5, 1 and 2 GB).
/// Committing on demand keeps it flat at no measured cost. A user's MIMALLOC_ARENA_EAGER_COMMIT still wins.
pub(crate) fn tune_allocator() {
    #[cfg(feature = "mimalloc")]
    {
        extern "C" {
            fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
        }
        // mimalloc v3's mi_option_arena_eager_commit (include/mimalloc.h: the fifth option); the crate
        // pins mimalloc v3 (Cargo.lock: libmimalloc-sys 0.1.49)
        const MI_OPTION_ARENA_EAGER_COMMIT: std::ffi::c_int = 4;
        if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_none() {
            // SAFETY: setting an option is thread-safe in mimalloc and takes plain integers
            unsafe { mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
        }
    }
}
