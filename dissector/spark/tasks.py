"""What Spark's executors run: plain functions of a partition's items (``RDD.mapPartitions``), the same reader,
pipeline and analysis as the CLI (the compiled core), nothing of Spark imported here. Packets never pass through
Spark: each task reads the capture files it needs itself. Each function is one stage of
``dissector/spark/job.py``:

- ``index_files``: a task per core, each streaming its share of the capture files (pcap, pcapng, gzip) once
  each: a row per TCP connection on a protocol's port (its key, ``flow_key`` in the core, its packets and
  bytes), a row per file (packets, first time, how reading ended) and a row per reader note, as an Arrow
  stream file per capture file under DIR/_index that the driver reads (``plan.py`` plans the job from it; the
  progress line counts them). A file that cannot be read is a row too, never a failed task.
- ``count_numbers``: per partition (some connections, and the files they are in, in capture order), the
  first pass: the packets that complete frames or open connections, and at the end the frames the end of the
  input leaves per connection (``Dissector.count_selected``: no decoding into Python), into files of numbers.
- ``number`` (on the driver): every partition's counts merged in packet order, frames and connections
  numbered as a run over the whole input would, into a file of numbers per partition.
- ``decode``: the second pass over the same files, the full pipeline and analysis with those numbers set
  before their packets (``AnalysedDissector.read_selected``), so a record is the CLI's line for that frame:
  the engine makes the records straight into the tables' typed Arrow columns, which the task writes itself
  (``rows.py``), noting the frames written so far under DIR/_progress; it gives Spark only its part of the
  summary.

A partition's work (``plan.Work``) comes as its one item: (slot, [(path, offset, connections' keys)...]).
"""
from __future__ import annotations

import os

import numpy as np
import orjson
import pyarrow as pa

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

#: A counting or numbering task's row: its partition's key and the rows of numbers it wrote.
COUNTED = pa.schema([("slot", pa.int64()), ("packets", pa.int64()), ("finishes", pa.int64())])

#: The directory under the job's ``--out`` where the counting and numbering tasks leave their numbers (a path
#: every executor reaches, as the tables are; removed at the end of the job). Its files are rows of
#: little-endian int64, named by kind and partition (``_numbers_file``):
#:   counts:   p (the packet's number in the whole input), frames it completes, connections it opens, its
#:             connection's key; p rising
#:   ends:     p (the first packet of a connection), frames the end of the input leaves on it
#:   numbers:  p, frames numbered before its frames, the connection id it opens (-1: none); p rising
#:   bases:    connection id, frames numbered before what the end leaves on it
NUMBERING = "_numbering"
_WIDTH = {"counts": 4, "ends": 2, "numbers": 3, "bases": 2}

#: The slot of a count of every connection at once (``prepass.py``: the whole input on the driver's machine,
#: in local mode), which ``number_whole`` shares out to the partitions.
WHOLE = -1

#: Rows of each partition the numbering task merges at a time (its memory: partitions × this × 24 bytes).
MERGE_ROWS = 1 << 16

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


#: The directory under the job's ``--out`` where the indexing tasks leave each capture file's rows
#: (``indexed_file``: an Arrow stream file per input file, named by its number; removed at the end of the job).
INDEXED = "_index"


def indexed_file(into: str, file_no: int) -> str:
    """Where the rows of the input file ``file_no`` are (a file appears whole, once its rows are all written)."""
    return os.path.join(into, f"file-{file_no}.arrow")


def index_files(items, options: Options, into: str):
    """The rows (``INDEX``) of the capture files of this task's one item (a list of (file_no, path) pairs), each
    into its own file under ``into`` (``indexed_file``); the files' numbers are its items."""
    ports = _ports(options)
    for files in items:
        for file_no, path in files:
            target = indexed_file(into, file_no)
            with pa.OSFile(target + ".tmp", "wb") as sink, pa.ipc.new_stream(sink, INDEX) as stream:
                for batch in _index_file(file_no, path, ports):
                    stream.write_batch(batch)
            os.replace(target + ".tmp", target)  # a retried task's file replaces the first one whole
            yield file_no


