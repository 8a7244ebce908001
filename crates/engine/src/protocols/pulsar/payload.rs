//! The payload section of SEND and MESSAGE frames (after the BaseCommand, big-endian):
//!
//! ```text
//! ([0x0e02][BEM_SIZE u32][BrokerEntryMetadata])?   broker → client only
//! ([0x0e01][CRC32C u32])?                           CRC32C over everything after it to the end of the frame
//! [METADATA_SIZE u32][MessageMetadata][payload]
//! ```
//!
//! The payload is then decrypted (impossible here), decompressed and, when ``num_messages_in_batch`` is
//! present, split into ``[SMM_SIZE u32][SingleMessageMetadata][payload]`` entries. Every message is a map:
//! ``payload_size`` and ``payload`` always, then only the fields present on the wire.

use std::borrow::Cow;
use std::collections::HashMap;

use super::problems::PulsarProblem;
use super::Core;
use crate::codecs::{self, Problem};
use crate::line::PayloadFacts;
use crate::model::{BodyField, Finding};
use crate::pb::{self, b64, Parsed};
use crate::protocols::protocol::{DecodeCaps, Depth};
use crate::value::{entry, text, Map, Name, Text, Value};
use crate::{finding, name};

const MAGIC_CRC32C: u16 = 0x0e01;
const MAGIC_BROKER_ENTRY_METADATA: u16 = 0x0e02;

fn u16_at(b: &[u8], pos: usize) -> u16 {
    u16::from_be_bytes([b[pos], b[pos + 1]])
}

fn u32_at(b: &[u8], pos: usize) -> u32 {
    u32::from_be_bytes(b[pos..pos + 4].try_into().unwrap())
}

fn parse_error(core: &Core, msg: usize) -> String {
    format!("Error parsing message with type '{}'", core.schema.messages[msg].full_name)
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Checksum {
    #[default]
    Absent,
    Valid,
    Invalid,
    /// The frame lost bytes to a capture gap: the checksum cannot be computed.
    Unverified,
}

impl Checksum {
    pub fn name(self) -> &'static Name {
        match self {
            Checksum::Absent => crate::name!("absent"),
            Checksum::Valid => crate::name!("valid"),
            Checksum::Invalid => crate::name!("invalid"),
            Checksum::Unverified => crate::name!("unverified"),
        }
    }
}

/// The payload section of a SEND or MESSAGE frame.
#[derive(Debug, Default)]
pub struct PayloadSection {
    pub checksum: Checksum,
    pub checksum_wire: Option<u32>,
    pub checksum_computed: Option<u32>,
    pub broker_entry_metadata: Option<Value>,
    /// MessageMetadata in the JSON contract's form (briefly: only the fields one-line views show).
    pub metadata: Option<Value>,
    pub metadata_size: Option<usize>,
    /// The codec's number, also one this schema does not know.
    pub compression: i64,
    /// Bytes as on the wire (compressed, encrypted, batched).
    pub payload_size: usize,
    /// Bytes after decompression, when it was decompressed.
    pub uncompressed_size: Option<usize>,
    pub encrypted: bool,
    /// The application messages (maps: `payload_size`, `payload` as bytes, then the fields present); of a batch,
    /// at most `max_batch_entries`.
    pub messages: Vec<Value>,
    /// When `messages` lists fewer than the frame carries (an encrypted batch, whose entries cannot be read; a
    /// batch beyond `max_batch_entries`): the whole's count and bytes, the record's `messages_summary`.
    pub messages_whole: Option<Box<Value>>,
    /// A batch not split yet (a `Depth::BatchesLater` or `Brief` decode): its messages are `messages_split`'s.
    pub batch_later: Option<Box<BatchLater>>,
    /// The decoded PulsarMarkers message.
    pub marker: Option<Value>,
    /// A batch whose entries were read: the highest `sequence_id` its entries carry (None: they carry none,
    /// as pulsar-rs's, whose batch has the one sequence id of its SEND).
    pub batch_sequence_ids: Option<Option<i64>>,
    pub findings: Vec<Finding>,
}

