"""`pulsar-dissect pipeline` on Apache Spark (local mode, and a standalone master started here): its tables
equal what the CLI decodes of the same captures, a capture cut into rotated pieces gives what the whole gives,
and bad input becomes rows in `problems`, never a failed job.

The expectations are the CLI's own output for the same files (the pipeline must be the same decoder, so the
CLI is the reference), read through `dissector.run.analysed_json_lines`, and the input files themselves (their
packet counts, as the capture reader reads them)."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ORACLE_MISSING
from dissector.capture.files import open_capture
from dissector.capture.writer import write_rotated
from dissector.options import Options
from dissector.run import analysed_json_lines

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
CLI = [sys.executable, "-m", "dissector.cli.main"]

pq = pytest.importorskip("pyarrow.parquet", reason=ORACLE_MISSING + "pyarrow (pip install 'pulsar-dissect[spark]')")


def _java_ok() -> bool:
    try:
        return subprocess.run(["java", "-version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def spark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip(ORACLE_MISSING + "pyspark (pip install 'pulsar-dissect[spark]')")
    if not _java_ok():
        pytest.skip(ORACLE_MISSING + "a Java runtime (apt-get install default-jre-headless)")
    from dissector.spark import job

    context = job.start("local[2]")  # a SparkContext: the job runs RDD tasks only
    yield context
    context.stop()


def _cli_records(path) -> tuple[list[str], list[dict]]:
    """The CLI's frame lines (as written) and all its records, for one capture."""
    lines, records = [], []
    for item in analysed_json_lines(str(path)):
        if type(item) is bytes:
            for line in item.decode().splitlines():
                lines.append(line)
                records.append(json.loads(line))
        else:
            records.append(item)
    return lines, records


