//! The PDU splitter: one direction of a reassembled TCP stream in, whole PDUs (and notes about the stream)
//! out. It knows no protocol: how long the PDU at an offset is, where the next plausible PDU starts after
//! lost bytes, and the head of a PDU above the size limit, are asked of the protocol's ``Framing``
//! (Wireshark's tcp_dissect_pdus, as a trait). What it does itself is what every TCP protocol needs: PDUs
//! damaged by capture gaps, resynchronisation with a count of the skipped bytes, HAProxy PROXY headers,
//! recognising TLS, HTTP and SSH on the port, and refusing sizes above the limit without allocating them: a
//! PDU above it is skipped, or, when the protocol can read its head alone, that head is handed on as a PDU
//! with the rest ``missing``, and the rest is skipped unbuffered.

use crate::name;
use crate::value::{entry, Map};

/// The bytes at an offset cannot start a PDU: the length field is out of bounds.
#[derive(Clone, Debug)]
pub struct BadLength {
    pub kind: String, // OVERSIZED or BAD_SIZE
    pub details: Map,
    pub params: Map,
}

pub enum PduLength {
    Complete(usize),
    NeedMore,
    Bad(BadLength),
}

/// The head of a PDU above the size limit.
pub enum Head {
    /// its first ``head`` bytes are worth decoding alone; the PDU is ``length`` bytes long
    Found {
        head: usize,
        length: usize,
    },
    NeedMore,
    /// the size is not to be trusted: skip it and resync
    Skip,
}

/// A protocol's framing: what the generic splitter asks.
pub trait Framing {
    /// The length of the PDU at the start of ``buf`` (complete, need more bytes, or an impossible size).
    fn pdu_length(&self, buf: &[u8], max_size: usize) -> PduLength;
    /// (true, offset) of the next plausible PDU start in ``buf``; (false, offset) when nothing before
    /// ``offset`` can start a PDU and the bytes from ``offset`` on must wait for more data.
    fn resync(&self, buf: &[u8], max_size: usize) -> (bool, usize) {
        let _ = max_size;
        (false, buf.len()) // a protocol without a way to find a PDU start: skip what is there
    }
    /// ``resync`` with, when nothing was found, how many bytes from the offset on must be there before
    /// the answer can change (0: ask again with any new byte). A candidate PDU start waiting for its bytes is
    /// then not read again at every segment: resynchronisation stays linear in the bytes it waits for.
    fn resync_until(&self, buf: &[u8], max_size: usize) -> (bool, usize, usize) {
        let (found, offset) = self.resync(buf, max_size);
        (found, offset, 0)
    }
    /// Whether ``oversized_head`` can read the head of an oversized PDU.
    fn reads_oversized_heads(&self) -> bool {
        false
    }
    /// For a PDU at the start of ``buf`` whose length is above the limit.
    fn oversized_head(&self, buf: &[u8]) -> Head {
        let _ = buf;
        Head::Skip
    }
    /// bytes of a PDU head worth decoding when the rest was lost
    fn min_pdu(&self) -> usize {
        1
    }
    /// the note's kind when a stream speaks another protocol
    fn foreign_kind(&self) -> &str {
        "FOREIGN_PROTOCOL"
    }
    /// how TLS on the port is named (a protocol may say what it likely is: its TLS variant)
    fn tls_name(&self) -> &str {
        "TLS handshake"
    }
}

/// One complete (or, when ``missing`` > 0, gap-damaged) PDU, header included.
#[derive(Clone, Debug)]
pub struct RawPdu {
    pub data: Vec<u8>,
    pub offset: i64,
    pub first_packet: i64,
    pub last_packet: i64,
    pub first_time: f64,
    pub time: f64,
    pub missing: i64,
    /// the head of a PDU above the size limit: the ``missing`` rest was skipped, not lost
    pub oversized: bool,
}

/// Something about the byte stream that is not a PDU: skipped bytes, a foreign protocol, a bad size.
#[derive(Clone, Debug)]
pub struct Note {
    pub kind: String, // SKIPPED | the protocol's foreign kind | OVERSIZED | BAD_SIZE | TRUNCATED | PROXY_HEADER
    pub offset: i64,
    pub length: i64,
    pub time: f64,
    pub packet: i64,
    pub details: Map,
    pub params: Map,
}

#[derive(Clone, Debug)]
pub enum Split {
    Pdu(RawPdu),
    Note(Note),
}

