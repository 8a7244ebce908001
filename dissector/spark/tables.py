"""The pipeline's tables, and its summary merged from the decoding tasks' statistics. ``frames``, ``messages``,
``exchanges`` and ``events`` are written by the decoding tasks (``rows.py``: one row per frame, the contract's
keys as columns; one row per application message; one row per response that answers a request, with both
frames and the latency; one row per event), and so are the problems of frames and events in ``problems``; the
rest is made here:
- ``problems``: every note of reading a file, every file that could not be read whole.
- ``files``: the input files, in the order they were read as one capture.
"""
from __future__ import annotations

import json
import os
import shutil


#: The files whose reading went wrong that the summary lists by name (all are in `problems`).
FILE_PROBLEMS_LISTED = 100

#: The tables, in the order they are written.
TABLES = ("frames", "messages", "exchanges", "problems", "files")

#: The summary's file under ``out``: written last, so a run that did not end has none (``job.run`` removes an
#: earlier run's first).
SUMMARY = "summary.json"


def unread(files, reads: list[tuple[str, int, str | None]],
           counted: list[tuple[str, int, str | None]] = ()) -> list[tuple[str, str, str, str]]:
    """The problems of the files a decoding task (``reads``) or a counting task (``counted``) read differently
    from the index (``files``: the files table): (path, id, severity, message), one a file, the decoding's
    first. Fewer packets: the task's machine could not open the file or read it as far (a path not mounted
    there, a file cut or removed since, a read error), and the tables lack the frames of the rest for that
    task's connections, or (a counting task) the frames after it are not numbered as the whole input's:
    ``capture.unreadable``, an error. More: the file grew after it was indexed (a capture still being written),
    and its frames past the packets indexed are not numbered as the whole input's: ``capture.changed``, a
    warning. A file read alike by every task is no problem, however its reading ended."""
    indexed = dict(zip(files.column("path").to_pylist(), files.column("packets").to_pylist()))
    lacks = {"decoding": "the tables lack what the rest held",
             "counting": "the frames after them are not numbered as the whole input's"}
    found = {}
    for task, (path, read, stopped) in [("decoding", r) for r in reads] + [("counting", r) for r in counted]:
        expected = indexed.get(path) or 0
        if read == expected or path in found:
            continue
        if read < expected:
            why = f" ({stopped})" if stopped else ""
            found[path] = ("capture.unreadable", "error",
                           f"a {task} task read {read:,} of its {expected:,} packets{why}: {lacks[task]}")
        else:
            found[path] = ("capture.changed", "warning",
                           f"{read:,} packets read where {expected:,} were indexed: it changed after it was "
                           f"indexed, and the frames of the packets past those are not numbered as the whole "
                           f"input's")
    return [(path, *problem) for path, problem in found.items()]


