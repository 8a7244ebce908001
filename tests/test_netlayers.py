"""Tests for dissector.capture.netlayers (link -> IP -> TCP)."""

from __future__ import annotations

import io
import shutil
from socket import AF_INET6, inet_ntop
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import pcapgen  # noqa: E402
from pcapgen import ether, ipv4_tcp, ipv6_tcp  # noqa: E402

from dissector.capture.files import CapturedPacket, open_capture  # noqa: E402
from dissector.capture.netlayers import (  # noqa: E402
    ACK,
    CWR,
    ECE,
    FIN,
    NS,
    PSH,
    RST,
    SYN,
    URG,
    TcpSegment,
    flags_str,
    iter_tcp_segments,
    tcp_segment,
)

DATA = Path(__file__).resolve().parent.parent / "captures"  # the corpus the project ships
CORPUS = {
    "pcap": DATA / "01_basic_nonbatched.pcap",
    "pcapng": DATA / "01_basic_nonbatched.pcapng",
    "any": DATA / "01_basic_nonbatched.any.pcap",
}


def pkt(data: bytes, linktype: int = 1, orig_len: int | None = None, index: int = 1, ts: float = 1.0):
    return CapturedPacket(index, ts, linktype, data, len(data) if orig_len is None else orig_len)


def seg(data: bytes, linktype: int = 1, orig_len: int | None = None) -> TcpSegment | None:
    return tcp_segment(pkt(data, linktype, orig_len))


V4 = dict(src="10.1.2.3", dst="192.168.0.9", sport=40000, dport=6650, seq=1000, ack=2000, flags=PSH | ACK)
V6 = dict(src="2001:db8::1", dst="fe80::abcd:1", sport=40000, dport=6650, seq=7, ack=9, flags=ACK)


def assert_v4(s, payload=b"hello", **kw):
    assert s is not None
    exp = dict(V4, **kw)
    assert (s.src_ip, s.dst_ip, s.src_port, s.dst_port, s.seq, s.ack, s.flags) == (
        exp["src"], exp["dst"], exp["sport"], exp["dport"], exp["seq"], exp["ack"], exp["flags"]
    )
    assert s.payload == payload
    assert s.missing_tail == 0


def assert_v6(s, payload=b"hello6"):
    assert s is not None
    assert (s.src_ip, s.dst_ip, s.src_port, s.dst_port, s.seq, s.ack, s.flags) == (
        "2001:db8::1", "fe80::abcd:1", 40000, 6650, 7, 9, ACK
    )
    assert s.payload == payload
    assert s.missing_tail == 0


IP4 = ipv4_tcp(payload=b"hello", **V4)
IP6 = ipv6_tcp(payload=b"hello6", **V6)


# ------------------------------------------------------------------------------------------------ corpus
def corpus_segments(key):
    with open_capture(CORPUS[key]) as r:
        return list(iter_tcp_segments(r))


def test_corpus_three_files_give_identical_segments():
    """.pcap (Ethernet), .pcapng (Ethernet, ns) and .any.pcap (Linux cooked v2) hold the same 71 packets."""
    segs = {k: corpus_segments(k) for k in CORPUS}
    assert {k: len(v) for k, v in segs.items()} == {"pcap": 71, "pcapng": 71, "any": 71}

    def key(s):
        return (s.packet_index, s.src_ip, s.src_port, s.dst_ip, s.dst_port, s.seq, s.ack, s.flags, s.window,
                s.payload, s.missing_tail)

    assert [key(s) for s in segs["pcap"]] == [key(s) for s in segs["pcapng"]] == [key(s) for s in segs["any"]]
    for a, b in zip(segs["pcap"], segs["pcapng"]):
        assert abs(a.timestamp - b.timestamp) < 1e-6
    # The -i any capture came from a second tcpdump process: the kernel stamps each packet socket's copy
    # separately, so its timestamps are up to ~2 us later than the lo capture's.
    for a, c in zip(segs["pcap"], segs["any"]):
        assert abs(a.timestamp - c.timestamp) < 5e-6


