"""Conversation analysis: per-connection session state and request/response pairing.

Runs after decoding, one event at a time, in capture order. It adds context to each FrameEvent's ``notes``
(``answers``: the index of the request a response belongs to, ``latency_ms``, and the topic and names behind
producer and consumer ids) and reports anomalies as StreamEvents (unanswered requests at the end, responses
without a request).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from . import codecs, pbdict
from .pbdict import text
from .chunks import ChunkAssembler
from .expert import ERROR as ERROR_SEVERITY
from .expert import NOTE, WARNING, Problem
from .commands import TYPE_NUMBERS
from .pipeline import TO_BROKER, TO_CLIENT, FrameEvent, StreamEvent

BROKER_PUSH_REQUEST_ID = 2**64 - 1  # CLOSE_PRODUCER / CLOSE_CONSUMER sent by the broker on its own

_T = TYPE_NUMBERS
REQUESTS = frozenset(_T[n] for n in (
    "PRODUCER", "SUBSCRIBE", "UNSUBSCRIBE", "CLOSE_PRODUCER", "CLOSE_CONSUMER", "SEEK", "LOOKUP",
    "PARTITIONED_METADATA", "CONSUMER_STATS", "GET_LAST_MESSAGE_ID", "GET_TOPICS_OF_NAMESPACE", "GET_SCHEMA",
    "GET_OR_CREATE_SCHEMA", "ACK", "NEW_TXN", "ADD_PARTITION_TO_TXN", "ADD_SUBSCRIPTION_TO_TXN", "END_TXN",
    "END_TXN_ON_PARTITION", "END_TXN_ON_SUBSCRIPTION", "TC_CLIENT_CONNECT_REQUEST", "WATCH_TOPIC_LIST",
    "WATCH_TOPIC_LIST_CLOSE", "SCALABLE_TOPIC_SUBSCRIBE"))
RESPONSES = frozenset(_T[n] for n in (
    "SUCCESS", "ERROR", "PRODUCER_SUCCESS", "LOOKUP_RESPONSE", "PARTITIONED_METADATA_RESPONSE",
    "CONSUMER_STATS_RESPONSE", "GET_LAST_MESSAGE_ID_RESPONSE", "GET_TOPICS_OF_NAMESPACE_RESPONSE",
    "GET_SCHEMA_RESPONSE", "GET_OR_CREATE_SCHEMA_RESPONSE", "ACK_RESPONSE", "NEW_TXN_RESPONSE",
    "ADD_PARTITION_TO_TXN_RESPONSE", "ADD_SUBSCRIPTION_TO_TXN_RESPONSE", "END_TXN_RESPONSE",
    "END_TXN_ON_PARTITION_RESPONSE", "END_TXN_ON_SUBSCRIPTION_RESPONSE", "TC_CLIENT_CONNECT_RESPONSE",
    "WATCH_TOPIC_LIST_SUCCESS", "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE"))
_SUCCESS_ANSWERS = ("SUBSCRIBE", "UNSUBSCRIBE", "CLOSE_PRODUCER", "CLOSE_CONSUMER", "SEEK", "WATCH_TOPIC_LIST_CLOSE")
_SPECIAL_ANSWERS = {"SUCCESS": _SUCCESS_ANSWERS, "PRODUCER_SUCCESS": ("PRODUCER",), "ACK_RESPONSE": ("ACK",),
                    "TC_CLIENT_CONNECT_RESPONSE": ("TC_CLIENT_CONNECT_REQUEST",),
                    "WATCH_TOPIC_LIST_SUCCESS": ("WATCH_TOPIC_LIST",)}
# Which request types each response type can answer (ERROR answers any). The C++ client numbers lookups
# and producer/consumer requests from separate counters, so one connection can reuse a request_id across
# request kinds: pairing must check kinds, not ids alone.
ANSWERS: dict[int, frozenset[int]] = {
    _T[r]: frozenset(_T[q] for q in _SPECIAL_ANSWERS.get(r, (r.removesuffix("_RESPONSE"),)))
    for r in _T if _T[r] in RESPONSES and r != "ERROR"
}
CONNECT, CONNECTED, AUTH_CHALLENGE = _T["CONNECT"], _T["CONNECTED"], _T["AUTH_CHALLENGE"]
ERROR, PING, PONG = _T["ERROR"], _T["PING"], _T["PONG"]
SEND, SEND_RECEIPT, SEND_ERROR = _T["SEND"], _T["SEND_RECEIPT"], _T["SEND_ERROR"]
PRODUCER, PRODUCER_SUCCESS, SUBSCRIBE = _T["PRODUCER"], _T["PRODUCER_SUCCESS"], _T["SUBSCRIBE"]
# Commands whose producer_id / consumer_id should be shown with the topic and name behind them.
_PRODUCER_SCOPED = frozenset(_T[n] for n in ("SEND", "SEND_RECEIPT", "SEND_ERROR", "CLOSE_PRODUCER",
                                             "PRODUCER_SUCCESS"))
_CONSUMER_SCOPED = frozenset(_T[n] for n in (
    "MESSAGE", "ACK", "FLOW", "UNSUBSCRIBE", "CLOSE_CONSUMER", "SEEK", "REDELIVER_UNACKNOWLEDGED_MESSAGES",
    "CONSUMER_STATS", "GET_LAST_MESSAGE_ID", "REACHED_END_OF_TOPIC", "ACTIVE_CONSUMER_CHANGE", "ACK_RESPONSE"))


ACK, FLOW, MESSAGE, LOOKUP_RESPONSE = _T["ACK"], _T["FLOW"], _T["MESSAGE"], _T["LOOKUP_RESPONSE"]
AUTH_RESPONSE, CLOSE_PRODUCER, CLOSE_CONSUMER = _T["AUTH_RESPONSE"], _T["CLOSE_PRODUCER"], _T["CLOSE_CONSUMER"]
CUMULATIVE = 1  # CommandAck.AckType
SLOW_RESPONSE_S = 30.0  # the Java and C++ clients' default operation timeout
REDIRECT_LOOP_LIMIT = 8
# Message ids remembered per consumer for redelivery detection and ACK pairing. Beyond this the oldest are
# forgotten (a redelivery of a message older than that is not noticed), so memory does not grow with the file.
MESSAGE_MEMORY = 100_000  # lookups of one topic redirected this often on one connection: a loop


@dataclass
class _Consumer:
    info: dict
    permits: int = 0
    flow_seen: bool = False
    # (ledger, entry) -> MESSAGE frame index; both capped (oldest forgotten) so memory stays bounded
    delivered: OrderedDict[tuple[int, int], int] = field(default_factory=OrderedDict)
    unacked: OrderedDict[tuple[int, int], int] = field(default_factory=OrderedDict)


@dataclass
class _Producer:
    info: dict
    last_sequence_id: int | None = None


@dataclass
class _Session:
    producers: dict[int, _Producer] = field(default_factory=dict)
    consumers: dict[int, _Consumer] = field(default_factory=dict)
    requests: dict[int, list[FrameEvent]] = field(default_factory=dict)  # request_id -> pending requests
    # (producer_id, sequence_id) -> SENDs awaiting a receipt; chunks of one message share a sequence_id
    sends: dict[tuple[int, int], list[FrameEvent]] = field(default_factory=dict)
    handshake: FrameEvent | None = None  # the client's CONNECT or AUTH_RESPONSE awaiting the broker
    challenge: FrameEvent | None = None  # the broker's AUTH_CHALLENGE awaiting AUTH_RESPONSE
    pings: dict[str, FrameEvent] = field(default_factory=dict)  # direction of the PING -> PING
    redirects: dict[str, int] = field(default_factory=dict)  # topic -> redirects seen
    versions: dict = field(default_factory=dict)


class ConversationAnalyzer:
    """Session state and pairing for every connection. ``process`` each event in capture order."""

    def __init__(self, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> None:
        self._sessions: dict[int, _Session] = {}
        self._chunks = ChunkAssembler(max_decompressed)

    def session_info(self, conn_id: int) -> dict:
        """Handshake facts of a connection (versions), for statistics."""
        session = self._sessions.get(conn_id)
        return dict(session.versions) if session else {}

    def process(self, ev) -> list[StreamEvent]:
        if type(ev) is not FrameEvent:
            if ev.kind == "CONNECTION_CLOSED" and ev.conn is not None:
                return self._close(ev.conn.id, ev.time, ev.packet)
            return []
        session = self._sessions.get(ev.conn.id)
        if session is None:
            session = self._sessions[ev.conn.id] = _Session()
        frame = ev.frame
        cmd = frame.command
        t = frame.type_num
        if cmd is None or t is None:
            return []
        self._add_context(session, ev, t, cmd)
        sec = frame.payload
        if sec is not None and sec.messages and sec.messages[0].chunk_id is not None:
            self._add_chunk(ev, t, cmd, sec)
        if t == CONNECT:
            session.handshake = ev
            session.versions.update(client_version=text(cmd.client_version), client_protocol=cmd.protocol_version)
        elif t in (CONNECTED, AUTH_CHALLENGE) or (t == ERROR and session.handshake is not None
                                                    and not session.requests.get(cmd.request_id)):
            if session.handshake is not None:
                _answer(ev, session.handshake)
                session.handshake = None
            if t == AUTH_CHALLENGE:
                session.challenge = ev
            elif t == CONNECTED:
                session.versions.update(server_version=text(cmd.server_version), server_protocol=cmd.protocol_version)
        elif t == AUTH_RESPONSE:
            if session.challenge is not None:
                _answer(ev, session.challenge)
                session.challenge = None
            session.handshake = ev
        elif t == SEND:
            self._on_send(session, ev, cmd)
        elif t in (SEND_RECEIPT, SEND_ERROR):
            key = (cmd.producer_id, cmd.sequence_id)
            waiting = session.sends.get(key)
            if waiting:
                _answer(ev, waiting.pop(0))
                if not waiting:
                    del session.sends[key]
            elif ev.conn.saw_syn:  # mid-connection captures start with answers to unseen SENDs
                _flag(ev, "response.unmatched", WARNING, f"{frame.type} for producer {cmd.producer_id} sequence "
                                                         f"{cmd.sequence_id} without a SEND in the capture")
            if t == SEND_ERROR:
                _server_error(ev, cmd)
        elif t == MESSAGE:
            self._on_message(session, ev, cmd)
        elif t == FLOW:
            consumer = session.consumers.get(cmd.consumer_id)
            if consumer is not None:
                consumer.permits += cmd.messagePermits
                consumer.flow_seen = True
                ev.notes["permits"] = consumer.permits
        elif t == PING:
            session.pings[ev.direction] = ev
        elif t == PONG:
            req = session.pings.pop(TO_CLIENT if ev.direction == TO_BROKER else TO_BROKER, None)
            if req is not None:
                _answer(ev, req)
        if t in REQUESTS and ev.direction != TO_CLIENT and _has(cmd, "request_id"):
            self._on_request(session, ev, t, cmd)
        elif t in RESPONSES and _has(cmd, "request_id"):
            self._on_response(session, ev, t, cmd)
        if t == ACK:
            self._on_ack(session, ev, cmd)
        elif t in (CLOSE_PRODUCER, CLOSE_CONSUMER) and ev.direction == TO_CLIENT:
            ev.notes["broker_initiated"] = True
        return []

    def finish(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for conn_id in list(self._sessions):
            out.extend(self._close(conn_id, None, None))
        for part in self._chunks.pending():
            out.append(StreamEvent("UNFINISHED_CHUNKS", 0.0, 0,
                                   f"chunked message {part.uuid!r}: {part.next_chunk} of {part.num_chunks} chunks "
                                   f"seen (frames {part.frames}); the rest is not in the capture",
                                   details={"uuid": part.uuid, "chunks": part.frames}))
        return out

    # ------------------------------------------------------------------ per command

    def _on_request(self, session: _Session, ev: FrameEvent, t: int, cmd) -> None:
        pending = session.requests.setdefault(cmd.request_id, [])
        if any(p.frame.type_num == t for p in pending):
            _flag(ev, "request.duplicate_id", WARNING, f"request_id {cmd.request_id} reused while an earlier "
                                                       f"{ev.frame.type} with it is still unanswered")
        pending.append(ev)

    def _on_response(self, session: _Session, ev: FrameEvent, t: int, cmd) -> None:
        pending = session.requests.get(cmd.request_id, ())
        kinds = ANSWERS.get(t)
        req = next((p for p in pending if kinds is None or p.frame.type_num in kinds), None)
        if t == ERROR:
            _server_error(ev, cmd)
        if req is None:
            if ev.direction == TO_CLIENT and "answers" not in ev.notes and ev.conn.saw_syn:
                _flag(ev, "response.unmatched", WARNING, f"{ev.frame.type} answers request_id {cmd.request_id}, "
                                                         f"which no request in the capture used")
            return
        _answer(ev, req)
        if not (t == PRODUCER_SUCCESS and _has(cmd, "producer_ready") and not cmd.producer_ready):
            pending.remove(req)
            if not pending:
                del session.requests[cmd.request_id]
        self._learn(session, req, ev)
        if t == LOOKUP_RESPONSE and cmd.response == 0:  # Redirect
            topic = req.frame.command.topic
            session.redirects[topic] = session.redirects.get(topic, 0) + 1
            if session.redirects[topic] == REDIRECT_LOOP_LIMIT:
                _flag(ev, "lookup.redirect_loop", WARNING,
                      f"lookup of {topic} redirected {REDIRECT_LOOP_LIMIT} times on this connection")

    def _on_send(self, session: _Session, ev: FrameEvent, cmd) -> None:
        session.sends.setdefault((cmd.producer_id, cmd.sequence_id), []).append(ev)
        producer = session.producers.get(cmd.producer_id)
        if producer is None:
            if ev.conn.saw_syn:
                _flag(ev, "send.unknown_producer", WARNING,
                      f"SEND for producer {cmd.producer_id}, which was not created on this connection")
            return
        first = cmd.sequence_id
        last = cmd.highest_sequence_id if _has(cmd, "highest_sequence_id") else first + max(cmd.num_messages, 1) - 1
        previous = producer.last_sequence_id
        if previous is not None and not (cmd.is_chunk and first == previous):
            if first <= previous:
                # A note, not a warning: an explicit sequence_id set by the application is legitimate.
                _flag(ev, "sequence.regression", NOTE,
                      f"sequence_id {first} after {previous} from producer {_name(producer.info, cmd.producer_id)}")
            elif first > previous + 1:
                _flag(ev, "sequence.gap", NOTE, f"sequence_id jumps from {previous} to {first} "
                                                f"({first - previous - 1} not sent on this connection)")
        producer.last_sequence_id = max(last, previous if previous is not None else last)

    def _on_message(self, session: _Session, ev: FrameEvent, cmd) -> None:
        consumer = session.consumers.get(cmd.consumer_id)
        if consumer is None:
            return
        if consumer.flow_seen and consumer.permits <= 0:
            _flag(ev, "flow.overrun", WARNING, f"broker pushed a MESSAGE to consumer "
                                               f"{_name(consumer.info, cmd.consumer_id)} with no permits left")
        md = ev.frame.payload.metadata if ev.frame.payload is not None else None
        count = md.num_messages_in_batch if md is not None and md.HasField("num_messages_in_batch") else 1
        consumer.permits -= count
        ev.notes["permits"] = consumer.permits
        mid = (cmd.message_id.ledgerId, cmd.message_id.entryId)
        earlier = consumer.delivered.get(mid)
        if earlier is not None or cmd.redelivery_count:
            _flag(ev, "message.redelivered", NOTE, f"message {mid[0]}:{mid[1]} delivered again"
                  + (f" (first in frame {earlier})" if earlier is not None else "")
                  + (f", redelivery_count {cmd.redelivery_count}" if cmd.redelivery_count else ""))
        remember_bounded(consumer.delivered, mid, ev.index)
        remember_bounded(consumer.unacked, mid, ev.index)

    def _on_ack(self, session: _Session, ev: FrameEvent, cmd) -> None:
        consumer = session.consumers.get(cmd.consumer_id)
        if consumer is None:
            return
        acked: list[int] = []
        for mid in cmd.message_id:
            key = (mid.ledgerId, mid.entryId)
            if cmd.ack_type == CUMULATIVE:
                for k in [k for k in consumer.unacked if k <= key]:
                    acked.append(consumer.unacked.pop(k))
            elif len(mid.ack_set) and any(mid.ack_set):
                # A batch-index ack: the entry is acknowledged only in part.
                if key in consumer.unacked:
                    acked.append(consumer.unacked[key])
            else:
                message = consumer.unacked.pop(key, None)
                if message is not None:
                    acked.append(message)
        if acked:
            ev.notes["acks"] = sorted(set(acked))

    # ------------------------------------------------------------------ helpers

    def _close(self, conn_id: int, time, packet) -> list[StreamEvent]:
        session = self._sessions.pop(conn_id, None)
        if session is None:
            return []
        out = []
        pending = [r for reqs in (*session.requests.values(), *session.sends.values()) for r in reqs]
        if session.handshake is not None:
            pending.append(session.handshake)
        pending.extend(session.pings.values())
        for req in sorted(pending, key=lambda e: e.index):
            out.append(StreamEvent("UNANSWERED", time if time is not None else req.time,
                                   packet if packet is not None else req.packet,
                                   f"{req.frame.type} (frame {req.index}) got no response in the capture",
                                   req.conn, req.src, req.dst, req.direction,
                                   details={"request": req.index, "request_type": req.frame.type}))
        return out

    def _add_chunk(self, ev: FrameEvent, t: int, cmd, sec) -> None:
        actor = cmd.producer_id if t == SEND else cmd.consumer_id
        chunk = sec.messages[0]
        result = self._chunks.add((ev.conn.id, ev.direction, actor), ev.index, sec.metadata, chunk.payload)
        ev.frame.problems.extend(result.problems)
        if result.reassembled is not None:
            ev.notes["reassembled"] = result.reassembled

    @staticmethod
    def _add_context(session: _Session, ev: FrameEvent, t: int, cmd) -> None:
        if t in _PRODUCER_SCOPED and _has(cmd, "producer_id"):
            producer = session.producers.get(cmd.producer_id)
            if producer:
                ev.notes["producer"] = producer.info
        elif t in _CONSUMER_SCOPED and _has(cmd, "consumer_id"):
            consumer = session.consumers.get(cmd.consumer_id)
            if consumer:
                ev.notes["consumer"] = consumer.info
        if t == PRODUCER:
            info = {"id": cmd.producer_id, "topic": text(cmd.topic)}
            if cmd.HasField("producer_name"):
                info["name"] = text(cmd.producer_name)
            if cmd.HasField("producer_access_mode"):
                info["access_mode"] = pbdict.enum_name(cmd.DESCRIPTOR, "producer_access_mode",
                                                       cmd.producer_access_mode)
            session.producers[cmd.producer_id] = _Producer(info)
        elif t == SUBSCRIBE:
            info = {"id": cmd.consumer_id, "topic": text(cmd.topic), "subscription": text(cmd.subscription),
                    "type": pbdict.enum_name(cmd.DESCRIPTOR, "subType", cmd.subType)}
            if cmd.HasField("consumer_name"):
                info["name"] = text(cmd.consumer_name)
            session.consumers[cmd.consumer_id] = _Consumer(info)

    @staticmethod
    def _learn(session: _Session, req: FrameEvent, resp: FrameEvent) -> None:
        # The broker names anonymous producers in PRODUCER_SUCCESS.
        if req.frame.type_num == PRODUCER and resp.frame.type_num == PRODUCER_SUCCESS:
            producer = session.producers.get(req.frame.command.producer_id)
            if producer is not None and "name" not in producer.info:
                producer.info["name"] = text(resp.frame.command.producer_name)


def remember_bounded(table: OrderedDict, key, value, cap: int = MESSAGE_MEMORY) -> None:
    table[key] = value
    if len(table) > cap:
        table.popitem(last=False)  # the oldest; O(1), unlike deleting the first key of a plain dict


def _name(info: dict, ident: int) -> str:
    name = info.get("name")
    return f"{name!r} ({ident})" if name else str(ident)


def _flag(ev: FrameEvent, pid: str, severity: str, message: str) -> None:
    ev.frame.problems.append(Problem(pid, severity, message))


def _server_error(ev: FrameEvent, cmd) -> None:
    name = pbdict.enum_name(cmd.DESCRIPTOR, "error", cmd.error) if _has(cmd, "error") else "?"
    detail = f": {text(cmd.message)}" if _has(cmd, "message") else ""
    _flag(ev, "server.error", ERROR_SEVERITY, f"broker answered {ev.frame.type} {name}{detail}")


def _has(cmd, name: str) -> bool:
    return name in cmd.DESCRIPTOR.fields_by_name and cmd.HasField(name)


def _answer(resp: FrameEvent, req: FrameEvent) -> None:
    resp.notes["answers"] = req.index
    resp.request_type = req.frame.type
    latency = resp.time - req.time
    resp.notes["latency_ms"] = round(latency * 1000.0, 3)
    if latency > SLOW_RESPONSE_S:
        _flag(resp, "response.slow", WARNING, f"{resp.frame.type} came {latency:.1f} s after its {req.frame.type} "
                                              f"(frame {req.index}): past the clients' {SLOW_RESPONSE_S:.0f} s "
                                              f"operation timeout")


def topic_of(ev: FrameEvent) -> str | None:
    cmd = ev.frame.command
    if cmd is not None and hasattr(cmd, "topic") and cmd.HasField("topic"):
        return text(cmd.topic)
    for key in ("producer", "consumer"):
        info = ev.notes.get(key)
        if info:
            return info.get("topic")
    return None
