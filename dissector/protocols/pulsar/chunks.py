"""Reassembly of chunked messages across frames (MessageMetadata uuid / chunk_id / num_chunks_from_msg), as each
end of the connection sees them (``docs/chunks.md`` has the facts, from the official clients' code).

Towards the broker (SEND) every chunk is stored as it comes: chunks are reassembled per (producer, producer_name,
uuid), and a chunk seen before is a duplicate (``chunk.duplicate``), never the start of something new.

Towards the client (MESSAGE) the model is the consumer of the C++ client 4.2.0 (``ConsumerImpl::
processMessageChunk``): one cache per consumer, keyed by uuid, of at most ``client_max_pending`` messages
(maxPendingChunkedMessage), expired on the client's timer after ``client_expire_s``
(expireTimeOfIncompleteChunkedMessageMs). A duplicate or out-of-order chunk, a chunk with nothing cached for it,
a full cache, an expiry, a bad checksum or a failed decompression make the consumer drop the message: the frame
then says so (``chunk.dropped_by_client``, with the reason) and no frame claims it ``reassembled``.

Uncompressed messages are hashed as the chunks arrive, so memory stays small however large the message;
compressed ones must be kept until the last chunk (the codec ran over the whole message), bounded by the
decompression limit. At most ``max_pending`` messages are reassembled at once, and the chunks kept for
decompression hold at most ``max_kept_bytes`` in all (``chunk.abandoned`` for the oldest beyond either). What
is remembered of finished or dropped messages (to tell a duplicate from an orphan) is a few ids, capped too.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

from ...model import TO_CLIENT
from ...problems import Finding
from . import codecs

CLIENT_MAX_PENDING = 10  # C++ ConsumerConfiguration maxPendingChunkedMessage, default
CLIENT_EXPIRE_S = 60.0  # C++ ConsumerConfiguration expireTimeOfIncompleteChunkedMessageMs, default (in seconds)
# payload.decompression cases in which the client's codec fails as well (not this tool's own limits, and not an
# unknown codec, which the C++ client passes through as if uncompressed)
_CLIENT_FAILS = frozenset({"failed", "bomb_declared"})
_FRAMES_SHOWN = 20  # frame indexes a finding lists at most


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
    first: tuple[int, int] | None = None  # (length, CRC-32) of chunk 0: tells a repeat from a restart
    lost: bool = False  # a chunk not captured whole: the payload cannot be recovered
    last_time: float | None = None  # when its last chunk came (the client's expiry clock)


@dataclass
class _Consumer:
    """The chunked-message cache of one consumer, as the client keeps it."""

    cache: OrderedDict = field(default_factory=OrderedDict)  # uuid -> full key, in the order chunk 0 came
    next_fire: float | None = None  # the client's expiry timer, started by the consumer's first chunk


class _Gone(NamedTuple):
    """A message no longer in progress: ``complete``, ``dropped`` (by the client), ``broken`` (cannot be
    reassembled here) or ``abandoned`` (this tool's cap)."""

    state: str
    frame: int
    first: tuple[int, int] | None = None


def _digest(chunk: bytes) -> tuple[int, int]:
    return len(chunk), zlib.crc32(chunk)


class ChunkAssembler:
    def __init__(self, max_decompressed: int, max_pending: int, max_kept_bytes: int | None = None, *,
                 mid_stream: bool | None = None, client_max_pending: int = CLIENT_MAX_PENDING,
                 client_expire_s: float = CLIENT_EXPIRE_S) -> None:
        """``mid_stream``: whether the connection was first seen after its start (None: not known); only when
        it is known not to be can a chunk with no chunk 0 before it be called one the client never had."""
        self._partials: dict[tuple, _Partial] = {}
        self._consumers: OrderedDict[tuple, _Consumer] = OrderedDict()
        self._gone: OrderedDict[tuple, _Gone] = OrderedDict()
        self._max = max_decompressed
        self._max_pending = max_pending
        self._max_kept = max_decompressed if max_kept_bytes is None else max_kept_bytes
        self._kept_bytes = 0  # bytes of compressed chunks held, over every message in progress
        self._remembered = max(4 * max_pending, 64)  # finished messages and consumers remembered
        self._mid_stream = mid_stream
        self._client_max = client_max_pending
        self._client_expire = client_expire_s

    def add(self, key: tuple, frame_index: int, md: dict, compression: int, chunk: bytes | None,
            findings: list[Finding], *, time: float | None = None, checksum: str | None = None) -> dict | None:
        """Feed one chunk; ``key`` is (direction, producer or consumer id), ``md`` its MessageMetadata (as a
        dict), ``chunk`` its payload (None if not captured whole), ``time`` when it came (the client's expiry
        clock; None: no expiry), ``checksum`` its verdict (``invalid``: the client discards the frame).

        Returns the reassembled message ({uuid, payload_size, payload_sha256, chunks: [frame indexes]}) when
        this was its last chunk and the receiver gets the message; findings go to ``findings``.
        """
        if key and key[0] == TO_CLIENT:
            return self._delivered(key, frame_index, md, compression, chunk, findings, time, checksum)
        return self._published(key, frame_index, md, compression, chunk, findings, time)

    # ------------------------------------------------------------------ towards the broker

    def _published(self, key: tuple, frame_index: int, md: dict, compression: int, chunk: bytes | None,
                   findings: list[Finding], time: float | None) -> dict | None:
        cid, n, uuid = md.get("chunk_id", 0), md.get("num_chunks_from_msg", 0), md.get("uuid", "")
        full = key + (md.get("producer_name", ""), uuid)
        part = self._partials.get(full)
        if part is None:
            gone = self._gone.get(full)
            if cid == 0:
                if gone is not None and gone.state == "complete" and chunk is not None \
                        and gone.first == _digest(chunk):
                    findings.append(Finding("chunk.duplicate", {"chunk_id": cid, "uuid": uuid}))
                    return None
                part = self._start(full, md, compression, findings)
            elif gone is None:
                findings.append(Finding("chunk.orphan", {"chunk_id": cid, "num_chunks": n, "uuid": uuid}))
                return None
            else:
                if gone.state == "complete":
                    findings.append(Finding("chunk.duplicate", {"chunk_id": cid, "uuid": uuid}))
                return None  # a message already said to be broken or abandoned: nothing more to say
        elif cid < part.next_chunk:
            if cid == 0 and chunk is not None and part.first is not None and _digest(chunk) != part.first:
                # chunk 0 again with other bytes: the producer started the message over
                findings.append(Finding("chunk.restarted", {"uuid": uuid, "seen": part.next_chunk,
                                                            "num_chunks": part.num_chunks}))
                self._forget(full)
                part = self._start(full, md, compression, findings)
            else:
                findings.append(Finding("chunk.duplicate", {"chunk_id": cid, "uuid": uuid}))
                return None
        elif cid > part.next_chunk:
            self._forget(full)
            self._remember(full, "broken", frame_index)
            findings.append(Finding("chunk.missing", {"chunk_id": cid, "uuid": uuid, "expected": part.next_chunk}))
            return None
        if full not in self._partials or not self._append(full, part, cid, frame_index, chunk, findings, time):
            return None
        self._forget(full)
        self._remember(full, "complete", frame_index, part.first)
        return self._complete(part, findings)[0]

    # ------------------------------------------------------------------ towards the client

    def _delivered(self, key: tuple, frame_index: int, md: dict, compression: int, chunk: bytes | None,
                   findings: list[Finding], time: float | None, checksum: str | None) -> dict | None:
        cid, n, uuid = md.get("chunk_id", 0), md.get("num_chunks_from_msg", 0), md.get("uuid", "")
        if n <= 1 or "num_messages_in_batch" in md:
            return None  # the client takes it for a whole message, not a chunk (isChunkedMessage)
        if checksum == "invalid":
            # discarded before any chunk handling: the cache is left as it was, this chunk never reaches it
            findings.append(Finding("chunk.dropped_by_client", {"reason": "checksum", "uuid": uuid, "chunk_id": cid,
                                                                "num_chunks": n}))
            return None
        consumer = self._consumer(key)
        if time is not None and self._mid_stream is False:
            self._expire(consumer, time, frame_index, findings)
        full = key + (uuid,)
        part = self._partials.get(full)
        if part is None:
            if cid != 0:
                self._uncached(full, cid, n, uuid, findings)
                return None
            while consumer.cache and len(consumer.cache) >= self._client_max:
                old_full = next(iter(consumer.cache.values()))
                self._client_drop(old_full, "cache_full", frame_index, findings, limit=self._client_max)
            part = self._start(full, md, compression, findings)
            if full not in self._partials:
                return None  # abandoned at once (max_pending)
            consumer.cache[uuid] = full
        elif cid != part.next_chunk:
            if cid > part.next_chunk and part.lost:
                # frames of this message were lost from the capture: the client may have had the chunks between
                self._forget(full)
                self._remember(full, "broken", frame_index)
                findings.append(Finding("chunk.missing", {"chunk_id": cid, "uuid": uuid,
                                                          "expected": part.next_chunk}))
                return None
            if cid < part.next_chunk:
                findings.append(Finding("chunk.duplicate", {"chunk_id": cid, "uuid": uuid}))
            self._client_drop(full, "duplicate" if cid < part.next_chunk else "out_of_order", frame_index,
                              findings, chunk_id=cid, expected=part.next_chunk)
            return None
        if not self._append(full, part, cid, frame_index, chunk, findings, time):
            return None
        self._forget(full)
        whole, client_fails = self._complete(part, findings)
        if client_fails:
            self._remember(full, "dropped", frame_index)
            findings.append(Finding("chunk.dropped_by_client", {
                "reason": "decompression", "uuid": uuid, "chunk_id": cid, "num_chunks": part.num_chunks,
                "seen": len(part.frames), "frames": part.frames[:_FRAMES_SHOWN]}))
            return None
        self._remember(full, "complete", frame_index, part.first)
        return whole

    def _uncached(self, full: tuple, cid: int, n: int, uuid: str, findings: list[Finding]) -> None:
        """A chunk after the first with nothing cached for its message: the client discards it."""
        gone = self._gone.get(full)
        if gone is None:
            if self._mid_stream is False:
                findings.append(Finding("chunk.dropped_by_client", {"reason": "uncached", "uuid": uuid,
                                                                    "chunk_id": cid, "num_chunks": n}))
            else:  # its chunk 0 may have come before the capture did
                findings.append(Finding("chunk.orphan", {"chunk_id": cid, "num_chunks": n, "uuid": uuid}))
        elif gone.state == "complete":
            # a chunk of a message the client already has: discarded, and nothing is lost
            findings.append(Finding("chunk.duplicate", {"chunk_id": cid, "uuid": uuid}))
        elif gone.state == "dropped":
            findings.append(Finding("chunk.dropped_by_client", {"reason": "uncached", "uuid": uuid, "chunk_id": cid,
                                                                "num_chunks": n, "dropped_at": gone.frame}))
        # broken or abandoned: what the client holds is not known here, and the message was reported already

    def _client_drop(self, full: tuple, reason: str, frame_index: int, findings: list[Finding], **params) -> None:
        """The client drops the message in progress at ``full``; ``params`` say why (and this frame's chunk_id
        when the drop is about it)."""
        part = self._forget(full)
        self._remember(full, "dropped", frame_index)
        out = {"reason": reason, "uuid": part.uuid}
        if "chunk_id" in params:
            out["chunk_id"] = params.pop("chunk_id")
        out.update(num_chunks=part.num_chunks, seen=len(part.frames), frames=part.frames[:_FRAMES_SHOWN], **params)
        findings.append(Finding("chunk.dropped_by_client", out))

    def _expire(self, consumer: _Consumer, now: float, frame_index: int, findings: list[Finding]) -> None:
        """Run the client's expiry timer up to ``now``: it fires every ``client_expire_s`` from the consumer's
        first chunk and drops messages from the oldest while their last chunk is older than that."""
        period = self._client_expire
        if period <= 0:
            return
        if consumer.next_fire is None:
            consumer.next_fire = now + period
            return
        while consumer.next_fire < now:
            fire = consumer.next_fire
            if not consumer.cache:
                consumer.next_fire = fire + math.ceil((now - fire) / period) * period
                return
            for full in list(consumer.cache.values()):
                part = self._partials[full]
                if part.last_time is None or fire <= part.last_time + period:
                    break
                self._client_drop(full, "expired", frame_index, findings, idle_s=round(fire - part.last_time, 3),
                                  expire_s=period)
            consumer.next_fire = fire + period

    def _consumer(self, key: tuple) -> _Consumer:
        consumer = self._consumers.get(key)
        if consumer is None:
            consumer = self._consumers[key] = _Consumer()
            if len(self._consumers) > self._remembered:
                idle = next((k for k, c in self._consumers.items() if not c.cache and k != key), None)
                if idle is not None:
                    del self._consumers[idle]
        return consumer

    # ------------------------------------------------------------------ both directions

    def _start(self, full: tuple, md: dict, compression: int, findings: list[Finding]) -> _Partial:
        part = _Partial(md.get("uuid", ""), md.get("num_chunks_from_msg", 0), md.get("total_chunk_msg_size"),
                        compression, md.get("uncompressed_size"))
        if part.compression and (part.total_size or 0) <= self._max:
            part.kept = []
        self._gone.pop(full, None)
        self._partials[full] = part
        if len(self._partials) > self._max_pending:
            self._abandon_oldest(findings, {"limit": self._max_pending})
        return part

    def _append(self, full: tuple, part: _Partial, cid: int, frame_index: int, chunk: bytes | None,
                findings: list[Finding], time: float | None) -> bool:
        """Add the next chunk; whether the message is now complete."""
        part.next_chunk = cid + 1
        part.frames.append(frame_index)
        part.last_time = time
        if chunk is not None and cid == 0:
            part.first = _digest(chunk)
        if chunk is None:
            findings.append(Finding("chunk.lost", {"chunk_id": cid, "uuid": part.uuid}))
            part.lost = True
            self._release(part)
        elif not part.lost:
            part.size += len(chunk)
            if part.kept is not None:
                part.kept.append(chunk)
                self._kept_bytes += len(chunk)
                while self._kept_bytes > self._max_kept and self._partials:
                    self._abandon_oldest(findings, {"bytes": self._max_kept})
                if full not in self._partials:
                    return False  # this very message was the oldest
            else:
                part.sha.update(chunk)
        return part.next_chunk >= part.num_chunks

    def _release(self, part: _Partial) -> None:
        """Let go of the compressed chunks held (a chunk was lost: they can never be decompressed)."""
        if part.kept is not None:
            self._kept_bytes -= sum(map(len, part.kept))
            part.kept = None

    def _forget(self, full: tuple) -> _Partial:
        """No longer in progress (the chunks held stay with the returned part, for ``_complete``)."""
        part = self._partials.pop(full)
        if part.kept is not None:
            self._kept_bytes -= sum(map(len, part.kept))
        if full[0] == TO_CLIENT:
            consumer = self._consumers.get(full[:-1])
            if consumer is not None:
                consumer.cache.pop(full[-1], None)
        return part

    def _remember(self, full: tuple, state: str, frame_index: int, first: tuple[int, int] | None = None) -> None:
        self._gone.pop(full, None)
        self._gone[full] = _Gone(state, frame_index, first)
        if len(self._gone) > self._remembered:
            self._gone.popitem(last=False)

    def _abandon_oldest(self, findings: list[Finding], why: dict) -> None:
        full = next(iter(self._partials))
        oldest = self._forget(full)
        self._remember(full, "abandoned", oldest.frames[-1] if oldest.frames else 0)
        findings.append(Finding("chunk.abandoned", {**why, "uuid": oldest.uuid, "seen": oldest.next_chunk,
                                                    "num_chunks": oldest.num_chunks}))

    def _complete(self, part: _Partial, findings: list[Finding]) -> tuple[dict, bool]:
        """The reassembled message, and whether the client's decompression would fail on it too."""
        lost = {"uuid": part.uuid, "payload_size": None, "payload_sha256": None, "chunks": part.frames}
        if part.lost:
            return lost, False
        if part.total_size is not None and part.size != part.total_size:
            findings.append(Finding("chunk.size_mismatch", {"uuid": part.uuid, "size": part.size,
                                                            "total": part.total_size}))
        size = part.size
        if part.kept is not None:
            result = codecs.decompress(part.compression, b"".join(part.kept), part.uncompressed_size, self._max)
            if result.problem:
                findings.append(result.problem)
            if result.data is None:
                return lost, result.problem is not None and result.problem.params.get("case") in _CLIENT_FAILS
            part.sha.update(result.data)
            size = len(result.data)
        elif part.compression:
            findings.append(Finding("chunk.too_large", {"uuid": part.uuid}))
            return lost, False
        return {"uuid": part.uuid, "payload_size": size, "payload_sha256": part.sha.hexdigest(),
                "chunks": part.frames}, False

    def pending(self) -> list[_Partial]:
        """Messages still being reassembled (not those whose payload is already known to be lost)."""
        return [p for p in self._partials.values() if not p.lost]
