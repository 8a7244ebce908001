"""The binding reaches the engine's protocols by name (issue 30): ``_core.decode``, ``_core.tables`` and
``_core.bind_body`` take a protocol's name in the engine's registry, and a frame's body goes to Python and back
through the protocol's traits (``DecodedBody::fields``, ``Protocol::body_from_fields``), whatever the protocol:
an object of the class the protocol bound (Pulsar's ``PayloadSection``), else a dict (TubeMQ's).
"""

from __future__ import annotations

import dataclasses

import pytest

import framebuild as fb
import tubemq_wire as wire
from corpus import capture_path
from dissector import _core, protocols
from dissector.model import Annotated, Decoded
from dissector.output.jsonl import dumps
from dissector.output.records import record
from dissector.protocols.pulsar import PULSAR
from dissector.protocols.pulsar.commands import TYPE_NAMES
from dissector.protocols.pulsar.decode import decode_frame
from dissector.protocols.pulsar.payload import PayloadSection
from dissector.protocols.tubemq.commands import METHODS
from dissector.run import analysed_events, analysed_records



def test_each_protocols_tables_come_by_its_name():
    pulsar = _core.tables("pulsar")
    assert list(pulsar) == ["command_types"]
    assert dict(pulsar["command_types"]) == TYPE_NAMES and TYPE_NAMES[6] == "SEND"
    tubemq = _core.tables("tubemq")
    assert list(tubemq) == ["methods"]
    assert tuple(tubemq["methods"]) == METHODS and all(type(row) is tuple and len(row) == 5 for row in METHODS)


def test_a_protocol_the_core_does_not_have_is_refused():
    for call in (lambda: _core.decode("toy", b"\0\0\0\0"), lambda: _core.tables("toy"),
                 lambda: _core.bind_body("toy", PayloadSection)):
        with pytest.raises(ValueError, match="toy"):
            call()


def test_a_body_becomes_its_protocols_bound_class_or_a_dict():
    pulsar = _core.decode("pulsar", fb.send_frame(b"x"))
    assert type(pulsar) is Decoded and type(pulsar.body) is PayloadSection
    assert pulsar.body.checksum == "valid" and pulsar.body.messages[0]["payload"] == b"x"
    frame = wire.encode_frame(7, wire.exception_content("java.lang.IllegalStateException", None))
    tubemq = _core.decode("tubemq", frame)
    assert type(tubemq.body) is dict and list(tubemq.body) == ["serial", "rpc", "messages"]
    assert tubemq.body["serial"] == 7 and tubemq.body["messages"] == []


def test_a_body_class_whose_fields_differ_is_refused():
    Reordered = dataclasses.make_dataclass("Reordered", [f.name for f in reversed(dataclasses.fields(PayloadSection))])
    with pytest.raises(RuntimeError):
        _core.bind_body("pulsar", Reordered)
    # the class bound before is still the one bodies are made of
    assert type(decode_frame(fb.send_frame(b"x")).body) is PayloadSection


@pytest.mark.parametrize("name", ["tubemq/tubemq_consumer_broker.pcap", "tubemq/tubemq_block_splits.pcap"])
def test_records_of_tubemq_frames_held_in_python_are_the_cores_records(name):
    """A TubeMQ frame's body held in Python (a dict) made back into the engine's: the same record."""
    path = capture_path(name)
    items = list(analysed_events(path))
    assert any(type(i) is Annotated and i.frame.pdu.body and i.frame.pdu.body["messages"] for i in items)
    for style in ({}, {"summary": True}, {"payload_bytes": True}):
        from_python = [dumps(record(item, **style)) for item in items]
        assert from_python == [dumps(rec) for rec in analysed_records(path, **style)]


@pytest.mark.parametrize("name", ["04_chunking.pcap", "02_batching_props_keys.pcap", "09_shared.pcap"])
def test_pulsar_frames_decoded_in_python_are_analysed_as_the_cores(name):
    """Pulsar declared with a Python ``decode``: its frames reach the analysis and the records as Python
    objects, their payload sections made back into the engine's (chunks, batches, delayed deliveries) — the same
    records as the core's own frames give."""
    path = capture_path(name)
    native = [dumps(rec) for rec in analysed_records(path)]
    decoded = []

    def decode_in_python(pdu, missing, options):
        decoded.append(decode_frame(pdu, missing, options))
        return decoded[-1]

    protocols.register(dataclasses.replace(PULSAR, decode=decode_in_python))
    try:
        held = [dumps(rec) for rec in analysed_records(path)]
    finally:
        protocols.register(PULSAR)
    assert sum(d.body is not None for d in decoded) > 5, "the frames were not decoded in Python"
    assert held == native and len(native) > 10

