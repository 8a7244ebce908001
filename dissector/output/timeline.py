"""The terminal timeline: one line per frame or event, built from the JSON-contract records.

The line itself is made by the compiled core (``crates/engine/src/timeline.rs``), in one implementation whether it
comes from a frame the core decoded (``--plain``, written by the core in batches: ``run.analysed_timeline_lines``)
or from a record dict (``TimelineRenderer``): as (text, role) pieces, which this module styles by role
(``STYLES``) and folds to the console width, or as plain text. Python keeps what is declarative: which fields a
line shows comes from the protocol's command table, handed to the core once per protocol (``timeline_plan``),
and the protocol names its own pieces in the core (Pulsar: the payload section). Every string that came off
the wire passes through the core's ``safe`` (``text.safe``) and is appended to rich ``Text`` as plain text
(never parsed as markup), so a topic name cannot inject escape sequences or rich markup into the terminal.

A line starts with the frame number (``-`` for an event), the time, and the capture packet that carried it
(``p34``; ``p30-34`` when the frame spans packets), so the same place can be found in Wireshark. ``details``
(``-V``) adds the tree of every decoded field under the line, ``frame_bytes`` (``-x``) a hex and ASCII dump of
the frame's bytes: those two stay Python's.
"""

from __future__ import annotations

import re

from typing import Any

from dissector import _core as _core
from rich.console import Console
from rich.text import Text

from .. import protocols
from .text import BYTES_FIELDS, bytes_kind, date_ms, hex_dump, safe, shown_b64

# The style of each role of a line's pieces (the core names the roles: crates/engine/src/timeline.rs).
STYLES = {
    "plain": "", "index": "dim", "time": "cyan", "packets": "dim", "conn": "magenta", "arrow": "bold", "port": "dim",
    "type": "bold", "type_error": "bold red", "type_payload": "bold green", "type_response": "blue",
    "type_problem": "bold red", "event_type": "bold yellow", "event_message": "yellow", "label": "dim",
    "actor": "green", "link": "dim cyan", "problem": "red", "note": "yellow", "detail": "dim", "compression": "blue",
    "checksum_bad": "bold red", "checksum_ok": "dim green", "encrypted": "yellow", "chunk": "blue",
    "marker": "magenta", "deliver_at": "yellow", "delivery": "yellow", "reassembled": "blue",
}
_STYLE_OF = tuple(STYLES[role] for role in _core.TimelineFormat.roles())

# One style of keys on every line: the labels the command table uses, also for types it shows by default.
LABELS = {"request_id": "req", "consumer_id": "cons", "producer_id": "prod", "sequence_id": "seq"}
_MESSAGE_ID_KEYS = ("message_id", "message_ids", "last_message_id", "start_message_id",
                    "consumer_mark_delete_position")


def _is_message_id(path: str) -> bool:
    return path.endswith(_MESSAGE_ID_KEYS)


def _type_role(name: str) -> str:
    """The role, hence the style, of a command type's name on its line."""
    if "ERROR" in name:
        return "type_error"
    if name in ("SEND", "MESSAGE"):
        return "type_payload"
    if name.endswith("RESPONSE") or name in ("SUCCESS", "CONNECTED", "PRODUCER_SUCCESS", "SEND_RECEIPT", "PONG"):
        return "type_response"
    return "type"


def _field_plan(field: tuple) -> tuple:
    """(label, path keys, how to show, bytes kind) of one timeline field of a command table."""
    label, path, *how = field
    keys = path.split(".")
    kind = bytes_kind(keys[-1], keys[-2] if len(keys) > 1 else None)
    if how and how[0] == "date_ms":
        show = "date_ms"
    elif _is_message_id(path):
        show = "message_id"
    elif kind is not None:  # bytes: as the -V tree shows them
        show = "bytes"
    else:
        show = "text"
    return label, keys, show, kind


def timeline_plan(name: str) -> tuple | None:
    """What the core needs to make a protocol's lines, asked once per protocol: (the name of its own pieces in
    the core, [(type, role of its name, its key fields, or None for its first five scalar fields)])."""
    try:
        protocol = protocols.get(name)
    except KeyError:
        return None
    types = [(spec.name, _type_role(spec.name), [_field_plan(f) for f in spec.timeline] if spec.timeline else None)
             for spec in protocol.commands]
    return protocol.timeline_pieces, types


