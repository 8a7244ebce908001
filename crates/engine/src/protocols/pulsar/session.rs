//! Pulsar conversation state for one connection: producers, consumers, flow permits, acknowledgements,
//! sequence ids, redeliveries and chunked messages.
//!
//! The generic pairing (`analysis`) has already matched the frame with the request it answers; this adds what
//! only Pulsar knows, as notes and findings of the frame being processed. Nothing here edits a frame, and what
//! is remembered about an earlier frame is a few ids, never its payload.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use super::chunks::{Chunk, ChunkAssembler, ChunkMetadata, ChunkSource, CLIENT_EXPIRE_S, CLIENT_MAX_PENDING};
use super::payload::{Checksum, PayloadSection};
use super::problems::PulsarProblem;
use crate::analysis::bounded::{remember_bounded, DropCounter, FastMap, OrderedMap};
use crate::analysis::table::{Actor, CommandSpec};
use crate::analysis::{map_get, Event, Frame, Ident, Session, Sessions, Waiting, TO_CLIENT};
use crate::model::Finding;
use crate::protocols::protocol::Limits;
use crate::value::{entry, Map, Name, Text, Value};
use crate::{finding, name};

/// The value of the cap named `option` (as the STATE_DROPPED events name it).
fn limit(limits: &Limits, option: &Name) -> u64 {
    match option.as_str() {
        "max_actors" => limits.max_actors as u64,
        "max_remembered_messages" => limits.max_remembered_messages as u64,
        "max_remembered_total" => limits.max_remembered_total as u64,
        _ => 0,
    }
}

const BUDGET_EVERY: u64 = 1024; // deliveries between two looks at the global budget (each adds up to 2 ids)
const EXCLUSIVE: [&str; 3] = ["Exclusive", "WaitForExclusive", "ExclusiveWithFencing"];
const LINKS_SHOWN: usize = 100; // frame indexes a record lists at most (the count says how many in all)
const FRAMES_KEPT: usize = 20; // deliveries of one message remembered for its REDELIVERED warning (the count is exact)
                               // delivered-table values: the delivery count above, the first delivery's frame below
const COUNT_SHIFT: u32 = 48;
const FRAME_MASK: u64 = (1 << COUNT_SHIFT) - 1;

/// One int per (ledger, entry), ordered as the pair.
type EntryKey = u128;

fn entry_key(ledger: &Value, entry: &Value) -> EntryKey {
    (as_u64_wrapping(ledger) as u128) << 64 | as_u64_wrapping(entry) as u128
}

fn as_u64_wrapping(value: &Value) -> u64 {
    match value {
        Value::Int(v) => *v as u64,
        Value::UInt(v) => *v,
        _ => 0,
    }
}

/// The message ids a consumer remembers (delivered: first frame and count packed; unacked: the latest
/// delivery's frame), held to the global budget through the shared state.
#[derive(Default)]
struct Remembered {
    delivered: OrderedMap<EntryKey, u64>,
    unacked: OrderedMap<EntryKey, u64>,
}

impl Remembered {
    fn len(&self) -> usize {
        self.delivered.len() + self.unacked.len()
    }
}

/// The deliveries of one message seen more than once: the first frames (capped) and how many in all.
struct Repeat {
    frames: Vec<u64>,
    redelivery_count: i64,
    count: u64,
}

struct Consumer {
    id: Value,
    info: Map,     // replaced, never edited: records that carry it must not change afterwards
    durable: bool, // a reader's subscription is not: it never acknowledges, by design
    permits: i64,
    flow_seen: bool,
    remembered: Rc<RefCell<Remembered>>,
    repeated: OrderedMap<EntryKey, Repeat>,
    asked: OrderedMap<EntryKey, u64>, // key -> REDELIVER frame that named it
    asked_all: Option<u64>,           // the last REDELIVER that asked for every unacknowledged message
    more_messages: u64, // messages repeated beyond max_redelivered_reported, and their repeated deliveries
    more_deliveries: u64,
    /// The connection its subscription (topic, subscription and consumer name) was last subscribed on before,
    /// when another: a message it gets again may be one the broker redelivers because the client reconnected.
    resubscribed_from: Option<u64>,
}

impl Consumer {
    fn name(&self) -> Value {
        map_get(&self.info, "name").cloned().unwrap_or(Value::Null)
    }

    fn subscription(&self) -> (Ident, Ident) {
        (Ident::of(map_get(&self.info, "topic")), Ident::of(map_get(&self.info, "subscription")))
    }

    /// The MESSAGE frames delivered and neither acknowledged nor handed back: a REDELIVER of every
    /// unacknowledged message hands back those delivered before it (the broker delivers them again).
    fn held(&self) -> Vec<u64> {
        let remembered = self.remembered.borrow();
        let after = self.asked_all.unwrap_or(0);
        remembered.unacked.values().copied().filter(|&frame| frame > after).collect()
    }

    /// `consumer.unacked`'s parameters (and `UNACKED_AT_END`'s details), for the consumer named `id`.
    fn unacked_params(&self, id: Value) -> Map {
        let held = self.held();
        let frames: Vec<Value> = held.iter().take(20).map(|&f| Value::from(f)).collect();
        vec![
            entry(name!("consumer_id"), id),
            entry(name!("name"), self.name()),
            entry(name!("count"), held.len()),
            entry(name!("frames"), Value::List(frames)),
        ]
    }
}

/// What made the broker deliver a message again (`message.redelivered`'s `cause`), as the wire shows it.
#[derive(Clone, Copy)]
enum RedeliveryCause {
    /// A REDELIVER_UNACKNOWLEDGED_MESSAGES naming it: a negative ack or an ack timeout (the same command).
    Request,
    /// A REDELIVER_UNACKNOWLEDGED_MESSAGES naming no message: every unacknowledged one.
    All,
    /// Its subscription was subscribed again on another connection.
    Reconnection,
    /// Nothing in the capture says.
    Unknown,
}

impl RedeliveryCause {
    /// Its stable id, as the finding's `cause` carries it.
    fn id(self) -> Value {
        Value::Str(Text::Name(match self {
            RedeliveryCause::Request => name!("redeliver_request"),
            RedeliveryCause::All => name!("redeliver_all"),
            RedeliveryCause::Reconnection => name!("reconnection"),
            RedeliveryCause::Unknown => name!("unknown"),
        }))
    }
}

