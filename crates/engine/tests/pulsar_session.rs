//! Pulsar's conversation state (`pulsar::session`) under the generic pairing: producers, consumers, flow
//! permits, sequence ids, acknowledgements, redeliveries, closes, lookups. The command table is built as
//! `dissector/protocols/pulsar/commands.py` declares the rows used here; the frames are decoded frames made
//! by hand (plain data), with the values worked out in the comments.

use pulsar_dissect_engine::analysis::table::{Actor, CommandSpec, CommandTable, Key, KeyField, OpenedBy, Space};
use pulsar_dissect_engine::analysis::{
    intern, map_get, Analyzer, Event, EventHead, Frame, Output, PairingOptions, ProtocolAnalysis,
};
use pulsar_dissect_engine::budget::MemoryBudget;
use pulsar_dissect_engine::model::Body;
use pulsar_dissect_engine::model::Decoded;
use pulsar_dissect_engine::protocols::pulsar::payload::{Checksum, PayloadSection};
use pulsar_dissect_engine::protocols::pulsar::session::PulsarSessions;
use pulsar_dissect_engine::protocols::Limits;
use pulsar_dissect_engine::value::{Map, Text, Value};

const TO_BROKER: &str = "to_broker";
const TO_CLIENT: &str = "to_client";

fn st(v: &str) -> Value {
    Value::from(v.to_owned())
}

fn obj(fields: &[(&str, Value)]) -> Value {
    Value::Map(fields.iter().map(|(k, v)| (Text::Owned((*k).to_owned()), v.clone())).collect())
}

fn id(ledger: i64, entry: i64) -> Value {
    obj(&[("ledgerId", Value::Int(ledger)), ("entryId", Value::Int(entry))])
}

fn options() -> Limits {
    Limits {
        max_actors: 100,
        max_remembered_messages: 1000,
        max_remembered_total: 100_000,
        max_redelivered_reported: 100,
        max_chunked_messages: 10,
        max_chunk_bytes: 1 << 20,
        max_chunk_bytes_total: 1 << 30,
        max_decompressed: 1 << 20,
        redirect_loop_limit: 3,
        memory_budget: MemoryBudget::unlimited(),
    }
}

