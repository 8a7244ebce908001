"""TCP reassembly: TcpSegment objects in, per-connection / per-direction byte-stream events out.

The reassembly is the compiled core's (``crates/engine/src/transport/reassembly.rs``), which the pipeline drives
directly. This module is its Python face for the tools and tests that want the stream events themselves: a
thin binding that turns the core's plain tuples into the classes below. The policies, as the core applies
them:

Events, returned by :meth:`TcpReassembler.feed` / :meth:`TcpReassembler.expire` / :meth:`TcpReassembler.finish`:

* :class:`ConnectionOpened` -- first segment of a connection (``mid_stream`` when no SYN was seen);
* :class:`StreamData` -- new bytes of one direction, every stream byte exactly once and in order;
* :class:`StreamGap` -- a range of stream bytes that will never come (capture loss, snaplen, ...);
* :class:`ConnectionClosed` -- FIN exchange, RST or end of capture; the connection is then forgotten.

Sequence numbers are mapped to *stream offsets* (unbounded ints, 0 = first byte after the SYN, or the first
byte seen when the capture started mid-connection) by signed 32-bit differences against the next expected
sequence number, so wrap-around needs no special case anywhere else.

Loss / out-of-order policy
--------------------------
Segments beyond the next expected offset are buffered (non-overlapping pieces, *first copy wins*) until the
hole before them fills. A hole is declared permanent (``StreamGap``) when

* the out-of-order bytes buffered for that direction exceed ``max_buffered_bytes_per_direction``
  (reason ``"buffer limit"``);
* it has waited for more than ``ooo_wait_packets`` later segments of the same connection, or more than
  ``hole_timeout`` seconds of capture time (reason ``"missing segment"``);
* the connection is closing (RST, or FIN in both directions) and the missing bytes did not show up within
  ``close_wait_packets`` further packets of the whole capture (loopback captures on multi-core machines
  record segments out of order by a few packets, so a FIN/RST may precede the last data segment);
* the capture ends (reason ``"capture ended"``).

The peer's ACK alone is never taken as proof of loss. A FIN seen before the data preceding it is itself a
hole (the data may be recorded a few packets later). A snaplen-cut payload (``missing_tail``) is a gap of
reason ``"snaplen"`` at its place in the stream.

Retransmissions, overlaps, keep-alives (seq = next - 1 with 0/1 byte) and zero-window probes deliver nothing
twice; overlapping bytes are compared where the first copy is still at hand (buffered pieces, the last
delivered payload) and differences counted in ``stats.inconsistent_overlaps``.

Connections
-----------
A connection is a 4-tuple plus a generation. A SYN (without ACK) that is not a retransmission of the known
ISN, on a 4-tuple whose connection already carried data, FIN or RST, closes that connection (``how =
"reused"`` when it had not ended) and opens a new one; so does a SYN-ACK with a new ISN. A connection is
closed and forgotten when both directions reached their FIN (``"fin"``) or after a RST (``"rst"``) once the
bytes it acknowledges were seen. A tombstone (end sequence numbers) is kept for a while so that trailing ACKs
and retransmissions of a forgotten connection open nothing. Without a SYN, a connection is opened by its first
segment carrying data or FIN (lone ACKs open nothing); bytes just before that start are ignored
(``stats.bytes_before_start``). At most ``max_connections`` are tracked at once: opening one more closes the
oldest (``how = "evicted"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from dissector import _core as _core

if TYPE_CHECKING:  # pragma: no cover
    from ..capture.netlayers import TcpSegment

__all__ = [
    "Endpoint",
    "Connection",
    "ConnectionOpened",
    "StreamData",
    "StreamGap",
    "ConnectionClosed",
    "ReassemblyStats",
    "TcpReassembler",
    "reassemble",
]


@dataclass(slots=True, frozen=True)
class Endpoint:
    ip: str
    port: int

    def __str__(self) -> str:
        return _core.endpoint(self.ip, self.port)


class Connection:
    """One TCP connection (4-tuple + generation), as its events tell it.

    ``a`` is the client (SYN sender) when the handshake was seen, else the sender of the first segment seen.
    Identity-compared: every event of a connection carries the same object.
    """

    __slots__ = ("id", "a", "b", "saw_syn", "mid_stream", "first_time", "first_packet_index", "closed", "close_how",
                 "first_fin_from", "rst_from", "_bytes", "_isn")

    def __init__(self, cid: int, a: Endpoint, b: Endpoint, saw_syn: bool, first_time: float, first_index: int):
        self.id = cid
        self.a = a
        self.b = b
        self.saw_syn = saw_syn
        self.mid_stream = not saw_syn
        self.first_time = first_time
        self.first_packet_index = first_index
        self.closed = False
        self.close_how: str | None = None
        self.first_fin_from: Endpoint | None = None  # the side that started the close, in capture order
        self.rst_from: Endpoint | None = None  # the side that reset the connection
        self._bytes = (0, 0)
        self._isn: tuple[int | None, int | None] = (None, None)

    def bytes_from(self, sender: Endpoint) -> int:
        """Stream bytes accounted for (delivered + gaps) in the direction sent by ``sender``, once closed."""
        return self._bytes[self._side(sender)]

    def isn_of(self, sender: Endpoint) -> int | None:
        """The initial sequence number of ``sender``'s direction (None without its SYN), once closed."""
        return self._isn[self._side(sender)]

    def _side(self, sender: Endpoint) -> int:
        if sender == self.a:
            return 0
        if sender == self.b:
            return 1
        raise KeyError(sender)

    @property
    def key(self) -> tuple[str, int, str, int]:
        return (self.a.ip, self.a.port, self.b.ip, self.b.port)

    def __str__(self) -> str:
        return f"#{self.id} {self.a} <-> {self.b}"

    def __repr__(self) -> str:
        return f"Connection(id={self.id}, a={self.a}, b={self.b}, saw_syn={self.saw_syn})"


