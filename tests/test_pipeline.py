"""The whole pipeline on damaged real captures: capture loss, mid-connection starts, other ports.

Each test edits a real corpus capture (drops packets, rewrites ports) and compares what we decode with what
we decode from the intact capture, which the corpus tests check against the manifests.
"""

from __future__ import annotations

import struct
from collections import Counter

import pytest

from corpus import capture_path, manifest
from dissector.options import Options
from dissector.run import analysed_records
from pcapgen import write_pcap

# Explicit MAC addresses: scapy would otherwise look them up (routes, ARP), which is slow.
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}


def _pcap_records(data: bytes) -> list[tuple[float, bytes]]:
    """The complete records of a classic little- or big-endian pcap (microsecond or nanosecond stamps), read
    here with struct so that the damage these tests do is worked out independently of the dissector."""
    magic = data[:4]
    endian = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<",
              b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}[magic]
    scale = 1e-9 if magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") else 1e-6
    out, pos = [], 24
    while pos + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack_from(endian + "IIII", data, pos)
        if pos + 16 + incl > len(data):
            break  # a record cut by the end of the file
        out.append((sec + frac * scale, data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return out


def packets(name: str) -> list[tuple[float, bytes]]:
    path = capture_path(name)
    assert path.suffix == ".pcap", path  # these tests edit the plain Ethernet captures only
    return _pcap_records(path.read_bytes())


def decode(path, **options) -> list[dict]:
    return list(analysed_records(path, Options(**options) if options else None))


def frames_of(recs: list[dict]) -> list[dict]:
    return [r for r in recs if "index" in r]


def essence(f: dict) -> tuple:
    return f["type"], f["direction"], repr(f["command"]), repr(f.get("messages"))


def expert_ids(f: dict) -> set[str]:
    return {e["id"] for e in f.get("expert", ())}


def packets_of(f: dict) -> range:
    """The capture packets that carried the frame's bytes (``first_packet`` is there when it spans several)."""
    return range(f.get("first_packet", f["packet"]), f["packet"] + 1)


def _remap_port(data: bytes, old: int, new: int) -> bytes:
    """Rewrite a TCP port in an Ethernet/IPv4 frame (checksums are not verified by the dissector)."""
    ihl = (data[14] & 0x0F) * 4
    tcp = 14 + ihl
    sport, dport = struct.unpack_from(">HH", data, tcp)
    sport, dport = (new if sport == old else sport), (new if dport == old else dport)
    return data[:tcp] + struct.pack(">HH", sport, dport) + data[tcp + 4:]


@pytest.fixture(scope="module")
def full():
    return frames_of(decode(capture_path("02_batching_props_keys.pcap")))


def test_traffic_on_another_port_needs_detect_or_port(tmp_path, full):
    path = tmp_path / "port7777.pcap"
    write_pcap(path, [(t, _remap_port(d, 6650, 7777)) for t, d in packets("02_batching_props_keys.pcap")])
    assert frames_of(decode(path)) == []
    detected = frames_of(decode(path, detect=True))
    by_port = frames_of(decode(path, ports=frozenset({7777})))
    assert [essence(f) for f in detected] == [essence(f) for f in by_port] == [essence(f) for f in full]
    assert {f["dst"] for f in detected if f["direction"] == "to_broker"} == {"127.0.0.1:7777"}


def test_detect_ignores_connections_that_are_not_pulsar(tmp_path):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    http = [Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=5555, dport=80, flags="S", seq=1),
            Ether(**MACS) / IP(src="10.0.0.2", dst="10.0.0.1") / TCP(sport=80, dport=5555, flags="SA", seq=9, ack=2),
            Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=5555, dport=80, flags="PA", seq=2, ack=10)
            / (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 50)]
    pulsar = packets("01_basic_nonbatched.pcap")
    path = tmp_path / "mixed.pcap"
    write_pcap(path, [(1.0, bytes(p)) for p in http] + pulsar)
    recs = decode(path, detect=True)
    assert {r["conn"] for r in recs if "conn" in r} == {2}
    assert len(frames_of(recs)) == 59


