//! The `pipeline`'s frames and messages tables as Arrow columns (`dissector/spark/rows.py` wraps them as
//! arrays without a Python object per value), made as the records are written: a record is built once
//! (`records.rs`) into a [`TableSink`], which writes its JSON line (the contract, docs/records.schema.json:
//! byte for byte `--json`'s line) and notes where each value a column takes lies in it. So a column is one of
//! the contract's keys; objects and lists (`command`, `metadata`, `expert`, a message's `properties`...) are
//! kept as their JSON text, exactly as the line has it, and nothing is parsed back. A value of another type
//! than its column's is null there, never an error.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::records::{Atom, JsonSink, Key, RecordSink};
use crate::value::Value;

/// What a column holds, as Arrow types it.
#[derive(Clone, Copy)]
pub enum Kind {
    Int,
    Float,
    Bool,
    /// text (large_string): a string as it is, anything else as its JSON text
    Text,
}

/// One column: its values (little-endian), a validity bitmap, and for text the offsets (int64).
struct Column {
    kind: Kind,
    values: Vec<u8>,
    valid: Vec<u8>,
    offsets: Vec<u8>,
    rows: usize,
}

impl Column {
    fn new(kind: Kind) -> Column {
        let offsets = if matches!(kind, Kind::Text) { 0i64.to_le_bytes().to_vec() } else { Vec::new() };
        Column { kind, values: Vec::new(), valid: Vec::new(), offsets, rows: 0 }
    }

    fn mark(&mut self, valid: bool) {
        if self.rows % 8 == 0 {
            self.valid.push(0);
        }
        if valid {
            *self.valid.last_mut().expect("a byte per eight rows") |= 1 << (self.rows % 8);
        }
        self.rows += 1;
    }

    /// A value, as its JSON text (None: absent).
    fn push(&mut self, value: Option<&str>) {
        let text = value.filter(|t| *t != "null");
        match self.kind {
            Kind::Int => {
                let v = text.and_then(|t| t.parse::<i64>().ok());
                self.values.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
                self.mark(v.is_some());
            }
            Kind::Float => {
                let v = text.and_then(|t| t.parse::<f64>().ok());
                self.values.extend_from_slice(&v.unwrap_or(0.0).to_le_bytes());
                self.mark(v.is_some());
            }
            Kind::Bool => {
                let v = match text {
                    Some("true") => Some(true),
                    Some("false") => Some(false),
                    _ => None,
                };
                if self.rows % 8 == 0 {
                    self.values.push(0);
                }
                if v == Some(true) {
                    *self.values.last_mut().expect("a byte per eight rows") |= 1 << (self.rows % 8);
                }
                self.mark(v.is_some());
            }
            Kind::Text => match text {
                Some(t) if t.starts_with('"') && t.contains('\\') => match serde_json::from_str::<String>(t) {
                    Ok(unescaped) => self.push_text(&unescaped),
                    Err(_) => self.push_text(t),
                },
                Some(t) if t.starts_with('"') && t.len() >= 2 => self.push_text(&t[1..t.len() - 1]),
                Some(t) => self.push_text(t),
                None => {
                    self.offsets.extend_from_slice(&(self.values.len() as i64).to_le_bytes());
                    self.mark(false);
                }
            },
        }
    }

    fn push_text(&mut self, text: &str) {
        self.values.extend_from_slice(text.as_bytes());
        self.offsets.extend_from_slice(&(self.values.len() as i64).to_le_bytes());
        self.mark(true);
    }

    /// (validity, values, offsets) as Python bytes: the buffers of the Arrow array; the column emptied, its
    /// memory kept for the next rows.
    fn take_py<'py>(&mut self, py: Python<'py>) -> (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>) {
        let buffers = (PyBytes::new(py, &self.valid), PyBytes::new(py, &self.values), PyBytes::new(py, &self.offsets));
        self.values.clear();
        self.valid.clear();
        self.offsets.clear();
        if matches!(self.kind, Kind::Text) {
            self.offsets.extend_from_slice(&0i64.to_le_bytes());
        }
        self.rows = 0;
        buffers
    }
}

