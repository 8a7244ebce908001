//! TubeMQ frame decoding (`tubemq::decode`): the blocks joined, the RPC envelope, the method's message picked
//! by its method id, the messages a frame carries and their checksums as the consumer checks them. The frames
//! come from the independent encoder in `tubemq_support` (prost-reflect over proto/tubemq/*.proto), the
//! checksums from a bitwise CRC-32 written there.

use pulsar_dissect_engine::model::Decoded;
use pulsar_dissect_engine::protocols::tubemq::decode::{decode_within, message_checksum};
use pulsar_dissect_engine::protocols::tubemq::{
    checksum_verdict, decode, error_code_name, event_type_name, known_type, service_name, tube, EXCEPTION, METHODS,
};
use pulsar_dissect_engine::protocols::DecodeCaps;
use pulsar_dissect_engine::value::{Map, Value};

mod tubemq_support;
use prost_reflect::Value as Pv;
use tubemq_support::*;

fn rpc<'a>(d: &'a Decoded, key: &str) -> Option<&'a Value> {
    d.tube().and_then(|t| t.rpc.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v))
}

fn rpc_str<'a>(d: &'a Decoded, key: &str) -> Option<&'a str> {
    rpc(d, key).and_then(Value::as_str)
}

fn rpc_int(d: &Decoded, key: &str) -> Option<i64> {
    rpc(d, key).and_then(Value::as_i64)
}

fn ids(d: &Decoded) -> Vec<&str> {
    d.findings.iter().map(|f| f.id.as_str()).collect()
}

fn param<'a>(d: &'a Decoded, id: &str, key: &str) -> Option<&'a Value> {
    let finding = d.findings.iter().find(|f| f.id.as_str() == id)?;
    finding.params.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

fn cmd<'a>(d: &'a Decoded, key: &str) -> Option<&'a Value> {
    d.command.as_ref().and_then(|c| c.get(key))
}

fn messages(d: &Decoded) -> &[Value] {
    d.tube().map_or(&[], |t| t.messages.as_slice())
}

fn full(f: &[u8]) -> Decoded {
    decode(f, 0, false)
}

fn send_request(data: &[u8], flag: i32, checksum: i32) -> Vec<u8> {
    enc(
        "SendMessageRequestP2B",
        vec![
            ("clientId", s("producer-1")),
            ("topicName", s("orders")),
            ("partitionId", i32v(3)),
            ("data", b(data)),
            ("flag", i32v(flag)),
            ("checkSum", i32v(checksum)),
            ("sentAddr", i32v(0x0A00_0001)),
        ],
    )
}

fn transfered(id: i64, data: &[u8], flag: i32, checksum: i32) -> Pv {
    m(msg(
        "TransferedMessage",
        vec![("messageId", i64v(id)), ("checkSum", i32v(checksum)), ("payLoadData", b(data)), ("flag", i32v(flag))],
    ))
}

fn get_response(messages: Vec<Pv>, err_code: i32) -> Vec<u8> {
    enc(
        "GetMessageResponseB2C",
        vec![
            ("success", Pv::Bool(err_code == 200)),
            ("errCode", i32v(err_code)),
            ("messages", Pv::List(messages)),
            ("currOffset", i64v(4096)),
        ],
    )
}

// ------------------------------------------------------------------------------------------ the method table

/// shared/reference/protocol-and-anchors.md §2.2 (RpcConstants and PbEnDecoder): id, constant, request and
/// response message ("" for the methods PbEnDecoder refuses).
const REFERENCE: [(i32, &str, &str, &str); 21] = [
    (1, "MASTER_PRODUCER_REGISTER", "RegisterRequestP2M", "RegisterResponseM2P"),
    (2, "MASTER_PRODUCER_HEARTBEAT", "HeartRequestP2M", "HeartResponseM2P"),
    (3, "MASTER_PRODUCER_CLOSECLIENT", "CloseRequestP2M", "CloseResponseM2P"),
    (4, "MASTER_CONSUMER_REGISTER", "RegisterRequestC2M", "RegisterResponseM2C"),
    (5, "MASTER_CONSUMER_HEARTBEAT", "HeartRequestC2M", "HeartResponseM2C"),
    (6, "MASTER_CONSUMER_CLOSECLIENT", "CloseRequestC2M", "CloseResponseM2C"),
    (7, "MASTER_BROKER_REGISTER", "RegisterRequestB2M", "RegisterResponseM2B"),
    (8, "MASTER_BROKER_HEARTBEAT", "HeartRequestB2M", "HeartResponseM2B"),
    (9, "MASTER_BROKER_CLOSECLIENT", "CloseRequestB2M", "CloseResponseM2B"),
    (11, "BROKER_PRODUCER_REGISTER", "", ""),
    (12, "BROKER_PRODUCER_HEARTBEAT", "", ""),
    (13, "BROKER_PRODUCER_SENDMESSAGE", "SendMessageRequestP2B", "SendMessageResponseB2P"),
    (14, "BROKER_PRODUCER_CLOSE", "", ""),
    (15, "BROKER_CONSUMER_REGISTER", "RegisterRequestC2B", "RegisterResponseB2C"),
    (16, "BROKER_CONSUMER_HEARTBEAT", "HeartBeatRequestC2B", "HeartBeatResponseB2C"),
    (17, "BROKER_CONSUMER_GETMESSAGE", "GetMessageRequestC2B", "GetMessageResponseB2C"),
    (18, "BROKER_CONSUMER_COMMIT", "CommitOffsetRequestC2B", "CommitOffsetResponseB2C"),
    (19, "BROKER_CONSUMER_CLOSE", "", ""),
    (20, "MASTER_CONSUMER_REGISTER_V2", "RegisterRequestC2MV2", "RegisterResponseM2CV2"),
    (21, "MASTER_CONSUMER_HEARTBEAT_V2", "HeartRequestC2MV2", "HeartResponseM2CV2"),
    (22, "MASTER_CONSUMER_GET_PART_META", "GetPartMetaRequestC2M", "GetPartMetaResponseM2C"),
];

