//! The `pipeline`'s tables as typed Arrow record batches (arrow-rs builders), made as each record is built:
//! `frames` (a row per frame), `messages` (a row per application message), `problems` (a row per finding of
//! a frame, and per event worse than a note), `exchanges` (a row per frame that answers a request) and
//! `events` (a row per event: [`RecordTables::event`]). Their columns are keys of the record contract
//! (docs/records.schema.json), named by one schema each ([`FRAMES`], [`MESSAGES`], [`PROBLEMS`],
//! [`EXCHANGES`], [`EVENTS`]).
//!
//! A [`TableSink`] takes the record's values as the record builder writes them: a number, a flag or a string
//! goes into its column as it is (nothing is written as JSON and parsed back); an object or a list that is a
//! column (`command`, `metadata`, `expert`, a message's `properties`...) is kept as its JSON text, as the
//! record's line has it; a message's `message_id`, whose keys are known, is a struct of integers
//! (`Kind::Fields`). The whole line (`--json`'s) is a column only when asked (`with_json`). A value of
//! another type than its column's is null there, never an error. A text column whose values repeat from row
//! to row (addresses, types, topics) is a dictionary (`Kind::Repeated`), and a message's row takes its
//! frame's columns once for all the frame's messages.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, FixedSizeBinaryBuilder, Float64Builder, Int32Builder, Int64Builder, LargeStringBuilder,
    NullBufferBuilder, StringBuilder,
};
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, DictionaryArray, RecordBatch, StructArray};
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef};

use crate::event_record::EventItem;
use crate::records::{
    hex_digest, put_payload_bytes, write_message_parts, Atom, Front, JsonSink, Key, MessageParts, RecordSink,
    SinkResult,
};
use crate::stats::summary::{FrameFigures, GroupOf, Summary, SummaryMaker};
use crate::value::{text_lossless, Text, Value};

/// What a column holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Int,
    Float,
    Bool,
    /// a string as it is, any other value as its JSON text (large_string)
    Text,
    /// the same, for a column whose values repeat from row to row (a connection's addresses, a topic, a
    /// type): each distinct value held once per batch (dictionary<int32, string>), which Parquet writes as
    /// its dictionary without hashing each row's value again
    Repeated,
    /// a SHA-256 digest written as 64 hex digits (fixed_size_binary(32)); anything else is null
    Digest,
    /// an object of integers whose keys are known (struct<key: int64...>, a key of another type null), and
    /// in its last field, `id`, a value that is one integer instead of an object; anything else is null.
    /// Written as JSON text, a message's id was 60 bytes to write, copy and compress per message.
    Fields(&'static [&'static str]),
}

impl Kind {
    fn data_type(self) -> DataType {
        match self {
            Kind::Int => DataType::Int64,
            Kind::Float => DataType::Float64,
            Kind::Bool => DataType::Boolean,
            Kind::Text => DataType::LargeUtf8,
            Kind::Repeated => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            Kind::Digest => DataType::FixedSizeBinary(32),
            Kind::Fields(names) => DataType::Struct(fields_of(names)),
        }
    }
}

fn fields_of(names: &[&str]) -> Fields {
    names.iter().map(|name| Field::new(*name, DataType::Int64, true)).collect()
}

/// A message id's fields: the object's keys, then `id` (an id that is one integer).
pub const MESSAGE_ID_FIELDS: &[&str] = &["ledger_id", "entry_id", "partition", "batch_index", "id"];
/// The keys of an object that are fields (all but `id`).
const ID_KEYS: usize = 4;

/// A table's columns: (name, kind).
pub type Columns = &'static [(&'static str, Kind)];

/// The frames table: the record's own keys, then the frame's actor (`topic`: its producer's, its consumer's,
/// its own, else its command's; `producer_*`, `consumer_id`, `subscription`); `json` (the record's line) only
/// when asked.
pub const FRAMES: Columns = &[
    ("index", Kind::Int),
    ("protocol", Kind::Repeated),
    ("time", Kind::Float),
    ("conn", Kind::Int),
    ("src", Kind::Repeated),
    ("dst", Kind::Repeated),
    ("direction", Kind::Repeated),
    ("packet", Kind::Int),
    ("first_packet", Kind::Int),
    ("type", Kind::Repeated),
    ("command", Kind::Text),
    ("size", Kind::Int),
    ("problems", Kind::Text),
    ("expert", Kind::Text),
    ("checksum", Kind::Repeated),
    ("metadata", Kind::Text),
    ("broker_entry_metadata", Kind::Text),
    ("payload_size", Kind::Int),
    ("uncompressed_size", Kind::Int),
    ("encrypted", Kind::Bool),
    ("marker", Kind::Text),
    ("serial", Kind::Int),
    ("answers", Kind::Int),
    ("latency_ms", Kind::Float),
    ("request_type", Kind::Repeated),
    ("topic", Kind::Repeated),
    ("client_id", Kind::Repeated),
    ("group", Kind::Repeated),
    ("producer_name", Kind::Repeated),
    ("producer_id", Kind::Int),
    ("consumer_id", Kind::Int),
    ("subscription", Kind::Repeated),
];

/// The frames table's last column when the records' lines are kept.
pub const JSON_COLUMN: (&str, Kind) = ("json", Kind::Text);

/// The messages table: the frame's columns (`frame` is its index), the message's place in the frame's
/// `messages`, then the message's own keys.
pub const MESSAGES: Columns = &[
    ("protocol", Kind::Repeated),
    ("frame", Kind::Int),
    ("position", Kind::Int),
    ("conn", Kind::Int),
    ("time", Kind::Float),
    ("type", Kind::Repeated),
    ("direction", Kind::Repeated),
    ("topic", Kind::Repeated),
    ("producer_name", Kind::Repeated),
    ("producer_id", Kind::Int),
    ("consumer_id", Kind::Int),
    ("subscription", Kind::Repeated),
    ("payload_size", Kind::Int),
    ("payload_sha256", Kind::Digest),
    ("message_id", Kind::Fields(MESSAGE_ID_FIELDS)),
    ("batch_index", Kind::Int),
    ("sequence_id", Kind::Int),
    ("partition_key", Kind::Text),
    ("ordering_key", Kind::Text),
    ("properties", Kind::Text),
    ("event_time", Kind::Int),
    ("publish_time", Kind::Int),
];

/// The problems table: a finding of a frame (`expert`), then the frame's; `file` (the input a problem of
/// reading is about) is null in the rows made here (the pipeline adds the others).
pub const PROBLEMS: Columns = &[
    ("id", Kind::Repeated),
    ("severity", Kind::Repeated),
    ("message", Kind::Text),
    ("protocol", Kind::Repeated),
    ("frame", Kind::Int),
    ("conn", Kind::Int),
    ("time", Kind::Float),
    ("packet", Kind::Int),
    ("frame_type", Kind::Repeated),
    ("file", Kind::Text),
];