/// The frames table's columns: (name, kind). `topic`, `producer_*`, `consumer_id` and `subscription` are read
/// from the frame's actor (`frame_value`); `json` is the line itself.
pub const FRAME_COLUMNS: [(&str, Kind); 33] = [
    ("index", Kind::Int), ("protocol", Kind::Text), ("time", Kind::Float), ("conn", Kind::Int), ("src", Kind::Text),
    ("dst", Kind::Text), ("direction", Kind::Text), ("packet", Kind::Int), ("first_packet", Kind::Int),
    ("type", Kind::Text), ("command", Kind::Text), ("size", Kind::Int), ("problems", Kind::Text), ("expert", Kind::Text),
    ("checksum", Kind::Text), ("metadata", Kind::Text), ("broker_entry_metadata", Kind::Text),
    ("payload_size", Kind::Int), ("uncompressed_size", Kind::Int), ("encrypted", Kind::Bool), ("marker", Kind::Text),
    ("serial", Kind::Int), ("answers", Kind::Int), ("latency_ms", Kind::Float), ("request_type", Kind::Text),
    ("topic", Kind::Text), ("client_id", Kind::Text), ("group", Kind::Text), ("producer_name", Kind::Text),
    ("producer_id", Kind::Int), ("consumer_id", Kind::Int), ("subscription", Kind::Text), ("json", Kind::Text),
];

/// The messages table's columns: the frame's (`frame` is its index), then the message's. The message's whole
/// record is in its frame's `json` (`messages[position]`).
pub const MESSAGE_COLUMNS: [(&str, Kind); 22] = [
    ("protocol", Kind::Text), ("frame", Kind::Int), ("position", Kind::Int), ("conn", Kind::Int), ("time", Kind::Float),
    ("type", Kind::Text), ("direction", Kind::Text), ("topic", Kind::Text), ("producer_name", Kind::Text),
    ("producer_id", Kind::Int), ("consumer_id", Kind::Int), ("subscription", Kind::Text),
    ("payload_size", Kind::Int), ("payload_sha256", Kind::Text), ("message_id", Kind::Text), ("batch_index", Kind::Int),
    ("sequence_id", Kind::Int), ("partition_key", Kind::Text), ("ordering_key", Kind::Text), ("properties", Kind::Text),
    ("event_time", Kind::Int), ("publish_time", Kind::Int),
];

/// The record's own keys the frame columns take (`FRAME_COLUMNS` up to `topic`, then `client_id` and
/// `group`), by their place in `TOP_KEYS`.
const TOP_KEYS: [&str; 28] = [
    "index", "protocol", "time", "conn", "src", "dst", "direction", "packet", "first_packet", "type", "command", "size",
    "problems", "expert", "checksum", "metadata", "broker_entry_metadata", "payload_size", "uncompressed_size",
    "encrypted", "marker", "serial", "answers", "latency_ms", "request_type", "topic", "client_id", "group",
];
const TOP_TOPIC: usize = 25;
const TOP_COMMAND: usize = 10;
const TOP_EXPERT: usize = 13;

/// The keys of a producer, a consumer or a command the columns take.
const ACTOR_KEYS: [&str; 4] = ["id", "topic", "name", "subscription"];
const PRODUCER: usize = 0;
const CONSUMER: usize = 1;
const COMMAND: usize = 2;

/// The keys of a message the columns take.
const MESSAGE_KEYS: [&str; 10] = [
    "payload_size", "payload_sha256", "message_id", "batch_index", "sequence_id", "partition_key", "ordering_key",
    "properties", "event_time", "publish_time",
];

fn present(value: Option<&str>) -> Option<&str> {
    value.filter(|t| *t != "null")
}

fn place_of(keys: &[&str], key: &str) -> Option<usize> {
    keys.iter().position(|k| *k == key)
}

/// Where a value lies in the record's line: [start, end).
type Span = Option<(usize, usize)>;

/// What a container being written is, for the columns.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// The record itself.
    Record,
    /// The producer, consumer or command (`PRODUCER`...): some of its keys are columns.
    Actor(usize),
    /// The list of messages, and one of them.
    Messages,
    Message,
    /// Nothing in it is a column of its own.
    Inside,
}