/// The service type a method's requests carry: 1 master, 2 broker read (consumers), 3 broker write.
fn reference_service(id: i32) -> i32 {
    match id {
        11..=14 => 3,
        15..=19 => 2,
        _ => 1,
    }
}

#[test]
fn the_method_table_is_upstreams() {
    assert_eq!(METHODS.len(), REFERENCE.len());
    for (method, (id, constant, request, response)) in METHODS.iter().zip(REFERENCE) {
        assert_eq!((method.id, method.constant), (id, constant));
        assert_eq!(method.request.unwrap_or(""), request, "{constant}");
        assert_eq!(method.response.unwrap_or(""), response, "{constant}");
        assert_eq!(method.service_type, i64::from(reference_service(id)), "{constant}");
        assert_eq!(method.server_role(), if reference_service(id) == 1 { "master" } else { "broker" });
    }
}

#[test]
fn every_message_of_the_method_table_is_in_the_contract() {
    for method in &METHODS {
        for name in [method.request, method.response].into_iter().flatten() {
            assert!(pool().get_message_by_name(name).is_some(), "{name}");
            assert!(known_type(name), "{name}");
        }
    }
    assert!(known_type(EXCEPTION));
    assert!(!known_type("RequestBody"));
    assert!(!known_type("TransferedMessage"));
}

#[test]
fn the_schema_finds_methods_by_id_only() {
    let t = tube();
    for (id, constant, _, _) in REFERENCE {
        assert_eq!(t.method(i64::from(id)).map(|m| m.0.constant), Some(constant));
    }
    for id in [0, 10, 23, 31, 32, -1] {
        assert!(t.method(id).is_none(), "{id}");
    }
}

#[test]
fn service_and_event_names_are_rpc_constants() {
    let services: Vec<_> = (0..=6).map(service_name).collect();
    assert_eq!(
        services,
        [
            None,
            Some("MasterService"),
            Some("BrokerReadService"),
            Some("BrokerWriteService"),
            Some("BrokerAdminService"),
            Some("MasterAdminService"),
            None
        ]
    );
    assert_eq!(event_type_name(2), Some("DISCONNECT"));
    assert_eq!(event_type_name(10), Some("ONLY_CONNECT"));
    assert_eq!(event_type_name(-1), Some("UNKNOWN"));
    assert_eq!(event_type_name(6), None);
}

#[test]
fn error_code_names_are_terrcodeconstants() {
    // the codes the reference notes list by name (§2.3)
    for (code, name) in [
        (200, "SUCCESS"),
        (201, "NOT_READY"),
        (301, "MOVED"),
        (400, "BAD_REQUEST"),
        (401, "UNAUTHORIZED"),
        (403, "FORBIDDEN"),
        (404, "NOT_FOUND"),
        (500, "INTERNAL_SERVER_ERROR"),
        (503, "SERVICE_UNAVAILABLE"),
    ] {
        assert_eq!(error_code_name(code), Some(name));
    }
    assert_eq!(error_code_name(0), None);
    assert_eq!(error_code_name(202), None);
}

// ------------------------------------------------------------------------------------------------ envelope

#[test]
fn a_request_envelope_is_read() {
    let body = enc(
        "RegisterRequestP2M",
        vec![
            ("clientId", s("p-1")),
            ("topicList", strs(&["a", "b"])),
            ("brokerCheckSum", i64v(-1)),
            ("hostName", s("h1")),
        ],
    );
    let d = full(&request(77, 1, 1, &body));
    assert_eq!(d.type_name.as_str(), "RegisterRequestP2M");
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(d.tube().map(|t| t.serial), Some(77));
    assert_eq!(rpc_str(&d, "kind"), Some("request"));
    assert_eq!(rpc_int(&d, "service_type"), Some(1));
    assert_eq!(rpc_str(&d, "service"), Some("MasterService"));
    assert_eq!(rpc_int(&d, "protocol_version"), Some(3));
    assert_eq!(rpc_int(&d, "method"), Some(1));
    assert_eq!(rpc_str(&d, "method_name"), Some("MASTER_PRODUCER_REGISTER"));
    assert_eq!(rpc_int(&d, "timeout_ms"), Some(10_000));
    assert_eq!(cmd(&d, "clientId").and_then(Value::as_str), Some("p-1"));
    assert_eq!(cmd(&d, "brokerCheckSum").and_then(Value::as_i64), Some(-1));
    let topics: Vec<_> = cmd(&d, "topicList").and_then(Value::as_list).unwrap().iter().map(|v| v.as_str()).collect();
    assert_eq!(topics, [Some("a"), Some("b")]);
}

#[test]
fn the_size_is_the_frames_and_the_block_count_is_recorded() {
    let f = frame(1, &request_data(1, 3, &enc("CloseRequestP2M", vec![("clientId", s("x"))])), 7);
    let d = full(&f);
    assert_eq!(d.size, f.len());
    let blocks = u32::from_be_bytes(f[8..12].try_into().unwrap());
    assert!(blocks > 1);
    assert_eq!(rpc_int(&d, "blocks"), Some(i64::from(blocks)));
}

#[test]
fn trace_ids_of_the_connection_header_are_kept() {
    let mut data = delimited(&enc(
        "RpcConnHeader",
        vec![("flag", i32v(0)), ("traceId", i64v(1 << 40)), ("spanId", i64v(7)), ("parentId", i64v(-3))],
    ));
    data.extend(delimited(&enc("RequestHeader", vec![("serviceType", i32v(1))])));
    data.extend(delimited(&enc("RequestBody", vec![("method", i32v(3)), ("request", b(&[]))])));
    let d = full(&frame(1, &data, 8192));
    assert_eq!(rpc_int(&d, "trace_id"), Some(1 << 40));
    assert_eq!(rpc_int(&d, "span_id"), Some(7));
    assert_eq!(rpc_int(&d, "parent_id"), Some(-3));
    assert_eq!(rpc(&d, "timeout_ms"), None, "no timeout on the wire, none in the envelope");
    assert_eq!(rpc(&d, "protocol_version"), None);
}

