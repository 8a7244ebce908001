//! The generic conversation analysis (`analysis`): request/response pairing driven by a command table,
//! latency, duplicates, unmatched and unanswered requests, the OVERDUE clock and the bounded tables that say
//! what they dropped. The frames are made by hand (a decoded frame is plain data); the expected values are
//! worked out in the comments.

use pulsar_dissect_engine::analysis::bounded::{remember_bounded, DropCounter, OrderedMap};
use pulsar_dissect_engine::analysis::table::{CommandSpec, CommandTable, Key, KeyField, OpenedBy, Space};
use pulsar_dissect_engine::analysis::{
    intern, map_get, Analyzer, Event, EventHead, Frame, Ident, Output, PairingOptions, ProtocolAnalysis,
};
use pulsar_dissect_engine::model::{Decoded, Finding};
use pulsar_dissect_engine::value::{Map, Text, Value};

const P: &str = "proto";
const TO_SERVER: &str = "to_server";
const TO_CLIENT: &str = "to_client";

fn space(name: &str) -> Space {
    Space {
        name: name.into(),
        slot: false,
        duplicates: false,
        unmatched: true,
        unanswered: true,
        opened_by: OpenedBy::Client,
    }
}

fn key(space: usize, fields: &[&str]) -> Key {
    let parse = |f: &str| match f {
        "@direction" => KeyField::Direction,
        "@reverse" => KeyField::Reverse,
        "@serial" => KeyField::Serial,
        other => KeyField::Command(other.to_owned()),
    };
    Key {
        space,
        fields: fields.iter().map(|f| parse(f)).collect(),
        names: fields.iter().map(|f| f.to_string()).collect(),
    }
}

fn request_spec(name: &str, opens: Key) -> CommandSpec {
    CommandSpec {
        name: intern(name),
        scope: None,
        opens: Some(opens),
        answers: vec![],
        answer_types: None,
        interim: None,
        remember: vec![],
    }
}

fn response_spec(name: &str, answers: Vec<Key>) -> CommandSpec {
    CommandSpec {
        name: intern(name),
        scope: None,
        opens: None,
        answers,
        answer_types: None,
        interim: None,
        remember: vec![],
    }
}

/// REQ / RESP paired by `request_id` in a space of these properties.
fn table_with(edit: impl FnOnce(&mut Space)) -> CommandTable {
    let mut table = CommandTable::default();
    let mut s = space("request");
    edit(&mut s);
    let at = table.space(s);
    table.add(request_spec("REQ", key(at, &["request_id"])));
    table.add(response_spec("RESP", vec![key(at, &["request_id"])]));
    table
}

fn options(timeout: f64, max_pending: usize) -> PairingOptions {
    PairingOptions {
        request_timeout: timeout,
        request_timeout_value: Value::Float(timeout),
        max_pending_requests: max_pending,
    }
}

fn analyzer_with(table: CommandTable, opts: PairingOptions) -> Analyzer {
    let mut a = Analyzer::new(opts);
    a.add_protocol(P, ProtocolAnalysis { table, default_to_server: TO_SERVER.into(), sessions: None });
    a
}

fn analyzer() -> Analyzer {
    analyzer_with(table_with(|_| {}), options(30.0, 1000))
}

fn text(key: &str) -> Text {
    Text::Owned(key.to_owned())
}

fn command(fields: &[(&str, Value)]) -> Value {
    Value::Map(fields.iter().map(|(k, v)| (text(k), v.clone())).collect())
}

fn pdu(type_name: &str, fields: &[(&str, Value)]) -> Decoded {
    Decoded { type_name: text_name(type_name), command: Some(command(fields)), size: 10, findings: vec![], body: None }
}

fn text_name(name: &str) -> Text {
    Text::Owned(name.to_owned())
}

/// Feed one frame; its outputs.
#[allow(clippy::too_many_arguments)]
fn feed(a: &mut Analyzer, index: u64, conn: u64, direction: &str, time: f64, d: &Decoded) -> Vec<Output> {
    let (src, dst) = if direction == TO_CLIENT { ("broker:1", "client:2") } else { ("client:2", "broker:1") };
    let frame = Frame { index, protocol: P, conn, src, dst, direction, time, packet: index * 10, pdu: d };
    let mut out = Vec::new();
    a.frame(&frame, &mut out);
    out
}

