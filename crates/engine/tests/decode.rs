//! Decoding in Rust alone: this test binary does not link Python, so nothing on the decode path may need it.

use pulsar_dissect_engine::protocols::pulsar::decode;
use pulsar_dissect_engine::protocols::pulsar::payload::Checksum;
use pulsar_dissect_engine::value::Value;

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_varint(number: u64, v: u64, out: &mut Vec<u8>) {
    varint(number << 3, out);
    varint(v, out);
}

fn field_bytes(number: u64, b: &[u8], out: &mut Vec<u8>) {
    varint(number << 3 | 2, out);
    varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

/// A SEND frame: producer 7, sequence 42, a checksummed payload section carrying `payload`.
fn send_frame(payload: &[u8]) -> Vec<u8> {
    let mut send = Vec::new();
    field_varint(1, 7, &mut send);
    field_varint(2, 42, &mut send);
    let mut command = Vec::new();
    field_varint(1, 6, &mut command); // type SEND
    field_bytes(6, &send, &mut command);
    let mut metadata = Vec::new();
    field_bytes(1, b"producer-\xc2\x85", &mut metadata); // a C1 control in the name
    field_varint(2, 42, &mut metadata);
    field_varint(3, 1_700_000_000_000, &mut metadata);
    let mut checked = (metadata.len() as u32).to_be_bytes().to_vec();
    checked.extend(&metadata);
    checked.extend(payload);
    let mut rest = (command.len() as u32).to_be_bytes().to_vec();
    rest.extend(&command);
    rest.extend([0x0e, 0x01]);
    rest.extend(crc32c::crc32c(&checked).to_be_bytes());
    rest.extend(checked);
    let mut frame = (rest.len() as u32).to_be_bytes().to_vec();
    frame.extend(rest);
    frame
}

fn json(value: &Value) -> String {
    let mut out = Vec::new();
    value.write_json(&mut out);
    String::from_utf8(out).expect("JSON is UTF-8")
}

#[test]
fn a_send_frame() {
    let frame = send_frame(b"hello");
    let d = decode(&frame, 0, 1 << 20, false);
    assert_eq!(d.type_name.as_str(), "SEND");
    assert_eq!(d.size, frame.len());
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let command = d.command.as_ref().expect("a command");
    assert_eq!(json(command), r#"{"producer_id":7,"sequence_id":42}"#);
    let section = d.payload().expect("a payload section");
    assert_eq!(section.checksum, Checksum::Valid);
    let metadata = section.metadata.as_ref().expect("metadata");
    assert_eq!(json(metadata), r#"{"producer_name":"producer-\u0085","sequence_id":42,"publish_time":1700000000000}"#);
    assert_eq!(section.messages.len(), 1);
    let message = &section.messages[0];
    assert_eq!(message.get("payload").and_then(Value::as_bytes), Some(&b"hello"[..]));
    assert_eq!(message.get("sequence_id").and_then(Value::as_u64), Some(42));
}

#[test]
fn a_brief_decode_keeps_the_brief_metadata() {
    let d = decode(&send_frame(b"hello"), 0, 1 << 20, true);
    let section = d.payload().expect("a payload section");
    assert_eq!(json(section.metadata.as_ref().expect("metadata")), r#"{"producer_name":"producer-\u0085"}"#);
}

#[test]
fn damaged_frames_give_findings_not_panics() {
    let frame = send_frame(b"hello");
    let short = decode(&frame[..5], 0, 1 << 20, false);
    assert_eq!(short.type_name.as_str(), "MALFORMED");
    assert_eq!(short.findings[0].id.as_str(), "frame.too_short");
    let cut = decode(&frame[..frame.len() - 2], 2, 1 << 20, false);
    assert_eq!(cut.payload().expect("a payload section").checksum, Checksum::Unverified);
    let mut flipped = frame.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let d = decode(&flipped, 0, 1 << 20, false);
    assert_eq!(d.findings.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(), ["checksum.invalid"]);
    for end in 0..frame.len() {
        decode(&frame[..end], frame.len() - end, 1 << 20, false);
    }
}
