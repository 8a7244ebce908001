//! TubeMQ's framing (`tubemq::framing`): where a frame ends, what is refused, where the next frame may start
//! after lost bytes; and the generic splitter driven by it. Frames come from the independent encoder in
//! `tubemq_support` (prost-reflect over the .proto contract, the frame laid out from the wire facts).

use pulsar_dissect_engine::protocols::tubemq::framing::{
    TubeMqFraming, BEGIN_TOKEN, HEADER_SIZE, MAX_BLOCK_SIZE, MAX_LIST_SIZE,
};
use pulsar_dissect_engine::transport::splitter::{Framing, PduLength, Split, Splitter};

mod tubemq_support;
use prost_reflect::Value as Pv;
use tubemq_support::*;

const LIMIT: usize = 5 << 20;

fn length(buf: &[u8], max: usize) -> PduLength {
    TubeMqFraming.pdu_length(buf, max)
}

fn complete(buf: &[u8], max: usize) -> Option<usize> {
    match length(buf, max) {
        PduLength::Complete(n) => Some(n),
        _ => None,
    }
}

/// (kind, details["field"], details["size"]) of a refused length.
fn refused(buf: &[u8], max: usize) -> Option<(String, String, i64)> {
    match length(buf, max) {
        PduLength::Bad(bad) => {
            let get = |key: &str| bad.details.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v.clone());
            let field = get("field").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            let size = get("size").and_then(|v| v.as_i64()).unwrap_or(-1);
            Some((bad.kind, field, size))
        }
        _ => None,
    }
}

fn needs_more(buf: &[u8]) -> bool {
    matches!(length(buf, LIMIT), PduLength::NeedMore)
}

/// A real request frame: a consumer's GetMessageRequestC2B to a broker.
fn get_message(serial: u32) -> Vec<u8> {
    let body = enc(
        "GetMessageRequestC2B",
        vec![("clientId", s("c-1")), ("partitionId", i32v(2)), ("groupName", s("g")), ("topicName", s("t"))],
    );
    request(serial, 2, 17, &body)
}

#[test]
fn constants_are_the_wire_facts() {
    // RPC_PROTOCOL_BEGIN_TOKEN is the Java int -8391426; the header is token, serial and list size (4 each);
    // the servers' list limit is (20 MiB + 8 MiB) / 8 KiB; the clients' buffers are 8 KiB
    assert_eq!(BEGIN_TOKEN as i32, -8_391_426);
    assert_eq!(BEGIN_TOKEN.to_be_bytes(), TOKEN);
    assert_eq!(HEADER_SIZE, 12);
    assert_eq!(MAX_LIST_SIZE as usize, ((20 << 20) + (8 << 20)) / 8192);
    assert_eq!(MAX_BLOCK_SIZE, 8192);
    assert_eq!(TubeMqFraming.min_pdu(), HEADER_SIZE);
    assert_eq!(TubeMqFraming.foreign_kind(), "NOT_TUBEMQ");
}

#[test]
fn an_encoded_frame_is_complete_at_its_length_and_not_before() {
    let f = get_message(9);
    assert_eq!(complete(&f, LIMIT), Some(f.len()));
    for cut in 0..f.len() {
        assert!(needs_more(&f[..cut]), "cut at {cut}");
    }
}

#[test]
fn a_frame_of_many_8k_blocks_is_walked_to_its_end() {
    // 20 000 bytes of payload: the reference writers' 8 KiB buffers make three blocks
    let body = enc(
        "SendMessageRequestP2B",
        vec![
            ("clientId", s("p")),
            ("topicName", s("t")),
            ("partitionId", i32v(0)),
            ("data", b(&vec![0x5A; 20_000])),
            ("flag", i32v(0)),
            ("checkSum", i32v(-1)),
            ("sentAddr", i32v(0)),
        ],
    );
    let f = request(1, 3, 13, &body);
    let list_size = u32::from_be_bytes(f[8..12].try_into().unwrap());
    assert_eq!(list_size, 3);
    assert_eq!(complete(&f, LIMIT), Some(f.len()));
    // cut inside the second block's length and inside the third block's data
    let second_length = HEADER_SIZE + 4 + 8192;
    assert!(needs_more(&f[..second_length + 2]));
    assert!(needs_more(&f[..f.len() - 1]));
}

