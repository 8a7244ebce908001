"""Wire strings reach no terminal raw, in every renderer and every command.

One crafted capture carries hostile text in every string a broker or client can choose (topic, producer and
consumer names, subscription, message properties, the messages of ERROR and SEND_ERROR, the client version):
rich markup (``[/x]`` made ``stats`` crash with MarkupError), terminal escapes (CSI, OSC with BEL), C1
controls, bidi overrides and isolates, the line and paragraph separators, DEL, and bytes that are not UTF-8.
Each renderer must show it escaped (still visible: data is not hidden), never raw, never with a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

import framebuild as fb
import pcapgen
from corpus import capture_path

CLI = [str(Path(sys.executable).parent / "pulsar-dissect")]

# The hostile text: markup, CSI, OSC ended by BEL, C1 (NEL, CSI), bidi override and isolates, separators, DEL;
# @@@@ becomes 4 bytes that are not UTF-8 once the frame is built.
HOSTILE = "[/x][bold red]\x1b[31mRED\x1b]0;title\x07\x85\x9b2J\u202eevil\u2066\u2069\u2028\u2029\x7f@@@@end"
NOT_UTF8 = b"\xff\xfe\xc3("
TOPIC = "persistent://t/n/" + HOSTILE
# What no output may hold raw: C0 controls but tab and newline, DEL, C1, bidi controls, line separators.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SGR = re.compile("\x1b\\[[0-9;]*m")  # the colours rich writes itself
FORCE = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "120"}


def _bad_bytes(frame: bytes) -> bytes:
    assert b"@@@@" in frame
    return frame.replace(b"@@@@", NOT_UTF8)  # same length: every size and length prefix still holds


def _payload(kind: str, fields: dict, md, body: bytes) -> bytes:
    raw = _bad_bytes(md.SerializePartialToString())
    return fb.payload_frame(kind, fields, raw, body)  # the checksum is computed over the bytes as sent


def _items() -> list:
    props = [{"key": "k" + HOSTILE, "value": "v" + HOSTILE}]
    md = fb.metadata(producer_name="p" + HOSTILE, properties=props, partition_key="pk" + HOSTILE)
    md2 = fb.metadata(producer_name="p" + HOSTILE, sequence_id=1, properties=props)
    return [
        ("c", _bad_bytes(fb.simple_frame("CONNECT", client_version="cv" + HOSTILE, protocol_version=21))),
        ("b", _bad_bytes(fb.simple_frame("CONNECTED", server_version="sv" + HOSTILE, protocol_version=21))),
        ("c", _bad_bytes(fb.simple_frame("PRODUCER", topic=TOPIC, producer_id=1, request_id=1,
                                         producer_name="p" + HOSTILE))),
        ("b", _bad_bytes(fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p" + HOSTILE))),
        ("c", _payload("SEND", {"producer_id": 1, "sequence_id": 0}, md, ("body" + HOSTILE).encode())),
        ("b", fb.simple_frame("SEND_RECEIPT", producer_id=1, sequence_id=0, message_id={"ledgerId": 1, "entryId": 0})),
        ("c", _payload("SEND", {"producer_id": 1, "sequence_id": 1}, md2, b"x")),
        ("b", _bad_bytes(fb.simple_frame("SEND_ERROR", producer_id=1, sequence_id=1, error=0,
                                         message="se" + HOSTILE))),
        ("c", _bad_bytes(fb.simple_frame("SUBSCRIBE", topic=TOPIC, subscription="sub" + HOSTILE, consumer_id=2,
                                         request_id=2, subType=0, consumer_name="c" + HOSTILE))),
        ("b", fb.simple_frame("SUCCESS", request_id=2)),
        ("c", fb.simple_frame("FLOW", consumer_id=2, messagePermits=10)),
        ("b", _payload("MESSAGE", {"consumer_id": 2, "message_id": {"ledgerId": 1, "entryId": 0}}, md,
                       ("body" + HOSTILE).encode())),
        ("c", _bad_bytes(fb.simple_frame("SUBSCRIBE", topic=TOPIC, subscription="s2" + HOSTILE, consumer_id=3,
                                         request_id=3, subType=0, consumer_name="c3" + HOSTILE))),
        ("b", _bad_bytes(fb.simple_frame("ERROR", request_id=3, error=0, message="er" + HOSTILE))),
    ]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "hostile.pcap"
    fb.tcp_pcap(path, _items())
    return path


def run(args: list[str], env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    if env is FORCE:
        full.pop("NO_COLOR", None)
    return subprocess.run(CLI + args, capture_output=True, timeout=120, env=full, **kwargs)


def _assert_clean(text: str, coloured: bool = False) -> None:
    """No raw control, separator or bidi character; in colour, only rich's own SGR escapes."""
    assert "\x1b[31mRED" not in text and "\x1b]0;" not in text  # the hostile sequences themselves
    if coloured:
        text = SGR.sub("", text)
    bad = sorted({f"U+{ord(c):04X}" for c in FORBIDDEN.findall(text)})
    assert bad == [], bad


