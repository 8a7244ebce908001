//! The [`Protocol`] trait, which every protocol implements, and the plain data it speaks of: how deep to decode
//! ([`Depth`]) within which caps ([`DecodeCaps`], [`Limits`]), and what a frame is to the statistics
//! ([`StatsRole`], [`Delivered`]). Below the protocols' folders, which take it from here, and below the
//! registry (`protocols/mod.rs`), which lists them; it names no protocol.

use crate::analysis::Sessions;
use crate::budget::MemoryBudget;
use crate::journeys::JourneyTracker;
use crate::line::{Line, LineFacts};
use crate::model::{Body, Decoded, Finding};
use crate::transport::splitter::Framing;
use crate::value::{Map, Name, Value};

/// How much of a frame's body to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Everything, each message with its payload.
    Full,
    /// For one-line views and statistics, which read sizes only: no message's payload copied, and a batch
    /// kept whole with its count and bytes (what those views show of it), its messages made only if asked
    /// for.
    Brief,
    /// As `Full`, but a batch is only checked (its findings, its entries) and kept whole: it is split into its
    /// messages where its record is written, on a thread pool.
    BatchesLater,
}

impl Depth {
    pub fn brief(brief: bool) -> Depth {
        if brief {
            Depth::Brief
        } else {
            Depth::Full
        }
    }
}

/// A batch's entries a record lists at most by default (`Options.max_batch_entries`): the Java client's default
/// `batchingMaxMessages`, so that a batch of a client left at its defaults is never cut.
pub const DEFAULT_MAX_BATCH_ENTRIES: usize = 1_000;

/// The caps of decoding one PDU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeCaps {
    /// Bytes a payload may decompress to.
    pub max_decompressed: u64,
    /// Messages of one batch decoded into its record; the rest are counted, not kept (a batch of 6-byte entries
    /// is ten million of them in 64 MiB).
    pub max_batch_entries: usize,
    /// Elements of repeated fields one protobuf message keeps (`pb::parse_limited`); the rest are counted.
    pub max_repeated_elements: usize,
}

impl DecodeCaps {
    /// `max_decompressed`, with the default caps on a batch's entries and on repeated elements.
    pub fn decompressing(max_decompressed: u64) -> DecodeCaps {
        DecodeCaps {
            max_decompressed,
            max_batch_entries: DEFAULT_MAX_BATCH_ENTRIES,
            max_repeated_elements: crate::pb::DEFAULT_MAX_REPEATED_ELEMENTS,
        }
    }
}

/// The caps decoding and the conversation state keep to (the options' defaults live with the front end).
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_decompressed: u64,
    pub max_actors: usize,
    pub max_remembered_messages: usize,
    pub max_remembered_total: usize,
    pub max_redelivered_reported: usize,
    pub max_chunked_messages: usize,
    pub max_chunk_bytes: u64,
    /// The same over every connection: the connection whose chunk passes it gives up its oldest message.
    pub max_chunk_bytes_total: u64,
    pub redirect_loop_limit: u64,
    /// The budget the holders of wire bytes share (compressed chunks here, out-of-order bytes in the
    /// reassembly): a run makes one and hands the same to both.
    pub memory_budget: MemoryBudget,
}

/// What a frame of some type is to the statistics' producers, consumers and connections (`Protocol::stats_role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsRole {
    /// A client opening its connection: what it says of itself (`Protocol::connection_facts`).
    ConnectRequest,
    /// The server's answer to it: what it says of itself (`Protocol::connection_facts`).
    ConnectAnswer,
    /// A producer publishing messages (those with a payload are counted and wait for their answer).
    Publish,
    /// The server accepted a publish (the record's `answers` names which).
    PublishAccepted,
    /// The server refused a publish (the record's `answers` names which), with an error (`Protocol::error_of`).
    PublishRefused,
    /// Messages delivered to a consumer (those with a payload are counted, by entry: `Protocol::delivered`).
    Delivery,
    /// A consumer acknowledging delivered frames (the record's `acks` names them).
    Ack,
    /// A consumer granting the server leave to deliver more (`Protocol::permits_of`).
    Permits,
    /// An error answering some other request.
    ErrorAnswer,
}

impl StatsRole {
    /// Whether a frame of this role answers its request with an error (the latency plot marks those).
    pub fn answers_with_error(self) -> bool {
        matches!(self, StatsRole::ErrorAnswer | StatsRole::PublishRefused)
    }
}

/// What a delivery says of the stored entry its messages came from (`Protocol::delivered`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Delivered {
    /// The entry, as one number: a delivery of an entry seen before is a repeat. None: unknown (each delivery
    /// counts as distinct).
    pub entry: Option<u128>,
    /// The command says the messages were delivered before.
    pub redelivered: bool,
}

/// What a publish record says of its messages' batching and compression (`Protocol::publish_facts`), for the
/// statistics' producers.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PublishFacts {
    /// The messages of its batch, when it is one.
    pub batched_messages: Option<i64>,
    /// The codec its payload is compressed with; None: not compressed (the facts below are then not read).
    pub codec: Option<String>,
    /// The decompressed size of its payload, when it is a whole message that says it.
    pub uncompressed_size: Option<i64>,
    /// The chunked message it is a chunk of, when it is one.
    pub chunk: Option<ChunkFacts>,
}

