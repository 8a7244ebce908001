#!/usr/bin/env python3
"""pulsar-dissect beside its peers, on one capture, in one run: time, peak RSS and the frames each tool found.

usage: python benchmarks/bench_peers.py [CAPTURE] [--repeat N] [--peer-src DIR] [--no-build] [--extra-tshark]

CAPTURE defaults to benchmarks/out/perf_big.pcap when it exists (benchmarks/make_big_capture.sh makes it; this
script never generates it), else captures/02_batching_props_keys.pcap.

Rows (each run --repeat times, round robin; the median wall time and the highest peak RSS are shown):
  cat          cat FILE > /dev/null                                    (reading the file: the floor)
  dpkt         dpkt raw packet parse (no reassembly, no Pulsar): Ethernet/SLL/SLL2/loopback/raw -> IP -> TCP per packet
  tshark       tshark + the C++ Wireshark plugin of apache/pulsar-client-cpp (wireshark/), TCP reassembly on:
               tshark -r FILE -o tcp.desegment_tcp_streams:TRUE -o tcp.reassemble_out_of_order:TRUE
                      -Y apache.pulsar -T fields -e apache.pulsar.frame_size
  json         pulsar-dissect FILE --json
  timeline     pulsar-dissect FILE             (the timeline, plain: stdout is not a terminal)
  stats        pulsar-dissect stats FILE
  --against CLI adds: the same three pulsar-dissect rows run by another build's executable (an earlier commit
               installed in its own venv), in the same rounds: a before/after comparison in one run.
  --extra-tshark adds: tshark + plugin printing its summary lines (no filter, the plugin's tree-less path),
               tshark + plugin -Y apache.pulsar -T json (every field of every Pulsar packet, like --json), and
               tshark with the plugin disabled (--disable-protocol apache.pulsar): plain tshark, where
               heuristic dissectors (SMPP, LBMSRS) misread a few Pulsar packets and make TCP reassemble
               long spans (bench_dissect.py's tshark_reasm).

The peer: tshark loads plugins only when it does not run as root, so as root tshark runs as an unprivileged
user (PULSAR_BENCH_USER, default benchuser) with the plugin in that user's personal plugin folder. With
--peer-src DIR or PULSAR_CPP_SRC (a pulsar-client-cpp checkout; nothing is downloaded, the benchmark must work
offline and this project ships none of the peer's code) the plugin is built and installed first by
benchmarks/build_wireshark_peer.sh. Without a source, a plugin installed earlier is used; when there is none,
or the build fails, the script says why and prints every other row.

Frames found: the tshark row counts the Pulsar frames (PDUs) in its own output (one frame_size value per
frame, several per packet); pulsar-dissect --json: lines that are frames ('{"index":...'; event lines are not
counted); the timeline: lines that start with a frame number; stats: its first line ('N frames on ...');
dpkt: packets (and TCP segments with payload); cat: bytes. The timed runs write to /dev/null: reading 1.3 GB of
JSON through a pipe in this process took a core's worth of time from the tools that use two (a multi-threaded
--json ran 4.6 s counted, 3.5 s to /dev/null, in one session). The counts come from one more, untimed run per
row after the timed ones, whose stdout this process reads through a pipe.
Ratios: this row's median seconds / the reference row's (tshark + plugin, dpkt): < 1 = faster than it;
(best): the fastest run's against tshark's fastest; and, with --repeat > 1, each round's ratio to tshark's run
of the same round, for the machine's speed varies from minute to minute.
Results also go to benchmarks/out/peers.json (--json-out).
"""
import argparse
import gzip
import json
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_dissect as bd

