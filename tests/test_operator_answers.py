"""What an operator asks, answered where they look (issue 33, items 6 and 7): the consumer table's unacked count,
message rates per topic in pulsar-admin's names, SEND latency apart from SEND_ERROR answers (``stats`` and
``check``), a reconnecting producer's total over its connections, what caused a redelivery (and the REDELIVER in
the message's journey), and a SUBSCRIBE that another consumer's Exclusive subscription keeps waiting.

Shipped captures where they hold the case (11b: SEND_ERRORs and a producer back on 15 connections; 11_errors and
rs_03: SUBSCRIBEs left unanswered while another consumer holds the subscription Exclusive); else conversations
built frame by frame (tests/framebuild.py through test_analysis.Conversation).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from framebuild import message_frame, send_frame, simple_frame
from test_analysis import TO_BROKER, TO_CLIENT, Conversation, findings

from dissector.analysis.journeys import MessageRef, follow_message
from dissector.check.rules import Latency
from dissector.options import Options
from dissector.output.stats import StatsCollector
from dissector.run import analysed_records

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
SEND_ERRORS = CAPTURES / "11b_send_error_too_big.pcap.gz"
RS03 = [str(CAPTURES / "pulsar_rs" / "rs_03_snappy.pcap"), "--port", "16650"]
TOPIC = "persistent://public/default/t"


def _cli(*args: str) -> str:
    run = subprocess.run([sys.executable, "-m", "dissector.cli.main", *args], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return run.stdout


def _stats(path: Path) -> dict:
    collector = StatsCollector()
    for rec in analysed_records(path, Options()):
        collector.add(rec)
    return collector.result()


def _written(c: Conversation) -> Path:
    c.annotated()  # writes the capture
    return c._path


# ---------------------------------------------------------------------------------------------- unacked column

def test_the_consumer_table_shows_the_unacked_count_the_json_has():
    data = json.loads(_cli("stats", "--json", *RS03))
    unacked = {c["name"]: c["messages_unacked"] for c in data["consumers"]}
    assert unacked["rs-batch-consumer"] > 0  # the case: a consumer that acknowledged nothing
    lines = _cli("stats", "--plain", *RS03).splitlines()
    for name, count in unacked.items():
        at = next(i for i, line in enumerate(lines) if line.startswith(name + " "))
        header = next(lines[i].split() for i in range(at, -1, -1) if lines[i].startswith("consumer "))
        # the row: the name and its (id@cN), then one value per numeric column
        values = lines[at].split()[2:]
        assert values[header.index("unacked") - 1] == f"{count:,}"


# ---------------------------------------------------------------------------------------------- message rates

def test_topic_rates_use_pulsar_admin_names_over_the_capture_duration():
    data = json.loads(_cli("stats", "--json", str(CAPTURES / "09_shared.pcap")))
    (topic,) = data["topics"].values()
    window = data["duration_s"]
    assert topic["rate_window_s"] == window > 0
    assert topic["msgRateIn"] == pytest.approx(topic["messages_sent"] / window, abs=1e-3)
    assert topic["msgRateOut"] == pytest.approx(topic["messages_received"] / window, abs=1e-3)
    assert topic["msgThroughputIn"] == pytest.approx(topic["bytes_sent"] / window, abs=1e-3)
    assert topic["msgThroughputOut"] == pytest.approx(topic["bytes_received"] / window, abs=1e-3)
    assert "msgRateIn" in _cli("stats", "--plain", str(CAPTURES / "09_shared.pcap"))


def test_rates_over_a_window_of_no_time_are_null():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic=TOPIC, producer_id=0, request_id=1, producer_name="p"), 0)
    c.frame(1, TO_BROKER, send_frame(b"m", producer_id=0, sequence_id=0), 0)
    (topic,) = _stats(_written(c))["topics"].values()
    assert topic["messages_sent"] == 1 and topic["rate_window_s"] == 0
    assert [topic[k] for k in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")] == [None] * 4


# ---------------------------------------------------------------------------------------------- SEND latency

def test_send_latency_percentiles_are_receipts_only_and_send_errors_are_apart():
    recs = list(analysed_records(SEND_ERRORS, Options()))
    receipts = [r["latency_ms"] for r in recs if r.get("type") == "SEND_RECEIPT" and "latency_ms" in r]
    refusals = [r["latency_ms"] for r in recs if r.get("type") == "SEND_ERROR" and "latency_ms" in r]
    assert receipts and refusals  # the case
    collector = StatsCollector()
    for rec in recs:
        collector.add(rec)
    data = collector.result()
    assert data["latency_ms"]["SEND"]["count"] == len(receipts)
    assert data["latency_ms"]["SEND"]["max"] == max(receipts)
    assert data["latency_ms"]["SEND→SEND_ERROR"]["count"] == len(refusals)
    producers = data["producers"]
    assert sum((p["send_latency_ms"] or {}).get("count", 0) for p in producers) == len(receipts)
    assert sum((p["send_error_latency_ms"] or {}).get("count", 0) for p in producers) == len(refusals)
    # connections too
    assert sum(c["latency_ms"].get("SEND→SEND_ERROR", {}).get("count", 0) for c in data["connections"]) == \
        len(refusals)


def test_checks_send_latency_rule_counts_send_errors_apart():
    rule = Latency("send-p50", "SEND", 50, 0.5)
    recs = list(analysed_records(SEND_ERRORS, Options()))
    for rec in recs:
        rule.add(rec)
    refusals = sum(1 for r in recs if r.get("type") == "SEND_ERROR" and "latency_ms" in r)
    assert rule.latencies.count == sum(1 for r in recs if r.get("type") == "SEND_RECEIPT" and "latency_ms" in r)
    assert rule.refused == refusals
    # the one receipt took 0.82 ms; the refusals' quick answers no longer pull the median under the bound
    assert not rule.verdict().passed


# ---------------------------------------------------------------------------------------------- producer totals

def test_a_producer_back_on_several_connections_gets_a_total():
    data = json.loads(_cli("stats", "--json", str(SEND_ERRORS)))
    parts = [p for p in data["producers"] if p["name"] == "big-producer"]
    assert len({p["conn"] for p in parts}) > 1  # the case: the C++ client reconnects after each SEND_ERROR
    (total,) = data["producer_totals"]
    assert (total["topic"], total["name"]) == (parts[0]["topic"], "big-producer")
    assert total["connections"] == len({p["conn"] for p in parts})
    for key in ("messages", "receipts", "messages_accepted", "messages_rejected"):
        assert total[key] == sum(p[key] for p in parts)
    assert total["errors"] == {"NotAllowedError": sum(p["errors"].get("NotAllowedError", 0) for p in parts)}
    text = _cli("stats", "--plain", str(SEND_ERRORS))
    row = next(line for line in text.splitlines() if line.startswith("big-producer") and "total" in line)
    assert f"{total['messages']:,}" in row.split()


def test_a_producer_on_one_connection_has_no_total():
    data = json.loads(_cli("stats", "--json", str(CAPTURES / "09_shared.pcap")))
    assert data["producer_totals"] == []


# ---------------------------------------------------------------------------------------------- redelivery causes

def _subscribe(c: Conversation, cid: int, consumer_id: int, *, name: str = "c", sub_type: int = 1,
               time: float = 0, answered: bool = True):
    sub = c.frame(cid, TO_BROKER, simple_frame("SUBSCRIBE", topic=TOPIC, subscription="s", consumer_id=consumer_id,
                                               request_id=100 + consumer_id, subType=sub_type, consumer_name=name),
                  time)
    if answered:
        c.frame(cid, TO_CLIENT, simple_frame("SUCCESS", request_id=100 + consumer_id), time + 0.01)
    return sub


def _redelivered(seen) -> dict:
    (note,) = [f for f in findings(seen) if f.id == "message.redelivered"]
    return note.params


def test_a_redelivery_names_the_request_that_asked_for_it():
    c = Conversation()
    _subscribe(c, 1, 0)
    for i in range(3):
        c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=i), 1 + i)
    nack = c.frame(1, TO_BROKER, simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=0,
                                              message_ids=[{"ledgerId": 1, "entryId": 1}]), 5)
    again = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=1, redelivery_count=1), 6)
    # a negative ack and an ack timeout send this same command: the cause says what the wire can
    assert _redelivered(again)["cause"] == "redeliver_request"
    assert _redelivered(again)["cause_frame"] == nack.frame.index
    every = c.frame(1, TO_BROKER, simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=0), 7)
    all_again = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=2, redelivery_count=1), 8)
    assert _redelivered(all_again)["cause"] == "redeliver_all"
    assert _redelivered(all_again)["cause_frame"] == every.frame.index


def test_a_redelivery_after_the_subscription_came_back_on_a_new_connection_is_a_reconnection():
    c = Conversation()
    _subscribe(c, 1, 0, name="worker")
    c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=4), 1)
    c.close(1, 2)
    _subscribe(c, 2, 0, name="worker", time=3)
    again = c.frame(2, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=4, redelivery_count=1), 4)
    assert _redelivered(again)["cause"] == "reconnection" and _redelivered(again)["cause_conn"] == 1


def test_a_redelivery_nothing_in_the_capture_explains_says_unknown():
    c = Conversation()
    _subscribe(c, 1, 0)
    m = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=1, redelivery_count=3), 1)
    assert _redelivered(m)["cause"] == "unknown"


def test_the_journey_of_a_redelivered_message_includes_the_redeliver_request():
    c = Conversation()
    _subscribe(c, 1, 0)
    first = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, ledger_id=7, entry_id=2), 1)
    c.frame(1, TO_CLIENT, message_frame(b"n", consumer_id=0, ledger_id=7, entry_id=3), 1.5)
    nack = c.frame(1, TO_BROKER, simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=0,
                                              message_ids=[{"ledgerId": 7, "entryId": 2}]), 2)
    other = c.frame(1, TO_BROKER, simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=0,
                                               message_ids=[{"ledgerId": 7, "entryId": 3}]), 2.5)
    again = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, ledger_id=7, entry_id=2, redelivery_count=1), 3)
    (journey,) = follow_message(analysed_records(_written(c), Options()), MessageRef(7, 2))
    indexes = [r["index"] for r in journey.frames]
    assert nack.frame.index in indexes and other.frame.index not in indexes
    assert indexes == sorted([first.frame.index, nack.frame.index, again.frame.index])


def test_the_journey_includes_a_redeliver_all_that_hands_the_message_back():
    c = Conversation()
    _subscribe(c, 1, 0)
    c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, ledger_id=7, entry_id=2), 1)
    every = c.frame(1, TO_BROKER, simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=0), 2)
    (journey,) = follow_message(analysed_records(_written(c), Options()), MessageRef(7, 2))
    assert every.frame.index in [r["index"] for r in journey.frames]


# ---------------------------------------------------------------------------------------------- Exclusive held

def _held(seen) -> list[dict]:
    return [f.params for f in findings(seen) if f.id == "subscribe.exclusive_held"]


def test_a_subscribe_refused_while_another_consumer_holds_the_subscription_exclusive_says_so():
    c2 = Conversation()
    exclusive = _subscribe(c2, 1, 0, name="holder", sub_type=0)
    busy = _subscribe(c2, 2, 0, name="second", sub_type=0, time=1, answered=False)
    c2.frame(2, TO_CLIENT, simple_frame("ERROR", request_id=100, error=5, message="Exclusive consumer is already "
                                        "connected"), 1.01)  # ConsumerBusy
    assert _held(exclusive) == []
    assert _held(busy) == [{"topic": TOPIC, "subscription": "s", "type": "Exclusive", "other_conn": 1,
                            "other_consumer_id": 0, "other_name": "holder"}]
    # once the holder closes, the subscription is free
    c2.frame(1, TO_BROKER, simple_frame("CLOSE_CONSUMER", consumer_id=0, request_id=300), 2)
    assert _held(_subscribe(c2, 3, 0, name="third", sub_type=0, time=3)) == []


def test_a_shared_subscription_and_a_refused_exclusive_hold_nothing():
    c = Conversation()
    _subscribe(c, 1, 0, name="a", sub_type=1)  # Shared
    assert _held(_subscribe(c, 2, 0, name="b", sub_type=1, time=1)) == []
    c2 = Conversation()
    _subscribe(c2, 1, 0, name="a", sub_type=0, answered=False)  # never granted: holds nothing
    assert _held(_subscribe(c2, 2, 0, name="b", sub_type=0, time=1)) == []
    c3 = Conversation()
    _subscribe(c3, 1, 0, name="a", sub_type=0)
    c3.close(1, 1)  # its connection ended: the broker let go
    assert _held(_subscribe(c3, 2, 0, name="b", sub_type=0, time=2)) == []


def test_shipped_subscribes_left_unanswered_behind_an_exclusive_consumer_are_flagged():
    """11_errors: client A holds excl-sub Exclusive on c1; B (Exclusive) and C (Shared) subscribe on new
    connections, which the broker closes unanswered until their timeout."""
    recs = list(analysed_records(CAPTURES / "11_errors.pcap", Options()))
    subscribes = [r for r in recs if r.get("type") == "SUBSCRIBE" and r["command"].get("subscription") == "excl-sub"]
    flagged = [r for r in subscribes if any(e["id"] == "subscribe.exclusive_held" for e in r.get("expert") or ())]
    assert subscribes[0]["conn"] == 1 and subscribes[0] not in flagged
    assert flagged and all(r["conn"] != 1 for r in flagged)
    answered = {r["answers"] for r in recs if r.get("type") == "SUCCESS" and "answers" in r}
    assert not any(r["index"] in answered for r in flagged)
