"""``pulsar-dissect check``: rules over the records of recorded captures, with verdicts and evidence.

``run_check(capture, rules)`` streams one capture's records through every rule (one pass, bounded state);
``report`` turns the verdicts into text, JSON or JUnit XML. The rules are in ``rules``, their text and YAML
forms in ``parse``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..options import Options
from ..run import analysed_records
from .parse import RuleError, rule_from_text, rules_from_yaml
from .rules import Rule, Verdict

__all__ = ["CaptureResult", "Rule", "RuleError", "Verdict", "rule_from_text", "rules_from_yaml", "run_check"]


@dataclass
class CaptureResult:
    capture: str
    verdicts: list[tuple[Rule, Verdict]]
    first_time: float | None  # for relative times in evidence lines

    @property
    def passed(self) -> bool:
        return all(v.passed for _, v in self.verdicts)


def run_check(capture, rules: list[Rule], options: Options | None = None, name: str | None = None) -> CaptureResult:
    """Every rule over one capture (a path, or a binary file object such as standard input, then named by
    ``name``); raises capture.files.CaptureError when it cannot be read."""
    first_time = None
    summary = not any(rule.needs_full for rule in rules)
    for rec in analysed_records(capture, options, summary=summary):
        if first_time is None:
            first_time = rec["time"]
        for rule in rules:
            rule.add(rec)
    return CaptureResult(name or str(capture), [(rule, rule.verdict()) for rule in rules], first_time)
