"""What the analysis links and warns about across frames and connections: a message delivered N times (one
warning with N and the frames), a redelivery request and the MESSAGE frames it asks for again, where a SEEK
lands, two producers holding an Exclusive topic, a stream that ends inside a frame, and the time of a
connection found by ``--detect``.

Built from frames where the real broker and client cannot produce the case (pulsar-lite refuses a second
Exclusive producer; no client stops mid-frame on its own); the SEEK case is the shipped 07_seek recording,
judged by its manifest. Recorded traffic for these warnings is in test_warnings_recorded.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import framebuild as fb
from framebuild import message_frame, simple_frame
from test_analysis import TO_BROKER, TO_CLIENT, Conversation, findings, ids

from dissector.options import Options
from dissector.run import analysed_records

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def _subscribe(c: Conversation, cid: int, consumer_id: int, sub_type: int = 1, name: str = "c", time: float = 0):
    c.frame(cid, TO_BROKER, simple_frame("SUBSCRIBE", topic="persistent://public/default/t", subscription="s",
                                         consumer_id=consumer_id, request_id=100 + consumer_id, subType=sub_type,
                                         consumer_name=name), time)


def test_a_message_delivered_three_times_is_one_warning_with_its_frames():
    c = Conversation()
    _subscribe(c, 1, 0, name="nacker")
    deliveries = [c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=5, redelivery_count=k), 1 + k)
                  for k in range(3)]
    once = c.frame(1, TO_CLIENT, message_frame(b"n", consumer_id=0, entry_id=6), 4)
    # each repeat says which delivery it is and names the true first one, not the previous copy
    notes = [findings(a)[0].params for a in deliveries[1:]]
    assert [(p["delivery"], p["first_frame"]) for p in notes] == [(2, deliveries[0].frame.index),
                                                                  (3, deliveries[0].frame.index)]
    assert [a.notes.get("delivery") for a in deliveries] == [None, 2, 3]
    assert ids(deliveries[0]) == [] and ids(once) == []
    close = c.frame(1, TO_BROKER, simple_frame("CLOSE_CONSUMER", consumer_id=0, request_id=9), 5)
    assert "consumer.unacked" in ids(close)
    (warning,) = [e for e in c.events if e.kind == "REDELIVERED"]
    assert warning.details == {"consumer_id": 0, "name": "nacker", "ledger": 1, "entry": 5, "count": 3,
                               "frames": [a.frame.index for a in deliveries], "redelivery_count": 2}
    assert warning.time == 5  # said when the consumer closed


def test_repeated_deliveries_still_open_at_the_end_are_said_when_the_connection_ends():
    c = Conversation()
    _subscribe(c, 1, 0)
    a = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=1), 1)
    b = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=1, redelivery_count=1), 2)
    c.close(1, 3)
    (warning,) = [e for e in c.events if e.kind == "REDELIVERED"]
    assert warning.details["frames"] == [a.frame.index, b.frame.index] and warning.details["count"] == 2


def test_a_first_seen_delivery_the_broker_marks_redelivered_counts_once():
    c = Conversation()
    _subscribe(c, 1, 0)
    m = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=1, redelivery_count=4), 1)
    assert findings(m)[0].params["first_frame"] is None and "delivery" not in m.notes
    c.close(1, 2)
    (warning,) = [e for e in c.events if e.kind == "REDELIVERED"]
    assert warning.details["count"] == 1 and warning.details["redelivery_count"] == 4


def test_a_redelivery_request_links_to_the_messages_it_asks_for_and_they_link_back():
    c = Conversation()
    _subscribe(c, 1, 0)
    ms = [c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=i), 1 + i) for i in range(4)]
    c.frame(1, TO_BROKER, simple_frame("ACK", consumer_id=0, ack_type=0, message_id=[{"ledgerId": 1, "entryId": 0}]), 5)
    some = c.frame(1, TO_BROKER, simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=0,
                                              message_ids=[{"ledgerId": 1, "entryId": 2}]), 6)
    assert some.notes["redelivers"] == [ms[2].frame.index] and some.notes["redelivers_count"] == 1
    again = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=2, redelivery_count=1), 7)
    assert again.notes["redelivery_requested_by"] == some.frame.index
    every = c.frame(1, TO_BROKER, simple_frame("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=0), 8)
    # "all": every message still unacknowledged (entry 0 was acked; entry 2's latest copy is frame `again`)
    assert every.notes["redelivers"] == sorted([ms[1].frame.index, ms[3].frame.index, again.frame.index])


def test_the_message_a_seek_lands_on_is_marked_even_after_a_new_subscription():
    """07_seek: the manifest says pulsar-lite re-delivers #15..#19 after close and re-subscribe, i.e. the
    publish-time SEEK moved the cursor to #15. The first MESSAGE after the SEEK points back to it."""
    manifest = json.loads((CAPTURES / "07_seek.json").read_text())
    recs = list(analysed_records(CAPTURES / "07_seek.pcap", Options()))
    seeks = [r for r in recs if r.get("type") == "SEEK"]
    landed = [r for r in recs if "after_seek" in r]
    assert len(landed) == 1 and landed[0]["type"] == "MESSAGE"
    by_publish_time = [s for s in seeks if "message_publish_time" in s["command"]]
    assert landed[0]["after_seek"] == by_publish_time[-1]["index"]
    # message #15 as the client's send() reported its id
    sent_15 = next(m for m in manifest["sent"] if m["i"] == 15)["message_id"]
    got = landed[0]["command"]["message_id"]
    assert (got["ledgerId"], got["entryId"]) == (sent_15["ledger_id"], sent_15["entry_id"])
    assert not any(r.get("index", 0) > landed[0]["index"] and "after_seek" in r for r in recs)


