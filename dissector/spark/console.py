"""What ``pipeline`` shows on standard error while it runs: its progress and the JVM's output, and nothing of
Spark's or the JVM's start-up chatter unless asked (``-v``). Importing this module needs no Spark.

- ``Console``: standard error shared by the progress line and the JVM's output. The progress line is one line
  rewritten in place (``\\r``, no colours, no escape sequences), and only when standard error is a terminal:
  never in a pipe, a file or a CI log.
- ``launch_jvm``: starts Spark's JVM (as PySpark would) with its standard output and error going through a
  pipe that a thread reads (``JvmOutput``): without ``verbose`` the warnings the JDK and Spark print as they
  start are dropped; everything else (errors, stack traces, a failed start) reaches the user.
- ``Progress``: a thread that polls Spark's status tracker for the tasks of the job's current step (the job
  groups ``job.step`` names) and reads the files indexed and the frames written that the tasks note under
  DIR, for the progress line.
"""
from __future__ import annotations

import os
import re
import sys
import threading
import time

#: The widest progress line (a terminal narrower than this gets one column less than its width).
MAX_WIDTH = 79

#: Seconds between two readings of Spark's status.
POLL_S = 0.5

#: The JVM's and Spark's output that ``pipeline`` drops without ``-v``: the JDK's warnings (incubator modules,
#: illegal or native access, deprecated Unsafe methods), Spark's notes about its log configuration, log lines
#: below ERROR (Spark's layout, which ``log4j2.properties`` keeps), and the errors Spark's RPC inbox says it
#: ignores (a message for an endpoint that stopped: a stopping application's executors still reported).
NOISE = re.compile(r"WARNING: |Using Spark's default log4j profile|Setting default log level|To adjust logging level"
                   r"|\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:WARN|INFO|DEBUG|TRACE) "
                   r"|\d\d/\d\d/\d\d \d\d:\d\d:\d\d ERROR Inbox: Ignoring error$")

#: The lines that continue a log line (its exception and stack trace): dropped with a line ``NOISE`` dropped.
CONTINUATION = re.compile(r"\s|Caused by:|Suppressed:|[\w$.]+(?:Exception|Error|Throwable)\b")


def is_noise(line: str, after_noise: bool = False) -> bool:
    """Whether a line of the JVM's output is start-up chatter (``after_noise``: the line before it was)."""
    return bool(NOISE.match(line)) or (after_noise and bool(CONTINUATION.match(line)))


