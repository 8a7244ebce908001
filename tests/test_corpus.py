"""Decoded output checked against the ground-truth manifests of real captures (real broker, official client).

The manifests record what the client API sent and received; none of the expected values here come from our
own output. ``derived_frame_census`` (tshark reassembly + an independent frame split) is secondary truth.
"""

from __future__ import annotations

import re

from collections import Counter, defaultdict

import pytest

from corpus import decoded, manifest, manifest_stems, sha256_text

STEMS = manifest_stems()


def frames(stem: str, suffix: str = ".pcap") -> list[dict]:
    return [r for r in decoded(stem + suffix) if "index" in r]


def events(stem: str) -> list[dict]:
    return [r for r in decoded(stem + ".pcap") if "index" not in r]


def client_of(rec: dict) -> str:
    return rec["src"] if rec["direction"] == "to_broker" else rec["dst"]


def test_corpus_is_shipped():
    assert len(STEMS) == 16, STEMS


@pytest.mark.parametrize("stem", STEMS)
def test_frame_census_per_stream_and_direction(stem):
    census = manifest(stem)["derived_frame_census"]["streams"]
    ours: dict[tuple[str, str], Counter] = defaultdict(Counter)
    crc: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for f in frames(stem):
        key = (client_of(f), f["direction"])
        ours[key][f["type"]] += 1
        if "checksum" in f:
            crc[key][f["checksum"]] += 1
    expected_keys = set()
    for stream in census:
        for direction, census_key in (("to_broker", "client_to_broker"), ("to_client", "broker_to_client")):
            want = stream[census_key]
            key = (stream["client"], direction)
            if want["frames"] == 0:
                continue
            expected_keys.add(key)
            assert dict(ours[key]) == want["by_type"], (stream["client"], direction)
            assert crc[key]["valid"] == want["with_crc32c"] - want["crc32c_bad"]
            assert crc[key]["invalid"] == want["crc32c_bad"] == 0
    assert set(k for k, v in ours.items() if v) == expected_keys


@pytest.mark.parametrize("stem", STEMS)
def test_decodes_without_problems(stem):
    m = manifest(stem)
    fs = frames(stem)
    # A consumer closed with messages it never acknowledged is a true warning: check it against the ACKs.
    acked = {i for f in fs if f["type"] == "ACK" for i in f.get("acks", ())}
    by_index = {f["index"]: f for f in fs}
    unacked_closes = [f for f in fs if [e["id"] for e in f.get("expert", ())] == ["consumer.unacked"]]
    for f in unacked_closes:
        (finding,) = [e for e in f["expert"]]
        listed = [int(i) for i in re.findall(r"\d+", finding["message"].split("frames", 1)[1])]
        assert f["type"] == "CLOSE_CONSUMER" and listed
        assert all(by_index[i]["type"] == "MESSAGE" and i not in acked for i in listed)
    fs = [f for f in fs if f not in unacked_closes]
    bad = [(f["index"], f["type"], f["problems"]) for f in fs if f["problems"]]
    server_errors = [f for f in fs if f["type"] in ("ERROR", "SEND_ERROR")]
    # The only problems are the broker's own error answers, each flagged as such.
    assert [b[0] for b in bad] == [f["index"] for f in server_errors]
    for f in server_errors:
        assert [(e["id"], e["severity"]) for e in f["expert"]] == [("server.error", "error")]
        assert f["command"]["error"]  # the ServerError name, decoded from the frame
    kinds = Counter(e["type"] for e in events(stem))
    streams = len(m["derived_frame_census"]["streams"])
    assert kinds.pop("CONNECTION_OPENED") == kinds.pop("CONNECTION_CLOSED") == streams
    if stem == "11_errors":
        # Subscriptions the broker refused by closing the connection, and the unsupported regex lookup; those to
        # the subscription client A held Exclusive are said so too.
        assert set(kinds) == {"UNANSWERED", "SUBSCRIBE_HELD_AT_END"}
        unanswered = {e["details"]["request_type"] for e in events(stem) if e["type"] == "UNANSWERED"}
        assert unanswered == {"SUBSCRIBE", "GET_TOPICS_OF_NAMESPACE"}
        held = {e["details"]["subscribe_frame"] for e in events(stem) if e["type"] == "SUBSCRIBE_HELD_AT_END"}
        assert held and held < {e["details"]["request"] for e in events(stem)
                                if e["type"] == "UNANSWERED" and e["details"]["request_type"] == "SUBSCRIBE"}
    else:
        assert kinds == Counter()


