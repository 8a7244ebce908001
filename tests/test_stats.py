"""Statistics and actor views checked against the corpus manifests (what the client API really did)."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from corpus import capture_path, manifest, manifest_stems
from dissector.run import analysed_records
from dissector.output.stats import StatsCollector, percentile


@functools.lru_cache(maxsize=None)
def stats_of(stem: str) -> dict:
    collector = StatsCollector()
    for ev in analysed_records(capture_path(stem + ".pcap"), summary=True):
        collector.add(ev)
    return json.loads(json.dumps(collector.result()))


def _sent(m: dict) -> list[dict]:
    return [s for k in ("sent", "sent_batched", "sent_single") for s in m.get(k) or []]


def test_percentiles_are_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 90) == 90
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


@pytest.mark.parametrize("stem", ["01_basic_nonbatched", "02_batching_props_keys", "03_compression_lz4",
                                  "03_compression_zlib", "05_cumulative_ack", "09_shared"])
def test_topic_totals_match_what_the_client_sent_and_received(stem):
    m = manifest(stem)
    data = stats_of(stem)
    topic = data["topics"][m["topic"]]
    sent = _sent(m)
    assert topic["messages_sent"] == len(sent)
    if all("payload_len" in s for s in sent):
        assert topic["bytes_sent"] == sum(s["payload_len"] for s in sent)
    received = m.get("received") or [r for rs in (m.get("received_by_consumer") or {}).values() for r in rs]
    assert topic["messages_received"] == len(received)
    assert topic["bytes_received"] == sum(r["payload_len"] for r in received)


@pytest.mark.parametrize("stem", ["09_shared", "09_key_shared", "09_failover"])
def test_each_consumer_got_what_the_manifest_says(stem):
    m = manifest(stem)
    consumers = {c["name"]: c for c in stats_of(stem)["consumers"]}
    for name, received in m["received_by_consumer"].items():
        assert consumers[name]["messages"] == len(received) == m["counts"][name]
        # The Python client spells it ConsumerType.KeyShared; the wire enum is Key_Shared.
        assert consumers[name]["type"] == m["consumer"]["type"].split(".")[-1].replace("KeyShared", "Key_Shared")


def test_batches_and_compression_per_producer():
    batching = {p["name"]: p for p in stats_of("02_batching_props_keys")["producers"]}
    m = manifest("02_batching_props_keys")
    p = batching[m["producer"]["producer_name"]]
    assert p["batches"] == m["summary"]["batches_entries"]
    assert p["avg_batch_size"] == m["producer"]["batching_max_messages"]
    assert p["compression"] == {} and p["compression_ratio"] is None
    for codec in ("lz4", "zlib", "zstd", "snappy"):
        m = manifest(f"03_compression_{codec}")
        producers = {p["name"]: p for p in stats_of(f"03_compression_{codec}")["producers"]}
        for spec in m["producers"]:
            p = producers[spec["producer_name"]]
            assert list(p["compression"]) == [spec["compression"]]
            assert p["compression_ratio"] > 1.0


@pytest.mark.parametrize("stem", [s for s in manifest_stems() if not s.startswith("11")])
def test_every_send_has_its_receipt_and_every_request_its_response(stem):
    data = stats_of(stem)
    assert data["latency_ms"]["SEND"]["count"] == data["types"]["SEND"] == data["types"]["SEND_RECEIPT"]
    requests = sum(data["types"].get(t, 0) for t in ("PRODUCER", "SUBSCRIBE", "LOOKUP", "PARTITIONED_METADATA",
                                                       "CLOSE_PRODUCER", "CLOSE_CONSUMER", "SEEK",
                                                       "GET_LAST_MESSAGE_ID"))
    paired = sum(v["count"] for k, v in data["latency_ms"].items() if k not in ("SEND", "CONNECT"))
    assert paired == requests
    assert data["events"].get("UNANSWERED", 0) == 0
    for summary in data["latency_ms"].values():
        assert 0 <= summary["p50"] <= summary["p90"] <= summary["p99"] <= summary["max"]


def test_send_errors_are_counted_per_server_error():
    m = manifest("11b_send_error_too_big")
    census = m["derived_frame_census"]
    errors = census["totals_by_direction_and_type"]["broker_to_client:SEND_ERROR"]
    assert errors == len(census["streams"])  # one SEND_ERROR per connection: the client reconnects after each
    data = stats_of("11b_send_error_too_big")
    # The manifest's notes: every SEND_ERROR is error 22, NotAllowedError ("Exceed maximum message size").
    assert data["server_errors"] == {"NotAllowedError": errors}
    # The client re-creates its producer on every connection: one producer per connection, all on the
    # manifest's topic and under one name. (The manifest does not record the producer's name, so it is not
    # checked here; test_corpus checks names where the manifest has them.)
    assert sorted(p["conn"] for p in data["producers"]) == sorted(c["conn"] for c in data["connections"])
    assert {p["topic"] for p in data["producers"]} == {m["topic"]}
    assert len({p["name"] for p in data["producers"]}) == 1
    assert sum(p["errors"].get("NotAllowedError", 0) for p in data["producers"]) == errors
    fits = [s for s in m["sent"] if s["payload_len"] <= m["broker_max_message_size_bytes"]]
    assert sum(p["receipts"] for p in data["producers"]) == len(fits)


# Requests whose answer has a type of its own, so that a census of one TCP stream tells how many were answered.
ANSWERS = {"CONNECT": ("CONNECTED",), "LOOKUP": ("LOOKUP_RESPONSE",),
           "PARTITIONED_METADATA": ("PARTITIONED_METADATA_RESPONSE",), "PRODUCER": ("PRODUCER_SUCCESS",),
           "SEND": ("SEND_RECEIPT", "SEND_ERROR")}


@pytest.mark.parametrize("stem", ["11_errors", "11b_send_error_too_big"])
def test_latency_per_connection_follows_each_connection_and_adds_up(stem):
    """Many connections that did different things: a per-connection count that took another connection's
    numbers, or the global ones, would differ from the manifest's per-stream census."""
    m = manifest(stem)
    streams = {s["client"]: s for s in m["derived_frame_census"]["streams"]}
    assert len(streams) > 1
    data = stats_of(stem)
    conns = {c["client"]: c for c in data["connections"]}
    assert set(conns) == set(streams)
    expected_by_conn = {}
    for client, stream in streams.items():
        asked, told = stream["client_to_broker"]["by_type"], stream["broker_to_client"]["by_type"]
        got = Counter()  # a request answered, whether served or refused (REQUEST→ERROR_ANSWER is apart)
        for t, v in conns[client]["latency_ms"].items():
            got[t.split("→")[0]] += v["count"]
        expected = {}
        for request, answers in ANSWERS.items():
            n = asked.get(request, 0)
            if n and n == sum(told.get(a, 0) for a in answers):  # all answered on this stream
                expected[request] = n
                assert got.get(request, 0) == n, (client, request)
            else:
                assert got.get(request, 0) <= n, (client, request)
        expected_by_conn[client] = tuple(sorted(expected.items()))
    # The connections really differ (so the check above can tell them apart) ...
    assert len(set(expected_by_conn.values())) > 1
    # ... and their counts add up to the global ones, type by type.
    total = Counter()
    for c in data["connections"]:
        total.update({t: v["count"] for t, v in c["latency_ms"].items()})
    assert dict(total) == {t: v["count"] for t, v in data["latency_ms"].items()}


