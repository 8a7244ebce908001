"""`pulsar-dissect check`: rules over recorded captures, verdicts with evidence, exit codes, --json, JUnit XML.

Expectations come from the corpus manifests (their tshark-derived frame census and notes), from frame and
packet numbers worked out here from the pcap bytes (a small TCP reader and the protobuf library, not the
dissector), from how the damaged copies were made, and from what the official client API reported in live
recordings; never from our own output.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import struct
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corpus import capture_path, manifest
from dissector.check.rules import EVIDENCE
from dissector.cli.main import app
from pcapgen import copy_pcap

runner = CliRunner()


def check(*args):
    return runner.invoke(app, ["check", *map(str, args)])


def check_json(*args) -> tuple[int, list[dict]]:
    res = check(*args, "--json")
    return res.exit_code, [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def census(stem: str) -> Counter:
    c = Counter()
    for stream in manifest(stem)["derived_frame_census"]["streams"]:
        for side in ("client_to_broker", "broker_to_client"):
            c.update(stream[side]["by_type"])
    return c


# ------------------------------------------------------------------------- the wire, read without the dissector
def pcap_records(path: Path) -> list[tuple[int, int, bytes]]:
    """(packet number, file offset of the packet data, data) of a little/big-endian classic Ethernet pcap."""
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    endian = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",
              b"\xa1\xb2\x3c\x4d": ">"}[data[:4]]
    assert struct.unpack_from(endian + "I", data, 20)[0] == 1, "these tests read Ethernet captures"
    out, pos, n = [], 24, 0
    while pos + 16 <= len(data):
        incl = struct.unpack_from(endian + "I", data, pos + 8)[0]
        n += 1
        out.append((n, pos + 16, data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return out


def tcp_of(data: bytes):
    """(src, dst, seq, flags, payload offset in data, payload) of an Ethernet/IPv4/TCP packet, else None."""
    if struct.unpack_from(">H", data, 12)[0] != 0x0800 or data[23] != 6:
        return None
    ihl = (data[14] & 0x0F) * 4
    total = struct.unpack_from(">H", data, 16)[0]
    tcp = 14 + ihl
    sport, dport, seq = struct.unpack_from(">HHI", data, tcp)
    off = tcp + (data[tcp + 12] >> 4) * 4
    src = (bytes(data[26:30]), sport)
    dst = (bytes(data[30:34]), dport)
    return src, dst, seq, data[tcp + 13], off, bytes(data[off:14 + total])


def wire_frames(path: Path) -> list[dict]:
    """The Pulsar frames of an intact capture in the order they complete: index (1-based), packet, type, the
    parsed BaseCommand, and for a frame in one packet the offset of its last byte in the file."""
    from pulsar_pb.PulsarApi_pb2 import BaseCommand  # the protobuf library parses

    streams: dict = {}
    frames = []
    for number, offset, data in pcap_records(path):
        seg = tcp_of(data)
        if seg is None:
            continue
        src, dst, seq, flags, poff, payload = seg
        st = streams.setdefault((src, dst), {"next": None, "buf": b"", "consumed": 0, "segs": []})
        if flags & 0x02:  # SYN
            st["next"] = (seq + 1) & 0xFFFFFFFF
            continue
        if not payload:
            continue
        if st["next"] is None:
            st["next"] = seq
        skip = (st["next"] - seq) & 0xFFFFFFFF
        assert skip < 1 << 31, "this reader expects intact captures"
        if skip >= len(payload):
            continue  # a retransmission
        start = st["consumed"] + len(st["buf"])  # stream offset of this segment's new bytes
        st["segs"].append((start, len(payload) - skip, number, offset + poff + skip))
        st["buf"] += payload[skip:]
        st["next"] = (st["next"] + len(payload) - skip) & 0xFFFFFFFF
        while len(st["buf"]) >= 4 and len(st["buf"]) >= 4 + struct.unpack_from(">I", st["buf"])[0]:
            end = 4 + struct.unpack_from(">I", st["buf"])[0]
            cmd_size = struct.unpack_from(">I", st["buf"], 4)[0]
            cmd = BaseCommand.FromString(st["buf"][8:8 + cmd_size])
            last = st["consumed"] + end - 1
            seg_start, _, seg_packet, seg_file = next(x for x in st["segs"] if x[0] <= last < x[0] + x[1])
            assert seg_packet == number
            frames.append({"index": len(frames) + 1, "packet": number, "type": BaseCommand.Type.Name(cmd.type),
                           "cmd": cmd, "last_byte": seg_file + last - seg_start})
            st["buf"] = st["buf"][end:]
            st["consumed"] += end
            st["segs"] = [x for x in st["segs"] if x[0] + x[1] > st["consumed"]]
    return frames


def test_wire_reader_agrees_with_the_manifest_census():
    """The independent reader above counts what the manifest's tshark census counts."""
    for stem in ("01_basic_nonbatched", "11_errors", "11b_send_error_too_big"):
        got = Counter(f["type"] for f in wire_frames(capture_path(f"{stem}.pcap")))
        assert got == census(stem), stem


