//! The Python module `dissector._core`, the only code that names Python: the engine's functions here,
//! its stages' classes in a file each (`capture`, `transport`, `analysis`, `stats`, `timeline`, `records`),
//! conversions of its plain data in `convert`. Decoding needs no Python (the GIL is released around it for frames from 4 KiB); its
//! Rust plain data is then converted in one step into the classes Python bound once (`bind`): `Decoded`,
//! `PayloadSection`, `Finding`. The pipeline uses the same decode and conversion (`decode_detached`,
//! `decoded_to_py`).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use engine::model::{Decoded, Finding};
use engine::protocols::pulsar::core;
use engine::protocols::pulsar::payload::PayloadSection;
use engine::protocols::tubemq::{TubeBody, WholeMessages};
use engine::protocols::Depth;
use engine::value::Value;
use pyo3::IntoPyObjectExt;

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
    section: Py<PyAny>,
    finding: Py<PyAny>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get(py).ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("dissector._core.bind() was not called"))
}

/// A TubeMQ frame's body as Python sees it: a dict (serial, rpc, messages), plain data.
pub(crate) fn tube_to_py<'py>(py: Python<'py>, tube: &TubeBody) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item(pyo3::intern!(py, "serial"), tube.serial)?;
    out.set_item(pyo3::intern!(py, "rpc"), map_to_py(py, &tube.rpc)?)?;
    out.set_item(pyo3::intern!(py, "messages"), list_to_py(py, &tube.messages)?)?;
    if let Some(whole) = &tube.whole {
        let summary = map_to_py(py, whole.summary.as_map().map_or(&Vec::new(), |m| m))?;
        out.set_item(pyo3::intern!(py, "messages_whole"), (summary, whole.checksum))?;
    }
    Ok(out)
}

/// The dict of `tube_to_py` back as the core's.
pub(crate) fn tube_from_py(body: &Bound<'_, PyDict>) -> PyResult<TubeBody> {
    let get = |key: &str| body.get_item(key);
    Ok(TubeBody {
        serial: get("serial")?.map(|s| s.extract()).transpose()?.unwrap_or(0),
        rpc: match get("rpc")? {
            Some(rpc) => crate::convert::map_from_py(&rpc)?,
            None => Vec::new(),
        },
        messages: match get("messages")? {
            Some(messages) => messages.try_iter()?.map(|m| value_from_py(&m?)).collect::<PyResult<_>>()?,
            None => Vec::new(),
        },
        whole: match get("messages_whole")? {
            Some(whole) => {
                let (summary, checksum): (Bound<'_, PyAny>, String) = whole.extract()?;
                let checksum = ["invalid", "valid"].into_iter().find(|v| *v == checksum).unwrap_or("absent");
                Some(Box::new(WholeMessages { summary: value_from_py(&summary)?, checksum }))
            }
            None => None,
        },
    })
}

/// Whether `obj` is a `PayloadSection` (the class bound by `bind`): a protocol declared in Python may give its
/// frames a body of its own.
pub(crate) fn is_payload_section(obj: &Bound<'_, PyAny>) -> bool {
    classes(obj.py()).is_ok_and(|c| obj.is_instance(c.section.bind(obj.py())).unwrap_or(false))
}

fn optional<'py>(py: Python<'py>, value: Option<&Value>) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Some(v) => v.to_py(py),
        None => Ok(py.None().into_bound(py)),
    }
}

impl Classes {
    fn finding<'py>(&self, py: Python<'py>, finding: &Finding) -> PyResult<Bound<'py, PyAny>> {
        self.finding.bind(py).call1((finding.id.to_py(py), map_to_py(py, &finding.params)?))
    }

    fn findings<'py>(&self, py: Python<'py>, findings: &[Finding]) -> PyResult<Vec<Bound<'py, PyAny>>> {
        findings.iter().map(|f| self.finding(py, f)).collect()
    }

    /// The section, and its findings' objects (which the frame's findings list holds too).
    fn section<'py>(
        &self,
        py: Python<'py>,
        s: &PayloadSection,
    ) -> PyResult<(Bound<'py, PyAny>, Vec<Bound<'py, PyAny>>)> {
        let findings = self.findings(py, &s.findings)?;
        let messages = list_to_py(py, &s.messages_split())?;
        // positional, in PayloadSection's field order (checked by `bind`): no keyword dict per frame
        let args = [
            s.checksum.name().to_py(py).to_owned().into_any(),
            s.checksum_wire.into_bound_py_any(py)?,
            s.checksum_computed.into_bound_py_any(py)?,
            optional(py, s.broker_entry_metadata.as_ref())?,
            optional(py, s.metadata.as_ref())?,
            s.metadata_size.into_bound_py_any(py)?,
            s.compression.into_bound_py_any(py)?,
            s.payload_size.into_bound_py_any(py)?,
            s.uncompressed_size.into_bound_py_any(py)?,
            s.encrypted.into_bound_py_any(py)?,
            messages.into_any(),
            optional(py, s.marker.as_ref())?,
            PyList::new(py, &findings)?.into_any(),
            optional(py, s.whole_summary())?,
        ];
        Ok((self.section.bind(py).call1(PyTuple::new(py, args)?)?, findings))
    }

    fn decoded<'py>(&self, py: Python<'py>, d: &Decoded) -> PyResult<Bound<'py, PyAny>> {
        let (body, section_findings) = if let Some(section) = d.payload() {
            let (body, findings) = self.section(py, section)?;
            (Some(body), findings)
        } else if let Some(tube) = d.tube() {
            (Some(tube_to_py(py, tube)?.into_any()), Vec::new())
        } else {
            (None, Vec::new())
        };
        // the frame's findings end with its section's: the same objects in both lists
        debug_assert!(d.payload().is_none_or(|s| d.findings.ends_with(&s.findings)));
        let own = &d.findings[..d.findings.len().saturating_sub(section_findings.len())];
        let mut findings = self.findings(py, own)?;
        findings.extend(section_findings);
        let args = (d.type_name.to_py(py), optional(py, d.command.as_ref())?, d.size, PyList::new(py, findings)?, body);
        self.decoded.bind(py).call1(args)
    }
}