def test_send_latency_per_connection_follows_the_resends():
    """11b: the first connection sends the messages that fit and the first attempt at the one that does not;
    every SEND_ERROR makes the client reconnect and re-send it once (manifest notes), until it is closed."""
    m = manifest("11b_send_error_too_big")
    limit = m["broker_max_message_size_bytes"]
    fits = [s for s in m["sent"] if s["payload_len"] <= limit]
    too_big = [s for s in m["sent"] if s["payload_len"] > limit]
    n = len(m["derived_frame_census"]["streams"])
    data = stats_of("11b_send_error_too_big")
    conns = sorted(data["connections"], key=lambda c: c["first_time"])
    sends = [c["latency_ms"].get("SEND", {}).get("count", 0) for c in conns]
    refused = [c["latency_ms"].get("SEND→SEND_ERROR", {}).get("count", 0) for c in conns]
    # the SEND latency is the receipts'; the SEND_ERRORs' apart
    assert sends == [len(fits)] + [0] * (n - 1)
    assert refused == [len(too_big)] * n
    assert data["latency_ms"]["SEND"]["count"] == sum(sends) == len(fits)
    assert data["latency_ms"]["SEND→SEND_ERROR"]["count"] == sum(refused) == n * len(too_big)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, timeout=120)


def test_stats_json_and_plot(tmp_path):
    plot = tmp_path / "latency.png"
    result = _cli("stats", str(capture_path("09_shared.pcap")), "--json", "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["frames"] == sum(s["client_to_broker"]["frames"] + s["broker_to_client"]["frames"]
                                 for s in manifest("09_shared")["derived_frame_census"]["streams"])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stats_tables_name_each_topic_and_actor():
    result = _cli("stats", str(capture_path("09_shared.pcap")), "--plain")
    assert result.returncode == 0, result.stderr
    m = manifest("09_shared")
    assert m["topic"] in result.stdout
    for name in m["received_by_consumer"]:
        assert name in result.stdout
    assert "\x1b" not in result.stdout


