"""Tests of the payload section of SEND / MESSAGE frames: checksums, broker entry metadata, codecs, batches,
markers, encryption, chunk reassembly (dissector.protocols.pulsar.payload, .codecs, .chunks)."""

from __future__ import annotations

import hashlib
import tracemalloc
import zlib

import pytest

import framebuild as fb
from dissector.model import Annotated
from dissector.options import Options
from dissector.problems import Finding, expert_record, spec
from pb_oracle import message_to_dict
from dissector.protocols.pulsar.decode import decode_frame
from pulsar_pb import PulsarApi_pb2 as api
from pulsar_pb import PulsarMarkers_pb2 as markers
from dissector.run import analysed_events, analysed_records

CODECS = {"LZ4": fb.LZ4, "ZLIB": fb.ZLIB, "ZSTD": fb.ZSTD, "SNAPPY": fb.SNAPPY}
TEXT = b"".join(b"message body %d, some text that compresses; " % i for i in range(200))


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def payload_of(frame: bytes, **kw):
    dec = decode_frame(frame, **kw)
    assert dec.body is not None
    return dec, dec.body


def rendered(f: Finding) -> str:
    """The finding's message, made from its registered template (a template/parameter mismatch raises)."""
    template = spec(f.id).template
    return template(f.params) if callable(template) else template.format(**f.params)


def found(findings: list[Finding], pid: str) -> list[dict]:
    """The parameters of the findings ``pid`` (each checked to make its message)."""
    out = [f.params for f in findings if f.id == pid]
    for f in findings:
        rendered(f)
    return out


def decompression(dec) -> list[dict]:
    return found(dec.findings, "payload.decompression")


# -------------------------------------------------------------------------------------------- checksum
def test_checksum_valid():
    dec, sec = payload_of(fb.send_frame(b"hello"))
    assert sec.checksum == "valid"
    assert sec.checksum_wire == sec.checksum_computed
    assert dec.findings == []
    assert sec.messages[0]["payload"] == b"hello"


def test_checksum_invalid_names_both_values():
    frame = fb.send_frame(b"hello", checksum=0x12345678)
    dec, sec = payload_of(frame)
    good = fb.crc32c(fb.payload_section(fb.metadata(), b"hello", checksum=False))
    assert sec.checksum == "invalid"
    assert sec.checksum_wire == 0x12345678 and sec.checksum_computed == good
    assert dec.findings == [Finding("checksum.invalid", {"wire": 0x12345678, "computed": good})]  # names both
    assert sec.messages[0]["payload"] == b"hello"  # the payload is still shown


def test_checksum_covers_metadata_and_payload():
    frame = bytearray(fb.send_frame(b"hello"))
    frame[-1] ^= 0x01
    dec, sec = payload_of(bytes(frame))
    assert sec.checksum == "invalid" and dec.findings
    frame = bytearray(fb.send_frame(b"hello"))
    frame[-12] ^= 0x01  # inside the metadata
    assert decode_frame(bytes(frame)).body.checksum == "invalid"


def test_checksum_absent():
    dec, sec = payload_of(fb.send_frame(b"hello", checksum=False))
    assert sec.checksum == "absent" and sec.checksum_wire is None
    assert dec.findings == []


def test_checksum_unverified_when_damaged():
    frame = fb.send_frame(b"hello" * 20)
    dec, sec = payload_of(frame[:-30], missing=30)
    assert sec.checksum == "unverified"
    assert "checksum.invalid" not in [f.id for f in dec.findings]
    assert sec.messages[0]["payload"] is None


def test_checksum_field_cut_short():
    frame = fb.raw_frame(fb.command_bytes("SEND", producer_id=1, sequence_id=1), b"\x0e\x01\x00\x00")
    dec, sec = payload_of(frame)
    assert found(dec.findings, "payload.checksum_cut") == [{}]


