//! One input through the engine's whole pipeline ([`Engine`], as `dissector/run.py: analysed_json_lines` runs
//! it): the capture reader (pcap, pcapng, gzip) → network layers → TCP reassembly → the splitter with each
//! registered protocol's framing (by server port) → the frame decoders → the conversation analysis (the
//! command tables and the protocols' sessions) → each frame's record written as a JSON line by the engine's
//! record writer, and into the engine's statistics.
//!
//! What is Python's is left out: the events' JSON is the engine's (`engine::event_record`), and the
//! findings' texts come from a small function ([`RawTexts`]) instead of `dissector/problems.py`. Protocols are
//! chosen by port; `--detect` is not run. The engine alone: no interpreter, no libpython.
//!
//! [`check_line`] is `tests/fuzz_harness.py: check_line` in Rust: every line valid JSON (serde_json), one
//! line, no raw C0 control but tab, DEL, C1 control, bidi control or U+2028/U+2029.

use pulsar_dissect_engine::capture::source::{Foreign, SliceSource, SourceError};
use pulsar_dissect_engine::capture::Reader;
use pulsar_dissect_engine::engine::{FindingTexts, Item, JsonLines, ProtocolSetup, Settings, Sink, Statistics};
use pulsar_dissect_engine::model::Finding;
use pulsar_dissect_engine::name;
use pulsar_dissect_engine::protocols::{Depth, Limits, REGISTRY};
use pulsar_dissect_engine::records::{Expert, Message, NoFront, RecordStyle, SinkError, SinkResult};
use pulsar_dissect_engine::stats::Stats;
use pulsar_dissect_engine::text::py_str;
use pulsar_dissect_engine::Engine;

use crate::tables;

/// The fuzzer's caps, as `tests/fuzz_harness.py: OPTIONS` (small, so that a huge claimed size is cut early).
const MAX_DECOMPRESSED: u64 = 1 << 20;
const MAX_CONNECTIONS: usize = 64;
const MAX_PENDING_REQUESTS: usize = 256;

/// Severity and text of a finding, standing in for `problems.severity_and_message`: the parameters go into
/// the text raw (as Python's `str()` writes them), so that the JSON writer is what must escape whatever the
/// wire put in them.
pub struct RawTexts;

impl FindingTexts for RawTexts {
    fn expert(&mut self, finding: &Finding) -> Expert<NoFront> {
        let params: Vec<String> = finding.params.iter().map(|(k, v)| format!("{}={}", k.as_str(), py_str(v))).collect();
        let message = format!("{}: {}", finding.id.as_str(), params.join(", "));
        Expert { id: finding.id, severity: name!("warning"), message: Message::Owned(message) }
    }
}

/// A rule an output line broke, or the record writer's error.
#[derive(Debug)]
pub struct Broken(pub String);

/// The engine with every registered protocol the Python side declares a table for, built once.
pub struct Pipeline {
    engine: Engine,
}

fn error_text(error: SourceError) -> Result<String, Foreign> {
    match error {
        SourceError::Gzip(text) => Ok(text),
        SourceError::Io(error) => Ok(error.to_string()),
        SourceError::Foreign(error) => Err(error),
    }
}

/// The lines of one run, each checked as it is written, and the statistics they make.
struct Checked {
    lines: JsonLines<RawTexts>,
    stats: Statistics<RawTexts>,
    /// Where the frames' lines are kept, when asked for.
    frame_lines: Option<Vec<u8>>,
}

impl Sink for Checked {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        let (start, frame) = (self.lines.out.len(), matches!(item, Item::Frame { .. }));
        let what = if frame { "a frame's JSON line" } else { "an event's line" };
        self.lines.item(item.again())?;
        let line = &self.lines.out[start..self.lines.out.len() - 1];
        check_line(line, what).map_err(|broken| SinkError::Front(broken.0.into()))?;
        if let (true, Some(out)) = (frame, self.frame_lines.as_mut()) {
            out.extend_from_slice(&self.lines.out[start..]);
        }
        self.lines.out.clear();
        self.stats.item(item)
    }
}

impl Pipeline {
    /// Read the tables.
    pub fn new() -> Pipeline {
        let tables = tables::load();
        let setups = REGISTRY
            .iter()
            .filter_map(|&protocol| {
                let json = *tables.get(protocol.name())?;
                let template = tables::TableTemplate::new(json);
                Some(ProtocolSetup {
                    protocol,
                    ports: json.ports.iter().map(|(p, role)| (p.parse().expect("a port"), role.clone())).collect(),
                    client_role: json.client_role.clone(),
                    server_roles: json.server_roles.clone(),
                    max_frame_size: json.max_frame_size.unwrap_or(5 * 1024 * 1024 + 10 * 1024),
                    table: Box::new(move || template.build()),
                })
            })
            .collect();
        let settings = Settings {
            max_connections: MAX_CONNECTIONS,
            max_pending_requests: MAX_PENDING_REQUESTS,
            request_timeout: 30.0,
            limits: Limits { max_decompressed: MAX_DECOMPRESSED, ..Settings::default().limits },
            depth: Depth::Full,
            ..Settings::default()
        };
        Pipeline { engine: Engine::new(setups, settings) }
    }