OUT = os.path.join(HERE, "out")
DEFAULT_BIG = os.path.join(OUT, "perf_big.pcap")
DEFAULT_SMALL = os.path.join(ROOT, "captures", "02_batching_props_keys.pcap")
BUILD_SCRIPT = os.path.join(HERE, "build_wireshark_peer.sh")
TSHARK_REASM = ["-o", "tcp.desegment_tcp_streams:TRUE", "-o", "tcp.reassemble_out_of_order:TRUE"]
PROTO = "apache.pulsar"  # the plugin's protocol filter name (and its Decode-As name)

DPKT_SNIPPET = r"""
import json, sys
import dpkt
try:
    import dpkt.sll2
except ImportError:  # dpkt < 1.9.8
    pass
path = sys.argv[1]
f = open(path, "rb")
magic = f.read(4)
f.seek(0)
rd = dpkt.pcapng.Reader(f) if magic == b"\x0a\x0d\x0d\x0a" else dpkt.pcap.Reader(f)
dl = rd.datalink()
n = segs = pay = skipped = 0
IPS = (dpkt.ip.IP, dpkt.ip6.IP6)
for ts, buf in rd:
    n += 1
    try:
        if dl == 1:
            l3 = dpkt.ethernet.Ethernet(buf).data
        elif dl == 113:
            l3 = dpkt.sll.SLL(buf).data
        elif dl == 276:
            l3 = dpkt.sll2.SLL2(buf).data
        elif dl in (0, 108):
            l3 = dpkt.loopback.Loopback(buf).data
        elif dl in (12, 14, 101):
            l3 = (dpkt.ip.IP if buf[:1] and buf[0] >> 4 == 4 else dpkt.ip6.IP6)(buf)
        else:
            skipped += 1
            continue
    except Exception:  # UnpackError, a short packet, no dpkt.sll2
        skipped += 1
        continue
    if isinstance(l3, IPS) and isinstance(l3.data, dpkt.tcp.TCP) and l3.data.data:
        segs += 1
        pay += len(l3.data.data)
print(json.dumps({"packets": n, "tcp_payload_segments": segs, "tcp_payload_bytes": pay,
                  "not_parsed": skipped, "linktype": dl}))
"""


# ------------------------------------------------------------------------------------------ stdout counters
class Counter:
    """Fed the child's stdout chunk by chunk; .result() -> (count or None, description)."""

    def feed(self, chunk):
        pass

    def result(self):
        return None, ""


class SubstringCounter(Counter):
    """Occurrences of a pattern that starts a line ('\\n' + pattern); the first line counts too."""

    def __init__(self, pattern, unit):
        self.pat = b"\n" + pattern
        self.tail = b"\n"
        self.n = 0
        self.unit = unit

    def feed(self, chunk):
        data = self.tail + chunk
        self.n += data.count(self.pat)
        self.tail = data[-(len(self.pat) - 1):]

    def result(self):
        return self.n, f"{self.n:,} {self.unit}"


class LineCounter(Counter):
    """Whole lines given to a function that returns how many items the line holds."""

    def __init__(self, per_line, unit):
        self.per_line = per_line
        self.carry = b""
        self.n = 0
        self.unit = unit

    def feed(self, chunk):
        data = self.carry + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self.carry = data
            return
        self.carry = data[cut + 1:]
        self.n += self.per_line(data[:cut + 1])

    def result(self):
        if self.carry:
            self.n += self.per_line(self.carry + b"\n")
            self.carry = b""
        return self.n, f"{self.n:,} {self.unit}"


def tshark_fields_count(block):
    """-T fields -e apache.pulsar.frame_size: one line per packet, the packet's frames comma-separated."""
    return sum(line.count(b",") + 1 for line in block.split(b"\n") if line.strip())


TIMELINE_FRAME = re.compile(rb"^ *\d+ +\+", re.MULTILINE)  # '    12  +0.010604 p18 ...'; events start with '-'


class Capture(Counter):
    """Keeps the (small) output; parse(text) -> (count, description)."""

    def __init__(self, parse, limit=1 << 20):
        self.buf = bytearray()
        self.parse = parse
        self.limit = limit

    def feed(self, chunk):
        if len(self.buf) < self.limit:
            self.buf += chunk

    def result(self):
        return self.parse(bytes(self.buf).decode(errors="replace"))