# ---------------------------------------------------------------------------------- broker entry metadata
@pytest.mark.parametrize("checksum", [True, False, "bad"])
def test_broker_entry_metadata_before_checksum(checksum):
    frame = fb.message_frame(b"body", broker_entry_metadata={"broker_timestamp": 1_700_000_000_123, "index": 41},
                             checksum=checksum)
    dec, sec = payload_of(frame)
    assert sec.broker_entry_metadata is not None
    assert sec.broker_entry_metadata["broker_timestamp"] == 1_700_000_000_123
    assert sec.broker_entry_metadata["index"] == 41
    assert sec.checksum == {True: "valid", False: "absent", "bad": "invalid"}[checksum]
    assert sec.messages[0]["payload"] == b"body"
    assert sec.metadata["producer_name"] == "test-producer"
    assert bool(dec.findings) == (checksum == "bad")


def test_broker_entry_metadata_not_covered_by_checksum():
    # Same payload and checksum, different broker entry metadata: both checksums are valid.
    a = fb.message_frame(b"body", broker_entry_metadata={"index": 1})
    b = fb.message_frame(b"body", broker_entry_metadata={"index": 2})
    assert a != b
    assert decode_frame(a).body.checksum == decode_frame(b).body.checksum == "valid"


def test_broker_entry_metadata_size_past_end():
    cmd = fb.command_bytes("MESSAGE", consumer_id=1, message_id={"ledgerId": 1, "entryId": 1})
    frame = fb.raw_frame(cmd, b"\x0e\x02\x00\x00\x01\x00\x08\x01")
    dec, sec = payload_of(frame)
    assert found(dec.findings, "payload.broker_entry_metadata") == [{"case": "size", "size": 0x100}]


# -------------------------------------------------------------------------------------------- metadata
def test_metadata_fields_decoded():
    md = fb.metadata(producer_name="prod", sequence_id=77, properties=[{"key": "k", "value": "v"}],
                     partition_key="pk", ordering_key=b"ok", event_time=123, replicated_from="east")
    dec, sec = payload_of(fb.send_frame(b"x", md=md, sequence_id=77))
    assert dec.findings == []
    m = sec.messages[0]
    assert (m["sequence_id"], m["partition_key"], m["ordering_key"], m["properties"], m["event_time"]) == \
        (77, "pk", b"ok", {"k": "v"}, 123)
    assert m.get("batch_index") is None
    assert sec.metadata["replicated_from"] == "east"
    assert sec.metadata_size == len(md.SerializeToString())


def test_metadata_missing_required_fields():
    md = api.MessageMetadata(producer_name="p")
    dec, sec = payload_of(fb.send_frame(b"x", md=md.SerializePartialToString()))
    assert any("sequence_id" in p["fields"] and "publish_time" in p["fields"]
               for p in found(dec.findings, "payload.metadata_missing_required"))
    assert sec.messages[0]["payload"] == b"x"


def test_metadata_size_past_end():
    cmd = fb.command_bytes("SEND", producer_id=1, sequence_id=1)
    dec, sec = payload_of(fb.raw_frame(cmd, b"\x00\x00\x10\x00abc"))
    assert found(dec.findings, "payload.metadata_size") == [{"size": 0x1000, "left": 3}]


def test_metadata_does_not_parse():
    cmd = fb.command_bytes("SEND", producer_id=1, sequence_id=1)
    dec, sec = payload_of(fb.raw_frame(cmd, b"\x00\x00\x00\x03\x0a\x7f\x01zz"))
    assert len(found(dec.findings, "payload.metadata_unparsable")) == 1


def test_payload_section_without_metadata():
    cmd = fb.command_bytes("SEND", producer_id=1, sequence_id=1)
    dec, sec = payload_of(fb.raw_frame(cmd))
    assert found(dec.findings, "payload.metadata_size") == [{}]  # no size at all


def test_null_value_flags_non_batched():
    md = fb.metadata(null_value=True, null_partition_key=True)
    dec, sec = payload_of(fb.send_frame(b"", md=md))
    assert dec.findings == []
    m = sec.messages[0]
    assert m["null_value"] and m["null_partition_key"] and m["payload_size"] == 0


