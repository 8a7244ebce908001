#!/usr/bin/env python3
"""The frame decoder alone: the compiled core's decode_frame over every frame of a capture, and the same
decoding with each frame written as JSON in Rust without any Python object (the base of the native output).

usage: python benchmarks/bench_decode.py [CAPTURE] [--repeat N]

The frames are read once (reassembly and splitting are not timed); each figure is the best of --repeat passes
(default 3), the passes of the figures interleaved so that noise on a shared machine hits them alike.
"""
import argparse
import time
from pathlib import Path

from dissector import _core as pulsar_dissect_core

from dissector.model import Frame
from dissector.options import Options
from dissector.pipeline import dissect_file
from dissector.protocols.pulsar.decode import decode_frame

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "benchmarks" / "out" / "perf_big.half.pcap"
FALLBACK = ROOT / "captures" / "02_batching_props_keys.pcap"


def python_pass(frames: list[bytes], summary: bool) -> float:
    options = Options(summary=summary)
    start = time.perf_counter()
    for data in frames:
        decode_frame(data, 0, options)
    return time.perf_counter() - start


def rust_json_pass(frames: list[bytes], summary: bool) -> float:
    _, seconds = pulsar_dissect_core._decode_to_json("pulsar", frames, Options().max_decompressed, summary)
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", nargs="?", type=Path, default=DEFAULT if DEFAULT.exists() else FALLBACK)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    frames = [f.data for f in dissect_file(args.capture, Options(keep_frame_bytes=True)) if type(f) is Frame]
    print(f"{args.capture}: {len(frames):,} frames, {sum(map(len, frames)) / 1e6:.1f} MB")
    runs = {
        "decode_frame (Python objects)": python_pass,
        "decode + JSON in Rust (no Python objects)": rust_json_pass,
    }
    best = {(name, summary): float("inf") for name in runs for summary in (False, True)}
    for _ in range(args.repeat):
        for (name, summary) in best:
            best[name, summary] = min(best[name, summary], runs[name](frames, summary))
    for (name, summary), seconds in best.items():
        print(f"{name:44} summary={summary!s:5}  {seconds:7.3f} s  {len(frames) / seconds / 1e3:8.0f} kframes/s")


if __name__ == "__main__":
    main()
