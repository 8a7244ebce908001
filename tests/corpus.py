"""Access to the shipped corpus (captures/): real broker + official client traffic with ground-truth manifests."""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
from pathlib import Path

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def capture_path(name: str) -> Path:
    """``name`` like '01_basic_nonbatched.pcap'; finds the gzipped copy when that is what ships."""
    plain = CAPTURES / name
    return plain if plain.exists() else CAPTURES / (name + ".gz")


def manifest(stem: str) -> dict:
    path = CAPTURES / f"{stem}.json"
    if path.exists():
        return json.loads(path.read_text())
    with gzip.open(CAPTURES / f"{stem}.json.gz", "rt") as fh:
        return json.load(fh)


def manifest_stems() -> list[str]:
    stems = {p.name.split(".")[0] for p in CAPTURES.glob("*.json*")}
    return sorted(s for s in stems if capture_path(f"{s}.pcap").exists())


@functools.lru_cache(maxsize=None)
def decoded(name: str) -> tuple[dict, ...]:
    """JSON-contract records of a shipped capture, as the CLI's --json would print them."""
    from dissector.run import analysed_records

    return tuple(json.loads(json.dumps(r)) for r in analysed_records(capture_path(name)))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