def _assert_visible(text: str) -> None:
    """The hostile text is still there, escaped: markup literally, the escapes as their codes."""
    assert "[/x][bold red]" in text
    assert "\\x1b[31mRED" in text


# (id, arguments with {cap} for the capture, expected exit code, coloured)
TEXT_RUNS = [
    ("timeline-plain", ["{cap}", "--plain"], 0, False),
    ("timeline-terminal", ["{cap}"], 0, True),
    ("timeline-filtered", ["{cap}", "--plain", "-Y", 'type != "PING"'], 0, False),
    ("details-plain", ["{cap}", "-V", "--payload", "--plain"], 0, False),
    ("details-terminal", ["{cap}", "-V", "--payload"], 0, True),
    ("hex-dump", ["{cap}", "-x", "--plain"], 0, False),
    ("absolute-time", ["{cap}", "--absolute-time", "--plain"], 0, False),
    ("stats-plain", ["stats", "{cap}", "--plain"], 0, False),
    ("stats-terminal", ["stats", "{cap}"], 0, True),
    ("follow-producer-plain", ["follow", "{cap}", "--producer", "1@c1", "-V", "--plain"], 0, False),
    ("follow-consumer-terminal", ["follow", "{cap}", "--consumer", "2@c1"], 0, True),
    ("follow-message-plain", ["follow", "{cap}", "--message", "1:0", "--plain"], 0, False),
    ("follow-message-terminal", ["follow", "{cap}", "--message", "1:0"], 0, True),
    ("check-text", ["check", "{cap}", "--rule", "no-errors", "--rule", 'forbid type == "SEND"'], 1, False),
]


@pytest.mark.parametrize("args, code, coloured", [r[1:] for r in TEXT_RUNS], ids=[r[0] for r in TEXT_RUNS])
def test_text_renderers_show_wire_strings_escaped(hostile, args, code, coloured):
    res = run([a.format(cap=hostile) for a in args], FORCE if coloured else None)
    out, err = res.stdout.decode("utf-8"), res.stderr.decode("utf-8")  # valid UTF-8, whatever the wire held
    assert res.returncode == code, err
    assert "Traceback" not in err
    if coloured:
        assert "\x1b[" in out  # the colours were really on
    _assert_clean(out, coloured)
    _assert_clean(err)
    _assert_visible(out)
    assert "\\xff\\xfe" in out  # the bytes that are not UTF-8, as hex escapes


def test_the_list_of_what_a_filter_could_have_matched_is_escaped_too(hostile):
    res = run([str(hostile), "--producer", "no-such-producer"])
    err = res.stderr.decode("utf-8")
    assert res.returncode == 0 and "Traceback" not in err
    _assert_clean(err)
    assert "[/x][bold red]\\x1b[31m" in err