@pytest.mark.parametrize("cut", [3, 14, 25, 40])
def test_capture_starting_mid_connection(tmp_path, full, cut):
    path = tmp_path / f"cut{cut}.pcap"
    write_pcap(path, packets("02_batching_props_keys.pcap")[cut:])
    recs = decode(path)
    got = frames_of(recs)
    # Frames whose first byte came after the cut are all there, decoded the same.
    complete = [f for f in full if f.get("first_packet", f["packet"]) > cut]
    assert [essence(f) for f in got][-len(complete):] == [essence(f) for f in complete]
    assert len(got) <= len(complete) + 2  # at most one frame per direction found by resynchronisation
    opened = [r for r in recs if r["type"] == "CONNECTION_OPENED"]
    assert opened and opened[0]["details"]["mid_stream"] is True
    for f in got:
        # Only an answer whose request came before the cut may be flagged (as unmatched).
        assert expert_ids(f) <= ({"response.unmatched"} if f["type"] in ("SEND_RECEIPT", "SUCCESS") else set())


def _tcp_payload_len(data: bytes) -> int:
    """TCP payload length of an Ethernet/IPv4 frame, from the IP total length (the corpus is EN10MB, IPv4)."""
    assert struct.unpack_from(">H", data, 12)[0] == 0x0800 and data[23] == 6  # IPv4, TCP
    ihl = (data[14] & 0x0F) * 4
    total = struct.unpack_from(">H", data, 16)[0]
    return total - ihl - (data[14 + ihl + 12] >> 4) * 4


def data_packets(name: str) -> list[int]:
    """Packet numbers (1-based) of the packets that carry TCP payload."""
    return [n for n, (_, data) in enumerate(packets(name), 1) if _tcp_payload_len(data) > 0]


@pytest.mark.parametrize("nth", [2, 8, 14, 20, 26])
def test_lost_packet_is_reported_and_decoding_resumes(tmp_path, full, nth):
    pk = packets("02_batching_props_keys.pcap")
    lost = data_packets("02_batching_props_keys.pcap")[nth]
    path = tmp_path / f"lost{lost}.pcap"
    write_pcap(path, pk[:lost - 1] + pk[lost:])  # packet numbers are 1-based
    recs = decode(path)
    gaps = [r for r in recs if r["type"] == "GAP"]
    assert len(gaps) == 1 and gaps[0]["length"] > 0
    got = frames_of(recs)
    untouched = [f for f in full if lost not in packets_of(f)]
    damaged_or_lost = len(full) - len(untouched)
    assert damaged_or_lost >= 1
    # Every frame the gap did not touch, as often as it occurs (a multiset, not a set). Not by packet number:
    # frames after a gap complete only when the reassembler gives up waiting for the lost bytes.
    got_clean = Counter(essence(f) for f in got if "frame.gap_damaged" not in expert_ids(f))
    assert not Counter(essence(f) for f in untouched) - got_clean, "frames the gap did not touch are missing"
    damaged = [f for f in got if "frame.gap_damaged" in expert_ids(f)]
    for f in damaged:
        assert f["checksum"] in ("unverified", "absent") if "checksum" in f else True


