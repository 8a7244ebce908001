"""Each warning of the conversation, in real traffic: recorded with the real pulsar-lite broker and the official
client (pulsar-client, C++ core) where the broker can produce it, built from frames where it cannot (said in
each test's docstring).

The expected values come from what the client API reported (the message ids a consumer received and
acknowledged, which calls succeeded or failed, how long a call waited), or from the bytes a raw socket sent,
never from our own output. Assertions are on problem ids and their parameters (``warning_scenarios.analyse``
keeps each finding's parameters beside the JSON contract's ``expert``), never on English text.

Each scenario records once (a module-scoped fixture) and takes a few seconds. Without the broker, the client
or tcpdump (or without root for capture on ``lo``) a scenario skips with a reason starting ``oracle missing:``
(a failure in CI); when the client or the broker misbehaves it skips with that reason.

What makes each warning:

- ``consumer.unacked``: recorded. A durable consumer closes with messages it received and did not acknowledge;
  another one is left to ``client.close()``; a reader is not flagged.
- ``UNACKED_AT_END``: recorded. A client process exits (``os._exit``) holding unacknowledged messages.
- ``OVERDUE``: recorded. The broker process is SIGSTOPped for 1.5 s during a request; ``request_timeout`` 0.5 s.
- ``CONNECTION_CLOSED`` how=rst, both sides, recorded. A client process SIGSTOPped while the broker pushes it
  messages, then SIGKILLed (its kernel resets a socket closed with unread data); the broker process SIGSTOPped
  while the client sends, then SIGKILLed.
- ``message.redelivered``, ``REDELIVERED``: recorded. Negative acknowledgements on a Shared subscription.
- ``producer.exclusive_conflict``: recorded (pulsar-lite lets two Exclusive producers hold one topic), and built
  from frames across two connections.
- ``actor.used_after_close``, ``message.early_delivery``: built from frames (the client cannot use a closed
  producer; the recorded early delivery is in test_fresh_recordings.py).
- ``frame.cut_at_end``: recorded. A raw socket sends a real CONNECT, PRODUCER and half a SEND, then FIN.
"""

from __future__ import annotations

import json
import socket
import time
from collections import Counter, defaultdict

import pytest

import framebuild as fb
from warning_scenarios import (TCP_RST, ClientMisbehaved, Recorded, StoppedBroker, analyse, close_all, ids,
                               is_client_error, merge_pcaps, mid_of, only_params, params, read_child_line,
                               read_frame, record_live, start_child, stop_child, stop_process,
                               tcp_flags_by_source)

RECEIVE_MS = 10_000


def entry(mid: dict) -> tuple[int, int]:
    """(ledger, entry) of a command's MessageIdData."""
    return mid["ledgerId"], mid["entryId"]


def consumer_frames(live: Recorded, name: str, *types: str) -> list[dict]:
    return [f for f in live.of_type(*types) if (f.get("consumer") or {}).get("name") == name]


def subscribe_frame(live: Recorded, name: str) -> dict:
    (f,) = [f for f in live.of_type("SUBSCRIBE") if f["command"].get("consumer_name") == name]
    return f


def deliveries(live: Recorded, name: str) -> list[dict]:
    """The MESSAGE frames to consumer ``name`` (on its connection), in capture order."""
    sub = subscribe_frame(live, name)
    cid = sub["command"]["consumer_id"]
    return [f for f in live.of_type("MESSAGE") if f["conn"] == sub["conn"] and f["command"]["consumer_id"] == cid]


# ============================================================================ consumer.unacked

UNACKED_N = 6
UNACKED_ACKED = {0, 3}  # positions the durable consumer acknowledges
CLIENT_CLOSED_ACKED = {1}


def _unacked(rec, work) -> dict:
    import pulsar

    topic = "persistent://public/default/warn-unacked"
    c = rec.client()
    c2 = p = cons = reader = None
    try:
        p = c.create_producer(topic, producer_name="unacked-producer", batching_enabled=False)
        sent = [mid_of(p.send(f"message {i}".encode())) for i in range(UNACKED_N)]
        truth: dict = {"sent": sent}
        # A durable consumer takes every message (so what the broker pushed is what the application received),
        # acknowledges some and closes.
        cons = c.subscribe(topic, "durable-sub", consumer_name="durable",
                           initial_position=pulsar.InitialPosition.Earliest)
        got = [cons.receive(RECEIVE_MS) for _ in range(UNACKED_N)]
        for i in sorted(UNACKED_ACKED):
            cons.acknowledge(got[i])
        time.sleep(0.3)  # acknowledgements are grouped for 100 ms
        cons.close()
        truth["durable"] = {"received": [mid_of(m) for m in got], "acked": [mid_of(got[i]) for i in UNACKED_ACKED]}
        # A reader (non-durable subscription) reads everything and never acknowledges: not flagged.
        reader = c.create_reader(topic, pulsar.MessageId.earliest, reader_name="reader")
        truth["reader"] = {"received": [mid_of(reader.read_next(RECEIVE_MS)) for _ in range(UNACKED_N)]}
        reader.close()
        # A durable consumer left open and closed by client.close() (the C++ client closes its consumers).
        c2 = rec.client()
        left = c2.subscribe(topic, "client-closed-sub", consumer_name="client-closed",
                            initial_position=pulsar.InitialPosition.Earliest)
        got = [left.receive(RECEIVE_MS) for _ in range(UNACKED_N)]
        for i in sorted(CLIENT_CLOSED_ACKED):
            left.acknowledge(got[i])
        time.sleep(0.3)
        c2.close()
        truth["client-closed"] = {"received": [mid_of(m) for m in got],
                                  "acked": [mid_of(got[i]) for i in CLIENT_CLOSED_ACKED]}
    finally:
        close_all(cons, reader, p, c2, c)
    return truth


