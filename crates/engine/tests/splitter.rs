//! The PDU splitter (`transport::splitter`) through toy framings written here: PDUs across segment
//! boundaries, gaps inside and between PDUs, resynchronisation, bad and oversized sizes, the minimum PDU
//! worth decoding, foreign protocols at the stream start, PROXY protocol headers.

use pulsar_dissect_engine::name;
use pulsar_dissect_engine::transport::splitter::{
    sniff_foreign_protocol, BadLength, Framing, Head, PduLength, Split, Splitter, PROXY_V2_SIGNATURE,
};
use pulsar_dissect_engine::value::{entry, Map, Value};

const MAGIC: u8 = 0xA5;

/// ``[0xA5][LENGTH u16][body]``: LENGTH counts the body; 0 or a missing magic is a bad size. The magic lets it
/// resynchronise; ``heads``: the first 3 bytes of an oversized PDU are worth decoding alone.
struct Toy {
    min_pdu: usize,
    heads: bool,
    resyncs: bool,
}

const TOY: Toy = Toy { min_pdu: 1, heads: false, resyncs: true };

fn declared(buf: &[u8]) -> usize {
    u16::from_be_bytes([buf[1], buf[2]]) as usize
}

impl Framing for Toy {
    fn pdu_length(&self, buf: &[u8], max_size: usize) -> PduLength {
        if !buf.is_empty() && buf[0] != MAGIC {
            return PduLength::Bad(BadLength { kind: "BAD_SIZE".into(), details: vec![], params: vec![] });
        }
        if buf.len() < 3 {
            return PduLength::NeedMore;
        }
        let n = declared(buf);
        if n == 0 {
            return PduLength::Bad(BadLength {
                kind: "BAD_SIZE".into(),
                details: vec![entry(name!("length"), 0i64)],
                params: vec![],
            });
        }
        if n + 3 > max_size {
            return PduLength::Bad(BadLength {
                kind: "OVERSIZED".into(),
                details: vec![entry(name!("length"), n as i64)],
                params: vec![],
            });
        }
        PduLength::Complete(n + 3)
    }

    fn resync(&self, buf: &[u8], max_size: usize) -> (bool, usize) {
        if !self.resyncs {
            return (false, buf.len());
        }
        let mut i = 0;
        while i < buf.len() {
            if buf[i] == MAGIC {
                if i + 3 > buf.len() {
                    return (false, i); // maybe a start: wait for its length
                }
                let n = declared(&buf[i..]);
                if n > 0 && n + 3 <= max_size {
                    return (true, i);
                }
            }
            i += 1;
        }
        (false, buf.len())
    }

    fn reads_oversized_heads(&self) -> bool {
        self.heads
    }

    fn oversized_head(&self, buf: &[u8]) -> Head {
        if buf.len() < 3 {
            return Head::NeedMore;
        }
        Head::Found { head: 3, length: declared(buf) + 3 }
    }

    fn min_pdu(&self) -> usize {
        self.min_pdu
    }

    fn foreign_kind(&self) -> &str {
        "TOY_FOREIGN"
    }

    fn tls_name(&self) -> &str {
        "TLS (Toy over TLS)"
    }
}

/// A framing that only answers lengths: the trait's defaults for everything else.
struct Bare;

impl Framing for Bare {
    fn pdu_length(&self, buf: &[u8], max_size: usize) -> PduLength {
        TOY.pdu_length(buf, max_size)
    }
}

fn pdu(body: &[u8]) -> Vec<u8> {
    let mut p = vec![MAGIC];
    p.extend((body.len() as u16).to_be_bytes());
    p.extend_from_slice(body);
    p
}

fn wire(bodies: &[&[u8]]) -> Vec<u8> {
    bodies.iter().flat_map(|b| pdu(b)).collect()
}

/// (data, offset, missing) of every PDU.
fn pdus(items: &[Split]) -> Vec<(Vec<u8>, i64, i64)> {
    items
        .iter()
        .filter_map(|i| if let Split::Pdu(p) = i { Some((p.data.clone(), p.offset, p.missing)) } else { None })
        .collect()
}