fn req(a: &mut Analyzer, index: u64, time: f64, id: i64) -> Vec<Output> {
    feed(a, index, 1, TO_SERVER, time, &pdu("REQ", &[("request_id", Value::Int(id))]))
}

fn resp(a: &mut Analyzer, index: u64, time: f64, id: Value) -> Vec<Output> {
    feed(a, index, 1, TO_CLIENT, time, &pdu("RESP", &[("request_id", id)]))
}

fn annotated(out: &[Output]) -> (&Map, &Vec<Finding>, Option<(f64, u64)>) {
    // the frame's own output (events of the clock may come before it)
    out.iter()
        .find_map(|o| match o {
            Output::Annotated { notes, findings, answered } => Some((notes, findings, *answered)),
            _ => None,
        })
        .expect("the frame is annotated")
}

fn note<'a>(out: &'a [Output], key: &str) -> Option<&'a Value> {
    map_get(annotated(out).0, key)
}

fn finding_ids(out: &[Output]) -> Vec<&str> {
    annotated(out).1.iter().map(|f| f.id.as_str()).collect()
}

fn events(out: &[Output]) -> Vec<&Event> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn detail<'a>(e: &'a Event, key: &str) -> Option<&'a Value> {
    map_get(&e.details, key)
}

fn close(a: &mut Analyzer, conn: u64, time: f64) -> Vec<Output> {
    let mut out = Vec::new();
    a.event(EventHead { kind: "CONNECTION_CLOSED", conn: Some(conn), time, packet: 999, mid_stream: false }, &mut out);
    out
}

fn finish(a: &mut Analyzer) -> Vec<Output> {
    let mut out = Vec::new();
    a.finish(&mut out);
    out
}

fn kinds(out: &[Output]) -> Vec<&str> {
    events(out).iter().map(|e| e.kind.as_str()).collect()
}

#[test]
fn a_response_pairs_with_its_request_by_key() {
    let mut a = analyzer();
    let out = req(&mut a, 1, 10.0, 7);
    assert!(annotated(&out).0.is_empty());
    assert_eq!(a.waiting(1).len(), 1);
    let out = resp(&mut a, 2, 10.25, Value::Int(7));
    assert_eq!(note(&out, "answers"), Some(&Value::Int(1)));
    // 0.25 s is 250 ms
    assert_eq!(note(&out, "latency_ms"), Some(&Value::Float(250.0)));
    assert_eq!(note(&out, "request_type").and_then(Value::as_str), Some("REQ"));
    assert_eq!(annotated(&out).2, Some((10.0, 10)), "the request's time and packet");
    assert!(finding_ids(&out).is_empty());
    assert!(a.waiting(1).is_empty(), "answered: forgotten");
}

#[test]
fn latency_is_rounded_to_the_microsecond_in_milliseconds() {
    let mut a = analyzer();
    req(&mut a, 1, 1.0, 1);
    // 0.0123456 s = 12.3456 ms, to three decimals 12.346
    let out = resp(&mut a, 2, 1.0123456, Value::Int(1));
    assert_eq!(note(&out, "latency_ms"), Some(&Value::Float(12.346)));
}

#[test]
fn a_response_under_another_key_is_unmatched_with_its_key() {
    let mut a = analyzer();
    req(&mut a, 1, 1.0, 1);
    let out = resp(&mut a, 2, 1.1, Value::Int(2));
    assert_eq!(note(&out, "answers"), None);
    assert_eq!(finding_ids(&out), ["response.unmatched"]);
    let f = &annotated(&out).1[0];
    let key = map_get(&f.params, "key").unwrap();
    assert_eq!(key.get("request_id"), Some(&Value::Int(2)));
    assert_eq!(a.waiting(1).len(), 1, "the request still waits");
}

#[test]
fn a_second_answer_to_the_same_request_is_unmatched() {
    let mut a = analyzer();
    req(&mut a, 1, 1.0, 1);
    resp(&mut a, 2, 1.1, Value::Int(1));
    let out = resp(&mut a, 3, 1.2, Value::Int(1));
    assert_eq!(finding_ids(&out), ["response.unmatched"]);
}

#[test]
fn a_connection_seen_from_mid_stream_reports_no_unmatched_response() {
    let mut a = analyzer();
    let mut out = Vec::new();
    a.event(EventHead { kind: "CONNECTION_OPENED", conn: Some(1), time: 0.0, packet: 1, mid_stream: true }, &mut out);
    assert!(matches!(out[0], Output::Input), "an event is passed on");
    let out = resp(&mut a, 2, 1.0, Value::Int(5));
    assert!(finding_ids(&out).is_empty(), "its request may be before the capture");
}

