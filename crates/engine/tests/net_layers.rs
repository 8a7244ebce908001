//! Packet bytes → TCP segment (`transport::net::tcp_segment`) for every link type the core decodes. Every packet
//! is built here by hand, layer by layer, with the lengths computed by the builders (IPv4 total length, IPv6
//! payload length, TCP data offset), so each expected field is known independently of the parser.

use pulsar_dissect_engine::transport::net::{
    endpoint_text, flow_key, tcp_segment, Ip, Segment, ACK, FIN, NS, RST, SYN,
};

const PSH: u8 = 0x08;
const C4: [u8; 4] = [192, 168, 1, 10];
const S4: [u8; 4] = [10, 20, 30, 40];
const C6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11];
const S6: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55];

/// A TCP header (options padded by the caller to a multiple of 4) followed by the payload.
struct Tcp<'a> {
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    options: &'a [u8],
    payload: &'a [u8],
}

impl Default for Tcp<'_> {
    fn default() -> Self {
        Tcp {
            sport: 51234,
            dport: 6650,
            seq: 0x1122_3344,
            ack: 0x5566_7788,
            flags: ACK as u8 | PSH,
            window: 29200,
            options: &[],
            payload: b"pulsar",
        }
    }
}

fn tcp(t: &Tcp) -> Vec<u8> {
    assert_eq!(t.options.len() % 4, 0);
    let words = (20 + t.options.len()) / 4;
    let mut p = Vec::new();
    p.extend(t.sport.to_be_bytes());
    p.extend(t.dport.to_be_bytes());
    p.extend(t.seq.to_be_bytes());
    p.extend(t.ack.to_be_bytes());
    p.push((words as u8) << 4);
    p.push(t.flags);
    p.extend(t.window.to_be_bytes());
    p.extend([0xab, 0xcd, 0, 0]); // checksum (not checked), urgent pointer
    p.extend_from_slice(t.options);
    p.extend_from_slice(t.payload);
    p
}

/// IPv4 with `options` (a multiple of 4 bytes) and the total length of what it carries.
fn ipv4_opts(proto: u8, frag: u16, options: &[u8], body: &[u8]) -> Vec<u8> {
    let ihl = (20 + options.len()) / 4;
    let total = 20 + options.len() + body.len();
    let mut p = vec![0x40 | ihl as u8, 0];
    p.extend((total as u16).to_be_bytes());
    p.extend([0x12, 0x34]);
    p.extend(frag.to_be_bytes());
    p.extend([64, proto, 0, 0]);
    p.extend(C4);
    p.extend(S4);
    p.extend_from_slice(options);
    p.extend_from_slice(body);
    p
}

fn ipv4(body: &[u8]) -> Vec<u8> {
    ipv4_opts(6, 0x4000, &[], body) // DF set: not a fragment
}

/// IPv6 whose payload (extension headers included) is `body`, the first next header `next`.
fn ipv6(next: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend((body.len() as u16).to_be_bytes());
    p.extend([next, 64]);
    p.extend(C6);
    p.extend(S6);
    p.extend_from_slice(body);
    p
}

/// An IPv6 extension header of the (len+1)*8 kind: next header, length, then zero padding.
fn ext(next: u8, units: u8) -> Vec<u8> {
    let mut h = vec![next, units];
    h.resize((units as usize + 1) * 8, 0);
    h
}

fn ethernet(etype: u16, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];
    p.extend(etype.to_be_bytes());
    p.extend_from_slice(body);
    p
}

/// Ethernet with VLAN tags (TPID, VLAN id) in front of the inner ethertype.
fn ethernet_tagged(tags: &[(u16, u16)], etype: u16, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    for (tpid, vid) in tags {
        p.extend(tpid.to_be_bytes());
        p.extend(vid.to_be_bytes());
    }
    p.extend(etype.to_be_bytes());
    p.extend_from_slice(body);
    p
}

