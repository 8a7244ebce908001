//! A frame's record (the JSON Lines contract) written as JSON straight from the Rust frame and its analysis
//! notes: the keys and their order of `dissector/output/records.py: frame_record` and, for a payload section,
//! Pulsar's `dissector/protocols/pulsar/present.py: record_fields`; the bytes those dicts give through
//! `output/jsonl.dumps`.
//!
//! The texts of findings are made by Python's templates (`dissector/problems.py`), the one place they are:
//! the caller asks Python for them (`Expert`), only for the frames that have findings.

use crate::analysis::{map_get, Frame};
use crate::model::{Checksum, Decoded, PayloadSection};
use crate::name;
use crate::payload;
use crate::value::{write_json_array, JsonObject, Map, Value};

/// The keys a frame record can hold before its notes: a note under one of them would replace that value in
/// place (Python's `dict.update`), which the writer below does not do, so such a record is left to Python.
const RECORD_KEYS: [&str; 22] = [
    "index", "protocol", "time", "conn", "src", "dst", "direction", "packet", "type", "command", "size",
    "problems", "expert", "first_packet", "checksum", "broker_entry_metadata", "metadata", "payload_size",
    "checksum_detail", "uncompressed_size", "encrypted", "marker",
];

/// What a record shows of one finding (`problems.expert_record`): its id, severity and text.
pub struct Expert {
    pub id: &'static crate::value::Name,
    pub severity: String,
    pub message: String,
}

/// The severity of findings that are not problems (`problems.NOTE`).
const NOTE: &str = "note";

/// Whether a frame with these notes can be written here: not when a note is under a key the record holds.
pub fn can_write(notes: &Map) -> bool {
    !notes.iter().any(|(key, _)| is_record_key(key.as_str()))
}

/// Append the JSON line (newline included) of a frame to `out` (the caller checked [`can_write`]).
/// `first_packet`: the packet of the frame's first byte; `expert`: its decoder's then its analysis' findings;
/// `summary`: `messages_summary` in place of the messages' records. Returns the number of its problems.
pub fn write_frame_record(out: &mut Vec<u8>, frame: &Frame, first_packet: i64, expert: &[Expert], notes: &Map, summary: bool) -> usize {
    let pdu = frame.pdu;
    let mut object = JsonObject::start(out);
    object.field(name!("index"), &Value::from(frame.index));
    write_str(&mut object, name!("protocol"), frame.protocol);
    object.field(name!("time"), &Value::Float(frame.time));
    object.field(name!("conn"), &Value::from(frame.conn));
    write_str(&mut object, name!("src"), frame.src);
    write_str(&mut object, name!("dst"), frame.dst);
    write_str(&mut object, name!("direction"), frame.direction);
    object.field(name!("packet"), &Value::from(frame.packet));
    pdu.type_name.write_json(object.key(name!("type")));
    match &pdu.command {
        Some(command) => object.field(name!("command"), command),
        None => object.key(name!("command")).extend_from_slice(b"{}"),
    }
    object.field(name!("size"), &Value::from(pdu.size));
    let problems: Vec<&Expert> = expert.iter().filter(|e| e.severity != NOTE).collect();
    let problem_count = problems.len();
    write_json_array(&problems, object.key(name!("problems")), |e, out| crate::value::write_json_str(&e.message, out));
    if !expert.is_empty() {
        write_json_array(expert, object.key(name!("expert")), |e, out| {
            let mut entry = JsonObject::start(out);
            e.id.write_json(entry.key(name!("id")));
            crate::value::write_json_str(&e.severity, entry.key(name!("severity")));
            crate::value::write_json_str(&e.message, entry.key(name!("message")));
            entry.end();
        });
    }
    if u64::try_from(first_packet).ok() != Some(frame.packet) {
        object.field(name!("first_packet"), &Value::Int(first_packet));
    }
    if let Some(section) = &pdu.body {
        section_fields(&mut object, pdu, section, summary);
    }
    for (key, value) in notes {
        value.write_json(object.key_str(key.as_str()));
    }
    object.end();
    out.push(b'\n');
    problem_count
}

