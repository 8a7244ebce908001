//! The compiled core's fuzzing harness: the whole Rust pipeline on one input (`pipeline`), and the
//! structure-aware mutations of Pulsar and TubeMQ frames inside a classic pcap (`mutate`).

pub mod mutate;
pub mod pipeline;
pub mod tables;