struct Producer {
    info: Map,
    last_sequence_id: Option<i128>,
}

/// The producers holding a topic: ((connection, producer id), info), in the order they got it.
type Holders = Vec<((u64, Ident), Map)>;

/// What Pulsar's analysis knows across connections: the producers that hold each topic (a broker's Exclusive
/// guarantee spans every client), and the message ids every consumer remembers, held to one budget.
pub struct SharedState {
    cap: usize,
    topic_producers: OrderedMap<Ident, Holders>, // topic -> its producers
    budget: usize,
    tables: Vec<Weak<RefCell<Remembered>>>, // every consumer's ids, while the consumer lives
    deliveries: u64,
    /// (topic, subscription) -> the Exclusive consumer holding it: (connection, consumer id), its info
    exclusive_holders: OrderedMap<(Ident, Ident), ((u64, Ident), Map)>,
    /// (topic, subscription, consumer name) -> the connection that subscribed it last
    subscribed_on: OrderedMap<(Ident, Ident, Ident), u64>,
    /// bytes of compressed chunks held over every connection (each session's assembler adds and releases)
    chunk_bytes: Rc<Cell<u64>>,
}

impl SharedState {
    fn new(options: &Limits) -> SharedState {
        SharedState {
            cap: options.max_actors,
            topic_producers: OrderedMap::new(),
            budget: options.max_remembered_total,
            tables: Vec::new(),
            deliveries: 0,
            exclusive_holders: OrderedMap::new(),
            subscribed_on: OrderedMap::new(),
            chunk_bytes: Rc::new(Cell::new(0)),
        }
    }

    fn live_tables(&mut self) -> Vec<Rc<RefCell<Remembered>>> {
        self.tables.retain(|t| t.strong_count() > 0);
        self.tables.iter().filter_map(Weak::upgrade).collect()
    }

    fn remembered(&mut self) -> usize {
        self.live_tables().iter().map(|t| t.borrow().len()).sum()
    }

    /// Every BUDGET_EVERY deliveries: how many remembered ids are over the budget (0 if none).
    fn over_budget(&mut self) -> usize {
        self.deliveries += 1;
        if !self.deliveries.is_multiple_of(BUDGET_EVERY) {
            return 0;
        }
        self.remembered().saturating_sub(self.budget)
    }

    /// Forget the oldest ids of the consumers that remember the most (delivered ids before unacknowledged
    /// ones) until `excess` are gone, with some room to spare.
    fn shrink(&mut self, excess: usize) {
        let target = excess + self.budget / 16;
        let mut forgotten = 0;
        let tables = self.live_tables();
        while forgotten < target && !tables.is_empty() {
            // the first of the largest, as Python's max()
            let mut largest = &tables[0];
            for table in &tables[1..] {
                if table.borrow().len() > largest.borrow().len() {
                    largest = table;
                }
            }
            let mut largest = largest.borrow_mut();
            let remembered = &mut *largest;
            let table =
                if !remembered.delivered.is_empty() { &mut remembered.delivered } else { &mut remembered.unacked };
            if table.is_empty() {
                break;
            }
            for _ in 0..table.len().min(target - forgotten).min(BUDGET_EVERY as usize) {
                table.pop_oldest();
                forgotten += 1;
            }
            table.shrink_if_sparse();
        }
    }

    /// A producer got its PRODUCER_SUCCESS: the producers it now shares an exclusive topic with.
    fn producer_ready(&mut self, conn: u64, info: &Map) -> Holders {
        let topic = Ident::of(map_get(info, "topic"));
        let mut held = self.topic_producers.remove(&topic).unwrap_or_default();
        let mode = access_mode(info);
        if mode == "ExclusiveWithFencing" {
            held.clear(); // it fences the others out: the broker closes them
        }
        let conflicts = held
            .iter()
            .filter(|(_, other)| EXCLUSIVE.contains(&mode) || EXCLUSIVE.contains(&access_mode(other)))
            .cloned()
            .collect();
        let key = (conn, Ident::of(map_get(info, "id")));
        match held.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = info.clone(),
            None => held.push((key, info.clone())),
        }
        remember_bounded(&mut self.topic_producers, topic, held, self.cap); // most recently used last
        conflicts
    }

    /// A SUBSCRIBE: the connection its subscription was subscribed on before, when another (a reconnection).
    fn subscribing(&mut self, conn: u64, info: &Map) -> Option<u64> {
        let key = (
            Ident::of(map_get(info, "topic")),
            Ident::of(map_get(info, "subscription")),
            Ident::of(map_get(info, "name")),
        );
        let before = self.subscribed_on.get(&key).copied().filter(|&c| c != conn);
        remember_bounded(&mut self.subscribed_on, key, conn, self.cap);
        before
    }

    /// The Exclusive consumer holding a subscription, other than `me` (connection, consumer id).
    fn exclusive_holder(&self, me: &(u64, Ident), info: &Map) -> Option<&((u64, Ident), Map)> {
        let key = (Ident::of(map_get(info, "topic")), Ident::of(map_get(info, "subscription")));
        self.exclusive_holders.get(&key).filter(|(holder, _)| holder != me)
    }

    /// A consumer's SUBSCRIBE succeeded: an Exclusive one now holds its subscription.
    fn consumer_ready(&mut self, me: (u64, Ident), info: &Map) {
        if map_get(info, "type").and_then(Value::as_str) == Some("Exclusive") {
            let key = (Ident::of(map_get(info, "topic")), Ident::of(map_get(info, "subscription")));
            remember_bounded(&mut self.exclusive_holders, key, (me, info.clone()), self.cap);
        }
    }

    fn consumer_gone(&mut self, me: &(u64, Ident)) {
        let held: Vec<(Ident, Ident)> =
            self.exclusive_holders.iter().filter(|(_, (holder, _))| holder == me).map(|(k, _)| k.clone()).collect();
        for key in held {
            self.exclusive_holders.remove(&key);
        }
    }

    fn producer_gone(&mut self, conn: u64, ident: &Ident) {
        let topics: Vec<Ident> = self.topic_producers.keys().cloned().collect();
        for topic in topics {
            if let Some(held) = self.topic_producers.get_mut(&topic) {
                if let Some(at) = held.iter().position(|((c, i), _)| *c == conn && i == ident) {
                    held.remove(at);
                    return;
                }
            }
        }
    }

    fn connection_gone(&mut self, conn: u64) {
        let held: Vec<(Ident, Ident)> =
            self.exclusive_holders.iter().filter(|(_, ((c, _), _))| *c == conn).map(|(k, _)| k.clone()).collect();
        for key in held {
            self.exclusive_holders.remove(&key);
        }
        let topics: Vec<Ident> = self.topic_producers.keys().cloned().collect();
        for topic in topics {
            if let Some(held) = self.topic_producers.get_mut(&topic) {
                held.retain(|((c, _), _)| *c != conn);
            }
        }
    }
}

