//! The payload section of SEND and MESSAGE frames through `pulsar_dissect_engine::protocols::pulsar::decode` / `decode_to`: broker
//! entry metadata (0x0e02), the CRC32C (0x0e01) and what it covers, MessageMetadata, compression, batches of
//! SingleMessageMetadata entries, encryption, markers and chunks, and frames that lost their end. Metadata and
//! entries are encoded by prost-reflect; checksums by the `crc32c` crate; payloads by the codec crates.

use pulsar_dissect_engine::model::Decoded;
use pulsar_dissect_engine::protocols::pulsar::payload::{Checksum, PayloadSection};
use pulsar_dissect_engine::protocols::pulsar::{decode, decode_to};
use pulsar_dissect_engine::protocols::{DecodeCaps, Depth};
use pulsar_dissect_engine::value::Value;

mod pulsar_support;

use prost_reflect::DynamicMessage;
use pulsar_support::*;

fn sec(d: &Decoded) -> &PayloadSection {
    d.payload().expect("a payload section")
}

fn bytes(b: &[u8]) -> Value {
    Value::Bytes(b.to_vec())
}

fn case(d: &Decoded, id: &str) -> Option<String> {
    param(d, id, "case").and_then(Value::as_str).map(str::to_owned)
}

fn kv(k: &str, v: &str) -> PV {
    sub(msg("KeyValue", &[("key", st(k)), ("value", st(v))]))
}

/// A batch payload of `entries` (SingleMessageMetadata, payload).
fn batch(entries: &[(DynamicMessage, &[u8])]) -> Vec<u8> {
    entries.iter().flat_map(|(m, p)| batch_entry(m, p)).collect()
}

/// A SEND carrying a batch of `n` entries declared, with `payload` as its (uncompressed) batch bytes.
fn batch_frame(n: i64, payload: &[u8]) -> Vec<u8> {
    send_frame(&metadata(&[("num_messages_in_batch", int(n))]), payload)
}

// ---------------------------------------------------------------------------------------- the checksum

#[test]
fn metadata_decodes_as_the_runtime_encoded_it() {
    let md = metadata(&[
        ("properties", list(vec![kv("a", "1")])),
        ("replicated_from", st("us-east")),
        ("partition_key", st("key-1")),
        ("replicate_to", list(vec![st("us-west"), st("eu")])),
        ("event_time", int(1_699_999_999_000)),
        ("schema_version", by(&[0, 0, 0, 0, 0, 0, 0, 3])),
        ("ordering_key", by(b"ok")),
        ("deliver_at_time", int(-5)),
        ("txnid_least_bits", int(9)),
        ("txnid_most_bits", uint(u64::MAX)),
        ("highest_sequence_id", int(44)),
        ("compacted_batch_indexes", list(vec![int(0), int(2)])),
        ("schema_id", by(b"\x01\x02")),
        ("entry_hash_min", int(0)),
        ("entry_hash_max", int(65535)),
    ]);
    let d = full(&send_frame(&md, b"hello"));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let s = sec(&d);
    assert_eq!(s.metadata.as_ref(), Some(&expected(&md)));
    assert_eq!(s.metadata_size, Some(encode(&md).len()));
    assert_eq!(s.payload_size, 5);
    assert_eq!((s.compression, s.uncompressed_size, s.encrypted), (0, None, false));
}

#[test]
fn a_valid_checksum_is_over_metadata_size_metadata_and_payload() {
    let md = encode(&metadata(&[]));
    let frame = send_frame(&metadata(&[]), b"hello");
    let mut covered = (md.len() as u32).to_be_bytes().to_vec();
    covered.extend(&md);
    covered.extend(b"hello");
    let crc = crc32c::crc32c(&covered);
    let s = sec(&full(&frame)).checksum;
    assert_eq!(s, Checksum::Valid);
    let d = full(&frame);
    assert_eq!((sec(&d).checksum_wire, sec(&d).checksum_computed), (Some(crc), Some(crc)));
    assert_eq!(Checksum::Valid.name().as_str(), "valid");
}

#[test]
fn no_magic_no_checksum() {
    let frame = payload_frame(&send_command(), None, false, &encode(&metadata(&[])), b"hello");
    let d = full(&frame);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let s = sec(&d);
    assert_eq!((s.checksum, s.checksum_wire, s.checksum_computed), (Checksum::Absent, None, None));
    assert_eq!(s.messages[0].get("payload"), Some(&bytes(b"hello")));
}

#[test]
fn a_wrong_checksum_reports_both_values() {
    let mut frame = send_frame(&metadata(&[]), b"hello");
    let at = 8 + send_command().len() + 2; // after the magic
    let right = u32::from_be_bytes(frame[at..at + 4].try_into().unwrap());
    frame[at..at + 4].copy_from_slice(&0xdead_beefu32.to_be_bytes());
    let d = full(&frame);
    assert_eq!(ids(&d), ["checksum.invalid"]);
    assert_eq!(param(&d, "checksum.invalid", "wire"), Some(&Value::Int(0xdead_beef)));
    assert_eq!(param(&d, "checksum.invalid", "computed"), Some(&Value::Int(right as i64)));
    assert_eq!(sec(&d).checksum, Checksum::Invalid);
    // the frame is decoded all the same
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&bytes(b"hello")));
}

#[test]
fn a_flipped_metadata_size_byte_breaks_the_checksum() {
    // the size field is covered: with a larger size the metadata would swallow the payload
    let frame = send_frame(&metadata(&[]), b"hello");
    let at = 8 + send_command().len() + 6;
    let mut bad = frame.clone();
    bad[at + 3] += 5;
    let d = full(&bad);
    assert_eq!(sec(&d).checksum, Checksum::Invalid);
    assert_eq!(sec(&d).checksum_computed, Some(crc32c::crc32c(&bad[at..])));
}

#[test]
fn every_flipped_payload_byte_breaks_the_checksum() {
    let frame = send_frame(&metadata(&[]), b"a payload of some length");
    let start = 8 + send_command().len() + 6;
    for i in start..frame.len() {
        let mut bad = frame.clone();
        bad[i] ^= 0x40;
        assert_eq!(sec(&full(&bad)).checksum, Checksum::Invalid, "byte {i}");
    }
}

#[test]
fn the_command_is_not_under_the_checksum() {
    // a different sequence id in the command: the checksum, over the section only, still holds
    let cmd = base_command("SEND", &sub_command("SEND", &[("producer_id", int(7)), ("sequence_id", int(43))]));
    let frame = payload_frame(&cmd, None, true, &encode(&metadata(&[])), b"x");
    assert_eq!(sec(&full(&frame)).checksum, Checksum::Valid);
}