/// Linux cooked v1: packet type, ARPHRD, address length, 8 address bytes, protocol (16 bytes).
fn sll(protocol: u16, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0];
    p.extend(protocol.to_be_bytes());
    p.extend_from_slice(body);
    p
}

/// Linux cooked v2: protocol, reserved, interface index, ARPHRD, packet type, address length, 8 address bytes.
fn sll2(protocol: u16, body: &[u8]) -> Vec<u8> {
    let mut p = protocol.to_be_bytes().to_vec();
    p.extend([0, 0, 0, 0, 0, 3, 0, 1, 4, 6]);
    p.extend([1, 2, 3, 4, 5, 6, 0, 0]);
    p.extend_from_slice(body);
    p
}

fn seg(linktype: u32, pkt: &[u8]) -> Option<Segment<'_>> {
    tcp_segment(7, 1.5, linktype, pkt, pkt.len())
}

fn fields(s: &Segment) -> (Ip, u16, Ip, u16, u32, u32, u16, u16, Vec<u8>, usize) {
    (s.src, s.src_port, s.dst, s.dst_port, s.seq, s.ack, s.flags, s.window, s.payload.to_vec(), s.missing_tail)
}

fn expected_v4(payload: &[u8]) -> (Ip, u16, Ip, u16, u32, u32, u16, u16, Vec<u8>, usize) {
    (Ip::V4(C4), 51234, Ip::V4(S4), 6650, 0x1122_3344, 0x5566_7788, ACK | PSH as u16, 29200, payload.to_vec(), 0)
}

fn expected_v6(payload: &[u8]) -> (Ip, u16, Ip, u16, u32, u32, u16, u16, Vec<u8>, usize) {
    (Ip::V6(C6), 51234, Ip::V6(S6), 6650, 0x1122_3344, 0x5566_7788, ACK | PSH as u16, 29200, payload.to_vec(), 0)
}

// ------------------------------------------------------------------------------------------------ link layers

#[test]
fn ethernet_ipv4_every_field() {
    let pkt = ethernet(0x0800, &ipv4(&tcp(&Tcp::default())));
    let s = tcp_segment(42, 1234.25, 1, &pkt, pkt.len()).expect("a TCP segment");
    assert_eq!((s.packet_index, s.timestamp), (42, 1234.25));
    assert_eq!(fields(&s), expected_v4(b"pulsar"));
}

#[test]
fn ethernet_ipv6_every_field() {
    let pkt = ethernet(0x86DD, &ipv6(6, &tcp(&Tcp::default())));
    assert_eq!(fields(&seg(1, &pkt).expect("a TCP segment")), expected_v6(b"pulsar"));
}

#[test]
fn ethernet_single_802_1q_tag() {
    let pkt = ethernet_tagged(&[(0x8100, 100)], 0x0800, &ipv4(&tcp(&Tcp::default())));
    assert_eq!(fields(&seg(1, &pkt).expect("a TCP segment")), expected_v4(b"pulsar"));
}

#[test]
fn ethernet_qinq_and_legacy_tag_types() {
    // 802.1ad outer tag + 802.1Q inner, and the pre-standard 0x9100 / 0x9200 double tags
    for tags in [&[(0x88A8u16, 10u16), (0x8100, 20)][..], &[(0x9100, 1), (0x9200, 2), (0x8100, 3)][..]] {
        let pkt = ethernet_tagged(tags, 0x86DD, &ipv6(6, &tcp(&Tcp::default())));
        assert_eq!(fields(&seg(1, &pkt).expect("a TCP segment")), expected_v6(b"pulsar"), "{tags:?}");
    }
}

#[test]
fn vlan_tag_cut_short_is_none() {
    // the tag's inner ethertype is not in the captured bytes
    let pkt = ethernet_tagged(&[(0x8100, 5)], 0x0800, &[]);
    assert!(seg(1, &pkt[..16]).is_none());
    assert!(seg(1, &pkt[..17]).is_none());
}

