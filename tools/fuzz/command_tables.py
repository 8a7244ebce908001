"""Write the command tables of the protocols as JSON, for the engine's fuzz target (fuzz/).

The tables are declared once, in Python (dissector/protocols/<name>/commands.py); the core's analysis reads
them through the Python binding. The fuzz target runs without importing the dissector package, so
tools/fuzz/run_core.sh writes this file before each run (fuzz/command_tables.json).

usage: python tools/fuzz/command_tables.py OUT.json
"""

from __future__ import annotations

import json
import sys

from dissector.protocols import get


def space(s) -> dict:
    return {"name": s.name, "slot": s.slot, "duplicates": s.duplicates, "unmatched": s.unmatched,
            "unanswered": s.unanswered, "opened_by": s.opened_by}


def key(k) -> dict:
    return {"space": space(k.space), "fields": list(k.fields)}


def spec(c) -> dict:
    interim = None
    if c.interim is not None:
        field, value = c.interim
        if not isinstance(value, (bool, int, str)):
            raise TypeError(f"{c.name}: interim value {value!r} is not a JSON scalar the target reads")
        interim = [field, value]
    return {
        "name": c.name, "sender": c.sender, "scope": c.scope, "scope_id": c.scope_id,
        "opens": key(c.opens) if c.opens else None, "answers": [key(k) for k in c.answers],
        "answer_types": sorted(c.answer_types) if c.answer_types is not None else None,
        "interim": interim, "remember": list(c.remember),
    }


def main(out: str) -> None:
    tables = {}
    for name in ("pulsar", "tubemq"):
        p = get(name)
        tables[name] = {"server_roles": list(p.server_roles), "client_role": p.client_role,
                        "ports": {str(port): role for port, role in p.ports.items()},
                        "session": p.session, "max_frame_size": p.max_frame_size,
                        "commands": [spec(c) for c in p.commands]}
    with open(out, "w") as f:
        json.dump(tables, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
