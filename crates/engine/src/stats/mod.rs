//! Capture statistics, gathered record by record: per connection, topic, producer and consumer, latency per
//! request type, throughput over time. The input is a record of the JSON contract (summary or full, frame or
//! event) as a [`Map`], whoever made it (the core's records, or a Python dict: a filtered view, saved JSON
//! Lines). Everything kept is a counter or bounded; the figures are read out as plain data (`state`), and
//! Python turns them into `stats --json` (percentiles, rounding, order) in `dissector/output/stats.py`.
//! The statistics know no protocol: what a frame's type is to them (`StatsRole`: a publish, a delivery, ...),
//! what its command says (versions, permits, entries, errors) and which types carry a client's messages are
//! asked of the record's protocol (`Protocol::stats_role` and the methods beside it).

pub mod sample;
pub mod summary;

use crate::analysis::bounded::OrderedMap;
use crate::analysis::{CONNECTION_CLOSED, CONNECTION_OPENED};
use crate::protocols::{self, Protocol, PublishFacts, StatsRole};
use crate::value::{Map, Name, Value};
use crate::FastMap;
use sample::{Latencies, Reservoir};
use std::sync::LazyLock;

/// The keys of a record the statistics read, the protocols' own (`Protocol::stats_record_keys`) among them, each
/// once, the command and the messages last, and of its command and messages: a record is made or converted only
/// that far (a full record's messages can be most of it).
pub static READ_KEYS: LazyLock<Vec<Name>> = LazyLock::new(|| {
    let generic = [
        "index",
        "time",
        "type",
        "conn",
        "direction",
        "size",
        "src",
        "dst",
        "problems",
        "expert",
        "producer",
        "consumer",
        "latency_ms",
        "request_type",
        "payload_size",
        "answers",
        "messages_summary",
        "delivery",
        "acks",
        "discards",
        "details",
        "protocol",
        "topic",
        "client_id",
        "group",
    ];
    let own = protocols::REGISTRY.iter().flat_map(|p| p.stats_record_keys().iter().copied());
    let mut keys = each_once(generic.into_iter().chain(own));
    keys.extend([Name::new("command"), Name::new("messages")]);
    keys
});
/// [`READ_KEYS`], and of the command [`COMMAND_KEYS`], as the core's record sink keeps them.
pub static STATS_KEPT: LazyLock<crate::records::KeptKeys> =
    LazyLock::new(|| crate::records::KeptKeys::new(&READ_KEYS).picking("command", &COMMAND_KEYS));
/// The keys of a command the protocols read for the statistics (`Protocol::stats_command_keys`), over all of
/// them, each once.
pub static COMMAND_KEYS: LazyLock<Vec<Name>> =
    LazyLock::new(|| each_once(protocols::REGISTRY.iter().flat_map(|p| p.stats_command_keys().iter().copied())));

/// The names of `keys`, each once, in the order first met.
fn each_once(keys: impl Iterator<Item = &'static str>) -> Vec<Name> {
    let mut once: Vec<&'static str> = Vec::new();
    for key in keys {
        if !once.contains(&key) {
            once.push(key);
        }
    }
    once.into_iter().map(Name::new).collect()
}
/// Clients remembered (by the client id their protocol's session notes); beyond, the oldest is forgotten and
/// counted.
pub const MAX_CLIENTS: usize = 10_000;
/// Topics listed per client at most.
const MAX_CLIENT_TOPICS: usize = 1000;
/// The share of `Stats::memory_total` a producer or consumer gets at least, however many there are.
const MIN_ACTOR_MEMORY: usize = 1000;

/// The keys of a message the statistics read: its size, and the protocols' own
/// (`Protocol::stats_message_keys`).
pub static MESSAGE_KEYS: LazyLock<Vec<Name>> = LazyLock::new(|| {
    let own = protocols::REGISTRY.iter().flat_map(|p| p.stats_message_keys().iter().copied());
    each_once(std::iter::once("payload_size").chain(own))
});

/// Time buckets kept for the throughput plot (their width doubles whenever there would be more).
pub const THROUGHPUT_BUCKETS: i64 = 2000;

/// The value under `key` of a record (or of one of its maps); a JSON null counts as absent.
fn get<'a>(map: &'a Map, key: &str) -> Option<&'a Value> {
    map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v).filter(|v| !v.is_null())
}

fn has(map: &Map, key: &str) -> bool {
    map.iter().any(|(k, _)| k.as_str() == key)
}

fn get_map<'a>(map: &'a Map, key: &str) -> Option<&'a Map> {
    get(map, key).and_then(Value::as_map)
}

fn number(value: Option<&Value>) -> f64 {
    match value {
        Some(Value::Float(v)) => *v,
        Some(Value::Int(v)) => *v as f64,
        Some(Value::UInt(v)) => *v as f64,
        _ => 0.0,
    }
}

