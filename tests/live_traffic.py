"""Record fresh Pulsar traffic on loopback: a real pulsar-lite broker, the official client, tcpdump on ``lo``.

``LiveRecording`` starts a fresh broker (empty db) on 127.0.0.1 and a free port that is not 6650 (or the
``port`` asked for, refusing when something listens there), with the metrics HTTP listener disabled (as in the
corpus' ``gen/broker.toml``), so only that one loopback port is opened. It then starts
``tcpdump -i lo -U -s 0 -w FILE 'tcp port N'`` and waits for "listening on". On exit it stops the broker first
(so the broker's FIN is captured) and then tcpdump with SIGINT. Only processes started here are signalled, by
their own Popen handle; every wait is bounded.

The tests and the benchmark's capture generator (``benchmarks/gen/perf_capture.py``) both use it.

``unavailable()`` says why live recording cannot run here (None when it can); tests turn that into a skip.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

HOST = "127.0.0.1"
DEFAULT_PORT = 6650

BROKER_CONFIG = """\
# pulsar-lite config for live recordings (tests, benchmark capture): like the corpus' gen/broker.toml
keep_alive_interval_secs = 30
{extra}
[metrics]
# the default would listen on 0.0.0.0:8080: disabled so only 127.0.0.1:<port> is open
enabled = false
"""


class CaptureUnavailable(RuntimeError):
    """tcpdump could not capture on lo (not permitted, no such device, ...)."""


def broker_binary() -> str | None:
    try:
        import pulsar_lite
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(pulsar_lite.__file__), "bin", "pulsar-lite")
    return path if os.access(path, os.X_OK) else None


def unavailable() -> str | None:
    """Why live recording cannot run here, or None."""
    if broker_binary() is None:
        return "pulsar-lite (PyPI package with its broker binary) is not installed"
    try:
        import pulsar  # noqa: F401
    except ImportError:
        return "pulsar-client (the official Python client) is not installed"
    if shutil.which("tcpdump") is None:
        return "tcpdump is not installed"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "live capture on lo needs root"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now and is not Pulsar's default."""
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port != DEFAULT_PORT:
            return port
    raise RuntimeError("no free port found")


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None,
              log: Path | None = None, exc=RuntimeError) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
            raise exc(f"{what}: process exited with {proc.returncode}: {tail}")
        time.sleep(0.05)
    raise exc(f"timeout after {timeout}s waiting for {what}")


def _port_open(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), 0.2).close()
        return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen, sig: int, timeout: float) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


