"""The pipeline's plan, made on the driver from the index (``dissector/spark/plan.py``): files in time order and
their offsets, the connections dealt to the partitions largest first, a partition's work per file in capture
order. No Spark: the index rows are made here as the indexing tasks give them."""
from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("numpy")

from dissector.spark import plan, tasks  # noqa: E402


def _index(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{name: row.get(name) for name in tasks.INDEX.names} for row in rows],
                                schema=tasks.INDEX)


def test_files_in_time_order_with_offsets_and_connections_dealt_largest_first():
    paths = ["c.pcap", "a.pcap", "b.pcap", "bad.pcap"]
    index = _index([
        {"kind": "file", "file_no": 0, "packets": 30, "time": 300.0, "bytes": 3000},
        {"kind": "file", "file_no": 1, "packets": 10, "time": 100.0, "bytes": 1000},
        {"kind": "file", "file_no": 2, "packets": 20, "time": 100.0, "bytes": 2000},  # same time: by path
        {"kind": "file", "file_no": 3, "packets": 0, "bytes": 5, "note_id": "capture.unreadable", "note": "no"},
        {"kind": "note", "file_no": 2, "note_id": "capture.snaplen", "note": "{}"},
        # connection 7 spans a.pcap and c.pcap (the largest in all: 900 bytes); 5 and -3 tie at 400 (by key)
        {"kind": "flow", "file_no": 1, "flow": 7, "packets": 4, "bytes": 500},
        {"kind": "flow", "file_no": 0, "flow": 7, "packets": 4, "bytes": 400},
        {"kind": "flow", "file_no": 2, "flow": 5, "packets": 2, "bytes": 400},
        {"kind": "flow", "file_no": 1, "flow": -3, "packets": 2, "bytes": 400},
        {"kind": "flow", "file_no": 0, "flow": (1 << 62) + 1, "packets": 1, "bytes": 10},
    ])
    made = plan.make(index, paths, 2)
    files = made.files.to_pydict()
    assert files["path"] == ["a.pcap", "b.pcap", "c.pcap", "bad.pcap"]
    assert files["order"] == [1, 2, 3, 4]
    assert files["offset"] == [0, 10, 30, 60]
    assert files["ended_id"] == [None, None, None, "capture.unreadable"]
    assert made.notes == [("b.pcap", "capture.snaplen", "{}")]
    # dealt 7, -3, 5, 2**62 + 1 in turn over 2 partitions; a 64-bit key kept whole
    assert made.work == [
        (0, [("a.pcap", 0, [7]), ("b.pcap", 10, [5]), ("c.pcap", 30, [7])]),
        (1, [("a.pcap", 0, [-3]), ("c.pcap", 30, [(1 << 62) + 1])]),
    ]


def test_more_partitions_than_connections_and_no_input():
    index = _index([{"kind": "file", "file_no": 0, "packets": 3, "time": 1.0, "bytes": 99},
                    {"kind": "flow", "file_no": 0, "flow": 42, "packets": 3, "bytes": 99}])
    assert plan.make(index, ["x.pcap"], 3).work == [(0, [("x.pcap", 0, [42])]), (1, []), (2, [])]
    empty = plan.make(tasks.INDEX.empty_table(), [], 2)
    assert empty.files.num_rows == 0 and empty.notes == [] and empty.work == [(0, []), (1, [])]
