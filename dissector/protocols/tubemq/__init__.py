"""Apache InLong TubeMQ's binary RPC (masters on TCP 8715, brokers on 8123), the second protocol on the
protocol boundary.

Its framing (begin token, serial number, blocks), its envelope and method messages, the messages it carries
(checksums as the consumer checks them) and the structured strings inside them are decoded by the compiled
core (``crates/engine/src/protocols/tubemq/``, from the schema compiled from ``proto/tubemq/``); its command table is
``commands`` (requests and responses paired by serial number), its problem ids ``problems``, its pieces of a
timeline line ``crates/engine/src/protocols/tubemq/timeline.rs``. A frame's ``body`` is a dict: ``serial``, ``rpc`` (the
envelope) and ``messages``.
"""

from __future__ import annotations

from ..base import ProtocolSpec
from . import problems  # noqa: F401  (registers TubeMQ's problem ids)
from .commands import BROKER, CLIENT, COMMANDS, MASTER

PORTS = {8715: MASTER, 8123: BROKER}

TUBEMQ = ProtocolSpec(
    name="tubemq",
    title="TubeMQ",
    # the servers accept 3,584 blocks of 8 KiB (RpcConstants: 20 MiB of message and 8 MiB of room)
    max_frame_size=12 + 3584 * (4 + 8192),
    client_role=CLIENT,
    server_roles=(MASTER, BROKER),
    ports=PORTS,
    commands=COMMANDS,
    core="tubemq",  # framing (token, blocks, resynchronisation), decoding and --detect: the compiled core's
    session="tubemq",  # topic, partition, client id and group as notes: crates/engine/src/protocols/tubemq/session.rs
    timeline_pieces="tubemq",  # serial number and messages on a line: crates/engine/src/protocols/tubemq/timeline.rs
)
