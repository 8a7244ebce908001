"""Conversation analysis: per-connection session state and request/response pairing.

Runs after decoding, one event at a time, in capture order. It adds context to each FrameEvent's ``notes``
(``answers``: the index of the request a response belongs to, ``latency_ms``, and the topic and names behind
producer and consumer ids) and reports anomalies as StreamEvents (unanswered requests at the end, responses
without a request).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import codecs
from .chunks import ChunkAssembler
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


@dataclass
class _Session:
    producers: dict[int, dict] = field(default_factory=dict)
    consumers: dict[int, dict] = field(default_factory=dict)
    requests: dict[int, list[FrameEvent]] = field(default_factory=dict)  # request_id -> pending requests
    # (producer_id, sequence_id) -> SENDs awaiting a receipt; chunks of one message share a sequence_id
    sends: dict[tuple[int, int], list[FrameEvent]] = field(default_factory=dict)
    connect: FrameEvent | None = None
    pings: dict[str, FrameEvent] = field(default_factory=dict)  # direction of the PING -> PING


class ConversationAnalyzer:
    def __init__(self, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> None:
        self._sessions: dict[int, _Session] = {}
        self._chunks = ChunkAssembler(max_decompressed)

    def process(self, ev) -> list[StreamEvent]:
        if type(ev) is not FrameEvent:
            if ev.kind == "CLOSE" and ev.conn is not None:
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
            session.connect = ev
        elif t in (CONNECTED, AUTH_CHALLENGE) or (t == ERROR and session.connect is not None
                                                    and not session.requests.get(cmd.request_id)):
            if session.connect is not None:
                _answer(ev, session.connect)
                if t == CONNECTED:
                    session.connect = None
        elif t == SEND:
            session.sends.setdefault((cmd.producer_id, cmd.sequence_id), []).append(ev)
        elif t in (SEND_RECEIPT, SEND_ERROR):
            key = (cmd.producer_id, cmd.sequence_id)
            waiting = session.sends.get(key)
            if waiting:
                _answer(ev, waiting.pop(0))
                if not waiting:
                    del session.sends[key]
            else:
                ev.frame.problems.append(f"{frame.type} for producer {cmd.producer_id} sequence "
                                         f"{cmd.sequence_id} without a SEND in the capture")
        elif t == PING:
            session.pings[ev.direction] = ev
        elif t == PONG:
            req = session.pings.pop(TO_CLIENT if ev.direction == TO_BROKER else TO_BROKER, None)
            if req is not None:
                _answer(ev, req)
        elif t in REQUESTS and ev.direction != TO_CLIENT and _has(cmd, "request_id"):
            pending = session.requests.setdefault(cmd.request_id, [])
            if any(p.frame.type_num == t for p in pending):
                ev.frame.problems.append(f"request_id {cmd.request_id} reused while an earlier {frame.type} "
                                         f"with it is still unanswered")
            pending.append(ev)
        elif t in RESPONSES and _has(cmd, "request_id"):
            pending = session.requests.get(cmd.request_id, ())
            kinds = ANSWERS.get(t)
            req = next((p for p in pending if kinds is None or p.frame.type_num in kinds), None)
            if req is not None:
                _answer(ev, req)
                if not (t == PRODUCER_SUCCESS and _has(cmd, "producer_ready") and not cmd.producer_ready):
                    pending.remove(req)
                    if not pending:
                        del session.requests[cmd.request_id]
                self._learn(session, req, ev)
            elif ev.direction == TO_CLIENT:
                ev.frame.problems.append(f"{frame.type} answers request_id {cmd.request_id}, "
                                         f"which no request in the capture used")
        return []

    def finish(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for conn_id in list(self._sessions):
            out.extend(self._close(conn_id, None, None))
        return out

    # ------------------------------------------------------------------ helpers

    def _close(self, conn_id: int, time, packet) -> list[StreamEvent]:
        session = self._sessions.pop(conn_id, None)
        if session is None:
            return []
        out = []
        pending = [r for reqs in (*session.requests.values(), *session.sends.values()) for r in reqs]
        if session.connect is not None:
            pending.append(session.connect)
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
            info = session.producers.get(cmd.producer_id)
            if info:
                ev.notes["producer"] = info
        elif t in _CONSUMER_SCOPED and _has(cmd, "consumer_id"):
            info = session.consumers.get(cmd.consumer_id)
            if info:
                ev.notes["consumer"] = info
        if t == PRODUCER:
            info = {"topic": cmd.topic}
            if cmd.HasField("producer_name"):
                info["name"] = cmd.producer_name
            session.producers[cmd.producer_id] = info
        elif t == SUBSCRIBE:
            info = {"topic": cmd.topic, "subscription": cmd.subscription}
            if cmd.HasField("consumer_name"):
                info["name"] = cmd.consumer_name
            session.consumers[cmd.consumer_id] = info

    @staticmethod
    def _learn(session: _Session, req: FrameEvent, resp: FrameEvent) -> None:
        # The broker names anonymous producers in PRODUCER_SUCCESS.
        if req.frame.type_num == PRODUCER and resp.frame.type_num == PRODUCER_SUCCESS:
            info = session.producers.get(req.frame.command.producer_id)
            if info is not None and "name" not in info:
                info["name"] = resp.frame.command.producer_name


def _has(cmd, name: str) -> bool:
    return name in cmd.DESCRIPTOR.fields_by_name and cmd.HasField(name)


def _answer(resp: FrameEvent, req: FrameEvent) -> None:
    resp.notes["answers"] = req.index
    resp.notes["latency_ms"] = round((resp.time - req.time) * 1000.0, 3)


def topic_of(ev: FrameEvent) -> str | None:
    cmd = ev.frame.command
    if cmd is not None and hasattr(cmd, "topic") and cmd.HasField("topic"):
        return cmd.topic
    for key in ("producer", "consumer"):
        info = ev.notes.get(key)
        if info:
            return info.get("topic")
    return None
