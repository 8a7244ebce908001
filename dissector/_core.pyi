"""Type stub of ``dissector._core``, the extension module: the PyO3 binding (crates/python) of the engine
(crates/engine), built by maturin with the package.

Every name the extension module exports is declared here; ``tests/test_core_stub.py`` holds the two in step
(names both ways, kinds, and the parameters of every function and method that has a ``__text_signature__``).
The names that start with ``_`` and are ``Protocol``s, ``TypedDict``s, ``TypeVar``s or ``TypeAlias``es are
this stub's own: they describe the duck-typed Python objects the core reads (``dissector.options.Options``,
``dissector.protocols.base.ProtocolSpec``, ...) and the plain tuples and dicts it returns; the module has no
such names.

The core builds instances of Python classes it is given: per object (``Dissector``, ``AnalysedDissector``,
``CaptureReader``: generic in those classes), or once for the whole module by ``bind``
(``decode``: ``dissector.model.Decoded`` and ``dissector.problems.Finding``), and per protocol by
``bind_body`` (its frames' body: Pulsar's ``PayloadSection``; a protocol without one gets a dict), which
``dissector.protocols.pulsar.decode`` binds at import.

Constructors are ``__new__`` (the core's ``#[new]``); a class Python cannot subclass is ``@final``. mypy's
stubtest agrees with this stub but for ``JsonLines.__buffer__`` / ``__release_buffer__``: the class implements
the buffer protocol, which Python shows as those slot wrappers only from 3.12 (PEP 688).
"""

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Generic, Literal, Protocol, Self, TypeAlias, TypedDict, TypeVar, final, overload

from _typeshed import DataclassInstance, ReadableBuffer
from typing_extensions import disjoint_base

from dissector.model import Decoded
from dissector.problems import Finding

# ----------------------------------------------------------------------------------- this stub's own types

_FrameT = TypeVar("_FrameT")
_EventT = TypeVar("_EventT")
_AnnotatedT = TypeVar("_AnnotatedT")
_FindingT = TypeVar("_FindingT")
_PacketT = TypeVar("_PacketT")
_T = TypeVar("_T")
_RecordT = TypeVar("_RecordT", dict[str, Any], bytes)

#: A plain value as the core reads it (``Value::from_py``): None, bool, int (64 bits), float, str, bytes, and
#: lists, tuples and str-keyed dicts of plain values. The containers' items are ``Any``, not ``_Plain``: with
#: a recursive alias, list and dict being invariant, a record built in a variable (``dict[str, object]``)
#: would not be accepted.
_Plain: TypeAlias = None | bool | int | float | str | bytes | list[Any] | tuple[Any, ...] | dict[str, Any]

#: ``problems.severity_and_message``: (finding id, params) -> (severity, message). The core also calls its
#: ``pieces(id)`` when it has one (a template the core renders itself), else asks for every text.
_SeverityAndMessage: TypeAlias = Callable[[str, dict[str, Any]], tuple[str, str]]

#: The class of a finding: called ``finding(id, params)``.
_FindingClass: TypeAlias = Callable[[str, dict[str, Any]], _FindingT]

#: A table's columns as Arrow buffers: (rows, [(validity, values, offsets) per column]).

#: (count, total, max or None, sample, cap) of a latency sample.
_LatencyFigures: TypeAlias = tuple[int, float, float | None, list[float], int]

#: ``timeline.timeline_plan(protocol)``: (its pieces in the core or None, [(type, role, [(label, keys, how to
#: show, bytes kind)] or None)]).
_FieldPlan: TypeAlias = tuple[str, Sequence[str], str, str | None]
_TimelinePlan: TypeAlias = tuple[str | None, Sequence[tuple[str, str, Sequence[_FieldPlan] | None]]]

class _OtherTcp(TypedDict):
    """A server port off the protocols' ports (``other_tcp``)."""

    port: int
    connections: int
    bytes: int

