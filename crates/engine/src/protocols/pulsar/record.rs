//! Pulsar's keys of a frame's record: the payload section's (checksum … messages, or messages_summary) and
//! the records of its messages, written to any sink as `records::build_record` asks.

use super::payload::{self, BatchLater, Checksum, PayloadSection};
use super::Core;
use crate::analysis::map_get;
use crate::model::Decoded;
use crate::name;
use crate::pb::b64;
use crate::records::{
    messages_summary, own, Atom, Front, JsonSink, Key, Merged, MessageField, MessageParts, NoFront, RecordSink,
    RecordStyle, SinkResult,
};
use crate::value::{JsonObject, Map, Value};

impl PayloadSection {
    /// `messages`: write the messages' records, with this MESSAGE command's message_id.
    pub fn write_json(&self, out: &mut Vec<u8>, messages: Option<Option<&Value>>) {
        let mut object = JsonObject::start(out);
        self.checksum.name().write_json(object.key(name!("checksum")));
        object.field(name!("checksum_wire"), &Value::from(self.checksum_wire));
        object.field(name!("checksum_computed"), &Value::from(self.checksum_computed));
        object.field_or_null(name!("broker_entry_metadata"), self.broker_entry_metadata.as_ref());
        object.field_or_null(name!("metadata"), self.metadata.as_ref());
        object.field(name!("metadata_size"), &Value::from(self.metadata_size));
        object.field(name!("compression"), &Value::from(self.compression));
        object.field(name!("payload_size"), &Value::from(self.payload_size));
        object.field(name!("uncompressed_size"), &Value::from(self.uncompressed_size));
        object.field(name!("encrypted"), &Value::Bool(self.encrypted));
        object.field_or_null(name!("marker"), self.marker.as_ref());
        if let Some(base) = messages {
            let mut sink = JsonSink::new(object.key(name!("messages")));
            // a JSON sink writes bytes only: it has no error to give
            let _ = write_messages::<NoFront>(&mut sink, Key::Item, &self.messages_split(), base, false);
        }
        object.end();
    }
}

/// Pulsar's payload section keys.
pub fn section_keys<F: Front>(
    sink: &mut impl RecordSink<F>,
    merged: &mut Merged<'_>,
    pdu: &Decoded,
    section: &PayloadSection,
    style: RecordStyle,
) -> SinkResult<()> {
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
        own!(merged, sink, "checksum_detail", |key| -> SinkResult<()> {
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
        own!(merged, sink, "messages_summary", |key| match (&section.batch_later, &section.messages_whole) {
            (Some(batch), _) => sink.put(key, Atom::Value(&batch.summary)),
            (None, Some(whole)) => sink.put(key, Atom::Value(whole.as_ref())),
            (None, None) => messages_summary(sink, key, &section.messages),
        });
        return Ok(());
    }
    own!(merged, sink, "messages", |key| {
        let base = if pdu.type_name.as_str() == "MESSAGE" {
            pdu.command.as_ref().and_then(|c| c.get("message_id"))
        } else {
            None
        };
        match &section.batch_later {
            Some(batch) => write_batch_messages(sink, key, batch, base, style.payload_bytes),
            None => write_messages(sink, key, &section.messages, base, style.payload_bytes),
        }
    });
    if let Some(whole) = section.whole_summary() {
        // the messages list fewer than the frame carries: the whole's count and bytes, as a summary gives them
        own!(merged, sink, "messages_summary", |key| sink.put(key, Atom::Value(whole)));
    }
    Ok(())
}

/// The metadata fields a one-line view shows.
fn brief_metadata<F: Front>(sink: &mut impl RecordSink<F>, key: Key<'_>, metadata: &Map) -> SinkResult<()> {
    const BRIEF: [&str; 6] =
        ["compression", "schema_version", "encryption_algo", "marker_type", "num_messages_in_batch", "deliver_at_time"];
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
pub fn write_messages<F: Front>(
    sink: &mut impl RecordSink<F>,
    key: Key<'_>,
    messages: &[Value],
    base: Option<&Value>,
    payload_bytes: bool,
) -> SinkResult<()> {
    let base = base.map(MessageIdBase::of);
    // (a message carries no front end's object)
    let write = |sink: &mut JsonSink<'_>, message: &Value| {
        write_message::<NoFront>(sink, message, base.as_ref(), payload_bytes)
    };
    if sink.par_items(key, messages, write)? {
        return Ok(());
    }
    sink.open(key, true)?;
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
pub fn write_batch_messages<F: Front>(
    sink: &mut impl RecordSink<F>,
    key: Key<'_>,
    batch: &BatchLater,
    base: Option<&Value>,
    payload_bytes: bool,
) -> SinkResult<()> {
    let core = super::core();
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
fn write_batch_entry<F: Front>(
    sink: &mut impl RecordSink<F>,
    core: &Core,
    e: &payload::BatchEntry<'_>,
    batch_keeps_payloads: bool,
    base: Option<&MessageIdBase<'_>>,
    payload_bytes: bool,
) -> SinkResult<()> {
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
    write_placed_message(sink, &Value::from(e.payload.len()), payload, &placed, base, payload_bytes)
}

/// One message's record (see [`write_messages`]).
fn write_message<F: Front>(
    sink: &mut impl RecordSink<F>,
    message: &Value,
    base: Option<&MessageIdBase<'_>>,
    payload_bytes: bool,
) -> SinkResult<()> {
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
    write_placed_message(sink, payload_size, payload, &placed, base, payload_bytes)
}

/// Places of a message record's fields after payload_size, payload_sha256 and message_id (`record_place`).
const PLACES: usize = 14;
/// A message's fields at their places in its record.
type Placed<'a> = [Option<(Key<'a>, &'a Value)>; PLACES];

/// A message's record from its size, payload and fields in their places.
fn write_placed_message<F: Front>(
    sink: &mut impl RecordSink<F>,
    payload_size: &Value,
    payload: Option<&[u8]>,
    placed: &Placed<'_>,
    base: Option<&MessageIdBase<'_>>,
    payload_bytes: bool,
) -> SinkResult<()> {
    let batch_index = placed[0].map(|(_, v)| v).filter(|v| !v.is_null());
    let id = base.map(|base| {
        [
            (name!("ledger_id"), base.ledger),
            (name!("entry_id"), base.entry),
            (name!("partition"), base.partition),
            (name!("batch_index"), batch_index.unwrap_or(&Value::Int(-1))),
        ]
    });
    // ordering_key: as text when it is UTF-8, else its base64 under ordering_key_b64
    let ordering_key_b64 = match placed[3] {
        Some((_, Value::Bytes(raw))) if std::str::from_utf8(raw).is_err() => b64(raw),
        _ => String::new(),
    };
    let mut fields: [(Key<'_>, MessageField<'_>); PLACES] = [(Key::Item, MessageField::Value(&Value::Null)); PLACES];
    let mut present = 0;
    for (place, (key, value)) in placed.iter().enumerate().filter_map(|(place, field)| Some((place, (*field)?))) {
        fields[present] = match (place, value) {
            (3, Value::Bytes(raw)) => match std::str::from_utf8(raw) {
                Ok(text) => (Key::Name(name!("ordering_key")), MessageField::Text(text)),
                Err(_) => (Key::Name(name!("ordering_key_b64")), MessageField::Text(&ordering_key_b64)),
            },
            _ => (key, MessageField::Value(value)),
        };
        present += 1;
    }
    sink.message(&MessageParts {
        payload_size,
        payload,
        id: id.as_ref().map(|id| &id[..]),
        fields: &fields[..present],
        payload_bytes,
    })
}
