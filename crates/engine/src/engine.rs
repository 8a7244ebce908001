//! The engine composed: capture → transport → protocols → analysis → sinks, in Rust alone. A capture's
//! packets go through the network layers and TCP reassembly; each connection on a protocol's server port is
//! split into PDUs by that protocol's framing and decoded by it (the registry's [`Protocol`], or any other
//! implementation handed in); the analysis pairs requests and responses from the protocol's command table and
//! keeps its sessions; every frame and event then goes to a [`Sink`], in capture order.
//!
//! What a front end declares comes in as plain data ([`ProtocolSetup`]: ports, roles, the command table) and
//! through traits ([`FindingTexts`]: the texts of findings, which the Python front end keeps in its templates).
//! Protocols are chosen by server port; a connection on no protocol's port is counted, never decoded.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;

use crate::analysis::join::{Flush, Join};
use crate::analysis::table::CommandTable;
use crate::analysis::{Event, Frame, PairingOptions, ProtocolAnalysis};
use crate::budget::{MemoryBudget, DEFAULT_MEMORY_BUDGET};
use crate::capture::Reader;
use crate::frame_record::{build_record, RecordInput};
use crate::model::{Decoded, Finding};
use crate::name;
use crate::pipeline::{DecodeSettings, Made, Pipeline, PipelineSettings, StreamNote, StreamProtocol};
use crate::protocols::{DecodeCaps, Depth, Limits, Protocol};
use crate::records::{Expert, Front, JsonSink, MapSink, NoFront, RecordStyle, SinkError, SinkResult};
use crate::stats::{Stats, STATS_KEPT};
use crate::tables::RecordTables;
use crate::transport::net::tcp_segment;
use crate::transport::reassembly::Config;
use crate::transport::splitter::Framing;
use crate::value::{entry, write_json_map, Map, Value};

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
    /// A batch's entries listed on its record (`DecodeCaps::max_batch_entries`).
    pub max_batch_entries: usize,
    /// Elements of repeated fields a protobuf message keeps (`DecodeCaps::max_repeated_elements`).
    pub max_repeated_elements: usize,
    pub depth: Depth,
    /// Each frame's bytes kept for its record's `frame_bytes` (`Options.keep_frame_bytes`).
    pub keep_frame_bytes: bool,
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
                max_chunk_bytes_total: 128 << 20,
                redirect_loop_limit: 8,
                memory_budget: MemoryBudget::new(DEFAULT_MEMORY_BUDGET),
            },
            max_batch_entries: crate::protocols::DEFAULT_MAX_BATCH_ENTRIES,
            max_repeated_elements: crate::pb::DEFAULT_MAX_REPEATED_ELEMENTS,
            depth: Depth::Full,
            keep_frame_bytes: false,
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
        /// the analysis' notes (record keys) and findings; the notes owned when the sink may keep them (the
        /// last sink an item goes to takes them without a copy)
        notes: Cow<'a, Map>,
        findings: &'a [Finding],
        /// the time and packet of the request the frame answers, as the analysis paired them
        answered: Option<(f64, u64)>,
        /// the frame's parts shared, when the front end has them so: what a sink needs to keep the frame
        /// past the call (`sinks`: its record written on another thread)
        shared: Option<Shared<'a>>,
        /// the frame's bytes, when they are kept (`Options.keep_frame_bytes`): its record's `frame_bytes`
        data: Option<&'a [u8]>,
    },
    Event {
        kind: &'a str,
        time: f64,
        conn: Option<u64>,
        details: &'a Map,
    },
}

/// A frame's decoded PDU and route as shared values (the frame's `pdu` and texts, the same again).
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    pub pdu: &'a Arc<Decoded>,
    /// protocol, src, dst, direction
    pub route: &'a [Arc<str>; 4],
}

impl Item<'_> {
    /// The same item again, for a sink that hands it on and uses it after.
    pub fn again(&self) -> Item<'_> {
        match self {
            Item::Frame { frame, first_packet, notes, findings, answered, shared, data } => Item::Frame {
                frame,
                first_packet: *first_packet,
                notes: Cow::Borrowed(notes.as_ref()),
                findings,
                answered: *answered,
                shared: *shared,
                data: *data,
            },
            Item::Event { kind, time, conn, details } => Item::Event { kind, time: *time, conn: *conn, details },
        }
    }
}

