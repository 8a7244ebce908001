//! The transport stages, in the order the data goes through them, with plain data between them:
//!
//! ```text
//! packet bytes ─ net::tcp_segment ─▶ Segment ─ reassembly::Reassembler ─▶ StreamEvent
//!   (Opened / Data / Gap / Closed) ─ splitter::Splitter + a protocol's Framing ─▶ Split (RawPdu / Note)
//! ```
//!
//! Nothing here knows a protocol: a protocol is its ``Framing`` (``crate::protocols``), which the splitter
//! asks; the PDUs go on to the protocol's decoder (``crate::engine``, or the binding's pipeline).

pub mod net;
pub mod reassembly;
pub mod splitter;
