"""Pulsar conversation state for one connection: producers, consumers, flow permits, acknowledgements,
sequence ids, redeliveries and chunked messages.

The generic pairing (``analysis.conversation``) has already matched the frame with the request it answers;
this adds what only Pulsar knows, as notes and findings of the frame being processed. Nothing here edits a
frame, and what is remembered about an earlier frame is a few ids, never its payload.
"""

from __future__ import annotations

from collections import OrderedDict
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
    # _entry_key(ledger, entry) -> MESSAGE frame index; both capped (oldest forgotten) so memory stays bounded
    delivered: OrderedDict = field(default_factory=OrderedDict)
    unacked: OrderedDict = field(default_factory=OrderedDict)


@dataclass(slots=True)
class _Producer:
    info: dict
    last_sequence_id: int | None = None


def _unacked(ident, consumer: "_Consumer") -> Finding:
    frames = list(consumer.unacked.values())
    return Finding("consumer.unacked", {"consumer_id": ident, "name": consumer.info.get("name"),
                                        "count": len(frames), "frames": frames[:20]})


def _entry_key(ledger: int, entry: int) -> int:
    """One int per (ledger, entry), ordered as the pair: a quarter less memory than a tuple in the tables
    of up to max_remembered_messages ids per consumer."""
    return (ledger << 64) | (entry & 0xFFFFFFFFFFFFFFFF)


class PulsarSession:
    def __init__(self, options: Options, conn: int, mid_stream: bool) -> None:
        self.options = options
        self.mid_stream = mid_stream
        self.producers: OrderedDict[int, _Producer] = OrderedDict()
        self.consumers: OrderedDict[int, _Consumer] = OrderedDict()
        self.redirects: dict[str, int] = {}  # topic -> lookups redirected
        self.closed: OrderedDict[tuple, dict] = OrderedDict()  # (scope, id) of closed actors -> their info
        self.chunks = ChunkAssembler(options.max_decompressed, options.max_chunked_messages, options.max_chunk_bytes)
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
        if t == "SEND":
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
        elif t in ("ERROR", "SEND_ERROR"):
            findings.append(Finding("server.error", {"type": t, "error": cmd.get("error", "?"),
                                                     "message": cmd.get("message")}))
        elif t in ("CLOSE_PRODUCER", "CLOSE_CONSUMER"):
            if frame.direction == TO_CLIENT:
                notes["broker_initiated"] = True
            self._on_close(t, cmd, findings)
        return events

    def _on_close(self, t: str, cmd: dict, findings: list) -> None:
        """The actor is gone: later frames about it are a client bug; messages it never acked are said now."""
        scope = "producer" if t == "CLOSE_PRODUCER" else "consumer"
        ident = cmd.get(f"{scope}_id")
        actor = (self.producers if scope == "producer" else self.consumers).pop(ident, None)
        if actor is None:
            return
        remember_bounded(self.closed, (scope, ident), actor.info, self.options.max_actors)
        if scope == "consumer" and actor.unacked and actor.durable:
            findings.append(_unacked(ident, actor))

    def close(self, time: float, packet: int) -> list[Event]:
        events = [Event("UNFINISHED_CHUNKS", time, packet, self.drops.conn,
                        details={"uuid": part.uuid, "chunks": part.frames},
                        params={"seen": part.next_chunk, "num_chunks": part.num_chunks})
                  for part in self.chunks.pending()]
        for ident, consumer in self.consumers.items():
            if consumer.unacked and consumer.durable:
                finding = _unacked(ident, consumer)
                events.append(Event("UNACKED_AT_END", time, packet, self.drops.conn, details=finding.params))
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
            if producer is not None and "name" not in producer.info and "producer_name" in cmd:
                producer.info = {**producer.info, "name": cmd["producer_name"]}
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
                                body.messages[0]["payload"], findings)
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
        message_id = cmd.get("message_id") or {}
        ledger, entry = message_id.get("ledgerId", 0), message_id.get("entryId", 0)
        mid = _entry_key(ledger, entry)
        earlier = consumer.delivered.get(mid)
        redelivery_count = cmd.get("redelivery_count", 0)
        if earlier is not None or redelivery_count:
            findings.append(Finding("message.redelivered", {"ledger": ledger, "entry": entry, "first_frame": earlier,
                                                            "redelivery_count": redelivery_count}))
        cap = self.options.max_remembered_messages
        dropped = remember_bounded(consumer.delivered, mid, frame.index, cap)
        remember_bounded(consumer.unacked, mid, frame.index, cap)
        return self._dropped(frame, "max_remembered_messages", "delivered message ids") if dropped else None

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

    def _dropped(self, frame: Frame, option: str, what: str) -> list[Event] | None:
        event = self.drops.drop(option, what, getattr(self.options, option), frame.time, frame.packet)
        return [event] if event is not None else None
