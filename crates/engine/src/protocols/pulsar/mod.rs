//! Apache Pulsar's binary protocol: its framing (`framing`: TOTAL_SIZE + 4, sizes that disagree, resync),
//! a frame's decoding (`frame`: sizes, BaseCommand; `payload`: the payload section, CRC32C, metadata,
//! decompression, batches, markers), the conversation state of a connection (`session`), chunked-message
//! reassembly (`chunks`) and its pieces of a timeline line (`timeline`), all walked off the schema compiled
//! from the .proto contract (proto/pulsar).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::analysis::Sessions;
use crate::journeys::JourneyTracker;
use crate::line::{Line, LineFacts};
use crate::model::{Decoded, DecodedBody, Finding};
use crate::protocols::protocol::{DecodeCaps, Delivered, Depth, Limits, Protocol, PublishFacts, StatsRole};
use crate::schema::{EnumType, Schema};
use crate::transport::splitter::Framing;
use crate::value::{Map, Name, Value};
use crate::{model, value};

pub mod chunks;
pub mod frame;
pub mod framing;
pub mod journeys;
pub mod payload;
pub mod problems;
pub mod record;
pub mod session;
pub mod stats;
pub mod timeline;

/// The descriptor set of proto/pulsar, compiled by build.rs.
static DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pulsar_descriptor.bin"));

/// MessageMetadata and friends: the field numbers and message types the payload decoder reads, looked up by
/// name in the schema once.
pub struct Fields {
    pub metadata: usize,
    pub single: usize,
    pub broker_entry_metadata: usize,
    pub sequence_id: u32,
    pub properties: u32,
    pub kv_key: u32,
    pub kv_value: u32,
    pub partition_key: u32,
    pub compression: u32,
    pub uncompressed_size: u32,
    pub num_messages_in_batch: u32,
    pub event_time: u32,
    pub encryption_keys: u32,
    pub ek_key: u32,
    pub ordering_key: u32,
    pub marker_type: u32,
    pub null_value: u32,
    pub uuid: u32,
    pub num_chunks_from_msg: u32,
    pub chunk_id: u32,
    pub null_partition_key: u32,
    pub brief: Vec<(&'static value::Name, u32)>,
    pub markers: HashMap<i32, usize>,
}

/// The schema's tables the decoder reads, looked up once.
pub struct Core {
    pub schema: &'static Schema,
    pub base_command: usize,
    pub command_types: &'static EnumType,
    pub compression_types: &'static EnumType,
    pub send: u64,
    pub message: u64,
    pub message_ack_set: u32,
    pub m: Fields,
}

static CORE: OnceLock<Core> = OnceLock::new();
static SCHEMA: OnceLock<Schema> = OnceLock::new();

/// The schema, loaded once from the embedded descriptor set (no Python needed): for the decoder, the
/// framing and the transport.
pub fn schema() -> &'static Schema {
    SCHEMA.get_or_init(|| Schema::load(DESCRIPTOR))
}

pub fn core() -> &'static Core {
    CORE.get_or_init(Core::new)
}

fn number(schema: &Schema, msg: usize, name: &str) -> u32 {
    schema.messages[msg].field_by_name(name).unwrap_or_else(|| panic!("field {name} is in the schema")).number
}

impl Core {
    fn new() -> Core {
        let schema = schema();
        let base_command = schema.message("pulsar.proto.BaseCommand");
        let command_types = schema.enum_type("pulsar.proto.BaseCommand.Type");
        let compression_types = schema.enum_type("pulsar.proto.CompressionType");
        let type_number = |name: &str| command_types.number(name).expect("a command type") as u64;
        let message_cmd = schema.message("pulsar.proto.CommandMessage");
        let md = schema.message("pulsar.proto.MessageMetadata");
        let kv = schema.message("pulsar.proto.KeyValue");
        let ek = schema.message("pulsar.proto.EncryptionKeys");
        let n = |name: &str| number(schema, md, name);
        let markers = [
            (10, "pulsar.proto.ReplicatedSubscriptionsSnapshotRequest"),
            (11, "pulsar.proto.ReplicatedSubscriptionsSnapshotResponse"),
            (12, "pulsar.proto.ReplicatedSubscriptionsSnapshot"),
            (13, "pulsar.proto.ReplicatedSubscriptionsUpdate"),
        ]
        .into_iter()
        .map(|(t, name)| (t, schema.message(name)))
        .collect();
        let m = Fields {
            metadata: md,
            single: schema.message("pulsar.proto.SingleMessageMetadata"),
            broker_entry_metadata: schema.message("pulsar.proto.BrokerEntryMetadata"),
            sequence_id: n("sequence_id"),
            properties: n("properties"),
            kv_key: number(schema, kv, "key"),
            kv_value: number(schema, kv, "value"),
            partition_key: n("partition_key"),
            compression: n("compression"),
            uncompressed_size: n("uncompressed_size"),
            num_messages_in_batch: n("num_messages_in_batch"),
            event_time: n("event_time"),
            encryption_keys: n("encryption_keys"),
            ek_key: number(schema, ek, "key"),
            ordering_key: n("ordering_key"),
            marker_type: n("marker_type"),
            null_value: n("null_value"),
            uuid: n("uuid"),
            num_chunks_from_msg: n("num_chunks_from_msg"),
            chunk_id: n("chunk_id"),
            null_partition_key: n("null_partition_key"),
            brief: payload::BRIEF_METADATA
                .iter()
                .map(|name| {
                    let field = schema.messages[md].field_by_name(name).expect("a MessageMetadata field");
                    (&field.name, field.number)
                })
                .collect(),
            markers,
        };
        Core {
            schema,
            base_command,
            command_types,
            compression_types,
            send: type_number("SEND"),
            message: type_number("MESSAGE"),
            message_ack_set: number(schema, message_cmd, "ack_set"),
            m,
        }
    }
}

