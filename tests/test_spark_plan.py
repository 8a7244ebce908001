"""The pipeline's plan, made on the driver from the index (``dissector/spark/plan.py``): files in time order and
their offsets, the connections dealt to the partitions largest first, a partition's work per file in capture
order. No Spark: the index rows are made here as the indexing tasks give them."""
from __future__ import annotations

import os

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
    # 7 (900 bytes), -3, 5, 2**62 + 1 each to the least loaded of 2 partitions: 7 alone outweighs the rest;
    # a 64-bit key kept whole
    assert made.work == [
        (0, [("a.pcap", 0, [7]), ("c.pcap", 30, [7])]),
        (1, [("a.pcap", 0, [-3]), ("b.pcap", 10, [5]), ("c.pcap", 30, [(1 << 62) + 1])]),
    ]


def test_more_partitions_than_connections_and_no_input():
    index = _index([{"kind": "file", "file_no": 0, "packets": 3, "time": 1.0, "bytes": 99},
                    {"kind": "flow", "file_no": 0, "flow": 42, "packets": 3, "bytes": 99}])
    assert plan.make(index, ["x.pcap"], 3).work == [(0, [("x.pcap", 0, [42])]), (1, []), (2, [])]
    empty = plan.make(tasks.INDEX.empty_table(), [], 2)
    assert empty.files.num_rows == 0 and empty.notes == [] and empty.work == [(0, []), (1, [])]


def test_files_dealt_to_the_indexing_tasks_largest_first_each_once(tmp_path):
    sizes = {"a.pcap": 50, "b.pcap": 400, "c.pcap": 300, "d.pcap": 100, "e.pcap": 200}
    paths = []
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
        paths.append(str(tmp_path / name))
    paths.append(str(tmp_path / "missing.pcap"))  # counts as empty: its row says it is unreadable
    shares = tasks.deal_files(paths, 2)
    assert len(shares) == 2
    assert sorted(no for share in shares for no, _ in share) == list(range(len(paths)))
    # b, c, e, d, a, missing in turn: 400 + 200 + 50 against 300 + 100 + 0
    assert [[no for no, _ in share] for share in shares] == [[0, 1, 4], [2, 3, 5]]
    assert all(path == paths[no] for share in shares for no, path in share)
    # never more tasks than files, and one (empty) task for no file
    assert len(tasks.deal_files(paths[:1], 8)) == 1
    assert tasks.deal_files([], 4) == [[]]


def test_index_files_writes_a_file_per_input_and_read_index_gives_their_rows(tmp_path):
    from dissector.options import Options

    capture = str(__import__("pathlib").Path(__file__).parent.parent / "captures" / "01_basic_nonbatched.pcap")
    into = tmp_path / tasks.INDEXED
    into.mkdir()
    shares = [[(0, capture), (1, str(tmp_path / "missing.pcap"))]]
    done = list(tasks.index_files(iter(shares), Options(), str(into)))
    assert done == [0, 1]
    assert sorted(os.listdir(into)) == ["file-0.arrow", "file-1.arrow"]
    rows = tasks.read_index(str(into), 2).to_pylist()
    files = {row["file_no"]: row for row in rows if row["kind"] == "file"}
    assert files[0]["packets"] > 0 and files[0]["note_id"] is None
    assert files[1]["note_id"] == "capture.unreadable"
    assert [row["file_no"] for row in rows if row["kind"] == "flow"] and \
        all(row["file_no"] == 0 for row in rows if row["kind"] == "flow")


def test_least_loaded_balances_where_dealing_in_turn_does_not():
    np = pytest.importorskip("numpy")
    sizes = np.array([10, 9, 8, 7, 6, 5, 4, 3, 2, 1], np.int64)
    dealt = plan.least_loaded(sizes, 3)
    loads = np.bincount(dealt, weights=sizes, minlength=3)
    assert sorted(loads.tolist()) == [18.0, 18.0, 19.0]  # in turn: 22, 18, 15
    assert dealt[:3].tolist() == [0, 1, 2]  # equals: the lowest partition first
    assert (plan.least_loaded(sizes, 1) == 0).all()
    assert plan.least_loaded(np.empty(0, np.int64), 4).tolist() == []


def test_the_count_is_skipped_only_when_one_partition_has_all_the_work():
    from dissector.spark.job import needs_numbering

    some = [("a.pcap", 0, [1, 2])]
    assert not needs_numbering([(0, some), (1, []), (2, [])])
    assert not needs_numbering([(0, [])])  # no work at all
    assert needs_numbering([(0, some), (1, [("a.pcap", 0, [3])])])
