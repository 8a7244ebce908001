//! The transport stages on plain data, without Python: packet bytes → segments, reassembly of reordered,
//! retransmitted and lost segments, and splitting with a toy framing (2-byte length prefix): no protocol's
//! knowledge in the generic layers, no panic on any input.

use pulsar_dissect_engine::name;
use pulsar_dissect_engine::transport::net::{tcp_segment, Ip, Segment, ACK, FIN, RST, SYN};
use pulsar_dissect_engine::transport::reassembly::{Config, Reassembler, StreamEvent};
use pulsar_dissect_engine::transport::splitter::{BadLength, Framing, PduLength, Split, Splitter};
use pulsar_dissect_engine::value::entry;

fn ipv4_tcp(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12] = 0x08; // IPv4
    let total = 20 + 20 + payload.len();
    p.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        6,
        0,
        0,
        10,
        0,
        0,
        1,
        10,
        0,
        0,
        2,
    ]);
    p.extend_from_slice(&40000u16.to_be_bytes());
    p.extend_from_slice(&6650u16.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&0u32.to_be_bytes());
    p.extend_from_slice(&[0x50, flags, 0xFF, 0xFF, 0, 0, 0, 0]);
    p.extend_from_slice(payload);
    p
}

#[test]
fn segments_from_packet_bytes() {
    let pkt = ipv4_tcp(1000, 0x18, b"hello");
    let s = tcp_segment(1, 1.0, 1, &pkt, pkt.len()).expect("a TCP segment");
    assert_eq!(
        (s.src, s.src_port, s.dst_port, s.seq, s.payload),
        (Ip::V4([10, 0, 0, 1]), 40000, 6650, 1000, &b"hello"[..])
    );
    // a snaplen cut: the rest of the payload is missing, not invented
    let cut = tcp_segment(1, 1.0, 1, &pkt[..pkt.len() - 2], pkt.len()).expect("a TCP segment");
    assert_eq!((cut.payload, cut.missing_tail), (&b"hel"[..], 2));
    // every prefix and every linktype: never a panic
    for lt in [0, 1, 12, 14, 101, 108, 113, 228, 229, 276, 999] {
        for n in 0..pkt.len() {
            let _ = tcp_segment(1, 1.0, lt, &pkt[..n], pkt.len() + 7);
        }
    }
    assert_eq!(Ip::parse("::ffff:10.0.0.1").map(|ip| ip.to_string()), Some("::ffff:10.0.0.1".to_string()));
    assert_eq!(Ip::parse("2001:db8:0:0:0:0:0:1").map(|ip| ip.to_string()), Some("2001:db8::1".to_string()));
    assert_eq!(Ip::parse("2001:db8:0:1:1:1:1:1").map(|ip| ip.to_string()), Some("2001:db8:0:1:1:1:1:1".to_string()));
}

fn seg(idx: i64, from_client: bool, seq: u32, flags: u16, payload: &[u8]) -> Segment<'_> {
    let (c, s) = (Ip::V4([10, 0, 0, 1]), Ip::V4([10, 0, 0, 2]));
    let (src, src_port, dst, dst_port) = if from_client { (c, 40000, s, 6650) } else { (s, 6650, c, 40000) };
    Segment {
        packet_index: idx,
        timestamp: idx as f64,
        src,
        src_port,
        dst,
        dst_port,
        seq,
        ack: 0,
        flags,
        window: 1000,
        payload,
        missing_tail: 0,
    }
}

fn stream(events: &[StreamEvent], side: usize) -> (Vec<u8>, i64) {
    let (mut data, mut lost) = (Vec::new(), 0);
    for ev in events {
        match ev {
            StreamEvent::Data { side: s, data: d, offset, .. } if *s == side => {
                assert_eq!(*offset as usize, data.len() + lost as usize);
                data.extend_from_slice(d);
            }
            StreamEvent::Gap { side: s, length, .. } if *s == side => lost += length,
            _ => {}
        }
    }
    (data, lost)
}

