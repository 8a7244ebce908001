//! Pulsar's framing (`PulsarFraming`, the splitter's `Framing`): where a frame ends (TOTAL_SIZE + 4), sizes that
//! disagree, resynchronisation after lost bytes, the head of a frame above the size limit; and the generic
//! splitter driven by it over streams of frames encoded by prost-reflect.

use pulsar_dissect_engine::protocols::pulsar::decode;
use pulsar_dissect_engine::protocols::pulsar::framing::PulsarFraming;
use pulsar_dissect_engine::protocols::pulsar::payload::Checksum;
use pulsar_dissect_engine::transport::splitter::{Framing, Head, PduLength, Split, Splitter};
use pulsar_dissect_engine::value::Value;

mod pulsar_support;

use pulsar_support::*;

const MAX: usize = 5 << 20;

fn framing() -> PulsarFraming {
    PulsarFraming::default()
}

fn ping() -> Vec<u8> {
    simple_frame(&base_command("PING", &sub_command("PING", &[])))
}

fn flow() -> Vec<u8> {
    simple_frame(&base_command("FLOW", &sub_command("FLOW", &[("consumer_id", int(4)), ("messagePermits", int(1000))])))
}

fn send() -> Vec<u8> {
    send_frame(&metadata(&[("partition_key", st("k"))]), b"some payload bytes")
}

fn length(buf: &[u8]) -> Result<usize, (String, Vec<(String, Value)>)> {
    match framing().pdu_length(buf, MAX) {
        PduLength::Complete(n) => Ok(n),
        PduLength::NeedMore => Err(("NEED_MORE".into(), vec![])),
        PduLength::Bad(bad) => {
            Err((bad.kind, bad.details.into_iter().map(|(k, v)| (k.as_str().to_owned(), v)).collect()))
        }
    }
}

fn bad_kind(buf: &[u8]) -> String {
    length(buf).expect_err("a bad length").0
}

/// A frame with its TOTAL_SIZE replaced.
fn with_total(mut frame: Vec<u8>, total: u32) -> Vec<u8> {
    frame[..4].copy_from_slice(&total.to_be_bytes());
    frame
}

// ---------------------------------------------------------------------------------------------- pdu_length

#[test]
fn a_frame_is_total_size_plus_four() {
    assert_eq!(length(&ping()), Ok(13));
    assert_eq!(length(&flow()), Ok(flow().len()));
    let s = send();
    assert_eq!(length(&s), Ok(s.len()));
    // the length is known from the first four bytes
    assert_eq!(length(&s[..4]), Ok(s.len()));
}

#[test]
fn fewer_than_four_bytes_need_more() {
    for n in 0..4 {
        assert_eq!(bad_kind(&ping()[..n]), "NEED_MORE");
    }
}

#[test]
fn a_total_size_above_the_limit_is_oversized() {
    let big = with_total(send(), MAX as u32 + 1);
    let (kind, details) = length(&big).unwrap_err();
    assert_eq!(kind, "OVERSIZED");
    assert_eq!(details, [("total_size".to_owned(), Value::Int(MAX as i64 + 1))]);
    // exactly the limit is fine
    assert_eq!(length(&with_total(send(), MAX as u32)), Ok(MAX + 4));
}

#[test]
fn a_total_size_below_four_is_bad() {
    for total in 0..4 {
        assert_eq!(bad_kind(&with_total(ping(), total)), "BAD_SIZE", "{total}");
    }
}

#[test]
fn a_cmd_size_larger_than_total_size_allows_is_bad() {
    let frame = with_total(ping(), 8); // CMD_SIZE 5 needs TOTAL_SIZE 9 at least
    let (kind, details) = length(&frame).unwrap_err();
    assert_eq!(kind, "BAD_SIZE");
    assert_eq!(details, [("total_size".to_owned(), Value::Int(8)), ("cmd_size".to_owned(), Value::Int(5))]);
}