#[test]
fn a_checksum_cut_short() {
    let mut frame = frame_with(&send_command(), &[0x0e, 0x01, 0xaa, 0xbb]);
    let d = full(&frame);
    assert_eq!(ids(&d), ["payload.checksum_cut"]);
    assert!(sec(&d).metadata.is_none());
    frame.truncate(frame.len() - 2); // only the magic: still a cut checksum
    let total = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&total.to_be_bytes());
    assert_eq!(ids(&full(&frame)), ["payload.checksum_cut"]);
}

#[test]
fn lost_bytes_leave_the_checksum_unverified() {
    let frame = send_frame(&metadata(&[]), b"hello world");
    let d = decode(&frame[..frame.len() - 4], 4, MIB, false);
    let s = sec(&d);
    assert_eq!(s.checksum, Checksum::Unverified);
    assert_eq!(
        s.checksum_wire.map(|w| w.to_be_bytes().to_vec()),
        Some(frame[8 + send_command().len() + 2..][..4].to_vec())
    );
    assert_eq!(s.checksum_computed, None);
    assert_eq!(ids(&d), ["payload.incomplete"]);
    assert_eq!(param(&d, "payload.incomplete", "captured"), Some(&Value::Int(7)));
    assert_eq!(s.messages, vec![map(vec![("payload_size", Value::Int(7)), ("payload", Value::Null)])]);
}

#[test]
fn a_frame_cut_inside_its_metadata() {
    let frame = send_frame(&metadata(&[]), b"hello");
    let cut = frame.len() - 5 - 3; // the payload and the metadata's last 3 bytes lost
    let d = decode(&frame[..cut], frame.len() - cut, MIB, false);
    assert_eq!(d.size, frame.len());
    assert_eq!(ids(&d), ["payload.metadata_size"]);
    assert_eq!(param(&d, "payload.metadata_size", "left"), Some(&Value::Int(encode(&metadata(&[])).len() as i64 - 3)));
}

#[test]
fn every_cut_of_a_batch_frame_keeps_its_size_and_never_verifies() {
    let entries = batch(&[(smm(b"one", &[]), b"one"), (smm(b"two", &[]), b"two")]);
    let frame = batch_frame(2, &entries);
    let cmd_end = 8 + send_command().len();
    for end in cmd_end + 6..frame.len() {
        let d = decode(&frame[..end], frame.len() - end, MIB, false);
        assert_eq!(d.size, frame.len());
        assert_eq!(sec(&d).checksum, Checksum::Unverified, "cut at {end}");
        assert!(!ids(&d).contains(&"checksum.invalid"));
    }
}

// --------------------------------------------------------------------------------- the metadata's size

#[test]
fn metadata_size_beyond_the_frame() {
    let mut section = 1000u32.to_be_bytes().to_vec();
    section.extend(encode(&metadata(&[])));
    let d = full(&frame_with(&send_command(), &section));
    assert_eq!(ids(&d), ["payload.metadata_size"]);
    assert_eq!(param(&d, "payload.metadata_size", "size"), Some(&Value::Int(1000)));
    assert_eq!(param(&d, "payload.metadata_size", "left"), Some(&Value::Int(section.len() as i64 - 4)));
}

#[test]
fn no_room_for_a_metadata_size() {
    let d = full(&frame_with(&send_command(), &[0, 0]));
    assert_eq!(ids(&d), ["payload.metadata_size"]);
    assert!(d.findings[0].params.is_empty());
    // a SEND with nothing after its command at all
    assert_eq!(ids(&full(&simple_frame(&send_command()))), ["payload.metadata_size"]);
}

#[test]
fn unparsable_metadata() {
    // field 1 (producer_name) claims 100 bytes
    let d = full(&payload_frame(&send_command(), None, true, &[0x0a, 100, b'p'], b""));
    assert_eq!(ids(&d), ["payload.metadata_unparsable"]);
    assert!(sec(&d).metadata.is_none());
    assert_eq!(sec(&d).checksum, Checksum::Valid);
}

#[test]
fn metadata_missing_required_fields() {
    let md = msg("MessageMetadata", &[("producer_name", st("p")), ("sequence_id", int(1))]);
    let d = full(&send_frame(&md, b"x"));
    assert_eq!(ids(&d), ["payload.metadata_missing_required"]);
    assert_eq!(param(&d, "payload.metadata_missing_required", "fields"), Some(&Value::List(vec![s("publish_time")])));
    assert_eq!(sec(&d).metadata.as_ref(), Some(&expected(&md)));
    assert_eq!(sec(&d).messages.len(), 1, "the message is still there");
}

// ------------------------------------------------------------------------------ broker entry metadata

#[test]
fn broker_entry_metadata_before_the_checksum() {
    let bem = msg("BrokerEntryMetadata", &[("broker_timestamp", int(1_700_000_000_123)), ("index", int(99))]);
    let md = metadata(&[]);
    let frame = payload_frame(&message_command(&[]), Some(&encode(&bem)), true, &encode(&md), b"hi");
    let d = full(&frame);
    assert_eq!(d.type_name.as_str(), "MESSAGE");
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let s = sec(&d);
    assert_eq!(s.broker_entry_metadata.as_ref(), Some(&expected(&bem)));
    // the broker adds it in front of the producer's checksum, which does not cover it
    assert_eq!(s.checksum, Checksum::Valid);
    assert_eq!(s.metadata.as_ref(), Some(&expected(&md)));
}

#[test]
fn broker_entry_metadata_without_a_checksum() {
    let bem = msg("BrokerEntryMetadata", &[("index", uint(u64::MAX))]);
    let frame = payload_frame(&message_command(&[]), Some(&encode(&bem)), false, &encode(&metadata(&[])), b"hi");
    let d = full(&frame);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(sec(&d).checksum, Checksum::Absent);
    assert_eq!(sec(&d).broker_entry_metadata.as_ref().and_then(|b| b.get("index")), Some(&Value::UInt(u64::MAX)));
}

#[test]
fn empty_broker_entry_metadata() {
    let frame = payload_frame(&message_command(&[]), Some(&[]), true, &encode(&metadata(&[])), b"hi");
    let d = full(&frame);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(sec(&d).broker_entry_metadata, Some(Value::Map(vec![])));
}

#[test]
fn broker_entry_metadata_cut_in_its_size() {
    let d = full(&frame_with(&message_command(&[]), &[0x0e, 0x02, 0, 0]));
    assert_eq!(ids(&d), ["payload.broker_entry_metadata"]);
    assert_eq!(case(&d, "payload.broker_entry_metadata").as_deref(), Some("cut"));
}

