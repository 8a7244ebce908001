//! The analysis for Python: `AnalysedDissector` (the pipeline and the analysis joined, what
//! `dissector/analysis/conversation.py: analysed_dissector` makes for `dissector/run.py`), and the
//! `ConversationCore` it runs.
//!
//! The stages and the analysis are the engine's composition (`engine::engine::Analysed`), driven here: what
//! the stages made is analysed through it as the engine's Rust data (`StagesFront` keeps a frame's place as
//! Python strings; a frame of a protocol declared in Python as its Python frame, whose PDU the analysis reads
//! back: `body_from_py`). Python `model.Frame` and `model.Event` objects from outside the stages go through
//! the same analysis, read into the Rust [`Frame`] it takes. The output is `model.Annotated` and
//! `model.Event` objects, with `problems.Finding`s; or, asked for records (`AnalysedDissector`'s modes), each
//! frame's record in place of its `Annotated` (`engine::records`): a dict, or its JSON line.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{intern, IntoPyObjectExt};

use crate::capture::{read_batch, read_selected, FileStage, Selection};
use crate::check_fields;
use engine::tables::RecordTables;

use crate::arrow::RecordBatches;
use crate::convert::{map_to_py, value_from_py, StrToPy};
use crate::pipeline::{note_to_py, set_batches_later, Classes as PipelineClasses, FramePlace, PyFrames};
use crate::pooled::JsonLines;
use crate::protocol::{Protocol, PyDecoded};
use crate::records::{py_error, sink_error, with_py_frame, ActorDicts, DictSink, FindingTexts, PyFront};
use crate::stats::StatsCore;
use crate::timeline::{PythonPlans, TimelineFormat};
use crate::transport::{other_tcp_rows, pipeline as transport_pipeline, with_segment};
use engine::analysis::bounded::FastMap;
use engine::analysis::join::Flush;
use engine::analysis::table::{Actor, CommandSpec, CommandTable, Key, KeyField, OpenedBy, Space};
use engine::analysis::{intern as intern_name, Event, EventHead, Frame, PairingOptions, ProtocolAnalysis, Sessions};
use engine::budget::MemoryBudget;
use engine::engine::{
    stats_record, write_json_line, Analysed, AnalysisFront, EventItem, Item, RunContext, Shared, Sink, StagedFrame,
    Tables,
};
use engine::frame_record::{build_record, RecordInput};
use engine::model::{Decoded, Finding};
use engine::pipeline::{Made as StagesMade, Pipeline as Stages, Place, StreamNote, StreamProtocol};
use engine::protocols::{self, Limits};
use engine::records::RecordStyle;
use engine::sinks::pooled::PooledJsonLines;
use engine::sinks::timeline::TimelineLines;
use engine::transport::net::Segment;
use engine::value::{Map, Text, Value};
use std::borrow::Cow;
use std::sync::Arc;

/// The Python classes the analysis reads and makes.
struct Classes {
    frame: Py<PyAny>,
    annotated: Py<PyAny>,
    event: Py<PyAny>,
    finding: Py<PyAny>,
}

fn finding_to_py<'py>(py: Python<'py>, finding_class: &Py<PyAny>, finding: &Finding) -> PyResult<Bound<'py, PyAny>> {
    finding_class.bind(py).call1((finding.id.to_py(py), map_to_py(py, &finding.params)?))
}

fn findings_to_py<'py>(
    py: Python<'py>,
    finding_class: &Py<PyAny>,
    findings: &[Finding],
) -> PyResult<Bound<'py, PyList>> {
    let objects = findings.iter().map(|f| finding_to_py(py, finding_class, f)).collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, objects)
}

impl Classes {
    fn event<'py>(&self, py: Python<'py>, event: &Event) -> PyResult<Bound<'py, PyAny>> {
        let (src, dst, direction) = match &event.route {
            Some((src, dst, direction)) => (
                PyString::new(py, src).into_any(),
                PyString::new(py, dst).into_any(),
                PyString::new(py, direction).into_any(),
            ),
            None => (py.None().into_bound(py), py.None().into_bound(py), py.None().into_bound(py)),
        };
        let args = [
            event.kind.to_py(py).to_owned().into_any(),
            event.time.into_bound_py_any(py)?,
            event.packet.into_bound_py_any(py)?,
            event.conn.into_bound_py_any(py)?,
            src,
            dst,
            direction,
            py.None().into_bound(py),
            py.None().into_bound(py),
            map_to_py(py, &event.details)?.into_any(),
            map_to_py(py, &event.params)?.into_any(),
        ];
        self.event.bind(py).call1(PyTuple::new(py, args)?)
    }
}

/// Reads the analyzer's options from `dissector.options.Options`.
fn pairing_options(options: &Bound<'_, PyAny>) -> PyResult<PairingOptions> {
    let timeout = options.getattr("request_timeout")?;
    Ok(PairingOptions {
        request_timeout: timeout.extract()?,
        request_timeout_value: value_from_py(&timeout)?,
        max_pending_requests: options.getattr("max_pending_requests")?.extract()?,
    })
}

/// The caps of decoding and of the protocols' sessions (`dissector.options.Options`).
fn limits(options: &Bound<'_, PyAny>, budget: &MemoryBudget) -> PyResult<Limits> {
    let get = |name: &str| options.getattr(name);
    Ok(Limits {
        max_actors: get("max_actors")?.extract()?,
        max_remembered_messages: get("max_remembered_messages")?.extract()?,
        max_remembered_total: get("max_remembered_total")?.extract()?,
        max_redelivered_reported: get("max_redelivered_reported")?.extract()?,
        max_chunked_messages: get("max_chunked_messages")?.extract()?,
        max_chunk_bytes: get("max_chunk_bytes")?.extract()?,
        max_chunk_bytes_total: get("max_chunk_bytes_total")?.extract()?,
        max_decompressed: get("max_decompressed")?.extract()?,
        redirect_loop_limit: get("redirect_loop_limit")?.extract()?,
        memory_budget: budget.clone(),
    })
}

// ------------------------------------------------------------------------------------- the command table

fn space(table: &mut CommandTable, space: &Bound<'_, PyAny>) -> PyResult<usize> {
    let opened_by: String = space.getattr("opened_by")?.extract()?;
    Ok(table.space(Space {
        name: space.getattr("name")?.extract()?,
        slot: space.getattr("slot")?.extract()?,
        duplicates: space.getattr("duplicates")?.extract()?,
        unmatched: space.getattr("unmatched")?.extract()?,
        unanswered: space.getattr("unanswered")?.extract()?,
        opened_by: match opened_by.as_str() {
            "client" => OpenedBy::Client,
            "server" => OpenedBy::Server,
            _ => OpenedBy::Any,
        },
    }))
}

fn key(table: &mut CommandTable, key: &Bound<'_, PyAny>) -> PyResult<Key> {
    let space = space(table, &key.getattr("space")?)?;
    let names: Vec<String> = key.getattr("fields")?.extract()?;
    let fields = names
        .iter()
        .map(|name| match name.as_str() {
            "@direction" => KeyField::Direction,
            "@reverse" => KeyField::Reverse,
            "@serial" => KeyField::Serial,
            other => KeyField::Command(other.to_owned()),
        })
        .collect();
    Ok(Key { space, fields, names })
}