/// The exchanges table: a frame that answers a request (its `answers`), with the request's time and packet
/// as the analysis paired them (null for a record made elsewhere).
pub const EXCHANGES: Columns = &[
    ("protocol", Kind::Repeated),
    ("conn", Kind::Int),
    ("request_frame", Kind::Int),
    ("request_type", Kind::Repeated),
    ("request_time", Kind::Float),
    ("request_packet", Kind::Int),
    ("response_frame", Kind::Int),
    ("response_type", Kind::Repeated),
    ("response_time", Kind::Float),
    ("response_packet", Kind::Int),
    ("latency_ms", Kind::Float),
    ("topic", Kind::Repeated),
];

/// The events table: an event's record (`--json`'s event line: `json`) and the keys a query reads of it;
/// `order`: its place among the events of the tables (the events of one packet keep the order the CLI gives
/// them).
pub const EVENTS: Columns = &[
    ("packet", Kind::Int),
    ("order", Kind::Int),
    ("type", Kind::Repeated),
    ("time", Kind::Float),
    ("conn", Kind::Int),
    ("severity", Kind::Repeated),
    ("message", Kind::Text),
    ("json", Kind::Text),
];

/// The tables, in the order [`RecordTables::finish`] gives them.
pub const TABLES: [(&str, Columns); 5] =
    [("frames", FRAMES), ("messages", MESSAGES), ("problems", PROBLEMS), ("exchanges", EXCHANGES), ("events", EVENTS)];

/// A table's Arrow schema (the frames' with `json` last when `with_json`).
pub fn schema(columns: Columns, with_json: bool) -> SchemaRef {
    let json = with_json && std::ptr::eq(columns, FRAMES);
    let fields = columns
        .iter()
        .chain(json.then_some(&JSON_COLUMN))
        .map(|(name, kind)| Field::new(*name, kind.data_type(), true));
    Arc::new(Schema::new(fields.collect::<Vec<_>>()))
}

fn at(columns: Columns, name: &str) -> usize {
    columns.iter().position(|(n, _)| *n == name).unwrap_or_else(|| panic!("no column {name}"))
}

// ------------------------------------------------------------------------------------------ a record's values

/// A value of the record as it was written: a scalar as it is, a string or an object's JSON text as a range
/// of the record's text buffer.
#[derive(Clone, Copy, Debug, Default)]
enum Cell {
    #[default]
    Absent,
    Null,
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    /// a range of the record's strings (u32: a record is far below 4 GiB, and a smaller cell is moved faster)
    Str(u32, u32),
    /// JSON text that is not a string: an object, a list
    Json(u32, u32),
    /// a digest of the record's (`Found::digests`), as its bytes
    Digest(u32),
    /// an object whose keys are the cells after the row's keys (`Kind::Fields`)
    Object,
}

impl Cell {
    fn present(self) -> Option<Cell> {
        match self {
            Cell::Absent | Cell::Null => None,
            cell => Some(cell),
        }
    }
}

/// The record's keys whose values are frame columns (the frames table's columns up to `group`).
const TOP: usize = 28;
const TOP_COMMAND: usize = 10;
const TOP_EXPERT: usize = 13;
const TOP_ANSWERS: usize = 22;
const TOP_TOPIC: usize = 25;

/// The keys of a producer, a consumer or a command that are columns.
const ACTOR_KEYS: [&str; 4] = ["id", "topic", "name", "subscription"];
const PRODUCER: usize = 0;
const CONSUMER: usize = 1;
const COMMAND: usize = 2;

/// The keys of a message that are columns (the messages table's from `payload_size`), and the place of
/// `message_id` among them; a row's cells are its keys' and then the message id's fields.
const MESSAGE_KEYS: usize = 10;
const FIRST_MESSAGE_KEY: usize = 12;
const PAYLOAD_SIZE: usize = 0;
const PAYLOAD_SHA256: usize = 1;
const MESSAGE_ID: usize = 2;
const ROW_CELLS: usize = MESSAGE_KEYS + ID_KEYS;

/// The keys of a finding that are columns.
const FINDING_KEYS: [&str; 3] = ["id", "severity", "message"];

/// The record's lists whose objects are rows of a table of their own.
const ROW_LISTS: [&str; 2] = ["messages", "expert"];
const MESSAGE_ROWS: usize = 0;
const FINDING_ROWS: usize = 1;

fn row_keys(list: usize) -> impl Iterator<Item = &'static str> {
    let messages = MESSAGES[FIRST_MESSAGE_KEY..].iter().map(|(name, _)| *name);
    let findings = FINDING_KEYS.iter().copied();
    (list == MESSAGE_ROWS)
        .then_some(messages)
        .into_iter()
        .flatten()
        .chain((list == FINDING_ROWS).then_some(findings).into_iter().flatten())
}

fn place_in(keys: impl Iterator<Item = &'static str>, key: &str) -> Option<usize> {
    keys.into_iter().position(|k| k == key)
}

/// What a container being written is.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Place {
    Record,
    /// The producer, consumer or command: some of its keys are columns.
    Actor(usize),
    /// A list of `ROW_LISTS`, and one of its objects.
    Rows(usize),
    Row(usize),
    /// A row's object whose keys are fields of a struct column (a message's `message_id`).
    Fields(usize),
    /// Nothing in it is a column of its own.
    Inside,
}

/// Which column a value is.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Top(usize),
    Actor(usize, usize),
    RowKey(usize, usize),
    Nothing,
}

impl Found {
    fn clear(&mut self) {
        self.top = [Cell::Absent; TOP];
        self.actors = [[Cell::Absent; 4]; 3];
        self.rows.iter_mut().for_each(Vec::clear);
        self.items = [0; 2];
        self.digests.clear();
    }
}

/// One record's values, as the sink found them.
struct Found {
    top: [Cell; TOP],
    actors: [[Cell; 4]; 3],
    /// Per `ROW_LISTS` list, each object: its place in the list and its keys' values.
    rows: [Vec<(usize, [Cell; ROW_CELLS])>; 2],
    items: [usize; 2],
    /// The record's digests (a message's payload_sha256), each a `Cell::Digest`.
    digests: Vec<[u8; 32]>,
}

impl Default for Found {
    fn default() -> Found {
        Found {
            top: [Cell::Absent; TOP],
            actors: [[Cell::Absent; 4]; 3],
            rows: Default::default(),
            items: [0; 2],
            digests: Vec::new(),
        }
    }
}

/// What the keys named by statics are, by (address, where), kept from record to record: a direct-mapped
/// table of `MEMO` entries (a clash only costs a lookup).
type Memo = Vec<Option<(usize, u16, (Place, Slot))>>;
const MEMO: usize = 512;

