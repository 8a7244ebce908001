"""Analysed frames and events → plain dicts: the JSON Lines contract, and the one input of every renderer.

Frame records carry index, protocol, time, conn, src, dst, direction, packet, type, command, size, problems
(and expert, first_packet, the protocol's own keys such as Pulsar's payload section, and the analysis notes:
answers, latency_ms, request_type, producer, consumer, ...). With ``Options.keep_frame_bytes`` (-x) a frame
record also carries ``frame_bytes``: the frame's bytes as captured, for renderers; it is not part of the JSON
contract and is never written as JSON. Event records carry type (GAP, SKIPPED,
UNANSWERED, ...), time, packet, message, severity and no index. ``docs/records.schema.json`` is the schema.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from .. import protocols
from ..model import Annotated, Event
from ..problems import NOTE, expert_record, message, severity


def frame_record(item: Annotated, *, payload_bytes: bool = False, summary: bool = False) -> dict[str, Any]:
    """The JSON object of a frame; ``summary`` replaces per-message records by a summary (see the protocol's
    ``record_fields``) for views that do not show each message."""
    frame = item.frame
    pdu = frame.pdu
    findings = pdu.findings + item.findings if item.findings else pdu.findings
    expert = [expert_record(f) for f in findings]
    rec: dict[str, Any] = {
        "index": frame.index,
        "protocol": frame.protocol,
        "time": frame.time,
        "conn": frame.conn,
        "src": frame.src,
        "dst": frame.dst,
        "direction": frame.direction,
        "packet": frame.packet,
        "type": pdu.type,
        "command": pdu.command if pdu.command is not None else {},
        "size": pdu.size,
        "problems": [e["message"] for e in expert if e["severity"] != NOTE],
    }
    if expert:
        rec["expert"] = expert
    if frame.first_packet != frame.packet:
        rec["first_packet"] = frame.first_packet
    if pdu.body is not None:
        rec.update(protocols.get(frame.protocol).record_fields(frame, payload_bytes, summary))
    if item.notes:
        rec.update(item.notes)
    if frame.data is not None:  # asked for by Options.keep_frame_bytes (-x); bytes, never in JSON output
        rec["frame_bytes"] = frame.data
    return rec


def event_record(ev: Event) -> dict[str, Any]:
    params = {**ev.details, **ev.params}
    if ev.offset is not None or "offset" not in params:  # a capture note's byte offset is in its details
        params["offset"] = ev.offset
    if ev.length is not None or "length" not in params:
        params["length"] = ev.length
    rec: dict[str, Any] = {"type": ev.kind, "time": ev.time, "packet": ev.packet,
                           "message": message(ev.kind, params), "severity": severity(ev.kind)}
    if ev.conn is not None:
        rec["conn"] = ev.conn
    if ev.src is not None:
        rec["src"] = ev.src
        rec["dst"] = ev.dst
        rec["direction"] = ev.direction
    if ev.offset is not None:
        rec["offset"] = ev.offset
    if ev.length is not None:
        rec["length"] = ev.length
    if ev.details:
        rec["details"] = ev.details
    return rec


def record(item, *, payload_bytes: bool = False, summary: bool = False) -> dict[str, Any]:
    if type(item) is Annotated:
        return frame_record(item, payload_bytes=payload_bytes, summary=summary)
    return event_record(item)


def records(items: Iterable, *, payload_bytes: bool = False, summary: bool = False) -> Iterator[dict[str, Any]]:
    for item in items:
        yield record(item, payload_bytes=payload_bytes, summary=summary)


def problem_count(rec: dict) -> int:
    """Errors and warnings of a record (notes do not count): what ``--strict`` counts, in every command."""
    if "index" in rec:
        return len(rec["problems"])
    return 0 if rec.get("severity", NOTE) == NOTE else 1