struct Spec {
    name: &'static str,
    scope: Option<Actor>,
    opens: Option<(&'static str, &'static [&'static str])>,
    answers: Option<(&'static str, &'static [&'static str])>,
    answer_types: Option<&'static [&'static str]>,
    remember: &'static [&'static str],
}

const fn row(name: &'static str) -> Spec {
    Spec { name, scope: None, opens: None, answers: None, answer_types: None, remember: &[] }
}

const REQ: (&str, &[&str]) = ("request", &["request_id"]);
const SEQ: (&str, &[&str]) = ("send", &["producer_id", "sequence_id"]);

/// The rows of commands.py these tests use.
fn table() -> CommandTable {
    let producer = Some(Actor::Producer);
    let consumer = Some(Actor::Consumer);
    let specs = [
        Spec { opens: Some(REQ), remember: &["producer_id"], ..row("PRODUCER") },
        Spec { scope: producer, answers: Some(REQ), answer_types: Some(&["PRODUCER"]), ..row("PRODUCER_SUCCESS") },
        Spec { scope: producer, opens: Some(SEQ), ..row("SEND") },
        Spec { scope: producer, answers: Some(SEQ), ..row("SEND_RECEIPT") },
        Spec { scope: producer, opens: Some(REQ), ..row("CLOSE_PRODUCER") },
        Spec { opens: Some(REQ), ..row("SUBSCRIBE") },
        Spec { scope: consumer, opens: Some(REQ), ..row("CLOSE_CONSUMER") },
        Spec { scope: consumer, opens: Some(REQ), remember: &["consumer_id"], ..row("UNSUBSCRIBE") },
        Spec { ..row("CONNECT") },
        Spec { scope: consumer, opens: Some(REQ), ..row("SEEK") },
        Spec { scope: consumer, ..row("FLOW") },
        Spec { scope: consumer, ..row("MESSAGE") },
        Spec { scope: consumer, opens: Some(REQ), ..row("ACK") },
        Spec { scope: consumer, ..row("REDELIVER_UNACKNOWLEDGED_MESSAGES") },
        Spec { answers: Some(REQ), ..row("ERROR") },
        Spec {
            answers: Some(REQ),
            answer_types: Some(&["SUBSCRIBE", "UNSUBSCRIBE", "CLOSE_PRODUCER", "CLOSE_CONSUMER", "SEEK"]),
            ..row("SUCCESS")
        },
        Spec { opens: Some(REQ), remember: &["topic"], ..row("LOOKUP") },
        Spec { answers: Some(REQ), answer_types: Some(&["LOOKUP"]), ..row("LOOKUP_RESPONSE") },
    ];
    let mut table = CommandTable::default();
    let request = table.space(Space {
        name: "request".into(),
        slot: false,
        duplicates: true,
        unmatched: true,
        unanswered: true,
        opened_by: OpenedBy::Client,
    });
    let send = table.space(Space {
        name: "send".into(),
        slot: false,
        duplicates: false,
        unmatched: true,
        unanswered: true,
        opened_by: OpenedBy::Client,
    });
    let key = |(space, fields): (&str, &[&str])| Key {
        space: if space == "request" { request } else { send },
        fields: fields.iter().map(|f| KeyField::Command((*f).to_owned())).collect(),
        names: fields.iter().map(|f| (*f).to_owned()).collect(),
    };
    for spec in specs {
        let scope_id = match spec.scope {
            Some(Actor::Producer) => "producer_id",
            _ => "consumer_id",
        };
        table.add(CommandSpec {
            name: intern(spec.name),
            scope: spec.scope.map(|actor| (actor, scope_id.to_owned())),
            opens: spec.opens.map(key),
            answers: spec.answers.map(key).into_iter().collect(),
            answer_types: spec.answer_types.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
            interim: None,
            remember: spec.remember.iter().map(|s| (*s).to_owned()).collect(),
        });
    }
    table
}

struct Capture {
    analyzer: Analyzer,
    index: u64,
    time: f64,
}

/// One frame's analysis: its notes, its findings' ids and params, the events it caused.
struct Result {
    notes: Map,
    findings: Vec<(String, Map)>,
    events: Vec<Event>,
}

impl Result {
    fn note(&self, key: &str) -> Option<&Value> {
        map_get(&self.notes, key)
    }

    fn ids(&self) -> Vec<&str> {
        self.findings.iter().map(|(id, _)| id.as_str()).collect()
    }

    fn param(&self, id: &str, key: &str) -> Option<&Value> {
        self.findings.iter().find(|(i, _)| i == id).and_then(|(_, p)| map_get(p, key))
    }
}

impl Capture {
    fn with(options: Limits) -> Capture {
        let mut analyzer = Analyzer::new(PairingOptions {
            request_timeout: 1000.0,
            request_timeout_value: Value::Int(1000),
            max_pending_requests: 1000,
        });
        let protocol = ProtocolAnalysis {
            table: table(),
            default_to_server: TO_BROKER.into(),
            sessions: Some(Box::new(PulsarSessions::new(options))),
        };
        analyzer.add_protocol("pulsar", protocol);
        Capture { analyzer, index: 0, time: 0.0 }
    }

    fn new() -> Capture {
        Capture::with(options())
    }

    fn on(&mut self, conn: u64, direction: &str, kind: &str, fields: &[(&str, Value)]) -> Result {
        self.on_with(conn, direction, kind, fields, None)
    }

    fn on_with(
        &mut self,
        conn: u64,
        direction: &str,
        kind: &str,
        fields: &[(&str, Value)],
        body: Option<Body>,
    ) -> Result {
        self.index += 1;
        self.time += 0.001;
        let d = Decoded {
            type_name: Text::Owned(kind.into()),
            command: Some(obj(fields)),
            size: 20,
            findings: vec![],
            body,
        };
        let frame = Frame {
            index: self.index,
            protocol: "pulsar",
            conn,
            src: "c",
            dst: "b",
            direction,
            time: self.time,
            packet: self.index,
            pdu: &d,
        };
        let mut out = Vec::new();
        self.analyzer.frame(&frame, &mut out);
        let mut result = Result { notes: Map::new(), findings: vec![], events: vec![] };
        for o in out {
            match o {
                Output::Annotated { notes, findings, .. } => {
                    result.notes = notes;
                    result.findings = findings.into_iter().map(|f| (f.id.as_str().to_owned(), f.params)).collect();
                }
                Output::Event(e) => result.events.push(e),
                Output::Input => {}
            }
        }
        result
    }

    fn client(&mut self, kind: &str, fields: &[(&str, Value)]) -> Result {
        self.on(1, TO_BROKER, kind, fields)
    }

    fn broker(&mut self, kind: &str, fields: &[(&str, Value)]) -> Result {
        self.on(1, TO_CLIENT, kind, fields)
    }

    fn close(&mut self, conn: u64) -> Vec<Event> {
        let mut out = Vec::new();
        let head = EventHead {
            kind: "CONNECTION_CLOSED",
            conn: Some(conn),
            time: self.time + 1.0,
            packet: 999,
            mid_stream: false,
        };
        self.analyzer.event(head, &mut out);
        out.into_iter()
            .filter_map(|o| match o {
                Output::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    fn subscribe(&mut self, consumer: i64, sub_type: &str, durable: bool) {
        self.client(
            "SUBSCRIBE",
            &[
                ("request_id", Value::Int(100 + consumer)),
                ("consumer_id", Value::Int(consumer)),
                ("topic", st("persistent://t/n/orders")),
                ("subscription", st("sub")),
                ("subType", st(sub_type)),
                ("consumer_name", st("cons-a")),
                ("durable", Value::Bool(durable)),
            ],
        );
    }

    fn message(&mut self, consumer: i64, ledger: i64, entry: i64) -> Result {
        self.broker("MESSAGE", &[("consumer_id", Value::Int(consumer)), ("message_id", id(ledger, entry))])
    }

    fn producer(&mut self, conn: u64, producer: i64, name: Option<&str>, mode: Option<&str>) {
        let mut fields = vec![
            ("request_id", Value::Int(200 + producer)),
            ("producer_id", Value::Int(producer)),
            ("topic", st("t1")),
        ];
        if let Some(name) = name {
            fields.push(("producer_name", st(name)));
        }
        if let Some(mode) = mode {
            fields.push(("producer_access_mode", st(mode)));
        }
        self.on(conn, TO_BROKER, "PRODUCER", &fields);
    }

    fn send(&mut self, producer: i64, sequence: i64, extra: &[(&str, Value)]) -> Result {
        let mut fields = vec![("producer_id", Value::Int(producer)), ("sequence_id", Value::Int(sequence))];
        fields.extend(extra.iter().cloned());
        self.client("SEND", &fields)
    }

    /// A SEND of a batch of `n` entries, whose entries' own sequence ids reach `highest` (None: they carry
    /// none), or whose entries could not be read (`read` false).
    fn send_batch(&mut self, producer: i64, sequence: i64, n: i64, highest: Option<i64>, read: bool) -> Result {
        let fields = [
            ("producer_id", Value::Int(producer)),
            ("sequence_id", Value::Int(sequence)),
            ("num_messages", Value::Int(n)),
        ];
        let section = PayloadSection {
            metadata: Some(obj(&[("num_messages_in_batch", Value::Int(n))])),
            batch_sequence_ids: read.then_some(highest),
            ..PayloadSection::default()
        };
        self.on_with(1, TO_BROKER, "SEND", &fields, Some(Box::new(section)))
    }
}

fn detail<'a>(e: &'a Event, key: &str) -> Option<&'a Value> {
    map_get(&e.details, key)
}

// ------------------------------------------------------------------------------------------- consumers

#[test]
fn flow_permits_go_up_with_flow_and_down_with_each_message() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true);
    let r = c.client("FLOW", &[("consumer_id", Value::Int(1)), ("messagePermits", Value::Int(10))]);
    assert_eq!(r.note("permits"), Some(&Value::Int(10)));
    let r = c.message(1, 5, 0);
    assert_eq!(r.note("permits"), Some(&Value::Int(9)));
    let r = c.client("FLOW", &[("consumer_id", Value::Int(1)), ("messagePermits", Value::Int(5))]);
    assert_eq!(r.note("permits"), Some(&Value::Int(14)));
    // the frame says which consumer it is about
    let consumer = r.note("consumer").expect("the consumer's info");
    assert_eq!(consumer.get("subscription").and_then(Value::as_str), Some("sub"));
    assert_eq!(consumer.get("name").and_then(Value::as_str), Some("cons-a"));
}

#[test]
fn a_message_without_permits_is_an_overrun() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true);
    c.client("FLOW", &[("consumer_id", Value::Int(1)), ("messagePermits", Value::Int(1))]);
    assert!(c.message(1, 5, 0).ids().is_empty());
    let r = c.message(1, 5, 1);
    assert_eq!(r.ids(), ["flow.overrun"]);
    assert_eq!(r.note("permits"), Some(&Value::Int(-1)));
}

