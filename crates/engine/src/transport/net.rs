//! Link layer → IPv4/IPv6 → TCP, one captured packet at a time: ``tcp_segment`` returns the segment of a TCP
//! packet and None for anything else (non-IP, non-TCP, IP fragments, malformed or truncated headers). It
//! never fails on packet bytes: every read is bounds-checked.

use std::fmt;

pub const FIN: u16 = 0x01;
pub const SYN: u16 = 0x02;
pub const RST: u16 = 0x04;
pub const ACK: u16 = 0x10;
pub const NS: u16 = 0x100;

/// An IP address, as on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Ip {
    V4([u8; 4]),
    V6([u8; 16]),
}

impl Ip {
    pub fn parse(text: &str) -> Option<Ip> {
        match text.parse::<std::net::IpAddr>().ok()? {
            std::net::IpAddr::V4(a) => Some(Ip::V4(a.octets())),
            std::net::IpAddr::V6(a) => Some(Ip::V6(a.octets())),
        }
    }
}

impl fmt::Display for Ip {
    /// As the C library's inet_ntop writes it (the text Python's socket module gives): IPv6 with the longest
    /// run of two or more zero groups compressed, IPv4-mapped and IPv4-compatible addresses with a dotted tail.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ip::V4(a) => write!(f, "{}.{}.{}.{}", a[0], a[1], a[2], a[3]),
            Ip::V6(b) => {
                let w: Vec<u16> = (0..8).map(|i| u16::from_be_bytes([b[2 * i], b[2 * i + 1]])).collect();
                // the longest run of zero groups (the first of equals), when at least two long
                let (mut best, mut best_len, mut cur, mut cur_len) = (usize::MAX, 0usize, 0usize, 0usize);
                for (i, &g) in w.iter().enumerate() {
                    if g == 0 {
                        if cur_len == 0 {
                            cur = i;
                        }
                        cur_len += 1;
                        if cur_len > best_len {
                            best = cur;
                            best_len = cur_len;
                        }
                    } else {
                        cur_len = 0;
                    }
                }
                if best_len < 2 {
                    best = usize::MAX;
                }
                let mut i = 0;
                while i < 8 {
                    if i == best {
                        if i == 0 {
                            f.write_str(":")?;
                        }
                        f.write_str(":")?;
                        i += best_len;
                        continue;
                    }
                    if i == 6 && best == 0 && (best_len == 6 || (best_len == 5 && w[5] == 0xffff)) {
                        return write!(f, "{}.{}.{}.{}", b[12], b[13], b[14], b[15]);
                    }
                    write!(f, "{:x}", w[i])?;
                    if i < 7 {
                        f.write_str(":")?;
                    }
                    i += 1;
                }
                Ok(())
            }
        }
    }
}

/// "ip:port", "[ip6]:port": an endpoint as the records name it.
pub fn endpoint_text(ip: &Ip, port: u16) -> String {
    match ip {
        Ip::V4(_) => format!("{ip}:{port}"),
        Ip::V6(_) => format!("[{ip}]:{port}"),
    }
}