def parse_stats(text):
    m = re.search(r"^([\d,]+) frames? on", text, re.MULTILINE)
    return (int(m.group(1).replace(",", "")), f"{m.group(1)} frames (its own count)") if m else (None, "?")


def parse_dpkt(text):
    try:
        d = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, "?"
    return d["packets"], f"{d['packets']:,} packets, {d['tcp_payload_segments']:,} TCP with payload"


# ---------------------------------------------------------------------------------------------- running
GNU_TIME = "/usr/bin/time"


def _run_counted(argv, counter, env, cwd, timeout, err):
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE if counter else subprocess.DEVNULL, stderr=err,
                             env=env, cwd=cwd)
    except OSError as e:
        return {"rc": f"OSError: {e}", "wall_s": 0.0}, [str(e)]
    killed = []
    timer = threading.Timer(timeout, lambda: (killed.append(1), p.kill()))
    timer.start()
    if counter:
        fd = p.stdout.fileno()
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            counter.feed(b)
        p.stdout.close()
    _, status, ru = os.wait4(p.pid, 0)  # not p.wait(): wait4 also gives the child's rusage
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)  # before cancel(): a late kill() then does nothing
    timer.cancel()
    err.seek(0)
    etail = err.read()[-3000:].decode(errors="replace").strip().splitlines()
    return {"rc": "timeout" if killed else p.returncode, "wall_s": wall, "rss_kb": ru.ru_maxrss,
            "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "rss_source": "wait4 (upper bound)"}, etail


def run_counted(argv, counter, env=None, cwd=None, timeout=7200):
    """Run argv, stream its stdout into counter (or to /dev/null when counter is None).

    Peak RSS and CPU: from GNU time -v (apt-get install time) around the command when present. Otherwise
    from wait4() on the child, which is an upper bound: Linux starts the child's maximum RSS at the RSS of
    this Python process at fork (about 18 MiB), and includes any descendant it waited for."""
    use_time = os.access(GNU_TIME, os.X_OK)
    tf = None
    if use_time:
        fd, tf = tempfile.mkstemp(prefix="bench-peers-time-")
        os.close(fd)
        argv = [GNU_TIME, "-v", "-o", tf] + argv
    try:
        with tempfile.TemporaryFile() as err:
            res, etail = _run_counted(argv, counter, env, cwd, timeout, err)
        if tf and res.get("rss_kb") is not None:
            with open(tf, errors="replace") as f:
                txt = f.read()
            got = {}
            for k, pat in (("rss_kb", r"Maximum resident set size \(kbytes\): (\d+)"),
                           ("user_s", r"User time \(seconds\): ([\d.]+)"),
                           ("sys_s", r"System time \(seconds\): ([\d.]+)"),
                           ("exit", r"Exit status: (\d+)")):
                m = re.search(pat, txt)
                if m:
                    got[k] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
            if "rss_kb" in got:
                res.update(rss_kb=got["rss_kb"], user_s=got.get("user_s", 0.0), sys_s=got.get("sys_s", 0.0),
                           rss_source="GNU time -v")
            if res["rc"] == 0 and got.get("exit"):
                res["rc"] = got["exit"]
    finally:
        if tf:
            os.unlink(tf)
    res["stderr_tail"] = etail[-6:]
    if counter:
        res["count"], res["found"] = counter.result()
    return res


# --------------------------------------------------------------------------------------------- the peer
def bench_user():
    """(name, uid, gid, home) of the user tshark runs as, or (name, None, ..) when it does not exist."""
    if os.geteuid() != 0:
        pw = pwd.getpwuid(os.geteuid())
        return pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir
    name = os.environ.get("PULSAR_BENCH_USER", "benchuser")
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return name, None, None, None
    return name, pw.pw_uid, pw.pw_gid, pw.pw_dir


def as_user(user, argv):
    """(argv, env) that run argv as the unprivileged user (as is, when we are not root)."""
    name, uid, gid, home = user
    if os.geteuid() != 0:
        return argv, None
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=home, USER=name, LOGNAME=name)
    if shutil.which("setpriv"):  # exec, no fork: the child measured is tshark itself
        return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--"] + argv, env
    return ["runuser", "-u", name, "--"] + argv, env