#[test]
fn only_the_first_of_two_frames_is_measured() {
    let first = get_message(1);
    let mut both = first.clone();
    both.extend(get_message(2));
    assert_eq!(complete(&both, LIMIT), Some(first.len()));
}

#[test]
fn a_frame_with_no_blocks_is_its_header() {
    let f = frame_of_blocks(5, &[]);
    assert_eq!(complete(&f, LIMIT), Some(HEADER_SIZE));
}

#[test]
fn empty_blocks_count_for_their_length_field_only() {
    let f = frame_of_blocks(5, &[&[], &[], &[1, 2]]);
    assert_eq!(complete(&f, LIMIT), Some(HEADER_SIZE + 4 + 4 + 4 + 2));
}

#[test]
fn an_empty_buffer_or_a_token_prefix_waits() {
    assert!(needs_more(&[]));
    for n in 1..=4 {
        assert!(needs_more(&TOKEN[..n]), "{n} bytes of the token");
    }
    // token and serial, no list size yet
    let mut head = TOKEN.to_vec();
    head.extend_from_slice(&[0, 0, 0, 1, 0, 0]);
    assert!(needs_more(&head));
}

#[test]
fn a_wrong_begin_token_is_a_bad_size_naming_what_was_seen() {
    let mut f = get_message(1);
    f[3] = 0xFD;
    let (kind, field, size) = refused(&f, LIMIT).expect("refused");
    assert_eq!((kind.as_str(), field.as_str()), ("BAD_SIZE", "begin token"));
    assert_eq!(size, 0xFF7F_F4FD);
    // a short buffer that already diverges from the token is refused at once, its size 0 (no 4 bytes seen)
    let (kind, _, size) = refused(&[0xFF, 0x00], LIMIT).expect("refused");
    assert_eq!((kind.as_str(), size), ("BAD_SIZE", 0));
}

#[test]
fn http_on_the_port_is_not_tubemq() {
    let (kind, field, size) = refused(b"GET / HTTP/1.1\r\n", LIMIT).expect("refused");
    assert_eq!((kind.as_str(), field.as_str()), ("BAD_SIZE", "begin token"));
    assert_eq!(size, i64::from(u32::from_be_bytes(*b"GET ")));
}

#[test]
fn the_list_size_limit_is_inclusive() {
    let mut head = TOKEN.to_vec();
    head.extend_from_slice(&7u32.to_be_bytes());
    head.extend_from_slice(&MAX_LIST_SIZE.to_be_bytes());
    assert!(needs_more(&head), "3584 blocks are accepted: their lengths are awaited");
    head[8..12].copy_from_slice(&(MAX_LIST_SIZE + 1).to_be_bytes());
    let (kind, field, size) = refused(&head, LIMIT).expect("refused");
    assert_eq!((kind.as_str(), field.as_str(), size), ("BAD_SIZE", "list size", 3585));
    // a negative Java int (listSize < 0, which the servers refuse) is a huge u32 here
    head[8..12].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(refused(&head, LIMIT).map(|r| r.1), Some("list size".to_owned()));
}

#[test]
fn a_block_past_the_size_limit_is_refused_with_the_length_reached() {
    // blocks of 100 and 5000 bytes under a limit of 4000: refused once the second block's length is read
    let f = frame_of_blocks(1, &[&[0; 100], &[0; 5000]]);
    let (kind, field, size) = refused(&f[..HEADER_SIZE + 4 + 100 + 4], 4000).expect("refused before its data");
    assert_eq!((kind.as_str(), field.as_str()), ("OVERSIZED", "frame length"));
    assert_eq!(size, (HEADER_SIZE + 4 + 100 + 4 + 5000) as i64);
}