#[test]
fn a_space_without_unmatched_reports_none() {
    let mut a = analyzer_with(table_with(|s| s.unmatched = false), options(30.0, 100));
    let out = resp(&mut a, 1, 1.0, Value::Int(5));
    assert!(finding_ids(&out).is_empty());
}

#[test]
fn keys_compare_as_python_dict_keys() {
    // 1, True and 1.0 are one key in Python; 1.5 and "1" are others
    assert_eq!(Ident::of(Some(&Value::Int(1))), Ident::of(Some(&Value::Bool(true))));
    assert_eq!(Ident::of(Some(&Value::Int(1))), Ident::of(Some(&Value::Float(1.0))));
    assert_eq!(Ident::of(Some(&Value::UInt(u64::MAX))), Ident::Int(i128::from(u64::MAX)));
    assert_ne!(Ident::of(Some(&Value::Int(1))), Ident::of(Some(&Value::Float(1.5))));
    assert_ne!(Ident::of(Some(&Value::Int(1))), Ident::of(Some(&Value::from("1".to_owned()))));
    assert_eq!(Ident::of(None), Ident::of(Some(&Value::Null)));
    assert_eq!(Ident::Int(i128::from(u64::MAX)).to_value(), Value::UInt(u64::MAX));
    assert_eq!(Ident::Int(-3).to_value(), Value::Int(-3));
    let mut a = analyzer();
    req(&mut a, 1, 1.0, 1);
    let out = resp(&mut a, 2, 1.5, Value::Float(1.0));
    assert_eq!(note(&out, "answers"), Some(&Value::Int(1)));
}

#[test]
fn a_duplicate_key_is_flagged_and_answers_go_oldest_first() {
    let mut a = analyzer_with(table_with(|s| s.duplicates = true), options(30.0, 100));
    assert!(finding_ids(&req(&mut a, 1, 1.0, 4)).is_empty());
    let out = req(&mut a, 2, 2.0, 4);
    assert_eq!(finding_ids(&out), ["request.duplicate_id"]);
    assert_eq!(map_get(&annotated(&out).1[0].params, "type").and_then(Value::as_str), Some("REQ"));
    assert_eq!(note(&resp(&mut a, 3, 3.0, Value::Int(4)), "answers"), Some(&Value::Int(1)));
    assert_eq!(note(&resp(&mut a, 4, 4.0, Value::Int(4)), "answers"), Some(&Value::Int(2)));
}

#[test]
fn without_duplicates_a_repeated_key_waits_silently() {
    let mut a = analyzer();
    req(&mut a, 1, 1.0, 4);
    assert!(finding_ids(&req(&mut a, 2, 2.0, 4)).is_empty());
    assert_eq!(a.waiting(1).len(), 2);
}

#[test]
fn a_slot_holds_only_the_latest_request() {
    let mut a = analyzer_with(table_with(|s| s.slot = true), options(30.0, 100));
    req(&mut a, 1, 1.0, 4);
    req(&mut a, 2, 2.0, 4);
    let waiting: Vec<u64> = a.waiting(1).iter().map(|w| w.0).collect();
    assert_eq!(waiting, [2]);
    let out = close(&mut a, 1, 5.0);
    let unanswered: Vec<_> = events(&out).iter().map(|e| detail(e, "request").cloned()).collect();
    assert_eq!(unanswered, [Some(Value::Int(2))]);
}

#[test]
fn a_request_from_the_wrong_side_does_not_wait() {
    let mut a = analyzer();
    feed(&mut a, 1, 1, TO_CLIENT, 1.0, &pdu("REQ", &[("request_id", Value::Int(1))]));
    assert!(a.waiting(1).is_empty(), "opened by the client: the server's frame is not a request");
    let mut a = analyzer_with(table_with(|s| s.opened_by = OpenedBy::Server), options(30.0, 100));
    req(&mut a, 1, 1.0, 1);
    assert!(a.waiting(1).is_empty());
    feed(&mut a, 2, 1, TO_CLIENT, 1.0, &pdu("REQ", &[("request_id", Value::Int(1))]));
    assert_eq!(a.waiting(1).len(), 1);
    let mut a = analyzer_with(table_with(|s| s.opened_by = OpenedBy::Any), options(30.0, 100));
    req(&mut a, 1, 1.0, 1);
    feed(&mut a, 2, 1, TO_CLIENT, 1.0, &pdu("REQ", &[("request_id", Value::Int(2))]));
    assert_eq!(a.waiting(1).len(), 2);
}

