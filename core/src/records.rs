//! A frame's record (the JSON Lines contract, `docs/records.schema.json`): the one description of its keys,
//! their order and their values ([`build_record`]), written to a sink: [`JsonSink`], the record's JSON line
//! (byte for byte what `output/jsonl.dumps` writes of the dict), [`DictSink`], the Python dict every
//! renderer, filter and `check` reads, or [`MapSink`], Rust plain data for the core's statistics.
//!
//! The keys: index, protocol, time, conn, src, dst, direction, packet, type, command, size, problems, then
//! expert (when there are findings), first_packet (when the frame began in an earlier packet), Pulsar's
//! payload section (checksum ... messages, or messages_summary), a Python-declared protocol's own keys
//! (`ProtocolSpec.record_fields`), the analysis' notes, and with `Options.keep_frame_bytes` frame_bytes. A
//! protocol's keys and then the notes are merged as Python's `dict.update` would: a key the record already
//! holds keeps its place and takes the new value.
//!
//! The texts of findings are made by Python's templates (`dissector/problems.py`, the one place they are):
//! [`FindingTexts`] asks Python for those of a finding it has not met, and remembers them.

use std::hash::{BuildHasher, Hasher};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::analysis::bounded::FastMap;
use crate::analysis::{intern as intern_name, map_get, Frame};
use crate::model::{Body, Checksum, Decoded, Finding, PayloadSection, TubeBody};
use crate::name;
use rayon::prelude::*;
use crate::payload::{self, BatchLater};
use crate::pb::b64;
use crate::value::{text_lossless, write_json_str, Map, Name, Text, Value};

// ------------------------------------------------------------------------------------------- the sinks

