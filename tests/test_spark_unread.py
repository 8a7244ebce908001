"""A decoding task that reads a file differently from the index (`tables.unread`): a file its machine cannot
open or read as far (a path not mounted on an executor, a file cut or removed since it was indexed) is an
error row in `problems` and in the summary, never a silent gap in the tables; a file that grew after it was
indexed is a warning. Outside Spark: the task's own function, and the driver's tables."""
from __future__ import annotations

import errno
import io
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark import TaskContext  # noqa: E402

from dissector.capture.writer import write_rotated  # noqa: E402
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


class _FailingFile(io.RawIOBase):
    """A file whose reads fail with EIO from byte ``fail_at`` on (a disk or a network mount failing midway)."""

    def __init__(self, path: str, fail_at: int):
        self.file, self.fail_at = open(path, "rb"), fail_at

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.file.tell() >= self.fail_at:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        data = self.file.read(min(len(buffer), self.fail_at - self.file.tell()))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.file.close()
        super().close()


def _job_outside_spark(files: list[str], partitions: int, out: str):
    """The stages of ``job.run`` in this process, each partition's task in turn (its partition id as Spark would
    give it): the frames table's rows in frame order, the counting tasks' reads, the decoding tasks' and the
    files table."""
    indexed, numbering = os.path.join(out, tasks.INDEXED), os.path.join(out, tasks.NUMBERING)
    for folder in (indexed, numbering, os.path.join(out, tasks.PROGRESS)):
        os.makedirs(folder)
    for _ in tasks.index_files([list(enumerate(files))], options=Options(), into=indexed):
        pass
    plan = planning.make(tasks.read_index(indexed, len(files)), files, partitions)
    counted = [row for item in plan.work for row in tasks.count_numbers([item], Options(), numbering)]
    for _ in tasks.number([pa.RecordBatch.from_pydict({"slot": [row[0] for row in counted]})], numbering):
        pass
    write_empty(out)
    decoded = []
    for item in plan.work:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(TaskContext, "get", staticmethod(lambda slot=item[0]: _Partition(slot)))
            decoded += list(tasks.decode([item], Options(), out, numbering))
    frames = pq.read_table(os.path.join(out, "frames")).to_pydict()
    rows = sorted(zip(frames["index"], frames["packet"], frames["conn"], frames["type"], frames["answers"]))
    return (rows, [read for *_, reads in counted for read in reads], [read for _, reads in decoded for read in reads],
            plan.files)


class _Partition:
    def __init__(self, slot: int):
        self.slot = slot

    def partitionId(self) -> int:
        return self.slot


def test_a_read_error_midway_is_the_file_s_end_for_every_reading(tmp_path, monkeypatch):
    """A file whose reading fails midway (EIO) on every machine, between others, in three partitions: the index,
    the count and the decoding all end it there (the reader notes the error as where the file was cut), so every
    frame is numbered as one task reading the input in order numbers it, and the tasks' reads agree with the
    index (no problem of ``unread``'s; the index's own row says how the file ended)."""
    pieces = write_rotated(CAPTURES / "11_errors.pcap", tmp_path, "rotated.pcap", {60, 140})
    failing = str(pieces[1])
    real = tasks.open_capture
    monkeypatch.setattr(tasks, "open_capture", lambda path: real(
        _FailingFile(path, os.path.getsize(path) // 2) if path == failing else path))
    files = [str(p) for p in pieces]
    one, _, _, _ = _job_outside_spark(files, 1, str(tmp_path / "one"))
    three, counted, decoded, plan_files = _job_outside_spark(files, 3, str(tmp_path / "three"))
    assert len(one) > 50 and three == one
    indexed = dict(zip(plan_files.column("path").to_pylist(), plan_files.column("packets").to_pylist()))
    assert 0 < indexed[failing] < sum(1 for _ in real(failing))
    ended = dict(zip(plan_files.column("path").to_pylist(), plan_files.column("ended").to_pylist()))
    assert "Input/output error" in ended[failing]
    assert {(path, read) for path, read, _ in counted + decoded if path == failing} == {(failing, indexed[failing])}
    assert tables.unread(plan_files, decoded, counted) == []


def test_a_file_a_counting_task_read_short_is_an_error(tmp_path):
    files = _files({"/a.pcap": 10, "/b.pcap": 10})
    found = tables.unread(files, [("/a.pcap", 10, None), ("/b.pcap", 10, None)],
                          [("/a.pcap", 10, None), ("/b.pcap", 3, "OSError: [Errno 5] Input/output error")])
    assert [(path, pid, severity) for path, pid, severity, _ in found] == [("/b.pcap", "capture.unreadable", "error")]
    assert "counting" in found[0][3] and "Errno 5" in found[0][3]
    # the decoding's reading first: one problem a file
    found = tables.unread(files, [("/b.pcap", 0, "no such file")], [("/b.pcap", 3, None)])
    assert len(found) == 1 and "decoding" in found[0][3]


class _CountFails:
    """A dissector core whose count raises as a reader's error would (an OSError the reader did not turn into
    the file's end)."""

    def __init__(self, core):
        self._inner = core

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def count_selected(self, reader, flows, offset):
        for _ in reader:  # every packet read, as far as the index read, then the error
            pass
        raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_count_that_raised_is_a_file_read_short(tmp_path, monkeypatch):
    """A counting task whose count of a file raised has none of that file's rows: every file it counted so is
    a ``capture.unreadable`` error naming the counting, though the reader had read as far as the index."""
    import dissector.pipeline

    pieces = write_rotated(CAPTURES / "11_errors.pcap", tmp_path, "rotated.pcap", {60, 140})
    files = [str(p) for p in pieces]
    real = dissector.pipeline.Dissector

    class Dissector(real):
        def __init__(self, options):
            super().__init__(options)
            self._core = _CountFails(self._core)

    monkeypatch.setattr(dissector.pipeline, "Dissector", Dissector)
    _, counted, decoded, plan_files = _job_outside_spark(files, 3, str(tmp_path / "three"))
    assert counted and all(read == 0 and "Input/output error" in stopped for _, read, stopped in counted)
    found = tables.unread(plan_files, decoded, counted)
    assert {path for path, _, _ in counted} == {path for path, _, _, _ in found}
    assert {(pid, severity) for _, pid, severity, _ in found} == {("capture.unreadable", "error")}
    assert all("counting" in message for *_, message in found)
