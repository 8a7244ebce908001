//! pulsar-dissect's engine: Pulsar's and TubeMQ's wire protocols from capture bytes to records, in Rust with
//! no Python anywhere in its dependency tree. The stages, in the order the data goes through them, each a
//! module with plain data between them:
//!
//! - `capture`: the capture file reader (pcap, pcapng, gzip), streaming;
//! - `transport`: network layers, TCP reassembly, the PDU splitter (which asks a protocol's `Framing`);
//! - `protocols`: one folder per protocol behind the `Protocol` trait, and the registry that lists them;
//! - `analysis`: request/response pairing from a command table, and the protocols' sessions;
//! - `frame_record` (with the sinks of `records`), `stats`, `timeline` (with the plain data of `line`): each
//!   frame's record written to a sink (JSON, Rust maps, a front end's own), the statistics counted from
//!   records, a timeline line made from a record or a frame;
//! - `engine`: the stages composed ([`Engine`]), for Rust callers.
//!
//! The files are layers: no circle of `use`s between folders (`tests/module_graph.rs` checks it). The plain
//! data every stage shares (`value`, `line`, `model`, the sinks of `records`) and the `Protocol` trait
//! (`protocols::protocol`) lie below the protocols' folders; the registry (`protocols`) and what asks it lie
//! above.
//!
//! Front ends (the Python binding, `crates/python`) declare what they own — command tables, the texts of
//! findings — as plain data or through traits, and convert the engine's plain data into their own objects.

pub mod analysis;
pub mod budget;
pub mod capture;
pub mod codecs;
pub mod engine;
pub mod event_record;
pub mod frame_record;
pub mod journeys;
pub mod line;
pub mod model;
mod ordered;
pub mod pb;
pub mod pieces;
pub mod pipeline;
pub(crate) mod printable;
pub mod problems;
pub mod protocols;
pub mod records;
pub mod schema;
pub mod sinks;
pub mod stats;
pub mod tables;
pub mod text;
pub mod timeline;
pub mod transport;
pub mod value;

/// The hash map of the core's per-capture tables (connections, halves, actors, ids). Their keys come off the
/// wire, so a capture could choose them: foldhash is as fast as a multiplicative hash on such short keys and
/// seeded per process, so colliding keys cannot be prepared in a capture file.
pub type FastMap<K, V> = foldhash::HashMap<K, V>;

pub use engine::Engine;