def test_corpus_content():
    segs = corpus_segments("pcap")
    first = segs[0]
    assert first.flags == SYN and first.dst_port == 6650 and first.src_ip == "127.0.0.1"
    assert segs[1].flags == SYN | ACK and segs[1].src_port == 6650
    assert all(s.missing_tail == 0 for s in segs)
    assert {(s.src_port, s.dst_port) for s in segs} == {(first.src_port, 6650), (6650, first.src_port)}
    # the broker's CONNECTED frame carries its version string
    assert any(b"Pulsar-Lite-0.1.0" in s.payload for s in segs)
    assert any(s.flags & FIN for s in segs)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="oracle missing: tshark not installed")
@pytest.mark.parametrize("key", list(CORPUS))
def test_corpus_against_tshark(key):
    fields = ["frame.number", "frame.time_epoch", "ip.src", "tcp.srcport", "ip.dst", "tcp.dstport", "tcp.seq_raw",
              "tcp.ack_raw", "tcp.flags", "tcp.window_size_value", "tcp.len"]
    cmd = ["tshark", "-n", "-r", str(CORPUS[key]), "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    segs = corpus_segments(key)
    assert len(rows) == len(segs) == 71
    for s, (num, ts, src, sport, dst, dport, seq, ack, flags, win, tlen) in zip(segs, rows):
        assert s.packet_index == int(num)
        assert abs(s.timestamp - float(ts)) < 1e-6
        assert (s.src_ip, s.src_port, s.dst_ip, s.dst_port) == (src, int(sport), dst, int(dport))
        assert (s.seq, s.ack, s.flags, s.window) == (int(seq), int(ack), int(flags, 16), int(win))
        assert len(s.payload) == int(tlen)


# ------------------------------------------------------------------------------------------- link layers
def test_ethernet_ipv4():
    s = seg(ether(IP4))
    assert_v4(s)
    assert s.packet_index == 1 and s.timestamp == 1.0 and s.window == 65535


def test_ethernet_ipv6():
    assert_v6(seg(ether(IP6, 0x86DD)))


@pytest.mark.parametrize(
    "vlans",
    [[(0x8100, 100)], [(0x88A8, 10), (0x8100, 20)], [(0x9100, 1), (0x8100, 2)], [(0x8100, 1), (0x8100, 2), (0x8100, 3)]],
)
def test_vlan_tags(vlans):
    assert_v4(seg(ether(IP4, vlans=vlans)))
    assert_v6(seg(ether(IP6, 0x86DD, vlans=vlans)))


def test_vlan_tag_truncated():
    frame = ether(IP4, vlans=[(0x8100, 5)])
    assert seg(frame[:16]) is None


def test_ethernet_padding_and_fcs_are_cut():
    short = ipv4_tcp(payload=b"", **V4)  # 40 bytes -> Ethernet pads to 60
    frame = ether(short) + b"\0" * 6 + b"\xca\xfe\xba\xbe"
    s = seg(frame)
    assert_v4(s, payload=b"")
    s = seg(ether(ipv4_tcp(payload=b"ab", **V4)) + b"\0\0\0\0PADDING")
    assert_v4(s, payload=b"ab")


def test_ethernet_llc_snap():
    frame = b"\x04" * 6 + b"\x02" * 6 + struct.pack("!H", 8 + len(IP4)) + b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + IP4
    assert_v4(seg(frame))


def test_non_ip_ethertypes():
    assert seg(ether(b"\0" * 28, 0x0806)) is None  # ARP
    assert seg(ether(IP4, 0x88CC)) is None  # LLDP
    assert seg(ether(IP4, 0x0800)[:13]) is None


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("family,payload", [(2, "v4"), (24, "v6"), (28, "v6"), (30, "v6")])
def test_bsd_null_loopback_both_byte_orders(order, family, payload):
    body = IP4 if payload == "v4" else IP6
    s = seg(struct.pack(order + "I", family) + body, linktype=0)
    assert_v4(s) if payload == "v4" else assert_v6(s)


def test_null_unknown_family():
    assert seg(struct.pack("<I", 7) + IP4, linktype=0) is None
    assert seg(b"\x02\0", linktype=0) is None


def test_openbsd_loop_network_order():
    assert_v4(seg(struct.pack("!I", 2) + IP4, linktype=108))
    assert_v6(seg(struct.pack("!I", 24) + IP6, linktype=108))
    assert seg(struct.pack("<I", 2) + IP4, linktype=108) is None


@pytest.mark.parametrize("linktype", [101, 12, 14])
def test_raw_ip(linktype):
    assert_v4(seg(IP4, linktype))
    assert_v6(seg(IP6, linktype))
    assert seg(b"\x50" + IP4[1:], linktype) is None
    assert seg(b"", linktype) is None


def test_ipv4_and_ipv6_linktypes():
    assert_v4(seg(IP4, 228))
    assert_v6(seg(IP6, 229))
    assert seg(IP6, 228) is None
    assert seg(IP4, 229) is None


def sll1(payload: bytes, proto: int) -> bytes:
    return struct.pack("!HHH8sH", 0, 772, 6, b"\0" * 8, proto) + payload


def sll2(payload: bytes, proto: int) -> bytes:
    return struct.pack("!HHIHBB8s", proto, 0, 1, 772, 0, 6, b"\0" * 8) + payload


def test_linux_sll_v1_and_v2():
    assert_v4(seg(sll1(IP4, 0x0800), 113))
    assert_v6(seg(sll1(IP6, 0x86DD), 113))
    assert_v4(seg(sll2(IP4, 0x0800), 276))
    assert_v6(seg(sll2(IP6, 0x86DD), 276))
    assert seg(sll1(IP4, 0x0806), 113) is None
    assert seg(sll2(IP4, 0x0806), 276) is None
    assert seg(sll1(IP4, 0x0800)[:15], 113) is None


def test_linux_sll_against_scapy():
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import CookedLinux

    p = CookedLinux(proto=0x0800) / IP(src="1.2.3.4", dst="5.6.7.8") / TCP(sport=1, dport=2, seq=3, ack=4, flags="PA") / b"xyz"
    s = seg(bytes(p), 113)
    assert (s.src_ip, s.dst_ip, s.src_port, s.dst_port, s.seq, s.ack, s.flags, s.payload) == (
        "1.2.3.4", "5.6.7.8", 1, 2, 3, 4, PSH | ACK, b"xyz"
    )


def test_unsupported_linktype():
    assert seg(ether(IP4), 105) is None
    assert seg(ether(IP4), 9999) is None


# ------------------------------------------------------------------------------------------------ IPv4
def test_ipv4_options_honor_ihl():
    p = ipv4_tcp(payload=b"hello", ip_options=b"\x01\x01\x01\x00" * 2, **V4)  # NOPs + EOL, IHL 7
    assert p[0] == 0x47
    assert_v4(seg(ether(p)))


def test_tcp_options_honor_data_offset():
    opts = b"\x02\x04\x05\xb4\x01\x03\x03\x07\x04\x02\x01\x01" + b"\x08\x0a" + b"\0" * 8 + b"\x01\x01"
    p = ipv4_tcp(payload=b"hello", tcp_options=opts, **V4)
    assert p[32] >> 4 == 5 + len(opts) // 4
    assert_v4(seg(ether(p)))


@pytest.mark.parametrize("frag,whole", [(0x4000, True), (0x0000, True), (0x2000, False), (0x0001, False), (0x2005, False)])
def test_ipv4_fragments(frag, whole):
    s = seg(ether(ipv4_tcp(payload=b"hello", frag=frag, **V4)))
    if whole:
        assert_v4(s)
    else:
        assert s is None


def test_ipv4_non_tcp():
    assert seg(ether(ipv4_tcp(payload=b"x", proto=17, **V4))) is None


def test_ipv4_bad_headers():
    assert seg(ether(b"\x44" + IP4[1:])) is None  # IHL 4 < 5
    assert seg(ether(b"\x65" + IP4[1:])) is None  # version 6 in an IPv4 ethertype
    bad_len = IP4[:2] + struct.pack("!H", 30) + IP4[4:]  # total length shorter than IP + TCP headers
    assert seg(ether(bad_len)) is None
    bad_doff = IP4[:32] + bytes([0x40]) + IP4[33:]  # TCP data offset 4 < 5
    assert seg(ether(bad_doff)) is None
    big_doff = IP4[:32] + bytes([0xF0]) + IP4[33:]  # TCP header (60) longer than the packet
    assert seg(ether(big_doff)) is None


def test_ipv4_tso_zero_total_length():
    big = ipv4_tcp(payload=b"z" * 3000, **V4)
    tso = big[:2] + b"\0\0" + big[4:]
    frame = ether(tso)
    s = seg(frame)
    assert_v4(s, payload=b"z" * 3000)


def test_snaplen_cut_missing_tail():
    p = ipv4_tcp(payload=bytes(range(200)), **V4)
    frame = ether(p)
    s = seg(frame[:96], orig_len=len(frame))
    assert s.payload == bytes(range(200))[: 96 - 54]
    assert s.missing_tail == 200 - (96 - 54)
    s6 = seg(ether(ipv6_tcp(payload=b"q" * 1000, **V6), 0x86DD)[:200], orig_len=14 + 40 + 20 + 1000)
    assert s6.payload == b"q" * (200 - 74) and s6.missing_tail == 1000 - (200 - 74)


def test_snaplen_cut_inside_tcp_header_is_undecodable():
    frame = ether(ipv4_tcp(payload=b"x" * 100, tcp_options=b"\x01" * 20, **V4))
    assert seg(frame[:60], orig_len=len(frame)) is None


def test_missing_tail_never_exceeds_frame():
    """An IP total length larger than the frame on the wire is a broken header, not missing bytes."""
    p = IP4[:2] + struct.pack("!H", 1000) + IP4[4:]
    s = seg(ether(p))
    assert s.payload == b"hello" and s.missing_tail == 0


# ------------------------------------------------------------------------------------------------ IPv6
def hbh(n8: int = 1) -> bytes:  # hop-by-hop / destination options: padding only
    return b"\0" + bytes([n8 - 1]) + b"\x01" + bytes([n8 * 8 - 4]) + b"\0" * (n8 * 8 - 4)


def routing() -> bytes:  # type 0 routing header with one address
    return b"\0\x02\x00\x00" + b"\0" * 4 + bytes(16)


def frag6(offset: int = 0, more: bool = False) -> bytes:
    return b"\0\0" + struct.pack("!HI", (offset << 3) | int(more), 0x1234)


def auth() -> bytes:
    return b"\0" + bytes([4]) + b"\0\0" + b"\0" * 20  # (4+2)*4 = 24 bytes


@pytest.mark.parametrize(
    "exts",
    [
        [(0, hbh())],
        [(0, hbh(2)), (43, routing()), (60, hbh())],
        [(44, frag6())],  # atomic fragment
        [(0, hbh()), (44, frag6()), (60, hbh(3))],
        [(51, auth())],
    ],
)
def test_ipv6_extension_headers(exts):
    s = seg(ether(ipv6_tcp(payload=b"hello6", ext_headers=exts, **V6), 0x86DD))
    assert_v6(s)


@pytest.mark.parametrize("frag", [frag6(0, True), frag6(8, False), frag6(8, True)])
def test_ipv6_real_fragments(frag):
    assert seg(ether(ipv6_tcp(payload=b"hello6", ext_headers=[(44, frag)], **V6), 0x86DD)) is None


def test_ipv6_other_next_headers():
    p = bytearray(IP6)
    p[6] = 59  # no next header
    assert seg(bytes(p), 101) is None
    p[6] = 17  # UDP
    assert seg(bytes(p), 101) is None


def test_ipv6_extension_header_truncated():
    p = ipv6_tcp(payload=b"hello6", ext_headers=[(0, hbh(4))], **V6)
    for cut in range(40, 40 + 32 + 20):
        assert seg(p[:cut], 101) is None


def test_ipv6_address_text_is_compressed():
    p = ipv6_tcp(src="2001:0db8:0000:0000:0000:0000:0000:0001", dst="::ffff:10.0.0.1", sport=1, dport=2)
    s = seg(p, 229)
    assert s.src_ip == "2001:db8::1" and s.dst_ip == "::ffff:10.0.0.1"


# ---------------------------------------------------------------------------------------------- TCP flags
def test_flags():
    assert (FIN, SYN, RST, PSH, ACK, URG, ECE, CWR, NS) == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    s = seg(ipv4_tcp(**dict(V4, flags=FIN | SYN | RST | PSH | ACK | URG)), 101)
    assert s.flags == 0x3F
    raw = bytearray(ipv4_tcp(**V4))
    raw[32] |= 1  # NS bit lives in the data-offset byte
    assert seg(bytes(raw), 101).flags == NS | PSH | ACK


def test_flags_str():
    assert flags_str(SYN) == "S"
    assert flags_str(SYN | ACK) == "SA"
    assert flags_str(PSH | ACK) == "PA"
    assert flags_str(FIN | ACK) == "FA"
    assert flags_str(0) == "."


# ------------------------------------------------------------------------------------------ scapy checks
MAC1, MAC2 = "02:00:00:00:00:01", "02:00:00:00:00:02"  # explicit: no route / ARP lookups in scapy
@settings(max_examples=150, deadline=None)
@given(
    src=st.ip_addresses(v=4).map(str),
    dst=st.ip_addresses(v=4).map(str),
    sport=st.integers(0, 65535),
    dport=st.integers(0, 65535),
    seq=st.integers(0, 2**32 - 1),
    ack=st.integers(0, 2**32 - 1),
    flags=st.integers(0, 255),
    window=st.integers(0, 65535),
    payload=st.binary(max_size=300),
    vlan=st.booleans(),
    opts=st.sampled_from([[], [("MSS", 1460)], [("NOP", None), ("WScale", 7), ("SAckOK", b"")]]),
)
def test_ipv4_against_scapy(src, dst, sport, dport, seq, ack, flags, window, payload, vlan, opts):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Dot1Q, Ether

    l2 = Ether(src=MAC1, dst=MAC2) / Dot1Q(vlan=3) if vlan else Ether(src=MAC1, dst=MAC2)
    p = l2 / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=window, options=opts) / payload
    s = seg(bytes(p))
    assert (s.src_ip, s.dst_ip, s.src_port, s.dst_port, s.seq, s.ack, s.flags, s.window, s.payload) == (
        src, dst, sport, dport, seq, ack, flags, window, payload
    )


