"""A consumer that acknowledges messages with a ``validation_error`` dropped them unread: the official clients
(C++ ``ConsumerImpl``, Java ``ConsumerImpl.discardCorruptedMessage``) do so when they cannot decompress, verify
or split what the broker delivered, and the application never receives it, though the broker counts the
message acknowledged. The dissector says so everywhere the message is followed: the ACK's finding
(``ack.validation_error``) and its ``discards`` (the MESSAGE frames), ``stats`` (discarded, not acked), the
journey (``follow --message``), and ``check`` (``no-discarded``).

The capture is built frame by frame here (``framebuild.py``): the official client's decompression failure needs
a payload it cannot read, which ``test_pulsar_rs.py`` records for real from pulsar-rs's framed Snappy."""

from __future__ import annotations

import json
import subprocess
import sys

import framebuild as fb
import pytest

CLI = [sys.executable, "-m", "dissector.cli.main"]
TOPIC = "persistent://public/default/dropped"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """CONNECT, SUBSCRIBE, FLOW, two MESSAGEs (3:0 and 3:1); the client acks 3:0 with DecompressionError and 3:1
    plainly."""
    path = tmp_path_factory.mktemp("discarded") / "discarded.pcap"
    items = [
        ("c", fb.simple_frame("CONNECT", client_version="Pulsar-CPP-v4.2.0", protocol_version=20)),
        ("b", fb.simple_frame("CONNECTED", server_version="Pulsar-Lite-0.1.0", protocol_version=20)),
        ("c", fb.simple_frame("SUBSCRIBE", topic=TOPIC, subscription="s", subType="Exclusive", consumer_id=1,
                              request_id=1, consumer_name="reader-app")),
        ("b", fb.simple_frame("SUCCESS", request_id=1)),
        ("c", fb.simple_frame("FLOW", consumer_id=1, messagePermits=10)),
        ("b", fb.message_frame(b"unreadable", consumer_id=1, ledger_id=3, entry_id=0)),
        ("b", fb.message_frame(b"fine", consumer_id=1, ledger_id=3, entry_id=1)),
        ("c", fb.simple_frame("ACK", consumer_id=1, ack_type="Individual",
                              message_id=[{"ledgerId": 3, "entryId": 0}], validation_error="DecompressionError")),
        ("c", fb.simple_frame("ACK", consumer_id=1, ack_type="Individual",
                              message_id=[{"ledgerId": 3, "entryId": 1}])),
    ]
    fb.tcp_pcap(path, items)
    return str(path)


@pytest.fixture(scope="module")
def records(capture):
    res = run(capture, "--json")
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def frames(records, kind):
    return [r for r in records if r.get("type") == kind and "index" in r]


def test_the_ack_with_a_validation_error_names_the_message_frames_dropped(records):
    first, second = frames(records, "MESSAGE")
    discard, plain = frames(records, "ACK")
    assert [e["id"] for e in discard["expert"]] == ["ack.validation_error"]
    assert discard["expert"][0]["severity"] == "warning"
    assert discard["discards"] == [first["index"]]
    assert "acks" not in discard
    assert plain["acks"] == [second["index"]] and not plain.get("expert")
    # the messages were acknowledged on the wire: nothing is left unacknowledged at the end
    assert not [r for r in records if r.get("type") == "UNACKED_AT_END"]


def test_stats_count_them_discarded_not_acked(capture):
    res = run("stats", capture, "--json")
    assert res.returncode == 0, res.stderr
    (consumer,) = json.loads(res.stdout)["consumers"]
    assert (consumer["messages_distinct"], consumer["messages_acked"], consumer["messages_discarded"],
            consumer["messages_unacked"]) == (2, 1, 1, 0)


def test_the_journey_says_the_client_dropped_it(capture, records):
    discard = frames(records, "ACK")[0]
    res = run("follow", capture, "--message", "3:0", "--json")
    assert res.returncode == 0, res.stderr
    journeys = [json.loads(line)["journey"] for line in res.stdout.splitlines() if '"journey"' in line]
    (delivery,) = journeys[0]["deliveries"]
    assert (delivery["discarded"], delivery["ack_index"]) == ("DecompressionError", discard["index"])
    assert (journeys[0]["acked"], journeys[0]["discarded"]) == (0, 1)
    other = run("follow", capture, "--message", "3:1", "--json")
    (delivery,) = [json.loads(line)["journey"] for line in other.stdout.splitlines() if '"journey"' in line][0][
        "deliveries"]
    assert delivery["discarded"] is None and delivery["ack_index"] is not None


def test_check_no_discarded_fails_with_the_ack_as_evidence(capture, records):
    discard = frames(records, "ACK")[0]
    res = run("check", capture, "--rule", "no-discarded", "--rule", "all-acked", "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    verdicts = {v["rule"]: v for v in map(json.loads, res.stdout.splitlines())}
    assert not verdicts["no-discarded"]["passed"]
    assert [e["index"] for e in verdicts["no-discarded"]["evidence"]] == [discard["index"]]
    assert verdicts["all-acked"]["passed"], "acknowledged on the wire (the broker counts them acked)"
