//! What a timeline line shows of TubeMQ after the key fields (`ProtocolSpec.timeline_pieces = "tubemq"`): the
//! frame's serial number (what pairs a response with its request) and the messages it carries (count, bytes,
//! and whether their checksums hold).

use crate::line::{Line, LineFacts, Role};
use crate::value::Value;

pub fn pieces(facts: &LineFacts, line: &mut Line) {
    if let Some(serial) = &facts.serial {
        line.push(Role::Label, " serial=");
        serial.push(&mut line.text);
        line.end(Role::Plain);
    }
    let (count, bytes) = match (facts.payload.summary, facts.payload.messages) {
        (Some(summary), _) => (
            summary.get("count").and_then(Value::as_i64).unwrap_or(0),
            summary.get("bytes").and_then(Value::as_i64).unwrap_or(0),
        ),
        (None, Some(messages)) if !messages.is_empty() => (
            messages.len() as i64,
            messages
                .iter()
                .filter_map(|m| m.get("payload_size").and_then(Value::as_i64))
                .fold(0i64, i64::saturating_add),
        ),
        _ => return,
    };
    line.text.push_str(&format!(" msgs={count} bytes={bytes}"));
    line.end(Role::Detail);
    match facts.payload.checksum.or_else(|| facts.payload.messages.map(super::checksum_verdict)) {
        Some("invalid") => line.push(Role::ChecksumBad, " crc=BAD"),
        Some("valid") => line.push(Role::ChecksumOk, " crc=ok"),
        _ => {}
    }
}
