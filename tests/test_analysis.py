"""Conversation analysis on synthetic conversations: pairing, latency, session state, anomalies.

Frames are built byte for byte (tests/framebuild.py), decoded by the real decoder, and fed to the analyzer as
they would come out of the pipeline, with interleaving and reordering across connections.
"""

from __future__ import annotations

import pytest

from framebuild import message_frame, metadata, payload_frame, raw_frame, send_frame, simple_frame

from dissector.analysis.conversation import ConversationAnalyzer
from dissector.model import Annotated, Event, Frame
from dissector.options import Options
from dissector.problems import message, severity
from dissector.protocols.pulsar.decode import decode_frame

TO_BROKER, TO_CLIENT = "to_broker", "to_client"
BROKER = "10.0.0.1:6650"


class Conversation:
    """Feeds frames of several connections to one analyzer; records every event it sees."""

    def __init__(self, options: Options | None = None) -> None:
        self.analyzer = ConversationAnalyzer(options)
        self.opened: set[int] = set()
        self.index = 0
        self.frames: list[Annotated] = []
        self.events: list[Event] = []

    def _feed(self, item) -> list:
        out: list = []
        self.analyzer.process(item, out)
        return out

    def frame(self, cid: int, direction: str, raw: bytes, time: float) -> Annotated:
        client = f"10.0.0.2:{40000 + cid}"
        if cid not in self.opened:
            self.opened.add(cid)
            self._feed(Event("CONNECTION_OPENED", time, 0, cid, client, BROKER, TO_BROKER,
                             details={"client": client, "broker": BROKER, "mid_stream": False}))
        src, dst = (client, BROKER) if direction == TO_BROKER else (BROKER, client)
        self.index += 1
        frame = Frame(self.index, "pulsar", cid, src, dst, direction, time, time, self.index, self.index, 0,
                      decode_frame(raw))
        out = self._feed(frame)
        (annotated,) = [a for a in out if type(a) is Annotated]
        assert annotated.frame is frame  # the frame itself is never replaced
        self.events.extend(e for e in out if e is not annotated)
        self.frames.append(annotated)
        return annotated

    def close(self, cid: int, time: float) -> None:
        self.events.extend(self._feed(Event("CONNECTION_CLOSED", time, 0, cid, details={"how": "fin"}))[1:])

    def finish(self) -> None:
        self.events.extend(self.analyzer.finish())


def findings(a: Annotated) -> list:
    return a.frame.pdu.findings + a.findings


def ids(a: Annotated) -> list[str]:
    return [f.id for f in findings(a)]


def test_requests_pair_per_connection_even_when_interleaved_and_answered_out_of_order():
    c = Conversation()
    # Two connections use the same request ids; the broker answers them in another order.
    lookup1 = c.frame(1, TO_BROKER, simple_frame("LOOKUP", topic="t1", request_id=7), 1.000)
    lookup2 = c.frame(2, TO_BROKER, simple_frame("LOOKUP", topic="t2", request_id=7), 1.001)
    prod1 = c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t1", producer_id=0, request_id=8), 1.002)
    resp2 = c.frame(2, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=7), 1.010)
    ok1 = c.frame(1, TO_CLIENT, simple_frame("PRODUCER_SUCCESS", request_id=8, producer_name="p"), 1.020)
    resp1 = c.frame(1, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=7), 1.030)
    assert resp2.notes["answers"] == lookup2.frame.index
    assert resp1.notes["answers"] == lookup1.frame.index
    assert ok1.notes["answers"] == prod1.frame.index
    assert resp1.notes["latency_ms"] == 30.0
    assert resp2.notes["latency_ms"] == 9.0
    assert resp1.notes["request_type"] == "LOOKUP"
    c.finish()
    assert [e for e in c.events if e.kind == "UNANSWERED"] == []