def _cli_event_lines(path) -> list[str]:
    """The lines the CLI's ``--json`` writes for the events of one capture (every record without an index), as
    written, in order."""
    done = subprocess.run(CLI + [str(path), "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if "index" not in json.loads(line)]


def _run(spark, inputs, out, partitions=3, with_json=False, first_reading="spark") -> dict:
    """``job.run`` with its index and count made by Spark's tasks (``first_reading="spark"``: a cluster's way)
    or by the local-mode prepass on the driver's machine (``"prepass"``, as the CLI runs on ``local[N]``)."""
    from dissector.capture.inputs import expand
    from dissector.spark import job, prepass

    inputs = [str(i) for i in inputs]
    started = None
    if first_reading == "prepass":
        started = prepass.start("local[2]", expand(inputs)[0], str(out), Options(), partitions)
        assert started is not None and started.counted == (partitions > 1)
    summary = job.run(spark, inputs, str(out), partitions=partitions, with_json=with_json, prepass=started)
    assert not any(name.startswith("_") for name in os.listdir(out)), "the job's working files are left"
    return summary


def _table(out, name) -> dict:
    return pq.read_table(os.path.join(out, name)).to_pydict()


def _frame_lines(out) -> list[str]:
    frames = _table(out, "frames")
    assert len(set(frames["index"])) == len(frames["index"]), "a frame index twice"
    return [line for _, line in sorted(zip(frames["index"], frames["json"]))]


#: Frame columns compared with the CLI's records: typed as the record has them; objects as JSON text.
FRAME_KEYS = ("index", "protocol", "time", "conn", "src", "dst", "direction", "packet", "first_packet", "type",
              "size", "payload_size", "uncompressed_size", "encrypted", "serial", "answers", "latency_ms",
              "request_type", "checksum")
FRAME_OBJECTS = ("command", "metadata", "problems")


def _frame_rows(out) -> list[tuple]:
    """The frames table's rows, in frame order, as (keys..., objects parsed)."""
    frames = _table(out, "frames")
    assert "json" not in frames, "no record lines unless asked"
    assert len(set(frames["index"])) == len(frames["index"]), "a frame index twice"
    rows = zip(*(frames[k] for k in FRAME_KEYS), *(frames[k] for k in FRAME_OBJECTS))
    return sorted(tuple(row[:len(FRAME_KEYS)]) + tuple(None if t is None else json.loads(t) for t in row[len(FRAME_KEYS):])
                  for row in rows)


def _cli_frame_rows(records) -> list[tuple]:
    return sorted(tuple(r.get(k) for k in FRAME_KEYS) + tuple(r.get(k) for k in FRAME_OBJECTS)
                  for r in records if "index" in r)


# the corpus captures that cover what differs: batches, chunks in a gzipped file, many connections,
# shared subscriptions, failover, and TubeMQ
PARITY = ["02_batching_props_keys.pcap", "04_chunking.pcap.gz", "11_errors.pcap", "09_shared.pcap",
          "09_failover.pcap", "tubemq/tubemq_consumer_broker.pcap", "tubemq/tubemq_producer_broker.pcap"]


# what a partition finds only when it holds every connection involved (another connection's Exclusive consumer)
SPANS_CONNECTIONS = {"SUBSCRIBE_HELD_AT_END"}


def _assert_summary_is_stats(summary: dict, path) -> None:
    """The summary, merged from the decoding tasks' statistics (no table read again), against `stats --json`
    of the same capture: what both tell is equal; the latencies exactly while `exact`."""
    done = subprocess.run(CLI + ["stats", str(path), "--json"], capture_output=True, text=True, timeout=300)
    stats = json.loads(done.stdout)
    assert summary["frames"] == stats["frames"]
    assert summary["types"] == stats["types"]
    assert (summary["first_time"], summary["last_time"]) == (stats["first_time"], stats["last_time"])
    figures = ("count", "p50", "p90", "p99", "max", "mean")
    assert all(row["exact"] for row in summary["latency_ms"]), "few values: exact"
    assert {row["request_type"]: [row[k] for k in figures] for row in summary["latency_ms"]} == \
        {kind: [row[k] for k in figures] for kind, row in stats["latency_ms"].items()}
    assert {t["topic"]: (t["messages_sent"], t["messages_received"]) for t in summary["topics"]} == \
        {topic: (t["messages_sent"], t["messages_received"]) for topic, t in stats["topics"].items()}
    findings = {}
    for finding in stats["expert"]:
        findings[(finding["id"], finding["severity"])] = finding["count"]
    problems = {(p["id"], p["severity"]): p["count"] for p in summary["problems"]}
    assert {key: problems.get(key) for key in findings} == findings


def _message_id_fields(value):
    """A record's message id as the messages table's struct holds it: an object's keys (ledger_id, entry_id,
    partition, batch_index), or one integer in ``id`` (TubeMQ's); null otherwise."""
    names = ("ledger_id", "entry_id", "partition", "batch_index")
    if isinstance(value, dict):
        return {**{name: value.get(name) for name in names}, "id": None}
    if isinstance(value, int) and not isinstance(value, bool):
        return {**dict.fromkeys(names), "id": value}
    return None


@pytest.mark.parametrize("name", PARITY)
def test_frames_and_messages_equal_the_cli(spark, tmp_path, name):
    path = CAPTURES / name
    assert path.exists(), path
    summary = _run(spark, [path], tmp_path)
    want_lines, want = _cli_records(path)
    assert want_lines, "the CLI found frames"
    assert _frame_rows(tmp_path) == _cli_frame_rows(want)

    # messages: each frame record's messages, in order, expanded here from the CLI's records
    frames = [r for r in want if "index" in r]
    expected = sorted((r["index"], pos, m.get("payload_sha256"), m.get("payload_size"),
                       json.dumps(_message_id_fields(m.get("message_id")), sort_keys=True),
                       json.dumps(m.get("properties") or {}, sort_keys=True))
                      for r in frames for pos, m in enumerate(r.get("messages") or []))
    got = _table(tmp_path, "messages")
    rows = sorted((f, pos, None if sha is None else sha.hex(), size, json.dumps(mid, sort_keys=True),
                   json.dumps(props or {}, sort_keys=True))
                  for f, pos, sha, size, mid, props in zip(got["frame"], got["position"], got["payload_sha256"],
                                                           got["payload_size"], got["message_id"], [
                                                               json.loads(p) if p is not None else None for p in got["properties"]]))
    assert rows == expected
    assert summary["messages"] == len(expected)
    assert summary["frames"] == len(frames)
    _assert_summary_is_stats(summary, path)

    # exchanges: every record that answers a request, with its latency
    want_pairs = sorted((r["answers"], r["index"], r.get("request_type"), r.get("latency_ms"))
                        for r in frames if r.get("answers") is not None)
    ex = _table(tmp_path, "exchanges")
    assert sorted(zip(ex["request_frame"], ex["response_frame"], ex["request_type"], ex["latency_ms"])) == want_pairs
    by_index = {r["index"]: r for r in frames}
    for request, request_time, request_packet in zip(ex["request_frame"], ex["request_time"], ex["request_packet"]):
        assert (request_time, request_packet) == (by_index[request]["time"], by_index[request]["packet"])
    for response, response_time, response_packet, conn in zip(ex["response_frame"], ex["response_time"],
                                                              ex["response_packet"], ex["conn"]):
        assert (response_time, response_packet, conn) == tuple(by_index[response][k] for k in ("time", "packet", "conn"))

    # problems: every finding of every frame, by id and frame
    want_found = sorted((e["id"], r["index"]) for r in frames for e in r.get("expert") or [])
    problems = _table(tmp_path, "problems")
    got_found = sorted((i, f) for i, f in zip(problems["id"], problems["frame"]) if f is not None)
    assert got_found == want_found
    # and the events of a severity worse than a note (but those that span connections, which a partition finds
    # only when it holds every connection involved: docs/SPARK.md)
    want_events = sorted(r["type"] for r in want if "index" not in r and r.get("severity") in ("warning", "error")
                         and r["type"] not in SPANS_CONNECTIONS)
    got_events = sorted(i for i, f, file in zip(problems["id"], problems["frame"], problems["file"])
                        if f is None and file is None and i not in SPANS_CONNECTIONS)
    assert got_events == want_events

    # events: each of the CLI's, with its connection and severity (its packet and time may differ: a partition's
    # clock is its own packets', docs/SPARK.md), its columns those of its line
    events = _table(tmp_path, "events")
    want_kinds = sorted((r["type"], r.get("conn"), r["severity"]) for r in want
                        if "index" not in r and r["type"] not in SPANS_CONNECTIONS)
    got_kinds = sorted((t, c, s) for t, c, s in zip(events["type"], events["conn"], events["severity"])
                       if t not in SPANS_CONNECTIONS)
    assert got_kinds == want_kinds
    for row, line in enumerate(events["json"]):
        record = json.loads(line)
        assert [record.get(k) for k in ("packet", "type", "time", "conn", "severity", "message")] == \
            [events[k][row] for k in ("packet", "type", "time", "conn", "severity", "message")]


@pytest.mark.parametrize("first_reading", ["spark", "prepass"])
def test_rotated_pieces_give_what_the_whole_gives(spark, tmp_path, first_reading):
    path = CAPTURES / "11_errors.pcap"  # 14 connections: the cuts fall inside several of them
    pieces_dir = tmp_path / "pieces"
    pieces_dir.mkdir()
    pieces = write_rotated(path, pieces_dir, "rotated.pcap", {40, 41, 120, 200})
    assert len(pieces) == 5
    want_lines, want = _cli_records(path)
    # named in a shuffled order, and as a directory: the files are put in time order; the records' lines kept
    _run(spark, [pieces[3], pieces[0], pieces[4], pieces[2], pieces[1]], tmp_path / "a", with_json=True,
         first_reading=first_reading)
    assert _frame_lines(tmp_path / "a") == want_lines
    # one partition (every connection read by one task), and more partitions than connections
    _run(spark, [pieces_dir], tmp_path / "b", partitions=1, first_reading=first_reading)
    assert _frame_rows(tmp_path / "b") == _cli_frame_rows(want)
    # one task's events are the CLI's, their lines byte for byte (those with a connection and a severity)
    events = _table(tmp_path / "b", "events")
    assert events["order"] == list(range(len(events["order"])))
    want_events = _cli_event_lines(path)
    assert events["json"] == want_events
    assert any('"conn"' in line and '"warning"' in line for line in want_events)
    files = _table(tmp_path / "b", "files")
    assert sorted(files["order"]) == [1, 2, 3, 4, 5]
    assert sum(files["packets"]) == 239 == sum(1 for _ in open_capture(str(path)))
    ordered = [p for _, p in sorted(zip(files["order"], files["path"]))]
    assert [Path(p).name for p in ordered] == [p.name for p in pieces]
    _run(spark, [pieces_dir], tmp_path / "c", partitions=20, first_reading=first_reading)
    assert _frame_rows(tmp_path / "c") == _cli_frame_rows(want)


@pytest.mark.parametrize("first_reading", ["spark", "prepass"])
def test_bad_input_is_rows_not_a_failed_job(spark, tmp_path, first_reading):
    good = CAPTURES / "09_shared.pcap"
    data = (CAPTURES / "09_failover.pcap").read_bytes()  # recorded at another time: other connections
    truncated = tmp_path / "truncated.pcap"
    truncated.write_bytes(data[: len(data) // 2 + 7])  # cut inside a record
    garbage = tmp_path / "garbage.pcap"
    garbage.write_bytes(b"this is not a capture file at all" * 10)
    empty_gz = tmp_path / "empty.pcap.gz"
    with gzip.open(empty_gz, "wb"):
        pass
    summary = _run(spark, [good, truncated, garbage, empty_gz, tmp_path / "missing.pcap"], tmp_path / "out",
                   first_reading=first_reading)
    problems = _table(tmp_path / "out", "problems")
    by_file = {}
    for pid, file in zip(problems["id"], problems["file"]):
        if file is not None:
            by_file.setdefault(os.path.basename(file), set()).add(pid)
    assert by_file["truncated.pcap"] == {"capture.truncated"}
    assert by_file["garbage.pcap"] == {"capture.unreadable"}
    assert by_file["empty.pcap.gz"] == {"capture.unreadable"}
    assert by_file["missing.pcap"] == {"capture.unreadable"}
    assert summary["files"]["unreadable"] == 2 and summary["files"]["truncated"] == 1
    assert summary["missing_inputs"] == [str(tmp_path / "missing.pcap")]
    assert {os.path.basename(p["path"]) for p in summary["file_problems"]} == {"truncated.pcap", "garbage.pcap", "empty.pcap.gz"}
    # the good file's frames are all there, and those of the truncated one's first half
    frames = _table(tmp_path / "out", "frames")
    assert summary["frames"] == len(frames["index"]) == len(_cli_records(good)[0]) + len(_cli_records(truncated)[0])


@pytest.mark.parametrize("master, cores", [("local", 1), ("local[3]", 3), ("local[2,4]", 2), ("local[*]", None),
                                           ("spark://127.0.0.1:7077", "not local"), ("local-cluster[2,1,1024]", "not local"),
                                           ("yarn", "not local")])
def test_local_masters_and_their_cores(master, cores):
    from dissector.spark.prepass import local_cores

    if cores is None:
        assert local_cores(master) == len(os.sched_getaffinity(0))
    elif cores == "not local":
        assert local_cores(master) is None
    else:
        assert local_cores(master) == cores


def test_a_cluster_s_driver_reads_first_only_an_input_it_reads_in_the_executors_start(tmp_path, monkeypatch):
    """On a cluster the prepass runs for an input of at most ``CLUSTER_BYTES`` (counted: the partitions are
    known once the executors are up); a larger one is indexed and counted by the executors, in parallel."""
    from dissector.spark import prepass

    files = [str(CAPTURES / "09_shared.pcap")]
    small = prepass.start("spark://127.0.0.1:7077", files, str(tmp_path / "a"), Options(), None)
    assert small is not None and small.counted and small.wait()
    assert (tmp_path / "a" / "_index" / "file-0.arrow").exists()
    monkeypatch.setattr(prepass, "CLUSTER_BYTES", os.path.getsize(files[0]) - 1)
    assert prepass.start("spark://127.0.0.1:7077", files, str(tmp_path / "b"), Options(), None) is None
    local = prepass.start("local[1]", files, str(tmp_path / "c"), Options(), None)  # local: any size; one core
    assert local is not None and not local.counted and local.wait()


def test_the_prepass_reads_once_in_capture_order_and_again_when_its_order_was_not_the_plan_s(spark, tmp_path,
                                                                                           monkeypatch):
    """The prepass indexes and counts in one reading, the files in the order of their first packets' times; when
    that order is not the plan's (a first packet read otherwise than the index reads it), the count is made
    again in the plan's order: the tables are the CLI's either way."""
    from dissector.spark import job, prepass, tasks

    path = CAPTURES / "11_errors.pcap"
    pieces_dir = tmp_path / "pieces"
    pieces_dir.mkdir()
    write_rotated(path, pieces_dir, "rotated.pcap", {40, 41, 120, 200})
    files = sorted(str(p) for p in pieces_dir.iterdir())[::-1]  # named out of order
    want = _cli_frame_rows(_cli_records(path)[1])
    assert [files[no] for no in prepass.capture_order(files)] == sorted(files, key=lambda p: (len(p), p))
    real, recounted = tasks.count_numbers, []

    def count_numbers(*args, **kwargs):
        recounted.append(1)
        yield from real(*args, **kwargs)

    monkeypatch.setattr(tasks, "count_numbers", count_numbers)
    for name, readings in (("in_order", []), ("wrong_order", [1])):
        if name == "wrong_order":  # the files as named: the reverse of their time order
            monkeypatch.setattr(prepass, "capture_order", lambda files: list(range(len(files))))
        out = tmp_path / name
        os.makedirs(out)
        prepass.read(files, Options(), str(out / tasks.INDEXED), str(out / tasks.NUMBERING))
        assert recounted == readings, name
        done = prepass.Prepass(subprocess.Popen([sys.executable, "-c", "pass"]), files, str(out), counted=True)
        job.run(spark, files, str(out), partitions=3, prepass=done)
        assert _frame_rows(out) == want, name


def test_a_failed_prepass_leaves_the_first_reading_to_spark(spark, tmp_path):
    """A prepass that failed (its process ended with an error), or one that read other files than the job's,
    is not used: Spark's tasks index and count, and the tables are the CLI's still."""
    from dissector.spark import job, prepass

    path = CAPTURES / "11_errors.pcap"
    pieces_dir = tmp_path / "pieces"
    pieces_dir.mkdir()
    write_rotated(path, pieces_dir, "rotated.pcap", {40, 120})
    files = sorted(str(p) for p in pieces_dir.iterdir())
    failed = prepass.Prepass(subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]), files,
                             str(tmp_path / "a"), counted=True)
    os.makedirs(tmp_path / "a")
    job.run(spark, [str(pieces_dir)], str(tmp_path / "a"), partitions=3, prepass=failed)
    want = _cli_frame_rows(_cli_records(path)[1])
    assert _frame_rows(tmp_path / "a") == want
    other = prepass.start("local[2]", files[:1], str(tmp_path / "b"), Options(), 3)
    job.run(spark, [str(pieces_dir)], str(tmp_path / "b"), partitions=3, prepass=other)
    assert _frame_rows(tmp_path / "b") == want


def _env_with_sitecustomize(tmp_path, code: str) -> dict:
    """This environment with a ``sitecustomize`` of ``code`` first on ``PYTHONPATH``: run by every Python the
    command starts (skipped without pyspark or Java)."""
    pytest.importorskip("pyspark", reason=ORACLE_MISSING + "pyspark")
    if not _java_ok():
        pytest.skip(ORACLE_MISSING + "a Java runtime")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(code)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))}