def _producer(c: Conversation, cid: int, pid: int, mode: int | None, time: float, name: str):
    fields = {"topic": "persistent://public/default/x", "producer_id": pid, "request_id": 10 + pid,
              "producer_name": name}
    if mode is not None:
        fields["producer_access_mode"] = mode
    c.frame(cid, TO_BROKER, simple_frame("PRODUCER", **fields), time)
    return c.frame(cid, TO_CLIENT, simple_frame("PRODUCER_SUCCESS", request_id=10 + pid, producer_name=name), time + .1)


def test_two_producers_holding_an_exclusive_topic_across_connections_are_flagged():
    c = Conversation()
    first = _producer(c, 1, 0, 1, 0, "a")  # Exclusive
    assert ids(first) == []
    second = _producer(c, 2, 0, 0, 1, "b")  # Shared, another connection, same topic
    (conflict,) = [f for f in findings(second) if f.id == "producer.exclusive_conflict"]
    assert conflict.params == {"topic": "persistent://public/default/x", "mode": "Shared", "other_conn": 1,
                               "other_producer_id": 0, "other_name": "a", "other_mode": "Exclusive"}
    # once the exclusive one is closed, a new producer is fine
    c.frame(1, TO_BROKER, simple_frame("CLOSE_PRODUCER", producer_id=0, request_id=50), 2)
    c.frame(2, TO_BROKER, simple_frame("CLOSE_PRODUCER", producer_id=0, request_id=51), 2.1)
    assert ids(_producer(c, 2, 1, 1, 3, "c")) == []


def test_shared_producers_and_fencing_are_not_conflicts_and_a_closed_connection_lets_go():
    c = Conversation()
    assert ids(_producer(c, 1, 0, None, 0, "a")) == [] and ids(_producer(c, 2, 0, 0, 1, "b")) == []
    # ExclusiveWithFencing takes the topic from the others: the broker fences them, by design
    assert ids(_producer(c, 3, 0, 3, 2, "fencer")) == []
    c.close(3, 3)
    assert ids(_producer(c, 4, 0, 1, 4, "next")) == []


