"""Tests of the PDU splitter with Pulsar framing: splitting, limits, foreign protocols, resynchronisation, gaps."""

from __future__ import annotations

import dataclasses
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import framebuild as fb
from dissector.model import Event, Frame
from dissector.options import Options
from dissector.pipeline import dissect_file
from dissector.problems import message
from dissector.protocols.base import NEED_MORE
from dissector.protocols.pulsar import PULSAR
from dissector.protocols.pulsar.decode import decode_frame
from dissector.transport.splitter import OVERSIZED_HEAD_LIMIT, PduSplitter, RawFrame, StreamNote

DEFAULT_MAX_FRAME_SIZE = PULSAR.max_frame_size  # Pulsar's own, when the options do not say


def text(note) -> str:
    """The message a note becomes at output."""
    return message(note.kind, {**note.details, **note.params, "offset": note.offset, "length": note.length})


# ----------------------------------------------------------------------------------------------- helpers
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


def new_splitter(**kw) -> PduSplitter:
    kw.setdefault("max_frame_size", DEFAULT_MAX_FRAME_SIZE)
    return PduSplitter(PULSAR, **kw)


def run(chunks, *, splitter: PduSplitter | None = None, finish: bool = True, **kw) -> list:
    """Feed ``chunks`` (bytes, or ("gap", n)) one per packet; return every frame and note, finish included."""
    sp = splitter or new_splitter(**kw)
    out = []
    for i, chunk in enumerate(chunks):
        if isinstance(chunk, tuple):
            out += sp.gap(chunk[1], float(i), i)
        else:
            out += sp.feed(chunk, float(i), i)
    if finish:
        out += sp.finish(float(len(chunks)), len(chunks))
    return out


def frames_of(items) -> list[bytes]:
    return [it.data for it in items if isinstance(it, RawFrame)]


def notes_of(items, kind: str | None = None) -> list[StreamNote]:
    return [it for it in items if isinstance(it, StreamNote) and (kind is None or it.kind == kind)]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


# ------------------------------------------------------------------------------------------ normal split
def test_frames_fed_byte_by_byte():
    frames = sample_frames()
    stream = b"".join(frames)
    items = run(bytewise(stream))
    assert frames_of(items) == frames
    assert notes_of(items) == []
    offsets = [it.offset for it in items]
    assert offsets == [sum(map(len, frames[:i])) for i in range(len(frames))]
    for it in items:
        assert it.missing == 0
        # packet i carries stream byte i: the frame spans packets offset .. offset+len-1
        assert it.first_packet == it.offset
        assert it.last_packet == it.offset + len(it.data) - 1


def test_many_frames_in_one_feed():
    frames = sample_frames() * 20
    items = run([b"".join(frames)])
    assert frames_of(items) == frames
    assert notes_of(items) == []
    for f in frames_of(items):
        assert decode_frame(f).findings == []


@pytest.mark.parametrize("seed", range(5))
def test_random_segmentation(seed):
    rng = random.Random(seed)
    frames = sample_frames() * 3
    stream = b"".join(frames)
    chunks, pos = [], 0
    while pos < len(stream):
        n = rng.randint(1, 50)
        chunks.append(stream[pos:pos + n])
        pos += n
    items = run(chunks)
    assert frames_of(items) == frames
    assert notes_of(items) == []


def test_frame_time_and_packets_span_segments():
    f1, f2 = sample_frames()[:2]
    items = run([f1[:5], f1[5:] + f2[:3], f2[3:]])
    assert [(i.first_packet, i.last_packet) for i in items] == [(0, 1), (1, 2)]
    assert [(i.first_time, i.timestamp) for i in items] == [(0.0, 1.0), (1.0, 2.0)]


