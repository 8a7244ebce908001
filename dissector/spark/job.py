"""``pulsar-dissect pipeline``: many (and huge) captures dissected on Apache Spark into Parquet tables.

The stages (docs/SPARK.md says why this shape). Packets never pass through Spark, nor rows: at most three
Spark jobs of Python tasks (index, count, decode: ``RDD.mapPartitions``, nothing to plan), and the rest on the
driver from what they give back; each task reads the capture files it needs itself. The index and the count
are read on the driver's machine while Spark starts instead (``prepass.py``: local mode, a cluster's small
input), when the caller started that reading.

1. index: a task per core, each streaming its share of the capture files once (``tasks.index_files``): a
   file's TCP connections (a key per connection, packets, bytes), its packet count and first time, into a file
   under DIR/_index per capture file, read on the driver.
2. plan (``plan.py``, the driver): files in time order, a packet's number in the whole input being its file's
   offset plus its number in the file; the connections dealt to partitions, largest first, each to the least
   loaded; a partition's work is, per file in capture order, the connections of it that it reads. A connection that spans several
   rotated files is read whole and in order by one task.
3. count (``tasks.count_numbers``): per partition, the packets that complete frames or open connections and
   what the end leaves, into files under DIR/_numbering; then the driver (``tasks.number``) merges them in
   packet order into the numbers a run over the whole input would give them (running sums), a file per
   partition. Skipped when one partition has all the work (``needs_numbering``): its order is the input's.
   After a prepass, its count of every connection at once is numbered and shared out instead
   (``tasks.number_whole``).
4. decode (``tasks.decode``): per partition, its work and its numbers: the CLI's pipeline and analysis over
   its connections with those numbers, each frame's record made by the engine straight into the typed Arrow
   tables (frames, messages, the frames' problems, exchanges: each answer with its request), and the events
   into the events table, which the task writes; its part of the summary comes back.
5. tables (``tables.py``, the driver): the files and their problems, from the plan, with pyarrow; the summary
   merged from the decoding tasks' parts.
"""
from __future__ import annotations

import functools
import os
import shutil
import sys
import threading
import time

from dissector.options import Options
from dissector.spark import tasks
from dissector.capture.inputs import expand


#: The driver's heap in local mode (``--conf spark.driver.memory=...`` overrides it).
LOCAL_DRIVER_MEMORY = "3g"

#: Rows per Arrow batch handed to a task.
ARROW_BATCH_ROWS = 65536

#: The options of the JVMs of a job: the driver's in every mode, and a cluster's executors'. Neither does the
#: job's work (the Python workers decode and write the tables; a JVM carries a task's few rows), and in local
#: mode the driver's shares the machine's cores with the workers: only the C1 compiler (C2 recompiling Spark's
#: generated code took a third of a run's CPU on 2 cores) and the serial collector (no concurrent marking
#: threads). On 2 cores they cut a local[2] run's CPU by a third and its time by a quarter; on a standalone
#: cluster of two one-core workers, the executors' start and first tasks from 5.7 to 3.6 s (docs/SPARK.md).
#: ``spark.driver.extraJavaOptions`` and ``spark.executor.extraJavaOptions`` replace them.
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


#: The Java system property ``log4j2.properties`` takes Spark's log level from (``start``'s ``log_level``).
LOG_LEVEL_PROPERTY = "pulsar_dissect.spark_log_level"

#: This process's class archive (``classes.py``), finished by ``stop``.
_archive = None


def start(master: str = "local[*]", conf: dict[str, str] | None = None, app: str = "pulsar-dissect pipeline",
          class_archive: bool = False, log_level: str = "error", launch=None):
    """A SparkContext on ``master`` with ``conf`` (no SparkSession: the job runs RDD tasks only, and making
    one initialises Spark SQL, 0.45 s of every run; ``report.py`` makes one when it reads the tables); the executors run this Python (the package and its
    compiled core must be installed where they run: docs/SPARK.md). ``class_archive``: the driver's JVM
    maps Spark's classes from the archive an earlier run made, or makes it (``classes.py``; ``stop`` ends
    such a session). ``log_level``: what Spark logs (``log4j2.properties``; error, warn, info).
    ``launch``: called with the session's settings before the session is made, to start the JVM itself
    (``console.launch_jvm``: its output read through a filter)."""
    global _archive
    threading.Thread(target=_import_converters, name="py4j converters' imports", daemon=True).start()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no lookup of this host's name
    from pyspark import SparkConf, SparkContext

    # the tasks import numpy (through pyarrow), whose OpenBLAS starts a thread per core in every Python worker
    # that spins for nothing (no task does linear algebra): the workers' cores are the tasks'
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    conf = dict(conf or {})
    conf.setdefault("spark.executorEnv.OPENBLAS_NUM_THREADS", "1")
    # the workers' daemon imports pyspark from the installed package, not from Spark's zip (``daemon.py``)
    conf.setdefault("spark.python.daemon.module", "dissector.spark.daemon")
    log4j = ("-Dlog4j2.configurationFile=file:" + os.path.join(os.path.dirname(__file__), "log4j2.properties")
             + f" -D{LOG_LEVEL_PROPERTY}={log_level}")
    if class_archive and "spark.driver.extraJavaOptions" not in conf:
        from dissector.spark.classes import ClassArchive

        _archive = ClassArchive(JAVA_OPTIONS)
    conf.setdefault("spark.driver.extraJavaOptions", f"{log4j} {JAVA_OPTIONS}")
    if not local:
        conf.setdefault("spark.executor.extraJavaOptions", JAVA_OPTIONS)

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
            launch(settings)  # the context, on a JVM started by the caller
        return SparkContext.getOrCreate(SparkConf().setAll(settings.items()))

    try:
        context = start(_archive.options if _archive is not None else "")
    except Exception:
        if _archive is None or not _archive.used:
            raise
        _archive.discard()  # an archive this JVM cannot map (it did not start): without it, and made again later
        context = start("")
    context.setLogLevel(log_level.upper())
    return context