#[test]
fn a_successful_response_is_read_by_its_method() {
    let body = enc(
        "SendMessageResponseB2P",
        vec![
            ("success", Pv::Bool(true)),
            ("errCode", i32v(200)),
            ("errMsg", s("OK")),
            ("messageId", i64v(123_456_789_012)),
            ("appendOffset", i64v(42)),
        ],
    );
    let d = full(&response(5, 13, &body));
    assert_eq!(d.type_name.as_str(), "SendMessageResponseB2P");
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(rpc_str(&d, "kind"), Some("response"));
    assert_eq!(rpc_str(&d, "status"), Some("SUCCESS"));
    assert_eq!(rpc_int(&d, "method"), Some(13));
    assert_eq!(rpc_int(&d, "protocol_version"), Some(3));
    assert_eq!(rpc(&d, "service_type"), None, "servers fill only status and version");
    assert_eq!(cmd(&d, "messageId").and_then(Value::as_i64), Some(123_456_789_012));
    assert_eq!(cmd(&d, "success").and_then(Value::as_bool), Some(true));
}

#[test]
fn every_decodable_method_is_typed_by_its_id_both_ways() {
    for (id, _, request_type, response_type) in REFERENCE.iter().filter(|r| !r.2.is_empty()) {
        let d = full(&request(1, reference_service(*id), *id, &[]));
        assert_eq!(d.type_name.as_str(), *request_type, "request of method {id}");
        let d = full(&response(1, *id, &[]));
        assert_eq!(d.type_name.as_str(), *response_type, "response of method {id}");
    }
}

#[test]
fn an_empty_message_with_required_fields_is_said_so() {
    let d = full(&request(1, 1, 3, &[]));
    assert_eq!(d.type_name.as_str(), "CloseRequestP2M");
    assert_eq!(ids(&d), ["tubemq.missing_required"]);
    assert_eq!(param(&d, "tubemq.missing_required", "type").and_then(Value::as_str), Some("CloseRequestP2M"));
    let fields = param(&d, "tubemq.missing_required", "fields").and_then(Value::as_list).unwrap();
    assert!(fields.iter().any(|f| f.as_str().is_some_and(|f| f.contains("clientId"))), "{fields:?}");
}

#[test]
fn a_request_to_the_wrong_service_is_flagged() {
    // a SendMessage (broker write, 3) sent as a master request (1)
    let d = full(&request(1, 1, 13, &send_request(b"x", 0, -1)));
    assert_eq!(d.type_name.as_str(), "SendMessageRequestP2B");
    assert_eq!(ids(&d), ["tubemq.service_mismatch"]);
    assert_eq!(param(&d, "tubemq.service_mismatch", "service_type").and_then(Value::as_i64), Some(1));
    assert_eq!(param(&d, "tubemq.service_mismatch", "expected").and_then(Value::as_i64), Some(3));
}

#[test]
fn a_response_is_not_checked_against_a_service() {
    // responses carry no service type; one that does is not refused
    let mut data = delimited(&enc("RpcConnHeader", vec![("flag", i32v(1))]));
    data.extend(delimited(&enc("ResponseHeader", vec![("status", Pv::EnumNumber(0)), ("serviceType", i32v(1))])));
    let body =
        enc("CommitOffsetResponseB2C", vec![("success", Pv::Bool(true)), ("errCode", i32v(200)), ("errMsg", s(""))]);
    data.extend(delimited(&enc("RspResponseBody", vec![("method", i32v(18)), ("data", b(&body))])));
    let d = full(&frame(1, &data, 8192));
    assert_eq!(d.type_name.as_str(), "CommitOffsetResponseB2C");
    assert!(ids(&d).is_empty(), "{:?}", d.findings);
}

#[test]
fn declared_but_undecodable_methods_are_named_not_decoded() {
    for (id, constant) in
        [(11, "BROKER_PRODUCER_REGISTER"), (14, "BROKER_PRODUCER_CLOSE"), (19, "BROKER_CONSUMER_CLOSE")]
    {
        let d = full(&request(1, reference_service(id), id, &[1, 2, 3]));
        assert_eq!(d.type_name.as_str(), format!("{constant}_REQUEST"));
        assert_eq!(ids(&d), ["tubemq.undecodable_method"]);
        assert_eq!(param(&d, "tubemq.undecodable_method", "length").and_then(Value::as_i64), Some(3));
        assert_eq!(d.command.as_ref().and_then(Value::as_map).map(Vec::len), Some(0));
        let d = full(&response(1, id, &[]));
        assert_eq!(d.type_name.as_str(), format!("{constant}_RESPONSE"));
    }
}

#[test]
fn an_unknown_method_is_one_type_with_an_empty_command() {
    let d = full(&request(1, 1, 99, &[9; 5]));
    assert_eq!(d.type_name.as_str(), "UNKNOWN_REQUEST");
    assert_eq!(rpc_int(&d, "method"), Some(99));
    assert_eq!(rpc(&d, "method_name"), None);
    assert_eq!(ids(&d), ["tubemq.unknown_method"]);
    assert_eq!(param(&d, "tubemq.unknown_method", "length").and_then(Value::as_i64), Some(5));
    assert!(d.command.is_some(), "an empty command, so that its response still pairs");
    let d = full(&response(1, 10, &[]));
    assert_eq!(d.type_name.as_str(), "UNKNOWN_RESPONSE");
}

