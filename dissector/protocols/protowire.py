"""Low-level protobuf wire reading, independent of any schema (shared by the protocols that use protobuf).

The Python protobuf runtime hides facts a dissector must show: an unknown enum value silently reads as the
default, and unknown fields vanish from view. These helpers read the raw wire format so callers can see
exactly which fields and values were sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

VARINT, FIXED64, LENGTH_DELIMITED, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5


class WireError(ValueError):
    """The bytes are not valid protobuf wire format."""


class Truncated(WireError):
    """A value runs past the end of the bytes at hand (more may come)."""


def read_varint(buf: bytes | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """Return (value, next position) of the varint at ``pos``."""
    if end is None:
        end = len(buf)
    result = 0
    shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")
    raise Truncated("varint runs past the end of the buffer")


@dataclass(slots=True)
class RawField:
    number: int
    wire_type: int
    value: int | bytes  # int for varint/fixed, bytes for length-delimited


def iter_fields(buf: bytes, start: int = 0, end: int | None = None) -> Iterator[RawField]:
    """Yield the top-level fields of one serialized message. Raises WireError on malformed input."""
    if end is None:
        end = len(buf)
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire_type == VARINT:
            value, pos = read_varint(buf, pos, end)
        elif wire_type == LENGTH_DELIMITED:
            length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise WireError(f"field {number}: length {length} runs past the end")
            value = bytes(buf[pos:pos + length])
            pos += length
        elif wire_type == FIXED64:
            if pos + 8 > end:
                raise WireError(f"field {number}: fixed64 runs past the end")
            value = int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wire_type == FIXED32:
            if pos + 4 > end:
                raise WireError(f"field {number}: fixed32 runs past the end")
            value = int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise WireError(f"field {number}: unsupported wire type {wire_type}")
        yield RawField(number, wire_type, value)
