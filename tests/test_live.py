"""`pulsar-dissect live` against the real broker and client on loopback, with both capture engines.

The streamed JSON is judged by what the client API sent and received (the sha256 of every payload, the message
ids `send()` returned), and by tcpdump, the independent capture running beside it: the same frames as the
offline dissection of tcpdump's file and of our own `-w` file, and every packet counted once (a packet socket
sees each loopback packet twice).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dissector.capture.files import LINKTYPE_RAW, CapturedPacket, open_capture
from dissector.model import Event
from dissector.options import Options
from dissector.run import live_items
from live_traffic import CaptureUnavailable, LiveRecording, unavailable

CLI = [str(Path(sys.executable).parent / "pulsar-dissect")]
TOPIC = "persistent://public/default/live-1"


def _capture_privilege() -> str | None:
    import socket

    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(3)).close()
    except PermissionError:
        return "capturing needs root or CAP_NET_RAW"
    except (AttributeError, OSError) as exc:
        return f"no packet sockets here: {exc}"
    return None


def _need_live(engine: str) -> None:
    reason = unavailable() or (_capture_privilege() if engine == "socket" else None)
    if engine == "dumpcap" and reason is None and not Path("/usr/bin/dumpcap").exists():
        reason = "dumpcap (Debian package tshark) is not installed"
    if reason:
        pytest.skip(f"oracle missing: {reason}")


def _scenario(rec: LiveRecording, n: int = 120) -> dict:
    """A batching producer and a consumer that acks everything; the client API's view of it."""
    import pulsar

    client = rec.client()
    try:
        producer = client.create_producer(TOPIC, batching_enabled=True, batching_max_messages=40)
        sent: dict[str, str] = {}
        for i in range(n):
            payload = f"live-{i}-{'x' * (i % 17)}".encode()
            producer.send_async(payload, lambda res, mid, p=payload: sent.__setitem__(
                hashlib.sha256(p).hexdigest(), str(mid)) if res == pulsar.Result.Ok else None)
        producer.flush()
        consumer = client.subscribe(TOPIC, "live-sub", initial_position=pulsar.InitialPosition.Earliest)
        received = []
        for _ in range(n):
            msg = consumer.receive(10_000)
            received.append((hashlib.sha256(msg.data()).hexdigest(), msg.message_id()))
            consumer.acknowledge(msg)
        return {"sent": sent, "received": [(sha, (mid.ledger_id(), mid.entry_id(), mid.batch_index()))
                                           for sha, mid in received]}
    except Exception as exc:  # the client's or the broker's fault, not ours to judge
        pytest.skip(f"the client reported a failure (client/broker, not the dissector): {exc}")
    finally:
        client.close()


def _run_live(rec: LiveRecording, work: Path, engine: str, stop_signal=signal.SIGINT):
    out = work / f"ours-{engine}.json"
    pcap = work / f"ours-{engine}.pcap"  # not tcpdump's file (LiveRecording writes <name>.pcap)
    proc = subprocess.Popen(CLI + ["live", "-i", "lo", "--port", str(rec.port), "--json", "-w", str(pcap),
                                   "--engine", engine], stdout=open(out, "w"), stderr=subprocess.PIPE)
    started = proc.stderr.readline().decode()
    assert "capturing on lo" in started, started + proc.stderr.read().decode()
    time.sleep(0.3)
    return proc, out, pcap


def _stop(proc: subprocess.Popen, sig=signal.SIGINT) -> str:
    time.sleep(0.5)  # the last packets
    proc.send_signal(sig)
    stderr = proc.stderr.read().decode()
    assert proc.wait(15) == 0, stderr
    return stderr


def _frames(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if "index" in r]


def _offline(pcap: Path, port: int) -> list[dict]:
    out = subprocess.run(CLI + [str(pcap), "--json", "--port", str(port)], capture_output=True, text=True,
                         check=True).stdout
    return [r for r in map(json.loads, out.splitlines()) if "index" in r]


def _essence(frames: list[dict]) -> list:
    return [(f["type"], f["direction"], json.dumps(f["command"], sort_keys=True),
             json.dumps(f.get("messages"), sort_keys=True)) for f in frames]


