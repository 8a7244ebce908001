"""Wires the stages together: packets → TCP segments → reassembled streams → PDUs → decoded frames.

The stages themselves are the compiled core's (``crates/engine/src/transport/``: the network layers, the TCP
reassembly, the PDU splitter with each protocol's framing, the decoders, and the pipeline that joins them);
``Dissector`` is its Python face. It is a push machine (``feed_packet`` / ``feed_segment`` / ``tick``) so a
live sniffer and a file reader drive the same code; ``dissect_file`` is the pull-style wrapper for files. It
yields ``model.Frame`` and ``model.Event`` values in capture order; analysis and output are later stages.

It knows no protocol: which protocol a connection speaks comes from the server port (or, with ``detect``,
from the first PDU a protocol's decoder accepts), and everything else from that protocol's declaration
(``ProtocolSpec``: ports, roles, the command table) and its framing and decoder.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from dissector import _core as _core

from . import protocols
from .capture.files import CapturedPacket, open_capture
from .capture.netlayers import TcpSegment
from .model import Decoded, Event, Frame
from .options import Options
from .problems import Finding


class Dissector:
    """Push packets, TCP segments or clock ticks in; get decoded frames and events out, in capture order.

    The events: CONNECTION_OPENED (its client and server, ``mid_stream``), CONNECTION_CLOSED (how, the bytes
    each way, who closed), GAP, and the splitter's notes (SKIPPED, OVERSIZED, BAD_SIZE, TRUNCATED,
    PROXY_HEADER, a foreign protocol); a frame whose last bytes are missing says why in its first finding
    (``frame.gap_damaged``, ``frame.cut_at_end``, ``frame.oversized_head``).
    """

    def __init__(self, options: Options | None = None) -> None:
        self.options = options = options or Options()
        self._core = _core.Dissector(options, protocols.select(options.protocols), Frame, Event, Decoded, Finding)
        self.other_tcp = OtherTraffic(self._core)  # TCP off the protocols' ports: what a capture held instead

    @property
    def last_time(self) -> float:
        """The time of the last TCP segment fed."""
        return self._core.last_time

    @property
    def last_packet(self) -> int:
        """The number of the last packet fed that carried a TCP segment."""
        return self._core.last_packet

    def feed_packet(self, packet: CapturedPacket) -> list:
        return self._core.feed_packet(packet.index, packet.timestamp, packet.linktype, packet.data, packet.orig_len)

    def feed_segment(self, seg: TcpSegment) -> list:
        return self._core.feed_segment(seg.packet_index, seg.timestamp, seg.src_ip, seg.src_port, seg.dst_ip,
                                       seg.dst_port, seg.seq, seg.ack, seg.flags, seg.window, seg.payload,
                                       seg.missing_tail)

    def tick(self, now: float) -> list:
        """The clock moved to ``now`` (a packet's time, or the wall clock while a live link is idle): apply the
        time-based expiries (lost segments, connections closing) without waiting for the next packet."""
        return self._core.tick(now)

    def finish(self) -> list:
        return self._core.finish()


class OtherTraffic:
    """TCP seen off the protocols' ports, per (guessed) server port: connections and payload bytes. Bounded
    (the core remembers at most 256 ports and 1024 clients per port; more are counted by their bytes only)."""

    def __init__(self, core) -> None:
        self._core = core

    def summary(self, most: int = 5) -> list[dict]:
        """The busiest ports first: {port, connections, bytes}."""
        return self._core.other_tcp(most)


def dissect_packets(packets: Iterable[CapturedPacket], options: Options | None = None, *,
                    dissector: Dissector | None = None) -> Iterator:
    """Decode packets from any source (a file reader, a live sniffer), then flush at the end."""
    dissector = dissector or Dissector(options)
    feed = dissector._core.feed_packet
    for packet in packets:
        out = feed(packet.index, packet.timestamp, packet.linktype, packet.data, packet.orig_len)
        if out:
            yield from out
    yield from dissector.finish()


def dissect_file(path, options: Options | None = None, report: dict | None = None) -> Iterator:
    """Decode a capture file; raises capture.files.CaptureError when the file cannot be read at all.
    ``report``, when given, receives what the capture held besides the frames (``other_tcp``, ``packets``)."""
    return read_file(path, Dissector(options)._core, report, end=tuple)


#: A call into the core reads a capture file until the stage made this many Python objects (frames, events;
#: JSON lines come as one bytes object between two of them): more would live long enough to cost the
#: garbage collector more than the calls saved ...
READ_BATCH = 32
#: ... or read packets of this many bytes (what the items hold grows with them).
READ_BATCH_BYTES = 64 << 10


def read_file(path, stage, report: dict | None, *, end) -> Iterator:
    """A capture file through ``stage`` (the core's ``Dissector``, or its ``AnalysedDissector``): what it makes,
    in capture order, with the reader's notes (odd blocks, ...) as CAPTURE_NOTE events where they are found
    (before what the packet read after them completes), and CAPTURE_TRUNCATED when the file is cut. The stage
    reads the core's reader itself, ``READ_BATCH`` items (or ``READ_BATCH_BYTES``) per call. ``end()``: what
    comes after the file."""
    with open_capture(path) as reader:
        if report is not None:
            report["other_tcp"] = OtherTraffic(stage)
            report["reader"] = reader
        read, core_reader = stage.read_capture, reader._core
        while (items := read(core_reader, READ_BATCH, READ_BATCH_BYTES)) is not None:
            yield from items
    yield from end()