/// (kind, offset, length) of every note.
fn notes(items: &[Split]) -> Vec<(String, i64, i64)> {
    items
        .iter()
        .filter_map(|i| if let Split::Note(n) = i { Some((n.kind.clone(), n.offset, n.length)) } else { None })
        .collect()
}

fn get<'a>(map: &'a Map, key: &str) -> Option<&'a Value> {
    map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

fn text(value: Option<&Value>) -> Option<&str> {
    match value {
        Some(Value::Str(t)) => Some(t.as_str()),
        _ => None,
    }
}

fn note_of<'a>(items: &'a [Split], kind: &str) -> &'a pulsar_dissect_engine::transport::splitter::Note {
    items.iter().find_map(|i| if let Split::Note(n) = i { (n.kind == kind).then_some(n) } else { None }).expect(kind)
}

/// Feed `data` in pieces cut at `cuts`, then finish.
fn split_at(fr: &dyn Framing, sp: &mut Splitter, data: &[u8], cuts: &[usize]) -> Vec<Split> {
    let mut items = Vec::new();
    let mut at = 0;
    for (k, &cut) in cuts.iter().chain(std::iter::once(&data.len())).enumerate() {
        sp.feed(fr, &data[at..cut], k as f64, k as i64, &mut items);
        at = cut;
    }
    sp.finish(fr, 99.0, 99, &mut items);
    items
}

// ------------------------------------------------------------------------------------------------ framing

#[test]
fn pdus_of_one_segment_with_their_offsets() {
    let w = wire(&[b"abc", b"d", b"efghij"]);
    let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &w, &[]);
    assert_eq!(pdus(&items), vec![(pdu(b"abc"), 0, 0), (pdu(b"d"), 6, 0), (pdu(b"efghij"), 10, 0)]);
    assert!(notes(&items).is_empty());
}

#[test]
fn a_pdu_across_three_segments_keeps_its_first_and_last_packet() {
    let w = pdu(b"0123456789");
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&TOY, &w[..2], 1.0, 1, &mut items);
    sp.feed(&TOY, &w[2..8], 2.0, 2, &mut items);
    assert!(items.is_empty());
    assert_eq!(sp.buffered(), &w[..8]);
    sp.feed(&TOY, &w[8..], 3.0, 3, &mut items);
    let [Split::Pdu(p)] = &items[..] else { panic!("{items:?}") };
    assert_eq!(
        (&p.data, p.offset, p.first_packet, p.last_packet, p.first_time, p.time, p.missing, p.oversized),
        (&w, 0, 1, 3, 1.0, 3.0, 0, false)
    );
    assert!(sp.buffered().is_empty());
}

#[test]
fn a_pdu_starting_mid_segment_starts_at_that_segment() {
    let w = wire(&[b"ab", b"cdef"]);
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&TOY, &w[..7], 1.0, 1, &mut items); // the first PDU and 2 bytes of the second
    sp.feed(&TOY, &w[7..], 2.0, 2, &mut items);
    let firsts: Vec<(i64, i64)> = items
        .iter()
        .filter_map(|i| if let Split::Pdu(p) = i { Some((p.first_packet, p.last_packet)) } else { None })
        .collect();
    assert_eq!(firsts, vec![(1, 1), (1, 2)]);
}

#[test]
fn every_two_and_three_way_cut_gives_the_same_pdus() {
    let w = wire(&[b"a", b"bcdefgh", b"ij", b"klmnopq"]);
    let expected = pdus(&split_at(&TOY, &mut Splitter::new(true, 100, 0), &w, &[]));
    assert_eq!(expected.len(), 4);
    for i in 0..=w.len() {
        for j in i..=w.len() {
            let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &w, &[i, j]);
            assert_eq!(pdus(&items), expected, "cuts {i} {j}");
            assert!(notes(&items).is_empty(), "cuts {i} {j}");
        }
    }
}