fn access_mode(info: &Map) -> &str {
    map_get(info, "access_mode").and_then(Value::as_str).unwrap_or("Shared")
}

/// Pulsar's sessions of one analysis, and their shared state.
pub struct PulsarSessions {
    options: Rc<Limits>,
    shared: Rc<RefCell<SharedState>>,
}

impl PulsarSessions {
    pub fn new(options: Limits) -> PulsarSessions {
        let shared = Rc::new(RefCell::new(SharedState::new(&options)));
        PulsarSessions { options: Rc::new(options), shared }
    }
}

impl Sessions for PulsarSessions {
    fn open(&mut self, conn: u64, mid_stream: bool) -> Box<dyn Session> {
        Box::new(PulsarSession::new(self.options.clone(), conn, mid_stream, self.shared.clone()))
    }

    fn sizes(&self) -> Map {
        vec![entry(name!("remembered"), self.shared.borrow_mut().remembered())]
    }
}

pub struct PulsarSession {
    options: Rc<Limits>,
    conn: u64,
    shared: Rc<RefCell<SharedState>>,
    seeks: FastMap<(Ident, Ident), u64>, // (topic, subscription) -> SEEK frame whose first delivery is still to come
    mid_stream: bool,
    producers: OrderedMap<Ident, Producer>,
    consumers: OrderedMap<Ident, Consumer>,
    redirects: FastMap<Ident, u64>,          // topic -> lookups redirected
    closed: OrderedMap<(Actor, Ident), Map>, // closed actors -> their info
    /// SUBSCRIBEs waiting for their answer while another consumer holds the subscription Exclusive: consumer id
    /// -> `subscribe.exclusive_held`'s parameters
    held_subscribes: OrderedMap<Ident, Map>,
    chunks: ChunkAssembler,
    drops: DropCounter,
    /// The client's version when it is one that rejects a MESSAGE without the magic number and CRC32C (which
    /// are optional on the wire); None once that was said.
    needs_checksum: Option<Value>,
}

/// Clients that fail to decode a MESSAGE without the optional magic number and CRC32C and drop the
/// connection (pulsar-rs 6.9.1 does, `CONNECT.client_version` "pulsar-rs-v6.9.1").
const CLIENTS_NEEDING_CHECKSUMS: [&str; 1] = ["pulsar-rs"];

/// Insert or replace a note (a dict's assignment).
fn set_note(notes: &mut Map, key: &'static Name, value: impl Into<Value>) {
    let value = value.into();
    match notes.iter_mut().find(|(k, _)| k.as_str() == key.as_str()) {
        Some(slot) => slot.1 = value,
        None => notes.push(entry(key, value)),
    }
}

fn field<'c>(command: &'c Value, key: &str) -> Option<&'c Value> {
    command.get(key)
}

fn field_or_null(command: &Value, key: &str) -> Value {
    command.get(key).cloned().unwrap_or(Value::Null)
}

fn int_field(command: &Value, key: &str, default: i128) -> i128 {
    match command.get(key) {
        Some(Value::Int(v)) => *v as i128,
        Some(Value::UInt(v)) => *v as i128,
        Some(Value::Bool(b)) => *b as i128,
        _ => default,
    }
}

fn int_value(v: i128) -> Value {
    Ident::Int(v).to_value()
}

impl PulsarSession {
    fn new(options: Rc<Limits>, conn: u64, mid_stream: bool, shared: Rc<RefCell<SharedState>>) -> PulsarSession {
        let chunks = ChunkAssembler::new(
            options.max_decompressed,
            options.max_chunked_messages,
            Some(options.max_chunk_bytes),
            Some(mid_stream),
            CLIENT_MAX_PENDING,
            CLIENT_EXPIRE_S,
        )
        .sharing(shared.borrow().chunk_bytes.clone(), options.max_chunk_bytes_total)
        .budgeted(&options.memory_budget);
        PulsarSession {
            options,
            conn,
            shared,
            seeks: FastMap::default(),
            mid_stream,
            producers: OrderedMap::new(),
            consumers: OrderedMap::new(),
            redirects: FastMap::default(),
            closed: OrderedMap::new(),
            held_subscribes: OrderedMap::new(),
            chunks,
            drops: DropCounter::new(conn),
            needs_checksum: None,
        }
    }

    fn dropped(&mut self, frame: &Frame, option: &'static Name, what: &'static Name, events: &mut Vec<Event>) {
        if let Some(event) = self.drops.drop(option, what, limit(&self.options, option), frame.time, frame.packet) {
            events.push(event);
        }
    }

    // ---------------------------------------------------------------------------------------------- actors

    fn new_producer(&mut self, frame: &Frame, cmd: &Value, events: &mut Vec<Event>) {
        let id = field_or_null(cmd, "producer_id");
        let mut info = vec![entry(name!("id"), id.clone()), entry(name!("topic"), field_or_null(cmd, "topic"))];
        if let Some(name) = field(cmd, "producer_name") {
            info.push(entry(name!("name"), name.clone()));
        }
        if let Some(mode) = field(cmd, "producer_access_mode") {
            info.push(entry(name!("access_mode"), mode.clone()));
        }
        let producer = Producer { info, last_sequence_id: None };
        if remember_bounded(&mut self.producers, Ident::of(Some(&id)), producer, self.options.max_actors) {
            self.dropped(frame, name!("max_actors"), name!("producers"), events);
        }
    }