/// A frame's record input (with the texts of its findings, and its bytes if kept), for `build`.
pub fn with_record<R>(
    texts: &mut impl FindingTexts,
    frame: &Frame,
    first_packet: i64,
    notes: &Map,
    findings: &[Finding],
    data: Option<&[u8]>,
    build: impl FnOnce(&RecordInput<'_, NoFront>) -> R,
) -> R {
    let expert: Vec<Expert<NoFront>> = frame.pdu.findings.iter().chain(findings).map(|f| texts.expert(f)).collect();
    build(&RecordInput { frame, route: None, first_packet, expert: &expert, protocol_keys: None, notes, data })
}

/// What a run shares with its sinks, given before the first item.
pub struct RunContext {
    /// The run's memory budget: what a sink holding frames reserves from, as the run's other holders do.
    pub memory_budget: MemoryBudget,
}

/// Where frames and events go.
pub trait Sink {
    /// The run starts: what it shares (a sink that holds frames reserves them from its budget).
    fn start(&mut self, _run: &RunContext) {}

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
    /// The problems of the frames' records (what --strict counts).
    pub problems: u64,
}

impl<T: FindingTexts> JsonLines<T> {
    pub fn new(texts: T, style: RecordStyle) -> JsonLines<T> {
        JsonLines { texts, style, out: Vec::new(), lines: 0, problems: 0 }
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

/// A frame's record as its JSON line, appended to `out`; its problems. (Every front end's JSON lines.)
pub fn write_json_line<F: Front>(
    out: &mut Vec<u8>,
    input: &RecordInput<'_, F>,
    style: RecordStyle,
) -> SinkResult<usize> {
    let problems = build_record(&mut JsonSink::new(out), input, style)?;
    out.push(b'\n');
    Ok(problems)
}

/// A frame's record as the statistics read it (only the keys they count): its problems, and the record.
pub fn stats_record<F: Front>(input: &RecordInput<'_, F>, style: RecordStyle) -> SinkResult<(usize, Option<Map>)> {
    let mut sink = MapSink::new(Some(&STATS_KEPT));
    let problems = build_record(&mut sink, input, style)?;
    Ok((problems, sink.into_record()))
}

impl<T: FindingTexts> Sink for JsonLines<T> {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { frame, first_packet, notes, findings, data, .. } => {
                let (out, style) = (&mut self.out, self.style);
                let problems = with_record(&mut self.texts, frame, first_packet, &notes, findings, data, |input| {
                    write_json_line(out, input, style)
                })?;
                self.problems += problems as u64;
            }
            Item::Event { kind, time, conn, details } => {
                write_json_map(&event_record(kind, time, conn, details), &mut self.out);
                self.out.push(b'\n');
            }
        }
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
            Item::Frame { frame, first_packet, notes, findings, data, .. } => {
                // as `stats` reads them: the summary record
                let style = RecordStyle { summary: true, payload_bytes: false };
                let (_, record) = with_record(&mut self.texts, frame, first_packet, &notes, findings, data, |input| {
                    stats_record(input, style)
                })?;
                if let Some(record) = record {
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
    /// Frames' records put into the tables, and their problems (what --strict counts).
    pub frames: u64,
    pub problems: u64,
}

impl<T: FindingTexts> Tables<T> {
    pub fn new(texts: T, style: RecordStyle, tables: RecordTables) -> Tables<T> {
        Tables { texts, style, tables, frames: 0, problems: 0 }
    }
}

impl<T: FindingTexts> Sink for Tables<T> {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        if let Item::Frame { frame, first_packet, notes, findings, answered, data, .. } = item {
            let (tables, style) = (&mut self.tables, self.style);
            let problems = with_record(&mut self.texts, frame, first_packet, &notes, findings, data, |input| {
                tables.record(answered, |sink| build_record(sink, input, style))
            })?;
            self.frames += 1;
            self.problems += problems as u64;
        }
        Ok(())
    }
}

/// Two sinks fed the same items, the first first.
impl<A: Sink, B: Sink> Sink for (A, B) {
    fn start(&mut self, run: &RunContext) {
        self.0.start(run);
        self.1.start(run);
    }

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

/// A protocol set up, as the stages use it (its framing made once per run).
struct SetUp<'e> {
    setup: &'e ProtocolSetup,
    name: Arc<str>,
    framing: Box<dyn Framing>,
}

impl StreamProtocol for SetUp<'_> {
    type Decoded = Decoded;
    type Error = Infallible;

    fn name(&self) -> &Arc<str> {
        &self.name
    }
    fn framing(&self) -> &dyn Framing {
        self.framing.as_ref()
    }
    fn ports(&self) -> &[(u16, String)] {
        &self.setup.ports
    }
    fn client_role(&self) -> &str {
        &self.setup.client_role
    }
    fn server_roles(&self) -> &[String] {
        &self.setup.server_roles
    }
    fn max_frame_size(&self) -> Option<usize> {
        Some(self.setup.max_frame_size)
    }
    fn sender(&self, _type_name: &str) -> Option<&str> {
        None // (no detection: the sides come from the ports)
    }
    fn decode(&self, data: &[u8], missing: i64, how: &DecodeSettings) -> Result<Decoded, Infallible> {
        let missing = usize::try_from(missing).unwrap_or(0);
        Ok(self.setup.protocol.decode(data, missing, how.caps, how.depth))
    }
    fn confirms(&self, decoded: &mut Decoded) -> Result<bool, Infallible> {
        Ok(self.setup.protocol.confirms(decoded.type_name.as_str(), !decoded.findings.is_empty()))
    }
    fn type_name(&self, decoded: &Decoded) -> Result<String, Infallible> {
        Ok(decoded.type_name.as_str().to_owned())
    }
    fn size(&self, decoded: &Decoded) -> Result<Value, Infallible> {
        Ok(decoded.size.into())
    }
    fn with_finding_first(&self, mut decoded: Decoded, finding: Finding) -> Result<Decoded, Infallible> {
        decoded.findings.insert(0, finding);
        Ok(decoded)
    }
}

fn infallible<T>(result: Result<T, Infallible>) -> T {
    match result {
        Ok(value) => value,
        Err(never) => match never {},
    }
}

impl Engine {
    pub fn new(protocols: Vec<ProtocolSetup>, settings: Settings) -> Engine {
        Engine { protocols, settings }
    }

    /// Every packet of the capture through the stages into `sink`; the number of packets read. Stops at the
    /// first error of the sink; a reader's error ends the capture as the CLI ends it (what was read counts).
    pub fn run(&self, reader: &mut Reader, sink: &mut dyn Sink) -> SinkResult<u64> {
        let settings = &self.settings;
        // this run's own count of the budget, the same for the reassembly and the sessions
        let limits = Limits { memory_budget: settings.limits.memory_budget.fresh(), ..settings.limits.clone() };
        let protocols = self
            .protocols
            .iter()
            .map(|setup| SetUp { setup, name: Arc::from(setup.protocol.name()), framing: setup.protocol.framing() })
            .collect();
        let mut pipeline = Pipeline::new(
            PipelineSettings {
                detect: false,
                detect_budget: 0,
                max_frame_size: None,
                keep_frame_bytes: settings.keep_frame_bytes,
                extra_ports: Vec::new(),
                reassembly: Config {
                    max_connections: settings.max_connections,
                    budget: limits.memory_budget.clone(),
                    ..Config::default()
                },
                decode: DecodeSettings {
                    caps: DecodeCaps {
                        max_decompressed: settings.limits.max_decompressed,
                        max_batch_entries: settings.max_batch_entries,
                        max_repeated_elements: settings.max_repeated_elements,
                    },
                    depth: settings.depth,
                },
            },
            protocols,
        );
        sink.start(&RunContext { memory_budget: limits.memory_budget.clone() });
        let mut run = Run {
            limits,
            sink,
            join: Join::new(PairingOptions {
                request_timeout: settings.request_timeout,
                request_timeout_value: Value::Float(settings.request_timeout),
                max_pending_requests: settings.max_pending_requests,
            }),
        };
        let mut made = Vec::new();
        let mut packets = 0;
        while let Ok(Some(packet)) = reader.next_packet() {
            packets += 1;
            let Ok(linktype) = u32::try_from(packet.linktype) else { continue };
            let bytes = reader.data(&packet);
            let orig_len = usize::try_from(packet.orig_len).unwrap_or(usize::MAX);
            let Some(seg) = tcp_segment(packet.index as i64, packet.timestamp, linktype, bytes, orig_len) else {
                continue;
            };
            infallible(pipeline.feed_segment(&seg, &mut made));
            for item in made.drain(..) {
                run.made(&pipeline, item)?;
            }
        }
        infallible(pipeline.finish(&mut made));
        for item in made.drain(..) {
            run.made(&pipeline, item)?;
        }
        run.finish()?;
        Ok(packets)
    }
}

/// The state of one run over one capture past the stages: the analysis joined, and the sink.
struct Run<'s> {
    limits: Limits,
    sink: &'s mut dyn Sink,
    join: Join,
}

/// A frame the stages decoded, as the sink gets it: the analysis' view and the packet of its first byte.
struct MadeFrame<'a> {
    frame: &'a Frame<'a>,
    first_packet: i64,
    shared: Shared<'a>,
    /// the frame's bytes, if the pipeline kept them
    data: Option<&'a [u8]>,
}