fn is_record_key(key: &str) -> bool {
    RECORD_KEYS.contains(&key) || key == "messages" || key == "messages_summary"
}

fn write_str(object: &mut JsonObject, key: &'static crate::value::Name, text: &str) {
    crate::value::write_json_str(text, object.key(key));
}

/// Pulsar's payload section keys (`present.record_fields`).
fn section_fields(object: &mut JsonObject, pdu: &Decoded, section: &PayloadSection, summary: bool) {
    object.field(name!("checksum"), &Value::Str(crate::value::Text::Name(section.checksum.name())));
    object.field_or_null(name!("broker_entry_metadata"), section.broker_entry_metadata.as_ref());
    match (&section.metadata, summary) {
        (Some(Value::Map(metadata)), true) => write_brief_metadata(object.key(name!("metadata")), metadata),
        (metadata, _) => object.field_or_null(name!("metadata"), metadata.as_ref()),
    }
    object.field(name!("payload_size"), &Value::from(section.payload_size));
    if section.checksum == Checksum::Invalid {
        let mut detail = JsonObject::start(object.key(name!("checksum_detail")));
        detail.field(name!("wire"), &Value::from(section.checksum_wire));
        detail.field(name!("computed"), &Value::from(section.checksum_computed));
        detail.end();
    }
    if let Some(size) = section.uncompressed_size {
        object.field(name!("uncompressed_size"), &Value::from(size));
    }
    if section.encrypted {
        object.field(name!("encrypted"), &Value::Bool(true));
    }
    if let Some(marker) = &section.marker {
        object.field(name!("marker"), marker);
    }
    if summary {
        write_messages_summary(object.key(name!("messages_summary")), &section.messages);
        return;
    }
    let records = match &section.records {
        Some(records) => std::borrow::Cow::Borrowed(records),
        None => {
            // decoded briefly: made now, as `record_fields` has the core make them
            let base = if pdu.type_name.as_str() == "MESSAGE" {
                pdu.command.as_ref().and_then(|c| c.get("message_id"))
            } else {
                None
            };
            std::borrow::Cow::Owned(payload::message_records(&section.messages, base))
        }
    };
    write_json_array(&records, object.key(name!("messages")), Value::write_json);
}

/// `present._brief`: the metadata fields a one-line view shows.
fn write_brief_metadata(out: &mut Vec<u8>, metadata: &Map) {
    const BRIEF: [&str; 6] = ["compression", "schema_version", "encryption_algo", "marker_type",
                              "num_messages_in_batch", "deliver_at_time"];
    let mut object = JsonObject::start(out);
    for key in BRIEF {
        let Some(value) = map_get(metadata, key) else { continue };
        if key == "compression" && value.as_str() == Some("NONE") {
            continue;
        }
        value.write_json(object.key_str(key));
    }
    if let Some(keys) = map_get(metadata, "encryption_keys") {
        let keys = keys.as_list().unwrap_or(&[]);
        write_json_array(keys, object.key(name!("encryption_keys")), |k, out| {
            let mut key = JsonObject::start(out);
            key.field_or_null(name!("key"), k.get("key"));
            key.end();
        });
    }
    object.end();
}

/// `present.record_fields`' `messages_summary`: count, bytes, and a chunk's ids.
fn write_messages_summary(out: &mut Vec<u8>, messages: &[Value]) {
    let bytes: i64 = messages.iter().filter_map(|m| m.get("payload_size").and_then(Value::as_i64)).sum();
    let mut object = JsonObject::start(out);
    object.field(name!("count"), &Value::from(messages.len()));
    object.field(name!("bytes"), &Value::Int(bytes));
    if let Some(first) = messages.first().filter(|m| m.get("chunk_id").is_some()) {
        let mut chunk = JsonObject::start(object.key(name!("chunk")));
        for key in ["chunk_id", "num_chunks", "uuid"] {
            first.get(key).unwrap_or(&Value::Null).write_json(chunk.key_str(key));
        }
        chunk.end();
    }
    object.end();
}
