"""Tests of the command line (`pulsar-dissect dissect`): exit codes, JSON contract, filters, escaping."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import framebuild as fb
from corpus import capture_path, decoded
from dissector.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
BASIC = CAPTURES / "01_basic_nonbatched.pcap"
MANIFEST = json.loads((CAPTURES / "01_basic_nonbatched.json").read_text())
SCRIPT = Path(sys.executable).parent / "pulsar-dissect"
FRAME_KEYS = {"index", "time", "src", "dst", "direction", "type", "command", "size", "problems"}
PAYLOAD_KEYS = {"checksum", "broker_entry_metadata", "metadata", "messages"}

runner = CliRunner()


def dissect(*args, env=None):
    return runner.invoke(app, ["dissect", *map(str, args)], env=env)


def json_lines(*args) -> list[dict]:
    res = dissect(*args, "--json")
    assert res.exit_code == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def frames(records: list[dict]) -> list[dict]:
    return [r for r in records if "index" in r]


def census() -> collections.Counter:
    c = collections.Counter()
    for stream in MANIFEST["derived_frame_census"]["streams"]:
        for side in ("client_to_broker", "broker_to_client"):
            c.update(stream[side]["by_type"])
    return c


@pytest.fixture(scope="module")
def basic_records() -> list[dict]:
    return json_lines(BASIC, "--payload")


# --------------------------------------------------------------------------------------------- exit codes
def test_console_script_missing_file(tmp_path):
    res = subprocess.run([str(SCRIPT), str(tmp_path / "nope.pcap")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "nope.pcap" in res.stderr and "no such file" in res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_console_script_on_corpus_capture():
    res = subprocess.run([str(SCRIPT), str(BASIC), "--plain"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count(" SEND ") == 10


def test_not_a_capture(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello, this is not a capture\n")
    res = dissect(p)
    assert res.exit_code == 2
    assert "not a pcap or pcapng" in res.stderr
    assert "Traceback" not in res.stderr + res.stdout


def test_empty_file(tmp_path):
    p = tmp_path / "empty.pcap"
    p.write_bytes(b"")
    res = dissect(p)
    assert res.exit_code == 2 and res.stderr


def test_truncated_global_header(tmp_path):
    p = tmp_path / "short.pcap"
    p.write_bytes(BASIC.read_bytes()[:10])
    res = dissect(p)
    assert res.exit_code == 2
    assert "truncated" in res.stderr and "24" in res.stderr


def test_directory_instead_of_file(tmp_path):
    res = dissect(tmp_path)
    assert res.exit_code == 2 and res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("name", ["01_basic_nonbatched.pcap", "01_basic_nonbatched.pcapng",
                                  "01_basic_nonbatched.any.pcap"])
def test_corpus_capture_exit_0(name):
    res = dissect(CAPTURES / name, "--plain")
    assert res.exit_code == 0, res.stderr
    assert "SEND_RECEIPT" in res.stdout


def _conversation(send_checksum=True):
    return [
        ("c", fb.simple_frame("CONNECT", client_version="cli-test", protocol_version=21)),
        ("b", fb.simple_frame("CONNECTED", server_version="broker", protocol_version=21)),
        ("c", fb.simple_frame("PRODUCER", topic="persistent://t/n/strict", producer_id=1, request_id=1,
                              producer_name="strict-producer")),
        ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="strict-producer")),
        ("c", fb.send_frame(b"body", producer_id=1, sequence_id=0, checksum=send_checksum,
                            md=fb.metadata(producer_name="strict-producer"))),
        ("b", fb.simple_frame("SEND_RECEIPT", producer_id=1, sequence_id=0,
                              message_id={"ledgerId": 1, "entryId": 0})),
        ("c", fb.simple_frame("CLOSE_PRODUCER", producer_id=1, request_id=2)),
        ("b", fb.simple_frame("SUCCESS", request_id=2)),
    ]


def test_strict_bad_checksum_exits_1(tmp_path):
    p = tmp_path / "badcrc.pcap"
    fb.tcp_pcap(p, _conversation(send_checksum="bad"))
    assert dissect(p, "--plain").exit_code == 0
    res = dissect(p, "--strict", "--plain")
    assert res.exit_code == 1
    assert "problem" in res.stderr
    # What the problem is: by its stable id in the JSON records, not by the wording of the timeline.
    res = dissect(p, "--strict", "--json")
    assert res.exit_code == 1
    recs = [json.loads(x) for x in res.stdout.splitlines()]
    flagged = {r["type"]: [e["id"] for e in r["expert"]] for r in frames(recs) if r.get("expert")}
    assert flagged == {"SEND": ["checksum.invalid"]}
    (send,) = [r for r in frames(recs) if r["type"] == "SEND"]
    assert send["checksum"] == "invalid"


def test_strict_clean_capture_exits_0(tmp_path):
    p = tmp_path / "clean.pcap"
    fb.tcp_pcap(p, _conversation(), segment_size=[5, 100, 13])
    res = dissect(p, "--strict", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    recs = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["type"] for r in frames(recs)] == ["CONNECT", "CONNECTED", "PRODUCER", "PRODUCER_SUCCESS", "SEND",
                                                 "SEND_RECEIPT", "CLOSE_PRODUCER", "SUCCESS"]
    assert all(r["problems"] == [] for r in frames(recs))


def test_strict_corpus_capture_exits_0():
    res = dissect(BASIC, "--strict", "--plain")
    assert res.exit_code == 0, res.stdout[-2000:] + res.stderr


# ------------------------------------------------------------------------------------------ JSON contract
def test_json_contract_keys(basic_records):
    frs = frames(basic_records)
    assert len(frs) == sum(census().values())
    for r in frs:
        assert FRAME_KEYS <= r.keys(), r.keys()
        assert isinstance(r["problems"], list) and isinstance(r["command"], dict)
        assert r["direction"] in ("to_broker", "to_client")
        if r["type"] in ("SEND", "MESSAGE"):
            assert PAYLOAD_KEYS <= r.keys()
            for m in r["messages"]:
                assert {"payload_size", "payload_sha256"} <= m.keys()
    for r in basic_records:
        if "index" not in r:
            assert "type" in r and "message" in r
    assert [r["index"] for r in frs] == list(range(1, len(frs) + 1))


def test_json_matches_manifest(basic_records):
    frs = frames(basic_records)
    sends = [r for r in frs if r["type"] == "SEND"]
    msgs = [r for r in frs if r["type"] == "MESSAGE"]
    assert [s["messages"][0]["payload_sha256"] for s in sends] == [m["payload_sha256"] for m in MANIFEST["sent"]]
    assert [s["messages"][0]["payload_text"] for s in sends] == [m["payload_utf8"] for m in MANIFEST["sent"]]
    assert [s["messages"][0]["properties"] for s in sends] == [m["properties"] for m in MANIFEST["sent"]]
    assert all(s["checksum"] == "valid" for s in sends)
    assert all(s["direction"] == "to_broker" and s["dst"].endswith(":6650") for s in sends)
    assert [m["messages"][0]["payload_sha256"] for m in msgs] == [r["payload_sha256"] for r in MANIFEST["received"]]
    assert all(m["checksum"] == "absent" for m in msgs)  # manifest: pulsar-lite MESSAGEs carry no checksum
    assert all(m["broker_entry_metadata"] is None for m in msgs)
    assert [(m["messages"][0]["message_id"]["ledger_id"], m["messages"][0]["message_id"]["entry_id"]) for m in msgs] \
        == [(r["message_id"]["ledger_id"], r["message_id"]["entry_id"]) for r in MANIFEST["received"]]
    assert all(s["metadata"]["producer_name"] == MANIFEST["producer"]["producer_name"] for s in sends)


def test_payload_flag_adds_payload_text():
    without = frames(json_lines(BASIC, "--type", "SEND"))
    assert all("payload_text" not in m for r in without for m in r["messages"])
    res = dissect(BASIC, "--type", "SEND", "--payload", "--plain")
    assert "basic message #7" in res.stdout


# ------------------------------------------------------------------------------------------------ filters
def _types(records) -> collections.Counter:
    return collections.Counter(r["type"] for r in frames(records))


def test_type_filter():
    c = census()
    assert _types(json_lines(BASIC, "--type", "SEND")) == {"SEND": c["SEND"]}
    assert c["SEND"] == len(MANIFEST["sent"]) == 10
    assert _types(json_lines(BASIC, "--type", "MESSAGE")) == {"MESSAGE": len(MANIFEST["received"])}
    assert _types(json_lines(BASIC, "--type", "send,message")) == {"SEND": 10, "MESSAGE": 10}
    assert _types(json_lines(BASIC, "-t", "ACK", "-t", "FLOW")) == {"ACK": MANIFEST["acks"]["count"], "FLOW": 1}
    unknown = dissect(BASIC, "--type", "NO_SUCH_TYPE", "--json")  # an unknown type is an error, not silence
    assert unknown.exit_code == 2 and unknown.stdout == ""


def test_conn_filter():
    all_frames = _types(json_lines(BASIC, "--conn", "1"))
    assert all_frames == census()
    assert frames(json_lines(BASIC, "--conn", "2")) == []


def test_topic_filter():
    topic = MANIFEST["topic"]
    got = _types(json_lines(BASIC, "--topic", topic))
    assert got["SEND"] == 10 and got["MESSAGE"] == 10 and got["ACK"] == 10
    assert got["PRODUCER"] == 1 and got["SUBSCRIBE"] == 1 and got["LOOKUP"] == 2
    assert not {"CONNECT", "CONNECTED", "PING", "PONG"} & got.keys()
    assert frames(json_lines(BASIC, "--topic", topic + "-other")) == []


def test_producer_filter():
    name = MANIFEST["producer"]["producer_name"]
    by_name = _types(json_lines(BASIC, "--producer", name))
    assert by_name["SEND"] == 10 and by_name["SEND_RECEIPT"] == 10 and by_name["PRODUCER"] == 1
    # The answers to the producer's requests belong to its story too.
    assert by_name["PRODUCER_SUCCESS"] == 1 and by_name["SUCCESS"] == 1 and by_name["CLOSE_PRODUCER"] == 1
    assert not {"MESSAGE", "ACK", "SUBSCRIBE", "FLOW", "CONNECT"} & by_name.keys()
    assert _types(json_lines(BASIC, "--producer", "0")) == by_name  # by producer id
    assert frames(json_lines(BASIC, "--producer", "nobody")) == []


def test_consumer_filter():
    name = MANIFEST["consumer"]["consumer_name"]
    got = _types(json_lines(BASIC, "--consumer", name))
    assert got["MESSAGE"] == 10 and got["ACK"] == 10 and got["SUBSCRIBE"] == 1 and got["FLOW"] == 1
    assert got["SUCCESS"] == 2  # answering its SUBSCRIBE and CLOSE_CONSUMER
    assert not {"SEND", "SEND_RECEIPT", "PRODUCER", "CONNECT"} & got.keys()


@pytest.mark.parametrize("n", [1, 5, 1000])
def test_max_frames(n):
    got = frames(json_lines(BASIC, "--max-frames", n))
    assert len(got) == min(n, sum(census().values()))
    assert [r["index"] for r in got] == list(range(1, len(got) + 1))


@pytest.mark.parametrize("n", ["0", "-3"])
def test_max_frames_below_one_is_refused(n):
    res = dissect(BASIC, "--max-frames", n)
    assert res.exit_code == 2 and res.stdout == ""


def test_max_frames_counts_filtered_frames():
    got = frames(json_lines(BASIC, "--type", "MESSAGE", "--max-frames", 3))
    assert [r["type"] for r in got] == ["MESSAGE"] * 3


# ----------------------------------------------------------------------------------------------- escaping
EVIL_TOPIC = "persistent://public/default/evil\x1b[31mRED\x1b]0;title\x07[bold red]x[/]"
EVIL_PRODUCER = "prod\x1b[2J\x9b31m[bold red]x[/]"
EVIL_PROPERTY = "[bold red]x[/]\x1b]0;title\x07\x1b[31mRED"
EVIL_SEQUENCES = ("\x1b[31mRED", "\x1b]0;", "\x07", "\x1b[2J", "\x9b")


@pytest.fixture(scope="module")
def evil_capture(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("evil") / "evil.pcap"
    md = fb.metadata(producer_name=EVIL_PRODUCER, properties=[{"key": "k\x1b[31mRED", "value": EVIL_PROPERTY}],
                     partition_key=EVIL_PROPERTY)
    items = [
        ("c", fb.simple_frame("CONNECT", client_version="evil\x1b]0;title\x07client")),
        ("b", fb.simple_frame("CONNECTED", server_version="[bold red]x[/]")),
        ("c", fb.simple_frame("PRODUCER", topic=EVIL_TOPIC, producer_id=1, request_id=1,
                              producer_name=EVIL_PRODUCER)),
        ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name=EVIL_PRODUCER)),
        ("c", fb.send_frame(EVIL_PROPERTY.encode(), producer_id=1, sequence_id=0, md=md)),
        ("b", fb.simple_frame("SEND_ERROR", producer_id=1, sequence_id=0, error=0,
                              message="boom \x1b[31mRED\x1b]0;title\x07 [bold red]x[/]")),
        ("c", fb.simple_frame("SUBSCRIBE", topic=EVIL_TOPIC, subscription="[bold red]x[/]\x1b[31mRED",
                              consumer_id=2, request_id=2, subType=0, consumer_name=EVIL_PRODUCER)),
        ("b", fb.simple_frame("ERROR", request_id=2, error=0, message="\x1b]0;title\x07[bold red]x[/]")),
        ("c", fb.send_frame(b"x", producer_id=1, sequence_id=1, checksum="bad", md=md)),
    ]
    fb.tcp_pcap(p, items)
    return p


FORCE = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "NO_COLOR": None, "COLUMNS": "100"}


@pytest.mark.parametrize("args, env", [
    ([], None),
    ([], FORCE),
    (["--details", "--payload"], FORCE),
    (["--details", "--payload"], None),
    (["--no-color", "--details"], FORCE),
], ids=["default", "forced-colour", "forced-details-payload", "details-payload", "no-color"])
def test_wire_strings_cannot_inject_escape_sequences(evil_capture, args, env):
    res = dissect(evil_capture, *args, env=env)
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    if env is FORCE and "--no-color" not in args:
        assert "\x1b[" in out  # colours really were on
    for seq in EVIL_SEQUENCES:
        assert seq not in out, (seq, out)
    if env is not FORCE or "--no-color" in args:
        assert "\x1b" not in out
    assert "[bold red]x[/]" in out  # rich markup from the wire is shown literally
    assert "evil\\x1b[31mRED" in out  # ... and the escapes as visible text


def test_plain_output_has_no_escape_bytes(evil_capture):
    for extra in ([], ["--details", "--payload"]):
        res = dissect(evil_capture, "--plain", *extra, env=FORCE)
        assert res.exit_code == 0
        assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\x9b" not in res.stdout
        assert "[bold red]x[/]" in res.stdout


def test_plain_corpus_output_has_no_escape_bytes():
    res = dissect(BASIC, "--plain", "--details", env=FORCE)
    assert res.exit_code == 0 and "\x1b" not in res.stdout


def test_json_output_has_no_raw_escape_bytes(evil_capture):
    res = dissect(evil_capture, "--json", "--payload")
    assert res.exit_code == 0
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout
    assert not any("\x80" <= ch <= "\x9f" for ch in res.stdout)  # C1 controls (8-bit CSI) escaped too
    recs = [json.loads(x) for x in res.stdout.splitlines()]
    producer = next(r for r in frames(recs) if r["type"] == "PRODUCER")
    assert producer["command"]["topic"] == EVIL_TOPIC  # JSON keeps the exact value, escaped by JSON


def test_console_script_forced_colour_escaping(evil_capture):
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    res = subprocess.run([str(SCRIPT), str(evil_capture), "--details"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert res.returncode == 0
    assert "\x1b[" in res.stdout
    for seq in EVIL_SEQUENCES:
        assert seq not in res.stdout
    assert "[bold red]x[/]" in res.stdout


# ------------------------------------------------------------------------------------------ chunked messages
def _chunked_capture(path, declared: int, data: bytes):
    blob = fb.compress(fb.ZSTD, data)
    k = len(blob) // 3
    parts = [blob[:k], blob[k:2 * k], blob[2 * k:]]
    items = [("c", fb.simple_frame("PRODUCER", topic="persistent://a/b/chunks", producer_id=1, request_id=1,
                                   producer_name="p")),
             ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p"))]
    for i, part in enumerate(parts):
        md = fb.metadata(producer_name="p", uuid="u-1", chunk_id=i, num_chunks_from_msg=3,
                         total_chunk_msg_size=len(blob), compression=fb.ZSTD, uncompressed_size=declared)
        items.append(("c", fb.send_frame(part, md=md, is_chunk=True)))
    fb.tcp_pcap(path, items)


def test_chunked_message_reassembled_in_timeline_and_json(tmp_path):
    data = b"chunked payload " * 400
    p = tmp_path / "chunks.pcap"
    _chunked_capture(p, len(data), data)
    res = dissect(p, "--plain")
    assert f"reassembled 3 chunks {len(data)} bytes" in res.stdout
    recs = frames(json_lines(p))
    last = [r for r in recs if r["type"] == "SEND"][-1]
    import hashlib
    assert last["reassembled"]["payload_sha256"] == hashlib.sha256(data).hexdigest()


def test_chunked_message_not_recovered_is_not_shown_as_none(tmp_path):
    p = tmp_path / "chunks-bad.pcap"
    _chunked_capture(p, 100, b"chunked payload " * 400)  # declared size far too small: not decompressed
    res = dissect(p, "--plain")
    assert "reassembled 3 chunks" in res.stdout
    assert "None" not in res.stdout
    assert "ZSTD" in res.stdout and "uncompressed_size 100" in res.stdout


def _invalid_utf8_producer(topic: bytes) -> bytes:
    """A PRODUCER whose topic (a proto2 string) holds bytes that are not UTF-8, built by hand."""
    length_delimited = 2  # the protobuf wire type of a length-prefixed field

    inner = b"\x0a" + bytes([len(topic)]) + topic + b"\x10\x01\x18\x01"  # topic, producer_id 1, request_id 1
    body = b"\x08\x05" + bytes([(5 << 3) | length_delimited, len(inner)]) + inner
    return fb.raw_frame(body)


def test_strings_that_are_not_utf8_are_shown_escaped_not_crashing(tmp_path):
    p = tmp_path / "latin1.pcap"
    md = fb.metadata(partition_key="k")
    md_raw = md.SerializePartialToString().replace(b"\x32\x01k", b"\x32\x01\xd7")  # partition_key -> 0xd7
    fb.tcp_pcap(p, [("c", _invalid_utf8_producer(b"caf\xe9")),
                    ("c", fb.payload_frame("SEND", {"producer_id": 1, "sequence_id": 0}, md_raw, b"x"))])
    res = dissect(p, "--json")
    assert res.exit_code == 0, res.output
    recs = frames([json.loads(x) for x in res.stdout.splitlines()])
    assert recs[0]["command"]["topic"] == "caf\\xe9"
    assert recs[1]["messages"][0]["partition_key"] == "\\xd7"
    timeline = dissect(p, "--plain")
    assert timeline.exit_code == 0 and "caf\\xe9" in timeline.stdout


def test_strict_means_the_same_in_dissect_and_follow():
    """--strict counts the errors and warnings of the records shown, in every command: a consumer whose request
    got an ERROR fails it in both, a consumer with clean frames passes it in both."""
    cap = str(capture_path("11_errors.pcap"))
    recs = [r for r in decoded("11_errors.pcap") if "index" in r]
    error = next(r for r in recs if r["type"] == "ERROR" and r["problems"])
    bad = next(r for r in recs if r["index"] == error["answers"])["consumer"]["name"]
    names = {r["consumer"]["name"] for r in recs if r.get("consumer", {}).get("name")}
    good = next(n for n in sorted(names) if n != bad and not any(
        r["problems"] for r in recs if r.get("consumer", {}).get("name") == n))
    for command in (["dissect"], ["follow"]):
        assert runner.invoke(app, command + [cap, "--consumer", bad, "--strict", "--json"]).exit_code == 1
        assert runner.invoke(app, command + [cap, "--consumer", good, "--strict", "--json"]).exit_code == 0


def test_any_limit_can_be_set_from_the_command_line(tmp_path):
    cap = str(capture_path("02_batching_props_keys.pcap"))
    res = runner.invoke(app, ["dissect", cap, "--json", "-o", "max_remembered_messages=3"])
    assert res.exit_code == 0
    events = [json.loads(line) for line in res.stdout.splitlines() if '"index"' not in line]
    dropped = [e for e in events if e["type"] == "STATE_DROPPED"]
    assert [e["details"]["option"] for e in dropped] == ["max_remembered_messages"] * 2  # first drop, then total
    assert dropped[0]["details"]["dropped"] == 1 and dropped[1]["details"]["dropped"] > 1
    assert runner.invoke(app, ["dissect", cap, "-o", "no_such_limit=3"]).exit_code == 2
    assert runner.invoke(app, ["dissect", cap, "-o", "max_remembered_messages=many"]).exit_code == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_a_pipe_on_standard_output_is_widened_so_batches_of_lines_do_not_wait_on_the_reader():
    import fcntl

    get_size = getattr(fcntl, "F_GETPIPE_SZ", 1032)
    proc = subprocess.Popen([str(SCRIPT), str(BASIC), "--json"], stdout=subprocess.PIPE)
    out = proc.stdout.read()
    size = fcntl.fcntl(proc.stdout.fileno(), get_size)  # the pipe's size, as the writer left it
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0 and out.count(b'"index"') > 0
    assert size >= 1 << 20 or size == int(Path("/proc/sys/fs/pipe-max-size").read_text())
