//! TubeMQ's keys of a frame's record: the serial number, the RPC envelope and the messages carried.

use super::TubeBody;
use crate::name;
use crate::records::{
    map_get_slice, messages_summary, own, put_payload_bytes, put_payload_digest, Atom, Front, Key, Merged, RecordSink,
    RecordStyle, SinkResult,
};
use crate::value::Value;

/// TubeMQ's keys: the serial number, the envelope, the messages carried.
pub fn body_keys<F: Front>(
    sink: &mut impl RecordSink<F>,
    merged: &mut Merged<'_>,
    tube: &TubeBody,
    style: RecordStyle,
) -> SinkResult<()> {
    own!(merged, sink, "serial", |key| sink.put(key, Atom::Value(&Value::from(tube.serial as i64))));
    own!(merged, sink, "rpc", |key| -> SinkResult<()> {
        sink.open(key, false)?;
        for (k, v) in &tube.rpc {
            sink.put(Key::Text(k), Atom::Value(v))?;
        }
        sink.close()
    });
    if tube.messages.is_empty() {
        return Ok(());
    }
    own!(merged, sink, "checksum", |key| sink.put(
        key,
        Atom::Name(match tube.checksum() {
            "invalid" => name!("invalid"),
            "valid" => name!("valid"),
            _ => name!("absent"),
        })
    ));
    if style.summary {
        own!(merged, sink, "messages_summary", |key| match &tube.whole {
            Some(whole) => sink.put(key, Atom::Value(&whole.summary)),
            None => messages_summary(sink, key, &tube.messages),
        });
        return Ok(());
    }
    own!(merged, sink, "messages", |key| write_carried_messages(sink, key, &tube.messages, style.payload_bytes));
    if let Some(whole) = &tube.whole {
        // the messages list fewer than the frame carries: the whole's count and bytes, as a summary gives them
        own!(merged, sink, "messages_summary", |key| sink.put(key, Atom::Value(&whole.summary)));
    }
    Ok(())
}

/// The records of messages a protocol decoded as maps already in their record's order (TubeMQ's): the
/// payload's size and SHA-256 first, then the fields as they are, the payload itself only with
/// `payload_bytes` (`payload_text`, else `payload_b64`).
fn write_carried_messages<F: Front>(
    sink: &mut impl RecordSink<F>,
    key: Key<'_>,
    messages: &[Value],
    payload_bytes: bool,
) -> SinkResult<()> {
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
