"""The fuzzer's checks (tests/fuzz_harness.py) on every input that ever broke something, and on the harness
itself: a check that cannot fail would let the fuzzer run for nothing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import fuzz_harness
from pcapgen import ether, ipv4_tcp, write_pcap

REGRESSIONS = sorted((Path(__file__).parent / "fuzz_regressions").glob("*.pcap*"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_regression_input_passes_the_checks(path):
    fuzz_harness.check_input(path.read_bytes())


def test_regressions_are_kept():
    assert REGRESSIONS, "tests/fuzz_regressions/ holds the inputs that once broke the tool"


@pytest.mark.parametrize("raw", ["\x7f", "\x1b[31m", "\u202e", "\u2028", "\x85", "\x07"])
def test_a_raw_control_in_a_json_line_fails_the_check(raw):
    with pytest.raises(AssertionError):
        fuzz_harness.check_line(f'{{"topic":"a{raw}b"}}\n'.encode(), "a line")


def test_invalid_json_fails_the_check():
    with pytest.raises(ValueError):
        fuzz_harness.check_line(b'{"topic":\n', "a line")


def test_escaped_controls_pass_the_check():
    fuzz_harness.check_line(b'{"topic":"a\\u007fb\\u202e\\u2028"}\n', "a line")


def test_structured_mutation_rewrites_a_tcp_payload_in_place(tmp_path):
    payload = bytes(range(8)) + b"\x0e\x01" + bytes(40)
    path = tmp_path / "one.pcap"
    write_pcap(path, [(1.0, ether(ipv4_tcp("10.0.0.1", "10.0.0.2", 40000, 6650, seq=1, payload=payload)))])
    data = path.read_bytes()
    start, end = fuzz_harness.pcap_payloads(data)[0]
    assert data[start:end] == payload
    changed = 0
    for seed in range(50):
        mutated = fuzz_harness.mutate_structured(data, random.Random(seed))
        assert mutated is not None and len(mutated) == len(data)
        assert mutated[:start] == data[:start]  # headers untouched: the packet still reaches the decoder
        changed += mutated != data
    assert changed >= 40
