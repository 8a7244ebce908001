"""The engine's sinks ask the Python templates for the texts of findings through the engine's `FindingTexts`
(crates/python/src/records.rs): a template's error there comes out of the run as the same exception, whether
the lines are written in place or on the pool, never as a record with an empty text."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import dissector.analysis.conversation as conversation
from dissector.options import Options
from dissector.run import analysed_json_lines

CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "11_errors.pcap"


class TemplateBroke(Exception):
    pass


def broken_template(pid, params):
    raise TemplateBroke(pid)


@pytest.mark.parametrize("pool_bytes", [0, 16 << 20])
def test_a_template_error_met_in_a_sink_is_raised(monkeypatch, pool_bytes):
    options = dataclasses.replace(Options(), pool_bytes=pool_bytes)
    lines = b"".join(item for item in analysed_json_lines(CAPTURE, options) if type(item) is bytes)
    assert b'"expert"' in lines  # the capture's frames have findings, whose texts the sink asks for
    monkeypatch.setattr(conversation, "severity_and_message", broken_template)
    with pytest.raises(TemplateBroke):
        list(analysed_json_lines(CAPTURE, options))