#[test]
fn sizes_of_a_command_without_payload_must_agree_exactly() {
    // a PING with TOTAL_SIZE one more than 4 + CMD_SIZE: the extra byte would be swallowed
    assert_eq!(bad_kind(&with_total(ping(), 10)), "BAD_SIZE");
    assert_eq!(bad_kind(&with_total(flow(), flow().len() as u32 - 4 + 100)), "BAD_SIZE");
}

#[test]
fn sizes_of_an_unknown_type_must_agree_too() {
    let frame = with_total(simple_frame(&[0x08, 0x64]), 10); // type 100, unknown
    assert_eq!(bad_kind(&frame), "BAD_SIZE");
    assert_eq!(length(&simple_frame(&[0x08, 0x64])), Ok(10));
}

#[test]
fn send_and_message_carry_bytes_after_the_command() {
    let m = payload_frame(&message_command(&[]), None, true, &encode(&metadata(&[])), b"x");
    assert_eq!(length(&m), Ok(m.len()));
    let s = send();
    assert!(u32::from_be_bytes(s[..4].try_into().unwrap()) > u32::from_be_bytes(s[4..8].try_into().unwrap()) + 4);
    assert_eq!(length(&s), Ok(s.len()));
}

#[test]
fn a_command_not_starting_with_its_type_tag_is_not_checked_for_size_agreement() {
    // the type is only read where encoders put it (08 first): other shapes keep TOTAL_SIZE
    let frame = with_total(simple_frame(&[0x92, 0x01, 0x00, 0x08, 0x12]), 20);
    assert_eq!(length(&frame), Ok(24));
}

// ------------------------------------------------------------------------------------------------ resync

fn junk(n: usize) -> Vec<u8> {
    // no 0x08 in it, so no candidate starts inside
    (0..n).map(|i| (0x30 + (i % 7)) as u8).collect()
}

#[test]
fn resync_finds_a_frame_after_junk() {
    for frame in [ping(), flow(), send()] {
        let mut buf = junk(37);
        buf.extend(&frame);
        assert_eq!(framing().resync(&buf, MAX), (true, 37));
        assert!(
            framing().looks_like_frame(
                &buf,
                37,
                (frame.len() - 4) as u32,
                u32::from_be_bytes(frame[4..8].try_into().unwrap()),
                buf.len()
            ) == Some(true)
        );
    }
}

#[test]
fn resync_without_any_candidate_keeps_the_last_eight_bytes() {
    let buf = junk(100);
    assert_eq!(framing().resync(&buf, MAX), (false, 92));
}

#[test]
fn resync_skips_a_candidate_of_an_unknown_type() {
    let mut buf = simple_frame(&[0x08, 0x64]); // type 100: well-formed sizes, unknown type
    let at = buf.len();
    buf.extend(ping());
    assert_eq!(framing().resync(&buf, MAX), (true, at));
}

#[test]
fn resync_skips_a_candidate_whose_sizes_disagree() {
    let mut buf = with_total(ping(), 12);
    buf.extend(junk(5));
    let at = buf.len();
    buf.extend(flow());
    assert_eq!(framing().resync(&buf, MAX), (true, at));
}

#[test]
fn resync_skips_a_candidate_missing_required_fields() {
    // FLOW without messagePermits: the shape is right, the command is not whole
    let mut buf = simple_frame(&base_command("FLOW", &sub_command("FLOW", &[("consumer_id", int(4))])));
    let at = buf.len();
    buf.extend(flow());
    assert_eq!(framing().resync(&buf, MAX), (true, at));
}

#[test]
fn resync_skips_a_candidate_above_the_limit() {
    let mut buf = with_total(send(), 1000);
    buf.truncate(40);
    let at = buf.len();
    buf.extend(ping());
    assert_eq!(framing().resync(&buf, 500), (true, at));
}

#[test]
fn resync_skips_a_send_whose_metadata_size_cannot_fit() {
    // no magic after the command and a METADATA_SIZE larger than the frame
    let mut bogus = frame_with(&send_command(), &[0, 0, 1, 0, 1, 2, 3]);
    let at = bogus.len();
    bogus.extend(ping());
    assert_eq!(framing().resync(&bogus, MAX), (true, at));
}

