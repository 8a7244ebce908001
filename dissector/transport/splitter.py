"""The PDU splitter: one direction of a reassembled TCP stream in, whole PDUs (frames) out.

The splitter is the compiled core's (``crates/engine/src/transport/splitter.rs``), which the pipeline drives
directly; this module is its Python face for the tools and tests that split a stream themselves: a thin
binding that turns the core's plain tuples into :class:`RawFrame` and :class:`StreamNote`.

It knows no protocol. How long the PDU at an offset is, where the next plausible PDU starts after lost bytes,
and the head of a PDU above the size limit, are asked of the protocol's framing (a ``Framing`` in the core:
Pulsar's; or the callables of a protocol declared in Python, ``ProtocolSpec.pdu_length`` / ``resync`` /
``oversized_head``). What it does itself is what every TCP protocol needs: PDUs damaged by capture gaps,
resynchronisation with a count of the skipped bytes, HAProxy PROXY headers, recognising TLS, HTTP and SSH on
the port, and refusing sizes above the limit without allocating them: a PDU above it is skipped, or, when the
protocol can read its head alone (Pulsar's command and metadata), that head is handed on as a frame with the
rest ``missing``, and the rest is skipped unbuffered (the head is looked for in at most
``OVERSIZED_HEAD_LIMIT`` bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dissector import _core as _core

from ..protocols.base import ProtocolSpec

OVERSIZED_HEAD_LIMIT = 64 * 1024  # bytes buffered at most to find the head of a PDU above the size limit


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


class PduSplitter:
    """Splits one direction of a TCP stream into the PDUs of one protocol.

    ``synced`` says whether the next byte is known to be a PDU boundary (true from the SYN on). When it is
    not (capture started mid-connection, or bytes were lost), the splitter asks the protocol for the next
    plausible start and reports the bytes it skipped.
    """

    def __init__(self, protocol: ProtocolSpec, *, synced: bool = True, max_frame_size: int,
                 start_offset: int = 0) -> None:
        self._core = _core.PduSplitter(protocol, synced=synced, max_frame_size=max_frame_size,
                                       start_offset=start_offset)

    @property
    def synced(self) -> bool:
        return self._core.synced

    @property
    def foreign(self) -> str | None:
        """The protocol the stream was recognised as, if another."""
        return self._core.foreign

    @property
    def buffered(self) -> bytes:
        """The bytes held for a PDU not yet complete."""
        return self._core.buffered

    def feed(self, data: bytes, timestamp: float, packet_index: int) -> list:
        return _items(self._core.feed(data, timestamp, packet_index))

    def gap(self, length: int, timestamp: float, packet_index: int) -> list:
        """``length`` bytes of this direction were lost before the next data."""
        return _items(self._core.gap(length, timestamp, packet_index))

    def finish(self, timestamp: float, packet_index: int) -> list:
        """End of stream: report what could not be framed."""
        return _items(self._core.finish(timestamp, packet_index))


def _items(raw: list[tuple]) -> list:
    return [RawFrame(*item[1:]) if item[0] == "pdu" else StreamNote(*item[1:]) for item in raw]