impl PayloadSection {
    /// The messages, a batch kept whole split now.
    pub fn messages_split(&self) -> std::borrow::Cow<'_, [Value]> {
        match &self.batch_later {
            Some(batch) => std::borrow::Cow::Owned(batch.messages()),
            None => std::borrow::Cow::Borrowed(&self.messages),
        }
    }

    /// How many messages the section lists (also those of a batch not split yet): what writing them costs.
    pub fn message_count(&self) -> usize {
        self.batch_later.as_ref().map_or(self.messages.len(), |batch| batch.kept)
    }

    /// The count and bytes of every message the frame carries when its messages list fewer (`messages_whole`,
    /// or a batch kept whole beyond `max_batch_entries`); None: they list them all.
    pub fn whole_summary(&self) -> Option<&Value> {
        match &self.batch_later {
            Some(batch) => (batch.kept < batch.entries).then_some(&batch.summary),
            None => self.messages_whole.as_deref(),
        }
    }
}

impl PayloadSection {
    /// What a timeline line shows of the section.
    pub fn line_facts(&self) -> PayloadFacts<'_> {
        PayloadFacts {
            // (a batch kept whole: its count and bytes)
            messages: self.batch_later.is_none().then_some(self.messages.as_slice()),
            summary: self.batch_later.as_ref().map(|batch| &batch.summary).or(self.messages_whole.as_deref()),
            metadata: self.metadata.as_ref(),
            checksum: Some(self.checksum.name().as_str()),
            encrypted: self.encrypted,
            marker: self.marker.as_ref(),
        }
    }
}

/// The payload section starting at ``pos`` (after the command); ``damaged`` when the frame lost bytes.
pub fn decode_section(
    core: &Core,
    frame: &[u8],
    mut pos: usize,
    damaged: bool,
    ack_set: Option<&[u64]>,
    caps: DecodeCaps,
    depth: Depth,
) -> PayloadSection {
    let brief = depth == Depth::Brief;
    let mut sec = PayloadSection::default();
    let end = frame.len();
    let schema = core.schema;
    if end - pos >= 2 && u16_at(frame, pos) == MAGIC_BROKER_ENTRY_METADATA {
        if end - pos < 6 {
            sec.findings.push(finding!(PulsarProblem::PayloadBrokerEntryMetadata, "case" => name!("cut")));
            return sec;
        }
        let size = u32_at(frame, pos + 2) as usize;
        let start = pos + 6;
        if start + size > end {
            sec.findings
                .push(finding!(PulsarProblem::PayloadBrokerEntryMetadata, "case" => name!("size"), "size" => size));
            return sec;
        }
        match pb::parse(schema, core.m.broker_entry_metadata, &frame[start..start + size]) {
            Ok(bem) => sec.broker_entry_metadata = Some(bem.to_value(schema)),
            Err(_) => sec.findings.push(finding!(PulsarProblem::PayloadBrokerEntryMetadata,
                "case" => name!("unparsable"),
                "error" => parse_error(core, core.m.broker_entry_metadata),
            )),
        }
        pos = start + size;
    }
    if end - pos >= 2 && u16_at(frame, pos) == MAGIC_CRC32C {
        if end - pos < 6 {
            sec.findings.push(finding!(PulsarProblem::PayloadChecksumCut));
            return sec;
        }
        let wire = u32_at(frame, pos + 2);
        sec.checksum_wire = Some(wire);
        pos += 6;
        if damaged {
            sec.checksum = Checksum::Unverified;
        } else {
            let computed = crc32c::crc32c(&frame[pos..]);
            sec.checksum_computed = Some(computed);
            if computed == wire {
                sec.checksum = Checksum::Valid;
            } else {
                sec.checksum = Checksum::Invalid;
                sec.findings.push(finding!(PulsarProblem::ChecksumInvalid, "wire" => wire, "computed" => computed));
            }
        }
    }
    if end - pos < 4 {
        sec.findings.push(finding!(PulsarProblem::PayloadMetadataSize));
        return sec;
    }
    let msize = u32_at(frame, pos) as usize;
    pos += 4;
    if pos + msize > end {
        sec.findings.push(finding!(PulsarProblem::PayloadMetadataSize, "size" => msize, "left" => end - pos));
        return sec;
    }
    let md = match pb::parse_limited(schema, core.m.metadata, &frame[pos..pos + msize], caps.max_repeated_elements) {
        Ok(md) => md,
        Err(_) => {
            sec.findings.push(
                finding!(PulsarProblem::PayloadMetadataUnparsable, "error" => parse_error(core, core.m.metadata)),
            );
            return sec;
        }
    };
    if md.elided > 0 {
        sec.findings.push(finding!(crate::problems::GenericProblem::ProtobufRepeatedElided,
            "message" => name!("MessageMetadata"), "elided" => md.elided, "kept" => caps.max_repeated_elements));
    }
    sec.metadata = Some(if brief { brief_metadata(core, &md) } else { md.to_value(schema) });
    sec.metadata_size = Some(msize);
    let errors = md.init_errors(schema);
    if !errors.is_empty() {
        sec.findings.push(finding!(PulsarProblem::PayloadMetadataMissingRequired,
            "fields" => errors.into_iter().map(Value::from).collect::<Vec<_>>()));
    }
    let payload = &frame[pos + msize..];
    sec.payload_size = payload.len();
    let f = &core.m;
    if damaged {
        sec.findings.push(finding!(PulsarProblem::PayloadIncomplete, "captured" => payload.len()));
        let mut msg = vec![entry(name!("payload_size"), payload.len()), entry(name!("payload"), Value::Null)];
        if md.has(schema, f.chunk_id) && md.has(schema, f.uuid) {
            // a damaged chunk: its message is lost (chunk.lost)
            msg.extend(chunk_fields(core, &md));
        }
        sec.messages.push(Value::Map(msg));
        return sec;
    }
    decode_messages(core, &mut sec, &md, payload, ack_set, caps, depth);
    sec
}

