"""``pulsar-dissect pipeline``: the same dissection on Apache Spark (PySpark), for many and huge captures.
``job.run`` is the job (tasks.py: what the executors run; tables.py: the Parquet tables and the summary);
``summary_lines`` renders its summary for a terminal, ``stages_lines`` the seconds of its stages; console.py
shows its progress. Importing this package needs no Spark: ``job`` imports pyspark when it runs."""
from __future__ import annotations

import textwrap

from dissector.output.text import safe


_KEEP = "\x00"  # a space the folding keeps (escaped text never holds a NUL)


def summary_lines(summary: dict, width: int = 80) -> list[str]:
    """The summary as plain lines (wire strings escaped); the list of types folded at ``width``."""
    files = summary["files"]
    lines = [f"files {files['files']:,} ({files['bytes'] or 0:,} bytes, {files['packets']:,} packets)"
             + (f", {files['unreadable']:,} unreadable" if files["unreadable"] else "")
             + (f", {files['truncated']:,} truncated" if files["truncated"] else ""),
             f"frames {summary['frames']:,} on {summary['connections']:,} connection(s), "
             f"messages {summary['messages']:,}"]
    for item in summary.get("missing_inputs", []):
        lines.append(f"  {safe(item)}: no such file, directory or match")
    for problem in summary.get("file_problems", []):
        lines.extend(_fold(f"  {safe(problem['path'])}: {safe(problem['id'])}: {safe(problem['message'])}", width))
    if summary["types"]:  # folded between types, as a terminal of 80 columns shows them
        pairs = ", ".join(f"{safe(t).replace(' ', _KEEP)}{_KEEP}{n:,}" for t, n in summary["types"].items())
        lines.extend(line.replace(_KEEP, " ") for line in textwrap.wrap(
            pairs, width, initial_indent="types ", subsequent_indent="      ", break_on_hyphens=False))
    for topic in summary["topics"]:
        lines.extend(_fold(f"topic {safe(topic['topic'])} ({topic['protocol']}): sent {topic['messages_sent']:,} "
                           f"({topic['bytes_sent'] or 0:,}{_KEEP}B), received {topic['messages_received']:,} "
                           f"({topic['bytes_received'] or 0:,}{_KEEP}B)", width))
    for row in summary["latency_ms"]:
        figures = " ".join(f"{name}={_ms(row[name])}" for name in ("p50", "p90", "p99", "max"))
        lines.extend(_fold(f"latency {safe(row['request_type'])} ({row['protocol']}): n={row['count']:,} "
                           f"{figures}{_KEEP}ms", width))
    for row in summary["problems"]:
        lines.append(f"problem {safe(row['id'])} ({safe(row['severity'])}): {row['count']:,}")
    return lines


def _ms(value) -> str:
    """Milliseconds to the microsecond, as ``stats`` shows them: a sketch's estimate has no more digits worth
    showing (its error bound is the summary's ``latency_error``)."""
    return "-" if value is None else f"{float(value):.3f}".rstrip("0").rstrip(".")


def _fold(line: str, width: int) -> list[str]:
    """A summary line folded at ``width`` between words (a name longer than the width stays whole), the rest
    indented under it."""
    return [part.replace(_KEEP, " ") for part in textwrap.wrap(
        line, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)] or [""]


#: The stages' short names on the stages line (``job.Stages``' names are DIR/stages.json's keys).
_STAGE_NAMES = {"spark_start": "start", "plan_and_count": "count", "number_and_decode": "decode",
                "problems_and_files": "tables", "spark_stop": "stop"}


def stages_lines(seconds: dict[str, float], width: int = 80) -> list[str]:
    """The seconds of each stage (``job.Stages.seconds``), in order and with their sum, as ``stages: start
    3.1 s, index 1.2 s, ...`` folded at ``width``."""
    pairs = [f"{_STAGE_NAMES.get(name, name)}{_KEEP}{value:.1f}{_KEEP}s" for name, value in seconds.items()]
    pairs.append(f"total{_KEEP}{sum(seconds.values()):.1f}{_KEEP}s")
    return [line.replace(_KEEP, " ") for line in textwrap.wrap(
        ", ".join(pairs), width, initial_indent="stages: ", subsequent_indent="        ", break_on_hyphens=False)]