#[test]
fn no_overrun_before_any_flow_is_seen() {
    // the FLOW may be before the capture started
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true);
    assert!(c.message(1, 5, 0).ids().is_empty());
    assert!(c.message(1, 5, 1).ids().is_empty());
}

#[test]
fn a_message_delivered_twice_is_redelivered_and_reported_at_the_close() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true); // frame 1
    let first = c.message(1, 7, 3); // frame 2
    assert!(first.ids().is_empty());
    c.message(1, 7, 4); // frame 3
    let again = c.message(1, 7, 3); // frame 4
    assert_eq!(again.ids(), ["message.redelivered"]);
    assert_eq!(again.note("delivery"), Some(&Value::Int(2)));
    assert_eq!(again.param("message.redelivered", "first_frame"), Some(&Value::Int(2)));
    assert_eq!(again.param("message.redelivered", "ledger"), Some(&Value::Int(7)));
    let events = c.close(1);
    let redelivered: Vec<&Event> = events.iter().filter(|e| e.kind.as_str() == "REDELIVERED").collect();
    assert_eq!(redelivered.len(), 1);
    assert_eq!(detail(redelivered[0], "count"), Some(&Value::Int(2)));
    assert_eq!(detail(redelivered[0], "frames"), Some(&Value::List(vec![Value::Int(2), Value::Int(4)])));
    assert_eq!(detail(redelivered[0], "entry"), Some(&Value::Int(3)));
}

#[test]
fn a_redelivery_count_alone_says_redelivered() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true);
    let r = c.broker(
        "MESSAGE",
        &[("consumer_id", Value::Int(1)), ("message_id", id(1, 1)), ("redelivery_count", Value::Int(2))],
    );
    assert_eq!(r.ids(), ["message.redelivered"]);
    assert_eq!(r.param("message.redelivered", "redelivery_count"), Some(&Value::Int(2)));
    assert_eq!(r.note("delivery"), None, "the first delivery this capture saw");
}

#[test]
fn acknowledged_messages_are_not_unacked_at_the_end() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true); // frame 1
    c.message(1, 7, 1); // frame 2
    c.message(1, 7, 2); // frame 3
    c.message(1, 7, 3); // frame 4
    let r = c.client(
        "ACK",
        &[
            ("request_id", Value::Int(9)),
            ("consumer_id", Value::Int(1)),
            ("ack_type", st("Individual")),
            ("message_id", Value::List(vec![id(7, 2)])),
        ],
    );
    assert_eq!(r.note("acks"), Some(&Value::List(vec![Value::Int(3)])), "frame 3 delivered 7:2");
    let events = c.close(1);
    let unacked = events.iter().find(|e| e.kind.as_str() == "UNACKED_AT_END").expect("two left");
    assert_eq!(detail(unacked, "count"), Some(&Value::Int(2)));
    assert_eq!(detail(unacked, "frames"), Some(&Value::List(vec![Value::Int(2), Value::Int(4)])));
}

