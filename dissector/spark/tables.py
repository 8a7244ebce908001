"""The pipeline's tables and the summary computed from them, in Spark SQL. ``frames``, ``messages`` and
``exchanges`` are written by the decoding tasks (``rows.py``: one row per frame, the contract's keys as columns
and ``json`` the whole record; one row per application message; one row per response that answers a request,
with both frames and the latency), and so are the frames' findings in ``problems``; the rest is made here:
- ``problems``: besides the frames' findings, every event with a severity, every note of reading a file.
- ``files``: the input files, in the order they were read as one capture.
"""
from __future__ import annotations

import json
import os

EVENT_SCHEMA = "type string, time double, packet long, message string, severity string, conn long"

#: The files whose reading went wrong that the summary lists by name (all are in `problems`).
FILE_PROBLEMS_LISTED = 100

#: The tables, in the order they are written.
TABLES = ("frames", "messages", "exchanges", "problems", "files")


def write(spark, events, files, notes, missing: list[str], out: str, stages=None) -> dict:
    """Write the tables under ``out`` and ``out``/summary.json; returns the summary. ``stages``
    (``job.Stages``): told when each is done."""
    done = stages.done if stages is not None else (lambda stage: None)
    from pyspark.sql import functions as F

    # the decoding tasks wrote frames, messages, exchanges and the frames' findings (rows.py)
    events = (events.select(F.from_json("json", EVENT_SCHEMA).alias("e"))
              .filter("e.severity is not null and e.severity != 'note'")
              .select(F.col("e.type").alias("id"), "e.severity", "e.message", F.lit(None).cast("string").alias("protocol"),
                      F.lit(None).cast("long").alias("frame"), "e.conn", "e.time", "e.packet",
                      F.lit(None).cast("string").alias("frame_type"), F.lit(None).cast("string").alias("file")))
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
    # the frames' findings are there already (the decoding tasks wrote them: rows.py)
    problems = events.unionByName(file_problems).unionByName(note_problems).unionByName(missing_problems)
    problems.write.mode("append").parquet(os.path.join(out, "problems"))

    files.select("order", "path", "packets", "first_time", "size", "offset", "ended_id", "ended") \
        .write.mode("overwrite").parquet(os.path.join(out, "files"))

    done("problems_and_files")
    summary = summarize(spark, out)
    summary["missing_inputs"] = missing
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=False)
    done("summary")
    return summary


def _nulls(F):
    return (F.lit(None).cast("string").alias("protocol"), F.lit(None).cast("long").alias("frame"),
            F.lit(None).cast("long").alias("conn"), F.lit(None).cast("double").alias("time"),
            F.lit(None).cast("long").alias("packet"), F.lit(None).cast("string").alias("frame_type"))


#: The message types that are sent (to the broker) and received (from it), per protocol.
SENT = ("SEND", "SendMessageRequestP2B")
RECEIVED = ("MESSAGE", "GetMessageResponseB2C")