/// The analysis' outputs as the sink's items.
struct Items<'s>(&'s mut dyn Sink);

impl Flush<MadeFrame<'_>, StreamNote> for Items<'_> {
    type Error = SinkError;

    fn input(&mut self, note: &StreamNote) -> SinkResult<()> {
        let (kind, time, conn) = (note.kind.as_str(), note.time, note.conn);
        self.0.item(Item::Event { kind, time, conn, details: &note.details })
    }

    fn annotated(
        &mut self,
        made: &MadeFrame<'_>,
        notes: Map,
        findings: Vec<Finding>,
        answered: Option<(f64, u64)>,
    ) -> SinkResult<()> {
        let (frame, first_packet, shared) = (made.frame, made.first_packet, Some(made.shared));
        self.0.item(Item::Frame {
            frame,
            first_packet,
            notes: Cow::Owned(notes),
            findings: &findings,
            answered,
            shared,
            data: made.data,
        })
    }

    fn event(&mut self, event: Event) -> SinkResult<()> {
        let Event { kind, time, conn, details, .. } = event;
        self.0.item(Item::Event { kind: kind.as_str(), time, conn, details: &details })
    }

    fn misplaced(&mut self, what: &'static str) -> SinkError {
        SinkError::Misplaced(what)
    }
}

