#!/usr/bin/env python3
"""Throughput benchmark: pulsar-dissect versus tshark (TCP reassembly) on the same capture, in the same run.

usage: python benchmarks/bench_dissect.py [CAPTURE] [--repeat N] [--quick] [--no-generate] [--skip NAME ...]

CAPTURE defaults to benchmarks/out/perf_big.pcap (made with benchmarks/make_big_capture.sh if missing;
--quick uses benchmarks/out/perf_quick.pcap instead).  Every measurement runs --repeat times, interleaved
(round robin) so that machine noise hits every tool alike; the median wall time is reported.

Measured commands (stdout to /dev/null):
  ours_cli      pulsar-dissect FILE --json
  ours_timeline pulsar-dissect FILE            (the timeline, plain because stdout is not a terminal)
  ours_lib      python: Counter(map(type, dissector.pipeline.dissect_file(FILE)))   (if that function exists)
  ours_analysed python: the same over dissector.run.analysed_events(FILE) (decoding + conversation analysis)
  tshark_reasm  tshark -r FILE -o tcp.desegment_tcp_streams:TRUE -o tcp.reassemble_out_of_order:TRUE
  tshark_floor  tshark -r FILE -d tcp.port==6650,data -o tcp.desegment_tcp_streams:TRUE
  tshark_follow tshark -r FILE -q -z follow,tcp,raw,0
  tshark_follow_all  the same with one -z follow,tcp,raw,I per TCP stream (2..64 streams): all streams reassembled
Ratio = tshark seconds / our seconds: > 1 means we are faster.  Target: ours_cli vs tshark_reasm >= 1.
After timing, the frames of the untimed counting run are checked against the manifest beside the capture
(NAME.json, or --manifest); a mismatch exits 1.  Results also go to benchmarks/out/results.json (--json-out).
"""
import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import pcapgen  # noqa: E402  the one classic-pcap reader/writer, shared with the tests
OUT = os.path.join(HERE, "out")
DEFAULT_BIG = os.path.join(OUT, "perf_big.pcap")
DEFAULT_QUICK = os.path.join(OUT, "perf_quick.pcap")
GNU_TIME = "/usr/bin/time"
MAX_FOLLOW_STREAMS = 64
TARGET = ("ours_cli", "tshark_reasm")  # the issue's target: ours at least as fast as tshark with reassembly

# The library path runs in a child process so that its RSS and start-up are measured like the CLI's.
# name -> (module, function): generators of decoded items, timed without any output.
LIB_PATHS = {
    "ours_lib": ("dissector.pipeline", "dissect_file"),        # decoding only
    "ours_analysed": ("dissector.run", "analysed_events"),     # + conversation analysis (what the CLI prints)
}
LIB_SNIPPET = r"""
import collections, importlib, json, sys
fn = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
c = collections.Counter(map(type, fn(sys.argv[3])))
print(json.dumps({t.__name__: n for t, n in c.items()}))
"""
LIB_PROBE = ("import importlib, sys\n"
             "try:\n    m = importlib.import_module(sys.argv[1])\n"
             "except ImportError as e:\n    print(e, file=sys.stderr); sys.exit(4)\n"
             "sys.exit(0 if callable(getattr(m, sys.argv[2], None)) else 3)")


# ----------------------------------------------------------------------------------------------- helpers
def venv_python():
    p = os.path.join(ROOT, ".venv", "bin", "python")
    return p if os.path.exists(p) else sys.executable


def cli_argv():
    """How to start pulsar-dissect: $PULSAR_DISSECT, the repo venv's console script, PATH, or cli.main."""
    env = os.environ.get("PULSAR_DISSECT")
    if env:
        return env.split()
    p = os.path.join(ROOT, ".venv", "bin", "pulsar-dissect")
    if os.path.exists(p):
        return [p]
    w = shutil.which("pulsar-dissect")
    if w:
        return [w]
    if os.path.exists(os.path.join(ROOT, "cli", "main.py")):
        return [venv_python(), "-c", "import sys; from dissector.cli.main import main; sys.exit(main())"]
    return None