#[test]
fn reordered_retransmitted_and_lost_segments() {
    let body: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let mut r = Reassembler::new(Config { ooo_wait_packets: 5, ..Config::default() });
    let mut out = Vec::new();
    r.feed(&seg(1, true, 99, SYN, b""), &mut out);
    r.feed(&seg(2, false, 499, SYN | ACK, b""), &mut out);
    let pieces: Vec<(u32, &[u8])> = body.chunks(100).enumerate().map(|(i, c)| (100 + 100 * i as u32, c)).collect();
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.swap(3, 7); // reordered
    order.insert(10, 2); // retransmitted
    for (k, &i) in order.iter().enumerate() {
        r.feed(&seg(3 + k as i64, true, pieces[i].0, ACK, pieces[i].1), &mut out);
    }
    let (data, lost) = stream(&out, 0);
    assert_eq!((data, lost), (body.clone(), 0));
    assert_eq!(r.stats().retransmitted_bytes, 100);
    // a lost segment: a gap once the hole waited for more than 5 later segments
    let mut r = Reassembler::new(Config { ooo_wait_packets: 5, ..Config::default() });
    let mut out = Vec::new();
    r.feed(&seg(1, true, 99, SYN, b""), &mut out);
    for (k, p) in pieces.iter().enumerate().filter(|(k, _)| *k != 4) {
        r.feed(&seg(2 + k as i64, true, p.0, ACK, p.1), &mut out);
    }
    r.feed(&seg(99, true, 3100, FIN | ACK, b""), &mut out);
    r.finish(&mut out);
    let (data, lost) = stream(&out, 0);
    assert_eq!(lost, 100);
    assert!(out.iter().any(|e| matches!(e, StreamEvent::Gap { reason: "missing segment", .. })));
    assert_eq!(data.len(), 2900);
    assert!(matches!(out.last(), Some(StreamEvent::Closed { .. })));
}

#[test]
fn out_of_order_bytes_are_capped() {
    let mut r = Reassembler::new(Config { max_buffered: 1000, ..Config::default() });
    let mut out = Vec::new();
    r.feed(&seg(1, true, 99, SYN, b""), &mut out);
    let chunk = [7u8; 400];
    for k in 1..10u32 {
        r.feed(&seg(1 + k as i64, true, 100 + 400 * k, ACK, &chunk), &mut out); // the first 400 bytes never come
    }
    assert!(r.stats().max_buffered_bytes <= 1200);
    assert!(out.iter().any(|e| matches!(e, StreamEvent::Gap { reason: "buffer limit", length: 400, .. })));
}