def test_request_id_reused_across_kinds_pairs_by_kind():
    # The C++ client numbers lookups and producer/consumer requests separately.
    c = Conversation()
    lookup = c.frame(1, TO_BROKER, simple_frame("LOOKUP", topic="t", request_id=1), 0.0)
    sub = c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0,
                                             request_id=1), 0.001)
    success = c.frame(1, TO_CLIENT, simple_frame("SUCCESS", request_id=1), 0.002)
    lookup_resp = c.frame(1, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=1), 0.003)
    assert success.notes["answers"] == sub.frame.index
    assert lookup_resp.notes["answers"] == lookup.frame.index
    assert not findings(success) and not findings(lookup_resp)


def test_producer_success_not_ready_keeps_the_request_open():
    c = Conversation()
    req = c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=3, request_id=5), 0.0)
    first = c.frame(1, TO_CLIENT, simple_frame("PRODUCER_SUCCESS", request_id=5, producer_name="p",
                                               producer_ready=False), 0.1)
    second = c.frame(1, TO_CLIENT, simple_frame("PRODUCER_SUCCESS", request_id=5, producer_name="p",
                                                producer_ready=True), 0.5)
    assert first.notes["answers"] == second.notes["answers"] == req.frame.index
    assert second.notes["latency_ms"] == 500.0
    c.finish()
    assert not [e for e in c.events if e.kind == "UNANSWERED"]


def test_sends_pair_with_receipts_and_errors_by_producer_and_sequence():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1, producer_name="p0"), 0)
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=1, request_id=2, producer_name="p1"), 0)
    s00 = c.frame(1, TO_BROKER, send_frame(b"a", producer_id=0, sequence_id=0), 1.0)
    s10 = c.frame(1, TO_BROKER, send_frame(b"b", producer_id=1, sequence_id=0), 1.1)
    s01 = c.frame(1, TO_BROKER, send_frame(b"c", producer_id=0, sequence_id=1), 1.2)
    r10 = c.frame(1, TO_CLIENT, simple_frame("SEND_RECEIPT", producer_id=1, sequence_id=0), 1.3)
    e01 = c.frame(1, TO_CLIENT, simple_frame("SEND_ERROR", producer_id=0, sequence_id=1, error=7,
                                             message="backlog quota"), 1.4)
    r00 = c.frame(1, TO_CLIENT, simple_frame("SEND_RECEIPT", producer_id=0, sequence_id=0), 1.5)
    assert (r10.notes["answers"], e01.notes["answers"], r00.notes["answers"]) == (s10.frame.index, s01.frame.index, s00.frame.index)
    assert r10.notes["producer"]["name"] == "p1"
    assert ids(e01) == ["server.error"]
    assert findings(e01)[0].params["error"] == "ProducerBlockedQuotaExceededError"
    assert findings(e01)[0].params["message"] == "backlog quota"


def test_handshake_with_auth_challenge_rounds():
    c = Conversation()
    connect = c.frame(1, TO_BROKER, simple_frame("CONNECT", client_version="x", protocol_version=21), 0.0)
    challenge = c.frame(1, TO_CLIENT, simple_frame("AUTH_CHALLENGE"), 0.01)
    response = c.frame(1, TO_BROKER, simple_frame("AUTH_RESPONSE"), 0.02)
    connected = c.frame(1, TO_CLIENT, simple_frame("CONNECTED", server_version="y", protocol_version=21), 0.05)
    assert challenge.notes["answers"] == connect.frame.index
    assert response.notes["answers"] == challenge.frame.index
    assert connected.notes["answers"] == response.frame.index
    assert (challenge.notes["request_type"], connected.notes["request_type"]) == ("CONNECT", "AUTH_RESPONSE")
    c.close(1, 1.0)
    assert not [e for e in c.events if e.kind == "UNANSWERED"]


def test_ping_pong_in_both_directions_and_unanswered_ping():
    c = Conversation()
    ping_b = c.frame(1, TO_CLIENT, simple_frame("PING"), 1.0)
    pong_c = c.frame(1, TO_BROKER, simple_frame("PONG"), 1.002)
    ping_c = c.frame(1, TO_BROKER, simple_frame("PING"), 2.0)
    assert pong_c.notes["answers"] == ping_b.frame.index
    c.close(1, 5.0)
    unanswered = [e for e in c.events if e.kind == "UNANSWERED"]
    assert [e.details["request"] for e in unanswered] == [ping_c.frame.index]


