//! The pipeline: packets → TCP segments → reassembled streams → PDUs → decoded frames and events, in capture
//! order. It knows no protocol: which protocol a connection speaks comes from the server port (or, with
//! ``detect``, from the first PDU a protocol's decoder accepts, within ``detect_budget`` bytes), the sides
//! from the server port or from commands only one role sends, and everything else from the protocol's
//! declaration, framing and decoder. Its output is the Python ``model.Frame`` and ``model.Event`` values.

use std::collections::{HashMap, HashSet};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::convert::map_to_py;
use crate::protocol::{confirms, decode_pdu, DecodeOptions, DecodedPdu, Protocol};
use engine::analysis::{CONNECTION_CLOSED, CONNECTION_OPENED};
use engine::model::{Decoded, Finding};
use engine::problems::GenericProblem;
use engine::protocols::Depth;
use engine::transport::net::{endpoint_text, Ip, Segment, ACK, SYN};
use engine::transport::reassembly::{Config, ConnInfo, FastMap, Reassembler, StreamEvent};
use engine::transport::splitter::{Split, Splitter};
use engine::value::entry;
use engine::{finding, name};

/// The settings the pipeline reads (``dissector.options.Options``).
/// A protocol's largest frame when neither the options nor the protocol say (`protocols/base.py`).
const DEFAULT_MAX_FRAME_SIZE: usize = 5 * 1024 * 1024 + 10 * 1024;

/// A protocol by name, and the server's role on its port (None: the protocol's first server role).
pub type ProtocolRole = (String, Option<String>);

pub struct Settings {
    pub detect: bool,
    pub detect_budget: i64,
    /// the largest frame of every protocol; None: each protocol's own
    pub max_frame_size: Option<usize>,
    pub keep_frame_bytes: bool,
    /// extra server ports: the first protocol's (None), or a protocol's by name with the server's role there
    pub extra_ports: Vec<(u16, Option<ProtocolRole>)>,
    pub reassembly: Config,
    pub decode: DecodeOptions,
}

/// What the pipeline makes, in capture order: Python events, and frames — as the core's Rust data (turned
/// into a Python ``model.Frame`` only when something asks for one: the analysis reads the Rust data, and a
/// record can be written from it), or as the Python frame of a protocol declared in Python.
#[allow(clippy::large_enum_variant)] // held for one packet's items at most: boxing would allocate per frame
pub enum Made {
    Event(Py<PyAny>),
    Frame(FramePlace, Decoded),
    PyFrame(Py<PyAny>),
}

/// Where a frame was: the fields of ``model.Frame`` but its decoded PDU (the texts are shared Python strings).
pub struct FramePlace {
    pub index: u64,
    pub protocol: Py<PyString>,
    pub conn: u64,
    pub src: Py<PyString>,
    pub dst: Py<PyString>,
    pub direction: Py<PyString>,
    pub time: f64,
    pub first_time: f64,
    pub packet: i64,
    pub first_packet: i64,
    pub offset: i64,
    /// The PDU's bytes, with ``Options.keep_frame_bytes``.
    pub data: Option<Py<PyBytes>>,
}

impl FramePlace {
    /// The ``model.Frame`` (``frame_class``) of this place and a Python ``Decoded``.
    pub fn to_py<'py>(
        &self,
        py: Python<'py>,
        frame_class: &Py<PyAny>,
        pdu: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PyTuple::new(
            py,
            [
                self.index.into_pyobject(py)?.into_any(),
                self.protocol.bind(py).clone().into_any(),
                self.conn.into_pyobject(py)?.into_any(),
                self.src.bind(py).clone().into_any(),
                self.dst.bind(py).clone().into_any(),
                self.direction.bind(py).clone().into_any(),
                self.time.into_pyobject(py)?.into_any(),
                self.first_time.into_pyobject(py)?.into_any(),
                self.packet.into_pyobject(py)?.into_any(),
                self.first_packet.into_pyobject(py)?.into_any(),
                self.offset.into_pyobject(py)?.into_any(),
                pdu,
                match &self.data {
                    Some(d) => d.bind(py).clone().into_any(),
                    None => py.None().into_bound(py),
                },
            ],
        )?;
        frame_class.bind(py).call1(args)
    }

    /// The ``model.Frame`` of a frame the core decoded.
    pub fn frame_to_py<'py>(
        &self,
        py: Python<'py>,
        frame_class: &Py<PyAny>,
        pdu: &Decoded,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.to_py(py, frame_class, crate::decoded_to_py(py, pdu)?)
    }
}

