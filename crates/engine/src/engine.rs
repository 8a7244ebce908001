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
use crate::analysis::{Event, EventHead, Frame, PairingOptions, ProtocolAnalysis};
use crate::budget::{MemoryBudget, DEFAULT_MEMORY_BUDGET};
use crate::capture::Reader;
pub use crate::event_record::EventItem;
use crate::frame_record::{build_record, RecordInput};
use crate::model::{Decoded, Finding};
use crate::name;
use crate::pipeline::{DecodeSettings, Made, Pipeline, PipelineSettings, Place, StreamNote, StreamProtocol};
use crate::protocols::{DecodeCaps, Depth, Limits, Protocol};
use crate::records::{Expert, Front, JsonSink, MapSink, NoFront, RecordStyle, SinkError, SinkResult};
use crate::stats::{Stats, STATS_KEPT};
use crate::tables::RecordTables;
use crate::transport::net::{tcp_segment, Segment};
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
    Event(EventItem<'a>),
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
            Item::Event(event) => Item::Event(*event),
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
            Item::Event(EventItem { kind, time, conn, details, .. }) => {
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
            Item::Event(EventItem { kind, time, conn, details, .. }) => {
                self.stats.add(&event_record(kind, time, conn, details))
            }
        }
        Ok(())
    }
}

/// Each frame's record and each event into the pipeline's Arrow tables ([`RecordTables`]).
pub struct Tables<T: FindingTexts> {
    pub texts: T,
    pub style: RecordStyle,
    pub tables: RecordTables,
    /// Frames' records put into the tables, and their problems (what --strict counts).
    pub frames: u64,
    pub problems: u64,
    /// Events put into the tables.
    pub events: u64,
}

impl<T: FindingTexts> Tables<T> {
    pub fn new(texts: T, style: RecordStyle, tables: RecordTables) -> Tables<T> {
        Tables { texts, style, tables, frames: 0, problems: 0, events: 0 }
    }
}

impl<T: FindingTexts> Sink for Tables<T> {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { frame, first_packet, notes, findings, answered, data, .. } => {
                let (tables, style) = (&mut self.tables, self.style);
                let problems = with_record(&mut self.texts, frame, first_packet, &notes, findings, data, |input| {
                    tables.record(answered, |sink| build_record(sink, input, style))
                })?;
                self.frames += 1;
                self.problems += problems as u64;
            }
            Item::Event(event) => {
                // its severity and text as a finding's, from the front end's template of its kind
                let finding = Finding { id: crate::analysis::intern(event.kind), params: event.text_params() };
                let Expert { severity, message, .. } = self.texts.expert(&finding);
                self.tables.event(&event, severity.as_str(), &message.to_owned_text()?);
                self.events += 1;
            }
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
        let mut run = self.start(sink);
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
            run.feed_segment(&seg, &mut made);
            for item in made.drain(..) {
                run.analyse(item, sink)?;
            }
        }
        run.finish_stages(&mut made);
        for item in made.drain(..) {
            run.analyse(item, sink)?;
        }
        run.finish(sink)?;
        Ok(packets)
    }

    /// A run started, to be driven a step at a time (as [`Engine::run`] drives it); `sink` told what the run
    /// shares with it.
    pub fn start(&self, sink: &mut dyn Sink) -> Run<'_> {
        let settings = &self.settings;
        // this run's own count of the budget, the same for the reassembly and the sessions
        let limits = Limits { memory_budget: settings.limits.memory_budget.fresh(), ..settings.limits.clone() };
        let protocols = self
            .protocols
            .iter()
            .map(|setup| SetUp { setup, name: Arc::from(setup.protocol.name()), framing: setup.protocol.framing() })
            .collect();
        let stages = Pipeline::new(
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
        let pairing = PairingOptions {
            request_timeout: settings.request_timeout,
            request_timeout_value: Value::Float(settings.request_timeout),
            max_pending_requests: settings.max_pending_requests,
        };
        Run { analysed: Analysed::new(stages, pairing), setups: FromSetups { limits } }
    }
}

// ------------------------------------------------------------------------ the stages and the analysis composed

/// The stages ([`Pipeline`]) and the analysis' join ([`Join`]) composed, driven a step at a time: segments in,
/// what the stages make out (into a `Vec` the caller may hold a while), and each thing they made analysed
/// into a [`Flush`]. The one composition every front end drives ([`Engine::run`], the Python binding's).
///
/// What differs between front ends comes in through [`AnalysisFront`] (how a frame the stages made is kept
/// for the outputs, how a protocol's analysis is made) and the `Flush` (where the outputs go).
pub struct Analysed<P: StreamProtocol> {
    stages: Pipeline<P>,
    join: Join,
}