def test_broker_initiated_close_is_a_push_not_a_request():
    c = Conversation()
    push = c.frame(1, TO_CLIENT, simple_frame("CLOSE_PRODUCER", producer_id=0, request_id=2**64 - 1), 0.0)
    assert push.notes.get("broker_initiated") is True
    c.finish()
    assert not c.events and not findings(push)


def test_unanswered_and_unmatched_and_duplicate_request_ids():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=3), 0)
    dup = c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=1,
                                             request_id=3), 0.1)
    stray = c.frame(1, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=99), 0.2)
    assert ids(dup) == ["request.duplicate_id"]
    assert ids(stray) == ["response.unmatched"]
    c.close(1, 1.0)
    assert sorted(e.details["request_type"] for e in c.events if e.kind == "UNANSWERED") == ["SUBSCRIBE"] * 2


def test_send_before_producer_and_sequence_anomalies():
    c = Conversation()
    early = c.frame(1, TO_BROKER, send_frame(b"x", producer_id=4, sequence_id=0), 0)
    assert ids(early) == ["send.unknown_producer"]
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1), 0)
    c.frame(1, TO_BROKER, send_frame(b"a", producer_id=0, sequence_id=5), 1)
    gap = c.frame(1, TO_BROKER, send_frame(b"b", producer_id=0, sequence_id=9), 2)
    back = c.frame(1, TO_BROKER, send_frame(b"c", producer_id=0, sequence_id=7), 3)
    assert ids(gap) == ["sequence.gap"] and severity(findings(gap)[0].id) == "note"
    assert findings(gap)[0].params == {"first": 9, "previous": 5}
    assert ids(back) == ["sequence.regression"]


def test_batched_send_advances_the_sequence_by_its_message_count():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1), 0)
    c.frame(1, TO_BROKER, send_frame(b"a", producer_id=0, sequence_id=0, num_messages=100), 1)
    nxt = c.frame(1, TO_BROKER, send_frame(b"b", producer_id=0, sequence_id=100, num_messages=100), 2)
    assert findings(nxt) == []


def test_flow_permits_and_overrun_and_redelivery():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=1,
                                       consumer_name="c0"), 0)
    flow = c.frame(1, TO_BROKER, simple_frame("FLOW", consumer_id=0, messagePermits=2), 0.1)
    assert flow.notes["permits"] == 2
    m1 = c.frame(1, TO_CLIENT, message_frame(b"1", consumer_id=0, entry_id=1), 0.2)
    m2 = c.frame(1, TO_CLIENT, message_frame(b"2", consumer_id=0, entry_id=2), 0.3)
    m3 = c.frame(1, TO_CLIENT, message_frame(b"3", consumer_id=0, entry_id=3), 0.4)
    assert (m1.notes["permits"], m2.notes["permits"]) == (1, 0)
    assert ids(m3) == ["flow.overrun"]
    assert m1.notes["consumer"]["name"] == "c0"
    again = c.frame(1, TO_CLIENT, message_frame(b"1", consumer_id=0, entry_id=1, redelivery_count=1), 0.5)
    assert "message.redelivered" in ids(again)


def test_acks_point_at_the_messages_they_acknowledge():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=1), 0)
    ms = [c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, ledger_id=1, entry_id=i), 0.1 + i)
          for i in range(5)]
    single = c.frame(1, TO_BROKER, simple_frame("ACK", consumer_id=0, ack_type=0,
                                                message_id=[{"ledgerId": 1, "entryId": 3}]), 10)
    cumulative = c.frame(1, TO_BROKER, simple_frame("ACK", consumer_id=0, ack_type=1,
                                                    message_id=[{"ledgerId": 1, "entryId": 2}]), 11)
    assert single.notes["acks"] == [ms[3].frame.index]
    assert cumulative.notes["acks"] == [ms[0].frame.index, ms[1].frame.index, ms[2].frame.index]


