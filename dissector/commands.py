"""Frame decoding: complete frame bytes → DecodedFrame. Pure functions, no state, no I/O."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from . import codecs
from .payload import PayloadSection, decode_payload_section
from .pb import PulsarApi_pb2 as api
from .pbdict import unknown_field_numbers
from .expert import ERROR, WARNING, Problem
from .wire import WireError, peek_command_type, read_varint

_U32x2 = struct.Struct(">II")

_TYPE_ENUM = api.BaseCommand.DESCRIPTOR.fields_by_name["type"].enum_type
TYPE_NAMES: dict[int, str] = {v.number: v.name for v in _TYPE_ENUM.values}
TYPE_NUMBERS: dict[str, int] = {name: num for num, name in TYPE_NAMES.items()}
# BaseCommand carries the sub-command for type N in field N (field names are not uniform: map by number).
SUBCOMMAND_FIELD: dict[int, str] = {
    f.number: f.name for f in api.BaseCommand.DESCRIPTOR.fields if f.number in TYPE_NAMES
}
SEND, MESSAGE = TYPE_NUMBERS["SEND"], TYPE_NUMBERS["MESSAGE"]
PAYLOAD_TYPES = frozenset((SEND, MESSAGE))
_EMPTY_BASE = api.BaseCommand()
_SUB_DESCRIPTORS = {num: api.BaseCommand.DESCRIPTOR.fields_by_name[name].message_type
                    for num, name in SUBCOMMAND_FIELD.items()}
_WIRE_TYPES = {FieldDescriptor.TYPE_DOUBLE: 1, FieldDescriptor.TYPE_FIXED64: 1, FieldDescriptor.TYPE_SFIXED64: 1,
               FieldDescriptor.TYPE_FLOAT: 5, FieldDescriptor.TYPE_FIXED32: 5, FieldDescriptor.TYPE_SFIXED32: 5,
               FieldDescriptor.TYPE_STRING: 2, FieldDescriptor.TYPE_BYTES: 2, FieldDescriptor.TYPE_MESSAGE: 2}


def type_name(number: int | None) -> str:
    if number is None:
        return "MALFORMED"
    return TYPE_NAMES.get(number) or f"UNKNOWN({number})"


@dataclass(slots=True)
class DecodedFrame:
    size: int  # bytes of the frame including the 4-byte TOTAL_SIZE
    total_size: int
    cmd_size: int
    type_num: int | None
    type: str  # BaseCommand type name, UNKNOWN(n) or MALFORMED
    command: Message | None  # the sub-command (CommandSend, ...), None when absent or unknown
    payload: PayloadSection | None = None
    missing: int = 0  # bytes lost to a capture gap
    problems: list[str] = field(default_factory=list)


def decode_frame(frame: bytes, *, missing: int = 0,
                 max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> DecodedFrame:
    """Decode one frame; ``missing`` > 0 means its last ``missing`` bytes were lost (capture gap)."""
    size = len(frame) + missing
    if len(frame) < 8:
        return DecodedFrame(size, 0, 0, None, "MALFORMED", None, missing=missing,
                            problems=[Problem("frame.too_short", ERROR,
                                              f"frame of {len(frame)} bytes is too short for its size fields")])
    total, cmd_size = _U32x2.unpack_from(frame, 0)
    problems: list[str] = []
    if missing:
        problems.append(Problem("frame.gap_damaged", WARNING,
                                f"frame damaged by a capture gap: {missing} of {size} bytes missing"))
    if total + 4 != size:
        problems.append(Problem("frame.size_mismatch", ERROR,
                                f"TOTAL_SIZE {total} does not match the {size - 4} bytes that follow it"))
    cmd_end = 8 + cmd_size
    if cmd_size > total - 4:
        problems.append(Problem("frame.cmd_size", ERROR,
                                f"CMD_SIZE {cmd_size} is larger than TOTAL_SIZE {total} allows"))
    if cmd_end > len(frame):
        return DecodedFrame(size, total, cmd_size, None, "MALFORMED", None, missing=missing,
                            problems=problems + [Problem("frame.truncated", ERROR, "command cut short")])
    type_num = peek_command_type(frame, 8, cmd_end)
    base = api.BaseCommand()
    try:
        base.ParseFromString(frame[8:cmd_end])
    except DecodeError as exc:
        problems.append(Problem("command.unparsable", ERROR, f"BaseCommand does not parse: {exc}"))
        return DecodedFrame(size, total, cmd_size, type_num, type_name(type_num), None, missing=missing,
                            problems=problems)
    name = type_name(type_num)
    command = None
    if type_num is None:
        problems.append(Problem("command.no_type", ERROR, "BaseCommand has no type field"))
    elif type_num not in TYPE_NAMES:
        problems.append(Problem("command.unknown_type", WARNING, f"unknown command type {type_num}"))
    else:
        field_name = SUBCOMMAND_FIELD.get(type_num)
        if field_name and base.HasField(field_name):
            command = getattr(base, field_name)
            if not command.IsInitialized():
                _required_problems(command, name, problems)
        else:
            problems.append(Problem("command.missing_subcommand", ERROR,
                                    f"{name} frame has no {field_name or 'sub-command'} field"))
    present = [f.number for f, _ in base.ListFields() if f.number not in (1, type_num)]
    if present:
        problems.append(Problem("command.extra_subcommands", WARNING, "BaseCommand also carries sub-commands for "
                                + ", ".join(type_name(n) for n in present)))
    unknown = [n for n in unknown_field_numbers(base) if n != 1]  # an unknown type is reported above
    if unknown:
        problems.append(Problem("command.unknown_fields", WARNING,
                                "BaseCommand has fields unknown to this dissector: " + ", ".join(map(str, unknown))))
    decoded = DecodedFrame(size, total, cmd_size, type_num, name, command, missing=missing, problems=problems)
    if type_num in PAYLOAD_TYPES:
        ack_set = list(command.ack_set) if type_num == MESSAGE and command is not None else None
        decoded.payload = decode_payload_section(frame, cmd_end, damaged=bool(missing), ack_set=ack_set,
                                                 max_decompressed=max_decompressed)
        problems.extend(decoded.payload.problems)
    elif cmd_end < len(frame):
        problems.append(Problem("command.trailing_bytes", WARNING,
                                f"{len(frame) - cmd_end} unexpected bytes after a {name} command (only SEND and "
                        f"MESSAGE carry a payload)"))
    return decoded


def _required_problems(command: Message, name: str, problems: list[str]) -> None:
    # A required enum field holding a value this schema does not know (a newer protocol) parses as absent: its
    # number is then among the unknown fields. Say so instead of calling the field missing.
    unknown = set(unknown_field_numbers(command))
    fields = command.DESCRIPTOR.fields_by_name
    missing, odd = [], []
    for path in command.FindInitializationErrors():
        f = fields.get(path)
        (odd if f is not None and f.number in unknown else missing).append(path)
    if missing:
        problems.append(Problem("command.missing_required", ERROR,
                                f"{name} lacks required fields: " + ", ".join(missing)))
    if odd:
        problems.append(Problem("command.unknown_enum", WARNING,
                                f"{name} required fields hold values unknown to this dissector: " + ", ".join(odd)))


def looks_like_frame(buf: bytearray | bytes, start: int, total: int, cmd_size: int, end: int) -> bool | None:
    """Frame-boundary plausibility for resynchronisation (see framing.FrameValidator)."""
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
        sub = getattr(_EMPTY_BASE, SUBCOMMAND_FIELD[type_num]).__class__()
        try:
            sub.ParseFromString(bytes(buf[sub_start:sub_end]))
        except DecodeError:
            return False
        if not sub.IsInitialized():
            return False
    elif not _plausible_prefix(_SUB_DESCRIPTORS[type_num], buf, sub_start, end):
        return False
    need = start + 8 + cmd_size + (6 if payload else 0)
    if need > end:
        return None
    base = api.BaseCommand()
    try:
        base.ParseFromString(bytes(buf[start + 8:start + 8 + cmd_size]))
    except DecodeError:
        return False
    field_name = SUBCOMMAND_FIELD.get(type_num)
    if not field_name or not base.HasField(field_name) or not getattr(base, field_name).IsInitialized():
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
    values = []
    for _ in range(2):
        value = shift = 0
        while True:
            if pos >= limit:
                return None
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                return False
        values.append(value)
    if values[0] != (type_num << 3 | 2):
        return False
    return pos, pos + values[1]


def _plausible_prefix(descriptor, buf, start: int, end: int) -> bool:
    """Whether the complete fields in ``buf[start:end]`` (the first bytes of a sub-command) fit its schema."""
    fields = descriptor.fields_by_number
    pos = start
    while pos < end:
        try:
            key, pos = read_varint(buf, pos, end)
        except WireError:
            return pos + 10 > end  # cut off at ``end`` (fine) or longer than a varint can be
        number, wire_type = key >> 3, key & 7
        known = fields.get(number)
        if known is None:
            return False
        expected = 2 if known.is_repeated and wire_type == 2 else _WIRE_TYPES.get(known.type, 0)
        if wire_type != expected:
            return False
        if wire_type == 0:
            try:
                _, pos = read_varint(buf, pos, end)
            except WireError:
                return pos + 10 > end
        elif wire_type == 2:
            try:
                length, pos = read_varint(buf, pos, end)
            except WireError:
                return pos + 10 > end
            pos += length
        else:
            pos += 8 if wire_type == 1 else 4
    return True
