"""Tests of the TubeMQ test encoder (tests/tubemq_wire.py) itself, before anything relies on its captures.

Its output is read back by means that share nothing with it: frames and TCP streams by a reader written here,
protobufs by Google's runtime with classes compiled from proto/tubemq (grpc_tools' protoc), checksums by zlib
values known from elsewhere. A wrong field number, a block that is not where the manifest says, a checksum
over the wrong bytes: each makes a test here fail.
"""

from __future__ import annotations

import hashlib
import importlib.util
import struct
import zlib
from pathlib import Path

import pytest

import pcapgen
import tubemq_wire as tw
from pb_oracle import message_to_dict

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto" / "tubemq"
SHIPPED = ROOT / "captures" / "tubemq"
PROTO_FILES = ("RPC.proto", "MasterService.proto", "BrokerService.proto")


# ----------------------------------------------------------------------------------------------- oracles
@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """Message classes compiled from proto/tubemq by protoc (grpc_tools), looked up by upstream name."""
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("oracle missing: grpc_tools (grpcio-tools) not installed: cannot compile proto/tubemq")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("tubemq_proto") / "tubemq.fds"
    status = protoc.main(["protoc", f"-I{PROTO_DIR}", f"--descriptor_set_out={out}", "--include_imports",
                          *(str(PROTO_DIR / f) for f in PROTO_FILES)])
    assert status == 0, "protoc could not compile proto/tubemq"
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        assert not f.package, f"{f.name} declares a package; upstream has none"
        pool.Add(f)

    def message_class(name: str):
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))

    return message_class


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it); the value as an unsigned 64-bit number."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def read_frame(stream: bytes, pos: int = 0) -> tuple[int, list[bytes], int]:
    """(serial, blocks, end) of the frame starting at pos, read as the Go client reads one."""
    token, serial, count = struct.unpack_from(">III", stream, pos)
    assert token == 0xFF7FF4FE, f"no begin token at {pos}"
    pos += 12
    blocks = []
    for _ in range(count):
        (size,) = struct.unpack_from(">I", stream, pos)
        blocks.append(stream[pos + 4:pos + 4 + size])
        assert len(blocks[-1]) == size, "block runs past the data"
        pos += 4 + size
    return serial, blocks, pos


def split_delimited(content: bytes) -> list[bytes]:
    """The length-delimited messages a frame's block bytes hold, in order."""
    parts, pos = [], 0
    while pos < len(content):
        size, pos = read_varint(content, pos)
        parts.append(content[pos:pos + size])
        assert len(parts[-1]) == size, "delimited message runs past the content"
        pos += size
    return parts


def varint_spans(message: bytes, base: int = 0, nested: dict | None = None) -> list[tuple[int, int]]:
    """(start, end) of every varint in a protobuf message, keys and lengths included; ``nested`` maps field
    numbers whose bytes are themselves a message to the nested map of that message."""
    spans, pos = [], 0
    while pos < len(message):
        start = pos
        key, pos = read_varint(message, pos)
        spans.append((base + start, base + pos))
        number, wire = key >> 3, key & 7
        if wire == 0:
            start = pos
            _, pos = read_varint(message, pos)
            spans.append((base + start, base + pos))
        elif wire == 2:
            start = pos
            size, pos = read_varint(message, pos)
            spans.append((base + start, base + pos))
            if nested and number in nested:
                spans += varint_spans(message[pos:pos + size], base + pos, nested[number])
            pos += size
        else:
            raise AssertionError(f"wire type {wire}: the TubeMQ messages use only varints and bytes")
    return spans


def tcp_streams(pcap: Path) -> dict[tuple, dict]:
    """Per (src, sport, dst, dport): captured payload in sequence order, packet numbers, SYN seen. Reads the
    Ethernet/IPv4/TCP headers by offset (no shared code with the encoder's packet builder)."""
    streams: dict[tuple, dict] = {}
    with open(pcap, "rb") as f:
        _, endian, linktype = pcapgen.read_pcap_header(f)
        assert linktype == 1
        for number, (_, frame) in enumerate(pcapgen.iter_pcap_records(f, endian), start=1):
            ip = frame[14:]
            ihl = (ip[0] & 0x0F) * 4
            total = struct.unpack_from(">H", ip, 2)[0]
            tcp = ip[ihl:total]
            sport, dport, seq = struct.unpack_from(">HHI", tcp)
            flags = tcp[13]
            payload = tcp[(tcp[12] >> 4) * 4:]
            key = (ip[12:16], sport, ip[16:20], dport)
            s = streams.setdefault(key, {"data": b"", "next": None, "packets": [], "ranges": [], "syn": False})
            if flags & 0x02:
                s["syn"] = True
                s["next"] = seq + 1
                continue
            if not payload:
                continue
            if s["next"] is not None:
                assert seq == s["next"], f"packet {number}: sequence gap or overlap"
            s["next"] = seq + len(payload)
            s["ranges"].append((number, len(s["data"]), len(s["data"]) + len(payload)))
            s["data"] += payload
    return streams


