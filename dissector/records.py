"""Events → plain dicts: the JSON Lines contract. Renderers read these; nothing here formats text.

Frame records carry at least: index, time, src, dst, direction, type, command, size, problems; SEND and
MESSAGE add checksum, broker_entry_metadata, metadata and messages. Non-frame events carry ``type`` (GAP,
SKIPPED, NOT_PULSAR, ...) and no ``index``.
"""

from __future__ import annotations

import base64
from typing import Any

from . import codecs
from .commands import MESSAGE
from .expert import EVENT_SEVERITY, NOTE, expert_record, is_note
from .payload import AppMessage, PayloadSection
from .pbdict import message_to_dict
from .pipeline import FrameEvent, StreamEvent


def frame_record(ev: FrameEvent, *, payload_bytes: bool = False, summary: bool = False) -> dict[str, Any]:
    """The JSON object of a frame; ``summary`` replaces ``messages`` by ``messages_summary`` (count, bytes,
    chunk) for views that do not show each message, which saves hashing every payload."""
    frame = ev.frame
    rec: dict[str, Any] = {
        "index": ev.index,
        "time": ev.time,
        "conn": ev.conn.id,
        "src": str(ev.src),
        "dst": str(ev.dst),
        "direction": ev.direction,
        "packet": ev.packet,
        "type": frame.type,
        "command": message_to_dict(frame.command) if frame.command is not None else {},
        "size": frame.size,
        "problems": [str(p) for p in frame.problems if not is_note(p)],
    }
    if frame.problems:
        rec["expert"] = [expert_record(p) for p in frame.problems]
    if ev.first_packet != ev.packet:
        rec["first_packet"] = ev.first_packet
    sec = frame.payload
    if sec is not None:
        rec.update(payload_fields(sec, ev, payload_bytes, summary))
    if ev.notes:
        rec.update(ev.notes)
    return rec


def payload_fields(sec: PayloadSection, ev: FrameEvent, payload_bytes: bool, summary: bool = False) -> dict[str, Any]:
    md = sec.metadata
    out: dict[str, Any] = {
        "checksum": sec.checksum,
        "broker_entry_metadata": message_to_dict(sec.broker_entry_metadata) if sec.broker_entry_metadata else None,
        "metadata": (_metadata_brief(md) if summary else message_to_dict(md)) if md is not None else None,
        "payload_size": len(sec.raw_payload),
    }
    if sec.checksum == "invalid":
        out["checksum_detail"] = {"wire": sec.checksum_wire, "computed": sec.checksum_computed}
    if sec.decompressed is not None:
        out["uncompressed_size"] = len(sec.decompressed)
    if sec.encrypted:
        out["encrypted"] = True
    if sec.marker is not None:
        out["marker"] = message_to_dict(sec.marker)
    if summary:
        msgs = sec.messages
        out["messages_summary"] = brief = {"count": len(msgs), "bytes": sum(m.payload_size or 0 for m in msgs)}
        if msgs and msgs[0].chunk_id is not None:
            brief["chunk"] = {"chunk_id": msgs[0].chunk_id, "num_chunks": msgs[0].num_chunks, "uuid": msgs[0].uuid}
        return out
    base_id = None
    frame = ev.frame
    if frame.type_num == MESSAGE and frame.command is not None and frame.command.HasField("message_id"):
        mid = frame.command.message_id
        base_id = (mid.ledgerId, mid.entryId, mid.partition)
    out["messages"] = [message_record(m, base_id, payload_bytes) for m in sec.messages]
    return out


_BRIEF_METADATA = ("compression", "schema_version", "encryption_keys", "encryption_algo", "marker_type")


def _metadata_brief(md) -> dict[str, Any]:
    """The MessageMetadata fields a one-line view shows; converting the whole message costs more than the rest."""
    out: dict[str, Any] = {}
    if md.compression:
        out["compression"] = codecs.CODEC_NAMES.get(md.compression, md.compression)
    if md.HasField("schema_version"):
        out["schema_version"] = base64.b64encode(md.schema_version).decode("ascii")
    if len(md.encryption_keys):
        out["encryption_keys"] = [{"key": k.key} for k in md.encryption_keys]
        if md.HasField("encryption_algo"):
            out["encryption_algo"] = md.encryption_algo
    if md.HasField("marker_type"):
        out["marker_type"] = md.marker_type
    return out


def message_record(m: AppMessage, base_id: tuple[int, int, int] | None, payload_bytes: bool) -> dict[str, Any]:
    rec: dict[str, Any] = {"payload_size": m.payload_size, "payload_sha256": m.payload_sha256}
    if base_id is not None:
        rec["message_id"] = {"ledger_id": base_id[0], "entry_id": base_id[1], "partition": base_id[2],
                             "batch_index": -1 if m.batch_index is None else m.batch_index}
    if m.batch_index is not None:
        rec["batch_index"] = m.batch_index
    if m.sequence_id is not None:
        rec["sequence_id"] = m.sequence_id
    if m.partition_key is not None:
        rec["partition_key"] = m.partition_key
    if m.ordering_key is not None:
        rec.update(_text_or_b64("ordering_key", m.ordering_key))
    if m.properties is not None:
        rec["properties"] = m.properties
    if m.event_time is not None:
        rec["event_time"] = m.event_time
    # Flags and chunk fields are rare: one attribute test skips them all on the common path.
    if m.null_value or m.null_partition_key or m.compacted_out or m.acked or m.encrypted or m.chunk_id is not None:
        for flag in ("null_value", "null_partition_key", "compacted_out", "acked", "encrypted"):
            if getattr(m, flag):
                rec[flag] = True
        if m.chunk_id is not None:
            rec["chunk_id"] = m.chunk_id
            rec["num_chunks"] = m.num_chunks
            rec["uuid"] = m.uuid
    if payload_bytes and m.payload is not None:
        rec.update(_text_or_b64("payload", m.payload, text_key="payload_text"))
    return rec


def _text_or_b64(key: str, value: bytes, text_key: str | None = None) -> dict[str, str]:
    try:
        return {text_key or key: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{key}_b64": base64.b64encode(value).decode("ascii")}


def event_record(ev: StreamEvent) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": ev.kind, "time": ev.time, "packet": ev.packet, "message": ev.message,
                           "severity": EVENT_SEVERITY.get(ev.kind, NOTE)}
    if ev.conn is not None:
        rec["conn"] = ev.conn.id
    if ev.src is not None:
        rec["src"] = str(ev.src)
        rec["dst"] = str(ev.dst)
        rec["direction"] = ev.direction
    if ev.offset is not None:
        rec["offset"] = ev.offset
    if ev.length is not None:
        rec["length"] = ev.length
    if ev.details:
        rec["details"] = ev.details
    return rec


def record(ev, *, payload_bytes: bool = False, summary: bool = False) -> dict[str, Any]:
    if type(ev) is FrameEvent:
        return frame_record(ev, payload_bytes=payload_bytes, summary=summary)
    return event_record(ev)
