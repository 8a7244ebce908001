"""Traffic of the Rust client pulsar-rs 6.9.1 against pulsar-lite, and the official client's reactions to it
(``captures/pulsar_rs/``, made by ``captures/gen/pulsar_rs/run.py``; its README says how and what each client API
reported). Every expectation comes from a capture's manifest, what the client APIs returned, never from this
dissector's output; a false warning fails a test as a missed one does.

What pulsar-rs does that the official clients do not, and the manifests show: Snappy in its framing format,
one sequence id per batch with no per-entry ids, each batch entry acknowledged with its batch index and no
ack_set, negative acks sent at once with the batch index. Its consumer cannot read pulsar-lite's MESSAGE frames
(they carry no magic number and CRC32C; it drops the connection): the official Python client consumes on a
second subscription instead, and where it cannot decompress (framed Snappy) it acknowledges with a
``validation_error`` and its application receives nothing."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures" / "pulsar_rs"
STEMS = sorted(p.stem for p in CAPTURES.glob("rs_*.json"))
CLI = [sys.executable, "-m", "dissector.cli.main"]


class Case:
    def __init__(self, stem: str):
        self.stem = stem
        self.manifest = json.loads((CAPTURES / f"{stem}.json").read_text())
        self.pcap = str(CAPTURES / f"{stem}.pcap")
        self.hint = self.manifest["dissector_hint"].split()  # the broker's port: ["--port", "16650"]
        self.scenario = self.manifest["scenario"]
        self.records = [json.loads(line) for line in self.cli(self.pcap, "--json").splitlines()]
        self.stats = json.loads(self.cli("stats", self.pcap, "--json"))

    def cli(self, *args: str) -> str:
        res = subprocess.run(CLI + list(args) + self.hint, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        return res.stdout

    def frames(self, kind: str | None = None) -> list[dict]:
        return [r for r in self.records if "index" in r and (kind is None or r["type"] == kind)]

    def with_finding(self, pid: str) -> list[dict]:
        return [r for r in self.frames() if pid in [e["id"] for e in r.get("expert", ())]]

    def official(self) -> dict | None:
        """The official client's consumer, when one consumed: what its API received."""
        return self.manifest.get("python_consumer") or self.manifest.get("cross_consumer")

    def producer_of(self, rec: dict) -> str | None:
        return (rec.get("producer") or {}).get("name")


@pytest.fixture(scope="module", params=STEMS)
def case(request) -> Case:
    return Case(request.param)


def test_the_captures_are_there():
    assert len(STEMS) >= 12, STEMS


def test_every_message_sent_is_decoded_with_its_payload(case):
    """Each SEND's messages, their payloads' SHA-256 (through every codec, framed Snappy included), are what
    the pulsar-rs API sent."""
    sent = collections.Counter(m["payload_sha256"] for m in case.scenario["sent"])
    # a send the API failed after it was written (rs_09: after the producer's close) is on the wire too
    sent.update(c["payload_sha256"] for c in case.scenario.get("api_calls") or () if "payload_sha256" in c)
    decoded = collections.Counter(m.get("payload_sha256") for r in case.frames("SEND") for m in r.get("messages", ()))
    assert decoded == sent


def test_nothing_is_claimed_that_the_clients_did_not_do(case):
    """No decompression failure, broken batch, bad checksum or sequence anomaly: every send returned a receipt,
    the receipts' sequence ids run 0, 1, 2 per producer (one per batch), and the official client read LZ4, ZSTD
    and ZLIB (its manifests)."""
    claimed = {e["id"] for r in case.frames() for e in r.get("expert", ())}
    false = claimed & {"payload.decompression", "batch.malformed", "batch.count_mismatch", "checksum.invalid",
                       "sequence.regression", "sequence.gap", "message.redelivered"}
    official = case.official()
    if official is None or all(m.get("app_action", "acknowledge") == "acknowledge" for m in official["received"]):
        false |= claimed & {"consumer.unacked"}  # every message received was acknowledged (rs_10's were not)
    assert not false
    for producer in {m["producer"] for m in case.scenario["sent"]}:
        ids = sorted({m["receipt"]["sequence_id"] for m in case.scenario["sent"] if m["producer"] == producer})
        assert ids == list(range(len(ids))), f"{producer}: the receipts say the ids are contiguous"


def test_framed_snappy_is_said_on_every_snappy_send_and_nowhere_else(case):
    snappy = {p["name"] for p in case.scenario["producers"] if p.get("compression") == "snappy"}
    said = {r["index"] for r in case.with_finding("payload.snappy_framed") if r["type"] == "SEND"}
    sends = {r["index"] for r in case.frames("SEND") if case.producer_of(r) in snappy}
    assert said == sends
    assert bool(said) == bool(snappy)


def test_the_official_consumer_is_counted_as_its_api_saw_it(case):
    """Its acknowledged messages are those its application received; the rest of what was delivered to it it
    dropped unread (ACKs with a validation_error), counted discarded, each such ACK a warning."""
    official = case.official()
    if official is None:
        pytest.skip(f"{case.stem}: no official consumer in this capture (its manifest)")
    # (a partitioned topic: one consumer of that name per partition, rs_07)
    consumers = [c for c in case.stats["consumers"] if c.get("name") == official["consumer_name"]]
    assert consumers
    acked, discarded, distinct = (sum(c[key] for c in consumers)
                                  for key in ("messages_acked", "messages_discarded", "messages_distinct"))
    received = len(official["received"])
    if all(m.get("app_action", "acknowledge") == "acknowledge" for m in official["received"]):
        assert acked == received
        assert discarded == distinct - received
    else:  # rs_10: acknowledged cumulatively, in part: never more than it received
        assert acked + discarded <= received
    assert bool(case.with_finding("ack.validation_error")) == (discarded > 0)
    if discarded:  # the scenario's framed Snappy: what its API never received
        assert distinct == len(case.scenario["sent"])


def test_a_message_without_a_checksum_to_pulsar_rs_is_said_once_per_connection(case):
    """pulsar-rs's consumer received nothing (its API) from pulsar-lite's checksum-less MESSAGE frames."""
    said = case.with_finding("message.checksum_required")
    if "consumer" not in case.scenario or case.scenario.get("summary", {}).get("received") != 0:
        assert not said
        return
    to_rs = collections.Counter(r["conn"] for r in case.frames("MESSAGE")
                                if (r.get("consumer") or {}).get("name") == case.scenario["consumer"]["name"])
    assert collections.Counter(r["conn"] for r in said) == collections.Counter(set(to_rs))
    assert all(r["index"] == min(m["index"] for m in case.frames("MESSAGE") if m["conn"] == r["conn"]) for r in said)


def test_acks_with_a_batch_index_and_no_ack_set_are_noted(case):
    """rs_05: the API acknowledged each id its sends returned; those of batched messages carry a batch index."""
    calls = case.scenario.get("api_calls") or []
    acked_in_batches = [c for c in calls if c["call"] == "ack_with_id" and c["message_id"]["batch_index"] is not None]
    assert len(case.with_finding("ack.whole_entry")) == len(acked_in_batches)
    nacks = [c for c in calls if c["call"] == "nack_with_id"]
    redelivers = case.frames("REDELIVER_UNACKNOWLEDGED_MESSAGES")
    assert len(redelivers) == len(nacks)
    wire = sorted((m["ledgerId"], m["entryId"], m.get("batch_index")) for r in redelivers
                  for m in r["command"]["message_ids"])
    api = sorted((c["message_id"]["ledger_id"], c["message_id"]["entry_id"], c["message_id"]["batch_index"])
                 for c in nacks)
    assert wire == api
