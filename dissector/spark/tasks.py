"""What Spark's executors run: plain functions of Arrow record batches (``DataFrame.mapInArrow``), the same
reader, pipeline and analysis as the CLI (the compiled core), nothing of Spark imported here but its Arrow
batches. Packets never pass through Spark: each task reads the capture files it needs itself. Each function is
one stage of ``dissector/spark/job.py``:

- ``index_files``: one task per capture file (pcap, pcapng, gzip), streaming it once: a row per TCP
  connection on a protocol's port (its key, ``flow_key`` in the core, its packets and bytes), a row per file
  (packets, first time, how reading ended) and a row per reader note. A file that cannot be read is a row
  too, never a failed task.
- ``count_numbers``: per partition (some connections, and the files they are in, in capture order), the
  first pass: the packets that complete frames or open connections, and at the end the frames the end of the
  input leaves per connection (``Dissector.count_selected``: no decoding into Python). From these the job
  numbers frames and connections as a run over the whole input would.
- ``decode``: the second pass over the same files, the full pipeline and analysis with those numbers set
  before their packets (``AnalysedDissector.read_selected``), so a record is the CLI's line for that frame:
  the core makes the records straight into the frames and messages tables' columns, which the task writes
  itself (``rows.py``); it gives Spark only the events.
"""
from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dissector.capture.files import CaptureError, open_capture
from dissector.options import Options

#: Rows given to Spark at once.
BATCH_ROWS = 8192

INDEX = pa.schema([
    ("kind", pa.string()),        # "flow", "file" or "note"
    ("file_no", pa.int32()),
    ("flow", pa.int64()),         # a flow row: its connection's key
    ("packets", pa.int64()),      # a flow row: its packets in the file; a file row: the file's packets
    ("bytes", pa.int64()),        # a flow row: its packets' bytes; a file row: the file's size
    ("time", pa.float64()),       # a file row: its first packet's time (null without packets)
    ("note_id", pa.string()),     # a note: its problem id; a file row: how reading ended (null: cleanly)
    ("note", pa.string()),        # its text (or its parameters, as JSON)
])

NUMBERS = pa.schema([
    ("kind", pa.string()),        # "packet": what a packet made; "finish": what the end left on a connection
    ("slot", pa.int64()),         # the partition's key
    ("p", pa.int64()),            # the packet's number in the whole input; a finish row: its connection's first packet
    ("frames", pa.int64()),
    ("opened", pa.int64()),
])

