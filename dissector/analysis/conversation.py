"""Conversation analysis: request/response pairing for any protocol, and the protocol's own session state.

The analysis is the compiled core's (``crates/engine/src/analysis/``: the generic pairing, driven by the protocol's
command table; ``crates/engine/src/protocols/pulsar/``: Pulsar's session and chunked-message reassembly). It runs after decoding,
one item at a time, in capture order. A request waits under a key (a space and some command fields) until a
response looks under the same key; the pair gives ``answers``, ``latency_ms`` and ``request_type``, and the
findings ``response.slow``, ``response.unmatched`` and ``request.duplicate_id``. A request still waiting when
its connection closes is ``UNANSWERED``. Then the protocol's session (``ProtocolSpec.session``) adds what only
it knows.

Nothing here edits what the decoder produced: each frame comes out as ``Annotated(frame, notes, findings)``,
the frame object itself. What is kept per waiting request is a few ids, never the frame or its payload, and at
most ``Options.max_pending_requests`` per connection.

The analysis has a clock: ``tick(now)`` (every item's time when reading a file; the wall clock for a live
capture on an idle link) reports a request that has waited past ``Options.request_timeout`` as ``OVERDUE``
when that happens, not only when its answer or its connection's end comes. A heap holds one deadline per
connection (its oldest request not yet reported), so the clock costs nothing per request.
"""

from __future__ import annotations

from dissector import _core as _core

from .. import protocols
from ..model import Annotated, Decoded, Event, Frame
from ..options import Options
from ..problems import Finding, severity_and_message

def analysed_dissector(options: Options, *, records: str | None = None, summary: bool = False,
                       payload_bytes: bool = False, stats=None, timeline=None):
    """The pipeline and this analysis joined in the core (``dissector._core.AnalysedDissector``): packets
    in, Annotated frames and events out; the analysis reads the core's decoded frames without a Python round
    trip. With ``records`` ("dict" or "json"), a frame comes out as its record (the JSON Lines contract;
    ``summary`` and ``payload_bytes`` as in ``output.records.record``), made by the core (``crates/engine/src/records.rs``: Python makes only the texts of its
    findings): a dict, or its JSON line (consecutive lines come as one bytes object). With ``stats`` (a
    ``StatsCollector``'s ``core``) the records go into those statistics, in the core, events too (which still
    come out). With ``records`` "columns" (or "columns+json"), the frames' records and the events go into the
    core's tables (``take_columns``: the pipeline's) and nothing comes out. With ``timeline`` (the core's ``TimelineFormat`` of a renderer), a frame comes out as its plain
    timeline line (``crates/engine/src/timeline.rs``), consecutive lines as one bytes object."""
    classes = (Frame, Event, Decoded, Finding, Annotated)
    mode = None if records is None else (records if records in ("columns", "columns+json") else records == "json", summary, payload_bytes,
                                         severity_and_message)
    lines = None if timeline is None else (timeline, severity_and_message)
    return _core.AnalysedDissector(options, protocols.select(options.protocols), classes, protocols.get, mode, stats,
                                   lines)
