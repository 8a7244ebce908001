"""Text from the wire, made safe for any renderer: one place for every escape.

Wire strings are untrusted: a topic name may hold terminal escape sequences, rich markup, bidi overrides or
newlines. ``safe`` makes any value printable, single-line and length-limited; renderers append it as plain
text (never parsed as markup). The escape is the compiled core's (``crates/engine/src/text.rs``), the same function
that makes the timeline's lines there: every character Python's ``str.isprintable`` rejects is written as
``unicode_escape`` writes it, a dict or list is shown as compact JSON, then the text is cut to ``limit``
characters (the last one "…").
"""

from __future__ import annotations

import base64
from typing import Any

from dissector import _core as _core

MAX_VALUE = 60


def safe(value: Any, limit: int = MAX_VALUE) -> str:
    """Printable, single-line, length-limited text for a value that came off the wire."""
    return _core.safe(value, limit)


def text_or_b64(key: str, value: bytes, text_key: str | None = None) -> dict[str, str]:
    """Bytes as text when they are UTF-8 (under ``text_key``), else base64 under ``<key>_b64``."""
    try:
        return {text_key or key: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{key}_b64": base64.b64encode(value).decode("ascii")}


def date_ms(value) -> str:
    """Epoch milliseconds as a UTC date and time (a SEEK's publish time, a delayed delivery); a value that is
    no such date as ``safe`` shows it."""
    return _core.date_ms(value)


# Fields that hold bytes (base64 text in records, as in protobuf's JSON mapping): one decoding for every view,
# so a value reads the same on a timeline line and in the -V tree. "hex": always hex (a schema version is a
# number, not text); otherwise text when the bytes are UTF-8, else hex.
BYTES_FIELDS = {"schema_version": "hex", "schema_id": "hex", "ordering_key": "text", "auth_data": "text",
                "schema_data": "text", "encryption_param": "hex"}
BYTES_IN = {("encryption_keys", "value"): "hex"}  # (parent key, key): a bytes field whose name alone is ambiguous


def bytes_kind(key: str, parent: str | None = None) -> str | None:
    """How a base64-coded bytes field is shown ("hex" or "text"), or None when the field is not bytes."""
    return BYTES_IN.get((parent, key)) or BYTES_FIELDS.get(key)


def shown_b64(value, kind: str = "text", limit: int = 1000) -> tuple[str, bool]:
    """(text, is_hex): a base64 value of a bytes field as text when ``kind`` is "text" and the bytes are UTF-8,
    else as hex (unspaced for "hex", as a schema version on the timeline line; spaced as the payload preview
    otherwise); a value that is not base64 as ``safe`` shows it."""
    return _core.shown_b64(value, kind, limit)


_ASCII = bytes(i if 0x20 <= i < 0x7F else 0x2E for i in range(256))  # printable ASCII, else "."


def hex_dump(data: bytes, indent: int = 8) -> list[str]:
    """Lines of offset, 16 bytes in hex and as ASCII (anything not printable ASCII as "."), as tshark -x: 79
    columns with the default indent, whatever the offsets' width."""
    digits = max(4, len(f"{max(len(data) - 1, 0):x}"))
    pad = " " * max(0, indent - (digits - 4))
    return [f"{pad}{off:0{digits}x}  {data[off:off + 16].hex(' '):<47}  "
            f"{data[off:off + 16].translate(_ASCII).decode('ascii')}" for off in range(0, len(data), 16)]
