#!/usr/bin/env python3
"""Memory benchmark: our peak RSS on the big capture versus a capture half its size.

usage: python benchmarks/bench_memory.py [CAPTURE] [--half HALF.pcap] [--repeat N] [--quick] [--no-tshark]
       python benchmarks/bench_memory.py [CAPTURE] --one-direction [--broker-port 6650]
       python benchmarks/bench_memory.py [CAPTURE] --sweep 1 2 4 6

The half-size file is, unless --half is given, the first packets of CAPTURE up to half its bytes
(benchmarks/out/<name>.half.pcap, made here from the classic pcap; streams are cut mid-way, which a dissector
must cope with anyway).  Each command runs --repeat times per file; the median peak RSS (GNU time -v) is used.
Memory must not grow with file size: ratio = RSS(big) / RSS(half) should stay close to 1.0 (we flag > 1.25).
tshark_reasm is shown for reference (tshark keeps per-frame state, so its RSS grows with the file).

--one-direction first writes benchmarks/out/<name>.to_broker.pcap, a copy of CAPTURE with only the packets sent
to TCP port --broker-port (client to broker, what an asymmetric SPAN port shows: no response ever arrives),
then measures the CLI alone on that file and on its first half.

--sweep K... measures the CLI (--json and the timeline) on the half file and on K copies of CAPTURE's traffic
for each K (benchmarks/out/<name>.xK.pcap, made once by benchmarks/gen/fleet.py: each copy between its own
addresses, merged in time order, as rotated captures joined would be), so one table shows peak RSS from a
few hundred MB to several GB; flat = the largest RSS over the half file's <= 1.25.

Exit status: 0 when our memory is flat, 1 when it grows (ratio > 1.25 for any of our measurements), 2 when
nothing of ours could be measured.  Results go to benchmarks/out/memory.json (memory_one_direction.json).
"""
import argparse
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dissect as bd  # noqa: E402  (it also puts tests/ on sys.path)
import pcapgen  # noqa: E402

FLAT = 1.25
TSHARK_OTHERS = ["tshark_floor", "tshark_follow", "tshark_follow_all"]
ALL_BUT_CLI = ["ours_timeline", "tshark_reasm"] + list(bd.LIB_PATHS) + TSHARK_OTHERS


def copy_or_exit(src, dst, **kw):
    try:
        return pcapgen.copy_pcap(src, dst, **kw)
    except ValueError:
        raise SystemExit(f"{src} is not a classic pcap; pass --half FILE (or convert it with editcap -F pcap)")


def tcp_dst_port(linktype, data):
    """TCP destination port of a captured packet; None when it is not TCP over IPv4/IPv6 on a known link type."""
    if linktype == 1:                                   # Ethernet, with any 802.1Q / 802.1ad tags
        off, ethertype = 14, data[12:14]
        while ethertype in (b"\x81\x00", b"\x88\xa8"):
            ethertype, off = data[off + 2:off + 4], off + 4
    elif linktype in (113, 276):                        # Linux cooked v1 / v2
        off, ethertype = (16, data[14:16]) if linktype == 113 else (20, data[0:2])
    elif linktype in (0, 108):                          # BSD loopback: 4-byte address family
        off, ethertype = 4, None
    elif linktype in (12, 14, 101, 228, 229):           # raw IP
        off, ethertype = 0, None
    else:
        return None
    if ethertype not in (None, b"\x08\x00", b"\x86\xdd"):
        return None
    ip = data[off:]
    version = ip[0] >> 4 if ip else 0
    if version == 4 and len(ip) >= 20 and ip[9] == 6 and not struct.unpack("!H", ip[6:8])[0] & 0x1FFF:
        tcp = (ip[0] & 0x0F) * 4
    elif version == 6 and len(ip) >= 40 and ip[6] == 6:  # TCP right after the fixed header (no extensions)
        tcp = 40
    else:
        return None
    return struct.unpack("!H", ip[tcp + 2:tcp + 4])[0] if len(ip) >= tcp + 4 else None


def make_one_direction(src, dst, port):
    n = copy_or_exit(src, dst, keep=lambda linktype, data: tcp_dst_port(linktype, data) == port)
    print(f"wrote {dst}: {n} packets to port {port}, {os.path.getsize(dst) / 1e6:.1f} MB")
    if not n:
        raise SystemExit(f"no packet of {src} goes to TCP port {port}")


def derived(big, suffix):
    """benchmarks/out/<name><suffix>, made again when older than big."""
    os.makedirs(bd.OUT, exist_ok=True)
    path = os.path.join(bd.OUT, os.path.splitext(os.path.basename(big))[0] + suffix)
    return path, not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(big)


