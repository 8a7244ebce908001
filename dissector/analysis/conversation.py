"""Conversation analysis: request/response pairing for any protocol, and the protocol's own session state.

Runs after decoding, one item at a time, in capture order. Pairing is generic and driven by the protocol's
command table (``CommandSpec.opens`` / ``answers``): a request waits under a key (a space and some command
fields) until a response looks under the same key; the pair gives ``answers``, ``latency_ms`` and
``request_type``, and the findings ``response.slow``, ``response.unmatched`` and ``request.duplicate_id``.
A request still waiting when its connection closes is ``UNANSWERED``. Then the protocol's session
(``ProtocolSpec.new_session``) adds what only it knows.

Nothing here edits what the decoder produced: each frame comes out as ``Annotated(frame, notes, findings)``.
What is kept per waiting request is a ``Waiting`` (a few ids), never the frame or its payload, and at most
``Options.max_pending_requests`` per connection.

The analysis has a clock: ``tick(now)`` (every item's time when reading a file; the wall clock for a live
capture on an idle link) reports a request that has waited past ``Options.request_timeout`` as ``OVERDUE``
when that happens, not only when its answer or its connection's end comes. A heap holds one deadline per
connection (its oldest request not yet reported), so the clock costs nothing per request.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import Iterable, Iterator

from .. import protocols
from ..model import TO_CLIENT, UNKNOWN_DIRECTION, Annotated, Event, Frame, towards
from ..options import Options
from ..problems import Finding
from ..protocols.base import CommandSpec, Key, ProtocolSpec, Waiting
from .bounded import DropCounter


_NOTHING: dict = {}  # the kept fields of a request that keeps none (never written to)


class _Connection:
    __slots__ = ("protocol", "session", "mid_stream", "waiting", "order", "drops", "to_server", "last_time",
                 "last_packet", "in_heap")

    def __init__(self, protocol: ProtocolSpec, options: Options, conn: int, mid_stream: bool, shared) -> None:
        self.protocol = protocol
        self.session = protocol.new_session(options, conn, mid_stream, shared)
        self.mid_stream = mid_stream
        self.waiting: dict[tuple, list[Waiting]] = {}  # (space, key values) -> requests, oldest first
        self.order: OrderedDict[int, tuple] = OrderedDict()  # request frame index -> its bucket, oldest first
        self.drops = DropCounter(conn)
        self.to_server = towards(protocol.default_server_role)  # the direction of the client's requests
        self.last_time = 0.0
        self.last_packet = 0
        self.in_heap = False  # a deadline of this connection is in the analyzer's heap


class ConversationAnalyzer:
    """Pairing and session state for every connection. ``process`` each item in capture order."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self._conns: dict[int, _Connection] = {}
        self._mid_stream: dict[int, bool] = {}  # opened connections without a frame yet
        self._deadlines: list[tuple[float, int]] = []  # heap of (deadline, connection): at most one per connection
        self._last_packet = 0
        self._shared: dict[str, object] = {}  # protocol name -> its state across connections

    def tick(self, now: float, out: list) -> None:
        """The clock moved to ``now``: report the requests that have waited past the operation timeout."""
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] < now:
            _, conn_id = heapq.heappop(deadlines)
            conn = self._conns.get(conn_id)
            if conn is not None:
                conn.in_heap = False
                self._next_deadline(conn_id, conn, now, out)

    def _next_deadline(self, conn_id: int, conn: _Connection, now: float, out: list | None) -> None:
        """Report the connection's oldest request not yet reported if it is overdue at ``now``, and put the
        deadline of the next one in the heap."""
        timeout = self.options.request_timeout
        for index, bucket in conn.order.items():
            request = next(w for w in conn.waiting[bucket] if w.index == index)
            if request.overdue or not request.space.unanswered:
                continue
            deadline = request.time + timeout
            if deadline < now and out is not None:
                request.overdue = True
                conn.order.move_to_end(index)  # the unreported ones stay in front
                out.append(Event("OVERDUE", deadline, self._last_packet, conn_id, request.src, request.dst,
                                 request.direction, details={"request": index, "request_type": request.type},
                                 params={"timeout_s": timeout}))
                self._next_deadline(conn_id, conn, now, None)  # one report per pop: the heap keeps time order
                return
            heapq.heappush(self._deadlines, (deadline, conn_id))
            conn.in_heap = True
            return

    def process(self, item, out: list) -> None:
        """Append what ``item`` (a Frame or an Event) becomes, and any events it causes, to ``out``."""
        if self._deadlines:
            self.tick(item.time, out)
        self._last_packet = item.packet
        if type(item) is Frame:
            self._frame(item, out)
            return
        out.append(item)
        if item.conn is None:
            return
        if item.kind == "CONNECTION_OPENED":
            self._mid_stream[item.conn] = bool(item.details.get("mid_stream"))
        elif item.kind == "CONNECTION_CLOSED":
            self._mid_stream.pop(item.conn, None)
            conn = self._conns.pop(item.conn, None)
            if conn is not None:
                out.extend(self._close(item.conn, conn, item.time, item.packet))

    def finish(self) -> list:
        out: list = []
        for conn_id, conn in list(self._conns.items()):
            out.extend(self._close(conn_id, conn, conn.last_time, conn.last_packet))
        self._conns.clear()
        return out

    # ------------------------------------------------------------------ frames

    def _frame(self, frame: Frame, out: list) -> None:
        conn = self._conns.get(frame.conn)
        if conn is None:
            protocol = protocols.get(frame.protocol)
            mid_stream = self._mid_stream.pop(frame.conn, False)
            if protocol.name not in self._shared:
                self._shared[protocol.name] = protocol.new_shared(self.options)
            conn = self._conns[frame.conn] = _Connection(protocol, self.options, frame.conn, mid_stream,
                                                         self._shared[protocol.name])
        conn.last_time, conn.last_packet = frame.time, frame.packet
        direction = frame.direction
        if direction != TO_CLIENT and direction != UNKNOWN_DIRECTION:
            conn.to_server = direction
        notes: dict = {}
        findings: list[Finding] = []
        events: list[Event] = []
        pdu = frame.pdu
        if pdu.command is not None:  # a command that could not be decoded tells the conversation nothing
            spec = conn.protocol.commands.by_name.get(pdu.type)
            request = None
            if spec is not None:
                if spec.answers:
                    request = self._answer(conn, frame, spec, notes, findings)
                if spec.opens is not None and not _cut_short(pdu):  # a request never sent whole awaits nothing
                    self._wait(conn, frame, spec, findings, events)
            more = conn.session.on_frame(frame, spec, request, notes, findings)
            if more:
                events.extend(more)
        out.append(Annotated(frame, notes, findings))
        if events:
            out.extend(events)

    def _bucket(self, conn: _Connection, key: Key, frame: Frame) -> tuple | None:
        cmd = frame.pdu.command
        if len(key.fields) == 1 and key.fields[0][0] != "@":  # the common case: one command field
            value = cmd.get(key.fields[0])
            return None if value is None else (key.space.name, value)
        values = [key.space.name]
        for name in key.fields:
            if name == "@direction":
                values.append(frame.direction)
            elif name == "@reverse":
                values.append(conn.to_server if frame.direction == TO_CLIENT else TO_CLIENT)
            else:
                value = cmd.get(name)
                if value is None:
                    return None  # the command lacks the field it would be paired by
                values.append(value)
        return tuple(values)

    def _answer(self, conn: _Connection, frame: Frame, spec: CommandSpec, notes: dict,
                findings: list) -> Waiting | None:
        first_bucket = None
        for key in spec.answers:
            bucket = self._bucket(conn, key, frame)
            if bucket is None:
                continue
            if first_bucket is None:
                first_bucket = (key, bucket)
            waiting = conn.waiting.get(bucket)
            if not waiting:
                continue
            types = spec.answer_types
            request = next((w for w in waiting if types is None or w.type in types), None)
            if request is None:
                continue
            latency = frame.time - request.time
            notes["answers"] = request.index
            notes["latency_ms"] = round(latency * 1000.0, 3)
            notes["request_type"] = request.type
            if latency > self.options.request_timeout:
                findings.append(Finding("response.slow", {"type": spec.name, "latency_s": latency,
                                                          "request_type": request.type, "request": request.index,
                                                          "timeout_s": self.options.request_timeout}))
            interim = spec.interim
            if interim is None or frame.pdu.command.get(interim[0]) != interim[1]:
                self._forget(conn, request)
            return request
        if first_bucket is not None and first_bucket[0].space.unmatched and not conn.mid_stream:
            key, bucket = first_bucket
            findings.append(Finding("response.unmatched", {"type": spec.name,
                                                           "key": dict(zip(key.fields, bucket[1:]))}))
        return None

    def _wait(self, conn: _Connection, frame: Frame, spec: CommandSpec, findings: list, events: list) -> None:
        key = spec.opens
        space = key.space
        if (space.opened_by == "client" and frame.direction == TO_CLIENT) or \
                (space.opened_by == "server" and frame.direction != TO_CLIENT):
            return  # e.g. CLOSE_PRODUCER sent by the broker on its own: not a request awaiting an answer
        bucket = self._bucket(conn, key, frame)
        if bucket is None:
            return
        cmd = frame.pdu.command
        request = Waiting(frame.index, spec.name, frame.time, frame.packet, frame.src, frame.dst, frame.direction,
                          bucket, space, {name: cmd.get(name) for name in spec.remember} if spec.remember else _NOTHING)
        waiting = conn.waiting.get(bucket)
        if waiting is None:
            conn.waiting[bucket] = [request]
        elif space.slot:
            for old in waiting:
                conn.order.pop(old.index, None)
            conn.waiting[bucket] = [request]
        else:
            if space.duplicates and any(w.type == spec.name for w in waiting):
                findings.append(Finding("request.duplicate_id", {"type": spec.name,
                                                                 "key": dict(zip(key.fields, bucket[1:]))}))
            waiting.append(request)
        conn.order[frame.index] = bucket
        if not conn.in_heap and space.unanswered:
            heapq.heappush(self._deadlines, (frame.time + self.options.request_timeout, frame.conn))
            conn.in_heap = True
        if len(conn.order) > self.options.max_pending_requests:
            index, bucket = conn.order.popitem(last=False)
            waiting = conn.waiting[bucket]
            waiting[:] = [w for w in waiting if w.index != index]
            if not waiting:
                del conn.waiting[bucket]
            event = conn.drops.drop("max_pending_requests", "requests awaiting an answer",
                                    self.options.max_pending_requests, frame.time, frame.packet)
            if event is not None:
                events.append(event)

    @staticmethod
    def _forget(conn: _Connection, request: Waiting) -> None:
        waiting = conn.waiting[request.bucket]
        waiting.remove(request)
        if not waiting:
            del conn.waiting[request.bucket]
        conn.order.pop(request.index, None)

    # ------------------------------------------------------------------ the end of a connection

    def _close(self, conn_id: int, conn: _Connection, time: float, packet: int) -> list[Event]:
        unanswered = sorted((w for waiting in conn.waiting.values() for w in waiting if w.space.unanswered),
                            key=lambda w: w.index)
        out = [Event("UNANSWERED", time, packet, conn_id, w.src, w.dst, w.direction,
                     details={"request": w.index, "request_type": w.type}) for w in unanswered]
        out.extend(conn.session.close(time, packet))
        out.extend(conn.drops.close(time, packet))
        return out


def _cut_short(pdu) -> bool:
    return any(f.id == "frame.cut_at_end" for f in pdu.findings) if pdu.findings else False


def analyse(items: Iterable, options: Options | None = None) -> Iterator:
    """Annotated frames and events, in capture order, from the pipeline's frames and events."""
    analyzer = ConversationAnalyzer(options)
    out: list = []
    for item in items:
        analyzer.process(item, out)
        yield from out
        out.clear()
    yield from analyzer.finish()