def test_follow_a_consumer_shows_only_its_frames():
    m = manifest("09_shared")
    name = sorted(m["received_by_consumer"])[-1]  # a consumer name as the client API reported it
    result = _cli("follow", str(capture_path("09_shared.pcap")), "--consumer", name, "--json")
    assert result.returncode == 0, result.stderr
    recs = [json.loads(line) for line in result.stdout.splitlines()]
    messages = [r for r in recs if r["type"] == "MESSAGE"]
    assert sum(len(r["messages"]) for r in messages) == len(m["received_by_consumer"][name])
    assert {r["consumer"]["name"] for r in recs if "consumer" in r} == {name}
    assert any(r["type"] == "SUBSCRIBE" and r["command"]["consumer_name"] == name for r in recs)


def test_follow_needs_an_actor():
    result = _cli("follow", str(capture_path("09_shared.pcap")))
    assert result.returncode == 2
    assert "--producer" in result.stderr


def test_latency_reservoir_is_exact_below_its_cap_and_bounded_above():
    from dissector.output.stats import Latencies

    values = [float(v) for v in range(1, 1001)]
    small = Latencies(cap=5000)
    for v in values:
        small.add(v)
    assert small.summary() == {"count": 1000, "p50": 500.0, "p90": 900.0, "p99": 990.0, "max": 1000.0,
                               "mean": 500.5, "exact": True}
    big = Latencies(cap=200)
    for v in values * 20:
        big.add(v)
    s = big.summary()
    assert len(big.items) == 200
    assert s["count"] == 20000 and s["max"] == 1000.0 and s["mean"] == 500.5 and s["exact"] is False
    assert 400 <= s["p50"] <= 600 and s["p99"] >= 900  # a uniform sample of a uniform distribution


def test_publish_latency_per_producer():
    # (Per connection: test_latency_per_connection_follows_each_connection_and_adds_up, on many connections.)
    m = manifest("03_compression_zstd")
    data = stats_of("03_compression_zstd")
    by_name = {p["name"]: p for p in data["producers"]}
    for spec in m["producers"]:
        sends = by_name[spec["producer_name"]]["send_latency_ms"]
        assert sends["count"] == by_name[spec["producer_name"]]["receipts"] > 0
        if not spec["batching"]:  # one SEND, so one latency, per message the client sent
            assert sends["count"] == len(m["sent_single"])
    assert sum(p["send_latency_ms"]["count"] for p in by_name.values() if p["send_latency_ms"]) \
        == data["latency_ms"]["SEND"]["count"]


@pytest.mark.parametrize("name", ["02_batching_props_keys.pcap", "03_compression_zlib.pcap", "11_errors.pcap"])
def test_statistics_recomputed_from_saved_json_lines_are_the_same(name):
    """Stats read records only: the JSON Lines a user saved give the same figures as a fresh run."""
    import json

    from dissector.output.jsonl import dumps

    live = StatsCollector()
    for rec in analysed_records(capture_path(name), summary=True):
        live.add(rec)
    saved = StatsCollector()
    for line in [dumps(rec) for rec in analysed_records(capture_path(name))]:
        saved.add(json.loads(line))
    assert saved.result() == live.result()
    assert live.result()["latency_ms"]  # something was paired and measured


@pytest.mark.parametrize("stem", ["02_batching_props_keys", "05_cumulative_ack"])
def test_the_throughput_behind_the_plot_adds_up_to_the_messages_sent_and_received(stem):
    m = manifest(stem)
    collector = StatsCollector()
    for rec in analysed_records(capture_path(stem + ".pcap"), summary=True):
        collector.add(rec)
    buckets = collector.throughput.values()
    assert sum(b[0] for b in buckets) == len(m["sent"])  # messages to the broker: every one sent once
    assert sum(b[2] for b in buckets) >= len(m.get("received") or m.get("consumer_events") or [])
    assert len(collector.throughput) <= 2000 and collector.origin <= min(collector.throughput) * collector.throughput_width + collector.throughput_width


