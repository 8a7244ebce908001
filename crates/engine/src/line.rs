//! A timeline line's pieces, the plain data a protocol's own pieces are made from and into: the roles a piece
//! can have, the [`Line`] being made, the values on it ([`Atom`]) and what the line shows of a frame or an
//! event ([`LineFacts`], with the body's [`PayloadFacts`]). It names no protocol and neither the protocols nor
//! the composition of a line (`timeline.rs`, which builds the facts and writes the line from them).

use std::fmt::Write as _;

use crate::text;
use crate::value::{Map, Value};

macro_rules! roles {
    ($($role:ident = $name:literal,)*) => {
        /// What a piece of a line is: Python gives each role its style (`timeline.STYLES`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Role { $($role),* }
        const ROLES: &[Role] = &[$(Role::$role),*];
        /// The roles' names, in the order of their numbers on the Python side.
        pub const ROLE_NAMES: &[&str] = &[$($name),*];
    };
}

roles! {
    Plain = "plain",
    Index = "index",
    Time = "time",
    Packets = "packets",
    Conn = "conn",
    Arrow = "arrow",
    Port = "port",
    Type = "type",
    TypeError = "type_error",
    TypePayload = "type_payload",
    TypeResponse = "type_response",
    TypeProblem = "type_problem",
    EventType = "event_type",
    EventMessage = "event_message",
    Label = "label",
    Actor = "actor",
    Link = "link",
    Problem = "problem",
    Note = "note",
    Detail = "detail",
    Compression = "compression",
    ChecksumBad = "checksum_bad",
    ChecksumOk = "checksum_ok",
    Encrypted = "encrypted",
    Chunk = "chunk",
    Marker = "marker",
    DeliverAt = "deliver_at",
    Delivery = "delivery",
    Reassembled = "reassembled",
}

impl Role {
    pub fn from_name(name: &str) -> Option<Role> {
        ROLE_NAMES.iter().position(|n| *n == name).map(|i| ROLES[i])
    }
}

// ----------------------------------------------------------------------------------------------- a line

/// A line being made: its text, and where each piece ends with its role.
#[derive(Default)]
pub struct Line {
    pub text: String,
    ends: Vec<(usize, Role)>,
}

impl Line {
    pub fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// The text appended since the last piece is a piece of this role.
    pub fn end(&mut self, role: Role) {
        self.ends.push((self.text.len(), role));
    }

    pub fn push(&mut self, role: Role, text: &str) {
        self.text.push_str(text);
        self.end(role);
    }

    /// A piece: a wire value as `safe` shows it.
    pub fn push_safe(&mut self, role: Role, value: &Value, limit: i64) {
        text::push_safe(value, limit, &mut self.text);
        self.end(role);
    }

    pub fn pieces(&self) -> impl Iterator<Item = (&str, Role)> {
        let mut start = 0;
        self.ends.iter().map(move |&(end, role)| {
            let piece = &self.text[start..end];
            start = end;
            (piece, role)
        })
    }
}

// ------------------------------------------------------------------------------------------------ facts

/// A value on a line: typed when it comes from the core's frame, a record's value otherwise.
#[derive(Clone, Copy)]
pub enum Atom<'a> {
    Int(i64),
    Float(f64),
    Str(&'a str),
    Value(&'a Value),
}

impl Atom<'_> {
    /// Python's `str()` of it, escaped.
    pub(crate) fn push(&self, out: &mut String) {
        match self {
            Atom::Int(v) => out.push_str(itoa::Buffer::new().format(*v)),
            Atom::Float(v) => text::push_float_repr(*v, out),
            Atom::Str(s) => text::push_escaped(s, out),
            Atom::Value(Value::Int(v)) => out.push_str(itoa::Buffer::new().format(*v)),
            Atom::Value(Value::Str(s)) => text::push_escaped(s.as_str(), out),
            Atom::Value(v) => text::push_escaped(&text::py_str(v), out),
        }
    }

    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Atom::Int(v) => Some(*v as f64),
            Atom::Float(v) => Some(*v),
            Atom::Str(_) => None,
            Atom::Value(Value::Int(v)) => Some(*v as f64),
            Atom::Value(Value::UInt(v)) => Some(*v as f64),
            Atom::Value(Value::Float(v)) => Some(*v),
            Atom::Value(Value::Bool(b)) => Some(f64::from(u8::from(*b))),
            Atom::Value(_) => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Atom::Str(s) => Some(s),
            Atom::Value(v) => v.as_str(),
            _ => None,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Atom::Value(Value::Null))
    }

    pub(crate) fn as_int(&self) -> Option<i128> {
        match self {
            Atom::Int(v) | Atom::Value(Value::Int(v)) => Some(i128::from(*v)),
            Atom::Value(Value::UInt(v)) => Some(i128::from(*v)),
            _ => None,
        }
    }

    /// Python's `==` between the numbers and texts a line compares.
    pub(crate) fn same(&self, other: &Atom) -> bool {
        if let (Some(a), Some(b)) = (self.as_int(), other.as_int()) {
            return a == b;
        }
        match (self.as_f64(), other.as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => match (self.as_str(), other.as_str()) {
                (Some(a), Some(b)) => a == b,
                _ => self.is_null() && other.is_null(),
            },
        }
    }

    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        self.push(&mut out);
        out
    }
}

