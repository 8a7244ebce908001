"""Tests of dissector.transport.reassembly (TCP reassembly).

Packets are built with scapy (Ether()/IP()/TCP()/Raw() -> bytes) and parsed by dissector.capture.netlayers, exactly as
from a capture file. The hypothesis property test and the throughput-heavy tests construct TcpSegment
directly (same class) for speed.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from dissector.capture.files import CapturedPacket
from dissector.capture.netlayers import TcpSegment, tcp_segment
from dissector.capture.netlayers import ACK, FIN, PSH, RST, SYN
from dissector.transport.reassembly import (
    ConnectionClosed,
    ConnectionOpened,
    Endpoint,
    StreamData,
    StreamGap,
    TcpReassembler,
)

M32 = 2**32


# ----------------------------------------------------------------------------------------------- helpers


def scapy_segment(ip_pkt, orig_len: int | None = None, snap: int | None = None) -> TcpSegment:
    """Scapy IP/TCP packet -> Ethernet frame bytes -> netlayers.tcp_segment."""
    frame = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip_pkt)
    wire = len(frame)
    if snap is not None:
        frame = frame[:snap]
    seg = tcp_segment(CapturedPacket(0, 0.0, 1, frame, orig_len if orig_len is not None else wire))
    assert seg is not None
    return seg


_FLAGSTR = {FIN: "F", SYN: "S", RST: "R", PSH: "P", ACK: "A"}


def _flagstr(flags: int) -> str:
    return "".join(c for bit, c in _FLAGSTR.items() if flags & bit)


class Flow:
    """Builds the segments of one TCP connection (client c <-> server s)."""

    def __init__(self, cip="10.0.0.1", cport=40000, sip="10.0.0.2", sport=6650, cisn=1000, sisn=500_000,
                 via_scapy=True):  # fmt: skip
        self.ep = {"c": (cip, cport), "s": (sip, sport)}
        self.isn = {"c": cisn % M32, "s": sisn % M32}
        self.via_scapy = via_scapy
        self.v6 = ":" in cip

    def seq(self, frm: str, off: int) -> int:
        """Sequence number of stream offset ``off`` (0 = first byte after the SYN)."""
        return (self.isn[frm] + 1 + off) % M32

    def seg(self, frm, flags, seq, ack=0, payload=b"", window=65535, snap=None) -> TcpSegment:
        to = "s" if frm == "c" else "c"
        (sip, sp), (dip, dp) = self.ep[frm], self.ep[to]
        if self.via_scapy:
            ipl = IPv6(src=sip, dst=dip) if self.v6 else IP(src=sip, dst=dip)
            pkt = ipl / TCP(sport=sp, dport=dp, seq=seq, ack=ack, flags=_flagstr(flags), window=window)
            if payload:
                pkt = pkt / Raw(payload)
            return scapy_segment(pkt, snap=None if snap is None else snap + 14 + len(bytes(pkt)) - len(payload))
        missing = 0
        if snap is not None:
            payload, missing = payload[:snap], len(payload) - snap
        return TcpSegment(0, 0.0, sip, sp, dip, dp, seq, ack, flags, window, payload, missing)

    def handshake(self):
        return [
            self.seg("c", SYN, self.isn["c"]),
            self.seg("s", SYN | ACK, self.isn["s"], self.seq("c", 0)),
            self.seg("c", ACK, self.seq("c", 0), self.seq("s", 0)),
        ]

    def data(self, frm, off, payload, ack_off=0, **kw):
        to = "s" if frm == "c" else "c"
        return self.seg(frm, ACK | PSH, self.seq(frm, off), self.seq(to, ack_off), payload, **kw)

    def ack(self, frm, off, ack_off, window=65535):
        to = "s" if frm == "c" else "c"
        return self.seg(frm, ACK, self.seq(frm, off), self.seq(to, ack_off), window=window)

    def fin(self, frm, off, ack_off=0, payload=b""):
        to = "s" if frm == "c" else "c"
        return self.seg(frm, FIN | ACK, self.seq(frm, off), self.seq(to, ack_off), payload)

    def rst(self, frm, off, ack_off=None):
        to = "s" if frm == "c" else "c"
        if ack_off is None:
            return self.seg(frm, RST, self.seq(frm, off))
        return self.seg(frm, RST | ACK, self.seq(frm, off), self.seq(to, ack_off))

    def segments_of(self, frm, stream: bytes, sizes, start=0):
        """Split ``stream`` into data segments of the given sizes (cycled)."""
        out, off, i = [], 0, 0
        while off < len(stream):
            n = sizes[i % len(sizes)]
            i += 1
            out.append(self.data(frm, start + off, stream[off : off + n]))
            off += n
        return out

    def close(self, c_len, s_len):
        return [
            self.fin("c", c_len, s_len),
            self.fin("s", s_len, c_len + 1),
            self.ack("c", c_len + 1, s_len + 1),
        ]

    def endpoint(self, who) -> Endpoint:
        return Endpoint(*self.ep[who])


def run(segments, **kw):
    """Feed copies of the segments (renumbered in feed order), then finish; returns (reassembler, events)."""
    r = TcpReassembler(**kw)
    events = []
    for i, s in enumerate(segments, 1):
        s = dataclasses.replace(s, packet_index=i, timestamp=1000.0 + i * 0.001)
        events += r.feed(s)
    events += r.finish()
    return r, events


class Result:
    """Events checked for consistency and collected per connection and direction."""

    def __init__(self, events):
        self.events = events
        self.streams: dict[tuple[int, str], bytearray] = {}
        self.gaps: list[StreamGap] = []
        self.opened: dict[int, ConnectionOpened] = {}
        self.closed: dict[int, ConnectionClosed] = {}
        self.conns = {}
        nxt: dict[tuple[int, str], int] = {}
        for ev in events:
            cid = ev.conn.id
            if isinstance(ev, ConnectionOpened):
                assert cid not in self.opened, "opened twice"
                assert cid == len(self.opened) + 1, "ids are 1-based in order of appearance"
                self.opened[cid] = ev
                self.conns[cid] = ev.conn
                continue
            assert cid in self.opened and cid not in self.closed, f"event outside the connection's life: {ev}"
            if isinstance(ev, ConnectionClosed):
                self.closed[cid] = ev
                continue
            key = (cid, str(ev.sender))
            assert ev.sender in (ev.conn.a, ev.conn.b)
            assert ev.offset == nxt.get(key, 0), f"not contiguous: {ev} expected {nxt.get(key, 0)}"
            if isinstance(ev, StreamData):
                assert len(ev.data) > 0
                assert isinstance(ev.data, bytes)
                self.streams.setdefault(key, bytearray()).extend(ev.data)
                nxt[key] = ev.offset + len(ev.data)
            else:
                assert ev.length > 0
                self.gaps.append(ev)
                self.streams.setdefault(key, bytearray()).extend(b"\0" * ev.length)
                nxt[key] = ev.offset + ev.length
        assert set(self.opened) == set(self.closed), "every connection is closed exactly once"

    def stream(self, cid, ep) -> bytes:
        return bytes(self.streams.get((cid, str(ep)), b""))


def reassemble(segments, **kw):
    r, events = run(segments, **kw)
    return r, Result(events)


def window_shuffle(items, window, rng):
    """Permutation in which every item moves by less than ``window`` positions (loopback-like reordering)."""
    keyed = [(i + rng.uniform(0, window), i, it) for i, it in enumerate(items)]
    keyed.sort()
    return [it for _k, _i, it in keyed]


def random_merge(rng, *lists):
    """Random interleaving of the lists that keeps each list's own order."""
    queues = [list(q) for q in lists]
    out = []
    while any(queues):
        q = rng.choice([q for q in queues if q])
        out.append(q.pop(0))
    return out