def test_the_plot_is_written_with_its_three_panels(tmp_path):
    pytest.importorskip("matplotlib")
    from dissector.output.plot import plot_latency

    collector = StatsCollector()
    for rec in analysed_records(capture_path("11_errors.pcap"), summary=True):
        collector.add(rec)
    assert any(error for *_, error in collector.latency_samples)  # the ERROR answer is marked apart
    out = plot_latency(collector.latency_samples, tmp_path / "p.png", origin=collector.origin,
                       throughput=collector.throughput, width=collector.throughput_width)
    assert out.stat().st_size > 10_000


def _collect(stem: str) -> dict:
    collector = StatsCollector()
    for rec in analysed_records(capture_path(stem + ".pcap"), summary=True):
        collector.add(rec)
    return collector.result()


def test_sends_accepted_and_rejected_add_up_to_what_the_client_saw():
    """11b: a 4-byte message fits; the 100,000-byte one is rejected 15 times (the manifest's notes), each time
    re-sent on a new connection."""
    m = manifest("11b_send_error_too_big")
    rejected = int(re.match(r"(\d+) SEND_ERROR", m["notes"][0])[1])
    fitting = [s for s in m["sent"] if s["payload_len"] <= m["broker_max_message_size_bytes"]]
    producers = _collect("11b_send_error_too_big")["producers"]
    assert sum(p["messages_accepted"] for p in producers) == len(fitting)
    assert sum(p["messages_rejected"] for p in producers) == rejected
    assert sum(p["messages"] for p in producers) == len(fitting) + rejected + sum(p["messages_unanswered"]
                                                                                  for p in producers)


@pytest.mark.parametrize("stem", ["01_basic_nonbatched", "02_batching_props_keys", "05_cumulative_ack"])
def test_deliveries_distinct_and_acknowledged_add_up_to_what_the_consumer_saw(stem):
    m = manifest(stem)
    received = m.get("received") or m.get("consumer_events")
    consumers = _collect(stem)["consumers"]
    assert sum(c["messages_distinct"] for c in consumers) == len(received)
    assert sum(c["messages_acked"] for c in consumers) == len(received)  # the scenario acks every message
    assert all(c["messages_unacked"] == 0 and c["messages_duplicate"] == c["messages"] - c["messages_distinct"]
               for c in consumers)