pub const PROXY_V2_SIGNATURE: &[u8] = b"\r\n\r\n\x00\r\nQUIT\n";
/// bytes buffered at most to find the head of a PDU above the size limit
pub const OVERSIZED_HEAD_LIMIT: usize = 64 * 1024;
const HTTP_PREFIXES: [&[u8]; 10] =
    [b"GET ", b"POST", b"PUT ", b"HEAD", b"HTTP", b"OPTI", b"DELE", b"PATC", b"CONN", b"PRI "];

/// Name the protocol when the first bytes of a stream are clearly not a binary RPC protocol (TLS as the
/// framing names it).
pub fn sniff_foreign_protocol<'a>(fr: &'a dyn Framing, head: &[u8]) -> Option<&'a str> {
    if head.len() >= 3 && head[0] == 0x16 && head[1] == 0x03 && head[2] <= 0x04 {
        return Some(fr.tls_name());
    }
    if head.len() >= 4 && HTTP_PREFIXES.contains(&&head[..4]) {
        return Some("HTTP (is an HTTP client talking to the binary-protocol port?)");
    }
    if head.len() >= 4 && &head[..4] == b"SSH-" {
        return Some("SSH");
    }
    None
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn slice(buf: &[u8], from: usize, to: usize) -> &[u8] {
    let to = to.min(buf.len());
    &buf[from.min(to)..to]
}

fn proxy_header_length(buf: &[u8], pos: usize) -> Option<usize> {
    let rest = &buf[pos..];
    if rest.starts_with(b"PROXY ") {
        let window = slice(rest, 0, 108);
        return match window.windows(2).position(|w| w == b"\r\n") {
            Some(crlf) => Some(crlf + 2),
            None if rest.len() < 108 => None,
            None => Some(108),
        };
    }
    if rest.len() < 16 {
        return None;
    }
    let length = 16 + u16::from_be_bytes([rest[14], rest[15]]) as usize;
    if rest.len() >= length {
        Some(length)
    } else {
        None
    } // wait for the whole v2 header
}

/// Splits one direction of a TCP stream into the PDUs of one protocol.
///
/// ``synced`` says whether the next byte is known to be a PDU boundary (true from the SYN on). When it is
/// not (capture started mid-connection, or bytes were lost), the splitter asks the protocol for the next
/// plausible start and reports the bytes it skipped.
pub struct Splitter {
    awaiting_head: bool, // buf starts with a PDU above the limit whose head is not all there yet
    pub synced: bool,
    pub max_frame_size: usize,
    buf: Vec<u8>,
    buf_offset: i64, // stream offset of buf[0]
    buf_packet: i64, // packet and time at which buf[0] arrived
    buf_time: f64,
    at_stream_start: bool,
    skip: i64, // bytes still to discard: the lost tail of a PDU damaged by a gap, or an oversized PDU's rest
    pub foreign: Option<String>,
    foreign_bytes: i64,
    skipped_run: i64,
    skipped_run_start: i64,
    resync_wait: usize, // unsynced: bytes buf must hold before resync is asked again (Framing::resync_until)
}

impl Splitter {
    pub fn new(synced: bool, max_frame_size: usize, start_offset: i64) -> Splitter {
        Splitter {
            awaiting_head: false,
            synced,
            max_frame_size,
            buf: Vec::new(),
            buf_offset: start_offset,
            buf_packet: 0,
            buf_time: 0.0,
            at_stream_start: synced && start_offset == 0,
            skip: 0,
            foreign: None,
            foreign_bytes: 0,
            skipped_run: 0,
            skipped_run_start: 0,
            resync_wait: 0,
        }
    }

    /// The bytes buffered (a PDU not yet complete).
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    pub fn feed(&mut self, fr: &dyn Framing, data: &[u8], time: f64, packet: i64, out: &mut Vec<Split>) {
        if self.foreign.is_some() {
            self.foreign_bytes += data.len() as i64;
            self.buf_offset += data.len() as i64;
            return;
        }
        let mut data = data;
        if self.skip > 0 {
            let n = (self.skip as usize).min(data.len());
            self.skip -= n as i64;
            self.buf_offset += n as i64;
            data = &data[n..];
            if data.is_empty() {
                return;
            }
        }
        if self.buf.is_empty() {
            self.buf_packet = packet;
            self.buf_time = time;
        }
        self.buf.extend_from_slice(data);
        self.drain(fr, out, time, packet, false);
    }