def test_refused_subscriptions_show_the_broker_closing_the_connection():
    evs = events("11_errors")
    unanswered = {e["conn"] for e in evs if e["type"] == "UNANSWERED" and e["details"]["request_type"] == "SUBSCRIBE"}
    closed_by = {e["conn"]: e["details"].get("closed_by") for e in evs if e["type"] == "CONNECTION_CLOSED"}
    assert unanswered and all(closed_by[c] == "broker" for c in unanswered)


@pytest.mark.parametrize("stem", STEMS)
def test_every_connection_starts_with_the_handshake(stem):
    by_conn: dict[int, list[dict]] = defaultdict(list)
    for f in frames(stem):
        by_conn[f["conn"]].append(f)
    assert by_conn
    for conn, fs in by_conn.items():
        first_out = next(f for f in fs if f["direction"] == "to_broker")
        first_in = next(f for f in fs if f["direction"] == "to_client")
        assert first_out["type"] == "CONNECT"
        assert first_in["type"] == "CONNECTED"
        assert first_in["answers"] == first_out["index"]
        assert first_in["latency_ms"] == pytest.approx((first_in["time"] - first_out["time"]) * 1000, abs=1e-3)
        assert first_in["command"]["protocol_version"] == first_out["command"]["protocol_version"] == 20
        assert first_out["command"]["client_version"] == "Pulsar-CPP-v4.2.0"
        assert first_in["command"]["server_version"] == "Pulsar-Lite-0.1.0"


# ----------------------------------------------------------------------------- sent messages


def _sent_items(m: dict) -> list[dict]:
    items = []
    for key in ("sent", "sent_batched", "sent_single"):
        items.extend(m.get(key) or [])
    for item in items:
        if "payload_sha256" not in item and "payload_utf8" in item:
            item["payload_sha256"] = sha256_text(item["payload_utf8"])
    return items


SENT_STEMS = [s for s in STEMS if s != "11b_send_error_too_big" and _sent_items(manifest(s))]


def _send_messages(stem: str) -> list[tuple[dict, dict]]:
    """(SEND frame, message) pairs in capture order; a chunked message counts once, at its last chunk."""
    out = []
    for f in frames(stem):
        if f["type"] != "SEND":
            continue
        if f.get("reassembled"):
            whole = f["reassembled"]
            out.append((f, {"payload_sha256": whole["payload_sha256"], "payload_size": whole["payload_size"],
                            "properties": f["messages"][0].get("properties", {})}))
        elif "chunk_id" not in f["messages"][0]:
            out.extend((f, m) for m in f["messages"])
    return out


@pytest.mark.parametrize("stem", SENT_STEMS)
def test_every_sent_message_is_in_a_send_frame_in_order(stem):
    m = manifest(stem)
    sent = _sent_items(m)
    sends = _send_messages(stem)
    receipts = {f["answers"]: f for f in frames(stem) if f["type"] == "SEND_RECEIPT"}
    by_producer: dict[str, list] = defaultdict(list)
    for f, msg in sends:
        by_producer[f.get("producer", {}).get("name")].append((f, msg))
    for producer, group in by_producer.items():
        shas = [msg["payload_sha256"] for _, msg in group]
        expected = [s["payload_sha256"] for s in sent if s.get("producer", producer) == producer]
        assert shas == expected, producer
    lookup = {(msg["payload_sha256"], f.get("producer", {}).get("name")): (f, msg) for f, msg in sends}
    for item in sent:
        f, msg = lookup[(item["payload_sha256"], item.get("producer", f_name(sends, item)))]
        assert msg.get("properties", {}) == item.get("properties", {})
        if "seq" in item:
            assert msg["sequence_id"] == item["seq"]
        if item.get("partition_key") is not None:
            assert msg["partition_key"] == item["partition_key"]
        if "ordering_key" in item:
            assert msg.get("ordering_key") == item["ordering_key"]
        if item.get("event_timestamp_ms"):
            assert msg["event_time"] == item["event_timestamp_ms"]
        mid = item.get("message_id")
        if mid is not None:
            receipt = receipts[f["index"]]
            rid = receipt["command"]["message_id"]
            assert (rid["ledgerId"], rid["entryId"]) == (mid["ledger_id"], mid["entry_id"])
            assert msg.get("batch_index", -1) == mid["batch_index"]


def f_name(sends, item) -> str | None:
    """Producer name when the manifest has a single producer."""
    names = {f.get("producer", {}).get("name") for f, _ in sends}
    return names.pop() if len(names) == 1 else None


