//! What the analysis knows of Pulsar beyond its command table: the conversation state of a connection
//! (`session`) and chunked-message reassembly (`chunks`).

pub mod chunks;
pub mod session;
pub mod timeline;