    fn new_consumer(&mut self, frame: &Frame, cmd: &Value, events: &mut Vec<Event>) {
        let id = field_or_null(cmd, "consumer_id");
        let mut info = vec![
            entry(name!("id"), id.clone()),
            entry(name!("topic"), field_or_null(cmd, "topic")),
            entry(name!("subscription"), field_or_null(cmd, "subscription")),
            entry(name!("type"), field_or_null(cmd, "subType")),
        ];
        if let Some(name) = field(cmd, "consumer_name") {
            info.push(entry(name!("name"), name.clone()));
        }
        let remembered = Rc::new(RefCell::new(Remembered::default()));
        let mut shared = self.shared.borrow_mut();
        shared.tables.push(Rc::downgrade(&remembered));
        let resubscribed_from = shared.subscribing(self.conn, &info);
        // another consumer holds the subscription Exclusive: the broker refuses this one (ConsumerBusy) or
        // leaves it unanswered, whatever its own type; said when its answer says which (a success: the broker
        // had let go of the holder unseen)
        if let Some(((other_conn, other_id), other)) =
            shared.exclusive_holder(&(self.conn, Ident::of(Some(&id))), &info)
        {
            let params = vec![
                entry(name!("subscribe_frame"), frame.index),
                entry(name!("topic"), field_or_null(cmd, "topic")),
                entry(name!("subscription"), field_or_null(cmd, "subscription")),
                entry(name!("type"), field_or_null(cmd, "subType")),
                entry(name!("other_conn"), *other_conn),
                entry(name!("other_consumer_id"), other_id.to_value()),
                entry(name!("other_name"), map_get(other, "name").cloned().unwrap_or(Value::Null)),
            ];
            remember_bounded(&mut self.held_subscribes, Ident::of(Some(&id)), params, self.options.max_actors);
        }
        drop(shared);
        let consumer = Consumer {
            id: id.clone(),
            info,
            durable: field(cmd, "durable") != Some(&Value::Bool(false)),
            permits: 0,
            flow_seen: false,
            remembered,
            repeated: OrderedMap::new(),
            asked: OrderedMap::new(),
            asked_all: None,
            more_messages: 0,
            more_deliveries: 0,
            resubscribed_from,
        };
        if remember_bounded(&mut self.consumers, Ident::of(Some(&id)), consumer, self.options.max_actors) {
            self.dropped(frame, name!("max_actors"), name!("consumers"), events);
        }
    }

    fn learn(&mut self, t: &str, cmd: &Value, request: &Waiting, findings: &mut Vec<Finding>) {
        let request_type = request.type_name.as_str();
        if t == "PRODUCER_SUCCESS" && request_type == "PRODUCER" {
            // The broker names anonymous producers in PRODUCER_SUCCESS.
            let ident = Ident::of(map_get(&request.kept, "producer_id"));
            let Some(producer) = self.producers.get_mut(&ident) else { return };
            if map_get(&producer.info, "name").is_none() {
                if let Some(name) = field(cmd, "producer_name") {
                    let mut info = producer.info.clone();
                    info.push(entry(name!("name"), name.clone()));
                    producer.info = info;
                }
            }
            if field(cmd, "producer_ready") != Some(&Value::Bool(false)) {
                // not the interim answer of WaitForExclusive
                let info = &producer.info;
                let conflicts = self.shared.borrow_mut().producer_ready(self.conn, info);
                for ((conn, other_id), other) in conflicts {
                    findings.push(finding!(PulsarProblem::ProducerExclusiveConflict,
                        "topic" => map_get(info, "topic").cloned().unwrap_or(Value::Null),
                        "mode" => access_mode(info).to_owned(),
                        "other_conn" => conn,
                        "other_producer_id" => other_id.to_value(),
                        "other_name" => map_get(&other, "name").cloned().unwrap_or(Value::Null),
                        "other_mode" => access_mode(&other).to_owned()));
                }
            }
        } else if request_type == "SUBSCRIBE" {
            let ident = Ident::of(map_get(&request.kept, "consumer_id"));
            let held = self.held_subscribes.remove(&ident);
            if t == "SUCCESS" {
                if let Some(consumer) = self.consumers.get(&ident) {
                    self.shared.borrow_mut().consumer_ready((self.conn, ident), &consumer.info);
                }
            } else if let (Some(mut params), "ERROR") = (held, t) {
                params.push(entry(name!("error"), field_or_null(cmd, "error")));
                findings.push(Finding { id: PulsarProblem::SubscribeExclusiveHeld.name(), params });
            }
        } else if t == "LOOKUP_RESPONSE"
            && request_type == "LOOKUP"
            && field(cmd, "response").and_then(Value::as_str) == Some("Redirect")
        {
            let topic = map_get(&request.kept, "topic").cloned().unwrap_or(Value::Null);
            let count = self.redirects.entry(Ident::of(Some(&topic))).or_insert(0);
            *count += 1;
            if *count == self.options.redirect_loop_limit {
                findings.push(finding!(PulsarProblem::LookupRedirectLoop, "topic" => topic, "limit" => *count));
            }
        }
    }

    /// The actor is gone: later frames about it are a client bug; messages it never acked and messages
    /// delivered more than once are said now.
    /// `backlog_matters`: false when the subscription went with the consumer (UNSUBSCRIBE): what it left
    /// unacknowledged is no one's any more.
    fn on_close(
        &mut self,
        frame: &Frame,
        scope: Actor,
        cmd: &Value,
        backlog_matters: bool,
        findings: &mut Vec<Finding>,
        events: &mut Vec<Event>,
    ) {
        let id_field = if scope == Actor::Producer { "producer_id" } else { "consumer_id" };
        let id = field_or_null(cmd, id_field);
        let ident = Ident::of(Some(&id));
        match scope {
            Actor::Producer => {
                let Some(producer) = self.producers.remove(&ident) else { return };
                remember_bounded(&mut self.closed, (scope, ident.clone()), producer.info, self.options.max_actors);
                self.shared.borrow_mut().producer_gone(self.conn, &ident);
            }
            Actor::Consumer => {
                let Some(mut consumer) = self.consumers.remove(&ident) else { return };
                self.shared.borrow_mut().consumer_gone(&(self.conn, ident.clone()));
                remember_bounded(&mut self.closed, (scope, ident), consumer.info.clone(), self.options.max_actors);
                if backlog_matters && !consumer.held().is_empty() && consumer.durable {
                    let params = consumer.unacked_params(id.clone()); // the id as this frame names it
                    findings.push(Finding { id: PulsarProblem::ConsumerUnacked.name(), params });
                }
                self.repeated(&id, &mut consumer, frame.time, frame.packet, events);
            }
        }
    }