def rand_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


# ----------------------------------------------------------------------------------------------- basics


def test_endpoint_str():
    assert str(Endpoint("127.0.0.1", 6650)) == "127.0.0.1:6650"
    assert str(Endpoint("::1", 6650)) == "[::1]:6650"
    assert Endpoint("::1", 1) == Endpoint("::1", 1)
    assert hash(Endpoint("::1", 1)) == hash(Endpoint("::1", 1))


def test_scapy_and_direct_segments_agree():
    f1, f2 = Flow(), Flow(via_scapy=False)
    for a, b in zip(f1.handshake() + [f1.data("c", 0, b"hello")], f2.handshake() + [f2.data("c", 0, b"hello")]):
        assert a == b


def test_in_order():
    f = Flow()
    up = b"CONNECT" * 50
    down = b"CONNECTED" * 70
    segs = f.handshake() + f.segments_of("c", up, [100]) + f.segments_of("s", down, [77, 13]) + f.close(len(up), len(down))
    r, res = reassemble(segs)
    assert len(res.conns) == 1
    conn = res.conns[1]
    assert conn.a == f.endpoint("c") and conn.b == f.endpoint("s")
    assert conn.saw_syn and not res.opened[1].mid_stream
    assert res.stream(1, conn.a) == up and res.stream(1, conn.b) == down
    assert not res.gaps
    assert res.closed[1].how == "fin"
    assert res.closed[1].packet_index == len(segs) - 1  # the second FIN completes the close
    assert r.stats.delivered_bytes == len(up) + len(down)
    assert r.stats.retransmitted_bytes == 0 and r.stats.out_of_order_segments == 0
    # the trailing ACK of the forgotten connection opens nothing
    assert r.stats.segments_after_close == 1
    assert not r.open_connections
    # StreamData of in-order segments is the payload, stamped with its packet
    first = next(e for e in res.events if isinstance(e, StreamData))
    assert first.packet_index == 4 and first.offset == 0 and first.timestamp == pytest.approx(1000.004)


