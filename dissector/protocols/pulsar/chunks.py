"""Reassembly of chunked messages alone, as Pulsar's session does it (``crates/engine/src/protocols/pulsar/chunks.rs``; the facts
are in ``docs/chunks.md``): a thin binding of the compiled core for tests and tools that feed chunks directly.
The session itself runs in the core and never goes through here."""

from __future__ import annotations

from typing import NamedTuple

from dissector import _core as _core

from ...problems import Finding

CLIENT_MAX_PENDING = 10  # C++ ConsumerConfiguration maxPendingChunkedMessage, default
CLIENT_EXPIRE_S = 60.0  # C++ ConsumerConfiguration expireTimeOfIncompleteChunkedMessageMs, default (in seconds)


class Pending(NamedTuple):
    """A message still being reassembled."""

    uuid: str
    frames: list[int]
    next_chunk: int  # chunks seen in order
    num_chunks: int


class ChunkAssembler:
    def __init__(self, max_decompressed: int, max_pending: int, max_kept_bytes: int | None = None, *,
                 mid_stream: bool | None = None, client_max_pending: int = CLIENT_MAX_PENDING,
                 client_expire_s: float = CLIENT_EXPIRE_S) -> None:
        """``mid_stream``: whether the connection was first seen after its start (None: not known); only when
        it is known not to be can a chunk with no chunk 0 before it be called one the client never had."""
        self._core = _core.ChunkAssembler(Finding, max_decompressed, max_pending, max_kept_bytes, mid_stream,
                                          client_max_pending, client_expire_s)

    def add(self, key: tuple, frame_index: int, md: dict, compression: int, chunk: bytes | None,
            findings: list[Finding], *, time: float | None = None, checksum: str | None = None) -> dict | None:
        """Feed one chunk; ``key`` is (direction, producer or consumer id), ``md`` its MessageMetadata (as a
        dict), ``chunk`` its payload (None if not captured whole), ``time`` when it came (the client's expiry
        clock; None: no expiry), ``checksum`` its verdict (``invalid``: the client discards the frame).

        Returns the reassembled message ({uuid, payload_size, payload_sha256, chunks: [frame indexes]}) when
        this was its last chunk and the receiver gets the message; findings go to ``findings``.
        """
        return self._core.add(tuple(key), frame_index, md, compression, chunk, findings, time, checksum)

    def pending(self) -> list[Pending]:
        """Messages still being reassembled (not those whose payload is already known to be lost)."""
        return [Pending(*p) for p in self._core.pending()]

    @property
    def kept_bytes(self) -> int:
        """Bytes of compressed chunks held for decompression, over every message in progress."""
        return self._core.kept_bytes
