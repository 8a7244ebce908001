"""Builders for synthetic Pulsar frames and for pcaps that carry them (test helper).

Frames::

    BASE_COMMAND, TYPE_NUMBERS, ...    BaseCommand types and sub-command fields, written from upstream (below)
    command_bytes(type, **fields)      the serialized BaseCommand, encoded by hand from BASE_COMMAND
    command(type, **fields)            the same, parsed into a BaseCommand message (for tests that edit it)
    subcommand(type, **fields)         the sub-command message alone
    simple_frame(type, **fields)       [TOTAL][CMD_SIZE][BaseCommand]
    raw_frame(cmd_bytes, rest=b"", total=None, cmd_size=None)   any sizes, for malformed frames
    payload_frame(type, fields, metadata, payload, checksum=True, broker_entry_metadata=None)
    send_frame(payload, producer_id=1, sequence_id=0, metadata=None, ...)
    message_frame(payload, consumer_id=1, ledger_id=1, entry_id=0, metadata=None, ...)
    metadata(**fields)                 MessageMetadata with the required fields set
    smm(payload_size, **fields)        SingleMessageMetadata
    batch_payload([(smm or dict, body), ...] or [bytes, ...])
    compress(codec, data)              LZ4 raw block, ZLIB sync-flushed and never finished, ZSTD, SNAPPY raw
    initialized(message)               fill every required field of a protobuf message with a placeholder

Captures::

    tcp_pcap(path, items, segment_size=..., drop=..., reorder=..., handshake=True)

``items`` are frame byte strings (client → broker) or ``(direction, bytes)`` with direction ``"c"``
(client → broker) or ``"b"`` (broker → client).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from itertools import cycle
from typing import Iterable, Sequence

import cramjam
import crc32c as _crc32c
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

import pcapgen
from pulsar_pb import PulsarApi_pb2 as api

# ------------------------------------------------------------------------------ BaseCommand types (literal)
# BaseCommand.Type numbers and, for each type, the BaseCommand field that carries its sub-command: field number,
# field name and message type. Written out from the upstream definition, apache/pulsar-client-cpp
# proto/PulsarApi.proto at commit 983435aae4c2bf9164d9e775f6a11576ad44561d (PR #600, 2026-07-09, "synced from
# apache/pulsar master": the newest upstream, Type 2-81), `enum Type` and the `optional Command... x = N;` lines
# of `message BaseCommand`. NOT read from this project's proto/ or dissector/: frames built here are encoded by
# hand from these numbers (see command_bytes), so a wrong type -> field mapping in the decoder cannot build the
# frames it is tested with.
#   name: (type number, sub-command field number, sub-command field name, sub-command message)
BASE_COMMAND = {
    "CONNECT": (2, 2, "connect", "CommandConnect"),
    "CONNECTED": (3, 3, "connected", "CommandConnected"),
    "SUBSCRIBE": (4, 4, "subscribe", "CommandSubscribe"),
    "PRODUCER": (5, 5, "producer", "CommandProducer"),
    "SEND": (6, 6, "send", "CommandSend"),
    "SEND_RECEIPT": (7, 7, "send_receipt", "CommandSendReceipt"),
    "SEND_ERROR": (8, 8, "send_error", "CommandSendError"),
    "MESSAGE": (9, 9, "message", "CommandMessage"),
    "ACK": (10, 10, "ack", "CommandAck"),
    "FLOW": (11, 11, "flow", "CommandFlow"),
    "UNSUBSCRIBE": (12, 12, "unsubscribe", "CommandUnsubscribe"),
    "SUCCESS": (13, 13, "success", "CommandSuccess"),
    "ERROR": (14, 14, "error", "CommandError"),
    "CLOSE_PRODUCER": (15, 15, "close_producer", "CommandCloseProducer"),
    "CLOSE_CONSUMER": (16, 16, "close_consumer", "CommandCloseConsumer"),
    "PRODUCER_SUCCESS": (17, 17, "producer_success", "CommandProducerSuccess"),
    "PING": (18, 18, "ping", "CommandPing"),
    "PONG": (19, 19, "pong", "CommandPong"),
    "REDELIVER_UNACKNOWLEDGED_MESSAGES": (20, 20, "redeliverUnacknowledgedMessages", "CommandRedeliverUnacknowledgedMessages"),
    "PARTITIONED_METADATA": (21, 21, "partitionMetadata", "CommandPartitionedTopicMetadata"),
    "PARTITIONED_METADATA_RESPONSE": (22, 22, "partitionMetadataResponse", "CommandPartitionedTopicMetadataResponse"),
    "LOOKUP": (23, 23, "lookupTopic", "CommandLookupTopic"),
    "LOOKUP_RESPONSE": (24, 24, "lookupTopicResponse", "CommandLookupTopicResponse"),
    "CONSUMER_STATS": (25, 25, "consumerStats", "CommandConsumerStats"),
    "CONSUMER_STATS_RESPONSE": (26, 26, "consumerStatsResponse", "CommandConsumerStatsResponse"),
    "REACHED_END_OF_TOPIC": (27, 27, "reachedEndOfTopic", "CommandReachedEndOfTopic"),
    "SEEK": (28, 28, "seek", "CommandSeek"),
    "GET_LAST_MESSAGE_ID": (29, 29, "getLastMessageId", "CommandGetLastMessageId"),
    "GET_LAST_MESSAGE_ID_RESPONSE": (30, 30, "getLastMessageIdResponse", "CommandGetLastMessageIdResponse"),
    "ACTIVE_CONSUMER_CHANGE": (31, 31, "active_consumer_change", "CommandActiveConsumerChange"),
    "GET_TOPICS_OF_NAMESPACE": (32, 32, "getTopicsOfNamespace", "CommandGetTopicsOfNamespace"),
    "GET_TOPICS_OF_NAMESPACE_RESPONSE": (33, 33, "getTopicsOfNamespaceResponse", "CommandGetTopicsOfNamespaceResponse"),
    "GET_SCHEMA": (34, 34, "getSchema", "CommandGetSchema"),
    "GET_SCHEMA_RESPONSE": (35, 35, "getSchemaResponse", "CommandGetSchemaResponse"),
    "AUTH_CHALLENGE": (36, 36, "authChallenge", "CommandAuthChallenge"),
    "AUTH_RESPONSE": (37, 37, "authResponse", "CommandAuthResponse"),
    "ACK_RESPONSE": (38, 38, "ackResponse", "CommandAckResponse"),
    "GET_OR_CREATE_SCHEMA": (39, 39, "getOrCreateSchema", "CommandGetOrCreateSchema"),
    "GET_OR_CREATE_SCHEMA_RESPONSE": (40, 40, "getOrCreateSchemaResponse", "CommandGetOrCreateSchemaResponse"),
    "NEW_TXN": (50, 50, "newTxn", "CommandNewTxn"),
    "NEW_TXN_RESPONSE": (51, 51, "newTxnResponse", "CommandNewTxnResponse"),
    "ADD_PARTITION_TO_TXN": (52, 52, "addPartitionToTxn", "CommandAddPartitionToTxn"),
    "ADD_PARTITION_TO_TXN_RESPONSE": (53, 53, "addPartitionToTxnResponse", "CommandAddPartitionToTxnResponse"),
    "ADD_SUBSCRIPTION_TO_TXN": (54, 54, "addSubscriptionToTxn", "CommandAddSubscriptionToTxn"),
    "ADD_SUBSCRIPTION_TO_TXN_RESPONSE": (55, 55, "addSubscriptionToTxnResponse", "CommandAddSubscriptionToTxnResponse"),
    "END_TXN": (56, 56, "endTxn", "CommandEndTxn"),
    "END_TXN_RESPONSE": (57, 57, "endTxnResponse", "CommandEndTxnResponse"),
    "END_TXN_ON_PARTITION": (58, 58, "endTxnOnPartition", "CommandEndTxnOnPartition"),
    "END_TXN_ON_PARTITION_RESPONSE": (59, 59, "endTxnOnPartitionResponse", "CommandEndTxnOnPartitionResponse"),
    "END_TXN_ON_SUBSCRIPTION": (60, 60, "endTxnOnSubscription", "CommandEndTxnOnSubscription"),
    "END_TXN_ON_SUBSCRIPTION_RESPONSE": (61, 61, "endTxnOnSubscriptionResponse", "CommandEndTxnOnSubscriptionResponse"),
    "TC_CLIENT_CONNECT_REQUEST": (62, 62, "tcClientConnectRequest", "CommandTcClientConnectRequest"),
    "TC_CLIENT_CONNECT_RESPONSE": (63, 63, "tcClientConnectResponse", "CommandTcClientConnectResponse"),
    "WATCH_TOPIC_LIST": (64, 64, "watchTopicList", "CommandWatchTopicList"),
    "WATCH_TOPIC_LIST_SUCCESS": (65, 65, "watchTopicListSuccess", "CommandWatchTopicListSuccess"),
    "WATCH_TOPIC_UPDATE": (66, 66, "watchTopicUpdate", "CommandWatchTopicUpdate"),
    "WATCH_TOPIC_LIST_CLOSE": (67, 67, "watchTopicListClose", "CommandWatchTopicListClose"),
    "TOPIC_MIGRATED": (68, 68, "topicMigrated", "CommandTopicMigrated"),
    "SCALABLE_TOPIC_LOOKUP": (70, 70, "scalableTopicLookup", "CommandScalableTopicLookup"),
    "SCALABLE_TOPIC_UPDATE": (71, 71, "scalableTopicUpdate", "CommandScalableTopicUpdate"),
    "SCALABLE_TOPIC_CLOSE": (72, 72, "scalableTopicClose", "CommandScalableTopicClose"),
    "SCALABLE_TOPIC_SUBSCRIBE": (73, 73, "scalableTopicSubscribe", "CommandScalableTopicSubscribe"),
    "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE": (74, 74, "scalableTopicSubscribeResponse", "CommandScalableTopicSubscribeResponse"),
    "SCALABLE_TOPIC_ASSIGNMENT_UPDATE": (75, 75, "scalableTopicAssignmentUpdate", "CommandScalableTopicAssignmentUpdate"),
    "WATCH_SCALABLE_TOPICS": (76, 76, "watchScalableTopics", "CommandWatchScalableTopics"),
    "WATCH_SCALABLE_TOPICS_UPDATE": (77, 77, "watchScalableTopicsUpdate", "CommandWatchScalableTopicsUpdate"),
    "WATCH_SCALABLE_TOPICS_CLOSE": (78, 78, "watchScalableTopicsClose", "CommandWatchScalableTopicsClose"),
    "WATCH_TC_ASSIGNMENTS": (79, 79, "watchTcAssignments", "CommandWatchTcAssignments"),
    "WATCH_TC_ASSIGNMENTS_UPDATE": (80, 80, "watchTcAssignmentsUpdate", "CommandWatchTcAssignmentsUpdate"),
    "WATCH_TC_ASSIGNMENTS_CLOSE": (81, 81, "watchTcAssignmentsClose", "CommandWatchTcAssignmentsClose"),
}
TYPE_NUMBERS: dict[str, int] = {name: t for name, (t, _, _, _) in BASE_COMMAND.items()}
TYPE_NAMES: dict[int, str] = {t: name for name, t in TYPE_NUMBERS.items()}
SUBCOMMAND_FIELD_NUMBER: dict[int, int] = {t: f for t, f, _, _ in BASE_COMMAND.values()}
SUBCOMMAND_FIELD_NAME: dict[int, str] = {t: name for t, _, name, _ in BASE_COMMAND.values()}
SUBCOMMAND_MESSAGE: dict[int, str] = {t: msg for t, _, _, msg in BASE_COMMAND.values()}
PAYLOAD_TYPE_NAMES = frozenset({"SEND", "MESSAGE"})  # the only commands followed by a payload (Commands.java)

NONE, LZ4, ZLIB, ZSTD, SNAPPY = 0, 1, 2, 3, 4
MAGIC_CRC32C = b"\x0e\x01"
MAGIC_BEM = b"\x0e\x02"


def varint(value: int) -> bytes:
    """Protobuf base-128 varint."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _u32(n: int) -> bytes:
    return struct.pack(">I", n)


