//! What only Python has, for the engine's records: the dicts every renderer, filter and `check` reads
//! ([`DictSink`]), the texts of findings made by Python's templates ([`FindingTexts`], `dissector/problems.py`),
//! frames Python holds read into the engine's record input, and `FrameRecords` for Python callers.

use std::hash::{BuildHasher, Hasher};
use std::marker::PhantomData;

use engine::analysis::bounded::FastMap;
use engine::analysis::intern as intern_name;
use engine::analysis::Frame;
use engine::frame_record::{build_record, RecordInput};
use engine::model::{Decoded, Finding};
use engine::name;
use engine::records::{
    content_hash, Atom, Expert, Front, JsonSink, Key, Message, NoFront, RecordSink, RecordStyle, SinkError, SinkResult,
};
use engine::value::{Map, Name, Text, Value};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::convert::{value_from_py, StrToPy, ValueToPy};

/// Python's objects made beforehand that a record carries: the route's and the findings' `str`, the
/// frame's `bytes`.
pub struct PyFront<'py>(PhantomData<&'py ()>);

impl<'py> Front for PyFront<'py> {
    type Str = Bound<'py, PyString>;
    type Bytes = Bound<'py, PyBytes>;
    fn text(s: &Self::Str) -> SinkResult<&str> {
        s.to_str().map_err(sink_error)
    }
    fn bytes(b: &Self::Bytes) -> &[u8] {
        b.as_bytes()
    }
}

/// A Python exception as the engine's sinks carry it.
pub fn sink_error(error: PyErr) -> SinkError {
    SinkError::Front(Box::new(error))
}

/// A sink's error as Python's: the exception it carried, or a RuntimeError.
pub fn py_error(error: SinkError) -> PyErr {
    match error {
        SinkError::Front(error) => match error.downcast::<PyErr>() {
            Ok(error) => *error,
            Err(other) => pyo3::exceptions::PyRuntimeError::new_err(other.to_string()),
        },
        SinkError::Misplaced(what) | SinkError::Stopped(what) => pyo3::exceptions::PyRuntimeError::new_err(what),
    }
}

/// The dicts of the producers and consumers notes name, by content: most frames name one, and one dict
/// serves all of their records (as the notes it replaces are never edited).
#[derive(Default)]
pub struct ActorDicts {
    dicts: FastMap<u64, (Value, Py<PyDict>)>,
}

const ACTOR_DICTS: usize = 4096; // actor dicts kept at most (then made afresh)

impl ActorDicts {
    /// A note's value as Python: the shared dict of an actor, or a new object.
    pub fn value<'py>(&mut self, py: Python<'py>, key: &Text, value: &Value) -> PyResult<Bound<'py, PyAny>> {
        let Value::Map(entries) = value else { return value.to_py(py) };
        if !matches!(key.as_str(), "producer" | "consumer") {
            return value.to_py(py);
        }
        let mut hasher = self.dicts.hasher().build_hasher();
        content_hash(value, &mut hasher);
        let hash = hasher.finish();
        if let Some((known, dict)) = self.dicts.get(&hash) {
            if known == value {
                return Ok(dict.bind(py).clone().into_any());
            }
        }
        let dict = crate::convert::map_to_py(py, entries)?;
        if self.dicts.len() >= ACTOR_DICTS {
            self.dicts.clear();
        }
        self.dicts.insert(hash, (value.clone(), dict.clone().unbind()));
        Ok(dict.into_any())
    }
}

