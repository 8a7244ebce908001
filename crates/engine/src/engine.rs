//! The engine composed: capture → transport → protocols → analysis → sinks, in Rust alone. A capture's
//! packets go through the network layers and TCP reassembly; each connection on a protocol's server port is
//! split into PDUs by that protocol's framing and decoded by it (the registry's [`Protocol`], or any other
//! implementation handed in); the analysis pairs requests and responses from the protocol's command table and
//! keeps its sessions; every frame and event then goes to a [`Sink`], in capture order.
//!
//! What a front end declares comes in as plain data ([`ProtocolSetup`]: ports, roles, the command table) and
//! through traits ([`FindingTexts`]: the texts of findings, which the Python front end keeps in its templates).
//! Protocols are chosen by server port; a connection on no protocol's port is counted, never decoded.

use std::collections::HashMap;

use crate::analysis::table::CommandTable;
use crate::analysis::{
    Analyzer, Event, Frame, Output, PairingOptions, ProtocolAnalysis, CONNECTION_CLOSED, CONNECTION_OPENED,
};
use crate::capture::Reader;
use crate::model::{Decoded, Finding};
use crate::problems::GenericProblem;
use crate::protocols::{Depth, Limits, Protocol};
use crate::records::{
    build_record, Expert, JsonSink, MapSink, NoFront, RecordInput, RecordStyle, SinkError, SinkResult,
};
use crate::stats::{Stats, STATS_KEPT};
use crate::tables::RecordTables;
use crate::transport::net::{endpoint_text, tcp_segment};
use crate::transport::reassembly::{Config, Reassembler, StreamEvent};
use crate::transport::splitter::{Framing, RawPdu, Split, Splitter};
use crate::value::{entry, write_json_map, Map, Text, Value};
use crate::{finding, name};

/// A protocol as a front end sets it up: the protocol itself, and what the front end declares of it.
pub struct ProtocolSetup {
    pub protocol: &'static dyn Protocol,
    /// server port → the server's role there
    pub ports: Vec<(u16, String)>,
    pub client_role: String,
    /// The server roles; the first is the one a client's requests go to before any is seen.
    pub server_roles: Vec<String>,
    /// Its largest frame; above, a frame is cut to its head.
    pub max_frame_size: usize,
    /// Its command table, made afresh for each run (the analysis owns the table it is given).
    pub table: Box<dyn Fn() -> CommandTable + Sync>,
}

/// The engine's caps and choices.
#[derive(Clone, Debug)]
pub struct Settings {
    pub max_connections: usize,
    pub max_pending_requests: usize,
    /// Seconds after which a request still waiting is OVERDUE.
    pub request_timeout: f64,
    pub limits: Limits,
    pub depth: Depth,
}

impl Default for Settings {
    /// The front end's defaults (`dissector.options.Options`).
    fn default() -> Settings {
        Settings {
            max_connections: 100_000,
            max_pending_requests: 100_000,
            request_timeout: 30.0,
            limits: Limits {
                max_decompressed: 64 << 20,
                max_actors: 10_000,
                max_remembered_messages: 100_000,
                max_remembered_total: 200_000,
                max_redelivered_reported: 1_000,
                max_chunked_messages: 256,
                max_chunk_bytes: 64 << 20,
                redirect_loop_limit: 8,
            },
            depth: Depth::Full,
        }
    }
}

/// The severity and text of findings, which the front end declares (the Python one: `dissector/problems.py`).
pub trait FindingTexts {
    fn expert(&mut self, finding: &Finding) -> Expert<NoFront>;
}

/// What the engine hands a sink: a frame with its analysis, or an event (the transport's, the splitter's
/// or the analysis'), in capture order.
pub enum Item<'a> {
    Frame {
        frame: &'a Frame<'a>,
        /// the packet of the frame's first byte
        first_packet: i64,
        /// the analysis' notes (record keys) and findings
        notes: &'a Map,
        findings: &'a [Finding],
        /// the time and packet of the request the frame answers, as the analysis paired them
        answered: Option<(f64, u64)>,
    },
    Event {
        kind: &'a str,
        time: f64,
        conn: Option<u64>,
        details: &'a Map,
    },
}

impl Item<'_> {
    /// The same item again, for a sink that hands it on and uses it after.
    pub fn again(&self) -> Item<'_> {
        match self {
            Item::Frame { frame, first_packet, notes, findings, answered } => {
                Item::Frame { frame, first_packet: *first_packet, notes, findings, answered: *answered }
            }
            Item::Event { kind, time, conn, details } => Item::Event { kind, time: *time, conn: *conn, details },
        }
    }
}