def test_the_command_says_when_its_first_reading_failed(tmp_path):
    """A prepass that fails is replaced by Spark's stages (the tables are whole), and the command says so on
    standard error, naming the log it kept; a run whose prepass worked says nothing and keeps no log."""
    # only the prepass's process ends at once, with an error
    failing = _env_with_sitecustomize(
        tmp_path, "import sys\nif 'dissector.spark.prepass' in getattr(sys, 'orig_argv', []):\n    raise SystemExit(3)\n")
    capture = CAPTURES / "11_errors.pcap"
    runs = {}
    for name, env in (("failed", failing), ("worked", dict(os.environ))):
        out = tmp_path / name
        runs[name] = subprocess.run(CLI + ["pipeline", str(capture), "--out", str(out), "--master", "local[2]",
                                           "--json"], capture_output=True, text=True, timeout=600, env=env)
        assert runs[name].returncode == 0, runs[name].stderr[-3000:]
    log = tmp_path / "failed" / "_prepass.log"
    assert log.is_file() and str(log) in runs["failed"].stderr
    assert runs["worked"].stderr == "" and not (tmp_path / "worked" / "_prepass.log").exists()
    want = _cli_frame_rows(_cli_records(capture)[1])
    assert _frame_rows(tmp_path / "failed") == want == _frame_rows(tmp_path / "worked")
    assert json.loads(runs["failed"].stdout)["frames"] == json.loads(runs["worked"].stdout)["frames"] == len(want)


