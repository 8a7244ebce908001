//! Chunked messages: SEND and MESSAGE frames encoded by prost-reflect, decoded by `pulsar_dissect_engine::protocols::pulsar::decode`,
//! their chunks fed to `pulsar::chunks::ChunkAssembler` as the session feeds them (metadata map, codec, payload,
//! checksum verdict). The reassembled message's size and SHA-256 are checked against the `sha2` crate over the
//! original bytes.

use pulsar_dissect_engine::analysis::{Ident, TO_CLIENT};
use pulsar_dissect_engine::budget::MemoryBudget;
use pulsar_dissect_engine::model::Finding;
use pulsar_dissect_engine::protocols::pulsar::chunks::{Chunk, ChunkAssembler, ChunkMetadata, ChunkSource};
use pulsar_dissect_engine::protocols::pulsar::decode;
use pulsar_dissect_engine::protocols::pulsar::payload::Checksum;
use pulsar_dissect_engine::value::{Map, Value};

mod pulsar_support;

use pulsar_support::*;
use sha2::Digest;

const UUID: &str = "standalone-0-7-42";

fn to_broker() -> ChunkSource {
    ChunkSource { direction: "to_broker".into(), actor: Ident::Int(7) }
}

fn to_client() -> ChunkSource {
    ChunkSource { direction: TO_CLIENT.into(), actor: Ident::Int(3) }
}

fn assembler() -> ChunkAssembler {
    ChunkAssembler::new(MIB, 100, None, Some(false), 10, 60.0)
}

fn sha_hex(data: &[u8]) -> String {
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// The metadata of chunk `id` of `n` of message `uuid` (producer "p"), `total` bytes in all, and `more`.
fn chunk_metadata(uuid: &str, id: i64, n: i64, total: usize, more: &[(&str, PV)]) -> prost_reflect::DynamicMessage {
    let mut fields = vec![
        ("uuid", st(uuid)),
        ("num_chunks_from_msg", int(n)),
        ("total_chunk_msg_size", int(total as i64)),
        ("chunk_id", int(id)),
    ];
    fields.extend(more.iter().cloned());
    metadata(&fields)
}

/// The frames of `data` cut into chunks of `size` bytes (the message is `data`, already compressed if it is).
fn chunk_frames(uuid: &str, data: &[u8], size: usize, to_client: bool, more: &[(&str, PV)]) -> Vec<Vec<u8>> {
    let pieces: Vec<&[u8]> = data.chunks(size).collect();
    let n = pieces.len() as i64;
    let command = if to_client { message_command(&[]) } else { send_command() };
    pieces
        .iter()
        .enumerate()
        .map(|(i, p)| {
            payload_frame(&command, None, true, &encode(&chunk_metadata(uuid, i as i64, n, data.len(), more)), p)
        })
        .collect()
}

/// Decode `frame` (frame number `index`, `missing` bytes lost) and feed its chunk to `a` as the session does.
fn feed(
    a: &mut ChunkAssembler,
    source: &ChunkSource,
    index: u64,
    frame: &[u8],
    missing: usize,
    time: f64,
    findings: &mut Vec<Finding>,
) -> Option<Map> {
    let d = decode(frame, missing, MIB, false);
    let section = d.payload().expect("a payload section");
    let empty = Map::new();
    let md = section.metadata.as_ref().and_then(Value::as_map).unwrap_or(&empty);
    let payload = section.messages.first().and_then(|m| m.get("payload")).and_then(Value::as_bytes);
    let chunk = Chunk {
        frame: index,
        metadata: ChunkMetadata::new(md),
        compression: section.compression,
        payload,
        time: Some(time),
        bad_checksum: section.checksum == Checksum::Invalid,
    };
    a.add(source, &chunk, findings)
}

/// Feed every frame in order (frame numbers from 1, a second apart); the results and the findings.
fn feed_all(a: &mut ChunkAssembler, source: &ChunkSource, frames: &[Vec<u8>]) -> (Vec<Option<Map>>, Vec<Finding>) {
    let mut findings = Vec::new();
    let results =
        frames.iter().enumerate().map(|(i, f)| feed(a, source, i as u64 + 1, f, 0, i as f64, &mut findings)).collect();
    (results, findings)
}

fn whole(uuid: &str, data: &[u8], frames: &[u64]) -> Map {
    let Value::Map(m) = map(vec![
        ("uuid", s(uuid)),
        ("payload_size", Value::Int(data.len() as i64)),
        ("payload_sha256", s(&sha_hex(data))),
        ("chunks", Value::List(frames.iter().map(|&f| Value::Int(f as i64)).collect())),
    ]) else {
        unreachable!()
    };
    m
}

fn finding_ids(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.id.as_str()).collect()
}

