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


#: The files whose reading went wrong that the summary lists by name (all are in `problems`).
FILE_PROBLEMS_LISTED = 100

#: The tables, in the order they are written.
TABLES = ("frames", "messages", "exchanges", "problems", "files")


def write(spark, parts: list[str], files, notes, missing: list[str], out: str, stages=None) -> dict:
    """Write the tables under ``out`` and ``out``/summary.json; returns the summary. ``parts``: the decoding
    tasks' parts of the summary; ``stages`` (``job.Stages``): told when each is done."""
    done = stages.done if stages is not None else (lambda stage: None)
    from pyspark.sql import functions as F

    # the decoding tasks wrote frames, messages, exchanges, events, and the problems of frames and events
    file_problems = (files.filter("ended_id is not null")
                     .select(F.col("ended_id").alias("id"),
                             F.when(F.col("ended_id") == "capture.unreadable", "error").otherwise("warning").alias("severity"),
                             F.col("ended").alias("message"), *_nulls(F), F.col("path").alias("file")))
    note_problems = notes.select(F.col("note_id").alias("id"), F.lit("note").alias("severity"),
                                 F.col("note").alias("message"), *_nulls(F), F.col("path").alias("file"))
    missing_problems = spark.createDataFrame(
        [("capture.unreadable", "error", f"{item}: no such file, directory or match", item) for item in missing],
        "id string, severity string, message string, file string").select(
            "id", "severity", "message", *_nulls(F), "file")
    problems = file_problems.unionByName(note_problems).unionByName(missing_problems)
    problems.write.mode("append").parquet(os.path.join(out, "problems"))

    files.select("order", "path", "packets", "first_time", "size", "offset", "ended_id", "ended") \
        .write.mode("overwrite").parquet(os.path.join(out, "files"))

    done("problems_and_files")
    summary = summarize(parts, files, notes, missing)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=False)
    done("summary")
    return summary


def _nulls(F):
    return (F.lit(None).cast("string").alias("protocol"), F.lit(None).cast("long").alias("frame"),
            F.lit(None).cast("long").alias("conn"), F.lit(None).cast("double").alias("time"),
            F.lit(None).cast("long").alias("packet"), F.lit(None).cast("string").alias("frame_type"))


def summarize(parts: list[str], files, notes, missing: list[str]) -> dict:
    """What ``stats`` tells, merged from the decoding tasks' parts (the engine's statistics of each task's
    connections, ``crates/engine/src/stats/summary.rs``): no table of frames or messages is read again. The
    files' figures come from the index (a row per file), which Spark holds already."""
    from pyspark.sql import functions as F

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
    file_figures = files.agg(F.count(F.lit(1)).alias("files"), F.coalesce(F.sum("packets"), F.lit(0)).alias("packets"),
                             F.coalesce(F.sum("size"), F.lit(0)).alias("bytes"),
                             F.sum(F.when(F.col("ended_id") == "capture.unreadable", 1).otherwise(0)).alias("unreadable"),
                             F.sum(F.when(F.col("ended_id") == "capture.truncated", 1).otherwise(0)).alias("truncated")).first()
    file_problems = [row.asDict() for row in files.filter("ended_id is not null").orderBy("order")
                     .select("path", F.col("ended_id").alias("id"), F.col("ended").alias("message"))
                     .limit(FILE_PROBLEMS_LISTED).collect()]
    # problems: the tasks' (the frames' findings, the events') and the index's (files' endings, readers' notes)
    problem_counts = {}
    for (pid, severity), n in merged["problems"]:
        problem_counts[(pid, severity)] = problem_counts.get((pid, severity), 0) + n
    for row in files.filter("ended_id is not null").groupBy("ended_id").count().collect():
        severity = "error" if row["ended_id"] == "capture.unreadable" else "warning"
        problem_counts[(row["ended_id"], severity)] = problem_counts.get((row["ended_id"], severity), 0) + row["count"]
    for row in notes.groupBy("note_id").count().collect():
        problem_counts[(row["note_id"], "note")] = problem_counts.get((row["note_id"], "note"), 0) + row["count"]
    if missing:
        key = ("capture.unreadable", "error")
        problem_counts[key] = problem_counts.get(key, 0) + len(missing)
    problems = [{"id": pid, "severity": severity, "count": n}
                for (pid, severity), n in sorted(problem_counts.items(), key=lambda kv: (-kv[1], kv[0][0]))]
    return {
        "files": file_figures.asDict(),
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