#[test]
fn an_exception_is_its_own_type_with_the_first_line_of_its_trace() {
    let trace = "Topic not found\n\tat org.apache.inlong.X.y(X.java:1)";
    let d = full(&frame(2, &exception_data(1, "org.apache.inlong.tubemq.corebase.TubeException", trace), 8192));
    assert_eq!(d.type_name.as_str(), "RspExceptionBody");
    assert_eq!(rpc_str(&d, "status"), Some("ERROR"));
    assert_eq!(rpc(&d, "method"), None, "no method id travels with an exception");
    assert_eq!(ids(&d), ["tubemq.exception"]);
    assert_eq!(param(&d, "tubemq.exception", "message").and_then(Value::as_str), Some("Topic not found"));
    assert_eq!(param(&d, "tubemq.exception", "status").and_then(Value::as_str), Some("ERROR"));
    assert_eq!(cmd(&d, "stackTrace").and_then(Value::as_str), Some(trace));
}

#[test]
fn a_standby_master_is_told_apart_whatever_its_package() {
    for name in [
        "org.apache.inlong.tubemq.corebase.exception.StandbyException",
        "com.tencent.tubemq.corebase.exception.StandbyException",
        "StandbyException",
    ] {
        let d = full(&frame(2, &exception_data(1, name, "not the master"), 8192));
        assert_eq!(ids(&d), ["tubemq.standby_master"], "{name}");
        assert_eq!(param(&d, "tubemq.standby_master", "exception").and_then(Value::as_str), Some(name));
    }
    // a class merely ending in the same letters is not one
    let d = full(&frame(2, &exception_data(1, "x.NotStandbyException", ""), 8192));
    assert_eq!(ids(&d), ["tubemq.exception"]);
}

#[test]
fn fatal_and_unknown_statuses_are_named() {
    let d = full(&frame(2, &exception_data(2, "x.E", ""), 8192));
    assert_eq!(rpc_str(&d, "status"), Some("FATAL"));
    let d = full(&frame(2, &exception_data(9, "x.E", ""), 8192));
    assert_eq!(rpc_str(&d, "status"), Some("UNKNOWN"));
    assert_eq!(d.type_name.as_str(), "RspExceptionBody");
}

#[test]
fn a_flag_other_than_request_or_response_is_malformed() {
    for (flag, expected) in [(Some(2), Value::Int(2)), (Some(-1), Value::Int(-1)), (None, Value::Null)] {
        let header = match flag {
            Some(flag) => enc("RpcConnHeader", vec![("flag", i32v(flag))]),
            None => enc("RpcConnHeader", vec![("traceId", i64v(1))]),
        };
        let mut data = delimited(&header);
        data.extend(delimited(&enc("RequestHeader", vec![("serviceType", i32v(1))])));
        let d = full(&frame(1, &data, 8192));
        assert_eq!(d.type_name.as_str(), "MALFORMED");
        assert_eq!(ids(&d), ["tubemq.bad_flag"]);
        assert_eq!(param(&d, "tubemq.bad_flag", "flag"), Some(&expected));
        assert!(d.command.is_none());
    }
}

#[test]
fn an_envelope_missing_a_message_names_it() {
    let header = delimited(&enc("RpcConnHeader", vec![("flag", i32v(0))]));
    let d = full(&frame(1, &header, 8192));
    assert_eq!(d.type_name.as_str(), "MALFORMED");
    assert_eq!(ids(&d), ["tubemq.envelope_cut"]);
    assert_eq!(param(&d, "tubemq.envelope_cut", "message").and_then(Value::as_str), Some("RequestHeader"));
    let mut two = header.clone();
    two.extend(delimited(&enc("RequestHeader", vec![("serviceType", i32v(1))])));
    let d = full(&frame(1, &two, 8192));
    assert_eq!(param(&d, "tubemq.envelope_cut", "message").and_then(Value::as_str), Some("RequestBody"));
    let d = full(&frame(1, &[], 8192));
    assert_eq!(param(&d, "tubemq.envelope_cut", "message").and_then(Value::as_str), Some("RpcConnHeader"));
}

#[test]
fn a_length_prefix_past_the_data_is_an_envelope_cut() {
    // RpcConnHeader announced as 50 bytes, 2 there
    let d = full(&frame(1, &[50, 0x08, 0x00], 8192));
    assert_eq!(ids(&d), ["tubemq.envelope_cut"]);
}

#[test]
fn an_unparsable_envelope_message_is_named() {
    // wire type 7 does not exist
    let mut data = delimited(&[0x0F, 0x00]);
    data.extend(delimited(&enc("RequestHeader", vec![])));
    let d = full(&frame(1, &data, 8192));
    assert_eq!(d.type_name.as_str(), "MALFORMED");
    assert_eq!(ids(&d), ["tubemq.unparsable"]);
    assert_eq!(param(&d, "tubemq.unparsable", "message").and_then(Value::as_str), Some("RpcConnHeader"));
}

#[test]
fn an_unparsable_method_message_keeps_its_type_without_a_command() {
    let d = full(&request(1, 1, 1, &[0x0F, 0x00]));
    assert_eq!(d.type_name.as_str(), "RegisterRequestP2M");
    assert!(d.command.is_none());
    assert_eq!(ids(&d), ["tubemq.unparsable"]);
    assert_eq!(param(&d, "tubemq.unparsable", "message").and_then(Value::as_str), Some("RegisterRequestP2M"));
}

#[test]
fn a_request_body_without_a_method_is_malformed() {
    let mut data = delimited(&enc("RpcConnHeader", vec![("flag", i32v(0))]));
    data.extend(delimited(&enc("RequestHeader", vec![("serviceType", i32v(1))])));
    data.extend(delimited(&enc("RequestBody", vec![("timeout", i64v(5))])));
    let d = full(&frame(1, &data, 8192));
    assert_eq!(d.type_name.as_str(), "MALFORMED");
    assert_eq!(param(&d, "tubemq.unparsable", "message").and_then(Value::as_str), Some("RequestBody"));
}