fn fparam<'f>(findings: &'f [Finding], id: &str, key: &str) -> Option<&'f Value> {
    let f = findings.iter().find(|f| f.id.as_str() == id)?;
    f.params.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

fn message_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

// ------------------------------------------------------------------------------------------ towards the broker

#[test]
fn chunks_sent_in_order_reassemble_to_the_original_bytes() {
    let data = message_bytes(1000);
    let frames = chunk_frames(UUID, &data, 300, false, &[]);
    assert_eq!(frames.len(), 4);
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_broker(), &frames);
    assert!(findings.is_empty(), "{findings:?}");
    assert!(results[..3].iter().all(Option::is_none));
    assert_eq!(results[3], Some(whole(UUID, &data, &[1, 2, 3, 4])));
}

#[test]
fn any_chunk_size_gives_the_same_message() {
    let data = message_bytes(777);
    for size in [1, 2, 100, 388, 389, 776, 777] {
        let frames = chunk_frames(UUID, &data, size, false, &[]);
        let mut a = assembler();
        let (results, findings) = feed_all(&mut a, &to_broker(), &frames);
        assert!(findings.is_empty(), "{size}: {findings:?}");
        let last = results.last().cloned().flatten().expect("the message");
        let sha = last.iter().find(|(k, _)| k.as_str() == "payload_sha256").map(|(_, v)| v.clone());
        assert_eq!(sha, Some(s(&sha_hex(&data))), "chunks of {size}");
    }
}

#[test]
fn a_compressed_chunked_message_is_decompressed_once_whole() {
    let data: Vec<u8> = (0..3000u32).flat_map(|i| format!("record {i};").into_bytes()).collect();
    for codec in [LZ4, ZLIB, ZSTD, SNAPPY] {
        let compressed = compress(codec, &data);
        let more = [("compression", int(codec)), ("uncompressed_size", uint(data.len() as u64))];
        let frames = chunk_frames(UUID, &compressed, compressed.len() / 3 + 1, false, &more);
        assert_eq!(frames.len(), 3, "codec {codec}");
        let mut a = assembler();
        let mut findings = Vec::new();
        let mut last = None;
        for (i, f) in frames.iter().enumerate() {
            last = feed(&mut a, &to_broker(), i as u64 + 1, f, 0, 0.0, &mut findings);
            if i + 1 < frames.len() {
                // the compressed chunks are held until the last one
                assert!(a.kept_bytes() > 0, "codec {codec}");
            }
        }
        assert!(findings.is_empty(), "codec {codec}: {findings:?}");
        assert_eq!(last, Some(whole(UUID, &data, &[1, 2, 3])), "codec {codec}");
        assert_eq!(a.kept_bytes(), 0, "codec {codec}");
    }
}

