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


def _held_at_end(c: Conversation) -> list[dict]:
    return [e.details for e in c.events if e.kind == "SUBSCRIBE_HELD_AT_END"]


HOLDER = {"topic": TOPIC, "subscription": "s", "other_conn": 1, "other_consumer_id": 0, "other_name": "holder"}


def test_a_subscribe_refused_while_another_consumer_holds_the_subscription_exclusive_says_so():
    c = Conversation()
    _subscribe(c, 1, 0, name="holder", sub_type=0)  # Exclusive (subType 0; 1 is Shared)
    busy = _subscribe(c, 2, 0, name="second", sub_type=0, time=1, answered=False)
    refusal = c.frame(2, TO_CLIENT, simple_frame("ERROR", request_id=100, error=5,  # ConsumerBusy
                                                 message="Exclusive consumer is already connected"), 1.01)
    assert _held(busy) == []  # said on the answer, which tells what became of it
    assert _held(refusal) == [{**HOLDER, "subscribe_frame": busy.frame.index, "type": "Exclusive",
                               "error": "ConsumerBusy"}]
    # once the holder closes, the subscription is free
    c.frame(1, TO_BROKER, simple_frame("CLOSE_CONSUMER", consumer_id=0, request_id=300), 2)
    _subscribe(c, 3, 0, name="third", sub_type=1, time=3, answered=False)
    c.frame(3, TO_CLIENT, simple_frame("ERROR", request_id=100, error=5), 3.01)
    assert sum(len(_held(f)) for f in c.frames) == 1 and _held_at_end(c) == []


def test_a_subscribe_left_unanswered_behind_an_exclusive_consumer_is_said_when_its_connection_ends():
    c = Conversation()
    _subscribe(c, 1, 0, name="holder", sub_type=0)
    waiting = _subscribe(c, 2, 0, name="second", sub_type=1, time=1, answered=False)  # Shared: refused too
    c.close(2, 2)
    assert _held_at_end(c) == [{**HOLDER, "subscribe_frame": waiting.frame.index, "type": "Shared"}]


def test_a_subscribe_the_broker_granted_or_that_no_exclusive_consumer_held_is_not_flagged():
    c = Conversation()
    _subscribe(c, 1, 0, name="holder", sub_type=0)
    _subscribe(c, 2, 0, name="holder", sub_type=0, time=1)  # granted: the broker had let go of the holder unseen
    shared = Conversation()
    _subscribe(shared, 1, 0, name="a", sub_type=1)  # Shared holds nothing
    _subscribe(shared, 2, 0, name="b", sub_type=1, time=1, answered=False)
    shared.close(2, 2)
    refused = Conversation()
    _subscribe(refused, 1, 0, name="a", sub_type=0, answered=False)  # never granted: holds nothing
    _subscribe(refused, 2, 0, name="b", sub_type=0, time=1, answered=False)
    refused.close(2, 2)
    gone = Conversation()
    _subscribe(gone, 1, 0, name="a", sub_type=0)
    gone.close(1, 1)  # its connection ended: the broker let go
    _subscribe(gone, 2, 0, name="b", sub_type=0, time=2, answered=False)
    gone.close(2, 3)
    sought = Conversation()
    _subscribe(sought, 1, 0, name="a", sub_type=0)
    # the broker disconnects a subscription's consumers on a seek (the client subscribes again)
    sought.frame(1, TO_BROKER, simple_frame("SEEK", consumer_id=0, request_id=7, message_publish_time=1), 1)
    _subscribe(sought, 2, 0, name="a", sub_type=0, time=2, answered=False)
    sought.close(2, 3)
    for conversation in (c, shared, refused, gone, sought):
        assert sum(len(_held(f)) for f in conversation.frames) == 0 and _held_at_end(conversation) == []


def test_shipped_subscribes_left_unanswered_behind_an_exclusive_consumer_are_said():
    """11_errors: client A holds excl-sub Exclusive on c1; B (Exclusive) and C (Shared) subscribe on new
    connections, which the broker closes unanswered until their timeout."""
    recs = list(analysed_records(CAPTURES / "11_errors.pcap", Options()))
    subscribes = [r for r in recs if r.get("type") == "SUBSCRIBE" and r["command"].get("subscription") == "excl-sub"]
    held = [r for r in recs if r.get("type") == "SUBSCRIBE_HELD_AT_END"]
    assert subscribes[0]["conn"] == 1 and len(subscribes) > 2
    assert sorted(e["details"]["subscribe_frame"] for e in held) == [r["index"] for r in subscribes[1:]]
    assert {(e["details"]["other_conn"], e["details"]["other_name"]) for e in held} == \
        {(1, subscribes[0]["command"]["consumer_name"])}
    assert {e["details"]["type"] for e in held} == {"Exclusive", "Shared"}