#[test]
fn a_frame_shorter_than_its_header_is_malformed_without_a_body() {
    for n in 0..12 {
        let d = decode(&request(1, 1, 3, &[])[..n], 0, false);
        assert_eq!(d.type_name.as_str(), "MALFORMED");
        assert_eq!(ids(&d), ["tubemq.too_short"], "{n} bytes");
        assert_eq!(param(&d, "tubemq.too_short", "length").and_then(Value::as_i64), Some(n as i64));
        assert!(d.tube().is_none());
    }
}

// ---------------------------------------------------------------------------------------------- the blocks

#[test]
fn the_blocks_are_joined_wherever_they_are_cut() {
    // the same envelope in blocks of 1 .. 40 bytes: boundaries fall inside varints and length prefixes
    let body = enc(
        "HeartBeatRequestC2B",
        vec![
            ("clientId", s("consumer-with-a-long-client-id-0123456789")),
            ("groupName", s("g")),
            ("readStatus", i32v(-2)),
            ("partitionInfo", strs(&["1:h:8123#t:0", "1:h:8123#t:1"])),
        ],
    );
    let data = request_data(2, 16, &body);
    let whole = full(&frame(4, &data, 8192));
    assert!(whole.findings.is_empty(), "{:?}", whole.findings);
    for block in 1..=40 {
        let d = full(&frame(4, &data, block));
        assert_eq!(d.type_name, whole.type_name, "blocks of {block}");
        assert_eq!(d.command, whole.command, "blocks of {block}");
        assert!(d.findings.is_empty(), "blocks of {block}: {:?}", d.findings);
        let rpc_without_blocks = |d: &Decoded| -> Map {
            d.tube().unwrap().rpc.iter().filter(|(k, _)| k.as_str() != "blocks").cloned().collect()
        };
        assert_eq!(rpc_without_blocks(&d), rpc_without_blocks(&whole));
    }
}

#[test]
fn blocks_of_8k_are_normal_and_a_wider_one_is_flagged() {
    let data = request_data(3, 13, &send_request(&vec![1; 20_000], 0, -1));
    let d = full(&frame(1, &data, 8192));
    assert!(!ids(&d).contains(&"tubemq.block_oversized"), "{:?}", d.findings);
    let d = full(&frame(1, &data, 8193));
    assert_eq!(ids(&d), ["tubemq.block_oversized"]);
    assert_eq!(param(&d, "tubemq.block_oversized", "length").and_then(Value::as_i64), Some(8193));
    assert_eq!(param(&d, "tubemq.block_oversized", "limit").and_then(Value::as_i64), Some(8192));
    assert_eq!(messages(&d).len(), 1, "still decoded");
}

#[test]
fn bytes_lost_at_the_end_make_a_truncated_frame_of_the_full_size() {
    let f = request(1, 3, 13, &send_request(&[7; 300], 0, -1));
    let cut = f.len() - 100;
    let d = decode(&f[..cut], 100, false);
    assert_eq!(d.size, f.len());
    assert!(ids(&d).contains(&"tubemq.truncated"), "{:?}", d.findings);
    assert_eq!(param(&d, "tubemq.truncated", "captured").and_then(Value::as_i64), Some(cut as i64));
    assert_eq!(param(&d, "tubemq.truncated", "size").and_then(Value::as_i64), Some(f.len() as i64));
    assert!(!ids(&d).contains(&"tubemq.trailing_bytes"));
}

#[test]
fn a_frame_ending_inside_its_blocks_is_truncated_even_without_a_gap() {
    let f = request(1, 1, 3, &enc("CloseRequestP2M", vec![("clientId", s("abc"))]));
    let d = decode(&f[..f.len() - 2], 0, false);
    assert!(ids(&d).contains(&"tubemq.truncated"), "{:?}", d.findings);
    // fewer blocks than the list size says
    let mut two_blocks = frame(1, &request_data(1, 3, &enc("CloseRequestP2M", vec![("clientId", s("abc"))])), 8);
    two_blocks[8..12].copy_from_slice(&200u32.to_be_bytes());
    let d = decode(&two_blocks, 0, false);
    assert!(ids(&d).contains(&"tubemq.truncated"), "{:?}", d.findings);
}

#[test]
fn bytes_after_the_envelope_are_trailing() {
    let mut data = request_data(1, 3, &enc("CloseRequestP2M", vec![("clientId", s("abc"))]));
    data.extend_from_slice(&[0; 6]);
    let d = full(&frame(1, &data, 8192));
    assert_eq!(d.type_name.as_str(), "CloseRequestP2M");
    assert_eq!(ids(&d), ["tubemq.trailing_bytes"]);
    assert_eq!(param(&d, "tubemq.trailing_bytes", "length").and_then(Value::as_i64), Some(6));
}

// -------------------------------------------------------------------------------------- carried messages

#[test]
fn a_sent_message_without_a_checksum_is_absent() {
    let d = full(&request(1, 3, 13, &send_request(b"hello tubemq", 0, -1)));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let msgs = messages(&d);
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    assert_eq!(m.get("payload").and_then(Value::as_bytes), Some(&b"hello tubemq"[..]));
    assert_eq!(m.get("payload_size").and_then(Value::as_i64), Some(12));
    assert_eq!(m.get("checksum").and_then(Value::as_str), Some("absent"));
    assert_eq!(m.get("checksum_wire").and_then(Value::as_i64), Some(-1));
    assert_eq!(m.get("flag").and_then(Value::as_i64), Some(0));
    assert_eq!(m.get("message_id"), None);
    assert_eq!(cmd(&d, "data"), None, "the data became the message");
    assert_eq!(cmd(&d, "topicName").and_then(Value::as_str), Some("orders"));
    assert_eq!(cmd(&d, "sentAddr").and_then(Value::as_i64), Some(0x0A00_0001));
}

#[test]
fn a_sent_message_with_its_crc32_is_valid() {
    let data = b"payload bytes";
    let d = full(&request(1, 3, 13, &send_request(data, 0, tube_checksum(data))));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    assert_eq!(messages(&d)[0].get("checksum").and_then(Value::as_str), Some("valid"));
    assert_eq!(messages(&d)[0].get("checksum_computed"), None, "said only when it differs");
}