impl Pipeline {
    /// The ``model.Event`` class it builds.
    pub fn event_class(&self) -> &Py<PyAny> {
        &self.classes.event
    }

    /// The ``model.Frame`` class it builds.
    pub fn frame_class(&self) -> &Py<PyAny> {
        &self.classes.frame
    }
}

/// The Python objects of what the pipeline made, for callers that want only those.
pub fn made_to_py<'py>(py: Python<'py>, frame_class: &Py<PyAny>, made: Vec<Made>) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    made_into(py, frame_class, made, &out)?;
    Ok(out)
}

/// The same, appended to `out`.
pub fn made_into(
    py: Python<'_>,
    frame_class: &Py<PyAny>,
    made: impl IntoIterator<Item = Made>,
    out: &Bound<'_, PyList>,
) -> PyResult<()> {
    for m in made {
        match m {
            Made::Event(object) | Made::PyFrame(object) => out.append(object)?,
            Made::Frame(place, pdu) => out.append(place.frame_to_py(py, frame_class, &pdu)?)?,
        }
    }
    Ok(())
}

/// The Python classes the pipeline builds (``decoded`` and ``finding`` for protocols declared in Python: the
/// core's decoded data is converted by the binding).
pub struct Classes {
    pub frame: Py<PyAny>,
    pub event: Py<PyAny>,
    pub decoded: Py<PyAny>,
    pub finding: Py<PyAny>,
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
    text: [Py<PyString>; 2], // the endpoints a and b as text
    server: Option<usize>,   // the server's side, once known
    server_role: Option<String>,
    candidates: Vec<Candidate>, // one when on a protocol's port; every protocol while detecting
    live: Vec<usize>,           // the candidates still considered
    directions: [Py<PyString>; 2], // the direction of each side's frames, as the roles are known
    confirmed: bool,            // on a port: yes; detecting: once a PDU proves the protocol
    abandoned: bool,
    bytes_seen: i64,
}

impl ConnState {
    /// The directions of the two sides' frames: towards the server's role, to the client, or unknown.
    fn set_directions(&mut self, py: Python<'_>) {
        for side in 0..2 {
            let text = match (self.server, &self.server_role) {
                (Some(server), Some(role)) => {
                    if side == server {
                        TO_CLIENT.to_string()
                    } else {
                        towards(role)
                    }
                }
                _ => UNKNOWN_DIRECTION.to_string(),
            };
            self.directions[side] = PyString::intern(py, &text).unbind();
        }
    }