def server_errors(stem: str) -> Counter:
    """ServerError names and counts from a manifest's notes (e.g. '15 SEND_ERROR frames: ... (NotAllowedError)',
    'only one ERROR frame on the wire (... UnknownError ...)'), checked against its census."""
    found = Counter()
    words = {"one": 1}
    for note in manifest(stem)["notes"]:
        m = re.search(r"\b(\d+|one) (SEND_ERROR|ERROR) frames?\b.*?\b([A-Z][A-Za-z]*Error)\b", note)
        if m:
            found[m[3]] += int(words.get(m[1], m[1]))
    c = census(stem)
    assert sum(found.values()) == c.get("ERROR", 0) + c.get("SEND_ERROR", 0) > 0, (stem, found)
    return found


# ------------------------------------------------------------------------------------------------ no-errors
@pytest.mark.parametrize("stem", ["11_errors", "11b_send_error_too_big"])
def test_no_errors_fails_on_the_error_captures(tmp_path, stem):
    expected = server_errors(stem)
    total = sum(expected.values())
    path = capture_path(f"{stem}.pcap")
    code, objs = check_json(path, "--rule", "no-errors")
    assert code == 1
    (obj,) = objs
    assert obj["rule"] == "no-errors" and obj["kind"] == "no-errors" and obj["passed"] is False
    assert obj["capture"] == str(path)
    assert len(obj["evidence"]) == min(total, EVIDENCE) and obj["more"] == total - min(total, EVIDENCE)
    assert str(total) in obj["detail"]
    # The evidence is the first error frames, numbered as on the wire.
    wire = [f for f in wire_frames(path) if f["type"] in ("ERROR", "SEND_ERROR")]
    assert [(e["index"], e["packet"], e["type"]) for e in obj["evidence"]] == \
        [(f["index"], f["packet"], f["type"]) for f in wire[:EVIDENCE]]
    for e in obj["evidence"]:
        assert e["line"].startswith(f"frame {e['index']}, packet {e['packet']}: ")
        assert any(name in e["line"] for name in expected)
    # Only the manifest's ServerErrors count: naming them fails, naming another passes.
    for name, count in expected.items():
        code, (one,) = check_json(path, "--rules", _yaml(tmp_path, f"  - no-errors: {{errors: [{name}]}}"))
        assert code == 1 and one["passed"] is False
        assert len(one["evidence"]) + one["more"] == count
    code, (other,) = check_json(path, "--rules", _yaml(tmp_path, "  - no-errors: {errors: [TopicNotFound, ProducerBusy]}"))
    assert code == 0 and other["passed"] is True


def _yaml(directory: Path, body: str) -> Path:
    """A rule file with ``body`` under ``rules:``."""
    path = directory / f"r{len(list(directory.glob('r*.yaml')))}.yaml"
    path.write_text("rules:\n" + body + "\n")
    return path


