"""One call from a capture file to analysed events or JSON-contract records (what the CLI and tests use)."""

from __future__ import annotations

from typing import Iterator

from .analysis import ConversationAnalyzer
from .pipeline import Options, dissect_file
from .records import record


def analysed_events(path, options: Options | None = None) -> Iterator:
    """Decoded frames and stream events in capture order, annotated by the conversation analysis."""
    options = options or Options()
    analyzer = ConversationAnalyzer(options.max_decompressed)
    for ev in dissect_file(path, options):
        extra = analyzer.process(ev)
        yield ev
        yield from extra
    yield from analyzer.finish()


def analysed_records(path, options: Options | None = None, *, payload_bytes: bool = False) -> Iterator[dict]:
    for ev in analysed_events(path, options):
        yield record(ev, payload_bytes=payload_bytes)