# --------------------------------------------------------------------------------------------- oversize
def test_oversized_total_size_then_resync():
    f = sample_frames()
    junk = bytes(range(0x20, 0x7F))  # no 0x08 byte: nothing in it can start a frame
    bad = struct.pack(">II", DEFAULT_MAX_FRAME_SIZE + 1, 20) + junk
    stream = f[0] + bad + f[1] + f[2] + f[3]
    for chunks in ([stream], bytewise(stream)):
        items = run(chunks)
        assert frames_of(items) == [f[0], f[1], f[2], f[3]]
        over = notes_of(items, "OVERSIZED")
        assert len(over) == 1
        assert over[0].offset == len(f[0])
        assert over[0].details["total_size"] == DEFAULT_MAX_FRAME_SIZE + 1
        skipped = notes_of(items, "SKIPPED")
        assert sum(n.length for n in skipped) == len(bad)
        assert skipped[0].offset == len(f[0])
        # order: frame 0, OVERSIZED, SKIPPED, then the frames found again
        kinds = [type(i).__name__ if isinstance(i, RawFrame) else i.kind for i in items]
        assert kinds[:3] == ["RawFrame", "OVERSIZED", "SKIPPED"]


def test_frame_size_limit_is_inclusive():
    frame = fb.send_frame(b"z" * 60)
    total = len(frame) - 4
    ok = run([frame], max_frame_size=total)
    assert frames_of(ok) == [frame]
    assert not any(f.oversized or f.missing for f in ok if isinstance(f, RawFrame))
    too_big = run([frame], max_frame_size=total - 1)
    # one byte above the limit: OVERSIZED, and only the head (sizes, command, metadata) is handed on
    (over,) = notes_of(too_big)
    assert over.kind == "OVERSIZED" and over.details["total_size"] == total
    (head,) = [f for f in too_big if isinstance(f, RawFrame)]
    assert head.oversized and head.data == frame[:len(frame) - 60] and head.missing == 60