#[test]
fn broker_entry_metadata_larger_than_the_frame() {
    let d = full(&frame_with(&message_command(&[]), &[0x0e, 0x02, 0, 0, 1, 0, 0x08, 0x01]));
    assert_eq!(case(&d, "payload.broker_entry_metadata").as_deref(), Some("size"));
    assert_eq!(param(&d, "payload.broker_entry_metadata", "size"), Some(&Value::Int(256)));
    assert!(sec(&d).metadata.is_none());
}

#[test]
fn unparsable_broker_entry_metadata_does_not_stop_the_section() {
    // 3 bytes: field 1 (varint) whose varint never ends
    let frame = payload_frame(&message_command(&[]), Some(&[0x08, 0xff, 0xff]), true, &encode(&metadata(&[])), b"hi");
    let d = full(&frame);
    assert_eq!(ids(&d), ["payload.broker_entry_metadata"]);
    assert_eq!(case(&d, "payload.broker_entry_metadata").as_deref(), Some("unparsable"));
    assert!(sec(&d).broker_entry_metadata.is_none());
    assert_eq!(sec(&d).checksum, Checksum::Valid);
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&bytes(b"hi")));
}

#[test]
fn message_command_decodes_with_its_message_id() {
    let frame = payload_frame(&message_command(&[]), None, true, &encode(&metadata(&[])), b"hi");
    let d = full(&frame);
    let id = msg("MessageIdData", &[("ledgerId", int(11)), ("entryId", int(22))]);
    let cmd = sub_command("MESSAGE", &[("consumer_id", int(3)), ("message_id", sub(id))]);
    assert_eq!(d.command.as_ref(), Some(&expected(&cmd)));
}

// ---------------------------------------------------------------------------------- a single message

#[test]
fn a_single_message_carries_the_metadata_message_fields() {
    let md = metadata(&[
        ("properties", list(vec![kv("k1", "v1"), kv("k2", "v2")])),
        ("partition_key", st("pk")),
        ("event_time", int(123)),
        ("ordering_key", by(&[0, 1, 0xff])),
        ("null_value", PV::Bool(true)),
        ("null_partition_key", PV::Bool(true)),
    ]);
    let d = full(&send_frame(&md, b"body"));
    let want = map(vec![
        ("payload_size", Value::Int(4)),
        ("payload", bytes(b"body")),
        ("sequence_id", Value::Int(42)),
        ("partition_key", s("pk")),
        ("ordering_key", bytes(&[0, 1, 0xff])), // raw bytes, not base64: a message's key is data
        ("properties", map(vec![("k1", s("v1")), ("k2", s("v2"))])),
        ("event_time", Value::Int(123)),
        ("null_value", Value::Bool(true)),
        ("null_partition_key", Value::Bool(true)),
    ]);
    assert_eq!(sec(&d).messages, vec![want]);
}

#[test]
fn false_flags_and_absent_keys_are_not_in_the_message() {
    let md = metadata(&[("null_value", PV::Bool(false)), ("null_partition_key", PV::Bool(false))]);
    let d = full(&send_frame(&md, b""));
    let want = map(vec![
        ("payload_size", Value::Int(0)),
        ("payload", bytes(b"")),
        ("sequence_id", Value::Int(42)),
        ("properties", map(vec![])),
    ]);
    assert_eq!(sec(&d).messages, vec![want]);
}

#[test]
fn a_repeated_property_key_keeps_its_first_place_and_last_value() {
    let md = metadata(&[("properties", list(vec![kv("a", "1"), kv("b", "2"), kv("a", "3")]))]);
    let d = full(&send_frame(&md, b"x"));
    assert_eq!(sec(&d).messages[0].get("properties"), Some(&map(vec![("a", s("3")), ("b", s("2"))])));
}

#[test]
fn many_properties_with_repeats_fold_as_a_dict_does() {
    // more than 16 keys: past the decoder's linear search; keys repeat every 7
    let pairs: Vec<(String, String)> = (0..40).map(|i| (format!("key{}", i % 23), format!("v{i}"))).collect();
    let md = metadata(&[("properties", list(pairs.iter().map(|(k, v)| kv(k, v)).collect()))]);
    let d = full(&send_frame(&md, b"x"));
    // a Python dict's insertion-ordered fold, by hand
    let mut want: Vec<(String, String)> = Vec::new();
    for (k, v) in &pairs {
        match want.iter_mut().find(|(key, _)| key == k) {
            Some(entry) => entry.1 = v.clone(),
            None => want.push((k.clone(), v.clone())),
        }
    }
    let want = map(want.iter().map(|(k, v)| (k.as_str(), s(v))).collect());
    assert_eq!(sec(&d).messages[0].get("properties"), Some(&want));
}

// ------------------------------------------------------------------------------------------ compression

fn compressed_frame(codec: i64, body: &[u8], declared: Option<u64>, more: &[(&str, PV)]) -> Vec<u8> {
    let mut fields = vec![("compression", int(codec))];
    if let Some(size) = declared {
        fields.push(("uncompressed_size", uint(size)));
    }
    fields.extend(more.iter().cloned());
    send_frame(&metadata(&fields), &compress(codec, body))
}

fn text_body() -> Vec<u8> {
    (0..2000u32).flat_map(|i| format!("line {i} of a compressible payload\n").into_bytes()).collect()
}

fn decompresses_with_its_declared_size(codec: i64, name: &str) {
    let body = text_body();
    let d = full(&compressed_frame(codec, &body, Some(body.len() as u64), &[]));
    assert!(d.findings.is_empty(), "{name}: {:?}", d.findings);
    let s = sec(&d);
    assert_eq!(s.compression, codec);
    assert_eq!(s.payload_size, compress(codec, &body).len());
    assert_eq!(s.uncompressed_size, Some(body.len()));
    assert_eq!(s.messages[0].get("payload"), Some(&bytes(&body)), "{name}");
    assert_eq!(s.messages[0].get("payload_size"), Some(&Value::Int(body.len() as i64)));
    assert_eq!(s.metadata.as_ref().and_then(|m| m.get("compression")).and_then(Value::as_str), Some(name));
}

#[test]
fn lz4_payload_decompresses() {
    decompresses_with_its_declared_size(LZ4, "LZ4");
}

#[test]
fn zlib_payload_decompresses() {
    decompresses_with_its_declared_size(ZLIB, "ZLIB");
}

#[test]
fn zstd_payload_decompresses() {
    decompresses_with_its_declared_size(ZSTD, "ZSTD");
}

#[test]
fn snappy_payload_decompresses() {
    decompresses_with_its_declared_size(SNAPPY, "SNAPPY");
}

