"""Statistics as rich tables (from the plain data of ``StatsCollector.result()``), readable at 80 columns.

Topics are section headings rather than a column, because a topic name alone can fill half a terminal. No value
is ever split across lines (an address, an error name, a number): on a narrow terminal only headers and names
wrap, between words; plain output keeps every row on one line. Latencies have a fixed three decimals.
"""

from __future__ import annotations

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .text import safe


def _fmt(value, column: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        decimals = _DECIMALS.get(column)
        return f"{value:.{decimals}f}" if decimals is not None else f"{value:.6g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{safe(k, 30)}={v}" for k, v in value.items()) or "-"
    return safe(value, 60)


# Fixed decimals, so that a column lines up: latencies in ms to the microsecond, as the timeline shows them.
_DECIMALS = {"p50": 3, "p90": 3, "p99": 3, "max": 3, "mean": 3, "avg": 1, "ratio": 2}
_NUMERIC = {"msgs", "acc", "rej", "dup", "acked", "unacked", "drop", "bytes", "wire", "batches", "avg", "ratio", "rcpt", "acks",
            "permits", "redeliv", "frames →/←",
            "bytes →/←", "problems", "conn", "count", "p50", "p90", "p99", "max", "mean"}
# Columns of words that may wrap between words on a narrow terminal (never inside a word); every other value is
# kept whole on one line: an address, a number, an error name. Plain output never wraps anything.
_WRAP = {"producer", "consumer", "request", "what"}
_MIN_WIDTH = {"producer": 12, "consumer": 12}
_GAP = 2  # columns between two columns


def print_table(console: Console, title: str | None, columns: list[str], rows: list[list], *,
                plain: bool | None = None) -> None:
    """A table whose values are never split across lines. Each column is as wide as its widest value; on a
    terminal narrower than that, headers and the columns of words (names) wrap between words first; plain
    output (``--plain``, or not a terminal) keeps one line per row, wider than the terminal if it must be."""
    if plain is None:
        plain = not console.is_terminal
    cells = [[_fmt(v, col) for col, v in zip(columns, row)] for row in rows]
    values = [max((cell_len(r[i]) for r in cells), default=1) for i in range(len(columns))]
    widths = [max(values[i], cell_len(col), _MIN_WIDTH.get(col, 0)) for i, col in enumerate(columns)]
    if not plain:
        narrowed = list(widths)
        _fit(narrowed, values, columns, cells, console.width)
        if sum(narrowed) + _GAP * (len(narrowed) - 1) <= console.width:
            widths = narrowed  # else one line per row is better than names wrapped to no avail
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False, padding=(0, 1),
                  collapse_padding=True)
    for col, width in zip(columns, widths):
        numeric = col in _NUMERIC
        # A column is never narrower than its widest value (or word, for _WRAP): only headers and names wrap.
        table.add_column(col, width=width, no_wrap=plain, overflow="fold", justify="right" if numeric else "left")
    for row in cells:
        table.add_row(*map(Text, row))  # Text, never a str: a str cell is parsed as rich markup ("[/x]" raises)
    total = sum(widths) + _GAP * (len(widths) - 1)
    if title:
        console.print(Text(title, style="bold"), soft_wrap=True)
    if total <= console.width:
        console.print(table)
        return
    room = console.width
    console.width = total  # rich never renders wider than its console: widen it for this table only
    try:
        console.print(table, crop=False)
    finally:
        console.width = room


def _fit(widths: list[int], values: list[int], columns: list[str], cells: list[list[str]], room: int) -> None:
    """Narrow the columns towards ``room``: first the headers wider than their values (between the header's
    words), then the columns of words (never below their longest word)."""
    def excess() -> int:
        return sum(widths) + _GAP * (len(widths) - 1) - room

    for i, col in enumerate(columns):
        if excess() <= 0:
            return
        if widths[i] > values[i]:
            floor = max(values[i], max(cell_len(w) for w in col.split()), _MIN_WIDTH.get(col, 0))
            widths[i] = max(floor, widths[i] - excess())
    for i, col in enumerate(columns):
        if excess() <= 0:
            return
        if col in _WRAP:
            words = [cell_len(w) for r in cells for w in r[i].split()] + [cell_len(w) for w in col.split()]
            floor = max(max(words, default=1), _MIN_WIDTH.get(col, 0))
            widths[i] = max(floor, widths[i] - excess())