def _big_send(size: int = 100_000, **kw) -> bytes:
    return fb.send_frame(bytes(range(256)) * (size // 256), sequence_id=3, **kw)


@pytest.mark.parametrize("feed", ["whole", "bytewise", "packets"])
def test_oversized_frame_head_is_a_frame_and_the_rest_is_skipped_unbuffered(feed):
    """A SEND above the limit: OVERSIZED, its head as a frame (missing the rest), then the next frames as usual,
    with nothing skipped or resynchronised, and never more than the head buffered."""
    f = sample_frames()
    big = _big_send()
    limit = 20_000
    stream = f[0] + big + f[1] + f[3]
    chunks = {"whole": [stream], "bytewise": bytewise(stream),
              "packets": [stream[i:i + 1400] for i in range(0, len(stream), 1400)]}[feed]
    sp = new_splitter(max_frame_size=limit)
    items, most = [], 0
    for i, chunk in enumerate(chunks):
        items += sp.feed(chunk, float(i), i)
        most = max(most, len(sp.buffered))
    items += sp.finish(float(len(chunks)), len(chunks))
    kinds = [type(i).__name__ if isinstance(i, RawFrame) else i.kind for i in items]
    assert kinds == ["RawFrame", "OVERSIZED", "RawFrame", "RawFrame", "RawFrame"]
    head = items[2]
    assert head.oversized and head.offset == len(f[0]) and big.startswith(head.data)
    assert len(head.data) + head.missing == len(big) and len(head.data) < 200
    assert items[1].offset == len(f[0]) and items[1].details["total_size"] == len(big) - 4
    assert frames_of(items)[2:] == [f[1], f[3]] and not any(i.missing for i in items[3:])
    if feed != "whole":
        assert most < 1400 + 200  # the head and a packet, never the whole frame
    dec = decode_frame(head.data, head.missing)
    assert dec.type == "SEND" and dec.command["sequence_id"] == 3 and dec.size == len(big)


def test_oversized_frame_across_a_gap_and_at_the_end():
    big = _big_send()
    f = sample_frames()
    # the gap falls in the skipped rest: the frames after it are still found at their boundary
    items = run([big[:3000], ("gap", 5000), big[8000:] + f[1]], max_frame_size=20_000)
    assert [type(i).__name__ if isinstance(i, RawFrame) else i.kind for i in items] == ["OVERSIZED", "RawFrame",
                                                                                        "RawFrame"]
    assert items[1].oversized and frames_of(items)[1] == f[1]
    # the stream ends in the skipped rest: the head was already handed on, nothing more is said
    items = run([f[0] + big[:3000]], max_frame_size=20_000)
    assert [type(i).__name__ if isinstance(i, RawFrame) else i.kind for i in items] == ["RawFrame", "OVERSIZED",
                                                                                        "RawFrame"]
    assert items[2].oversized and items[2].missing == len(big) - len(items[2].data)


def test_oversized_frame_without_a_head_in_reach_is_skipped_as_before():
    f = sample_frames()
    # only part of the head before a gap, and before the end of the stream: skipped and resynchronised
    big = _big_send()
    items = run([f[0] + big[:20], ("gap", 100), big[120:] + f[1]], max_frame_size=20_000)
    assert not any(i.oversized for i in items if isinstance(i, RawFrame))
    assert notes_of(items, "OVERSIZED") and frames_of(items)[0] == f[0] and frames_of(items)[-1] == f[1]
    items = run([f[0] + big[:20]], max_frame_size=20_000)
    assert frames_of(items) == [f[0]] and [n.kind for n in notes_of(items)][0] == "OVERSIZED"
    # a head the protocol still wants more bytes for after OVERSIZED_HEAD_LIMIT: not waited for beyond it
    always_more = dataclasses.replace(PULSAR, oversized_head=lambda buf, pos, end: NEED_MORE)
    sp = PduSplitter(always_more, max_frame_size=20_000)
    items = []
    for i in range(0, len(big), 1400):
        items += sp.feed(big[i:i + 1400], 0.0, 0)
        assert len(sp.buffered) < OVERSIZED_HEAD_LIMIT + 1400
    items += sp.feed(f[1], 0.0, 0) + sp.finish(1.0, 1)
    assert [n.kind for n in notes_of(items)][0] == "OVERSIZED" and frames_of(items)[-1] == f[1]
    assert not any(i.oversized for i in items if isinstance(i, RawFrame))
    # metadata beyond framing's own head limit: the command alone is the head
    md = fb.metadata(sequence_id=3, properties=[{"key": "k", "value": "v" * 70_000}])
    huge = fb.send_frame(b"p" * 1000, sequence_id=3, md=md)
    (head,) = [i for i in run([huge], max_frame_size=20_000) if isinstance(i, RawFrame)]
    assert head.oversized and len(head.data) == 8 + struct.unpack_from(">I", huge, 4)[0]
    # a PING cannot be that large: its size is not trusted
    ping = struct.pack(">II", 30_000, 29_996) + fb.simple_frame("PING")[8:]
    items = run([ping + f[1]], max_frame_size=20_000)
    assert not any(i.oversized for i in items if isinstance(i, RawFrame)) and frames_of(items)[-1] == f[1]


def test_total_size_too_small():
    f = sample_frames()
    stream = f[0] + b"\x00\x00\x00\x02\xaa\xbb" + f[1] + f[2]
    items = run([stream])
    assert frames_of(items) == [f[0], f[1], f[2]]
    assert [n.kind for n in notes_of(items)] == ["BAD_SIZE", "SKIPPED"]
    assert notes_of(items, "SKIPPED")[0].length == 6


# ------------------------------------------------------------------------------------ foreign protocols
TLS_CLIENT_HELLO = bytes.fromhex(
    "16030100f8010000f40303") + bytes(32) + bytes.fromhex("20") + bytes(32) + bytes.fromhex("0008130213031301c02c")


@pytest.mark.parametrize("head, word", [
    (TLS_CLIENT_HELLO, "TLS"),
    (b"GET / HTTP/1.1\r\nHost: broker:6650\r\nUser-Agent: curl/8\r\n\r\n", "HTTP"),
    (b"POST /admin/v2 HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "HTTP"),
])
@pytest.mark.parametrize("bytewise_feed", [False, True])
def test_foreign_protocol_at_stream_start(head, word, bytewise_feed):
    # Even when Pulsar-looking frames follow, the stream is not decoded as Pulsar.
    stream = head + b"".join(sample_frames()[:2])
    items = run(bytewise(stream) if bytewise_feed else [stream])
    assert frames_of(items) == []
    notes = notes_of(items, "NOT_PULSAR")
    assert len(notes) == 1
    assert word in text(notes[0])
    assert word in notes[0].details["protocol"]
    # Reported as soon as it is recognised: the length is what had arrived by then.
    assert notes[0].length == (4 if bytewise_feed else len(stream))
    assert notes[0].offset == 0
    assert [n.kind for n in notes_of(items)] == ["NOT_PULSAR"]


def test_tls_on_the_wire_is_named_when_not_at_stream_start():
    # After a resync the same bytes are only an oversized TOTAL_SIZE, but the note says what they look like.
    f = sample_frames()
    items = run([f[0] + TLS_CLIENT_HELLO[:5] + bytes(3) + f[1] + f[2]])
    assert frames_of(items) == [f[0], f[1], f[2]]
    assert "TLS" in text(notes_of(items, "OVERSIZED")[0])


PROXY_V1 = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 6650\r\n"
PROXY_V2 = (b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack(">H", 12)
            + bytes([192, 168, 0, 1, 192, 168, 0, 11]) + struct.pack(">HH", 56324, 6650))


@pytest.mark.parametrize("header", [PROXY_V1, b"PROXY UNKNOWN\r\n", PROXY_V2], ids=["v1", "v1-unknown", "v2"])
@pytest.mark.parametrize("bytewise_feed", [False, True])
def test_proxy_protocol_header_skipped(header, bytewise_feed):
    frames = sample_frames()
    stream = header + b"".join(frames)
    items = run(bytewise(stream) if bytewise_feed else [stream])
    assert frames_of(items) == frames
    notes = notes_of(items)
    assert [n.kind for n in notes] == ["PROXY_HEADER"]
    assert notes[0].offset == 0 and notes[0].length == len(header)
    assert [f.offset for f in items if isinstance(f, RawFrame)][0] == len(header)


def test_proxy_header_only_at_stream_start():
    f = sample_frames()
    items = run([f[0] + PROXY_V1 + f[1]])
    assert frames_of(items) == [f[0], f[1]]
    assert "PROXY_HEADER" not in [n.kind for n in notes_of(items)]
    assert notes_of(items, "SKIPPED")[0].length == len(PROXY_V1)


# -------------------------------------------------------------------------------------- mid-stream start
@pytest.mark.parametrize("victim", range(len(sample_frames())))
def test_mid_stream_start_every_cut(victim):
    """Capture starts inside frame ``victim``: every cut position skips exactly its tail, then decodes the rest."""
    frames = sample_frames()
    frame = frames[victim]
    rest = frames[victim + 1:] + frames[:victim + 1]
    for cut in range(1, len(frame)):
        tail = frame[cut:]
        items = run([tail + b"".join(rest)], synced=False, start_offset=5000)
        assert frames_of(items) == rest, f"cut at {cut}"
        skipped = notes_of(items)
        assert [n.kind for n in skipped] == ["SKIPPED"], f"cut at {cut}"
        assert skipped[0].length == len(tail) and skipped[0].offset == 5000
        assert items[1].offset == 5000 + len(tail)


def test_mid_stream_start_bytewise():
    frames = sample_frames()
    tail = frames[2][11:]
    items = run(bytewise(tail + b"".join(frames)), synced=False)
    assert frames_of(items) == frames
    assert [(n.kind, n.length) for n in notes_of(items)] == [("SKIPPED", len(tail))]


def test_mid_stream_start_on_a_boundary_skips_nothing():
    frames = sample_frames()
    items = run([b"".join(frames)], synced=False)
    assert frames_of(items) == frames
    assert notes_of(items) == []


# ------------------------------------------------------------------------------------------------- gaps
def test_gap_inside_frame_after_header_then_next_frame_exact():
    f = sample_frames()
    victim = f[2]  # SEND with payload
    before, lost = 20, 15
    after = victim[before + lost:]
    items = run([f[0] + f[1] + victim[:before], ("gap", lost), after + f[3] + f[4]])
    raw = [i for i in items if isinstance(i, RawFrame)]
    assert [r.data for r in raw] == [f[0], f[1], victim[:before], f[3], f[4]]
    damaged = raw[2]
    assert damaged.missing > 0
    assert len(damaged.data) + damaged.missing == len(victim)
    assert damaged.offset == len(f[0]) + len(f[1])
    assert raw[3].offset == len(f[0]) + len(f[1]) + len(victim)
    assert notes_of(items) == []  # no scan needed: the damaged frame's size says where the next one starts
    dec = decode_frame(damaged.data, missing=damaged.missing)
    assert dec.type == "SEND"
    assert dec.size == len(victim)
    # the gap itself is the pipeline's to say; the sizes agree once the lost bytes are counted
    assert not {"frame.size_mismatch", "frame.cmd_size", "frame.gap_damaged"} & {f.id for f in dec.findings}


def test_gap_ending_exactly_at_frame_boundary():
    f = sample_frames()
    items = run([f[0] + f[2][:10], ("gap", len(f[2]) - 10), f[3] + f[4]])
    raw = [i for i in items if isinstance(i, RawFrame)]
    assert [r.data for r in raw] == [f[0], f[2][:10], f[3], f[4]]
    assert raw[1].missing == len(f[2]) - 10
    assert notes_of(items) == []


def test_gap_tail_split_over_several_feeds():
    f = sample_frames()
    victim = f[4]
    rest = victim[50:]
    items = run([victim[:30], ("gap", 20)] + bytewise(rest) + [f[5]])
    raw = [i for i in items if isinstance(i, RawFrame)]
    assert [r.data for r in raw] == [victim[:30], f[5]]
    assert notes_of(items) == []


def test_gap_swallowing_frame_boundary_resyncs():
    f = sample_frames()
    victim, next_frame = f[2], f[3] + f[4]
    into_next = 7
    lost = len(victim) - 20 + into_next
    items = run([f[0] + victim[:20], ("gap", lost), next_frame[into_next:] + f[5] + f[6]])
    assert frames_of(items) == [f[0], victim[:20], f[4], f[5], f[6]]
    assert [(n.kind, n.length) for n in notes_of(items)] == [("SKIPPED", len(f[3]) - into_next)]


def test_gap_before_size_fields_were_read():
    f = sample_frames()
    items = run([f[0] + f[1][:3], ("gap", 10), f[1][13:] + f[2] + f[3]])
    assert frames_of(items) == [f[0], f[2], f[3]]
    kinds = [n.kind for n in notes_of(items)]
    assert kinds == ["TRUNCATED", "SKIPPED"]
    assert notes_of(items, "SKIPPED")[0].length == len(f[1]) - 13


def test_gap_at_frame_boundary_then_frames():
    f = sample_frames()
    items = run([f[0], ("gap", len(f[1])), f[2] + f[3]])
    assert frames_of(items) == [f[0], f[2], f[3]]
    assert notes_of(items) == []
    assert [i.offset for i in items] == [0, len(f[0]) + len(f[1]), len(f[0]) + len(f[1]) + len(f[2])]


# ------------------------------------------------------------------------------------------ end of stream
def test_end_of_stream_inside_a_frame():
    f = sample_frames()
    items = run([f[0] + f[2][:-5]])
    raw = [i for i in items if isinstance(i, RawFrame)]
    assert [r.data for r in raw] == [f[0], f[2][:-5]]
    assert raw[1].missing == 5
    dec = decode_frame(raw[1].data, missing=raw[1].missing)
    assert dec.type == "SEND" and dec.findings and dec.size == len(f[2])
    assert dec.body.checksum == "unverified"


def test_end_of_stream_inside_size_fields():
    f = sample_frames()
    items = run([f[0] + f[1][:6]])
    assert frames_of(items) == [f[0]]
    trunc = notes_of(items, "TRUNCATED")
    assert len(trunc) == 1 and trunc[0].length == 6 and trunc[0].offset == len(f[0])


def test_end_of_stream_while_resyncing():
    items = run([b"\x01\x02\x03" * 10], synced=False)
    assert frames_of(items) == []
    assert sum(n.length for n in notes_of(items)) == 30


# ------------------------------------------------------------------------------------------------ fuzzing
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000), synced=st.booleans(), cuts=st.lists(st.integers(1, 400), max_size=20))
def test_random_bytes_never_raise(data, synced, cuts):
    chunks, pos = [], 0
    for c in cuts:
        chunks.append(data[pos:pos + c])
        pos += c
    chunks.append(data[pos:])
    items = run(chunks, synced=synced)
    # every byte is accounted for exactly once, by a frame or a note (OVERSIZED / BAD_SIZE describe the first
    # 4 bytes of a SKIPPED run, they do not count bytes of their own)
    # (the head of an oversized frame also covers the rest of it that was skipped, up to the end of the data)
    covered = sum((min(len(i.data) + i.missing, len(data) - i.offset) if i.oversized else len(i.data))
                  if isinstance(i, RawFrame) else i.length for i in items
                  if not (isinstance(i, StreamNote) and i.kind in ("OVERSIZED", "BAD_SIZE")))
    assert covered == len(data)
    for it in items:
        if isinstance(it, RawFrame):
            decode_frame(it.data, missing=it.missing)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=st.binary(max_size=2000), n=st.integers(2, 5), cut=st.integers(1, 64),
       seed=st.integers(0, 2**16))
