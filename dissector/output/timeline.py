"""The terminal timeline: one line per frame or event, built from the JSON-contract records.

Every string that came off the wire passes through ``text.safe()`` and is appended to rich ``Text`` as plain
text (never parsed as markup), so a topic name cannot inject escape sequences or rich markup into the terminal.
Which fields a line shows comes from the protocol's command table, and the protocol adds its own pieces
(Pulsar: the payload section).

A line starts with the frame number (``-`` for an event), the time, and the capture packet that carried it
(``p34``; ``p30-34`` when the frame spans packets), so the same place can be found in Wireshark. ``details``
(``-V``) adds the tree of every decoded field under the line, ``frame_bytes`` (``-x``) a hex and ASCII dump of
the frame's bytes.
"""

from __future__ import annotations

import base64
import datetime as _dt
from functools import lru_cache
from typing import Any

from rich.console import Console
from rich.text import Text

from .. import protocols
from .text import bytes_kind, date_ms, hex_dump, safe, shown_b64

ARROW_TO_SERVER, ARROW_TO_CLIENT, ARROW_UNKNOWN = "→", "←", "↔"


_SPECIAL_IDS = {(2**64 - 1, 2**64 - 1): "earliest", (2**63 - 1, 2**63 - 1): "latest"}  # MessageId.earliest/latest


def _message_id(mid: Any) -> str:
    if isinstance(mid, dict):
        if "ledger_id" in mid:  # a message record's id (snake case, as the JSON contract writes it)
            mid = {"ledgerId": mid["ledger_id"], "entryId": mid.get("entry_id"), "partition": mid.get("partition"),
                   "batch_index": mid.get("batch_index")}
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
    plan = _plan(spec.timeline) if spec is not None and spec.timeline else \
        _plan(tuple((_SHORT.get(k, k), k) for k, v in cmd.items() if not isinstance(v, (dict, list)))[:5])
    out: list[tuple[str, str]] = []
    for label, keys, show in plan:
        value = cmd
        for key in keys:
            if type(value) is not dict:
                value = None
                break
            value = value.get(key)
        if value is not None:
            out.append((label, show(value)))
    return out


_plans: dict[tuple, tuple] = {}  # a command table's timeline fields -> (label, path keys, how to show) each


def _plan(fields: tuple) -> tuple:
    """How each timeline field is found and shown, worked out once per command type (not per line)."""
    plan = _plans.get(fields)
    if plan is None:
        steps = []
        for label, path, *how in fields:
            keys = tuple(path.split("."))
            kind = bytes_kind(keys[-1], keys[-2] if len(keys) > 1 else None)
            if how and how[0] == "date_ms":
                show = date_ms
            elif _is_message_id(path):
                show = _message_id
            elif kind is not None:  # bytes: as the -V tree shows them
                show = (lambda k: lambda v: shown_b64(v, k, MAX_LINE_BYTES)[0])(kind)
            else:
                show = safe
            steps.append((label, keys, show))
        plan = _plans[fields] = tuple(steps)
    return plan


MAX_LINE_BYTES = 60
PACKET_WIDTH = 5  # p1 to p9999 line up; longer ones push the rest of the line along
_MESSAGE_ID_KEYS = ("message_id", "message_ids", "last_message_id", "start_message_id",
                    "consumer_mark_delete_position")


def _is_message_id(path: str) -> bool:
    return path.endswith(_MESSAGE_ID_KEYS)