@dataclass(slots=True)
class ConnectionOpened:
    conn: Connection
    timestamp: float
    packet_index: int
    mid_stream: bool


@dataclass(slots=True)
class StreamData:
    conn: Connection
    sender: Endpoint
    data: bytes
    offset: int  # stream offset of data[0] in the sender's direction
    timestamp: float  # of the packet whose arrival made these bytes available in order
    packet_index: int

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@dataclass(slots=True)
class StreamGap:
    conn: Connection
    sender: Endpoint
    offset: int
    length: int
    timestamp: float
    packet_index: int
    reason: str  # "missing segment" | "snaplen" | "buffer limit" | "capture ended" | "connection closed" | ...

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(slots=True)
class ConnectionClosed:
    conn: Connection
    timestamp: float
    packet_index: int
    how: str  # "fin" | "rst" | "end_of_capture" | "reused" (a new SYN replaced it) | "evicted"


Event = ConnectionOpened | StreamData | StreamGap | ConnectionClosed


class ReassemblyStats:
    """The core's counters, as attributes (``segments``, ``connections``, ``delivered_bytes``,
    ``retransmitted_bytes``, ``out_of_order_segments``, ``overlap_bytes``, ``inconsistent_overlaps``,
    ``keepalives``, ``zero_window_probes``, ``gaps``, ``gap_bytes``, ``max_buffered_bytes``, ...: what each
    counts is said where the core declares it, ``Stats`` in ``crates/engine/src/transport/reassembly.rs``)."""

    __slots__ = ("_counters",)

    def __init__(self, counters: dict[str, int]) -> None:
        self._counters = counters

    def __getattr__(self, name: str) -> int:
        try:
            return self._counters[name]
        except KeyError:
            raise AttributeError(name) from None

    def as_dict(self) -> dict[str, int]:
        return dict(self._counters)