def write(parts: list[str], files, notes: list[tuple[str, str, str]], missing: list[str], out: str,
          stages=None, unread: list[tuple[str, str, str, str]] = ()) -> dict:
    """Write the tables under ``out`` and ``out``/summary.json; returns the summary. ``parts``: the decoding
    tasks' parts of the summary; ``files``: the files table (``plan.FILES``, in capture order); ``notes``: the
    readers' notes as (path, id, parameters); ``unread``: the files the decoding tasks read differently from
    the index (``unread``); ``stages`` (``job.Stages``): told when each is done. A few rows
    per file: written here with pyarrow, no Spark query (each was a job of its own)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from dissector.spark.rows import PROBLEMS

    done = stages.done if stages is not None else (lambda stage: None)
    # the decoding tasks wrote frames, messages, exchanges, events, and the problems of frames and events
    rows = {name: [] for name in PROBLEMS.names}

    def problem(pid: str, severity: str, message: str, file: str) -> None:
        for name, value in (("id", pid), ("severity", severity), ("message", message), ("file", file)):
            rows[name].append(value)
        for name in ("protocol", "frame", "conn", "time", "packet", "frame_type"):
            rows[name].append(None)

    for row in files.filter(pc.is_valid(files.column("ended_id"))).to_pylist():
        problem(row["ended_id"], "error" if row["ended_id"] == "capture.unreadable" else "warning", row["ended"],
                row["path"])
    for path, note_id, note in notes:
        problem(note_id, "note", note, path)
    for item in missing:
        problem("capture.unreadable", "error", f"{item}: no such file, directory or match", item)
    for path, pid, severity, message in unread:
        problem(pid, severity, message, path)
    if rows["id"]:
        pq.write_table(pa.Table.from_pydict(rows, schema=PROBLEMS), os.path.join(out, "problems", "part-files.parquet"))
    files_dir = os.path.join(out, "files")
    shutil.rmtree(files_dir, ignore_errors=True)
    os.makedirs(files_dir)
    pq.write_table(files, os.path.join(files_dir, "part-00000.parquet"))

    done("problems_and_files")
    summary = summarize(parts, files, notes, missing, unread)
    with open(os.path.join(out, SUMMARY), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=False)
    done("summary")
    return summary


def summarize(parts: list[str], files, notes: list[tuple[str, str, str]], missing: list[str],
              unread: list[tuple[str, str, str, str]] = ()) -> dict:
    """What ``stats`` tells, merged from the decoding tasks' parts (the engine's statistics of each task's
    connections, ``crates/engine/src/stats/summary.rs``): no table of frames or messages is read again. The
    files' figures come from the index (``files``: the files table, in capture order)."""
    from dissector import _core

    merged = json.loads(_core.merge_summaries(parts))
    protocols, types = {}, {}
    for (protocol, kind), n in merged["types"]:
        protocols[protocol] = protocols.get(protocol, 0) + n
        types[kind] = types.get(kind, 0) + n
    topics, producers, consumers = {}, {}, {}
    messages = 0
    for g, figures in merged["messages"]:
        n, payload, frames = figures["messages"], figures["payload"], figures["frames"]
        messages += n
        # whether a client sent or received them, as the engine asked the frame's protocol
        sent, received = g["sent"] is True, g["sent"] is False
        if g["topic"] is not None:
            t = topics.setdefault((g["protocol"], g["topic"]), {
                "protocol": g["protocol"], "topic": g["topic"], "messages_sent": 0, "bytes_sent": [],
                "messages_received": 0, "bytes_received": []})
            t["messages_sent"] += n if sent else 0
            t["messages_received"] += n if received else 0
            # as SQL's sum(when(sent, payload_size).otherwise(0)): null only when every group's is null
            t["bytes_sent"].append(payload if sent else 0)
            t["bytes_received"].append(payload if received else 0)
        for wanted, key, name, into in ((sent, "producer_id", "producer_name", producers),
                                        (received, "consumer_id", "subscription", consumers)):
            if wanted and g[key] is not None:
                a = into.setdefault((g["conn"], g[key], g[name], g["topic"]), {
                    "conn": g["conn"], key: g[key], name: g[name], "topic": g["topic"], "messages": 0, "frames": 0,
                    "payload_bytes": 0})
                a["messages"] += n
                a["frames"] += frames
                a["payload_bytes"] += payload or 0

    for t in topics.values():
        for key in ("bytes_sent", "bytes_received"):
            known = [v for v in t[key] if v is not None]
            t[key] = sum(known) if known else None

    def in_order(items: dict, keys: int) -> list:
        return [items[k] for k in sorted(items, key=lambda k: tuple((v is not None, v) for v in k[:keys]))]

    latency_rows = [{"protocol": row["protocol"], "request_type": row["request_type"], "count": row["count"],
                     "p50": row["p50"], "p90": row["p90"], "p99": row["p99"], "max": row["max"],
                     "mean": round(row["mean"], 3), "exact": row["exact"]}
                    for row in merged["latency"]]
    file_rows = files.to_pylist()
    ended = [row for row in file_rows if row["ended_id"] is not None]
    # as Spark SQL's sums gave them: over no files, a count of the unreadable or truncated is null
    counted = (lambda wanted: sum(row["ended_id"] == wanted for row in file_rows)) if file_rows else (lambda _: None)
    file_figures = {"files": len(file_rows), "packets": sum(row["packets"] or 0 for row in file_rows),
                    "bytes": sum(row["size"] or 0 for row in file_rows),
                    # the files the index could not read, and those a decoding task could not (``unread``)
                    "unreadable": (counted("capture.unreadable") + sum(pid == "capture.unreadable"
                                                                       for _, pid, _, _ in unread)
                                   if file_rows else None),
                    "truncated": counted("capture.truncated")}
    file_problems = ([{"path": row["path"], "id": row["ended_id"], "message": row["ended"]} for row in ended]
                     + [{"path": path, "id": pid, "message": message} for path, pid, _, message in unread])
    file_problems = file_problems[:FILE_PROBLEMS_LISTED]
    # problems: the tasks' (the frames' findings, the events') and the index's (files' endings, readers' notes)
    problem_counts = {}
    for (pid, severity), n in merged["problems"]:
        problem_counts[(pid, severity)] = problem_counts.get((pid, severity), 0) + n
    for row in ended:
        severity = "error" if row["ended_id"] == "capture.unreadable" else "warning"
        problem_counts[(row["ended_id"], severity)] = problem_counts.get((row["ended_id"], severity), 0) + 1
    for _, note_id, _ in notes:
        problem_counts[(note_id, "note")] = problem_counts.get((note_id, "note"), 0) + 1
    if missing:
        key = ("capture.unreadable", "error")
        problem_counts[key] = problem_counts.get(key, 0) + len(missing)
    for _, pid, severity, _ in unread:
        problem_counts[(pid, severity)] = problem_counts.get((pid, severity), 0) + 1
    problems = [{"id": pid, "severity": severity, "count": n}
                for (pid, severity), n in sorted(problem_counts.items(), key=lambda kv: (-kv[1], kv[0][0]))]
    return {
        "files": file_figures,
        "file_problems": file_problems,
        "frames": merged["frames"],
        "connections": merged["connections"],
        "first_time": merged["first_time"],
        "last_time": merged["last_time"],
        "protocols": dict(sorted(protocols.items(), key=lambda kv: (kv[0] is not None, kv[0]))),
        "types": dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0] is not None, kv[0]))),
        "messages": messages,
        "topics": in_order(topics, 2),
        "producers": in_order(producers, 2),
        "consumers": in_order(consumers, 2),
        "latency_ms": latency_rows,
        "latency_error": {"exact_values": merged["latency_exact_values"],
                          "relative_error": merged["latency_relative_error"]},
        "problems": problems,
        "missing_inputs": missing,
    }
