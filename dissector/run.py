"""One call from a capture file (or a live source) to analysed frames and events, or to JSON-contract records."""

from __future__ import annotations

import dataclasses
import time
from typing import Iterator

from dissector import _core as _core

from .analysis.conversation import analysed_dissector
from .options import Options
from .output.records import event_record, record
from .pipeline import read_file


def analysed_events(path, options: Options | None = None, report: dict | None = None) -> Iterator:
    """``model.Annotated`` frames and ``model.Event`` values in capture order (``report``: see dissect_file)."""
    options = options or Options()
    stage = analysed_dissector(options)
    return read_file(path, stage, report, end=stage.finish)


def analysed_records(path, options: Options | None = None, *, payload_bytes: bool = False,
                     summary: bool = False, report: dict | None = None, stats=None) -> Iterator[dict]:
    """The JSON Lines contract of a capture, one dict per frame or event, in capture order: the frames'
    records made by the core (``crates/engine/src/records.rs``), the events' by ``output.records.event_record``.
    ``summary`` records (for one-line views) also decode only what those views read (``Options.summary``);
    ``payload_bytes``: each message's payload too (``output.records.record``). With ``stats`` (a
    ``StatsCollector``'s ``core``), every record goes into those statistics in the core, in capture order, and
    only the events come out (already counted); ``report`` then also gets ``core_records``: (frames,
    problems) of the frames' records."""
    options = options or Options()
    if summary and not options.summary:
        options = dataclasses.replace(options, summary=True)
    stage = analysed_dissector(options, records="dict", summary=summary, payload_bytes=payload_bytes, stats=stats)
    for item in read_file(path, stage, report, end=stage.finish):
        yield item if type(item) is dict else event_record(item)
    if report is not None and stats is not None:
        report["core_records"] = stage.json_lines


def analysed_json_lines(path, options: Options | None = None, *, summary: bool = False,
                        payload_bytes: bool = False, report: dict | None = None,
                        buffers: bool = False) -> Iterator[bytes | dict]:
    """``analysed_records`` for a JSON Lines writer: the frames' records as their JSON lines (bytes, each line
    ending in a newline, several in one object), written by the core, the events' as dicts, in capture order.
    ``report`` (see dissect_file) also gets ``json_lines``: (frames, problems) of the lines, at the end.
    ``buffers``: the lines as the core's ``JsonLines`` instead of bytes, read-only buffers over its own bytes
    (a binary file writes them as it writes bytes), without a copy."""
    options = options or Options()
    if summary and not options.summary:
        options = dataclasses.replace(options, summary=True)
    stage = analysed_dissector(options, records="json", summary=summary, payload_bytes=payload_bytes)
    for item in read_file(path, stage, report, end=stage.finish):
        if type(item) is _core.JsonLines:
            yield item if buffers else bytes(item)
        else:
            yield event_record(item)
    if report is not None:
        report["json_lines"] = stage.json_lines


def analysed_timeline_lines(path, timeline, options: Options | None = None, *, payload_bytes: bool = False,
                            summary: bool = False, report: dict | None = None) -> Iterator[bytes | dict]:
    """``analysed_records`` for a plain timeline: the frames the core decoded and the events it made as their
    timeline lines (bytes, each line ending in a newline, several in one object), written by the engine's sink
    with ``timeline`` (a renderer's ``TimelineFormat``: its plans and time origin), which asks Python only for
    the protocols' plans and the texts of findings and events; the other records (the capture file's notes; a
    frame whose bytes are kept) as dicts, in capture order, for the renderer (``payload_bytes`` and ``summary``
    as for ``analysed_records``). ``report`` (see dissect_file) also gets ``timeline_lines``: (frames, problems)
    of the lines, at the end."""
    options = options or Options()
    if summary and not options.summary:
        options = dataclasses.replace(options, summary=True)
    stage = analysed_dissector(options, timeline=timeline)
    for item in read_file(path, stage, report, end=stage.finish):
        yield item if type(item) is bytes else record(item, payload_bytes=payload_bytes, summary=summary)
    if report is not None:
        report["timeline_lines"] = stage.timeline_lines


def live_items(packets, options: Options | None = None) -> Iterator:
    """Annotated frames and events from a live source, as they come: ``packets`` yields CapturedPackets and
    ``None`` when the link was idle for a moment, which moves the clock (expiries without a next packet).
    The same reassembly, decoding and analysis as a file; only the source differs."""
    return _live(analysed_dissector(options or Options()), packets)


def live_records(packets, options: Options | None = None, *, payload_bytes: bool = False,
                 summary: bool = False) -> Iterator[dict]:
    """``live_items`` as records (see ``analysed_records``)."""
    stage = analysed_dissector(options or Options(), records="dict", summary=summary, payload_bytes=payload_bytes)
    for item in _live(stage, packets):
        yield item if type(item) is dict else event_record(item)


def _live(stage, packets) -> Iterator:
    for packet in packets:
        if packet is None:
            yield from stage.tick(time.time())
        else:
            yield from stage.feed_packet(packet.index, packet.timestamp, packet.linktype, packet.data,
                                         packet.orig_len)
    stage.hold_finish()
    yield from stage.release()
    yield from stage.finish()
