"""`pulsar-dissect problems`: every finding and problem event of a capture, grouped by severity and id with its
count and places (tshark's -z expert). Its groups are exactly the findings the records carry (each counted
once, in the order errors, warnings, notes), its places capped with a count of the rest, its lines folded at
the terminal's width."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

from terminal import display_width, in_terminal, visible_lines

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "dissector.cli.main"]
RS03 = [str(ROOT / "captures" / "pulsar_rs" / "rs_03_snappy.pcap"), "--port", "16650"]


def run(*args: str) -> str:
    res = subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_the_groups_are_the_records_findings_counted_once():
    records = [json.loads(line) for line in run(*RS03, "--json").splitlines()]
    expected = collections.Counter()
    for rec in records:
        if "index" in rec:
            expected.update((e["severity"], e["id"]) for e in rec.get("expert", ()))
        elif rec.get("severity") in ("error", "warning"):
            expected[(rec["severity"], rec["type"])] += 1
    groups = [json.loads(line) for line in run("problems", *RS03, "--json").splitlines()]
    assert {(g["severity"], g["id"]): g["count"] for g in groups} == dict(expected)
    ranks = [("error", "warning", "note").index(g["severity"]) for g in groups]
    assert ranks == sorted(ranks)
    for g in groups:
        assert len(g["packets"]) == min(g["count"], 20) and g["more"] == g["count"] - len(g["packets"])
        carrying = [r["index"] for r in records if "index" in r and g["id"] in [e["id"] for e in r.get("expert", ())]]
        assert g["frames"] == carrying[:20] or not carrying  # (an event has packets, no frames)


def test_a_clean_capture_has_none_and_the_wrong_port_says_why():
    assert run("problems", str(ROOT / "captures" / "01_basic_nonbatched.pcap"), "--json") == ""
    res = subprocess.run(CLI + ["problems", RS03[0]], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and res.stdout == ""
    assert "--port 16650" in res.stderr


def test_on_a_terminal_of_80_columns_every_line_fits():
    lines = visible_lines(in_terminal(["problems", *RS03], columns=80))
    assert len(lines) > 8
    assert max(display_width(line) for line in lines) <= 80, max(lines, key=display_width)