enum Container<'py> {
    Dict(Bound<'py, PyDict>),
    List(Bound<'py, PyList>),
}

/// Python dicts and lists: the values the dicts of `output/records.py` held, of the same types.
pub struct DictSink<'py, 'a> {
    py: Python<'py>,
    open: Vec<Container<'py>>,
    record: Option<Bound<'py, PyDict>>,
    actors: &'a mut ActorDicts,
}

impl<'py, 'a> DictSink<'py, 'a> {
    pub fn new(py: Python<'py>, actors: &'a mut ActorDicts) -> DictSink<'py, 'a> {
        DictSink { py, open: Vec::with_capacity(4), record: None, actors }
    }

    /// The record, once built.
    pub fn into_record(self) -> Option<Bound<'py, PyDict>> {
        self.record
    }

    fn insert(&mut self, key: Key<'_>, object: Bound<'py, PyAny>) -> PyResult<()> {
        match (self.open.last(), key) {
            (Some(Container::Dict(dict)), Key::Name(name)) => dict.set_item(name.to_py(self.py), object),
            (Some(Container::Dict(dict)), Key::Text(text)) => match text {
                Text::Name(name) => dict.set_item(name.to_py(self.py), object),
                Text::Owned(text) => dict.set_item(PyString::new(self.py, text), object),
            },
            (Some(Container::List(list)), Key::Item) => list.append(object),
            (None, Key::Item) => {
                self.record = Some(object.cast_into::<PyDict>()?);
                Ok(())
            }
            _ => Err(pyo3::exceptions::PyRuntimeError::new_err("a record value in the wrong place")),
        }
    }
}

impl<'py> RecordSink<PyFront<'py>> for DictSink<'py, '_> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, PyFront<'py>>) -> SinkResult<()> {
        self.put_py(key, atom).map_err(sink_error)
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> SinkResult<()> {
        self.open_py(key, list).map_err(sink_error)
    }

    fn close(&mut self) -> SinkResult<()> {
        self.open.pop();
        Ok(())
    }

    fn note(&mut self, key: &Text, value: &Value) -> SinkResult<()> {
        let object = self.actors.value(self.py, key, value).map_err(sink_error)?;
        self.insert(Key::Text(key), object).map_err(sink_error)
    }
}

impl<'py> DictSink<'py, '_> {
    fn put_py(&mut self, key: Key<'_>, atom: Atom<'_, PyFront<'py>>) -> PyResult<()> {
        let py = self.py;
        let object = match atom {
            Atom::Value(value) => value.to_py(py)?,
            Atom::Values(items) => crate::convert::list_to_py(py, items)?.into_any(),
            Atom::Text(text) => text.to_py(py).into_any(),
            Atom::Name(name) => name.to_py(py).to_owned().into_any(),
            Atom::Str(_, Some(object)) => object.clone().into_any(),
            Atom::Str(text, None) | Atom::Plain(text) => PyString::new(py, text).into_any(),
            Atom::Bytes(bytes) => bytes.clone().into_any(),
            Atom::EmptyMap => PyDict::new(py).into_any(),
        };
        self.insert(key, object)
    }

    fn open_py(&mut self, key: Key<'_>, list: bool) -> PyResult<()> {
        let container =
            if list { Container::List(PyList::empty(self.py)) } else { Container::Dict(PyDict::new(self.py)) };
        let object = match &container {
            Container::Dict(dict) => dict.clone().into_any(),
            Container::List(list) => list.clone().into_any(),
        };
        self.insert(key, object)?;
        self.open.push(container);
        Ok(())
    }
}

const FINDING_TEXTS: usize = 4096; // texts kept at most (then asked for afresh)

fn severity_name(severity: &str) -> &'static Name {
    match severity {
        "error" => name!("error"),
        "warning" => name!("warning"),
        "note" => name!("note"),
        other => intern_name(other),
    }
}

/// (severity, text) of the finding `pid` with `params` as the core's record writer makes it, for the tests
/// that hold the core's rendering of templates in pieces to Python's.
#[pyfunction]
pub fn finding_text(
    py: Python<'_>,
    severity_and_message: Py<PyAny>,
    pid: &str,
    params: Bound<'_, pyo3::types::PyDict>,
) -> PyResult<(String, String)> {
    let finding = Finding { id: intern_name(pid), params: crate::convert::map_from_py(&params)? };
    let expert = FindingTexts::new(severity_and_message).expert(py, &finding)?;
    Ok((expert.severity.as_str().to_owned(), expert.message.to_owned_text().map_err(py_error)?))
}

/// The severity and text of findings, from `problems.severity_and_message`; the same finding (id and
/// parameters) is asked for once. Also the engine's `FindingTexts`, for its sinks: an error of Python's there
/// is kept for the caller ([`Self::take_error`]).
pub struct FindingTexts {
    severity_and_message: Py<PyAny>,
    /// The first error met while the engine's sinks asked for a text, until the caller takes it.
    error: Option<PyErr>,
    known: FastMap<u64, (Finding, &'static Name, Py<PyString>)>,
    /// Set for records only counted (the statistics): the severity alone, asked once per id, and an empty
    /// text. A finding's text is mostly unique (a message id in it), so asking Python costs a call each.
    severity_only: Option<FastMap<&'static str, &'static Name>>,
    /// Per id, its severity and template when the template is in pieces the core renders itself
    /// (`problems.Pieces`, asked once per id through `severity_and_message.pieces`), else None.
    pieces: FastMap<&'static str, Option<(&'static Name, engine::pieces::Pieces)>>,
}