def count_packets(path):
    """Packet count: walk the classic-pcap record headers; otherwise ask capinfos (pcapng)."""
    try:
        return pcapgen.count_pcap_packets(path)
    except ValueError:
        pass
    if shutil.which("capinfos"):
        r = subprocess.run(["capinfos", "-c", "-M", "-T", "-r", path], capture_output=True, text=True)
        try:
            return int(r.stdout.strip().splitlines()[-1].split("\t")[-1])
        except ValueError:
            pass
    return None


def warm_cache(path):
    with open(path, "rb") as f:
        while f.read(1 << 22):
            pass


def run_measured(argv, stdout=subprocess.DEVNULL, timeout=3600, cwd=None):
    """Run argv once; return dict(wall_s, rss_kb, user_s, sys_s, rc, stderr_tail, stdout?)."""
    tf = tempfile.NamedTemporaryFile(prefix="bench-time-", delete=False)
    tf.close()
    use_time = os.access(GNU_TIME, os.X_OK)
    full = ([GNU_TIME, "-v", "-o", tf.name] + argv) if use_time else argv
    err = tempfile.TemporaryFile()
    before = None
    if not use_time:
        import resource
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(full, stdout=stdout, stderr=err, timeout=timeout, cwd=cwd)
        rc = p.returncode
        out = p.stdout
    except subprocess.TimeoutExpired:
        rc, out = "timeout", None
    except OSError as e:
        rc, out = f"OSError: {e}", None
    wall = time.perf_counter() - t0
    err.seek(0)
    etail = err.read()[-2000:].decode(errors="replace").strip()
    err.close()
    res = {"wall_s": wall, "rc": rc, "stderr_tail": etail.splitlines()[-6:] if etail else []}
    if out is not None and stdout == subprocess.PIPE:
        res["stdout"] = out
    if use_time:
        txt = open(tf.name, errors="replace").read()
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", txt)
        res["rss_kb"] = int(m.group(1)) if m else None
        for k, pat in (("user_s", r"User time \(seconds\): ([\d.]+)"), ("sys_s", r"System time \(seconds\): ([\d.]+)")):
            m = re.search(pat, txt)
            res[k] = float(m.group(1)) if m else None
        m = re.search(r"Exit status: (\d+)", txt)
        if m and rc == 0:
            res["rc"] = int(m.group(1))
    else:
        import resource
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # ru_maxrss of children is the max over all children so far: an upper bound only
        res["rss_kb"] = after.ru_maxrss
        res["user_s"] = after.ru_utime - before.ru_utime
        res["sys_s"] = after.ru_stime - before.ru_stime
    os.unlink(tf.name)
    return res


def count_json_output(argv, timeout=3600, cwd=None):
    """Run argv with stdout to a pipe (untimed); count its JSON lines, the frames among them, and the SEND and
    MESSAGE frames with their messages. Returns (lines, counts dict, rc, stderr tail).

    A frame line is an object with an "index" key (events carry "message" instead); the fast path is a line
    that starts with '{"index":' and names neither SEND nor MESSAGE, other lines are parsed."""
    import threading
    try:
        from orjson import loads  # the CLI's own dependency, several times faster on the big MESSAGE lines
    except ImportError:
        loads = json.loads
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    errbuf = []
    th = threading.Thread(target=lambda: errbuf.append(p.stderr.read()), daemon=True)
    th.start()
    lines = 0
    counts = dict.fromkeys(COUNTED, 0)
    carry = b""
    t0 = time.time()

    def take(line):
        nonlocal lines
        if not line.strip():
            return
        lines += 1
        if line.startswith(b'{"index":') and b'"type":"SEND"' not in line and b'"type":"MESSAGE"' not in line:
            counts["frames"] += 1
            return
        try:
            o = loads(line)
        except ValueError:
            return
        if not (isinstance(o, dict) and "index" in o and "message" not in o):
            return
        counts["frames"] += 1
        kind = {"SEND": "send", "MESSAGE": "message"}.get(o.get("type"))
        if kind:
            counts[kind + "_frames"] += 1
            counts[kind + "_messages"] += len(o.get("messages") or ())
    while True:
        b = p.stdout.read(1 << 20)
        if not b:
            break
        parts = (carry + b).split(b"\n")
        carry = parts.pop()
        for line in parts:
            take(line)
        if time.time() - t0 > timeout:
            p.kill()
            break
    take(carry)
    rc = p.wait()
    th.join(5)
    etail = (errbuf[0] if errbuf else b"")[-2000:].decode(errors="replace").strip().splitlines()[-6:]
    return lines, counts, rc, etail


