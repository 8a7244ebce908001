"""Which records to show: by connection, command type, topic, producer or consumer.

Reads records (after the conversation analysis, which names the producers and consumers), so every front end
filters alike, and filtering never changes what was analysed.
"""

from __future__ import annotations

from collections import OrderedDict

from .. import protocols
from .expr import compile_expr, resolve

ACCEPTED_MEMORY = 100_000  # recent accepted requests whose answers are shown too


class FrameFilter:
    """Which records to show: by connection, type, topic, producer, consumer (the shorthands), and by an
    expression (``-Y``, see ``expr``); a record is shown when it passes both."""

    def __init__(self, conns=(), types=(), topics=(), producers=(), consumers=(), expression: str | None = None) -> None:
        self.predicate = compile_expr(expression) if expression else None
        self.conns = {int(c) for c in conns}
        self.types = {t.upper() for t in types}
        self.topics = set(topics)
        self.producers = set(producers)
        self.consumers = set(consumers)
        self.actor_filter = bool(self.topics or self.producers or self.consumers)
        self._accepted: OrderedDict[int, None] = OrderedDict()  # recent accepted frames: their answers belong too

    @property
    def accepts_all(self) -> bool:
        """No expression and no shorthand: every record passes."""
        return self.predicate is None and not (self.conns or self.types or self.actor_filter)

    def accepts(self, rec: dict) -> bool:
        if self.predicate is not None and not self.predicate(rec):
            return False
        return self._shorthands(rec)

    def _shorthands(self, rec: dict) -> bool:
        conn = rec.get("conn")
        if self.conns and conn not in self.conns:
            return conn is None and not self.actor_filter
        if "index" not in rec:
            if self.types and rec["type"] not in self.types:
                return False
            return not self.actor_filter or conn is None
        if self.types and rec["type"] not in self.types:
            return False
        if self.actor_filter and rec.get("answers") in self._accepted:
            return True  # e.g. the PRODUCER_SUCCESS or SUCCESS that answers an accepted request
        if self.topics and not _topic_matches(topic_of(rec), self.topics):
            return False
        if self.producers and not _actor_matches(rec, "producer", self.producers):
            return False
        if self.consumers and not _actor_matches(rec, "consumer", self.consumers):
            return False
        if self.actor_filter:
            self._accepted[rec["index"]] = None
            if len(self._accepted) > ACCEPTED_MEMORY:  # bounded: the oldest is forgotten
                self._accepted.popitem(last=False)
        return True


def topic_of(rec: dict) -> str | None:
    values = resolve(rec, ("topic",))
    return values[0] if values else None


def _topic_matches(topic: str | None, wanted: set[str]) -> bool:
    """The full name, or the short one the client was given (``my-topic`` for
    ``persistent://public/default/my-topic``)."""
    if topic is None:
        return False
    return topic in wanted or topic.rsplit("/", 1)[-1] in wanted


def _creates(rec: dict) -> str | None:
    try:
        spec = protocols.get(rec.get("protocol", "pulsar")).commands.get(rec["type"])
    except KeyError:
        return None
    return spec.creates if spec is not None else None


def _actor_matches(rec: dict, key: str, wanted: set[str]) -> bool:
    cmd = rec["command"]
    info = rec.get(key) or {}
    name = info.get("name")
    creates = _creates(rec)
    if creates is not None:
        if creates != key:
            return False
        name = cmd.get(f"{key}_name") or name
    if name is not None and name in wanted:
        return True
    ident = cmd.get(f"{key}_id")
    if ident is not None and (key in rec or creates is not None):
        # by id, or as the timeline prints it: id@connection (0@c2)
        return str(ident) in wanted or f"{ident}@c{rec['conn']}" in wanted
    return False
