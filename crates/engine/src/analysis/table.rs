//! A protocol's command table in the analyzer's compiled form. It is declared once, in Python
//! (`dissector/protocols/<name>/commands.py`, read by the binding); this is what pairing and the sessions
//! look up per frame.

use super::bounded::FastMap;
use crate::value::{Name, Value};

/// The side whose frames wait in a space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenedBy {
    Client,
    Server,
    Any,
}

/// A namespace in which requests wait for their answers under a key (`protocols/base.py: Space`).
#[derive(Debug)]
pub struct Space {
    pub name: String,
    /// At most one request waits (a new one replaces it, as a handshake).
    pub slot: bool,
    /// A second request of the same type under a key still waiting is `request.duplicate_id`.
    pub duplicates: bool,
    /// A response finding nothing waiting is `response.unmatched` (on a connection seen from its start).
    pub unmatched: bool,
    /// A request still waiting at the end is `UNANSWERED` (and can be `OVERDUE`).
    pub unanswered: bool,
    pub opened_by: OpenedBy,
}

/// One part of a pairing key.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyField {
    /// `@direction`: the frame's direction.
    Direction,
    /// `@reverse`: the opposite direction (a PING answered by a PONG from the other side).
    Reverse,
    /// `@serial`: the frame's serial number (TubeMQ's header: what a response echoes).
    Serial,
    Command(String),
}

#[derive(Debug)]
pub struct Key {
    pub space: usize,
    pub fields: Vec<KeyField>,
    /// The fields as declared (`@direction` included), for the `key` parameter of findings.
    pub names: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Actor {
    Producer,
    Consumer,
}

impl Actor {
    pub fn parse(text: &str) -> Option<Actor> {
        match text {
            "producer" => Some(Actor::Producer),
            "consumer" => Some(Actor::Consumer),
            _ => None,
        }
    }

    pub fn name(self) -> &'static Name {
        match self {
            Actor::Producer => crate::name!("producer"),
            Actor::Consumer => crate::name!("consumer"),
        }
    }
}

/// One row of the table (`protocols/base.py: CommandSpec`), with what the analysis reads of it.
#[derive(Debug)]
pub struct CommandSpec {
    pub name: &'static Name,
    /// The actor the frame is about, named by the command field `scope_id`.
    pub scope: Option<(Actor, String)>,
    pub opens: Option<Key>,
    pub answers: Vec<Key>,
    /// The request types it can answer (None: any).
    pub answer_types: Option<Vec<String>>,
    /// (field, value): an answer that leaves its request waiting.
    pub interim: Option<(String, Value)>,
    /// Request fields kept while it waits.
    pub remember: Vec<String>,
}

impl CommandSpec {
    pub fn can_answer(&self, request_type: &str) -> bool {
        self.answer_types.as_ref().is_none_or(|types| types.iter().any(|t| t == request_type))
    }
}

#[derive(Debug, Default)]
pub struct CommandTable {
    pub spaces: Vec<Space>,
    pub specs: Vec<CommandSpec>,
    by_name: FastMap<String, usize>,
}

impl CommandTable {
    /// The index of the space named `space`, added with these properties when new (a space is one name).
    pub fn space(&mut self, space: Space) -> usize {
        match self.spaces.iter().position(|s| s.name == space.name) {
            Some(i) => i,
            None => {
                self.spaces.push(space);
                self.spaces.len() - 1
            }
        }
    }

    pub fn add(&mut self, spec: CommandSpec) {
        self.by_name.insert(spec.name.as_str().to_owned(), self.specs.len());
        self.specs.push(spec);
    }

    pub fn get(&self, name: &str) -> Option<&CommandSpec> {
        self.by_name.get(name).map(|&i| &self.specs[i])
    }
}