@settings(max_examples=100, deadline=None)
@given(
    src=st.ip_addresses(v=6),
    dst=st.ip_addresses(v=6),
    payload=st.binary(max_size=200),
    ext=st.sampled_from(["none", "hbh", "hbh+dst", "routing", "atomic"]),
)
def test_ipv6_against_scapy(src, dst, payload, ext):
    from scapy.layers.inet import TCP
    from scapy.layers.inet6 import (
        IPv6,
        IPv6ExtHdrDestOpt,
        IPv6ExtHdrFragment,
        IPv6ExtHdrHopByHop,
        IPv6ExtHdrRouting,
    )
    from scapy.layers.l2 import Ether

    exts = {
        "none": [],
        "hbh": [IPv6ExtHdrHopByHop()],
        "hbh+dst": [IPv6ExtHdrHopByHop(), IPv6ExtHdrDestOpt()],
        "routing": [IPv6ExtHdrRouting(addresses=["2001:db8::99"])],
        "atomic": [IPv6ExtHdrFragment(offset=0, m=0)],
    }[ext]
    p = IPv6(src=str(src), dst=str(dst))
    for e in exts:
        p = p / e
    p = Ether(src=MAC1, dst=MAC2) / p / TCP(sport=5, dport=6650, seq=11, ack=12, flags="PA") / payload
    s = seg(bytes(p))
    # text form of socket.inet_ntop (which differs from ipaddress's for IPv4-mapped addresses)
    assert (s.src_ip, s.dst_ip, s.src_port, s.dst_port, s.seq, s.ack, s.payload) == (
        inet_ntop(AF_INET6, src.packed), inet_ntop(AF_INET6, dst.packed), 5, 6650, 11, 12, payload
    )


