"""How Pulsar frames look in a record: the payload section of SEND and MESSAGE.

Records (the JSON contract) add checksum, broker entry metadata, metadata, the messages (or their summary) and
payload sizes. What a timeline line shows of them (message counts, compression, checksum, schema, encryption,
chunks, markers) is made by the compiled core: ``core/src/pulsar/timeline.rs`` (``timeline_pieces="pulsar"``).
"""

from __future__ import annotations

from typing import Any

import pulsar_dissect_core as _core

from ...model import Frame
from ...output.text import text_or_b64

_BRIEF_METADATA = ("compression", "schema_version", "encryption_algo", "marker_type", "num_messages_in_batch",
                   "deliver_at_time")


def record_fields(frame: Frame, payload_bytes: bool, summary: bool) -> dict[str, Any]:
    """The record keys of a SEND or MESSAGE frame; ``summary`` replaces ``messages`` by ``messages_summary``
    (count, bytes, chunk) for views that do not show each message, which saves hashing every payload."""
    sec = frame.pdu.body
    if sec is None:
        return {}
    md = sec.metadata
    out: dict[str, Any] = {
        "checksum": sec.checksum,
        "broker_entry_metadata": sec.broker_entry_metadata,
        "metadata": _brief(md) if summary and md is not None else md,
        "payload_size": sec.payload_size,
    }
    if sec.checksum == "invalid":
        out["checksum_detail"] = {"wire": sec.checksum_wire, "computed": sec.checksum_computed}
    if sec.uncompressed_size is not None:
        out["uncompressed_size"] = sec.uncompressed_size
    if sec.encrypted:
        out["encrypted"] = True
    if sec.marker is not None:
        out["marker"] = sec.marker
    msgs = sec.messages
    if summary:
        out["messages_summary"] = brief = {"count": len(msgs), "bytes": sum(m["payload_size"] or 0 for m in msgs)}
        if msgs and "chunk_id" in msgs[0]:
            first = msgs[0]
            brief["chunk"] = {"chunk_id": first["chunk_id"], "num_chunks": first["num_chunks"], "uuid": first["uuid"]}
        return out
    records = sec.records
    if records is None:  # decoded briefly: the core makes them now
        base = (frame.pdu.command or {}).get("message_id") if frame.pdu.type == "MESSAGE" else None
        records = _core.message_records(msgs, base)
    if payload_bytes:
        records = [{**r, **text_or_b64("payload", m["payload"], text_key="payload_text")}
                   if m["payload"] is not None else r for r, m in zip(records, msgs)]
    out["messages"] = records
    return out


def _brief(md: dict) -> dict[str, Any]:
    """The metadata fields a one-line view shows."""
    out = {k: md[k] for k in _BRIEF_METADATA if k in md}
    if "encryption_keys" in md:
        out["encryption_keys"] = [{"key": k.get("key")} for k in md["encryption_keys"]]
    if out.get("compression") == "NONE":
        del out["compression"]
    return out
