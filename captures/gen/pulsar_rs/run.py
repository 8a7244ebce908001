#!/usr/bin/env python3
"""Records the pulsar-rs captures (captures/pulsar_rs/rs_*.pcap + .json manifest + .broker.log).

For each capture it starts a fresh pulsar-lite broker on 127.0.0.1:16650 (never 6650), runs
`tcpdump -i lo -s 0 -U -w X.pcap 'tcp port 16650'`, runs the scenario with the pulsar-rs generator
(the cargo project next to this file) and, for the cross-client capture, the official Python client, then stops
the broker (so its FIN is captured), stops tcpdump with SIGINT and writes the manifest.

Every scenario field of a manifest is what a client API reported (send receipts, received messages, ack/nack
results, receive timeouts). Only `capture_files`, `tcp_conversations_tshark` and `derived_frame_census` are
read from the pcap, and never by the project's dissector.

usage (run with a python that has pulsar-lite 0.2.0 and pulsar-client 3.13.0, e.g. the checkout's .venv/bin/python):
  python captures/gen/pulsar_rs/run.py [capture ...]   (CARGO_TARGET_DIR: where the generator was built)
Only processes started here are signalled, by PID.
"""
import datetime
import hashlib
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES_GEN = os.path.dirname(HERE)
OUT_DIR = os.path.join(os.path.dirname(CAPTURES_GEN), "pulsar_rs")
WORK = os.environ.get("PULSARRS_WORK", os.path.join(tempfile.gettempdir(), "pulsarrs-capture-run"))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(HERE, "target"))
GEN_BIN = os.path.join(TARGET_DIR, "release", "pulsarrs-capture-gen")
BROKER_CONF = os.path.join(HERE, "broker.toml")
PORT = 16650
URL = f"pulsar://127.0.0.1:{PORT}"

