//! TCP reassembly (`transport::reassembly`): the StreamEvents of in-order, reordered, retransmitted,
//! overlapping and lost segments, connection opening and closing, the caps, and sequence wrap-around. The
//! property tests feed permutations of a segmented stream and check the invariant that the original bytes
//! come out, each exactly once and in order.

mod rng;

use pulsar_dissect_engine::analysis::bounded::DropCounter;
use pulsar_dissect_engine::budget::MemoryBudget;
use pulsar_dissect_engine::name;
use pulsar_dissect_engine::transport::net::{Ip, Segment, ACK, FIN, RST, SYN};
use pulsar_dissect_engine::transport::reassembly::{BufferCap, Config, Reassembler, StreamEvent};
use pulsar_dissect_engine::value::{Map, Value};
use rng::Rng;

const CLIENT: Ip = Ip::V4([10, 0, 0, 1]);
const SERVER: Ip = Ip::V4([10, 0, 0, 2]);
const CPORT: u16 = 40000;
const SPORT: u16 = 6650;

/// A segment of the connection from CLIENT:`cport` (`from_client`) or to it.
fn seg_port(idx: i64, cport: u16, from_client: bool, seq: u32, ack: u32, flags: u16, payload: &[u8]) -> Segment<'_> {
    let (src, src_port, dst, dst_port) =
        if from_client { (CLIENT, cport, SERVER, SPORT) } else { (SERVER, SPORT, CLIENT, cport) };
    Segment {
        packet_index: idx,
        timestamp: idx as f64,
        src,
        src_port,
        dst,
        dst_port,
        seq,
        ack,
        flags,
        window: 1000,
        payload,
        missing_tail: 0,
    }
}

fn c(idx: i64, seq: u32, flags: u16, payload: &[u8]) -> Segment<'_> {
    seg_port(idx, CPORT, true, seq, 0, flags, payload)
}

fn s(idx: i64, seq: u32, flags: u16, payload: &[u8]) -> Segment<'_> {
    seg_port(idx, CPORT, false, seq, 0, flags, payload)
}

/// A reassembler and the events it gave so far.
struct Run {
    r: Reassembler,
    out: Vec<StreamEvent>,
}

impl Run {
    fn new(cfg: Config) -> Run {
        Run { r: Reassembler::new(cfg), out: Vec::new() }
    }
    fn default() -> Run {
        Run::new(Config::default())
    }
    fn feed(&mut self, seg: Segment) -> &mut Run {
        self.r.feed(&seg, &mut self.out);
        self
    }
    fn finish(&mut self) {
        self.r.finish(&mut self.out);
    }
    fn take(&mut self) -> Vec<StreamEvent> {
        std::mem::take(&mut self.out)
    }
}

/// The bytes of one direction of one connection, checking that Data and Gap events tile the stream in order:
/// (bytes, with lost bytes as `None`).
fn stream_of(events: &[StreamEvent], conn: u64, side: usize) -> Vec<Option<u8>> {
    let mut bytes = Vec::new();
    for ev in events {
        match ev {
            StreamEvent::Data { conn: c, side: s, data, offset, .. } if *c == conn && *s == side => {
                assert_eq!(*offset as usize, bytes.len(), "Data out of order");
                bytes.extend(data.iter().map(|b| Some(*b)));
            }
            StreamEvent::Gap { conn: c, side: s, offset, length, .. } if *c == conn && *s == side => {
                assert_eq!(*offset as usize, bytes.len(), "Gap out of order");
                assert!(*length > 0);
                bytes.extend(std::iter::repeat_n(None, *length as usize));
            }
            _ => {}
        }
    }
    bytes
}

/// The delivered bytes of one direction when nothing was lost.
fn whole(events: &[StreamEvent], conn: u64, side: usize) -> Vec<u8> {
    stream_of(events, conn, side).into_iter().map(|b| b.expect("no byte lost")).collect()
}

fn gaps(events: &[StreamEvent]) -> Vec<(u64, usize, i64, i64, &'static str)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Gap { conn, side, offset, length, reason, .. } => {
                Some((*conn, *side, *offset, *length, *reason))
            }
            _ => None,
        })
        .collect()
}

fn ignored(events: &[StreamEvent]) -> Vec<(usize, &'static str, i64, i64)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Ignored { side, kind, offset, length, .. } => Some((*side, *kind, *offset, *length)),
            _ => None,
        })
        .collect()
}

/// (conn, how) of every Closed.
fn closed(events: &[StreamEvent]) -> Vec<(u64, &'static str)> {
    events
        .iter()
        .filter_map(|e| if let StreamEvent::Closed { conn, how, .. } = e { Some((*conn, *how)) } else { None })
        .collect()
}

/// (conn id, mid_stream) of every Opened.
fn opened(events: &[StreamEvent]) -> Vec<(u64, bool)> {
    events
        .iter()
        .filter_map(|e| {
            if let StreamEvent::Opened { conn, mid_stream, .. } = e {
                Some((conn.id, *mid_stream))
            } else {
                None
            }
        })
        .collect()
}

fn data_count(events: &[StreamEvent]) -> usize {
    events.iter().filter(|e| matches!(e, StreamEvent::Data { .. })).count()
}

const CISN: u32 = 1000;
const SISN: u32 = 5000;

/// SYN, SYN-ACK, ACK.
fn handshake(run: &mut Run) {
    run.feed(c(1, CISN, SYN, b""));
    run.feed(s(2, SISN, SYN | ACK, b""));
    run.feed(c(3, CISN + 1, ACK, b""));
}

// ------------------------------------------------------------------------------------------------ opening

#[test]
fn handshake_data_both_ways_and_fin_close() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"hello"));
    run.feed(s(5, SISN + 1, ACK, b"world!"));
    run.feed(c(6, CISN + 6, FIN | ACK, b""));
    run.feed(s(7, SISN + 7, FIN | ACK, b""));
    let out = run.take();
    let StreamEvent::Opened { conn, mid_stream, packet, .. } = &out[0] else { panic!("{:?}", out[0]) };
    assert_eq!(
        (conn.id, conn.a.ip, conn.a.port, conn.b.ip, conn.b.port, conn.saw_syn, *mid_stream, *packet),
        (1, CLIENT, CPORT, SERVER, SPORT, true, false, 1)
    );
    assert_eq!(whole(&out, 1, 0), b"hello");
    assert_eq!(whole(&out, 1, 1), b"world!");
    let Some(StreamEvent::Closed { conn, how, bytes, isn, first_fin_from, rst_from, saw_syn, packet, .. }) = out.last()
    else {
        panic!()
    };
    assert_eq!(
        (*conn, *how, *bytes, *isn, *first_fin_from, *rst_from, *saw_syn, *packet),
        (1, "fin", [5, 6], [Some(CISN), Some(SISN)], Some(0), None, true, 7)
    );
    assert_eq!(run.r.open_connections(), Vec::<u64>::new());
}

