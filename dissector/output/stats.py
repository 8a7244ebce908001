"""Capture statistics: per connection, topic, producer and consumer; latency percentiles per request type.

Consumes records (the JSON contract, summary or full) one at a time and keeps only counters and bounded
latency samples, so it runs in one pass beside any other output, and the same figures can be recomputed
from saved JSON Lines. ``result()`` returns plain data (the JSON of ``pulsar-dissect stats --json``);
rendering lives elsewhere.

Message rates per topic use pulsar-admin's names (``msgRateIn`` / ``msgRateOut`` in messages per second,
``msgThroughputIn`` / ``msgThroughputOut`` in bytes per second) over the capture's duration, first frame to
last (``rate_window_s`` beside them; null rates when it is 0 s). Latency is kept per request type and, apart,
per request type answered by an error (``SEND→SEND_ERROR``): a refusal's time is not a publish's.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from dissector import _core as _core

from ..options import Options


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def latency_summary(figures: tuple) -> dict[str, Any]:
    """Count, percentiles, max and mean of (count, total, max, sample, cap): a latency sample's figures, as the
    core's ``Latencies.figures()`` and ``StatsCore.state()`` give them."""
    count, total, most, sample, cap = figures
    ordered = sorted(sample)
    return {
        "count": count,
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "max": most,
        "mean": round(total / count, 3) if count else None,
        "exact": count <= cap,
    }


class Latencies(_core.Latencies):
    """Count, mean and max exactly; percentiles from a seeded uniform sample of at most ``cap`` values (exact
    while fewer were seen), so memory stays bounded however long the capture. The sample is the core's (one
    implementation for ``stats`` and ``check``)."""

    def summary(self) -> dict[str, Any]:
        return latency_summary(self.figures())


# message frames / entries remembered per producer or consumer for the counts above (at most: they share
# Options.stats_memory_total): an ACK or a duplicate delivery further back is not matched (bounded memory
# whatever the capture)
ACTOR_MEMORY = 20_000
CHUNK_MEMORY = 20_000  # chunk frames of unfinished compressed messages remembered per producer or consumer


class StatsCollector:
    """Gathers records one at a time, in the core (``crates/engine/src/stats``: the counting, the bounded tables, the
    seeded samples); ``result()`` turns its figures into the plain data of ``stats --json``."""

    def __init__(self, options: Options | None = None) -> None:
        options = options or Options()
        self.core = _core.StatsCore(options.latency_samples, options.plot_samples, ACTOR_MEMORY, CHUNK_MEMORY,
                                    options.actor_latency_samples, options.stats_memory_total,
                                    options.max_stats_connections)
        self.add = self.core.add

    @property
    def origin(self) -> float | None:
        """The first record's time: time 0 of the timeline and the plots."""
        return self.core.origin

    @property
    def throughput(self) -> dict[int, list[int]]:
        """Time bucket -> [messages to broker, bytes to broker, messages to client, bytes to client], for plots;
        the buckets start at 10 ms and double in width whenever there are too many (at most 2000)."""
        return self.core.throughput()

    @property
    def throughput_width(self) -> float:
        return self.core.throughput_width

    @property
    def latency_samples(self) -> list[tuple[float, str, float, bool]]:
        """(time, request type, ms, answered by an error) of the responses kept for plotting, in time order."""
        return sorted(self.core.plot_points())

    # ------------------------------------------------------------------ output

    def result(self) -> dict[str, Any]:
        s = self.core.state()
        duration = (s["last_time"] - s["first_time"]) if s["first_time"] is not None else 0.0
        producers = [_actor_out(a, producer=True) for a in s["producers"]]
        return {
            "frames": s["frames"],
            "duration_s": round(duration, 6),
            "first_time": s["first_time"],
            "last_time": s["last_time"],
            "types": dict(Counter(s["types"]).most_common()),
            "connections": [_conn_out(c) for c in s["connections"]],
            # connections forgotten beyond Options.max_stats_connections (closed ones first)
            **({"connections_dropped": s["connections_dropped"]} if s["connections_dropped"] else {}),
            "topics": {name: _topic_out(t, duration) for name, t in s["topics"].items()},
            "producers": producers,
            # a producer (by name, on its topic) seen on more than one connection: what it did over all of them
            "producer_totals": _producer_totals(producers),
            "consumers": [_actor_out(a, producer=False) for a in s["consumers"]],
            # TubeMQ's clients (by client id; a consumer's group with it), when the capture holds TubeMQ
            **({"clients": s["clients"], "clients_dropped": s["clients_dropped"]} if s["clients"] else {}),
            "latency_ms": {k: latency_summary(v) for k, v in sorted(s["latency"].items())},
            "server_errors": s["server_errors"],
            "expert": [{"id": i, "severity": sev, "count": n}
                       for (i, sev), n in Counter(dict(s["expert"])).most_common()],
            "events": s["events"],
        }


