"""Pulsar conversation state for one connection: producers, consumers, flow permits, acknowledgements,
sequence ids, redeliveries and chunked messages.

The generic pairing (``analysis.conversation``) has already matched the frame with the request it answers;
this adds what only Pulsar knows, as notes and findings of the frame being processed. Nothing here edits a
frame, and what is remembered about an earlier frame is a few ids, never its payload.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import islice
from dataclasses import dataclass, field

from ...analysis.bounded import DropCounter, remember_bounded
from ...model import Event, Frame, TO_CLIENT
from ...options import Options
from ...problems import Finding
from ..base import CommandSpec, Waiting
from .chunks import ChunkAssembler


@dataclass(slots=True)
class _Consumer:
    info: dict  # replaced, never edited: records that carry it must not change afterwards
    durable: bool = True  # a reader's subscription is not: it never acknowledges, by design
    permits: int = 0
    flow_seen: bool = False
    # _entry_key(ledger, entry) -> MESSAGE frame index (of the first delivery; of the latest for unacked);
    # every table capped (oldest forgotten) so memory stays bounded
    delivered: OrderedDict = field(default_factory=OrderedDict)
    unacked: OrderedDict = field(default_factory=OrderedDict)
    repeated: OrderedDict = field(default_factory=OrderedDict)  # key -> [frames, redelivery_count]
    asked: OrderedDict = field(default_factory=OrderedDict)  # key -> REDELIVER frame that named it
    asked_all: int | None = None  # the last REDELIVER that asked for every unacknowledged message
    more_messages: int = 0  # messages repeated beyond max_redelivered_reported, and their repeated deliveries
    more_deliveries: int = 0


@dataclass(slots=True)
class _Repeat:
    """The deliveries of one message seen more than once: the first frames (capped) and how many in all."""

    frames: list
    redelivery_count: int
    count: int = 0

    def __post_init__(self) -> None:
        self.count = len(self.frames)

    def add(self, frame: int, redelivery_count: int) -> None:
        self.count += 1
        if len(self.frames) < _FRAMES_KEPT:
            self.frames.append(frame)
        self.redelivery_count = max(self.redelivery_count, redelivery_count)


_BUDGET_EVERY = 1024  # deliveries between two looks at the global budget (each adds up to 2 ids)

_EXCLUSIVE = ("Exclusive", "WaitForExclusive", "ExclusiveWithFencing")


class SharedState:
    """What Pulsar's analysis knows across connections: the producers that hold each topic (a broker's
    Exclusive guarantee spans every client)."""

    def __init__(self, options: Options) -> None:
        self.cap = options.max_actors
        self.topic_producers: OrderedDict[str, dict[tuple, dict]] = OrderedDict()  # topic -> (conn, id) -> info
        # the message ids remembered by every consumer of every open connection, held to one budget
        self.budget = options.max_remembered_total
        self.sessions: set[PulsarSession] = set()
        self.deliveries = 0

    def over_budget(self) -> int:
        """Every _BUDGET_EVERY deliveries: how many remembered ids are over the budget (0 if none)."""
        self.deliveries += 1
        if self.deliveries % _BUDGET_EVERY:
            return 0
        total = sum(len(c.delivered) + len(c.unacked) for s in self.sessions for c in s.consumers.values())
        return max(0, total - self.budget)

    def shrink(self, excess: int) -> int:
        """Forget the oldest ids of the consumers that remember the most (delivered ids before unacknowledged
        ones) until ``excess`` are gone, with some room to spare; returns how many were forgotten."""
        target = excess + self.budget // 16
        forgotten = 0
        consumers = [c for s in self.sessions for c in s.consumers.values()]
        while forgotten < target and consumers:
            largest = max(consumers, key=lambda c: len(c.delivered) + len(c.unacked))
            table = largest.delivered if largest.delivered else largest.unacked
            if not table:
                break
            for _ in range(min(len(table), target - forgotten, _BUDGET_EVERY)):
                table.popitem(last=False)
                forgotten += 1
        return forgotten

    def producer_ready(self, conn: int, info: dict) -> list[tuple[tuple, dict]]:
        """A producer got its PRODUCER_SUCCESS: the producers it now shares an exclusive topic with."""
        topic = info.get("topic")
        held = self.topic_producers.pop(topic, None) or {}
        remember_bounded(self.topic_producers, topic, held, self.cap)  # most recently used last
        mode = info.get("access_mode", "Shared")
        if mode == "ExclusiveWithFencing":
            held.clear()  # it fences the others out: the broker closes them
        conflicts = [(key, other) for key, other in held.items()
                     if mode in _EXCLUSIVE or other.get("access_mode", "Shared") in _EXCLUSIVE]
        held[(conn, info.get("id"))] = info
        return conflicts

    def producer_gone(self, conn: int, ident) -> None:
        for held in self.topic_producers.values():
            if held.pop((conn, ident), None) is not None:
                return

    def connection_gone(self, conn: int) -> None:
        for held in self.topic_producers.values():
            for key in [k for k in held if k[0] == conn]:
                del held[key]


@dataclass(slots=True)
class _Producer:
    info: dict
    last_sequence_id: int | None = None


def _unacked(ident, consumer: "_Consumer") -> Finding:
    frames = list(consumer.unacked.values())
    return Finding("consumer.unacked", {"consumer_id": ident, "name": consumer.info.get("name"),
                                        "count": len(frames), "frames": frames[:20]})


_LINKS_SHOWN = 100  # frame indexes a record lists at most (the count says how many in all)
_COUNT_SHIFT = 48  # delivered-table values: the delivery count above, the first delivery's frame below
_FRAME_MASK = (1 << _COUNT_SHIFT) - 1
_FRAMES_KEPT = 20  # deliveries of one message remembered for its REDELIVERED warning (the count is exact)


def _subscription(consumer: "_Consumer") -> tuple:
    return consumer.info.get("topic"), consumer.info.get("subscription")


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _entry_key(ledger: int, entry: int) -> int:
    """One int per (ledger, entry), ordered as the pair: a quarter less memory than a tuple in the tables
    of up to max_remembered_messages ids per consumer."""
    return (ledger << 64) | (entry & 0xFFFFFFFFFFFFFFFF)


class PulsarSession:
    def __init__(self, options: Options, conn: int, mid_stream: bool, shared: SharedState | None = None) -> None:
        self.options = options
        self.conn = conn
        self.shared = shared if shared is not None else SharedState(options)
        self.shared.sessions.add(self)
        self.seeks: dict = {}  # (topic, subscription) -> SEEK frame whose first delivery is still to come
        self.mid_stream = mid_stream
        self.producers: OrderedDict[int, _Producer] = OrderedDict()
        self.consumers: OrderedDict[int, _Consumer] = OrderedDict()
        self.redirects: dict[str, int] = {}  # topic -> lookups redirected
        self.closed: OrderedDict[tuple, dict] = OrderedDict()  # (scope, id) of closed actors -> their info
        self.chunks = ChunkAssembler(options.max_decompressed, options.max_chunked_messages, options.max_chunk_bytes,
                                     mid_stream=mid_stream)
        self.drops = DropCounter(conn)

    def on_frame(self, frame: Frame, spec: CommandSpec | None, request: Waiting | None, notes: dict,
                 findings: list) -> list[Event] | None:
        if spec is None:
            return None  # an unknown or malformed command: nothing to learn from it
        t = spec.name
        cmd = frame.pdu.command
        events: list[Event] | None = None
        if request is not None:
            self._learn(t, cmd, request, findings)
        if spec.scope is not None:
            actors = self.producers if spec.scope == "producer" else self.consumers
            ident = cmd.get(spec.scope_id)
            actor = actors.get(ident)
            if actor is not None:
                notes[spec.scope] = actor.info
            elif (spec.scope, ident) in self.closed and frame.direction != TO_CLIENT \
                    and t not in ("CLOSE_PRODUCER", "CLOSE_CONSUMER"):
                info = self.closed[(spec.scope, ident)]
                notes[spec.scope] = info
                findings.append(Finding("actor.used_after_close", {"type": t, "actor": spec.scope, "id": ident,
                                                                   "name": info.get("name")}))
        if t == "PRODUCER":
            events = self._new_producer(frame, cmd)
        elif t == "SUBSCRIBE":
            events = self._new_consumer(frame, cmd)
        body = frame.pdu.body
        if body is not None and body.messages and "chunk_id" in body.messages[0]:
            self._add_chunk(frame, cmd, body, notes, findings)
        if t == "SEND" and not (body is None and frame.pdu.findings):  # not a SEND cut inside its command
            self._on_send(cmd, findings)
        elif t == "MESSAGE":
            events = self._on_message(frame, cmd, notes, findings)
        elif t == "FLOW":
            consumer = self.consumers.get(cmd.get("consumer_id"))
            if consumer is not None:
                consumer.permits += cmd.get("messagePermits", 0)
                consumer.flow_seen = True
                notes["permits"] = consumer.permits
        elif t == "ACK":
            self._on_ack(cmd, notes)
        elif t == "REDELIVER_UNACKNOWLEDGED_MESSAGES":
            self._on_redeliver(frame, cmd, notes)
        elif t == "SEEK":
            consumer = self.consumers.get(cmd.get("consumer_id"))
            if consumer is not None:  # the subscription moves: a consumer subscribing again lands there too
                self.seeks[_subscription(consumer)] = frame.index
        elif t in ("ERROR", "SEND_ERROR"):
            findings.append(Finding("server.error", {"type": t, "error": cmd.get("error", "?"),
                                                     "message": cmd.get("message")}))
        elif t in ("CLOSE_PRODUCER", "CLOSE_CONSUMER"):
            if frame.direction == TO_CLIENT:
                notes["broker_initiated"] = True
            closed = self._on_close(frame, t, cmd, findings)
            if closed:
                events = (events or []) + closed
        return events

    def _on_close(self, frame: Frame, t: str, cmd: dict, findings: list) -> list[Event] | None:
        """The actor is gone: later frames about it are a client bug; messages it never acked and messages
        delivered more than once are said now."""
        scope = "producer" if t == "CLOSE_PRODUCER" else "consumer"
        ident = cmd.get(f"{scope}_id")
        actor = (self.producers if scope == "producer" else self.consumers).pop(ident, None)
        if actor is None:
            return None
        remember_bounded(self.closed, (scope, ident), actor.info, self.options.max_actors)
        if scope == "producer":
            self.shared.producer_gone(self.conn, ident)
            return None
        if actor.unacked and actor.durable:
            findings.append(_unacked(ident, actor))
        return self._repeated(ident, actor, frame.time, frame.packet) or None

    def _repeated(self, ident, consumer: _Consumer, time: float, packet: int) -> list[Event]:
        """One REDELIVERED warning per message this consumer got more than once (or flagged as redelivered)."""
        out = []
        for key, repeat in consumer.repeated.items():
            out.append(Event("REDELIVERED", time, packet, self.conn, details={
                "consumer_id": ident, "name": consumer.info.get("name"), "ledger": key >> 64,
                "entry": _signed64(key & 0xFFFFFFFFFFFFFFFF), "count": repeat.count, "frames": repeat.frames,
                "redelivery_count": repeat.redelivery_count}))
        if consumer.more_messages:  # one line for the rest: a warning per message would flood
            out.append(Event("REDELIVERED", time, packet, self.conn, details={
                "consumer_id": ident, "name": consumer.info.get("name"), "more_messages": consumer.more_messages,
                "count": consumer.more_deliveries}))
        consumer.repeated.clear()
        consumer.more_messages = consumer.more_deliveries = 0
        return out

    def close(self, time: float, packet: int) -> list[Event]:
        events = [Event("UNFINISHED_CHUNKS", time, packet, self.drops.conn,
                        details={"uuid": part.uuid, "chunks": part.frames},
                        params={"seen": part.next_chunk, "num_chunks": part.num_chunks})
                  for part in self.chunks.pending()]
        for ident, consumer in self.consumers.items():
            if consumer.unacked and consumer.durable:
                finding = _unacked(ident, consumer)
                events.append(Event("UNACKED_AT_END", time, packet, self.drops.conn, details=finding.params))
            events.extend(self._repeated(ident, consumer, time, packet))
        self.shared.connection_gone(self.conn)
        self.shared.sessions.discard(self)
        return events + self.drops.close(time, packet)

    # ------------------------------------------------------------------ actors

    def _new_producer(self, frame: Frame, cmd: dict) -> list[Event] | None:
        info = {"id": cmd.get("producer_id"), "topic": cmd.get("topic")}
        if "producer_name" in cmd:
            info["name"] = cmd["producer_name"]
        if "producer_access_mode" in cmd:
            info["access_mode"] = cmd["producer_access_mode"]
        if remember_bounded(self.producers, info["id"], _Producer(info), self.options.max_actors):
            return self._dropped(frame, "max_actors", "producers")
        return None

    def _new_consumer(self, frame: Frame, cmd: dict) -> list[Event] | None:
        info = {"id": cmd.get("consumer_id"), "topic": cmd.get("topic"), "subscription": cmd.get("subscription"),
                "type": cmd.get("subType")}
        if "consumer_name" in cmd:
            info["name"] = cmd["consumer_name"]
        consumer = _Consumer(info, durable=cmd.get("durable", True) is not False)
        if remember_bounded(self.consumers, info["id"], consumer, self.options.max_actors):
            return self._dropped(frame, "max_actors", "consumers")
        return None

    def _learn(self, t: str, cmd: dict, request: Waiting, findings: list) -> None:
        if t == "PRODUCER_SUCCESS" and request.type == "PRODUCER":
            # The broker names anonymous producers in PRODUCER_SUCCESS.
            producer = self.producers.get(request.kept.get("producer_id"))
            if producer is None:
                return
            if "name" not in producer.info and "producer_name" in cmd:
                producer.info = {**producer.info, "name": cmd["producer_name"]}
            if cmd.get("producer_ready", True) is not False:  # not the interim answer of WaitForExclusive
                for (conn, ident), other in self.shared.producer_ready(self.conn, producer.info):
                    findings.append(Finding("producer.exclusive_conflict", {
                        "topic": producer.info.get("topic"), "mode": producer.info.get("access_mode", "Shared"),
                        "other_conn": conn, "other_producer_id": ident, "other_name": other.get("name"),
                        "other_mode": other.get("access_mode", "Shared")}))
        elif t == "LOOKUP_RESPONSE" and request.type == "LOOKUP" and cmd.get("response") == "Redirect":
            topic = request.kept.get("topic")
            count = self.redirects[topic] = self.redirects.get(topic, 0) + 1
            if count == self.options.redirect_loop_limit:
                findings.append(Finding("lookup.redirect_loop", {"topic": topic, "limit": count}))

    # ------------------------------------------------------------------ producers

    def _on_send(self, cmd: dict, findings: list) -> None:
        pid = cmd.get("producer_id")
        producer = self.producers.get(pid)
        if producer is None:
            if not self.mid_stream and ("producer", pid) not in self.closed:  # after a close: said already
                findings.append(Finding("send.unknown_producer", {"producer_id": pid}))
            return
        first = cmd.get("sequence_id", 0)
        last = cmd["highest_sequence_id"] if "highest_sequence_id" in cmd \
            else first + max(cmd.get("num_messages", 1), 1) - 1
        previous = producer.last_sequence_id
        if previous is not None and not (cmd.get("is_chunk") and first == previous):
            if first <= previous:
                # A note, not a warning: an explicit sequence_id set by the application is legitimate.
                findings.append(Finding("sequence.regression", {"first": first, "previous": previous,
                                                                "producer_id": pid,
                                                                "name": producer.info.get("name")}))
            elif first > previous + 1:
                findings.append(Finding("sequence.gap", {"first": first, "previous": previous}))
        producer.last_sequence_id = max(last, previous if previous is not None else last)

    def _add_chunk(self, frame: Frame, cmd: dict, body, notes: dict, findings: list) -> None:
        actor = cmd.get("producer_id") if frame.pdu.type == "SEND" else cmd.get("consumer_id")
        whole = self.chunks.add((frame.direction, actor), frame.index, body.metadata, body.compression,
                                body.messages[0]["payload"], findings, time=frame.time, checksum=body.checksum)
        if whole is not None:
            notes["reassembled"] = whole

    # ------------------------------------------------------------------ consumers

    def _on_message(self, frame: Frame, cmd: dict, notes: dict, findings: list) -> list[Event] | None:
        cid = cmd.get("consumer_id")
        consumer = self.consumers.get(cid)
        if consumer is None:
            return None
        if consumer.flow_seen and consumer.permits <= 0:
            findings.append(Finding("flow.overrun", {"consumer_id": cid, "name": consumer.info.get("name")}))
        body = frame.pdu.body
        md = body.metadata if body is not None else None
        consumer.permits -= md.get("num_messages_in_batch", 1) if md is not None else 1
        # delayed delivery applies to Shared and Key_Shared subscriptions only (others get messages at once)
        if md is not None and "deliver_at_time" in md and frame.time * 1000 < md["deliver_at_time"] \
                and consumer.info.get("type") in ("Shared", "Key_Shared"):
            findings.append(Finding("message.early_delivery", {"early_ms": md["deliver_at_time"] - frame.time * 1000,
                                                               "deliver_at": md["deliver_at_time"]}))
        notes["permits"] = consumer.permits
        seek = self.seeks.pop(_subscription(consumer), None) if self.seeks else None
        if seek is not None:
            notes["after_seek"] = seek  # the first message delivered after the SEEK: where it landed
        message_id = cmd.get("message_id") or {}
        ledger, entry = message_id.get("ledgerId", 0), message_id.get("entryId", 0)
        mid = _entry_key(ledger, entry)
        seen = consumer.delivered.get(mid)  # deliveries so far << _COUNT_SHIFT | the first one's frame
        redelivery_count = cmd.get("redelivery_count", 0)
        cap = self.options.max_remembered_messages
        asked = consumer.asked.pop(mid, None) if consumer.asked else None
        if asked is None and consumer.asked_all is not None:
            latest = consumer.unacked.get(mid)
            if latest is not None and latest < consumer.asked_all:  # unacknowledged when "all" was asked for
                asked = consumer.asked_all
        if asked is not None:
            notes["redelivery_requested_by"] = asked
        first = None if seen is None else seen & _FRAME_MASK
        count = 1 if seen is None else (seen >> _COUNT_SHIFT) + 1
        dropped = remember_bounded(consumer.delivered, mid, (count << _COUNT_SHIFT) | (frame.index if first is None else first), cap)
        if first is not None or redelivery_count:
            self._repeat(consumer, mid, first, frame.index, redelivery_count)
            params = {"ledger": ledger, "entry": entry, "first_frame": first, "redelivery_count": redelivery_count}
            if first is not None:
                notes["delivery"] = params["delivery"] = count
            findings.append(Finding("message.redelivered", params))
        remember_bounded(consumer.unacked, mid, frame.index, cap)
        excess = self.shared.over_budget()
        if excess:
            self.shared.shrink(excess)
            return self._dropped(frame, "max_remembered_total", "message ids remembered over all consumers")
        return self._dropped(frame, "max_remembered_messages", "delivered message ids") if dropped else None

    def _repeat(self, consumer: _Consumer, mid: int, first: int | None, index: int, redelivery_count: int) -> None:
        """Keep the frames of the first messages seen more than once, for their REDELIVERED warnings; beyond
        max_redelivered_reported only count them (the delivered table knows each one's count)."""
        repeat = consumer.repeated.get(mid)
        if repeat is not None:
            repeat.add(index, redelivery_count)
        elif len(consumer.repeated) < self.options.max_redelivered_reported:
            consumer.repeated[mid] = _Repeat([first, index] if first is not None else [index], redelivery_count)
        else:
            consumer.more_deliveries += 1
            if first is None or (consumer.delivered[mid] >> _COUNT_SHIFT) == 2:
                consumer.more_messages += 1  # the first repeat of this message

    def _on_ack(self, cmd: dict, notes: dict) -> None:
        consumer = self.consumers.get(cmd.get("consumer_id"))
        if consumer is None:
            return
        acked: list[int] = []
        cumulative = cmd.get("ack_type") == "Cumulative"
        unacked = consumer.unacked
        for mid in cmd.get("message_id", ()):
            key = _entry_key(mid.get("ledgerId", 0), mid.get("entryId", 0))
            if cumulative:
                for k in [k for k in unacked if k <= key]:
                    acked.append(unacked.pop(k))
            elif any(mid.get("ack_set", ())):
                # A batch-index ack: the entry is acknowledged only in part.
                if key in unacked:
                    acked.append(unacked[key])
            else:
                message = unacked.pop(key, None)
                if message is not None:
                    acked.append(message)
        if acked:
            notes["acks"] = sorted(set(acked))

    def _on_redeliver(self, frame: Frame, cmd: dict, notes: dict) -> None:
        """Link the request to the MESSAGE frames it asks for again (all unacknowledged ones when it names
        none), and remember it so the redelivered MESSAGE can point back to it."""
        consumer = self.consumers.get(cmd.get("consumer_id"))
        if consumer is None:
            return
        ids = cmd.get("message_ids")
        if ids:
            keys = [_entry_key(m.get("ledgerId", 0), m.get("entryId", 0)) for m in ids]
            frames = sorted(consumer.unacked[k] for k in keys if k in consumer.unacked)
            for key in keys:
                remember_bounded(consumer.asked, key, frame.index, self.options.max_remembered_messages)
            count = len(frames)
        else:
            # every unacknowledged message: one marker, not one entry per message (the table can be large)
            consumer.asked_all = frame.index
            count = len(consumer.unacked)
            frames = sorted(islice(consumer.unacked.values(), _LINKS_SHOWN)) if count else []
        if count:
            notes["redelivers"] = frames[:_LINKS_SHOWN]
            notes["redelivers_count"] = count

    def _dropped(self, frame: Frame, option: str, what: str) -> list[Event] | None:
        event = self.drops.drop(option, what, getattr(self.options, option), frame.time, frame.packet)
        return [event] if event is not None else None