def test_reordered():
    f = Flow()
    up = bytes(range(256)) * 8
    data = f.segments_of("c", up, [100])
    rng = random.Random(1)
    shuffled = data[:]
    rng.shuffle(shuffled)
    r, res = reassemble(f.handshake() + shuffled + f.close(len(up), 0))
    assert res.stream(1, f.endpoint("c")) == up
    assert not res.gaps
    assert r.stats.out_of_order_segments > 0
    # bytes made available by the packet that filled the hole carry that packet's index
    last_filler = max(e.packet_index for e in res.events if isinstance(e, StreamData))
    assert last_filler <= 3 + len(data)


def test_reorder_stamps_filling_packet():
    f = Flow()
    segs = f.handshake() + [f.data("c", 5, b"WORLD"), f.data("c", 0, b"HELLO")]
    r, res = reassemble(segs)
    data = [e for e in res.events if isinstance(e, StreamData)]
    assert [(e.offset, e.data, e.packet_index) for e in data] == [(0, b"HELLO", 5), (5, b"WORLD", 5)]
    assert r.stats.out_of_order_segments == 1


def test_duplicated():
    f = Flow()
    up = b"abcdefghij" * 30
    data = f.segments_of("c", up, [50])
    segs = f.handshake()
    for d in data:
        segs += [d, d]
    r, res = reassemble(segs + [data[2], data[0]])
    assert res.stream(1, f.endpoint("c")) == up
    assert r.stats.retransmitted_segments == len(data) + 2
    assert r.stats.retransmitted_bytes == len(up) + 100
    assert r.stats.inconsistent_overlaps == 0


def test_partially_overlapping_retransmissions():
    f = Flow()
    up = bytes(range(200))
    segs = f.handshake() + [
        f.data("c", 0, up[0:50]),
        f.data("c", 30, up[30:90]),  # 20 old + 40 new
        f.data("c", 120, up[120:160]),  # out of order
        f.data("c", 100, up[100:140]),  # overlaps the buffered piece: 20 new + 20 old
        f.data("c", 85, up[85:125]),  # fills 90..100 and overlaps both sides
        f.data("c", 150, up[150:200]),
    ]
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == up
    assert not res.gaps
    assert r.stats.overlap_bytes > 0 and r.stats.inconsistent_overlaps == 0


def test_inconsistent_overlap_first_copy_wins():
    f = Flow()
    segs = f.handshake() + [
        f.data("c", 0, b"AAAA"),
        f.data("c", 8, b"CCCC"),
        f.data("c", 6, b"xxBB"),  # overlaps buffered CCCC? no: 6..10 overlaps 8..10 -> 'BB' vs 'CC' differ
        f.data("c", 2, b"zzBBBB"),  # 2..4 differs from delivered AA; 4..6 new; 6..8 differs from buffered xx
    ]
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == b"AAAABBxxCCCC"
    assert r.stats.inconsistent_overlaps == 3


