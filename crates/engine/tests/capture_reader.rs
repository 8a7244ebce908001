//! The capture reader (`capture::Reader`) on files built here byte by byte: classic pcap in both byte orders
//! and both resolutions, pcapng sections, interfaces and every packet block kind, gzip members, damaged and
//! hostile files, and reads in pieces of every size. Timestamps are chosen exactly representable (k + a
//! binary fraction), so the expected floats are independent of how the reader divides.

use pulsar_dissect_engine::capture::source::{Foreign, SliceSource, SourceError};
use pulsar_dissect_engine::capture::{Note, NoteValue, Reader, StartError, MAX_RECORD_SIZE};

// ------------------------------------------------------------------------------------------------ helpers

fn text(error: SourceError) -> Result<String, Foreign> {
    match error {
        SourceError::Gzip(text) => Ok(text),
        SourceError::Io(error) => Ok(error.to_string()),
        SourceError::Foreign(error) => Err(error),
    }
}

fn start(data: &[u8], piece: usize) -> Result<Reader, String> {
    let source = SliceSource { data: data.to_vec(), pos: 0, piece };
    Reader::start(Box::new(source), "mem", text).map_err(|e| match e {
        StartError::Capture(text) => text,
        StartError::Source(_) => "source".to_owned(),
    })
}

/// One packet as read: (index, timestamp, linktype, orig_len, bytes).
type Got = (u64, f64, i64, u64, Vec<u8>);

fn read_all(data: &[u8], piece: usize) -> (Vec<Got>, Reader) {
    let mut r = start(data, piece).expect("a capture");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().ok().flatten() {
        out.push((p.index, p.timestamp, p.linktype, p.orig_len, r.data(&p).to_vec()));
    }
    (out, r)
}

fn ids(r: &Reader) -> Vec<&'static str> {
    r.notes.iter().map(|n| n.id).collect()
}

fn note<'a>(r: &'a Reader, id: &str) -> &'a Note {
    r.notes.iter().find(|n| n.id == id).unwrap_or_else(|| panic!("no {id} in {:?}", r.notes))
}

fn param<'a>(n: &'a Note, key: &str) -> &'a NoteValue {
    &n.params.iter().find(|(k, _)| *k == key).unwrap_or_else(|| panic!("no {key} in {n:?}")).1
}

#[derive(Clone, Copy)]
enum Order {
    Le,
    Be,
}

fn u16b(o: Order, v: u16) -> [u8; 2] {
    match o {
        Order::Le => v.to_le_bytes(),
        Order::Be => v.to_be_bytes(),
    }
}

fn u32b(o: Order, v: u32) -> [u8; 4] {
    match o {
        Order::Le => v.to_le_bytes(),
        Order::Be => v.to_be_bytes(),
    }
}

/// A classic pcap global header: `magic` written in `o` (so a reader sees the swapped value for Be).
fn pcap_header(o: Order, magic: u32, major: u16, snaplen: u32, network: u32) -> Vec<u8> {
    let mut d = u32b(o, magic).to_vec();
    d.extend(u16b(o, major));
    d.extend(u16b(o, 4));
    d.extend([0u8; 8]); // thiszone, sigfigs
    d.extend(u32b(o, snaplen));
    d.extend(u32b(o, network));
    d
}

/// A pcap record: seconds, fraction, captured length, original length, then the bytes.
fn pcap_record(o: Order, sec: u32, frac: u32, data: &[u8], orig_len: u32) -> Vec<u8> {
    let mut d = Vec::new();
    for v in [sec, frac, data.len() as u32, orig_len] {
        d.extend(u32b(o, v));
    }
    d.extend_from_slice(data);
    d
}

fn pad4(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
}

/// A pcapng block: type, total length, body (padded), total length.
fn block(o: Order, kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    pad4(&mut body);
    let total = 12 + body.len() as u32;
    let mut d = u32b(o, kind).to_vec();
    d.extend(u32b(o, total));
    d.extend(body);
    d.extend(u32b(o, total));
    d
}

fn shb(o: Order, major: u16) -> Vec<u8> {
    let mut body = u32b(o, 0x1A2B3C4D).to_vec();
    body.extend(u16b(o, major));
    body.extend(u16b(o, 0));
    body.extend([0xFF; 8]); // section length unknown
    block(o, 0x0A0D0D0A, &body)
}