#[test]
fn ieee_802_3_with_llc_snap() {
    // an 802.3 length field (< 0x600), then LLC AA AA 03 and SNAP OUI 00 00 00 + ethertype
    let ip = ipv4(&tcp(&Tcp::default()));
    let mut body = vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
    body.extend(&ip);
    let pkt = ethernet(body.len() as u16, &body);
    assert_eq!(fields(&seg(1, &pkt).expect("a TCP segment")), expected_v4(b"pulsar"));
    // an 802.3 frame without SNAP (plain LLC) is not IP
    let mut plain = vec![0x42, 0x42, 0x03, 0, 0, 0, 0x08, 0x00];
    plain.extend(&ip);
    assert!(seg(1, &ethernet(plain.len() as u16, &plain)).is_none());
}

#[test]
fn ethernet_non_ip_ethertypes_are_none() {
    let body = ipv4(&tcp(&Tcp::default()));
    for etype in [0x0806u16, 0x8035, 0x88CC, 0x8847] {
        assert!(seg(1, &ethernet(etype, &body)).is_none(), "{etype:#x}");
    }
}

#[test]
fn ethertype_and_version_nibble_disagreeing_is_none() {
    // the ethertype says IPv4, the header is IPv6 (and the reverse)
    assert!(seg(1, &ethernet(0x0800, &ipv6(6, &tcp(&Tcp::default())))).is_none());
    assert!(seg(1, &ethernet(0x86DD, &ipv4(&tcp(&Tcp::default())))).is_none());
}

#[test]
fn linux_cooked_v1() {
    let pkt = sll(0x0800, &ipv4(&tcp(&Tcp::default())));
    assert_eq!(fields(&seg(113, &pkt).expect("a TCP segment")), expected_v4(b"pulsar"));
    let pkt = sll(0x86DD, &ipv6(6, &tcp(&Tcp::default())));
    assert_eq!(fields(&seg(113, &pkt).expect("a TCP segment")), expected_v6(b"pulsar"));
}

#[test]
fn linux_cooked_v2() {
    let pkt = sll2(0x86DD, &ipv6(6, &tcp(&Tcp::default())));
    assert_eq!(fields(&seg(276, &pkt).expect("a TCP segment")), expected_v6(b"pulsar"));
    // the same bytes read as v1 put the protocol at byte 14 (here address bytes): not IP
    assert!(seg(113, &pkt).is_none());
}

#[test]
fn linux_cooked_with_a_vlan_protocol() {
    // the cooked header's protocol is 802.1Q: the tag follows the header
    let mut body = vec![0x00, 0x64, 0x08, 0x00];
    body.extend(ipv4(&tcp(&Tcp::default())));
    assert_eq!(fields(&seg(113, &sll(0x8100, &body)).expect("a TCP segment")), expected_v4(b"pulsar"));
    assert_eq!(fields(&seg(276, &sll2(0x8100, &body)).expect("a TCP segment")), expected_v4(b"pulsar"));
}

#[test]
fn linux_cooked_shorter_than_its_header_is_none() {
    let v1 = sll(0x0800, &[]);
    let v2 = sll2(0x0800, &[]);
    for n in 0..=v1.len() {
        assert!(seg(113, &v1[..n]).is_none());
    }
    for n in 0..=v2.len() {
        assert!(seg(276, &v2[..n]).is_none());
    }
}

#[test]
fn bsd_null_loopback_little_endian_family() {
    let mut pkt = 2u32.to_le_bytes().to_vec(); // AF_INET, host order of a little-endian machine
    pkt.extend(ipv4(&tcp(&Tcp::default())));
    assert_eq!(fields(&seg(0, &pkt).expect("a TCP segment")), expected_v4(b"pulsar"));
}

