//! The timeline's line of a frame or an event, made in one place: as (text, role) pieces for a terminal,
//! which Python styles by role and folds to the console's width, or joined into plain text. The line is
//! made from [`LineFacts`], which come either from a frame the core decoded and analysed (its Rust data and
//! notes: `--plain` lines written straight into a byte batch, no Python per line) or from a record dict
//! (whenever Python holds records: filters, `-V`, `-x`, `follow`, events).
//!
//! A line: frame number (`-` for an event), time (since the origin, or UTC), capture packets (`p34`,
//! `p30-34`), connection, direction and client port, type, the key fields the protocol's command table
//! names, the producer or consumer behind an id, the protocol's own pieces (Pulsar's payload section:
//! `pulsar/timeline.rs`), the request a response answers and its latency, acked frames, payload previews
//! (`--payload`), then the problems and notes, each on a line of its own.
//!
//! What is declarative stays in Python: the command tables' timeline fields, and how each field is shown,
//! come once per protocol as a plan (`dissector/output/timeline.py: timeline_plan`); the styles are Python's,
//! by role (`ROLE_NAMES`). Every wire string goes through `text::safe`.

use std::fmt::Write as _;

use crate::analysis::map_get;
use crate::model::{Decoded, DecodedBody};
use crate::protocols::{self, Protocol};
use crate::text::{self, BytesKind, MAX_VALUE};
use crate::value::{Map, Value};
use crate::FastMap;

// the line's plain data lives in `line.rs`, below the protocols that make its pieces
use crate::line::{push_atom_safe, push_frame_list};
pub use crate::line::{Atom, FindingText, Findings, Line, LineFacts, PayloadFacts, Role, ROLE_NAMES};

// ------------------------------------------------------------------------------------------------ facts

impl<'a> LineFacts<'a> {
    /// The facts of a record (a frame's or an event's), as Python's dicts hold it.
    pub fn of_record(rec: &'a Map) -> LineFacts<'a> {
        let get = |key: &str| map_get(rec, key);
        let atom = |key: &str| get(key).map(Atom::Value);
        let present = |key: &str| get(key).filter(|v| !v.is_null()).map(Atom::Value);
        let packet = present("packet");
        LineFacts {
            index: atom("index"),
            time: Atom::Value(get("time").unwrap_or(&Value::Null)),
            packet,
            first_packet: atom("first_packet").or(packet),
            conn: present("conn"),
            src: present("src"),
            dst: present("dst"),
            direction: atom("direction"),
            type_name: Atom::Value(get("type").unwrap_or(&Value::Null)),
            protocol: match get("protocol") {
                Some(named) => named.as_str().unwrap_or(""),
                None => protocols::of_record(None).map_or("", |p| p.name()),
            },
            command: get("command"),
            findings: Findings::Record { problems: get("problems"), expert: get("expert") },
            message: atom("message"),
            notes: rec,
            serial: present("serial"),
            payload: PayloadFacts {
                messages: get("messages").and_then(Value::as_list),
                summary: get("messages_summary").filter(|v| !v.is_null()),
                metadata: get("metadata"),
                checksum: get("checksum").and_then(Value::as_str),
                encrypted: get("encrypted").is_some_and(Value::truthy),
                marker: get("marker"),
            },
        }
    }

    /// The facts of a frame the engine decoded and analysed: where it was, its decoded data, the analysis'
    /// notes and the texts of its findings.
    pub fn of_frame(at: FrameAt<'a>, pdu: &'a Decoded, notes: &'a Map, findings: &'a [FindingText]) -> LineFacts<'a> {
        let payload = pdu.body.as_deref().map(DecodedBody::line_facts).unwrap_or_default();
        LineFacts {
            index: Some(Atom::Int(at.index as i64)),
            time: Atom::Float(at.time),
            packet: Some(Atom::Int(at.packet)),
            first_packet: Some(Atom::Int(at.first_packet)),
            conn: Some(Atom::Int(at.conn as i64)),
            src: Some(Atom::Str(at.src)),
            dst: Some(Atom::Str(at.dst)),
            direction: Some(Atom::Str(at.direction)),
            type_name: Atom::Str(pdu.type_name.as_str()),
            protocol: at.protocol,
            command: pdu.command.as_ref(),
            findings: Findings::Texts(findings),
            message: None,
            notes,
            payload,
            serial: pdu.body.as_deref().and_then(DecodedBody::serial).map(|serial| Atom::Int(serial as i64)),
        }
    }
}

