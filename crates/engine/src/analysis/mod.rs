//! Conversation analysis: request/response pairing for any protocol, and the protocol's own session state.
//!
//! Runs after decoding, one item at a time, in capture order. Pairing is generic and driven by the protocol's
//! command table (`CommandSpec::opens` / `answers`): a request waits under a key (a space and some command
//! fields) until a response looks under the same key; the pair gives `answers`, `latency_ms` and
//! `request_type`, and the findings `response.slow`, `response.before_request`, `response.unmatched` and
//! `request.duplicate_id`. A request still waiting when its connection closes is `UNANSWERED`. Then the
//! protocol's [`Session`] adds what only it knows.
//!
//! Nothing here edits the decoded frame: each frame comes out as its notes and findings. What is kept per
//! waiting request is a [`Waiting`] (a few ids), never the frame or its payload, and at most
//! `max_pending_requests` per connection.
//!
//! The analysis has a clock: [`Analyzer::tick`] (every item's time when reading a file; the wall clock for a
//! live capture on an idle link) reports a request that has waited past `request_timeout` as `OVERDUE` when
//! that happens. A heap holds one deadline per connection (its oldest request not yet reported), so the clock
//! costs nothing per request.

pub mod bounded;
pub mod join;
pub mod table;

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::rc::Rc;
use std::sync::Mutex;

use crate::model::{Decoded, Finding};
use crate::problems::GenericProblem;
use crate::value::{entry, Map, Name, Text, Value};
use crate::{finding, name};
use bounded::{DropCounter, FastMap, OrderedMap};
use table::{CommandSpec, CommandTable, Key, KeyField, OpenedBy};

pub const TO_CLIENT: &str = "to_client";
pub const UNKNOWN_DIRECTION: &str = "unknown";

/// A decoded frame and where it was in the capture (`model.Frame`), as the analysis reads it.
pub struct Frame<'a> {
    /// 1-based frame number in the capture.
    pub index: u64,
    pub protocol: &'a str,
    pub conn: u64,
    pub src: &'a str,
    pub dst: &'a str,
    /// `to_<role>` or `unknown`.
    pub direction: &'a str,
    /// Time of the packet that completed the frame.
    pub time: f64,
    pub packet: u64,
    pub pdu: &'a Decoded,
}

/// The events a connection's start and end make, whatever its protocol: their `type` in records.
pub const CONNECTION_OPENED: &str = "CONNECTION_OPENED";
pub const CONNECTION_CLOSED: &str = "CONNECTION_CLOSED";

/// Something that is not a frame (`model.Event`): `kind` is a registered id; `details` go into the record,
/// `params` only into its message.
#[derive(Debug)]
pub struct Event {
    pub kind: &'static Name,
    pub time: f64,
    pub packet: u64,
    pub conn: Option<u64>,
    /// (src, dst, direction) of the request an event is about.
    pub route: Option<(Rc<str>, Rc<str>, Rc<str>)>,
    pub details: Map,
    pub params: Map,
}

impl Event {
    pub fn new(kind: &'static Name, time: f64, packet: u64, conn: Option<u64>, details: Map) -> Event {
        Event { kind, time, packet, conn, route: None, details, params: Map::new() }
    }
}

/// What the analysis reads of an event that comes in (a connection opened or closed, a gap, a capture's note).
#[derive(Clone, Copy, Debug)]
pub struct EventHead<'a> {
    pub kind: &'a str,
    pub conn: Option<u64>,
    pub time: f64,
    pub packet: u64,
    /// Its connection was opened in its middle (a `CONNECTION_OPENED` without its handshake).
    pub mid_stream: bool,
}

/// What the analysis gives for each input, in order.
#[derive(Debug)]
pub enum Output {
    /// The frame being processed, with its notes (record keys) and conversation findings; `answered`: the
    /// time and packet of the request it answers (in its notes as `answers`), for the pipeline's exchanges.
    Annotated {
        notes: Map,
        findings: Vec<Finding>,
        answered: Option<(f64, u64)>,
    },
    /// The input event, passed on as it is.
    Input,
    Event(Event),
}