class _StatsState(TypedDict):
    """``StatsCore.state()``: the figures as plain data."""

    frames: int
    first_time: float | None
    last_time: float | None
    types: dict[str, int]
    clients: list[dict[str, Any]]
    clients_dropped: int
    connections_dropped: int
    connections: list[dict[str, Any]]
    topics: dict[str, dict[str, Any]]
    producers: list[dict[str, Any]]
    consumers: list[dict[str, Any]]
    latency: dict[str, _LatencyFigures]
    server_errors: dict[str, int]
    expert: list[tuple[tuple[str, str], int]]
    events: dict[str, int]

class _ReadableBinary(Protocol):
    """A binary file object the reader reads: ``read1`` when it has one, else ``read``; ``seekable``, ``tell``
    and ``seek`` when it has them (to read a block again)."""

    def read(self, size: int, /) -> bytes | bytearray | None: ...

class _PipelineOptions(Protocol):
    """What the pipeline reads of a ``dissector.options.Options``."""

    @property
    def detect(self) -> bool: ...
    @property
    def detect_budget(self) -> int: ...
    @property
    def max_frame_size(self) -> int | None: ...
    @property
    def keep_frame_bytes(self) -> bool: ...
    @property
    def ports(self) -> Iterable[int | tuple[str, str | None, int]]: ...
    @property
    def max_buffered_per_direction(self) -> int: ...
    @property
    def max_buffered_total(self) -> int: ...
    @property
    def ooo_wait_packets(self) -> int: ...
    @property
    def hole_timeout(self) -> float: ...
    @property
    def close_wait_packets(self) -> int: ...
    @property
    def max_connections(self) -> int: ...
    @property
    def max_decompressed(self) -> int: ...
    @property
    def summary(self) -> bool: ...

class _AnalysisOptions(Protocol):
    """What the analysis reads of a ``dissector.options.Options`` (the Pulsar session's caps too)."""

    @property
    def request_timeout(self) -> float: ...
    @property
    def max_pending_requests(self) -> int: ...
    @property
    def max_actors(self) -> int: ...
    @property
    def max_remembered_messages(self) -> int: ...
    @property
    def max_remembered_total(self) -> int: ...
    @property
    def max_redelivered_reported(self) -> int: ...
    @property
    def max_chunked_messages(self) -> int: ...
    @property
    def max_chunk_bytes(self) -> int: ...
    @property
    def max_decompressed(self) -> int: ...
    @property
    def redirect_loop_limit(self) -> int: ...

class _AnalysedOptions(_PipelineOptions, _AnalysisOptions, Protocol):
    """What ``AnalysedDissector`` reads of a ``dissector.options.Options``."""

    @property
    def pool_bytes(self) -> int: ...

class _BadLength(Protocol):
    """``protocols.base.BadLength``: a protocol's ``pdu_length`` saying the bytes cannot start a PDU."""

    @property
    def kind(self) -> str: ...
    @property
    def details(self) -> dict[str, Any]: ...
    @property
    def params(self) -> dict[str, Any]: ...

class _SenderSpec(Protocol):
    """What the pipeline reads of a ``protocols.base.CommandSpec``."""

    @property
    def name(self) -> str: ...
    @property
    def sender(self) -> str: ...

class _SpaceSpec(Protocol):
    """``protocols.base.Space``."""

    @property
    def name(self) -> str: ...
    @property
    def slot(self) -> bool: ...
    @property
    def duplicates(self) -> bool: ...
    @property
    def unmatched(self) -> bool: ...
    @property
    def unanswered(self) -> bool: ...
    @property
    def opened_by(self) -> str: ...

class _KeySpec(Protocol):
    """``protocols.base.Key``."""

    @property
    def space(self) -> _SpaceSpec: ...
    @property
    def fields(self) -> Sequence[str]: ...

class _CommandSpec(_SenderSpec, Protocol):
    """What the analysis reads of a ``protocols.base.CommandSpec``."""

    @property
    def scope(self) -> str | None: ...
    @property
    def scope_id(self) -> str | None: ...
    @property
    def opens(self) -> _KeySpec | None: ...
    @property
    def answers(self) -> Iterable[_KeySpec]: ...
    @property
    def answer_types(self) -> Iterable[str] | None: ...
    @property
    def interim(self) -> tuple[str, Any] | None: ...
    @property
    def remember(self) -> Sequence[str]: ...

