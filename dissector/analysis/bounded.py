"""Bounded state for the analysis: tables that forget their oldest entries, and saying so when they do."""

from __future__ import annotations

from collections import OrderedDict

from ..model import Event


def remember_bounded(table: OrderedDict, key, value, cap: int) -> bool:
    """Insert; beyond ``cap`` forget the oldest entry (O(1)). True when an entry was forgotten."""
    table[key] = value
    if len(table) > cap:
        table.popitem(last=False)
        return True
    return False


class DropCounter:
    """What the caps of one connection dropped: a STATE_DROPPED event at the first drop of each kind, and the
    total when the connection closes (so a one-sided capture says it once, not once per frame)."""

    __slots__ = ("conn", "_dropped")

    def __init__(self, conn: int) -> None:
        self.conn = conn
        self._dropped: dict[str, list] = {}  # option -> [count, what, limit]

    def drop(self, option: str, what: str, limit: int, time: float, packet: int) -> Event | None:
        entry = self._dropped.get(option)
        if entry is not None:
            entry[0] += 1
            return None
        self._dropped[option] = [1, what, limit]
        return _event(self.conn, option, what, limit, 1, time, packet)

    def close(self, time: float, packet: int) -> list[Event]:
        return [_event(self.conn, option, what, limit, count, time, packet)
                for option, (count, what, limit) in self._dropped.items() if count > 1]


def _event(conn: int, option: str, what: str, limit: int, count: int, time: float, packet: int) -> Event:
    return Event("STATE_DROPPED", time, packet, conn,
                 details={"option": option, "what": what, "limit": limit, "dropped": count})
