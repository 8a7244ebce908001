//! The protocols, one folder each: what is particular to a protocol (framing, decoding, sessions, its record
//! keys and timeline pieces) lives in its folder, and nothing outside names it.

pub mod pulsar;
pub mod tubemq;