JSON_RUNS = [
    ("dissect-json", ["{cap}", "--json", "--payload"], 0),
    ("dissect-json-filtered", ["{cap}", "--json", "-Y", 'type != "PING"'], 0),
    ("follow-json", ["follow", "{cap}", "--producer", "1@c1", "--json"], 0),
    ("follow-message-json", ["follow", "{cap}", "--message", "1:0", "--json"], 0),
    ("stats-json", ["stats", "{cap}", "--json"], 0),
    ("check-json", ["check", "{cap}", "--rule", 'forbid type == "SEND"', "--json"], 1),
]


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@pytest.mark.parametrize("args, code", [r[1:] for r in JSON_RUNS], ids=[r[0] for r in JSON_RUNS])
def test_json_escapes_separators_bidi_controls_and_del(hostile, args, code):
    """JSON allows U+2028/2029, bidi controls and DEL raw; they are escaped as \\uXXXX, so a line is a record
    for str.splitlines too, and the exact value is still there once parsed."""
    res = run([a.format(cap=hostile) for a in args])
    assert res.returncode == code and b"Traceback" not in res.stderr
    text = res.stdout.decode("utf-8")
    _assert_clean(text)
    if "check" not in args:  # check's evidence is timeline text: escaped before JSON sees it
        for escaped in ("\\u2028", "\\u2029", "\\u202e", "\\u2066", "\\u2069", "\\u007f", "\\u0085"):
            assert escaped in text, escaped
    lines = text.splitlines()
    assert len(lines) == text.count("\n") and lines
    records = [json.loads(line) for line in lines]
    found = "\n".join(s for rec in records for s in _strings(rec))
    assert "[/x][bold red]" in found
    assert "\x1b[31mRED\x1b]0;title\x07\x85\x9b2J\u202eevil\u2066\u2069\u2028\u2029\x7f" in found \
        or "\\x1b[31mRED" in found  # the exact value (records), or as the timeline shows it (check's evidence)


def test_fields_keep_each_record_on_its_line_and_each_value_in_its_column(hostile):
    """-T fields: every string a peer chooses, escaped (still visible), a record a line, a field a column."""
    names = ["index", "type", "topic", "producer.name", "consumer.name", "consumer.subscription", "command.message",
             "command.client_version", "command.server_version", "metadata.partition_key", "messages.properties",
             "messages.payload_text"]
    records = run([str(hostile), "--json"]).stdout.decode("utf-8").splitlines()
    res = run([str(hostile), "-T", "fields", *[a for name in names for a in ("-e", name)]])
    assert res.returncode == 0 and b"Traceback" not in res.stderr
    out = res.stdout.decode("utf-8")
    _assert_clean(out)
    _assert_visible(out)
    assert "\\\\xff\\\\xfe" in out  # the record's escape of bytes that are not UTF-8, its backslash escaped
    lines = out.split("\n")
    assert lines.pop() == "" and len(lines) == len(records)
    assert {line.count("\t") for line in lines} == {len(names) - 1}


def test_the_cores_json_lines_and_pythons_serializer_agree_on_hostile_records(hostile):
    """The core's JSON sink (--json) and jsonl.dumps of the same records as dicts: byte for byte."""
    from dissector.options import Options
    from dissector.output.jsonl import dumps
    from dissector.run import analysed_json_lines, analysed_records

    for style in ({}, {"payload_bytes": True}):
        core = b"".join(item if type(item) is bytes else dumps(item) + b"\n"
                        for item in analysed_json_lines(hostile, Options(), **style)).splitlines()
        python = [dumps(rec) for rec in analysed_records(hostile, Options(), **style)]
        assert core == python
        assert any(b"\\u2028" in line and b"\\u202e" in line and b"\\u007f" in line for line in core)


def test_junit_xml_holds_no_control_characters_and_parses(hostile, tmp_path):
    junit = tmp_path / "check.xml"
    res = run(["check", str(hostile), "--rule", "no-errors", "--rule", 'forbid type == "SEND"', "--junit",
               str(junit)])
    assert res.returncode == 1 and b"Traceback" not in res.stderr
    text = junit.read_text(encoding="utf-8")
    _assert_clean(text.replace("\n", " "))
    ET.fromstring(text.encode())  # well-formed: no character XML 1.0 refuses
    assert "\\x1b[31mRED" in text and "[/x][bold red]" in text


