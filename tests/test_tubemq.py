"""TubeMQ, the second protocol, judged by what its test encoder wrote (tests/tubemq_wire.py, written from the
protocol facts and independent of the decoder): every scenario capture in captures/tubemq/ is decoded and each
frame compared with the scenario's manifest (type, serial, direction, command fields, carried messages and
their checksums, pairing, the problems it should raise). Then block splits at every position, hostile frames,
a capture holding both protocols, and the commands that read records (stats, follow, check).
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import tubemq_wire as wire
from corpus import CAPTURES, capture_path
from dissector.run import analysed_records
from pcapgen import ether, ipv4_tcp, write_pcap

TUBE = CAPTURES / "tubemq"
SCENARIOS = sorted(p.stem for p in TUBE.glob("*.pcap"))

# the manifest's problem names → the ids the dissector gives them
PROBLEM_IDS = {
    "bad_checksum": {"tubemq.checksum_invalid"},
    "error_code": {"tubemq.error_code", "tubemq.consume_wait"},
    "response_without_request": {"response.unmatched"},
    "duplicate_serial": {"request.duplicate_id"},
    "exception": {"tubemq.exception", "tubemq.standby_master"},
}


def manifest(stem: str) -> dict:
    return json.loads((TUBE / f"{stem}.json").read_text())


def records(path: Path) -> list[dict]:
    return [json.loads(json.dumps(r)) for r in analysed_records(path)]


def frames_of(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r.get("index") is not None]


def ids(record: dict) -> set[str]:
    return {e["id"] for e in record.get("expert", [])}


def test_every_scenario_is_shipped():
    assert len(SCENARIOS) >= 13, SCENARIOS


@pytest.mark.parametrize("stem", SCENARIOS)
def test_frames_match_what_the_encoder_sent(stem):
    m = manifest(stem)
    recs = records(TUBE / f"{stem}.pcap")
    frames = frames_of(recs)
    expected = [f for f in m["frames"] if f["number"] is not None]  # frames cut by the capture's start are not frames
    assert [(r["index"], r["type"], r["serial"]) for r in frames] == \
        [(f["number"], expected_type(f), f["serial"]) for f in expected]
    unanswered = {e["details"]["request"] for e in recs if e.get("type") == "UNANSWERED"}
    mid_stream = any(not c["handshake_captured"] for c in m["connections"])
    for rec, exp in zip(frames, expected):
        assert rec["protocol"] == "tubemq"
        assert rec["direction"] == ("to_client" if exp["direction"] == "to_client" else f"to_{exp_server(m, exp)}")
        assert rec["rpc"]["kind"] == exp["flag"]
        if exp.get("method") is not None and exp["type"] != "RspExceptionBody":
            assert rec["rpc"]["method"] == exp["method"]
        if exp.get("protocol_version") is not None:
            assert rec["rpc"]["protocol_version"] == exp["protocol_version"]
        # every field the encoder wrote is in the command as written (the carried message bytes aside: they
        # are the frame's messages)
        for key, value in (exp["command"] or {}).items():
            if key in ("data", "messages"):
                continue
            assert_contains(rec["command"].get(key), value, (stem, exp["number"], key))
        assert_messages(rec.get("messages", []), exp["messages"])
        # pairing: the manifest's answers is a frame number, as the record's is a frame index
        assert rec.get("answers") == exp["answers"], (stem, exp["number"])
        if exp["answers"] is not None:
            assert rec["latency_ms"] == pytest.approx(exp["latency_ms"], abs=0.002)
        wanted = set(exp["expected_problems"])
        if "unanswered" in wanted:
            assert rec["index"] in unanswered
        for problem in wanted - {"unanswered"}:
            if problem == "response_without_request" and mid_stream:
                # the capture began mid-connection: its request may simply be before the capture
                assert "answers" not in rec
                continue
            assert ids(rec) & PROBLEM_IDS[problem], (stem, exp["number"], problem, ids(rec))
        known = set().union(*(PROBLEM_IDS[p] for p in wanted - {"unanswered"})) if wanted - {"unanswered"} else set()
        unexpected = {i for i in ids(rec) if i.startswith(("tubemq.", "response.", "request."))} - known
        unexpected -= {"tubemq.undecodable_method", "tubemq.unknown_method"}  # said of the frame's own kind
        assert not unexpected, (stem, exp["number"], unexpected)


def assert_contains(got, expected, where) -> None:
    """``got`` holds ``expected``: maps may have more keys (the decoder adds ``<field>_decoded`` readings of
    structured strings, which are checked against their strings here)."""
    if isinstance(expected, dict):
        assert isinstance(got, dict), where
        for key, value in expected.items():
            assert_contains(got.get(key), value, (*where, key))
        for key, readings in got.items():
            if key.endswith("_decoded"):
                check_readings(got[key.removesuffix("_decoded")], readings, where)
    else:
        assert got == expected, where


def check_readings(texts, readings, where) -> None:
    """Each structured string's reading, against the string split here by its documented format."""
    texts = texts if isinstance(texts, list) else [texts]
    assert len(texts) == len(readings), where
    for text, reading in zip(texts, readings):
        if "@" in text:  # consumerId@group#brokerId:host:port#topic:partitionId
            consumer, broker, part = text.split("#")
            assert (reading["consumer_id"], reading["group"]) == tuple(consumer.split("@")), where
            assert (reading["topic"], str(reading["partition"])) == tuple(part.rsplit(":", 1)), where
        elif "#" in text:  # topic#brokerId:partitions:stores,...[#maxMsgSize]
            topic, placements, *size = text.split("#")
            assert reading["topic"] == topic, where
            assert [[b["broker_id"], b["partitions"], b["stores"]] for b in reading["brokers"]] == \
                [[int(n) for n in p.split(":")] for p in placements.split(",")], where
            assert reading.get("max_msg_size") == (int(size[0]) if size and size[0] else None), where
        else:  # brokerId:host:port
            bid, host, port = text.split(":")
            assert (reading["broker_id"], reading["host"], reading["port"]) == (int(bid), host, int(port)), where