#[test]
fn resync_waits_at_a_frame_that_is_not_all_there() {
    let s = send();
    let mut buf = junk(20);
    buf.extend(&s[..12]); // the sizes and a few command bytes
    let (found, at, until) = framing().resync_until(&buf, MAX);
    assert!(!found);
    assert_eq!(at, 20);
    assert!(until > 12 && until <= s.len(), "wait for more of the candidate: {until}");
    assert_eq!(framing().resync(&buf, MAX), (false, 20));
    assert_eq!(
        framing().looks_like_frame(&buf, 20, (s.len() - 4) as u32, (send_command().len()) as u32, buf.len()),
        None
    );
}

#[test]
fn command_complete_and_prefix_plausible() {
    let f = framing();
    let send_type = type_number("SEND") as u32;
    let whole = encode(&sub_command("SEND", &[("producer_id", int(7)), ("sequence_id", int(42))]));
    let partial = encode(&sub_command("SEND", &[("producer_id", int(7))]));
    assert!(f.command_complete(send_type, &whole, false));
    assert!(!f.command_complete(send_type, &partial, false), "sequence_id is required");
    assert!(f.command_complete(send_type, &send_command(), true));
    assert!(!f.command_complete(
        send_type,
        &base_command("SEND", &sub_command("SEND", &[("producer_id", int(7))])),
        true
    ));
    // a prefix cut inside a field is plausible; a field number CommandSend does not have is not
    assert!(f.prefix_plausible(send_type, &whole[..whole.len() - 1]));
    assert!(!f.prefix_plausible(send_type, &[0x08, 0x07, 0xf8, 0x06, 0x01])); // field 111
    assert!(!f.prefix_plausible(send_type, &[0x0a, 0x01, 0x00])); // producer_id as bytes
}

// ------------------------------------------------------------------------------------------ oversized head

fn head(buf: &[u8]) -> Option<(usize, usize)> {
    match framing().oversized_head(buf) {
        Head::Found { head, length } => Some((head, length)),
        Head::NeedMore => None,
        Head::Skip => Some((usize::MAX, usize::MAX)),
    }
}

const SKIP: Option<(usize, usize)> = Some((usize::MAX, usize::MAX));

#[test]
fn the_head_of_a_send_ends_with_its_metadata() {
    let md = encode(&metadata(&[("partition_key", st("k"))]));
    let frame = send();
    let cmd_end = 8 + send_command().len();
    // magic + checksum (6), METADATA_SIZE (4), the metadata
    assert_eq!(head(&frame), Some((cmd_end + 6 + 4 + md.len(), frame.len())));
}

#[test]
fn the_head_of_a_message_passes_broker_entry_metadata_and_checksum() {
    let bem = encode(&msg("BrokerEntryMetadata", &[("index", int(5))]));
    let md = encode(&metadata(&[]));
    let cmd = message_command(&[]);
    let frame = payload_frame(&cmd, Some(&bem), true, &md, &[0u8; 100]);
    let cmd_end = 8 + cmd.len();
    assert_eq!(head(&frame), Some((cmd_end + 6 + bem.len() + 6 + 4 + md.len(), frame.len())));
}

#[test]
fn the_head_without_a_checksum() {
    let md = encode(&metadata(&[]));
    let frame = payload_frame(&send_command(), None, false, &md, b"xyz");
    assert_eq!(head(&frame), Some((8 + send_command().len() + 4 + md.len(), frame.len())));
}

#[test]
fn the_head_needs_the_bytes_up_to_the_metadata_end() {
    let frame = send();
    let (end, _) = head(&frame).unwrap();
    for n in 0..end {
        assert_eq!(head(&frame[..n]), None, "{n} bytes");
    }
    assert_eq!(head(&frame[..end]), Some((end, frame.len())));
}