    /// ``length`` bytes of this direction were lost before the next data.
    pub fn gap(&mut self, fr: &dyn Framing, mut length: i64, time: f64, packet: i64, out: &mut Vec<Split>) {
        if self.foreign.is_some() {
            self.buf_offset += length;
            return;
        }
        if self.awaiting_head {
            // the head of an oversized PDU will not be complete: skip it as any other
            self.drain(fr, out, time, packet, true);
        }
        self.flush_skipped(out, time, packet); // a run of skipped bytes ends at the gap
        if self.skip > 0 {
            let absorbed = self.skip.min(length);
            self.skip -= absorbed;
            self.buf_offset += absorbed;
            length -= absorbed;
            if length == 0 {
                return;
            }
        }
        let n = self.buf.len();
        if self.synced && n > 0 {
            if let PduLength::Complete(frame_len) = fr.pdu_length(&self.buf, self.max_frame_size) {
                if frame_len > n {
                    let remaining = (frame_len - n) as i64;
                    let lost = remaining.min(length);
                    if n >= fr.min_pdu() {
                        // missing counts every byte of the PDU not in data: the lost ones and those after the gap
                        out.push(Split::Pdu(RawPdu {
                            data: std::mem::take(&mut self.buf),
                            offset: self.buf_offset,
                            first_packet: self.buf_packet,
                            last_packet: packet,
                            first_time: self.buf_time,
                            time,
                            missing: remaining,
                            oversized: false,
                        }));
                    } else {
                        out.push(self.note(
                            "TRUNCATED",
                            self.buf_offset,
                            n as i64,
                            time,
                            packet,
                            vec![],
                            vec![
                                entry(name!("case"), name!("lost_in_gap")),
                                entry(name!("frame_length"), frame_len as i64),
                            ],
                        ));
                    }
                    self.buf_offset += n as i64 + lost;
                    self.buf.clear();
                    if length < remaining {
                        // the gap ends inside this PDU: its length tells where the next one starts
                        self.skip = remaining - length;
                        return;
                    }
                    length -= remaining;
                    if length == 0 {
                        return; // the gap ended exactly on a PDU boundary
                    }
                }
            }
        }
        if !self.buf.is_empty() {
            let n = self.buf.len() as i64;
            out.push(self.note(
                "TRUNCATED",
                self.buf_offset,
                n,
                time,
                packet,
                vec![],
                vec![entry(name!("case"), name!("before_gap"))],
            ));
            self.buf_offset += n;
            self.buf.clear();
        }
        self.buf_offset += length;
        self.synced = false;
        self.at_stream_start = false;
        self.resync_wait = 0;
    }

    /// End of stream: report what could not be framed.
    pub fn finish(&mut self, fr: &dyn Framing, time: f64, packet: i64, out: &mut Vec<Split>) {
        if self.awaiting_head {
            self.drain(fr, out, time, packet, true);
        }
        self.flush_skipped(out, time, packet);
        if self.foreign.is_some() || self.buf.is_empty() {
            return; // a foreign stream was reported when it was recognised
        }
        let n = self.buf.len();
        let frame_len = if self.synced { fr.pdu_length(&self.buf, self.max_frame_size) } else { PduLength::NeedMore };
        match frame_len {
            PduLength::Complete(fl) if fl > n => {
                if n >= fr.min_pdu() {
                    out.push(Split::Pdu(RawPdu {
                        data: self.buf.clone(),
                        offset: self.buf_offset,
                        first_packet: self.buf_packet,
                        last_packet: packet,
                        first_time: self.buf_time,
                        time,
                        missing: (fl - n) as i64,
                        oversized: false,
                    }));
                } else {
                    out.push(self.note(
                        "TRUNCATED",
                        self.buf_offset,
                        n as i64,
                        time,
                        packet,
                        vec![],
                        vec![entry(name!("case"), name!("inside_frame")), entry(name!("frame_length"), fl as i64)],
                    ));
                }
            }
            _ => out.push(self.note(
                "TRUNCATED",
                self.buf_offset,
                n as i64,
                time,
                packet,
                vec![],
                vec![entry(name!("case"), name!("not_a_frame"))],
            )),
        }
        self.buf_offset += n as i64;
        self.buf.clear();
    }

    #[allow(clippy::too_many_arguments)]
    fn note(&self, kind: &str, offset: i64, length: i64, time: f64, packet: i64, details: Map, params: Map) -> Split {
        Split::Note(Note { kind: kind.to_string(), offset, length, time, packet, details, params })
    }