# ----------------------------------------------------------------------------------------- manifest check
# What the counting run counts; a manifest beside the capture states some of them (checked after timing).
COUNTED = ("frames", "send_frames", "send_messages", "message_frames", "message_messages")


def find_manifest(path):
    """NAME.json (or .json.gz) beside NAME.pcap / NAME.pcapng / NAME.pcap.gz, or None."""
    base = os.path.splitext(path[:-3] if path.endswith(".gz") else path)[0]
    return next((m for m in (base + ".json", base + ".json.gz") if os.path.exists(m)), None)


def _is_file_of(path, capture_files):
    """True when path is one of the files the manifest describes (same size and sha256)."""
    import hashlib
    size = os.path.getsize(path)
    wanted = {c.get("sha256") for c in (capture_files or {}).values() if isinstance(c, dict) and c.get("bytes") == size}
    if not wanted - {None}:
        return False
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(1 << 22):
            h.update(b)
    return h.hexdigest() in wanted


def expected_counts(path, manifest):
    """{count: (relation, number, where the manifest says it)} for the counts this manifest states.

    Understands benchmarks/gen/perf_capture.py's OUT.json and the corpus manifests (captures/*.json): the
    client API's counts, and the tshark-derived frame census when the manifest describes this very file."""
    exp = {}
    prod = manifest.get("producer") if isinstance(manifest.get("producer"), dict) else {}
    phases = [p for p in (prod.get("nonbatched"), prod.get("batched")) if isinstance(p, dict)]
    if phases and all(isinstance(p.get("sent"), int) and p.get("errors") == 0 and p.get("ok") == p["sent"]
                      for p in phases):
        exp["send_messages"] = ("==", sum(p["sent"] for p in phases), "producer.*.sent (all ok)")
        entries = [p.get("distinct_entries", p.get("distinct_entries_from_send_receipts")) for p in phases]
        if all(isinstance(e, int) for e in entries):
            exp["send_frames"] = ("==", sum(entries), "producer.*.distinct_entries (one SEND per entry)")
    cons = manifest.get("consumer") if isinstance(manifest.get("consumer"), dict) else {}
    received = [cons.get("received_nonbatched"), cons.get("received_batched")]
    if all(isinstance(r, int) for r in received):
        # the broker may have pushed more than the consumer took before it closed
        exp["message_messages"] = (">=", sum(received), "consumer.received_* (lower bound)")
    census = (manifest.get("derived_frame_census") or {}).get("totals_by_direction_and_type")
    if census and _is_file_of(path, manifest.get("capture_files")):
        src = "derived_frame_census (this very file)"
        exp["frames"] = ("==", sum(census.values()), src)
        exp["send_frames"] = ("==", census.get("client_to_broker:SEND", 0), src)
        exp["message_frames"] = ("==", census.get("broker_to_client:MESSAGE", 0), src)
    return exp