/// A record, as the record builder writes it, into the cells of its rows (`RecordTables::record`).
pub struct TableSink<'o> {
    /// The JSON text of the values kept as text and, with `whole`, the record's line.
    json: JsonSink<'o>,
    /// Strings, each once, at their ranges.
    strings: &'o mut String,
    /// The whole line is written (its `json` column); else only the texts of the columns kept as JSON.
    whole: bool,
    /// Containers open: what each is, its column, where its text starts (when it is written), and whether
    /// its text is written alone (nothing around it is).
    open: Vec<(Place, Slot, Option<usize>, bool)>,
    /// How many of the open containers are written as JSON text (without `whole`).
    writing: usize,
    found: &'o mut Found,
    memo: &'o mut Memo,
}

impl<'o> TableSink<'o> {
    fn new(
        text: &'o mut Vec<u8>,
        strings: &'o mut String,
        found: &'o mut Found,
        memo: &'o mut Memo,
        whole: bool,
    ) -> TableSink<'o> {
        TableSink { json: JsonSink::new(text), strings, whole, open: Vec::with_capacity(4), writing: 0, found, memo }
    }

    fn key_name<'k>(key: &'k Key<'_>) -> &'k str {
        match key {
            Key::Name(name) => name.as_str(),
            Key::Text(text) => text.as_str(),
            Key::Item => "",
        }
    }

    /// Whether a container (an object when `object`) under `key`, put whole, holds columns: then it is
    /// walked as if opened, filled and closed.
    fn holds_columns(&self, key: &Key<'_>, object: bool) -> bool {
        let name = Self::key_name(key);
        match self.open.last().map(|(place, ..)| *place) {
            Some(Place::Record) => {
                matches!((name, object), ("producer" | "consumer" | "command", true))
                    || (!object && ROW_LISTS.contains(&name))
            }
            Some(Place::Rows(_)) => object,
            Some(Place::Row(list)) => object && list == MESSAGE_ROWS && name == "message_id",
            _ => false,
        }
    }

    /// What a value under `key` in the container open now is: as a container, what it holds; its column.
    fn slot(&mut self, key: &Key<'_>, object: bool) -> (Place, Slot) {
        let place = self.open.last().map(|(place, ..)| *place);
        match place {
            None => (Place::Record, Slot::Nothing),
            Some(Place::Rows(list)) => {
                self.found.items[list] += 1;
                if object {
                    let position = self.found.items[list] - 1;
                    self.found.rows[list].push((position, Default::default()));
                    (Place::Row(list), Slot::Nothing)
                } else {
                    (Place::Inside, Slot::Nothing)
                }
            }
            Some(Place::Inside) => (Place::Inside, Slot::Nothing),
            Some(place) => match key {
                // a name the record builder writes is a static: its answer, once found, is remembered by
                // its address (a record has tens of keys, each message ten: comparing them all against the
                // columns' names was a tenth of the time)
                Key::Name(name) => {
                    let address = *name as *const _ as usize;
                    let context = match place {
                        Place::Record => object as u16,
                        Place::Actor(actor) => 2 + actor as u16,
                        Place::Row(list) => 8 + list as u16,
                        Place::Fields(list) => 12 + list as u16,
                        _ => unreachable!("handled above"),
                    };
                    let memo = &mut self.memo[(address >> 3) % MEMO];
                    if let Some((at, within, found)) = *memo {
                        if at == address && within == context {
                            return found;
                        }
                    }
                    let found = Self::lookup(place, name.as_str(), object);
                    self.memo[(address >> 3) % MEMO] = Some((address, context, found));
                    found
                }
                _ => Self::lookup(place, Self::key_name(key), object),
            },
        }
    }

    /// What a key of a record, an actor or a row is (`slot` without its memory).
    fn lookup(place: Place, name: &str, object: bool) -> (Place, Slot) {
        match place {
            Place::Record => match (name, object) {
                ("producer", true) => (Place::Actor(PRODUCER), Slot::Nothing),
                ("consumer", true) => (Place::Actor(CONSUMER), Slot::Nothing),
                ("command", true) => (Place::Actor(COMMAND), Slot::Top(TOP_COMMAND)),
                (_, object) => {
                    let top = FRAMES[..TOP].iter().position(|(n, _)| *n == name).map_or(Slot::Nothing, Slot::Top);
                    match ROW_LISTS.iter().position(|list| *list == name) {
                        Some(list) if !object => (Place::Rows(list), top),
                        _ => (Place::Inside, top),
                    }
                }
            },
            Place::Actor(actor) => {
                let at = ACTOR_KEYS.iter().position(|k| *k == name);
                (Place::Inside, at.map_or(Slot::Nothing, |at| Slot::Actor(actor, at)))
            }
            Place::Row(list) => match place_in(row_keys(list), name) {
                Some(MESSAGE_ID) if object && list == MESSAGE_ROWS => {
                    (Place::Fields(list), Slot::RowKey(list, MESSAGE_ID))
                }
                at => (Place::Inside, at.map_or(Slot::Nothing, |at| Slot::RowKey(list, at))),
            },
            Place::Fields(list) => {
                let at = MESSAGE_ID_FIELDS[..ID_KEYS].iter().position(|k| *k == name);
                (Place::Inside, at.map_or(Slot::Nothing, |at| Slot::RowKey(list, MESSAGE_KEYS + at)))
            }
            Place::Rows(_) | Place::Inside => (Place::Inside, Slot::Nothing),
        }
    }

    #[inline]
    fn set(&mut self, slot: Slot, cell: Cell) {
        match slot {
            Slot::Top(at) => self.found.top[at] = cell,
            Slot::Actor(actor, at) => self.found.actors[actor][at] = cell,
            Slot::RowKey(list, at) => {
                if let Some(row) = self.found.rows[list].last_mut() {
                    row.1[at] = cell;
                }
            }
            Slot::Nothing => {}
        }
    }

    fn string(&mut self, text: &str) -> Cell {
        let start = self.strings.len();
        self.strings.push_str(text);
        Cell::Str(start as u32, self.strings.len() as u32)
    }

    /// A scalar's cell; None for what is kept as JSON text.
    fn cell_of<F: Front>(&mut self, atom: &Atom<'_, F>) -> SinkResult<Option<Cell>> {
        Ok(Some(match atom {
            Atom::Value(value) => match value {
                Value::Null => Cell::Null,
                Value::Bool(v) => Cell::Bool(*v),
                Value::Int(v) => Cell::Int(*v),
                Value::UInt(v) => Cell::UInt(*v),
                Value::Float(v) if v.is_finite() => Cell::Float(*v),
                Value::Float(_) => Cell::Null, // JSON has no such number: written null
                Value::Str(text) => self.string(text.as_str()),
                Value::Bytes(_) | Value::List(_) | Value::Map(_) => return Ok(None),
            },
            Atom::Text(text) => self.string(text.as_str()),
            Atom::Name(name) => self.string(name.as_str()),
            Atom::Str(text, _) => self.string(text),
            Atom::Plain(text) => self.string(text),
            // as the JSON line writes bytes: as text (never in the contract)
            Atom::Bytes(bytes) => self.string(&text_lossless(F::bytes(bytes))),
            Atom::Values(_) | Atom::EmptyMap => return Ok(None),
        }))
    }

    /// A value under `key` into `slot`, its column (a key's `put` once its column is known).
    fn put_in<F: Front>(&mut self, key: Key<'_>, slot: Slot, atom: Atom<'_, F>) -> SinkResult<()> {
        let cell = self.cell_of(&atom)?;
        let column = !matches!(slot, Slot::Nothing);
        match cell {
            // a scalar: into its column as it is; into the text only when the text is written
            Some(cell) => {
                if self.writes() {
                    RecordSink::<F>::put(&mut self.json, key, atom)?;
                }
                self.set(slot, cell);
            }
            // a value kept as its JSON text: written (alone, when nothing around it is) where it is a column
            None if self.writes() => {
                RecordSink::<F>::put(&mut self.json, key, atom)?;
                let start = self.json.value_start;
                self.set(slot, Cell::Json(start as u32, self.json.out.len() as u32));
            }
            None if column => {
                let start = self.json.out.len();
                RecordSink::<F>::put(&mut self.json, Key::Item, atom)?;
                self.set(slot, Cell::Json(start as u32, self.json.out.len() as u32));
            }
            None => {}
        }
        Ok(())
    }

    /// A digest into `slot`, its column, as its bytes.
    fn digest_in(&mut self, slot: Slot, digest: &[u8; 32]) {
        self.found.digests.push(*digest);
        self.set(slot, Cell::Digest(self.found.digests.len() as u32 - 1));
    }

    /// Whether what is written now goes into the JSON text.
    fn writes(&self) -> bool {
        self.whole || self.writing > 0
    }
}