impl Run<'_> {
    fn made(&mut self, pipeline: &Pipeline<SetUp<'_>>, made: Made<Decoded>) -> SinkResult<()> {
        let mut items = Items(&mut *self.sink);
        match made {
            Made::Note(note) => {
                let mid_stream = note
                    .details
                    .iter()
                    .any(|(key, value)| key.as_str() == "mid_stream" && matches!(value, Value::Bool(true)));
                let packet = u64::try_from(note.packet).unwrap_or(0);
                self.join.event(&note.kind, note.conn, note.time, packet, mid_stream, &note, &mut items)
            }
            Made::Frame(place, decoded) => {
                let protocol = &pipeline.protocols()[place.protocol];
                let setup = protocol.setup;
                // (shared, so that a sink may keep it: the record written on another thread)
                let decoded = Arc::new(decoded);
                let route = [
                    Arc::clone(&protocol.name),
                    Arc::clone(&place.src),
                    Arc::clone(&place.dst),
                    Arc::clone(&place.direction),
                ];
                let frame = Frame {
                    index: place.index,
                    protocol: setup.protocol.name(),
                    conn: place.conn,
                    src: &place.src,
                    dst: &place.dst,
                    direction: &place.direction,
                    time: place.time,
                    packet: u64::try_from(place.packet).unwrap_or(0),
                    pdu: &decoded,
                };
                let first_sight = || {
                    let role = setup.server_roles.first().map_or("server", String::as_str);
                    Ok(ProtocolAnalysis {
                        table: (setup.table)(),
                        default_to_server: format!("to_{role}"),
                        sessions: setup.protocol.sessions(&self.limits),
                    })
                };
                let shared = Shared { pdu: &decoded, route: &route };
                let data = place.data.as_deref();
                let made = MadeFrame { frame: &frame, first_packet: place.first_packet, shared, data };
                self.join.frame(&frame, first_sight, &made, &mut items)
            }
        }
    }

    /// The analysis' last words.
    fn finish(&mut self) -> SinkResult<()> {
        self.join.finish(&mut Items(&mut *self.sink))
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
