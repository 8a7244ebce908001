"""The core's own JSON writer (crates/engine/src/value.rs: ``Value::write_json``, for the native output to come) writes
exactly what ``dissector.output.jsonl.dumps`` writes: byte for byte, on every value the decoder gives for the
shipped captures, on every golden record, and on the floats and strings where JSON writers differ."""

from __future__ import annotations

import gzip
import json
import random
import struct
from pathlib import Path

import pytest

from dissector import _core as pulsar_dissect_core
from dissector.model import Frame
from dissector.options import Options
from dissector.output.jsonl import dumps
from dissector.pipeline import dissect_file

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = sorted((ROOT / "tests" / "golden").glob("*.jsonl.gz"))
CAPTURES = sorted(p for p in (ROOT / "captures").iterdir() if p.name.endswith((".pcap", ".pcapng", ".pcap.gz")))


def _same(value) -> None:
    assert pulsar_dissect_core._json_dumps(value) == dumps(value), value


def _decoded_values(capture: Path, summary: bool):
    """Every plain value the decoder gives for a capture's frames: commands, payload sections' parts, messages
    (with their payload bytes), findings' params."""
    for item in dissect_file(capture, Options(summary=summary)):
        if type(item) is not Frame:
            continue
        pdu = item.pdu
        yield pdu.command
        yield [f.params for f in pdu.findings]
        if pdu.body is not None:
            sec = pdu.body
            yield from (sec.broker_entry_metadata, sec.metadata, sec.marker, sec.messages)


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_every_decoded_value_of_the_captures(capture):
    for summary in (False, True):
        for value in _decoded_values(capture, summary):
            _same(value)


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_every_golden_record(golden):
    for line in gzip.decompress(golden.read_bytes()).splitlines():
        _same(json.loads(line))


def test_floats_where_writers_differ():
    rng = random.Random(20261122)
    specials = [0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e-7, 1e-6, 1e-5, 1e-4, 123e-7, 1e15, 1e16, 1e17, 1e21, 1e22,
                9007199254740993.0, 1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, 1 / 3, 2 / 3,
                float("nan"), float("inf"), float("-inf"), 12345.678, 0.000123, 1.5e300, 100.0, 1e7]
    from_bits = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20_000)]
    decimals = [round(rng.uniform(-1e6, 1e6), rng.randint(0, 9)) for _ in range(20_000)]
    scales = [rng.random() * 10.0 ** rng.randint(-30, 30) for _ in range(20_000)]
    latencies = [rng.randint(0, 10**9) / 1000 for _ in range(20_000)]  # latency_ms: microseconds in ms
    for values in (specials, from_bits, decimals, scales, latencies):
        _same(values)
        for v in values:
            _same(v)


def test_strings_and_integers_where_writers_differ():
    every_code_point_below_0x800 = "".join(chr(c) for c in range(0x800))
    _same(every_code_point_below_0x800)
    _same("".join(chr(c) for c in range(0x2000, 0x2100)))  # U+2028/2029 and the bidi controls among their neighbours
    _same(["\u2028", "x\u2029", "\u202e\u2066\u2069\x7f", "\u202f\u2065\u206a\u2027"])
    _same({"k\x00\x1f\"\\\x7f\x80\x9f\xa0": ["\u2028\u2029", "\U0001f600", "\xc2\x85", "Â\x85", "\ud7ff\ue000"]})
    _same(b"bytes \xff\xfe \xc2\x85 \xe2\x82 ok")  # as the fallback writes bytes: \xNN for what is not UTF-8
    _same([0, -1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, True, False, None, [], {}, [[{}]]])
