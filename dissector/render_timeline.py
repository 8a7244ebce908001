"""The terminal timeline: one line per frame or stream event, built from the JSON-contract records.

Every string that came off the wire passes through ``safe()`` and is appended to rich ``Text`` as plain text
(never parsed as markup), so a topic name cannot inject escape sequences or rich markup into the terminal.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Iterable

from rich.console import Console
from rich.text import Text

ARROW_TO_BROKER, ARROW_TO_CLIENT, ARROW_UNKNOWN = "→", "←", "↔"

# Key fields shown per command type: (label, path in the command dict). Unlisted types show request_id and
# the first few scalar fields.
_KEY_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "CONNECT": (("client", "client_version"), ("proto", "protocol_version"), ("auth", "auth_method_name"),
                ("proxy_to", "proxy_to_broker_url")),
    "CONNECTED": (("server", "server_version"), ("proto", "protocol_version"),
                  ("max_msg", "max_message_size")),
    "PRODUCER": (("req", "request_id"), ("prod", "producer_id"), ("name", "producer_name"), ("topic", "topic"),
                 ("mode", "producer_access_mode")),
    "PRODUCER_SUCCESS": (("req", "request_id"), ("name", "producer_name"), ("last_seq", "last_sequence_id"),
                         ("ready", "producer_ready")),
    "SUBSCRIBE": (("req", "request_id"), ("cons", "consumer_id"), ("topic", "topic"), ("sub", "subscription"),
                  ("type", "subType"), ("name", "consumer_name"), ("initial", "initialPosition")),
    "SEND": (("prod", "producer_id"), ("seq", "sequence_id"), ("n", "num_messages"), ("chunk", "is_chunk")),
    "SEND_RECEIPT": (("prod", "producer_id"), ("seq", "sequence_id"), ("id", "message_id"),
                     ("highest_seq", "highest_sequence_id")),
    "SEND_ERROR": (("prod", "producer_id"), ("seq", "sequence_id"), ("error", "error"), ("msg", "message")),
    "MESSAGE": (("cons", "consumer_id"), ("id", "message_id"), ("redelivery", "redelivery_count")),
    "ACK": (("cons", "consumer_id"), ("type", "ack_type"), ("ids", "message_id"), ("req", "request_id")),
    "FLOW": (("cons", "consumer_id"), ("permits", "messagePermits")),
    "SUCCESS": (("req", "request_id"),),
    "ERROR": (("req", "request_id"), ("error", "error"), ("msg", "message")),
    "LOOKUP": (("req", "request_id"), ("topic", "topic"), ("authoritative", "authoritative")),
    "LOOKUP_RESPONSE": (("req", "request_id"), ("response", "response"), ("url", "brokerServiceUrl"),
                        ("authoritative", "authoritative"), ("error", "error"), ("msg", "message")),
    "PARTITIONED_METADATA": (("req", "request_id"), ("topic", "topic")),
    "PARTITIONED_METADATA_RESPONSE": (("req", "request_id"), ("partitions", "partitions"), ("response", "response"),
                                      ("error", "error")),
    "CLOSE_PRODUCER": (("req", "request_id"), ("prod", "producer_id")),
    "CLOSE_CONSUMER": (("req", "request_id"), ("cons", "consumer_id")),
}
_MAX_VALUE = 60


def safe(value: Any, limit: int = _MAX_VALUE) -> str:
    """Printable, single-line, length-limited text for a value that came off the wire."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":")) \
        if isinstance(value, (dict, list)) else str(value)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _message_id(mid: Any) -> str:
    if isinstance(mid, dict):
        s = f"{mid.get('ledgerId', '?')}:{mid.get('entryId', '?')}"
        if mid.get("partition", -1) not in (-1, None):
            s += f":p{mid['partition']}"
        if mid.get("batch_index", -1) not in (-1, None):
            s += f":b{mid['batch_index']}"
        return s
    if isinstance(mid, list):
        return ",".join(_message_id(m) for m in mid[:4]) + ("…" if len(mid) > 4 else "")
    return safe(mid)


def key_fields(rec: dict) -> list[tuple[str, str]]:
    cmd = rec.get("command") or {}
    spec = _KEY_FIELDS.get(rec["type"])
    out: list[tuple[str, str]] = []
    if spec is None:
        items = [(k, k) for k, v in cmd.items() if not isinstance(v, (dict, list))][:5]
        spec = tuple(items)
    for label, path in spec:
        if path not in cmd:
            continue
        value = cmd[path]
        if path == "message_id":
            out.append((label, _message_id(value)))
        else:
            out.append((label, safe(value)))
    return out


