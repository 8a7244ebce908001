"""Never silent, never a traceback, and the command-line habits of tshark users."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corpus import capture_path, decoded, manifest
from measured import run_measured
from pcapgen import write_pcap
from test_pipeline import _remap_port, packets

runner = CliRunner()
CLI = [str(Path(sys.executable).parent / "pulsar-dissect")]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def other_port(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("port") / "port7777.pcap"
    write_pcap(path, [(t, _remap_port(d, 6650, 7777)) for t, d in packets("02_batching_props_keys.pcap")])
    return path


@pytest.mark.parametrize("command", [[], ["stats"], ["follow", "--topic", "batching-1"]])
def test_pulsar_on_another_port_is_named_with_the_way_out(other_port, command):
    res = run(*(command[:1] + [str(other_port)] + command[1:]))
    assert res.returncode == 0 and "Traceback" not in res.stderr
    assert "no Pulsar or TubeMQ on 6650/6651/8123/8715" in res.stderr and "TCP seen on 7777 (1 connection" in res.stderr
    assert "--port 7777" in res.stderr
    assert "0 frames" not in res.stdout  # no empty tables under the message
    strict = run(*(command[:1] + [str(other_port)] + command[1:] + ["--strict"])) if command[:1] != ["stats"] \
        else None
    if strict is not None:
        assert strict.returncode == 1


def test_comma_lists_of_ports_find_it(other_port):
    frames = [json.loads(line) for line in run(str(other_port), "--json", "--port", "16650,7777").stdout.splitlines()
              if '"index"' in line]
    assert len([f for f in frames if f["type"] == "SEND"]) == manifest("02_batching_props_keys")["summary"][
        "batches_entries"]


def test_a_capture_without_packets_says_so(tmp_path):
    empty = tmp_path / "empty.pcap"
    write_pcap(empty, [])
    res = run(str(empty))
    assert res.returncode == 0 and "holds no packets" in res.stderr


def test_an_unknown_type_names_the_closest():
    res = run(str(capture_path("11_errors.pcap")), "--type", "ACKS")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert re.search(r"did you mean .*\bACK\b", res.stderr)


def test_an_actor_that_does_not_exist_gets_the_list_of_those_that_do():
    names = {r["producer"]["name"] for r in decoded("11_errors.pcap") if r.get("producer", {}).get("name")}
    res = run(str(capture_path("11_errors.pcap")), "--producer", "no-such-producer")
    assert res.returncode == 0 and res.stdout == ""
    listed = res.stderr.split("producers in this capture:", 1)[1]
    assert names and all(name in listed for name in names)


def test_the_notations_the_timeline_prints_are_accepted():
    cap = str(capture_path("11_errors.pcap"))
    by_number = run(cap, "--conn", "10", "--json").stdout
    assert by_number and run(cap, "--conn", "c10", "--json").stdout == by_number
    bad = run(cap, "--conn", "x1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    full = [json.loads(x) for x in run(cap, "--topic", "persistent://public/default/empty-1", "--json").stdout.splitlines()]
    short = [json.loads(x) for x in run(cap, "--topic", "empty-1", "--json").stdout.splitlines()]
    assert full and short == full
    producer = next(r for r in decoded("11_errors.pcap") if "producer" in r)
    notation = f"{producer['producer']['id']}@c{producer['conn']}"
    picked = [json.loads(x) for x in run(cap, "--producer", notation, "--json").stdout.splitlines() if '"index"' in x]
    assert picked and {r["conn"] for r in picked} == {producer["conn"]}


def test_no_traceback_for_a_plot_that_cannot_be_written():
    res = run("stats", str(capture_path("01_basic_nonbatched.pcap")), "--plot", "/nonexistent/dir/x.png")
    assert res.returncode == 2 and "cannot write the plot" in res.stderr and "Traceback" not in res.stderr


def test_tshark_habits():
    cap = str(capture_path("01_basic_nonbatched.pcap"))
    plain = run(cap, "--json").stdout
    assert run("-r", cap, "--json").stdout == plain
    with open(cap, "rb") as fh:
        assert subprocess.run(CLI + ["-", "--json"], stdin=fh, capture_output=True, text=True).stdout == plain
    frames = [line for line in run(cap, "--json", "-c", "3").stdout.splitlines() if '"index"' in line]
    assert len(frames) == 3
    assert run(cap, "--max-frames", "0").returncode == 2 and run(cap, "-c", "-1").returncode == 2
    assert "Usage" in run("-h").stdout and "Usage" in run("dissect", "-h").stdout
    assert re.fullmatch(r"pulsar-dissect \d+\.\d+\.\d+\S*\n", run("--version").stdout)


def test_relative_times_count_from_the_capture_start_whatever_the_filter():
    cap = str(capture_path("01_basic_nonbatched.pcap"))
    full = {line.split()[0]: line.split()[1] for line in run(cap).stdout.splitlines() if line.split()[0].isdigit()}
    filtered = [line.split() for line in run(cap, "--type", "SEND").stdout.splitlines()]
    assert filtered and all(full[index] == time for index, time, *_ in filtered)


def test_absolute_time_says_the_date_and_utc():
    first = run(str(capture_path("01_basic_nonbatched.pcap")), "--absolute-time", "-c", "1").stdout.splitlines()[0]
    assert re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6} UTC", first)


def test_read_filter_write_keeps_the_packets_of_the_frames_shown(tmp_path):
    cap = capture_path("02_batching_props_keys.pcap")
    out = tmp_path / "sends.pcap"
    res = run(str(cap), "--type", "SEND", "--json", "-w", str(out))
    assert res.returncode == 0
    shown = [json.loads(x) for x in res.stdout.splitlines()]
    packets = {p for r in shown for p in range(r.get("first_packet", r["packet"]), r["packet"] + 1)}
    assert f"{len(packets)} packets of the frames shown written" in res.stderr
    again = [json.loads(x) for x in run(str(out), "--json").stdout.splitlines() if '"index"' in x]
    sends = [r for r in again if r["type"] == "SEND"]
    assert len(sends) == manifest("02_batching_props_keys")["summary"]["batches_entries"]
    assert [m["payload_sha256"] for r in sends for m in r["messages"]] == \
        [m["payload_sha256"] for r in shown for m in r["messages"]]
    with open(cap, "rb") as fh:
        stdin = subprocess.run(CLI + ["-", "-w", str(tmp_path / "x.pcap")], stdin=fh, capture_output=True, text=True)
    assert stdin.returncode == 2 and "standard input" in stdin.stderr


# ------------------------------------------------------------------ inputs that are not capture files
COMMANDS = {  # every command that reads captures, as its arguments around the input
    "dissect": lambda cap: [cap],
    "stats": lambda cap: ["stats", cap],
    "follow": lambda cap: ["follow", cap, "--topic", "x"],
    "check": lambda cap: ["check", cap, "--rule", "no-errors"],
    "report": lambda cap: ["report", cap, "-o", "-"],  # the page on standard output
}


def _one_line_error(res: subprocess.CompletedProcess, code: int = 2) -> None:
    """The tool's way to refuse: exit 2, one line on stderr that says why, no traceback, nothing on stdout."""
    assert res.returncode == code, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("pulsar-dissect")


