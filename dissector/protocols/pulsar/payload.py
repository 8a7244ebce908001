"""The payload section of SEND and MESSAGE frames, as a pure function of the frame bytes.

Layout after the BaseCommand (big-endian)::

    ([0x0e02][BEM_SIZE u32][BrokerEntryMetadata])?   broker → client only
    ([0x0e01][CRC32C u32])?                           CRC32C over everything after it to the end of the frame
    [METADATA_SIZE u32][MessageMetadata][payload]

The payload is then decrypted (impossible here), decompressed and, when ``num_messages_in_batch`` is present,
split into ``[SMM_SIZE u32][SingleMessageMetadata][payload]`` entries.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field

import crc32c as _crc32c
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from ...problems import Finding
from ..pbdict import message_to_dict, text
from . import codecs
from .pb import PulsarApi_pb2 as api
from .pb import PulsarMarkers_pb2 as markers

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")

MARKER_MESSAGES = {
    10: markers.ReplicatedSubscriptionsSnapshotRequest,
    11: markers.ReplicatedSubscriptionsSnapshotResponse,
    12: markers.ReplicatedSubscriptionsSnapshot,
    13: markers.ReplicatedSubscriptionsUpdate,
}

# An application message (a whole non-batched payload, one batch entry, or one chunk) is a plain dict:
# ``payload_size`` (None only for an entry of an encrypted batch) and ``payload`` (bytes, None when it cannot
# be recovered) always; then only the fields present on the wire: batch_index, sequence_id, partition_key,
# ordering_key (bytes), properties, event_time, null_value, null_partition_key, compacted_out, acked,
# encrypted, and for a chunk chunk_id, num_chunks, uuid.


@dataclass(slots=True)
class PayloadSection:
    """The payload section of a SEND or MESSAGE frame, as plain values."""

    checksum: str = "absent"  # valid | invalid | absent | unverified (frame damaged by a capture gap)
    checksum_wire: int | None = None
    checksum_computed: int | None = None
    broker_entry_metadata: dict | None = None
    metadata: dict | None = None  # MessageMetadata in the JSON contract's form
    metadata_size: int | None = None
    compression: int = 0  # the codec's number, also one this schema does not know
    payload_size: int = 0  # bytes as on the wire (compressed, encrypted, batched)
    uncompressed_size: int | None = None  # bytes after decompression, when it was decompressed
    encrypted: bool = False
    messages: list[dict] = field(default_factory=list)
    marker: dict | None = None  # decoded PulsarMarkers message
    findings: list[Finding] = field(default_factory=list)


def decode_payload_section(frame: bytes, pos: int, *, damaged: bool = False,
                           ack_set: list[int] | None = None, max_decompressed: int,
                           brief: bool = False) -> PayloadSection:
    """Decode ``frame[pos:]``; ``damaged`` means bytes at the end of the frame were lost to a capture gap;
    ``brief`` keeps only the metadata fields that one-line views and the session read (``BRIEF_METADATA``)."""
    sec = PayloadSection()
    end = len(frame)
    problems = sec.findings
    if end - pos >= 2 and _U16.unpack_from(frame, pos)[0] == MAGIC_BROKER_ENTRY_METADATA:
        if end - pos < 6:
            problems.append(Finding("payload.broker_entry_metadata", {"case": "cut"}))
            return sec
        size = _U32.unpack_from(frame, pos + 2)[0]
        start = pos + 6
        if start + size > end:
            problems.append(Finding("payload.broker_entry_metadata", {"case": "size", "size": size}))
            return sec
        bem = api.BrokerEntryMetadata()
        try:
            bem.ParseFromString(frame[start:start + size])
            sec.broker_entry_metadata = message_to_dict(bem)
        except DecodeError as exc:
            problems.append(Finding("payload.broker_entry_metadata", {"case": "unparsable", "error": str(exc)}))
        pos = start + size
    if end - pos >= 2 and _U16.unpack_from(frame, pos)[0] == MAGIC_CRC32C:
        if end - pos < 6:
            problems.append(Finding("payload.checksum_cut", {}))
            return sec
        sec.checksum_wire = _U32.unpack_from(frame, pos + 2)[0]
        pos += 6
        if damaged:
            sec.checksum = "unverified"
        else:
            sec.checksum_computed = _crc32c.crc32c(frame[pos:])
            if sec.checksum_computed == sec.checksum_wire:
                sec.checksum = "valid"
            else:
                sec.checksum = "invalid"
                problems.append(Finding("checksum.invalid", {"wire": sec.checksum_wire,
                                                             "computed": sec.checksum_computed}))
    if end - pos < 4:
        problems.append(Finding("payload.metadata_size", {}))
        return sec
    msize = _U32.unpack_from(frame, pos)[0]
    pos += 4
    if pos + msize > end:
        problems.append(Finding("payload.metadata_size", {"size": msize, "left": end - pos}))
        return sec
    md = api.MessageMetadata()
    try:
        md.ParseFromString(frame[pos:pos + msize])
    except DecodeError as exc:
        problems.append(Finding("payload.metadata_unparsable", {"error": str(exc)}))
        return sec
    sec.metadata = brief_metadata(md) if brief else message_to_dict(md)
    sec.metadata_size = msize
    if not md.IsInitialized():
        problems.append(Finding("payload.metadata_missing_required", {"fields": md.FindInitializationErrors()}))
    payload = frame[pos + msize:]
    sec.payload_size = len(payload)
    if damaged:
        problems.append(Finding("payload.incomplete", {"captured": len(payload)}))
        msg = {"payload_size": len(payload), "payload": None}
        if md.HasField("chunk_id") and md.HasField("uuid"):  # a damaged chunk: its message is lost (chunk.lost)
            msg.update(chunk_id=md.chunk_id, num_chunks=md.num_chunks_from_msg, uuid=text(md.uuid))
        sec.messages.append(msg)
        return sec
    _decode_messages(sec, md, payload, ack_set, max_decompressed)
    return sec


def _decode_messages(sec: PayloadSection, md, payload: bytes, ack_set, max_decompressed: int) -> None:
    compression = md.compression
    if not md.HasField("compression"):
        # proto2 closed enum: a codec this schema does not know (a newer client) parses as absent and reads as
        # NONE; its number is kept among the unknown fields. Never treat such a payload as uncompressed.
        unknown = _unknown_varint(md, _COMPRESSION_FIELD)
        if unknown is not None:
            compression = unknown
    sec.compression = compression
    if len(md.encryption_keys):
        # The payload (compressed, batched) is ciphertext; the metadata stays in the clear.
        sec.encrypted = True
        if md.HasField("num_messages_in_batch"):
            # One placeholder per message, so counts stay right although sizes and contents are unknown.
            sec.messages = [{"payload_size": None, "payload": None, "batch_index": i, "encrypted": True}
                            for i in range(max(md.num_messages_in_batch, 0))]
        else:
            msg = _single_message(md, None, len(payload))
            msg["encrypted"] = True
            sec.messages.append(msg)
        return
    if md.HasField("chunk_id") and md.HasField("uuid"):
        # A chunk is a slice of the (compressed) whole message: decompress only after reassembly.
        sec.messages.append({"payload_size": len(payload), "payload": payload, "sequence_id": md.sequence_id,
                             "properties": {text(kv.key): text(kv.value) for kv in md.properties},
                             "chunk_id": md.chunk_id, "num_chunks": md.num_chunks_from_msg, "uuid": text(md.uuid)})
        return
    if compression:
        declared = md.uncompressed_size if md.HasField("uncompressed_size") else None
        result = codecs.decompress(compression, payload, declared, max_decompressed)
        if result.problem:
            sec.findings.append(result.problem)
        if result.data is None:
            sec.messages.append({"payload_size": len(payload), "payload": None, "sequence_id": md.sequence_id})
            return
        payload = result.data
        sec.uncompressed_size = len(payload)
    if md.HasField("marker_type"):
        _decode_marker(sec, md.marker_type, payload)
    if md.HasField("num_messages_in_batch"):
        sec.messages = split_batch(payload, md.num_messages_in_batch, sec.findings, ack_set)
        return
    sec.messages.append(_single_message(md, payload, len(payload)))


def _single_message(md, payload: bytes | None, size: int) -> dict:
    """A non-batched message: its per-message fields live in the MessageMetadata."""
    msg = {"payload_size": size, "payload": payload, "sequence_id": md.sequence_id}
    if md.HasField("partition_key"):
        msg["partition_key"] = text(md.partition_key)
    if md.HasField("ordering_key"):
        msg["ordering_key"] = md.ordering_key
    msg["properties"] = {text(kv.key): text(kv.value) for kv in md.properties} if len(md.properties) else {}
    if md.HasField("event_time"):
        msg["event_time"] = md.event_time
    if md.null_value:
        msg["null_value"] = True
    if md.null_partition_key:
        msg["null_partition_key"] = True
    return msg


# The MessageMetadata fields one-line views show (compression, schema, encryption, marker, batch size) and the
# session reads (chunks), in the JSON contract's form: what a summary decode keeps.
BRIEF_METADATA = ("producer_name", "compression", "uncompressed_size", "num_messages_in_batch", "schema_version",
                  "encryption_algo", "marker_type", "uuid", "chunk_id", "num_chunks_from_msg", "total_chunk_msg_size",
                  "deliver_at_time")
_COMPRESSION_NAMES = {v.number: v.name for v in api.CompressionType.DESCRIPTOR.values}


def brief_metadata(md) -> dict:
    out = {}
    for name in BRIEF_METADATA:
        if md.HasField(name):
            value = getattr(md, name)
            if name == "compression":
                value = _COMPRESSION_NAMES.get(value, value)
            elif name == "schema_version":
                value = base64.b64encode(value).decode("ascii")
            elif type(value) is not int:
                value = text(value)
            out[name] = value
    if len(md.encryption_keys):
        out["encryption_keys"] = [{"key": text(k.key)} for k in md.encryption_keys]
    return out


# SingleMessageMetadata field number -> message key (1: properties, 3: payload_size, 6: partition_key_b64_encoded)
_SMM_KEYS = {2: "partition_key", 4: "compacted_out", 5: "event_time", 7: "ordering_key", 8: "sequence_id",
             9: "null_value", 10: "null_partition_key"}


def split_batch(payload: bytes, expected: int, problems: list[Finding],
                ack_set: list[int] | None = None) -> list[dict]:
    """Split a batch payload into its entries; keep every readable entry even when the batch is damaged."""
    out: list[dict] = []
    pos = 0
    end = len(payload)
    index = 0
    parse = api.SingleMessageMetadata.FromString
    unpack = _U32.unpack_from
    keys = _SMM_KEYS
    while pos < end:
        if end - pos < 4:
            problems.append(Finding("batch.malformed", {"entry": index, "case": "stray", "left": end - pos}))
            break
        smm_size = unpack(payload, pos)[0]
        pos += 4
        if pos + smm_size > end:
            problems.append(Finding("batch.malformed", {"entry": index, "case": "metadata_size", "size": smm_size}))
            break
        try:
            fields = parse(payload[pos:pos + smm_size]).ListFields()
        except DecodeError as exc:
            problems.append(Finding("batch.malformed", {"entry": index, "case": "unparsable", "error": str(exc)}))
            break
        pos += smm_size
        size = -1
        msg = {"payload_size": -1, "payload": None, "batch_index": index, "properties": {}}
        for fd, value in fields:
            number = fd.number
            if number == 3:
                size = value
            elif number == 1:
                msg["properties"] = {text(kv.key): text(kv.value) for kv in value}
            else:
                key = keys.get(number)
                if key is not None:
                    msg[key] = text(value) if number == 2 else value
        if size == -1:
            problems.append(Finding("batch.malformed", {"entry": index, "case": "no_payload_size"}))
            break
        if size < 0 or pos + size > end:
            problems.append(Finding("batch.malformed", {"entry": index, "case": "payload_size", "size": size,
                                                        "left": end - pos}))
            break
        msg["payload_size"] = size
        msg["payload"] = payload[pos:pos + size]
        pos += size
        if ack_set and not _bit(ack_set, index):
            msg["acked"] = True
        out.append(msg)
        index += 1
    if len(out) != expected:
        problems.append(Finding("batch.count_mismatch", {"entries": len(out), "expected": expected}))
    return out


_COMPRESSION_FIELD = api.MessageMetadata.DESCRIPTOR.fields_by_name["compression"].number


def _unknown_varint(msg, number: int) -> int | None:
    try:
        fields = UnknownFieldSet(msg)
    except Exception:  # pragma: no cover - the API varies across protobuf runtimes
        return None
    value = None
    for f in fields:
        if f.field_number == number and f.wire_type == 0:
            value = f.data  # the last occurrence wins, as in protobuf
    return value


def _bit(words: list[int], i: int) -> bool:
    # java.util.BitSet.toLongArray layout: bit i lives in word i // 64 at position i % 64.
    w = i >> 6
    return w < len(words) and bool((words[w] >> (i & 63)) & 1)


def _decode_marker(sec: PayloadSection, marker_type: int, payload: bytes) -> None:
    cls = MARKER_MESSAGES.get(marker_type)
    if cls is None:
        return  # transaction markers carry no body
    msg = cls()
    try:
        msg.ParseFromString(payload)
        sec.marker = message_to_dict(msg)
    except DecodeError as exc:
        sec.findings.append(Finding("marker.unparsable", {"marker": cls.__name__, "error": str(exc)}))