#[test]
fn a_batch_in_snappys_framing_format_decodes_whole_and_is_said_unreadable_by_java_and_cpp() {
    // as pulsar-rs sends a batch: Snappy's frame encoder over the whole batch, uncompressed_size the batch's
    let entries: Vec<(DynamicMessage, Vec<u8>)> =
        (0..20).map(|i| format!("message {i} of a batch").into_bytes()).map(|p| (smm(&p, &[]), p)).collect();
    let body: Vec<u8> = entries.iter().flat_map(|(m, p)| batch_entry(m, p)).collect();
    let mut encoder = snap::write::FrameEncoder::new(Vec::new());
    std::io::Write::write_all(&mut encoder, &body).unwrap();
    let framed = encoder.into_inner().unwrap();
    let md = metadata(&[
        ("compression", int(SNAPPY)),
        ("uncompressed_size", uint(body.len() as u64)),
        ("num_messages_in_batch", int(20)),
    ]);
    let d = full(&send_frame(&md, &framed));
    assert_eq!(ids(&d), ["payload.snappy_framed"], "a warning, and no decompression failure");
    assert_eq!(param(&d, "payload.snappy_framed", "bytes"), Some(&Value::Int(framed.len() as i64)));
    let s = sec(&d);
    assert_eq!(s.uncompressed_size, Some(body.len()));
    assert_eq!(s.messages.len(), 20, "every entry of the batch");
    for (message, (_, payload)) in s.messages.iter().zip(&entries) {
        assert_eq!(message.get("payload"), Some(&bytes(payload)));
    }
    // the same batch in the raw block format (what the Java and C++ clients write): no warning
    let raw = full(&compressed_frame(SNAPPY, &body, Some(body.len() as u64), &[("num_messages_in_batch", int(20))]));
    assert!(raw.findings.is_empty(), "{:?}", raw.findings);
    assert_eq!(sec(&raw).messages.len(), 20);
}

#[test]
fn java_sync_flushed_zlib_payload_decompresses() {
    // Pulsar's Java Deflater never finishes the stream
    let body = text_body();
    let md = metadata(&[("compression", int(ZLIB)), ("uncompressed_size", uint(body.len() as u64))]);
    let d = full(&send_frame(&md, &zlib_sync_flushed(&body)));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&bytes(&body)));
}

#[test]
fn every_codec_decompresses_without_a_declared_size() {
    let body = text_body();
    for codec in [LZ4, ZLIB, ZSTD, SNAPPY] {
        let d = full(&compressed_frame(codec, &body, None, &[]));
        assert!(d.findings.is_empty(), "{codec}: {:?}", d.findings);
        assert_eq!(sec(&d).uncompressed_size, Some(body.len()), "{codec}");
    }
}

#[test]
fn a_declared_size_too_large_keeps_the_data_with_a_mismatch() {
    let body = text_body();
    let declared = body.len() as u64 + 10;
    for (codec, name) in [(LZ4, "LZ4"), (ZLIB, "ZLIB"), (ZSTD, "ZSTD"), (SNAPPY, "SNAPPY")] {
        let d = full(&compressed_frame(codec, &body, Some(declared), &[]));
        assert_eq!(ids(&d), ["payload.decompression"], "{name}");
        assert_eq!(case(&d, "payload.decompression").as_deref(), Some("size_mismatch"));
        assert_eq!(param(&d, "payload.decompression", "codec").and_then(Value::as_str), Some(name));
        assert_eq!(param(&d, "payload.decompression", "declared"), Some(&Value::Int(declared as i64)));
        assert_eq!(param(&d, "payload.decompression", "actual"), Some(&Value::Int(body.len() as i64)));
        assert_eq!(sec(&d).messages[0].get("payload"), Some(&bytes(&body)), "{name}");
    }
}

#[test]
fn a_declared_size_too_small_is_a_bomb_and_keeps_no_payload() {
    let body = text_body();
    for (codec, name) in [(LZ4, "LZ4"), (ZLIB, "ZLIB"), (ZSTD, "ZSTD"), (SNAPPY, "SNAPPY")] {
        let frame = compressed_frame(codec, &body, Some(100), &[]);
        let d = full(&frame);
        assert_eq!(case(&d, "payload.decompression").as_deref(), Some("bomb_declared"), "{name}");
        assert_eq!(param(&d, "payload.decompression", "declared"), Some(&Value::Int(100)));
        let s = sec(&d);
        assert_eq!(s.uncompressed_size, None);
        let want = map(vec![
            ("payload_size", Value::Int(compress(codec, &body).len() as i64)),
            ("payload", Value::Null),
            ("sequence_id", Value::Int(42)),
        ]);
        assert_eq!(s.messages, vec![want], "{name}");
    }
}

#[test]
fn a_declared_size_over_the_limit_is_not_decompressed() {
    let body = text_body();
    let d = decode(&compressed_frame(ZSTD, &body, Some(body.len() as u64), &[]), 0, 1000, false);
    assert_eq!(case(&d, "payload.decompression").as_deref(), Some("over_limit"));
    assert_eq!(param(&d, "payload.decompression", "declared"), Some(&Value::Int(body.len() as i64)));
    assert_eq!(param(&d, "payload.decompression", "limit"), Some(&Value::Int(1000)));
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&Value::Null));
}

#[test]
fn an_undeclared_size_over_the_limit_is_a_bomb() {
    let zeros = vec![0u8; 200_000];
    for codec in [LZ4, ZLIB, ZSTD, SNAPPY] {
        let d = decode(&compressed_frame(codec, &zeros, None, &[]), 0, 50_000, false);
        assert_eq!(case(&d, "payload.decompression").as_deref(), Some("bomb_limit"), "{codec}");
        assert_eq!(param(&d, "payload.decompression", "limit"), Some(&Value::Int(50_000)));
    }
}

#[test]
fn the_decompression_limit_is_inclusive() {
    // exactly the limit is fine, one byte more is not
    let body = vec![7u8; 4096];
    let d = decode(&compressed_frame(ZSTD, &body, None, &[]), 0, 4096, false);
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let d = decode(&compressed_frame(ZSTD, &body, None, &[]), 0, 4095, false);
    assert_eq!(case(&d, "payload.decompression").as_deref(), Some("bomb_limit"));
}

#[test]
fn corrupt_compressed_data_fails() {
    let md = metadata(&[("compression", int(ZSTD)), ("uncompressed_size", uint(10))]);
    let d = full(&send_frame(&md, b"this is not a zstd frame"));
    assert_eq!(case(&d, "payload.decompression").as_deref(), Some("failed"));
    assert_eq!(param(&d, "payload.decompression", "codec").and_then(Value::as_str), Some("ZSTD"));
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&Value::Null));
}

