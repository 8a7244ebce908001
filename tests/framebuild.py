"""Builders for synthetic Pulsar frames and for pcaps that carry them (test helper).

Frames::

    command(type, **fields)            BaseCommand message (sub-command for ``type`` filled with ``fields``)
    command_bytes(type, **fields)      the serialized BaseCommand
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
from dissector.commands import SUBCOMMAND_FIELD, TYPE_NUMBERS
from dissector.pb import PulsarApi_pb2 as api

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


def command(t: int | str, *, fill: bool = True, **fields) -> api.BaseCommand:
    """BaseCommand of type ``t``; its sub-command gets ``fields``, then placeholders for missing required ones."""
    num = type_number(t)
    base = api.BaseCommand()
    base.type = num
    sub = getattr(base, SUBCOMMAND_FIELD[num])
    sub.SetInParent()
    _set_fields(sub, fields)
    if fill:
        initialized(sub)
    return base


def command_bytes(t: int | str, *, fill: bool = True, **fields) -> bytes:
    return command(t, fill=fill, **fields).SerializePartialToString()


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