def test_truncated_capture_file_decodes_up_to_the_cut(tmp_path, full):
    data = capture_path("02_batching_props_keys.pcap").read_bytes()
    path = tmp_path / "cut.pcap"
    path.write_bytes(data[: len(data) // 2])
    recs = decode(path)
    assert recs[-1]["type"] == "CAPTURE_TRUNCATED"
    got = frames_of(recs)
    # Expected: every frame of the intact capture whose bytes all lie in the packet records that survive the
    # cut whole (counted here from the pcap record headers, not from our output).
    kept = len(_pcap_records(path.read_bytes()))
    expected = [f for f in full if f["packet"] <= kept]
    assert 0 < len(expected) < len(full)
    assert [(f["packet"], essence(f)) for f in got] == [(f["packet"], essence(f)) for f in expected]


def test_manifest_counts_survive_a_round_trip_through_our_pcap_writer(tmp_path):
    path = tmp_path / "copy.pcap"
    write_pcap(path, packets("01_basic_nonbatched.pcap"))
    got = frames_of(decode(path))
    m = manifest("01_basic_nonbatched")
    assert sum(1 for f in got if f["type"] == "SEND") == len(m["sent"])
    assert sum(1 for f in got if f["type"] == "MESSAGE") == len(m["received"])


def _payload_offset(data: bytes) -> int:
    ihl = (data[14] & 0x0F) * 4
    return 14 + ihl + (data[14 + ihl + 12] >> 4) * 4


@pytest.mark.parametrize("seed", range(12))
def test_corrupted_payload_bytes_never_crash_and_everything_else_decodes(tmp_path, full, seed):
    """Random bytes of the TCP payloads are overwritten (a broken client, a bad proxy): every frame that was
    not touched still decodes the same, and nothing raises."""
    import json
    import random

    rng = random.Random(seed)
    pk = packets("02_batching_props_keys.pcap")
    damaged = []
    touched = set()
    for n, (ts, data) in enumerate(pk, 1):
        start = _payload_offset(data)
        if len(data) > start and rng.random() < 0.15:
            buf = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(start, len(buf))] = rng.randrange(256)
            data = bytes(buf)
            touched.add(n)
        damaged.append((ts, data))
    path = tmp_path / f"corrupt{seed}.pcap"
    write_pcap(path, damaged)
    recs = decode(path)
    json.dumps(recs)  # everything stays serialisable
    assert touched
    # Every frame of the intact capture none of whose packets was overwritten, wherever it lies (before,
    # between or after the damaged packets), must come out of the damaged file from the same packet, decoded
    # the same and without a decoding problem.
    untouched = [f for f in full if touched.isdisjoint(packets_of(f))]
    assert 0 < len(untouched) < len(full)
    decoding = ("frame.", "command.", "checksum.", "payload.", "batch.", "marker.", "chunk.")
    got = Counter((f["packet"], essence(f)) for f in frames_of(recs)
                  if not any(i.startswith(decoding) for i in expert_ids(f)))
    missing = Counter((f["packet"], essence(f)) for f in untouched) - got
    assert not missing, f"{sum(missing.values())} untouched frames lost or decoded differently: " + \
        ", ".join(f"{t} of packet {p}" for (p, (t, *_)) in sorted(missing))


def test_a_clock_tick_declares_a_lost_segment_without_waiting_for_the_next_packet():
    """Live capture on an idle link: the hole before buffered bytes becomes a GAP when the clock passes the
    hole timeout, and the frames after it come out then, not when (or if) another packet arrives."""
    from dissector.capture.netlayers import TcpSegment
    from dissector.pipeline import Dissector
    from dissector.model import Event, Frame
    from framebuild import simple_frame

    first, lost, last = (simple_frame("PING"), simple_frame("PONG"), simple_frame("FLOW", consumer_id=1,
                                                                                    messagePermits=5))
    client, broker = ("10.0.0.2", 40000), ("10.0.0.1", 6650)

    def seg(n, t, seq, flags, payload=b""):
        return TcpSegment(n, t, *client, *broker, seq, 1, flags, 65535, payload, 0)

    d = Dissector(Options(hole_timeout=2.0))
    out = d.feed_segment(seg(1, 100.0, 999, 0x02))  # SYN
    out += d.feed_segment(seg(2, 100.1, 1000, 0x18, first))
    out += d.feed_segment(seg(3, 100.3, 1000 + len(first) + len(lost), 0x18, last))  # after a lost segment
    assert [f.pdu.type for f in out if type(f) is Frame] == ["PING"]
    assert d.tick(101.0) == []  # the hole is younger than the timeout
    later = d.tick(102.5)
    gaps = [e for e in later if type(e) is Event and e.kind == "GAP"]
    assert len(gaps) == 1 and gaps[0].length == len(lost)
    assert [f.pdu.type for f in later if type(f) is Frame] == ["FLOW"]


def test_what_the_streams_leave_at_their_end_comes_in_the_order_the_directions_spoke():
    """Both directions end inside a frame: each cut frame is reported at the close (frame.cut_at_end), the
    direction that spoke first first, whichever side it is."""
    from dissector.capture.netlayers import TcpSegment
    from dissector.pipeline import Dissector
    from dissector.model import Frame
    from framebuild import simple_frame

    client, broker = ("10.0.0.2", 40000), ("10.0.0.1", 6650)
    pong, ping = simple_frame("PONG"), simple_frame("PING")

    def seg(n, frm, to, seq, flags, payload=b""):
        return TcpSegment(n, 100.0 + n / 10, *frm, *to, seq, 1, flags, 65535, payload, 0)

    for broker_first in (True, False):
        d = Dissector(Options())
        out = d.feed_segment(seg(1, client, broker, 999, 0x02))  # SYN
        out += d.feed_segment(seg(2, broker, client, 4999, 0x12))  # SYN-ACK
        speakers = [(broker, client, 5000, pong), (client, broker, 1000, ping)]
        if not broker_first:
            speakers.reverse()
        for n, (frm, to, seq, frame) in enumerate(speakers, 3):
            out += d.feed_segment(seg(n, frm, to, seq, 0x18, frame[:-1]))  # the last byte never comes
        out += d.finish()
        cut = [f for f in out if type(f) is Frame]
        order = ["to_client", "to_broker"] if broker_first else ["to_broker", "to_client"]
        assert [f.direction for f in cut] == order
        assert [f.pdu.size for f in cut] == [len(frame) for *_, frame in speakers]
        assert all(f.pdu.findings[0].id == "frame.cut_at_end" for f in cut)


def test_one_direction_of_a_real_capture_keeps_bounded_state(tmp_path):
    """Only the client-to-broker half of a real capture (an asymmetric SPAN port): no SEND ever gets its
    receipt, yet at most max_pending_requests wait, and the tool says it dropped the rest."""
    to_broker = [(t, d) for t, d in packets("02_batching_props_keys.pcap")
                 if struct.unpack_from(">H", d, 14 + (d[14] & 0x0F) * 4 + 2)[0] == 6650]
    path = tmp_path / "to_broker.pcap"
    write_pcap(path, to_broker)
    recs = decode(path, max_pending_requests=4)
    sends = [r for r in frames_of(recs) if r["type"] == "SEND"]
    summary = manifest("02_batching_props_keys")["summary"]
    assert len(sends) == summary["batches_entries"]  # one SEND per batch the client API reported
    assert sum(len(r["messages"]) for r in sends) == summary["sent"]
    dropped = [r for r in recs if r["type"] == "STATE_DROPPED"]
    assert dropped and {r["details"]["option"] for r in dropped} == {"max_pending_requests"}
    assert len([r for r in recs if r["type"] == "UNANSWERED"]) == 4
    assert all(r["direction"] == "to_broker" for r in frames_of(recs))


def test_the_side_that_reset_the_connection_is_named(tmp_path):
    from framebuild import simple_frame
    from pcapgen import ether, ipv4_tcp

    client, broker = ("10.0.0.2", 40000), ("10.0.0.1", 6650)
    connect = simple_frame("CONNECT")

    def c2b(seq, ack, flags, payload=b""):
        return ether(ipv4_tcp(client[0], broker[0], client[1], broker[1], seq, ack, flags, payload))

    def b2c(seq, ack, flags, payload=b""):
        return ether(ipv4_tcp(broker[0], client[0], broker[1], client[1], seq, ack, flags, payload))

    pkts = [c2b(100, 0, 0x02), b2c(500, 101, 0x12), c2b(101, 501, 0x10), c2b(101, 501, 0x18, connect),
            b2c(501, 101 + len(connect), 0x14)]  # the broker answers the CONNECT with a reset
    path = tmp_path / "rst.pcap"
    write_pcap(path, [(1_700_000_000 + i / 100, p) for i, p in enumerate(pkts)])
    closed = [r for r in decode(path) if r["type"] == "CONNECTION_CLOSED"]
    assert [(c["details"]["how"], c["details"]["closed_by"]) for c in closed] == [("rst", "broker")]
    assert closed[0]["message"].endswith("by the broker")