/// The analyzer's form of a `CommandTable` (`protocols/base.py`), read once.
fn command_table(commands: &Bound<'_, PyAny>) -> PyResult<CommandTable> {
    let mut table = CommandTable::default();
    for spec in commands.try_iter()? {
        let spec = spec?;
        let name: String = spec.getattr("name")?.extract()?;
        let scope: Option<String> = spec.getattr("scope")?.extract()?;
        let scope_id: Option<String> = spec.getattr("scope_id")?.extract()?;
        let opens = spec.getattr("opens")?;
        let opens = if opens.is_none() { None } else { Some(key(&mut table, &opens)?) };
        let answers =
            spec.getattr("answers")?.try_iter()?.map(|k| key(&mut table, &k?)).collect::<PyResult<Vec<_>>>()?;
        let answer_types = spec.getattr("answer_types")?;
        let answer_types = if answer_types.is_none() {
            None
        } else {
            let mut types: Vec<String> = answer_types.try_iter()?.map(|t| t?.extract()).collect::<PyResult<_>>()?;
            types.sort();
            Some(types)
        };
        let interim = spec.getattr("interim")?;
        let interim = if interim.is_none() {
            None
        } else {
            Some((interim.get_item(0)?.extract()?, value_from_py(&interim.get_item(1)?)?))
        };
        table.add(CommandSpec {
            name: intern_name(&name),
            scope: match (scope.as_deref().and_then(Actor::parse), scope_id) {
                (Some(actor), Some(field)) => Some((actor, field)),
                _ => None,
            },
            opens,
            answers,
            answer_types,
            interim,
            remember: spec.getattr("remember")?.extract()?,
        });
    }
    Ok(table)
}

// --------------------------------------------------------------------------------- a Python frame, read

/// A decoded command's value: `Value::from_py` with the exact types of the decoder tried first, in the order
/// they are most common, so that no conversion is attempted (and no Python error made) in vain; keys are the
/// schema's field names, interned.
fn command_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(text) = obj.cast_exact::<PyString>() {
        return Ok(Value::Str(Text::Owned(text.to_str()?.to_owned())));
    }
    if let Ok(int) = obj.cast_exact::<PyInt>() {
        return Ok(match int.extract::<i64>() {
            Ok(v) => Value::Int(v),
            Err(_) => Value::UInt(int.extract()?),
        });
    }
    if let Ok(dict) = obj.cast_exact::<PyDict>() {
        let mut entries = Map::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            let key = key.cast_exact::<PyString>().map_err(|_| PyRuntimeError::new_err("command keys must be str"))?;
            entries.push((field_name(key.to_str()?), command_value(&value)?));
        }
        return Ok(Value::Map(entries));
    }
    if let Ok(list) = obj.cast_exact::<PyList>() {
        return list.iter().map(|item| command_value(&item)).collect::<PyResult<_>>().map(Value::List);
    }
    if let Ok(flag) = obj.cast_exact::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(float) = obj.cast_exact::<PyFloat>() {
        return Ok(Value::Float(float.value()));
    }
    if let Ok(bytes) = obj.cast_exact::<PyBytes>() {
        return Ok(Value::Bytes(bytes.as_bytes().to_vec()));
    }
    value_from_py(obj)
}

/// A command's field name: interned while the names seen stay few (a schema's), owned beyond.
fn field_name(text: &str) -> Text {
    thread_local! {
        static SEEN: std::cell::RefCell<FastMap<String, &'static engine::value::Name>> =
            std::cell::RefCell::new(FastMap::default());
    }
    const MAX_NAMES: usize = 4096;
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        if let Some(name) = seen.get(text) {
            return Text::Name(name);
        }
        if seen.len() >= MAX_NAMES {
            return Text::Owned(text.to_owned());
        }
        let name = intern_name(text);
        seen.insert(text.to_owned(), name);
        Text::Name(name)
    })
}

/// The findings of a decoded frame, by id only (their parameters are not read by the analysis).
fn finding_ids(findings: &Bound<'_, PyAny>) -> PyResult<Vec<Finding>> {
    let py = findings.py();
    findings
        .try_iter()?
        .map(|f| {
            let id: String = f?.getattr(intern!(py, "id"))?.extract()?;
            Ok(Finding { id: intern_name(&id), params: Map::new() })
        })
        .collect()
}

/// What the analysis reads of a `model.Decoded` of `protocol`'s.
fn decoded_from_py(protocol: &str, pdu: &Bound<'_, PyAny>) -> PyResult<Decoded> {
    let py = pdu.py();
    let command = pdu.getattr(intern!(py, "command"))?;
    let body = pdu.getattr(intern!(py, "body"))?;
    Ok(Decoded {
        type_name: Text::Owned(pdu.getattr(intern!(py, "type"))?.extract()?),
        command: if command.is_none() { None } else { Some(command_value(&command)?) },
        size: 0, // not read by the analysis
        findings: finding_ids(&pdu.getattr(intern!(py, "findings"))?)?,
        // a body of a protocol declared in Python that is not one of the core's means nothing to the analysis
        body: crate::body_from_py(protocol, &body)?,
    })
}

// ------------------------------------------------------------------------------------ ConversationCore

/// The engine's composition of the stages and the analysis ([`Analysed`]: the stages, and the join's pairing
/// and session state for every connection) driven with what `AnalysedDissector` has: what the stages made
/// (the engine's frames, the Python frames of a protocol declared in Python, the streams' notes), Python
/// frames and events from outside the stages. What it gives goes to the [`Targets`].
pub struct ConversationCore {
    analysed: Analysed<Protocol>,
    /// What makes the stages' frames Python values (when an output needs them).
    frames: PyFrames,
    options: Py<PyAny>,
    /// The run's memory budget (`Options.memory_budget`), which the transport's holders share.
    budget: MemoryBudget,
    /// `dissector.protocols.get`: a protocol's spec by name, compiled at its first frame.
    protocol_spec: Py<PyAny>,
    targets: Targets,
}

/// Where the analysis' outputs go: `model.Annotated` and `model.Event` objects, or each frame's record (a
/// JSON line, a dict, into the statistics or the tables), or its `--plain` timeline line.
struct Targets {
    classes: Classes,
    /// The dicts of the producers and consumers notes name, shared by the frames that name them.
    actors: ActorDicts,
    /// Set by `AnalysedDissector` when asked for records.
    records: Option<Records>,
    /// Set by `AnalysedDissector` when asked for `--plain` timeline lines.
    timeline: Option<Timeline>,
}

/// `--plain` lines written by the engine's sink (`engine::sinks::timeline`) from the frames the core decoded,
/// with the renderer's format (its plans and time origin): Python makes only the texts of their findings and
/// the plans of their protocols.
struct Timeline {
    format: Py<TimelineFormat>,
    lines: TimelineLines<FindingTexts, PythonPlans>,
}

impl Timeline {
    fn new(py: Python<'_>, format: Py<TimelineFormat>, texts: Py<PyAny>) -> Timeline {
        let plans = format.borrow(py).plans(py);
        let mut lines = TimelineLines::new(FindingTexts::new(texts), plans);
        lines.out.reserve(1 << 16);
        Timeline { format, lines }
    }