/// Where a value goes in the container being built: a declared key, a key known at run time, or the next
/// item of a list.
#[derive(Clone, Copy)]
pub enum Key<'a> {
    Name(&'static Name),
    Text(&'a Text),
    Item,
}

/// A value of the record.
pub enum Atom<'a, 'py> {
    Value(&'a Value),
    Values(&'a [Value]),
    Text(&'a Text),
    Name(&'static Name),
    /// Text, with its Python string when there is one already (the pipeline's route strings, the texts of
    /// findings): the dict takes that object.
    Str(&'a str, Option<&'a Bound<'py, PyString>>),
    /// Text made here of characters JSON never escapes (a digest's hex digits): written as it is.
    Plain(&'a str),
    Bytes(&'a Bound<'py, PyBytes>),
    EmptyMap,
}

/// What a record is written to.
pub trait RecordSink<'py> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, 'py>) -> PyResult<()>;
    /// Open an object (or a list) under `key`; what follows goes in it until [`RecordSink::close`].
    fn open(&mut self, key: Key<'_>, list: bool) -> PyResult<()>;
    fn close(&mut self) -> PyResult<()>;
    /// A frame's messages (the contract's `messages`, [`write_messages`]): a sink may write them its own way.
    fn messages(&mut self, key: Key<'_>, messages: &[Value], base: Option<&Value>, payload_bytes: bool) -> PyResult<()>
    where
        Self: Sized,
    {
        write_messages(self, key, messages, base, payload_bytes)
    }
    /// A note of the analysis.
    fn note(&mut self, key: &Text, value: &Value) -> PyResult<()> {
        self.put(Key::Text(key), Atom::Value(value))
    }
}

/// JSON, appended to a buffer.
pub struct JsonSink<'o> {
    pub(crate) out: &'o mut Vec<u8>,
    /// Per open container: whether it is still empty, and whether it is a list.
    open: Vec<(bool, bool)>,
    /// Where the last value written (or container opened) begins in `out` (the columns' `TableSink`).
    pub(crate) value_start: usize,
}

impl<'o> JsonSink<'o> {
    pub fn new(out: &'o mut Vec<u8>) -> JsonSink<'o> {
        JsonSink { out, open: Vec::with_capacity(4), value_start: 0 }
    }

    fn key(&mut self, key: Key<'_>) {
        if let (Key::Name(name), Some((empty, _))) = (key, self.open.last_mut()) {
            name.write_json_key(*empty, self.out);
            *empty = false;
            self.value_start = self.out.len();
            return;
        }
        if let Some((empty, _)) = self.open.last_mut() {
            if !*empty {
                self.out.push(b',');
            }
            *empty = false;
        }
        match key {
            Key::Name(name) => name.write_json(self.out),
            Key::Text(text) => text.write_json(self.out),
            Key::Item => {
                self.value_start = self.out.len();
                return;
            }
        }
        self.out.push(b':');
        self.value_start = self.out.len();
    }
}

impl<'py> RecordSink<'py> for JsonSink<'_> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, 'py>) -> PyResult<()> {
        self.key(key);
        match atom {
            Atom::Value(value) => value.write_json(self.out),
            Atom::Values(items) => crate::value::write_json_array(items, self.out, Value::write_json),
            Atom::Text(text) => text.write_json(self.out),
            Atom::Name(name) => name.write_json(self.out),
            Atom::Str(text, _) => write_json_str(text, self.out),
            Atom::Plain(text) => {
                debug_assert!(text.bytes().all(|b| b.is_ascii_alphanumeric()));
                self.out.reserve(text.len() + 2);
                self.out.push(b'"');
                self.out.extend_from_slice(text.as_bytes());
                self.out.push(b'"');
            }
            // as jsonl's fallback writes bytes (never in the contract: frame_bytes is for renderers)
            Atom::Bytes(bytes) => write_json_str(&text_lossless(bytes.as_bytes()), self.out),
            Atom::EmptyMap => self.out.extend_from_slice(b"{}"),
        }
        Ok(())
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> PyResult<()> {
        self.key(key);
        self.out.push(if list { b'[' } else { b'{' });
        self.open.push((true, list));
        Ok(())
    }

    fn close(&mut self) -> PyResult<()> {
        let (_, list) = self.open.pop().unwrap_or((true, false));
        self.out.push(if list { b']' } else { b'}' });
        Ok(())
    }

    /// A large batch's message records (hashing and JSON: most of a batched frame's cost) are written in
    /// pieces on the thread pool and joined in order: the same bytes as one loop, on every core.
    fn messages(&mut self, key: Key<'_>, messages: &[Value], base: Option<&Value>, payload_bytes: bool) -> PyResult<()> {
        // (on a thread of the pool already, as the records of `analysis/pooled.rs` are: the other threads are
        // busy with other frames)
        if messages.len() < PARALLEL_MESSAGES || rayon::current_num_threads() < 2 || rayon::current_thread_index().is_some() {
            return write_messages(self, key, messages, base, payload_bytes);
        }
        self.open(key, true)?;
        let pieces: Vec<PyResult<Vec<u8>>> = messages
            .par_chunks(PARALLEL_MESSAGES / 2)
            .map(|piece| {
                let mut out = Vec::with_capacity(piece.len() * 200);
                let mut sink = JsonSink::new(&mut out);
                sink.open.push((true, true)); // inside the list: items after the first get their comma
                let base = base.map(MessageIdBase::of);
                for message in piece {
                    write_message(&mut sink, message, base.as_ref(), payload_bytes)?;
                }
                Ok(out)
            })
            .collect();
        for (i, piece) in pieces.into_iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(&piece?);
        }
        if let Some((empty, _)) = self.open.last_mut() {
            *empty = false;
        }
        self.close()
    }
}

/// Messages in a frame from which the JSON sink writes their records on several threads, in pieces of half
/// this many: below, one thread is quicker than handing out the work.
const PARALLEL_MESSAGES: usize = 128;

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
        let dict = crate::value::map_to_py(py, entries)?;
        if self.dicts.len() >= ACTOR_DICTS {
            self.dicts.clear();
        }
        self.dicts.insert(hash, (value.clone(), dict.clone().unbind()));
        Ok(dict.into_any())
    }
}

/// A hash of a value's content.
pub fn content_hash(value: &Value, hasher: &mut impl Hasher) {
    match value {
        Value::Null => hasher.write_u8(0),
        Value::Bool(b) => hasher.write_u8(2 + *b as u8),
        Value::Int(v) => hasher.write_u64(*v as u64),
        Value::UInt(v) => hasher.write_u64(*v),
        Value::Float(v) => hasher.write_u64(v.to_bits()),
        Value::Str(text) => hasher.write(text.as_str().as_bytes()),
        Value::Bytes(bytes) => hasher.write(bytes),
        Value::List(items) => items.iter().for_each(|item| content_hash(item, hasher)),
        Value::Map(entries) => entries.iter().for_each(|(key, value)| {
            hasher.write(key.as_str().as_bytes());
            content_hash(value, hasher);
        }),
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

impl<'py> RecordSink<'py> for DictSink<'py, '_> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, 'py>) -> PyResult<()> {
        let py = self.py;
        let object = match atom {
            Atom::Value(value) => value.to_py(py)?,
            Atom::Values(items) => crate::value::list_to_py(py, items)?.into_any(),
            Atom::Text(text) => text.to_py(py).into_any(),
            Atom::Name(name) => name.to_py(py).to_owned().into_any(),
            Atom::Str(_, Some(object)) => object.clone().into_any(),
            Atom::Str(text, None) | Atom::Plain(text) => PyString::new(py, text).into_any(),
            Atom::Bytes(bytes) => bytes.clone().into_any(),
            Atom::EmptyMap => PyDict::new(py).into_any(),
        };
        self.insert(key, object)
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> PyResult<()> {
        let container = if list { Container::List(PyList::empty(self.py)) } else { Container::Dict(PyDict::new(self.py)) };
        let object = match &container {
            Container::Dict(dict) => dict.clone().into_any(),
            Container::List(list) => list.clone().into_any(),
        };
        self.insert(key, object)?;
        self.open.push(container);
        Ok(())
    }

    fn close(&mut self) -> PyResult<()> {
        self.open.pop();
        Ok(())
    }

    fn note(&mut self, key: &Text, value: &Value) -> PyResult<()> {
        let object = self.actors.value(self.py, key, value)?;
        self.insert(Key::Text(key), object)
    }
}

/// What a [`MapSink`] keeps of a record: top-level keys, told apart by [`key_bit`] (a key is looked up by one bit
/// test and, when its bit is set, one comparison with the kept key of that bit; a search only where two share
/// it), and of one top-level map (a record's command, most of which is not read) only some keys.
pub struct KeptKeys {
    names: &'static [Name],
    bits: u64,
    /// The kept key of each bit, if only one has it.
    only: [Option<&'static str>; 64],
    picked: Option<(&'static str, &'static [Name])>,
}

impl KeptKeys {
    pub fn new(names: &'static [Name]) -> KeptKeys {
        let mut kept = KeptKeys { names, bits: 0, only: [None; 64], picked: None };
        let mut shared = 0u64;
        for name in names {
            let bit = key_bit(name.as_str());
            let slot = bit.trailing_zeros() as usize;
            if kept.bits & bit != 0 {
                shared |= bit;
            }
            kept.bits |= bit;
            kept.only[slot] = Some(name.as_str());
        }
        for slot in 0..64 {
            if shared & (1 << slot) != 0 {
                kept.only[slot] = None;
            }
        }
        kept
    }

    /// Of the map under the top-level `key`, keep only `keys`.
    pub fn picking(self, key: &'static str, keys: &'static [Name]) -> KeptKeys {
        KeptKeys { picked: Some((key, keys)), ..self }
    }

    fn contains(&self, key: &str) -> bool {
        let bit = key_bit(key);
        if self.bits & bit == 0 {
            return false;
        }
        match self.only[bit.trailing_zeros() as usize] {
            Some(only) => only == key,
            None => self.names.iter().any(|k| k.as_str() == key),
        }
    }
}

/// Rust plain data: the record as a [`Map`], for the core's own readers of records (the statistics).
/// `keep`: the top-level keys to keep (the others and what they hold are skipped), or all of them.
pub struct MapSink {
    keep: Option<&'static KeptKeys>,
    open: Vec<(Option<Text>, Value)>,
    /// Depth inside a skipped top-level value.
    skipping: usize,
    record: Option<Map>,
}

impl MapSink {
    pub fn new(keep: Option<&'static KeptKeys>) -> MapSink {
        MapSink { keep, open: Vec::with_capacity(4), skipping: 0, record: None }
    }

    /// The picked keys of `value` if it is the map under the picked key.
    fn pick(&self, key: Key<'_>, value: &Value) -> Option<Value> {
        let (picked, keys) = self.keep?.picked?;
        let (Key::Name(name), Value::Map(map), 1) = (key, value, self.open.len()) else { return None };
        (name.as_str() == picked).then(|| {
            Value::Map(map.iter().filter(|(k, _)| keys.iter().any(|n| n.as_str() == k.as_str())).cloned().collect())
        })
    }

    /// The record, once built.
    pub fn into_record(self) -> Option<Map> {
        self.record
    }

    fn key_text(key: Key<'_>) -> Option<Text> {
        match key {
            Key::Name(name) => Some(Text::Name(name)),
            Key::Text(text) => Some(text.clone()),
            Key::Item => None,
        }
    }

    /// Whether a value under `key` is skipped: a top-level key not kept (or anything inside one).
    fn skips(&self, key: Key<'_>) -> bool {
        if self.skipping > 0 {
            return true;
        }
        let Some(keep) = self.keep else { return false };
        if self.open.len() != 1 {
            return false;
        }
        let name = match key {
            Key::Name(name) => name.as_str(),
            Key::Text(text) => text.as_str(),
            Key::Item => return false,
        };
        !keep.contains(name)
    }

    fn insert(&mut self, key: Option<Text>, value: Value) -> PyResult<()> {
        match self.open.last_mut() {
            Some((_, Value::Map(map))) => match key {
                Some(key) => map.push((key, value)),
                None => return Err(pyo3::exceptions::PyRuntimeError::new_err("a record value without its key")),
            },
            Some((_, Value::List(items))) => items.push(value),
            Some(_) => return Err(pyo3::exceptions::PyRuntimeError::new_err("a record value in the wrong place")),
            None => match value {
                Value::Map(map) => self.record = Some(map),
                _ => return Err(pyo3::exceptions::PyRuntimeError::new_err("a record that is not a map")),
            },
        }
        Ok(())
    }
}

impl<'py> RecordSink<'py> for MapSink {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, 'py>) -> PyResult<()> {
        if self.skips(key) {
            return Ok(());
        }
        let value = match atom {
            Atom::Value(value) => self.pick(key, value).unwrap_or_else(|| value.clone()),
            Atom::Values(items) => Value::List(items.to_vec()),
            Atom::Text(text) => Value::Str(text.clone()),
            Atom::Name(name) => Value::Str(Text::Name(name)),
            Atom::Str(text, _) | Atom::Plain(text) => Value::Str(Text::Owned(text.to_owned())),
            Atom::Bytes(bytes) => Value::Bytes(bytes.as_bytes().to_vec()),
            Atom::EmptyMap => Value::Map(Map::new()),
        };
        self.insert(Self::key_text(key), value)
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> PyResult<()> {
        if self.skips(key) {
            self.skipping += 1;
            return Ok(());
        }
        // room for a record's keys, or a few (a reallocation per key would cost more than the room)
        let room = if self.open.is_empty() { 32 } else { 4 };
        let empty = if list { Value::List(Vec::with_capacity(room)) } else { Value::Map(Map::with_capacity(room)) };
        self.open.push((Self::key_text(key), empty));
        Ok(())
    }

    fn close(&mut self) -> PyResult<()> {
        if self.skipping > 0 {
            self.skipping -= 1;
            return Ok(());
        }
        match self.open.pop() {
            Some((key, value)) => self.insert(key, value),
            None => Err(pyo3::exceptions::PyRuntimeError::new_err("a record closed twice")),
        }
    }
}

// ------------------------------------------------------------------------------------- finding texts

/// What a record shows of one finding (`problems.expert_record`): its id, severity and text.
pub struct Expert<'py> {
    pub id: &'static Name,
    pub severity: &'static Name,
    pub message: Message<'py>,
}

/// A finding's text: Python's string (which a dict record takes as it is), or a copy a record written off
/// the interpreter's thread reads.
pub enum Message<'py> {
    Python(Bound<'py, PyString>),
    Owned(String),
}

impl<'py> Message<'py> {
    fn atom(&self) -> PyResult<Atom<'_, 'py>> {
        Ok(match self {
            Message::Python(text) => Atom::Str(text.to_str()?, Some(text)),
            Message::Owned(text) => Atom::Str(text, None),
        })
    }

    /// The text, owned: for a record written on another thread.
    pub fn to_owned_text(&self) -> PyResult<String> {
        Ok(match self {
            Message::Python(text) => text.to_str()?.to_owned(),
            Message::Owned(text) => text.clone(),
        })
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
pub fn finding_text(py: Python<'_>, severity_and_message: Py<PyAny>, pid: &str, params: Bound<'_, pyo3::types::PyDict>)
                    -> PyResult<(String, String)> {
    let finding = Finding { id: intern_name(pid), params: crate::value::map_from_py(&params)? };
    let expert = FindingTexts::new(severity_and_message).expert(py, &finding)?;
    Ok((expert.severity.as_str().to_owned(), expert.message.to_owned_text()?))
}

/// The severity and text of findings, from `problems.severity_and_message`; the same finding (id and
/// parameters) is asked for once.
pub struct FindingTexts {
    severity_and_message: Py<PyAny>,
    known: FastMap<u64, (Finding, &'static Name, Py<PyString>)>,
    /// Set for records only counted (the statistics): the severity alone, asked once per id, and an empty
    /// text. A finding's text is mostly unique (a message id in it), so asking Python costs a call each.
    severity_only: Option<FastMap<&'static str, &'static Name>>,
    /// Per id, its severity and template when the template is in pieces the core renders itself
    /// (`problems.Pieces`, asked once per id through `severity_and_message.pieces`), else None.
    pieces: FastMap<&'static str, Option<(&'static Name, crate::pieces::Pieces)>>,
}

impl FindingTexts {
    pub fn new(severity_and_message: Py<PyAny>) -> FindingTexts {
        FindingTexts { severity_and_message, known: FastMap::default(), severity_only: None, pieces: FastMap::default() }
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
            let read = declared.and_then(|(severity, pieces)| Some((severity_name(&severity), crate::pieces::Pieces::read(&pieces)?)));
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

    pub fn expert<'py>(&mut self, py: Python<'py>, finding: &Finding) -> PyResult<Expert<'py>> {
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

    fn ask<'py>(&mut self, py: Python<'py>, finding: &Finding) -> PyResult<Expert<'py>> {
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
                return Ok(Expert { id: finding.id, severity, message: Message::Python(message.bind(py).clone()) });
            }
        }
        let params = crate::value::map_to_py(py, &finding.params)?;
        let texts = self.severity_and_message.bind(py).call1((finding.id.to_py(py), params))?;
        let (severity, message): (Bound<'py, PyString>, Bound<'py, PyString>) = texts.extract()?;
        let severity = severity_name(severity.to_str()?);
        if self.known.len() >= FINDING_TEXTS {
            self.known.clear();
        }
        self.known.insert(hash, (finding.clone(), severity, message.clone().unbind()));
        Ok(Expert { id: finding.id, severity, message: Message::Python(message) })
    }
}

// ------------------------------------------------------------------------------------------ the record

/// Which record: `summary` puts `messages_summary` in place of the messages' records (for views that show
/// no message); `payload_bytes` (--payload) adds each message's payload to its record, as `payload_text`
/// when it is UTF-8, else `payload_b64`.
#[derive(Clone, Copy, Default)]
pub struct RecordStyle {
    pub summary: bool,
    pub payload_bytes: bool,
}

/// The Python strings of a frame's protocol, src, dst and direction (the pipeline's), for the dict sink.
pub type RouteObjects<'a, 'py> = [&'a Bound<'py, PyString>; 4];

/// A frame and what the record adds to it.
pub struct RecordInput<'a, 'py> {
    pub frame: &'a Frame<'a>,
    /// None for a record written off the interpreter's thread (the JSON sink needs no Python string).
    pub route: Option<RouteObjects<'a, 'py>>,
    /// The packet of the frame's first byte.
    pub first_packet: i64,
    /// The decoder's then the analysis' findings.
    pub expert: &'a [Expert<'py>],
    /// A Python-declared protocol's own keys (`ProtocolSpec.record_fields`).
    pub protocol_keys: Option<&'a Map>,
    pub notes: &'a Map,
    /// The frame's bytes (`Options.keep_frame_bytes`).
    pub data: Option<&'a Bound<'py, PyBytes>>,
}

/// The keys a frame's record holds before its notes (those `build_record` writes).
const BASE_KEYS: [&str; 22] = [
    "index", "protocol", "time", "conn", "src", "dst", "direction", "packet", "type", "command", "size",
    "problems", "expert", "first_packet", "checksum", "broker_entry_metadata", "metadata", "payload_size",
    "checksum_detail", "uncompressed_size", "encrypted", "marker",
];

/// Whether one of these notes replaces a key of the record itself (as `dict.update` merges them): a reader of
/// the frame alone, not of its record (the timeline's lines), would show the value replaced.
pub fn notes_replace_a_key(notes: &Map) -> bool {
    notes.iter().any(|(key, _)| BASE_KEYS.contains(&key.as_str()))
}

/// The keys merged over the record (a protocol's keys, then the notes), with `dict.update`'s semantics: a
/// key already in the record keeps its place and takes the last value given for it.
struct Merged<'a> {
    layers: [&'a [(Text, Value)]; 2],
    used: [Vec<bool>; 2],
    /// A bit per key of the layers (`key_bit`): most of the record's keys are in no layer, and are passed by
    /// one test.
    keys: u64,
}

/// (The mix keeps the record's keys and the usual notes' on different bits.)
fn key_bit(key: &str) -> u64 {
    let bytes = key.as_bytes();
    let byte = |i: usize| bytes.get(i).copied().unwrap_or(0) as u64;
    1 << ((bytes.len() as u64 + byte(0) * 7 + byte(1) * 3 + byte(bytes.len().wrapping_sub(1))) % 64)
}

impl<'a> Merged<'a> {
    fn new(protocol_keys: Option<&'a Map>, notes: &'a Map) -> Merged<'a> {
        let protocol_keys = protocol_keys.map_or(&[][..], Vec::as_slice);
        let keys = protocol_keys.iter().chain(notes).fold(0, |bits, (key, _)| bits | key_bit(key.as_str()));
        Merged { layers: [protocol_keys, notes], used: [vec![false; protocol_keys.len()], vec![false; notes.len()]], keys }
    }

    /// The value a later layer gives `key` (marking it placed in every layer), if any.
    fn take(&mut self, key: &str) -> Option<&'a Value> {
        let mut found = None;
        for (layer, used) in self.layers.iter().zip(self.used.iter_mut()) {
            if let Some(i) = layer.iter().position(|(k, _)| k.as_str() == key) {
                used[i] = true;
                found = Some(&layer[i].1);
            }
        }
        found
    }

    /// Put the record's own `key` unless a later layer replaces its value: then that value, in its place.
    /// True when it was replaced.
    fn replaced<'py>(&mut self, sink: &mut impl RecordSink<'py>, key: &'static Name) -> PyResult<bool> {
        if self.keys & key_bit(key.as_str()) == 0 {
            return Ok(false);
        }
        match self.take(key.as_str()) {
            Some(value) => sink.put(Key::Name(key), Atom::Value(value)).map(|_| true),
            None => Ok(false),
        }
    }

    /// The keys the record did not hold, in order: the protocol's (a note may replace them), then the notes.
    fn rest<'py>(&mut self, sink: &mut impl RecordSink<'py>) -> PyResult<()> {
        for i in 0..self.layers[0].len() {
            if self.used[0][i] {
                continue;
            }
            let (key, value) = &self.layers[0][i];
            let value = match self.layers[1].iter().position(|(k, _)| k == key) {
                Some(j) => {
                    self.used[1][j] = true;
                    &self.layers[1][j].1
                }
                None => value,
            };
            sink.put(Key::Text(key), Atom::Value(value))?;
        }
        for (i, (key, value)) in self.layers[1].iter().enumerate() {
            if !self.used[1][i] {
                sink.note(key, value)?;
            }
        }
        Ok(())
    }
}