/// A frame's record input (with the texts of its findings), for `build`.
fn with_record<R>(
    texts: &mut impl FindingTexts,
    frame: &Frame,
    first_packet: i64,
    notes: &Map,
    findings: &[Finding],
    build: impl FnOnce(&RecordInput<'_, NoFront>) -> R,
) -> R {
    let expert: Vec<Expert<NoFront>> = frame.pdu.findings.iter().chain(findings).map(|f| texts.expert(f)).collect();
    build(&RecordInput { frame, route: None, first_packet, expert: &expert, protocol_keys: None, notes, data: None })
}

/// Where frames and events go.
pub trait Sink {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()>;
}

/// Each frame's record as its JSON line (`--json`'s contract), each event as a line of its type, time,
/// connection and details, into one buffer; the texts of findings from `texts`.
pub struct JsonLines<T: FindingTexts> {
    pub texts: T,
    pub style: RecordStyle,
    pub out: Vec<u8>,
    /// Lines written.
    pub lines: u64,
}

impl<T: FindingTexts> JsonLines<T> {
    pub fn new(texts: T, style: RecordStyle) -> JsonLines<T> {
        JsonLines { texts, style, out: Vec::new(), lines: 0 }
    }
}

/// The record of an event as the statistics and `--json` read it: type, time, conn, details.
pub fn event_record(kind: &str, time: f64, conn: Option<u64>, details: &Map) -> Map {
    let mut record = vec![entry(name!("type"), kind.to_owned()), entry(name!("time"), Value::Float(time))];
    if let Some(conn) = conn {
        record.push(entry(name!("conn"), conn));
    }
    if !details.is_empty() {
        record.push(entry(name!("details"), Value::Map(details.clone())));
    }
    record
}

impl<T: FindingTexts> Sink for JsonLines<T> {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { frame, first_packet, notes, findings, .. } => {
                let (out, style) = (&mut self.out, self.style);
                with_record(&mut self.texts, frame, first_packet, notes, findings, |input| {
                    build_record(&mut JsonSink::new(out), input, style)
                })?;
            }
            Item::Event { kind, time, conn, details } => {
                write_json_map(&event_record(kind, time, conn, details), &mut self.out);
            }
        }
        self.out.push(b'\n');
        self.lines += 1;
        Ok(())
    }
}

/// The statistics (`stats`) of the frames' records and the events, as `stats` counts them.
pub struct Statistics<T: FindingTexts> {
    pub texts: T,
    pub stats: Stats,
}

impl<T: FindingTexts> Sink for Statistics<T> {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { frame, first_packet, notes, findings, .. } => {
                // as `stats` reads them: the summary record, only the keys it counts
                let mut sink = MapSink::new(Some(&STATS_KEPT));
                with_record(&mut self.texts, frame, first_packet, notes, findings, |input| {
                    build_record(&mut sink, input, RecordStyle { summary: true, payload_bytes: false })
                })?;
                if let Some(record) = sink.into_record() {
                    self.stats.add(&record);
                }
            }
            Item::Event { kind, time, conn, details } => self.stats.add(&event_record(kind, time, conn, details)),
        }
        Ok(())
    }
}

/// Each frame's record into the pipeline's Arrow tables ([`RecordTables`]); events are no rows there.
pub struct Tables<T: FindingTexts> {
    pub texts: T,
    pub style: RecordStyle,
    pub tables: RecordTables,
}

impl<T: FindingTexts> Sink for Tables<T> {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        if let Item::Frame { frame, first_packet, notes, findings, answered } = item {
            let (tables, style) = (&mut self.tables, self.style);
            with_record(&mut self.texts, frame, first_packet, notes, findings, |input| {
                tables.record(answered, |sink| build_record(sink, input, style))
            })?;
        }
        Ok(())
    }
}

/// Two sinks fed the same items, the first first.
impl<A: Sink, B: Sink> Sink for (A, B) {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        self.0.item(item.again())?;
        self.1.item(item)
    }
}

// ------------------------------------------------------------------------------------------ the engine

/// The protocols set up, for any number of runs.
pub struct Engine {
    protocols: Vec<ProtocolSetup>,
    settings: Settings,
}

impl Engine {
    pub fn new(protocols: Vec<ProtocolSetup>, settings: Settings) -> Engine {
        Engine { protocols, settings }
    }

