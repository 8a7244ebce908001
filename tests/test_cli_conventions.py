"""Never silent, never a traceback, and the command-line habits of tshark users."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corpus import capture_path, decoded, manifest
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