#[test]
fn a_head_whose_metadata_is_too_large_is_the_command_alone() {
    // METADATA_SIZE of 100 000 bytes, beyond the 64 KiB a head may hold
    let mut section = vec![0x0e, 0x01, 0, 0, 0, 0];
    section.extend(100_000u32.to_be_bytes());
    let mut frame = frame_with(&send_command(), &section);
    frame = with_total(frame, 10 << 20);
    assert_eq!(head(&frame), Some((8 + send_command().len(), (10 << 20) + 4)));
}

#[test]
fn only_send_and_message_have_heads() {
    assert_eq!(head(&ping()), SKIP);
    assert_eq!(head(&flow()), SKIP);
    let mut not_a_type_tag = send();
    not_a_type_tag[8] = 0x10;
    assert_eq!(head(&not_a_type_tag), SKIP);
}

#[test]
fn a_head_with_impossible_sizes_or_a_broken_command_is_skipped() {
    let s = send();
    assert_eq!(head(&with_total(s.clone(), 6)), SKIP, "CMD_SIZE beyond TOTAL_SIZE");
    let broken = frame_with(&base_command("SEND", &sub_command("SEND", &[("producer_id", int(7))])), &[0; 10]);
    assert_eq!(head(&broken), SKIP, "a CommandSend without its sequence_id");
}

#[test]
fn the_framings_constants() {
    let f = framing();
    assert_eq!(f.min_pdu(), 8);
    assert_eq!(f.foreign_kind(), "NOT_PULSAR");
    assert!(f.reads_oversized_heads());
}

// ------------------------------------------------------------------------------------------- the splitter

fn split(synced: bool, max: usize, chunks: &[&[u8]]) -> Vec<Split> {
    let f = framing();
    let mut sp = Splitter::new(synced, max, 0);
    let mut out = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        sp.feed(&f, c, i as f64, i as i64, &mut out);
    }
    sp.finish(&f, chunks.len() as f64, chunks.len() as i64, &mut out);
    out
}

fn pdus(out: &[Split]) -> Vec<(Vec<u8>, i64)> {
    out.iter().filter_map(|s| if let Split::Pdu(p) = s { Some((p.data.clone(), p.offset)) } else { None }).collect()
}

fn notes(out: &[Split]) -> Vec<(String, i64, i64)> {
    out.iter()
        .filter_map(|s| if let Split::Note(n) = s { Some((n.kind.clone(), n.offset, n.length)) } else { None })
        .collect()
}

#[test]
fn a_stream_split_byte_by_byte_gives_its_frames() {
    let frames = [ping(), send(), flow()];
    let stream: Vec<u8> = frames.concat();
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    let out = split(true, MAX, &bytes);
    let mut offset = 0;
    let want: Vec<(Vec<u8>, i64)> = frames
        .iter()
        .map(|f| {
            offset += f.len() as i64;
            (f.clone(), offset - f.len() as i64)
        })
        .collect();
    assert_eq!(pdus(&out), want);
    assert!(notes(&out).is_empty());
}

#[test]
fn joining_mid_stream_skips_to_the_first_frame() {
    let s = send();
    let mut stream = s[s.len() - 9..].to_vec(); // the end of a frame whose start was not captured
    stream.extend(ping());
    stream.extend(&s);
    let out = split(false, MAX, &[&stream]);
    assert_eq!(notes(&out), [("SKIPPED".to_owned(), 0, 9)]);
    assert_eq!(pdus(&out), [(ping(), 9), (s.clone(), 9 + 13)]);
}

#[test]
fn an_oversized_send_is_decoded_from_its_head() {
    let payload = vec![0x55u8; 3000];
    let md = metadata(&[("partition_key", st("big"))]);
    let frame = send_frame(&md, &payload);
    let out = split(true, 1000, &[&frame[..500], &frame[500..]]);
    let heads: Vec<_> = out.iter().filter_map(|s| if let Split::Pdu(p) = s { Some(p.clone()) } else { None }).collect();
    assert_eq!(heads.len(), 1, "{out:?}");
    let p = &heads[0];
    assert!(p.oversized);
    assert_eq!(p.data.len() as i64 + p.missing, frame.len() as i64);
    let d = decode(&p.data, p.missing as usize, MIB, false);
    assert_eq!(d.type_name.as_str(), "SEND");
    let section = d.payload().expect("a payload section");
    assert_eq!(section.metadata.as_ref(), Some(&expected(&md)));
    assert_eq!(section.checksum, Checksum::Unverified);
}

