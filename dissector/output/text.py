"""Text from the wire, made safe for any renderer: one place for every escape.

Wire strings are untrusted: a topic name may hold terminal escape sequences, rich markup or newlines.
``safe`` makes any value printable, single-line and length-limited; renderers append it as plain text
(never parsed as markup).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from functools import lru_cache
from typing import Any

MAX_VALUE = 60


def safe(value: Any, limit: int = MAX_VALUE) -> str:
    """Printable, single-line, length-limited text for a value that came off the wire."""
    if type(value) is int and -10**(limit - 2) < value < 10**(limit - 1):
        return str(value)  # the common case on a timeline line: printable and short
    if type(value) is str and len(value) <= 256:
        return _safe_short(value, limit)  # names and topics recur on every line: made once
    return _safe(value, limit)


def _safe(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=_bytes_text) \
        if isinstance(value, (dict, list)) else str(value)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


_safe_short = lru_cache(maxsize=4096)(_safe)  # bounded: at most 4,096 short strings remembered


def text_or_b64(key: str, value: bytes, text_key: str | None = None) -> dict[str, str]:
    """Bytes as text when they are UTF-8 (under ``text_key``), else base64 under ``<key>_b64``."""
    try:
        return {text_key or key: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{key}_b64": base64.b64encode(value).decode("ascii")}


def date_ms(value) -> str:
    """Epoch milliseconds as a UTC date and time (a SEEK's publish time, a delayed delivery)."""
    try:
        return _dt.datetime.fromtimestamp(int(value) / 1000, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
    except (OverflowError, OSError, ValueError, TypeError):
        return safe(value)


# Fields that hold bytes (base64 text in records, as in protobuf's JSON mapping): one decoding for every view,
# so a value reads the same on a timeline line and in the -V tree. "hex": always hex (a schema version is a
# number, not text); otherwise text when the bytes are UTF-8, else hex.
BYTES_FIELDS = {"schema_version": "hex", "schema_id": "hex", "ordering_key": "text", "auth_data": "text",
                "schema_data": "text", "encryption_param": "hex"}
BYTES_IN = {("encryption_keys", "value"): "hex"}  # (parent key, key): a bytes field whose name alone is ambiguous


def bytes_kind(key: str, parent: str | None = None) -> str | None:
    """How a base64-coded bytes field is shown ("hex" or "text"), or None when the field is not bytes."""
    return BYTES_IN.get((parent, key)) or BYTES_FIELDS.get(key)


def shown_bytes(raw: bytes, kind: str = "text", limit: int = 1000) -> tuple[str, bool]:
    """(text, is_hex): the bytes as safe text when ``kind`` is "text" and they are UTF-8, else as hex (spaced
    as the payload preview; a schema version unspaced, as on the timeline line)."""
    if kind == "text":
        try:
            return safe(raw.decode("utf-8"), limit), False
        except UnicodeDecodeError:
            pass
    return (raw.hex() if kind == "hex" else raw.hex(" "))[:limit], True


def shown_b64(value, kind: str = "text", limit: int = 1000) -> tuple[str, bool]:
    """A base64 value of a bytes field as ``shown_bytes`` shows it (a value that is not base64: as it is)."""
    if not isinstance(value, str):
        return safe(value, limit), False
    try:
        raw = base64.b64decode(value, validate=True)
    except (ValueError, TypeError):
        return safe(value, limit), False
    return shown_bytes(raw, kind, limit)


_ASCII = bytes(i if 0x20 <= i < 0x7F else 0x2E for i in range(256))  # printable ASCII, else "."


def hex_dump(data: bytes, indent: int = 8) -> list[str]:
    """Lines of offset, 16 bytes in hex and as ASCII (anything not printable ASCII as "."), as tshark -x: 79
    columns with the default indent, whatever the offsets' width."""
    digits = max(4, len(f"{max(len(data) - 1, 0):x}"))
    pad = " " * max(0, indent - (digits - 4))
    return [f"{pad}{off:0{digits}x}  {data[off:off + 16].hex(' '):<47}  "
            f"{data[off:off + 16].translate(_ASCII).decode('ascii')}" for off in range(0, len(data), 16)]


def _bytes_text(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