def _import_converters() -> None:
    """What the context's first calls into the JVM import: PySpark's numpy converter asks
    ``pyspark.testing.utils`` whether numpy is there, and that module imports pandas (0.19 s of one core). Done
    here, beside the JVM's start (which the driver only waits for), it is not done after it, while the driver
    makes the context and nothing else runs."""
    try:
        import pyspark.testing.utils  # noqa: F401
    except Exception:  # the converter's own import will say what is wrong, where it is needed
        pass


def stop(context) -> None:
    """Stop a context ``start`` started; a JVM that writes the class archive is waited for."""
    global _archive
    _stop_accumulator_server(context)
    context.stop()
    if _archive is not None:
        _archive.finish()
        _archive = None


def _stop_accumulator_server(context) -> None:
    """pyspark's accumulator server ends only when its poll of the JVM's connection times out, once a second:
    ``SparkContext.stop`` waits for it (0.92 s of every run's stop, measured). Nothing here uses accumulators:
    the server is told to stop and closed on a thread of its own, and the context left without it."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None or not hasattr(server, "server_shutdown"):
        return
    server.server_shutdown = True
    context._accumulatorServer = None
    threading.Thread(target=server.shutdown, name="accumulator server stop", daemon=True).start()


def step(context, name: str) -> None:
    """The Spark jobs started from here on belong to the step ``name`` of ``run`` (their job group): the
    progress line (``console.Progress``) finds a step's tasks by it."""
    context.setJobGroup(name, f"pulsar-dissect pipeline: {name}")


def failure(exc: BaseException) -> str | None:
    """What made a Spark job fail, on one line: the exception a task's Python raised (its traceback's last line:
    a module missing on an executor, an output directory it cannot write), else the JVM's first line; None for
    an exception that is not a failed Spark job (a fault of the driver's own code keeps its traceback)."""
    if type(exc).__name__ != "Py4JJavaError":
        return None
    lines = str(exc).splitlines()
    raised = None
    for at, line in enumerate(lines):
        if line.endswith("Traceback (most recent call last):"):
            # the frames are indented; the exception's line is the first that is not
            raised = next((after for after in lines[at + 1:] if after.strip() and not after[0].isspace()), raised)
    if raised is not None:
        return raised.strip()
    # py4j's text: the call on its first line, then ": " and the JVM's exception
    java = next((line[2:].strip() for line in lines if line.startswith(": ") and line[2:].strip()), None)
    return java or next((line.strip() for line in lines if line.strip()), type(exc).__name__)


def needs_numbering(work) -> bool:
    """Whether the partitions' work (``plan.Work`` per slot) must be counted and numbered first: not when one
    partition has it all, for it reads every selected packet of every file in capture order, so its own running
    count numbers the frames and connections as the count and number stages would (the same packets through
    the same pipeline), and the input is read once less."""
    return sum(1 for _, files in work if files) > 1


def default_partitions(context) -> int:
    """The partitions ``run`` spreads the connections over when not told: one per core Spark has. The count and
    decode stages read each file once per partition (skipping the other partitions' packets), so a further
    partition costs a reading of the input; the connections are dealt to the least loaded partition, largest
    first (``plan.least_loaded``), which balances the cores without spare partitions (on the benchmark's
    rotated set, local[2] with 2 partitions against 4: docs/SPARK.md)."""
    return max(1, context.defaultParallelism)