@pytest.fixture(scope="module")
def unacked(tmp_path_factory) -> Recorded:
    return record_live(tmp_path_factory, "unacked", _unacked)


def _check_unacked_close(live: Recorded, name: str) -> None:
    truth = live.truth[name]
    msgs = deliveries(live, name)
    # The premise: non-batched, every MESSAGE frame is one message the application received.
    assert sorted(entry(f["command"]["message_id"]) for f in msgs) == sorted(map(tuple, truth["received"]))
    not_acked = {tuple(m) for m in truth["received"]} - {tuple(m) for m in truth["acked"]}
    (close,) = consumer_frames(live, name, "CLOSE_CONSUMER")
    p = only_params(close, "consumer.unacked")
    sub = subscribe_frame(live, name)
    assert p["consumer_id"] == sub["command"]["consumer_id"]
    assert p["name"] == name
    assert p["count"] == len(not_acked) == len(truth["received"]) - len(truth["acked"])
    assert p["frames"] == sorted(f["index"] for f in msgs if entry(f["command"]["message_id"]) in not_acked)
    assert [e for e in live.events_of("UNACKED_AT_END") if e["details"]["name"] == name] == []


def test_consumer_closed_with_unacked_messages_is_flagged_with_the_client_count(unacked):
    """consumer.unacked on CLOSE_CONSUMER: count = messages the client received and did not acknowledge."""
    _check_unacked_close(unacked, "durable")


def test_consumer_closed_by_client_close_is_flagged_too(unacked):
    """client.close() without consumer.close(): the C++ client sends CLOSE_CONSUMER itself, so this is
    consumer.unacked on that frame (not UNACKED_AT_END: see the process-exit scenario for that)."""
    _check_unacked_close(unacked, "client-closed")


def test_a_reader_is_not_flagged(unacked):
    sub = subscribe_frame(unacked, "reader")
    assert sub["command"]["durable"] is False
    msgs = deliveries(unacked, "reader")
    assert sorted(entry(f["command"]["message_id"]) for f in msgs) == \
        sorted(map(tuple, unacked.truth["reader"]["received"]))
    (close,) = consumer_frames(unacked, "reader", "CLOSE_CONSUMER")
    assert "consumer.unacked" not in ids(close)
    assert [e for e in unacked.events_of("UNACKED_AT_END") if e["details"].get("name") == "reader"] == []


def test_unacked_recording_has_no_other_warning(unacked):
    flagged = {(f["index"], i) for f in unacked.frames for i in ids(f) if i != "consumer.unacked"}
    assert flagged == set()
    assert unacked.events_of("UNACKED_AT_END") == []


# ============================================================================ UNACKED_AT_END

EXIT_N = 5
EXIT_ACKED = (0, 2)


def _process_exit(rec, work) -> dict:
    topic = "persistent://public/default/warn-exit"
    c = rec.client()
    p = None
    try:
        p = c.create_producer(topic, producer_name="exit-producer", batching_enabled=False)
        sent = [mid_of(p.send(f"message {i}".encode())) for i in range(EXIT_N)]
        child = start_child("exit", rec.url, topic, EXIT_N, ",".join(map(str, EXIT_ACKED)))
        try:
            said = read_child_line(child, 30)
            child.wait(timeout=15)
        finally:
            stop_child(child)
        if child.returncode != 0:
            raise ClientMisbehaved(f"the client process exited with {child.returncode}")
    finally:
        close_all(p, c)
    return {"sent": sent, **said}


@pytest.fixture(scope="module")
def process_exit(tmp_path_factory) -> Recorded:
    return record_live(tmp_path_factory, "process-exit", _process_exit)