#[test]
fn data_events_carry_their_packet_and_time() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(10, CISN + 1, ACK, b"ab"));
    run.feed(c(11, CISN + 3, ACK, b"cd"));
    let out = run.take();
    let got: Vec<(i64, i64, f64)> = out
        .iter()
        .filter_map(|e| {
            if let StreamEvent::Data { offset, packet, time, .. } = e {
                Some((*offset, *packet, *time))
            } else {
                None
            }
        })
        .collect();
    assert_eq!(got, vec![(0, 10, 10.0), (2, 11, 11.0)]);
}

#[test]
fn mid_stream_start_and_lone_acks_open_nothing() {
    let mut run = Run::default();
    run.feed(c(1, 777, ACK, b"")); // a lone ACK of an unknown connection
    assert!(run.out.is_empty());
    run.feed(c(2, 777, ACK, b"abc"));
    run.feed(s(3, 9000, ACK, b"xy"));
    let out = run.take();
    assert_eq!(opened(&out), vec![(1, true)]);
    assert_eq!(whole(&out, 1, 0), b"abc");
    assert_eq!(whole(&out, 1, 1), b"xy");
    let st = run.r.stats();
    assert_eq!((st.ignored_segments, st.connections, st.connections_mid_stream), (1, 1, 1));
}

#[test]
fn syn_ack_without_its_syn_makes_the_receiver_the_client() {
    let mut run = Run::default();
    // the SYN was not captured: the SYN-ACK's ACK says where the client's stream starts
    run.feed(seg_port(1, CPORT, false, SISN, CISN + 1, SYN | ACK, b""));
    run.feed(c(2, CISN + 1, ACK, b"req"));
    run.feed(s(3, SISN + 1, ACK, b"resp"));
    let out = run.take();
    let StreamEvent::Opened { conn, mid_stream, .. } = &out[0] else { panic!() };
    assert_eq!((conn.a.ip, conn.a.port, conn.saw_syn, *mid_stream), (CLIENT, CPORT, true, false));
    assert_eq!(whole(&out, 1, 0), b"req");
    assert_eq!(whole(&out, 1, 1), b"resp");
}

#[test]
fn mid_stream_bytes_before_the_first_seen_are_ignored() {
    let mut run = Run::default();
    run.feed(c(1, 1000, ACK, b"abcdef")); // stream offset 0 = seq 1000
    run.feed(c(2, 995, ACK, b"vwxyzabc")); // seq 995..1003: 5 bytes before the start, 3 seen already
    run.feed(c(3, 1006, ACK, b"g"));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"abcdefg");
    let st = run.r.stats();
    assert_eq!((st.bytes_before_start, st.retransmitted_bytes), (5, 3));
}

#[test]
fn syn_retransmission_opens_one_connection() {
    let mut run = Run::default();
    run.feed(c(1, CISN, SYN, b""));
    run.feed(c(2, CISN, SYN, b""));
    run.feed(s(3, SISN, SYN | ACK, b""));
    run.feed(c(4, CISN + 1, ACK, b"x"));
    let out = run.take();
    assert_eq!(opened(&out), vec![(1, false)]);
    assert_eq!(whole(&out, 1, 0), b"x");
    assert_eq!(run.r.stats().syn_retransmissions, 1);
}

#[test]
fn set_next_id_numbers_the_connections() {
    let mut run = Run::default();
    run.r.set_next_id(41);
    run.feed(c(1, CISN, SYN, b""));
    run.feed(seg_port(2, CPORT + 1, true, CISN, 0, SYN, b""));
    assert_eq!(opened(&run.out), vec![(41, false), (42, false)]);
    assert_eq!(run.r.next_id(), 43);
}

// ------------------------------------------------------------------------------------------------ order

#[test]
fn out_of_order_segment_waits_for_the_hole() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 6, ACK, b"world"));
    assert_eq!(data_count(&run.out), 0); // nothing until the hole fills
    run.feed(c(5, CISN + 1, ACK, b"hello"));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"helloworld");
    // the buffered piece comes out when the hole fills, at the filling packet
    let packets: Vec<i64> = out
        .iter()
        .filter_map(|e| if let StreamEvent::Data { packet, .. } = e { Some(*packet) } else { None })
        .collect();
    assert_eq!(packets, vec![5, 5]);
    assert_eq!(run.r.stats().out_of_order_segments, 1);
}

#[test]
fn identical_overlap_of_buffered_bytes_is_silent() {
    let mut run = Run::default();
    handshake(&mut run);
    let body = b"0123456789ABCDEF";
    run.feed(c(4, CISN + 1 + 5, ACK, &body[5..10])); // [5,10) buffered
    run.feed(c(5, CISN + 1 + 7, ACK, &body[7..12])); // [7,12): 3 bytes overlap, the same
    run.feed(c(6, CISN + 1, ACK, &body[..5]));
    run.feed(c(7, CISN + 1 + 12, ACK, &body[12..]));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), body);
    assert!(ignored(&out).is_empty());
    let st = run.r.stats();
    assert_eq!((st.overlap_bytes, st.inconsistent_overlaps, st.retransmitted_bytes), (3, 0, 3));
}

#[test]
fn conflicting_overlap_of_buffered_bytes_keeps_the_first_copy() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1 + 5, ACK, b"fghij")); // [5,10)
    run.feed(c(5, CISN + 1 + 7, ACK, b"XYZkl")); // [7,12): "hij" sent again as "XYZ"
    run.feed(c(6, CISN + 1, ACK, b"abcde"));
    let out = run.take();
    assert_eq!(ignored(&out), vec![(0, "RETRANSMISSION_CONFLICT", 7, 3)]);
    assert_eq!(whole(&out, 1, 0), b"abcdefghijkl");
    assert_eq!(run.r.stats().inconsistent_overlaps, 1);
}

