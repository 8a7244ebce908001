"""JSON Lines output of records: orjson, with every character that could reach a terminal or split a line escaped.

JSON allows C1 controls (U+0080..U+009F), DEL, U+2028/U+2029 and the bidi controls (U+202A..U+202E,
U+2066..U+2069) raw; a terminal obeys the first ones, ``str.splitlines`` and JavaScript end a line at the
separators, and the bidi ones reorder what is shown. They are written as ``\\uXXXX``, as the core's JSON
writer writes them (``crates/engine/src/value.rs: write_json_str``), byte for byte.
"""

from __future__ import annotations

import json
import re
from typing import Callable, TextIO

_ESCAPED = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def _escape(match: re.Match) -> bytes:
    return b"\\u%04x" % ord(match.group().decode("utf-8"))


def _escaped(data: bytes) -> bytes:
    """``data`` with the characters above as ``\\uXXXX`` (a byte string scan first: most records hold none)."""
    if b"\xc2" in data or b"\xe2" in data or b"\x7f" in data:
        return _ESCAPED.sub(_escape, data)
    return data


def _json_default(value):
    """Last line of defence for values JSON cannot hold: wire bytes become escaped text, never a crash."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(rec) -> bytes:
    """One record as JSON bytes (no newline); C1 controls, DEL, line separators and bidi controls escaped."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency; stay usable without it
        data = json.dumps(rec, separators=(",", ":"), default=_json_default, ensure_ascii=False).encode()
    else:
        data = orjson.dumps(rec, default=_json_default)
    return _escaped(data)


def json_writer(out: TextIO) -> Callable[[dict], None]:
    """A function writing one JSON Lines record to ``out`` (to its binary buffer when it has one)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover
        return lambda rec: out.write(dumps(rec).decode() + "\n")
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        return lambda rec: out.write(dumps(rec).decode() + "\n")
    option = orjson.OPT_APPEND_NEWLINE
    orjson_dumps = orjson.dumps

    def write(rec: dict) -> None:
        buffer.write(_escaped(orjson_dumps(rec, option=option, default=_json_default)))

    return write
