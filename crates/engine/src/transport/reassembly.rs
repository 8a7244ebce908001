//! TCP reassembly: segments in, per-connection / per-direction byte-stream events out, in stream order.
//!
//! * ``Opened`` — first segment of a connection (``mid_stream`` when no SYN was seen);
//! * ``Data`` — new bytes of one direction, every stream byte exactly once and in order;
//! * ``Gap`` — a range of stream bytes that will never come (capture loss, snaplen, ...);
//! * ``Closed`` — FIN exchange, RST, reuse, eviction or end of capture; the connection is then forgotten.
//!
//! Sequence numbers are mapped to stream offsets (0 = first byte after the SYN, or the first byte seen when
//! the capture started mid-connection) by signed 32-bit differences against the next expected sequence
//! number, so wrap-around needs no special case anywhere else.
//!
//! Loss / out-of-order policy: segments beyond the next expected offset are buffered (non-overlapping
//! pieces, first copy wins) until the hole before them fills. A hole is declared permanent (a ``Gap``) when
//! the out-of-order bytes buffered for that direction exceed ``max_buffered`` ("buffer limit"), or those of
//! every connection together exceed ``max_buffered_total`` (then the connection holding bytes the longest gives
//! up all its holes: "total buffer limit", and a ``BufferDropped`` event says so); when it has
//! waited for more than ``ooo_wait_packets`` later segments of the same connection, or more than
//! ``hole_timeout`` seconds of capture time ("missing segment"); when the connection is closing (RST, or FIN
//! both ways) and the missing bytes did not show up within ``close_wait_packets`` further packets of the
//! whole capture ("connection closed"; loopback captures on multi-core machines record segments out of order
//! by a few packets, so a FIN/RST may precede the last data segment); when the capture ends ("capture
//! ended"). The peer's ACK alone is never taken as proof of loss. A FIN seen before the data preceding it is
//! itself a hole. A snaplen-cut payload is a gap of reason "snaplen" at its place in the stream.
//!
//! Retransmissions, overlaps, keep-alives (seq = next - 1 with 0/1 byte) and zero-window probes deliver
//! nothing twice; overlapping bytes are compared where the first copy is still at hand (buffered pieces, the
//! last delivered payload) and differences counted in ``inconsistent_overlaps`` and reported (``Ignored``
//! RETRANSMISSION_CONFLICT, the first copy kept). A RST's payload and bytes beyond the FIN are ignored and
//! reported the same way (DATA_ON_RST, DATA_AFTER_FIN).
//!
//! Connections: a 4-tuple plus a generation. A SYN (without ACK) that is not a retransmission of the known
//! ISN, on a 4-tuple whose connection already carried data, FIN or RST, closes that connection ("reused")
//! and opens a new one; so does a SYN-ACK with a new ISN. A connection is closed and forgotten when both
//! directions reached their FIN ("fin") or after a RST ("rst") once the bytes it acknowledges were seen. A
//! tombstone (end sequence numbers) is kept for a while so that trailing ACKs and retransmissions of a
//! forgotten connection open nothing. Without a SYN, a connection is opened by its first segment carrying
//! data or FIN (lone ACKs open nothing); bytes just before that start are ignored (``bytes_before_start``).
//! At most ``max_connections`` are tracked: opening one more closes the oldest ("evicted").

use std::collections::BTreeMap;
use std::hash::Hash;
use std::rc::Rc;

use super::net::{Ip, Segment, ACK, FIN, RST, SYN};
use crate::budget::{MemoryBudget, Reservation};

/// One side of a connection.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Endpoint {
    pub ip: Ip,
    pub port: u16,
}

type Key = (Endpoint, Endpoint); // directed: (sender, receiver)

/// What the consumers of the stream events know of a connection.
#[derive(Clone, Debug)]
pub struct ConnInfo {
    pub id: u64,
    pub a: Endpoint, // the client (SYN sender) when the handshake was seen, else the first segment's sender
    pub b: Endpoint,
    pub saw_syn: bool,
    pub first_time: f64,
    pub first_packet: i64,
}

/// Side 0 is ``a``, side 1 is ``b``.
#[derive(Clone, Debug)]
pub enum StreamEvent {
    Opened {
        conn: ConnInfo,
        time: f64,
        packet: i64,
        mid_stream: bool,
    },
    Data {
        conn: u64,
        side: usize,
        saw_syn: bool,
        data: Rc<[u8]>,
        offset: i64,
        time: f64,
        packet: i64,
    },
    Gap {
        conn: u64,
        side: usize,
        saw_syn: bool,
        offset: i64,
        length: i64,
        time: f64,
        packet: i64,
        reason: &'static str,
    },
    Closed {
        conn: u64,
        time: f64,
        packet: i64,
        how: &'static str,
        bytes: [i64; 2],
        isn: [Option<u32>; 2],
        first_fin_from: Option<usize>,
        rst_from: Option<usize>,
        saw_syn: bool,
    },
    /// Bytes the stream does not carry but that were on the wire, at [offset, offset + length) of one side:
    /// ``kind`` is ``RETRANSMISSION_CONFLICT`` (bytes sent again differ from the first copy, which is kept),
    /// ``DATA_ON_RST`` (a RST's payload, ignored) or ``DATA_AFTER_FIN`` (bytes beyond the FIN, ignored).
    Ignored {
        conn: u64,
        side: usize,
        kind: &'static str,
        offset: i64,
        length: i64,
        time: f64,
        packet: i64,
    },
    /// The out-of-order bytes held over all connections went above ``max_buffered_total`` (or the run's memory
    /// budget was over): the holes of the connection holding bytes the longest were declared lost (``cap``: which
    /// one, ``limit`` its bytes; ``dropped``: how often so far).
    BufferDropped {
        conn: u64,
        time: f64,
        packet: i64,
        cap: BufferCap,
        limit: i64,
        dropped: u64,
    },
}

/// The cap that made a connection give up its out-of-order bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferCap {
    /// ``max_buffered_total``: the reassembly's own.
    Total,
    /// The budget the run's holders of wire bytes share.
    MemoryBudget,
}