#[test]
fn bsd_null_loopback_written_by_a_big_endian_machine() {
    let mut pkt = 2u32.to_be_bytes().to_vec();
    pkt.extend(ipv4(&tcp(&Tcp::default())));
    assert_eq!(fields(&seg(0, &pkt).expect("a TCP segment")), expected_v4(b"pulsar"));
}

#[test]
fn bsd_null_ipv6_families_of_every_bsd() {
    // 24: NetBSD/OpenBSD/BSD/OS, 28: FreeBSD, 30: Darwin
    for family in [24u32, 28, 30] {
        for bytes in [family.to_le_bytes(), family.to_be_bytes()] {
            let mut pkt = bytes.to_vec();
            pkt.extend(ipv6(6, &tcp(&Tcp::default())));
            assert_eq!(fields(&seg(0, &pkt).expect("a TCP segment")), expected_v6(b"pulsar"), "{family}");
        }
    }
}

#[test]
fn openbsd_loop_is_network_order() {
    let mut pkt = 2u32.to_be_bytes().to_vec();
    pkt.extend(ipv4(&tcp(&Tcp::default())));
    assert_eq!(fields(&seg(108, &pkt).expect("a TCP segment")), expected_v4(b"pulsar"));
    // the same family in little-endian order is 0x02000000 in network order: not a family
    let mut le = 2u32.to_le_bytes().to_vec();
    le.extend(ipv4(&tcp(&Tcp::default())));
    assert!(seg(108, &le).is_none());
}

#[test]
fn null_loopback_unknown_family_is_none() {
    for family in [0u32, 1, 7, 23, 31] {
        let mut pkt = family.to_le_bytes().to_vec();
        pkt.extend(ipv4(&tcp(&Tcp::default())));
        assert!(seg(0, &pkt).is_none(), "{family}");
    }
}

#[test]
fn raw_ip_link_types_read_the_version_nibble() {
    let v4 = ipv4(&tcp(&Tcp::default()));
    let v6 = ipv6(6, &tcp(&Tcp::default()));
    for lt in [101u32, 12, 14] {
        assert_eq!(fields(&seg(lt, &v4).expect("IPv4")), expected_v4(b"pulsar"), "{lt}");
        assert_eq!(fields(&seg(lt, &v6).expect("IPv6")), expected_v6(b"pulsar"), "{lt}");
        assert!(seg(lt, &[]).is_none());
    }
}

#[test]
fn linktype_ipv4_and_ipv6_are_fixed_versions() {
    let v4 = ipv4(&tcp(&Tcp::default()));
    let v6 = ipv6(6, &tcp(&Tcp::default()));
    assert_eq!(fields(&seg(228, &v4).expect("IPv4")), expected_v4(b"pulsar"));
    assert_eq!(fields(&seg(229, &v6).expect("IPv6")), expected_v6(b"pulsar"));
    assert!(seg(228, &v6).is_none());
    assert!(seg(229, &v4).is_none());
}

#[test]
fn unsupported_link_types_are_none() {
    let pkt = ethernet(0x0800, &ipv4(&tcp(&Tcp::default())));
    for lt in [6u32, 9, 104, 105, 127, 147, 220, 249, 275, 277, u32::MAX] {
        assert!(seg(lt, &pkt).is_none(), "{lt}");
    }
}

// ------------------------------------------------------------------------------------------------ IPv4

#[test]
fn ipv4_non_tcp_protocols_are_none() {
    let body = tcp(&Tcp::default());
    for proto in [1u8, 17, 41, 47, 50, 132] {
        assert!(seg(101, &ipv4_opts(proto, 0, &[], &body)).is_none(), "{proto}");
    }
}

#[test]
fn ipv4_options_move_the_tcp_header() {
    // IHL 6, 8 and 15 (the largest: 40 option bytes): the TCP header starts after them
    for words in [1usize, 3, 10] {
        let mut options = vec![0x01u8; words * 4]; // NOPs
        options[words * 4 - 1] = 0x00; // end of options list
        let pkt = ipv4_opts(6, 0, &options, &tcp(&Tcp::default()));
        assert_eq!(pkt[0] & 0x0F, 5 + words as u8);
        assert_eq!(fields(&seg(228, &pkt).expect("a TCP segment")), expected_v4(b"pulsar"), "{words}");
    }
}