# capture name -> (generator args, description)
CAPTURES = {
    "rs_01_basic": (["basic"], "pulsar-rs producer without batching or compression: 10 messages, each with "
                    "properties idx/scenario and key key-<i%3>, sent one at a time. A pulsar-rs Exclusive consumer "
                    "(Earliest, subscription rs-basic-sub) tries to receive and ack each; then the official Python "
                    "client reads the same messages on subscription py-sub and acks each."),
    "rs_02_batch": (["batch", "none"], "pulsar-rs producer with batching (batch_size 5, 200 ms timeout), no "
                    "compression: 20 messages with properties and keys key-<i%4>. A pulsar-rs Exclusive consumer "
                    "tries to receive and ack each; then the official Python client reads them on py-sub."),
    "rs_03_snappy": (["batch", "snappy"], "As rs_02 with Snappy (pulsar-rs writes Snappy's framing format), plus "
                     "a non-batched Snappy producer sending 2 messages of ~1.8 kB."),
    "rs_04_lz4": (["batch", "lz4"], "As rs_03 with LZ4 (raw block)."),
    "rs_04_zstd": (["batch", "zstd"], "As rs_03 with ZSTD."),
    "rs_04_zlib": (["batch", "zlib"], "As rs_03 with ZLIB."),
    "rs_05_nack": (["nack-by-id"], "Producer A batched (5 per batch, 10 messages), producer B non-batched (3 "
                   "messages). A Shared pulsar-rs consumer subscribes at Latest (after the sends, so nothing is "
                   "dispatched to it) and calls nack_with_id for A#2, A#7, B#1 (pulsar-rs sends "
                   "REDELIVER_UNACKNOWLEDGED_MESSAGES at once, with the batch index), then ack_with_id for all 13 "
                   "ids, using the ids the send futures returned. (Receiving and nacking delivered messages cannot "
                   "work against pulsar-lite: see README.)"),
    "rs_06_cross_snappy": (["produce-cross", "snappy"], "pulsar-rs produces 10 Snappy-compressed batched messages "
                           "(2 batches of 5, framing format) and then 2 plain non-batched ones; the OFFICIAL "
                           "Python client (pulsar-client 3.13.0, C++ core) subscribes (Exclusive, Earliest) and "
                           "receives with 3 s timeouts, acking what it gets. Expected: it cannot decompress the "
                           "Snappy entries, acks them with validation_error=DecompressionError and delivers only "
                           "the 2 plain messages."),
    "rs_07_partitioned": (["partitioned"], "The broker makes every new topic partitioned (broker-partitioned.toml: "
                          "default_partitions = 3; pulsar-lite has no admin API). A non-batched pulsar-rs producer "
                          "with RoutingPolicy::RoundRobin sends 12 messages with keys key-<i%4> (routed by "
                          "murmur3(key) % 3) and properties; then the official Python client subscribes to the "
                          "partitioned topic (one consumer per partition, same name) and acks each message."),
    "rs_08_many_on_one_connection": (["many"], "One pulsar-rs client, one connection: producers rs-many-batched "
                                     "(topic rs-many-a, batches of 5, keys and properties, 10 messages), "
                                     "rs-many-plain (rs-many-b, not batched, no key or properties, 4 messages) and "
                                     "rs-many-zstd (rs-many-c, not batched, ZSTD, 3 messages) send at the same time; "
                                     "then a Shared and an Exclusive consumer (Latest) on rs-many-a / rs-many-b "
                                     "ack by the receipts' ids, individually (a) and cumulatively up to the last "
                                     "(b). Then the official Python client reads rs-many-a on py-sub."),
    "rs_09_errors": (["errors"], "What the broker refuses, each refused call from its own pulsar-rs client (its own "
                     "connection, retries bounded to 1): an Exclusive-access producer rs-err-exclusive sends 3 "
                     "messages; a second producer with the same name; a second Exclusive-access producer; an "
                     "Exclusive consumer on rs-err-sub, then a second one on the same subscription; a send after "
                     "the first producer's close()."),
    "rs_10_reader_seek_cumulative": (["seek-cumulative"], "pulsar-rs produces 10 batched (5 per batch) and 4 plain "
                                     "messages and closes its producers; its Exclusive consumer at Latest calls cumulative_ack_with_id (batched "
                                     "#7) and seek by a publish time one hour ahead. Then the official Python "
                                     "client: consumer py-consumer (Exclusive, Earliest) receives all, acks "
                                     "cumulatively up to #6, seeks to the id of #2 and receives again, acks "
                                     "cumulatively up to the last (if any), closes; a second consumer py-consumer-2 "
                                     "on py-sub receives what is left and acks cumulatively; then a reader py-reader starts after the first "
                                     "plain message, reads, seeks to earliest and reads 3 more."),
}

# capture name -> broker config file next to this script (default broker.toml)
BROKER_CONFIGS = {"rs_07_partitioned": "broker-partitioned.toml"}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def versions():
    v = {"pulsar (crate)": None, "pulsar-lite (PyPI)": None, "pulsar-client (PyPI)": None}
    lock = open(os.path.join(HERE, "Cargo.lock")).read()
    for crate in ("pulsar", "snap", "lz4", "zstd", "flate2", "prost", "tokio"):
        m = re.search(r'name = "%s"\nversion = "([^"]+)"' % re.escape(crate), lock)
        v[f"{crate} (crate)"] = m.group(1) if m else None
    import pulsar
    import pulsar_lite
    v["pulsar-lite (PyPI)"] = pulsar_lite.__version__
    v["pulsar-client (PyPI)"] = pulsar.__version__
    v["rustc"] = run(["rustc", "--version"]).stdout.strip()
    v["protoc"] = run(["protoc", "--version"]).stdout.strip()
    v["tcpdump"] = run(["tcpdump", "--version"]).stdout.splitlines()[0]
    v["tshark"] = run(["tshark", "--version"]).stdout.splitlines()[0]
    return v


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timeout waiting for {what}")


def port_open():
    import socket
    try:
        socket.create_connection(("127.0.0.1", PORT), 0.2).close()
        return True
    except OSError:
        return False