# ------------------------------------------------------------------------------------------------ codecs
def test_zlib_helper_writes_an_unfinished_stream_like_java():
    blob = fb.zlib_java(TEXT)
    with pytest.raises(zlib.error):
        zlib.decompress(blob)
    assert blob.endswith(b"\x00\x00\xff\xff")  # sync flush marker, no final block


@pytest.mark.parametrize("name", CODECS)
def test_codec_non_batched(name):
    codec = CODECS[name]
    md = fb.metadata(compression=codec, uncompressed_size=len(TEXT))
    blob = fb.compress(codec, TEXT)
    assert blob != TEXT and len(blob) < len(TEXT)
    dec, sec = payload_of(fb.send_frame(blob, md=md))
    assert dec.findings == []
    assert sec.payload_size == len(blob) and sec.compression == codec and sec.metadata["compression"] == name
    assert sec.uncompressed_size == len(TEXT)
    assert [m["payload"] for m in sec.messages] == [TEXT]


@pytest.mark.parametrize("name", CODECS)
def test_codec_batched(name):
    codec = CODECS[name]
    bodies = [b"entry %d " % i * (i + 1) for i in range(10)]
    batch = fb.batch_payload(bodies)
    md = fb.metadata(compression=codec, uncompressed_size=len(batch), num_messages_in_batch=10)
    dec, sec = payload_of(fb.send_frame(fb.compress(codec, batch), md=md))
    assert dec.findings == []
    assert sec.uncompressed_size == len(batch)
    assert [m["payload"] for m in sec.messages] == bodies
    assert [m["batch_index"] for m in sec.messages] == list(range(10))


@pytest.mark.parametrize("name", CODECS)
def test_codec_without_uncompressed_size(name):
    codec = CODECS[name]
    md = fb.metadata(compression=codec)
    dec, sec = payload_of(fb.send_frame(fb.compress(codec, TEXT), md=md))
    assert [m["payload"] for m in sec.messages] == [TEXT] and sec.uncompressed_size == len(TEXT)
    assert dec.findings == []