def test_frames_found_again_after_garbage(garbage, n, cut, seed):
    rng = random.Random(seed)
    pool = sample_frames()
    frames = [rng.choice(pool) for _ in range(n)]
    stream = garbage + b"".join(frames)
    chunks = [stream[i:i + cut] for i in range(0, len(stream), cut)]
    items = run(chunks, synced=False)
    assert frames_of(items)[-(n - 1):] == frames[1:]
    assert frames_of(items)[-1] == frames[-1]


# ------------------------------------------------------------------------------- through the pipeline
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


@pytest.mark.parametrize("decoy", [
    # TOTAL 1 MiB, CMD_SIZE 64 KiB, then "type = SEND": a chance frame start inside payload bytes
    bytes.fromhex("0010000000010000") + bytes([0x08, 0x06]) + b"garbage!",
    # ... even followed by the SEND field key, with an empty (uninitialized) CommandSend
    bytes.fromhex("0010000000010000") + bytes([0x08, 0x06, 0x32]),
    # MESSAGE key and a sub-command length far beyond the bytes that follow
    bytes.fromhex("00100000000100000809") + bytes([0x4A, 0xFF, 0x7F]),
], ids=["type-only", "empty-send", "long-sub"])
def test_resync_is_not_stalled_by_a_decoy_with_a_large_cmd_size(decoy):
    """A decoy whose CMD_SIZE exceeds the bytes at hand must not hold back the real frames after it."""
    f = sample_frames()
    items = run([b"\x01" * 9 + decoy + f[1] + f[2] + f[3]], synced=False)
    assert frames_of(items) == [f[1], f[2], f[3]]
    assert [n.kind for n in notes_of(items)] == ["SKIPPED"]
    assert notes_of(items)[0].length == 9 + len(decoy)