@pytest.mark.parametrize("engine", ["socket", "dumpcap"])
def test_live_streams_what_the_client_sent_and_received(tmp_path, engine):
    _need_live(engine)
    try:
        with LiveRecording(tmp_path, f"live-{engine}") as rec:
            proc, out, pcap = _run_live(rec, tmp_path, engine)
            try:
                truth = _scenario(rec)
            finally:
                stderr = _stop(proc)
    except CaptureUnavailable as exc:
        pytest.skip(f"oracle missing: tcpdump cannot capture on lo here: {exc}")
    frames = _frames(out)
    sends = [m for f in frames if f["type"] == "SEND" for m in f["messages"]]
    delivered = [(f, m) for f in frames if f["type"] == "MESSAGE" for m in f["messages"]]
    # every payload the client sent, once per SEND, by sha256; and what the consumer got, with its message id
    assert sorted(m["payload_sha256"] for m in sends) == sorted(truth["sent"])
    by_sha = {m["payload_sha256"]: (m["message_id"]["ledger_id"], m["message_id"]["entry_id"],
                                    m["message_id"]["batch_index"]) for _, m in delivered}
    for sha, mid in truth["received"]:
        assert by_sha[sha] == mid
    assert all(not f["problems"] for f in frames)
    # the same frames as tcpdump's capture and as our own -w file, dissected offline
    assert _essence(_offline(rec.pcap, rec.port)) == _essence(frames)
    assert _essence(_offline(pcap, rec.port)) == _essence(frames)
    # each packet counted once: as many as tcpdump captured, in the summary and in -w
    with open_capture(pcap) as reader:
        written = sum(1 for _ in reader)
    assert f"{written} packets received" in stderr
    if rec.packets_captured is not None:  # a packet socket sees each loopback packet twice: counted once
        assert written == rec.packets_captured


def test_sigterm_and_max_packets_stop_cleanly_with_a_valid_pcap(tmp_path):
    _need_live("socket")
    try:
        with LiveRecording(tmp_path, "live-stop") as rec:
            counted = subprocess.Popen(CLI + ["live", "-i", "lo", "--port", str(rec.port), "--max-packets", "5",
                                              "--json", "-w", str(tmp_path / "five.pcap")],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert "capturing on lo" in counted.stderr.readline().decode()
            framed = subprocess.Popen(CLI + ["live", "-i", "lo", "--port", str(rec.port), "-c", "3", "--json"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert "capturing on lo" in framed.stderr.readline().decode()
            proc, out, pcap = _run_live(rec, tmp_path, "socket")
            try:
                _scenario(rec, n=20)
            finally:
                _stop(proc, signal.SIGTERM)
            assert counted.wait(15) == 0
            shown, _ = framed.communicate(timeout=15)  # -c: three frames shown, as offline, then it stops
            assert framed.returncode == 0
            assert [json.loads(line)["index"] for line in shown.splitlines() if b'"index"' in line] == [1, 2, 3]
    except CaptureUnavailable as exc:
        pytest.skip(f"oracle missing: tcpdump cannot capture on lo here: {exc}")
    with open_capture(tmp_path / "five.pcap") as reader:
        assert sum(1 for _ in reader) == 5
    with open_capture(pcap) as reader:  # flushed and complete after SIGTERM
        assert sum(1 for _ in reader) > 5 and not reader.truncated
    assert _frames(out)


@pytest.mark.parametrize("args, words", [
    (["-i", "no-such-if0"], "no such interface"),
    (["-f", "tcp port nonsense("], "bad capture filter"),
    (["--engine", "carrier-pigeon"], "unknown engine"),
])
def test_live_errors_are_messages_and_exit_2(args, words):
    if args[0] != "--engine":
        _need_live("socket")
    res = subprocess.run(CLI + ["live", "--duration", "1", *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert words in res.stderr and "Traceback" not in res.stderr


def test_the_clock_fires_while_the_link_is_idle():
    """A request, then silence: OVERDUE comes from the wall clock, before any further packet."""
    from framebuild import simple_frame
    from pcapgen import ipv4_tcp

    start = time.time()
    connect = ipv4_tcp("10.0.0.2", "10.0.0.1", 40000, 6650, 1000, 1, 0x18, simple_frame("CONNECT"))
    stop = threading.Event()

    def source():
        yield CapturedPacket(1, start, LINKTYPE_RAW, connect, len(connect))
        while not stop.is_set() and time.time() < start + 5:
            time.sleep(0.05)
            yield None  # idle: only the clock moves

    seen = []
    for item in live_items(source(), Options(request_timeout=0.3)):
        seen.append(item)
        if type(item) is Event and item.kind == "OVERDUE":
            stop.set()
    overdue = [i for i in seen if type(i) is Event and i.kind == "OVERDUE"]
    assert len(overdue) == 1 and overdue[0].details["request_type"] == "CONNECT"
    assert overdue[0].time == pytest.approx(start + 0.3)
    assert time.time() - start < 4  # it came while idle, well before the source ended


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="only asserted in CI, where the runner is root")
def test_ci_can_capture():
    assert _capture_privilege() is None


@pytest.mark.parametrize("style", [{}, {"summary": True}, {"payload_bytes": True}])
def test_live_records_are_the_records_of_the_same_packets_read_from_a_file(style):
    """live_records (what `live` shows) makes the frames' records in the core as analysed_records does."""
    from corpus import capture_path
    from dissector.run import analysed_records, live_records

    path = capture_path("04_chunking.pcap")
    with open_capture(path) as reader:
        packets = list(reader)
    live = list(live_records(iter(packets), **style))
    assert any("index" in r for r in live)
    assert live == list(analysed_records(path, **style))