#[test]
fn an_ack_with_a_validation_error_says_the_client_dropped_those_messages_unread() {
    let mut c = Capture::new();
    c.subscribe(1, "Exclusive", true); // frame 1
    c.message(1, 7, 1); // frame 2
    c.message(1, 7, 2); // frame 3
                        // the C++ and Java consumers, unable to decompress an entry, acknowledge it with the error
    let r = c.client(
        "ACK",
        &[
            ("consumer_id", Value::Int(1)),
            ("ack_type", st("Individual")),
            ("message_id", Value::List(vec![id(7, 1)])),
            ("validation_error", st("DecompressionError")),
        ],
    );
    assert_eq!(r.ids(), ["ack.validation_error"]);
    assert_eq!(r.param("ack.validation_error", "error").and_then(Value::as_str), Some("DecompressionError"));
    assert_eq!(r.param("ack.validation_error", "messages"), Some(&Value::Int(1)));
    assert_eq!(r.param("ack.validation_error", "frames"), Some(&Value::List(vec![Value::Int(2)])));
    assert_eq!(r.note("discards"), Some(&Value::List(vec![Value::Int(2)])), "frame 2 delivered 7:1");
    assert_eq!(r.note("acks"), None, "not an acknowledgement of a message the application had");
    // a plain ACK of the other: nothing to say; and nothing is left unacknowledged on the wire
    let plain = c.client(
        "ACK",
        &[("consumer_id", Value::Int(1)), ("ack_type", st("Individual")), ("message_id", Value::List(vec![id(7, 2)]))],
    );
    assert!(plain.ids().is_empty());
    assert!(c.close(1).iter().all(|e| e.kind.as_str() != "UNACKED_AT_END"));
}

#[test]
fn a_cumulative_ack_acknowledges_everything_up_to_its_id() {
    let mut c = Capture::new();
    c.subscribe(1, "Failover", true);
    c.message(1, 7, 1); // frame 2
    c.message(1, 7, 2); // frame 3
    c.message(1, 8, 0); // frame 4
    let r = c.client(
        "ACK",
        &[
            ("request_id", Value::Int(9)),
            ("consumer_id", Value::Int(1)),
            ("ack_type", st("Cumulative")),
            ("message_id", Value::List(vec![id(7, 2)])),
        ],
    );
    assert_eq!(r.note("acks"), Some(&Value::List(vec![Value::Int(2), Value::Int(3)])));
    let events = c.close(1);
    let unacked = events.iter().find(|e| e.kind.as_str() == "UNACKED_AT_END").unwrap();
    assert_eq!(detail(unacked, "count"), Some(&Value::Int(1)));
}

#[test]
fn a_reader_never_acknowledges_by_design() {
    let mut c = Capture::new();
    c.subscribe(1, "Exclusive", false);
    c.message(1, 7, 1);
    assert!(c.close(1).iter().all(|e| e.kind.as_str() != "UNACKED_AT_END"));
}

#[test]
fn closing_a_consumer_with_unacked_messages_says_so_then_later_use_is_flagged() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true);
    c.message(1, 7, 1);
    let r = c.client("CLOSE_CONSUMER", &[("request_id", Value::Int(50)), ("consumer_id", Value::Int(1))]);
    assert_eq!(r.ids(), ["consumer.unacked"]);
    assert_eq!(r.param("consumer.unacked", "count"), Some(&Value::Int(1)));
    let r = c.client("FLOW", &[("consumer_id", Value::Int(1)), ("messagePermits", Value::Int(1))]);
    assert_eq!(r.ids(), ["actor.used_after_close"]);
    assert_eq!(r.param("actor.used_after_close", "actor").and_then(Value::as_str), Some("consumer"));
    assert_eq!(r.param("actor.used_after_close", "name").and_then(Value::as_str), Some("cons-a"));
    // closing it again (pulsar-rs does) names it and says it is closed already: a note, no warning
    let again = c.client("CLOSE_CONSUMER", &[("request_id", Value::Int(51)), ("consumer_id", Value::Int(1))]);
    assert_eq!(again.ids(), ["actor.closed_again"]);
    assert_eq!(again.param("actor.closed_again", "name").and_then(Value::as_str), Some("cons-a"));
    assert!(again.note("consumer").is_some(), "the consumer it names");
}

#[test]
fn a_close_from_the_broker_is_marked_as_such() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true);
    let r = c.broker("CLOSE_CONSUMER", &[("request_id", Value::Int(50)), ("consumer_id", Value::Int(1))]);
    assert_eq!(r.note("broker_initiated"), Some(&Value::Bool(true)));
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true);
    let r = c.client("CLOSE_CONSUMER", &[("request_id", Value::Int(50)), ("consumer_id", Value::Int(1))]);
    assert_eq!(r.note("broker_initiated"), None);
}

