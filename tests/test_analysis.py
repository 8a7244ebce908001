"""Conversation analysis on synthetic conversations: pairing, latency, session state, anomalies.

Frames are built byte for byte (tests/framebuild.py), written as a capture of several interleaved connections
(each frame one TCP segment, each connection opened by its handshake and closed by FINs when the test closes
it) and dissected end to end (``dissector.run.analysed_events``): the Pulsar command table declared in Python
(``dissector/protocols/pulsar/commands.py``) is what pairs them. The analyzer's mechanics on their own are cargo
tests (crates/engine/tests/analysis.rs, pulsar_session.rs).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

import pcapgen
from framebuild import message_frame, metadata, payload_frame, raw_frame, send_frame, simple_frame

from dissector.model import Annotated, Event
from dissector.options import Options
from dissector.problems import message, severity
from dissector.run import analysed_events

TO_BROKER, TO_CLIENT = "to_broker", "to_client"
BROKER_IP, BROKER_PORT = "10.0.0.1", 6650
SYN, FIN, ACK, PSH = 0x02, 0x01, 0x10, 0x08


class _Seen:
    """What the analysis made of one frame (its ``model.Annotated``), read when first asked for."""

    def __init__(self, conversation: Conversation, position: int) -> None:
        self._conversation = conversation
        self._position = position

    def __getattr__(self, name: str):
        return getattr(self._conversation.annotated()[self._position], name)


class Conversation:
    """Frames of several connections as one capture, dissected end to end; the capture is written and
    dissected again whenever an answer is asked for after frames were added (the analysis of a frame depends
    only on what came before it)."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self.packets: list[tuple[float, bytes]] = []
        self.seq: dict[int, list[int]] = {}  # connection -> [next client seq, next broker seq]
        self.frames: list[_Seen] = []
        self._dir = tempfile.TemporaryDirectory()
        self._path = Path(self._dir.name) / "conversation.pcap"
        self._done: tuple[int, list[Annotated], list[Event]] = (-1, [], [])

    def _packet(self, cid: int, to_broker: bool, flags: int, payload: bytes, time: float) -> None:
        client, broker = self.seq[cid]
        src, dst = ("10.0.0.2", 40000 + cid), (BROKER_IP, BROKER_PORT)
        seq, ack = (client, broker) if to_broker else (broker, client)
        if not to_broker:
            src, dst = dst, src
        segment = pcapgen.ipv4_tcp(src[0], dst[0], src[1], dst[1], seq, ack, flags, payload)
        self.packets.append((time, pcapgen.ether(segment)))
        used = len(payload) + (1 if flags & (SYN | FIN) else 0)
        self.seq[cid][0 if to_broker else 1] += used

    def frame(self, cid: int, direction: str, raw: bytes, time: float) -> _Seen:
        if cid not in self.seq:
            self.seq[cid] = [1000 * cid, 500_000 * cid]
            self._packet(cid, True, SYN, b"", time)
            self._packet(cid, False, SYN | ACK, b"", time)
            self._packet(cid, True, ACK, b"", time)
        self._packet(cid, direction == TO_BROKER, PSH | ACK, raw, time)
        seen = _Seen(self, len(self.frames))
        self.frames.append(seen)
        return seen

    def close(self, cid: int, time: float) -> None:
        self._packet(cid, True, FIN | ACK, b"", time)
        self._packet(cid, False, FIN | ACK, b"", time)
        self._packet(cid, True, ACK, b"", time)

    def finish(self) -> None:
        """The end of the capture ends what is still open (as every run of the capture does)."""

    def _run(self) -> tuple[list[Annotated], list[Event]]:
        if self._done[0] != len(self.packets):
            pcapgen.write_pcap(self._path, self.packets)
            items = list(analysed_events(self._path, self.options))
            annotated = [i for i in items if type(i) is Annotated]
            assert len(annotated) == len(self.frames), [type(i).__name__ for i in items]
            events = [i for i in items if type(i) is Event
                      and i.kind not in ("CONNECTION_OPENED", "CONNECTION_CLOSED")]
            self._done = (len(self.packets), annotated, events)
        return self._done[1], self._done[2]

    def annotated(self) -> list[Annotated]:
        return self._run()[0]

    @property
    def events(self) -> list[Event]:
        """The analysis' events (the pipeline's own connection events left out), the end of capture's included."""
        return self._run()[1]


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
    # (the sizes of the consumer's tables: pulsar_session.rs
    # remembered_message_ids_are_capped_per_consumer_and_a_forgotten_one_is_delivered_anew)
    assert c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=5), 2).notes.get("delivery") is None
    assert c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=9), 2).notes.get("delivery") == 2