#[test]
fn random_chunkings_give_the_same_pdus() {
    let mut x: u64 = 0x0DDB_1A5E_5BAD_5EED;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..200 {
        let bodies: Vec<Vec<u8>> =
            (0..1 + next() % 20).map(|_| (0..1 + next() % 90).map(|_| next() as u8).collect()).collect();
        let w: Vec<u8> = bodies.iter().flat_map(|b| pdu(b)).collect();
        let mut cuts: Vec<usize> = (0..next() % 30).map(|_| (next() as usize) % (w.len() + 1)).collect();
        cuts.sort();
        let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &w, &cuts);
        let got: Vec<Vec<u8>> = pdus(&items).into_iter().map(|p| p.0).collect();
        let want: Vec<Vec<u8>> = bodies.iter().map(|b| pdu(b)).collect();
        assert_eq!(got, want, "round {round}");
    }
}

// ------------------------------------------------------------------------------------------------ gaps

#[test]
fn a_gap_ending_on_a_pdu_boundary_keeps_the_stream_synced() {
    let first = pdu(b"0123456789"); // 13 bytes
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&TOY, &first[..5], 0.0, 0, &mut items);
    sp.gap(&TOY, 8, 1.0, 1, &mut items); // exactly the PDU's 8 other bytes
    assert!(sp.synced);
    sp.feed(&TOY, &pdu(b"next"), 2.0, 2, &mut items);
    assert_eq!(pdus(&items), vec![(first[..5].to_vec(), 0, 8), (pdu(b"next"), 13, 0)]);
    assert!(notes(&items).is_empty());
}

#[test]
fn a_gap_inside_a_pdu_shorter_than_min_pdu_is_a_truncated_note() {
    let toy = Toy { min_pdu: 6, ..TOY };
    let first = pdu(b"0123456789");
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&toy, &first[..5], 0.0, 0, &mut items);
    sp.gap(&toy, 3, 1.0, 1, &mut items); // the gap ends inside the PDU: its last 5 bytes will be skipped
    sp.feed(&toy, &first[8..], 2.0, 2, &mut items);
    sp.feed(&toy, &pdu(b"z"), 3.0, 3, &mut items);
    assert_eq!(notes(&items), vec![("TRUNCATED".to_string(), 0, 5)]);
    let n = note_of(&items, "TRUNCATED");
    assert_eq!(text(get(&n.params, "case")), Some("lost_in_gap"));
    assert_eq!(get(&n.params, "frame_length"), Some(&Value::Int(13)));
    assert_eq!(pdus(&items), vec![(pdu(b"z"), 13, 0)]);
}

#[test]
fn a_gap_beyond_the_pdu_end_resyncs_on_the_next_magic() {
    let first = pdu(b"0123456789"); // 13 bytes
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&TOY, &first[..4], 0.0, 0, &mut items);
    sp.gap(&TOY, 20, 1.0, 1, &mut items); // the rest (9) and 11 bytes after it: stream offset 24 next
    assert!(!sp.synced);
    let mut rest = b"xyz".to_vec(); // the tail of a PDU whose start was lost
    rest.extend(pdu(b"found"));
    sp.feed(&TOY, &rest, 2.0, 2, &mut items);
    assert_eq!(pdus(&items), vec![(first[..4].to_vec(), 0, 9), (pdu(b"found"), 27, 0)]);
    assert_eq!(notes(&items), vec![("SKIPPED".to_string(), 24, 3)]);
}

#[test]
fn a_gap_after_a_partial_length_field_is_a_truncated_note() {
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&TOY, &[MAGIC, 0], 0.0, 0, &mut items); // the length is not all there
    sp.gap(&TOY, 10, 1.0, 1, &mut items);
    assert_eq!(notes(&items), vec![("TRUNCATED".to_string(), 0, 2)]);
    assert_eq!(text(get(&note_of(&items, "TRUNCATED").params, "case")), Some("before_gap"));
    assert!(!sp.synced);
    sp.feed(&TOY, &pdu(b"ok"), 2.0, 2, &mut items);
    assert_eq!(pdus(&items), vec![(pdu(b"ok"), 12, 0)]);
}