use crate::value::count as int;

/// Python's `str(value)` (`None` for an absent value): what the tables show of an error code or an id.
fn python_str(value: Option<&Value>) -> String {
    value.map_or_else(|| "None".to_owned(), crate::text::py_str)
}

/// The error a frame's command names, as its protocol reads it (`?` when it names none).
fn error_name(protocol: Option<&dyn Protocol>, command: &Map) -> String {
    protocol.and_then(|p| p.error_of(command)).unwrap_or_else(|| "?".into())
}

/// Counts by key, in the order keys were first counted (as Python's `Counter`).
#[derive(Default)]
pub struct Counts<K> {
    pub entries: Vec<(K, i64)>,
}

impl<K: PartialEq> Counts<K> {
    fn add(&mut self, key: K, n: i64) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, count)) => *count += n,
            None => self.entries.push((key, n)),
        }
    }
}

impl Counts<String> {
    fn add_str(&mut self, key: &str, n: i64) {
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some((_, count)) => *count += n,
            None => self.entries.push((key.to_owned(), n)),
        }
    }
}

/// Latencies by request type, in the order types were first seen.
#[derive(Default)]
pub struct LatencyTable {
    pub entries: Vec<(String, Latencies)>,
}

impl LatencyTable {
    fn add(&mut self, kind: &str, value: f64, cap: usize) {
        let i = match self.entries.iter().position(|(k, _)| k == kind) {
            Some(i) => i,
            None => {
                self.entries.push((kind.to_owned(), Latencies::new(cap)));
                self.entries.len() - 1
            }
        };
        self.entries[i].1.add(value);
    }
}

/// One connection's figures. `extra` holds the keys learnt along the way (versions, how it closed), in the
/// order they were learnt, as the JSON shows them.
pub struct Conn {
    pub conn: i64,
    pub client: Value,
    pub broker: Value,
    pub first_time: f64,
    pub last_time: f64,
    /// frames and bytes to the broker, to the client, in an unknown direction
    pub frames: [i64; 3],
    pub bytes: [i64; 3],
    pub problems: i64,
    pub extra: Map,
    pub events: Counts<String>,
    pub latency: LatencyTable,
}

impl Conn {
    fn set(&mut self, key: &'static crate::value::Name, value: Value) {
        match self.extra.iter_mut().find(|(k, _)| k.as_str() == key.as_str()) {
            Some((_, v)) => *v = value,
            None => self.extra.push((crate::value::Text::Name(key), value)),
        }
    }
}

#[derive(Default)]
pub struct Topic {
    pub messages_sent: i64,
    pub bytes_sent: i64,
    /// Of the messages sent, those the server accepted (a receipt) and refused (an error answer).
    pub messages_accepted: i64,
    pub messages_rejected: i64,
    pub messages_received: i64,
    pub bytes_received: i64,
    pub producers: std::collections::BTreeSet<String>,
    pub consumers: std::collections::BTreeSet<String>,
}

/// A client's figures, for a protocol whose clients name themselves by a client id (a consumer also by its
/// group).
#[derive(Default)]
pub struct Client {
    pub group: Option<Value>,
    pub frames: i64,
    pub messages_sent: i64,
    pub bytes_sent: i64,
    pub messages_received: i64,
    pub bytes_received: i64,
    /// error codes of the answers it got, by name (or number)
    pub errors: Counts<String>,
    pub topics: std::collections::BTreeSet<String>,
}

/// A producer's or a consumer's figures (a producer uses the first group, a consumer the second).
pub struct Actor {
    pub info: Map,
    pub frames: i64,
    pub messages: i64,
    /// application bytes (after decompression), and payload bytes as sent
    pub payload_bytes: i64,
    pub wire_bytes: i64,
    pub batches: i64,
    pub batched_messages: i64,
    pub compression: Counts<String>,
    /// bytes of the compressed payloads that were decompressed, and what they decompressed to
    pub compressed_wire: i64,
    pub compressed_plain: i64,
    /// compressed chunked messages not finished: message id -> (chunk frame index, its wire bytes), counted in
    /// the ratio when the last chunk completes the message, naming its frames and its decompressed size
    chunks_pending: OrderedMap<String, Vec<(i64, Option<i64>)>>,
    pub chunk_frames_pending: usize,
    pub errors: Counts<String>,
    pub receipts: i64,
    /// publishes accepted: their latency (publish to acceptance); refused ones apart (publish to refusal)
    pub send_latency: Option<Latencies>,
    pub send_error_latency: Option<Latencies>,
    /// publishes waiting for their answer: frame index -> messages
    waiting: OrderedMap<i64, i64>,
    pub accepted: i64,
    pub rejected: i64,
    pub acks: i64,
    pub permits: i64,
    pub redeliveries: i64,
    /// deliveries: entry (as its protocol numbers it) -> messages in that entry (distinct vs duplicate); delivery
    /// frame -> messages
    entries: OrderedMap<u128, i64>,
    pub distinct: i64,
    delivered_frames: OrderedMap<i64, i64>,
    pub acked: i64,
    /// Messages the consumer acknowledged with a validation error: dropped, never handed to the application.
    pub discarded: i64,
}