@pytest.mark.parametrize("name", CODECS)
def test_codec_truncated_data(name):
    codec = CODECS[name]
    blob = fb.compress(codec, TEXT)
    md = fb.metadata(compression=codec, uncompressed_size=len(TEXT))
    dec, sec = payload_of(fb.send_frame(blob[: len(blob) // 2], md=md))
    assert dec.findings, name
    assert sec.uncompressed_size != len(TEXT)
    assert all(m["payload"] != TEXT for m in sec.messages)


@pytest.mark.parametrize("name", CODECS)
def test_codec_garbage_data(name):
    codec = CODECS[name]
    md = fb.metadata(compression=codec, uncompressed_size=1000)
    dec, sec = payload_of(fb.send_frame(bytes(range(256)) * 2, md=md))
    assert dec.findings
    assert sec.messages and sec.messages[0]["payload_size"] >= 0


@pytest.mark.parametrize("name", CODECS)
def test_codec_uncompressed_size_too_small(name):
    codec = CODECS[name]
    md = fb.metadata(compression=codec, uncompressed_size=len(TEXT) - 100)
    blob = fb.compress(codec, TEXT)
    dec, sec = payload_of(fb.send_frame(blob, md=md))
    assert {"case": "bomb_declared", "codec": name, "declared": len(TEXT) - 100} in decompression(dec), dec.findings
    assert sec.uncompressed_size is None
    assert sec.messages[0]["payload"] is None
    assert sec.messages[0]["payload_size"] == sec.payload_size == len(blob)


@pytest.mark.parametrize("name", CODECS)
def test_codec_uncompressed_size_too_large(name):
    codec = CODECS[name]
    md = fb.metadata(compression=codec, uncompressed_size=len(TEXT) + 100)
    dec, sec = payload_of(fb.send_frame(fb.compress(codec, TEXT), md=md))
    assert any(p["codec"] == name and p["declared"] == len(TEXT) + 100 for p in decompression(dec)), dec.findings


def test_unknown_compression_type():
    md = fb.metadata()
    raw = md.SerializeToString() + b"\x40\x07"  # compression = 7
    dec, sec = payload_of(fb.send_frame(b"zzz", md=raw))
    assert decompression(dec) == [{"case": "unknown_codec", "codec": 7}]
    assert sec.compression == 7


@pytest.fixture(scope="module")
def zeros_100mb():
    zeros = bytes(100_000_000)
    out = {name: fb.compress(codec, zeros) for name, codec in CODECS.items()}
    del zeros
    return out


def _peak_during(fn):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", CODECS)
@pytest.mark.parametrize("declared", [1000, 200_000_000, None])
def test_decompression_bomb(zeros_100mb, name, declared):
    codec = CODECS[name]
    fields = dict(compression=codec)
    if declared is not None:
        fields["uncompressed_size"] = declared
    frame = fb.send_frame(zeros_100mb[name], md=fb.metadata(**fields))
    options = Options(max_decompressed=2 * 1024 * 1024) if declared is None else Options()
    dec, peak = _peak_during(lambda: decode_frame(frame, options=options))
    assert dec.body.uncompressed_size is None
    assert dec.body.messages[0]["payload"] is None
    assert any(p["codec"] == name for p in decompression(dec)), dec.findings
    if declared == 200_000_000:
        assert any(p["case"] == "over_limit" for p in decompression(dec))  # refused: above --max-decompressed
    assert peak < len(frame) + 8 * 1024 * 1024, f"peak {peak} bytes"


# ------------------------------------------------------------------------------------------------ batches
def test_batch_of_one_is_still_a_batch():
    batch = fb.batch_payload([({"sequence_id": 5, "partition_key": "k"}, b"only")])
    dec, sec = payload_of(fb.send_frame(batch, md=fb.metadata(num_messages_in_batch=1)))
    assert dec.findings == []
    assert len(sec.messages) == 1
    m = sec.messages[0]
    assert (m["batch_index"], m["payload"], m["sequence_id"], m["partition_key"]) == (0, b"only", 5, "k")


def test_no_num_messages_field_is_not_a_batch():
    batch = fb.batch_payload([b"only"])
    dec, sec = payload_of(fb.send_frame(batch))
    assert sec.messages[0].get("batch_index") is None
    assert sec.messages[0]["payload"] == batch


def test_batch_entry_fields():
    entries = [
        ({"properties": [{"key": "a", "value": "1"}], "event_time": 9, "ordering_key": b"o"}, b"first"),
        ({"null_value": True, "null_partition_key": True}, b""),
        ({"sequence_id": 100}, b"third"),
    ]
    md = fb.metadata(sequence_id=40, num_messages_in_batch=3)
    dec, sec = payload_of(fb.send_frame(fb.batch_payload(entries), md=md, sequence_id=40))
    assert dec.findings == []
    a, b, c = sec.messages
    assert (a["properties"], a["event_time"], a["ordering_key"]) == ({"a": "1"}, 9, b"o")
    assert b["null_value"] and b["null_partition_key"] and b["payload"] == b""
    assert not a.get("null_value", False) and not a.get("compacted_out", False) and a.get("partition_key") is None
    assert c["sequence_id"] == 100 and c["payload"] == b"third"


def test_batch_count_mismatch():
    md = fb.metadata(num_messages_in_batch=3)
    dec, sec = payload_of(fb.send_frame(fb.batch_payload([b"a", b"b"]), md=md))
    assert [m["payload"] for m in sec.messages] == [b"a", b"b"]
    assert found(dec.findings, "batch.count_mismatch") == [{"entries": 2, "expected": 3}]


def test_batch_entry_overrunning_payload_keeps_readable_entries():
    batch = fb.batch_payload([b"one", b"two", ({"payload_size": 500}, b"three")])
    md = fb.metadata(num_messages_in_batch=3)
    dec, sec = payload_of(fb.send_frame(batch, md=md))
    assert [m["payload"] for m in sec.messages] == [b"one", b"two"]
    assert any(p["entry"] == 2 and p["case"] == "payload_size" and p["size"] == 500
               for p in found(dec.findings, "batch.malformed"))


def test_batch_metadata_size_overrun_and_stray_bytes():
    md = fb.metadata(num_messages_in_batch=2)
    dec, sec = payload_of(fb.send_frame(fb.batch_payload([b"one"]) + b"\x00\x00\x01\x00zz", md=md))
    assert [m["payload"] for m in sec.messages] == [b"one"]
    assert any(p["entry"] == 1 for p in found(dec.findings, "batch.malformed"))
    dec, sec = payload_of(fb.send_frame(fb.batch_payload([b"one"]) + b"\x00\x00", md=fb.metadata(
        num_messages_in_batch=1)))
    assert [m["payload"] for m in sec.messages] == [b"one"]
    assert any(p["case"] == "stray" for p in found(dec.findings, "batch.malformed"))


def test_batch_entry_without_payload_size():
    raw_smm = api.SingleMessageMetadata(partition_key="k").SerializePartialToString()
    batch = fb.batch_payload([b"one"]) + len(raw_smm).to_bytes(4, "big") + raw_smm + b"zz"
    dec, sec = payload_of(fb.send_frame(batch, md=fb.metadata(num_messages_in_batch=2)))
    assert [m["payload"] for m in sec.messages] == [b"one"]
    assert {"entry": 1, "case": "no_payload_size"} in found(dec.findings, "batch.malformed")


def test_compacted_out_marked():
    entries = [b"keep", ({"compacted_out": True}, b"gone"), b"keep2"]
    md = fb.metadata(num_messages_in_batch=3)
    dec, sec = payload_of(fb.message_frame(fb.batch_payload(entries), md=md))
    assert [m.get("compacted_out", False) for m in sec.messages] == [False, True, False]


def test_message_ack_set_marks_acked_entries():
    # java.util.BitSet.toLongArray: a set bit = still to deliver, a cleared bit = already acknowledged.
    md = fb.metadata(num_messages_in_batch=5)
    batch = fb.batch_payload([b"m%d" % i for i in range(5)])
    dec, sec = payload_of(fb.message_frame(batch, md=md, ack_set=[0b10110]))
    assert dec.findings == []
    assert [m.get("acked", False) for m in sec.messages] == [True, False, False, True, False]


def test_message_ack_set_multiword_and_sign_bit():
    n = 70
    md = fb.metadata(num_messages_in_batch=n)
    batch = fb.batch_payload([b"%d" % i for i in range(n)])
    # word 0: every bit set except bit 3 (int64: negative); word 1: only bit 1 (entry 65) still unacked
    word0 = -1 ^ (1 << 3)
    dec, sec = payload_of(fb.message_frame(batch, md=md, ack_set=[word0, 0b10]))
    acked = [i for i, m in enumerate(sec.messages) if m.get("acked", False)]
    assert acked == [3, 64] + list(range(66, 70))


def test_no_ack_set_means_nothing_acked():
    md = fb.metadata(num_messages_in_batch=3)
    dec, sec = payload_of(fb.message_frame(fb.batch_payload([b"a", b"b", b"c"]), md=md))
    assert [m.get("acked", False) for m in sec.messages] == [False] * 3


# ------------------------------------------------------------------------------------------------ markers
MARKERS = {
    10: markers.ReplicatedSubscriptionsSnapshotRequest(snapshot_id="snap-1", source_cluster="east"),
    11: markers.ReplicatedSubscriptionsSnapshotResponse(
        snapshot_id="snap-1", cluster=markers.ClusterMessageId(
            cluster="west", message_id=markers.MarkersMessageIdData(ledger_id=3, entry_id=4))),
    12: markers.ReplicatedSubscriptionsSnapshot(
        snapshot_id="snap-2", local_message_id=markers.MarkersMessageIdData(ledger_id=5, entry_id=6),
        clusters=[markers.ClusterMessageId(cluster="west",
                                           message_id=markers.MarkersMessageIdData(ledger_id=7, entry_id=8))]),
    13: markers.ReplicatedSubscriptionsUpdate(
        subscription_name="sub", clusters=[markers.ClusterMessageId(
            cluster="west", message_id=markers.MarkersMessageIdData(ledger_id=9, entry_id=10))]),
}


@pytest.mark.parametrize("marker_type", sorted(MARKERS))
def test_replicated_subscription_markers(marker_type):
    body = MARKERS[marker_type]
    md = fb.metadata(producer_name="pulsar.marker", marker_type=marker_type, replicate_to=["west"])
    dec, sec = payload_of(fb.send_frame(body.SerializeToString(), md=md, marker=True))
    assert dec.findings == []
    assert sec.marker is not None
    # read as the marker message its type names: field for field what was sent
    assert sec.marker == message_to_dict(body)


def test_transaction_marker_has_no_body():
    md = fb.metadata(producer_name="pulsar.txn.marker", marker_type=21, txnid_least_bits=1, txnid_most_bits=2)
    dec, sec = payload_of(fb.send_frame(b"", md=md))
    assert dec.findings == [] and sec.marker is None


def test_marker_body_that_does_not_parse():
    md = fb.metadata(producer_name="pulsar.marker", marker_type=10)
    dec, sec = payload_of(fb.send_frame(b"\x0a\x7fzz", md=md))
    assert [p["marker"] for p in found(dec.findings, "marker.unparsable")] == ["ReplicatedSubscriptionsSnapshotRequest"]


# ---------------------------------------------------------------------------------------------- encryption
def test_encrypted_payload():
    md = fb.metadata(encryption_keys=[{"key": "k1", "value": b"\x01\x02"}], encryption_algo="RSA",
                     encryption_param=b"iv", compression=fb.ZSTD, uncompressed_size=10_000,
                     num_messages_in_batch=4)
    dec, sec = payload_of(fb.send_frame(b"\x8f\x11 ciphertext \x00\xff", md=md))
    assert dec.findings == []
    assert sec.encrypted
    assert sec.uncompressed_size is None  # not decompressed
    # A batch of 4 whose entries cannot be read: none listed, its claim counted (never a placeholder per claimed
    # entry: a 400-byte capture may claim ten million), its bytes unknown.
    assert sec.messages == [] and sec.messages_whole == {"count": 4, "bytes": None}


def test_encrypted_single_message_keeps_its_clear_metadata():
    md = fb.metadata(encryption_keys=[{"key": "k1", "value": b"\x01"}], partition_key="pk", event_time=5,
                     properties=[{"key": "a", "value": "b"}])
    dec, sec = payload_of(fb.send_frame(b"\x8f\x11 ciphertext", md=md))
    assert dec.findings == []
    (m,) = sec.messages
    assert m["encrypted"] and m["payload"] is None and m["payload_size"] == len(b"\x8f\x11 ciphertext")
    assert (m["partition_key"], m["event_time"], m["properties"]) == ("pk", 5, {"a": "b"})


# ------------------------------------------------------------------------------------------------ chunks
def chunk_md(uuid: str, cid: int, n: int, total: int, **kw):
    return fb.metadata(producer_name="chunker", sequence_id=3, uuid=uuid, chunk_id=cid, num_chunks_from_msg=n,
                       total_chunk_msg_size=total, **kw)


def split3(data: bytes) -> list[bytes]:
    k = len(data) // 3
    return [data[:k], data[k:2 * k], data[2 * k:]]


def test_chunk_frames_are_not_decompressed_alone():
    md = chunk_md("u", 0, 3, 300, compression=fb.ZSTD, uncompressed_size=10_000)
    dec, sec = payload_of(fb.send_frame(b"c" * 100, md=md, is_chunk=True))
    assert dec.findings == []
    assert sec.uncompressed_size is None
    m = sec.messages[0]
    assert (m["chunk_id"], m["num_chunks"], m["uuid"], m["payload"]) == (0, 3, "u", b"c" * 100)


def _chunk_capture(path, chunk_ids, data):
    parts = split3(data)
    items = [("c", fb.simple_frame("CONNECT", client_version="t")), ("b", fb.simple_frame("CONNECTED")),
             ("c", fb.simple_frame("PRODUCER", topic="persistent://p/n/chunked", producer_id=1, request_id=1,
                                   producer_name="chunker")),
             ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="chunker"))]
    for cid in chunk_ids:
        md = chunk_md("uuid-7", cid, 3, len(data))
        items.append(("c", fb.send_frame(parts[cid], md=md, sequence_id=3, is_chunk=True)))
    items.append(("b", fb.simple_frame("SEND_RECEIPT", producer_id=1, sequence_id=3)))
    fb.tcp_pcap(path, items, segment_size=500)


def _sends(path) -> list[Annotated]:
    return [e for e in analysed_events(path) if type(e) is Annotated and e.frame.pdu.type == "SEND"]


def _all_findings(item: Annotated) -> list[Finding]:
    """What the decoder and the analysis found about one frame."""
    return item.frame.pdu.findings + item.findings


def test_chunks_reassembled_by_the_analyzer(tmp_path):
    data = bytes(range(251)) * 20
    path = tmp_path / "chunks.pcap"
    _chunk_capture(path, [0, 1, 2], data)
    sends = _sends(path)
    assert len(sends) == 3
    assert all(_all_findings(s) == [] for s in sends)
    assert "reassembled" not in sends[0].notes and "reassembled" not in sends[1].notes
    r = sends[2].notes["reassembled"]
    assert r["uuid"] == "uuid-7"
    assert r["payload_size"] == len(data) and r["payload_sha256"] == sha(data)
    assert r["chunks"] == [s.frame.index for s in sends]
    recs = [r for r in analysed_records(path) if r.get("type") == "SEND"]
    assert recs[2]["reassembled"]["payload_sha256"] == sha(data)
    assert [m["chunk_id"] for rec in recs for m in rec["messages"]] == [0, 1, 2]


@pytest.mark.parametrize("ids, pid", [([0, 2], "chunk.missing"), ([0, 1, 1, 2], "chunk.duplicate"),
                                      ([1, 2], "chunk.orphan")])
def test_chunk_problems_in_the_analyzer(tmp_path, ids, pid):
    path = tmp_path / "chunks.pcap"
    _chunk_capture(path, ids, b"d" * 3000)
    sends = _sends(path)
    assert any(found(_all_findings(s), pid) for s in sends), [_all_findings(s) for s in sends]
    if pid != "chunk.duplicate":
        assert not any("reassembled" in s.notes for s in sends)


# ----------------------------------------------------------------------------------------- JSON records
def test_json_checksum_detail_and_payload_fields(tmp_path):
    bad = fb.send_frame(b"bad body", sequence_id=1, checksum=0xDEADBEEF)
    good_crc = fb.crc32c(fb.payload_section(fb.metadata(sequence_id=1), b"bad body", checksum=False))
    items = [("c", fb.send_frame(b"good body", sequence_id=0)), ("c", bad),
             ("b", fb.message_frame(b"msg", broker_entry_metadata={"broker_timestamp": 5, "index": 6},
                                    checksum=False))]
    path = tmp_path / "crc.pcap"
    fb.tcp_pcap(path, items)
    recs = [r for r in analysed_records(path, payload_bytes=True) if "index" in r]
    good, badr, msg = recs
    assert good["checksum"] == "valid" and "checksum_detail" not in good
    assert badr["checksum"] == "invalid"
    assert badr["checksum_detail"] == {"wire": 0xDEADBEEF, "computed": good_crc}
    (crc,) = [e for e in badr["expert"] if e["id"] == "checksum.invalid"]
    assert crc["severity"] == "error" and crc["message"] in badr["problems"]
    assert not any(e["id"] == "checksum.invalid" for r in (good, msg) for e in r.get("expert", ()))
    assert msg["checksum"] == "absent"
    assert msg["broker_entry_metadata"] == {"broker_timestamp": 5, "index": 6}
    assert msg["metadata"]["producer_name"] == "test-producer"
    assert msg["messages"][0]["payload_size"] == 3
    assert msg["messages"][0]["payload_sha256"] == sha(b"msg")
    assert msg["messages"][0]["payload_text"] == "msg"
    assert msg["messages"][0]["message_id"] == {"ledger_id": 1, "entry_id": 0, "partition": -1, "batch_index": -1}


@pytest.mark.parametrize("name", CODECS)
def test_no_declared_size_does_not_allocate_the_limit(name):
    # Without uncompressed_size the output size is unknown: a small message must not cost a 64 MiB buffer.
    codec = CODECS[name]
    frame = fb.send_frame(fb.compress(codec, TEXT), md=fb.metadata(compression=codec))
    dec, peak = _peak_during(lambda: decode_frame(frame))
    assert [m["payload"] for m in dec.body.messages] == [TEXT] and dec.findings == []
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes"


def test_json_marker_encrypted_flags(tmp_path):
    marker_md = fb.metadata(producer_name="pulsar.marker", marker_type=10)
    enc_md = fb.metadata(encryption_keys=[{"key": "k", "value": b"v"}])
    batch_md = fb.metadata(num_messages_in_batch=3)
    batch = fb.batch_payload([b"a", ({"compacted_out": True}, b"b"), ({"null_value": True}, b"")])
    items = [("b", fb.message_frame(MARKERS[10].SerializeToString(), md=marker_md, entry_id=1)),
             ("b", fb.message_frame(b"\x00secret", md=enc_md, entry_id=2)),
             ("b", fb.message_frame(batch, md=batch_md, entry_id=3, ack_set=[0b110]))]
    path = tmp_path / "flags.pcap"
    fb.tcp_pcap(path, items)
    marker, enc, bat = [r for r in analysed_records(path) if "index" in r]
    assert marker["marker"] == {"snapshot_id": "snap-1", "source_cluster": "east"}
    assert marker["problems"] == []
    assert enc["encrypted"] is True and enc["problems"] == []
    assert enc["messages"][0]["payload_sha256"] is None and enc["messages"][0]["payload_size"] == 7
    msgs = bat["messages"]
    assert [m["batch_index"] for m in msgs] == [0, 1, 2]
    assert [m.get("acked", False) for m in msgs] == [True, False, False]
    assert [m.get("compacted_out", False) for m in msgs] == [False, True, False]
    assert [m.get("null_value", False) for m in msgs] == [False, False, True]
    assert [m["message_id"]["batch_index"] for m in msgs] == [0, 1, 2]
    assert all(m["message_id"]["entry_id"] == 3 for m in msgs)


def test_decode_problems_carry_stable_ids():
    bad_crc = decode_frame(fb.send_frame(b"x", checksum="bad"))
    expert = [expert_record(f) for f in bad_crc.findings]
    assert [(e["id"], e["severity"]) for e in expert] == [("checksum.invalid", "error")]
    assert expert[0]["message"] == rendered(bad_crc.findings[0])
    md = fb.metadata(num_messages_in_batch=3)
    short_batch = decode_frame(fb.send_frame(fb.batch_payload([b"a", b"b"]), md=md))
    assert [f.id for f in short_batch.findings] == ["batch.count_mismatch"]
    unknown = decode_frame(fb.raw_frame(b"\x08\x63"))
    assert [f.id for f in unknown.findings] == ["command.unknown_type"]
    damaged = decode_frame(fb.send_frame(b"payload")[:-3], missing=3)
    assert [f.id for f in damaged.findings] == ["payload.incomplete"]


def test_a_message_frame_without_its_sub_command_still_makes_a_record(tmp_path):
    """BaseCommand says MESSAGE but carries no CommandMessage: the payload is still shown, nothing raises."""
    from dissector.run import analysed_records

    frame = fb.raw_frame(b"\x08\x09", fb.payload_section(fb.metadata(), b"x"))
    path = tmp_path / "m.pcap"
    fb.tcp_pcap(path, [("b", frame)])
    recs = [r for r in analysed_records(path) if "index" in r]
    assert [r["type"] for r in recs] == ["MESSAGE"]
    assert "command.missing_subcommand" in [e["id"] for e in recs[0]["expert"]]
    assert recs[0]["messages"][0]["payload_size"] == 1 and "message_id" not in recs[0]["messages"][0]