#[test]
fn a_compressed_message_larger_than_the_limit_cannot_be_reassembled() {
    let data = message_bytes(5000);
    let compressed = compress(LZ4, &data);
    let more = [("compression", int(LZ4)), ("uncompressed_size", uint(data.len() as u64))];
    let frames = chunk_frames(UUID, &compressed, compressed.len() / 2 + 1, false, &more);
    // a limit below the message's total size: its chunks are not kept
    let mut a = ChunkAssembler::new(100, 100, None, Some(false), 10, 60.0);
    let (results, findings) = feed_all(&mut a, &to_broker(), &frames);
    assert_eq!(finding_ids(&findings), ["chunk.too_large"]);
    let last = results.last().cloned().flatten().expect("a result");
    assert_eq!(last.iter().find(|(k, _)| k.as_str() == "payload_size").map(|(_, v)| v), Some(&Value::Null));
}

#[test]
fn a_chunk_sent_twice_is_a_duplicate() {
    let data = message_bytes(100);
    let frames = chunk_frames(UUID, &data, 40, false, &[]);
    let replayed = vec![frames[0].clone(), frames[1].clone(), frames[1].clone(), frames[2].clone()];
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_broker(), &replayed);
    assert_eq!(finding_ids(&findings), ["chunk.duplicate"]);
    assert_eq!(fparam(&findings, "chunk.duplicate", "chunk_id"), Some(&Value::Int(1)));
    assert_eq!(results[3], Some(whole(UUID, &data, &[1, 2, 4])));
}

#[test]
fn a_whole_message_sent_again_is_a_duplicate_of_its_first_chunk() {
    let data = message_bytes(100);
    let frames = chunk_frames(UUID, &data, 60, false, &[]);
    let mut a = assembler();
    let (_, findings) = feed_all(&mut a, &to_broker(), &[frames[0].clone(), frames[1].clone(), frames[0].clone()]);
    assert_eq!(finding_ids(&findings), ["chunk.duplicate"]);
    assert_eq!(fparam(&findings, "chunk.duplicate", "chunk_id"), Some(&Value::Int(0)));
}

#[test]
fn a_chunk_without_its_start_is_an_orphan() {
    let data = message_bytes(100);
    let frames = chunk_frames(UUID, &data, 40, false, &[]);
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_broker(), &frames[1..]);
    assert!(results.iter().all(Option::is_none));
    assert_eq!(finding_ids(&findings), ["chunk.orphan", "chunk.orphan"]);
    assert_eq!(fparam(&findings, "chunk.orphan", "chunk_id"), Some(&Value::Int(1)));
    assert_eq!(fparam(&findings, "chunk.orphan", "num_chunks"), Some(&Value::Int(3)));
    assert_eq!(fparam(&findings, "chunk.orphan", "uuid"), Some(&s(UUID)));
}

#[test]
fn a_skipped_chunk_breaks_the_message() {
    let data = message_bytes(100);
    let frames = chunk_frames(UUID, &data, 30, false, &[]);
    let mut a = assembler();
    let (results, findings) =
        feed_all(&mut a, &to_broker(), &[frames[0].clone(), frames[2].clone(), frames[3].clone()]);
    assert!(results.iter().all(Option::is_none));
    // once: the message is known broken, its later chunks say nothing more
    assert_eq!(finding_ids(&findings), ["chunk.missing"]);
    assert_eq!(fparam(&findings, "chunk.missing", "chunk_id"), Some(&Value::Int(2)));
    assert_eq!(fparam(&findings, "chunk.missing", "expected"), Some(&Value::Int(1)));
}

#[test]
fn a_producer_starting_over_restarts_the_message() {
    let old = message_bytes(90);
    let new: Vec<u8> = old.iter().map(|b| b ^ 0xff).collect();
    let first = chunk_frames(UUID, &old, 30, false, &[]);
    let second = chunk_frames(UUID, &new, 30, false, &[]);
    let stream = vec![first[0].clone(), first[1].clone(), second[0].clone(), second[1].clone(), second[2].clone()];
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_broker(), &stream);
    assert_eq!(finding_ids(&findings), ["chunk.restarted"]);
    assert_eq!(fparam(&findings, "chunk.restarted", "seen"), Some(&Value::Int(2)));
    assert_eq!(results[4], Some(whole(UUID, &new, &[3, 4, 5])));
}