def test_ack_with_request_id_pairs_with_ack_response():
    c = Conversation()
    ack = c.frame(1, TO_BROKER, simple_frame("ACK", consumer_id=0, ack_type=0, request_id=42,
                                             message_id=[{"ledgerId": 1, "entryId": 1}]), 0)
    resp = c.frame(1, TO_CLIENT, simple_frame("ACK_RESPONSE", consumer_id=0, request_id=42), 0.004)
    assert resp.notes["answers"] == ack.frame.index and resp.notes["latency_ms"] == 4.0


def test_error_answers_its_request_and_names_the_server_error():
    c = Conversation()
    req = c.frame(1, TO_BROKER, simple_frame("GET_LAST_MESSAGE_ID", consumer_id=0, request_id=4), 0)
    err = c.frame(1, TO_CLIENT, simple_frame("ERROR", request_id=4, error=11, message="no such topic"), 0.002)
    assert err.notes["answers"] == req.frame.index
    assert ids(err) == ["server.error"] and findings(err)[0].params["error"] == "TopicNotFound"
    assert "TopicNotFound: no such topic" in message("server.error", findings(err)[0].params)


def test_lookup_redirect_loop():
    c = Conversation()
    for i in range(8):
        c.frame(1, TO_BROKER, simple_frame("LOOKUP", topic="t", request_id=i), i)
        last = c.frame(1, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=i, response=0,
                                                  brokerServiceUrl="pulsar://b:6650"), i + 0.5)
    assert ids(last) == ["lookup.redirect_loop"]


def test_chunked_send_reassembled_across_connections_interleaving():
    c = Conversation()
    body = bytes(range(256)) * 40
    parts = [body[:4000], body[4000:8000], body[8000:]]
    for cid in (1, 2):
        c.frame(cid, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1), 0)
    done = {}
    for i, part in enumerate(parts):
        for cid in (2, 1):  # the two connections' chunks interleave
            md = metadata(producer_name=f"p{cid}", uuid=f"u-{cid}", chunk_id=i, num_chunks_from_msg=3,
                          total_chunk_msg_size=len(body))
            ev = c.frame(cid, TO_BROKER, payload_frame("SEND", dict(producer_id=0, sequence_id=0, is_chunk=True),
                                                       md, part), 1 + i)
            done[cid] = ev
    for cid in (1, 2):
        whole = done[cid].notes["reassembled"]
        assert whole["payload_size"] == len(body) and whole["uuid"] == f"u-{cid}"
        assert len(whole["chunks"]) == 3


def test_frames_without_a_decodable_command_are_passed_over():
    c = Conversation()
    ev = c.frame(1, TO_BROKER, raw_frame(b"\x08\x63"), 0)  # BaseCommand type 99: unknown
    assert ev.frame.pdu.type == "UNKNOWN(99)" and not ev.notes
    c.finish()
    assert c.events == []


def test_remembered_message_ids_are_capped():
    """The tables of remembered ids forget their oldest entries first (the order is checked by the core's
    own test, analysis::bounded): a message delivered again after the cap dropped it is no longer known."""
    c = Conversation(Options(max_remembered_messages=4))
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=1), 0)
    for i in range(10):
        c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=i), 1 + i / 1000)
    (consumer,) = c.analyzer.table_sizes(1)["consumers"]
    assert consumer == {"id": 0, "delivered": 4, "unacked": 4}
    assert c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=5), 2).notes.get("delivery") is None
    assert c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=9), 2).notes.get("delivery") == 2


def test_a_consumer_that_never_acks_does_not_grow_without_bound_and_says_so():
    c = Conversation(Options(max_remembered_messages=50))
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=1), 0)
    for i in range(500):
        c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=i), 1 + i / 1000)
    (consumer,) = c.analyzer.table_sizes(1)["consumers"]
    assert consumer["unacked"] == consumer["delivered"] == 50
    dropped = [e for e in c.events if e.kind == "STATE_DROPPED"]
    assert [e.details["option"] for e in dropped] == ["max_remembered_messages"]  # said once, not per frame
    c.close(1, 2.0)
    totals = [e.details for e in c.events if e.kind == "STATE_DROPPED"][-1]
    assert totals["dropped"] == 450 and totals["limit"] == 50