def _ranges(items):
    out = []
    for it in items:
        if isinstance(it, RawFrame):
            out.append((it.offset, it.offset + len(it.data), "frame"))
        elif it.kind not in ("OVERSIZED", "BAD_SIZE"):
            out.append((it.offset, it.offset + it.length, it.kind))
    return sorted(out)


def test_skipped_run_does_not_span_a_gap():
    f = sample_frames()
    junk = b"\x01\x02\x03\x04" * 25  # 100 bytes, nothing looks like a frame
    items = run([junk, ("gap", 50), junk[:30] + f[0] + f[1]], synced=False)
    assert frames_of(items) == [f[0], f[1]]
    gap = (100, 150)
    for start, end, kind in _ranges(items):
        assert end <= gap[0] or start >= gap[1], (start, end, kind)
    assert sum(e - s for s, e, _ in _ranges(items) if _ != "frame") == 130


def test_foreign_stream_offset_with_a_gap():
    items = run([TLS_CLIENT_HELLO[:40], ("gap", 100), TLS_CLIENT_HELLO[40:]])
    (note,) = notes_of(items, "NOT_PULSAR")
    assert note.offset == 0
    assert note.length == 40  # recognised on the first 40 bytes, before the gap


_OPS = st.one_of(st.tuples(st.just("data"), st.binary(min_size=1, max_size=200)),
                 st.tuples(st.just("gap"), st.integers(1, 300)),
                 st.tuples(st.just("frame"), st.integers(0, len(sample_frames()) - 1)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_OPS, max_size=30), synced=st.booleans())
