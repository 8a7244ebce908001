"""Every finding and problem event of a capture, grouped by id and severity with the frames and packets that
carry them (as tshark's ``-z expert``): plain data for ``pulsar-dissect problems`` to print or write as JSON.

A frame's findings are its record's ``expert`` entries, notes included; an event (UNANSWERED, UNACKED_AT_END,
GAP, ...) counts when it is a warning or an error (a connection opened or closed is no problem). Each group keeps its first message and at most ``FRAMES_KEPT`` places
(then only counts them), so a capture with a million findings holds a few hundred places."""

from __future__ import annotations

from dataclasses import dataclass, field

FRAMES_KEPT = 20  # places kept per group; the rest counted
SEVERITY_ORDER = ("error", "warning", "note")


@dataclass
class Group:
    severity: str
    id: str
    message: str  # the first one's
    count: int = 0
    frames: list = field(default_factory=list)  # frame numbers (None for an event)
    packets: list = field(default_factory=list)

    def as_json(self) -> dict:
        return {"severity": self.severity, "id": self.id, "count": self.count, "message": self.message,
                "frames": [f for f in self.frames if f is not None], "packets": self.packets,
                "more": self.count - len(self.packets)}


class Findings:
    """Groups of findings, added record by record."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], Group] = {}
        self.frames = 0

    def add(self, rec: dict) -> None:
        if "index" in rec:
            self.frames += 1
            for entry in rec.get("expert") or ():
                self._count(entry["severity"], entry["id"], entry["message"], rec["index"], rec.get("packet"))
        elif rec.get("severity") in ("error", "warning"):
            self._count(rec["severity"], rec["type"], rec.get("message") or "", None, rec.get("packet"))

    def _count(self, severity: str, pid: str, message: str, frame, packet) -> None:
        group = self.groups.get((severity, pid))
        if group is None:
            group = self.groups[(severity, pid)] = Group(severity, pid, message)
        group.count += 1
        if len(group.packets) < FRAMES_KEPT:
            group.frames.append(frame)
            group.packets.append(packet)

    def ordered(self) -> list[Group]:
        """Errors first, then warnings, then notes; within each the most frequent first, then by id."""
        rank = {s: i for i, s in enumerate(SEVERITY_ORDER)}
        return sorted(self.groups.values(), key=lambda g: (rank.get(g.severity, 9), -g.count, g.id))