def timeline_format(*, absolute_time: bool = False, previews: bool = False):
    """The core's line maker (``dissector._core.TimelineFormat``) with this module's plans and labels."""
    return _core.TimelineFormat(timeline_plan, LABELS, BYTES_FIELDS, absolute_time, previews)


class TimelineRenderer:
    """Timeline lines from records. ``details``: the tree of decoded fields under each frame (-V);
    ``frame_bytes``: a function from a frame record to its bytes and the count of its bytes not in the capture
    (lost in a gap, or after the stream's end), or None when they are not to be had, for a hex dump under each
    frame (-x). ``format`` (the core's line maker) holds the time origin: it can be handed to the core to write
    plain lines itself (``run.analysed_timeline_lines``)."""

    def __init__(self, console: Console, *, plain: bool = False, absolute_time: bool = False,
                 details: bool = False, show_payload: bool = False, frame_bytes=None) -> None:
        self.console = console
        self.plain = plain
        self.absolute_time = absolute_time
        self.details = details
        self.show_payload = show_payload
        self.frame_bytes = frame_bytes
        # payloads under the line with --payload, unless -V shows them in its tree
        self.format = timeline_format(absolute_time=absolute_time, previews=show_payload and not details)

    @property
    def origin(self) -> float | None:
        """Time 0 of relative times: the capture's first record (else the first shown)."""
        return self.format.origin

    @origin.setter
    def origin(self, value: float | None) -> None:
        self.format.origin = value

    def render(self, rec: dict) -> None:
        if self.plain:  # pagers and files: one line per frame, never folded
            self.console.file.write(self.line(rec) + "\n")
        else:
            text = Text.assemble(*fold(self.parts(rec), self.console.width))
            self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def line(self, rec: dict) -> str:
        """A record's line as plain text, with the lines -V and -x add under it."""
        if (self.details or self.frame_bytes is not None) and "index" in rec:
            return "".join([p[0] for p in self.parts(rec)])
        return self.format.text(rec)

    def parts(self, rec: dict) -> "_Parts":
        """The line as (text, style) pieces: cheap to join for plain output, one Text for the terminal."""
        line = [(text, _STYLE_OF[role]) for text, role in self.format.pieces(rec)]
        if self.details and "index" in rec:
            self._details(line, rec)
        if self.frame_bytes is not None and "index" in rec:
            self._hex(line, rec)
        return line

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
            head = _core.message_id_text(value) if named and _is_message_id(named) else None
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
                preview = _core.payload_preview(value)
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
    # a field wider than any line (an event's sentence) is folded between its words instead
    room = width - len(FOLD_INDENT)
    words: list[list[tuple[str, str]]] = []
    for group in groups:
        if group[0][0].startswith(" ") and sum(len(t) for t, _ in group) > room \
                and not any("\n" in t for t, _ in group):
            for text, style in group:
                for token in re.findall(r" *[^ ]+| +", text):
                    if token.startswith(" ") or not words:
                        words.append([(token, style)])
                    else:
                        words[-1].append((token, style))
        else:
            words.append(group)
    groups = words
    out: list[tuple[str, str]] = []
    column = 0
    for group in groups:
        length = sum(len(text) for text, _ in group)
        first = group[0][0]
        if first.startswith("\n") and "\n" not in first[1:] and length - 1 > width \
                and not any("\n" in text for text, _ in group[1:]):
            out.extend(_wrap_line(group, width))  # a problem's line under its frame: folded at words
            column = 0
            continue
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


def _wrap_line(group: list[tuple[str, str]], width: int) -> list[tuple[str, str]]:
    """A line of its own under a frame (``\n`` + indent + text: a problem, a note) folded between words at
    ``width``, continuing under its text (past the mark that starts it); a word wider than the line is left
    to the terminal."""
    body = group[0][0][1:]
    indent = body[: len(body) - len(body.lstrip(" "))]
    hang = indent + "  "
    out: list[tuple[str, str]] = [("\n", "")]
    column = 0
    for text, style in [(body, group[0][1])] + group[1:]:
        for token in re.findall(r" *[^ ]+| +", text):
            if token.startswith(" ") and column > len(hang) and column + len(token) > width:
                out.append(("\n" + hang, ""))
                token = token.lstrip(" ")
                column = len(hang)
            out.append((token, style))
            column += len(token)
    return out


def _protocol(rec: dict):
    try:
        return protocols.get(rec.get("protocol", "pulsar"))
    except KeyError:
        return None