# ------------------------------------------------------------------------------------------ protobuf helpers
def _placeholder(field: FieldDescriptor):
    t = field.type
    if t == FieldDescriptor.TYPE_STRING:
        return "x"
    if t == FieldDescriptor.TYPE_BYTES:
        return b"x"
    if t == FieldDescriptor.TYPE_BOOL:
        return True
    if t == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values[0].number
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return 1.0
    return 1


def initialized(msg: Message) -> Message:
    """Set every unset required field (recursively) so that ``msg.IsInitialized()`` holds."""
    for field in msg.DESCRIPTOR.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.is_repeated:
                for sub in getattr(msg, field.name):
                    initialized(sub)
            elif field.is_required or msg.HasField(field.name):
                initialized(getattr(msg, field.name))
                if field.is_required and not msg.HasField(field.name):
                    getattr(msg, field.name).SetInParent()
        elif field.is_required and not msg.HasField(field.name):
            setattr(msg, field.name, _placeholder(field))
    return msg


def _set_fields(msg: Message, fields: dict) -> Message:
    for name, value in fields.items():
        field = msg.DESCRIPTOR.fields_by_name[name]
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.is_repeated:
                target = getattr(msg, name)
                for v in value:
                    if isinstance(v, Message):
                        target.add().CopyFrom(v)
                    else:
                        _set_fields(target.add(), v)
            elif isinstance(value, Message):
                getattr(msg, name).CopyFrom(value)
            else:
                sub = getattr(msg, name)
                sub.SetInParent()
                _set_fields(sub, value)
        elif field.is_repeated:
            getattr(msg, name).extend(value)
        else:
            setattr(msg, name, value)
    return msg