#[test]
fn a_gap_inside_a_frame_gives_it_with_its_missing_bytes() {
    let s = send();
    let f = framing();
    let mut sp = Splitter::new(true, MAX, 0);
    let mut out = Vec::new();
    sp.feed(&f, &s[..30], 0.0, 1, &mut out);
    sp.gap(&f, (s.len() - 30) as i64, 1.0, 2, &mut out);
    sp.feed(&f, &ping(), 2.0, 3, &mut out);
    sp.finish(&f, 3.0, 4, &mut out);
    let got: Vec<(usize, i64)> =
        out.iter().filter_map(|x| if let Split::Pdu(p) = x { Some((p.data.len(), p.missing)) } else { None }).collect();
    assert_eq!(got, [(30, (s.len() - 30) as i64), (13, 0)]);
    if let Split::Pdu(p) = &out[0] {
        assert_eq!(decode(&p.data, p.missing as usize, MIB, false).size, s.len());
    }
}

#[test]
fn a_tls_client_hello_on_the_plaintext_port_is_not_pulsar() {
    // a TLS record header (handshake 0x16, version 3.1) where TOTAL_SIZE would be
    let hello = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    let out = split(true, MAX, &[&hello]);
    assert!(pdus(&out).is_empty());
    assert_eq!(notes(&out), [("NOT_PULSAR".to_owned(), 0, hello.len() as i64)]);
}

#[test]
fn a_proxy_protocol_header_before_the_frames_is_skipped() {
    let mut stream = b"PROXY TCP4 10.0.0.1 10.0.0.2 51234 6650\r\n".to_vec();
    let header = stream.len() as i64;
    stream.extend(ping());
    stream.extend(flow());
    let out = split(true, MAX, &[&stream[..10], &stream[10..]]);
    assert_eq!(notes(&out), [("PROXY_HEADER".to_owned(), 0, header)]);
    assert_eq!(pdus(&out), [(ping(), header), (flow(), header + 13)]);
}

#[test]
fn a_total_size_that_disagrees_mid_stream_is_reported_and_skipped() {
    let mut stream = ping();
    stream.extend(with_total(flow(), 1000)); // a FLOW whose TOTAL_SIZE would swallow what follows
    stream.extend(ping());
    let out = split(true, MAX, &[&stream]);
    let kinds: Vec<String> = notes(&out).into_iter().map(|n| n.0).collect();
    assert_eq!(kinds.first().map(String::as_str), Some("BAD_SIZE"));
    let got = pdus(&out);
    assert_eq!(got.first(), Some(&(ping(), 0)));
    assert_eq!(got.last(), Some(&(ping(), (13 + flow().len()) as i64)), "the ping after the damage is found again");
}

#[test]
fn looks_like_frame_refuses_a_send_whose_command_is_larger_than_its_total_size() {
    let frame = payload_frame(&send_command(), None, false, &encode(&metadata(&[])), b"xyz");
    let cmd = send_command().len() as u32;
    assert_eq!(framing().looks_like_frame(&frame, 0, cmd, cmd, frame.len()), Some(false));
}

/// Every BaseCommand type of the schema (its sub-command with every required field set; SEND and MESSAGE with a
/// payload section), as a frame: (type name, frame).
fn a_frame_of_every_type() -> Vec<(String, Vec<u8>)> {
    let base = descriptor("BaseCommand");
    let prost_reflect::Kind::Enum(types) = base.get_field_by_name("type").unwrap().kind() else { panic!("an enum") };
    let mut out = Vec::new();
    for t in types.values() {
        let Some(field) = base.get_field(t.number() as u32) else { continue };
        let prost_reflect::Kind::Message(sub_type) = field.kind() else { continue };
        let command = base_command(t.name(), &required_filled(&sub_type));
        let frame = if t.name() == "SEND" || t.name() == "MESSAGE" {
            payload_frame(&command, None, true, &encode(&metadata(&[])), b"payload")
        } else {
            simple_frame(&command)
        };
        out.push((t.name().to_owned(), frame));
    }
    out
}