#[test]
fn a_chunk_lost_to_a_gap_loses_the_message() {
    let data = message_bytes(90);
    let frames = chunk_frames(UUID, &data, 30, false, &[]);
    let mut a = assembler();
    let mut findings = Vec::new();
    feed(&mut a, &to_broker(), 1, &frames[0], 0, 0.0, &mut findings);
    let cut = &frames[1][..frames[1].len() - 10];
    feed(&mut a, &to_broker(), 2, cut, 10, 1.0, &mut findings);
    assert!(a.pending().is_empty(), "a message known lost is not pending");
    let last = feed(&mut a, &to_broker(), 3, &frames[2], 0, 2.0, &mut findings).expect("the end of the message");
    assert_eq!(finding_ids(&findings), ["chunk.lost"]);
    assert_eq!(fparam(&findings, "chunk.lost", "chunk_id"), Some(&Value::Int(1)));
    let get = |k: &str| last.iter().find(|(key, _)| key.as_str() == k).map(|(_, v)| v.clone());
    assert_eq!((get("payload_size"), get("payload_sha256")), (Some(Value::Null), Some(Value::Null)));
    assert_eq!(get("chunks"), Some(Value::List(vec![Value::Int(1), Value::Int(2), Value::Int(3)])));
}

#[test]
fn a_total_size_that_disagrees_with_the_chunks() {
    let data = message_bytes(60);
    let pieces: Vec<&[u8]> = data.chunks(30).collect();
    let frames: Vec<Vec<u8>> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| {
            payload_frame(&send_command(), None, true, &encode(&chunk_metadata(UUID, i as i64, 2, 70, &[])), p)
        })
        .collect();
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_broker(), &frames);
    assert_eq!(finding_ids(&findings), ["chunk.size_mismatch"]);
    assert_eq!(fparam(&findings, "chunk.size_mismatch", "size"), Some(&Value::Int(60)));
    assert_eq!(fparam(&findings, "chunk.size_mismatch", "total"), Some(&Value::Int(70)));
    assert_eq!(results[1], Some(whole(UUID, &data, &[1, 2])), "the bytes are still the message");
}

#[test]
fn interleaved_messages_reassemble_apart() {
    let (x, y) = (message_bytes(50), message_bytes(80));
    let fx = chunk_frames("x", &x, 20, false, &[]);
    let fy = chunk_frames("y", &y, 30, false, &[]);
    let stream = vec![fx[0].clone(), fy[0].clone(), fx[1].clone(), fy[1].clone(), fx[2].clone(), fy[2].clone()];
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_broker(), &stream);
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(results[4], Some(whole("x", &x, &[1, 3, 5])));
    assert_eq!(results[5], Some(whole("y", &y, &[2, 4, 6])));
}

#[test]
fn the_same_uuid_from_two_producer_names_is_two_messages() {
    let (x, y) = (message_bytes(40), message_bytes(60));
    let fx = chunk_frames(UUID, &x, 20, false, &[]);
    let fy: Vec<Vec<u8>> = y
        .chunks(30)
        .enumerate()
        .map(|(i, p)| {
            let md = msg(
                "MessageMetadata",
                &[
                    ("producer_name", st("other")),
                    ("sequence_id", int(1)),
                    ("publish_time", int(1)),
                    ("uuid", st(UUID)),
                    ("num_chunks_from_msg", int(2)),
                    ("total_chunk_msg_size", int(60)),
                    ("chunk_id", int(i as i64)),
                ],
            );
            payload_frame(&send_command(), None, true, &encode(&md), p)
        })
        .collect();
    let mut a = assembler();
    let (results, findings) =
        feed_all(&mut a, &to_broker(), &[fx[0].clone(), fy[0].clone(), fx[1].clone(), fy[1].clone()]);
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(results[2], Some(whole(UUID, &x, &[1, 3])));
    assert_eq!(results[3], Some(whole(UUID, &y, &[2, 4])));
}