def type_number(t: int | str) -> int:
    return TYPE_NUMBERS[t] if isinstance(t, str) else t


def subcommand(t: int | str, *, fill: bool = True, **fields) -> Message:
    """The sub-command message of type ``t`` (class chosen by name from BASE_COMMAND) with ``fields``, then
    placeholders for missing required ones."""
    sub = getattr(api, SUBCOMMAND_MESSAGE[type_number(t)])()
    _set_fields(sub, fields)
    if fill:
        initialized(sub)
    return sub


def command_bytes(t: int | str, *, fill: bool = True, **fields) -> bytes:
    """Serialized BaseCommand, encoded by hand: field 1 (varint) = the type number, then the sub-command as a
    length-delimited field with the number BASE_COMMAND gives (not the one the generated classes know)."""
    num = type_number(t)
    body = subcommand(num, fill=fill, **fields).SerializePartialToString()
    return (varint(1 << 3 | 0) + varint(num)
            + varint(SUBCOMMAND_FIELD_NUMBER[num] << 3 | 2) + varint(len(body)) + body)


def command(t: int | str, *, fill: bool = True, **fields) -> api.BaseCommand:
    """BaseCommand of type ``t`` (parsed from command_bytes), for tests that edit it before serializing."""
    return api.BaseCommand.FromString(command_bytes(t, fill=fill, **fields))