#[test]
fn a_redeliver_request_links_the_unacked_frames_and_the_redelivery_links_back() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true); // frame 1
    c.message(1, 7, 1); // frame 2
    c.message(1, 7, 2); // frame 3
    let r = c.client("REDELIVER_UNACKNOWLEDGED_MESSAGES", &[("consumer_id", Value::Int(1))]); // frame 4: all
    assert_eq!(r.note("redelivers"), Some(&Value::List(vec![Value::Int(2), Value::Int(3)])));
    assert_eq!(r.note("redelivers_count"), Some(&Value::Int(2)));
    let again = c.message(1, 7, 2); // frame 5
    assert_eq!(again.note("redelivery_requested_by"), Some(&Value::Int(4)));
    // by id: only the one named
    let r = c.client(
        "REDELIVER_UNACKNOWLEDGED_MESSAGES",
        &[("consumer_id", Value::Int(1)), ("message_ids", Value::List(vec![id(7, 1)]))],
    );
    assert_eq!(r.note("redelivers"), Some(&Value::List(vec![Value::Int(2)])));
    assert_eq!(c.message(1, 7, 1).note("redelivery_requested_by"), Some(&Value::Int(6)));
}

/// A message id with its batch index (as pulsar-rs names one entry of a batch).
fn batch_id(ledger: i64, entry: i64, batch_index: i64) -> Value {
    obj(&[("ledgerId", Value::Int(ledger)), ("entryId", Value::Int(entry)), ("batch_index", Value::Int(batch_index))])
}

#[test]
fn a_message_handed_back_is_not_left_unacknowledged_and_its_batch_index_links_it() {
    // pulsar-rs, Shared: entries of one batch acked one by one (batch_index, no ack_set), one nacked at once
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true); // frame 1
    c.message(1, 7, 1); // frame 2: a batch
    c.message(1, 7, 2); // frame 3
    let ack = c.client(
        "ACK",
        &[
            ("consumer_id", Value::Int(1)),
            ("ack_type", st("Individual")),
            ("message_id", Value::List(vec![batch_id(7, 1, 0)])),
        ],
    );
    assert_eq!(ack.ids(), ["ack.whole_entry"], "the broker acknowledges all of 7:1");
    assert_eq!(ack.param("ack.whole_entry", "batch_index"), Some(&Value::Int(0)));
    assert_eq!(ack.note("acks"), Some(&Value::List(vec![Value::Int(2)])));
    // a nack of another entry of 7:1 (acknowledged already) and of 7:2's first: each linked to its MESSAGE
    let nack = c.client(
        "REDELIVER_UNACKNOWLEDGED_MESSAGES",
        &[("consumer_id", Value::Int(1)), ("message_ids", Value::List(vec![batch_id(7, 1, 3), batch_id(7, 2, 0)]))],
    );
    assert_eq!(nack.note("redelivers"), Some(&Value::List(vec![Value::Int(2), Value::Int(3)])));
    // 7:2 was handed back (another consumer of the subscription acknowledges it): nothing is unacknowledged
    let events = c.close(1);
    assert!(
        events.iter().all(|e| e.kind.as_str() != "UNACKED_AT_END"),
        "{:?}",
        events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>()
    );
}

#[test]
fn a_redeliver_of_everything_hands_back_what_came_before_it() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true); // frame 1
    c.message(1, 7, 1); // frame 2
    c.client("REDELIVER_UNACKNOWLEDGED_MESSAGES", &[("consumer_id", Value::Int(1))]); // frame 3
    c.message(1, 7, 5); // frame 4: delivered after, never acknowledged
    let events = c.close(1);
    let unacked = events.iter().find(|e| e.kind.as_str() == "UNACKED_AT_END").expect("7:5 is held");
    assert_eq!(detail(unacked, "count"), Some(&Value::Int(1)));
    assert_eq!(detail(unacked, "frames"), Some(&Value::List(vec![Value::Int(4)])));
}

#[test]
fn a_frame_for_a_consumer_after_its_unsubscribe_succeeded_is_after_its_close() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true); // frame 1
    c.message(1, 7, 1); // frame 2: never acknowledged, but the subscription goes with it
    c.client("UNSUBSCRIBE", &[("request_id", Value::Int(70)), ("consumer_id", Value::Int(1))]);
    let success = c.broker("SUCCESS", &[("request_id", Value::Int(70))]);
    assert!(success.ids().is_empty(), "no consumer.unacked: the subscription's backlog is no one's now");
    let late = c.client(
        "ACK",
        &[("consumer_id", Value::Int(1)), ("ack_type", st("Individual")), ("message_id", Value::List(vec![id(7, 1)]))],
    );
    assert_eq!(late.ids(), ["actor.used_after_close"]);
    assert_eq!(late.param("actor.used_after_close", "name").and_then(Value::as_str), Some("cons-a"));
    // an UNSUBSCRIBE the broker refused closes nothing
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true);
    c.client("UNSUBSCRIBE", &[("request_id", Value::Int(71)), ("consumer_id", Value::Int(1))]);
    c.broker("ERROR", &[("request_id", Value::Int(71)), ("error", st("MetadataError"))]);
    let ack = c.client(
        "ACK",
        &[("consumer_id", Value::Int(1)), ("ack_type", st("Individual")), ("message_id", Value::List(vec![]))],
    );
    assert!(ack.ids().is_empty(), "{:?}", ack.ids());
}

