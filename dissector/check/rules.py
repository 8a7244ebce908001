"""The rules of ``pulsar-dissect check``: each reads the records of one capture, once, in order, and gives a
verdict with its evidence (the records that broke it, capped, with a count of the rest).

Every rule keeps bounded state: counters, a latency sample, the first ``EVIDENCE`` offending records, and
for ``all-acked`` the MESSAGE frames not yet acknowledged (at most ``ACK_MEMORY``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..output.expr import Predicate, compile_expr, needs_full_records
from ..output.stats import Latencies, percentile
from ..problems import NOTE, SEVERITIES, WARNING

EVIDENCE = 10  # offending records kept per rule; the rest are counted
ACK_MEMORY = 1_000_000  # MESSAGE frames awaiting their ACK remembered by all-acked
ERROR_ANSWERS = ("ERROR", "SEND_ERROR")  # a request refused: its latency is not the request's (no-errors counts it)


@dataclass
class Verdict:
    passed: bool
    detail: str  # one line: what was found
    evidence: list[dict] = field(default_factory=list)  # records, for evidence lines
    more: int = 0  # offending records beyond the evidence kept


class Rule:
    """One rule: ``add`` every record of a capture, then ``verdict``."""

    kind = ""
    needs_full = False  # the rule reads what only full records carry (each message, the whole metadata)

    def __init__(self, name: str) -> None:
        self.name = name
        self._evidence: list[dict] = []
        self._more = 0

    def offend(self, rec: dict) -> None:
        if len(self._evidence) < EVIDENCE:
            self._evidence.append(rec)
        else:
            self._more += 1

    @property
    def offences(self) -> int:
        return len(self._evidence) + self._more

    def add(self, rec: dict) -> None:  # pragma: no cover - every rule overrides it
        raise NotImplementedError

    def verdict(self) -> Verdict:
        n = self.offences
        return Verdict(n == 0, self.describe(n), self._evidence, self._more)

    def describe(self, offences: int) -> str:
        return "ok" if not offences else f"{offences} offending record(s)"


class Forbid(Rule):
    """No record may match the expression."""

    kind = "forbid"

    def __init__(self, name: str, expression: str, what: str | None = None) -> None:
        super().__init__(name)
        self.expression = expression
        self.match: Predicate = compile_expr(expression)
        self.needs_full = needs_full_records(self.match)
        self.what = what or f"record(s) matching {expression}"

    def add(self, rec: dict) -> None:
        if self.match(rec):
            self.offend(rec)

    def describe(self, offences: int) -> str:
        return f"no {self.what}" if not offences else f"{offences} {self.what}"


class Require(Rule):
    """At least one record must match the expression."""

    kind = "require"

    def __init__(self, name: str, expression: str) -> None:
        super().__init__(name)
        self.expression = expression
        self.match = compile_expr(expression)
        self.seen = 0
        self.needs_full = needs_full_records(self.match)

    def add(self, rec: dict) -> None:
        if self.match(rec):
            self.seen += 1

    def verdict(self) -> Verdict:
        if self.seen:
            return Verdict(True, f"{self.seen} record(s) match {self.expression}")
        return Verdict(False, f"no record matches {self.expression}")


class Count(Rule):
    """The number of records matching the expression, compared with a number."""

    kind = "count"
    OPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
           "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}

    def __init__(self, name: str, expression: str, op: str, number: int) -> None:
        super().__init__(name)
        self.expression, self.op, self.number = expression, op, number
        self.match = compile_expr(expression)
        self.count = 0
        self.needs_full = needs_full_records(self.match)

    def add(self, rec: dict) -> None:
        if self.match(rec):
            self.count += 1
            if len(self._evidence) < EVIDENCE:
                self._evidence.append(rec)

    def verdict(self) -> Verdict:
        ok = self.OPS[self.op](self.count, self.number)
        detail = f"count({self.expression}) is {self.count}, expected {self.op} {self.number}"
        # When too many matched, the first matches are the evidence; when too few, there is nothing to show.
        return Verdict(ok, detail, [] if ok or self.count < self.number else self._evidence)


class NoProblems(Rule):
    """No finding or event from a severity up (default: warning), optionally only certain ids."""

    kind = "no-problems"

    def __init__(self, name: str, severity: str = WARNING, ids: list[str] | None = None) -> None:
        super().__init__(name)
        if severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}")
        self.levels = set(SEVERITIES[: SEVERITIES.index(severity) + 1])
        self.ids = set(ids or ())

    def add(self, rec: dict) -> None:
        if "index" in rec:
            found = [e["id"] for e in rec.get("expert", ()) if e["severity"] in self.levels]
        else:
            found = [rec["type"]] if rec.get("severity", NOTE) in self.levels else []
        if found and (not self.ids or self.ids.intersection(found)):
            self.offend(rec)

    def describe(self, offences: int) -> str:
        what = ", ".join(sorted(self.ids)) if self.ids else f"problems of severity {'/'.join(sorted(self.levels))}"
        return f"no {what}" if not offences else f"{offences} record(s) with {what}"


class NoErrors(Rule):
    """No ERROR or SEND_ERROR from the broker (optionally: only these ServerErrors count)."""

    kind = "no-errors"

    def __init__(self, name: str, errors: list[str] | None = None) -> None:
        super().__init__(name)
        self.errors = set(errors or ())

    def add(self, rec: dict) -> None:
        if rec.get("type") in ERROR_ANSWERS and "index" in rec:
            if not self.errors or rec["command"].get("error") in self.errors:
                self.offend(rec)

    def describe(self, offences: int) -> str:
        what = f"server errors {', '.join(sorted(self.errors))}" if self.errors else "ERROR / SEND_ERROR"
        return f"no {what}" if not offences else f"{offences} {what}"


class AllAnswered(Rule):
    """Every request answered (no UNANSWERED), optionally each within a time."""

    kind = "all-answered"

    def __init__(self, name: str, within_ms: float | None = None) -> None:
        super().__init__(name)
        self.within_ms = within_ms
        self.answered = 0

    def add(self, rec: dict) -> None:
        if rec.get("type") == "UNANSWERED" and "index" not in rec:
            self.offend(rec)
        elif "answers" in rec:
            self.answered += 1
            if self.within_ms is not None and rec["latency_ms"] > self.within_ms:
                self.offend(rec)

    def describe(self, offences: int) -> str:
        limit = f" within {self.within_ms:g} ms" if self.within_ms is not None else ""
        if not offences:
            return f"all {self.answered} request(s) answered{limit}"
        return f"{offences} request(s) not answered{limit} ({self.answered} answered)"


class Latency(Rule):
    """A latency percentile of one request type below a bound."""

    kind = "latency"

    def __init__(self, name: str, request_type: str, q: float, bound_ms: float, inclusive: bool = False) -> None:
        super().__init__(name)
        self.request_type, self.q, self.bound_ms, self.inclusive = request_type, q, bound_ms, inclusive
        self.latencies = Latencies()
        self.refused = 0  # requests answered by an error (SEND→SEND_ERROR): counted apart, not in the percentile
        self.slowest: list[dict] = []  # the slowest responses, for evidence

    def add(self, rec: dict) -> None:
        if rec.get("request_type") == self.request_type and "latency_ms" in rec:
            if rec.get("type") in ERROR_ANSWERS:
                self.refused += 1
                return
            self.latencies.add(rec["latency_ms"])
            self.slowest.append(rec)
            if len(self.slowest) > 2 * EVIDENCE:
                self.slowest.sort(key=lambda r: -r["latency_ms"])
                del self.slowest[EVIDENCE:]

    def verdict(self) -> Verdict:
        values = sorted(self.latencies.items)
        refused = f" ({self.refused} answered by an error, not counted)" if self.refused else ""
        if not values:
            return Verdict(False, f"no {self.request_type} was answered{refused}: no latency to check")
        value = percentile(values, self.q)
        ok = value <= self.bound_ms if self.inclusive else value < self.bound_ms
        op = "<=" if self.inclusive else "<"
        detail = (f"{self.request_type} p{self.q:g} is {value:.3f} ms over {self.latencies.count} response(s)"
                  f"{refused}, expected {op} {self.bound_ms:g} ms")
        evidence = [] if ok else sorted(self.slowest, key=lambda r: -r["latency_ms"])[:EVIDENCE]
        return Verdict(ok, detail, evidence)


class Order(Rule):
    """Per connection, the first of each type comes in this order (CONNECT before PRODUCER ...)."""

    kind = "order"

    def __init__(self, name: str, types: list[str]) -> None:
        super().__init__(name)
        self.types = [t.upper() for t in types]
        self.rank = {t: i for i, t in enumerate(self.types)}
        self.reached: dict[int, int] = {}  # connection -> highest rank whose type was seen ... in order

    def add(self, rec: dict) -> None:
        rank = self.rank.get(rec.get("type")) if "index" in rec else None
        if rank is None:
            return
        conn = rec["conn"]
        seen = self.reached.get(conn, -1)
        if rank > seen + 1:
            self.offend(rec)  # this type came before the ones it must follow
        elif rank == seen + 1:
            self.reached[conn] = rank

    def describe(self, offences: int) -> str:
        chain = " before ".join(self.types)
        return f"{chain} on every connection" if not offences else f"{offences} frame(s) out of order ({chain})"


class ProtocolVersion(Rule):
    """Every CONNECT / CONNECTED protocol_version within bounds."""

    kind = "protocol-version"

    def __init__(self, name: str, minimum: int | None = None, maximum: int | None = None) -> None:
        super().__init__(name)
        self.minimum, self.maximum = minimum, maximum
        self.seen: set[int] = set()

    def add(self, rec: dict) -> None:
        if rec.get("type") in ("CONNECT", "CONNECTED") and "index" in rec:
            version = rec["command"].get("protocol_version")
            if version is None:
                return
            self.seen.add(version)
            if (self.minimum is not None and version < self.minimum) or \
                    (self.maximum is not None and version > self.maximum):
                self.offend(rec)

    def describe(self, offences: int) -> str:
        bounds = " and ".join(b for b in (f">= {self.minimum}" if self.minimum is not None else "",
                                          f"<= {self.maximum}" if self.maximum is not None else "") if b)
        seen = ", ".join(map(str, sorted(self.seen))) or "none"
        return (f"protocol versions {seen}, all {bounds}" if not offences
                else f"{offences} handshake(s) with a protocol version not {bounds} (seen: {seen})")


class Decoded(Rule):
    """Something was decoded: a capture aimed at the wrong port (or empty) fails every check with the hint the
    timeline gives, never passes its rules on no records (``--allow-empty`` for traces that may be empty)."""

    kind = "decoded"

    def __init__(self, name: str = "something decoded") -> None:
        super().__init__(name)
        self.frames = 0
        self.hint = "nothing decoded"  # what the run found instead (``run_check`` sets it)

    def add(self, rec: dict) -> None:
        self.frames += "index" in rec

    def verdict(self) -> Verdict:
        if self.frames:
            return Verdict(True, f"{self.frames} frame(s) decoded")
        return Verdict(False, self.hint)


class AllAcked(Rule):
    """Every MESSAGE delivered is acknowledged by an ACK in the capture."""

    kind = "all-acked"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.waiting: OrderedDict[int, dict] = OrderedDict()  # MESSAGE frame index -> its record
        self.messages = 0
        self.forgotten = 0

    def add(self, rec: dict) -> None:
        if "index" not in rec:
            return
        if rec["type"] == "MESSAGE":
            self.messages += 1
            self.waiting[rec["index"]] = _brief(rec)
            if len(self.waiting) > ACK_MEMORY:
                self.waiting.popitem(last=False)
                self.forgotten += 1
        elif rec["type"] == "ACK":
            # (an ACK with a validation_error acknowledges too, on the wire: `no-discarded` judges those)
            for index in [*rec.get("acks", ()), *rec.get("discards", ())]:
                self.waiting.pop(index, None)

    def verdict(self) -> Verdict:
        for rec in self.waiting.values():
            self.offend(rec)
        n = len(self.waiting)
        detail = (f"all {self.messages} MESSAGE frame(s) acknowledged" if not n
                  else f"{n} of {self.messages} MESSAGE frame(s) never acknowledged")
        if self.forgotten:
            detail += f" ({self.forgotten} too old to check)"
        return Verdict(n == 0, detail, self._evidence, self._more)


def _brief(rec: dict) -> dict:
    """What an evidence line needs of a record (all-acked keeps many)."""
    keep = ("index", "protocol", "time", "conn", "src", "dst", "direction", "packet", "type", "command",
            "problems", "consumer", "messages_summary")
    return {k: rec[k] for k in keep if k in rec}
