"""Chunked messages as the official clients see them (docs/chunks.md has the facts from their code).

The frames here are built byte for byte (tests/framebuild.py, written to pcaps by tests/pcapgen.py) because the
real broker and client cannot be made to produce these cases on demand: a broker does not deliver a chunk twice,
out of order or without its first chunk unless something went wrong, a client does not send more than ten
chunked messages interleaved to one consumer, and neither cuts a capture inside a command. Each test asserts on
problem ids and their parameters (chunk ids as on the wire, 0-based), not on English text, except the one about
how texts number chunks.
"""

from __future__ import annotations

import hashlib
import re
import struct

import framebuild as fb

from dissector.model import Annotated, Event
from dissector.options import Options
from dissector.problems import REGISTRY, message
from dissector.output.timeline import timeline_format
from dissector.run import analysed_events, analysed_records

TOPIC = "persistent://public/default/chunked"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chunk_md(uuid: str, cid: int, n: int, total: int, **fields):
    return fb.metadata(producer_name="p", sequence_id=7, uuid=uuid, chunk_id=cid, num_chunks_from_msg=n,
                       total_chunk_msg_size=total, **fields)


def split(data: bytes, n: int) -> list[bytes]:
    k = -(-len(data) // n)
    return [data[i * k:(i + 1) * k] for i in range(n)]


def deliveries(path, chunks: list[tuple[str, int, int, bytes, int]], **md_fields) -> None:
    """A consumer subscribes, then the broker pushes MESSAGE frames: (uuid, chunk_id, num_chunks, bytes, total)."""
    items = [("c", fb.simple_frame("SUBSCRIBE", topic=TOPIC, subscription="s", consumer_id=1, request_id=1)),
             ("b", fb.simple_frame("SUCCESS", request_id=1)),
             ("c", fb.simple_frame("FLOW", consumer_id=1, messagePermits=1000))]
    for entry, (uuid, cid, n, body, total) in enumerate(chunks):
        items.append(("b", fb.message_frame(body, consumer_id=1, entry_id=entry,
                                            md=chunk_md(uuid, cid, n, total, **md_fields))))
    fb.tcp_pcap(path, items)


def publications(path, chunks: list[tuple[str, int, int, bytes, int]], **md_fields) -> None:
    """A producer is created, then sends its chunks: (uuid, chunk_id, num_chunks, bytes, total)."""
    items = [("c", fb.simple_frame("PRODUCER", topic=TOPIC, producer_id=1, request_id=1, producer_name="p")),
             ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p"))]
    for uuid, cid, n, body, total in chunks:
        items.append(("c", fb.send_frame(body, md=chunk_md(uuid, cid, n, total, **md_fields), producer_id=1,
                                         sequence_id=7, is_chunk=True)))
    fb.tcp_pcap(path, items)


def frames_of(path, kind: str, options: Options | None = None) -> list[Annotated]:
    return [e for e in analysed_events(path, options) if type(e) is Annotated and e.frame.pdu.type == kind]


def found(item: Annotated, pid: str) -> list[dict]:
    """Parameters of the findings ``pid`` of one frame (each also checked to make its message)."""
    out = []
    for f in item.frame.pdu.findings + item.findings:
        message(f.id, f.params)
        if f.id == pid:
            out.append(f.params)
    return out


def chunk_ids(item: Annotated) -> list[str]:
    return [f.id for f in item.frame.pdu.findings + item.findings if f.id.startswith("chunk.")]


# ------------------------------------------------------------------------------------ what the consumer does

def test_a_duplicate_first_chunk_makes_the_consumer_drop_the_message(tmp_path):
    """C++ 4.2: chunk 0 again for a uuid in the cache fails validateChunkId, the context is removed; the later
    chunks find no context. Nothing is delivered, and no chunk is called an orphan."""
    parts = split(b"a" * 300, 3)
    path = tmp_path / "dup0.pcap"
    deliveries(path, [("u", 0, 3, parts[0], 300), ("u", 1, 3, parts[1], 300), ("u", 0, 3, parts[0], 300),
                      ("u", 1, 3, parts[1], 300), ("u", 2, 3, parts[2], 300)])
    msgs = frames_of(path, "MESSAGE")
    idx = [m.frame.index for m in msgs]
    assert not any("reassembled" in m.notes for m in msgs)
    assert chunk_ids(msgs[0]) == chunk_ids(msgs[1]) == []
    assert found(msgs[2], "chunk.duplicate") == [{"chunk_id": 0, "uuid": "u"}]
    assert found(msgs[2], "chunk.dropped_by_client") == [{"reason": "duplicate", "uuid": "u", "chunk_id": 0,
                                                          "num_chunks": 3, "seen": 2, "frames": idx[:2],
                                                          "expected": 2}]
    for m, cid in zip(msgs[3:], (1, 2)):
        assert found(m, "chunk.dropped_by_client") == [{"reason": "uncached", "uuid": "u", "chunk_id": cid,
                                                        "num_chunks": 3, "dropped_at": idx[2]}]
    assert not any(found(m, "chunk.orphan") for m in msgs)


def test_a_duplicate_middle_chunk_drops_the_message_for_the_consumer_but_not_for_the_broker(tmp_path):
    data = bytes(range(256)) * 3
    parts = split(data, 3)
    order = [("u", 0, 3, parts[0], len(data)), ("u", 1, 3, parts[1], len(data)), ("u", 1, 3, parts[1], len(data)),
             ("u", 2, 3, parts[2], len(data))]
    delivered, sent = tmp_path / "m.pcap", tmp_path / "s.pcap"
    deliveries(delivered, order)
    publications(sent, order)

    msgs = frames_of(delivered, "MESSAGE")
    idx = [m.frame.index for m in msgs]
    assert found(msgs[2], "chunk.duplicate") == [{"chunk_id": 1, "uuid": "u"}]
    assert found(msgs[2], "chunk.dropped_by_client") == [{"reason": "duplicate", "uuid": "u", "chunk_id": 1,
                                                          "num_chunks": 3, "seen": 2, "frames": idx[:2],
                                                          "expected": 2}]
    assert found(msgs[3], "chunk.dropped_by_client") == [{"reason": "uncached", "uuid": "u", "chunk_id": 2,
                                                          "num_chunks": 3, "dropped_at": idx[2]}]
    assert not any("reassembled" in m.notes for m in msgs)

    sends = frames_of(sent, "SEND")
    assert chunk_ids(sends[2]) == ["chunk.duplicate"] and found(sends[2], "chunk.duplicate") == [
        {"chunk_id": 1, "uuid": "u"}]
    whole = sends[3].notes["reassembled"]
    assert whole["chunks"] == [sends[i].frame.index for i in (0, 1, 3)]
    assert whole["payload_sha256"] == sha(data) and whole["payload_size"] == len(data)
    assert not any(found(s, "chunk.dropped_by_client") for s in sends)


def test_a_chunk_out_of_order_drops_the_message_for_the_consumer(tmp_path):
    parts = split(b"o" * 300, 3)
    path = tmp_path / "ooo.pcap"
    deliveries(path, [("u", 0, 3, parts[0], 300), ("u", 2, 3, parts[2], 300), ("u", 1, 3, parts[1], 300)])
    msgs = frames_of(path, "MESSAGE")
    idx = [m.frame.index for m in msgs]
    assert found(msgs[1], "chunk.dropped_by_client") == [{"reason": "out_of_order", "uuid": "u", "chunk_id": 2,
                                                          "num_chunks": 3, "seen": 1, "frames": idx[:1],
                                                          "expected": 1}]
    assert chunk_ids(msgs[1]) == ["chunk.dropped_by_client"]  # the consumer's verdict, not chunk.missing
    assert found(msgs[2], "chunk.dropped_by_client") == [{"reason": "uncached", "uuid": "u", "chunk_id": 1,
                                                          "num_chunks": 3, "dropped_at": idx[1]}]
    assert not any("reassembled" in m.notes for m in msgs)


def test_chunks_of_a_finished_message_again_are_duplicates_not_orphans(tmp_path):
    data = b"f" * 300
    parts = split(data, 3)
    whole = [("u", i, 3, parts[i], 300) for i in range(3)]

    path = tmp_path / "again.pcap"
    deliveries(path, whole + [("u", 2, 3, parts[2], 300)] + whole)
    msgs = frames_of(path, "MESSAGE")
    assert msgs[2].notes["reassembled"]["payload_sha256"] == sha(data)
    assert chunk_ids(msgs[3]) == ["chunk.duplicate"] and found(msgs[3], "chunk.duplicate") == [
        {"chunk_id": 2, "uuid": "u"}]
    # delivered whole again (a redelivery): the consumer has no context left for it, so it assembles it again
    assert msgs[6].notes["reassembled"]["chunks"] == [m.frame.index for m in msgs[4:7]]
    assert all(chunk_ids(m) == [] for m in msgs[4:7])

    sent = tmp_path / "sent.pcap"
    publications(sent, whole + [("u", 1, 3, parts[1], 300), ("u", 0, 3, parts[0], 300)])
    sends = frames_of(sent, "SEND")
    assert sends[2].notes["reassembled"]["payload_sha256"] == sha(data)
    assert [found(s, "chunk.duplicate") for s in sends[3:]] == [[{"chunk_id": 1, "uuid": "u"}],
                                                                [{"chunk_id": 0, "uuid": "u"}]]
    assert not any(found(s, "chunk.orphan") for s in sends)


def test_chunk_zero_again_with_other_bytes_restarts_the_message_on_the_send_side(tmp_path):
    old, new = split(b"1" * 300, 3), split(b"2" * 300, 3)
    path = tmp_path / "restart.pcap"
    publications(path, [("u", 0, 3, old[0], 300), ("u", 1, 3, old[1], 300), ("u", 0, 3, new[0], 300),
                        ("u", 1, 3, new[1], 300), ("u", 2, 3, new[2], 300)])
    sends = frames_of(path, "SEND")
    assert found(sends[2], "chunk.restarted") == [{"uuid": "u", "seen": 2, "num_chunks": 3}]
    assert sends[4].notes["reassembled"]["payload_sha256"] == sha(b"2" * 300)
    assert sends[4].notes["reassembled"]["chunks"] == [s.frame.index for s in sends[2:]]


def test_a_full_cache_makes_the_consumer_drop_its_oldest_message(tmp_path):
    """maxPendingChunkedMessage is 10 by default: the first chunk of an eleventh message evicts the oldest."""
    uuids = [f"u{i}" for i in range(11)]
    chunks = [(u, 0, 2, b"x" * 10, 20) for u in uuids] + [(u, 1, 2, b"y" * 10, 20) for u in uuids]
    path = tmp_path / "full.pcap"
    deliveries(path, chunks)
    msgs = frames_of(path, "MESSAGE")
    idx = [m.frame.index for m in msgs]
    assert all(chunk_ids(m) == [] for m in msgs[:10])
    assert found(msgs[10], "chunk.dropped_by_client") == [{"reason": "cache_full", "uuid": "u0", "num_chunks": 2,
                                                           "seen": 1, "frames": idx[:1], "limit": 10}]
    assert found(msgs[11], "chunk.dropped_by_client") == [{"reason": "uncached", "uuid": "u0", "chunk_id": 1,
                                                           "num_chunks": 2, "dropped_at": idx[10]}]
    assert [m.notes["reassembled"]["uuid"] for m in msgs[12:]] == uuids[1:]
    assert all(chunk_ids(m) == [] for m in msgs[12:])


def test_a_message_the_consumer_cannot_decompress_is_not_reassembled(tmp_path):
    """The broker stores the chunks whatever they hold; the consumer fails to decompress the whole and drops it."""
    garbage = b"\xff" * 300
    order = [("u", i, 3, part, 300) for i, part in enumerate(split(garbage, 3))]
    delivered, sent = tmp_path / "m.pcap", tmp_path / "s.pcap"
    deliveries(delivered, order, compression=fb.LZ4, uncompressed_size=1000)
    publications(sent, order, compression=fb.LZ4, uncompressed_size=1000)

    msgs = frames_of(delivered, "MESSAGE")
    idx = [m.frame.index for m in msgs]
    assert [p["case"] for p in found(msgs[2], "payload.decompression")] == ["failed"]
    assert found(msgs[2], "chunk.dropped_by_client") == [{"reason": "decompression", "uuid": "u", "chunk_id": 2,
                                                          "num_chunks": 3, "seen": 3, "frames": idx}]
    assert not any("reassembled" in m.notes for m in msgs)

    sends = frames_of(sent, "SEND")
    assert sends[2].notes["reassembled"] == {"uuid": "u", "payload_size": None, "payload_sha256": None,
                                             "chunks": [s.frame.index for s in sends]}
    assert not any(found(s, "chunk.dropped_by_client") for s in sends)


# ------------------------------------------------------------------------------------------ chunk numbering

_PARAMS = {"chunk_id": 4, "num_chunks": 9, "uuid": "u", "expected": 6, "seen": 4, "frames": [1], "limit": 10,
           "idle_s": 61.0, "expire_s": 60.0, "dropped_at": 3, "size": 1, "total": 2, "bytes": 5, "chunks": [1]}
_NUMBERED = {"chunk.orphan", "chunk.duplicate", "chunk.missing", "chunk.lost"}
_NUMBERED_REASONS = {"duplicate", "out_of_order", "uncached", "checksum"}
_REASONS = _NUMBERED_REASONS | {"cache_full", "expired", "decompression"}


def test_every_chunk_text_numbers_chunks_from_one_as_the_timeline_line_does():
    """chunk_id 4 of 9 is "chunk 5/9" on the line; every text that names a chunk says 5 (and the expected one,
    chunk_id 6, says 7); none says 4."""
    line = timeline_format().text(
        {"index": 1, "time": 0.0, "type": "MESSAGE", "command": {}, "problems": [],
         "messages_summary": {"count": 1, "bytes": 10, "chunk": {"chunk_id": 4, "num_chunks": 9, "uuid": "u"}}})
    assert "chunk 5/9" in line
    texts = {}
    for pid in [p for p in REGISTRY if p.startswith("chunk.")]:
        if pid == "chunk.dropped_by_client":
            for reason in _REASONS:
                texts[(pid, reason)] = message(pid, {**_PARAMS, "reason": reason})
        else:
            texts[(pid, None)] = message(pid, dict(_PARAMS))
    assert ("chunk.dropped_by_client", "duplicate") in texts and ("chunk.orphan", None) in texts
    for (pid, reason), text in texts.items():
        numbers = [int(n) for n in re.findall(r"\bchunk (\d+)\b", text)]
        assert 4 not in numbers, (pid, reason, text)
        if pid in _NUMBERED or reason in _NUMBERED_REASONS:
            assert numbers[0] == 5, (pid, reason, text)
        if "expected" in text or pid == "chunk.missing" or reason == "out_of_order":
            assert 7 in numbers, (pid, reason, text)


def test_a_frames_line_and_its_problem_name_the_same_chunk(tmp_path):
    parts = split(b"n" * 300, 3)
    path = tmp_path / "n.pcap"
    deliveries(path, [("u", 0, 3, parts[0], 300), ("u", 1, 3, parts[1], 300), ("u", 1, 3, parts[1], 300)])
    rec = [r for r in analysed_records(path) if r.get("type") == "MESSAGE"][2]
    line = timeline_format().text(rec)
    on_line = int(re.search(r"chunk (\d+)/3", line).group(1))
    (dup,) = [e["message"] for e in rec["expert"] if e["id"] == "chunk.duplicate"]
    assert on_line == int(re.search(r"chunk (\d+)", dup).group(1)) == 2


# ----------------------------------------------------------------------- receipts of the chunks of one message

def _chunk_sends(sizes: list[int]) -> tuple[list[bytes], list[bytes]]:
    total = sum(sizes)
    sends = [fb.send_frame(bytes([65 + i]) * size, md=chunk_md("p-7", i, len(sizes), total), producer_id=1,
                           sequence_id=7, num_messages=1, is_chunk=True) for i, size in enumerate(sizes)]
    receipts = [fb.simple_frame("SEND_RECEIPT", producer_id=1, sequence_id=7, message_id={"ledgerId": 9, "entryId": i})
                for i in range(len(sizes))]
    return sends, receipts


def _head() -> list[tuple[str, bytes]]:
    return [("c", fb.simple_frame("CONNECT", client_version="t")), ("b", fb.simple_frame("CONNECTED")),
            ("c", fb.simple_frame("PRODUCER", topic=TOPIC, producer_id=1, request_id=1, producer_name="p")),
            ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p"))]


def _pairs(items: list) -> tuple[list[int], list[int]]:
    sends = [e for e in items if type(e) is Annotated and e.frame.pdu.type == "SEND"]
    receipts = [e for e in items if type(e) is Annotated and e.frame.pdu.type == "SEND_RECEIPT"]
    return [s.frame.index for s in sends], [r.notes.get("answers") for r in receipts]


def test_each_receipt_answers_its_own_chunk_when_a_gap_cuts_a_middle_send_inside_its_command(tmp_path):
    """Every chunk is a SEND under the same (producer_id, sequence_id) and gets its own SEND_RECEIPT, in order
    (ProducerImpl::ackReceived pops one chunk per receipt). The capture loses the middle SEND from inside its
    command on: what arrived of the command still makes it a SEND waiting under that key, so the second receipt
    answers the second chunk, not the third."""
    sends, receipts = _chunk_sends([1000, 1000, 1000])
    cut = 8 + 8  # size fields, BaseCommand type, the sub-command's tag and length, producer_id and sequence_id
    head = _head()
    items = head + [("c", s) for s in sends] + [("b", r) for r in receipts]
    sizes = [len(f) for _, f in head] + [len(sends[0]) + cut, len(sends[1]) - cut, 600, len(sends[2]) - 600,
                                         sum(map(len, receipts))]
    path = tmp_path / "cut.pcap"
    segments = fb.tcp_pcap(path, items, segment_size=sizes, drop=[5])
    assert segments[5].data == sends[1][cut:]
    # a long capture would give the hole up long before the receipts; here the buffer cap does it at once
    out = list(analysed_events(path, Options(max_buffered_per_direction=500)))
    send_index, answers = _pairs(out)
    assert len(send_index) == 3 and answers == send_index
    cut_send = next(e for e in out if type(e) is Annotated and e.frame.index == send_index[1])
    assert cut_send.frame.pdu.command == {"producer_id": 1, "sequence_id": 7}
    assert "frame.truncated" in [f.id for f in cut_send.frame.pdu.findings]
    assert not any(found(e, "response.unmatched") for e in out if type(e) is Annotated)
    assert not [e for e in out if type(e) is Event and e.kind == "UNANSWERED"]


def _head_length(frame: bytes) -> int:
    """Where the head of a SEND ends, by hand: the size fields, the command, the magic 0x0e01 and the CRC32C
    when there, the metadata size and the metadata."""
    (cmd_size,) = struct.unpack_from(">I", frame, 4)
    at = 8 + cmd_size
    if frame[at:at + 2] == b"\x0e\x01":
        at += 2 + 4
    (metadata_size,) = struct.unpack_from(">I", frame, at)
    return at + 4 + metadata_size


def test_each_receipt_answers_its_own_chunk_when_a_middle_chunk_is_oversized(tmp_path):
    """Through the splitter: the oversized middle chunk is an OVERSIZED event and a SEND decoded from its head
    (frame.oversized_head, not frame.gap_damaged), so each receipt answers its own chunk."""
    sends, receipts = _chunk_sends([1000, 5000, 1000])
    path = tmp_path / "oversized.pcap"
    fb.tcp_pcap(path, _head() + [("c", s) for s in sends] + [("b", r) for r in receipts])
    out = list(analysed_events(path, Options(max_frame_size=2000)))
    send_index, answers = _pairs(out)
    assert len(send_index) == 3 and answers == send_index
    oversized = [e for e in out if type(e) is Event and e.kind == "OVERSIZED"]
    assert [e.details["total_size"] for e in oversized] == [len(sends[1]) - 4]
    middle = next(e for e in out if type(e) is Annotated and e.frame.index == send_index[1])
    head, length = _head_length(sends[1]), len(sends[1])
    assert 0 < head < 200
    assert middle.frame.pdu.size == length
    assert found(middle, "frame.oversized_head") == [{"head": head, "size": length, "missing": length - head}]
    assert not found(middle, "frame.gap_damaged")
    assert found(middle, "chunk.lost") == [{"chunk_id": 1, "uuid": "p-7"}]
    assert not [e for e in out if type(e) is Event and e.kind in ("SKIPPED", "UNANSWERED", "BAD_SIZE")]
    assert not any(found(e, "response.unmatched") for e in out if type(e) is Annotated)