fn get_i32(md: &Parsed, core: &Core, number: u32) -> i32 {
    md.varint(core.schema, number).map(|v| v as i32).unwrap_or(0)
}

/// A chunk's place in its message: chunk_id, num_chunks, uuid.
fn chunk_fields(core: &Core, md: &Parsed) -> [(Text, Value); 3] {
    let f = &core.m;
    [
        entry(name!("chunk_id"), get_i32(md, core, f.chunk_id)),
        entry(name!("num_chunks"), get_i32(md, core, f.num_chunks_from_msg)),
        entry(name!("uuid"), text(md.bytes(core.schema, f.uuid).unwrap_or_default())),
    ]
}

/// The KeyValue list under ``number`` as a map; a key repeated on the wire keeps its first place and its
/// last value, as a dict does.
fn properties(core: &Core, md: &Parsed, number: u32) -> Value {
    const LINEAR_MAX: usize = 16;
    let schema = core.schema;
    let mut map = Map::new();
    // where each key is, once the list is too long for a linear search per key (hostile lists are long)
    let mut positions: Option<HashMap<String, usize>> = None;
    for kv in md.messages(schema, number) {
        let key = text(kv.bytes(schema, core.m.kv_key).unwrap_or_default());
        let value = Value::Str(text(kv.bytes(schema, core.m.kv_value).unwrap_or_default()));
        if positions.is_none() && map.len() >= LINEAR_MAX {
            positions = Some(map.iter().enumerate().map(|(i, (k, _))| (k.as_str().to_owned(), i)).collect());
        }
        let at = match &positions {
            Some(positions) => positions.get(key.as_str()).copied(),
            None => map.iter().position(|(k, _)| *k == key),
        };
        match at {
            Some(i) => map[i].1 = value,
            None => {
                if let Some(positions) = &mut positions {
                    positions.insert(key.as_str().to_owned(), map.len());
                }
                map.push((key, value));
            }
        }
    }
    Value::Map(map)
}