#[test]
fn every_command_type_is_a_frame_start_and_is_found_again_by_resync() {
    let frames = a_frame_of_every_type();
    // the reference notes count 70 command types, each with its sub-command field
    assert_eq!(frames.len(), 70);
    let junk = b"\x00\x01\x02\x03\x05".repeat(3);
    for (name, frame) in frames {
        let total = u32::from_be_bytes(frame[..4].try_into().unwrap());
        let cmd_size = u32::from_be_bytes(frame[4..8].try_into().unwrap());
        assert_eq!(total as usize, frame.len() - 4, "{name}");
        assert_eq!(framing().looks_like_frame(&frame, 0, total, cmd_size, frame.len()), Some(true), "{name}");
        assert_eq!(length(&frame), Ok(frame.len()), "{name}");
        // joined mid-stream: 15 bytes of junk, the frame, a PING; the junk is skipped, both frames found
        let stream = [junk.clone(), frame.clone(), ping()].concat();
        let out = split(false, MAX, &[&stream]);
        assert_eq!(pdus(&out), [(frame.clone(), 15), (ping(), 15 + frame.len() as i64)], "{name}");
        assert_eq!(notes(&out), [("SKIPPED".to_owned(), 0, 15)], "{name}");
    }
}

// ------------------------------------------------------------------------- the splitter across gaps

/// One step of a stream as the pipeline feeds it: bytes of one packet, or a gap of lost bytes.
enum Op<'a> {
    Data(&'a [u8]),
    Gap(i64),
}

fn split_ops(synced: bool, max: usize, ops: &[Op]) -> Vec<Split> {
    let f = framing();
    let mut sp = Splitter::new(synced, max, 0);
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Data(data) => sp.feed(&f, data, i as f64, i as i64, &mut out),
            Op::Gap(n) => sp.gap(&f, *n, i as f64, i as i64, &mut out),
        }
    }
    sp.finish(&f, ops.len() as f64, ops.len() as i64, &mut out);
    out
}

/// The byte ranges the splitter reports: (start, end, "pdu" or the note's kind), sorted; OVERSIZED and BAD_SIZE
/// notes name a position, not a range of bytes they stand for, and are left out.
fn ranges(out: &[Split]) -> Vec<(i64, i64, String)> {
    let mut r: Vec<(i64, i64, String)> = out
        .iter()
        .filter_map(|s| match s {
            Split::Pdu(p) => Some((p.offset, p.offset + p.data.len() as i64, "pdu".to_owned())),
            Split::Note(n) if n.kind != "OVERSIZED" && n.kind != "BAD_SIZE" => {
                Some((n.offset, n.offset + n.length, n.kind.clone()))
            }
            Split::Note(_) => None,
        })
        .collect();
    r.sort();
    r
}

/// A SEND frame of `size` payload bytes: far above the limits the tests below set.
fn big_send(size: usize) -> Vec<u8> {
    send_frame(&metadata(&[]), &vec![0x42; size])
}

#[test]
fn an_oversized_send_whose_head_is_cut_by_a_gap_or_the_end_is_skipped_and_the_stream_found_again() {
    let (before, after, big) = (ping(), flow(), big_send(100_000));
    // only 20 bytes of the oversized SEND before a gap: its head is not in reach, it is skipped, not decoded
    let first = [before.clone(), big[..20].to_vec()].concat();
    let last = [big[120..].to_vec(), after.clone()].concat();
    let out = split_ops(true, 20_000, &[Op::Data(&first), Op::Gap(100), Op::Data(&last)]);
    assert!(!out.iter().any(|s| matches!(s, Split::Pdu(p) if p.oversized)));
    assert_eq!(notes(&out).first().map(|n| n.0.as_str()), Some("OVERSIZED"));
    let got = pdus(&out);
    assert_eq!(got.first(), Some(&(before.clone(), 0)));
    assert_eq!(got.last(), Some(&(after.clone(), (before.len() + big.len()) as i64)));
    // the stream ends there: the PDU before it, then OVERSIZED first of the notes
    let out = split_ops(true, 20_000, &[Op::Data(&first)]);
    assert_eq!(pdus(&out), [(before, 0)]);
    assert_eq!(notes(&out).first().map(|n| n.0.as_str()), Some("OVERSIZED"));
}

