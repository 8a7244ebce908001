#!/usr/bin/env python3
"""`pulsar-dissect pipeline` on Spark: local[1] against local[2], and the single-process CLI on the same input,
in one run.

    .venv/bin/python benchmarks/bench_spark.py                          # 8 copies of benchmarks/out/perf_big.pcap
    .venv/bin/python benchmarks/bench_spark.py CAPTURE --copies 16 --piece-mb 128 --repeat 2
    .venv/bin/python benchmarks/bench_spark.py CAPTURE --copies 1 --pieces 16   # the capture itself, cut in 16

The input looks like a fleet's captures: --copies K copies of the capture's traffic, each between its own
client and broker addresses (so K times its connections, for the partitions to share), merged in time order
and written as tcpdump -C writes them, rotated every --piece-mb MB (benchmarks/gen/fleet.py), under
benchmarks/out/spark_fleet/set/; the same packets also as one file, spark_fleet/merged.pcap, for the CLI (it
reads one capture; the pieces cut connections, so it cannot take them one by one). With --copies 1 the
capture itself is cut into --pieces rotated files of equal packet counts instead, under
benchmarks/out/spark_set/, and the CLI reads the capture. Either set is made once (its `.made-from` stamp
says from what) and reused by later runs.

Each row runs in a fresh process (the JVM's start included, as a user pays it): `pulsar-dissect FILE --json
> /dev/null` on the one file, then `pulsar-dissect pipeline SET --out DIR --master local[N]`. Printed: seconds
(median), frames/s, MB/s, local[2]'s speed-up over local[1] (target ≥ 1.7×) and each core's throughput
against the CLI's (target ≥ 0.5). Results also go to benchmarks/out/spark.json. Not a test: these machines
are noisy; compare within one run.
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


def fleet(capture: Path, copies: int, piece_mb: float, into: Path) -> tuple[list[Path], Path, Path]:
    """``copies`` copies of ``capture`` as a fleet's rotated captures under ``into``/set/ and as one file,
    ``into``/merged.pcap (made once); returns the pieces, their directory and the merged file."""
    from benchmarks.gen.fleet import write_fleet

    stamp, pieces, merged = into / ".made-from", into / "set", into / "merged.pcap"
    mark = f"{capture.resolve()} {capture.stat().st_size} copies={copies} piece_mb={piece_mb}"
    if stamp.exists() and stamp.read_text() == mark:
        return sorted(pieces.glob("fleet.pcap*")), pieces, merged
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    print(f"making {copies} copies of {capture} in pieces of {piece_mb:g} MB under {into} ...", flush=True)
    start = time.perf_counter()
    made = write_fleet(capture, pieces, copies, int(piece_mb * 1e6), merged=merged)
    print(f"  {len(made.pieces)} pieces, {made.bytes / 1e6:.1f} MB, {made.packets:,} packets in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    stamp.write_text(mark)
    return made.pieces, pieces, merged


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
    ap.add_argument("--copies", type=int, default=8, help="copies of the capture's traffic (default 8)")
    ap.add_argument("--piece-mb", type=float, default=256, help="rotate the copies every this many MB (default 256)")
    ap.add_argument("--pieces", type=int, default=8, help="with --copies 1: cut the capture into this many files")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json-out", default=str(OUT / "spark.json"))
    a = ap.parse_args()
    capture = Path(a.capture)
    if not capture.exists():
        raise SystemExit(f"{capture}: no such capture (benchmarks/make_big_capture.sh makes perf_big.pcap)")
    if a.copies < 1 or a.piece_mb <= 0:
        raise SystemExit("--copies must be at least 1 and --piece-mb above 0")
    if a.copies == 1:
        files, pieces, cli_input = cut(capture, a.pieces, OUT / "spark_set"), OUT / "spark_set", capture
    else:
        files, pieces, cli_input = fleet(capture, a.copies, a.piece_mb, OUT / "spark_fleet")
    size = sum(f.stat().st_size for f in files)
    # the CLI writes --json's records on a thread pool (two cores here); "cli-1" is the same on one core
    # (-o pool_bytes=0: every record written in place), which a core of a Spark executor compares to
    rows = {"cli": [], "cli-1": [], "local[1]": [], "local[2]": []}
    frames, stages = {}, {"local[1]": [], "local[2]": []}
    for r in range(a.repeat):
        rows["cli"].append(timed(CLI + [str(cli_input), "--json"]))
        rows["cli-1"].append(timed(CLI + [str(cli_input), "--json", "-o", "pool_bytes=0"]))
        for master in ("local[1]", "local[2]"):
            out = OUT / "spark_tables"
            run = timed(CLI + ["pipeline", str(pieces), "--out", str(out), "--master", master, "--json"])
            frames[master] = json.loads(run["stdout"])["frames"]
            rows[master].append(run)
            stages[master].append(json.loads((out / "stages.json").read_text()))
            print(f"  [{r + 1}/{a.repeat}] {master:9} {run['wall_s']:7.1f} s  "
                  + "  ".join(f"{k} {v:.1f}" for k, v in stages[master][-1].items()), flush=True)
        print(f"  [{r + 1}/{a.repeat}] cli       {rows['cli'][-1]['wall_s']:7.1f} s;  on one core "
              f"{rows['cli-1'][-1]['wall_s']:.1f} s", flush=True)
    from dissector.run import analysed_json_lines

    report = {"report": {}}
    cli_frames = None
    for item in analysed_json_lines(str(cli_input)):
        if type(item) is bytes:
            cli_frames = (cli_frames or 0) + item.count(b"\n")
    made_as = f"{a.copies} copies of {capture}" if a.copies > 1 else str(capture)
    print(f"\ninput: {len(files)} rotated files, {size / 1e6:.1f} MB, from {made_as}; the CLI on {cli_input}; "
          f"median of {a.repeat}")
    print(f"{'run':34} {'seconds':>8} {'CPU s':>8} {'frames/s':>10} {'MB/s':>7}  frames")
    table = {}
    for name, runs in rows.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        n = cli_frames if name.startswith("cli") else frames[name]
        table[name] = {"wall_s": wall, "cpu_s": cpu, "frames": n, "frames_per_s": n / wall, "mb_per_s": size / 1e6 / wall}
        label = {"cli": "pulsar-dissect FILE --json (CLI)", "cli-1": "  the same on one core (pool_bytes=0)"}.get(
            name, f"pipeline --master {name}")
        # the JVM is not a child this process waits for: its CPU time is not counted, so not shown
        shown_cpu = f"{cpu:8.1f}" if name.startswith("cli") else f"{'-':>8}"
        print(f"{label:34} {wall:8.1f} {shown_cpu} {n / wall:10,.0f} {size / 1e6 / wall:7.1f}  {n:,}")
    for master in ("local[1]", "local[2]"):
        split = {k: statistics.median(run[k] for run in stages[master]) for k in stages[master][-1]}
        table[master]["stages_s"] = split
        print(f"{master} by stage (DIR/stages.json, median): " + ", ".join(f"{k} {v:.1f} s" for k, v in split.items()))
    speedup = table["local[1]"]["wall_s"] / table["local[2]"]["wall_s"]
    per_core = {m: table[m]["frames_per_s"] / cores / table["cli-1"]["frames_per_s"] for m, cores in (("local[1]", 1), ("local[2]", 2))}
    per_cli = {m: table[m]["frames_per_s"] / cores / table["cli"]["frames_per_s"] for m, cores in (("local[1]", 1), ("local[2]", 2))}
    print(f"\nlocal[2] / local[1] speed-up: {speedup:.2f}x (target >= 1.7x)")
    for master, ratio in per_core.items():
        print(f"{master}: per-core throughput {ratio:.3f} of the CLI's on one core (target >= 0.5); "
              f"{per_cli[master]:.3f} of the CLI's with its thread pool")
    same = len({cli_frames, *frames.values()}) == 1
    print(f"frames: CLI {cli_frames:,}, " + ", ".join(f"{m} {n:,}" for m, n in frames.items())
          + ("  they agree" if same else "  THEY DIFFER"))
    report = {"capture": str(capture), "copies": a.copies, "set": str(pieces), "cli_input": str(cli_input),
              "files": len(files), "bytes": size, "repeat": a.repeat, "rows": table,
              "speedup": speedup, "per_core_vs_cli_one_core": per_core, "per_core_vs_cli_pooled": per_cli,
              "frames_agree": same,
              "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count()}
    Path(a.json_out).write_text(json.dumps(report, indent=1))
    print(f"wrote {a.json_out}")


if __name__ == "__main__":
    main()