def test_a_consumer_still_holding_unacked_messages_when_its_process_exits(process_exit):
    """UNACKED_AT_END: the client process received messages, acknowledged some and exited without closing its
    consumer; count and frames are the messages it received and did not acknowledge."""
    live, truth = process_exit, process_exit.truth
    sub = subscribe_frame(live, "exiting")
    msgs = deliveries(live, "exiting")
    assert sorted(entry(f["command"]["message_id"]) for f in msgs) == sorted(map(tuple, truth["received"]))
    not_acked = {tuple(m) for m in truth["received"]} - {tuple(m) for m in truth["acked"]}
    assert consumer_frames(live, "exiting", "CLOSE_CONSUMER") == []  # the process closed nothing
    (end,) = live.events_of("UNACKED_AT_END")
    d = end["details"]
    assert end["conn"] == sub["conn"]
    assert d["consumer_id"] == sub["command"]["consumer_id"] and d["name"] == "exiting"
    assert d["count"] == len(not_acked) == EXIT_N - len(EXIT_ACKED)
    assert d["frames"] == sorted(f["index"] for f in msgs if entry(f["command"]["message_id"]) in not_acked)
    last = max(f["index"] for f in live.frames if f["conn"] == sub["conn"])
    assert live.position(end) > live.position(live.by_index()[last])  # said when the connection ended
    (closed,) = [e for e in live.events_of("CONNECTION_CLOSED") if e["conn"] == sub["conn"]]
    assert closed["details"]["closed_by"] == "client"


# ============================================================================ OVERDUE

STOP_S = 1.5
TIMEOUT_S = 0.5


def _overdue(rec, work) -> dict:
    c = rec.client()
    p0 = p1 = None
    try:
        p0 = c.create_producer("persistent://public/default/warn-before-stop", producer_name="before-stop")
        with StoppedBroker(rec, STOP_S):
            t0 = time.monotonic()
            p1 = c.create_producer("persistent://public/default/warn-during-stop", producer_name="during-stop")
            waited = time.monotonic() - t0
        p1.send(b"after the stop")
    finally:
        close_all(p1, p0, c)
    return {"create_producer_s": waited}


@pytest.fixture(scope="module")
def overdue(tmp_path_factory) -> Recorded:
    return record_live(tmp_path_factory, "overdue", _overdue, request_timeout=TIMEOUT_S)


def test_a_request_the_stopped_broker_does_not_answer_is_overdue_before_its_answer(overdue):
    """The broker process is stopped (SIGSTOP) while the client creates a producer; the dissector's operation
    timeout is 0.5 s, the stop 1.5 s. The OVERDUE event comes at request time + timeout, before the answer."""
    live = overdue
    if live.truth["create_producer_s"] < STOP_S - 0.1:
        pytest.skip(f"create_producer returned after {live.truth['create_producer_s']:.2f}s: the broker was not "
                    "stopped long enough (not the dissector)")
    by_index = live.by_index()
    answered = {f["answers"]: f for f in live.frames if "answers" in f}
    late = {i: f for i, f in answered.items() if f["latency_ms"] > TIMEOUT_S * 1000}
    overdue_events = live.events_of("OVERDUE")
    assert sorted(e["details"]["request"] for e in overdue_events) == sorted(late)
    # The request the client made while the broker was stopped: the first of the producer it created then.
    during = next(f for f in live.of_type("PARTITIONED_METADATA", "LOOKUP", "PRODUCER")
                  if f["command"]["topic"].endswith("warn-during-stop"))
    assert during["index"] in late
    for e in overdue_events:
        request = by_index[e["details"]["request"]]
        answer = late[request["index"]]
        assert e["details"]["request_type"] == request["type"]
        assert e["conn"] == request["conn"]
        assert e["time"] == pytest.approx(request["time"] + TIMEOUT_S, abs=1e-6)
        assert live.position(request) < live.position(e) < live.position(answer)
        assert e["_params"]["timeout_s"] == TIMEOUT_S
        assert "response.slow" in ids(answer)
        assert answer["latency_ms"] >= (STOP_S - 0.1) * 1000


def test_no_overdue_at_the_default_timeout(overdue):
    _, records = analyse(overdue.pcap, overdue.port)
    assert [r for r in records if r["type"] == "OVERDUE"] == []


def test_overdue_through_the_cli_option(overdue):
    from typer.testing import CliRunner

    from dissector.cli.main import app

    res = CliRunner().invoke(app, ["dissect", str(overdue.pcap), "--port", str(overdue.port), "-o",
                                   f"request_timeout={TIMEOUT_S}", "--json"])
    assert res.exit_code == 0, res.output
    cli = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    want = [(e["details"], e["time"]) for e in overdue.events_of("OVERDUE")]
    assert want and [(r["details"], r["time"]) for r in cli if r["type"] == "OVERDUE"] == want


# ============================================================================ CONNECTION_CLOSED by RST

HOLD_SENT = 5


def _reset_by_client(rec, work) -> dict:
    topic = "persistent://public/default/warn-reset"
    c = rec.client()
    p = None
    child = start_child("hold", rec.url, topic)
    try:
        said = read_child_line(child, 30)
        p = c.create_producer(topic, producer_name="reset-producer", batching_enabled=False)
        stop_process(child)  # it reads nothing from now on
        sent = [mid_of(p.send(f"to a stopped client {i}".encode())) for i in range(HOLD_SENT)]
        time.sleep(0.5)  # the broker pushes them into the stopped client's socket
        child.kill()  # SIGKILL: its kernel closes the socket with unread data, i.e. sends RST
        child.wait(timeout=10)
        killed = child.returncode
        time.sleep(0.2)
    finally:
        stop_child(child)
        close_all(p, c)
    return {"sent": sent, "child_pid": said["pid"], "returncode": killed}


