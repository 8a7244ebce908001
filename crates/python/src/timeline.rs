//! The timeline's line maker for Python (`dissector/output/timeline.py`), and the protocols' plans Python
//! declares, for the engine's `--plain` lines (`engine::sinks::timeline`, which `AnalysedDissector` feeds); the
//! lines themselves are the engine's (`engine::timeline`).

use engine::records::{SinkError, SinkResult};
use engine::sinks::timeline::LinePlans;
use engine::text::BytesKind;
use engine::timeline::{FieldPlan, Format, Line, LineFacts, ProtocolPlan, ROLE_NAMES};
use engine::value::{Map, Text};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

/// The timeline's line maker for Python (`dissector/output/timeline.py: TimelineRenderer`), also handed to
/// the core's `AnalysedDissector`, whose engine sink writes `--plain` lines with its format: both share the
/// plans and the origin.
#[pyclass(unsendable, module = "dissector._core")]
pub struct TimelineFormat {
    pub format: Format,
    /// `timeline.timeline_plan`: a protocol's plan by name, asked once per protocol.
    plan_of: Py<PyAny>,
    line: Line,
}

/// The record keys a line reads (the others, e.g. `frame_bytes` or `details`, are not converted).
const LINE_KEYS: [&str; 32] = [
    "index",
    "protocol",
    "time",
    "conn",
    "src",
    "dst",
    "direction",
    "packet",
    "first_packet",
    "type",
    "command",
    "problems",
    "expert",
    "message",
    "producer",
    "consumer",
    "answers",
    "latency_ms",
    "acks",
    "messages",
    "messages_summary",
    "metadata",
    "checksum",
    "encrypted",
    "marker",
    "redelivers",
    "redelivers_count",
    "redelivery_requested_by",
    "delivery",
    "after_seek",
    "reassembled",
    "serial",
];

/// (label, keys, how to show, bytes kind) and (type, role, fields) as `timeline.timeline_plan` gives them.
type PyFieldPlan = (String, Vec<String>, String, Option<String>);
type PyTypePlan = (String, String, Option<Vec<PyFieldPlan>>);

/// A protocol's plan as `timeline.timeline_plan` (`plan_of`) declares it, or None: no such protocol.
fn plan_from_python(py: Python<'_>, plan_of: &Py<PyAny>, name: &str) -> PyResult<Option<ProtocolPlan>> {
    let plan = plan_of.bind(py).call1((name,))?;
    if plan.is_none() {
        return Ok(None);
    }
    let (pieces, types): (Option<String>, Vec<PyTypePlan>) = plan.extract()?;
    let mut plan = ProtocolPlan::new(pieces.as_deref()).map_err(PyValueError::new_err)?;
    for (type_name, role, fields) in types {
        let fields = fields
            .map(|fields| {
                fields
                    .into_iter()
                    .map(|(label, keys, show, kind)| FieldPlan::new(label, keys, &show, kind.as_deref()))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()
            .map_err(PyValueError::new_err)?;
        plan.add_type(type_name, &role, fields).map_err(PyValueError::new_err)?;
    }
    Ok(Some(plan))
}

/// The protocols' plans Python declares (`timeline.timeline_plan`), for the engine's timeline sink.
pub struct PythonPlans {
    plan_of: Py<PyAny>,
}

impl LinePlans for PythonPlans {
    /// (The caller holds the interpreter: attaching to it again costs a thread-local check.)
    fn plan(&mut self, protocol: &str) -> SinkResult<Option<ProtocolPlan>> {
        Python::attach(|py| plan_from_python(py, &self.plan_of, protocol)).map_err(|e| SinkError::Front(Box::new(e)))
    }
}

impl TimelineFormat {
    /// The plans this format asks Python for, for the engine's sink that makes lines with it.
    pub fn plans(&self, py: Python<'_>) -> PythonPlans {
        PythonPlans { plan_of: self.plan_of.clone_ref(py) }
    }

    /// Ask Python for the plan of a protocol met for the first time.
    fn know_protocol(&mut self, py: Python<'_>, name: &str) -> PyResult<()> {
        if !self.format.knows(name) {
            let plan = plan_from_python(py, &self.plan_of, name)?;
            self.format.learn(name, plan);
        }
        Ok(())
    }

    fn record_line(&mut self, py: Python<'_>, rec: &Bound<'_, PyDict>) -> PyResult<()> {
        let mut map = Map::with_capacity(16);
        for key in LINE_KEYS {
            if let Some(value) = rec.get_item(key)? {
                map.push((Text::Owned(key.to_owned()), crate::text::value_of(&value)?));
            }
        }
        let facts = LineFacts::of_record(&map);
        self.know_protocol(py, facts.protocol)?;
        self.line.clear();
        self.format.make_line(&facts, &mut self.line);
        Ok(())
    }
}

#[pymethods]
impl TimelineFormat {
    /// `plan_of(protocol)` → None (no such protocol) or (pieces, [(type, role, [(label, keys, show, bytes
    /// kind)] or None)]); `labels`: the labels of fields shown by default; `bytes_kinds`: how the bytes
    /// fields among them are shown; `previews`: the messages' payloads under the line (`--payload`).
    #[new]
    #[pyo3(signature = (plan_of, labels, bytes_kinds, absolute_time=false, previews=false))]
    fn new(
        plan_of: Py<PyAny>,
        labels: std::collections::HashMap<String, String>,
        bytes_kinds: std::collections::HashMap<String, String>,
        absolute_time: bool,
        previews: bool,
    ) -> Self {
        TimelineFormat {
            format: Format::new(
                labels.into_iter().collect(),
                bytes_kinds.into_iter().map(|(k, v)| (k, BytesKind::from_name(&v))).collect(),
                absolute_time,
                previews,
            ),
            plan_of,
            line: Line::default(),
        }
    }

    /// The roles of pieces, in the order of their numbers.
    #[staticmethod]
    fn roles() -> Vec<&'static str> {
        ROLE_NAMES.to_vec()
    }

    #[getter]
    fn origin(&self) -> Option<f64> {
        self.format.origin
    }

    #[setter]
    fn set_origin(&mut self, origin: Option<f64>) {
        self.format.origin = origin;
    }

    /// `--absolute-time`: (how many times no UTC date holds were shown as numbers, the first of them).
    #[getter]
    fn not_dates(&self) -> (u64, Option<f64>) {
        self.format.not_dates
    }

    /// The line of a record as [(text, role number)].
    fn pieces<'py>(&mut self, py: Python<'py>, rec: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyList>> {
        self.record_line(py, rec)?;
        let pieces = self.line.pieces().map(|(text, role)| {
            PyTuple::new(py, [PyString::new(py, text).into_any(), (role as u8).into_pyobject(py)?.into_any()])
        });
        PyList::new(py, pieces.collect::<PyResult<Vec<_>>>()?)
    }

    /// The line of a record as plain text.
    fn text(&mut self, py: Python<'_>, rec: &Bound<'_, PyDict>) -> PyResult<String> {
        self.record_line(py, rec)?;
        Ok(self.line.text.clone())
    }
}
