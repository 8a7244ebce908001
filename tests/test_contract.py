"""The JSON Lines contract as a whole: its schema, its problem ids, its times and order, on every shipped capture.

The schema is docs/records.schema.json (draft 2020-12); every id the tool can emit is declared once in the
problem registry and listed in docs/commands/problems.md; every record's time lies within the capture's packet times and
records come in capture order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from corpus import CAPTURES, capture_path, decoded
from dissector.capture.files import open_capture
from dissector.output.jsonl import dumps
from dissector.problems import REGISTRY
from dissector.run import analysed_records

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "records.schema.json").read_text())
CAPTURE_NAMES = sorted(p.name.removesuffix(".gz") for p in CAPTURES.iterdir()
                       if p.name.endswith((".pcap", ".pcapng", ".pcap.gz")))


def test_the_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(SCHEMA)


def _errors(records) -> list[str]:
    validator = Draft202012Validator(SCHEMA)
    out = []
    for rec in records:
        for error in validator.iter_errors(json.loads(dumps(rec))):
            out.append(f"{rec.get('index', rec['type'])}: {error.message} at {list(error.absolute_path)}")
    return out


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_every_record_of_the_corpus_matches_the_schema(name):
    assert _errors(decoded(name)) == []


@pytest.mark.parametrize("name", ["02_batching_props_keys.pcap", "03_compression_lz4.pcap", "11_errors.pcap"])
def test_records_with_payloads_match_the_schema(name):
    path = CAPTURES / name
    assert _errors(analysed_records(path, payload_bytes=True)) == []


def test_the_schema_rejects_what_breaks_the_contract():
    validator = Draft202012Validator(SCHEMA)
    good = next(r for r in decoded("01_basic_nonbatched.pcap") if r.get("answers"))
    assert validator.is_valid(good)
    for broken in ({k: v for k, v in good.items() if k != "request_type"},  # a response without its request type
                   {**good, "direction": "sideways"},
                   {**good, "expert": [{"id": "Not An Id", "severity": "error", "message": "x"}]},
                   {k: v for k, v in good.items() if k != "command"}):
        assert not validator.is_valid(broken)


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_times_lie_within_the_capture_and_records_come_in_capture_order(name):
    with open_capture(CAPTURES / name if (CAPTURES / name).exists() else CAPTURES / (name + ".gz")) as reader:
        times = [p.timestamp for p in reader]
    first, last = min(times), max(times)
    recs = decoded(name)
    assert [r for r in recs if not first <= r["time"] <= last] == []
    packets = [r["packet"] for r in recs]
    assert packets == sorted(packets)


def test_unfinished_chunked_message_is_reported_when_its_connection_ends(tmp_path):
    """Two of three chunks, then the connection closes: the event comes with its connection's end, at a real
    time (it used to come after everything, at time 0.0)."""
    import framebuild as fb

    body = bytes(range(256)) * 30
    sends = [fb.payload_frame("SEND", dict(producer_id=0, sequence_id=0, is_chunk=True),
                              fb.metadata(producer_name="p", uuid="u-7", chunk_id=i, num_chunks_from_msg=3,
                                          total_chunk_msg_size=len(body)), body[i * 2560:(i + 1) * 2560])
             for i in range(2)]
    path = tmp_path / "two-of-three.pcap"
    fb.tcp_pcap(path, [("c", fb.simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1)),
                       ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p"))]
                + [("c", s) for s in sends], t0=1_700_000_000.0)
    with open_capture(path) as reader:
        times = [p.timestamp for p in reader]
    recs = list(analysed_records(path))
    unfinished = [i for i, r in enumerate(recs) if r["type"] == "UNFINISHED_CHUNKS"]
    assert len(unfinished) == 1
    event = recs[unfinished[0]]
    assert times[0] <= event["time"] <= times[-1]
    chunk_frames = [r["index"] for r in recs if r["type"] == "SEND"]
    assert event["details"] == {"uuid": "u-7", "chunks": chunk_frames}
    closed = [i for i, r in enumerate(recs) if r["type"] == "CONNECTION_CLOSED"]
    assert closed and [r["type"] for r in recs[closed[0]:]] == ["CONNECTION_CLOSED", "UNANSWERED", "UNANSWERED",
                                                                "UNFINISHED_CHUNKS"]


def _documented_ids() -> set[str]:
    """The ids the reference of `problems` lists (docs/commands/problems.md, its PROBLEM IDS section)."""
    text = (ROOT / "docs" / "commands" / "problems.md").read_text()
    section = text[text.index("## PROBLEM IDS"):]
    section = section[: section.index("\n## ", 5)] if "\n## " in section[5:] else section
    return set(re.findall(r"`([A-Za-z_]+(?:\.[a-z_]+)?)`", section))


def test_every_registered_id_is_documented():
    documented = _documented_ids()
    undocumented = sorted(pid for pid in REGISTRY if pid not in documented and not pid.startswith("toy."))
    assert undocumented == []


def test_every_id_the_corpus_emits_is_registered():
    seen = set()
    for name in CAPTURE_NAMES:
        for rec in decoded(name):
            seen.update(e["id"] for e in rec.get("expert", ()))
            if "index" not in rec:
                seen.add(rec["type"])
    assert seen and seen <= set(REGISTRY)


def test_every_id_the_compiled_core_can_emit_is_registered():
    """The core (Rust) names its problem ids by enums (crates/engine/src/problems.rs, one problems.rs per
    protocol folder), the registry (Python) declares them with severity and text: one place must not name an id
    the other does not know. The ids are read off the enums' `Variant => "id"` lines; `finding!` takes only a
    variant, so no other id can reach a finding."""
    engine = ROOT / "crates" / "engine" / "src"
    emitted = set()
    for source in engine.rglob("problems.rs"):
        emitted |= set(re.findall(r'^\s*[A-Z][A-Za-z0-9]* => "([a-z_]+\.[a-z_]+)",?$', source.read_text(), re.M))
    assert len(emitted) >= 20  # the scan found the enums
    assert sorted(pid for pid in emitted if pid not in REGISTRY) == []
    bare = [source.name for source in engine.rglob("*.rs") if re.search(r'finding!\(\s*"', source.read_text())]
    assert bare == []  # no id is a bare string any more


def _json_lines(path, options=None, **style) -> list[bytes]:
    """The capture's records through the core's JSON sink (events through jsonl.dumps), one line each."""
    from dissector.run import analysed_json_lines

    got = b"".join(item if type(item) is bytes else dumps(item) + b"\n"
                   for item in analysed_json_lines(path, options, **style))
    return got.splitlines()


@pytest.mark.parametrize("name", CAPTURE_NAMES)
@pytest.mark.parametrize("style", [{}, {"summary": True}, {"payload_bytes": True}])
@pytest.mark.parametrize("detect", [False, True])
def test_the_cores_two_record_sinks_give_the_same_records(name, style, detect):
    """The one description of a frame's record (crates/engine/src/records.rs) written to its two sinks: the dicts
    (analysed_records) through jsonl.dumps are the JSON sink's lines (--json) byte for byte, and those lines
    match the schema."""
    from dissector.options import Options

    path = capture_path(name)
    options = Options(detect=detect)
    from_dicts = [dumps(rec) for rec in analysed_records(path, options, **style)]
    lines = _json_lines(path, options, **style)
    assert lines == from_dicts
    assert any(b'"index":' in line for line in lines)
    validator = Draft202012Validator(SCHEMA)
    assert [e.message for line in lines for e in validator.iter_errors(json.loads(line))] == []


GOLDEN = ROOT / "tests" / "golden"


@pytest.mark.parametrize("name", sorted(p.name.removesuffix(".jsonl.gz") for p in GOLDEN.glob("*.jsonl.gz")))
def test_the_json_sink_gives_the_golden_records(name):
    """The JSON sink against the records of the pure-Python decoder the core replaced (the dict sink is held
    to them in test_core_differential.py)."""
    import gzip

    golden = gzip.decompress((GOLDEN / f"{name}.jsonl.gz").read_bytes()).splitlines()
    got = _json_lines(ROOT / "captures" / name)
    assert len(got) == len(golden)
    for new, old in zip(got, golden):
        assert json.loads(new) == json.loads(old)


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_records_of_frames_held_in_python_are_the_cores_records(name):
    """output.records.record of the Annotated frames analysed_events gives (read back from Python into the
    core: model.Frame, its Decoded and PayloadSection, the notes and findings) is the record the core makes
    of the frames it decoded itself."""
    from dissector.output.records import record
    from dissector.run import analysed_events

    path = capture_path(name)
    for style in ({}, {"summary": True}, {"payload_bytes": True}):
        from_python = [dumps(record(item, **style)) for item in analysed_events(path)]
        assert from_python == [dumps(rec) for rec in analysed_records(path, **style)]


def _a_frame_with_notes(**notes):
    """A MESSAGE frame with the analysis' notes, and a finding of the analysis added."""
    from dissector.model import Annotated
    from dissector.problems import Finding
    from dissector.run import analysed_events

    item = next(i for i in analysed_events(capture_path("01_basic_nonbatched.pcap"))
                if type(i) is Annotated and i.frame.pdu.body is not None and i.notes)
    found = Finding("request.duplicate_id", {"key": {"request_id": 7}, "type": "PRODUCER"})
    return Annotated(item.frame, {**item.notes, **notes}, item.findings + [found])


