//! An event's record (`--json`'s event line, `dissector/output/records.py: event_record`), as the engine's sinks
//! take an event: [`EventItem`], from the analysis' events and the transport's notes alike (a front end makes one
//! of its own events). Its text is the front end's, made from [`EventItem::text_params`] as a finding's is.

use crate::analysis::Event;
use crate::name;
use crate::pipeline::StreamNote;
use crate::value::{write_json_map, write_json_str, JsonObject, Map, Text, Value};

/// An event as the engine hands it to a sink: what its record (`--json`'s event line) holds, and what its text
/// needs beyond its details (`params`).
#[derive(Clone, Copy)]
pub struct EventItem<'a> {
    pub kind: &'a str,
    pub time: f64,
    pub packet: i64,
    pub conn: Option<u64>,
    /// the stream it is about, when it is about one: its sender, receiver and direction
    pub src: Option<&'a str>,
    pub dst: Option<&'a str>,
    pub direction: Option<&'a str>,
    /// the bytes of the stream it is about
    pub offset: Option<i64>,
    pub length: Option<i64>,
    pub details: &'a Map,
    pub params: &'a Map,
}

impl<'a> EventItem<'a> {
    /// An event of the analysis (its route, if it names one).
    pub fn of_analysis(event: &'a Event) -> EventItem<'a> {
        let route = event.route.as_ref();
        EventItem {
            kind: event.kind.as_str(),
            time: event.time,
            packet: i64::try_from(event.packet).unwrap_or(i64::MAX),
            conn: event.conn,
            src: route.map(|(src, _, _)| &**src),
            dst: route.map(|(_, dst, _)| &**dst),
            direction: route.map(|(_, _, direction)| &**direction),
            offset: None,
            length: None,
            details: &event.details,
            params: &event.params,
        }
    }

    /// A note of the transport or the splitters (where in the stream, if it is about a stream's bytes).
    pub fn of_note(note: &'a StreamNote) -> EventItem<'a> {
        let at = note.at.as_ref();
        EventItem {
            kind: &note.kind,
            time: note.time,
            packet: note.packet,
            conn: note.conn,
            src: at.map(|at| &*at.src),
            dst: at.map(|at| &*at.dst),
            direction: at.map(|at| &*at.direction),
            offset: at.and_then(|at| at.offset),
            length: at.and_then(|at| at.length),
            details: &note.details,
            params: &note.params,
        }
    }

    /// What its text is made from, as a finding's is: its details, then its params over them, then its
    /// offset and length (a capture note carries its byte offset in its details: kept when the event has none).
    pub fn text_params(&self) -> Map {
        let mut params = self.details.clone();
        for (key, value) in self.params {
            match params.iter_mut().find(|(k, _)| k.as_str() == key.as_str()) {
                Some(entry) => entry.1 = value.clone(),
                None => params.push((key.clone(), value.clone())),
            }
        }
        for (key, value) in [(name!("offset"), self.offset), (name!("length"), self.length)] {
            let at = params.iter().position(|(k, _)| k.as_str() == key.as_str());
            match (at, value) {
                (Some(at), Some(value)) => params[at].1 = Value::Int(value),
                (Some(_), None) => {}
                (None, value) => params.push((Text::Name(key), value.map_or(Value::Null, Value::Int))),
            }
        }
        params
    }

    /// Its record's line as `--json` writes it (`dissector/output/records.py: event_record`, then
    /// `output/jsonl.py`), given its severity and text: type, time, packet, message, severity, then conn, the
    /// route, offset, length and details when it has them. No newline.
    pub fn write_json(&self, severity: &str, message: &str, out: &mut Vec<u8>) {
        let mut record = JsonObject::start(out);
        write_json_str(self.kind, record.key(name!("type")));
        Value::Float(self.time).write_json(record.key(name!("time")));
        Value::Int(self.packet).write_json(record.key(name!("packet")));
        write_json_str(message, record.key(name!("message")));
        write_json_str(severity, record.key(name!("severity")));
        if let Some(conn) = self.conn {
            Value::UInt(conn).write_json(record.key(name!("conn")));
        }
        if let Some(src) = self.src {
            write_json_str(src, record.key(name!("src")));
            for (key, text) in [(name!("dst"), self.dst), (name!("direction"), self.direction)] {
                let out = record.key(key);
                match text {
                    Some(text) => write_json_str(text, out),
                    None => out.extend_from_slice(b"null"),
                }
            }
        }
        for (key, value) in [(name!("offset"), self.offset), (name!("length"), self.length)] {
            if let Some(value) = value {
                Value::Int(value).write_json(record.key(key));
            }
        }
        if !self.details.is_empty() {
            write_json_map(self.details, record.key(name!("details")));
        }
        record.end();
    }
}
