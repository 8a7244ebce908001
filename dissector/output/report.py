"""The HTML report: records → one JSON document → one self-contained HTML file.

``ReportBuilder`` takes the records the CLI makes (the JSON Lines contract), one at a time, and keeps:
the statistics (``StatsCollector``: the summary is ``stats --json`` by construction), exact log-binned latency
histograms per request type, the journeys of every message (``analysis.journeys``), and the first
``max_frames`` records as table rows (plus their full records for the detail pane, within a byte budget).
Everything else is counted, not kept, so memory stays bounded whatever the capture's length.

``render_html`` puts the document into the page (``report_assets/``: HTML, CSS and vanilla JS, no network):
as JSON inside ``<script type="application/json">``, with ``<``, ``>``, ``&`` and U+2028/2029 written as
``\\uXXXX`` (``embedded_json``: the one HTML-side escape) so no wire string can end the script element; the
page renders wire strings only through ``textContent``.
"""

from __future__ import annotations

import datetime as _dt
from importlib import resources
from typing import Any, Iterator

import orjson
from dissector import _core as _core

from ..analysis.journeys import BIN_EDGES_MS, Distribution, Journey, JourneyTracker
from ..options import Options
from ..problems import severity
from .expr import KNOWN_FIELDS
from .stats import StatsCollector
from .timeline import timeline_format

DEFAULT_MAX_FRAMES = 100_000
DEFAULT_MAX_JOURNEYS = 20_000
# where the table's rows go in the document's JSON: orjson writes a Fragment as it is, and never writes a NUL byte
# itself (a NUL in a string is \u0000), so the place cannot be mistaken for data
TABLE_ROWS = b"\x00rows\x00"
JOURNEY_ROWS = b"\x00journeys\x00"  # the same for the kept journeys' rows
DETAIL_BUDGET = 24 * 1024 * 1024  # bytes of full records kept for the detail pane; later frames: row only
MAX_ENTRIES_IN_DETAIL = 50  # batch entries kept per frame in the detail pane (the count says how many more)

ROW_COLUMNS = ("index", "time", "conn", "direction", "type", "info", "topic", "actor", "problems", "severity",
               "latency_ms", "answers", "entries", "request_type", "expert")

_ROLE_NAMES = _core.TimelineFormat.roles()
_TYPE_ROLES = {i for i, name in enumerate(_ROLE_NAMES) if name.startswith("type") or name == "event_type"}
_SEVERITY_RANK = {"note": 0, "warning": 1, "error": 2}


