"""The timeline's line and the escape of wire strings, both in the compiled core (crates/engine/src/timeline.rs,
crates/engine/src/text.rs): one escape for every renderer, one line whether the core writes it from its own frame
(``--plain`` with nothing to filter) or makes it from a record dict (filters, ``-V``, the terminal).

Hostile strings (terminal escapes, BEL, C1 controls, bidi overrides, rich markup, newlines, invalid UTF-8)
go through every path and come out escaped and the same; the escape agrees with the Python implementation it
replaced (kept here as the oracle) and with Python's own ``str.isprintable``.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import re
import sys
import unicodedata

from dissector import _core as _core
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

import framebuild as fb
from corpus import capture_path
from dissector.cli.main import app
from dissector.output.text import date_ms, safe, shown_b64
from dissector.output.timeline import STYLES, TimelineRenderer, timeline_format
from dissector.run import analysed_records

runner = CliRunner()
ENV = {"COLUMNS": "80", "NO_COLOR": None, "FORCE_COLOR": None}


# ------------------------------------------------------------------------- the oracle: the Python it replaced

def oracle_safe(value, limit: int = 60) -> str:
    """text.safe as it was in Python before the core took it over."""
    def text_of(v):
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode("utf-8", "backslashreplace")
        raise TypeError

    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=text_of) \
        if isinstance(value, (dict, list)) else str(value)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def oracle_date_ms(value) -> str:
    try:
        return dt.datetime.fromtimestamp(int(value) / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
    except (OverflowError, OSError, ValueError, TypeError):
        return oracle_safe(value)


HOSTILE = [
    "\x1b[31mred\x1b[0m",  # SGR
    "\x1b]0;pwned\x07title",  # OSC window title, BEL-terminated
    "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",  # OSC 8 hyperlink, ST-terminated
    "bell\x07",
    "c1\x9b31mcsi\x9d",  # C1 CSI and OSC
    "abc\u202eevil\u202c",  # bidi override
    "zero\u200bwidth\ufeff",  # format characters
    "[/x][bold red]markup[/]",  # rich markup
    "line\nbreak\r\ttab",
    "nul\x00del\x7f",
    "surrogate\U000e0001tag",
    "x" * 500,
    "é" * 70,
]


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("limit", [20, 60, 300])
def test_safe_escapes_hostile_text_as_the_python_it_replaced(text, limit):
    shown = safe(text, limit)
    assert shown == oracle_safe(text, limit)
    assert shown.isprintable() and len(shown) <= limit


def test_safe_of_what_is_not_a_string():
    values = [None, True, False, 0, -5, 2**64 - 1, 2**80, 1.0, 1e16, 1e-5, -0.0, float("nan"), float("inf"),
              b"a'\x00\xff", {"k": ["é\x1b", 1.5, None, True]}, [b"\xff\xfe", {"a": 1}], {"e": "😀\u202e"},
              {1: "a", None: 2, False: 3, 2.5: (4, 5)}]
    for value in values:
        assert safe(value) == oracle_safe(value), value
        assert safe(value, 5) == oracle_safe(value, 5), value
    assert safe("\ud800lone") == oracle_safe("\ud800lone") == "\\ud800lone"  # a lone surrogate, escaped


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=1, max_value=80))
def test_safe_agrees_with_the_oracle_on_any_text(text, limit):
    assert safe(text, limit) == oracle_safe(text, limit)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
@example(562949953421312.2)  # exactly halfway between two shortest strings: Python takes ...312.2
@example(5.960464477539063e-08)  # 2**-24, halfway too: Python takes ...063
def test_floats_read_as_python_writes_them(value):
    assert safe(value, 100) == repr(value)
    assert safe([value], 100) == oracle_safe([value], 100)


def test_the_printable_table_is_pythons():
    if unicodedata.unidata_version != _core.UNICODE_VERSION:
        pytest.skip(f"the table is Unicode {_core.UNICODE_VERSION}, this Python's {unicodedata.unidata_version}")
    step = 4096
    for start in range(0, sys.maxunicode + 1, step):
        chars = "".join(chr(c) for c in range(start, min(start + step, sys.maxunicode + 1)) if not 0xD800 <= c < 0xE000)
        assert safe(chars, 10**9) == oracle_safe(chars, 10**9), hex(start)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.just(2**64 - 1), st.none(),
                 st.floats(allow_nan=True), st.booleans(), st.text(max_size=5)))
def test_dates_of_epoch_milliseconds_as_python_made_them(value):
    assert date_ms(value) == oracle_date_ms(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-6e10, max_value=2.5e11, allow_nan=False))
def test_absolute_times_as_python_writes_them(t):
    line = timeline_format(absolute_time=True).text({"index": 1, "time": t, "type": "PING", "command": {}})
    expected = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    assert line.split(" p?")[0].strip().endswith(expected)


def test_bytes_fields_read_as_text_or_hex():
    b64 = base64.b64encode
    assert shown_b64(b64(b"topic\x1b[2J").decode(), "text") == ("topic\\x1b[2J", False)
    assert shown_b64(b64(b"\xff\x00").decode(), "text") == ("ff 00", True)
    assert shown_b64(b64(b"\x01\x02").decode(), "hex") == ("0102", True)
    assert shown_b64("not base64!", "hex") == ("not base64!", False)
    assert shown_b64(b64(bytes(100)).decode(), "bytes", 10) == ("00 00 00 0", True)


# ------------------------------------------------------------------------------ hostile strings on the lines

EVIL = "\x1b]0;pwned\x07\x1b[31m[/x][bold]\u202eevil\x9b2J\nnext"


def lookup_with_raw_topic(topic: bytes, request_id: int) -> bytes:
    """A LOOKUP whose topic is any bytes (invalid UTF-8 included), encoded by hand."""
    sub = fb.varint(1 << 3 | 2) + fb.varint(len(topic)) + topic + fb.varint(2 << 3) + fb.varint(request_id)
    number = fb.type_number("LOOKUP")
    cmd = fb.varint(1 << 3) + fb.varint(number) + fb.varint(23 << 3 | 2) + fb.varint(len(sub)) + sub
    return fb.raw_frame(cmd)


@pytest.fixture(scope="module")
def hostile_capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "hostile.pcap"
    md = fb.metadata(producer_name=EVIL, sequence_id=0)
    fb.tcp_pcap(path, [
        ("c", fb.simple_frame("CONNECT", client_version=EVIL, protocol_version=20)),
        ("b", fb.simple_frame("CONNECTED", server_version="broker", protocol_version=20)),
        ("c", fb.simple_frame("PRODUCER", topic=EVIL, producer_id=0, request_id=1, producer_name=EVIL)),
        ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name=EVIL)),
        ("c", fb.send_frame(EVIL.encode(), producer_id=0, sequence_id=0, md=md)),
        ("c", lookup_with_raw_topic(b"persistent://t/\xff\xfe\x1b[31m", 2)),
        ("b", fb.simple_frame("ERROR", request_id=2, error=0, message=EVIL)),
    ])
    return path


def _unescaped(text: str) -> list[str]:
    return [c for c in text if c not in "\n" and not c.isprintable()]


@pytest.mark.parametrize("extra", [(), ("--payload",), ("--absolute-time",)])
def test_hostile_strings_come_out_escaped_and_the_same_from_the_core_and_from_records(hostile_capture, extra):
    native = runner.invoke(app, ["dissect", str(hostile_capture), "--plain", *extra], env=ENV)
    # a filter that keeps everything: every line made from a record dict instead
    from_records = runner.invoke(app, ["dissect", str(hostile_capture), "--plain", "-Y", "type", *extra], env=ENV)
    assert native.exit_code == from_records.exit_code == 0, native.stderr
    assert native.stdout == from_records.stdout
    assert _unescaped(native.stdout) == []
    assert "\\x1b]0;pwned\\x07\\x1b[31m[/x][bold]\\u202eevil\\x9b2J\\nnext" in native.stdout
    assert "topic=persistent://t/\\xff\\xfe\\x1b[31m" in native.stdout  # invalid UTF-8 as the decoder spells it
    assert "producer=\\x1b]0;pwned\\x07\\x1b[31m[/x][… msgs=1" in native.stdout  # cut to 30 characters
    if "--payload" in extra:
        assert "payload: \\x1b]0;pwned" in native.stdout


def test_hostile_strings_on_a_terminal_are_text_not_markup_or_escapes(hostile_capture):
    out = io.StringIO()
    console = Console(file=out, width=300, force_terminal=True, color_system="truecolor")
    renderer = TimelineRenderer(console, show_payload=True)
    plain = TimelineRenderer(Console(file=io.StringIO(), width=300), plain=True, show_payload=True)
    lines = []
    for rec in analysed_records(hostile_capture, payload_bytes=True):
        renderer.render(rec)
        lines.append(plain.line(rec))
    shown = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # the styles rich wrote
    assert _unescaped(shown) == []
    assert "[/x][bold]" in shown
    assert shown.splitlines() == "\n".join(lines).splitlines()


def test_the_same_line_from_the_core_and_from_a_record_on_every_capture_view():
    """The corpus through the core's writer and through record dicts (a filter that keeps all) is the same."""
    for name in ("02_batching_props_keys.pcap", "04_chunking.pcap.gz", "11_errors.pcap", "07_seek.pcap"):
        for extra in ((), ("--payload",)):
            native = runner.invoke(app, ["dissect", str(capture_path(name)), *extra], env=ENV)
            from_records = runner.invoke(app, ["dissect", str(capture_path(name)), "-Y", "type", *extra], env=ENV)
            assert native.stdout == from_records.stdout, (name, extra)