fn option(o: Order, code: u16, value: &[u8]) -> Vec<u8> {
    let mut d = u16b(o, code).to_vec();
    d.extend(u16b(o, value.len() as u16));
    d.extend_from_slice(value);
    pad4(&mut d);
    d
}

/// An Interface Description Block with its options (opt_endofopt appended).
fn idb(o: Order, linktype: u16, snaplen: u32, options: &[Vec<u8>]) -> Vec<u8> {
    let mut body = u16b(o, linktype).to_vec();
    body.extend([0, 0]);
    body.extend(u32b(o, snaplen));
    for opt in options {
        body.extend(opt);
    }
    if !options.is_empty() {
        body.extend([0, 0, 0, 0]);
    }
    block(o, 1, &body)
}

fn epb(o: Order, interface: u32, ts: u64, data: &[u8], orig_len: u32) -> Vec<u8> {
    let mut body = u32b(o, interface).to_vec();
    body.extend(u32b(o, (ts >> 32) as u32));
    body.extend(u32b(o, ts as u32));
    body.extend(u32b(o, data.len() as u32));
    body.extend(u32b(o, orig_len));
    body.extend_from_slice(data);
    block(o, 6, &body)
}

fn spb(o: Order, orig_len: u32, data: &[u8]) -> Vec<u8> {
    let mut body = u32b(o, orig_len).to_vec();
    body.extend_from_slice(data);
    block(o, 3, &body)
}

/// The obsolete Packet Block: interface id (16 bits), drops count, timestamp, lengths, data.
fn opb(o: Order, interface: u16, ts: u64, data: &[u8], orig_len: u32) -> Vec<u8> {
    let mut body = u16b(o, interface).to_vec();
    body.extend(u16b(o, 0));
    body.extend(u32b(o, (ts >> 32) as u32));
    body.extend(u32b(o, ts as u32));
    body.extend(u32b(o, data.len() as u32));
    body.extend(u32b(o, orig_len));
    body.extend_from_slice(data);
    block(o, 2, &body)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A gzip member written by hand with every optional header field: FHCRC, FEXTRA, FNAME, FCOMMENT.
fn gzip_all_header_fields(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut d = vec![0x1f, 0x8b, 8, 0x02 | 0x04 | 0x08 | 0x10, 0, 0, 0, 0, 0, 3];
    d.extend(6u16.to_le_bytes());
    d.extend(b"AB\x02\x00xy"); // one extra subfield
    d.extend(b"capture.pcap\0");
    d.extend(b"a comment\0");
    d.extend([0x12, 0x34]); // header CRC16 (not checked by Python's gzip either)
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    d.extend(e.finish().unwrap());
    d.extend(crc32fast::hash(data).to_le_bytes());
    d.extend((data.len() as u32).to_le_bytes());
    d
}

// ------------------------------------------------------------------------------------------------ pcap

#[test]
fn pcap_big_endian_microseconds() {
    let mut d = pcap_header(Order::Be, 0xA1B2C3D4, 2, 65535, 1);
    d.extend(pcap_record(Order::Be, 7, 250_000, b"first", 5));
    d.extend(pcap_record(Order::Be, 8, 999_999, b"", 0));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets[0], (1, 7.25, 1, 5, b"first".to_vec()));
    assert_eq!((packets[1].0, packets[1].4.len()), (2, 0));
    assert!((packets[1].1 - 8.999_999).abs() < 1e-9, "{}", packets[1].1);
    assert_eq!(
        (r.kind, r.linktype, r.snaplen, r.packets, r.truncated.clone()),
        ("pcap", Some(1), Some(65535), 2, None)
    );
}

#[test]
fn pcap_nanosecond_magic_in_both_byte_orders() {
    for o in [Order::Le, Order::Be] {
        let mut d = pcap_header(o, 0xA1B23C4D, 2, 1 << 18, 101);
        d.extend(pcap_record(o, 10, 500_000_000, b"ns", 2));
        d.extend(pcap_record(o, 11, 125_000_000, b"ns2", 3));
        let (packets, r) = read_all(&d, 0);
        assert_eq!(packets, vec![(1, 10.5, 101, 2, b"ns".to_vec()), (2, 11.125, 101, 3, b"ns2".to_vec())]);
        assert!(r.notes.is_empty());
    }
}