@pytest.fixture(scope="module")
def reset(tmp_path_factory) -> Recorded:
    return record_live(tmp_path_factory, "reset", _reset_by_client)


def test_a_killed_client_with_unread_data_resets_the_connection(reset):
    """CONNECTION_CLOSED how=rst closed_by=client: a client process stopped (SIGSTOP) while the broker pushes it
    messages, then killed (SIGKILL); the kernel resets a socket closed with unread data. Who sent the RST is
    checked against the capture's TCP headers, parsed here by hand."""
    live = reset
    assert live.truth["returncode"] == -9
    sub = subscribe_frame(live, "stopped")
    conn = sub["conn"]
    client_port = int(sub["src"].rsplit(":", 1)[1])
    pushed = deliveries(live, "stopped")
    if not pushed:
        pytest.skip("the broker pushed nothing to the stopped client, so it had no unread data and no RST "
                    "was provoked (broker behaviour)")
    flags = tcp_flags_by_source(live.pcap)
    rst_from = {src for src, dst, f in flags if f & TCP_RST and live.port in (src, dst) and client_port in (src, dst)}
    (closed,) = [e for e in live.events_of("CONNECTION_CLOSED") if e.get("conn") == conn]
    if client_port not in rst_from:
        pytest.skip(f"the killed client's kernel did not send a RST (RSTs from {sorted(rst_from)}; the connection "
                    f"ended {closed['details']}; tcpdump dropped {live.packets_dropped}): not provoked")
    assert closed["details"]["how"] == "rst"
    assert closed["details"]["closed_by"] == "client"
    # What was pushed to it is what the producer API says it sent; none of it was acknowledged.
    assert sorted(entry(f["command"]["message_id"]) for f in pushed) == sorted(map(tuple, live.truth["sent"]))
    (end,) = [e for e in live.events_of("UNACKED_AT_END") if e["conn"] == conn]
    assert end["details"]["name"] == "stopped" and end["details"]["count"] == len(pushed) == HOLD_SENT
    assert end["details"]["frames"] == [f["index"] for f in pushed]


def test_the_other_connection_closes_with_fin(reset):
    stopped = subscribe_frame(reset, "stopped")["conn"]
    others = [e for e in reset.events_of("CONNECTION_CLOSED") if e["conn"] != stopped]
    assert others and all(e["details"]["how"] == "fin" for e in others)


def _reset_by_broker(rec, work) -> dict:
    c = rec.client(operation_timeout_seconds=3)
    p = None
    results: list[str] = []
    try:
        p = c.create_producer("persistent://public/default/warn-broker-reset", producer_name="orphan",
                              batching_enabled=False, send_timeout_millis=2000)
        before = mid_of(p.send(b"before the stop"))
        stop_process(rec._broker)  # the recording's own broker process
        p.send_async(b"to a stopped broker", lambda res, mid: results.append(str(res)))
        time.sleep(0.3)  # the SEND waits, unread, in the stopped broker's socket
        rec._broker.kill()  # SIGKILL: its kernel resets the connection (unread data)
        rec._broker.wait(timeout=10)
        time.sleep(0.2)
    finally:
        close_all(p, c)
    return {"before": before, "pending_send": results}


@pytest.fixture(scope="module")
def broker_reset(tmp_path_factory) -> Recorded:
    return record_live(tmp_path_factory, "broker-reset", _reset_by_broker)


def test_a_killed_broker_with_unread_data_resets_the_connection(broker_reset):
    """CONNECTION_CLOSED how=rst closed_by=broker: the broker process is stopped while the client sends, then
    killed; the SEND it never read is UNANSWERED and the client's callback did not report it stored. (The
    client's reconnection attempts to the dead port, refused by the kernel, come after and are not judged.)"""
    live = broker_reset
    assert "Result.Ok" not in live.truth["pending_send"]
    (request,) = [f for f in live.of_type("PRODUCER") if f["command"].get("producer_name") == "orphan"]
    conn = request["conn"]
    client_port = int(request["src"].rsplit(":", 1)[1])
    flags = tcp_flags_by_source(live.pcap)
    rst_from = {src for src, dst, f in flags if f & TCP_RST and {src, dst} == {live.port, client_port}}
    (closed,) = [e for e in live.events_of("CONNECTION_CLOSED") if e.get("conn") == conn]
    if live.port not in rst_from:
        pytest.skip(f"the killed broker's kernel did not send a RST (RSTs from {sorted(rst_from)}; the connection "
                    f"ended {closed['details']}; tcpdump dropped {live.packets_dropped}): not provoked")
    assert closed["details"]["how"] == "rst"
    assert closed["details"]["closed_by"] == "broker"
    sends = [f for f in live.of_type("SEND") if f["conn"] == conn]
    assert len(sends) == 2
    (receipt,) = [f for f in live.frames if f.get("answers") == sends[0]["index"]]
    assert entry(receipt["command"]["message_id"]) == tuple(live.truth["before"])
    unanswered = [e["details"]["request"] for e in live.events_of("UNANSWERED") if e.get("conn") == conn]
    assert unanswered == [sends[1]["index"]]