fn decode_messages(
    core: &Core,
    sec: &mut PayloadSection,
    md: &Parsed,
    payload: &[u8],
    ack_set: Option<&[u64]>,
    caps: DecodeCaps,
    depth: Depth,
) {
    let keep_payloads = depth != Depth::Brief;
    let schema = core.schema;
    let f = &core.m;
    let mut compression = md.varint(schema, f.compression).map(|v| v as i32 as i64).unwrap_or(0);
    if !md.has(schema, f.compression) {
        // a closed enum: a codec this schema does not know (a newer client) parses as absent and would read as
        // NONE; never treat such a payload as uncompressed
        if let Some(raw) = md.raw_unknown_varint(f.compression) {
            compression = raw as i64;
        }
    }
    sec.compression = compression;
    let sequence_id = md.varint(schema, f.sequence_id).unwrap_or(0);
    if md.messages(schema, f.encryption_keys).next().is_some() {
        // the payload (compressed, batched) is ciphertext; the metadata stays in the clear
        sec.encrypted = true;
        if md.has(schema, f.num_messages_in_batch) {
            // its entries cannot be read: no message listed, the count it claims (never one record per claimed
            // entry: a 400-byte capture may claim ten million), sizes unknown
            let claimed = get_i32(md, core, f.num_messages_in_batch).max(0);
            sec.messages_whole = Some(Box::new(whole(claimed as usize, Value::Null)));
        } else {
            let mut msg = single_message(core, md, None, payload.len());
            msg.push(entry(name!("encrypted"), true));
            sec.messages.push(Value::Map(msg));
        }
        return;
    }
    if md.has(schema, f.chunk_id) && md.has(schema, f.uuid) {
        // a chunk is a slice of the (compressed) whole message: decompressed only after reassembly
        let mut msg = vec![
            entry(name!("payload_size"), payload.len()),
            entry(name!("payload"), Value::Bytes(payload.to_vec())),
            entry(name!("sequence_id"), sequence_id),
            entry(name!("properties"), properties(core, md, f.properties)),
        ];
        msg.extend(chunk_fields(core, md));
        sec.messages.push(Value::Map(msg));
        return;
    }
    let mut data: Cow<[u8]> = Cow::Borrowed(payload);
    if compression != 0 {
        let declared = if md.has(schema, f.uncompressed_size) {
            md.varint(schema, f.uncompressed_size).map(|v| v as u32 as u64)
        } else {
            None
        };
        let result = codecs::decompress(compression, payload, declared, caps.max_decompressed);
        if result.snappy_framed {
            sec.findings.push(finding!(PulsarProblem::PayloadSnappyFramed, "bytes" => payload.len()));
        }
        if let Some(problem) = &result.problem {
            sec.findings.push(decompression_finding(problem));
        }
        match result.data {
            None => {
                sec.messages.push(Value::Map(vec![
                    entry(name!("payload_size"), payload.len()),
                    entry(name!("payload"), Value::Null),
                    entry(name!("sequence_id"), sequence_id),
                ]));
                return;
            }
            Some(out) => {
                sec.uncompressed_size = Some(out.len());
                data = Cow::Owned(out.into());
            }
        }
    }
    if md.has(schema, f.marker_type) {
        decode_marker(core, sec, get_i32(md, core, f.marker_type), &data);
    }
    if md.has(schema, f.num_messages_in_batch) {
        let expected = get_i32(md, core, f.num_messages_in_batch) as i64;
        let mut highest: Option<i64> = None;
        let mut note_sequence_id = |e: &BatchEntry<'_>| {
            if let Some(id) = e.smm.varint(schema, 8) {
                highest = Some(highest.map_or(id as i64, |h| h.max(id as i64)));
            }
        };
        // every entry is read and counted; at most max_batch_entries become messages
        let cap = caps.max_batch_entries;
        let mut bytes = 0i64;
        let entries = if depth != Depth::Full {
            let max_repeated = caps.max_repeated_elements;
            let entries =
                split_batch(core, &data, expected, &mut sec.findings, ack_set, usize::MAX, max_repeated, |e| {
                    bytes += e.payload.len() as i64;
                    note_sequence_id(e);
                });
            let ack_set = ack_set.map(<[u64]>::to_vec);
            sec.batch_later = Some(Box::new(BatchLater {
                data: data.into_owned(),
                expected,
                ack_set,
                entries,
                kept: entries.min(cap),
                keep_payloads,
                max_repeated,
                summary: whole(entries, Value::Int(bytes)),
            }));
            entries
        } else {
            let messages = &mut sec.messages;
            let max_repeated = caps.max_repeated_elements;
            let entries =
                split_batch(core, &data, expected, &mut sec.findings, ack_set, usize::MAX, max_repeated, |e| {
                    bytes += e.payload.len() as i64;
                    if e.index < cap {
                        messages.push(Value::Map(batch_message(core, e, keep_payloads)));
                    }
                    note_sequence_id(e);
                });
            if entries > cap {
                sec.messages_whole = Some(Box::new(whole(entries, Value::Int(bytes))));
            }
            entries
        };
        if entries > cap {
            sec.findings.push(finding!(PulsarProblem::BatchEntriesTruncated,
                "entries" => entries, "kept" => cap, "more" => entries - cap));
        }
        sec.batch_sequence_ids = Some(highest);
        return;
    }
    let size = data.len();
    sec.messages.push(Value::Map(single_message(core, md, keep_payloads.then(|| data.into_owned()), size)));
}