/// A TCP connection's key, the same from either end: a hash (FNV-1a, the same on every machine) of its two
/// endpoints in order. The `pipeline` deals connections to its tasks by it and a task reads its own by it; two
/// connections that share a key only share a task.
pub fn flow_key(segment: &Segment<'_>) -> i64 {
    fn endpoint(ip: &Ip, port: u16) -> ([u8; 16], u8, u16) {
        match ip {
            Ip::V4(a) => {
                let mut bytes = [0u8; 16];
                bytes[..4].copy_from_slice(a);
                (bytes, 4, port)
            }
            Ip::V6(a) => (*a, 6, port),
        }
    }
    let (a, b) = (endpoint(&segment.src, segment.src_port), endpoint(&segment.dst, segment.dst_port));
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (bytes, version, port) in [low, high] {
        for byte in bytes.iter().chain(&[version]).chain(&port.to_be_bytes()) {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash as i64
}

/// One TCP segment: the headers' fields and the payload bytes that were captured.
#[derive(Clone, Debug)]
pub struct Segment<'a> {
    pub packet_index: i64,
    pub timestamp: f64,
    pub src: Ip,
    pub src_port: u16,
    pub dst: Ip,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u16,
    pub window: u16,
    pub payload: &'a [u8],
    /// payload bytes that were on the wire but not captured (snaplen cut); 0 normally
    pub missing_tail: usize,
}

fn u16_at(d: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes(d.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(d: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_be_bytes(d.get(off..off + 4)?.try_into().ok()?))
}

const VLAN_TYPES: [u16; 4] = [0x8100, 0x88A8, 0x9100, 0x9200];

/// (ethertype, offset) after any 802.1Q/802.1ad tags; None when a tag is cut short.
fn skip_vlans(data: &[u8], mut etype: u16, mut off: usize) -> Option<(u16, usize)> {
    while VLAN_TYPES.contains(&etype) {
        etype = u16_at(data, off + 2)?;
        off += 4;
    }
    Some((etype, off))
}

fn ip_version(etype: u16) -> Option<u8> {
    match etype {
        0x0800 => Some(4),
        0x86DD => Some(6),
        _ => None,
    }
}

/// The TCP segment of one captured packet (``linktype`` as in pcap), or None.
pub fn tcp_segment(
    packet_index: i64,
    timestamp: f64,
    linktype: u32,
    data: &[u8],
    orig_len: usize,
) -> Option<Segment<'_>> {
    let dlen = data.len();
    let (version, off) = match linktype {
        1 => {
            // Ethernet
            let etype = u16_at(data, 12)?;
            let (mut etype, mut off) = skip_vlans(data, etype, 14)?;
            if etype < 0x0600 && data.get(off..off + 6) == Some(b"\xaa\xaa\x03\x00\x00\x00".as_slice()) {
                // 802.3 + LLC/SNAP
                etype = u16_at(data, off + 6)?;
                off += 8;
            }
            (ip_version(etype)?, off)
        }
        276 | 113 => {
            // Linux cooked v2 / v1: the protocol field is an ethertype
            let (head, type_at) = if linktype == 276 { (20, 0) } else { (16, 14) };
            if dlen < head {
                return None;
            }
            let (etype, off) = skip_vlans(data, u16_at(data, type_at)?, head)?;
            (ip_version(etype)?, off)
        }
        0 | 108 => {
            // BSD loopback (host order) / OpenBSD loop (network order)
            let raw: [u8; 4] = data.get(0..4)?.try_into().ok()?;
            let family = if linktype == 108 {
                u32::from_be_bytes(raw)
            } else {
                let le = u32::from_le_bytes(raw);
                if le > 0xFFFF {
                    u32::from_be_bytes(raw)
                } else {
                    le
                } // written by a big-endian machine
            };
            match family {
                2 => (4, 4),
                24 | 28 | 30 => (6, 4), // NetBSD/OpenBSD/BSD/OS, FreeBSD, Darwin
                _ => return None,
            }
        }
        101 | 12 | 14 => (*data.first()? >> 4, 0), // raw IP: the version nibble
        228 => (4, 0),
        229 => (6, 0),
        _ => return None,
    };

    let (src, dst, tcp_off, ip_end);
    if version == 4 {
        if dlen < off + 20 {
            return None;
        }
        let ver_ihl = data[off];
        let total_len = u16_at(data, off + 2)? as usize;
        let frag = u16_at(data, off + 6)?;
        let proto = data[off + 9];
        if ver_ihl >> 4 != 4 || proto != 6 || frag & 0x3FFF != 0 {
            return None; // not TCP / a fragment (MF set or offset != 0)
        }
        let ihl = ((ver_ihl & 0x0F) as usize) << 2;
        if ihl < 20 {
            return None;
        }
        src = Ip::V4(data[off + 12..off + 16].try_into().ok()?);
        dst = Ip::V4(data[off + 16..off + 20].try_into().ok()?);
        tcp_off = off + ihl;
        // TSO/GSO capture: the length is not filled in; take the frame's length
        let total = if total_len == 0 { orig_len as isize - off as isize } else { total_len as isize };
        ip_end = off as isize + total;
    } else if version == 6 {
        if dlen < off + 40 || data[off] >> 4 != 6 {
            return None;
        }
        let mut payload_len = u16_at(data, off + 4)? as isize;
        let mut nxt = data[off + 6];
        src = Ip::V6(data[off + 8..off + 24].try_into().ok()?);
        dst = Ip::V6(data[off + 24..off + 40].try_into().ok()?);
        let mut t = off + 40;
        if payload_len == 0 {
            payload_len = orig_len as isize - t as isize; // jumbogram / TSO: the frame's length
        }
        ip_end = t as isize + payload_len;
        while nxt != 6 {
            match nxt {
                0 | 43 | 60 => {
                    // hop-by-hop, routing, destination options: (len+1)*8 bytes
                    if dlen < t + 8 {
                        return None;
                    }
                    nxt = data[t];
                    t += ((data[t + 1] as usize) + 1) << 3;
                }
                44 => {
                    // fragment header: only an atomic fragment (offset 0, M=0) is whole
                    if dlen < t + 8 || u16_at(data, t + 2)? & 0xFFF9 != 0 {
                        return None;
                    }
                    nxt = data[t];
                    t += 8;
                }
                51 => {
                    // authentication header
                    if dlen < t + 8 {
                        return None;
                    }
                    nxt = data[t];
                    t += ((data[t + 1] as usize) + 2) << 2;
                }
                _ => return None, // no next header, ESP, ICMPv6, UDP, ...
            }
            if t as isize > ip_end {
                return None;
            }
        }
        tcp_off = t;
    } else {
        return None;
    }

    if dlen < tcp_off + 20 {
        return None;
    }
    let src_port = u16_at(data, tcp_off)?;
    let dst_port = u16_at(data, tcp_off + 2)?;
    let seq = u32_at(data, tcp_off + 4)?;
    let ack = u32_at(data, tcp_off + 8)?;
    let doff = data[tcp_off + 12];
    let mut flags = data[tcp_off + 13] as u16;
    let window = u16_at(data, tcp_off + 14)?;
    let thl = ((doff >> 4) as usize) << 2;
    if thl < 20 {
        return None;
    }
    let start = tcp_off + thl;
    if start as isize > ip_end || start > dlen {
        return None;
    }
    if doff & 1 != 0 {
        flags |= NS;
    }
    let (payload, missing_tail) = if ip_end <= dlen as isize {
        (&data[start..ip_end as usize], 0) // also cuts Ethernet padding / trailers (FCS)
    } else {
        // bytes of this IP packet that were on the wire but not captured (never more than the frame had)
        let wire_end = ip_end.min(orig_len as isize);
        (&data[start..], (wire_end - dlen as isize).max(0) as usize)
    };
    Some(Segment {
        packet_index,
        timestamp,
        src,
        src_port,
        dst,
        dst_port,
        seq,
        ack,
        flags,
        window,
        payload,
        missing_tail,
    })
}