def test_dropped_segment_gap_at_end_of_capture():
    f = Flow()
    up = bytes(random.Random(2).getrandbits(8) for _ in range(1000))
    data = f.segments_of("c", up, [100])
    del data[3]  # bytes 300..400 never captured
    r, res = reassemble(f.handshake() + data)
    assert len(res.gaps) == 1
    g = res.gaps[0]
    assert (g.offset, g.length, g.reason) == (300, 100, "capture ended")
    assert g.sender == f.endpoint("c")
    got = res.stream(1, f.endpoint("c"))
    assert got[:300] == up[:300] and got[400:] == up[400:]
    assert res.closed[1].how == "end_of_capture"
    assert r.stats.gaps == 1 and r.stats.gap_bytes == 100


def test_dropped_segment_gap_after_wait():
    f = Flow()
    up = bytes(random.Random(3).getrandbits(8) for _ in range(3000))
    data = f.segments_of("c", up, [100])
    del data[5]
    segs = f.handshake() + data
    r, events = run(segs, ooo_wait_packets=10)
    res = Result(events)
    (g,) = res.gaps
    assert (g.offset, g.length, g.reason) == (500, 100, "missing segment")
    # declared once 10 later segments of the connection had arrived, not at the end of the capture
    # (the hole became visible at packet 9)
    assert g.packet_index == 9 + 11
    assert res.stream(1, f.endpoint("c"))[600:] == up[600:]
    # the default waits much longer (reordered loopback captures): here it only gives up at the end
    r2, res2 = reassemble(segs)
    assert [(g.offset, g.length, g.reason) for g in res2.gaps] == [(500, 100, "capture ended")]


def test_peer_ack_alone_is_not_loss():
    """The ACK for data may be recorded before the data segment (loopback): no gap."""
    f = Flow()
    segs = f.handshake() + [
        f.data("c", 0, b"one-"),
        f.ack("s", 0, 12),  # acks all 12 bytes
        f.data("c", 8, b"thr-"),
        f.data("c", 4, b"two-"),
    ]
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == b"one-two-thr-" and not res.gaps


def test_buffer_limit_declares_hole():
    f = Flow()
    up = bytes(random.Random(4).getrandbits(8) for _ in range(5000))
    data = f.segments_of("c", up, [500])
    del data[1]
    r, res = reassemble(f.handshake() + data, max_buffered_bytes_per_direction=2000)
    (g,) = res.gaps
    assert (g.offset, g.length, g.reason) == (500, 500, "buffer limit")
    assert res.stream(1, f.endpoint("c"))[1000:] == up[1000:]
    assert r.stats.buffer_limit_gaps == 1
    assert r.stats.max_buffered_bytes <= 2500


def test_hole_timeout_uses_capture_time():
    f = Flow()
    segs = f.handshake() + [f.data("c", 0, b"aaaa"), f.data("c", 8, b"cccc")]
    r = TcpReassembler(hole_timeout=5.0)
    events = []
    for i, s in enumerate(segs):
        events += r.feed(dataclasses.replace(s, packet_index=i + 1, timestamp=100.0 + i))
    assert not any(isinstance(e, StreamGap) for e in events)
    events += r.expire(200.0)
    gaps = [e for e in events if isinstance(e, StreamGap)]
    assert [(g.offset, g.length, g.reason) for g in gaps] == [(4, 4, "missing segment")]
    assert [e.data for e in events if isinstance(e, StreamData)] == [b"aaaa", b"cccc"]


def test_mid_stream_start():
    f = Flow(cisn=77_000)
    up = bytes(range(100)) * 10
    segs = [f.data("c", 500, up[500:600]), f.data("s", 0, b"resp-1"), f.data("c", 600, up[600:700]),
            f.data("c", 400, up[400:500]),  # just before the first byte seen: ignored
            f.data("c", 550, up[550:650]),  # partial overlap
            f.data("c", 700, up[700:1000])]  # fmt: skip
    r, res = reassemble(segs)
    assert res.opened[1].mid_stream and not res.conns[1].saw_syn
    conn = res.conns[1]
    assert conn.a == f.endpoint("c")  # sender of the first segment seen
    assert res.stream(1, f.endpoint("c")) == up[500:]
    assert res.stream(1, f.endpoint("s")) == b"resp-1"
    first = next(e for e in res.events if isinstance(e, StreamData))
    assert first.offset == 0
    assert r.stats.bytes_before_start == 100
    assert r.stats.connections_mid_stream == 1
    assert not res.gaps


