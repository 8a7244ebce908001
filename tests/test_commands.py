"""Tests of Pulsar frame decoding (dissector.protocols.pulsar.decode.decode_frame) on BaseCommand framing, types,
required/unknown fields, sizes; the command table (dissector.protocols.pulsar.commands)."""

from __future__ import annotations

import pytest

import framebuild as fb
from dissector.options import Options
from dissector.problems import Finding, spec
from pb_oracle import message_to_dict
from dissector.protocols.pulsar.commands import COMMANDS, MESSAGE, PAYLOAD_TYPES, SEND, TYPE_NAMES, TYPE_NUMBERS
from dissector.protocols.pulsar.decode import decode_frame
from pulsar_pb import PulsarApi_pb2 as api


def frame_for_type(num: int) -> bytes:
    if fb.TYPE_NAMES[num] == "SEND":
        return fb.send_frame(b"abc")
    if fb.TYPE_NAMES[num] == "MESSAGE":
        return fb.message_frame(b"abc")
    return fb.simple_frame(num)


def subcommand_for_type(num: int):
    """The sub-command that frame_for_type(num) carries, built from framebuild's literal table."""
    if fb.TYPE_NAMES[num] == "SEND":
        return fb.subcommand(num, producer_id=1, sequence_id=0)
    if fb.TYPE_NAMES[num] == "MESSAGE":
        return fb.subcommand(num, consumer_id=1, message_id={"ledgerId": 1, "entryId": 0})
    return fb.subcommand(num)


def checked_findings(dec) -> list[Finding]:
    """The frame's findings, each checked to make its message from its registered template (a template that
    does not fit its parameters raises)."""
    for f in dec.findings:
        template = spec(f.id).template
        template(f.params) if callable(template) else template.format(**f.params)
    return dec.findings


def ids(dec) -> list[str]:
    return [f.id for f in checked_findings(dec)]


def found(dec, pid: str) -> list[dict]:
    """The parameters of the findings ``pid`` of a decoded frame."""
    return [f.params for f in checked_findings(dec) if f.id == pid]


def key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


_varint = fb.varint


# ----------------------------------------------------------------------------------------------- types
def test_type_table_matches_the_protocol():
    # Expected: the literal table in framebuild, written from the upstream PulsarApi.proto (see there).
    assert TYPE_NAMES == fb.TYPE_NAMES
    assert len(TYPE_NAMES) == 70
    assert max(TYPE_NAMES) == 81
    assert not set(range(41, 50)) & set(TYPE_NAMES) and 69 not in TYPE_NAMES
    # sub-command for type N lives in BaseCommand field N, under upstream's (mixed-style) field names
    assert fb.SUBCOMMAND_FIELD_NUMBER == {n: n for n in fb.TYPE_NAMES}
    assert {TYPE_NAMES[n] for n in PAYLOAD_TYPES} == fb.PAYLOAD_TYPE_NAMES
    assert (TYPE_NAMES[SEND], TYPE_NAMES[MESSAGE]) == ("SEND", "MESSAGE")
    assert TYPE_NUMBERS == fb.TYPE_NUMBERS
    # the command table knows every type, under its wire number
    assert {spec.name: spec.number for spec in COMMANDS} == fb.TYPE_NUMBERS


@pytest.mark.parametrize("num", sorted(fb.TYPE_NAMES), ids=lambda n: fb.TYPE_NAMES[n])
def test_every_type_round_trips(num):
    frame = frame_for_type(num)
    dec = decode_frame(frame)
    assert dec.type == fb.TYPE_NAMES[num]
    assert TYPE_NUMBERS[dec.type] == num and COMMANDS.by_name[dec.type].number == num
    assert dec.findings == []  # also: no frame.size_mismatch, so TOTAL_SIZE == len(frame) - 4 was read
    assert dec.command is not None
    # the sub-command was read as upstream's message for this type, field by field
    assert api.BaseCommand.DESCRIPTOR.fields_by_name[fb.SUBCOMMAND_FIELD_NAME[num]].message_type.name \
        == fb.SUBCOMMAND_MESSAGE[num]
    assert dec.command == message_to_dict(subcommand_for_type(num))
    assert dec.size == len(frame)
    assert (dec.body is not None) == (fb.TYPE_NAMES[num] in fb.PAYLOAD_TYPE_NAMES)


def test_sub_command_fields_are_kept():
    dec = decode_frame(fb.simple_frame("PRODUCER", topic="persistent://t/n/x", producer_id=7, request_id=9,
                                       producer_name="p"))
    assert dec.command["topic"] == "persistent://t/n/x"
    assert dec.command == {"topic": "persistent://t/n/x", "producer_id": 7, "request_id": 9, "producer_name": "p"}


