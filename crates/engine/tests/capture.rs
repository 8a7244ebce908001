//! The capture reader on bytes in memory, without Python: packets of pcap and pcapng, gzip members, and
//! hostile lengths that must neither panic nor allocate what they claim.

use pulsar_dissect_engine::capture::source::{Foreign, SliceSource, SourceError};
use pulsar_dissect_engine::capture::{Reader, StartError};

fn text(error: SourceError) -> Result<String, Foreign> {
    match error {
        SourceError::Gzip(text) => Ok(text),
        SourceError::Io(error) => Ok(error.to_string()),
        SourceError::Foreign(error) => Err(error),
    }
}

fn reader(data: &[u8], piece: usize) -> Result<Reader, String> {
    let source = SliceSource { data: data.to_vec(), pos: 0, piece };
    Reader::start(Box::new(source), "mem", text).map_err(|e| match e {
        StartError::Capture(text) => text,
        StartError::Source(_) => "source".to_owned(),
    })
}

/// (index, timestamp, bytes) of every packet, and the reader at the end.
fn read_all(data: &[u8], piece: usize) -> (Vec<(u64, f64, Vec<u8>)>, Reader) {
    let mut r = reader(data, piece).expect("a capture");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().ok().flatten() {
        out.push((p.index, p.timestamp, r.data(&p).to_vec()));
    }
    (out, r)
}

fn pcap(records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let mut d = Vec::new();
    for v in [0xA1B2C3D4u32.to_le_bytes().to_vec(), 2u16.to_le_bytes().to_vec(), 4u16.to_le_bytes().to_vec()] {
        d.extend(v);
    }
    d.extend([0u8; 8]);
    d.extend(65535u32.to_le_bytes());
    d.extend(1u32.to_le_bytes());
    for (sec, usec, data) in records {
        for v in [*sec, *usec, data.len() as u32, data.len() as u32] {
            d.extend(v.to_le_bytes());
        }
        d.extend_from_slice(data);
    }
    d
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[test]
fn pcap_packets_and_times() {
    let data = pcap(&[(10, 500_000, b"abc"), (11, 250_000, b"de")]);
    for piece in [0, 1, 7] {
        let (packets, r) = read_all(&data, piece);
        assert_eq!(packets, vec![(1, 10.5, b"abc".to_vec()), (2, 11.25, b"de".to_vec())]);
        assert!(r.truncated.is_none() && r.notes.is_empty());
        assert_eq!((r.kind, r.compressed, r.packets), ("pcap", false, 2));
    }
}

#[test]
fn gzip_members_one_after_the_other() {
    let data = pcap(&[(1, 0, b"one"), (2, 0, b"two"), (3, 0, b"three")]);
    let (head, tail) = data.split_at(40);
    let mut joined = gzip(head);
    joined.extend(gzip(tail));
    joined.extend([0u8; 10]); // zero padding after the last member
    let (packets, r) = read_all(&joined, 5);
    assert_eq!(packets.len(), 3);
    assert!(r.compressed && r.truncated.is_none(), "{:?}", r.truncated);
    let mut bad = gzip(&data);
    let at = bad.len() - 8;
    bad[at] ^= 1; // the CRC
    let (packets, r) = read_all(&bad, 0);
    assert_eq!(packets.len(), 3);
    let truncated = r.truncated.unwrap_or_default();
    assert!(truncated.contains("gzip stream error: BadGzipFile: CRC check failed 0x"), "{truncated}");
}

#[test]
fn not_captures() {
    assert_eq!(reader(b"", 0).err().unwrap(), "mem: empty file (0 bytes), not a capture");
    assert_eq!(reader(b"GET / HTTP/1.1", 0).err().unwrap(), "mem: not a pcap or pcapng file (starts with 47 45 54 20)");
    assert!(reader(b"\x1f\x8bnot deflate", 0)
        .err()
        .unwrap()
        .starts_with("mem (gzip): corrupt or truncated gzip data: "));
}

#[test]
fn hostile_lengths_never_panic_nor_allocate_them() {
    let good = pcap(&[(1, 0, b"ok")]);
    for caplen in [0u32, 60_000_000, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF] {
        let mut data = good.clone();
        for v in [1u32, 0, caplen, caplen] {
            data.extend(v.to_le_bytes());
        }
        data.extend([0u8; 64]);
        let (packets, r) = read_all(&data, 0);
        assert!(!packets.is_empty());
        assert!(r.buffer_peak < 3 << 20, "{caplen}: {}", r.buffer_peak);
    }
    // pcapng: a section header, then blocks of every odd length
    let mut shb = Vec::new();
    for v in [0x0A0D0D0Au32, 28, 0x1A2B3C4D] {
        shb.extend(v.to_le_bytes());
    }
    shb.extend([1, 0, 0, 0]);
    shb.extend([0xFF; 8]);
    shb.extend(28u32.to_le_bytes());
    for (kind, length) in
        [(6u32, 0u32), (6, 12), (1, 12), (3, 12), (2, 12), (6, 60_000_000), (6, 0xFFFF_FFFC), (0x0A0D0D0A, 12)]
    {
        let mut data = shb.clone();
        data.extend(kind.to_le_bytes());
        data.extend(length.to_le_bytes());
        data.extend(length.to_le_bytes());
        data.extend([0u8; 40]);
        let (_, r) = read_all(&data, 3);
        assert!(r.buffer_peak < 3 << 20);
    }
}

#[test]
fn random_bytes_after_headers_never_panic() {
    let mut seed = 0x2545F4914F6CDD1Du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let heads: [Vec<u8>; 2] = [pcap(&[]), {
        let mut d = Vec::new();
        for v in [0x0A0D0D0Au32, 28, 0x1A2B3C4D, 1, 0xFFFF_FFFF, 0xFFFF_FFFF, 28] {
            d.extend(v.to_le_bytes());
        }
        d
    }];
    for round in 0..3000 {
        let mut data = heads[round % 2].clone();
        let n = (next() % 300) as usize;
        data.extend((0..n).map(|_| {
            let v = next();
            if v % 5 == 0 {
                0xFF
            } else {
                v as u8
            }
        }));
        let data = if round % 3 == 0 { gzip(&data) } else { data };
        if let Ok(mut r) = reader(&data, (round % 4) * 3) {
            while let Ok(Some(p)) = r.next_packet() {
                let _ = r.data(&p);
            }
        }
    }
}