#[test]
fn ipv4_header_length_below_twenty_is_none() {
    for ihl in 0u8..5 {
        let mut pkt = ipv4(&tcp(&Tcp::default()));
        pkt[0] = 0x40 | ihl;
        assert!(seg(228, &pkt).is_none(), "{ihl}");
    }
}

#[test]
fn ipv4_fragments_are_none_but_df_alone_is_whole() {
    let body = tcp(&Tcp::default());
    // MF set, a non-zero offset, both, and the reserved bit with MF
    for frag in [0x2000u16, 0x0001, 0x00B9, 0x2010, 0x1FFF, 0xA000] {
        assert!(seg(228, &ipv4_opts(6, frag, &[], &body)).is_none(), "{frag:#x}");
    }
    // DF (0x4000) and the reserved bit (0x8000) are not fragmentation
    for frag in [0x0000u16, 0x4000, 0x8000, 0xC000] {
        assert_eq!(
            fields(&seg(228, &ipv4_opts(6, frag, &[], &body)).expect("whole")),
            expected_v4(b"pulsar"),
            "{frag:#x}"
        );
    }
}

#[test]
fn ethernet_padding_and_fcs_after_the_ip_packet_are_cut() {
    // a 1-byte payload: Ethernet pads the frame to 60 bytes and may add a 4-byte FCS
    let ip = ipv4(&tcp(&Tcp { payload: b"x", ..Tcp::default() }));
    let mut pkt = ethernet(0x0800, &ip);
    pkt.resize(60, 0);
    pkt.extend([0xde, 0xad, 0xbe, 0xef]);
    let s = seg(1, &pkt).expect("a TCP segment");
    assert_eq!((s.payload, s.missing_tail), (&b"x"[..], 0));
}

#[test]
fn ipv4_total_length_zero_takes_the_frame_length() {
    // TSO/GSO capture: total length 0; the payload runs to orig_len
    let mut pkt = ipv4(&tcp(&Tcp::default()));
    pkt[2] = 0;
    pkt[3] = 0;
    let s = seg(228, &pkt).expect("a TCP segment");
    assert_eq!(s.payload, b"pulsar");
    // and a cut capture of it: orig_len says how much was not captured
    let s = tcp_segment(1, 0.0, 228, &pkt[..pkt.len() - 4], pkt.len()).expect("a TCP segment");
    assert_eq!((s.payload, s.missing_tail), (&b"pu"[..], 4));
}

#[test]
fn ipv4_total_length_shorter_than_the_tcp_header_is_none() {
    let mut pkt = ipv4(&tcp(&Tcp::default()));
    pkt[2] = 0;
    pkt[3] = 30; // 20 IP + 10: the TCP header does not fit
    assert!(seg(228, &pkt).is_none());
}

// ------------------------------------------------------------------------------------------------ IPv6

#[test]
fn ipv6_hop_by_hop_routing_and_destination_options() {
    // 0 (hop-by-hop, 8 bytes) → 43 (routing, 24 bytes) → 60 (destination options, 16 bytes) → TCP
    let mut body = ext(43, 0);
    body.extend(ext(60, 2));
    body.extend(ext(6, 1));
    body.extend(tcp(&Tcp::default()));
    let pkt = ipv6(0, &body);
    assert_eq!(fields(&seg(229, &pkt).expect("a TCP segment")), expected_v6(b"pulsar"));
}