class ReportBuilder:
    """Gathers a report's data from records in capture order (``add``), then ``document()``: plain data."""

    def __init__(self, options: Options | None = None, *, max_frames: int = DEFAULT_MAX_FRAMES,
                 max_journeys: int = DEFAULT_MAX_JOURNEYS, detail_budget: int = DETAIL_BUDGET) -> None:
        self.stats = StatsCollector(options)
        self.format = timeline_format()
        self.max_frames = max_frames
        self.max_journeys = max_journeys
        self.detail_budget = detail_budget
        # the kept rows as embedded JSON, each followed by a comma, in one buffer (a list per row was 60 MB of
        # Python objects for 100,000 rows; the page inlines the buffer as it is)
        self.rows = bytearray()
        self.kept = 0
        # the JSON of the kept rows' records (null past the budget), each followed by a comma, in one buffer:
        # thousands of small bytes objects left among the freed records would pin the allocator's arenas
        self.details = bytearray()
        self.detail_bytes = 0
        self.details_dropped = 0
        self.records = 0
        self.frames = 0
        self.latency: dict[str, Distribution] = {}
        self.journey_rows = bytearray()  # the kept journeys' rows as embedded JSON, each followed by a comma
        self.journeys_kept = 0
        self.journeys_total = 0
        self.end_to_end: dict[str, dict[str, Distribution]] = {}
        self.tracker = JourneyTracker(on_finish=self._journey_done)

    def add(self, rec: dict) -> None:
        if self.format.origin is None:
            self.format.origin = rec["time"]
        self.records += 1
        self.stats.add(rec)
        is_frame = "index" in rec
        if is_frame:
            self.frames += 1
            self.tracker.add(rec)
            ms, kind = rec.get("latency_ms"), rec.get("request_type")
            if isinstance(ms, (int, float)) and kind:
                self.latency.setdefault(kind, Distribution()).add(float(ms))
        if self.kept < self.max_frames:
            self.rows += embedded_json(self._row(rec))
            self.rows += b","
            self.kept += 1
            self._keep_detail(rec)

    # ------------------------------------------------------------------ rows

    def _row(self, rec: dict) -> list:
        pieces = self.format.pieces(rec)
        start = next((i for i, (_, role) in enumerate(pieces) if role in _TYPE_ROLES), len(pieces) - 1)
        # one line: the lines a frame's problems add under it joined on (a table cell shows no line breaks)
        info = " ".join(part.strip() for part in "".join(text for text, _ in pieces[start + 1:]).split("\n")).strip()
        if "index" in rec:
            expert = rec.get("expert") or []
            severity = max((e.get("severity") for e in expert), key=lambda s: _SEVERITY_RANK.get(s, 0),
                           default=None)
            if rec["problems"] and severity in (None, "note"):
                severity = "warning"
            entries = _entries(rec)
            return [rec["index"], _rel(rec["time"], self.format.origin), rec.get("conn"), rec.get("direction"),
                    rec["type"], info, _topic(rec), _actor(rec), len(rec["problems"]), severity,
                    rec.get("latency_ms"), rec.get("answers"), entries, rec.get("request_type"),
                    sorted({e.get("id") for e in expert if e.get("id")})]
        severity = rec.get("severity")
        return [None, _rel(rec["time"], self.format.origin), rec.get("conn"), rec.get("direction"), rec["type"],
                info, None, None, 0 if severity in (None, "note") else 1, severity, None, None, None, None,
                [rec["type"]]]

    def _keep_detail(self, rec: dict) -> None:
        data = embedded_json(_for_detail(rec))  # escaped one record at a time: no copies of the whole at the end
        if self.detail_bytes + len(data) > self.detail_budget:
            self.details += b"null,"
            self.details_dropped += 1
            return
        self.detail_bytes += len(data)
        self.details += data
        self.details += b","

    def table_rows(self) -> list[list]:
        """The kept rows as lists (for tests and tools: the page takes the buffer as it is)."""
        return orjson.loads(b"[" + bytes(self.rows).rstrip(b",") + b"]")

    # ------------------------------------------------------------------ journeys

    def _journey_done(self, journey: Journey) -> None:
        self.journeys_total += 1
        summary = journey.summary()
        topic = journey.topic or "?"
        dists = self.end_to_end.setdefault(topic, {"publish": Distribution(), "send_deliver": Distribution(),
                                                   "send_ack": Distribution()})
        if summary["publish_latency_ms"] is not None:
            dists["publish"].add(summary["publish_latency_ms"])
        for d in summary["deliveries"]:
            if d["delay_ms"] is not None:
                dists["send_deliver"].add(d["delay_ms"])
            if d["send_to_ack_ms"] is not None:
                dists["send_ack"].add(d["send_to_ack_ms"])
        if self.journeys_kept < self.max_journeys:
            self.journey_rows += embedded_json(_journey_row(summary, journey))
            self.journey_rows += b","
            self.journeys_kept += 1

    # ------------------------------------------------------------------ the document

    def document(self, *, capture: str, expression: str | None = None, notice: str | None = None) -> dict[str, Any]:
        """The report's data (call once, after the last record: it finishes the journeys still open). ``notice``:
        what the page says first (why nothing was decoded: the ports to try). The table's rows are a place
        (``TABLE_ROWS``) that ``page_chunks`` fills with ``self.rows``; ``table_rows()`` reads them; the journeys'
        rows likewise (``JOURNEY_ROWS``, ``self.journey_rows``: 20,000 journeys are about 11 MB, copied four
        times over when inlined here)."""
        self.tracker.finish()
        stats = self.stats.result()
        origin = self.format.origin
        throughput = self.stats.throughput
        width = self.stats.throughput_width
        return {
            "format": 1,
            "capture": capture,
            "generated_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "filter": expression,
            "notice": notice,
            # the names an expression typed in the page may start with (the -Y language's)
            "expression_fields": sorted(KNOWN_FIELDS),
            "origin": origin,
            "summary": stats,
            # the severity of each kind of event the summary counts (stats --json counts them by kind)
            "event_severity": {kind: severity(kind) for kind in stats["events"]},
            "table": {"columns": list(ROW_COLUMNS), "rows": orjson.Fragment(TABLE_ROWS), "records": self.records,
                      "frames": self.frames, "kept": self.kept, "omitted": self.records - self.kept,
                      "max_frames": self.max_frames, "details_dropped": self.details_dropped,
                      "entries_in_detail": MAX_ENTRIES_IN_DETAIL},
            "latency": {
                "edges_ms": BIN_EDGES_MS,
                "histograms": {k: v.result() for k, v in sorted(self.latency.items())},
                # (s from the origin, request type, ms, answered by an error): StatsCollector's bounded sample
                "samples": [[_rel(t, origin), kind, ms, bool(err)] for t, kind, ms, err in self.stats.latency_samples],
            },
            "throughput": {"width_s": width,
                           "buckets": [[_rel(slot * width, origin), *values]
                                       for slot, values in sorted(throughput.items())]},
            "journeys": {"rows": orjson.Fragment(JOURNEY_ROWS),
                         "total": self.journeys_total, "kept": self.journeys_kept,
                         "closed_early": self.tracker.closed_early,
                         "milestones_dropped": self.tracker.milestones_dropped,
                         "end_to_end": {topic: {k: d.result() for k, d in dists.items()}
                                        for topic, dists in sorted(self.end_to_end.items())}},
        }