#[test]
fn a_skipped_run_never_covers_the_bytes_of_a_gap() {
    let junk = [1u8, 2, 3, 4].repeat(25); // 100 bytes, nothing that looks like a frame
    let (a, b) = (ping(), flow());
    let after = [junk[..30].to_vec(), a.clone(), b.clone()].concat();
    let out = split_ops(false, MAX, &[Op::Data(&junk), Op::Gap(50), Op::Data(&after)]);
    assert_eq!(pdus(&out), [(a.clone(), 180), (b, 180 + a.len() as i64)]);
    let r = ranges(&out);
    for (start, end, kind) in &r {
        assert!(*end <= 100 || *start >= 150, "{start}..{end} {kind} covers the gap 100..150");
    }
    // the 100 bytes before the gap and the 30 after it are skipped, nothing more
    assert_eq!(r.iter().filter(|x| x.2 != "pdu").map(|x| x.1 - x.0).sum::<i64>(), 130);
}

#[test]
fn a_foreign_stream_recognised_before_a_gap_keeps_offset_zero_and_its_length_before_the_gap() {
    let mut hello = vec![0x16, 0x03, 0x01, 0x00, 0xf8, 0x01, 0x00, 0x00, 0xf4, 0x03, 0x03];
    hello.extend([0u8; 32]);
    hello.push(0x20);
    hello.extend([0u8; 32]);
    hello.extend([0x00, 0x08, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c]);
    let out = split_ops(true, MAX, &[Op::Data(&hello[..40]), Op::Gap(100), Op::Data(&hello[40..])]);
    assert!(pdus(&out).is_empty());
    assert_eq!(notes(&out), [("NOT_PULSAR".to_owned(), 0, 40)]);
}

fn frame_pool() -> Vec<Vec<u8>> {
    let producer = simple_frame(&base_command(
        "PRODUCER",
        &sub_command(
            "PRODUCER",
            &[("topic", st("persistent://public/default/t")), ("producer_id", int(1)), ("request_id", int(1))],
        ),
    ));
    let message = payload_frame(&message_command(&[]), Some(&[0x08, 0x05]), true, &encode(&metadata(&[])), b"m");
    vec![ping(), flow(), send(), producer, message]
}

#[test]
fn random_mixes_of_frames_garbage_and_gaps_give_disjoint_ranges_outside_the_gaps() {
    let pool = frame_pool();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..400 {
        let synced = rng.below(2) == 0;
        let (mut owned, mut gaps, mut pos) = (Vec::new(), Vec::new(), 0i64);
        // (is a gap, bytes or gap length); whether garbage was met while synced (a synced splitter trusts sizes)
        let (mut state, mut corrupt) = (synced, false);
        for _ in 0..rng.below(31) {
            match rng.below(3) {
                0 => {
                    let n = 1 + rng.below(200);
                    let data = rng.bytes(n);
                    pos += data.len() as i64;
                    corrupt |= state;
                    owned.push((false, data, 0));
                }
                1 => {
                    let n = 1 + rng.below(300) as i64;
                    gaps.push((pos, pos + n));
                    pos += n;
                    state = false;
                    owned.push((true, Vec::new(), n));
                }
                _ => {
                    let f = pool[rng.below(pool.len())].clone();
                    pos += f.len() as i64;
                    state = true;
                    owned.push((false, f, 0));
                }
            }
        }
        let tail = [pool[1].clone(), pool[2].clone(), pool[3].clone(), pool[0].clone()];
        for f in &tail {
            owned.push((false, f.clone(), 0));
        }
        let ops: Vec<Op> = owned.iter().map(|(gap, data, n)| if *gap { Op::Gap(*n) } else { Op::Data(data) }).collect();
        let out = split_ops(synced, MAX, &ops);
        let r = ranges(&out);
        for pair in r.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "round {round}: {:?} overlaps {:?}", pair[0], pair[1]);
        }
        for (start, end, kind) in &r {
            if kind == "NOT_PULSAR" {
                continue; // counts the foreign bytes of the whole rest of the stream, gaps or not
            }
            for (gs, ge) in &gaps {
                assert!(end <= gs || start >= ge, "round {round}: {start}..{end} {kind} in the gap {gs}..{ge}");
            }
        }
        if !corrupt {
            let got: Vec<Vec<u8>> = pdus(&out).into_iter().map(|p| p.0).collect();
            assert!(got.len() >= 2, "round {round}: {got:?}");
            assert_eq!(got[got.len() - 2..], tail[2..], "round {round}: the clean tail is found again");
        }
    }
}