#[test]
fn ipv6_atomic_fragment_is_whole_but_real_fragments_are_none() {
    let frag = |offset_and_m: u16| {
        let mut body = vec![6, 0];
        body.extend(offset_and_m.to_be_bytes());
        body.extend([0xca, 0xfe, 0xba, 0xbe]); // identification
        body.extend(tcp(&Tcp::default()));
        ipv6(44, &body)
    };
    assert_eq!(fields(&seg(229, &frag(0)).expect("atomic")), expected_v6(b"pulsar"));
    // the two reserved bits (0x0006) do not make a fragment either
    assert_eq!(fields(&seg(229, &frag(0x0006)).expect("atomic")), expected_v6(b"pulsar"));
    // M set; offset 1 (8 bytes); both
    for v in [0x0001u16, 0x0008, 0x0009, 0xFFF8] {
        assert!(seg(229, &frag(v)).is_none(), "{v:#x}");
    }
}

#[test]
fn ipv6_authentication_header_length_is_in_four_byte_units_plus_two() {
    // AH payload length 4: (4 + 2) * 4 = 24 bytes
    let mut ah = vec![6, 4];
    ah.resize(24, 0x5a);
    let mut body = ah;
    body.extend(tcp(&Tcp::default()));
    assert_eq!(fields(&seg(229, &ipv6(51, &body)).expect("a TCP segment")), expected_v6(b"pulsar"));
}

#[test]
fn ipv6_non_tcp_next_headers_are_none() {
    let body = tcp(&Tcp::default());
    // UDP, ICMPv6, no next header, ESP, and a hop-by-hop header leading to UDP
    for next in [17u8, 58, 59, 50] {
        assert!(seg(229, &ipv6(next, &body)).is_none(), "{next}");
    }
    let mut hop = ext(17, 0);
    hop.extend(&body);
    assert!(seg(229, &ipv6(0, &hop)).is_none());
}

#[test]
fn ipv6_extension_header_beyond_the_payload_length_is_none() {
    // a destination-options header claiming 256 bytes in a packet whose payload is much shorter
    let mut body = ext(6, 0);
    body[1] = 31;
    body.extend(tcp(&Tcp::default()));
    assert!(seg(229, &ipv6(60, &body)).is_none());
    // and an extension header cut by the capture
    let pkt = ipv6(0, &ext(6, 0));
    assert!(seg(229, &pkt[..44]).is_none());
}

#[test]
fn ipv6_payload_length_zero_takes_the_frame_length() {
    let mut pkt = ipv6(6, &tcp(&Tcp::default()));
    pkt[4] = 0;
    pkt[5] = 0;
    assert_eq!(fields(&seg(229, &pkt).expect("a TCP segment")), expected_v6(b"pulsar"));
}

#[test]
fn ipv6_shorter_than_its_fixed_header_is_none() {
    let pkt = ipv6(6, &tcp(&Tcp::default()));
    for n in 0..40 {
        assert!(seg(229, &pkt[..n]).is_none(), "{n}");
    }
}

// ------------------------------------------------------------------------------------------------ TCP

#[test]
fn tcp_options_are_skipped_by_the_data_offset() {
    // MSS (4) + SACK permitted (2) + timestamps (10) + NOP NOP: 20 bytes of options, data offset 10
    let options = [2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 1, 1, 0];
    let pkt = ipv4(&tcp(&Tcp { options: &options, ..Tcp::default() }));
    assert_eq!(pkt[20 + 12] >> 4, 10);
    assert_eq!(fields(&seg(228, &pkt).expect("a TCP segment")), expected_v4(b"pulsar"));
    // the largest header: 40 option bytes
    let pkt = ipv4(&tcp(&Tcp { options: &[1; 40], payload: b"z", ..Tcp::default() }));
    assert_eq!(seg(228, &pkt).expect("a TCP segment").payload, b"z");
}

#[test]
fn tcp_data_offset_below_five_is_none() {
    for words in 0u8..5 {
        let mut pkt = ipv4(&tcp(&Tcp::default()));
        pkt[20 + 12] = words << 4;
        assert!(seg(228, &pkt).is_none(), "{words}");
    }
}