impl Actor {
    fn new(info: Map) -> Actor {
        Actor {
            info,
            frames: 0,
            messages: 0,
            payload_bytes: 0,
            wire_bytes: 0,
            batches: 0,
            batched_messages: 0,
            compression: Counts::default(),
            compressed_wire: 0,
            compressed_plain: 0,
            chunks_pending: OrderedMap::new(),
            chunk_frames_pending: 0,
            errors: Counts::default(),
            receipts: 0,
            send_latency: None,
            send_error_latency: None,
            waiting: OrderedMap::new(),
            accepted: 0,
            rejected: 0,
            acks: 0,
            permits: 0,
            redeliveries: 0,
            entries: OrderedMap::new(),
            distinct: 0,
            delivered_frames: OrderedMap::new(),
            acked: 0,
            discarded: 0,
        }
    }

    /// The uuids of the compressed chunked messages waiting for their last chunk, oldest first.
    pub fn pending_chunks(&self) -> impl Iterator<Item = &str> {
        self.chunks_pending.keys().map(String::as_str)
    }

    /// Messages the producer sent that are still waiting for an answer.
    pub fn unanswered(&self) -> i64 {
        self.waiting.values().sum()
    }

    /// The wire and decompressed bytes of a compressed publish, for the compression ratio, as its protocol
    /// reads them (`facts`). A chunk is only a slice of its message's compressed payload: its wire bytes wait
    /// under its message's id until the last chunk completes the message, naming its decompressed size and the
    /// frames that made it; a message that could not be reassembled or decompressed, or whose chunks were
    /// forgotten, stays out of the ratio.
    fn count_compressed(&mut self, rec: &Map, facts: PublishFacts, chunk_memory: usize) {
        let Some(chunk) = facts.chunk else {
            if let Some(plain) = facts.uncompressed_size {
                self.compressed_wire += int(get(rec, "payload_size"));
                self.compressed_plain += plain;
            }
            return;
        };
        let message = chunk.message;
        let index = int(get(rec, "index"));
        let wire = get(rec, "payload_size").map(|v| int(Some(v)));
        match self.chunks_pending.get_mut(&message) {
            Some(pending) => {
                match pending.iter_mut().find(|(i, _)| *i == index) {
                    Some(slot) => slot.1 = wire,
                    None => pending.push((index, wire)),
                }
                self.chunks_pending.move_to_end(&message);
            }
            None => self.chunks_pending.insert(message.clone(), vec![(index, wire)]),
        }
        self.chunk_frames_pending += 1;
        if let Some(whole) = chunk.completed.filter(|whole| whole.message.as_deref() == Some(message.as_str())) {
            let pending = self.chunks_pending.remove(&message).unwrap_or_default();
            self.chunk_frames_pending -= pending.len();
            let wire: Option<Vec<i64>> = whole
                .frames
                .iter()
                .map(|frame| pending.iter().find(|(i, _)| Some(*i) == *frame).and_then(|(_, w)| *w))
                .collect();
            if let (Some(plain), Some(wire)) = (whole.plain_size, wire) {
                if !wire.is_empty() {
                    self.compressed_wire += wire.iter().sum::<i64>();
                    self.compressed_plain += plain;
                }
            }
        }
        while self.chunk_frames_pending > chunk_memory {
            match self.chunks_pending.pop_oldest() {
                Some((_, forgotten)) => self.chunk_frames_pending -= forgotten.len(),
                None => break,
            }
        }
    }
}

/// The latency table's key for a request answered by an error: the request and the answer (`SEND→SEND_ERROR`).
pub fn refused_kind(request_type: &str, answer_type: &str) -> String {
    format!("{request_type}→{answer_type}")
}

/// (messages, application bytes) of a record carrying messages.
fn message_totals(rec: &Map) -> (i64, i64) {
    if let Some(summary) = get_map(rec, "messages_summary") {
        return (int(get(summary, "count")), int(get(summary, "bytes")));
    }
    let messages = get(rec, "messages").and_then(Value::as_list).unwrap_or(&[]);
    let bytes = messages.iter().filter_map(Value::as_map).map(|m| int(get(m, "payload_size"))).sum();
    (messages.len() as i64, bytes)
}