#[test]
fn a_gap_between_pdus_resyncs_without_skipping_when_a_pdu_follows() {
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&TOY, &pdu(b"one"), 0.0, 0, &mut items);
    sp.gap(&TOY, 50, 1.0, 1, &mut items);
    sp.feed(&TOY, &pdu(b"two"), 2.0, 2, &mut items);
    assert_eq!(pdus(&items), vec![(pdu(b"one"), 0, 0), (pdu(b"two"), 56, 0)]);
    assert!(notes(&items).is_empty());
}

#[test]
fn several_gaps_in_one_pdu_count_every_missing_byte() {
    // the PDU's length is known: its missing count is every byte not delivered, whatever the later gaps
    let first = pdu(&[7u8; 30]); // 33 bytes
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&TOY, &first[..10], 0.0, 0, &mut items);
    sp.gap(&TOY, 5, 1.0, 1, &mut items); // inside: the PDU goes out now, 23 missing, 18 still to skip
    sp.feed(&TOY, &first[15..25], 2.0, 2, &mut items);
    sp.gap(&TOY, 4, 3.0, 3, &mut items);
    sp.feed(&TOY, &first[29..], 4.0, 4, &mut items);
    sp.feed(&TOY, &pdu(b"after"), 5.0, 5, &mut items);
    assert_eq!(pdus(&items), vec![(first[..10].to_vec(), 0, 23), (pdu(b"after"), 33, 0)]);
    assert!(notes(&items).is_empty());
}

#[test]
fn finish_reports_what_could_not_be_framed() {
    // an incomplete PDU with enough of its head: a PDU with the rest missing
    let mut sp = Splitter::new(true, 100, 0);
    let items = split_at(&TOY, &mut sp, &pdu(b"0123456789")[..6], &[]);
    assert_eq!(pdus(&items), vec![(pdu(b"0123456789")[..6].to_vec(), 0, 7)]);
    // too little of it for the protocol
    let toy = Toy { min_pdu: 8, ..TOY };
    let items = split_at(&toy, &mut Splitter::new(true, 100, 0), &pdu(b"0123456789")[..6], &[]);
    assert_eq!(notes(&items), vec![("TRUNCATED".to_string(), 0, 6)]);
    assert_eq!(text(get(&note_of(&items, "TRUNCATED").params, "case")), Some("inside_frame"));
    // not even a length
    let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &[MAGIC], &[]);
    assert_eq!(notes(&items), vec![("TRUNCATED".to_string(), 0, 1)]);
    assert_eq!(text(get(&note_of(&items, "TRUNCATED").params, "case")), Some("not_a_frame"));
}

// ------------------------------------------------------------------------------------------------ resync

#[test]
fn an_unsynced_start_skips_to_the_first_plausible_pdu() {
    // a capture that started mid-connection, at stream offset 1000
    let mut data = vec![1u8, 2, 3, 0, MAGIC, 0, 0]; // a magic with length 0 is not plausible
    data.extend(wire(&[b"hello", b"x"]));
    let items = split_at(&TOY, &mut Splitter::new(false, 100, 1000), &data, &[]);
    assert_eq!(notes(&items), vec![("SKIPPED".to_string(), 1000, 7)]);
    assert_eq!(pdus(&items), vec![(pdu(b"hello"), 1007, 0), (pdu(b"x"), 1015, 0)]);
}

#[test]
fn an_unsynced_start_found_byte_by_byte() {
    let mut data = vec![9u8, 9, MAGIC];
    data.extend(pdu(b"abc"));
    let cuts: Vec<usize> = (1..data.len()).collect();
    let items = split_at(&TOY, &mut Splitter::new(false, 100, 0), &data, &cuts);
    // "A5 A5 00 03": the first magic claims 0xA500 bytes, above the limit: not a start
    assert_eq!(notes(&items), vec![("SKIPPED".to_string(), 0, 3)]);
    assert_eq!(pdus(&items), vec![(pdu(b"abc"), 3, 0)]);
}

