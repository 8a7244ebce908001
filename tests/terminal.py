"""Run the CLI in a real pseudo-terminal of a given size, as a user's shell does: what it writes there (its
standard output and error together), and the display width of a line."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "dissector.cli.main"]


def in_terminal(args: list[str], columns: int = 80, rows: int = 24, **env: str) -> bytes:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    environment.update({"TERM": "xterm-256color", **env})
    proc = subprocess.Popen(CLI + args, stdin=slave, stdout=slave, stderr=slave, env=environment, cwd=ROOT)
    os.close(slave)
    out = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=120)
    os.close(master)
    return bytes(out)


def display_width(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def visible_lines(out: bytes) -> list[str]:
    """The lines as the terminal shows them: colours removed."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", out.decode("utf-8")).replace("\r", "").splitlines()
