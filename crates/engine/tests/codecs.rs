//! Decompression bombs cost no memory: the bytes the Rust heap holds while `codecs::decompress` runs stay
//! within the limit (plus a small fixed amount), whatever the compressed input expands to.
//!
//! Counted per thread by a global allocator of this test binary. zstd's own buffers (C `malloc`) are not seen
//! here; its window stays within what the frame needs, as in Python.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;

use pulsar_dissect_engine::codecs::{decompress, Problem, LZ4, SNAPPY, ZLIB, ZSTD};

struct Counting;

thread_local! {
    static NOW: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = NOW.try_with(|now| {
        let n = now.get() + delta;
        now.set(n);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(n)));
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most heap `f` held at once, beyond what was held when it started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = NOW.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    let result = f();
    (result, (PEAK.with(Cell::get) - start).max(0) as usize)
}

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;
/// Codec state and bookkeeping: zlib-rs' inflate state and 32 KiB window, a zero-filled chunk, an error text.
const SLACK: usize = 256 * KIB;

fn compress(codec: i64, data: &[u8]) -> Vec<u8> {
    match codec {
        LZ4 => lz4_flex::block::compress(data),
        ZLIB => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        ZSTD => zstd::bulk::compress(data, 3).unwrap(),
        _ => snap::raw::Encoder::new().compress_vec(data).unwrap(),
    }
}

#[test]
fn codecs_bombs_cost_no_more_than_the_limit() {
    let zeros = vec![0u8; 24 * MIB];
    for (codec, name) in [(LZ4, "LZ4"), (ZLIB, "ZLIB"), (ZSTD, "ZSTD"), (SNAPPY, "SNAPPY")] {
        let blob = compress(codec, &zeros);
        assert!(blob.len() < 2 * MIB, "{name}: {} bytes", blob.len());

        let (result, peak) = peak_during(|| decompress(codec, &blob, Some(1000), 64 * MIB as u64));
        assert_eq!(result.problem, Some(Problem::BombDeclared { codec: name, declared: 1000 }));
        assert!(peak < SLACK, "{name} declared 1000: peak {peak}");

        let limit = 2 * MIB;
        let (result, peak) = peak_during(|| decompress(codec, &blob, None, limit as u64));
        assert_eq!(result.problem, Some(Problem::BombLimit { codec: name, limit: limit as u64 }));
        assert!(peak < limit + SLACK, "{name} limit {limit}: peak {peak}");
    }
}

#[test]
fn codecs_undeclared_size_does_not_cost_a_limit_sized_buffer() {
    let body: Vec<u8> = (0..20_000u32).flat_map(|i| format!("message {i}\n").into_bytes()).collect();
    for (codec, name) in [(LZ4, "LZ4"), (ZLIB, "ZLIB"), (ZSTD, "ZSTD"), (SNAPPY, "SNAPPY")] {
        let blob = compress(codec, &body);
        let (result, peak) = peak_during(|| decompress(codec, &blob, None, 64 * MIB as u64));
        assert_eq!(result.data.as_deref(), Some(body.as_slice()), "{name}");
        assert!(peak < 2 * body.len().max(256 * KIB) + SLACK, "{name}: peak {peak} for {} bytes", body.len());
    }
}

/// `codecs::sha256` (the compression function, padded by hand) against the `sha2` crate's `Digest`, at every
/// length around the block and padding boundaries.
#[test]
fn sha256_equals_the_digest_api() {
    use sha2::Digest;
    let data: Vec<u8> = (0..400u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    for len in 0..data.len() {
        let ours = pulsar_dissect_engine::codecs::sha256(&data[..len]);
        assert_eq!(ours.as_slice(), sha2::Sha256::digest(&data[..len]).as_slice(), "length {len}");
    }
    // FIPS 180-4's "abc"
    assert_eq!(pulsar_dissect_engine::codecs::sha256(b"abc")[..4], [0xba, 0x78, 0x16, 0xbf]);
}