#[test]
fn a_codec_the_schema_does_not_know_is_never_read_as_uncompressed() {
    // compression 7: a closed enum's unknown value, kept by its number
    let md = metadata(&[("compression", int(7))]);
    let d = full(&send_frame(&md, b"???"));
    assert_eq!(sec(&d).compression, 7);
    assert_eq!(case(&d, "payload.decompression").as_deref(), Some("unknown_codec"));
    assert_eq!(param(&d, "payload.decompression", "codec"), Some(&Value::Int(7)));
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&Value::Null));
    assert_eq!(
        sec(&d).metadata.as_ref().and_then(|m| m.get("_unknown_fields")),
        Some(&Value::List(vec![Value::Int(8)]))
    );
}

#[test]
fn explicit_none_with_a_lying_size_is_left_alone() {
    let md = metadata(&[("compression", st("NONE")), ("uncompressed_size", uint(999))]);
    let d = full(&send_frame(&md, b"plain"));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(sec(&d).uncompressed_size, None);
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&bytes(b"plain")));
}

// ------------------------------------------------------------------------------------------------ batches

fn batch_message(index: i64, payload: &[u8], more: Vec<(&str, Value)>) -> Value {
    let mut entries = vec![
        ("payload_size", Value::Int(payload.len() as i64)),
        ("payload", bytes(payload)),
        ("batch_index", Value::Int(index)),
    ];
    entries.extend(more);
    map(entries)
}

#[test]
fn a_batch_splits_into_its_entries_with_their_fields() {
    let entries = batch(&[
        (
            smm(
                b"first",
                &[("properties", list(vec![kv("a", "1")])), ("partition_key", st("k")), ("sequence_id", int(100))],
            ),
            b"first",
        ),
        (smm(b"", &[("event_time", int(5)), ("ordering_key", by(b"\x00o")), ("null_value", PV::Bool(true))]), b""),
        (smm(b"third", &[("compacted_out", PV::Bool(true)), ("null_partition_key", PV::Bool(false))]), b"third"),
    ]);
    let d = full(&batch_frame(3, &entries));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let want = vec![
        batch_message(
            0,
            b"first",
            vec![("properties", map(vec![("a", s("1"))])), ("partition_key", s("k")), ("sequence_id", Value::Int(100))],
        ),
        batch_message(
            1,
            b"",
            vec![
                ("properties", map(vec![])),
                ("event_time", Value::Int(5)),
                ("ordering_key", bytes(b"\x00o")),
                ("null_value", Value::Bool(true)),
            ],
        ),
        batch_message(
            2,
            b"third",
            vec![
                ("properties", map(vec![])),
                ("compacted_out", Value::Bool(true)),
                ("null_partition_key", Value::Bool(false)),
            ],
        ),
    ];
    assert_eq!(sec(&d).messages, want);
    assert_eq!(sec(&d).payload_size, entries.len());
}

#[test]
fn one_message_in_batch_is_still_a_batch() {
    // a present num_messages_in_batch, even 1, makes the payload a batch (the Java consumer's rule)
    let entries = batch(&[(smm(b"only", &[]), b"only")]);
    let d = full(&batch_frame(1, &entries));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(sec(&d).messages, vec![batch_message(0, b"only", vec![("properties", map(vec![]))])]);
}

#[test]
fn a_compressed_batch_is_decompressed_then_split() {
    let payloads: Vec<Vec<u8>> = (0..50).map(|i| format!("message number {i}").into_bytes()).collect();
    let plain = batch(&payloads.iter().map(|p| (smm(p, &[]), p.as_slice())).collect::<Vec<_>>());
    for codec in [LZ4, ZLIB, ZSTD, SNAPPY] {
        let frame = compressed_frame(codec, &plain, Some(plain.len() as u64), &[("num_messages_in_batch", int(50))]);
        let d = full(&frame);
        assert!(d.findings.is_empty(), "{codec}: {:?}", d.findings);
        let got: Vec<&[u8]> = sec(&d).messages.iter().filter_map(|m| m.get("payload")?.as_bytes()).collect();
        assert_eq!(got, payloads.iter().map(Vec::as_slice).collect::<Vec<_>>(), "{codec}");
        assert_eq!(sec(&d).uncompressed_size, Some(plain.len()));
    }
}

#[test]
fn fewer_entries_than_declared() {
    let entries = batch(&[(smm(b"a", &[]), b"a"), (smm(b"b", &[]), b"b")]);
    let d = full(&batch_frame(5, &entries));
    assert_eq!(ids(&d), ["batch.count_mismatch"]);
    assert_eq!(param(&d, "batch.count_mismatch", "entries"), Some(&Value::Int(2)));
    assert_eq!(param(&d, "batch.count_mismatch", "expected"), Some(&Value::Int(5)));
    assert_eq!(sec(&d).messages.len(), 2);
}

#[test]
fn stray_bytes_after_the_last_entry() {
    let mut entries = batch(&[(smm(b"a", &[]), b"a"), (smm(b"b", &[]), b"b")]);
    entries.extend([0, 0]);
    let d = full(&batch_frame(2, &entries));
    assert_eq!(ids(&d), ["batch.malformed"]);
    assert_eq!(case(&d, "batch.malformed").as_deref(), Some("stray"));
    assert_eq!(param(&d, "batch.malformed", "entry"), Some(&Value::Int(2)));
    assert_eq!(param(&d, "batch.malformed", "left"), Some(&Value::Int(2)));
    assert_eq!(sec(&d).messages.len(), 2, "the entries before the damage are kept");
}

#[test]
fn an_entry_metadata_size_beyond_the_batch() {
    let mut entries = batch(&[(smm(b"a", &[]), b"a")]);
    entries.extend(500u32.to_be_bytes());
    entries.extend([0x18, 0x01]);
    let d = full(&batch_frame(2, &entries));
    assert_eq!(ids(&d), ["batch.malformed", "batch.count_mismatch"]);
    assert_eq!(case(&d, "batch.malformed").as_deref(), Some("metadata_size"));
    assert_eq!(param(&d, "batch.malformed", "entry"), Some(&Value::Int(1)));
    assert_eq!(param(&d, "batch.malformed", "size"), Some(&Value::Int(500)));
}

#[test]
fn an_unparsable_entry_metadata() {
    let mut entries = 3u32.to_be_bytes().to_vec();
    entries.extend([0x18, 0x81, 0x81]); // payload_size's varint never ends
    let d = full(&batch_frame(1, &entries));
    assert_eq!(case(&d, "batch.malformed").as_deref(), Some("unparsable"));
    assert_eq!(param(&d, "batch.malformed", "entry"), Some(&Value::Int(0)));
    assert!(sec(&d).messages.is_empty());
}

