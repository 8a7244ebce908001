"""Every line fits a terminal of 80 columns: frame lines fold between fields, a problem's line under its frame
and an event's sentence between words (each continuing under its own text), the journey summary of
`follow --message` and `check`'s evidence between words, `stats` names a lone broker once in the Connections
title (a five-digit port made that table 85 columns wide), `problems` folds its places and messages, and `pipeline`
folds the line naming where its tables went."""

from __future__ import annotations

import pytest

from terminal import display_width, in_terminal, visible_lines

RS03 = ["captures/pulsar_rs/rs_03_snappy.pcap", "--port", "16650"]
RUNS = {
    "timeline": RS03,
    "timeline-events": ["captures/pulsar_rs/rs_10_reader_seek_cumulative.pcap", "--port", "16650"],
    "stats": ["stats", *RS03],
    "follow-message": ["follow", "captures/01_basic_nonbatched.pcap", "--message", "0:3"],
    "check-evidence": ["check", *RS03, "--rule", "no-discarded"],
    "problems": ["problems", *RS03],
}


@pytest.mark.parametrize("args", RUNS.values(), ids=RUNS.keys())
def test_every_line_fits_80_columns(args):
    lines = visible_lines(in_terminal(args, columns=80))
    assert len(lines) > 3
    too_wide = [line for line in lines if display_width(line) > 80]
    assert not too_wide, too_wide[:3]


@pytest.mark.parametrize("args, env", [
    (RUNS["timeline"], {"NO_COLOR": "1"}), (RUNS["stats"], {"NO_COLOR": "1"}),
    (RUNS["timeline"] + ["--no-color"], {}), (RUNS["stats"] + ["--color", "never"], {}),
    (["stats", "captures/11b_send_error_too_big.pcap.gz"], {"NO_COLOR": "1"})],
    ids=["timeline-NO_COLOR", "stats-NO_COLOR", "timeline-no-color", "stats-color-never", "stats-11b-NO_COLOR"])
def test_no_colour_still_folds_at_the_terminals_width(args, env):
    """Without colours the output is still a terminal's: folded at 80 columns (NO_COLOR made the stats tables
    96 columns wide and the timeline unfolded, as --plain), and no escape sequence at all."""
    out = in_terminal(args, columns=80, **env)
    assert b"\x1b" not in out
    lines = visible_lines(out)
    assert len(lines) > 3
    too_wide = [line for line in lines if display_width(line) > 80]
    assert not too_wide, too_wide[:3]


def test_a_folded_problem_line_continues_under_its_text():
    lines = visible_lines(in_terminal(RS03, columns=80))
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("⚠") and i + 1 < len(lines))
    mark = lines[at].index("⚠")
    assert lines[at + 1].startswith(" " * (mark + 2)) and not lines[at + 1].startswith(" " * (mark + 3))


def test_the_timeline_ends_with_its_count_of_problems_on_a_terminal_only():
    import json
    import subprocess

    from terminal import CLI, ROOT

    capture = "captures/11_errors.pcap"
    groups = [json.loads(line) for line in subprocess.run(CLI + ["problems", capture, "--json"], capture_output=True,
                                                          text=True, cwd=ROOT, timeout=120).stdout.splitlines()]
    problems = sum(g["count"] for g in groups if g["severity"] in ("error", "warning"))
    last = visible_lines(in_terminal([capture], columns=200))[-1]
    assert f", {problems:,} errors and warnings; pulsar-dissect problems {capture}" in last, last
    piped = subprocess.run(CLI + [capture], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "errors and warnings" not in piped.stderr


def test_pipeline_s_lines_fit_80_columns(tmp_path):
    """`pipeline`'s summary, the line naming where the tables went and the stages, in a terminal of 80 columns;
    the progress line is rewritten in place (what is left after its last carriage return shows)."""
    import re
    import subprocess

    pytest.importorskip("pyspark", reason="pyspark (pip install 'pulsar-dissect[spark]')")
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        java = False
    if not java:
        pytest.skip("a Java runtime (apt-get install default-jre-headless)")
    out = tmp_path / "tables"  # with the test's own directory, the line is longer than 80 columns
    shown = re.sub(r"\x1b\[[0-9;]*m", "", in_terminal(
        ["pipeline", "captures/09_shared.pcap", "--out", str(out), "--master", "local[1]"], columns=80).decode())
    lines = [line.rsplit("\r", 1)[-1] for line in shown.replace("\r\n", "\n").split("\n")]
    assert any(line.startswith("stages: ") for line in lines) and any("tables written to" in line for line in lines)
    too_wide = [line for line in lines if display_width(line) > 80]
    assert not too_wide, too_wide[:3]
