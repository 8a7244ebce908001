"""Verdicts as text, JSON objects and JUnit XML; evidence as timeline lines with frame and packet numbers.

Every wire string in an evidence line went through the timeline's ``safe`` (no control characters, no markup),
so it is also valid in XML; ElementTree escapes the rest.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

from rich.console import Console

from ..output.timeline import TimelineRenderer
from . import CaptureResult


def evidence_lines(result: CaptureResult, verdict) -> list[str]:
    """The offending records as plain timeline lines, each with its frame and packet number."""
    renderer = TimelineRenderer(Console(file=io.StringIO(), color_system=None), plain=True)
    renderer.origin = result.first_time  # times relative to the capture's start, as in the full timeline
    lines = []
    for rec in verdict.evidence:
        where = f"frame {rec['index']}, packet {rec['packet']}" if "index" in rec else f"packet {rec['packet']}"
        text = "".join(piece for piece, _ in renderer.parts(rec)).replace("\n", " ")
        lines.append(f"{where}: {' '.join(text.split())}")
    if verdict.more:
        lines.append(f"... and {verdict.more} more")
    return lines


def as_text(result: CaptureResult) -> str:
    out = [f"{result.capture}: {'PASS' if result.passed else 'FAIL'}"]
    for rule, verdict in result.verdicts:
        out.append(f"  {'ok  ' if verdict.passed else 'FAIL'} {rule.name}: {verdict.detail}")
        out.extend(f"         {line}" for line in evidence_lines(result, verdict))
    return "\n".join(out)


def as_json(result: CaptureResult) -> list[dict]:
    """One object per capture and rule."""
    return [{"capture": result.capture, "rule": rule.name, "kind": rule.kind, "passed": verdict.passed,
             "detail": verdict.detail,
             "evidence": [{"index": rec.get("index"), "packet": rec.get("packet"), "type": rec.get("type"),
                           "line": line}
                          for rec, line in zip(verdict.evidence, evidence_lines(result, verdict))],
             "more": verdict.more}
            for rule, verdict in result.verdicts]


def as_junit(results: list[CaptureResult]) -> bytes:
    """JUnit XML: one testsuite per capture, one testcase per rule, the evidence in the failure."""
    suites = ET.Element("testsuites", name="pulsar-dissect check",
                        tests=str(sum(len(r.verdicts) for r in results)),
                        failures=str(sum(1 for r in results for _, v in r.verdicts if not v.passed)))
    for result in results:
        failures = sum(1 for _, v in result.verdicts if not v.passed)
        suite = ET.SubElement(suites, "testsuite", name=result.capture, tests=str(len(result.verdicts)),
                              failures=str(failures), errors="0", skipped="0")
        for rule, verdict in result.verdicts:
            case = ET.SubElement(suite, "testcase", classname=f"pulsar-dissect.{rule.kind or 'rule'}", name=rule.name)
            if not verdict.passed:
                failure = ET.SubElement(case, "failure", message=verdict.detail, type=rule.kind or "rule")
                failure.text = "\n".join([verdict.detail, *evidence_lines(result, verdict)])
            else:
                ET.SubElement(case, "system-out").text = verdict.detail
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)
