"""Make a large Pulsar capture for the performance benchmark, with the real broker and client.

Adapted (and trimmed) from the corpus generator ../shared/corpus/gen/{harness.py,s20_perf_big.py}, so that
the benchmark does not need ../shared.  Traffic is the same as the corpus's ``perf_big``:

  * a fresh pulsar-lite 0.2.0 broker on 127.0.0.1:6650 (metrics endpoint disabled) and
    tcpdump -i lo -s 0 -B 131072 'tcp port 6650' (no -U) -> classic pcap, link type EN10MB: both started and
    stopped by tests/live_traffic.py's LiveRecording, the harness the live tests use;
  * producer process (own connection): N_NB non-batched 64-byte messages (producer 'perf-nb'), then N_B
    batched 64-byte messages (producer 'perf-b', batching_max_messages=1000, 10 ms, 128 KiB), send_async;
  * then (sequential mode) a consumer process (own connection): Exclusive sub 'perf-sub', Earliest,
    receiver_queue 1000, receives until every distinct message was seen (or 15 s idle), acknowledge()s each.

usage: python perf_capture.py OUT.pcap [--nonbatched N] [--batched M] [--concurrent]
Writes OUT.pcap and OUT.json (a small manifest: counts the client API reported, tcpdump's packet/drop counts).
Only processes started here are signalled (LiveRecording, by their own handles).  Only 127.0.0.1 is used.
"""
import argparse
import hashlib
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import threading
import time

GEN = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(GEN)), "tests"))
from live_traffic import BROKER_CONFIG, LiveRecording, unavailable  # noqa: E402  (the shared broker harness)

PORT = 6650
TOPIC = "persistent://public/default/perf-1"
IDLE_MS = 15000


def pl_nb(i):
    return (b"nb-%08d-" % i).ljust(64, b".")


def pl_b(i):
    return (b"b-%09d-" % i).ljust(64, b".")


def client():
    import pulsar
    return pulsar.Client(f"pulsar://127.0.0.1:{PORT}", operation_timeout_seconds=30,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))


def consumer_proc(q, ready, n_nb, n_b):
    import pulsar
    c = client()
    cons = c.subscribe(TOPIC, "perf-sub", initial_position=pulsar.InitialPosition.Earliest,
                       receiver_queue_size=1000)
    ready.set()
    h = {"nb": hashlib.sha256(), "b": hashlib.sha256()}
    seen = {"nb": bytearray(n_nb), "b": bytearray(n_b)}
    cnt = {"nb": 0, "b": 0}
    dups = {"nb": 0, "b": 0}
    distinct = 0
    stop = "all distinct messages received"
    t0 = time.time()
    while distinct < n_nb + n_b:
        try:
            m = cons.receive(IDLE_MS)
        except Exception as e:  # timeout
            stop = f"no message for {IDLE_MS} ms ({e})"
            break
        d = m.data()
        k = "nb" if d.startswith(b"nb-") else "b"
        idx = int(d.split(b"-")[1])
        if seen[k][idx]:
            dups[k] += 1
        else:
            distinct += 1
            seen[k][idx] = 1
            h[k].update(d)
        cnt[k] += 1
        cons.acknowledge(m)
    time.sleep(0.5)
    cons.close()
    c.close()
    q.put({"stop_reason": stop, "seconds": round(time.time() - t0, 2),
           "received_nonbatched": cnt["nb"], "received_batched": cnt["b"],
           "nonbatched_duplicates": dups["nb"], "batched_duplicates": dups["b"],
           "nonbatched_missing": n_nb - sum(seen["nb"]), "batched_missing": n_b - sum(seen["b"]),
           # sha256 over the distinct payloads in first-seen order (equals the sent hash if in order)
           "nonbatched_distinct_sha256": h["nb"].hexdigest(), "batched_distinct_sha256": h["b"].hexdigest()})