impl FindingTexts {
    pub fn new(severity_and_message: Py<PyAny>) -> FindingTexts {
        FindingTexts {
            severity_and_message,
            error: None,
            known: FastMap::default(),
            severity_only: None,
            pieces: FastMap::default(),
        }
    }

    /// The finding's severity and text made here from its template's pieces, if it has such a template and
    /// its parameters are ones the core writes as Python does.
    fn rendered(&mut self, py: Python<'_>, finding: &Finding) -> PyResult<Option<(&'static Name, String)>> {
        let id = finding.id.as_str();
        if !self.pieces.contains_key(id) {
            let source = self.severity_and_message.bind(py);
            let declared = match source.getattr(pyo3::intern!(py, "pieces")) {
                Ok(pieces) => pieces.call1((id,))?.extract::<Option<(String, Vec<(String, String, String)>)>>()?,
                Err(_) => None, // a plain function (tests, older callers): Python makes every text
            };
            let read = declared.and_then(|(severity, pieces)| {
                Some((severity_name(&severity), engine::pieces::Pieces::read(&pieces)?))
            });
            self.pieces.insert(finding.id.as_str(), read);
        }
        Ok(match &self.pieces[id] {
            Some((severity, pieces)) => pieces.render(&finding.params).map(|text| (*severity, text)),
            None => None,
        })
    }

    /// Texts for records that are counted, never shown: each finding's severity, its text left empty.
    pub fn severity_only(severity_and_message: Py<PyAny>) -> FindingTexts {
        FindingTexts { severity_only: Some(FastMap::default()), ..FindingTexts::new(severity_and_message) }
    }

    pub fn expert<'py>(&mut self, py: Python<'py>, finding: &Finding) -> PyResult<Expert<PyFront<'py>>> {
        if let Some(severities) = &self.severity_only {
            if let Some(severity) = severities.get(finding.id.as_str()) {
                return Ok(Expert { id: finding.id, severity, message: Message::Owned(String::new()) });
            }
            let Expert { severity, .. } = self.ask(py, finding)?;
            self.severity_only.as_mut().expect("checked above").insert(finding.id.as_str(), severity);
            return Ok(Expert { id: finding.id, severity, message: Message::Owned(String::new()) });
        }
        self.ask(py, finding)
    }

    fn ask<'py>(&mut self, py: Python<'py>, finding: &Finding) -> PyResult<Expert<PyFront<'py>>> {
        if let Some((severity, text)) = self.rendered(py, finding)? {
            return Ok(Expert { id: finding.id, severity, message: Message::Owned(text) });
        }
        let mut hasher = self.known.hasher().build_hasher();
        hasher.write(finding.id.as_str().as_bytes());
        finding.params.iter().for_each(|(key, value)| {
            hasher.write(key.as_str().as_bytes());
            content_hash(value, &mut hasher);
        });
        let hash = hasher.finish();
        if let Some((known, severity, message)) = self.known.get(&hash) {
            if known == finding {
                return Ok(Expert { id: finding.id, severity, message: Message::Front(message.bind(py).clone()) });
            }
        }
        let params = crate::convert::map_to_py(py, &finding.params)?;
        let texts = self.severity_and_message.bind(py).call1((finding.id.to_py(py), params))?;
        let (severity, message): (Bound<'py, PyString>, Bound<'py, PyString>) = texts.extract()?;
        let severity = severity_name(severity.to_str()?);
        if self.known.len() >= FINDING_TEXTS {
            self.known.clear();
        }
        self.known.insert(hash, (finding.clone(), severity, message.clone().unbind()));
        Ok(Expert { id: finding.id, severity, message: Message::Front(message) })
    }
}