    fn drain(&mut self, fr: &dyn Framing, out: &mut Vec<Split>, time: f64, packet: i64, give_up_head: bool) {
        let mut pos = 0usize;
        let end = self.buf.len();
        let max_frame = self.max_frame_size;
        self.awaiting_head = false;
        loop {
            if !self.synced {
                if pos == 0 && end < self.resync_wait {
                    break; // the candidate at the buffer's start still lacks the bytes that can decide it
                }
                let (found, rel, wait) = fr.resync_until(&self.buf[pos..end], max_frame);
                let at = pos + rel.min(end - pos);
                self.resync_wait = if found { 0 } else { wait }; // the buffer starts at `at` once drained
                self.count_skipped(pos, at);
                pos = at;
                if !found {
                    break;
                }
                self.flush_skipped(out, time, packet);
                self.synced = true;
            }
            if self.at_stream_start {
                if end - pos < 4 {
                    break;
                }
                pos = self.check_stream_start(fr, pos, out, time, packet);
                if self.foreign.is_some() || self.at_stream_start {
                    return; // another protocol, or a PROXY header still incomplete
                }
            }
            let frame_len = match fr.pdu_length(&self.buf[pos..end], max_frame) {
                PduLength::Bad(bad) => {
                    if bad.kind == "OVERSIZED" && fr.reads_oversized_heads() {
                        match self.head_of_oversized(fr, pos, end, give_up_head) {
                            Head::NeedMore => {
                                self.awaiting_head = true;
                                break;
                            }
                            Head::Found { head, length } => {
                                pos = self.emit_oversized_head(fr, pos, end, &bad, head, length, out, time, packet);
                                if self.skip > 0 {
                                    break; // the rest of the PDU is in bytes still to come: feed() skips them
                                }
                                continue;
                            }
                            Head::Skip => {}
                        }
                    }
                    self.report_bad_length(fr, pos, &bad, out, time, packet);
                    if self.foreign.is_some() {
                        return;
                    }
                    self.synced = false;
                    self.skipped_run_start = self.buf_offset + pos as i64;
                    pos += 1;
                    self.skipped_run = 1;
                    continue;
                }
                PduLength::NeedMore => break,
                PduLength::Complete(n) => n,
            };
            if frame_len == 0 || frame_len > end - pos {
                break;
            }
            let frame_end = pos + frame_len;
            let (first_packet, first_time) = if pos == 0 { (self.buf_packet, self.buf_time) } else { (packet, time) };
            out.push(Split::Pdu(RawPdu {
                data: self.buf[pos..frame_end].to_vec(),
                offset: self.buf_offset + pos as i64,
                first_packet,
                last_packet: packet,
                first_time,
                time,
                missing: 0,
                oversized: false,
            }));
            pos = frame_end;
        }
        if pos > 0 {
            let pos = pos.min(self.buf.len());
            self.buf.drain(..pos);
            self.buf_offset += pos as i64;
            self.buf_packet = packet;
            self.buf_time = time;
        }
    }

    /// The protocol's head of the oversized PDU at ``pos``: looked for in the first OVERSIZED_HEAD_LIMIT
    /// bytes only, so what is buffered for it stays bounded whatever the declared size.
    fn head_of_oversized(&self, fr: &dyn Framing, pos: usize, end: usize, give_up: bool) -> Head {
        let limit = pos + OVERSIZED_HEAD_LIMIT;
        match fr.oversized_head(&self.buf[pos..end.min(limit)]) {
            Head::NeedMore => {
                if give_up || end >= limit {
                    Head::Skip
                } else {
                    Head::NeedMore
                }
            }
            Head::Found { head, length } => {
                if head > 0 && head <= (end - pos).min(length) {
                    Head::Found { head, length }
                } else {
                    Head::Skip
                }
            }
            Head::Skip => Head::Skip,
        }
    }

    /// The OVERSIZED note, then the PDU's head as a PDU with the rest missing; the rest is skipped (what of
    /// it is buffered now, and ``skip`` for the bytes still to come). Returns the position after it.
    #[allow(clippy::too_many_arguments)]
    fn emit_oversized_head(
        &mut self,
        fr: &dyn Framing,
        pos: usize,
        end: usize,
        bad: &BadLength,
        head: usize,
        length: usize,
        out: &mut Vec<Split>,
        time: f64,
        packet: i64,
    ) -> usize {
        let foreign = sniff_foreign_protocol(fr, slice(&self.buf, pos, pos + 4));
        out.push(self.bad_length_note(pos, bad, time, packet, foreign));
        let (first_packet, first_time) = if pos == 0 { (self.buf_packet, self.buf_time) } else { (packet, time) };
        out.push(Split::Pdu(RawPdu {
            data: self.buf[pos..pos + head].to_vec(),
            offset: self.buf_offset + pos as i64,
            first_packet,
            last_packet: packet,
            first_time,
            time,
            missing: (length - head) as i64,
            oversized: true,
        }));
        if pos + length > end {
            self.skip = (pos + length - end) as i64;
            return end;
        }
        pos + length
    }

