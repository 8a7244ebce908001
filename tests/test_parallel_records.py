"""The core writes --json's records on a thread pool while the next packets are decoded
(crates/engine/src/sinks/pooled.rs), a batch kept whole by the decoder and split there; in place (pool_bytes=0) a
large batch's message records are written on several threads (crates/engine/src/records.rs,
JsonSink::messages). Every way must give the same
bytes whatever the number of threads, and each message's record must say what the test put on the wire (its
body's SHA-256, its place, its fields), damaged batches' problems included.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

import framebuild as fb

HOSTILE = ['quote " and \\ backslash', "line\u2028sep", "c1 \x85 del \x7f", "bidi \u202e", "esc \x1b[31m", "é€"]


def _entries(count: int, seed: int) -> list[tuple[dict, bytes]]:
    """Batch entries with every kind of field a message record shows, bodies all different."""
    out = []
    for i in range(count):
        fields: dict = {"sequence_id": seed * 10_000 + i}
        if i % 3 == 0:
            fields["properties"] = [{"key": f"k{i}", "value": HOSTILE[i % len(HOSTILE)]}]
        if i % 5 == 0:
            fields["partition_key"] = HOSTILE[(i // 5) % len(HOSTILE)]
        if i % 7 == 0:
            fields["ordering_key"] = bytes([0xFF, i % 256, 0x00])  # not UTF-8: written as base64
        if i % 11 == 0:
            fields["event_time"] = 1_700_000_000_000 + i
        out.append((fields, f"body {seed}/{i} ".encode() * (1 + i % 4)))
    return out


# batch sizes around the threshold (128 messages), and large ones
SIZES = [1, 127, 128, 129, 300, 1000]


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("parallel") / "batches.pcap"
    items, batches = [], []
    for seed, size in enumerate(SIZES):
        entries = _entries(size, seed)
        batches.append(entries)
        md = fb.metadata(sequence_id=seed * 10_000, num_messages_in_batch=size)
        items.append(fb.send_frame(fb.batch_payload(entries), sequence_id=seed * 10_000, md=md))
    entries = _entries(400, 99)
    batches.append(entries)
    md = fb.metadata(num_messages_in_batch=400)
    items.append(("b", fb.message_frame(fb.batch_payload(entries), md=md, ack_set=[0x5555_5555_5555_5555] * 7)))
    # damaged batches, whose problems the decoder finds before the pool splits them: more entries declared
    # than sent (batch.count_mismatch), and a batch cut inside its last entry (batch.malformed)
    entries = _entries(50, 7)
    md = fb.metadata(sequence_id=7, num_messages_in_batch=51)
    items.append(fb.send_frame(fb.batch_payload(entries), sequence_id=7, md=md))
    md = fb.metadata(sequence_id=8, num_messages_in_batch=50)
    items.append(fb.send_frame(fb.batch_payload(entries)[:-5], sequence_id=8, md=md))
    fb.tcp_pcap(path, items, segment_size=9000)
    return path, batches


def _json(path, threads: int, *extra: str) -> bytes:
    """--json's bytes with `threads` in the pool."""
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads)}
    res = subprocess.run([sys.executable, "-m", "dissector.cli.main", str(path), "--json", *extra],
                         capture_output=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


@pytest.mark.parametrize("extra", [(), ("--payload",)], ids=["json", "payload"])
def test_threads_write_the_same_bytes(capture, extra):
    path, _ = capture
    in_place = _json(path, 2, *extra, "-o", "pool_bytes=0")  # every record written where its frame is analysed
    assert in_place == _json(path, 1, *extra, "-o", "pool_bytes=0")
    assert in_place == _json(path, 1, *extra)
    assert in_place == _json(path, 2, *extra)
    assert in_place == _json(path, 5, *extra)
    # a budget of one byte: every frame its own batch, one batch out at a time
    assert in_place == _json(path, 2, *extra, "-o", "pool_bytes=1")


def test_damaged_batches_keep_their_problems_on_the_pool(capture):
    path, _ = capture
    records = [json.loads(line) for line in _json(path, 2).splitlines()]
    sends = [r for r in records if r.get("type") == "SEND"]
    short, cut = sends[-2], sends[-1]
    # (send.unknown_producer: the test's capture has no PRODUCER command)
    assert [e["id"] for e in short["expert"] if e["id"].startswith("batch.")] == ["batch.count_mismatch"]
    assert len(short["messages"]) == 50
    assert [e["id"] for e in cut["expert"] if e["id"].startswith("batch.")] == ["batch.malformed", "batch.count_mismatch"]
    assert len(cut["messages"]) == 49  # the entries before the cut one
    assert [m["batch_index"] for m in cut["messages"]] == list(range(49))


def test_each_message_record_says_what_was_sent(capture):
    path, batches = capture
    frames = [r for r in map(json.loads, _json(path, 2).splitlines()) if r.get("type") in ("SEND", "MESSAGE")]
    frames = frames[:len(batches)]  # (the damaged batches last)
    for record, entries in zip(frames, batches):
        messages = record["messages"]
        assert len(messages) == len(entries)
        for i, (message, (fields, body)) in enumerate(zip(messages, entries)):
            assert message["payload_size"] == len(body)
            assert message["payload_sha256"] == hashlib.sha256(body).hexdigest()
            assert message["sequence_id"] == fields["sequence_id"]
            index = message["message_id"]["batch_index"] if record["type"] == "MESSAGE" else message["batch_index"]
            assert index == i
            assert message.get("partition_key") == fields.get("partition_key")
            assert message.get("event_time") == fields.get("event_time")
            if "ordering_key" in fields:
                assert "ordering_key" not in message and message["ordering_key_b64"]
            props = {p["key"]: p["value"] for p in fields.get("properties", [])}
            assert message["properties"] == props


def test_damaged_batches_split_on_the_pool_as_in_place(tmp_path):
    """Hundreds of batches damaged at random (bytes changed, cut short), sent and delivered: the records made
    where the pool splits the kept batch equal those of a full decode in place, byte for byte."""
    import random

    rng = random.Random(20261126)
    items = []
    for n in range(400):
        entries = _entries(1 + rng.randrange(40), n)
        payload = bytearray(fb.batch_payload(entries))
        for _ in range(1 + rng.randrange(4)):
            payload[rng.randrange(len(payload))] = rng.randrange(256)
        if rng.randrange(5) == 0:
            del payload[rng.randrange(len(payload)):]
        declared = len(entries) + (rng.randrange(3) - 1 if rng.randrange(4) == 0 else 0)
        md = fb.metadata(sequence_id=n, num_messages_in_batch=max(declared, 1))
        if n % 2:
            items.append(("b", fb.message_frame(bytes(payload), md=md, ack_set=[rng.getrandbits(63)])))
        else:
            items.append(fb.send_frame(bytes(payload), sequence_id=n, md=md))
    path = tmp_path / "damaged.pcap"
    fb.tcp_pcap(path, items, segment_size=9000)
    in_place = _json(path, 2, "-o", "pool_bytes=0")
    assert in_place.count(b'"batch.malformed"') > 50  # the damage is seen
    assert in_place == _json(path, 2)
    assert _json(path, 2, "--payload", "-o", "pool_bytes=0") == _json(path, 2, "--payload")


def _stats(path, *extra: str) -> tuple[int, dict]:
    """`stats --json`'s exit code and figures."""
    res = subprocess.run([sys.executable, "-m", "dissector.cli.main", "stats", str(path), "--json", *extra],
                         capture_output=True, timeout=120)
    assert res.stdout, res.stderr.decode()
    return res.returncode, json.loads(res.stdout)


STATS_CAPTURES = ["01_basic_nonbatched.pcap", "02_batching_props_keys.pcap", "04_chunking.pcap.gz",
                  "05b_batch_index_ack.pcap", "09_key_shared.pcap", "11_errors.pcap",
                  "11b_send_error_too_big.pcap.gz", "tubemq/tubemq_consumer_broker.pcap"]


@pytest.mark.parametrize("name", STATS_CAPTURES)
def test_stats_counted_on_their_thread_as_in_place(name):
    """`stats` counts on a thread of its own while frames are decoded (crates/engine/src/sinks/counted.rs): the
    figures, the frames counted (the exit code) and the problems are those of counting in place, with any budget."""
    path = os.path.join(os.path.dirname(__file__), "..", "captures", name)
    in_place = _stats(path, "-o", "pool_bytes=0")
    assert in_place[1]["frames"] > 0
    assert _stats(path) == in_place
    # a budget of one byte: every frame its own batch, one batch out at a time
    assert _stats(path, "-o", "pool_bytes=1") == in_place


def test_stats_of_batches_counted_on_their_thread_as_in_place(capture):
    path, batches = capture
    in_place = _stats(path, "-o", "pool_bytes=0")
    # the frames the fixture sent, and the damaged batches' problems, counted
    assert in_place[1]["types"] == {"SEND": len(SIZES) + 2, "MESSAGE": 1}
    assert {"batch.count_mismatch", "batch.malformed"} <= {e["id"] for e in in_place[1]["expert"]}
    assert _stats(path) == in_place
    assert _stats(path, "-o", "pool_bytes=1") == in_place


def test_what_the_memory_budget_drops_does_not_depend_on_the_pools_timing(tmp_path):
    """The pool's batches count in the memory budget that the chunk assemblers and the reassembly drop by: a
    batch counts until the interpreter's thread takes it in turn, not until a thread happens to finish it, so a
    budget small enough to drop gives the same bytes with one thread or two, run after run."""
    import hostile_inputs as hi

    path = hi.held_chunks_and_buffers(tmp_path / "held.pcap", connections=12, chunk=256 << 10, held=140_000)
    budget = ("-o", f"memory_budget={6 << 20}")
    once = _json(path, 1, *budget)
    assert b'"memory_budget"' in once and b"(memory_budget)" in once  # STATE_DROPPED's option, chunk.abandoned
    for threads in (2, 2, 1):
        assert _json(path, threads, *budget) == once