# ============================================================================ message.redelivered, REDELIVERED

NACK_TIMES = {0: 3, 1: 2, 2: 1}  # message position -> how many times the consumer is to get it


def _redelivery(rec, work) -> dict:
    import pulsar

    topic = "persistent://public/default/warn-redelivery"
    c = rec.client()
    p = cons = None
    try:
        p = c.create_producer(topic, producer_name="nack-producer", batching_enabled=False)
        cons = c.subscribe(topic, "nack-sub", consumer_name="nacker", consumer_type=pulsar.ConsumerType.Shared,
                           negative_ack_redelivery_delay_ms=100, initial_position=pulsar.InitialPosition.Earliest)
        sent = [mid_of(p.send(f"message {i}".encode())) for i in range(len(NACK_TIMES))]
        want = {tuple(sent[i]): n for i, n in NACK_TIMES.items()}
        seen: Counter = Counter()
        received, acked = [], []
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and any(seen[m] < n for m, n in want.items()):
            try:
                m = cons.receive(1000)
            except pulsar.Timeout:
                continue
            mid = tuple(mid_of(m))
            seen[mid] += 1
            received.append({"id": list(mid), "redelivery_count": m.redelivery_count()})
            if seen[mid] < want.get(mid, 1):
                cons.negative_acknowledge(m)
            else:
                cons.acknowledge(m)
                acked.append(list(mid))
        if any(seen[m] != n for m, n in want.items()):
            raise ClientMisbehaved(f"negative acknowledgements did not bring the messages back as asked: "
                                   f"wanted {want}, got {dict(seen)}")
        time.sleep(0.2)
        cons.close()
    finally:
        close_all(cons, p, c)
    return {"sent": sent, "received": received, "acked": acked}


@pytest.fixture(scope="module")
def redelivery(tmp_path_factory) -> Recorded:
    return record_live(tmp_path_factory, "redelivery", _redelivery)


def _deliveries_by_id(live: Recorded) -> dict[tuple, list[dict]]:
    out = defaultdict(list)
    for f in deliveries(live, "nacker"):
        out[entry(f["command"]["message_id"])].append(f)
    return out


def test_every_delivery_the_client_got_is_a_message_frame(redelivery):
    client = Counter(tuple(r["id"]) for r in redelivery.truth["received"])
    assert {m: len(fs) for m, fs in _deliveries_by_id(redelivery).items()} == dict(client)


def test_each_repeated_delivery_is_a_redelivered_note(redelivery):
    """message.redelivered on the k-th delivery (k >= 2) of a message to the consumer: delivery = k, first_frame
    = the frame of the first delivery, redelivery_count = what the client reported for that delivery."""
    received = redelivery.truth["received"]
    by_id = _deliveries_by_id(redelivery)
    k: Counter = Counter()
    for r in received:
        mid = tuple(r["id"])
        k[mid] += 1
        frame = by_id[mid][k[mid] - 1]
        assert frame["command"].get("redelivery_count", 0) == r["redelivery_count"]
        if k[mid] == 1:
            assert "message.redelivered" not in ids(frame), frame["index"]
            continue
        p = only_params(frame, "message.redelivered")
        assert (p["ledger"], p["entry"]) == mid
        assert p["delivery"] == k[mid]
        assert p["first_frame"] == by_id[mid][0]["index"]
        assert p["redelivery_count"] == r["redelivery_count"]
        # the client's negative ack asked for it: a REDELIVER naming it (the same command an ack timeout sends)
        assert p["cause"] == "redeliver_request"
        asking = next(f for f in redelivery.frames if f["index"] == p["cause_frame"])
        assert asking["type"] == "REDELIVER_UNACKNOWLEDGED_MESSAGES"
        assert mid in {entry(i) for i in asking["command"]["message_ids"]}
    notes = sum(len(params(f, "message.redelivered")) for f in redelivery.frames)
    assert notes == sum(n - 1 for n in Counter(tuple(r["id"]) for r in received).values())


def test_each_message_delivered_more_than_once_is_one_redelivered_warning_at_close(redelivery):
    """REDELIVERED, one per message delivered more than once, said when the consumer closes."""
    received = redelivery.truth["received"]
    times = Counter(tuple(r["id"]) for r in received)
    top = defaultdict(int)
    for r in received:
        top[tuple(r["id"])] = max(top[tuple(r["id"])], r["redelivery_count"])
    by_id = _deliveries_by_id(redelivery)
    sub = subscribe_frame(redelivery, "nacker")
    (close,) = consumer_frames(redelivery, "nacker", "CLOSE_CONSUMER")
    events = redelivery.events_of("REDELIVERED")
    got = {}
    for e in events:
        d = e["details"]
        assert e["severity"] == "warning"
        assert e["conn"] == sub["conn"]
        assert d["consumer_id"] == sub["command"]["consumer_id"] and d["name"] == "nacker"
        assert redelivery.position(e) > redelivery.position(close) and e["time"] >= close["time"]
        got[(d["ledger"], d["entry"])] = d
    assert set(got) == {m for m, n in times.items() if n > 1}
    for mid, d in got.items():
        assert d["count"] == times[mid]
        assert d["frames"] == [f["index"] for f in by_id[mid]]
        assert d["redelivery_count"] == top[mid]


