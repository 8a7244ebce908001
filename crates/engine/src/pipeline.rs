//! The stages from TCP segments to decoded PDUs, knowing no protocol: segments → reassembled streams → PDUs
//! (each protocol's framing) → decoded frames, and the notes of the streams (opened, closed, gaps, skipped
//! bytes), in capture order. Which protocol a connection speaks comes from the server port or, with
//! `detect`, from the first PDU a protocol's decoder accepts within `detect_budget` bytes; the sides from the
//! server port or from commands only one role sends; everything else from the protocol ([`StreamProtocol`]).
//!
//! Every front end drives these same stages: the engine's own composition ([`crate::Engine`]) with the
//! registry's protocols, and the Python binding with protocols that may be declared in Python (whose
//! decoded PDUs and errors are its own: the trait's associated types).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::analysis::{CONNECTION_CLOSED, CONNECTION_OPENED};
use crate::model::Finding;
use crate::problems::GenericProblem;
use crate::protocols::{DecodeCaps, Depth};
use crate::transport::net::{endpoint_text, Ip, Segment, ACK, SYN};
use crate::transport::reassembly::{BufferCap, Config, ConnInfo, Reassembler, StreamEvent};
use crate::transport::splitter::{Framing, RawPdu, Split, Splitter};
use crate::value::{entry, Map, Text, Value};
use crate::{finding, name, FastMap};

/// A protocol's largest frame when neither the settings nor the protocol say.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 5 * 1024 * 1024 + 10 * 1024;

/// How PDUs are decoded.
#[derive(Clone, Copy, Debug)]
pub struct DecodeSettings {
    pub caps: DecodeCaps,
    pub depth: Depth,
}

/// A protocol as the stages use it: its declarations, its framing and its decoder.
pub trait StreamProtocol {
    /// A decoded PDU (the engine's `Decoded`, or a front end's own object).
    type Decoded;
    /// What a front end's decoder or framing can fail with (the engine's own never fail).
    type Error;

    fn name(&self) -> &Arc<str>;
    fn framing(&self) -> &dyn Framing;
    /// server port → the server's role there
    fn ports(&self) -> &[(u16, String)];
    fn client_role(&self) -> &str;
    /// The server roles; the first is the one a connection's server plays until a command says otherwise.
    fn server_roles(&self) -> &[String];
    /// Its largest frame, if it says.
    fn max_frame_size(&self) -> Option<usize>;
    /// The role that sends a command type ("any" when both do), if the protocol declares it.
    fn sender(&self, type_name: &str) -> Option<&str>;
    fn decode(&self, data: &[u8], missing: i64, how: &DecodeSettings) -> Result<Self::Decoded, Self::Error>;
    /// Whether a PDU proves the protocol on a connection off its ports (`detect`).
    fn confirms(&self, decoded: &mut Self::Decoded) -> Result<bool, Self::Error>;
    fn type_name(&self, decoded: &Self::Decoded) -> Result<String, Self::Error>;
    /// Bytes of the PDU on the wire, as its decoder counted them.
    fn size(&self, decoded: &Self::Decoded) -> Result<Value, Self::Error>;
    /// The PDU with `finding` before its decoder's findings.
    fn with_finding_first(&self, decoded: Self::Decoded, finding: Finding) -> Result<Self::Decoded, Self::Error>;
    /// An error the framing met and could not return (a front end's framing callable), taken once the
    /// splitter is done with the bytes.
    fn take_framing_error(&self) -> Option<Self::Error> {
        None
    }

    fn default_server_role(&self) -> &str {
        self.server_roles().first().map_or("server", String::as_str)
    }
}

/// An extra server port: the first protocol's (None), or a protocol's by name with the server's role there
/// (None: its first server role).
pub type ExtraPort = (u16, Option<(String, Option<String>)>);

/// The stages' caps and choices.
#[derive(Clone, Debug)]
pub struct PipelineSettings {
    pub detect: bool,
    /// Bytes of a connection off the ports read at most while no protocol is proven on it.
    pub detect_budget: i64,
    /// The largest frame of every protocol; None: each protocol's own.
    pub max_frame_size: Option<usize>,
    /// Keep each PDU's bytes with its frame ([`Place::data`]).
    pub keep_frame_bytes: bool,
    pub extra_ports: Vec<ExtraPort>,
    pub reassembly: Config,
    pub decode: DecodeSettings,
}