#[test]
fn partial_overlap_with_delivered_bytes_delivers_only_the_new_ones() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abcdef"));
    run.feed(c(5, CISN + 1 + 3, ACK, b"defghi"));
    let out = run.take();
    let datas: Vec<(i64, Vec<u8>)> = out
        .iter()
        .filter_map(
            |e| if let StreamEvent::Data { offset, data, .. } = e { Some((*offset, data.to_vec())) } else { None },
        )
        .collect();
    assert_eq!(datas, vec![(0, b"abcdef".to_vec()), (6, b"ghi".to_vec())]);
    let st = run.r.stats();
    assert_eq!((st.retransmitted_bytes, st.overlap_bytes, st.inconsistent_overlaps), (3, 3, 0));
}

#[test]
fn conflicting_overlap_with_the_last_delivered_payload_is_reported() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abcdef"));
    run.feed(c(5, CISN + 1 + 2, ACK, b"CDefgh")); // offsets 2,3 differ
    let out = run.take();
    assert_eq!(ignored(&out), vec![(0, "RETRANSMISSION_CONFLICT", 2, 4)]);
    assert_eq!(whole(&out, 1, 0), b"abcdefgh");
}

#[test]
fn full_retransmission_delivers_nothing_twice() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abc"));
    run.feed(c(5, CISN + 4, ACK, b"def"));
    run.feed(c(6, CISN + 1, ACK, b"abc"));
    run.feed(c(7, CISN + 4, ACK, b"def"));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"abcdef");
    assert_eq!(data_count(&out), 2);
    let st = run.r.stats();
    assert_eq!((st.retransmitted_segments, st.retransmitted_bytes, st.delivered_bytes), (2, 6, 6));
}

#[test]
fn keepalive_without_data_is_counted() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abc"));
    run.feed(c(5, CISN + 3, ACK, b"")); // seq = next - 1, no data
    run.feed(c(6, CISN + 4, ACK, b"d"));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"abcd");
    assert_eq!(run.r.stats().keepalives, 1);
}

#[test]
fn one_byte_keepalive_repeating_the_last_byte_is_counted() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abc"));
    run.feed(c(5, CISN + 3, ACK, b"c"));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"abc");
    assert!(ignored(&out).is_empty());
    assert_eq!(run.r.stats().keepalives, 1);
}

/// A keep-alive's one byte is garbage by design (RFC 1122 4.2.3.6: "one garbage octet"; Windows sends 0x00).
/// Reporting it as a RETRANSMISSION_CONFLICT of the last delivered byte is a false finding.
#[test]
fn one_byte_keepalive_with_a_garbage_octet_is_not_a_conflict() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abc"));
    run.feed(c(5, CISN + 3, ACK, b"\x00"));
    let out = run.take();
    assert_eq!(run.r.stats().keepalives, 1);
    assert_eq!(ignored(&out), vec![]);
}

#[test]
fn zero_window_probes_are_counted() {
    let mut run = Run::default();
    handshake(&mut run);
    let mut zero = s(4, SISN + 1, ACK, b"");
    zero.window = 0; // the server's window is closed
    run.feed(zero);
    run.feed(c(5, CISN + 1, ACK, b"p")); // the probe: one new byte
    run.feed(c(6, CISN + 1, ACK, b"p")); // the probe sent again
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"p");
    let st = run.r.stats();
    assert_eq!((st.zero_window_probes, st.keepalives), (2, 0));
}

// ------------------------------------------------------------------------------------------------ loss

#[test]
fn a_hole_becomes_a_gap_after_more_than_ooo_wait_packets_segments() {
    let mut run = Run::new(Config { ooo_wait_packets: 2, ..Config::default() });
    handshake(&mut run);
    // bytes [0,10) never come; [10,15) arrives first (the hole's first segment), then 2 more
    run.feed(c(4, CISN + 11, ACK, b"ABCDE"));
    run.feed(c(5, CISN + 16, ACK, b"FGHIJ"));
    run.feed(c(6, CISN + 21, ACK, b"KLMNO"));
    assert!(gaps(&run.out).is_empty(), "waited for only 2 later segments");
    run.feed(c(7, CISN + 26, ACK, b"PQRST"));
    let out = run.take();
    assert_eq!(gaps(&out), vec![(1, 0, 0, 10, "missing segment")]);
    let bytes = stream_of(&out, 1, 0);
    assert_eq!(bytes.len(), 30);
    assert!(bytes[..10].iter().all(Option::is_none));
    assert_eq!(bytes[10..].iter().map(|b| b.unwrap()).collect::<Vec<u8>>(), b"ABCDEFGHIJKLMNOPQRST");
    assert_eq!((run.r.stats().gaps, run.r.stats().gap_bytes), (1, 10));
}

#[test]
fn a_hole_becomes_a_gap_after_the_hole_timeout() {
    let mut run = Run::new(Config { hole_timeout: 2.0, ..Config::default() });
    handshake(&mut run);
    run.feed(c(10, CISN + 1 + 4, ACK, b"late")); // at t = 10, [0,4) missing
    run.r.expire(Some(11.5), &mut run.out);
    assert!(gaps(&run.out).is_empty(), "1.5 s is within the timeout");
    run.r.expire(Some(12.5), &mut run.out);
    let out = run.take();
    assert_eq!(gaps(&out), vec![(1, 0, 0, 4, "missing segment")]);
    assert_eq!(stream_of(&out, 1, 0)[4..].iter().map(|b| b.unwrap()).collect::<Vec<u8>>(), b"late");
}

#[test]
fn end_of_capture_declares_holes_and_closes() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"ab"));
    run.feed(c(5, CISN + 1 + 7, ACK, b"hi")); // [2,7) missing
    run.finish();
    let out = run.take();
    assert_eq!(gaps(&out), vec![(1, 0, 2, 5, "capture ended")]);
    assert_eq!(closed(&out), vec![(1, "end_of_capture")]);
    let Some(StreamEvent::Closed { bytes, .. }) = out.last() else { panic!() };
    assert_eq!(*bytes, [9, 0]); // the stream's length, lost bytes included
}