/// A protocol's conversation state for one connection (producers, consumers, flow control, ...).
pub trait Session {
    /// Add the frame's notes and findings (`spec` is None for a type the table does not know), and any
    /// events; `request` is the waiting request the frame answers, when it is a response.
    fn on_frame(
        &mut self,
        frame: &Frame,
        spec: Option<&CommandSpec>,
        request: Option<&Waiting>,
        notes: &mut Map,
        findings: &mut Vec<Finding>,
        events: &mut Vec<Event>,
    );

    /// The events of the connection's end (e.g. chunked messages never finished).
    fn close(&mut self, time: f64, packet: u64, events: &mut Vec<Event>);

    /// The sizes of its tables, for tests that check they stay bounded.
    fn sizes(&self) -> Map {
        Map::new()
    }
}

/// Makes the sessions of one protocol for one analysis, and holds what they share across connections.
pub trait Sessions {
    fn open(&mut self, conn: u64, mid_stream: bool) -> Box<dyn Session>;

    /// The sizes of the shared tables, for tests.
    fn sizes(&self) -> Map {
        Map::new()
    }
}

/// What the analyzer knows of a protocol: its table, the direction of its client's requests before any
/// is seen, and its sessions (None: pairing only).
pub struct ProtocolAnalysis {
    pub table: CommandTable,
    pub default_to_server: String,
    pub sessions: Option<Box<dyn Sessions>>,
}

/// The limits of the generic analysis.
#[derive(Clone, Debug)]
pub struct PairingOptions {
    pub request_timeout: f64,
    /// `request_timeout` as given (an int stays an int in the records).
    pub request_timeout_value: Value,
    pub max_pending_requests: usize,
}

/// A hashable form of a key value or an actor id, with Python's dict-key equality (1 == True == 1.0).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ident {
    Null,
    Int(i128),
    Str(String),
    Other(String),
}

impl Ident {
    pub fn of(value: Option<&Value>) -> Ident {
        match value {
            None | Some(Value::Null) => Ident::Null,
            Some(Value::Int(v)) => Ident::Int(*v as i128),
            Some(Value::UInt(v)) => Ident::Int(*v as i128),
            Some(Value::Bool(b)) => Ident::Int(*b as i128),
            Some(Value::Float(f)) if f.fract() == 0.0 && f.abs() < 1e36 => Ident::Int(*f as i128),
            Some(Value::Str(t)) => Ident::Str(t.as_str().to_owned()),
            Some(other) => Ident::Other(format!("{other:?}")),
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Ident::Null => Value::Null,
            Ident::Int(v) => match (i64::try_from(*v), u64::try_from(*v)) {
                (Ok(v), _) => Value::Int(v),
                (_, Ok(v)) => Value::UInt(v),
                _ => Value::Float(*v as f64),
            },
            Ident::Str(s) | Ident::Other(s) => Value::from(s.clone()),
        }
    }
}

/// Where a request waits: a space and the values of its key's fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bucket {
    space: usize,
    parts: Vec<Ident>,
}

/// A request waiting for its answer: what pairing needs, never the payload.
#[derive(Clone, Debug)]
pub struct Waiting {
    pub index: u64,
    pub type_name: &'static Name,
    pub time: f64,
    pub packet: u64,
    pub src: Rc<str>,
    pub dst: Rc<str>,
    pub direction: Rc<str>,
    unanswered: bool,
    /// The fields named by the spec's `remember`.
    pub kept: Map,
    /// Reported OVERDUE (waited past the operation timeout).
    pub overdue: bool,
}

/// The value under `key` in a map.
pub fn map_get<'m>(map: &'m Map, key: &str) -> Option<&'m Value> {
    map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

