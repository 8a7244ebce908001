"""``pulsar-dissect pipeline``: many (and huge) captures dissected on Apache Spark into Parquet tables.

The stages (docs/SPARK.md says why this shape). Packets never pass through Spark: its rows are an index of
the input and numbers; each task reads the capture files it needs itself.

1. index: one task per capture file streams it once (``tasks.index_files``): its TCP connections (a key per
   connection, packets, bytes), its packet count and first time. Files are put in time order; a packet's
   number in the whole input is its file's offset plus its number in the file.
2. plan: the connections are dealt to partitions, largest first; a partition's work is, per file in capture
   order, the connections of it that it reads. A connection that spans several rotated files is read whole
   and in order by one task.
3. count (``tasks.count_numbers``): per partition, the packets that complete frames or open connections and
   what the end leaves, into files under DIR/_numbering; then one task (``tasks.number``) merges them in
   packet order into the numbers a run over the whole input would give them (running sums), a file per
   partition.
4. decode (``tasks.decode``): per partition, its work and its numbers: the CLI's pipeline and analysis over
   its connections with those numbers, each frame's record made by the engine straight into the typed Arrow
   tables (frames, messages, the frames' problems, exchanges: each answer with its request), and the events
   into the events table, which the task writes; its part of the summary comes back as its one row.
5. tables (``tables.py``): the files' problems and the files in Spark SQL from the index; the summary merged
   from the decoding tasks' parts (a row each: the only thing of the decoding collected).
"""
from __future__ import annotations

import functools
import os
import shutil
import sys
import time

from dissector.options import Options
from dissector.spark import tasks
from dissector.capture.inputs import expand


#: The driver's heap in local mode (``--conf spark.driver.memory=...`` overrides it).
LOCAL_DRIVER_MEMORY = "3g"

#: Rows per Arrow batch handed to a task.
ARROW_BATCH_ROWS = 65536

#: The JVM's options in local mode, where it shares the machine's cores with the Python workers that decode:
#: only the C1 compiler (C2 recompiling Spark's generated code took a third of a run's CPU on 2 cores) and the
#: serial collector (no concurrent marking threads; the heap is a few GiB). On 2 cores they cut a local[2]
#: run's CPU by a third and its time by a quarter (docs/SPARK.md). ``spark.driver.extraJavaOptions`` replaces
#: them; a cluster's executors keep their JVM's defaults.
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


#: The Java system property ``log4j2.properties`` takes Spark's log level from (``session``'s ``log_level``).
LOG_LEVEL_PROPERTY = "pulsar_dissect.spark_log_level"

#: This process's class archive (``classes.py``), finished by ``stop``.
_archive = None


