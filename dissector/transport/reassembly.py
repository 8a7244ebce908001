"""TCP reassembly: TcpSegment objects in, per-connection / per-direction byte-stream events out.

Input is any iterable of ``dissector.capture.netlayers.TcpSegment`` (file or live sniffer); this module only reads
their attributes, so it does not import the link/IP layer.

Output events, returned by :meth:`TcpReassembler.feed` / :meth:`TcpReassembler.finish`:

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
(``stats.bytes_before_start``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Iterable

from ..capture.netlayers import ACK, FIN, RST, SYN

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

_MASK = 0xFFFFFFFF
_SYN_FIN_RST = SYN | FIN | RST


def _sdiff(a: int, b: int) -> int:
    """Signed 32-bit difference a - b."""
    d = (a - b) & _MASK
    return d - 0x100000000 if d & 0x80000000 else d


# --------------------------------------------------------------------------------------------------- model


@dataclass(slots=True, frozen=True)
class Endpoint:
    ip: str
    port: int

    def __str__(self) -> str:
        if ":" in self.ip:
            return f"[{self.ip}]:{self.port}"
        return f"{self.ip}:{self.port}"


class Connection:
    """One TCP connection (4-tuple + generation).

    ``a`` is the client (SYN sender) when the handshake was seen, else the sender of the first segment seen.
    Identity-compared; the per-direction state lives in private attributes.
    """

    __slots__ = (
        "id", "a", "b", "saw_syn", "mid_stream", "first_time", "first_packet_index", "last_time",
        "last_packet_index", "segments", "closed", "close_how", "first_fin_from", "rst_from",
        "_ha", "_hb", "_buffering", "_slow", "_rst", "_rst_info", "_closing_pkt", "_closing_time",
    )  # fmt: skip

    def __init__(self, cid: int, a: Endpoint, b: Endpoint, saw_syn: bool, first_time: float, first_index: int):
        self.id = cid
        self.a = a
        self.b = b
        self.saw_syn = saw_syn
        self.mid_stream = not saw_syn
        self.first_time = first_time
        self.first_packet_index = first_index
        self.last_time = first_time
        self.last_packet_index = first_index
        self.segments = 0
        self.closed = False
        self.close_how: str | None = None
        self.first_fin_from: Endpoint | None = None  # the side that started the close, in capture order
        self.rst_from: Endpoint | None = None  # the side that reset the connection
        self._ha: _Half = None  # type: ignore[assignment]  # data sent by a
        self._hb: _Half = None  # type: ignore[assignment]  # data sent by b
        self._buffering = 0  # number of directions with out-of-order data buffered
        self._slow = False  # anything that forbids the fast path (buffering, FIN, RST)
        self._rst = False
        self._rst_info: tuple | None = None
        self._closing_pkt = -1  # global packet counter when the connection started closing
        self._closing_time = 0.0

    # -- read-only views of the per-direction state
    def bytes_from(self, sender: Endpoint) -> int:
        """Stream bytes accounted for (delivered + gaps) in the direction sent by ``sender``."""
        return self._half_of(sender).next_off

    def isn_of(self, sender: Endpoint) -> int | None:
        return self._half_of(sender).isn

    def _half_of(self, sender: Endpoint) -> "_Half":
        if sender == self.a:
            return self._ha
        if sender == self.b:
            return self._hb
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
    reason: str  # "missing segment" | "snaplen" | "buffer limit" | "capture ended" | "connection closed"

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(slots=True)
class ConnectionClosed:
    conn: Connection
    timestamp: float
    packet_index: int
    how: str  # "fin" | "rst" | "end_of_capture" | "reused" (a new SYN replaced it)


Event = ConnectionOpened | StreamData | StreamGap | ConnectionClosed


@dataclass(slots=True)
class ReassemblyStats:
    segments: int = 0
    connections: int = 0
    connections_mid_stream: int = 0
    delivered_bytes: int = 0
    retransmitted_segments: int = 0  # carried no new byte
    retransmitted_bytes: int = 0  # bytes seen again (full or partial retransmissions)
    out_of_order_segments: int = 0  # arrived beyond a hole
    overlap_bytes: int = 0  # bytes overlapping data already buffered or delivered (and comparable)
    inconsistent_overlaps: int = 0  # overlaps whose bytes differ from the first copy (first copy kept)
    keepalives: int = 0
    zero_window_probes: int = 0
    syn_retransmissions: int = 0
    gaps: int = 0
    gap_bytes: int = 0
    snaplen_gaps: int = 0
    buffer_limit_gaps: int = 0
    bytes_before_start: int = 0  # mid-stream: bytes just before the first byte seen, ignored
    bytes_after_fin: int = 0  # data beyond the FIN, ignored
    rst_payload_bytes: int = 0  # payload carried by RST segments, ignored
    segments_after_close: int = 0  # segments of a forgotten connection (final ACKs, retransmissions)
    ignored_segments: int = 0  # pure ACKs of unknown connections (they open nothing)
    max_buffered_bytes: int = 0  # high-water mark of one direction's out-of-order buffer

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# ---------------------------------------------------------------------------------------------- internals


class _Piece:
    """Buffered out-of-order range [off, end): data bytes, or None for a known-missing range (snaplen)."""

    __slots__ = ("off", "end", "data", "ts", "idx", "arrival", "reason")

    def __init__(self, off, end, data, ts, idx, arrival, reason):
        self.off = off
        self.end = end
        self.data = data
        self.ts = ts
        self.idx = idx
        self.arrival = arrival
        self.reason = reason


def _piece_off(p: _Piece) -> int:
    return p.off


class _Half:
    """One direction of a connection (data sent by ``ep``)."""

    __slots__ = (
        "conn", "ep", "key", "started", "isn", "next_seq", "next_off", "buf", "buf_bytes", "hole_seg",
        "hole_time", "fin_off", "finished", "last_data", "last_off", "window",
    )  # fmt: skip

    def __init__(self, conn: Connection, ep: Endpoint, key: tuple):
        self.conn = conn
        self.ep = ep
        self.key = key
        self.started = False
        self.isn: int | None = None
        self.next_seq = -1  # never equals a real sequence number until started
        self.next_off = 0
        self.buf: list[_Piece] = []
        self.buf_bytes = 0
        self.hole_seg = 0  # conn.segments when the current hole became visible
        self.hole_time = 0.0
        self.fin_off: int | None = None
        self.finished = False
        self.last_data: bytes | None = None  # last delivered payload (to compare retransmissions against)
        self.last_off = 0
        self.window = -1  # last window advertised by this sender (for the peer's zero-window probes)

    def start(self, seq: int) -> None:
        self.started = True
        self.next_seq = seq & _MASK
        self.next_off = 0

    def settled(self) -> bool:
        return not self.buf


# ---------------------------------------------------------------------------------------------- reassembler


class TcpReassembler:
    """Feed TcpSegments in capture order; get events in stream order.

    Parameters:
        max_buffered_bytes_per_direction: cap of out-of-order bytes held per direction; beyond it the first
            hole is declared lost.
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

    def __init__(
        self,
        *,
        max_buffered_bytes_per_direction: int = 8 * 2**20,
        ooo_wait_packets: int = 1000,
        hole_timeout: float = 10.0,
        close_wait_packets: int = 1000,
        sweep_every: int = 512,
        tombstone_seconds: float = 240.0,
        max_tombstones: int = 65536,
        max_connections: int = 65536,
    ):
        self.max_buffered = max_buffered_bytes_per_direction
        self.ooo_wait_packets = ooo_wait_packets
        self.hole_timeout = hole_timeout
        self.close_wait_packets = close_wait_packets
        self.sweep_every = max(1, sweep_every)
        self.tombstone_seconds = tombstone_seconds
        self.max_tombstones = max_tombstones
        self.max_connections = max(1, max_connections)
        self._stats = ReassemblyStats()
        self._delivered = 0  # kept outside the stats object for the fast path
        self._halves: dict[tuple, _Half] = {}  # directed 4-tuple (sender first) -> that direction
        self._conns: dict[int, Connection] = {}  # open connections by id (insertion = id order)
        self._pending: dict[int, Connection] = {}  # open connections with holes or closing
        self._tombs: dict[tuple, tuple] = {}  # directed 4-tuple -> (end_seq | None, isn | None, time)
        self._next_id = 1
        self._npackets = 0
        self._next_sweep = self.sweep_every
        self._now = 0.0

    # ------------------------------------------------------------------------------------------ public

    @property
    def stats(self) -> ReassemblyStats:
        """Counters (retransmitted / out-of-order / overlapping bytes, gaps, ...)."""
        st = self._stats
        st.segments = self._npackets
        st.delivered_bytes = self._delivered
        return st

    @property
    def open_connections(self) -> list[Connection]:
        return list(self._conns.values())

    def feed(self, seg: "TcpSegment") -> list[Event]:
        """Process one segment; returns the events it caused, in stream order."""
        self._npackets += 1
        key = (seg.src_ip, seg.src_port, seg.dst_ip, seg.dst_port)
        half = self._halves.get(key)
        if half is not None:
            conn = half.conn
            if (
                not conn._slow
                and seg.seq == half.next_seq
                and not (seg.flags & _SYN_FIN_RST)
                and not seg.missing_tail
            ):
                # fast path: in-order segment, nothing buffered, no FIN/RST in the connection
                conn.segments += 1
                conn.last_time = ts = seg.timestamp
                conn.last_packet_index = idx = seg.packet_index
                half.window = seg.window
                payload = seg.payload
                if not payload:  # pure ACK / window update
                    if self._npackets >= self._next_sweep:
                        out = []
                        self._now = max(self._now, ts)
                        self._sweep(out)
                        return out
                    return []
                n = len(payload)
                off = half.next_off
                half.next_off = off + n
                half.next_seq = (half.next_seq + n) & _MASK
                half.last_data = payload
                half.last_off = off
                self._delivered += n
                if n == 1:
                    self._check_zero_window_probe(half)
                out: list[Event] = [StreamData(conn, half.ep, payload, off, ts, idx)]
                if self._npackets >= self._next_sweep:
                    self._now = max(self._now, ts)
                    self._sweep(out)
                return out
        out = []
        self._slow_path(seg, key, half, out)
        if self._npackets >= self._next_sweep:
            self._sweep(out)
        return out

    def feed_many(self, segments: Iterable["TcpSegment"]) -> Iterable[Event]:
        """Feed every segment then finish; yields all events."""
        for seg in segments:
            yield from self.feed(seg)
        yield from self.finish()

    def expire(self, now: float | None = None) -> list[Event]:
        """Apply the time-based policies now (``now`` = capture/wall time; default: last timestamp seen)."""
        out: list[Event] = []
        if now is not None and now > self._now:
            self._now = now
        self._sweep(out)
        return out

    def finish(self) -> list[Event]:
        """End of capture: declare remaining holes lost, deliver buffered data, close every connection."""
        out: list[Event] = []
        for conn in list(self._conns.values()):
            if conn._rst:
                how = "rst"
            elif conn._ha.fin_off is not None or conn._hb.fin_off is not None:
                how = "fin"
            else:
                how = "end_of_capture"
            self._close(conn, how, conn.last_time, conn.last_packet_index, "capture ended", out)
        self._tombs.clear()
        return out

    # ------------------------------------------------------------------------------------------ slow path

    def _slow_path(self, seg, key, half: _Half | None, out: list) -> None:
        st = self._stats
        flags = seg.flags
        ts = seg.timestamp
        idx = seg.packet_index
        if ts > self._now:
            self._now = ts
        syn = flags & SYN
        is_ack = flags & ACK
        seq = seg.seq
        payload = seg.payload
        missing = seg.missing_tail

        if half is not None and syn:
            # a SYN on a known 4-tuple: retransmission of the same SYN, or a new connection (port reuse)
            conn = half.conn
            ended = conn._rst or conn._ha.fin_off is not None or conn._hb.fin_off is not None
            if half.isn == seq and not ended:
                pass  # retransmitted SYN / SYN-ACK, handled below
            elif is_ack:
                if half.started:  # SYN-ACK with another ISN: answer to a SYN we did not capture
                    self._close(conn, "reused", ts, idx, "connection closed", out)
                    half = None
            elif ended or half.started or conn._ha.started or conn._hb.started:
                self._close(conn, "reused", ts, idx, "connection closed", out)
                half = None

        if half is None:
            tomb = self._tombs.get(key)
            if tomb is not None:
                end_seq, old_isn, _t = tomb
                if syn and not is_ack:
                    pass  # new connection on a recently closed 4-tuple
                elif syn and (old_isn is None or seq != old_isn):
                    pass  # SYN-ACK of a new connection whose SYN was not captured
                elif not payload and not missing:
                    st.segments_after_close += 1
                    return
                elif end_seq is not None and _sdiff((seq + len(payload) + missing) & _MASK, end_seq) <= 0:
                    st.segments_after_close += 1
                    st.retransmitted_bytes += len(payload) + missing
                    return
                elif flags & RST:
                    st.segments_after_close += 1
                    return
                self._drop_tomb(key)
            elif not syn and not payload and not missing and not (flags & FIN):
                # pure ACK / RST of a connection we know nothing about: a lone ACK opens nothing
                st.ignored_segments += 1
                return
            half = self._open(seg, key, out)

        conn = half.conn
        conn.segments += 1
        conn.last_time = ts
        conn.last_packet_index = idx
        half.window = seg.window
        peer = conn._hb if half is conn._ha else conn._ha

        if flags & RST:
            self._on_rst(half, peer, seg, out)
            return

        data_seq = seq
        if syn:
            if not half.started:
                half.start((seq + 1) & _MASK)
                half.isn = seq
                if not conn.saw_syn:
                    conn.saw_syn = True
            elif half.isn == seq:
                st.syn_retransmissions += 1
            data_seq = (seq + 1) & _MASK
            if is_ack and not peer.started:
                # SYN-ACK whose SYN was not captured: the ACK tells where the client's stream starts
                peer.start(seg.ack)
                peer.isn = (seg.ack - 1) & _MASK
        elif not half.started:
            if payload or missing or (flags & FIN):
                half.start(seq)
            else:
                self._after_segment(conn, out)
                return

        if payload or missing or (flags & FIN):
            self._data(half, data_seq, payload, missing, bool(flags & FIN), ts, idx, out)
        elif not syn and _sdiff(seq, half.next_seq) == -1 and half.fin_off is None:
            st.keepalives += 1  # seq = next - 1, no data
        self._after_segment(conn, out)

    def _open(self, seg, key, out: list) -> _Half:
        st = self._stats
        flags = seg.flags
        src = Endpoint(seg.src_ip, seg.src_port)
        dst = Endpoint(seg.dst_ip, seg.dst_port)
        syn = bool(flags & SYN)
        rkey = (seg.dst_ip, seg.dst_port, seg.src_ip, seg.src_port)
        self._drop_tomb(rkey)
        if syn and (flags & ACK):
            a, b, ka, kb = dst, src, rkey, key  # SYN-ACK: the receiver is the client
        else:
            a, b, ka, kb = src, dst, key, rkey
        if len(self._conns) >= self.max_connections:
            oldest = next(iter(self._conns.values()))
            self._close(oldest, "evicted", seg.timestamp, seg.packet_index, "connection limit", out)
        conn = Connection(self._next_id, a, b, syn, seg.timestamp, seg.packet_index)
        self._next_id += 1
        conn._ha = ha = _Half(conn, a, ka)
        conn._hb = hb = _Half(conn, b, kb)
        self._halves[ka] = ha
        self._halves[kb] = hb
        self._conns[conn.id] = conn
        st.connections += 1
        if not syn:
            st.connections_mid_stream += 1
        out.append(ConnectionOpened(conn, seg.timestamp, seg.packet_index, not syn))
        return ha if ka == key else hb

    def _check_zero_window_probe(self, half: _Half) -> None:
        conn = half.conn
        peer = conn._hb if half is conn._ha else conn._ha
        if peer.window == 0:
            self._stats.zero_window_probes += 1

    # ------------------------------------------------------------------------------------------ data

    def _data(self, half: _Half, seq: int, payload: bytes, missing: int, fin: bool, ts, idx, out) -> None:
        st = self._stats
        conn = half.conn
        n = len(payload)
        total = n + missing
        next_off = half.next_off
        off = next_off + _sdiff(seq, half.next_seq)
        end = off + total

        if fin:
            if half.fin_off is None:
                half.fin_off = end
                conn._slow = True
                if conn.first_fin_from is None:
                    conn.first_fin_from = half.ep
                # anything buffered beyond the FIN can never be part of the stream
                if half.buf and half.buf[-1].end > end:
                    self._trim_buffer_after(half, end)
            elif end != half.fin_off:
                pass  # a second FIN at another position: keep the first one
        fin_off = half.fin_off
        if fin_off is not None and end > fin_off:
            cut = end - max(off, fin_off)
            st.bytes_after_fin += cut
            if off >= fin_off:
                total = 0
            else:
                keep = fin_off - off
                if keep <= n:
                    payload = payload[:keep]
                    n = keep
                    missing = 0
                else:
                    missing = keep - n
                total = keep
            end = off + total

        if total == 0:
            if not fin and off == next_off - 1:
                st.keepalives += 1
            self._fin_marker(half, ts, idx)
            self._check_fin_reached(half)
            return

        if end <= next_off:
            # nothing new: retransmission, keep-alive, or bytes before a mid-stream start
            if off == next_off - 1 and total == 1:
                peer = conn._hb if half is conn._ha else conn._ha
                if peer.window == 0:  # a zero-window probe sent again
                    st.zero_window_probes += 1
                    st.retransmitted_bytes += 1
                else:
                    st.keepalives += 1
            elif off < 0 and half.isn is None:
                before = min(end, 0) - off
                st.bytes_before_start += before
                if total > before:
                    st.retransmitted_bytes += total - before
                    st.retransmitted_segments += 1
            else:
                st.retransmitted_bytes += total
                st.retransmitted_segments += 1
            if n:
                self._compare_delivered(half, off, payload)
            self._fin_marker(half, ts, idx)
            self._check_fin_reached(half)
            return

        if off < next_off:
            # partial retransmission / overlap with delivered bytes: keep only the new bytes
            k = next_off - off
            if off < 0 and half.isn is None:
                before = min(next_off, 0) - off
                st.bytes_before_start += before
                st.retransmitted_bytes += k - before
            else:
                st.retransmitted_bytes += k
            if n:
                self._compare_delivered(half, off, payload[:k])
            if k < n:
                payload = payload[k:]
                n -= k
            else:
                missing -= k - n
                payload = b""
                n = 0
            off = next_off

        if off == next_off and not half.buf:
            # in order, nothing buffered: deliver directly
            if n:
                self._deliver(half, payload, ts, idx, out)
            if missing:
                self._gap(half, missing, ts, idx, "snaplen", out)
            if n == 1:
                self._check_zero_window_probe(half)
            self._fin_marker(half, ts, idx)
            self._check_fin_reached(half)
            return

        # out of order (or filling a hole while other pieces are buffered): buffer first-copy-wins, then drain
        if off > next_off:
            st.out_of_order_segments += 1
        was_empty = not half.buf
        arrival = conn.segments
        if n:
            self._insert(half, off, off + n, payload, ts, idx, arrival, None)
        if missing:
            self._insert(half, off + n, end, None, ts, idx, arrival, "snaplen")
        if was_empty and half.buf:
            conn._buffering += 1
            conn._slow = True
            half.hole_seg = arrival
            half.hole_time = ts
            self._pending[conn.id] = conn
        self._drain(half, ts, idx, out)
        if half.buf_bytes > st.max_buffered_bytes:
            st.max_buffered_bytes = half.buf_bytes
        while half.buf and half.buf_bytes > self.max_buffered:
            st.buffer_limit_gaps += 1
            self._declare_hole(half, "buffer limit", ts, idx, out)
        self._fin_marker(half, ts, idx)
        self._check_fin_reached(half)

    def _fin_marker(self, half: _Half, ts, idx) -> None:
        """A FIN seen beyond the delivered bytes is a hole too: mark it with an empty piece at the FIN."""
        fin_off = half.fin_off
        if fin_off is None or fin_off <= half.next_off:
            return
        buf = half.buf
        if buf and buf[-1].end >= fin_off:
            return
        conn = half.conn
        if not buf:
            conn._buffering += 1
            conn._slow = True
            half.hole_seg = conn.segments
            half.hole_time = ts
            self._pending[conn.id] = conn
        buf.append(_Piece(fin_off, fin_off, b"", ts, idx, conn.segments, None))

    def _compare_delivered(self, half: _Half, off: int, data: bytes) -> None:
        """Compare retransmitted bytes with the last delivered payload, where they overlap it."""
        last = half.last_data
        if last is None:
            return
        lo = max(off, half.last_off)
        hi = min(off + len(data), half.last_off + len(last))
        if hi <= lo:
            return
        st = self._stats
        st.overlap_bytes += hi - lo
        if data[lo - off : hi - off] != last[lo - half.last_off : hi - half.last_off]:
            st.inconsistent_overlaps += 1

    def _insert(self, half: _Half, off: int, end: int, data, ts, idx, arrival, reason) -> None:
        """Insert [off, end) into the buffer, keeping only the parts not already buffered (first copy wins)."""
        buf = half.buf
        st = self._stats
        i = bisect_right(buf, off, key=_piece_off) - 1
        if i < 0:
            i = 0
        new: list[_Piece] = []
        cur = off
        j = i
        nbuf = len(buf)
        while j < nbuf and cur < end:
            p = buf[j]
            if p.off >= end:
                break
            if p.end <= cur:
                j += 1
                continue
            if p.off > cur:
                new.append(self._make_piece(off, cur, p.off, data, ts, idx, arrival, reason))
            lo = max(cur, p.off)
            hi = min(end, p.end)
            if hi > lo:
                if data is not None and p.data is not None:
                    st.overlap_bytes += hi - lo
                    if data[lo - off : hi - off] != p.data[lo - p.off : hi - p.off]:
                        st.inconsistent_overlaps += 1
                st.retransmitted_bytes += hi - lo
            cur = max(cur, p.end)
            j += 1
        if cur < end:
            new.append(self._make_piece(off, cur, end, data, ts, idx, arrival, reason))
        for p in new:
            k = bisect_left(buf, p.off, key=_piece_off)
            buf.insert(k, p)
            if p.data is not None:
                half.buf_bytes += p.end - p.off

    @staticmethod
    def _make_piece(off, lo, hi, data, ts, idx, arrival, reason) -> _Piece:
        if data is not None and (lo != off or hi - lo != len(data)):
            data = data[lo - off : hi - off]
        return _Piece(lo, hi, data, ts, idx, arrival, reason)

    def _trim_buffer_after(self, half: _Half, limit: int) -> None:
        buf = half.buf
        st = self._stats
        while buf and buf[-1].end > limit:
            p = buf[-1]
            if p.off >= limit:
                buf.pop()
                if p.data is not None:
                    half.buf_bytes -= p.end - p.off
                    st.bytes_after_fin += p.end - p.off
            else:
                cut = p.end - limit
                if p.data is not None:
                    p.data = p.data[: limit - p.off]
                    half.buf_bytes -= cut
                    st.bytes_after_fin += cut
                p.end = limit
        if not buf:
            self._buffer_emptied(half)

    def _deliver(self, half: _Half, data: bytes, ts, idx, out: list) -> None:
        off = half.next_off
        n = len(data)
        half.next_off = off + n
        half.next_seq = (half.next_seq + n) & _MASK
        half.last_data = data
        half.last_off = off
        self._delivered += n
        out.append(StreamData(half.conn, half.ep, data, off, ts, idx))

    def _gap(self, half: _Half, length: int, ts, idx, reason: str, out: list) -> None:
        st = self._stats
        off = half.next_off
        half.next_off = off + length
        half.next_seq = (half.next_seq + length) & _MASK
        half.last_data = None
        st.gaps += 1
        st.gap_bytes += length
        if reason == "snaplen":
            st.snaplen_gaps += 1
        out.append(StreamGap(half.conn, half.ep, off, length, ts, idx, reason))

    def _drain(self, half: _Half, ts, idx, out: list) -> None:
        """Deliver the buffered pieces that are now in order."""
        buf = half.buf
        if not buf or buf[0].off > half.next_off:
            return
        k = 0
        nbuf = len(buf)
        while k < nbuf:
            p = buf[k]
            next_off = half.next_off
            if p.off > next_off:
                break
            k += 1
            if p.data is not None:
                half.buf_bytes -= p.end - p.off
            if p.end <= next_off:
                continue
            if p.data is None:
                self._gap(half, p.end - next_off, ts, idx, p.reason or "missing segment", out)
            else:
                data = p.data if p.off == next_off else p.data[next_off - p.off :]
                self._deliver(half, data, ts, idx, out)
        del buf[:k]
        if not buf:
            self._buffer_emptied(half)
        else:
            # the remaining hole has been visible since the earliest arrival among the pieces beyond it
            half.hole_seg = min(p.arrival for p in buf)
            half.hole_time = min(p.ts for p in buf)

    def _buffer_emptied(self, half: _Half) -> None:
        conn = half.conn
        half.buf_bytes = 0
        conn._buffering -= 1
        self._refresh(conn)

    def _refresh(self, conn: Connection) -> None:
        conn._slow = bool(
            conn._buffering or conn._rst or conn._ha.fin_off is not None or conn._hb.fin_off is not None
        )
        if not conn._buffering and conn._closing_pkt < 0:
            self._pending.pop(conn.id, None)

    def _declare_hole(self, half: _Half, reason: str, ts, idx, out: list) -> None:
        """The hole before the first buffered piece is permanent: report it and deliver what follows."""
        first = half.buf[0]
        length = first.off - half.next_off
        if length > 0:
            self._gap(half, length, ts, idx, reason, out)
        self._drain(half, ts, idx, out)

    def _check_fin_reached(self, half: _Half) -> None:
        if half.fin_off is not None and not half.finished and half.next_off >= half.fin_off and not half.buf:
            half.finished = True

    # ------------------------------------------------------------------------------------------ close

    def _on_rst(self, half: _Half, peer: _Half, seg, out: list) -> None:
        conn = half.conn
        if seg.payload:
            self._stats.rst_payload_bytes += len(seg.payload)
        if not conn._rst:
            conn._rst = True
            conn._rst_info = (half, seg.seq, seg.ack if seg.flags & ACK else None, seg.timestamp, seg.packet_index)
            if conn.rst_from is None:
                conn.rst_from = half.ep
            conn._slow = True
            if conn._closing_pkt < 0:
                conn._closing_pkt = self._npackets
                conn._closing_time = seg.timestamp
        self._after_segment(conn, out)

    def _rst_settled(self, conn: Connection) -> bool:
        half, rseq, rack, _ts, _idx = conn._rst_info
        peer = conn._hb if half is conn._ha else conn._ha
        if half.buf or peer.buf:
            return False
        if half.started:
            expect = (half.next_seq + (1 if half.fin_off is not None else 0)) & _MASK
            if _sdiff(rseq, expect) > 0:
                return False  # the RST sender's last data has not been seen yet
        if rack is not None and peer.started:
            expect = (peer.next_seq + (1 if peer.fin_off is not None else 0)) & _MASK
            if _sdiff(rack, expect) > 0:
                return False  # the RST acknowledges peer data not seen yet
        return True

    def _after_segment(self, conn: Connection, out: list) -> None:
        """Close the connection when its streams are complete; apply the per-connection hole policy."""
        if conn.closed:
            return
        if conn._buffering:
            wait = self.ooo_wait_packets
            for h in (conn._ha, conn._hb):
                while h.buf and conn.segments - h.hole_seg > wait:
                    self._declare_hole(h, "missing segment", conn.last_time, conn.last_packet_index, out)
                    self._check_fin_reached(h)
        ha, hb = conn._ha, conn._hb
        if conn._rst:
            if self._rst_settled(conn):
                self._close(conn, "rst", conn.last_time, conn.last_packet_index, "connection closed", out)
            else:
                self._pending[conn.id] = conn
            return
        if ha.fin_off is not None and hb.fin_off is not None:
            self._check_fin_reached(ha)
            self._check_fin_reached(hb)
            if ha.finished and hb.finished:
                self._close(conn, "fin", conn.last_time, conn.last_packet_index, "connection closed", out)
                return
            if conn._closing_pkt < 0:
                conn._closing_pkt = self._npackets
                conn._closing_time = conn.last_time
            self._pending[conn.id] = conn
        self._refresh(conn)

    def _close(self, conn: Connection, how: str, ts, idx, reason: str, out: list) -> None:
        """Flush both directions (holes become gaps), emit ConnectionClosed and forget the connection."""
        if conn.closed:
            return
        for h in (conn._ha, conn._hb):
            while h.buf:
                self._declare_hole(h, reason, ts, idx, out)
            if h.fin_off is not None and h.next_off < h.fin_off and h.started:
                # bytes before the FIN never seen at all
                self._gap(h, h.fin_off - h.next_off, ts, idx, reason, out)
        conn.closed = True
        conn.close_how = how
        self._conns.pop(conn.id, None)
        self._pending.pop(conn.id, None)
        now = max(self._now, ts)
        for h in (conn._ha, conn._hb):
            if self._halves.get(h.key) is h:
                del self._halves[h.key]
            end_seq = None
            if h.started:
                end_seq = (h.next_seq + (1 if h.fin_off is not None else 0)) & _MASK
            self._tombs[h.key] = (end_seq, h.isn, now)
        if len(self._tombs) > self.max_tombstones:
            self._prune_tombs(force=True)
        out.append(ConnectionClosed(conn, ts, idx, how))

    def _drop_tomb(self, key) -> None:
        if self._tombs:
            self._tombs.pop(key, None)

    def _prune_tombs(self, force: bool = False) -> None:
        tombs = self._tombs
        limit = self._now - self.tombstone_seconds
        while tombs:
            k = next(iter(tombs))
            if tombs[k][2] < limit or (force and len(tombs) > self.max_tombstones):
                del tombs[k]
            else:
                break

    # ------------------------------------------------------------------------------------------ sweep

    def _sweep(self, out: list) -> None:
        """Time / global-packet based policies for connections with holes or pending closes."""
        self._next_sweep = self._npackets + self.sweep_every
        now = self._now
        if self._tombs:
            self._prune_tombs()
        if not self._pending:
            return
        for conn in list(self._pending.values()):
            if conn.closed:
                self._pending.pop(conn.id, None)
                continue
            ts, idx = conn.last_time, conn.last_packet_index
            for h in (conn._ha, conn._hb):
                while h.buf and now - h.hole_time > self.hole_timeout:
                    self._declare_hole(h, "missing segment", ts, idx, out)
                    self._check_fin_reached(h)
            if conn._closing_pkt >= 0 and (
                self._npackets - conn._closing_pkt > self.close_wait_packets
                or now - conn._closing_time > self.hole_timeout
            ):
                how = "rst" if conn._rst else "fin"
                self._close(conn, how, conn.last_time, conn.last_packet_index, "connection closed", out)
                continue
            self._after_segment(conn, out)


def reassemble(segments: Iterable["TcpSegment"], **kwargs) -> Iterable[Event]:
    """Convenience: run a fresh :class:`TcpReassembler` over ``segments`` and yield every event."""
    return TcpReassembler(**kwargs).feed_many(segments)