/// A name known at run time (a command type, a problem id read from Python), made once and kept for the life
/// of the process: the set of such names is the protocols' and the registry's, so it stays small.
pub fn intern(text: &str) -> &'static Name {
    static NAMES: Mutex<Option<HashMap<String, &'static Name>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let names = names.get_or_insert_with(HashMap::new);
    if let Some(name) = names.get(text) {
        return name;
    }
    let name: &'static Name = Box::leak(Box::new(Name::owned(text.to_owned())));
    names.insert(text.to_owned(), name);
    name
}

struct Connection {
    protocol: Rc<str>,
    session: Option<Box<dyn Session>>,
    mid_stream: bool,
    waiting: FastMap<Bucket, Vec<Waiting>>, // requests by bucket, oldest first
    order: OrderedMap<u64, Bucket>,         // request frame index -> its bucket, oldest first
    drops: DropCounter,
    to_server: Rc<str>, // the direction of the client's requests
    last_time: f64,
    last_packet: u64,
    in_heap: bool,           // a deadline of this connection is in the analyzer's heap
    endpoints: Vec<Rc<str>>, // its addresses and directions, shared by its waiting requests
}

impl Connection {
    fn shared_text(&mut self, text: &str) -> Rc<str> {
        if let Some(known) = self.endpoints.iter().find(|e| &***e == text) {
            return known.clone();
        }
        let made: Rc<str> = Rc::from(text);
        if self.endpoints.len() < 8 {
            self.endpoints.push(made.clone());
        }
        made
    }

    fn request(&self, index: u64, bucket: &Bucket) -> Option<&Waiting> {
        self.waiting.get(bucket)?.iter().find(|w| w.index == index)
    }

    fn forget(&mut self, index: u64, bucket: &Bucket) -> Option<Waiting> {
        let waiting = self.waiting.get_mut(bucket)?;
        let at = waiting.iter().position(|w| w.index == index)?;
        let request = waiting.remove(at);
        if waiting.is_empty() {
            self.waiting.remove(bucket);
        }
        self.order.remove(&index);
        Some(request)
    }
}

/// A deadline in the heap: (time, connection), earliest first.
#[derive(PartialEq)]
struct Deadline(f64, u64);

impl Eq for Deadline {}

impl PartialOrd for Deadline {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Deadline {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

/// Pairing and session state for every connection. Feed each item in capture order.
pub struct Analyzer {
    options: PairingOptions,
    protocols: FastMap<Rc<str>, ProtocolAnalysis>,
    conns: OrderedMap<u64, Connection>,
    mid_stream: FastMap<u64, bool>,           // opened connections without a frame yet
    deadlines: BinaryHeap<Reverse<Deadline>>, // at most one per connection
    last_packet: u64,
}

impl Analyzer {
    pub fn new(options: PairingOptions) -> Analyzer {
        Analyzer {
            options,
            protocols: FastMap::default(),
            conns: OrderedMap::new(),
            mid_stream: FastMap::default(),
            deadlines: BinaryHeap::new(),
            last_packet: 0,
        }
    }

    pub fn knows_protocol(&self, name: &str) -> bool {
        self.protocols.contains_key(name)
    }

    pub fn add_protocol(&mut self, name: &str, protocol: ProtocolAnalysis) {
        self.protocols.insert(Rc::from(name), protocol);
    }

    /// The clock moved to `now`: report the requests that have waited past the operation timeout.
    pub fn tick(&mut self, now: f64, out: &mut Vec<Output>) {
        while self.deadlines.peek().is_some_and(|Reverse(d)| d.0 < now) {
            let Some(Reverse(Deadline(_, conn_id))) = self.deadlines.pop() else { break };
            if let Some(conn) = self.conns.get_mut(&conn_id) {
                conn.in_heap = false;
                self.next_deadline(conn_id, now, Some(out));
            }
        }
    }