    /// The line of a frame the core decoded, into the lines.
    fn frame(
        &mut self,
        py: Python<'_>,
        frame: &Frame,
        first_packet: i64,
        notes: Map,
        findings: &[Finding],
    ) -> PyResult<()> {
        let notes = Cow::Owned(notes);
        self.item(py, Item::Frame { frame, first_packet, notes, findings, answered: None, shared: None, data: None })
    }

    /// The line of a frame or an event, into the lines.
    fn item(&mut self, py: Python<'_>, item: Item<'_>) -> PyResult<()> {
        let mut format = self.format.borrow_mut(py);
        let done = self.lines.with_format(&mut format.format).item(item);
        self.lines.texts.take_error()?; // (the texts' error first: the sink's may follow from it)
        done.map_err(py_error)
    }

    /// A Python item (an event, or a frame left to Python) goes out: the first item's time is the origin.
    fn saw(&mut self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<()> {
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
    fn take<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        if self.lines.out.is_empty() {
            return None;
        }
        let bytes = PyBytes::new(py, &self.lines.out);
        self.lines.out.clear();
        Some(bytes)
    }
}

/// A frame as `AnalysedDissector` has it: a Python `model.Frame`, or one the core decoded (whose Python frame
/// is made only if an output needs it), with the analysis' view of it as the engine's composition made it.
enum FrameIn<'a, 'py> {
    Object(&'a Bound<'py, PyAny>),
    Native { place: &'a FramePlace, pdu: &'a Arc<Decoded>, frame: &'a Frame<'a> },
}

/// An event as `AnalysedDissector` has it: a Python `model.Event`, or a stream's note as the engine made it.
enum EventIn<'a, 'py> {
    Object(&'a Bound<'py, PyAny>),
    Note(&'a StreamNote),
}

/// The analysis' outputs of one item into the targets, and the Python items they make into `out`.
struct Outputs<'t, 'o, 'py> {
    py: Python<'py>,
    targets: &'t mut Targets,
    protocol_spec: &'t Py<PyAny>,
    out: &'o Bound<'py, PyList>,
}

impl<'py> Outputs<'_, '_, 'py> {
    /// The input event, passed on.
    fn input_event(&mut self, event: &EventIn<'_, 'py>) -> PyResult<()> {
        let (py, targets) = (self.py, &mut *self.targets);
        match event {
            EventIn::Object(input) => {
                if targets.takes_events() && targets.event(py, PyEvent::read(input)?.item())? {
                    return Ok(());
                }
                targets.append(py, self.out, (*input).clone())
            }
            EventIn::Note(note) => {
                let item = EventItem::of_note(note);
                if targets.event(py, item)? {
                    return Ok(());
                }
                if let Some(timeline) = &mut targets.timeline {
                    return timeline.item(py, Item::Event(item));
                }
                let event = note_to_py(py, &targets.classes.event, note)?;
                targets.append(py, self.out, event)
            }
        }
    }

    /// The input frame, annotated.
    fn annotated_frame(
        &mut self,
        frame: &FrameIn<'_, 'py>,
        notes: Map,
        findings: Vec<Finding>,
        answered: Option<(f64, u64)>,
    ) -> PyResult<()> {
        let (py, targets) = (self.py, &mut *self.targets);
        if targets.records.is_some() {
            return targets.record(py, self.protocol_spec, frame, &findings, notes, answered, self.out);
        }
        if let (Some(timeline), FrameIn::Native { place, frame, .. }) = (&mut targets.timeline, frame) {
            if place.data.is_none() {
                return timeline.frame(py, frame, place.first_packet, notes, &findings);
            } // (a frame whose bytes are kept is Python's to show)
        }
        let frame = match frame {
            FrameIn::Object(frame) => (*frame).clone(),
            FrameIn::Native { place, pdu, .. } => place.frame_to_py(py, &targets.classes.frame, pdu)?,
        };
        let findings = findings_to_py(py, &targets.classes.finding, &findings)?;
        let notes = targets.notes(py, notes)?;
        let annotated = targets.classes.annotated.bind(py).call1((frame, notes, findings))?;
        targets.append(py, self.out, annotated)
    }

    /// An event the analysis made.
    fn analysis_event(&mut self, event: Event) -> PyResult<()> {
        let (py, targets) = (self.py, &mut *self.targets);
        let item = EventItem::of_analysis(&event);
        if targets.event(py, item)? {
            return Ok(());
        }
        if let Some(timeline) = &mut targets.timeline {
            return timeline.item(py, Item::Event(item));
        }
        let event = targets.classes.event(py, &event)?;
        targets.append(py, self.out, event)
    }
}

impl<'py> Flush<FrameIn<'_, 'py>, EventIn<'_, 'py>> for Outputs<'_, '_, 'py> {
    type Error = PyErr;

    fn input(&mut self, event: &EventIn<'_, 'py>) -> PyResult<()> {
        self.input_event(event)
    }

    fn annotated(
        &mut self,
        frame: &FrameIn<'_, 'py>,
        notes: Map,
        findings: Vec<Finding>,
        answered: Option<(f64, u64)>,
    ) -> PyResult<()> {
        self.annotated_frame(frame, notes, findings, answered)
    }

    fn event(&mut self, event: Event) -> PyResult<()> {
        self.analysis_event(event)
    }

    fn misplaced(&mut self, what: &'static str) -> PyErr {
        PyRuntimeError::new_err(what)
    }
}

/// What the stages made, as the engine's composition hands it back: the same outputs.
impl<'py> Flush<StagedFrame<'_, Kept<'py>>, StreamNote> for Outputs<'_, '_, 'py> {
    type Error = PyErr;

    fn input(&mut self, note: &StreamNote) -> PyResult<()> {
        self.input_event(&EventIn::Note(note))
    }

    fn annotated(
        &mut self,
        staged: &StagedFrame<'_, Kept<'py>>,
        notes: Map,
        findings: Vec<Finding>,
        answered: Option<(f64, u64)>,
    ) -> PyResult<()> {
        let frame = match staged.kept {
            Kept::Native(place) => FrameIn::Native { place, pdu: staged.pdu, frame: staged.frame },
            Kept::Object(frame) => FrameIn::Object(frame),
        };
        self.annotated_frame(&frame, notes, findings, answered)
    }

    fn event(&mut self, event: Event) -> PyResult<()> {
        self.analysis_event(event)
    }

    fn misplaced(&mut self, what: &'static str) -> PyErr {
        PyRuntimeError::new_err(what)
    }
}

/// What the binding keeps of a frame the stages made: where it was, as Python strings (its Python frame made
/// only if an output needs it), or the Python frame of a protocol declared in Python.
enum Kept<'py> {
    Native(FramePlace),
    Object(Bound<'py, PyAny>),
}

/// The binding's part in the engine's composition: a frame the stages made kept as [`Kept`], the PDU the
/// analysis reads (a Python-declared protocol's read back from its Python `Decoded`), a protocol's analysis
/// from its Python spec.
struct StagesFront<'a, 'py> {
    py: Python<'py>,
    frames: &'a mut PyFrames,
    options: &'a Py<PyAny>,
    budget: &'a MemoryBudget,
    protocol_spec: &'a Py<PyAny>,
}

impl<'py> AnalysisFront<Protocol> for StagesFront<'_, 'py> {
    type Error = PyErr;
    type Kept = Kept<'py>;

