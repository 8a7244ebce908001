//! The protocols, one folder each, and the one place that lists them ([`REGISTRY`]). What is particular to a
//! protocol — its framing, decoding, body, conversation state, record keys and timeline pieces — lives in its
//! folder behind the [`Protocol`] trait (`protocol.rs`, which the folders take it from); nothing outside
//! `protocols/` names a protocol. A new protocol is a new folder and a line in [`REGISTRY`] (and, if its
//! frames carry a body, a line in [`write_body_keys`]).

use std::any::Any;

use crate::model::{Decoded, DecodedBody};
use crate::records::{Front, Merged, RecordSink, RecordStyle, SinkResult};

pub mod protocol;
pub mod pulsar;
pub mod tubemq;

pub use protocol::{
    ChunkFacts, CompletedChunks, DecodeCaps, Delivered, Depth, Limits, Protocol, PublishFacts, StatsRole,
    DEFAULT_MAX_BATCH_ENTRIES,
};

/// Every protocol compiled into the engine.
pub static REGISTRY: &[&dyn Protocol] = &[&pulsar::Pulsar, &tubemq::TubeMq];

/// The protocol compiled in under `name` (`ProtocolSpec.core` on the Python side).
pub fn by_name(name: &str) -> Option<&'static dyn Protocol> {
    REGISTRY.iter().copied().find(|p| p.name() == name)
}

/// Whether a frame of `type_name` carries messages a client sent (true) or received (false): a publish or a
/// delivery as the protocol's statistics roles say, else what it says of its clients' frames; None: neither.
pub fn carries_messages(protocol: &dyn Protocol, type_name: &str) -> Option<bool> {
    match protocol.stats_role(type_name) {
        Some(StatsRole::Publish) => Some(true),
        Some(StatsRole::Delivery) => Some(false),
        _ => protocol.client_messages(type_name),
    }
}

/// The protocol of a record whose `protocol` key says `name` (None: it has none). A record without the key is
/// Pulsar's: records had no such key while Pulsar was the only protocol, and saved ones are still read.
pub fn of_record(name: Option<&str>) -> Option<&'static dyn Protocol> {
    match name {
        Some(name) => by_name(name),
        None => Some(&pulsar::Pulsar),
    }
}

/// A frame's body's keys of its record, written by the protocol whose body it is (a body no protocol here
/// made, none).
pub fn write_body_keys<F: Front>(
    sink: &mut impl RecordSink<F>,
    merged: &mut Merged<'_>,
    pdu: &Decoded,
    body: &dyn DecodedBody,
    style: RecordStyle,
) -> SinkResult<()> {
    let body: &dyn Any = body;
    if let Some(section) = body.downcast_ref::<pulsar::payload::PayloadSection>() {
        return pulsar::record::section_keys(sink, merged, pdu, section, style);
    }
    if let Some(tube) = body.downcast_ref::<tubemq::TubeBody>() {
        return tubemq::record::body_keys(sink, merged, tube, style);
    }
    Ok(())
}
