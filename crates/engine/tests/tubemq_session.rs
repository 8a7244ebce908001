//! TubeMQ's structured strings (`tubemq::info`) and its conversation state (`tubemq::session`) under the
//! generic pairing, over frames from the independent encoder, with the command table built as
//! `dissector/protocols/tubemq/commands.py` builds it (requests wait under the frame's serial; a response
//! answers its method's request; an exception answers any).

use pulsar_dissect_engine::analysis::table::{CommandSpec, CommandTable, Key, KeyField, OpenedBy, Space};
use pulsar_dissect_engine::analysis::{intern, map_get, Analyzer, Frame, Output, PairingOptions, ProtocolAnalysis};
use pulsar_dissect_engine::model::Decoded;
use pulsar_dissect_engine::protocols::tubemq::info::{broker_info, partition_info, reader, subscribe_info, topic_info};
use pulsar_dissect_engine::protocols::tubemq::session::TubeSessions;
use pulsar_dissect_engine::protocols::tubemq::{decode, METHODS};
use pulsar_dissect_engine::value::{Map, Value};

mod tubemq_support;
use prost_reflect::Value as Pv;
use tubemq_support::*;

// ------------------------------------------------------------------------------------------------- info

fn int(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

fn string<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

#[test]
fn a_broker_reads_with_or_without_its_port() {
    let b = broker_info("12:broker-a.example:8123").unwrap();
    assert_eq!(
        (int(&b, "broker_id"), string(&b, "host"), int(&b, "port")),
        (Some(12), Some("broker-a.example"), Some(8123))
    );
    let b = broker_info("12:10.1.2.3").unwrap();
    assert_eq!(string(&b, "host"), Some("10.1.2.3"));
    assert_eq!(b.get("port"), None);
}

#[test]
fn a_broker_that_does_not_read_is_none() {
    for text in ["", "x:host:1", "1", "1:h:port", "1:h:1:extra", "1.5:h:1"] {
        assert!(broker_info(text).is_none(), "{text:?}");
    }
}

#[test]
fn a_partition_reads_its_broker_and_topic() {
    let p = partition_info("3:10.0.0.1:8123#orders:2").unwrap();
    assert_eq!(int(&p, "port"), Some(8123));
    assert_eq!(string(&p, "topic"), Some("orders"));
    assert_eq!(int(&p, "partition"), Some(2));
    // the topic is what precedes the last colon
    let p = partition_info("3:h:1#ns:topic:7").unwrap();
    assert_eq!(string(&p, "topic"), Some("ns:topic"));
    assert_eq!(int(&p, "partition"), Some(7));
    assert!(partition_info("3:h:1").is_none());
    assert!(partition_info("3:h:1#topic").is_none());
}

#[test]
fn a_subscription_reads_consumer_group_broker_and_partition() {
    // SubscribeInfo: consumerId@group#brokerId:host:port#topic:partitionId (TokenConstants' separators)
    let s = subscribe_info("c-1_10.0.0.9-1234-1700000000000-1@group-a#5:10.0.0.2:8123#orders:3").unwrap();
    assert_eq!(string(&s, "consumer_id"), Some("c-1_10.0.0.9-1234-1700000000000-1"));
    assert_eq!(string(&s, "group"), Some("group-a"));
    assert_eq!(int(&s, "broker_id"), Some(5));
    assert_eq!(string(&s, "host"), Some("10.0.0.2"));
    assert_eq!(string(&s, "topic"), Some("orders"));
    assert_eq!(int(&s, "partition"), Some(3));
}

#[test]
fn a_subscription_in_another_layout_is_none() {
    for text in [
        "c@g-5:h:8123-orders:3", // the older layout the .proto comment gives
        "c@g#5:h:8123",
        "c@g#5:h:8123#orders:3#more",
        "c#5:h:8123#orders:3",
    ] {
        assert!(subscribe_info(text).is_none(), "{text:?}");
    }
}

#[test]
fn a_topic_placement_lists_its_brokers() {
    let t = topic_info("orders#1:4:2,2:8:3#1048576").unwrap();
    assert_eq!(string(&t, "topic"), Some("orders"));
    let brokers = t.get("brokers").and_then(Value::as_list).unwrap();
    let rows: Vec<_> = brokers.iter().map(|b| (int(b, "broker_id"), int(b, "partitions"), int(b, "stores"))).collect();
    assert_eq!(rows, [(Some(1), Some(4), Some(2)), (Some(2), Some(8), Some(3))]);
    assert_eq!(int(&t, "max_msg_size"), Some(1_048_576));
}

#[test]
fn a_topic_placement_may_omit_its_size() {
    for text in ["orders#1:4:2", "orders#1:4:2#", " orders#1:4:2 "] {
        let t = topic_info(text).unwrap_or_else(|| panic!("{text:?}"));
        assert_eq!(t.get("max_msg_size"), None, "{text:?}");
        assert_eq!(t.get("brokers").and_then(Value::as_list).map(<[Value]>::len), Some(1));
    }
}

#[test]
fn a_topic_placement_that_does_not_read_is_none() {
    for text in ["orders", "orders#1:4", "orders#1:4:2:9", "orders#1:x:2", "orders#1:4:2#big", "t#1:1:1#1#2"] {
        assert!(topic_info(text).is_none(), "{text:?}");
    }
}

#[test]
fn the_readers_are_picked_by_field_name() {
    let read = |field: &str, text: &str| reader(field).and_then(|r| r(text));
    assert_eq!(read("brokerInfos", "1:h:2"), broker_info("1:h:2"));
    assert_eq!(read("topicInfos", "t#1:1:1"), topic_info("t#1:1:1"));
    assert_eq!(read("topicInfo", "t#1:1:1"), topic_info("t#1:1:1"));
    assert_eq!(read("subscribeInfo", "c@g#1:h:2#t:0"), subscribe_info("c@g#1:h:2#t:0"));
    assert_eq!(read("partitionInfo", "1:h:2#t:0"), partition_info("1:h:2#t:0"));
    for field in ["topicList", "failureInfo", "brokerInfo", ""] {
        assert!(reader(field).is_none(), "{field}");
    }
}

// ---------------------------------------------------------------------------------------------- session

fn by_serial(space: usize) -> Key {
    Key { space, fields: vec![KeyField::Serial], names: vec!["@serial".into()] }
}

fn spec(name: &str, opens: Option<Key>, answers: Vec<Key>, answer_types: Option<Vec<String>>) -> CommandSpec {
    let remember = if opens.is_some() {
        ["clientId", "groupName", "topicName", "partitionId"].map(String::from).to_vec()
    } else {
        vec![]
    };
    CommandSpec { name: intern(name), scope: None, opens, answers, answer_types, interim: None, remember }
}

/// commands.py's table: per method its request (waits under the serial) and its response (answers it).
fn tube_table() -> CommandTable {
    let mut table = CommandTable::default();
    let serial = table.space(Space {
        name: "serial".into(),
        slot: false,
        duplicates: true,
        unmatched: true,
        unanswered: true,
        opened_by: OpenedBy::Client,
    });
    for method in &METHODS {
        let request = method.request.map_or_else(|| format!("{}_REQUEST", method.constant), str::to_owned);
        let response = method.response.map_or_else(|| format!("{}_RESPONSE", method.constant), str::to_owned);
        table.add(spec(&request, Some(by_serial(serial)), vec![], None));
        table.add(spec(&response, None, vec![by_serial(serial)], Some(vec![request.clone()])));
    }
    table.add(spec("UNKNOWN_REQUEST", Some(by_serial(serial)), vec![], None));
    table.add(spec("UNKNOWN_RESPONSE", None, vec![by_serial(serial)], Some(vec!["UNKNOWN_REQUEST".into()])));
    table.add(spec("RspExceptionBody", None, vec![by_serial(serial)], None));
    table
}

struct Conversation {
    analyzer: Analyzer,
    index: u64,
}

impl Conversation {
    fn new() -> Conversation {
        let mut analyzer = Analyzer::new(PairingOptions {
            request_timeout: 30.0,
            request_timeout_value: Value::Int(30),
            max_pending_requests: 100,
        });
        analyzer.add_protocol(
            "tubemq",
            ProtocolAnalysis {
                table: tube_table(),
                default_to_server: "to_broker".into(),
                sessions: Some(Box::new(TubeSessions)),
            },
        );
        Conversation { analyzer, index: 0 }
    }

    /// Decode the frame and feed it; (notes, finding ids) of its annotation.
    fn send(&mut self, bytes: &[u8], to_client: bool, time: f64) -> (Map, Vec<String>) {
        self.index += 1;
        let d: Decoded = decode(bytes, 0, false);
        let (src, dst, direction) = if to_client {
            ("10.0.0.1:8123", "10.0.0.9:5000", "to_client")
        } else {
            ("10.0.0.9:5000", "10.0.0.1:8123", "to_broker")
        };
        let frame = Frame {
            index: self.index,
            protocol: "tubemq",
            conn: 1,
            src,
            dst,
            direction,
            time,
            packet: self.index,
            pdu: &d,
        };
        let mut out = Vec::new();
        self.analyzer.frame(&frame, &mut out);
        match out.into_iter().find(|o| matches!(o, Output::Annotated { .. })) {
            Some(Output::Annotated { notes, findings, .. }) => {
                (notes, findings.iter().map(|f| f.id.as_str().to_owned()).collect())
            }
            _ => panic!("no annotation"),
        }
    }
}

fn get_message_request(serial: u32) -> Vec<u8> {
    let body = enc(
        "GetMessageRequestC2B",
        vec![("clientId", s("c-7")), ("partitionId", i32v(4)), ("groupName", s("grp")), ("topicName", s("orders"))],
    );
    request(serial, 2, 17, &body)
}

fn get_message_response(serial: u32) -> Vec<u8> {
    let body = enc("GetMessageResponseB2C", vec![("success", Pv::Bool(true)), ("errCode", i32v(200))]);
    response(serial, 17, &body)
}

#[test]
fn a_request_says_what_it_is_about() {
    let mut c = Conversation::new();
    let (notes, findings) = c.send(&get_message_request(1), false, 1.0);
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(map_get(&notes, "topic").and_then(Value::as_str), Some("orders"));
    assert_eq!(map_get(&notes, "partition").and_then(Value::as_i64), Some(4));
    assert_eq!(map_get(&notes, "client_id").and_then(Value::as_str), Some("c-7"));
    assert_eq!(map_get(&notes, "group").and_then(Value::as_str), Some("grp"));
}

#[test]
fn a_response_pairs_by_serial_and_learns_from_its_request() {
    let mut c = Conversation::new();
    c.send(&get_message_request(41), false, 1.0);
    c.send(&get_message_request(42), false, 1.1);
    let (notes, findings) = c.send(&get_message_response(42), true, 1.6);
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(map_get(&notes, "answers").and_then(Value::as_i64), Some(2));
    assert_eq!(map_get(&notes, "latency_ms"), Some(&Value::Float(500.0)));
    assert_eq!(map_get(&notes, "request_type").and_then(Value::as_str), Some("GetMessageRequestC2B"));
    // the response names none of them: learnt from the request it answers
    assert_eq!(map_get(&notes, "topic").and_then(Value::as_str), Some("orders"));
    assert_eq!(map_get(&notes, "client_id").and_then(Value::as_str), Some("c-7"));
    assert_eq!(map_get(&notes, "partition").and_then(Value::as_i64), Some(4));
}

#[test]
fn a_response_to_no_waiting_serial_is_unmatched() {
    let mut c = Conversation::new();
    c.send(&get_message_request(1), false, 1.0);
    let (notes, findings) = c.send(&get_message_response(2), true, 1.5);
    assert_eq!(findings, ["response.unmatched"]);
    assert_eq!(map_get(&notes, "topic"), None);
}

#[test]
fn a_response_of_another_method_does_not_answer() {
    let mut c = Conversation::new();
    c.send(&get_message_request(5), false, 1.0);
    let body =
        enc("CommitOffsetResponseB2C", vec![("success", Pv::Bool(true)), ("errCode", i32v(200)), ("errMsg", s(""))]);
    let (_, findings) = c.send(&response(5, 18, &body), true, 1.5);
    assert_eq!(findings, ["response.unmatched"]);
}

#[test]
fn an_exception_answers_any_request() {
    let mut c = Conversation::new();
    c.send(&get_message_request(9), false, 1.0);
    let (notes, findings) = c.send(&frame(9, &exception_data(1, "x.TubeException", "boom"), 8192), true, 1.25);
    assert_eq!(map_get(&notes, "answers").and_then(Value::as_i64), Some(1));
    assert_eq!(map_get(&notes, "latency_ms"), Some(&Value::Float(250.0)));
    assert_eq!(map_get(&notes, "group").and_then(Value::as_str), Some("grp"));
    assert!(findings.is_empty(), "the decoder's findings stay on the frame: {findings:?}");
}

#[test]
fn a_serial_reused_while_waiting_is_a_duplicate() {
    let mut c = Conversation::new();
    c.send(&get_message_request(3), false, 1.0);
    let (_, findings) = c.send(&get_message_request(3), false, 1.1);
    assert_eq!(findings, ["request.duplicate_id"]);
}

#[test]
fn unknown_methods_still_pair_with_each_other() {
    let mut c = Conversation::new();
    c.send(&request(6, 1, 99, &[]), false, 1.0);
    let (notes, findings) = c.send(&response(6, 98, &[]), true, 1.1);
    assert_eq!(map_get(&notes, "answers").and_then(Value::as_i64), Some(1));
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn an_unanswered_request_is_reported_at_the_close() {
    let mut c = Conversation::new();
    c.send(&get_message_request(1), false, 1.0);
    c.send(&get_message_request(2), false, 1.1);
    c.send(&get_message_response(1), true, 1.2);
    let mut out = Vec::new();
    c.analyzer.finish(&mut out);
    let unanswered: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Event(e) if e.kind.as_str() == "UNANSWERED" => {
                map_get(&e.details, "request").and_then(Value::as_i64)
            }
            _ => None,
        })
        .collect();
    assert_eq!(unanswered, [2]);
}