    fn frame(&mut self, protocol: &Protocol, place: &Place, decoded: PyDecoded) -> PyResult<(Arc<Decoded>, Kept<'py>)> {
        let py = self.py;
        let frame = self.frames.place(py, protocol, place);
        match decoded {
            // (shared with the record written on the pool)
            PyDecoded::Core(decoded) => Ok((Arc::new(decoded), Kept::Native(frame))),
            PyDecoded::Python(object) => {
                let object = object.into_bound(py);
                let pdu = decoded_from_py(StreamProtocol::name(protocol), &object)?;
                Ok((Arc::new(pdu), Kept::Object(frame.to_py(py, &self.frames.classes().frame, object)?)))
            }
        }
    }

    fn first_sight(&mut self, protocol: &Protocol) -> PyResult<ProtocolAnalysis> {
        let name = StreamProtocol::name(protocol);
        protocol_analysis(self.py, self.options, self.budget, self.protocol_spec, name)
    }
}

/// A protocol's analysis, from its spec (`protocol_spec(name)`): its command table, its session by name.
fn protocol_analysis(
    py: Python<'_>,
    options: &Py<PyAny>,
    budget: &MemoryBudget,
    protocol_spec: &Py<PyAny>,
    name: &str,
) -> PyResult<ProtocolAnalysis> {
    let spec = protocol_spec.bind(py).call1((name,))?;
    let roles = spec.getattr("server_roles")?;
    let server_role: String = roles.get_item(0)?.extract()?;
    let session: Option<String> = spec.getattr("session")?.extract()?;
    let sessions: Option<Box<dyn Sessions>> = match session.as_deref() {
        None => None,
        Some(name) => match protocols::by_name(name) {
            Some(protocol) => protocol.sessions(&limits(options.bind(py), budget)?),
            None => return Err(PyRuntimeError::new_err(format!("the core has no session named {name:?}"))),
        },
    };
    Ok(ProtocolAnalysis {
        table: command_table(&spec.getattr("commands")?)?,
        default_to_server: format!("to_{server_role}"),
        sessions,
    })
}

impl ConversationCore {
    /// `options`: a `dissector.options.Options`; `classes`: (Frame, Annotated, Event, Finding);
    /// `protocol_spec`: the protocol registry's `get`; `stages` and `frames`: the pipeline's parts
    /// (`Pipeline::into_parts`), its holders reserving from `budget`.
    fn new(
        py: Python<'_>,
        options: Bound<'_, PyAny>,
        classes: (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>),
        protocol_spec: Py<PyAny>,
        budget: MemoryBudget,
        (stages, frames): (Stages<Protocol>, PyFrames),
    ) -> PyResult<Self> {
        let (frame, annotated, event, finding) = classes;
        check_fields(annotated.bind(py), &["frame", "notes", "findings"])?;
        check_fields(
            event.bind(py),
            &["kind", "time", "packet", "conn", "src", "dst", "direction", "offset", "length", "details", "params"],
        )?;
        Ok(ConversationCore {
            analysed: Analysed::new(stages, pairing_options(&options)?),
            frames,
            budget,
            options: options.unbind(),
            protocol_spec,
            targets: Targets {
                classes: Classes { frame, annotated, event, finding },
                actors: ActorDicts::default(),
                records: None,
                timeline: None,
            },
        })
    }

    /// Append what `item` (a Frame or an Event) becomes, and any events it causes, to `out`.
    fn process(&mut self, py: Python<'_>, item: &Bound<'_, PyAny>, out: &Bound<'_, PyList>) -> PyResult<()> {
        if item.get_type().is(self.targets.classes.frame.bind(py)) {
            self.frame(py, item, out)
        } else {
            self.event(py, item, out)
        }
    }

    /// A Python frame: the analysis reads its fields, its command, the ids of its findings and what it reads
    /// of its body.
    fn frame(&mut self, py: Python<'_>, item: &Bound<'_, PyAny>, out: &Bound<'_, PyList>) -> PyResult<()> {
        let protocol = item.getattr(intern!(py, "protocol"))?;
        let protocol = protocol.cast::<PyString>()?.to_str()?;
        let src = item.getattr(intern!(py, "src"))?;
        let dst = item.getattr(intern!(py, "dst"))?;
        let direction = item.getattr(intern!(py, "direction"))?;
        let pdu = decoded_from_py(protocol, &item.getattr(intern!(py, "pdu"))?)?;
        let frame = Frame {
            index: item.getattr(intern!(py, "index"))?.extract()?,
            protocol,
            conn: item.getattr(intern!(py, "conn"))?.extract()?,
            src: src.cast::<PyString>()?.to_str()?,
            dst: dst.cast::<PyString>()?.to_str()?,
            direction: direction.cast::<PyString>()?.to_str()?,
            time: item.getattr(intern!(py, "time"))?.extract()?,
            packet: item.getattr(intern!(py, "packet"))?.extract()?,
            pdu: &pdu,
        };
        let ConversationCore { analysed, options, budget, protocol_spec, targets, .. } = self;
        let first_sight = || protocol_analysis(py, options, budget, protocol_spec, protocol);
        let mut outputs = Outputs { py, targets, protocol_spec, out };
        analysed.analyse_frame(&frame, first_sight, &FrameIn::Object(item), &mut outputs)
    }

    /// A Python event: the analysis reads its kind, connection, time, packet and `mid_stream`.
    fn event(&mut self, py: Python<'_>, item: &Bound<'_, PyAny>, out: &Bound<'_, PyList>) -> PyResult<()> {
        let kind: String = item.getattr(intern!(py, "kind"))?.extract()?;
        let mid_stream = match item.getattr(intern!(py, "details"))?.cast::<PyDict>() {
            Ok(details) => details.get_item(intern!(py, "mid_stream"))?.is_some_and(|v| v.is_truthy().unwrap_or(false)),
            Err(_) => false,
        };
        let head = EventHead {
            kind: &kind,
            conn: item.getattr(intern!(py, "conn"))?.extract()?,
            time: item.getattr(intern!(py, "time"))?.extract()?,
            packet: item.getattr(intern!(py, "packet"))?.extract()?,
            mid_stream,
        };
        let ConversationCore { analysed, protocol_spec, targets, .. } = self;
        let mut outputs = Outputs { py, targets, protocol_spec, out };
        analysed.analyse_event::<FrameIn, _, _>(head, &EventIn::Object(item), &mut outputs)
    }

    /// Append what one thing the stages made becomes, and any events it causes, to `out`, through the
    /// engine's composition. A frame the core decoded is read as its Rust data, not as a Python frame.
    fn analyse_made(&mut self, py: Python<'_>, made: StagesMade<PyDecoded>, out: &Bound<'_, PyList>) -> PyResult<()> {
        let ConversationCore { analysed, frames, options, budget, protocol_spec, targets } = self;
        let mut front = StagesFront { py, frames, options, budget, protocol_spec };
        analysed.analyse(made, &mut front, &mut Outputs { py, targets, protocol_spec, out })
    }

