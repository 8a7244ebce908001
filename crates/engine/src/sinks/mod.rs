//! Sinks that work on threads of their own while the caller's thread reads, reassembles, decodes and analyses
//! the next packets: [`pooled::PooledJsonLines`] (`--json`'s lines written on a pool of threads, joined in
//! order) and [`counted::CountedStatistics`] (`stats` counted on one thread, in order). Both give the same
//! bytes and figures as [`crate::engine::JsonLines`] and [`crate::engine::Statistics`], and both keep the
//! decoded frames handed over and not yet done with to about a budget of bytes (`Options.pool_bytes`).
//!
//! A frame is handed over owned ([`pooled::RecordJob`]: the decoded frame shared, its route, the texts of its
//! findings made on the caller's thread), which a sink can do only when the item carries the frame's shared
//! parts ([`crate::engine::Shared`]); a frame without them is written in its place, after everything before it.
//!
//! Beside them, in the caller's thread: [`timeline::TimelineLines`], `--plain`'s timeline lines.

pub mod counted;
pub mod pooled;
pub mod timeline;
