"""One call from a capture file to analysed frames and events, or to JSON-contract records."""

from __future__ import annotations

import dataclasses
from typing import Iterator

from .analysis.conversation import analyse
from .options import Options
from .output.records import record
from .pipeline import dissect_file


def analysed_events(path, options: Options | None = None) -> Iterator:
    """``model.Annotated`` frames and ``model.Event`` values in capture order."""
    options = options or Options()
    return analyse(dissect_file(path, options), options)


def analysed_records(path, options: Options | None = None, *, payload_bytes: bool = False,
                     summary: bool = False) -> Iterator[dict]:
    """The JSON Lines contract of a capture, one dict per frame or event, in capture order; ``summary`` records
    (for one-line views) also decode only what those views read (``Options.summary``)."""
    options = options or Options()
    if summary and not options.summary:
        options = dataclasses.replace(options, summary=True)
    for item in analysed_events(path, options):
        yield record(item, payload_bytes=payload_bytes, summary=summary)