#[test]
fn lost_bytes_before_a_fin_are_a_gap_when_the_connection_closes() {
    let mut run = Run::new(Config { close_wait_packets: 2, sweep_every: 1, ..Config::default() });
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abcde"));
    run.feed(c(5, CISN + 11, FIN | ACK, b"")); // the FIN at offset 10: [5,10) not seen
    run.feed(s(6, SISN + 1, FIN | ACK, b""));
    assert!(closed(&run.out).is_empty(), "the missing bytes may still come");
    // three more packets of the capture (another connection): more than close_wait_packets
    for k in 0..3 {
        run.feed(seg_port(7 + k, CPORT + 1, true, 1, 0, ACK, b"z"));
    }
    let out = run.take();
    assert_eq!(gaps(&out), vec![(1, 0, 5, 5, "connection closed")]);
    assert!(closed(&out).contains(&(1, "fin")));
}

#[test]
fn a_fin_before_the_data_it_ends_waits_for_that_data() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abcde"));
    run.feed(c(5, CISN + 11, FIN | ACK, b"")); // recorded before the last data segment
    run.feed(s(6, SISN + 1, FIN | ACK, b""));
    run.feed(c(7, CISN + 6, ACK, b"fghij"));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"abcdefghij");
    assert!(gaps(&out).is_empty());
    let Some(StreamEvent::Closed { how, bytes, first_fin_from, .. }) = out.last() else { panic!("{:?}", out.last()) };
    assert_eq!((*how, *bytes, *first_fin_from), ("fin", [10, 0], Some(0)));
}

#[test]
fn snaplen_cut_payload_is_a_snaplen_gap_in_place() {
    let mut run = Run::default();
    handshake(&mut run);
    let mut cut = c(4, CISN + 1, ACK, b"abc");
    cut.missing_tail = 7; // 10 bytes on the wire, 3 captured
    run.feed(cut);
    run.feed(c(5, CISN + 11, ACK, b"next"));
    let out = run.take();
    assert_eq!(gaps(&out), vec![(1, 0, 3, 7, "snaplen")]);
    let bytes = stream_of(&out, 1, 0);
    assert_eq!(bytes.len(), 14);
    assert_eq!(bytes[10..].iter().map(|b| b.unwrap()).collect::<Vec<u8>>(), b"next");
    assert_eq!(run.r.stats().snaplen_gaps, 1);
}

#[test]
fn snaplen_cut_out_of_order_segment_gives_its_gap_when_the_hole_fills() {
    let mut run = Run::default();
    handshake(&mut run);
    let mut cut = c(4, CISN + 1 + 4, ACK, b"ef");
    cut.missing_tail = 3; // [4,6) captured, [6,9) cut
    run.feed(cut);
    assert!(gaps(&run.out).is_empty());
    run.feed(c(5, CISN + 1, ACK, b"abcd"));
    run.feed(c(6, CISN + 10, ACK, b"jk"));
    let out = run.take();
    assert_eq!(gaps(&out), vec![(1, 0, 6, 3, "snaplen")]);
    let bytes = stream_of(&out, 1, 0);
    assert_eq!(bytes.iter().flatten().copied().collect::<Vec<u8>>(), b"abcdefjk");
}

// ------------------------------------------------------------------------------------------------ closing

#[test]
fn rst_closes_once_what_it_acknowledges_was_seen() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abc"));
    // the server's RST acknowledges 10 client bytes: [3,10) has not been seen yet
    run.feed(seg_port(5, CPORT, false, SISN + 1, CISN + 11, RST | ACK, b""));
    assert!(closed(&run.out).is_empty());
    run.feed(c(6, CISN + 4, ACK, b"defghij"));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"abcdefghij");
    let Some(StreamEvent::Closed { how, rst_from, first_fin_from, .. }) = out.last() else { panic!() };
    assert_eq!((*how, *rst_from, *first_fin_from), ("rst", Some(1), None));
}

#[test]
fn rst_payload_is_ignored_at_its_offset() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(s(4, SISN + 1, ACK, b"0123"));
    run.feed(s(5, SISN + 5, RST, b"junk!"));
    let out = run.take();
    assert_eq!(ignored(&out), vec![(1, "DATA_ON_RST", 4, 5)]);
    assert_eq!(whole(&out, 1, 1), b"0123");
    assert_eq!(closed(&out), vec![(1, "rst")]);
    assert_eq!(run.r.stats().rst_payload_bytes, 5);
}

#[test]
fn unsettled_rst_at_the_end_of_capture_closes_as_rst() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(seg_port(4, CPORT, false, SISN + 1, CISN + 51, RST | ACK, b"")); // acks 50 bytes never seen
    assert!(closed(&run.out).is_empty());
    run.finish();
    let out = run.take();
    assert_eq!(closed(&out), vec![(1, "rst")]);
}

#[test]
fn buffered_bytes_beyond_a_later_fin_are_data_after_fin() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abcde")); // [0,5)
    run.feed(c(5, CISN + 11, ACK, b"VWXYZ")); // [10,15) buffered
    run.feed(c(6, CISN + 6, FIN | ACK, b"fgh")); // [5,8) and the FIN at 8
    let out = run.take();
    assert_eq!(ignored(&out), vec![(0, "DATA_AFTER_FIN", 10, 5)]);
    assert_eq!(whole(&out, 1, 0), b"abcdefgh");
    assert_eq!(run.r.stats().bytes_after_fin, 5);
}

#[test]
fn data_straddling_the_fin_keeps_the_bytes_before_it() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, FIN | ACK, b"abc")); // FIN at offset 3
    run.feed(c(5, CISN + 2, ACK, b"bcdef")); // [1,6): "bc" old, [3,6) after the FIN
    let out = run.take();
    assert_eq!(ignored(&out), vec![(0, "DATA_AFTER_FIN", 3, 3)]);
    assert_eq!(whole(&out, 1, 0), b"abc");
}

#[test]
fn a_fin_on_one_side_only_closes_as_fin_at_the_end() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, FIN | ACK, b"bye"));
    assert!(closed(&run.out).is_empty(), "half-closed: the server may still send");
    run.feed(s(5, SISN + 1, ACK, b"ok"));
    run.finish();
    let out = run.take();
    assert_eq!(whole(&out, 1, 1), b"ok");
    let Some(StreamEvent::Closed { how, bytes, first_fin_from, .. }) = out.last() else { panic!() };
    assert_eq!((*how, *bytes, *first_fin_from), ("fin", [3, 2], Some(0)));
}