    /// One REDELIVERED warning per message this consumer got more than once (or flagged as redelivered).
    fn repeated(&self, id: &Value, consumer: &mut Consumer, time: f64, packet: u64, events: &mut Vec<Event>) {
        for (key, repeat) in consumer.repeated.iter() {
            let details = vec![
                entry(name!("consumer_id"), id.clone()),
                entry(name!("name"), consumer.name()),
                entry(name!("ledger"), (key >> 64) as u64),
                entry(name!("entry"), *key as u64 as i64),
                entry(name!("count"), repeat.count),
                entry(name!("frames"), Value::List(repeat.frames.iter().map(|&f| Value::from(f)).collect())),
                entry(name!("redelivery_count"), repeat.redelivery_count),
            ];
            events.push(Event::new(name!("REDELIVERED"), time, packet, Some(self.conn), details));
        }
        if consumer.more_messages > 0 {
            // one line for the rest: a warning per message would flood
            let details = vec![
                entry(name!("consumer_id"), id.clone()),
                entry(name!("name"), consumer.name()),
                entry(name!("more_messages"), consumer.more_messages),
                entry(name!("count"), consumer.more_deliveries),
            ];
            events.push(Event::new(name!("REDELIVERED"), time, packet, Some(self.conn), details));
        }
        consumer.repeated.clear();
        consumer.more_messages = 0;
        consumer.more_deliveries = 0;
    }

    // ------------------------------------------------------------------------------------------- producers

    fn on_send(&mut self, cmd: &Value, body: Option<&PayloadSection>, findings: &mut Vec<Finding>) {
        let pid = field_or_null(cmd, "producer_id");
        let ident = Ident::of(Some(&pid));
        let Some(producer) = self.producers.get_mut(&ident) else {
            if !self.mid_stream && !self.closed.contains_key(&(Actor::Producer, ident)) {
                // after a close: said already
                findings.push(finding!(PulsarProblem::SendUnknownProducer, "producer_id" => pid));
            }
            return;
        };
        let first = int_field(cmd, "sequence_id", 0);
        // the last sequence id the SEND covers, only as the frame says it: highest_sequence_id (Java), the
        // batch's entries' own ids (C++), else the one id of the SEND (a single message, or a batch whose
        // entries carry none, as pulsar-rs sends); unknown when the batch could not be read
        let batched = int_field(cmd, "num_messages", 1) > 1
            || body.and_then(|b| b.metadata.as_ref()).is_some_and(|md| md.get("num_messages_in_batch").is_some());
        let last = match field(cmd, "highest_sequence_id") {
            Some(_) => Some(int_field(cmd, "highest_sequence_id", 0)),
            None if !batched => Some(first),
            None => {
                body.and_then(|b| b.batch_sequence_ids).map(|highest| highest.map_or(first, |h| (h as i128).max(first)))
            }
        };
        let previous = producer.last_sequence_id;
        if let Some(previous) = previous {
            let chunk_again = field(cmd, "is_chunk").is_some_and(Value::truthy) && first == previous;
            if !chunk_again {
                if first <= previous {
                    // A note, not a warning: an explicit sequence_id set by the application is legitimate.
                    findings.push(finding!(PulsarProblem::SequenceRegression, "first" => int_value(first),
                        "previous" => int_value(previous), "producer_id" => pid,
                        "name" => map_get(&producer.info, "name").cloned().unwrap_or(Value::Null)));
                } else if first > previous + 1 {
                    findings.push(finding!(PulsarProblem::SequenceGap, "first" => int_value(first),
                                       "previous" => int_value(previous)));
                }
            }
        }
        // a range not known: the next SEND is not judged against a guess
        producer.last_sequence_id = last.map(|last| last.max(previous.unwrap_or(last)));
    }

    fn add_chunk(&mut self, frame: &Frame, cmd: &Value, notes: &mut Map, findings: &mut Vec<Finding>) {
        let Some(body) = frame.pdu.payload() else { return };
        let Some(first) = body.messages.first() else { return };
        let actor_field = if frame.pdu.type_name.as_str() == "SEND" { "producer_id" } else { "consumer_id" };
        let source = ChunkSource { direction: frame.direction.to_owned(), actor: Ident::of(field(cmd, actor_field)) };
        let empty = Map::new();
        let metadata = body.metadata.as_ref().and_then(Value::as_map).unwrap_or(&empty);
        let chunk = Chunk {
            frame: frame.index,
            metadata: ChunkMetadata::new(metadata),
            compression: body.compression,
            payload: first.get("payload").and_then(Value::as_bytes),
            time: Some(frame.time),
            bad_checksum: body.checksum == Checksum::Invalid,
        };
        if let Some(whole) = self.chunks.add(&source, &chunk, findings) {
            set_note(notes, name!("reassembled"), Value::Map(whole));
        }
    }

    // ------------------------------------------------------------------------------------------- consumers