def expected_type(frame: dict) -> str:
    """The manifest's message name; a method with no message is named by its constant (declared by upstream)
    or as unknown (an id nobody declares)."""
    if frame["type"] is not None:
        return frame["type"]
    kind = "REQUEST" if frame["flag"] == "request" else "RESPONSE"
    constant = frame.get("method_constant")
    return f"{constant.removeprefix('RPC_MSG_')}_{kind}" if constant else f"UNKNOWN_{kind}"


def exp_server(m: dict, frame: dict) -> str:
    return m["connections"][frame["connection"]]["server_role"]


def assert_messages(got: list[dict], expected: list[dict]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g["payload_size"] == e["payload_size"]
        assert g["payload_sha256"] == e["payload_sha256"]
        assert g.get("flag") == e["flag"]
        assert g.get("message_id") == e["message_id"]
        if e["attributes"] is not None:
            assert g["attributes"] == e["attributes"]
        else:
            assert "attributes" not in g
        sent = e["checksum_sent"]
        if sent == -1:
            assert g["checksum"] == "absent"
        else:
            assert g["checksum_wire"] == sent
            assert g["checksum"] == ("valid" if e["checksum_valid"] else "invalid")


def _send_frame(payload: bytes, attribute: str | None, block_sizes=None) -> bytes:
    data, flag = wire.message_data(payload, attribute)
    request = wire.SEND_MESSAGE_REQUEST_P2B.encode({"clientId": "producer-1", "topicName": "orders", "partitionId": 3,
                                                   "data": data, "flag": flag, "checkSum": -1, "sentAddr": 7})
    return wire.encode_frame(9, wire.request_content(3, 13, request), block_sizes)


def test_huge_claims_are_refused_by_the_framing_not_allocated(tmp_path):
    """A list size and a block length off the scale: the splitter refuses them and resynchronises on the next
    frame, whose decode is whole."""
    lie = struct.pack(">III", wire.BEGIN_TOKEN, 1, 1) + struct.pack(">I", 0xFFFFFFF0) + b"\x02\x08\x00"
    many = struct.pack(">III", wire.BEGIN_TOKEN, 2, 0x7FFFFFFF)
    stream = lie + many + _send_frame(b"ok", None)
    path = tmp_path / "lies.pcap"
    write_pcap(path, _packets([stream]))
    recs = records(path)
    frames = frames_of(recs)
    assert [f["type"] for f in frames] == ["SendMessageRequestP2B"]
    assert frames[0]["messages"][0]["payload_sha256"] == hashlib.sha256(b"ok").hexdigest()
    kinds = {r["type"] for r in recs if r.get("index") is None}
    assert kinds & {"OVERSIZED", "BAD_SIZE"}


def _packets(chunks, sport=40999, dport=8123, start=1_800_000_000.0):
    """One client's TCP segments to a TubeMQ broker (the handshake seen)."""
    packets, seq = [], 1000
    packets.append((start, ether(ipv4_tcp("10.0.0.1", "10.0.0.2", sport, dport, seq - 1, 0, 0x02))))
    for i, chunk in enumerate(chunks):
        packets.append((start + 0.001 * (i + 1), ether(ipv4_tcp("10.0.0.1", "10.0.0.2", sport, dport, seq, 1, 0x18,
                                                                 payload=chunk))))
        seq += len(chunk)
    return packets


def test_a_capture_holding_both_protocols_shows_both(tmp_path):
    """Pulsar on 6650 and TubeMQ on 8123 in one file: each connection is decoded by its own protocol."""
    from dissector.capture.files import open_capture

    def packets_of(path: Path):
        with open_capture(path) as reader:
            return [(p.timestamp, p.data) for p in reader]

    pulsar = packets_of(capture_path("01_basic_nonbatched.pcap"))
    tube = packets_of(TUBE / "tubemq_consumer_broker.pcap")
    merged = sorted(pulsar + tube, key=lambda p: p[0])
    path = tmp_path / "both.pcap"
    write_pcap(path, merged)
    frames = frames_of(records(path))
    protocols = {f["protocol"] for f in frames}
    assert protocols == {"pulsar", "tubemq"}
    assert sum(f["protocol"] == "tubemq" for f in frames) == len(frames_of(records(TUBE / "tubemq_consumer_broker.pcap")))
    assert sum(f["protocol"] == "pulsar" for f in frames) == len(frames_of(records(capture_path("01_basic_nonbatched.pcap"))))


def test_detect_finds_tubemq_off_its_ports(tmp_path):
    path = tmp_path / "offport.pcap"
    write_pcap(path, _packets([_send_frame(b"found", None)], dport=9999))
    assert frames_of(records(path)) == []
    run = subprocess.run([sys.executable, "-m", "dissector.cli.main", str(path), "--detect", "--json"],
                         capture_output=True, text=True, check=True)
    got = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["type"] for r in got if r.get("index")] == ["SendMessageRequestP2B"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dissector.cli.main", *args], capture_output=True, text=True)


def test_stats_count_tubemq_frames_and_messages():
    run = _cli("stats", str(TUBE / "tubemq_consumer_broker.pcap"), "--json")
    assert run.returncode == 0, run.stderr
    stats = json.loads(run.stdout)
    m = manifest("tubemq_consumer_broker")
    assert stats["frames"] == len(m["frames"])
    assert stats["types"]["GetMessageResponseB2C"] == sum(f["type"] == "GetMessageResponseB2C" for f in m["frames"])
    assert stats["latency_ms"]["GetMessageRequestC2B"]["count"] == 2
    delivered = [msg for f in m["frames"] if f["type"] == "GetMessageResponseB2C" for msg in f["messages"]]
    assert stats["topics"]["orders"]["messages_received"] == len(delivered)
    assert stats["topics"]["orders"]["bytes_received"] == sum(msg["payload_size"] for msg in delivered)
    [client] = stats["clients"]
    assert (client["client_id"], client["group"]) == (m["frames"][0]["command"]["clientId"], "billing")
    assert client["errors"] == {"NOT_FOUND": 1}


def test_check_rules_work_on_tubemq(tmp_path):
    rule = 'forbid "tubemq.checksum_invalid" in expert.id'
    run = _cli("check", str(TUBE / "tubemq_consumer_broker.pcap"), "--rule", rule, "--json")
    assert run.returncode == 1, run.stdout + run.stderr
    verdict = json.loads(run.stdout)
    evidence = json.dumps(verdict)
    assert "1002" in evidence  # the message whose checksum is wrong is named in the evidence
    run = _cli("check", str(TUBE / "tubemq_producer_master.pcap"), "--rule", rule)
    assert run.returncode == 0, run.stdout + run.stderr
    run = _cli("check", str(TUBE / "tubemq_producer_broker.pcap"), "--rule", 'count(type == "SendMessageRequestP2B") == 4')
    assert run.returncode == 0, run.stdout + run.stderr


def test_follow_shows_a_tubemq_connection():
    run = _cli("follow", str(TUBE / "tubemq_producer_broker.pcap"), "--topic", "orders", "--json")
    assert run.returncode == 0, run.stderr
    got = [json.loads(line) for line in run.stdout.splitlines()]
    m = manifest("tubemq_producer_broker")
    # the sends to orders and their answers: a response learns its topic from the request it answers
    expected = [f["number"] for f in m["frames"]
                if f["command"].get("topicName") == "orders"
                or any(g["command"].get("topicName") == "orders" and g["number"] == f["answers"] for g in m["frames"])]
    assert [r["index"] for r in got if r.get("index")] == expected


@pytest.mark.parametrize("stem", SCENARIOS)
def test_every_tubemq_record_matches_the_schema(stem):
    from jsonschema import Draft202012Validator

    schema = json.loads((CAPTURES.parent / "docs" / "records.schema.json").read_text())
    validator = Draft202012Validator(schema)
    for rec in records(TUBE / f"{stem}.pcap"):
        assert [e.message for e in validator.iter_errors(rec)] == [], rec.get("index", rec["type"])


def test_a_tubemq_port_given_by_name(tmp_path):
    """--port tubemq:broker:9123 makes 9123 a TubeMQ broker's port; a bare number stays Pulsar's."""
    path = tmp_path / "port.pcap"
    write_pcap(path, _packets([_send_frame(b"on 9123", None)], dport=9123))
    assert frames_of(records(path)) == []
    run = _cli(str(path), "--port", "tubemq:broker:9123", "--json")
    assert run.returncode == 0, run.stderr
    got = [json.loads(line) for line in run.stdout.splitlines()]
    assert [(r["type"], r["direction"]) for r in got if r.get("index")] == [("SendMessageRequestP2B", "to_broker")]
    run = _cli(str(path), "--port", "9123", "--json")
    assert not [json.loads(line) for line in run.stdout.splitlines() if '"index"' in line]
    assert _cli(str(path), "--port", "tubemq:nobody:9123").returncode == 2
    assert _cli(str(path), "--port", "kafka:9092").returncode == 2


@pytest.mark.parametrize("stem", SCENARIOS)
def test_the_timeline_is_the_same_from_the_core_and_from_records(stem):
    """The plain timeline the core writes from its frames equals the lines made from the records (the path of
    filters, -V and colour)."""
    path = str(TUBE / f"{stem}.pcap")
    fast = _cli(path, "--plain")
    from_records = _cli(path, "--plain", "-Y", "index > 0 or not index")
    assert fast.returncode == from_records.returncode == 0
    assert fast.stdout == from_records.stdout
    assert "serial=" in fast.stdout


def test_mutated_tubemq_streams_go_through_the_whole_pipeline(tmp_path):
    """Bytes of real-shaped TubeMQ conversations, mutated and cut anywhere, through reassembly, framing,
    decoding, pairing and records: never an exception, always records."""
    m = manifest("tubemq_consumer_broker")
    stream = b"".join(_send_frame(bytes([i]) * (50 * i + 1), "k=v" if i % 2 else None, [7, 3] if i % 3 else None)
                      for i in range(1, 12))
    assert m["frames"]  # the same shapes the scenario writes
    rng = random.Random(3)
    for round_ in range(60):
        data = bytearray(stream)
        for _ in range(rng.randrange(1, 20)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cuts = sorted(rng.sample(range(1, len(data)), 8))
        chunks = [bytes(data[a:b]) for a, b in zip([0, *cuts], [*cuts, len(data)])]
        path = tmp_path / f"m{round_}.pcap"
        write_pcap(path, _packets(chunks))
        recs = records(path)
        assert recs and all("type" in r for r in recs)


def test_live_shows_tubemq_as_a_file_does():
    """`live` streams the same records from the same packets (here: as a source would give them)."""
    from dissector.capture.files import open_capture
    from dissector.run import live_records

    path = TUBE / "tubemq_consumer_broker.pcap"
    with open_capture(path) as reader:
        packets = list(reader)
    live = list(live_records(iter(packets)))
    assert [r.get("type") for r in live if r.get("protocol") == "tubemq"]
    assert live == list(analysed_records(path))


def test_the_live_capture_filter_takes_the_tubemq_ports():
    from dissector import protocols
    from dissector.capture.live import capture_filter

    bpf = capture_filter({p for proto in protocols.registered() for p in proto.ports})
    assert {"tcp port 8123", "tcp port 8715", "tcp port 6650"} <= set(bpf.split(" or "))


def test_hostile_client_ids_and_topics_are_shown_as_text(tmp_path):
    """Wire strings of TubeMQ (client id, group, topic) reach the timeline and the stats tables escaped: rich
    markup, ANSI escapes and bidi overrides as text, never interpreted."""
    hostile = "[/x][bold]\x1b[31mred\u202egnp.exe\x07"
    request = wire.GET_MESSAGE_REQUEST_C2B.encode({"clientId": hostile, "partitionId": 0, "groupName": hostile,
                                                  "topicName": hostile})
    frame = wire.encode_frame(1, wire.request_content(2, 17, request))
    path = tmp_path / "hostile.pcap"
    write_pcap(path, _packets([frame]))
    for args in ((str(path),), ("stats", str(path))):
        run = _cli(*args)
        assert run.returncode == 0, run.stderr
        assert "\x1b" not in run.stdout and "\u202e" not in run.stdout and "\x07" not in run.stdout
        assert "[/x][bold]" in run.stdout  # the markup shown as the text it is
    run = _cli("stats", str(path), "--json")  # JSON: control characters escaped, the text itself kept
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout
    assert json.loads(run.stdout)["clients"][0]["client_id"] == hostile


def test_each_protocol_has_its_own_largest_frame(tmp_path):
    """A 6 MiB TubeMQ message (its servers take 20 MiB) decodes by default, above Pulsar's 5 MiB limit; a
    --max-frame-size given applies to every protocol."""
    payload = bytes(range(256)) * (6 * 1024 * 4)
    path = tmp_path / "big.pcap"
    frame = _send_frame(payload, None)
    write_pcap(path, _packets([frame[i:i + 60000] for i in range(0, len(frame), 60000)]))
    [big] = frames_of(records(path))
    assert big["messages"][0]["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    assert not big.get("expert")
    run = _cli(str(path), "--json", "--max-frame-size", "1000000")
    got = [json.loads(line) for line in run.stdout.splitlines()]
    assert not [r for r in got if r.get("index")]
    [oversized] = [r for r in got if r["type"] == "OVERSIZED"]
    assert oversized["details"]["field"] == "frame length" and oversized["details"]["size"] > 1000000
