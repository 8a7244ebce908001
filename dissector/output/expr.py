"""The expression language for selecting records (`-Y` / `--filter`) and for `check` rules.

In the style of Wireshark display filters, over the JSON contract's keys::

    type == "SEND" and producer.name == "orders"
    latency_ms > 20 or checksum != "valid"
    topic matches "persistent://acme/.*"
    "server.error" in expert.id
    messages.properties.tenant == "a"
    type in {"ERROR", "SEND_ERROR"} and not conn == 3

Field names are record keys, dotted into nested objects; a path through a list (``messages``, ``expert``)
collects the values of every element, and a comparison holds when any of them matches. A field the record
lacks makes a comparison false, never an error; a top-level name that no record can have is an error, found
when the expression is compiled. ``topic`` is derived: the command's topic, else the producer's or consumer's.

Parsed by lark into an AST and evaluated by this module: nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

# Every top-level key a frame or an event record can have (docs/records.schema.json), and the derived ones.
RECORD_FIELDS = frozenset((
    "index", "protocol", "time", "conn", "src", "dst", "direction", "packet", "first_packet", "type", "command",
    "size", "problems", "expert", "answers", "latency_ms", "request_type", "producer", "consumer", "permits",
    "acks", "broker_initiated", "checksum", "checksum_detail", "broker_entry_metadata", "metadata",
    "payload_size", "uncompressed_size", "encrypted", "marker", "messages", "messages_summary", "reassembled",
    "message", "severity", "offset", "length", "details", "discards", "serial", "rpc", "partition", "client_id",
    "group",
))
DERIVED_FIELDS = frozenset(("topic",))
KNOWN_FIELDS = RECORD_FIELDS | DERIVED_FIELDS

_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: _NOT not_expr -> not_
         | atom
?atom: operand COMPARE operand  -> compare
     | operand _IN set          -> in_set
     | operand _IN field        -> in_field
     | operand _MATCHES string  -> matches
     | operand _CONTAINS operand -> contains
     | field                    -> truthy
     | "(" or_expr ")"
?operand: field | literal
field: NAME ("." NAME)*
?literal: string | number | TRUE -> true | FALSE -> false | NULL -> null
set: "{" [literal ("," literal)*] "}"
string: ESCAPED_STRING | SINGLE_QUOTED
number: SIGNED_NUMBER
COMPARE: "==" | "!=" | "<=" | ">=" | "<" | ">"
_OR: "or" | "||"
_AND: "and" | "&&"
_NOT: "not" | "!"
_IN: "in"
_MATCHES: "matches" | "~"
_CONTAINS: "contains"
TRUE: "true"
FALSE: "false"
NULL: "null"
NAME: /(?!(and|or|not|in|matches|contains|true|false|null)\b)[A-Za-z_][A-Za-z0-9_]*/
SINGLE_QUOTED: /'[^']*'/
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

@functools.cache
def _parser() -> Lark:
    """The grammar's parser, built at the first expression (building it is most of this module's import
    time, which every run paid, --json included)."""
    return Lark(_GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=False)


class ExprError(ValueError):
    """An expression that cannot be compiled: ``column`` (1-based) says where."""

    def __init__(self, message: str, expression: str, column: int | None) -> None:
        self.message = message
        self.expression = expression
        self.column = column
        super().__init__(self.describe())

    def describe(self) -> str:
        where = f" at column {self.column}" if self.column else ""
        text = f"{self.message}{where}\n  {self.expression}"
        if self.column:
            text += "\n  " + " " * (self.column - 1) + "^"
        return text


Predicate = Callable[[dict], bool]
_MISSING = object()


def compile_expr(expression: str) -> Predicate:
    """A function of a record, true when the record matches ``expression``; ExprError when it does not
    compile (bad syntax, an unknown field, a bad regular expression)."""
    try:
        tree = _parser().parse(expression)
    except UnexpectedInput as exc:
        got = getattr(exc, "token", None)
        column = getattr(exc, "column", None)
        if got is not None and getattr(got, "type", "") == "$END":
            what, column = "the expression ends too soon", len(expression.rstrip()) + 1
        elif got is not None:
            what = f"unexpected {str(got)!r}"
        else:
            what = f"unexpected character {expression[exc.pos_in_stream]!r}" \
                if 0 <= getattr(exc, "pos_in_stream", -1) < len(expression) else "unexpected character"
        raise ExprError(f"syntax error: {what}", expression, column) from None
    compiler = _Compiler(expression)
    try:
        predicate = compiler.transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, ExprError):
            raise exc.orig_exc from None
        raise
    predicate.fields = frozenset(compiler.fields)
    return predicate


# Keys that records made for one-line views (``summary``) leave out or shorten.
FULL_RECORD_FIELDS = frozenset(("messages", "metadata"))


def needs_full_records(predicate: Predicate) -> bool:
    """Whether the expression reads what only full records carry (each message, the whole metadata)."""
    return bool(getattr(predicate, "fields", frozenset()) & FULL_RECORD_FIELDS)


# ------------------------------------------------------------------------------------------- evaluation

def resolve(rec: dict, path: tuple[str, ...]) -> list:
    """Every value at ``path`` in ``rec``: lists along the way are flattened (any-element semantics)."""
    if path[0] == "topic" and "topic" not in rec:
        value = _topic(rec)
        values = [] if value is None else [value]
        path = path[1:]
        if not path:
            return values
    else:
        values = [rec]
    for part in path:
        found = []
        for value in values:
            if type(value) is dict:
                item = value.get(part, _MISSING)
                if item is _MISSING:
                    continue
                if type(item) is list:
                    found.extend(item)
                else:
                    found.append(item)
        values = found
        if not values:
            break
    return values


def _topic(rec: dict):
    command = rec.get("command")
    if type(command) is dict and "topic" in command:
        return command["topic"]
    for key in ("producer", "consumer"):
        actor = rec.get(key)
        if type(actor) is dict and actor.get("topic") is not None:
            return actor["topic"]
    return None


def _comparable(a, b) -> bool:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return (isinstance(a, numbers) and isinstance(b, numbers)) or type(a) is type(b)


def _orderable(a, b) -> bool:
    """< <= > >= hold between numbers or between strings only (never an error, as for any comparison)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return (isinstance(a, (int, float)) and isinstance(b, (int, float))) or (type(a) is str and type(b) is str)


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