def plugin_loaded(user, tshark):
    argv, env = as_user(user, [tshark, "-G", "protocols"])
    r = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    return any(line.split("\t")[-1:] == [PROTO] for line in r.stdout.splitlines())


def prepare_peer(src, build, user, log):
    """Build/install the plugin when a source is given; check tshark loads it. Returns (ok, text)."""
    tshark = shutil.which("tshark")
    if not tshark:
        return False, "tshark not installed (Debian: apt-get install tshark)"
    name, uid = user[0], user[1]
    if uid is None:
        return False, (f"user {name} does not exist: as root, tshark must run as an unprivileged user to load "
                       f"plugins (useradd -m {name}, or PULSAR_BENCH_USER=<user>)")
    if uid == 0:
        return False, f"PULSAR_BENCH_USER={name} is root: tshark does not load plugins as root"
    built = None
    if src and build:
        log(f"building the peer from {src} with {os.path.relpath(BUILD_SCRIPT, ROOT)} ...")
        env = dict(os.environ, PULSAR_BENCH_USER=name)
        r = subprocess.run(["bash", BUILD_SCRIPT, src], capture_output=True, text=True, env=env, check=False)
        out = r.stdout.strip().splitlines()
        for line in out[:-1]:
            log("  " + line)
        last = out[-1] if out else ""
        if r.returncode != 0 or not last.startswith("PLUGIN "):
            why = last.replace("PEER-UNAVAILABLE ", "") or f"build script exited {r.returncode}"
            details = r.stderr.strip().splitlines()
            return False, "could not build the C++ plugin: " + why + "".join("\n    " + d for d in details[-6:])
        built = last[len("PLUGIN "):]
    if not plugin_loaded(user, tshark):
        if src and build:
            return False, f"built {built} but tshark (as {name}) does not load it"
        return False, (f"the C++ plugin is not installed for user {name} and no source was given: pass a "
                       f"pulsar-client-cpp checkout with --peer-src DIR or PULSAR_CPP_SRC (it is not downloaded "
                       f"at benchmark time: the benchmark must work offline), e.g. "
                       f"git clone https://github.com/apache/pulsar-client-cpp, then "
                       f"{os.path.relpath(__file__, ROOT)} --peer-src pulsar-client-cpp")
    argv, env = as_user(user, [tshark, "-G", "plugins"])
    r = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    where = next((line.split("\t")[-1] for line in r.stdout.splitlines() if "pulsar" in line.lower()), "?")
    how = f"built now from {src}" if built else "installed earlier (not rebuilt: --peer-src DIR to build)"
    return True, f"C++ plugin {where} ({how}), tshark runs as {name}"


def readable_by(user, path):
    argv, env = as_user(user, ["test", "-r", path])
    return subprocess.run(argv, env=env, check=False).returncode == 0