def test_every_role_has_a_style():
    assert set(_core.TimelineFormat.roles()) == set(STYLES)


def test_a_line_made_from_a_record_lacking_keys_does_not_fail():
    fmt = timeline_format(previews=True)
    for rec in [{}, {"index": None}, {"index": 1, "time": "x", "command": [1], "messages": [{}], "acks": "x",
                                       "metadata": {"encryption_keys": [1]}, "encrypted": True,
                                       "messages_summary": {"chunk": {"chunk_id": "a"}}, "reassembled": {"x": 1},
                                       "problems": [None, {"a": "\x1b"}], "expert": [{"severity": "note"}]}]:
        assert _unescaped(fmt.text(rec).replace("\n", "")) == []


# ------------------------------------------------------------------------------ mutated captures, both paths

def _mutated_capture(rng, source, target) -> None:
    """The capture with bytes of its packets' data changed at random (the pcap record headers kept)."""
    import gzip

    data = bytearray(gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes())
    pos = 24
    while pos + 16 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "little")
        start, end = pos + 16, min(pos + 16 + length, len(data))
        if end - start > 60 and rng.random() < 0.3:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(start + 54, end)] = rng.choice([0, 0xFF, 0x1B, 0x0A, 0x80, rng.randrange(256)])
        pos = end
    target.write_bytes(bytes(data))