/// Put the record's own `$key`, its value written by `$put`, unless a later layer replaced it
/// ([`Merged::replaced`]).
macro_rules! own {
    ($merged:expr, $sink:expr, $key:literal, $put:expr) => {
        if !$merged.replaced($sink, name!($key))? {
            let key = Key::Name(name!($key));
            ($put)(key)?;
        }
    };
}

/// Write a frame's record to `sink`. Returns the number of its problems (what --strict counts).
pub fn build_record<'py>(sink: &mut impl RecordSink<'py>, input: &RecordInput<'_, 'py>, style: RecordStyle) -> PyResult<usize> {
    let (frame, pdu) = (input.frame, input.frame.pdu);
    let mut merged = Merged::new(input.protocol_keys, input.notes);
    sink.open(Key::Item, false)?;
    own!(merged, sink, "index", |key| sink.put(key, Atom::Value(&Value::from(frame.index))));
    own!(merged, sink, "protocol", |key| sink.put(key, Atom::Str(frame.protocol, input.route.map(|r| r[0]))));
    own!(merged, sink, "time", |key| sink.put(key, Atom::Value(&Value::Float(frame.time))));
    own!(merged, sink, "conn", |key| sink.put(key, Atom::Value(&Value::from(frame.conn))));
    own!(merged, sink, "src", |key| sink.put(key, Atom::Str(frame.src, input.route.map(|r| r[1]))));
    own!(merged, sink, "dst", |key| sink.put(key, Atom::Str(frame.dst, input.route.map(|r| r[2]))));
    own!(merged, sink, "direction", |key| sink.put(key, Atom::Str(frame.direction, input.route.map(|r| r[3]))));
    own!(merged, sink, "packet", |key| sink.put(key, Atom::Value(&Value::from(frame.packet))));
    own!(merged, sink, "type", |key| sink.put(key, Atom::Text(&pdu.type_name)));
    own!(merged, sink, "command", |key| match &pdu.command {
        Some(command) => sink.put(key, Atom::Value(command)),
        None => sink.put(key, Atom::EmptyMap),
    });
    own!(merged, sink, "size", |key| sink.put(key, Atom::Value(&Value::from(pdu.size))));
    let note = name!("note");
    let mut problems = input.expert.iter().filter(|e| e.severity != note).count();
    match merged.replaced(sink, name!("problems"))? {
        true => problems = merged.layers.iter().rev().find_map(|l| map_get_slice(l, "problems"))
            .and_then(Value::as_list).map_or(0, <[Value]>::len),
        false => {
            sink.open(Key::Name(name!("problems")), true)?;
            for e in input.expert.iter().filter(|e| e.severity != note) {
                sink.put(Key::Item, e.message.atom()?)?;
            }
            sink.close()?;
        }
    }
    if !input.expert.is_empty() {
        own!(merged, sink, "expert", |key| -> PyResult<()> {
            sink.open(key, true)?;
            for e in input.expert {
                sink.open(Key::Item, false)?;
                sink.put(Key::Name(name!("id")), Atom::Name(e.id))?;
                sink.put(Key::Name(name!("severity")), Atom::Name(e.severity))?;
                sink.put(Key::Name(name!("message")), e.message.atom()?)?;
                sink.close()?;
            }
            sink.close()
        });
    }
    if u64::try_from(input.first_packet).ok() != Some(frame.packet) {
        own!(merged, sink, "first_packet", |key| sink.put(key, Atom::Value(&Value::Int(input.first_packet))));
    }
    if let Some(section) = pdu.payload() {
        section_keys(sink, &mut merged, pdu, section, style)?;
    } else if let Some(tube) = pdu.tube() {
        tube_keys(sink, &mut merged, tube, style)?;
    }
    merged.rest(sink)?;
    if let Some(data) = input.data {
        sink.put(Key::Name(name!("frame_bytes")), Atom::Bytes(data))?;
    }
    sink.close()?;
    Ok(problems)
}

