"""The first reading of a job's input on the driver's machine, while Spark starts.

The driver waits for Spark's start (its JVM and context: about a second on one core; on a cluster, then the
executors' JVMs and Python workers: seconds more), and its machine's other cores are idle meanwhile. A
process of its own (``python -m dissector.spark.prepass``; a thread would hold the interpreter's lock through
the engine's calls, which the JVM's start needs) reads the input once in that time: the index that
``tasks.index_files`` makes (the same files under DIR/_index) and, when the job may have several partitions,
the count of every connection at once in capture order (``tasks.count_numbers`` of slot ``tasks.WHOLE``, under
DIR/_numbering), which ``tasks.number_whole`` shares out once the plan is made. The job's index and count
stages (two Spark jobs, and a reading of the input per partition for the count) are then one reading that
Spark's start hides. The driver lists the input already and reads what the tasks write under DIR, so it
reaches both. In local mode it always runs; on a cluster only for an input of at most ``CLUSTER_BYTES``, which
it reads in about the executors' start (a larger one is read faster by the executors' index and count
stages, in parallel). Whenever it fails, the job keeps its Spark stages (``job.run``).
"""
from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys

from dissector.options import Options

#: A master of local mode, and its cores: local, local[N], local[*], local[N,F], local[*,F].
LOCAL_MASTER = re.compile(r"local(?:\[(\d+|\*)(?:,\d+)?\])?")

#: The largest input read by the driver on a cluster: about 1.1 s of index and count in one reading on this
#: project's machine (2 GB in 0.53 s), within the 2–3 s its executors took to start (docs/SPARK.md).
CLUSTER_BYTES = 4 << 30

#: The file under DIR where the process takes its arguments, and where it says what it did.
ARGUMENTS = "_prepass.pickle"
LOG = "_prepass.log"

#: The process's niceness: Spark's start, which the job waits for, takes the cores first.
NICENESS = 10


def local_cores(master: str) -> int | None:
    """The cores (Spark's default parallelism) of a local ``master``; None for any other master."""
    matched = LOCAL_MASTER.fullmatch(master.strip())
    if matched is None:
        return None
    cores = matched.group(1)
    if cores is None:
        return 1
    if cores == "*":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, int(cores))


class Prepass:
    """The reading started by ``start``: ``wait`` for what it made."""

    def __init__(self, process: subprocess.Popen, files: list[str], out: str, counted: bool, made_out: bool = False):
        self.process, self.files, self.out, self.counted = process, files, out, counted
        self.made_out = made_out  # ``out`` did not exist before: a job that never ran leaves none
        self.waited = False
        self.failed = False  # waited for, and it ended with an error: its log stays for the user to read

    def wait(self) -> bool:
        """Whether the index (and, if ``counted``, the count of the whole input) is written; False when the
        process failed (the job makes them in Spark instead: what it said stays in DIR/_prepass.log)."""
        done = self.process.wait() == 0
        self.waited, self.failed = True, not done
        for name in (ARGUMENTS, LOG) if done else (ARGUMENTS,):
            try:
                os.remove(os.path.join(self.out, name))
            except OSError:
                pass
        return done

    def cancel(self) -> None:
        """Stop it, if the job did not wait for it (Spark did not start, the job failed first): what it wrote
        is removed, and ``out`` if it made it."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.waited:
            return
        import shutil

        from dissector.spark import tasks

        for name in (tasks.INDEXED, tasks.NUMBERING):
            shutil.rmtree(os.path.join(self.out, name), ignore_errors=True)
        for name in (ARGUMENTS, LOG):
            try:
                os.remove(os.path.join(self.out, name))
            except OSError:
                pass
        if self.made_out:
            try:
                os.rmdir(self.out)
            except OSError:
                pass  # something else is in it


def start(master: str, files: list[str], out: str, options: Options, partitions: int | None) -> Prepass | None:
    """The reading of ``files`` for a job on ``master`` writing under ``out``, started now; None when the job
    should index and count in Spark (a cluster's input larger than ``CLUSTER_BYTES``). ``partitions``: the
    job's, when given; else one per core of the master (``job.default_partitions``): with one, nothing needs
    counting (a cluster's cores are known once its executors are up: counted)."""
    cores = local_cores(master)
    if cores is None and _size(files) > CLUSTER_BYTES:
        return None
    from dissector.spark import tasks

    out = os.path.abspath(out)
    made_out = not os.path.exists(out)
    os.makedirs(out, exist_ok=True)
    counted = (partitions or cores or 2) > 1
    with open(os.path.join(out, ARGUMENTS), "wb") as arguments:
        pickle.dump({"files": files, "options": options, "counted": counted,
                     "indexed": os.path.join(out, tasks.INDEXED),
                     "numbering": os.path.join(out, tasks.NUMBERING)}, arguments)
    with open(os.path.join(out, LOG), "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "dissector.spark.prepass", os.path.join(out, ARGUMENTS)],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    return Prepass(process, list(files), out, counted, made_out)


def _size(files: list[str]) -> int:
    total = 0
    for path in files:
        try:
            total += os.path.getsize(path)
        except OSError:
            pass  # unreadable: its index row says so
    return total


def read(files: list[str], options: Options, indexed: str, numbering: str | None) -> None:
    """Index ``files`` into ``indexed``; with ``numbering``, count every connection of them at once there, in
    the same reading: the files in capture order by their first packets' times (``capture_order``), checked
    against the plan's order once indexed (a file whose first packet read differently: counted again in the
    plan's order, a second reading)."""
    import shutil

    from dissector.spark import plan as planning
    from dissector.spark import tasks

    for into in (indexed, numbering):
        if into is not None:
            shutil.rmtree(into, ignore_errors=True)
            os.makedirs(into)
    if numbering is None:
        for _ in tasks.index_files([list(enumerate(files))], options=options, into=indexed):
            pass
        return
    read_in = tasks.index_and_count(files, capture_order(files), options, indexed, numbering)
    whole = planning.make(tasks.read_index(indexed, len(files)), files, 1)
    planned = [(path, offset) for path, offset in zip(whole.files.column("path").to_pylist(),
                                                      whole.files.column("offset").to_pylist())]
    if planned != read_in:
        shutil.rmtree(numbering)
        os.makedirs(numbering)
        for _ in tasks.count_numbers([(tasks.WHOLE, whole.work[0][1])], options=options, into=numbering):
            pass


def capture_order(files: list[str]) -> list[int]:
    """The numbers of ``files`` in capture order as the plan orders them (``plan.make``): by their first
    packet's time, files without one last, then by path."""
    from dissector.capture.files import open_capture

    def first_time(path: str) -> float | None:
        try:
            with open_capture(path) as reader:
                for packet in reader:
                    return packet.timestamp
        except Exception:  # what the index will say of it; a wrong guess only costs the second reading
            return None
        return None

    times = [first_time(path) for path in files]
    return sorted(range(len(files)), key=lambda no: (times[no] is None, times[no] or 0.0, files[no]))


def main(arguments_path: str) -> int:
    try:
        os.nice(NICENESS)  # the JVM's start first: this reading takes the cores it leaves
    except OSError:
        pass
    with open(arguments_path, "rb") as arguments:
        given = pickle.load(arguments)
    read(given["files"], given["options"], given["indexed"], given["numbering"] if given["counted"] else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