    fn on_message(
        &mut self,
        frame: &Frame,
        cmd: &Value,
        notes: &mut Map,
        findings: &mut Vec<Finding>,
        events: &mut Vec<Event>,
    ) {
        let cid = field_or_null(cmd, "consumer_id");
        let max_reported = self.options.max_redelivered_reported;
        let cap = self.options.max_remembered_messages;
        let Some(consumer) = self.consumers.get_mut(&Ident::of(Some(&cid))) else { return };
        if consumer.flow_seen && consumer.permits <= 0 {
            findings.push(finding!(PulsarProblem::FlowOverrun, "consumer_id" => cid, "name" => consumer.name()));
        }
        let metadata = frame.pdu.payload().and_then(|b| b.metadata.as_ref());
        consumer.permits -= match metadata {
            Some(md) => int_field(md, "num_messages_in_batch", 1) as i64,
            None => 1,
        };
        // delayed delivery applies to Shared and Key_Shared subscriptions only (others get messages at once)
        if let Some(deliver_at) = metadata.and_then(|md| md.get("deliver_at_time")) {
            let at = match deliver_at {
                Value::Int(v) => *v as f64,
                Value::UInt(v) => *v as f64,
                Value::Float(v) => *v,
                _ => f64::NAN,
            };
            let shared_type =
                matches!(map_get(&consumer.info, "type").and_then(Value::as_str), Some("Shared" | "Key_Shared"));
            if frame.time * 1000.0 < at && shared_type {
                findings.push(
                    finding!(PulsarProblem::MessageEarlyDelivery, "early_ms" => Value::Float(at - frame.time * 1000.0),
                                       "deliver_at" => deliver_at.clone()),
                );
            }
        }
        set_note(notes, name!("permits"), consumer.permits);
        if !self.seeks.is_empty() {
            if let Some(seek) = self.seeks.remove(&consumer.subscription()) {
                set_note(notes, name!("after_seek"), seek); // the first message delivered after the SEEK: where it landed
            }
        }
        let zero = Value::Int(0);
        let message_id = field(cmd, "message_id");
        let ledger = message_id.and_then(|m| m.get("ledgerId")).unwrap_or(&zero);
        let entry_id = message_id.and_then(|m| m.get("entryId")).unwrap_or(&zero);
        let mid = entry_key(ledger, entry_id);
        let redelivery_count = int_field(cmd, "redelivery_count", 0) as i64;
        let mut asked = if consumer.asked.is_empty() { None } else { consumer.asked.remove(&mid) };
        // what made the broker deliver it again, as far as the wire says: a REDELIVER naming it (a negative
        // ack or an ack timeout: pulsar-client-cpp's NegativeAcksTracker and UnAckedMessageTracker send the same
        // command, so the wire cannot tell them apart), a REDELIVER naming none (every unacknowledged message),
        // or its subscription subscribed again on a new connection
        let mut cause = asked.map(|_| RedeliveryCause::Request);
        let mut remembered = consumer.remembered.borrow_mut();
        if asked.is_none() {
            if let Some(asked_all) = consumer.asked_all {
                if remembered.unacked.get(&mid).is_some_and(|&latest| latest < asked_all) {
                    asked = Some(asked_all); // unacknowledged when "all" was asked for
                    cause = Some(RedeliveryCause::All);
                }
            }
        }
        if let Some(asked) = asked {
            set_note(notes, name!("redelivery_requested_by"), asked);
        }
        let seen = remembered.delivered.get(&mid).copied(); // deliveries so far << COUNT_SHIFT | the first one's frame
        let first = seen.map(|s| s & FRAME_MASK);
        let count = seen.map_or(1, |s| (s >> COUNT_SHIFT) + 1);
        let packed = (count << COUNT_SHIFT) | first.unwrap_or(frame.index);
        let dropped = remember_bounded(&mut remembered.delivered, mid, packed, cap);
        if first.is_some() || redelivery_count != 0 {
            // the frames of the first messages seen more than once, for their REDELIVERED warnings; beyond
            // max_redelivered_reported only count them (the delivered table knows each one's count)
            if let Some(repeat) = consumer.repeated.get_mut(&mid) {
                repeat.count += 1;
                if repeat.frames.len() < FRAMES_KEPT {
                    repeat.frames.push(frame.index);
                }
                repeat.redelivery_count = repeat.redelivery_count.max(redelivery_count);
            } else if consumer.repeated.len() < max_reported {
                let frames = match first {
                    Some(first) => vec![first, frame.index],
                    None => vec![frame.index],
                };
                let count = frames.len() as u64;
                consumer.repeated.insert(mid, Repeat { frames, redelivery_count, count });
            } else {
                consumer.more_deliveries += 1;
                let second = remembered.delivered.get(&mid).is_some_and(|s| s >> COUNT_SHIFT == 2);
                if first.is_none() || second {
                    consumer.more_messages += 1; // the first repeat of this message
                }
            }
            let mut params = vec![
                entry(name!("ledger"), ledger.clone()),
                entry(name!("entry"), entry_id.clone()),
                entry(name!("first_frame"), first),
                entry(name!("redelivery_count"), redelivery_count),
            ];
            match (cause, asked, consumer.resubscribed_from) {
                (Some(cause), Some(frame), _) => {
                    params.push(entry(name!("cause"), cause.id()));
                    params.push(entry(name!("cause_frame"), frame));
                }
                (_, _, Some(conn)) => {
                    params.push(entry(name!("cause"), RedeliveryCause::Reconnection.id()));
                    params.push(entry(name!("cause_conn"), conn));
                }
                _ => params.push(entry(name!("cause"), RedeliveryCause::Unknown.id())),
            }
            if first.is_some() {
                set_note(notes, name!("delivery"), count);
                params.push(entry(name!("delivery"), count));
            }
            findings.push(Finding { id: PulsarProblem::MessageRedelivered.name(), params });
        }
        remember_bounded(&mut remembered.unacked, mid, frame.index, cap);
        drop(remembered);
        let excess = self.shared.borrow_mut().over_budget();
        if excess > 0 {
            self.shared.borrow_mut().shrink(excess);
            self.dropped(
                frame,
                name!("max_remembered_total"),
                name!("message ids remembered over all consumers"),
                events,
            );
        } else if dropped {
            self.dropped(frame, name!("max_remembered_messages"), name!("delivered message ids"), events);
        }
    }