def test_spark_that_cannot_start_is_an_error_and_leaves_no_output(tmp_path):
    """No Java where JAVA_HOME says: the command says it cannot start Spark (exit 2), and the prepass it began
    meanwhile is stopped, its files and the output directory it made removed."""
    pytest.importorskip("pyspark", reason=ORACLE_MISSING + "pyspark")
    out = tmp_path / "out"
    done = subprocess.run(CLI + ["pipeline", str(CAPTURES / "09_shared.pcap"), "--out", str(out), "--master", "local[2]"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JAVA_HOME": str(tmp_path / "no-java")})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot start Spark on local[2]" in done.stderr
    assert not out.exists()


def test_a_failed_spark_job_is_one_line_and_exit_2(tmp_path):
    """A task that fails (here: a module the workers' Python cannot import, as on an executor without
    pulsar-dissect) ends the command with exit 2 and one line naming the task's exception, not the driver's
    traceback of py4j's error (which ended it with exit 1, the code that says problems were found); no summary,
    no working files."""
    # only the Spark workers' daemon (and the workers it forks) cannot import the decoding tasks' module
    env = _env_with_sitecustomize(
        tmp_path,
        "import sys\n"
        "if 'dissector.spark.daemon' in getattr(sys, 'orig_argv', []):\n"
        "    class NoTasks:\n"
        "        def find_spec(self, name, path=None, target=None):\n"
        "            if name == 'dissector.spark.tasks':\n"
        "                raise ModuleNotFoundError('not on this executor', name=name)\n"
        "    sys.meta_path.insert(0, NoTasks())\n")
    out = tmp_path / "out"
    done = subprocess.run(CLI + ["pipeline", str(CAPTURES / "11_errors.pcap"), "--out", str(out), "--master",
                                 "local[1]"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.splitlines()[-1]
    assert last.startswith("pulsar-dissect pipeline: ") and "ModuleNotFoundError" in last, done.stderr[-3000:]
    assert "Py4JJavaError" not in done.stderr and done.stdout == ""
    assert not (out / "summary.json").exists()
    assert not [name for name in os.listdir(out) if name.startswith("_")], os.listdir(out)


def test_a_failed_job_s_line_is_the_task_s_last_exception():
    from dissector.spark.job import failure

    class Py4JJavaError(Exception):  # py4j's error's text: the call, then the JVM's, with the worker's traceback
        pass

    text = ("An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
            ": org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from the "
            "Python worker: Traceback (most recent call last):\n  File \"worker.py\", line 1, in main\n    x()\n"
            "OSError: [Errno 30] Read-only file system: '/out/frames'\n\nDuring handling of the above exception, "
            "another exception occurred:\n\nTraceback (most recent call last):\n  File \"tasks.py\", line 2\n"
            "    y()\nRuntimeError: the tables cannot be written\n\n\tat org.apache.spark.Thing.run(Thing.scala:1)\n")
    assert failure(Py4JJavaError(text)) == "RuntimeError: the tables cannot be written"
    assert failure(Py4JJavaError("An error occurred while calling o1.collect.\n: java.lang.OutOfMemoryError: "
                                 "Java heap space\n\tat x")) == "java.lang.OutOfMemoryError: Java heap space"
    assert failure(KeyError("a fault of the driver's own code")) is None


def test_the_command_line(tmp_path):
    pytest.importorskip("pyspark", reason=ORACLE_MISSING + "pyspark")
    if not _java_ok():
        pytest.skip(ORACLE_MISSING + "a Java runtime")
    out = tmp_path / "out"
    done = subprocess.run(CLI + ["pipeline", str(CAPTURES / "02_batching_props_keys.pcap"), "--out", str(out),
                                 "--master", "local[1]", "--json", "--conf", "spark.sql.shuffle.partitions=2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    stages_printed = summary.pop("stages")  # --json: the seconds per stage in the JSON, not on standard error
    assert summary == json.loads((out / "summary.json").read_text())
    # quiet: no progress line off a terminal, no warning of Spark's or the JVM's, and with --json the stages are
    # in the JSON: nothing at all on standard error
    assert done.stderr == ""
    _, records = _cli_records(CAPTURES / "02_batching_props_keys.pcap")
    frames = [r for r in records if "index" in r]
    assert summary["frames"] == len(frames)
    sent = sum(len(r.get("messages") or []) for r in frames if r["type"] == "SEND")
    assert [t["messages_sent"] for t in summary["topics"]] == [sent]
    for name in ("frames", "messages", "exchanges", "problems", "files"):
        assert (out / name).is_dir()
    # zstd where it takes something out (texts, floats), nothing on what is packed already or random (the
    # dictionaries' keys, delta-encoded integers, the digests); every column chunk of the tasks' files
    codecs = {}
    for part in (out / "messages").glob("part-0*.parquet"):
        meta = pq.ParquetFile(part).metadata
        for group in range(meta.num_row_groups):
            for at in range(meta.num_columns):
                chunk = meta.row_group(group).column(at)
                codecs.setdefault(chunk.path_in_schema, set()).add(chunk.compression)
    assert codecs["properties"] == codecs["time"] == {"ZSTD"}
    assert codecs["payload_sha256"] == codecs["frame"] == codecs["message_id.entry_id"] == codecs["topic"] == {
        "UNCOMPRESSED"}
    # where the run's time went: every stage, in order, and together no more than the whole run
    stages = json.loads((out / "stages.json").read_text())
    assert stages_printed == stages
    assert list(stages) == ["spark_start", "index", "plan_and_count", "number_and_decode", "problems_and_files",
                            "summary", "spark_stop"]
    assert all(seconds >= 0 for seconds in stages.values()) and stages["number_and_decode"] > 0
    bad = subprocess.run(CLI + ["pipeline", str(tmp_path / "nothing-*.pcap"), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    bad = subprocess.run(CLI + ["pipeline", str(CAPTURES / "09_shared.pcap"), "--out", str(out), "--conf", "novalue"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr


#: What Spark and the JVM print as they start (the marks of it, not their sentences): WARN and WARNING lines, log4j's
#: profile note and "Setting default log level", the native-hadoop loader, the UI's port.
SPARK_CHATTER = re.compile(r"WARN|log4j|[Ll]og level|NativeCodeLoader|native-hadoop|SparkUI|port 40\d\d")


def _on_a_terminal(argv: list[str], timeout: float = 600) -> tuple[int, str, str]:
    """Run ``argv`` with its standard error on a pseudo-terminal and its standard output on a pipe: the exit
    code, the standard output, and what the terminal was sent (its line feeds without the terminal's CR)."""
    import pty
    import threading

    controller, terminal = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    shown = bytearray()

    def read():
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the command, its last writer, exited
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()  # read as it comes: a full terminal buffer would block the command
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
        reader.join(30)
        os.close(controller)
    return proc.returncode, stdout.decode(), shown.decode(errors="replace").replace("\r\n", "\n")


def _stages_printed(text: str) -> dict[str, float]:
    """The seconds of the stages line (``stages: start 3.1 s, index 1.2 s, ...``, folded), by short name."""
    folded = " ".join(text[text.index("stages: "):].split())
    return {name: float(seconds) for name, seconds in re.findall(r"(\w+) (\d+\.\d) s", folded)}


def test_the_command_line_on_a_terminal_shows_its_progress_then_the_stages_and_no_warning(tmp_path):
    """Standard error on a terminal: a progress line rewritten in place (a step, its tasks done of all, within 80
    columns), cleared at the end; then the seconds per stage; no warning of Spark's or the JVM's. The summary on
    standard output has none of it."""
    pytest.importorskip("pyspark", reason=ORACLE_MISSING + "pyspark")
    if not _java_ok():
        pytest.skip(ORACLE_MISSING + "a Java runtime")
    out = tmp_path / "out"
    code, stdout, shown = _on_a_terminal(CLI + ["pipeline", str(CAPTURES / "09_shared.pcap"), "--out", str(out),
                                                "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=2"])
    assert code == 0, shown[-3000:]
    assert "\r" not in stdout and "stages:" not in stdout and stdout.startswith("files 1 ")
    progress, _, end = shown.rpartition("stages: ")
    drawn = [piece for piece in progress.split("\r") if piece.strip()]
    assert drawn and all("\n" not in piece and len(piece) < 80 for piece in drawn)
    # local mode: the input indexed while Spark starts (the prepass), counted on the line
    assert drawn[0].startswith("starting Spark on local[1], files indexed ")
    indexed = [tuple(map(int, m)) for m in re.findall(r"files indexed (\d+)/(\d+)", "\n".join(drawn))]
    assert indexed and all(total == 1 for _, total in indexed), drawn  # one file
    assert re.search(r"\r +\r$", progress)  # the line erased before the stages line
    # none of what Spark and the JVM print as they start: warnings, log4j's notes, the native library, the UI
    assert [line for line in shown.splitlines() if SPARK_CHATTER.search(line)] == []
    stages = json.loads((out / "stages.json").read_text())
    assert list(_stages_printed("stages: " + end).values()) == [round(v, 1) for v in stages.values()] + [
        round(sum(stages.values()), 1)]


def test_the_command_line_verbose_lets_spark_and_the_jvm_speak_and_off_a_terminal_shows_no_progress(tmp_path):
    """``-v``: Spark logs at WARN and the JVM's start-up warnings come through. Standard error not a terminal:
    no progress line, but the stages line still, as stages.json has them."""
    pytest.importorskip("pyspark", reason=ORACLE_MISSING + "pyspark")
    if not _java_ok():
        pytest.skip(ORACLE_MISSING + "a Java runtime")
    from dissector.spark.console import is_noise

    out = tmp_path / "out"
    done = subprocess.run(CLI + ["pipeline", str(CAPTURES / "09_shared.pcap"), "--out", str(out), "-v",
                                 "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\r" not in done.stderr
    chatter = [line for line in done.stderr.splitlines() if is_noise(line)]
    assert any(" WARN " in line for line in chatter), done.stderr[-3000:]  # Spark's own, at WARN
    assert any(SPARK_CHATTER.search(line) for line in done.stderr.splitlines())  # what the quiet run must not show
    stages = json.loads((out / "stages.json").read_text())
    assert list(_stages_printed(done.stderr).values()) == [round(v, 1) for v in stages.values()] + [
        round(sum(stages.values()), 1)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, seconds: float) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.5)
    return False


def _sorted_rows(out, name) -> list[str]:
    """A table's rows as JSON text, sorted: equal for two runs that wrote the same rows in any files."""
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in pq.read_table(os.path.join(out, name)).to_pylist())


def _standalone_master(logs):
    """A standalone master from the pyspark package on 127.0.0.1 (skipped without pyspark or Java): its process,
    port, ``spark-class`` and the environment its workers and drivers run with; its log under ``logs``."""
    try:
        import pyspark
    except ImportError:
        pytest.skip(ORACLE_MISSING + "pyspark")
    if not _java_ok():
        pytest.skip(ORACLE_MISSING + "a Java runtime")
    spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
    master_port = _free_port()
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_HOME=os.path.dirname(pyspark.__file__))
    logs.mkdir()
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                               str(master_port), "--webui-port", str(_free_port())], env=env,
                              stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT)
    return master, master_port, spark_class, env


def _stopped(*processes) -> None:
    for process in processes:
        if process is not None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def test_a_standalone_master(tmp_path):
    """`--master spark://`: a standalone master from the pyspark package on 127.0.0.1, with one worker of one core,
    then with a second: the tables are the CLI's, and the same with either."""
    logs = tmp_path / "logs"
    master, master_port, spark_class, env = _standalone_master(logs)
    workers = []
    url = f"spark://127.0.0.1:{master_port}"

    def start_worker(name: str) -> None:
        port = _free_port()
        workers.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(_free_port()), "--cores", "1", "--memory", "1500m"], env=env,
            stdout=open(logs / f"{name}.log", "w"), stderr=subprocess.STDOUT))
        assert _wait_port(port, 120), (logs / f"{name}.log").read_text()[-3000:]

    def launched(name: str) -> bool:  # the worker ran an executor of the job: the tasks did not run in the driver
        text = (logs / f"{name}.log").read_text()
        return "Launching executor" in text or "Asked to launch executor" in text

    def pipeline(out) -> None:
        done = subprocess.run(CLI + ["pipeline", str(CAPTURES / "11_errors.pcap"), "--out", str(out), "--master", url,
                                     "--json", "--with-json", "--partitions", "4", "--conf", "spark.executor.memory=1g"],
                              capture_output=True, text=True, timeout=900, env=env)
        assert done.returncode == 0, done.stderr[-3000:] + (logs / "worker1.log").read_text()[-2000:]

    try:
        assert _wait_port(master_port, 120), (logs / "master.log").read_text()[-3000:]
        start_worker("worker1")
        pipeline(tmp_path / "one")
        assert _frame_lines(tmp_path / "one") == _cli_records(CAPTURES / "11_errors.pcap")[0]
        assert launched("worker1")
        start_worker("worker2")
        pipeline(tmp_path / "two")
        assert launched("worker2"), "the second worker's executor took part"
        for table in ("frames", "messages", "exchanges", "problems", "events", "files"):
            assert _sorted_rows(tmp_path / "two", table) == _sorted_rows(tmp_path / "one", table), table
    finally:
        _stopped(*workers, master)
        shutil.rmtree(tmp_path / "one", ignore_errors=True)
        shutil.rmtree(tmp_path / "two", ignore_errors=True)


def test_a_cluster_with_no_executor_ends_the_run(tmp_path):
    """A standalone master with no worker: Spark would wait for an executor without end, in silence; the run
    says what it waits for, then ends with exit 2 at --executor-wait, leaving no summary (not even an earlier
    run's) and none of its working files."""
    master, master_port, _, env = _standalone_master(tmp_path / "logs")
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")  # an earlier run's: it would describe tables this run left
    url = f"spark://127.0.0.1:{master_port}"
    try:
        assert _wait_port(master_port, 120), (tmp_path / "logs" / "master.log").read_text()[-3000:]
        done = subprocess.run(CLI + ["pipeline", str(CAPTURES / "11_errors.pcap"), "--out", str(out), "--master", url,
                                     "--executor-wait", "8"], capture_output=True, text=True, timeout=300, env=env)
    finally:
        _stopped(master)
    assert done.returncode == 2, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("pulsar-dissect pipeline: ")]
    assert len(said) == 2 and all(url in line and "--executor-wait" in line for line in said), done.stderr[-3000:]
    assert "spark.executor.memory" in said[1]  # what to check on the workers
    assert not (out / "summary.json").exists()
    assert not [name for name in os.listdir(out) if name.startswith("_")], os.listdir(out)


def test_the_engine_s_tables_reach_pyarrow_through_the_c_stream_interface():
    """The tables as the engine makes them (`crates/engine/src/tables.rs`, whose own tests hold every column
    against the JSON lines) reach Python as Arrow streams (`__arrow_c_stream__`), read by pyarrow with the
    engine's schema: typed columns, a digest as 32 bytes, objects as their JSON text, `json` only when asked."""
    import pyarrow as pa
    from dissector import _core as core

    records = [{"index": 1, "protocol": "pulsar", "time": 1.5, "type": "SEND", "command": {"topic": "t1"},
                "producer": {"id": 7, "topic": "persistent://t", "name": 'p\x07"'},
                "messages": [{"payload_size": 3, "payload_sha256": "ab" * 32, "properties": {"k": "v"}}]},
               {"index": 2, "time": 2.0, "answers": 1, "latency_ms": 0.5, "type": "SEND_RECEIPT"}]
    for with_json in (False, True):
        tables = {t.name: pa.table(t) for t in core.record_tables(records, with_json)}
        assert list(tables) == ["frames", "messages", "problems", "exchanges", "events"]
        assert tables["events"].num_rows == 0  # (records are no events)
        frames, messages = tables["frames"], tables["messages"]
        assert ("json" in frames.column_names) is with_json
        assert frames.schema.field("index").type == pa.int64() and frames.schema.field("time").type == pa.float64()
        assert frames.column("producer_name").to_pylist() == ['p\x07"', None]
        assert json.loads(frames.column("command")[0].as_py()) == {"topic": "t1"}
        assert messages.schema.field("payload_sha256").type == pa.binary(32)
        assert messages.column("payload_sha256").to_pylist() == [bytes([0xAB]) * 32]
        assert tables["exchanges"].column("request_frame").to_pylist() == [1]
        if with_json:
            assert [json.loads(line) for line in frames.column("json").to_pylist()] == records
    # a stream is read as often as asked
    batches = core.record_tables(records)[1]
    assert pa.table(batches).num_rows == pa.table(batches).num_rows == batches.num_rows == 1


def _notes_capture(tmp_path):
    # a corpus capture as pcapng with odd blocks between its packets (CAPTURE_NOTEs) and its last block cut
    # (CAPTURE_TRUNCATED): events without a connection, made in Python
    from test_read_batches import pcapng_with_notes_mid_file

    return pcapng_with_notes_mid_file(tmp_path)


@pytest.mark.parametrize("name", ["11_errors.pcap", "tubemq/tubemq_midstream.pcap", "notes"])
def test_a_decoding_task_s_events_are_the_cli_s_lines_made_by_the_engine(tmp_path, name):
    """The events as a decoding task makes them (the stage of ``tasks.decode``, outside Spark): every event in the
    engine's tables, none as a Python object; a row each, its ``json`` the line the CLI's ``--json`` writes for
    it, byte for byte, in order; those worse than a note also in ``problems`` and in the task's summary."""
    import collections

    import pyarrow as pa
    from dissector.analysis.conversation import analysed_dissector
    from dissector.options import Options
    from dissector.pipeline import read_file

    path = _notes_capture(tmp_path) if name == "notes" else CAPTURES / name
    stage = analysed_dissector(Options(), records="columns")
    assert list(read_file(str(path), stage, None, end=stage.finish)) == [], "every event in the tables"
    tables = {t.name: pa.table(t).to_pydict() for t in stage.take_columns()}
    events, lines = tables["events"], _cli_event_lines(path)
    assert events["json"] == lines
    records = [json.loads(line) for line in lines]
    assert events["order"] == list(range(len(records)))
    for key in ("type", "time", "packet", "conn", "severity", "message"):
        assert events[key] == [r.get(key) for r in records], key
    worse = [r for r in records if r["severity"] != "note"]
    problems = tables["problems"]
    keys = ("id", "severity", "message", "conn", "time", "packet")
    got = [tuple(problems[k][row] for k in keys) for row, frame in enumerate(problems["frame"]) if frame is None]
    assert got == [(r["type"], r["severity"], r["message"], r.get("conn"), r["time"], r["packet"]) for r in worse]
    summary = {tuple(key): n for key, n in json.loads(stage.take_summary())["problems"]}
    counted = collections.Counter((r["type"], r["severity"]) for r in worse)
    assert {key: summary.get(key) for key in counted} == counted
    kinds = {(r["type"], "conn" in r, r["severity"]) for r in records}
    if name == "notes":  # capture notes, without a connection, and a warning
        assert ("CAPTURE_NOTE", False, "note") in kinds and ("CAPTURE_TRUNCATED", False, "warning") in kinds
    else:  # with a connection, notes and warnings
        assert ("CONNECTION_OPENED", True, "note") in kinds and any(c and s == "warning" for _, c, s in kinds)


def test_summary_lines_escape_wire_strings_and_fit_80_columns():
    from dissector.spark import summary_lines

    hostile = "t\x1b[31m\u202e[/x]\x07"
    summary = {"files": {"files": 1, "bytes": 10, "packets": 2, "unreadable": 1, "truncated": 0},
               "frames": 3, "connections": 1, "messages": 1, "missing_inputs": ["/x/\x1b]0;t\x07"],
               "file_problems": [{"path": "/y\x1b[2J", "id": "capture.unreadable", "message": "bad\x9b"}],
               "types": {f"TYPE_{i} {hostile}": i for i in range(30)},
               "topics": [{"protocol": "pulsar", "topic": hostile, "messages_sent": 1, "bytes_sent": 2,
                           "messages_received": 0, "bytes_received": 0}],
               "latency_ms": [{"protocol": "pulsar", "request_type": hostile, "count": 1, "p50": 1, "p90": 1,
                               "p99": 1, "max": 1}],
               "problems": [{"id": hostile, "severity": "error", "count": 1}]}
    lines = summary_lines(summary)
    text = "\n".join(lines)
    for bad in ("\x1b", "\x07", "\u202e", "\x9b", "\x00"):
        assert bad not in text
    types = [line for line in lines if line.startswith(("types ", "      "))]
    assert len(types) > 3 and all(len(line) <= 80 or " " not in line.strip() for line in types)
    assert sum(line.count("TYPE_") for line in types) == 30
    # a topic's line with a long name and large counts folds between words, the counts kept whole
    long_topic = "persistent://public/default/orders-from-the-eu-west-warehouse-partition-12"
    summary["topics"] = [{"protocol": "pulsar", "topic": long_topic, "messages_sent": 12_345_678,
                          "bytes_sent": 9_876_543_210, "messages_received": 12_345_678,
                          "bytes_received": 9_876_543_210}]
    lines = summary_lines(summary)
    topic = lines[next(i for i, line in enumerate(lines) if line.startswith("topic ")):][:3]
    assert all(len(line) <= 80 for line in lines if " " in line.strip())
    assert topic[0].startswith("topic persistent://public/default/orders") and "9,876,543,210 B" in " ".join(topic)
    # a sketch's latencies to the microsecond, as stats shows them
    summary["latency_ms"] = [{"protocol": "pulsar", "request_type": "SEND", "count": 1_608_432,
                              "p50": 0.6375867049709382, "p90": 2.9742334234766927, "p99": 30.878629345564455,
                              "max": 50.957}]
    latency = " ".join(line.strip() for line in summary_lines(summary) if line.startswith(("latency", "    ")))
    assert "p50=0.638 p90=2.974 p99=30.879 max=50.957 ms" in latency


def test_workers_start_no_blas_threads(spark):
    """The Python workers import numpy (through pyarrow); its OpenBLAS would start a spinning thread per core in
    each of them: the session tells them to start none."""
    def probe(_):
        yield os.environ.get("OPENBLAS_NUM_THREADS")

    assert spark.parallelize([0], 1).mapPartitions(probe).collect() == ["1"]


def test_workers_import_pyspark_from_the_installed_package_not_from_spark_s_zip(spark):
    """Spark puts its pyspark.zip first on the workers' path, compiled from source at every daemon's start; with
    pip's pyspark the zip is the package's own copy, and the workers' daemon (``dissector.spark.daemon``) imports
    the package instead."""
    import pyspark

    def probe(_):
        import pyspark as worker_pyspark

        yield worker_pyspark.__file__

    (where,) = spark.parallelize([0], 1).mapPartitions(probe).collect()
    assert ".zip" not in where
    assert os.path.dirname(where) == os.path.dirname(pyspark.__file__)


def test_only_the_installed_pyspark_s_own_zip_is_moved_last(tmp_path):
    from dissector.spark.daemon import prefer_installed_pyspark

    site = tmp_path / "site-packages"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    own = str(site / "pyspark" / "python" / "lib" / "pyspark.zip")
    py4j = str(site / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip")
    other = str(tmp_path / "spark-4.0" / "python" / "lib" / "pyspark.zip")  # a cluster's Spark: kept first
    assert prefer_installed_pyspark([own, py4j, "", str(site)]) == [py4j, "", str(site), own]
    assert prefer_installed_pyspark([other, str(site)]) == [other, str(site)]
    assert prefer_installed_pyspark([own]) == [own]  # no package on the path to import instead


def test_stopping_does_not_wait_for_the_accumulator_server_s_poll():
    """pyspark's accumulator server polls once a second; ``job.stop`` tells it to stop and closes it on a thread
    of its own, so that ``SparkContext.stop`` does not wait for it."""
    import threading

    from dissector.spark.job import _stop_accumulator_server

    closed = threading.Event()

    class Server:
        server_shutdown = False

        def shutdown(self):
            closed.wait(5)  # as the real one does: until its handler's poll returns

    class Context:
        _accumulatorServer = Server()

    context, server = Context(), Context._accumulatorServer
    _stop_accumulator_server(context)
    assert server.server_shutdown is True and context._accumulatorServer is None  # returned without waiting
    closed.set()


def test_local_mode_jvm_compiles_and_collects_cheaply(spark):
    """In local mode the JVM shares the cores with the decoding workers: it runs with only the C1 compiler and
    the serial collector (job.JAVA_OPTIONS), as the running JVM itself reports."""
    from dissector.spark.job import JAVA_OPTIONS

    jvm = spark._jvm
    arguments = set(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(JAVA_OPTIONS.split()) <= arguments
    collectors = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    assert collectors == {"Copy", "MarkSweepCompact"}  # the serial collector's young and old generations


def test_the_class_archive_is_made_once_then_mapped_and_a_cut_one_is_made_again(tmp_path):
    """`pipeline` in local mode: the first run's JVM writes Spark's class archive as it exits (classes.py), put in
    place whole; the next run's JVM starts with it (it is not discarded: the same file stays); an archive cut
    short is removed and made again, never mapped (which would crash the JVM), and every run's tables are right."""
    pytest.importorskip("pyspark", reason=ORACLE_MISSING + "pyspark")
    if not _java_ok():
        pytest.skip(ORACLE_MISSING + "a Java runtime")
    from dissector.spark.classes import ClassArchive, cache_dir
    from dissector.spark.job import JAVA_OPTIONS

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    capture = CAPTURES / "01_basic_nonbatched.pcap"
    expected = len([r for r in _cli_records(capture)[1] if "index" in r])

    def run():
        out = tmp_path / "out"
        done = subprocess.run(CLI + ["pipeline", str(capture), "--out", str(out), "--master", "local[1]", "--json"],
                              capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout)["frames"] == expected
        return sorted(p.name for p in (tmp_path / "cache" / "pulsar-dissect").iterdir())

    def archive():
        os.environ["XDG_CACHE_HOME"], saved = env["XDG_CACHE_HOME"], os.environ.get("XDG_CACHE_HOME")
        try:
            made = ClassArchive(JAVA_OPTIONS)
            assert made.path.parent == cache_dir()
            return made
        finally:
            os.environ.pop("XDG_CACHE_HOME") if saved is None else os.environ.update(XDG_CACHE_HOME=saved)

    first = run()
    assert len(first) == 2 and first[0].endswith(".jsa") and first[1].endswith(".size")  # no lock, no part left
    path = tmp_path / "cache" / "pulsar-dissect" / first[0]
    made = path.stat()
    assert made.st_size == int(path.with_suffix(".size").read_text()) > 0
    assert run() == first
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (made.st_ino, made.st_mtime_ns)  # mapped, not made again

    cut = tmp_path / "cut"
    cut.write_bytes(path.read_bytes()[: made.st_size // 2])
    os.replace(cut, path)
    probe = archive()
    assert not probe.used and not path.exists()  # the check removed it; this probe took the lock to make it
    probe._lock.unlink()
    assert run() == first
    assert path.stat().st_size == int(path.with_suffix(".size").read_text())
    assert archive().used
    assert not list(tmp_path.glob("hs_err_pid*.log"))  # no JVM crashed


def test_the_class_archive_is_one_per_spark_installation(tmp_path, monkeypatch):
    """A JVM maps a class archive only with the classpath it was made with, and starts without it, silently, when
    the jars are elsewhere: the same Spark in two virtual environments gets two archives."""
    pyspark = pytest.importorskip("pyspark", reason=ORACLE_MISSING + "pyspark")
    if not _java_ok():
        pytest.skip(ORACLE_MISSING + "a Java runtime")
    from dissector.spark.classes import ClassArchive
    from dissector.spark.job import JAVA_OPTIONS

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    here = ClassArchive(JAVA_OPTIONS).path
    assert ClassArchive(JAVA_OPTIONS).path == here  # the same installation: the same archive
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "other-venv" / "pyspark" / "__init__.py"))
    elsewhere = ClassArchive(JAVA_OPTIONS).path
    assert here is not None and elsewhere is not None and elsewhere != here


@pytest.mark.parametrize("cores, expected", [(1, 1), (2, 2), (8, 8), (0, 1)])
def test_default_partitions_one_per_core(cores, expected):
    """Each further partition reads every file again; the least-loaded dealing balances without spares."""
    from types import SimpleNamespace

    from dissector.spark.job import default_partitions

    assert default_partitions(SimpleNamespace(defaultParallelism=cores)) == expected


def _corrupt_record(path: Path, record: int) -> None:
    """``path`` (a classic pcap) with its ``record``-th record's length made impossible: the reader stops there
    with ``capture file corrupt``, after the records before it."""
    data = bytearray(path.read_bytes())
    at = 24
    for _ in range(record - 1):
        at += 16 + int.from_bytes(data[at + 8:at + 12], "little")
    data[at + 8:at + 12] = (0x7FFF_FFFF).to_bytes(4, "little")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("first_reading", ["spark", "prepass"])
def test_a_file_corrupt_midway_is_numbered_as_one_task_numbers_it(spark, tmp_path, first_reading):
    """A file that stops on a corrupt record in its middle, between others: its frames before that record are
    in the tables, and every frame after it is numbered as one task reading the whole input in order numbers it
    (the count and the decoding read that file as far as each other)."""
    pieces_dir = tmp_path / "pieces"
    pieces_dir.mkdir()
    pieces = write_rotated(CAPTURES / "11_errors.pcap", pieces_dir, "rotated.pcap", {60, 140})
    assert len(pieces) == 3
    _corrupt_record(pieces[1], 30)
    with open_capture(str(pieces[1])) as reader:
        assert sum(1 for _ in reader) == 29 and "corrupt" in reader.truncated
    _run(spark, [pieces_dir], tmp_path / "one", partitions=1)  # one task: no count, numbered as it reads
    whole = _frame_rows(tmp_path / "one")
    summary = _run(spark, [pieces_dir], tmp_path / "three", partitions=3, first_reading=first_reading)
    assert _frame_rows(tmp_path / "three") == whole
    assert [(Path(p["path"]).name, p["id"]) for p in summary["file_problems"]] == \
        [(pieces[1].name, "capture.truncated")]
