//! The protocols' command tables, as the analysis reads them. They are declared in Python
//! (`dissector/protocols/<name>/commands.py`); `tools/fuzz/command_tables.py` writes them to
//! `command_tables.json` (run_core.sh does before each build), compiled in here.

use std::collections::BTreeMap;

use pulsar_dissect_engine::analysis::intern;
use pulsar_dissect_engine::analysis::table::{Actor, CommandSpec, CommandTable, Key, KeyField, OpenedBy, Space};
use pulsar_dissect_engine::value::{Name, Value};
use serde::Deserialize;

const TABLES: &str = include_str!("../command_tables.json");

#[derive(Deserialize)]
pub struct ProtocolJson {
    pub server_roles: Vec<String>,
    pub client_role: String,
    pub ports: BTreeMap<String, String>,
    pub session: Option<String>,
    pub max_frame_size: Option<usize>,
    commands: Vec<SpecJson>,
}

#[derive(Deserialize)]
struct SpaceJson {
    name: String,
    slot: bool,
    duplicates: bool,
    unmatched: bool,
    unanswered: bool,
    opened_by: String,
}

#[derive(Deserialize)]
struct KeyJson {
    space: SpaceJson,
    fields: Vec<String>,
}

#[derive(Deserialize)]
pub struct SpecJson {
    name: String,
    scope: Option<String>,
    scope_id: Option<String>,
    opens: Option<KeyJson>,
    answers: Vec<KeyJson>,
    answer_types: Option<Vec<String>>,
    interim: Option<(String, serde_json::Value)>,
    remember: Vec<String>,
}

/// The protocols' declarations by name, read once for the process.
pub fn load() -> BTreeMap<String, &'static ProtocolJson> {
    let all: BTreeMap<String, ProtocolJson> = serde_json::from_str(TABLES).expect("command_tables.json is valid");
    all.into_iter().map(|(name, json)| (name, &*Box::leak(Box::new(json)))).collect()
}

fn key(table: &mut CommandTable, key: &KeyJson) -> Key {
    let s = &key.space;
    let space = table.space(Space {
        name: s.name.clone(),
        slot: s.slot,
        duplicates: s.duplicates,
        unmatched: s.unmatched,
        unanswered: s.unanswered,
        opened_by: match s.opened_by.as_str() {
            "client" => OpenedBy::Client,
            "server" => OpenedBy::Server,
            _ => OpenedBy::Any,
        },
    });
    let fields = key
        .fields
        .iter()
        .map(|f| match f.as_str() {
            "@direction" => KeyField::Direction,
            "@reverse" => KeyField::Reverse,
            "@serial" => KeyField::Serial,
            other => KeyField::Command(other.to_owned()),
        })
        .collect();
    Key { space, fields, names: key.fields.clone() }
}

fn scalar(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => n.as_i64().map(Value::Int).unwrap_or(Value::Null),
        serde_json::Value::String(s) => Value::from(s.clone()),
        _ => Value::Null,
    }
}

/// A protocol's table with its names interned once (the interner takes a lock): [`CommandTable`] holds no
/// `Clone`, so each run builds its own from this, as the binding builds it from the Python specs
/// (the binding's analysis.rs).
pub struct TableTemplate {
    specs: Vec<(&'static Name, &'static SpecJson)>,
}

impl TableTemplate {
    pub fn new(protocol: &'static ProtocolJson) -> TableTemplate {
        TableTemplate { specs: protocol.commands.iter().map(|spec| (intern(&spec.name), spec)).collect() }
    }

    pub fn build(&self) -> CommandTable {
        let mut table = CommandTable::default();
        for &(name, spec) in &self.specs {
            let opens = spec.opens.as_ref().map(|k| key(&mut table, k));
            let answers = spec.answers.iter().map(|k| key(&mut table, k)).collect();
            let mut answer_types = spec.answer_types.clone();
            if let Some(types) = answer_types.as_mut() {
                types.sort();
            }
            table.add(CommandSpec {
                name,
                scope: match (spec.scope.as_deref().and_then(Actor::parse), &spec.scope_id) {
                    (Some(actor), Some(field)) => Some((actor, field.clone())),
                    _ => None,
                },
                opens,
                answers,
                answer_types,
                interim: spec.interim.as_ref().map(|(field, value)| (field.clone(), scalar(value))),
                remember: spec.remember.clone(),
            });
        }
        table
    }
}