#[test]
fn pcap_snaplen_cut_records_keep_their_original_length() {
    let mut d = pcap_header(Order::Le, 0xA1B2C3D4, 2, 64, 1);
    d.extend(pcap_record(Order::Le, 1, 0, &[0xAB; 64], 1514));
    let (packets, r) = read_all(&d, 0);
    assert_eq!((packets[0].3, packets[0].4.len()), (1514, 64));
    assert_eq!(r.snaplen, Some(64));
}

#[test]
fn pcap_fcs_length_in_the_link_type_field_is_stripped() {
    // bit 26 says the FCS length is present; bits 28-31 give it in 16-bit words: 2 words = 4 bytes
    let network = 1 | 0x0400_0000 | (2 << 28);
    let mut d = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, network);
    d.extend(pcap_record(Order::Le, 1, 0, b"payload+FCS!", 12));
    let (packets, r) = read_all(&d, 0);
    assert_eq!((packets[0].2, packets[0].3, packets[0].4.clone()), (1, 8, b"payload+".to_vec()));
    assert_eq!((r.linktype, r.fcs_len), (Some(1), Some(4)));
    assert!(r.notes.is_empty());
}

#[test]
fn pcap_reserved_link_type_bits_are_noted() {
    let network = 1 | 0x0001_0000;
    let d = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, network);
    let (_, r) = read_all(&d, 0);
    assert_eq!(ids(&r), vec!["capture.linktype_reserved_bits"]);
    assert_eq!(param(&r.notes[0], "field"), &NoteValue::Int(network as i64));
    assert_eq!(r.linktype, Some(1));
}

#[test]
fn pcap_other_major_version_is_noted() {
    let mut d = pcap_header(Order::Le, 0xA1B2C3D4, 3, 65535, 1);
    d.extend(pcap_record(Order::Le, 1, 0, b"x", 1));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets.len(), 1);
    assert_eq!(param(note(&r, "capture.pcap_version"), "version"), &NoteValue::Text("3.4".to_owned()));
}

#[test]
fn modified_pcap_records_have_eight_more_header_bytes() {
    for o in [Order::Le, Order::Be] {
        let mut d = pcap_header(o, 0xA1B2CD34, 2, 65535, 1);
        for (sec, data) in [(3u32, &b"abc"[..]), (4, b"defg")] {
            d.extend(pcap_record(o, sec, 500_000, data, data.len() as u32));
            let at = d.len() - data.len();
            d.splice(at..at, [0xEE; 8]); // ifindex, protocol, pkt_type, pad: after the 16 usual bytes
        }
        let (packets, r) = read_all(&d, 0);
        assert_eq!(packets, vec![(1, 3.5, 1, 3, b"abc".to_vec()), (2, 4.5, 1, 4, b"defg".to_vec())]);
        assert_eq!(ids(&r), vec!["capture.modified_pcap"]);
    }
}

#[test]
fn unsupported_link_type_is_noted_once_and_packets_still_read() {
    let mut d = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 9);
    d.extend(pcap_record(Order::Le, 1, 0, b"ppp", 3));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets[0].2, 9);
    let n = note(&r, "capture.unsupported_linktype");
    assert_eq!(param(n, "linktype"), &NoteValue::Text("9 (PPP)".to_owned()));
    // a link type without a known name is its number
    let (_, r) = read_all(&pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 4242), 0);
    assert_eq!(param(note(&r, "capture.unsupported_linktype"), "linktype"), &NoteValue::Text("4242".to_owned()));
}