#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub segments: u64,
    pub connections: u64,
    pub connections_mid_stream: u64,
    pub delivered_bytes: u64,
    pub retransmitted_segments: u64, // carried no new byte
    pub retransmitted_bytes: i64,    // bytes seen again (full or partial retransmissions)
    pub out_of_order_segments: u64,  // arrived beyond a hole
    pub overlap_bytes: i64,          // bytes overlapping data already buffered or delivered (and comparable)
    pub inconsistent_overlaps: u64,  // overlaps whose bytes differ from the first copy (first copy kept)
    pub keepalives: u64,
    pub zero_window_probes: u64,
    pub syn_retransmissions: u64,
    pub gaps: u64,
    pub gap_bytes: i64,
    pub snaplen_gaps: u64,
    pub buffer_limit_gaps: u64,
    pub total_buffer_limit_gaps: u64,  // holes given up for max_buffered_total
    pub memory_budget_gaps: u64,       // holes given up for the run's memory budget
    pub bytes_before_start: i64,       // mid-stream: bytes just before the first byte seen, ignored
    pub bytes_after_fin: i64,          // data beyond the FIN, ignored
    pub rst_payload_bytes: u64,        // payload carried by RST segments, ignored
    pub segments_after_close: u64,     // segments of a forgotten connection (final ACKs, retransmissions)
    pub ignored_segments: u64,         // pure ACKs of unknown connections (they open nothing)
    pub max_buffered_bytes: i64,       // high-water mark of one direction's out-of-order buffer
    pub max_buffered_total_bytes: i64, // high-water mark of the out-of-order bytes of every connection
}

impl Stats {
    /// (name, value) in declaration order.
    pub fn items(&self) -> Vec<(&'static str, i64)> {
        vec![
            ("segments", self.segments as i64),
            ("connections", self.connections as i64),
            ("connections_mid_stream", self.connections_mid_stream as i64),
            ("delivered_bytes", self.delivered_bytes as i64),
            ("retransmitted_segments", self.retransmitted_segments as i64),
            ("retransmitted_bytes", self.retransmitted_bytes),
            ("out_of_order_segments", self.out_of_order_segments as i64),
            ("overlap_bytes", self.overlap_bytes),
            ("inconsistent_overlaps", self.inconsistent_overlaps as i64),
            ("keepalives", self.keepalives as i64),
            ("zero_window_probes", self.zero_window_probes as i64),
            ("syn_retransmissions", self.syn_retransmissions as i64),
            ("gaps", self.gaps as i64),
            ("gap_bytes", self.gap_bytes),
            ("snaplen_gaps", self.snaplen_gaps as i64),
            ("buffer_limit_gaps", self.buffer_limit_gaps as i64),
            ("total_buffer_limit_gaps", self.total_buffer_limit_gaps as i64),
            ("memory_budget_gaps", self.memory_budget_gaps as i64),
            ("bytes_before_start", self.bytes_before_start),
            ("bytes_after_fin", self.bytes_after_fin),
            ("rst_payload_bytes", self.rst_payload_bytes as i64),
            ("segments_after_close", self.segments_after_close as i64),
            ("ignored_segments", self.ignored_segments as i64),
            ("max_buffered_bytes", self.max_buffered_bytes),
            ("max_buffered_total_bytes", self.max_buffered_total_bytes),
        ]
    }
}

/// The caps and timers of the reassembly.
#[derive(Clone, Debug)]
pub struct Config {
    pub max_buffered: i64,
    pub max_buffered_total: i64,
    pub ooo_wait_packets: i64,
    pub hole_timeout: f64,
    pub close_wait_packets: i64,
    pub sweep_every: u64,
    pub tombstone_seconds: f64,
    pub max_tombstones: usize,
    pub max_connections: usize,
    /// The budget the out-of-order bytes are reserved from, shared with the run's other holders: over it, the
    /// connection holding bytes the longest gives up its holes as over ``max_buffered_total``.
    pub budget: MemoryBudget,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_buffered: 8 << 20,
            max_buffered_total: 64 << 20,
            ooo_wait_packets: 1000,
            hole_timeout: 10.0,
            close_wait_packets: 1000,
            sweep_every: 512,
            tombstone_seconds: 240.0,
            max_tombstones: 65536,
            max_connections: 65536,
            budget: MemoryBudget::unlimited(),
        }
    }
}

pub use crate::ordered::OrderedMap;
pub use crate::FastMap;

fn sdiff(a: u32, b: u32) -> i64 {
    a.wrapping_sub(b) as i32 as i64
}

/// A buffered out-of-order range [off, end): data bytes, or None for a known-missing range (snaplen).
struct Piece {
    off: i64,
    end: i64,
    data: Option<Rc<[u8]>>,
    ts: f64,
    arrival: i64,
    reason: Option<&'static str>,
}

struct Half {
    ep: Endpoint,
    key: Key,
    started: bool,
    isn: Option<u32>,
    next_seq: u32,
    next_off: i64,
    buf: Vec<Piece>,
    buf_bytes: i64,
    hole_seg: i64,
    hole_time: f64,
    fin_off: Option<i64>,
    finished: bool,
    last_data: Option<Rc<[u8]>>,
    last_off: i64,
    window: i32,
}

impl Half {
    fn new(ep: Endpoint, key: Key) -> Half {
        Half {
            ep,
            key,
            started: false,
            isn: None,
            next_seq: 0,
            next_off: 0,
            buf: Vec::new(),
            buf_bytes: 0,
            hole_seg: 0,
            hole_time: 0.0,
            fin_off: None,
            finished: false,
            last_data: None,
            last_off: 0,
            window: -1,
        }
    }
    fn start(&mut self, seq: u32) {
        self.started = true;
        self.next_seq = seq;
        self.next_off = 0;
    }
    fn check_fin_reached(&mut self) {
        if let Some(fin) = self.fin_off {
            if !self.finished && self.next_off >= fin && self.buf.is_empty() {
                self.finished = true;
            }
        }
    }
    fn end_seq(&self) -> u32 {
        self.next_seq.wrapping_add(if self.fin_off.is_some() { 1 } else { 0 })
    }
}

struct Conn {
    id: u64,
    saw_syn: bool,
    first_time: f64,
    first_packet: i64,
    last_time: f64,
    last_packet: i64,
    segments: i64,
    first_fin_from: Option<usize>,
    rst_from: Option<usize>,
    h: [Half; 2],
    buffering: u32,
    slow: bool,
    rst: bool,
    rst_info: Option<(usize, u32, Option<u32>)>,
    closing_pkt: i64,
    closing_time: f64,
}