def test_mid_stream_lone_ack_opens_nothing():
    f = Flow()
    r, res = reassemble([f.ack("s", 10, 10), f.data("c", 10, b"x")])
    assert len(res.conns) == 1 and res.conns[1].a == f.endpoint("c")


def test_message_split_byte_by_byte():
    f = Flow()
    msg = b"\x00\x00\x00\x10\x00\x00\x00\x0c" + b"pulsar-frame"
    segs = f.handshake() + [f.data("c", i, msg[i : i + 1]) for i in range(len(msg))] + f.close(len(msg), 0)
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == msg
    datas = [e for e in res.events if isinstance(e, StreamData)]
    assert [e.offset for e in datas] == list(range(len(msg)))


def test_sequence_wraparound():
    isn = M32 - 350
    f = Flow(cisn=isn, sisn=M32 - 1)
    up = bytes(random.Random(5).getrandbits(8) for _ in range(2000))
    down = b"0123456789" * 30
    data = f.segments_of("c", up, [100])
    assert any(s.seq < 1000 for s in data) and any(s.seq > M32 - 400 for s in data)
    rng = random.Random(6)
    segs = f.handshake() + window_shuffle(data + f.segments_of("s", down, [7]), 6, rng) + f.close(len(up), len(down))
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == up
    assert res.stream(1, f.endpoint("s")) == down
    assert not res.gaps and res.closed[1].how == "fin"


def test_zero_window_probe():
    f = Flow()
    segs = f.handshake() + [
        f.data("c", 0, b"A" * 100),
        f.ack("s", 0, 100, window=0),  # receiver full
        f.data("c", 100, b"B"),  # zero-window probe: 1 byte beyond the window
        f.ack("s", 0, 100, window=0),  # probe not accepted
        f.data("c", 100, b"B"),  # probe again
        f.ack("s", 0, 100, window=512),  # window opens
        f.data("c", 100, b"B" * 50 + b"C" * 50),  # the probed byte is sent again with the rest
    ]
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == b"A" * 100 + b"B" * 50 + b"C" * 50
    assert r.stats.zero_window_probes == 2
    assert r.stats.retransmitted_bytes == 2 and r.stats.inconsistent_overlaps == 0
    assert not res.gaps


def test_keepalive_is_not_data():
    f = Flow()
    segs = f.handshake() + [
        f.data("c", 0, b"hello"),
        f.seg("c", ACK, f.seq("c", 4), f.seq("s", 0)),  # keep-alive, 0 bytes, seq = next-1
        f.seg("c", ACK, f.seq("c", 4), f.seq("s", 0), b"\x00"),  # keep-alive with a garbage byte
        f.ack("s", 0, 5),
        f.data("c", 5, b" world"),
    ]
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == b"hello world"
    assert r.stats.keepalives == 2


def test_syn_and_fin_consume_one_sequence_number():
    f = Flow(cisn=10, sisn=20)
    segs = [f.seg("c", SYN, 10), f.seg("s", SYN | ACK, 20, 11), f.seg("c", ACK, 11, 21),
            f.seg("c", ACK | PSH, 11, 21, b"abc"), f.seg("c", FIN | ACK, 14, 21),
            f.seg("s", ACK | PSH, 21, 15, b"xyz"), f.seg("s", FIN | ACK, 24, 15),
            f.seg("c", ACK, 15, 25)]  # fmt: skip
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == b"abc" and res.stream(1, f.endpoint("s")) == b"xyz"
    assert res.closed[1].how == "fin" and res.closed[1].packet_index == 7
    assert r.stats.retransmitted_bytes == 0 and r.stats.keepalives == 0
    assert res.conns[1].isn_of(f.endpoint("c")) == 10


def test_fin_with_data_and_data_after_fin_ignored():
    f = Flow()
    segs = f.handshake() + [f.fin("c", 0, 0, b"last words"), f.data("c", 10, b"zombie")]
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == b"last words"
    assert r.stats.bytes_after_fin == 6


