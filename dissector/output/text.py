"""Text from the wire, made safe for any renderer: one place for every escape.

Wire strings are untrusted: a topic name may hold terminal escape sequences, rich markup or newlines.
``safe`` makes any value printable, single-line and length-limited; renderers append it as plain text
(never parsed as markup).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from typing import Any

MAX_VALUE = 60


def safe(value: Any, limit: int = MAX_VALUE) -> str:
    """Printable, single-line, length-limited text for a value that came off the wire."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=_bytes_text) \
        if isinstance(value, (dict, list)) else str(value)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


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


def _bytes_text(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