/// Where a decoded frame was in the capture. The texts are shared by every frame of a connection.
#[derive(Clone, Debug)]
pub struct Place {
    /// The frame's number in the capture, from 1.
    pub index: u64,
    /// Its protocol, an index into the pipeline's protocols.
    pub protocol: usize,
    pub conn: u64,
    pub src: Arc<str>,
    pub dst: Arc<str>,
    pub direction: Arc<str>,
    pub time: f64,
    pub first_time: f64,
    /// The packets of its last and first bytes.
    pub packet: i64,
    pub first_packet: i64,
    /// Its first byte's offset in its direction of the stream.
    pub offset: i64,
    /// The PDU's bytes, with [`PipelineSettings::keep_frame_bytes`].
    pub data: Option<Vec<u8>>,
}

/// The side of a stream a note is about: its sender, receiver and direction, and the bytes it concerns.
#[derive(Clone, Debug)]
pub struct At {
    pub src: Arc<str>,
    pub dst: Arc<str>,
    pub direction: Arc<str>,
    pub offset: Option<i64>,
    pub length: Option<i64>,
}

/// Something about a stream that is not a frame: opened, closed, a gap, skipped or ignored bytes.
#[derive(Clone, Debug)]
pub struct StreamNote {
    pub kind: String,
    pub time: f64,
    pub packet: i64,
    pub conn: Option<u64>,
    pub at: Option<At>,
    pub details: Map,
    /// What the note's text needs beyond its details.
    pub params: Map,
}

/// What the stages make, in capture order.
#[derive(Debug)]
pub enum Made<D> {
    Note(StreamNote),
    Frame(Place, D),
}

/// One protocol's view of a connection: its splitters, one per direction.
struct Candidate {
    protocol: usize,
    splitters: [Option<Box<Splitter>>; 2], // boxed: most connections of a flood carry no byte
    order: Vec<usize>, // the sides in the order their splitters were made (the order their ends are told)
}

impl Candidate {
    fn new(protocol: usize) -> Candidate {
        Candidate { protocol, splitters: [None, None], order: Vec::with_capacity(2) }
    }
}

struct ConnState {
    info: ConnInfo,
    text: [Arc<str>; 2],   // the endpoints a and b as text
    server: Option<usize>, // the server's side, once known
    server_role: Option<String>,
    candidates: Vec<Candidate>, // one when on a protocol's port; every protocol while detecting
    live: Vec<usize>,           // the candidates still considered
    directions: [Arc<str>; 2],  // the direction of each side's frames, as the roles are known
    confirmed: bool,            // on a port: yes; detecting: once a PDU proves the protocol
    abandoned: bool,
    bytes_seen: i64,
}

impl ConnState {
    fn protocol(&self) -> usize {
        self.live.first().map(|&c| self.candidates[c].protocol).unwrap_or(0)
    }
}

/// The direction texts, shared by every connection.
struct Directions {
    to_client: Arc<str>,
    unknown: Arc<str>,
    /// role → "to_<role>"
    towards: HashMap<String, Arc<str>>,
}

impl Directions {
    fn towards(&mut self, role: &str) -> Arc<str> {
        if let Some(text) = self.towards.get(role) {
            return Arc::clone(text);
        }
        let text: Arc<str> = Arc::from(format!("to_{role}"));
        self.towards.insert(role.to_owned(), Arc::clone(&text));
        text
    }

    /// The directions of the two sides' frames: towards the server's role, to the client, or unknown.
    fn of(&mut self, server: Option<usize>, server_role: Option<&str>) -> [Arc<str>; 2] {
        match (server, server_role) {
            (Some(server), Some(role)) => {
                let towards = self.towards(role);
                [0, 1].map(|side| if side == server { Arc::clone(&self.to_client) } else { Arc::clone(&towards) })
            }
            _ => [Arc::clone(&self.unknown), Arc::clone(&self.unknown)],
        }
    }
}

/// TCP seen off the protocols' ports, per (guessed) server port: connections and payload bytes. Bounded.
#[derive(Default)]
pub struct OtherTraffic {
    ports: HashMap<u16, (HashSet<(Ip, u16)>, i64)>,
}

