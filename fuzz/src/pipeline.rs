//! One input through the core's whole Rust pipeline, as `dissector/run.py: analysed_json_lines` runs it: the
//! capture reader (pcap, pcapng, gzip) → network layers → TCP reassembly → the splitter with Pulsar's or
//! TubeMQ's framing (by server port) → the frame decoders → the conversation analysis (the command tables
//! and both protocols' sessions) → each frame's record written as a JSON line by the core's record writer,
//! and into the core's statistics.
//!
//! What is Python's is left out: the Python events' JSON (`output/records.py: event_record`) is replaced by
//! the same data written with the engine's JSON writer, and the findings' texts come from a small function
//! ([`expert`]) instead of `dissector/problems.py`. Protocols are chosen by port; `--detect` is not run. The
//! engine alone: no interpreter, no libpython.
//!
//! [`check_line`] is `tests/fuzz_harness.py: check_line` in Rust: every line valid JSON (serde_json), one
//! line, no raw C0 control but tab, DEL, C1 control, bidi control or U+2028/U+2029.

use std::collections::HashMap;

use pulsar_dissect_engine::analysis::{Analyzer, Frame, Output, PairingOptions, ProtocolAnalysis};
use pulsar_dissect_engine::capture::source::{Foreign, SliceSource, SourceError};
use pulsar_dissect_engine::capture::Reader;
use pulsar_dissect_engine::model::{Decoded, Finding};
use pulsar_dissect_engine::problems::GenericProblem;
use pulsar_dissect_engine::protocols::{by_name, Depth, Limits, Protocol, REGISTRY};
use pulsar_dissect_engine::records::{
    build_record, Expert, JsonSink, MapSink, Message, NoFront, RecordInput, RecordStyle,
};
use pulsar_dissect_engine::stats::{Stats, STATS_KEPT};
use pulsar_dissect_engine::text::py_str;
use pulsar_dissect_engine::transport::net::{endpoint_text, tcp_segment};
use pulsar_dissect_engine::transport::reassembly::{Config, Reassembler, StreamEvent};
use pulsar_dissect_engine::transport::splitter::{Framing, RawPdu, Split, Splitter};
use pulsar_dissect_engine::value::{entry, write_json_map, Map, Text, Value};
use pulsar_dissect_engine::{finding, name};

use crate::tables;

/// The fuzzer's caps, as `tests/fuzz_harness.py: OPTIONS` (small, so that a huge claimed size is cut early).
const MAX_DECOMPRESSED: u64 = 1 << 20;
const MAX_CONNECTIONS: usize = 64;
const MAX_PENDING_REQUESTS: usize = 256;

/// Severity and text of a finding, standing in for `problems.severity_and_message`: the parameters go into
/// the text raw (as Python's `str()` writes them), so that the JSON writer is what must escape whatever the
/// wire put in them.
fn expert(finding: &Finding) -> Expert<NoFront> {
    let params: Vec<String> = finding.params.iter().map(|(k, v)| format!("{}={}", k.as_str(), py_str(v))).collect();
    let message = format!("{}: {}", finding.id.as_str(), params.join(", "));
    Expert { id: finding.id, severity: name!("warning"), message: Message::Owned(message) }
}

/// A rule an output line broke, or the record writer's error.
#[derive(Debug)]
pub struct Broken(pub String);

struct Proto {
    name: &'static str,
    engine: &'static dyn Protocol,
    framing: Box<dyn Framing>,
    max_frame_size: usize,
    client_role: String,
    /// server port → the server's role there
    ports: HashMap<u16, String>,
    json: &'static tables::ProtocolJson,
    table: tables::TableTemplate,
}

/// A connection on a protocol's port: its protocol, sides, texts and splitters.
struct Conn {
    proto: usize,
    server: usize,
    server_role: String,
    text: [String; 2],
    direction: [String; 2],
    splitters: [Option<Splitter>; 2],
    order: Vec<usize>,
}

/// What the end of a stream was, for what it leaves over: (how, closed by).
type End<'a> = Option<(&'a str, Option<String>)>;

