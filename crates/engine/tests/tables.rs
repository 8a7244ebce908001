//! The pipeline's Arrow tables (`tables.rs`): every shipped capture through the `Engine` into both the JSON
//! lines (`--json`'s contract) and the tables; each column equals the key of the line it comes from, read by
//! serde_json (not by the engine), and the `json` column, when asked for, is the line byte for byte. Records
//! of odd shapes never fail a table: a value of another type than its column's is null.

mod capture_support;

use std::path::PathBuf;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use pulsar_dissect_engine::analysis::table::CommandTable;
use pulsar_dissect_engine::engine::{FindingTexts, JsonLines, ProtocolSetup, Settings, Tables};
use pulsar_dissect_engine::model::Finding;
use pulsar_dissect_engine::protocols::REGISTRY;
use pulsar_dissect_engine::records::{Atom, Expert, Message, NoFront, RecordStyle};
use pulsar_dissect_engine::tables::{tables_of, RecordTables, FRAMES, MESSAGES, MESSAGE_ID_FIELDS};
use pulsar_dissect_engine::value::{Text, Value};
use pulsar_dissect_engine::{name, Engine};

use capture_support::{reader, root};
use serde_json::{json, Value as Json};

fn setups() -> Vec<ProtocolSetup> {
    REGISTRY
        .iter()
        .map(|&protocol| {
            let tubemq = protocol.name() == "tubemq";
            ProtocolSetup {
                protocol,
                ports: if tubemq {
                    vec![(8715, "master".into()), (8123, "broker".into())]
                } else {
                    vec![(6650, "broker".into())]
                },
                client_role: "client".into(),
                server_roles: vec![if tubemq { "master" } else { "broker" }.into()],
                max_frame_size: 64 << 20,
                table: Box::new(CommandTable::default),
            }
        })
        .collect()
}

#[derive(Clone, Copy)]
struct IdTexts;

impl FindingTexts for IdTexts {
    /// A finding is a warning; an event (an upper-case kind) a note, so that the problems table holds the
    /// frames' findings alone.
    fn expert(&mut self, finding: &Finding) -> Expert<NoFront> {
        let event = finding.id.as_str().bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
        let severity = if event { name!("note") } else { name!("warning") };
        Expert { id: finding.id, severity, message: Message::Owned(finding.id.as_str().into()) }
    }
}