#[test]
fn pcap_files_joined_with_cat_are_read_on() {
    // the second file is big-endian nanoseconds with another link type
    let mut first = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    first.extend(pcap_record(Order::Le, 1, 500_000, b"one", 3));
    first.extend(pcap_record(Order::Le, 2, 0, b"two", 3));
    let mut d = first.clone();
    d.extend(pcap_header(Order::Be, 0xA1B23C4D, 2, 65535, 113));
    d.extend(pcap_record(Order::Be, 3, 250_000_000, b"three", 5));
    for piece in [0, 1, 5, 24] {
        let (packets, r) = read_all(&d, piece);
        assert_eq!(
            packets,
            vec![
                (1, 1.5, 1, 3, b"one".to_vec()),
                (2, 2.0, 1, 3, b"two".to_vec()),
                (3, 3.25, 113, 5, b"three".to_vec())
            ],
            "piece {piece}"
        );
        let n = note(&r, "capture.concatenated");
        assert_eq!((param(n, "offset"), param(n, "packet")), (&NoteValue::Int(first.len() as i64), &NoteValue::Int(3)));
        assert!(r.truncated.is_none());
    }
}

#[test]
fn pcap_cut_in_a_record_keeps_the_packets_before_it() {
    let mut d = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    d.extend(pcap_record(Order::Le, 1, 0, b"whole", 5));
    let whole_len = d.len();
    d.extend(pcap_record(Order::Le, 2, 0, b"cut short", 9));
    for cut in whole_len + 1..d.len() {
        let (packets, r) = read_all(&d[..cut], 0);
        assert_eq!(packets.len(), 1, "cut {cut}");
        assert_eq!(r.packets, 1);
        let message = r.truncated.clone().expect("truncated");
        // the message names where the record starts
        assert!(message.contains(&whole_len.to_string()), "{message}");
    }
    // cut exactly after a record: a clean end
    let (packets, r) = read_all(&d[..whole_len], 0);
    assert_eq!((packets.len(), r.truncated), (1, None));
}

#[test]
fn pcap_global_header_shorter_than_24_bytes_does_not_start() {
    let d = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    for n in 4..24 {
        assert!(start(&d[..n], 0).is_err(), "{n}");
    }
    assert!(start(&d[..3], 0).is_err());
    assert!(start(&d, 0).is_ok());
}

#[test]
fn pcap_record_claiming_more_than_the_limit_stops_without_allocating() {
    let mut d = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    d.extend(pcap_record(Order::Le, 1, 0, b"ok", 2));
    for v in [2u32, 0, MAX_RECORD_SIZE as u32 + 1, 100] {
        d.extend(v.to_le_bytes());
    }
    d.extend([0u8; 100]);
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets.len(), 1);
    assert!(r.truncated.is_some());
    assert!(r.buffer_peak < 3 << 20, "{}", r.buffer_peak);
}

// ------------------------------------------------------------------------------------------------ pcapng

/// A pcapng file of one section: an Ethernet interface at nanoseconds, two packets.
fn simple_pcapng(o: Order) -> Vec<u8> {
    let mut d = shb(o, 1);
    d.extend(idb(o, 1, 65535, &[option(o, 9, &[9])]));
    d.extend(epb(o, 0, 5_250_000_000, b"abc", 60));
    d.extend(epb(o, 0, 6_000_000_001, b"defgh", 5));
    d
}

#[test]
fn pcapng_in_both_byte_orders() {
    for o in [Order::Le, Order::Be] {
        let (packets, r) = read_all(&simple_pcapng(o), 0);
        assert_eq!(packets[0], (1, 5.25, 1, 60, b"abc".to_vec()));
        assert_eq!((packets[1].0, packets[1].4.clone()), (2, b"defgh".to_vec()));
        assert!((packets[1].1 - 6.000_000_001).abs() < 1e-12, "{}", packets[1].1); // one nanosecond after 6 s
        assert_eq!((r.kind, r.packets, r.truncated.clone()), ("pcapng", 2, None));
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }
}

#[test]
fn pcapng_default_resolution_is_microseconds() {
    let o = Order::Le;
    let mut d = shb(o, 1);
    d.extend(idb(o, 1, 0, &[]));
    d.extend(epb(o, 0, 2_500_000, b"x", 1));
    let (packets, _) = read_all(&d, 0);
    assert_eq!(packets[0].1, 2.5);
}

#[test]
fn pcapng_binary_resolution_and_time_offset() {
    // if_tsresol 0x94: 2^-20 s; if_tsoffset 100 s
    let o = Order::Be;
    let mut d = shb(o, 1);
    let offset = match o {
        Order::Le => 100i64.to_le_bytes(),
        Order::Be => 100i64.to_be_bytes(),
    };
    d.extend(idb(o, 1, 0, &[option(o, 9, &[0x94]), option(o, 14, &offset)]));
    d.extend(epb(o, 0, (3 << 20) + (1 << 19), b"x", 1));
    let (packets, _) = read_all(&d, 0);
    assert_eq!(packets[0].1, 103.5);
}

