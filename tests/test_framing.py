"""Tests of Pulsar framing through the whole pipeline (captures in, frames and stream events out): segments cut
anywhere and reordered, a segment lost inside a frame, a capture that starts mid-stream, another protocol on
Pulsar's port. The splitter's own cases (limits, resynchronisation, gaps, PROXY headers, foreign protocols) are
cargo tests: crates/engine/tests/splitter.rs and pulsar_framing.rs."""

from __future__ import annotations

import pytest

import framebuild as fb
from dissector.model import Event, Frame
from dissector.pipeline import dissect_file
from dissector.problems import message


def text(note) -> str:
    """The message a note becomes at output."""
    return message(note.kind, {**note.details, **note.params, "offset": note.offset, "length": note.length})


def sample_frames() -> list[bytes]:
    return [
        fb.simple_frame("CONNECT", client_version="test-client", protocol_version=20),
        fb.simple_frame("PRODUCER", topic="persistent://public/default/t", producer_id=1, request_id=1,
                        producer_name="prod-a"),
        fb.send_frame(b"payload-0" * 5, sequence_id=0),
        fb.simple_frame("PING"),
        fb.send_frame(b"x" * 300, sequence_id=1, checksum=False),
        fb.simple_frame("FLOW", consumer_id=3, messagePermits=1000),
        fb.message_frame(b"m" * 40, entry_id=7, broker_entry_metadata={"broker_timestamp": 5, "index": 9}),
        fb.simple_frame("ACK", consumer_id=3, ack_type=0, message_id=[{"ledgerId": 1, "entryId": 7}]),
    ]


TLS_CLIENT_HELLO = bytes.fromhex(
    "16030100f8010000f40303") + bytes(32) + bytes.fromhex("20") + bytes(32) + bytes.fromhex("0008130213031301c02c")


def _frames_and_events(path):
    evs = list(dissect_file(path))
    return ([e for e in evs if type(e) is Frame],
            [e for e in evs if type(e) is Event and e.kind not in ("CONNECTION_OPENED", "CONNECTION_CLOSED")])


def test_pcap_small_segments_and_reordering(tmp_path):
    frames = [("c" if i % 2 == 0 else "b", f) for i, f in enumerate(sample_frames())]
    path = tmp_path / "x.pcap"
    segs = fb.tcp_pcap(path, frames, segment_size=[7, 1, 30, 3], reorder=[(2, 3), (10, 12)])
    assert len(segs) > 13
    fr, evs = _frames_and_events(path)
    assert [e.pdu.type for e in fr] == ["CONNECT", "PRODUCER", "SEND", "PING", "SEND", "FLOW", "MESSAGE", "ACK"]
    assert all(not e.pdu.findings for e in fr), [e.pdu.findings for e in fr]
    assert [e.direction for e in fr] == ["to_broker", "to_client"] * 4
    assert [e.kind for e in evs] == []


def test_pcap_dropped_segment_inside_frame(tmp_path):
    f = sample_frames()
    stream = [f[0], f[2], f[3], f[4], f[5]]
    path = tmp_path / "drop.pcap"
    # f[0] = 1 segment, f[2] in segments of 10 bytes: drop the 3rd segment of f[2]
    sizes = [len(f[0])] + [10] * 200
    segs = fb.tcp_pcap(path, stream, segment_size=sizes, drop=[3])
    assert segs[3].offset == len(f[0]) + 20
    fr, evs = _frames_and_events(path)
    assert [e.pdu.type for e in fr] == ["CONNECT", "SEND", "PING", "SEND", "FLOW"]
    damaged = fr[1].pdu
    gap = [f for f in damaged.findings if f.id == "frame.gap_damaged"]
    assert gap and gap[0].params["missing"] > 0
    assert damaged.size == len(f[2])
    assert [e.pdu.findings for e in fr[2:]] == [[], [], []]
    assert [e.kind for e in evs] == ["GAP"]
    assert evs[0].length == 10


def test_pcap_mid_stream_capture(tmp_path):
    f = sample_frames()
    path = tmp_path / "mid.pcap"
    # no handshake: the capture starts inside the first frame
    fb.tcp_pcap(path, [f[2][17:] + f[3] + f[4] + f[5]], handshake=False, segment_size=25)
    fr, evs = _frames_and_events(path)
    assert [e.pdu.type for e in fr] == ["PING", "SEND", "FLOW"]
    assert [(e.kind, e.length) for e in evs] == [("SKIPPED", len(f[2]) - 17)]


@pytest.mark.parametrize("head, word", [(TLS_CLIENT_HELLO, "TLS"), (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP")])
def test_pcap_foreign_protocol_on_pulsar_port(tmp_path, head, word):
    path = tmp_path / "foreign.pcap"
    fb.tcp_pcap(path, [("c", head), ("b", b"HTTP/1.1 400 Bad Request\r\n\r\n" if word == "HTTP" else b"\x15\x03\x03")])
    fr, evs = _frames_and_events(path)
    assert fr == []
    foreign = [e for e in evs if e.kind == "NOT_PULSAR"]
    assert foreign and word in text(foreign[0])
    assert foreign[0].direction == "to_broker" and foreign[0].length == len(head)
