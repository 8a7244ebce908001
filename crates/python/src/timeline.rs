//! The timeline's line maker for Python (`dissector/output/timeline.py`), and the `--plain` lines the
//! binding's dissector writes with it; the lines themselves are the engine's (`engine::timeline`).

use engine::model::{Decoded, Finding};
use engine::text::BytesKind;
use engine::timeline::{FieldPlan, FindingText, Format, FrameAt, Line, LineFacts, ProtocolPlan, ROLE_NAMES};
use engine::value::{Map, Text};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::pipeline::FramePlace;

/// The timeline's line maker for Python (`dissector/output/timeline.py: TimelineRenderer`), also handed to
/// the core's `AnalysedDissector` to write `--plain` lines itself, so both share the plans and the origin.
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

impl TimelineFormat {
    /// Ask Python for the plan of a protocol met for the first time.
    pub fn know_protocol(&mut self, py: Python<'_>, name: &str) -> PyResult<()> {
        if self.format.knows(name) {
            return Ok(());
        }
        let plan = self.plan_of.bind(py).call1((name,))?;
        let plan = if plan.is_none() {
            None
        } else {
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
            Some(plan)
        };
        self.format.learn(name, plan);
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

/// `--plain` lines written by the core (`AnalysedDissector`'s timeline mode) from its frames, in place of
/// Python frames and records: Python makes only the texts of their findings.
pub struct TimelineLines {
    format: Py<TimelineFormat>,
    /// The texts of findings (`problems.severity_and_message`, each asked once; a template in pieces
    /// rendered here).
    texts: crate::records::FindingTexts,
    pub lines: Vec<u8>,
    /// Lines written, and their problems (what --strict counts).
    pub frames: u64,
    pub problems: u64,
    findings: Vec<FindingText>,
    line: Line,
}

impl TimelineLines {
    pub fn new(format: Py<TimelineFormat>, texts: Py<PyAny>) -> Self {
        TimelineLines {
            format,
            texts: crate::records::FindingTexts::new(texts),
            lines: Vec::with_capacity(1 << 16),
            frames: 0,
            problems: 0,
            findings: Vec::new(),
            line: Line::default(),
        }
    }

    /// Write the line of a frame the core decoded; false when it is Python's to make (its bytes are kept, or
    /// a note would replace one of its record's keys).
    pub fn write(
        &mut self,
        py: Python<'_>,
        place: &FramePlace,
        pdu: &Decoded,
        findings: &[Finding],
        notes: &Map,
    ) -> PyResult<bool> {
        if place.data.is_some() || engine::records::notes_replace_a_key(notes) {
            return Ok(false);
        }
        self.findings.clear();
        for finding in pdu.findings.iter().chain(findings) {
            let expert = self.texts.expert(py, finding)?;
            self.findings.push(FindingText {
                note: expert.severity.as_str() == "note",
                message: expert.message.to_owned_text().map_err(crate::records::py_error)?,
            });
        }
        let mut format = self.format.borrow_mut(py);
        format.know_protocol(py, place.protocol.bind(py).to_str()?)?;
        let at = FrameAt {
            index: place.index,
            time: place.time,
            packet: place.packet,
            first_packet: place.first_packet,
            conn: place.conn,
            protocol: place.protocol.bind(py).to_str()?,
            src: place.src.bind(py).to_str()?,
            dst: place.dst.bind(py).to_str()?,
            direction: place.direction.bind(py).to_str()?,
        };
        let facts = LineFacts::of_frame(at, pdu, notes, &self.findings);
        self.line.clear();
        format.format.make_line(&facts, &mut self.line);
        self.lines.extend_from_slice(self.line.text.as_bytes());
        self.lines.push(b'\n');
        self.frames += 1;
        self.problems += self.findings.iter().filter(|f| !f.note).count() as u64;
        Ok(true)
    }

    /// A Python item (an event, or a frame left to Python) goes out: the first item's time is the origin.
    pub fn saw(&mut self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut format = self.format.borrow_mut(py);
        if format.format.origin.is_some() {
            return Ok(());
        }
        let time = match item.getattr("time") {
            Ok(time) => time,
            Err(_) => item.getattr("frame")?.getattr("time")?,
        };
        format.format.origin = time.extract().ok();
        Ok(())
    }

    /// The lines written so far, as one bytes object.
    pub fn take<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        if self.lines.is_empty() {
            return None;
        }
        let bytes = PyBytes::new(py, &self.lines);
        self.lines.clear();
        Some(bytes)
    }
}