def _cut_capture(tmp_path: Path, how: str) -> list[dict]:
    connect = fb.simple_frame("CONNECT", client_version="t", protocol_version=20)
    connected = fb.simple_frame("CONNECTED", server_version="b", protocol_version=20)
    send = fb.send_frame(b"x" * 3000, producer_id=0, sequence_id=0)
    path = tmp_path / "cut.pcap"
    fb.tcp_pcap(path, [("c", connect), ("b", connected), ("c", send[:1000])], fin=how == "fin")
    return list(analysed_records(path, Options()))


def test_a_stream_that_ends_inside_a_frame_is_the_sender_stopping_not_a_capture_gap(tmp_path):
    recs = _cut_capture(tmp_path, "fin")
    (cut,) = [r for r in recs if r.get("type") == "SEND"]
    expert = {e["id"]: e for e in cut.get("expert", [])}
    assert "frame.gap_damaged" not in expert and "frame.cut_at_end" in expert
    assert not any(r.get("type") == "GAP" for r in recs)
    closed = [r for r in recs if r.get("type") == "CONNECTION_CLOSED"]
    assert closed and closed[0]["details"]["how"] == "fin"
    # the broker never got the request whole: it awaits no answer
    assert not any(r.get("type") in ("UNANSWERED", "OVERDUE") for r in recs)


def test_a_capture_that_ends_inside_a_frame_says_so(tmp_path):
    recs = _cut_capture(tmp_path, "end")
    (cut,) = [r for r in recs if r.get("type") == "SEND"]
    assert [e["id"] for e in cut["expert"]][0] == "frame.cut_at_end"


def test_detected_connections_open_at_their_first_packet_not_at_the_frame_that_proved_them(tmp_path):
    path = tmp_path / "off_port.pcap"
    connect = fb.simple_frame("CONNECT", client_version="t", protocol_version=20)
    connected = fb.simple_frame("CONNECTED", server_version="b", protocol_version=20)
    fb.tcp_pcap(path, [("c", connect), ("b", connected)], broker=("10.0.0.1", 16650), step=0.5)
    recs = list(analysed_records(path, Options(detect=True)))
    (opened,) = [r for r in recs if r.get("type") == "CONNECTION_OPENED"]
    first = min(r["time"] for r in recs if "index" in r)
    assert opened["packet"] == 1 and opened["time"] < first


def test_beyond_the_reported_limit_repeats_are_counted_in_one_line():
    c = Conversation(Options(max_redelivered_reported=2))
    _subscribe(c, 1, 0)
    for entry in range(5):  # five messages, each delivered three times
        for k in range(3):
            c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=entry, redelivery_count=k), entry + k)
    c.close(1, 20)
    warnings = [e.details for e in c.events if e.kind == "REDELIVERED"]
    assert [w["entry"] for w in warnings[:2]] == [0, 1] and all(w["count"] == 3 for w in warnings[:2])
    assert warnings[2] == {"consumer_id": 0, "name": "c", "more_messages": 3, "count": 6}


def test_every_consumer_together_stays_within_one_budget_of_remembered_ids():
    """Consumers on many open connections (rotated captures joined, many clients) share one budget
    (max_remembered_total): the largest tables give up their oldest ids, and STATE_DROPPED says so."""
    budget = 6_000
    c = Conversation(Options(max_remembered_total=budget))
    for conn in (1, 2, 3):
        _subscribe(c, conn, 0)
    raw = [message_frame(b"m", consumer_id=0, entry_id=e) for e in range(5_000)]
    for conn in (1, 2, 3):
        for e in range(5_000):
            c.frame(conn, TO_CLIENT, raw[e], conn * 10 + e / 1e4)
    # (the tables' sizes against the budget: pulsar_session.rs
    # every_consumer_together_stays_within_one_budget_of_remembered_ids)
    dropped = [e for e in c.events if e.kind == "STATE_DROPPED"]
    assert dropped and dropped[0].details["option"] == "max_remembered_total"
    # the newest deliveries are still known: a repeat of the last message is seen as one
    again = c.frame(3, TO_CLIENT, raw[4_999], 99)
    assert again.notes.get("delivery") == 2
