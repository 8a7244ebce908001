#!/usr/bin/env python3
"""`pulsar-dissect pipeline` on Spark: local[1] against local[2], and the single-process CLI on the same input,
in one run.

    .venv/bin/python benchmarks/bench_spark.py                          # benchmarks/out/perf_big.pcap, cut in 8
    .venv/bin/python benchmarks/bench_spark.py CAPTURE --pieces 16 --repeat 2

The capture is cut into --pieces rotated files (as tcpdump -C writes them; connections cross the cuts), once,
under benchmarks/out/spark_set/. Each row runs in a fresh process (the JVM's start included, as a user pays
it): `pulsar-dissect FILE --json > /dev/null` on the whole capture, then `pulsar-dissect pipeline SET --out DIR
--master local[N]`. Printed: seconds (median), frames/s, MB/s, local[2]'s speed-up over local[1] (target
≥ 1.7×) and each core's throughput against the CLI's (target ≥ 0.5). Results also go to
benchmarks/out/spark.json. Not a test: these machines are noisy; compare within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
sys.path.insert(0, str(ROOT))
CLI = [str(Path(sys.executable).parent / "pulsar-dissect")]


def cut(capture: Path, pieces: int, into: Path) -> list[Path]:
    """``capture`` as ``pieces`` rotated files of about equal packet counts (made once)."""
    from dissector.capture.files import open_capture
    from dissector.capture.writer import write_rotated

    stamp = into / ".made-from"
    mark = f"{capture.resolve()} {capture.stat().st_size} {pieces}"
    if stamp.exists() and stamp.read_text() == mark:
        return sorted(into.glob("set.pcap*"))
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with open_capture(str(capture)) as reader:
        total = sum(1 for _ in reader)
    per = -(-total // pieces)
    files = write_rotated(capture, into, "set.pcap", set(range(1, total + 1, per)))
    stamp.write_text(mark)
    return files


def timed(argv: list[str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.PIPE if "pipeline" in argv else subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "stdout": done.stdout}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?", default=str(OUT / "perf_big.pcap"))
    ap.add_argument("--pieces", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json-out", default=str(OUT / "spark.json"))
    a = ap.parse_args()
    capture = Path(a.capture)
    if not capture.exists():
        raise SystemExit(f"{capture}: no such capture (benchmarks/make_big_capture.sh makes perf_big.pcap)")
    files = cut(capture, a.pieces, OUT / "spark_set")
    size = sum(f.stat().st_size for f in files)
    rows = {"cli": [], "local[1]": [], "local[2]": []}
    frames = {}
    for r in range(a.repeat):
        run = timed(CLI + [str(capture), "--json"])
        rows["cli"].append(run)
        for master in ("local[1]", "local[2]"):
            out = OUT / "spark_tables"
            run = timed(CLI + ["pipeline", str(OUT / "spark_set"), "--out", str(out), "--master", master, "--json"])
            frames[master] = json.loads(run["stdout"])["frames"]
            rows[master].append(run)
            print(f"  [{r + 1}/{a.repeat}] {master:9} {run['wall_s']:7.1f} s", flush=True)
        print(f"  [{r + 1}/{a.repeat}] cli       {rows['cli'][-1]['wall_s']:7.1f} s", flush=True)
    from dissector.run import analysed_json_lines

    report = {"report": {}}
    cli_frames = None
    for item in analysed_json_lines(str(capture)):
        if type(item) is bytes:
            cli_frames = (cli_frames or 0) + item.count(b"\n")
    print(f"\ninput: {len(files)} rotated files, {size / 1e6:.1f} MB, from {capture}; median of {a.repeat}")
    print(f"{'run':34} {'seconds':>8} {'CPU s':>8} {'frames/s':>10} {'MB/s':>7}  frames")
    table = {}
    for name, runs in rows.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        n = cli_frames if name == "cli" else frames[name]
        table[name] = {"wall_s": wall, "cpu_s": cpu, "frames": n, "frames_per_s": n / wall, "mb_per_s": size / 1e6 / wall}
        label = "pulsar-dissect FILE --json (CLI)" if name == "cli" else f"pipeline --master {name}"
        # the JVM is not a child this process waits for: its CPU time is not counted, so not shown
        shown_cpu = f"{cpu:8.1f}" if name == "cli" else f"{'-':>8}"
        print(f"{label:34} {wall:8.1f} {shown_cpu} {n / wall:10,.0f} {size / 1e6 / wall:7.1f}  {n:,}")
    speedup = table["local[1]"]["wall_s"] / table["local[2]"]["wall_s"]
    per_core = {m: table[m]["frames_per_s"] / cores / table["cli"]["frames_per_s"] for m, cores in (("local[1]", 1), ("local[2]", 2))}
    print(f"\nlocal[2] / local[1] speed-up: {speedup:.2f}x (target >= 1.7x)")
    for master, ratio in per_core.items():
        print(f"{master}: per-core throughput {ratio:.3f} of the CLI's (target >= 0.5)")
    same = len({cli_frames, *frames.values()}) == 1
    print(f"frames: CLI {cli_frames:,}, " + ", ".join(f"{m} {n:,}" for m, n in frames.items())
          + ("  they agree" if same else "  THEY DIFFER"))
    report = {"capture": str(capture), "files": len(files), "bytes": size, "repeat": a.repeat, "rows": table,
              "speedup": speedup, "per_core_vs_cli": per_core, "frames_agree": same,
              "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count()}
    Path(a.json_out).write_text(json.dumps(report, indent=1))
    print(f"wrote {a.json_out}")


if __name__ == "__main__":
    main()