fn map_get_slice<'m>(map: &'m [(Text, Value)], key: &str) -> Option<&'m Value> {
    map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

/// Pulsar's payload section keys.
fn section_keys<'py>(sink: &mut impl RecordSink<'py>, merged: &mut Merged<'_>, pdu: &Decoded, section: &PayloadSection,
                     style: RecordStyle) -> PyResult<()> {
    own!(merged, sink, "checksum", |key| sink.put(key, Atom::Name(section.checksum.name())));
    own!(merged, sink, "broker_entry_metadata", |key| match &section.broker_entry_metadata {
        Some(value) => sink.put(key, Atom::Value(value)),
        None => sink.put(key, Atom::Value(&Value::Null)),
    });
    own!(merged, sink, "metadata", |key| match (&section.metadata, style.summary) {
        (Some(Value::Map(metadata)), true) => brief_metadata(sink, key, metadata),
        (Some(metadata), _) => sink.put(key, Atom::Value(metadata)),
        (None, _) => sink.put(key, Atom::Value(&Value::Null)),
    });
    own!(merged, sink, "payload_size", |key| sink.put(key, Atom::Value(&Value::from(section.payload_size))));
    if section.checksum == Checksum::Invalid {
        own!(merged, sink, "checksum_detail", |key| -> PyResult<()> {
            sink.open(key, false)?;
            sink.put(Key::Name(name!("wire")), Atom::Value(&Value::from(section.checksum_wire)))?;
            sink.put(Key::Name(name!("computed")), Atom::Value(&Value::from(section.checksum_computed)))?;
            sink.close()
        });
    }
    if let Some(size) = section.uncompressed_size {
        own!(merged, sink, "uncompressed_size", |key| sink.put(key, Atom::Value(&Value::from(size))));
    }
    if section.encrypted {
        own!(merged, sink, "encrypted", |key| sink.put(key, Atom::Value(&Value::Bool(true))));
    }
    if let Some(marker) = &section.marker {
        own!(merged, sink, "marker", |key| sink.put(key, Atom::Value(marker)));
    }
    if style.summary {
        own!(merged, sink, "messages_summary", |key| match &section.batch_later {
            Some(batch) => sink.put(key, Atom::Value(&batch.summary)),
            None => messages_summary(sink, key, &section.messages),
        });
        return Ok(());
    }
    own!(merged, sink, "messages", |key| {
        let base = if pdu.type_name.as_str() == "MESSAGE" { pdu.command.as_ref().and_then(|c| c.get("message_id")) } else { None };
        match &section.batch_later {
            Some(batch) => write_batch_messages(sink, key, batch, base, style.payload_bytes),
            None => sink.messages(key, &section.messages, base, style.payload_bytes),
        }
    });
    Ok(())
}