#[test]
fn a_wrong_checksum_is_invalid_with_both_values() {
    let data = b"payload bytes";
    let right = tube_checksum(data);
    let d = full(&request(1, 3, 13, &send_request(data, 0, right ^ 1)));
    assert_eq!(ids(&d), ["tubemq.checksum_invalid"]);
    assert_eq!(param(&d, "tubemq.checksum_invalid", "wire").and_then(Value::as_i64), Some(i64::from(right ^ 1)));
    assert_eq!(param(&d, "tubemq.checksum_invalid", "computed").and_then(Value::as_i64), Some(i64::from(right)));
    let m = &messages(&d)[0];
    assert_eq!(m.get("checksum").and_then(Value::as_str), Some("invalid"));
    assert_eq!(m.get("checksum_computed").and_then(Value::as_i64), Some(i64::from(right)));
}

#[test]
fn the_checksum_is_zip_crc32_masked_to_31_bits() {
    // the CRC-32 check value of "123456789" is 0xCBF43926 (IEEE 802.3); masked: 0x4BF43926
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(message_checksum(b"123456789"), 0x4BF4_3926);
    let mut rng = Lcg(99);
    for len in 0..200 {
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        assert_eq!(message_checksum(&data), i64::from(tube_checksum(&data)), "{len} bytes");
    }
}

#[test]
fn attributes_are_split_off_and_the_checksum_covers_them() {
    let data = with_attributes("k1=v1&k2=v2", b"the payload");
    let d = full(&request(1, 3, 13, &send_request(&data, 1, tube_checksum(&data))));
    assert!(d.findings.is_empty(), "{:?}", d.findings);
    let m = &messages(&d)[0];
    assert_eq!(m.get("attributes").and_then(Value::as_str), Some("k1=v1&k2=v2"));
    assert_eq!(m.get("payload").and_then(Value::as_bytes), Some(&b"the payload"[..]));
    assert_eq!(m.get("payload_size").and_then(Value::as_i64), Some(11));
    assert_eq!(m.get("checksum").and_then(Value::as_str), Some("valid"));
}

#[test]
fn without_flag_bit_0_the_data_is_all_payload() {
    // flag 2: bit 0 clear, so the attribute-like prefix is payload
    let data = with_attributes("a=b", b"xyz");
    let d = full(&request(1, 3, 13, &send_request(&data, 2, -1)));
    let m = &messages(&d)[0];
    assert_eq!(m.get("attributes"), None);
    assert_eq!(m.get("payload_size").and_then(Value::as_i64), Some(data.len() as i64));
}

#[test]
fn an_attribute_length_past_the_data_is_flagged() {
    for (data, attr_len) in [
        (vec![0, 0, 0, 50, b'a'], Value::Int(50)),
        ((-1i32).to_be_bytes().to_vec(), Value::Int(-1)),
        (vec![0, 0], Value::Null),
    ] {
        let d = full(&request(1, 3, 13, &send_request(&data, 1, -1)));
        assert_eq!(ids(&d), ["tubemq.message_attributes"], "{data:?}");
        assert_eq!(param(&d, "tubemq.message_attributes", "attr_len"), Some(&attr_len));
        assert_eq!(
            param(&d, "tubemq.message_attributes", "data_size").and_then(Value::as_i64),
            Some(data.len() as i64)
        );
        // the whole data is kept as the payload
        assert_eq!(messages(&d)[0].get("payload_size").and_then(Value::as_i64), Some(data.len() as i64));
    }
}

#[test]
fn delivered_messages_are_each_checked() {
    let good = with_attributes("x=1", b"first");
    let bad = b"second".to_vec();
    let plain = b"third".to_vec();
    let body = get_response(
        vec![
            transfered(1001, &good, 1, tube_checksum(&good)),
            transfered(1002, &bad, 0, tube_checksum(&bad).wrapping_add(1)),
            transfered(1003, &plain, 0, -1),
        ],
        200,
    );
    let d = full(&response(8, 17, &body));
    assert_eq!(d.type_name.as_str(), "GetMessageResponseB2C");
    let msgs = messages(&d);
    assert_eq!(msgs.len(), 3);
    let verdicts: Vec<_> = msgs.iter().map(|m| m.get("checksum").and_then(Value::as_str)).collect();
    assert_eq!(verdicts, [Some("valid"), Some("invalid"), Some("absent")]);
    let message_ids: Vec<_> = msgs.iter().map(|m| m.get("message_id").and_then(Value::as_i64)).collect();
    assert_eq!(message_ids, [Some(1001), Some(1002), Some(1003)]);
    assert_eq!(msgs[0].get("payload").and_then(Value::as_bytes), Some(&b"first"[..]));
    assert_eq!(ids(&d), ["tubemq.checksum_invalid"]);
    assert_eq!(param(&d, "tubemq.checksum_invalid", "message_id").and_then(Value::as_i64), Some(1002));
    assert_eq!(cmd(&d, "messages"), None, "the messages became the frame's messages");
    assert_eq!(cmd(&d, "currOffset").and_then(Value::as_i64), Some(4096));
    assert_eq!(checksum_verdict(msgs), "invalid");
}

