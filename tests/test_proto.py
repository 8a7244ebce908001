"""Protocol definitions: generated modules are current and agree with upstream facts.

The expected values below are written by hand from the upstream definitions, not
read from this project's .proto files, so a wrong number or type in proto/pulsar/ makes
these tests fail: apache/pulsar-client-cpp proto/PulsarApi.proto at commit
983435aae4c2bf9164d9e775f6a11576ad44561d (PR #600, 2026-07-09, synced from apache/pulsar
master) and apache/pulsar pulsar-common/src/main/proto/PulsarMarkers.proto at commit
16c80711fdaa17e399ce6f1a81d58a0e6b35863a (see captures/CORPUS.md).
Where possible the check is made on encoded bytes ("against the wire"), not
only on the descriptor.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from pulsar_pb import PulsarApi_pb2 as api
from pulsar_pb import PulsarMarkers_pb2 as markers
from framebuild import varint

REPO_ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------
# Expected facts (the upstream .proto files named in the module docstring)
# ---------------------------------------------------------------------------

BASE_COMMAND_TYPES = {
    "CONNECT": 2, "CONNECTED": 3, "SUBSCRIBE": 4, "PRODUCER": 5, "SEND": 6,
    "SEND_RECEIPT": 7, "SEND_ERROR": 8, "MESSAGE": 9, "ACK": 10, "FLOW": 11,
    "UNSUBSCRIBE": 12, "SUCCESS": 13, "ERROR": 14, "CLOSE_PRODUCER": 15,
    "CLOSE_CONSUMER": 16, "PRODUCER_SUCCESS": 17, "PING": 18, "PONG": 19,
    "REDELIVER_UNACKNOWLEDGED_MESSAGES": 20, "PARTITIONED_METADATA": 21,
    "PARTITIONED_METADATA_RESPONSE": 22, "LOOKUP": 23, "LOOKUP_RESPONSE": 24,
    "CONSUMER_STATS": 25, "CONSUMER_STATS_RESPONSE": 26, "REACHED_END_OF_TOPIC": 27,
    "SEEK": 28, "GET_LAST_MESSAGE_ID": 29, "GET_LAST_MESSAGE_ID_RESPONSE": 30,
    "ACTIVE_CONSUMER_CHANGE": 31, "GET_TOPICS_OF_NAMESPACE": 32,
    "GET_TOPICS_OF_NAMESPACE_RESPONSE": 33, "GET_SCHEMA": 34, "GET_SCHEMA_RESPONSE": 35,
    "AUTH_CHALLENGE": 36, "AUTH_RESPONSE": 37, "ACK_RESPONSE": 38,
    "GET_OR_CREATE_SCHEMA": 39, "GET_OR_CREATE_SCHEMA_RESPONSE": 40,
    "NEW_TXN": 50, "NEW_TXN_RESPONSE": 51, "ADD_PARTITION_TO_TXN": 52,
    "ADD_PARTITION_TO_TXN_RESPONSE": 53, "ADD_SUBSCRIPTION_TO_TXN": 54,
    "ADD_SUBSCRIPTION_TO_TXN_RESPONSE": 55, "END_TXN": 56, "END_TXN_RESPONSE": 57,
    "END_TXN_ON_PARTITION": 58, "END_TXN_ON_PARTITION_RESPONSE": 59,
    "END_TXN_ON_SUBSCRIPTION": 60, "END_TXN_ON_SUBSCRIPTION_RESPONSE": 61,
    "TC_CLIENT_CONNECT_REQUEST": 62, "TC_CLIENT_CONNECT_RESPONSE": 63,
    "WATCH_TOPIC_LIST": 64, "WATCH_TOPIC_LIST_SUCCESS": 65, "WATCH_TOPIC_UPDATE": 66,
    "WATCH_TOPIC_LIST_CLOSE": 67, "TOPIC_MIGRATED": 68,
    "SCALABLE_TOPIC_LOOKUP": 70, "SCALABLE_TOPIC_UPDATE": 71, "SCALABLE_TOPIC_CLOSE": 72,
    "SCALABLE_TOPIC_SUBSCRIBE": 73, "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE": 74,
    "SCALABLE_TOPIC_ASSIGNMENT_UPDATE": 75, "WATCH_SCALABLE_TOPICS": 76,
    "WATCH_SCALABLE_TOPICS_UPDATE": 77, "WATCH_SCALABLE_TOPICS_CLOSE": 78,
    "WATCH_TC_ASSIGNMENTS": 79, "WATCH_TC_ASSIGNMENTS_UPDATE": 80,
    "WATCH_TC_ASSIGNMENTS_CLOSE": 81,
}
UNUSED_TYPE_NUMBERS = set(range(41, 50)) | {69}

# BaseCommand sub-command fields named in the reference (mixed naming upstream).
BASE_COMMAND_FIELD_NAMES = {
    6: "send", 7: "send_receipt", 20: "redeliverUnacknowledgedMessages",
    21: "partitionMetadata", 23: "lookupTopic", 31: "active_consumer_change",
    68: "topicMigrated", 81: "watchTcAssignmentsClose",
}

R, O, REP = "required", "optional", "repeated"

# number: (name, label, type); type is a scalar name, or an enum/message name.
MESSAGE_METADATA = {
    1: ("producer_name", R, "string"),
    2: ("sequence_id", R, "uint64"),
    3: ("publish_time", R, "uint64"),
    4: ("properties", REP, "KeyValue"),
    5: ("replicated_from", O, "string"),
    6: ("partition_key", O, "string"),
    7: ("replicate_to", REP, "string"),
    8: ("compression", O, "CompressionType"),
    9: ("uncompressed_size", O, "uint32"),
    11: ("num_messages_in_batch", O, "int32"),
    12: ("event_time", O, "uint64"),
    13: ("encryption_keys", REP, "EncryptionKeys"),
    14: ("encryption_algo", O, "string"),
    15: ("encryption_param", O, "bytes"),
    16: ("schema_version", O, "bytes"),
    17: ("partition_key_b64_encoded", O, "bool"),
    18: ("ordering_key", O, "bytes"),
    19: ("deliver_at_time", O, "int64"),
    20: ("marker_type", O, "int32"),
    22: ("txnid_least_bits", O, "uint64"),
    23: ("txnid_most_bits", O, "uint64"),
    24: ("highest_sequence_id", O, "uint64"),
    25: ("null_value", O, "bool"),
    26: ("uuid", O, "string"),
    27: ("num_chunks_from_msg", O, "int32"),
    28: ("total_chunk_msg_size", O, "int32"),
    29: ("chunk_id", O, "int32"),
    30: ("null_partition_key", O, "bool"),
    31: ("compacted_batch_indexes", REP, "int32"),
    32: ("schema_id", O, "bytes"),
    33: ("entry_hash_min", O, "uint32"),
    34: ("entry_hash_max", O, "uint32"),
}

SINGLE_MESSAGE_METADATA = {
    1: ("properties", REP, "KeyValue"),
    2: ("partition_key", O, "string"),
    3: ("payload_size", R, "int32"),
    4: ("compacted_out", O, "bool"),
    5: ("event_time", O, "uint64"),
    6: ("partition_key_b64_encoded", O, "bool"),
    7: ("ordering_key", O, "bytes"),
    8: ("sequence_id", O, "uint64"),
    9: ("null_value", O, "bool"),
    10: ("null_partition_key", O, "bool"),
}

BROKER_ENTRY_METADATA = {
    1: ("broker_timestamp", O, "uint64"),
    2: ("index", O, "uint64"),
}

COMPRESSION_TYPE = {"NONE": 0, "LZ4": 1, "ZLIB": 2, "ZSTD": 3, "SNAPPY": 4}

SERVER_ERROR = {
    "UnknownError": 0, "MetadataError": 1, "PersistenceError": 2,
    "AuthenticationError": 3, "AuthorizationError": 4, "ConsumerBusy": 5,
    "ServiceNotReady": 6, "ProducerBlockedQuotaExceededError": 7,
    "ProducerBlockedQuotaExceededException": 8, "ChecksumError": 9,
    "UnsupportedVersionError": 10, "TopicNotFound": 11, "SubscriptionNotFound": 12,
    "ConsumerNotFound": 13, "TooManyRequests": 14, "TopicTerminatedError": 15,
    "ProducerBusy": 16, "InvalidTopicName": 17, "IncompatibleSchema": 18,
    "ConsumerAssignError": 19, "TransactionCoordinatorNotFound": 20,
    "InvalidTxnStatus": 21, "NotAllowedError": 22, "TransactionConflict": 23,
    "TransactionNotFound": 24, "ProducerFenced": 25,
}

FEATURE_FLAGS = {
    1: "supports_auth_refresh", 2: "supports_broker_entry_metadata",
    3: "supports_partial_producer", 4: "supports_topic_watchers",
    5: "supports_get_partitioned_metadata_without_auto_creation",
    6: "supports_repl_dedup_by_lid_and_eid", 7: "supports_topic_watcher_reconcile",
    8: "supports_scalable_topics", 9: "supports_tc_metadata_discovery",
}

MARKER_TYPE = {
    "UNKNOWN_MARKER": 0,
    "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST": 10,
    "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE": 11,
    "REPLICATED_SUBSCRIPTION_SNAPSHOT": 12,
    "REPLICATED_SUBSCRIPTION_UPDATE": 13,
    "TXN_COMMITTING": 20, "TXN_COMMIT": 21, "TXN_ABORT": 22,
}

MARKER_MESSAGES = {
    "ReplicatedSubscriptionsSnapshotRequest": {1: "snapshot_id", 2: "source_cluster"},
    "ReplicatedSubscriptionsSnapshotResponse": {1: "snapshot_id", 2: "cluster"},
    "ReplicatedSubscriptionsSnapshot": {1: "snapshot_id", 2: "local_message_id", 3: "clusters"},
    "ReplicatedSubscriptionsUpdate": {1: "subscription_name", 2: "clusters"},
    "ClusterMessageId": {1: "cluster", 2: "message_id"},
    "MarkersMessageIdData": {1: "ledger_id", 2: "entry_id"},
}

# ---------------------------------------------------------------------------
# Wire helpers
# ---------------------------------------------------------------------------

WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32 = 0, 1, 2, 5

_SCALAR = {
    # type name: (FieldDescriptor.TYPE_*, wire type, sample value)
    "string": ("TYPE_STRING", WIRE_LEN, "x"),
    "bytes": ("TYPE_BYTES", WIRE_LEN, b"x"),
    "bool": ("TYPE_BOOL", WIRE_VARINT, True),
    "int32": ("TYPE_INT32", WIRE_VARINT, 7),
    "int64": ("TYPE_INT64", WIRE_VARINT, 7),
    "uint32": ("TYPE_UINT32", WIRE_VARINT, 7),
    "uint64": ("TYPE_UINT64", WIRE_VARINT, 7),
}




def read_varint(data: bytes, pos: int = 0) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def label_of(field) -> str:
    # protobuf >= 6 exposes is_required / is_repeated; `label` is deprecated.
    if getattr(field, "is_repeated", False):
        return REP
    return R if getattr(field, "is_required", False) else O


def type_of(field) -> str:
    if field.message_type is not None:
        return field.message_type.name
    if field.enum_type is not None:
        return field.enum_type.name
    for name, (attr, _, _) in _SCALAR.items():
        if field.type == getattr(field, attr):
            return name
    return f"type#{field.type}"


def first_tag(message) -> tuple[int, int]:
    """(field number, wire type) of the first field in the encoded message."""
    tag, _ = read_varint(message.SerializePartialToString())
    return tag >> 3, tag & 7


def check_fields_on_wire(cls, expected: dict) -> None:
    desc = cls.DESCRIPTOR
    assert sorted(desc.fields_by_number) == sorted(expected), f"{desc.name} field numbers"
    for number, (name, label, type_name) in expected.items():
        field = desc.fields_by_number[number]
        assert (field.name, label_of(field), type_of(field)) == (name, label, type_name), (
            f"{desc.name}.{number}"
        )
        # Encode that one field and read its tag back from the bytes.
        msg = cls()
        if type_name in _SCALAR:
            _, wire, sample = _SCALAR[type_name]
            if label == REP:
                getattr(msg, name).append(sample)
            else:
                setattr(msg, name, sample)
        elif field.enum_type is not None:
            wire = WIRE_VARINT
            setattr(msg, name, field.enum_type.values[-1].number)
        else:
            wire = WIRE_LEN
            (getattr(msg, name).add() if label == REP else getattr(msg, name)).SetInParent()
        assert first_tag(msg) == (number, wire), f"{desc.name}.{name} on the wire"


# ---------------------------------------------------------------------------
# (a) staleness of the committed generated modules
# ---------------------------------------------------------------------------

def test_generated_modules_are_current():
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("oracle missing: grpc_tools (grpcio-tools) not installed: cannot regenerate to compare")
    from pulsar_pb import regen

    stale = regen.stale_modules()
    assert not stale, regen.describe_stale(stale)


def test_regen_rewrites_cross_module_imports():
    from pulsar_pb import regen

    src = "import foo_pb2 as foo\nimport PulsarApi_pb2 as PulsarApi__pb2\n"
    assert regen._fix_imports(src) == (
        "import foo_pb2 as foo\nfrom . import PulsarApi_pb2 as PulsarApi__pb2\n"
    )


def test_generated_modules_import_without_grpc_tools():
    code = (
        "import sys\n"
        "sys.modules['grpc_tools'] = None\n"  # make any grpc_tools import fail
        "sys.modules['grpc'] = None\n"
        "from pulsar_pb import PulsarApi_pb2, PulsarMarkers_pb2\n"
        "print(PulsarApi_pb2.BaseCommand.DESCRIPTOR.full_name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT / "tests",
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "pulsar.proto.BaseCommand"
    for name in ("PulsarApi_pb2.py", "PulsarMarkers_pb2.py"):
        text = (REPO_ROOT / "tests" / "pulsar_pb" / name).read_text()
        assert "grpc" not in text
        assert "\nimport PulsarApi_pb2" not in text  # no top-level cross import


# ---------------------------------------------------------------------------
# (b) facts
# ---------------------------------------------------------------------------

def test_base_command_type_values():
    actual = dict(api.BaseCommand.Type.items())
    assert actual == BASE_COMMAND_TYPES
    assert len(actual) == 70
    assert max(actual.values()) == 81
    assert not UNUSED_TYPE_NUMBERS & set(actual.values())


def test_base_command_type_field_is_required_enum_number_1():
    field = api.BaseCommand.DESCRIPTOR.fields_by_number[1]
    assert (field.name, label_of(field), type_of(field)) == ("type", R, "Type")


@pytest.mark.parametrize("name,number", sorted(BASE_COMMAND_TYPES.items(), key=lambda kv: kv[1]))
def test_base_command_subcommand_field_per_type(name, number):
    field = api.BaseCommand.DESCRIPTOR.fields_by_number[number]
    assert label_of(field) == O
    assert field.message_type is not None and field.message_type.name.startswith("Command")
    if number in BASE_COMMAND_FIELD_NAMES:
        assert field.name == BASE_COMMAND_FIELD_NAMES[number]
    # On the wire: 08 <type> <tag of field N, length-delimited> 00 (empty sub-command).
    cmd = api.BaseCommand(type=number)
    getattr(cmd, field.name).SetInParent()
    assert cmd.SerializePartialToString() == (
        b"\x08" + varint(number) + varint(number << 3 | WIRE_LEN) + b"\x00"
    )


def test_base_command_has_no_field_for_unused_numbers():
    numbers = set(api.BaseCommand.DESCRIPTOR.fields_by_number)
    assert numbers == {1} | set(BASE_COMMAND_TYPES.values())
    assert not numbers & UNUSED_TYPE_NUMBERS


def test_message_metadata_fields():
    check_fields_on_wire(api.MessageMetadata, MESSAGE_METADATA)
    md = api.MessageMetadata()
    assert md.compression == api.NONE  # default NONE
    assert md.num_messages_in_batch == 1  # default 1, but absent
    assert not md.HasField("num_messages_in_batch")


def test_single_message_metadata_fields():
    check_fields_on_wire(api.SingleMessageMetadata, SINGLE_MESSAGE_METADATA)


def test_broker_entry_metadata_fields():
    check_fields_on_wire(api.BrokerEntryMetadata, BROKER_ENTRY_METADATA)


def test_compression_type():
    assert dict(api.CompressionType.items()) == COMPRESSION_TYPE


def test_server_error():
    assert dict(api.ServerError.items()) == SERVER_ERROR
    assert len(SERVER_ERROR) == 26


def test_protocol_version():
    assert dict(api.ProtocolVersion.items()) == {f"v{n}": n for n in range(22)}
    assert max(api.ProtocolVersion.values()) == 21


def test_feature_flags():
    fields = api.FeatureFlags.DESCRIPTOR.fields_by_number
    assert {n: f.name for n, f in fields.items()} == FEATURE_FLAGS
    assert all(label_of(f) == O and type_of(f) == "bool" for f in fields.values())


def test_marker_types_and_messages():
    assert dict(markers.MarkerType.items()) == MARKER_TYPE
    for msg_name, expected in MARKER_MESSAGES.items():
        desc = markers.DESCRIPTOR.message_types_by_name[msg_name]
        assert {n: f.name for n, f in desc.fields_by_number.items()} == expected, msg_name
    assert markers.DESCRIPTOR.package == api.DESCRIPTOR.package == "pulsar.proto"


def test_marker_type_values_fit_message_metadata():
    md = api.MessageMetadata(producer_name="pulsar.marker", sequence_id=0, publish_time=1,
                             marker_type=markers.REPLICATED_SUBSCRIPTION_SNAPSHOT)
    parsed = api.MessageMetadata.FromString(md.SerializeToString())
    assert markers.MarkerType.Name(parsed.marker_type) == "REPLICATED_SUBSCRIPTION_SNAPSHOT"


# ---------------------------------------------------------------------------
# (c) round trip
# ---------------------------------------------------------------------------

def test_send_round_trip():
    cmd = api.BaseCommand(type=api.BaseCommand.SEND)
    cmd.send.producer_id = 3
    cmd.send.sequence_id = 2**64 - 1
    data = cmd.SerializeToString()
    # type=6, then field 6 (send) = {1: 3, 2: max uint64}
    assert data[:2] == b"\x08\x06"
    assert data[2] == (6 << 3 | WIRE_LEN)
    back = api.BaseCommand.FromString(data)
    assert back.type == api.BaseCommand.SEND
    assert back.HasField("send")
    assert (back.send.producer_id, back.send.sequence_id) == (3, 2**64 - 1)
    assert back.send.num_messages == 1  # default, not on the wire
    assert back == cmd


# ---------------------------------------------------------------------------
# (d) known pitfalls of the Python runtime (reference §1.9)
# ---------------------------------------------------------------------------

def test_unknown_command_type_is_not_reported_by_the_parser():
    """A future command type (99) parses without error, but proto2's closed enum
    drops the value into unknown fields: HasField('type') is False and .type
    reads the enum's first value, CONNECT. The dissector therefore reads the
    type varint after tag 0x08 itself."""
    raw = b"\x08" + varint(99)
    cmd = api.BaseCommand.FromString(raw)
    assert not cmd.HasField("type")
    assert cmd.type == api.BaseCommand.CONNECT  # misleading default
    assert not cmd.IsInitialized()
    assert cmd.SerializePartialToString() == raw  # kept as an unknown field
    # Reading the varint ourselves recovers the real value.
    assert raw[0] == (1 << 3 | WIRE_VARINT)
    assert read_varint(raw, 1)[0] == 99


def test_required_fields_are_not_enforced_by_parsing():
    partial = api.BaseCommand(type=api.BaseCommand.SEND)
    partial.send.producer_id = 1  # sequence_id (required) missing
    cmd = api.BaseCommand.FromString(partial.SerializePartialToString())
    assert cmd.send.producer_id == 1
    assert not cmd.IsInitialized()
    assert cmd.FindInitializationErrors() == ["send.sequence_id"]