def check_manifest(path, counts, manifest_path=None):
    """Compare our counts with the manifest's. Returns a report dict; report["ok"] is False on a mismatch."""
    mpath = manifest_path or find_manifest(path)
    if not mpath:
        print(f"\nmanifest: none beside {path} (NAME.json or NAME.json.gz): the decoded frames were NOT checked")
        return {"manifest": None, "ok": None}
    opener = gzip.open if mpath.endswith(".gz") else open
    with opener(mpath, "rt") as f:
        exp = expected_counts(path, json.load(f))
    rep = {"manifest": mpath, "ok": None, "checks": {}}
    if not exp:
        print(f"\nmanifest {mpath} states none of the counts checked ({', '.join(COUNTED)})")
        return rep
    if counts is None:
        print(f"\nmanifest {mpath}: NOT checked, the counting run of ours_cli did not happen or failed")
        return rep
    print(f"\nframes checked against {mpath}:")
    rep["ok"] = True
    for name, (rel, want, src) in exp.items():
        got = counts[name]
        ok = got == want if rel == "==" else got >= want
        rep["ok"] &= ok
        rep["checks"][name] = {"ours": got, "relation": rel, "manifest": want, "source": src, "ok": ok}
        print(f"  {name:17s} ours {got:>10d}  {rel}  manifest {want:>10d}  {'ok' if ok else 'MISMATCH'}  ({src})")
    if not rep["ok"]:
        print("MISMATCH: the frames timed are not the frames the manifest describes", file=sys.stderr)
    return rep


def resolve_cli(path, template=None):
    """Find the pulsar-dissect argv that works: FILE --json (the documented form) or the 'dissect' subcommand.

    Probed on the first 40 packets of the capture.  Returns (argv or None, error or None)."""
    cli = cli_argv()
    if not cli:
        return None, "pulsar-dissect not installed (pip install -e .)"
    forms = [template.split()] if template else [["{file}", "--json"], ["dissect", "{file}", "--json"]]
    probe = None
    try:
        fd, probe = tempfile.mkstemp(prefix="bench-probe-", suffix=".pcap")
        os.close(fd)
        pcapgen.copy_pcap(path, probe, max_packets=40)
    except ValueError:
        os.unlink(probe)
        probe = None  # pcapng: probe with the file itself
    errors = []
    try:
        for form in forms:
            argv = cli + [a.replace("{file}", probe or path) for a in form]
            try:
                r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                                   timeout=120 if probe else 3600)
            except (OSError, subprocess.TimeoutExpired) as e:
                errors.append(f"{' '.join(form)}: {e}")
                continue
            if r.returncode == 0:
                return cli + [a.replace("{file}", path) for a in form], None
            tail = r.stderr.decode(errors="replace").strip().splitlines()
            errors.append(f"'{' '.join(form)}' rc={r.returncode}: {tail[-1] if tail else ''}")
    finally:
        if probe:
            os.unlink(probe)
    return None, "pulsar-dissect failed: " + "; ".join(errors)


def ensure_capture(path, quick, generate):
    if os.path.exists(path):
        return True
    if not generate or path not in (DEFAULT_BIG, DEFAULT_QUICK):
        print(f"capture {path} not found", file=sys.stderr)
        return False
    size = "quick" if path == DEFAULT_QUICK else "full"
    print(f"capture {path} missing: generating it ({size}) with benchmarks/make_big_capture.sh ...", flush=True)
    r = subprocess.run([os.path.join(HERE, "make_big_capture.sh"), size])
    return r.returncode == 0 and os.path.exists(path)


