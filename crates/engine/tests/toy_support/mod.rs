//! The toy protocol's command table the engine's tests share: a QUESTION opens a request keyed by its `id`, an
//! ANSWER with the same `id` answers it.

use pulsar_dissect_engine::analysis::intern;
use pulsar_dissect_engine::analysis::table::{CommandSpec, CommandTable, Key, KeyField, OpenedBy, Space};

pub fn toy_table() -> CommandTable {
    let mut table = CommandTable::default();
    let questions = table.space(Space {
        name: "question".into(),
        slot: false,
        duplicates: false,
        unmatched: true,
        unanswered: true,
        opened_by: OpenedBy::Client,
    });
    let id = || Key { space: questions, fields: vec![KeyField::Command("id".into())], names: vec!["id".into()] };
    let spec = |name: &str, opens: Option<Key>, answers: Vec<Key>| CommandSpec {
        name: intern(name),
        scope: None,
        opens,
        answers,
        answer_types: None,
        interim: None,
        remember: vec![],
    };
    table.add(spec("QUESTION", Some(id()), vec![]));
    table.add(spec("ANSWER", None, vec![id()]));
    table
}