    /// The clock moved to `now`: append the requests that have waited past the operation timeout.
    fn tick(&mut self, py: Python<'_>, now: f64, out: &Bound<'_, PyList>) -> PyResult<()> {
        let ConversationCore { analysed, protocol_spec, targets, .. } = self;
        analysed.tick::<FrameIn, EventIn, _>(now, &mut Outputs { py, targets, protocol_spec, out })
    }

    /// The events of the end of every connection still open.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        let ConversationCore { analysed, protocol_spec, targets, .. } = self;
        analysed.finish::<FrameIn, EventIn, _>(&mut Outputs { py, targets, protocol_spec, out: &out })?;
        Ok(out)
    }
}

impl Targets {
    /// A frame's notes as a dict, the actors' dicts shared.
    fn notes<'py>(&mut self, py: Python<'py>, notes: Map) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (key, value) in &notes {
            dict.set_item(key.to_py(py), self.actors.value(py, key, value)?)?;
        }
        Ok(dict)
    }

    /// Whether the records' target takes events too (the statistics count them, the tables make their rows).
    fn takes_events(&self) -> bool {
        matches!(self.records.as_ref().map(|r| &r.target), Some(Target::Stats(_) | Target::Columns(_)))
    }

    /// An event into the records' target, if it takes events, after everything before it: whether the target
    /// keeps it (the tables: it then comes out as no Python object).
    fn event(&mut self, py: Python<'_>, event: EventItem<'_>) -> PyResult<bool> {
        match &mut self.records {
            Some(records) if matches!(records.target, Target::Stats(_) | Target::Columns(_)) => {
                records.target.item(py, Item::Event(event))?;
                Ok(matches!(records.target, Target::Columns(_)))
            }
            _ => Ok(false),
        }
    }

    /// With `records` on, the record of the frame being flushed: a frame the engine decoded goes to the
    /// target's sink as an `Item` (with its bytes, if kept); a frame Python holds (or wanted as a dict) has its
    /// record made here, in its place: its dict appended to `out`, or into the sink's output. (`answered`: the
    /// time and packet of the request the frame answers, for the pipeline's exchanges.)
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        py: Python<'_>,
        protocol_spec: &Py<PyAny>,
        item: &FrameIn<'_, '_>,
        findings: &[Finding],
        notes: Map,
        answered: Option<(f64, u64)>,
        out: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        let Some(records) = &mut self.records else { return Ok(()) };
        let (style, actors) = (records.style, &mut self.actors);
        let record = match item {
            FrameIn::Native { place, pdu, frame } if !matches!(records.target, Target::Dicts(_)) => {
                let shared = Some(Shared { pdu, route: &place.route });
                let data = place.data.as_ref().map(|data| data.as_bytes(py));
                let (first_packet, notes) = (place.first_packet, Cow::Owned(notes));
                let item = Item::Frame { frame, first_packet, notes, findings, answered, shared, data };
                return records.target.item(py, item);
            }
            FrameIn::Native { place, pdu, frame } => records.in_place(py, answered, actors, |texts, output| {
                let expert =
                    pdu.findings.iter().chain(findings).map(|f| texts.expert(py, f)).collect::<PyResult<Vec<_>>>()?;
                let route = [place.protocol.bind(py), place.src.bind(py), place.dst.bind(py), place.direction.bind(py)];
                let data = place.data.as_ref().map(|d| d.bind(py));
                let input = RecordInput {
                    frame,
                    route: Some(route),
                    first_packet: place.first_packet,
                    expert: &expert,
                    protocol_keys: None,
                    notes: &notes,
                    data,
                };
                output.build(py, &input, style)
            })?,
            FrameIn::Object(frame) => {
                let spec = protocol_spec.bind(py);
                records.in_place(py, answered, actors, |texts, output| {
                    with_py_frame(frame, findings, &notes, spec, texts, style, |input| output.build(py, input, style))?
                })?
            }
        };
        self.emit_record(py, record, out)
    }

    /// A dict record goes to `out` (after the JSON lines before it); a JSON line stays in the lines.
    fn emit_record(
        &mut self,
        py: Python<'_>,
        record: Option<Bound<'_, PyDict>>,
        out: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        match record {
            Some(record) => self.append(py, out, record.into_any()),
            None => Ok(()),
        }
    }

    /// Append a Python item to `out`, after the JSON or timeline lines written before it.
    fn append(&mut self, py: Python<'_>, out: &Bound<'_, PyList>, item: Bound<'_, PyAny>) -> PyResult<()> {
        self.release_lines(py, out)?;
        if let Some(lines) = &mut self.timeline {
            lines.saw(py, &item)?;
        }
        out.append(item)
    }

    /// The JSON or timeline lines written so far, as one bytes object appended to `out` (every JSON line, once
    /// the pool has written those handed to it).
    fn release_lines(&mut self, py: Python<'_>, out: &Bound<'_, PyList>) -> PyResult<()> {
        self.release_lines_written(py, out, false)
    }

    /// `release_lines`, with `written_only`: only the lines the pool has finished, without waiting for it.
    fn release_lines_written(&mut self, py: Python<'_>, out: &Bound<'_, PyList>, written_only: bool) -> PyResult<()> {
        if let Some(lines) = self.timeline.as_mut().and_then(|lines| lines.take(py)) {
            out.append(lines)?;
        }
        match self.records.as_mut().map(|r| &mut r.target) {
            Some(Target::Pooled(sink)) => {
                for piece in sink.take(!written_only).map_err(py_error)? {
                    out.append(JsonLines::new(piece))?;
                }
                Ok(())
            }
            Some(Target::Json(sink)) if !sink.out.is_empty() => {
                out.append(JsonLines::new(std::mem::take(&mut sink.out)))
            }
            _ => Ok(()),
        }
    }
}

/// An event that came from Python (a `model.Event`: a capture note), read for the records' target.
struct PyEvent {
    kind: String,
    time: f64,
    packet: i64,
    conn: Option<u64>,
    route: [Option<String>; 3],
    offset: Option<i64>,
    length: Option<i64>,
    details: Map,
    params: Map,
}

impl PyEvent {
    fn read(event: &Bound<'_, PyAny>) -> PyResult<PyEvent> {
        let py = event.py();
        let map = |name: &Bound<'_, PyString>| -> PyResult<Map> {
            let value = event.getattr(name)?;
            if value.is_none() {
                Ok(Map::new())
            } else {
                crate::convert::map_from_py(&value)
            }
        };
        Ok(PyEvent {
            kind: event.getattr(intern!(py, "kind"))?.extract()?,
            time: event.getattr(intern!(py, "time"))?.extract()?,
            packet: event.getattr(intern!(py, "packet"))?.extract()?,
            conn: event.getattr(intern!(py, "conn"))?.extract()?,
            route: [
                event.getattr(intern!(py, "src"))?.extract()?,
                event.getattr(intern!(py, "dst"))?.extract()?,
                event.getattr(intern!(py, "direction"))?.extract()?,
            ],
            offset: event.getattr(intern!(py, "offset"))?.extract()?,
            length: event.getattr(intern!(py, "length"))?.extract()?,
            details: map(intern!(py, "details"))?,
            params: map(intern!(py, "params"))?,
        })
    }

    fn item(&self) -> EventItem<'_> {
        let [src, dst, direction] = &self.route;
        EventItem {
            kind: &self.kind,
            time: self.time,
            packet: self.packet,
            conn: self.conn,
            src: src.as_deref(),
            dst: dst.as_deref(),
            direction: direction.as_deref(),
            offset: self.offset,
            length: self.length,
            details: &self.details,
            params: &self.params,
        }
    }
}

