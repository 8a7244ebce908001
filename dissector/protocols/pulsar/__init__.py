"""Apache Pulsar's binary protocol (``pulsar://``, TCP 6650 and 6651), declared for the protocol boundary.

The folder holds everything the tool knows about Pulsar: the schema (``pb/``, generated from
``proto/pulsar/``), the command table (``commands``), framing and resynchronisation (``framing``), frame and
payload decoding (``decode``, ``payload``, ``codecs``), the problem ids (``problems``) and how frames look in
records and on the timeline (``present``). Its conversation state (producers, consumers, flow, acks,
redeliveries, seeks, chunked messages) is the compiled core's session (``core/src/pulsar/``), named here by
``session``; ``chunks`` binds its chunk reassembly alone.
"""

from __future__ import annotations

from ..base import ProtocolSpec
from . import problems  # noqa: F401  (registers Pulsar's problem ids)
from .commands import BROKER, CLIENT, COMMANDS
from .decode import confirms, decode_frame
from .framing import oversized_head, pdu_length, resync
from .present import record_fields, timeline_pieces

PORTS = {6650: BROKER, 6651: BROKER}  # 6651 is pulsar+ssl://: TLS, reported as NOT_PULSAR


PULSAR = ProtocolSpec(
    name="pulsar",
    client_role=CLIENT,
    server_roles=(BROKER,),
    ports=PORTS,
    commands=COMMANDS,
    foreign_kind="NOT_PULSAR",
    min_pdu=8,  # TOTAL_SIZE and CMD_SIZE: a damaged frame shorter than that shows nothing
    pdu_length=pdu_length,
    resync=resync,
    oversized_head=oversized_head,  # a SEND or MESSAGE above --max-frame-size: its command and metadata
    decode=decode_frame,
    confirms=confirms,
    session="pulsar",  # the core's Pulsar session (core/src/pulsar/session.rs, chunks.rs)
    record_fields=record_fields,
    timeline_pieces=timeline_pieces,
)