#[test]
fn frames_after_random_garbage_are_found_again_whatever_the_segment_size() {
    let pool = frame_pool();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for round in 0..300 {
        let size = rng.below(2001);
        let garbage = rng.bytes(size);
        let n = 2 + rng.below(4);
        let frames: Vec<Vec<u8>> = (0..n).map(|_| pool[rng.below(pool.len())].clone()).collect();
        let stream = [garbage, frames.concat()].concat();
        let cut = 1 + rng.below(64);
        let chunks: Vec<&[u8]> = stream.chunks(cut).collect();
        let got: Vec<Vec<u8>> = pdus(&split(false, MAX, &chunks)).into_iter().map(|p| p.0).collect();
        // the garbage may swallow the first frame, never the ones after it
        assert!(got.len() >= n - 1, "round {round}");
        assert_eq!(got[got.len() - (n - 1)..], frames[1..], "round {round}");
    }
}

#[test]
fn resync_is_not_stalled_by_a_decoy_whose_command_is_beyond_the_bytes_at_hand() {
    // TOTAL_SIZE 1 MiB and CMD_SIZE 64 KiB, then: "type = SEND" and garbage; the same with the (empty) send
    // field's key; MESSAGE with a sub-command length far beyond the bytes that follow
    let head = [0x00, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00];
    let decoys: [Vec<u8>; 3] = [
        [&head[..], &[0x08, 0x06], b"garbage!"].concat(),
        [&head[..], &[0x08, 0x06, 0x32]].concat(),
        [&head[..], &[0x08, 0x09, 0x4a, 0xff, 0x7f]].concat(),
    ];
    let frames = [flow(), send(), ping()];
    for decoy in decoys {
        let stream = [vec![1u8; 9], decoy.clone(), frames.concat()].concat();
        let out = split(false, MAX, &[&stream]);
        let got: Vec<Vec<u8>> = pdus(&out).into_iter().map(|p| p.0).collect();
        assert_eq!(got, frames, "{decoy:02x?}");
        assert_eq!(notes(&out), [("SKIPPED".to_owned(), 0, 9 + decoy.len() as i64)], "{decoy:02x?}");
    }
}

#[test]
fn mutated_streams_never_panic_the_framing() {
    // hostile input: a xorshift-driven mutation of a stream of frames, through every framing entry point
    let stream =
        [ping(), send(), flow(), payload_frame(&message_command(&[1]), Some(&[0x08, 0x01]), true, &[], b"")].concat();
    let f = framing();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut b = stream.clone();
        for _ in 0..1 + next() % 4 {
            let at = next() as usize % b.len();
            b[at] = next() as u8;
        }
        let from = next() as usize % b.len();
        let buf = &b[from..];
        f.pdu_length(buf, 1 << 16);
        f.resync_until(buf, 1 << 16);
        f.oversized_head(buf);
        split(next() % 2 == 0, 1 << 10, &[buf]);
    }
}