def sweep(big, copies, repeat, timeout, cli_template):
    """Peak RSS of the CLI on the half file and on K copies of ``big`` for each K: one row per size."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))
    from fleet import write_fleet  # noqa: E402

    half, stale = derived(big, ".half.pcap")
    if stale:
        copy_or_exit(big, half, max_bytes=os.path.getsize(big) // 2)
    files = [("half", half)]
    for k in sorted(set(copies)):
        path, stale = derived(big, f".x{k}.pcap")
        if stale:
            pieces = os.path.join(bd.OUT, f"sweep_pieces_x{k}")
            write_fleet(big, pieces, k, piece_bytes=1 << 62, merged=path)  # one piece: only the merged file is kept
            for piece in os.listdir(pieces):
                os.remove(os.path.join(pieces, piece))
            os.rmdir(pieces)
        files.append((f"x{k}", path))
    skip = [n for n in ALL_BUT_CLI if n != "ours_timeline"]
    rows = []
    for label, path in files:
        print(f"== {label}")
        rep = bd.run_benchmark(path, max(1, repeat), skip=skip, timeout=timeout, count_frames=False,
                               cli_template=cli_template)
        rows.append({"file": label, "path": path, "bytes": rep["bytes"],
                     **{name: r.get("rss_mib_median") if r.get("ok") else None for name, r in rep["results"].items()},
                     "wall_s": {name: r.get("wall_s_median") for name, r in rep["results"].items()}})
    names = [n for n in ("ours_cli", "ours_timeline") if any(row.get(n) for row in rows)]
    print(f"\n{'file':6s} {'MB':>8s} " + " ".join(f"{n + ' MiB':>18s}" for n in names))
    for row in rows:
        print(f"{row['file']:6s} {row['bytes'] / 1e6:8.1f} " + " ".join(f"{bd.fmt(row.get(n), '18.0f')}" for n in names))
    ratios = {n: max(row[n] for row in rows if row.get(n)) / rows[0][n] for n in names if rows[0].get(n)}
    flat = bool(ratios) and all(r <= FLAT for r in ratios.values())
    print(f"largest RSS / the half file's: " + ", ".join(f"{n} {r:.2f}" for n, r in ratios.items())
          + f" -> {'flat' if flat else 'GROWS'} (flat <= {FLAT})")
    out = os.path.join(bd.OUT, "memory_sweep.json")
    with open(out, "w") as f:
        json.dump({"rows": rows, "ratios": ratios, "verdict": "flat" if flat else "grows"}, f, indent=1)
    print(f"wrote {out}")
    sys.exit(0 if flat else 1 if ratios else 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?")
    ap.add_argument("--half", help="use this file as the smaller capture instead of truncating CAPTURE")
    ap.add_argument("--quick", action="store_true", help="default to benchmarks/out/perf_quick.pcap")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-generate", action="store_true")
    ap.add_argument("--no-tshark", action="store_true", help="leave out the tshark reference")
    ap.add_argument("--one-direction", action="store_true",
                    help="measure the CLI on the client-to-broker packets only (asymmetric SPAN port)")
    ap.add_argument("--broker-port", type=int, default=6650, help="with --one-direction (default 6650)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--cli-args", metavar="TEMPLATE", help="as in bench_dissect.py")
    ap.add_argument("--json-out")
    ap.add_argument("--sweep", type=int, nargs="+", metavar="K",
                    help="peak RSS on the half file and on K copies of CAPTURE for each K (e.g. 1 2 4 6)")
    a = ap.parse_args()
    if a.one_direction and a.half:
        ap.error("--half does not go with --one-direction (the half is cut from the one-direction copy)")
    big = a.capture or (bd.DEFAULT_QUICK if a.quick else bd.DEFAULT_BIG)
    if not bd.ensure_capture(big, a.quick, not a.no_generate):
        sys.exit(2)
    if a.sweep:
        sweep(big, a.sweep, a.repeat, a.timeout, a.cli_args)
    if a.one_direction:
        one, stale = derived(big, ".to_broker.pcap")
        if stale:
            make_one_direction(big, one, a.broker_port)
        big = one
    half = a.half
    if not half:
        half, stale = derived(big, ".half.pcap")
        if stale:
            copy_or_exit(big, half, max_bytes=os.path.getsize(big) // 2)
    skip = ALL_BUT_CLI if a.one_direction else TSHARK_OTHERS + (["tshark_reasm"] if a.no_tshark else [])
    reps = {}
    for label, path in (("half", half), ("big", big)):
        print(f"== {label}")
        reps[label] = bd.run_benchmark(path, max(1, a.repeat), skip=skip, timeout=a.timeout, count_frames=False,
                                       cli_template=a.cli_args)
    print(f"\n{'measurement':14s} {'half MB':>8s} {'big MB':>8s} {'RSS half':>9s} {'RSS big':>9s} {'ratio':>6s}  verdict")
    out = {"mode": "one_direction" if a.one_direction else "both_directions",
           "big": {"path": big, "bytes": reps["big"]["bytes"]}, "half": {"path": half, "bytes": reps["half"]["bytes"]},
           "size_ratio": reps["big"]["bytes"] / reps["half"]["bytes"], "measurements": {}}
    ours = {}  # name -> ratio, our measurements only: they decide the exit status
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
        elif ratio:
            ours[name] = ratio
        print(f"{name:14s} {reps['half']['bytes'] / 1e6:8.1f} {reps['big']['bytes'] / 1e6:8.1f} "
              f"{mh:9.0f} {mb:9.0f} {bd.fmt(ratio, '6.2f')}  {verdict}")
        out["measurements"][name] = {"ok": True, "rss_mib_half": mh, "rss_mib_big": mb, "ratio": ratio,
                                     "flat": ratio is not None and ratio <= FLAT,
                                     "wall_s_half": rh["wall_s_median"], "wall_s_big": rb["wall_s_median"]}
    print(f"(file size ratio {out['size_ratio']:.2f}; RSS in MiB, median of {max(1, a.repeat)} run(s); flat = ratio <= {FLAT})")
    grows = {n: r for n, r in ours.items() if r > FLAT}
    out["verdict"] = "none measured" if not ours else "grows" if grows else "flat"
    json_out = a.json_out or os.path.join(bd.OUT, "memory_one_direction.json" if a.one_direction else "memory.json")
    with open(json_out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {json_out}")
    ratios = ", ".join(f"{n} {r:.2f}" for n, r in ours.items())
    if not ours:
        print("memory: NOT measured, none of our measurements ran", file=sys.stderr)
        sys.exit(2)
    if grows:
        print(f"memory GROWS with file size: RSS(big)/RSS(half) {ratios} (flat is <= {FLAT})", file=sys.stderr)
        sys.exit(1)
    print(f"memory flat: RSS(big)/RSS(half) {ratios} (<= {FLAT})")


if __name__ == "__main__":
    main()
