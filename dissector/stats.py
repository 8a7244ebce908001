"""Capture statistics: per connection, topic, producer and consumer; latency percentiles per request type.

Consumes the analysed event stream (after ``analysis``) one event at a time and keeps only counters and the
latency samples, so it runs in one pass beside any other output. ``result()`` returns plain data (the JSON of
``pulsar-dissect stats --json``); rendering lives elsewhere.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from . import pbdict
from .expert import is_note, problem_id, severity
from .pipeline import TO_BROKER, FrameEvent, StreamEvent


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


class Reservoir:
    """A uniform random sample of at most ``cap`` of the items added (Algorithm R); seeded, so the same
    capture always gives the same figures."""

    __slots__ = ("cap", "seen", "items", "_rng")

    def __init__(self, cap: int, seed: int = 1) -> None:
        self.cap = cap
        self.seen = 0
        self.items: list = []
        self._rng = random.Random(seed)

    def add(self, item) -> None:
        self.seen += 1
        if len(self.items) < self.cap:
            self.items.append(item)
        else:
            slot = self._rng.randrange(self.seen)
            if slot < self.cap:
                self.items[slot] = item


class Latencies:
    """Count, mean and max exactly; percentiles from a reservoir of at most ``cap`` values (exact while fewer
    were seen), so memory stays bounded however long the capture."""

    __slots__ = ("total", "max", "sample")

    def __init__(self, cap: int = 100_000) -> None:
        self.total = 0.0
        self.max: float | None = None
        self.sample = Reservoir(cap)

    @property
    def count(self) -> int:
        return self.sample.seen

    def add(self, value: float) -> None:
        self.total += value
        if self.max is None or value > self.max:
            self.max = value
        self.sample.add(value)

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.sample.items)
        return {
            "count": self.count,
            "p50": percentile(ordered, 50),
            "p90": percentile(ordered, 90),
            "p99": percentile(ordered, 99),
            "max": self.max,
            "mean": round(self.total / self.count, 3) if self.count else None,
            "exact": self.count <= self.sample.cap,
        }


def latency_summary(values: list[float]) -> dict[str, Any]:
    lat = Latencies(cap=max(len(values), 1))
    for v in values:
        lat.add(v)
    return lat.summary()


PLOT_SAMPLES = 50_000  # responses drawn in a latency plot at most


@dataclass
class _Actor:
    info: dict
    frames: int = 0
    messages: int = 0
    payload_bytes: int = 0  # application bytes (after decompression)
    wire_bytes: int = 0  # payload bytes as sent (compressed)
    batches: int = 0
    batched_messages: int = 0
    compression: Counter = field(default_factory=Counter)
    compressed_wire: int = 0  # bytes of the compressed payloads that were decompressed ...
    compressed_plain: int = 0  # ... and what they decompressed to (the compression ratio)
    errors: Counter = field(default_factory=Counter)
    acks: int = 0
    permits: int = 0
    redeliveries: int = 0
    receipts: int = 0
    send_latency: "Latencies" = field(default_factory=lambda: Latencies())


class StatsCollector:
    def __init__(self) -> None:
        self.connections: dict[int, dict] = {}
        self.topics: dict[str, dict] = defaultdict(lambda: {"messages_sent": 0, "bytes_sent": 0,
                                                            "messages_received": 0, "bytes_received": 0,
                                                            "producers": set(), "consumers": set()})
        self.producers: dict[tuple[int, int], _Actor] = {}
        self.consumers: dict[tuple[int, int], _Actor] = {}
        self.latency: dict[str, Latencies] = defaultdict(Latencies)
        # (time, request type, ms) for plots: a bounded sample too, put back in time order when drawn
        self._plot = Reservoir(PLOT_SAMPLES)
        self.types: Counter = Counter()
        self.server_errors: Counter = Counter()
        self.expert: Counter = Counter()
        self.events: Counter = Counter()
        self.frames = 0
        self.first_time: float | None = None
        self.last_time: float | None = None

    # ------------------------------------------------------------------ input

    def add(self, ev) -> None:
        if type(ev) is FrameEvent:
            self._frame(ev)
        elif type(ev) is StreamEvent:
            self._event(ev)

    def _event(self, ev: StreamEvent) -> None:
        self.events[ev.kind] += 1
        if ev.conn is None:
            return
        conn = self._conn(ev.conn.id, ev.time)
        if ev.kind == "CONNECTION_OPENED":
            conn["client"], conn["broker"] = ev.details.get("client"), ev.details.get("broker")
            conn["mid_stream"] = ev.details.get("mid_stream", False)
        elif ev.kind == "CONNECTION_CLOSED":
            conn["closed"] = ev.details.get("how")
            if "closed_by" in ev.details:
                conn["closed_by"] = ev.details["closed_by"]
        elif ev.kind != "CONNECTION_OPENED":
            conn["events"][ev.kind] += 1

    def _conn(self, conn_id: int, time: float) -> dict:
        conn = self.connections.get(conn_id)
        if conn is None:
            conn = self.connections[conn_id] = {
                "conn": conn_id, "client": None, "broker": None, "first_time": time, "last_time": time,
                "frames_to_broker": 0, "frames_to_client": 0, "bytes_to_broker": 0, "bytes_to_client": 0,
                "problems": 0, "events": Counter(), "latency": defaultdict(Latencies),
            }
        return conn

    def _frame(self, ev: FrameEvent) -> None:
        frame = ev.frame
        self.frames += 1
        self.types[frame.type] += 1
        if self.first_time is None:
            self.first_time = ev.time
        self.last_time = ev.time
        conn = self._conn(ev.conn.id, ev.time)
        conn["last_time"] = ev.time
        side = "to_broker" if ev.direction == TO_BROKER else "to_client"
        conn["frames_" + side] += 1
        conn["bytes_" + side] += frame.size
        if conn["client"] is None:
            conn["client"], conn["broker"] = (str(ev.src), str(ev.dst)) if ev.direction == TO_BROKER \
                else (str(ev.dst), str(ev.src))
        cmd = frame.command
        if frame.type == "CONNECT" and cmd is not None:
            conn["client_version"] = pbdict.text(cmd.client_version)
            conn["protocol_version"] = cmd.protocol_version
        elif frame.type == "CONNECTED" and cmd is not None:
            conn["server_version"] = pbdict.text(cmd.server_version)
        for p in frame.problems:
            self.expert[(problem_id(p), severity(p))] += 1
            if not is_note(p):
                conn["problems"] += 1
        if frame.type in ("ERROR", "SEND_ERROR") and cmd is not None:
            self.server_errors[pbdict.enum_name(cmd.DESCRIPTOR, "error", cmd.error)] += 1
        producer, consumer = ev.notes.get("producer"), ev.notes.get("consumer")
        latency = ev.notes.get("latency_ms")
        if latency is not None and "answers" in ev.notes:
            kind = ev.request_type or ev.frame.type
            self.latency[kind].add(latency)
            self._plot.add((ev.time, kind, latency))
            conn["latency"][kind].add(latency)
            if producer is not None and kind == "SEND":
                self._actor(self.producers, ev, producer, count=False).send_latency.add(latency)
        if producer is not None:
            self._producer(ev, producer)
        if consumer is not None:
            self._consumer(ev, consumer)

    @staticmethod
    def _actor(table: dict, ev: FrameEvent, info: dict, count: bool = True) -> _Actor:
        key = (ev.conn.id, info.get("id", -1))
        actor = table.get(key)
        if actor is None:
            actor = table[key] = _Actor(info)
        if count:
            actor.frames += 1
        return actor

    @property
    def latency_samples(self) -> list[tuple[float, str, float]]:
        """(time, request type, ms) of the responses kept for plotting, in time order."""
        return sorted(self._plot.items)

    def _count_messages(self, actor: _Actor, info: dict, sec, side: str) -> None:
        """Messages and bytes of one SEND (side "sent") or MESSAGE ("received") for the actor and its topic."""
        topic = self.topics[info.get("topic", "?")]
        topic["producers" if side == "sent" else "consumers"].add(info.get("name") or str(info.get("id")))
        n, size = _message_totals(sec)
        actor.messages += n
        actor.payload_bytes += size
        actor.wire_bytes += len(sec.raw_payload)
        topic["messages_" + side] += n
        topic["bytes_" + side] += size

    def _producer(self, ev: FrameEvent, info: dict) -> None:
        actor = self._actor(self.producers, ev, info)
        frame = ev.frame
        if frame.type == "SEND" and frame.payload is not None:
            sec = frame.payload
            self._count_messages(actor, info, sec, "sent")
            md = sec.metadata
            if md is not None:
                if md.HasField("num_messages_in_batch"):
                    actor.batches += 1
                    actor.batched_messages += md.num_messages_in_batch
                if md.compression:
                    actor.compression[md.compression] += 1
                    if sec.decompressed is not None:
                        actor.compressed_wire += len(sec.raw_payload)
                        actor.compressed_plain += len(sec.decompressed)
        elif frame.type == "SEND_RECEIPT":
            actor.receipts += 1
        elif frame.type == "SEND_ERROR" and frame.command is not None:
            actor.errors[pbdict.enum_name(frame.command.DESCRIPTOR, "error", frame.command.error)] += 1

    def _consumer(self, ev: FrameEvent, info: dict) -> None:
        actor = self._actor(self.consumers, ev, info)
        frame = ev.frame
        if frame.type == "MESSAGE" and frame.payload is not None:
            self._count_messages(actor, info, frame.payload, "received")
            if frame.command is not None and frame.command.redelivery_count:
                actor.redeliveries += 1
        elif frame.type == "ACK":
            actor.acks += 1
        elif frame.type == "FLOW" and frame.command is not None:
            actor.permits += frame.command.messagePermits

    # ------------------------------------------------------------------ output

    def result(self) -> dict[str, Any]:
        duration = (self.last_time - self.first_time) if self.first_time is not None else 0.0
        return {
            "frames": self.frames,
            "duration_s": round(duration, 6),
            "first_time": self.first_time,
            "last_time": self.last_time,
            "types": dict(self.types.most_common()),
            "connections": [self._conn_out(c) for c in self.connections.values()],
            "topics": {t: {**v, "producers": sorted(v["producers"]), "consumers": sorted(v["consumers"])}
                       for t, v in sorted(self.topics.items())},
            "producers": [self._actor_out(k, a, producer=True) for k, a in self.producers.items()],
            "consumers": [self._actor_out(k, a, producer=False) for k, a in self.consumers.items()],
            "latency_ms": {k: v.summary() for k, v in sorted(self.latency.items())},
            "server_errors": dict(self.server_errors),
            "expert": [{"id": i, "severity": s, "count": n} for (i, s), n in self.expert.most_common()],
            "events": dict(self.events),
        }

    @staticmethod
    def _conn_out(c: dict) -> dict:
        out = {k: v for k, v in c.items() if k not in ("events", "latency")}
        out["latency_ms"] = {k: v.summary() for k, v in sorted(c["latency"].items())}
        out["duration_s"] = round(c["last_time"] - c["first_time"], 6)
        out["events"] = dict(c["events"])
        return out

    @staticmethod
    def _actor_out(key: tuple[int, int], a: _Actor, *, producer: bool) -> dict:
        from .codecs import CODEC_NAMES

        out = {"conn": key[0], **a.info, "frames": a.frames, "messages": a.messages,
               "payload_bytes": a.payload_bytes, "wire_bytes": a.wire_bytes}
        if producer:
            out.update(receipts=a.receipts, batches=a.batches,
                       send_latency_ms=a.send_latency.summary() if a.send_latency.count else None,
                       avg_batch_size=round(a.batched_messages / a.batches, 1) if a.batches else None,
                       compression={CODEC_NAMES.get(c, str(c)): n for c, n in a.compression.items()},
                       compression_ratio=(round(a.compressed_plain / a.compressed_wire, 2) if a.compressed_wire
                                          else None),
                       errors={str(k): v for k, v in a.errors.items()})
        else:
            out.update(acks=a.acks, permits_granted=a.permits, redelivered_frames=a.redeliveries)
        return out


def _message_totals(sec) -> tuple[int, int]:
    msgs = sec.messages
    return len(msgs), sum(m.payload_size or 0 for m in msgs)