@pytest.fixture(scope="module")
def small_capture(tmp_path_factory) -> Path:
    import framebuild as fb

    path = tmp_path_factory.mktemp("small") / "small.pcap"
    fb.tcp_pcap(path, [("c", fb.simple_frame("PRODUCER", topic="persistent://t/n/x", producer_id=1, request_id=1,
                                             producer_name="p")),
                       ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p"))])
    return path


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("what", ["directory", "missing", "dev-zero"])
def test_inputs_that_are_no_capture_are_one_line_and_exit_2(tmp_path, command, what):
    path = {"directory": tmp_path, "missing": tmp_path / "nope.pcap", "dev-zero": Path("/dev/zero")}[what]
    if what == "directory":
        (tmp_path / "notes.txt").write_text("not a capture")  # check lists a directory's captures: none here
    start = time.monotonic()
    res, peak_kib = _run_measured(*COMMANDS[command](str(path)))
    _one_line_error(res)
    # /dev/zero never ends: it must be refused from its first bytes, not read on
    assert time.monotonic() - start < 30
    assert peak_kib < 300 * 1024


def _run_measured(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """The command run, and its own peak RSS in KiB (``measured``: not the test process's memory, which a child
    forked from it would start with)."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        rc, peak_kib = run_measured(CLI + list(args), stdout=out, stderr=err, timeout=120)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(CLI + list(args), rc, out.read(), err.read()), peak_kib


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_is_read_as_a_stream(tmp_path, small_capture, command):
    import os
    import threading

    fifo = tmp_path / "capture.fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as out:  # blocks until the tool opens it
            out.write(small_capture.read_bytes())

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    res = run(*COMMANDS[command](str(fifo)) + (["--json"] if command not in ("follow", "report") else []))
    writer.join(timeout=10)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    if command == "dissect":
        assert [json.loads(x)["type"] for x in res.stdout.splitlines() if '"index"' in x] == \
            ["PRODUCER", "PRODUCER_SUCCESS"]


@pytest.mark.parametrize("command", COMMANDS)
def test_standard_input_is_read_by_every_command(small_capture, command):
    with open(small_capture, "rb") as fh:
        res = subprocess.run(CLI + COMMANDS[command]("-"), stdin=fh, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    if command == "check":
        assert res.stdout.startswith("-: PASS")


def _without_file_permissions():
    """For a child process: drop the capabilities that let root read any file (CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH) from its bounding set, so that a chmod 000 file is unreadable to it too."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            os._exit(99)


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unreadable_file_is_one_line_and_exit_2(tmp_path, small_capture, command):
    """The tests run as root, who reads a chmod 000 file anyway: the child runs without the capabilities that
    allow it (skipped where they cannot be dropped: not Linux, or no CAP_SETPCAP)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("prctl(PR_CAPBSET_DROP) is Linux's")
    locked = tmp_path / "locked.pcap"
    locked.write_bytes(small_capture.read_bytes())
    locked.chmod(0)
    res = subprocess.run(CLI + COMMANDS[command](str(locked)), capture_output=True, text=True, timeout=120,
                         preexec_fn=_without_file_permissions)
    if res.returncode == 99 and not res.stderr:
        pytest.skip("cannot drop CAP_DAC_OVERRIDE here: root would read the file anyway")
    _one_line_error(res)
    assert "locked.pcap" in res.stderr


# --------------------------------------------------------------------------------- bad arguments
BAD_ARGUMENTS = {
    "unknown-flag": ["--no-such-flag"],
    "bad-value": ["--max-decompressed", "lots"],
    "negative-decompressed": ["--max-decompressed", "-1"],
    "negative-frame-size": ["--max-frame-size", "-5"],
    "frame-size-beyond-64-bits": ["--max-frame-size", str(2**64)],
    "negative-setting": ["-o", "max_connections=-1"],
    "nan-setting": ["-o", "request_timeout=nan"],
    "unknown-setting": ["-o", "no_such_limit=3"],
    "bad-port": ["--port", "70000"],
}
ALL_COMMANDS = {**COMMANDS,
                "live": lambda cap: ["live", "--engine", "dumpcap"],
                "pipeline": lambda cap: ["pipeline", cap, "--out", "/nonexistent/out"]}


@pytest.mark.parametrize("bad", BAD_ARGUMENTS)
@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_bad_arguments_are_one_line_and_exit_2_in_every_command(small_capture, command, bad):
    """Refused before anything is read or started (no capture, no Spark, no capture device)."""
    bad_arguments = BAD_ARGUMENTS[bad]
    if command == "report":  # report's -o is its output file (the contract): its limits are --option
        bad_arguments = ["--option" if a == "-o" else a for a in bad_arguments]
    res = run(*ALL_COMMANDS[command](str(small_capture)), *bad_arguments)
    _one_line_error(res)


@pytest.mark.parametrize("args", [["-c", "0"], ["--max-frames", "-1"], ["--max-frames", "x"], ["-c"],
                                  ["--type", "NOPE"], ["--conn", "x1"], ["-x", "--json"]])
def test_bad_values_of_the_timeline_are_one_line_and_exit_2(small_capture, args):
    _one_line_error(run(str(small_capture), *args))


@pytest.mark.parametrize("args", [["live", "-c", "-5"], ["live", "--duration", "-1"],
                                  ["check", "{cap}", "--rule", "no such rule"], ["check", "{cap}"],
                                  ["check", "{cap}", "--rule", "no-errors", "--junit", "/nonexistent/dir/x.xml"],
                                  ["stats", "{cap}", "--plot", "x.txt"], ["follow", "{cap}"],
                                  ["follow", "{cap}", "--message", "1"], ["follow", "{cap}", "--sequence", "1"],
                                  ["follow", "{cap}", "--producer", "p", "--sequence", "-1"], ["report", "{cap}"],
                                  ["report", "{cap}", "-o", "-", "--max-frames", "0"],
                                  ["report", "{cap}", "-o", "/nonexistent/dir/r.html"],
                                  ["pipeline", "{cap}", "--out", "o", "--report", "/nonexistent/dir/r.html"],
                                  ["pipeline", "{cap}"], ["pipeline", "{cap}", "--out", "o", "--partitions", "0"]])
def test_bad_values_of_the_other_commands_are_one_line_and_exit_2(small_capture, args):
    _one_line_error(run(*[a.format(cap=small_capture) for a in args]))


def test_a_mistyped_command_names_the_closest_ones_and_exits_2():
    for typed, meant in (("stat", "stats"), ("folow", "follow"), ("problem", "problems")):
        res = subprocess.run([sys.executable, "-m", "dissector.cli.main", typed, "captures/01_basic_nonbatched.pcap"],
                             capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
        assert res.returncode == 2 and res.stdout == ""
        assert f"did you mean {meant}" in res.stderr or f"or {meant}" in res.stderr, res.stderr