class Broker:
    def __init__(self, workdir, config=BROKER_CONF):
        import pulsar_lite
        self.bin = os.path.join(os.path.dirname(pulsar_lite.__file__), "bin", "pulsar-lite")
        self.workdir = workdir
        self.config = config
        self.log = os.path.join(workdir, "broker.log")

    def start(self):
        if port_open():
            raise RuntimeError(f"port {PORT} is already in use")
        self.log_file = open(self.log, "w")
        self.proc = subprocess.Popen([self.bin, "--config", self.config, "--addr", f"127.0.0.1:{PORT}",
                                      "--db-path", os.path.join(self.workdir, "data.db"), "--log-level", "info"],
                                     cwd=self.workdir, stdout=self.log_file, stderr=subprocess.STDOUT)
        wait_for(port_open, 10, "broker port")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()


class Tcpdump:
    def __init__(self, pcap, workdir):
        self.pcap = pcap
        self.err_path = os.path.join(workdir, "tcpdump.stderr")

    def start(self):
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-B", "131072", "-n", "-U", "-w", self.pcap,
                                      f"tcp port {PORT}"], stdout=self.err, stderr=self.err)
        wait_for(lambda: "listening on" in open(self.err_path).read(), 15, "tcpdump")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        self.err.close()
        text = open(self.err_path).read()
        info = {"tool_stderr_tail": text.strip().splitlines()[-3:]}
        for key, pattern in (("packets_captured", r"(\d+) packets captured"),
                             ("packets_dropped_by_kernel", r"(\d+) packets dropped by kernel")):
            m = re.search(pattern, text)
            if m:
                info[key] = int(m.group(1))
        return info


def pcap_packet_count(path):
    """Counts records of a classic pcap file (read here, not by any dissector)."""
    with open(path, "rb") as f:
        header = f.read(24)
        endian = "<" if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        count = 0
        while True:
            record = f.read(16)
            if len(record) < 16:
                return count
            incl_len = struct.unpack(endian + "IIII", record)[2]
            f.seek(incl_len, 1)
            count += 1


def tshark_conversations(pcap):
    proc = run(["tshark", "-n", "-r", pcap, "-d", f"tcp.port=={PORT},pulsar", "-q", "-z", "conv,tcp"])
    text = proc.stdout
    if proc.returncode != 0:  # Debian's tshark 4.0 has no Pulsar dissector, so -d is refused: count without it
        text = run(["tshark", "-n", "-r", pcap, "-q", "-z", "conv,tcp"]).stdout
    conversations = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d.]+:\d+)\s+<->\s+([\d.]+:\d+)\s+(.*)$", line)
        if m:
            cols = re.findall(r"(\d+)\s+(\d+(?:\.\d+)?\s(?:bytes|kB|MB|GB))", m.group(3))
            rest = m.group(3).split()
            conversations.append({"a": m.group(1), "b": m.group(2),
                                  "frames_b_to_a": int(cols[0][0]), "bytes_b_to_a": cols[0][1],
                                  "frames_a_to_b": int(cols[1][0]), "bytes_a_to_b": cols[1][1],
                                  "frames_total": int(cols[2][0]), "bytes_total": cols[2][1],
                                  "rel_start_s": float(rest[-2]), "duration_s": float(rest[-1])})
    return conversations


def payload_fields(hex_text):
    data = bytes.fromhex(hex_text)
    fields = {"payload_len": len(data), "payload_sha256": sha256(data)}
    try:
        text = data.decode()
        fields["payload_utf8" if len(data) <= 256 else "payload_utf8_prefix"] = text if len(data) <= 256 else text[:48]
    except UnicodeDecodeError:
        fields["payload_hex_prefix"] = data[:48].hex()
    return fields


def replace_payload_hex(node):
    """Swaps each payload_hex the generator printed for its length, sha256 and (short) text."""
    if isinstance(node, dict):
        if "payload_hex" in node:
            node.update(payload_fields(node.pop("payload_hex")))
        for value in node.values():
            replace_payload_hex(value)
    elif isinstance(node, list):
        for value in node:
            replace_payload_hex(value)


