"""``pulsar-dissect pipeline``: many (and huge) captures dissected on Apache Spark into Parquet tables.

The stages (docs/SPARK.md says why this shape):

1. read: one task per capture file streams its packets (``tasks.read_files``) into rows keyed by their TCP
   connection (both endpoints); files are put in time order and a packet's number in the whole input is its
   file's offset plus its number in the file.
2. repartition by connection, sort each partition by packet number: a connection that spans several rotated
   files is whole and in order in one partition. The partitions are kept (on disk) for both passes.
3. count (``tasks.count_numbers``): per partition, the frames each packet completes and the connections it
   opens, then in Spark SQL the numbers a run over the whole input would give them (a running sum).
4. decode (``tasks.decode``): the numbers joined to the kept partitions, then per partition the CLI's
   pipeline and analysis with those numbers, giving each frame's ``--json`` record.
5. tables (``tables.py``): exchanges, problems and files in Spark SQL from the frames and messages the
   decoding tasks wrote and the events they gave; the summary computed from the tables is the only thing
   collected.
"""
from __future__ import annotations

import functools
import os
import shutil
import sys

from dissector.options import Options
from dissector.spark import tasks
from dissector.capture.inputs import expand


#: The most packet numbers joined to the packets by broadcast (32 bytes each) rather than by a shuffle.
BROADCAST_NUMBERS = 4_000_000

#: The driver's heap in local mode (``--conf spark.driver.memory=...`` overrides it).
LOCAL_DRIVER_MEMORY = "3g"

#: Arrow batches handed to a task: small, as a packet row may hold 64 KiB.
ARROW_BATCH_ROWS = 2048


