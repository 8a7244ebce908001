//! The `pipeline`'s frames and messages tables as Arrow columns (`dissector/spark/rows.py` wraps them as
//! arrays without a Python object per value), made as the records are written: a record is built once
//! (`records.rs`) into a [`TableSink`], which writes its JSON line (the contract, docs/records.schema.json:
//! byte for byte `--json`'s line) and notes where each value a column takes lies in it. So a column is one of
//! the contract's keys; objects and lists (`command`, `metadata`, `expert`, a message's `properties`...) are
//! kept as their JSON text, exactly as the line has it, and nothing is parsed back. A value of another type
//! than its column's is null there, never an error.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use engine::records::{Atom, Front, JsonSink, Key, NoFront, RecordSink, SinkResult};

use crate::records::py_error;
use engine::value::Value;

/// What a column holds, as Arrow types it.
#[derive(Clone, Copy)]
pub enum Kind {
    Int,
    Float,
    Bool,
    /// text (large_string): a string as it is, anything else as its JSON text
    Text,
}

/// A value as a column of its kind takes it: a number parsed from its JSON text, a string unescaped; `Null`
/// when absent, JSON null, or of another type than the column's.
enum Cell<'a> {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(std::borrow::Cow<'a, str>),
}

impl<'a> Cell<'a> {
    fn of(kind: Kind, value: Option<&'a str>) -> Cell<'a> {
        let Some(text) = value.filter(|t| *t != "null") else { return Cell::Null };
        match kind {
            Kind::Int => text.parse::<i64>().map_or(Cell::Null, Cell::Int),
            Kind::Float => text.parse::<f64>().map_or(Cell::Null, Cell::Float),
            Kind::Bool => match text {
                "true" => Cell::Bool(true),
                "false" => Cell::Bool(false),
                _ => Cell::Null,
            },
            Kind::Text => Cell::Text(match text {
                t if t.starts_with('"') && t.contains('\\') => match serde_json::from_str::<String>(t) {
                    Ok(unescaped) => unescaped.into(),
                    Err(_) => t.into(),
                },
                t if t.starts_with('"') && t.len() >= 2 => t[1..t.len() - 1].into(),
                t => t.into(),
            }),
        }
    }
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
        if self.rows.is_multiple_of(8) {
            self.valid.push(0);
        }
        if valid {
            *self.valid.last_mut().expect("a byte per eight rows") |= 1 << (self.rows % 8);
        }
        self.rows += 1;
    }

    /// A value, as its JSON text (None: absent).
    fn push(&mut self, value: Option<&str>) {
        self.push_cell(&Cell::of(self.kind, value));
    }

    /// A value read already as a column of this kind reads it (`Cell::of`).
    fn push_cell(&mut self, cell: &Cell<'_>) {
        match (self.kind, cell) {
            (Kind::Int, Cell::Int(v)) => self.push_fixed(&v.to_le_bytes(), true),
            (Kind::Float, Cell::Float(v)) => self.push_fixed(&v.to_le_bytes(), true),
            (Kind::Int | Kind::Float, _) => self.push_fixed(&[0; 8], false),
            (Kind::Bool, cell) => {
                if self.rows.is_multiple_of(8) {
                    self.values.push(0);
                }
                if matches!(cell, Cell::Bool(true)) {
                    *self.values.last_mut().expect("a byte per eight rows") |= 1 << (self.rows % 8);
                }
                self.mark(matches!(cell, Cell::Bool(_)));
            }
            (Kind::Text, Cell::Text(text)) => self.push_text(text),
            (Kind::Text, _) => {
                self.offsets.extend_from_slice(&(self.values.len() as i64).to_le_bytes());
                self.mark(false);
            }
        }
    }