/// Which column a value written is.
#[derive(Clone, Copy)]
enum Slot {
    Top(usize),
    Actor(usize, usize),
    MessageKey(usize),
    /// A message object (a row of its own).
    Message,
    Nothing,
}

/// Where the values the columns take lie in one record's line.
#[derive(Default)]
struct Spans {
    top: [Span; 28],
    actors: [[Span; 4]; 3],
    /// Each message object: its place in the list and its keys' spans (`MESSAGE_KEYS`).
    messages: Vec<(usize, [Span; 10])>,
    /// Items of the messages list so far.
    message_items: usize,
}

/// A record written as its JSON line while the values the columns take are found in it as they are written
/// (nothing is parsed back). `finish` adds the record to the columns.
pub struct TableSink<'o> {
    json: JsonSink<'o>,
    /// Where the record's line begins in the buffer written to.
    base: usize,
    /// Per open container: where its text starts, what it is, and which column it is.
    open: Vec<(usize, Place, Slot)>,
    spans: Spans,
}

impl<'o> TableSink<'o> {
    /// The line is appended to `out`.
    fn new(out: &'o mut Vec<u8>) -> TableSink<'o> {
        let base = out.len();
        TableSink { json: JsonSink::new(out), base, open: Vec::with_capacity(4), spans: Spans::default() }
    }

    /// Whether a container (an object when `object`) under `key` in the container open now holds columns.
    fn holds_columns(&self, key: Key<'_>, object: bool) -> bool {
        let name = match key {
            Key::Name(name) => name.as_str(),
            Key::Text(text) => text.as_str(),
            Key::Item => "",
        };
        match self.open.last().map(|(_, place, _)| *place) {
            Some(Place::Record) => matches!((name, object), ("producer" | "consumer" | "command", true) | ("messages", false)),
            Some(Place::Messages) => object,
            _ => false,
        }
    }

    /// What a value under `key` in the container open now is: its column, and as a container (an object
    /// when `object`) what it holds.
    fn slot(&mut self, key: Key<'_>, object: bool) -> (Place, Slot) {
        let name = match key {
            Key::Name(name) => name.as_str(),
            Key::Text(text) => text.as_str(),
            Key::Item => "",
        };
        match self.open.last().map(|(_, place, _)| *place) {
            None => (Place::Record, Slot::Nothing),
            Some(Place::Record) => match (name, object) {
                ("producer", true) => (Place::Actor(PRODUCER), Slot::Nothing),
                ("consumer", true) => (Place::Actor(CONSUMER), Slot::Nothing),
                ("command", true) => (Place::Actor(COMMAND), Slot::Top(TOP_COMMAND)),
                ("messages", false) if !matches!(key, Key::Item) => (Place::Messages, Slot::Nothing),
                _ => (Place::Inside, place_of(&TOP_KEYS, name).map_or(Slot::Nothing, Slot::Top)),
            },
            Some(Place::Actor(actor)) => (Place::Inside, place_of(&ACTOR_KEYS, name).map_or(Slot::Nothing, |at| Slot::Actor(actor, at))),
            Some(Place::Messages) => {
                self.spans.message_items += 1;
                if object { (Place::Message, Slot::Message) } else { (Place::Inside, Slot::Nothing) }
            }
            Some(Place::Message) => (Place::Inside, place_of(&MESSAGE_KEYS, name).map_or(Slot::Nothing, Slot::MessageKey)),
            Some(Place::Inside) => (Place::Inside, Slot::Nothing),
        }
    }

    /// The value just written from `start` (in the buffer) is `slot`.
    fn found(&mut self, slot: Slot, start: usize) {
        let span = (start - self.base, self.json.out.len() - self.base);
        match slot {
            Slot::Top(at) => self.spans.top[at] = Some(span),
            Slot::Actor(actor, at) => self.spans.actors[actor][at] = Some(span),
            Slot::MessageKey(at) => {
                if let Some(message) = self.spans.messages.last_mut() {
                    message.1[at] = Some(span);
                }
            }
            Slot::Message | Slot::Nothing => {}
        }
    }

}

impl<'py> RecordSink<'py> for TableSink<'_> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, 'py>) -> PyResult<()> {
        // a container put whole (an analysis note such as `producer`) whose keys are columns: written as
        // opened, filled and closed (the same text), so that its keys are found
        match atom {
            Atom::Value(value @ (Value::Map(_) | Value::List(_))) if self.holds_columns(key, matches!(value, Value::Map(_))) => {
                return write_value(self, key, value);
            }
            Atom::Values(items) if self.holds_columns(key, false) => {
                self.open(key, true)?;
                for item in items {
                    write_value(self, Key::Item, item)?;
                }
                return self.close();
            }
            _ => {}
        }
        let (_, slot) = self.slot(key, false);
        self.json.put(key, atom)?;
        self.found(slot, self.json.value_start);
        Ok(())
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> PyResult<()> {
        let (place, slot) = self.slot(key, !list);
        // a list under "messages" is the messages; any other list holds nothing of its own
        let place = if list && place != Place::Messages { Place::Inside } else { place };
        self.json.open(key, list)?;
        if matches!(slot, Slot::Message) {
            let position = self.spans.message_items - 1;
            self.spans.messages.push((position, Default::default()));
        }
        self.open.push((self.json.value_start, place, slot));
        Ok(())
    }

