//! The transport stages, in the order the data goes through them, with plain data between them:
//!
//! ```text
//! packet bytes ─ net::tcp_segment ─▶ Segment ─ reassembly::Reassembler ─▶ StreamEvent
//!   (Opened / Data / Gap / Closed) ─ splitter::Splitter + a protocol's Framing ─▶ Split (RawPdu / Note)
//!   ─ pipeline::Pipeline ─▶ decoded frames and events (the Python ``model.Frame`` / ``model.Event``)
//! ```
//!
//! Nothing below the pipeline knows a protocol: a protocol is its ``Framing`` (Pulsar's is
//! ``crate::protocols::pulsar::framing``) and its decoder, reached through ``protocol::decode_pdu``.

pub mod net;
pub mod reassembly;
pub mod splitter;
