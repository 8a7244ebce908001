//! Shared by the tests that run whole captures: the repository's root, and a capture's bytes as a reader.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use pulsar_dissect_engine::capture::source::{Foreign, SliceSource, SourceError};
use pulsar_dissect_engine::capture::Reader;

/// The repository's root (the shipped captures are under `captures/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn error_text(error: SourceError) -> Result<String, Foreign> {
    match error {
        SourceError::Gzip(text) => Ok(text),
        SourceError::Io(error) => Ok(error.to_string()),
        SourceError::Foreign(error) => Err(error),
    }
}

/// A capture held in memory, as a reader.
pub fn reader(data: Vec<u8>) -> Reader {
    Reader::start(Box::new(SliceSource { data, pos: 0, piece: 0 }), "test", error_text)
        .unwrap_or_else(|_| panic!("a capture"))
}