#[test]
fn a_message_without_a_checksum_to_a_client_that_needs_one_is_said_once() {
    for (client, warned) in [("pulsar-rs-v6.9.1", true), ("Pulsar-CPP-v4.2.0", false)] {
        let mut c = Capture::new();
        c.client("CONNECT", &[("client_version", st(client)), ("protocol_version", Value::Int(12))]);
        c.subscribe(1, "Exclusive", true);
        let body = || -> Option<Body> {
            Some(Box::new(PayloadSection { checksum: Checksum::Absent, ..PayloadSection::default() }))
        };
        let message = |c: &mut Capture, entry| {
            let fields = [("consumer_id", Value::Int(1)), ("message_id", id(7, entry))];
            c.on_with(1, TO_CLIENT, "MESSAGE", &fields, body())
        };
        let first = message(&mut c, 1);
        assert_eq!(first.ids() == ["message.checksum_required"], warned, "{client}: {:?}", first.ids());
        if warned {
            assert_eq!(
                first.param("message.checksum_required", "client_version").and_then(Value::as_str),
                Some(client)
            );
        }
        assert!(message(&mut c, 2).ids().is_empty(), "{client}: once");
    }
}

#[test]
fn the_first_message_after_a_seek_points_to_it() {
    let mut c = Capture::new();
    c.subscribe(1, "Shared", true); // frame 1
    c.client("SEEK", &[("request_id", Value::Int(60)), ("consumer_id", Value::Int(1)), ("message_id", id(1, 0))]); // 2
    assert_eq!(c.message(1, 1, 0).note("after_seek"), Some(&Value::Int(2)));
    assert_eq!(c.message(1, 1, 1).note("after_seek"), None, "only the first");
}

// ------------------------------------------------------------------------------------------- producers

#[test]
fn sequence_ids_in_order_say_nothing_and_a_gap_or_regression_is_flagged() {
    let mut c = Capture::new();
    c.producer(1, 1, Some("p"), None);
    assert!(c.send(1, 0, &[]).ids().is_empty());
    assert!(c.send(1, 1, &[]).ids().is_empty());
    let gap = c.send(1, 5, &[]);
    assert_eq!(gap.ids(), ["sequence.gap"]);
    assert_eq!(
        (gap.param("sequence.gap", "first"), gap.param("sequence.gap", "previous")),
        (Some(&Value::Int(5)), Some(&Value::Int(1)))
    );
    let back = c.send(1, 3, &[]);
    assert_eq!(back.ids(), ["sequence.regression"]);
    assert_eq!(back.param("sequence.regression", "name").and_then(Value::as_str), Some("p"));
    // the highest seen stays 5: 6 follows on
    assert!(c.send(1, 6, &[]).ids().is_empty());
}

#[test]
fn highest_sequence_id_says_how_far_a_send_goes() {
    let mut c = Capture::new();
    c.producer(1, 1, None, None);
    // (the Java client) 0 up to 2, then 3 up to 9; 10 follows
    assert!(c.send(1, 0, &[("highest_sequence_id", Value::Int(2))]).ids().is_empty());
    assert!(c.send(1, 3, &[("highest_sequence_id", Value::Int(9))]).ids().is_empty());
    assert!(c.send(1, 10, &[]).ids().is_empty());
    assert_eq!(c.send(1, 10, &[]).ids(), ["sequence.regression"]);
}

#[test]
fn a_batch_covers_only_the_sequence_ids_its_frame_gives() {
    // the C++ client: each entry has its own id, 0..=4, then 5..=9
    let mut c = Capture::new();
    c.producer(1, 1, None, None);
    assert!(c.send_batch(1, 0, 5, Some(4), true).ids().is_empty());
    assert!(c.send_batch(1, 5, 5, Some(9), true).ids().is_empty());
    assert_eq!(c.send_batch(1, 7, 5, Some(11), true).ids(), ["sequence.regression"], "7 after 9");
    // pulsar-rs: one id per batch (0, 1, 2), its entries none: no regression, no gap
    let mut c = Capture::new();
    c.producer(1, 1, None, None);
    for sequence in 0..3 {
        assert!(c.send_batch(1, sequence, 5, None, true).ids().is_empty(), "batch {sequence}");
    }
    assert_eq!(c.send_batch(1, 5, 5, None, true).ids(), ["sequence.gap"], "3 and 4 skipped");
    // a batch that could not be read: its range is unknown, so the next SEND is not judged by a guess
    let mut c = Capture::new();
    c.producer(1, 1, None, None);
    c.send(1, 0, &[]);
    assert!(c.send_batch(1, 1, 5, None, false).ids().is_empty());
    assert!(c.send_batch(1, 2, 5, None, true).ids().is_empty(), "not a regression against 1 + 5 - 1");
    assert_eq!(c.send(1, 2, &[]).ids(), ["sequence.regression"], "judged again once a range is known");
}

#[test]
fn a_chunk_repeats_its_sequence_id_without_a_regression() {
    let mut c = Capture::new();
    c.producer(1, 1, None, None);
    c.send(1, 4, &[("is_chunk", Value::Bool(true))]);
    assert!(c.send(1, 4, &[("is_chunk", Value::Bool(true))]).ids().is_empty());
    assert_eq!(c.send(1, 4, &[]).ids(), ["sequence.regression"], "not a chunk: a regression");
}

#[test]
fn a_send_of_an_unknown_producer_is_flagged_unless_mid_stream() {
    let mut c = Capture::new();
    let r = c.send(9, 0, &[]);
    assert_eq!(r.ids(), ["send.unknown_producer"]);
    assert_eq!(r.param("send.unknown_producer", "producer_id"), Some(&Value::Int(9)));
    let mut c = Capture::new();
    let mut out = Vec::new();
    c.analyzer.event(
        EventHead { kind: "CONNECTION_OPENED", conn: Some(1), time: 0.0, packet: 1, mid_stream: true },
        &mut out,
    );
    assert!(c.send(9, 0, &[]).ids().is_empty(), "its PRODUCER may be before the capture");
}

