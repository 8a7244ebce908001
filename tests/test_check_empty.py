"""Never green on nothing: a capture in which nothing was decoded (a broker on another port, an empty trace)
fails `check` and the pytest plugin with the hint the timeline gives, unless the trace may be empty
(`--allow-empty`, `allow_empty=True`). The capture: pulsar-rs's traffic on port 16650 (its manifest's
`dissector_hint` says so)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dissector.pytest_plugin import assert_trace

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "captures" / "pulsar_rs" / "rs_01_basic.pcap"
PORT = int(json.loads(CAPTURE.with_suffix(".json").read_text())["dissector_hint"].split()[-1])
CLI = [sys.executable, "-m", "dissector.cli.main"]


def check(*args: str, rules=("no-errors", "all-answered")) -> subprocess.CompletedProcess:
    ruled = [arg for rule in rules for arg in ("--rule", rule)]
    return subprocess.run(CLI + ["check", str(CAPTURE), *ruled, *args], capture_output=True, text=True, timeout=120)


def test_check_fails_on_nothing_decoded_with_the_port_to_try(tmp_path):
    junit = tmp_path / "check.xml"
    res = check("--json", "--junit", str(junit))
    assert res.returncode == 1, res.stdout + res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(r["kind"], r["passed"]) for r in rows] == [("decoded", False), ("no-errors", True),
                                                          ("all-answered", True)]
    assert f"--port {PORT}" in rows[0]["detail"]
    failures = [case for case in ET.fromstring(junit.read_bytes()).iter("testcase")
                if case.find("failure") is not None]
    assert [case.get("name") for case in failures] == [rows[0]["rule"]]


def test_the_right_port_or_allow_empty_passes():
    # (all-answered would fail there, truly: pulsar-lite left a SUBSCRIBE of pulsar-rs's unanswered)
    res = check("--json", "--port", str(PORT), rules=("no-errors",))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "decoded" not in [json.loads(line)["kind"] for line in res.stdout.splitlines()]
    assert check("--allow-empty").returncode == 0  # on 6650: nothing, allowed


def test_the_pytest_plugin_fails_the_same_and_takes_the_port_as_an_argument():
    with pytest.raises(AssertionError) as failed:
        assert_trace(CAPTURE).no_errors()
    assert f"--port {PORT}" in str(failed.value)
    trace = assert_trace(CAPTURE, port=PORT)
    assert any("index" in rec for rec in trace.records)
    trace.no_errors()
    assert_trace(CAPTURE, allow_empty=True).no_errors()