#[test]
fn a_frame_of_exactly_the_limit_is_accepted() {
    let f = frame_of_blocks(1, &[&[7; 50]]);
    assert_eq!(complete(&f, f.len()), Some(f.len()));
    assert!(matches!(length(&f, f.len() - 1), PduLength::Bad(b) if b.kind == "OVERSIZED"));
}

#[test]
fn a_lying_block_length_is_refused_without_its_bytes() {
    // a length of u32::MAX would make a reader wait for 4 GiB
    let mut f = TOKEN.to_vec();
    f.extend_from_slice(&1u32.to_be_bytes());
    f.extend_from_slice(&1u32.to_be_bytes());
    f.extend_from_slice(&u32::MAX.to_be_bytes());
    let (kind, _, size) = refused(&f, LIMIT).expect("refused");
    assert_eq!(kind, "OVERSIZED");
    assert_eq!(size, HEADER_SIZE as i64 + 4 + i64::from(u32::MAX));
}

#[test]
fn resync_finds_an_encoded_frame_after_garbage() {
    let f = get_message(3);
    for garbage_len in [0usize, 1, 5, 13, 100] {
        let mut buf: Vec<u8> = (0..garbage_len).map(|i| (i * 7 + 1) as u8 & 0x7F).collect();
        buf.extend_from_slice(&f);
        assert_eq!(TubeMqFraming.resync(&buf, LIMIT), (true, garbage_len), "{garbage_len} bytes before");
    }
}

#[test]
fn resync_accepts_every_encoded_envelope_start() {
    // the plausibility test reads the first block: RpcConnHeader's length, then its first tag (flag, 0x08)
    let frames = [
        get_message(1),
        response(2, 17, &enc("GetMessageResponseB2C", vec![("success", Pv::Bool(true)), ("errCode", i32v(200))])),
        frame(3, &exception_data(1, "x.StandbyException", ""), 8192),
        frame(4, &request_data(1, 1, &[]), 1), // one-byte blocks: the header split after its length byte
    ];
    for f in frames {
        let mut buf = vec![0x11; 9];
        buf.extend_from_slice(&f);
        assert_eq!(TubeMqFraming.resync(&buf, LIMIT), (true, 9));
    }
}

/// A candidate start: token, serial, list size, first block length and its first two bytes.
fn candidate(list_size: u32, first_length: u32, first_bytes: &[u8]) -> Vec<u8> {
    let mut out = TOKEN.to_vec();
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&list_size.to_be_bytes());
    out.extend_from_slice(&first_length.to_be_bytes());
    out.extend_from_slice(first_bytes);
    out
}

#[test]
fn resync_skips_implausible_tokens_to_the_real_frame() {
    let real = get_message(8);
    for bad in [
        candidate(0, 3, &[2, 8, 0]),                 // no blocks
        candidate(MAX_LIST_SIZE + 1, 3, &[2, 8, 0]), // too many blocks
        candidate(1, 0, &[2, 8, 0]),                 // an empty first block
        candidate(1, 3, &[0, 8, 0]),                 // a header of length 0
        candidate(1, 3, &[0x80, 8, 0]),              // a header length of two varint bytes: not a short header
        candidate(1, 3, &[2, 0x10, 0]),              // first tag not the flag's
    ] {
        let mut buf = bad.clone();
        buf.extend_from_slice(&real);
        assert_eq!(TubeMqFraming.resync(&buf, LIMIT), (true, bad.len()), "{bad:?}");
    }
}

#[test]
fn resync_refuses_a_first_block_above_the_limit() {
    let real = get_message(8);
    let bad = candidate(1, 5000, &[2, 8, 0]);
    let mut buf = bad.clone();
    buf.extend_from_slice(&real);
    assert_eq!(TubeMqFraming.resync(&buf, 4000), (true, bad.len()));
    assert_eq!(TubeMqFraming.resync(&buf, LIMIT), (true, 0), "under a larger limit it is plausible");
}

