"""The terminal timeline: folding at 80 columns, plain lines for pagers, payload previews."""

from __future__ import annotations

import hashlib
import io
import re

from rich.console import Console

from corpus import capture_path, manifest
from dissector.output.timeline import TimelineRenderer, fold
from dissector.run import analysed_records


def test_fold_keeps_fields_whole_and_lines_within_width():
    parts = [("     5 +0.1 c1 → 1 LOOKUP          ", "")]
    for i in range(12):
        parts += [(f" label{i}=", "dim"), (f"value-{i}" * (1 + i % 3), "")]
    folded = fold(parts, 60)
    text = "".join(t for t, _ in folded)
    for line in text.split("\n"):
        assert len(line) <= 60
    for i in range(12):  # a label and its value are never separated
        assert f"label{i}=value-{i}" in text
    assert text.replace("\n          ", " ").split() == "".join(t for t, _ in parts).split()


def render(width: int, plain: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=not plain, color_system=None)
    renderer = TimelineRenderer(console, plain=plain)
    for rec in analysed_records(capture_path("01_basic_nonbatched.pcap")):
        renderer.render(rec)
    return out.getvalue()


def test_terminal_timeline_is_readable_at_80_columns():
    text = render(80, plain=False)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert f"topic={manifest('01_basic_nonbatched')['topic']}" in text


def test_plain_timeline_has_one_line_per_frame_or_event():
    lines = render(80, plain=True).splitlines()
    records = list(analysed_records(capture_path("01_basic_nonbatched.pcap")))
    assert len(lines) == len(records)
    assert any(len(line) > 80 for line in lines)  # never folded, whatever the width


def test_payload_preview_states_the_length_when_cut():
    m = manifest("04_chunking")
    (big,) = [s for s in m["sent"] if s.get("expected_chunks")]
    (small,) = [s for s in m["sent"] if "payload_utf8" in s]
    # The manifest's own recipe for the big payload; its sha256 proves it is the payload the client sent.
    size = big["payload_len"]
    payload = b"".join(b"%010d\n" % i for i in range(size // 11 + 1))[:size]
    assert hashlib.sha256(payload).hexdigest() == big["payload_sha256"]

    out = io.StringIO()
    renderer = TimelineRenderer(Console(file=out, width=200), plain=True, show_payload=True)
    for rec in analysed_records(capture_path("04_chunking.pcap"), payload_bytes=True):
        if rec.get("type") == "SEND":
            renderer.render(rec)
    text = out.getvalue()
    # Each chunk's preview is cut and states that chunk's length: as many as the client made chunks, their
    # lengths add up to the message, and each preview starts where the previous chunk ended.
    cut = re.findall(r"payload: (.*)\u2026 \((\d+) bytes\)\n", text)
    assert len(cut) == big["expected_chunks"]
    assert sum(int(n) for _, n in cut) == size
    offset = 0
    for preview, n in cut:
        # The preview shows a newline as the two characters \n (and may stop inside such an escape).
        raw = payload[offset:offset + len(preview)].decode()
        assert preview and raw.replace("\n", "\\n").startswith(preview)
        offset += int(n)
    # The small message is shown whole, with no length.
    assert f"payload: {small['payload_utf8']}\n" in text