/// The state of one run over one input.
struct Run<'p> {
    protos: &'p [Proto],
    analyzer: Analyzer,
    stats: Stats,
    reassembler: Reassembler,
    conns: HashMap<u64, Conn>,
    frame_index: u64,
    outputs: Vec<Output>,
    line: Vec<u8>,
    lines: u64,
    /// The frames' lines, each with its newline, when asked for (`run_lines`).
    frame_lines: Option<Vec<u8>>,
}

/// The protocols, built once.
pub struct Pipeline {
    protos: Vec<Proto>,
}

fn error_text(error: SourceError) -> Result<String, Foreign> {
    match error {
        SourceError::Gzip(text) => Ok(text),
        SourceError::Io(error) => Ok(error.to_string()),
        SourceError::Foreign(error) => Err(error),
    }
}

impl Pipeline {
    /// Read the tables.
    pub fn new() -> Pipeline {
        let tables = tables::load();
        // every protocol of the engine's registry that the Python side declares a table for
        let protos = REGISTRY
            .iter()
            .filter_map(|&engine| {
                let json = *tables.get(engine.name())?;
                Some(Proto {
                    name: engine.name(),
                    engine,
                    framing: engine.framing(),
                    max_frame_size: json.max_frame_size.unwrap_or(5 * 1024 * 1024 + 10 * 1024),
                    client_role: json.client_role.clone(),
                    ports: json.ports.iter().map(|(p, role)| (p.parse().expect("a port"), role.clone())).collect(),
                    json,
                    table: tables::TableTemplate::new(json),
                })
            })
            .collect();
        Pipeline { protos }
    }
}

/// A protocol as the analysis knows it, added on its first frame (as the binding does: most inputs have
/// frames of one protocol, or none).
fn analysis_protocol(proto: &Proto) -> ProtocolAnalysis {
    let options = Limits {
        max_actors: 10_000,
        max_remembered_messages: 100_000,
        max_remembered_total: 200_000,
        max_redelivered_reported: 1_000,
        max_chunked_messages: 256,
        max_chunk_bytes: 64 << 20,
        max_decompressed: MAX_DECOMPRESSED,
        redirect_loop_limit: 8,
    };
    let sessions = proto.json.session.as_deref().and_then(by_name).and_then(|protocol| protocol.sessions(&options));
    let role = proto.json.server_roles.first().cloned().unwrap_or_else(|| "server".into());
    ProtocolAnalysis { table: proto.table.build(), default_to_server: format!("to_{role}"), sessions }
}

impl Pipeline {
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
        {
            let mut run = Run {
                protos: &self.protos,
                analyzer: Analyzer::new(PairingOptions {
                    request_timeout: 30.0,
                    request_timeout_value: Value::Float(30.0),
                    max_pending_requests: MAX_PENDING_REQUESTS,
                }),
                stats: Stats::new(1000, 1000, 1000, 1000),
                reassembler: Reassembler::new(Config { max_connections: MAX_CONNECTIONS, ..Config::default() }),
                conns: HashMap::new(),
                frame_index: 0,
                outputs: Vec::new(),
                line: Vec::new(),
                lines: 0,
                frame_lines: frame_lines.as_ref().map(|_| Vec::new()),
            };
            let mut events = Vec::new();
            while let Ok(Some(packet)) = reader.next_packet() {
                let Ok(linktype) = u32::try_from(packet.linktype) else { continue };
                let bytes = reader.data(&packet);
                let orig_len = usize::try_from(packet.orig_len).unwrap_or(usize::MAX);
                let Some(seg) = tcp_segment(packet.index as i64, packet.timestamp, linktype, bytes, orig_len) else {
                    continue;
                };
                if run.port_of(seg.src_port).is_none() && run.port_of(seg.dst_port).is_none() {
                    continue; // other TCP: counted by the pipeline, never decoded
                }
                run.reassembler.feed(&seg, &mut events);
                for event in events.drain(..) {
                    run.stream_event(event)?;
                }
            }
            run.reassembler.finish(&mut events);
            for event in events.drain(..) {
                run.stream_event(event)?;
            }
            let mut ids: Vec<u64> = run.conns.keys().copied().collect();
            ids.sort_unstable();
            for id in ids {
                if let Some(mut conn) = run.conns.remove(&id) {
                    run.close_splitters(id, &mut conn, 0.0, 0, Some(("end_of_capture", None)))?;
                }
            }
            let mut outputs = std::mem::take(&mut run.outputs);
            run.analyzer.finish(&mut outputs);
            run.flush(&mut outputs, None)?;
            if let (Some(out), Some(lines)) = (frame_lines, run.frame_lines) {
                out.extend(lines);
            }
            Ok(run.lines)
        }
    }
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new()
    }
}