pub fn decompression_finding(problem: &Problem) -> Finding {
    let mut params: Map = vec![entry(name!("case"), Text::Owned(problem.case().to_owned()))];
    let codec_name = |name: &str| entry(name!("codec"), Text::Owned(name.to_owned()));
    match problem {
        Problem::UnknownCodec { codec } => params.push(entry(name!("codec"), *codec)),
        Problem::OverLimit { codec: c, declared, limit } => {
            params.extend([codec_name(c), entry(name!("declared"), *declared), entry(name!("limit"), *limit)])
        }
        Problem::BombDeclared { codec: c, declared } => {
            params.extend([codec_name(c), entry(name!("declared"), *declared)])
        }
        Problem::BombLimit { codec: c, limit } => params.extend([codec_name(c), entry(name!("limit"), *limit)]),
        Problem::Failed { codec: c, error } => params.extend([codec_name(c), entry(name!("error"), error.clone())]),
        Problem::SizeMismatch { codec: c, declared, actual } => {
            params.extend([codec_name(c), entry(name!("declared"), *declared), entry(name!("actual"), *actual)])
        }
    }
    Finding { id: PulsarProblem::PayloadDecompression.name(), params }
}

/// A non-batched message: its per-message fields live in the MessageMetadata.
fn single_message(core: &Core, md: &Parsed, payload: Option<Vec<u8>>, size: usize) -> Map {
    let schema = core.schema;
    let f = &core.m;
    let mut msg = Map::with_capacity(6);
    msg.push(entry(name!("payload_size"), size));
    msg.push(entry(name!("payload"), payload.map(Value::Bytes)));
    msg.push(entry(name!("sequence_id"), md.varint(schema, f.sequence_id).unwrap_or(0)));
    if let Some(key) = md.bytes(schema, f.partition_key) {
        msg.push(entry(name!("partition_key"), text(key)));
    }
    if let Some(key) = md.bytes(schema, f.ordering_key) {
        msg.push(entry(name!("ordering_key"), Value::Bytes(key.to_vec())));
    }
    msg.push(entry(name!("properties"), properties(core, md, f.properties)));
    if let Some(t) = md.varint(schema, f.event_time) {
        msg.push(entry(name!("event_time"), t));
    }
    if md.varint(schema, f.null_value).unwrap_or(0) != 0 {
        msg.push(entry(name!("null_value"), true));
    }
    if md.varint(schema, f.null_partition_key).unwrap_or(0) != 0 {
        msg.push(entry(name!("null_partition_key"), true));
    }
    msg
}

// The MessageMetadata fields one-line views show and the session reads: what a summary decode keeps, in
// this order (the order of the record's keys).
pub const BRIEF_METADATA: [&str; 12] = [
    "producer_name",
    "compression",
    "uncompressed_size",
    "num_messages_in_batch",
    "schema_version",
    "encryption_algo",
    "marker_type",
    "uuid",
    "chunk_id",
    "num_chunks_from_msg",
    "total_chunk_msg_size",
    "deliver_at_time",
];

fn brief_metadata(core: &Core, md: &Parsed) -> Value {
    let schema = core.schema;
    let mut out = Map::new();
    for &(field, number) in &core.m.brief {
        if !md.has(schema, number) {
            continue;
        }
        let varint = md.varint(schema, number).unwrap_or(0);
        let bytes = || md.bytes(schema, number).unwrap_or_default();
        let value = match field.as_str() {
            "compression" => match core.compression_types.name(varint as i32) {
                Some(name) => Value::from(name),
                None => Value::from(varint as i32),
            },
            "schema_version" => Value::from(b64(bytes())),
            "producer_name" | "encryption_algo" | "uuid" => Value::Str(text(bytes())),
            "uncompressed_size" => Value::from(varint as u32),
            "deliver_at_time" => Value::from(varint as i64),
            _ => Value::from(varint as i32),
        };
        out.push((Text::Name(field), value));
    }
    let keys: Vec<Value> = md
        .messages(schema, core.m.encryption_keys)
        .map(|k| Value::Map(vec![entry(name!("key"), text(k.bytes(schema, core.m.ek_key).unwrap_or_default()))]))
        .collect();
    if !keys.is_empty() {
        out.push(entry(name!("encryption_keys"), keys));
    }
    Value::Map(out)
}