# ---------------------------------------------------------------------------------------------- commands
def build_commands(path, skip, cli_template=None):
    tshark = shutil.which("tshark")
    cmds = {}
    if "ours_cli" not in skip:
        argv, why = resolve_cli(path, cli_template)
        desc = "pulsar-dissect FILE --json > /dev/null"
        if argv:
            desc = " ".join(["pulsar-dissect"] + ["FILE" if a == path else a for a in argv[len(cli_argv()):]]) \
                + " > /dev/null"
        cmds["ours_cli"] = {"argv": argv, "side": "ours", "cwd": ROOT, "desc": desc, "unavailable": why}
    if "ours_timeline" not in skip:
        # The default job: the timeline, written plain because stdout is not a terminal.
        exe = shutil.which("pulsar-dissect", path=os.path.dirname(venv_python())) or shutil.which("pulsar-dissect")
        cmds["ours_timeline"] = {"argv": [exe, path] if exe else None, "side": "ours", "cwd": ROOT,
                                 "desc": "pulsar-dissect FILE > /dev/null (timeline)",
                                 "unavailable": None if exe else "pulsar-dissect not installed"}
    py = venv_python()
    for name, (mod, fn) in LIB_PATHS.items():
        if name in skip:
            continue
        probe = subprocess.run([py, "-c", LIB_PROBE, mod, fn], cwd=ROOT, capture_output=True, text=True)
        ok = probe.returncode == 0
        why = None if ok else (f"{mod}.{fn} missing" if probe.returncode == 3 else
                               f"cannot import {mod}: " + (probe.stderr.strip().splitlines() or ["?"])[-1])
        cmds[name] = {"argv": [py, "-c", LIB_SNIPPET, mod, fn, path] if ok else None, "side": "ours", "cwd": ROOT,
                      "desc": f"Counter(map(type, {mod}.{fn}(FILE))) (no output)", "unavailable": why}
    tsh = [
        ("tshark_reasm", ["-r", path, "-o", "tcp.desegment_tcp_streams:TRUE", "-o", "tcp.reassemble_out_of_order:TRUE"],
         "tshark -r FILE -o tcp.desegment_tcp_streams:TRUE -o tcp.reassemble_out_of_order:TRUE > /dev/null"),
        ("tshark_floor", ["-r", path, "-d", "tcp.port==6650,data", "-o", "tcp.desegment_tcp_streams:TRUE"],
         "tshark -r FILE -d tcp.port==6650,data -o tcp.desegment_tcp_streams:TRUE > /dev/null"),
        ("tshark_follow", ["-r", path, "-q", "-z", "follow,tcp,raw,0"],
         "tshark -r FILE -q -z follow,tcp,raw,0 > /dev/null"),
    ]
    # reassembly of every TCP stream (follow needs one -z per stream); only for captures with few streams
    if tshark and "tshark_follow_all" not in skip:
        conv = subprocess.run([tshark, "-r", path, "-q", "-z", "conv,tcp"], capture_output=True, text=True).stdout
        n = sum(1 for line in conv.splitlines() if "<->" in line)
        if 1 < n <= MAX_FOLLOW_STREAMS:
            zs = [a for i in range(n) for a in ("-z", f"follow,tcp,raw,{i}")]
            tsh.append(("tshark_follow_all", ["-r", path, "-q"] + zs,
                        f"tshark -r FILE -q -z follow,tcp,raw,0 ... -z follow,tcp,raw,{n - 1} > /dev/null"))
    for name, args, desc in tsh:
        if name in skip:
            continue
        cmds[name] = {"argv": [tshark] + args if tshark else None, "side": "tshark", "cwd": None, "desc": desc,
                      "unavailable": None if tshark else "tshark not installed"}
    return cmds


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec):
    if x is None:
        w = re.match(r"\d*", spec).group()
        return "-".rjust(int(w)) if w else "-"
    return format(x, spec)


def _log(msg):
    print(msg, flush=True)