#[test]
fn pcapng_interfaces_each_with_their_link_type_and_resolution() {
    let o = Order::Le;
    let mut d = shb(o, 1);
    d.extend(idb(o, 1, 0, &[option(o, 2, b"eth0\0\0\0\0"), option(o, 9, &[3])])); // name, milliseconds
    d.extend(idb(o, 113, 0, &[])); // microseconds
    d.extend(epb(o, 1, 1_500_000, b"on 1", 4));
    d.extend(epb(o, 0, 2_250, b"on 0", 4));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets, vec![(1, 1.5, 113, 4, b"on 1".to_vec()), (2, 2.25, 1, 4, b"on 0".to_vec())]);
    assert!(r.notes.is_empty());
}

#[test]
fn simple_packet_block_uses_the_first_interface_and_the_last_time() {
    let o = Order::Le;
    let mut d = shb(o, 1);
    d.extend(idb(o, 1, 8, &[])); // snaplen 8
    d.extend(epb(o, 0, 7_000_000, b"timed", 5));
    d.extend(spb(o, 100, b"0123456789ab")); // 100 on the wire, 12 in the block, snaplen 8
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets[1], (2, 7.0, 1, 100, b"01234567".to_vec()));
    assert_eq!(ids(&r), vec!["capture.simple_block_time"]);
}

#[test]
fn simple_packet_block_before_any_interface_is_skipped() {
    let o = Order::Be;
    let mut d = shb(o, 1);
    d.extend(spb(o, 3, b"abc"));
    d.extend(idb(o, 1, 0, &[]));
    d.extend(epb(o, 0, 1_000_000, b"real", 4));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets, vec![(1, 1.0, 1, 4, b"real".to_vec())]);
    assert_eq!(ids(&r), vec!["capture.simple_block_skipped"]);
}

#[test]
fn obsolete_packet_block() {
    for o in [Order::Le, Order::Be] {
        let mut d = shb(o, 1);
        d.extend(idb(o, 101, 0, &[]));
        d.extend(idb(o, 1, 0, &[option(o, 9, &[6])]));
        d.extend(opb(o, 1, 9_750_000, b"old", 40));
        let (packets, r) = read_all(&d, 0);
        assert_eq!(packets, vec![(1, 9.75, 1, 40, b"old".to_vec())]);
        assert!(r.notes.is_empty());
    }
}

#[test]
fn unknown_blocks_are_skipped_and_noted_once_by_type() {
    let o = Order::Le;
    let mut d = shb(o, 1);
    d.extend(idb(o, 1, 0, &[]));
    d.extend(block(o, 0x1234_5678, b"whatever"));
    d.extend(block(o, 4, &[0, 0, 0, 0])); // name resolution: normal, silent
    d.extend(block(o, 5, &[0; 12])); // interface statistics: normal, silent
    d.extend(epb(o, 0, 0, b"1", 1));
    d.extend(block(o, 0x1234_5678, b"again"));
    d.extend(block(o, 0xBAD, b"custom"));
    d.extend(epb(o, 0, 0, b"2", 1));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(
        packets.iter().map(|p| (p.0, p.4.clone())).collect::<Vec<_>>(),
        vec![(1, b"1".to_vec()), (2, b"2".to_vec())]
    );
    assert_eq!(ids(&r), vec!["capture.block_skipped", "capture.block_skipped"]);
    assert_eq!(
        (param(&r.notes[0], "type"), param(&r.notes[0], "block")),
        (&NoteValue::Int(0x1234_5678), &NoteValue::Nothing)
    );
    assert_eq!(
        (param(&r.notes[1], "type"), param(&r.notes[1], "block")),
        (&NoteValue::Int(0xBAD), &NoteValue::Text("Custom Block".to_owned()))
    );
}

