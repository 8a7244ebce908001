//! What a timeline line shows of Pulsar after the key fields (`ProtocolSpec.timeline_pieces = "pulsar"`):
//! the payload section of SEND and MESSAGE (message count and bytes, compression, checksum, schema version,
//! encryption, chunk, marker, delayed delivery), a redelivery of every unacked message, the analysis' links
//! between frames (what a redelivery request asks for again, which request a redelivered message answers,
//! the delivery count of a repeated message, where a SEEK landed) and a reassembled chunked message.

use std::fmt::Write as _;

use crate::analysis::map_get;
use crate::line::{push_frame_list, Atom, Line, LineFacts, PayloadFacts, Role};
use crate::text::{self, b64_decode};
use crate::value::Value;

static NULL: Value = Value::Null;

/// A frame's messages in brief: count, payload bytes, and the chunk's ids (chunk_id, num_chunks, uuid).
struct Summary<'a> {
    count: Atom<'a>,
    bytes: Atom<'a>,
    chunk: Option<[&'a Value; 3]>,
}

fn summary<'a>(payload: &PayloadFacts<'a>) -> Summary<'a> {
    let chunk_of = |first: &'a Value| -> [&'a Value; 3] {
        ["chunk_id", "num_chunks", "uuid"].map(|key| first.get(key).unwrap_or(&NULL))
    };
    if let Some(brief) = payload.summary {
        let bytes = brief.get("bytes").unwrap_or(&NULL);
        return Summary {
            count: Atom::Value(brief.get("count").unwrap_or(&NULL)),
            // (null: an encrypted batch's bytes, unknown)
            bytes: if bytes.is_null() { Atom::Str("?") } else { Atom::Value(bytes) },
            chunk: brief.get("chunk").filter(|c| c.truthy()).map(chunk_of),
        };
    }
    let messages = payload.messages.unwrap_or(&[]);
    let sizes: Vec<i64> = messages.iter().filter_map(|m| m.get("payload_size").and_then(Value::as_i64)).collect();
    // no message's size known (an encrypted batch: its entries cannot be read): unknown, not zero
    let unknown = !messages.is_empty() && sizes.is_empty();
    Summary {
        count: Atom::Int(messages.len() as i64),
        bytes: if unknown { Atom::Str("?") } else { Atom::Int(sizes.iter().fold(0i64, |a, b| a.saturating_add(*b))) },
        chunk: messages.first().filter(|m| m.get("chunk_id").is_some()).map(chunk_of),
    }
}

