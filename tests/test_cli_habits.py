"""Habits a user brings from tshark and from other tools (issue 33, item 8): `-c` means the same offline and
live (frames shown, after the filters), and every command's `--help` reads at 80 columns, no line wider and
no option's description cut inside a word."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from corpus import capture_path
from terminal import ROOT, display_width, in_terminal, visible_lines

CLI = [sys.executable, "-m", "dissector.cli.main"]
COMMANDS = ["dissect", "follow", "stats", "problems", "report", "check", "live", "pipeline"]


class _Interface:
    """A live source that replays a capture file, honouring the stop event as the real ones do; counts the
    packets it handed out."""

    def __init__(self, path):
        self.path = path
        self.handed = 0

    def packets(self, stop):
        from dissector.capture.files import open_capture

        with open_capture(self.path) as reader:
            for packet in reader:
                if stop.is_set():
                    return
                self.handed += 1
                yield packet
                yield None  # idle between packets: the clock's turn

    def poll_stats(self):
        return type("Stats", (), {"received": self.handed, "kernel_dropped": 0, "duplicates": 0})()

    def close(self):
        pass


def _live(monkeypatch, path, *args) -> tuple[list[dict], _Interface]:
    import dissector.capture.live as live
    from dissector.cli.main import app

    interface = _Interface(path)
    monkeypatch.setattr(live, "open_live", lambda engine, name, capture: interface)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        res = CliRunner().invoke(app, ["live", "--json", *args])
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines()], interface


def _offline(path, *args) -> list[dict]:
    done = subprocess.run(CLI + [str(path), "--json", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _frames(records: list[dict]) -> list[tuple]:
    return [(r["index"], r["packet"], r["type"]) for r in records if "index" in r]


@pytest.mark.parametrize("args", [["-c", "4"], ["-Y", 'type == "SEND" or type == "MESSAGE"', "-c", "3"],
                                  ["--max-frames", "1"]])
def test_c_is_the_frames_shown_offline_and_live(monkeypatch, args):
    path = capture_path("02_batching_props_keys.pcap")
    offline = _frames(_offline(path, *args))
    every = _frames(_offline(path, *args[:-2]))
    live, interface = _live(monkeypatch, path, *args)
    limit = int(args[-1])
    assert len(every) > limit and offline == every[:limit]  # the limit cut something
    assert _frames(live) == offline
    assert interface.handed < sum(1 for _ in _packets(path))  # live stopped capturing there


def _packets(path):
    from dissector.capture.files import open_capture

    with open_capture(path) as reader:
        yield from reader


def test_max_packets_is_the_packets_captured_live(monkeypatch):
    path = capture_path("02_batching_props_keys.pcap")
    records, interface = _live(monkeypatch, path, "--max-packets", "9")
    assert interface.handed == 9
    first = [p for p, _ in zip(_packets(path), range(9))]
    assert all(r["packet"] <= first[-1].index for r in records if "packet" in r)


# ------------------------------------------------------------------------------------------------ help

def _help_texts(command: str) -> list[str]:
    """The descriptions of a command's options and arguments, and its own, as written in the code."""
    import typer

    from dissector.cli.main import app

    group = typer.main.get_command(app)
    cmd = group.commands[command] if command else group
    texts = [p.help for p in cmd.params if getattr(p, "help", None)]
    return texts + ([cmd.help] if cmd.help else [])


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_fits_80_columns_and_cuts_no_word(command):
    args = ([command] if command else []) + ["--help"]
    piped = subprocess.run(CLI + args, capture_output=True, timeout=60, cwd=ROOT,
                           env={**os.environ, "COLUMNS": "80"}).stdout
    for shown in (in_terminal(args, columns=80), piped):
        lines = visible_lines(shown)
        assert lines and "Usage" in lines[0]
        assert max(display_width(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
        words = set(" ".join(lines).split())
        for text in _help_texts(command):
            # each word of a description is whole somewhere on the page: not cut at a hyphen or mid-word
            for word in text.split():
                assert word in words or any(word in w for w in words), (command, word)


def test_live_writes_the_fields_as_offline(monkeypatch):
    """live -T fields: the same columns as the capture file's, for the frames -c lets through."""
    import dissector.capture.live as live
    from dissector.cli.main import app

    path = capture_path("02_batching_props_keys.pcap")
    args = ["-T", "fields", "-e", "index", "-e", "type", "-e", "producer.name", "-E", "header=y", "-c", "6",
            "-Y", "index"]
    offline = subprocess.run(CLI + [str(path), *args], capture_output=True, text=True, timeout=120)
    assert offline.returncode == 0 and len(offline.stdout.splitlines()) == 7
    monkeypatch.setattr(live, "open_live", lambda engine, name, capture: _Interface(path))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        res = CliRunner().invoke(app, ["live", *args])
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert res.exit_code == 0 and res.stdout == offline.stdout