    fn push_fixed(&mut self, bytes: &[u8; 8], valid: bool) {
        self.values.extend_from_slice(bytes);
        self.mark(valid);
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
    ("index", Kind::Int),
    ("protocol", Kind::Text),
    ("time", Kind::Float),
    ("conn", Kind::Int),
    ("src", Kind::Text),
    ("dst", Kind::Text),
    ("direction", Kind::Text),
    ("packet", Kind::Int),
    ("first_packet", Kind::Int),
    ("type", Kind::Text),
    ("command", Kind::Text),
    ("size", Kind::Int),
    ("problems", Kind::Text),
    ("expert", Kind::Text),
    ("checksum", Kind::Text),
    ("metadata", Kind::Text),
    ("broker_entry_metadata", Kind::Text),
    ("payload_size", Kind::Int),
    ("uncompressed_size", Kind::Int),
    ("encrypted", Kind::Bool),
    ("marker", Kind::Text),
    ("serial", Kind::Int),
    ("answers", Kind::Int),
    ("latency_ms", Kind::Float),
    ("request_type", Kind::Text),
    ("topic", Kind::Text),
    ("client_id", Kind::Text),
    ("group", Kind::Text),
    ("producer_name", Kind::Text),
    ("producer_id", Kind::Int),
    ("consumer_id", Kind::Int),
    ("subscription", Kind::Text),
    ("json", Kind::Text),
];

/// The messages table's columns: the frame's (`frame` is its index), then the message's. The message's whole
/// record is in its frame's `json` (`messages[position]`).
pub const MESSAGE_COLUMNS: [(&str, Kind); 22] = [
    ("protocol", Kind::Text),
    ("frame", Kind::Int),
    ("position", Kind::Int),
    ("conn", Kind::Int),
    ("time", Kind::Float),
    ("type", Kind::Text),
    ("direction", Kind::Text),
    ("topic", Kind::Text),
    ("producer_name", Kind::Text),
    ("producer_id", Kind::Int),
    ("consumer_id", Kind::Int),
    ("subscription", Kind::Text),
    ("payload_size", Kind::Int),
    ("payload_sha256", Kind::Text),
    ("message_id", Kind::Text),
    ("batch_index", Kind::Int),
    ("sequence_id", Kind::Int),
    ("partition_key", Kind::Text),
    ("ordering_key", Kind::Text),
    ("properties", Kind::Text),
    ("event_time", Kind::Int),
    ("publish_time", Kind::Int),
];

/// The problems table's columns: a finding of a frame (`expert`), then the frame's; `file` (the input a
/// problem of reading is about) is null for these rows, which the tasks write (the job adds the others).
pub const PROBLEM_COLUMNS: [(&str, Kind); 10] = [
    ("id", Kind::Text),
    ("severity", Kind::Text),
    ("message", Kind::Text),
    ("protocol", Kind::Text),
    ("frame", Kind::Int),
    ("conn", Kind::Int),
    ("time", Kind::Float),
    ("packet", Kind::Int),
    ("frame_type", Kind::Text),
    ("file", Kind::Text),
];

/// The exchanges table's columns: a frame that answers a request (its `answers`), the request's time and
/// packet as the analysis paired them (`Output::Annotated::answered`; null for a record made elsewhere).
pub const EXCHANGE_COLUMNS: [(&str, Kind); 12] = [
    ("protocol", Kind::Text),
    ("conn", Kind::Int),
    ("request_frame", Kind::Int),
    ("request_type", Kind::Text),
    ("request_time", Kind::Float),
    ("request_packet", Kind::Int),
    ("response_frame", Kind::Int),
    ("response_type", Kind::Text),
    ("response_time", Kind::Float),
    ("response_packet", Kind::Int),
    ("latency_ms", Kind::Float),
    ("topic", Kind::Text),
];

/// The record's own keys the frame columns take (`FRAME_COLUMNS` up to `topic`, then `client_id` and
/// `group`), by their place in `TOP_KEYS`.
const TOP_KEYS: [&str; 28] = [
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
    "size",
    "problems",
    "expert",
    "checksum",
    "metadata",
    "broker_entry_metadata",
    "payload_size",
    "uncompressed_size",
    "encrypted",
    "marker",
    "serial",
    "answers",
    "latency_ms",
    "request_type",
    "topic",
    "client_id",
    "group",
];
const TOP_ANSWERS: usize = 22;
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
    "payload_size",
    "payload_sha256",
    "message_id",
    "batch_index",
    "sequence_id",
    "partition_key",
    "ordering_key",
    "properties",
    "event_time",
    "publish_time",
];

fn present(value: Option<&str>) -> Option<&str> {
    value.filter(|t| *t != "null")
}

fn place_of(keys: &[&str], key: &str) -> Option<usize> {
    keys.iter().position(|k| *k == key)
}

/// Where a value lies in the record's line: [start, end).
type Span = Option<(usize, usize)>;

/// The record's lists whose objects are rows of a table of their own: the messages (the `messages` table),
/// the findings (`expert`: the `problems` table), by their place here; and the keys of an object each takes.
const ROW_LISTS: [(&str, &[&str]); 2] = [("messages", &MESSAGE_KEYS), ("expert", &FINDING_KEYS)];
const MESSAGES: usize = 0;
const FINDINGS: usize = 1;

/// The keys of a finding the problems table takes.
const FINDING_KEYS: [&str; 3] = ["id", "severity", "message"];