impl FindingTexts {
    /// The error met while the engine's sinks asked for a text, if any (a record made then has an empty text).
    pub fn take_error(&mut self) -> PyResult<()> {
        match self.error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl engine::engine::FindingTexts for FindingTexts {
    /// (The caller holds the interpreter: attaching to it again costs a thread-local check.)
    fn expert(&mut self, finding: &Finding) -> Expert<NoFront> {
        Python::attach(|py| {
            let message = match self.expert(py, finding) {
                Ok(Expert { severity, message: Message::Owned(text), .. }) => Ok((severity, text)),
                Ok(Expert { severity, message: Message::Front(text), .. }) => {
                    text.to_str().map(|text| (severity, text.to_owned()))
                }
                Err(error) => Err(error),
            };
            match message {
                Ok((severity, text)) => Expert { id: finding.id, severity, message: Message::Owned(text) },
                Err(error) => {
                    self.error.get_or_insert(error);
                    Expert { id: finding.id, severity: name!("error"), message: Message::Owned(String::new()) }
                }
            }
        })
    }
}

// ------------------------------------------------------------------------- frames Python holds

/// A frame held as Python objects (a protocol declared in Python; an `Annotated` given back), read into the
/// Rust data the record is built from.
pub struct PyFrameData<'py> {
    pub index: u64,
    pub conn: u64,
    pub route: [Bound<'py, PyString>; 4],
    pub time: f64,
    pub packet: u64,
    pub first_packet: i64,
    pub data: Option<Bound<'py, PyBytes>>,
    pub pdu: Decoded,
    /// Its protocol's `record_fields`, for a body the core does not know.
    pub protocol_keys: Option<Map>,
}

impl<'py> PyFrameData<'py> {
    /// `frame`: a `model.Frame`; `protocol_spec`: the protocol registry's `get`.
    pub fn read(
        frame: &Bound<'py, PyAny>,
        protocol_spec: &Bound<'py, PyAny>,
        style: RecordStyle,
    ) -> PyResult<PyFrameData<'py>> {
        let py = frame.py();
        let text = |name: &Bound<'py, PyString>| -> PyResult<Bound<'py, PyString>> {
            Ok(frame.getattr(name)?.cast_into::<PyString>()?)
        };
        let route = [
            text(pyo3::intern!(py, "protocol"))?,
            text(pyo3::intern!(py, "src"))?,
            text(pyo3::intern!(py, "dst"))?,
            text(pyo3::intern!(py, "direction"))?,
        ];
        let pdu = frame.getattr(pyo3::intern!(py, "pdu"))?;
        let command = pdu.getattr(pyo3::intern!(py, "command"))?;
        let body = pdu.getattr(pyo3::intern!(py, "body"))?;
        // a body: its protocol's record_fields make its keys, else the core's protocol's whose body it is
        let (body, protocol_keys) = if body.is_none() {
            (None, None)
        } else {
            let record_fields = protocol_spec.call1((&route[0],))?.getattr(pyo3::intern!(py, "record_fields"))?;
            if !record_fields.is_none() {
                let keys = record_fields.call1((frame, style.payload_bytes, style.summary))?;
                (None, Some(crate::convert::map_from_py(&keys)?))
            } else {
                (crate::body_from_py(route[0].to_str()?, &body)?, None)
            }
        };
        let data = frame.getattr(pyo3::intern!(py, "data"))?;
        Ok(PyFrameData {
            index: frame.getattr(pyo3::intern!(py, "index"))?.extract()?,
            conn: frame.getattr(pyo3::intern!(py, "conn"))?.extract()?,
            route,
            time: frame.getattr(pyo3::intern!(py, "time"))?.extract()?,
            packet: frame.getattr(pyo3::intern!(py, "packet"))?.extract()?,
            first_packet: frame.getattr(pyo3::intern!(py, "first_packet"))?.extract()?,
            data: if data.is_none() { None } else { Some(data.cast_into::<PyBytes>()?) },
            pdu: Decoded {
                type_name: Text::Owned(pdu.getattr(pyo3::intern!(py, "type"))?.extract()?),
                command: if command.is_none() { None } else { Some(value_from_py(&command)?) },
                size: pdu.getattr(pyo3::intern!(py, "size"))?.extract()?,
                findings: findings_from_py(&pdu.getattr(pyo3::intern!(py, "findings"))?)?,
                body,
            },
            protocol_keys,
        })
    }
}

/// `f` of the record's input for a `model.Frame` held in Python, with the analysis' `findings` and `notes`.
#[allow(clippy::too_many_arguments)]
pub fn with_py_frame<'py, R>(
    frame: &Bound<'py, PyAny>,
    findings: &[Finding],
    notes: &Map,
    protocol_spec: &Bound<'py, PyAny>,
    texts: &mut FindingTexts,
    style: RecordStyle,
    f: impl FnOnce(&RecordInput<'_, PyFront<'py>>) -> R,
) -> PyResult<R> {
    let py = frame.py();
    let held = PyFrameData::read(frame, protocol_spec, style)?;
    let expert = held.pdu.findings.iter().chain(findings).map(|f| texts.expert(py, f)).collect::<PyResult<Vec<_>>>()?;
    let [protocol, src, dst, direction] = &held.route;
    let frame = Frame {
        index: held.index,
        protocol: protocol.to_str()?,
        conn: held.conn,
        src: src.to_str()?,
        dst: dst.to_str()?,
        direction: direction.to_str()?,
        time: held.time,
        packet: held.packet,
        pdu: &held.pdu,
    };
    Ok(f(&RecordInput {
        frame: &frame,
        route: Some([protocol, src, dst, direction]),
        first_packet: held.first_packet,
        expert: &expert,
        protocol_keys: held.protocol_keys.as_ref(),
        notes,
        data: held.data.as_ref(),
    }))
}