EVENTS = pa.schema([
    ("p", pa.int64()),            # the event's packet
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

    def add(self, **values) -> None:
        for name, column in self.columns.items():
            column.append(values.get(name))
        self.rows += 1

    def full(self) -> bool:
        return self.rows >= BATCH_ROWS

    def batch(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(self.columns, schema=self.schema)
        self.columns = {name: [] for name in self.schema.names}
        self.rows = 0
        return batch


def _int64s(buffer: bytes) -> pa.Array:
    """A little-endian int64 buffer from the core as an Arrow array (no copy)."""
    return pa.Array.from_buffers(pa.int64(), len(buffer) // 8, [None, pa.py_buffer(buffer)])


def _int64_bytes(column, null: int = -1) -> bytes:
    """An Arrow integer column as a little-endian int64 buffer for the core (nulls as ``null``)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    array = pc.fill_null(array, null).cast(pa.int64())
    return array.buffers()[1].to_pybytes()[array.offset * 8:(array.offset + len(array)) * 8]


def index_files(batches, options: Options):
    """Rows (``INDEX``) of the files named by ``batches`` (columns ``file_no``, ``path``)."""
    ports = _ports(options)
    for batch in batches:
        for file_no, path in zip(batch.column("file_no").to_pylist(), batch.column("path").to_pylist()):
            yield from _index_file(file_no, path, ports)


def _index_file(file_no: int, path: str, ports):
    rows = _Rows(INDEX)
    size = None
    try:
        size = os.path.getsize(path)
        reader = open_capture(path)
    except (CaptureError, OSError) as exc:
        rows.add(kind="file", file_no=file_no, packets=0, note_id="capture.unreadable", note=str(exc), bytes=size)
        yield rows.batch()
        return
    with reader:
        (keys, packets, sizes), count, first_time, error = reader._core.flow_index(ports)
        flows = len(keys) // 8
        if flows:
            yield pa.RecordBatch.from_arrays([
                pa.array(["flow"] * flows, pa.string()), pa.array([file_no] * flows, pa.int32()),
                _int64s(keys), _int64s(packets), _int64s(sizes),
                pa.nulls(flows, pa.float64()), pa.nulls(flows, pa.string()), pa.nulls(flows, pa.string()),
            ], schema=INDEX)
        ended = None if error is None else f"capture file unreadable after {count} packets: {error}"
        ended = ended or reader.truncated
        for finding in reader.problems:
            rows.add(kind="note", file_no=file_no, note_id=finding.id, note=orjson.dumps(finding.params, default=str).decode())
    rows.add(kind="file", file_no=file_no, packets=count, time=first_time, bytes=size,
             note_id=None if ended is None else "capture.truncated", note=ended)
    yield rows.batch()


def _work(batches):
    """A partition's work (``job.py``): its slot, and the files it reads in capture order as (path, offset,
    connections: their keys, given as comma-separated text); then any other rows' batches (the numbers, for
    ``decode``)."""
    slot, files, rest = None, [], []
    for batch in batches:
        rows = batch.filter(pc.equal(batch.column("kind"), "file")) if "kind" in batch.schema.names else batch
        for row in rows.select(["slot", "path", "offset", "flows"]).to_pylist():
            slot = row["slot"]
            files.append((row["path"], row["offset"], {int(flow) for flow in row["flows"].split(",")}))
        if rows.num_rows < batch.num_rows:
            rest.append(batch.filter(pc.not_equal(batch.column("kind"), "file")))
    return slot, files, rest


def _open(path: str):
    """A file the index read (what went wrong reading it is in its rows already), or None."""
    try:
        return open_capture(path)
    except (CaptureError, OSError):
        return None


def count_numbers(batches, options: Options):
    """Rows (``NUMBERS``) of a partition's work (columns ``slot``, ``path``, ``offset``, ``flows``, sorted by
    the files' order): what each packet made, what the end left per connection (keyed by that connection's
    first packet)."""
    from dissector.pipeline import Dissector

    slot, files, _ = _work(batches)
    if slot is None:
        return
    dissector = Dissector(options)._core
    first_packet = {}  # the partition's connection ids → the packet that opened each
    for path, offset, flows in files:
        reader = _open(path)
        if reader is None:
            continue
        with reader:
            try:
                before = dissector.numbering[1]
                packets, frames, opened = dissector.count_selected(reader._core, flows, offset)
            except (CaptureError, OSError):
                continue
        packets, frames, opened = _int64s(packets), _int64s(frames), _int64s(opened)
        conn = before
        opening = pc.greater(opened, 0)  # the few packets that open connections, not every one counted
        for p, n in zip(packets.filter(opening).to_pylist(), opened.filter(opening).to_pylist()):
            for _ in range(n):
                first_packet[conn] = p
                conn += 1
        rows = len(packets)
        if rows:
            yield pa.RecordBatch.from_arrays([pa.array(["packet"] * rows, pa.string()), pa.array([slot] * rows, pa.int64()),
                                              packets, frames, opened], schema=NUMBERS)
    ends = _Rows(NUMBERS)
    for conn, frames in dissector.count_finish():
        ends.add(kind="finish", slot=slot, p=first_packet.get(conn, -1), frames=frames, opened=0)
    if ends.rows:
        yield ends.batch()


#: A decoding task reads until its stage made this many Python objects (events) or read this many bytes.
READ_ITEMS = 64
READ_BYTES = 1 << 20


def decode(batches, options: Options, out: str):
    """A partition's work and numbers (``job.py``: ``file`` rows as ``count_numbers`` reads, then ``number``
    rows sorted by ``p``: ``frames_before``, ``conn_id`` where a connection opens, ``finish_base``: the frames
    numbered before what the end of the input leaves on that connection) through the CLI's pipeline and
    analysis: each frame's record (as ``--json`` writes it) into this task's files of the frames and messages
    tables under ``out`` (``rows.py``); rows (``EVENTS``) for the events' records."""
    from pyspark import TaskContext

    from dissector.analysis.conversation import analysed_dissector
    from dissector.output.records import event_record
    from dissector.spark.rows import CHUNK_BYTES, FrameTables

    slot, files, rest = _work(batches)
    if slot is None:
        return
    numbers = pa.Table.from_batches(rest).combine_chunks() if rest else None
    context = TaskContext.get()
    tables = FrameTables(out, context.partitionId() if context is not None else 0)
    stage = analysed_dissector(options, records="columns")
    if numbers is not None and numbers.num_rows:
        stage.plan_numbering(*(_int64_bytes(numbers.column(name)) for name in ("p", "frames_before", "conn_id")))
    rows = _Rows(EVENTS)

    def take(items):
        for item in items:
            rows.add(p=item.packet, json=orjson.dumps(event_record(item), default=str).decode())
        if stage.columns_size >= CHUNK_BYTES:
            tables.write(stage.take_columns())

    for path, offset, flows in files:
        reader = _open(path)
        if reader is None:
            continue
        with reader:
            try:
                while (items := stage.read_selected(reader._core, flows, offset, READ_ITEMS, READ_BYTES)) is not None:
                    take(items)
                    if rows.full():
                        yield rows.batch()
            except (CaptureError, OSError):
                pass
    if numbers is not None:
        ends = numbers.filter(pc.is_valid(numbers.column("finish_base")))
        for conn, base in zip(ends.column("conn_id").to_pylist(), ends.column("finish_base").to_pylist()):
            stage.set_finish_base(conn, base)
    stage.hold_finish()
    take(stage.release())
    take(stage.finish())
    tables.write(stage.take_columns())
    tables.close()
    if rows.rows:
        yield rows.batch()