def run_generator(args, workdir):
    started = time.time()
    env = dict(os.environ, RUST_LOG="pulsar=info")
    proc = run([GEN_BIN] + args[:1] + [URL] + args[1:], timeout=180, env=env)
    report = json.loads(proc.stdout) if proc.stdout.strip() else {"fatal_error": "no output"}
    with open(os.path.join(workdir, "generator.stderr"), "w") as f:
        f.write(proc.stderr)
    report["generator_exit_code"] = proc.returncode
    # pulsar-rs tells about connection and decoding errors only in its log (env_logger, RUST_LOG=pulsar=info)
    report["client_log_warnings_and_errors"] = [
        line for line in proc.stderr.splitlines() if re.match(r"\[(WARN|ERROR)\s", line)][:40]
    report["generator_wall_s"] = round(time.time() - started, 2)
    replace_payload_hex(report)
    return report


def received_record(msg, started):
    """What the official client's API returned for one message."""
    data = msg.data()
    mid = msg.message_id()
    record = {"message_id": {"ledger_id": mid.ledger_id(), "entry_id": mid.entry_id(),
                             "partition": mid.partition(), "batch_index": mid.batch_index(), "str": str(mid)},
              "topic": msg.topic_name(),
              "payload_len": len(data), "payload_sha256": sha256(data), "properties": msg.properties(),
              "partition_key": msg.partition_key() or None, "redelivery_count": msg.redelivery_count(),
              "publish_timestamp_ms": msg.publish_timestamp(), "producer_name": msg.producer_name(),
              "t_s": round(time.time() - started, 3)}
    if len(data) <= 256:
        try:
            record["payload_utf8"] = data.decode()
        except UnicodeDecodeError:
            record["payload_hex"] = data.hex()
    return record


def python_consumer(topic, workdir, expected_total, subscription, consumer_name):
    """The official Python client consumes what pulsar-rs produced; records exactly what its API returned."""
    import pulsar
    log_path = os.path.join(workdir, f"pulsar-client-{subscription}.log")
    client = pulsar.Client(URL, operation_timeout_seconds=15,
                           logger=pulsar.FileLogger(pulsar.LoggerLevel.Info, log_path))
    consumer = client.subscribe(topic, subscription, consumer_type=pulsar.ConsumerType.Exclusive,
                                initial_position=pulsar.InitialPosition.Earliest, consumer_name=consumer_name)
    events, received, timeouts = [], [], 0
    started = time.time()
    while timeouts < 2 and len(received) < expected_total:
        try:
            msg = consumer.receive(timeout_millis=3000)
        except pulsar.Timeout:
            timeouts += 1
            events.append({"event": "receive_timeout", "timeout_ms": 3000, "t_s": round(time.time() - started, 3)})
            continue
        record = received_record(msg, started)
        consumer.acknowledge(msg)
        record["app_action"] = "acknowledge"
        received.append(record)
        events.append({"event": "received", "i": len(received) - 1})
    consumer.close()
    client.close()
    log_lines = open(log_path, errors="replace").read().splitlines() if os.path.exists(log_path) else []
    notable = [line for line in log_lines if re.search(r"decompress|corrupt|discard|validation|snappy", line, re.I)]
    return {"client": f"pulsar-client {pulsar.__version__} (Python, bundled C++ core)",
            "topic": topic, "subscription": subscription, "consumer_name": consumer_name, "sub_type": "Exclusive",
            "initial_position": "Earliest", "receive_timeout_ms": 3000, "stop_rule": "2 receive timeouts",
            "received": received, "events": events,
            "summary": {"received": len(received), "receive_timeouts": timeouts},
            "client_log_lines_about_decompression": notable[:20]}