    fn close(&mut self) -> PyResult<()> {
        self.json.close()?;
        if let Some((start, _, slot)) = self.open.pop() {
            self.found(slot, start);
        }
        Ok(())
    }
}

/// The frames and messages of records as columns, until taken.
pub struct TableColumns {
    frames: Vec<Column>,
    messages: Vec<Column>,
    frame_rows: usize,
    message_rows: usize,
}

impl Default for TableColumns {
    fn default() -> Self {
        TableColumns::new()
    }
}

impl TableColumns {
    pub fn new() -> TableColumns {
        TableColumns {
            frames: FRAME_COLUMNS.iter().map(|(_, kind)| Column::new(*kind)).collect(),
            messages: MESSAGE_COLUMNS.iter().map(|(_, kind)| Column::new(*kind)).collect(),
            frame_rows: 0,
            message_rows: 0,
        }
    }

    /// Bytes the columns hold (what a writer flushes by).
    pub fn size(&self) -> usize {
        self.frames.iter().chain(&self.messages).map(|c| c.values.len() + c.offsets.len()).sum()
    }

    /// A record, written by `build` into a `TableSink`: its line straight into the `json` column (no copy),
    /// its values into the others. On an error nothing of it is kept.
    pub fn record(&mut self, build: impl FnOnce(&mut TableSink<'_>) -> PyResult<usize>) -> PyResult<usize> {
        let json = self.frames.last_mut().expect("a json column");
        let mut out = std::mem::take(&mut json.values);
        let base = out.len();
        let mut sink = TableSink::new(&mut out);
        let built = build(&mut sink);
        let spans = std::mem::take(&mut sink.spans);
        let kept = match (&built, std::str::from_utf8(&out[base..])) {
            (Ok(_), Ok(line)) => {
                self.add(line, &spans);
                true
            }
            _ => false,
        };
        if !kept {
            out.truncate(base);
        }
        let json = self.frames.last_mut().expect("a json column");
        json.values = out;
        if kept {
            json.offsets.extend_from_slice(&(json.values.len() as i64).to_le_bytes());
            json.mark(true);
        }
        built
    }

    /// A record's line and where its values lie in it (`TableSink`): every column but `json`.
    fn add(&mut self, line: &str, spans: &Spans) {
        let text = |span: Span| span.and_then(|(start, end)| line.get(start..end));
        let top = |at: usize| text(spans.top[at]);
        let actor = |actor: usize, at: usize| text(spans.actors[actor][at]);
        let mut values: [Option<&str>; 32] = [None; 32];
        for (at, value) in values.iter_mut().enumerate().take(TOP_KEYS.len()) {
            *value = top(at);
        }
        // no findings is no value; the frame's topic is its producer's, its consumer's, its own, its command's
        values[TOP_EXPERT] = top(TOP_EXPERT).filter(|e| *e != "[]");
        values[TOP_TOPIC] = present(actor(PRODUCER, 1)).or(present(actor(CONSUMER, 1))).or(present(top(TOP_TOPIC)))
            .or(actor(COMMAND, 1));
        values[28] = actor(PRODUCER, 2); // producer_name
        values[29] = actor(PRODUCER, 0); // producer_id
        values[30] = actor(CONSUMER, 0); // consumer_id
        values[31] = actor(CONSUMER, 3); // subscription
        for (column, value) in self.frames.iter_mut().zip(values) {
            column.push(value); // (the values stop before json)
        }
        self.frame_rows += 1;
        // the frame's part of a message row: protocol, frame, (position), conn, time, type, direction, topic,
        // producer_name, producer_id, consumer_id, subscription
        let shared = [values[1], values[0], values[3], values[2], values[9], values[6], values[TOP_TOPIC], values[28],
                      values[29], values[30], values[31]];
        let mut number = itoa::Buffer::new();
        for (position, keys) in &spans.messages {
            let mut row: [Option<&str>; 22] = [None; 22];
            row[..2].copy_from_slice(&shared[..2]);
            row[2] = Some(number.format(*position));
            row[3..12].copy_from_slice(&shared[2..]);
            for (at, key) in keys.iter().enumerate() {
                row[12 + at] = text(*key);
            }
            for (column, value) in self.messages.iter_mut().zip(row) {
                column.push(value);
            }
            self.message_rows += 1;
        }
    }

    /// The columns as Arrow buffers, emptied: ((frame rows, per frame column (validity, values, offsets)),
    /// (message rows, likewise)), the columns in the order of `table_columns()`.
    pub fn take<'py>(&mut self, py: Python<'py>) -> ((usize, Buffers<'py>), (usize, Buffers<'py>)) {
        let taken = ((self.frame_rows, self.frames.iter_mut().map(|c| c.take_py(py)).collect()),
                     (self.message_rows, self.messages.iter_mut().map(|c| c.take_py(py)).collect()));
        self.frame_rows = 0;
        self.message_rows = 0;
        taken
    }
}

