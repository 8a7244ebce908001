"""Pulsar framing: where a frame ends, and where the next one may start after lost bytes.

Wire layout (big-endian): ``[TOTAL_SIZE u32][CMD_SIZE u32][BaseCommand][payload section]`` where TOTAL_SIZE
counts everything after itself. The generic splitter asks ``pdu_length`` and ``resync``.
"""

from __future__ import annotations

import struct

from pulsar_dissect_core import command_complete, prefix_plausible

from ..base import NEED_MORE, BadLength
from ..protowire import Truncated, WireError, read_varint
from .commands import PAYLOAD_TYPES, TYPE_NAMES

_U32 = struct.Struct(">I")
_U32x2 = struct.Struct(">II")


def pdu_length(buf, pos: int, end: int, max_size: int) -> int | BadLength:
    """Length of the frame at ``pos`` (TOTAL_SIZE + 4), NEED_MORE, or BadLength for an impossible size."""
    if end - pos < 4:
        return NEED_MORE
    total = _U32.unpack_from(buf, pos)[0]
    if total > max_size:
        return BadLength("OVERSIZED", {"total_size": total}, {"field": "TOTAL_SIZE", "size": total})
    if total < 4:
        return BadLength("BAD_SIZE", {"total_size": total}, {"field": "TOTAL_SIZE", "size": total})
    if end - pos >= 8:
        # When the two sizes disagree one of them is damaged, and trusting TOTAL_SIZE could swallow the frames
        # after it: better to skip to the next plausible frame. Only SEND and MESSAGE carry bytes after the
        # command, so for any other type (also one this schema does not know) the sizes must agree exactly.
        cmd_size = _U32.unpack_from(buf, pos + 4)[0]
        if cmd_size + 4 > total:
            return _disagree(total, cmd_size, "is smaller than CMD_SIZE {cmd_size} allows")
        if end - pos >= 10 and buf[pos + 8] == 0x08:
            type_num = buf[pos + 9]
            if type_num not in PAYLOAD_TYPES and total != cmd_size + 4:
                name = TYPE_NAMES.get(type_num, f"type {type_num}")
                return _disagree(total, cmd_size, f"disagrees with CMD_SIZE {{cmd_size}} of a {name} command, which "
                                                  "carries no payload")
    return total + 4


_HEAD_LIMIT = 64 * 1024  # bytes after the command that the head of an oversized frame may hold (its metadata)
_MAGIC_CRC32C, _MAGIC_BEM = 0x0E01, 0x0E02


def oversized_head(buf, pos: int, end: int) -> tuple[int, int] | int | None:
    """(head, frame length) of a SEND or MESSAGE frame at ``pos`` whose TOTAL_SIZE is above the frame-size
    limit. The head is the size fields, the command and the payload section up to the end of its
    MessageMetadata (or the command alone when that lies beyond ``_HEAD_LIMIT``). NEED_MORE until those bytes
    are there; None when the bytes do not look like such a frame (then the size is not to be trusted, and the
    splitter resyncs).

    The command sits at the start and is small: with it, an oversized frame can still be decoded as what it is
    (a SEND keeps its place among the SENDs waiting under its sequence id; a chunk keeps its place in its
    message) while the rest of it is skipped, never allocated.
    """
    if end - pos < 10:
        return NEED_MORE
    total, cmd_size = _U32x2.unpack_from(buf, pos)
    if buf[pos + 8] != 0x08 or buf[pos + 9] not in PAYLOAD_TYPES or not 2 <= cmd_size <= _HEAD_LIMIT \
            or cmd_size + 4 > total:
        return None
    cmd_end = pos + 8 + cmd_size
    if end < cmd_end:
        return NEED_MORE
    if not command_complete(buf[pos + 9], bytes(buf[pos + 8:cmd_end]), True):
        return None
    head = _head_length(buf, pos, end, total, cmd_size)
    return head if head == NEED_MORE else (head, total + 4)


