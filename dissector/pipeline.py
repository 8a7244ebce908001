"""Wires the stages together: packets → TCP segments → reassembled streams → frames → decoded frames.

The pipeline is a push machine (``Dissector.feed_packet``) so a live sniffer and a file reader drive the
same code; ``dissect_file`` is the pull-style wrapper for files. It yields ``FrameEvent`` and ``StreamEvent``
objects in capture order; analysis and output are later stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from . import codecs
from .capture import CapturedPacket, open_capture
from .commands import DecodedFrame, decode_frame, looks_like_frame, TYPE_NUMBERS
from .framing import DEFAULT_MAX_FRAME_SIZE, FrameSplitter, RawFrame, StreamNote
from .netlayers import TcpSegment, tcp_segment
from .reassembly import (Connection, ConnectionClosed, ConnectionOpened, Endpoint, StreamData, StreamGap,
                         TcpReassembler)

DEFAULT_PORTS = frozenset({6650, 6651})
TO_BROKER, TO_CLIENT, UNKNOWN_DIRECTION = "to_broker", "to_client", "unknown"

# Commands only a broker sends, and only a client sends: they tell the sides apart off the default ports.
_BROKER_ONLY = frozenset(TYPE_NUMBERS[n] for n in (
    "CONNECTED", "SEND_RECEIPT", "SEND_ERROR", "MESSAGE", "SUCCESS", "ERROR", "PRODUCER_SUCCESS",
    "PARTITIONED_METADATA_RESPONSE", "LOOKUP_RESPONSE", "CONSUMER_STATS_RESPONSE", "REACHED_END_OF_TOPIC",
    "GET_LAST_MESSAGE_ID_RESPONSE", "ACTIVE_CONSUMER_CHANGE", "GET_TOPICS_OF_NAMESPACE_RESPONSE",
    "GET_SCHEMA_RESPONSE", "AUTH_CHALLENGE", "ACK_RESPONSE", "GET_OR_CREATE_SCHEMA_RESPONSE",
    "TOPIC_MIGRATED"))
_CLIENT_ONLY = frozenset(TYPE_NUMBERS[n] for n in (
    "CONNECT", "SUBSCRIBE", "PRODUCER", "SEND", "ACK", "FLOW", "UNSUBSCRIBE", "LOOKUP", "PARTITIONED_METADATA",
    "CONSUMER_STATS", "SEEK", "GET_LAST_MESSAGE_ID", "GET_TOPICS_OF_NAMESPACE", "GET_SCHEMA", "AUTH_RESPONSE",
    "GET_OR_CREATE_SCHEMA", "REDELIVER_UNACKNOWLEDGED_MESSAGES"))
_DETECT_BUDGET = 64 * 1024  # bytes a non-Pulsar-port connection may take to show one good frame


@dataclass
class Options:
    ports: frozenset[int] = DEFAULT_PORTS
    detect: bool = False  # also look for Pulsar on connections off the Pulsar ports
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED


@dataclass(slots=True)
class FrameEvent:
    index: int  # 1-based frame number in the capture
    conn: Connection
    src: Endpoint
    dst: Endpoint
    direction: str
    time: float  # time of the packet that completed the frame
    first_time: float
    packet: int  # packet number that completed the frame
    first_packet: int
    stream_offset: int
    frame: DecodedFrame
    notes: dict = field(default_factory=dict)  # filled by analysis: answers, latency_ms, context ...
    request_type: str | None = None  # for a response: the type of the request it answers (analysis)


@dataclass(slots=True)
class StreamEvent:
    """Something other than a frame: a gap, skipped bytes, a foreign protocol, a connection opening."""

    kind: str  # GAP, SKIPPED, NOT_PULSAR, CONNECTION_OPENED, UNANSWERED, ... (expert.EVENT_SEVERITY lists them)
    time: float
    packet: int
    message: str
    conn: Connection | None = None
    src: Endpoint | None = None
    dst: Endpoint | None = None
    direction: str | None = None
    offset: int | None = None
    length: int | None = None
    details: dict = field(default_factory=dict)


class _ConnState:
    __slots__ = ("conn", "broker", "splitters", "on_port", "confirmed", "abandoned", "bytes_seen")

    def __init__(self, conn: Connection, broker: Endpoint | None, on_port: bool) -> None:
        self.conn = conn
        self.broker = broker
        self.splitters: dict[Endpoint, FrameSplitter] = {}
        self.on_port = on_port
        self.confirmed = on_port
        self.abandoned = False
        self.bytes_seen = 0


class Dissector:
    """Push packets or TCP segments in; get decoded frames and stream events out, in capture order."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self._ports = self.options.ports
        self._reassembler = TcpReassembler()
        self._conns: dict[int, _ConnState] = {}
        self._frame_index = 0
        self.last_time = 0.0
        self.last_packet = 0

    # -------------------------------------------------------------- input

    def feed_packet(self, packet: CapturedPacket) -> list:
        seg = tcp_segment(packet)
        if seg is None:
            return []
        return self.feed_segment(seg)

    def feed_segment(self, seg: TcpSegment) -> list:
        self.last_time, self.last_packet = seg.timestamp, seg.packet_index
        if not self.options.detect and seg.src_port not in self._ports and seg.dst_port not in self._ports:
            return []
        out: list = []
        for ev in self._reassembler.feed(seg):
            self._handle(ev, out)
        return out

    def finish(self) -> list:
        out: list = []
        for ev in self._reassembler.finish():
            self._handle(ev, out)
        for state in list(self._conns.values()):
            self._close_splitters(state, out, self.last_time, self.last_packet)
        self._conns.clear()
        return out

    # -------------------------------------------------------------- stages

    def _handle(self, ev, out: list) -> None:
        if type(ev) is StreamData:
            state = self._conns.get(ev.conn.id)
            if state is None or state.abandoned:
                return
            splitter = state.splitters.get(ev.sender) or self._new_splitter(state, ev.sender, ev.offset)
            for item in splitter.feed(ev.data, ev.timestamp, ev.packet_index):
                self._emit(state, ev.sender, item, out)
            if not state.confirmed:
                state.bytes_seen += len(ev.data)
                if state.bytes_seen > _DETECT_BUDGET:
                    state.abandoned = True
        elif type(ev) is StreamGap:
            state = self._conns.get(ev.conn.id)
            if state is None or state.abandoned:
                return
            if state.confirmed:
                out.append(StreamEvent("GAP", ev.timestamp, ev.packet_index,
                                       f"{ev.length} bytes missing from the capture ({ev.reason})",
                                       ev.conn, ev.sender, _peer(ev.conn, ev.sender),
                                       self._direction(state, ev.sender), ev.offset, ev.length,
                                       {"reason": ev.reason}))
            splitter = state.splitters.get(ev.sender) or self._new_splitter(state, ev.sender, ev.offset)
            for item in splitter.gap(ev.length, ev.timestamp, ev.packet_index):
                self._emit(state, ev.sender, item, out)
        elif type(ev) is ConnectionOpened:
            conn = ev.conn
            broker = conn.b if conn.b.port in self._ports else conn.a if conn.a.port in self._ports else None
            state = self._conns[conn.id] = _ConnState(conn, broker, broker is not None)
            if state.confirmed:
                out.append(self._opened_event(state, ev.timestamp, ev.packet_index))
        elif type(ev) is ConnectionClosed:
            state = self._conns.pop(ev.conn.id, None)
            if state is not None and not state.abandoned:
                self._close_splitters(state, out, ev.timestamp, ev.packet_index)
                if state.confirmed:
                    out.append(self._closed_event(state, ev))

    def _opened_event(self, state: _ConnState, time: float, packet: int) -> StreamEvent:
        conn = state.conn
        client = _peer(conn, state.broker) if state.broker is not None else conn.a
        broker = state.broker if state.broker is not None else conn.b
        how = "capture started mid-connection" if not conn.saw_syn else "SYN seen"
        return StreamEvent("CONNECTION_OPENED", time, packet, f"client {client} ↔ broker {broker} ({how})",
                           conn, client, broker, TO_BROKER if state.broker is not None else UNKNOWN_DIRECTION,
                           details={"client": str(client), "broker": str(broker), "mid_stream": not conn.saw_syn})

    def _closed_event(self, state: _ConnState, ev: ConnectionClosed) -> StreamEvent:
        conn = state.conn
        ends = {"fin": "closed (FIN)", "rst": "reset (RST)", "end_of_capture": "still open at the end of the capture",
                "reused": "replaced by a new connection on the same ports"}
        details = {"how": ev.how, "bytes_" + self._direction(state, conn.a): conn.bytes_from(conn.a),
                   "bytes_" + self._direction(state, conn.b): conn.bytes_from(conn.b)}
        closer = conn.first_fin_from if ev.how == "fin" else None
        if closer is not None and state.broker is not None:
            details["closed_by"] = "broker" if closer == state.broker else "client"
        message = f"connection {ends.get(ev.how, ev.how)}" + (f" by the {details['closed_by']}"
                                                              if "closed_by" in details else "")
        return StreamEvent("CONNECTION_CLOSED", ev.timestamp, ev.packet_index, message, conn, None, None, None,
                           details=details)

    def _new_splitter(self, state: _ConnState, sender: Endpoint, offset: int) -> FrameSplitter:
        synced = state.conn.saw_syn and offset == 0
        splitter = FrameSplitter(looks_like_frame, synced=synced, max_frame_size=self.options.max_frame_size,
                                 start_offset=offset)
        state.splitters[sender] = splitter
        return splitter

    def _close_splitters(self, state: _ConnState, out: list, time: float, packet: int) -> None:
        for sender, splitter in state.splitters.items():
            for item in splitter.finish(time, packet):
                self._emit(state, sender, item, out)

    def _emit(self, state: _ConnState, sender: Endpoint, item, out: list) -> None:
        conn = state.conn
        if type(item) is RawFrame:
            decoded = decode_frame(item.data, missing=item.missing, max_decompressed=self.options.max_decompressed)
            if not state.confirmed and (decoded.problems or decoded.command is None):
                return
            if state.broker is None and decoded.type_num is not None:
                if decoded.type_num in _BROKER_ONLY:
                    state.broker = sender
                elif decoded.type_num in _CLIENT_ONLY:
                    state.broker = _peer(conn, sender)
            if not state.confirmed:
                state.confirmed = True
                out.append(self._opened_event(state, item.first_time, item.first_packet))
            self._frame_index += 1
            out.append(FrameEvent(self._frame_index, conn, sender, _peer(conn, sender),
                                  self._direction(state, sender), item.timestamp, item.first_time,
                                  item.last_packet, item.first_packet, item.offset, decoded))
        elif state.confirmed:
            note: StreamNote = item
            out.append(StreamEvent(note.kind, note.timestamp, note.packet_index, note.message, conn, sender,
                                   _peer(conn, sender), self._direction(state, sender), note.offset,
                                   note.length, note.details))

    @staticmethod
    def _direction(state: _ConnState, sender: Endpoint) -> str:
        if state.broker is None:
            return UNKNOWN_DIRECTION
        return TO_CLIENT if sender == state.broker else TO_BROKER


def _peer(conn: Connection, sender: Endpoint) -> Endpoint:
    return conn.b if sender == conn.a else conn.a


def dissect_packets(packets: Iterable[CapturedPacket], options: Options | None = None, *,
                    dissector: Dissector | None = None) -> Iterator:
    """Decode packets from any source (a file reader, a live sniffer), then flush at the end."""
    dissector = dissector or Dissector(options)
    feed = dissector.feed_segment
    for packet in packets:
        seg = tcp_segment(packet)
        if seg is not None:
            yield from feed(seg)
    yield from dissector.finish()


def dissect_file(path, options: Options | None = None) -> Iterator:
    """Decode a capture file; raises capture.CaptureError when the file cannot be read at all."""
    with open_capture(path) as reader:
        dissector = Dissector(options)
        yield from dissect_packets(reader, dissector=dissector)
        for problem in reader.problems:
            yield StreamEvent("CAPTURE_NOTE", dissector.last_time, dissector.last_packet, problem)
        if reader.truncated:
            yield StreamEvent("CAPTURE_TRUNCATED", dissector.last_time, dissector.last_packet, reader.truncated)
