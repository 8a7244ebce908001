"""One call from a capture file (or a live source) to analysed frames and events, or to JSON-contract records."""

from __future__ import annotations

import dataclasses
import time
from typing import Iterator

from .analysis.conversation import analysed_dissector
from .options import Options
from .output.records import record
from .pipeline import read_file


def analysed_events(path, options: Options | None = None, report: dict | None = None) -> Iterator:
    """``model.Annotated`` frames and ``model.Event`` values in capture order (``report``: see dissect_file)."""
    options = options or Options()
    stage = analysed_dissector(options)
    return read_file(path, stage, report, end=stage.finish)


def analysed_records(path, options: Options | None = None, *, payload_bytes: bool = False,
                     summary: bool = False, report: dict | None = None) -> Iterator[dict]:
    """The JSON Lines contract of a capture, one dict per frame or event, in capture order; ``summary`` records
    (for one-line views) also decode only what those views read (``Options.summary``)."""
    options = options or Options()
    if summary and not options.summary:
        options = dataclasses.replace(options, summary=True)
    for item in analysed_events(path, options, report):
        yield record(item, payload_bytes=payload_bytes, summary=summary)


def analysed_json_lines(path, options: Options | None = None, *, summary: bool = False,
                        report: dict | None = None) -> Iterator[bytes | dict]:
    """``analysed_records`` for a JSON Lines writer: the records of the frames the core decoded as their JSON
    lines (bytes, each line ending in a newline, several in one object), written by the core, which asks
    Python only for the texts of their findings; the other records (events; a frame whose notes would replace
    one of its keys) as dicts, in capture order. The frames' bytes (``Options.keep_frame_bytes``) are not
    kept. ``report`` (see dissect_file) also gets ``json_lines``: (frames, problems) of the lines, at the end."""
    options = options or Options()
    if summary and not options.summary:
        options = dataclasses.replace(options, summary=True)
    stage = analysed_dissector(options, json_records=summary)
    for item in read_file(path, stage, report, end=stage.finish):
        yield item if type(item) is bytes else record(item, summary=summary)
    if report is not None:
        report["json_lines"] = stage.json_lines


def live_items(packets, options: Options | None = None) -> Iterator:
    """Annotated frames and events from a live source, as they come: ``packets`` yields CapturedPackets and
    ``None`` when the link was idle for a moment, which moves the clock (expiries without a next packet).
    The same reassembly, decoding and analysis as a file; only the source differs."""
    options = options or Options()
    stage = analysed_dissector(options)
    for packet in packets:
        if packet is None:
            yield from stage.tick(time.time())
        else:
            yield from stage.feed_packet(packet.index, packet.timestamp, packet.linktype, packet.data,
                                         packet.orig_len)
    stage.hold_finish()
    yield from stage.release()
    yield from stage.finish()
