"""Capture statistics: per connection, topic, producer and consumer; latency percentiles per request type.

Consumes records (the JSON contract, summary or full) one at a time and keeps only counters and bounded
latency samples, so it runs in one pass beside any other output, and the same figures can be recomputed
from saved JSON Lines. ``result()`` returns plain data (the JSON of ``pulsar-dissect stats --json``);
rendering lives elsewhere.
"""

from __future__ import annotations

import math
import random
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..options import Options


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
    # compressed chunked messages not finished yet: uuid -> {chunk frame index: its payload bytes on the wire};
    # counted in the ratio when the last chunk's ``reassembled`` names the chunks and the decompressed size
    chunks_pending: OrderedDict = field(default_factory=OrderedDict)
    chunk_frames_pending: int = 0
    errors: Counter = field(default_factory=Counter)
    acks: int = 0
    permits: int = 0
    redeliveries: int = 0
    receipts: int = 0
    send_latency: "Latencies | None" = None
    # what became of the messages: SENDs waiting for their answer (frame index -> messages), accepted or rejected
    waiting: OrderedDict = field(default_factory=OrderedDict)
    accepted: int = 0
    rejected: int = 0
    # deliveries: (ledger, entry) -> messages in that entry (distinct vs duplicate), and MESSAGE frame -> messages
    entries: OrderedDict = field(default_factory=OrderedDict)
    distinct: int = 0
    delivered_frames: OrderedDict = field(default_factory=OrderedDict)
    acked: int = 0


# message frames / entries remembered per producer or consumer for the counts above: an ACK or a duplicate
# delivery further back than this is not matched (bounded memory whatever the capture)
ACTOR_MEMORY = 20_000
CHUNK_MEMORY = 20_000  # chunk frames of unfinished compressed messages remembered per producer or consumer
THROUGHPUT_BUCKETS = 2000  # time buckets kept for the throughput plot (their width adapts to the capture)


