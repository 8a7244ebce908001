"""`-T fields`: chosen fields of each record, one line per record, as tshark's ``-T fields -e ... -E ...``.

A field is a record key as ``-Y`` names it (``expr``: the JSON contract's keys, dotted into nested objects,
``topic`` derived), so one vocabulary serves the filter and the columns. A path through a list collects every
element's value; the values of a field are joined with the aggregator (``-E occurrence`` keeps the first or
the last only). A value is its JSON text (numbers, true, false, an object as compact JSON), a string as it is;
null and a missing key are an empty field.

Strings from the wire are untrusted: whatever they hold, a record is one line and a field one column. The
backslash, tab, line feed, carriage return, form feed and vertical tab are written as ``\\\\ \\t \\n \\r \\f
\\v``, every other character ``str.isprintable`` rejects as Python's ``unicode_escape`` writes it (``\\x1b``,
``\\u202e``); unquoted, a separator inside a value is written ``\\xHH`` too; quoted (``-E quote=d|s``), the
quote character as ``\\"`` or ``\\'``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .expr import KNOWN_FIELDS, resolve
from .jsonl import dumps


class FieldsError(ValueError):
    """A field or an ``-E`` setting that cannot be used: the message says which and what would do."""


#: tshark's names for characters awkward to type: ``-E separator=/t`` (tab) and ``/s`` (space).
_NAMED = {"/t": "\t", "/s": " "}

_SHORT = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "\v": "\\v"}

#: The ``-E`` settings and the values each takes (None: any one character, or a /t or /s name).
SETTINGS = {"header": ("y", "n"), "separator": None, "quote": ("d", "s", "n"), "occurrence": ("f", "l", "a"),
            "aggregator": None}


@dataclass(frozen=True)
class FieldsFormat:
    """What ``-e`` and ``-E`` asked for: the fields' paths and how a line is made of their values."""

    names: tuple[str, ...]
    separator: str = "\t"
    aggregator: str = ","
    quote: str = ""
    occurrence: str = "a"
    header: bool = False
    paths: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "paths", tuple(tuple(name.split(".")) for name in self.names))

    @property
    def reads_payload(self) -> bool:
        """Whether a field is a message's payload (``messages.payload_text`` or ``payload_b64``): records must
        carry it, as with ``--payload``."""
        return any(part in ("payload_text", "payload_b64") for path in self.paths for part in path)

    def header_line(self) -> str:
        return self.separator.join(self._cell(name) for name in self.names) + "\n"

    def line(self, rec: dict) -> str:
        """One record's line (with its line feed)."""
        cells = []
        for path in self.paths:
            values = resolve(rec, path)
            if len(values) == 1:  # most fields: one value
                value = values[0]
                cells.append(self._cell(value if type(value) is str else _text(value)))
                continue
            values = [v for v in values if v is not None]
            if values and self.occurrence != "a":
                values = [values[0] if self.occurrence == "f" else values[-1]]
            cells.append(self._cell(self.aggregator.join(_text(v) for v in values)))
        return self.separator.join(cells) + "\n"

    def _cell(self, text: str) -> str:
        special = self.quote or self.separator
        if not text.isprintable() or "\\" in text or special in text:  # most values need no escape: one C scan
            text = "".join(_escape(c, special) for c in text)
        return f"{self.quote}{text}{self.quote}" if self.quote else text


def _text(value) -> str:
    """A value as its column shows it before escaping: a string as it is, null as nothing, anything else as its
    JSON text."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int:
        return str(value)
    return "" if value is None else dumps(value).decode()


def _escape(char: str, special: str) -> str:
    """One character of a value, written so that it cannot end the line or the column."""
    if char in _SHORT:
        return _SHORT[char]
    if not char.isprintable():
        return char.encode("unicode_escape").decode("ascii")
    if char == special:
        return f"\\{char}" if char in "\"'" else f"\\x{ord(char):02x}"
    return char


def fields_format(names: list[str], settings: list[str]) -> FieldsFormat:
    """The format of ``-e NAME`` (each, or comma lists) and ``-E KEY=VALUE``; FieldsError names what is wrong."""
    fields = [name.strip() for text in names for name in text.split(",") if name.strip()]
    if not fields:
        raise FieldsError("-T fields needs the fields to show: -e NAME (e.g. -e type -e latency_ms)")
    for name in fields:
        check_field(name)
    chosen: dict = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        key = key.strip()
        if key not in SETTINGS:
            close = difflib.get_close_matches(key, sorted(SETTINGS), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]}?" if close else f" (one of: {', '.join(SETTINGS)})"
            raise FieldsError(f"-E takes KEY=VALUE; no setting {key!r}{hint}")
        value = _NAMED.get(value, value)
        allowed = SETTINGS[key]
        if not sep or (allowed is not None and value not in allowed) or (allowed is None and len(value) != 1):
            takes = "|".join(allowed) if allowed is not None else "one character, /t or /s"
            raise FieldsError(f"-E {key} takes {takes}, not {value!r}")
        chosen[key] = value
    quote = {"d": '"', "s": "'", "n": ""}[chosen.get("quote", "n")]
    return FieldsFormat(tuple(fields), separator=chosen.get("separator", "\t"),
                        aggregator=chosen.get("aggregator", ","), quote=quote,
                        occurrence=chosen.get("occurrence", "a"), header=chosen.get("header", "n") == "y")


def check_field(name: str) -> None:
    """A field name as ``-Y`` would take it: a record key, dotted into its objects; FieldsError naming the
    closest keys when the first name is none."""
    parts = name.split(".")
    if any(not part for part in parts):
        raise FieldsError(f"no field {name!r}: a field is a record key, dotted into its objects "
                          f"(e.g. producer.name)")
    if parts[0] not in KNOWN_FIELDS:
        close = difflib.get_close_matches(parts[0], sorted(KNOWN_FIELDS), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join('.'.join([c, *parts[1:]]) for c in close)}?" if close else \
            f" (fields: {', '.join(sorted(KNOWN_FIELDS))})"
        raise FieldsError(f"no field {name!r}{hint}")
