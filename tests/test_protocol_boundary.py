"""The protocol boundary: a second protocol, declared here in a few lines, goes through the whole tool.

"Toy" frames are ``[LENGTH u16][TYPE u8][REQUEST_ID u32][body]`` (LENGTH counts what follows it). A client
sends GET (1) on TCP 7001; the server answers each with REPLY (2) under the same request id. Nothing outside
this file knows the toy: it is registered like any protocol, then captured, reassembled, split, decoded,
paired, turned into records, shown on the timeline and counted in the statistics by the generic code.
"""

from __future__ import annotations

import io
import struct

import pytest
from rich.console import Console

import framebuild as fb
from dissector import protocols
from dissector.model import Decoded
from dissector.options import Options
from dissector.output.stats import StatsCollector
from dissector.output.timeline import TimelineRenderer
from dissector.problems import Finding, register
from dissector.protocols.base import NEED_MORE, BadLength, CommandSpec, CommandTable, Key, ProtocolSpec, Space
from dissector.run import analysed_records

TOY_PORT = 7001
_TYPES = {1: "GET", 2: "REPLY"}
_BY_ID = Key(Space("toy-request", duplicates=True, unmatched=True), ("request_id",))
register("toy.empty_get", "warning", "GET {request_id} asks for nothing")


def toy_length(buf, pos: int, end: int, max_size: int):
    if end - pos < 2:
        return NEED_MORE
    length = struct.unpack_from(">H", buf, pos)[0]
    if length < 5:
        return BadLength("BAD_SIZE", {"length": length}, {"field": "LENGTH", "size": length})
    return length + 2


def toy_decode(pdu: bytes, missing: int, options: Options) -> Decoded:
    kind, request_id = struct.unpack_from(">BI", pdu, 2)
    body = pdu[7:]
    findings = [Finding("toy.empty_get", {"request_id": request_id})] if kind == 1 and not body else []
    command = {"request_id": request_id, "body": body.decode("utf-8", "backslashreplace")}
    return Decoded(_TYPES.get(kind, f"UNKNOWN({kind})"), command, len(pdu) + missing, findings)


TOY = ProtocolSpec(
    name="toy", client_role="client", server_roles=("server",), ports={TOY_PORT: "server"},
    commands=CommandTable([
        CommandSpec("GET", 1, "client", (("req", "request_id"), ("what", "body")), opens=_BY_ID),
        CommandSpec("REPLY", 2, "server", (("req", "request_id"),), answers=(_BY_ID,)),
    ]),
    pdu_length=toy_length, decode=toy_decode,
)


def toy_frame(kind: int, request_id: int, body: bytes = b"") -> bytes:
    return struct.pack(">HBI", 5 + len(body), kind, request_id) + body


@pytest.fixture()
def toy_capture(tmp_path):
    protocols.register(TOY)
    path = tmp_path / "toy.pcap"
    fb.tcp_pcap(path, [("c", toy_frame(1, 7, b"apple") + toy_frame(1, 8, b"pear")),
                       ("b", toy_frame(2, 8, b"green")),
                       ("c", toy_frame(1, 9)),
                       ("b", toy_frame(2, 7, b"red"))],
                broker=("10.0.0.9", TOY_PORT), segment_size=5, step=0.002)
    yield path
    protocols.unregister("toy")


def test_a_protocol_declared_in_the_tests_is_dissected_and_paired(toy_capture):
    recs = list(analysed_records(toy_capture))
    frames = [r for r in recs if "index" in r]
    assert [(r["type"], r["command"]["request_id"], r["direction"]) for r in frames] == [
        ("GET", 7, "to_server"), ("GET", 8, "to_server"), ("REPLY", 8, "to_client"), ("GET", 9, "to_server"),
        ("REPLY", 7, "to_client")]
    assert {r["protocol"] for r in frames} == {"toy"}
    get7, get8, reply8, get9, reply7 = frames
    assert (reply8["answers"], reply8["request_type"]) == (get8["index"], "GET")
    assert reply7["answers"] == get7["index"]
    assert reply7["latency_ms"] == pytest.approx((reply7["time"] - get7["time"]) * 1000, abs=0.001)
    assert [e["id"] for e in get9["expert"]] == ["toy.empty_get"]
    assert get9["problems"] == ["GET 9 asks for nothing"]
    events = [r for r in recs if "index" not in r]
    opened = events[0]
    assert opened["type"] == "CONNECTION_OPENED" and opened["details"]["server"] == f"10.0.0.9:{TOY_PORT}"
    unanswered = [e for e in events if e["type"] == "UNANSWERED"]
    assert [e["details"] for e in unanswered] == [{"request": get9["index"], "request_type": "GET"}]
    closed = [e for e in events if e["type"] == "CONNECTION_CLOSED"]
    assert len(closed) == 1 and closed[0]["details"]["closed_by"] == "client"
    assert closed[0]["details"]["bytes_to_server"] == sum(r["size"] for r in frames if r["direction"] == "to_server")