def test_fin_recorded_before_last_data():
    """Loopback reordering may put the FIN (and even the peer's FIN) before the last data segment."""
    f = Flow()
    segs = f.handshake() + [
        f.data("c", 0, b"0123"),
        f.fin("c", 8, 0),
        f.fin("s", 0, 9),
        f.data("c", 4, b"4567"),
        f.ack("c", 9, 1),
    ]
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == b"01234567" and not res.gaps
    assert res.closed[1].how == "fin" and res.closed[1].packet_index == 7


def test_fin_hole_never_filled():
    f = Flow()
    segs = f.handshake() + [f.data("c", 0, b"0123"), f.fin("c", 8, 0), f.fin("s", 0, 9)]
    other = Flow(cport=40001)  # traffic of another connection drives the packet-count policy
    segs += other.handshake() + [other.data("c", i, b"x") for i in range(30)]
    r, events = run(segs, close_wait_packets=20, sweep_every=4)
    res = Result(events)
    (g,) = res.gaps
    assert (g.offset, g.length, g.sender, g.reason) == (4, 4, f.endpoint("c"), "connection closed")
    assert res.closed[1].how == "fin"
    # closed long before the end of the capture
    assert events.index(res.closed[1]) < events.index(res.closed[2])
    assert res.closed[1].packet_index == 6
    assert res.stream(2, other.endpoint("c")) == b"x" * 30


def test_snaplen_cut_is_a_gap():
    for via_scapy in (True, False):
        f = Flow(via_scapy=via_scapy)
        segs = f.handshake() + [
            f.data("c", 0, b"A" * 100, snap=40),
            f.data("c", 100, b"B" * 100, snap=40),
            f.data("c", 200, b"C" * 10),
        ]
        assert segs[3].missing_tail == 60
        r, res = reassemble(segs)
        assert [(g.offset, g.length, g.reason) for g in res.gaps] == [(40, 60, "snaplen"), (140, 60, "snaplen")]
        got = res.stream(1, f.endpoint("c"))
        assert got[:40] == b"A" * 40 and got[100:140] == b"B" * 40 and got[200:] == b"C" * 10
        assert r.stats.snaplen_gaps == 2


def test_snaplen_cut_out_of_order():
    f = Flow(via_scapy=False)
    segs = f.handshake() + [f.data("c", 100, b"B" * 100, snap=40), f.data("c", 0, b"A" * 100)]
    r, res = reassemble(segs)
    assert [(g.offset, g.length, g.reason) for g in res.gaps] == [(140, 60, "snaplen")]


def test_rst_closes():
    f = Flow()
    segs = f.handshake() + [f.data("c", 0, b"request"), f.rst("s", 0, 7), f.ack("c", 7, 0),
                            f.data("c", 0, b"request")]  # fmt: skip
    r, res = reassemble(segs)
    assert res.closed[1].how == "rst" and res.closed[1].packet_index == 5
    assert len(res.conns) == 1
    assert r.stats.segments_after_close == 2
    assert res.stream(1, f.endpoint("c")) == b"request"


def test_rst_recorded_before_acknowledged_data():
    f = Flow()
    segs = f.handshake() + [f.data("c", 0, b"abc"), f.rst("s", 0, 9), f.data("c", 3, b"def"), f.data("c", 6, b"ghi")]
    r, res = reassemble(segs)
    assert res.stream(1, f.endpoint("c")) == b"abcdefghi" and not res.gaps
    assert res.closed[1].how == "rst" and res.closed[1].packet_index == 7


def test_port_reuse_creates_second_connection():
    f1 = Flow(cisn=1000, sisn=9000)
    f2 = Flow(cisn=3_000_000_000, sisn=123)
    segs = f1.handshake() + [f1.data("c", 0, b"first"), f1.data("s", 0, b"one")] + f1.close(5, 3)
    segs += f2.handshake() + [f2.data("c", 0, b"second"), f2.data("s", 0, b"two")] + f2.close(6, 3)
    r, res = reassemble(segs)
    assert len(res.conns) == 2
    assert res.stream(1, f1.endpoint("c")) == b"first" and res.stream(2, f2.endpoint("c")) == b"second"
    assert res.stream(1, f1.endpoint("s")) == b"one" and res.stream(2, f2.endpoint("s")) == b"two"
    assert [res.closed[i].how for i in (1, 2)] == ["fin", "fin"]
    assert res.conns[2].a == f2.endpoint("c") and res.opened[2].packet_index == 9