    fn protocol(&self) -> usize {
        self.live.first().map(|&c| self.candidates[c].protocol).unwrap_or(0)
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

pub struct Pipeline {
    settings: Settings,
    classes: Classes,
    protocols: Vec<Protocol>,
    ports: HashMap<u16, (usize, String)>, // server port → (protocol, role of the server there)
    reassembler: Reassembler,
    conns: FastMap<u64, Box<ConnState>>, // boxed: taken out and put back for each event, and the table's slack
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
}

const TO_CLIENT: &str = "to_client";
const UNKNOWN_DIRECTION: &str = "unknown";

fn towards(role: &str) -> String {
    format!("to_{role}")
}

impl Pipeline {
    pub fn new(settings: Settings, classes: Classes, protocols: Vec<Protocol>) -> Pipeline {
        let mut ports: HashMap<u16, (usize, String)> = HashMap::new();
        for (i, protocol) in protocols.iter().enumerate() {
            for (port, role) in &protocol.ports {
                ports.entry(*port).or_insert((i, role.clone()));
            }
        }
        for (port, named) in &settings.extra_ports {
            let (index, role) = match named {
                None => (0, None),
                Some((name, role)) => match protocols
                    .iter()
                    .position(|p| Python::attach(|py| p.name.bind(py).to_str().is_ok_and(|n| n == name)))
                {
                    Some(i) => (i, role.clone()),
                    None => continue, // a protocol not looked for (--protocol): its ports neither
                },
            };
            if let Some(protocol) = protocols.get(index) {
                let role = role.unwrap_or_else(|| protocol.default_server_role().to_string());
                ports.entry(*port).or_insert((index, role));
            }
        }
        let reassembler = Reassembler::new(settings.reassembly.clone());
        Pipeline {
            settings,
            classes,
            protocols,
            ports,
            reassembler,
            conns: FastMap::default(),
            other: OtherTraffic::default(),
            frame_index: 0,
            count_only: false,
            finish_bases: FastMap::default(),
            last_time: 0.0,
            last_packet: 0,
            events: Vec::new(),
        }
    }

    /// Keep batches whole, to be split where their records are written (`Depth::BatchesLater`); a
    /// brief decode keeps them so anyway.
    pub fn set_batches_later(&mut self, later: bool) {
        let decode = &mut self.settings.decode;
        decode.depth = match (decode.depth, later) {
            (Depth::Brief, _) => Depth::Brief,
            (_, true) => Depth::BatchesLater,
            (_, false) => Depth::Full,
        };
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

    pub fn feed_segment(&mut self, py: Python<'_>, seg: &Segment, out: &mut Vec<Made>) -> PyResult<()> {
        self.last_time = seg.timestamp;
        self.last_packet = seg.packet_index;
        if !self.settings.detect && !self.ports.contains_key(&seg.src_port) && !self.ports.contains_key(&seg.dst_port) {
            self.other.add(seg);
            return Ok(());
        }
        let mut events = std::mem::take(&mut self.events);
        self.reassembler.feed(seg, &mut events);
        let result = self.handle_all(py, &mut events, out);
        self.events = events;
        result
    }

    /// The clock moved to ``now``: apply the time-based expiries without waiting for the next packet.
    pub fn tick(&mut self, py: Python<'_>, now: f64, out: &mut Vec<Made>) -> PyResult<()> {
        let mut events = Vec::new();
        self.reassembler.expire(Some(now), &mut events);
        self.handle_all(py, &mut events, out)
    }

    pub fn finish(&mut self, py: Python<'_>, out: &mut Vec<Made>) -> PyResult<()> {
        while !self.finish_some(py, out, usize::MAX)? {}
        Ok(())
    }

    /// ``finish`` for at most ``most`` connections: true once the end of the capture is all told.
    pub fn finish_some(&mut self, py: Python<'_>, out: &mut Vec<Made>, most: usize) -> PyResult<bool> {
        let mut events = Vec::new();
        let done = self.reassembler.finish_some(most, &mut events);
        self.handle_all(py, &mut events, out)?;
        if !done {
            return Ok(false);
        }
        let mut ids: Vec<u64> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(mut state) = self.conns.remove(&id) {
                self.finish_numbering(id);
                self.close_splitters(py, &mut state, out, self.last_time, self.last_packet, ("end_of_capture", None))?;
            }
        }
        Ok(true)
    }

    fn handle_all(&mut self, py: Python<'_>, events: &mut Vec<StreamEvent>, out: &mut Vec<Made>) -> PyResult<()> {
        let mut result = Ok(());
        for ev in events.drain(..) {
            if result.is_ok() {
                result = self.handle(py, ev, out);
            }
        }
        result
    }

    fn direction<'py>(&self, py: Python<'py>, state: &ConnState, side: usize) -> Bound<'py, PyString> {
        state.directions[side].bind(py).clone()
    }