/// The records of frames, made in the core (`records.rs`) in place of `model.Annotated` frames: as JSON
/// lines (between two Python items joined in one bytes object), as dicts, into the statistics or the tables.
struct Records {
    style: RecordStyle,
    target: Target,
    /// Records made here rather than by the target's sink (`Records::in_place`), and their problems (what
    /// --strict counts), so Python need not read the lines.
    frames: u64,
    problems: u64,
}

/// Where the records go: one of the engine's sinks, chosen once (the texts of findings are theirs), or dicts.
enum Target {
    /// JSON lines written in place, those written since the last Python item.
    Json(engine::engine::JsonLines<FindingTexts>),
    /// JSON lines written on the engine's thread pool (`sinks/pooled.rs`).
    Pooled(PooledJsonLines<FindingTexts>),
    /// Dicts, to Python (made here: Python objects).
    Dicts(FindingTexts),
    /// Into the statistics, through their sink (`StatsCore::counted`): nothing comes out.
    Stats(Py<StatsCore>),
    /// Into the `pipeline`'s tables (the engine's `tables.rs`), until taken: nothing comes out.
    Columns(Box<Tables<FindingTexts>>),
}

impl Target {
    /// An item to the target's sink (not the dicts': they are Python objects).
    fn item(&mut self, py: Python<'_>, item: Item<'_>) -> PyResult<()> {
        fn checked<S: Sink>(sink: &mut S, texts: impl FnOnce(&mut S) -> &mut FindingTexts, item: Item) -> PyResult<()> {
            let done = sink.item(item);
            texts(sink).take_error()?; // (the texts' error first: a sink's error may follow from it)
            done.map_err(py_error)
        }
        match self {
            Target::Json(sink) => checked(sink, |s| &mut s.texts, item),
            Target::Pooled(sink) => checked(sink, |s| &mut s.texts, item),
            Target::Columns(sink) => checked(&mut **sink, |s| &mut s.texts, item),
            Target::Stats(stats) => checked(stats.borrow_mut(py).counted()?, |s| &mut s.texts, item),
            Target::Dicts(_) => Err(PyRuntimeError::new_err("dict records are made in place")),
        }
    }

    /// The records the sink made, and their problems.
    fn counted(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        Ok(match self {
            Target::Json(sink) => (sink.lines, sink.problems),
            Target::Pooled(sink) => (sink.frames, sink.problems),
            Target::Columns(sink) => (sink.frames, sink.problems),
            Target::Stats(stats) => stats.borrow_mut(py).fed()?,
            Target::Dicts(_) => (0, 0),
        })
    }
}

/// Where a record made here goes: the output of the target's sink.
enum Output<'s> {
    Lines(&'s mut Vec<u8>),
    Dicts(&'s mut ActorDicts),
    /// The statistics' record, counted once made.
    Stats(&'s mut Option<Map>),
    Tables(&'s mut RecordTables, Option<(f64, u64)>),
}

impl Output<'_> {
    /// The record of `input`: its problems, and its dict if it is one.
    fn build<'py>(
        &mut self,
        py: Python<'py>,
        input: &RecordInput<'_, PyFront<'py>>,
        style: RecordStyle,
    ) -> PyResult<(usize, Option<Bound<'py, PyDict>>)> {
        Ok(match self {
            Output::Lines(lines) => (write_json_line(lines, input, style).map_err(py_error)?, None),
            Output::Dicts(actors) => {
                let mut sink = DictSink::new(py, actors);
                let problems = build_record(&mut sink, input, style).map_err(py_error)?;
                (problems, sink.into_record())
            }
            Output::Stats(record) => {
                let (problems, made) = stats_record(input, style).map_err(py_error)?;
                **record = made;
                (problems, None)
            }
            Output::Tables(tables, answered) => {
                (tables.record(*answered, |sink| build_record(sink, input, style)).map_err(py_error)?, None)
            }
        })
    }
}

impl Records {
    /// A record made here, in its place among the sink's: `make` builds it with the sink's texts into its
    /// output. Returns its dict, if it is one.
    fn in_place<'py>(
        &mut self,
        py: Python<'py>,
        answered: Option<(f64, u64)>,
        actors: &mut ActorDicts,
        make: impl FnOnce(&mut FindingTexts, &mut Output<'_>) -> PyResult<(usize, Option<Bound<'py, PyDict>>)>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let (problems, record) = match &mut self.target {
            Target::Json(sink) => make(&mut sink.texts, &mut Output::Lines(&mut sink.out))?,
            Target::Pooled(sink) => {
                // (after every line before it: the pool is waited for)
                let mut made = (0, None);
                sink.in_place(|lines, texts| {
                    made = make(texts, &mut Output::Lines(lines)).map_err(sink_error)?;
                    Ok(())
                })
                .map_err(py_error)?;
                made
            }
            Target::Dicts(texts) => make(texts, &mut Output::Dicts(actors))?,
            Target::Stats(stats) => {
                let mut core = stats.borrow_mut(py);
                let counted = core.counted()?;
                let mut record = None;
                let made = make(&mut counted.texts, &mut Output::Stats(&mut record))?;
                if let Some(record) = record {
                    counted.add_record(record).map_err(py_error)?;
                }
                made
            }
            Target::Columns(sink) => make(&mut sink.texts, &mut Output::Tables(&mut sink.tables, answered))?,
        };
        self.frames += 1;
        self.problems += problems as u64;
        Ok(record)
    }
}

// ------------------------------------------------------------------------------------- AnalysedDissector

/// (Frame, Event, Decoded, Finding, Annotated).
type JoinedClasses = (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>);

/// The pipeline and the analysis joined: packets in, `model.Annotated` frames and `model.Event`s out, in
/// capture order. The analysis reads each frame the core decoded as the Rust data the pipeline had, so no
/// Python frame is read back into Rust. What the pipeline makes can be held (`hold_packet`, `hold_finish`)
/// so the caller can put its own events (a capture file's notes) before it, then `release`d.
#[pyclass(unsendable, module = "dissector._core")]
pub struct AnalysedDissector {
    /// The composition (the stages and the analysis) and its outputs.
    analysis: ConversationCore,
    /// What the stages made, held until analysed (`release`).
    held: Vec<StagesMade<PyDecoded>>,
    /// The numbers a `pipeline` task sets before packets (`plan_numbering`), in packet order, and the next.
    plan: Vec<(i64, u64, Option<u64>)>,
    planned: usize,
}

