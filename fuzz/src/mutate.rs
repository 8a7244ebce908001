//! Structure-aware mutation: inside a TCP payload of a classic pcap, rewrite in place one of the fields a
//! hostile peer lies about, to a value that tends to break size arithmetic. Sizes never change, so the pcap
//! records and the TCP segments stay readable and the bytes still reach the framing and the decoders.
//!
//! Pulsar: TOTAL_SIZE and CMD_SIZE of any frame of the segment, the magic 0x0e01, the CRC32C, the metadata
//! size, and any varint of the command (two levels of sub-messages) or of the metadata (counts, sizes,
//! compression type, uncompressed size, chunk fields: a varint or a length). TubeMQ: the begin token, the
//! serial, the list size, each block's length, and the varints of the protobuf blocks. Else a varint written
//! at a random place, as tests/fuzz_harness.py's fallback.

/// A small PRNG (xorshift64*) seeded by libFuzzer, so a mutation is reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u32) -> Rng {
        Rng((seed as u64) << 32 | 0x9E37_79B9 ^ seed as u64 | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

const PULSAR_MAX_FRAME: u32 = 5 * 1024 * 1024 + 10 * 1024;
/// Sizes around the limits the code checks: zero, tiny, the frame limits (Pulsar's, TubeMQ's list and block
/// caps), 10 million, signed and unsigned wrap-around.
const INTERESTING_U32: [u32; 24] = [
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    0x7F,
    0x80,
    0xFF,
    0x100,
    0xFFFF,
    0x10000,
    3584,
    3585,
    8192,
    8193,
    10_000_000,
    PULSAR_MAX_FRAME,
    PULSAR_MAX_FRAME + 1,
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFE,
    0xFFFF_FFFF,
];
/// Varint values: enum values just past the known ones (compression type 0..4), counts and sizes, 2^31,
/// 2^32, and 64-bit extremes (negative int32 fields are 10-byte varints).
const INTERESTING_VARINT: [u64; 22] = [
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    100,
    127,
    128,
    1000,
    65535,
    1 << 20,
    10_000_000,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];
const PULSAR_MAGIC: [u8; 2] = [0x0e, 0x01];
const TUBEMQ_TOKEN: [u8; 4] = [0xff, 0x7f, 0xf4, 0xfe];

fn u32_le(b: &[u8], at: usize, big: bool) -> Option<u32> {
    let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if big { u32::from_be_bytes(w) } else { u32::from_le_bytes(w) })
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// (start, end) of the TCP payloads of a classic pcap (either byte order, µs or ns), over Ethernet (VLANs
/// too), Linux cooked v1/v2, BSD loopback or raw IP, IPv4 or IPv6. At most 4096.
pub fn tcp_payloads(data: &[u8]) -> Vec<(usize, usize)> {
    let big = match data.get(..4) {
        Some([0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1]) => false,
        Some([0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d]) => true,
        _ => return Vec::new(),
    };
    let Some(linktype) = u32_le(data, 20, big) else { return Vec::new() };
    let mut found = Vec::new();
    let mut at = 24;
    while found.len() < 4096 {
        let Some(incl) = u32_le(data, at + 8, big) else { break };
        let start = at + 16;
        let end = start.saturating_add(incl as usize).min(data.len());
        if let Some(range) = tcp_payload(&data[..end], start, linktype) {
            found.push(range);
        }
        at = start.saturating_add(incl as usize);
    }
    found
}

fn tcp_payload(data: &[u8], start: usize, linktype: u32) -> Option<(usize, usize)> {
    let end = data.len();
    let ip = match linktype {
        1 => {
            let mut at = start + 12;
            while matches!(data.get(at..at + 2)?, [0x81, 0x00] | [0x88, 0xa8]) {
                at += 4; // a VLAN tag
            }
            at + 2
        }
        113 => start + 16,
        276 => start + 20,
        0 => start + 4,
        12 | 101 | 228 | 229 => start,
        _ => return None,
    };
    let tcp = match *data.get(ip)? >> 4 {
        4 if *data.get(ip + 9)? == 6 => ip + (data[ip] & 15) as usize * 4,
        6 if *data.get(ip + 6)? == 6 => ip + 40,
        _ => return None,
    };
    let payload = tcp + (*data.get(tcp + 12)? >> 4) as usize * 4;
    (payload < end).then_some((payload, end))
}

/// The frames that follow each other from the payload's start (by TOTAL_SIZE): their starts.
fn pulsar_frames(data: &[u8], start: usize, end: usize) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = start;
    while at + 8 <= end && starts.len() < 64 {
        starts.push(at);
        let Some(total) = be32(data, at) else { break };
        at = match at.checked_add(4 + total as usize) {
            Some(next) if total >= 4 => next,
            _ => break,
        };
    }
    starts
}

