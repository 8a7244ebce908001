"""The protocol boundary: what a protocol declares so that the rest of the tool can carry it.

A protocol is one folder under ``dissector/protocols/`` whose ``__init__`` builds one ``ProtocolSpec``:

- where it lives: server ports (and the role of the server on each);
- its framing and decoding. A protocol implemented in the compiled core names it (``core``: Pulsar's
  ``Framing`` in ``crates/engine/src/protocols/pulsar/framing.rs`` — how long a PDU is, where the next one may start after lost bytes,
  the head of a PDU above the size limit — and its decoder, which makes ``model.Decoded`` plain data, and
  what proves it on a connection off its ports for ``--detect``). A protocol declared in Python only (a
  plug-in, a test's toy) gives the same as callables instead: ``pdu_length`` (complete length / need more /
  not a frame), optionally ``resync`` (the next plausible PDU start after loss or a mid-connection start),
  ``oversized_head``, ``confirms``, and ``decode`` (bytes → ``model.Decoded``); the core's generic transport
  calls them. A callable given beside ``core`` takes the place of the core's;
- its roles and its one command table (per type: who sends it, what answers it and under which key, the
  fields the timeline shows, which actor it is about);
- its session (``session``: the name of its conversation state in the compiled core, ``crates/engine/src/protocols/<name>/``,
  which the core's analyzer runs per connection; None: pairing only) and its problem ids (registered in
  ``dissector.problems`` when the package is imported);
- how its frames look in a record (``record_fields``: for a protocol declared in Python whose frames have a
  body; the rest of a frame's record is generic, made by the core: ``crates/engine/src/records.rs``) and on a timeline
  line (``timeline_pieces``: the name of its pieces in the compiled core, as ``session``).

Everything below the boundary (capture, network layers, TCP reassembly, the PDU splitter: the core's
``transport``) and above it (pairing, records, renderers, statistics) is generic and reads only these
declarations and plain data. The command table is declared here, in Python, once: the timeline reads it, and
the core's analyzer (``crates/engine/src/analysis/``) compiles it when it meets the protocol's first frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..model import Decoded, Frame
from ..options import Options

NEED_MORE = 0  # pdu_length: not enough bytes yet to tell the length
DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024 + 10 * 1024  # a protocol's largest frame when it does not say


@dataclass(frozen=True, slots=True)
class BadLength:
    """The bytes at this offset cannot start a PDU: the length field is out of bounds."""

    kind: str  # OVERSIZED or BAD_SIZE
    details: dict  # record details (e.g. total_size, head_hex)
    params: dict  # message parameters (field, size)


@dataclass(frozen=True, slots=True)
class Space:
    """A namespace in which requests wait for their answers under a key.

    ``slot``: at most one request waits (a new one replaces it, as a handshake); ``duplicates``: a second
    request of the same type under a key still waiting is ``request.duplicate_id``; ``unmatched``: a response
    that finds nothing waiting is ``response.unmatched`` (when the connection was seen from its start);
    ``unanswered``: a request still waiting when its connection closes is reported ``UNANSWERED``;
    ``opened_by``: the side whose frames wait here ("client", "server" or "any"); a frame of the other side
    with the same command is not a request (e.g. a CLOSE_PRODUCER pushed by the broker).
    """

    name: str
    slot: bool = False
    duplicates: bool = False
    unmatched: bool = False
    unanswered: bool = True
    opened_by: str = "client"


@dataclass(frozen=True, slots=True)
class Key:
    """Where a request waits or a response looks: a space, and command fields (``@direction`` is the frame's
    direction, ``@reverse`` the opposite one: for a PING answered by a PONG from the other side)."""

    space: Space
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommandSpec:
    """One row of a protocol's command table."""

    name: str
    number: int
    sender: str  # the role that sends it, or "any"
    timeline: tuple[tuple[str, str], ...] = ()  # (label, command field) shown on its timeline line
    scope: str | None = None  # "producer" / "consumer": the actor the frame is about ...
    scope_id: str | None = None  # ... named by this command field
    creates: str | None = None  # "producer" / "consumer": the command that names a new actor (<actor>_id, _name)
    opens: Key | None = None  # a request: waits under this key for its answer
    answers: tuple[Key, ...] = ()  # a response: answers the first request waiting under one of these keys
    answer_types: frozenset[str] | None = None  # the request types it can answer (None: any)
    interim: tuple[str, Any] | None = None  # (field, value): an answer that leaves its request waiting
    remember: tuple[str, ...] = ()  # request fields kept while it waits (what the session needs on the answer)