#[test]
fn without_a_resync_the_rest_of_the_stream_is_skipped() {
    let mut data = vec![0u8; 5];
    data.extend(wire(&[b"never", b"seen"]));
    let items = split_at(&Bare, &mut Splitter::new(false, 100, 0), &data, &[3, 9]);
    assert!(pdus(&items).is_empty());
    assert_eq!(notes(&items), vec![("SKIPPED".to_string(), 0, data.len() as i64)]);
}

#[test]
fn a_bad_size_mid_stream_is_noted_and_skipped_to_the_next_pdu() {
    let mut data = pdu(b"good");
    let bad_at = data.len() as i64;
    data.extend([MAGIC, 0, 0, 0xEE]); // length 0, then a stray byte
    data.extend(pdu(b"again"));
    let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &data, &[]);
    assert_eq!(pdus(&items), vec![(pdu(b"good"), 0, 0), (pdu(b"again"), bad_at + 4, 0)]);
    assert_eq!(notes(&items), vec![("BAD_SIZE".to_string(), bad_at, 4), ("SKIPPED".to_string(), bad_at, 4)]);
    let bad = note_of(&items, "BAD_SIZE");
    assert_eq!(get(&bad.details, "length"), Some(&Value::Int(0)));
    assert_eq!(text(get(&bad.details, "head_hex")), Some("a50000ee"));
    assert_eq!(get(&bad.params, "limit"), Some(&Value::Int(100)));
}

// ------------------------------------------------------------------------------------------------ oversized

#[test]
fn an_oversized_pdu_is_noted_and_never_buffered_whole() {
    let mut data = pdu(&[0x11; 500]); // 503 bytes, limit 64
    data.extend(pdu(b"small"));
    let mut sp = Splitter::new(true, 64, 0);
    let mut items = Vec::new();
    for (k, chunk) in data.chunks(10).enumerate() {
        sp.feed(&TOY, chunk, k as f64, k as i64, &mut items);
        assert!(sp.buffered().len() <= 64 + 10);
    }
    sp.finish(&TOY, 0.0, 0, &mut items);
    let over = note_of(&items, "OVERSIZED");
    assert_eq!(
        (over.offset, get(&over.details, "length"), get(&over.params, "limit")),
        (0, Some(&Value::Int(500)), Some(&Value::Int(64)))
    );
    // the body's bytes hold no magic: the resync skips them all and finds the small PDU
    assert_eq!(pdus(&items), vec![(pdu(b"small"), 503, 0)]);
}

#[test]
fn an_oversized_pdu_with_a_readable_head_gives_the_head_and_skips_the_rest() {
    let toy = Toy { heads: true, ..TOY };
    let big = pdu(&[0x22; 200]); // 203 bytes, limit 50
    let mut data = big.clone();
    data.extend(pdu(b"next"));
    let mut sp = Splitter::new(true, 50, 0);
    let mut items = Vec::new();
    for (k, chunk) in data.chunks(16).enumerate() {
        sp.feed(&toy, chunk, k as f64, k as i64, &mut items);
        assert!(sp.buffered().len() <= 16);
    }
    let heads: Vec<(Vec<u8>, i64, i64, bool)> = items
        .iter()
        .filter_map(
            |i| if let Split::Pdu(p) = i { Some((p.data.clone(), p.offset, p.missing, p.oversized)) } else { None },
        )
        .collect();
    assert_eq!(heads, vec![(big[..3].to_vec(), 0, 200, true), (pdu(b"next"), 203, 0, false)]);
    assert_eq!(notes(&items), vec![("OVERSIZED".to_string(), 0, 4)]);
    assert!(sp.synced);
}

#[test]
fn a_gap_inside_the_skipped_rest_of_an_oversized_pdu_is_absorbed() {
    let toy = Toy { heads: true, ..TOY };
    let big = pdu(&[0x33; 100]); // 103 bytes, limit 20
    let mut sp = Splitter::new(true, 20, 0);
    let mut items = Vec::new();
    sp.feed(&toy, &big[..30], 0.0, 0, &mut items);
    sp.gap(&toy, 40, 1.0, 1, &mut items); // inside the 73 bytes still to skip
    sp.feed(&toy, &big[70..], 2.0, 2, &mut items);
    sp.feed(&toy, &pdu(b"ok"), 3.0, 3, &mut items);
    assert!(sp.synced, "the skipped rest ended on a PDU boundary");
    assert_eq!(pdus(&items), vec![(big[..3].to_vec(), 0, 100), (pdu(b"ok"), 103, 0)]);
}