/// Where a frame was, as its line shows it.
#[derive(Clone, Copy)]
pub struct FrameAt<'a> {
    pub index: u64,
    pub time: f64,
    pub packet: i64,
    pub first_packet: i64,
    pub conn: u64,
    pub protocol: &'a str,
    pub src: &'a str,
    pub dst: &'a str,
    pub direction: &'a str,
}

// ------------------------------------------------------------------------------------------------- plan

/// How a key field's value is shown.
#[derive(Clone, Copy, Debug)]
pub enum Show {
    Text,
    MessageId,
    DateMs,
    Bytes(BytesKind),
}

/// One key field of a command type's line: `label=value`, the value at `keys` in the command.
pub struct FieldPlan {
    label: String,
    keys: Vec<String>,
    show: Show,
}

struct TypePlan {
    role: Role,
    /// None: the command's first five scalar fields.
    fields: Option<Vec<FieldPlan>>,
}

impl FieldPlan {
    /// `show`: text, message_id, date_ms or bytes (of `kind`, bytes by default).
    pub fn new(label: String, keys: Vec<String>, show: &str, kind: Option<&str>) -> Result<FieldPlan, String> {
        let show = match show {
            "text" => Show::Text,
            "message_id" => Show::MessageId,
            "date_ms" => Show::DateMs,
            "bytes" => Show::Bytes(BytesKind::from_name(kind.unwrap_or("bytes"))),
            other => return Err(format!("no way to show a field as {other:?}")),
        };
        Ok(FieldPlan { label, keys, show })
    }
}

/// A protocol's plan: per command type the style of its name and its key fields, and its own pieces.
pub struct ProtocolPlan {
    types: FastMap<String, TypePlan>,
    /// The protocol whose own pieces the lines show (`ProtocolSpec.timeline_pieces`).
    pieces: Option<&'static dyn Protocol>,
}

impl ProtocolPlan {
    /// `pieces`: the name of the protocol's own pieces, if it has some.
    pub fn new(pieces: Option<&str>) -> Result<ProtocolPlan, String> {
        let pieces = match pieces {
            None => None,
            Some(name) => Some(
                protocols::by_name(name).ok_or_else(|| format!("the core has no timeline pieces named {name:?}"))?,
            ),
        };
        Ok(ProtocolPlan { types: FastMap::default(), pieces })
    }

    /// A command type's role (how its name is styled) and key fields (None: its first scalar fields).
    pub fn add_type(&mut self, type_name: String, role: &str, fields: Option<Vec<FieldPlan>>) -> Result<(), String> {
        let role = Role::from_name(role).ok_or_else(|| format!("no role {role:?}"))?;
        self.types.insert(type_name, TypePlan { role, fields });
        Ok(())
    }
}

/// Bytes shown on a line at most (as text or hex).
const MAX_LINE_BYTES: i64 = 60;
/// Key fields a type without declared ones shows: its first scalar fields.
const DEFAULT_FIELDS: usize = 5;
const PACKET_WIDTH: usize = 5; // p1 to p9999 line up; longer ones push the rest of the line along
const INDEX_WIDTH: usize = 6;
const TYPE_WIDTH: usize = 16;

/// How lines are made: the protocols' plans, the labels of undeclared fields, the time origin.
pub struct Format {
    protocols: FastMap<String, Option<ProtocolPlan>>,
    /// Labels of fields shown by default (`request_id` → `req`), and the bytes fields among them.
    labels: FastMap<String, String>,
    bytes_kinds: FastMap<String, BytesKind>,
    absolute_time: bool,
    previews: bool,
    /// Time 0 of relative times: set by the first line made, unless given before.
    pub origin: Option<f64>,
    /// `--absolute-time`: the times no UTC date holds (a year outside 1..=9999), shown as seconds since the
    /// epoch: how many, and the first (the CLI says so once, as `time.not_a_date`).
    pub not_dates: (u64, Option<f64>),
}

/// Pads `out` from `start` with spaces to `width` characters, on the left (`>`) or the right (`<`).
fn pad(out: &mut String, start: usize, width: usize, left: bool) {
    const SPACES: &str = "                "; // as wide as the widest column
    let written = &out[start..];
    let count = if written.is_ascii() { written.len() } else { written.chars().count() };
    let mut missing = width.saturating_sub(count);
    while missing > 0 {
        let spaces = &SPACES[..missing.min(SPACES.len())];
        if left {
            out.insert_str(start, spaces);
        } else {
            out.push_str(spaces);
        }
        missing -= spaces.len();
    }
}

impl Format {
    pub fn new(
        labels: FastMap<String, String>,
        bytes_kinds: FastMap<String, BytesKind>,
        absolute_time: bool,
        previews: bool,
    ) -> Format {
        Format {
            protocols: FastMap::default(),
            labels,
            bytes_kinds,
            absolute_time,
            previews,
            origin: None,
            not_dates: (0, None),
        }
    }