impl<F: Front> RecordSink<F> for TableSink<'_> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, F>) -> SinkResult<()> {
        // a container put whole (an analysis note such as `producer`) whose keys are columns: walked as if
        // opened, filled and closed (the same text)
        match atom {
            Atom::Value(value @ (Value::Map(_) | Value::List(_)))
                if self.holds_columns(&key, matches!(value, Value::Map(_))) =>
            {
                return walk::<F>(self, key, value);
            }
            Atom::Values(items) if self.holds_columns(&key, false) => {
                RecordSink::<F>::open(self, key, true)?;
                for item in items {
                    walk::<F>(self, Key::Item, item)?;
                }
                return RecordSink::<F>::close(self);
            }
            _ => {}
        }
        let (_, slot) = self.slot(&key, false);
        self.put_in(key, slot, atom)
    }

    fn put_digest(&mut self, key: Key<'_>, digest: &[u8; 32]) -> SinkResult<()> {
        if self.writes() {
            // the record's text is written: the hex, as every record has it
            return RecordSink::<F>::put(self, key, Atom::Plain(hex_digest(digest, &mut [0; 64])));
        }
        let (_, slot) = self.slot(&key, false);
        self.digest_in(slot, digest);
        Ok(())
    }

    /// A message's row filled from its parts: its fixed keys' cells set where they are, the rest put as any
    /// record's keys are. With the record's text written, or outside a messages list, as any sink writes it.
    fn message(&mut self, message: &MessageParts<'_>) -> SinkResult<()> {
        if self.writes() || !matches!(self.open.last(), Some((Place::Rows(MESSAGE_ROWS), ..))) {
            return write_message_parts::<F>(self, message);
        }
        // what opening the row's object does
        self.found.items[MESSAGE_ROWS] += 1;
        let position = self.found.items[MESSAGE_ROWS] - 1;
        self.found.rows[MESSAGE_ROWS].push((position, Default::default()));
        self.open.push((Place::Row(MESSAGE_ROWS), Slot::Nothing, None, false));
        let key = |at: usize| Slot::RowKey(MESSAGE_ROWS, at);
        self.put_in::<F>(Key::Item, key(PAYLOAD_SIZE), Atom::Value(message.payload_size))?;
        match message.payload {
            Some(payload) => self.digest_in(key(PAYLOAD_SHA256), &crate::codecs::sha256(payload)),
            None => self.put_in::<F>(Key::Item, key(PAYLOAD_SHA256), Atom::Value(&Value::Null))?,
        }
        if let Some(id) = message.id {
            self.set(key(MESSAGE_ID), Cell::Object);
            for (name, value) in id {
                let at = MESSAGE_ID_FIELDS[..ID_KEYS].iter().position(|k| *k == name.as_str());
                let slot = at.map_or(Slot::Nothing, |at| key(MESSAGE_KEYS + at));
                self.put_in::<F>(Key::Name(name), slot, Atom::Value(value))?;
            }
        }
        for (field, value) in message.fields {
            RecordSink::<F>::put(self, *field, value.atom())?;
        }
        if let (true, Some(payload)) = (message.payload_bytes, message.payload) {
            put_payload_bytes::<F>(self, payload)?;
        }
        self.open.pop();
        Ok(())
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> SinkResult<()> {
        let (place, slot) = self.slot(&key, !list);
        let fields = matches!(place, Place::Fields(_));
        if fields {
            self.set(slot, Cell::Object); // its keys' cells follow
        }
        let (start, alone) = if self.writes() {
            RecordSink::<F>::open(&mut self.json, key, list)?;
            (Some(self.json.value_start), false)
        } else if !matches!(slot, Slot::Nothing) && !fields {
            // a column kept as JSON text, inside nothing written: its text alone
            let start = self.json.out.len();
            RecordSink::<F>::open(&mut self.json, Key::Item, list)?;
            self.writing += 1;
            (Some(start), true)
        } else {
            (None, false)
        };
        self.open.push((place, slot, start, alone));
        Ok(())
    }

    fn close(&mut self) -> SinkResult<()> {
        let Some((place, slot, start, alone)) = self.open.pop() else {
            return RecordSink::<F>::close(&mut self.json);
        };
        if let Some(start) = start {
            RecordSink::<F>::close(&mut self.json)?;
            if alone {
                self.writing -= 1;
            }
            if !matches!(place, Place::Fields(_)) {
                self.set(slot, Cell::Json(start as u32, self.json.out.len() as u32));
            }
        }
        Ok(())
    }
}

