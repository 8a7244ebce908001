//! Pulsar frames without a payload section, decoded by `pulsar_dissect_engine::protocols::pulsar::decode`: the frame's sizes, the
//! BaseCommand and its sub-command of many types, against bytes encoded by prost-reflect (an independent
//! protobuf runtime) and the JSON contract's values derived from the same DynamicMessage.

use pulsar_dissect_engine::protocols::pulsar::decode;
use pulsar_dissect_engine::value::Value;

mod pulsar_support;

use prost_reflect::{DynamicMessage, Kind, ReflectMessage};
use pulsar_support::*;

/// Encode the sub-command, frame it, decode it; check the type's name, the command against the encoder's
/// message, and that nothing was found wrong.
fn round_trip(type_name: &str, fields: &[(&str, PV)]) -> Value {
    let cmd = sub_command(type_name, fields);
    let d = full(&simple_frame(&base_command(type_name, &cmd)));
    assert_eq!(d.type_name.as_str(), type_name);
    assert!(d.findings.is_empty(), "{type_name}: {:?}", d.findings);
    let command = d.command.expect("a command");
    assert_eq!(command, expected(&cmd), "{type_name}");
    command
}

/// The BaseCommand's sub-command after the prost-reflect runtime parsed `base` (its merge rules).
fn runtime_sub_command(base: &[u8], type_name: &str) -> DynamicMessage {
    let parsed = DynamicMessage::decode(descriptor("BaseCommand"), base).expect("the runtime parses it");
    match &*parsed.get_field(&sub_field(type_name)) {
        PV::Message(m) => m.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_command_type_of_the_schema_decodes_as_the_runtime_encoded_it() {
    let base = descriptor("BaseCommand");
    let Kind::Enum(types) = base.get_field_by_name("type").unwrap().kind() else { panic!("an enum") };
    let mut checked = 0;
    for t in types.values() {
        let Some(field) = base.get_field(t.number() as u32) else { continue };
        let Kind::Message(sub_type) = field.kind() else { continue };
        let cmd = required_filled(&sub_type);
        let d = full(&simple_frame(&base_command(t.name(), &cmd)));
        assert_eq!(d.type_name.as_str(), t.name());
        assert_eq!(d.command.as_ref(), Some(&expected(&cmd)), "{}", t.name());
        if t.name() != "SEND" && t.name() != "MESSAGE" {
            // (SEND and MESSAGE lack their payload section here)
            assert!(d.findings.is_empty(), "{}: {:?}", t.name(), d.findings);
        }
        checked += 1;
    }
    // the reference notes count 70 command types, each with its sub-command field
    assert_eq!(checked, 70);
}

#[test]
fn connect_with_auth_data_and_feature_flags() {
    let flags =
        msg("FeatureFlags", &[("supports_auth_refresh", PV::Bool(true)), ("supports_topic_watchers", PV::Bool(false))]);
    let c = round_trip(
        "CONNECT",
        &[
            ("client_version", st("Pulsar-CPP-v3.5.0")),
            ("auth_data", by(b"\x00token\xff")),
            ("protocol_version", int(21)),
            ("auth_method_name", st("token")),
            ("feature_flags", sub(flags)),
        ],
    );
    // bytes are base64 in the contract: "AHRva2Vu/w==" is base64 of 00 't' 'o' 'k' 'e' 'n' ff
    assert_eq!(c.get("auth_data").and_then(Value::as_str), Some("AHRva2Vu/w=="));
    // a flag sent as false is present: proto2 keeps explicit presence
    assert_eq!(c.get("feature_flags").and_then(|f| f.get("supports_topic_watchers")), Some(&Value::Bool(false)));
}

#[test]
fn connect_fields_come_in_field_number_order_not_wire_order() {
    // auth_method_name is field 5 but declared before auth_data (3): the contract orders by number
    let c =
        round_trip("CONNECT", &[("client_version", st("v")), ("auth_method_name", st("m")), ("auth_data", by(b"d"))]);
    let keys: Vec<&str> = c.as_map().unwrap().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["client_version", "auth_data", "auth_method_name"]);
}

#[test]
fn connected_with_max_message_size() {
    round_trip(
        "CONNECTED",
        &[
            ("server_version", st("Pulsar Server4.0.0")),
            ("protocol_version", int(21)),
            ("max_message_size", int(5 << 20)),
        ],
    );
}

#[test]
fn subscribe_with_enums_schema_and_key_shared_meta() {
    let schema = msg("Schema", &[("name", st("s")), ("schema_data", by(b"{}")), ("type", st("Json"))]);
    let range = msg("IntRange", &[("start", int(0)), ("end", int(32767))]);
    let ks = msg("KeySharedMeta", &[("keySharedMode", st("STICKY")), ("hashRanges", list(vec![sub(range)]))]);
    let c = round_trip(
        "SUBSCRIBE",
        &[
            ("topic", st("persistent://public/default/t")),
            ("subscription", st("sub")),
            ("subType", st("Key_Shared")),
            ("consumer_id", int(1)),
            ("request_id", int(2)),
            ("durable", PV::Bool(false)),
            ("schema", sub(schema)),
            ("initialPosition", st("Earliest")),
            ("keySharedMeta", sub(ks)),
        ],
    );
    assert_eq!(c.get("subType").and_then(Value::as_str), Some("Key_Shared"));
    assert_eq!(c.get("schema").and_then(|s| s.get("type")).and_then(Value::as_str), Some("Json"));
}

#[test]
fn subscribe_metadata_key_values_stay_a_list_of_messages() {
    let kv = |k: &str, v: &str| sub(msg("KeyValue", &[("key", st(k)), ("value", st(v))]));
    let c = round_trip(
        "SUBSCRIBE",
        &[
            ("topic", st("t")),
            ("subscription", st("s")),
            ("subType", st("Shared")),
            ("consumer_id", int(1)),
            ("request_id", int(2)),
            ("metadata", list(vec![kv("a", "1"), kv("a", "2")])),
        ],
    );
    // unlike message properties, command KeyValue lists are not folded into a map: both entries stay
    assert_eq!(c.get("metadata").and_then(Value::as_list).map(<[Value]>::len), Some(2));
}

#[test]
fn producer_with_access_mode_and_metadata() {
    round_trip(
        "PRODUCER",
        &[
            ("topic", st("t")),
            ("producer_id", int(5)),
            ("request_id", int(6)),
            ("producer_name", st("standalone-0-1")),
            ("metadata", list(vec![sub(msg("KeyValue", &[("key", st("k")), ("value", st("v"))]))])),
            ("producer_access_mode", st("WaitForExclusive")),
            ("epoch", int(0)),
        ],
    );
}

#[test]
fn producer_success_with_a_negative_int64_and_schema_version_bytes() {
    let c = round_trip(
        "PRODUCER_SUCCESS",
        &[
            ("request_id", int(6)),
            ("producer_name", st("p")),
            ("last_sequence_id", int(-1)),
            ("schema_version", by(&[0, 0, 0, 0, 0, 0, 0, 1])),
        ],
    );
    assert_eq!(c.get("last_sequence_id"), Some(&Value::Int(-1)));
}

#[test]
fn send_receipt_with_a_negative_partition_in_its_message_id() {
    // int32 -1 goes on the wire as a ten-byte varint and must come back as -1, not 2^64-1 or 2^32-1
    let id = msg(
        "MessageIdData",
        &[("ledgerId", int(100)), ("entryId", int(7)), ("partition", int(-1)), ("batch_index", int(-1))],
    );
    let c = round_trip("SEND_RECEIPT", &[("producer_id", int(7)), ("sequence_id", int(42)), ("message_id", sub(id))]);
    assert_eq!(c.get("message_id").and_then(|m| m.get("partition")), Some(&Value::Int(-1)));
}

#[test]
fn send_error_names_its_server_error() {
    let c = round_trip(
        "SEND_ERROR",
        &[
            ("producer_id", int(7)),
            ("sequence_id", int(42)),
            ("error", st("ChecksumError")),
            ("message", st("bad checksum")),
        ],
    );
    assert_eq!(c.get("error").and_then(Value::as_str), Some("ChecksumError"));
}

#[test]
fn ack_with_several_message_ids_and_properties() {
    let id = |e: i64| {
        sub(msg(
            "MessageIdData",
            &[("ledgerId", int(9)), ("entryId", int(e)), ("ack_set", list(vec![int(-8), int(3)]))],
        ))
    };
    let prop = sub(msg("KeyLongValue", &[("key", st("k")), ("value", uint(u64::MAX))]));
    let c = round_trip(
        "ACK",
        &[
            ("consumer_id", int(1)),
            ("ack_type", st("Cumulative")),
            ("message_id", list(vec![id(1), id(2), id(3)])),
            ("validation_error", st("ChecksumMismatch")),
            ("properties", list(vec![prop])),
            ("request_id", int(77)),
        ],
    );
    assert_eq!(c.get("message_id").and_then(Value::as_list).map(<[Value]>::len), Some(3));
}

#[test]
fn ack_response_with_an_error() {
    round_trip(
        "ACK_RESPONSE",
        &[("consumer_id", int(1)), ("error", st("TransactionConflict")), ("message", st("m")), ("request_id", int(3))],
    );
}

#[test]
fn flow_with_camel_case_field() {
    let c = round_trip("FLOW", &[("consumer_id", int(4)), ("messagePermits", int(1000))]);
    assert_eq!(c.get("messagePermits"), Some(&Value::Int(1000)));
}

#[test]
fn close_producer_from_the_broker_carries_the_largest_uint64() {
    // the broker closes with request_id 2^64-1: above i64::MAX, kept exact as an unsigned value
    let c = round_trip("CLOSE_PRODUCER", &[("producer_id", int(1)), ("request_id", uint(u64::MAX))]);
    assert_eq!(c.get("request_id"), Some(&Value::UInt(u64::MAX)));
    assert_eq!(json(&c), format!(r#"{{"producer_id":1,"request_id":{}}}"#, u64::MAX));
}

#[test]
fn close_consumer_and_unsubscribe() {
    round_trip("CLOSE_CONSUMER", &[("consumer_id", int(2)), ("request_id", int(3))]);
    round_trip("UNSUBSCRIBE", &[("consumer_id", int(2)), ("request_id", int(4))]);
}

#[test]
fn ping_and_pong_are_empty_maps() {
    assert_eq!(json(&round_trip("PING", &[])), "{}");
    assert_eq!(json(&round_trip("PONG", &[])), "{}");
}

#[test]
fn a_ping_frame_is_its_nine_bytes_on_the_wire() {
    // Commands.newPing: TOTAL_SIZE 9, CMD_SIZE 5, BaseCommand{type=PING(18), ping{}} = 08 12 92 01 00
    let frame = [0, 0, 0, 9, 0, 0, 0, 5, 0x08, 0x12, 0x92, 0x01, 0x00];
    assert_eq!(frame.to_vec(), simple_frame(&base_command("PING", &sub_command("PING", &[]))));
    let d = full(&frame);
    assert_eq!((d.type_name.as_str(), d.size), ("PING", 13));
    assert!(d.payload().is_none());
}

#[test]
fn redeliver_unacknowledged_messages_with_ids() {
    let id = sub(msg("MessageIdData", &[("ledgerId", int(1)), ("entryId", int(2))]));
    round_trip(
        "REDELIVER_UNACKNOWLEDGED_MESSAGES",
        &[("consumer_id", int(1)), ("message_ids", list(vec![id])), ("consumer_epoch", int(3))],
    );
}

#[test]
fn partitioned_metadata_request_and_response() {
    round_trip(
        "PARTITIONED_METADATA",
        &[("topic", st("t")), ("request_id", int(1)), ("metadata_auto_creation_enabled", PV::Bool(false))],
    );
    round_trip(
        "PARTITIONED_METADATA_RESPONSE",
        &[("partitions", int(16)), ("request_id", int(1)), ("response", st("Success"))],
    );
}

#[test]
fn lookup_request_and_redirect_response() {
    round_trip(
        "LOOKUP",
        &[
            ("topic", st("t")),
            ("request_id", int(8)),
            ("authoritative", PV::Bool(true)),
            ("advertised_listener_name", st("internal")),
        ],
    );
    round_trip(
        "LOOKUP_RESPONSE",
        &[
            ("brokerServiceUrl", st("pulsar://broker-1:6650")),
            ("brokerServiceUrlTls", st("pulsar+ssl://broker-1:6651")),
            ("response", st("Redirect")),
            ("request_id", int(8)),
            ("proxy_through_service_url", PV::Bool(true)),
        ],
    );
}

#[test]
fn consumer_stats_response_keeps_doubles() {
    let c = round_trip(
        "CONSUMER_STATS_RESPONSE",
        &[
            ("request_id", int(1)),
            ("msgRateOut", PV::F64(12.5)),
            ("msgThroughputOut", PV::F64(0.1)),
            ("msgBacklog", int(3)),
        ],
    );
    assert_eq!(c.get("msgThroughputOut").and_then(Value::as_f64), Some(0.1));
}

#[test]
fn seek_by_message_id_and_by_time() {
    let id = sub(msg("MessageIdData", &[("ledgerId", int(1)), ("entryId", int(2))]));
    round_trip("SEEK", &[("consumer_id", int(1)), ("request_id", int(2)), ("message_id", id)]);
    round_trip(
        "SEEK",
        &[("consumer_id", int(1)), ("request_id", int(3)), ("message_publish_time", int(1_700_000_000_000))],
    );
}

#[test]
fn get_last_message_id_response_with_nested_first_chunk_id() {
    let first = msg("MessageIdData", &[("ledgerId", int(5)), ("entryId", int(0))]);
    let last =
        msg("MessageIdData", &[("ledgerId", int(5)), ("entryId", int(9)), ("first_chunk_message_id", sub(first))]);
    round_trip("GET_LAST_MESSAGE_ID_RESPONSE", &[("last_message_id", sub(last)), ("request_id", int(2))]);
}

#[test]
fn get_topics_of_namespace_response_lists_topics() {
    let c = round_trip(
        "GET_TOPICS_OF_NAMESPACE_RESPONSE",
        &[("request_id", int(1)), ("topics", list(vec![st("a"), st("b"), st("c")])), ("filtered", PV::Bool(true))],
    );
    assert_eq!(json(c.get("topics").unwrap()), r#"["a","b","c"]"#);
}

#[test]
fn get_schema_response_with_schema_bytes() {
    let schema =
        msg("Schema", &[("name", st("s")), ("schema_data", by(&[0xde, 0xad, 0xbe, 0xef])), ("type", st("Avro"))]);
    let c = round_trip(
        "GET_SCHEMA_RESPONSE",
        &[("request_id", int(1)), ("schema", sub(schema)), ("schema_version", by(&[0, 1]))],
    );
    assert_eq!(c.get("schema").and_then(|s| s.get("schema_data")).and_then(Value::as_str), Some("3q2+7w=="));
}

#[test]
fn auth_challenge_and_response() {
    let data = |d: &[u8]| sub(msg("AuthData", &[("auth_method_name", st("token")), ("auth_data", by(d))]));
    round_trip(
        "AUTH_CHALLENGE",
        &[("server_version", st("s")), ("challenge", data(b"refresh")), ("protocol_version", int(21))],
    );
    round_trip("AUTH_RESPONSE", &[("client_version", st("c")), ("response", data(b"new token"))]);
}

#[test]
fn transaction_commands() {
    round_trip("NEW_TXN", &[("request_id", int(1)), ("txn_ttl_millis", int(60_000)), ("tc_id", int(2))]);
    round_trip(
        "END_TXN",
        &[
            ("request_id", int(2)),
            ("txnid_least_bits", int(5)),
            ("txnid_most_bits", int(2)),
            ("txn_action", st("ABORT")),
        ],
    );
    round_trip("TC_CLIENT_CONNECT_REQUEST", &[("request_id", int(3)), ("tc_id", int(0))]);
}

#[test]
fn topic_migrated_names_its_resource_type() {
    let c = round_trip(
        "TOPIC_MIGRATED",
        &[("resource_id", int(4)), ("resource_type", st("Consumer")), ("brokerServiceUrl", st("pulsar://b2:6650"))],
    );
    assert_eq!(c.get("resource_type").and_then(Value::as_str), Some("Consumer"));
}

#[test]
fn watch_topic_update_with_new_and_deleted_topics() {
    round_trip(
        "WATCH_TOPIC_UPDATE",
        &[
            ("watcher_id", int(1)),
            ("new_topics", list(vec![st("x")])),
            ("deleted_topics", list(vec![st("y"), st("z")])),
            ("topics_hash", st("h")),
        ],
    );
}

#[test]
fn non_ascii_strings_come_back_as_text() {
    let c = round_trip(
        "ERROR",
        &[("request_id", int(1)), ("error", st("TopicNotFound")), ("message", st("Thema »ü« nicht gefunden 主题"))],
    );
    assert_eq!(c.get("message").and_then(Value::as_str), Some("Thema »ü« nicht gefunden 主题"));
}

// ------------------------------------------------------------------------------------ protobuf rules

#[test]
fn a_repeated_sub_command_is_merged_as_the_runtime_merges_it() {
    // two FLOW sub-commands: a singular message field sent twice is merged, its scalars' last occurrence wins
    let first = encode(&sub_command("FLOW", &[("consumer_id", int(4)), ("messagePermits", int(10))]));
    let second = encode(&sub_command("FLOW", &[("consumer_id", int(4)), ("messagePermits", int(20))]));
    let mut base = vec![0x08, 11]; // type FLOW
    for part in [&first, &second] {
        base.extend([0x5a, part.len() as u8]); // field 11, wire type 2
        base.extend(part);
    }
    let d = full(&simple_frame(&base));
    let merged = runtime_sub_command(&base, "FLOW");
    assert_eq!(d.command.as_ref(), Some(&expected(&merged)));
    assert_eq!(d.command.as_ref().and_then(|c| c.get("messagePermits")), Some(&Value::Int(20)));
}

#[test]
fn a_scalar_sent_twice_keeps_its_last_value() {
    let mut flow = encode(&sub_command("FLOW", &[("consumer_id", int(4)), ("messagePermits", int(10))]));
    flow.extend([0x08, 0x05]); // consumer_id again: 5
    let mut base = vec![0x08, 11, 0x5a, flow.len() as u8];
    base.extend(&flow);
    let d = full(&simple_frame(&base));
    assert_eq!(d.command.as_ref(), Some(&expected(&runtime_sub_command(&base, "FLOW"))));
    assert_eq!(d.command.as_ref().and_then(|c| c.get("consumer_id")), Some(&Value::Int(5)));
}

#[test]
fn a_packed_repeated_int64_reads_as_the_unpacked_list() {
    // MessageIdData.ack_set (field 5) written packed: 0x2a, length, varints 3, 300 (ac 02), -1 (ten bytes)
    let mut id = encode(&msg("MessageIdData", &[("ledgerId", int(1)), ("entryId", int(2))]));
    let mut packed = vec![0x03, 0xac, 0x02];
    packed.extend([0xff; 9]);
    packed.push(0x01);
    id.extend([0x2a, packed.len() as u8]);
    id.extend(packed);
    let mut ack = encode(&sub_command("ACK", &[("consumer_id", int(1)), ("ack_type", st("Individual"))]));
    ack.extend([0x1a, id.len() as u8]); // message_id, field 3
    ack.extend(&id);
    let mut base = vec![0x08, 10, 0x52, ack.len() as u8];
    base.extend(&ack);
    let d = full(&simple_frame(&base));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let ack_set =
        d.command.as_ref().and_then(|c| c.get("message_id")).and_then(Value::as_list).and_then(|l| l[0].get("ack_set"));
    assert_eq!(ack_set, Some(&Value::List(vec![Value::Int(3), Value::Int(300), Value::Int(-1)])));
    assert_eq!(d.command.as_ref(), Some(&expected(&runtime_sub_command(&base, "ACK"))));
}

#[test]
fn the_type_need_not_come_first() {
    // the sub-command before the type: the decoder must find field 1 anywhere in the BaseCommand
    let flow = encode(&sub_command("FLOW", &[("consumer_id", int(4)), ("messagePermits", int(10))]));
    let mut base = vec![0x5a, flow.len() as u8];
    base.extend(&flow);
    base.extend([0x08, 11]);
    let d = full(&simple_frame(&base));
    assert_eq!(d.type_name.as_str(), "FLOW");
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(d.command.as_ref().and_then(|c| c.get("messagePermits")), Some(&Value::Int(10)));
}

#[test]
fn an_unknown_field_in_a_sub_command_is_listed_in_its_value() {
    let mut flow = encode(&sub_command("FLOW", &[("consumer_id", int(4)), ("messagePermits", int(10))]));
    flow.extend([0x98, 0x06, 0x01]); // field 99 (99 << 3 = 792 = 98 06), varint 1
    let mut base = vec![0x08, 11, 0x5a, flow.len() as u8];
    base.extend(&flow);
    let d = full(&simple_frame(&base));
    assert!(d.findings.is_empty(), "a sub-command's unknown field is no frame finding: {:?}", d.findings);
    assert_eq!(d.command.as_ref().and_then(|c| c.get("_unknown_fields")), Some(&Value::List(vec![Value::Int(99)])));
}

/// FLOW whose required messagePermits (2, a varint) is sent as a length-delimited field.
fn flow_with_permits_of_the_wrong_wire_type() -> Vec<u8> {
    let mut flow = encode(&sub_command("FLOW", &[("consumer_id", int(4))]));
    flow.extend([0x12, 0x01, 0x07]);
    let mut base = vec![0x08, 11, 0x5a, flow.len() as u8];
    base.extend(&flow);
    simple_frame(&base)
}

#[test]
fn a_field_with_the_wrong_wire_type_is_an_unknown_field() {
    // the runtime keeps it as an unknown field, not as the field
    let d = full(&flow_with_permits_of_the_wrong_wire_type());
    let c = d.command.as_ref().expect("a command");
    assert_eq!(c.get("messagePermits"), None);
    assert_eq!(c.get("_unknown_fields"), Some(&Value::List(vec![Value::Int(2)])));
}

#[test]
fn a_required_scalar_with_the_wrong_wire_type_is_missing() {
    let d = full(&flow_with_permits_of_the_wrong_wire_type());
    assert_eq!(ids(&d), ["command.missing_required"]);
    assert_eq!(param(&d, "command.missing_required", "fields"), Some(&Value::List(vec![s("messagePermits")])));
}

// ------------------------------------------------------------------------------------ command findings

#[test]
fn an_unknown_command_type_is_named_by_its_number() {
    let base = [0x08, 0xc8, 0x01]; // type 200 (c8 01)
    let d = full(&simple_frame(&base));
    assert_eq!(d.type_name.as_str(), "UNKNOWN(200)");
    assert!(d.command.is_none());
    assert_eq!(ids(&d), ["command.unknown_type"]);
    assert_eq!(param(&d, "command.unknown_type", "number"), Some(&Value::Int(200)));
}

#[test]
fn a_base_command_without_a_type_is_malformed() {
    // only a PING sub-command (field 18, empty): no type at all
    let d = full(&simple_frame(&[0x92, 0x01, 0x00]));
    assert_eq!(d.type_name.as_str(), "MALFORMED");
    assert!(d.command.is_none());
    assert_eq!(ids(&d).first(), Some(&"command.no_type"));
}

#[test]
fn a_type_without_its_sub_command() {
    let d = full(&simple_frame(&[0x08, 18])); // type PING, no ping field
    assert_eq!(d.type_name.as_str(), "PING");
    assert!(d.command.is_none());
    assert_eq!(ids(&d), ["command.missing_subcommand"]);
    assert_eq!(param(&d, "command.missing_subcommand", "type").and_then(Value::as_str), Some("PING"));
    let field = sub_field("PING");
    assert_eq!(param(&d, "command.missing_subcommand", "field").and_then(Value::as_str), Some(field.name()));
}

#[test]
fn missing_required_fields_are_named() {
    let cmd = sub_command("SEND_ERROR", &[("producer_id", int(1)), ("error", st("TopicNotFound"))]);
    let d = full(&simple_frame(&base_command("SEND_ERROR", &cmd)));
    assert_eq!(d.command.as_ref(), Some(&expected(&cmd)), "what arrived is still shown");
    assert_eq!(ids(&d), ["command.missing_required"]);
    let fields = param(&d, "command.missing_required", "fields").and_then(Value::as_list).expect("a list");
    let mut names: Vec<&str> = fields.iter().filter_map(Value::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["message", "sequence_id"]);
}

#[test]
fn a_required_enum_with_a_value_the_schema_does_not_know() {
    // ack_type 7: a newer protocol's value; the field is there, only its value is unknown
    let cmd = sub_command("ACK", &[("consumer_id", int(1)), ("ack_type", int(7))]);
    let d = full(&simple_frame(&base_command("ACK", &cmd)));
    assert_eq!(ids(&d), ["command.unknown_enum"]);
    let fields = param(&d, "command.unknown_enum", "fields");
    assert_eq!(fields, Some(&Value::List(vec![s("ack_type")])));
    assert_eq!(d.command.as_ref().and_then(|c| c.get("_unknown_fields")), Some(&Value::List(vec![Value::Int(2)])));
}

#[test]
fn a_second_sub_command_is_reported_by_its_type() {
    let mut base = DynamicMessage::new(descriptor("BaseCommand"));
    base.set_field_by_name("type", PV::EnumNumber(type_number("PING")));
    base.set_field(&sub_field("PING"), sub(sub_command("PING", &[])));
    base.set_field(&sub_field("PONG"), sub(sub_command("PONG", &[])));
    let d = full(&simple_frame(&encode(&base)));
    assert_eq!(d.type_name.as_str(), "PING");
    assert_eq!(ids(&d), ["command.extra_subcommands"]);
    assert_eq!(param(&d, "command.extra_subcommands", "types"), Some(&Value::List(vec![s("PONG")])));
}

#[test]
fn unknown_base_command_fields_are_listed_once_sorted() {
    let mut base = base_command("PING", &sub_command("PING", &[]));
    // field 300 (varint, key 300 << 3 = 2400 = e0 12), field 200 twice (key 1600 = c0 0c)
    base.extend([0xe0, 0x12, 0x01, 0xc0, 0x0c, 0x02, 0xc0, 0x0c, 0x03]);
    let d = full(&simple_frame(&base));
    assert_eq!(ids(&d), ["command.unknown_fields"]);
    assert_eq!(
        param(&d, "command.unknown_fields", "fields"),
        Some(&Value::List(vec![Value::Int(200), Value::Int(300)]))
    );
}

#[test]
fn bytes_after_a_command_without_payload_are_trailing() {
    let base = base_command("PONG", &sub_command("PONG", &[]));
    let mut frame = simple_frame(&base);
    frame.extend([1, 2, 3]);
    let total = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&total.to_be_bytes()); // TOTAL_SIZE covers them: only CMD_SIZE ends the command
    let d = full(&frame);
    assert_eq!(ids(&d), ["command.trailing_bytes"]);
    assert_eq!(param(&d, "command.trailing_bytes", "length"), Some(&Value::Int(3)));
    assert_eq!(param(&d, "command.trailing_bytes", "type").and_then(Value::as_str), Some("PONG"));
}

#[test]
fn an_unparsable_base_command_keeps_its_peeked_type() {
    // type PING, then field 18 claiming 5 bytes where none follow
    let d = full(&simple_frame(&[0x08, 18, 0x92, 0x01, 0x05]));
    assert_eq!(d.type_name.as_str(), "PING");
    assert!(d.command.is_none());
    assert_eq!(ids(&d), ["command.unparsable"]);
}

#[test]
fn a_zero_field_number_makes_the_command_unparsable() {
    let d = full(&simple_frame(&[0x08, 18, 0x00, 0x00]));
    assert_eq!(ids(&d), ["command.unparsable"]);
}

// ------------------------------------------------------------------------------------------ frame sizes

#[test]
fn frame_size_counts_missing_bytes() {
    let frame = simple_frame(&base_command("PING", &sub_command("PING", &[])));
    let d = decode(&frame, 0, MIB, false);
    assert_eq!(d.size, 13);
    // the same bytes said to be followed by 3 lost ones: a frame of 16 bytes, which TOTAL_SIZE contradicts
    let d = decode(&frame, 3, MIB, false);
    assert_eq!(d.size, 16);
    assert_eq!(ids(&d), ["frame.size_mismatch"]);
    assert_eq!(param(&d, "frame.size_mismatch", "total_size"), Some(&Value::Int(9)));
    assert_eq!(param(&d, "frame.size_mismatch", "following"), Some(&Value::Int(12)));
}

#[test]
fn total_size_smaller_than_the_frame() {
    let mut frame = simple_frame(&base_command("PING", &sub_command("PING", &[])));
    frame[3] = 7; // TOTAL_SIZE 7 < 4 + CMD_SIZE 5
    let d = full(&frame);
    assert_eq!(ids(&d), ["frame.size_mismatch", "frame.cmd_size"]);
    assert_eq!(param(&d, "frame.cmd_size", "cmd_size"), Some(&Value::Int(5)));
    assert_eq!(param(&d, "frame.cmd_size", "total_size"), Some(&Value::Int(7)));
}

#[test]
fn cmd_size_beyond_the_bytes_is_truncated_and_malformed() {
    let mut frame = simple_frame(&base_command("PING", &sub_command("PING", &[])));
    frame[7] = 50; // CMD_SIZE 50 of a 13-byte frame
    frame[3] = 54;
    let d = decode(&frame, 0, MIB, false);
    assert_eq!(d.type_name.as_str(), "MALFORMED");
    assert!(ids(&d).contains(&"frame.truncated"), "{:?}", d.findings);
}

#[test]
fn a_send_cut_inside_its_command_keeps_the_fields_that_arrived_whole() {
    let cmd = sub_command("SEND", &[("producer_id", int(7)), ("sequence_id", int(300)), ("num_messages", int(5))]);
    let frame = send_frame(&metadata(&[]), b"x");
    let mut fixed = frame.clone();
    let base = base_command("SEND", &cmd);
    fixed.splice(8..8 + send_command().len(), base.iter().copied());
    let total = (fixed.len() - 4) as u32;
    fixed[..4].copy_from_slice(&total.to_be_bytes());
    fixed[4..8].copy_from_slice(&(base.len() as u32).to_be_bytes());
    // cut right after the first byte of sequence_id's two-byte varint (300 = ac 02)
    let at = 8 + base.iter().position(|&b| b == 0xac).expect("300's first byte") + 1;
    let d = decode(&fixed[..at], fixed.len() - at, MIB, false);
    assert_eq!(d.type_name.as_str(), "SEND");
    assert_eq!(d.size, fixed.len());
    assert_eq!(ids(&d), ["frame.truncated"]);
    assert_eq!(d.command, Some(map(vec![("producer_id", Value::Int(7))])));
}

#[test]
fn a_command_cut_without_lost_bytes_is_not_guessed_at() {
    // missing = 0: the bytes are all there is, so a cut command is no SEND of a capture gap
    let frame = send_frame(&metadata(&[]), b"x");
    let d = decode(&frame[..12], 0, MIB, false);
    assert_eq!(d.type_name.as_str(), "MALFORMED");
    assert!(d.command.is_none());
}

#[test]
fn command_json_of_a_flow() {
    let d = full(&simple_frame(&base_command(
        "FLOW",
        &sub_command("FLOW", &[("consumer_id", int(4)), ("messagePermits", int(1000))]),
    )));
    // 4 + 4 + BaseCommand (08 0b 5a 05 08 04 10 e8 07) = 17 bytes
    assert_eq!(d.size, 17);
    assert_eq!(json(d.command.as_ref().unwrap()), r#"{"consumer_id":4,"messagePermits":1000}"#);
}

#[test]
fn finding_json_names_its_id_and_params() {
    let d = full(&simple_frame(&[0x08, 0xc8, 0x01]));
    let mut out = Vec::new();
    d.findings[0].write_json(&mut out);
    assert_eq!(String::from_utf8(out).unwrap(), r#"{"id":"command.unknown_type","params":{"number":200}}"#);
}

#[test]
fn mutated_sub_commands_decode_as_the_runtime_parses_them() {
    // differential: where prost-reflect parses a mutated sub-command, the decoder shows the same fields (the
    // runtimes differ where prost is stricter than upb, whose rules the decoder follows: those are skipped)
    let seeds = [
        sub_command(
            "SUBSCRIBE",
            &[
                ("topic", st("t")),
                ("subscription", st("s")),
                ("subType", st("Shared")),
                ("consumer_id", int(1)),
                ("request_id", int(2)),
                ("priority_level", int(-3)),
                (
                    "start_message_id",
                    sub(msg("MessageIdData", &[("ledgerId", int(1)), ("entryId", int(2)), ("partition", int(-1))])),
                ),
                ("metadata", list(vec![sub(msg("KeyValue", &[("key", st("a")), ("value", st("b"))]))])),
            ],
        ),
        sub_command(
            "CONSUMER_STATS_RESPONSE",
            &[
                ("request_id", int(1)),
                ("msgRateOut", PV::F64(1.5)),
                ("consumerName", st("c")),
                ("msgBacklog", int(300)),
            ],
        ),
        sub_command(
            "ACK",
            &[("consumer_id", int(1)), ("ack_type", st("Individual")), ("txnid_most_bits", uint(u64::MAX))],
        ),
    ];
    let types = ["SUBSCRIBE", "CONSUMER_STATS_RESPONSE", "ACK"];
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut compared = 0;
    for i in 0..20_000 {
        let (ty, seed) = (types[i % 3], &seeds[i % 3]);
        let bytes = rng.mutate(&encode(seed));
        let Ok(runtime) = DynamicMessage::decode(seed.descriptor(), bytes.as_slice()) else { continue };
        if !comparable(&runtime) {
            continue;
        }
        let mut base = vec![0x08, type_number(ty) as u8];
        base.extend(field_bytes(type_number(ty) as u32, &bytes));
        let d = full(&simple_frame(&base));
        let got = d.command.as_ref().map(without_unknown_fields);
        assert_eq!(got, Some(expected(&runtime)), "{ty} {bytes:02x?}");
        compared += 1;
    }
    assert!(compared > 5_000, "{compared} compared");
}

/// A repeated field's elements beyond `MAX_REPEATED_ELEMENTS` (two bytes each on the wire, a kilobyte once
/// decoded) are skipped and counted by a finding; those kept decode as before, packed values too.
#[test]
fn repeated_elements_beyond_the_parse_budget_are_counted_not_decoded() {
    use pulsar_dissect_engine::pb::DEFAULT_MAX_REPEATED_ELEMENTS as MAX_REPEATED_ELEMENTS;
    let ack = |ids: usize| {
        let id = msg("MessageIdData", &[("ledgerId", uint(1)), ("entryId", uint(2))]);
        let sub = sub_command(
            "ACK",
            &[("consumer_id", uint(1)), ("ack_type", PV::EnumNumber(0)), ("message_id", list(vec![sub(id); ids]))],
        );
        simple_frame(&base_command("ACK", &sub))
    };
    let elided = |d: &pulsar_dissect_engine::model::Decoded| {
        d.findings.iter().find(|f| f.id.as_str() == "protobuf.repeated_elided").map(|f| {
            let get = |k: &str| f.params.iter().find(|(key, _)| key.as_str() == k).and_then(|(_, v)| v.as_i64());
            (get("elided"), get("kept"))
        })
    };
    let at_cap = decode(&ack(MAX_REPEATED_ELEMENTS), 0, 64 << 20, false);
    assert_eq!(elided(&at_cap), None);
    let beyond = decode(&ack(MAX_REPEATED_ELEMENTS + 7), 0, 64 << 20, false);
    assert_eq!(elided(&beyond), Some((Some(7), Some(MAX_REPEATED_ELEMENTS as i64))));
    let ids = beyond.command.as_ref().and_then(|c| c.get("message_id")).and_then(Value::as_list).map(|l| l.len());
    assert_eq!(ids, Some(MAX_REPEATED_ELEMENTS));

    // packed (as upb accepts a repeated scalar): an ack_set of more values than are left is cut at a value's
    // end, the rest counted; written by hand, as prost-reflect writes proto2 fields unpacked
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn delimited(key: u8, body: &[u8], out: &mut Vec<u8>) {
        out.push(key);
        varint(body.len() as u64, out);
        out.extend_from_slice(body);
    }
    let packed = |values: usize| {
        let mut set = Vec::new();
        for _ in 0..values {
            varint(300, &mut set);
        }
        let mut id = vec![0x08, 0x01, 0x10, 0x02]; // ledgerId 1, entryId 2
        delimited(0x2a, &set, &mut id); // ack_set (5), packed
        let mut ack = vec![0x08, 0x01, 0x10, 0x00]; // consumer_id 1, Individual
        delimited(0x1a, &id, &mut ack); // message_id (3)
        let mut base = vec![0x08, 10]; // type ACK
        delimited(0x52, &ack, &mut base); // ack (10)
        simple_frame(&base)
    };
    let d = decode(&packed(MAX_REPEATED_ELEMENTS + 2), 0, 64 << 20, false);
    // the message id itself takes one element of the budget
    assert_eq!(elided(&d), Some((Some(3), Some(MAX_REPEATED_ELEMENTS as i64))));
    let set =
        d.command.as_ref().and_then(|c| c.get("message_id")).and_then(Value::as_list).and_then(|l| l[0].get("ack_set"));
    let set = set.and_then(Value::as_list).expect("the values kept");
    assert_eq!(set.len(), MAX_REPEATED_ELEMENTS - 1);
    assert!(set.iter().all(|v| v.as_i64() == Some(300)), "cut at a value's end, not inside one");
}