@pytest.mark.parametrize("summary", [False, True])
def test_notes_are_merged_over_the_record_as_dict_update_merges(summary):
    """A note under a key the record already holds takes that key's place (Python's dict.update); both sinks."""
    from dissector import _core as pulsar_dissect_core
    from dissector import protocols
    from dissector.model import Annotated
    from dissector.output.records import record
    from dissector.problems import severity_and_message

    item = _a_frame_with_notes(size=-1, problems=["a", "b", "c"], messages="replaced", checksum=None,
                               zzz_new={"x": [1, 2.5]})
    bare = record(Annotated(item.frame, {}, item.findings), summary=summary)
    expected = dict(bare)
    expected.update(item.notes)
    got = record(item, summary=summary)
    assert list(got) == list(expected)
    assert got == expected
    assert got["size"] == -1 and list(got)[10] == "size" and got["problems"] == ["a", "b", "c"]
    json_records = pulsar_dissect_core.FrameRecords(severity_and_message, protocols.get, summary, False, json=True)
    assert json_records(item) == dumps(expected) + b"\n"


def test_findings_texts_come_from_the_registry():
    """expert and problems hold the registry's texts (dissector/problems.py), the same finding asked for
    twice (the core remembers them) giving the same text."""
    from dissector.output.records import record
    from dissector.problems import NOTE, expert_record

    item = _a_frame_with_notes()
    findings = item.frame.pdu.findings + item.findings
    for _ in range(2):
        rec = record(item)
        assert rec["expert"] == [expert_record(f) for f in findings]
        assert rec["problems"] == [e["message"] for e in rec["expert"] if e["severity"] != NOTE]