/// A value as the record builder would write it: containers opened and closed, the rest put.
fn walk<F: Front>(sink: &mut TableSink<'_>, key: Key<'_>, value: &Value) -> SinkResult<()> {
    match value {
        Value::Map(entries) => {
            RecordSink::<F>::open(sink, key, false)?;
            for (k, v) in entries {
                // a declared name as such: its column is remembered by its address (`TableSink::slot`)
                let key = match k {
                    Text::Name(name) => Key::Name(name),
                    text => Key::Text(text),
                };
                walk::<F>(sink, key, v)?;
            }
            RecordSink::<F>::close(sink)
        }
        Value::List(items) => {
            RecordSink::<F>::open(sink, key, true)?;
            for v in items {
                walk::<F>(sink, Key::Item, v)?;
            }
            RecordSink::<F>::close(sink)
        }
        other => RecordSink::<F>::put(sink, key, Atom::Value(other)),
    }
}

// ------------------------------------------------------------------------------------------ the columns

enum Builder {
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    Text(LargeStringBuilder),
    Repeated(RepeatedBuilder),
    Digest(FixedSizeBinaryBuilder),
    Fields(FieldsBuilder),
}

/// A struct of integer fields made row by row (`Kind::Fields`).
struct FieldsBuilder {
    names: &'static [&'static str],
    fields: Vec<Int64Builder>,
    valid: NullBufferBuilder,
}

impl FieldsBuilder {
    fn with_capacity(names: &'static [&'static str], rows: usize) -> FieldsBuilder {
        let fields = names.iter().map(|_| Int64Builder::with_capacity(rows)).collect();
        FieldsBuilder { names, fields, valid: NullBufferBuilder::new(rows) }
    }

    /// A row: `value`, an object (its keys' values in `keys`, in the fields' order) or one integer (`id`).
    fn append(&mut self, value: Cell, keys: &[Cell]) {
        let (id, object) = match value {
            Cell::Object => (None, true),
            scalar => (int_of(scalar), false),
        };
        let (last, fields) = self.fields.split_last_mut().expect("a struct has fields");
        for (at, field) in fields.iter_mut().enumerate() {
            match keys.get(at).copied().and_then(int_of).filter(|_| object) {
                Some(v) => field.append_value(v),
                None => field.append_null(),
            }
        }
        match id {
            Some(v) => last.append_value(v),
            None => last.append_null(),
        }
        self.valid.append(object || id.is_some());
    }

    fn finish(&mut self) -> StructArray {
        let arrays = self.fields.iter_mut().map(|f| Arc::new(f.finish()) as ArrayRef).collect();
        // every field has a row per row of the struct
        StructArray::try_new(fields_of(self.names), arrays, self.valid.finish()).expect("fields of one length")
    }
}

/// A dictionary<int32, string> column made row by row: each distinct value once in `values`, a row its key.
/// The last value's key is kept: a frame's messages, and runs of frames of one connection, repeat it, and
/// comparing a few bytes is cheaper than hashing them (arrow's dictionary builder hashed every row: 6 % of
/// a decoding task).
struct RepeatedBuilder {
    keys: Int32Builder,
    values: StringBuilder,
    index: crate::FastMap<Box<str>, i32>,
    /// The last value given and its key (None: no value yet in this batch).
    last: String,
    last_key: Option<i32>,
}

impl RepeatedBuilder {
    fn with_capacity(rows: usize) -> RepeatedBuilder {
        RepeatedBuilder {
            keys: Int32Builder::with_capacity(rows),
            values: StringBuilder::new(),
            index: Default::default(),
            last: String::new(),
            last_key: None,
        }
    }

    fn key(&mut self, text: &str) -> i32 {
        if let Some(key) = self.last_key.filter(|_| self.last == text) {
            return key;
        }
        let key = match self.index.get(text) {
            Some(key) => *key,
            None => {
                let key = self.index.len() as i32;
                self.values.append_value(text);
                self.index.insert(text.into(), key);
                key
            }
        };
        self.last.clear();
        self.last.push_str(text);
        self.last_key = Some(key);
        key
    }

    fn append_options(&mut self, text: Option<&str>, n: usize) {
        match text {
            Some(text) => {
                let key = self.key(text);
                self.keys.append_value_n(key, n);
            }
            None => self.keys.append_nulls(n),
        }
    }

    fn finish(&mut self) -> DictionaryArray<Int32Type> {
        let keys = self.keys.finish();
        let values = Arc::new(self.values.finish());
        self.index.clear();
        self.last_key = None;
        // every key was given for a value appended
        DictionaryArray::try_new(keys, values).expect("keys within the values")
    }
}

/// A record's texts: the JSON text (`json`) and the strings (`strings`) its cells' ranges are in.
struct Texts<'a> {
    json: &'a [u8],
    /// `json` checked as UTF-8 once for the record, not once per cell (None: it is not, the cells are checked)
    json_text: Option<&'a str>,
    strings: &'a str,
    digests: &'a [[u8; 32]],
}

impl<'a> Texts<'a> {
    fn new(json: &'a [u8], strings: &'a str, digests: &'a [[u8; 32]]) -> Texts<'a> {
        Texts { json, json_text: std::str::from_utf8(json).ok(), strings, digests }
    }

    fn str(&self, cell: Cell) -> Option<&str> {
        match cell {
            Cell::Str(start, end) => self.strings.get(start as usize..end as usize),
            Cell::Json(start, end) => match self.json_text {
                Some(json) => json.get(start as usize..end as usize),
                None => std::str::from_utf8(self.json.get(start as usize..end as usize)?).ok(),
            },
            _ => None,
        }
    }

    /// A digest's bytes: kept so, or written as hex.
    fn digest(&self, cell: Cell) -> Option<[u8; 32]> {
        match cell {
            Cell::Digest(at) => self.digests.get(at as usize).copied(),
            cell => self.str(cell).and_then(digest),
        }
    }

    /// A cell as a text column holds it: a string as it is, any other value as its JSON text.
    fn text(&self, cell: Cell) -> Option<std::borrow::Cow<'_, str>> {
        match cell {
            Cell::Str(..) | Cell::Json(..) => self.str(cell).map(std::borrow::Cow::Borrowed),
            Cell::Digest(_) => {
                self.digest(cell).map(|d| std::borrow::Cow::Owned(hex_digest(&d, &mut [0; 64]).to_owned()))
            }
            Cell::Absent | Cell::Null | Cell::Object => None,
            scalar => {
                let mut number = Vec::new();
                scalar_json(scalar, &mut number);
                String::from_utf8(number).ok().map(std::borrow::Cow::Owned)
            }
        }
    }
}

/// A cell as an int column holds it.
fn int_of(cell: Cell) -> Option<i64> {
    match cell {
        Cell::Int(v) => Some(v),
        Cell::UInt(v) => i64::try_from(v).ok(),
        _ => None,
    }
}

/// A cell as a float column holds it.
fn float_of(cell: Cell) -> Option<f64> {
    match cell {
        Cell::Float(v) => Some(v),
        Cell::Int(v) => Some(v as f64),
        Cell::UInt(v) => Some(v as f64),
        _ => None,
    }
}