#[test]
fn an_entry_without_payload_size() {
    let m = msg("SingleMessageMetadata", &[("partition_key", st("k"))]);
    let d = full(&batch_frame(1, &batch_entry(&m, b"")));
    assert_eq!(ids(&d), ["batch.malformed", "batch.count_mismatch"]);
    assert_eq!(case(&d, "batch.malformed").as_deref(), Some("no_payload_size"));
}

#[test]
fn an_entry_payload_size_beyond_the_batch() {
    let m = msg("SingleMessageMetadata", &[("payload_size", int(10))]);
    let d = full(&batch_frame(1, &batch_entry(&m, b"abc")));
    assert_eq!(case(&d, "batch.malformed").as_deref(), Some("payload_size"));
    assert_eq!(param(&d, "batch.malformed", "size"), Some(&Value::Int(10)));
    assert_eq!(param(&d, "batch.malformed", "left"), Some(&Value::Int(3)));
}

#[test]
fn a_negative_entry_payload_size() {
    let m = msg("SingleMessageMetadata", &[("payload_size", int(-1))]);
    let d = full(&batch_frame(1, &batch_entry(&m, b"abc")));
    assert_eq!(case(&d, "batch.malformed").as_deref(), Some("payload_size"));
    assert_eq!(param(&d, "batch.malformed", "size"), Some(&Value::Int(-1)));
}

#[test]
fn an_empty_batch_payload_has_no_entries() {
    let d = full(&batch_frame(0, b""));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert!(sec(&d).messages.is_empty());
}

fn message_batch_frame(ack_set: &[i64], n: usize) -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8]).collect();
    let entries = batch(&payloads.iter().map(|p| (smm(p, &[]), p.as_slice())).collect::<Vec<_>>());
    let md = metadata(&[("num_messages_in_batch", int(n as i64))]);
    payload_frame(&message_command(ack_set), None, true, &encode(&md), &entries)
}

fn acked(d: &Decoded) -> Vec<usize> {
    sec(d)
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.get("acked") == Some(&Value::Bool(true)))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn the_ack_set_marks_acknowledged_entries() {
    // ack_set is a java.util.BitSet of the entries still to deliver: 0b101 leaves entry 1 acknowledged
    let d = full(&message_batch_frame(&[0b101], 3));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(acked(&d), [1]);
}

#[test]
fn the_ack_set_spans_several_words() {
    // toLongArray: bit i in word i / 64; all of word 0 set, word 1 = 0b10: entries 64 and 66 acknowledged
    let d = full(&message_batch_frame(&[-1, 0b10], 67));
    assert_eq!(acked(&d), [64, 66]);
}

#[test]
fn without_an_ack_set_nothing_is_acknowledged() {
    assert!(acked(&full(&message_batch_frame(&[], 3))).is_empty());
}

// ---------------------------------------------------------------------------------------- decode depths

#[test]
fn batches_later_checks_the_batch_and_splits_it_the_same_way() {
    let entries = batch(&[(smm(b"a", &[("sequence_id", int(1))]), b"a"), (smm(b"bb", &[]), b"bb")]);
    let frame = payload_frame(
        &message_command(&[0b01]),
        None,
        true,
        &encode(&metadata(&[("num_messages_in_batch", int(3))])),
        &entries,
    );
    let full_decode = full(&frame);
    let later = decode_to(&frame, 0, DecodeCaps::decompressing(MIB), Depth::BatchesLater);
    assert!(sec(&later).messages.is_empty());
    assert_eq!(sec(&later).message_count(), 2);
    assert_eq!(later.findings, full_decode.findings, "the check found what the full decode found");
    assert_eq!(sec(&later).messages_split().to_vec(), sec(&full_decode).messages);
    let batch = sec(&later).batch_later.as_ref().expect("a batch kept whole");
    assert!(batch.keep_payloads);
    assert_eq!(batch.summary, map(vec![("count", Value::Int(2)), ("bytes", Value::Int(3))]));
}

#[test]
fn a_brief_decode_keeps_the_brief_metadata_in_its_order() {
    let md = metadata(&[
        ("deliver_at_time", int(-2)),
        ("compression", st("ZSTD")),
        ("uncompressed_size", uint(3)),
        ("schema_version", by(&[0, 7])),
        ("encryption_algo", st("RSA")),
        ("partition_key", st("not brief")),
        ("event_time", int(5)),
    ]);
    let d = decode(&send_frame(&md, &compress(ZSTD, b"abc")), 0, MIB, true);
    let want = map(vec![
        ("producer_name", s("p")),
        ("compression", s("ZSTD")),
        ("uncompressed_size", Value::Int(3)),
        ("schema_version", s("AAc=")), // base64 of 00 07
        ("encryption_algo", s("RSA")),
        ("deliver_at_time", Value::Int(-2)),
    ]);
    assert_eq!(sec(&d).metadata, Some(want));
    // sizes, but no payload copied
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&Value::Null));
    assert_eq!(sec(&d).messages[0].get("payload_size"), Some(&Value::Int(3)));
}

#[test]
fn a_brief_decode_keeps_a_batch_whole_with_its_summary() {
    let entries = batch(&[(smm(b"abc", &[]), b"abc"), (smm(b"de", &[]), b"de")]);
    let d = decode(&batch_frame(2, &entries), 0, MIB, true);
    let section = sec(&d);
    assert_eq!(section.metadata, Some(map(vec![("producer_name", s("p")), ("num_messages_in_batch", Value::Int(2))])));
    let b = section.batch_later.as_ref().expect("a batch kept whole");
    assert_eq!(b.summary, map(vec![("count", Value::Int(2)), ("bytes", Value::Int(5))]));
    assert!(!b.keep_payloads);
    assert_eq!(section.messages_split()[1].get("payload"), Some(&Value::Null));
    assert_eq!(section.messages_split()[1].get("payload_size"), Some(&Value::Int(2)));
}

#[test]
fn a_brief_decode_names_an_unknown_codec_by_number_and_lists_encryption_keys() {
    let key = sub(msg("EncryptionKeys", &[("key", st("client-rsa.pem")), ("value", by(b"k"))]));
    let d = decode(
        &send_frame(&metadata(&[("compression", int(9)), ("encryption_keys", list(vec![key]))]), b"x"),
        0,
        MIB,
        true,
    );
    // compression 9 is unknown to the closed enum: the brief view has no compression entry for it
    let want = map(vec![
        ("producer_name", s("p")),
        ("encryption_keys", Value::List(vec![map(vec![("key", s("client-rsa.pem"))])])),
    ]);
    assert_eq!(sec(&d).metadata, Some(want));
}

// ------------------------------------------------------------------------------------------- encryption