#[test]
fn an_interim_answer_leaves_its_request_waiting() {
    let mut table = table_with(|_| {});
    let at = 0;
    let mut interim = response_spec("PROGRESS", vec![key(at, &["request_id"])]);
    interim.interim = Some(("ready".into(), Value::Bool(false)));
    table.add(interim);
    let mut a = analyzer_with(table, options(30.0, 100));
    req(&mut a, 1, 1.0, 9);
    let not_ready = pdu("PROGRESS", &[("request_id", Value::Int(9)), ("ready", Value::Bool(false))]);
    let out = feed(&mut a, 2, 1, TO_CLIENT, 2.0, &not_ready);
    assert_eq!(note(&out, "answers"), Some(&Value::Int(1)));
    assert_eq!(a.waiting(1).len(), 1, "still waiting");
    let ready = pdu("PROGRESS", &[("request_id", Value::Int(9)), ("ready", Value::Bool(true))]);
    let out = feed(&mut a, 3, 1, TO_CLIENT, 3.0, &ready);
    assert_eq!(note(&out, "answers"), Some(&Value::Int(1)));
    assert_eq!(note(&out, "latency_ms"), Some(&Value::Float(2000.0)));
    assert!(a.waiting(1).is_empty());
}

#[test]
fn a_response_answers_only_its_request_types() {
    let mut table = table_with(|_| {});
    table.add(request_spec("OTHER_REQ", key(0, &["request_id"])));
    let mut only = response_spec("OTHER_RESP", vec![key(0, &["request_id"])]);
    only.answer_types = Some(vec!["OTHER_REQ".into()]);
    table.add(only);
    let mut a = analyzer_with(table, options(30.0, 100));
    req(&mut a, 1, 1.0, 3);
    let out = feed(&mut a, 2, 1, TO_CLIENT, 2.0, &pdu("OTHER_RESP", &[("request_id", Value::Int(3))]));
    assert_eq!(finding_ids(&out), ["response.unmatched"]);
    feed(&mut a, 3, 1, TO_SERVER, 3.0, &pdu("OTHER_REQ", &[("request_id", Value::Int(3))]));
    let out = feed(&mut a, 4, 1, TO_CLIENT, 4.0, &pdu("OTHER_RESP", &[("request_id", Value::Int(3))]));
    assert_eq!(note(&out, "answers"), Some(&Value::Int(3)), "the REQ under the same key is passed over");
}

#[test]
fn a_response_later_than_the_timeout_is_slow() {
    let mut a = analyzer_with(table_with(|_| {}), options(2.0, 100));
    req(&mut a, 1, 10.0, 1);
    let out = resp(&mut a, 2, 12.5, Value::Int(1));
    assert_eq!(kinds(&out), ["OVERDUE"], "its deadline (12.0) passed before the response came");
    assert_eq!(finding_ids(&out), ["response.slow"]);
    let params = &annotated(&out).1[0].params;
    assert_eq!(map_get(params, "latency_s"), Some(&Value::Float(2.5)));
    assert_eq!(map_get(params, "request"), Some(&Value::Int(1)));
    assert_eq!(map_get(params, "timeout_s"), Some(&Value::Float(2.0)));
    // exactly the timeout is not slow
    req(&mut a, 3, 20.0, 2);
    assert!(finding_ids(&resp(&mut a, 4, 22.0, Value::Int(2))).is_empty());
}

#[test]
fn a_response_before_its_request_keeps_the_negative_latency() {
    let mut a = analyzer();
    req(&mut a, 1, 10.0, 1);
    let out = resp(&mut a, 2, 9.5, Value::Int(1));
    assert_eq!(note(&out, "latency_ms"), Some(&Value::Float(-500.0)));
    assert_eq!(finding_ids(&out), ["response.before_request"]);
}