def _actor_name(a: dict) -> str:
    return f"{safe(a.get('name') or '?', 24)} ({a.get('id')}@c{a['conn']})"


def render_stats(data: dict, console: Console, *, plain: bool | None = None) -> None:
    """The statistics as tables; ``plain`` (default: when the console is not a terminal) never wraps a line."""
    if plain is None:
        plain = not console.is_terminal

    def say(text: Text) -> None:
        console.print(text, soft_wrap=plain)

    def table(title, columns, rows) -> None:
        print_table(console, title, columns, rows, plain=plain)

    conns = data["connections"]
    seen = len(conns) + data.get("connections_dropped", 0)
    say(Text(f"{data['frames']:,} frames on {seen:,} connection(s) over {data['duration_s']:.3f} s", style="bold"))
    console.print()
    # one broker for every connection: named once, in the title, so the table fits 80 columns
    brokers = {c["broker"] for c in conns}
    one_broker = len(brokers) == 1 and not plain
    rows = [[c["conn"], c["client"], *([] if one_broker else [c["broker"]]),
             f"{c['frames_to_broker']}/{c['frames_to_client']}",
             f"{c['bytes_to_broker']:,}/{c['bytes_to_client']:,}",
             (c.get("closed") or "open") + (f"/{c['closed_by']}" if c.get("closed_by") else ""),
             c["problems"]] for c in conns]
    table(f"Connections to {safe(next(iter(brokers)), 60)}" if one_broker else "Connections",
          ["conn", "client", *([] if one_broker else ["broker"]), "frames →/←", "bytes →/←", "closed", "problems"],
          rows)
    if data.get("connections_dropped"):
        say(Text(f"  {data['connections_dropped']:,} more connections not listed (the oldest closed first; "
                 "-o max_stats_connections=)", style="dim"))
    versions = {(c.get("client_version"), c.get("server_version"), c.get("protocol_version")) for c in conns}
    if any(client or server for client, server, _ in versions):
        console.print()
    for client, server, proto in sorted(versions, key=str):
        if client or server:
            say(Text(f"  client {safe(client or '?', 40)} ↔ broker {safe(server or '?', 40)} (protocol v{proto})",
                     style="dim"))
    for topic, t in data["topics"].items():
        console.print()
        say(Text("Topic ", style="bold") + Text(safe(topic, 200), style="bold cyan"))
        # what the broker made of them: a SEND is not a message published
        answers = [f"{t[key]:,} {word}" for key, word in (("messages_accepted", "accepted"),
                                                           ("messages_rejected", "rejected")) if t.get(key)]
        say(Text(f"  sent {t['messages_sent']:,} messages ({t['bytes_sent']:,} B"
                 + (f"; {', '.join(answers)}" if answers and t.get("messages_rejected") else "") + "), "
                 f"received {t['messages_received']:,} messages ({t['bytes_received']:,} B)"))
        if t.get("msgRateIn") is not None:  # pulsar-admin's names, over the capture's duration
            say(Text(f"  msgRateIn {t['msgRateIn']:,.3f}/s ({t['msgThroughputIn']:,.1f} B/s), "
                     f"msgRateOut {t['msgRateOut']:,.3f}/s ({t['msgThroughputOut']:,.1f} B/s) "
                     f"over {t['rate_window_s']:.3f} s", style="dim"))
        producers = [p for p in data["producers"] if p.get("topic") == topic]
        if producers:
            console.print()
            table(None, ["producer", "msgs", "acc", "rej", "bytes", "avg", "codec", "ratio", "errors"],
                  [[_actor_name(p), p["messages"], p["messages_accepted"], p["messages_rejected"], p["payload_bytes"],
                    p["avg_batch_size"], ",".join(p["compression"]) or "-", p["compression_ratio"], p["errors"]]
                   for p in producers]
                  # a producer back on another connection: its total over all of them
                  + [[f"{safe(p['name'], 24)} (total, {p['connections']} conns)", p["messages"],
                      p["messages_accepted"], p["messages_rejected"], p["payload_bytes"], None, "-", None, p["errors"]]
                     for p in data.get("producer_totals", []) if p.get("topic") == topic])
        consumers = [c for c in data["consumers"] if c.get("topic") == topic]
        # consumers under their subscription (as pulsar-admin's topic stats group them): a subscription's name
        # and type are a heading, not a column, so the table keeps to 80 columns with its unacked count
        subscriptions: dict[tuple, list[dict]] = {}
        for c in consumers:
            subscriptions.setdefault((c.get("subscription"), c.get("type")), []).append(c)
        for (subscription, kind), members in subscriptions.items():
            console.print()
            say(Text("  subscription ") + Text(safe(subscription or "?", 200), style="bold")
                + Text(f" ({safe(kind or '?', 40)})"))
            # messages a client acknowledged with a validation_error, dropped unread: a column only when any
            dropped = any(c.get("messages_discarded") for c in members)
            table(None, ["consumer", "msgs", "dup", "acked", "unacked"] + (["drop"] if dropped else [])
                  + ["bytes", "permits"],
                  [[_actor_name(c), c["messages"], c["messages_duplicate"], c["messages_acked"],
                    c["messages_unacked"]]
                   + ([c["messages_discarded"]] if dropped else []) + [c["payload_bytes"], c["permits_granted"]]
                   for c in members])
    for c in data.get("clients", []):  # TubeMQ's clients, by client id (long: a line each, not a column)
        console.print()
        title = Text("TubeMQ client ", style="bold") + Text(safe(c["client_id"], 200), style="bold cyan")
        if c["group"]:
            title += Text(f" (group {safe(c['group'], 100)})")
        say(title)
        errors = ", ".join(f"{safe(k, 40)}×{v}" for k, v in c["errors"].items())
        say(Text(f"  {c['frames']:,} frames; sent {c['messages_sent']:,} messages ({c['bytes_sent']:,} B), "
                 f"received {c['messages_received']:,} messages ({c['bytes_received']:,} B)"
                 + (f"; errors {errors}" if errors else "")))
    if data.get("clients_dropped"):
        say(Text(f"  {data['clients_dropped']:,} more TubeMQ clients not counted (10,000 are remembered)", style="dim"))
    if data["latency_ms"]:
        rows = [[k, v] for k, v in data["latency_ms"].items()]
        senders = [p for p in data["producers"] if p.get("send_latency_ms")]
        if len(senders) > 1:  # publish latency of each producer
            rows += [[f"SEND {_actor_name(p)}", p["send_latency_ms"]] for p in senders]
            rows += [[f"SEND→SEND_ERROR {_actor_name(p)}", p["send_error_latency_ms"]] for p in senders
                     if p.get("send_error_latency_ms")]
        console.print()
        table("Latency by request type (ms)", ["request", "count", "p50", "p90", "p99", "max", "mean"],
              [[k, v["count"], v["p50"], v["p90"], v["p99"], v["max"], v["mean"]] for k, v in rows])
        if not all(v.get("exact", True) for _, v in rows):
            say(Text("  percentiles from a uniform sample of 100,000 responses per row", style="dim"))
    rows = [[f"server error {k}", "error", v] for k, v in data["server_errors"].items()]
    rows += [[e["id"], e["severity"], e["count"]] for e in data["expert"] if e["id"] != "server.error"]
    rows += [[k, "event", v] for k, v in data["events"].items() if k not in ("CONNECTION_OPENED", "CONNECTION_CLOSED")]
    if rows:
        console.print()
        table("Errors and problems", ["what", "severity", "count"], rows)