class Stages:
    """Seconds each stage of a run took, in order (``DIR/stages.json``: where a run's time went)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._mark = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self._mark, 3)
        self._mark = now


def run(context, inputs: list[str], out: str, *, options: Options | None = None, partitions: int | None = None,
        records=None, stages: Stages | None = None, with_json: bool = False, prepass=None) -> dict:
    """Dissect the captures ``inputs`` names into Parquet tables under ``out`` (frames, messages, exchanges,
    problems, files) and ``out``/summary.json on the SparkContext ``context``; returns the summary. ``records``
    (``pipeline --report``): called with every record in capture order (``spark.report.records_in_capture_order``)
    once the tables are written. ``stages``: the seconds of each stage are added to it. ``with_json`` (implied by
    ``records``): the frames table keeps each record's line as ``--json`` writes it, in a ``json`` column.
    ``prepass`` (``prepass.start``, local mode): the index, and the count if it made one, are its."""
    try:
        return _run(context, inputs, out, options=options, partitions=partitions, records=records, stages=stages,
                    with_json=with_json, prepass=prepass)
    except BaseException:  # a failed or cancelled run leaves no working files (its tables are not whole)
        for name in (tasks.INDEXED, tasks.NUMBERING, tasks.PROGRESS):
            shutil.rmtree(os.path.join(os.path.abspath(out), name), ignore_errors=True)
        raise


def _run(context, inputs: list[str], out: str, *, options: Options | None, partitions: int | None, records,
         stages: Stages | None, with_json: bool, prepass) -> dict:
    import pyarrow as pa

    from dissector.spark import plan as planning
    from dissector.spark import tables
    from dissector.spark.rows import write_empty

    options = options or Options()
    stages = stages or Stages()
    files, missing = expand(inputs)
    partitions = partitions or default_partitions(context)
    indexed = os.path.join(os.path.abspath(out), tasks.INDEXED)
    numbering = os.path.join(os.path.abspath(out), tasks.NUMBERING)
    try:  # an earlier run's summary beside this run's tables would describe them if this run failed
        os.remove(os.path.join(out, tables.SUMMARY))
    except FileNotFoundError:
        pass

    # 1. index: read on the driver's machine while the JVM started (``prepass``), or a task per core, each with
    # its share of the files (one item); their rows come back through files under out (the progress line counts
    # them), read on the driver once
    step(context, "index")
    if prepass is not None and prepass.files != files:
        prepass.cancel()  # another input's: stopped before the index below is written where it writes
        prepass = None
    prepared = prepass is not None and prepass.wait()
    if not prepared:
        shutil.rmtree(indexed, ignore_errors=True)
        os.makedirs(indexed)
        shares = tasks.deal_files(files, context.defaultParallelism)
        listed = context.parallelize(shares, len(shares))
        listed.mapPartitions(functools.partial(tasks.index_files, options=options, into=indexed)).collect()
    index = tasks.read_index(indexed, len(files))
    shutil.rmtree(indexed, ignore_errors=True)
    stages.done("index")

    # 2. plan, on the driver: files in time order and their offsets, the connections dealt to the partitions
    plan = planning.make(index, files, partitions)
    del index

    # 3. count, then number as the whole input would: the numbers are left in files under out. A partition's
    # work is its one item (a slot per partition, in order: parallelize slices a list by position)
    work = context.parallelize(plan.work, partitions)
    counted_whole = prepared and prepass.counted
    counted_reads = []  # what the counting tasks read of each file, held to the index as the decoding's are
    if not counted_whole:
        shutil.rmtree(numbering, ignore_errors=True)
        os.makedirs(numbering)
    if needs_numbering(plan.work) and counted_whole:
        # counted whole by the prepass: shared out to the partitions on the driver
        step(context, "number")
        tasks.number_whole(numbering, plan.work)
        stages.done("plan_and_count")
    elif needs_numbering(plan.work):
        step(context, "count")
        counted = work.mapPartitions(functools.partial(tasks.count_numbers, options=options,
                                                       into=numbering)).collect()
        stages.done("plan_and_count")
        # merged on the driver, as one task would (a block of each partition's counts at a time)
        step(context, "number")
        slots = pa.RecordBatch.from_pydict({"slot": [slot for slot, _, _, _ in counted]})
        for _ in tasks.number([slots], into=numbering):
            pass
        counted_reads = [read for *_, reads in counted for read in reads]
    else:
        stages.done("plan_and_count")

    # 4. decode: each partition's work with its numbers
    step(context, "decode")
    with_json = with_json or records is not None  # the report reads the records' lines
    write_empty(out, with_json)
    progress = os.path.join(os.path.abspath(out), tasks.PROGRESS)
    shutil.rmtree(progress, ignore_errors=True)
    os.makedirs(progress)
    # the tasks write the tables; each gives back its part of the summary
    decoded = work.mapPartitions(functools.partial(tasks.decode, options=options, out=os.path.abspath(out),
                                                   numbering=numbering, with_json=with_json)).collect()
    parts = [part for part, _ in decoded]
    unread = tables.unread(plan.files, [read for _, reads in decoded for read in reads], counted_reads)
    shutil.rmtree(numbering, ignore_errors=True)
    shutil.rmtree(progress, ignore_errors=True)
    stages.done("number_and_decode")

    # 5. the tables and the summary, on the driver
    step(context, "tables")
    summary = tables.write(parts, plan.files, plan.notes, missing, out, stages, unread=unread)
    if records is not None:
        from dissector.spark.report import records_in_capture_order

        step(context, "report")
        records(records_in_capture_order(context, out))
        stages.done("report")
    return summary