/// What a container being written is, for the columns.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// The record itself.
    Record,
    /// The producer, consumer or command (`PRODUCER`...): some of its keys are columns.
    Actor(usize),
    /// A list of `ROW_LISTS`, and one of its objects.
    Rows(usize),
    Row(usize),
    /// Nothing in it is a column of its own.
    Inside,
}

/// Which column a value written is.
#[derive(Clone, Copy)]
enum Slot {
    Top(usize),
    Actor(usize, usize),
    /// A key of an object of a `ROW_LISTS` list.
    RowKey(usize, usize),
    Nothing,
}

/// Where the values the columns take lie in one record's line.
#[derive(Default)]
struct Spans {
    top: [Span; 28],
    actors: [[Span; 4]; 3],
    /// Per `ROW_LISTS` list, each object: its place in the list and its keys' spans.
    rows: [Vec<(usize, [Span; 10])>; 2],
    /// Items of each list so far.
    items: [usize; 2],
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
            Some(Place::Record) => {
                matches!((name, object), ("producer" | "consumer" | "command", true))
                    || (!object && ROW_LISTS.iter().any(|(list, _)| *list == name))
            }
            Some(Place::Rows(_)) => object,
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
                (_, object) => {
                    let top = place_of(&TOP_KEYS, name).map_or(Slot::Nothing, Slot::Top);
                    match ROW_LISTS.iter().position(|(list, _)| *list == name) {
                        Some(list) if !object => (Place::Rows(list), top),
                        _ => (Place::Inside, top),
                    }
                }
            },
            Some(Place::Actor(actor)) => {
                (Place::Inside, place_of(&ACTOR_KEYS, name).map_or(Slot::Nothing, |at| Slot::Actor(actor, at)))
            }
            Some(Place::Rows(list)) => {
                self.spans.items[list] += 1;
                if object {
                    let position = self.spans.items[list] - 1;
                    self.spans.rows[list].push((position, Default::default()));
                    (Place::Row(list), Slot::Nothing)
                } else {
                    (Place::Inside, Slot::Nothing)
                }
            }
            Some(Place::Row(list)) => {
                (Place::Inside, place_of(ROW_LISTS[list].1, name).map_or(Slot::Nothing, |at| Slot::RowKey(list, at)))
            }
            Some(Place::Inside) => (Place::Inside, Slot::Nothing),
        }
    }

    /// The value just written from `start` (in the buffer) is `slot`.
    fn found(&mut self, slot: Slot, start: usize) {
        let span = (start - self.base, self.json.out.len() - self.base);
        match slot {
            Slot::Top(at) => self.spans.top[at] = Some(span),
            Slot::Actor(actor, at) => self.spans.actors[actor][at] = Some(span),
            Slot::RowKey(list, at) => {
                if let Some(row) = self.spans.rows[list].last_mut() {
                    row.1[at] = Some(span);
                }
            }
            Slot::Nothing => {}
        }
    }
}

impl<F: Front> RecordSink<F> for TableSink<'_> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, F>) -> SinkResult<()> {
        // a container put whole (an analysis note such as `producer`) whose keys are columns: written as
        // opened, filled and closed (the same text), so that its keys are found
        match atom {
            Atom::Value(value @ (Value::Map(_) | Value::List(_)))
                if self.holds_columns(key, matches!(value, Value::Map(_))) =>
            {
                return write_value::<F>(self, key, value);
            }
            Atom::Values(items) if self.holds_columns(key, false) => {
                RecordSink::<F>::open(self, key, true)?;
                for item in items {
                    write_value::<F>(self, Key::Item, item)?;
                }
                return RecordSink::<F>::close(self);
            }
            _ => {}
        }
        let (_, slot) = self.slot(key, false);
        RecordSink::<F>::put(&mut self.json, key, atom)?;
        self.found(slot, self.json.value_start);
        Ok(())
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> SinkResult<()> {
        let (place, slot) = self.slot(key, !list);
        RecordSink::<F>::open(&mut self.json, key, list)?;
        self.open.push((self.json.value_start, place, slot));
        Ok(())
    }

    fn close(&mut self) -> SinkResult<()> {
        RecordSink::<F>::close(&mut self.json)?;
        if let Some((start, _, slot)) = self.open.pop() {
            self.found(slot, start);
        }
        Ok(())
    }
}

/// One table's columns and rows.
struct Table {
    columns: Vec<Column>,
    rows: usize,
}

impl Table {
    fn new(columns: &[(&str, Kind)]) -> Table {
        Table { columns: columns.iter().map(|(_, kind)| Column::new(*kind)).collect(), rows: 0 }
    }

