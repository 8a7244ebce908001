"""The compiled core against what it replaced and against hostile bytes.

- Every shipped capture's ``--json`` records equal the golden output of the pure-Python decoder it replaced
  (tests/golden/README.md says where they come from).
- Mutated corpus frames (bit flips, cut, spliced bytes, lost tails) never raise, and the plain data the core
  returns keeps its invariants. The Rust side has its own unit tests (``cargo test`` in core/, run by CI).
"""

from __future__ import annotations

import gzip
import io
import json
import random
import sys
from pathlib import Path

import pytest

from dissector.model import Decoded
from dissector.options import Options
from dissector.output.jsonl import json_writer
from dissector.problems import REGISTRY, Finding
from dissector.protocols import get
from dissector.protocols.pulsar.decode import decode_frame
from dissector.protocols.pulsar.payload import PayloadSection
from dissector.run import analysed_records

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
CAPTURES = sorted(p for p in (ROOT / "captures").iterdir() if p.name.endswith((".pcap", ".pcapng", ".pcap.gz")))


def _json_lines(capture: Path) -> bytes:
    out = io.StringIO()
    write = json_writer(out)
    for rec in analysed_records(capture, Options()):
        write(rec)
    return out.getvalue().encode()


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_the_core_gives_the_records_of_the_decoder_it_replaced(capture):
    golden = gzip.decompress((GOLDEN / f"{capture.name}.jsonl.gz").read_bytes()).splitlines()
    got = _json_lines(capture).splitlines()
    assert len(got) == len(golden)
    for new, old in zip(got, golden):
        assert json.loads(new) == json.loads(old)


def _corpus_frames() -> list[bytes]:
    """Every distinct frame of the small shipped captures (compressed ones included), as the splitter hands
    them to the decoder."""
    pulsar = get("pulsar")
    frames: list[bytes] = []
    real = pulsar.decode  # None: the core's decoder (a spec's decode, when set, takes its place)

    def keep(data, missing, options):
        frames.append(bytes(data))
        return decode_frame(data, missing, options)

    object.__setattr__(pulsar, "decode", keep)
    try:
        for capture in CAPTURES:
            if capture.stat().st_size > 1_000_000:
                continue
            for _ in analysed_records(capture, Options()):
                pass
    finally:
        object.__setattr__(pulsar, "decode", real)
    return sorted(set(frames))


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    f = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if op < 0.5 and f:
            f[rng.randrange(len(f))] ^= 1 << rng.randrange(8)
        elif op < 0.7 and f:
            f[rng.randrange(len(f))] = rng.randrange(256)
        elif op < 0.85:
            del f[rng.randrange(len(f) + 1):]
        else:
            i = rng.randrange(len(f) + 1)
            f[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
    return bytes(f)


def _check_invariants(dec, frame: bytes, missing: int) -> None:
    assert type(dec) is Decoded and isinstance(dec.type, str)
    assert dec.size == len(frame) + missing
    assert dec.command is None or type(dec.command) is dict
    for f in dec.findings:
        assert type(f) is Finding and f.id in REGISTRY, f
    if dec.body is not None:
        assert type(dec.body) is PayloadSection
        assert all(f in dec.findings for f in dec.body.findings)
        for m in dec.body.messages:
            assert m["payload"] is None or len(m["payload"]) == m["payload_size"]
    json.dumps(dec.command)  # plain data: it serializes


def test_mutated_frames_never_break_the_core():
    rng = random.Random(20261122)
    frames = _corpus_frames()
    assert len(frames) > 250
    for case in range(20_000):
        frame = _mutate(rng, rng.choice(frames))
        missing = rng.choice((0, 0, 0, rng.randint(1, 64)))
        options = Options(summary=rng.random() < 0.3, max_decompressed=rng.choice((64, 1 << 26)))
        _check_invariants(decode_frame(frame, missing, options), frame, missing)


if __name__ == "__main__" and "--regenerate" in sys.argv:
    for capture in CAPTURES:
        (GOLDEN / f"{capture.name}.jsonl.gz").write_bytes(gzip.compress(_json_lines(capture), 9, mtime=0))
        print("wrote", capture.name)


def test_the_core_refuses_classes_whose_fields_it_would_fill_wrongly():
    """The core fills Decoded and PayloadSection by position: a class whose fields changed is refused at bind
    time instead of getting its values in the wrong fields."""
    import dataclasses

    from dissector import _core as pulsar_dissect_core

    Reordered = dataclasses.make_dataclass("Reordered", [f.name for f in reversed(dataclasses.fields(Decoded))])
    with pytest.raises(RuntimeError):
        pulsar_dissect_core.bind(Reordered, Finding)
    with pytest.raises(RuntimeError):
        pulsar_dissect_core.bind_body("pulsar", Reordered)
