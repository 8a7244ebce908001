//! pulsar-dissect's compiled core: the transport stages (network layers, TCP reassembly, the PDU splitter
//! and the pipeline: `transport`), Pulsar's framing (`framing`) and Pulsar frame decoding (sizes,
//! BaseCommand, payload section, CRC32C, decompression, batches, markers), walked off the schema compiled
//! from the .proto contract.
//!
//! Decoding needs no Python: [`decode`] gives Rust plain data ([`model::Decoded`] of [`value::Value`]s),
//! which other Rust code reads and writes as JSON. The Python module (`binding`) converts it, in one step,
//! into the Python classes Python bound once, so what crosses the boundary is the same whatever decodes.
//! The pipeline (`transport`) keeps the Rust data while it works and converts it where it builds a frame.

pub mod analysis;
pub mod capture;
pub mod codecs;
pub mod model;
mod ordered;
pub mod pb;
pub mod pieces;
pub(crate) mod printable;
pub mod problems;
pub mod protocols;
pub mod records;
pub mod schema;
pub mod stats;
pub mod text;
pub mod timeline;
pub mod transport;
pub mod value;

/// The hash map of the core's per-capture tables (connections, halves, actors, ids). Their keys come off the
/// wire, so a capture could choose them: foldhash is as fast as a multiplicative hash on such short keys and
/// seeded per process, so colliding keys cannot be prepared in a capture file.
pub type FastMap<K, V> = foldhash::HashMap<K, V>;