    /// Report the connection's oldest request not yet reported if it is overdue at `now`, and put the
    /// deadline of the next one in the heap.
    fn next_deadline(&mut self, conn_id: u64, now: f64, out: Option<&mut Vec<Output>>) {
        let timeout = self.options.request_timeout;
        let Some(conn) = self.conns.get_mut(&conn_id) else { return };
        let mut next = None;
        for (index, bucket) in conn.order.iter() {
            match conn.request(*index, bucket) {
                Some(request) if !request.overdue && request.unanswered => {
                    next = Some((*index, bucket.clone(), request.time + timeout));
                    break;
                }
                _ => continue,
            }
        }
        let Some((index, bucket, deadline)) = next else { return };
        match out {
            Some(out) if deadline < now => {
                let packet = self.last_packet;
                let Some(request) =
                    conn.waiting.get_mut(&bucket).and_then(|ws| ws.iter_mut().find(|w| w.index == index))
                else {
                    return;
                };
                request.overdue = true;
                let mut event = Event::new(
                    name!("OVERDUE"),
                    deadline,
                    packet,
                    Some(conn_id),
                    vec![entry(name!("request"), index), entry(name!("request_type"), request.type_name)],
                );
                event.route = Some((request.src.clone(), request.dst.clone(), request.direction.clone()));
                event.params = vec![entry(name!("timeout_s"), self.options.request_timeout_value.clone())];
                conn.order.move_to_end(&index); // the unreported ones stay in front
                out.push(Output::Event(event));
                self.next_deadline(conn_id, now, None); // one report per pop: the heap keeps time order
            }
            _ => {
                conn.in_heap = true;
                self.deadlines.push(Reverse(Deadline(deadline, conn_id)));
            }
        }
    }

    /// An event of the pipeline (connection opened or closed, gaps, ...): passed on, and the end of a
    /// connection's state when it closes.
    pub fn event(&mut self, head: EventHead, out: &mut Vec<Output>) {
        let EventHead { kind, conn, time, packet, mid_stream } = head;
        if !self.deadlines.is_empty() {
            self.tick(time, out);
        }
        self.last_packet = packet;
        out.push(Output::Input);
        let Some(conn_id) = conn else { return };
        match kind {
            CONNECTION_OPENED => {
                self.mid_stream.insert(conn_id, mid_stream);
            }
            CONNECTION_CLOSED => {
                self.mid_stream.remove(&conn_id);
                if let Some(conn) = self.conns.remove(&conn_id) {
                    self.close(conn_id, conn, time, packet, out);
                }
            }
            _ => {}
        }
    }

    /// The end of the input: what every connection still open leaves.
    pub fn finish(&mut self, out: &mut Vec<Output>) {
        while let Some((conn_id, conn)) = self.conns.pop_oldest() {
            let (time, packet) = (conn.last_time, conn.last_packet);
            self.close(conn_id, conn, time, packet, out);
        }
    }

    // ------------------------------------------------------------------------------------------ frames

