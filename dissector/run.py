"""One call from a capture file to analysed events or JSON-contract records (what the CLI and tests use)."""

from __future__ import annotations

import gc
from typing import Iterator

from .analysis import ConversationAnalyzer
from .pipeline import Options, dissect_file
from .records import record


# The pipeline allocates millions of short-lived objects that reference counting frees; the cyclic garbage
# collector scanning them (and the long-lived session state) cost a third of the run time on big captures.
# It runs by hand every GC_EVERY events instead, which still reclaims any cycle a library might create.
GC_EVERY = 200_000


def analysed_events(path, options: Options | None = None) -> Iterator:
    """Decoded frames and stream events in capture order, annotated by the conversation analysis."""
    options = options or Options()
    analyzer = ConversationAnalyzer(options.max_decompressed)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for n, ev in enumerate(dissect_file(path, options), 1):
            extra = analyzer.process(ev)
            yield ev
            yield from extra
            if n % GC_EVERY == 0:
                gc.collect(1)
        yield from analyzer.finish()
    finally:
        if was_enabled:
            gc.enable()


def analysed_records(path, options: Options | None = None, *, payload_bytes: bool = False) -> Iterator[dict]:
    for ev in analysed_events(path, options):
        yield record(ev, payload_bytes=payload_bytes)