def test_broker_close_request_id_minus_one():
    dec = decode_frame(fb.simple_frame("CLOSE_PRODUCER", producer_id=1, request_id=2**64 - 1))
    assert dec.findings == [] and dec.command["request_id"] == 2**64 - 1


# ------------------------------------------------------------------------------------- unknown types
@pytest.mark.parametrize("num", [99, 41, 69, 82, 1000, 2**35])
def test_unknown_type_is_never_connect(num):
    frame = fb.raw_frame(key(1, 0) + _varint(num))
    dec = decode_frame(frame)
    assert dec.type == f"UNKNOWN({num})"
    assert dec.command is None
    assert found(dec, "command.unknown_type") == [{"number": num}]


def test_unknown_type_with_its_sub_command_field():
    sub = key(1, 0) + _varint(5)
    frame = fb.raw_frame(key(1, 0) + _varint(99) + key(99, 2) + _varint(len(sub)) + sub)
    dec = decode_frame(frame)
    assert dec.type == "UNKNOWN(99)" and dec.command is None
    assert found(dec, "command.unknown_type") == [{"number": 99}]
    assert any(99 in p["fields"] for p in found(dec, "command.unknown_fields"))


def test_type_not_first_on_the_wire():
    # Field order on the wire is free: the type is still read from field 1.
    send = api.CommandSend(producer_id=1, sequence_id=2).SerializePartialToString()
    cmd = key(6, 2) + _varint(len(send)) + send + key(1, 0) + _varint(6)
    dec = decode_frame(fb.raw_frame(cmd, fb.payload_section(fb.metadata(), b"x")))
    assert dec.type == "SEND" and dec.findings == []


def test_base_command_without_type():
    send = api.CommandSend(producer_id=1, sequence_id=2).SerializePartialToString()
    dec = decode_frame(fb.raw_frame(key(6, 2) + _varint(len(send)) + send))
    assert dec.type == "MALFORMED"
    assert "command.no_type" in ids(dec)  # no type number was read
    assert "CONNECT" not in dec.type


def test_empty_base_command():
    dec = decode_frame(fb.raw_frame(b""))
    assert dec.type == "MALFORMED" and "command.no_type" in ids(dec)


def test_type_without_its_sub_command():
    dec = decode_frame(fb.raw_frame(key(1, 0) + _varint(6)))
    assert dec.type == "SEND" and dec.command is None
    assert found(dec, "command.missing_subcommand") == [{"type": "SEND", "field": "send"}]


def test_sub_command_of_another_type():
    base = fb.command("PING")
    base.type = 19  # PONG, but carries the ping field
    dec = decode_frame(fb.raw_frame(base.SerializePartialToString()))
    assert dec.type == "PONG"
    assert found(dec, "command.missing_subcommand") == [{"type": "PONG", "field": "pong"}]
    assert any("PING" in p["types"] for p in found(dec, "command.extra_subcommands"))


def test_two_sub_commands():
    base = fb.command("PING")
    base.pong.SetInParent()
    dec = decode_frame(fb.raw_frame(base.SerializePartialToString()))
    assert dec.type == "PING"
    assert any("PONG" in p["types"] for p in found(dec, "command.extra_subcommands"))


# --------------------------------------------------------------------------------- required fields
def test_send_with_only_producer_id():
    send = api.CommandSend(producer_id=1)
    base = api.BaseCommand(type=api.BaseCommand.SEND, send=send)
    dec = decode_frame(fb.raw_frame(base.SerializePartialToString(), fb.payload_section(fb.metadata(), b"x")))
    assert dec.type == "SEND"
    assert dec.command is not None and dec.command["producer_id"] == 1
    # sequence_id is named as missing, producer_id (present) by no finding at all
    assert dec.findings == [Finding("command.missing_required", {"type": "SEND", "fields": ["sequence_id"]})]


@pytest.mark.parametrize("t, fields, missing", [
    ("PRODUCER", dict(producer_id=1, request_id=1), "topic"),
    ("SUBSCRIBE", dict(topic="t", subscription="s", consumer_id=1, request_id=1), "subType"),
    ("CONNECT", dict(), "client_version"),
    ("LOOKUP", dict(topic="t"), "request_id"),
    ("ACK", dict(consumer_id=1, ack_type=0, message_id=[{"ledgerId": 1}]), "message_id[0].entryId"),
])
def test_missing_required_field_is_named(t, fields, missing):
    base = fb.command(t, fill=False, **fields)
    dec = decode_frame(fb.raw_frame(base.SerializePartialToString()))
    assert dec.type == t
    assert any(p["type"] == t and missing in p["fields"] for p in found(dec, "command.missing_required")), \
        dec.findings


