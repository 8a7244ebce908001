"""Coverage-guided fuzzing of the whole pipeline from raw capture bytes, with atheris (libFuzzer for Python).

    .venv/bin/python tools/fuzz/fuzz_capture.py --seeds DIR          # the shipped captures as seeds
    .venv/bin/python tools/fuzz/fuzz_capture.py [libFuzzer flags] CORPUS_DIR SEED_DIR

What one input goes through and what must hold: tests/fuzz_harness.py (check_input). Half the mutations are
libFuzzer's own, half structure-aware (fuzz_harness.mutate_structured). An input that breaks a check is
written as a crash by libFuzzer; keep it under tests/fuzz_regressions/ (tests/test_fuzz_regressions.py
replays them all). tools/fuzz/README.md: how to run it long, and with the compiled core's coverage.
"""

from __future__ import annotations

import gzip
import os
import random
import sys

import atheris

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))

fuzz_harness = None  # imported after atheris.Setup: see main


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.5:
        mutated = fuzz_harness.mutate_structured(data, rng)
        if mutated is not None:
            return mutated[:max_size]
    return atheris.Mutate(data, max_size)


def write_seeds(directory: str) -> None:
    """The shipped captures up to 256 KiB, uncompressed, as seeds (nothing of the core is loaded here)."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "captures")
    os.makedirs(directory, exist_ok=True)
    for base, _, files in os.walk(root):
        for name in files:
            if name.endswith((".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")):
                with open(os.path.join(base, name), "rb") as f:
                    raw = f.read()
                raw = gzip.decompress(raw) if name.endswith(".gz") else raw
                if len(raw) <= 256 * 1024:
                    with open(os.path.join(directory, name.removesuffix(".gz")), "wb") as out:
                        out.write(raw)


def check_input(data: bytes) -> None:
    global fuzz_harness
    if fuzz_harness is None:  # first input: libFuzzer is loaded now (see main)
        with atheris.instrument_imports(include=["dissector", "fuzz_harness"]):
            import fuzz_harness as harness
        fuzz_harness = harness
    fuzz_harness.check_input(data)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--seeds":
        write_seeds(sys.argv[2])
        return
    # libFuzzer's symbols global before the core is loaded: a core built with sanitizer coverage
    # (tools/fuzz/README.md) then hands its counters to this libFuzzer, which Setup loads.
    sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)
    atheris.Setup(sys.argv, check_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
