"""Wires the stages together: packets → TCP segments → reassembled streams → PDUs → decoded frames.

The pipeline is a push machine (``Dissector.feed_packet`` / ``feed_segment`` / ``tick``) so a live sniffer
and a file reader drive the same code; ``dissect_file`` is the pull-style wrapper for files. It yields
``model.Frame`` and ``model.Event`` values in capture order; analysis and output are later stages.

It knows no protocol: which protocol a connection speaks comes from the server port (or, with ``detect``,
from the first PDU a protocol's decoder accepts), and everything else from that protocol's declaration.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from . import protocols
from .capture.files import CapturedPacket, open_capture
from .capture.netlayers import TcpSegment, tcp_segment
from .model import TO_CLIENT, UNKNOWN_DIRECTION, Decoded, Event, Frame, towards
from .options import Options
from .problems import Finding
from .protocols.base import ProtocolSpec
from .transport.reassembly import (Connection, ConnectionClosed, ConnectionOpened, Endpoint, StreamData, StreamGap,
                                   TcpReassembler)
from .transport.splitter import PduSplitter, RawFrame, StreamNote


class _Candidate:
    """One protocol's view of a connection: its splitters, one per direction."""

    __slots__ = ("protocol", "splitters")

    def __init__(self, protocol: ProtocolSpec) -> None:
        self.protocol = protocol
        self.splitters: dict[Endpoint, PduSplitter] = {}


class _ConnState:
    __slots__ = ("conn", "server", "server_role", "candidates", "confirmed", "abandoned", "bytes_seen", "opened",
                 "addresses")

    def __init__(self, conn: Connection, candidates: list[_Candidate], server: Endpoint | None,
                 server_role: str | None) -> None:
        self.conn = conn
        self.server = server  # the server's endpoint, once known
        self.server_role = server_role
        self.candidates = candidates  # one when on a protocol's port; every protocol while detecting
        self.confirmed = server is not None  # on a port: yes; detecting: once a PDU proves the protocol
        self.abandoned = False
        self.bytes_seen = 0
        self.addresses: dict[Endpoint, tuple[str, str]] = {}  # sender -> (src, dst) as text, made once

    @property
    def protocol(self) -> ProtocolSpec:
        return self.candidates[0].protocol


