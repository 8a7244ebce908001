"""Expert info: problems and observations with a stable id and a severity, like Wireshark's.

A ``Problem`` is a ``str`` (its message), so every list of problem strings in the pipeline can hold one; the
id and severity ride along for JSON (`expert`), `--strict` and statistics. Plain strings from the decoders
count as ``decode.malformed`` errors.
"""

from __future__ import annotations

ERROR, WARNING, NOTE = "error", "warning", "note"


class Problem(str):
    id: str
    severity: str

    def __new__(cls, id: str, severity: str, message: str) -> "Problem":
        self = str.__new__(cls, message)
        self.id = id
        self.severity = severity
        return self

    def __reduce__(self):  # keep id and severity across pickling (multiprocessing, Spark)
        return (Problem, (self.id, self.severity, str(self)))


def problem_id(p: str) -> str:
    return getattr(p, "id", "decode.malformed")


def severity(p: str) -> str:
    return getattr(p, "severity", ERROR)


def is_note(p: str) -> bool:
    return getattr(p, "severity", ERROR) == NOTE


def expert_record(p: str) -> dict:
    return {"id": problem_id(p), "severity": severity(p), "message": str(p)}


# Ids of the stream events that are not frames (their JSON `type`), with their severity.
EVENT_SEVERITY = {
    "GAP": WARNING, "SKIPPED": WARNING, "NOT_PULSAR": ERROR, "OVERSIZED": ERROR, "BAD_SIZE": ERROR,
    "TRUNCATED": WARNING, "PROXY_HEADER": NOTE, "UNANSWERED": WARNING, "CAPTURE_TRUNCATED": WARNING,
    "CAPTURE_NOTE": NOTE, "UNFINISHED_CHUNKS": WARNING, "CONNECTION_OPENED": NOTE, "CONNECTION_CLOSED": NOTE,
}