#[test]
fn a_send_after_its_producer_closed_is_used_after_close_only() {
    let mut c = Capture::new();
    c.producer(1, 1, Some("p"), None);
    c.client("CLOSE_PRODUCER", &[("request_id", Value::Int(70)), ("producer_id", Value::Int(1))]);
    let r = c.send(1, 0, &[]);
    assert_eq!(r.ids(), ["actor.used_after_close"], "not also send.unknown_producer");
    assert_eq!(r.note("producer").and_then(|p| p.get("name")).and_then(Value::as_str), Some("p"));
}

#[test]
fn the_broker_names_an_anonymous_producer() {
    let mut c = Capture::new();
    c.producer(1, 1, None, None);
    let r = c.broker("PRODUCER_SUCCESS", &[("request_id", Value::Int(201)), ("producer_name", st("standalone-0-7"))]);
    assert_eq!(r.note("answers"), Some(&Value::Int(1)));
    let r = c.send(1, 0, &[]);
    assert_eq!(r.note("producer").and_then(|p| p.get("name")).and_then(Value::as_str), Some("standalone-0-7"));
}

#[test]
fn two_exclusive_producers_on_one_topic_conflict_across_connections() {
    let mut c = Capture::new();
    c.producer(1, 1, Some("first"), Some("Exclusive"));
    c.on(1, TO_CLIENT, "PRODUCER_SUCCESS", &[("request_id", Value::Int(201))]);
    c.producer(2, 1, Some("second"), Some("Shared"));
    let r = c.on(2, TO_CLIENT, "PRODUCER_SUCCESS", &[("request_id", Value::Int(201))]);
    assert_eq!(r.ids(), ["producer.exclusive_conflict"]);
    assert_eq!(r.param("producer.exclusive_conflict", "other_conn"), Some(&Value::Int(1)));
    assert_eq!(r.param("producer.exclusive_conflict", "other_name").and_then(Value::as_str), Some("first"));
    assert_eq!(r.param("producer.exclusive_conflict", "other_mode").and_then(Value::as_str), Some("Exclusive"));
}

#[test]
fn shared_producers_do_not_conflict_and_a_closed_one_no_longer_holds() {
    let mut c = Capture::new();
    c.producer(1, 1, None, Some("Shared"));
    c.on(1, TO_CLIENT, "PRODUCER_SUCCESS", &[("request_id", Value::Int(201))]);
    c.producer(2, 1, None, Some("Shared"));
    assert!(c.on(2, TO_CLIENT, "PRODUCER_SUCCESS", &[("request_id", Value::Int(201))]).ids().is_empty());
    let mut c = Capture::new();
    c.producer(1, 1, None, Some("Exclusive"));
    c.on(1, TO_CLIENT, "PRODUCER_SUCCESS", &[("request_id", Value::Int(201))]);
    c.close(1);
    c.producer(2, 1, None, Some("Exclusive"));
    assert!(c.on(2, TO_CLIENT, "PRODUCER_SUCCESS", &[("request_id", Value::Int(201))]).ids().is_empty());
}

#[test]
fn producers_beyond_the_cap_are_dropped_and_said_once() {
    // the 3rd PRODUCER is the first over the cap: its STATE_DROPPED event; then the total at the close
    let mut c = Capture::with(Limits { max_actors: 2, ..options() });
    let mut events = Vec::new();
    for p in 1..=4 {
        let fields = [("request_id", Value::Int(200 + p)), ("producer_id", Value::Int(p)), ("topic", st("t"))];
        events.extend(c.client("PRODUCER", &fields).events.into_iter().map(|e| (p, e)));
    }
    let said: Vec<(i64, Option<Value>)> = events.iter().map(|(p, e)| (*p, detail(e, "dropped").cloned())).collect();
    assert_eq!(said, [(3, Some(Value::Int(1)))]);
    // producer 1 was forgotten: its SEND is unknown
    assert_eq!(c.send(1, 0, &[]).ids(), ["send.unknown_producer"]);
    let at_close: Vec<Option<Value>> = c
        .close(1)
        .iter()
        .filter(|e| e.kind.as_str() == "STATE_DROPPED")
        .map(|e| detail(e, "dropped").cloned())
        .collect();
    assert_eq!(at_close, [Some(Value::Int(2))]);
}

// ------------------------------------------------------------------------------------------- the rest

#[test]
fn a_server_error_is_a_finding_with_its_code() {
    let mut c = Capture::new();
    c.client("LOOKUP", &[("request_id", Value::Int(1)), ("topic", st("t"))]);
    let r =
        c.broker("ERROR", &[("request_id", Value::Int(1)), ("error", st("AuthorizationError")), ("message", st("no"))]);
    assert_eq!(r.note("answers"), Some(&Value::Int(1)));
    assert_eq!(r.ids(), ["server.error"]);
    assert_eq!(r.param("server.error", "error").and_then(Value::as_str), Some("AuthorizationError"));
    assert_eq!(r.param("server.error", "type").and_then(Value::as_str), Some("ERROR"));
}