#[test]
fn more_messages_in_progress_than_allowed_abandons_the_oldest() {
    let (x, y) = (message_bytes(50), message_bytes(80));
    let fx = chunk_frames("x", &x, 20, false, &[]);
    let fy = chunk_frames("y", &y, 30, false, &[]);
    let mut a = ChunkAssembler::new(MIB, 1, None, Some(false), 10, 60.0);
    let (_, findings) = feed_all(&mut a, &to_broker(), &[fx[0].clone(), fy[0].clone()]);
    assert_eq!(finding_ids(&findings), ["chunk.abandoned"]);
    assert_eq!(fparam(&findings, "chunk.abandoned", "uuid"), Some(&s("x")));
    assert_eq!(fparam(&findings, "chunk.abandoned", "limit"), Some(&Value::Int(1)));
    assert_eq!(a.pending().iter().map(|p| p.uuid.clone()).collect::<Vec<_>>(), [s("y")]);
}

#[test]
fn pending_shows_what_is_in_progress() {
    let data = message_bytes(90);
    let frames = chunk_frames(UUID, &data, 30, false, &[]);
    let mut a = assembler();
    feed_all(&mut a, &to_broker(), &frames[..2]);
    let pending = a.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!((pending[0].uuid.clone(), pending[0].seen, pending[0].num_chunks), (s(UUID), 2, 3));
    assert_eq!(pending[0].frames, [1, 2]);
}

// ------------------------------------------------------------------------------------------ towards the client

#[test]
fn chunks_delivered_in_order_reassemble() {
    let data = message_bytes(500);
    let frames = chunk_frames(UUID, &data, 200, true, &[]);
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_client(), &frames);
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(results[2], Some(whole(UUID, &data, &[1, 2, 3])));
}

#[test]
fn a_delivered_chunk_with_a_bad_checksum_is_dropped_by_the_client() {
    let data = message_bytes(90);
    let mut frames = chunk_frames(UUID, &data, 30, true, &[]);
    let last = frames[1].len() - 1;
    frames[1][last] ^= 1;
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_client(), &frames);
    assert_eq!(results, [None, None, None]);
    assert_eq!(finding_ids(&findings), ["chunk.dropped_by_client", "chunk.dropped_by_client"]);
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "reason"), Some(&s("checksum")));
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "chunk_id"), Some(&Value::Int(1)));
    // the client discarded the frame, not the message: chunk 2 then comes after chunk 0, out of order
    let after = &findings[1..];
    assert_eq!(fparam(after, "chunk.dropped_by_client", "reason"), Some(&s("out_of_order")));
    assert_eq!(fparam(after, "chunk.dropped_by_client", "chunk_id"), Some(&Value::Int(2)));
    assert_eq!(fparam(after, "chunk.dropped_by_client", "expected"), Some(&Value::Int(1)));
    assert_eq!(fparam(after, "chunk.dropped_by_client", "frames"), Some(&Value::List(vec![Value::Int(1)])));
}

#[test]
fn a_delivered_chunk_out_of_order_drops_the_message() {
    let data = message_bytes(90);
    let frames = chunk_frames(UUID, &data, 30, true, &[]);
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_client(), &[frames[0].clone(), frames[2].clone()]);
    assert_eq!(results, [None, None]);
    assert_eq!(finding_ids(&findings), ["chunk.dropped_by_client"]);
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "reason"), Some(&s("out_of_order")));
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "expected"), Some(&Value::Int(1)));
    assert!(a.pending().is_empty());
}

#[test]
fn a_single_chunk_message_is_no_chunk_to_the_client() {
    let data = message_bytes(30);
    let frames = chunk_frames(UUID, &data, 30, true, &[]);
    assert_eq!(frames.len(), 1);
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_client(), &frames);
    assert_eq!(results, [None]);
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn a_full_client_cache_drops_its_oldest_message() {
    let (x, y) = (message_bytes(40), message_bytes(40));
    let fx = chunk_frames("x", &x, 20, true, &[]);
    let fy = chunk_frames("y", &y, 20, true, &[]);
    let mut a = ChunkAssembler::new(MIB, 100, None, Some(false), 1, 60.0);
    let (results, findings) = feed_all(&mut a, &to_client(), &[fx[0].clone(), fy[0].clone(), fy[1].clone()]);
    assert_eq!(finding_ids(&findings), ["chunk.dropped_by_client"]);
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "reason"), Some(&s("cache_full")));
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "uuid"), Some(&s("x")));
    assert_eq!(results[2], Some(whole("y", &y, &[2, 3])));
}