#[test]
fn requests_waiting_at_the_close_are_unanswered_in_frame_order() {
    let mut a = analyzer();
    for (index, id) in [(1, 30), (2, 10), (3, 20)] {
        req(&mut a, index, index as f64, id);
    }
    resp(&mut a, 4, 4.0, Value::Int(10));
    let out = close(&mut a, 1, 9.0);
    assert!(matches!(out[0], Output::Input));
    let evs = events(&out);
    assert_eq!(kinds(&out), ["UNANSWERED", "UNANSWERED"]);
    assert_eq!(detail(evs[0], "request"), Some(&Value::Int(1)));
    assert_eq!(detail(evs[1], "request"), Some(&Value::Int(3)));
    assert_eq!(detail(evs[0], "request_type").and_then(Value::as_str), Some("REQ"));
    assert_eq!(evs[0].time, 9.0);
    assert_eq!(evs[0].conn, Some(1));
    let route = evs[0].route.as_ref().unwrap();
    assert_eq!((&*route.0, &*route.1, &*route.2), ("client:2", "broker:1", TO_SERVER));
    assert!(a.sizes(1).is_none(), "the connection is gone");
}

#[test]
fn a_space_without_unanswered_leaves_nothing_at_the_close() {
    let mut a = analyzer_with(table_with(|s| s.unanswered = false), options(30.0, 100));
    req(&mut a, 1, 1.0, 1);
    assert!(kinds(&close(&mut a, 1, 2.0)).is_empty());
}

#[test]
fn the_end_of_the_input_closes_every_connection() {
    let mut a = analyzer();
    req(&mut a, 1, 1.0, 1);
    feed(&mut a, 2, 2, TO_SERVER, 2.0, &pdu("REQ", &[("request_id", Value::Int(1))]));
    let out = finish(&mut a);
    let conns: Vec<_> = events(&out).iter().map(|e| e.conn).collect();
    assert_eq!(conns, [Some(1), Some(2)]);
    // closed at the connection's last frame time
    assert_eq!(events(&out)[1].time, 2.0);
}

#[test]
fn connections_pair_separately() {
    let mut a = analyzer();
    req(&mut a, 1, 1.0, 1);
    let out = feed(&mut a, 2, 2, TO_CLIENT, 1.5, &pdu("RESP", &[("request_id", Value::Int(1))]));
    assert_eq!(finding_ids(&out), ["response.unmatched"]);
}

#[test]
fn the_clock_reports_an_overdue_request_once() {
    let mut a = analyzer_with(table_with(|_| {}), options(5.0, 100));
    req(&mut a, 1, 100.0, 1);
    let mut out = Vec::new();
    a.tick(104.0, &mut out);
    assert!(out.is_empty(), "not yet: the deadline is 105");
    a.tick(106.0, &mut out);
    assert_eq!(kinds(&out), ["OVERDUE"]);
    let e = events(&out)[0];
    assert_eq!(e.time, 105.0, "reported at its deadline");
    assert_eq!(detail(e, "request"), Some(&Value::Int(1)));
    assert_eq!(map_get(&e.params, "timeout_s"), Some(&Value::Float(5.0)));
    let mut again = Vec::new();
    a.tick(200.0, &mut again);
    assert!(again.is_empty());
    // overdue, and still unanswered at the end
    assert_eq!(kinds(&close(&mut a, 1, 300.0)), ["UNANSWERED"]);
}

#[test]
fn overdue_requests_come_in_deadline_order_across_connections() {
    let mut a = analyzer_with(table_with(|_| {}), options(5.0, 100));
    req(&mut a, 1, 100.0, 1);
    feed(&mut a, 2, 2, TO_SERVER, 101.0, &pdu("REQ", &[("request_id", Value::Int(1))]));
    req(&mut a, 3, 102.0, 2);
    let mut out = Vec::new();
    a.tick(110.0, &mut out);
    let times: Vec<f64> = events(&out).iter().map(|e| e.time).collect();
    assert_eq!(times, [105.0, 106.0, 107.0]);
    let conns: Vec<_> = events(&out).iter().map(|e| e.conn).collect();
    assert_eq!(conns, [Some(1), Some(2), Some(1)]);
}

#[test]
fn an_answered_request_is_never_overdue() {
    let mut a = analyzer_with(table_with(|_| {}), options(5.0, 100));
    req(&mut a, 1, 100.0, 1);
    resp(&mut a, 2, 101.0, Value::Int(1));
    let mut out = Vec::new();
    a.tick(200.0, &mut out);
    assert!(out.is_empty());
}

