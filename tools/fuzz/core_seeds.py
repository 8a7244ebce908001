"""Seeds for the engine's fuzz target (fuzz/): the shipped captures, the hostile payloads
(tests/hostile_seeds/), and windows of them.

The target runs fastest on small inputs (-max_len=8192 in run_core.sh), and a whole capture would be cut
to its first 8 KiB: so besides the captures themselves, every classic pcap is also written as windows of 12
packets (every 6 packets, at most 8 KiB each). A window starts mid-stream, as a capture started late
does, and every frame type of the corpus (compressed batches, chunks, TubeMQ blocks) begins some window.
Every fifth window is also written gzipped, so that the reader's gzip path has whole small members.

usage: python tools/fuzz/core_seeds.py OUT_DIR
"""

from __future__ import annotations

import gzip
import shutil
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WINDOW, STEP, MAX_BYTES = 12, 6, 8192


def records(data: bytes) -> list[bytes]:
    """The records (header and data) of a little-endian, microsecond classic pcap."""
    out, at = [], 24
    while at + 16 <= len(data):
        incl = struct.unpack_from("<I", data, at + 8)[0]
        out.append(data[at:at + 16 + incl])
        at += 16 + incl
    return out


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    captures = sorted((ROOT / "captures").glob("*.pcap*")) + sorted((ROOT / "captures" / "tubemq").glob("*.pcap"))
    captures += sorted((ROOT / "tests" / "fuzz_regressions").glob("*.pcap*"))
    # the hostile payloads of issue 34 (tests/hostile_inputs.py --small): a batch claiming ten million
    # encrypted entries, one of 174,762 real ones, 1 MiB payloads
    captures += sorted((ROOT / "tests" / "hostile_seeds").glob("*.pcap*"))
    written = 0
    for path in captures:
        if path.stat().st_size > 1 << 20:
            continue  # the 4 MB chunking capture: its first 8 KiB are in its windows' place below anyway
        shutil.copyfile(path, out / path.name)
        written += 1
        data = path.read_bytes()
        if data[:4] != b"\xd4\xc3\xb2\xa1":
            continue
        recs = records(data)
        for start in range(0, len(recs), STEP):
            window = recs[start:start + WINDOW]
            while window and 24 + sum(map(len, window)) > MAX_BYTES:
                window = window[:-1]
            if window:
                pcap = data[:24] + b"".join(window)
                (out / f"{path.stem}.w{start:04d}.pcap").write_bytes(pcap)
                written += 1
                if start % (5 * STEP) == 0:
                    (out / f"{path.stem}.w{start:04d}.pcap.gz").write_bytes(gzip.compress(pcap, mtime=0))
                    written += 1
    print(f"{written} seeds in {out}")


if __name__ == "__main__":
    main(sys.argv[1])