class TimelineRenderer:
    def __init__(self, console: Console, *, plain: bool = False, absolute_time: bool = False,
                 details: bool = False, show_payload: bool = False) -> None:
        self.console = console
        self.plain = plain
        self.absolute_time = absolute_time
        self.details = details
        self.show_payload = show_payload
        self._t0: float | None = None

    def render(self, rec: dict) -> None:
        parts = self.parts(rec)
        if self.plain:  # pagers and files: one line per frame, never folded
            self.console.file.write("".join([p[0] for p in parts]) + "\n")
        else:
            text = Text.assemble(*fold(parts, self.console.width))
            self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def format(self, rec: dict) -> Text:
        return Text.assemble(*self.parts(rec))

    def _time(self, t: float) -> str:
        if self.absolute_time:
            return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%H:%M:%S.%f")
        if self._t0 is None:
            self._t0 = t
        return f"{t - self._t0:+10.6f}"

    def parts(self, rec: dict) -> "_Parts":
        """The line as (text, style) pieces: cheap to join for plain output, one Text for the terminal."""
        line = _Parts()
        is_frame = "index" in rec
        line.append((f"{rec['index']:>6} " if is_frame else "     - ", "dim"))
        line.append((self._time(rec["time"]) + " ", "cyan"))
        if "conn" in rec:
            line.append((f"c{rec['conn']} ", "magenta"))
        if "src" in rec:
            direction = rec.get("direction")
            arrow = ARROW_TO_BROKER if direction == "to_broker" else ARROW_TO_CLIENT if direction == "to_client" \
                else ARROW_UNKNOWN
            client = rec["src"] if direction == "to_broker" else rec["dst"]
            line.append((f"{arrow} ", "bold"))
            if direction == "unknown":
                line.append((f"{rec['src']}→{rec['dst']} ", "dim"))
            else:
                line.append((f"{client.rsplit(':', 1)[-1]} ", "dim"))
        problems = rec.get("problems") or []
        if is_frame:
            style = "bold red" if problems else _type_style(rec["type"])
            line.append((f"{rec['type']:<16}", style))
            self._frame_summary(line, rec)
        else:
            line.append((f"{rec['type']:<16}", "bold yellow"))
            line.append((" " + safe(rec.get("message", ""), 200), "yellow"))
        for problem in problems:
            line.append(("\n        ⚠ ", "red"))
            line.append((safe(problem, 300), "red"))
        for note in rec.get("expert") or ():
            if note["severity"] == "note":
                line.append(("\n        · ", "yellow"))
                line.append((safe(note["message"], 300), "yellow"))
        if self.details and is_frame:
            self._details(line, rec)
        return line

    def _frame_summary(self, line: "_Parts", rec: dict) -> None:
        for label, value in key_fields(rec):
            line.append((f" {label}=", "dim"))
            line.append((value, ""))
        for key in ("producer", "consumer"):
            info = rec.get(key)
            if info:
                name = info.get("name")
                if name:
                    line.append((f" {key}=", "dim"))
                    line.append((safe(name, 30), "green"))
        msgs = rec.get("messages")
        summary = rec.get("messages_summary")
        if msgs is not None or summary is not None:
            if summary is None:
                summary = messages_summary(msgs)
            line.append((f" msgs={summary['count']} bytes={summary['bytes']}", "dim"))
            md = rec.get("metadata") or {}
            if md.get("compression") not in (None, "NONE"):
                line.append((f" {md['compression']}", "blue"))
            if rec.get("checksum") == "invalid":
                line.append((" crc=BAD", "bold red"))
            elif rec.get("checksum") == "valid":
                line.append((" crc=ok", "dim green"))
            if md.get("schema_version"):
                line.append((" schema=", "dim"))
                line.append((safe(_b64_to_hex(md["schema_version"]), 20), ""))
            if rec.get("encrypted"):
                keys = ",".join(safe(k.get("key", "?"), 20) for k in md.get("encryption_keys", []))
                line.append((f" encrypted keys={keys} algo={safe(md.get('encryption_algo', '?'), 20)}",
                             "yellow"))
            first = summary.get("chunk")
            if first:
                line.append((f" chunk {first['chunk_id'] + 1}/{first['num_chunks']} uuid=", "blue"))
                line.append((safe(first["uuid"], 30), ""))
            if md.get("marker_type") is not None:
                line.append((" marker=", "dim"))
                line.append((_MARKER_NAMES.get(md["marker_type"], str(md["marker_type"])), "magenta"))
                if rec.get("marker"):
                    line.append((" " + safe(rec["marker"], 160), ""))
        whole = rec.get("reassembled")
        if whole:
            size = whole.get("payload_size")
            line.append((f" reassembled {len(whole['chunks'])} chunks "
                        + (f"{size} bytes" if size is not None else "(payload not recovered)"), "blue"))
            if whole.get("payload_sha256"):
                line.append((f" sha256={whole['payload_sha256'][:12]}…", "dim"))
        if "answers" in rec:
            line.append((f" ⟵ #{rec['answers']} {rec['latency_ms']:.3f}ms", "dim cyan"))
        acks = rec.get("acks")
        if acks:
            shown = ",".join(f"#{i}" for i in acks[:6]) + (f",… ({len(acks)})" if len(acks) > 6 else "")
            line.append((f" acks {shown}", "dim cyan"))
        if self.show_payload and msgs:
            for m in msgs:
                line.append(("\n          ", ""))
                line.append((_payload_preview(m), ""))

    def _details(self, line: "_Parts", rec: dict) -> None:
        for section in ("command", "broker_entry_metadata", "metadata", "marker"):
            value = rec.get(section)
            if value:
                line.append((f"\n        {section}: ", "dim"))
                line.append((safe(value, 2000), ""))
        for m in rec.get("messages") or []:
            line.append(("\n        message: ", "dim"))
            line.append((safe({k: v for k, v in m.items() if k not in ("payload_text", "payload_b64")}, 2000), ""))