/// What a connection's operations need of the reassembler.
struct Ctx<'a> {
    st: &'a mut Stats,
    out: &'a mut Vec<StreamEvent>,
    pending: &'a mut OrderedMap<u64, ()>,
    cfg: &'a Config,
    delivered: &'a mut u64,
    npackets: i64,
}

impl Conn {
    fn info(&self) -> ConnInfo {
        ConnInfo {
            id: self.id,
            a: self.h[0].ep,
            b: self.h[1].ep,
            saw_syn: self.saw_syn,
            first_time: self.first_time,
            first_packet: self.first_packet,
        }
    }

    fn zero_window_probe(&mut self, side: usize, st: &mut Stats) {
        if self.h[1 - side].window == 0 {
            st.zero_window_probes += 1;
        }
    }

    fn deliver(&mut self, side: usize, data: Rc<[u8]>, ts: f64, idx: i64, cx: &mut Ctx) {
        let h = &mut self.h[side];
        let off = h.next_off;
        let n = data.len();
        h.next_off = off + n as i64;
        h.next_seq = h.next_seq.wrapping_add(n as u32);
        h.last_data = Some(data.clone());
        h.last_off = off;
        *cx.delivered += n as u64;
        cx.out.push(StreamEvent::Data {
            conn: self.id,
            side,
            saw_syn: self.saw_syn,
            data,
            offset: off,
            time: ts,
            packet: idx,
        });
    }

    fn gap(&mut self, side: usize, length: i64, ts: f64, idx: i64, reason: &'static str, cx: &mut Ctx) {
        let h = &mut self.h[side];
        let off = h.next_off;
        h.next_off = off + length;
        h.next_seq = h.next_seq.wrapping_add(length as u32);
        h.last_data = None;
        cx.st.gaps += 1;
        cx.st.gap_bytes += length;
        if reason == "snaplen" {
            cx.st.snaplen_gaps += 1;
        }
        cx.out.push(StreamEvent::Gap {
            conn: self.id,
            side,
            saw_syn: self.saw_syn,
            offset: off,
            length,
            time: ts,
            packet: idx,
            reason,
        });
    }

    fn refresh(&mut self, cx: &mut Ctx) {
        self.slow = self.buffering > 0 || self.rst || self.h[0].fin_off.is_some() || self.h[1].fin_off.is_some();
        if self.buffering == 0 && self.closing_pkt < 0 {
            cx.pending.remove(&self.id);
        }
    }

    fn buffer_emptied(&mut self, side: usize, cx: &mut Ctx) {
        self.h[side].buf_bytes = 0;
        self.buffering = self.buffering.saturating_sub(1);
        self.refresh(cx);
    }

    /// Deliver the buffered pieces that are now in order.
    fn drain(&mut self, side: usize, ts: f64, idx: i64, cx: &mut Ctx) {
        {
            let h = &self.h[side];
            match h.buf.first() {
                None => return,
                Some(p) if p.off > h.next_off => return,
                _ => {}
            }
        }
        let pieces = std::mem::take(&mut self.h[side].buf);
        let mut rest = Vec::new();
        let mut iter = pieces.into_iter();
        for p in iter.by_ref() {
            let next_off = self.h[side].next_off;
            if p.off > next_off {
                rest.push(p);
                break;
            }
            if p.data.is_some() {
                self.h[side].buf_bytes -= p.end - p.off;
            }
            if p.end <= next_off {
                continue;
            }
            match p.data {
                None => self.gap(side, p.end - next_off, ts, idx, p.reason.unwrap_or("missing segment"), cx),
                Some(d) => {
                    let data = if p.off == next_off { d } else { Rc::from(&d[(next_off - p.off) as usize..]) };
                    self.deliver(side, data, ts, idx, cx);
                }
            }
        }
        rest.extend(iter);
        self.h[side].buf = rest;
        if self.h[side].buf.is_empty() {
            self.buffer_emptied(side, cx);
        } else {
            // the remaining hole has been visible since the earliest arrival among the pieces beyond it
            let h = &mut self.h[side];
            h.hole_seg = h.buf.iter().map(|p| p.arrival).min().unwrap_or(h.hole_seg);
            h.hole_time = h.buf.iter().map(|p| p.ts).fold(f64::INFINITY, f64::min);
        }
    }

    /// The hole before the first buffered piece is permanent: report it and deliver what follows.
    fn declare_hole(&mut self, side: usize, reason: &'static str, ts: f64, idx: i64, cx: &mut Ctx) {
        let Some(first) = self.h[side].buf.first() else { return };
        let length = first.off - self.h[side].next_off;
        if length > 0 {
            self.gap(side, length, ts, idx, reason, cx);
        }
        self.drain(side, ts, idx, cx);
    }

    /// Declare every hole of one side lost (terminates: each round delivers at least the first piece).
    fn flush_holes_while(
        &mut self,
        side: usize,
        reason: &'static str,
        ts: f64,
        idx: i64,
        cx: &mut Ctx,
        cond: &dyn Fn(&Half, i64) -> bool,
    ) {
        while !self.h[side].buf.is_empty() && cond(&self.h[side], self.segments) {
            let before = self.h[side].buf.len();
            self.declare_hole(side, reason, ts, idx, cx);
            self.h[side].check_fin_reached();
            if self.h[side].buf.len() >= before && !self.h[side].buf.is_empty() {
                // cannot happen (the first piece is always consumed); never loop on it
                let p = self.h[side].buf.remove(0);
                if p.data.is_some() {
                    self.h[side].buf_bytes -= p.end - p.off;
                }
            }
        }
    }

    /// A FIN seen beyond the delivered bytes is a hole too: mark it with an empty piece at the FIN.
    fn fin_marker(&mut self, side: usize, ts: f64, cx: &mut Ctx) {
        let h = &self.h[side];
        let Some(fin_off) = h.fin_off else { return };
        if fin_off <= h.next_off {
            return;
        }
        if let Some(last) = h.buf.last() {
            if last.end >= fin_off {
                return;
            }
        }
        if h.buf.is_empty() {
            self.buffering += 1;
            self.slow = true;
            self.h[side].hole_seg = self.segments;
            self.h[side].hole_time = ts;
            cx.pending.insert(self.id, ());
        }
        let arrival = self.segments;
        self.h[side].buf.push(Piece {
            off: fin_off,
            end: fin_off,
            data: Some(Rc::from(&[][..])),
            ts,
            arrival,
            reason: None,
        });
    }