#[test]
fn a_delivered_chunk_with_nothing_cached_is_dropped_from_the_start_of_a_connection() {
    let data = message_bytes(60);
    let frames = chunk_frames(UUID, &data, 30, true, &[]);
    let mut a = assembler(); // mid_stream: Some(false), the connection was seen from its start
    let (_, findings) = feed_all(&mut a, &to_client(), &frames[1..]);
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "reason"), Some(&s("uncached")));
    // joined mid-stream, chunk 0 may have come before the capture: an orphan
    let mut a = ChunkAssembler::new(MIB, 100, None, Some(true), 10, 60.0);
    let (_, findings) = feed_all(&mut a, &to_client(), &frames[1..]);
    assert_eq!(finding_ids(&findings), ["chunk.orphan"]);
}

#[test]
fn the_clients_timer_expires_an_idle_message() {
    // expiry every 10 s from the consumer's first chunk (t=0): at 20 s the message idle since 0 is older than 10
    let (x, y) = (message_bytes(40), message_bytes(40));
    let fx = chunk_frames("x", &x, 20, true, &[]);
    let fy = chunk_frames("y", &y, 20, true, &[]);
    let mut a = ChunkAssembler::new(MIB, 100, None, Some(false), 10, 10.0);
    let mut findings = Vec::new();
    feed(&mut a, &to_client(), 1, &fx[0], 0, 0.0, &mut findings);
    feed(&mut a, &to_client(), 2, &fy[0], 0, 25.0, &mut findings);
    assert_eq!(finding_ids(&findings), ["chunk.dropped_by_client"]);
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "reason"), Some(&s("expired")));
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "uuid"), Some(&s("x")));
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "idle_s"), Some(&Value::Float(20.0)));
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "expire_s"), Some(&Value::Float(10.0)));
    // x's next chunk finds nothing cached: dropped, and said where
    findings.clear();
    feed(&mut a, &to_client(), 3, &fx[1], 0, 26.0, &mut findings);
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "reason"), Some(&s("uncached")));
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "dropped_at"), Some(&Value::Int(2)));
}

#[test]
fn corrupt_compressed_chunks_are_dropped_by_the_client_too() {
    // the client's codec fails on the reassembled message as well: it never gets it
    let bogus = b"not a zstd frame at all, split in two".to_vec();
    let more = [("compression", int(ZSTD)), ("uncompressed_size", uint(100))];
    let frames = chunk_frames(UUID, &bogus, 20, true, &more);
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_client(), &frames);
    assert_eq!(results, [None, None]);
    assert_eq!(finding_ids(&findings), ["payload.decompression", "chunk.dropped_by_client"]);
    assert_eq!(fparam(&findings, "chunk.dropped_by_client", "reason"), Some(&s("decompression")));
}

#[test]
fn a_delivered_chunk_twice_drops_the_message() {
    // the C++ consumer drops the whole message on a chunk it has already seen
    let data = message_bytes(90);
    let frames = chunk_frames(UUID, &data, 30, true, &[]);
    let mut a = assembler();
    let (results, findings) =
        feed_all(&mut a, &to_client(), &[frames[0].clone(), frames[1].clone(), frames[1].clone(), frames[2].clone()]);
    assert_eq!(results, [None, None, None, None]);
    assert_eq!(finding_ids(&findings), ["chunk.duplicate", "chunk.dropped_by_client", "chunk.dropped_by_client"]);
    assert_eq!(fparam(&findings[1..], "chunk.dropped_by_client", "reason"), Some(&s("duplicate")));
    // its last chunk then finds nothing cached
    assert_eq!(findings[2].params.iter().find(|(k, _)| k.as_str() == "reason").map(|(_, v)| v), Some(&s("uncached")));
}