fn find_all(data: &[u8], start: usize, end: usize, needle: &[u8]) -> Vec<usize> {
    (start..end.saturating_sub(needle.len() - 1)).filter(|&i| data[i..].starts_with(needle)).take(64).collect()
}

/// A varint at `at` (its value and width), read up to `end`.
fn read_varint(data: &[u8], mut at: usize, end: usize) -> Option<(u64, usize)> {
    let (mut value, mut shift, begin) = (0u64, 0u32, at);
    while at < end && shift < 70 {
        let b = data[at];
        at += 1;
        value |= ((b & 0x7f) as u64).checked_shl(shift).unwrap_or(0);
        if b & 0x80 == 0 {
            return Some((value, at - begin));
        }
        shift += 7;
    }
    None
}

/// Where the varints of a protobuf message in [at, end) are (values and lengths), with those of the
/// length-delimited fields read as messages down to `depth` more levels: (offset, width).
fn protobuf_varints(data: &[u8], mut at: usize, end: usize, depth: u32, out: &mut Vec<(usize, usize)>) {
    while at < end && out.len() < 256 {
        let Some((tag, width)) = read_varint(data, at, end) else { return };
        at += width;
        match tag & 7 {
            0 => {
                let Some((_, width)) = read_varint(data, at, end) else { return };
                out.push((at, width));
                at += width;
            }
            1 => at += 8,
            2 => {
                let Some((length, width)) = read_varint(data, at, end) else { return };
                out.push((at, width));
                at += width;
                let Some(inner_end) = at.checked_add(length as usize).filter(|&e| e <= end) else { return };
                if depth > 0 {
                    protobuf_varints(data, at, inner_end, depth - 1, out);
                }
                at = inner_end;
            }
            5 => at += 4,
            _ => return,
        }
    }
}

fn varint_bytes(mut value: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    loop {
        let more = value > 0x7f;
        out.push((value & 0x7f) as u8 | if more { 0x80 } else { 0 });
        value >>= 7;
        if !more {
            return out;
        }
    }
}

/// Write `value` as a varint over the one of `width` bytes at `at`: padded to that width when shorter (a
/// non-minimal varint, which decoders must accept), else over what follows (up to `end`).
fn write_varint(data: &mut [u8], at: usize, width: usize, end: usize, value: u64) {
    let mut bytes = varint_bytes(value);
    while bytes.len() < width {
        let last = bytes.len() - 1;
        bytes[last] |= 0x80;
        bytes.push(0);
    }
    let n = bytes.len().min(end.saturating_sub(at));
    data[at..at + n].copy_from_slice(&bytes[..n]);
}

fn write_u32(data: &mut [u8], at: usize, end: usize, rng: &mut Rng) -> bool {
    let Some(old) = be32(data, at).filter(|_| at + 4 <= end) else { return false };
    let value = match rng.below(4) {
        0 => old.wrapping_add(rng.pick(&[1u32, 4, 0xFFFF_FFFF, 0xFFFF_FFFC])), // off by one, by a header
        1 => old.wrapping_mul(2),
        _ => rng.pick(&INTERESTING_U32),
    };
    data[at..at + 4].copy_from_slice(&value.to_be_bytes());
    true
}

/// One structure-aware mutation of `data` in place; false when it holds no field to rewrite.
pub fn mutate_structured(data: &mut [u8], rng: &mut Rng) -> bool {
    let payloads = tcp_payloads(data);
    if payloads.is_empty() {
        return false;
    }
    // a segment may hold no field of the kind drawn (a TubeMQ continuation, a pure PING): draw again
    for _ in 0..8 {
        let (start, end) = rng.pick(&payloads);
        if mutate_payload(data, start, end, rng) {
            return true;
        }
    }
    false
}