_Parts = list  # of (text, style) pieces: joined for plain output, assembled into one Text for a terminal


FOLD_INDENT = " " * 10


def fold(parts: list[tuple[str, str]], width: int) -> list[tuple[str, str]]:
    """Fold a line to ``width`` before the pieces that start with a space, continuing with an indent.

    A piece that does not start with a space stays with the one before it (a label and its value), so fields
    are never split; a field wider than the line is left to the terminal.
    """
    groups: list[list[tuple[str, str]]] = []
    for piece in parts:
        if not groups or piece[0].startswith((" ", "\n")):
            groups.append([piece])
        else:
            groups[-1].append(piece)
    out: list[tuple[str, str]] = []
    column = 0
    for group in groups:
        length = sum(len(text) for text, _ in group)
        first = group[0][0]
        if first.startswith("\n"):
            column = 0
        elif first.startswith(" ") and column + length > width and column > len(FOLD_INDENT):
            out.append(("\n" + FOLD_INDENT, ""))
            group = [(first[1:], group[0][1])] + group[1:]
            column = len(FOLD_INDENT)
            length -= 1
        for text, style in group:
            out.append((text, style))
            if "\n" in text:
                column = len(text) - 1 - text.rfind("\n")
            else:
                column += len(text)
    return out


def messages_summary(msgs: list[dict]) -> dict:
    """What the timeline shows of a frame's messages (records.py builds the same without the list)."""
    out = {"count": len(msgs), "bytes": sum(m["payload_size"] or 0 for m in msgs)}
    if msgs and "chunk_id" in msgs[0]:
        out["chunk"] = {k: msgs[0][k] for k in ("chunk_id", "num_chunks", "uuid")}
    return out


_MARKER_NAMES = {0: "UNKNOWN_MARKER", 10: "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST",
                 11: "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE", 12: "REPLICATED_SUBSCRIPTION_SNAPSHOT",
                 13: "REPLICATED_SUBSCRIPTION_UPDATE", 20: "TXN_COMMITTING", 21: "TXN_COMMIT", 22: "TXN_ABORT"}


def _b64_to_hex(value: str) -> str:
    import base64
    try:
        return base64.b64decode(value).hex()
    except ValueError:
        return value


def _payload_preview(m: dict) -> str:
    if "payload_text" in m:
        text = m["payload_text"]
        shown = safe(text, 120)
        return "payload: " + shown + (f" ({m['payload_size']} bytes)" if shown != text else "")
    if "payload_b64" in m:
        import base64
        raw = base64.b64decode(m["payload_b64"])
        hexed = raw[:48].hex(" ")
        return f"payload ({len(raw)} bytes, hex): {hexed}{' …' if len(raw) > 48 else ''}"
    if m.get("encrypted"):
        return "payload: encrypted" + (f", {m['payload_size']} bytes" if m["payload_size"] is not None else "")
    return f"payload: {m['payload_size']} bytes (not recovered)"


def _type_style(name: str) -> str:
    if "ERROR" in name:
        return "bold red"
    if name in ("SEND", "MESSAGE"):
        return "bold green"
    if name.endswith("RESPONSE") or name in ("SUCCESS", "CONNECTED", "PRODUCER_SUCCESS", "SEND_RECEIPT", "PONG"):
        return "blue"
    return "bold"


def render_all(records: Iterable[dict], renderer: TimelineRenderer) -> None:
    for rec in records:
        renderer.render(rec)