/// A `messages_summary` of messages not all listed: their count and bytes (null: unknown).
fn whole(count: usize, bytes: Value) -> Value {
    Value::Map(vec![entry(name!("count"), count), entry(name!("bytes"), bytes)])
}

fn batch_problem(entry_index: usize, case: &'static Name, more: Map) -> Finding {
    let mut params = vec![entry(name!("entry"), entry_index), entry(name!("case"), case)];
    params.extend(more);
    Finding { id: PulsarProblem::BatchMalformed.name(), params }
}

/// A batch kept whole by a `Depth::BatchesLater` or `Brief` decode, checked: its (decompressed) payload and
/// what splitting it needs.
#[derive(Debug)]
pub struct BatchLater {
    data: Vec<u8>,
    expected: i64,
    ack_set: Option<Vec<u64>>,
    /// The entries the check read.
    pub entries: usize,
    /// The first of them the split makes messages of (`max_batch_entries`).
    pub kept: usize,
    /// Whether its messages hold their payloads (not after a brief decode).
    pub keep_payloads: bool,
    /// The repeated elements an entry's metadata keeps (`DecodeCaps::max_repeated_elements`).
    max_repeated: usize,
    /// The record's `messages_summary` of it: count and bytes, as `records.rs: messages_summary` makes them
    /// of its messages (a batch's entries are no chunk).
    pub summary: Value,
}

impl BatchLater {
    /// The batch's bytes it keeps (decompressed).
    pub fn held_bytes(&self) -> usize {
        self.data.len()
    }

    /// The batch's messages, as a `Full` decode makes them (its findings were the check's).
    pub fn messages(&self) -> Vec<Value> {
        let core = crate::protocols::pulsar::core();
        let mut messages = Vec::with_capacity(self.kept);
        self.entries(|e| messages.push(Value::Map(batch_message(core, e, self.keep_payloads))));
        messages
    }

    /// Each entry of the batch it keeps, in order (its findings were the check's).
    pub fn entries(&self, each: impl FnMut(&BatchEntry<'_>)) {
        split_batch(
            crate::protocols::pulsar::core(),
            &self.data,
            self.expected,
            &mut Vec::new(),
            self.ack_set.as_deref(),
            self.kept,
            self.max_repeated,
            each,
        );
    }
}

/// One entry of a batch as `split_batch` reads it: its SingleMessageMetadata, index and payload, and whether
/// the MESSAGE's ack set marks it acknowledged.
pub struct BatchEntry<'a> {
    pub smm: &'a Parsed<'a>,
    pub index: usize,
    pub payload: &'a [u8],
    pub acked: bool,
}