def _rate(amount: int, window_s: float) -> float | None:
    """Per second over the window; None over a window of 0 s (one frame, or every frame at one instant)."""
    return round(amount / window_s, 3) if window_s > 0 else None


def _topic_out(t: dict, window_s: float) -> dict:
    """A topic's figures, with its rates as pulsar-admin names them (in: published to the broker, out:
    delivered to consumers) over the capture's duration."""
    return {**t, "rate_window_s": round(window_s, 6),
            "msgRateIn": _rate(t["messages_sent"], window_s), "msgThroughputIn": _rate(t["bytes_sent"], window_s),
            "msgRateOut": _rate(t["messages_received"], window_s),
            "msgThroughputOut": _rate(t["bytes_received"], window_s)}


def _producer_totals(producers: list[dict]) -> list[dict]:
    """The producers that came back on another connection (a reconnecting client keeps its producer's name):
    one total per topic and name, in the order first seen. Unnamed producers are not joined (ids are per
    connection)."""
    groups: dict[tuple, list[dict]] = {}
    for p in producers:
        if p.get("name"):
            groups.setdefault((p.get("topic"), p["name"]), []).append(p)
    totals = []
    for (topic, name), parts in groups.items():
        conns = sorted({p["conn"] for p in parts})
        if len(conns) < 2:
            continue
        errors: dict = {}
        for p in parts:
            for code, n in p["errors"].items():
                errors[code] = errors.get(code, 0) + n
        totals.append({"topic": topic, "name": name, "connections": len(conns), "conns": conns,
                       **{key: sum(p[key] for p in parts) for key in (
                           "frames", "messages", "payload_bytes", "receipts", "messages_accepted",
                           "messages_rejected", "messages_unanswered")},
                       "errors": errors})
    return totals


def _conn_out(c: dict) -> dict:
    out = {k: v for k, v in c.items() if k not in ("events", "latency")}
    out["latency_ms"] = {k: latency_summary(v) for k, v in sorted(c["latency"].items())}
    out["duration_s"] = round(c["last_time"] - c["first_time"], 6)
    out["events"] = c["events"]
    return out


def _actor_out(a: dict, *, producer: bool) -> dict:
    out = {"conn": a["conn"], **a["info"], "frames": a["frames"], "messages": a["messages"],
           "payload_bytes": a["payload_bytes"], "wire_bytes": a["wire_bytes"]}
    if producer:
        out.update(receipts=a["receipts"], batches=a["batches"], messages_accepted=a["accepted"],
                   messages_rejected=a["rejected"], messages_unanswered=a["unanswered"],
                   # SEND→SEND_RECEIPT; SEND→SEND_ERROR apart
                   send_latency_ms=latency_summary(a["send_latency"]) if a["send_latency"] is not None else None,
                   send_error_latency_ms=(latency_summary(a["send_error_latency"])
                                          if a["send_error_latency"] is not None else None),
                   avg_batch_size=round(a["batched_messages"] / a["batches"], 1) if a["batches"] else None,
                   compression=a["compression"],
                   compression_ratio=(round(a["compressed_plain"] / a["compressed_wire"], 2)
                                      if a["compressed_wire"] else None),
                   errors=a["errors"])
    else:
        out.update(acks=a["acks"], permits_granted=a["permits"], redelivered_frames=a["redeliveries"],
                   messages_distinct=a["distinct"], messages_duplicate=a["messages"] - a["distinct"],
                   messages_acked=a["acked"], messages_discarded=a["discarded"],
                   messages_unacked=a["distinct"] - a["acked"] - a["discarded"])
    return out
