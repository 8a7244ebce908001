"""Analysed frames and events → plain dicts: the JSON Lines contract, and the one input of every renderer.

Frame records carry index, protocol, time, conn, src, dst, direction, packet, type, command, size, problems
(and expert, first_packet, the protocol's own keys such as Pulsar's payload section, and the analysis notes:
answers, latency_ms, request_type, producer, consumer, ...). With ``Options.keep_frame_bytes`` (-x) a frame
record also carries ``frame_bytes``: the frame's bytes as captured, for renderers; it is not part of the JSON
contract and is never written as JSON. Event records carry type (GAP, SKIPPED,
UNANSWERED, ...), time, packet, message, severity and no index. ``docs/records.schema.json`` is the schema.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, Iterator

from dissector import _core as _core

from .. import protocols
from ..model import Annotated, Event
from ..problems import NOTE, message, severity, severity_and_message


@functools.lru_cache(maxsize=None)
def _frame_records(payload_bytes: bool, summary: bool):
    """The core's record maker for Annotated frames held in Python (``crates/engine/src/records.rs``)."""
    return _core.FrameRecords(severity_and_message, protocols.get, summary, payload_bytes)


def frame_record(item: Annotated, *, payload_bytes: bool = False, summary: bool = False) -> dict[str, Any]:
    """The record of an Annotated frame held in Python (``analysed_events``): made by the core,
    as ``analysed_records`` makes those of the frames it decodes. ``summary`` replaces per-message records by
    ``messages_summary`` for views that do not show each message; ``payload_bytes`` adds each message's payload
    (``payload_text`` when UTF-8, else ``payload_b64``)."""
    return _frame_records(payload_bytes, summary)(item)


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
