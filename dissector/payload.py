"""The payload section of SEND and MESSAGE frames, as a pure function of the frame bytes.

Layout after the BaseCommand (big-endian)::

    ([0x0e02][BEM_SIZE u32][BrokerEntryMetadata])?   broker → client only
    ([0x0e01][CRC32C u32])?                           CRC32C over everything after it to the end of the frame
    [METADATA_SIZE u32][MessageMetadata][payload]

The payload is then decrypted (impossible here), decompressed and, when ``num_messages_in_batch`` is present,
split into ``[SMM_SIZE u32][SingleMessageMetadata][payload]`` entries.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

import crc32c as _crc32c
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from . import codecs
from .expert import ERROR, WARNING, Problem
from .pbdict import text
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


class AppMessage:
    """One application message: a whole non-batched payload, one batch entry, or one chunk.

    A plain class with class-level defaults: batches of thousands of entries set only the attributes
    present on the wire, which keeps the per-entry cost low.
    """

    payload: bytes | None  # None when it cannot be recovered (encrypted, decompression failed)
    payload_size: int | None  # None only for an entry of an encrypted batch
    batch_index: int | None = None
    sequence_id: int | None = None
    partition_key: str | None = None
    ordering_key: bytes | None = None
    properties: dict[str, str] | None = None
    event_time: int | None = None
    null_value: bool = False
    null_partition_key: bool = False
    compacted_out: bool = False
    acked: bool = False  # MESSAGE ack_set says the entry was already acknowledged
    chunk_id: int | None = None  # set for one chunk of a chunked message
    num_chunks: int | None = None
    uuid: str | None = None
    encrypted: bool = False  # ciphertext: contents, and for a batch entry the size, are unknown
    _sha256: str | None = None

    def __init__(self, payload: bytes | None, payload_size: int, **fields) -> None:
        self.payload = payload
        self.payload_size = payload_size
        for name, value in fields.items():
            setattr(self, name, value)

    @property
    def payload_sha256(self) -> str | None:
        if self._sha256 is None and self.payload is not None:
            self._sha256 = hashlib.sha256(self.payload).hexdigest()
        return self._sha256

    def __repr__(self) -> str:
        return f"AppMessage({self.payload_size} bytes, batch_index={self.batch_index})"


@dataclass(slots=True)
class PayloadSection:
    checksum: str = "absent"  # valid | invalid | absent | unverified (frame damaged by a capture gap)
    checksum_wire: int | None = None
    checksum_computed: int | None = None
    broker_entry_metadata: api.BrokerEntryMetadata | None = None
    metadata: api.MessageMetadata | None = None
    metadata_size: int | None = None
    raw_payload: bytes = b""  # as on the wire (compressed, encrypted, batched)
    decompressed: bytes | None = None  # payload after decompression; None if not needed or failed
    encrypted: bool = False
    messages: list[AppMessage] = field(default_factory=list)
    marker: object | None = None  # decoded PulsarMarkers message
    problems: list[str] = field(default_factory=list)


def decode_payload_section(frame: bytes, pos: int, *, damaged: bool = False,
                           ack_set: list[int] | None = None,
                           max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED) -> PayloadSection:
    """Decode ``frame[pos:]``; ``damaged`` means bytes at the end of the frame were lost to a capture gap."""
    sec = PayloadSection()
    end = len(frame)
    problems = sec.problems
    if end - pos >= 2 and _U16.unpack_from(frame, pos)[0] == MAGIC_BROKER_ENTRY_METADATA:
        if end - pos < 6:
            problems.append(Problem("payload.broker_entry_metadata", ERROR, "broker entry metadata header cut short"))
            return sec
        size = _U32.unpack_from(frame, pos + 2)[0]
        start = pos + 6
        if start + size > end:
            problems.append(Problem("payload.broker_entry_metadata", ERROR,
                                    f"broker entry metadata size {size} runs past the end of the frame"))
            return sec
        bem = api.BrokerEntryMetadata()
        try:
            bem.ParseFromString(frame[start:start + size])
            sec.broker_entry_metadata = bem
        except DecodeError as exc:
            problems.append(Problem("payload.broker_entry_metadata", ERROR,
                                    f"broker entry metadata does not parse: {exc}"))
        pos = start + size
    if end - pos >= 2 and _U16.unpack_from(frame, pos)[0] == MAGIC_CRC32C:
        if end - pos < 6:
            problems.append(Problem("payload.checksum_cut", ERROR, "checksum field cut short"))
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
                problems.append(Problem("checksum.invalid", ERROR,
                                        f"checksum mismatch: frame says 0x{sec.checksum_wire:08x}, "
                                f"computed 0x{sec.checksum_computed:08x}"))
    if end - pos < 4:
        problems.append(Problem("payload.metadata_size", ERROR, "payload section has no metadata size"))
        return sec
    msize = _U32.unpack_from(frame, pos)[0]
    pos += 4
    if pos + msize > end:
        problems.append(Problem("payload.metadata_size", ERROR,
                                f"metadata size {msize} runs past the end of the frame ({end - pos} bytes left)"))
        return sec
    md = api.MessageMetadata()
    try:
        md.ParseFromString(frame[pos:pos + msize])
    except DecodeError as exc:
        problems.append(Problem("payload.metadata_unparsable", ERROR, f"MessageMetadata does not parse: {exc}"))
        return sec
    sec.metadata = md
    sec.metadata_size = msize
    if not md.IsInitialized():
        problems.append(Problem("payload.metadata_missing_required", ERROR,
                                "MessageMetadata lacks required fields: " + ", ".join(md.FindInitializationErrors())))
    sec.raw_payload = payload = frame[pos + msize:]
    if damaged:
        problems.append(Problem("payload.incomplete", WARNING,
                                f"payload incomplete: frame damaged by a capture gap ({len(payload)} bytes captured)"))
        sec.messages.append(AppMessage(None, len(payload)))
        return sec
    _decode_messages(sec, md, payload, ack_set, max_decompressed)
    return sec


def _decode_messages(sec: PayloadSection, md, payload: bytes, ack_set, max_decompressed: int) -> None:
    problems = sec.problems
    if len(md.encryption_keys):
        # The payload (compressed, batched) is ciphertext; the metadata stays in the clear.
        sec.encrypted = True
        if md.HasField("num_messages_in_batch"):
            # One placeholder per message, so counts stay right although sizes and contents are unknown.
            sec.messages = [AppMessage(None, None, batch_index=i, encrypted=True)
                            for i in range(max(md.num_messages_in_batch, 0))]
        else:
            msg = _single_message(md, None, len(payload))
            msg.encrypted = True
            sec.messages.append(msg)
        return
    if md.HasField("chunk_id") and md.HasField("uuid"):
        # A chunk is a slice of the (compressed) whole message: decompress only after reassembly.
        sec.messages.append(AppMessage(payload, len(payload), sequence_id=md.sequence_id,
                                       properties={text(kv.key): text(kv.value) for kv in md.properties},
                                       chunk_id=md.chunk_id, num_chunks=md.num_chunks_from_msg, uuid=text(md.uuid)))
        return
    compression = md.compression
    if not md.HasField("compression"):
        # proto2 closed enum: a codec this schema does not know (a newer client) parses as absent and reads as
        # NONE; its number is kept among the unknown fields. Never treat such a payload as uncompressed.
        unknown = _unknown_varint(md, _COMPRESSION_FIELD)
        if unknown is not None:
            compression = unknown
    if compression:
        declared = md.uncompressed_size if md.HasField("uncompressed_size") else None
        result = codecs.decompress(compression, payload, declared, max_decompressed)
        if result.problem:
            problems.append(Problem("payload.decompression", ERROR, result.problem))
        if result.data is None:
            sec.messages.append(AppMessage(None, len(payload), sequence_id=md.sequence_id))
            return
        payload = sec.decompressed = result.data
    if md.HasField("marker_type"):
        _decode_marker(sec, md.marker_type, payload)
    if md.HasField("num_messages_in_batch"):
        sec.messages = split_batch(payload, md.num_messages_in_batch, problems, ack_set)
        return
    sec.messages.append(_single_message(md, payload, len(payload)))


def _single_message(md, payload: bytes | None, size: int) -> AppMessage:
    """A non-batched message: its per-message fields live in the MessageMetadata."""
    msg = object.__new__(AppMessage)  # only the fields present are set; the rest keep their class defaults
    msg.payload = payload
    msg.payload_size = size
    msg.sequence_id = md.sequence_id
    msg.properties = {text(kv.key): text(kv.value) for kv in md.properties} if len(md.properties) else {}
    if md.HasField("partition_key"):
        msg.partition_key = text(md.partition_key)
    if md.HasField("ordering_key"):
        msg.ordering_key = md.ordering_key
    if md.HasField("event_time"):
        msg.event_time = md.event_time
    if md.null_value:
        msg.null_value = True
    if md.null_partition_key:
        msg.null_partition_key = True
    return msg


_SMM_ATTRS = {1: None, 2: "partition_key", 3: None, 4: "compacted_out", 5: "event_time", 7: "ordering_key",
              8: "sequence_id", 9: "null_value", 10: "null_partition_key"}  # 6: partition_key_b64_encoded


def split_batch(payload: bytes, expected: int, problems: list[str],
                ack_set: list[int] | None = None) -> list[AppMessage]:
    """Split a batch payload into its entries; keep every readable entry even when the batch is damaged."""
    out: list[AppMessage] = []
    pos = 0
    end = len(payload)
    index = 0
    parse = api.SingleMessageMetadata.FromString
    unpack = _U32.unpack_from
    attrs = _SMM_ATTRS
    new = object.__new__
    while pos < end:
        if end - pos < 4:
            problems.append(Problem("batch.malformed", ERROR,
                                    f"batch entry {index}: {end - pos} stray bytes after the last entry"))
            break
        smm_size = unpack(payload, pos)[0]
        pos += 4
        if pos + smm_size > end:
            problems.append(Problem("batch.malformed", ERROR,
                                    f"batch entry {index}: metadata size {smm_size} runs past the end of the payload"))
            break
        try:
            fields = parse(payload[pos:pos + smm_size]).ListFields()
        except DecodeError as exc:
            problems.append(Problem("batch.malformed", ERROR,
                                    f"batch entry {index}: SingleMessageMetadata does not parse: {exc}"))
            break
        pos += smm_size
        msg = new(AppMessage)  # skips __init__: the attributes are set right here
        msg.payload_size = -1
        msg.batch_index = index
        msg.properties = {}
        for fd, value in fields:
            number = fd.number
            if number == 3:
                msg.payload_size = value
            elif number == 1:
                msg.properties = {text(kv.key): text(kv.value) for kv in value}
            else:
                name = attrs.get(number)
                if name is not None:
                    setattr(msg, name, text(value) if number == 2 else value)
        size = msg.payload_size
        if size == -1:
            problems.append(Problem("batch.malformed", ERROR,
                                    f"batch entry {index}: SingleMessageMetadata has no payload_size"))
            break
        if size < 0 or pos + size > end:
            problems.append(Problem("batch.malformed", ERROR,
                                    f"batch entry {index}: payload_size {size} runs past the end of the payload "
                            f"({end - pos} bytes left)"))
            break
        msg.payload = payload[pos:pos + size]
        pos += size
        if ack_set and not _bit(ack_set, index):
            msg.acked = True
        out.append(msg)
        index += 1
    if len(out) != expected:
        problems.append(Problem("batch.count_mismatch", ERROR,
                                f"batch holds {len(out)} entries but num_messages_in_batch is {expected}"))
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
        sec.marker = msg
    except DecodeError as exc:
        sec.problems.append(Problem("marker.unparsable", ERROR, f"marker body ({cls.__name__}) does not parse: {exc}"))