class Console:
    """Standard error for the progress line and whole lines of text; ``live``: whether the progress line is
    shown (by default, when the stream is a terminal). Written straight to the stream's file descriptor when it
    has one: the JVM's reader thread may still write as the interpreter exits, when a buffered stream's lock
    must not be taken by a daemon thread."""

    def __init__(self, stream=None, live: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        if live is None:
            try:
                live = self.stream.isatty()
            except (AttributeError, ValueError):
                live = False
        self.live = live
        try:
            self._fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None  # a stream in memory (tests)
        self._encoding = getattr(self.stream, "encoding", None) or "utf-8"
        self._lock = threading.Lock()
        self._status = ""
        self._shown = 0  # columns of the progress line on the screen

    def _width(self) -> int:
        """Columns for the progress line: one less than the terminal's (a full line would wrap), at most
        ``MAX_WIDTH``."""
        try:
            columns = os.get_terminal_size(self._fd).columns if self._fd is not None else 0
        except OSError:
            columns = 0
        return min(MAX_WIDTH, columns - 1) if columns > 1 else MAX_WIDTH

    def _emit(self, text: str) -> None:
        try:
            if self._fd is None:
                self.stream.write(text)
                self.stream.flush()
                return
            self.stream.flush()  # what the command wrote there before comes first
            data = text.encode(self._encoding, "replace")
            while data:
                data = data[os.write(self._fd, data):]
        except (OSError, ValueError):
            pass  # standard error closed: nothing to tell it

    def _line(self, text: str) -> str:
        """The progress line ``text`` drawn over the one shown (spaces over what a longer one left)."""
        text = text[:self._width()]
        drawn = "\r" + text.ljust(self._shown)
        self._shown = max(len(text), self._shown)
        return drawn

    def _erased(self) -> str:
        erase, self._shown = ("\r" + " " * self._shown + "\r" if self._shown else ""), 0
        return erase

    def status(self, text: str) -> None:
        """The progress line is now ``text`` (nothing when not live)."""
        if not self.live:
            return
        with self._lock:
            if text != self._status:
                self._status = text
                self._emit(self._line(text) if text else self._erased())

    def clear(self) -> None:
        """No progress line any more: erased from the screen."""
        self.status("")

    def write(self, text: str) -> None:
        """Whole lines, above the progress line (which is drawn again below them)."""
        with self._lock:
            self._emit(self._erased() + text + (self._line(self._status) if self._status else ""))


class JvmOutput(threading.Thread):
    """Reads the JVM's output from the pipe ``fd`` until every writer closed it; writes it to ``console``, without
    the start-up chatter (``is_noise``) unless ``verbose``."""

    def __init__(self, fd: int, console: Console, verbose: bool = False):
        super().__init__(name="jvm-output", daemon=True)
        self.fd, self.console, self.verbose = fd, console, verbose
        self.dropped = 0

    def run(self) -> None:
        after_noise = False
        with os.fdopen(self.fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode("utf-8", "replace")
                if not self.verbose:
                    after_noise = is_noise(line, after_noise)
                    if after_noise:
                        self.dropped += 1
                        continue
                self.console.write(line if line.endswith("\n") else line + "\n")


#: Seconds ``launch_jvm`` waits, when the JVM did not start, for the reader to pass on what it printed.
FAILED_START_WAIT_S = 10


def launch_jvm(settings: dict[str, str], console: Console, verbose: bool = False) -> JvmOutput | None:
    """Start Spark's JVM with ``settings`` (``job.start``'s, given to spark-submit as PySpark gives them) and
    a SparkContext on it, its standard output and error read by a ``JvmOutput`` (returned; None when a JVM runs
    already in this process). The JVM's output goes to standard error: its standard output is ours, where
    ``--json`` writes."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return None
    read, write = os.pipe()
    reader = JvmOutput(read, console, verbose)
    reader.start()
    try:
        gateway = launch_gateway(SparkConf(loadDefaults=False).setAll(settings.items()),
                                 popen_kwargs={"stdout": write, "stderr": write})
    except BaseException:
        os.close(write)
        reader.join(FAILED_START_WAIT_S)  # what it said before it died, before the caller's message
        raise
    os.close(write)  # the JVM and its children hold the pipe now: the reader ends when they all exit
    SparkContext(conf=SparkConf(loadDefaults=False).setAll(settings.items()), gateway=gateway)
    return reader


#: The steps of ``job.run`` (the Spark job groups ``job.step`` sets): what the progress line says of each, and
#: what it counts: the input files indexed (the files the indexing tasks wrote under DIR/_index), or the
#: tasks of the step's stage that has as many as there are partitions.
STEPS = {"index": ("files indexed", "files"), "count": ("partitions counted", "partitions"),
         "number": ("merging the frame numbers", None), "decode": ("partitions decoded", "partitions"),
         "tables": ("problems, files and the summary", None), "report": ("the records read back", None)}

#: The directory (under DIR) of the indexing tasks' files, one per input file indexed (``tasks.INDEXED``).
INDEXED_DIR = "_index"

#: The directory (under DIR) where each decoding task keeps the count of the frames it has written
#: (``tasks.PROGRESS``): a file per task holding one decimal number, replaced whole as it grows.
PROGRESS_DIR = "_progress"


def files_indexed(directory: str) -> int:
    """The input files whose index is written whole under ``directory`` (a file still being written ends in
    ``.tmp``)."""
    try:
        return sum(1 for entry in os.scandir(directory) if entry.name.endswith(".arrow"))
    except OSError:
        return 0


def frames_written(directory: str) -> int:
    """The frames the decoding tasks have written so far, by their counts under ``directory``: a row group at
    a time, where the Parquet files' own row counts are known only once a task ends."""
    total = 0
    try:
        entries = [entry for entry in os.scandir(directory) if not entry.name.endswith(".tmp")]
    except OSError:
        return 0
    for entry in entries:
        try:
            with open(entry.path, "rb") as count:
                total += int(count.read(32) or 0)
        except (OSError, ValueError):
            continue  # replaced while read: counted next time
    return total


class Progress:
    """The progress line of a run of ``job.run`` on the SparkContext ``context`` writing under ``out``: a thread
    reads Spark's status every ``POLL_S`` and shows the current step, what it has done (``files``: the input files
    indexed; ``partitions``: its tasks done, of the job's partitions), the frames written, the step's seconds.
    ``context`` None: Spark is starting (``attach`` gives the context once it is up): meanwhile the line says
    ``starting`` and, with ``indexing`` (the local-mode prepass reads the input meanwhile: ``prepass.py``), the
    files indexed. Use as a context manager; nothing happens unless ``console.live``."""

    def __init__(self, context, console: Console, out: str, files: int, partitions: int,
                 starting: str | None = None, indexing: bool = False):
        self.context, self.console = None, console
        self.starting, self.indexing = starting, indexing
        self.expected = {"files": files, "partitions": partitions}
        self.progress = os.path.join(out, PROGRESS_DIR)
        self.indexed = os.path.join(out, INDEXED_DIR)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._step: str | None = None
        self._since = time.monotonic()
        self._before = -1  # jobs up to this id ran before (an earlier run on the same session)
        self._polls_running: dict[int, int] = {}  # a stage's id → the readings that found it running
        self._given = context
        self.watch = None

    def __enter__(self) -> "Progress":
        if self.console.live:
            if self._given is not None:
                self.attach(self._given, self.expected["partitions"])
            self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
            self._thread.start()
        return self

    def attach(self, context, partitions: int, watch=None) -> None:
        """Spark is up: the line follows ``context``'s jobs from now on (not those an earlier run left), and says
        so while a job waits for an executor (``watch``: an ``executors.ExecutorWatch``, on a cluster)."""
        self.expected["partitions"] = partitions
        self.watch = watch
        if not self.console.live:
            return
        tracker = context.statusTracker()
        self._before = max((max(tracker.getJobIdsForGroup(name), default=-1) for name in STEPS), default=-1)
        self._since = time.monotonic()
        self.context = context  # last: the thread reads Spark from now on

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.console.clear()

    def _run(self) -> None:
        tracker = None
        while not self._stop.is_set():
            try:
                if self.context is None:
                    line = self.starting_line()
                else:
                    tracker = tracker or self.context.statusTracker()
                    line = self.line(tracker)
            except Exception:  # Spark stopping, a py4j call cut short: the line is only a courtesy
                line = None
            if line is not None and not self._stop.is_set():
                self.console.status(line)
            self._stop.wait(POLL_S)

    def _files_indexed(self) -> str:
        total = self.expected["files"]
        return f"files indexed {min(files_indexed(self.indexed), total):,}/{total:,}"

    def starting_line(self) -> str | None:
        """The line while Spark starts (None: nothing to say)."""
        if self.starting is None:
            return None
        text = f"{self.starting}, {self._files_indexed()}" if self.indexing else self.starting
        return f"{text} ({time.monotonic() - self._since:.0f} s)"

    def _stage_tasks(self, tracker, jobs: list[int], want: int) -> tuple[int, int]:
        """(tasks done, tasks) of the step's stage with ``want`` tasks that did its work: with adaptive
        execution a step is several jobs, and several of their stages may have as many tasks (materialising a
        cached table, then counting it): the one found running most often (the latest, of equals) is the
        step's work, as its tasks take the time. None yet: (0, ``want``). A stage that never ran (skipped: its
        input was there already) is not one."""
        active = set(tracker.getActiveStageIds())
        stages = []
        for job_id in jobs:
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job is not None else ()):
                info = tracker.getStageInfo(stage_id)
                if info is None or info.numTasks != want:
                    continue
                if stage_id in active:
                    self._polls_running[stage_id] = self._polls_running.get(stage_id, 0) + 1
                if stage_id in active or info.numCompletedTasks > 0:
                    stages.append(info)
        if not stages:
            return 0, want
        stage = max(stages, key=lambda s: (self._polls_running.get(s.stageId, 0), s.stageId))
        return min(stage.numCompletedTasks, stage.numTasks), stage.numTasks

    def line(self, tracker) -> str | None:
        """The progress line now (None before the first step)."""
        groups = {name: [job for job in tracker.getJobIdsForGroup(name) if job > self._before] for name in STEPS}
        started = [name for name, jobs in groups.items() if jobs]
        if not started:  # the prepass still indexing, or nothing begun
            return f"index: {self._files_indexed()} ({time.monotonic() - self._since:.0f} s)" if self.indexing else None
        step = max(started, key=lambda name: max(groups[name]))  # the step of the latest job
        jobs = groups[step]
        if step != self._step:
            self._step, self._since = step, time.monotonic()
        what, unit = STEPS[step]
        waited = self.watch.waited() if self.watch is not None else None
        if waited is not None and waited >= 1:
            return f"{step}: waiting for an executor ({waited:.0f} s)"
        text = f"{step}: {what}"
        if unit == "files":
            text = f"{step}: {self._files_indexed()}"
        elif unit is not None:
            done, total = self._stage_tasks(tracker, jobs, self.expected[unit])
            text += f" {done:,}/{total:,}"
        if step == "decode":
            text += f", frames written {frames_written(self.progress):,}"
        return f"{text} ({time.monotonic() - self._since:.0f} s)"