def python_seek_cumulative_reader(topic, workdir, expected_total):
    """The official client over pulsar-rs's messages: a consumer that acks cumulatively and seeks, then a reader
    that starts at a message id and seeks. Records exactly what its API returned (each call and its result)."""
    import pulsar
    log_path = os.path.join(workdir, "pulsar-client-seek.log")
    client = pulsar.Client(URL, operation_timeout_seconds=15,
                           logger=pulsar.FileLogger(pulsar.LoggerLevel.Info, log_path))
    started = time.time()

    def call(calls, name, fn, **details):
        try:
            fn()
            result = "ok"
        except Exception as e:  # the API's own refusal is the record
            result = f"{type(e).__name__}: {e}"
        calls.append({"call": name, **details, "result": result, "t_s": round(time.time() - started, 3)})

    def drain(receiver, limit, events, label):
        got, timeouts = [], 0
        while timeouts < 2 and len(got) < limit:
            try:
                msg = (receiver.read_next if hasattr(receiver, "read_next") else receiver.receive)(3000)
            except pulsar.Timeout:
                timeouts += 1
                events.append({"event": "receive_timeout", "stage": label, "timeout_ms": 3000,
                               "t_s": round(time.time() - started, 3)})
                continue
            got.append((msg, received_record(msg, started)))
            events.append({"event": "received", "stage": label, "i": len(got) - 1})
        return got

    calls, events = [], []
    consumer = client.subscribe(topic, "py-sub", consumer_type=pulsar.ConsumerType.Exclusive,
                                initial_position=pulsar.InitialPosition.Earliest, consumer_name="py-consumer")
    first = drain(consumer, expected_total, events, "first pass")
    for _, record in first:
        record["app_action"] = "none (covered by the cumulative acks below)"
    if len(first) > 6:
        call(calls, "acknowledge_cumulative", lambda: consumer.acknowledge_cumulative(first[6][0]),
             received_index=6, message_id=first[6][1]["message_id"]["str"])
    if len(first) > 2:
        call(calls, "seek", lambda: consumer.seek(first[2][0].message_id()), received_index=2,
             message_id=first[2][1]["message_id"]["str"])
    second = drain(consumer, expected_total, events, "after seek")
    for _, record in second:
        record["app_action"] = "none (covered by the cumulative ack below)"
    if second:
        call(calls, "acknowledge_cumulative", lambda: consumer.acknowledge_cumulative(second[-1][0]),
             stage="after seek", received_index=len(second) - 1, message_id=second[-1][1]["message_id"]["str"])
    call(calls, "consumer.close", consumer.close)

    # Where the seek and the cumulative acks left the subscription: a new consumer on it, acking cumulatively.
    resubscribe_calls, resubscribe_events = [], []
    again = client.subscribe(topic, "py-sub", consumer_type=pulsar.ConsumerType.Exclusive,
                             initial_position=pulsar.InitialPosition.Earliest, consumer_name="py-consumer-2")
    resubscribed = drain(again, expected_total, resubscribe_events, "resubscribed")
    if resubscribed:
        call(resubscribe_calls, "acknowledge_cumulative", lambda: again.acknowledge_cumulative(resubscribed[-1][0]),
             received_index=len(resubscribed) - 1, message_id=resubscribed[-1][1]["message_id"]["str"])
    call(resubscribe_calls, "consumer.close", again.close)

    reader_calls, reader_events = [], []
    plain = [m for m, r in first if r["message_id"]["batch_index"] < 0]
    start = plain[0].message_id() if plain else pulsar.MessageId.earliest
    reader = client.create_reader(topic, start, reader_name="py-reader")
    reader_calls.append({"call": "create_reader", "start_message_id": str(start), "result": "ok"})
    read = drain(reader, expected_total, reader_events, "from the start id")
    call(reader_calls, "reader.seek", lambda: reader.seek(pulsar.MessageId.earliest), message_id="earliest")
    reread = drain(reader, 3, reader_events, "after seek to earliest")
    call(reader_calls, "reader.close", reader.close)
    client.close()
    log_lines = open(log_path, errors="replace").read().splitlines() if os.path.exists(log_path) else []
    notable = [line for line in log_lines if re.search(r"decompress|corrupt|discard|validation|seek|reset", line, re.I)]
    consumer_report = {
        "client": f"pulsar-client {pulsar.__version__} (Python, bundled C++ core)", "topic": topic,
        "subscription": "py-sub", "consumer_name": "py-consumer", "sub_type": "Exclusive",
        "initial_position": "Earliest", "receive_timeout_ms": 3000, "stop_rule": "2 receive timeouts per stage",
        "received": [r for _, r in first],
        "received_after_seek": [r for _, r in second],
        "api_calls": calls, "events": events,
        "summary": {"received": len(first), "received_after_seek": len(second),
                    "receive_timeouts": sum(e["event"] == "receive_timeout" for e in events)},
        "client_log_lines_about_decompression": [line for line in notable if "seek" not in line.lower()][:20],
        "client_log_lines_about_seek": [line for line in notable if "seek" in line.lower()][:20],
    }
    reader_report = {
        "reader_name": "py-reader", "start_message_id": str(start),
        "read": [r for _, r in read], "read_after_seek": [r for _, r in reread],
        "api_calls": reader_calls, "events": reader_events,
        "summary": {"read": len(read), "read_after_seek": len(reread)},
    }
    resubscribe_report = {
        "subscription": "py-sub", "consumer_name": "py-consumer-2", "sub_type": "Exclusive",
        "received": [r for _, r in resubscribed], "api_calls": resubscribe_calls, "events": resubscribe_events,
        "summary": {"received": len(resubscribed)},
    }
    return consumer_report, resubscribe_report, reader_report


