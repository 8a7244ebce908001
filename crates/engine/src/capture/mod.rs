//! The capture file reader: classic pcap (both byte orders, micro- and nanosecond, Kuznetzov's modified
//! format, rotated files joined with ``cat``), pcapng (sections, interfaces with their resolution, offset and
//! FCS length, Enhanced / Simple / obsolete Packet Blocks, blocks skipped), over any `Source` (a file, a
//! Python file object, gzip over either).
//!
//! Streaming: memory is the read size (1 MiB) plus the largest record, whatever the file; a length read off
//! the file is checked against `MAX_RECORD_SIZE` before anything is read for it, and the buffer only ever
//! holds bytes that were read. Odd but harmless things become `Note`s (registered ``capture.*`` ids, each
//! kind once; their texts are in ``dissector/capture/files.py``); damage ends the reading with a message
//! (`truncated`), after every packet before it. Packet numbers are Wireshark's ``frame.number``.

pub mod source;

use std::collections::HashSet;

use crate::problems::CaptureProblem;
use source::{Foreign, Gzip, Source, SourceError};

/// Bytes read from the source at a time.
pub const CHUNK_SIZE: usize = 1 << 20;
/// A record claiming more than this is corruption, not a packet (Wireshark's limit for most link types is
/// 256 KiB; some USB / D-Bus captures use up to 128 MiB).
pub const MAX_RECORD_SIZE: u64 = 64 << 20;

const PCAPNG_SHB: u32 = 0x0A0D0D0A;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B3C4D;

/// The link types the network layers (``transport/net.rs``) decode.
pub const SUPPORTED_LINKTYPES: [i64; 10] = [0, 1, 12, 14, 101, 108, 113, 228, 229, 276];

/// The names of link types, for the note about one that cannot be decoded.
pub const LINKTYPE_NAMES: [(i64, &str); 19] = [
    (0, "NULL"),
    (1, "ETHERNET"),
    (6, "IEEE802_5"),
    (9, "PPP"),
    (12, "RAW"),
    (14, "RAW"),
    (101, "RAW"),
    (104, "C_HDLC"),
    (105, "IEEE802_11"),
    (108, "LOOP"),
    (113, "LINUX_SLL"),
    (127, "IEEE802_11_RADIOTAP"),
    (147, "USER0"),
    (195, "IEEE802_15_4"),
    (220, "USB_LINUX_MMAPPED"),
    (228, "IPV4"),
    (229, "IPV6"),
    (249, "NETLINK"),
    (276, "LINUX_SLL2"),
];

fn linktype_name(linktype: i64) -> Option<&'static str> {
    LINKTYPE_NAMES.iter().find(|(number, _)| *number == linktype).map(|(_, name)| *name)
}

fn block_name(block_type: u32) -> Option<&'static str> {
    Some(match block_type {
        0x00000001 => "Interface Description Block",
        0x00000002 => "Packet Block",
        0x00000003 => "Simple Packet Block",
        0x00000004 => "Name Resolution Block",
        0x00000005 => "Interface Statistics Block",
        0x00000006 => "Enhanced Packet Block",
        0x00000009 => "systemd Journal Export Block",
        0x0000000A => "Decryption Secrets Block",
        0x00000BAD | 0x40000BAD => "Custom Block",
        PCAPNG_SHB => "Section Header Block",
        _ => return None,
    })
}

// ------------------------------------------------------------------------------------------------ notes
/// A parameter of a note.
#[derive(Clone, Debug, PartialEq)]
pub enum NoteValue {
    Int(i64),
    Text(String),
    Nothing,
}

/// A note about the capture file: a registered ``capture.*`` id and its parameters, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    pub id: &'static str,
    pub params: Vec<(&'static str, NoteValue)>,
}

/// What makes a note the same as one already made (each is made once).
#[derive(Hash, PartialEq, Eq)]
enum NoteKey {
    Modified,
    Version,
    ReservedBits,
    Linktype(i64),
    Concatenated(u64),
    ShortBlock(u32),
    CaplenBeyondBlock,
    SectionVersion(u16, u16),
    SimpleBlockSkipped(u64),
    SimpleBlockTime,
    BlockSkipped(u32),
    UndefinedInterface(u64, u32),
}

