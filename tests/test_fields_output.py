"""`-T fields -e NAME ... -E KEY=VALUE` (dissector/output/fields.py), as tshark's: one line per record, a column per
field. Every column is judged against the `--json` record of the same line (read here with a resolver of its
own, not the tool's), never against strings written in the test; wire strings that hold tabs, line feeds,
backslashes and terminal controls keep every record on one line and every field in its column."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import framebuild as fb
from corpus import capture_path

CLI = [sys.executable, "-m", "dissector.cli.main"]
FIELDS = ["index", "type", "time", "latency_ms", "producer.name", "topic", "command.sequence_id",
          "messages.sequence_id", "messages.properties", "checksum", "broker_entry_metadata", "severity"]
# what no field output may hold raw: C0 controls (the tab between columns and the line feed after a line
# aside), DEL, C1, bidi controls, line separators
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=300)


def json_records(*args) -> list[dict]:
    done = run(*args, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def values_at(rec, path: list[str]) -> list:
    """The values at ``path``: a list along the way stands for each of its elements."""
    if path == ["topic"] and "topic" not in rec:  # derived: the command's topic, else the producer's or consumer's
        for owner in (rec.get("command"), rec.get("producer"), rec.get("consumer")):
            if isinstance(owner, dict) and owner.get("topic") is not None:
                return [owner["topic"]]
        return []
    values = [rec]
    for part in path:
        values = [v[part] for v in values if isinstance(v, dict) and part in v]
        values = [x for v in values for x in (v if isinstance(v, list) else [v])]
    return values


def expected(rec: dict, name: str, aggregator: str = ",") -> str:
    values = [v for v in values_at(rec, name.split(".")) if v is not None]
    return aggregator.join(v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), ensure_ascii=False)
                           for v in values)


_ESCAPES = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|.)")
_SHORT = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v", "\\": "\\", '"': '"', "'": "'"}


def unescape(cell: str) -> str:
    def one(match: re.Match) -> str:
        code = match.group(1)
        return chr(int(code[1:], 16)) if len(code) > 1 else _SHORT[code]
    return _ESCAPES.sub(one, cell)


def test_each_column_is_the_json_record_s_value_with_a_header_line():
    capture = capture_path("02_batching_props_keys.pcap")
    records = json_records(capture)
    args = [arg for name in FIELDS for arg in ("-e", name)]
    done = run(capture, "-T", "fields", *args, "-E", "header=y")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines.pop() == ""  # every line ends with a line feed
    assert lines[0] == "\t".join(FIELDS)
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) == len(records) and {len(row) for row in rows} == {len(FIELDS)}
    filled = set()
    for rec, row in zip(records, rows):
        for name, cell in zip(FIELDS, row):
            assert unescape(cell) == expected(rec, name), (rec.get("index"), name)
            if cell:
                filled.add(name)
    assert filled >= set(FIELDS) - {"broker_entry_metadata"}  # the capture exercised every column
    assert any("," in row[FIELDS.index("messages.sequence_id")] for row in rows)  # a batch's values, joined


def test_the_filter_the_count_and_the_settings_apply_as_to_json():
    capture = capture_path("02_batching_props_keys.pcap")
    names = ["index", "type", "messages.sequence_id", "producer.name"]
    selection = ["-Y", 'type == "SEND" or type == "SEND_RECEIPT"', "-c", "5"]
    records = json_records(capture, *selection)
    assert len([r for r in records if "index" in r]) == 5
    done = run(capture, *selection, *[a for n in names for a in ("-e", n)], "-E", "separator=;", "-E", "quote=d",
               "-E", "aggregator=/s", "-E", "occurrence=a")
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert len(rows) == len(records)
    for rec, line in zip(records, rows):
        cells = line.split(";")
        assert all(c.startswith('"') and c.endswith('"') for c in cells)
        assert [unescape(c[1:-1]) for c in cells] == [expected(rec, n, " ") for n in names]
    for occurrence, pick in (("f", 0), ("l", -1)):
        done = run(capture, *selection, "-e", "messages.sequence_id", "-E", f"occurrence={occurrence}")
        want = [values_at(rec, ["messages", "sequence_id"]) for rec in records]
        assert done.stdout.splitlines() == [str(v[pick]) if v else "" for v in want]


HOSTILE = "a\tb\nc\\d\re\x1b[31mf\x07g\u202eh\u2028i,j\"k'l\x7fm"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    path = tmp_path_factory.mktemp("fields") / "hostile.pcap"
    fb.tcp_pcap(path, [("c", fb.simple_frame("PRODUCER", topic="persistent://t/n/" + HOSTILE, producer_id=1,
                                             request_id=1, producer_name=HOSTILE)),
                       ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name=HOSTILE)),
                       ("c", fb.send_frame(b"x", producer_id=1))])
    return path


@pytest.mark.parametrize("settings, separator, quote", [
    ([], "\t", ""), (["-E", "separator=,"], ",", ""), (["-E", "separator=,", "-E", "quote=d"], ",", '"'),
    (["-E", "quote=s", "-E", "separator=/s"], " ", "'"),
], ids=["tabs", "commas", "quoted", "single-quoted"])
def test_wire_strings_cannot_break_a_line_or_a_column(hostile, settings, separator, quote):
    names = ["index", "command.producer_name", "topic", "producer.name", "type"]
    records = json_records(hostile)
    assert any(HOSTILE in expected(rec, "producer.name") for rec in records)  # the capture carries it
    done = run(hostile, *[a for n in names for a in ("-e", n)], *settings)
    assert done.returncode == 0, done.stderr
    assert not FORBIDDEN.search(done.stdout)
    lines = done.stdout.split("\n")
    assert lines.pop() == "" and len(lines) == len(records)
    for rec, line in zip(records, lines):
        if quote:  # a quoted column: the separator may stand inside it, the quote only escaped
            cells = re.findall(rf"{quote}((?:[^{quote}\\]|\\.)*){quote}", line)
            assert separator.join(f"{quote}{c}{quote}" for c in cells) == line
        else:
            cells = line.split(separator)
        assert [unescape(c) for c in cells] == [expected(rec, n) for n in names]


@pytest.mark.parametrize("args, closest", [
    (["-e", "typ"], "type"), (["-T", "fields", "-e", "type", "-e", "latency"], "latency_ms"),
    (["-e", "prodcer.name"], "producer.name"), (["-e", "type", "-E", "headr=y"], "header"),
])
def test_an_unknown_field_or_setting_is_one_line_naming_the_closest_and_exit_2(args, closest):
    done = run(capture_path("01_basic_nonbatched.pcap"), *args)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and closest in re.split(r"[\s?;,()']+", done.stderr)


@pytest.mark.parametrize("args", [["-T", "fields"], ["--json", "-e", "type"], ["-T", "json", "-e", "type"],
                                  ["-T", "fields", "--json"], ["-T", "text", "--json"], ["-T", "text", "-e", "type"],
                                  ["-E", "header=y"], ["-e", "type", "-E", "quote=x"], ["-e", "type", "-x"],
                                  ["-e", "type", "-E", "separator=ab"]])
def test_fields_without_a_field_or_beside_another_format_is_refused(args):
    done = run(capture_path("01_basic_nonbatched.pcap"), *args)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1


def test_a_message_s_payload_is_a_field_without_asking_for_payloads():
    capture = capture_path("01_basic_nonbatched.pcap")
    records = json_records(capture, "--payload")
    done = run(capture, "-e", "messages.payload_text")
    assert [unescape(line) for line in done.stdout.splitlines()] == [expected(rec, "messages.payload_text")
                                                                     for rec in records]
    assert any(done.stdout.splitlines())


def test_the_fields_are_the_contract_s_keys_as_the_filter_names_them():
    """One vocabulary: every key the schema gives a frame or an event record is a field of -e and of -Y."""
    from pathlib import Path

    from dissector.output.expr import KNOWN_FIELDS, compile_expr

    schema = json.loads((Path(__file__).resolve().parent.parent / "docs" / "records.schema.json").read_text())
    keys = {key for kind in ("frame", "event") for key in schema["$defs"][kind]["properties"]}
    assert keys <= KNOWN_FIELDS, keys - KNOWN_FIELDS
    capture = capture_path("tubemq/tubemq_consumer_broker.pcap")
    records = [r for r in json_records(capture) if "serial" in r]
    assert records
    done = run(capture, "-e", "serial", "-e", "rpc.method_name", "-Y", "serial == 1")
    assert done.returncode == 0, done.stderr
    wanted = [r for r in records if r["serial"] == 1]
    assert wanted and done.stdout.splitlines() == [f"1\t{expected(r, 'rpc.method_name')}" for r in wanted]
    assert compile_expr("serial == 1")(wanted[0])


def test_t_json_is_json_and_t_text_the_timeline():
    capture = capture_path("01_basic_nonbatched.pcap")
    assert run(capture, "-T", "json").stdout == run(capture, "--json").stdout != ""
    assert run(capture, "-T", "text").stdout == run(capture).stdout != ""
