"""The capture files an input list names: files, directories (every capture under them) and globs, as a
rotated set is written (``tcpdump -C``: ``cap``, ``cap1``, ``cap2``...; ``-G``: a time in each name)."""
from __future__ import annotations

import glob
import os
import re

#: Names taken from a directory: pcap and pcapng, gzipped or not, and tcpdump -C's numbered pieces.
CAPTURE_NAME = re.compile(r"\.(pcap|pcapng|cap)(\d*)(\.gz)?$|\.(pcap|pcapng|cap)\.gz\d*$", re.IGNORECASE)


def natural_key(path: str):
    """``cap2`` before ``cap10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def expand(inputs: list[str]) -> tuple[list[str], list[str]]:
    """(the capture files, the inputs that named nothing), each file once, in a stable order (the job orders
    them by their first packet's time)."""
    files, missing, seen = [], [], set()

    def add(path: str) -> None:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            files.append(path)

    for item in inputs:
        if os.path.isdir(item):
            found = sorted((os.path.join(root, name) for root, _, names in os.walk(item) for name in names
                            if CAPTURE_NAME.search(name)), key=natural_key)
            if not found:
                missing.append(item)
            for path in found:
                add(path)
        elif os.path.exists(item):
            add(item)  # named directly: read whatever its name (the reader says if it is no capture)
        else:
            matches = sorted((m for m in glob.glob(item) if os.path.isfile(m)), key=natural_key)
            if not matches:
                missing.append(item)
            for path in matches:
                add(path)
    return files, missing