#[test]
fn resync_waits_on_a_token_it_cannot_judge_yet() {
    let f = get_message(1);
    let mut buf = vec![1, 2, 3];
    buf.extend_from_slice(&f[..HEADER_SIZE + 2]); // the first block's length is not all there
    assert_eq!(TubeMqFraming.resync(&buf, LIMIT), (false, 3));
}

#[test]
fn resync_keeps_a_token_cut_at_the_end() {
    for keep in 1..=3 {
        let mut buf = vec![0x42; 10];
        buf.extend_from_slice(&TOKEN[..keep]);
        assert_eq!(TubeMqFraming.resync(&buf, LIMIT), (false, 10), "{keep} token bytes at the end");
    }
    // bytes that are not a token prefix are all skipped
    assert_eq!(TubeMqFraming.resync(&[0x42; 10], LIMIT), (false, 10));
    assert_eq!(TubeMqFraming.resync(&[0x42, 0x42, 0x7F, 0xF4], LIMIT), (false, 4));
}

fn pdus(out: &[Split]) -> Vec<Vec<u8>> {
    out.iter()
        .filter_map(|s| match s {
            Split::Pdu(p) => Some(p.data.clone()),
            Split::Note(_) => None,
        })
        .collect()
}

#[test]
fn the_splitter_gives_the_same_frames_however_the_stream_is_cut() {
    let frames: Vec<Vec<u8>> = (1..=4).map(get_message).collect();
    let stream: Vec<u8> = frames.concat();
    let mut rng = Lcg(0x1234_5678);
    for _ in 0..50 {
        let mut splitter = Splitter::new(true, LIMIT, 0);
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < stream.len() {
            let n = (1 + rng.below(40) as usize).min(stream.len() - pos);
            splitter.feed(&TubeMqFraming, &stream[pos..pos + n], 0.0, 1, &mut out);
            pos += n;
        }
        splitter.finish(&TubeMqFraming, 0.0, 1, &mut out);
        assert_eq!(pdus(&out), frames);
        assert!(out.iter().all(|s| matches!(s, Split::Pdu(_))));
    }
}

#[test]
fn the_splitter_skips_to_the_next_frame_when_started_mid_stream() {
    let f1 = get_message(1);
    let f2 = get_message(2);
    // the capture started inside f1: its last 10 bytes, then f2
    let mut stream = f1[f1.len() - 10..].to_vec();
    stream.extend_from_slice(&f2);
    let mut splitter = Splitter::new(false, LIMIT, 0);
    let mut out = Vec::new();
    splitter.feed(&TubeMqFraming, &stream, 0.0, 1, &mut out);
    splitter.finish(&TubeMqFraming, 0.0, 1, &mut out);
    assert_eq!(pdus(&out), vec![f2]);
    let skipped: i64 = out
        .iter()
        .filter_map(|s| match s {
            Split::Note(n) if n.kind == "SKIPPED" => Some(n.length),
            _ => None,
        })
        .sum();
    assert_eq!(skipped, 10);
}

fn note_kinds(stream: &[u8]) -> Vec<String> {
    let mut splitter = Splitter::new(true, LIMIT, 0);
    let mut out = Vec::new();
    splitter.feed(&TubeMqFraming, stream, 0.0, 1, &mut out);
    splitter.finish(&TubeMqFraming, 0.0, 1, &mut out);
    assert!(pdus(&out).is_empty());
    out.iter()
        .filter_map(|s| match s {
            Split::Note(n) => Some(n.kind.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_splitter_names_http_on_the_port_not_tubemq() {
    // the foreign kind TubeMQ's framing gives, said once for the whole stream
    assert_eq!(note_kinds(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), vec!["NOT_TUBEMQ".to_owned()]);
}

#[test]
fn the_splitter_says_a_binary_stream_without_the_token_has_a_bad_size() {
    let kinds = note_kinds(b"\x00\x00\x00\x10 some other binary protocol");
    assert_eq!(kinds.first().map(String::as_str), Some("BAD_SIZE"), "{kinds:?}");
}