# ------------------------------------------------------------------------------------------- robustness
@settings(max_examples=1000, deadline=None)
@given(
    linktype=st.sampled_from([0, 1, 12, 14, 101, 108, 113, 228, 229, 276, 105]),
    data=st.binary(max_size=120),
    extra=st.integers(-50, 3000),
)
def test_random_bytes_never_raise(linktype, data, extra):
    r = tcp_segment(pkt(data, linktype, orig_len=max(0, len(data) + extra)))
    assert r is None or isinstance(r, TcpSegment)


_TEMPLATES = [
    (1, ether(IP4)),
    (1, ether(IP6, 0x86DD, vlans=[(0x8100, 1)])),
    (113, sll1(IP4, 0x0800)),
    (276, sll2(IP6, 0x86DD)),
    (0, struct.pack("<I", 30) + ipv6_tcp(payload=b"x", ext_headers=[(0, hbh()), (44, frag6())], **V6)),
    (101, ipv4_tcp(payload=b"abc", ip_options=b"\x01" * 8, tcp_options=b"\x01" * 12, **V4)),
]


@settings(max_examples=1000, deadline=None)
@given(st.data())
def test_mutated_packets_never_raise(data):
    linktype, frame = data.draw(st.sampled_from(_TEMPLATES))
    b = bytearray(frame)
    for _ in range(data.draw(st.integers(0, 6))):
        b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(b)))
    r = tcp_segment(pkt(bytes(b[:cut]), linktype, orig_len=data.draw(st.integers(0, 2 * len(b)))))
    assert r is None or isinstance(r, TcpSegment)
    if r is not None:
        assert len(r.payload) <= cut and r.missing_tail >= 0


