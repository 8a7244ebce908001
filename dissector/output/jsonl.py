"""JSON Lines output of records: orjson, with every byte that could reach a terminal escaped."""

from __future__ import annotations

import json
import re
from typing import Callable, TextIO

_C1_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")


def _json_default(value):
    """Last line of defence for values JSON cannot hold: wire bytes become escaped text, never a crash."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(rec) -> bytes:
    """One record as JSON bytes (no newline); C1 controls escaped (JSON allows them raw, a terminal obeys)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency; stay usable without it
        data = json.dumps(rec, separators=(",", ":"), default=_json_default, ensure_ascii=False).encode()
    else:
        data = orjson.dumps(rec, default=_json_default)
    if b"\xc2" in data:
        data = _C1_UTF8.sub(lambda m: b"\\u%04x" % m.group()[1], data)
    return data


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
        data = orjson_dumps(rec, option=option, default=_json_default)
        if b"\xc2" in data:
            data = _C1_UTF8.sub(lambda m: b"\\u%04x" % m.group()[1], data)
        buffer.write(data)

    return write