class _WireSpec(Protocol):
    """What the transport reads of a ``protocols.base.ProtocolSpec``: its framing and decoding."""

    @property
    def name(self) -> str: ...
    @property
    def client_role(self) -> str: ...
    @property
    def server_roles(self) -> Sequence[str]: ...
    @property
    def ports(self) -> dict[int, str]: ...
    @property
    def commands(self) -> Iterable[_SenderSpec]: ...
    @property
    def core(self) -> str | None: ...
    @property
    def pdu_length(self) -> Callable[[bytes, int, int, int], int | _BadLength] | None: ...
    @property
    def decode(self) -> Callable[[bytes, int, Any], Any] | None: ...
    @property
    def resync(self) -> Callable[[bytes, int, int, int], tuple[bool, int]] | None: ...
    @property
    def confirms(self) -> Callable[[Any], bool] | None: ...
    @property
    def oversized_head(self) -> Callable[[bytes, int, int], tuple[int, int] | int | None] | None: ...
    @property
    def foreign_kind(self) -> str | None: ...
    @property
    def min_pdu(self) -> int | None: ...
    @property
    def max_frame_size(self) -> int | None: ...

class _ProtocolSpec(_WireSpec, Protocol):
    """A whole ``protocols.base.ProtocolSpec``, as the analysis and the records read it too."""

    @property
    def commands(self) -> Iterable[_CommandSpec]: ...
    @property
    def session(self) -> str | None: ...
    @property
    def record_fields(self) -> Callable[[Any, bool, bool], dict[str, Any]] | None: ...

#: The protocol registry's ``get``: a protocol's spec by name.
_SpecOf: TypeAlias = Callable[[str], _ProtocolSpec]

# ---------------------------------------------------------------------------------------------- constants

CHUNK_SIZE: Final[int]
"""Bytes the capture reader reads from a file at a time."""
MAX_RECORD_SIZE: Final[int]
"""The largest capture record (packet block) the reader accepts."""
SUPPORTED_LINKTYPES: Final[list[int]]
"""The link types (LINKTYPE_*) whose packets the core parses down to TCP."""
LINKTYPE_NAMES: Final[dict[int, str]]
"""Link type numbers by name, for messages."""
UNICODE_VERSION: Final[str]
"""The Unicode version of the core's table of printable characters (``safe``)."""

# -------------------------------------------------------------------------------------------- decoding

def bind(decoded: type[DataclassInstance], finding: _FindingClass[Any]) -> None:
    """Give the core the classes it builds plain data with (Decoded, Finding; fields checked)."""

def bind_body(protocol: str, cls: type[DataclassInstance]) -> None:
    """Give the core the class the protocol named ``protocol`` makes its frames' body of (its fields checked
    against the protocol's; ValueError for a protocol the core does not have)."""

def decode(
    protocol: str, frame: bytes, missing: int = 0, max_decompressed: int = ..., brief: bool = False
) -> Decoded:
    """Decode one frame of the protocol named ``protocol`` (``missing`` bytes lost at its end) into the bound
    ``Decoded``; ValueError for a protocol the core does not have."""


def finding_text(severity_and_message: _SeverityAndMessage, pid: str, params: dict[str, Any]) -> tuple[str, str]:
    """(severity, text) of finding ``pid`` with ``params`` as the core's record writer makes it."""

def tables(protocol: str) -> dict[str, list[tuple[_Plain, ...]]]:
    """The named tables of the protocol named ``protocol``, rows of plain values: Pulsar's ``command_types``
    (number, name), TubeMQ's ``methods`` (id, constant, server role, request message, response message)."""


def _json_dumps(value: _Plain) -> bytes:
    """Test support: a plain value written by the core's JSON writer."""

