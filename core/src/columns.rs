//! The `pipeline`'s frames and messages tables as Arrow columns (`dissector/spark/rows.py` wraps them as
//! arrays without a Python object per value). The input is the records as `--json` writes them, one per
//! line: the line is the contract (docs/records.schema.json), so a column is one of its keys; objects and
//! lists (`command`, `metadata`, `expert`, a message's `properties`...) are kept as their JSON text, exactly
//! as the line has it. Only the keys the columns take are read (serde skips the rest); a value of another
//! type than its column's is null there, never an error.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde::Deserialize;
use serde_json::value::RawValue;

type Raw<'a> = Option<&'a RawValue>;

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

    fn push(&mut self, value: Raw<'_>) {
        let text = value.map(RawValue::get).filter(|t| *t != "null");
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

    /// (validity, values, offsets) as Python bytes: the buffers of the Arrow array.
    fn into_py(self, py: Python<'_>) -> (Bound<'_, PyBytes>, Bound<'_, PyBytes>, Bound<'_, PyBytes>) {
        (PyBytes::new(py, &self.valid), PyBytes::new(py, &self.values), PyBytes::new(py, &self.offsets))
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

/// The messages table's columns: the frame's (`frame` is its index), then the message's; `json` is the
/// message's object.
pub const MESSAGE_COLUMNS: [(&str, Kind); 23] = [
    ("protocol", Kind::Text), ("frame", Kind::Int), ("position", Kind::Int), ("conn", Kind::Int), ("time", Kind::Float),
    ("type", Kind::Text), ("direction", Kind::Text), ("topic", Kind::Text), ("producer_name", Kind::Text),
    ("producer_id", Kind::Int), ("consumer_id", Kind::Int), ("subscription", Kind::Text),
    ("payload_size", Kind::Int), ("payload_sha256", Kind::Text), ("message_id", Kind::Text), ("batch_index", Kind::Int),
    ("sequence_id", Kind::Int), ("partition_key", Kind::Text), ("ordering_key", Kind::Text), ("properties", Kind::Text),
    ("event_time", Kind::Int), ("publish_time", Kind::Int), ("json", Kind::Text),
];

/// The keys of a record the columns take (each as its raw JSON text).
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)] index: Raw<'a>,
    #[serde(borrow)] protocol: Raw<'a>,
    #[serde(borrow)] time: Raw<'a>,
    #[serde(borrow)] conn: Raw<'a>,
    #[serde(borrow)] src: Raw<'a>,
    #[serde(borrow)] dst: Raw<'a>,
    #[serde(borrow)] direction: Raw<'a>,
    #[serde(borrow)] packet: Raw<'a>,
    #[serde(borrow)] first_packet: Raw<'a>,
    #[serde(borrow, rename = "type")] type_name: Raw<'a>,
    #[serde(borrow)] command: Raw<'a>,
    #[serde(borrow)] size: Raw<'a>,
    #[serde(borrow)] problems: Raw<'a>,
    #[serde(borrow)] expert: Raw<'a>,
    #[serde(borrow)] checksum: Raw<'a>,
    #[serde(borrow)] metadata: Raw<'a>,
    #[serde(borrow)] broker_entry_metadata: Raw<'a>,
    #[serde(borrow)] payload_size: Raw<'a>,
    #[serde(borrow)] uncompressed_size: Raw<'a>,
    #[serde(borrow)] encrypted: Raw<'a>,
    #[serde(borrow)] marker: Raw<'a>,
    #[serde(borrow)] serial: Raw<'a>,
    #[serde(borrow)] answers: Raw<'a>,
    #[serde(borrow)] latency_ms: Raw<'a>,
    #[serde(borrow)] request_type: Raw<'a>,
    #[serde(borrow)] topic: Raw<'a>,
    #[serde(borrow)] client_id: Raw<'a>,
    #[serde(borrow)] group: Raw<'a>,
    #[serde(borrow)] producer: Raw<'a>,
    #[serde(borrow)] consumer: Raw<'a>,
    #[serde(borrow)] messages: Raw<'a>,
}

/// What the columns take of a producer, a consumer, or a command (its topic).
#[derive(Deserialize, Default)]
struct About<'a> {
    #[serde(borrow)] id: Raw<'a>,
    #[serde(borrow)] topic: Raw<'a>,
    #[serde(borrow)] name: Raw<'a>,
    #[serde(borrow)] subscription: Raw<'a>,
}

/// What the columns take of a message.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)] payload_size: Raw<'a>,
    #[serde(borrow)] payload_sha256: Raw<'a>,
    #[serde(borrow)] message_id: Raw<'a>,
    #[serde(borrow)] batch_index: Raw<'a>,
    #[serde(borrow)] sequence_id: Raw<'a>,
    #[serde(borrow)] partition_key: Raw<'a>,
    #[serde(borrow)] ordering_key: Raw<'a>,
    #[serde(borrow)] properties: Raw<'a>,
    #[serde(borrow)] event_time: Raw<'a>,
    #[serde(borrow)] publish_time: Raw<'a>,
}