def test_sends_that_are_never_answered_keep_bounded_state():
    """One direction only (an asymmetric SPAN port): every SEND waits for a receipt that never comes."""
    c = Conversation(Options(max_pending_requests=100))
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1), 0)
    for i in range(1000):
        c.frame(1, TO_BROKER, send_frame(b"x" * 1000, producer_id=0, sequence_id=i), 1 + i / 1000)
    sizes = c.analyzer.table_sizes(1)
    assert sizes["order"] == 100 and sizes["waiting"] == 100
    waiting = c.analyzer.waiting(1)
    assert len(waiting) == 100
    assert all(not isinstance(v, (bytes, bytearray)) for w in waiting for v in [*w[:2], *w[2].values()])  # never the payload
    dropped = [e for e in c.events if e.kind == "STATE_DROPPED"]
    assert len(dropped) == 1 and dropped[0].details["option"] == "max_pending_requests"
    c.close(1, 5.0)
    unanswered = [e for e in c.events if e.kind == "UNANSWERED"]
    assert len(unanswered) == 100  # the newest: the PRODUCER and the first SENDs were forgotten
    assert unanswered[-1].details == {"request": c.frames[-1].frame.index, "request_type": "SEND"}


def test_analysis_does_not_edit_the_decoded_frame():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1), 0)
    send = c.frame(1, TO_BROKER, send_frame(b"a", producer_id=0, sequence_id=5), 1)
    late = c.frame(1, TO_BROKER, send_frame(b"b", producer_id=0, sequence_id=3), 2)
    err = c.frame(1, TO_CLIENT, simple_frame("SEND_ERROR", producer_id=0, sequence_id=3, error=7), 3)
    assert send.frame.pdu.findings == [] and late.frame.pdu.findings == [] and err.frame.pdu.findings == []
    assert ids(late) == ["sequence.regression"] and ids(err) == ["server.error"]


def test_a_name_learnt_later_does_not_change_what_earlier_frames_carried():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1), 0)
    early = c.frame(1, TO_BROKER, send_frame(b"a", producer_id=0, sequence_id=0), 0.1)
    c.frame(1, TO_CLIENT, simple_frame("PRODUCER_SUCCESS", request_id=1, producer_name="standalone-0-1"), 0.2)
    later = c.frame(1, TO_BROKER, send_frame(b"b", producer_id=0, sequence_id=1), 0.3)
    assert "name" not in early.notes["producer"]
    assert later.notes["producer"]["name"] == "standalone-0-1"


def test_the_clock_reports_a_request_past_the_operation_timeout_once_and_in_time_order():
    c = Conversation(Options(request_timeout=30.0))
    slow = c.frame(1, TO_BROKER, simple_frame("LOOKUP", topic="t", request_id=1), 10.0)
    fast = c.frame(1, TO_BROKER, simple_frame("LOOKUP", topic="t", request_id=2), 11.0)
    c.frame(1, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=2), 11.5)
    other = c.frame(2, TO_BROKER, simple_frame("PARTITIONED_METADATA", topic="t", request_id=1), 12.0)
    late = c.frame(2, TO_BROKER, simple_frame("PARTITIONED_METADATA", topic="u", request_id=2), 20.0)
    out: list = []
    c.analyzer.tick(41.0, out)  # idle link: no packet, the wall clock moves on
    assert [(e.kind, e.details["request"], e.time) for e in out] == [
        ("OVERDUE", slow.frame.index, 40.0), ("OVERDUE", other.frame.index, 42.0)][:1]
    c.analyzer.tick(60.0, out)
    assert [(e.details["request"], e.time) for e in out] == [
        (slow.frame.index, 40.0), (other.frame.index, 42.0), (late.frame.index, 50.0)]
    assert fast.frame.index not in [e.details["request"] for e in out]
    c.analyzer.tick(100.0, out)
    assert len(out) == 3  # each is reported once
    answer = c.frame(1, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=1), 101.0)
    assert answer.notes["answers"] == slow.frame.index and ids(answer) == ["response.slow"]
    c.close(2, 102.0)
    assert sorted(e.details["request"] for e in c.events if e.kind == "UNANSWERED") == [other.frame.index,
                                                                                          late.frame.index]