def _decode_to_json(
    protocol: str, frames: Sequence[bytes], max_decompressed: int = ..., brief: bool = False
) -> tuple[int, float]:
    """Benchmark support: decode and write every frame as JSON in Rust alone: (bytes written, seconds)."""

@final
class RecordBatches:
    """One of the pipeline's tables as Arrow record batches, read through the Arrow C stream interface
    (``pyarrow.table(batches)``, ``pyarrow.RecordBatchReader.from_stream``) as often as asked."""
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """A PyCapsule named "arrow_array_stream" (the requested schema is not honoured)."""
    @property
    def name(self) -> Literal["frames", "messages", "problems", "exchanges"]:
        """The table's name."""
    @property
    def num_rows(self) -> int:
        """Rows in all its batches."""

def record_tables(records: Sequence[dict[str, Any]], with_json: bool = False) -> list[RecordBatches]:
    """The frames, messages, problems, exchanges and events tables of records made elsewhere (dicts of the
    contract; the events table stays empty); ``with_json``: the frames keep each record's line in a ``json``
    column."""

def merge_summaries(parts: Sequence[str]) -> str:
    """Parts of the pipeline's summary (``AnalysedDissector.take_summary``) merged, as JSON: counts summed,
    latencies with their nearest-rank percentiles (exact while few values, else within the stated error)."""

# --------------------------------------------------------------------------------------------- capture

class CaptureError(Exception):
    """The input cannot be read as a capture at all (missing file, not a capture, header truncated)."""

@final
class CaptureReader(Generic[_PacketT]):
    """One pcap or pcapng file, read once; iterating gives ``packet_class(index, timestamp, linktype, data,
    orig_len)`` objects."""

    def __new__(
        cls, stream: _ReadableBinary, name: str, packet_class: Callable[[int, float, int, bytes, int], _PacketT]
    ) -> CaptureReader[_PacketT]:
        """A capture read from a binary file object (not closed here); ``name`` for messages."""
    @staticmethod
    def open(
        path: str | os.PathLike[str], name: str, packet_class: Callable[[int, float, int, bytes, int], _T]
    ) -> CaptureReader[_T]:
        """A capture file opened by the core (closed by ``close``); OSError as ``open`` raises it."""
    def __iter__(self) -> Self:
        """The reader itself (single pass)."""
    def __next__(self) -> _PacketT:
        """The next packet."""
    def flow_index(
        self, ports: set[int] | frozenset[int] | None
    ) -> tuple[tuple[bytes, bytes, bytes], int, float | None, str | None]:
        """The rest of the file's TCP connections on ``ports``: ((flow keys, packets, bytes) as int64 buffers,
        packets read, first packet's time, the error that stopped the reading)."""
    def close(self) -> None:
        """Stop reading; a file the core opened is closed."""
    @property
    def format(self) -> Literal["pcap", "pcapng"]:
        """``"pcap"`` or ``"pcapng"``."""
    @property
    def compressed(self) -> bool:
        """Whether the file was gzip-compressed."""
    @property
    def truncated(self) -> str | None:
        """Why the reading stopped early, or None."""
    @property
    def packets(self) -> int:
        """Packets read so far."""
    @property
    def linktype(self) -> int | None:
        """Classic pcap: the global header's link type (None for pcapng)."""
    @property
    def snaplen(self) -> int | None:
        """Classic pcap: the snap length (None for pcapng)."""
    @property
    def fcs_len(self) -> int | None:
        """Classic pcap: the FCS length (None for pcapng or when not given)."""
    @property
    def notes(self) -> list[tuple[str, dict[str, int | str | None]]]:
        """The reader's notes so far, as (id, params) in the order found."""

# ------------------------------------------------------------------------------------------- transport