impl OtherTraffic {
    pub const MAX_PORTS: usize = 256;
    pub const MAX_CONNECTIONS: usize = 1024; // remembered per port; more are counted by their bytes only

    fn add(&mut self, seg: &Segment) {
        let (port, client) = if seg.flags & SYN != 0 && seg.flags & ACK == 0 {
            (seg.dst_port, (seg.src, seg.src_port)) // SYN: the server is the receiver
        } else if seg.src_port < seg.dst_port {
            (seg.src_port, (seg.dst, seg.dst_port)) // otherwise the lower port is most likely the server's
        } else {
            (seg.dst_port, (seg.src, seg.src_port))
        };
        if !self.ports.contains_key(&port) && self.ports.len() >= Self::MAX_PORTS {
            return;
        }
        let entry = self.ports.entry(port).or_default();
        if entry.0.len() < Self::MAX_CONNECTIONS {
            entry.0.insert(client);
        }
        entry.1 += seg.payload.len() as i64;
    }

    /// The busiest ports first: (port, connections, bytes).
    pub fn summary(&self, most: usize) -> Vec<(u16, usize, i64)> {
        let mut rows: Vec<(u16, usize, i64)> = self.ports.iter().map(|(p, (c, b))| (*p, c.len(), *b)).collect();
        rows.sort_by_key(|r| (-r.2, r.0));
        rows.truncate(most);
        rows
    }
}