/// Two bytes a message on the wire, a map each in memory: a frame may carry millions, a record lists at most
/// `max_batch_entries` and counts the rest, whose checksums still decide the frame's verdict.
#[test]
fn messages_beyond_the_cap_are_counted_and_checked_not_listed() {
    let good = b"ok".to_vec();
    let bad = b"bad".to_vec();
    let mut carried: Vec<Pv> = (0..5).map(|i| transfered(i, &good, 0, tube_checksum(&good))).collect();
    carried.push(transfered(5, &bad, 0, tube_checksum(&bad).wrapping_add(1)));
    let frame = response(8, 17, &get_response(carried, 200));
    let caps = |listed| DecodeCaps { max_batch_entries: listed, ..DecodeCaps::decompressing(0) };
    let d = decode_within(&frame, 0, false, caps(3));
    let listed: Vec<_> = messages(&d).iter().map(|m| m.get("message_id").and_then(Value::as_i64)).collect();
    assert_eq!(listed, [Some(0), Some(1), Some(2)]);
    assert_eq!(ids(&d), ["tubemq.messages_truncated"], "the unlisted message's problem is counted, not listed");
    let truncated = |key| param(&d, "tubemq.messages_truncated", key).and_then(Value::as_i64);
    assert_eq!((truncated("messages"), truncated("kept"), truncated("more")), (Some(6), Some(3), Some(3)));
    assert_eq!(truncated("unlisted_problems"), Some(1));
    let tube = d.tube().expect("a TubeMQ body");
    let whole = tube.whole.as_ref().expect("the whole is counted");
    assert_eq!(whole.summary.get("count").and_then(Value::as_i64), Some(6));
    assert_eq!(whole.summary.get("bytes").and_then(Value::as_i64), Some(5 * 2 + 3));
    assert_eq!(tube.checksum(), "invalid", "the verdict covers the messages not listed");
    assert_eq!(checksum_verdict(messages(&d)), "valid", "the listed ones alone would pass");

    // at the cap: nothing is cut, nothing said
    let d = decode_within(&frame, 0, false, caps(6));
    assert_eq!(messages(&d).len(), 6);
    assert!(d.tube().is_some_and(|t| t.whole.is_none()));
    assert_eq!(ids(&d), ["tubemq.checksum_invalid"]);
}

#[test]
fn a_brief_decode_keeps_sizes_not_payloads() {
    let data = b"0123456789".to_vec();
    let body = get_response(vec![transfered(1, &data, 0, tube_checksum(&data))], 200);
    let d = decode(&response(8, 17, &body), 0, true);
    let m = &messages(&d)[0];
    assert_eq!(m.get("payload"), None);
    assert_eq!(m.get("payload_size").and_then(Value::as_i64), Some(10));
    assert_eq!(m.get("checksum").and_then(Value::as_str), Some("valid"));
}

#[test]
fn an_empty_poll_has_no_messages() {
    let d = full(&response(8, 17, &get_response(vec![], 200)));
    assert!(messages(&d).is_empty());
    assert_eq!(checksum_verdict(messages(&d)), "absent");
}

#[test]
fn the_checksum_verdict_of_a_frame_is_its_worst() {
    let with = |verdicts: &[&str]| -> Vec<Value> {
        verdicts
            .iter()
            .map(|v| {
                Value::Map(vec![(
                    pulsar_dissect_engine::value::Text::Owned("checksum".into()),
                    Value::from(v.to_string()),
                )])
            })
            .collect()
    };
    assert_eq!(checksum_verdict(&with(&["valid", "valid"])), "valid");
    assert_eq!(checksum_verdict(&with(&["valid", "absent"])), "absent");
    assert_eq!(checksum_verdict(&with(&["absent", "invalid", "valid"])), "invalid");
    assert_eq!(checksum_verdict(&[Value::Map(vec![])]), "absent");
}

// ----------------------------------------------------------------------------------------- error codes

#[test]
fn an_error_code_in_a_response_is_a_finding_with_its_name() {
    let body = enc("CloseResponseM2P", vec![("success", Pv::Bool(false)), ("errCode", i32v(403)), ("errMsg", s("no"))]);
    let d = full(&response(1, 3, &body));
    assert_eq!(ids(&d), ["tubemq.error_code"]);
    assert_eq!(param(&d, "tubemq.error_code", "code").and_then(Value::as_i64), Some(403));
    assert_eq!(param(&d, "tubemq.error_code", "name").and_then(Value::as_str), Some("FORBIDDEN"));
    assert_eq!(param(&d, "tubemq.error_code", "type").and_then(Value::as_str), Some("CloseResponseM2P"));
}

#[test]
fn an_unknown_error_code_has_no_name() {
    let body = enc("CloseResponseM2P", vec![("success", Pv::Bool(false)), ("errCode", i32v(777)), ("errMsg", s(""))]);
    let d = full(&response(1, 3, &body));
    assert_eq!(param(&d, "tubemq.error_code", "name"), Some(&Value::Null));
}

#[test]
fn success_is_no_finding() {
    let body = enc("CloseResponseM2P", vec![("success", Pv::Bool(true)), ("errCode", i32v(200)), ("errMsg", s(""))]);
    assert!(full(&response(1, 3, &body)).findings.is_empty());
}

#[test]
fn an_empty_poll_is_a_wait_not_an_error() {
    for code in [404, 405, 406, 407, 408] {
        let d = full(&response(1, 17, &get_response(vec![], code)));
        assert_eq!(ids(&d), ["tubemq.consume_wait"], "{code}");
        assert_eq!(param(&d, "tubemq.consume_wait", "code").and_then(Value::as_i64), Some(i64::from(code)));
    }
    // the same codes from another method, and other codes from GetMessage, are errors
    let d = full(&response(1, 17, &get_response(vec![], 410)));
    assert_eq!(ids(&d), ["tubemq.error_code"]);
    let body =
        enc("CommitOffsetResponseB2C", vec![("success", Pv::Bool(false)), ("errCode", i32v(404)), ("errMsg", s(""))]);
    assert_eq!(ids(&full(&response(1, 18, &body))), ["tubemq.error_code"]);
}

#[test]
fn an_error_code_in_a_request_is_not_judged() {
    // requests carry no errCode in the contract; an unknown field is not read as one
    let d = full(&request(1, 1, 3, &enc("CloseRequestP2M", vec![("clientId", s("x"))])));
    assert!(d.findings.is_empty());
}

// ------------------------------------------------------------------------------- structured strings, ints