def producer_proc(q, n_nb, n_b):
    c = client()
    out = {}
    phases = (("nonbatched", n_nb, pl_nb, dict(producer_name="perf-nb", batching_enabled=False)),
              ("batched", n_b, pl_b, dict(producer_name="perf-b", batching_enabled=True,
                                           batching_max_messages=1000, batching_max_publish_delay_ms=10,
                                           batching_max_allowed_size_in_bytes=131072)))
    for phase, n, fn, kw in phases:
        if n == 0:
            continue
        p = c.create_producer(TOPIC, max_pending_messages=10000, block_if_queue_full=True,
                              send_timeout_millis=120000, **kw)
        h = hashlib.sha256()
        done = threading.Event()
        st = {"ok": 0, "err": 0, "entries": set()}
        lk = threading.Lock()

        def cb(res, mid, st=st, n=n, done=done, lk=lk):
            with lk:
                if str(res) == "Result.Ok":
                    st["ok"] += 1
                    st["entries"].add((mid.ledger_id(), mid.entry_id()))
                else:
                    st["err"] += 1
                if st["ok"] + st["err"] == n:
                    done.set()
        t0 = time.time()
        for i in range(n):
            d = fn(i)
            h.update(d)
            p.send_async(d, cb)
        p.flush()
        done.wait(600)
        out[phase] = {"producer_name": kw["producer_name"], "sent": n, "ok": st["ok"], "errors": st["err"],
                      "sent_sha256": h.hexdigest(), "distinct_entries": len(st["entries"]),
                      "seconds": round(time.time() - t0, 2)}
        p.close()
    c.close()
    q.put(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="output pcap path")
    ap.add_argument("--nonbatched", type=int, default=200_000)
    ap.add_argument("--batched", type=int, default=1_000_000)
    ap.add_argument("--concurrent", action="store_true",
                    help="start the consumer before the producer (pulsar-lite then sends many duplicates)")
    a = ap.parse_args()
    why = unavailable()  # pulsar-lite, pulsar-client, tcpdump, root
    if why:
        sys.exit(f"cannot record: {why}")
    out = os.path.abspath(a.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    work = tempfile.mkdtemp(prefix="pulsar-bench-gen-")
    t_start = time.time()
    manifest = {"capture": os.path.basename(out), "generator": "benchmarks/gen/perf_capture.py",
                "args": {"nonbatched": a.nonbatched, "batched": a.batched,
                         "mode": "concurrent" if a.concurrent else "sequential"},
                "broker": {"listen": f"127.0.0.1:{PORT}", "config": BROKER_CONFIG.format(extra="")}}
    # As the corpus: tcpdump's default buffered output and a 128 MiB kernel buffer, so that nothing is dropped.
    with LiveRecording(work, "perf", port=PORT, pcap=out, buffer_kib=131072, immediate=False) as rec:
        q = mp.Queue()
        ready = mp.Event()
        cp = mp.Process(target=consumer_proc, args=(q, ready, a.nonbatched, a.batched))
        pp = mp.Process(target=producer_proc, args=(q, a.nonbatched, a.batched))
        if a.concurrent:
            cp.start(); ready.wait(30); pp.start()
            res = [q.get(timeout=1800), q.get(timeout=1800)]
        else:
            pp.start(); res = [q.get(timeout=1800)]; pp.join()
            cp.start(); res.append(q.get(timeout=1800))
        pp.join(); cp.join()
        prod = next(x for x in res if "stop_reason" not in x)
        cons = next(x for x in res if "stop_reason" in x)
        manifest.update({"producer": prod, "consumer": cons})
        time.sleep(0.2)  # with LiveRecording's own pause: the last acks and closes reach the wire
    try:  # tcpdump drops privileges and leaves the file owned by user 'tcpdump'
        st = os.stat(os.path.dirname(out))
        os.chown(out, st.st_uid, st.st_gid)
        os.chmod(out, 0o644)
    except OSError:
        pass
    cap = {"bytes": os.path.getsize(out)}
    if rec.packets_captured is not None:
        cap["packets_captured"] = rec.packets_captured
    if rec.packets_dropped is not None:
        cap["packets_dropped_by_kernel"] = rec.packets_dropped
    manifest["capture_file"] = cap
    manifest["generation_seconds"] = round(time.time() - t_start, 1)
    with open(os.path.splitext(out)[0] + ".json", "w") as f:
        json.dump(manifest, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {out}: {cap} in {manifest['generation_seconds']} s")
    if cap.get("packets_dropped_by_kernel"):
        print("WARNING: the kernel dropped packets; the capture is incomplete", file=sys.stderr)


if __name__ == "__main__":
    main()