#[test]
fn tcp_data_offset_beyond_the_packet_is_none() {
    // data offset 15 (60 bytes) but only 20 header bytes + 6 payload bytes
    let mut pkt = ipv4(&tcp(&Tcp::default()));
    pkt[20 + 12] = 15 << 4;
    assert!(seg(228, &pkt).is_none());
}

#[test]
fn tcp_header_cut_by_the_capture_is_none() {
    let pkt = ethernet(0x0800, &ipv4(&tcp(&Tcp::default())));
    for n in 0..14 + 20 + 20 {
        assert!(tcp_segment(1, 0.0, 1, &pkt[..n], pkt.len()).is_none(), "{n}");
    }
}

#[test]
fn tcp_flags_every_bit_and_the_ns_bit() {
    for flags in [FIN as u8, SYN as u8, RST as u8, PSH, ACK as u8, 0x20, 0x40, 0x80, 0xFF, 0x12, 0x11] {
        let pkt = ipv4(&tcp(&Tcp { flags, ..Tcp::default() }));
        assert_eq!(seg(228, &pkt).expect("a TCP segment").flags, flags as u16);
    }
    // NS is the low bit of the data-offset byte: flags bit 8
    let mut pkt = ipv4(&tcp(&Tcp { flags: SYN as u8, ..Tcp::default() }));
    pkt[20 + 12] |= 1;
    let s = seg(228, &pkt).expect("a TCP segment");
    assert_eq!((s.flags, s.payload), (NS | SYN, &b"pulsar"[..]));
}

#[test]
fn tcp_without_payload() {
    let pkt = ethernet(0x0800, &ipv4(&tcp(&Tcp { flags: SYN as u8, payload: b"", ..Tcp::default() })));
    let s = seg(1, &pkt).expect("a TCP segment");
    assert_eq!((s.payload.len(), s.missing_tail, s.flags), (0, 0, SYN));
}

// ------------------------------------------------------------------------------------------------ snaplen

#[test]
fn snaplen_cut_payload_counts_the_missing_tail() {
    let payload: Vec<u8> = (0..200u8).collect();
    let pkt = ethernet(0x86DD, &ipv6(6, &tcp(&Tcp { payload: &payload, ..Tcp::default() })));
    let head = 14 + 40 + 20;
    for kept in [0usize, 1, 50, 199] {
        let s = tcp_segment(1, 0.0, 1, &pkt[..head + kept], pkt.len()).expect("a TCP segment");
        assert_eq!((s.payload, s.missing_tail), (&payload[..kept], 200 - kept), "{kept}");
    }
}

#[test]
fn missing_tail_never_exceeds_what_the_frame_had() {
    // orig_len smaller than the IP total length (a lying header): what is missing is bounded by orig_len
    let payload = [9u8; 100];
    let pkt = ipv4(&tcp(&Tcp { payload: &payload, ..Tcp::default() }));
    let s = tcp_segment(1, 0.0, 228, &pkt[..60], 80).expect("a TCP segment");
    assert_eq!((s.payload.len(), s.missing_tail), (20, 20));
    // orig_len not larger than what was captured: nothing is missing
    let s = tcp_segment(1, 0.0, 228, &pkt[..60], 60).expect("a TCP segment");
    assert_eq!((s.payload.len(), s.missing_tail), (20, 0));
}

