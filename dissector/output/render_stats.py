"""Statistics as rich tables (from the plain data of ``StatsCollector.result()``), readable at 80 columns.

Topics are section headings rather than a column, because a topic name alone can fill half a terminal.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .text import safe


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{safe(k, 30)}={v}" for k, v in value.items()) or "-"
    return safe(value, 60)


def _table(title: str | None, columns: list[str], rows: list[list]) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                  header_style="bold", pad_edge=False, padding=(0, 1))
    for i, col in enumerate(columns):
        numeric = col in _NUMERIC
        table.add_column(col, overflow="fold", no_wrap=numeric, justify="right" if numeric else "left",
                         min_width=_MIN_WIDTH.get(col))
    for row in rows:
        table.add_row(*(_fmt(v) for v in row))
    return table


_NUMERIC = {"msgs", "acc", "rej", "dup", "acked", "bytes", "wire", "batches", "avg", "ratio", "rcpt", "acks", "permits",
            "redeliv", "frames →/←",
            "bytes →/←", "problems", "conn", "count", "p50", "p90", "p99", "max", "mean"}


_MIN_WIDTH = {"producer": 12, "consumer": 12}


def _actor_name(a: dict) -> str:
    return f"{safe(a.get('name') or '?', 24)} ({a.get('id')}@c{a['conn']})"


def render_stats(data: dict, console: Console) -> None:
    conns = data["connections"]
    console.print(Text(f"{data['frames']:,} frames on {len(conns)} connection(s) over {data['duration_s']:.3f} s",
                       style="bold"))
    console.print(_table("Connections", ["conn", "client", "broker", "frames →/←", "bytes →/←", "closed",
                                         "problems"],
                         [[c["conn"], c["client"], c["broker"],
                           f"{c['frames_to_broker']}/{c['frames_to_client']}",
                           f"{c['bytes_to_broker']:,}/{c['bytes_to_client']:,}",
                           (c.get("closed") or "open") + (f"/{c['closed_by']}" if c.get("closed_by") else ""),
                           c["problems"]] for c in conns]))
    versions = {(c.get("client_version"), c.get("server_version"), c.get("protocol_version")) for c in conns}
    for client, server, proto in sorted(versions, key=str):
        if client or server:
            console.print(Text(f"  client {safe(client or '?', 40)} ↔ broker {safe(server or '?', 40)}"
                               f" (protocol v{proto})", style="dim"))
    for topic, t in data["topics"].items():
        console.print()
        console.print(Text("Topic ", style="bold") + Text(safe(topic, 200), style="bold cyan"))
        console.print(Text(f"  sent {t['messages_sent']:,} messages ({t['bytes_sent']:,} B), "
                           f"received {t['messages_received']:,} messages ({t['bytes_received']:,} B)"))
        producers = [p for p in data["producers"] if p.get("topic") == topic]
        if producers:
            console.print(_table(None, ["producer", "msgs", "acc", "rej", "bytes", "avg", "codec", "ratio",
                                        "errors"],
                                 [[_actor_name(p), p["messages"], p["messages_accepted"], p["messages_rejected"],
                                   p["payload_bytes"], p["avg_batch_size"], ",".join(p["compression"]) or "-",
                                   p["compression_ratio"], p["errors"]] for p in producers]))
        consumers = [c for c in data["consumers"] if c.get("topic") == topic]
        if consumers:
            console.print(_table(None, ["consumer", "sub", "type", "msgs", "dup", "acked", "bytes", "permits"],
                                 [[_actor_name(c), c.get("subscription"), c.get("type"), c["messages"],
                                   c["messages_duplicate"], c["messages_acked"], c["payload_bytes"],
                                   c["permits_granted"]] for c in consumers]))
    if data["latency_ms"]:
        rows = [[k, v] for k, v in data["latency_ms"].items()]
        senders = [p for p in data["producers"] if p.get("send_latency_ms")]
        if len(senders) > 1:  # publish latency of each producer
            rows += [[f"SEND {_actor_name(p)}", p["send_latency_ms"]] for p in senders]
        console.print()
        console.print(_table("Latency by request type (ms)", ["request", "count", "p50", "p90", "p99", "max", "mean"],
                             [[k, v["count"], v["p50"], v["p90"], v["p99"], v["max"], v["mean"]] for k, v in rows]))
        if not all(v.get("exact", True) for _, v in rows):
            console.print(Text("  percentiles from a uniform sample of 100,000 responses per row", style="dim"))
    rows = [[f"server error {k}", "error", v] for k, v in data["server_errors"].items()]
    rows += [[e["id"], e["severity"], e["count"]] for e in data["expert"] if e["id"] != "server.error"]
    rows += [[k, "event", v] for k, v in data["events"].items() if k not in ("CONNECTION_OPENED", "CONNECTION_CLOSED")]
    if rows:
        console.print(_table("Errors and problems", ["what", "severity", "count"], rows))