    /// Compare retransmitted bytes with the last delivered payload, where they overlap it.
    fn compare_delivered(&self, side: usize, off: i64, data: &[u8], ts: f64, idx: i64, cx: &mut Ctx) {
        let h = &self.h[side];
        let Some(last) = &h.last_data else { return };
        let lo = off.max(h.last_off);
        let hi = (off + data.len() as i64).min(h.last_off + last.len() as i64);
        if hi <= lo {
            return;
        }
        cx.st.overlap_bytes += hi - lo;
        if data[(lo - off) as usize..(hi - off) as usize]
            != last[(lo - h.last_off) as usize..(hi - h.last_off) as usize]
        {
            cx.st.inconsistent_overlaps += 1;
            self.ignored(side, "RETRANSMISSION_CONFLICT", lo, hi - lo, ts, idx, cx);
        }
    }

    /// Bytes seen on the wire that the stream does not carry: said, not only counted.
    #[allow(clippy::too_many_arguments)]
    fn ignored(&self, side: usize, kind: &'static str, offset: i64, length: i64, ts: f64, idx: i64, cx: &mut Ctx) {
        if length > 0 {
            cx.out.push(StreamEvent::Ignored { conn: self.id, side, kind, offset, length, time: ts, packet: idx });
        }
    }

    fn buffered(&self) -> i64 {
        self.h[0].buf_bytes + self.h[1].buf_bytes
    }