def packets_text(rec: dict) -> str:
    """The capture packet(s) of a record: ``p34``, or ``p30-34`` for a frame that spans packets."""
    last = rec.get("packet")
    if last is None:
        return "p?"
    first = rec.get("first_packet", last)
    return f"p{first}-{last}" if first != last else f"p{last}"


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
    """Timeline lines from records. ``details``: the tree of decoded fields under each frame (-V);
    ``frame_bytes``: a function from a frame record to its bytes and the count of its bytes not in the capture
    (lost in a gap, or after the stream's end), or None when they are not to be had, for a hex dump under each
    frame (-x)."""

    def __init__(self, console: Console, *, plain: bool = False, absolute_time: bool = False,
                 details: bool = False, show_payload: bool = False, frame_bytes=None) -> None:
        self.console = console
        self.plain = plain
        self.absolute_time = absolute_time
        self.details = details
        self.show_payload = show_payload
        self.frame_bytes = frame_bytes
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
        line.append((f"{packets_text(rec):<{PACKET_WIDTH}} ", "dim"))
        line.extend(_where(rec.get("conn"), rec.get("src"), rec.get("dst"), rec.get("direction")))
        problems = rec.get("problems") or []
        if is_frame:
            line.append(_type_piece(rec["type"], bool(problems)))
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
        if self.frame_bytes is not None and is_frame:
            self._hex(line, rec)
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
        if self.show_payload and not self.details and rec.get("messages"):  # -V shows them in its tree
            for m in rec["messages"]:
                line.append(("\n          ", ""))
                line.append((_payload_preview(m), ""))

    def _details(self, line: "_Parts", rec: dict) -> None:
        """The tree of every decoded field (as tshark -V): where the frame was, its command, then the rest of
        the record (payload section, messages, what the analysis found), nested by indentation. Bytes fields
        read as on the line (text when UTF-8, else hex; a schema version in hex), never as base64."""
        where = f"{safe(rec.get('src', '?'))} → {safe(rec.get('dst', '?'))}"
        line.append((f"\n{TREE_INDENT}frame {rec['index']}: {rec.get('size')} bytes in {_packets_words(rec)}, {where}",
                     "dim"))
        protocol = _protocol(rec)
        spec = protocol.commands.get(rec["type"]) if protocol is not None else None
        dates = {path for _, path, *how in (spec.timeline if spec is not None else ()) if how == ["date_ms"]}
        tree = _Tree(line, dates)
        tree.node(f"command {rec['type']}", rec.get("command") or {}, 0, pb=True)
        for key, value in rec.items():
            if key in _ON_THE_LINE or value is None:
                continue
            if key == "expert":
                value = [f"{e.get('id')} ({e.get('severity')})" for e in value]
            tree.node(key, value, 0, pb=key in _PB_SECTIONS, path=key)

    def _hex(self, line: "_Parts", rec: dict) -> None:
        got = self.frame_bytes(rec)
        if got is None:
            line.append((f"\n{TREE_INDENT}(the bytes of this frame are not available)", "dim"))
            return
        data, missing = got
        for text in hex_dump(data, len(TREE_INDENT)):
            line.append(("\n" + text, ""))
        if missing:
            line.append((f"\n{TREE_INDENT}… and {missing} bytes not shown (lost, cut off or skipped: see the "
                         "frame's problems)", "yellow"))


TREE_INDENT = " " * 8
TREE_STEP = 4
MAX_TREE_VALUE = 1000
# Record keys the line itself shows (or that only say how the record was made); everything else is in the tree.
_ON_THE_LINE = {"index", "protocol", "time", "conn", "src", "dst", "direction", "packet", "first_packet", "type",
                "command", "size", "problems", "messages_summary"}
# Sections decoded from protobuf, whose bytes fields are base64 in the record.
_PB_SECTIONS = {"command", "metadata", "broker_entry_metadata", "marker"}
_DATE_KEYS = {"publish_time", "event_time", "deliver_at_time", "message_publish_time"}  # epoch milliseconds


def _packets_words(rec: dict) -> str:
    last = rec.get("packet")
    first = rec.get("first_packet", last)
    return f"packets {first}-{last}" if first != last else f"packet {last}"