/// What a front end gives the composition: the frames the stages made, as the analysis and the outputs read
/// them, and each protocol's analysis.
pub trait AnalysisFront<P: StreamProtocol> {
    type Error;
    /// What the front end keeps of a frame the stages made, for its outputs (given back in [`StagedFrame`]).
    type Kept;
    /// A frame `protocol`'s stages made: the PDU the analysis reads (shared, so that an output may keep it)
    /// and what the front end keeps of the frame.
    fn frame(
        &mut self,
        protocol: &P,
        place: &Place,
        decoded: P::Decoded,
    ) -> Result<(Arc<Decoded>, Self::Kept), Self::Error>;
    /// `protocol`'s analysis (its command table and sessions), made at its first frame.
    fn first_sight(&mut self, protocol: &P) -> Result<ProtocolAnalysis, Self::Error>;
}

/// A frame the stages made, as the flush gets it back: the analysis' view, where it was, its PDU, and what the
/// front end kept of it.
pub struct StagedFrame<'a, K> {
    pub frame: &'a Frame<'a>,
    pub place: &'a Place,
    pub pdu: &'a Arc<Decoded>,
    pub kept: &'a K,
}

impl<P: StreamProtocol> Analysed<P> {
    pub fn new(stages: Pipeline<P>, pairing: PairingOptions) -> Analysed<P> {
        Analysed { stages, join: Join::new(pairing) }
    }

    pub fn stages(&self) -> &Pipeline<P> {
        &self.stages
    }

    /// The stages, for their settings and numbering (what they make goes through the methods below).
    pub fn stages_mut(&mut self) -> &mut Pipeline<P> {
        &mut self.stages
    }

    /// A segment through the stages: what it completes into `made`, to be analysed in order.
    pub fn feed_segment(&mut self, segment: &Segment, made: &mut Vec<Made<P::Decoded>>) -> Result<(), P::Error> {
        self.stages.feed_segment(segment, made)
    }

    /// The clock moved to `now` for the stages: what their expiries make into `made`.
    pub fn tick_stages(&mut self, now: f64, made: &mut Vec<Made<P::Decoded>>) -> Result<(), P::Error> {
        self.stages.tick(now, made)
    }

    /// The end of the capture for the stages (every connection closed): what it makes into `made`.
    pub fn finish_stages(&mut self, made: &mut Vec<Made<P::Decoded>>) -> Result<(), P::Error> {
        self.stages.finish(made)
    }

    /// `finish_stages` for at most `most` connections: true once the end of the capture is all told.
    pub fn finish_some_stages(&mut self, made: &mut Vec<Made<P::Decoded>>, most: usize) -> Result<bool, P::Error> {
        self.stages.finish_some(made, most)
    }

    /// One thing the stages made, through the analysis into `flush`: a note as an event, a frame as the
    /// analysis' view of it (`front` keeps it and makes its protocol's analysis at its first frame).
    pub fn analyse<K, E, F, S>(&mut self, made: Made<P::Decoded>, front: &mut F, flush: &mut S) -> Result<(), E>
    where
        F: AnalysisFront<P, Kept = K, Error = E>,
        S: for<'a> Flush<StagedFrame<'a, K>, StreamNote, Error = E>,
    {
        match made {
            Made::Note(note) => {
                let head = EventHead {
                    kind: &note.kind,
                    conn: note.conn,
                    time: note.time,
                    packet: u64::try_from(note.packet).unwrap_or(0),
                    mid_stream: note.details.iter().any(|(key, value)| key.as_str() == "mid_stream" && value.truthy()),
                };
                self.join.event(head, &note, flush)
            }
            Made::Frame(place, decoded) => {
                let protocol = &self.stages.protocols()[place.protocol];
                let (pdu, kept) = front.frame(protocol, &place, decoded)?;
                let frame = Frame {
                    index: place.index,
                    protocol: protocol.name(),
                    conn: place.conn,
                    src: &place.src,
                    dst: &place.dst,
                    direction: &place.direction,
                    time: place.time,
                    packet: u64::try_from(place.packet).unwrap_or(0),
                    pdu: &pdu,
                };
                let staged = StagedFrame { frame: &frame, place: &place, pdu: &pdu, kept: &kept };
                self.join.frame(&frame, || front.first_sight(protocol), &staged, flush)
            }
        }
    }

    /// A frame from outside the stages (a front end's own), through the same analysis in its place.
    pub fn analyse_frame<V: ?Sized, E: ?Sized, S: Flush<V, E>>(
        &mut self,
        frame: &Frame,
        first_sight: impl FnOnce() -> Result<ProtocolAnalysis, S::Error>,
        view: &V,
        flush: &mut S,
    ) -> Result<(), S::Error> {
        self.join.frame(frame, first_sight, view, flush)
    }