impl Run<'_> {
    fn port_of(&self, port: u16) -> Option<(usize, &str)> {
        self.protos.iter().enumerate().find_map(|(i, p)| p.ports.get(&port).map(|role| (i, role.as_str())))
    }

    fn stream_event(&mut self, event: StreamEvent) -> Result<(), Broken> {
        match event {
            StreamEvent::Opened { conn, time, packet, mid_stream } => {
                let on_b = self.port_of(conn.b.port).map(|(p, r)| (p, r.to_owned()));
                let Some((proto, role, server)) = on_b
                    .map(|(p, r)| (p, r, 1))
                    .or_else(|| self.port_of(conn.a.port).map(|(p, r)| (p, r.to_owned(), 0)))
                else {
                    return Ok(());
                };
                let text = [endpoint_text(&conn.a.ip, conn.a.port), endpoint_text(&conn.b.ip, conn.b.port)];
                let direction =
                    [0, 1].map(|side| if side == server { "to_client".to_owned() } else { format!("to_{role}") });
                let state = Conn {
                    proto,
                    server,
                    server_role: role,
                    text,
                    direction,
                    splitters: [None, None],
                    order: Vec::new(),
                };
                let details = vec![
                    entry(name!("client"), state.text[1 - server].clone()),
                    entry(name!("mid_stream"), mid_stream),
                ];
                self.conns.insert(conn.id, state);
                self.event("CONNECTION_OPENED", Some(conn.id), time, packet, mid_stream, details)
            }
            StreamEvent::Data { conn, side, saw_syn, data, offset, time, packet } => {
                let Some(mut state) = self.conns.remove(&conn) else { return Ok(()) };
                let result = self.feed(conn, &mut state, side, saw_syn, Ok(&data), offset, time, packet);
                self.conns.insert(conn, state);
                result
            }
            StreamEvent::Gap { conn, side, saw_syn, offset, length, time, packet, reason } => {
                let Some(mut state) = self.conns.remove(&conn) else { return Ok(()) };
                let details = vec![entry(name!("reason"), reason.to_owned())];
                let mut result = self.event("GAP", Some(conn), time, packet, false, details);
                if result.is_ok() {
                    result = self.feed(conn, &mut state, side, saw_syn, Err(length), offset, time, packet);
                }
                self.conns.insert(conn, state);
                result
            }
            StreamEvent::Ignored { conn, kind, length, time, packet, .. } => {
                self.event(kind, Some(conn), time, packet, false, vec![entry(name!("length"), length)])
            }
            StreamEvent::BufferDropped { conn, time, packet, limit, dropped } => {
                let details = vec![entry(name!("limit"), limit), entry(name!("dropped"), dropped)];
                self.event("STATE_DROPPED", Some(conn), time, packet, false, details)
            }
            StreamEvent::Closed { conn, time, packet, how, bytes, first_fin_from, rst_from, .. } => {
                let Some(mut state) = self.conns.remove(&conn) else { return Ok(()) };
                let closer = match how {
                    "fin" => first_fin_from,
                    "rst" => rst_from,
                    _ => None,
                };
                let closed_by = closer.map(|side| {
                    if side == state.server {
                        state.server_role.clone()
                    } else {
                        self.protos[state.proto].client_role.clone()
                    }
                });
                self.close_splitters(conn, &mut state, time, packet, Some((how, closed_by.clone())))?;
                let mut details = vec![entry(name!("how"), how.to_owned())];
                for (direction, bytes) in state.direction.iter().zip(bytes) {
                    details.push((Text::Owned(format!("bytes_{direction}")), Value::from(bytes)));
                }
                if let Some(by) = closed_by {
                    details.push(entry(name!("closed_by"), by));
                }
                self.event("CONNECTION_CLOSED", Some(conn), time, packet, false, details)
            }
        }
    }

    /// New bytes (Ok) or a gap of a length (Err) in one direction, through its splitter.
    #[allow(clippy::too_many_arguments)]
    fn feed(
        &mut self,
        id: u64,
        state: &mut Conn,
        side: usize,
        saw_syn: bool,
        data: Result<&[u8], i64>,
        offset: i64,
        time: f64,
        packet: i64,
    ) -> Result<(), Broken> {
        let protos = self.protos;
        let proto = &protos[state.proto];
        if state.splitters[side].is_none() {
            state.order.push(side);
        }
        let splitter = state.splitters[side]
            .get_or_insert_with(|| Splitter::new(saw_syn && offset == 0, proto.max_frame_size, offset));
        let mut items = Vec::new();
        match data {
            Ok(bytes) => splitter.feed(proto.framing.as_ref(), bytes, time, packet, &mut items),
            Err(length) => splitter.gap(proto.framing.as_ref(), length, time, packet, &mut items),
        }
        for item in items {
            self.split(id, state, side, item, &None)?;
        }
        Ok(())
    }

    fn close_splitters(
        &mut self,
        id: u64,
        state: &mut Conn,
        time: f64,
        packet: i64,
        end: End<'_>,
    ) -> Result<(), Broken> {
        let protos = self.protos;
        let proto = &protos[state.proto];
        let mut items = Vec::new();
        for side in state.order.clone() {
            let Some(splitter) = state.splitters[side].as_mut() else { continue };
            splitter.finish(proto.framing.as_ref(), time, packet, &mut items);
            for item in items.drain(..) {
                self.split(id, state, side, item, &end)?;
            }
        }
        Ok(())
    }

    fn split(&mut self, id: u64, state: &Conn, side: usize, item: Split, end: &End<'_>) -> Result<(), Broken> {
        match item {
            Split::Note(note) => {
                let mut details = note.details.clone();
                details.extend(note.params.clone());
                details.push(entry(name!("offset"), note.offset));
                details.push(entry(name!("length"), note.length));
                self.event(&note.kind, Some(id), note.time, note.packet, false, details)
            }
            Split::Pdu(pdu) => {
                let protos = self.protos;
                let proto = &protos[state.proto];
                let missing = usize::try_from(pdu.missing).unwrap_or(0);
                let mut decoded = proto.engine.decode(&pdu.data, missing, MAX_DECOMPRESSED, Depth::Full);
                if pdu.missing > 0 {
                    decoded.findings.insert(0, incomplete(&decoded, &pdu, end));
                }
                self.frame_index += 1;
                let frame = Frame {
                    index: self.frame_index,
                    protocol: proto.name,
                    conn: id,
                    src: &state.text[side],
                    dst: &state.text[1 - side],
                    direction: &state.direction[side],
                    time: pdu.time,
                    packet: u64::try_from(pdu.last_packet).unwrap_or(0),
                    pdu: &decoded,
                };
                if !self.analyzer.knows_protocol(proto.name) {
                    self.analyzer.add_protocol(proto.name, analysis_protocol(proto));
                }
                let mut outputs = std::mem::take(&mut self.outputs);
                self.analyzer.frame(&frame, &mut outputs);
                let result = self.flush(&mut outputs, Some((&frame, pdu.first_packet)));
                outputs.clear();
                self.outputs = outputs;
                result
            }
        }
    }

    /// A pipeline event: into the analysis (which passes it on), then its own line.
    fn event(
        &mut self,
        kind: &str,
        conn: Option<u64>,
        time: f64,
        packet: i64,
        mid_stream: bool,
        details: Map,
    ) -> Result<(), Broken> {
        let mut outputs = std::mem::take(&mut self.outputs);
        self.analyzer.event(kind, conn, time, u64::try_from(packet).unwrap_or(0), mid_stream, &mut outputs);
        let mut result = self.flush(&mut outputs, None);
        outputs.clear();
        self.outputs = outputs;
        if result.is_ok() {
            result = self.event_line(kind, time, conn, details);
        }
        result
    }

    /// An event's line and its statistics record (`output/records.py: event_record`'s keys).
    fn event_line(&mut self, kind: &str, time: f64, conn: Option<u64>, details: Map) -> Result<(), Broken> {
        let mut record = vec![entry(name!("type"), kind.to_owned()), entry(name!("time"), Value::Float(time))];
        if let Some(conn) = conn {
            record.push(entry(name!("conn"), conn));
        }
        if !details.is_empty() {
            record.push(entry(name!("details"), Value::Map(details)));
        }
        self.line.clear();
        write_json_map(&record, &mut self.line);
        check_line(&self.line, "an event's line")?;
        self.lines += 1;
        self.stats.add(&record);
        Ok(())
    }

    /// What the analysis gave: the frame's record (a JSON line, and its summary into the statistics), events.
    fn flush(&mut self, outputs: &mut Vec<Output>, frame: Option<(&Frame, i64)>) -> Result<(), Broken> {
        for output in outputs.drain(..) {
            match output {
                Output::Input => {}
                Output::Event(event) => {
                    let mut details = event.details;
                    details.extend(event.params);
                    self.event_line(event.kind.as_str(), event.time, event.conn, details)?;
                }
                Output::Annotated { notes, findings, .. } => {
                    let Some((frame, first_packet)) = frame else {
                        return Err(Broken("a frame's notes without the frame".into()));
                    };
                    self.record(frame, first_packet, &notes, &findings)?;
                }
            }
        }
        Ok(())
    }

    fn record(&mut self, frame: &Frame, first_packet: i64, notes: &Map, findings: &[Finding]) -> Result<(), Broken> {
        let broken = |e| Broken(format!("the record writer failed: {e}"));
        let expert: Vec<Expert<NoFront>> = frame.pdu.findings.iter().chain(findings).map(expert).collect();
        let input =
            RecordInput { frame, route: None, first_packet, expert: &expert, protocol_keys: None, notes, data: None };
        self.line.clear();
        build_record(&mut JsonSink::new(&mut self.line), &input, RecordStyle { summary: false, payload_bytes: true })
            .map_err(broken)?;
        check_line(&self.line, "a frame's JSON line")?;
        self.lines += 1;
        if let Some(out) = self.frame_lines.as_mut() {
            out.extend_from_slice(&self.line);
            out.push(b'\n');
        }
        // as `stats` reads them: the summary record into the core's statistics
        let mut sink = MapSink::new(Some(&STATS_KEPT));
        build_record(&mut sink, &input, RecordStyle { summary: true, payload_bytes: false }).map_err(broken)?;
        if let Some(record) = sink.into_record() {
            self.stats.add(&record);
        }
        Ok(())
    }
}

