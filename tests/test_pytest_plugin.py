"""Tests of the pytest plugin (dissector.pytest_plugin: assert_trace, the fixture pulsar_trace): test files run
by pytester on recorded captures, their expectations taken from the capture manifests; the failure evidence
checked against the raw packet (scapy) and against ``pulsar-dissect check``."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dissector.capture.files import CaptureError
from dissector.check import RuleError
from dissector.pytest_plugin import Trace, assert_trace

pytest_plugins = ["pytester"]

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
BATCHING = CAPTURES / "02_batching_props_keys.pcap"
ERRORS = CAPTURES / "11_errors.pcap"


def manifest(name: str) -> dict:
    path = CAPTURES / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text())
    return json.loads(gzip.decompress(path.with_suffix(".json.gz").read_bytes()))


def batch_entries() -> int:
    """The SEND frames of 02: one per batch entry, as the client API reported them."""
    return manifest("02_batching_props_keys")["summary"]["batches_entries"]


def the_server_error() -> tuple[str, str]:
    """The one ERROR frame of 11 (its ServerError name and message), from the manifest's notes, which a step's
    result confirms (the client API's view of that error)."""
    m11 = manifest("11_errors")
    note = next(n for n in m11["notes"] if n.startswith("only one ERROR frame"))
    name, message = re.search(r"(\w+Error), '([^']+)'", note).groups()
    assert any(step["result"].startswith(name + ":") for step in m11["steps"])
    return name, message


@pytest.fixture
def run_inner(pytester, monkeypatch):
    """Run a generated test file in process with only the plugin loaded by name (no entry points)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(source: str):
        pytester.makepyfile(source)
        return pytester.runpytest("-p", "dissector.pytest_plugin")

    return run


def test_passing_file(run_inner):
    result = run_inner(f"""
        from dissector.pytest_plugin import assert_trace

        def test_batching():
            (assert_trace({str(BATCHING)!r})
                .no_errors()
                .all_answered()
                .latency("SEND", p99="1s")
                .count('type == "SEND"', equals={batch_entries()})
                .checksums_valid()
                .order("CONNECT", "PRODUCER", "SEND"))
    """)
    result.assert_outcomes(passed=1)


def test_failing_file_shows_the_error_frame(run_inner):
    name, message = the_server_error()
    result = run_inner(f"""
        from dissector.pytest_plugin import assert_trace

        def test_errors():
            assert_trace({str(ERRORS)!r}).no_errors()
    """)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "rule no-errors failed: 1 ERROR / SEND_ERROR" in out
    evidence = re.search(r"    (frame (\d+), packet (\d+): \2 .*\bERROR\b.*)", out)
    assert evidence, out
    line, packet = evidence[1], int(evidence[3])
    assert f"error={name}" in line and message in line

    # The packet named is the one that carries that ERROR on the wire (scapy reads the pcap, not our reader).
    from scapy.layers.inet import TCP
    from scapy.utils import rdpcap

    pkt = rdpcap(str(ERRORS))[packet - 1]
    assert pkt[TCP].sport == 6650 and message.encode() in bytes(pkt[TCP].payload)

    # The same evidence line as `pulsar-dissect check` prints.
    check = subprocess.run([str(Path(sys.executable).with_name("pulsar-dissect")), "check", str(ERRORS),
                            "--rule", "no-errors"], capture_output=True, text=True)
    assert check.returncode == 1
    assert any(row.strip() == line.strip() for row in check.stdout.splitlines()), (check.stdout, line)


def test_fixture(run_inner):
    result = run_inner(f"""
        from dissector.pytest_plugin import assert_trace

        def test_is_assert_trace(pulsar_trace):
            assert pulsar_trace is assert_trace

        def test_passes(pulsar_trace):
            pulsar_trace({str(BATCHING)!r}).no_errors().all_acked()

        def test_fails(pulsar_trace):
            pulsar_trace({str(ERRORS)!r}).rule("no-errors")
    """)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*rule no-errors failed: 1 ERROR / SEND_ERROR", "*    frame *, packet *: *ERROR*"])


def test_chain_stops_at_the_first_failing_rule(run_inner):
    n = batch_entries()
    result = run_inner(f"""
        def test_chain(pulsar_trace):
            (pulsar_trace({str(BATCHING)!r})
                .no_errors()
                .count('type == "SEND"', at_least={n + 1})
                .forbid('type == "SEND"'))
    """)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f'rule count(type == "SEND") >= {n + 1} failed: count(type == "SEND") is {n}, expected >= {n + 1}' in out
    assert "rule no-errors failed" not in out
    assert "rule forbid" not in out  # it would fail, but the chain stopped before it


def test_loaded_through_the_entry_point(pytester, monkeypatch):
    """Without -p: pytest finds the plugin through the installed pytest11 entry point."""
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    pytester.makepyfile(f"""
        def test_via_entry_point(pulsar_trace):
            pulsar_trace({str(BATCHING)!r}).no_errors().count('type == "SEND"', equals={batch_entries()})
    """)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["plugins:*pulsar-dissect*"])


# ------------------------------------------------------------------------------------ the Trace itself


@pytest.fixture(scope="module")
def batching() -> Trace:
    return assert_trace(BATCHING)


def test_unreadable_capture_raises_capture_error(tmp_path):
    with pytest.raises(CaptureError):
        assert_trace(tmp_path / "missing.pcap")
    (tmp_path / "junk.pcap").write_bytes(b"not a capture at all")
    with pytest.raises(CaptureError):
        assert_trace(tmp_path / "junk.pcap")


def test_latency_keywords(batching):
    batching.latency("send", p50="1s", p99_9=1000, percentile="p99.9", below="1s")
    names = [rule.name for rule, _ in batching.verdicts[-3:]]
    assert names == ["latency SEND p50 < 1s", "latency SEND p99.9 < 1000ms", "latency SEND p99.9 < 1s"]
    with pytest.raises(AssertionError, match=r"^rule latency SEND p50 < 0.001ms failed: SEND p50 is "):
        batching.latency("SEND", p50=0.001)
    with pytest.raises(TypeError):
        batching.latency("SEND", q99="1s")
    with pytest.raises(TypeError):
        batching.latency("SEND", percentile="p99")


def test_every_bound_of_count_is_checked(batching):
    n = batch_entries()
    batching.count('type == "SEND"', at_least=n, at_most=n)
    with pytest.raises(AssertionError, match=rf"<= {n - 1} failed"):
        batching.count('type == "SEND"', at_least=n, at_most=n - 1)
    with pytest.raises(RuleError):
        batching.count('type == "SEND"')


def test_other_rules(batching):
    trace = batching.all_answered(within="1s").no_gaps().no_redeliveries().sequence_contiguous()
    assert trace is batching
    trace.require('type == "ACK"').protocol_version(min=20, max=20).rule("CONNECT before SEND")
    with pytest.raises(AssertionError, match=r"^rule protocol version >= 21 failed: 2 handshake"):
        trace.protocol_version(min=21)
    with pytest.raises(AssertionError, match=r"^rule all-answered within 0.001ms failed: .*\n    frame \d+"):
        trace.all_answered(within=0.001)
