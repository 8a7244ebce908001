"""A TCP segment as ``dissector.pipeline.Dissector.feed_segment`` takes it (a source that parses packets
itself: the link, IP and TCP layers of captured packets are the compiled core's, ``crates/engine/src/transport/net.rs``,
which the pipeline runs on the packets it is fed)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TcpSegment"]


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
    flags: int  # the low 8 bits of the flags byte, plus NS as bit 8
    window: int
    payload: bytes  # TCP payload bytes that were captured
    missing_tail: int  # payload bytes on the wire but not captured (snaplen cut); 0 normally
