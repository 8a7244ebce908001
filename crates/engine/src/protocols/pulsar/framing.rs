//! Pulsar framing: where a frame ends, where the next one may start after lost bytes, and the head of a
//! frame above the size limit — the ``Framing`` the generic splitter asks.
//!
//! Wire layout (big-endian): ``[TOTAL_SIZE u32][CMD_SIZE u32][BaseCommand][payload section]`` where
//! TOTAL_SIZE counts everything after itself.

use crate::name;
use crate::pb;
use crate::schema::{self, EnumType, Schema};
use crate::transport::splitter::{BadLength, Framing, Head, PduLength};
use crate::value::entry;

/// bytes after the command that the head of an oversized frame may hold (its metadata)
const HEAD_LIMIT: usize = 64 * 1024;
/// bytes of a candidate's sub-command checked for plausibility while the rest of it is still to come
const PREFIX_WINDOW: usize = 64 * 1024;
const MAGIC_CRC32C: u16 = 0x0E01;
const MAGIC_BEM: u16 = 0x0E02;

pub struct PulsarFraming {
    schema: &'static Schema,
    base_command: usize,
    command_types: &'static EnumType,
    send: u8,
    message: u8,
}

fn u32_at(buf: &[u8], pos: usize) -> u32 {
    match buf.get(pos..pos + 4) {
        Some(b) => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    }
}

enum Varint {
    Value(u128, usize),
    Truncated,
    Bad,
}

/// A varint read up to ``limit`` (Python's unbounded ints: up to 70 bits kept).
fn read_varint(buf: &[u8], mut pos: usize, limit: usize) -> Varint {
    let (mut result, mut shift) = (0u128, 0u32);
    while pos < limit.min(buf.len()) {
        let b = buf[pos];
        pos += 1;
        result |= ((b & 0x7F) as u128) << shift;
        if b & 0x80 == 0 {
            return Varint::Value(result, pos);
        }
        shift += 7;
        if shift >= 70 {
            return Varint::Bad;
        }
    }
    Varint::Truncated
}

/// Pulsar's framing on the embedded schema, for Rust callers outside the crate (the fuzz target, fuzz/),
/// which cannot name the schema.
impl Default for PulsarFraming {
    fn default() -> PulsarFraming {
        PulsarFraming::new(crate::protocols::pulsar::schema())
    }
}

impl PulsarFraming {
    pub fn new(schema: &'static Schema) -> PulsarFraming {
        let command_types = schema.enum_type("pulsar.proto.BaseCommand.Type");
        let number = |name: &str| command_types.number(name).and_then(|n| u8::try_from(n).ok()).unwrap_or(0);
        let (send, message) = (number("SEND"), number("MESSAGE"));
        PulsarFraming { schema, base_command: schema.message("pulsar.proto.BaseCommand"), command_types, send, message }
    }

    fn payload_type(&self, type_num: u8) -> bool {
        type_num == self.send || type_num == self.message
    }

    fn known_type(&self, type_num: u8) -> bool {
        self.command_types.contains(type_num as i32)
    }

    fn sub_type(&self, type_num: u32) -> Option<usize> {
        let base = &self.schema.messages[self.base_command];
        match base.fields.get(base.field(type_num)?)?.kind {
            schema::Kind::Message(m) => Some(m),
            _ => None,
        }
    }

    /// Whether ``data`` parses whole, with every required field set: the BaseCommand carrying the sub-command
    /// of type ``type_num`` (``base``), or that sub-command alone.
    pub fn command_complete(&self, type_num: u32, data: &[u8], base: bool) -> bool {
        let schema = self.schema;
        if base {
            return match pb::parse(schema, self.base_command, data) {
                Ok(parsed) => match parsed.message(schema, type_num) {
                    Some(sub) => sub.init_errors(schema).is_empty(),
                    None => false,
                },
                Err(_) => false,
            };
        }
        match self.sub_type(type_num).map(|m| pb::parse(schema, m, data)) {
            Some(Ok(parsed)) => parsed.init_errors(schema).is_empty(),
            _ => false,
        }
    }

