"""Scenarios that make the real pulsar-lite broker and the official client (pulsar-client, C++ core) produce the
traffic behind each warning, for ``test_warnings_recorded.py``; and the frame-built captures for the warnings
the real broker and client cannot produce.

Each scenario runs inside a ``LiveRecording`` (broker on a free loopback port, tcpdump on ``lo``) and returns
what the client API reported (message ids received, acknowledged, which calls failed, how long a call took):
the tests judge the decoded records against that, never against our own output.

Some scenarios need a client in a process of its own (to stop it, kill it, or let it exit without closing
anything): this file is also that child (``python warning_scenarios.py ROLE URL TOPIC ...``), which prints one
JSON line per step on stdout. Only processes started here are signalled, through their own Popen handle.

``Recorded.items`` keeps what ``analysed_events`` produced; ``Recorded.records`` are the JSON contract of the
same items plus, under the test-only key ``_findings``, each frame finding's id and parameters (the contract
carries ids and messages, not parameters) and, under ``_params``, an event's parameters beside its details.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
from live_traffic import ORACLE_MISSING, RecordsView, is_client_error  # noqa: F401  (re-exported for the tests)
RECEIVE_MS = 10_000


class ClientMisbehaved(Exception):
    """The client or the broker did not do what the scenario needs (their behaviour, not the dissector's)."""


def mid_of(msg_or_id) -> list[int]:
    """[ledger, entry] of a client Message or MessageId (JSON-friendly)."""
    mid = msg_or_id.message_id() if hasattr(msg_or_id, "message_id") else msg_or_id
    return [mid.ledger_id(), mid.entry_id()]


def close_all(*things) -> None:
    for thing in things:
        if thing is not None:
            try:
                thing.close()
            except Exception:  # closing after a failure must not hide that failure
                pass


# ============================================================================ decoded records


@dataclass
class Recorded(RecordsView):
    truth: dict
    records: list[dict]
    items: list = field(repr=False, default_factory=list)
    port: int | None = None
    pcap: Path | None = None
    packets_dropped: int | None = None

    def position(self, rec: dict) -> int:
        """Where a record is in the record order (identity, not equality)."""
        return next(i for i, r in enumerate(self.records) if r is rec)

    def with_finding(self, pid: str) -> list[dict]:
        return [f for f in self.frames if pid in ids(f)]


def ids(rec: dict) -> list[str]:
    """The problem ids of a frame record (from the contract's ``expert``)."""
    return [e["id"] for e in rec.get("expert", ())]


def params(rec: dict, pid: str) -> list[dict]:
    """The parameters of every finding ``pid`` of a frame record."""
    return [f["params"] for f in rec.get("_findings", ()) if f["id"] == pid]


def only_params(rec: dict, pid: str) -> dict:
    found = params(rec, pid)
    assert len(found) == 1, (rec.get("index"), pid, ids(rec))
    return found[0]


def analyse(pcap: Path, port: int | None = None, **options) -> tuple[list, list[dict]]:
    """(analysed items, records with ``_findings`` / ``_params``) of a capture."""
    from dissector.model import Annotated
    from dissector.options import Options
    from dissector.output.records import record
    from dissector.run import analysed_events

    opts = Options(ports=frozenset({port}) if port else frozenset(), **options)
    items = list(analysed_events(pcap, opts))
    records = []
    for item in items:
        rec = record(item)
        if type(item) is Annotated:
            found = item.frame.pdu.findings + item.findings
            rec["_findings"] = [{"id": f.id, "params": f.params} for f in found]
        elif item.params:
            rec["_params"] = item.params
        records.append(json.loads(json.dumps(rec, default=str)))
    return items, records


def record_live(tmp_path_factory, name: str, scenario, **options) -> Recorded:
    """Run ``scenario(rec, work) -> truth`` inside a fresh recording and decode it (``options``: Options fields).
    Skips with ``oracle missing: ...`` when the broker, the client or tcpdump cannot run here, and with the
    client's own report when the client or the broker fails the scenario."""
    from live_traffic import play

    rec, truth = play(tmp_path_factory, name, scenario, misbehaved=(ClientMisbehaved,))
    items, records = analyse(rec.pcap, rec.port, **options)
    return Recorded(truth, records, items, rec.port, rec.pcap, rec.packets_dropped)


# ============================================================================ a client in its own process


def start_child(role: str, url: str, topic: str, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), role, url, topic, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def read_child_line(child: subprocess.Popen, timeout: float) -> dict:
    """The child's next JSON line on stdout, within ``timeout`` seconds (ClientMisbehaved otherwise)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([child.stdout], [], [], 0.1)
        if ready:
            line = child.stdout.readline()
            if line:
                return json.loads(line)
            break  # EOF: the child ended
        if child.poll() is not None:
            break
    stop_child(child)
    err = child.stderr.read()[-1500:] if child.stderr else ""
    raise ClientMisbehaved(f"the client process ({child.args[2]}) said nothing within {timeout}s "
                           f"(exit {child.returncode}): {err}")


def stop_child(child: subprocess.Popen) -> None:
    """Kill our own child if it still runs (by its Popen handle), and reap it."""
    if child.poll() is None:
        child.kill()  # SIGKILL also ends a stopped process
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _child_main(argv: list[str]) -> None:
    import pulsar

    role, url, topic = argv[:3]
    client = pulsar.Client(url, operation_timeout_seconds=15, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))

    def say(**kw) -> None:
        print(json.dumps(kw), flush=True)

    if role == "exit":
        # Receive N, acknowledge some, then end the process without closing the consumer or the client.
        n, ack = int(argv[3]), {int(i) for i in argv[4].split(",") if i}
        cons = client.subscribe(topic, "exit-sub", consumer_name="exiting",
                                initial_position=pulsar.InitialPosition.Earliest)
        received, acked = [], []
        for i in range(n):
            m = cons.receive(RECEIVE_MS)
            received.append(mid_of(m))
            if i in ack:
                cons.acknowledge(m)
                acked.append(mid_of(m))
        time.sleep(0.5)  # the client groups acknowledgements for 100 ms: let them reach the wire
        say(received=received, acked=acked)
        os._exit(0)  # no close of anything: the kernel ends the connection
    elif role == "hold":
        # Subscribe, grant permits, then wait (the parent stops and kills this process).
        client.subscribe(topic, "held-sub", consumer_name="stopped", consumer_type=pulsar.ConsumerType.Shared)
        time.sleep(0.3)  # the FLOW that follows SUBSCRIBE is sent
        say(ready=True, pid=os.getpid())
        time.sleep(60)
        os._exit(3)
    else:
        raise SystemExit(f"unknown role {role!r}")


# ============================================================================ raw Pulsar over a socket


def read_frame(sock: socket.socket) -> tuple[str, object]:
    """(type name, BaseCommand) of the next frame the broker sends (parsed with the generated protobuf
    classes and framebuild's literal type table, not with the dissector)."""
    import framebuild as fb

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ClientMisbehaved(f"the broker closed the connection after {len(data)} of {n} bytes")
            data += chunk
        return data

    total = int.from_bytes(exactly(4), "big")
    body = exactly(total)
    cmd_size = int.from_bytes(body[:4], "big")
    cmd = fb.api.BaseCommand.FromString(body[4:4 + cmd_size])
    return fb.TYPE_NAMES.get(cmd.type, str(cmd.type)), cmd


# ============================================================================ captures built from frames


def merge_pcaps(out: Path, *paths: Path) -> None:
    """One classic pcap of the packets of several (same link type), in time order."""
    import pcapgen

    header, records = None, []
    for n, path in enumerate(paths):
        with open(path, "rb") as f:
            hdr, endian, _ = pcapgen.read_pcap_header(f)
            header = header or hdr
            for seq, (h, data) in enumerate(pcapgen.iter_pcap_records(f, endian)):
                sec, usec = int.from_bytes(h[0:4], "little" if endian == "<" else "big"), \
                    int.from_bytes(h[4:8], "little" if endian == "<" else "big")
                records.append(((sec, usec, n, seq), h + data))
    records.sort(key=lambda r: r[0])
    with open(out, "wb") as f:
        f.write(header)
        for _, raw in records:
            f.write(raw)


def tcp_flags_by_source(pcap: Path) -> list[tuple[int, int, int]]:
    """(source port, destination port, TCP flags) of every IPv4/TCP packet of an Ethernet (or Linux cooked)
    classic pcap, parsed here by hand: an oracle for who sent a RST that does not go through the dissector."""
    import pcapgen

    out = []
    with open(pcap, "rb") as f:
        _, endian, linktype = pcapgen.read_pcap_header(f)
        link = {1: 14, 113: 16, 276: 20}.get(linktype)  # Ethernet, Linux cooked v1 / v2
        if link is None:
            raise ValueError(f"link type {linktype} is not parsed here")
        for _, data in pcapgen.iter_pcap_records(f, endian):
            ip = data[link:]
            if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            tcp = ip[(ip[0] & 0x0F) * 4:]
            if len(tcp) < 14:
                continue
            out.append((int.from_bytes(tcp[0:2], "big"), int.from_bytes(tcp[2:4], "big"), tcp[13]))
    return out


TCP_RST = 0x04
TCP_FIN = 0x01


# ============================================================================ stopping a process


def stop_process(proc: subprocess.Popen, timeout: float = 3.0) -> None:
    """SIGSTOP our own child ``proc`` and wait until every one of its threads is stopped: kill() returns before
    a thread running on another CPU has stopped, and that thread could still read a socket."""
    proc.send_signal(signal.SIGSTOP)
    tasks = Path(f"/proc/{proc.pid}/task")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks.iterdir()]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            states = []  # a thread ended while we looked: look again
        if states and all(state in ("T", "t") for state in states):
            return
        time.sleep(0.01)
    if not tasks.exists():
        raise ClientMisbehaved(f"process {proc.pid} is gone")
    # /proc without per-thread states (not Linux): give the signal a moment instead
    time.sleep(0.1)


# ============================================================================ a broker that stops answering


class StoppedBroker:
    """``with StoppedBroker(rec, seconds):`` SIGSTOPs the recording's own broker process (its Popen) and
    SIGCONTs it after ``seconds`` from a timer thread, and in any case on leaving the block."""

    def __init__(self, rec, seconds: float) -> None:
        self.proc = rec._broker
        self.seconds = seconds
        self.lock = threading.Lock()
        self.resumed = False
        self.timer = threading.Timer(seconds, self.resume)

    def resume(self) -> None:
        with self.lock:
            if not self.resumed and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGCONT)
            self.resumed = True

    def __enter__(self) -> StoppedBroker:
        if self.proc is None or self.proc.poll() is not None:
            raise ClientMisbehaved("the broker process is not running")
        stop_process(self.proc)
        self.timer.start()
        return self

    def __exit__(self, *exc) -> bool:
        self.timer.cancel()
        self.resume()
        return False


if __name__ == "__main__":
    _child_main(sys.argv[1:])
