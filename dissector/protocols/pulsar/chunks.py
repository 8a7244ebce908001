"""Reassembly of chunked messages across frames (MessageMetadata uuid / chunk_id / num_chunks_from_msg).

Chunks of one message are keyed by (direction, producer or consumer id, producer_name, uuid) within one
connection. Uncompressed messages are hashed as the chunks arrive, so memory stays small however large the
message; compressed ones must be kept until the last chunk (the codec ran over the whole message), bounded by
the decompression limit. At most ``max_pending`` messages are reassembled at once, and the chunks kept for
decompression hold at most ``max_kept_bytes`` in all (``chunk.abandoned`` for the oldest beyond either).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ...problems import Finding
from . import codecs


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


class ChunkAssembler:
    def __init__(self, max_decompressed: int, max_pending: int, max_kept_bytes: int | None = None) -> None:
        self._partials: dict[tuple, _Partial] = {}
        self._max = max_decompressed
        self._max_pending = max_pending
        self._max_kept = max_decompressed if max_kept_bytes is None else max_kept_bytes
        self._kept_bytes = 0  # bytes of compressed chunks held, over every message in progress

    def add(self, key: tuple, frame_index: int, md: dict, compression: int, chunk: bytes | None,
            findings: list[Finding]) -> dict | None:
        """Feed one chunk; ``md`` is its MessageMetadata (as a dict), ``chunk`` its payload (None if lost).

        Returns the reassembled message ({uuid, payload_size, payload_sha256, chunks: [frame indexes]}) when
        this was its last chunk; findings go to ``findings``.
        """
        cid, n, uuid = md.get("chunk_id", 0), md.get("num_chunks_from_msg", 0), md.get("uuid", "")
        full_key = key + (md.get("producer_name", ""), uuid)
        part = self._partials.get(full_key)
        if cid == 0:
            if part is not None:
                findings.append(Finding("chunk.restarted", {"uuid": uuid, "seen": part.next_chunk,
                                                            "num_chunks": part.num_chunks}))
            part = _Partial(uuid, n, md.get("total_chunk_msg_size"), compression, md.get("uncompressed_size"))
            if part.compression and (part.total_size or 0) <= self._max:
                part.kept = []
            self._partials[full_key] = part
            if len(self._partials) > self._max_pending:
                self._abandon_oldest(findings, {"limit": self._max_pending})
        elif part is None:
            findings.append(Finding("chunk.orphan", {"chunk_id": cid, "num_chunks": n, "uuid": uuid}))
            return None
        elif cid < part.next_chunk:
            findings.append(Finding("chunk.duplicate", {"chunk_id": cid, "uuid": uuid}))
            return None
        elif cid > part.next_chunk:
            self._forget(full_key)
            findings.append(Finding("chunk.missing", {"chunk_id": cid, "uuid": uuid, "expected": part.next_chunk}))
            return None
        if chunk is None:
            self._forget(full_key)
            findings.append(Finding("chunk.lost", {"chunk_id": cid, "uuid": uuid}))
            return None
        part.next_chunk = cid + 1
        part.size += len(chunk)
        part.frames.append(frame_index)
        if part.kept is not None:
            part.kept.append(chunk)
            self._kept_bytes += len(chunk)
            while self._kept_bytes > self._max_kept and self._partials:
                self._abandon_oldest(findings, {"bytes": self._max_kept})
            if full_key not in self._partials:
                return None  # this very message was the oldest
        else:
            part.sha.update(chunk)
        if part.next_chunk < part.num_chunks:
            return None
        self._forget(full_key)
        return self._complete(part, findings)

    def _forget(self, key: tuple) -> _Partial:
        part = self._partials.pop(key)
        if part.kept is not None:
            self._kept_bytes -= sum(map(len, part.kept))
        return part

    def _abandon_oldest(self, findings: list[Finding], why: dict) -> None:
        oldest = self._forget(next(iter(self._partials)))
        findings.append(Finding("chunk.abandoned", {**why, "uuid": oldest.uuid, "seen": oldest.next_chunk,
                                                    "num_chunks": oldest.num_chunks}))

    def _complete(self, part: _Partial, findings: list[Finding]) -> dict:
        if part.total_size is not None and part.size != part.total_size:
            findings.append(Finding("chunk.size_mismatch", {"uuid": part.uuid, "size": part.size,
                                                            "total": part.total_size}))
        size = part.size
        lost = {"uuid": part.uuid, "payload_size": None, "payload_sha256": None, "chunks": part.frames}
        if part.kept is not None:
            result = codecs.decompress(part.compression, b"".join(part.kept), part.uncompressed_size, self._max)
            if result.problem:
                findings.append(result.problem)
            if result.data is None:
                return lost
            part.sha.update(result.data)
            size = len(result.data)
        elif part.compression:
            findings.append(Finding("chunk.too_large", {"uuid": part.uuid}))
            return lost
        return {"uuid": part.uuid, "payload_size": size, "payload_sha256": part.sha.hexdigest(),
                "chunks": part.frames}

    def pending(self) -> list[_Partial]:
        return list(self._partials.values())