// ------------------------------------------------------------------------------------------------ packets
/// One packet: its bytes are `Reader::data(packet)` until the next read.
#[derive(Clone, Copy, Debug)]
pub struct Packet {
    pub index: u64,
    pub timestamp: f64,
    /// The interface's link type; -1 for an interface whose description block was too short.
    pub linktype: i64,
    start: usize,
    end: usize,
    pub orig_len: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Order {
    Little,
    Big,
}

fn u16_at(buf: &[u8], at: usize, order: Order) -> u16 {
    let b = [buf[at], buf[at + 1]];
    if order == Order::Little {
        u16::from_le_bytes(b)
    } else {
        u16::from_be_bytes(b)
    }
}

fn u32_at(buf: &[u8], at: usize, order: Order) -> u32 {
    let b = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
    if order == Order::Little {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    }
}

fn i64_at(buf: &[u8], at: usize, order: Order) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    if order == Order::Little {
        i64::from_le_bytes(b)
    } else {
        i64::from_be_bytes(b)
    }
}

/// (byte order, units per second, record header size) of a classic pcap magic read little-endian.
fn pcap_magic(magic: u32) -> Option<(Order, u64, usize)> {
    Some(match magic {
        0xA1B2C3D4 => (Order::Little, 1_000_000, 16),
        0xD4C3B2A1 => (Order::Big, 1_000_000, 16),
        0xA1B23C4D => (Order::Little, 1_000_000_000, 16),
        0x4D3CB2A1 => (Order::Big, 1_000_000_000, 16),
        0xA1B2CD34 => (Order::Little, 1_000_000, 24), // Kuznetzov's "modified" pcap: 8 more bytes per record
        0x34CDB2A1 => (Order::Big, 1_000_000, 24),
        _ => return None,
    })
}

/// A global header read as a record header puts its magic where the seconds are, in either byte order.
fn header_as_seconds(seconds: u32) -> bool {
    pcap_magic(seconds).is_some() || pcap_magic(seconds.swap_bytes()).is_some()
}

/// Timestamp units per second of a pcapng interface (if_tsresol).
#[derive(Clone, Copy)]
enum Units {
    Ten(u32),
    Two(u32),
}

impl Units {
    /// The units as an integer, when it fits.
    fn integer(self) -> Option<u64> {
        match self {
            Units::Ten(e) => 10u64.checked_pow(e),
            Units::Two(e) => 1u64.checked_shl(e),
        }
    }

    /// `n / units` rounded once, as Python's int / int is: a float division when both are floats exactly
    /// (below 2^53, or a power of two), else the decimal `n`e-`e` parsed (Rust's parsing rounds correctly
    /// too); only resolutions finer than 10^-15 s, which no capture uses, take that way.
    fn divide(self, n: u64) -> f64 {
        const EXACT: u64 = 1 << 53;
        match (self, self.integer()) {
            (Units::Two(e), _) => n as f64 / 2f64.powi(e as i32),
            (_, Some(u)) if u < EXACT && n < EXACT => n as f64 / u as f64,
            (Units::Ten(e), _) => format!("{n}e-{e}").parse().unwrap_or(f64::NAN),
        }
    }
}

/// Epoch seconds of a pcapng timestamp, as the Python reader computed them (every float the same).
fn pcapng_time(ts_hi: u32, ts_lo: u32, units: Units, offset: i64) -> f64 {
    let t = (u64::from(ts_hi) << 32) | u64::from(ts_lo);
    if t < 1 << 53 {
        return units.divide(t) + offset as f64;
    }
    let (sec, frac) = match units.integer() {
        Some(u) => (t / u, t % u),
        None => (0, t),
    };
    sec as f64 + units.divide(frac) + offset as f64
}

struct Interface {
    linktype: i64,
    snaplen: u32,
    units: Units,
    offset: i64,
    fcs: u32,
}

fn interface_name(interface: u64, section: u64) -> String {
    if section == 1 {
        format!("interface {interface}")
    } else {
        format!("interface {interface} of section {section}")
    }
}

/// (new end, new orig_len) of packet data [start, end) without its trailing frame check sequence.
fn strip_fcs(fcs: u32, start: usize, end: usize, orig_len: u64) -> (usize, u64) {
    let keep = orig_len.saturating_sub(u64::from(fcs));
    (end.min(start.saturating_add(usize::try_from(keep).unwrap_or(usize::MAX))), keep)
}

