"""A decoding task that reads a file differently from the index (`tables.unread`): a file its machine cannot
open or read as far (a path not mounted on an executor, a file cut or removed since it was indexed) is an
error row in `problems` and in the summary, never a silent gap in the tables; a file that grew after it was
indexed is a warning. Outside Spark: the task's own function, and the driver's tables."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from dissector.options import Options  # noqa: E402
from dissector.spark import plan as planning, tables, tasks  # noqa: E402
from dissector.spark.rows import write_empty  # noqa: E402

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def _files(packets: dict[str, int]) -> pa.Table:
    rows = {name: [] for name in planning.FILES.names}
    for order, (path, n) in enumerate(packets.items(), 1):
        for name, value in (("order", order), ("path", path), ("packets", n), ("first_time", 1.0), ("size", 100),
                            ("offset", 0), ("ended_id", None), ("ended", None)):
            rows[name].append(value)
    return pa.Table.from_pydict(rows, schema=planning.FILES)


def test_a_file_read_short_is_an_error_and_one_that_grew_a_warning():
    files = _files({"/a.pcap": 10, "/b.pcap": 10, "/c.pcap": 10, "/d.pcap": 0})
    reads = [("/a.pcap", 10, None), ("/a.pcap", 10, None),          # read alike by two tasks: no problem
             ("/b.pcap", 4, "read error: EIO"), ("/b.pcap", 10, None),  # one task of two read it short
             ("/c.pcap", 12, None),                                   # grew since
             ("/d.pcap", 0, "truncated")]                             # the index read none either: alike
    found = {path: (pid, severity, message) for path, pid, severity, message in tables.unread(files, reads)}
    assert set(found) == {"/b.pcap", "/c.pcap"}
    assert found["/b.pcap"][:2] == ("capture.unreadable", "error") and "EIO" in found["/b.pcap"][2]
    assert found["/c.pcap"][:2] == ("capture.changed", "warning")


def test_a_file_a_task_cannot_open_is_in_the_problems_and_the_summary(tmp_path):
    capture = tmp_path / "x.pcap"
    shutil.copy(CAPTURES / "11_errors.pcap", capture)
    out = str(tmp_path / "out")
    os.makedirs(out)
    indexed, numbering = os.path.join(out, tasks.INDEXED), os.path.join(out, tasks.NUMBERING)
    os.makedirs(indexed)
    for _ in tasks.index_files([[(0, str(capture))]], options=Options(), into=indexed):
        pass
    plan = planning.make(tasks.read_index(indexed, 1), [str(capture)], 1)
    os.makedirs(numbering)
    write_empty(out)
    os.makedirs(os.path.join(out, tasks.PROGRESS))
    packets = plan.files.column("packets")[0].as_py()
    assert packets > 0

    def decode():
        [(part, reads)] = list(tasks.decode([plan.work[0]], Options(), out, numbering))
        return part, reads

    part, reads = decode()  # read whole: as the index read it
    assert reads == [(str(capture), packets, None)]
    assert tables.unread(plan.files, reads) == []

    capture.unlink()  # gone from this machine since it was indexed
    part, reads = decode()
    assert [(path, read) for path, read, _ in reads] == [(str(capture), 0)]
    unread = tables.unread(plan.files, reads)
    summary = tables.write([part], plan.files, plan.notes, [], out, unread=unread)
    assert {"id": "capture.unreadable", "severity": "error", "count": 1} in summary["problems"]
    assert [(p["path"], p["id"]) for p in summary["file_problems"]] == [(str(capture), "capture.unreadable")]
    assert summary["files"]["unreadable"] == 1
    rows = pq.read_table(os.path.join(out, "problems")).to_pylist()
    assert [(r["id"], r["severity"], r["file"]) for r in rows if r["file"] is not None] == \
        [("capture.unreadable", "error", str(capture))]
    assert json.load(open(os.path.join(out, tables.SUMMARY)))["problems"] == summary["problems"]
