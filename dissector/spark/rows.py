"""The ``frames``, ``messages`` and ``exchanges`` tables, and the frames' findings in ``problems``, as the decoding
tasks write them: the core makes each frame's record (the CLI's ``--json`` line, docs/records.schema.json)
straight into Arrow columns (``crates/python/src/columns.rs``: no Python object per value, nothing parsed back), an
exchange for each frame that answers a request (the analysis paired them: the request's time and packet come
with the answer), and each task writes its own Parquet file of each table, so a gigabyte of records never
passes through Spark's rows. Spark SQL reads these files back for the rest of ``problems``, ``files`` and the
summary (``tables.py``).

A column is a key of the contract; an object or a list (``command``, ``metadata``, ``expert``, a message's
``properties``...) is kept as its JSON text, and ``json`` is the whole record as the CLI writes it."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
from dissector import _core as _core

_TYPES = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "text": pa.large_string()}
FRAMES, MESSAGES, PROBLEMS, EXCHANGES = (pa.schema([(name, _TYPES[kind]) for name, kind in columns])
                                         for columns in _core.table_columns())

#: Bytes of columns a task holds before it writes them as a row group: few, as fresh large buffers cost page
#: faults and cache misses (a task over the 244 MB benchmark capture: 12.5 s with 32 MiB, 9.2 s with 4 MiB).
CHUNK_BYTES = 4 << 20


def _write_options(schema: pa.Schema, repeated: set[str]) -> dict:
    """How a table's files are written: LZ4 (the cheapest to write of Parquet's codecs, measured); dictionaries
    only for the columns whose values repeat (trying one on a record's JSON or a digest is time lost); no
    min/max statistics on text columns (nobody filters a JSON text by its range)."""
    return {"compression": "lz4", "use_dictionary": [name for name in schema.names if name in repeated],
            "write_statistics": [field.name for field in schema if field.type != pa.large_string()]}


FRAMES_WRITTEN = _write_options(FRAMES, {"protocol", "src", "dst", "direction", "type", "request_type", "topic",
                                         "client_id", "group", "producer_name", "subscription", "checksum"})
MESSAGES_WRITTEN = _write_options(MESSAGES, {"protocol", "direction", "type", "topic", "producer_name", "subscription",
                                             "partition_key"})
PROBLEMS_WRITTEN = _write_options(PROBLEMS, {"id", "severity", "protocol", "frame_type"})
EXCHANGES_WRITTEN = _write_options(EXCHANGES, {"protocol", "request_type", "response_type", "topic"})

#: The tables the decoding tasks write, each under its own directory, in the order the core gives their
#: columns: (name, schema, how written).
TASK_TABLES = (("frames", FRAMES, FRAMES_WRITTEN), ("messages", MESSAGES, MESSAGES_WRITTEN),
               ("problems", PROBLEMS, PROBLEMS_WRITTEN), ("exchanges", EXCHANGES, EXCHANGES_WRITTEN))


def _table(schema: pa.Schema, rows: int, buffers) -> pa.Table:
    arrays = []
    for field, (valid, values, offsets) in zip(schema, buffers):
        parts = [pa.py_buffer(valid)] + ([pa.py_buffer(offsets)] if offsets else []) + [pa.py_buffer(values)]
        arrays.append(pa.Array.from_buffers(field.type, rows, parts))
    return pa.Table.from_arrays(arrays, schema=schema)


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
    """The frames, messages, problems (the frames' findings) and exchanges of one task, each written under
    ``out``/NAME as part-``partition``.parquet."""

    def __init__(self, out: str, partition: int):
        name = f"part-{partition:05d}.parquet"
        self.writers = [(_Writer(os.path.join(out, table, name), schema, options), schema)
                        for table, schema, options in TASK_TABLES]

    def write(self, columns) -> None:
        """Columns as the core gives them (``AnalysedDissector.take_columns``): a row group of each table."""
        for (writer, schema), (rows, buffers) in zip(self.writers, columns):
            writer.write(_table(schema, rows, buffers))

    def close(self) -> None:
        for writer, _ in self.writers:
            writer.close()


def write_empty(out: str) -> None:
    """The tables the tasks write, emptied, each with an empty file, so that a run without frames still has
    tables to read."""
    import shutil

    for name, schema, _ in TASK_TABLES:
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
        os.makedirs(os.path.join(out, name))
        pq.write_table(schema.empty_table(), os.path.join(out, name, "part-empty.parquet"))
