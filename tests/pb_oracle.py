"""Protobuf message → plain Python data (the JSON contract), fast and lossless.

Rules: proto field names; 64-bit integers stay integers (unlike protobuf's JSON mapping, which makes them
strings); enums become their names (an unknown value stays its number); bytes become base64 text, as in the
canonical protobuf JSON mapping; only fields present on the wire appear. Fields the schema does not know are
listed under ``"_unknown_fields"`` by number, so nothing the sender wrote is hidden.
"""

from __future__ import annotations

import base64
from typing import Any, Callable

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

_Converter = Callable[[Any], Any]
_field_converters: dict[FieldDescriptor, tuple] = {}  # field -> (name, converter or _PASS)


def text(value: str | bytes) -> str:
    """A protobuf ``string`` as text. proto2 does not validate UTF-8: a string field holding invalid UTF-8
    comes back as bytes, shown here with backslash escapes (nothing hidden, nothing that breaks JSON)."""
    return value if type(value) is str else value.decode("utf-8", "backslashreplace")


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _enum_converter(field: FieldDescriptor) -> _Converter:
    names = {v.number: v.name for v in field.enum_type.values}
    return lambda v: names.get(v, v)


_PASS = object()  # marks scalar fields, copied without a call


def _converter_for(field: FieldDescriptor):
    """(name, converter or _PASS) for a field, built once per field."""
    entry = _field_converters.get(field)
    if entry is not None:
        return entry
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        single: _Converter | None = message_to_dict
    elif field.type == FieldDescriptor.TYPE_ENUM:
        single = _enum_converter(field)
    elif field.type == FieldDescriptor.TYPE_BYTES:
        single = _b64
    elif field.type == FieldDescriptor.TYPE_STRING:
        single = text
    else:
        single = None  # scalars pass through unchanged
    if field.is_repeated:
        conv = (lambda vs: [single(v) for v in vs]) if single else list
    else:
        conv = single if single else _PASS
    entry = _field_converters[field] = (field.name, conv)
    return entry


def message_to_dict(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    known = _field_converters
    for field, value in msg.ListFields():
        name, conv = known.get(field) or _converter_for(field)
        out[name] = value if conv is _PASS else conv(value)
    unknown = unknown_field_numbers(msg)
    if unknown:
        out["_unknown_fields"] = unknown
    return out


def unknown_field_numbers(msg: Message) -> list[int]:
    """Field numbers present on the wire that the schema does not define (top level of ``msg`` only)."""
    try:
        fields = UnknownFieldSet(msg)
    except Exception:  # pragma: no cover - defensive: the API varies across protobuf runtimes
        return []
    return sorted({f.field_number for f in fields}) if len(fields) else []
