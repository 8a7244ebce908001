"""`pipeline`'s console (dissector/spark/console.py), without Spark: the progress line is drawn only on a
terminal and fits it, the JVM's output loses its start-up chatter but never its errors, the progress line
reads a step's tasks from Spark's status tracker (a fake one here, shaped as PySpark's), and the stages line
(dissector/spark/__init__.py) adds up to stages.json's seconds."""
from __future__ import annotations

import io
import os
import re
from types import SimpleNamespace

import pytest

from dissector.spark import stages_lines
from dissector.spark.console import INDEXED_DIR, MAX_WIDTH, PROGRESS_DIR, Console, JvmOutput, Progress, is_noise

# what a JVM under Spark 4 and Java 17+ prints as it starts, and what a failing task prints
CHATTER = [
    "WARNING: Using incubator modules: jdk.incubator.vector\n",
    "WARNING: A terminally deprecated method in sun.misc.Unsafe has been called\n",
    "WARNING: sun.misc.Unsafe::arrayBaseOffset has been called by org.apache.spark.unsafe.Platform\n",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n",
    'Setting default log level to "WARN".\n',
    "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n",
    "26/11/27 10:31:46 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform\n",
    "26/11/27 10:31:47 WARN Utils: Service 'SparkUI' could not bind on port 4040. Attempting port 4041.\n",
    "java.net.BindException: Address already in use\n",
    "\tat java.base/sun.nio.ch.Net.bind0(Native Method)\n",
    "Caused by: java.io.IOException: nope\n",
    "\t... 12 more\n",
    # as a cancelled application stops, its executors still reported to an endpoint that stopped
    "26/11/28 20:27:32 ERROR Inbox: Ignoring error\n",
    "org.apache.spark.SparkException: Could not find CoarseGrainedScheduler.\n",
    "\tat org.apache.spark.rpc.netty.Dispatcher.postMessage(Dispatcher.scala:181)\n",
]
ERRORS = [
    "26/11/27 10:32:00 ERROR Executor: Exception in task 0.0 in stage 3.0 (TID 7)\n",
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n",
    "\tat org.apache.spark.api.python.BasePythonRunner.read(PythonRunner.scala:572)\n",
    "Error: Could not create the Java Virtual Machine.\n",
    "JAVA_HOME is not set\n",
    "26/11/28 20:27:33 ERROR Inbox: An error happened while processing message in the inbox for Master\n",
]


def test_start_up_chatter_is_noise_and_errors_are_not():
    after = False
    for line in CHATTER:
        after = is_noise(line, after)
        assert after, line
    after = False
    for line in ERRORS:
        after = is_noise(line, after)
        assert not after, line


def _through_jvm_output(lines: list[str], verbose: bool) -> tuple[str, JvmOutput]:
    read, write = os.pipe()
    out = io.StringIO()
    reader = JvmOutput(read, Console(out, live=False), verbose)
    reader.start()
    os.write(write, "".join(lines).encode())
    os.close(write)
    reader.join(10)
    assert not reader.is_alive()
    return out.getvalue(), reader


def test_jvm_output_drops_the_chatter_and_passes_errors_and_their_stack_traces():
    shown, reader = _through_jvm_output(CHATTER + ERRORS + CHATTER[:2], verbose=False)
    assert shown == "".join(ERRORS)
    assert reader.dropped == len(CHATTER) + 2


def test_jvm_output_passes_everything_when_verbose():
    lines = CHATTER + ERRORS + ["no newline at the end"]
    shown, reader = _through_jvm_output(lines, verbose=True)
    assert shown == "".join(lines) + "\n" and reader.dropped == 0


def test_no_progress_line_off_a_terminal():
    out = io.StringIO()
    console = Console(out)  # a StringIO is no terminal
    assert not console.live
    console.status("index: files indexed 1/2 (0 s)")
    console.clear()
    assert out.getvalue() == ""
    console.write("ERROR boom\n")
    assert out.getvalue() == "ERROR boom\n"


