"""Live packet sources: the same ``CapturedPacket`` as a file, from a network interface as traffic flows.

Two engines:

- ``PacketSocket``: a Linux AF_PACKET socket (SOCK_DGRAM: every interface gives its IP packets the same way,
  ``LINKTYPE_RAW``) with the capture filter compiled by libpcap (through scapy) and attached in the kernel, so
  only the Pulsar ports reach Python. On loopback the kernel shows every packet twice, outgoing and incoming:
  instructions put in front of the filter drop the outgoing copy in the kernel, so each is counted once (and
  copied once). Needs root or CAP_NET_RAW.
- ``Dumpcap``: Wireshark's ``dumpcap`` writes pcapng to a pipe that the project's own reader streams, for hosts
  where dumpcap holds the capture privilege and Python does not.

Both yield ``None`` when no packet came for ``tick`` seconds, so the caller can apply the clock's expiries on an
idle link. ``stats()`` says how many packets were received and how many the kernel dropped.
"""

from __future__ import annotations

import ctypes
import queue
import shutil
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Iterator

from .files import LINKTYPE_RAW, CaptureError, CapturedPacket, CaptureReader
from .writer import PcapWriter  # noqa: F401  (live -w)

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
ARPHRD_LOOPBACK = 772
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_ATTACH_FILTER = 26
SO_RCVBUFFORCE = 33
# Classic BPF ancillary loads (linux/filter.h): SKF_AD_OFF + SKF_AD_PKTTYPE / SKF_AD_IFINDEX
_LD_PKTTYPE, _LD_IFINDEX = 0xFFFFF000 + 4, 0xFFFFF000 + 8
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
SNAPLEN = 262_144  # a loopback segment with GSO can be larger than the 64 KiB MTU


class LiveError(Exception):
    """The capture cannot start: no permission, no such interface, a bad filter, a missing tool."""


@dataclass
class LiveStats:
    received: int = 0  # packets handed to the dissector
    duplicates: int = 0  # loopback copies dropped (each packet is counted once)
    kernel_dropped: int = 0  # packets the kernel dropped (its buffer was full)


def capture_filter(ports, extra: str | None = None) -> str:
    """The default BPF: TCP on the protocols' ports; ``extra`` (``-f``) replaces it."""
    if extra:
        return extra
    return " or ".join(f"tcp port {p}" for p in sorted(ports))


