#!/usr/bin/env python3
"""Does `pulsar-dissect live` keep up? The real broker and client on loopback at increasing rates.

    sudo .venv/bin/python benchmarks/bench_live.py                      # batched and non-batched, default rates
    sudo .venv/bin/python benchmarks/bench_live.py --mode batched --rates 20000,50000,100000 --seconds 5
    sudo .venv/bin/python benchmarks/bench_live.py --soak 300 --rates 20000   # RSS of the live process over time

For each rate a fresh broker (tests/live_traffic.py, which also runs tcpdump as the independent count) and
`pulsar-dissect live -i lo` (timeline to /dev/null, `-Y 'type == "GAP"'` kept to count gaps) run while one
producer sends at that rate for --seconds and one consumer receives and acks. A rate is kept up with when the
kernel dropped nothing, no GAP came out, and live decoded as many frames as the offline dissection of tcpdump's
file. The table prints the achieved client rate; the highest rate kept up with is the figure for benchmarks/RESULTS.md.
Needs root (packet sockets, tcpdump). Not a test: these machines are noisy.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from live_traffic import LiveRecording, unavailable  # noqa: E402  (the shared broker harness)

CLI = [str(Path(sys.executable).parent / "pulsar-dissect")]


def drive(rec: LiveRecording, rate: int, seconds: float, batched: bool) -> dict:
    """One producer at ``rate`` messages/s for ``seconds``, one consumer acking; what the client API saw."""
    client = rec.client(operation_timeout_seconds=30)
    topic = f"persistent://public/default/live-bench-{rate}-{int(batched)}"
    consumer = client.subscribe(topic, "bench", receiver_queue_size=5000)
    received = [0]
    done = threading.Event()

    def consume():
        while not done.is_set() or received[0] < sent[0]:
            try:
                msg = consumer.receive(1000)
            except Exception:
                if done.is_set():
                    break
                continue
            consumer.acknowledge(msg)
            received[0] += 1

    producer = client.create_producer(topic, batching_enabled=batched, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=5, max_pending_messages=100_000,
                                      block_if_queue_full=True)
    sent = [0]
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    payload = b"x" * 64
    start = time.time()
    while (now := time.time()) < start + seconds:
        due = int((now - start) * rate)
        while sent[0] < due:
            producer.send_async(payload, None)
            sent[0] += 1
        time.sleep(0.001)
    producer.flush()
    elapsed = time.time() - start
    done.set()
    reader.join(timeout=30)
    client.close()
    return {"sent": sent[0], "received": received[0], "rate": sent[0] / elapsed}


def rss_kib(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", text).group(1))


def run(rate: int, seconds: float, batched: bool, soak: float | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        work = Path(tmp)
        with LiveRecording(work, "bench", buffer_kib=262144, immediate=False) as rec:
            gaps = work / "gaps.txt"
            live = subprocess.Popen(CLI + ["live", "-i", "lo", "--port", str(rec.port), "--plain",
                                           "-Y", 'type == "GAP"'], stdout=open(gaps, "w"), stderr=subprocess.PIPE)
            assert "capturing on lo" in live.stderr.readline().decode()
            samples = []
            sampler_stop = threading.Event()

            def sample():
                while not sampler_stop.wait(5):
                    samples.append((time.time(), rss_kib(live.pid)))
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            truth = drive(rec, rate, soak or seconds, batched)
            time.sleep(1.0)
            live.send_signal(signal.SIGINT)
            summary = live.stderr.read().decode()
            live.wait(60)
            sampler_stop.set()
        offline = subprocess.run(CLI + ["stats", str(rec.pcap), "--json", "--port", str(rec.port)],
                                 capture_output=True, text=True).stdout
        import json

        offline_frames = json.loads(offline)["frames"]
        m = re.search(r"(\d+) packets received, (\d+) dropped by the kernel.*; (\d+) frames", summary)
        return {"mode": "batched" if batched else "non-batched", "target": rate, **truth,
                "packets": int(m[1]), "kernel_dropped": int(m[2]), "live_frames": int(m[3]),
                "offline_frames": offline_frames, "gaps": len(gaps.read_text().splitlines()),
                "tcpdump_dropped": rec.packets_dropped, "rss": samples}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="5000,20000,50000,100000")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--mode", choices=("batched", "non-batched", "both"), default="both")
    parser.add_argument("--soak", type=float, help="one long run at the first rate, sampling the live RSS")
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    modes = [True, False] if args.mode == "both" else [args.mode == "batched"]
    rates = [int(r) for r in args.rates.split(",")]
    if args.soak:
        result = run(rates[0], args.seconds, modes[0], soak=args.soak)
        rss = result["rss"]
        print(f"soak {args.soak:.0f} s at {result['rate']:.0f} msg/s: {result['live_frames']} frames, "
              f"{result['kernel_dropped']} dropped, {result['gaps']} gaps")
        for t, kib in rss:
            print(f"  +{t - rss[0][0]:6.0f} s  RSS {kib / 1024:.1f} MiB")
        flat = rss and rss[-1][1] <= 1.25 * min(k for _, k in rss[len(rss) // 4:] or rss)
        print("RSS flat" if flat else "RSS GROWS")
        return 0 if flat else 1
    print(f"{'mode':<12} {'target/s':>9} {'sent/s':>9} {'msgs':>8} {'frames':>8} {'offline':>8} {'dropped':>8} "
          f"{'gaps':>5}  kept up")
    best: dict[str, float] = {}
    for batched in modes:
        for rate in rates:
            r = run(rate, args.seconds, batched)
            ok = r["kernel_dropped"] == 0 and r["gaps"] == 0 and r["live_frames"] == r["offline_frames"]
            if ok:
                best[r["mode"]] = max(best.get(r["mode"], 0), r["rate"])
            print(f"{r['mode']:<12} {rate:>9} {r['rate']:>9.0f} {r['sent']:>8} {r['live_frames']:>8} "
                  f"{r['offline_frames']:>8} {r['kernel_dropped']:>8} {r['gaps']:>5}  {'yes' if ok else 'NO'}",
                  flush=True)
    for mode, rate in best.items():
        print(f"highest rate kept up with, {mode}: {rate:,.0f} messages/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