    /// Run one input: the number of lines made, or Err when one broke a rule. Panics are the fuzzer's.
    pub fn run(&self, data: &[u8]) -> Result<u64, Broken> {
        self.run_lines(data, None)
    }

    /// `run`, with the frames' JSON lines appended to `frame_lines` (to compare with `--json`).
    pub fn run_lines(&self, data: &[u8], frame_lines: Option<&mut Vec<u8>>) -> Result<u64, Broken> {
        let source = SliceSource { data: data.to_vec(), pos: 0, piece: 0 };
        let Ok(mut reader) = Reader::start(Box::new(source), "fuzz", error_text) else {
            return Ok(0); // not a capture: the one error the reader may give
        };
        let mut sink = Checked {
            lines: JsonLines::new(RawTexts, RecordStyle { summary: false, payload_bytes: true }),
            stats: Statistics { texts: RawTexts, stats: Stats::new(1000, 1000, 1000, 1000) },
            frame_lines: frame_lines.as_ref().map(|_| Vec::new()),
        };
        self.engine.run(&mut reader, &mut sink).map_err(|e| Broken(e.to_string()))?;
        if let (Some(out), Some(lines)) = (frame_lines, sink.frame_lines) {
            out.extend(lines);
        }
        Ok(sink.lines.lines)
    }
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new()
    }
}

/// Whether a character must never be written raw into a JSON line (`fuzz_harness.FORBIDDEN`).
pub fn forbidden(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{a}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether the UTF-8 of a line may hold a forbidden character: a byte below 0x20 or DEL, or the lead bytes of
/// C1 (C2) and of U+2028.. / U+2066.. (E2). Most lines have none, and are passed on this byte scan alone.
fn may_hold_forbidden(line: &[u8]) -> bool {
    line.iter().any(|&b| b < 0x20 || b == 0x7f || b == 0xc2 || b == 0xe2)
}

/// One JSON line as written (without its newline): UTF-8, nothing raw to hide, valid JSON.
pub fn check_line(line: &[u8], what: &str) -> Result<(), Broken> {
    let text = std::str::from_utf8(line).map_err(|e| Broken(format!("{what} is not UTF-8: {e}")))?;
    if may_hold_forbidden(line) {
        if let Some((at, c)) = text.char_indices().find(|&(_, c)| forbidden(c)) {
            let shown: String = text[at..].chars().take(80).collect();
            return Err(Broken(format!("{what} holds raw U+{:04X} at byte {at}: {shown:?}", c as u32)));
        }
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| {
        Broken(format!("{what} is not valid JSON ({e}): {:?}", text.chars().take(300).collect::<String>()))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &str) -> Vec<std::path::PathBuf> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
        let mut found: Vec<_> = std::fs::read_dir(&dir)
            .expect("a folder of captures")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.to_string_lossy().contains(".pcap"))
            .collect();
        found.sort();
        found
    }

    /// The shipped captures, every kept regression input and the hostile seeds (issue 34) pass the checks, and
    /// make lines (frames get through the whole pipeline, so the fuzzer is not checking nothing).
    #[test]
    fn shipped_captures_and_regressions_pass() {
        let pipeline = Pipeline::new();
        let regressions = files("tests/fuzz_regressions").into_iter().chain(files("tests/hostile_seeds"));
        for path in files("captures").into_iter().chain(files("captures/tubemq")).chain(regressions) {
            let data = std::fs::read(&path).expect("readable");
            let lines = pipeline.run(&data).unwrap_or_else(|b| panic!("{}: {}", path.display(), b.0));
            assert!(lines > 0, "{}: no line", path.display());
        }
    }

    #[test]
    fn the_checks_catch_raw_controls_and_bad_json() {
        assert!(check_line(br#"{"topic":"a\u007fb\u202e\u2028"}"#, "a line").is_ok());
        for raw in ["\x7f", "\x1b[31m", "\u{202e}", "\u{2028}", "\u{85}", "\x07"] {
            assert!(check_line(format!(r#"{{"topic":"a{raw}b"}}"#).as_bytes(), "a line").is_err(), "{raw:?}");
        }
        assert!(check_line(br#"{"topic":"#, "a line").is_err());
        assert!(check_line(b"{\"a\":\"\xff\"}", "a line").is_err());
    }
}
