"""What to tell a user when a capture decoded to nothing: which ports were looked at, where TCP was seen
instead (the busiest ports off the protocols' own), and the flag that would find it. One text for the
timeline, `report` and `check` (and the pytest plugin), so a CI job aimed at the wrong port reads the same
hint wherever it fails."""

from __future__ import annotations

from ..options import Options


def size_text(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"  # pragma: no cover


def nothing_decoded(options: Options, report: dict) -> str:
    """Why no frame was decoded: ``report`` as the run filled it (``other_tcp``, ``reader``)."""
    from dissector import protocols

    ports = sorted({p for proto in protocols.select(options.protocols) for p in proto.ports} | options.port_numbers)
    where = "/".join(map(str, ports))
    other = report.get("other_tcp")
    rows = other.summary() if other is not None else []
    names = " or ".join(p.title for p in protocols.select(options.protocols))
    if rows:
        seen = ", ".join(f"{r['port']} ({r['connections']} connection{'s' if r['connections'] != 1 else ''}"
                         f", {size_text(r['bytes'])})" for r in rows)
        return (f"no {names} on {where}; TCP seen on {seen} — try --port {rows[0]['port']} or --detect"
                if not options.detect else f"no {names} found, even with --detect; TCP seen on {seen}")
    packets = getattr(report.get("reader"), "packets", None)
    if packets == 0:
        return "the capture holds no packets"
    return f"no {names} frame on {where} and no other TCP in this capture ({packets} packets)"