/// How a stream ended, for what its end left over: (how, closed by).
type End = Option<(&'static str, Option<String>)>;

/// The stages over one capture (or one live interface).
pub struct Pipeline<P: StreamProtocol> {
    settings: PipelineSettings,
    protocols: Vec<P>,
    ports: HashMap<u16, (usize, String)>, // server port → (protocol, role of the server there)
    reassembler: Reassembler,
    conns: FastMap<u64, Box<ConnState>>, // boxed: taken out and put back for each event, and the table's slack
    directions: Directions,
    pub other: OtherTraffic,
    frame_index: u64,
    /// Frames are only counted, not decoded, once their connection is known (`pipeline`'s first pass).
    pub count_only: bool,
    /// The number before the first frame the end of the capture leaves on a connection, by connection
    /// (`set_finish_base`).
    finish_bases: FastMap<u64, u64>,
    pub last_time: f64,
    pub last_packet: i64,
    events: Vec<StreamEvent>,
    splits: Vec<Split>,
}

impl<P: StreamProtocol> Pipeline<P> {
    pub fn new(settings: PipelineSettings, protocols: Vec<P>) -> Pipeline<P> {
        let mut ports: HashMap<u16, (usize, String)> = HashMap::new();
        for (i, protocol) in protocols.iter().enumerate() {
            for (port, role) in protocol.ports() {
                ports.entry(*port).or_insert((i, role.clone()));
            }
        }
        for (port, named) in &settings.extra_ports {
            let (index, role) = match named {
                None => (0, None),
                Some((name, role)) => match protocols.iter().position(|p| &**p.name() == name) {
                    Some(i) => (i, role.clone()),
                    None => continue, // a protocol not looked for (--protocol): its ports neither
                },
            };
            if let Some(protocol) = protocols.get(index) {
                let role = role.unwrap_or_else(|| protocol.default_server_role().to_owned());
                ports.entry(*port).or_insert((index, role));
            }
        }
        let reassembler = Reassembler::new(settings.reassembly.clone());
        Pipeline {
            settings,
            protocols,
            ports,
            reassembler,
            conns: FastMap::default(),
            directions: Directions {
                to_client: Arc::from("to_client"),
                unknown: Arc::from("unknown"),
                towards: HashMap::new(),
            },
            other: OtherTraffic::default(),
            frame_index: 0,
            count_only: false,
            finish_bases: FastMap::default(),
            last_time: 0.0,
            last_packet: 0,
            events: Vec::new(),
            splits: Vec::new(),
        }
    }

    pub fn protocols(&self) -> &[P] {
        &self.protocols
    }

    pub fn decode_settings(&mut self) -> &mut DecodeSettings {
        &mut self.settings.decode
    }

    /// (frames numbered so far, the id of the next connection). A distributed run (`pulsar-dissect
    /// pipeline`) gives each worker some connections of a capture; with these it numbers frames and
    /// connections as a run over the whole capture does.
    pub fn numbering(&self) -> (u64, u64) {
        (self.frame_index, self.reassembler.next_id())
    }

    pub fn set_numbering(&mut self, frames: Option<u64>, next_conn: Option<u64>) {
        if let Some(frames) = frames {
            self.frame_index = frames;
        }
        if let Some(next_conn) = next_conn {
            self.reassembler.set_next_id(next_conn);
        }
    }

    /// Number the frames the end of the capture leaves on connection `conn` from `base` + 1.
    pub fn set_finish_base(&mut self, conn: u64, base: u64) {
        self.finish_bases.insert(conn, base);
    }

    fn finish_numbering(&mut self, conn: u64) {
        if let Some(base) = self.finish_bases.remove(&conn) {
            self.frame_index = base;
        }
    }

    /// Whether a segment between these ports is one the stages read (TCP off every port is only counted).
    pub fn reads_ports(&self, src_port: u16, dst_port: u16) -> bool {
        self.settings.detect || self.ports.contains_key(&src_port) || self.ports.contains_key(&dst_port)
    }

    pub fn feed_segment(&mut self, seg: &Segment, out: &mut Vec<Made<P::Decoded>>) -> Result<(), P::Error> {
        self.last_time = seg.timestamp;
        self.last_packet = seg.packet_index;
        if !self.reads_ports(seg.src_port, seg.dst_port) {
            self.other.add(seg);
            return Ok(());
        }
        let mut events = std::mem::take(&mut self.events);
        self.reassembler.feed(seg, &mut events);
        let result = self.handle_all(&mut events, out);
        self.events = events;
        result
    }

    /// The clock moved to `now`: apply the time-based expiries without waiting for the next packet.
    pub fn tick(&mut self, now: f64, out: &mut Vec<Made<P::Decoded>>) -> Result<(), P::Error> {
        let mut events = Vec::new();
        self.reassembler.expire(Some(now), &mut events);
        self.handle_all(&mut events, out)
    }

    pub fn finish(&mut self, out: &mut Vec<Made<P::Decoded>>) -> Result<(), P::Error> {
        while !self.finish_some(out, usize::MAX)? {}
        Ok(())
    }

    /// `finish` for at most `most` connections: true once the end of the capture is all told.
    pub fn finish_some(&mut self, out: &mut Vec<Made<P::Decoded>>, most: usize) -> Result<bool, P::Error> {
        let mut events = Vec::new();
        let done = self.reassembler.finish_some(most, &mut events);
        self.handle_all(&mut events, out)?;
        if !done {
            return Ok(false);
        }
        let mut ids: Vec<u64> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(mut state) = self.conns.remove(&id) {
                self.finish_numbering(id);
                self.close_splitters(&mut state, out, self.last_time, self.last_packet, ("end_of_capture", None))?;
            }
        }
        Ok(true)
    }

    fn handle_all(&mut self, events: &mut Vec<StreamEvent>, out: &mut Vec<Made<P::Decoded>>) -> Result<(), P::Error> {
        let mut result = Ok(());
        for ev in events.drain(..) {
            if result.is_ok() {
                result = self.handle(ev, out);
            }
        }
        result
    }

    fn handle(&mut self, ev: StreamEvent, out: &mut Vec<Made<P::Decoded>>) -> Result<(), P::Error> {
        match ev {
            StreamEvent::Data { conn, side, saw_syn, data, offset, time, packet } => {
                let Some(mut state) = self.conns.remove(&conn) else { return Ok(()) };
                let result = self.on_data(&mut state, side, saw_syn, Some(&data), 0, offset, time, packet, None, out);
                if !state.confirmed {
                    state.bytes_seen += data.len() as i64;
                    if state.bytes_seen > self.settings.detect_budget {
                        state.abandoned = true;
                    }
                }
                self.conns.insert(conn, state);
                result
            }
            StreamEvent::Gap { conn, side, saw_syn, offset, length, time, packet, reason } => {
                let Some(mut state) = self.conns.remove(&conn) else { return Ok(()) };
                let result =
                    self.on_data(&mut state, side, saw_syn, None, length, offset, time, packet, Some(reason), out);
                self.conns.insert(conn, state);
                result
            }
            StreamEvent::Ignored { conn, side, kind, offset, length, time, packet } => {
                let Some(state) = self.conns.get(&conn) else { return Ok(()) };
                if state.confirmed && !state.abandoned {
                    let at = at(state, side, offset, length);
                    out.push(Made::Note(note(kind, time, packet, Some(conn), Some(at), Map::new(), Map::new())));
                }
                Ok(())
            }
            StreamEvent::BufferDropped { conn, time, packet, cap, limit, dropped } => {
                let Some(state) = self.conns.get(&conn) else { return Ok(()) };
                if state.confirmed && !state.abandoned {
                    let option = match cap {
                        BufferCap::Total => "max_buffered_total",
                        BufferCap::MemoryBudget => "memory_budget",
                    };
                    let details = vec![
                        entry(name!("option"), option.to_owned()),
                        entry(name!("what"), "out-of-order bytes held".to_owned()),
                        entry(name!("limit"), limit),
                        entry(name!("dropped"), dropped),
                    ];
                    out.push(Made::Note(note("STATE_DROPPED", time, packet, Some(conn), None, details, Map::new())));
                }
                Ok(())
            }
            StreamEvent::Opened { conn, time, packet, .. } => {
                let on_port = self.ports.get(&conn.b.port).or_else(|| self.ports.get(&conn.a.port)).cloned();
                let text: [Arc<str>; 2] = [
                    Arc::from(endpoint_text(&conn.a.ip, conn.a.port)),
                    Arc::from(endpoint_text(&conn.b.ip, conn.b.port)),
                ];
                let id = conn.id;
                let (server, server_role, candidates, live, confirmed) = match on_port {
                    Some((protocol, role)) => {
                        let server = if self.ports.contains_key(&conn.b.port) { 1 } else { 0 };
                        (Some(server), Some(role), vec![Candidate::new(protocol)], vec![0], true)
                    }
                    None => (
                        None,
                        None,
                        (0..self.protocols.len()).map(Candidate::new).collect(),
                        (0..self.protocols.len()).collect(),
                        false,
                    ),
                };
                let directions = self.directions.of(server, server_role.as_deref());
                let state = Box::new(ConnState {
                    info: conn,
                    text,
                    server,
                    server_role,
                    candidates,
                    live,
                    directions,
                    confirmed,
                    abandoned: false,
                    bytes_seen: 0,
                });
                if state.confirmed {
                    out.push(Made::Note(self.opened_note(&state, time, packet)));
                }
                self.conns.insert(id, state);
                Ok(())
            }
            StreamEvent::Closed { conn, time, packet, how, bytes, first_fin_from, rst_from, saw_syn, .. } => {
                let Some(mut state) = self.conns.remove(&conn) else { return Ok(()) };
                self.finish_numbering(conn);
                if state.abandoned {
                    return Ok(());
                }
                state.info.saw_syn = saw_syn;
                let closer = match how {
                    "fin" => first_fin_from,
                    "rst" => rst_from,
                    _ => None,
                };
                let closed_by = match (closer, state.server) {
                    (Some(closer), Some(server)) => Some(if closer == server {
                        state.server_role.clone().unwrap_or_default()
                    } else {
                        self.protocols[state.protocol()].client_role().to_owned()
                    }),
                    _ => None,
                };
                self.close_splitters(&mut state, out, time, packet, (how, closed_by.clone()))?;
                if state.confirmed {
                    let mut details = vec![entry(name!("how"), how.to_owned())];
                    for (side, bytes) in bytes.iter().enumerate() {
                        details.push((Text::Owned(format!("bytes_{}", state.directions[side])), Value::from(*bytes)));
                    }
                    if let Some(by) = closed_by {
                        details.push(entry(name!("closed_by"), by));
                    }
                    let id = Some(state.info.id);
                    out.push(Made::Note(note(CONNECTION_CLOSED, time, packet, id, None, details, Map::new())));
                }
                Ok(())
            }
        }
    }

    /// New bytes (`data`) or a gap (`reason`, `length`) in one direction: through every candidate.
    #[allow(clippy::too_many_arguments)]
    fn on_data(
        &mut self,
        state: &mut ConnState,
        side: usize,
        saw_syn: bool,
        data: Option<&[u8]>,
        length: i64,
        offset: i64,
        time: f64,
        packet: i64,
        reason: Option<&'static str>,
        out: &mut Vec<Made<P::Decoded>>,
    ) -> Result<(), P::Error> {
        if state.abandoned {
            return Ok(());
        }
        state.info.saw_syn = saw_syn;
        if let Some(reason) = reason {
            if state.confirmed {
                let details = vec![entry(name!("reason"), reason.to_owned())];
                let at = at(state, side, offset, length);
                out.push(Made::Note(note("GAP", time, packet, Some(state.info.id), Some(at), details, Map::new())));
            }
        }
        let mut splits = std::mem::take(&mut self.splits);
        let mut result = Ok(());
        for ci in state.live.clone() {
            let protocol = state.candidates[ci].protocol;
            let max_frame_size = self
                .settings
                .max_frame_size
                .or(self.protocols[protocol].max_frame_size())
                .unwrap_or(DEFAULT_MAX_FRAME_SIZE);
            let candidate = &mut state.candidates[ci];
            if candidate.splitters[side].is_none() {
                candidate.order.push(side);
            }
            let splitter = candidate.splitters[side]
                .get_or_insert_with(|| Box::new(Splitter::new(saw_syn && offset == 0, max_frame_size, offset)));
            let framing = self.protocols[protocol].framing();
            match data {
                Some(bytes) => splitter.feed(framing, bytes, time, packet, &mut splits),
                None => splitter.gap(framing, length, time, packet, &mut splits),
            }
            if let Some(error) = self.protocols[protocol].take_framing_error() {
                result = Err(error);
                break;
            }
            for item in splits.drain(..) {
                if result.is_ok() {
                    result = self.emit(state, ci, side, item, out, &None);
                }
            }
            if result.is_err() {
                break;
            }
        }
        splits.clear();
        self.splits = splits;
        result
    }

    fn close_splitters(
        &mut self,
        state: &mut ConnState,
        out: &mut Vec<Made<P::Decoded>>,
        time: f64,
        packet: i64,
        end: (&'static str, Option<String>),
    ) -> Result<(), P::Error> {
        let end: End = Some(end);
        let mut items = Vec::new();
        for ci in state.live.clone() {
            let protocol = state.candidates[ci].protocol;
            for side in state.candidates[ci].order.clone() {
                let Some(splitter) = state.candidates[ci].splitters[side].as_mut() else { continue };
                splitter.finish(self.protocols[protocol].framing(), time, packet, &mut items);
                for item in items.drain(..) {
                    self.emit(state, ci, side, item, out, &end)?;
                }
            }
        }
        Ok(())
    }

    /// A PDU or note of candidate `ci` from `side`; `end` is (how, closed_by) for what the end of the stream
    /// left over.
    fn emit(
        &mut self,
        state: &mut ConnState,
        ci: usize,
        side: usize,
        item: Split,
        out: &mut Vec<Made<P::Decoded>>,
        end: &End,
    ) -> Result<(), P::Error> {
        match item {
            Split::Pdu(pdu) => {
                if self.count_only && state.confirmed && state.server.is_some() {
                    self.frame_index += 1; // a frame, its number taken: what it says does not change numbers
                    return Ok(());
                }
                let index = state.candidates[ci].protocol;
                let protocol = &self.protocols[index];
                let mut decoded = protocol.decode(&pdu.data, pdu.missing, &self.settings.decode)?;
                if pdu.missing > 0 {
                    // why bytes are missing is known here, not in the decoder
                    let finding = incomplete(protocol.size(&decoded)?, &pdu, end);
                    decoded = protocol.with_finding_first(decoded, finding)?;
                }
                if !state.confirmed {
                    if !protocol.confirms(&mut decoded)? {
                        return Ok(());
                    }
                    state.live = vec![ci];
                    state.confirmed = true;
                    self.learn_roles(state, index, side, &decoded)?;
                    // the connection opened with its first packet (the SYN), not with the frame that proved it
                    let (time, packet) = (state.info.first_time, state.info.first_packet);
                    out.push(Made::Note(self.opened_note(state, time, packet)));
                } else if state.server.is_none() {
                    self.learn_roles(state, index, side, &decoded)?;
                }
                self.frame_index += 1;
                let place = Place {
                    index: self.frame_index,
                    protocol: index,
                    conn: state.info.id,
                    src: Arc::clone(&state.text[side]),
                    dst: Arc::clone(&state.text[1 - side]),
                    direction: Arc::clone(&state.directions[side]),
                    time: pdu.time,
                    first_time: pdu.first_time,
                    packet: pdu.last_packet,
                    first_packet: pdu.first_packet,
                    offset: pdu.offset,
                    data: if self.settings.keep_frame_bytes { Some(pdu.data) } else { None },
                };
                out.push(Made::Frame(place, decoded));
            }
            Split::Note(split) => {
                if state.confirmed && state.live.first() == Some(&ci) {
                    let at = at(state, side, split.offset, split.length);
                    let (time, packet, id) = (split.time, split.packet, Some(state.info.id));
                    out.push(Made::Note(note(&split.kind, time, packet, id, Some(at), split.details, split.params)));
                }
            }
        }
        Ok(())
    }

    fn opened_note(&self, state: &ConnState, time: f64, packet: i64) -> StreamNote {
        let server = state.server.unwrap_or(1);
        let (client, server_text) = (&state.text[1 - server], &state.text[server]);
        let role = state
            .server_role
            .clone()
            .unwrap_or_else(|| self.protocols[state.protocol()].default_server_role().to_owned());
        let direction: Arc<str> = match state.server {
            Some(_) => Arc::from(format!("to_{role}")),
            None => Arc::clone(&self.directions.unknown),
        };
        let details = vec![
            entry(name!("client"), client.to_string()),
            (Text::Owned(role.clone()), Value::from(server_text.to_string())),
            entry(name!("mid_stream"), !state.info.saw_syn),
        ];
        let params = vec![entry(name!("server_role"), role), entry(name!("server"), server_text.to_string())];
        let at = At { src: Arc::clone(client), dst: Arc::clone(server_text), direction, offset: None, length: None };
        note(CONNECTION_OPENED, time, packet, Some(state.info.id), Some(at), details, params)
    }

    /// Off the known ports the sides are told apart by commands only one side sends.
    fn learn_roles(
        &mut self,
        state: &mut ConnState,
        protocol: usize,
        side: usize,
        decoded: &P::Decoded,
    ) -> Result<(), P::Error> {
        let protocol = &self.protocols[protocol];
        let type_name = protocol.type_name(decoded)?;
        let Some(sender) = protocol.sender(&type_name) else { return Ok(()) };
        if protocol.server_roles().iter().any(|role| role == sender) {
            state.server = Some(side);
            state.server_role = Some(sender.to_owned());
        } else if sender == protocol.client_role() {
            state.server = Some(1 - side);
            state.server_role = Some(protocol.default_server_role().to_owned());
        } else {
            return Ok(());
        }
        state.directions = self.directions.of(state.server, state.server_role.as_deref());
        Ok(())
    }
}

fn at(state: &ConnState, side: usize, offset: i64, length: i64) -> At {
    At {
        src: Arc::clone(&state.text[side]),
        dst: Arc::clone(&state.text[1 - side]),
        direction: Arc::clone(&state.directions[side]),
        offset: Some(offset),
        length: Some(length),
    }
}

fn note(
    kind: &str,
    time: f64,
    packet: i64,
    conn: Option<u64>,
    at: Option<At>,
    details: Map,
    params: Map,
) -> StreamNote {
    StreamNote { kind: kind.to_owned(), time, packet, conn, at, details, params }
}

/// The finding that says why `pdu.missing` bytes of a PDU are not decoded: it is above the size limit (only
/// its head was read, the rest skipped), or they were lost in a capture gap, or come after the end of its
/// stream.
fn incomplete(size: Value, pdu: &RawPdu, end: &End) -> Finding {
    if pdu.oversized {
        return finding!(GenericProblem::FrameOversizedHead, "head" => pdu.data.len(), "missing" => pdu.missing,
                        "size" => size);
    }
    match end {
        None => finding!(GenericProblem::FrameGapDamaged, "missing" => pdu.missing, "size" => size),
        Some((how, closed_by)) => {
            let mut finding = finding!(GenericProblem::FrameCutAtEnd, "missing" => pdu.missing, "size" => size,
                                       "how" => how.to_string());
            if let Some(by) = closed_by {
                finding.params.push(entry(name!("closed_by"), by.clone()));
            }
            finding
        }
    }
}