def test_a_consumer_that_never_acks_does_not_grow_without_bound_and_says_so():
    c = Conversation(Options(max_remembered_messages=50))
    c.frame(1, TO_BROKER, simple_frame("SUBSCRIBE", topic="t", subscription="s", consumer_id=0, request_id=1), 0)
    for i in range(500):
        c.frame(1, TO_CLIENT, message_frame(b"m", consumer_id=0, entry_id=i), 1 + i / 1000)
    # (the tables stay at 50: pulsar_session.rs a_consumer_that_never_acks_keeps_at_most_the_cap_and_says_so)
    c.close(1, 2.0)
    dropped = [e for e in c.events if e.kind == "STATE_DROPPED"]
    # said once when it first happens, not per frame, then the totals when the connection closes
    assert [e.details["option"] for e in dropped] == ["max_remembered_messages"] * 2
    assert dropped[0].time == 1 + 50 / 1000
    totals = dropped[-1].details
    assert totals["dropped"] == 450 and totals["limit"] == 50


def test_sends_that_are_never_answered_keep_bounded_state():
    """One direction only (an asymmetric SPAN port): every SEND waits for a receipt that never comes."""
    c = Conversation(Options(max_pending_requests=100))
    c.frame(1, TO_BROKER, simple_frame("PRODUCER", topic="t", producer_id=0, request_id=1), 0)
    for i in range(1000):
        c.frame(1, TO_BROKER, send_frame(b"x" * 1000, producer_id=0, sequence_id=i), 1 + i / 1000)
    # (the sizes of the waiting tables: analysis.rs the_pending_cap_forgets_the_oldest_and_says_so_once_then_the_total)
    c.close(1, 5.0)
    dropped = [e for e in c.events if e.kind == "STATE_DROPPED"]
    assert dropped and {e.details["option"] for e in dropped} == {"max_pending_requests"}
    assert dropped[0].time == 1 + 99 / 1000  # the 101st request waiting: the PRODUCER and 100 SENDs
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
    """Traffic on another connection moves the clock: each request past the timeout is reported once, at its
    deadline, in deadline order across connections. (The pipeline's clock on an idle link, without packets, is
    Dissector.tick: test_pipeline; the analyzer's own: analysis.rs the_clock_reports_an_overdue_request_once.)"""
    c = Conversation(Options(request_timeout=30.0))
    slow = c.frame(1, TO_BROKER, simple_frame("LOOKUP", topic="t", request_id=1), 10.0)
    fast = c.frame(1, TO_BROKER, simple_frame("LOOKUP", topic="t", request_id=2), 11.0)
    c.frame(1, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=2), 11.5)
    other = c.frame(2, TO_BROKER, simple_frame("PARTITIONED_METADATA", topic="t", request_id=1), 12.0)
    late = c.frame(2, TO_BROKER, simple_frame("PARTITIONED_METADATA", topic="u", request_id=2), 20.0)
    for t in (41.0, 60.0, 100.0):  # a third connection's FLOWs, which wait for nothing
        c.frame(3, TO_BROKER, simple_frame("FLOW", consumer_id=0, messagePermits=1), t)
    answer = c.frame(1, TO_CLIENT, simple_frame("LOOKUP_RESPONSE", request_id=1), 101.0)
    c.close(2, 102.0)
    overdue = [(e.details["request"], e.time) for e in c.events if e.kind == "OVERDUE"]
    assert overdue == [(slow.frame.index, 40.0), (other.frame.index, 42.0), (late.frame.index, 50.0)]
    assert fast.frame.index not in [r for r, _ in overdue]
    assert answer.notes["answers"] == slow.frame.index and ids(answer) == ["response.slow"]
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