    /// Insert [off, end) into the buffer, keeping only the parts not already buffered (first copy wins).
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        side: usize,
        off: i64,
        end: i64,
        data: Option<&[u8]>,
        ts: f64,
        arrival: i64,
        reason: Option<&'static str>,
        idx: i64,
        cx: &mut Ctx,
    ) {
        let id = self.id;
        let st = &mut *cx.st;
        let h = &mut self.h[side];
        let buf = &mut h.buf;
        let make = |lo: i64, hi: i64| Piece {
            off: lo,
            end: hi,
            data: data.map(|d| Rc::from(&d[(lo - off) as usize..(hi - off) as usize])),
            ts,
            arrival,
            reason,
        };
        let mut i = buf.partition_point(|p| p.off <= off);
        i = i.saturating_sub(1);
        let mut new: Vec<Piece> = Vec::new();
        let mut cur = off;
        let mut j = i;
        while j < buf.len() && cur < end {
            let p = &buf[j];
            if p.off >= end {
                break;
            }
            if p.end <= cur {
                j += 1;
                continue;
            }
            if p.off > cur {
                new.push(make(cur, p.off));
            }
            let lo = cur.max(p.off);
            let hi = end.min(p.end);
            if hi > lo {
                if let (Some(d), Some(pd)) = (data, &p.data) {
                    st.overlap_bytes += hi - lo;
                    if d[(lo - off) as usize..(hi - off) as usize] != pd[(lo - p.off) as usize..(hi - p.off) as usize] {
                        st.inconsistent_overlaps += 1;
                        cx.out.push(StreamEvent::Ignored {
                            conn: id,
                            side,
                            kind: "RETRANSMISSION_CONFLICT",
                            offset: lo,
                            length: hi - lo,
                            time: ts,
                            packet: idx,
                        });
                    }
                }
                st.retransmitted_bytes += hi - lo;
            }
            cur = cur.max(p.end);
            j += 1;
        }
        if cur < end {
            new.push(make(cur, end));
        }
        for p in new {
            let k = buf.partition_point(|q| q.off < p.off);
            if p.data.is_some() {
                h.buf_bytes += p.end - p.off;
            }
            buf.insert(k, p);
        }
    }

    fn trim_buffer_after(&mut self, side: usize, limit: i64, ts: f64, idx: i64, cx: &mut Ctx) {
        let h = &mut self.h[side];
        let (mut after, mut first) = (0, i64::MAX);
        while let Some(p) = h.buf.last_mut() {
            if p.end <= limit {
                break;
            }
            if p.data.is_some() {
                first = first.min(p.off.max(limit));
            }
            if p.off >= limit {
                if p.data.is_some() {
                    h.buf_bytes -= p.end - p.off;
                    after += p.end - p.off;
                }
                h.buf.pop();
            } else {
                let cut = p.end - limit;
                if let Some(d) = &p.data {
                    p.data = Some(Rc::from(&d[..(limit - p.off) as usize]));
                    h.buf_bytes -= cut;
                    after += cut;
                }
                p.end = limit;
            }
        }
        cx.st.bytes_after_fin += after;
        self.ignored(side, "DATA_AFTER_FIN", first, after, ts, idx, cx);
        if self.h[side].buf.is_empty() {
            self.buffer_emptied(side, cx);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn data(
        &mut self,
        side: usize,
        seq: u32,
        payload: &[u8],
        mut missing: i64,
        fin: bool,
        ts: f64,
        idx: i64,
        cx: &mut Ctx,
    ) {
        let mut payload = payload;
        let mut n = payload.len() as i64;
        let mut total = n + missing;
        let next_off = self.h[side].next_off;
        let mut off = next_off + sdiff(seq, self.h[side].next_seq);
        let mut end = off + total;

        if fin && self.h[side].fin_off.is_none() {
            self.h[side].fin_off = Some(end);
            self.slow = true;
            if self.first_fin_from.is_none() {
                self.first_fin_from = Some(side);
            }
            // anything buffered beyond the FIN can never be part of the stream
            if self.h[side].buf.last().map(|p| p.end > end).unwrap_or(false) {
                self.trim_buffer_after(side, end, ts, idx, cx);
            }
        } // a second FIN at another position: keep the first one
        if let Some(fin_off) = self.h[side].fin_off {
            if end > fin_off {
                let cut = end - off.max(fin_off);
                cx.st.bytes_after_fin += cut;
                self.ignored(side, "DATA_AFTER_FIN", off.max(fin_off), cut, ts, idx, cx);
                if off >= fin_off {
                    total = 0;
                } else {
                    let keep = fin_off - off;
                    if keep <= n {
                        payload = &payload[..keep as usize];
                        n = keep;
                        missing = 0;
                    } else {
                        missing = keep - n;
                    }
                    total = keep;
                }
                end = off + total;
            }
        }

        if total == 0 {
            if !fin && off == next_off - 1 {
                cx.st.keepalives += 1;
            }
            self.fin_marker(side, ts, cx);
            self.h[side].check_fin_reached();
            return;
        }

        if end <= next_off {
            // nothing new: retransmission, keep-alive, or bytes before a mid-stream start
            let mut keepalive = false;
            if off == next_off - 1 && total == 1 {
                if self.h[1 - side].window == 0 {
                    // a zero-window probe sent again
                    cx.st.zero_window_probes += 1;
                    cx.st.retransmitted_bytes += 1;
                } else {
                    cx.st.keepalives += 1;
                    keepalive = true;
                }
            } else if off < 0 && self.h[side].isn.is_none() {
                let before = end.min(0) - off;
                cx.st.bytes_before_start += before;
                if total > before {
                    cx.st.retransmitted_bytes += total - before;
                    cx.st.retransmitted_segments += 1;
                }
            } else {
                cx.st.retransmitted_bytes += total;
                cx.st.retransmitted_segments += 1;
            }
            // a keep-alive's one byte is garbage (RFC 1122 4.2.3.6: Windows sends 0x00), not the byte it repeats
            if n > 0 && !keepalive {
                self.compare_delivered(side, off, payload, ts, idx, cx);
            }
            self.fin_marker(side, ts, cx);
            self.h[side].check_fin_reached();
            return;
        }

        if off < next_off {
            // partial retransmission / overlap with delivered bytes: keep only the new bytes
            let k = next_off - off;
            if off < 0 && self.h[side].isn.is_none() {
                let before = next_off.min(0) - off;
                cx.st.bytes_before_start += before;
                cx.st.retransmitted_bytes += k - before;
            } else {
                cx.st.retransmitted_bytes += k;
            }
            if n > 0 {
                let upto = (k.min(n)) as usize;
                self.compare_delivered(side, off, &payload[..upto], ts, idx, cx);
            }
            if k < n {
                payload = &payload[k as usize..];
                n -= k;
            } else {
                missing -= k - n;
                payload = &[];
                n = 0;
            }
            off = next_off;
        }

        if off == next_off && self.h[side].buf.is_empty() {
            // in order, nothing buffered: deliver directly
            if n > 0 {
                self.deliver(side, Rc::from(payload), ts, idx, cx);
            }
            if missing > 0 {
                self.gap(side, missing, ts, idx, "snaplen", cx);
            }
            if n == 1 {
                self.zero_window_probe(side, cx.st);
            }
            self.fin_marker(side, ts, cx);
            self.h[side].check_fin_reached();
            return;
        }

        // out of order (or filling a hole while other pieces are buffered): buffer first-copy-wins, then drain
        if off > next_off {
            cx.st.out_of_order_segments += 1;
        }
        let was_empty = self.h[side].buf.is_empty();
        let arrival = self.segments;
        if n > 0 {
            self.insert(side, off, off + n, Some(payload), ts, arrival, None, idx, cx);
        }
        if missing > 0 {
            self.insert(side, off + n, end, None, ts, arrival, Some("snaplen"), idx, cx);
        }
        if was_empty && !self.h[side].buf.is_empty() {
            self.buffering += 1;
            self.slow = true;
            self.h[side].hole_seg = arrival;
            self.h[side].hole_time = ts;
            cx.pending.insert(self.id, ());
        }
        self.drain(side, ts, idx, cx);
        if self.h[side].buf_bytes > cx.st.max_buffered_bytes {
            cx.st.max_buffered_bytes = self.h[side].buf_bytes;
        }
        while !self.h[side].buf.is_empty() && self.h[side].buf_bytes > cx.cfg.max_buffered {
            cx.st.buffer_limit_gaps += 1;
            let before = self.h[side].buf.len();
            self.declare_hole(side, "buffer limit", ts, idx, cx);
            if self.h[side].buf.len() >= before {
                break;
            }
        }
        self.fin_marker(side, ts, cx);
        self.h[side].check_fin_reached();
    }

    fn rst_settled(&self) -> bool {
        let Some((side, rseq, rack)) = self.rst_info else { return true };
        let (half, peer) = (&self.h[side], &self.h[1 - side]);
        if !half.buf.is_empty() || !peer.buf.is_empty() {
            return false;
        }
        if half.started && sdiff(rseq, half.end_seq()) > 0 {
            return false; // the RST sender's last data has not been seen yet
        }
        if let Some(rack) = rack {
            if peer.started && sdiff(rack, peer.end_seq()) > 0 {
                return false; // the RST acknowledges peer data not seen yet
            }
        }
        true
    }

    /// Apply the per-connection hole policy; Some(how) when the connection is to be closed now.
    fn after_segment(&mut self, cx: &mut Ctx) -> Option<&'static str> {
        if self.buffering > 0 {
            let wait = cx.cfg.ooo_wait_packets;
            let (ts, idx) = (self.last_time, self.last_packet);
            for side in 0..2 {
                self.flush_holes_while(side, "missing segment", ts, idx, cx, &|h, segments| {
                    segments - h.hole_seg > wait
                });
            }
        }
        if self.rst {
            if self.rst_settled() {
                return Some("rst");
            }
            cx.pending.insert(self.id, ());
            return None;
        }
        if self.h[0].fin_off.is_some() && self.h[1].fin_off.is_some() {
            self.h[0].check_fin_reached();
            self.h[1].check_fin_reached();
            if self.h[0].finished && self.h[1].finished {
                return Some("fin");
            }
            if self.closing_pkt < 0 {
                self.closing_pkt = cx.npackets;
                self.closing_time = self.last_time;
            }
            cx.pending.insert(self.id, ());
        }
        self.refresh(cx);
        None
    }

    /// Flush both directions before the close (holes become gaps, bytes before a FIN never seen too).
    fn flush(&mut self, reason: &'static str, ts: f64, idx: i64, cx: &mut Ctx) {
        for side in 0..2 {
            self.flush_holes_while(side, reason, ts, idx, cx, &|_, _| true);
            let h = &self.h[side];
            if let Some(fin) = h.fin_off {
                if h.next_off < fin && h.started {
                    self.gap(side, fin - h.next_off, ts, idx, reason, cx);
                }
            }
        }
    }
}

