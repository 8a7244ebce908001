"""Classic pcap out: what `live -w` saw, or the packets of the frames a filtered `dissect -w` showed."""

from __future__ import annotations

import os
import struct

from .files import CapturedPacket

SNAPLEN = 262_144  # as live capture's: a loopback segment with GSO can be larger than the 64 KiB MTU


class PcapWriter:
    """Classic pcap out (``-w``), flushed as it goes so that what was seen survives any stop."""

    def __init__(self, path: str | os.PathLike, linktype: int, snaplen: int = SNAPLEN) -> None:
        self._file = open(path, "wb")
        self._file.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snaplen, linktype))  # ns timestamps
        self.linktype = linktype

    def write(self, packet: CapturedPacket) -> None:
        seconds = int(packet.timestamp)
        nanos = int(round((packet.timestamp - seconds) * 1e9))
        if nanos >= 1_000_000_000:
            seconds, nanos = seconds + 1, nanos - 1_000_000_000
        data = packet.data
        self._file.write(struct.pack("<IIII", seconds, nanos, len(data), packet.orig_len) + bytes(data))

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def write_rotated(source, directory, name: str, starts) -> list:
    """``source`` (a capture's path) cut as tcpdump -C cuts it: a new file before each packet numbered in
    ``starts`` (1-based), named ``name``, ``name``1, ``name``2... under ``directory``; returns their paths."""
    from pathlib import Path

    from .files import open_capture

    pieces, writer = [], None
    with open_capture(str(source)) as reader:
        for number, packet in enumerate(reader, 1):
            if writer is None or number in starts:
                if writer is not None:
                    writer.close()
                pieces.append(Path(directory) / f"{name}{len(pieces) or ''}")
                writer = PcapWriter(pieces[-1], packet.linktype)
            writer.write(packet)
    if writer is not None:
        writer.close()
    return pieces
