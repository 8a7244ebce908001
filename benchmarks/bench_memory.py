#!/usr/bin/env python3
"""Memory benchmark: our peak RSS on the big capture versus a capture half its size.

usage: python benchmarks/bench_memory.py [CAPTURE] [--half HALF.pcap] [--repeat N] [--quick] [--no-tshark]

The half-size file is, unless --half is given, the first packets of CAPTURE up to half its bytes
(benchmarks/out/<name>.half.pcap, made here from the classic pcap; streams are cut mid-way, which a dissector
must cope with anyway).  Each command runs --repeat times per file; the median peak RSS (GNU time -v) is used.
Memory must not grow with file size: ratio = RSS(big) / RSS(half) should stay close to 1.0 (we flag > 1.25).
tshark_reasm is shown for reference (tshark keeps per-frame state, so its RSS grows with the file).
Results go to benchmarks/out/memory.json.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dissect as bd  # noqa: E402

FLAT = 1.25


def make_half(src, dst):
    """The leading packets of src up to half its bytes (classic pcap only)."""
    try:
        return bd.head_pcap(src, dst, max_bytes=os.path.getsize(src) // 2)
    except ValueError:
        raise SystemExit(f"{src} is not a classic pcap; pass --half FILE")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?")
    ap.add_argument("--half", help="use this file as the smaller capture instead of truncating CAPTURE")
    ap.add_argument("--quick", action="store_true", help="default to benchmarks/out/perf_quick.pcap")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-generate", action="store_true")
    ap.add_argument("--no-tshark", action="store_true", help="leave out the tshark reference")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--cli-args", metavar="TEMPLATE", help="as in bench_dissect.py")
    ap.add_argument("--json-out", default=os.path.join(bd.OUT, "memory.json"))
    a = ap.parse_args()
    big = a.capture or (bd.DEFAULT_QUICK if a.quick else bd.DEFAULT_BIG)
    if not bd.ensure_capture(big, a.quick, not a.no_generate):
        sys.exit(2)
    half = a.half
    if not half:
        os.makedirs(bd.OUT, exist_ok=True)
        half = os.path.join(bd.OUT, os.path.splitext(os.path.basename(big))[0] + ".half.pcap")
        if not os.path.exists(half) or os.path.getmtime(half) < os.path.getmtime(big):
            make_half(big, half)
    skip = ["tshark_floor", "tshark_follow", "tshark_follow_all"] + (["tshark_reasm"] if a.no_tshark else [])
    reps = {}
    for label, path in (("half", half), ("big", big)):
        print(f"== {label}")
        reps[label] = bd.run_benchmark(path, max(1, a.repeat), skip=skip, timeout=a.timeout, count_frames=False,
                                       cli_template=a.cli_args)
    print(f"\n{'measurement':14s} {'half MB':>8s} {'big MB':>8s} {'RSS half':>9s} {'RSS big':>9s} {'ratio':>6s}  verdict")
    out = {"big": {"path": big, "bytes": reps["big"]["bytes"]}, "half": {"path": half, "bytes": reps["half"]["bytes"]},
           "size_ratio": reps["big"]["bytes"] / reps["half"]["bytes"], "measurements": {}}
    for name in reps["big"]["results"]:
        rb, rh = reps["big"]["results"][name], reps["half"]["results"].get(name, {})
        if not (rb.get("ok") and rh.get("ok")):
            print(f"{name:14s} n/a  {rb.get('error') or rh.get('error')}")
            out["measurements"][name] = {"ok": False, "error": rb.get("error") or rh.get("error")}
            continue
        mb, mh = rb["rss_mib_median"], rh["rss_mib_median"]
        ratio = mb / mh if mh else None
        verdict = ("flat" if ratio <= FLAT else "GROWS with file size") if ratio else "-"
        if rb["side"] != "ours":
            verdict += " (reference)"
        print(f"{name:14s} {reps['half']['bytes'] / 1e6:8.1f} {reps['big']['bytes'] / 1e6:8.1f} "
              f"{mh:9.0f} {mb:9.0f} {bd.fmt(ratio, '6.2f')}  {verdict}")
        out["measurements"][name] = {"ok": True, "rss_mib_half": mh, "rss_mib_big": mb, "ratio": ratio,
                                     "flat": ratio is not None and ratio <= FLAT,
                                     "wall_s_half": rh["wall_s_median"], "wall_s_big": rb["wall_s_median"]}
    print(f"(file size ratio {out['size_ratio']:.2f}; RSS in MiB, median of {max(1, a.repeat)} run(s); flat = ratio <= {FLAT})")
    with open(a.json_out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {a.json_out}")


if __name__ == "__main__":
    main()