/// Pulsar's pieces of a line.
pub fn pieces(facts: &LineFacts, line: &mut Line) {
    let payload = &facts.payload;
    let metadata = payload.metadata.and_then(Value::as_map);
    let md = |key: &str| metadata.and_then(|m| map_get(m, key));
    if payload.messages.is_some() || payload.summary.is_some() {
        let brief = summary(payload);
        line.text.push_str(" msgs=");
        brief.count.push(&mut line.text);
        line.text.push_str(" bytes=");
        brief.bytes.push(&mut line.text);
        line.end(Role::Detail);
        if let Some(codec) = md("compression").filter(|c| !c.is_null() && c.as_str() != Some("NONE")) {
            line.text.push(' ');
            line.push_safe(Role::Compression, codec, 20);
        }
        match payload.checksum {
            Some("invalid") => line.push(Role::ChecksumBad, " crc=BAD"),
            Some("valid") => line.push(Role::ChecksumOk, " crc=ok"),
            _ => {}
        }
        if let Some(version) = md("schema_version").filter(|v| v.truthy()) {
            line.push(Role::Label, " schema=");
            let hex = match version.as_str() {
                Some(b64) => b64_decode(b64)
                    .map_or_else(|| b64.to_owned(), |raw| raw.iter().map(|b| format!("{b:02x}")).collect()),
                None => text::py_str(version),
            };
            text::push_safe_text(&hex, 20, &mut line.text);
            line.end(Role::Plain);
        }
        if payload.encrypted {
            line.text.push_str(" encrypted keys=");
            for (i, key) in md("encryption_keys").and_then(Value::as_list).unwrap_or(&[]).iter().enumerate() {
                if i > 0 {
                    line.text.push(',');
                }
                text::push_safe(key.get("key").unwrap_or(&Value::from("?".to_owned())), 20, &mut line.text);
            }
            // (no encryption_algo: the client named none, the default cipher)
            if let Some(algo) = md("encryption_algo") {
                line.text.push_str(" algo=");
                text::push_safe(algo, 20, &mut line.text);
            }
            line.end(Role::Encrypted);
        }
        if let Some([chunk_id, num_chunks, uuid]) = brief.chunk {
            line.text.push_str(" chunk ");
            match chunk_id.as_i64() {
                Some(id) => {
                    let _ = write!(line.text, "{}", i128::from(id) + 1); // numbered from 1, as every text says
                }
                None => Atom::Value(chunk_id).push(&mut line.text),
            }
            line.text.push('/');
            Atom::Value(num_chunks).push(&mut line.text);
            line.push(Role::Chunk, " uuid=");
            line.push_safe(Role::Plain, uuid, 30);
        }
        if let Some(marker_type) = md("marker_type").filter(|m| !m.is_null()) {
            line.push(Role::Label, " marker=");
            let name = marker_type
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .and_then(|n| crate::protocols::pulsar::schema().enum_type("pulsar.proto.MarkerType").name(n));
            match name {
                Some(name) => line.push(Role::Marker, name.as_str()),
                None => line.push_safe(Role::Marker, marker_type, text::MAX_VALUE),
            }
            if let Some(marker) = payload.marker.filter(|m| m.truthy()) {
                line.text.push(' ');
                line.push_safe(Role::Plain, marker, 160);
            }
        }
    }
    if let Some(deliver_at) = md("deliver_at_time") {
        line.push(Role::Label, " deliver_at=");
        text::push_date_ms(deliver_at, &mut line.text);
        line.end(Role::DeliverAt);
    }
    if facts.type_name.as_str() == Some("REDELIVER_UNACKNOWLEDGED_MESSAGES")
        && !facts.command.and_then(|c| c.get("message_ids")).is_some_and(Value::truthy)
    {
        line.push(Role::Plain, " ids=all");
    }
    links(facts, line);
    if let Some(whole) = facts.note("reassembled").filter(|w| w.truthy()) {
        let chunks = whole.get("chunks").and_then(Value::as_list).map_or(0, <[Value]>::len);
        let _ = write!(line.text, " reassembled {chunks} chunks ");
        match whole.get("payload_size").filter(|s| !s.is_null()) {
            Some(size) => {
                Atom::Value(size).push(&mut line.text);
                line.text.push_str(" bytes");
            }
            None => line.text.push_str("(payload not recovered)"),
        }
        line.end(Role::Reassembled);
        if let Some(sha) = whole.get("payload_sha256").filter(|s| s.truthy()) {
            line.text.push_str(" sha256=");
            let sha = text::py_str(sha);
            text::push_escaped(&sha.chars().take(12).collect::<String>(), &mut line.text);
            line.push(Role::Detail, "…");
        }
    }
}

/// The analysis' links between frames.
fn links(facts: &LineFacts, line: &mut Line) {
    if let Some(frames) = facts.note("redelivers").filter(|f| f.truthy()) {
        let frames = frames.as_list().unwrap_or(&[]);
        let count = facts.note("redelivers_count").and_then(Value::as_u64).unwrap_or(frames.len() as u64);
        line.text.push_str(" redelivers ");
        push_frame_list(frames, count, &mut line.text);
        line.end(Role::Link);
    }
    for (key, before, role) in [
        ("redelivery_requested_by", " asked by #", Role::Link),
        ("delivery", " delivery=", Role::Delivery),
        ("after_seek", " first after SEEK #", Role::Link),
    ] {
        if let Some(value) = facts.note(key) {
            line.text.push_str(before);
            Atom::Value(value).push(&mut line.text);
            line.end(role);
        }
    }
}