def test_progress_line_is_one_line_in_place_within_80_columns_and_cleared():
    out = io.StringIO()
    console = Console(out, live=True)
    console.status("x" * 200)
    console.status("short")
    console.write("ERROR boom\n")  # above the line, which comes back below it
    console.clear()
    text = out.getvalue()
    assert "\n" not in text.replace("ERROR boom\n", "")
    assert "\x1b" not in text  # no escape sequences, no colours
    drawn = [piece for piece in text.replace("ERROR boom\n", "").split("\r") if piece]
    assert all(len(piece) <= MAX_WIDTH < 80 for piece in drawn)
    assert "ERROR boom\n\rshort" in text  # drawn again under what was written
    assert "\r" + " " * MAX_WIDTH + "\rERROR" in text  # the widest line drawn, erased before the text
    assert text.endswith("\r" + " " * len("short") + "\r")  # and the last one at the end


def test_stages_lines_add_up_and_fold_at_80_columns():
    seconds = {"spark_start": 3.04, "index": 1.25, "plan_and_count": 3.4, "number_and_decode": 20.12,
               "problems_and_files": 2.0, "summary": 8.5, "spark_stop": 0.3, "report": 1.0}
    lines = stages_lines(seconds)
    assert lines[0].startswith("stages: ") and all(len(line) <= 80 for line in lines)
    assert len(lines) > 1 and all(line.startswith(" " * len("stages: ")) for line in lines[1:])
    figures = [float(n) for n in re.findall(r"(\d+\.\d) s", " ".join(lines))]
    assert figures == [round(v, 1) for v in seconds.values()] + [round(sum(seconds.values()), 1)]


class _Tracker:
    """PySpark's StatusTracker, as far as Progress reads it: job groups, jobs and their stages."""

    def __init__(self):
        self.groups: dict[str, list[int]] = {}
        self.jobs: dict[int, list[int]] = {}
        self.stages: dict[int, SimpleNamespace] = {}
        self.active: set[int] = set()

    def job(self, group: str, job_id: int, stages: dict[int, tuple[int, int]]) -> None:
        """A job of ``group`` with stages {id: (tasks, completed)}."""
        self.groups.setdefault(group, []).append(job_id)
        self.jobs[job_id] = list(stages)
        for stage_id, (tasks, completed) in stages.items():
            self.stages[stage_id] = SimpleNamespace(stageId=stage_id, numTasks=tasks, numCompletedTasks=completed)

    def getJobIdsForGroup(self, group):
        return list(self.groups.get(group, []))

    def getJobInfo(self, job_id):
        return SimpleNamespace(jobId=job_id, stageIds=self.jobs[job_id], status="RUNNING")

    def getStageInfo(self, stage_id):
        return self.stages.get(stage_id)

    def getActiveStageIds(self):
        return sorted(self.active)


def test_the_progress_line_counts_the_directory_the_indexing_tasks_write():
    from dissector.spark import tasks

    assert INDEXED_DIR == tasks.INDEXED
    assert os.path.basename(os.path.dirname(tasks.indexed_file("/out/" + INDEXED_DIR, 4))) == INDEXED_DIR
    assert tasks.indexed_file("d", 4).endswith(".arrow")


def _progress(tmp_path, files=2, partitions=3) -> Progress:
    return Progress(None, Console(io.StringIO(), live=False), str(tmp_path), files, partitions)


def _counts(line: str) -> tuple[str, int, int]:
    step, done, total = re.match(r"(\w+): \D*(\d+)/(\d+)", line).groups()
    return step, int(done), int(total)


def test_progress_follows_the_latest_step_and_counts_files_indexed_or_partitions(tmp_path):
    tracker, progress = _Tracker(), _progress(tmp_path, files=3)
    assert progress.line(tracker) is None  # no step yet
    # index: a task per core, so the files its tasks wrote are counted, not the tasks
    tracker.job("index", 0, {0: (1, 0)})
    tracker.active = {0}
    assert _counts(progress.line(tracker)) == ("index", 0, 3)
    indexed = tmp_path / INDEXED_DIR
    indexed.mkdir()
    (indexed / "file-1.arrow").write_bytes(b"rows")
    (indexed / "file-0.arrow.tmp").write_bytes(b"a task still writing")
    assert _counts(progress.line(tracker)) == ("index", 1, 3)
    for no in (0, 2):
        (indexed / f"file-{no}.arrow").write_bytes(b"rows")
    tracker.stages[0].numCompletedTasks, tracker.active = 1, set()
    assert _counts(progress.line(tracker)) == ("index", 3, 3)
    # count: a join's shuffle (8 tasks) is not the partitions' stage; nothing of 3 tasks ran yet
    tracker.job("count", 1, {1: (8, 8), 2: (3, 0)})
    tracker.active = {2}
    assert _counts(progress.line(tracker)) == ("count", 0, 3)