def test_evidence_is_capped_in_the_text_output():
    stem = "11b_send_error_too_big"
    total = sum(server_errors(stem).values())
    assert total > EVIDENCE  # the manifest's 15 SEND_ERRORs exceed the cap
    res = check(capture_path(f"{stem}.pcap"), "--rule", "no-errors")
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines[0].endswith(": FAIL")
    assert any(line.strip().startswith("FAIL no-errors") for line in lines)
    evidence = [line for line in lines if re.match(r"\s+frame \d+, packet \d+: ", line)]
    assert len(evidence) == EVIDENCE
    assert lines[-1].strip() == f"... and {total - EVIDENCE} more"


# ------------------------------------------------------------------------------------- passing rule sets
@pytest.mark.parametrize("stem", ["01_basic_nonbatched", "02_batching_props_keys"])
def test_broad_rule_set_passes_on_clean_captures(stem):
    m, c = manifest(stem), census(stem)
    sends = c["SEND"]
    rules = ["no-errors", "checksums-valid", "all-answered", "no-gaps", "no-redeliveries", "sequence-contiguous",
             "no-problems", "all-acked", "CONNECT before PRODUCER before SEND", "CONNECT before SUBSCRIBE before FLOW",
             f'count(type == "SEND") == {sends}', f'count(type == "MESSAGE") == {c["MESSAGE"]}',
             f'count(type == "ACK") == {c["ACK"]}',
             f'count(type == "SEND" and topic == {json.dumps(m["topic"])}) == {sends}',
             'require type == "CLOSE_CONSUMER"',
             'forbid type in {"ERROR", "SEND_ERROR", "GAP"}']
    args = [x for r in rules for x in ("--rule", r)]
    code, objs = check_json(capture_path(f"{stem}.pcap"), *args)
    assert [o["rule"] for o in objs] == rules
    assert [o["passed"] for o in objs] == [True] * len(rules), [o for o in objs if not o["passed"]]
    assert code == 0
    # ... and each count fails when it is off by one (the counts are really checked)
    for kind in ("SEND", "MESSAGE", "ACK"):
        for wrong in (c[kind] - 1, c[kind] + 1):
            code, (obj,) = check_json(capture_path(f"{stem}.pcap"), "--rule", f'count(type == "{kind}") == {wrong}')
            assert code == 1 and obj["passed"] is False


def test_rules_see_per_message_fields():
    """forbid / require / count use the expression language of -Y over the JSON contract, where SEND and MESSAGE
    carry `messages` (README: `-Y 'messages.properties.tenant == "a"'`): a rule over messages.* must see them."""
    m = manifest("02_batching_props_keys")
    sent = m["sent"]
    kinds = Counter(x["properties"]["kind"] for x in sent if "properties" in x and "kind" in x["properties"])
    assert kinds
    kind = next(iter(kinds))
    path = capture_path("02_batching_props_keys.pcap")
    code, objs = check_json(path, "--rule", f'require messages.properties.kind == "{kind}"',
                            "--rule", "count(messages.payload_size) >= 1",
                            "--rule", 'forbid messages.properties.kind == "no-such-kind"')
    assert [o["passed"] for o in objs] == [True, True, True], [o["detail"] for o in objs]
    assert code == 0