def read_index(into: str, files: int) -> pa.Table:
    """The rows the indexing tasks wrote under ``into`` for input files 0 to ``files`` - 1."""
    tables = []
    for file_no in range(files):
        with pa.OSFile(indexed_file(into, file_no)) as source:
            tables.append(pa.ipc.open_stream(source).read_all())
    return pa.concat_tables(tables) if tables else INDEX.empty_table()


def deal_files(files: list[str], tasks: int) -> list[list[tuple[int, str]]]:
    """The input files (``files``, numbered by their place) dealt to ``tasks`` indexing tasks, the largest first,
    round robin: a task per core, not a task per file (each task's start costs about a tenth of a second in
    Spark, more than indexing a 256 MB file takes)."""
    def size(path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0  # unreadable: its row says so, and it takes no time

    order = sorted(range(len(files)), key=lambda no: (-size(files[no]), no))
    dealt: list[list[tuple[int, str]]] = [[] for _ in range(max(1, min(tasks, len(files))))]
    for turn, no in enumerate(order):
        dealt[turn % len(dealt)].append((no, files[no]))
    return [sorted(share) for share in dealt]


def _index_file(file_no: int, path: str, ports, index=None):
    """A capture file's rows (``INDEX``); ``index``: reads the open file's index (``flow_index``'s result) in
    another way (``index_and_count``)."""
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
        (keys, packets, sizes), count, first_time, error = (
            reader._core.flow_index(ports) if index is None else index(reader._core))
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


def _work(items):
    """A partition's work (its one item, ``plan.Work``): its slot, and the files it reads in capture order as
    (path, offset, its connections' keys there); (None, []) when it has none. The items are read to their end:
    a Python worker that leaves some unread is not used again (the next task would start one, importing all)."""
    slot, work = None, []
    for item_slot, files in items:
        if files:
            slot, work = item_slot, [(path, offset, set(flows)) for path, offset, flows in files]
    return slot, work


class _Reads:
    """What a task read of each of its files: (path, packets read, what stopped the reading before its end or
    None) a file; the driver holds them to the index's (``tables.unread``): the index was read on another
    machine, or earlier."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, str | None]] = []

    def open(self, path: str):
        """The file's reader, or None when this machine cannot open it (a mount missing here): noted."""
        try:
            return open_capture(path)
        except (CaptureError, OSError) as exc:
            self.rows.append((path, 0, str(exc)))
            return None

    def read(self, path: str, packets: int, stopped: str | None) -> None:
        self.rows.append((path, packets, stopped))


def _numbers_file(into: str, kind: str, slot: int) -> str:
    return os.path.join(into, f"{kind}-{slot}.i64")


def _numbers(into: str, kind: str, slot: int) -> np.ndarray:
    """A file of numbers (``NUMBERING``) as rows, mapped from disk; none when the task that writes it did not."""
    path = _numbers_file(into, kind, slot)
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if size < 8 * _WIDTH[kind]:
        return np.empty((0, _WIDTH[kind]), np.int64)
    return np.memmap(path, np.dtype("<i8"), "r").reshape(-1, _WIDTH[kind])


class _NumbersOut:
    """A file of numbers written in parts; it appears whole when closed (a retried task's replaces the first)."""

    def __init__(self, into: str, kind: str, slot: int):
        self.path = _numbers_file(into, kind, slot)
        self.file = open(self.path + ".tmp", "wb")
        self.rows = 0

    def write(self, *columns: np.ndarray) -> None:
        rows = np.column_stack([np.asarray(c, np.int64) for c in columns]).astype("<i8", copy=False)
        self.file.write(rows.tobytes())
        self.rows += len(rows)

    def close(self) -> None:
        self.file.close()
        os.replace(self.path + ".tmp", self.path)


class _Count:
    """A partition's count (``count_numbers``) as its files come: each file's counted rows into ``into``'s counts
    file of ``slot``; at the end, what the end of the input leaves per connection (``ends``)."""

    def __init__(self, dissector, into: str, slot: int):
        self.dissector, self.into, self.slot = dissector, into, slot
        self.first_packet = {}  # the partition's connection ids → the packet that opened each
        self.counts = _NumbersOut(into, "counts", slot)

    def add(self, before: int, rows) -> None:
        """A file's rows (``count_selected``'s buffers); ``before``: the id of the first connection it may open."""
        packets, frames, opened, keys = (np.frombuffer(b, "<i8") for b in rows)
        conn = before
        opening = opened > 0  # the few packets that open connections, not every one counted
        for p, n in zip(packets[opening].tolist(), opened[opening].tolist()):
            for _ in range(n):
                self.first_packet[conn] = p
                conn += 1
        self.counts.write(packets, frames, opened, keys)

    def close(self) -> tuple[int, int, int]:
        """(slot, its counted rows, its ends' rows): the ``COUNTED`` row."""
        self.counts.close()
        ends = _NumbersOut(self.into, "ends", self.slot)
        finish = self.dissector.count_finish()
        if finish:
            ends.write([self.first_packet.get(conn, -1) for conn, _ in finish], [frames for _, frames in finish])
        ends.close()
        return self.slot, self.counts.rows, ends.rows


def count_numbers(items, options: Options, into: str):
    """A partition's work (``_work``) counted: what each packet made (``counts``) and what the end left per
    connection, keyed by that connection's first packet (``ends``), written under ``into``; its one item: its
    slot, the rows of each, and what it read of each file (``_Reads``)."""
    from dissector.pipeline import Dissector

    slot, files = _work(items)
    if slot is None:
        return
    dissector = Dissector(options)._core
    count = _Count(dissector, into, slot)
    reads = _Reads()
    for path, offset, flows in files:
        if (reader := reads.open(path)) is None:
            continue
        with reader:
            try:
                before = dissector.numbering[1]
                rows = dissector.count_selected(reader._core, flows, offset)
            except (CaptureError, OSError) as exc:  # an error the reader raised: the file's counts are lost
                reads.read(path, 0, str(exc))
                continue
        count.add(before, rows)
        reads.read(path, reader.packets, None)
    yield *count.close(), reads.rows


def index_and_count(files: list[str], order: list[int], options: Options, indexed: str, numbering: str) -> list:
    """``files`` indexed as ``index_files`` indexes them, into ``indexed``, and in the same reading every
    connection counted at once as ``count_numbers`` counts a partition's (slot ``WHOLE``, into ``numbering``):
    the files read in ``order`` (their numbers: the capture's order, as the plan will find it), each file's
    packets numbered from the packets of the files before it. Returns the (path, offset) of each file read, in
    that order, for the caller to check against the plan's."""
    from dissector.pipeline import Dissector

    ports = _ports(options)
    dissector = Dissector(options)._core
    count = _Count(dissector, numbering, WHOLE)
    read = []
    offset = packets = 0

    def counted(core):
        nonlocal packets
        before = dissector.numbering[1]
        index, rows = dissector.count_indexed(core, ports, offset)
        count.add(before, rows)
        packets = index[1]
        return index

    for file_no in order:
        path, packets = files[file_no], 0  # a file that cannot be opened has none
        target = indexed_file(indexed, file_no)
        with pa.OSFile(target + ".tmp", "wb") as sink, pa.ipc.new_stream(sink, INDEX) as stream:
            for batch in _index_file(file_no, path, ports, index=counted):
                stream.write_batch(batch)
        os.replace(target + ".tmp", target)
        read.append((path, offset))
        offset += packets
    count.close()
    return read


def number(batches, into: str):
    """Every partition's counts (the ``COUNTED`` rows of ``count_numbers``; one task takes them all) merged in
    packet order, numbered as a run over the whole input numbers: per partition, each counted packet's frames
    before it and the id of each connection it opens (``numbers``), and the frames before what the end leaves
    on each connection (``bases``: after every packet's frames, in connection order). Streams the counts
    (``MERGE_ROWS`` of each partition at a time); holds a row per connection."""
    slots = sorted({slot for batch in batches for slot in batch.column("slot").to_pylist()})
    counts = {slot: _numbers(into, "counts", slot) for slot in slots}
    at = dict.fromkeys(slots, 0)
    outs = {slot: _NumbersOut(into, "numbers", slot) for slot in slots}
    frames_so_far = conns_so_far = 0
    openings = []  # (packet, the last connection id it opens), in packet order
    while live := [slot for slot in slots if at[slot] < len(counts[slot])]:
        # every partition's rows up to the least of their MERGE_ROWS-th packets: each has them among its next
        # MERGE_ROWS, and every later row of any partition comes after them
        bound = min(counts[s][min(at[s] + MERGE_ROWS, len(counts[s])) - 1, 0] for s in live)
        parts, owners = [], []
        for slot in live:
            window = counts[slot][at[slot]:at[slot] + MERGE_ROWS]
            end = int(np.searchsorted(np.ascontiguousarray(window[:, 0]), bound, "right"))
            parts.append(window[:end])
            owners.append(np.full(end, slot, np.int64))
            at[slot] += end
        block, owner = np.concatenate(parts), np.concatenate(owners)
        order = np.argsort(block[:, 0], kind="stable")
        block, owner = block[order], owner[order]
        packets, frames, opened = block[:, 0], block[:, 1], block[:, 2]  # (the keys: ``number_whole``'s)
        frames_before = frames_so_far + np.cumsum(frames) - frames
        conns = conns_so_far + np.cumsum(opened)
        conn_ids = np.where(opened > 0, conns, -1)
        frames_so_far, conns_so_far = int(frames_before[-1] + frames[-1]), int(conns[-1])
        openings.append(np.column_stack((packets[opened > 0], conn_ids[opened > 0])))
        for slot in np.unique(owner).tolist():
            mine = owner == slot
            outs[slot].write(packets[mine], frames_before[mine], conn_ids[mine])
    for out in outs.values():
        out.close()
    # what the end leaves: numbered after every packet's frames, in the order of the connections' ids
    ends = [(slot, _numbers(into, "ends", slot)) for slot in slots]
    owner = np.concatenate([np.full(len(rows), slot, np.int64) for slot, rows in ends] or [np.empty(0, np.int64)])
    ends = np.concatenate([rows for _, rows in ends] or [np.empty((0, 2), np.int64)])
    opening = np.concatenate(openings) if openings else np.empty((0, 2), np.int64)
    found = np.searchsorted(opening[:, 0], ends[:, 0])
    known = found < len(opening)
    known[known] = opening[found[known], 0] == ends[known, 0]  # an end whose first packet opened no connection
    conn_ids, frames, owner = opening[found[known], 1], ends[known, 1], owner[known]
    order = np.argsort(conn_ids, kind="stable")
    conn_ids, frames, owner = conn_ids[order], frames[order], owner[order]
    bases = frames_so_far + np.cumsum(frames) - frames
    for slot in slots:
        out = _NumbersOut(into, "bases", slot)
        mine = owner == slot
        out.write(conn_ids[mine], bases[mine])
        out.close()
        yield pa.RecordBatch.from_pydict({"slot": [slot], "packets": [outs[slot].rows], "finishes": [out.rows]},
                                         schema=COUNTED)


def number_whole(into: str, work) -> None:
    """The count of every connection at once (slot ``WHOLE``, ``prepass.py``) numbered as ``number`` numbers a
    run over the whole input, then shared out to the partitions of ``work`` (``plan.Work`` per slot) by each
    row's connection: the files of numbers ``number`` makes from the partitions' own counts (a partition's
    connections are counted alike alone or among the others: each is reassembled on its own). Streams the rows
    (``MERGE_ROWS`` at a time); holds a row per connection."""
    for _ in number([pa.RecordBatch.from_pydict({"slot": [WHOLE]})], into):
        pass
    slot_of_key = {key: slot for slot, files in work for _, _, keys in files for key in keys}
    keys = np.array(sorted(slot_of_key), np.int64)
    slots = np.array([slot_of_key[key] for key in keys.tolist()], np.int64)
    counts, numbers = _numbers(into, "counts", WHOLE), _numbers(into, "numbers", WHOLE)
    outs = {slot: _NumbersOut(into, "numbers", slot) for slot, files in work if files}
    slot_of_conn = {}  # a connection's id (the last its first packet opens) → its partition
    for start in range(0, len(numbers), MERGE_ROWS):
        rows, counted = numbers[start:start + MERGE_ROWS], counts[start:start + MERGE_ROWS]
        if len(rows) != len(counted) or (rows[:, 0] != counted[:, 0]).any():  # one slot: ``number`` keeps its order
            raise ValueError("the numbers are not the count's rows")
        row_keys = counted[:, 3]
        found = np.minimum(np.searchsorted(keys, row_keys), max(len(keys) - 1, 0))
        if not len(keys) or (keys[found] != row_keys).any():
            raise ValueError("a counted packet of a connection no partition reads")
        owner = slots[found]
        opens = rows[:, 2] >= 0
        slot_of_conn.update(zip(rows[opens, 2].tolist(), owner[opens].tolist()))
        for slot in np.unique(owner).tolist():
            mine = owner == slot
            outs[slot].write(rows[mine, 0], rows[mine, 1], rows[mine, 2])
    for out in outs.values():
        out.close()
    bases = _numbers(into, "bases", WHOLE)
    owner = np.array([slot_of_conn[conn] for conn in bases[:, 0].tolist()], np.int64)
    for slot, files in work:
        if files:
            out = _NumbersOut(into, "bases", slot)
            mine = owner == slot
            out.write(bases[mine, 0], bases[mine, 1])
            out.close()


#: The directory under the job's ``--out`` where each decoding task keeps the count of the frames it has
#: written (a file per task, one decimal number, replaced whole after each row group): the progress line reads
#: them (``console.frames_written``); removed at the end of the job.
PROGRESS = "_progress"


def _note_frames(path: str, frames: int) -> None:
    with open(path + ".tmp", "w") as note:
        note.write(str(frames))
    os.replace(path + ".tmp", path)


#: A decoding task reads until its stage made this many Python objects or read this many bytes (its stage makes
#: none: frames and events go into the engine's tables, so a call reads READ_BYTES of packets).
READ_ITEMS = 64
READ_BYTES = 1 << 20


def decode(items, options: Options, out: str, numbering: str, with_json: bool = False):
    """A partition's work (``_work``) and its numbers (``number`` wrote them
    under ``numbering``) through the CLI's pipeline and analysis: each frame's record into this task's files of
    the frames, messages, problems and exchanges tables under ``out`` (``rows.py``; ``with_json``: the frames
    keep each record's line as ``--json`` writes it), and its events into the events table (the engine makes
    their rows too): its one item is its part of the summary (JSON text) and, per file, (path, packets read,
    what stopped the reading or None)."""
    from pyspark import TaskContext

    from dissector.analysis.conversation import analysed_dissector
    from dissector.spark.rows import CHUNK_BYTES, FrameTables

    slot, files = _work(items)
    if slot is None:
        return
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    tables = FrameTables(out, partition, with_json)
    progress = os.path.join(out, PROGRESS, f"decode-{partition}")
    stage = analysed_dissector(options, records="columns+json" if with_json else "columns")
    numbers = _numbers(numbering, "numbers", slot)
    if len(numbers):
        stage.plan_numbering(*(np.ascontiguousarray(numbers[:, at], "<i8").tobytes() for at in range(3)))
    del numbers

    def take(items):
        if items:  # the engine keeps every frame and event in its tables: a Python item here would be a row lost
            raise RuntimeError(f"the decoding gave {len(items)} items outside its tables")
        if stage.columns_size >= CHUNK_BYTES:
            tables.write(stage.take_columns())
            _note_frames(progress, tables.rows["frames"])

    reads = _Reads()
    for path, offset, flows in files:
        if (reader := reads.open(path)) is None:
            continue
        stopped = None
        with reader:
            try:
                while (items := stage.read_selected(reader._core, flows, offset, READ_ITEMS, READ_BYTES)) is not None:
                    take(items)
            except (CaptureError, OSError) as exc:  # where the index stopped too, or sooner (``tables.unread``)
                stopped = str(exc)
        reads.read(path, reader.packets, stopped)
    for conn, base in _numbers(numbering, "bases", slot).tolist():
        stage.set_finish_base(conn, base)
    stage.hold_finish()
    take(stage.release())
    take(stage.finish())
    tables.write(stage.take_columns())
    tables.close()
    _note_frames(progress, tables.rows["frames"])
    # this task's part of the summary (the engine's statistics of its frames and its events' problems), and how
    # much of each file it read
    yield stage.take_summary(), reads.rows