@final
class Dissector(Generic[_FrameT, _EventT]):
    """The pipeline: packets in, frames and events (of the classes given) out, in capture order."""

    def __new__(
        cls,
        options: _PipelineOptions,
        protocols: Iterable[_WireSpec],
        frame: Callable[..., _FrameT],
        event: Callable[..., _EventT],
        decoded: Callable[..., Any],
        finding: _FindingClass[Any],
    ) -> Dissector[_FrameT, _EventT]:
        """A pipeline for ``options``, looking for ``protocols`` in order, building the classes given."""
    def feed_packet(
        self, index: int, timestamp: float, linktype: int, data: ReadableBuffer, orig_len: int
    ) -> list[_FrameT | _EventT]:
        """One captured packet: the frames and events it completes."""
    def hold_packet(self, index: int, timestamp: float, linktype: int, data: ReadableBuffer, orig_len: int) -> int:
        """One captured packet, what it completes held until ``release``: how many items are held."""
    def hold_finish(self) -> int:
        """The end of the capture, what it leaves held until ``release``: how many items are held."""
    def release(self) -> list[_FrameT | _EventT]:
        """The held items."""
    def read_capture(
        self, reader: CaptureReader[Any], at_least: int, max_bytes: int
    ) -> list[_FrameT | _EventT] | None:
        """A batch of the reader's packets through the pipeline, its notes as events; None once read whole."""
    def feed_segment(
        self,
        packet_index: int,
        timestamp: float,
        src_ip: str,
        src_port: int,
        dst_ip: str,
        dst_port: int,
        seq: int,
        ack: int,
        flags: int,
        window: int,
        payload: ReadableBuffer,
        missing_tail: int,
    ) -> list[_FrameT | _EventT]:
        """One TCP segment: the frames and events it completes."""
    def tick(self, now: float) -> list[_FrameT | _EventT]:
        """The clock moved to ``now``: what the time-based expiries make."""
    def finish(self) -> list[_FrameT | _EventT]:
        """The end of the capture: every connection closed."""
    def count_selected(
        self, reader: CaptureReader[Any], flows: set[int] | frozenset[int], offset: int
    ) -> tuple[bytes, bytes, bytes, bytes]:
        """The packets of ``flows`` that complete frames or open connections: int64 buffers (packets, frames,
        connections opened, each packet's connection's ``flow_key``)."""
    def count_indexed(
        self, reader: CaptureReader[Any], ports: set[int] | frozenset[int] | None, offset: int
    ) -> tuple[tuple[tuple[bytes, bytes, bytes], int, float | None, str | None], tuple[bytes, bytes, bytes, bytes]]:
        """The rest of ``reader`` indexed as ``CaptureReader.flow_index(ports)`` indexes it, and in the same
        reading every connection it indexes counted as ``count_selected`` counts (packets numbered from
        ``offset`` + 1): (the index, the count's buffers)."""
    def count_finish(self) -> list[tuple[int, int]]:
        """The end of the capture for its numbers only: (conn, frames) in the order they come."""
    @property
    def numbering(self) -> tuple[int, int]:
        """(frames numbered so far, the id of the next connection)."""
    def set_finish_base(self, conn: int, base: int) -> None:
        """Number the frames the end of the capture leaves on ``conn`` from ``base`` + 1."""
    @property
    def last_time(self) -> float:
        """The time of the last packet fed."""
    @property
    def last_packet(self) -> int:
        """The number of the last packet fed."""
    def other_tcp(self, most: int) -> list[_OtherTcp]:
        """TCP off the protocols' ports: the busiest ``most`` server ports."""

# -------------------------------------------------------------------------------------------- analysis

