"""A pytest plugin: assert protocol behaviour on a recorded capture, with the evidence ``pulsar-dissect check`` gives.

Installed with the package (entry point ``pytest11``: ``pulsar_dissect``), it provides the fixture
``pulsar_trace`` (which is ``assert_trace``)::

    def test_orders(pulsar_trace):
        (pulsar_trace("captures/orders.pcap")
            .no_errors()
            .all_answered(within="500ms")
            .latency("SEND", p99="20ms")
            .count('type == "SEND"', equals=10))

``assert_trace(path)`` decodes the capture once (summary records, as ``check`` reads them) and each method runs
one rule of ``dissector.check`` over them, returning the trace so that calls chain. A rule that fails raises
``AssertionError``: ``rule <name> failed: <detail>``, then the evidence lines (frame and packet numbers), the same
as ``pulsar-dissect check`` prints. A capture that cannot be read raises ``capture.files.CaptureError``.

Options are plain arguments, as the command line's: ``pulsar_trace(path, port=16650)`` (a port or a list, as
``--port``), ``detect=True``. A capture in which nothing was decoded fails every rule with the hint ``check``
gives (``TCP seen on 16650 — try --port 16650``), unless ``allow_empty=True``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .check import CaptureResult, Rule, Verdict, rule_from_text
from .check.parse import BUILTINS, _percentile
from .check.report import evidence_lines
from .options import Options
from .output.hints import nothing_decoded
from .run import analysed_records

__all__ = ["Trace", "assert_trace", "pulsar_trace"]

_P_KEYWORD = re.compile(r"^p(\d+)(?:_(\d+))?$")  # p99 ... and p99_9 for p99.9


class Trace:
    """The records of one capture, decoded once; every method asserts one rule and returns the trace."""

    def __init__(self, path: str | Path, options: Options | None = None, *, allow_empty: bool = False) -> None:
        self.path = str(path)
        report: dict = {}
        options = options or Options()
        self.records = list(analysed_records(path, options, summary=True, report=report))  # CaptureError if unreadable
        self.first_time = self.records[0]["time"] if self.records else None
        self.verdicts: list[tuple[Rule, Verdict]] = []  # of the rules checked so far, all passed
        decoded = any("index" in rec for rec in self.records)
        self.nothing_decoded = None if decoded or allow_empty else nothing_decoded(options, report)

    def __repr__(self) -> str:
        return f"Trace({self.path!r}, {len(self.records)} records)"

    # ---------------------------------------------------------------- the rules
    def no_errors(self, errors: str | list[str] | None = None) -> Trace:
        """No ERROR / SEND_ERROR from the broker (or: none with these ServerError names)."""
        __tracebackhide__ = True
        names = [errors] if isinstance(errors, str) else errors
        return self._builtin("no-errors", {"errors": names} if names else {},
                             "no-errors" + (f" {', '.join(names)}" if names else ""))

    def checksums_valid(self) -> Trace:
        __tracebackhide__ = True
        return self.rule("checksums-valid")

    def all_answered(self, within: str | float | None = None) -> Trace:
        """Every request answered; with ``within`` ("500ms", "1.5s" or a number of ms) each that quickly."""
        __tracebackhide__ = True
        if within is None:
            return self.rule("all-answered")
        return self._builtin("all-answered", {"within": within}, f"all-answered within {_duration(within)}")

    def no_gaps(self) -> Trace:
        __tracebackhide__ = True
        return self.rule("no-gaps")

    def no_redeliveries(self) -> Trace:
        __tracebackhide__ = True
        return self.rule("no-redeliveries")

    def sequence_contiguous(self) -> Trace:
        __tracebackhide__ = True
        return self.rule("sequence-contiguous")

    def no_problems(self, severity: str = "warning", ids: str | list[str] | None = None) -> Trace:
        __tracebackhide__ = True
        names = [ids] if isinstance(ids, str) else ids
        params = {"severity": severity, **({"ids": names} if names else {})}
        return self._builtin("no-problems", params,
                             f"no-problems severity={severity}" + (f" ids={', '.join(names)}" if names else ""))

    def all_acked(self) -> Trace:
        __tracebackhide__ = True
        return self.rule("all-acked")

    def latency(self, request_type: str, percentile: str | float | None = None, below: str | float | None = None,
                **bounds: str | float) -> Trace:
        """A latency percentile of one request type below a bound: ``p99="20ms"``, ``p50=5`` (ms), ``p99_9=...``
        or ``percentile="p99.9", below="20ms"``; several are checked in turn. Default: p99 below 20ms."""
        __tracebackhide__ = True
        checks: list[tuple[str, str | float]] = []
        for key, bound in bounds.items():
            m = _P_KEYWORD.match(key)
            if not m:
                raise TypeError(f"latency() got an unexpected keyword argument {key!r} (expected pNN=bound)")
            checks.append((f"p{m[1]}" + (f".{m[2]}" if m[2] else ""), bound))
        if (percentile is None) != (below is None):
            raise TypeError("latency() needs percentile and below together")
        if percentile is not None:
            checks.append((str(percentile), below))
        for pct, bound in checks or [("p99", "20ms")]:
            rtype = str(request_type).upper()
            name = f"latency {rtype} p{_percentile(pct):g} < {_duration(bound)}"
            self._builtin("latency", {"type": rtype, "percentile": pct, "below": bound}, name)
        return self

    def count(self, expr: str, equals: int | None = None, at_least: int | None = None,
              at_most: int | None = None) -> Trace:
        """The number of records matching ``expr``: ``equals``, ``at_least`` and/or ``at_most`` (each checked)."""
        __tracebackhide__ = True
        bounds = [(key, op, n) for key, op, n in (("equals", "==", equals), ("at_least", ">=", at_least),
                                                  ("at_most", "<=", at_most)) if n is not None]
        if not bounds:
            return self._builtin("count", {"expr": expr}, f"count({expr})")  # the rule says what it needs
        for key, op, n in bounds:
            self._builtin("count", {"expr": expr, key: n}, f"count({expr}) {op} {n}")
        return self

    def forbid(self, expr: str) -> Trace:
        __tracebackhide__ = True
        return self._builtin("forbid", expr, f"forbid {expr}")

    def require(self, expr: str) -> Trace:
        __tracebackhide__ = True
        return self._builtin("require", expr, f"require {expr}")

    def order(self, *types: str) -> Trace:
        """Per connection, the first of each type in this order: ``order("CONNECT", "PRODUCER", "SEND")``."""
        __tracebackhide__ = True
        return self._builtin("order", list(types), " before ".join(t.upper() for t in types))

    def protocol_version(self, min: int | None = None, max: int | None = None) -> Trace:  # noqa: A002
        __tracebackhide__ = True
        bounds = [f">= {min}"] * (min is not None) + [f"<= {max}"] * (max is not None)
        if not bounds:
            raise TypeError("protocol_version() needs min and/or max")
        return self._builtin("protocol-version", {"min": min, "max": max},
                             "protocol version " + " and ".join(bounds))

    def rule(self, text: str) -> Trace:
        """Any rule in its text form, as ``pulsar-dissect check --rule`` takes it."""
        __tracebackhide__ = True
        return self.check(rule_from_text(text))

    # ---------------------------------------------------------------- running one rule
    def _builtin(self, kind: str, params, name: str) -> Trace:
        __tracebackhide__ = True
        return self.check(BUILTINS[kind](name, params))

    def check(self, rule: Rule) -> Trace:
        """Run a fresh rule over the records; AssertionError with its evidence when it fails."""
        __tracebackhide__ = True
        if self.nothing_decoded is not None:  # never green on nothing
            raise AssertionError(f"rule {rule.name} failed: nothing decoded in {self.path}: {self.nothing_decoded}")
        for rec in self.records:
            rule.add(rec)
        verdict = rule.verdict()
        if not verdict.passed:
            result = CaptureResult(self.path, [(rule, verdict)], self.first_time)
            raise AssertionError("\n".join([f"rule {rule.name} failed: {verdict.detail}",
                                            *(f"    {line}" for line in evidence_lines(result, verdict))]))
        self.verdicts.append((rule, verdict))
        return self


def _duration(value: str | float) -> str:
    """A duration as written, a bare number being milliseconds."""
    return f"{value:g}ms" if isinstance(value, (int, float)) else str(value).strip()


def assert_trace(path: str | Path, options: Options | None = None, *, port: int | list[int] | None = None,
                 detect: bool = False, allow_empty: bool = False) -> Trace:
    """The trace of one capture, to assert rules on: ``assert_trace("x.pcap").no_errors().all_answered()``;
    ``port``: the server's port(s) besides the protocols' own (``--port``); ``detect``: as ``--detect``;
    ``allow_empty``: a capture with nothing decoded passes (by default it fails every rule with the hint)."""
    if options is None:
        ports = [port] if isinstance(port, int) else list(port or ())
        options = Options(ports=frozenset(ports), detect=detect)
    return Trace(path, options, allow_empty=allow_empty)


@pytest.fixture
def pulsar_trace():
    """``assert_trace``: ``pulsar_trace("x.pcap").no_errors()``."""
    return assert_trace
