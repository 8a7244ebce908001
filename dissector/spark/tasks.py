"""What Spark's executors run: plain functions of Arrow record batches (``DataFrame.mapInArrow``), the same
reader, pipeline and analysis as the CLI (the compiled core), nothing of Spark imported here but its Arrow
batches. Each function is one stage of ``dissector/spark/job.py``:

- ``read_files``: one task per capture file, streaming its packets (the core's reader: pcap, pcapng, gzip):
  a row per TCP packet on a protocol's port (its connection's key, its number in the file, its bytes), a row
  per file (packets, first time, how reading ended) and a row per reader note. A file that cannot be read is
  a row too, never a failed task.
- ``count_numbers``: the first pass over a partition of connections, in capture order: per packet, the
  frames it completes and the connections it opens (``Dissector.count_packet``: no decoding into Python),
  and at the end the frames the capture's end leaves per connection. From these the job numbers frames and
  connections as a run over the whole capture would.
- ``decode``: the second pass, the full pipeline and analysis (``--json``'s records, written by the core)
  with those numbers set before each packet, so a record is the CLI's line for that frame; the task writes
  the frames and messages tables itself (``rows.py``) and gives Spark only the events.
"""
from __future__ import annotations

import os

import orjson
import pyarrow as pa

from dissector.capture.files import CaptureError, open_capture
from dissector.options import Options

#: A batch of packet rows is given to Spark at this many rows or bytes of packets, whichever comes first
#: (a file is never held whole).
BATCH_ROWS = 8192
BATCH_BYTES = 16 << 20

PACKETS = pa.schema([
    ("kind", pa.string()),        # "packet", "file" or "note"
    ("file_no", pa.int32()),
    ("number", pa.int64()),       # the packet's number in its file (1-based); a file row: its packet count
    ("time", pa.float64()),       # a file row: its first packet's time (null without packets)
    ("linktype", pa.int64()),
    ("orig_len", pa.int64()),
    ("data", pa.binary()),
    ("flow", pa.string()),        # the connection's key: both endpoints, in order
    ("note_id", pa.string()),     # a note: its problem id; a file row: how reading ended (null: cleanly)
    ("note", pa.string()),        # its text (or its parameters, as JSON)
    ("size", pa.int64()),         # a file row: its size in bytes
])

NUMBERS = pa.schema([
    ("kind", pa.string()),        # "packet": what a packet made; "finish": what the end left on a connection
    ("p", pa.int64()),            # the packet's number in the whole input; a finish row: its connection's first packet
    ("frames", pa.int64()),
    ("opened", pa.int64()),
])

EVENTS = pa.schema([
    ("p", pa.int64()),            # the packet that made it (null: the end of the input)
    ("json", pa.string()),        # the event's record, as `pulsar-dissect --json` writes it
])


def _ports(options: Options) -> set[int] | None:
    """The server ports the pipeline watches (None with --detect: every TCP connection may be one)."""
    if options.detect:
        return None
    from dissector import protocols

    ports = set(options.port_numbers)
    for spec in protocols.select(options.protocols):
        ports.update(spec.ports)
    return ports