def test_frames_and_notes_never_overlap_and_avoid_gaps(ops, synced):
    """Random mixes of frames, garbage and gaps: what the splitter reports covers disjoint byte ranges, none
    inside a gap; when resynchronising, the last frames of a clean tail are always found."""
    pool = sample_frames()
    chunks, gaps, pos = [], [], 0
    for kind, value in ops:
        if kind == "data":
            chunks.append(value)
            pos += len(value)
        elif kind == "gap":
            chunks.append(("gap", value))
            gaps.append((pos, pos + value))
            pos += value
        else:
            chunks.append(pool[value])
            pos += len(pool[value])
    tail = [pool[1], pool[2], pool[3], pool[0]]
    chunks.extend(tail)
    items = run(chunks, synced=synced)
    ranges = _ranges(items)
    for (s1, e1, k1), (s2, e2, k2) in zip(ranges, ranges[1:]):
        assert e1 <= s2, (s1, e1, k1, s2, e2, k2)
    for s, e, k in ranges:
        if k == "NOT_PULSAR":
            continue  # counts the foreign bytes of the whole rest of the stream, gaps or not
        for gs, ge in gaps:
            assert e <= gs or s >= ge, (s, e, k, gs, ge)
    # A synced splitter trusts sizes: garbage it meets while synced (at the start of a synced stream, or right
    # after a frame with no gap between: not a real TCP stream) may claim everything after it.
    state, corrupt = synced, False
    for kind, _ in ops:
        if kind == "frame":
            state = True
        elif kind == "gap":
            state = False
        elif state:
            corrupt = True
    if not corrupt:
        assert frames_of(items)[-2:] == tail[-2:]


@pytest.mark.parametrize("head, word", [(TLS_CLIENT_HELLO, "TLS"), (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP")])
def test_pcap_foreign_protocol_on_pulsar_port(tmp_path, head, word):
    path = tmp_path / "foreign.pcap"
    fb.tcp_pcap(path, [("c", head), ("b", b"HTTP/1.1 400 Bad Request\r\n\r\n" if word == "HTTP" else b"\x15\x03\x03")])
    fr, evs = _frames_and_events(path)
    assert fr == []
    foreign = [e for e in evs if e.kind == "NOT_PULSAR"]
    assert foreign and word in text(foreign[0])
    assert foreign[0].direction == "to_broker" and foreign[0].length == len(head)