def run_benchmark(path, repeat, skip=(), timeout=3600, count_frames=True, cli_template=None, log=_log):
    size = os.path.getsize(path)
    npk = count_packets(path)
    log(f"capture: {path}  {size / 1e6:.1f} MB  {npk} packets   repeat={repeat}")
    warm_cache(path)
    cmds = build_commands(path, set(skip), cli_template)
    for name, c in cmds.items():
        c["runs"] = []
        if c["unavailable"]:
            log(f"  {name}: SKIPPED ({c['unavailable']})")
    # our frame count: one untimed run of the CLI with stdout counted (JSON lines); the library prints it
    cli = cmds.get("ours_cli")
    if cli and cli["argv"] and count_frames:
        log("  counting our JSON lines (one untimed ours_cli run) ...")
        n, counts, rc, etail = count_json_output(cli["argv"], timeout=timeout, cwd=cli["cwd"])
        if rc == 0:
            cli["json_lines"] = n
            cli["json_frames"] = counts["frames"]
            cli["json_counts"] = counts
            log(f"  ours_cli: {n} JSON lines, {counts['frames']} of them frames "
                f"({counts['send_frames']} SEND, {counts['message_frames']} MESSAGE)")
        else:
            cli["unavailable"] = f"pulsar-dissect failed (rc={rc}): " + " | ".join(etail[-3:])
            log(f"  ours_cli: FAILED, rc={rc}; stderr tail:\n    " + "\n    ".join(etail))
    for rep in range(repeat):
        for name, c in cmds.items():
            if c["unavailable"]:
                continue
            r = run_measured(c["argv"], stdout=subprocess.PIPE if name in LIB_PATHS else subprocess.DEVNULL,
                             timeout=timeout, cwd=c["cwd"])
            if name in LIB_PATHS and "stdout" in r:
                try:
                    kinds = json.loads(r.pop("stdout").decode().strip().splitlines()[-1])
                    c["lib_items"] = kinds  # items per class; frames = all but StreamEvent
                    c["lib_frames"] = sum(v for k, v in kinds.items() if k != "StreamEvent")
                except (ValueError, IndexError, AttributeError):
                    r.pop("stdout", None)
            r.pop("stdout", None)
            c["runs"].append(r)
            status = "" if r["rc"] == 0 else f"  FAILED rc={r['rc']}: {' | '.join(r['stderr_tail'][-2:])}"
            log(f"  [{rep + 1}/{repeat}] {name:17s} {r['wall_s']:8.2f} s  "
                f"rss {fmt(r.get('rss_kb') and r['rss_kb'] / 1024, '.0f')} MiB{status}")
            if r["rc"] != 0:
                c["unavailable"] = f"failed (rc={r['rc']}): " + " | ".join(r["stderr_tail"][-3:])
    # summarise
    results = {}
    for name, c in cmds.items():
        ok = [r for r in c["runs"] if r["rc"] == 0]
        wall = median([r["wall_s"] for r in ok])
        fr = c.get("json_frames") if name == "ours_cli" else c.get("lib_frames") if name in LIB_PATHS else None
        results[name] = {
            "command": c["desc"], "side": c["side"], "ok": bool(ok) and not c["unavailable"],
            "error": c["unavailable"], "runs": c["runs"],
            "wall_s_median": wall,
            "rss_mib_median": median([r.get("rss_kb") and r["rss_kb"] / 1024 for r in ok]),
            "rss_mib_max": max([r["rss_kb"] / 1024 for r in ok if r.get("rss_kb")], default=None),
            "cpu_s_median": median([(r.get("user_s") or 0) + (r.get("sys_s") or 0) for r in ok]),
            "frames": fr,
            **({"items_by_type": c["lib_items"]} if "lib_items" in c else {}),
            **({"json_lines": c["json_lines"], "json_counts": c["json_counts"]} if "json_lines" in c else {}),
            "frames_per_s": (fr / wall) if (fr and wall) else None,
            "packets_per_s": (npk / wall) if (npk and wall) else None,
            "mb_per_s": (size / 1e6 / wall) if wall else None,
        }
    ratios = {}
    for o in ["ours_cli", "ours_timeline"] + list(LIB_PATHS):
        for t in [k for k, v in results.items() if v["side"] == "tshark"]:
            if o in results and results[t]["wall_s_median"] and results[o]["wall_s_median"] and results[t]["wall_s_median"]:
                ratios[f"{t}/{o}"] = results[t]["wall_s_median"] / results[o]["wall_s_median"]
    target_key = f"{TARGET[1]}/{TARGET[0]}"
    return {"capture": os.path.abspath(path), "bytes": size, "packets": npk, "repeat": repeat,
            "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": {"cpus": os.cpu_count(), "uname": " ".join(os.uname())},
            "tshark_version": (subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout.splitlines() or [""])[0]
            if shutil.which("tshark") else None,
            "results": results, "ratios_tshark_over_ours": ratios,
            "target": {"ratio": target_key, "value": ratios.get(target_key),
                       "met": (ratios[target_key] >= 1.0) if target_key in ratios else None}}


