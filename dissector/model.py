"""The plain data that flows between the stages, from the PDU decoders to the output.

Everything here holds plain values (ints, floats, strs, bytes, lists, dicts and these small classes): no
protobuf object, no reassembler state. It pickles, so a worker process, a compiled core or a Spark executor
can produce or consume it. Each stage makes new values; none edits what an earlier stage produced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .problems import Finding

# Directions: towards which role a frame travels. Every protocol has a "client" role; the other side is named
# by the protocol (Pulsar: broker; TubeMQ: master or broker). "unknown" until the roles are known.
TO_CLIENT = "to_client"
UNKNOWN_DIRECTION = "unknown"


def towards(role: str) -> str:
    return "to_" + role


@dataclass(slots=True)
class Decoded:
    """What a protocol's decoder makes of one PDU (a pure function of its bytes)."""

    type: str  # the command's name as the protocol's table knows it, or UNKNOWN(n) / MALFORMED
    command: dict | None  # the command's fields in the JSON contract's form; None when it could not be decoded
    size: int  # bytes of the PDU on the wire, header included (lost bytes counted)
    findings: list[Finding]
    body: Any = None  # protocol-specific plain data (Pulsar: the payload section of SEND and MESSAGE)


@dataclass(slots=True)
class Frame:
    """A decoded PDU and where it was in the capture."""

    index: int  # 1-based frame number in the capture
    protocol: str
    conn: int
    src: str  # "ip:port"
    dst: str
    direction: str  # towards(role) or UNKNOWN_DIRECTION
    time: float  # time of the packet that completed the frame
    first_time: float
    packet: int  # number of the packet that completed the frame
    first_packet: int
    offset: int  # stream offset of its first byte
    pdu: Decoded
    data: bytes | None = None  # the PDU's bytes as captured (header included), only with Options.keep_frame_bytes


@dataclass(slots=True)
class Event:
    """Something that is not a frame: a gap, skipped bytes, a connection opening, an unanswered request ...

    ``kind`` is a registered upper-case id; ``details`` go into the record as they are; the message is made at
    output from ``details`` and ``params`` (values the message needs but the record does not carry).
    """

    kind: str
    time: float
    packet: int
    conn: int | None = None
    src: str | None = None
    dst: str | None = None
    direction: str | None = None
    offset: int | None = None
    length: int | None = None
    details: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)


@dataclass(slots=True)
class Annotated:
    """A frame with what the conversation analysis found out about it, kept apart from the decoded frame."""

    frame: Frame
    notes: dict  # record keys: answers, latency_ms, request_type, producer, consumer, acks, permits, ...
    findings: list[Finding]  # conversation findings (response.slow, server.error, ...)