def test_plots_take_no_tex_from_names(hostile, tmp_path):
    """matplotlib reads text between two $ as TeX and raises on what it cannot parse: a capture named so (its
    name is the plot's title) once made stats --plot crash."""
    named = tmp_path / "$\\foo{[b]$ \x1b[31m.pcap"
    shutil.copy(hostile, named)
    for suffix in ("png", "svg"):
        plot = tmp_path / f"latency.{suffix}"
        res = run(["stats", str(named), "--plot", str(plot), "--plain"])
        assert res.returncode == 0, res.stderr.decode()
        assert b"Traceback" not in res.stderr and plot.stat().st_size > 1000


@pytest.mark.parametrize("env", [None, FORCE], ids=["plain", "terminal"])
def test_live_shows_wire_strings_escaped(hostile, monkeypatch, env):
    """live: the timeline's renderer, fed packets as they come (here from the crafted capture)."""
    import signal

    import dissector.capture.live as live
    from dissector.capture.files import open_capture
    from dissector.cli.main import app

    class Source:
        def packets(self, stop):
            with open_capture(hostile) as reader:
                for packet in reader:
                    yield packet
                    yield None

        def poll_stats(self):
            return type("Stats", (), {"received": 0, "kernel_dropped": 0, "duplicates": 0})()

        def close(self):
            pass

    monkeypatch.setattr(live, "open_live", lambda engine, interface, capture: Source())
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        res = CliRunner().invoke(app, ["live", "-V"], env=env)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert res.exit_code == 0, res.output
    _assert_clean(res.stdout, coloured=env is FORCE)
    _assert_visible(res.stdout)


# ------------------------------------------------------------------------------------------------ time
def _packets_of(path: Path) -> list[bytes]:
    with open(path, "rb") as f:
        _hdr, endian, _link = pcapgen.read_pcap_header(f)
        return [data for _h, data in pcapgen.iter_pcap_records(f, endian)]