def print_table(rep):
    print()
    print(f"{'measurement':17s} {'median s':>9s} {'MB/s':>8s} {'pkts/s':>10s} {'frames':>9s} {'frames/s':>10s} "
          f"{'RSS MiB':>8s} {'CPU s':>7s}  command")
    for name, r in rep["results"].items():
        if not r["ok"]:
            print(f"{name:17s} {'n/a':>9s}  {r['error']}")
            continue
        print(f"{name:17s} {fmt(r['wall_s_median'], '9.2f')} {fmt(r['mb_per_s'], '8.1f')} {fmt(r['packets_per_s'], '10.0f')} "
              f"{fmt(r['frames'], '9d')} {fmt(r['frames_per_s'], '10.0f')} {fmt(r['rss_mib_median'], '8.0f')} "
              f"{fmt(r['cpu_s_median'], '7.2f')}  {r['command']}")
    if rep["ratios_tshark_over_ours"]:
        print("\nratios (tshark seconds / our seconds; > 1 means we are faster):")
        for k, v in rep["ratios_tshark_over_ours"].items():
            print(f"  {k:32s} {v:6.2f}")
    t = rep["target"]
    verdict = "n/a (our side did not run)" if t["met"] is None else ("MET" if t["met"] else "NOT MET")
    print(f"\ntarget {t['ratio']} >= 1.0: {verdict}" + (f" ({t['value']:.2f})" if t["value"] else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?", help=f"pcap to dissect (default {os.path.relpath(DEFAULT_BIG, ROOT)})")
    ap.add_argument("--quick", action="store_true", help="default to benchmarks/out/perf_quick.pcap (~36 MB)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported (default 3)")
    ap.add_argument("--no-generate", action="store_true", help="do not make the default capture if it is missing")
    ap.add_argument("--skip", nargs="*", default=[], metavar="NAME",
                    help="measurements to leave out: ours_cli ours_timeline ours_lib ours_analysed tshark_reasm tshark_floor tshark_follow "
                         "tshark_follow_all")
    ap.add_argument("--no-count", action="store_true", help="skip the untimed run that counts our JSON lines")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run before it is killed")
    ap.add_argument("--cli-args", metavar="TEMPLATE",
                    help="pulsar-dissect arguments, {file} = the capture (default: try '{file} --json', "
                         "then 'dissect {file} --json')")
    ap.add_argument("--json-out", default=os.path.join(OUT, "results.json"))
    ap.add_argument("--manifest", help="check the frames against this manifest (default: NAME.json beside the capture)")
    a = ap.parse_args()
    path = a.capture or (DEFAULT_QUICK if a.quick else DEFAULT_BIG)
    if not ensure_capture(path, a.quick, not a.no_generate):
        sys.exit(2)
    rep = run_benchmark(path, max(1, a.repeat), skip=a.skip, timeout=a.timeout, count_frames=not a.no_count,
                        cli_template=a.cli_args)
    print_table(rep)
    # After timing: were the frames timed the right ones? (the untimed counting run's figures)
    rep["manifest_check"] = check_manifest(path, rep["results"].get("ours_cli", {}).get("json_counts"), a.manifest)
    os.makedirs(os.path.dirname(os.path.abspath(a.json_out)), exist_ok=True)
    with open(a.json_out, "w") as f:
        json.dump(rep, f, indent=1)
    print(f"\nwrote {a.json_out}")
    if rep["manifest_check"]["ok"] is False:
        sys.exit(1)


if __name__ == "__main__":
    main()