# ----------------------------------------------------------------------------------------- scenario output
@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("tubemq_captures")
    return out, tw.write_all(out)


def stream_of(streams: dict, manifest: dict, record: dict) -> dict:
    conn = manifest["connections"][record["connection"]]
    client, server = conn["client"].rsplit(":", 1), conn["server"].rsplit(":", 1)
    c = (bytes(map(int, client[0].split("."))), int(client[1]))
    s = (bytes(map(int, server[0].split("."))), int(server[1]))
    key = (*c, *s) if record["direction"] == tw.TO_SERVER else (*s, *c)
    return streams[key]


def complete_frames(manifest: dict):
    return [r for r in manifest["frames"] if r["captured"] == "complete"]


def test_every_scenario_writes_a_pcap_and_a_manifest(written):
    out, manifests = written
    assert set(manifests) == set(tw.SCENARIOS)
    for name, manifest in manifests.items():
        assert (out / manifest["pcap"]).stat().st_size > 24
        assert (out / f"tubemq_{name}.json").is_file()
        assert manifest["summary"]["frames_complete"] > 0


def test_frames_sit_where_the_manifest_says_and_tile_the_streams(written):
    """Each direction's captured bytes, from its first complete frame on, are exactly the complete frames
    back to back; serial, list size and block sizes read back as recorded; every block but the last of a
    default frame is 8192 bytes."""
    out, manifests = written
    for manifest in manifests.values():
        streams = tcp_streams(out / manifest["pcap"])
        by_stream: dict[int, list[dict]] = {}
        for record in complete_frames(manifest):
            stream = stream_of(streams, manifest, record)
            serial, blocks, end = read_frame(stream["data"], record["stream_offset"])
            assert serial == record["serial"]
            assert len(blocks) == record["list_size"]
            assert [len(b) for b in blocks] == record["block_sizes"]
            assert end - record["stream_offset"] == record["frame_size"]
            assert sum(map(len, blocks)) == record["content_size"]
            by_stream.setdefault(id(stream), []).append(record)
            covering = [n for n, s, e in stream["ranges"] if s < end and e > record["stream_offset"]]
            assert record["packets"] == [covering[0], covering[-1]], manifest["scenario"]
        for records in by_stream.values():
            stream = stream_of(streams, manifest, records[0])
            offsets = [r["stream_offset"] for r in records]
            ends = [r["stream_offset"] + r["frame_size"] for r in records]
            assert offsets[1:] == ends[:-1], f"{manifest['scenario']}: frames do not follow each other"
            assert ends[-1] == len(stream["data"]), f"{manifest['scenario']}: bytes after the last frame"