@final
class AnalysedDissector(Generic[_AnnotatedT, _EventT]):
    """The pipeline and the analysis joined: packets in, annotated frames (or their records, or timeline
    lines) and events out, in capture order."""

    def __new__(
        cls,
        options: _AnalysedOptions,
        protocols: Iterable[_WireSpec],
        classes: tuple[type[Any], type[_EventT], Callable[..., Any], _FindingClass[Any], type[_AnnotatedT]],
        protocol_spec: _SpecOf,
        records: tuple[bool | str, bool, bool, _SeverityAndMessage] | None = None,
        stats: StatsCore | None = None,
        timeline: tuple[TimelineFormat, _SeverityAndMessage] | None = None,
    ) -> AnalysedDissector[_AnnotatedT, _EventT]:
        """``classes``: (Frame, Event, Decoded, Finding, Annotated). ``records`` = (json, summary, payload_bytes,
        severity_and_message): frames come out as records, dicts or (json true) ``JsonLines``; json "columns":
        frames and events into ``take_columns``, nothing comes out; with ``stats`` too, into those statistics.
        ``timeline`` = (format, severity_and_message): frames come out as timeline lines (bytes)."""
    def feed_packet(
        self, index: int, timestamp: float, linktype: int, data: ReadableBuffer, orig_len: int
    ) -> list[_AnnotatedT | _EventT | dict[str, Any] | JsonLines | bytes]:
        """One captured packet: what it completes, analysed."""
    def hold_packet(self, index: int, timestamp: float, linktype: int, data: ReadableBuffer, orig_len: int) -> int:
        """One captured packet, what it completes held until ``release``: how many items are held."""
    def hold_finish(self) -> int:
        """The end of the capture for the pipeline, what it leaves held until ``release``."""
    def release(self) -> list[_AnnotatedT | _EventT | dict[str, Any] | JsonLines | bytes]:
        """The held items, analysed."""
    def read_capture(
        self, reader: CaptureReader[Any], at_least: int, max_bytes: int
    ) -> list[_AnnotatedT | _EventT | dict[str, Any] | JsonLines | bytes] | None:
        """A batch of the reader's packets, analysed, its notes as events; None once read whole."""
    def read_selected(
        self, reader: CaptureReader[Any], flows: set[int] | frozenset[int], offset: int, at_least: int, max_bytes: int
    ) -> list[_AnnotatedT | _EventT | dict[str, Any] | JsonLines | bytes] | None:
        """A batch of the packets of ``flows`` in one file of a larger input; None once the file was read."""
    def plan_numbering(self, packets: bytes, frames_before: bytes, conns: bytes) -> None:
        """Numbers to set before packets: int64 buffers (packets, frames numbered before each, conn or -1)."""
    def event(self, event: _EventT) -> list[_AnnotatedT | _EventT | dict[str, Any] | JsonLines | bytes]:
        """An event from outside the pipeline (a capture file's note), through the analysis."""
    def tick(self, now: float) -> list[_AnnotatedT | _EventT | dict[str, Any] | JsonLines | bytes]:
        """The clock moved to ``now``: the pipeline's and the analysis' expiries."""
    def finish(self) -> list[_EventT]:
        """The analysis' events of the end of every connection still open."""
    @property
    def last_time(self) -> float:
        """The time of the last packet fed."""
    @property
    def numbering(self) -> tuple[int, int]:
        """(frames numbered so far, the id of the next connection)."""
    def set_finish_base(self, conn: int, base: int) -> None:
        """Number the frames the end of the capture leaves on ``conn`` from ``base`` + 1."""
    @property
    def json_lines(self) -> tuple[int, int]:
        """The frame records made so far, and their problems: (frames, problems)."""
    def take_columns(self) -> list[RecordBatches]:
        """The frames, messages, problems, exchanges and events columns made so far (records "columns"), emptied."""
    def take_summary(self) -> str:
        """The summary's statistics of the frames (and the events' problems) put into the tables since the last
        call, as JSON."""
    @property
    def columns_size(self) -> int:
        """Bytes the columns made so far hold."""
    @property
    def timeline_lines(self) -> tuple[int, int]:
        """The timeline lines written so far, and their problems: (frames, problems)."""
    @property
    def last_packet(self) -> int:
        """The number of the last packet fed."""
    def other_tcp(self, most: int) -> list[_OtherTcp]:
        """TCP off the protocols' ports: the busiest ``most`` server ports."""

# --------------------------------------------------------------------------------------------- records