/// Split a batch payload into its entries, `each` called with each; read every readable entry even when the
/// batch is damaged, its damage in `findings`. Returns the entries read. `stop_after`: read no more entries than
/// this (a split of a batch already checked, its findings not wanted).
#[allow(clippy::too_many_arguments)] // the batch, where its findings go, and the split's three limits
fn split_batch(
    core: &Core,
    payload: &[u8],
    expected: i64,
    findings: &mut Vec<Finding>,
    ack_set: Option<&[u64]>,
    stop_after: usize,
    max_repeated: usize,
    mut each: impl FnMut(&BatchEntry<'_>),
) -> usize {
    let schema = core.schema;
    let end = payload.len();
    let mut pos = 0usize;
    let mut index = 0usize;
    let mut smm = Parsed::empty(); // (one for every entry)
    while pos < end {
        if index >= stop_after {
            return index;
        }
        if end - pos < 4 {
            findings.push(batch_problem(index, name!("stray"), vec![entry(name!("left"), end - pos)]));
            break;
        }
        let smm_size = u32_at(payload, pos) as usize;
        pos += 4;
        if pos + smm_size > end {
            findings.push(batch_problem(index, name!("metadata_size"), vec![entry(name!("size"), smm_size)]));
            break;
        }
        match pb::parse_into(schema, core.m.single, &payload[pos..pos + smm_size], &mut smm, max_repeated) {
            Ok(()) if smm.elided > 0 => findings
                .push(finding!(crate::problems::GenericProblem::ProtobufRepeatedElided,
                "message" => name!("SingleMessageMetadata"), "elided" => smm.elided, "kept" => max_repeated)),
            Ok(()) => {}
            Err(_) => {
                let error = entry(name!("error"), parse_error(core, core.m.single));
                findings.push(batch_problem(index, name!("unparsable"), vec![error]));
                break;
            }
        };
        pos += smm_size;
        let Some(size) = smm.varint(schema, 3).map(|v| v as i32 as i64) else {
            findings.push(batch_problem(index, name!("no_payload_size"), Vec::new()));
            break;
        };
        if size < 0 || pos + size as usize > end {
            findings.push(batch_problem(
                index,
                name!("payload_size"),
                vec![entry(name!("size"), size), entry(name!("left"), end - pos)],
            ));
            break;
        }
        let size = size as usize;
        let acked = ack_set.is_some_and(|words| !words.is_empty() && !bit(words, index));
        each(&BatchEntry { smm: &smm, index, payload: &payload[pos..pos + size], acked });
        pos += size;
        index += 1;
    }
    if index as i64 != expected {
        findings.push(finding!(PulsarProblem::BatchCountMismatch, "entries" => index, "expected" => expected));
    }
    index
}

/// One batch entry's message: its size and payload (`keep_payload`), then `entry_fields`.
fn batch_message(core: &Core, e: &BatchEntry<'_>, keep_payload: bool) -> Map {
    let mut msg = Map::with_capacity(5 + e.smm.slots.len());
    msg.push(entry(name!("payload_size"), e.payload.len()));
    msg.push(entry(name!("payload"), keep_payload.then(|| Value::Bytes(e.payload.to_vec()))));
    msg.extend(entry_fields(core, e).into_iter().filter_map(|(key, value)| Some(entry(key, value?))));
    msg
}

/// A batch entry's message fields after its size and payload, in the message's order, None when absent:
/// batch_index, properties, the SingleMessageMetadata fields (by field number: 2 partition_key,
/// 4 compacted_out, 5 event_time, 7 ordering_key, 8 sequence_id, 9 null_value, 10 null_partition_key), acked.
/// (`records.rs: write_batch_entry` writes a message's record from them without making its map.)
pub fn entry_fields(core: &Core, e: &BatchEntry<'_>) -> [(&'static Name, Option<Value>); 10] {
    let (schema, smm) = (core.schema, e.smm);
    let flag = |number| smm.varint(schema, number).map(|v| v != 0);
    [
        (name!("batch_index"), Some(Value::from(e.index))),
        (name!("properties"), Some(properties(core, smm, 1))),
        (name!("partition_key"), smm.bytes(schema, 2).map(|key| Value::Str(text(key)))),
        (name!("compacted_out"), flag(4).map(Value::Bool)),
        (name!("event_time"), smm.varint(schema, 5).map(Value::from)),
        (name!("ordering_key"), smm.bytes(schema, 7).map(|key| Value::Bytes(key.to_vec()))),
        (name!("sequence_id"), smm.varint(schema, 8).map(Value::from)),
        (name!("null_value"), flag(9).map(Value::Bool)),
        (name!("null_partition_key"), flag(10).map(Value::Bool)),
        (name!("acked"), e.acked.then_some(Value::Bool(true))),
    ]
}

/// java.util.BitSet.toLongArray layout: bit i lives in word i / 64 at position i % 64.
fn bit(words: &[u64], i: usize) -> bool {
    words.get(i >> 6).map(|w| (w >> (i & 63)) & 1 == 1).unwrap_or(false)
}

fn decode_marker(core: &Core, sec: &mut PayloadSection, marker_type: i32, payload: &[u8]) {
    let Some(&msg) = core.m.markers.get(&marker_type) else {
        return; // transaction markers carry no body
    };
    match pb::parse(core.schema, msg, payload) {
        Ok(m) => sec.marker = Some(m.to_value(core.schema)),
        Err(_) => {
            let full = &core.schema.messages[msg].full_name;
            let short = full.rsplit('.').next().unwrap_or(full);
            sec.findings.push(finding!(PulsarProblem::MarkerUnparsable, "marker" => short.to_owned(),
                               "error" => parse_error(core, msg)));
        }
    }
}