# ------------------------------------------------------------------------------------------------ rows
def build_rows(path, args, user, peer_ok, peer_why, log):
    rows = {}
    skip = set(args.skip)

    def add(key, label, argv=None, counter=None, env=None, why=None, ref=None):
        if key in skip:
            return
        rows[key] = {"label": label, "argv": argv, "counter": counter, "env": env,
                     "unavailable": why if why else (None if argv else "unavailable"), "runs": [], "ref": ref}

    add("cat", "cat", ["cat", path], None)
    py = bd.venv_python()
    probe = subprocess.run([py, "-c", "import dpkt"], capture_output=True, check=False)
    add("dpkt", "dpkt raw packet parse (no reassembly, no Pulsar)", [py, "-c", DPKT_SNIPPET, path],
        lambda: Capture(parse_dpkt),
        why=None if probe.returncode == 0 else f"dpkt missing: pip install dpkt (into {py})")
    tshark = shutil.which("tshark")
    decode_as = [] if args.port == 6650 else ["-d", f"tcp.port=={args.port},{PROTO}"]
    why = None if peer_ok else peer_why
    if peer_ok and not readable_by(user, path):
        why = f"{path} is not readable by {user[0]} (tshark runs as that user)"
    base = [tshark, "-r", path] + TSHARK_REASM + decode_as
    argv, env = as_user(user, base + ["-Y", PROTO, "-T", "fields", "-e", f"{PROTO}.frame_size"])
    add("tshark", "tshark + the C++ Wireshark plugin", argv if not why else None,
        lambda: LineCounter(tshark_fields_count, "Pulsar frames"), env=env, why=why)
    if args.extra_tshark:
        for key, label, extra in (
                ("tshark_summary", "  tshark + plugin, summary lines (no filter)", []),
                ("tshark_json", "  tshark + plugin -Y apache.pulsar -T json", ["-Y", PROTO, "-T", "json"]),
                ("tshark_noplugin", "  tshark, plugin disabled (= plain tshark)", ["--disable-protocol", PROTO])):
            argv, env = as_user(user, base + extra)
            add(key, label, argv if not why else None, None, env=env, why=why)
    cli = bd.cli_argv()
    cwhy = None if cli else "pulsar-dissect not installed (pip install -e .)"
    add("json", "pulsar-dissect FILE --json", cli and cli + [path, "--json"],
        lambda: SubstringCounter(b'{"index":', "frames"), why=cwhy)
    add("timeline", "pulsar-dissect FILE (timeline)", cli and cli + [path],
        lambda: LineCounter(lambda b: len(TIMELINE_FRAME.findall(b)), "frames"), why=cwhy)
    add("stats", "pulsar-dissect stats FILE", cli and cli + ["stats", path], lambda: Capture(parse_stats), why=cwhy)
    if args.against:
        # another build of this tool (an earlier commit installed in its own venv), timed in the same rounds
        other = [args.against]
        owhy = None if os.access(args.against, os.X_OK) else f"{args.against} is not an executable"
        add("json_against", "  the other build: FILE --json", other + [path, "--json"],
            lambda: SubstringCounter(b'{"index":', "frames"), why=owhy)
        add("timeline_against", "  the other build: FILE (timeline)", other + [path],
            lambda: LineCounter(lambda b: len(TIMELINE_FRAME.findall(b)), "frames"), why=owhy)
        add("stats_against", "  the other build: stats FILE", other + ["stats", path], lambda: Capture(parse_stats),
            why=owhy)
    return rows


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec, width):
    return format(x, spec).rjust(width) if x is not None else "-".rjust(width)


