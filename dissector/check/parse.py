"""Rules from text (``--rule``) and from a YAML rule file (``--rules``), with the line of each rule.

Text forms::

    no-errors | checksums-valid | all-answered | no-gaps | no-redeliveries | sequence-contiguous |
    no-problems | all-acked | no-discarded                    built-in rules by name
    latency SEND p99 < 20ms                                   a latency percentile of a request type
    count(type == "SEND" and topic == "t") == 1000            a count (==, !=, <, <=, >, >=)
    CONNECT before PRODUCER [before SEND ...]                 the order of first occurrences, per connection
    protocol version <= 20                                    (or >=, ==) every CONNECT / CONNECTED
    forbid EXPR / require EXPR                                no record may / some record must match

YAML: a list under ``rules:``; each item a text form, or a mapping of one kind to its parameters (plus an
optional ``name``); see docs/commands/check.md (RULES).
"""

from __future__ import annotations

import re

from ..output.expr import ExprError
from .rules import (AllAcked, AllAnswered, Count, Forbid, Latency, NoErrors, NoProblems, Order, ProtocolVersion,
                    Require, Rule)


class RuleError(ValueError):
    """A rule that cannot be understood; ``line`` is its line in the rule file, when it has one."""

    def __init__(self, message: str, line: int | None = None, source: str | None = None) -> None:
        self.line, self.source = line, source
        where = f"{source}:{line}: " if source and line else f"line {line}: " if line else ""
        super().__init__(where + message)


BUILTINS = {
    "no-errors": lambda name, p: NoErrors(name, _names(p.get("errors"))),
    "checksums-valid": lambda name, p: Forbid(name, 'checksum == "invalid"', "frame(s) with an invalid checksum"),
    "all-answered": lambda name, p: AllAnswered(name, _duration_ms(p["within"]) if "within" in p else None),
    "no-gaps": lambda name, p: Forbid(name, 'type == "GAP" or "frame.gap_damaged" in expert.id',
                                      "capture gap(s)"),
    "no-redeliveries": lambda name, p: Forbid(name, '"message.redelivered" in expert.id', "redelivered message(s)"),
    "sequence-contiguous": lambda name, p: Forbid(name, '"sequence.gap" in expert.id',
                                                  "gap(s) in a producer's sequence ids"),
    "no-problems": lambda name, p: NoProblems(name, p.get("severity", "warning"), _names(p.get("ids"))),
    "all-acked": lambda name, p: AllAcked(name),
    # a client that acknowledged messages with a validation_error dropped them unread (ack.validation_error)
    "no-discarded": lambda name, p: Forbid(name, '"ack.validation_error" in expert.id',
                                           "ACK(s) of messages the client dropped unread"),
    "latency": lambda name, p: Latency(name, str(p["type"]).upper(), _percentile(p.get("percentile", "p99")),
                                       _duration_ms(p["below"])),
    "count": lambda name, p: _count(name, p),
    "order": lambda name, p: Order(name, _names(p if isinstance(p, list) else p.get("types"))),
    "protocol-version": lambda name, p: ProtocolVersion(name, p.get("min"), p.get("max")),
    "forbid": lambda name, p: Forbid(name, _text(p)),
    "require": lambda name, p: Require(name, _text(p)),
}

_LATENCY = re.compile(r"^latency\s+([A-Z_]+)\s+p(\d+(?:\.\d+)?)\s*(<=|<)\s*(\S+)$", re.IGNORECASE)
_COUNT = re.compile(r"^count\((.*)\)\s*(==|!=|<=|>=|<|>)\s*(\d+)$", re.DOTALL)
_ORDER = re.compile(r"^[A-Za-z_]+(\s+before\s+[A-Za-z_]+)+$")
_VERSION = re.compile(r"^protocol[ -]version\s*(<=|>=|==)\s*(\d+)$")