#[test]
fn segments_after_the_close_open_nothing() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"abc"));
    run.feed(c(5, CISN + 4, FIN | ACK, b""));
    run.feed(s(6, SISN + 1, FIN | ACK, b""));
    assert_eq!(closed(&run.out), vec![(1, "fin")]);
    run.feed(c(7, CISN + 5, ACK, b"")); // the last ACK
    run.feed(c(8, CISN + 1, ACK, b"abc")); // a late retransmission
    let out = run.take();
    assert_eq!(opened(&out), vec![(1, false)]);
    assert_eq!(run.r.stats().segments_after_close, 2);
    let (halves, pending, tombs) = run.r.table_sizes();
    assert_eq!((halves, pending, tombs), (0, 0, 2));
}

#[test]
fn a_new_syn_on_a_used_four_tuple_reopens_it() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"first"));
    run.feed(c(5, 70000, SYN, b"")); // another ISN: the port was reused
    run.feed(s(6, 80000, SYN | ACK, b""));
    run.feed(c(7, 70001, ACK, b"second"));
    let out = run.take();
    assert_eq!(opened(&out), vec![(1, false), (2, false)]);
    assert_eq!(closed(&out), vec![(1, "reused")]);
    assert_eq!(whole(&out, 1, 0), b"first");
    assert_eq!(whole(&out, 2, 0), b"second");
}

#[test]
fn a_syn_after_a_closed_connection_opens_a_new_one() {
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, FIN | ACK, b""));
    run.feed(s(5, SISN + 1, FIN | ACK, b""));
    run.feed(c(6, 90000, SYN, b""));
    run.feed(c(7, 90001, ACK, b"again"));
    let out = run.take();
    assert_eq!(opened(&out), vec![(1, false), (2, false)]);
    assert_eq!(closed(&out), vec![(1, "fin")]);
    assert_eq!(whole(&out, 2, 0), b"again");
}

// ------------------------------------------------------------------------------------------------ caps

#[test]
fn max_connections_evicts_the_oldest() {
    let mut run = Run::new(Config { max_connections: 2, ..Config::default() });
    for k in 0..3u16 {
        run.feed(seg_port(k as i64 + 1, CPORT + k, true, 100, 0, ACK, b"data"));
    }
    let out = run.take();
    assert_eq!(closed(&out), vec![(1, "evicted")]);
    // the eviction comes before the third connection's opening
    let at_closed = out.iter().position(|e| matches!(e, StreamEvent::Closed { .. })).unwrap();
    let at_third = out.iter().position(|e| matches!(e, StreamEvent::Opened { conn, .. } if conn.id == 3)).unwrap();
    assert!(at_closed < at_third);
    assert_eq!(run.r.open_connections(), vec![2, 3]);
}

#[test]
fn per_direction_buffer_limit_declares_the_hole() {
    let mut run = Run::new(Config { max_buffered: 100, ..Config::default() });
    handshake(&mut run);
    let body: Vec<u8> = (0..120u8).collect();
    // [0,10) never comes; 100 bytes buffered is at the limit, not above it
    run.feed(c(4, CISN + 11, ACK, &body[10..60]));
    run.feed(c(5, CISN + 61, ACK, &body[60..110]));
    assert!(gaps(&run.out).is_empty());
    run.feed(c(6, CISN + 111, ACK, &body[110..120]));
    let out = run.take();
    assert_eq!(gaps(&out), vec![(1, 0, 0, 10, "buffer limit")]);
    let bytes = stream_of(&out, 1, 0);
    assert_eq!(bytes[10..].iter().map(|b| b.unwrap()).collect::<Vec<u8>>(), &body[10..]);
    let st = run.r.stats();
    assert_eq!((st.buffer_limit_gaps, st.max_buffered_bytes), (1, 110));
}

#[test]
fn total_buffer_limit_drops_the_longest_holders_in_turn() {
    let mut run = Run::new(Config { max_buffered_total: 500, ..Config::default() });
    let chunk = [1u8; 300];
    for k in 0..3u16 {
        run.feed(seg_port(10 * k as i64 + 1, CPORT + k, true, 99, 0, SYN, b""));
        run.feed(seg_port(10 * k as i64 + 2, CPORT + k, true, 150, 0, ACK, &chunk));
        // [0,50) missing
    }
    let out = run.take();
    let drops: Vec<(u64, i64, u64)> = out
        .iter()
        .filter_map(|e| {
            if let StreamEvent::BufferDropped { conn, limit, dropped, .. } = e {
                Some((*conn, *limit, *dropped))
            } else {
                None
            }
        })
        .collect();
    // 600 > 500 at the second connection: the first gives up; again at the third: the second gives up
    assert_eq!(drops, vec![(1, 500, 1), (2, 500, 2)]);
    assert_eq!(gaps(&out), vec![(1, 0, 0, 50, "total buffer limit"), (2, 0, 0, 50, "total buffer limit")]);
    assert_eq!(stream_of(&out, 1, 0).len(), 350);
    assert!(stream_of(&out, 3, 0).is_empty(), "the third keeps its hole");
    let st = run.r.stats();
    assert_eq!((st.total_buffer_limit_gaps, st.max_buffered_total_bytes), (2, 300));
}