# ------------------------------------------------------------------------------------------------ frames
def raw_frame(cmd: bytes, rest: bytes = b"", *, total: int | None = None, cmd_size: int | None = None) -> bytes:
    """[TOTAL_SIZE][CMD_SIZE][cmd][rest]; sizes are computed unless given (to build inconsistent frames)."""
    if cmd_size is None:
        cmd_size = len(cmd)
    if total is None:
        total = 4 + len(cmd) + len(rest)
    return _u32(total) + _u32(cmd_size) + cmd + rest


def simple_frame(t: int | str | api.BaseCommand, **fields) -> bytes:
    cmd = t.SerializePartialToString() if isinstance(t, Message) else command_bytes(t, **fields)
    return raw_frame(cmd)


def metadata(producer_name: str = "test-producer", sequence_id: int = 0, publish_time: int = 1_700_000_000_000,
             **fields) -> api.MessageMetadata:
    md = api.MessageMetadata(producer_name=producer_name, sequence_id=sequence_id, publish_time=publish_time)
    return _set_fields(md, fields)


def smm(payload_size: int, **fields) -> api.SingleMessageMetadata:
    m = api.SingleMessageMetadata(payload_size=payload_size)
    return _set_fields(m, fields)


def batch_payload(entries: Iterable) -> bytes:
    """Entries: body bytes, or (SingleMessageMetadata | dict of fields, body). payload_size defaults to len(body)."""
    out = []
    for e in entries:
        if isinstance(e, (bytes, bytearray)):
            meta, body = smm(len(e)), bytes(e)
        else:
            meta, body = e
            if not isinstance(meta, Message):
                fields = dict(meta)
                size = fields.pop("payload_size", len(body))
                meta = smm(size, **fields)
        raw = meta.SerializePartialToString()
        out.append(_u32(len(raw)) + raw + body)
    return b"".join(out)