class LiveRecording:
    """``with LiveRecording(workdir) as rec: ...client code on rec.url...`` then decode ``rec.pcap``."""

    interface = "lo"

    def __init__(self, workdir: Path, name: str = "live", broker_extra: str = "",
                 start_timeout: float = 10.0, port: int | None = None, pcap: Path | None = None,
                 buffer_kib: int = 32768, immediate: bool = True) -> None:
        """``port``: None for a free port that is not 6650. ``pcap``: where tcpdump writes (default in workdir).
        ``buffer_kib`` is tcpdump's -B; ``immediate=False`` leaves out -U and --immediate-mode (bulk captures)."""
        self.workdir = Path(workdir)
        self.name = name
        self.broker_extra = broker_extra
        self.start_timeout = start_timeout
        self.fixed_port = port
        self.port = 0
        self.pcap = Path(pcap) if pcap is not None else self.workdir / f"{name}.pcap"
        self.buffer_kib = buffer_kib
        self.immediate = immediate
        self.broker_log = self.workdir / f"{name}.broker.log"
        self.tcpdump_log = self.workdir / f"{name}.tcpdump.log"
        self.packets_captured: int | None = None
        self.packets_dropped: int | None = None
        self._broker: subprocess.Popen | None = None
        self._tcpdump: subprocess.Popen | None = None
        self._files: list = []

    @property
    def url(self) -> str:
        return f"pulsar://{HOST}:{self.port}"

    def client(self, **kw):
        import pulsar

        kw.setdefault("operation_timeout_seconds", 15)
        kw.setdefault("logger", pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
        return pulsar.Client(self.url, **kw)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def __enter__(self) -> "LiveRecording":
        try:
            self._start()
        except BaseException:
            self._shutdown()
            raise
        return self

    def __exit__(self, et, ev, tb) -> bool:
        time.sleep(0.3)  # let the last acks / closes reach the wire
        self._shutdown()
        return False

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        binary = broker_binary()
        if binary is None:
            raise RuntimeError("pulsar-lite is not installed")
        conf = self.workdir / f"{self.name}.broker.toml"
        conf.write_text(BROKER_CONFIG.format(extra=self.broker_extra))
        if self.fixed_port is not None and _port_open(self.fixed_port):
            raise RuntimeError(f"something already listens on {HOST}:{self.fixed_port}; refusing to start")
        for attempt in range(3):  # the free port may be taken between the probe and the broker's bind
            self.port = free_port() if self.fixed_port is None else self.fixed_port
            store = self.workdir / f"{self.name}.store"  # pulsar-lite derives more files from --db-path
            shutil.rmtree(store, ignore_errors=True)
            store.mkdir()
            blog = open(self.broker_log, "w")
            self._files.append(blog)
            self._broker = subprocess.Popen(
                [binary, "--config", str(conf), "--addr", f"{HOST}:{self.port}",
                 "--db-path", str(store / "data.db"), "--log-level", "info"],
                cwd=store, stdout=blog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                _wait_for(lambda: _port_open(self.port), self.start_timeout, f"pulsar-lite on {HOST}:{self.port}",
                          self._broker, self.broker_log)
                break
            except RuntimeError:
                _stop(self._broker, signal.SIGTERM, 10)
                taken = "in use" in self.broker_log.read_text(errors="replace")
                if self.fixed_port is not None or attempt == 2 or not taken:
                    raise
        time.sleep(0.1)
        # Then tcpdump, once the broker's port answers (that probe connection stays out of the capture).
        # --immediate-mode: without it libpcap hands packets over per filled block or 1 s timeout, and a
        # short scenario ends (SIGINT) before anything reached the file. Bulk captures do without it.
        tlog = open(self.tcpdump_log, "w")
        self._files.append(tlog)
        immediate = ["-U", "--immediate-mode"] if self.immediate else []
        self._tcpdump = subprocess.Popen(
            ["tcpdump", "-i", self.interface, *immediate, "-s", "0", "-n", "-B", str(self.buffer_kib),
             "-w", str(self.pcap), f"tcp port {self.port}"],
            stdout=tlog, stderr=tlog, stdin=subprocess.DEVNULL)
        _wait_for(lambda: "listening on" in self.tcpdump_log.read_text(errors="replace"), self.start_timeout,
                  f"tcpdump to listen on {self.interface}", self._tcpdump, self.tcpdump_log, CaptureUnavailable)
        time.sleep(0.2)

    def _shutdown(self) -> None:
        try:
            if self._broker is not None:
                _stop(self._broker, signal.SIGTERM, 10)  # broker first: its FIN goes into the capture
                time.sleep(0.3)
        finally:
            try:
                if self._tcpdump is not None:
                    _stop(self._tcpdump, signal.SIGINT, 20)
            finally:
                for fh in self._files:
                    fh.close()
                self._files.clear()
        if self.tcpdump_log.exists():
            text = self.tcpdump_log.read_text(errors="replace")
            m = re.search(r"(\d+) packets captured", text)
            self.packets_captured = int(m.group(1)) if m else None
            m = re.search(r"(\d+) packets dropped by kernel", text)
            self.packets_dropped = int(m.group(1)) if m else None


ORACLE_MISSING = "oracle missing: "  # the prefix of a skip that CI turns into a failure (conftest.py)


def is_client_error(exc: BaseException) -> bool:
    """An exception raised by the official client API (pulsar.Timeout, pulsar.ProducerBusy, ...)."""
    return any(cls.__module__ in ("_pulsar", "pulsar") and cls.__name__ == "PulsarException"
               for cls in type(exc).__mro__)


def play(tmp_path_factory, name: str, scenario, misbehaved: tuple = ()) -> tuple["LiveRecording", object]:
    """Record ``scenario(rec, workdir)`` against the real broker on loopback: (the recording, what the scenario
    returned). Skips with the reason when recording is impossible here ("oracle missing: ", a failure in CI) or
    when the client or broker failed the scenario (their behaviour, not the dissector's)."""
    import pytest

    reason = unavailable()
    if reason:
        pytest.skip(ORACLE_MISSING + reason)
    work = tmp_path_factory.mktemp(name)
    try:
        with LiveRecording(work, name) as rec:
            truth = scenario(rec, work)
    except CaptureUnavailable as exc:
        pytest.skip(f"{ORACLE_MISSING}capture on lo not permitted here: {exc}")
    except misbehaved as exc:
        pytest.skip(f"the {name} scenario could not be played (client/broker, not the dissector): {exc}")
    except Exception as exc:
        if not is_client_error(exc):
            raise
        pytest.skip(f"the client reported a failure during the {name} scenario (client/broker, not the "
                    f"dissector): {type(exc).__name__}: {exc}")
    return rec, truth


class RecordsView:
    """What tests read of a recording's records (the JSON contract): frames, events, by type, by index."""

    records: list[dict]

    @property
    def frames(self) -> list[dict]:
        return [r for r in self.records if "index" in r]

    @property
    def events(self) -> list[dict]:
        return [r for r in self.records if "index" not in r]

    def of_type(self, *types: str) -> list[dict]:
        return [f for f in self.frames if f["type"] in types]

    def events_of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]

    def by_index(self) -> dict[int, dict]:
        return {f["index"]: f for f in self.frames}