def test_default_blocks_are_8192_bytes_but_the_last(written):
    _, manifests = written
    big = [r for m in manifests.values() for r in complete_frames(m) if r["content_size"] > tw.MAX_BLOCK_SIZE]
    assert len(big) >= 2, "the 20 KiB messages (producer_broker, segmented) must make multi-block frames"
    for r in big:
        if r.get("aimed_splits"):
            continue
        assert r["list_size"] == -(-r["content_size"] // 8192)
        assert all(size == 8192 for size in r["block_sizes"][:-1])
        assert 0 < r["block_sizes"][-1] <= 8192


def test_frames_parse_with_the_protobuf_runtime_and_match_the_manifest(written, pb):
    """The three delimited messages parse with classes compiled from proto/tubemq, hold no field the .proto
    does not know, re-serialise to the very bytes sent (so field order and varint forms are protobuf's), and
    the service message reads back as the manifest's command."""
    out, manifests = written
    seen_types = set()
    for manifest in manifests.values():
        streams = tcp_streams(out / manifest["pcap"])
        for record in complete_frames(manifest):
            stream = stream_of(streams, manifest, record)
            _, blocks, _ = read_frame(stream["data"], record["stream_offset"])
            parts = split_delimited(b"".join(blocks))
            assert len(parts) == 3
            conn = pb("RpcConnHeader").FromString(parts[0])
            if record["flag"] == "request":
                assert conn.flag == 0
                header = pb("RequestHeader").FromString(parts[1])
                assert header.serviceType == record["service_type"]
                assert header.protocolVer == 3
                body = pb("RequestBody").FromString(parts[2])
                assert body.method == record["method"]
                inner = body.request
            else:
                assert conn.flag == 1
                header = pb("ResponseHeader").FromString(parts[1])
                assert not header.HasField("serviceType"), "servers set only status and protocolVer"
                assert pb("ResponseHeader").Status.Name(header.status) == record["status"]
                if record["status"] != "SUCCESS":
                    body = pb("RspExceptionBody").FromString(parts[2])
                    assert message_to_dict(body) == record["command"]
                    continue
                body = pb("RspResponseBody").FromString(parts[2])
                assert body.method == record["method"]
                inner = body.data
            for part, name in zip(parts, ["RpcConnHeader", None, None]):
                if name:
                    assert pb(name).FromString(part).SerializeToString() == part
            if record["type"] is None:      # a method id without a message type: opaque bytes
                assert record["command"] is None
                continue
            message = pb(record["type"]).FromString(inner)
            assert message.IsInitialized(), f"{record['type']}: a required field is missing"
            assert message.SerializeToString() == inner, f"{record['type']}: not protobuf's own encoding"
            assert message_to_dict(message) == record["command"], record["type"]
            seen_types.add(record["type"])
    wanted = {"RegisterRequestP2M", "RegisterResponseM2P", "HeartRequestP2M", "HeartResponseM2P",
              "CloseRequestP2M", "CloseResponseM2P", "RegisterRequestC2M", "RegisterResponseM2C",
              "HeartRequestC2M", "HeartResponseM2C", "SendMessageRequestP2B", "SendMessageResponseB2P",
              "RegisterRequestC2B", "RegisterResponseB2C", "GetMessageRequestC2B", "GetMessageResponseB2C",
              "CommitOffsetRequestC2B", "CommitOffsetResponseB2C", "HeartBeatRequestC2B", "HeartBeatResponseB2C",
              "RegisterRequestB2M", "RegisterResponseM2B", "HeartRequestB2M", "HeartResponseM2B",
              "CloseRequestB2M", "CloseResponseM2B", "RegisterRequestC2MV2", "RegisterResponseM2CV2",
              "HeartRequestC2MV2", "HeartResponseM2CV2", "GetPartMetaRequestC2M", "GetPartMetaResponseM2C"}
    assert wanted <= seen_types, f"never sent: {sorted(wanted - seen_types)}"


def test_encoder_tables_equal_the_proto_files(pb):
    """The encoder's field tables and proto/tubemq were transcribed separately: every row must agree."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    kinds = {FD.TYPE_INT32: tw.INT32, FD.TYPE_INT64: tw.INT64, FD.TYPE_BOOL: tw.BOOL, FD.TYPE_ENUM: tw.ENUM,
             FD.TYPE_STRING: tw.STRING, FD.TYPE_BYTES: tw.BYTES}
    tables = [v for v in vars(tw).values() if isinstance(v, tw.Message)]
    assert len(tables) >= 50
    for table in tables:
        desc = pb(table.name).DESCRIPTOR
        assert [f.name for f in desc.fields] == [f.name for f in table.fields], table.name
        for row, fd in zip(table.fields, desc.fields):
            assert row.number == fd.number, f"{table.name}.{row.name}"
            if fd.type == FD.TYPE_MESSAGE:
                assert row.kind.name == fd.message_type.name, f"{table.name}.{row.name}"
            else:
                assert row.kind == kinds[fd.type], f"{table.name}.{row.name}"
            label = tw.REPEATED if fd.is_repeated else tw.REQUIRED if fd.is_required else tw.OPTIONAL
            assert row.label == label, f"{table.name}.{row.name}"


def test_carried_messages_read_back_with_attributes_and_checksums(written, pb):
    """Message data split by the rule (flag & 1: [attrLen i32 BE][attribute][payload]) gives the manifest's
    payload hash, size and attributes; the checksum verdict is CRC32 of the whole data masked to 31 bits."""
    out, manifests = written
    verdicts = []
    for manifest in manifests.values():
        streams = tcp_streams(out / manifest["pcap"])
        for record in complete_frames(manifest):
            if not record["messages"]:
                continue
            _, blocks, _ = read_frame(stream_of(streams, manifest, record)["data"], record["stream_offset"])
            parts = split_delimited(b"".join(blocks))
            if record["type"] == "SendMessageRequestP2B":
                inner = pb("SendMessageRequestP2B").FromString(pb("RequestBody").FromString(parts[2]).request)
                carried = [(inner.data, inner.flag, inner.checkSum, None)]
            else:
                inner = pb("GetMessageResponseB2C").FromString(pb("RspResponseBody").FromString(parts[2]).data)
                carried = [(m.payLoadData, m.flag, m.checkSum, m.messageId) for m in inner.messages]
            assert len(carried) == len(record["messages"])
            for (data, flag, checksum, message_id), expected in zip(carried, record["messages"]):
                attribute, payload = None, data
                if flag & 1:
                    (size,) = struct.unpack_from(">i", data)
                    attribute, payload = data[4:4 + size].decode(), data[4 + size:]
                assert attribute == expected["attributes"]
                assert hashlib.sha256(payload).hexdigest() == expected["payload_sha256"]
                assert len(payload) == expected["payload_size"]
                assert message_id == expected["message_id"]
                assert checksum == expected["checksum_sent"]
                valid = None if checksum == -1 else checksum == zlib.crc32(data) & 0x7FFFFFFF
                assert valid == expected["checksum_valid"]
                verdicts.append(valid)
    # producers send -1; brokers send good checksums and, once, a bad one
    assert None in verdicts and True in verdicts and verdicts.count(False) >= 1


def test_producer_sends_checksum_minus_one_as_ten_byte_varint():
    body = tw.SEND_MESSAGE_REQUEST_P2B.encode({"clientId": "c", "topicName": "t", "partitionId": 0, "data": b"x",
                                               "flag": 0, "checkSum": -1, "sentAddr": 0})
    assert bytes([6 << 3]) + b"\xff" * 9 + b"\x01" in body


# ---------------------------------------------------------------------------------------- the pieces alone
@pytest.mark.parametrize("data, crc32", [
    (b"", 0x00000000),
    (b"123456789", 0xCBF43926),              # the CRC-32 (zip) check value
    (b"The quick brown fox jumps over the lazy dog", 0x414FA339),
])
def test_checksum_is_zip_crc32_masked_to_31_bits(data, crc32):
    assert tw.message_checksum(data) == crc32 & 0x7FFFFFFF
    assert tw.message_checksum(data) == zlib.crc32(data) & 0x7FFFFFFF


def test_checksum_is_not_crc32c():
    # CRC-32C (Castagnoli, Pulsar's) of "123456789" is 0xE3069283; TubeMQ's must not be that
    assert tw.message_checksum(b"123456789") not in (0xE3069283, 0xE3069283 & 0x7FFFFFFF)
    assert tw.message_checksum(b"123456789") == 0x4BF43926


@pytest.mark.parametrize("value, wire", [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (-1, b"\xff" * 9 + b"\x01"), (-(1 << 31), b"\x80\x80\x80\x80\xf8\xff\xff\xff\xff\x01"),
    ((1 << 63) - 1, b"\xff" * 8 + b"\x7f"),
])
def test_varint_known_encodings(value, wire):
    assert tw.varint(value) == wire


def test_message_data_layout():
    data, flag = tw.message_data(b"payload", "k=v")
    assert (data, flag) == (b"\x00\x00\x00\x03k=vpayload", 1)
    assert tw.message_data(b"payload", None) == (b"payload", 0)
    assert tw.message_data(b"p", "") == (b"\x00\x00\x00\x00p", 1)     # an empty attribute still sets the flag


def test_frame_layout_by_hand():
    frame = tw.encode_frame(0x01020304, b"abcdefghij", block_sizes=[3, 0, 4])
    assert frame == (b"\xff\x7f\xf4\xfe" b"\x01\x02\x03\x04" b"\x00\x00\x00\x04"
                     b"\x00\x00\x00\x03abc" b"\x00\x00\x00\x00" b"\x00\x00\x00\x04defg" b"\x00\x00\x00\x03hij")


def test_block_size_options():
    data = bytes(20000)
    assert [len(b) for b in tw.split_into_blocks(data)] == [8192, 8192, 3616]
    assert [len(b) for b in tw.split_into_blocks(data[:8192])] == [8192]
    assert [len(b) for b in tw.split_into_blocks(b"x" * 10, 3)] == [3, 3, 3, 1]
    assert tw.split_into_blocks(b"") == [b""]
    with pytest.raises(ValueError):
        tw.split_into_blocks(b"abc", [2, 2])


def test_encoder_refuses_what_would_silently_lose_fields():
    with pytest.raises(KeyError):
        tw.CLOSE_REQUEST_P2M.encode({"clientId": "c", "clientID": "typo"})
    with pytest.raises(ValueError):
        tw.CLOSE_REQUEST_P2M.encode({})                               # clientId is required
    with pytest.raises(ValueError):
        tw.RPC_CONN_HEADER.encode({"flag": 1 << 31})                  # beyond int32
    with pytest.raises(TypeError):
        tw.REGISTER_REQUEST_P2M.encode({"clientId": "c", "topicList": "t", "brokerCheckSum": 0, "hostName": "h"})


def test_block_boundaries_really_split_varints(written):
    """In tubemq_block_splits the aimed boundaries fall strictly inside a varint (found by walking the
    protobufs here), and the 1-byte-block frame cuts every multi-byte varint it has."""
    out, manifests = written
    manifest = manifests["block_splits"]
    streams = tcp_streams(out / manifest["pcap"])
    aimed_frames = [r for r in manifest["frames"] if r.get("aimed_splits")]
    assert len(aimed_frames) == 1
    for record in complete_frames(manifest):
        if record["flag"] != "request":
            continue
        _, blocks, _ = read_frame(stream_of(streams, manifest, record)["data"], record["stream_offset"])
        content = b"".join(blocks)
        boundaries, pos = set(), 0
        for block in blocks[:-1]:
            pos += len(block)
            boundaries.add(pos)
        spans, pos = [], 0
        # the three delimited messages; inside RequestBody, field 3 (request) is a SendMessageRequestP2B
        for nested in ({}, {}, {3: {}}):
            size, after = read_varint(content, pos)
            spans.append((pos, after))
            spans += varint_spans(content[after:after + size], after, nested)
            pos = after + size
        cut_varints = [(s, e) for s, e in spans if any(s < b < e for b in boundaries)]
        if record.get("aimed_splits"):
            assert 0 in record["block_sizes"], "the aimed frame also carries an empty block"
            for split in record["aimed_splits"]:
                assert split["offset"] in boundaries
                assert any(s < split["offset"] < e for s, e in spans), split
            assert any(e - s == 10 for s, e in cut_varints), "the 10-byte varint of -1 is cut"
        else:
            assert record["block_sizes"] == [1] * record["content_size"]
            assert cut_varints == [(s, e) for s, e in spans if e - s > 1] and cut_varints


def test_segmented_scenario_cuts_frames_across_packets(written):
    out, manifests = written
    manifest = manifests["segmented"]
    streams = tcp_streams(out / manifest["pcap"])
    records = complete_frames(manifest)
    assert all(r["packets"][0] < r["packets"][1] for r in records if r["flag"] == "request")
    # a packet that ends one frame and starts the next
    shared = [(a, b) for a, b in zip(records, records[1:])
              if a["direction"] == b["direction"] and a["packets"][1] == b["packets"][0]]
    assert len(shared) >= 2
    big = max(records, key=lambda r: r["frame_size"])
    ranges = stream_of(streams, manifest, big)["ranges"]
    length_field = big["stream_offset"] + 12 + 4 + 8192      # the second block's 4-byte length
    assert any(s < length_field + 2 == e for _, s, e in ranges) or \
        any(length_field < e < length_field + 4 for _, s, e in ranges), "second block length not split"
    # the very first request's token, serial and list size arrive in 1, 2, 9 bytes
    assert [e - s for _, s, e in ranges[:3]] == [1, 2, 9]


@pytest.mark.parametrize("name", ["midstream", "midstream_false_token"])
def test_midstream_capture_starts_inside_frames(written, name):
    """No SYN; neither direction starts with the begin token; the first complete frame of each direction is
    at the first token that starts a sane frame (list size within the server's limit)."""
    out, manifests = written
    manifest = manifests[name]
    streams = tcp_streams(out / manifest["pcap"])
    assert not any(s["syn"] for s in streams.values())
    token = struct.pack(">I", tw.BEGIN_TOKEN)
    first = {}
    for record in complete_frames(manifest):
        first.setdefault(record["direction"], record)
    assert sum(1 for r in manifest["frames"] if r["captured"] == "partial") == 2
    for direction, record in first.items():
        data = stream_of(streams, manifest, record)["data"]
        assert not data.startswith(token)
        pos = data.find(token)
        while 0 <= pos and struct.unpack_from(">I", data, pos + 8)[0] > tw.MAX_LIST_SIZE:
            pos = data.find(token, pos + 1)          # a false start: skip it, as a decoder must
        assert pos == record["stream_offset"], direction
    false_starts = [s["data"].find(token) < min(r["stream_offset"] for r in complete_frames(manifest)
                                                 if stream_of(streams, manifest, r) is s)
                    for s in streams.values()]
    assert any(false_starts) == (name == "midstream_false_token")


def test_pairing_expectations(written):
    _, manifests = written
    summary = manifests["pairing_anomalies"]["summary"]
    assert summary["responses_without_request"] == [[0, 77]]
    assert summary["duplicate_serials"] == [[0, 3]]
    assert [0, 4] in summary["unanswered"]
    assert manifests["standby_master"]["summary"]["exceptions"] == [tw.STANDBY_EXCEPTION]
    assert manifests["consumer_broker"]["summary"]["bad_checksums"] == [1002]
    assert manifests["consumer_broker"]["summary"]["error_codes"] == [404]
    answered = [r for r in complete_frames(manifests["producer_master"]) if r["flag"] == "response"]
    assert all(r["answers"] is not None and r["latency_ms"] > 0 for r in answered)


def test_rebalance_event_in_heartbeat_response(written):
    _, manifests = written
    responses = [r for r in complete_frames(manifests["consumer_master"]) if r["type"] == "HeartResponseM2C"]
    events = [r["command"]["event"] for r in responses if "event" in r["command"]]
    assert len(events) == 1 and events[0]["opType"] == tw.EVENT_ONLY_CONNECT
    assert events[0]["subscribeInfo"][0].endswith("@billing#1:192.168.7.11:8123#orders:0")


def test_scenarios_are_reproducible_and_shipped_captures_are_current(tmp_path, written):
    """Building again gives the same bytes, and captures/tubemq holds exactly what the encoder makes now."""
    out, manifests = written
    tw.write_scenario("segmented", tmp_path)
    assert (tmp_path / "tubemq_segmented.pcap").read_bytes() == (out / "tubemq_segmented.pcap").read_bytes()
    for manifest in manifests.values():
        for name in (manifest["pcap"], f"{manifest['scenario']}.json"):
            shipped = SHIPPED / name
            assert shipped.is_file(), f"captures/tubemq/{name} missing: run python tests/tubemq_wire.py captures/tubemq"
            assert shipped.read_bytes() == (out / name).read_bytes(), \
                f"captures/tubemq/{name} is stale: run python tests/tubemq_wire.py captures/tubemq"


def test_cli_writes_every_scenario(tmp_path):
    assert tw.main([str(tmp_path)]) == 0
    assert len(list(tmp_path.glob("*.pcap"))) == len(tw.SCENARIOS)
    assert len(list(tmp_path.glob("*.json"))) == len(tw.SCENARIOS)


def test_conversation_builder_cuts_segments_and_skips_the_start():
    exchanges = [(tw.TO_SERVER, b"A" * 10), (tw.TO_CLIENT, b"B" * 7), (tw.TO_SERVER, b"C" * 5)]
    packets = tw.conversation_packets(exchanges, ("10.0.0.1", 40000), ("10.0.0.2", 8123), segment_sizes=[3],
                                      skip_first_bytes=12, handshake=False, close=False)
    payloads = []
    for _, frame in packets:
        ip = frame[14:]
        tcp = ip[(ip[0] & 0x0F) * 4:]
        assert not tcp[13] & 0x02, "no SYN when the handshake is left out"
        payloads.append((struct.unpack_from(">H", tcp)[0], tcp[(tcp[12] >> 4) * 4:]))
    # 10 client bytes and 2 server bytes skipped; each exchange cut as 3 bytes then the rest
    assert payloads == [(8123, b"BBB"), (8123, b"BB"), (40000, b"CCC"), (40000, b"CC")]


def test_encoder_stays_independent_of_the_decoder():
    """Importing the encoder loads neither the decoder, nor the core, nor any protobuf runtime or generated
    module: it cannot borrow the decoder's tables by accident."""
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, 'tests'); import tubemq_wire\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dissector', 'pulsar_dissect_core', 'google')"
            " or m.endswith('_pb2')]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