def crc32c(data: bytes) -> int:
    return _crc32c.crc32c(data)


def payload_section(md: api.MessageMetadata | bytes, payload: bytes, *, checksum: bool | int | str = True,
                    broker_entry_metadata: api.BrokerEntryMetadata | dict | bytes | None = None) -> bytes:
    """([0x0e02][size][BEM])? ([0x0e01][crc])? [METADATA_SIZE][metadata][payload].

    ``checksum``: True = correct CRC32C, False = no checksum field, ``"bad"`` = the correct value + 1,
    an int = that value on the wire.
    """
    raw_md = md if isinstance(md, (bytes, bytearray)) else md.SerializePartialToString()
    body = _u32(len(raw_md)) + raw_md + payload
    out = b""
    if broker_entry_metadata is not None:
        if isinstance(broker_entry_metadata, dict):
            broker_entry_metadata = api.BrokerEntryMetadata(**broker_entry_metadata)
        bem = broker_entry_metadata if isinstance(broker_entry_metadata, (bytes, bytearray)) \
            else broker_entry_metadata.SerializePartialToString()
        out += MAGIC_BEM + _u32(len(bem)) + bem
    if checksum is not False:
        good = crc32c(body)
        value = (good + 1) & 0xFFFFFFFF if checksum == "bad" else good if checksum is True else int(checksum)
        out += MAGIC_CRC32C + _u32(value)
    return out + body


def payload_frame(t: int | str, fields: dict, md: api.MessageMetadata | bytes, payload: bytes, *,
                  checksum: bool | int | str = True, broker_entry_metadata=None) -> bytes:
    return raw_frame(command_bytes(t, **fields),
                     payload_section(md, payload, checksum=checksum, broker_entry_metadata=broker_entry_metadata))


def send_frame(payload: bytes = b"hello", *, producer_id: int = 1, sequence_id: int = 0,
               md: api.MessageMetadata | None = None, checksum: bool | int | str = True,
               broker_entry_metadata=None, **send_fields) -> bytes:
    if md is None:
        md = metadata(sequence_id=sequence_id)
    return payload_frame("SEND", dict(producer_id=producer_id, sequence_id=sequence_id, **send_fields), md, payload,
                         checksum=checksum, broker_entry_metadata=broker_entry_metadata)


def message_frame(payload: bytes = b"hello", *, consumer_id: int = 1, ledger_id: int = 1, entry_id: int = 0,
                  md: api.MessageMetadata | None = None, checksum: bool | int | str = True,
                  broker_entry_metadata=None, ack_set: Sequence[int] | None = None, **message_fields) -> bytes:
    if md is None:
        md = metadata()
    fields = dict(consumer_id=consumer_id, message_id={"ledgerId": ledger_id, "entryId": entry_id}, **message_fields)
    if ack_set is not None:
        fields["ack_set"] = list(ack_set)
    return payload_frame("MESSAGE", fields, md, payload, checksum=checksum,
                         broker_entry_metadata=broker_entry_metadata)


