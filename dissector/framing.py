"""Pulsar framing: one direction of a reassembled TCP stream in, whole frames out.

Wire layout (big-endian): ``[TOTAL_SIZE u32][CMD_SIZE u32][BaseCommand][payload section]`` where
TOTAL_SIZE counts everything after itself. The splitter knows nothing of protobuf: whether bytes look like a
frame start is asked of a ``FrameValidator`` so that resynchronisation after loss can use the decoder's
judgement without this module depending on it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Protocol

# Broker default maxMessageSize (5 MiB) + Commands.MESSAGE_SIZE_FRAME_PADDING (10 KiB).
DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024 + 10 * 1024

_U32 = struct.Struct(">I")
_U32x2 = struct.Struct(">II")
_U16 = struct.Struct(">H")

PROXY_V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
_HTTP_PREFIXES = (b"GET ", b"POST", b"PUT ", b"HEAD", b"HTTP", b"OPTI", b"DELE", b"PATC", b"CONN", b"PRI ")


@dataclass(slots=True)
class RawFrame:
    """One complete (or, when ``missing`` > 0, gap-damaged) frame, header included."""

    data: bytes
    offset: int  # stream offset of the TOTAL_SIZE field
    first_packet: int
    last_packet: int
    first_time: float
    timestamp: float  # time of the packet that carried the last byte
    missing: int = 0  # bytes of this frame not in data: lost to a capture gap, or after it (data = bytes before)


@dataclass(slots=True)
class StreamNote:
    """Something about the byte stream that is not a frame: skipped bytes, foreign protocols, limits."""

    kind: str  # SKIPPED | NOT_PULSAR | OVERSIZED | TRUNCATED | PROXY_HEADER
    offset: int
    length: int
    message: str
    timestamp: float
    packet_index: int
    details: dict = field(default_factory=dict)


class FrameValidator(Protocol):
    """Judges whether a frame starts at ``start``: True, False, or None when more bytes (up to ``end``) are needed."""

    def __call__(self, buf: bytearray, start: int, total_size: int, cmd_size: int, end: int) -> bool | None: ...


def sniff_foreign_protocol(head: bytes) -> str | None:
    """Name the protocol when the first bytes of a stream are clearly not Pulsar."""
    if len(head) >= 3 and head[0] == 0x16 and head[1] == 0x03 and head[2] <= 0x04:
        return "TLS handshake (is this a pulsar+ssl:// connection on a plaintext port?)"
    if head[:4] in _HTTP_PREFIXES:
        return "HTTP (is an HTTP client talking to the binary-protocol port?)"
    if head[:4] == b"SSH-":
        return "SSH"
    return None


class FrameSplitter:
    """Splits one direction of a TCP stream into Pulsar frames.

    ``synced`` says whether the next byte is known to be a frame boundary (true from the SYN on). When it is
    not (capture started mid-connection, or bytes were lost), the splitter scans for the next offset that the
    validator accepts and reports the bytes it skipped.
    """

    def __init__(
        self,
        validator: FrameValidator,
        *,
        synced: bool = True,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        start_offset: int = 0,
    ) -> None:
        self._validator = validator
        self.synced = synced
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._buf_offset = start_offset  # stream offset of _buf[0]
        self._buf_packet = 0  # packet and time at which _buf[0] arrived
        self._buf_time = 0.0
        self._at_stream_start = synced and start_offset == 0
        self._skip = 0  # bytes still to discard: the lost tail of a frame damaged by a gap
        self.foreign: str | None = None  # set once the stream is recognised as another protocol
        self._foreign_bytes = 0
        self._foreign_offset = 0
        self._skipped_run = 0  # bytes skipped in the current resync run
        self._skipped_run_start = 0

    # ------------------------------------------------------------------ feeding

    def feed(self, data: bytes, timestamp: float, packet_index: int) -> list:
        if self.foreign is not None:
            self._foreign_bytes += len(data)
            self._buf_offset += len(data)
            return []
        if self._skip:
            n = min(self._skip, len(data))
            self._skip -= n
            self._buf_offset += n
            data = data[n:]
            if not data:
                return []
        if not self._buf:
            self._buf_packet, self._buf_time = packet_index, timestamp
        self._buf += data
        out: list = []
        self._drain(out, timestamp, packet_index)
        return out

    def gap(self, length: int, timestamp: float, packet_index: int) -> list:
        """``length`` bytes of this direction were lost before the next data."""
        out: list = []
        if self.foreign is not None:
            self._buf_offset += length
            return out
        self._flush_skipped(out, timestamp, packet_index)  # a run of skipped bytes ends at the gap
        if self._skip:
            absorbed = min(self._skip, length)
            self._skip -= absorbed
            self._buf_offset += absorbed
            length -= absorbed
            if not length:
                return out
        buf = self._buf
        if self.synced and len(buf) >= 4:
            total = _U32.unpack_from(buf, 0)[0]
            frame_len = total + 4
            if 4 <= total <= self.max_frame_size and len(buf) < frame_len:
                remaining = frame_len - len(buf)
                lost = min(remaining, length)
                if len(buf) >= 8:
                    # missing counts every byte of the frame not in data: the lost ones and those after the gap
                    out.append(RawFrame(bytes(buf), self._buf_offset, self._buf_packet, packet_index,
                                        self._buf_time, timestamp, missing=remaining))
                else:
                    out.append(StreamNote("TRUNCATED", self._buf_offset, len(buf),
                                          f"frame of {frame_len} bytes lost in a capture gap after {len(buf)} bytes",
                                          timestamp, packet_index))
                self._buf_offset += len(buf) + lost
                buf.clear()
                if length < remaining:
                    # The gap ends inside this frame: its size tells where the next frame starts.
                    self._skip = remaining - length
                    return out
                length -= remaining
                if length == 0:
                    return out  # the gap ended exactly on a frame boundary
        if buf:
            out.append(StreamNote("TRUNCATED", self._buf_offset, len(buf),
                                  f"{len(buf)} bytes before a capture gap could not be framed",
                                  timestamp, packet_index))
            self._buf_offset += len(buf)
            buf.clear()
        self._buf_offset += length
        self.synced = False
        self._at_stream_start = False
        return out

    def finish(self, timestamp: float, packet_index: int) -> list:
        """End of stream: report what could not be framed."""
        out: list = []
        self._flush_skipped(out, timestamp, packet_index)
        if self.foreign is not None:
            return out  # reported when it was recognised
        if self._buf:
            n = len(self._buf)
            if self.synced and n >= 4:
                total = _U32.unpack_from(self._buf, 0)[0]
                message = f"stream ended inside a frame: {n} of {total + 4} bytes captured"
                if n >= 8:
                    out.append(RawFrame(bytes(self._buf), self._buf_offset, self._buf_packet, packet_index,
                                        self._buf_time, timestamp, missing=total + 4 - n))
                    self._buf_offset += n
                    self._buf.clear()
                    return out
            else:
                message = f"stream ended with {n} bytes that are not a whole frame"
            out.append(StreamNote("TRUNCATED", self._buf_offset, n, message, timestamp, packet_index))
            self._buf_offset += n
            self._buf.clear()
        return out

    # ------------------------------------------------------------------ internals

    def _drain(self, out: list, timestamp: float, packet_index: int) -> None:
        buf = self._buf
        pos = 0
        end = len(buf)
        max_frame = self.max_frame_size
        while True:
            if not self.synced:
                found, at = self._resync(buf, pos, end)
                self._count_skipped(pos, at)
                pos = at
                if not found:
                    break
                self._flush_skipped(out, timestamp, packet_index)
                self.synced = True
            if end - pos < 8:
                if self._at_stream_start and end - pos >= 4:
                    self._check_stream_start(buf, pos, out, timestamp, packet_index)
                    if self.foreign is not None:
                        return
                break
            if self._at_stream_start:
                pos = self._check_stream_start(buf, pos, out, timestamp, packet_index)
                if self.foreign is not None:
                    return
                if self._at_stream_start or end - pos < 8:
                    break  # a PROXY header still incomplete, or too few bytes for the size fields
            total = _U32.unpack_from(buf, pos)[0]
            if total > max_frame or total < 4:
                self._report_bad_size(buf, pos, total, out, timestamp, packet_index)
                if self.foreign is not None:
                    return
                self.synced = False
                self._skipped_run_start = self._buf_offset + pos
                pos += 1
                self._skipped_run = 1
                continue
            frame_end = pos + 4 + total
            if frame_end > end:
                break
            first_packet = self._buf_packet if pos == 0 else packet_index
            first_time = self._buf_time if pos == 0 else timestamp
            out.append(RawFrame(bytes(buf[pos:frame_end]), self._buf_offset + pos, first_packet, packet_index,
                                first_time, timestamp))
            pos = frame_end
        if pos:
            del buf[:pos]
            self._buf_offset += pos
            self._buf_packet, self._buf_time = packet_index, timestamp

    def _check_stream_start(self, buf: bytearray, pos: int, out: list, timestamp: float, packet_index: int) -> int:
        """At offset 0: skip a PROXY protocol header, or recognise a foreign protocol."""
        head = bytes(buf[pos:pos + 16])
        if len(head) < 6 and b"PROXY ".startswith(head):
            return pos  # maybe a PROXY v1 header: wait for "PROXY " to be complete
        if head.startswith(b"PROXY ") or head.startswith(PROXY_V2_SIGNATURE[: len(head)]):
            length = _proxy_header_length(buf, pos)
            if length is None:
                return pos  # wait for the rest of the header
            out.append(StreamNote("PROXY_HEADER", self._buf_offset + pos, length,
                                  "HAProxy PROXY protocol header", timestamp, packet_index,
                                  {"header": bytes(buf[pos:pos + length]).decode("latin-1")[:200]}))
            self._at_stream_start = False
            return pos + length
        self._at_stream_start = False
        foreign = sniff_foreign_protocol(head)
        if foreign is not None:
            self._become_foreign(foreign, buf, pos, out, timestamp, packet_index)
        return pos

    def _become_foreign(self, name: str, buf: bytearray, pos: int, out: list, timestamp: float,
                        packet_index: int) -> None:
        # Reported at once (a live view should say so now), not when the stream ends.
        self.foreign = name
        self._foreign_offset = self._buf_offset + pos
        self._foreign_bytes = len(buf) - pos
        out.append(StreamNote("NOT_PULSAR", self._foreign_offset, self._foreign_bytes,
                              f"this direction speaks {name}; it is not decoded", timestamp, packet_index,
                              {"protocol": name, "head_hex": bytes(buf[pos:pos + 16]).hex()}))
        self._buf_offset += len(buf)
        buf.clear()

    def _report_bad_size(self, buf, pos, total, out, timestamp, packet_index) -> None:
        head = bytes(buf[pos:pos + 4])
        foreign = sniff_foreign_protocol(head)
        if foreign is not None and self._buf_offset + pos == 0:
            self._become_foreign(foreign, buf, pos, out, timestamp, packet_index)
            return
        reason = "above the limit" if total > self.max_frame_size else "too small"
        note = StreamNote("OVERSIZED" if total > self.max_frame_size else "BAD_SIZE", self._buf_offset + pos, 4,
                          f"TOTAL_SIZE {total} is {reason} ({self.max_frame_size} max)"
                          + (f"; the bytes look like {foreign}" if foreign else ""),
                          timestamp, packet_index, {"total_size": total, "head_hex": head.hex()})
        out.append(note)

    def _resync(self, buf: bytearray, pos: int, end: int) -> tuple[bool, int]:
        """Find the next plausible frame start at or after ``pos``.

        Returns (True, offset) when found; (False, offset) when nothing before ``offset`` can start a frame
        and the bytes from ``offset`` on must wait for more data.
        """
        validator = self._validator
        max_frame = self.max_frame_size
        i = pos
        while True:
            # BaseCommand starts with tag 0x08 (field 1, varint) right after the two size fields.
            j = buf.find(b"\x08", i + 8, end)
            if j < 0:
                return False, max(pos, end - 8)
            i = j - 8
            total, cmd = _U32x2.unpack_from(buf, i)
            if 2 <= cmd and cmd + 4 <= total <= max_frame:
                verdict = validator(buf, i, total, cmd, end)
                if verdict is None:
                    return False, i
                if verdict:
                    return True, i
            i += 1

    def _count_skipped(self, pos: int, upto: int) -> None:
        if upto > pos:
            if not self._skipped_run:
                self._skipped_run_start = self._buf_offset + pos
            self._skipped_run += upto - pos

    def _flush_skipped(self, out: list, timestamp: float, packet_index: int) -> None:
        if self._skipped_run:
            out.append(StreamNote("SKIPPED", self._skipped_run_start, self._skipped_run,
                                  f"skipped {self._skipped_run} bytes to find the next frame boundary",
                                  timestamp, packet_index))
            self._skipped_run = 0


def _proxy_header_length(buf: bytearray, pos: int) -> int | None:
    if buf[pos:pos + 6] == b"PROXY ":
        crlf = buf.find(b"\r\n", pos, pos + 108)
        if crlf < 0:
            return None if len(buf) - pos < 108 else 108
        return crlf + 2 - pos
    if len(buf) - pos < 16:
        return None
    length = 16 + _U16.unpack_from(buf, pos + 14)[0]
    return length if len(buf) - pos >= length else None  # wait for the whole v2 header