class _Tree:
    """Appends the tree lines of a value to a line's pieces."""

    def __init__(self, line: "_Parts", dates: set) -> None:
        self.line = line
        self.dates = dates

    def node(self, label: str, value: Any, depth: int, *, pb: bool, parent: str | None = None,
             path: str = "") -> None:
        pad = "\n" + TREE_INDENT + " " * (TREE_STEP * depth)
        line = self.line
        if isinstance(value, dict):
            named = label if not label.startswith("[") else parent
            head = _message_id(value) if named and _is_message_id(named) else None
            line.append((pad + label, "dim"))
            if head is not None:
                line.append((": " + head, ""))
            if not value:
                line.append((": (none)", "dim"))
            owner = parent if label.startswith("[") else label  # the list an element belongs to names it
            for key, item in value.items():
                if key in ("payload_text", "payload_b64"):
                    continue
                self.node(safe(key, 60), item, depth + 1, pb=pb, parent=owner, path=f"{path}.{key}" if path else key)
            if "payload_text" in value or "payload_b64" in value:  # a message: its payload as --payload shows it
                preview = _payload_preview(value)
                name, sep, rest = preview.partition(": ")
                line.append((pad + " " * TREE_STEP + name + sep, "dim"))
                line.append((rest, ""))
            return
        if isinstance(value, list):
            if not value:
                line.append((pad + label, "dim"))
                line.append((": (none)", "dim"))
            elif all(not isinstance(v, (dict, list)) for v in value):
                kind = bytes_kind(label, parent) if pb else None
                shown = ", ".join(shown_b64(v, kind)[0] if kind else safe(v, MAX_TREE_VALUE) for v in value)
                line.append((pad + label + ": ", "dim"))
                line.append((safe(shown, MAX_TREE_VALUE), ""))
            elif all(isinstance(v, dict) and v.keys() == {"key", "value"} for v in value):
                # key/value pairs (a protobuf map written as a list): shown as a message's properties are
                line.append((pad + label, "dim"))
                for pair in value:
                    self.node(safe(pair["key"], 60), pair["value"], depth + 1, pb=pb, parent=label,
                              path=f"{path}.{pair['key']}")
            else:
                line.append((f"{pad}{label} ({len(value)})", "dim"))
                for i, item in enumerate(value):
                    self.node(f"[{i}]", item, depth + 1, pb=pb, parent=label, path=path)
            return
        kind = bytes_kind(label, parent) if pb else None
        if kind is not None:
            text, hexed = shown_b64(value, kind, MAX_TREE_VALUE)
            line.append((pad + label + (" (hex): " if hexed else ": "), "dim"))
            line.append((text, ""))
            return
        if label.endswith("_b64"):  # bytes the record keeps as base64 when they are not UTF-8
            text, _ = shown_b64(value, "bytes", MAX_TREE_VALUE)
            line.append((pad + label[:-4] + " (hex): ", "dim"))
            line.append((text, ""))
            return
        line.append((pad + label + ": ", "dim"))
        text = f"{value:.3f}" if label == "latency_ms" and isinstance(value, float) else safe(value, MAX_TREE_VALUE)
        if type(value) is int and value > 0 and (label in _DATE_KEYS or path in self.dates):
            text += f" ({date_ms(value)})"
        line.append((text, ""))


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


@lru_cache(maxsize=4096)
def _where(conn, src, dst, direction) -> tuple:
    """The connection, the arrow and the client's port: the same pieces on every line of a direction."""
    pieces = []
    if conn is not None:
        pieces.append((f"c{conn} ", "magenta"))
    if src is not None:
        arrow = ARROW_TO_CLIENT if direction == "to_client" else ARROW_UNKNOWN if direction == "unknown" \
            else ARROW_TO_SERVER
        client = dst if direction == "to_client" else src
        pieces.append((f"{arrow} ", "bold"))
        if direction == "unknown":
            pieces.append((f"{src}→{dst} ", "dim"))
        else:
            pieces.append((f"{client.rsplit(':', 1)[-1]} ", "dim"))
    return tuple(pieces)


@lru_cache(maxsize=1024)
def _type_piece(name: str, problem: bool) -> tuple[str, str]:
    return f"{name:<16}", "bold red" if problem else _type_style(name)


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