    /// One frame: its notes and findings (`Output::Annotated`), then the events it causes. A frame of a
    /// protocol not added (`add_protocol`) is passed with no notes.
    pub fn frame(&mut self, frame: &Frame, out: &mut Vec<Output>) {
        if !self.deadlines.is_empty() {
            self.tick(frame.time, out);
        }
        self.last_packet = frame.packet;
        let Some(protocol_name) = self.protocols.get_key_value(frame.protocol).map(|(name, _)| name.clone()) else {
            out.push(Output::Annotated { notes: Map::new(), findings: Vec::new(), answered: None });
            return;
        };
        if !self.conns.contains_key(&frame.conn) {
            let Some(protocol) = self.protocols.get_mut(&protocol_name) else { return };
            let mid_stream = self.mid_stream.remove(&frame.conn).unwrap_or(false);
            let session = protocol.sessions.as_mut().map(|s| s.open(frame.conn, mid_stream));
            self.conns.insert(
                frame.conn,
                Connection {
                    protocol: protocol_name,
                    session,
                    mid_stream,
                    waiting: FastMap::default(),
                    order: OrderedMap::new(),
                    drops: DropCounter::new(frame.conn),
                    to_server: Rc::from(protocol.default_to_server.as_str()),
                    last_time: 0.0,
                    last_packet: 0,
                    in_heap: false,
                    endpoints: Vec::new(),
                },
            );
        }
        let Some(conn) = self.conns.get_mut(&frame.conn) else { return };
        let Some(protocol) = self.protocols.get(&conn.protocol) else { return };
        conn.last_time = frame.time;
        conn.last_packet = frame.packet;
        if frame.direction != TO_CLIENT && frame.direction != UNKNOWN_DIRECTION && &*conn.to_server != frame.direction {
            conn.to_server = conn.shared_text(frame.direction);
        }
        let mut notes = Map::new();
        let mut findings = Vec::new();
        let mut events = Vec::new();
        let mut deadline = None;
        let mut answered = None;
        if frame.pdu.command.is_some() {
            // a command that could not be decoded tells the conversation nothing
            let spec = protocol.table.get(frame.pdu.type_name.as_str());
            let mut request = None;
            if let Some(spec) = spec {
                if !spec.answers.is_empty() {
                    request = answer(&self.options, &protocol.table, conn, frame, spec, &mut notes, &mut findings);
                }
                if let Some(key) = &spec.opens {
                    if !cut_short(frame.pdu) {
                        // a request never sent whole awaits nothing
                        deadline =
                            wait(&self.options, &protocol.table, conn, frame, spec, key, &mut findings, &mut events);
                    }
                }
            }
            if let Some(session) = conn.session.as_mut() {
                session.on_frame(frame, spec, request.as_ref(), &mut notes, &mut findings, &mut events);
            }
            answered = request.map(|request| (request.time, request.packet));
        }
        if let Some(deadline) = deadline {
            self.deadlines.push(Reverse(Deadline(deadline, frame.conn)));
        }
        out.push(Output::Annotated { notes, findings, answered });
        out.extend(events.into_iter().map(Output::Event));
    }

    // ------------------------------------------------------------------------ the end of a connection

    fn close(&mut self, conn_id: u64, mut conn: Connection, time: f64, packet: u64, out: &mut Vec<Output>) {
        let mut unanswered: Vec<&Waiting> = conn.waiting.values().flatten().filter(|w| w.unanswered).collect();
        unanswered.sort_by_key(|w| w.index);
        let mut events: Vec<Event> = unanswered
            .into_iter()
            .map(|w| {
                let mut event = Event::new(
                    name!("UNANSWERED"),
                    time,
                    packet,
                    Some(conn_id),
                    vec![entry(name!("request"), w.index), entry(name!("request_type"), w.type_name)],
                );
                event.route = Some((w.src.clone(), w.dst.clone(), w.direction.clone()));
                event
            })
            .collect();
        if let Some(session) = conn.session.as_mut() {
            session.close(time, packet, &mut events);
        }
        conn.drops.close(time, packet, &mut events);
        out.extend(events.into_iter().map(Output::Event));
    }

    // ------------------------------------------------------------------------------------------- tests

    /// The sizes of a connection's tables (requests waiting, and the session's), for tests.
    pub fn sizes(&self, conn_id: u64) -> Option<Map> {
        let conn = self.conns.get(&conn_id)?;
        let mut out = vec![
            entry(name!("order"), conn.order.len()),
            entry(name!("waiting"), conn.waiting.values().map(Vec::len).sum::<usize>()),
        ];
        if let Some(session) = &conn.session {
            out.extend(session.sizes());
        }
        Some(out)
    }

    /// The requests waiting on a connection, oldest first: (index, type, kept fields), for tests.
    pub fn waiting(&self, conn_id: u64) -> Vec<(u64, &'static Name, Map)> {
        let Some(conn) = self.conns.get(&conn_id) else { return Vec::new() };
        conn.order
            .iter()
            .filter_map(|(index, bucket)| conn.request(*index, bucket))
            .map(|w| (w.index, w.type_name, w.kept.clone()))
            .collect()
    }

