"""The file path reads a capture in batches inside the core (``stage.read_capture``): the reader's notes must
come out as CAPTURE_NOTE events exactly where the per-packet loop put them (before what the packet read
after them completes), CAPTURE_TRUNCATED last, whatever the batch size.

The reference is that per-packet loop, kept here: each packet through ``feed_packet`` when no note is
waiting, else through ``hold_packet`` with the notes put before what it completes.
"""

from __future__ import annotations

import struct

import pytest
from dissector import _core as _core

import pcapgen
from corpus import capture_path
from dissector import pipeline
from dissector.analysis.conversation import analysed_dissector
from dissector.capture.files import open_capture
from dissector.model import Event
from dissector.options import Options
from dissector.output import jsonl
from dissector.output.records import record
from dissector.pipeline import Dissector, dissect_file
from dissector.run import analysed_events, analysed_json_lines


def per_packet(path, stage, note, end):
    """The capture through ``stage`` one packet per call, the notes where they are found."""
    with open_capture(path) as reader:
        told = 0

        def notes():
            nonlocal told
            problems = reader.problems
            while told < len(problems):
                found = problems[told]
                yield from note(Event("CAPTURE_NOTE", stage.last_time, stage.last_packet,
                                      details={"note": found.id, **found.params}))
                told += 1

        for p in reader:
            if told == len(reader.problems):
                yield from stage.feed_packet(p.index, p.timestamp, p.linktype, p.data, p.orig_len)
            elif stage.hold_packet(p.index, p.timestamp, p.linktype, p.data, p.orig_len):
                yield from notes()
                yield from stage.release()
        if stage.hold_finish():
            yield from notes()
            yield from stage.release()
        yield from notes()
        if reader.truncated:
            yield from note(Event("CAPTURE_TRUNCATED", stage.last_time, stage.last_packet,
                                  params={"what": reader.truncated}))
    yield from end()


def _corpus_packets(name="01_basic_nonbatched.pcap"):
    with open_capture(capture_path(name)) as reader:
        return [(p.timestamp, p.data) for p in reader]


def pcapng_with_notes_mid_file(tmp_path):
    """The corpus capture as pcapng with odd blocks between its packets: each makes a note where it is."""
    pk = _corpus_packets()
    blocks = [pcapgen.shb(), pcapgen.idb(1)]
    odd = {
        8: pcapgen.block(0x12345678, b"unknown"),  # capture.block_skipped
        10: pcapgen.block(0x00000BAD, struct.pack("<I", 32473) + b"data"),  # a Custom Block
        20: pcapgen.idb(105),  # capture.unsupported_linktype (interface 1)
        30: pcapgen.epb(9, 1.0, b"x" * 20),  # capture.undefined_interface
        40: pcapgen.spb(pk[40][1]),  # capture.simple_block_time: the packet again, at the previous time
        50: pcapgen.block(6, b"\0" * 8),  # capture.short_block
    }
    for i, (ts, data) in enumerate(pk):
        if i in odd:
            blocks.append(odd[i])
        blocks.append(pcapgen.epb(0, ts, data))
    data = b"".join(blocks)
    path = tmp_path / "notes.pcapng"
    path.write_bytes(data[:-30])  # the last block cut: CAPTURE_TRUNCATED
    return path


def pcap_joined_mid_file(tmp_path):
    """Two corpus captures joined with cat, the second on a link type the dissector cannot read, then a
    third: notes in the middle of the file."""
    a, b = capture_path("01_basic_nonbatched.pcap"), capture_path("05_cumulative_ack.pcap")
    other = pcapgen.pcap_bytes([(1.7e9, b"\0" * 40)], linktype=105)
    path = tmp_path / "joined.pcap"
    path.write_bytes(a.read_bytes() + other + b.read_bytes())
    return path


CAPTURES = {"pcapng": pcapng_with_notes_mid_file, "joined": pcap_joined_mid_file}


@pytest.fixture(params=list(CAPTURES))
def capture(request, tmp_path):
    return CAPTURES[request.param](tmp_path)


