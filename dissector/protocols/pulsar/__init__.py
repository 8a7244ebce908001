"""Apache Pulsar's binary protocol (``pulsar://``, TCP 6650 and 6651), declared for the protocol boundary.

The folder holds everything the tool knows about Pulsar: the schema (``pb/``, generated from
``proto/pulsar/``), the command table (``commands``), frame and payload decoding (``decode``, ``payload``) and
the problem ids (``problems``); framing and resynchronisation are the core's
(``crates/engine/src/protocols/pulsar/framing.rs``). How its frames look in
records is the core's (``crates/engine/src/records.rs``: the payload section's keys). Its conversation state (producers, consumers, flow, acks, redeliveries, seeks, chunked
messages) is the compiled core's session (``crates/engine/src/protocols/pulsar/``), named here by ``session``, and its pieces of
a timeline line the core's too (``crates/engine/src/protocols/pulsar/timeline.rs``), named by ``timeline_pieces``.
"""

from __future__ import annotations

from ..base import ProtocolSpec
from . import problems  # noqa: F401  (registers Pulsar's problem ids)
from .commands import BROKER, CLIENT, COMMANDS
from . import decode  # noqa: F401  (binds the plain-data classes the core's decoder builds)

PORTS = {6650: BROKER, 6651: BROKER}  # 6651 is pulsar+ssl://: TLS, reported as NOT_PULSAR


PULSAR = ProtocolSpec(
    name="pulsar",
    title="Pulsar",
    max_frame_size=5 * 1024 * 1024 + 10 * 1024,  # the broker's default maxMessageSize and the frame's padding
    client_role=CLIENT,
    server_roles=(BROKER,),
    ports=PORTS,
    commands=COMMANDS,
    # framing (TOTAL_SIZE + 4, resynchronisation, the head of a SEND or MESSAGE above --max-frame-size),
    # decoding and what proves Pulsar off its ports: the compiled core's
    core="pulsar",
    session="pulsar",  # the core's Pulsar session (crates/engine/src/protocols/pulsar/session.rs, chunks.rs)
    timeline_pieces="pulsar",  # the payload section and the analysis' links on a line: crates/engine/src/protocols/pulsar/timeline.rs
)
