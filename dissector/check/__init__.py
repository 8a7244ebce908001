"""``pulsar-dissect check``: rules over the records of recorded captures, with verdicts and evidence.

``run_check(capture, rules)`` streams one capture's records through every rule (one pass, bounded state);
``report`` turns the verdicts into text, JSON or JUnit XML. The rules are in ``rules``, their text and YAML
forms in ``parse``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..options import Options
from ..output.hints import nothing_decoded
from ..run import analysed_records
from .parse import RuleError, rule_from_text, rules_from_yaml
from .rules import Decoded, Rule, Verdict

__all__ = ["CaptureResult", "Rule", "RuleError", "Verdict", "rule_from_text", "rules_from_yaml", "run_check"]


@dataclass
class CaptureResult:
    capture: str
    verdicts: list[tuple[Rule, Verdict]]
    first_time: float | None  # for relative times in evidence lines

    @property
    def passed(self) -> bool:
        return all(v.passed for _, v in self.verdicts)


def run_check(capture, rules: list[Rule], options: Options | None = None, name: str | None = None,
              allow_empty: bool = False) -> CaptureResult:
    """Every rule over one capture (a path, or a binary file object such as standard input, then named by
    ``name``); raises capture.files.CaptureError when it cannot be read. Unless ``allow_empty``, a capture in
    which no frame was decoded fails, a verdict of its own first (kind ``decoded``), with the hint the timeline
    gives."""
    first_time = None
    if not allow_empty:
        rules = [Decoded(), *rules]
    summary = not any(rule.needs_full for rule in rules)
    report: dict = {}
    for rec in analysed_records(capture, options, summary=summary, report=report):
        if first_time is None:
            first_time = rec["time"]
        for rule in rules:
            rule.add(rec)
    verdicts = []
    for rule in rules:
        if isinstance(rule, Decoded):
            rule.hint = nothing_decoded(options or Options(), report)
            if rule.frames:
                continue  # said only when it fails: a capture's verdicts are its rules'
        verdicts.append((rule, rule.verdict()))
    return CaptureResult(name or str(capture), verdicts, first_time)