fn hex_prefix(bytes: &[u8]) -> String {
    bytes.iter().take(4).map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

enum Format {
    Pcap { order: Order, units: u64, record_header: usize, linktype: i64, fcs: u32 },
    Pcapng { order: Order, section: u64, interfaces: Vec<Interface>, last_time: f64 },
    Done,
}

/// What stops a reader from starting.
pub enum StartError {
    /// Not a capture (the message says why).
    Capture(String),
    /// The first read failed.
    Source(SourceError),
}

/// A foreign error (a Python exception) a source raised that is not the end of the capture: it propagates.
pub struct Raised(pub Foreign);

/// How a source's error ends the capture: its text (``Type: message``), or the error to propagate.
pub type ErrorText = fn(SourceError) -> Result<String, Foreign>;

/// The reader: `next_packet` until None; then `truncated` says why it stopped early, if it did.
pub struct Reader {
    source: Box<dyn Source>,
    error_text: ErrorText,
    buf: Vec<u8>,
    pos: usize,
    /// Offset in the (uncompressed) stream of `buf[0]`.
    base: u64,
    eof: bool,
    stream_error: Option<String>,
    format: Format,
    pub name: String,
    pub kind: &'static str,
    pub compressed: bool,
    pub truncated: Option<String>,
    pub notes: Vec<Note>,
    noted: HashSet<NoteKey>,
    pub packets: u64,
    pub linktype: Option<i64>,
    pub snaplen: Option<u32>,
    pub fcs_len: Option<u32>,
    /// The largest capacity the buffer had.
    pub buffer_peak: usize,
}

impl Reader {
    /// Read the start of `source` (gzip or not; pcap or pcapng), named `name` in messages.
    pub fn start(mut source: Box<dyn Source>, name: &str, error_text: ErrorText) -> Result<Reader, StartError> {
        let mut first = Vec::new();
        while first.len() < 2 {
            if source.read(CHUNK_SIZE, &mut first).map_err(StartError::Source)? == 0 {
                break;
            }
        }
        let compressed = first.starts_with(&[0x1f, 0x8b]);
        if compressed {
            source = Box::new(Gzip::new(SourceBox(source), std::mem::take(&mut first)));
        }
        let buffer_peak = first.capacity();
        let mut reader = Reader {
            source,
            error_text,
            buf: first,
            pos: 0,
            base: 0,
            eof: false,
            stream_error: None,
            format: Format::Done,
            name: name.to_owned(),
            kind: "",
            compressed,
            truncated: None,
            notes: Vec::new(),
            noted: HashSet::new(),
            packets: 0,
            linktype: None,
            snaplen: None,
            fcs_len: None,
            buffer_peak,
        };
        reader.begin().map_err(|e| match e {
            Stop::Message(text) => StartError::Capture(text),
            Stop::Raised(err) => StartError::Source(SourceError::Foreign(err)),
        })?;
        Ok(reader)
    }

    fn begin(&mut self) -> Result<(), Stop> {
        self.fill(24)?;
        let what = if self.compressed { format!("{} (gzip)", self.name) } else { self.name.clone() };
        let have = self.buf.len();
        if have == 0 {
            return Err(Stop::Message(match &self.stream_error {
                Some(error) => {
                    let kind = if self.compressed { "corrupt or truncated gzip data" } else { "cannot read" };
                    format!("{what}: {kind}: {error}")
                }
                None => format!("{what}: empty file (0 bytes), not a capture"),
            }));
        }
        if have < 4 {
            return Err(Stop::Message(format!(
                "{what}: file too short ({have} bytes) to be a pcap or pcapng file (starts with {})",
                hex_prefix(&self.buf)
            )));
        }
        let magic = u32_at(&self.buf, 0, Order::Little);
        if magic == PCAPNG_SHB {
            self.kind = "pcapng";
            if have < 12 {
                return Err(Stop::Message(format!(
                    "{what}: pcapng section header truncated (file has only {have} bytes)"
                )));
            }
            let order = if u32_at(&self.buf, 8, Order::Little) == BYTE_ORDER_MAGIC {
                Order::Little
            } else if u32_at(&self.buf, 8, Order::Big) == BYTE_ORDER_MAGIC {
                Order::Big
            } else {
                return Err(Stop::Message(format!(
                    "{what}: starts like pcapng but the section header has no valid byte-order magic (bytes 8-11: {}); \
                     not a pcapng file or corrupt",
                    hex_prefix(&self.buf[8..12])
                )));
            };
            // the first section header checked now, so that its problems are errors, not truncation
            let length = u32_at(&self.buf, 4, order);
            if length < 28 || !length.is_multiple_of(4) {
                return Err(Stop::Message(format!("{what}: pcapng section header block has invalid length {length}")));
            }
            if u64::from(length) > MAX_RECORD_SIZE {
                return Err(Stop::Message(format!(
                    "{what}: pcapng section header block length {length} is implausible"
                )));
            }
            if !self.fill(length as usize)? {
                return Err(Stop::Message(format!(
                    "{what}: pcapng section header truncated: block is {length} bytes, file has only {}",
                    self.buf.len()
                )));
            }
            self.format = Format::Pcapng { order: Order::Little, section: 0, interfaces: Vec::new(), last_time: 0.0 };
            return Ok(());
        }
        if pcap_magic(magic).is_some() {
            self.kind = "pcap";
            if have < 24 {
                return Err(Stop::Message(format!(
                    "{what}: pcap global header truncated: file has {have} bytes, the header needs 24"
                )));
            }
            self.pos = 24;
            self.format = self.pcap_header(0, "the file".to_owned());
            return Ok(());
        }
        Err(Stop::Message(format!("{what}: not a pcap or pcapng file (starts with {})", hex_prefix(&self.buf))))
    }

    /// The bytes of a packet `next_packet` returned (until the next call).
    pub fn data(&self, packet: &Packet) -> &[u8] {
        &self.buf[packet.start..packet.end]
    }

    /// The next packet; None at the end of the capture (clean or not: see `truncated`). A Python source's
    /// exception that does not mean the end propagates (and ends the reading).
    pub fn next_packet(&mut self) -> Result<Option<Packet>, Raised> {
        let result = match self.format {
            Format::Pcap { .. } => self.next_pcap(),
            Format::Pcapng { .. } => self.next_pcapng(),
            Format::Done => return Ok(None),
        };
        match result {
            Ok(packet) => Ok(Some(packet)),
            Err(stop) => {
                self.format = Format::Done;
                match stop {
                    Stop::Message(text) => {
                        if !text.is_empty() {
                            self.truncated = Some(text);
                        }
                        Ok(None)
                    }
                    Stop::Raised(err) => Err(Raised(err)),
                }
            }
        }
    }

    /// Stop reading: the source is dropped (a file opened here is closed).
    pub fn close(&mut self) {
        self.format = Format::Done;
        self.source = Box::new(source::SliceSource { data: Vec::new(), pos: 0, piece: 0 });
        self.buf = Vec::new();
        self.pos = 0;
    }

    fn note(&mut self, key: NoteKey, id: CaptureProblem, params: Vec<(&'static str, NoteValue)>) {
        if self.noted.insert(key) {
            self.notes.push(Note { id: id.id(), params });
        }
    }

    fn check_linktype(&mut self, linktype: i64, place: String) {
        if !SUPPORTED_LINKTYPES.contains(&linktype) {
            let label = match linktype_name(linktype) {
                Some(name) => format!("{linktype} ({name})"),
                None => linktype.to_string(),
            };
            self.note(
                NoteKey::Linktype(linktype),
                CaptureProblem::UnsupportedLinktype,
                vec![("linktype", NoteValue::Text(label)), ("where", NoteValue::Text(place))],
            );
        }
    }

    // ------------------------------------------------------------------------------------------ buffering
    /// Make `need` bytes available from `pos`; false if the stream ends first. Reads `CHUNK_SIZE` at a time:
    /// the buffer grows with what was read, never with what a record claims.
    fn fill(&mut self, need: usize) -> Result<bool, Stop> {
        let mut have = self.buf.len() - self.pos;
        if have >= need {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
        while have < need {
            match self.source.read(CHUNK_SIZE, &mut self.buf) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(_) => {
                    have = self.buf.len();
                    self.buffer_peak = self.buffer_peak.max(self.buf.capacity());
                }
                Err(error) => {
                    self.stream_error = Some((self.error_text)(error).map_err(Stop::Raised)?);
                    self.eof = true;
                    break;
                }
            }
        }
        Ok(have >= need)
    }

    fn stream_end_message(&self, index: u64) -> String {
        let source = if self.compressed { "gzip stream" } else { "read" };
        format!(
            "capture file truncated after packet record {index}: {source} error: {}",
            self.stream_error.as_deref().unwrap_or("")
        )
    }

    /// The message for a record starting at buffer position `start` that needs `need` bytes from there.
    fn cut_message(&self, what: &str, start: usize, need: u64) -> String {
        let end = self.base + self.buf.len() as u64;
        let more = need as i64 - (self.buf.len() - start) as i64;
        let mut message = format!(
            "capture file truncated: {what} (starting at byte offset {}) cut off at byte offset {end} (needs {more} more byte{})",
            self.base + start as u64,
            if more != 1 { "s" } else { "" }
        );
        if let Some(error) = &self.stream_error {
            message.push_str(&format!("; {} error: {error}", if self.compressed { "gzip stream" } else { "read" }));
        }
        message
    }

    // ------------------------------------------------------------------------------------------------ pcap
    /// The format of the pcap global header at `at` (24 bytes there, its magic known), with its notes.
    fn pcap_header(&mut self, at: usize, place: String) -> Format {
        let (order, units, record_header) =
            pcap_magic(u32_at(&self.buf, at, Order::Little)).unwrap_or((Order::Little, 1_000_000, 16));
        let (major, minor) = (u16_at(&self.buf, at + 4, order), u16_at(&self.buf, at + 6, order));
        let snaplen = u32_at(&self.buf, at + 16, order);
        let network = u32_at(&self.buf, at + 20, order);
        if record_header == 24 {
            self.note(NoteKey::Modified, CaptureProblem::ModifiedPcap, vec![]);
        }
        if major != 2 {
            self.note(
                NoteKey::Version,
                CaptureProblem::PcapVersion,
                vec![("version", NoteValue::Text(format!("{major}.{minor}")))],
            );
        }
        self.snaplen = Some(snaplen);
        let fcs = if network & 0x04000000 != 0 { ((network >> 28) & 0xF) * 2 } else { 0 }; // in 16-bit words
        let linktype = i64::from(network & 0xFFFF);
        if network & 0x03FF0000 != 0 {
            self.note(
                NoteKey::ReservedBits,
                CaptureProblem::LinktypeReservedBits,
                vec![("field", NoteValue::Int(network.into()))],
            );
        }
        self.linktype = Some(linktype);
        self.fcs_len = Some(fcs);
        self.check_linktype(linktype, place);
        Format::Pcap { order, units, record_header, linktype, fcs }
    }

    /// A second pcap file starts at `pos` (``cat`` of rotated files): its magic and version 2.x are there.
    fn another_pcap_header(&self, pos: usize) -> bool {
        if pos + 24 > self.buf.len() {
            return false;
        }
        match pcap_magic(u32_at(&self.buf, pos, Order::Little)) {
            Some((order, _, _)) => u16_at(&self.buf, pos + 4, order) == 2,
            None => false,
        }
    }

    fn next_pcap(&mut self) -> Result<Packet, Stop> {
        loop {
            let Format::Pcap { order, units, record_header, linktype, fcs } = self.format else {
                return Err(Stop::end());
            };
            let index = self.packets;
            if self.pos + record_header > self.buf.len() && !self.fill(record_header)? {
                let have = self.buf.len() - self.pos;
                return Err(Stop::Message(if have >= 12 {
                    // the captured length is there: report the whole record
                    let caplen = u32_at(&self.buf, self.pos + 8, order);
                    self.cut_message(
                        &format!("packet record {}", index + 1),
                        self.pos,
                        record_header as u64 + u64::from(caplen),
                    )
                } else if have > 0 {
                    self.cut_message(&format!("packet record {} header", index + 1), self.pos, record_header as u64)
                } else if self.stream_error.is_some() {
                    self.stream_end_message(index)
                } else {
                    String::new()
                }));
            }
            let pos = self.pos;
            let seconds = u32_at(&self.buf, pos, order);
            let fraction = u32_at(&self.buf, pos + 4, order);
            let caplen = u32_at(&self.buf, pos + 8, order);
            let mut orig_len = u64::from(u32_at(&self.buf, pos + 12, order));
            if header_as_seconds(seconds) {
                self.fill(24)?;
                if self.another_pcap_header(self.pos) {
                    // the next file of a rotation, appended by cat: read on with its own header
                    let offset = self.base + self.pos as u64;
                    self.note(
                        NoteKey::Concatenated(offset),
                        CaptureProblem::Concatenated,
                        vec![("offset", NoteValue::Int(offset as i64)), ("packet", NoteValue::Int(index as i64 + 1))],
                    );
                    self.format = self.pcap_header(self.pos, format!("the file at byte {offset}"));
                    self.pos += 24;
                    continue;
                }
            }
            let need = record_header + caplen as usize;
            if self.pos + need > self.buf.len() {
                if u64::from(caplen) > MAX_RECORD_SIZE {
                    return Err(Stop::Message(format!(
                        "capture file corrupt: packet record {} at byte offset {} claims {caplen} captured bytes (more than the \
                         {MAX_RECORD_SIZE}-byte limit); stopped reading",
                        index + 1,
                        self.base + self.pos as u64
                    )));
                }
                if !self.fill(need)? {
                    return Err(Stop::Message(self.cut_message(
                        &format!("packet record {}", index + 1),
                        self.pos,
                        need as u64,
                    )));
                }
            }
            let start = self.pos + record_header;
            let end = start + caplen as usize;
            let mut data_end = end;
            if fcs != 0 {
                (data_end, orig_len) = strip_fcs(fcs, start, end, orig_len);
            }
            self.packets = index + 1;
            self.pos = end;
            let timestamp = f64::from(seconds) + f64::from(fraction) * (1.0 / units as f64);
            return Ok(Packet { index: index + 1, timestamp, linktype, start, end: data_end, orig_len });
        }
    }

    // ---------------------------------------------------------------------------------------------- pcapng
    fn block_what(block_type: u32, index: u64) -> String {
        let name = block_name(block_type).map_or_else(|| format!("block of type 0x{block_type:08x}"), str::to_owned);
        if matches!(block_type, 6 | 3 | 2) {
            format!("packet record {} ({name})", index + 1)
        } else {
            format!("{name} after packet record {index}")
        }
    }

    fn next_pcapng(&mut self) -> Result<Packet, Stop> {
        loop {
            let Format::Pcapng { mut order, .. } = self.format else { return Err(Stop::end()) };
            let index = self.packets;
            // ---- block header
            if self.pos + 12 > self.buf.len() && !self.fill(12)? {
                let have = self.buf.len() - self.pos;
                return Err(Stop::Message(if have >= 8 && u32_at(&self.buf, self.pos, order) != PCAPNG_SHB {
                    let (block_type, length) =
                        (u32_at(&self.buf, self.pos, order), u32_at(&self.buf, self.pos + 4, order));
                    self.cut_message(&Self::block_what(block_type, index), self.pos, u64::from(length.max(12)))
                } else if have > 0 {
                    self.cut_message(&format!("block header after packet record {index}"), self.pos, 12)
                } else if self.stream_error.is_some() {
                    self.stream_end_message(index)
                } else {
                    String::new()
                }));
            }
            let pos = self.pos;
            let mut block_type = u32_at(&self.buf, pos, order);
            if block_type == PCAPNG_SHB {
                // a new section: its byte order from the byte-order magic
                order = if u32_at(&self.buf, pos + 8, Order::Little) == BYTE_ORDER_MAGIC {
                    Order::Little
                } else if u32_at(&self.buf, pos + 8, Order::Big) == BYTE_ORDER_MAGIC {
                    Order::Big
                } else {
                    return Err(Stop::Message(format!(
                        "capture file corrupt: section header block at byte offset {} has no valid byte-order magic; stopped reading",
                        self.base + pos as u64
                    )));
                };
                if let Format::Pcapng { order: o, .. } = &mut self.format {
                    *o = order;
                }
                block_type = u32_at(&self.buf, pos, order);
            }
            let length = u32_at(&self.buf, pos + 4, order);
            if length < 12 || length & 3 != 0 || u64::from(length) > MAX_RECORD_SIZE {
                return Err(Stop::Message(format!(
                    "capture file corrupt: block at byte offset {} (type 0x{block_type:08x}) has invalid length {length}; stopped reading",
                    self.base + pos as u64
                )));
            }
            let length = length as usize;
            if self.pos + length > self.buf.len() && !self.fill(length)? {
                return Err(Stop::Message(self.cut_message(
                    &Self::block_what(block_type, index),
                    self.pos,
                    length as u64,
                )));
            }
            let pos = self.pos;
            let end = pos + length;
            let trailing = u32_at(&self.buf, end - 4, order);
            if trailing as usize != length {
                return Err(Stop::Message(format!(
                    "capture file corrupt: block at byte offset {} (type 0x{block_type:08x}): trailing length {trailing} does not \
                     match leading length {length}; stopped reading",
                    self.base + pos as u64
                )));
            }
            self.pos = end;
            let (body, body_end) = (pos + 8, end - 4);
            let found = match block_type {
                6 => self.enhanced_packet_block(order, pos, body, body_end, index),
                1 => {
                    self.interface_block(order, body, body_end);
                    None
                }
                PCAPNG_SHB => {
                    self.section_block(order, body, body_end);
                    None
                }
                3 => self.simple_packet_block(order, body, body_end, index),
                2 => self.packet_block(order, body, body_end, index),
                4 | 5 => None, // name resolution, interface statistics: normal, nothing we need
                _ => {
                    let name = block_name(block_type).map_or(NoteValue::Nothing, |n| NoteValue::Text(n.to_owned()));
                    self.note(
                        NoteKey::BlockSkipped(block_type),
                        CaptureProblem::BlockSkipped,
                        vec![("block", name), ("type", NoteValue::Int(block_type.into()))],
                    );
                    None
                }
            };
            if let Some(packet) = found {
                self.packets = packet.index;
                if let Format::Pcapng { last_time, .. } = &mut self.format {
                    *last_time = packet.timestamp;
                }
                return Ok(packet);
            }
        }
    }

    fn section(&self) -> u64 {
        match &self.format {
            Format::Pcapng { section, .. } => *section,
            _ => 0,
        }
    }

    fn interfaces(&self) -> &[Interface] {
        match &self.format {
            Format::Pcapng { interfaces, .. } => interfaces,
            _ => &[],
        }
    }

    fn short_block(&mut self, block_type: u32, name: &str) {
        self.note(
            NoteKey::ShortBlock(block_type),
            CaptureProblem::ShortBlock,
            vec![("block", NoteValue::Text(name.to_owned()))],
        );
    }

    fn enhanced_packet_block(
        &mut self,
        order: Order,
        pos: usize,
        body: usize,
        body_end: usize,
        index: u64,
    ) -> Option<Packet> {
        if body_end - body < 20 {
            self.short_block(6, "Enhanced Packet Block");
            return None;
        }
        let interface = u32_at(&self.buf, body, order);
        let (ts_hi, ts_lo) = (u32_at(&self.buf, body + 4, order), u32_at(&self.buf, body + 8, order));
        let caplen = u32_at(&self.buf, body + 12, order) as usize;
        let orig_len = u64::from(u32_at(&self.buf, body + 16, order));
        let start = body + 20;
        let mut data_end = start + caplen;
        if data_end > body_end {
            let offset = self.base + pos as u64;
            self.note(
                NoteKey::CaplenBeyondBlock,
                CaptureProblem::CaplenBeyondBlock,
                vec![("offset", NoteValue::Int(offset as i64))],
            );
            data_end = body_end;
        }
        self.block_packet(interface, ts_hi, ts_lo, start, data_end, orig_len, index + 1)
    }

    fn packet_block(&mut self, order: Order, body: usize, body_end: usize, index: u64) -> Option<Packet> {
        if body_end - body < 20 {
            self.short_block(2, "Packet Block");
            return None;
        }
        let interface = u32::from(u16_at(&self.buf, body, order));
        let (ts_hi, ts_lo) = (u32_at(&self.buf, body + 4, order), u32_at(&self.buf, body + 8, order));
        let caplen = u32_at(&self.buf, body + 12, order) as usize;
        let orig_len = u64::from(u32_at(&self.buf, body + 16, order));
        let start = body + 20;
        self.block_packet(interface, ts_hi, ts_lo, start, (start + caplen).min(body_end), orig_len, index + 1)
    }

    /// The packet of an Enhanced or obsolete Packet Block; None (noted) when its interface is undefined.
    #[allow(clippy::too_many_arguments)]
    fn block_packet(
        &mut self,
        interface: u32,
        ts_hi: u32,
        ts_lo: u32,
        start: usize,
        end: usize,
        orig_len: u64,
        index: u64,
    ) -> Option<Packet> {
        let section = self.section();
        let Some(itf) = self.interfaces().get(interface as usize) else {
            self.note(
                NoteKey::UndefinedInterface(section, interface),
                CaptureProblem::UndefinedInterface,
                vec![("interface", NoteValue::Text(interface_name(interface.into(), section)))],
            );
            return None;
        };
        let (mut end, mut orig_len) = (end, orig_len);
        if itf.fcs != 0 {
            (end, orig_len) = strip_fcs(itf.fcs, start, end, orig_len);
        }
        let timestamp = pcapng_time(ts_hi, ts_lo, itf.units, itf.offset);
        Some(Packet { index, timestamp, linktype: itf.linktype, start, end, orig_len })
    }

    fn simple_packet_block(&mut self, order: Order, body: usize, body_end: usize, index: u64) -> Option<Packet> {
        let section = self.section();
        if body_end - body < 4 || self.interfaces().is_empty() {
            self.note(NoteKey::SimpleBlockSkipped(section), CaptureProblem::SimpleBlockSkipped, vec![]);
            return None;
        }
        let mut orig_len = u64::from(u32_at(&self.buf, body, order));
        let itf = &self.interfaces()[0];
        let (snaplen, fcs, linktype) = (u64::from(itf.snaplen), itf.fcs, itf.linktype);
        let mut caplen = orig_len;
        if snaplen != 0 && snaplen < caplen {
            caplen = snaplen;
        }
        let start = body + 4;
        let mut caplen = caplen.min((body_end - start) as u64) as usize;
        if fcs != 0 {
            (caplen, orig_len) = strip_fcs(fcs, 0, caplen, orig_len);
        }
        self.note(NoteKey::SimpleBlockTime, CaptureProblem::SimpleBlockTime, vec![]);
        let Format::Pcapng { last_time, .. } = self.format else { return None };
        Some(Packet { index: index + 1, timestamp: last_time, linktype, start, end: start + caplen, orig_len })
    }

    fn interface_block(&mut self, order: Order, body: usize, body_end: usize) {
        let section = self.section();
        let number = self.interfaces().len() as u64;
        let interface = if body_end - body < 8 {
            self.short_block(1, "Interface Description Block");
            Interface { linktype: -1, snaplen: 0, units: Units::Ten(6), offset: 0, fcs: 0 }
        } else {
            let linktype = i64::from(u16_at(&self.buf, body, order));
            let snaplen = u32_at(&self.buf, body + 4, order);
            let mut itf = Interface { linktype, snaplen, units: Units::Ten(6), offset: 0, fcs: 0 };
            // options: (code, length, value padded to 4); stop quietly at malformed data
            let mut p = body + 8;
            while p + 4 <= body_end {
                let (code, len) = (u16_at(&self.buf, p, order), u16_at(&self.buf, p + 2, order) as usize);
                if code == 0 {
                    break;
                }
                p += 4;
                if p + len > body_end {
                    break;
                }
                let value = &self.buf[p..p + len];
                match code {
                    9 if len >= 1 => {
                        let r = value[0];
                        itf.units =
                            if r & 0x80 != 0 { Units::Two(u32::from(r & 0x7F)) } else { Units::Ten(u32::from(r)) };
                    }
                    14 if len >= 8 => itf.offset = i64_at(value, 0, order),
                    13 if len >= 1 => itf.fcs = u32::from(value[0]),
                    _ => {}
                }
                p += (len + 3) & !3;
            }
            self.check_linktype(linktype, interface_name(number, section));
            itf
        };
        if let Format::Pcapng { interfaces, .. } = &mut self.format {
            interfaces.push(interface);
        }
    }

    fn section_block(&mut self, order: Order, body: usize, body_end: usize) {
        let mut section = 0;
        if let Format::Pcapng { section: s, interfaces, .. } = &mut self.format {
            *s += 1;
            section = *s;
            interfaces.clear();
        }
        if body_end - body >= 8 {
            let (major, minor) = (u16_at(&self.buf, body + 4, order), u16_at(&self.buf, body + 6, order));
            if major != 1 {
                self.note(
                    NoteKey::SectionVersion(major, minor),
                    CaptureProblem::PcapngVersion,
                    vec![
                        ("section", NoteValue::Int(section as i64)),
                        ("version", NoteValue::Text(format!("{major}.{minor}"))),
                    ],
                );
            }
        }
    }
}

/// Why the reading stopped: a message (empty: the clean end), or an error to propagate.
enum Stop {
    Message(String),
    Raised(Foreign),
}

impl Stop {
    fn end() -> Stop {
        Stop::Message(String::new())
    }
}

/// A boxed source as a source (so gzip can wrap whatever was opened).
struct SourceBox(Box<dyn Source>);

impl Source for SourceBox {
    fn read(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, SourceError> {
        self.0.read(max, out)
    }

    fn read_again(&mut self, offset: u64, max: usize, out: &mut Vec<u8>) -> Option<usize> {
        self.0.read_again(offset, max, out)
    }
}