    /// An event from outside the stages (a capture file's note), through the same analysis in its place.
    pub fn analyse_event<V: ?Sized, E: ?Sized, S: Flush<V, E>>(
        &mut self,
        head: EventHead,
        event: &E,
        flush: &mut S,
    ) -> Result<(), S::Error> {
        self.join.event(head, event, flush)
    }

    /// The clock moved to `now` for the analysis: the requests that waited past the timeout, into `flush`.
    pub fn tick<V: ?Sized, E: ?Sized, S: Flush<V, E>>(&mut self, now: f64, flush: &mut S) -> Result<(), S::Error> {
        self.join.tick(now, flush)
    }

    /// The analysis' last words (the end of every connection still open), into `flush`.
    pub fn finish<V: ?Sized, E: ?Sized, S: Flush<V, E>>(&mut self, flush: &mut S) -> Result<(), S::Error> {
        self.join.finish(flush)
    }
}

// ------------------------------------------------------------------------------------ one run of the engine

/// One run of the engine over one capture, driven a step at a time: the composition over the engine's
/// protocols, each protocol's analysis made from its [`ProtocolSetup`], the outputs into a [`Sink`].
pub struct Run<'e> {
    analysed: Analysed<SetUp<'e>>,
    setups: FromSetups,
}

/// The engine's [`AnalysisFront`]: a frame's route kept shared (a sink may keep it), a protocol's analysis
/// from its setup.
struct FromSetups {
    limits: Limits,
}

impl<'e> AnalysisFront<SetUp<'e>> for FromSetups {
    type Error = SinkError;
    type Kept = [Arc<str>; 4];

    fn frame(
        &mut self,
        protocol: &SetUp<'e>,
        place: &Place,
        decoded: Decoded,
    ) -> SinkResult<(Arc<Decoded>, Self::Kept)> {
        // (shared, so that a sink may keep it: the record written on another thread)
        let route =
            [Arc::clone(&protocol.name), Arc::clone(&place.src), Arc::clone(&place.dst), Arc::clone(&place.direction)];
        Ok((Arc::new(decoded), route))
    }

    fn first_sight(&mut self, protocol: &SetUp<'e>) -> SinkResult<ProtocolAnalysis> {
        let setup = protocol.setup;
        let role = setup.server_roles.first().map_or("server", String::as_str);
        Ok(ProtocolAnalysis {
            table: (setup.table)(),
            default_to_server: format!("to_{role}"),
            sessions: setup.protocol.sessions(&self.limits),
        })
    }
}

impl Run<'_> {
    /// A segment through the stages: what it completes into `made`.
    pub fn feed_segment(&mut self, segment: &Segment, made: &mut Vec<Made<Decoded>>) {
        infallible(self.analysed.feed_segment(segment, made))
    }

    /// The end of the capture for the stages: what it makes into `made`.
    pub fn finish_stages(&mut self, made: &mut Vec<Made<Decoded>>) {
        infallible(self.analysed.finish_stages(made))
    }

    /// One thing the stages made (now, or held a while), analysed into `sink`.
    pub fn analyse(&mut self, made: Made<Decoded>, sink: &mut dyn Sink) -> SinkResult<()> {
        self.analysed.analyse(made, &mut self.setups, &mut Items(sink))
    }

    /// The analysis' last words into `sink`.
    pub fn finish(&mut self, sink: &mut dyn Sink) -> SinkResult<()> {
        self.analysed.finish(&mut Items(sink))
    }
}

/// The analysis' outputs as the sink's items.
struct Items<'s>(&'s mut dyn Sink);

impl Flush<StagedFrame<'_, [Arc<str>; 4]>, StreamNote> for Items<'_> {
    type Error = SinkError;

    fn input(&mut self, note: &StreamNote) -> SinkResult<()> {
        self.0.item(Item::Event(EventItem::of_note(note)))
    }

    fn annotated(
        &mut self,
        staged: &StagedFrame<'_, [Arc<str>; 4]>,
        notes: Map,
        findings: Vec<Finding>,
        answered: Option<(f64, u64)>,
    ) -> SinkResult<()> {
        self.0.item(Item::Frame {
            frame: staged.frame,
            first_packet: staged.place.first_packet,
            notes: Cow::Owned(notes),
            findings: &findings,
            answered,
            shared: Some(Shared { pdu: staged.pdu, route: staged.kept }),
            data: staged.place.data.as_deref(),
        })
    }

    fn event(&mut self, event: Event) -> SinkResult<()> {
        self.0.item(Item::Event(EventItem::of_analysis(&event)))
    }

    fn misplaced(&mut self, what: &'static str) -> SinkError {
        SinkError::Misplaced(what)
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
            Item::Event(_) => self.events += 1,
        }
        Ok(())
    }
}