def test_the_toy_on_the_timeline_and_in_the_statistics(toy_capture):
    out = io.StringIO()
    renderer = TimelineRenderer(Console(file=out, width=100, color_system=None), plain=True)
    stats = StatsCollector()
    for rec in analysed_records(toy_capture, summary=True):
        renderer.render(rec)
        stats.add(rec)
    lines = out.getvalue().splitlines()
    assert any("GET" in line and "req=7" in line and "what=apple" in line for line in lines)
    assert any("REPLY" in line and "req=8" in line and "⟵ #2" in line for line in lines)
    result = stats.result()
    assert result["types"] == {"GET": 3, "REPLY": 2}
    assert result["latency_ms"]["GET"]["count"] == 2


def test_the_toy_is_found_off_its_port_by_detection(tmp_path):
    protocols.register(TOY)
    try:
        path = tmp_path / "toy-detect.pcap"
        fb.tcp_pcap(path, [("c", toy_frame(1, 1, b"x")), ("b", toy_frame(2, 1, b"y"))], broker=("10.0.0.9", 9999))
        assert [r for r in analysed_records(path, Options(protocols=("toy",))) if "index" in r] == []
        found = [r for r in analysed_records(path, Options(protocols=("toy",), detect=True)) if "index" in r]
        assert [(r["type"], r["direction"]) for r in found] == [("GET", "to_server"), ("REPLY", "to_client")]
    finally:
        protocols.unregister("toy")


def test_a_python_protocols_frames_with_a_body_get_its_record_fields(tmp_path):
    """A protocol declared in Python whose frames carry a body gives that body's record keys itself
    (``record_fields``); the rest of the record is the core's, and a key it gives that the record holds
    takes that key's place (as dict.update)."""
    import dataclasses

    from dissector.output.jsonl import dumps
    from dissector.run import analysed_json_lines

    def decode_with_body(pdu, missing, options):
        decoded = toy_decode(pdu, missing, options)
        return dataclasses.replace(decoded, body=pdu[7:])

    def body_fields(frame, payload_bytes, summary):
        body = frame.pdu.body
        return {"body_hex": body.hex(), "size": len(body), "summary": summary}

    protocols.register(dataclasses.replace(TOY, decode=decode_with_body, record_fields=body_fields))
    try:
        path = tmp_path / "toy-body.pcap"
        fb.tcp_pcap(path, [("c", toy_frame(1, 3, b"ab")), ("b", toy_frame(2, 3, b"xyz"))],
                    broker=("10.0.0.9", TOY_PORT))
        for summary in (False, True):
            recs = [r for r in analysed_records(path, summary=summary) if "index" in r]
            assert [(r["body_hex"], r["size"], r["summary"]) for r in recs] == [("6162", 2, summary),
                                                                                ("78797a", 3, summary)]
            keys = list(recs[1])
            assert keys[10] == "size" and keys.index("summary") == keys.index("body_hex") + 1 < keys.index("answers")
            assert recs[1]["answers"] == recs[0]["index"]
            lines = b"".join(i if type(i) is bytes else dumps(i) + b"\n"
                             for i in analysed_json_lines(path, summary=summary))
            assert lines == b"".join(dumps(r) + b"\n" for r in analysed_records(path, summary=summary))
    finally:
        protocols.unregister("toy")


def test_a_python_protocols_oversized_pdu_whose_head_never_comes_is_skipped(tmp_path):
    """A protocol declared in Python that reads the head of a PDU above the size limit (``oversized_head``) but
    still says NEED_MORE when the splitter's head window (64 KiB) is full: the splitter stops waiting there (it
    never hands the protocol more than the window), reports the PDU OVERSIZED, makes no frame of it, and finds
    the next PDU again (``resync``)."""
    import dataclasses

    def length(buf, pos: int, end: int, max_size: int):
        n = toy_length(buf, pos, end, max_size)
        if isinstance(n, int) and n > max_size:
            return BadLength("OVERSIZED", {"length": n - 2}, {"field": "LENGTH", "size": n})
        return n

    def resync(buf, pos: int, end: int, max_size: int):
        for at in range(pos, end - 2):
            if buf[at + 2] in _TYPES and 5 <= struct.unpack_from(">H", buf, at)[0] <= max_size:
                return True, at
        return False, max(pos, end - 2)

    asked: list[int] = []

    def oversized_head(buf, pos: int, end: int):
        asked.append(end - pos)
        return NEED_MORE

    protocols.register(dataclasses.replace(TOY, pdu_length=length, resync=resync, oversized_head=oversized_head))
    try:
        big = toy_frame(1, 3, bytes(65_000))  # 65 007 bytes: the window fills only with what follows it
        after = [toy_frame(1, 8, b"x" * 600), toy_frame(1, 9, b"pear")]
        path = tmp_path / "toy-oversized.pcap"
        fb.tcp_pcap(path, [("c", toy_frame(1, 7, b"apple") + big + b"".join(after))], broker=("10.0.0.9", TOY_PORT))
        recs = list(analysed_records(path, Options(max_frame_size=1000)))
    finally:
        protocols.unregister("toy")
    frames = [r for r in recs if "index" in r]
    assert [(r["type"], r["command"]["request_id"]) for r in frames] == [("GET", 7), ("GET", 8), ("GET", 9)]
    assert not any(e["id"] == "frame.oversized_head" for r in frames for e in r.get("expert", []))
    oversized = [r for r in recs if r.get("type") == "OVERSIZED"]
    assert len(oversized) == 1 and oversized[0]["details"]["length"] == len(big) - 2
    assert asked and max(asked) <= 64 * 1024