// ------------------------------------------------------------------------------------------------ foreign

#[test]
fn tls_at_the_stream_start_is_the_framings_foreign_kind() {
    let hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&TOY, &hello[..3], 0.0, 0, &mut items);
    assert!(items.is_empty(), "fewer than 4 bytes: not decided yet");
    sp.feed(&TOY, &hello[3..], 1.0, 1, &mut items);
    assert_eq!(notes(&items), vec![("TOY_FOREIGN".to_string(), 0, hello.len() as i64)]);
    let n = note_of(&items, "TOY_FOREIGN");
    assert_eq!(text(get(&n.details, "protocol")), Some("TLS (Toy over TLS)"));
    assert_eq!(text(get(&n.details, "head_hex")), Some("1603010200010001fc0303"));
    assert_eq!(sp.foreign.as_deref(), Some("TLS (Toy over TLS)"));
    // the rest of the stream is neither buffered nor framed, and the end says nothing more
    sp.feed(&TOY, &pdu(b"looks like a pdu"), 2.0, 2, &mut items);
    sp.gap(&TOY, 100, 3.0, 3, &mut items);
    sp.feed(&TOY, &pdu(b"again"), 4.0, 4, &mut items);
    sp.finish(&TOY, 5.0, 5, &mut items);
    assert_eq!(items.len(), 1);
    assert!(sp.buffered().is_empty());
}

#[test]
fn http_and_ssh_at_the_stream_start() {
    for (head, protocol_is_ssh) in
        [(&b"GET /admin HTTP/1.1\r\n"[..], false), (b"PRI * HTTP/2.0\r\n", false), (b"SSH-2.0-OpenSSH_9.6\r\n", true)]
    {
        let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), head, &[]);
        assert_eq!(notes(&items), vec![("TOY_FOREIGN".to_string(), 0, head.len() as i64)]);
        let expected = sniff_foreign_protocol(&TOY, head).expect("foreign");
        assert_eq!(text(get(&note_of(&items, "TOY_FOREIGN").details, "protocol")), Some(expected));
        assert_eq!(expected == "SSH", protocol_is_ssh);
        assert!(pdus(&items).is_empty());
    }
}

#[test]
fn sniffing_recognises_exactly_the_documented_heads() {
    let tls = TOY.tls_name();
    for minor in 0u8..=4 {
        assert_eq!(sniff_foreign_protocol(&TOY, &[0x16, 0x03, minor]), Some(tls), "{minor}");
    }
    // TLS 1.x record versions stop at 3.4; 0x16 0x02 is SSL 2-era nothing; an alert record is not a handshake
    assert_eq!(sniff_foreign_protocol(&TOY, &[0x16, 0x03, 0x05]), None);
    assert_eq!(sniff_foreign_protocol(&TOY, &[0x16, 0x02, 0x01]), None);
    assert_eq!(sniff_foreign_protocol(&TOY, &[0x15, 0x03, 0x01]), None);
    assert_eq!(sniff_foreign_protocol(&TOY, &[0x16, 0x03]), None);
    for http in [&b"GET "[..], b"POST", b"PUT ", b"HEAD", b"HTTP", b"OPTI", b"DELE", b"PATC", b"CONN", b"PRI "] {
        assert!(sniff_foreign_protocol(&TOY, http).is_some(), "{http:?}");
        assert!(sniff_foreign_protocol(&TOY, &http[..3]).is_none(), "{http:?}");
    }
    assert_eq!(sniff_foreign_protocol(&TOY, b"SSH-2.0"), Some("SSH"));
    assert_eq!(sniff_foreign_protocol(&TOY, b"ssh-2.0"), None);
    assert_eq!(sniff_foreign_protocol(&TOY, b"get /"), None);
    assert_eq!(sniff_foreign_protocol(&TOY, &pdu(b"abc")), None);
}