    fn handle(&mut self, py: Python<'_>, ev: StreamEvent, out: &mut Vec<Made>) -> PyResult<()> {
        match ev {
            StreamEvent::Data { conn, side, saw_syn, data, offset, time, packet } => {
                let Some(mut state) = self.conns.remove(&conn) else { return Ok(()) };
                let result =
                    self.on_data(py, &mut state, side, saw_syn, Some(&data), 0, offset, time, packet, None, out);
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
                    self.on_data(py, &mut state, side, saw_syn, None, length, offset, time, packet, Some(reason), out);
                self.conns.insert(conn, state);
                result
            }
            StreamEvent::Ignored { conn, side, kind, offset, length, time, packet } => {
                let Some(state) = self.conns.get(&conn) else { return Ok(()) };
                if state.confirmed && !state.abandoned {
                    let ev = self.event(
                        py,
                        kind,
                        time,
                        packet,
                        Some(conn),
                        Some(side),
                        Some((state, offset, length)),
                        PyDict::new(py),
                        PyDict::new(py),
                    )?;
                    out.push(Made::Event(ev.unbind()));
                }
                Ok(())
            }
            StreamEvent::BufferDropped { conn, time, packet, limit, dropped } => {
                let Some(state) = self.conns.get(&conn) else { return Ok(()) };
                if state.confirmed && !state.abandoned {
                    let details = PyDict::new(py);
                    details.set_item("option", "max_buffered_total")?;
                    details.set_item("what", "out-of-order bytes held")?;
                    details.set_item("limit", limit)?;
                    details.set_item("dropped", dropped)?;
                    let ev = self.event(
                        py,
                        "STATE_DROPPED",
                        time,
                        packet,
                        Some(conn),
                        None,
                        None,
                        details,
                        PyDict::new(py),
                    )?;
                    out.push(Made::Event(ev.unbind()));
                }
                Ok(())
            }
            StreamEvent::Opened { conn, time, packet, .. } => {
                let on_port = self.ports.get(&conn.b.port).or_else(|| self.ports.get(&conn.a.port)).cloned();
                let text = [
                    PyString::new(py, &endpoint_text(&conn.a.ip, conn.a.port)).unbind(),
                    PyString::new(py, &endpoint_text(&conn.b.ip, conn.b.port)).unbind(),
                ];
                let id = conn.id;
                let unknown = PyString::intern(py, UNKNOWN_DIRECTION).unbind();
                let directions = [unknown.clone_ref(py), unknown];
                let mut state = Box::new(match on_port {
                    Some((protocol, role)) => {
                        let server = if self.ports.contains_key(&conn.b.port) { 1 } else { 0 };
                        ConnState {
                            info: conn,
                            text,
                            server: Some(server),
                            server_role: Some(role),
                            candidates: vec![Candidate::new(protocol)],
                            live: vec![0],
                            directions,
                            confirmed: true,
                            abandoned: false,
                            bytes_seen: 0,
                        }
                    }
                    None => ConnState {
                        info: conn,
                        text,
                        server: None,
                        server_role: None,
                        candidates: (0..self.protocols.len()).map(Candidate::new).collect(),
                        live: (0..self.protocols.len()).collect(),
                        directions,
                        confirmed: false,
                        abandoned: false,
                        bytes_seen: 0,
                    },
                });
                state.set_directions(py);
                if state.confirmed {
                    out.push(Made::Event(self.opened_event(py, &state, time, packet)?.unbind()));
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
                        self.protocols[state.protocol()].client_role.clone()
                    }),
                    _ => None,
                };
                self.close_splitters(py, &mut state, out, time, packet, (how, closed_by.clone()))?;
                if state.confirmed {
                    let details = PyDict::new(py);
                    details.set_item("how", how)?;
                    for (side, bytes) in bytes.iter().enumerate() {
                        details.set_item(format!("bytes_{}", self.direction(py, &state, side)), bytes)?;
                    }
                    if let Some(by) = closed_by {
                        details.set_item("closed_by", by)?;
                    }
                    out.push(Made::Event(
                        self.event(
                            py,
                            CONNECTION_CLOSED,
                            time,
                            packet,
                            Some(state.info.id),
                            None,
                            None,
                            details,
                            PyDict::new(py),
                        )?
                        .unbind(),
                    ));
                }
                Ok(())
            }
        }
    }

    /// New bytes (``data``) or a gap (``reason``, ``length``) in one direction: through every candidate.
    #[allow(clippy::too_many_arguments)]
    fn on_data(
        &mut self,
        py: Python<'_>,
        state: &mut ConnState,
        side: usize,
        saw_syn: bool,
        data: Option<&[u8]>,
        length: i64,
        offset: i64,
        time: f64,
        packet: i64,
        reason: Option<&'static str>,
        out: &mut Vec<Made>,
    ) -> PyResult<()> {
        if state.abandoned {
            return Ok(());
        }
        state.info.saw_syn = saw_syn;
        if let Some(reason) = reason {
            if state.confirmed {
                let details = PyDict::new(py);
                details.set_item("reason", reason)?;
                let ev = self.event(
                    py,
                    "GAP",
                    time,
                    packet,
                    Some(state.info.id),
                    Some(side),
                    Some((state, offset, length)),
                    details,
                    PyDict::new(py),
                )?;
                out.push(Made::Event(ev.unbind()));
            }
        }
        let mut items = Vec::new();
        for ci in state.live.clone() {
            let protocol = state.candidates[ci].protocol;
            let max_frame_size = self
                .settings
                .max_frame_size
                .or(self.protocols[protocol].max_frame_size)
                .unwrap_or(DEFAULT_MAX_FRAME_SIZE);
            let candidate = &mut state.candidates[ci];
            if candidate.splitters[side].is_none() {
                candidate.order.push(side);
            }
            let splitter = candidate.splitters[side]
                .get_or_insert_with(|| Box::new(Splitter::new(saw_syn && offset == 0, max_frame_size, offset)));
            let framing = &self.protocols[protocol].framing;
            match data {
                Some(bytes) => splitter.feed(framing, bytes, time, packet, &mut items),
                None => splitter.gap(framing, length, time, packet, &mut items),
            }
            if let Some(err) = PyErr::take(py) {
                return Err(err); // a framing callable of a protocol declared in Python failed
            }
            for item in items.drain(..) {
                self.emit(py, state, ci, side, item, out, &None)?;
            }
        }
        Ok(())
    }

    fn close_splitters(
        &mut self,
        py: Python<'_>,
        state: &mut ConnState,
        out: &mut Vec<Made>,
        time: f64,
        packet: i64,
        end: (&'static str, Option<String>),
    ) -> PyResult<()> {
        let end: End = Some(end);
        let mut items = Vec::new();
        for ci in state.live.clone() {
            let protocol = state.candidates[ci].protocol;
            for side in state.candidates[ci].order.clone() {
                let Some(splitter) = state.candidates[ci].splitters[side].as_mut() else { continue };
                splitter.finish(&self.protocols[protocol].framing, time, packet, &mut items);
                for item in items.drain(..) {
                    self.emit(py, state, ci, side, item, out, &end)?;
                }
            }
        }
        Ok(())
    }

    /// A PDU or note of candidate ``ci`` from ``side``; ``end`` is (how, closed_by) for what the end of the
    /// stream left over.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        py: Python<'_>,
        state: &mut ConnState,
        ci: usize,
        side: usize,
        item: Split,
        out: &mut Vec<Made>,
        end: &End,
    ) -> PyResult<()> {
        match item {
            Split::Pdu(pdu) => {
                if self.count_only && state.confirmed && state.server.is_some() {
                    self.frame_index += 1; // a frame, its number taken: what it says does not change numbers
                    return Ok(());
                }
                let protocol = &self.protocols[state.candidates[ci].protocol];
                let mut decoded = decode_pdu(py, protocol, &pdu.data, pdu.missing, &self.settings.decode)?;
                if pdu.missing > 0 {
                    // why bytes are missing is known here, not in the decoder
                    let finding = self.incomplete(&decoded, &pdu, end)?;
                    decoded = decoded.with_finding_first(
                        py,
                        finding,
                        self.classes.decoded.bind(py),
                        self.classes.finding.bind(py),
                    )?;
                }
                if !state.confirmed {
                    if !confirms(py, protocol, &mut decoded)? {
                        return Ok(());
                    }
                    state.live = vec![ci];
                    state.confirmed = true;
                    self.learn_roles(py, state, ci, side, &decoded)?;
                    // the connection opened with its first packet (the SYN), not with the frame that proved it
                    out.push(Made::Event(
                        self.opened_event(py, state, state.info.first_time, state.info.first_packet)?.unbind(),
                    ));
                } else if state.server.is_none() {
                    self.learn_roles(py, state, ci, side, &decoded)?;
                }
                self.frame_index += 1;
                let protocol = &self.protocols[state.candidates[ci].protocol];
                let data = if self.settings.keep_frame_bytes {
                    Some(pyo3::types::PyBytes::new(py, &pdu.data).unbind())
                } else {
                    None
                };
                let (src, dst, direction) = (
                    state.text[side].clone_ref(py),
                    state.text[1 - side].clone_ref(py),
                    state.directions[side].clone_ref(py),
                );
                let place = FramePlace {
                    index: self.frame_index,
                    protocol: protocol.name.clone_ref(py),
                    conn: state.info.id,
                    src,
                    dst,
                    direction,
                    time: pdu.time,
                    first_time: pdu.first_time,
                    packet: pdu.last_packet,
                    first_packet: pdu.first_packet,
                    offset: pdu.offset,
                    data,
                };
                out.push(match decoded {
                    DecodedPdu::Core(decoded) => Made::Frame(place, decoded),
                    DecodedPdu::Python(object) => Made::PyFrame(place.to_py(py, &self.classes.frame, object)?.unbind()),
                });
            }
            Split::Note(note) => {
                if state.confirmed && state.live.first() == Some(&ci) {
                    let ev = self.event(
                        py,
                        &note.kind,
                        note.time,
                        note.packet,
                        Some(state.info.id),
                        Some(side),
                        Some((state, note.offset, note.length)),
                        map_to_py(py, &note.details)?,
                        map_to_py(py, &note.params)?,
                    )?;
                    out.push(Made::Event(ev.unbind()));
                }
            }
        }
        Ok(())
    }

    /// An event; with ``side`` and ``at`` = (state, offset, length) one about a direction of a stream.
    #[allow(clippy::too_many_arguments)]
    fn event<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        time: f64,
        packet: i64,
        conn: Option<u64>,
        side: Option<usize>,
        at: Option<(&ConnState, i64, i64)>,
        details: Bound<'py, PyDict>,
        params: Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match (side, at) {
            (Some(side), Some((state, offset, length))) => self.classes.event.bind(py).call1((
                kind,
                time,
                packet,
                conn,
                state.text[side].bind(py),
                state.text[1 - side].bind(py),
                self.direction(py, state, side),
                offset,
                length,
                details,
                params,
            )),
            _ => self.classes.event.bind(py).call1((
                kind,
                time,
                packet,
                conn,
                py.None(),
                py.None(),
                py.None(),
                py.None(),
                py.None(),
                details,
                params,
            )),
        }
    }

    fn opened_event<'py>(
        &self,
        py: Python<'py>,
        state: &ConnState,
        time: f64,
        packet: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let server = state.server.unwrap_or(1);
        let (client, server_text) = (state.text[1 - server].bind(py), state.text[server].bind(py));
        let role = state
            .server_role
            .clone()
            .unwrap_or_else(|| self.protocols[state.protocol()].default_server_role().to_string());
        let direction = if state.server.is_some() { towards(&role) } else { UNKNOWN_DIRECTION.to_string() };
        let details = PyDict::new(py);
        details.set_item("client", client)?;
        details.set_item(&role, server_text)?;
        details.set_item("mid_stream", !state.info.saw_syn)?;
        let params = PyDict::new(py);
        params.set_item("server_role", &role)?;
        params.set_item("server", server_text)?;
        self.classes.event.bind(py).call1((
            CONNECTION_OPENED,
            time,
            packet,
            state.info.id,
            client,
            server_text,
            direction,
            py.None(),
            py.None(),
            details,
            params,
        ))
    }

    /// Off the known ports the sides are told apart by commands only one side sends.
    fn learn_roles(
        &self,
        py: Python<'_>,
        state: &mut ConnState,
        ci: usize,
        side: usize,
        decoded: &DecodedPdu<'_>,
    ) -> PyResult<()> {
        let protocol = &self.protocols[state.candidates[ci].protocol];
        let type_name = decoded.type_name()?;
        let Some(sender) = protocol.senders.get(&type_name) else { return Ok(()) };
        if protocol.server_roles.contains(sender) {
            state.server = Some(side);
            state.server_role = Some(sender.clone());
        } else if *sender == protocol.client_role {
            state.server = Some(1 - side);
            state.server_role = Some(protocol.default_server_role().to_string());
        } else {
            return Ok(());
        }
        state.set_directions(py);
        Ok(())
    }

    /// The finding that says why ``pdu.missing`` bytes of a PDU are not decoded: it is above the size limit
    /// (only its head was read, the rest skipped), or they were lost in a capture gap, or come after the end
    /// of its stream.
    fn incomplete(
        &self,
        decoded: &DecodedPdu<'_>,
        pdu: &engine::transport::splitter::RawPdu,
        end: &End,
    ) -> PyResult<Finding> {
        let size = decoded.size()?;
        Ok(if pdu.oversized {
            finding!(GenericProblem::FrameOversizedHead, "head" => pdu.data.len(), "missing" => pdu.missing,
                     "size" => size)
        } else {
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
        })
    }
}