def census(path):
    """The frame count the corpus manifest states for this very file, if any."""
    m = bd.find_manifest(path)
    if not m:
        return None
    try:
        with (gzip.open if m.endswith(".gz") else open)(m, "rt") as f:
            exp = bd.expected_counts(path, json.load(f))
    except (OSError, ValueError):
        return None
    return exp.get("frames")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", nargs="?")
    ap.add_argument("--repeat", type=int, default=1, help="runs per row, round robin (default 1)")
    ap.add_argument("--peer-src", default=os.environ.get("PULSAR_CPP_SRC"),
                    help="pulsar-client-cpp source folder to build the plugin from (default $PULSAR_CPP_SRC)")
    ap.add_argument("--no-build", action="store_true", help="use the installed plugin even if a source is given")
    ap.add_argument("--port", type=int, default=6650, help="broker port; not 6650: -d tcp.port==PORT,apache.pulsar")
    ap.add_argument("--against", metavar="CLI",
                    help="another build's pulsar-dissect executable (e.g. an earlier commit in its own venv): "
                         "its --json, timeline and stats rows are timed in the same rounds")
    ap.add_argument("--extra-tshark", action="store_true", help="also time three other tshark variants")
    ap.add_argument("--skip", nargs="*", default=[], metavar="ROW",
                    help="rows to leave out: cat dpkt tshark json timeline stats")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds per run before it is killed")
    ap.add_argument("--json-out", default=os.path.join(OUT, "peers.json"))
    a = ap.parse_args()
    path = os.path.abspath(a.capture or (DEFAULT_BIG if os.path.exists(DEFAULT_BIG) else DEFAULT_SMALL))
    if not os.path.exists(path):
        sys.exit(f"capture {path} not found")

    def log(msg):
        print(msg, flush=True)

    user = bench_user()
    peer_ok, peer_why = prepare_peer(a.peer_src, not a.no_build, user, log)
    log(("peer: " if peer_ok else "peer: UNAVAILABLE: ") + peer_why)
    size = os.path.getsize(path)
    npk = bd.count_packets(path)
    log(f"capture: {path}  {size / 1e6:.1f} MB  {npk if npk is not None else '?'} packets   repeat={a.repeat}")
    bd.warm_cache(path)
    rows = build_rows(path, a, user, peer_ok, peer_why, log)
    for key, r in rows.items():
        if r["unavailable"]:
            log(f"  {key}: SKIPPED: {r['unavailable']}")
    for i in range(max(1, a.repeat)):
        for key, r in rows.items():
            if r["unavailable"]:
                continue
            res = run_counted(r["argv"], None, env=r["env"], cwd=ROOT, timeout=a.timeout)
            if key == "cat":
                res["count"], res["found"] = size, f"{size:,} bytes"
            r["runs"].append(res)
            bad = "" if res["rc"] == 0 else f"  FAILED rc={res['rc']}: {' | '.join(res['stderr_tail'][-3:])}"
            log(f"  [{i + 1}/{a.repeat}] {key:15s} {res['wall_s']:8.2f} s  rss {res['rss_kb'] / 1024 if res.get('rss_kb') else 0:7.1f} MiB"
                f"  {res.get('found', '')}{bad}")
            if res["rc"] != 0:
                r["unavailable"] = f"failed (rc={res['rc']}): " + " | ".join(res["stderr_tail"][-3:])
    # what each tool found: one more run, untimed, its stdout read here
    for key, r in rows.items():
        if r["unavailable"] or not r["counter"]:
            continue
        res = run_counted(r["argv"], r["counter"](), env=r["env"], cwd=ROOT, timeout=a.timeout)
        log(f"  [count] {key:15s} {res.get('found', '')}")
        if res["rc"] == 0:
            for run in r["runs"]:
                run["count"], run["found"] = res.get("count"), res.get("found", "")
    # summary
    for r in rows.values():
        ok = [x for x in r["runs"] if x["rc"] == 0]
        r["ok"] = bool(ok) and not r["unavailable"]
        r["wall_s"] = median([x["wall_s"] for x in ok])
        r["rss_mib"] = max([x["rss_kb"] / 1024 for x in ok if x.get("rss_kb")], default=None)
        r["cpu_s"] = median([x["user_s"] + x["sys_s"] for x in ok])
        r["best_s"] = min([x["wall_s"] for x in ok], default=None)
        counts = sorted({x.get("count") for x in ok} - {None})
        r["count"] = counts[0] if len(counts) == 1 else None
        r["found"] = ok[-1].get("found", "") if ok else ""
        if len(counts) > 1:
            r["found"] += f"  (varied between runs: {counts})"
    ref_t = rows.get("tshark", {}).get("wall_s") if rows.get("tshark", {}).get("ok") else None
    ref_d = rows.get("dpkt", {}).get("wall_s") if rows.get("dpkt", {}).get("ok") else None
    print()
    print(f"capture {os.path.relpath(path, ROOT) if path.startswith(ROOT) else path}: {size / 1e6:.1f} MB, "
          f"{npk if npk is not None else '?'} packets; median of {a.repeat} run(s); ratio = seconds / the reference's "
          f"seconds (< 1: faster)")
    ref_best = rows["tshark"]["best_s"] if ref_t else None
    hdr = (f"{'tool':50s} {'seconds':>8s} {'CPU s':>7s} {'peak RSS MiB':>12s} {'vs tshark+plugin':>16s} "
           f"{'(best)':>7s} {'vs dpkt':>8s}  found")
    print(hdr)
    print("-" * len(hdr) + "-" * 30)
    for key, r in rows.items():
        if not r["ok"]:
            print(f"{r['label']:50s} {'n/a':>8s}  {r['unavailable']}")
            continue
        rt = f"{r['wall_s'] / ref_t:.2f}x" if ref_t else "-"
        rd = f"{r['wall_s'] / ref_d:.2f}x" if ref_d else "-"
        rb = f"{r['best_s'] / ref_best:.2f}x" if ref_best else "-"
        print(f"{r['label']:50s} {fmt(r['wall_s'], '.2f', 8)} {fmt(r['cpu_s'], '.2f', 7)} {fmt(r['rss_mib'], '.1f', 12)} "
              f"{rt:>16s} {rb:>7s} {rd:>8s}  {r['found']}")
    # the rows of one round ran minutes apart at most: a ratio within a round pairs the same machine state
    if ref_t and a.repeat > 1:
        print()
        print("vs tshark + plugin, round by round (this machine's speed varies from minute to minute):")
        for key in ("json", "timeline", "stats"):
            r = rows.get(key)
            if not r or not r["ok"]:
                continue
            pairs = [x["wall_s"] / t["wall_s"] for x, t in zip(r["runs"], rows["tshark"]["runs"])
                     if x["rc"] == 0 and t["rc"] == 0]
            r["round_ratios"] = pairs
            print(f"  {key:9s} " + "  ".join(f"{v:.2f}x" for v in pairs) + f"   median {median(pairs):.2f}x")
    # do the frame counts agree?
    frames = {k: rows[k]["count"] for k in ("tshark", "json", "timeline", "stats") if rows.get(k, {}).get("ok")}
    exp = census(path)
    print()
    if frames:
        names = {"tshark": "tshark + plugin", "json": "--json", "timeline": "timeline", "stats": "stats"}
        print("Pulsar frames: " + ", ".join(f"{names[k]} {v:,}" if v is not None else f"{names[k]} ?"
                                            for k, v in frames.items())
              + (f"; the capture's manifest (frame census): {exp[1]:,}" if exp else ""))
        vals = set(frames.values()) | ({exp[1]} if exp else set())
        print("  they agree" if len(vals) == 1 else "  they DIFFER (see benchmarks/README.md, 'bench_peers.py')")
    tv = subprocess.run(["tshark", "--version"], capture_output=True, text=True, check=False).stdout.splitlines()[:1] \
        if shutil.which("tshark") else []
    report = {"capture": path, "bytes": size, "packets": npk, "repeat": a.repeat,
              "generated_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "host": {"cpus": os.cpu_count(), "uname": " ".join(os.uname())},
              "tshark_version": tv[0] if tv else None, "peer": {"ok": peer_ok, "text": peer_why},
              "rows": {k: {kk: vv for kk, vv in r.items() if kk not in ("counter", "env")} for k, r in rows.items()},
              "frames": frames, "census": exp and exp[1]}
    os.makedirs(os.path.dirname(os.path.abspath(a.json_out)), exist_ok=True)
    with open(a.json_out, "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(f"\nwrote {a.json_out}")


if __name__ == "__main__":
    main()