def rule_from_text(text: str, name: str | None = None) -> Rule:
    """One rule from its text form; RuleError (or ExprError for a bad expression) when it is not one."""
    text = text.strip()
    name = name or text
    if text in BUILTINS and text not in ("latency", "count", "order", "protocol-version", "forbid", "require"):
        return BUILTINS[text](name, {})
    for keyword, cls in (("forbid", Forbid), ("require", Require)):
        if text.startswith(keyword + " "):
            return cls(name, text[len(keyword):].strip())
    if m := _LATENCY.match(text):
        return Latency(name, m[1].upper(), float(m[2]), _duration_ms(m[4]), inclusive=m[3] == "<=")
    if m := _COUNT.match(text):
        return Count(name, m[1], m[2], int(m[3]))
    if _ORDER.match(text):
        return Order(name, re.split(r"\s+before\s+", text))
    if m := _VERSION.match(text):
        version = int(m[2])
        return ProtocolVersion(name, version if m[1] in (">=", "==") else None,
                               version if m[1] in ("<=", "==") else None)
    raise RuleError(f"not a rule: {text!r} (built-in rules: {', '.join(_SIMPLE)}; or latency T pNN < Xms, "
                    "count(EXPR) == N, A before B, protocol version <= N, forbid EXPR, require EXPR)")


_SIMPLE = [k for k in BUILTINS if k not in ("latency", "count", "order", "protocol-version", "forbid", "require")]


def rules_from_yaml(text: str, source: str = "rules") -> list[Rule]:
    """The rules of a YAML rule file; RuleError naming the line of the rule that cannot be read."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RuleError(f"not valid YAML: {getattr(exc, 'problem', exc)}", mark.line + 1 if mark else None,
                        source) from None
    if root is None:
        raise RuleError("the rule file is empty", None, source)
    items = root
    if isinstance(root, yaml.MappingNode):
        found = [v for k, v in root.value if k.value == "rules"]
        if not found:
            raise RuleError("expected a list of rules under 'rules:'", root.start_mark.line + 1, source)
        items = found[0]
    if not isinstance(items, yaml.SequenceNode):
        raise RuleError("expected a list of rules", items.start_mark.line + 1, source)
    rules = []
    for node in items.value:
        line = node.start_mark.line + 1
        value = yaml.safe_load(yaml.serialize(node))
        try:
            rules.append(_rule_from_item(value))
        except ExprError as exc:
            raise RuleError(f"bad expression: {exc.describe()}", line, source) from None
        except (RuleError, ValueError, KeyError, TypeError) as exc:
            message = exc.args[0] if isinstance(exc, RuleError) else \
                f"missing parameter {exc}" if isinstance(exc, KeyError) else str(exc)
            raise RuleError(str(message), line, source) from None
    return rules


def _rule_from_item(value) -> Rule:
    if isinstance(value, str):
        return rule_from_text(value)
    if not isinstance(value, dict):
        raise RuleError(f"a rule is a text or a mapping, not {type(value).__name__}")
    value = dict(value)
    name = value.pop("name", None)
    if "rule" in value:
        return rule_from_text(str(value["rule"]), name)
    if len(value) != 1:
        raise RuleError(f"a rule names one kind, got {', '.join(map(str, value)) or 'none'}")
    (kind, params), = value.items()
    if kind not in BUILTINS:
        raise RuleError(f"unknown rule {kind!r} (known: {', '.join(BUILTINS)})")
    return BUILTINS[kind](name or _default_name(kind, params), params if params is not None else {})


def _default_name(kind: str, params) -> str:
    if not params:
        return kind
    if isinstance(params, (str, list)):
        return f"{kind} {params if isinstance(params, str) else ' before '.join(map(str, params))}"
    return kind + " " + " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
                                 for k, v in params.items())


def _count(name: str, p: dict) -> Count:
    for key, op in (("equals", "=="), ("at_least", ">="), ("at_most", "<=")):
        if key in p:
            return Count(name, _text(p["expr"]), op, int(p[key]))
    raise RuleError("count needs equals, at_least or at_most")


def _text(p) -> str:
    if isinstance(p, dict):
        p = p.get("expr")
    if not isinstance(p, str):
        raise RuleError("expected an expression")
    return p


def _names(value) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _percentile(value) -> float:
    text = str(value).lstrip("pP")
    q = float(text)
    if not 0 < q <= 100:
        raise RuleError(f"percentile {value} is not between p0 and p100")
    return q


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _duration_ms(value) -> float:
    """'20ms', '1.5s', '500us' or a number of milliseconds."""
    if isinstance(value, (int, float)):
        return float(value)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s)?\s*", str(value))
    if not m:
        raise RuleError(f"not a duration: {value!r} (e.g. 20ms, 1.5s)")
    return float(m[1]) * _UNITS[m[2] or "ms"]