    fn on_ack(&mut self, cmd: &Value, notes: &mut Map, findings: &mut Vec<Finding>) {
        let Some(consumer) = self.consumers.get(&Ident::of(field(cmd, "consumer_id"))) else { return };
        let mut acked: Vec<u64> = Vec::new();
        let cumulative = field(cmd, "ack_type").and_then(Value::as_str) == Some("Cumulative");
        let mut whole_entry: Option<Finding> = None;
        let mut remembered = consumer.remembered.borrow_mut();
        let unacked = &mut remembered.unacked;
        let zero = Value::Int(0);
        for mid in field(cmd, "message_id").and_then(Value::as_list).unwrap_or(&[]) {
            let key = entry_key(mid.get("ledgerId").unwrap_or(&zero), mid.get("entryId").unwrap_or(&zero));
            if cumulative {
                let older: Vec<EntryKey> = unacked.keys().filter(|&&k| k <= key).copied().collect();
                for k in older {
                    acked.extend(unacked.remove(&k));
                }
            } else if mid.get("ack_set").and_then(Value::as_list).is_some_and(|set| set.iter().any(Value::truthy)) {
                // A batch-index ack: the entry is acknowledged only in part.
                acked.extend(unacked.get(&key).copied());
            } else {
                let batch_index = mid.get("batch_index").filter(|i| i.as_i64().is_some_and(|i| i >= 0));
                if let (Some(batch_index), None) = (batch_index, &whole_entry) {
                    // a batch index without an ack_set (pulsar-rs acks each entry so): the broker reads no
                    // batch index, so this acknowledges the whole entry, and later ACKs of its other entries
                    // add nothing
                    whole_entry = Some(finding!(PulsarProblem::AckWholeEntry, "ledger" => mid.get("ledgerId")
                        .cloned().unwrap_or(Value::Null), "entry" => mid.get("entryId").cloned().unwrap_or(Value::Null),
                        "batch_index" => batch_index.clone()));
                }
                acked.extend(unacked.remove(&key));
            }
        }
        findings.extend(whole_entry);
        acked.sort_unstable();
        acked.dedup();
        // an ACK with a validation_error: the client could not read those messages and dropped them (the C++
        // and Java consumers do so on a decompression, checksum, batch or decryption failure); the broker
        // takes it as an acknowledgement, but the application never received them
        if let Some(error) = field(cmd, "validation_error").filter(|e| !e.is_null()) {
            let ids = field(cmd, "message_id").and_then(Value::as_list).map_or(0, <[Value]>::len);
            findings.push(finding!(PulsarProblem::AckValidationError, "error" => error.clone(),
                "messages" => ids, "consumer_id" => field_or_null(cmd, "consumer_id"), "name" => consumer.name(),
                "frames" => Value::List(acked.iter().take(LINKS_SHOWN).map(|&f| Value::from(f)).collect())));
            if !acked.is_empty() {
                set_note(notes, name!("discards"), Value::List(acked.into_iter().map(Value::from).collect()));
            }
            return;
        }
        if !acked.is_empty() {
            set_note(notes, name!("acks"), Value::List(acked.into_iter().map(Value::from).collect()));
        }
    }

    /// Link the request to the MESSAGE frames it asks for again (all unacknowledged ones when it names none),
    /// and remember it so the redelivered MESSAGE can point back to it.
    fn on_redeliver(&mut self, frame: &Frame, cmd: &Value, notes: &mut Map) {
        let cap = self.options.max_remembered_messages;
        let Some(consumer) = self.consumers.get_mut(&Ident::of(field(cmd, "consumer_id"))) else { return };
        let mut remembered = consumer.remembered.borrow_mut();
        let zero = Value::Int(0);
        let ids = field(cmd, "message_ids").and_then(Value::as_list).unwrap_or(&[]);
        // the messages are handed back: the broker delivers them again (to this consumer or another), so they
        // are no longer this consumer's to acknowledge. An id with a batch index (pulsar-rs nacks one entry of
        // a batch so) hands back its whole entry: the broker redelivers entries, not their parts.
        let (mut frames, count) = if !ids.is_empty() {
            let keys: Vec<EntryKey> = ids
                .iter()
                .map(|m| entry_key(m.get("ledgerId").unwrap_or(&zero), m.get("entryId").unwrap_or(&zero)))
                .collect();
            // its MESSAGE: the delivery not yet acknowledged, else the first (an entry acknowledged in part)
            let frames: Vec<u64> = keys
                .iter()
                .filter_map(|k| {
                    let unacked = remembered.unacked.remove(k);
                    unacked.or_else(|| remembered.delivered.get(k).map(|seen| seen & FRAME_MASK))
                })
                .collect();
            for key in keys {
                remember_bounded(&mut consumer.asked, key, frame.index, cap);
            }
            let count = frames.len();
            (frames, count)
        } else {
            // every unacknowledged message: one marker, not one entry per message (the table can be large)
            consumer.asked_all = Some(frame.index);
            let count = remembered.unacked.len();
            // (handed back too: `held` leaves out what was delivered before this frame)
            (remembered.unacked.values().take(LINKS_SHOWN).copied().collect(), count)
        };
        if count > 0 {
            frames.sort_unstable();
            frames.truncate(LINKS_SHOWN);
            set_note(notes, name!("redelivers"), Value::List(frames.into_iter().map(Value::from).collect()));
            set_note(notes, name!("redelivers_count"), count);
        }
    }
}

