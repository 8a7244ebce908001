"""Reassembly of chunked messages across frames (MessageMetadata uuid / chunk_id / num_chunks_from_msg).

Chunks of one message are keyed by (connection, direction, producer_name, uuid). Uncompressed messages are
hashed as the chunks arrive, so memory stays small however large the message; compressed ones must be kept
until the last chunk (the codec ran over the whole message), bounded by the decompression limit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from . import codecs
from .expert import ERROR, WARNING, Problem
from .pbdict import text


MAX_PENDING = 256  # chunked messages reassembled at once; bounds memory when last chunks never come


@dataclass
class _Partial:
    uuid: str
    num_chunks: int
    total_size: int | None
    compression: int
    uncompressed_size: int | None
    next_chunk: int = 0
    size: int = 0
    frames: list[int] = field(default_factory=list)
    sha: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    kept: list[bytes] | None = None


@dataclass
class ChunkResult:
    reassembled: dict | None  # {uuid, payload_size, payload_sha256, chunks: [frame indexes]} when complete
    problems: list[str]


class ChunkAssembler:
    def __init__(self, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> None:
        self._partials: dict[tuple, _Partial] = {}
        self._max = max_decompressed

    def add(self, key: tuple, frame_index: int, md, chunk: bytes | None) -> ChunkResult:
        """Feed one chunk; ``md`` is its MessageMetadata, ``chunk`` its payload bytes (None if lost)."""
        problems: list[str] = []
        cid, n, uuid = md.chunk_id, md.num_chunks_from_msg, text(md.uuid)
        full_key = key + (md.producer_name, uuid)
        part = self._partials.get(full_key)
        if cid == 0:
            if part is not None:
                problems.append(Problem("chunk.restarted", WARNING,
                                        f"chunked message {uuid!r} restarted after {part.next_chunk} of "
                                f"{part.num_chunks} chunks"))
            part = _Partial(uuid, n, md.total_chunk_msg_size if md.HasField("total_chunk_msg_size") else None,
                            md.compression, md.uncompressed_size if md.HasField("uncompressed_size") else None)
            if part.compression and (part.total_size or 0) <= self._max:
                part.kept = []
            self._partials[full_key] = part
            if len(self._partials) > MAX_PENDING:
                oldest_key = next(iter(self._partials))
                oldest = self._partials.pop(oldest_key)
                problems.append(Problem("chunk.abandoned", WARNING,
                                        f"more than {MAX_PENDING} chunked messages in progress: gave up on "
                                f"{oldest.uuid!r} after {oldest.next_chunk} of {oldest.num_chunks} chunks"))
        elif part is None:
            return ChunkResult(None, [Problem("chunk.orphan", WARNING,
                                              f"chunk {cid} of {n} of {uuid!r} without its first chunk in the capture")
                                      ])
        elif cid < part.next_chunk:
            return ChunkResult(None, [Problem("chunk.duplicate", WARNING, f"duplicate chunk {cid} of {uuid!r}")])
        elif cid > part.next_chunk:
            del self._partials[full_key]
            return ChunkResult(None, [Problem("chunk.missing", ERROR,
                                              f"chunk {cid} of {uuid!r} arrived but chunk {part.next_chunk} is "
                                              f"missing; message {uuid!r} cannot be reassembled")])
        if chunk is None:
            del self._partials[full_key]
            return ChunkResult(None, problems + [Problem("chunk.lost", WARNING,
                                                         f"chunk {cid} of {uuid!r} is incomplete; message lost")])
        part.next_chunk = cid + 1
        part.size += len(chunk)
        part.frames.append(frame_index)
        if part.kept is not None:
            part.kept.append(chunk)
        else:
            part.sha.update(chunk)
        if part.next_chunk < part.num_chunks:
            return ChunkResult(None, problems)
        del self._partials[full_key]
        return ChunkResult(self._complete(part, problems), problems)

    def _complete(self, part: _Partial, problems: list[str]) -> dict:
        if part.total_size is not None and part.size != part.total_size:
            problems.append(Problem("chunk.size_mismatch", ERROR,
                                    f"chunks of {part.uuid!r} add up to {part.size} bytes, total_chunk_msg_size "
                            f"says {part.total_size}"))
        size = part.size
        if part.kept is not None:
            result = codecs.decompress(part.compression, b"".join(part.kept), part.uncompressed_size, self._max)
            if result.problem:
                problems.append(Problem("payload.decompression", ERROR, result.problem))
            if result.data is None:
                return {"uuid": part.uuid, "payload_size": None, "payload_sha256": None, "chunks": part.frames}
            part.sha.update(result.data)
            size = len(result.data)
        elif part.compression:
            problems.append(Problem("chunk.too_large", WARNING,
                                    f"compressed chunked message {part.uuid!r} is larger than the decompression limit"))
            return {"uuid": part.uuid, "payload_size": None, "payload_sha256": None, "chunks": part.frames}
        return {"uuid": part.uuid, "payload_size": size, "payload_sha256": part.sha.hexdigest(),
                "chunks": part.frames}

    def pending(self) -> list[_Partial]:
        return list(self._partials.values())