#[test]
fn packet_on_an_undefined_interface_is_skipped_and_noted() {
    let o = Order::Le;
    let mut d = shb(o, 1);
    d.extend(idb(o, 1, 0, &[]));
    d.extend(epb(o, 3, 0, b"nowhere", 7));
    d.extend(epb(o, 0, 0, b"here", 4));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets.iter().map(|p| (p.0, p.4.clone())).collect::<Vec<_>>(), vec![(1, b"here".to_vec())]);
    assert_eq!(param(note(&r, "capture.undefined_interface"), "interface"), &NoteValue::Text("interface 3".to_owned()));
}

#[test]
fn a_new_section_resets_the_interfaces_and_may_change_byte_order() {
    let mut d = shb(Order::Le, 1);
    d.extend(idb(Order::Le, 1, 0, &[]));
    d.extend(epb(Order::Le, 0, 1_000_000, b"s1", 2));
    d.extend(shb(Order::Be, 1));
    d.extend(epb(Order::Be, 0, 2_000_000, b"lost", 4)); // interface 0 of section 2 is not defined yet
    d.extend(idb(Order::Be, 113, 0, &[]));
    d.extend(epb(Order::Be, 0, 3_000_000, b"s2", 2));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets, vec![(1, 1.0, 1, 2, b"s1".to_vec()), (2, 3.0, 113, 2, b"s2".to_vec())]);
    assert_eq!(
        param(note(&r, "capture.undefined_interface"), "interface"),
        &NoteValue::Text("interface 0 of section 2".to_owned())
    );
}

#[test]
fn pcapng_other_major_version_is_noted() {
    let o = Order::Le;
    let mut d = shb(o, 2);
    d.extend(idb(o, 1, 0, &[]));
    d.extend(epb(o, 0, 0, b"x", 1));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets.len(), 1);
    let n = note(&r, "capture.pcapng_version");
    assert_eq!((param(n, "section"), param(n, "version")), (&NoteValue::Int(1), &NoteValue::Text("2.0".to_owned())));
}

#[test]
fn pcapng_fcs_length_option_is_stripped() {
    let o = Order::Le;
    let mut d = shb(o, 1);
    d.extend(idb(o, 1, 0, &[option(o, 13, &[4])]));
    d.extend(epb(o, 0, 0, b"frameFCS!", 9));
    let (packets, _) = read_all(&d, 0);
    assert_eq!((packets[0].3, packets[0].4.clone()), (5, b"frame".to_vec()));
}

#[test]
fn enhanced_block_claiming_more_than_it_holds_is_cut_at_its_end() {
    let o = Order::Le;
    let mut d = shb(o, 1);
    d.extend(idb(o, 1, 0, &[]));
    let mut b = epb(o, 0, 0, b"12345678", 8);
    b[8 + 12..8 + 16].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes()); // the captured length
    d.extend(b);
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets[0].4, b"12345678");
    assert_eq!(ids(&r), vec!["capture.caplen_beyond_block"]);
    assert!(r.buffer_peak < 3 << 20);
}

#[test]
fn short_blocks_are_noted_and_skipped() {
    let o = Order::Le;
    let mut d = shb(o, 1);
    d.extend(block(o, 1, &[1, 0, 0, 0])); // an IDB of 4 body bytes: its link type is unknown (-1)
    d.extend(block(o, 6, &[0; 16])); // an EPB of 16 body bytes
    d.extend(epb(o, 0, 0, b"x", 1));
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets.iter().map(|p| (p.2, p.4.clone())).collect::<Vec<_>>(), vec![(-1, b"x".to_vec())]);
    let blocks: Vec<&NoteValue> =
        r.notes.iter().filter(|n| n.id == "capture.short_block").map(|n| param(n, "block")).collect();
    assert_eq!(
        blocks,
        vec![
            &NoteValue::Text("Interface Description Block".to_owned()),
            &NoteValue::Text("Enhanced Packet Block".to_owned())
        ]
    );
}