class CommandTable:
    """The command table of a protocol, by name and by wire number."""

    def __init__(self, specs: Iterable[CommandSpec]) -> None:
        self.by_name: dict[str, CommandSpec] = {}
        self.by_number: dict[int, CommandSpec] = {}
        for spec in specs:
            if spec.name in self.by_name or spec.number in self.by_number:
                raise ValueError(f"command {spec.name} ({spec.number}) declared twice")
            self.by_name[spec.name] = spec
            self.by_number[spec.number] = spec

    def get(self, name: str) -> CommandSpec | None:
        return self.by_name.get(name)

    def __iter__(self):
        return iter(self.by_name.values())


@dataclass(frozen=True)
class ProtocolSpec:
    name: str
    client_role: str  # the role that opens connections
    server_roles: tuple[str, ...]  # the roles on the server side (Pulsar: broker)
    ports: dict[int, str]  # default server ports and the role of the server there
    commands: CommandTable
    # the protocol's framing and decoder in the compiled core ("pulsar"), or None for one declared in Python
    core: str | None = None
    # -- for a protocol declared in Python (each, when given, takes the place of the core's) --
    # (buf, pos, end, max_size) -> length of the PDU at pos, NEED_MORE, or BadLength
    pdu_length: Callable[[bytes, int, int, int], int | BadLength] | None = None
    decode: Callable[[bytes, int, Options], Decoded] | None = None  # (pdu, missing bytes, options)
    # (buf, pos, end, max_size) -> (True, the next plausible PDU start) or (False, where to wait for more bytes);
    # None: no way to find a PDU start in the middle of a stream (what is there is skipped)
    resync: Callable[[bytes, int, int, int], tuple[bool, int]] | None = None
    # a PDU that proves the protocol on an off-port connection; None: decoded without findings
    confirms: Callable[[Decoded], bool] | None = None
    # (buf, pos, end) at a PDU whose length is above the size limit (BadLength "OVERSIZED"): (head, PDU length)
    # when its first ``head`` bytes are worth decoding alone (the rest is then skipped, never buffered),
    # NEED_MORE until the head is there, None when the size is not to be trusted (the splitter resyncs)
    oversized_head: Callable[[bytes, int, int], tuple[int, int] | int | None] | None = None
    foreign_kind: str | None = None  # event kind when a stream speaks something else (None: the core's, or
    # FOREIGN_PROTOCOL)
    min_pdu: int | None = None  # bytes of a PDU head worth decoding when the rest was lost (None: the core's, or 1)
    # the compiled core's session for its connections (producers, consumers, ...; with its state shared across
    # connections), by name: "pulsar"; None: request/response pairing only
    session: str | None = None
    # (frame, payload_bytes, summary) -> the record keys of a frame with a body (Decoded.body), for a protocol
    # declared in Python; None: the core's (crates/engine/src/records.rs: Pulsar's payload section)
    record_fields: Callable[[Frame, bool, bool], dict] | None = None
    # the name of its own pieces of a timeline line (after the key fields) in the compiled core ("pulsar":
    # crates/engine/src/protocols/pulsar/timeline.rs); None: the key fields only
    timeline_pieces: str | None = None
    title: str = ""  # how messages name it ("Pulsar"); "" : its name
    # its largest frame when Options.max_frame_size does not say (None: DEFAULT_MAX_FRAME_SIZE); a bigger one
    # is OVERSIZED and skipped, never buffered
    max_frame_size: int | None = None

    def __post_init__(self) -> None:
        if not self.title:
            object.__setattr__(self, "title", self.name)

    @property
    def default_server_role(self) -> str:
        return self.server_roles[0]
