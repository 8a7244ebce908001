"""The hostile payloads of issue 34, built as capture files: each attack between a PING (and the PRODUCER of its
SENDs) before it and a PONG after it (what surrounds the attack must still decode).

    python tests/hostile_inputs.py OUT_DIR [--small]

writes every attack into OUT_DIR (``--small``: the sizes of the fuzz target's seeds, ``tests/hostile_seeds/``, which
``tools/fuzz/core_seeds.py`` copies; written again with ``python tests/hostile_inputs.py tests/hostile_seeds
--small``). ``tests/test_hostile_limits.py`` builds them with the sizes it needs.

The attacks (the sizes are parameters; the issue's figures were measured with the defaults below):
- ``encrypted_batch``: one SEND whose metadata carries an encryption key and claims ``entries`` batch entries;
  its payload is a few bytes (a 400-byte gzipped capture claiming ten million entries).
- ``honest_batch``: one ZLIB SEND whose payload splits into ``entries`` entries of 6 bytes each (an empty
  payload each): 11,184,810 entries fill the default 64 MiB decompression limit.
- ``unanswered_sends``: ``sends`` SENDs, never answered by a receipt, each decompressing to ``size`` bytes.
- ``big_payload``: one SEND whose payload decompresses to ``size`` bytes (``--payload`` shows it).
- ``open_journeys``: ``journeys`` SENDs, each with its receipt, each delivered ``deliveries`` times (the first,
  then redeliveries) and never acknowledged: every message journey stays open to the end (``report`` follows
  them: 300,000 journeys and 1,200,000 deliveries fill the tracker's caps of open journeys and milestones).
And the earlier list: ``unanswered_requests`` (a million LOOKUPs never answered), ``many_chunks`` (first chunks of
a million chunked messages), a decompression bomb of each codec (``*_bomb``: 80 MiB undeclared).
And ``held_chunks_and_buffers``: compressed chunks and out-of-order bytes on 40 connections, together past the
memory budget while each holder stays under its own caps.
"""

from __future__ import annotations

import gzip
import sys
import zlib
from functools import lru_cache
from pathlib import Path

import framebuild as fb

MiB = 1 << 20
# the default max_decompressed: what a payload may decompress to
DEFAULT_MAX_DECOMPRESSED = 64 * MiB
# one empty batch entry: [SMM_SIZE u32 = 2][SingleMessageMetadata: payload_size = 0]
EMPTY_ENTRY = b"\x00\x00\x00\x02\x18\x00"
HONEST_ENTRIES = DEFAULT_MAX_DECOMPRESSED // len(EMPTY_ENTRY)  # 11,184,810

PING = fb.simple_frame("PING")
PONG = fb.simple_frame("PONG")
# the SENDs' producer (the statistics count a producer's messages)
TOPIC = "persistent://public/default/hostile"
PRODUCER = fb.simple_frame("PRODUCER", producer_id=1, request_id=1, topic=TOPIC, producer_name="hostile")