class _Value:
    """An operand: a field path (many values) or a literal (one)."""

    __slots__ = ("path", "literal", "column")

    def __init__(self, path: tuple[str, ...] | None = None, literal: Any = None, column: int | None = None) -> None:
        self.path = path
        self.literal = literal
        self.column = column

    def values(self, rec: dict) -> list:
        return resolve(rec, self.path) if self.path is not None else [self.literal]


@v_args(inline=True)
class _Compiler(Transformer):
    """AST → closures over records."""

    def __init__(self, expression: str) -> None:
        super().__init__()
        self.expression = expression
        self.fields: set[str] = set()  # the top-level names the expression reads

    # -- operands
    def field(self, *names: Token) -> _Value:
        first = names[0]
        if str(first) not in KNOWN_FIELDS:
            raise ExprError(f"unknown field {str(first)!r} (fields: {', '.join(sorted(KNOWN_FIELDS))})",
                            self.expression, first.column)
        self.fields.add(str(first))
        return _Value(path=tuple(str(n) for n in names))

    def string(self, token: Token) -> _Value:
        text = str(token)
        if text.startswith("'"):
            return _Value(literal=text[1:-1], column=token.column)
        try:
            return _Value(literal=json.loads(text), column=token.column)
        except ValueError as exc:
            raise ExprError(f"bad string {text}: {exc.args[0].split(':')[0]}", self.expression,
                            token.column) from None

    def number(self, token: Token) -> _Value:
        text = str(token)
        return _Value(literal=float(text) if any(c in text for c in ".eE") else int(text))

    def true(self, _token=None) -> _Value:
        return _Value(literal=True)

    def false(self, _token=None) -> _Value:
        return _Value(literal=False)

    def null(self, _token=None) -> _Value:
        return _Value(literal=None)

    def set(self, *items: _Value) -> tuple:
        return tuple(i.literal for i in items if i is not None)

    # -- predicates
    def compare(self, left: _Value, op: Token, right: _Value) -> Predicate:
        fn = _OPS[str(op)]
        comparable = _comparable if str(op) in ("==", "!=") else _orderable

        def compare(rec: dict) -> bool:
            for a in left.values(rec):
                for b in right.values(rec):
                    if comparable(a, b) and fn(a, b):
                        return True
            return False
        return compare

    def in_set(self, left: _Value, items: tuple) -> Predicate:
        def in_set(rec: dict) -> bool:
            return any(_comparable(a, b) and a == b for a in left.values(rec) for b in items)
        return in_set

    def in_field(self, left: _Value, right: _Value) -> Predicate:
        def in_field(rec: dict) -> bool:
            candidates = right.values(rec)
            return any(_comparable(a, b) and a == b for a in left.values(rec) for b in candidates)
        return in_field

    def contains(self, left: _Value, right: _Value) -> Predicate:
        def contains(rec: dict) -> bool:
            for a in left.values(rec):
                for b in right.values(rec):
                    if isinstance(a, str) and isinstance(b, str) and b in a:
                        return True
                    if _comparable(a, b) and a == b:  # an element of a list field
                        return True
            return False
        return contains

    def matches(self, left: _Value, pattern: _Value) -> Predicate:
        try:
            regex = re.compile(pattern.literal)
        except re.error as exc:
            column = pattern.column + 1 + exc.pos if pattern.column and exc.pos is not None else pattern.column
            raise ExprError(f"bad regular expression {pattern.literal!r}: {exc.msg}", self.expression,
                            column) from None

        def matches(rec: dict) -> bool:
            return any(isinstance(a, str) and regex.search(a) for a in left.values(rec))
        return matches

    def truthy(self, value: _Value) -> Predicate:
        def truthy(rec: dict) -> bool:
            return any(v not in (None, False, 0, "", [], {}) for v in value.values(rec))
        return truthy

    def not_(self, inner: Predicate) -> Predicate:
        return lambda rec: not inner(rec)

    def and_expr(self, *parts: Predicate) -> Predicate:
        return lambda rec: all(p(rec) for p in parts)

    def or_expr(self, *parts: Predicate) -> Predicate:
        return lambda rec: any(p(rec) for p in parts)