impl Builder {
    /// A column's builder with room for `rows` rows and `bytes` of text.
    fn new(kind: Kind, rows: usize, bytes: usize) -> Builder {
        match kind {
            Kind::Int => Builder::Int(Int64Builder::with_capacity(rows)),
            Kind::Float => Builder::Float(Float64Builder::with_capacity(rows)),
            Kind::Bool => Builder::Bool(BooleanBuilder::with_capacity(rows)),
            Kind::Text => Builder::Text(LargeStringBuilder::with_capacity(rows, bytes)),
            Kind::Repeated => Builder::Repeated(RepeatedBuilder::with_capacity(rows)),
            Kind::Digest => Builder::Digest(FixedSizeBinaryBuilder::with_capacity(rows, 32)),
            Kind::Fields(names) => Builder::Fields(FieldsBuilder::with_capacity(names, rows)),
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Builder::Int(_) => Kind::Int,
            Builder::Float(_) => Kind::Float,
            Builder::Bool(_) => Kind::Bool,
            Builder::Text(_) => Kind::Text,
            Builder::Repeated(_) => Kind::Repeated,
            Builder::Digest(_) => Kind::Digest,
            Builder::Fields(b) => Kind::Fields(b.names),
        }
    }

    /// A cell as this column takes it; the bytes it added.
    fn push(&mut self, cell: Cell, texts: &Texts<'_>) -> usize {
        match self {
            // (a value or a null appended as such: arrow's append_option is a call per cell)
            Builder::Int(b) => {
                match int_of(cell) {
                    Some(v) => b.append_value(v),
                    None => b.append_null(),
                }
                8
            }
            Builder::Float(b) => {
                match float_of(cell) {
                    Some(v) => b.append_value(v),
                    None => b.append_null(),
                }
                8
            }
            Builder::Bool(b) => {
                b.append_option(match cell {
                    Cell::Bool(v) => Some(v),
                    _ => None,
                });
                1
            }
            Builder::Text(b) => {
                let text = texts.text(cell);
                b.append_option(text.as_deref());
                text.map_or(0, |t| t.len()) + 8
            }
            Builder::Repeated(b) => {
                b.append_options(texts.text(cell).as_deref(), 1);
                4
            }
            Builder::Digest(b) => {
                match texts.digest(cell) {
                    Some(bytes) => b.append_value(bytes).expect("32 bytes"),
                    None => b.append_null(),
                }
                32
            }
            Builder::Fields(b) => {
                b.append(cell, &[]);
                8 * b.fields.len()
            }
        }
    }

    /// A cell as this column takes it, in `n` rows (the messages of a frame repeat its columns); the bytes
    /// they added.
    fn push_n(&mut self, cell: Cell, n: usize, texts: &Texts<'_>) -> usize {
        match n {
            1 => self.push(cell, texts),
            _ => self.push_run(cell, n, texts),
        }
    }

    /// A row of a struct column: `value` and its keys' cells (`keys`); other columns take `value` alone.
    fn push_fields(&mut self, value: Cell, keys: &[Cell], texts: &Texts<'_>) -> usize {
        match self {
            Builder::Fields(b) => {
                b.append(value, keys);
                8 * b.fields.len()
            }
            other => other.push(value, texts),
        }
    }

    fn push_run(&mut self, cell: Cell, n: usize, texts: &Texts<'_>) -> usize {
        match self {
            Builder::Int(b) => match int_of(cell) {
                Some(v) => b.append_value_n(v, n),
                None => b.append_nulls(n),
            },
            Builder::Float(b) => match float_of(cell) {
                Some(v) => b.append_value_n(v, n),
                None => b.append_nulls(n),
            },
            Builder::Repeated(b) => {
                b.append_options(texts.text(cell).as_deref(), n);
                return 4 * n;
            }
            _ => return (0..n).map(|_| self.push(cell, texts)).sum(),
        }
        8 * n
    }

    /// The column made, and the builder emptied with the room it had (arrow's builders start again empty:
    /// growing them back, a copy at each doubling, was most of a task's memmove).
    fn finish(&mut self) -> ArrayRef {
        let bytes = match self {
            Builder::Text(b) => b.values_slice().len(),
            _ => 0,
        };
        let array = self.finish_array();
        let rows = array.len();
        if rows > 0 {
            *self = Builder::new(self.kind(), rows, bytes);
        }
        array
    }

    fn finish_array(&mut self) -> ArrayRef {
        match self {
            Builder::Repeated(b) => Arc::new(b.finish()),
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Digest(b) => Arc::new(b.finish()),
            Builder::Fields(b) => Arc::new(b.finish()),
        }
    }
}

/// A scalar written as JSON writes it (a text column's value when it is not a string).
fn scalar_json(cell: Cell, out: &mut Vec<u8>) {
    let value = match cell {
        Cell::Int(v) => Value::Int(v),
        Cell::UInt(v) => Value::UInt(v),
        Cell::Float(v) => Value::Float(v),
        Cell::Bool(v) => Value::Bool(v),
        _ => Value::Null,
    };
    value.write_json(out);
}

/// 64 hex digits as 32 bytes (a digit's value by table: this ran per message, at 20 instructions a digit).
fn digest(hex: &str) -> Option<[u8; 32]> {
    const NOT_HEX: u8 = 0xff;
    const VALUES: [u8; 256] = {
        let mut values = [NOT_HEX; 256];
        let mut c = 0;
        while c < 256 {
            values[c] = match c as u8 {
                b'0'..=b'9' => c as u8 - b'0',
                b'a'..=b'f' => c as u8 - b'a' + 10,
                b'A'..=b'F' => c as u8 - b'A' + 10,
                _ => NOT_HEX,
            };
            c += 1;
        }
        values
    };
    let hex: &[u8; 64] = hex.as_bytes().try_into().ok()?;
    let mut bytes = [0u8; 32];
    let mut bad = 0;
    for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
        let (high, low) = (VALUES[pair[0] as usize], VALUES[pair[1] as usize]);
        bad |= high | low;
        *byte = (high << 4) | (low & 15);
    }
    (bad & 0xf0 == 0).then_some(bytes)
}

/// One table being made.
struct Table {
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: usize,
}

impl Table {
    fn new(columns: Columns, with_json: bool) -> Table {
        let schema = schema(columns, with_json);
        let json = with_json && std::ptr::eq(columns, FRAMES);
        let kinds = columns.iter().chain(json.then_some(&JSON_COLUMN)).map(|(_, kind)| *kind);
        Table { schema, builders: kinds.map(|kind| Builder::new(kind, 0, 0)).collect(), rows: 0 }
    }

    fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let arrays = self.builders.iter_mut().map(Builder::finish).collect();
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), arrays)
    }
}