/// Why a PDU's last bytes are missing (`transport/pipeline.rs: incomplete`).
fn incomplete(decoded: &Decoded, pdu: &RawPdu, end: &End<'_>) -> Finding {
    if pdu.oversized {
        return finding!(GenericProblem::FrameOversizedHead, "head" => pdu.data.len(), "missing" => pdu.missing,
                        "size" => decoded.size);
    }
    match end {
        None => finding!(GenericProblem::FrameGapDamaged, "missing" => pdu.missing, "size" => decoded.size),
        Some((how, closed_by)) => {
            let mut finding = finding!(GenericProblem::FrameCutAtEnd, "missing" => pdu.missing, "size" => decoded.size,
                                       "how" => how.to_string());
            if let Some(by) = closed_by {
                finding.params.push(entry(name!("closed_by"), by.clone()));
            }
            finding
        }
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
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(dir);
        let mut found: Vec<_> = std::fs::read_dir(&dir)
            .expect("a folder of captures")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.to_string_lossy().contains(".pcap"))
            .collect();
        found.sort();
        found
    }

    /// The shipped captures and every kept regression input pass the checks, and make lines (frames get
    /// through the whole pipeline, so the fuzzer is not checking nothing).
    #[test]
    fn shipped_captures_and_regressions_pass() {
        let pipeline = Pipeline::new();
        for path in files("captures").into_iter().chain(files("captures/tubemq")).chain(files("tests/fuzz_regressions"))
        {
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