    /// Every packet of the capture through the stages into `sink`; the number of packets read. Stops at the
    /// first error of the sink; a reader's error ends the capture as the CLI ends it (what was read counts).
    pub fn run(&self, reader: &mut Reader, sink: &mut dyn Sink) -> SinkResult<u64> {
        let mut run = Run::new(self, sink);
        let mut events = Vec::new();
        let mut packets = 0;
        while let Ok(Some(packet)) = reader.next_packet() {
            packets += 1;
            let Ok(linktype) = u32::try_from(packet.linktype) else { continue };
            let bytes = reader.data(&packet);
            let orig_len = usize::try_from(packet.orig_len).unwrap_or(usize::MAX);
            let Some(seg) = tcp_segment(packet.index as i64, packet.timestamp, linktype, bytes, orig_len) else {
                continue;
            };
            if run.port_of(seg.src_port).is_none() && run.port_of(seg.dst_port).is_none() {
                continue; // other TCP: never decoded
            }
            run.reassembler.feed(&seg, &mut events);
            for event in events.drain(..) {
                run.stream_event(event)?;
            }
        }
        run.finish()?;
        Ok(packets)
    }
}

/// A connection on a protocol's port: its protocol, sides, texts and splitters.
struct Conn {
    proto: usize,
    server: usize,
    server_role: String,
    text: [String; 2],
    direction: [String; 2],
    splitters: [Option<Splitter>; 2],
    /// The sides in the order their splitters were made (closed in that order).
    order: Vec<usize>,
}

/// What the end of a stream was, for what it leaves over: (how, closed by).
type End<'a> = Option<(&'a str, Option<String>)>;

/// The state of one run over one capture.
struct Run<'e, 's> {
    engine: &'e Engine,
    framings: Vec<Box<dyn Framing>>,
    sink: &'s mut dyn Sink,
    analyzer: Analyzer,
    reassembler: Reassembler,
    conns: HashMap<u64, Conn>,
    frame_index: u64,
    outputs: Vec<Output>,
}

impl<'e, 's> Run<'e, 's> {
    fn new(engine: &'e Engine, sink: &'s mut dyn Sink) -> Run<'e, 's> {
        let settings = &engine.settings;
        Run {
            engine,
            framings: engine.protocols.iter().map(|setup| setup.protocol.framing()).collect(),
            sink,
            analyzer: Analyzer::new(PairingOptions {
                request_timeout: settings.request_timeout,
                request_timeout_value: Value::Float(settings.request_timeout),
                max_pending_requests: settings.max_pending_requests,
            }),
            reassembler: Reassembler::new(Config { max_connections: settings.max_connections, ..Config::default() }),
            conns: HashMap::new(),
            frame_index: 0,
            outputs: Vec::new(),
        }
    }

    fn port_of(&self, port: u16) -> Option<(usize, &str)> {
        self.engine
            .protocols
            .iter()
            .enumerate()
            .find_map(|(i, setup)| setup.ports.iter().find(|(p, _)| *p == port).map(|(_, role)| (i, role.as_str())))
    }