#[test]
fn lookups_redirected_again_and_again_are_a_loop_once() {
    let mut c = Capture::new();
    let mut loops = Vec::new();
    for i in 1..=5 {
        c.client("LOOKUP", &[("request_id", Value::Int(i)), ("topic", st("persistent://t/n/x"))]);
        let r = c.broker("LOOKUP_RESPONSE", &[("request_id", Value::Int(i)), ("response", st("Redirect"))]);
        if r.ids().contains(&"lookup.redirect_loop") {
            loops.push((i, r.param("lookup.redirect_loop", "limit").cloned()));
        }
    }
    // the limit is 3: said at the third redirect of the same topic, not again
    assert_eq!(loops, [(3, Some(Value::Int(3)))]);
}

#[test]
fn a_connect_answer_is_not_a_redirect() {
    let mut c = Capture::new();
    for i in 1..=4 {
        c.client("LOOKUP", &[("request_id", Value::Int(i)), ("topic", st("t"))]);
        let r = c.broker("LOOKUP_RESPONSE", &[("request_id", Value::Int(i)), ("response", st("Connect"))]);
        assert!(r.ids().is_empty());
    }
}

// ------------------------------------------------------------------------------ remembered message ids

/// The consumers' table sizes of connection `conn`: (consumer id, delivered, unacked) each.
fn consumer_sizes(c: &Capture, conn: u64) -> Vec<(i64, i64, i64)> {
    let sizes = c.analyzer.sizes(conn).expect("the connection is known");
    let Some(Value::List(consumers)) = map_get(&sizes, "consumers") else { panic!("consumers: {sizes:?}") };
    consumers
        .iter()
        .map(|x| {
            let int = |k: &str| x.get(k).and_then(Value::as_i64).unwrap_or_else(|| panic!("{k} in {x:?}"));
            (int("id"), int("delivered"), int("unacked"))
        })
        .collect()
}

fn messages_on(c: &mut Capture, conn: u64, consumer: i64, entry: i64) -> Result {
    c.on(conn, TO_CLIENT, "MESSAGE", &[("consumer_id", Value::Int(consumer)), ("message_id", id(1, entry))])
}

#[test]
fn remembered_message_ids_are_capped_per_consumer_and_a_forgotten_one_is_delivered_anew() {
    let mut c = Capture::with(Limits { max_remembered_messages: 4, ..options() });
    c.subscribe(0, "Shared", true);
    for entry in 0..10 {
        c.message(0, 1, entry);
    }
    // the ids of entries 6..=9 are kept, delivered and not acknowledged
    assert_eq!(consumer_sizes(&c, 1), [(0, 4, 4)]);
    // entry 5 was forgotten: delivered again it is new to the analysis; entry 9 is known, its second delivery
    assert_eq!(c.message(0, 1, 5).note("delivery"), None);
    assert_eq!(c.message(0, 1, 9).note("delivery"), Some(&Value::Int(2)));
}

#[test]
fn a_consumer_that_never_acks_keeps_at_most_the_cap_and_says_so() {
    let mut c = Capture::with(Limits { max_remembered_messages: 50, ..options() });
    c.subscribe(0, "Shared", true);
    let mut dropped = Vec::new();
    for entry in 0..500 {
        let r = c.message(0, 1, entry);
        dropped.extend(r.events.into_iter().filter(|e| e.kind.as_str() == "STATE_DROPPED"));
    }
    assert_eq!(consumer_sizes(&c, 1), [(0, 50, 50)]);
    // said once, when the 51st message came, not per frame
    assert_eq!(dropped.len(), 1);
    assert_eq!(detail(&dropped[0], "option"), Some(&st("max_remembered_messages")));
    let totals: Vec<Event> = c.close(1).into_iter().filter(|e| e.kind.as_str() == "STATE_DROPPED").collect();
    assert_eq!(totals.len(), 1);
    assert_eq!(detail(&totals[0], "dropped"), Some(&Value::Int(450)));
    assert_eq!(detail(&totals[0], "limit"), Some(&Value::Int(50)));
}

#[test]
fn every_consumer_together_stays_within_one_budget_of_remembered_ids() {
    let budget = 6_000;
    let mut c = Capture::with(Limits { max_remembered_total: budget, max_remembered_messages: 10_000, ..options() });
    for conn in 1..=3 {
        c.on(
            conn,
            TO_BROKER,
            "SUBSCRIBE",
            &[
                ("request_id", Value::Int(1)),
                ("consumer_id", Value::Int(0)),
                ("topic", st("t")),
                ("subscription", st("s")),
                ("subType", st("Shared")),
            ],
        );
    }
    let mut dropped = Vec::new();
    for conn in 1..=3 {
        for entry in 0..5_000 {
            let r = messages_on(&mut c, conn, 0, entry);
            dropped.extend(r.events.into_iter().filter(|e| e.kind.as_str() == "STATE_DROPPED"));
        }
    }
    let shared = c.analyzer.shared_sizes("pulsar");
    let remembered = map_get(&shared, "remembered").and_then(Value::as_i64).expect("remembered");
    let counted: i64 = (1..=3).flat_map(|conn| consumer_sizes(&c, conn)).map(|(_, d, u)| d + u).sum();
    assert_eq!(remembered, counted);
    // looked at every 1,024 deliveries, each adding up to two ids
    assert!(remembered <= budget as i64 + 2 * 1024, "{remembered}");
    assert!(!dropped.is_empty());
    assert_eq!(detail(&dropped[0], "option"), Some(&st("max_remembered_total")));
    // the newest deliveries are still known: a repeat of the last message is seen as one
    assert_eq!(messages_on(&mut c, 3, 0, 4_999).note("delivery"), Some(&Value::Int(2)));
}