def _rel(t: float | None, origin: float | None) -> float | None:
    if t is None:
        return None
    return round(t - (origin or 0.0), 6)


def _topic(rec: dict) -> str | None:
    topic = (rec.get("command") or {}).get("topic")
    if isinstance(topic, str):
        return topic
    for key in ("producer", "consumer"):
        info = rec.get(key)
        if isinstance(info, dict) and isinstance(info.get("topic"), str):
            return info["topic"]
    return None


def _actor(rec: dict) -> str | None:
    """The producer or consumer as the timeline names it: its name, and id@connection."""
    for key in ("producer", "consumer"):
        info = rec.get(key)
        if isinstance(info, dict):
            name = info.get("name")
            ident = f"{info.get('id')}@c{rec.get('conn')}"
            return f"{key} {name} ({ident})" if name else f"{key} {ident}"
    return None


def _entries(rec: dict) -> int | None:
    """The entries of a batch (SEND's num_messages, a MESSAGE's metadata), or None for a lone message."""
    n = (rec.get("command") or {}).get("num_messages")
    if not isinstance(n, int):
        n = (rec.get("metadata") or {}).get("num_messages_in_batch")
    return n if isinstance(n, int) and n > 1 else None


def _for_detail(rec: dict) -> dict:
    """The record for the detail pane: every field, with at most MAX_ENTRIES_IN_DETAIL batch entries."""
    messages = rec.get("messages")
    # (a record lists at most max_batch_entries of a batch: messages_summary counts them all)
    total = (rec.get("messages_summary") or {}).get("count") if isinstance(messages, list) else None
    total = total if isinstance(total, int) else len(messages) if isinstance(messages, list) else 0
    if isinstance(messages, list) and total > min(len(messages), MAX_ENTRIES_IN_DETAIL):
        shown = messages[:MAX_ENTRIES_IN_DETAIL]
        rec = {**rec, "messages": shown, "messages_not_shown": total - len(shown)}
    if "frame_bytes" in rec:
        rec = {k: v for k, v in rec.items() if k != "frame_bytes"}
    return rec