fn mutate_payload(data: &mut [u8], start: usize, end: usize, rng: &mut Rng) -> bool {
    match rng.below(6) {
        0 => {
            // TOTAL_SIZE or CMD_SIZE of a frame of the segment
            let frames = pulsar_frames(data, start, end);
            if frames.is_empty() {
                return false;
            }
            let at = rng.pick(&frames) + rng.pick(&[0, 4]);
            write_u32(data, at, end, rng)
        }
        1 => {
            // the payload section: magic, checksum, metadata size
            let found = find_all(data, start, end, &PULSAR_MAGIC);
            if found.is_empty() {
                return false;
            }
            let m = rng.pick(&found);
            match rng.below(3) {
                0 => {
                    let i = m + rng.below(2);
                    data[i] = if rng.below(2) == 0 { data[i] ^ 1 << rng.below(8) } else { rng.next_u64() as u8 };
                    true
                }
                1 if rng.below(2) == 0 && m + 6 <= end => {
                    data[m + 2 + rng.below(4)] ^= 1 << rng.below(8); // a checksum one bit off
                    true
                }
                1 => write_u32(data, m + 2, end, rng),
                _ => write_u32(data, m + 6, end, rng),
            }
        }
        2 => {
            // TubeMQ: token, serial, list size, a block's length
            let found = find_all(data, start, end, &TUBEMQ_TOKEN);
            if found.is_empty() {
                return false;
            }
            let t = rng.pick(&found);
            let mut fields = vec![t + 4, t + 8];
            let mut at = t + 12;
            let blocks = be32(data, t + 8).unwrap_or(0).min(64);
            for _ in 0..blocks {
                let Some(length) = be32(data, at) else { break };
                fields.push(at);
                at = at.saturating_add(4 + length as usize);
            }
            if rng.below(8) == 0 {
                data[t + rng.below(4)] ^= 1 << rng.below(8); // the token itself
                return true;
            }
            write_u32(data, rng.pick(&fields), end, rng)
        }
        3 | 4 => {
            // a varint of a command, of metadata, or of a TubeMQ block
            let mut varints = Vec::new();
            for f in pulsar_frames(data, start, end) {
                let cmd_size = be32(data, f + 4).unwrap_or(0) as usize;
                let cmd_end = (f + 8).saturating_add(cmd_size).min(end);
                protobuf_varints(data, f + 8, cmd_end, 2, &mut varints);
                if data.get(cmd_end..cmd_end + 2) == Some(&PULSAR_MAGIC[..]) {
                    let md_size = be32(data, cmd_end + 6).unwrap_or(0) as usize;
                    let md = cmd_end + 10;
                    protobuf_varints(data, md, md.saturating_add(md_size).min(end), 1, &mut varints);
                }
            }
            for t in find_all(data, start, end, &TUBEMQ_TOKEN) {
                let mut at = t + 12;
                for _ in 0..be32(data, t + 8).unwrap_or(0).min(64) {
                    let Some(length) = be32(data, at) else { break };
                    let block_end = (at + 4).saturating_add(length as usize).min(end);
                    protobuf_varints(data, at + 4, block_end, 2, &mut varints);
                    at = block_end;
                }
            }
            if varints.is_empty() {
                return false;
            }
            let (at, width) = rng.pick(&varints);
            let value = match rng.below(3) {
                0 => read_varint(data, at, end).map_or(0, |(v, _)| v.wrapping_add(1)),
                _ => rng.pick(&INTERESTING_VARINT),
            };
            write_varint(data, at, width, end, value);
            true
        }
        _ => {
            // a varint anywhere past the first header
            if end - start <= 8 {
                return false;
            }
            let at = start + 8 + rng.below(end - start - 8);
            write_varint(data, at, 1, end, rng.pick(&INTERESTING_VARINT));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/../captures/{name}", env!("CARGO_MANIFEST_DIR"))).expect("a shipped capture")
    }

    /// Every mutation keeps the size and, on a shipped capture, almost always finds a field to rewrite.
    #[test]
    fn mutations_rewrite_fields_in_place() {
        for name in ["01_basic_nonbatched.pcap", "03_compression_zstd.pcap", "tubemq/tubemq_segmented.pcap"] {
            let original = capture(name);
            assert!(tcp_payloads(&original).len() > 10, "{name}: payloads found");
            let (mut applied, mut changed) = (0, 0);
            for seed in 0..2000 {
                let mut data = original.clone();
                if mutate_structured(&mut data, &mut Rng::new(seed)) {
                    applied += 1;
                    changed += (data != original) as u32;
                }
                assert_eq!(data.len(), original.len());
            }
            assert!(applied > 1900 && changed > 1500, "{name}: {applied} applied, {changed} changed");
        }
    }

    #[test]
    fn a_varint_keeps_its_width_when_the_value_fits() {
        let mut data = vec![0x96, 0x01, 0xAA];
        write_varint(&mut data, 0, 2, 3, 1);
        assert_eq!(data, [0x81, 0x00, 0xAA]);
        assert_eq!(read_varint(&data, 0, 3), Some((1, 2)));
        write_varint(&mut data, 0, 1, 3, u64::MAX); // longer: over what follows, cut at the end
        assert_eq!(data, [0xFF, 0xFF, 0xFF]);
    }
}