/// The fields of the Python classes the core builds positionally, in order.
const DECODED_FIELDS: [&str; 5] = ["type", "command", "size", "findings", "body"];
const SECTION_FIELDS: [&str; 14] = [
    "checksum",
    "checksum_wire",
    "checksum_computed",
    "broker_entry_metadata",
    "metadata",
    "metadata_size",
    "compression",
    "payload_size",
    "uncompressed_size",
    "encrypted",
    "messages",
    "marker",
    "findings",
    "messages_whole",
];

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

/// Give the core the classes of the plain data it returns: Decoded, PayloadSection and Finding (checked: the
/// core fills their fields by position).
#[pyfunction]
fn bind(py: Python<'_>, decoded: Py<PyAny>, section: Py<PyAny>, finding: Py<PyAny>) -> PyResult<()> {
    check_fields(decoded.bind(py), &DECODED_FIELDS)?;
    check_fields(section.bind(py), &SECTION_FIELDS)?;
    let _ = CLASSES.get_or_init(py, || Classes { decoded, section, finding });
    Ok(())
}

/// A frame shorter than this decodes in about a microsecond: releasing the GIL and taking it back would cost
/// a tenth of that, and no other thread would get far meanwhile.
pub(crate) const RELEASE_GIL_FROM: usize = 4096;

/// Decode one frame in Rust, the GIL released when that is worth it.
pub(crate) fn decode_detached(
    py: Python<'_>,
    frame: &[u8],
    missing: usize,
    max_decompressed: u64,
    depth: Depth,
) -> Decoded {
    let caps = engine::protocols::DecodeCaps::decompressing(max_decompressed);
    let decode = || engine::protocols::pulsar::decode_to(frame, missing, caps, depth);
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

/// Decode one frame (``missing`` bytes lost at its end); returns a ``Decoded``.
#[pyfunction]
#[pyo3(signature = (frame, missing=0, max_decompressed=64 * 1024 * 1024, brief=false))]
fn decode_frame<'py>(
    py: Python<'py>,
    frame: &[u8],
    missing: usize,
    max_decompressed: u64,
    brief: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let classes = classes(py)?;
    classes.decoded(py, &decode_detached(py, frame, missing, max_decompressed, Depth::brief(brief)))
}

/// The BaseCommand type names by number, as the schema declares them.
#[pyfunction]
fn command_types(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (n, name) in core().command_types.values() {
        out.set_item(n, name.to_py(py))?;
    }
    Ok(out)
}

/// (id, constant, server role, request message, response message) of a TubeMQ method.
type MethodRow = (i32, &'static str, &'static str, Option<&'static str>, Option<&'static str>);

/// TubeMQ's method table (crates/engine/src/protocols/tubemq/mod.rs, the one place it is written): (id, constant, server role,
/// request message, response message), None for a method upstream declares but never encodes.
#[pyfunction]
fn tubemq_methods() -> Vec<MethodRow> {
    engine::protocols::tubemq::METHODS
        .iter()
        .map(|m| (m.id, m.constant, m.server_role(), m.request, m.response))
        .collect()
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
#[pyo3(signature = (frames, max_decompressed=64 * 1024 * 1024, brief=false))]
fn _decode_to_json(
    py: Python<'_>,
    frames: Vec<Bound<'_, PyBytes>>,
    max_decompressed: u64,
    brief: bool,
) -> (usize, f64) {
    let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
    py.detach(|| {
        let start = std::time::Instant::now();
        let (mut out, mut written) = (Vec::with_capacity(1 << 20), 0);
        for frame in frames {
            engine::protocols::pulsar::decode(frame, 0, max_decompressed, brief).write_json(&mut out, brief);
            out.push(b'\n');
            written += out.len();
            out.clear(); // the native output would write them to a file here
        }
        (written, start.elapsed().as_secs_f64())
    })
}

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::tune_allocator();
    m.add_function(wrap_pyfunction!(bind, m)?)?;
    m.add_function(wrap_pyfunction!(decode_frame, m)?)?;
    m.add_function(wrap_pyfunction!(crate::records::finding_text, m)?)?;
    m.add_function(wrap_pyfunction!(command_types, m)?)?;
    m.add_function(wrap_pyfunction!(tubemq_methods, m)?)?;
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