    /// At offset 0: skip a PROXY protocol header, or recognise a foreign protocol.
    fn check_stream_start(
        &mut self,
        fr: &dyn Framing,
        pos: usize,
        out: &mut Vec<Split>,
        time: f64,
        packet: i64,
    ) -> usize {
        let head = slice(&self.buf, pos, pos + 16);
        if head.len() < 6 && b"PROXY ".starts_with(head) {
            return pos; // maybe a PROXY v1 header: wait for "PROXY " to be complete
        }
        let sig = &PROXY_V2_SIGNATURE[..head.len().min(PROXY_V2_SIGNATURE.len())];
        if head.starts_with(b"PROXY ") || head.starts_with(sig) {
            let Some(length) = proxy_header_length(&self.buf, pos) else { return pos };
            let text: String = slice(&self.buf, pos, pos + length).iter().take(200).map(|&b| b as char).collect();
            out.push(self.note(
                "PROXY_HEADER",
                self.buf_offset + pos as i64,
                length as i64,
                time,
                packet,
                vec![entry(name!("header"), text)],
                vec![],
            ));
            self.at_stream_start = false;
            return pos + length;
        }
        self.at_stream_start = false;
        if let Some(foreign) = sniff_foreign_protocol(fr, head) {
            self.become_foreign(fr, foreign, pos, out, time, packet);
        }
        pos
    }

    fn become_foreign(
        &mut self,
        fr: &dyn Framing,
        name: &str,
        pos: usize,
        out: &mut Vec<Split>,
        time: f64,
        packet: i64,
    ) {
        // reported at once (a live view should say so now), not when the stream ends
        self.foreign = Some(name.to_string());
        let offset = self.buf_offset + pos as i64;
        self.foreign_bytes = (self.buf.len() - pos) as i64;
        out.push(self.note(
            fr.foreign_kind(),
            offset,
            self.foreign_bytes,
            time,
            packet,
            vec![
                entry(name!("protocol"), name.to_owned()),
                entry(name!("head_hex"), hex(slice(&self.buf, pos, pos + 16))),
            ],
            vec![],
        ));
        self.buf_offset += self.buf.len() as i64;
        self.buf.clear();
    }

    fn report_bad_length(
        &mut self,
        fr: &dyn Framing,
        pos: usize,
        bad: &BadLength,
        out: &mut Vec<Split>,
        time: f64,
        packet: i64,
    ) {
        let foreign = sniff_foreign_protocol(fr, slice(&self.buf, pos, pos + 4));
        if let Some(name) = foreign {
            if self.buf_offset + pos as i64 == 0 {
                self.become_foreign(fr, name, pos, out, time, packet);
                return;
            }
        }
        out.push(self.bad_length_note(pos, bad, time, packet, foreign));
    }

    fn bad_length_note(&self, pos: usize, bad: &BadLength, time: f64, packet: i64, foreign: Option<&str>) -> Split {
        let mut details = bad.details.clone();
        details.push(entry(name!("head_hex"), hex(slice(&self.buf, pos, pos + 4))));
        let mut params = bad.params.clone();
        params.push(entry(name!("limit"), self.max_frame_size));
        params.push(entry(name!("foreign"), foreign.map(str::to_owned)));
        self.note(&bad.kind, self.buf_offset + pos as i64, 4, time, packet, details, params)
    }

    fn count_skipped(&mut self, pos: usize, upto: usize) {
        if upto > pos {
            if self.skipped_run == 0 {
                self.skipped_run_start = self.buf_offset + pos as i64;
            }
            self.skipped_run += (upto - pos) as i64;
        }
    }

    fn flush_skipped(&mut self, out: &mut Vec<Split>, time: f64, packet: i64) {
        if self.skipped_run > 0 {
            out.push(self.note("SKIPPED", self.skipped_run_start, self.skipped_run, time, packet, vec![], vec![]));
            self.skipped_run = 0;
        }
    }
}