/// Out-of-order bytes held over every connection are capped: the connection holding bytes the longest gives up
/// its holes (a BufferDropped, then its gap and its bytes), the others keep theirs.
#[test]
fn the_total_of_out_of_order_bytes_is_capped() {
    let mut r = Reassembler::new(Config { max_buffered_total: 1000, ..Config::default() });
    let mut out = Vec::new();
    let chunk = [7u8; 400];
    for port in 0..3u16 {
        let mut s = seg(1, true, 99, SYN, b"");
        s.src_port = 40000 + port;
        r.feed(&s, &mut out);
        let mut s = seg(2, true, 500, ACK, &chunk); // bytes 100..500 never come
        s.src_port = 40000 + port;
        r.feed(&s, &mut out);
    }
    let dropped: Vec<u64> = out
        .iter()
        .filter_map(|e| match e {
            StreamEvent::BufferDropped { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect();
    assert_eq!(dropped, vec![1]); // 1200 bytes held > 1000: the first holder gives up
    assert!(out
        .iter()
        .any(|e| matches!(e, StreamEvent::Gap { conn: 1, reason: "total buffer limit", length: 400, .. })));
    assert!(out.iter().any(|e| matches!(e, StreamEvent::Data { conn: 1, offset: 400, .. })));
    assert_eq!(r.stats().max_buffered_total_bytes, 800);
}

/// Bytes on the wire the stream does not carry are said: other bytes sent again, a RST's payload, bytes after
/// the FIN.
#[test]
fn ignored_bytes_are_events() {
    let kinds = |out: &[StreamEvent]| -> Vec<(&'static str, i64, i64)> {
        out.iter()
            .filter_map(|e| match e {
                StreamEvent::Ignored { kind, offset, length, .. } => Some((*kind, *offset, *length)),
                _ => None,
            })
            .collect()
    };
    let mut r = Reassembler::new(Config::default());
    let mut out = Vec::new();
    r.feed(&seg(1, true, 99, SYN, b""), &mut out);
    r.feed(&seg(2, true, 100, ACK, b"abcd"), &mut out);
    r.feed(&seg(3, true, 100, ACK, b"abXd"), &mut out);
    r.feed(&seg(4, true, 102, ACK, b"cdef"), &mut out); // the same "cd": no conflict
    r.feed(&seg(5, true, 106, ACK | FIN, b"gh"), &mut out);
    r.feed(&seg(6, true, 109, ACK, b"zz"), &mut out);
    assert_eq!(kinds(&out), vec![("RETRANSMISSION_CONFLICT", 0, 4), ("DATA_AFTER_FIN", 9, 2)]);
    assert_eq!(stream(&out, 0).0, b"abcdefgh");

    let mut r = Reassembler::new(Config::default());
    let mut out = Vec::new();
    r.feed(&seg(1, true, 99, SYN, b""), &mut out);
    r.feed(&seg(2, true, 100, ACK, b"abcd"), &mut out);
    r.feed(&seg(3, true, 104, RST, b"xyz"), &mut out);
    assert_eq!(kinds(&out), vec![("DATA_ON_RST", 4, 3)]);
    assert_eq!(stream(&out, 0).0, b"abcd");
}

/// ``[LENGTH u16][body]``: LENGTH counts what follows it; 0 is a bad size.
struct Toy;

impl Framing for Toy {
    fn pdu_length(&self, buf: &[u8], max_size: usize) -> PduLength {
        if buf.len() < 2 {
            return PduLength::NeedMore;
        }
        let n = u16::from_be_bytes([buf[0], buf[1]]) as usize;
        if n == 0 || n + 2 > max_size {
            let kind = if n == 0 { "BAD_SIZE" } else { "OVERSIZED" };
            return PduLength::Bad(BadLength {
                kind: kind.into(),
                details: vec![entry(name!("length"), n as i64)],
                params: vec![],
            });
        }
        PduLength::Complete(n + 2)
    }
}

fn pdus(items: &[Split]) -> Vec<(Vec<u8>, i64)> {
    items
        .iter()
        .filter_map(|i| match i {
            Split::Pdu(p) => Some((p.data.clone(), p.missing)),
            _ => None,
        })
        .collect()
}

#[test]
fn splitting_with_a_toy_framing() {
    let mut wire = Vec::new();
    for body in [&b"abc"[..], b"", b"defgh"] {
        wire.extend_from_slice(&(body.len() as u16).to_be_bytes());
        wire.extend_from_slice(body);
    }
    // byte by byte: the same PDUs; the empty one has a bad size and is skipped (the toy cannot resync)
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    for b in wire.chunks(1) {
        sp.feed(&Toy, b, 0.0, 0, &mut items);
    }
    sp.finish(&Toy, 1.0, 1, &mut items);
    assert_eq!(pdus(&items)[0], (b"\x00\x03abc".to_vec(), 0));
    assert!(items.iter().any(|i| matches!(i, Split::Note(n) if n.kind == "BAD_SIZE")));
    // a gap inside a PDU: the PDU with its missing bytes, then the next one found by its length
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&Toy, b"\x00\x05ab", 0.0, 0, &mut items);
    sp.gap(&Toy, 2, 1.0, 1, &mut items);
    sp.feed(&Toy, b"e\x00\x01z", 2.0, 2, &mut items);
    assert_eq!(pdus(&items), vec![(b"\x00\x05ab".to_vec(), 3), (b"\x00\x01z".to_vec(), 0)]);
    // TLS at the start of a stream: the protocol's foreign kind, the bytes not buffered
    let mut sp = Splitter::new(true, 100, 0);
    let mut items = Vec::new();
    sp.feed(&Toy, b"\x16\x03\x01\x02\x00\x01", 0.0, 0, &mut items);
    assert!(matches!(&items[0], Split::Note(n) if n.kind == "FOREIGN_PROTOCOL"));
    assert!(sp.buffered().is_empty());
    // random bytes, random cuts and gaps: never a panic, bounded buffer
    let mut x: u64 = 88172645463325252;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..200 {
        let mut sp = Splitter::new(next() % 2 == 0, 64, 0);
        let mut items = Vec::new();
        for _ in 0..20 {
            let n = (next() % 40) as usize;
            let data: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            if next() % 5 == 0 {
                sp.gap(&Toy, (next() % 50) as i64 + 1, 0.0, 0, &mut items);
            } else {
                sp.feed(&Toy, &data, 0.0, 0, &mut items);
            }
            assert!(sp.buffered().len() <= 64 + 40);
        }
        sp.finish(&Toy, 0.0, 0, &mut items);
    }
}