#[test]
fn the_memory_budget_shared_with_another_holder_drops_the_longest_holder() {
    // another holder (compressed chunks, say) has 300 of the 500 bytes; the reassembly's own cap is far
    let budget = MemoryBudget::new(500);
    let mut other = budget.reservation();
    assert!(other.try_grow(300));
    let mut run = Run::new(Config { budget: budget.clone(), ..Config::default() });
    let chunk = [1u8; 150];
    run.feed(seg_port(1, CPORT, true, 99, 0, SYN, b""));
    run.feed(seg_port(2, CPORT, true, 150, 0, ACK, &chunk)); // [0,50) missing: 150 held, 450 in all
    assert_eq!(budget.held(), 450);
    run.feed(seg_port(3, CPORT + 1, true, 99, 0, SYN, b""));
    run.feed(seg_port(4, CPORT + 1, true, 150, 0, ACK, &chunk)); // 600 in all: the first connection gives up
    let out = run.take();
    let drops: Vec<(u64, BufferCap, i64, u64)> = out
        .iter()
        .filter_map(|e| match e {
            StreamEvent::BufferDropped { conn, cap, limit, dropped, .. } => Some((*conn, *cap, *limit, *dropped)),
            _ => None,
        })
        .collect();
    assert_eq!(drops, vec![(1, BufferCap::MemoryBudget, 500, 1)]);
    assert_eq!(gaps(&out), vec![(1, 0, 0, 50, "memory budget")]);
    assert_eq!(stream_of(&out, 1, 0).len(), 200, "its bytes delivered after the gap");
    assert_eq!(budget.held(), 450, "the second connection's 150 and the other holder's 300");
    let st = run.r.stats();
    assert_eq!((st.memory_budget_gaps, st.total_buffer_limit_gaps), (1, 0));
    // the other holder lets go: the budget has room again, nothing more is dropped
    drop(other);
    run.feed(seg_port(5, CPORT + 2, true, 99, 0, SYN, b""));
    run.feed(seg_port(6, CPORT + 2, true, 150, 0, ACK, &chunk));
    assert!(gaps(&run.take()).is_empty());
    assert_eq!(budget.held(), 300);
    drop(run);
    assert_eq!(budget.held(), 0, "the reassembler's reservation is given back with it");
}

#[test]
fn finish_some_closes_the_oldest_first() {
    let mut run = Run::default();
    for k in 0..3u16 {
        run.feed(seg_port(k as i64 + 1, CPORT + k, true, 100, 0, ACK, b"x"));
    }
    assert!(!run.r.finish_some(1, &mut run.out));
    assert_eq!(closed(&run.out), vec![(1, "end_of_capture")]);
    assert!(run.r.finish_some(5, &mut run.out));
    assert_eq!(closed(&run.out), vec![(1, "end_of_capture"), (2, "end_of_capture"), (3, "end_of_capture")]);
    assert!(run.r.open_connections().is_empty());
}

// ------------------------------------------------------------------------------------------------ wrap-around

#[test]
fn sequence_numbers_wrap_at_two_to_the_32() {
    let isn = u32::MAX - 9; // the stream's byte 9 is at seq 0
    let mut run = Run::default();
    run.feed(c(1, isn, SYN, b""));
    let body: Vec<u8> = (0..40u8).collect();
    // in order up to the wrap, then two segments past it swapped
    run.feed(c(2, isn.wrapping_add(1), ACK, &body[..8]));
    run.feed(c(3, isn.wrapping_add(1 + 20), ACK, &body[20..40]));
    run.feed(c(4, isn.wrapping_add(1 + 8), ACK, &body[8..20]));
    run.feed(c(5, isn.wrapping_add(41), FIN | ACK, b""));
    run.finish();
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), body);
    assert!(gaps(&out).is_empty());
    let Some(StreamEvent::Closed { bytes, isn: isns, .. }) = out.last() else { panic!() };
    assert_eq!((*bytes, *isns), ([40, 0], [Some(isn), None]));
}

#[test]
fn mid_stream_start_just_below_the_wrap() {
    let mut run = Run::default();
    run.feed(c(1, u32::MAX - 1, ACK, b"ab")); // seq 2^32-2, 2^32-1
    run.feed(c(2, 3, ACK, b"fg")); // beyond a hole [2,5) at seq 0..3
    run.feed(c(3, 0, ACK, b"cde"));
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"abcdefg");
}

// ------------------------------------------------------------------------------------------------ properties

/// The stream cut in `sizes` pieces: (seq, bytes) from `isn + 1`.
fn pieces(body: &[u8], isn: u32, sizes: &[usize]) -> Vec<(u32, Vec<u8>)> {
    let mut at = 0;
    let mut out = Vec::new();
    for &n in sizes {
        let end = (at + n).min(body.len());
        out.push((isn.wrapping_add(1 + at as u32), body[at..end].to_vec()));
        at = end;
    }
    assert_eq!(at, body.len());
    out
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut all = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            all.push(q);
        }
    }
    all
}

#[test]
fn every_permutation_of_six_segments_reassembles() {
    let body = b"The quick brown fox jumps over the lazy dog";
    let segs = pieces(body, CISN, &[5, 9, 1, 12, 7, 9]);
    let orders = permutations(segs.len());
    assert_eq!(orders.len(), 720);
    for order in orders {
        let mut run = Run::default();
        run.feed(c(1, CISN, SYN, b""));
        for (k, &i) in order.iter().enumerate() {
            run.feed(c(2 + k as i64, segs[i].0, ACK, &segs[i].1));
        }
        let out = run.take();
        assert_eq!(whole(&out, 1, 0), body, "{order:?}");
        assert!(gaps(&out).is_empty());
    }
}

#[test]
fn every_permutation_with_a_fin_and_a_wrapping_isn_reassembles_and_closes() {
    let isn = u32::MAX - 15;
    let body: Vec<u8> = (b'a'..=b'z').collect();
    let mut segs = pieces(&body, isn, &[4, 6, 3, 8, 5]);
    let fin_seq = isn.wrapping_add(1 + body.len() as u32);
    segs.push((fin_seq, Vec::new())); // the FIN, placed anywhere
    for order in permutations(segs.len()) {
        let mut run = Run::default();
        run.feed(c(1, isn, SYN, b""));
        run.feed(s(2, SISN, SYN | ACK, b""));
        for (k, &i) in order.iter().enumerate() {
            let flags = if segs[i].0 == fin_seq { FIN | ACK } else { ACK };
            run.feed(c(3 + k as i64, segs[i].0, flags, &segs[i].1));
        }
        run.feed(s(20, SISN + 1, FIN | ACK, b""));
        let out = run.take();
        assert_eq!(whole(&out, 1, 0), body, "{order:?}");
        assert_eq!(closed(&out), vec![(1, "fin")], "{order:?}");
    }
}