def test_port_reuse_without_seen_close():
    f1 = Flow(cisn=1000)
    f2 = Flow(cisn=2_000_000)
    segs = f1.handshake() + [f1.data("c", 0, b"first")] + f2.handshake() + [f2.data("c", 0, b"again")]
    r, res = reassemble(segs)
    assert len(res.conns) == 2
    assert res.closed[1].how == "reused" and res.closed[2].how == "end_of_capture"
    assert res.stream(2, f2.endpoint("c")) == b"again"


def test_syn_after_mid_stream_traffic_is_a_new_connection():
    old = Flow(cisn=5, sisn=10_000)
    new = Flow(cisn=3_000_000, sisn=4_000_000)
    segs = [old.data("s", 100, b"old server data")] + new.handshake() + [new.data("s", 0, b"fresh")]
    r, res = reassemble(segs)
    assert len(res.conns) == 2 and res.closed[1].how == "reused"
    assert res.opened[1].mid_stream and not res.opened[2].mid_stream
    assert res.stream(2, new.endpoint("s")) == b"fresh"


def test_synack_with_new_isn_is_a_new_connection():
    old = Flow(cisn=5, sisn=10_000)
    new = Flow(cisn=3_000_000, sisn=4_000_000)
    segs = old.handshake() + [old.data("c", 0, b"abc")] + new.handshake()[1:] + [new.data("c", 0, b"xyz")]
    r, res = reassemble(segs)
    assert len(res.conns) == 2 and res.conns[2].a == new.endpoint("c")
    assert res.stream(2, new.endpoint("c")) == b"xyz"


def test_in_order_payload_is_delivered_at_once_and_whole():
    f = Flow(via_scapy=False)
    r = TcpReassembler()
    for s in f.handshake():
        r.feed(s)
    seg = f.data("c", 0, b"payload bytes")
    (ev,) = r.feed(seg)
    assert type(ev.data) is bytes and ev.data == seg.payload and ev.offset == 0
    assert r.stats.max_buffered_bytes == 0 and r.stats.out_of_order_segments == 0


def test_syn_retransmission_is_same_connection():
    f = Flow()
    hs = f.handshake()
    r, res = reassemble([hs[0], hs[0], hs[1], hs[1], hs[2], f.data("c", 0, b"x")])
    assert len(res.conns) == 1 and res.stream(1, f.endpoint("c")) == b"x"
    assert r.stats.syn_retransmissions == 2


def test_synack_first_makes_receiver_the_client():
    f = Flow()
    hs = f.handshake()
    r, res = reassemble(hs[1:] + [f.data("c", 0, b"ping"), f.data("s", 0, b"pong")])
    conn = res.conns[1]
    assert conn.a == f.endpoint("c") and conn.saw_syn
    assert res.stream(1, f.endpoint("c")) == b"ping" and res.stream(1, f.endpoint("s")) == b"pong"


def test_ipv6():
    f = Flow(cip="fd00::1", sip="fd00::2")
    segs = f.handshake() + [f.data("c", 0, b"six")] + f.close(3, 0)
    r, res = reassemble(segs)
    assert str(res.conns[1].b) == "[fd00::2]:6650"
    assert res.stream(1, f.endpoint("c")) == b"six"