    /// The end of the capture: every stream's end, every splitter's rest, the analysis' last words.
    fn finish(&mut self) -> SinkResult<()> {
        let mut events = Vec::new();
        self.reassembler.finish(&mut events);
        for event in events.drain(..) {
            self.stream_event(event)?;
        }
        let mut ids: Vec<u64> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(mut conn) = self.conns.remove(&id) {
                self.close_splitters(id, &mut conn, 0.0, 0, Some(("end_of_capture", None)))?;
            }
        }
        let mut outputs = std::mem::take(&mut self.outputs);
        self.analyzer.finish(&mut outputs);
        self.flush(&mut outputs, None)
    }

    fn stream_event(&mut self, event: StreamEvent) -> SinkResult<()> {
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
                self.event(CONNECTION_OPENED, Some(conn.id), time, packet, mid_stream, details)
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
                        self.engine.protocols[state.proto].client_role.clone()
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
                self.event(CONNECTION_CLOSED, Some(conn), time, packet, false, details)
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
    ) -> SinkResult<()> {
        let max_frame_size = self.engine.protocols[state.proto].max_frame_size;
        if state.splitters[side].is_none() {
            state.order.push(side);
        }
        let splitter =
            state.splitters[side].get_or_insert_with(|| Splitter::new(saw_syn && offset == 0, max_frame_size, offset));
        let framing = self.framings[state.proto].as_ref();
        let mut items = Vec::new();
        match data {
            Ok(bytes) => splitter.feed(framing, bytes, time, packet, &mut items),
            Err(length) => splitter.gap(framing, length, time, packet, &mut items),
        }
        for item in items {
            self.split(id, state, side, item, &None)?;
        }
        Ok(())
    }

    fn close_splitters(&mut self, id: u64, state: &mut Conn, time: f64, packet: i64, end: End<'_>) -> SinkResult<()> {
        let mut items = Vec::new();
        for side in state.order.clone() {
            let Some(splitter) = state.splitters[side].as_mut() else { continue };
            splitter.finish(self.framings[state.proto].as_ref(), time, packet, &mut items);
            for item in items.drain(..) {
                self.split(id, state, side, item, &end)?;
            }
        }
        Ok(())
    }

    fn split(&mut self, id: u64, state: &Conn, side: usize, item: Split, end: &End<'_>) -> SinkResult<()> {
        match item {
            Split::Note(note) => {
                let mut details = note.details.clone();
                details.extend(note.params.clone());
                details.push(entry(name!("offset"), note.offset));
                details.push(entry(name!("length"), note.length));
                self.event(&note.kind, Some(id), note.time, note.packet, false, details)
            }
            Split::Pdu(pdu) => {
                let engine = self.engine;
                let setup = &engine.protocols[state.proto];
                let (protocol, settings) = (setup.protocol, &engine.settings);
                let missing = usize::try_from(pdu.missing).unwrap_or(0);
                let mut decoded = protocol.decode(&pdu.data, missing, settings.limits.max_decompressed, settings.depth);
                if pdu.missing > 0 {
                    decoded.findings.insert(0, incomplete(&decoded, &pdu, end));
                }
                self.frame_index += 1;
                let frame = Frame {
                    index: self.frame_index,
                    protocol: protocol.name(),
                    conn: id,
                    src: &state.text[side],
                    dst: &state.text[1 - side],
                    direction: &state.direction[side],
                    time: pdu.time,
                    packet: u64::try_from(pdu.last_packet).unwrap_or(0),
                    pdu: &decoded,
                };
                if !self.analyzer.knows_protocol(protocol.name()) {
                    let role = setup.server_roles.first().map_or("server", String::as_str);
                    let analysis = ProtocolAnalysis {
                        table: (setup.table)(),
                        default_to_server: format!("to_{role}"),
                        sessions: protocol.sessions(&settings.limits),
                    };
                    self.analyzer.add_protocol(protocol.name(), analysis);
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

    /// A pipeline event: into the analysis (which passes it on), then to the sink.
    fn event(
        &mut self,
        kind: &str,
        conn: Option<u64>,
        time: f64,
        packet: i64,
        mid_stream: bool,
        details: Map,
    ) -> SinkResult<()> {
        let mut outputs = std::mem::take(&mut self.outputs);
        self.analyzer.event(kind, conn, time, u64::try_from(packet).unwrap_or(0), mid_stream, &mut outputs);
        let result = self.flush(&mut outputs, None);
        outputs.clear();
        self.outputs = outputs;
        result?;
        self.sink.item(Item::Event { kind, time, conn, details: &details })
    }

    /// What the analysis gave: the frame's record, events.
    fn flush(&mut self, outputs: &mut Vec<Output>, frame: Option<(&Frame, i64)>) -> SinkResult<()> {
        for output in outputs.drain(..) {
            match output {
                Output::Input => {}
                Output::Event(Event { kind, time, conn, mut details, params, .. }) => {
                    details.extend(params);
                    self.sink.item(Item::Event { kind: kind.as_str(), time, conn, details: &details })?;
                }
                Output::Annotated { notes, findings, answered } => {
                    let (frame, first_packet) =
                        frame.ok_or(SinkError::Misplaced("a frame's notes without the frame"))?;
                    self.sink.item(Item::Frame {
                        frame,
                        first_packet,
                        notes: &notes,
                        findings: &findings,
                        answered,
                    })?;
                }
            }
        }
        Ok(())
    }
}

/// Why a PDU's last bytes are missing.
fn incomplete(decoded: &Decoded, pdu: &RawPdu, end: &End<'_>) -> Finding {
    if pdu.oversized {
        let (head, missing, size) = (pdu.data.len(), pdu.missing, decoded.size);
        return finding!(GenericProblem::FrameOversizedHead, "head" => head, "missing" => missing, "size" => size);
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

/// A sink that counts what it is given, for callers that only drive the stages.
#[derive(Default)]
pub struct Count {
    pub frames: u64,
    pub events: u64,
}

impl Sink for Count {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { .. } => self.frames += 1,
            Item::Event { .. } => self.events += 1,
        }
        Ok(())
    }
}