/// TubeMQ's keys: the serial number, the envelope, the messages carried.
fn tube_keys<'py>(sink: &mut impl RecordSink<'py>, merged: &mut Merged<'_>, tube: &TubeBody, style: RecordStyle) -> PyResult<()> {
    own!(merged, sink, "serial", |key| sink.put(key, Atom::Value(&Value::from(tube.serial as i64))));
    own!(merged, sink, "rpc", |key| -> PyResult<()> {
        sink.open(key, false)?;
        for (k, v) in &tube.rpc {
            sink.put(Key::Text(k), Atom::Value(v))?;
        }
        sink.close()
    });
    if tube.messages.is_empty() {
        return Ok(());
    }
    own!(merged, sink, "checksum", |key| sink.put(key, Atom::Name(match crate::tubemq::checksum_verdict(&tube.messages) {
        "invalid" => name!("invalid"),
        "valid" => name!("valid"),
        _ => name!("absent"),
    })));
    if style.summary {
        own!(merged, sink, "messages_summary", |key| messages_summary(sink, key, &tube.messages));
        return Ok(());
    }
    own!(merged, sink, "messages", |key| write_carried_messages(sink, key, &tube.messages, style.payload_bytes));
    Ok(())
}

/// The records of messages a protocol decoded as maps already in their record's order (TubeMQ's): the
/// payload's size and SHA-256 first, then the fields as they are, the payload itself only with
/// `payload_bytes` (`payload_text`, else `payload_b64`).
fn write_carried_messages<'py>(sink: &mut impl RecordSink<'py>, key: Key<'_>, messages: &[Value], payload_bytes: bool) -> PyResult<()> {
    sink.open(key, true)?;
    for message in messages {
        let fields = message.as_map().map_or(&[][..], Vec::as_slice);
        let payload = map_get_slice(fields, "payload").and_then(Value::as_bytes);
        sink.open(Key::Item, false)?;
        put_payload_digest(sink, map_get_slice(fields, "payload_size").unwrap_or(&Value::Null), payload)?;
        for (k, v) in fields.iter().filter(|(k, _)| !matches!(k.as_str(), "payload" | "payload_size")) {
            sink.put(Key::Text(k), Atom::Value(v))?;
        }
        if let (true, Some(payload)) = (payload_bytes, payload) {
            put_payload_bytes(sink, payload)?;
        }
        sink.close()?;
    }
    sink.close()
}