# ------------------------------------------------------------------ compression ratio of chunked messages
def _chunked_compressed_capture(path, messages) -> None:
    """A producer sends each message (plain bytes, codec, chunks, extra) compressed: in one SEND when chunks
    is 1, else split into that many chunk SENDs (the compressed bytes are split, as the clients do). ``extra``:
    "duplicate" sends the middle chunk twice, "garbage" sends bytes no codec can decompress."""
    import framebuild as fb

    items = [("c", fb.simple_frame("PRODUCER", topic="persistent://public/default/z", producer_id=1,
                                   request_id=1, producer_name="p")),
             ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="p"))]
    for seq, (plain, codec, n, extra) in enumerate(messages):
        wire = b"\xff" * 300 if extra == "garbage" else fb.compress(codec, plain)
        common = dict(producer_name="p", sequence_id=seq, compression=codec, uncompressed_size=len(plain))
        if n == 1:
            items.append(("c", fb.send_frame(wire, md=fb.metadata(**common), producer_id=1, sequence_id=seq)))
            continue
        k = -(-len(wire) // n)
        parts = [(i, wire[i * k:(i + 1) * k]) for i in range(n)]
        if extra == "duplicate":
            parts.insert(2, parts[1])
        for i, part in parts:
            md = fb.metadata(uuid=f"p-{seq}", chunk_id=i, num_chunks_from_msg=n, total_chunk_msg_size=len(wire),
                             **common)
            items.append(("c", fb.send_frame(part, md=md, producer_id=1, sequence_id=seq, is_chunk=True)))
    fb.tcp_pcap(path, items)


def _producer_stats(path, summary: bool) -> dict:
    collector = StatsCollector()
    for rec in analysed_records(path, summary=summary):
        collector.add(rec)
    (producer,) = collector.result()["producers"]
    return producer


@pytest.mark.parametrize("summary", [True, False])
def test_compression_ratio_counts_each_chunked_message_once_whole(tmp_path, summary):
    import framebuild as fb

    chunked = b"abcd" * 20_000  # very compressible, sent in 4 chunks
    single = bytes(range(256)) * 8 + b"tail"  # hardly compressible, in one SEND
    again = b"0123456789" * 3_000  # in 3 chunks, its middle chunk sent twice (counted once)
    path = tmp_path / "z.pcap"
    _chunked_compressed_capture(path, [(chunked, fb.LZ4, 4, None), (single, fb.ZSTD, 1, None),
                                       (again, fb.ZLIB, 3, "duplicate")])
    wire = sum(len(fb.compress(c, p)) for p, c in ((chunked, fb.LZ4), (single, fb.ZSTD), (again, fb.ZLIB)))
    plain = len(chunked) + len(single) + len(again)
    p = _producer_stats(path, summary)
    assert p["compression_ratio"] == round(plain / wire, 2)
    # without the chunked messages it would be the single SEND's ratio, far lower
    assert p["compression_ratio"] > 10 * round(len(single) / len(fb.compress(fb.ZSTD, single)), 2)


@pytest.mark.parametrize("summary", [True, False])
def test_a_chunked_message_that_cannot_be_decompressed_stays_out_of_the_ratio(tmp_path, summary):
    import framebuild as fb

    single = b"xy" * 5_000
    path = tmp_path / "bad.pcap"
    _chunked_compressed_capture(path, [(b"q" * 4000, fb.LZ4, 3, "garbage"), (single, fb.LZ4, 1, None)])
    p = _producer_stats(path, summary)
    assert p["compression_ratio"] == round(len(single) / len(fb.compress(fb.LZ4, single)), 2)
    # and with nothing else compressed, there is no ratio at all (not the chunks' wire bytes over nothing)
    alone = tmp_path / "alone.pcap"
    _chunked_compressed_capture(alone, [(b"q" * 4000, fb.LZ4, 3, "garbage")])
    assert _producer_stats(alone, summary)["compression_ratio"] is None


def test_unfinished_chunked_messages_are_forgotten_beyond_the_bound(monkeypatch):
    from dissector.output import stats

    monkeypatch.setattr(stats, "CHUNK_MEMORY", 4)
    collector = StatsCollector()
    info = {"id": 1, "name": "p", "topic": "t"}

    def chunk(index, uuid, cid, n, reassembled=None):
        rec = {"index": index, "type": "SEND", "time": float(index), "conn": 1, "src": "a:1", "dst": "b:6650",
               "direction": "to_broker", "packet": index, "command": {}, "size": 100, "problems": [],
               "producer": info, "payload_size": 10, "metadata": {"compression": "LZ4"},
               "messages_summary": {"count": 1, "bytes": 10, "chunk": {"chunk_id": cid, "num_chunks": n,
                                                                         "uuid": uuid}}}
        if reassembled is not None:
            rec["reassembled"] = reassembled
        collector.add(rec)

    for i in range(10):  # ten messages never finished: at most four chunk frames remembered
        chunk(i + 1, f"u{i}", 0, 2)
    actor = collector.core.state()["producers"][0]
    assert actor["chunk_frames_pending"] == 4 and actor["chunks_pending"] == ["u6", "u7", "u8", "u9"]
    chunk(11, "u9", 1, 2, {"uuid": "u9", "payload_size": 100, "payload_sha256": "x", "chunks": [10, 11]})
    chunk(12, "u0", 1, 2, {"uuid": "u0", "payload_size": 100, "payload_sha256": "x", "chunks": [1, 12]})  # forgotten
    assert collector.result()["producers"][0]["compression_ratio"] == 5.0
    actor = collector.core.state()["producers"][0]
    assert actor["chunk_frames_pending"] == 3 and "u0" not in actor["chunks_pending"]


def test_latency_sample_draws_as_pythons_seeded_random_so_saved_figures_stay_comparable():
    # Algorithm R with random.Random(1), written here as the oracle: the core's sample must hold the same items
    import random

    from dissector.output.stats import Latencies

    rng, seen, expected = random.Random(1), 0, []
    lat = Latencies(cap=100)
    for v in range(5000):
        seen += 1
        if len(expected) < 100:
            expected.append(float(v))
        else:
            slot = rng.randrange(seen)
            if slot < 100:
                expected[slot] = float(v)
        lat.add(float(v))
    assert lat.items == expected and lat.count == 5000


_ALL_CAPTURES = sorted(p for p in capture_path("01_basic_nonbatched.pcap").parent.iterdir()
                       if p.name.endswith((".pcap", ".pcapng", ".pcap.gz")))


@pytest.mark.parametrize("path", _ALL_CAPTURES, ids=lambda p: p.name)
def test_statistics_made_in_the_core_equal_those_of_the_records_as_dicts(path):
    # `stats` without a filter sends the records into the statistics inside the core (records.rs MapSink);
    # with a filter, the dicts go in from Python: both readers of a record must count the same
    inside = StatsCollector()
    events = list(analysed_records(path, summary=True, stats=inside.core))
    assert all("index" not in rec for rec in events)  # no frame's record comes out
    from_dicts = StatsCollector()
    for rec in analysed_records(path, summary=True):
        from_dicts.add(rec)
    assert inside.result() == from_dicts.result() and inside.result()["frames"] > 0
    assert inside.latency_samples == from_dicts.latency_samples and inside.throughput == from_dicts.throughput


@pytest.mark.parametrize("make", ["pcapng_with_notes_mid_file", "pcap_joined_mid_file"])
def test_statistics_made_in_the_core_count_the_capture_notes_in_their_place(make, tmp_path):
    import test_read_batches

    path = getattr(test_read_batches, make)(tmp_path)
    inside = StatsCollector()
    events = [rec["type"] for rec in analysed_records(path, summary=True, stats=inside.core)]
    assert "CAPTURE_NOTE" in events
    from_dicts = StatsCollector()
    for rec in analysed_records(path, summary=True):
        from_dicts.add(rec)
    assert inside.result() == from_dicts.result() and inside.result()["events"]["CAPTURE_NOTE"] > 0


def test_producers_and_consumers_share_one_memory_budget_and_connections_a_smaller_latency_sample():
    from dissector.options import Options

    collector = StatsCollector(Options(stats_memory_total=4000, actor_latency_samples=100))
    for producer in (1, 2):
        info = {"id": producer, "name": f"p{producer}", "topic": "t"}
        for i in range(3000):  # never answered: each producer may remember 4000 / 2 of them
            index = producer * 10_000 + i
            collector.add({"index": index, "type": "SEND", "time": float(i), "conn": 1, "src": "a:1",
                           "dst": "b:6650", "direction": "to_broker", "packet": index, "command": {}, "size": 80,
                           "problems": [], "producer": info, "payload_size": 10,
                           "messages_summary": {"count": 1, "bytes": 10}})
    for i in range(500):
        collector.add({"index": 90_000 + i, "type": "PONG", "time": 5000.0 + i, "conn": 1, "src": "b:6650",
                       "dst": "a:1", "direction": "to_client", "packet": 90_000 + i, "command": {}, "size": 8,
                       "problems": [], "latency_ms": float(i), "request_type": "PING"})
    result = collector.result()
    assert [p["messages_unanswered"] for p in result["producers"]] == [2000, 2000]
    assert result["latency_ms"]["PING"]["exact"] is True and result["latency_ms"]["PING"]["count"] == 500
    conn = result["connections"][0]["latency_ms"]["PING"]
    assert conn["exact"] is False and conn["count"] == 500 and conn["max"] == 499.0


def test_a_topic_counts_what_the_broker_accepted_apart_from_what_was_sent():
    """11b: the client API sent one message that fit (its step "ok") and one of 100,000 bytes above the broker's
    limit, which the client sent again and again and the broker refused each time (its manifest)."""
    root = Path(__file__).resolve().parent.parent
    manifest = json.loads((root / "captures" / "11b_send_error_too_big.json").read_text())
    accepted = sum(1 for step in manifest["steps"] if step["step"].startswith("send ") and step.get("result") == "ok")
    res = subprocess.run([sys.executable, "-m", "dissector.cli.main", "stats", "--json",
                          str(root / "captures" / "11b_send_error_too_big.pcap.gz")],
                         capture_output=True, text=True, timeout=120)
    topic = json.loads(res.stdout)["topics"][manifest["topic"]]
    assert topic["messages_accepted"] == accepted == 1
    assert topic["messages_rejected"] == topic["messages_sent"] - accepted > 0
