"""Which events to show: by connection, command type, topic, producer or consumer.

Used after the conversation analysis (topics and names come from it), by every front end alike.
"""

from __future__ import annotations

from collections import OrderedDict

from .analysis import remember_bounded, topic_of
from .pipeline import FrameEvent


class FrameFilter:
    """Which records to show: by connection, type, topic, producer, consumer."""

    def __init__(self, conns, types, topics, producers, consumers) -> None:
        self.conns = {int(c) for c in conns}
        self.types = {t.upper() for t in types}
        self.topics = set(topics)
        self.producers = set(producers)
        self.consumers = set(consumers)
        self.actor_filter = bool(self.topics or self.producers or self.consumers)
        self._accepted: OrderedDict[int, None] = OrderedDict()  # recent accepted frames: their answers belong too

    def accepts(self, ev) -> bool:
        if self.conns and (ev.conn is None or ev.conn.id not in self.conns):
            return ev.conn is None and not self.actor_filter
        if type(ev) is not FrameEvent:
            if self.types and ev.kind not in self.types:
                return False
            return not self.actor_filter or ev.conn is None
        if self.types and ev.frame.type not in self.types:
            return False
        if self.actor_filter and ev.notes.get("answers") in self._accepted:
            return True  # e.g. the PRODUCER_SUCCESS or SUCCESS that answers an accepted request
        if self.topics and topic_of(ev) not in self.topics:
            return False
        if self.producers and not _actor_matches(ev, "producer", "producer_id", self.producers):
            return False
        if self.consumers and not _actor_matches(ev, "consumer", "consumer_id", self.consumers):
            return False
        if self.actor_filter:
            remember_bounded(self._accepted, ev.index, None)
        return True


def _actor_matches(ev: FrameEvent, key: str, id_field: str, wanted: set[str]) -> bool:
    cmd = ev.frame.command
    info = ev.notes.get(key) or {}
    name = info.get("name")
    if cmd is not None and ev.frame.type in ("PRODUCER", "SUBSCRIBE"):
        name = getattr(cmd, "producer_name" if key == "producer" else "consumer_name", None) or name
        if (key == "producer") != (ev.frame.type == "PRODUCER"):
            return False
    if name is not None and name in wanted:
        return True
    if cmd is not None and hasattr(cmd, id_field) and (key in ev.notes or ev.frame.type in ("PRODUCER", "SUBSCRIBE")):
        return str(getattr(cmd, id_field)) in wanted
    return False