def test_the_clock_runs_on_the_capture_time_of_the_items_too():
    c = Conversation(Options(request_timeout=5.0))
    c.frame(1, TO_BROKER, simple_frame("PING"), 1.0)
    c.frame(1, TO_BROKER, simple_frame("FLOW", consumer_id=0, messagePermits=1), 7.0)  # later traffic
    overdue = [e for e in c.events if e.kind == "OVERDUE"]
    assert [(e.details["request_type"], e.time) for e in overdue] == [("PING", 6.0)]
    assert message("OVERDUE", {**overdue[0].details, "timeout_s": 5.0}).startswith("PING (frame 1)")


# Lifecycle warnings. Built from frames: the real broker does not let a client use a closed producer, and
# pulsar-lite's delayed delivery is exercised by test_fresh_recordings.py.

def test_a_frame_for_a_closed_producer_or_consumer_is_flagged():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1, producer_name="p"), 0)
    c.frame(1, TO_BROKER, simple_frame("CLOSE_PRODUCER", producer_id=0, request_id=2), 1)
    late = c.frame(1, TO_BROKER, send_frame(b"x", producer_id=0, sequence_id=0), 2)
    assert ids(late) == ["actor.used_after_close"] and findings(late)[0].params["name"] == "p"
    assert late.notes["producer"]["name"] == "p"  # the frame still says whose it was
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=4, request_id=3), 3)
    c.frame(1, TO_BROKER, simple_frame("CLOSE_CONSUMER", consumer_id=4, request_id=4), 4)
    flow = c.frame(1, TO_BROKER, simple_frame("FLOW", consumer_id=4, messagePermits=10), 5)
    assert ids(flow) == ["actor.used_after_close"]


def test_a_consumer_closed_or_ended_with_unacknowledged_messages_is_flagged_with_count_and_frames():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=1,
                                       consumer_name="lazy"), 0)
    ms = [c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=i), 1 + i) for i in range(3)]
    c.frame(1, TO_BROKER, simple_frame("ACK", consumer_id=0, ack_type=0,
                                       message_id=[{"ledgerId": 1, "entryId": 1}]), 5)
    close = c.frame(1, TO_BROKER, simple_frame("CLOSE_CONSUMER", consumer_id=0, request_id=2), 6)
    (warning,) = findings(close)
    assert warning.id == "consumer.unacked" and warning.params["count"] == 2
    assert warning.params["frames"] == [ms[0].frame.index, ms[2].frame.index]
    # still subscribed when the connection ends: an event, with the same facts
    c.frame(2, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=1), 7)
    late = c.frame(2, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=9), 8)
    c.close(2, 9)
    (end,) = [e for e in c.events if e.kind == "UNACKED_AT_END"]
    assert end.conn == 2 and end.details["count"] == 1 and end.details["frames"] == [late.frame.index]


def test_a_reader_never_acknowledges_and_is_not_flagged():
    c = Conversation()
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="r", consumer_id=0, request_id=1,
                                       durable=False), 0)
    c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=0), 1)
    close = c.frame(1, TO_BROKER, simple_frame("CLOSE_CONSUMER", consumer_id=0, request_id=2), 2)
    assert findings(close) == []


def test_early_delivery_is_flagged_for_shared_subscriptions_only():
    for sub_type, expected in ((1, ["message.early_delivery"]), (0, [])):  # Shared, Exclusive
        c = Conversation()
        c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=1,
                                           subType=sub_type), 100.0)
        md = metadata()
        md.deliver_at_time = 110_000  # ms: ten seconds after the subscription
        early = c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=0, md=md), 105.0)
        assert ids(early) == expected
        if expected:
            assert findings(early)[0].params["early_ms"] == pytest.approx(5000)