/// Feed segments in capture order; get events in stream order.
pub struct Reassembler {
    pub cfg: Config,
    st: Stats,
    delivered: u64,
    halves: FastMap<Key, (u64, usize)>,
    conns: BTreeMap<u64, Box<Conn>>, // open connections by id (id order = insertion order); boxed: B-tree nodes hold
    // eleven slots, half empty when keys only grow
    pending: OrderedMap<u64, ()>, // open connections with holes or closing
    tombs: OrderedMap<Key, (Option<u32>, Option<u32>, f64)>, // (end_seq, isn, time)
    buffered_total: i64,          // out-of-order data bytes held over every connection
    reserved: Reservation,        // buffered_total, in the run's budget
    holders: OrderedMap<u64, ()>, // connections holding some, the longest holder first
    total_drops: u64,
    next_id: u64,
    npackets: i64,
    next_sweep: i64,
    now: f64,
}

impl Reassembler {
    pub fn new(mut cfg: Config) -> Reassembler {
        cfg.sweep_every = cfg.sweep_every.max(1);
        cfg.max_connections = cfg.max_connections.max(1);
        let next_sweep = cfg.sweep_every as i64;
        Reassembler {
            reserved: cfg.budget.reservation(),
            cfg,
            st: Stats::default(),
            delivered: 0,
            halves: FastMap::default(),
            conns: BTreeMap::new(),
            pending: OrderedMap::new(),
            tombs: OrderedMap::new(),
            buffered_total: 0,
            holders: OrderedMap::new(),
            total_drops: 0,
            next_id: 1,
            npackets: 0,
            next_sweep,
            now: 0.0,
        }
    }

    /// The id the next connection gets.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Number the next connection `id` (a distributed run numbers connections as the whole capture would).
    pub fn set_next_id(&mut self, id: u64) {
        self.next_id = id;
    }

    pub fn stats(&self) -> Stats {
        let mut st = self.st.clone();
        st.segments = self.npackets as u64;
        st.delivered_bytes = self.delivered;
        st
    }

    pub fn open_connections(&self) -> Vec<u64> {
        self.conns.keys().copied().collect()
    }

    /// (directions tracked, connections pending, tombstones): the sizes of the internal tables.
    pub fn table_sizes(&self) -> (usize, usize, usize) {
        (self.halves.len(), self.pending.len(), self.tombs.len())
    }

    /// Process one segment; its events are appended to ``out``, in stream order.
    pub fn feed(&mut self, seg: &Segment, out: &mut Vec<StreamEvent>) {
        self.npackets += 1;
        let key = (Endpoint { ip: seg.src, port: seg.src_port }, Endpoint { ip: seg.dst, port: seg.dst_port });
        let found = self.halves.get(&key).copied();
        if let Some((cid, side)) = found {
            if let Some(conn) = self.conns.get_mut(&cid) {
                let half = &mut conn.h[side];
                if !conn.slow
                    && half.started
                    && seg.seq == half.next_seq
                    && seg.flags & (SYN | FIN | RST) == 0
                    && seg.missing_tail == 0
                {
                    // fast path: in-order segment, nothing buffered, no FIN/RST in the connection
                    conn.segments += 1;
                    conn.last_time = seg.timestamp;
                    conn.last_packet = seg.packet_index;
                    half.window = seg.window as i32;
                    if !seg.payload.is_empty() {
                        let mut cx = Ctx {
                            st: &mut self.st,
                            out,
                            pending: &mut self.pending,
                            cfg: &self.cfg,
                            delivered: &mut self.delivered,
                            npackets: self.npackets,
                        };
                        conn.deliver(side, Rc::from(seg.payload), seg.timestamp, seg.packet_index, &mut cx);
                        if seg.payload.len() == 1 {
                            conn.zero_window_probe(side, &mut self.st);
                        }
                    }
                    if self.npackets >= self.next_sweep {
                        self.now = self.now.max(seg.timestamp);
                        self.sweep(out);
                    }
                    return;
                }
            }
        }
        self.slow_path(seg, key, found, out);
        if self.over_total() {
            self.enforce_total(out);
        }
        self.st.max_buffered_total_bytes = self.st.max_buffered_total_bytes.max(self.buffered_total);
        if self.npackets >= self.next_sweep {
            self.sweep(out);
        }
    }

    /// Apply the time-based policies now (``now`` = capture or wall time; None: the last timestamp seen).
    pub fn expire(&mut self, now: Option<f64>, out: &mut Vec<StreamEvent>) {
        if let Some(now) = now {
            if now > self.now {
                self.now = now;
            }
        }
        self.sweep(out);
    }