/// Where a message's field goes among its record's keys after payload_size, payload_sha256 and message_id.
fn record_place(key: &str) -> Option<usize> {
    Some(match key {
        "batch_index" => 0,
        "sequence_id" => 1,
        "partition_key" => 2,
        "ordering_key" => 3,
        "properties" => 4,
        "event_time" => 5,
        "null_value" => 6,
        "null_partition_key" => 7,
        "compacted_out" => 8,
        "acked" => 9,
        "encrypted" => 10,
        "chunk_id" => 11,
        "num_chunks" => 12,
        "uuid" => 13,
        _ => return None,
    })
}

/// The records of a frame's messages (the contract's `messages`), written as they are read off the decoded
/// messages (no record made first): sizes, the payload's SHA-256, for a MESSAGE frame each one's id (`base`:
/// the command's message_id), then the fields present, ordering_key as text when UTF-8 (else
/// `ordering_key_b64`); with `payload_bytes` the payload too (`payload_text`, else `payload_b64`).
pub fn write_messages<'py>(sink: &mut impl RecordSink<'py>, key: Key<'_>, messages: &[Value], base: Option<&Value>,
                           payload_bytes: bool) -> PyResult<()> {
    sink.open(key, true)?;
    let base = base.map(MessageIdBase::of);
    for message in messages {
        write_message(sink, message, base.as_ref(), payload_bytes)?;
    }
    sink.close()
}

/// A MESSAGE frame's message_id, the start of each of its messages' ids: read once per frame, not per message.
struct MessageIdBase<'a> {
    ledger: &'a Value,
    entry: &'a Value,
    partition: &'a Value,
}

impl<'a> MessageIdBase<'a> {
    fn of(id: &'a Value) -> MessageIdBase<'a> {
        MessageIdBase {
            ledger: id.get("ledgerId").unwrap_or(&Value::Null),
            entry: id.get("entryId").unwrap_or(&Value::Null),
            partition: id.get("partition").unwrap_or(&Value::Int(-1)),
        }
    }
}

/// The records of a batch kept whole by the decoder (`payload::BatchLater`), as [`write_messages`] writes
/// those of the messages it splits into: each entry's record is written from the entry as read (its fields put
/// in their places, no message map made), its payload hashed where it lies in the batch.
pub fn write_batch_messages<'py>(sink: &mut impl RecordSink<'py>, key: Key<'_>, batch: &BatchLater, base: Option<&Value>,
                                 payload_bytes: bool) -> PyResult<()> {
    let core = crate::core();
    sink.open(key, true)?;
    let base = base.map(MessageIdBase::of);
    let mut result = Ok(());
    batch.entries(|e| {
        if result.is_ok() {
            result = write_batch_entry(sink, core, e, batch.keep_payloads, base.as_ref(), payload_bytes);
        }
    });
    result?;
    sink.close()
}

/// One batch entry's record: what `write_message` writes of `payload::batch_message`'s map.
fn write_batch_entry<'py>(sink: &mut impl RecordSink<'py>, core: &crate::Core, e: &payload::BatchEntry<'_>,
                          batch_keeps_payloads: bool, base: Option<&MessageIdBase<'_>>, payload_bytes: bool) -> PyResult<()> {
    // entry_fields gives the same names in the same order every time: their places are looked up once
    static PLACES_OF_FIELDS: std::sync::OnceLock<Vec<Option<usize>>> = std::sync::OnceLock::new();
    let fields = payload::entry_fields(core, e);
    let places = PLACES_OF_FIELDS.get_or_init(|| fields.iter().map(|(name, _)| record_place(name.as_str())).collect());
    let mut placed: Placed<'_> = [None; PLACES];
    for ((name, value), place) in fields.iter().zip(places) {
        if let (Some(value), Some(place)) = (value, place) {
            placed[*place] = Some((Key::Name(name), value));
        }
    }
    let payload = batch_keeps_payloads.then_some(e.payload);
    write_message_parts(sink, &Value::from(e.payload.len()), payload, &placed, base, payload_bytes)
}