    /// The sizes of a protocol's shared tables, for tests.
    pub fn shared_sizes(&self, protocol: &str) -> Map {
        self.protocols.get(protocol).and_then(|p| p.sessions.as_ref()).map(|s| s.sizes()).unwrap_or_default()
    }
}

fn cut_short(pdu: &Decoded) -> bool {
    pdu.findings.iter().any(|f| f.id.as_str() == GenericProblem::FrameCutAtEnd.id())
}

/// The value of one key field for this frame.
fn key_value(conn: &Connection, field: &KeyField, frame: &Frame) -> Option<Value> {
    match field {
        KeyField::Direction => Some(Value::from(frame.direction.to_owned())),
        KeyField::Reverse => {
            let reverse = if frame.direction == TO_CLIENT { &*conn.to_server } else { TO_CLIENT };
            Some(Value::from(reverse.to_owned()))
        }
        KeyField::Serial => Some(Value::from(frame.pdu.body.as_ref()?.serial()? as i64)),
        KeyField::Command(name) => match frame.pdu.command.as_ref()?.get(name)? {
            Value::Null => None, // the command lacks the field it would be paired by
            value => Some(value.clone()),
        },
    }
}

/// Where a request of this key waits, or None when the command lacks a key field.
fn bucket(conn: &Connection, key: &Key, frame: &Frame) -> Option<Bucket> {
    let mut parts = Vec::with_capacity(key.fields.len());
    for field in &key.fields {
        parts.push(match field {
            KeyField::Direction => Ident::Str(frame.direction.to_owned()),
            KeyField::Reverse => {
                Ident::Str(if frame.direction == TO_CLIENT { &*conn.to_server } else { TO_CLIENT }.to_owned())
            }
            KeyField::Serial => Ident::of(Some(&Value::from(frame.pdu.body.as_ref()?.serial()? as i64))),
            KeyField::Command(name) => match frame.pdu.command.as_ref()?.get(name)? {
                Value::Null => return None,
                value => Ident::of(Some(value)),
            },
        });
    }
    Some(Bucket { space: key.space, parts })
}

/// The `key` parameter of a finding: the key's fields and this frame's values.
fn key_param(conn: &Connection, key: &Key, frame: &Frame) -> Value {
    let map: Map = key
        .fields
        .iter()
        .zip(&key.names)
        .map(|(field, name)| (Text::Owned(name.clone()), key_value(conn, field, frame).unwrap_or(Value::Null)))
        .collect();
    Value::Map(map)
}

/// A response: the request it answers (forgotten unless the answer is interim), with `answers`,
/// `latency_ms`, `request_type`, `response.slow` and `response.before_request`; or `response.unmatched`.
fn answer(
    options: &PairingOptions,
    table: &CommandTable,
    conn: &mut Connection,
    frame: &Frame,
    spec: &CommandSpec,
    notes: &mut Map,
    findings: &mut Vec<Finding>,
) -> Option<Waiting> {
    let mut first_key = None;
    for key in &spec.answers {
        let Some(bucket) = bucket(conn, key, frame) else { continue };
        if first_key.is_none() {
            first_key = Some(key);
        }
        let Some(request) = conn
            .waiting
            .get(&bucket)
            .and_then(|waiting| waiting.iter().find(|w| spec.can_answer(w.type_name.as_str())))
        else {
            continue;
        };
        let latency = frame.time - request.time;
        notes.push(entry(name!("answers"), request.index));
        notes.push(entry(name!("latency_ms"), Value::Float(round3(latency * 1000.0))));
        notes.push(entry(name!("request_type"), request.type_name));
        if latency > options.request_timeout {
            findings.push(finding!(GenericProblem::ResponseSlow, "type" => spec.name,
                                   "latency_s" => Value::Float(latency),
                                   "request_type" => request.type_name, "request" => request.index,
                                   "timeout_s" => options.request_timeout_value.clone()));
        }
        if latency < 0.0 {
            // the capture's clock went backwards between the two (merged captures, a clock stepped back):
            // the latency is kept as measured, but says it cannot be right
            findings.push(finding!(GenericProblem::ResponseBeforeRequest, "type" => spec.name,
                                   "latency_ms" => Value::Float(round3(latency * 1000.0)),
                                   "request_type" => request.type_name, "request" => request.index));
        }
        let interim = spec
            .interim
            .as_ref()
            .is_some_and(|(field, value)| frame.pdu.command.as_ref().and_then(|c| c.get(field)) == Some(value));
        let index = request.index;
        if interim {
            return Some(request.clone());
        }
        return conn.forget(index, &bucket);
    }
    if let Some(key) = first_key {
        if table.spaces[key.space].unmatched && !conn.mid_stream {
            findings.push(
                finding!(GenericProblem::ResponseUnmatched, "type" => spec.name, "key" => key_param(conn, key, frame)),
            );
        }
    }
    None
}

/// A request: waits under its key; returns a deadline for the analyzer's heap when the connection has none
/// there yet.
#[allow(clippy::too_many_arguments)]
fn wait(
    options: &PairingOptions,
    table: &CommandTable,
    conn: &mut Connection,
    frame: &Frame,
    spec: &CommandSpec,
    key: &Key,
    findings: &mut Vec<Finding>,
    events: &mut Vec<Event>,
) -> Option<f64> {
    let space = &table.spaces[key.space];
    let to_client = frame.direction == TO_CLIENT;
    if (space.opened_by == OpenedBy::Client && to_client) || (space.opened_by == OpenedBy::Server && !to_client) {
        return None; // e.g. CLOSE_PRODUCER sent by the broker on its own: not a request awaiting an answer
    }
    let bucket = bucket(conn, key, frame)?;
    let command = frame.pdu.command.as_ref();
    let kept: Map = spec
        .remember
        .iter()
        .map(|name| (Text::Owned(name.clone()), command.and_then(|c| c.get(name)).cloned().unwrap_or(Value::Null)))
        .collect();
    let request = Waiting {
        index: frame.index,
        type_name: spec.name,
        time: frame.time,
        packet: frame.packet,
        src: conn.shared_text(frame.src),
        dst: conn.shared_text(frame.dst),
        direction: conn.shared_text(frame.direction),
        unanswered: space.unanswered,
        kept,
        overdue: false,
    };
    match conn.waiting.get_mut(&bucket) {
        None => {
            conn.waiting.insert(bucket.clone(), vec![request]);
        }
        Some(waiting) if space.slot => {
            for old in waiting.iter() {
                conn.order.remove(&old.index);
            }
            *waiting = vec![request];
        }
        Some(waiting) => {
            if space.duplicates && waiting.iter().any(|w| w.type_name == spec.name) {
                let key_param = key_param(conn, key, frame);
                findings.push(finding!(GenericProblem::RequestDuplicateId, "type" => spec.name, "key" => key_param));
            }
            // `conn` was borrowed for the parameter: look the list up again
            if let Some(waiting) = conn.waiting.get_mut(&bucket) {
                waiting.push(request);
            }
        }
    }
    conn.order.insert(frame.index, bucket);
    let mut deadline = None;
    if !conn.in_heap && space.unanswered {
        conn.in_heap = true;
        deadline = Some(frame.time + options.request_timeout);
    }
    if conn.order.len() > options.max_pending_requests {
        if let Some((index, bucket)) = conn.order.pop_oldest() {
            if let Some(waiting) = conn.waiting.get_mut(&bucket) {
                waiting.retain(|w| w.index != index);
                if waiting.is_empty() {
                    conn.waiting.remove(&bucket);
                }
            }
        }
        let limit = options.max_pending_requests as u64;
        if let Some(event) = conn.drops.drop(
            name!("max_pending_requests"),
            name!("requests awaiting an answer"),
            limit,
            frame.time,
            frame.packet,
        ) {
            events.push(event);
        }
    }
    deadline
}

/// `round(x, 3)` as Python rounds: to the nearest multiple of 0.001 of the exact binary value, ties to even.
/// `x * 1000` is off by at most half an ulp, which only matters next to a tie: there (and for values too
/// large for the shortcut) the decimal formatting, correctly rounded, decides; `k / 1000.0` is then the double
/// nearest to k/1000, as Python's parsing of the rounded decimal gives.
pub fn round3(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let scaled = x * 1000.0;
    let fraction = scaled - scaled.floor();
    if scaled.abs() < 1e12 && (fraction - 0.5).abs() > 1e-3 {
        return scaled.round() / 1000.0;
    }
    format!("{x:.3}").parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_as_python() {
        // round(x, 3) in CPython for each
        for (x, expected) in [
            (0.0625, 0.062),
            (0.0635, 0.064),
            (1.0005, 1.0),
            (2.675, 2.675),
            (0.1235, 0.123),
            (-0.0625, -0.062),
            (123.4565, 123.457),
            (1e-9, 0.0),
            (0.30000000000000004, 0.3),
            (5.4104, 5.41),
            (-2.0004999, -2.0),
            (1e15 + 0.3, 1e15 + 0.3),
        ] {
            assert_eq!(round3(x), expected, "{x}");
        }
        // CPython's round(x, 3) of exact binary ties (n/16, n/8192) and random values
        for (x, expected) in [
            (0.0625, 0.062),
            (0.1875, 0.188),
            (0.3125, 0.312),
            (0.4375, 0.438),
            (0.5625, 0.562),
            (0.6875, 0.688),
            (0.8125, 0.812),
            (0.9375, 0.938),
            (1.0625, 1.062),
            (1.1875, 1.188),
            (1.3125, 1.312),
            (1.4375, 1.438),
            (1.5625, 1.562),
            (1.6875, 1.688),
            (1.8125, 1.812),
            (1.9375, 1.938),
            (2.0625, 2.062),
            (2.1875, 2.188),
            (2.3125, 2.312),
            (2.4375, 2.438),
            (0.0001220703125, 0.0),
            (0.00048828125, 0.0),
            (0.0008544921875, 0.001),
            (0.001220703125, 0.001),
            (0.0015869140625, 0.002),
            (0.001953125, 0.002),
            (0.0023193359375, 0.002),
            (0.002685546875, 0.003),
            (0.0030517578125, 0.003),
            (0.00341796875, 0.003),
            (32.38327648331624, 32.383),
            (15.084917392450192, 15.085),
            (65.09344730398537, 65.093),
            (7.243628666754276, 7.244),
            (53.58820043066892, 53.588),
            (36.56889169125856, 36.569),
            (5.799892477470681, 5.8),
            (50.743573318942026, 50.744),
            (3.749565844198488, 3.75),
            (43.364568366238586, 43.365),
            (6.985542357461894, 6.986),
            (9.071301334386506, 9.071),
            (42.451918914251394, 42.452),
            (82.68521246720381, 82.685),
            (12.380196114964559, 12.38),
            (0.0022323896460701453, 0.002),
            (0.006274332224055893, 0.006),
            (0.009477089424570057, 0.009),
            (0.005771029486174987, 0.006),
            (0.003966804746507802, 0.004),
        ] {
            assert_eq!(round3(x), expected, "{x}");
        }
        // the shortcut agrees with the formatting everywhere it is taken
        let mut x = 0.000_123_4_f64;
        while x < 1e7 {
            for v in [x, -x, x * 1.000_000_7, x + 0.000_5] {
                assert_eq!(round3(v), format!("{v:.3}").parse::<f64>().unwrap(), "{v}");
            }
            x *= 1.001_7;
        }
    }
}