def test_many_interleaved_connections():
    rng = random.Random(7)
    expected = {}
    per_conn = []
    for i in range(50):
        f = Flow(cport=30000 + i, cisn=rng.getrandbits(32), sisn=rng.choice([M32 - 50, rng.getrandbits(32)]))
        up, down = rand_bytes(rng, rng.randint(0, 3000)), rand_bytes(rng, rng.randint(1, 3000))
        body = random_merge(rng, f.segments_of("c", up, [rng.randint(1, 600)]),
                            f.segments_of("s", down, [rng.randint(1, 600)]))  # fmt: skip
        for _ in range(3):  # some retransmissions, after the original
            k = rng.randrange(len(body))
            body.insert(rng.randint(k + 1, len(body)), body[k])
        body = window_shuffle(body + f.close(len(up), len(down))[:2], 5, rng)
        per_conn.append(f.handshake() + body)
        expected[i] = (f, up, down)
    merged = random_merge(rng, *per_conn)
    r, res = reassemble(merged)
    assert len(res.conns) == 50 and not res.gaps
    by_port = {c.a.port: cid for cid, c in res.conns.items()}
    for i, (f, up, down) in expected.items():
        cid = by_port[30000 + i]
        assert res.stream(cid, f.endpoint("c")) == up
        assert res.stream(cid, f.endpoint("s")) == down
        assert res.closed[cid].how == "fin"
    assert not r.open_connections


def test_feed_many_and_stats_dict():
    f = Flow(via_scapy=False)
    r = TcpReassembler()
    evs = list(r.feed_many(f.handshake() + [f.data("c", 0, b"abc")]))
    assert isinstance(evs[0], ConnectionOpened) and isinstance(evs[-1], ConnectionClosed)
    d = r.stats.as_dict()
    assert d["delivered_bytes"] == 3 and d["connections"] == 1


def test_closed_connections_are_forgotten():
    r = TcpReassembler(max_tombstones=50)
    for i in range(200):
        f = Flow(cport=20000 + i, via_scapy=False)
        for s in f.handshake() + [f.data("c", 0, b"x")] + f.close(1, 0):
            r.feed(s)
    directions, pending, tombstones = r.table_sizes()
    assert not r.open_connections and directions == 0 and pending == 0
    assert tombstones <= 50
    assert r.stats.connections == 200 and r.stats.segments_after_close == 200


# ----------------------------------------------------------------------------------------------- property


@st.composite
def tcp_exchanges(draw):
    up = draw(st.binary(min_size=0, max_size=2000))
    down = draw(st.binary(min_size=0, max_size=1500))
    cisn = draw(st.one_of(st.integers(0, M32 - 1), st.integers(M32 - 3000, M32 - 1)))
    sisn = draw(st.one_of(st.integers(0, M32 - 1), st.integers(M32 - 3000, M32 - 1)))
    window = draw(st.integers(1, 16))
    rnd = draw(st.randoms(use_true_random=False))
    return up, down, cisn, sisn, window, rnd


def _cuts(rnd, n, max_seg):
    out, off = [], 0
    while off < n:
        k = rnd.randint(1, max_seg)
        out.append((off, min(n, off + k)))
        off += k
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tcp_exchanges())
def test_property_bounded_reordering_and_duplicates(ex):
    up, down, cisn, sisn, window, rnd = ex
    f = Flow(cisn=cisn, sisn=sisn, via_scapy=False)
    dirs = []
    for who, stream in (("c", up), ("s", down)):
        max_seg = rnd.choice([1, 5, 100, 1500])
        dirs.append([(who, lo, hi, f.data(who, lo, stream[lo:hi])) for lo, hi in _cuts(rnd, len(stream), max_seg)])
    body = random_merge(rnd, *dirs)
    # retransmissions of arbitrary ranges (duplicates and partial overlaps), later than the original bytes
    for _ in range(rnd.randint(0, 6)):
        who, stream = rnd.choice((("c", up), ("s", down)))
        if not stream:
            continue
        lo = rnd.randrange(len(stream))
        hi = rnd.randint(lo + 1, min(len(stream), lo + 1600))
        last = max(i for i, (w, a, b, _s) in enumerate(body) if w == who and a < hi)
        body.insert(rnd.randint(last + 1, len(body)), (who, lo, hi, f.data(who, lo, stream[lo:hi])))
    body = [t[3] for t in body] + f.close(len(up), len(down))
    body += [rnd.choice(body) for _ in range(rnd.randint(0, 3))]
    segs = f.handshake() + window_shuffle(body, window, rnd)
    r, res = reassemble(segs)
    assert not res.gaps
    assert res.stream(1, f.endpoint("c")) == up
    assert res.stream(1, f.endpoint("s")) == down
    assert len(res.conns) == 1
    assert res.closed[1].how == "fin"
    assert r.stats.inconsistent_overlaps == 0