class Dissector:
    """Push packets, TCP segments or clock ticks in; get decoded frames and events out, in capture order."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options = options or Options()
        self._protocols = protocols.select(options.protocols)
        # server port -> (protocol, role of the server there); extra ports belong to the first protocol
        self._ports: dict[int, tuple[ProtocolSpec, str]] = {}
        for protocol in self._protocols:
            for port, role in protocol.ports.items():
                self._ports.setdefault(port, (protocol, role))
        first = self._protocols[0]
        for port in options.ports:
            self._ports.setdefault(port, (first, first.default_server_role))
        self._reassembler = TcpReassembler(
            max_buffered_bytes_per_direction=options.max_buffered_per_direction,
            ooo_wait_packets=options.ooo_wait_packets, hole_timeout=options.hole_timeout,
            close_wait_packets=options.close_wait_packets, max_connections=options.max_connections)
        self._conns: dict[int, _ConnState] = {}
        self.other_tcp = OtherTraffic()  # TCP off the protocols' ports: to say what a capture held instead
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
            self.other_tcp.add(seg)
            return []
        out: list = []
        for ev in self._reassembler.feed(seg):
            self._handle(ev, out)
        return out

    def tick(self, now: float) -> list:
        """The clock moved to ``now`` (a packet's time, or the wall clock while a live link is idle): apply the
        time-based expiries (lost segments, connections closing) without waiting for the next packet."""
        out: list = []
        for ev in self._reassembler.expire(now):
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
        kind = type(ev)
        if kind is StreamData:
            state = self._conns.get(ev.conn.id)
            if state is None or state.abandoned:
                return
            for candidate in state.candidates:
                splitter = candidate.splitters.get(ev.sender) or self._new_splitter(state, candidate, ev.sender,
                                                                                    ev.offset)
                for item in splitter.feed(ev.data, ev.timestamp, ev.packet_index):
                    self._emit(state, candidate, ev.sender, item, out)
            if not state.confirmed:
                state.bytes_seen += len(ev.data)
                if state.bytes_seen > self.options.detect_budget:
                    state.abandoned = True
        elif kind is StreamGap:
            state = self._conns.get(ev.conn.id)
            if state is None or state.abandoned:
                return
            if state.confirmed:
                out.append(Event("GAP", ev.timestamp, ev.packet_index, ev.conn.id, str(ev.sender),
                                 str(_peer(ev.conn, ev.sender)), self._direction(state, ev.sender), ev.offset,
                                 ev.length, {"reason": ev.reason}))
            for candidate in state.candidates:
                splitter = candidate.splitters.get(ev.sender) or self._new_splitter(state, candidate, ev.sender,
                                                                                    ev.offset)
                for item in splitter.gap(ev.length, ev.timestamp, ev.packet_index):
                    self._emit(state, candidate, ev.sender, item, out)
        elif kind is ConnectionOpened:
            conn = ev.conn
            on_port = self._ports.get(conn.b.port) or self._ports.get(conn.a.port)
            if on_port is not None:
                protocol, role = on_port
                server = conn.b if conn.b.port in self._ports else conn.a
                state = _ConnState(conn, [_Candidate(protocol)], server, role)
            else:
                state = _ConnState(conn, [_Candidate(p) for p in self._protocols], None, None)
            self._conns[conn.id] = state
            if state.confirmed:
                out.append(self._opened_event(state, ev.timestamp, ev.packet_index))
        elif kind is ConnectionClosed:
            state = self._conns.pop(ev.conn.id, None)
            if state is not None and not state.abandoned:
                self._close_splitters(state, out, ev.timestamp, ev.packet_index, ev.how,
                                      self._closer_role(state, ev))
                if state.confirmed:
                    out.append(self._closed_event(state, ev))

    def _opened_event(self, state: _ConnState, time: float, packet: int) -> Event:
        conn = state.conn
        server = state.server if state.server is not None else conn.b
        client = _peer(conn, server)
        role = state.server_role or state.protocol.default_server_role
        direction = towards(role) if state.server is not None else UNKNOWN_DIRECTION
        return Event("CONNECTION_OPENED", time, packet, conn.id, str(client), str(server), direction,
                     details={"client": str(client), role: str(server), "mid_stream": not conn.saw_syn},
                     params={"server_role": role, "server": str(server)})

    def _closed_event(self, state: _ConnState, ev: ConnectionClosed) -> Event:
        conn = state.conn
        details = {"how": ev.how, "bytes_" + self._direction(state, conn.a): conn.bytes_from(conn.a),
                   "bytes_" + self._direction(state, conn.b): conn.bytes_from(conn.b)}
        closed_by = self._closer_role(state, ev)
        if closed_by is not None:
            details["closed_by"] = closed_by
        return Event("CONNECTION_CLOSED", ev.timestamp, ev.packet_index, conn.id, details=details)

    @staticmethod
    def _closer_role(state: _ConnState, ev: ConnectionClosed) -> str | None:
        conn = state.conn
        closer = conn.first_fin_from if ev.how == "fin" else conn.rst_from if ev.how == "rst" else None
        if closer is None or state.server is None:
            return None
        return state.server_role if closer == state.server else state.protocol.client_role

    def _new_splitter(self, state: _ConnState, candidate: _Candidate, sender: Endpoint, offset: int) -> PduSplitter:
        synced = state.conn.saw_syn and offset == 0
        splitter = PduSplitter(candidate.protocol, synced=synced, max_frame_size=self.options.max_frame_size,
                               start_offset=offset)
        candidate.splitters[sender] = splitter
        return splitter

    def _close_splitters(self, state: _ConnState, out: list, time: float, packet: int,
                         how: str = "end_of_capture", closed_by: str | None = None) -> None:
        for candidate in list(state.candidates):
            for sender, splitter in candidate.splitters.items():
                for item in splitter.finish(time, packet):
                    self._emit(state, candidate, sender, item, out, (how, closed_by))

    def _emit(self, state: _ConnState, candidate: _Candidate, sender: Endpoint, item, out: list,
              end: tuple[str, str | None] | None = None) -> None:
        """``end`` is (how, closed_by) for what the end of the stream left over."""
        conn = state.conn
        if type(item) is RawFrame:
            protocol = candidate.protocol
            decoded = protocol.decode(item.data, item.missing, self.options)
            if item.missing:  # why bytes are missing is known here, not in the decoder
                decoded = _incomplete(decoded, item, end)
            if not state.confirmed:
                if not protocol.confirms(decoded):
                    return
                self._confirm(state, candidate)
                self._learn_roles(state, protocol, sender, decoded.type)
                # the connection opened with its first packet (the SYN), not with the frame that proved it
                out.append(self._opened_event(state, conn.first_time, conn.first_packet_index))
            elif state.server is None:
                self._learn_roles(state, protocol, sender, decoded.type)
            self._frame_index += 1
            addresses = state.addresses.get(sender)
            if addresses is None:
                addresses = state.addresses[sender] = (str(sender), str(_peer(conn, sender)))
            out.append(Frame(self._frame_index, protocol.name, conn.id, addresses[0], addresses[1],
                             self._direction(state, sender), item.timestamp, item.first_time, item.last_packet,
                             item.first_packet, item.offset, decoded,
                             item.data if self.options.keep_frame_bytes else None))
        elif state.confirmed and candidate is state.candidates[0]:
            note: StreamNote = item
            out.append(Event(note.kind, note.timestamp, note.packet_index, conn.id, str(sender),
                             str(_peer(conn, sender)), self._direction(state, sender), note.offset, note.length,
                             note.details, note.params))

    @staticmethod
    def _confirm(state: _ConnState, candidate: _Candidate) -> None:
        state.candidates = [candidate]
        state.confirmed = True

    @staticmethod
    def _learn_roles(state: _ConnState, protocol: ProtocolSpec, sender: Endpoint, type_name: str) -> None:
        """Off the known ports the sides are told apart by commands only one side sends."""
        spec = protocol.commands.get(type_name)
        if spec is None:
            return
        if spec.sender in protocol.server_roles:
            state.server, state.server_role = sender, spec.sender
        elif spec.sender == protocol.client_role:
            state.server, state.server_role = _peer(state.conn, sender), protocol.default_server_role

    @staticmethod
    def _direction(state: _ConnState, sender: Endpoint) -> str:
        if state.server is None:
            return UNKNOWN_DIRECTION
        return TO_CLIENT if sender == state.server else towards(state.server_role)


def _incomplete(decoded: Decoded, item: RawFrame, end: tuple[str, str | None] | None) -> Decoded:
    """The finding that says why ``item.missing`` bytes of a PDU are not decoded: it is above the size limit
    (only its head was read, the rest skipped), or they were lost in a capture gap, or come after the end of
    its stream."""
    params = {"missing": item.missing, "size": decoded.size}
    if item.oversized:
        finding = Finding("frame.oversized_head", {"head": len(item.data), **params})
    elif end is None:
        finding = Finding("frame.gap_damaged", params)
    else:
        params["how"] = end[0]
        if end[1] is not None:
            params["closed_by"] = end[1]
        finding = Finding("frame.cut_at_end", params)
    return Decoded(decoded.type, decoded.command, decoded.size, [finding, *decoded.findings], decoded.body)


class OtherTraffic:
    """TCP seen off the protocols' ports, per (guessed) server port: connections and payload bytes. Bounded."""

    MAX_PORTS = 256
    MAX_CONNECTIONS = 1024  # remembered per port; more are counted by their bytes only

    def __init__(self) -> None:
        self.ports: dict[int, list] = {}  # port -> [set of client endpoints, payload bytes]

    def add(self, seg: TcpSegment) -> None:
        flags = seg.flags
        if flags & 0x02 and not flags & 0x10:  # SYN: the server is the receiver
            port, client = seg.dst_port, (seg.src_ip, seg.src_port)
        elif seg.src_port < seg.dst_port:  # otherwise the lower port is most likely the server's
            port, client = seg.src_port, (seg.dst_ip, seg.dst_port)
        else:
            port, client = seg.dst_port, (seg.src_ip, seg.src_port)
        entry = self.ports.get(port)
        if entry is None:
            if len(self.ports) >= self.MAX_PORTS:
                return
            entry = self.ports[port] = [set(), 0]
        if len(entry[0]) < self.MAX_CONNECTIONS:
            entry[0].add(client)
        entry[1] += len(seg.payload)

    def summary(self, most: int = 5) -> list[dict]:
        """The busiest ports first: {port, connections, bytes}."""
        rows = [{"port": port, "connections": len(conns), "bytes": size} for port, (conns, size) in self.ports.items()]
        return sorted(rows, key=lambda r: (-r["bytes"], r["port"]))[:most]


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


def _capture_note(note, dissector: Dissector) -> Event:
    return Event("CAPTURE_NOTE", dissector.last_time, dissector.last_packet, details={"note": note.id, **note.params})


def dissect_file(path, options: Options | None = None, report: dict | None = None) -> Iterator:
    """Decode a capture file; raises capture.files.CaptureError when the file cannot be read at all.
    ``report``, when given, receives what the capture held besides the frames (``other_tcp``, ``packets``)."""
    with open_capture(path) as reader:
        dissector = Dissector(options)
        if report is not None:
            report["other_tcp"] = dissector.other_tcp
            report["reader"] = reader
        notes_seen = 0
        for item in dissect_packets(reader, dissector=dissector):
            # The reader's notes (odd blocks, ...) come in capture order, as they are found.
            while notes_seen < len(reader.problems):
                yield _capture_note(reader.problems[notes_seen], dissector)
                notes_seen += 1
            yield item
        for note in reader.problems[notes_seen:]:
            yield _capture_note(note, dissector)
        if reader.truncated:
            yield Event("CAPTURE_TRUNCATED", dissector.last_time, dissector.last_packet,
                        params={"what": reader.truncated})
