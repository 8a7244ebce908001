//! TubeMQ framing: where a frame ends and where the next one may start after lost bytes — the ``Framing``
//! the generic splitter asks.
//!
//! Wire layout (all big-endian, no total length):
//! ``[begin token 0xFF7FF4FE][serial u32][list size u32]`` then list-size blocks of ``[length u32][data]``.
//! A frame's length is only known once every block header has arrived: the walk stops at the size limit,
//! so a lying block length is refused, never buffered.

use crate::name;
use crate::transport::splitter::{BadLength, Framing, PduLength};
use crate::value::{entry, Name};

pub const BEGIN_TOKEN: u32 = 0xFF7F_F4FE;
pub const HEADER_SIZE: usize = 12;
/// The servers refuse more blocks than (20 MiB + 8 MiB) / 8 KiB (RpcConstants); more is not TubeMQ.
pub const MAX_LIST_SIZE: u32 = 3584;
/// The reference implementations write blocks of at most 8 KiB (their output buffers' size).
pub const MAX_BLOCK_SIZE: usize = 8192;

pub(crate) fn u32_at(buf: &[u8], pos: usize) -> Option<u32> {
    buf.get(pos..pos.checked_add(4)?).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

pub struct TubeMqFraming;

fn bad(kind: &str, field: &'static Name, size: u64, reason: String) -> PduLength {
    PduLength::Bad(BadLength {
        kind: kind.into(),
        details: vec![entry(name!("field"), field), entry(name!("size"), size)],
        params: vec![entry(name!("field"), field), entry(name!("size"), size), entry(name!("reason"), reason)],
    })
}

/// Whether `buf` starts with the begin token, as far as it goes.
fn token_prefix(buf: &[u8]) -> bool {
    let token = BEGIN_TOKEN.to_be_bytes();
    buf.iter().zip(token.iter()).all(|(a, b)| a == b)
}

impl Framing for TubeMqFraming {
    fn pdu_length(&self, buf: &[u8], max_size: usize) -> PduLength {
        if !token_prefix(buf) {
            let seen = u32_at(buf, 0).map_or(0, u64::from);
            return bad(
                "BAD_SIZE",
                name!("begin token"),
                seen,
                format!("is not TubeMQ's begin token 0x{BEGIN_TOKEN:08X}"),
            );
        }
        let Some(list_size) = u32_at(buf, 8) else { return PduLength::NeedMore };
        if list_size > MAX_LIST_SIZE {
            return bad(
                "BAD_SIZE",
                name!("list size"),
                list_size as u64,
                format!("is above the {MAX_LIST_SIZE} blocks servers accept"),
            );
        }
        let mut pos = HEADER_SIZE;
        for _ in 0..list_size {
            let Some(length) = u32_at(buf, pos) else { return PduLength::NeedMore };
            let end = pos as u64 + 4 + length as u64;
            if end > max_size as u64 {
                // the frame is at least this long once this block is in it
                return bad("OVERSIZED", name!("frame length"), end, format!("is above the limit ({max_size} max)"));
            }
            pos = end as usize;
            if pos > buf.len() {
                return PduLength::NeedMore;
            }
        }
        PduLength::Complete(pos)
    }

    /// The next begin token whose list size and first block are plausible: its first block must start with
    /// the length of an RpcConnHeader, a short message whose first field is the flag (tag 0x08).
    fn resync(&self, buf: &[u8], max_size: usize) -> (bool, usize) {
        let token = BEGIN_TOKEN.to_be_bytes();
        let mut from = 0;
        while let Some(k) = buf[from..].windows(4).position(|w| w == token) {
            let at = from + k;
            match plausible_start(&buf[at..], max_size) {
                None => return (false, at),
                Some(true) => return (true, at),
                Some(false) => from = at + 1,
            }
        }
        // a token may be cut at the end: keep its first bytes
        let keep = (1..4).rev().find(|&n| buf.len() >= n && buf[buf.len() - n..] == token[..n]).unwrap_or(0);
        (false, buf.len() - keep)
    }

    fn min_pdu(&self) -> usize {
        HEADER_SIZE
    }

    fn foreign_kind(&self) -> &str {
        "NOT_TUBEMQ"
    }
}

/// Whether a frame plausibly starts here (None: not enough bytes yet to tell).
fn plausible_start(buf: &[u8], max_size: usize) -> Option<bool> {
    let list_size = u32_at(buf, 8)?;
    if list_size == 0 || list_size > MAX_LIST_SIZE {
        return Some(false);
    }
    let length = u32_at(buf, HEADER_SIZE)? as usize;
    if length == 0 || length > max_size {
        return Some(false);
    }
    // the first block's first bytes: RpcConnHeader's length (a few bytes) and its first tag
    let first = *buf.get(HEADER_SIZE + 4)?;
    if first == 0 || first >= 0x80 {
        return Some(false);
    }
    if length == 1 {
        return Some(true); // the header is split after its length byte: nothing more to look at here
    }
    Some(*buf.get(HEADER_SIZE + 5)? == 0x08)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(serial: u32, blocks: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&BEGIN_TOKEN.to_be_bytes());
        out.extend_from_slice(&serial.to_be_bytes());
        out.extend_from_slice(&(blocks.len() as u32).to_be_bytes());
        for b in blocks {
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    #[test]
    fn walks_the_blocks() {
        let f = frame(7, &[&[2, 8, 0], &[1, 2, 3, 4]]);
        for cut in 0..f.len() {
            assert!(matches!(TubeMqFraming.pdu_length(&f[..cut], 1 << 20), PduLength::NeedMore), "{cut}");
        }
        assert!(matches!(TubeMqFraming.pdu_length(&f, 1 << 20), PduLength::Complete(n) if n == f.len()));
    }

    #[test]
    fn a_lying_block_length_is_refused_not_awaited() {
        let mut f = frame(1, &[&[2, 8, 0]]);
        f[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(TubeMqFraming.pdu_length(&f, 1 << 20), PduLength::Bad(b) if b.kind == "OVERSIZED"));
        let mut f = frame(1, &[&[2, 8, 0]]);
        f[8..12].copy_from_slice(&100_000u32.to_be_bytes());
        assert!(matches!(TubeMqFraming.pdu_length(&f, 1 << 20), PduLength::Bad(b) if b.kind == "BAD_SIZE"));
        assert!(
            matches!(TubeMqFraming.pdu_length(b"GET / HTTP/1.1", 1 << 20), PduLength::Bad(b) if b.kind == "BAD_SIZE")
        );
    }

    #[test]
    fn resync_finds_the_next_token() {
        let f = frame(3, &[&[2, 8, 1, 5]]);
        let mut buf = vec![0xFF, 0x7F, 0xF4, 0xFE, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 9, 9];
        let at = buf.len();
        buf.extend_from_slice(&f);
        assert_eq!(TubeMqFraming.resync(&buf, 1 << 20), (true, at));
        // a token cut at the end waits for more bytes
        assert_eq!(TubeMqFraming.resync(&[1, 2, 0xFF, 0x7F], 1 << 20), (false, 2));
        assert_eq!(TubeMqFraming.resync(&f[..14], 1 << 20), (false, 0));
    }
}