fn shipped() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in [root().join("captures"), root().join("captures/tubemq")] {
        for entry in std::fs::read_dir(dir).expect("the shipped captures") {
            let path = entry.expect("an entry").path();
            let name = path.to_string_lossy().to_string();
            if name.ends_with(".pcap") || name.ends_with(".pcapng") || name.ends_with(".pcap.gz") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// A cell of a column as JSON, for comparing with the line's value.
fn cell(batch: &RecordBatch, column: &str, row: usize) -> Json {
    let array = batch.column_by_name(column).unwrap_or_else(|| panic!("a column {column}"));
    if array.is_null(row) {
        return Json::Null;
    }
    match array.data_type() {
        arrow_schema::DataType::Int64 => Json::from(array.as_primitive::<Int64Type>().value(row)),
        arrow_schema::DataType::Float64 => Json::from(array.as_primitive::<Float64Type>().value(row)),
        arrow_schema::DataType::Boolean => Json::from(array.as_boolean().value(row)),
        arrow_schema::DataType::LargeUtf8 => Json::from(array.as_string::<i64>().value(row)),
        arrow_schema::DataType::Dictionary(..) => {
            let dictionary = array.as_dictionary::<Int32Type>();
            let key = dictionary.keys().value(row) as usize;
            Json::from(dictionary.values().as_string::<i32>().value(key))
        }
        arrow_schema::DataType::FixedSizeBinary(32) => {
            let bytes = array.as_fixed_size_binary().value(row);
            Json::from(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
        }
        arrow_schema::DataType::Struct(fields) => {
            let fields_of = array.as_struct();
            let field = |at: usize| {
                let values = fields_of.column(at).as_primitive::<Int64Type>();
                if values.is_null(row) {
                    Json::Null
                } else {
                    Json::from(values.value(row))
                }
            };
            Json::Object(fields.iter().enumerate().map(|(at, f)| (f.name().clone(), field(at))).collect())
        }
        other => panic!("no such column type {other}"),
    }
}

/// What a column holds of a line's value, as the table's rules say: numbers of their type, strings as they
/// are, objects and lists as their JSON text (compared parsed), anything else null.
fn expected(kind: &str, value: Option<&Json>) -> Json {
    match (kind, value) {
        (_, None | Some(Json::Null)) => Json::Null,
        ("int", Some(v)) => v.as_i64().map_or(Json::Null, Json::from),
        ("float", Some(v)) => v.as_f64().map_or(Json::Null, Json::from),
        ("bool", Some(v)) => v.as_bool().map_or(Json::Null, Json::from),
        ("digest", Some(Json::String(s))) if s.len() == 64 => Json::from(s.clone()),
        ("digest", _) => Json::Null,
        // a message id: the object's integer keys, or one integer in `id`
        ("fields", Some(Json::Object(keys))) => fields(|name| keys.get(name).and_then(Json::as_i64)),
        ("fields", Some(v)) if v.as_i64().is_some() => fields(|name| (name == "id").then(|| v.as_i64()).flatten()),
        ("fields", _) => Json::Null,
        (_, Some(Json::String(s))) => Json::from(s.clone()),
        (_, Some(other)) => other.clone(),
    }
}

/// A struct cell of `MESSAGE_ID_FIELDS` as `cell` gives it, each field's value from `value`.
fn fields(value: impl Fn(&str) -> Option<i64>) -> Json {
    Json::Object(
        MESSAGE_ID_FIELDS.iter().map(|name| (name.to_string(), value(name).map_or(Json::Null, Json::from))).collect(),
    )
}

fn kind_name(columns: &[(&str, pulsar_dissect_engine::tables::Kind)], name: &str) -> &'static str {
    use pulsar_dissect_engine::tables::Kind;
    match columns.iter().find(|(n, _)| *n == name).map(|(_, k)| *k) {
        Some(Kind::Int) => "int",
        Some(Kind::Float) => "float",
        Some(Kind::Bool) => "bool",
        Some(Kind::Digest) => "digest",
        Some(Kind::Fields(_)) => "fields",
        _ => "text",
    }
}

/// A text cell that holds the JSON text of what is no string (an object, a list, a number), parsed; other
/// cells as they are.
fn parsed(cell: Json, want: &Json) -> Json {
    match (&cell, want) {
        (Json::String(text), want) if !want.is_string() => serde_json::from_str(text).unwrap_or(cell),
        _ => cell,
    }
}

#[test]
fn every_capture_s_tables_equal_its_json_lines() {
    let engine = Engine::new(setups(), Settings::default());
    let (mut frames_seen, mut messages_seen, mut findings_seen) = (0, 0, 0);
    for path in shipped() {
        let bytes = std::fs::read(&path).expect("readable");
        let mut sinks = (
            JsonLines::new(IdTexts, RecordStyle::default()),
            Tables::new(IdTexts, RecordStyle::default(), RecordTables::new(true)),
        );
        engine.run(&mut reader(bytes), &mut sinks).expect("no sink error");
        let (lines, mut tables) = sinks;
        let [frames, messages, problems, _, _] = tables.tables.finish().expect("record batches");
        let records: Vec<(String, Json)> = String::from_utf8(lines.out)
            .expect("UTF-8")
            .lines()
            .map(|l| (l.to_owned(), serde_json::from_str(l).expect("a JSON line")))
            .filter(|(_, r): &(String, Json)| r.get("index").is_some())
            .collect();
        let name = path.display();
        assert_eq!(frames.num_rows(), records.len(), "{name}: a row per frame");
        let mut message_row = 0;
        let mut problem_row = 0;
        for (row, (line, record)) in records.iter().enumerate() {
            assert_eq!(cell(&frames, "json", row), Json::from(line.clone()), "{name}: the line byte for byte");
            for (column, _) in FRAMES.iter().take(25) {
                let mut want = expected(kind_name(FRAMES, column), record.get(*column));
                if *column == "expert" && want == Json::Array(vec![]) {
                    want = Json::Null; // no findings is no value
                }
                assert_eq!(parsed(cell(&frames, column, row), &want), want, "{name}: frame {row} {column}");
            }
            let actor = record.get("producer").or(record.get("consumer"));
            let topic = actor.and_then(|a| a.get("topic")).filter(|t| !t.is_null());
            let topic = topic.or(record.get("topic").filter(|t| !t.is_null()));
            let topic = topic.or(record.get("command").and_then(|c| c.get("topic")));
            assert_eq!(cell(&frames, "topic", row), expected("text", topic), "{name}: frame {row}'s topic");
            for (position, message) in record.get("messages").and_then(Json::as_array).into_iter().flatten().enumerate()
            {
                if !message.is_object() {
                    continue;
                }
                assert_eq!(cell(&messages, "frame", message_row), record["index"]);
                assert_eq!(cell(&messages, "position", message_row), Json::from(position));
                for (column, _) in &MESSAGES[12..] {
                    let want = expected(kind_name(MESSAGES, column), message.get(*column));
                    let got = parsed(cell(&messages, column, message_row), &want);
                    assert_eq!(got, want, "{name}: frame {row} message {position} {column}");
                }
                message_row += 1;
            }
            for finding in record.get("expert").and_then(Json::as_array).into_iter().flatten() {
                assert_eq!(cell(&problems, "id", problem_row), finding["id"]);
                assert_eq!(cell(&problems, "frame", problem_row), record["index"]);
                assert_eq!(cell(&problems, "frame_type", problem_row), record["type"]);
                problem_row += 1;
            }
        }
        assert_eq!((messages.num_rows(), problems.num_rows()), (message_row, problem_row), "{name}");
        frames_seen += records.len();
        messages_seen += message_row;
        findings_seen += problem_row;
    }
    assert!(frames_seen > 1000 && messages_seen > 1000 && findings_seen > 0, "{frames_seen} {messages_seen}");
}

#[test]
fn without_the_json_column_the_values_are_the_same() {
    let path = root().join("captures/02_batching_props_keys.pcap");
    let engine = Engine::new(setups(), Settings::default());
    let mut both = Vec::new();
    for with_json in [true, false] {
        let mut sink = Tables::new(IdTexts, RecordStyle::default(), RecordTables::new(with_json));
        engine.run(&mut reader(std::fs::read(&path).expect("readable")), &mut sink).expect("no sink error");
        both.push(sink.tables.finish().expect("batches"));
    }
    let (with, without) = (&both[0], &both[1]);
    assert_eq!(without[0].num_columns() + 1, with[0].num_columns(), "json is the one more column");
    assert!(without[0].schema().column_with_name("json").is_none());
    assert_eq!(with[0].project(&(0..without[0].num_columns()).collect::<Vec<_>>()).expect("columns"), without[0]);
    assert!(with[1].num_rows() > 0);
    assert_eq!((&with[1], &with[2], &with[3], &with[4]), (&without[1], &without[2], &without[3], &without[4]));
}

fn json(text: &str) -> Value {
    fn value(json: &Json) -> Value {
        match json {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => n
                .as_i64()
                .map(Value::Int)
                .or(n.as_u64().map(Value::UInt))
                .unwrap_or_else(|| Value::Float(n.as_f64().expect("a number"))),
            Json::String(s) => Value::from(s.clone()),
            Json::Array(items) => Value::List(items.iter().map(value).collect()),
            Json::Object(entries) => {
                Value::Map(entries.iter().map(|(k, v)| (Text::Owned(k.clone()), value(v))).collect())
            }
        }
    }
    value(&serde_json::from_str(text).expect("JSON"))
}

#[test]
fn odd_values_are_null_never_an_error_and_objects_keep_their_json_text() {
    let records = [
        json(
            r#"{"index": 1, "protocol": "pulsar", "time": 1.5, "conn": 2, "src": "a\u0007\"b", "type": "SEND",
            "command": {"topic": "t1", "x": [1, 2]}, "size": "big", "problems": [],
            "expert": [{"id": "i", "severity": "error", "message": "m"}], "encrypted": true,
            "producer": {"id": 7, "topic": "persistent://t", "name": "p"},
            "messages": [{"payload_size": 3, "message_id": {"ledger_id": 1, "entry_id": "x", "extra": 5}, "properties": {"k": "v"},
                          "payload_sha256": "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff"},
                         "not an object", {"payload_size": 18446744073709551615, "payload_sha256": "short",
                                           "message_id": 42}]}"#,
        ),
        json(
            r#"{"index": 2, "time": "soon", "answers": 1, "latency_ms": 0.25, "command": {"topic": "t2"},
            "encrypted": "yes", "expert": [], "unknown": {"deep": [1, {"a": 2}]}, "request_type": 7}"#,
        ),
    ];
    let [frames, messages, problems, exchanges, events] = tables_of(&records, false).expect("batches");
    assert_eq!(events.num_rows(), 0, "records are no events");
    assert_eq!(frames.num_rows(), 2);
    let column =
        |batch: &RecordBatch, name: &str| (0..batch.num_rows()).map(|r| cell(batch, name, r)).collect::<Vec<_>>();
    assert_eq!(column(&frames, "index"), [Json::from(1), Json::from(2)]);
    assert_eq!(column(&frames, "time"), [Json::from(1.5), Json::Null]);
    assert_eq!(column(&frames, "size"), [Json::Null, Json::Null]);
    assert_eq!(column(&frames, "src"), [Json::from("a\u{7}\"b"), Json::Null]);
    assert_eq!(
        column(&frames, "command"),
        [Json::from(r#"{"topic":"t1","x":[1,2]}"#), Json::from(r#"{"topic":"t2"}"#)]
    );
    assert_eq!(column(&frames, "topic"), [Json::from("persistent://t"), Json::from("t2")]);
    assert_eq!(column(&frames, "problems"), [Json::from("[]"), Json::Null]);
    let expert = column(&frames, "expert");
    assert_eq!(
        expert[0].as_str().map(|t| serde_json::from_str::<Json>(t).expect("JSON text")),
        Some(json!([{"id": "i", "severity": "error", "message": "m"}]))
    );
    assert_eq!(expert[1], Json::Null, "no findings is no value");
    assert_eq!(column(&frames, "encrypted"), [Json::from(true), Json::Null]);
    assert_eq!(column(&frames, "request_type"), [Json::Null, Json::from("7")], "a number in a text column: its JSON");
    assert_eq!(column(&frames, "producer_id"), [Json::from(7), Json::Null]);
    assert_eq!(column(&frames, "producer_name"), [Json::from("p"), Json::Null]);
    assert_eq!(column(&messages, "position"), [Json::from(0), Json::from(2)], "the item that is no object: no row");
    assert_eq!(column(&messages, "payload_size"), [Json::from(3), Json::Null], "beyond int64: null");
    assert_eq!(
        column(&messages, "message_id"),
        [fields(|name| (name == "ledger_id").then_some(1)), fields(|name| (name == "id").then_some(42))],
        "an object's known keys (others null), or one integer in id"
    );
    assert_eq!(column(&messages, "properties"), [Json::from(r#"{"k":"v"}"#), Json::Null]);
    assert_eq!(column(&messages, "payload_sha256")[0], Json::from("00ff".repeat(16)));
    assert_eq!(column(&messages, "payload_sha256")[1], Json::Null, "not 64 hex digits: null");
    assert_eq!(column(&messages, "topic"), [Json::from("persistent://t"), Json::from("persistent://t")]);
    assert_eq!(
        [
            column(&problems, "id"),
            column(&problems, "frame"),
            column(&problems, "time"),
            column(&problems, "frame_type")
        ],
        [[Json::from("i")], [Json::from(1)], [Json::from(1.5)], [Json::from("SEND")]]
    );
    assert_eq!(column(&exchanges, "request_frame"), [Json::from(1)]);
    assert_eq!(column(&exchanges, "response_frame"), [Json::from(2)]);
    assert_eq!(column(&exchanges, "latency_ms"), [Json::from(0.25)]);
    assert_eq!(column(&exchanges, "topic"), [Json::from("t2")]);
    assert_eq!(column(&exchanges, "request_time"), [Json::Null], "unknown to a record made elsewhere");
}

/// A message's row filled from its parts (`TableSink::message`) equals the row the same message makes when its
/// keys are put one by one (`write_message_parts`, as every other sink writes it): with and without an id, a
/// payload or none, a field kept as JSON text, a text field, the payload's own bytes (`payload_bytes`), an id
/// field the table has no place for.
#[test]
fn a_message_s_parts_make_the_row_its_keys_make() {
    use pulsar_dissect_engine::records::{write_message_parts, Key, MessageField, MessageParts, RecordSink};

    let (size, ledger, entry, partition, batch) =
        (Value::Int(5), Value::Int(9), Value::UInt(3), Value::Int(-1), Value::Int(0));
    let sequence = Value::Int(77);
    let mut properties = pulsar_dissect_engine::value::Map::new();
    properties.push((Text::Name(name!("k")), Value::Str(Text::Owned("v\"w".into()))));
    let properties = Value::Map(properties);
    let id = [
        (name!("ledger_id"), &ledger),
        (name!("entry_id"), &entry),
        (name!("partition"), &partition),
        (name!("batch_index"), &batch),
        (name!("not_a_field"), &sequence),
    ];
    let fields = [
        (Key::Name(name!("batch_index")), MessageField::Value(&batch)),
        (Key::Name(name!("sequence_id")), MessageField::Value(&sequence)),
        (Key::Name(name!("ordering_key_b64")), MessageField::Text("AAE=")),
        (Key::Name(name!("partition_key")), MessageField::Text("pk")),
        (Key::Name(name!("properties")), MessageField::Value(&properties)),
    ];
    let messages = [
        MessageParts {
            payload_size: &size,
            payload: Some(b"hello"),
            id: Some(&id),
            fields: &fields,
            payload_bytes: false,
        },
        MessageParts { payload_size: &Value::Null, payload: None, id: None, fields: &fields[1..], payload_bytes: true },
        MessageParts {
            payload_size: &size,
            payload: Some(&[0xff, 0]),
            id: Some(&id[..2]),
            fields: &[],
            payload_bytes: true,
        },
    ];
    let table = |by_parts: bool| {
        let mut tables = RecordTables::new(false);
        tables
            .record(None, |sink| {
                RecordSink::<NoFront>::open(sink, Key::Item, false)?;
                RecordSink::<NoFront>::put(sink, Key::Name(name!("index")), Atom::Value(&Value::Int(1)))?;
                RecordSink::<NoFront>::open(sink, Key::Name(name!("messages")), true)?;
                for message in &messages {
                    if by_parts {
                        RecordSink::<NoFront>::message(sink, message)?;
                    } else {
                        write_message_parts::<NoFront>(sink, message)?;
                    }
                }
                RecordSink::<NoFront>::close(sink)?;
                RecordSink::<NoFront>::close(sink)
            })
            .expect("a record");
        let [_, messages, ..] = tables.finish().expect("batches");
        messages
    };
    let (by_parts, by_keys) = (table(true), table(false));
    assert_eq!(by_keys.num_rows(), 3);
    assert_eq!(by_parts, by_keys);
    assert_eq!(cell(&by_parts, "properties", 0), Json::from(r#"{"k":"v\"w"}"#));
    assert_eq!(cell(&by_parts, "sequence_id", 1), Json::from(77));
}

/// Texts that show what they were given: an event's text is its kind and its parameters as JSON (in their
/// order), its severity a warning for `warned` kinds, else a note; each event's text given is kept, with its
/// parameters.
struct ShownTexts {
    warned: &'static [&'static str],
    asked: Vec<(String, Json)>,
}

impl FindingTexts for ShownTexts {
    fn expert(&mut self, finding: &Finding) -> Expert<NoFront> {
        let mut params = Vec::new();
        pulsar_dissect_engine::value::write_json_map(&finding.params, &mut params);
        let params = String::from_utf8(params).expect("UTF-8");
        let message = format!("{} {params}", finding.id.as_str());
        if !finding.id.as_str().contains('.') {
            // an event's kind (a frame's findings are dotted ids)
            self.asked.push((message.clone(), serde_json::from_str(&params).expect("JSON")));
        }
        let severity = if self.warned.contains(&finding.id.as_str()) { name!("warning") } else { name!("note") };
        Expert { id: finding.id, severity, message: Message::Owned(message) }
    }
}

#[test]
fn every_event_is_a_row_with_its_line_and_those_worse_than_a_note_are_problems_too() {
    let engine = Engine::new(setups(), Settings::default());
    let warned = &["CONNECTION_CLOSED", "GAP", "UNANSWERED"];
    let (mut events_seen, mut with_conn, mut warnings) = (0, 0, 0);
    for path in shipped() {
        let mut sinks = (
            JsonLines::new(IdTexts, RecordStyle::default()),
            Tables::new(ShownTexts { warned, asked: Vec::new() }, RecordStyle::default(), RecordTables::new(false)),
        );
        engine.run(&mut reader(std::fs::read(&path).expect("readable")), &mut sinks).expect("no sink error");
        let (lines, mut tables) = sinks;
        let [_, _, problems, _, events] = tables.tables.finish().expect("record batches");
        let name = path.display();
        // the events as the JSON lines have them (type, time, conn, details), in order
        let want: Vec<Json> = String::from_utf8(lines.out)
            .expect("UTF-8")
            .lines()
            .map(|l| serde_json::from_str::<Json>(l).expect("a JSON line"))
            .filter(|r| r.get("index").is_none())
            .collect();
        assert_eq!(events.num_rows(), want.len(), "{name}: a row per event");
        assert_eq!(tables.events as usize, want.len(), "{name}");
        assert_eq!(tables.texts.asked.len(), want.len(), "{name}: each event's text asked of the texts");
        let event_problems: Vec<usize> =
            (0..problems.num_rows()).filter(|&r| cell(&problems, "frame", r).is_null()).collect();
        let mut problem = event_problems.iter();
        for (row, record) in want.iter().enumerate() {
            let line: Json = serde_json::from_str(cell(&events, "json", row).as_str().expect("a line")).expect("JSON");
            let (message, asked) = &tables.texts.asked[row];
            let kind = record["type"].as_str().expect("a type");
            assert!(message.starts_with(&format!("{kind} {{")), "{name}: {message} asked for the event's kind");
            let severity = if warned.contains(&kind) { "warning" } else { "note" };
            assert_eq!(cell(&events, "order", row), Json::from(row), "{name}");
            for key in ["type", "time", "conn"] {
                assert_eq!(cell(&events, key, row), record.get(key).cloned().unwrap_or(Json::Null), "{name}: {key}");
                assert_eq!(line.get(key), record.get(key), "{name}: the line's {key}");
            }
            assert_eq!(line.get("details"), record.get("details"), "{name}: the line's details");
            assert_eq!(cell(&events, "packet", row), line["packet"], "{name}");
            assert_eq!(
                (cell(&events, "severity", row), cell(&events, "message", row)),
                (json!(severity), json!(message))
            );
            assert_eq!((&line["severity"], &line["message"]), (&json!(severity), &json!(message)), "{name}");
            // what the text is made of: the details, then offset and length (null when the event has none)
            let details = record.get("details").and_then(Json::as_object).cloned().unwrap_or_default();
            for (key, value) in &details {
                assert_eq!(asked.get(key), Some(value), "{name}: {kind}'s {key}");
            }
            for key in ["offset", "length"] {
                let want = line.get(key).or(details.get(key)).cloned().unwrap_or(Json::Null);
                assert_eq!(asked.get(key), Some(&want), "{name}: {kind}'s {key}");
            }
            if record.get("conn").is_some() {
                with_conn += 1;
            }
            if severity == "warning" {
                let at = *problem.next().unwrap_or_else(|| panic!("{name}: {kind}'s problem row"));
                for (column, want) in [("id", json!(kind)), ("severity", json!(severity)), ("message", json!(message))]
                {
                    assert_eq!(cell(&problems, column, at), want, "{name}");
                }
                for key in ["conn", "time", "packet"] {
                    assert_eq!(cell(&problems, key, at), cell(&events, key, row), "{name}: the problem's {key}");
                }
                warnings += 1;
            }
        }
        assert_eq!(problem.next(), None, "{name}: a problem row per event worse than a note, no more");
        let summary = tables.tables.take_summary();
        let counted: u64 = summary
            .problems
            .iter()
            .filter(|((id, _), _)| warned.contains(&id.as_deref().unwrap_or("")))
            .map(|(_, n)| n)
            .sum();
        assert_eq!(counted as usize, event_problems.len(), "{name}: the summary counts the events' problems");
        events_seen += want.len();
    }
    // (an event without a connection, a capture file's note, is the front end's: its reader's notes are not the
    // engine's run's; `an_event_s_line_is_the_cli_s...` writes one)
    assert!(events_seen > 100 && with_conn == events_seen && warnings > 10, "{events_seen} {with_conn} {warnings}");
}

#[test]
fn an_event_s_line_is_the_cli_s_and_its_text_params_are_python_s() {
    use pulsar_dissect_engine::engine::EventItem;
    let details = vec![
        (Text::Name(name!("reason")), Value::from("loss \u{85}\u{202e}".to_owned())),
        (Text::Name(name!("offset")), Value::Int(9)),
    ];
    let params = vec![
        (Text::Name(name!("reason")), Value::from("wins".to_owned())),
        (Text::Name(name!("what")), Value::Bool(true)),
    ];
    let event = EventItem {
        kind: "GAP",
        time: 1.25,
        packet: 7,
        conn: Some(3),
        src: Some("a:1"),
        dst: None,
        direction: Some("to_broker"),
        offset: None,
        length: Some(100),
        details: &details,
        params: &params,
    };
    let mut line = Vec::new();
    event.write_json("warning", "text \"quoted\"", &mut line);
    // as `dissector/output/records.py: event_record` then `output/jsonl.py: dumps` write it
    let want = concat!(
        r#"{"type":"GAP","time":1.25,"packet":7,"message":"text \"quoted\"","severity":"warning","conn":3,"#,
        r#""src":"a:1","dst":null,"direction":"to_broker","length":100,"#,
        r#""details":{"reason":"loss \u0085\u202e","offset":9}}"#
    );
    assert_eq!(String::from_utf8(line).expect("UTF-8"), want);
    // {**details, **params}; the event's offset kept from the details when it has none; its length set
    let names = |map: &pulsar_dissect_engine::value::Map| {
        map.iter().map(|(k, v)| (k.as_str().to_owned(), v.clone())).collect::<Vec<_>>()
    };
    assert_eq!(
        names(&event.text_params()),
        [
            ("reason".to_owned(), Value::from("wins".to_owned())),
            ("offset".to_owned(), Value::Int(9)),
            ("what".to_owned(), Value::Bool(true)),
            ("length".to_owned(), Value::Int(100)),
        ]
    );
    let bare =
        EventItem { conn: None, src: None, offset: None, length: None, details: &vec![], params: &vec![], ..event };
    let mut line = Vec::new();
    bare.write_json("note", "m", &mut line);
    assert_eq!(line, br#"{"type":"GAP","time":1.25,"packet":7,"message":"m","severity":"note"}"#);
    assert_eq!(names(&bare.text_params()), [("offset".to_owned(), Value::Null), ("length".to_owned(), Value::Null)]);
}