impl Session for PulsarSession {
    fn on_frame(
        &mut self,
        frame: &Frame,
        spec: Option<&CommandSpec>,
        request: Option<&Waiting>,
        notes: &mut Map,
        findings: &mut Vec<Finding>,
        events: &mut Vec<Event>,
    ) {
        let (Some(spec), Some(cmd)) = (spec, frame.pdu.command.as_ref()) else {
            return; // an unknown or malformed command: nothing to learn from it
        };
        let t = spec.name.as_str();
        if let Some(request) = request {
            self.learn(t, cmd, request, findings);
            if t == "SUCCESS" && request.type_name.as_str() == "UNSUBSCRIBE" {
                // the subscription is gone, and its consumer with it (a later frame for it is after its close)
                if let Some(id) = map_get(&request.kept, "consumer_id") {
                    let closing = Value::Map(vec![entry(name!("consumer_id"), id.clone())]);
                    self.on_close(frame, Actor::Consumer, &closing, false, findings, events);
                }
            }
        }
        if let Some((scope, scope_id)) = &spec.scope {
            let ident = Ident::of(field(cmd, scope_id));
            let info = match scope {
                Actor::Producer => self.producers.get(&ident).map(|p| &p.info),
                Actor::Consumer => self.consumers.get(&ident).map(|c| &c.info),
            };
            if let Some(info) = info {
                set_note(notes, scope.name(), Value::Map(info.clone()));
            } else if frame.direction != TO_CLIENT {
                if let Some(info) = self.closed.get(&(*scope, ident)) {
                    set_note(notes, scope.name(), Value::Map(info.clone()));
                    // a close of what is closed already (pulsar-rs closes twice) is harmless: a note
                    let id = if t == "CLOSE_PRODUCER" || t == "CLOSE_CONSUMER" {
                        PulsarProblem::ActorClosedAgain
                    } else {
                        PulsarProblem::ActorUsedAfterClose
                    };
                    findings.push(finding!(id, "type" => spec.name, "actor" => scope.name(),
                        "id" => field_or_null(cmd, scope_id),
                        "name" => map_get(info, "name").cloned().unwrap_or(Value::Null)));
                }
            }
        }
        match t {
            "PRODUCER" => self.new_producer(frame, cmd, events),
            "SUBSCRIBE" => self.new_consumer(frame, cmd, events),
            "CONNECT" => {
                let version = field(cmd, "client_version")
                    .filter(|v| v.as_str().is_some_and(|v| CLIENTS_NEEDING_CHECKSUMS.iter().any(|c| v.starts_with(c))));
                self.needs_checksum = version.cloned();
            }
            "MESSAGE"
                if self.needs_checksum.is_some()
                    && frame.pdu.payload().is_some_and(|b| b.checksum == Checksum::Absent) =>
            {
                let version = self.needs_checksum.take().unwrap_or(Value::Null);
                findings.push(finding!(PulsarProblem::MessageChecksumRequired, "client_version" => version));
            }
            _ => {}
        }
        let body = frame.pdu.payload();
        if body.is_some_and(|b| b.messages.first().is_some_and(|m| m.get("chunk_id").is_some())) {
            self.add_chunk(frame, cmd, notes, findings);
        }
        match t {
            // not a SEND cut inside its command
            "SEND" if body.is_some() || frame.pdu.findings.is_empty() => self.on_send(cmd, body, findings),
            "SEND" => {}
            "MESSAGE" => self.on_message(frame, cmd, notes, findings, events),
            "FLOW" => {
                if let Some(consumer) = self.consumers.get_mut(&Ident::of(field(cmd, "consumer_id"))) {
                    consumer.permits += int_field(cmd, "messagePermits", 0) as i64;
                    consumer.flow_seen = true;
                    set_note(notes, name!("permits"), consumer.permits);
                }
            }
            "ACK" => self.on_ack(cmd, notes, findings),
            "REDELIVER_UNACKNOWLEDGED_MESSAGES" => self.on_redeliver(frame, cmd, notes),
            "SEEK" => {
                let ident = Ident::of(field(cmd, "consumer_id"));
                if let Some(consumer) = self.consumers.get(&ident) {
                    // the subscription moves: a consumer subscribing again lands there too
                    self.seeks.insert(consumer.subscription(), frame.index);
                    // the broker disconnects the subscription's consumers on a seek (the client subscribes
                    // again: pulsar-client-cpp's "consumer seek, caused reconnection"): no longer a holder
                    self.shared.borrow_mut().consumer_gone(&(self.conn, ident));
                }
            }
            "ERROR" | "SEND_ERROR" => {
                let error = field(cmd, "error").cloned().unwrap_or_else(|| Value::Str(Text::Name(name!("?"))));
                findings.push(finding!(PulsarProblem::ServerError, "type" => spec.name, "error" => error,
                                       "message" => field_or_null(cmd, "message")));
            }
            "CLOSE_PRODUCER" | "CLOSE_CONSUMER" => {
                if frame.direction == TO_CLIENT {
                    set_note(notes, name!("broker_initiated"), true);
                }
                let scope = if t == "CLOSE_PRODUCER" { Actor::Producer } else { Actor::Consumer };
                self.on_close(frame, scope, cmd, true, findings, events);
            }
            _ => {}
        }
    }

    fn close(&mut self, time: f64, packet: u64, events: &mut Vec<Event>) {
        for part in self.chunks.pending() {
            let mut event = Event::new(
                name!("UNFINISHED_CHUNKS"),
                time,
                packet,
                Some(self.conn),
                vec![
                    entry(name!("uuid"), part.uuid),
                    entry(name!("chunks"), Value::List(part.frames.into_iter().map(Value::from).collect())),
                ],
            );
            event.params = vec![entry(name!("seen"), part.seen), entry(name!("num_chunks"), part.num_chunks)];
            events.push(event);
        }
        while let Some((_, details)) = self.held_subscribes.pop_oldest() {
            events.push(Event::new(name!("SUBSCRIBE_HELD_AT_END"), time, packet, Some(self.conn), details));
        }
        let mut consumers = std::mem::take(&mut self.consumers);
        let idents: Vec<Ident> = consumers.keys().cloned().collect();
        for ident in idents {
            let Some(consumer) = consumers.get_mut(&ident) else { continue };
            if !consumer.held().is_empty() && consumer.durable {
                let details = consumer.unacked_params(consumer.id.clone());
                events.push(Event::new(name!("UNACKED_AT_END"), time, packet, Some(self.conn), details));
            }
            let id = consumer.id.clone();
            self.repeated(&id, consumer, time, packet, events);
        }
        self.shared.borrow_mut().connection_gone(self.conn);
        // its consumers' ids no longer count against the shared budget
        drop(consumers);
        self.drops.close(time, packet, events);
    }

    fn sizes(&self) -> Map {
        let consumers: Vec<Value> = self
            .consumers
            .iter()
            .map(|(ident, c)| {
                let remembered = c.remembered.borrow();
                Value::Map(vec![
                    entry(name!("id"), ident.to_value()),
                    entry(name!("delivered"), remembered.delivered.len()),
                    entry(name!("unacked"), remembered.unacked.len()),
                ])
            })
            .collect();
        vec![entry(name!("consumers"), Value::List(consumers))]
    }
}
