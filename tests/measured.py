"""A command's own peak RSS, measured from a small parent of its own.

Linux starts a child's maximum RSS at its parent's RSS when it was forked (and keeps it across exec), so a
command started straight from a test process that has built packets or rendered reports would be charged with
the test's memory. A fresh interpreter in between starts the command from a few MB instead.
"""

from __future__ import annotations

import os
import subprocess
import sys

_PARENT = ("import os, resource, subprocess, sys\n"
           "try:\n"
           "    rc = subprocess.call(sys.argv[3:], timeout=float(sys.argv[2]))\n"
           "except subprocess.TimeoutExpired:\n"
           "    rc = -9\n"
           "os.write(int(sys.argv[1]), str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss).encode())\n"
           "sys.exit(rc if rc >= 0 else 128 - rc)\n")


def run_measured(argv: list[str], *, stdout, stderr, stdin=None, timeout: float = 600.0) -> tuple[int, int]:
    """(exit code, peak RSS in KiB) of ``argv``; killed after ``timeout`` seconds (exit 137)."""
    read_end, write_end = os.pipe()
    try:
        rc = subprocess.call([sys.executable, "-c", _PARENT, str(write_end), str(timeout), *argv], stdin=stdin,
                             stdout=stdout, stderr=stderr, pass_fds=(write_end,))
        os.close(write_end)
        write_end = -1
        return rc, int(os.read(read_end, 64) or b"0")
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