    fn push(&mut self, values: &[Option<&str>]) {
        for (column, value) in self.columns.iter_mut().zip(values) {
            column.push(*value);
        }
        self.rows += 1;
    }

    fn take<'py>(&mut self, py: Python<'py>) -> (usize, Buffers<'py>) {
        let taken = (self.rows, self.columns.iter_mut().map(|c| c.take_py(py)).collect());
        self.rows = 0;
        taken
    }
}

/// The frames, messages, problems (the frames' findings) and exchanges of records as columns, until taken.
pub struct TableColumns {
    frames: Table,
    messages: Table,
    problems: Table,
    exchanges: Table,
}

impl Default for TableColumns {
    fn default() -> Self {
        TableColumns::new()
    }
}

impl TableColumns {
    pub fn new() -> TableColumns {
        TableColumns {
            frames: Table::new(&FRAME_COLUMNS),
            messages: Table::new(&MESSAGE_COLUMNS),
            problems: Table::new(&PROBLEM_COLUMNS),
            exchanges: Table::new(&EXCHANGE_COLUMNS),
        }
    }

    /// Bytes the columns hold (what a writer flushes by).
    pub fn size(&self) -> usize {
        [&self.frames, &self.messages, &self.problems, &self.exchanges]
            .iter()
            .flat_map(|t| &t.columns)
            .map(|c| c.values.len() + c.offsets.len())
            .sum()
    }