class PacketSocket:
    def __init__(self, interface: str | None, bpf: str, *, tick: float = 0.25, buffer_bytes: int = 32 << 20) -> None:
        self.interface = None if interface in (None, "any") else interface
        self.tick = tick
        self.stats = LiveStats()
        try:
            # On a named interface the socket takes no packet until bind(), after the filter is in place (as
            # libpcap does); "any" cannot be bound, so what came in before the filter is drained below.
            protocol = 0 if self.interface is not None else socket.htons(ETH_P_ALL)
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, protocol)
        except PermissionError:
            raise LiveError("capturing needs root or the CAP_NET_RAW capability (or try --engine dumpcap, where "
                            "dumpcap holds the capture privilege)") from None
        except (AttributeError, OSError) as exc:
            raise LiveError(f"cannot open a packet socket here: {exc}") from None
        try:
            self._attach_filter(bpf)
            try:  # past net.core.rmem_max (with CAP_NET_ADMIN): room for bursts while Python catches up
                self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, buffer_bytes)
            except OSError:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
            if self.interface is not None:
                try:
                    socket.if_nametoindex(self.interface)
                except OSError:
                    raise LiveError(f"no such interface: {self.interface}") from None
                self.sock.bind((self.interface, ETH_P_ALL))
            else:
                self._drain_unfiltered()
            self.sock.settimeout(tick)
        except BaseException:
            self.sock.close()
            raise
        self._buf = bytearray(SNAPLEN)

    def _drain_unfiltered(self) -> None:
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recv(SNAPLEN)
        except (BlockingIOError, InterruptedError):
            pass

    def _attach_filter(self, bpf: str) -> None:
        try:
            from scapy.arch.common import compile_filter
            from scapy.data import DLT_RAW
        except ImportError:
            raise LiveError("live capture needs scapy (pip install 'pulsar-dissect[live]') to compile the "
                            "capture filter with libpcap") from None
        try:
            program = compile_filter(bpf, linktype=DLT_RAW)
        except Exception as exc:  # scapy raises its own Scapy_Exception with libpcap's message
            raise LiveError(f"bad capture filter {bpf!r}: {exc}") from None
        # In front: drop the outgoing copy of a loopback packet (jumps in the program are relative, so the
        # compiled instructions stay valid after these).
        insn = struct.Struct("HBBI")
        prefix = b"".join((insn.pack(_BPF_LD_W_ABS, 0, 0, _LD_PKTTYPE),
                           insn.pack(_BPF_JEQ_K, 0, 3, PACKET_OUTGOING),
                           insn.pack(_BPF_LD_W_ABS, 0, 0, _LD_IFINDEX),
                           insn.pack(_BPF_JEQ_K, 0, 1, _loopback_index()),
                           insn.pack(_BPF_RET_K, 0, 0, 0)))
        code = prefix + ctypes.string_at(program.bf_insns, program.bf_len * 8)
        # struct sock_fprog {unsigned short len; struct sock_filter *filter;}: the instructions live in a buffer
        # of ours, kept alive as long as the socket.
        self._insns = ctypes.create_string_buffer(code, len(code))
        fprog = struct.pack("HL", len(code) // 8, ctypes.addressof(self._insns))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)

    def packets(self, stop: threading.Event) -> Iterator[CapturedPacket | None]:
        sock, buf, stats = self.sock, self._buf, self.stats
        view = memoryview(buf)
        index = 0
        while not stop.is_set():
            try:
                n, address = sock.recvfrom_into(buf, SNAPLEN, socket.MSG_TRUNC)
            except socket.timeout:
                yield None
                continue
            except InterruptedError:
                continue
            now = time.time()
            if address[2] == PACKET_OUTGOING and address[3] == ARPHRD_LOOPBACK:
                stats.duplicates += 1
                continue
            index += 1
            stats.received += 1
            captured = min(n, SNAPLEN)
            yield CapturedPacket(index, now, LINKTYPE_RAW, bytes(view[:captured]), n)

    def poll_stats(self) -> LiveStats:
        # tpacket_stats {tp_packets, tp_drops}; reading resets them, so they are added up here
        if self.sock.fileno() < 0:
            return self.stats  # closed: the last reading was taken then
        raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        _, drops = struct.unpack("II", raw)
        self.stats.kernel_dropped += drops
        return self.stats

    def close(self) -> None:
        try:
            self.poll_stats()
        except OSError:
            pass
        self.sock.close()


class Dumpcap:
    """dumpcap writes pcapng to a pipe; a thread reads it with the project's reader into a queue."""

    def __init__(self, interface: str | None, bpf: str, *, tick: float = 0.25) -> None:
        self.tick = tick
        self.stats = LiveStats()
        binary = shutil.which("dumpcap")
        if binary is None:
            raise LiveError("--engine dumpcap needs Wireshark's dumpcap (Debian: apt-get install tshark)")
        self.proc = subprocess.Popen([binary, "-q", "-i", interface or "any", "-f", bpf, "-s", str(SNAPLEN),
                                      "-w", "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL)
        self._queue: queue.Queue = queue.Queue(maxsize=100_000)
        self._error: str | None = None
        self._thread = threading.Thread(target=self._read, name="dumpcap-reader", daemon=True)
        self._thread.start()
        # dumpcap writes its section header as soon as it captures: wait for it, or for its error
        deadline = time.time() + 10
        while self._reader is None and self.proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        if self.proc.poll() is not None and self._reader is None:
            message = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
            raise LiveError(f"dumpcap could not capture: {message or 'it exited'}")

    _reader: CaptureReader | None = None

    def _read(self) -> None:
        try:
            reader = CaptureReader(self.proc.stdout, name="dumpcap", own_stream=False)
            self._reader = reader
            for packet in reader:
                self._queue.put(packet)
        except CaptureError as exc:
            self._error = str(exc)
        finally:
            self._queue.put(StopIteration)

    def packets(self, stop: threading.Event) -> Iterator[CapturedPacket | None]:
        while not stop.is_set():
            try:
                packet = self._queue.get(timeout=self.tick)
            except queue.Empty:
                yield None
                continue
            if packet is StopIteration:
                return
            self.stats.received += 1
            yield packet

    def poll_stats(self) -> LiveStats:
        return self.stats

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        stderr = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        for line in stderr.splitlines():  # "Packets received/dropped on interface 'lo': 12/0 (...)"
            if "received/dropped" in line and ":" in line:
                try:
                    self.stats.kernel_dropped += int(line.rsplit(":", 1)[1].split("/")[1].split()[0])
                except (IndexError, ValueError):
                    pass
        self._thread.join(timeout=5)


def _loopback_index() -> int:
    for index, name in socket.if_nameindex():
        if name == "lo":
            return index
    return 0xFFFFFFFF  # no loopback: the prefix drops nothing


def open_live(engine: str, interface: str | None, bpf: str, *, tick: float = 0.25):
    if engine == "socket":
        return PacketSocket(interface, bpf, tick=tick)
    if engine == "dumpcap":
        return Dumpcap(interface, bpf, tick=tick)
    raise LiveError(f"unknown engine {engine!r} (socket, dumpcap)")