impl AnalysedDissector {
    fn analyse_held<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        let mut result = Ok(());
        for made in self.held.drain(..) {
            if result.is_ok() {
                result = self.analysis.analyse_made(py, made, &out);
            }
        }
        result?;
        self.analysis.targets.release_lines(py, &out)?;
        Ok(out)
    }

    /// One captured packet through the stages, what it completes held.
    fn feed(
        &mut self,
        index: i64,
        timestamp: f64,
        linktype: u32,
        data: &Bound<'_, PyAny>,
        orig_len: usize,
    ) -> PyResult<()> {
        let (analysed, held) = (&mut self.analysis.analysed, &mut self.held);
        with_segment(index, timestamp, linktype, data, orig_len, |segment| analysed.feed_segment(segment, held))
    }
}

#[pymethods]
impl AnalysedDissector {
    /// `options`: a `dissector.options.Options`; `protocols`: the `ProtocolSpec`s to look for, in order;
    /// `classes`: (Frame, Event, Decoded, Finding, Annotated); `protocol_spec`: the protocol registry's `get`.
    /// With `records` = (json, summary, payload_bytes, texts), a frame comes out as its record (see
    /// `records.rs`) instead of an Annotated frame: `json`: as its JSON line, the lines between two Python
    /// items joined in one bytes object; else as a dict. `summary`, `payload_bytes`: `RecordStyle`; `texts`:
    /// `problems.severity_and_message`; `json` may also be "columns" (or "columns+json", the lines kept): the records go into
    /// the tables (`take_columns`), and so do the events (the events table; the texts of both from `texts`):
    /// nothing comes out. With `stats` too, the records go into those statistics, in the core,
    /// and only events come out. With `timeline` = (format, texts) — format: a `TimelineFormat` — a frame
    /// and an event the core made come out as their plain timeline lines instead (the engine's sink), the lines
    /// joined as JSON lines are.
    #[new]
    #[pyo3(signature = (options, protocols, classes, protocol_spec, records=None, stats=None, timeline=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        options: Bound<'_, PyAny>,
        protocols: Bound<'_, PyAny>,
        classes: JoinedClasses,
        protocol_spec: Py<PyAny>,
        records: Option<(Bound<'_, PyAny>, bool, bool, Py<PyAny>)>,
        stats: Option<Py<StatsCore>>,
        timeline: Option<(Py<TimelineFormat>, Py<PyAny>)>,
    ) -> PyResult<Self> {
        let (frame, event, decoded, finding, annotated) = classes;
        let analysis_classes = (frame.clone_ref(py), annotated, event.clone_ref(py), finding.clone_ref(py));
        let budget = MemoryBudget::new(options.getattr("memory_budget")?.extract()?);
        let pipeline_classes = PipelineClasses { frame, event, decoded, finding };
        let stages = transport_pipeline(py, &options, &protocols, pipeline_classes, &budget)?.into_parts();
        let mut analysis = ConversationCore::new(py, options.clone(), analysis_classes, protocol_spec, budget, stages)?;
        analysis.targets.records = match records {
            None => None,
            Some((kind, summary, payload_bytes, texts)) => {
                let style = RecordStyle { summary, payload_bytes };
                // the frames' records written or counted on threads of their own while this one decodes
                let pool_bytes: usize = options.getattr("pool_bytes")?.extract()?;
                let target = match (stats, kind.extract::<&str>().ok()) {
                    (Some(stats), _) => {
                        // (counted, never shown: the findings' severities alone)
                        let texts = FindingTexts::severity_only(texts);
                        stats.borrow_mut(py).start_counting(texts, style, pool_bytes);
                        Target::Stats(stats)
                    }
                    (None, Some(columns @ ("columns" | "columns+json"))) => {
                        let tables = RecordTables::new(columns == "columns+json");
                        Target::Columns(Box::new(Tables::new(FindingTexts::new(texts), style, tables)))
                    }
                    (None, _) if kind.is_truthy()? && pool_bytes > 0 => {
                        let mut sink = PooledJsonLines::new(FindingTexts::new(texts), style, pool_bytes);
                        sink.start(&RunContext { memory_budget: analysis.budget.clone() });
                        Target::Pooled(sink)
                    }
                    (None, _) if kind.is_truthy()? => {
                        let mut sink = engine::engine::JsonLines::new(FindingTexts::new(texts), style);
                        sink.out.reserve(1 << 16);
                        Target::Json(sink)
                    }
                    (None, _) => Target::Dicts(FindingTexts::new(texts)),
                };
                Some(Records { style, target, frames: 0, problems: 0 })
            }
        };
        analysis.targets.timeline = timeline.map(|(format, texts)| Timeline::new(py, format, texts));
        // records written by a Rust sink split a batch where they write its messages (on the pool, or in place):
        // no map per message made to be written once and freed
        let later = analysis
            .targets
            .records
            .as_ref()
            .is_some_and(|r| matches!(r.target, Target::Json(_) | Target::Pooled(_) | Target::Columns(_)));
        set_batches_later(analysis.analysed.stages_mut(), later);
        Ok(AnalysedDissector { analysis, held: Vec::new(), plan: Vec::new(), planned: 0 })
    }