/// One message's record (see [`write_messages`]).
fn write_message<'py>(sink: &mut impl RecordSink<'py>, message: &Value, base: Option<&MessageIdBase<'_>>, payload_bytes: bool) -> PyResult<()> {
    let (mut payload_size, mut payload) = (&Value::Null, None);
    let mut placed: Placed<'_> = [None; PLACES];
    for (key, value) in message.as_map().map_or(&[][..], Vec::as_slice) {
        match key.as_str() {
            "payload_size" => payload_size = value,
            "payload" => payload = value.as_bytes(),
            name => {
                if let Some(place) = record_place(name) {
                    placed[place] = Some((Key::Text(key), value));
                }
            }
        }
    }
    write_message_parts(sink, payload_size, payload, &placed, base, payload_bytes)
}

/// Places of a message record's fields after payload_size, payload_sha256 and message_id (`record_place`).
const PLACES: usize = 14;
/// A message's fields at their places in its record.
type Placed<'a> = [Option<(Key<'a>, &'a Value)>; PLACES];

/// A message's record from its size, payload and fields in their places.
fn write_message_parts<'py>(sink: &mut impl RecordSink<'py>, payload_size: &Value, payload: Option<&[u8]>,
                            placed: &Placed<'_>, base: Option<&MessageIdBase<'_>>, payload_bytes: bool) -> PyResult<()> {
    sink.open(Key::Item, false)?;
    put_payload_digest(sink, payload_size, payload)?;
    if let Some(base) = base {
        let batch_index = placed[0].map(|(_, v)| v).filter(|v| !v.is_null());
        sink.open(Key::Name(name!("message_id")), false)?;
        sink.put(Key::Name(name!("ledger_id")), Atom::Value(base.ledger))?;
        sink.put(Key::Name(name!("entry_id")), Atom::Value(base.entry))?;
        sink.put(Key::Name(name!("partition")), Atom::Value(base.partition))?;
        sink.put(Key::Name(name!("batch_index")), Atom::Value(batch_index.unwrap_or(&Value::Int(-1))))?;
        sink.close()?;
    }
    for (place, (key, value)) in placed.iter().enumerate().filter_map(|(place, field)| Some((place, (*field)?))) {
        match (place, value) {
            (3, Value::Bytes(raw)) => match std::str::from_utf8(raw) {
                // ordering_key: as text when it is UTF-8
                Ok(text) => sink.put(Key::Name(name!("ordering_key")), Atom::Str(text, None))?,
                Err(_) => sink.put(Key::Name(name!("ordering_key_b64")), Atom::Str(&b64(raw), None))?,
            },
            _ => sink.put(key, Atom::Value(value))?,
        }
    }
    if let (true, Some(payload)) = (payload_bytes, payload) {
        put_payload_bytes(sink, payload)?;
    }
    sink.close()
}

/// A message record's `payload_size` and `payload_sha256` (null without the payload).
fn put_payload_digest<'py>(sink: &mut impl RecordSink<'py>, payload_size: &Value, payload: Option<&[u8]>) -> PyResult<()> {
    sink.put(Key::Name(name!("payload_size")), Atom::Value(payload_size))?;
    match payload {
        Some(payload) => sink.put(Key::Name(name!("payload_sha256")), Atom::Plain(sha256_hex(payload, &mut [0; 64]))),
        None => sink.put(Key::Name(name!("payload_sha256")), Atom::Value(&Value::Null)),
    }
}

/// A message's payload itself (`--payload`): `payload_text` when it is UTF-8, else `payload_b64`.
fn put_payload_bytes<'py>(sink: &mut impl RecordSink<'py>, payload: &[u8]) -> PyResult<()> {
    match std::str::from_utf8(payload) {
        Ok(text) => sink.put(Key::Name(name!("payload_text")), Atom::Str(text, None)),
        Err(_) => sink.put(Key::Name(name!("payload_b64")), Atom::Str(&b64(payload), None)),
    }
}

/// The SHA-256 of `data` in hex, written into `hex` (no allocation per message).
fn sha256_hex<'h>(data: &[u8], hex: &'h mut [u8; 64]) -> &'h str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in hex.chunks_exact_mut(2).zip(crate::codecs::sha256(data).iter()) {
        pair[0] = HEX[(b >> 4) as usize];
        pair[1] = HEX[(b & 15) as usize];
    }
    std::str::from_utf8(hex).unwrap_or_default() // ASCII digits only
}


/// The metadata fields a one-line view shows.
fn brief_metadata<'py>(sink: &mut impl RecordSink<'py>, key: Key<'_>, metadata: &Map) -> PyResult<()> {
    const BRIEF: [&str; 6] = ["compression", "schema_version", "encryption_algo", "marker_type",
                              "num_messages_in_batch", "deliver_at_time"];
    sink.open(key, false)?;
    for field in BRIEF {
        let Some((name, value)) = metadata.iter().find(|(k, _)| k.as_str() == field) else { continue };
        if field == "compression" && value.as_str() == Some("NONE") {
            continue;
        }
        sink.put(Key::Text(name), Atom::Value(value))?;
    }
    if let Some(keys) = map_get(metadata, "encryption_keys") {
        sink.open(Key::Name(name!("encryption_keys")), true)?;
        for k in keys.as_list().unwrap_or(&[]) {
            sink.open(Key::Item, false)?;
            sink.put(Key::Name(name!("key")), Atom::Value(k.get("key").unwrap_or(&Value::Null)))?;
            sink.close()?;
        }
        sink.close()?;
    }
    sink.close()
}