/// `problems.Finding`s (id, params) as findings.
pub fn findings_from_py(findings: &Bound<'_, PyAny>) -> PyResult<Vec<Finding>> {
    let py = findings.py();
    findings
        .try_iter()?
        .map(|f| {
            let f = f?;
            let id: String = f.getattr(pyo3::intern!(py, "id"))?.extract()?;
            Ok(Finding {
                id: intern_name(&id),
                params: crate::convert::map_from_py(&f.getattr(pyo3::intern!(py, "params"))?)?,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------- for Python callers

/// Records of `model.Annotated` frames made in Python (`output/records.py: record`): the same record as
/// the core makes of the frames it decodes. `json`: the JSON line (bytes, newline included) in place of the
/// dict.
#[pyclass(unsendable, module = "dissector._core")]
pub struct FrameRecords {
    texts: FindingTexts,
    protocol_spec: Py<PyAny>,
    style: RecordStyle,
    json: bool,
    actors: ActorDicts,
}

#[pymethods]
impl FrameRecords {
    /// `severity_and_message`: `problems.severity_and_message`; `protocol_spec`: the protocol registry's
    /// `get`.
    #[new]
    #[pyo3(signature = (severity_and_message, protocol_spec, summary=false, payload_bytes=false, json=false))]
    fn new(
        severity_and_message: Py<PyAny>,
        protocol_spec: Py<PyAny>,
        summary: bool,
        payload_bytes: bool,
        json: bool,
    ) -> Self {
        FrameRecords {
            texts: FindingTexts::new(severity_and_message),
            protocol_spec,
            style: RecordStyle { summary, payload_bytes },
            json,
            actors: ActorDicts::default(),
        }
    }

    /// The record of an `Annotated(frame, notes, findings)`.
    fn __call__<'py>(&mut self, py: Python<'py>, item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let frame = item.getattr(pyo3::intern!(py, "frame"))?;
        let notes = crate::convert::map_from_py(&item.getattr(pyo3::intern!(py, "notes"))?)?;
        let findings = findings_from_py(&item.getattr(pyo3::intern!(py, "findings"))?)?;
        let (style, json, actors) = (self.style, self.json, &mut self.actors);
        with_py_frame(&frame, &findings, &notes, self.protocol_spec.bind(py), &mut self.texts, style, |input| {
            if json {
                let mut line = Vec::with_capacity(512);
                build_record(&mut JsonSink::new(&mut line), input, style).map_err(py_error)?;
                line.push(b'\n');
                return Ok(PyBytes::new(py, &line).into_any());
            }
            let mut sink = DictSink::new(py, actors);
            build_record(&mut sink, input, style).map_err(py_error)?;
            sink.into_record()
                .map(Bound::into_any)
                .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("no record"))
        })?
    }
}