    /// A record, written by `build` into a `TableSink`: its line straight into the `json` column (no copy),
    /// its values into the others. On an error nothing of it is kept. `answered`: the time and packet of the
    /// request the frame answers, as the analysis paired them.
    pub fn record(
        &mut self,
        answered: Option<(f64, u64)>,
        build: impl FnOnce(&mut TableSink<'_>) -> SinkResult<usize>,
    ) -> SinkResult<usize> {
        let json = self.frames.columns.last_mut().expect("a json column");
        let mut out = std::mem::take(&mut json.values);
        let base = out.len();
        let mut sink = TableSink::new(&mut out);
        let built = build(&mut sink);
        let spans = std::mem::take(&mut sink.spans);
        let kept = match (&built, std::str::from_utf8(&out[base..])) {
            (Ok(_), Ok(line)) => {
                self.add(line, &spans, answered);
                true
            }
            _ => false,
        };
        if !kept {
            out.truncate(base);
        }
        let json = self.frames.columns.last_mut().expect("a json column");
        json.values = out;
        if kept {
            json.offsets.extend_from_slice(&(json.values.len() as i64).to_le_bytes());
            json.mark(true);
        }
        built
    }

    /// A record's line and where its values lie in it (`TableSink`): every column but the frame's `json`.
    fn add(&mut self, line: &str, spans: &Spans, answered: Option<(f64, u64)>) {
        let text = |span: Span| span.and_then(|(start, end)| line.get(start..end));
        let top = |at: usize| text(spans.top[at]);
        let actor = |actor: usize, at: usize| text(spans.actors[actor][at]);
        let mut values: [Option<&str>; 32] = [None; 32];
        for (at, value) in values.iter_mut().enumerate().take(TOP_KEYS.len()) {
            *value = top(at);
        }
        // no findings is no value; the frame's topic is its producer's, its consumer's, its own, its command's
        values[TOP_EXPERT] = top(TOP_EXPERT).filter(|e| *e != "[]");
        values[TOP_TOPIC] = present(actor(PRODUCER, 1))
            .or(present(actor(CONSUMER, 1)))
            .or(present(top(TOP_TOPIC)))
            .or(actor(COMMAND, 1));
        values[28] = actor(PRODUCER, 2); // producer_name
        values[29] = actor(PRODUCER, 0); // producer_id
        values[30] = actor(CONSUMER, 0); // consumer_id
        values[31] = actor(CONSUMER, 3); // subscription
        self.frames.push(&values); // (the values stop before json)
                                   // the frame's part of a message row: protocol, frame, (position), conn, time, type, direction, topic,
                                   // producer_name, producer_id, consumer_id, subscription
        let shared = [
            values[1],
            values[0],
            values[3],
            values[2],
            values[9],
            values[6],
            values[TOP_TOPIC],
            values[28],
            values[29],
            values[30],
            values[31],
        ];
        if !spans.rows[MESSAGES].is_empty() {
            // read once for all the frame's messages (a batch's hundreds)
            let columns = [0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11];
            let shared: [Cell<'_>; 11] = std::array::from_fn(|i| Cell::of(MESSAGE_COLUMNS[columns[i]].1, shared[i]));
            let table = &mut self.messages;
            for (position, keys) in &spans.rows[MESSAGES] {
                for (cell, at) in shared.iter().zip(columns) {
                    table.columns[at].push_cell(cell);
                }
                table.columns[2].push_cell(&Cell::Int(*position as i64));
                for (at, key) in keys.iter().enumerate() {
                    table.columns[12 + at].push(text(*key));
                }
                table.rows += 1;
            }
        }
        // a finding's row: id, severity, message, then the frame's protocol, index, conn, time, packet, type
        for (_, keys) in &spans.rows[FINDINGS] {
            let row = [
                text(keys[0]),
                text(keys[1]),
                text(keys[2]),
                values[1],
                values[0],
                values[3],
                values[2],
                values[7],
                values[9],
                None,
            ];
            self.problems.push(&row);
        }
        if present(values[TOP_ANSWERS]).is_some() {
            self.exchange(&values, answered);
        }
    }

    /// A frame that answers a request: protocol, conn, request frame and type, the request's time and packet,
    /// then the frame's index, type, time and packet, latency and topic.
    fn exchange(&mut self, values: &[Option<&str>; 32], answered: Option<(f64, u64)>) {
        let (time, packet) = match answered {
            Some((time, packet)) => (Cell::Float(time), i64::try_from(packet).map_or(Cell::Null, Cell::Int)),
            None => (Cell::Null, Cell::Null),
        };
        let table = &mut self.exchanges;
        let frame = [
            (0, values[1]),
            (1, values[3]),
            (2, values[TOP_ANSWERS]),
            (3, values[24]),
            (6, values[0]),
            (7, values[9]),
            (8, values[2]),
            (9, values[7]),
            (10, values[23]),
            (11, values[TOP_TOPIC]),
        ];
        for (at, value) in frame {
            table.columns[at].push(value);
        }
        table.columns[4].push_cell(&time);
        table.columns[5].push_cell(&packet);
        table.rows += 1;
    }

    /// The columns as Arrow buffers, emptied: per table (frames, messages, problems, exchanges) its rows and
    /// per column (validity, values, offsets), the columns in the order of `table_columns()`.
    pub fn take<'py>(&mut self, py: Python<'py>) -> [(usize, Buffers<'py>); 4] {
        [self.frames.take(py), self.messages.take(py), self.problems.take(py), self.exchanges.take(py)]
    }
}

pub type Buffers<'py> = Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>;

/// A value written to a sink as the record builder writes: containers opened and closed, the rest put.
fn write_value<F: Front>(sink: &mut TableSink<'_>, key: Key<'_>, value: &Value) -> SinkResult<()> {
    match value {
        Value::Map(entries) => {
            RecordSink::<F>::open(sink, key, false)?;
            for (k, v) in entries {
                write_value::<F>(sink, Key::Text(k), v)?;
            }
            RecordSink::<F>::close(sink)
        }
        Value::List(items) => {
            RecordSink::<F>::open(sink, key, true)?;
            for v in items {
                write_value::<F>(sink, Key::Item, v)?;
            }
            RecordSink::<F>::close(sink)
        }
        other => RecordSink::<F>::put(sink, key, Atom::Value(other)),
    }
}

/// The columns of records made elsewhere (dicts of the contract, e.g. read back from `--json` lines), as
/// `AnalysedDissector.take_columns` gives those it makes.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn record_columns<'py>(py: Python<'py>, records: Vec<Bound<'py, PyAny>>) -> PyResult<[(usize, Buffers<'py>); 4]> {
    let mut columns = TableColumns::new();
    for record in records {
        let record = Value::Map(crate::convert::map_from_py(&record)?);
        columns.record(None, |sink| write_value::<NoFront>(sink, Key::Item, &record).map(|_| 0)).map_err(py_error)?;
    }
    Ok(columns.take(py))
}

/// The frames, messages, problems and exchanges tables' columns: [[(name, kind)]...], kind "int", "float",
/// "bool" or "text".
#[pyfunction]
pub fn table_columns() -> [Vec<(&'static str, &'static str)>; 4] {
    let named = |columns: &[(&'static str, Kind)]| {
        columns
            .iter()
            .map(|(name, kind)| {
                (
                    *name,
                    match kind {
                        Kind::Int => "int",
                        Kind::Float => "float",
                        Kind::Bool => "bool",
                        Kind::Text => "text",
                    },
                )
            })
            .collect()
    };
    [named(&FRAME_COLUMNS), named(&MESSAGE_COLUMNS), named(&PROBLEM_COLUMNS), named(&EXCHANGE_COLUMNS)]
}
