"""Frames whose bytes are kept (``Options.keep_frame_bytes``) go through the engine's sinks with their bytes
(``Item::Frame { data, .. }``): their JSON lines are the bytes the binding wrote when it made those records
itself (``tests/golden/kept_frame_bytes/``, see its README), on the pool and in place; the statistics count
them as they count frames without their bytes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from corpus import capture_path
from dissector.options import Options
from dissector.output.jsonl import dumps
from dissector.output.stats import StatsCollector
from dissector.run import analysed_json_lines, analysed_records

GOLDEN = Path(__file__).parent / "golden" / "kept_frame_bytes"
CAPTURES = ["01_basic_nonbatched.pcap", "05_cumulative_ack.pcap", "tubemq/tubemq_consumer_broker.pcap"]


def _json_lines(path, options: Options) -> bytes:
    out = []
    for item in analysed_json_lines(path, options):
        out.append(item if isinstance(item, bytes) else (json.dumps(item) + "\n").encode())
    return b"".join(out)


@pytest.mark.parametrize("pool_bytes", [16 << 20, 0], ids=["pool", "in-place"])
@pytest.mark.parametrize("name", CAPTURES)
def test_kept_bytes_json_lines_are_the_bytes_written_before(name, pool_bytes):
    path = capture_path(name)
    want = gzip.decompress((GOLDEN / (Path(name).name + ".jsonl.gz")).read_bytes())
    got = _json_lines(path, Options(keep_frame_bytes=True, pool_bytes=pool_bytes))
    assert got.count(b'"frame_bytes":') > 10
    assert got == want


@pytest.mark.parametrize("name", CAPTURES)
def test_kept_bytes_leave_the_statistics_as_they_were(name):
    path = capture_path(name)
    results = []
    for keep in (False, True):
        options = Options(keep_frame_bytes=keep)
        stats = StatsCollector(options)
        for _ in analysed_records(path, options, summary=True, stats=stats.core):
            pass
        results.append(dumps(stats.result()))
    assert results[0] == results[1]