class StatsCollector:
    def __init__(self, options: Options | None = None) -> None:
        options = options or Options()
        self._samples = options.latency_samples
        self.connections: dict[int, dict] = {}
        self.topics: dict[str, dict] = defaultdict(lambda: {"messages_sent": 0, "bytes_sent": 0,
                                                            "messages_received": 0, "bytes_received": 0,
                                                            "producers": set(), "consumers": set()})
        self.producers: dict[tuple[int, int], _Actor] = {}
        self.consumers: dict[tuple[int, int], _Actor] = {}
        self.latency: dict[str, Latencies] = {}
        # (time, request type, ms) for plots: a bounded sample too, put back in time order when drawn
        self._plot = Reservoir(options.plot_samples)
        self.types: Counter = Counter()
        self.server_errors: Counter = Counter()
        self.expert: Counter = Counter()
        self.events: Counter = Counter()
        self.frames = 0
        self.first_time: float | None = None
        self.last_time: float | None = None
        self.origin: float | None = None  # the first record's time: time 0 of the timeline and the plots
        # time bucket -> [messages to broker, bytes to broker, messages to client, bytes to client], for plots;
        # the buckets start at 10 ms and double in width whenever there are too many (at most THROUGHPUT_BUCKETS)
        self.throughput: dict[int, list[int]] = {}
        self.throughput_width = 0.01
        self._tp_first = self._tp_last = 0  # the first and last bucket: their span stays within the bound

    # ------------------------------------------------------------------ input

    def add(self, rec: dict) -> None:
        if self.origin is None:
            self.origin = rec["time"]
        if "index" in rec:
            self._frame(rec)
        else:
            self._event(rec)

    def _latencies(self, table: dict, kind: str) -> Latencies:
        lat = table.get(kind)
        if lat is None:
            lat = table[kind] = Latencies(self._samples)
        return lat

    def _event(self, rec: dict) -> None:
        kind = rec["type"]
        self.events[kind] += 1
        if rec.get("conn") is None:
            return
        conn = self._conn(rec["conn"], rec["time"])
        details = rec.get("details") or {}
        if kind == "CONNECTION_OPENED":
            conn["client"] = details.get("client")
            conn["broker"] = next((v for k, v in details.items() if k not in ("client", "mid_stream")), None)
            conn["mid_stream"] = details.get("mid_stream", False)
        elif kind == "CONNECTION_CLOSED":
            conn["closed"] = details.get("how")
            if "closed_by" in details:
                conn["closed_by"] = details["closed_by"]
        else:
            conn["events"][kind] += 1

    def _conn(self, conn_id: int, time: float) -> dict:
        conn = self.connections.get(conn_id)
        if conn is None:
            conn = self.connections[conn_id] = {
                "conn": conn_id, "client": None, "broker": None, "first_time": time, "last_time": time,
                "frames_to_broker": 0, "frames_to_client": 0, "frames_unknown_direction": 0,
                "bytes_to_broker": 0, "bytes_to_client": 0, "bytes_unknown_direction": 0,
                "problems": 0, "events": Counter(), "latency": {},
            }
        return conn

    def _frame(self, rec: dict) -> None:
        kind = rec["type"]
        time = rec["time"]
        self.frames += 1
        self.types[kind] += 1
        if self.first_time is None:
            self.first_time = time
        self.last_time = time
        conn = self._conn(rec["conn"], time)
        conn["last_time"] = time
        direction = rec["direction"]
        side = "to_client" if direction == "to_client" else "unknown_direction" if direction == "unknown" \
            else "to_broker"
        conn["frames_" + side] += 1
        conn["bytes_" + side] += rec["size"]
        if conn["client"] is None and direction != "unknown":
            conn["client"], conn["broker"] = (rec["dst"], rec["src"]) if direction == "to_client" \
                else (rec["src"], rec["dst"])
        cmd = rec["command"]
        if kind == "CONNECT":
            conn["client_version"] = cmd.get("client_version", "")
            conn["protocol_version"] = cmd.get("protocol_version", 0)
        elif kind == "CONNECTED":
            conn["server_version"] = cmd.get("server_version", "")
        for e in rec.get("expert", ()):
            self.expert[(e["id"], e["severity"])] += 1
            if e["id"] == "server.error":
                self.server_errors[_error_name(cmd.get("error"))] += 1
        conn["problems"] += len(rec["problems"])
        producer, consumer = rec.get("producer"), rec.get("consumer")
        latency = rec.get("latency_ms")
        if latency is not None:
            request_type = rec.get("request_type") or kind
            self._latencies(self.latency, request_type).add(latency)
            self._plot.add((time, request_type, latency, kind in ("ERROR", "SEND_ERROR")))
            self._latencies(conn["latency"], request_type).add(latency)
            if producer is not None and request_type == "SEND":
                actor = self._actor(self.producers, rec, producer, count=False)
                if actor.send_latency is None:
                    actor.send_latency = Latencies(self._samples)
                actor.send_latency.add(latency)
        if producer is not None:
            self._producer(rec, producer)
        if consumer is not None:
            self._consumer(rec, consumer)

    @staticmethod
    def _actor(table: dict, rec: dict, info: dict, count: bool = True) -> _Actor:
        key = (rec["conn"], info.get("id", -1))
        actor = table.get(key)
        if actor is None:
            actor = table[key] = _Actor(info)
        else:
            actor.info = info  # the latest view (a name learnt later)
        if count:
            actor.frames += 1
        return actor

    @property
    def latency_samples(self) -> list[tuple[float, str, float, bool]]:
        """(time, request type, ms, answered by an error) of the responses kept for plotting, in time order."""
        return sorted(self._plot.items)

    def _count_throughput(self, rec: dict, n: int, size: int) -> None:
        slot = int(rec["time"] / self.throughput_width)
        bucket = self.throughput.get(slot)
        if bucket is None:
            slots = self.throughput
            while slots and max(slot, self._tp_last) - min(slot, self._tp_first) >= THROUGHPUT_BUCKETS:
                merged: dict[int, list[int]] = {}
                for old, counts in slots.items():
                    into = merged.setdefault(old // 2, [0, 0, 0, 0])
                    for i in range(4):
                        into[i] += counts[i]
                self.throughput = slots = merged
                self.throughput_width *= 2
                self._tp_first, self._tp_last = self._tp_first // 2, self._tp_last // 2
                slot = int(rec["time"] / self.throughput_width)
            bucket = slots.setdefault(slot, [0, 0, 0, 0])
            self._tp_first = min(self._tp_first, slot) if len(slots) > 1 else slot
            self._tp_last = max(self._tp_last, slot) if len(slots) > 1 else slot
        base = 2 if rec["direction"] == "to_client" else 0
        bucket[base] += n
        bucket[base + 1] += size

    def _count_messages(self, actor: _Actor, info: dict, rec: dict, side: str) -> None:
        """Messages and bytes of one SEND (side "sent") or MESSAGE ("received") for the actor and its topic."""
        topic = self.topics[info.get("topic") or "?"]
        topic["producers" if side == "sent" else "consumers"].add(info.get("name") or str(info.get("id")))
        n, size = _message_totals(rec)
        self._count_throughput(rec, n, size)
        actor.messages += n
        actor.payload_bytes += size
        actor.wire_bytes += rec.get("payload_size") or 0
        topic["messages_" + side] += n
        topic["bytes_" + side] += size

    def _producer(self, rec: dict, info: dict) -> None:
        actor = self._actor(self.producers, rec, info)
        kind = rec["type"]
        if kind == "SEND" and "payload_size" in rec:
            self._count_messages(actor, info, rec, "sent")
            _remember(actor.waiting, rec["index"], _message_totals(rec)[0])
            md = rec.get("metadata")
            if md is not None:
                if "num_messages_in_batch" in md:
                    actor.batches += 1
                    actor.batched_messages += md["num_messages_in_batch"]
                codec = md.get("compression", "NONE")
                if codec != "NONE":
                    actor.compression[codec] += 1
                    _count_compressed(actor, rec)
        elif kind == "SEND_RECEIPT":
            actor.receipts += 1
            actor.accepted += actor.waiting.pop(rec.get("answers"), 0)
        elif kind == "SEND_ERROR":
            actor.errors[_error_name(rec["command"].get("error"))] += 1
            actor.rejected += actor.waiting.pop(rec.get("answers"), 0)

    def _consumer(self, rec: dict, info: dict) -> None:
        actor = self._actor(self.consumers, rec, info)
        kind = rec["type"]
        if kind == "MESSAGE" and "payload_size" in rec:
            self._count_messages(actor, info, rec, "received")
            n = _message_totals(rec)[0]
            mid = rec["command"].get("message_id") or {}
            entry = (mid.get("ledgerId", 0) << 64) | mid.get("entryId", 0)  # one int, not a tuple: less memory
            if entry not in actor.entries:
                actor.distinct += n
            _remember(actor.entries, entry, n)
            _remember(actor.delivered_frames, rec["index"], n)
            if "delivery" in rec or rec["command"].get("redelivery_count"):  # as message.redelivered says
                actor.redeliveries += 1
        elif kind == "ACK":
            actor.acks += 1
            for index in rec.get("acks", ()):
                actor.acked += actor.delivered_frames.pop(index, 0)
        elif kind == "FLOW":
            actor.permits += rec["command"].get("messagePermits", 0)

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
        out = {"conn": key[0], **a.info, "frames": a.frames, "messages": a.messages,
               "payload_bytes": a.payload_bytes, "wire_bytes": a.wire_bytes}
        if producer:
            out.update(receipts=a.receipts, batches=a.batches, messages_accepted=a.accepted,
                       messages_rejected=a.rejected, messages_unanswered=sum(a.waiting.values()),
                       send_latency_ms=a.send_latency.summary() if a.send_latency is not None else None,
                       avg_batch_size=round(a.batched_messages / a.batches, 1) if a.batches else None,
                       compression=dict(a.compression),
                       compression_ratio=(round(a.compressed_plain / a.compressed_wire, 2) if a.compressed_wire
                                          else None),
                       errors={str(k): v for k, v in a.errors.items()})
        else:
            out.update(acks=a.acks, permits_granted=a.permits, redelivered_frames=a.redeliveries,
                       messages_distinct=a.distinct, messages_duplicate=a.messages - a.distinct,
                       messages_acked=a.acked, messages_unacked=a.distinct - a.acked)
        return out


def _count_compressed(actor: _Actor, rec: dict) -> None:
    """The wire and decompressed bytes of a compressed SEND or MESSAGE, for the compression ratio. A chunk is
    only a slice of its message's compressed payload (nothing to decompress alone): its wire bytes wait under
    its uuid until the last chunk's ``reassembled`` gives the decompressed size of the whole and the frames of
    the chunks that made it; a message that could not be reassembled or decompressed (``payload_size`` None),
    or whose chunks were forgotten, stays out of the ratio altogether."""
    uuid = _chunk_uuid(rec)
    if uuid is None:
        if "uncompressed_size" in rec:
            actor.compressed_wire += rec["payload_size"]
            actor.compressed_plain += rec["uncompressed_size"]
        return
    pending = actor.chunks_pending.get(uuid)
    if pending is None:
        pending = actor.chunks_pending[uuid] = {}
    else:
        actor.chunks_pending.move_to_end(uuid)
    pending[rec["index"]] = rec.get("payload_size")
    actor.chunk_frames_pending += 1
    whole = rec.get("reassembled")
    if whole is not None and whole.get("uuid") == uuid:
        del actor.chunks_pending[uuid]
        actor.chunk_frames_pending -= len(pending)
        wire = [pending.get(index) for index in whole.get("chunks") or ()]
        if whole.get("payload_size") is not None and wire and None not in wire:
            actor.compressed_wire += sum(wire)
            actor.compressed_plain += whole["payload_size"]
    while actor.chunk_frames_pending > CHUNK_MEMORY:
        _, forgotten = actor.chunks_pending.popitem(last=False)
        actor.chunk_frames_pending -= len(forgotten)


def _chunk_uuid(rec: dict) -> str | None:
    """The uuid of the chunked message a SEND or MESSAGE record is a chunk of (summary or full record)."""
    summary = rec.get("messages_summary")
    if summary is not None:
        chunk = summary.get("chunk")
        return chunk["uuid"] if chunk is not None else None
    msgs = rec.get("messages")
    return msgs[0].get("uuid") if msgs and "chunk_id" in msgs[0] else None


def _remember(table: OrderedDict, key, value) -> None:
    table[key] = value
    if len(table) > ACTOR_MEMORY:
        table.popitem(last=False)


def _message_totals(rec: dict) -> tuple[int, int]:
    summary = rec.get("messages_summary")
    if summary is not None:
        return summary["count"], summary["bytes"]
    msgs = rec.get("messages") or ()
    return len(msgs), sum(m["payload_size"] or 0 for m in msgs)


def _error_name(error) -> str:
    return "?" if error is None else str(error)
