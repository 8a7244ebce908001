"""Statistics and actor views checked against the corpus manifests (what the client API really did)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from corpus import capture_path, manifest, manifest_stems
from dissector.run import analysed_events
from dissector.stats import StatsCollector, percentile


@functools.lru_cache(maxsize=None)
def stats_of(stem: str) -> dict:
    collector = StatsCollector()
    for ev in analysed_events(capture_path(stem + ".pcap")):
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
    data = stats_of("11b_send_error_too_big")
    assert data["server_errors"] == {"NotAllowedError": 15}
    (producer,) = {p["name"] for p in data["producers"]}
    assert producer == "big-producer"
    assert sum(p["errors"].get("NotAllowedError", 0) for p in data["producers"]) == 15


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
    result = _cli("follow", str(capture_path("09_shared.pcap")), "--consumer", "consumer-B", "--json")
    assert result.returncode == 0, result.stderr
    recs = [json.loads(line) for line in result.stdout.splitlines()]
    messages = [r for r in recs if r["type"] == "MESSAGE"]
    assert sum(len(r["messages"]) for r in messages) == m["counts"]["consumer-B"]
    assert {r["consumer"]["name"] for r in recs if "consumer" in r} == {"consumer-B"}
    assert any(r["type"] == "SUBSCRIBE" and r["command"]["consumer_name"] == "consumer-B" for r in recs)


def test_follow_needs_an_actor():
    result = _cli("follow", str(capture_path("09_shared.pcap")))
    assert result.returncode == 2
    assert "--producer" in result.stderr


def test_latency_reservoir_is_exact_below_its_cap_and_bounded_above():
    from dissector.stats import Latencies

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
    assert len(big.sample.items) == 200
    assert s["count"] == 20000 and s["max"] == 1000.0 and s["mean"] == 500.5 and s["exact"] is False
    assert 400 <= s["p50"] <= 600 and s["p99"] >= 900  # a uniform sample of a uniform distribution


def test_publish_latency_per_producer_and_per_connection():
    m = manifest("03_compression_zstd")
    data = stats_of("03_compression_zstd")
    by_name = {p["name"]: p for p in data["producers"]}
    for spec in m["producers"]:
        sends = by_name[spec["producer_name"]]["send_latency_ms"]
        assert sends["count"] == by_name[spec["producer_name"]]["receipts"] > 0
    (conn,) = data["connections"]
    assert conn["latency_ms"]["SEND"]["count"] == data["latency_ms"]["SEND"]["count"]
