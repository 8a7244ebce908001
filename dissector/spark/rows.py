"""The ``frames``, ``messages``, ``exchanges`` and ``events`` tables, and the frames' findings and the events'
problems in ``problems``, as the decoding tasks write them: the engine makes each frame's record and each event
straight into typed Arrow columns (``crates/engine/src/tables.rs``: no JSON written and parsed back, no Python
object per value) and hands them over as Arrow record batches through the C stream interface
(``crates/python/src/arrow.rs``); each task writes its own Parquet file of each table, so a gigabyte of records
never passes through Spark's rows. Spark SQL reads these files back for the
rest of ``problems``, ``files`` and the summary (``tables.py``).

A column is a key of the contract (docs/records.schema.json); an object or a list (``command``, ``metadata``,
``expert``, a message's ``properties``...) is kept as its JSON text, but a message's ``message_id``, a struct
of integers (``ledger_id``, ``entry_id``, ``partition``, ``batch_index``; ``id`` for an id that is one
integer); a payload's SHA-256 is 32 bytes. ``json``,
the whole record as the CLI writes it, is a column only when asked (``pipeline --with-json``, or ``--report``)."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
from dissector import _core as _core


def schemas(with_json: bool = False) -> dict[str, pa.Schema]:
    """The tables the decoding tasks write, by name (frames, messages, problems, exchanges, events), as the
    engine declares them."""
    return {tables.name: pa.RecordBatchReader.from_stream(tables).schema
            for tables in _core.record_tables([], with_json)}


#: ``EVENTS``: the events of the decoding (a connection opened or closed, a request left unanswered...), a row
#: each, with its record's line as ``--json`` writes it (``json``); ``order``: its place among the task's events
#: (the events of one packet keep the order the CLI gives them).
FRAMES, MESSAGES, PROBLEMS, EXCHANGES, EVENTS = schemas().values()

#: Bytes of columns a task holds before it writes them as a row group. Measured on the 494 MB benchmark capture,
#: a decoding task's work outside Spark: 13.7 s with 4 MiB (zstd makes a context per page: 3 % of the time
#: went to making them), 11.0 s with 16 MiB, 11.3 s with 32 MiB.
CHUNK_BYTES = 16 << 20


def _write_options(schema: pa.Schema, repeated: set[str]) -> dict:
    """How a table's files are written: zstd for texts and floats (its default level: level 3 was 4 % smaller for
    the same time, within the noise); dictionaries only for the columns whose values repeat (trying one on a record's JSON or a digest is
    time lost); integers delta-encoded (frame numbers, sequence ids, sizes rise or repeat: on a task's tables of
    perf_big, the messages written in 1.35 s instead of 1.95 s and 195 MB instead of 209 MB, the frames 3.6 MB
    instead of 5.2 MB; Spark reads DELTA_BINARY_PACKED since 3.3); min/max statistics on numbers only (nobody
    filters a JSON text or a digest by its range)."""
    leaves = list(_leaves(schema))  # a struct's fields (a message's id) by their paths
    # zstd only where it finds something to take out: texts and floats. A digest is random bytes; a
    # delta-encoded integer or a dictionary's keys are packed already, and zstd made a context per page for
    # them (one task's tables of perf_big, in one process, best of 3: written in 0.51 s instead of 0.57 s, 98.6 MB
    # instead of 96.2 MB)
    codecs = {path: "zstd" if pa.types.is_floating(kind) or pa.types.is_large_string(kind) or pa.types.is_string(kind)
              else "none" for path, kind in leaves}
    for name in repeated & set(schema.names):
        codecs[name] = "none"
    return {"compression": codecs, "use_dictionary": [name for name in schema.names if name in repeated],
            "column_encoding": {path: "DELTA_BINARY_PACKED" for path, kind in leaves
                                if pa.types.is_integer(kind) and path not in repeated},
            "write_statistics": [path for path, kind in leaves
                                 if pa.types.is_integer(kind) or pa.types.is_floating(kind)]}


def _leaves(schema: pa.Schema):
    """Each column's (path, type), a struct's fields as ``column.field``."""
    for field in schema:
        if pa.types.is_struct(field.type):
            for child in field.type:
                yield f"{field.name}.{child.name}", child.type
        else:
            yield field.name, field.type


#: The columns whose values repeat, per table: written with a dictionary.
REPEATED = {
    "frames": {"protocol", "src", "dst", "direction", "type", "request_type", "topic", "client_id", "group",
               "producer_name", "subscription", "checksum"},
    "messages": {"protocol", "direction", "type", "topic", "producer_name", "subscription", "partition_key"},
    "problems": {"id", "severity", "protocol", "frame_type"},
    "exchanges": {"protocol", "request_type", "response_type", "topic"},
    "events": {"type", "severity"},
}

#: The tables the decoding tasks write, each under its own directory.
TASK_TABLES = tuple(REPEATED)


class _Writer:
    def __init__(self, path: str, schema: pa.Schema, options: dict):
        self.path, self.schema, self.options, self.writer = path, schema, options, None

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        if self.writer is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.writer = pq.ParquetWriter(self.path + ".tmp", self.schema, **self.options)
        self.writer.write_table(table)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            os.replace(self.path + ".tmp", self.path)  # a retried task's file replaces the first one whole


class FrameTables:
    """The frames, messages, problems (the frames' findings, the events worse than a note), exchanges and events
    of one task, each written under ``out``/NAME as part-``partition``.parquet."""

    def __init__(self, out: str, partition: int, with_json: bool = False):
        name = f"part-{partition:05d}.parquet"
        self.writers = {table: _Writer(os.path.join(out, table, name), schema, _write_options(schema, REPEATED[table]))
                        for table, schema in schemas(with_json).items()}
        self.rows = dict.fromkeys(self.writers, 0)

    def write(self, tables) -> None:
        """The tables as the engine gives them (``AnalysedDissector.take_columns``: Arrow streams): a row group of
        each."""
        for batches in tables:
            table = pa.table(batches)
            self.rows[batches.name] += table.num_rows
            self.writers[batches.name].write(table)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


def write_empty(out: str, with_json: bool = False) -> None:
    """The tables the tasks write, emptied, each with an empty file, so that a run without frames still has
    tables to read."""
    import shutil

    for name, schema in schemas(with_json).items():
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
        os.makedirs(os.path.join(out, name))
        pq.write_table(schema.empty_table(), os.path.join(out, name, "part-empty.parquet"))