@lru_cache(maxsize=8)
def _zlib_repeated(unit: bytes, count: int) -> bytes:
    """``unit * count`` compressed as Java's Deflater writes it (sync-flushed), without holding it twice."""
    co = zlib.compressobj(9)
    step = max(1, (1 << 20) // len(unit))
    block = unit * step
    parts, left = [], count
    while left:
        take = min(step, left)
        parts.append(co.compress(block if take == step else unit * take))
        left -= take
    parts.append(co.flush(zlib.Z_SYNC_FLUSH))
    return b"".join(parts)


def encrypted_batch_send(entries: int) -> bytes:
    md = fb.metadata(num_messages_in_batch=entries, encryption_keys=[{"key": "k", "value": b"\x01" * 8}],
                     encryption_algo="RSA")
    return fb.send_frame(b"\x07" * 32, md=md)


def honest_batch_send(entries: int, sequence_id: int = 0) -> bytes:
    body = _zlib_repeated(EMPTY_ENTRY, entries)
    md = fb.metadata(sequence_id=sequence_id, num_messages_in_batch=entries, compression=fb.ZLIB,
                     uncompressed_size=entries * len(EMPTY_ENTRY))
    return fb.send_frame(body, md=md, sequence_id=sequence_id)


# a payload of text (shown as text, escaped, by --payload)
TEXT_UNIT = b"pulsar-dissect \"quoted\"\n\t"


def compressed_send(size: int, sequence_id: int = 0, unit: bytes = TEXT_UNIT) -> bytes:
    body = _zlib_repeated(unit, size // len(unit))
    md = fb.metadata(sequence_id=sequence_id, compression=fb.ZLIB, uncompressed_size=size // len(unit) * len(unit))
    return fb.send_frame(body, md=md, sequence_id=sequence_id)


def _write(path: Path, frames: list[bytes], gzipped: bool = False) -> Path:
    items = [("c", PING), ("c", PRODUCER)] + [("c", f) for f in frames] + [("b", PONG)]
    if not gzipped:
        fb.tcp_pcap(path, items)
        return path
    plain = path.with_suffix(".raw")
    fb.tcp_pcap(plain, items)
    path.write_bytes(gzip.compress(plain.read_bytes(), 9, mtime=0))
    plain.unlink()
    return path


def encrypted_batch(path: Path, entries: int = 10_000_000) -> Path:
    return _write(path, [encrypted_batch_send(entries)], gzipped=True)


def honest_batch(path: Path, entries: int = HONEST_ENTRIES) -> Path:
    return _write(path, [honest_batch_send(entries)])


def unanswered_sends(path: Path, sends: int = 20, size: int = DEFAULT_MAX_DECOMPRESSED) -> Path:
    return _write(path, [compressed_send(size, sequence_id=i) for i in range(sends)])


def big_payload(path: Path, size: int = DEFAULT_MAX_DECOMPRESSED) -> Path:
    return _write(path, [compressed_send(size)])


# ------------------------------------------------------------------------------------- the earlier list
def _stream(path: Path, stream: bytes, seg: int = 1400) -> Path:
    """One connection's client bytes, PING first and a PONG back at the end, in segments built with struct
    (a million frames in a few seconds: scapy takes minutes)."""
    from test_hostile_transport import PSH, ACK, pkt, write

    stream = PING + stream
    packets = [pkt(0, 1000 + i, stream[i:i + seg], PSH | ACK) for i in range(0, len(stream), seg)]
    packets.append(pkt(0, 500, PONG, PSH | ACK, to_broker=False, ack=1000 + len(stream)))
    return write(path, packets)


def _numbered(template: bytes, marker: int, numbers: range) -> bytes:
    """``template`` once per number, its varint ``marker`` replaced by the number's (all of one width)."""
    old = fb.varint(marker)
    at = template.index(old)
    head, tail = template[:at], template[at + len(old):]
    return b"".join(head + fb.varint(n) + tail for n in numbers)


ID_BASE = 1 << 20  # ids from here to 2**21 have one varint width: frames of one size


def unanswered_requests(path: Path, requests: int = 1_000_000) -> Path:
    """``requests`` LOOKUPs, each its own request id, none answered (max_pending_requests forgets the oldest)."""
    assert requests <= ID_BASE
    template = fb.simple_frame("LOOKUP", topic=TOPIC, request_id=ID_BASE)
    return _stream(path, _numbered(template, ID_BASE, range(ID_BASE, ID_BASE + requests)))


def many_chunks(path: Path, chunks: int = 1_000_000) -> Path:
    """``chunks`` first chunks of as many chunked messages (each of 2 chunks, the second never sent; the uuid
    and the sequence id number them): max_chunked_messages abandons the oldest."""
    assert chunks <= ID_BASE
    md = fb.metadata(sequence_id=ID_BASE, uuid=str(ID_BASE), chunk_id=0, num_chunks_from_msg=2,
                     total_chunk_msg_size=8)
    template = fb.send_frame(b"abcd", md=md, sequence_id=ID_BASE, checksum=False)
    uuid = str(ID_BASE).encode()
    at = template.index(uuid)
    head, tail = template[:at], template[at + len(uuid):]
    # the uuid's text in place (its width fixed), then the sequence ids (in the command and the metadata)
    stream = b"".join((head + str(n).encode() + tail).replace(fb.varint(ID_BASE), fb.varint(n))
                      for n in range(ID_BASE, ID_BASE + chunks))
    return _stream(path, stream)


def decompression_bomb(path: Path, codec: int = fb.ZLIB, size: int = 80 * MiB) -> Path:
    """One SEND of ``codec`` whose payload, its uncompressed_size not declared, decompresses to ``size``
    bytes (beyond the default max_decompressed): stopped at the limit, payload.decompression."""
    body = _zlib_repeated(b"\0", size) if codec == fb.ZLIB else fb.compress(codec, bytes(size))
    md = fb.metadata(compression=codec)
    return _write(path, [fb.send_frame(body, md=md)])


def empty_ack_ids(path: Path, ids: int = 1_000_000) -> Path:
    """An ACK of ``ids`` empty MessageIdData (two bytes each on the wire, a kilobyte once decoded and checked):
    the parse keeps MAX_REPEATED_ELEMENTS and counts the rest (protobuf.repeated_elided)."""
    ack = b"\x08\x01" + b"\x10\x00" + b"\x1a\x00" * ids  # consumer_id 1, Individual, the ids
    command = b"\x08" + fb.varint(10) + b"\x52" + fb.varint(len(ack)) + ack  # type ACK, its field (10)
    return _stream(path, fb.raw_frame(command))


TUBEMQ_BROKER_PORT = 8123


def tubemq_messages(path: Path, messages: int = 1_000_000) -> Path:
    """A TubeMQ broker's GetMessageResponseB2C carrying ``messages`` empty messages (two bytes each on the
    wire, a map each in memory), between two that carry one: the record lists max_batch_entries of them and
    counts the rest."""
    import tubemq_wire as tw
    from test_hostile_transport import PSH, ACK, pkt, write

    def response(serial: int, count: int) -> bytes:
        # success (1) true, errCode (2) 200, then the messages (4): empty TransferedMessages
        body = b"\x08\x01" + b"\x10" + fb.varint(200) + b"\x22\x00" * count
        return tw.encode_frame(serial, tw.response_content(17, body))

    stream = response(1, 1) + response(2, messages) + response(3, 1)
    seg = 1400
    return write(path, [pkt(0, 1000 + i, stream[i:i + seg], PSH | ACK, to_broker=False, port=TUBEMQ_BROKER_PORT)
                        for i in range(0, len(stream), seg)])


SUBSCRIBE = fb.simple_frame("SUBSCRIBE", topic=TOPIC, subscription="hostile-sub", consumer_id=1, request_id=2,
                            consumer_name="hostile-consumer")


def open_journeys(path: Path, journeys: int = 300_000, deliveries: int = 4) -> Path:
    """``journeys`` messages sent, receipted and delivered ``deliveries`` times each (redelivery_count 0, 1, ...),
    none acknowledged, on one connection (the client's and the broker's bytes interleaved a block at a time)."""
    from test_hostile_transport import PSH, ACK, pkt, write

    assert journeys <= ID_BASE
    send = fb.send_frame(b"m", md=fb.metadata(sequence_id=ID_BASE), sequence_id=ID_BASE, checksum=False)
    receipt = fb.simple_frame("SEND_RECEIPT", producer_id=1, sequence_id=ID_BASE,
                              message_id={"ledgerId": 7, "entryId": ID_BASE})
    delivered = [fb.message_frame(b"m", consumer_id=1, ledger_id=7, entry_id=ID_BASE, checksum=False,
                                  md=fb.metadata(sequence_id=ID_BASE), redelivery_count=count)
                 for count in range(deliveries)]
    marker = fb.varint(ID_BASE)
    packets, seq = [], {True: 1000, False: 500}

    def segments(data: bytes, to_broker: bool) -> None:
        for i in range(0, len(data), 1400):
            part = data[i:i + 1400]
            packets.append(pkt(0, seq[to_broker], part, PSH | ACK, to_broker=to_broker, ack=seq[not to_broker]))
            seq[to_broker] += len(part)

    segments(PING + PRODUCER + SUBSCRIBE, True)
    block = 200  # journeys a block: the client's SENDs, then the broker's receipts and deliveries
    for first in range(0, journeys, block):
        numbers = [fb.varint(ID_BASE + n) for n in range(first, min(first + block, journeys))]
        segments(b"".join(send.replace(marker, n) for n in numbers), True)
        segments(b"".join(receipt.replace(marker, n) for n in numbers)
                 + b"".join(m.replace(marker, n) for n in numbers for m in delivered), False)
    segments(PONG, False)
    return write(path, packets)


def held_chunks_and_buffers(path: Path, connections: int = 40, chunk: int = 1 * MiB, chunks: int = 3,
                            held: int = 1_000_000) -> Path:
    """Two holders of wire bytes together past the memory budget, each under its own caps: ``connections``
    connections each send ``chunks`` chunks of ``chunk`` bytes of a ZLIB message whose last chunk never comes
    (compressed chunks held: 120 MiB in all by default, under max_chunk_bytes_total), then lose a segment and
    send ``held`` bytes beyond it, which the reassembly holds (40 MB in all, under max_buffered_total); the
    connections take turns, so that all hold at once. A PING opens each connection, a PONG answers at the end."""
    from test_hostile_transport import PSH, ACK, pkt, write

    seg, big = 1400, 60_000  # the held bytes in ordinary segments, the chunks in large ones (fewer packets)
    body = bytes(range(256)) * (chunk // 256)
    packets, ends = [], []
    for c in range(connections):
        stream = PING + PRODUCER
        for i in range(chunks):
            md = fb.metadata(sequence_id=0, uuid=f"held-{c}", chunk_id=i, num_chunks_from_msg=chunks + 1,
                             total_chunk_msg_size=(chunks + 1) * len(body), compression=fb.ZLIB,
                             uncompressed_size=(chunks + 1) * len(body))
            stream += fb.send_frame(body, md=md, checksum=False)
        packets += [pkt(c, 1000 + i, stream[i:i + big]) for i in range(0, len(stream), big)]
        ends.append(1000 + len(stream))
    filler = b"\x00" * seg
    for k in range(held // seg):  # the segment at ends[c] is lost
        packets += [pkt(c, ends[c] + seg * (k + 1), filler) for c in range(connections)]
    packets += [pkt(c, 500, PONG, PSH | ACK, to_broker=False, ack=ends[c]) for c in range(connections)]
    return write(path, packets)


# name → (builder, file suffix, the sizes as keyword arguments, small sizes for seeds)
ATTACKS = {
    "encrypted_batch": (encrypted_batch, ".pcap.gz", {}, {"entries": 10_000_000}),
    # (small: within the fuzz target's 1 MiB decompression limit and its 8 KiB inputs)
    "honest_batch": (honest_batch, ".pcap", {}, {"entries": (1 * MiB - 1) // len(EMPTY_ENTRY)}),
    "unanswered_sends": (unanswered_sends, ".pcap", {}, {"sends": 2, "size": 1 * MiB - 1}),
    "big_payload": (big_payload, ".pcap", {}, {"size": 1 * MiB - 1}),
    "open_journeys": (open_journeys, ".pcap", {}, {"journeys": 20, "deliveries": 3}),
    # the earlier list
    "unanswered_requests": (unanswered_requests, ".pcap", {}, {"requests": 150}),
    "many_chunks": (many_chunks, ".pcap", {}, {"chunks": 60}),
    "zlib_bomb": (decompression_bomb, ".pcap", {"codec": fb.ZLIB}, {"codec": fb.ZLIB, "size": 1 * MiB + 4096}),
    "lz4_bomb": (decompression_bomb, ".pcap", {"codec": fb.LZ4}, {"codec": fb.LZ4, "size": 1 * MiB + 4096}),
    "zstd_bomb": (decompression_bomb, ".pcap", {"codec": fb.ZSTD}, {"codec": fb.ZSTD, "size": 1 * MiB + 4096}),
    "snappy_bomb": (decompression_bomb, ".pcap", {"codec": fb.SNAPPY}, {"codec": fb.SNAPPY, "size": 1 * MiB + 4096}),
    "empty_ack_ids": (empty_ack_ids, ".pcap", {}, {"ids": 2_000}),
    "tubemq_messages": (tubemq_messages, ".pcap", {}, {"messages": 1_500}),
    "held_chunks_and_buffers": (held_chunks_and_buffers, ".pcap", {},
                                {"connections": 2, "chunk": 512, "chunks": 2, "held": 1400}),
}


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    small = "--small" in argv[1:]
    out.mkdir(parents=True, exist_ok=True)
    for name, (build, suffix, full, seed) in ATTACKS.items():
        print(build(out / f"{name}{suffix}", **(seed if small else full)))


if __name__ == "__main__":
    main(sys.argv[1:])