/// What a frame is to the statistics, and the protocol that says so (and reads its command).
type Role = (StatsRole, &'static dyn Protocol);

/// A response kept for the plots: time, request type, latency, whether an error answered it.
pub type PlotPoint = (f64, String, f64, bool);

pub struct Stats {
    latency_samples: usize,
    /// message frames / entries remembered per producer or consumer: an ACK or a duplicate delivery further
    /// back is not matched (bounded memory whatever the capture)
    actor_memory: usize,
    /// chunk frames of unfinished compressed messages remembered per producer or consumer
    chunk_memory: usize,
    /// the latency sample of each connection and each producer (their number grows with the capture's)
    pub actor_latency_samples: usize,
    /// frames and entries remembered over every producer and consumer: each gets an equal share of it, at
    /// most `actor_memory`, at least `MIN_ACTOR_MEMORY`
    pub memory_total: usize,
    pub frames: i64,
    pub first_time: Option<f64>,
    pub last_time: Option<f64>,
    /// the first record's time: time 0 of the timeline and the plots
    pub origin: Option<f64>,
    pub types: Counts<String>,
    /// the connections, in the order first seen: at most `max_connections`; beyond, the oldest closed one (or,
    /// when none has closed, the oldest) is forgotten and counted in `connections_dropped` (a SYN flood
    /// would otherwise keep a few KB for every connection ever seen)
    pub conns: OrderedMap<i64, Conn>,
    pub max_connections: usize,
    pub connections_dropped: i64,
    /// connections closed, oldest first (some may be forgotten already): the first to forget
    closed: std::collections::VecDeque<i64>,
    pub topics: std::collections::BTreeMap<String, Topic>,
    pub producers: OrderedMap<(i64, i64), Actor>,
    pub consumers: OrderedMap<(i64, i64), Actor>,
    /// clients by client id, and how many were forgotten beyond MAX_CLIENTS
    pub clients: OrderedMap<String, Client>,
    pub clients_dropped: i64,
    pub latency: LatencyTable,
    pub plot: Reservoir<PlotPoint>,
    pub server_errors: Counts<String>,
    pub expert: Counts<(String, String)>,
    pub events: Counts<String>,
    /// time bucket -> [messages to broker, bytes to broker, messages to client, bytes to client], in the
    /// order buckets were made; buckets start 10 ms wide and double whenever there would be too many
    pub throughput: Vec<(i64, [i64; 4])>,
    throughput_index: FastMap<i64, usize>,
    pub throughput_width: f64,
    throughput_span: (i64, i64),
    /// The protocol the last record named: records come in long runs of one protocol, so it is looked up by
    /// name only when the name changes.
    last_protocol: Option<&'static dyn Protocol>,
}

impl Stats {
    pub fn new(latency_samples: usize, plot_samples: usize, actor_memory: usize, chunk_memory: usize) -> Stats {
        Stats {
            latency_samples,
            actor_memory,
            chunk_memory,
            actor_latency_samples: latency_samples,
            memory_total: usize::MAX,
            frames: 0,
            first_time: None,
            last_time: None,
            origin: None,
            types: Counts::default(),
            conns: OrderedMap::new(),
            max_connections: usize::MAX,
            connections_dropped: 0,
            closed: Default::default(),
            topics: Default::default(),
            producers: OrderedMap::new(),
            consumers: OrderedMap::new(),
            clients: OrderedMap::new(),
            clients_dropped: 0,
            latency: LatencyTable::default(),
            plot: Reservoir::new(plot_samples),
            server_errors: Counts::default(),
            expert: Counts::default(),
            events: Counts::default(),
            throughput: Vec::new(),
            throughput_index: FastMap::default(),
            throughput_width: 0.01,
            throughput_span: (0, 0),
            last_protocol: None,
        }
    }

    /// The protocol of a record (as its `protocol` key names it), and so what its types and commands mean.
    fn protocol_of(&mut self, rec: &Map) -> Option<&'static dyn Protocol> {
        let named = get(rec, "protocol").map(|v| v.as_str().unwrap_or_default());
        if let (Some(last), Some(name)) = (self.last_protocol, named) {
            if last.name() == name {
                return Some(last);
            }
        }
        let protocol = protocols::of_record(named);
        if protocol.is_some() {
            self.last_protocol = protocol;
        }
        protocol
    }

    /// One record: a frame (it has an `index`) or an event.
    pub fn add(&mut self, rec: &Map) {
        let time = number(get(rec, "time"));
        self.origin.get_or_insert(time);
        if has(rec, "index") {
            self.frame(rec, time);
        } else {
            self.event(rec, time);
        }
    }

    /// A producer or consumer came: every table keeps to the smaller share now (an actor that sends nothing
    /// more would otherwise keep what it remembered under the larger one).
    fn actors_changed(&mut self, before: usize) {
        if self.producers.len() + self.consumers.len() == before {
            return;
        }
        let share = self.actor_share();
        for actor in self.producers.values_mut().chain(self.consumers.values_mut()) {
            for table in [&mut actor.waiting, &mut actor.delivered_frames] {
                while table.len() > share {
                    table.pop_oldest();
                }
                table.shrink_if_sparse();
            }
            while actor.entries.len() > share {
                actor.entries.pop_oldest();
            }
            actor.entries.shrink_if_sparse();
        }
    }

    /// What one producer's or consumer's tables may remember: an equal share of the global budget.
    fn actor_share(&self) -> usize {
        let actors = (self.producers.len() + self.consumers.len()).max(1);
        (self.memory_total / actors).clamp(MIN_ACTOR_MEMORY.min(self.actor_memory), self.actor_memory)
    }

    fn conn(&mut self, id: i64, time: f64) -> &mut Conn {
        if !self.conns.contains_key(&id) {
            if self.conns.len() >= self.max_connections.max(1) {
                self.forget_a_connection();
            }
            self.conns.insert(
                id,
                Conn {
                    conn: id,
                    client: Value::Null,
                    broker: Value::Null,
                    first_time: time,
                    last_time: time,
                    frames: [0; 3],
                    bytes: [0; 3],
                    problems: 0,
                    extra: Map::new(),
                    events: Counts::default(),
                    latency: LatencyTable::default(),
                },
            );
        }
        self.conns.get_mut(&id).expect("inserted above")
    }

    /// Room for one more connection: the oldest closed one goes, else the oldest.
    fn forget_a_connection(&mut self) {
        while let Some(id) = self.closed.pop_front() {
            if self.conns.remove(&id).is_some() {
                self.connections_dropped += 1;
                return;
            }
        }
        if self.conns.pop_oldest().is_some() {
            self.connections_dropped += 1;
        }
    }

    fn connection_closed(&mut self, id: i64) {
        self.closed.push_back(id);
        if self.closed.len() > 2 * self.conns.len().max(1024) {
            let conns = &self.conns;
            self.closed.retain(|id| conns.contains_key(id)); // ids already forgotten: amortized, bounded
        }
    }

    fn event(&mut self, rec: &Map, time: f64) {
        let kind = get(rec, "type").and_then(Value::as_str).unwrap_or("");
        self.events.add_str(kind, 1);
        let Some(id) = get(rec, "conn") else { return };
        let id = int(Some(id));
        let empty = Map::new();
        let details = get_map(rec, "details").unwrap_or(&empty);
        if kind != CONNECTION_OPENED && !self.conns.contains_key(&id) && self.connections_dropped > 0 {
            return; // about a connection forgotten at the cap: not brought back to be forgotten again
        }
        let conn = self.conn(id, time);
        match kind {
            CONNECTION_OPENED => {
                conn.client = get(details, "client").cloned().unwrap_or(Value::Null);
                conn.broker = details
                    .iter()
                    .find(|(k, _)| k.as_str() != "client" && k.as_str() != "mid_stream")
                    .map_or(Value::Null, |(_, v)| v.clone());
                let mid_stream = details
                    .iter()
                    .find(|(k, _)| k.as_str() == "mid_stream")
                    .map_or(Value::Bool(false), |(_, v)| v.clone());
                conn.set(crate::name!("mid_stream"), mid_stream);
            }
            CONNECTION_CLOSED => {
                let how = details.iter().find(|(k, _)| k.as_str() == "how").map_or(Value::Null, |(_, v)| v.clone());
                conn.set(crate::name!("closed"), how);
                if let Some((_, by)) = details.iter().find(|(k, _)| k.as_str() == "closed_by") {
                    conn.set(crate::name!("closed_by"), by.clone());
                }
                self.connection_closed(id);
            }
            _ => conn.events.add_str(kind, 1),
        }
    }

    fn frame(&mut self, rec: &Map, time: f64) {
        let kind = get(rec, "type").and_then(Value::as_str).unwrap_or("");
        self.frames += 1;
        self.types.add_str(kind, 1);
        self.first_time.get_or_insert(time);
        self.last_time = Some(time);
        let empty = Map::new();
        let command = get_map(rec, "command").unwrap_or(&empty);
        let direction = get(rec, "direction").and_then(Value::as_str).unwrap_or("");
        let conn_id = int(get(rec, "conn"));
        let protocol = self.protocol_of(rec);
        let role = protocol.and_then(|p| Some((p.stats_role(kind)?, p)));
        let conn = self.conn(conn_id, time);
        conn.last_time = time;
        let side = match direction {
            "to_client" => 1,
            "unknown" => 2,
            _ => 0,
        };
        conn.frames[side] += 1;
        conn.bytes[side] += int(get(rec, "size"));
        if conn.client.is_null() && direction != "unknown" {
            let src = get(rec, "src").cloned().unwrap_or(Value::Null);
            let dst = get(rec, "dst").cloned().unwrap_or(Value::Null);
            (conn.client, conn.broker) = if direction == "to_client" { (dst, src) } else { (src, dst) };
        }
        if let Some((role @ (StatsRole::ConnectRequest | StatsRole::ConnectAnswer), protocol)) = role {
            for (key, value) in protocol.connection_facts(role, command) {
                conn.set(key, value);
            }
        }
        conn.problems += get(rec, "problems").and_then(Value::as_list).map_or(0, |p| p.len() as i64);
        for finding in get(rec, "expert").and_then(Value::as_list).unwrap_or(&[]).iter().filter_map(Value::as_map) {
            let id = python_str(get(finding, "id"));
            if protocol.and_then(|p| p.server_error_finding()) == Some(id.as_str()) {
                self.server_errors.add(error_name(protocol, command), 1);
            }
            self.expert.add((id, python_str(get(finding, "severity"))), 1);
        }
        // a protocol whose session notes a client id on its frames: its clients' figures
        if has(rec, "client_id") {
            if let Some(protocol) = protocol {
                self.client_frame(protocol, rec, kind, command, time, direction == "to_client");
            }
        }
        let producer = get_map(rec, "producer");
        let consumer = get_map(rec, "consumer");
        let actors = self.producers.len() + self.consumers.len();
        if let Some(latency) = get(rec, "latency_ms") {
            let latency = number(Some(latency));
            let request_type =
                get(rec, "request_type").filter(|v| v.truthy()).map_or(kind.to_owned(), |v| python_str(Some(v)));
            let (cap, actor_cap) = (self.latency_samples, self.actor_latency_samples);
            let error = role.is_some_and(|(role, _)| role.answers_with_error());
            // a request refused: its latency apart (`REQUEST→ANSWER`), so a request's percentiles are those of
            // the requests served (a SEND_ERROR's time is not a publish's)
            let latency_kind = if error { refused_kind(&request_type, kind) } else { request_type.clone() };
            self.latency.add(&latency_kind, latency, cap);
            self.plot.add((time, request_type.clone(), latency, error));
            self.conn(conn_id, time).latency.add(&latency_kind, latency, actor_cap);
            // a producer's publish answered: its send latency (accepted, or refused)
            let published = |p: &dyn Protocol| p.stats_role(&request_type) == Some(StatsRole::Publish);
            if let Some(info) = producer.filter(|_| protocol.is_some_and(published)) {
                let actor = actor(&mut self.producers, conn_id, info, false);
                let sample = if error { &mut actor.send_error_latency } else { &mut actor.send_latency };
                sample.get_or_insert_with(|| Latencies::new(actor_cap)).add(latency);
            }
        }
        if let Some(info) = producer {
            self.producer(rec, info, role, conn_id, time, command);
        }
        if let Some(info) = consumer {
            self.consumer(rec, info, role, conn_id, time, command);
        }
        self.actors_changed(actors);
    }

    /// A frame of a client the session named: the client's figures (the client id and group noted on it), and
    /// the messages it carries counted for its topic, sent or received as its protocol says of its type.
    fn client_frame(
        &mut self,
        protocol: &dyn Protocol,
        rec: &Map,
        kind: &str,
        command: &Map,
        time: f64,
        to_client: bool,
    ) {
        let Some(client_id) = get(rec, "client_id").map(|v| python_str(Some(v))) else { return };
        let topic_name = get(rec, "topic").map(|v| python_str(Some(v)));
        let sent = protocol.client_messages(kind);
        let (n, size) = if sent.is_some() { message_totals(rec) } else { (0, 0) };
        if let Some(sent) = sent {
            self.count_throughput(time, to_client, n, size);
            let who = match get(rec, "group") {
                Some(group) if !sent => format!("{client_id}@{}", python_str(Some(group))),
                _ => client_id.clone(),
            };
            self.count_topic(topic_name.clone().unwrap_or_else(|| "?".to_owned()), who, sent, n, size);
        }
        if !self.clients.contains_key(&client_id) {
            if self.clients.len() >= MAX_CLIENTS {
                self.clients.pop_oldest();
                self.clients_dropped += 1;
            }
            self.clients.insert(client_id.clone(), Client::default());
        }
        let Some(client) = self.clients.get_mut(&client_id) else { return };
        client.frames += 1;
        if let Some(group) = get(rec, "group") {
            client.group = Some(group.clone());
        }
        if let Some(topic) = topic_name {
            if client.topics.len() < MAX_CLIENT_TOPICS {
                client.topics.insert(topic);
            }
        }
        match sent {
            Some(true) => {
                (client.messages_sent, client.bytes_sent) = (client.messages_sent + n, client.bytes_sent + size)
            }
            Some(false) => {
                (client.messages_received, client.bytes_received) =
                    (client.messages_received + n, client.bytes_received + size)
            }
            None => {}
        }
        if let Some(error) = protocol.error_of(command) {
            client.errors.add(error, 1);
        }
    }

    fn count_throughput(&mut self, time: f64, to_client: bool, n: i64, size: i64) {
        let mut slot = (time / self.throughput_width) as i64;
        let i = match self.throughput_index.get(&slot) {
            Some(&i) => i,
            None => {
                while !self.throughput.is_empty()
                    && slot.max(self.throughput_span.1) - slot.min(self.throughput_span.0) >= THROUGHPUT_BUCKETS
                {
                    self.halve_throughput();
                    slot = (time / self.throughput_width) as i64;
                }
                let i = match self.throughput_index.get(&slot) {
                    Some(&i) => i,
                    None => {
                        self.throughput.push((slot, [0; 4]));
                        self.throughput_index.insert(slot, self.throughput.len() - 1);
                        self.throughput.len() - 1
                    }
                };
                self.throughput_span = if self.throughput.len() > 1 {
                    (self.throughput_span.0.min(slot), self.throughput_span.1.max(slot))
                } else {
                    (slot, slot)
                };
                i
            }
        };
        let base = if to_client { 2 } else { 0 };
        self.throughput[i].1[base] += n;
        self.throughput[i].1[base + 1] += size;
    }

    /// Buckets twice as wide: each pair of neighbours becomes one (in the order the merged ones were made).
    fn halve_throughput(&mut self) {
        let old = std::mem::take(&mut self.throughput);
        self.throughput_index.clear();
        for (slot, counts) in old {
            let merged = slot.div_euclid(2);
            match self.throughput_index.get(&merged) {
                Some(&i) => (0..4).for_each(|k| self.throughput[i].1[k] += counts[k]),
                None => {
                    self.throughput.push((merged, counts));
                    self.throughput_index.insert(merged, self.throughput.len() - 1);
                }
            }
        }
        self.throughput_width *= 2.0;
        self.throughput_span = (self.throughput_span.0.div_euclid(2), self.throughput_span.1.div_euclid(2));
    }

    /// The topic of a producer or consumer (`?` when it names none).
    fn topic_of(&mut self, info: &Map) -> &mut Topic {
        self.topics.entry(topic_name(info)).or_default()
    }

    /// Messages and bytes of one publish (`sent`) or delivery (not `sent`) for its actor and topic.
    fn count_messages(&mut self, rec: &Map, info: &Map, sent: bool, time: f64, to_client: bool) -> (i64, i64) {
        let topic_name = topic_name(info);
        let who = get(info, "name")
            .filter(|v| v.truthy())
            .map_or_else(|| python_str(get(info, "id")), |v| python_str(Some(v)));
        let (n, size) = message_totals(rec);
        self.count_throughput(time, to_client, n, size);
        self.count_topic(topic_name, who, sent, n, size);
        (n, size)
    }

    /// `n` messages of `size` bytes sent (or received) on a topic by `who`.
    fn count_topic(&mut self, topic_name: String, who: String, sent: bool, n: i64, size: i64) {
        let topic = self.topics.entry(topic_name).or_default();
        if sent {
            topic.producers.insert(who);
            topic.messages_sent += n;
            topic.bytes_sent += size;
        } else {
            topic.consumers.insert(who);
            topic.messages_received += n;
            topic.bytes_received += size;
        }
    }

    /// A frame noting its producer: what it published and how the server answered, as its role says.
    fn producer(&mut self, rec: &Map, info: &Map, role: Option<Role>, conn: i64, time: f64, command: &Map) {
        let to_client = get(rec, "direction").and_then(Value::as_str) == Some("to_client");
        match role {
            Some((StatsRole::Publish, protocol)) if has(rec, "payload_size") => {
                let (n, size) = self.count_messages(rec, info, true, time, to_client);
                let (actor_memory, chunk_memory) = (self.actor_share(), self.chunk_memory);
                let actor = actor(&mut self.producers, conn, info, true);
                actor.messages += n;
                actor.payload_bytes += size;
                actor.wire_bytes += int(get(rec, "payload_size"));
                remember_within(&mut actor.waiting, int(get(rec, "index")), n, actor_memory);
                let mut facts = protocol.publish_facts(rec);
                if let Some(batched) = facts.batched_messages {
                    actor.batches += 1;
                    actor.batched_messages += batched;
                }
                if let Some(codec) = facts.codec.take() {
                    actor.compression.add(codec, 1);
                    actor.count_compressed(rec, facts, chunk_memory);
                }
            }
            Some((StatsRole::PublishAccepted, _)) => {
                let actor = actor(&mut self.producers, conn, info, true);
                actor.receipts += 1;
                let n = answered(&mut actor.waiting, rec);
                actor.accepted += n;
                self.topic_of(info).messages_accepted += n;
            }
            Some((StatsRole::PublishRefused, protocol)) => {
                let actor = actor(&mut self.producers, conn, info, true);
                actor.errors.add(error_name(Some(protocol), command), 1);
                let n = answered(&mut actor.waiting, rec);
                actor.rejected += n;
                self.topic_of(info).messages_rejected += n;
            }
            _ => {
                actor(&mut self.producers, conn, info, true);
            }
        }
    }

    /// A frame noting its consumer: what was delivered to it, what it acknowledged and allowed, as its role says.
    fn consumer(&mut self, rec: &Map, info: &Map, role: Option<Role>, conn: i64, time: f64, command: &Map) {
        let to_client = get(rec, "direction").and_then(Value::as_str) == Some("to_client");
        match role {
            Some((StatsRole::Delivery, protocol)) if has(rec, "payload_size") => {
                let (n, size) = self.count_messages(rec, info, false, time, to_client);
                let actor_memory = self.actor_share();
                let actor = actor(&mut self.consumers, conn, info, true);
                actor.messages += n;
                actor.payload_bytes += size;
                actor.wire_bytes += int(get(rec, "payload_size"));
                let delivered = protocol.delivered(command);
                match delivered.entry {
                    Some(entry) => {
                        if !actor.entries.contains_key(&entry) {
                            actor.distinct += n;
                        }
                        remember_within(&mut actor.entries, entry, n, actor_memory);
                    }
                    None => actor.distinct += n,
                }
                remember_within(&mut actor.delivered_frames, int(get(rec, "index")), n, actor_memory);
                if has(rec, "delivery") || delivered.redelivered {
                    actor.redeliveries += 1; // as message.redelivered says
                }
            }
            Some((StatsRole::Ack, _)) => {
                let actor = actor(&mut self.consumers, conn, info, true);
                actor.acks += 1;
                for index in get(rec, "acks").and_then(Value::as_list).unwrap_or(&[]) {
                    actor.acked += actor.delivered_frames.remove(&int(Some(index))).unwrap_or(0);
                }
                for index in get(rec, "discards").and_then(Value::as_list).unwrap_or(&[]) {
                    actor.discarded += actor.delivered_frames.remove(&int(Some(index))).unwrap_or(0);
                }
            }
            Some((StatsRole::Permits, protocol)) => {
                let actor = actor(&mut self.consumers, conn, info, true);
                actor.permits += protocol.permits_of(command);
            }
            _ => {
                actor(&mut self.consumers, conn, info, true);
            }
        }
    }
}