#[test]
fn random_orders_with_duplicates_and_overlaps_reassemble() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..300 {
        let len = 1 + rng.below(600);
        let body: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let isn = rng.next() as u32;
        // overlapping pieces: random starts and lengths, plus a tiling that covers everything
        let mut segs: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut at = 0;
        while at < len {
            let n = (1 + rng.below(60)).min(len - at);
            segs.push((isn.wrapping_add(1 + at as u32), body[at..at + n].to_vec()));
            at += n;
        }
        for _ in 0..rng.below(10) {
            let a = rng.below(len);
            let b = (a + 1 + rng.below(80)).min(len);
            segs.push((isn.wrapping_add(1 + a as u32), body[a..b].to_vec()));
        }
        rng.shuffle(&mut segs);
        let mut run = Run::default();
        run.feed(c(1, isn, SYN, b""));
        for (k, (seq, data)) in segs.iter().enumerate() {
            run.feed(c(2 + k as i64, *seq, ACK, data));
        }
        run.finish();
        let out = run.take();
        assert_eq!(whole(&out, 1, 0), body, "round {round}");
        assert!(ignored(&out).is_empty(), "round {round}: identical copies are no conflict");
        assert_eq!(run.r.stats().delivered_bytes, len as u64);
    }
}

#[test]
fn random_interleaving_of_many_connections_reassembles_each() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let n_conns = 8u16;
    let mut bodies = Vec::new();
    let mut all: Vec<(u16, bool, u32, Vec<u8>)> = Vec::new();
    for k in 0..n_conns {
        for from_client in [true, false] {
            let body: Vec<u8> = (0..(50 + rng.below(300))).map(|_| rng.next() as u8).collect();
            let isn = if from_client { CISN } else { SISN };
            let mut sizes = Vec::new();
            let mut left = body.len();
            while left > 0 {
                let n = (1 + rng.below(40)).min(left);
                sizes.push(n);
                left -= n;
            }
            for (seq, data) in pieces(&body, isn, &sizes) {
                all.push((k, from_client, seq, data));
            }
            bodies.push(body);
        }
    }
    rng.shuffle(&mut all);
    let mut run = Run::default();
    for k in 0..n_conns {
        run.feed(seg_port(0, CPORT + k, true, CISN, 0, SYN, b""));
        run.feed(seg_port(0, CPORT + k, false, SISN, CISN + 1, SYN | ACK, b""));
    }
    for (i, (k, from_client, seq, data)) in all.iter().enumerate() {
        run.feed(seg_port(i as i64 + 1, CPORT + k, *from_client, *seq, 0, ACK, data));
    }
    run.finish();
    let out = run.take();
    for k in 0..n_conns as usize {
        assert_eq!(whole(&out, k as u64 + 1, 0), bodies[2 * k], "conn {k} client");
        assert_eq!(whole(&out, k as u64 + 1, 1), bodies[2 * k + 1], "conn {k} server");
    }
    assert_eq!(closed(&out).len(), n_conns as usize);
}

#[test]
fn random_losses_are_gaps_of_exactly_the_lost_bytes() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for round in 0..100 {
        let body: Vec<u8> = (0..400).map(|_| rng.next() as u8).collect();
        let mut sizes = Vec::new();
        let mut left = body.len();
        while left > 0 {
            let n = (1 + rng.below(30)).min(left);
            sizes.push(n);
            left -= n;
        }
        let segs = pieces(&body, CISN, &sizes);
        // drop some segments (never the last, so that every hole has bytes after it), reorder a few
        let keep: Vec<bool> = (0..segs.len()).map(|i| i + 1 == segs.len() || rng.below(5) != 0).collect();
        let mut order: Vec<usize> = (0..segs.len()).filter(|&i| keep[i]).collect();
        for _ in 0..3 {
            let (a, b) = (rng.below(order.len()), rng.below(order.len()));
            order.swap(a, b);
        }
        // holes wait (default ooo_wait_packets) until the end: a kept segment is never declared lost
        let mut run = Run::default();
        run.feed(c(1, CISN, SYN, b""));
        for (k, &i) in order.iter().enumerate() {
            run.feed(c(2 + k as i64, segs[i].0, ACK, &segs[i].1));
        }
        run.finish();
        let out = run.take();
        let got = stream_of(&out, 1, 0);
        assert_eq!(got.len(), body.len(), "round {round}");
        // every byte is either the original one, or lost because its segment was dropped
        let mut at = 0;
        for (i, (_, data)) in segs.iter().enumerate() {
            for (j, b) in data.iter().enumerate() {
                match got[at + j] {
                    Some(v) => assert_eq!(v, *b, "round {round}"),
                    None => assert!(!keep[i], "round {round}: byte {} of a kept segment lost", at + j),
                }
            }
            at += data.len();
        }
        let lost: usize = segs.iter().zip(&keep).filter(|(_, k)| !**k).map(|(s, _)| s.1.len()).sum();
        assert_eq!(run.r.stats().gap_bytes as usize, lost, "round {round}");
    }
}

// ------------------------------------------------------------------------------------------------ STATE_DROPPED

fn detail<'a>(details: &'a Map, key: &str) -> &'a Value {
    &details.iter().find(|(k, _)| k.as_str() == key).unwrap_or_else(|| panic!("no {key}")).1
}