    /// Whether the plan of `protocol` (or its absence) is known.
    pub fn knows(&self, protocol: &str) -> bool {
        self.protocols.contains_key(protocol)
    }

    /// The plan of `protocol`, or None: no such protocol.
    pub fn learn(&mut self, protocol: &str, plan: Option<ProtocolPlan>) {
        if self.protocols.len() >= 64 {
            self.protocols.clear(); // protocol names of hostile records: asked again rather than kept
        }
        self.protocols.insert(protocol.to_owned(), plan);
    }

    /// Whether the messages' payloads are shown under a frame's line (`--payload`): its record then lists them.
    pub fn previews(&self) -> bool {
        self.previews
    }

    fn plan(&self, protocol: &str) -> Option<&ProtocolPlan> {
        self.protocols.get(protocol).and_then(Option::as_ref)
    }

    /// Make the line of `facts` into `line`.
    pub fn make_line(&mut self, facts: &LineFacts, line: &mut Line) {
        let frame = facts.index.is_some();
        let out = &mut line.text;
        match &facts.index {
            Some(index) => {
                let start = out.len();
                index.push(out);
                pad(out, start, INDEX_WIDTH, true);
                out.push(' ');
            }
            None => out.push_str("     - "),
        }
        line.end(Role::Index);
        self.push_time(&facts.time, &mut line.text);
        line.text.push(' ');
        line.end(Role::Time);
        push_packets(facts, &mut line.text);
        line.end(Role::Packets);
        push_where(facts, line);
        let problems = facts.findings.problems();
        if frame {
            let plan = self.plan(facts.protocol);
            let type_plan = plan.and_then(|p| facts.type_name.as_str().and_then(|name| p.types.get(name)));
            let start = line.text.len();
            facts.type_name.push(&mut line.text);
            pad(&mut line.text, start, TYPE_WIDTH, false);
            // a type the table does not list (UNKNOWN(n), MALFORMED) is plain bold
            line.end(if !problems.is_empty() { Role::TypeProblem } else { type_plan.map_or(Role::Type, |t| t.role) });
            self.push_key_fields(facts, type_plan.and_then(|t| t.fields.as_deref()), line);
            for key in ["producer", "consumer"] {
                let name = facts.note(key).and_then(|info| info.get("name")).filter(|name| Value::truthy(name));
                if let Some(name) = name {
                    let _ = write!(line.text, " {key}=");
                    line.end(Role::Label);
                    line.push_safe(Role::Actor, name, 30);
                }
            }
            if let Some(protocol) = plan.and_then(|p| p.pieces) {
                protocol.timeline_pieces(facts, line);
            }
            if let Some(answers) = facts.note("answers") {
                line.text.push_str(" ⟵ #");
                Atom::Value(answers).push(&mut line.text);
                line.text.push(' ');
                match facts.note("latency_ms").and_then(|v| Atom::Value(v).as_f64()) {
                    Some(latency) => push_fixed(latency, 3, false, 0, &mut line.text),
                    None => Atom::Value(facts.note("latency_ms").unwrap_or(&Value::Null)).push(&mut line.text),
                }
                line.push(Role::Link, "ms");
            }
            if let Some(acks) = facts.note("acks").and_then(Value::as_list).filter(|a| !a.is_empty()) {
                line.text.push_str(" acks ");
                push_frame_list(acks, acks.len() as u64, &mut line.text);
                line.end(Role::Link);
            }
            if self.previews {
                for message in facts.payload.messages.unwrap_or(&[]) {
                    line.push(Role::Plain, "\n          ");
                    text::push_payload_preview(message, &mut line.text);
                    line.end(Role::Plain);
                }
            }
        } else {
            let start = line.text.len();
            facts.type_name.push(&mut line.text);
            pad(&mut line.text, start, TYPE_WIDTH, false);
            line.end(Role::EventType);
            line.text.push(' ');
            if let Some(message) = &facts.message {
                push_atom_safe(message, 200, &mut line.text);
            }
            line.end(Role::EventMessage);
        }
        for problem in problems {
            line.push(Role::Problem, "\n        ⚠ ");
            push_atom_safe(&problem, 300, &mut line.text);
            line.end(Role::Problem);
        }
        for note in facts.findings.notes() {
            line.push(Role::Note, "\n        · ");
            push_atom_safe(&note, 300, &mut line.text);
            line.end(Role::Note);
        }
    }