/// count, bytes, and a chunk's ids.
fn messages_summary<'py>(sink: &mut impl RecordSink<'py>, key: Key<'_>, messages: &[Value]) -> PyResult<()> {
    let bytes: i64 = messages.iter().filter_map(|m| m.get("payload_size").and_then(Value::as_i64)).sum();
    sink.open(key, false)?;
    sink.put(Key::Name(name!("count")), Atom::Value(&Value::from(messages.len())))?;
    sink.put(Key::Name(name!("bytes")), Atom::Value(&Value::Int(bytes)))?;
    if let Some(first) = messages.first().filter(|m| m.get("chunk_id").is_some()) {
        sink.open(Key::Name(name!("chunk")), false)?;
        sink.put(Key::Name(name!("chunk_id")), Atom::Value(first.get("chunk_id").unwrap_or(&Value::Null)))?;
        sink.put(Key::Name(name!("num_chunks")), Atom::Value(first.get("num_chunks").unwrap_or(&Value::Null)))?;
        sink.put(Key::Name(name!("uuid")), Atom::Value(first.get("uuid").unwrap_or(&Value::Null)))?;
        sink.close()?;
    }
    sink.close()
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
    pub fn read(frame: &Bound<'py, PyAny>, protocol_spec: &Bound<'py, PyAny>, style: RecordStyle) -> PyResult<PyFrameData<'py>> {
        let py = frame.py();
        let text = |name: &Bound<'py, PyString>| -> PyResult<Bound<'py, PyString>> { Ok(frame.getattr(name)?.cast_into::<PyString>()?) };
        let route = [
            text(pyo3::intern!(py, "protocol"))?, text(pyo3::intern!(py, "src"))?,
            text(pyo3::intern!(py, "dst"))?, text(pyo3::intern!(py, "direction"))?,
        ];
        let pdu = frame.getattr(pyo3::intern!(py, "pdu"))?;
        let command = pdu.getattr(pyo3::intern!(py, "command"))?;
        let body = pdu.getattr(pyo3::intern!(py, "body"))?;
        // a body: its protocol's record_fields make its keys, else the core's for a payload section
        let (body, protocol_keys) = if body.is_none() {
            (None, None)
        } else {
            let record_fields = protocol_spec.call1((&route[0],))?.getattr(pyo3::intern!(py, "record_fields"))?;
            if !record_fields.is_none() {
                let keys = record_fields.call1((frame, style.payload_bytes, style.summary))?;
                (None, Some(crate::value::map_from_py(&keys)?))
            } else if crate::binding::is_payload_section(&body) {
                (Some(Body::Payload(section_from_py(&body)?)), None)
            } else if let Ok(tube) = body.cast::<pyo3::types::PyDict>() {
                (Some(Body::Tube(crate::binding::tube_from_py(tube)?)), None)
            } else {
                (None, None)
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
                command: if command.is_none() { None } else { Some(Value::from_py(&command)?) },
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
pub fn with_py_frame<'py, R>(frame: &Bound<'py, PyAny>, findings: &[Finding], notes: &Map, protocol_spec: &Bound<'py, PyAny>,
                             texts: &mut FindingTexts, style: RecordStyle, f: impl FnOnce(&RecordInput<'_, 'py>) -> R) -> PyResult<R> {
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
        frame: &frame, route: Some([protocol, src, dst, direction]), first_packet: held.first_packet, expert: &expert,
        protocol_keys: held.protocol_keys.as_ref(), notes, data: held.data.as_ref(),
    }))
}

/// `problems.Finding`s (id, params) as findings.
pub fn findings_from_py(findings: &Bound<'_, PyAny>) -> PyResult<Vec<Finding>> {
    let py = findings.py();
    findings.try_iter()?.map(|f| {
        let f = f?;
        let id: String = f.getattr(pyo3::intern!(py, "id"))?.extract()?;
        Ok(Finding { id: intern_name(&id), params: crate::value::map_from_py(&f.getattr(pyo3::intern!(py, "params"))?)? })
    }).collect()
}

/// A Python `PayloadSection` (`protocols/pulsar/payload.py`) as the core's.
fn section_from_py(body: &Bound<'_, PyAny>) -> PyResult<PayloadSection> {
    let py = body.py();
    let get = |name: &str| body.getattr(PyString::new(py, name));
    let optional = |name: &str| -> PyResult<Option<Value>> {
        let value = get(name)?;
        Ok(if value.is_none() { None } else { Some(Value::from_py(&value)?) })
    };
    let list = |name: &str| -> PyResult<Vec<Value>> {
        match Value::from_py(&get(name)?)? {
            Value::List(items) => Ok(items),
            _ => Ok(Vec::new()),
        }
    };
    let checksum: String = get("checksum")?.extract()?;
    Ok(PayloadSection {
        checksum: match checksum.as_str() {
            "valid" => Checksum::Valid,
            "invalid" => Checksum::Invalid,
            "unverified" => Checksum::Unverified,
            _ => Checksum::Absent,
        },
        checksum_wire: get("checksum_wire")?.extract()?,
        checksum_computed: get("checksum_computed")?.extract()?,
        broker_entry_metadata: optional("broker_entry_metadata")?,
        metadata: optional("metadata")?,
        metadata_size: get("metadata_size")?.extract()?,
        compression: get("compression")?.extract()?,
        payload_size: get("payload_size")?.extract()?,
        uncompressed_size: get("uncompressed_size")?.extract()?,
        encrypted: get("encrypted")?.is_truthy()?,
        messages: list("messages")?,
        batch_later: None,
        marker: optional("marker")?,
        findings: findings_from_py(&get("findings")?)?,
    })
}

// ---------------------------------------------------------------------------------- for Python callers

/// Records of `model.Annotated` frames made in Python (`output/records.py: record`): the same record as
/// the core makes of the frames it decodes. `json`: the JSON line (bytes, newline included) in place of the
/// dict.
#[pyclass(unsendable, module = "pulsar_dissect_core")]
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
    fn new(severity_and_message: Py<PyAny>, protocol_spec: Py<PyAny>, summary: bool, payload_bytes: bool, json: bool) -> Self {
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
        let notes = crate::value::map_from_py(&item.getattr(pyo3::intern!(py, "notes"))?)?;
        let findings = findings_from_py(&item.getattr(pyo3::intern!(py, "findings"))?)?;
        let (style, json, actors) = (self.style, self.json, &mut self.actors);
        with_py_frame(&frame, &findings, &notes, self.protocol_spec.bind(py), &mut self.texts, style, |input| {
            if json {
                let mut line = Vec::with_capacity(512);
                build_record(&mut JsonSink::new(&mut line), input, style)?;
                line.push(b'\n');
                return Ok(PyBytes::new(py, &line).into_any());
            }
            let mut sink = DictSink::new(py, actors);
            build_record(&mut sink, input, style)?;
            sink.into_record().map(Bound::into_any).ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("no record"))
        })?
    }
}