def session(master: str = "local[*]", conf: dict[str, str] | None = None, app: str = "pulsar-dissect pipeline"):
    """A SparkSession on ``master`` with ``conf``; the executors run this Python (the package and its
    compiled core must be installed where they run: docs/SPARK.md)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no lookup of this host's name
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    conf.setdefault("spark.driver.extraJavaOptions",
                    "-Dlog4j2.configurationFile=file:" + os.path.join(os.path.dirname(__file__), "log4j2.properties"))
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.ui.showConsoleProgress", "false"))
    if master.startswith("local"):
        # local mode's executors live in the driver's JVM: its default 1 GiB heap is too little to write
        # the tables of a large capture
        builder = (builder.config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.memory", LOCAL_DRIVER_MEMORY))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(spark, inputs: list[str], out: str, *, options: Options | None = None, partitions: int | None = None) -> dict:
    """Dissect the captures ``inputs`` names into Parquet tables under ``out`` (frames, messages, exchanges,
    problems, files) and ``out``/summary.json; returns the summary."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from dissector.spark import tables
    from dissector.spark.rows import write_empty

    options = options or Options()
    files, missing = expand(inputs)
    partitions = partitions or max(2, spark.sparkContext.defaultParallelism * 2)

    # 1. read: one task per file
    listed = spark.sparkContext.parallelize([(i, path) for i, path in enumerate(files)], max(1, len(files)))
    listed = spark.createDataFrame(listed, "file_no int, path string")
    read = listed.mapInArrow(functools.partial(tasks.read_files, options=options), from_arrow_schema(tasks.PACKETS))
    read = read.persist(StorageLevel.DISK_ONLY)

    paths = spark.createDataFrame([(i, path) for i, path in enumerate(files)] or [(-1, "")], "file_no int, path string")
    file_rows = (read.filter("kind = 'file'")
                 .select("file_no", F.col("number").alias("packets"), F.col("time").alias("first_time"), "size",
                         F.col("note_id").alias("ended_id"), F.col("note").alias("ended"))
                 .join(paths, "file_no"))
    in_order = Window.orderBy(F.col("first_time").asc_nulls_last(), "path")
    files_df = (file_rows.withColumn("order", F.row_number().over(in_order))
                .withColumn("offset", F.coalesce(F.sum("packets").over(
                    in_order.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)))
                .persist(StorageLevel.MEMORY_AND_DISK))

    # 2. packets keyed by connection, numbered across the files
    packets = (read.filter("kind = 'packet'")
               .join(F.broadcast(files_df.select("file_no", "offset")), "file_no")
               .select((F.col("offset") + F.col("number")).alias("p"), "time", "linktype", "orig_len", "data", "flow"))

    # every packet of a connection in one partition, in capture order; kept for both passes. The connections
    # are dealt to the partitions largest first, round robin (hashing them would put two of a capture's few
    # big connections in one partition as often as not): each gets a number whose hash partition is its turn
    by_size = Window.orderBy(F.desc("bytes"), "flow")
    turns = (packets.groupBy("flow").agg(F.sum(F.length("data")).alias("bytes"))
             .withColumn("turn", (F.row_number().over(by_size) - 1) % partitions))
    numbers_of_turns = (spark.range(0, partitions * 64)
                        .withColumn("turn", F.expr(f"pmod(hash(id), {partitions})"))
                        .groupBy("turn").agg(F.min("id").alias("slot")))
    slots = turns.join(numbers_of_turns, "turn", "left").select("flow", "slot")
    keyed = (packets.join(slots, "flow")
             .withColumn("slot", F.coalesce("slot", F.abs(F.hash("flow")).cast("long")))
             .repartition(partitions, "slot").sortWithinPartitions("p").persist(StorageLevel.DISK_ONLY))

    # 3. count, then number as the whole input would
    counted = keyed.mapInArrow(functools.partial(tasks.count_numbers, options=options), from_arrow_schema(tasks.NUMBERS))
    counted = counted.persist(StorageLevel.MEMORY_AND_DISK)
    by_packet = Window.orderBy("p")
    numbered = (counted.filter("kind = 'packet'")
                .withColumn("frames_before", F.coalesce(F.sum("frames").over(
                    by_packet.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)))
                .withColumn("conn_id", F.when(F.col("opened") > 0, F.sum("opened").over(
                    by_packet.rowsBetween(Window.unboundedPreceding, 0)))))
    packet_frames = counted.filter("kind = 'packet'").agg(F.coalesce(F.sum("frames"), F.lit(0)).alias("n"))
    by_conn = Window.orderBy("conn_id")
    finish = (counted.filter("kind = 'finish'").select("p", F.col("frames").alias("finish_frames"))
              .join(numbered.filter("conn_id is not null").select("p", "conn_id"), "p")
              .crossJoin(packet_frames)
              .withColumn("finish_base", F.col("n") + F.coalesce(F.sum("finish_frames").over(
                  by_conn.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)))
              .select("p", "finish_base"))
    numbers = (numbered.select("p", "frames_before", "conn_id")
               .join(finish, "p", "left")
               .persist(StorageLevel.MEMORY_AND_DISK))

    # 4. decode with those numbers (a row per packet that makes a frame or opens a connection): joined by
    # broadcast while they are few enough, so the partitions stay as they were, else by a shuffle; each
    # partition sorted again by packet
    if numbers.count() <= BROADCAST_NUMBERS:
        to_decode = keyed.join(F.broadcast(numbers), "p", "left").sortWithinPartitions("p")
    else:
        to_decode = keyed.join(numbers, "p", "left").repartition(partitions, "slot").sortWithinPartitions("p")
    for table in ("frames", "messages"):
        shutil.rmtree(os.path.join(out, table), ignore_errors=True)
    write_empty(out)
    events = to_decode.mapInArrow(functools.partial(tasks.decode, options=options, out=os.path.abspath(out)),
                                  from_arrow_schema(tasks.EVENTS))
    events = events.persist(StorageLevel.MEMORY_AND_DISK)
    events.count()  # the tasks write the frames and messages now

    # 5. the tables and the summary
    notes = read.filter("kind = 'note'").join(paths, "file_no").select("path", "note_id", "note")
    summary = tables.write(spark, events, files_df, notes, missing, out)
    for frame in (events, numbers, counted, keyed, files_df, read):
        frame.unpersist()
    return summary
