"""Payload decompression for MessageMetadata.compression, bounded against bombs and lying sizes.

The codecs are the compiled core's (``crates/engine/src/codecs.rs``): every codec writes into a buffer whose size is
fixed before decompression starts (the declared ``uncompressed_size`` capped by a global limit), so no input
can make us allocate more than that. The frame decoder uses them there; chunked messages, decompressed only
once reassembled, come through here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dissector import _core as _core

from ...problems import Finding
from . import decode  # noqa: F401  (binds the core to the plain-data classes)

NONE, LZ4, ZLIB, ZSTD, SNAPPY = 0, 1, 2, 3, 4  # MessageMetadata.compression (CompressionType)


@dataclass(slots=True)
class Decompressed:
    data: bytes | None  # None when decompression failed or was refused
    problem: Finding | None = None  # a payload.decompression finding


def decompress(codec: int, data: bytes, declared_size: int | None, max_size: int) -> Decompressed:
    """Decompress ``data``; the output may not exceed ``declared_size`` (when given) nor ``max_size``."""
    out, problem = _core.decompress(codec, data, declared_size, max_size)
    return Decompressed(out, problem)