#[test]
fn pcapng_damaged_blocks_end_the_reading_after_the_good_packets() {
    let o = Order::Le;
    let good = simple_pcapng(o);
    // trailing length different from the leading one
    let mut d = good.clone();
    let mut b = epb(o, 0, 0, b"bad", 3);
    let n = b.len();
    b[n - 4] ^= 0x04;
    d.extend(b);
    let (packets, r) = read_all(&d, 0);
    assert_eq!((packets.len(), r.truncated.is_some()), (2, true));
    // a length that is not a multiple of 4, and one below 12
    for length in [13u32, 8, 0] {
        let mut d = good.clone();
        d.extend(6u32.to_le_bytes());
        d.extend(length.to_le_bytes());
        d.extend([0u8; 32]);
        let (packets, r) = read_all(&d, 0);
        assert_eq!((packets.len(), r.truncated.is_some()), (2, true), "{length}");
    }
    // every cut inside the last block
    let last = epb(o, 0, 0, b"last one", 8);
    let mut d = good.clone();
    d.extend(&last);
    for cut in good.len() + 1..d.len() {
        let (packets, r) = read_all(&d[..cut], 0);
        assert_eq!((packets.len(), r.truncated.is_some()), (2, true), "cut {cut}");
    }
}

#[test]
fn pcapng_section_header_problems_do_not_start() {
    let good = shb(Order::Le, 1);
    let mut no_magic = good.clone();
    no_magic[8..12].copy_from_slice(&[1, 2, 3, 4]);
    let mut short = good.clone();
    short[4..8].copy_from_slice(&24u32.to_le_bytes());
    let mut huge = good.clone();
    huge[4..8].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    for d in [&no_magic, &short, &huge, &good[..11].to_vec(), &good[..20].to_vec()] {
        assert!(start(d, 0).is_err(), "{d:?}");
    }
    assert!(start(&good, 0).is_ok());
}

// ------------------------------------------------------------------------------------------------ gzip

#[test]
fn gzip_of_pcapng_in_members_cut_anywhere() {
    let plain = simple_pcapng(Order::Be);
    let (want, _) = read_all(&plain, 0);
    for cut in [1, 28, 40, plain.len() - 1] {
        let mut d = gzip(&plain[..cut]);
        d.extend(gzip(&plain[cut..]));
        let (packets, r) = read_all(&d, 7);
        assert_eq!(packets, want, "cut {cut}");
        assert!(r.compressed && r.truncated.is_none());
    }
}

#[test]
fn gzip_member_with_every_optional_header_field() {
    let mut plain = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    plain.extend(pcap_record(Order::Le, 5, 0, b"gz", 2));
    let d = gzip_all_header_fields(&plain);
    for piece in [0, 1, 3] {
        let (packets, r) = read_all(&d, piece);
        assert_eq!(packets, vec![(1, 5.0, 1, 2, b"gz".to_vec())], "piece {piece}");
        assert!(r.compressed && r.truncated.is_none());
    }
}

#[test]
fn gzip_cut_short_keeps_the_packets_before_the_cut() {
    let mut plain = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    for k in 0..200u32 {
        plain.extend(pcap_record(Order::Le, k, 0, &k.to_le_bytes().repeat(20), 80));
    }
    let full = gzip(&plain);
    let d = &full[..full.len() - 8]; // the trailer is missing
    let (packets, r) = read_all(d, 0);
    assert_eq!(packets.len(), 200, "all the data inflated");
    assert!(r.compressed);
    assert!(r.truncated.is_some());
    let d = &full[..full.len() / 2];
    let (packets, r) = read_all(d, 0);
    assert!(packets.len() < 200);
    assert!(packets.iter().enumerate().all(|(i, p)| p.0 == i as u64 + 1 && p.4 == (i as u32).to_le_bytes().repeat(20)));
    assert!(r.truncated.is_some());
}

#[test]
fn gzip_followed_by_something_else_is_a_bad_gzip_file() {
    let mut plain = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    plain.extend(pcap_record(Order::Le, 1, 0, b"a", 1));
    let mut d = gzip(&plain);
    d.extend(b"trailing junk");
    let (packets, r) = read_all(&d, 0);
    assert_eq!(packets.len(), 1);
    assert!(r.truncated.unwrap_or_default().contains("BadGzipFile"));
}

// ------------------------------------------------------------------------------------------------ pieces