#[test]
fn broker_lists_are_read_beside_the_strings() {
    let body = enc(
        "RegisterResponseM2P",
        vec![
            ("success", Pv::Bool(true)),
            ("errCode", i32v(200)),
            ("errMsg", s("OK")),
            ("brokerCheckSum", i64v(5)),
            ("brokerInfos", strs(&["1:10.0.0.1:8123", "garbage"])),
        ],
    );
    let d = full(&response(1, 1, &body));
    let decoded = cmd(&d, "brokerInfos_decoded").and_then(Value::as_list).expect("read beside");
    assert_eq!(decoded.len(), 2);
    assert_eq!(decoded[0].get("broker_id").and_then(Value::as_i64), Some(1));
    assert_eq!(decoded[0].get("host").and_then(Value::as_str), Some("10.0.0.1"));
    assert_eq!(decoded[0].get("port").and_then(Value::as_i64), Some(8123));
    assert_eq!(decoded[1], Value::Null, "a string that does not read is null in its place");
    assert_eq!(cmd(&d, "brokerInfos").and_then(Value::as_list).map(<[Value]>::len), Some(2), "the strings stay");
}

#[test]
fn heartbeat_partitions_are_read_as_partition_to_string_writes_them() {
    // the consumer sends Partition.toString(): brokerId:host:port#topic:partitionId (upstream
    // SimpleClientBalanceConsumer / Partition.builderPartitionStr), not the layout of the .proto comment
    let body = enc(
        "HeartBeatRequestC2B",
        vec![
            ("clientId", s("c")),
            ("groupName", s("g")),
            ("readStatus", i32v(0)),
            ("partitionInfo", strs(&["5:10.0.0.2:8123#orders:3", "5:10.0.0.2:8123:orders:3:0"])),
        ],
    );
    let d = full(&request(1, 2, 16, &body));
    let parts = cmd(&d, "partitionInfo_decoded").and_then(Value::as_list).expect("read beside");
    assert_eq!(parts[0].get("broker_id").and_then(Value::as_i64), Some(5));
    assert_eq!(parts[0].get("topic").and_then(Value::as_str), Some("orders"));
    assert_eq!(parts[0].get("partition").and_then(Value::as_i64), Some(3));
    assert_eq!(parts[1], Value::Null);
}

#[test]
fn a_rebalance_event_is_read_inside_the_heartbeat() {
    let event = msg(
        "EventProto",
        vec![
            ("rebalanceId", i64v(31)),
            ("opType", i32v(2)),
            ("status", i32v(0)),
            ("subscribeInfo", strs(&["c-1@g#3:h:8123#orders:0"])),
        ],
    );
    let body = enc(
        "HeartResponseM2C",
        vec![("success", Pv::Bool(true)), ("errCode", i32v(200)), ("errMsg", s("")), ("event", m(event))],
    );
    let d = full(&response(1, 5, &body));
    let event = cmd(&d, "event").expect("the event");
    assert_eq!(event.get("opType_name").and_then(Value::as_str), Some("DISCONNECT"));
    let subs = event.get("subscribeInfo_decoded").and_then(Value::as_list).unwrap();
    assert_eq!(subs[0].get("group").and_then(Value::as_str), Some("g"));
    assert_eq!(subs[0].get("topic").and_then(Value::as_str), Some("orders"));
    assert_eq!(subs[0].get("partition").and_then(Value::as_i64), Some(0));
}

#[test]
fn an_optype_outside_a_rebalance_event_is_not_named() {
    // RegisterRequestC2B.opType is 31/32 (register / unregister), not an EventType
    let body = enc(
        "RegisterRequestC2B",
        vec![
            ("opType", i32v(1)),
            ("clientId", s("c")),
            ("groupName", s("g")),
            ("topicName", s("t")),
            ("partitionId", i32v(0)),
            ("readStatus", i32v(0)),
        ],
    );
    let d = full(&request(1, 2, 15, &body));
    assert_eq!(d.type_name.as_str(), "RegisterRequestC2B");
    assert_eq!(cmd(&d, "opType_name"), None);
}

#[test]
fn negative_int32_fields_keep_their_sign() {
    // an int32 of -1 is a ten-byte varint on the wire
    let body = enc(
        "GetMessageRequestC2B",
        vec![("clientId", s("c")), ("partitionId", i32v(-1)), ("groupName", s("g")), ("topicName", s("t"))],
    );
    let d = full(&request(1, 2, 17, &body));
    assert_eq!(cmd(&d, "partitionId").and_then(Value::as_i64), Some(-1));
    let d = full(&request(1, -5, 17, &body));
    assert_eq!(rpc_int(&d, "service_type"), Some(-5));
    assert_eq!(rpc(&d, "service"), None);
}

// ------------------------------------------------------------------------------------------ hostile input

#[test]
fn hostile_frames_never_panic() {
    // random bytes after a valid header, and random corruptions of real frames: decode is total
    let mut rng = Lcg(0xDEC0DE);
    let reals = [
        request(1, 3, 13, &send_request(&with_attributes("a=1", b"payload"), 1, -1)),
        response(2, 17, &get_response(vec![transfered(1, b"abc", 0, -1)], 200)),
        frame(3, &exception_data(1, "x.StandbyException", "t"), 5),
    ];
    for _ in 0..2000 {
        let mut f = reals[rng.below(3) as usize].clone();
        for _ in 0..=rng.below(6) {
            let at = rng.below(f.len() as u64) as usize;
            f[at] = rng.next() as u8;
        }
        let cut = rng.below(f.len() as u64 + 1) as usize;
        let d = decode(&f[..cut], rng.below(3) as usize, rng.below(2) == 0);
        assert!(d.size >= cut);
    }
    for _ in 0..500 {
        let len = rng.below(80) as usize;
        let mut f: Vec<u8> = TOKEN.to_vec();
        f.extend((0..len).map(|_| rng.next() as u8));
        let _ = decode(&f, 0, false);
    }
}