/// A publish record that is one chunk of a message (`PublishFacts::chunk`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ChunkFacts {
    /// The id of the chunked message, as the statistics key it.
    pub message: String,
    /// When this chunk completed a message: which, from which frames, and how large it is decompressed.
    pub completed: Option<CompletedChunks>,
}

/// A chunked message made whole by its last chunk (`ChunkFacts::completed`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CompletedChunks {
    /// The id of the message it completed (None: one it does not name as text).
    pub message: Option<String>,
    /// The indexes of the frames whose chunks made it, in order (None: one that is not an index).
    pub frames: Vec<Option<i64>>,
    /// Its decompressed size; None: unknown (it could not be decompressed).
    pub plain_size: Option<i64>,
}

/// A protocol compiled into the engine.
pub trait Protocol: Sync {
    /// Its name: the records' `protocol`, and `ProtocolSpec.core` of its Python declaration.
    fn name(&self) -> &'static str;
    /// Its framing: how long a PDU is, where the next may start after lost bytes.
    fn framing(&self) -> Box<dyn Framing>;
    /// One PDU decoded, whose last `missing` bytes were lost, within `caps`.
    fn decode(&self, pdu: &[u8], missing: usize, caps: DecodeCaps, depth: Depth) -> Decoded;
    /// Whether a PDU decoded as `type_name`, with or without findings, proves the protocol on a connection
    /// off its ports (`--detect`).
    fn confirms(&self, type_name: &str, has_findings: bool) -> bool;
    /// Its conversation state per connection, for the analysis; None: request/response pairing only.
    fn sessions(&self, limits: &Limits) -> Option<Box<dyn Sessions>>;
    /// Its own pieces of a frame's timeline line (after the key fields).
    fn timeline_pieces(&self, facts: &LineFacts, line: &mut Line);
    /// An empty store of its message journeys (`crate::journeys`), with at most `max_open` open and
    /// `max_milestones` deliveries and acks kept over all of them; None: it keeps none.
    fn journeys(&self, _max_open: usize, _max_milestones: usize) -> Option<Box<dyn JourneyTracker>> {
        None
    }
    /// For the statistics' clients (a protocol whose session notes `client_id`): whether a frame of this type
    /// carries messages its client sent (true) or received (false); None: neither.
    fn client_messages(&self, _type_name: &str) -> Option<bool> {
        None
    }
    /// For the statistics: the error a response's command says, by name (a code when it has none); None: no
    /// error.
    fn error_of(&self, _command: &Map) -> Option<String> {
        None
    }
    /// For the statistics: the id of its finding that says a server answered with an error (the statistics count
    /// those by the error `error_of` reads from the command); None: it has none.
    fn server_error_finding(&self) -> Option<&'static str> {
        None
    }
    /// For the statistics: what a frame of this type is to its producer or consumer (the record's notes
    /// `producer`, `consumer`), its connection and the latency plot; None: nothing in particular.
    fn stats_role(&self, _type_name: &str) -> Option<StatsRole> {
        None
    }
    /// For the statistics: what the command of a `ConnectRequest` or `ConnectAnswer` says of the connection
    /// (versions), as keys of the connection's figures, in order.
    fn connection_facts(&self, _role: StatsRole, _command: &Map) -> Vec<(&'static Name, Value)> {
        Vec::new()
    }
    /// For the statistics: the messages a `Permits` command lets the server deliver.
    fn permits_of(&self, _command: &Map) -> i64 {
        0
    }
    /// For the statistics: what a `Delivery` command says of its entry.
    fn delivered(&self, _command: &Map) -> Delivered {
        Delivered::default()
    }
    /// For the statistics: what a `Publish` record (a summary or full one) says of its batching and compression.
    fn publish_facts(&self, _record: &Map) -> PublishFacts {
        PublishFacts::default()
    }
    /// The keys of a command the statistics' questions above read: a record made for the statistics keeps
    /// only these of its command.
    fn stats_command_keys(&self) -> &'static [&'static str] {
        &[]
    }
    /// The keys of a record `publish_facts` reads, beyond those of the JSON contract every protocol's record
    /// has: a record made for the statistics keeps these too.
    fn stats_record_keys(&self) -> &'static [&'static str] {
        &[]
    }
    /// The keys of a record's message `publish_facts` reads (a message's `payload_size` is kept anyway).
    fn stats_message_keys(&self) -> &'static [&'static str] {
        &[]
    }
    /// Its named tables for a front end (Pulsar's command types, TubeMQ's methods): each a name and its rows of
    /// plain values, as the protocol's folder writes them (the one place they are written).
    fn tables(&self) -> Vec<(&'static str, Vec<Vec<Value>>)> {
        Vec::new()
    }
    /// The fields of its frames' body (`DecodedBody::fields`, in order) when a front end binds a class to it
    /// (the binding checks the class has these, in this order); empty: a front end holds the body as a map.
    fn body_fields(&self) -> &'static [&'static str] {
        &[]
    }
    /// Its frames' body made back from what a front end holds: the fields `DecodedBody::fields` gave, by name
    /// (those its readers need; a field missing is its default), its `Findings` field apart as `findings`.
    /// None: its frames carry no body, or these fields make none.
    fn body_from_fields(&self, _fields: Map, _findings: Vec<Finding>) -> Option<Body> {
        None
    }
    /// The ids of the findings its decoding and sessions make (`dissector/problems.py` registers each with
    /// its severity and text): the `IDS` of its problems enum (`protocols/<name>/problems.rs`).
    fn problem_ids(&self) -> &'static [&'static str];
}
