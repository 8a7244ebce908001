//! TubeMQ's conversation state (`ProtocolSpec.session = "tubemq"`): what a frame is about — its topic,
//! partition, client id and consumer group — as notes, so that filters (`--topic`, `topic == ...`), `follow`
//! and the statistics read them the same way for both protocols. A request names them in its command; a
//! response carries none of them and learns them from the request it answers (the fields the command table
//! `remember`s).

use crate::analysis::table::CommandSpec;
use crate::analysis::{Event, Frame, Session, Sessions, Waiting};
use crate::model::Finding;
use crate::name;
use crate::value::{Map, Name, Text, Value};

/// (the command field, the note it becomes)
const ABOUT: [(&str, &Name); 4] = [
    ("topicName", name!("topic")),
    ("partitionId", name!("partition")),
    ("clientId", name!("client_id")),
    ("groupName", name!("group")),
];

pub struct TubeSessions;

impl Sessions for TubeSessions {
    fn open(&mut self, _conn: u64, _mid_stream: bool) -> Box<dyn Session> {
        Box::new(TubeSession)
    }
}

struct TubeSession;

fn from(map: Option<&Map>, key: &str) -> Option<Value> {
    map?.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v.clone()).filter(|v| !v.is_null())
}

impl Session for TubeSession {
    fn on_frame(
        &mut self,
        frame: &Frame,
        _spec: Option<&CommandSpec>,
        request: Option<&Waiting>,
        notes: &mut Map,
        _findings: &mut Vec<Finding>,
        _events: &mut Vec<Event>,
    ) {
        let command = frame.pdu.command.as_ref().and_then(Value::as_map);
        for (field, note) in ABOUT {
            let value = from(command, field).or_else(|| from(request.map(|r| &r.kept), field));
            if let Some(value) = value {
                notes.push((Text::Name(note), value));
            }
        }
    }

    fn close(&mut self, _time: f64, _packet: u64, _events: &mut Vec<Event>) {}
}