# ------------------------------------------------------------------------------------------ damaged copies
def test_flipped_payload_byte_fails_checksums_valid(tmp_path):
    src = capture_path("01_basic_nonbatched.pcap")
    sends = [f for f in wire_frames(src) if f["type"] == "SEND" and f["last_byte"] is not None]
    assert len(sends) == census("01_basic_nonbatched")["SEND"]
    victim = sends[len(sends) // 2]
    data = bytearray(src.read_bytes())
    data[victim["last_byte"]] ^= 0xFF  # the last payload byte of that SEND: the CRC32C no longer matches
    damaged = tmp_path / "flipped.pcap"
    damaged.write_bytes(bytes(data))
    code, (obj,) = check_json(damaged, "--rule", "checksums-valid")
    assert code == 1 and obj["passed"] is False and obj["more"] == 0
    assert [(e["index"], e["packet"], e["type"]) for e in obj["evidence"]] == \
        [(victim["index"], victim["packet"], "SEND")]
    res = check(damaged, "--rule", "checksums-valid")
    assert res.exit_code == 1 and f"frame {victim['index']}, packet {victim['packet']}: " in res.stdout
    # the intact file passes, and the damage is not a gap
    assert check(src, "--rule", "checksums-valid").exit_code == 0
    assert check(damaged, "--rule", "no-gaps").exit_code == 0


def test_removed_segment_fails_no_gaps(tmp_path):
    src = capture_path("02_batching_props_keys.pcap")
    wire = wire_frames(src)
    # drop a packet that carries the middle of a SEND (client to broker), counted on the wire
    big = [f for f in wire if f["type"] == "SEND"]
    lost = big[len(big) // 2]["packet"]
    seen = [0]

    def keep(_linktype, _data):
        seen[0] += 1
        return seen[0] != lost

    damaged = tmp_path / "gap.pcap"
    kept = copy_pcap(src, damaged, keep=keep)
    assert kept == len(pcap_records(src)) - 1
    code, (obj,) = check_json(damaged, "--rule", "no-gaps")
    assert code == 1 and obj["passed"] is False
    gaps = [e for e in obj["evidence"] if e["type"] == "GAP"]
    assert len(gaps) == 1 and gaps[0]["index"] is None
    # the hole is noticed at or after the packet that followed the lost one (renumbered: `lost`)
    assert all(e["packet"] >= lost for e in obj["evidence"])
    assert gaps[0]["line"].startswith(f"packet {gaps[0]['packet']}: ")
    control = tmp_path / "copy.pcap"
    copy_pcap(src, control)
    assert check(control, "--rule", "no-gaps").exit_code == 0


# ------------------------------------------------------------------------------------------------ exit codes
BASIC = capture_path("01_basic_nonbatched.pcap")
ERRORS = capture_path("11_errors.pcap")


def test_exit_codes(tmp_path):
    assert check(BASIC, "--rule", "no-errors").exit_code == 0
    assert check(ERRORS, "--rule", "no-errors").exit_code == 1
    # one failing rule among passing ones fails the run
    assert check(ERRORS, "--rule", "no-gaps", "--rule", "no-errors").exit_code == 1
    missing = check(tmp_path / "nope.pcap", "--rule", "no-errors")
    assert missing.exit_code == 2 and "nope.pcap" in missing.stderr
    text = tmp_path / "notes.pcap"
    text.write_text("not a capture at all\n")
    res = check(text, "--rule", "no-errors")
    assert res.exit_code == 2 and "notes.pcap" in res.stderr
    # an unreadable capture beside readable ones: 2, and the readable ones still get their verdicts
    res = check(BASIC, text, "--rule", "no-errors")
    assert res.exit_code == 2 and f"{BASIC}: PASS" in res.stdout
    assert check(tmp_path / "*.pcapx", "--rule", "no-errors").exit_code == 2  # a glob matching nothing
    res = check(BASIC)
    assert res.exit_code == 2 and "no rules" in res.stderr
    res = check(BASIC, "--rules", tmp_path / "missing.yaml")
    assert res.exit_code == 2 and "missing.yaml" in res.stderr


@pytest.mark.parametrize("rule, fragment", [
    ("frobnicate", "not a rule"),
    ("latency SEND p99 < soon", "soon"),
    ('count(type == ) == 3', "column"),
    ('forbid type == "SEND" and bogus', "bogus"),
    ('require (type == "SEND"', "column"),
    ("count(type) == lots", "not a rule"),
])
def test_bad_rule_text_exits_2(rule, fragment):
    res = check(BASIC, "--rule", rule)
    assert res.exit_code == 2, res.output
    assert fragment in res.stderr and res.stdout == ""  # rules are checked before any capture is read


def _bad_yaml(tmp_path, items: list[str], bad: int) -> tuple[Path, int]:
    """A rule file whose ``bad``-th item is broken; returns it and the 1-based line of that item."""
    text = "# rules for CI\nrules:\n" + "".join(f"  - {item}\n" for item in items)
    line = text.splitlines().index(f"  - {items[bad]}") + 1
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return path, line


@pytest.mark.parametrize("items, bad, fragment", [
    (["no-errors", "frobnicate", "no-gaps"], 1, "not a rule"),
    (["no-errors", "no-gaps", "latency: {type: SEND, below: soon}"], 2, "soon"),
    (["no-errors", "forbid: 'type == bogus'", "no-gaps"], 1, "bogus"),
    (["no-errors", "count: {expr: 'type == \"SEND\"', roughly: 3}", "no-gaps"], 1, "count"),
    (["no-errors", "sparkle: {x: 1}"], 1, "sparkle"),
    (["no-errors", "latency: {percentile: p99, below: 20ms}"], 1, "type"),
    (["all-acked", "no-problems: {severity: catastrophic}"], 1, "severity"),
    (["no-errors", "no-gaps", "require: 'type == \"SEND\" and'"], 2, "column"),
])
def test_bad_rule_in_yaml_names_its_line(tmp_path, items, bad, fragment):
    path, line = _bad_yaml(tmp_path, items, bad)
    res = check(BASIC, "--rules", path)
    assert res.exit_code == 2, res.output
    assert f"{path}:{line}:" in res.stderr
    assert fragment in res.stderr
    assert res.stdout == ""


def test_invalid_yaml_names_its_line(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - no-errors\n  - no-gaps\n  - [unclosed, list\n")
    res = check(BASIC, "--rules", path)
    assert res.exit_code == 2 and re.search(rf"{re.escape(str(path))}:(4|5):", res.stderr), res.stderr
    for text in ("rules: no-errors\n", "other: [no-errors]\n"):
        path.write_text(text)
        res = check(BASIC, "--rules", path)
        assert res.exit_code == 2 and f"{path}:1:" in res.stderr, (text, res.stderr)
    path.write_text("")
    res = check(BASIC, "--rules", path)
    assert res.exit_code == 2 and "empty" in res.stderr


# ----------------------------------------------------------------------------- the YAML form of every kind
def test_yaml_rule_file_with_every_kind(tmp_path):
    stem = "01_basic_nonbatched"
    m, c = manifest(stem), census(stem)
    sends = c["SEND"]
    good = f"""\
rules:
  - no-errors
  - no-errors: {{errors: [TopicNotFound, ProducerBusy]}}
  - checksums-valid
  - all-answered
  - all-answered: {{within: 10s}}
  - no-gaps
  - no-redeliveries
  - sequence-contiguous
  - no-problems
  - no-problems: {{severity: warning}}
  - no-problems: {{ids: [flow.overrun, request.duplicate_id]}}
  - all-acked
  - latency: {{type: SEND, percentile: p99, below: 5s}}
  - latency: {{type: lookup, below: 5000ms}}
  - count: {{expr: 'type == "SEND" and topic == {json.dumps(m["topic"])}', equals: {sends}}}
  - count: {{expr: 'type == "SEND_RECEIPT"', at_least: {c["SEND_RECEIPT"]}}}
  - count: {{expr: 'type == "ACK"', at_most: {c["ACK"]}}}
  - order: [CONNECT, PRODUCER, SEND]
  - protocol-version: {{min: 1, max: 1000}}
  - forbid: 'type == "SEND_ERROR" or latency_ms > 10000'
  - require: 'type == "SEND" and producer.name == {json.dumps(m["producer"]["producer_name"])}'
  - rule: 'latency LOOKUP p50 <= 5s'
    name: lookups are fast
  - name: sends counted
    rule: 'count(type == "SEND") == {sends}'
"""
    path = tmp_path / "good.yaml"
    path.write_text(good)
    code, objs = check_json(BASIC, "--rules", path)
    assert len(objs) == good.count("\n  - ")
    assert all(o["passed"] for o in objs), [o for o in objs if not o["passed"]]
    assert code == 0
    names = [o["rule"] for o in objs]
    assert "lookups are fast" in names and "sends counted" in names
    kinds = Counter(o["kind"] for o in objs)
    for kind in ("no-errors", "all-answered", "no-problems", "all-acked", "latency", "count", "order",
                 "protocol-version", "forbid", "require"):
        assert kinds[kind] >= 1, kind
    # the same kinds, each with parameters that make it fail on the same capture
    wire = wire_frames(BASIC)
    versions = [f["cmd"].connect.protocol_version if f["type"] == "CONNECT" else f["cmd"].connected.protocol_version
                for f in wire if f["type"] in ("CONNECT", "CONNECTED")]
    assert len(versions) == c["CONNECT"] + c["CONNECTED"]
    bad = f"""\
rules:
  - all-answered: {{within: 1us}}
  - latency: {{type: SEND, percentile: p50, below: 1us}}
  - count: {{expr: 'type == "SEND"', equals: {sends + 1}}}
  - count: {{expr: 'type == "SEND"', at_least: {sends + 1}}}
  - count: {{expr: 'type == "SEND"', at_most: {sends - 1}}}
  - order: [SEND, PRODUCER]
  - protocol-version: {{max: {min(versions) - 1}}}
  - protocol-version: {{min: {max(versions) + 1}}}
  - forbid: 'type == "SEND"'
  - require: 'type == "PONG" and type == "PING"'
  - latency: {{type: SEEK, below: 1s}}
  - name: no lookups
    rule: 'count(type == "LOOKUP") == 0'
"""
    path = tmp_path / "bad.yaml"
    path.write_text(bad)
    code, objs = check_json(BASIC, "--rules", path)
    assert code == 1
    assert len(objs) == bad.count("\n  - ")
    assert [o["rule"] for o in objs if o["passed"]] == []
    by_name = {o["rule"]: o for o in objs}
    assert len(by_name["no lookups"]["evidence"]) == min(c["LOOKUP"], EVIDENCE)
    forbid = next(o for o in objs if o["kind"] == "forbid")
    assert len(forbid["evidence"]) + forbid["more"] == sends
    sends_on_wire = [(f["index"], f["packet"]) for f in wire_frames(BASIC) if f["type"] == "SEND"]
    assert [(e["index"], e["packet"]) for e in forbid["evidence"]] == sends_on_wire[:EVIDENCE]
    order = objs[5]
    assert order["kind"] == "order"
    assert [e["type"] for e in order["evidence"]] == ["PRODUCER"]  # the PRODUCER came before any SEND
    for high in objs[6:8]:
        assert high["kind"] == "protocol-version"
        assert sorted(e["type"] for e in high["evidence"]) == sorted(["CONNECT"] * c["CONNECT"] +
                                                                      ["CONNECTED"] * c["CONNECTED"])
    answered = objs[0]
    assert answered["kind"] == "all-answered"
    requests = sum(c[t] for t in ("SEND_RECEIPT", "CONNECTED", "LOOKUP_RESPONSE", "PARTITIONED_METADATA_RESPONSE",
                                  "PRODUCER_SUCCESS", "SUCCESS"))
    assert len(answered["evidence"]) + answered["more"] == requests  # every answer was slower than 1 us


# ----------------------------------------------------------------------------------------------- --json
def test_json_one_object_per_capture_and_rule(tmp_path):
    rules = ["no-errors", "no-gaps", 'count(type == "CONNECT") >= 1']
    args = [x for r in rules for x in ("--rule", r)]
    code, objs = check_json(BASIC, ERRORS, *args)
    assert code == 1
    assert [(o["capture"], o["rule"]) for o in objs] == [(str(p), r) for p in (BASIC, ERRORS) for r in rules]
    for o in objs:
        assert set(o) == {"capture", "rule", "kind", "passed", "detail", "evidence", "more"}
        assert isinstance(o["passed"], bool) and isinstance(o["detail"], str) and isinstance(o["more"], int)
        for e in o["evidence"]:
            assert set(e) == {"index", "packet", "type", "line"}
    failed = [(o["capture"], o["rule"]) for o in objs if not o["passed"]]
    assert failed == [(str(ERRORS), "no-errors")]
    connects = census("11_errors")["CONNECT"]
    counted = next(o for o in objs if o["capture"] == str(ERRORS) and o["kind"] == "count")
    assert str(connects) in counted["detail"] and counted["evidence"] == []  # passing: no evidence


# ---------------------------------------------------------------------------------- several captures at once
def _corpus_dir(tmp_path) -> Path:
    d = tmp_path / "traces"
    d.mkdir()
    shutil.copy(BASIC, d / "a_basic.pcap")
    shutil.copy(ERRORS, d / "b_errors.pcap")
    shutil.copy(capture_path("11b_send_error_too_big.pcap"), d / "c_too_big.pcap.gz")
    (d / "README.txt").write_text("not a capture")
    (d / "notes.json").write_text("{}")
    return d


def test_directory_and_glob(tmp_path):
    d = _corpus_dir(tmp_path)
    code, objs = check_json(d, "--rule", "no-errors")
    assert code == 1
    assert [(Path(o["capture"]).name, o["passed"]) for o in objs] == \
        [("a_basic.pcap", True), ("b_errors.pcap", False), ("c_too_big.pcap.gz", False)]
    code, objs = check_json(f"{d}/*.pcap", "--rule", "no-errors")
    assert [Path(o["capture"]).name for o in objs] == ["a_basic.pcap", "b_errors.pcap"]
    code, objs = check_json(f"{d}/a_*.pcap", "--rule", "no-errors")
    assert code == 0 and [Path(o["capture"]).name for o in objs] == ["a_basic.pcap"]
    res = check(d, "--rule", "no-errors")
    assert [line for line in res.stdout.splitlines() if not line.startswith(" ")] == [
        f"{d / 'a_basic.pcap'}: PASS", f"{d / 'b_errors.pcap'}: FAIL", f"{d / 'c_too_big.pcap.gz'}: FAIL"]


# ------------------------------------------------------------------------------------------------ JUnit XML
def test_junit_xml_structure(tmp_path):
    d = _corpus_dir(tmp_path)
    out = tmp_path / "check.xml"
    rules = ["no-errors", "no-gaps", "latency SEND p99 < 10s"]
    res = check(d, *[x for r in rules for x in ("--rule", r)], "--junit", out)
    assert res.exit_code == 1
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    captures = [d / "a_basic.pcap", d / "b_errors.pcap", d / "c_too_big.pcap.gz"]
    assert [s.get("name") for s in suites] == [str(p) for p in captures]
    errors = {"a_basic.pcap": 0, "b_errors.pcap": sum(server_errors("11_errors").values()),
              "c_too_big.pcap.gz": sum(server_errors("11b_send_error_too_big").values())}
    total_failures = 0
    for suite, path in zip(suites, captures):
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == rules
        assert all(c.get("classname") for c in cases)
        failures = [c.find("failure") for c in cases if c.find("failure") is not None]
        assert int(suite.get("tests")) == len(cases) == len(rules)
        assert int(suite.get("failures")) == len(failures)
        assert int(suite.get("errors", "0")) == 0 and int(suite.get("skipped", "0")) == 0
        n = errors[path.name]
        assert len(failures) == (1 if n else 0)
        total_failures += len(failures)
        if n:
            (failure,) = failures
            assert cases[0].find("failure") is failure  # the no-errors case
            assert failure.get("message") and str(n) in failure.get("message")
            text = failure.text.splitlines()
            frames = [t for t in text if re.match(r"frame \d+, packet \d+: ", t)]
            assert len(frames) == min(n, EVIDENCE)
            if n > EVIDENCE:
                assert text[-1] == f"... and {n - EVIDENCE} more"
            wire = [f for f in wire_frames(path) if f["type"] in ("ERROR", "SEND_ERROR")]
            assert [tuple(map(int, re.match(r"frame (\d+), packet (\d+)", t).groups())) for t in frames] == \
                [(f["index"], f["packet"]) for f in wire[:EVIDENCE]]
    assert int(root.get("tests")) == len(captures) * len(rules)
    assert int(root.get("failures")) == total_failures == 2


def test_junit_written_even_when_a_capture_is_unreadable(tmp_path):
    bad = tmp_path / "broken.pcap"
    bad.write_bytes(b"\x00" * 10)
    out = tmp_path / "j.xml"
    res = check(BASIC, bad, "--rule", "no-errors", "--junit", out)
    assert res.exit_code == 2
    root = ET.parse(out).getroot()
    assert [s.get("name") for s in root.findall("testsuite")] == [str(BASIC)]


# ----------------------------------------------------------------------------------- live: all-acked
ACK_MESSAGES = EVIDENCE + 2  # more than the evidence cap


def _ack_scenario(lazy: bool):
    """A producer sends ACK_MESSAGES non-batched messages; consumer 'diligent' receives and acks each; with
    ``lazy``, consumer 'lazy' (its own subscription) receives them all and never acks."""
    def scenario(rec, _work):
        from test_fresh_recordings import RECEIVE_MS, _close_all

        topic = f"persistent://public/default/check-acks-{int(lazy)}"
        c = rec.client()
        producer = diligent = idle = None
        try:
            diligent = c.subscribe(topic, "diligent-sub", consumer_name="diligent")
            if lazy:
                idle = c.subscribe(topic, "lazy-sub", consumer_name="lazy")
            producer = c.create_producer(topic, producer_name="check-producer", batching_enabled=False)
            for i in range(ACK_MESSAGES):
                producer.send(f"message {i}".encode())
            got = {"diligent": 0, "lazy": 0}
            for _ in range(ACK_MESSAGES):
                diligent.acknowledge(diligent.receive(RECEIVE_MS))
                got["diligent"] += 1
                if idle is not None:
                    idle.receive(RECEIVE_MS)
                    got["lazy"] += 1
            time.sleep(0.5)  # past the client's ack grouping window: the acks are on the wire
        finally:
            _close_all(producer, diligent, idle, c)
        return got
    return scenario


@pytest.fixture(scope="module")
def ack_traces(tmp_path_factory):
    from test_fresh_recordings import _record

    return {lazy: _record(tmp_path_factory, f"check_acks_{int(lazy)}", _ack_scenario(lazy), payload_bytes=False)
            for lazy in (False, True)}


def test_all_acked_passes_when_the_consumer_acks(ack_traces):
    live = ack_traces[False]
    assert live.truth["diligent"] == ACK_MESSAGES
    code, (obj,) = check_json(live.rec.pcap, "--port", live.rec.port, "--rule", "all-acked")
    assert code == 0 and obj["passed"] is True, obj
    assert str(live.truth["diligent"]) in obj["detail"]


def test_all_acked_fails_on_the_consumer_that_never_acks(ack_traces):
    live = ack_traces[True]
    never = live.truth["lazy"]
    assert never == live.truth["diligent"] == ACK_MESSAGES
    code, (obj,) = check_json(live.rec.pcap, "--port", live.rec.port, "--rule", "all-acked")
    assert code == 1 and obj["passed"] is False
    # the lazy consumer's MESSAGE frames: the messages its API received, each at least once (the broker may
    # deliver one again, e.g. while the consumer closes: the rule counts frames)
    lazy = [f for f in live.frames if f["type"] == "MESSAGE" and (f.get("consumer") or {}).get("name") == "lazy"]
    ids = {(f["command"]["message_id"]["ledgerId"], f["command"]["message_id"]["entryId"]) for f in lazy}
    assert len(ids) == never <= len(lazy)
    assert len(obj["evidence"]) == EVIDENCE and obj["more"] == len(lazy) - EVIDENCE
    by_index = live.by_index()
    for e in obj["evidence"]:
        frame = by_index[e["index"]]
        assert e["type"] == "MESSAGE" and frame["packet"] == e["packet"]
        assert frame["consumer"]["name"] == "lazy"  # never the consumer that acked
    assert f"{len(lazy)} of {never + len(lazy)}" in obj["detail"]
    # without --port the broker's port is not Pulsar's: nothing decoded, so nothing unacknowledged either
    res = check(live.rec.pcap, "--rule", "all-acked", "--rule", 'require type == "MESSAGE"')
    assert res.exit_code == 1 and "no record matches" in res.stdout