class TcpReassembler:
    """Feed TcpSegments in capture order; get events in stream order.

    Parameters (the core's caps and timers):
        max_buffered_bytes_per_direction: cap of out-of-order bytes held per direction; beyond it the first
            hole is declared lost.
        max_buffered_total: the same over every connection; beyond it the connection holding bytes the longest
            gives up its holes (gaps of reason "total buffer limit"). The pipeline also reports conflicting
            retransmissions, a RST's payload and bytes after a FIN as events; this binding only counts them
            (``stats``).
        ooo_wait_packets: a hole is declared lost after this many later segments of the same connection.
        hole_timeout: ... or after this many seconds of capture time (checked every ``sweep_every`` packets
            and by :meth:`expire`, which a live capture should call periodically).
        close_wait_packets: a closing connection (RST, or FIN both ways) whose streams still have holes is
            closed anyway after this many further packets of the whole capture.
        tombstone_seconds / max_tombstones: closed connections are remembered (a few ints) this long so that
            their trailing ACKs and retransmissions are not taken for new mid-stream connections.
        max_connections: connections tracked at once; opening one more closes the oldest (``how =
            "evicted"``), so a flood of connections cannot exhaust memory.
    """

    def __init__(self, **caps) -> None:
        self._core = _core.TcpReassembler(**caps)
        self._conns: dict[int, Connection] = {}

    @property
    def stats(self) -> ReassemblyStats:
        """Counters (retransmitted / out-of-order / overlapping bytes, gaps, ...)."""
        return ReassemblyStats(self._core.stats())

    @property
    def open_connections(self) -> list[Connection]:
        return [self._conns[cid] for cid in self._core.open_connections()]

    def table_sizes(self) -> tuple[int, int, int]:
        """(directions tracked, connections with holes or closing, tombstones): the core's tables."""
        return self._core.table_sizes()

    def feed(self, seg: "TcpSegment") -> list[Event]:
        """Process one segment; returns the events it caused, in stream order."""
        return self._events(self._core.feed(seg.packet_index, seg.timestamp, seg.src_ip, seg.src_port, seg.dst_ip,
                                            seg.dst_port, seg.seq, seg.ack, seg.flags, seg.window, seg.payload,
                                            seg.missing_tail))

    def feed_many(self, segments: Iterable["TcpSegment"]) -> Iterable[Event]:
        """Feed every segment then finish; yields all events."""
        for seg in segments:
            yield from self.feed(seg)
        yield from self.finish()

    def expire(self, now: float | None = None) -> list[Event]:
        """Apply the time-based policies now (``now`` = capture/wall time; default: last timestamp seen)."""
        return self._events(self._core.expire(now))

    def finish(self) -> list[Event]:
        """End of capture: declare remaining holes lost, deliver buffered data, close every connection."""
        return self._events(self._core.finish())

    def _events(self, raw: list[tuple]) -> list[Event]:
        out: list[Event] = []
        conns = self._conns
        for ev in raw:
            kind = ev[0]
            if kind == "data":
                _, cid, side, data, offset, time, packet, saw_syn = ev
                conn = conns[cid]
                conn.saw_syn = saw_syn
                out.append(StreamData(conn, conn.b if side else conn.a, data, offset, time, packet))
            elif kind == "gap":
                _, cid, side, offset, length, time, packet, reason, saw_syn = ev
                conn = conns[cid]
                conn.saw_syn = saw_syn
                out.append(StreamGap(conn, conn.b if side else conn.a, offset, length, time, packet, reason))
            elif kind == "opened":
                _, cid, time, packet, mid_stream, a_ip, a_port, b_ip, b_port, saw_syn = ev
                conn = conns[cid] = Connection(cid, Endpoint(a_ip, a_port), Endpoint(b_ip, b_port), saw_syn, time,
                                               packet)
                out.append(ConnectionOpened(conn, time, packet, mid_stream))
            else:
                _, cid, time, packet, how, sizes, isns, fin_from, rst_from, saw_syn = ev
                conn = conns.pop(cid)
                sides = (conn.a, conn.b)
                conn.saw_syn, conn.closed, conn.close_how, conn._bytes, conn._isn = saw_syn, True, how, sizes, isns
                conn.first_fin_from = None if fin_from is None else sides[fin_from]
                conn.rst_from = None if rst_from is None else sides[rst_from]
                out.append(ConnectionClosed(conn, time, packet, how))
        return out


def reassemble(segments: Iterable["TcpSegment"], **kwargs) -> Iterable[Event]:
    """Convenience: run a fresh :class:`TcpReassembler` over ``segments`` and yield every event."""
    return TcpReassembler(**kwargs).feed_many(segments)