def notes_from_reports(manifest):
    """Plain-language notes, made only from what the client APIs (and pulsar-rs's log) reported."""
    notes = []
    scenario = manifest.get("scenario", {})
    events = scenario.get("events", [])
    if "consumer" in scenario and scenario.get("summary", {}).get("received") == 0:
        closes = [e["result"] for e in events if e["event"] == "consumer_close"]
        errors = [line for line in scenario.get("client_log_warnings_and_errors", []) if "Decoding(" in line]
        notes.append("The pulsar-rs consumer's stream ended without yielding a message "
                     f"(events: {[e['event'] for e in events if e['event'] not in ('producer_close',)]}; "
                     f"consumer.close() returned {closes}). Its log says: {errors[:1]}. pulsar-rs 6.9.1 always "
                     "reads a magic number + CRC32C after a MESSAGE command; pulsar-lite sends MESSAGE frames "
                     "without them, so pulsar-rs drops the connection (see README).")
    for key in ("python_consumer", "cross_consumer"):
        report = manifest.get(key)
        if report:
            # Only what was sent to the topic it read (rs_08 has three topics).
            on_topic = {p["name"] for p in scenario.get("producers", []) if p.get("topic", report.get("topic"))
                        == report.get("topic")}
            sent = {r["payload_sha256"] for r in scenario.get("sent", []) if r["producer"] in on_topic}
            matched = sum(r["payload_sha256"] in sent for r in report["received"])
            notes.append(f"{key}: the official Python client received {report['summary']['received']} of the "
                         f"{len(sent)} messages sent to {report.get('topic', 'the topic')} ({matched} with a "
                         f"payload sha256 equal to a sent one) and had {report['summary']['receive_timeouts']} "
                         "receive timeouts.")
    return notes