    /// End of capture: declare remaining holes lost, deliver buffered data, close every connection.
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        while !self.finish_some(usize::MAX, out) {}
    }

    /// ``finish`` for at most ``most`` connections, the oldest first: true once every connection is closed.
    /// (What tens of thousands of connections open at the end make is then not all held at once.)
    pub fn finish_some(&mut self, most: usize, out: &mut Vec<StreamEvent>) -> bool {
        let ids: Vec<u64> = self.conns.keys().take(most).copied().collect();
        for cid in ids {
            let Some(conn) = self.conns.get(&cid) else { continue };
            let how = if conn.rst {
                "rst"
            } else if conn.h[0].fin_off.is_some() || conn.h[1].fin_off.is_some() {
                "fin"
            } else {
                "end_of_capture"
            };
            let (ts, idx) = (conn.last_time, conn.last_packet);
            self.close(cid, how, ts, idx, "capture ended", out);
        }
        if !self.conns.is_empty() {
            return false;
        }
        self.tombs.clear();
        true
    }

    fn ctx<'a>(
        st: &'a mut Stats,
        out: &'a mut Vec<StreamEvent>,
        pending: &'a mut OrderedMap<u64, ()>,
        cfg: &'a Config,
        delivered: &'a mut u64,
        npackets: i64,
    ) -> Ctx<'a> {
        Ctx { st, out, pending, cfg, delivered, npackets }
    }

    fn slow_path(&mut self, seg: &Segment, key: Key, found: Option<(u64, usize)>, out: &mut Vec<StreamEvent>) {
        let flags = seg.flags;
        let (ts, idx) = (seg.timestamp, seg.packet_index);
        if ts > self.now {
            self.now = ts;
        }
        let syn = flags & SYN != 0;
        let is_ack = flags & ACK != 0;
        let seq = seg.seq;
        let payload = seg.payload;
        let missing = seg.missing_tail as i64;
        let mut found = found.filter(|(cid, _)| self.conns.contains_key(cid));

        if let (Some((cid, side)), true) = (found, syn) {
            // a SYN on a known 4-tuple: retransmission of the same SYN, or a new connection (port reuse)
            if let Some(conn) = self.conns.get(&cid) {
                let half = &conn.h[side];
                let ended = conn.rst || conn.h[0].fin_off.is_some() || conn.h[1].fin_off.is_some();
                if half.isn == Some(seq) && !ended {
                    // retransmitted SYN / SYN-ACK, handled below
                } else if is_ack {
                    if half.started {
                        // SYN-ACK with another ISN: answer to a SYN we did not capture
                        self.close(cid, "reused", ts, idx, "connection closed", out);
                        found = None;
                    }
                } else if ended || half.started || conn.h[0].started || conn.h[1].started {
                    self.close(cid, "reused", ts, idx, "connection closed", out);
                    found = None;
                }
            }
        }

        let (cid, side) = match found {
            Some(f) => f,
            None => {
                if let Some(&(end_seq, old_isn, _)) = self.tombs.get(&key) {
                    let st = &mut self.st;
                    if syn && !is_ack {
                        // a new connection on a recently closed 4-tuple
                    } else if syn && (old_isn.is_none() || Some(seq) != old_isn) {
                        // SYN-ACK of a new connection whose SYN was not captured
                    } else if payload.is_empty() && missing == 0 {
                        st.segments_after_close += 1;
                        return;
                    } else if end_seq
                        .map(|e| sdiff(seq.wrapping_add(payload.len() as u32).wrapping_add(missing as u32), e) <= 0)
                        .unwrap_or(false)
                    {
                        st.segments_after_close += 1;
                        st.retransmitted_bytes += payload.len() as i64 + missing;
                        return;
                    } else if flags & RST != 0 {
                        st.segments_after_close += 1;
                        return;
                    }
                    self.tombs.remove(&key);
                } else if !syn && payload.is_empty() && missing == 0 && flags & FIN == 0 {
                    // a pure ACK / RST of a connection we know nothing about: a lone ACK opens nothing
                    self.st.ignored_segments += 1;
                    return;
                }
                self.open(seg, key, out)
            }
        };

        let npackets = self.npackets;
        let Some(conn) = self.conns.get_mut(&cid) else { return };
        let held = conn.buffered();
        let mut cx = Self::ctx(&mut self.st, out, &mut self.pending, &self.cfg, &mut self.delivered, npackets);
        conn.segments += 1;
        conn.last_time = ts;
        conn.last_packet = idx;
        conn.h[side].window = seg.window as i32;
        let peer = 1 - side;

        let close = 'segment: {
            if flags & RST != 0 {
                cx.st.rst_payload_bytes += payload.len() as u64;
                if !payload.is_empty() {
                    let h = &conn.h[side];
                    let at = if h.started { h.next_off + sdiff(seq, h.next_seq) } else { 0 };
                    conn.ignored(side, "DATA_ON_RST", at, payload.len() as i64, ts, idx, &mut cx);
                }
                if !conn.rst {
                    conn.rst = true;
                    conn.rst_info = Some((side, seq, if is_ack { Some(seg.ack) } else { None }));
                    if conn.rst_from.is_none() {
                        conn.rst_from = Some(side);
                    }
                    conn.slow = true;
                    if conn.closing_pkt < 0 {
                        conn.closing_pkt = npackets;
                        conn.closing_time = ts;
                    }
                }
                break 'segment conn.after_segment(&mut cx);
            }
            let mut data_seq = seq;
            if syn {
                if !conn.h[side].started {
                    conn.h[side].start(seq.wrapping_add(1));
                    conn.h[side].isn = Some(seq);
                    conn.saw_syn = true;
                } else if conn.h[side].isn == Some(seq) {
                    cx.st.syn_retransmissions += 1;
                }
                data_seq = seq.wrapping_add(1);
                if is_ack && !conn.h[peer].started {
                    // SYN-ACK whose SYN was not captured: the ACK tells where the client's stream starts
                    conn.h[peer].start(seg.ack);
                    conn.h[peer].isn = Some(seg.ack.wrapping_sub(1));
                }
            } else if !conn.h[side].started {
                if !payload.is_empty() || missing > 0 || flags & FIN != 0 {
                    conn.h[side].start(seq);
                } else {
                    break 'segment conn.after_segment(&mut cx);
                }
            }
            if !payload.is_empty() || missing > 0 || flags & FIN != 0 {
                conn.data(side, data_seq, payload, missing, flags & FIN != 0, ts, idx, &mut cx);
            } else if !syn && sdiff(seq, conn.h[side].next_seq) == -1 && conn.h[side].fin_off.is_none() {
                cx.st.keepalives += 1; // seq = next - 1, no data
            }
            conn.after_segment(&mut cx)
        };
        let (now_held, ts, idx) = (conn.buffered(), conn.last_time, conn.last_packet);
        self.account(cid, held, now_held);
        if let Some(how) = close {
            self.close(cid, how, ts, idx, "connection closed", out);
        }
    }

    /// A connection's out-of-order bytes went from ``before`` to ``after``.
    fn account(&mut self, cid: u64, before: i64, after: i64) {
        self.buffered_total += after - before;
        self.reserved.set(self.buffered_total.max(0) as u64);
        if after > 0 {
            self.holders.insert(cid, ()); // keeps its place when already there
        } else if before > 0 || self.holders.contains_key(&cid) {
            self.holders.remove(&cid);
        }
    }

    /// Over ``max_buffered_total``: the connections holding bytes the longest give up their holes (their
    /// buffered bytes are delivered after a gap), until the total is under the cap again. O(1) a connection.
    fn enforce_total(&mut self, out: &mut Vec<StreamEvent>) {
        let npackets = self.npackets;
        while self.over_total() {
            let Some((cid, ())) = self.holders.pop_oldest() else { break };
            let Some(conn) = self.conns.get_mut(&cid) else { continue };
            let held = conn.buffered();
            let (ts, idx) = (conn.last_time, conn.last_packet);
            // the reassembly's own cap first: the budget is named only when it alone was passed
            let (cap, limit, reason) = if self.buffered_total > self.cfg.max_buffered_total {
                (BufferCap::Total, self.cfg.max_buffered_total, "total buffer limit")
            } else {
                (BufferCap::MemoryBudget, i64::try_from(self.cfg.budget.limit()).unwrap_or(i64::MAX), "memory budget")
            };
            self.total_drops += 1;
            match cap {
                BufferCap::Total => self.st.total_buffer_limit_gaps += 1,
                BufferCap::MemoryBudget => self.st.memory_budget_gaps += 1,
            }
            out.push(StreamEvent::BufferDropped {
                conn: cid,
                time: ts,
                packet: idx,
                cap,
                limit,
                dropped: self.total_drops,
            });
            let close = {
                let mut cx = Self::ctx(&mut self.st, out, &mut self.pending, &self.cfg, &mut self.delivered, npackets);
                for side in 0..2 {
                    conn.flush_holes_while(side, reason, ts, idx, &mut cx, &|_, _| true);
                }
                conn.after_segment(&mut cx)
            };
            let now_held = conn.buffered();
            self.account(cid, held, now_held);
            if let Some(how) = close {
                self.close(cid, how, ts, idx, "connection closed", out);
            }
        }
    }

    /// Over ``max_buffered_total``, or holding some while the run's memory budget is over.
    fn over_total(&self) -> bool {
        self.buffered_total > self.cfg.max_buffered_total || (self.buffered_total > 0 && self.reserved.is_over())
    }

    fn open(&mut self, seg: &Segment, key: Key, out: &mut Vec<StreamEvent>) -> (u64, usize) {
        let (src, dst) = key;
        let syn = seg.flags & SYN != 0;
        let rkey = (dst, src);
        self.tombs.remove(&rkey);
        let (a, b, ka, kb) = if syn && seg.flags & ACK != 0 {
            (dst, src, rkey, key) // SYN-ACK: the receiver is the client
        } else {
            (src, dst, key, rkey)
        };
        if self.conns.len() >= self.cfg.max_connections {
            if let Some(&oldest) = self.conns.keys().next() {
                self.close(oldest, "evicted", seg.timestamp, seg.packet_index, "connection limit", out);
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let conn = Conn {
            id,
            saw_syn: syn,
            first_time: seg.timestamp,
            first_packet: seg.packet_index,
            last_time: seg.timestamp,
            last_packet: seg.packet_index,
            segments: 0,
            first_fin_from: None,
            rst_from: None,
            h: [Half::new(a, ka), Half::new(b, kb)],
            buffering: 0,
            slow: false,
            rst: false,
            rst_info: None,
            closing_pkt: -1,
            closing_time: 0.0,
        };
        self.halves.insert(ka, (id, 0));
        self.halves.insert(kb, (id, 1));
        self.st.connections += 1;
        if !syn {
            self.st.connections_mid_stream += 1;
        }
        out.push(StreamEvent::Opened {
            conn: conn.info(),
            time: seg.timestamp,
            packet: seg.packet_index,
            mid_stream: !syn,
        });
        self.conns.insert(id, Box::new(conn));
        (id, if ka == key { 0 } else { 1 })
    }

    /// Flush both directions (holes become gaps), emit Closed and forget the connection.
    fn close(
        &mut self,
        cid: u64,
        how: &'static str,
        ts: f64,
        idx: i64,
        reason: &'static str,
        out: &mut Vec<StreamEvent>,
    ) {
        let npackets = self.npackets;
        let Some(mut conn) = self.conns.remove(&cid) else { return };
        self.buffered_total -= conn.buffered();
        self.reserved.set(self.buffered_total.max(0) as u64);
        self.holders.remove(&cid);
        {
            let mut cx = Self::ctx(&mut self.st, out, &mut self.pending, &self.cfg, &mut self.delivered, npackets);
            conn.flush(reason, ts, idx, &mut cx);
        }
        self.pending.remove(&cid);
        let now = self.now.max(ts);
        for (side, h) in conn.h.iter().enumerate() {
            if self.halves.get(&h.key) == Some(&(cid, side)) {
                self.halves.remove(&h.key);
            }
            let end_seq = if h.started { Some(h.end_seq()) } else { None };
            self.tombs.insert(h.key, (end_seq, h.isn, now));
        }
        if self.tombs.len() > self.cfg.max_tombstones {
            self.prune_tombs(true);
        }
        out.push(StreamEvent::Closed {
            conn: cid,
            time: ts,
            packet: idx,
            how,
            bytes: [conn.h[0].next_off, conn.h[1].next_off],
            isn: [conn.h[0].isn, conn.h[1].isn],
            first_fin_from: conn.first_fin_from,
            rst_from: conn.rst_from,
            saw_syn: conn.saw_syn,
        });
    }

    fn prune_tombs(&mut self, force: bool) {
        let limit = self.now - self.cfg.tombstone_seconds;
        let over = |tombs: usize| force && tombs > self.cfg.max_tombstones;
        while let Some((k, v)) = self.tombs.oldest() {
            let (k, expired) = (*k, v.2 < limit);
            if expired || over(self.tombs.len()) {
                self.tombs.remove(&k);
            } else {
                break;
            }
        }
    }

    /// Time / global-packet based policies for connections with holes or pending closes.
    fn sweep(&mut self, out: &mut Vec<StreamEvent>) {
        self.next_sweep = self.npackets + self.cfg.sweep_every as i64;
        let now = self.now;
        if !self.tombs.is_empty() {
            self.prune_tombs(false);
        }
        if self.pending.is_empty() {
            return;
        }
        let npackets = self.npackets;
        for cid in self.pending.keys().copied().collect::<Vec<_>>() {
            let Some(conn) = self.conns.get_mut(&cid) else {
                self.pending.remove(&cid);
                continue;
            };
            let (ts, idx) = (conn.last_time, conn.last_packet);
            let timeout = self.cfg.hole_timeout;
            let held = conn.buffered();
            let close = {
                let mut cx = Self::ctx(&mut self.st, out, &mut self.pending, &self.cfg, &mut self.delivered, npackets);
                for side in 0..2 {
                    conn.flush_holes_while(side, "missing segment", ts, idx, &mut cx, &|h, _| {
                        now - h.hole_time > timeout
                    });
                }
                if conn.closing_pkt >= 0
                    && (npackets - conn.closing_pkt > cx.cfg.close_wait_packets || now - conn.closing_time > timeout)
                {
                    Some(if conn.rst { "rst" } else { "fin" })
                } else {
                    conn.after_segment(&mut cx)
                }
            };
            let (now_held, ts, idx) = (conn.buffered(), conn.last_time, conn.last_packet);
            self.account(cid, held, now_held);
            if let Some(how) = close {
                self.close(cid, how, ts, idx, "connection closed", out);
            }
        }
    }
}