/// Insert; then forget the oldest entries beyond `cap` (a share that shrinks as producers and consumers come).
fn remember_within<K: std::hash::Hash + Eq + Clone, V>(table: &mut OrderedMap<K, V>, key: K, value: V, cap: usize) {
    table.insert(key, value);
    if table.len() > cap {
        while table.len() > cap {
            table.pop_oldest();
        }
        table.shrink_if_sparse(); // a share that shrank as producers and consumers came
    }
}

/// The actor of a frame (made on its first frame; its info replaced by the latest view, a name learnt later);
/// `count`: the frame counts as one of its frames.
fn actor<'a>(table: &'a mut OrderedMap<(i64, i64), Actor>, conn: i64, info: &Map, count: bool) -> &'a mut Actor {
    let key = (conn, get(info, "id").map_or(-1, |v| int(Some(v))));
    match table.get_mut(&key) {
        Some(actor) if actor.info != *info => actor.info = info.clone(),
        Some(_) => {} // the same view: most frames (a copy each would be most of this function's time)
        None => table.insert(key, Actor::new(info.clone())),
    }
    let actor = table.get_mut(&key).expect("inserted above");
    if count {
        actor.frames += 1;
    }
    actor
}

/// The messages of the publish an answer (accepting or refusing it) answers, no longer waiting.
fn topic_name(info: &Map) -> String {
    get(info, "topic").filter(|v| v.truthy()).map_or("?".to_owned(), |v| python_str(Some(v)))
}

fn answered(waiting: &mut OrderedMap<i64, i64>, rec: &Map) -> i64 {
    match get(rec, "answers") {
        Some(index) => waiting.remove(&int(Some(index))).unwrap_or(0),
        None => 0,
    }
}