    /// Whether the complete fields of ``data`` (the first bytes of the sub-command of type ``type_num``) fit
    /// its schema: known field numbers, each with its wire type; a field cut at the end is fine.
    pub fn prefix_plausible(&self, type_num: u32, data: &[u8]) -> bool {
        match self.sub_type(type_num) {
            Some(msg) => pb::plausible_prefix(self.schema, msg, data),
            None => false,
        }
    }

    fn disagree(total: u32, cmd_size: u32, reason: String) -> PduLength {
        PduLength::Bad(BadLength {
            kind: "BAD_SIZE".into(),
            details: vec![entry(name!("total_size"), total), entry(name!("cmd_size"), cmd_size)],
            params: vec![
                entry(name!("field"), name!("TOTAL_SIZE")),
                entry(name!("size"), total),
                entry(name!("reason"), reason),
            ],
        })
    }

    /// Whether a frame starts at ``start``: Some(true/false), or None when more bytes (up to ``end``) are needed.
    pub fn looks_like_frame(&self, buf: &[u8], start: usize, total: u32, cmd_size: u32, end: usize) -> Option<bool> {
        self.candidate(buf, start, total, cmd_size, end).ok()
    }

    /// ``looks_like_frame``, with Err(until) when undecided: the end of ``buf`` that can decide it (or, while
    /// the sub-command's bytes come in, where its prefix is worth checking again: twice as many bytes of it).
    fn candidate(&self, buf: &[u8], start: usize, total: u32, cmd_size: u32, end: usize) -> Result<bool, usize> {
        let end = end.min(buf.len());
        if end < start + 10 {
            return Err(start + 10);
        }
        let type_num = buf[start + 9];
        if type_num & 0x80 != 0 || !self.known_type(type_num) {
            return Ok(false);
        }
        let payload = self.payload_type(type_num);
        // CMD_SIZE must fit in TOTAL_SIZE: what follows subtracts the one from the other
        if cmd_size as u64 + 4 > total as u64 || (!payload && total as u64 != cmd_size as u64 + 4) {
            return Ok(false);
        }
        // Encoders write BaseCommand as [type][sub-command N]: check that shape on the bytes at hand first, so
        // that a chance 0x08 in the middle of a payload with a large CMD_SIZE is rejected now instead of making
        // the splitter wait for up to CMD_SIZE bytes.
        let cmd_end = start + 8 + cmd_size as usize;
        let limit = end.min(cmd_end);
        let key = match read_varint(buf, start + 10, limit) {
            Varint::Truncated => return if end < cmd_end { Err(end + 1) } else { Ok(false) },
            Varint::Bad => return Ok(false),
            Varint::Value(v, p) => (v, p),
        };
        let (length, sub_start) = match read_varint(buf, key.1, limit) {
            Varint::Truncated => return if end < cmd_end { Err(end + 1) } else { Ok(false) },
            Varint::Bad => return Ok(false),
            Varint::Value(v, p) => (v, p),
        };
        if key.0 != ((type_num as u128) << 3 | 2) {
            return Ok(false);
        }
        let sub_end = sub_start as u128 + length;
        if sub_end > cmd_end as u128 {
            return Ok(false);
        }
        let sub_end = sub_end as usize;
        if sub_end <= end {
            if !self.command_complete(type_num as u32, &buf[sub_start..sub_end], false) {
                return Ok(false);
            }
        } else {
            // the prefix at hand, up to PREFIX_WINDOW bytes of it: beyond, only the whole sub-command decides
            let seen = end - sub_start;
            if !self.prefix_plausible(type_num as u32, &buf[sub_start..sub_start + seen.min(PREFIX_WINDOW)]) {
                return Ok(false);
            }
            let next = if seen >= PREFIX_WINDOW { sub_end } else { sub_end.min(end + seen.max(64)) };
            return Err(next);
        }
        let need = start + 8 + cmd_size as usize + if payload { 6 } else { 0 };
        if need > end {
            return Err(need);
        }
        if !self.command_complete(type_num as u32, &buf[start + 8..cmd_end], true) {
            return Ok(false);
        }
        if payload {
            let p = cmd_end;
            let magic = u16::from_be_bytes([buf[p], buf[p + 1]]);
            if magic != MAGIC_CRC32C && magic != MAGIC_BEM {
                let msize = u32_at(buf, p) as u64;
                if msize + 4 > total as u64 - 4 - cmd_size as u64 {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Bytes of the head from the start of ``buf`` (the command was checked), or None for NEED_MORE.
    fn head_length(&self, buf: &[u8], total: usize, cmd_size: usize) -> Option<usize> {
        let end = buf.len();
        let cmd_end = 8 + cmd_size;
        let frame_end = 4 + total;
        let mut p = cmd_end;
        for (magic, fixed) in [(MAGIC_BEM, None), (MAGIC_CRC32C, Some(4usize))] {
            if frame_end < p + 2 || p > cmd_end + HEAD_LIMIT {
                return Some(cmd_end);
            }
            if p + 2 > end {
                return None;
            }
            if u16::from_be_bytes([buf[p], buf[p + 1]]) != magic {
                continue;
            }
            match fixed {
                None => {
                    // broker entry metadata: [magic][size][metadata]
                    if p + 6 > end {
                        return None;
                    }
                    p += 6 + u32_at(buf, p + 2) as usize;
                }
                Some(n) => p += 2 + n,
            }
        }
        if p + 4 > cmd_end + HEAD_LIMIT || p + 4 > frame_end {
            return Some(cmd_end);
        }
        if p + 4 > end {
            return None;
        }
        let md_end = p + 4 + u32_at(buf, p) as usize;
        if md_end > cmd_end + HEAD_LIMIT || md_end > frame_end {
            return Some(cmd_end);
        }
        if md_end > end {
            return None;
        }
        Some(md_end)
    }
}

impl Framing for PulsarFraming {
    /// TOTAL_SIZE + 4; sizes that disagree are bad.
    fn pdu_length(&self, buf: &[u8], max_size: usize) -> PduLength {
        if buf.len() < 4 {
            return PduLength::NeedMore;
        }
        let total = u32_at(buf, 0);
        let size_fields = || {
            (
                vec![entry(name!("total_size"), total)],
                vec![entry(name!("field"), name!("TOTAL_SIZE")), entry(name!("size"), total)],
            )
        };
        if total as usize > max_size {
            let (details, params) = size_fields();
            return PduLength::Bad(BadLength { kind: "OVERSIZED".into(), details, params });
        }
        if total < 4 {
            let (details, params) = size_fields();
            return PduLength::Bad(BadLength { kind: "BAD_SIZE".into(), details, params });
        }
        if buf.len() >= 8 {
            // When the two sizes disagree one of them is damaged, and trusting TOTAL_SIZE could swallow the
            // frames after it: better to skip to the next plausible frame. Only SEND and MESSAGE carry bytes
            // after the command, so for any other type (also one this schema does not know) the sizes must
            // agree exactly.
            let cmd_size = u32_at(buf, 4);
            if cmd_size as u64 + 4 > total as u64 {
                return Self::disagree(total, cmd_size, format!("is smaller than CMD_SIZE {cmd_size} allows"));
            }
            if buf.len() >= 10 && buf[8] == 0x08 {
                let type_num = buf[9];
                if !self.payload_type(type_num) && total != cmd_size + 4 {
                    let name = self
                        .command_types
                        .name(type_num as i32)
                        .map_or_else(|| format!("type {type_num}"), |n| n.as_str().to_owned());
                    return Self::disagree(
                        total,
                        cmd_size,
                        format!("disagrees with CMD_SIZE {cmd_size} of a {name} command, which carries no payload"),
                    );
                }
            }
        }
        PduLength::Complete(total as usize + 4)
    }

    /// Scan for the BaseCommand's first tag (0x08) after two plausible size fields, and validate.
    fn resync(&self, buf: &[u8], max_size: usize) -> (bool, usize) {
        let (found, offset, _) = self.resync_until(buf, max_size);
        (found, offset)
    }

    fn resync_until(&self, buf: &[u8], max_size: usize) -> (bool, usize, usize) {
        let end = buf.len();
        let mut i = 0usize;
        loop {
            // BaseCommand starts with tag 0x08 (field 1, varint) right after the two size fields.
            let from = i + 8;
            let j = if from < end { buf[from..].iter().position(|&b| b == 0x08).map(|k| from + k) } else { None };
            let Some(j) = j else { return (false, end.saturating_sub(8), 0) };
            i = j - 8;
            let (total, cmd) = (u32_at(buf, i), u32_at(buf, i + 4));
            if 2 <= cmd && cmd as u64 + 4 <= total as u64 && total as usize <= max_size {
                match self.candidate(buf, i, total, cmd, end) {
                    Err(until) => return (false, i, until - i),
                    Ok(true) => return (true, i, 0),
                    Ok(false) => {}
                }
            }
            i += 1;
        }
    }

    fn reads_oversized_heads(&self) -> bool {
        true
    }

    /// (head, frame length) of a SEND or MESSAGE frame whose TOTAL_SIZE is above the frame-size limit. The
    /// head is the size fields, the command and the payload section up to the end of its MessageMetadata (or
    /// the command alone when that lies beyond HEAD_LIMIT). NeedMore until those bytes are there; Skip when
    /// the bytes do not look like such a frame (then the size is not to be trusted, and the splitter resyncs).
    /// With its command an oversized frame is still decoded as what it is (a SEND keeps its place among the
    /// SENDs waiting under its sequence id; a chunk keeps its place in its message) while the rest of it is
    /// skipped, never allocated.
    fn oversized_head(&self, buf: &[u8]) -> Head {
        if buf.len() < 10 {
            return Head::NeedMore;
        }
        let (total, cmd_size) = (u32_at(buf, 0) as usize, u32_at(buf, 4) as usize);
        if buf[8] != 0x08 || !self.payload_type(buf[9]) || !(2..=HEAD_LIMIT).contains(&cmd_size) || cmd_size + 4 > total
        {
            return Head::Skip;
        }
        let cmd_end = 8 + cmd_size;
        if buf.len() < cmd_end {
            return Head::NeedMore;
        }
        if !self.command_complete(buf[9] as u32, &buf[8..cmd_end], true) {
            return Head::Skip;
        }
        match self.head_length(buf, total, cmd_size) {
            None => Head::NeedMore,
            Some(head) => Head::Found { head, length: total + 4 },
        }
    }

    /// TOTAL_SIZE and CMD_SIZE: a damaged frame shorter than that shows nothing.
    fn min_pdu(&self) -> usize {
        8
    }

    fn foreign_kind(&self) -> &str {
        "NOT_PULSAR"
    }

    fn tls_name(&self) -> &str {
        "TLS handshake (is this a pulsar+ssl:// connection on a plaintext port?)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SEND whose CommandSend is `n` bytes of small fields (a plausible prefix) and whose frame is never whole.
    fn waiting_candidate(n: usize) -> (Vec<u8>, usize) {
        let sub_len = n + 1000;
        let mut cmd = vec![0x08, 0x06, 0x32];
        let mut v = sub_len;
        while v >= 0x80 {
            cmd.push((v as u8 & 0x7F) | 0x80);
            v >>= 7;
        }
        cmd.push(v as u8);
        let sub_start = 8 + cmd.len();
        cmd.extend(std::iter::repeat_n([0x08u8, 0x01], n / 2).flatten());
        let cmd_size = (cmd.len() + 1000) as u32;
        let mut buf = Vec::new();
        buf.extend_from_slice(&(cmd_size + 4).to_be_bytes());
        buf.extend_from_slice(&cmd_size.to_be_bytes());
        buf.extend_from_slice(&cmd);
        (buf, sub_start + sub_len)
    }

    #[test]
    fn a_waiting_candidate_says_how_many_bytes_can_decide_it() {
        let framing = PulsarFraming::new(crate::protocols::pulsar::schema());
        let max = 5 << 20;
        // a short prefix: asked again once it doubled, never beyond the sub-command's end
        let (buf, sub_end) = waiting_candidate(1000);
        let (found, at, wait) = framing.resync_until(&buf, max);
        assert!(!found && at == 0 && wait > buf.len() && wait <= sub_end, "{wait} {} {sub_end}", buf.len());
        // beyond PREFIX_WINDOW: only the whole sub-command decides
        let (buf, sub_end) = waiting_candidate(2 * PREFIX_WINDOW);
        assert_eq!(framing.resync_until(&buf, max), (false, 0, sub_end));
        // a whole frame is found at once
        let ping = [0, 0, 0, 9, 0, 0, 0, 5, 0x08, 0x12, 0x92, 0x01, 0x00];
        assert_eq!(framing.resync_until(&ping, max), (true, 0, 0));
    }
}
