"""Pulsar frame decoding: complete frame bytes → plain data (``model.Decoded``). Pure functions, no state."""

from __future__ import annotations

import struct

from google.protobuf.message import DecodeError, Message

from ...model import Decoded
from ...options import Options
from ...problems import Finding
from ..pbdict import message_to_dict, unknown_field_numbers
from ..protowire import WireError, iter_fields, read_varint
from .commands import MESSAGE, PAYLOAD_TYPES, SUBCOMMAND_FIELD, TYPE_NAMES
from .payload import decode_payload_section
from .pb import PulsarApi_pb2 as api

_U32x2 = struct.Struct(">II")
_DEFAULTS = Options()


def type_name(number: int | None) -> str:
    if number is None:
        return "MALFORMED"
    return TYPE_NAMES.get(number) or f"UNKNOWN({number})"


def peek_command_type(buf: bytes, start: int, end: int) -> int | None:
    """Read BaseCommand.type (field 1, varint) straight from the wire; None if absent or malformed.

    The protobuf runtime would read an unknown type as CONNECT. Encoders write it first, so the fast path is
    one tag byte and a short varint.
    """
    if start < end and buf[start] == 0x08:
        try:
            return read_varint(buf, start + 1, end)[0]
        except WireError:
            return None
    try:
        for field in iter_fields(buf, start, end):
            if field.number == 1 and field.wire_type == 0:
                return field.value  # type: ignore[return-value]
    except WireError:
        return None
    return None


def decode_frame(frame: bytes, missing: int = 0, options: Options = _DEFAULTS) -> Decoded:
    """Decode one frame; ``missing`` > 0 means its last ``missing`` bytes are not there (a capture gap, or
    the stream ended inside it)."""
    size = len(frame) + missing
    if len(frame) < 8:
        return Decoded("MALFORMED", None, size, [Finding("frame.too_short", {"length": len(frame)})])
    total, cmd_size = _U32x2.unpack_from(frame, 0)
    findings: list[Finding] = []  # the pipeline says why ``missing`` bytes are missing (gap or end of stream)
    if total + 4 != size:
        findings.append(Finding("frame.size_mismatch", {"total_size": total, "following": size - 4}))
    cmd_end = 8 + cmd_size
    if cmd_size > total - 4:
        findings.append(Finding("frame.cmd_size", {"cmd_size": cmd_size, "total_size": total}))
    if cmd_end > len(frame):
        findings.append(Finding("frame.truncated", {}))
        if missing and cmd_size <= total - 4:
            # The wire carried the frame whole and the capture lost its end inside the command: the fields that
            # arrived whole (type, then the ids, written first) still say what it was, e.g. so that the SEND of
            # a middle chunk keeps its place among the SENDs waiting for receipts under the same sequence id.
            known = _command_prefix(frame, 8, len(frame))
            if known is not None:
                return Decoded(known[0], known[1], size, findings)
        return Decoded("MALFORMED", None, size, findings)
    type_num = peek_command_type(frame, 8, cmd_end)
    base = api.BaseCommand()
    try:
        base.ParseFromString(frame[8:cmd_end])
    except DecodeError as exc:
        findings.append(Finding("command.unparsable", {"error": str(exc)}))
        return Decoded(type_name(type_num), None, size, findings)
    name = type_name(type_num)
    command = None
    if type_num is None:
        findings.append(Finding("command.no_type", {}))
    elif type_num not in TYPE_NAMES:
        findings.append(Finding("command.unknown_type", {"number": type_num}))
    else:
        field_name = SUBCOMMAND_FIELD.get(type_num)
        if field_name and base.HasField(field_name):
            command = getattr(base, field_name)
            if not command.IsInitialized():
                _required_problems(command, name, findings)
        else:
            findings.append(Finding("command.missing_subcommand", {"type": name,
                                                                   "field": field_name or "sub-command"}))
    present = [f.number for f, _ in base.ListFields() if f.number not in (1, type_num)]
    if present:
        findings.append(Finding("command.extra_subcommands", {"types": [type_name(n) for n in present]}))
    unknown = [n for n in unknown_field_numbers(base) if n != 1]  # an unknown type is reported above
    if unknown:
        findings.append(Finding("command.unknown_fields", {"fields": unknown}))
    decoded = Decoded(name, message_to_dict(command) if command is not None else None, size, findings)
    if type_num in PAYLOAD_TYPES:
        ack_set = list(command.ack_set) if type_num == MESSAGE and command is not None else None
        section = decode_payload_section(frame, cmd_end, damaged=bool(missing), ack_set=ack_set,
                                         max_decompressed=options.max_decompressed, brief=options.summary)
        decoded.body = section
        findings.extend(section.findings)
    elif cmd_end < len(frame):
        findings.append(Finding("command.trailing_bytes", {"length": len(frame) - cmd_end, "type": name}))
    return decoded