def test_the_nacked_then_acked_consumer_closes_without_unacked_messages(redelivery):
    assert {tuple(m) for m in redelivery.truth["acked"]} == {tuple(r["id"]) for r in redelivery.truth["received"]}
    (close,) = consumer_frames(redelivery, "nacker", "CLOSE_CONSUMER")
    assert "consumer.unacked" not in ids(close)


# ============================================================================ producer.exclusive_conflict

EXCLUSIVE_TOPIC = "persistent://public/default/warn-exclusive"


def _exclusive(rec, work) -> dict:
    import pulsar

    c1, c2 = rec.client(), rec.client()
    first = second = None
    truth: dict = {}
    try:
        first = c1.create_producer(EXCLUSIVE_TOPIC, producer_name="first",
                                   access_mode=pulsar.ProducerAccessMode.Exclusive)
        try:
            second = c2.create_producer(EXCLUSIVE_TOPIC, producer_name="second",
                                        access_mode=pulsar.ProducerAccessMode.Exclusive)
            truth["second"] = {"created": True, "id": mid_of(second.send(b"from the second"))}
        except Exception as exc:
            if not is_client_error(exc):
                raise
            truth["second"] = {"created": False, "error": type(exc).__name__}
        truth["first"] = {"id": mid_of(first.send(b"from the first"))}
    finally:
        close_all(second, first, c2, c1)
    return truth


@pytest.fixture(scope="module")
def exclusive(tmp_path_factory) -> Recorded:
    return record_live(tmp_path_factory, "exclusive", _exclusive)


def _producer_frame(live: Recorded, name: str) -> tuple[dict, dict]:
    (request,) = [f for f in live.of_type("PRODUCER") if f["command"].get("producer_name") == name]
    (answer,) = [f for f in live.frames if f.get("answers") == request["index"]]
    return request, answer


def test_two_exclusive_producers_on_one_topic_from_two_clients(exclusive):
    """pulsar-lite 0.2.0 lets a second Exclusive producer take a topic an Exclusive producer holds on another
    connection (the client API reports both created and both sends accepted): producer.exclusive_conflict on
    the second PRODUCER_SUCCESS names the first. Were the broker to refuse the second (the client raising
    ProducerBusy / ProducerFenced), its ERROR must be decoded as server.error with that name and nothing be
    flagged as a conflict; the conflict itself is then covered by the frame-built test below."""
    second = exclusive.truth["second"]
    req1, ok1 = _producer_frame(exclusive, "first")
    req2, answer = _producer_frame(exclusive, "second")
    assert req1["conn"] != req2["conn"]
    assert req1["command"]["producer_access_mode"] == req2["command"]["producer_access_mode"] == "Exclusive"
    assert ok1["type"] == "PRODUCER_SUCCESS" and "producer.exclusive_conflict" not in ids(ok1)
    if not second["created"]:
        assert answer["type"] == "ERROR"
        error = only_params(answer, "server.error")["error"]
        assert error in ("ProducerBusy", "ProducerFenced") and error == second["error"]
        assert exclusive.with_finding("producer.exclusive_conflict") == []
        return
    assert answer["type"] == "PRODUCER_SUCCESS"
    p = only_params(answer, "producer.exclusive_conflict")
    assert p["topic"] == EXCLUSIVE_TOPIC
    assert p["other_conn"] == req1["conn"]
    assert p["other_producer_id"] == req1["command"]["producer_id"]
    assert p["other_name"] == "first"
    assert [f["index"] for f in exclusive.with_finding("producer.exclusive_conflict")] == [answer["index"]]


def _two_connections(tmp_path, name: str, a: list, b: list, b_after: float):
    """One pcap of two connections to 10.0.0.2:6650: ``a`` from 10.0.0.1:40001 (one packet per 0.1 s) and
    ``b`` from 10.0.0.3:40002 starting ``b_after`` s later (one per ms), so ``b`` runs while ``a`` is open."""
    pa, pb, out = tmp_path / f"{name}-a.pcap", tmp_path / f"{name}-b.pcap", tmp_path / f"{name}.pcap"
    fb.tcp_pcap(pa, a, client=("10.0.0.1", 40001), step=0.1)
    fb.tcp_pcap(pb, b, client=("10.0.0.3", 40002), t0=1_700_000_000.0 + b_after, step=0.001)
    merge_pcaps(out, pa, pb)
    return out


def _handshake(name: str) -> list:
    return [fb.simple_frame("CONNECT", client_version=name, protocol_version=20),
            ("b", fb.simple_frame("CONNECTED", server_version="built", protocol_version=20))]