#[test]
fn a_batch_with_chunk_fields_is_no_chunk_to_the_client() {
    let data = message_bytes(60);
    let frames = chunk_frames(UUID, &data, 30, true, &[("num_messages_in_batch", int(1))]);
    let mut a = assembler();
    let (results, findings) = feed_all(&mut a, &to_client(), &frames);
    assert_eq!(results, [None, None]);
    assert!(findings.is_empty(), "{findings:?}");
    assert!(a.pending().is_empty());
}

#[test]
fn compressed_chunks_held_beyond_the_byte_cap_are_abandoned() {
    let mut rng = Rng(77);
    let data: Vec<u8> = (0..4000).map(|_| rng.next() as u8).collect(); // incompressible
    let compressed = compress(SNAPPY, &data);
    let more = [("compression", int(SNAPPY)), ("uncompressed_size", uint(data.len() as u64))];
    let frames = chunk_frames(UUID, &compressed, 1000, false, &more);
    assert!(frames.len() >= 3);
    // at most 1500 bytes of compressed chunks held: the second chunk passes it
    let mut a = ChunkAssembler::new(MIB, 100, Some(1500), Some(false), 10, 60.0);
    let (results, findings) = feed_all(&mut a, &to_broker(), &frames);
    assert!(results.iter().all(Option::is_none));
    assert_eq!(finding_ids(&findings), ["chunk.abandoned"]);
    assert_eq!(fparam(&findings, "chunk.abandoned", "bytes"), Some(&Value::Int(1500)));
    assert_eq!(fparam(&findings, "chunk.abandoned", "seen"), Some(&Value::Int(2)));
    assert_eq!(a.kept_bytes(), 0);
}

#[test]
fn chunks_held_over_every_connection_share_one_cap() {
    // two connections (two assemblers sharing one count), each under its own cap: the chunk that passes the cap
    // of every connection makes its own connection give up its oldest message; a connection forgotten gives
    // its bytes back
    let mut rng = Rng(78);
    let data: Vec<u8> = (0..4000).map(|_| rng.next() as u8).collect(); // incompressible
    let compressed = compress(SNAPPY, &data);
    let more = [("compression", int(SNAPPY)), ("uncompressed_size", uint(data.len() as u64))];
    let frames = chunk_frames(UUID, &compressed, 1000, false, &more);
    let held = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let mut first = ChunkAssembler::new(MIB, 100, None, Some(false), 10, 60.0).sharing(held.clone(), 3500);
    let mut second = ChunkAssembler::new(MIB, 100, None, Some(false), 10, 60.0).sharing(held.clone(), 3500);
    let mut findings = Vec::new();
    feed(&mut first, &to_broker(), 1, &frames[0], 0, 0.0, &mut findings);
    feed(&mut first, &to_broker(), 2, &frames[1], 0, 1.0, &mut findings);
    assert_eq!((held.get(), first.kept_bytes()), (2000, 2000));
    feed(&mut second, &to_broker(), 3, &frames[0], 0, 2.0, &mut findings);
    assert!(findings.is_empty(), "{findings:?}");
    feed(&mut second, &to_broker(), 4, &frames[1], 0, 3.0, &mut findings);
    assert_eq!(finding_ids(&findings), ["chunk.abandoned"]);
    assert_eq!(fparam(&findings, "chunk.abandoned", "total_bytes"), Some(&Value::Int(3500)));
    assert_eq!((second.kept_bytes(), first.kept_bytes(), held.get()), (0, 2000, 2000));
    drop(first);
    assert_eq!(held.get(), 0);
}

