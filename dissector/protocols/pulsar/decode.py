"""Pulsar frame decoding: complete frame bytes → plain data (``model.Decoded``). Pure functions, no state.

The decoding itself is the engine (``dissector._core``, Rust, in ``crates/``): sizes, the BaseCommand
and its sub-command walked off the schema compiled from ``proto/pulsar/``, the payload section (broker entry
metadata, CRC32C, MessageMetadata, decompression, batches, markers). It returns the classes bound here, so
what crosses the protocol boundary is the same plain data as everywhere else.
"""

from __future__ import annotations

from dissector import _core as _core

from ...model import Decoded
from ...options import Options
from ...problems import Finding
from .payload import PayloadSection

_core.bind(Decoded, Finding)
_core.bind_body("pulsar", PayloadSection)
_DEFAULTS = Options()


def decode_frame(frame: bytes, missing: int = 0, options: Options = _DEFAULTS) -> Decoded:
    """Decode one frame; ``missing`` > 0 means its last ``missing`` bytes are not there (a capture gap, or
    the stream ended inside it)."""
    return _core.decode("pulsar", frame, missing, options.max_decompressed, options.summary)