def session(master: str = "local[*]", conf: dict[str, str] | None = None, app: str = "pulsar-dissect pipeline",
            class_archive: bool = False, log_level: str = "error", launch=None):
    """A SparkSession on ``master`` with ``conf``; the executors run this Python (the package and its
    compiled core must be installed where they run: docs/SPARK.md). ``class_archive``: in local mode, the JVM
    maps Spark's classes from the archive an earlier run made, or makes it (``classes.py``; ``stop`` ends
    such a session). ``log_level``: what Spark logs (``log4j2.properties``; error, warn, info).
    ``launch``: called with the session's settings before the session is made, to start the JVM itself
    (``console.launch_jvm``: its output read through a filter)."""
    global _archive
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no lookup of this host's name
    from pyspark.sql import SparkSession

    # the tasks import numpy (through pyarrow), whose OpenBLAS starts a thread per core in every Python worker
    # that spins for nothing (no task does linear algebra): the workers' cores are the tasks'
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    conf = dict(conf or {})
    conf.setdefault("spark.executorEnv.OPENBLAS_NUM_THREADS", "1")
    log4j = ("-Dlog4j2.configurationFile=file:" + os.path.join(os.path.dirname(__file__), "log4j2.properties")
             + f" -D{LOG_LEVEL_PROPERTY}={log_level}")
    if local and class_archive and "spark.driver.extraJavaOptions" not in conf:
        from dissector.spark.classes import ClassArchive

        _archive = ClassArchive(LOCAL_JAVA_OPTIONS)
    conf.setdefault("spark.driver.extraJavaOptions", f"{log4j} {LOCAL_JAVA_OPTIONS}" if local else log4j)

    def start(extra: str):
        settings = {"spark.master": master, "spark.app.name": app,
                    "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS),
                    "spark.sql.shuffle.partitions": "8", "spark.ui.showConsoleProgress": "false"}
        if local:
            # local mode's executors live in the driver's JVM: its default 1 GiB heap is too little to write
            # the tables of a large capture
            settings.update({"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
                             "spark.driver.memory": LOCAL_DRIVER_MEMORY})
        for key, value in conf.items():
            if key == "spark.driver.extraJavaOptions":
                value = f"{value} {extra}".strip()
            settings[key] = value
        if launch is not None:
            launch(settings)
        return SparkSession.builder.config(map=settings).getOrCreate()

    try:
        spark = start(_archive.options if _archive is not None else "")
    except Exception:
        if _archive is None or not _archive.used:
            raise
        _archive.discard()  # an archive this JVM cannot map (it did not start): without it, and made again later
        spark = start("")
    spark.sparkContext.setLogLevel(log_level.upper())
    return spark


def stop(spark) -> None:
    """Stop a session ``session`` started; a JVM that writes the class archive is waited for."""
    global _archive
    spark.stop()
    if _archive is not None:
        _archive.finish()
        _archive = None


def step(spark, name: str) -> None:
    """The Spark jobs started from here on belong to the step ``name`` of ``run`` (their job group): the
    progress line (``console.Progress``) finds a step's tasks by it."""
    spark.sparkContext.setJobGroup(name, f"pulsar-dissect pipeline: {name}")


def default_partitions(spark) -> int:
    """The partitions ``run`` spreads the connections over when not told: twice the cores Spark has."""
    return max(2, spark.sparkContext.defaultParallelism * 2)


