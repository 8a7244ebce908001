"""`pipeline --report`: the pipeline's records in capture order, for the HTML report (output/report.py).

The frames come from the frames table (its ``json`` column, which ``--report`` asks for, is each frame's
record as ``--json`` writes it), in frame number order; the events from the events table (their record and
packet). They are merged
as the CLI makes them: by packet, a connection's opening before the frames of its packet, the other events
after them. Both are read through Spark's local iterator, a partition at a time, so the driver holds neither
table whole.
"""

from __future__ import annotations

import heapq
import os
from typing import Iterator

import orjson


def records_in_capture_order(context, out: str) -> Iterator[dict]:
    """Every record of the pipeline's output under ``out`` (its frames and events tables), in the order
    ``pulsar-dissect --json`` writes them, read through a SparkSession on ``context`` (the job's SparkContext)."""
    from pyspark.sql import SparkSession

    spark = SparkSession(context)
    frames = spark.read.parquet(os.path.join(out, "frames")).select("index", "packet", "json").orderBy("index")
    events = spark.read.parquet(os.path.join(out, "events")).select("packet", "order", "type", "json") \
        .orderBy("packet", "order")

    def frame_items():
        for row in frames.toLocalIterator():
            yield (row["packet"], 1, row["index"]), row["json"]

    def event_items():
        for n, row in enumerate(events.toLocalIterator()):
            rank = 0 if row["type"] == "CONNECTION_OPENED" else 2
            yield (row["packet"], rank, n), row["json"]

    for _, text in heapq.merge(frame_items(), event_items(), key=lambda item: item[0]):
        yield orjson.loads(text)