@pytest.fixture(scope="module")
def conversation(tmp_path_factory) -> list[bytes]:
    path = tmp_path_factory.mktemp("times") / "base.pcap"
    fb.tcp_pcap(path, [("c", fb.simple_frame("PRODUCER", topic="persistent://t/n/x", producer_id=1, request_id=1,
                                             producer_name="p")),
                       ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p"))])
    return _packets_of(path)


def _pcapng_units(path: Path, packets: list[bytes], units: list[int], tsoffset: int | None = None) -> None:
    """A pcapng whose packets have these raw timestamps (microseconds), with an interface's tsoffset."""
    blocks = [pcapgen.shb(), pcapgen.idb(1, 0, None, tsoffset, None)]
    for t, data in zip(units, packets):
        body = struct.pack("<IIIII", 0, (t >> 32) & 0xFFFFFFFF, t & 0xFFFFFFFF, len(data), len(data))
        blocks.append(pcapgen.block(6, body + data))
    path.write_bytes(b"".join(blocks))


@pytest.mark.parametrize("case", ["year-9999-passed", "before-year-1", "largest-timestamp"])
@pytest.mark.parametrize("view", [["--plain"], [], ["-V", "--plain"]], ids=["plain", "terminal", "details"])
def test_absolute_time_beyond_any_date_is_the_number_and_a_problem_id(conversation, tmp_path, case, view):
    path = tmp_path / f"{case}.pcapng"
    n = len(conversation)
    if case == "year-9999-passed":
        _pcapng_units(path, conversation, [(300_000_000_000 + i) * 10**6 for i in range(n)])
    elif case == "before-year-1":
        _pcapng_units(path, conversation, [i * 10**6 for i in range(n)], tsoffset=-10**12)
    else:
        _pcapng_units(path, conversation, [2**64 - 1] * n, tsoffset=2**63 - 1)
    res = run([str(path), "--absolute-time", *view], FORCE if not view else None)
    out, err = res.stdout.decode(), res.stderr.decode()
    assert res.returncode == 0 and "Traceback" not in err
    assert "PRODUCER_SUCCESS" in out and " UTC " not in out
    first = {"year-9999-passed": "300000000000.0", "before-year-1": "-1000000000000.0"}.get(case)
    if first is not None:
        assert first in out  # the number itself
    assert "time.not_a_date" in err and len(err.splitlines()) == 1


def _timed(path: Path, packets: list[bytes], times: list[float]) -> Path:
    pcapgen.write_pcap(path, list(zip(times, packets)))
    return path


def test_a_response_timestamped_before_its_request_says_the_clock_went_backwards(conversation, tmp_path):
    n = len(conversation)
    forward = [1_700_000_000 + i for i in range(n)]
    backward = [1_700_000_000 + (10 - i if i >= 3 else i) for i in range(n)]  # the data packets go back in time
    for times, expect in ((forward, False), (backward, True)):
        path = _timed(tmp_path / f"{expect}.pcap", conversation, times)
        res = run([str(path), "--json"])
        records = [json.loads(line) for line in res.stdout.splitlines()]
        answer = next(r for r in records if r.get("type") == "PRODUCER_SUCCESS")
        ids = [e["id"] for e in answer.get("expert", ())]
        assert ("response.before_request" in ids) == expect
        assert (answer["latency_ms"] < 0) == expect
        assert run([str(path), "--strict"]).returncode == (1 if expect else 0)
    stats = json.loads(run(["stats", str(path), "--json"]).stdout)
    assert any(e["id"] == "response.before_request" for e in stats["expert"])


# ---------------------------------------------------------------------------------------- closed pipes
PIPED = [
    ("timeline", ["{cap}"]),
    ("timeline-terminal", ["{cap}", "--no-color"]),
    ("json", ["{cap}", "--json"]),
    ("details", ["{cap}", "-V"]),
    ("filtered", ["{cap}", "--type", "SEND", "--json"]),
    ("fields", ["{cap}", "-T", "fields", "-e", "type", "-E", "header=y"]),
    ("stats", ["stats", "{cap}"]),
    ("stats-json", ["stats", "{cap}", "--json"]),
    ("follow", ["follow", "{cap}", "--topic", "batching-1"]),
    ("check", ["check", "{cap}", "--rule", "no-errors"]),
    ("check-json", ["check", "{cap}", "--rule", "no-errors", "--json"]),
    ("help", ["-h"]),
    ("command-help", ["stats", "-h"]),
    ("version", ["--version"]),
]


@pytest.mark.parametrize("args", [p[1] for p in PIPED], ids=[p[0] for p in PIPED])
def test_a_closed_pipe_is_not_a_failure(args):
    """Standard output whose reader is already gone: every write fails with EPIPE. Exit 0, nothing on stderr."""
    cap = str(capture_path("02_batching_props_keys.pcap"))
    read, write = os.pipe()
    os.close(read)
    try:
        res = subprocess.run(CLI + [a.format(cap=cap) for a in args], stdout=write, stderr=subprocess.PIPE,
                             timeout=120)
    finally:
        os.close(write)
    assert (res.returncode, res.stderr.decode()) == (0, "")


@pytest.mark.parametrize("args", [["{cap}"], ["{cap}", "--json"], ["{cap}", "-V"], ["stats", "{cap}"],
                                  ["follow", "{cap}", "--topic", "batching-1"], ["{cap}", "-e", "type"]],
                         ids=["timeline", "json", "details", "stats", "follow", "fields"])
def test_piped_into_head_exits_0_silently(args):
    cap = capture_path("02_batching_props_keys.pcap")
    command = " ".join(f"'{a}'" for a in CLI + [a.format(cap=cap) for a in args])
    res = subprocess.run(["bash", "-c", f"set -o pipefail; {command} | head -1"], capture_output=True, text=True,
                         timeout=120)
    assert (res.returncode, res.stderr) == (0, "") and len(res.stdout.splitlines()) == 1


def test_the_problems_view_shows_wire_strings_escaped(hostile):
    for args in (["problems", str(hostile)], ["problems", str(hostile), "--json"]):
        res = run(args)
        assert res.returncode == 0 and b"Traceback" not in res.stderr, res.stderr
        out = res.stdout.decode("utf-8")
        assert out, "the crafted capture has findings"
        _assert_clean(out)
        _assert_clean(res.stderr.decode("utf-8"))