def _producer(topic: str, name: str, mode: str, request_id: int = 1, producer_id: int = 0) -> list:
    access = fb.api.ProducerAccessMode.Value(mode)
    return [fb.simple_frame("PRODUCER", topic=topic, producer_id=producer_id, request_id=request_id,
                            producer_name=name, producer_access_mode=access),
            ("b", fb.simple_frame("PRODUCER_SUCCESS", request_id=request_id, producer_name=name,
                                  producer_ready=True))]


def test_exclusive_conflict_across_two_connections_built_from_frames(tmp_path):
    """Built from frames (so it holds whatever a broker does): connection 1 creates Exclusive producer 'holder'
    on a topic, connection 2 then gets an Exclusive producer 'intruder' on it while the first is open, and a
    Shared producer on another topic. Only the intruder's PRODUCER_SUCCESS is flagged, naming the holder."""
    topic = "persistent://public/default/built-exclusive"
    a = _handshake("conn-a") + _producer(topic, "holder", "Exclusive")
    b = (_handshake("conn-b") + _producer(topic, "intruder", "Exclusive", producer_id=3)
         + _producer("persistent://public/default/elsewhere", "bystander", "Shared", request_id=2, producer_id=4))
    pcap = _two_connections(tmp_path, "exclusive", a, b, b_after=0.65)
    _, records = analyse(pcap)
    frames = [r for r in records if "index" in r]
    holder_req = next(f for f in frames if f["type"] == "PRODUCER" and f["command"]["producer_name"] == "holder")
    intruder_req = next(f for f in frames if f["type"] == "PRODUCER" and f["command"]["producer_name"] == "intruder")
    closed = {e["conn"]: e for e in records if e["type"] == "CONNECTION_CLOSED"}
    assert intruder_req["time"] < closed[holder_req["conn"]]["time"]  # the holder is still connected
    flagged = [f for f in frames if "producer.exclusive_conflict" in ids(f)]
    assert [(f["type"], f["answers"]) for f in flagged] == [("PRODUCER_SUCCESS", intruder_req["index"])]
    p = only_params(flagged[0], "producer.exclusive_conflict")
    assert p["topic"] == topic
    assert p["other_conn"] == holder_req["conn"] != intruder_req["conn"]
    assert p["other_producer_id"] == 0
    assert p["other_name"] == "holder"


# ============================================================================ actor.used_after_close, early delivery


def _cli_json(pcap) -> list[dict]:
    from typer.testing import CliRunner

    from dissector.cli.main import app

    res = CliRunner().invoke(app, ["dissect", str(pcap), "--json"])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def test_a_frame_for_a_closed_producer_or_consumer_in_a_capture(tmp_path):
    """actor.used_after_close, built from frames: the official client refuses to send for a producer it closed
    (and stops its consumer's FLOW), so no real client produces it. A pcap through the CLI's --json (ids) and
    through the analysis (parameters)."""
    items = _handshake("built") + _producer("persistent://public/default/t", "p", "Shared") + [
        fb.simple_frame("CLOSE_PRODUCER", producer_id=0, request_id=2),
        ("b", fb.simple_frame("SUCCESS", request_id=2)),
        fb.send_frame(b"late", producer_id=0, sequence_id=0),
        fb.simple_frame("SUBSCRIBE", topic="persistent://public/default/t", subscription="s", consumer_id=4,
                        request_id=3, consumer_name="c"),
        ("b", fb.simple_frame("SUCCESS", request_id=3)),
        fb.simple_frame("CLOSE_CONSUMER", consumer_id=4, request_id=4),
        ("b", fb.simple_frame("SUCCESS", request_id=4)),
        fb.simple_frame("FLOW", consumer_id=4, messagePermits=10),
    ]
    pcap = tmp_path / "used-after-close.pcap"
    fb.tcp_pcap(pcap, items)
    cli = [r for r in _cli_json(pcap) if "index" in r]
    assert [(f["type"], ids(f)) for f in cli if ids(f)] == [("SEND", ["actor.used_after_close"]),
                                                            ("FLOW", ["actor.used_after_close"])]
    _, records = analyse(pcap)
    send = next(r for r in records if r.get("type") == "SEND")
    flow = next(r for r in records if r.get("type") == "FLOW")
    assert only_params(send, "actor.used_after_close") == {"type": "SEND", "actor": "producer", "id": 0, "name": "p"}
    assert only_params(flow, "actor.used_after_close") == {"type": "FLOW", "actor": "consumer", "id": 4, "name": "c"}


