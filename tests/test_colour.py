"""Colour as git and ripgrep decide it: on a terminal unless the environment sets NO_COLOR (no-color.org: any
value but empty), `--color never` (or `--no-color`) never, `--color always` into a pipe too. Run in a real
pseudo-terminal, as a user's shell runs the tool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from terminal import in_terminal

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = str(ROOT / "captures" / "01_basic_nonbatched.pcap")
CLI = [sys.executable, "-m", "dissector.cli.main"]
ESC = b"\x1b["


def piped(args: list[str], **env: str) -> bytes:
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | env
    return subprocess.run(CLI + args, capture_output=True, env=environment, cwd=ROOT, timeout=120).stdout


@pytest.mark.parametrize("command", [[CAPTURE], ["stats", CAPTURE]], ids=["timeline", "stats"])
def test_colours_on_a_terminal_unless_no_color_is_set(command):
    assert ESC in in_terminal(command)
    assert ESC not in in_terminal(command, NO_COLOR="1")
    assert ESC in in_terminal(command, NO_COLOR=""), "an empty NO_COLOR is no request"
    assert ESC not in in_terminal(command + ["--color", "never"])
    assert ESC not in in_terminal(command + ["--no-color"])


def test_color_always_colours_a_pipe_and_auto_does_not():
    assert ESC not in piped([CAPTURE])
    assert ESC in piped([CAPTURE, "--color", "always"])
    assert ESC in piped([CAPTURE, "--color", "always"], NO_COLOR="1"), "asked for, as git's --color=always"