    fn push_time(&mut self, time: &Atom, out: &mut String) {
        let Some(t) = time.as_f64() else {
            return time.push(out);
        };
        if self.absolute_time {
            if !text::push_utc_time(t, out) {
                time.push(out); // no date holds it: the number as it is, and counted
                self.not_dates.0 += 1;
                self.not_dates.1.get_or_insert(t);
            }
            return;
        }
        let origin = *self.origin.get_or_insert(t);
        push_fixed(t - origin, 6, true, 10, out);
    }

    /// The key fields the command table names for this type, else the command's first scalar fields.
    fn push_key_fields(&self, facts: &LineFacts, fields: Option<&[FieldPlan]>, line: &mut Line) {
        let Some(command) = facts.command.and_then(Value::as_map) else { return };
        match fields {
            Some(fields) => {
                for field in fields {
                    let mut value = facts.command;
                    for key in &field.keys {
                        value = value.and_then(|v| v.as_map()).and_then(|m| map_get(m, key));
                    }
                    if let Some(value) = value.filter(|v| !v.is_null()) {
                        let _ = write!(line.text, " {}=", field.label);
                        line.end(Role::Label);
                        push_shown(value, field.show, &mut line.text);
                        line.end(Role::Plain);
                    }
                }
            }
            None => {
                let scalars = command.iter().filter(|(_, v)| !matches!(v, Value::Map(_) | Value::List(_)));
                for (key, value) in scalars.take(DEFAULT_FIELDS) {
                    if value.is_null() {
                        continue;
                    }
                    let key = key.as_str();
                    line.text.push(' ');
                    text::push_escaped(self.labels.get(key).map_or(key, String::as_str), &mut line.text);
                    line.text.push('=');
                    line.end(Role::Label);
                    let show = self.bytes_kinds.get(key).map_or(Show::Text, |kind| Show::Bytes(*kind));
                    push_shown(value, show, &mut line.text);
                    line.end(Role::Plain);
                }
            }
        }
    }
}

fn push_shown(value: &Value, show: Show, out: &mut String) {
    match show {
        Show::Text => text::push_safe(value, MAX_VALUE, out),
        Show::MessageId => text::push_message_id(value, out),
        Show::DateMs => text::push_date_ms(value, out),
        Show::Bytes(kind) => {
            text::push_shown_b64(value, kind, MAX_LINE_BYTES, out);
        }
    }
}

/// A number as Python's `f"{v:+W.Pf}"` (`sign`: always signed) or `f"{v:.Pf}"`.
fn push_fixed(v: f64, precision: usize, sign: bool, width: usize, out: &mut String) {
    let text = if v.is_finite() {
        if sign {
            format!("{v:+.precision$}")
        } else {
            format!("{v:.precision$}")
        }
    } else {
        let name = if v.is_nan() { "nan" } else { "inf" };
        let negative = v.is_sign_negative() && !v.is_nan();
        format!(
            "{}{name}",
            if negative {
                "-"
            } else if sign {
                "+"
            } else {
                ""
            }
        )
    };
    let _ = write!(out, "{text:>width$}");
}

/// `p34`, `p30-34` (a frame over several packets) or `p?`, padded to line up.
fn push_packets(facts: &LineFacts, out: &mut String) {
    let start = out.len();
    match &facts.packet {
        None => out.push_str("p?"),
        Some(last) => {
            out.push('p');
            let first = facts.first_packet.unwrap_or(*last);
            if !first.same(last) {
                first.push(out);
                out.push('-');
            }
            last.push(out);
        }
    }
    pad(out, start, PACKET_WIDTH, false);
    out.push(' ');
}

/// The connection, the arrow and the client's port.
fn push_where(facts: &LineFacts, line: &mut Line) {
    if let Some(conn) = &facts.conn {
        line.text.push('c');
        conn.push(&mut line.text);
        line.push(Role::Conn, " ");
    }
    let Some(src) = facts.src else { return };
    let direction = facts.direction.as_ref().and_then(Atom::as_str);
    let (arrow, client) = match direction {
        Some("to_client") => ("←", facts.dst.unwrap_or(Atom::Value(&Value::Null))),
        Some("unknown") => ("↔", src),
        _ => ("→", src),
    };
    line.text.push_str(arrow);
    line.push(Role::Arrow, " ");
    if direction == Some("unknown") {
        src.push(&mut line.text);
        line.text.push('→');
        facts.dst.unwrap_or(Atom::Value(&Value::Null)).push(&mut line.text);
    } else {
        let port = |address: &str| address.rsplit(':').next().unwrap_or("").to_owned();
        match client.as_str() {
            Some(address) => text::push_escaped(address.rsplit(':').next().unwrap_or(""), &mut line.text),
            None => line.text.push_str(&port(&client.text())),
        }
    }
    line.push(Role::Port, " ");
}
