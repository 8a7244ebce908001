//! What a frame's record (the JSON Lines contract, `docs/records.schema.json`) is written with: the sinks,
//! [`JsonSink`], the record's JSON line (byte for byte what `output/jsonl.dumps` writes of the dict),
//! [`MapSink`], Rust plain data for the engine's statistics, or a front end's own (the Python binding's dict
//! sink, the dict every renderer, filter and `check` reads), and the pieces the protocols' keys are written
//! with. The one description of the keys, their order and their values is `frame_record.rs`'s
//! `build_record`, above the protocols; this module is below them.
//!
//! The keys: index, protocol, time, conn, src, dst, direction, packet, type, command, size, problems, then
//! expert (when there are findings), first_packet (when the frame began in an earlier packet), Pulsar's
//! payload section (checksum ... messages, or messages_summary), a Python-declared protocol's own keys
//! (`ProtocolSpec.record_fields`), the analysis' notes, and with `Options.keep_frame_bytes` frame_bytes. A
//! protocol's keys and then the notes are merged as Python's `dict.update` would: a key the record already
//! holds keeps its place and takes the new value.
//!
//! The texts of findings come in with the record's input ([`Expert`]): the front end makes them (the Python
//! binding from `dissector/problems.py`'s templates, the one place they are).

use std::hash::Hasher;

use crate::name;
use crate::pb::b64;
use crate::value::{text_lossless, write_json_str, Map, Name, Text, Value};
use rayon::prelude::*;

// ------------------------------------------------------------------------------------------- the sinks