fn detail_text(details: &Map, key: &str) -> String {
    match detail(details, key) {
        Value::Str(t) => t.as_str().to_owned(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn state_dropped_is_said_at_the_first_drop_of_each_cap_only() {
    let mut counter = DropCounter::new(7);
    let first = counter.drop(name!("max_pending"), name!("requests"), 100, 1.5, 10).expect("the first drop is said");
    assert_eq!((first.kind.as_str(), first.conn, first.time, first.packet), ("STATE_DROPPED", Some(7), 1.5, 10));
    assert_eq!(detail_text(&first.details, "option"), "max_pending");
    assert_eq!(detail_text(&first.details, "what"), "requests");
    assert_eq!(
        (detail(&first.details, "limit"), detail(&first.details, "dropped")),
        (&Value::Int(100), &Value::Int(1))
    );
    assert!(
        counter.drop(name!("max_pending"), name!("requests"), 100, 2.0, 11).is_none(),
        "the same cap again: counted, not said"
    );
    let other = counter.drop(name!("max_producers"), name!("producers"), 5, 3.0, 12).expect("another cap is said");
    assert_eq!(detail_text(&other.details, "option"), "max_producers");
}

#[test]
fn state_dropped_totals_at_the_close_only_for_caps_dropped_more_than_once() {
    let mut counter = DropCounter::new(3);
    for k in 0..4 {
        let _ = counter.drop(name!("max_pending"), name!("requests"), 100, k as f64, k);
    }
    let _ = counter.drop(name!("max_producers"), name!("producers"), 5, 9.0, 9);
    let mut out = Vec::new();
    counter.close(20.0, 30, &mut out);
    assert_eq!(out.len(), 1, "a cap dropped once was said already");
    assert_eq!((out[0].conn, out[0].time, out[0].packet), (Some(3), 20.0, 30));
    assert_eq!(detail_text(&out[0].details, "option"), "max_pending");
    assert_eq!(detail(&out[0].details, "dropped"), &Value::Int(4));
}

#[test]
fn buffer_dropped_counts_every_drop_of_the_capture() {
    // each BufferDropped (the pipeline's STATE_DROPPED for max_buffered_total) carries the running count
    let mut run = Run::new(Config { max_buffered_total: 100, ..Config::default() });
    for k in 0..5u16 {
        run.feed(seg_port(2 * k as i64 + 1, CPORT + k, true, 99, 0, SYN, b""));
        run.feed(seg_port(2 * k as i64 + 2, CPORT + k, true, 110, 0, ACK, &[5u8; 60]));
        // [0,10) missing
    }
    let out = run.take();
    let drops: Vec<(u64, u64)> = out
        .iter()
        .filter_map(|e| {
            if let StreamEvent::BufferDropped { conn, dropped, .. } = e {
                Some((*conn, *dropped))
            } else {
                None
            }
        })
        .collect();
    // 60 bytes each: the second connection's bytes make 120 > 100, and so on for each new one
    assert_eq!(drops, vec![(1, 1), (2, 2), (3, 3), (4, 4)]);
    // a dropped connection's bytes come out after its gap, right after its BufferDropped
    for conn in 1..=4 {
        let at =
            out.iter().position(|e| matches!(e, StreamEvent::BufferDropped { conn: c, .. } if *c == conn)).unwrap();
        assert!(matches!(&out[at + 1], StreamEvent::Gap { conn: c, offset: 0, length: 10, .. } if *c == conn));
        assert!(matches!(&out[at + 2], StreamEvent::Data { conn: c, offset: 10, .. } if *c == conn));
    }
}

// ------------------------------------------------------------------- what the Python tests checked too

#[test]
fn an_ack_for_bytes_not_seen_yet_is_not_a_loss() {
    // on loopback the ACK can be recorded before the data it acknowledges
    let mut run = Run::default();
    handshake(&mut run);
    run.feed(c(4, CISN + 1, ACK, b"one-"));
    run.feed(seg_port(5, CPORT, false, SISN + 1, CISN + 13, ACK, b"")); // acknowledges all 12 bytes
    run.feed(c(6, CISN + 9, ACK, b"thr-"));
    run.feed(c(7, CISN + 5, ACK, b"two-"));
    run.finish();
    let out = run.take();
    assert_eq!(whole(&out, 1, 0), b"one-two-thr-");
    assert!(gaps(&out).is_empty(), "{:?}", gaps(&out));
}

#[test]
fn a_syn_after_mid_stream_traffic_reopens_the_four_tuple() {
    let (cisn, sisn) = (3_000_000u32, 4_000_000u32);
    let mut run = Run::default();
    run.feed(s(1, 10_101, ACK, b"old server data")); // joined mid-stream
    run.feed(c(2, cisn, SYN, b""));
    run.feed(s(3, sisn, SYN | ACK, b""));
    run.feed(c(4, cisn + 1, ACK, b""));
    run.feed(s(5, sisn + 1, ACK, b"fresh"));
    let out = run.take();
    assert_eq!(opened(&out), vec![(1, true), (2, false)]);
    assert_eq!(closed(&out), vec![(1, "reused")]);
    assert_eq!(whole(&out, 2, 1), b"fresh");
}

#[test]
fn a_syn_ack_with_a_new_isn_reopens_the_four_tuple() {
    // the new connection's SYN was not captured: its SYN-ACK carries ISNs the old connection never used
    let (cisn, sisn) = (3_000_000u32, 4_000_000u32);
    let mut run = Run::default();
    run.feed(c(1, 5, SYN, b""));
    run.feed(s(2, 10_000, SYN | ACK, b""));
    run.feed(c(3, 6, ACK, b""));
    run.feed(c(4, 6, ACK, b"abc"));
    run.feed(seg_port(5, CPORT, false, sisn, cisn + 1, SYN | ACK, b""));
    run.feed(c(6, cisn + 1, ACK, b""));
    run.feed(c(7, cisn + 1, ACK, b"xyz"));
    let out = run.take();
    assert_eq!(opened(&out).iter().map(|o| o.0).collect::<Vec<_>>(), [1, 2]);
    let Some(StreamEvent::Opened { conn, .. }) =
        out.iter().find(|e| matches!(e, StreamEvent::Opened { conn, .. } if conn.id == 2))
    else {
        panic!()
    };
    assert_eq!((conn.a.ip, conn.a.port), (CLIENT, CPORT), "the receiver of the SYN-ACK is the client");
    assert_eq!(whole(&out, 1, 0), b"abc");
    assert_eq!(whole(&out, 2, 0), b"xyz");
}

#[test]
fn closed_connections_are_forgotten_beyond_max_tombstones() {
    let mut run = Run::new(Config { max_tombstones: 50, ..Config::default() });
    for i in 0..200u16 {
        let port = CPORT + i;
        let at = i as i64 * 10;
        run.feed(seg_port(at + 1, port, true, CISN, 0, SYN, b""));
        run.feed(seg_port(at + 2, port, false, SISN, CISN + 1, SYN | ACK, b""));
        run.feed(seg_port(at + 3, port, true, CISN + 1, SISN + 1, ACK, b""));
        run.feed(seg_port(at + 4, port, true, CISN + 1, SISN + 1, ACK, b"x"));
        run.feed(seg_port(at + 5, port, true, CISN + 2, SISN + 1, FIN | ACK, b""));
        run.feed(seg_port(at + 6, port, false, SISN + 1, CISN + 3, FIN | ACK, b""));
        run.feed(seg_port(at + 7, port, true, CISN + 3, SISN + 2, ACK, b"")); // after the close
    }
    let out = run.take();
    assert_eq!(closed(&out).len(), 200);
    assert!(run.r.open_connections().is_empty());
    let (halves, pending, tombs) = run.r.table_sizes();
    assert_eq!((halves, pending), (0, 0));
    assert!(tombs <= 50, "{tombs} tombstones");
    let st = run.r.stats();
    assert_eq!((st.connections, st.segments_after_close), (200, 200));
}
