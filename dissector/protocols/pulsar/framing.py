"""Pulsar framing: where a frame ends, where the next one may start after lost bytes, and the head of a
frame above the size limit.

Wire layout (big-endian): ``[TOTAL_SIZE u32][CMD_SIZE u32][BaseCommand][payload section]`` where TOTAL_SIZE
counts everything after itself. The framing is the compiled core's (``crates/engine/src/protocols/pulsar/framing.rs``, the ``Framing``
the generic splitter asks; ``PULSAR.core = "pulsar"`` names it); this module binds two of its answers for the
tools and tests that ask them of bytes directly.
"""

from __future__ import annotations

from dissector._core import pulsar_looks_like_frame, pulsar_oversized_head


def oversized_head(buf, pos: int, end: int) -> tuple[int, int] | int | None:
    """(head, frame length) of a SEND or MESSAGE frame at ``pos`` whose TOTAL_SIZE is above the frame-size
    limit: the size fields, the command and the payload section up to the end of its MessageMetadata (or the
    command alone when that lies beyond 64 KiB). NEED_MORE (0) until those bytes are there (up to ``end``);
    None when the bytes do not look like such a frame (then the size is not to be trusted)."""
    return pulsar_oversized_head(bytes(buf), pos, end)


def looks_like_frame(buf, start: int, total: int, cmd_size: int, end: int) -> bool | None:
    """Whether a frame starts at ``start``: True, False, or None when more bytes (up to ``end``) are needed."""
    return pulsar_looks_like_frame(bytes(buf), start, total, cmd_size, end)