def test_unknown_enum_value_in_required_field():
    # A future SubType: proto2 keeps it as an unknown field; it must show up, not read as Exclusive silently.
    sub = api.CommandSubscribe(topic="t", subscription="s", consumer_id=1, request_id=1).SerializePartialToString()
    sub += key(3, 0) + _varint(9)  # subType = 9
    base = key(1, 0) + _varint(4) + key(4, 2) + _varint(len(sub)) + sub
    dec = decode_frame(fb.raw_frame(base))
    assert dec.type == "SUBSCRIBE"
    assert any("subType" in p["fields"] for p in found(dec, "command.unknown_enum"))
    assert dec.command.get("_unknown_fields") == [3]


# ---------------------------------------------------------------------------------- unknown fields
def test_unknown_field_in_base_command():
    cmd = fb.command_bytes("PING") + key(200, 0) + _varint(1)
    dec = decode_frame(fb.raw_frame(cmd))
    assert dec.type == "PING"
    assert any(200 in p["fields"] for p in found(dec, "command.unknown_fields"))


def test_unknown_field_in_sub_command_is_visible():
    ping = key(50, 2) + _varint(3) + b"new"
    cmd = key(1, 0) + _varint(18) + key(18, 2) + _varint(len(ping)) + ping
    dec = decode_frame(fb.raw_frame(cmd))
    assert dec.type == "PING"
    assert dec.command["_unknown_fields"] == [50]


# --------------------------------------------------------------------------------------------- sizes
def test_trailing_bytes_after_simple_command():
    frame = fb.raw_frame(fb.command_bytes("PING"), b"\xde\xad\xbe\xef")
    dec = decode_frame(frame)
    assert dec.type == "PING"
    assert found(dec, "command.trailing_bytes") == [{"length": 4, "type": "PING"}]


def test_cmd_size_larger_than_total_allows():
    cmd = fb.command_bytes("PING")
    frame = fb.raw_frame(cmd, total=4 + len(cmd) - 2)
    dec = decode_frame(frame)
    # the finding names both sizes
    assert found(dec, "frame.cmd_size") == [{"cmd_size": len(cmd), "total_size": 4 + len(cmd) - 2}]
    assert "frame.size_mismatch" in ids(dec)


def test_total_size_does_not_match_frame_length():
    cmd = fb.command_bytes("PING")
    dec = decode_frame(fb.raw_frame(cmd, total=len(cmd) + 10))
    assert found(dec, "frame.size_mismatch") == [{"total_size": len(cmd) + 10, "following": len(cmd) + 4}]
    assert dec.size == len(cmd) + 8


def test_cmd_size_smaller_than_the_command():
    cmd = fb.command_bytes("FLOW", consumer_id=1, messagePermits=100)
    dec = decode_frame(fb.raw_frame(cmd, cmd_size=len(cmd) - 3))
    assert dec.findings  # either a parse failure or a partial command plus stray bytes
    assert dec.type in ("FLOW", "MALFORMED")


def test_truncated_command():
    cmd = fb.command_bytes("PRODUCER", topic="persistent://a/b/c", producer_id=1, request_id=1)
    frame = fb.raw_frame(cmd)[:-10]
    dec = decode_frame(frame)
    assert dec.type == "MALFORMED"
    assert "frame.truncated" in ids(dec)


def test_truncated_command_from_a_capture_gap():
    frame = fb.raw_frame(fb.command_bytes("PRODUCER", topic="persistent://a/b/c", producer_id=1, request_id=1))
    dec = decode_frame(frame[:12], missing=len(frame) - 12)
    assert dec.size == len(frame)
    # why the bytes are missing is the pipeline's to say (frame.gap_damaged or frame.cut_at_end), not the decoder's;
    # the sizes agree once the lost bytes are counted: no finding about TOTAL_SIZE
    assert not {"frame.size_mismatch", "frame.cmd_size"} & set(ids(dec))


@pytest.mark.parametrize("n", range(8))
def test_frame_shorter_than_size_fields(n):
    dec = decode_frame(b"\x00" * n)
    assert dec.type == "MALFORMED" and dec.findings


def test_base_command_does_not_parse():
    dec = decode_frame(fb.raw_frame(b"\x08\x06\x32\x7f\x01"))  # send field claims 127 bytes, has 1
    assert dec.type == "SEND"
    assert "command.unparsable" in ids(dec)


def test_unknown_enum_value_is_not_called_missing():
    sub = api.CommandSubscribe(topic="t", subscription="s", consumer_id=1, request_id=1).SerializePartialToString()
    sub += key(3, 0) + _varint(9)
    base = key(1, 0) + _varint(4) + key(4, 2) + _varint(len(sub)) + sub
    dec = decode_frame(fb.raw_frame(base))
    assert "command.missing_required" not in ids(dec), dec.findings
    assert found(dec, "command.unknown_enum") == [{"type": "SUBSCRIBE", "fields": ["subType"]}]