#[test]
fn tls_after_the_stream_start_is_a_bad_size_naming_it() {
    let mut data = pdu(b"first");
    let at = data.len() as i64;
    data.extend(b"\x16\x03\x03\x00\x10");
    let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &data, &[]);
    assert_eq!(pdus(&items), vec![(pdu(b"first"), 0, 0)]);
    let bad = note_of(&items, "BAD_SIZE");
    assert_eq!(bad.offset, at);
    assert_eq!(text(get(&bad.params, "foreign")), Some(TOY.tls_name()));
    assert!(!items.iter().any(|i| matches!(i, Split::Note(n) if n.kind == "TOY_FOREIGN")));
}

#[test]
fn a_splitter_not_at_offset_zero_does_not_sniff() {
    // a synced splitter starting at offset 10 is not at the stream start: no foreign check there
    let items = split_at(&TOY, &mut Splitter::new(true, 100, 10), b"GET / HTTP/1.1\r\n", &[]);
    assert!(!items.iter().any(|i| matches!(i, Split::Note(n) if n.kind == "TOY_FOREIGN")));
    assert_eq!(note_of(&items, "BAD_SIZE").offset, 10);
}

// ------------------------------------------------------------------------------------------------ PROXY

#[test]
fn proxy_v1_header_byte_by_byte() {
    let header = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 6650\r\n";
    let mut data = header.to_vec();
    data.extend(wire(&[b"after", b"proxy"]));
    let cuts: Vec<usize> = (1..data.len()).collect();
    let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &data, &cuts);
    let h = header.len() as i64;
    assert_eq!(notes(&items), vec![("PROXY_HEADER".to_string(), 0, h)]);
    assert_eq!(
        text(get(&note_of(&items, "PROXY_HEADER").details, "header")),
        Some(std::str::from_utf8(header).unwrap())
    );
    assert_eq!(pdus(&items), vec![(pdu(b"after"), h, 0), (pdu(b"proxy"), h + 8, 0)]);
}

#[test]
fn proxy_v1_header_without_crlf_is_cut_at_108_bytes() {
    // the v1 header is at most 107 bytes + CRLF: a longer line ends at 108 bytes
    let mut data = b"PROXY UNKNOWN ".to_vec();
    data.resize(108, b'x');
    data.extend(pdu(b"p"));
    let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &data, &[50]);
    assert_eq!(notes(&items), vec![("PROXY_HEADER".to_string(), 0, 108)]);
    assert_eq!(pdus(&items), vec![(pdu(b"p"), 108, 0)]);
}

#[test]
fn proxy_v2_header_length_from_its_length_field() {
    // signature (12), version/command 0x21, family TCP over IPv4 0x11, length 12: 4+4 addresses, 2+2 ports
    let mut header = PROXY_V2_SIGNATURE.to_vec();
    assert_eq!(header.len(), 12);
    header.extend([0x21, 0x11, 0x00, 0x0c]);
    header.extend([10, 0, 0, 1, 10, 0, 0, 2]);
    header.extend(56324u16.to_be_bytes());
    header.extend(6650u16.to_be_bytes());
    let mut data = header.clone();
    data.extend(pdu(b"v2"));
    for cuts in [vec![], vec![5], vec![14], vec![20, 28]] {
        let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &data, &cuts);
        assert_eq!(notes(&items), vec![("PROXY_HEADER".to_string(), 0, 28)], "{cuts:?}");
        assert_eq!(pdus(&items), vec![(pdu(b"v2"), 28, 0)], "{cuts:?}");
    }
}

#[test]
fn a_proxy_header_is_only_looked_for_at_the_stream_start() {
    let mut data = pdu(b"x");
    data.extend(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n");
    let items = split_at(&TOY, &mut Splitter::new(true, 100, 0), &data, &[]);
    assert!(!items.iter().any(|i| matches!(i, Split::Note(n) if n.kind == "PROXY_HEADER")));
    assert_eq!(note_of(&items, "BAD_SIZE").offset, 4);
}