def test_early_delivery_in_a_capture(tmp_path):
    """message.early_delivery, built from frames through the CLI's --json: a MESSAGE whose deliver_at_time is
    ahead of its capture time on a Shared subscription, and the same on an Exclusive one (not flagged: delayed
    delivery applies to Shared / Key_Shared only). The recorded case (pulsar-lite delivering a delayed message
    early) is in test_fresh_recordings.py (metadata scenario), not repeated here."""
    t0 = 1_700_000_000.0
    md = fb.metadata(deliver_at_time=int((t0 + 60) * 1000))  # a minute after the capture
    items = _handshake("built")
    for cid, sub_type in ((0, "Shared"), (1, "Exclusive")):
        items += [fb.simple_frame("SUBSCRIBE", topic="persistent://public/default/delayed", subscription=sub_type,
                                  subType=fb.api.CommandSubscribe.SubType.Value(sub_type), consumer_id=cid,
                                  request_id=cid + 1),
                  ("b", fb.simple_frame("SUCCESS", request_id=cid + 1)),
                  fb.simple_frame("FLOW", consumer_id=cid, messagePermits=10),
                  ("b", fb.message_frame(b"delayed", consumer_id=cid, entry_id=cid, md=md))]
    pcap = tmp_path / "early.pcap"
    fb.tcp_pcap(pcap, items, t0=t0)
    cli = [r for r in _cli_json(pcap) if r.get("type") == "MESSAGE"]
    assert [ids(f) for f in cli] == [["message.early_delivery"], []]
    _, records = analyse(pcap)
    (shared, _) = [r for r in records if r.get("type") == "MESSAGE"]
    p = only_params(shared, "message.early_delivery")
    assert p["deliver_at"] == int((t0 + 60) * 1000)
    assert p["early_ms"] == pytest.approx(md.deliver_at_time - shared["time"] * 1000)


# ============================================================================ frame.cut_at_end

CUT_PAYLOAD = b"x" * 200


def _cut_send(rec, work) -> dict:
    """A raw TCP client: a real CONNECT and PRODUCER (frames built with framebuild), answered by the real
    broker, then the first half of a SEND and a FIN."""
    sock = socket.create_connection(("127.0.0.1", rec.port), timeout=5)
    answers = []
    try:
        sock.sendall(fb.simple_frame("CONNECT", client_version="raw-socket-test", protocol_version=20))
        answers.append(read_frame(sock)[0])
        sock.sendall(fb.simple_frame("PRODUCER", topic="persistent://public/default/warn-cut", producer_id=0,
                                     request_id=1, producer_name="cut"))
        answers.append(read_frame(sock)[0])
        if answers != ["CONNECTED", "PRODUCER_SUCCESS"]:
            raise ClientMisbehaved(f"the broker answered {answers}")
        full = fb.send_frame(CUT_PAYLOAD, producer_id=0, sequence_id=0,
                             md=fb.metadata(producer_name="cut", sequence_id=0))
        half = len(full) // 2
        sock.sendall(full[:half])
        time.sleep(0.2)
        sock.shutdown(socket.SHUT_WR)  # FIN, with nothing unread on our side
        sock.settimeout(5)
        rest = sock.recv(65536)  # b"" once the broker closes its side too
    finally:
        sock.close()
    return {"answers": answers, "frame_size": len(full), "sent": half, "broker_then": rest.hex()}


@pytest.fixture(scope="module")
def cut(tmp_path_factory) -> Recorded:
    return record_live(tmp_path_factory, "cut", _cut_send)


def test_a_frame_cut_by_the_client_closing_is_cut_at_end_not_gap_damaged(cut):
    """frame.cut_at_end on the last frame of the client's direction: the client closed (FIN) after half of a
    SEND; nothing was lost by the capture, so it is not frame.gap_damaged."""
    truth = cut.truth
    assert cut.packets_dropped == 0
    assert cut.events_of("GAP") == []
    to_broker = [f for f in cut.frames if f["direction"] == "to_broker"]
    last = to_broker[-1]
    assert [f["type"] for f in to_broker[:2]] == ["CONNECT", "PRODUCER"]
    assert last["type"] == "SEND"
    assert "frame.gap_damaged" not in ids(last)
    p = only_params(last, "frame.cut_at_end")
    assert p["size"] == truth["frame_size"]
    assert p["missing"] == truth["frame_size"] - truth["sent"]
    assert p["how"] == "fin"
    assert p["closed_by"] == "client"
    assert [f["index"] for f in cut.with_finding("frame.cut_at_end")] == [last["index"]]
    (closed,) = cut.events_of("CONNECTION_CLOSED")
    assert closed["details"]["how"] == "fin" and closed["details"]["closed_by"] == "client"


def test_the_stats_redelivery_column_agrees_with_the_redelivery_problems(redelivery):
    """stats counts as redelivered exactly the deliveries message.redelivered flags, and sees as many distinct
    messages and deliveries as the client received."""
    from dissector.output.stats import StatsCollector

    flagged = len(redelivery.with_finding("message.redelivered"))
    client = redelivery.truth["received"]
    repeated_by_client = len(client) - len({tuple(r["id"]) for r in client})
    collector = StatsCollector()
    for rec in redelivery.records:
        collector.add(rec)
    consumers = [c for c in collector.result()["consumers"] if c.get("name") == "nacker"]
    assert flagged >= repeated_by_client > 0
    assert sum(c["redelivered_frames"] for c in consumers) == flagged
