"""Payload decompression for MessageMetadata.compression, bounded against bombs and lying sizes.

Every codec writes into a buffer of a size fixed before decompression starts (the declared
``uncompressed_size`` capped by a global limit), so no input can make us allocate more than that.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import cramjam

from ...problems import Finding

NONE, LZ4, ZLIB, ZSTD, SNAPPY = 0, 1, 2, 3, 4  # MessageMetadata.compression (CompressionType)
CODEC_NAMES = {NONE: "NONE", LZ4: "LZ4", ZLIB: "ZLIB", ZSTD: "ZSTD", SNAPPY: "SNAPPY"}


@dataclass(slots=True)
class Decompressed:
    data: bytes | None  # None when decompression failed or was refused
    problem: Finding | None = None  # a payload.decompression finding


def _problem(case: str, **params) -> Finding:
    return Finding("payload.decompression", {"case": case, **params})


def decompress(codec: int, data: bytes, declared_size: int | None, max_size: int) -> Decompressed:
    """Decompress ``data``; the output may not exceed ``declared_size`` (when given) nor ``max_size``."""
    name = CODEC_NAMES.get(codec)
    if name is None:
        return Decompressed(None, _problem("unknown_codec", codec=codec))
    if codec == NONE:
        return Decompressed(data)
    if declared_size is None:
        limit = max_size
    elif declared_size > max_size:
        return Decompressed(None, _problem("over_limit", codec=name, declared=declared_size, limit=max_size))
    else:
        limit = declared_size
    try:
        if codec == ZLIB:
            out = _inflate_sync_flushed(data, limit)
        else:
            out = _decompress_into(codec, data, limit, exact=declared_size is not None)
    except _TooLarge:
        if declared_size is not None:
            return Decompressed(None, _problem("bomb_declared", codec=name, declared=declared_size))
        return Decompressed(None, _problem("bomb_limit", codec=name, limit=max_size))
    except Exception as exc:  # each library raises its own error types on corrupt input
        return Decompressed(None, _problem("failed", codec=name, error=_one_line(exc)))
    if declared_size is not None and len(out) != declared_size:
        return Decompressed(out, _problem("size_mismatch", codec=name, declared=declared_size, actual=len(out)))
    return Decompressed(out)


class _TooLarge(Exception):
    pass


def _inflate_sync_flushed(data: bytes, limit: int) -> bytes:
    # Pulsar's Deflater writes SYNC_FLUSH blocks and never finishes the stream: zlib.decompress() would
    # call that truncated, a decompressobj accepts it.
    d = zlib.decompressobj()
    out = d.decompress(data, limit + 1)
    if len(out) > limit:
        raise _TooLarge
    return out


def _decompress_into(codec: int, data: bytes, limit: int, exact: bool = True) -> bytes:
    """Decompress into a buffer of ``limit`` bytes; when ``exact`` is False (no declared size) start small and
    grow towards ``limit``, so that a payload without uncompressed_size does not cost a limit-sized buffer."""
    if codec == SNAPPY:
        # Raw snappy starts with the uncompressed length: refuse before allocating.
        raw_len = cramjam.snappy.decompress_raw_len(data)
        if raw_len > limit:
            raise _TooLarge
        if not exact:
            limit, exact = raw_len, True
    size = limit if exact else min(limit, max(_FIRST_GUESS, 4 * len(data)))
    while True:
        try:
            return _decompress_once(codec, data, size)
        except _TooLarge:
            if size >= limit:
                raise
        except cramjam.DecompressionError:
            # LZ4 reports a too-small output buffer with assorted messages, like corrupt input: only the
            # full-size attempt can tell which it is.
            if codec != LZ4 or size >= limit:
                raise
        size = min(limit, size * 4)


_FIRST_GUESS = 256 * 1024


def _decompress_once(codec: int, data: bytes, limit: int) -> bytes:
    buf = bytearray(limit + 1 if codec == ZSTD else limit)
    try:
        if codec == LZ4:
            n = cramjam.lz4.decompress_block_into(data, buf)
        elif codec == ZSTD:
            n = cramjam.zstd.decompress_into(data, buf)
        else:
            n = cramjam.snappy.decompress_raw_into(data, buf)
    except cramjam.DecompressionError as exc:
        text = str(exc)
        if "large enough" in text or "whole buffer" in text:
            raise _TooLarge from exc
        raise
    if n > limit:
        raise _TooLarge
    return bytes(buf[:n])


def _one_line(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]