def test_chunked_message_is_reassembled_whole():
    m = manifest("04_chunking")
    big = next(s for s in m["sent"] if s["what"] == "big")
    sends = [f for f in frames("04_chunking") if f["type"] == "SEND" and "chunk_id" in f["messages"][0]]
    assert [f["messages"][0]["chunk_id"] for f in sends] == list(range(big["expected_chunks"]))
    last = sends[-1]
    assert last["reassembled"]["payload_sha256"] == big["payload_sha256"]
    assert last["reassembled"]["payload_size"] == big["payload_len"]
    assert last["reassembled"]["chunks"] == [f["index"] for f in sends]


# ----------------------------------------------------------------------------- received messages


def _received_items(m: dict) -> list[tuple[str | None, dict]]:
    items: list[tuple[str | None, dict]] = []
    for key in ("received", "consumer_events", "reader_events"):
        items.extend((None, r) for r in m.get(key) or [])
    for consumer, rs in (m.get("received_by_consumer") or {}).items():
        items.extend((consumer, r) for r in rs)
    # Event lists also hold seeks, timeouts and has_message_available checks: keep the deliveries.
    return [(c, r) for c, r in items if "payload_sha256" in r and "message_id" in r]


RECEIVED_STEMS = [s for s in STEMS if _received_items(manifest(s))]


def _delivered(stem: str) -> dict[tuple, list[tuple[dict, dict]]]:
    """(ledger, entry, partition, batch_index) -> [(MESSAGE frame, message)]; chunked by the last chunk's id."""
    out: dict[tuple, list] = defaultdict(list)
    for f in frames(stem):
        if f["type"] != "MESSAGE":
            continue
        for msg in f["messages"]:
            mid = msg["message_id"]
            key = (mid["ledger_id"], mid["entry_id"], mid["partition"], mid["batch_index"])
            if "chunk_id" in msg:
                if not f.get("reassembled"):
                    continue
                msg = dict(msg, payload_sha256=f["reassembled"]["payload_sha256"],
                           payload_size=f["reassembled"]["payload_size"])
            out[key].append((f, msg))
    return out


@pytest.mark.parametrize("stem", RECEIVED_STEMS)
def test_every_received_message_is_in_a_message_frame(stem):
    delivered = _delivered(stem)
    items = _received_items(manifest(stem))
    assert items
    for consumer, item in items:
        mid = item["message_id"]
        candidates = delivered[(mid["ledger_id"], mid["entry_id"], mid["partition"], mid["batch_index"])]
        assert candidates, mid["str"]
        matching = [(f, msg) for f, msg in candidates if msg["payload_sha256"] == item["payload_sha256"]]
        assert matching, mid["str"]
        f, msg = matching[0]
        assert msg.get("properties", {}) == item["properties"]
        assert f["metadata"]["producer_name"] == item["producer_name"]
        assert f["metadata"]["publish_time"] == item["publish_timestamp_ms"]
        assert f["command"].get("redelivery_count", 0) == item["redelivery_count"]
        if item.get("partition_key") is not None:
            assert msg["partition_key"] == item["partition_key"]
        if item.get("ordering_key") is not None:
            assert msg["ordering_key"] == item["ordering_key"]
        if item.get("event_timestamp_ms"):
            assert msg["event_time"] == item["event_timestamp_ms"]
        if consumer is not None:
            assert any(fr["consumer"]["name"] == consumer for fr, _ in matching)


def test_batch_index_acks_carry_ack_sets():
    m = manifest("05b_batch_index_ack")
    acks = [f for f in frames("05b_batch_index_ack") if f["type"] == "ACK"]
    with_set = [f for f in acks if any("ack_set" in mid for mid in f["command"]["message_id"])]
    individual = [a for a in m["acks"] if a["type"] == "Individual"]
    assert len(with_set) == len(individual) == 10
    for frame, ack in zip(with_set, individual):
        (mid,) = frame["command"]["message_id"]
        assert (mid["ledgerId"], mid["entryId"]) == (ack["message_id"]["ledger_id"], ack["message_id"]["entry_id"])
        # java.util.BitSet words: a cleared bit is an acknowledged batch index.
        assert not (mid["ack_set"][0] >> ack["message_id"]["batch_index"]) & 1
    cumulative = [f for f in acks if f["command"]["ack_type"] == "Cumulative"]
    (want,) = [a["message_id"] for a in m["acks"] if a["type"] == "Cumulative"]
    (got,) = cumulative[-1]["command"]["message_id"]
    assert (got["ledgerId"], got["entryId"]) == (want["ledger_id"], want["entry_id"])