/// The five tables of records, until taken.
pub struct RecordTables {
    frames: Table,
    messages: Table,
    problems: Table,
    exchanges: Table,
    events: Table,
    /// Events added so far (never reset: an event's `order` runs on across batches).
    events_seen: i64,
    with_json: bool,
    /// A record's texts (reused).
    text: Vec<u8>,
    strings: String,
    /// Bytes of values held (what a writer flushes by).
    held: usize,
    /// The summary's statistics of the frames added (`take_summary`).
    summary: SummaryMaker,
    /// A record's values (reused).
    found: Found,
    memo: Memo,
}

/// Where a frame column is in the frames table.
struct FrameAt {
    index: usize,
    protocol: usize,
    time: usize,
    conn: usize,
    direction: usize,
    packet: usize,
    kind: usize,
    request_type: usize,
    latency_ms: usize,
    producer_name: usize,
    producer_id: usize,
    consumer_id: usize,
    subscription: usize,
}

const F: FrameAt = FrameAt {
    index: 0,
    protocol: 1,
    time: 2,
    conn: 3,
    direction: 6,
    packet: 7,
    kind: 9,
    request_type: 24,
    latency_ms: 23,
    producer_name: 28,
    producer_id: 29,
    consumer_id: 30,
    subscription: 31,
};

impl RecordTables {
    /// `with_json`: the frames table keeps each record's line (`--json`'s) in a `json` column.
    pub fn new(with_json: bool) -> RecordTables {
        debug_assert_eq!(at(FRAMES, "latency_ms"), F.latency_ms);
        debug_assert_eq!(at(FRAMES, "request_type"), F.request_type);
        debug_assert_eq!(at(FRAMES, "subscription"), F.subscription);
        debug_assert_eq!(at(MESSAGES, "message_id"), FIRST_MESSAGE_KEY + MESSAGE_ID);
        RecordTables {
            frames: Table::new(FRAMES, with_json),
            messages: Table::new(MESSAGES, false),
            problems: Table::new(PROBLEMS, false),
            exchanges: Table::new(EXCHANGES, false),
            events: Table::new(EVENTS, false),
            events_seen: 0,
            with_json,
            text: Vec::new(),
            strings: String::new(),
            held: 0,
            summary: SummaryMaker::default(),
            found: Found::default(),
            memo: vec![None; MEMO],
        }
    }

    /// Bytes of values held since the last `finish`.
    pub fn size(&self) -> usize {
        self.held
    }

    /// Frames held since the last `finish`.
    pub fn frames(&self) -> usize {
        self.frames.rows
    }

