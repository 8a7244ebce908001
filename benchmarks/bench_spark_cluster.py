#!/usr/bin/env python3
"""`pulsar-dissect pipeline` on a real standalone cluster on 127.0.0.1: one worker of one core against two
workers of one core each, on the same rotated input, in one run.

    .venv/bin/python benchmarks/bench_spark_cluster.py --repeat 3            # bench_spark.py's default input
    .venv/bin/python benchmarks/bench_spark_cluster.py CAPTURE --copies 1 --pieces 4   # the capture in 4 files
    .venv/bin/python benchmarks/bench_spark_cluster.py --repeat 3 --executor-archive   # executors map a class archive

The master and the workers are the pyspark package's own (`spark-class ...Master`, `...Worker --cores 1`),
started afresh for each row; the driver runs here in client mode (`--master spark://...`), the executors in
the workers' JVMs (`spark.executor.cores=1`, `spark.executor.memory` as given). Each row is a fresh
`pulsar-dissect pipeline` process, the JVM's start included. Printed: seconds (median), frames, and the
two-worker speed-up, of the whole command and of the decoding stage alone. `--executor-archive`: the executors
map a class archive (AppCDS) that a first one-worker job's executor wrote as it exited (docs/SPARK.md, "Running
on a cluster": an operator's option, which the job cannot set up on machines it does not own). Not a test: on
a machine of two cores the driver, the master and two executors share them; compare within one run. Results
also go to benchmarks/out/spark_cluster.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
sys.path.insert(0, str(ROOT))
CLI = [str(Path(sys.executable).parent / "pulsar-dissect")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.2)
    return False


class Cluster:
    """A standalone master and `workers` workers of one core each, on 127.0.0.1, logs under `logs`."""

    def __init__(self, workers: int, memory: str, logs: Path):
        import pyspark

        self.home = os.path.dirname(pyspark.__file__)
        self.env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, SPARK_HOME=self.home)
        self.workers, self.memory, self.logs = workers, memory, logs
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")
        process = subprocess.Popen([os.path.join(self.home, "bin", "spark-class"), *args], env=self.env,
                                   stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def __enter__(self) -> str:
        self.logs.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                               "--webui-port", str(_free_port())])
        if not _wait_port(port, 120):
            raise SystemExit(f"the master did not start: {(self.logs / 'master.log').read_text()[-2000:]}")
        url = f"spark://127.0.0.1:{port}"
        for n in range(self.workers):
            worker_port = _free_port()
            self._start(f"worker{n}", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--port",
                                       str(worker_port), "--webui-port", str(_free_port()), "--cores", "1",
                                       "--memory", self.memory])
            if not _wait_port(worker_port, 120):
                raise SystemExit(f"worker {n} did not start: {(self.logs / f'worker{n}.log').read_text()[-2000:]}")
        time.sleep(2)  # the workers register with the master
        return url

    def __exit__(self, *exc) -> None:
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def run_pipeline(url: str, pieces: Path, out: Path, memory: str, java_options: str | None = None) -> dict:
    argv = CLI + ["pipeline", str(pieces), "--out", str(out), "--master", url, "--json",
                  "--conf", "spark.executor.cores=1", "--conf", f"spark.executor.memory={memory}"]
    if java_options is not None:
        argv += ["--conf", f"spark.executor.extraJavaOptions={java_options}"]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"pipeline on {url} failed ({done.returncode}): {done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    return {"wall_s": wall, "frames": summary["frames"], "stages": summary.get("stages")}


def _executor_command(home: str) -> list[str] | None:
    """The java command line of the newest executor the workers of the Spark at ``home`` started (its stderr's
    first line)."""
    apps = sorted(Path(home, "work").glob("app-*"), key=lambda p: p.stat().st_mtime)
    for log in sorted(apps[-1].glob("*/stderr")) if apps else []:
        first = log.read_text(errors="replace").splitlines()[:1]
        if first and first[0].startswith("Spark Executor Command: "):
            return shlex.split(first[0][len("Spark Executor Command: "):])
    return None


def executor_archive(memory: str) -> str:
    """The executors' JVM options with a class archive: made (once per Spark, java and options) by a one-worker
    job on the shipped captures whose executor writes it as it exits; kept only if a JVM with the executors'
    class path maps it (a file cut short, by a kill during the writing, would crash the JVMs that map it)."""
    import pyspark

    from dissector.spark.classes import QUIET, _java
    from dissector.spark.job import JAVA_OPTIONS

    java = _java()
    key = f"{pyspark.__version__}\0{os.path.realpath(pyspark.__file__)}\0{java}\0{JAVA_OPTIONS}"
    archive = OUT / f"executor-classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"
    options = f"{JAVA_OPTIONS} -XX:SharedArchiveFile={archive} {QUIET}"
    if archive.exists():
        return options
    writing = archive.with_suffix(".writing")
    writing.unlink(missing_ok=True)
    out = OUT / "spark_cluster_archive_tables"
    shutil.rmtree(out, ignore_errors=True)
    captures = ROOT / "captures"
    logs = OUT / "spark_cluster_logs" / "archive"
    with Cluster(1, memory, logs) as url:
        run_pipeline(url, captures, out, memory, f"{JAVA_OPTIONS} -XX:ArchiveClassesAtExit={writing} {QUIET}")
        # the worker stops the executor once the job ended (SIGTERM: the JVM writes the archive as it exits); the
        # worker stopped first left no file in a trial (and a kill while it writes would leave half of one)
        deadline = time.monotonic() + 120
        while ("finished with state" not in (logs / "worker0.log").read_text(errors="replace")
               and time.monotonic() < deadline):
            time.sleep(0.2)
    shutil.rmtree(out, ignore_errors=True)
    command = _executor_command(os.path.dirname(pyspark.__file__))  # the workers' Spark (``Cluster.home``)
    classpath = command[command.index("-cp") + 1] if command and "-cp" in command else None
    if classpath is None or not writing.exists():
        raise SystemExit("--executor-archive: the executor wrote no class archive")
    check = subprocess.run([java, "-Xshare:on", f"-XX:SharedArchiveFile={writing}", *JAVA_OPTIONS.split(),
                            "-cp", classpath, "-version"], capture_output=True, text=True)
    if check.returncode != 0:
        writing.unlink(missing_ok=True)
        raise SystemExit(f"--executor-archive: the executors' archive cannot be mapped: {check.stdout[-1000:]}")
    os.replace(writing, archive)
    return options


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?", default=str(OUT / "perf_big.pcap"))
    ap.add_argument("--copies", type=int, default=None,
                    help="copies of the capture's traffic, as bench_spark.py makes them (default: its default input, "
                         "as many as make 2.93 GB)")
    ap.add_argument("--piece-mb", type=float, default=256, help="rotate the copies every this many MB (default 256)")
    ap.add_argument("--pieces", type=int, default=4, help="with --copies 1: cut the capture into this many files")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--executor-memory", default="1g")
    ap.add_argument("--executor-archive", action="store_true",
                    help="the executors map a class archive an executor of a first job wrote (made once)")
    ap.add_argument("--json-out", default=str(OUT / "spark_cluster.json"))
    args = ap.parse_args()
    from benchmarks.bench_spark import cut, default_copies, fleet, fleet_home

    capture = Path(args.capture)
    if args.copies is None:
        args.copies = default_copies(capture)
    if args.copies > 1:  # the set bench_spark.py makes for the same arguments (made once)
        _, pieces_dir, _ = fleet(capture, args.copies, args.piece_mb, fleet_home(args.copies, args.piece_mb))
        what = f"{args.copies} copies of {capture} in pieces of {args.piece_mb:g} MB"
    else:
        pieces_dir = OUT / "spark_set"
        cut(capture, args.pieces, pieces_dir)
        what = f"{args.pieces} rotated files of {capture}"
    size = sum(p.stat().st_size for p in pieces_dir.iterdir() if p.is_file())
    java_options = executor_archive(args.executor_memory) if args.executor_archive else None
    out = OUT / "spark_cluster_tables"
    rows: dict[int, list[dict]] = {1: [], 2: []}
    for round_no in range(1, args.repeat + 1):
        for workers in (1, 2):
            shutil.rmtree(out, ignore_errors=True)
            with Cluster(workers, args.executor_memory, OUT / "spark_cluster_logs" / f"{workers}w") as url:
                row = run_pipeline(url, pieces_dir, out, args.executor_memory, java_options)
            rows[workers].append(row)
            print(f"  [{round_no}/{args.repeat}] {workers} worker(s) of 1 core  {row['wall_s']:.1f} s  "
                  f"{row['frames']:,} frames  stages {row['stages']}", flush=True)
    median = {w: statistics.median(r["wall_s"] for r in rs) for w, rs in rows.items()}
    decode = {w: statistics.median(r["stages"]["number_and_decode"] for r in rs) for w, rs in rows.items()}
    frames = {w: {r["frames"] for r in rs} for w, rs in rows.items()}
    print(f"\ninput: {what} ({size / 1e6:.1f} MB); median of {args.repeat}; load {os.getloadavg()[0]:.2f}"
          + ("; the executors map a class archive" if java_options else ""))
    print(f"one worker of one core:   {median[1]:.1f} s")
    print(f"two workers of one core:  {median[2]:.1f} s   speed-up {median[1] / median[2]:.2f}x")
    print(f"the decoding stage alone: {decode[1]:.1f} s against {decode[2]:.1f} s   {decode[1] / decode[2]:.2f}x "
          "(the executors' start is inside it)")
    print(f"frames: {frames[1]} and {frames[2]}" + ("  they agree" if frames[1] == frames[2] else "  THEY DIFFER"))
    Path(args.json_out).write_text(json.dumps({"input": what, "bytes": size, "rows": rows, "median_s": median,
                                               "speedup": median[1] / median[2], "decode_median_s": decode,
                                               "executor_archive": bool(java_options), "load": os.getloadavg()[0]},
                                              indent=1))


if __name__ == "__main__":
    main()