@final
class FrameRecords(Generic[_RecordT]):
    """The record maker for annotated frames held in Python: the same record the core makes of its own."""

    @overload
    def __new__(
        cls,
        severity_and_message: _SeverityAndMessage,
        protocol_spec: _SpecOf,
        summary: bool = False,
        payload_bytes: bool = False,
        json: Literal[False] = False,
    ) -> FrameRecords[dict[str, Any]]:
        """Records as dicts."""
    @overload
    def __new__(
        cls,
        severity_and_message: _SeverityAndMessage,
        protocol_spec: _SpecOf,
        summary: bool = False,
        payload_bytes: bool = False,
        *,
        json: Literal[True],
    ) -> FrameRecords[bytes]:
        """Records as JSON lines (bytes, newline included)."""
    @overload
    def __new__(
        cls,
        severity_and_message: _SeverityAndMessage,
        protocol_spec: _SpecOf,
        summary: bool,
        payload_bytes: bool,
        json: Literal[True],
    ) -> FrameRecords[bytes]:
        """Records as JSON lines (bytes, newline included), the flags given by position."""
    def __call__(self, item: Any) -> _RecordT:
        """The record of an ``Annotated(frame, notes, findings)``."""

@final
class JsonLines:
    """JSON lines the core wrote, as a read-only buffer (``memoryview``, ``bytes()``, a binary file's ``write``)."""

    def __len__(self) -> int:
        """Bytes held."""
    def __buffer__(self, flags: int, /) -> memoryview:
        """A read-only view of the bytes (the buffer protocol; a slot wrapper Python shows from 3.12)."""
    def __release_buffer__(self, buffer: memoryview, /) -> None:
        """Release a view (nothing to do; a slot wrapper Python shows from 3.12)."""

# ------------------------------------------------------------------------------------------- statistics

@final
class StatsCore:
    """The statistics, counted in place or on their own thread."""

    def __new__(
        cls,
        latency_samples: int,
        plot_samples: int,
        actor_memory: int,
        chunk_memory: int,
        actor_latency_samples: int | None = None,
        memory_total: int | None = None,
        max_connections: int | None = None,
    ) -> Self:
        """Statistics bounded by these sample sizes and memory caps."""
    def add(self, record: dict[str, Any]) -> None:
        """One record of the JSON contract."""
    def state(self) -> _StatsState:
        """The figures as plain data."""
    @property
    def origin(self) -> float | None:
        """The first record's time: time 0 of the timeline and the plots."""
    def plot_points(self) -> list[tuple[float, str, float, bool]]:
        """(time, request type, ms, answered by an error) of the responses kept for plotting."""
    def throughput(self) -> dict[int, list[int]]:
        """Time bucket -> [messages to broker, bytes to broker, messages to client, bytes to client]."""
    @property
    def throughput_width(self) -> float:
        """Seconds per throughput bucket."""

@disjoint_base
class Latencies:
    """A bounded latency sample: exact count, total and max; percentiles from the sample (subclassable; a
    subclass cannot also derive from another class with its own layout, hence ``disjoint_base``)."""

    def __new__(cls, cap: int = 100000) -> Self:
        """A sample of at most ``cap`` values."""
    def add(self, value: float) -> None:
        """One latency."""
    @property
    def count(self) -> int:
        """Values seen."""
    @property
    def items(self) -> list[float]:
        """The sampled values, in the sample's order."""
    def figures(self) -> _LatencyFigures:
        """(count, total, max, sample, cap)."""

# ------------------------------------------------------------------------------------------------- journeys