def record_capture(name):
    args, description = CAPTURES[name]
    workdir = os.path.join(WORK, name)
    subprocess.run(["rm", "-rf", workdir], check=True)
    os.makedirs(workdir)
    os.makedirs(OUT_DIR, exist_ok=True)
    pcap = os.path.join(OUT_DIR, f"{name}.pcap")
    broker_conf = os.path.join(HERE, BROKER_CONFIGS.get(name, "broker.toml"))
    broker, tcpdump = Broker(workdir, broker_conf), Tcpdump(pcap, workdir)
    manifest = {"capture": name, "description": description, "notes": []}
    broker.start()
    try:
        tcpdump.start()
    except BaseException:
        broker.stop()
        raise
    time.sleep(0.3)
    t0 = datetime.datetime.now(datetime.timezone.utc).isoformat()
    try:
        scenario = manifest["scenario"] = run_generator(args, workdir)
        if args[0] == "produce-cross":
            manifest["cross_consumer"] = python_consumer(scenario["topic"], workdir, scenario["summary"]["sent"],
                                                         "py-cross-sub", "py-cross-consumer")
        elif args[0] == "many":  # the official client reads the batched producer's topic
            topic_a = scenario["producers"][0]["topic"]
            count = sum(m["producer"] == scenario["producers"][0]["name"] for m in scenario["sent"])
            manifest["python_consumer"] = python_consumer(topic_a, workdir, count, "py-sub", "py-consumer")
        elif args[0] == "seek-cumulative":
            (manifest["python_consumer"], manifest["python_consumer_resubscribed"],
             manifest["python_reader"]) = python_seek_cumulative_reader(
                scenario["topic"], workdir, scenario["summary"]["sent"])
        elif args[0] in ("basic", "batch", "partitioned"):
            # pulsar-rs's own consumer cannot read pulsar-lite's MESSAGE frames (see README): the official
            # client reads the same messages on a second subscription, so the capture has real consumer acks.
            manifest["python_consumer"] = python_consumer(scenario["topic"], workdir, scenario["summary"]["sent"],
                                                          "py-sub", "py-consumer")
    except Exception as e:  # keep the capture and say what failed
        manifest["scenario_exception"] = f"{type(e).__name__}: {e}"
    manifest["notes"] = notes_from_reports(manifest)
    time.sleep(0.5)
    t1 = datetime.datetime.now(datetime.timezone.utc).isoformat()
    broker.stop()  # first, so the broker's FIN is in the capture
    time.sleep(0.5)
    tcpdump_info = tcpdump.stop()
    os.chown(pcap, os.getuid(), os.getgid())  # tcpdump drops to its own user when writing
    data = open(pcap, "rb").read()
    manifest.update({
        "generated_utc": [t0, t1],
        "generator": "captures/gen/pulsar_rs/run.py + captures/gen/pulsar_rs (cargo project)",
        "generator_args": args,
        "versions": versions(),
        "broker": {"impl": "pulsar-lite (PyPI, native binary pulsar_lite/bin/pulsar-lite)",
                   "listen": f"127.0.0.1:{PORT}", "port": PORT,
                   "config_file": f"captures/gen/pulsar_rs/{os.path.basename(broker_conf)}",
                   "config": open(broker_conf).read(), "fresh_db": True, "log_file": f"{name}.broker.log"},
        "dissector_hint": f"--port {PORT}",
        "bpf_filter": f"tcp port {PORT}",
        "capture_files": {"tcpdump": dict(file=os.path.basename(pcap), bytes=len(data), sha256=sha256(data),
                                          packets_in_file=pcap_packet_count(pcap), **tcpdump_info)},
        "tcp_conversations_tshark": tshark_conversations(pcap),
    })
    try:  # secondary, derived from the pcap by the corpus's own census script (not the dissector)
        sys.path.insert(0, CAPTURES_GEN)
        import census
        manifest["derived_frame_census"] = {"source": "captures/gen/census.py (tshark follow,tcp,raw + CRC32C)",
                                            "streams": census.census(pcap)}
    except Exception as e:
        manifest["derived_frame_census"] = {"error": f"{type(e).__name__}: {e}"}
    with open(os.path.join(OUT_DIR, f"{name}.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    generator_log = os.path.join(workdir, "generator.stderr")
    if os.path.exists(generator_log):
        subprocess.run(["cp", generator_log, os.path.join(OUT_DIR, f"{name}.pulsar-rs.log")], check=True)
        manifest["scenario"]["client_log_file"] = f"{name}.pulsar-rs.log"
    log = open(broker.log, "rb").read()
    with open(os.path.join(OUT_DIR, f"{name}.broker.log"), "wb") as f:
        f.write(log[:200_000])
    print(f"[{name}] {len(data)} bytes, {manifest['capture_files']['tcpdump']['packets_in_file']} packets")
    return manifest


def main():
    if not os.path.exists(GEN_BIN):
        sys.exit(f"build the generator first: cd {HERE} && CARGO_TARGET_DIR={TARGET_DIR} nice -n 10 cargo build "
                 "--release")
    names = sys.argv[1:] or list(CAPTURES)
    if len(names) == 1:
        record_capture(names[0])
        return
    # One process per capture: the C++ core's logger is process-wide, and the first FileLogger would keep
    # every later capture's client log.
    for name in names:
        subprocess.run([sys.executable, os.path.abspath(__file__), name], check=True)


if __name__ == "__main__":
    main()
