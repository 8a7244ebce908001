"""The terminal timeline: one line per frame or event, built from the JSON-contract records.

Every string that came off the wire passes through ``text.safe()`` and is appended to rich ``Text`` as plain
text (never parsed as markup), so a topic name cannot inject escape sequences or rich markup into the terminal.
Which fields a line shows comes from the protocol's command table, and the protocol adds its own pieces
(Pulsar: the payload section).
"""

from __future__ import annotations

import base64
import datetime as _dt
from typing import Any

from rich.console import Console
from rich.text import Text

from .. import protocols
from .text import date_ms, safe

ARROW_TO_SERVER, ARROW_TO_CLIENT, ARROW_UNKNOWN = "→", "←", "↔"


_SPECIAL_IDS = {(2**64 - 1, 2**64 - 1): "earliest", (2**63 - 1, 2**63 - 1): "latest"}  # MessageId.earliest/latest


def _message_id(mid: Any) -> str:
    if isinstance(mid, dict):
        special = _SPECIAL_IDS.get((mid.get("ledgerId"), mid.get("entryId")))
        if special:
            return special
        s = f"{mid.get('ledgerId', '?')}:{mid.get('entryId', '?')}"
        if mid.get("partition", -1) not in (-1, None):
            s += f":p{mid['partition']}"
        if mid.get("batch_index", -1) not in (-1, None):
            s += f":b{mid['batch_index']}"
        if mid.get("ack_set"):  # a batch-index ACK: only some entries of the batch are acknowledged
            s += "(partial)"
        return s
    if isinstance(mid, list):
        return ",".join(_message_id(m) for m in mid[:4]) + ("…" if len(mid) > 4 else "")
    return safe(mid)


def key_fields(rec: dict, protocol=None) -> list[tuple[str, str]]:
    """(label, value) of the fields the protocol's command table shows for this type (by default the
    command's first five scalar fields)."""
    cmd = rec.get("command") or {}
    protocol = protocol or _protocol(rec)
    spec = protocol.commands.get(rec["type"]) if protocol is not None else None
    out: list[tuple[str, str]] = []
    fields = spec.timeline if spec is not None else ()
    if not fields:
        fields = tuple((_SHORT.get(k, k), k) for k, v in cmd.items() if not isinstance(v, (dict, list)))[:5]
    for label, path, *how in fields:
        value = _lookup(cmd, path)
        if value is None:
            continue
        if how and how[0] == "date_ms":
            out.append((label, date_ms(value)))
        elif path.endswith(("message_id", "message_ids", "last_message_id", "start_message_id",
                            "consumer_mark_delete_position")):
            out.append((label, _message_id(value)))
        else:
            out.append((label, safe(value)))
    return out


# One style of keys on every line: the labels the command table uses, also for types it shows by default.
_SHORT = {"request_id": "req", "consumer_id": "cons", "producer_id": "prod", "sequence_id": "seq"}


def _lookup(cmd: dict, path: str):
    """The value at a dotted path of a command (``schema.type``), or None."""
    value = cmd
    for part in path.split("."):
        if type(value) is not dict or part not in value:
            return None
        value = value[part]
    return value


class TimelineRenderer:
    def __init__(self, console: Console, *, plain: bool = False, absolute_time: bool = False,
                 details: bool = False, show_payload: bool = False) -> None:
        self.console = console
        self.plain = plain
        self.absolute_time = absolute_time
        self.details = details
        self.show_payload = show_payload
        self.origin: float | None = None  # time 0 of relative times: the capture's first record (else the first shown)

    def render(self, rec: dict) -> None:
        parts = self.parts(rec)
        if self.plain:  # pagers and files: one line per frame, never folded
            self.console.file.write("".join([p[0] for p in parts]) + "\n")
        else:
            text = Text.assemble(*fold(parts, self.console.width))
            self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def _time(self, t: float) -> str:
        if self.absolute_time:
            return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        if self.origin is None:
            self.origin = t
        return f"{t - self.origin:+10.6f}"

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
            arrow = ARROW_TO_CLIENT if direction == "to_client" else ARROW_UNKNOWN if direction == "unknown" \
                else ARROW_TO_SERVER
            client = rec["dst"] if direction == "to_client" else rec["src"]
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
        protocol = _protocol(rec)
        for label, value in key_fields(rec, protocol):
            line.append((f" {label}=", "dim"))
            line.append((value, ""))
        for key in ("producer", "consumer"):
            info = rec.get(key)
            if info:
                name = info.get("name")
                if name:
                    line.append((f" {key}=", "dim"))
                    line.append((safe(name, 30), "green"))
        if protocol is not None:
            line.extend(protocol.timeline_pieces(rec))
        if "answers" in rec:
            line.append((f" ⟵ #{rec['answers']} {rec['latency_ms']:.3f}ms", "dim cyan"))
        acks = rec.get("acks")
        if acks:
            shown = ",".join(f"#{i}" for i in acks[:6]) + (f",… ({len(acks)})" if len(acks) > 6 else "")
            line.append((f" acks {shown}", "dim cyan"))
        if self.show_payload and rec.get("messages"):
            for m in rec["messages"]:
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


def _payload_preview(m: dict) -> str:
    if "payload_text" in m:
        text = m["payload_text"]
        shown = safe(text, 120)
        return "payload: " + shown + (f" ({m['payload_size']} bytes)" if shown != text else "")
    if "payload_b64" in m:
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


def _protocol(rec: dict):
    try:
        return protocols.get(rec.get("protocol", "pulsar"))
    except KeyError:
        return None