def _journey_row(summary: dict, journey: Journey) -> dict:
    send = summary["send"] or {}
    frames = sorted({i for i in [send.get("index"), (summary["receipt"] or {}).get("index")] if i is not None}
                    | {d["index"] for d in summary["deliveries"]} | {a[0] for a in journey.acks or ()})
    return {
        "topic": summary["topic"], "id": summary["message_id"], "producer": send.get("producer"),
        "sequence_id": send.get("sequence_id"), "entries": send.get("messages"),
        "send_time": send.get("time"), "publish_ms": summary["publish_latency_ms"],
        "subscriptions": summary["subscriptions"], "redeliveries": summary["redeliveries"],
        "deliveries": [[d["index"], d["subscription"], d["consumer"], d["delay_ms"], d["redelivery_count"],
                        d["ack_index"], d["ack_latency_ms"], d["send_to_ack_ms"], d["discarded"]]
                       for d in summary["deliveries"]],
        "frames": frames,
    }


# ---------------------------------------------------------------------- the page

_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
            ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def embedded_json(value: Any) -> bytes:
    """JSON for the inside of a ``<script type="application/json">`` element: the characters that could end
    the element or start markup (``<``, ``>``, ``&``) and the JavaScript line terminators written as \\u
    escapes. They occur only inside JSON strings, where the escape means the same character."""
    data = orjson.dumps(value, default=str) if not isinstance(value, bytes) else value
    for raw, escaped in _ESCAPES:
        data = data.replace(raw, escaped)
    return data


def _asset(name: str) -> str:
    return resources.files("dissector.output").joinpath("report_assets", name).read_text(encoding="utf-8")


def page_chunks(document: dict, details: bytes | bytearray, rows: bytes | bytearray = b"",
                journey_rows: bytes | bytearray = b"") -> Iterator[bytes | memoryview]:
    """The report page, in pieces to write one after the other: the template with its style and script, the
    document with its table's rows, its journeys' rows and the detail records inlined (``rows``,
    ``journey_rows`` and ``details``: embedded JSON, each followed by a comma, as ``ReportBuilder.rows``,
    ``.journey_rows`` and ``.details``; written as they are, not copied)."""
    page = _asset("report.html")
    style, script = _asset("report.css"), _asset("report.js")
    # the assets must not end their element early, nor hold the places where the data goes
    for asset in (style, script):
        if "</style" in asset.lower() or "</script" in asset.lower() or "@DATA@" in asset or "@DETAILS@" in asset:
            raise RuntimeError("a report asset holds an end tag or a data placeholder")
    before, _, rest = page.partition("@DATA@")
    middle, _, after = rest.partition("@DETAILS@")
    yield before.replace("/*@STYLE@*/", style).encode()
    data = embedded_json(document)
    for place, items in ((TABLE_ROWS, rows), (JOURNEY_ROWS, journey_rows)):
        head, found, data = data.partition(place)
        yield head
        if found:
            yield b"["
            yield _without_last_comma(items)
            yield b"]"
    yield data
    yield middle.encode() + b"["
    yield _without_last_comma(details)
    yield b"]" + after.replace("/*@SCRIPT@*/", script).encode()


def _without_last_comma(items: bytes | bytearray) -> memoryview:
    return memoryview(items)[:-1] if items.endswith(b",") else memoryview(items)


def render_html(document: dict, details: bytes | bytearray, rows: bytes | bytearray = b"",
                journey_rows: bytes | bytearray = b"") -> bytes:
    """The whole page as one bytes object (``page_chunks`` joined)."""
    return b"".join(bytes(chunk) for chunk in page_chunks(document, details, rows, journey_rows))