/// A pcapng file with every block kind, two sections and both byte orders.
fn everything() -> Vec<u8> {
    let mut d = shb(Order::Le, 1);
    d.extend(idb(Order::Le, 1, 0, &[option(Order::Le, 9, &[9])]));
    d.extend(epb(Order::Le, 0, 1_500_000_000, &[1; 37], 37));
    d.extend(block(Order::Le, 0x4000_0BAD, b"custom"));
    d.extend(spb(Order::Le, 3, b"spb"));
    d.extend(shb(Order::Be, 1));
    d.extend(idb(Order::Be, 276, 0, &[option(Order::Be, 9, &[0x81])])); // half seconds
    d.extend(opb(Order::Be, 0, 9, &[2; 70], 70));
    d.extend(epb(Order::Be, 0, 10, b"", 0));
    d
}

#[test]
fn reads_in_pieces_of_every_size_give_the_same_packets() {
    let d = everything();
    let (want, r) = read_all(&d, 0);
    assert_eq!(
        want.iter().map(|p| (p.0, p.1, p.2, p.4.len())).collect::<Vec<_>>(),
        vec![(1, 1.5, 1, 37), (2, 1.5, 1, 3), (3, 4.5, 276, 70), (4, 5.0, 276, 0)]
    );
    assert!(r.truncated.is_none());
    for piece in 1..=d.len() + 1 {
        let (packets, r) = read_all(&d, piece);
        assert_eq!(packets, want, "piece {piece}");
        assert!(r.truncated.is_none(), "piece {piece}");
    }
    // and the same through gzip
    let gz = gzip(&d);
    for piece in [1, 2, 3, 10, 64, 1000] {
        assert_eq!(read_all(&gz, piece).0, want, "gzip piece {piece}");
    }
}

#[test]
fn closing_a_reader_ends_it() {
    let mut r = start(&simple_pcapng(Order::Le), 0).expect("a capture");
    assert!(r.next_packet().ok().flatten().is_some());
    r.close();
    assert!(r.next_packet().ok().flatten().is_none());
}

// ------------------------------------------------------------------------------------------------ memory

#[test]
fn what_the_reader_holds_does_not_grow_with_the_file() {
    // 30,000 records of 300 bytes (about 10 MB) as pcap, gzipped pcap and pcapng: the buffer holds a read
    // (CHUNK_SIZE, 1 MiB) and a record, never the file
    let packet: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    let mut pcap = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    let mut pcapng = shb(Order::Le, 1);
    pcapng.extend(idb(Order::Le, 1, 65535, &[]));
    for i in 0..30_000u32 {
        pcap.extend(pcap_record(Order::Le, i, 0, &packet, 300));
        pcapng.extend(epb(Order::Le, 0, i as u64 * 1_000_000, &packet, 300));
    }
    assert!(pcap.len() > 9 << 20);
    for (name, data) in [("pcap", pcap.clone()), ("pcap.gz", gzip(&pcap)), ("pcapng", pcapng)] {
        let (packets, r) = read_all(&data, 0);
        assert_eq!(packets.len(), 30_000, "{name}");
        assert!(packets.iter().all(|p| p.4 == packet), "{name}");
        assert!(r.buffer_peak < 3 << 20, "{name}: {}", r.buffer_peak);
    }
}

#[test]
fn a_record_larger_than_one_read_is_read_whole() {
    let big: Vec<u8> = (0..(3 * 4096 + 7) * 256).map(|i| i as u8).collect(); // 3 MiB and more: several reads
    let mut d = pcap_header(Order::Le, 0xA1B2C3D4, 2, 65535, 1);
    d.extend(pcap_record(Order::Le, 1, 0, &[b'a'; 60], 60));
    d.extend(pcap_record(Order::Le, 2, 0, &big, big.len() as u32));
    d.extend(pcap_record(Order::Le, 3, 0, &[b'c'; 60], 60));
    for (name, data) in [("pcap", d.clone()), ("pcap.gz", gzip(&d))] {
        for piece in [0, 4096] {
            let (packets, r) = read_all(&data, piece);
            let got: Vec<&[u8]> = packets.iter().map(|p| p.4.as_slice()).collect();
            assert_eq!(got, [&[b'a'; 60][..], &big[..], &[b'c'; 60][..]], "{name}, pieces of {piece}");
            assert_eq!(packets[1].3, big.len() as u64);
            assert!(r.truncated.is_none(), "{name}");
            assert!(r.buffer_peak < big.len() + (2 << 20), "{name}: {}", r.buffer_peak);
        }
    }
}
