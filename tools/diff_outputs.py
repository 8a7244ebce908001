#!/usr/bin/env python3
"""Compare the CLI's output on every shipped capture with outputs saved earlier (e.g. before a refactor).

    python tools/diff_outputs.py save DIR      # write DIR/<capture>.<mode> for every capture and mode
    python tools/diff_outputs.py diff DIR      # run again and list what differs from DIR, record by record

JSON outputs are compared as parsed objects (key order is not part of the contract); with ``--known`` the
documented contract changes are applied to the old side first, so only unexplained differences remain.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "dissector.cli.main"]
MODES = {
    "json": ["--json"],
    "payload.json": ["--json", "--payload"],
    "txt": ["--plain"],
    "V.txt": ["--plain", "-V", "--payload"],
    "stats.json": ["stats", "--json"],
}


def captures() -> list[Path]:
    return sorted(p for p in (ROOT / "captures").iterdir() if p.name.endswith((".pcap", ".pcapng", ".pcap.gz")))


def run(capture: Path, mode: str) -> str:
    args = MODES[mode]
    argv = CLI + ([args[0], str(capture)] + args[1:] if args[0] == "stats" else [str(capture)] + args)
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False).stdout


def known_changes(old: dict) -> dict:
    """The documented contract changes, applied to a record of the old output."""
    if "index" in old:
        old = {**old, "protocol": "pulsar"}
        if "answers" in old:
            old.setdefault("request_type", None)
    return old


def diff_json_lines(old_text: str, new_text: str, known: bool) -> list[str]:
    old = [json.loads(line) for line in old_text.splitlines()]
    new = [json.loads(line) for line in new_text.splitlines()]
    out = []
    if len(old) != len(new):
        out.append(f"  {len(old)} records before, {len(new)} now")
    for i, (a, b) in enumerate(zip(old, new)):
        if known:
            a = known_changes(a)
            if "request_type" in b and a.get("request_type", 0) is None:
                a["request_type"] = b["request_type"]
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            out.append(f"  record {i + 1} ({b.get('type')}): " + ", ".join(
                f"{k}: {json.dumps(a.get(k))[:160]} -> {json.dumps(b.get(k))[:160]}" for k in keys))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "diff"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--known", action="store_true", help="apply the documented contract changes first")
    parser.add_argument("--max", type=int, default=20, help="differences shown per file")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    differing = 0
    for capture in captures():
        for mode in MODES:
            path = args.dir / f"{capture.name}.{mode}"
            text = run(capture, mode)
            if args.action == "save":
                path.write_text(text)
                continue
            before = path.read_text()
            if mode.endswith("json") and not mode.startswith("stats"):
                lines = diff_json_lines(before, text, args.known)
            elif mode.startswith("stats"):
                a, b = json.loads(before), json.loads(text)
                if args.known:  # stats count frames of unknown direction apart (they were counted as to_client)
                    for c in a.get("connections", ()):
                        for key in ("frames_unknown_direction", "bytes_unknown_direction"):
                            c.setdefault(key, 0)
                lines = [] if a == b else [f"  stats: {k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            else:
                lines = [f"  line {i + 1}:\n    - {x}\n    + {y}" for i, (x, y) in
                         enumerate(zip(before.splitlines(), text.splitlines())) if x != y]
                if len(before.splitlines()) != len(text.splitlines()):
                    lines.append(f"  {len(before.splitlines())} lines before, {len(text.splitlines())} now")
            if lines:
                differing += 1
                print(f"{path.name}: {len(lines)} difference(s)")
                print("\n".join(lines[: args.max]))
    if args.action == "diff":
        print(f"{differing} file(s) differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
