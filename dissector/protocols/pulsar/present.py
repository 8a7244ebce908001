"""How Pulsar frames look on a timeline line: the payload section of SEND and MESSAGE.

The timeline shows message counts, compression, checksum, schema, encryption, chunks and markers. Every wire
string goes through ``output.text.safe``. (The records' keys of a payload section — checksum, broker entry
metadata, metadata, the messages or their summary, payload sizes — are made by the core: core/src/records.rs.)
"""

from __future__ import annotations

import base64

from ...output.text import date_ms, safe

MARKER_NAMES = {0: "UNKNOWN_MARKER", 10: "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST",
                11: "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE", 12: "REPLICATED_SUBSCRIPTION_SNAPSHOT",
                13: "REPLICATED_SUBSCRIPTION_UPDATE", 20: "TXN_COMMITTING", 21: "TXN_COMMIT", 22: "TXN_ABORT"}


def timeline_pieces(rec: dict) -> list[tuple[str, str]]:
    """What a timeline line shows of a payload section and a reassembled chunked message."""
    line: list[tuple[str, str]] = []
    msgs = rec.get("messages")
    summary = rec.get("messages_summary")
    if msgs is not None or summary is not None:
        if summary is None:
            summary = messages_summary(msgs)
        line.append((f" msgs={summary['count']} bytes={summary['bytes']}", "dim"))
        md = rec.get("metadata") or {}
        if md.get("compression") not in (None, "NONE"):
            line.append((f" {safe(md['compression'], 20)}", "blue"))
        if rec.get("checksum") == "invalid":
            line.append((" crc=BAD", "bold red"))
        elif rec.get("checksum") == "valid":
            line.append((" crc=ok", "dim green"))
        if md.get("schema_version"):
            line.append((" schema=", "dim"))
            line.append((safe(_b64_to_hex(md["schema_version"]), 20), ""))
        if rec.get("encrypted"):
            keys = ",".join(safe(k.get("key", "?"), 20) for k in md.get("encryption_keys", []))
            line.append((f" encrypted keys={keys} algo={safe(md.get('encryption_algo', '?'), 20)}", "yellow"))
        first = summary.get("chunk")
        if first:
            line.append((f" chunk {first['chunk_id'] + 1}/{first['num_chunks']} uuid=", "blue"))
            line.append((safe(first["uuid"], 30), ""))
        if md.get("marker_type") is not None:
            line.append((" marker=", "dim"))
            line.append((MARKER_NAMES.get(md["marker_type"], safe(md["marker_type"])), "magenta"))
            if rec.get("marker"):
                line.append((" " + safe(rec["marker"], 160), ""))
    if "deliver_at_time" in (rec.get("metadata") or {}):  # delayed delivery
        line.append((" deliver_at=", "dim"))
        line.append((date_ms(rec["metadata"]["deliver_at_time"]), "yellow"))
    if rec["type"] == "REDELIVER_UNACKNOWLEDGED_MESSAGES" and not rec["command"].get("message_ids"):
        line.append((" ids=all", ""))
    line.extend(_links(rec))
    whole = rec.get("reassembled")
    if whole:
        size = whole.get("payload_size")
        line.append((f" reassembled {len(whole['chunks'])} chunks "
                     + (f"{size} bytes" if size is not None else "(payload not recovered)"), "blue"))
        if whole.get("payload_sha256"):
            line.append((f" sha256={whole['payload_sha256'][:12]}…", "dim"))
    return line


def _links(rec: dict) -> list[tuple[str, str]]:
    """The analysis' links between frames: what a redelivery request asks for again, which request a
    redelivered message answers, the delivery count of a repeated message, where a SEEK landed."""
    out = []
    frames = rec.get("redelivers")
    if frames:
        count = rec.get("redelivers_count", len(frames))
        shown = ",".join(f"#{i}" for i in frames[:6]) + (f",… ({count})" if count > 6 else "")
        out.append((f" redelivers {shown}", "dim cyan"))
    if "redelivery_requested_by" in rec:
        out.append((f" asked by #{rec['redelivery_requested_by']}", "dim cyan"))
    if "delivery" in rec:
        out.append((f" delivery={rec['delivery']}", "yellow"))
    if "after_seek" in rec:
        out.append((f" first after SEEK #{rec['after_seek']}", "dim cyan"))
    return out


def messages_summary(msgs: list[dict]) -> dict:
    """What the timeline shows of a frame's messages (the core's summary records carry the same as
    ``messages_summary``)."""
    out = {"count": len(msgs), "bytes": sum(m["payload_size"] or 0 for m in msgs)}
    if msgs and "chunk_id" in msgs[0]:
        out["chunk"] = {k: msgs[0][k] for k in ("chunk_id", "num_chunks", "uuid")}
    return out


def _b64_to_hex(value: str) -> str:
    try:
        return base64.b64decode(value).hex()
    except ValueError:
        return value