/// Where a value goes in the container being built: a declared key, a key known at run time, or the next
/// item of a list.
#[derive(Clone, Copy)]
pub enum Key<'a> {
    Name(&'static Name),
    Text(&'a Text),
    Item,
}

/// An error of a sink: a value where the record's shape has no place for it (a writer's bug), or the front
/// end's own failure (the Python binding: an exception), carried back to it as it was.
#[derive(Debug)]
pub enum SinkError {
    Misplaced(&'static str),
    /// A sink's thread ended without its answer (a panic: not seen, but not assumed); what it was doing.
    Stopped(&'static str),
    Front(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SinkError::Misplaced(what) | SinkError::Stopped(what) => write!(f, "{what}"),
            SinkError::Front(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for SinkError {}

pub type SinkResult<T> = Result<T, SinkError>;

/// The objects a front end made beforehand that a record may carry (the Python binding: `str` and `bytes`
/// objects, which its dict sink takes as they are, so a route string is not made again per record). Every
/// sink of the engine reads them as text and bytes.
pub trait Front {
    type Str;
    type Bytes: ?Sized;
    fn text(s: &Self::Str) -> SinkResult<&str>;
    fn bytes(b: &Self::Bytes) -> &[u8];
}

/// No front end: records made in Rust alone (no object made beforehand).
pub enum NoFront {}

impl Front for NoFront {
    type Str = NoFront;
    type Bytes = [u8];
    fn text(s: &NoFront) -> SinkResult<&str> {
        match *s {}
    }
    fn bytes(b: &[u8]) -> &[u8] {
        b
    }
}

/// A value of the record.
pub enum Atom<'a, F: Front> {
    Value(&'a Value),
    Values(&'a [Value]),
    Text(&'a Text),
    Name(&'static Name),
    /// Text, with the front end's string when there is one already (the route strings, the texts of
    /// findings).
    Str(&'a str, Option<&'a F::Str>),
    /// Text made here of characters JSON never escapes (a digest's hex digits): written as it is.
    Plain(&'a str),
    Bytes(&'a F::Bytes),
    EmptyMap,
}

/// What a record is written to.
pub trait RecordSink<F: Front> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, F>) -> SinkResult<()>;
    /// Open an object (or a list) under `key`; what follows goes in it until [`RecordSink::close`].
    fn open(&mut self, key: Key<'_>, list: bool) -> SinkResult<()>;
    fn close(&mut self) -> SinkResult<()>;
    /// A list of many items whose records are costly, written by `write` on several threads where the sink
    /// can ([`JsonSink`]); false when it did not: the caller writes them itself.
    fn par_items<T: Sync>(
        &mut self,
        _key: Key<'_>,
        _items: &[T],
        _write: impl Fn(&mut JsonSink<'_>, &T) -> SinkResult<()> + Sync,
    ) -> SinkResult<bool> {
        Ok(false)
    }
    /// A note of the analysis.
    fn note(&mut self, key: &Text, value: &Value) -> SinkResult<()> {
        self.put(Key::Text(key), Atom::Value(value))
    }
    /// A SHA-256 digest: its hex text, as every record writes it, unless the sink keeps the bytes (the
    /// columns' `TableSink`, whose column is the 32 bytes: no hex made and read back per message).
    fn put_digest(&mut self, key: Key<'_>, digest: &[u8; 32]) -> SinkResult<()> {
        self.put(key, Atom::Plain(hex_digest(digest, &mut [0; 64])))
    }
    /// One message of a frame's messages list: written as [`write_message_parts`] writes it, unless the sink
    /// takes its parts as they are (the columns' `TableSink`: a message's row filled without a lookup per key).
    fn message(&mut self, message: &MessageParts<'_>) -> SinkResult<()>
    where
        Self: Sized,
    {
        write_message_parts(self, message)
    }
}

/// A message of a frame's messages list, as its record has it: the payload's size and digest, the message's
/// id (each field under its name, as the object `message_id`) when the frame gives one, its other fields in
/// order, and with `payload_bytes` the payload itself.
pub struct MessageParts<'a> {
    pub payload_size: &'a Value,
    pub payload: Option<&'a [u8]>,
    pub id: Option<&'a [(&'static Name, &'a Value)]>,
    pub fields: &'a [(Key<'a>, MessageField<'a>)],
    pub payload_bytes: bool,
}

/// A message's field: a value as it was read, or text made of it (a key read as UTF-8, its base64).
#[derive(Clone, Copy)]
pub enum MessageField<'a> {
    Value(&'a Value),
    Text(&'a str),
}

impl<'a> MessageField<'a> {
    pub fn atom<F: Front>(self) -> Atom<'a, F> {
        match self {
            MessageField::Value(value) => Atom::Value(value),
            MessageField::Text(text) => Atom::Str(text, None),
        }
    }
}

/// A message's record: `{payload_size, payload_sha256, message_id?, fields…, payload_text | payload_b64?}`.
pub fn write_message_parts<F: Front>(sink: &mut impl RecordSink<F>, message: &MessageParts<'_>) -> SinkResult<()> {
    sink.open(Key::Item, false)?;
    put_payload_digest(sink, message.payload_size, message.payload)?;
    if let Some(id) = message.id {
        sink.open(Key::Name(name!("message_id")), false)?;
        for (name, value) in id {
            sink.put(Key::Name(name), Atom::Value(value))?;
        }
        sink.close()?;
    }
    for (key, field) in message.fields {
        sink.put(*key, field.atom())?;
    }
    if let (true, Some(payload)) = (message.payload_bytes, message.payload) {
        put_payload_bytes(sink, payload)?;
    }
    sink.close()
}

/// JSON, appended to a buffer.
pub struct JsonSink<'o> {
    pub out: &'o mut Vec<u8>,
    /// Per open container: whether it is still empty, and whether it is a list.
    open: Vec<(bool, bool)>,
    /// Where the last value written (or container opened) begins in `out` (the columns' `TableSink`).
    pub value_start: usize,
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

impl<F: Front> RecordSink<F> for JsonSink<'_> {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, F>) -> SinkResult<()> {
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
            Atom::Bytes(bytes) => write_json_str(&text_lossless(F::bytes(bytes)), self.out),
            Atom::EmptyMap => self.out.extend_from_slice(b"{}"),
        }
        Ok(())
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> SinkResult<()> {
        self.key(key);
        self.out.push(if list { b'[' } else { b'{' });
        self.open.push((true, list));
        Ok(())
    }

    fn close(&mut self) -> SinkResult<()> {
        let (_, list) = self.open.pop().unwrap_or((true, false));
        self.out.push(if list { b']' } else { b'}' });
        Ok(())
    }

    /// Written in pieces on the thread pool and joined in order (a large batch's messages: hashing and JSON,
    /// most of a batched frame's cost): the same bytes as one loop, on every core. Not when it is not worth it:
    /// few items, one thread, or on the pool already, as the records of the binding's thread pool are (the
    /// other threads are busy with other frames).
    fn par_items<T: Sync>(
        &mut self,
        key: Key<'_>,
        items: &[T],
        write: impl Fn(&mut JsonSink<'_>, &T) -> SinkResult<()> + Sync,
    ) -> SinkResult<bool> {
        if items.len() < PARALLEL_ITEMS || rayon::current_num_threads() < 2 || rayon::current_thread_index().is_some() {
            return Ok(false);
        }
        RecordSink::<NoFront>::open(self, key, true)?;
        let pieces: Vec<SinkResult<Vec<u8>>> = items
            .par_chunks(PARALLEL_ITEMS / 2)
            .map(|piece| {
                let mut out = Vec::with_capacity(piece.len() * 200);
                let mut sink = JsonSink::new(&mut out);
                sink.open.push((true, true)); // inside the list: items after the first get their comma
                for item in piece {
                    write(&mut sink, item)?;
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
        RecordSink::<NoFront>::close(self)?;
        Ok(true)
    }
}

/// Items of a list from which the JSON sink writes their records on several threads, in pieces of half this
/// many: below, one thread is quicker than handing out the work.
const PARALLEL_ITEMS: usize = 128;

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

    fn insert(&mut self, key: Option<Text>, value: Value) -> SinkResult<()> {
        match self.open.last_mut() {
            Some((_, Value::Map(map))) => match key {
                Some(key) => map.push((key, value)),
                None => return Err(SinkError::Misplaced("a record value without its key")),
            },
            Some((_, Value::List(items))) => items.push(value),
            Some(_) => return Err(SinkError::Misplaced("a record value in the wrong place")),
            None => match value {
                Value::Map(map) => self.record = Some(map),
                _ => return Err(SinkError::Misplaced("a record that is not a map")),
            },
        }
        Ok(())
    }
}

impl<F: Front> RecordSink<F> for MapSink {
    fn put(&mut self, key: Key<'_>, atom: Atom<'_, F>) -> SinkResult<()> {
        if self.skips(key) {
            return Ok(());
        }
        let value = match atom {
            Atom::Value(value) => self.pick(key, value).unwrap_or_else(|| value.clone()),
            Atom::Values(items) => Value::List(items.to_vec()),
            Atom::Text(text) => Value::Str(text.clone()),
            Atom::Name(name) => Value::Str(Text::Name(name)),
            Atom::Str(text, _) | Atom::Plain(text) => Value::Str(Text::Owned(text.to_owned())),
            Atom::Bytes(bytes) => Value::Bytes(F::bytes(bytes).to_vec()),
            Atom::EmptyMap => Value::Map(Map::new()),
        };
        self.insert(Self::key_text(key), value)
    }

    fn open(&mut self, key: Key<'_>, list: bool) -> SinkResult<()> {
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

    fn close(&mut self) -> SinkResult<()> {
        if self.skipping > 0 {
            self.skipping -= 1;
            return Ok(());
        }
        match self.open.pop() {
            Some((key, value)) => self.insert(key, value),
            None => Err(SinkError::Misplaced("a record closed twice")),
        }
    }
}

// ------------------------------------------------------------------------------------- finding texts

/// What a record shows of one finding (`problems.expert_record`): its id, severity and text.
pub struct Expert<F: Front> {
    pub id: &'static Name,
    pub severity: &'static Name,
    pub message: Message<F>,
}

/// A finding's text: the front end's string (which its own sink takes as it is), or text of the engine's.
pub enum Message<F: Front> {
    Front(F::Str),
    Owned(String),
}

impl<F: Front> Message<F> {
    pub(crate) fn atom(&self) -> SinkResult<Atom<'_, F>> {
        Ok(match self {
            Message::Front(text) => Atom::Str(F::text(text)?, Some(text)),
            Message::Owned(text) => Atom::Str(text, None),
        })
    }

    /// The text, owned: for a record written on another thread.
    pub fn to_owned_text(&self) -> SinkResult<String> {
        Ok(match self {
            Message::Front(text) => F::text(text)?.to_owned(),
            Message::Owned(text) => text.clone(),
        })
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

/// The keys a frame's record holds before its notes (those `build_record` writes).
const BASE_KEYS: [&str; 22] = [
    "index",
    "protocol",
    "time",
    "conn",
    "src",
    "dst",
    "direction",
    "packet",
    "type",
    "command",
    "size",
    "problems",
    "expert",
    "first_packet",
    "checksum",
    "broker_entry_metadata",
    "metadata",
    "payload_size",
    "checksum_detail",
    "uncompressed_size",
    "encrypted",
    "marker",
];

/// Whether one of these notes replaces a key of the record itself (as `dict.update` merges them): a reader of
/// the frame alone, not of its record (the timeline's lines), would show the value replaced.
pub fn notes_replace_a_key(notes: &Map) -> bool {
    notes.iter().any(|(key, _)| BASE_KEYS.contains(&key.as_str()))
}

/// The keys merged over the record (a protocol's keys, then the notes), with `dict.update`'s semantics: a
/// key already in the record keeps its place and takes the last value given for it.
pub struct Merged<'a> {
    pub(crate) layers: [&'a [(Text, Value)]; 2],
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
    pub(crate) fn new(protocol_keys: Option<&'a Map>, notes: &'a Map) -> Merged<'a> {
        let protocol_keys = protocol_keys.map_or(&[][..], Vec::as_slice);
        let keys = protocol_keys.iter().chain(notes).fold(0, |bits, (key, _)| bits | key_bit(key.as_str()));
        Merged {
            layers: [protocol_keys, notes],
            used: [vec![false; protocol_keys.len()], vec![false; notes.len()]],
            keys,
        }
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
    pub fn replaced<F: Front>(&mut self, sink: &mut impl RecordSink<F>, key: &'static Name) -> SinkResult<bool> {
        if self.keys & key_bit(key.as_str()) == 0 {
            return Ok(false);
        }
        match self.take(key.as_str()) {
            Some(value) => sink.put(Key::Name(key), Atom::Value(value)).map(|_| true),
            None => Ok(false),
        }
    }

    /// The keys the record did not hold, in order: the protocol's (a note may replace them), then the notes.
    pub(crate) fn rest<F: Front>(&mut self, sink: &mut impl RecordSink<F>) -> SinkResult<()> {
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
        if !$merged.replaced($sink, $crate::name!($key))? {
            let key = $crate::records::Key::Name($crate::name!($key));
            ($put)(key)?;
        }
    };
}
pub(crate) use own;

pub fn map_get_slice<'m>(map: &'m [(Text, Value)], key: &str) -> Option<&'m Value> {
    map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

/// A message record's `payload_size` and `payload_sha256` (null without the payload).
pub fn put_payload_digest<F: Front>(
    sink: &mut impl RecordSink<F>,
    payload_size: &Value,
    payload: Option<&[u8]>,
) -> SinkResult<()> {
    sink.put(Key::Name(name!("payload_size")), Atom::Value(payload_size))?;
    match payload {
        Some(payload) => sink.put_digest(Key::Name(name!("payload_sha256")), &crate::codecs::sha256(payload)),
        None => sink.put(Key::Name(name!("payload_sha256")), Atom::Value(&Value::Null)),
    }
}

/// A message's payload itself (`--payload`): `payload_text` when it is UTF-8, else `payload_b64`.
pub fn put_payload_bytes<F: Front>(sink: &mut impl RecordSink<F>, payload: &[u8]) -> SinkResult<()> {
    match std::str::from_utf8(payload) {
        Ok(text) => sink.put(Key::Name(name!("payload_text")), Atom::Str(text, None)),
        Err(_) => sink.put(Key::Name(name!("payload_b64")), Atom::Str(&b64(payload), None)),
    }
}

/// A digest in hex, written into `hex` (no allocation per message).
pub fn hex_digest<'h>(digest: &[u8; 32], hex: &'h mut [u8; 64]) -> &'h str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in hex.chunks_exact_mut(2).zip(digest.iter()) {
        pair[0] = HEX[(b >> 4) as usize];
        pair[1] = HEX[(b & 15) as usize];
    }
    std::str::from_utf8(hex).unwrap_or_default() // ASCII digits only
}

/// count, bytes, and a chunk's ids.
pub fn messages_summary<F: Front>(sink: &mut impl RecordSink<F>, key: Key<'_>, messages: &[Value]) -> SinkResult<()> {
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