#[test]
fn chunks_held_count_in_the_memory_budget_the_run_shares() {
    // the budget (3,500 bytes) shared with another holder (the reassembly's out-of-order bytes, say: 1,000),
    // each assembler under its own caps: the chunk that passes the budget makes its connection give up its
    // oldest message, naming the budget; what an assembler lets go of is given back
    let mut rng = Rng(79);
    let data: Vec<u8> = (0..4000).map(|_| rng.next() as u8).collect(); // incompressible
    let compressed = compress(SNAPPY, &data);
    let more = [("compression", int(SNAPPY)), ("uncompressed_size", uint(data.len() as u64))];
    let frames = chunk_frames(UUID, &compressed, 1000, false, &more);
    let budget = MemoryBudget::new(3500);
    let mut other = budget.reservation();
    assert!(other.try_grow(1000));
    let mut first = ChunkAssembler::new(MIB, 100, None, Some(false), 10, 60.0).budgeted(&budget);
    let mut second = ChunkAssembler::new(MIB, 100, None, Some(false), 10, 60.0).budgeted(&budget);
    let mut findings = Vec::new();
    feed(&mut first, &to_broker(), 1, &frames[0], 0, 0.0, &mut findings);
    feed(&mut first, &to_broker(), 2, &frames[1], 0, 1.0, &mut findings);
    assert_eq!((budget.held(), first.kept_bytes()), (3000, 2000));
    assert!(findings.is_empty(), "{findings:?}");
    // 4,000 held: the second connection, whose chunk passed the budget, gives up its message
    feed(&mut second, &to_broker(), 3, &frames[0], 0, 2.0, &mut findings);
    assert_eq!(finding_ids(&findings), ["chunk.abandoned"]);
    assert_eq!(fparam(&findings, "chunk.abandoned", "memory_budget"), Some(&Value::Int(3500)));
    assert_eq!((second.kept_bytes(), first.kept_bytes(), budget.held()), (0, 2000, 3000));
    drop(other);
    drop(first);
    assert_eq!(budget.held(), 0);
}

#[test]
fn the_client_model_leaves_the_send_side_to_its_own_rules() {
    // the strictest client model: seen from its start, a cache of one message, a one-second expiry; towards the
    // broker none of it applies: a replayed chunk is a duplicate, a second message in progress drops nothing,
    // a long silence expires nothing, a chunk without its start is an orphan, and the message reassembles
    let (x, y) = (message_bytes(90), message_bytes(50));
    let fx = chunk_frames("x", &x, 30, false, &[]);
    let fy = chunk_frames("y", &y, 25, false, &[]);
    let mut a = ChunkAssembler::new(MIB, 100, None, Some(false), 1, 1.0);
    let mut findings = Vec::new();
    let fed = [(&fx[0], 0.0), (&fx[0], 1.0), (&fy[0], 2.0), (&fx[1], 100.0), (&fx[2], 200.0)];
    let results: Vec<Option<Map>> = fed
        .iter()
        .enumerate()
        .map(|(i, (frame, time))| feed(&mut a, &to_broker(), i as u64 + 1, frame, 0, *time, &mut findings))
        .collect();
    assert_eq!(finding_ids(&findings), ["chunk.duplicate"]);
    assert_eq!(fparam(&findings, "chunk.duplicate", "chunk_id"), Some(&Value::Int(0)));
    assert_eq!(results[..4], [None, None, None, None]);
    assert_eq!(results[4], Some(whole("x", &x, &[1, 4, 5])));
    // y is still in progress on the send side (the client's cache of one would have dropped it)
    let pending: Vec<(Value, Vec<u64>)> = a.pending().into_iter().map(|p| (p.uuid, p.frames)).collect();
    assert_eq!(pending, [(s("y"), vec![3])]);
    findings.clear();
    let fz = chunk_frames("z", &message_bytes(40), 20, false, &[]);
    feed(&mut a, &to_broker(), 6, &fz[1], 0, 300.0, &mut findings);
    assert_eq!(finding_ids(&findings), ["chunk.orphan"]);
}
