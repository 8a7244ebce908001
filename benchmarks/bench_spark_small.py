#!/usr/bin/env python3
"""`pulsar-dissect pipeline` on a small job: Spark's fixed cost (start, planning, a job per step), which
issue 31 wants at most 10 s for three small files once the first run made the class archive.

    .venv/bin/python benchmarks/bench_spark_small.py                     # three shipped captures, 4 runs
    .venv/bin/python benchmarks/bench_spark_small.py --runs 6 --master 'local[1]' captures/09_*.pcap

Each run is the command a user types, in a fresh process (`pulsar-dissect pipeline FILES --out DIR`): its
wall seconds and its stages (DIR/stages.json). The first run may make the class archive (docs/SPARK.md), so
the medians are of the runs after it. Not a test: compare within one run of this script.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [str(Path(sys.executable).parent / "pulsar-dissect")]
SMALL = ["captures/01_basic_nonbatched.pcap", "captures/09_shared.pcap", "captures/11_errors.pcap"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="*", default=[str(ROOT / c) for c in SMALL])
    ap.add_argument("--runs", type=int, default=4, help="runs in fresh processes (the first is not counted)")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-spark-small-") as tmp:
        for run in range(args.runs):
            out = os.path.join(tmp, f"run{run}")
            start = time.perf_counter()
            done = subprocess.run(CLI + ["pipeline", *args.captures, "--out", out, "--master", args.master, "--json"],
                                  capture_output=True, text=True)
            wall = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"run {run} failed ({done.returncode}): {done.stderr[-2000:]}")
            with open(os.path.join(out, "stages.json")) as f:
                stages = json.load(f)
            frames = json.loads(done.stdout)["frames"]
            rows.append({"wall_s": round(wall, 2), "frames": frames, "stages": stages})
            print(f"run {run}: {wall:.1f} s, {frames:,} frames; "
                  + ", ".join(f"{name} {s:.1f}" for name, s in stages.items()), flush=True)
    later = rows[1:] or rows
    names = list(later[0]["stages"])
    print(f"median of runs 1..{len(rows) - 1}: {statistics.median(r['wall_s'] for r in later):.1f} s; "
          + ", ".join(f"{name} {statistics.median(r['stages'].get(name, 0.0) for r in later):.2f}" for name in names))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