class Stages:
    """Seconds each stage of a run took, in order (``DIR/stages.json``: where a run's time went)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._mark = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self._mark, 3)
        self._mark = now


def run(spark, inputs: list[str], out: str, *, options: Options | None = None, partitions: int | None = None,
        records=None, stages: Stages | None = None, with_json: bool = False) -> dict:
    """Dissect the captures ``inputs`` names into Parquet tables under ``out`` (frames, messages, exchanges,
    problems, files) and ``out``/summary.json; returns the summary. ``records`` (``pipeline --report``): called
    with every record in capture order (``spark.report.records_in_capture_order``) once the tables are written.
    ``stages``: the seconds of each stage are added to it. ``with_json`` (implied by ``records``): the frames
    table keeps each record's line as ``--json`` writes it, in a ``json`` column."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from dissector.spark import tables
    from dissector.spark.rows import write_empty

    options = options or Options()
    stages = stages or Stages()
    files, missing = expand(inputs)
    partitions = partitions or default_partitions(spark)

    # 1. index: one task per file
    step(spark, "index")
    listed = spark.sparkContext.parallelize([(i, path) for i, path in enumerate(files)], max(1, len(files)))
    listed = spark.createDataFrame(listed, "file_no int, path string")
    index = listed.mapInArrow(functools.partial(tasks.index_files, options=options), from_arrow_schema(tasks.INDEX))
    index = index.persist(StorageLevel.MEMORY_AND_DISK)
    index.count()  # read once here: the plans below would each start reading it at once
    stages.done("index")

    paths = spark.createDataFrame([(i, path) for i, path in enumerate(files)] or [(-1, "")], "file_no int, path string")
    file_rows = (index.filter("kind = 'file'")
                 .select("file_no", "packets", F.col("time").alias("first_time"), F.col("bytes").alias("size"),
                         F.col("note_id").alias("ended_id"), F.col("note").alias("ended"))
                 .join(paths, "file_no"))
    in_order = Window.orderBy(F.col("first_time").asc_nulls_last(), "path")
    files_df = (file_rows.withColumn("order", F.row_number().over(in_order))
                .withColumn("offset", F.coalesce(F.sum("packets").over(
                    in_order.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)))
                .persist(StorageLevel.MEMORY_AND_DISK))

    # 2. plan: the connections dealt to the partitions largest first, round robin (hashing them would put two
    # of a capture's few big connections in one partition as often as not): each gets a number whose hash
    # partition is its turn. A partition's work: per file, in capture order, its connections there.
    flows = index.filter("kind = 'flow'").select("file_no", "flow", "bytes")
    by_size = Window.orderBy(F.desc("bytes"), "flow")
    turns = (flows.groupBy("flow").agg(F.sum("bytes").alias("bytes"))
             .withColumn("turn", (F.row_number().over(by_size) - 1) % partitions))
    numbers_of_turns = (spark.range(0, partitions * 64)
                        .withColumn("turn", F.expr(f"pmod(hash(id), {partitions})"))
                        .groupBy("turn").agg(F.min("id").alias("slot")))
    slots = (turns.join(numbers_of_turns, "turn", "left")
             .select("flow", F.coalesce("slot", F.abs(F.hash("flow")).cast("long")).alias("slot")))
    work = (flows.join(slots, "flow").join(files_df.select("file_no", "order", "path", "offset"), "file_no")
            .groupBy("slot", "order", "path", "offset")
            # as text: Spark gives a task a list column slowly (seconds per hundred thousand rows of the union)
            .agg(F.concat_ws(",", F.collect_list(F.col("flow").cast("string"))).alias("flows"))
            .repartition(partitions, "slot").sortWithinPartitions("order")
            .persist(StorageLevel.MEMORY_AND_DISK))

    # 3. count, then number as the whole input would: the tasks leave their numbers in files under out
    step(spark, "count")
    numbering = os.path.join(os.path.abspath(out), tasks.NUMBERING)
    shutil.rmtree(numbering, ignore_errors=True)
    os.makedirs(numbering)
    counted = work.mapInArrow(functools.partial(tasks.count_numbers, options=options, into=numbering),
                              from_arrow_schema(tasks.COUNTED)).persist(StorageLevel.MEMORY_AND_DISK)
    counted.count()  # a row per partition: its counts are written
    stages.done("plan_and_count")
    # one task merges them all (Spark would sort a row per packet in one partition too, in its JVM)
    step(spark, "number")
    counted.repartition(1).mapInArrow(functools.partial(tasks.number, into=numbering),
                                      from_arrow_schema(tasks.COUNTED)).count()

    # 4. decode: each partition's work with its numbers
    step(spark, "decode")
    with_json = with_json or records is not None  # the report reads the records' lines
    write_empty(out, with_json)
    # the tasks write the tables; a row each comes back: its part of the summary
    parts = [row["statistics"] for row in work.mapInArrow(
        functools.partial(tasks.decode, options=options, out=os.path.abspath(out), numbering=numbering,
                          with_json=with_json), from_arrow_schema(tasks.STATISTICS)).collect()]
    shutil.rmtree(numbering, ignore_errors=True)
    stages.done("number_and_decode")

    # 5. the tables and the summary
    step(spark, "tables")
    notes = index.filter("kind = 'note'").join(paths, "file_no").select("path", "note_id", "note")
    summary = tables.write(spark, parts, files_df, notes, missing, out, stages)
    if records is not None:
        from dissector.spark.report import records_in_capture_order

        step(spark, "report")
        records(records_in_capture_order(spark, out))
        stages.done("report")
    for frame in (counted, work, files_df, index):
        frame.unpersist()
    return summary