@final
class JourneyStore:
    """The open message journeys of a capture, in the store of the protocol named (its name in the engine's
    registry: ``Protocol::journeys``; ValueError when it has none). ``analysis/journeys.py: JourneyTracker``
    calls it per frame with the record's scalars. Each journey closed (the oldest opened first when ``max_open`` are open; all at
    ``finish``) comes back through ``on_close(seq, topic, ledger, entry, send, receipt, deliveries, acks,
    deliveries_dropped, acks_dropped)`` (which must not call the store); a batch-index ack's entries are
    ``acked_entries(words, width)``."""

    def __new__(
        cls,
        protocol: str,
        on_close: Callable[..., object],
        acked_entries: Callable[[tuple[int, ...], int], object],
        max_open: int,
        max_milestones: int,
    ) -> Self:
        """An empty store with these caps (journeys open; deliveries and acks kept over all of them)."""
    def send(
        self,
        index: int,
        time: float,
        conn: int,
        producer: str | None,
        producer_id: int | None,
        sequence_id: int | None,
        messages: int,
        topic: str | None,
    ) -> None:
        """A SEND (waits for the receipt that answers it)."""
    def receipt(
        self,
        answers: object,
        ledger: int | None,
        entry: int | None,
        topic: str | None,
        index: int,
        time: float,
        conn: int,
    ) -> tuple[int, bool] | None:
        """A SEND_RECEIPT: (seq of its journey, whether the SEND it answers joined it); None without an id."""
    def message(
        self,
        ledger: int,
        entry: int,
        topic: str | None,
        index: int,
        time: float,
        conn: int,
        consumer: str | None,
        consumer_id: int | None,
        subscription: str | None,
        redelivery_count: int,
        batch_size: object,
    ) -> int:
        """A MESSAGE: the seq of its journey."""
    def ack(
        self,
        index: int,
        time: float,
        conn: int,
        ack_type: str | None,
        ack_sets: Sequence[tuple[int, int, Sequence[int]]] | None,
        acks: Sequence[object] | None,
        discards: Sequence[object] | None,
        discarded: str | None,
    ) -> list[int]:
        """An ACK: the seqs of the journeys it joined (one per delivery acknowledged or discarded)."""
    def redelivered(
        self, topic: str | None, ids: Sequence[tuple[int, int]], redelivers: Sequence[object] | None
    ) -> list[int]:
        """The seqs of the open journeys a REDELIVER_UNACKNOWLEDGED_MESSAGES names or hands back."""
    def peek(self, seq: int) -> tuple[str | None, int, int, tuple[Any, ...] | None] | None:
        """(topic, ledger, entry, send) of an open journey."""
    def finish(self) -> None:
        """Closes every open journey, oldest first."""
    @property
    def closed_early(self) -> int:
        """Journeys closed because too many were open."""
    @property
    def milestones(self) -> int:
        """Deliveries and acks kept by the open journeys."""
    @property
    def milestones_dropped(self) -> int:
        """Deliveries and acks of closed journeys counted, not kept."""
    def __len__(self) -> int:
        """Journeys open now."""

# ------------------------------------------------------------------------------------------------- text

def safe(value: object, limit: int = ...) -> str:
    """The one escape of wire strings (``output/text.py: safe``), cut to ``limit`` characters (60)."""

def date_ms(value: object) -> str:
    """Epoch milliseconds as a UTC date and time."""

def shown_b64(value: object, kind: str = "text", limit: int = 1000) -> tuple[str, bool]:
    """A bytes field of a record as the timeline shows it: (text, is hex)."""

def message_id_text(value: object) -> str:
    """A message id (or a list of them) as the timeline shows it."""

def payload_preview(message: object) -> str:
    """A message's payload as ``--payload`` shows it."""

@final
class TimelineFormat:
    """The timeline's line maker (plans, labels, time origin), shared with ``AnalysedDissector``."""

    def __new__(
        cls,
        plan_of: Callable[[str], _TimelinePlan | None],
        labels: dict[str, str],
        bytes_kinds: dict[str, str],
        absolute_time: bool = False,
        previews: bool = False,
    ) -> Self:
        """``plan_of(protocol)``: its plan or None; ``labels``/``bytes_kinds``: of the fields shown by default."""
    @staticmethod
    def roles() -> list[str]:
        """The roles of pieces, in the order of their numbers."""
    @property
    def origin(self) -> float | None:
        """Time 0 of the lines (the first item's time), or None."""
    @origin.setter
    def origin(self, origin: float | None) -> None: ...
    @property
    def not_dates(self) -> tuple[int, float | None]:
        """``--absolute-time``: (times shown as numbers as no UTC date holds them, the first of them)."""
    def pieces(self, rec: dict[str, Any]) -> list[tuple[str, int]]:
        """The line of a record as [(text, role number)]."""
    def text(self, rec: dict[str, Any]) -> str:
        """The line of a record as plain text."""