#[test]
fn every_cut_of_a_packet_is_none_or_a_consistent_prefix() {
    // for each captured length: either no segment, or the payload's prefix plus the missing rest
    let payload: Vec<u8> = (0..64u8).collect();
    let options = [1u8; 8];
    let mut body = ext(6, 0);
    body.extend(tcp(&Tcp { options: &options, payload: &payload, ..Tcp::default() }));
    let v6 = ethernet_tagged(&[(0x8100, 7)], 0x86DD, &ipv6(60, &body));
    let v4 = sll(0x0800, &ipv4_opts(6, 0, &[1, 1, 1, 0], &tcp(&Tcp { payload: &payload, ..Tcp::default() })));
    for (lt, pkt, head) in [(1u32, &v6, 18 + 40 + 8 + 28), (113, &v4, 16 + 24 + 20)] {
        for n in 0..=pkt.len() {
            let got = tcp_segment(1, 0.0, lt, &pkt[..n], pkt.len());
            if n < head {
                assert!(got.is_none(), "{lt} {n}");
            } else {
                let s = got.expect("a TCP segment");
                assert_eq!(s.payload, &payload[..n - head], "{lt} {n}");
                assert_eq!(s.missing_tail, pkt.len() - n, "{lt} {n}");
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------ addresses

#[test]
fn flow_key_is_the_same_from_either_end() {
    let pkt = ipv4(&tcp(&Tcp::default()));
    let a = seg(228, &pkt).expect("a TCP segment");
    let mut b = a.clone();
    std::mem::swap(&mut b.src, &mut b.dst);
    std::mem::swap(&mut b.src_port, &mut b.dst_port);
    assert_eq!(flow_key(&a), flow_key(&b));
    let mut c = a.clone();
    c.src_port += 1;
    assert_ne!(flow_key(&a), flow_key(&c));
    // an IPv4 address and the IPv6 address with the same first bytes are different endpoints
    let mut d = a.clone();
    let mut v6 = [0u8; 16];
    v6[..4].copy_from_slice(&C4);
    d.src = Ip::V6(v6);
    assert_ne!(flow_key(&a), flow_key(&d));
}

#[test]
fn flow_key_is_fnv1a_of_the_ordered_endpoints() {
    // an independent FNV-1a 64 over (16 address bytes, version, port big-endian) of the lower then higher endpoint
    fn fnv(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
    }
    let pkt = ipv4(&tcp(&Tcp::default()));
    let s = seg(228, &pkt).expect("a TCP segment");
    let endpoint = |ip: [u8; 4], port: u16| {
        let mut e = ip.to_vec();
        e.resize(16, 0);
        e.push(4);
        e.extend(port.to_be_bytes());
        e
    };
    // 10.20.30.40 < 192.168.1.10
    let mut bytes = endpoint(S4, 6650);
    bytes.extend(endpoint(C4, 51234));
    assert_eq!(flow_key(&s), fnv(&bytes) as i64);
}

#[test]
fn endpoint_texts() {
    assert_eq!(endpoint_text(&Ip::V4(C4), 6650), "192.168.1.10:6650");
    assert_eq!(endpoint_text(&Ip::V6(C6), 443), "[2001:db8::11]:443");
    assert_eq!(endpoint_text(&Ip::V6(S6), 1), "[fe80::211:22ff:fe33:4455]:1");
}

#[test]
fn ipv6_text_as_inet_ntop_writes_it() {
    let text = |s: &str| Ip::parse(s).expect("an address").to_string();
    assert_eq!(text("0:0:0:0:0:0:0:0"), "::");
    assert_eq!(text("0:0:0:0:0:0:0:1"), "::1");
    assert_eq!(text("1:0:0:0:0:0:0:0"), "1::");
    // two runs of equal length: the first is compressed
    assert_eq!(text("1:0:0:2:0:0:3:4"), "1::2:0:0:3:4");
    // the longer run wins
    assert_eq!(text("1:0:2:0:0:0:3:4"), "1:0:2::3:4");
    // a single zero group is not compressed
    assert_eq!(text("1:2:3:0:5:6:7:8"), "1:2:3:0:5:6:7:8");
    // IPv4-compatible (deprecated) form keeps the dotted tail
    assert_eq!(text("::10.0.0.1"), "::10.0.0.1");
    assert_eq!(Ip::parse("not an address"), None);
    assert_eq!(Ip::parse("10.0.0.256"), None);
}