def _lines_both_ways(path, payload: bool) -> tuple[str, str]:
    from dissector.options import Options
    from dissector.run import analysed_timeline_lines

    native = TimelineRenderer(Console(file=io.StringIO()), plain=True, show_payload=payload)
    written = []
    for item in analysed_timeline_lines(path, native.format, Options(), payload_bytes=payload, summary=not payload):
        written.append(item.decode() if type(item) is bytes else native.line(item) + "\n")
    renderer = TimelineRenderer(Console(file=io.StringIO()), plain=True, show_payload=payload)
    made = []
    for rec in analysed_records(path, payload_bytes=payload, summary=not payload):
        if renderer.origin is None:
            renderer.origin = rec["time"]
        made.append(renderer.line(rec) + "\n")
    return "".join(written), "".join(made)


@pytest.mark.parametrize("seed", range(12))
def test_mutated_captures_make_the_same_escaped_lines_both_ways(seed, tmp_path):
    import random

    rng = random.Random(seed)
    source = capture_path(["02_batching_props_keys.pcap", "04_chunking.pcap.gz", "11_errors.pcap",
                           "09_key_shared.pcap"][seed % 4])
    path = tmp_path / "mutated.pcap"
    _mutated_capture(rng, source, path)
    for payload in (False, True):
        written, made = _lines_both_ways(path, payload)
        assert written == made
        assert _unescaped(written) == []