/// An object's fields (an object of another shape, or not an object: none).
fn about<'a>(raw: Raw<'a>) -> About<'a> {
    raw.filter(|r| r.get().starts_with('{')).and_then(|r| serde_json::from_str(r.get()).ok()).unwrap_or_default()
}

fn present(raw: Raw<'_>) -> Raw<'_> {
    raw.filter(|r| r.get() != "null")
}

/// A record's values for the frame columns, in `FRAME_COLUMNS`' order but `json`; and what its messages share
/// of it (`MESSAGE_COLUMNS`' frame part).
fn frame_values<'a>(record: &Record<'a>, producer: &About<'a>, consumer: &About<'a>, command: &About<'a>) -> [Raw<'a>; 32] {
    let topic = present(producer.topic).or(present(consumer.topic)).or(present(record.topic)).or(command.topic);
    let expert = record.expert.filter(|e| e.get() != "[]");
    [
        record.index, record.protocol, record.time, record.conn, record.src, record.dst, record.direction, record.packet,
        record.first_packet, record.type_name, record.command, record.size, record.problems, expert, record.checksum,
        record.metadata, record.broker_entry_metadata, record.payload_size, record.uncompressed_size, record.encrypted,
        record.marker, record.serial, record.answers, record.latency_ms, record.request_type, topic, record.client_id,
        record.group, producer.name, producer.id, consumer.id, consumer.subscription,
    ]
}

/// Columns of the frames and messages of `lines` (records as `--json` writes them, each ending in a newline).
pub struct TableColumns {
    frames: Vec<Column>,
    messages: Vec<Column>,
    frame_rows: usize,
    message_rows: usize,
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

    /// Add a record; a line that is not a JSON object is an error (the core wrote it: it never is).
    pub fn add(&mut self, line: &str) -> Result<(), String> {
        let record: Record<'_> = serde_json::from_str(line).map_err(|e| format!("a record that is not a JSON object: {e}"))?;
        let (producer, consumer, command) = (about(record.producer), about(record.consumer), about(record.command));
        let values = frame_values(&record, &producer, &consumer, &command);
        let (json, columns) = self.frames.split_last_mut().expect("a json column");
        for (column, value) in columns.iter_mut().zip(values) {
            column.push(value);
        }
        json.push_text(line);
        self.frame_rows += 1;
        let Some(messages) = record.messages.and_then(|m| serde_json::from_str::<Vec<&RawValue>>(m.get()).ok()) else {
            return Ok(());
        };
        // the frame's part of a message row: protocol, frame, (position), conn, time, type, direction, topic,
        // producer_name, producer_id, consumer_id, subscription
        let shared = [values[1], values[0], values[3], values[2], values[9], values[6], values[25], values[28], values[29],
                      values[30], values[31]];
        for (position, raw) in messages.iter().enumerate() {
            let Ok(message) = serde_json::from_str::<Message<'_>>(raw.get()) else { continue };
            let position = RawValue::from_string(position.to_string()).map_err(|e| e.to_string())?;
            let row: [Raw<'_>; 22] = [
                shared[0], shared[1], Some(&position), shared[2], shared[3], shared[4], shared[5], shared[6], shared[7],
                shared[8], shared[9], shared[10], message.payload_size, message.payload_sha256, message.message_id,
                message.batch_index, message.sequence_id, message.partition_key, message.ordering_key,
                message.properties, message.event_time, message.publish_time,
            ];
            let (json, columns) = self.messages.split_last_mut().expect("a json column");
            for (column, value) in columns.iter_mut().zip(row) {
                column.push(value);
            }
            json.push_text(raw.get());
            self.message_rows += 1;
        }
        Ok(())
    }
}

type Buffers<'py> = Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>;

/// The frames and messages of `lines` (records as `--json` writes them, each ending in a newline) as Arrow
/// buffers: ((frame rows, per frame column (validity, values, offsets)), (message rows, likewise)), the
/// columns in the order of `table_columns()`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn record_columns<'py>(py: Python<'py>, lines: &[u8]) -> PyResult<((usize, Buffers<'py>), (usize, Buffers<'py>))> {
    let text = std::str::from_utf8(lines).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let mut columns = TableColumns::new();
    for line in text.split_terminator('\n') {
        columns.add(line).map_err(pyo3::exceptions::PyValueError::new_err)?;
    }
    let TableColumns { frames, messages, frame_rows, message_rows } = columns;
    Ok(((frame_rows, frames.into_iter().map(|c| c.into_py(py)).collect()),
        (message_rows, messages.into_iter().map(|c| c.into_py(py)).collect())))
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