#[test]
fn an_encrypted_message_is_not_decompressed() {
    let key = sub(msg("EncryptionKeys", &[("key", st("k")), ("value", by(b"v"))]));
    let md =
        metadata(&[("compression", int(LZ4)), ("uncompressed_size", uint(50)), ("encryption_keys", list(vec![key]))]);
    let d = full(&send_frame(&md, b"ciphertext"));
    assert!(d.findings.is_empty(), "ciphertext is not fed to the codec: {:?}", d.findings);
    let s = sec(&d);
    assert!(s.encrypted);
    let want = map(vec![
        ("payload_size", Value::Int(10)),
        ("payload", Value::Null),
        ("sequence_id", Value::Int(42)),
        ("properties", map(vec![])),
        ("encrypted", Value::Bool(true)),
    ]);
    assert_eq!(s.messages, vec![want]);
}

#[test]
fn an_encrypted_batch_lists_no_message_and_counts_its_claim() {
    // (a 400-byte capture may claim ten million entries: one placeholder each made a record of 800 MB)
    let key = sub(msg("EncryptionKeys", &[("key", st("k")), ("value", by(b"v"))]));
    let md = metadata(&[("num_messages_in_batch", int(10_000_000)), ("encryption_keys", list(vec![key]))]);
    for depth in [Depth::Full, Depth::BatchesLater, Depth::Brief] {
        let d = decode_to(&send_frame(&md, b"ciphertext"), 0, DecodeCaps::decompressing(MIB), depth);
        assert!(sec(&d).messages.is_empty() && sec(&d).encrypted);
        let whole = map(vec![("count", Value::Int(10_000_000)), ("bytes", Value::Null)]);
        assert_eq!(sec(&d).whole_summary(), Some(&whole));
        assert!(d.findings.is_empty(), "{:?}", d.findings);
    }
}

#[test]
fn a_batch_beyond_max_batch_entries_lists_the_first_and_counts_all() {
    let entries: Vec<(DynamicMessage, &[u8])> = (0..5).map(|_| (smm(b"xy", &[]), &b"xy"[..])).collect();
    let frame = batch_frame(5, &batch(&entries));
    let caps = DecodeCaps { max_decompressed: MIB, max_batch_entries: 2, ..DecodeCaps::decompressing(MIB) };
    let whole = map(vec![("count", Value::Int(5)), ("bytes", Value::Int(10))]);
    for depth in [Depth::Full, Depth::BatchesLater, Depth::Brief] {
        let d = decode_to(&frame, 0, caps, depth);
        let section = sec(&d);
        let listed: Vec<Value> =
            section.messages_split().iter().map(|m| m.get("batch_index").cloned().unwrap()).collect();
        assert_eq!(listed, vec![Value::Int(0), Value::Int(1)], "{depth:?}");
        assert_eq!(section.message_count(), 2);
        assert_eq!(section.whole_summary(), Some(&whole), "{depth:?}");
        let truncated: Vec<_> = d.findings.iter().filter(|f| f.id.as_str() == "batch.entries_truncated").collect();
        assert_eq!(truncated.len(), 1, "{depth:?}");
        assert_eq!(param(&d, "batch.entries_truncated", "more"), Some(&Value::Int(3)));
        assert!(d.findings.iter().all(|f| f.id.as_str() != "batch.count_mismatch"));
    }
    // at the cap: every entry listed, nothing said
    let d = decode_to(
        &frame,
        0,
        DecodeCaps { max_decompressed: MIB, max_batch_entries: 5, ..DecodeCaps::decompressing(MIB) },
        Depth::Full,
    );
    assert_eq!((sec(&d).messages.len(), sec(&d).whole_summary(), d.findings.len()), (5, None, 0));
}

// ----------------------------------------------------------------------------------------------- markers

fn marker_frame(marker_type: i64, body: &[u8]) -> Vec<u8> {
    let md = msg(
        "MessageMetadata",
        &[
            ("producer_name", st("pulsar.marker")),
            ("sequence_id", int(0)),
            ("publish_time", int(1)),
            ("marker_type", int(marker_type)),
        ],
    );
    let cmd = base_command(
        "SEND",
        &sub_command("SEND", &[("producer_id", int(1)), ("sequence_id", int(0)), ("marker", PV::Bool(true))]),
    );
    payload_frame(&cmd, None, true, &encode(&md), body)
}

fn marker_id(ledger: i64, entry: i64) -> PV {
    sub(msg("MarkersMessageIdData", &[("ledger_id", int(ledger)), ("entry_id", int(entry))]))
}

fn cluster(name: &str) -> PV {
    sub(msg("ClusterMessageId", &[("cluster", st(name)), ("message_id", marker_id(3, 4))]))
}

#[test]
fn a_snapshot_request_marker() {
    let m =
        msg("ReplicatedSubscriptionsSnapshotRequest", &[("snapshot_id", st("snap-1")), ("source_cluster", st("us"))]);
    let d = full(&marker_frame(10, &encode(&m)));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(sec(&d).marker.as_ref(), Some(&expected(&m)));
}

#[test]
fn a_snapshot_response_marker() {
    let m =
        msg("ReplicatedSubscriptionsSnapshotResponse", &[("snapshot_id", st("snap-1")), ("cluster", cluster("eu"))]);
    assert_eq!(sec(&full(&marker_frame(11, &encode(&m)))).marker.as_ref(), Some(&expected(&m)));
}

#[test]
fn a_snapshot_marker_with_clusters() {
    let m = msg(
        "ReplicatedSubscriptionsSnapshot",
        &[
            ("snapshot_id", st("s")),
            ("local_message_id", marker_id(1, 2)),
            ("clusters", list(vec![cluster("a"), cluster("b")])),
        ],
    );
    assert_eq!(sec(&full(&marker_frame(12, &encode(&m)))).marker.as_ref(), Some(&expected(&m)));
}

#[test]
fn an_update_marker() {
    let m = msg(
        "ReplicatedSubscriptionsUpdate",
        &[("subscription_name", st("sub")), ("clusters", list(vec![cluster("a")]))],
    );
    assert_eq!(sec(&full(&marker_frame(13, &encode(&m)))).marker.as_ref(), Some(&expected(&m)));
}

#[test]
fn a_transaction_marker_has_no_body_to_decode() {
    let d = full(&marker_frame(21, b""));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert!(sec(&d).marker.is_none());
}

#[test]
fn an_unparsable_marker_is_named() {
    let d = full(&marker_frame(12, &[0x0a, 0x50]));
    assert_eq!(ids(&d), ["marker.unparsable"]);
    assert_eq!(
        param(&d, "marker.unparsable", "marker").and_then(Value::as_str),
        Some("ReplicatedSubscriptionsSnapshot")
    );
    assert!(sec(&d).marker.is_none());
}