def test_progress_counts_the_stage_that_does_the_work_not_a_quick_one_beside_it(tmp_path):
    """Adaptive execution runs a step as several jobs whose stages may have as many tasks as the step's work:
    materialising a cached table before it, counting it after. The stage found running longest is counted."""
    tracker, progress = _Tracker(), _progress(tmp_path)
    tracker.job("decode", 5, {10: (3, 0), 11: (3, 0)})
    tracker.active = {10}  # a quick stage first
    progress.line(tracker)
    tracker.stages[10].numCompletedTasks, tracker.active = 3, {11}  # then the work, read many times
    for done in range(3):
        tracker.stages[11].numCompletedTasks = done
        assert _counts(progress.line(tracker)) == ("decode", done, 3)
    tracker.stages[11].numCompletedTasks = 3
    assert _counts(progress.line(tracker)) == ("decode", 3, 3)
    tracker.job("decode", 6, {12: (3, 0), 13: (3, 0)})  # counting the cached table, and a skipped stage
    tracker.active = {12}
    assert _counts(progress.line(tracker)) == ("decode", 3, 3)


def test_progress_counts_the_frames_written_while_decoding(tmp_path):
    """The tasks' notes of the frames they have written so far, summed, while their Parquet files are open."""
    from dissector.spark import tasks

    tracker, progress = _Tracker(), _progress(tmp_path)
    tracker.job("decode", 0, {0: (3, 1)})
    assert re.search(r"frames written (\d+)", progress.line(tracker)).group(1) == "0"  # none noted yet
    notes = tmp_path / PROGRESS_DIR
    notes.mkdir()
    tasks._note_frames(str(notes / "decode-0"), 5)
    tasks._note_frames(str(notes / "decode-1"), 7)
    (notes / "decode-2.tmp").write_text("999")  # being replaced
    (notes / "decode-3").write_text("")  # caught empty: nothing yet
    assert re.search(r"frames written (\d+)", progress.line(tracker)).group(1) == "12"
    tasks._note_frames(str(notes / "decode-1"), 70_000)  # a task's later row group, the same file
    assert re.search(r"frames written ([\d,]+)", progress.line(tracker)).group(1) == "70,005"
    assert PROGRESS_DIR == tasks.PROGRESS


def test_progress_ignores_the_jobs_of_an_earlier_run_on_the_same_session(tmp_path):
    tracker, progress = _Tracker(), _progress(tmp_path)
    tracker.job("tables", 7, {20: (1, 1)})
    progress.console.live = True
    progress._stop.set()  # its thread ends at once: the readings are this test's
    with progress:
        progress.attach(SimpleNamespace(statusTracker=lambda: tracker), 3)  # Spark up once the run began
        tracker.job("index", 8, {21: (2, 0)})
        assert _counts(progress.line(tracker)) == ("index", 0, 2)


def test_progress_while_spark_starts_counts_the_files_the_prepass_indexed(tmp_path):
    """In local mode the input is indexed while the JVM starts (``prepass.py``): the line says so, then, once
    Spark is up and no job of it began, the index step's files."""
    tracker = _Tracker()
    progress = Progress(None, Console(io.StringIO(), live=False), str(tmp_path), 3, 2,
                        starting="starting Spark on local[2]", indexing=True)
    assert re.match(r"starting Spark on local\[2\], files indexed 0/3 \(\d+ s\)$", progress.starting_line())
    (tmp_path / INDEXED_DIR).mkdir()
    (tmp_path / INDEXED_DIR / "file-1.arrow").write_bytes(b"rows")
    assert "files indexed 1/3" in progress.starting_line()
    assert _counts(progress.line(tracker)) == ("index", 1, 3)  # Spark up, waiting for the prepass
    tracker.job("decode", 0, {0: (2, 0)})
    assert _counts(progress.line(tracker)) == ("decode", 0, 2)
    quiet = Progress(None, Console(io.StringIO(), live=False), str(tmp_path), 3, 2)  # a cluster: no prepass
    assert quiet.line(tracker) is not None and quiet.starting_line() is None