def _head_length(buf, pos: int, end: int, total: int, cmd_size: int) -> int:
    """Bytes of the head from ``pos`` (the command was checked), or NEED_MORE."""
    cmd_end = pos + 8 + cmd_size
    frame_end = pos + 4 + total
    p = cmd_end
    for magic, fixed in ((_MAGIC_BEM, None), (_MAGIC_CRC32C, 4)):
        if frame_end - p < 2 or p > cmd_end + _HEAD_LIMIT:
            return cmd_end - pos
        if p + 2 > end:
            return NEED_MORE
        if (buf[p] << 8) | buf[p + 1] != magic:
            continue
        if fixed is None:  # broker entry metadata: [magic][size][metadata]
            if p + 6 > end:
                return NEED_MORE
            p += 6 + _U32.unpack_from(buf, p + 2)[0]
        else:
            p += 2 + fixed
    if p + 4 > cmd_end + _HEAD_LIMIT or p + 4 > frame_end:
        return cmd_end - pos
    if p + 4 > end:
        return NEED_MORE
    md_end = p + 4 + _U32.unpack_from(buf, p)[0]
    if md_end > cmd_end + _HEAD_LIMIT or md_end > frame_end:
        return cmd_end - pos
    if md_end > end:
        return NEED_MORE
    return md_end - pos


def _disagree(total: int, cmd_size: int, reason: str) -> BadLength:
    return BadLength("BAD_SIZE", {"total_size": total, "cmd_size": cmd_size},
                     {"field": "TOTAL_SIZE", "size": total, "reason": reason.format(cmd_size=cmd_size)})


def resync(buf, pos: int, end: int, max_size: int) -> tuple[bool, int]:
    """Find the next plausible frame start at or after ``pos``.

    Returns (True, offset) when found; (False, offset) when nothing before ``offset`` can start a frame and the
    bytes from ``offset`` on must wait for more data.
    """
    i = pos
    while True:
        # BaseCommand starts with tag 0x08 (field 1, varint) right after the two size fields.
        j = buf.find(b"\x08", i + 8, end)
        if j < 0:
            return False, max(pos, end - 8)
        i = j - 8
        total, cmd = _U32x2.unpack_from(buf, i)
        if 2 <= cmd and cmd + 4 <= total <= max_size:
            verdict = looks_like_frame(buf, i, total, cmd, end)
            if verdict is None:
                return False, i
            if verdict:
                return True, i
        i += 1


def looks_like_frame(buf: bytearray | bytes, start: int, total: int, cmd_size: int, end: int) -> bool | None:
    """Whether a frame starts at ``start``: True, False, or None when more bytes (up to ``end``) are needed."""
    if end - start < 10:
        return None
    type_num = buf[start + 9]
    if type_num & 0x80 or type_num not in TYPE_NAMES:
        return False
    payload = type_num in PAYLOAD_TYPES
    if not payload and total != cmd_size + 4:
        return False
    # Encoders write BaseCommand as [type][sub-command N]: check that shape on the bytes at hand first, so that
    # a chance 0x08 in the middle of a payload with a large CMD_SIZE is rejected now instead of making the
    # splitter wait for up to CMD_SIZE bytes.
    cmd_end = start + 8 + cmd_size
    shape = _subcommand_header(buf, start + 10, min(end, cmd_end), type_num)
    if shape is None:
        return None if end < cmd_end else False
    if shape is False or shape[1] > cmd_end:
        return False
    sub_start, sub_end = shape
    if sub_end <= end:
        if not command_complete(type_num, bytes(buf[sub_start:sub_end]), False):
            return False
    elif not prefix_plausible(type_num, bytes(buf[sub_start:end])):
        return False
    need = start + 8 + cmd_size + (6 if payload else 0)
    if need > end:
        return None
    if not command_complete(type_num, bytes(buf[start + 8:start + 8 + cmd_size]), True):
        return False
    if payload:
        p = start + 8 + cmd_size
        magic = (buf[p] << 8) | buf[p + 1]
        if magic not in (0x0E01, 0x0E02):
            msize = int.from_bytes(buf[p:p + 4], "big")
            if msize + 4 > total - 4 - cmd_size:
                return False
    return True


def _subcommand_header(buf, pos: int, limit: int, type_num: int) -> tuple[int, int] | bool | None:
    """(start, end) offsets of the sub-command that should follow BaseCommand.type at ``pos``.

    False when the bytes are not [key of field ``type_num``, length-delimited][length]; None when ``limit``
    comes first.
    """
    try:
        key, pos = read_varint(buf, pos, limit)
        length, pos = read_varint(buf, pos, limit)
    except Truncated:
        return None
    except WireError:
        return False
    if key != (type_num << 3 | 2):
        return False
    return pos, pos + length