#[test]
fn a_frame_moves_the_clock_too() {
    let mut a = analyzer_with(table_with(|_| {}), options(5.0, 100));
    req(&mut a, 1, 100.0, 1);
    let out = req(&mut a, 2, 110.0, 2);
    assert_eq!(kinds(&out), ["OVERDUE"]);
    assert!(matches!(out.last(), Some(Output::Annotated { .. })), "the frame after the events it caused");
}

#[test]
fn the_pending_cap_forgets_the_oldest_and_says_so_once_then_the_total() {
    let mut a = analyzer_with(table_with(|_| {}), options(30.0, 3));
    let mut dropped_events = Vec::new();
    for i in 1..=6u64 {
        let out = req(&mut a, i, i as f64, i as i64);
        dropped_events
            .extend(events(&out).iter().map(|e| (i, detail(e, "dropped").cloned(), detail(e, "limit").cloned())));
    }
    // the 4th request is the first over the cap of 3: one event then, none for the 5th and 6th
    assert_eq!(dropped_events, [(4, Some(Value::Int(1)), Some(Value::Int(3)))]);
    let waiting: Vec<u64> = a.waiting(1).iter().map(|w| w.0).collect();
    assert_eq!(waiting, [4, 5, 6]);
    assert_eq!(a.sizes(1).and_then(|s| map_get(&s, "order").and_then(Value::as_i64)), Some(3));
    let out = close(&mut a, 1, 10.0);
    assert_eq!(kinds(&out), ["UNANSWERED", "UNANSWERED", "UNANSWERED", "STATE_DROPPED"]);
    let total = events(&out)[3];
    assert_eq!(detail(total, "dropped"), Some(&Value::Int(3)));
    assert_eq!(detail(total, "option").and_then(Value::as_str), Some("max_pending_requests"));
}

#[test]
fn a_request_cut_at_the_end_awaits_nothing() {
    let mut a = analyzer();
    let mut cut = pdu("REQ", &[("request_id", Value::Int(1))]);
    cut.findings.push(Finding { id: intern("frame.cut_at_end"), params: vec![] });
    feed(&mut a, 1, 1, TO_SERVER, 1.0, &cut);
    assert!(a.waiting(1).is_empty());
}

#[test]
fn an_undecoded_command_tells_the_pairing_nothing() {
    let mut a = analyzer();
    let mut broken = pdu("RESP", &[]);
    broken.command = None;
    let out = feed(&mut a, 1, 1, TO_CLIENT, 1.0, &broken);
    assert!(finding_ids(&out).is_empty());
    assert!(annotated(&out).0.is_empty());
}

#[test]
fn a_command_without_its_key_field_neither_waits_nor_is_unmatched() {
    let mut a = analyzer();
    feed(&mut a, 1, 1, TO_SERVER, 1.0, &pdu("REQ", &[]));
    feed(&mut a, 2, 1, TO_SERVER, 1.0, &pdu("REQ", &[("request_id", Value::Null)]));
    assert!(a.waiting(1).is_empty());
    let out = feed(&mut a, 3, 1, TO_CLIENT, 1.0, &pdu("RESP", &[]));
    assert!(finding_ids(&out).is_empty());
}

#[test]
fn a_frame_of_a_protocol_not_added_passes_with_no_notes() {
    let mut a = analyzer();
    let d = pdu("REQ", &[("request_id", Value::Int(1))]);
    let frame = Frame {
        index: 1,
        protocol: "other",
        conn: 1,
        src: "a",
        dst: "b",
        direction: TO_SERVER,
        time: 1.0,
        packet: 1,
        pdu: &d,
    };
    let mut out = Vec::new();
    a.frame(&frame, &mut out);
    assert!(annotated(&out).0.is_empty());
    assert!(a.waiting(1).is_empty());
    assert!(a.knows_protocol(P) && !a.knows_protocol("other"));
}