/// A finding's text as a record holds it: a note, or a problem (an error or a warning).
pub struct FindingText {
    pub note: bool,
    pub message: String,
}

/// The problems and notes of a line.
pub enum Findings<'a> {
    /// A frame's findings, their texts made by Python's templates.
    Texts(&'a [FindingText]),
    /// A record's `problems` (texts) and `expert` (id, severity, message).
    Record { problems: Option<&'a Value>, expert: Option<&'a Value> },
}

impl Findings<'_> {
    pub(crate) fn problems(&self) -> Vec<Atom<'_>> {
        match self {
            Findings::Texts(texts) => texts.iter().filter(|t| !t.note).map(|t| Atom::Str(&t.message)).collect(),
            Findings::Record { problems, .. } => {
                problems.and_then(Value::as_list).unwrap_or(&[]).iter().map(Atom::Value).collect()
            }
        }
    }

    pub(crate) fn notes(&self) -> Vec<Atom<'_>> {
        match self {
            Findings::Texts(texts) => texts.iter().filter(|t| t.note).map(|t| Atom::Str(&t.message)).collect(),
            Findings::Record { expert, .. } => expert
                .and_then(Value::as_list)
                .unwrap_or(&[])
                .iter()
                .filter(|e| e.get("severity").and_then(Value::as_str) == Some("note"))
                .map(|e| Atom::Value(e.get("message").unwrap_or(&Value::Null)))
                .collect(),
        }
    }
}

/// What a protocol's payload section puts on a line (all None for a frame without one).
#[derive(Default)]
pub struct PayloadFacts<'a> {
    /// The messages: a record's (`messages`), or the core's decoded ones (`payload` bytes).
    pub messages: Option<&'a [Value]>,
    /// A record's `messages_summary` (count, bytes, chunk), in place of the messages.
    pub summary: Option<&'a Value>,
    pub metadata: Option<&'a Value>,
    pub checksum: Option<&'a str>,
    pub encrypted: bool,
    pub marker: Option<&'a Value>,
}

/// Everything a line shows of a frame or an event.
pub struct LineFacts<'a> {
    /// The frame number; None for an event.
    pub index: Option<Atom<'a>>,
    pub time: Atom<'a>,
    pub packet: Option<Atom<'a>>,
    pub first_packet: Option<Atom<'a>>,
    pub conn: Option<Atom<'a>>,
    pub src: Option<Atom<'a>>,
    pub dst: Option<Atom<'a>>,
    pub direction: Option<Atom<'a>>,
    pub type_name: Atom<'a>,
    pub protocol: &'a str,
    pub command: Option<&'a Value>,
    pub findings: Findings<'a>,
    /// An event's text.
    pub message: Option<Atom<'a>>,
    /// Where the analysis' notes are (answers, latency_ms, producer, acks ...): a frame's notes, or the record.
    pub notes: &'a Map,
    pub payload: PayloadFacts<'a>,
    /// The frame's serial number, for a protocol that numbers its frames (TubeMQ).
    pub serial: Option<Atom<'a>>,
}

impl<'a> LineFacts<'a> {
    pub fn note(&self, key: &str) -> Option<&'a Value> {
        self.notes.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    }
}

/// `safe` of a line's value.
pub(crate) fn push_atom_safe(atom: &Atom, limit: i64, out: &mut String) {
    match atom {
        Atom::Str(s) => text::push_safe_text(s, limit, out),
        Atom::Value(v) => text::push_safe(v, limit, out),
        other => text::push_safe_text(&other.text(), limit, out),
    }
}

/// `#1,#2,…` of frame numbers: the first six, then how many in all.
pub(crate) fn push_frame_list(frames: &[Value], count: u64, out: &mut String) {
    for (i, frame) in frames.iter().take(6).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('#');
        Atom::Value(frame).push(out);
    }
    if count > 6 {
        let _ = write!(out, ",… ({count})");
    }
}