#[test]
fn a_compressed_marker_is_decoded_after_decompression() {
    let m = msg("ReplicatedSubscriptionsSnapshotRequest", &[("snapshot_id", st("compressed"))]);
    let body = encode(&m);
    let md = msg(
        "MessageMetadata",
        &[
            ("producer_name", st("pulsar.marker")),
            ("sequence_id", int(0)),
            ("publish_time", int(1)),
            ("marker_type", int(10)),
            ("compression", st("SNAPPY")),
            ("uncompressed_size", uint(body.len() as u64)),
        ],
    );
    let d = full(&send_frame(&md, &compress(SNAPPY, &body)));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(sec(&d).marker.as_ref(), Some(&expected(&m)));
}

// ------------------------------------------------------------------------------------------------ chunks

#[test]
fn a_chunk_keeps_its_slice_compressed_with_its_place_in_the_message() {
    let md = metadata(&[
        ("compression", int(ZSTD)),
        ("uncompressed_size", uint(1000)),
        ("uuid", st("p-42-1700000000000")),
        ("num_chunks_from_msg", int(3)),
        ("total_chunk_msg_size", int(30)),
        ("chunk_id", int(1)),
        ("properties", list(vec![kv("a", "b")])),
    ]);
    // a slice of a compressed message is no valid frame of its own: it must not be decompressed
    let slice = b"0123456789";
    let d = full(&send_frame(&md, slice));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let want = map(vec![
        ("payload_size", Value::Int(10)),
        ("payload", bytes(slice)),
        ("sequence_id", Value::Int(42)),
        ("properties", map(vec![("a", s("b"))])),
        ("chunk_id", Value::Int(1)),
        ("num_chunks", Value::Int(3)),
        ("uuid", s("p-42-1700000000000")),
    ]);
    assert_eq!(sec(&d).messages, vec![want]);
    assert_eq!(sec(&d).metadata.as_ref(), Some(&expected(&md)));
}

#[test]
fn a_chunk_cut_by_a_gap_still_says_which_chunk_it_was() {
    let md = metadata(&[("uuid", st("u")), ("num_chunks_from_msg", int(2)), ("chunk_id", int(0))]);
    let frame = send_frame(&md, b"0123456789");
    let d = decode(&frame[..frame.len() - 4], 4, MIB, false);
    let want = map(vec![
        ("payload_size", Value::Int(6)),
        ("payload", Value::Null),
        ("chunk_id", Value::Int(0)),
        ("num_chunks", Value::Int(2)),
        ("uuid", s("u")),
    ]);
    assert_eq!(sec(&d).messages, vec![want]);
}

#[test]
fn a_chunk_id_without_uuid_is_an_ordinary_message() {
    let md = metadata(&[("chunk_id", int(0)), ("num_chunks_from_msg", int(2))]);
    let d = full(&send_frame(&md, b"x"));
    assert_eq!(sec(&d).messages[0].get("chunk_id"), None);
    assert_eq!(sec(&d).messages[0].get("payload"), Some(&bytes(b"x")));
}

#[test]
fn a_zstd_frame_without_its_content_size() {
    // a streaming encoder does not write the size in the frame header: the decoder must not need it
    let body = text_body();
    let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    e.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut e, &body).unwrap();
    let blob = e.finish().unwrap();
    for declared in [None, Some(body.len() as u64)] {
        let mut fields = vec![("compression", int(ZSTD))];
        fields.extend(declared.map(|n| ("uncompressed_size", uint(n))));
        let d = full(&send_frame(&metadata(&fields), &blob));
        assert!(d.findings.is_empty(), "{declared:?}: {:?}", d.findings);
        assert_eq!(sec(&d).messages[0].get("payload"), Some(&bytes(&body)));
    }
}

#[test]
fn mutated_frames_never_panic_the_decoder() {
    // hostile input: random byte changes and cuts of frames with every kind of section, at every depth
    let plain = batch(&[(smm(b"abc", &[("partition_key", st("k"))]), b"abc"), (smm(b"", &[]), b"")]);
    let seeds = [
        batch_frame(2, &plain),
        compressed_frame(LZ4, &plain, Some(plain.len() as u64), &[("num_messages_in_batch", int(2))]),
        compressed_frame(ZLIB, &plain, None, &[("num_messages_in_batch", int(2))]),
        payload_frame(
            &message_command(&[5]),
            Some(&encode(&msg("BrokerEntryMetadata", &[("index", int(3))]))),
            true,
            &encode(&metadata(&[("uuid", st("u")), ("chunk_id", int(0)), ("num_chunks_from_msg", int(2))])),
            b"zz",
        ),
        marker_frame(12, &encode(&msg("ReplicatedSubscriptionsSnapshot", &[("snapshot_id", st("s"))]))),
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..5000 {
        let mut b = seeds[i % seeds.len()].clone();
        for _ in 0..1 + next() % 3 {
            let at = next() as usize % b.len();
            match next() % 3 {
                0 => b[at] = next() as u8,
                1 => b.truncate(at.max(1)),
                _ => b.insert(at, next() as u8),
            }
        }
        let missing = (next() % 3) as usize;
        let d = decode(&b, missing, 1 << 16, false);
        assert_eq!(d.size, b.len() + missing);
        decode(&b, missing, 1 << 16, true);
        if let Some(s) = decode_to(&b, missing, DecodeCaps::decompressing(1 << 16), Depth::BatchesLater).payload() {
            let _ = s.messages_split();
        }
    }
}

#[test]
fn mutated_metadata_decodes_as_the_runtime_parses_it() {
    // differential, as for commands: where prost-reflect parses a mutated MessageMetadata, the section shows it
    let seed = metadata(&[
        ("properties", list(vec![kv("a", "1"), kv("b", "2")])),
        ("partition_key", st("pk")),
        ("replicate_to", list(vec![st("x")])),
        ("compression", st("NONE")),
        ("event_time", int(77)),
        ("schema_version", by(&[1, 2, 3])),
        ("deliver_at_time", int(-9)),
        ("null_value", PV::Bool(false)),
        ("compacted_batch_indexes", list(vec![int(1), int(-2)])),
    ]);
    let mut rng = Rng(0x0bad_5eed_0bad_5eed);
    let mut compared = 0;
    for _ in 0..20_000 {
        let bytes = rng.mutate(&encode(&seed));
        let Ok(runtime) = DynamicMessage::decode(descriptor("MessageMetadata"), bytes.as_slice()) else { continue };
        if !comparable(&runtime) {
            continue;
        }
        let d = full(&payload_frame(&send_command(), None, true, &bytes, b"p"));
        let got = sec(&d).metadata.as_ref().map(without_unknown_fields);
        assert_eq!(got, Some(expected(&runtime)), "{bytes:02x?}");
        compared += 1;
    }
    assert!(compared > 2_000, "{compared} compared");
}