pub type Buffers<'py> = Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>;

/// A value written to a sink as the record builder writes: containers opened and closed, the rest put.
fn write_value(sink: &mut TableSink<'_>, key: Key<'_>, value: &Value) -> PyResult<()> {
    match value {
        Value::Map(entries) => {
            RecordSink::open(sink, key, false)?;
            for (k, v) in entries {
                write_value(sink, Key::Text(k), v)?;
            }
            RecordSink::close(sink)
        }
        Value::List(items) => {
            RecordSink::open(sink, key, true)?;
            for v in items {
                write_value(sink, Key::Item, v)?;
            }
            RecordSink::close(sink)
        }
        other => RecordSink::put(sink, key, Atom::Value(other)),
    }
}

/// The columns of records made elsewhere (dicts of the contract, e.g. read back from `--json` lines), as
/// `AnalysedDissector.take_columns` gives those it makes.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn record_columns<'py>(py: Python<'py>, records: Vec<Bound<'py, PyAny>>) -> PyResult<((usize, Buffers<'py>), (usize, Buffers<'py>))> {
    let mut columns = TableColumns::new();
    for record in records {
        let record = Value::Map(crate::value::map_from_py(&record)?);
        columns.record(|sink| write_value(sink, Key::Item, &record).map(|_| 0))?;
    }
    Ok(columns.take(py))
}

/// The frames and messages tables' columns: ([(name, kind)], [(name, kind)]), kind "int", "float", "bool"
/// or "text".
#[pyfunction]
pub fn table_columns() -> (Vec<(&'static str, &'static str)>, Vec<(&'static str, &'static str)>) {
    let named = |columns: &[(&'static str, Kind)]| columns.iter().map(|(name, kind)| (*name, match kind {
        Kind::Int => "int", Kind::Float => "float", Kind::Bool => "bool", Kind::Text => "text",
    })).collect();
    (named(&FRAME_COLUMNS), named(&MESSAGE_COLUMNS))
}