def test_the_one_error_frame_answers_get_last_message_id():
    errors = [f for f in frames("11_errors") if f["type"] == "ERROR"]
    assert len(errors) == 1
    err = errors[0]
    assert err["command"]["error"] == "UnknownError"
    assert err["command"]["message"] == "Topic has no messages"
    request = next(f for f in frames("11_errors") if f["index"] == err["answers"])
    assert request["type"] == "GET_LAST_MESSAGE_ID"
    assert request["command"]["request_id"] == err["command"]["request_id"]


def test_send_errors_for_the_oversized_message():
    m = manifest("11b_send_error_too_big")
    fs = frames("11b_send_error_too_big")
    errors = [f for f in fs if f["type"] == "SEND_ERROR"]
    assert len(errors) == 15
    big = max(s["payload_len"] for s in m["sent"])
    by_index = {f["index"]: f for f in fs}
    for err in errors:
        assert err["command"]["error"] == "NotAllowedError"
        assert "Exceed maximum message size" in err["command"]["message"]
        send = by_index[err["answers"]]
        assert send["type"] == "SEND" and send["messages"][0]["payload_size"] == big
        assert send["conn"] == err["conn"]
    assert len({f["conn"] for f in errors}) == 15  # the client reconnects after each one


def test_pcap_pcapng_and_linux_cooked_give_the_same_frames():
    def essence(recs):
        return [(r["type"], r["command"], r.get("messages"), r["src"], r["dst"], r.get("answers")) for r in recs]

    pcap = frames("01_basic_nonbatched", ".pcap")
    assert len(pcap) == 59
    for other in (".pcapng", ".any.pcap"):
        recs = frames("01_basic_nonbatched", other)
        assert essence(recs) == essence(pcap)
        # Three capture processes stamped the same packets: microseconds apart at most.
        assert max(abs(a["time"] - b["time"]) for a, b in zip(recs, pcap)) < 1e-3


@pytest.mark.parametrize("stem", [s for s in STEMS if s.startswith("03_compression")])
def test_compressed_payloads_decompress_to_the_declared_size(stem):
    codec = manifest(stem)["compression"]
    compressed = [f for f in frames(stem) if f["type"] in ("SEND", "MESSAGE")
                  and (f["metadata"] or {}).get("compression", "NONE") != "NONE"]
    assert compressed
    for f in compressed:
        assert f["metadata"]["compression"] == codec
        assert f["uncompressed_size"] == f["metadata"]["uncompressed_size"]


@pytest.mark.parametrize("stem", STEMS)
def test_latencies_agree_with_the_timestamps(stem):
    by_index = {f["index"]: f for f in frames(stem)}
    paired = [f for f in frames(stem) if "answers" in f]
    assert paired
    for resp in paired:
        req = by_index[resp["answers"]]
        assert req["index"] < resp["index"] and req["conn"] == resp["conn"]
        assert req["direction"] != resp["direction"]
        assert resp["latency_ms"] == pytest.approx((resp["time"] - req["time"]) * 1000, abs=1e-3)


def test_cumulative_acks_cover_the_messages_up_to_their_id():
    m = manifest("05_cumulative_ack")
    messages = {f["index"]: f for f in frames("05_cumulative_ack") if f["type"] == "MESSAGE"}
    acks = [f for f in frames("05_cumulative_ack") if f["type"] == "ACK"]
    assert [a["type"] for a in m["acks"]] == ["Cumulative", "Cumulative"]
    covered_before = -1
    for ack, want in zip(acks, m["acks"]):
        entry = want["message_id"]["entry_id"]
        (mid,) = ack["command"]["message_id"]
        assert mid["entryId"] == entry
        acked_entries = sorted(messages[i]["command"]["message_id"]["entryId"] for i in ack["acks"])
        assert acked_entries == list(range(covered_before + 1, entry + 1))
        covered_before = entry


def test_individual_acks_point_at_their_message():
    acks = [f for f in frames("01_basic_nonbatched") if f["type"] == "ACK"]
    by_index = {f["index"]: f for f in frames("01_basic_nonbatched")}
    assert len(acks) == manifest("01_basic_nonbatched")["acks"]["count"]
    for ack in acks:
        (mid,) = ack["command"]["message_id"]
        (target,) = ack["acks"]
        assert by_index[target]["command"]["message_id"]["entryId"] == mid["entryId"]
