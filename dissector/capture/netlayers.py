"""Stage 2: link layer -> IPv4/IPv6 -> TCP, one captured packet at a time.

The parsing is the compiled core's (``crates/engine/src/transport/net.rs``: link types, VLANs, IPv4 options and
fragments, IPv6 extension headers, TCP options, snaplen-cut payloads); the pipeline feeds it packets directly.
This module is its Python face for the tools and tests that want the segments themselves:
``tcp_segment(pkt)`` returns a :class:`TcpSegment` for a TCP packet and ``None`` for anything else (non-IP,
non-TCP, IP fragments, malformed or truncated headers). It never raises on bad packet bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from dissector import _core as _core

from .files import CapturedPacket

__all__ = [
    "TcpSegment",
    "tcp_segment",
    "iter_tcp_segments",
    "FIN",
    "SYN",
    "RST",
    "PSH",
    "ACK",
    "URG",
    "ECE",
    "CWR",
    "NS",
    "flags_str",
]

# TCP flags (``TcpSegment.flags``; the low 8 bits of the flags byte plus NS as bit 8)
FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10
URG = 0x20
ECE = 0x40
CWR = 0x80
NS = 0x100

_FLAG_NAMES = ((FIN, "F"), (SYN, "S"), (RST, "R"), (PSH, "P"), (ACK, "A"), (URG, "U"), (ECE, "E"), (CWR, "C"))


def flags_str(flags: int) -> str:
    """Compact flag text like ``"SA"`` / ``"PA"`` / ``"FA"`` (tcpdump letters; ``.`` for none)."""
    return "".join(c for bit, c in _FLAG_NAMES if flags & bit) or "."


@dataclass(slots=True)
class TcpSegment:
    packet_index: int
    timestamp: float
    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int
    seq: int
    ack: int
    flags: int
    window: int
    payload: bytes  # TCP payload bytes that were captured
    missing_tail: int  # payload bytes on the wire but not captured (snaplen cut); 0 normally


def tcp_segment(pkt: CapturedPacket) -> TcpSegment | None:
    """Decode link/IP/TCP headers of one captured packet; ``None`` if it is not a decodable TCP segment."""
    fields = _core.tcp_segment(pkt.index, pkt.timestamp, pkt.linktype, pkt.data, pkt.orig_len)
    return None if fields is None else TcpSegment(*fields)


def iter_tcp_segments(reader: Iterable[CapturedPacket]) -> Iterator[TcpSegment]:
    """All TCP segments of a packet source (e.g. a :class:`~dissector.capture.CaptureReader`), in order."""
    seg = tcp_segment
    for pkt in reader:
        s = seg(pkt)
        if s is not None:
            yield s