#[test]
fn a_ping_is_answered_by_a_pong_from_the_other_side() {
    // PING waits under its own direction; PONG looks under the reverse of its own
    let mut table = CommandTable::default();
    let at = table.space(Space { slot: true, opened_by: OpenedBy::Any, ..space("ping") });
    table.add(request_spec("PING", key(at, &["@direction"])));
    table.add(response_spec("PONG", vec![key(at, &["@reverse"])]));
    let mut a = analyzer_with(table, options(30.0, 100));
    feed(&mut a, 1, 1, TO_CLIENT, 1.0, &pdu("PING", &[]));
    let out = feed(&mut a, 2, 1, TO_SERVER, 1.5, &pdu("PONG", &[]));
    assert_eq!(note(&out, "answers"), Some(&Value::Int(1)));
    feed(&mut a, 3, 1, TO_SERVER, 2.0, &pdu("PING", &[]));
    let out = feed(&mut a, 4, 1, TO_CLIENT, 2.5, &pdu("PONG", &[]));
    assert_eq!(note(&out, "answers"), Some(&Value::Int(3)));
    // a PONG from the same side as the PING does not answer it
    feed(&mut a, 5, 1, TO_SERVER, 3.0, &pdu("PING", &[]));
    let out = feed(&mut a, 6, 1, TO_SERVER, 3.5, &pdu("PONG", &[]));
    assert_eq!(note(&out, "answers"), None);
}

#[test]
fn a_space_is_one_name() {
    let mut table = CommandTable::default();
    let first = table.space(space("a"));
    let second = table.space(space("b"));
    let again = table.space(Space { slot: true, ..space("a") });
    assert_eq!((first, second, again), (0, 1, 0));
    assert!(!table.spaces[0].slot, "the first declaration stands");
    table.add(request_spec("REQ", key(0, &["x"])));
    assert!(table.get("REQ").is_some() && table.get("req").is_none());
}

#[test]
fn remembered_fields_are_kept_while_a_request_waits() {
    let mut table = CommandTable::default();
    table.space(space("request"));
    let mut spec = request_spec("REQ", key(0, &["request_id"]));
    spec.remember = vec!["topic".into(), "absent".into()];
    table.add(spec);
    let mut a = analyzer_with(table, options(30.0, 100));
    feed(
        &mut a,
        1,
        1,
        TO_SERVER,
        1.0,
        &pdu("REQ", &[("request_id", Value::Int(1)), ("topic", Value::from("t".to_owned()))]),
    );
    let waiting = a.waiting(1);
    let kept = &waiting[0].2;
    assert_eq!(map_get(kept, "topic").and_then(Value::as_str), Some("t"));
    assert_eq!(map_get(kept, "absent"), Some(&Value::Null));
}

// ------------------------------------------------------------------------------------------- bounded state

#[test]
fn the_drop_counter_says_each_kind_once_then_totals_at_the_close() {
    let mut drops = DropCounter::new(7);
    let first = drops.drop(intern("max_a"), intern("things"), 10, 1.0, 11).expect("the first drop is said");
    assert_eq!(first.kind.as_str(), "STATE_DROPPED");
    assert_eq!(first.conn, Some(7));
    assert_eq!(map_get(&first.details, "dropped"), Some(&Value::Int(1)));
    assert_eq!(map_get(&first.details, "limit"), Some(&Value::Int(10)));
    assert!(drops.drop(intern("max_a"), intern("things"), 10, 2.0, 12).is_none());
    assert!(drops.drop(intern("max_a"), intern("things"), 10, 3.0, 13).is_none());
    assert!(drops.drop(intern("max_b"), intern("others"), 5, 4.0, 14).is_some(), "another kind is said too");
    let mut out = Vec::new();
    drops.close(9.0, 99, &mut out);
    // max_a dropped 3 (said again with its total); max_b only once (said already)
    assert_eq!(out.len(), 1);
    assert_eq!(map_get(&out[0].details, "option").and_then(Value::as_str), Some("max_a"));
    assert_eq!(map_get(&out[0].details, "dropped"), Some(&Value::Int(3)));
    assert_eq!((out[0].time, out[0].packet), (9.0, 99));
}

#[test]
fn a_bounded_table_never_holds_more_than_its_cap() {
    let mut table = OrderedMap::new();
    let mut forgotten = 0;
    for i in 0..1000u32 {
        // re-inserting a known key forgets nothing
        if remember_bounded(&mut table, i % 37, i, 16) {
            forgotten += 1;
        }
        assert!(table.len() <= 16);
    }
    // 37 distinct keys cycled: each new key beyond the 16th forgets one, a key comes back 21 keys later
    // (forgotten by then), so every insertion after the first 16 forgets one
    assert_eq!(forgotten, 1000 - 16);
}

#[test]
fn interned_names_are_made_once() {
    let a = intern("SOME_TYPE_x1");
    let b = intern("SOME_TYPE_x1");
    assert!(std::ptr::eq(a, b));
    assert_eq!(a.as_str(), "SOME_TYPE_x1");
}
