"""The PDU splitter: one direction of a reassembled TCP stream in, whole PDUs (frames) out.

It knows no protocol. How long the PDU at an offset is, and where the next plausible PDU starts after lost
bytes, are asked of the protocol (``ProtocolSpec.pdu_length`` / ``resync``: Wireshark's tcp_dissect_pdus and
dpkt's NeedData, as callbacks). What it does itself is what every TCP protocol needs: PDUs damaged by capture
gaps, resynchronisation with a count of the skipped bytes, HAProxy PROXY headers, recognising TLS, HTTP and
SSH on the port, and refusing sizes above the limit without allocating them: a PDU above it is skipped, or,
when the protocol can read its head alone (``ProtocolSpec.oversized_head``: Pulsar's command and metadata),
that head is handed on as a frame with the rest ``missing``, and the rest is skipped unbuffered.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..protocols.base import NEED_MORE, BadLength, ProtocolSpec

_U16 = struct.Struct(">H")

PROXY_V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
OVERSIZED_HEAD_LIMIT = 64 * 1024  # bytes buffered at most to find the head of a PDU above the size limit
_HTTP_PREFIXES = (b"GET ", b"POST", b"PUT ", b"HEAD", b"HTTP", b"OPTI", b"DELE", b"PATC", b"CONN", b"PRI ")


@dataclass(slots=True)
class RawFrame:
    """One complete (or, when ``missing`` > 0, gap-damaged) PDU, header included."""

    data: bytes
    offset: int  # stream offset of its first byte
    first_packet: int
    last_packet: int
    first_time: float
    timestamp: float  # time of the packet that carried the last byte
    missing: int = 0  # bytes of this PDU not in data: lost to a capture gap, or after it (data = bytes before)
    oversized: bool = False  # the head of a PDU above the size limit: the ``missing`` rest was skipped, not lost


@dataclass(slots=True)
class StreamNote:
    """Something about the byte stream that is not a PDU: skipped bytes, a foreign protocol, a bad size."""

    kind: str  # SKIPPED | <protocol's foreign kind> | OVERSIZED | BAD_SIZE | TRUNCATED | PROXY_HEADER
    offset: int
    length: int
    timestamp: float
    packet_index: int
    details: dict = field(default_factory=dict)  # record details
    params: dict = field(default_factory=dict)  # message parameters the record does not carry


def sniff_foreign_protocol(head: bytes) -> str | None:
    """Name the protocol when the first bytes of a stream are clearly not a binary RPC protocol."""
    if len(head) >= 3 and head[0] == 0x16 and head[1] == 0x03 and head[2] <= 0x04:
        return "TLS handshake (is this a pulsar+ssl:// connection on a plaintext port?)"
    if head[:4] in _HTTP_PREFIXES:
        return "HTTP (is an HTTP client talking to the binary-protocol port?)"
    if head[:4] == b"SSH-":
        return "SSH"
    return None


class PduSplitter:
    """Splits one direction of a TCP stream into the PDUs of one protocol.

    ``synced`` says whether the next byte is known to be a PDU boundary (true from the SYN on). When it is
    not (capture started mid-connection, or bytes were lost), the splitter asks the protocol for the next
    plausible start and reports the bytes it skipped.
    """

    def __init__(self, protocol: ProtocolSpec, *, synced: bool = True, max_frame_size: int,
                 start_offset: int = 0) -> None:
        self._length = protocol.pdu_length
        self._resync_at = protocol.resync
        self._min_pdu = protocol.min_pdu
        self._foreign_kind = protocol.foreign_kind
        self._oversized_head = protocol.oversized_head
        self._awaiting_head = False  # _buf starts with a PDU above the limit whose head is not all there yet
        self.synced = synced
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._buf_offset = start_offset  # stream offset of _buf[0]
        self._buf_packet = 0  # packet and time at which _buf[0] arrived
        self._buf_time = 0.0
        self._at_stream_start = synced and start_offset == 0
        self._skip = 0  # bytes still to discard: the lost tail of a PDU damaged by a gap
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
        if self._awaiting_head:  # the head of an oversized PDU will not be complete: skip it as any other
            self._drain(out, timestamp, packet_index, give_up_head=True)
        self._flush_skipped(out, timestamp, packet_index)  # a run of skipped bytes ends at the gap
        if self._skip:
            absorbed = min(self._skip, length)
            self._skip -= absorbed
            self._buf_offset += absorbed
            length -= absorbed
            if not length:
                return out
        buf = self._buf
        frame_len = self._length(buf, 0, len(buf), self.max_frame_size) if self.synced and buf else NEED_MORE
        if type(frame_len) is int and frame_len > len(buf):
            remaining = frame_len - len(buf)
            lost = min(remaining, length)
            if len(buf) >= self._min_pdu:
                # missing counts every byte of the PDU not in data: the lost ones and those after the gap
                out.append(RawFrame(bytes(buf), self._buf_offset, self._buf_packet, packet_index,
                                    self._buf_time, timestamp, missing=remaining))
            else:
                out.append(StreamNote("TRUNCATED", self._buf_offset, len(buf), timestamp, packet_index,
                                      params={"case": "lost_in_gap", "frame_length": frame_len}))
            self._buf_offset += len(buf) + lost
            buf.clear()
            if length < remaining:
                # The gap ends inside this PDU: its length tells where the next one starts.
                self._skip = remaining - length
                return out
            length -= remaining
            if length == 0:
                return out  # the gap ended exactly on a PDU boundary
        if buf:
            out.append(StreamNote("TRUNCATED", self._buf_offset, len(buf), timestamp, packet_index,
                                  params={"case": "before_gap"}))
            self._buf_offset += len(buf)
            buf.clear()
        self._buf_offset += length
        self.synced = False
        self._at_stream_start = False
        return out

    def finish(self, timestamp: float, packet_index: int) -> list:
        """End of stream: report what could not be framed."""
        out: list = []
        if self._awaiting_head:
            self._drain(out, timestamp, packet_index, give_up_head=True)
        self._flush_skipped(out, timestamp, packet_index)
        if self.foreign is not None or not self._buf:
            return out  # a foreign stream was reported when it was recognised
        n = len(self._buf)
        frame_len = self._length(self._buf, 0, n, self.max_frame_size) if self.synced else NEED_MORE
        if type(frame_len) is int and frame_len > n:
            if n >= self._min_pdu:
                out.append(RawFrame(bytes(self._buf), self._buf_offset, self._buf_packet, packet_index,
                                    self._buf_time, timestamp, missing=frame_len - n))
            else:
                out.append(StreamNote("TRUNCATED", self._buf_offset, n, timestamp, packet_index,
                                      params={"case": "inside_frame", "frame_length": frame_len}))
        else:
            out.append(StreamNote("TRUNCATED", self._buf_offset, n, timestamp, packet_index,
                                  params={"case": "not_a_frame"}))
        self._buf_offset += n
        self._buf.clear()
        return out

    # ------------------------------------------------------------------ internals

    def _drain(self, out: list, timestamp: float, packet_index: int, give_up_head: bool = False) -> None:
        buf = self._buf
        pos = 0
        end = len(buf)
        max_frame = self.max_frame_size
        length_at = self._length
        self._awaiting_head = False
        while True:
            if not self.synced:
                found, at = self._resync_at(buf, pos, end, max_frame)
                self._count_skipped(pos, at)
                pos = at
                if not found:
                    break
                self._flush_skipped(out, timestamp, packet_index)
                self.synced = True
            if self._at_stream_start:
                if end - pos < 4:
                    break
                pos = self._check_stream_start(buf, pos, out, timestamp, packet_index)
                if self.foreign is not None or self._at_stream_start:
                    return  # another protocol, or a PROXY header still incomplete
            frame_len = length_at(buf, pos, end, max_frame)
            if type(frame_len) is not int:
                if frame_len.kind == "OVERSIZED" and self._oversized_head is not None:
                    head = self._head_of_oversized(buf, pos, end, give_up_head)
                    if head == NEED_MORE:
                        self._awaiting_head = True
                        break
                    if head is not None:
                        pos = self._emit_oversized_head(buf, pos, end, frame_len, head, out, timestamp,
                                                        packet_index)
                        if self._skip:
                            break  # the rest of the PDU is in bytes still to come: feed() skips them
                        continue
                self._report_bad_length(buf, pos, frame_len, out, timestamp, packet_index)
                if self.foreign is not None:
                    return
                self.synced = False
                self._skipped_run_start = self._buf_offset + pos
                pos += 1
                self._skipped_run = 1
                continue
            if frame_len == NEED_MORE or pos + frame_len > end:
                break
            frame_end = pos + frame_len
            first_packet = self._buf_packet if pos == 0 else packet_index
            first_time = self._buf_time if pos == 0 else timestamp
            out.append(RawFrame(bytes(buf[pos:frame_end]), self._buf_offset + pos, first_packet, packet_index,
                                first_time, timestamp))
            pos = frame_end
        if pos:
            del buf[:pos]
            self._buf_offset += pos
            self._buf_packet, self._buf_time = packet_index, timestamp

    def _head_of_oversized(self, buf: bytearray, pos: int, end: int, give_up: bool) -> tuple[int, int] | int | None:
        """The protocol's (head, PDU length) of the oversized PDU at ``pos``, NEED_MORE, or None to skip it as
        before. The head is looked for in the first OVERSIZED_HEAD_LIMIT bytes only: what is buffered for it
        stays bounded whatever the declared size."""
        limit = pos + OVERSIZED_HEAD_LIMIT
        got = self._oversized_head(buf, pos, min(end, limit))
        if type(got) is int:
            return None if give_up or end >= limit else NEED_MORE
        if got is not None and not 0 < got[0] <= min(end - pos, got[1]):
            return None  # a head the bytes at hand cannot hold: not to be trusted
        return got

    def _emit_oversized_head(self, buf: bytearray, pos: int, end: int, bad: BadLength, head: tuple[int, int],
                             out: list, timestamp: float, packet_index: int) -> int:
        """The OVERSIZED note, then the PDU's head as a frame with the rest missing; the rest is skipped (what
        of it is buffered now, and ``_skip`` for the bytes still to come). Returns the position after it."""
        head_len, length = head
        out.append(self._bad_length_note(buf, pos, bad, timestamp, packet_index,
                                         sniff_foreign_protocol(bytes(buf[pos:pos + 4]))))
        first_packet = self._buf_packet if pos == 0 else packet_index
        first_time = self._buf_time if pos == 0 else timestamp
        out.append(RawFrame(bytes(buf[pos:pos + head_len]), self._buf_offset + pos, first_packet, packet_index,
                            first_time, timestamp, missing=length - head_len, oversized=True))
        if pos + length > end:
            self._skip = pos + length - end
            return end
        return pos + length

    def _check_stream_start(self, buf: bytearray, pos: int, out: list, timestamp: float, packet_index: int) -> int:
        """At offset 0: skip a PROXY protocol header, or recognise a foreign protocol."""
        head = bytes(buf[pos:pos + 16])
        if len(head) < 6 and b"PROXY ".startswith(head):
            return pos  # maybe a PROXY v1 header: wait for "PROXY " to be complete
        if head.startswith(b"PROXY ") or head.startswith(PROXY_V2_SIGNATURE[: len(head)]):
            length = _proxy_header_length(buf, pos)
            if length is None:
                return pos  # wait for the rest of the header
            out.append(StreamNote("PROXY_HEADER", self._buf_offset + pos, length, timestamp, packet_index,
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
        out.append(StreamNote(self._foreign_kind, self._foreign_offset, self._foreign_bytes, timestamp,
                              packet_index, {"protocol": name, "head_hex": bytes(buf[pos:pos + 16]).hex()}))
        self._buf_offset += len(buf)
        buf.clear()

    def _report_bad_length(self, buf, pos, bad: BadLength, out, timestamp, packet_index) -> None:
        head = bytes(buf[pos:pos + 4])
        foreign = sniff_foreign_protocol(head)
        if foreign is not None and self._buf_offset + pos == 0:
            self._become_foreign(foreign, buf, pos, out, timestamp, packet_index)
            return
        out.append(self._bad_length_note(buf, pos, bad, timestamp, packet_index, foreign))

    def _bad_length_note(self, buf, pos, bad: BadLength, timestamp, packet_index, foreign: str | None) -> StreamNote:
        return StreamNote(bad.kind, self._buf_offset + pos, 4, timestamp, packet_index,
                          {**bad.details, "head_hex": bytes(buf[pos:pos + 4]).hex()},
                          {**bad.params, "limit": self.max_frame_size, "foreign": foreign})

    def _count_skipped(self, pos: int, upto: int) -> None:
        if upto > pos:
            if not self._skipped_run:
                self._skipped_run_start = self._buf_offset + pos
            self._skipped_run += upto - pos

    def _flush_skipped(self, out: list, timestamp: float, packet_index: int) -> None:
        if self._skipped_run:
            out.append(StreamNote("SKIPPED", self._skipped_run_start, self._skipped_run, timestamp, packet_index))
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