def summarize(spark, out: str) -> dict:
    """What ``stats`` tells, computed in Spark from the tables under ``out``; small, so collected. One query
    per table (each is a pass over its files): the aggregates come back grouped finely, and the summary's
    lists are their sums."""
    from pyspark.sql import functions as F

    def table(name):
        return spark.read.parquet(os.path.join(out, name))

    def rows(frame):
        return [row.asDict(recursive=True) for row in frame.collect()]

    frames, messages, exchanges, problems, files = (table(name) for name in TABLES)
    # frames: one pass, per (protocol, type, connection); the summary's figures from those groups (few: kept)
    per_conn = (frames.groupBy("protocol", "type", "conn")
                .agg(F.count(F.lit(1)).alias("n"), F.min("time").alias("first_time"), F.max("time").alias("last_time"))
                .persist())
    overall = per_conn.agg(F.coalesce(F.sum("n"), F.lit(0)).alias("n"), F.min("first_time").alias("first_time"),
                           F.max("last_time").alias("last_time"), F.countDistinct("conn").alias("connections")).first()
    protocols, types = {}, {}
    for r in rows(per_conn.groupBy("protocol", "type").agg(F.sum("n").alias("n"))):
        protocols[r["protocol"]] = protocols.get(r["protocol"], 0) + r["n"]
        types[r["type"]] = types.get(r["type"], 0) + r["n"]
    per_conn.unpersist()

    # messages: per (protocol, topic, type, connection, producer, consumer); a frame's messages share all of
    # these, and a frame's first message is at position 0 (the core writes every message as an object), so
    # the frames of each group are its rows at position 0 and add up across groups
    groups = rows(messages.groupBy("protocol", "topic", "type", "conn", "producer_id", "producer_name", "consumer_id",
                                   "subscription")
                  .agg(F.count(F.lit(1)).alias("n"), F.sum("payload_size").alias("payload"),
                       F.count(F.when(F.col("position") == 0, 1)).alias("frames")))
    topics, producers, consumers = {}, {}, {}
    for g in groups:
        sent, received = g["type"] in SENT, g["type"] in RECEIVED
        if g["topic"] is not None:
            t = topics.setdefault((g["protocol"], g["topic"]), {
                "protocol": g["protocol"], "topic": g["topic"], "messages_sent": 0, "bytes_sent": [],
                "messages_received": 0, "bytes_received": []})
            t["messages_sent"] += g["n"] if sent else 0
            t["messages_received"] += g["n"] if received else 0
            # as SQL's sum(when(sent, payload_size).otherwise(0)): null only when every row is null
            t["bytes_sent"].append(g["payload"] if sent else 0)
            t["bytes_received"].append(g["payload"] if received else 0)
        for wanted, key, name, into in ((sent, "producer_id", "producer_name", producers),
                                        (received, "consumer_id", "subscription", consumers)):
            if wanted and g[key] is not None:
                a = into.setdefault((g["conn"], g[key], g[name], g["topic"]), {
                    "conn": g["conn"], key: g[key], name: g[name], "topic": g["topic"], "messages": 0, "frames": 0,
                    "payload_bytes": 0})
                a["messages"] += g["n"]
                a["frames"] += g["frames"]
                a["payload_bytes"] += g["payload"] or 0
    for t in topics.values():
        for key in ("bytes_sent", "bytes_received"):
            known = [v for v in t[key] if v is not None]
            t[key] = sum(known) if known else None

    def in_order(items: dict, *keys) -> list:
        return [items[k] for k in sorted(items, key=lambda k: tuple((v is not None, v) for v in k[:len(keys)]))]

    latency = (exchanges.filter("latency_ms is not null").groupBy("protocol", "request_type")
               .agg(F.count(F.lit(1)).alias("count"),
                    F.percentile_approx("latency_ms", [0.5, 0.9, 0.99], 10000).alias("p"),
                    F.max("latency_ms").alias("max"), F.avg("latency_ms").alias("mean"))
               .orderBy("protocol", "request_type"))
    latency_rows = [{"protocol": r["protocol"], "request_type": r["request_type"], "count": r["count"],
                     "p50": r["p"][0], "p90": r["p"][1], "p99": r["p"][2], "max": r["max"],
                     "mean": round(r["mean"], 3)} for r in rows(latency)]
    file_figures = files.agg(F.count(F.lit(1)).alias("files"), F.coalesce(F.sum("packets"), F.lit(0)).alias("packets"),
                             F.coalesce(F.sum("size"), F.lit(0)).alias("bytes"),
                             F.sum(F.when(F.col("ended_id") == "capture.unreadable", 1).otherwise(0)).alias("unreadable"),
                             F.sum(F.when(F.col("ended_id") == "capture.truncated", 1).otherwise(0)).alias("truncated")).first()
    file_problems = rows(files.filter("ended_id is not null").orderBy("order")
                         .select("path", F.col("ended_id").alias("id"), F.col("ended").alias("message"))
                         .limit(FILE_PROBLEMS_LISTED))
    return {
        "files": file_figures.asDict(),
        "file_problems": file_problems,
        "frames": overall["n"],
        "connections": overall["connections"],
        "first_time": overall["first_time"],
        "last_time": overall["last_time"],
        "protocols": dict(sorted(protocols.items(), key=lambda kv: (kv[0] is not None, kv[0]))),
        "types": dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0] is not None, kv[0]))),
        "messages": sum(g["n"] for g in groups),
        "topics": in_order(topics, "protocol", "topic"),
        "producers": in_order(producers, "conn", "producer_id"),
        "consumers": in_order(consumers, "conn", "consumer_id"),
        "latency_ms": latency_rows,
        "problems": rows(problems.groupBy("id", "severity").count().orderBy(F.desc("count"), "id")),
    }