class _Rows:
    """Columns gathered row by row, given out as record batches."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.columns = {name: [] for name in schema.names}
        self.rows = 0
        self.bytes = 0

    def add(self, **values) -> None:
        for name, column in self.columns.items():
            column.append(values.get(name))
        self.rows += 1
        data = values.get("data")
        self.bytes += len(data) if data else 0

    def full(self) -> bool:
        return self.rows >= BATCH_ROWS or self.bytes >= BATCH_BYTES

    def batch(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(self.columns, schema=self.schema)
        self.columns = {name: [] for name in self.schema.names}
        self.rows = self.bytes = 0
        return batch


def read_files(batches, options: Options):
    """Rows (``PACKETS``) of the files named by ``batches`` (columns ``file_no``, ``path``)."""
    ports = _ports(options)
    for batch in batches:
        for file_no, path in zip(batch.column("file_no").to_pylist(), batch.column("path").to_pylist()):
            yield from _read_file(file_no, path, ports)


def _packet_batch(file_no: int, columns: list[bytes], rows: int) -> pa.RecordBatch:
    """The core's columns (``CaptureReader.tcp_columns``) as a batch of packet rows, without a Python object
    per packet."""
    numbers, times, linktypes, orig_lens, data_offsets, data, flow_offsets, flows = (pa.py_buffer(c) for c in columns)
    nulls = pa.nulls(rows, pa.string())
    return pa.RecordBatch.from_arrays([
        pa.array(["packet"] * rows, pa.string()),
        pa.array([file_no] * rows, pa.int32()),
        pa.Array.from_buffers(pa.int64(), rows, [None, numbers]),
        pa.Array.from_buffers(pa.float64(), rows, [None, times]),
        pa.Array.from_buffers(pa.int64(), rows, [None, linktypes]),
        pa.Array.from_buffers(pa.int64(), rows, [None, orig_lens]),
        pa.Array.from_buffers(pa.binary(), rows, [None, data_offsets, data]),
        pa.Array.from_buffers(pa.string(), rows, [None, flow_offsets, flows]),
        nulls, nulls, pa.nulls(rows, pa.int64()),
    ], schema=PACKETS)


def _read_file(file_no: int, path: str, ports):
    rows = _Rows(PACKETS)
    size = None
    try:
        size = os.path.getsize(path)
        reader = open_capture(path)
    except (CaptureError, OSError) as exc:
        rows.add(kind="file", file_no=file_no, number=0, note_id="capture.unreadable", note=str(exc), size=size)
        yield rows.batch()
        return
    count, first_time, ended = 0, None, None
    with reader:
        try:
            while (got := reader._core.tcp_columns(BATCH_ROWS, BATCH_BYTES, ports)) is not None:
                columns, tcp_rows, read, first = got
                count += read
                first_time = first if first_time is None else first_time
                if tcp_rows:
                    yield _packet_batch(file_no, columns, tcp_rows)
        except (CaptureError, OSError) as exc:  # a read error after the header: what came before stands
            ended = f"capture file unreadable after {count} packets: {exc}"
        ended = ended or reader.truncated
        for finding in reader.problems:
            rows.add(kind="note", file_no=file_no, note_id=finding.id, note=orjson.dumps(finding.params, default=str).decode())
    rows.add(kind="file", file_no=file_no, number=count, time=first_time, size=size,
             note_id=None if ended is None else "capture.truncated", note=ended)
    yield rows.batch()


def _packets(batches):
    """(p, time, linktype, data, orig_len) and the numbers (frames_before, conn_id, finish_base: None before
    they are known) of each packet row, in the order given."""
    none = (None, None, None)
    for batch in batches:
        columns = [batch.column(name).to_pylist() for name in ("p", "time", "linktype", "data", "orig_len")]
        names = batch.schema.names
        numbers = list(zip(*(batch.column(name).to_pylist() for name in ("frames_before", "conn_id", "finish_base")))) \
            if "frames_before" in names else None
        for i, row in enumerate(zip(*columns)):
            yield row, (none if numbers is None else numbers[i])


def count_numbers(batches, options: Options):
    """Rows (``NUMBERS``) of a partition's packets (sorted by ``p``): what each packet made, what the end
    left per connection (keyed by that connection's first packet)."""
    from dissector.pipeline import Dissector

    dissector = Dissector(options)._core
    count = dissector.count_packet
    first_packet = {}  # the partition's connection ids → the packet that opened each
    rows = _Rows(NUMBERS)
    for (p, time, linktype, data, orig_len), _ in _packets(batches):
        frames, opened = count(p, time, linktype, data, orig_len)
        if opened:
            first_packet[dissector.numbering[1] - 1] = p
        if frames or opened:
            rows.add(kind="packet", p=p, frames=frames, opened=opened)
            if rows.full():
                yield rows.batch()
    for conn, frames in dissector.count_finish():
        rows.add(kind="finish", p=first_packet.get(conn, -1), frames=frames, opened=0)
    if rows.rows:
        yield rows.batch()


def decode(batches, options: Options, out: str):
    """A partition's packets (sorted by ``p``, with the numbers the first pass gave: ``frames_before``,
    ``conn_id`` where a connection opens, ``finish_base``: the frames numbered before what the end of the input
    leaves on that connection) through the CLI's pipeline and analysis: each frame's record (as ``--json``
    writes it) into this task's files of the frames and messages tables under ``out`` (``rows.py``); rows
    (``EVENTS``) for the events' records."""
    from pyspark import TaskContext

    from dissector.analysis.conversation import analysed_dissector
    from dissector.output.records import event_record
    from dissector.spark.rows import FrameTables

    context = TaskContext.get()
    tables = FrameTables(out, context.partitionId() if context is not None else 0)
    stage = analysed_dissector(options, records="json")
    rows = _Rows(EVENTS)
    finish_bases = {}

    def take(items, p):
        for item in items:
            if type(item) is bytes:
                tables.add(item)
            else:
                rows.add(p=p, json=orjson.dumps(event_record(item), default=str).decode())

    for (p, time, linktype, data, orig_len), numbers in _packets(batches):
        frames_before, conn_id, finish_base = numbers
        if frames_before is not None:
            stage.set_numbering(frames_before, conn_id)
            if finish_base is not None:
                finish_bases[conn_id] = finish_base
        take(stage.feed_packet(p, time, linktype, data, orig_len), p)
        if rows.full():
            yield rows.batch()
    for conn, base in finish_bases.items():
        stage.set_finish_base(conn, base)
    stage.hold_finish()
    take(stage.release(), None)
    take(stage.finish(), None)
    tables.close()
    if rows.rows:
        yield rows.batch()