# ------------------------------------------------------------------------------------------- compression
def zlib_java(data: bytes) -> bytes:
    """What java.util.zip.Deflater + SYNC_FLUSH writes: zlib header, sync-flushed blocks, never finished."""
    co = zlib.compressobj()
    return co.compress(data) + co.flush(zlib.Z_SYNC_FLUSH)


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == LZ4:
        return bytes(cramjam.lz4.compress_block(data, store_size=False))
    if codec == ZLIB:
        return zlib_java(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    raise ValueError(codec)


# ---------------------------------------------------------------------------------------------- captures
CLIENT = ("10.0.0.1", 40000)
BROKER = ("10.0.0.2", 6650)


@dataclass
class DataSegment:
    index: int  # 0-based among data segments, in creation order
    direction: str  # "c" (client → broker) or "b"
    offset: int  # stream offset of the first byte
    data: bytes
    dropped: bool = False


def _normalize(items) -> list[tuple[str, bytes]]:
    out = []
    for it in items:
        if isinstance(it, (bytes, bytearray)):
            out.append(("c", bytes(it)))
        else:
            d, data = it
            d = {"c": "c", "b": "b", "to_broker": "c", "to_client": "b"}[d]
            out.append((d, bytes(data)))
    return out


def tcp_pcap(path, items, *, segment_size: int | Sequence[int] = 1400, drop: Iterable[int] = (),
             reorder: Iterable[tuple[int, int]] = (), handshake: bool = True, fin: bool = True,
             client: tuple[str, int] = CLIENT, broker: tuple[str, int] = BROKER, client_isn: int = 1000,
             broker_isn: int = 900_000, t0: float = 1_700_000_000.0, step: float = 0.001) -> list[DataSegment]:
    """Write a classic pcap (Ethernet) of one TCP connection carrying ``items``.

    Consecutive items in the same direction form one burst, cut into segments of ``segment_size`` bytes (an int,
    or a sequence of sizes used in turn over all segments). ``drop``: data-segment indexes left out of the file.
    ``reorder``: pairs of data-segment indexes whose positions in the file are swapped. Returns the data
    segments (with their stream offsets) so tests can reason about them.
    """
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    sizes = cycle([segment_size] if isinstance(segment_size, int) else list(segment_size))
    ends = {"c": (client, broker), "b": (broker, client)}
    isn = {"c": client_isn, "b": broker_isn}
    nxt = {"c": client_isn + (1 if handshake else 0), "b": broker_isn + (1 if handshake else 0)}
    base = dict(nxt)

    def pkt(direction: str, flags: str, seq: int, payload: bytes = b"") -> bytes:
        (sip, sport), (dip, dport) = ends[direction]
        other = "b" if direction == "c" else "c"
        tcp = TCP(sport=sport, dport=dport, seq=seq & 0xFFFFFFFF, ack=nxt[other] & 0xFFFFFFFF, flags=flags,
                  window=65535)
        p = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=sip, dst=dip) / tcp
        if payload:
            p = p / Raw(payload)
        return bytes(p)

    control_before: list[bytes] = []
    if handshake:
        (csip, csport), _ = ends["c"]
        control_before.append(pkt("c", "S", isn["c"]))
        syn_ack = pkt("b", "SA", isn["b"])
        control_before.append(syn_ack)
        control_before.append(pkt("c", "A", nxt["c"]))

    segments: list[DataSegment] = []
    packets: list[bytes] = []
    # group bursts
    bursts: list[tuple[str, bytes]] = []
    for d, data in _normalize(items):
        if bursts and bursts[-1][0] == d:
            bursts[-1] = (d, bursts[-1][1] + data)
        else:
            bursts.append((d, data))
    for d, data in bursts:
        pos = 0
        while pos < len(data):
            n = max(1, next(sizes))
            piece = data[pos:pos + n]
            seg = DataSegment(len(segments), d, nxt[d] - base[d], piece)
            packets.append(pkt(d, "PA", nxt[d], piece))
            segments.append(seg)
            nxt[d] += len(piece)
            pos += len(piece)
    dropped = set(drop)
    for i in dropped:
        segments[i].dropped = True
    order = list(range(len(packets)))
    for i, j in reorder:
        order[i], order[j] = order[j], order[i]
    body = [packets[i] for i in order if i not in dropped]
    closing: list[bytes] = []
    if fin:
        closing.append(pkt("c", "FA", nxt["c"]))
        nxt["c"] += 1
        closing.append(pkt("b", "FA", nxt["b"]))
        nxt["b"] += 1
        closing.append(pkt("c", "A", nxt["c"]))
    all_packets = control_before + body + closing
    pcapgen.write_pcap(path, [(t0 + i * step, p) for i, p in enumerate(all_packets)])
    return segments