/// The section's fields for a front end (`DecodedBody::fields`), in this order: those of
/// `dissector/protocols/pulsar/payload.py: PayloadSection`, which the binding makes positionally.
pub const SECTION_FIELDS: [&str; 14] = [
    "checksum",
    "checksum_wire",
    "checksum_computed",
    "broker_entry_metadata",
    "metadata",
    "metadata_size",
    "compression",
    "payload_size",
    "uncompressed_size",
    "encrypted",
    "messages",
    "marker",
    "findings",
    "messages_whole",
];

impl PayloadSection {
    /// Its fields in [`SECTION_FIELDS`]' order, each given to `visit`; a batch kept whole split now.
    pub fn fields(&self, visit: &mut dyn FnMut(&'static str, BodyField<'_>)) {
        let [checksum, wire, computed, broker_entry, metadata, metadata_size, compression, payload_size, uncompressed, encrypted, messages, marker, findings, whole] =
            SECTION_FIELDS;
        visit(checksum, BodyField::Name(self.checksum.name()));
        visit(wire, BodyField::number(self.checksum_wire.map(u64::from)));
        visit(computed, BodyField::number(self.checksum_computed.map(u64::from)));
        visit(broker_entry, BodyField::optional(self.broker_entry_metadata.as_ref()));
        visit(metadata, BodyField::optional(self.metadata.as_ref()));
        visit(metadata_size, BodyField::number(self.metadata_size.map(|size| size as u64)));
        visit(compression, BodyField::Int(self.compression));
        visit(payload_size, BodyField::number(Some(self.payload_size as u64)));
        visit(uncompressed, BodyField::number(self.uncompressed_size.map(|size| size as u64)));
        visit(encrypted, BodyField::Bool(self.encrypted));
        visit(messages, BodyField::List(self.messages_split()));
        visit(marker, BodyField::optional(self.marker.as_ref()));
        visit(findings, BodyField::Findings(&self.findings));
        visit(whole, BodyField::optional(self.whole_summary()));
    }

    /// The section back from what a front end holds of it ([`PayloadSection::fields`] by name): what its
    /// record and the session read. A batch's highest `sequence_id` is read off its messages again.
    pub fn from_fields(mut fields: Map, findings: Vec<Finding>) -> PayloadSection {
        let mut take = |name: &str| match fields.iter().position(|(key, _)| key.as_str() == name) {
            Some(at) => fields.swap_remove(at).1,
            None => Value::Null,
        };
        let optional = |value: Value| if matches!(value, Value::Null) { None } else { Some(value) };
        let size = |value: Value| value.as_u64().and_then(|v| usize::try_from(v).ok());
        let crc = |value: Value| value.as_u64().and_then(|v| u32::try_from(v).ok());
        let checksum = match take("checksum").as_str() {
            Some("valid") => Checksum::Valid,
            Some("invalid") => Checksum::Invalid,
            Some("unverified") => Checksum::Unverified,
            _ => Checksum::Absent,
        };
        let metadata = optional(take("metadata"));
        let messages = match take("messages") {
            Value::List(messages) => messages,
            _ => Vec::new(),
        };
        let batched = metadata.as_ref().is_some_and(|md| md.get("num_messages_in_batch").is_some());
        PayloadSection {
            checksum,
            checksum_wire: crc(take("checksum_wire")),
            checksum_computed: crc(take("checksum_computed")),
            broker_entry_metadata: optional(take("broker_entry_metadata")),
            metadata,
            metadata_size: size(take("metadata_size")),
            compression: take("compression").as_i64().unwrap_or(0),
            payload_size: size(take("payload_size")).unwrap_or(0),
            uncompressed_size: size(take("uncompressed_size")),
            encrypted: take("encrypted").truthy(),
            batch_sequence_ids: if batched { highest_sequence_id(&messages) } else { None },
            messages,
            messages_whole: optional(take("messages_whole")).map(Box::new),
            batch_later: None,
            marker: optional(take("marker")),
            findings,
        }
    }
}

/// A batch's entries read (None: none were), and the highest `sequence_id` they carry.
fn highest_sequence_id(messages: &[Value]) -> Option<Option<i64>> {
    if messages.is_empty() {
        return None;
    }
    Some(messages.iter().filter_map(|message| message.get("sequence_id")?.as_i64()).max())
}
