"""The registry of problems: every id declared once, with its group, severity and message template.

A stage that finds something wrong produces a ``Finding``: the id and its parameters, plain data that pickles
and crosses process boundaries. The English text is made from the template only at output (``message``), so
decoders never carry wording, and tests assert on ids.

Two kinds of ids share the registry:
- findings about one frame, dotted (``checksum.invalid``), listed in a frame record's ``expert``;
- events that are not frames, upper-case (``GAP``), the ``type`` of an event record.

Protocols register their own ids when their package is imported (``protocols/<name>/problems.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

ERROR, WARNING, NOTE = "error", "warning", "note"
SEVERITIES = (ERROR, WARNING, NOTE)


class Pieces:
    """A message template in pieces that Python and the compiled core both render (the core without asking
    Python, which for a finding made per message, as ``message.redelivered``, was a tenth of ``--json``'s
    interpreter thread): each piece is a text with ``{name}`` placeholders, kept always (a string) or only
    when a parameter is present, not None (``("present", key, text)``) or true (``("truthy", key, text)``).
    A placeholder takes the parameter's ``str()``; the core renders ints, strings and booleans and asks
    Python for anything else. ``tests/test_problems_pieces.py`` holds the two renderings to each other."""

    __slots__ = ("pieces",)
    WHEN = ("present", "truthy")

    def __init__(self, *pieces: str | tuple[str, str, str]) -> None:
        for piece in pieces:
            if not isinstance(piece, str) and (len(piece) != 3 or piece[0] not in self.WHEN):
                raise ValueError(f"a piece is a text or (present|truthy, key, text), not {piece!r}")
        self.pieces = tuple(("always", "", piece) if isinstance(piece, str) else tuple(piece) for piece in pieces)

    def __call__(self, params: dict) -> str:
        text = []
        for when, key, piece in self.pieces:
            value = params.get(key) if when != "always" else None
            if when == "always" or (when == "present" and value is not None) or (when == "truthy" and value):
                text.append(piece.format(**params))
        return "".join(text)


Template = str | Callable[[dict], str]


@dataclass(frozen=True, slots=True)
class ProblemSpec:
    id: str
    group: str
    severity: str
    template: Template  # str.format template over the parameters, or a function of them
    description: str  # what it means, for the documentation


REGISTRY: dict[str, ProblemSpec] = {}


def register(pid: str, severity: str, template: Template, description: str = "", *, group: str | None = None) -> str:
    """Declare an id; declaring one twice is a programming error."""
    if pid in REGISTRY:
        raise ValueError(f"problem id {pid!r} is declared twice")
    if severity not in SEVERITIES:
        raise ValueError(f"problem id {pid!r}: unknown severity {severity!r}")
    group = group or (pid.split(".", 1)[0] if "." in pid else "event")
    REGISTRY[pid] = ProblemSpec(pid, group, severity, template, description)
    return pid


class Finding(NamedTuple):
    """One problem or observation: an id from the registry and the values its message is made from."""

    id: str
    params: dict[str, Any]


def finding(pid: str, **params: Any) -> Finding:
    if pid not in REGISTRY:
        raise KeyError(f"problem id {pid!r} is not registered")
    return Finding(pid, params)


def spec(pid: str) -> ProblemSpec:
    return REGISTRY[pid]


def severity(pid: str) -> str:
    entry = REGISTRY.get(pid)
    return entry.severity if entry is not None else ERROR


def is_note(f: Finding) -> bool:
    return severity(f.id) == NOTE


def message(pid: str, params: dict) -> str:
    """The English text of a finding or event (made at output only)."""
    entry = REGISTRY.get(pid)
    if entry is None:
        return pid
    template = entry.template
    try:
        return template(params) if callable(template) else template.format(**params)
    except (KeyError, IndexError, ValueError, TypeError) as exc:  # a template/parameter mismatch is our bug
        return f"{pid} ({type(exc).__name__} formatting {params!r})"


def expert_record(f: Finding) -> dict[str, str]:
    return {"id": f.id, "severity": severity(f.id), "message": message(f.id, f.params)}


class _SeverityAndMessage:
    """What a record shows of a finding besides its id, for the core's record writer (crates/engine/src/records.rs):
    called with (id, params), (severity, text); ``pieces(id)``: (severity, the template's pieces) when it is
    a ``Pieces`` template or a format string (one piece), which the core then renders itself; None for a
    function."""

    def __call__(self, pid: str, params: dict) -> tuple[str, str]:
        return severity(pid), message(pid, params)

    @staticmethod
    def pieces(pid: str) -> tuple[str, tuple[tuple[str, str, str], ...]] | None:
        entry = REGISTRY.get(pid)
        if entry is None or not isinstance(entry.template, (str, Pieces)):
            return None
        template = entry.template
        return entry.severity, template.pieces if isinstance(template, Pieces) else (("always", "", template),)


severity_and_message = _SeverityAndMessage()


# ----------------------------------------------------------------------------------------------------------
# Generic ids: the stream below every protocol, the conversation above it, and the limits of bounded state.

register("GAP", WARNING, "{length} bytes missing from the capture ({reason})",
         "bytes of one direction never captured (loss, snaplen, buffer limit)")
register("SKIPPED", WARNING, "skipped {length} bytes to find the next frame boundary",
         "bytes that could not be framed, passed over while resynchronising")
register("TRUNCATED", WARNING, lambda p: _TRUNCATED[p["case"]].format(**p),
         "bytes at a capture gap or at the end of a stream that do not make a whole frame")
register("frame.gap_damaged", WARNING, "frame damaged by a capture gap: {missing} of {size} bytes missing",
         "a frame some of whose bytes were never captured (the rest of the stream goes on)")
register("frame.cut_at_end", WARNING, lambda p: _CUT[p["how"]].format(**p) + (
    f" by the {p['closed_by']}" if p.get("closed_by") else "") + _CUT_WHY.get(p["how"], ""),
         "the stream ends inside this frame: the sender stopped mid-frame (its process died, or it gave up) and "
         "the connection closed, or the capture ended there")
register("frame.oversized_head", WARNING, "frame above --max-frame-size: only its first {head} of {size} bytes "
         "decoded", "a frame above --max-frame-size whose head (its command and metadata) was decoded while the rest "
         "was skipped unread (an OVERSIZED event says so too)")
register("protobuf.repeated_elided", WARNING, "{message}: {elided} more elements of repeated fields not decoded "
         "(the first {kept} kept)",
         "A message holds more elements of repeated fields than any client sends (an empty element is two bytes on "
         "the wire and far more once decoded): the first are decoded, the rest are skipped and counted here, so "
         "the frame's fields list fewer than it carries.")
register("OVERSIZED", ERROR, lambda p: f"{p['field']} {p['size']} is above the limit ({p['limit']} max)"
         + _looks_like(p),
         "a frame whose declared size is above --max-frame-size; the bytes are skipped")
register("BAD_SIZE", ERROR, lambda p: f"{p['field']} {p['size']} " + (p.get("reason") or f"is too small ({p['limit']} max)")
         + _looks_like(p),
         "a frame whose declared size cannot be right (too small, or at odds with the frame's other size field); "
         "the bytes are skipped until the next plausible frame")
register("FOREIGN_PROTOCOL", ERROR, "this direction speaks {protocol}; it is not decoded",
         "TLS, HTTP or SSH on the port of a binary protocol")
register("PROXY_HEADER", NOTE, "HAProxy PROXY protocol header", "a PROXY v1/v2 header before the protocol")
register("CONNECTION_OPENED", NOTE, lambda p: f"client {p['client']} ↔ {p['server_role']} {p['server']} ("
         + ("capture started mid-connection" if p["mid_stream"] else "SYN seen") + ")",
         "a connection of a known protocol starts (or is first seen)")
register("CONNECTION_CLOSED", NOTE, lambda p: "connection " + (
    f"refused by the {p['closed_by']} (RST, nothing sent)" if _refused(p) else
    _CLOSED.get(p["how"], p["how"]) + (f" by the {p['closed_by']}" if p.get("closed_by") else "")),
         "a connection ends: FIN, RST, end of capture, port reuse, or forgotten at the connection limit")
# (in pieces: an event's text is made by the core too, in the pipeline's events table, without asking Python)
register("UNANSWERED", WARNING, Pieces("{request_type} (frame {request}) got no response in the capture",
                                       ("truthy", "evicted", " before it was forgotten")),
         "a request with no response when its connection closed (or when its state was dropped)")
register("OVERDUE", NOTE, lambda p: f"{p['request_type']} (frame {p['request']}) has had no answer for "
         f"{p['timeout_s']:g} s: past the clients' operation timeout",
         "a request still waiting when the clock passes the operation timeout (the verdict follows: response.slow "
         "or UNANSWERED)")
register("RETRANSMISSION_CONFLICT", WARNING, "{length} bytes sent again at offset {offset} differ from their "
         "first copy (the first copy is decoded)",
         "a retransmission or overlapping segment whose bytes differ from the bytes first seen for the same sequence "
         "range: a broken middlebox, a capture artefact or an injection; the first copy is kept")
register("DATA_ON_RST", WARNING, "{length} bytes carried by a RST segment, ignored",
         "payload on a RST segment: never part of the stream (the receiver discards it)")
register("DATA_AFTER_FIN", WARNING, "{length} bytes after the FIN at offset {offset}, ignored",
         "bytes beyond the sequence number of the direction's FIN: never part of the stream")
register("CAPTURE_TRUNCATED", WARNING, "{what}", "the capture file ends inside a record")
register("CAPTURE_NOTE", NOTE, lambda p: message(p["note"], p),
         "something odd but harmless about the capture file (details.note: a capture.* id)")
register("STATE_DROPPED", WARNING, lambda p: f"more than {p['limit']:,} {p['what']} at once "
         f"({p['option']}): the oldest is forgotten" + (f" ({p['dropped']:,} so far)" if p.get("dropped", 1) > 1 else ""),
         "a cap on remembered state was reached and state was dropped (raise the named option)")

register("response.unmatched", WARNING, lambda p: f"{p['type']} answers {_key(p['key'])}, which no request in the "
         "capture used",
         "a response whose request is not in the capture (although the connection was seen from its start)")
register("response.slow", WARNING, lambda p: f"{p['type']} came {p['latency_s']:.1f} s after its {p['request_type']} "
         f"(frame {p['request']}): past the clients' {p['timeout_s']:.0f} s operation timeout",
         "a response later than the clients' operation timeout (--request-timeout)")
register("response.before_request", WARNING, lambda p: f"{p['type']} is timestamped {-p['latency_ms']:.3f} ms before "
         f"its {p['request_type']} (frame {p['request']}): the capture's clock went backwards",
         "a response whose capture time is earlier than its request's (the clock was stepped back, or captures "
         "were merged out of order): its latency_ms is negative and cannot be right")
register("time.not_a_date", NOTE, lambda p: f"{p['count']:,} time(s) no UTC date can hold (a year outside 1 to 9999; "
         f"the first: {p['first']!r} s since the epoch), shown as seconds since the epoch",
         "--absolute-time: the capture's timestamp of a record is no date (a pcapng timestamp far in the future "
         "or before year 1); the number is shown as it is instead")
register("request.duplicate_id", WARNING, lambda p: f"{_key(p['key'])} reused while an earlier {p['type']} with it "
         "is still unanswered", "a request id reused while the first request is still pending")

_TRUNCATED = {
    "lost_in_gap": "frame of {frame_length} bytes lost in a capture gap after {length} bytes",
    "before_gap": "{length} bytes before a capture gap could not be framed",
    "inside_frame": "stream ended inside a frame: {length} of {frame_length} bytes captured",
    "not_a_frame": "stream ended with {length} bytes that are not a whole frame",
}
def _refused(p: dict) -> bool:
    """A connection reset by the server before either side sent a byte: the port refused it."""
    return p["how"] == "rst" and p.get("closed_by") not in (None, "client") and not any(
        v for k, v in p.items() if k.startswith("bytes_"))


_CUT = {"fin": "stream ended inside this frame ({missing} of {size} bytes never sent): connection closed (FIN)",
        "rst": "stream ended inside this frame ({missing} of {size} bytes never sent): connection reset (RST)",
        "end_of_capture": "the capture ends inside this frame ({missing} of {size} bytes not captured)",
        "reused": "connection replaced by a new one on the same ports inside this frame ({missing} of {size} "
                  "bytes never sent)",
        "evicted": "connection forgotten (--max-connections) inside this frame ({missing} of {size} bytes "
                   "dropped)"}
_CUT_WHY = {"fin": "; the sender stopped mid-frame (its process died or gave up)",
            "rst": "; the sender stopped mid-frame (its process died or gave up)"}
_CLOSED = {"fin": "closed (FIN)", "rst": "reset (RST)", "end_of_capture": "still open at the end of the capture",
           "reused": "replaced by a new connection on the same ports",
           "evicted": "forgotten: too many connections open at once (--max-connections)"}


def _key(fields: dict) -> str:
    return " ".join(f"{name} {value}" for name, value in fields.items())


def _looks_like(p: dict) -> str:
    return f"; the bytes look like {p['foreign']}" if p.get("foreign") else ""