    /// One captured packet (the fields of a `CapturedPacket`): what it completes, analysed.
    fn feed_packet<'py>(
        &mut self,
        py: Python<'py>,
        index: i64,
        timestamp: f64,
        linktype: u32,
        data: Bound<'py, PyAny>,
        orig_len: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let fed = self.feed(index, timestamp, linktype, &data, orig_len);
        let analysed = self.analyse_held(py);
        fed.and(analysed)
    }

    /// One captured packet, what it completes held until `release`: returns how many items are held.
    fn hold_packet(
        &mut self,
        index: i64,
        timestamp: f64,
        linktype: u32,
        data: Bound<'_, PyAny>,
        orig_len: usize,
    ) -> PyResult<usize> {
        self.feed(index, timestamp, linktype, &data, orig_len)?;
        Ok(self.held.len())
    }

    /// End of the capture for the pipeline (every connection closed), what it leaves held until `release`:
    /// returns how many items are held.
    fn hold_finish(&mut self) -> PyResult<usize> {
        self.analysis.analysed.finish_stages(&mut self.held)?;
        Ok(self.held.len())
    }

    /// The held items, analysed.
    fn release<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.analyse_held(py)
    }

    /// Packets of a `CaptureReader` (the core's) until at least `at_least` items are made, packets of
    /// `max_bytes` are read or the capture ends: what they complete, analysed, the reader's notes where they were found (`capture.files`); the
    /// JSON lines written in one bytes object between two Python items; None once the capture was read whole.
    fn read_capture<'py>(
        &mut self,
        py: Python<'py>,
        reader: Bound<'py, PyAny>,
        at_least: usize,
        max_bytes: usize,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        read_batch(py, self, &reader, at_least, max_bytes)
    }

    /// The packets of `flows` (`flow_key`s) in a file of a larger input (`reader`, a ``CaptureReader``; its
    /// packets numbered from `offset` + 1), as `read_capture` reads a whole capture, with the numbers
    /// `plan_numbering` gave set before their packets. None once the file was read; the end of the input is
    /// the caller's (`hold_finish`).
    fn read_selected<'py>(
        &mut self,
        py: Python<'py>,
        reader: Bound<'py, PyAny>,
        flows: std::collections::HashSet<i64>,
        offset: i64,
        at_least: usize,
        max_bytes: usize,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        read_selected(py, self, &reader, &Selection { flows, offset }, at_least, max_bytes)
    }

    /// Numbers to set before packets, little-endian int64 buffers of the same length: the
    /// packets (ascending), the frames numbered before each, the id of the connection it opens (-1: none).
    fn plan_numbering(&mut self, packets: &[u8], frames_before: &[u8], conns: &[u8]) -> PyResult<()> {
        let ints = |buffer: &[u8]| {
            buffer.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).collect::<Vec<_>>()
        };
        let (packets, frames_before, conns) = (ints(packets), ints(frames_before), ints(conns));
        if packets.len() != frames_before.len() || packets.len() != conns.len() {
            return Err(pyo3::exceptions::PyValueError::new_err("the plan's buffers differ in length"));
        }
        for ((p, frames), conn) in packets.into_iter().zip(frames_before).zip(conns) {
            self.plan.push((p, frames.max(0) as u64, u64::try_from(conn).ok()));
        }
        Ok(())
    }

    /// An event from outside the pipeline (a capture file's note), through the analysis.
    fn event<'py>(&mut self, py: Python<'py>, event: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        self.analysis.process(py, &event, &out)?;
        Ok(out)
    }

    /// The clock moved to `now`: the pipeline's and the analysis' expiries, in that order (the analysis
    /// reports overdue requests before it reads what the pipeline's expiries made).
    fn tick<'py>(&mut self, py: Python<'py>, now: f64) -> PyResult<Bound<'py, PyList>> {
        self.analysis.analysed.tick_stages(now, &mut self.held)?;
        let out = PyList::empty(py);
        self.analysis.tick(py, now, &out)?;
        let analysed = self.analyse_held(py)?;
        for item in analysed.iter() {
            out.append(item)?;
        }
        Ok(out)
    }

    /// The analysis' events of the end of every connection still open (after `hold_finish` and `release`).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.analysis.finish(py)
    }

    #[getter]
    fn last_time(&self) -> f64 {
        self.analysis.analysed.stages().last_time
    }

    /// (frames numbered so far, the id of the next connection): (`plan_numbering` sets them).
    #[getter]
    fn numbering(&self) -> (u64, u64) {
        self.analysis.analysed.stages().numbering()
    }

    /// Number the frames the end of the capture leaves on connection `conn` from `base` + 1.
    fn set_finish_base(&mut self, conn: u64, base: u64) {
        self.analysis.analysed.stages_mut().set_finish_base(conn, base);
    }

    /// The frame records made so far, and their problems: (frames, problems).
    #[getter]
    fn json_lines(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        let Some(records) = &self.analysis.targets.records else { return Ok((0, 0)) };
        let (sink_frames, sink_problems) = records.target.counted(py)?;
        Ok((records.frames + sink_frames, records.problems + sink_problems))
    }

    /// The frames, messages, problems, exchanges and events tables made so far (with records="columns" or
    /// "columns+json"), as Arrow record batches, emptied: see the engine's `tables.rs`.
    fn take_columns(&mut self) -> PyResult<Vec<RecordBatches>> {
        match self.analysis.targets.records.as_mut().map(|r| &mut r.target) {
            Some(Target::Columns(columns)) => crate::arrow::take(&mut columns.tables),
            _ => crate::arrow::take(&mut RecordTables::new(false)),
        }
    }

    /// The summary's statistics of the frames put into the tables since the last call (with records
    /// "columns"), as JSON: one part of the pipeline's summary (the engine's `stats/summary.rs`).
    fn take_summary(&mut self) -> String {
        match self.analysis.targets.records.as_mut().map(|r| &mut r.target) {
            Some(Target::Columns(columns)) => columns.tables.take_summary().to_json(),
            _ => engine::stats::summary::Summary::default().to_json(),
        }
    }

    /// Bytes the columns made so far hold (with records="columns").
    #[getter]
    fn columns_size(&self) -> usize {
        match self.analysis.targets.records.as_ref().map(|r| &r.target) {
            Some(Target::Columns(columns)) => columns.tables.size(),
            _ => 0,
        }
    }

    /// The timeline lines written so far, and their problems: (frames, problems).
    #[getter]
    fn timeline_lines(&self) -> (u64, u64) {
        self.analysis.targets.timeline.as_ref().map_or((0, 0), |t| (t.lines.frames, t.lines.problems))
    }

    #[getter]
    fn last_packet(&self) -> i64 {
        self.analysis.analysed.stages().last_packet
    }

    /// TCP off the protocols' ports: the busiest `most` server ports, as {port, connections, bytes}.
    fn other_tcp<'py>(&self, py: Python<'py>, most: usize) -> PyResult<Bound<'py, PyList>> {
        other_tcp_rows(py, &self.analysis.analysed.stages().other, most)
    }
}

impl FileStage for AnalysedDissector {
    fn feed_held(&mut self, _py: Python<'_>, segment: &Segment) -> PyResult<()> {
        self.analysis.analysed.feed_segment(segment, &mut self.held)
    }

    fn finish_held(&mut self, _py: Python<'_>) -> PyResult<()> {
        self.analysis.analysed.finish_stages(&mut self.held)
    }

    fn finish_some_held(&mut self, _py: Python<'_>, most: usize) -> PyResult<bool> {
        self.analysis.analysed.finish_some_stages(&mut self.held, most)
    }

    fn held(&self) -> usize {
        self.held.len()
    }

    fn release_into(&mut self, py: Python<'_>, out: &Bound<'_, PyList>) -> PyResult<()> {
        let mut result = Ok(());
        for made in self.held.drain(..) {
            if result.is_ok() {
                result = self.analysis.analyse_made(py, made, out);
            }
        }
        result
    }

    fn event_into(&mut self, py: Python<'_>, event: Bound<'_, PyAny>, out: &Bound<'_, PyList>) -> PyResult<()> {
        self.analysis.process(py, &event, out)
    }

    fn end_batch(&mut self, py: Python<'_>, out: &Bound<'_, PyList>, last: bool) -> PyResult<()> {
        // between two batches of packets, only the lines the pool has finished: it goes on with the rest while
        // the caller writes these
        self.analysis.targets.release_lines_written(py, out, !last)
    }

    fn last_time(&self) -> f64 {
        self.analysis.analysed.stages().last_time
    }

    fn last_packet(&self) -> i64 {
        self.analysis.analysed.stages().last_packet
    }

    fn event_class(&self) -> &Py<PyAny> {
        &self.analysis.frames.classes().event
    }

    fn before_packet(&mut self, p: i64) {
        while let Some(&(planned, frames, conn)) = self.plan.get(self.planned) {
            if planned > p {
                break;
            }
            self.planned += 1;
            if planned == p {
                self.analysis.analysed.stages_mut().set_numbering(Some(frames), conn);
            }
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AnalysedDissector>()?;
    m.add_class::<crate::records::FrameRecords>()?;
    m.add_class::<JsonLines>()?;
    Ok(())
}