def _command_prefix(buf: bytes, start: int, end: int) -> tuple[str, dict] | None:
    """(type name, fields) of a BaseCommand cut short at ``end``: the sub-command's fields that arrived whole.

    None when the type or the start of its sub-command is not among the bytes at hand.
    """
    type_num = peek_command_type(buf, start, end)
    field_name = SUBCOMMAND_FIELD.get(type_num) if type_num is not None else None
    if field_name is None:
        return None
    sub_start = sub_end = None
    pos = start
    try:
        while pos < end:  # BaseCommand: type (1), then the sub-command, whose field number is the type's
            key, pos = read_varint(buf, pos, end)
            number, wire_type = key >> 3, key & 7
            if wire_type == 2:
                length, pos = read_varint(buf, pos, end)
                if number == type_num:
                    sub_start, sub_end = pos, min(pos + length, end)
                    break
                pos += length
            elif wire_type == 0:
                _, pos = read_varint(buf, pos, end)
            elif wire_type in (1, 5):
                pos += 8 if wire_type == 1 else 4
            else:
                return None
    except WireError:
        return None
    if sub_start is None:
        return None
    whole = pos = sub_start  # the end of the last field that arrived whole
    try:
        while pos < sub_end:
            key, pos = read_varint(buf, pos, sub_end)
            wire_type = key & 7
            if wire_type == 0:
                _, pos = read_varint(buf, pos, sub_end)
            elif wire_type == 2:
                length, pos = read_varint(buf, pos, sub_end)
                pos += length
            elif wire_type in (1, 5):
                pos += 8 if wire_type == 1 else 4
            else:
                break
            if pos > sub_end:
                break
            whole = pos
    except WireError:
        pass
    sub = getattr(api.BaseCommand(), field_name).__class__()
    try:
        sub.ParseFromString(bytes(buf[sub_start:whole]))
    except DecodeError:
        return None
    return type_name(type_num), message_to_dict(sub)


def _required_problems(command: Message, name: str, findings: list[Finding]) -> None:
    # A required enum field holding a value this schema does not know (a newer protocol) parses as absent: its
    # number is then among the unknown fields. Say so instead of calling the field missing.
    unknown = set(unknown_field_numbers(command))
    fields = command.DESCRIPTOR.fields_by_name
    missing, odd = [], []
    for path in command.FindInitializationErrors():
        f = fields.get(path)
        (odd if f is not None and f.number in unknown else missing).append(path)
    if missing:
        findings.append(Finding("command.missing_required", {"type": name, "fields": missing}))
    if odd:
        findings.append(Finding("command.unknown_enum", {"type": name, "fields": odd}))


def confirms(decoded: Decoded) -> bool:
    """A frame that proves Pulsar on a connection off the Pulsar ports: decoded whole, without problems."""
    return not decoded.findings and decoded.type in _KNOWN_NAMES


_KNOWN_NAMES = frozenset(TYPE_NAMES.values())