    /// A record, written by `build` into a [`TableSink`], added as rows. On an error nothing of it is kept.
    /// `answered`: the time and packet of the request the frame answers, as the analysis paired them.
    pub fn record<R>(
        &mut self,
        answered: Option<(f64, u64)>,
        build: impl FnOnce(&mut TableSink<'_>) -> SinkResult<R>,
    ) -> SinkResult<R> {
        self.text.clear();
        self.strings.clear();
        let mut found = std::mem::take(&mut self.found);
        found.clear();
        let mut sink = TableSink::new(&mut self.text, &mut self.strings, &mut found, &mut self.memo, self.with_json);
        let built = build(&mut sink);
        if built.is_ok() {
            self.add(&found, answered);
        }
        self.found = found; // its lists' room kept for the next record
        built
    }

    fn add(&mut self, found: &Found, answered: Option<(f64, u64)>) {
        let texts = Texts::new(&self.text, &self.strings, &found.digests);
        let mut top = found.top;
        let actor = |actor: usize, at: usize| found.actors[actor][at];
        // no findings is no value; the frame's topic is its producer's, its consumer's, its own, its command's
        if matches!(top[TOP_EXPERT], Cell::Json(s, e) if &self.text[s as usize..e as usize] == b"[]") {
            top[TOP_EXPERT] = Cell::Absent;
        }
        top[TOP_TOPIC] = actor(PRODUCER, 1)
            .present()
            .or(actor(CONSUMER, 1).present())
            .or(top[TOP_TOPIC].present())
            .unwrap_or(actor(COMMAND, 1));
        let frame: [Cell; 32] = std::array::from_fn(|i| match i {
            _ if i < TOP => top[i],
            _ if i == F.producer_name => actor(PRODUCER, 2),
            _ if i == F.producer_id => actor(PRODUCER, 0),
            _ if i == F.consumer_id => actor(CONSUMER, 0),
            _ => actor(CONSUMER, 3),
        });
        let mut held = 0;
        for (builder, cell) in self.frames.builders.iter_mut().zip(frame) {
            held += builder.push(cell, &texts);
        }
        if self.with_json {
            if let Builder::Text(json) = &mut self.frames.builders[FRAMES.len()] {
                let line = std::str::from_utf8(&self.text).unwrap_or_default();
                json.append_value(line);
                held += line.len();
            }
        }
        self.frames.rows += 1;
        // a message's row: the frame's protocol, index, (position), conn, time, type, direction, topic,
        // producer_name, producer_id, consumer_id, subscription; then the message's keys
        let shared = [
            (0, frame[F.protocol]),
            (1, frame[F.index]),
            (3, frame[F.conn]),
            (4, frame[F.time]),
            (5, frame[F.kind]),
            (6, frame[F.direction]),
            (7, frame[TOP_TOPIC]),
            (8, frame[F.producer_name]),
            (9, frame[F.producer_id]),
            (10, frame[F.consumer_id]),
            (11, frame[F.subscription]),
        ];
        let messages = &found.rows[MESSAGE_ROWS];
        if !messages.is_empty() {
            // column by column: the frame's columns once for all its messages
            let columns = &mut self.messages.builders;
            for (at, cell) in shared {
                held += columns[at].push_n(cell, messages.len(), &texts);
            }
            for (position, _) in messages {
                held += columns[2].push(Cell::Int(*position as i64), &texts);
            }
            for at in 0..MESSAGE_KEYS {
                let column = &mut columns[FIRST_MESSAGE_KEY + at];
                if matches!(column, Builder::Fields(_)) {
                    for (_, keys) in messages {
                        held += column.push_fields(keys[at], &keys[MESSAGE_KEYS..], &texts);
                    }
                    continue;
                }
                for (_, keys) in messages {
                    held += column.push(keys[at], &texts);
                }
            }
            self.messages.rows += messages.len();
        }
        // a finding's row: id, severity, message, then the frame's protocol, index, conn, time, packet, type
        for (_, keys) in &found.rows[FINDING_ROWS] {
            let row = [
                keys[0],
                keys[1],
                keys[2],
                frame[F.protocol],
                frame[F.index],
                frame[F.conn],
                frame[F.time],
                frame[F.packet],
                frame[F.kind],
                Cell::Absent,
            ];
            for (builder, cell) in self.problems.builders.iter_mut().zip(row) {
                held += builder.push(cell, &texts);
            }
            self.problems.rows += 1;
        }
        if frame[TOP_ANSWERS].present().is_some() {
            let (time, packet) = match answered {
                Some((time, packet)) => (Cell::Float(time), Cell::UInt(packet)),
                None => (Cell::Absent, Cell::Absent),
            };
            let row = [
                frame[F.protocol],
                frame[F.conn],
                frame[TOP_ANSWERS],
                frame[F.request_type],
                time,
                packet,
                frame[F.index],
                frame[F.kind],
                frame[F.time],
                frame[F.packet],
                frame[F.latency_ms],
                frame[TOP_TOPIC],
            ];
            for (builder, cell) in self.exchanges.builders.iter_mut().zip(row) {
                held += builder.push(cell, &texts);
            }
            self.exchanges.rows += 1;
        }
        self.held += held;
        count(&mut self.summary, &texts, &frame, found);
    }

    /// An event as a row of the events table, with its severity and text (the front end's, as a finding's);
    /// a row of the problems table too when it is worse than a note, counted in the summary's problems.
    pub fn event(&mut self, event: &EventItem<'_>, severity: &str, message: &str) {
        self.text.clear();
        self.strings.clear();
        event.write_json(severity, message, &mut self.text);
        let mut string = |text: &str| {
            let start = self.strings.len() as u32;
            self.strings.push_str(text);
            Cell::Str(start, self.strings.len() as u32)
        };
        let (kind, severity_cell, message_cell) = (string(event.kind), string(severity), string(message));
        let texts = Texts::new(&self.text, &self.strings, &[]);
        let (time, packet) = (Cell::Float(event.time), Cell::Int(event.packet));
        let conn = event.conn.map_or(Cell::Absent, Cell::UInt);
        let line = Cell::Json(0, self.text.len() as u32);
        let row = [packet, Cell::Int(self.events_seen), kind, time, conn, severity_cell, message_cell, line];
        let mut held = 0;
        for (builder, cell) in self.events.builders.iter_mut().zip(row) {
            held += builder.push(cell, &texts);
        }
        self.events.rows += 1;
        self.events_seen += 1;
        if severity != "note" {
            // id, severity, message, (protocol, frame), conn, time, packet, (frame_type, file)
            let row = [kind, severity_cell, message_cell, Cell::Absent, Cell::Absent, conn, time, packet];
            let cells = row.into_iter().chain(std::iter::repeat(Cell::Absent));
            for (builder, cell) in self.problems.builders.iter_mut().zip(cells) {
                held += builder.push(cell, &texts);
            }
            self.problems.rows += 1;
            self.summary.problem(event.kind, severity);
        }
        self.held += held;
    }

    /// The summary's statistics of the frames (and events' problems) added since the last time it was taken
    /// (`stats/summary.rs`).
    pub fn take_summary(&mut self) -> Summary {
        self.summary.take()
    }

    /// The tables made since the last `finish`, as record batches (frames, messages, problems, exchanges,
    /// events: [`TABLES`]'s order), the builders emptied.
    pub fn finish(&mut self) -> Result<[RecordBatch; 5], ArrowError> {
        self.held = 0;
        Ok([
            self.frames.finish()?,
            self.messages.finish()?,
            self.problems.finish()?,
            self.exchanges.finish()?,
            self.events.finish()?,
        ])
    }
}

/// A frame's figures for the summary, from the values its rows took.
fn count(summary: &mut SummaryMaker, texts: &Texts<'_>, frame: &[Cell; 32], found: &Found) {
    let text = |cell: Cell| texts.text(cell);

    let (protocol, kind) = (text(frame[F.protocol]), text(frame[F.kind]));
    let messages = &found.rows[MESSAGE_ROWS];
    let (topic, producer_name, subscription) = if messages.is_empty() {
        (None, None, None)
    } else {
        (text(frame[TOP_TOPIC]), text(frame[F.producer_name]), text(frame[F.subscription]))
    };
    let group = GroupOf {
        protocol: protocol.as_deref(),
        topic: topic.as_deref(),
        kind: kind.as_deref(),
        conn: int_of(frame[F.conn]),
        producer_id: int_of(frame[F.producer_id]),
        producer_name: producer_name.as_deref(),
        consumer_id: int_of(frame[F.consumer_id]),
        subscription: subscription.as_deref(),
        sent: match (&protocol, &kind) {
            (Some(protocol), Some(kind)) if !messages.is_empty() => {
                crate::protocols::by_name(protocol).and_then(|p| crate::protocols::carries_messages(p, kind))
            }
            _ => None,
        },
    };
    let payload_sizes: Vec<Option<i64>> = messages.iter().map(|(_, keys)| int_of(keys[0])).collect();
    let request_type = text(frame[F.request_type]);
    let latency = match (frame[TOP_ANSWERS].present(), float_of(frame[F.latency_ms])) {
        (Some(_), Some(latency)) => Some((request_type.as_deref(), latency)),
        _ => None,
    };
    type Texted<'t> = Option<std::borrow::Cow<'t, str>>;
    let findings: Vec<(Texted<'_>, Texted<'_>)> =
        found.rows[FINDING_ROWS].iter().map(|(_, keys)| (text(keys[0]), text(keys[1]))).collect();
    let findings: Vec<(Option<&str>, Option<&str>)> =
        findings.iter().map(|(id, severity)| (id.as_deref(), severity.as_deref())).collect();
    summary.frame(FrameFigures {
        protocol: protocol.as_deref(),
        kind: kind.as_deref(),
        conn: int_of(frame[F.conn]),
        time: float_of(frame[F.time]),
        group,
        payload_sizes: &payload_sizes,
        latency,
        findings: &findings,
    });
}

/// The tables of records made elsewhere (maps of the contract, e.g. read back from `--json` lines); events
/// are no records there (their table is empty).
pub fn tables_of(records: &[Value], with_json: bool) -> Result<[RecordBatch; 5], ArrowError> {
    let mut tables = RecordTables::new(with_json);
    for record in records {
        // a record of no shape a sink takes is no row (as an error while building is)
        let _ = tables.record(None, |sink| walk::<crate::records::NoFront>(sink, Key::Item, record));
    }
    tables.finish()
}

#[cfg(test)]
mod tests {
    use super::digest;

    #[test]
    fn a_digest_is_64_hex_digits_of_either_case_else_none() {
        let lower = "00ff10a0".repeat(8);
        let bytes = digest(&lower).expect("64 hex digits");
        assert_eq!(bytes[..4], [0x00, 0xff, 0x10, 0xa0]);
        assert_eq!(digest(&lower.to_uppercase()), Some(bytes));
        for bad in ["0g", "g0", " 0", "0/", "0:", "@0", "0`"] {
            let text = format!("{bad}{}", "0".repeat(62));
            assert_eq!(digest(&text), None, "{text}");
        }
        assert_eq!(digest(&"0".repeat(63)), None);
        assert_eq!(digest(&"0".repeat(65)), None);
    }
}