/// Decode one frame whose last `missing` bytes were lost (a capture gap, or the stream ended inside it);
/// decompressed payloads may not exceed `max_decompressed` bytes. `summary` keeps only the metadata fields
/// one-line views show and makes no message records. Pure Rust: no Python involved.
pub fn decode(frame: &[u8], missing: usize, max_decompressed: u64, summary: bool) -> model::Decoded {
    frame::decode(core(), frame, missing, DecodeCaps::decompressing(max_decompressed), Depth::brief(summary))
}

/// [`decode`] to a [`Depth`], within `caps`.
pub fn decode_to(frame: &[u8], missing: usize, caps: DecodeCaps, depth: Depth) -> model::Decoded {
    frame::decode(core(), frame, missing, caps, depth)
}

impl Decoded {
    /// Pulsar's payload section, when the frame has one.
    pub fn payload(&self) -> Option<&payload::PayloadSection> {
        self.body_as()
    }
}

impl DecodedBody for payload::PayloadSection {
    fn line_facts(&self) -> crate::line::PayloadFacts<'_> {
        payload::PayloadSection::line_facts(self)
    }

    fn message_count(&self) -> usize {
        payload::PayloadSection::message_count(self)
    }

    fn held_bytes(&self) -> usize {
        self.batch_later.as_ref().map_or(0, |b| b.held_bytes()) + value::payload_bytes(&self.messages)
    }

    /// The section under `payload`, its messages' ids based on a MESSAGE command's message_id.
    fn write_json(&self, pdu: &Decoded, object: &mut value::JsonObject<'_>, brief: bool) {
        let base = if pdu.type_name.as_str() == "MESSAGE" {
            pdu.command.as_ref().and_then(|c| c.get("message_id"))
        } else {
            None
        };
        payload::PayloadSection::write_json(self, object.key(crate::name!("payload")), (!brief).then_some(base));
    }

    fn protocol(&self) -> &'static str {
        Pulsar.name()
    }

    fn fields(&self, visit: &mut dyn FnMut(&'static str, model::BodyField<'_>)) {
        payload::PayloadSection::fields(self, visit)
    }
}

/// Apache Pulsar's binary protocol.
pub struct Pulsar;

impl Protocol for Pulsar {
    fn name(&self) -> &'static str {
        "pulsar"
    }

    fn journeys(&self, max_open: usize, max_milestones: usize) -> Option<Box<dyn JourneyTracker>> {
        Some(Box::new(journeys::JourneyStore::new(max_open, max_milestones)))
    }

    fn framing(&self) -> Box<dyn Framing> {
        Box::new(framing::PulsarFraming::new(schema()))
    }

    fn decode(&self, pdu: &[u8], missing: usize, caps: DecodeCaps, depth: Depth) -> Decoded {
        decode_to(pdu, missing, caps, depth)
    }

    /// Decoded whole, without problems, as a type the schema knows.
    fn confirms(&self, type_name: &str, has_findings: bool) -> bool {
        !has_findings && core().command_types.number(type_name).is_some()
    }

    /// `command_types`: (number, name) of each BaseCommand type, as the schema declares them.
    fn tables(&self) -> Vec<(&'static str, Vec<Vec<Value>>)> {
        let types = core().command_types.values().map(|(number, name)| vec![Value::from(number), Value::from(name)]);
        vec![("command_types", types.collect())]
    }

    fn body_fields(&self) -> &'static [&'static str] {
        &payload::SECTION_FIELDS
    }

    fn body_from_fields(&self, fields: Map, findings: Vec<Finding>) -> Option<model::Body> {
        Some(Box::new(payload::PayloadSection::from_fields(fields, findings)))
    }

    fn sessions(&self, limits: &Limits) -> Option<Box<dyn Sessions>> {
        Some(Box::new(session::PulsarSessions::new(limits.clone())))
    }

    fn timeline_pieces(&self, facts: &LineFacts, line: &mut Line) {
        timeline::pieces(facts, line)
    }

    fn error_of(&self, command: &Map) -> Option<String> {
        stats::error(command)
    }

    fn server_error_finding(&self) -> Option<&'static str> {
        Some(problems::PulsarProblem::ServerError.id())
    }

    fn stats_role(&self, type_name: &str) -> Option<StatsRole> {
        stats::role(type_name)
    }

    fn connection_facts(&self, role: StatsRole, command: &Map) -> Vec<(&'static Name, Value)> {
        stats::connection_facts(role, command)
    }

    fn permits_of(&self, command: &Map) -> i64 {
        stats::permits(command)
    }

    fn delivered(&self, command: &Map) -> Delivered {
        stats::delivered(command)
    }

    fn publish_facts(&self, record: &Map) -> PublishFacts {
        stats::publish_facts(record)
    }

    fn stats_command_keys(&self) -> &'static [&'static str] {
        &stats::COMMAND_KEYS
    }

    fn stats_record_keys(&self) -> &'static [&'static str] {
        &stats::RECORD_KEYS
    }

    fn stats_message_keys(&self) -> &'static [&'static str] {
        &stats::MESSAGE_KEYS
    }

    fn problem_ids(&self) -> &'static [&'static str] {
        problems::PulsarProblem::IDS
    }
}