def test_every_prefix_of_a_packet():
    frame = ether(ipv4_tcp(payload=b"0123456789", **V4))
    for cut in range(len(frame) + 1):
        s = seg(frame[:cut], orig_len=len(frame))
        if cut < 54:
            assert s is None
        else:
            assert s.payload == b"0123456789"[: cut - 54] and s.missing_tail == 10 - (cut - 54)


# ---------------------------------------------------------------------------------------- iteration
def test_iter_tcp_segments_skips_non_tcp(tmp_path):
    frames = [
        (1.0, ether(IP4)),
        (2.0, ether(b"\0" * 28, 0x0806)),
        (3.0, ether(ipv4_tcp(payload=b"u", proto=17, **V4))),
        (4.0, ether(IP6, 0x86DD)),
    ]
    f = tmp_path / "mix.pcap"
    pcapgen.write_pcap(f, frames)
    with open_capture(f) as r:
        segs = list(iter_tcp_segments(r))
    assert [(s.packet_index, s.timestamp) for s in segs] == [(1, 1.0), (4, 4.0)]
    assert_v4(segs[0])
    assert_v6(segs[1])
    assert list(iter_tcp_segments([pkt(ether(IP4))]))[0].src_port == 40000


def test_pcapng_mixed_linktypes_end_to_end():
    data = pcapgen.pcapng_bytes(
        [{"linktype": 1, "tsresol": 9}, {"linktype": 0}, {"linktype": 276, "tsresol": pcapgen.tsresol_pow2(20)}],
        [
            (0, 10.0, ether(IP4, vlans=[(0x8100, 7)])),
            (1, 11.0, struct.pack(">I", 2) + IP4),
            (2, 12.0, sll2(IP6, 0x86DD)),
            ("spb", None, ether(IP6, 0x86DD)),
        ],
    )
    with open_capture(io.BytesIO(data)) as r:
        segs = list(iter_tcp_segments(r))
    assert [s.packet_index for s in segs] == [1, 2, 3, 4]
    assert_v4(segs[0])
    assert_v4(segs[1])
    assert_v6(segs[2])
    assert_v6(segs[3])
