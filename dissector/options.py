"""Every knob of the pipeline in one place, with safe defaults: what to decode and how much state to keep.

Each cap bounds memory on hostile or one-sided input; when a cap makes the pipeline drop state it says so
(a ``STATE_DROPPED`` event, or the problem id named beside the cap), never silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

MiB = 1024 * 1024
MAX_SETTING = 2**63 - 1  # the largest number a setting may have (the core keeps them in 64 bits)


@dataclass(frozen=True)
class Options:
    # What to decode.
    # extra server ports, beside every protocol's own: an int is the first protocol's (Pulsar), a
    # (protocol, server role or None, port) another's (``--port tubemq:9000``, ``--port tubemq:broker:9123``)
    ports: frozenset[int | tuple[str, str | None, int]] = frozenset()
    protocols: tuple[str, ...] = ()  # names of the protocols to look for; () = all registered
    detect: bool = False  # also look for a protocol on connections off its ports (by its probe)
    detect_budget: int = 64 * 1024  # bytes an off-port connection may take to show one good frame

    # How deep to decode: ``summary`` keeps only what one-line views read (the timeline without -V/--payload,
    # stats, follow): e.g. a few MessageMetadata fields instead of all of them. Records then carry that alone.
    summary: bool = False
    # Keep each frame's bytes in model.Frame.data (and a record's ``frame_bytes``) for a hex dump (-x); never in
    # JSON. Off: a frame's bytes are dropped once decoded.
    keep_frame_bytes: bool = False

    # Decoding limits (problem ids: OVERSIZED, payload.decompression, chunk.too_large).
    # the largest frame accepted, of every protocol; None: each protocol's own (ProtocolSpec.max_frame_size:
    # Pulsar's broker default maxMessageSize and frame padding, TubeMQ's largest frame its servers accept)
    max_frame_size: int | None = None
    max_decompressed: int = 64 * MiB
    # a batch's entries listed on its record (``messages``); beyond, every entry is still read and counted (the
    # record's ``messages_summary``: count and bytes; stats count them all) and batch.entries_truncated says how
    # many more there were. 1,000 is the Java client's default batchingMaxMessages: a batch from a client left at
    # its defaults is never cut, and a record stays a few hundred KB however many 6-byte entries a 64 MiB batch
    # holds (eleven million). An encrypted batch lists none: its entries cannot be read, its claim is counted.
    max_batch_entries: int = 1_000
    # elements of repeated fields one protobuf message keeps (a command's, a metadata's), nested messages and
    # repeated values alike; beyond, they are skipped and counted (protobuf.repeated_elided). An empty element
    # is two bytes on the wire and about a kilobyte once decoded: a 2 MB ACK of a million empty ids took 740 MB.
    # Clients send a few thousand (the Java client's ack grouping flushes at 1,000).
    max_repeated_elements: int = 100_000
    # JSON lines (--json) are written on a thread pool (RAYON_NUM_THREADS threads, default: one per core)
    # while the next packets are read and decoded: about this many bytes of decoded frames may wait for it.
    # 0: every record written on the one thread (the same bytes, slower).
    pool_bytes: int = 16 * MiB
    # the bytes from the wire every holder together keeps at once: out-of-order bytes, compressed chunks and
    # decoded frames waiting for the pool, each besides its own cap above and below. Over it, the holder that
    # passed it lets go as over its own cap, naming this option (GAP "memory budget" with STATE_DROPPED,
    # chunk.abandoned with memory_budget); the pool waits instead. With one payload decompressed
    # (max_decompressed) and the tool's own, a command stays under 256 MB.
    memory_budget: int = 128 * MiB

    # TCP reassembly (GAP reason "buffer limit" / "missing segment"; STATE_DROPPED for connections).
    max_connections: int = 65_536  # connections tracked at once; the oldest is forgotten beyond
    max_buffered_per_direction: int = 8 * MiB  # out-of-order bytes held per direction
    # the same over every connection (STATE_DROPPED, GAP "total buffer limit": the longest holder gives up)
    max_buffered_total: int = 64 * MiB
    ooo_wait_packets: int = 1000  # a hole is declared lost after this many later segments ...
    hole_timeout: float = 10.0  # ... or this many seconds
    close_wait_packets: int = 1000

    # Conversation analysis (STATE_DROPPED; UNANSWERED with evicted=true for a dropped request).
    request_timeout: float = 30.0  # the clients' operation timeout: later answers are response.slow
    max_pending_requests: int = 10_000  # requests awaiting an answer, per connection
    max_actors: int = 10_000  # producers / consumers remembered per connection
    max_remembered_messages: int = 100_000  # delivered message ids per consumer (redelivery, ACK pairing)
    max_remembered_total: int = 200_000  # the same, over every consumer of every connection: the global budget
    max_redelivered_reported: int = 1_000  # REDELIVERED warnings per consumer; one more line counts the rest
    max_chunked_messages: int = 256  # chunked messages being reassembled, per connection (chunk.abandoned)
    max_chunk_bytes: int = 64 * MiB  # compressed chunks held for decompression, per connection (chunk.abandoned)
    # the same over every connection: the connection whose chunk passes it gives up its oldest message (chunk.abandoned
    # with total_bytes): 400 connections each holding just under max_chunk_bytes held 25 GB
    max_chunk_bytes_total: int = 128 * MiB
    redirect_loop_limit: int = 8  # lookups of one topic redirected this often on one connection: a loop

    # Statistics.
    latency_samples: int = 100_000  # per request type: percentiles from a uniform sample beyond this
    # the same per connection and per producer (their tables multiply with the connections and producers)
    actor_latency_samples: int = 10_000
    # message frames and entries the statistics remember to match ACKs, receipts and duplicate deliveries, over
    # every producer and consumer (each gets an equal share, at most 20,000): the global budget
    stats_memory_total: int = 100_000
    plot_samples: int = 50_000  # responses drawn in a latency plot at most
    # connections `stats` lists; beyond, the oldest closed one (else the oldest) is forgotten, counted in
    # connections_dropped (a SYN flood kept a few KB for every connection ever seen)
    max_stats_connections: int = 10_000

    def __post_init__(self) -> None:
        # Every number here is a size, a count or a time: a negative one (or NaN, or infinity) means no bound
        # at all to the code that reads it, and an int beyond 64 bits does not fit the core's. Refused where
        # it is made.
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not (0 <= value <= MAX_SETTING and math.isfinite(value)):
                raise OptionError(field.name, value)

    @property
    def port_numbers(self) -> set[int]:
        """The extra ports' numbers, whichever protocol each is for."""
        return {p if isinstance(p, int) else p[2] for p in self.ports}


class OptionError(ValueError):
    """A setting of ``Options`` that is no bound: negative, NaN or infinite."""

    def __init__(self, name: str, value) -> None:
        super().__init__(f"{name} must be a number from 0 to {MAX_SETTING}, not {value!r}")
        self.name = name
        self.value = value