def test_the_captures_have_notes_between_frames(capture):
    records = [record(item) for item in analysed_events(capture, Options())]
    kinds = [r["type"] for r in records]
    notes = [i for i, kind in enumerate(kinds) if kind == "CAPTURE_NOTE"]
    assert len(notes) >= 2
    assert any("index" in r for r in records[:notes[0]])  # frames before the first note ...
    assert any("index" in r for r in records[notes[-1]:])  # ... and after the last


@pytest.mark.parametrize("batch", [1, 3, 512, (512, 1), (512, 3000)])
def test_frames_and_events_as_the_per_packet_loop(capture, batch, monkeypatch):
    batch, max_bytes = batch if isinstance(batch, tuple) else (batch, 1 << 30)
    monkeypatch.setattr(pipeline, "READ_BATCH", batch)
    monkeypatch.setattr(pipeline, "READ_BATCH_BYTES", max_bytes)
    stage = Dissector(Options())._core
    expected = list(per_packet(capture, stage, lambda ev: (ev,), tuple))
    got = list(dissect_file(capture, Options()))
    assert [type(x).__name__ for x in got] == [type(x).__name__ for x in expected]
    assert got == expected
    assert any(getattr(x, "kind", None) == "CAPTURE_NOTE" for x in got)


@pytest.mark.parametrize("batch", [1, 3, 512])
def test_analysed_items_as_the_per_packet_loop(capture, batch, monkeypatch):
    monkeypatch.setattr(pipeline, "READ_BATCH", batch)
    stage = analysed_dissector(Options())
    expected = [record(x) for x in per_packet(capture, stage, stage.event, stage.finish)]
    got = [record(x) for x in analysed_events(capture, Options())]
    assert got == expected
    kinds = [r["type"] for r in got]
    assert "CAPTURE_NOTE" in kinds and kinds.count("CAPTURE_TRUNCATED") <= 1


def _lines(item) -> bool:
    """Whether ``item`` is JSON lines the core wrote (bytes, or its ``JsonLines`` buffer)."""
    return type(item) in (bytes, _core.JsonLines)


def _json_lines(items) -> list[bytes]:
    lines = []
    for item in items:
        lines.extend(bytes(item).splitlines() if _lines(item) else [jsonl.dumps(item).rstrip(b"\n")])
    return lines


@pytest.mark.parametrize("summary", [False, True])
@pytest.mark.parametrize("batch", [1, 3, 512])
def test_json_lines_as_the_per_packet_loop(capture, batch, summary, monkeypatch):
    monkeypatch.setattr(pipeline, "READ_BATCH", batch)
    options = Options(summary=summary)
    stage = analysed_dissector(options, records="json", summary=summary)
    expected = _json_lines(x if _lines(x) else record(x, summary=summary)
                           for x in per_packet(capture, stage, stage.event, stage.finish))
    got = _json_lines(analysed_json_lines(capture, options, summary=summary))
    assert got == expected
    assert any(b'"CAPTURE_NOTE"' in line for line in got)


def test_a_batch_is_at_least_the_size_asked_until_the_end():
    stage = Dissector(Options())._core
    with open_capture(capture_path("01_basic_nonbatched.pcap")) as reader:
        sizes = []
        while (items := stage.read_capture(reader._core, 10, 1 << 30)) is not None:
            sizes.append(len(items))
    assert len(sizes) > 3
    assert all(size >= 10 for size in sizes[:-1])
    assert stage.read_capture is not None and sizes[-1] >= 0


def test_a_batch_stops_after_the_bytes_asked():
    stage = Dissector(Options())._core
    with open_capture(capture_path("01_basic_nonbatched.pcap")) as reader:
        stage.read_capture(reader._core, 10_000, 1)
        assert reader.packets == 1  # one packet of more than a byte: the batch ends there
        stage.read_capture(reader._core, 10_000, 3000)
        assert 1 < reader.packets < 71


def test_reading_on_after_the_end_gives_none():
    stage = Dissector(Options())._core
    with open_capture(capture_path("01_basic_nonbatched.pcap")) as reader:
        while stage.read_capture(reader._core, 1000, 1 << 30) is not None:
            pass
        assert stage.read_capture(reader._core, 1000, 1 << 30) is None
        assert reader.packets == 71
