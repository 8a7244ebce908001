//! Payload decompression for `MessageMetadata.compression`, bounded against bombs and lying sizes.
//!
//! Once a port of the pure-Python codecs (same cases, same params, which `dissector/problems.py` words). The
//! output may never exceed `min(declared_size, max_size)`, and no input makes us allocate more than that (plus one byte
//! and a little codec state); buffers are zero-filled as they are written, so a lying size costs address
//! space, not memory:
//!
//! * LZ4 (raw block format) decompresses into a buffer of the limit; without a declared size it starts small
//!   and grows ×4 towards the limit, so that a payload without `uncompressed_size` does not cost a
//!   limit-sized buffer. Blocks that break the format's end-of-block rules fail, as with liblz4.
//! * SNAPPY (raw format) reads the uncompressed length from its header first and refuses before allocating.
//!   A payload in Snappy's framing format (stream identifier `sNaPpY`, then chunks of at most 64 KiB, each
//!   with a masked CRC-32C), as pulsar-rs writes it, is recognised by its identifier, decoded chunk by chunk
//!   with every checksum checked, and said to be framed (`Decompressed::snappy_framed`): the Java and C++
//!   clients read raw blocks only.
//! * ZLIB (zlib-rs: zlib's inflate, errors and messages) and ZSTD (read 8 KiB at a time, as Python's cramjam
//!   does) stream into a buffer that grows ×2 and stops one byte past the limit. zstd's own window buffer
//!   is zstd's business, as in Python: at most what the frame header asks for (zstd refuses more than
//!   128 MiB), and only touched as far as the output goes.
//!
//! Pure Rust, no Python: the caller turns a [`Problem`] into a `payload.decompression` finding.

use std::borrow::Cow;
use std::io::{self, Read};

use flate2::{Decompress, FlushDecompress, Status};

/// `MessageMetadata.compression` (`CompressionType`).
pub const NONE: i64 = 0;
pub const LZ4: i64 = 1;
pub const ZLIB: i64 = 2;
pub const ZSTD: i64 = 3;
pub const SNAPPY: i64 = 4;

/// The codec's name as the findings spell it, `None` for a number this schema does not know.
pub fn codec_name(codec: i64) -> Option<&'static str> {
    match codec {
        NONE => Some("NONE"),
        LZ4 => Some("LZ4"),
        ZLIB => Some("ZLIB"),
        ZSTD => Some("ZSTD"),
        SNAPPY => Some("SNAPPY"),
        _ => None,
    }
}

/// One `payload.decompression` finding; [`Problem::case`] names its case, the fields are its other params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// `{"case": "unknown_codec", "codec": <number>}`: payload left compressed.
    UnknownCodec { codec: i64 },
    /// `uncompressed_size` is above the limit: not decompressed at all.
    OverLimit { codec: &'static str, declared: u64, limit: u64 },
    /// The output would exceed the declared `uncompressed_size`.
    BombDeclared { codec: &'static str, declared: u64 },
    /// No size declared and the output would exceed the limit.
    BombLimit { codec: &'static str, limit: u64 },
    /// The codec library rejected the data; `error` is one line of at most 200 characters.
    Failed { codec: &'static str, error: String },
    /// Decompressed, but to another size than declared (the data is kept).
    SizeMismatch { codec: &'static str, declared: u64, actual: u64 },
}

impl Problem {
    /// The finding's `case` param.
    pub fn case(&self) -> &'static str {
        match self {
            Problem::UnknownCodec { .. } => "unknown_codec",
            Problem::OverLimit { .. } => "over_limit",
            Problem::BombDeclared { .. } => "bomb_declared",
            Problem::BombLimit { .. } => "bomb_limit",
            Problem::Failed { .. } => "failed",
            Problem::SizeMismatch { .. } => "size_mismatch",
        }
    }
}

/// The result of [`decompress`]: `data` is `None` when decompression failed or was refused; it is borrowed
/// only for [`NONE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decompressed<'a> {
    pub data: Option<Cow<'a, [u8]>>,
    pub problem: Option<Problem>,
    /// The payload was Snappy's framing format, not the raw block format Pulsar's codec is.
    pub snappy_framed: bool,
}

/// Decompress `data`; the output may not exceed `declared_size` (when given) nor `max_size`.
pub fn decompress(codec: i64, data: &[u8], declared_size: Option<u64>, max_size: u64) -> Decompressed<'_> {
    let framed = codec == SNAPPY && data.starts_with(SNAPPY_STREAM_ID);
    let refused = |problem| Decompressed { data: None, problem: Some(problem), snappy_framed: framed };
    let Some(name) = codec_name(codec) else {
        return refused(Problem::UnknownCodec { codec });
    };
    if codec == NONE {
        return Decompressed { data: Some(Cow::Borrowed(data)), problem: None, snappy_framed: false };
    }
    let limit = match declared_size {
        None => max_size,
        Some(declared) if declared > max_size => {
            return refused(Problem::OverLimit { codec: name, declared, limit: max_size });
        }
        Some(declared) => declared,
    };
    let exact = declared_size.is_some();
    let result = match codec {
        ZLIB => inflate_sync_flushed(data, limit, exact),
        LZ4 => lz4_block(data, limit, exact),
        ZSTD => zstd_frames(data, limit, exact),
        _ if framed => snappy_framed(data, limit),
        _ => snappy_raw(data, limit),
    };
    match result {
        Err(Error::TooLarge) => refused(match declared_size {
            Some(declared) => Problem::BombDeclared { codec: name, declared },
            None => Problem::BombLimit { codec: name, limit: max_size },
        }),
        Err(Error::Failed(message)) => refused(Problem::Failed { codec: name, error: one_line(&message) }),
        Ok(out) => {
            let actual = out.len() as u64;
            let problem = match declared_size {
                Some(declared) if actual != declared => Some(Problem::SizeMismatch { codec: name, declared, actual }),
                _ => None,
            };
            Decompressed { data: Some(Cow::Owned(out)), problem, snappy_framed: framed }
        }
    }
}

enum Error {
    /// The output would exceed the limit.
    TooLarge,
    /// The library's error message.
    Failed(String),
}

fn failed(error: impl ToString) -> Error {
    Error::Failed(error.to_string())
}

/// A first buffer size when no size is declared.
const FIRST_GUESS: usize = 256 * 1024;
/// How much of a streaming buffer is zero-filled (touched) at a time.
const CHUNK: usize = 128 * 1024;

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The size to start with: the limit when a size was declared, else a guess from the input size.
fn first_size(limit: usize, exact: bool, input_len: usize) -> usize {
    if exact {
        limit
    } else {
        limit.min(FIRST_GUESS.max(input_len.saturating_mul(4)))
    }
}

// ------------------------------------------------------------------------------------------------ ZLIB
/// Pulsar's Java `Deflater` writes SYNC_FLUSH blocks and never finishes the stream: accept a stream with no
/// final block, as Python's `zlib.decompressobj().decompress(data, limit + 1)` does: stop at the end of the
/// input, at the end of the stream (anything after it is ignored) or once `limit + 1` bytes are out.
fn inflate_sync_flushed(data: &[u8], limit: u64, exact: bool) -> Result<Vec<u8>, Error> {
    let cap = to_usize(limit).saturating_add(1);
    let first = first_size(cap, exact, data.len());
    match inflate_bounded(data, cap, first, usize::MAX) {
        Ok(out) => out.finish(limit),
        Err(error) if error.message() == Some(FAST_LOOP_MESSAGE) => {
            // Feeding at most 8 bytes at a time keeps zlib-rs out of its fast loop, whose errors it reports
            // with FAST_LOOP_MESSAGE: the slow loop finds the same error and names it as zlib does.
            let error = inflate_bounded(data, cap, first, 8).err().unwrap_or(error);
            Err(zlib_error(error))
        }
        Err(error) => Err(zlib_error(error)),
    }
}

/// What zlib-rs 0.6 says of an error found in its fast decoding loop (zlib would keep that error's message):
/// it marks the stream bad there and then reports the bad stream.
pub(crate) const FAST_LOOP_MESSAGE: &str = "repeated call with bad state";

/// Inflate into at most `cap` bytes, giving the inflater at most `max_in` input bytes per call.
fn inflate_bounded(data: &[u8], cap: usize, first: usize, max_in: usize) -> Result<Bounded, flate2::DecompressError> {
    let mut out = Bounded::new(cap, first);
    let mut inflater = Decompress::new(true);
    let mut pos = 0usize;
    loop {
        let space = out.space();
        if space.is_empty() {
            break; // limit + 1 bytes are out: what follows is not looked at
        }
        let input = &data[pos..data.len().min(pos.saturating_add(max_in))];
        let (in_before, out_before) = (inflater.total_in(), inflater.total_out());
        let status = inflater.decompress(input, space, FlushDecompress::Sync)?;
        let consumed = (inflater.total_in() - in_before) as usize;
        let produced = (inflater.total_out() - out_before) as usize;
        pos += consumed;
        out.advance(produced);
        match status {
            Status::StreamEnd => break,
            Status::Ok | Status::BufError if consumed == 0 && produced == 0 => break, // the input ends
            Status::Ok | Status::BufError => {}
        }
    }
    Ok(out)
}

/// The message CPython's zlib module gives (`Error -3 while decompressing data: invalid stored block
/// lengths`); the zlib-rs backend keeps zlib's own texts.
fn zlib_error(error: flate2::DecompressError) -> Error {
    Error::Failed(zlib_error_text(&error))
}

/// CPython's `zlib.error` text of an inflate error (also what a gzip capture's corrupt stream says).
pub(crate) fn zlib_error_text(error: &flate2::DecompressError) -> String {
    if error.needs_dictionary().is_some() {
        return "Error 2 while decompressing data".to_owned(); // Z_NEED_DICT, no message
    }
    let message = match error.message() {
        None | Some(FAST_LOOP_MESSAGE) => "invalid input data", // CPython's words for Z_DATA_ERROR without one
        Some(message) => message,
    };
    format!("Error -3 while decompressing data: {message}")
}

// ------------------------------------------------------------------------------------------------ LZ4
/// Raw LZ4 block format (not the frame format), decompressed into a buffer of the limit; without a declared
/// size start at `FIRST_GUESS` (or 4× the input) and grow ×4 up to the limit.
fn lz4_block(data: &[u8], limit: u64, exact: bool) -> Result<Vec<u8>, Error> {
    let limit = to_usize(limit);
    let mut size = first_size(limit, exact, data.len());
    loop {
        let mut buf = vec![0u8; size];
        match lz4_flex::block::decompress_into(data, &mut buf) {
            Ok(n) => {
                lz4_block_ending(data, limit).map_err(failed)?;
                buf.truncate(n);
                return Ok(buf);
            }
            // The safe decoder checks every write against the buffer and reports a short buffer as such;
            // any other error comes from the input and would come again with a larger buffer.
            Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) if size >= limit => {
                return Err(Error::TooLarge)
            }
            Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) => {}
            Err(e) => return Err(failed(e)),
        }
        size = limit.min(size.saturating_mul(4));
    }
}

/// liblz4's `LZ4_decompress_safe` (behind Python's cramjam) refuses blocks that break the format's
/// end-of-block rules (the last 5 bytes of a block are literals, the last match starts 12 bytes before its
/// end: so a block cut after any literal run fails), which lz4_flex accepts. This replays liblz4 1.10's
/// parsing decisions over a block that lz4_flex decoded, for an output buffer of `oend` bytes (the limit:
/// the largest buffer Python tries, and liblz4 accepts at least what it accepts with a smaller one).
fn lz4_block_ending(input: &[u8], oend: usize) -> Result<(), &'static str> {
    const ENDING: &str = "the block does not end with literals as the LZ4 format requires";
    const LAST_LITERALS: &str = "a match covers the last 5 bytes of the block, which must be literals";
    const LENGTH: &str = "a length runs into the end of the block";
    const OFFSET: &str = "the offset to copy is not contained in the decompressed buffer";
    let iend = input.len() as i64;
    let oend = i64::try_from(oend).unwrap_or(i64::MAX / 2);
    if iend == 0 {
        return Err(ENDING);
    }
    if oend == 0 {
        return if input == [0] { Ok(()) } else { Err(ENDING) };
    }
    let byte = |at: i64| input.get(at as usize).map(|&b| i64::from(b)).ok_or(ENDING);
    let word = |at: i64| Ok::<_, &str>(byte(at)? | byte(at + 1)? << 8);
    // liblz4's read_variable_length(): every byte read must leave `ip <= limit`.
    let more = |ip: &mut i64, limit: i64, initial_check: bool| -> Result<i64, &'static str> {
        if initial_check && *ip >= limit {
            return Err(LENGTH);
        }
        let mut n = 0;
        loop {
            let s = byte(*ip)?;
            *ip += 1;
            n += s;
            if *ip > limit {
                return Err(LENGTH);
            }
            if s != 255 {
                return Ok(n);
            }
        }
    };
    enum Step {
        Token,
        /// a literal run that may end the block
        Literals {
            token: i64,
            length: i64,
        },
        /// `ip` is past the match offset
        MatchLength {
            nibble: i64,
            offset: i64,
        },
        /// liblz4's safe_match_copy
        MatchCopy {
            length: i64,
            offset: i64,
        },
    }
    let (mut ip, mut op) = (0i64, 0i64);
    let mut fast = oend >= 64; // liblz4's fast loop, left for good at the first sequence near an end
    let mut step = Step::Token;
    loop {
        step = match step {
            Step::Token if fast => {
                let token = byte(ip)?;
                ip += 1;
                let mut length = token >> 4;
                if length == 15 {
                    length += more(&mut ip, iend - 15, true)?;
                    if op + length > oend - 32 || ip + length > iend - 32 {
                        fast = false;
                        Step::Literals { token, length }
                    } else {
                        ip += length;
                        op += length;
                        let offset = word(ip)?;
                        ip += 2;
                        Step::MatchLength { nibble: token & 15, offset }
                    }
                } else if ip <= iend - 17 {
                    ip += length; // not checked: the next token is at least 3 bytes ahead
                    op += length;
                    let offset = word(ip)?;
                    ip += 2;
                    Step::MatchLength { nibble: token & 15, offset }
                } else {
                    fast = false;
                    Step::Literals { token, length }
                }
            }
            Step::Token => {
                let token = byte(ip)?;
                ip += 1;
                let length = token >> 4;
                if length != 15 && ip < iend - 16 && op <= oend - 32 {
                    // the shortcut: literals, and a short match, copied without the end checks
                    ip += length;
                    op += length;
                    let (nibble, offset) = (token & 15, word(ip)?);
                    ip += 2;
                    if nibble != 15 && offset >= 8 && offset <= op {
                        op += nibble + 4;
                        Step::Token
                    } else {
                        Step::MatchLength { nibble, offset }
                    }
                } else if length == 15 {
                    Step::Literals { token, length: length + more(&mut ip, iend - 15, true)? }
                } else {
                    Step::Literals { token, length }
                }
            }
            Step::Literals { token, length } => {
                let cpy = op + length;
                if cpy > oend - 12 || ip + length > iend - 8 {
                    // this must be the last run of literals, and end the input exactly
                    return if ip + length == iend && cpy <= oend { Ok(()) } else { Err(ENDING) };
                }
                ip += length;
                op = cpy;
                let offset = word(ip)?;
                ip += 2;
                Step::MatchLength { nibble: token & 15, offset }
            }
            Step::MatchLength { nibble, offset } => {
                let mut length = nibble;
                if nibble == 15 {
                    length += more(&mut ip, iend - 4, false)?;
                }
                length += 4;
                if fast && op + length < oend - 64 {
                    if offset > op {
                        return Err(OFFSET);
                    }
                    op += length;
                    Step::Token
                } else {
                    fast = false;
                    Step::MatchCopy { length, offset }
                }
            }
            Step::MatchCopy { length, offset } => {
                if offset > op {
                    return Err(OFFSET);
                }
                op += length;
                if op > oend - 5 {
                    return Err(LAST_LITERALS);
                }
                Step::Token
            }
        };
    }
}

// ------------------------------------------------------------------------------------------------ SNAPPY
/// Raw snappy (not framed) starts with the uncompressed length: refuse before allocating.
fn snappy_raw(data: &[u8], limit: u64) -> Result<Vec<u8>, Error> {
    let raw_len = snap::raw::decompress_len(data).map_err(failed)?;
    if raw_len as u64 > limit {
        return Err(Error::TooLarge);
    }
    let mut buf = vec![0u8; raw_len];
    let n = snap::raw::Decoder::new().decompress(data, &mut buf).map_err(failed)?;
    buf.truncate(n);
    Ok(buf)
}

/// The first chunk of Snappy's framing format: type 0xff, length 6, "sNaPpY".
pub const SNAPPY_STREAM_ID: &[u8] = b"\xff\x06\x00\x00sNaPpY";
/// A framed chunk's uncompressed data is at most this long (the format's rule).
const SNAPPY_FRAMED_CHUNK: usize = 65536;

/// Snappy's framing format (google/snappy `framing_format.txt`): chunks of a type byte and a 3-byte length;
/// 0x00 compressed data and 0x01 uncompressed data, each after a masked CRC-32C of the uncompressed data;
/// 0xff the stream identifier (again at any point); 0x80–0xfe skipped; 0x02–0x7f reserved, unskippable. The
/// output is bounded as the raw format's: a chunk's length is read before anything is allocated for it.
fn snappy_framed(data: &[u8], limit: u64) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let (mut pos, mut index) = (0usize, 0usize);
    while pos < data.len() {
        let Some(&[kind, a, b, c]) = data.get(pos..pos + 4) else {
            return Err(failed(format!("snappy framing: chunk {index}'s header cut at byte {pos}")));
        };
        let length = u32::from_le_bytes([a, b, c, 0]) as usize;
        let Some(body) = data.get(pos + 4..pos + 4 + length) else {
            return Err(failed(format!("snappy framing: chunk {index} of {length} bytes runs past the end")));
        };
        match kind {
            0xff if body != b"sNaPpY" => return Err(failed("snappy framing: a bad stream identifier")),
            0x00 | 0x01 => {
                let Some((checksum, chunk)) = body.split_first_chunk::<4>() else {
                    return Err(failed(format!("snappy framing: chunk {index} too short for its checksum")));
                };
                let start = out.len();
                let size = if kind == 0x00 { snap::raw::decompress_len(chunk).map_err(failed)? } else { chunk.len() };
                if size > SNAPPY_FRAMED_CHUNK {
                    return Err(failed(format!("snappy framing: chunk {index} holds {size} bytes (at most 65536)")));
                }
                if (start + size) as u64 > limit {
                    return Err(Error::TooLarge);
                }
                if kind == 0x00 {
                    out.resize(start + size, 0);
                    let n = snap::raw::Decoder::new().decompress(chunk, &mut out[start..]).map_err(failed)?;
                    out.truncate(start + n);
                } else {
                    out.extend_from_slice(chunk);
                }
                if masked_crc32c(&out[start..]) != u32::from_le_bytes(*checksum) {
                    return Err(failed(format!("snappy framing: chunk {index}'s checksum does not match its data")));
                }
            }
            0x02..=0x7f => {
                return Err(failed(format!("snappy framing: chunk {index} has the reserved type {kind:#04x}")));
            }
            _ => {} // the stream identifier again, padding, skippable chunks
        }
        pos += 4 + length;
        index += 1;
    }
    Ok(out)
}

/// The framing format's checksum: CRC-32C, rotated and offset (so that a CRC of CRCs is not a CRC).
fn masked_crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data).rotate_right(15).wrapping_add(0xa282_ead8)
}

// ------------------------------------------------------------------------------------------------ ZSTD
/// The zstd frame format (several frames in a row, skippable frames), read as Python's
/// `cramjam.zstd.decompress_into` reads it: `std::io::copy` from a `zstd::stream::read::Decoder` over the input,
/// 8 KiB at a time, into a buffer of `limit + 1` bytes. The decoder stops where its output buffer is full,
/// so reading in the same steps finds the same errors at the same points.
fn zstd_frames(data: &[u8], limit: u64, exact: bool) -> Result<Vec<u8>, Error> {
    let cap = to_usize(limit).saturating_add(1);
    let mut decoder = zstd::stream::read::Decoder::new(data).map_err(failed)?;
    let mut out = Bounded::new(cap, first_size(cap, exact, data.len()));
    let mut chunk = [0u8; COPY_CHUNK];
    loop {
        match read_retrying(&mut decoder, &mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                if !out.push(&chunk[..n]) {
                    return Err(Error::TooLarge); // io::copy: "failed to write whole buffer"
                }
            }
            Err(e) => return Err(failed(e)),
        }
    }
    out.finish(limit)
}

/// `std::io::copy`'s buffer size.
const COPY_CHUNK: usize = 8 * 1024;

fn read_retrying(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

// ------------------------------------------------------------------------------------------------ buffers
/// An output buffer that never holds more than `cap` bytes: its allocation grows ×2 (from `first`) up to
/// `cap`, and it is zero-filled `CHUNK` bytes at a time, so a lying size costs address space, not memory.
struct Bounded {
    buf: Vec<u8>,
    filled: usize,
    cap: usize,
}

impl Bounded {
    fn new(cap: usize, first: usize) -> Self {
        Bounded { buf: Vec::with_capacity(first.min(cap)), filled: 0, cap }
    }

    /// Writable space after the output so far: empty once `cap` bytes are out.
    fn space(&mut self) -> &mut [u8] {
        if self.filled == self.buf.len() && self.buf.len() < self.cap {
            let want = self.cap.min(self.filled.saturating_add(CHUNK));
            if want > self.buf.capacity() {
                let grown = self.cap.min(want.max(self.buf.capacity().saturating_mul(2)));
                self.buf.reserve_exact(grown - self.buf.len());
            }
            self.buf.resize(want, 0);
        }
        &mut self.buf[self.filled..]
    }

    fn advance(&mut self, n: usize) {
        self.filled += n;
    }

    /// Append `bytes`, or refuse them all when they would take it past `cap`.
    fn push(&mut self, bytes: &[u8]) -> bool {
        if bytes.len() > self.cap - self.filled {
            return false;
        }
        let want = self.filled + bytes.len();
        if want > self.buf.capacity() {
            let grown = self.cap.min(want.max(self.buf.capacity().saturating_mul(2)));
            self.buf.reserve_exact(grown - self.buf.len());
        }
        self.buf.truncate(self.filled);
        self.buf.extend_from_slice(bytes);
        self.filled = want;
        true
    }

    /// The output, or `TooLarge` when it went past `limit`.
    fn finish(mut self, limit: u64) -> Result<Vec<u8>, Error> {
        if self.filled as u64 > limit {
            return Err(Error::TooLarge);
        }
        self.buf.truncate(self.filled);
        Ok(self.buf)
    }
}

/// The first line of an error message, at most 200 characters.
fn one_line(message: &str) -> String {
    // str.splitlines() boundaries
    let is_break = |c: char| {
        matches!(c, '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}')
    };
    if message.is_empty() {
        return "error".to_owned();
    }
    message.split(is_break).next().unwrap_or("").chars().take(200).collect()
}

/// SHA-256 (FIPS 180-4) by the crate's compression function, padded here on the stack: a message record's
/// payload is mostly one or two blocks, where the `Digest` API's buffering cost as much as the hashing.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const INITIAL: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut state = INITIAL;
    let (whole, rest) = data.as_chunks::<64>();
    sha2::block_api::compress256(&mut state, whole);
    // the rest, 0x80, zeros, and the length in bits: one block, or two when the length does not fit
    let mut tail = [[0u8; 64]; 2];
    let flat = tail.as_flattened_mut();
    flat[..rest.len()].copy_from_slice(rest);
    flat[rest.len()] = 0x80;
    let blocks = if rest.len() < 56 { 1 } else { 2 };
    flat[blocks * 64 - 8..blocks * 64].copy_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    sha2::block_api::compress256(&mut state, &tail[..blocks]);
    let mut digest = [0u8; 32];
    for (out, word) in digest.chunks_exact_mut(4).zip(state) {
        out.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const MAX: u64 = 64 * 1024 * 1024; // Options.max_decompressed's default
    const CODECS: [(i64, &str); 4] = [(LZ4, "LZ4"), (ZLIB, "ZLIB"), (ZSTD, "ZSTD"), (SNAPPY, "SNAPPY")];

    fn compress(codec: i64, data: &[u8]) -> Vec<u8> {
        match codec {
            LZ4 => lz4_flex::block::compress(data),
            ZLIB => {
                let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            ZSTD => zstd::bulk::compress(data, 3).unwrap(),
            SNAPPY => snap::raw::Encoder::new().compress_vec(data).unwrap(),
            _ => unreachable!(),
        }
    }

    /// What Pulsar's Java client writes: `Deflater.deflate(.., SYNC_FLUSH)` per chunk, and no final block.
    fn deflate_sync_flushed(chunks: &[&[u8]]) -> Vec<u8> {
        let mut c = flate2::Compress::new(flate2::Compression::default(), true);
        let mut out = Vec::with_capacity(1 << 20);
        for chunk in chunks {
            let before = c.total_in();
            c.compress_vec(chunk, &mut out, flate2::FlushCompress::Sync).unwrap();
            assert_eq!(c.total_in() - before, chunk.len() as u64, "output buffer too small for the test");
        }
        out
    }

    fn text(n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 64);
        let mut i = 0u64;
        while out.len() < n {
            out.extend_from_slice(format!("pulsar message {i} payload {}\n", i * 7919 % 1013).as_bytes());
            i += 1;
        }
        out.truncate(n);
        out
    }

    fn noise(n: usize, mut seed: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    }

    fn ok(result: &Decompressed<'_>) -> Vec<u8> {
        assert_eq!(result.problem, None);
        result.data.as_deref().expect("data").to_vec()
    }

    fn problem(result: Decompressed<'_>) -> Problem {
        assert!(result.data.is_none(), "data kept with {:?}", result.problem);
        result.problem.expect("a problem")
    }

    fn failed_message(result: Decompressed<'_>) -> String {
        match problem(result) {
            Problem::Failed { error, .. } => error,
            other => panic!("not failed: {other:?}"),
        }
    }

    #[test]
    fn codec_names_are_pulsars_compression_types() {
        let names: Vec<_> = (-1..=5).map(codec_name).collect();
        assert_eq!(names, [None, Some("NONE"), Some("LZ4"), Some("ZLIB"), Some("ZSTD"), Some("SNAPPY"), None]);
    }

    #[test]
    fn problem_cases_and_their_params() {
        let cases = [
            Problem::UnknownCodec { codec: 7 },
            Problem::OverLimit { codec: "LZ4", declared: 2, limit: 1 },
            Problem::BombDeclared { codec: "LZ4", declared: 1 },
            Problem::BombLimit { codec: "LZ4", limit: 1 },
            Problem::Failed { codec: "LZ4", error: "x".into() },
            Problem::SizeMismatch { codec: "LZ4", declared: 1, actual: 2 },
        ];
        let names: Vec<_> = cases.iter().map(Problem::case).collect();
        assert_eq!(names, ["unknown_codec", "over_limit", "bomb_declared", "bomb_limit", "failed", "size_mismatch"]);
    }

    #[test]
    fn unknown_codec_is_reported_and_not_decompressed() {
        for codec in [5, 7, -1, i64::MAX] {
            assert_eq!(problem(decompress(codec, b"zzz", Some(3), MAX)), Problem::UnknownCodec { codec });
        }
    }

    #[test]
    fn none_returns_the_data_itself_whatever_the_sizes() {
        let data = b"plain payload".as_slice();
        for declared in [None, Some(0), Some(13), Some(MAX + 1)] {
            let result = decompress(NONE, data, declared, 4);
            assert_eq!(result.problem, None);
            assert!(matches!(result.data, Some(Cow::Borrowed(d)) if std::ptr::eq(d, data)));
        }
    }

    #[test]
    fn declared_over_the_limit_is_refused_without_looking_at_the_data() {
        for (codec, name) in CODECS {
            let result = decompress(codec, b"\xff not even compressed", Some(1001), 1000);
            assert_eq!(problem(result), Problem::OverLimit { codec: name, declared: 1001, limit: 1000 });
        }
    }

    #[test]
    fn round_trip_every_codec_with_and_without_declared_size() {
        let inputs = [Vec::new(), b"a".to_vec(), text(5000), noise(3000, 7), vec![0; 300_000], text(600_000)];
        for (codec, _) in CODECS {
            for input in &inputs {
                let blob = compress(codec, input);
                let declared = input.len() as u64;
                assert_eq!(ok(&decompress(codec, &blob, Some(declared), MAX)), *input, "{codec} declared");
                assert_eq!(ok(&decompress(codec, &blob, None, MAX)), *input, "{codec} undeclared");
                // the limit is inclusive
                assert_eq!(ok(&decompress(codec, &blob, Some(declared), declared)), *input, "{codec} at max");
                assert_eq!(ok(&decompress(codec, &blob, None, declared)), *input, "{codec} at limit");
            }
        }
    }

    #[test]
    fn zlib_accepts_the_java_sync_flushed_stream_without_final_block() {
        let body = text(200_000);
        let (a, b) = body.split_at(70_000);
        let blob = deflate_sync_flushed(&[a, b]);
        assert_eq!(&blob[blob.len() - 4..], b"\x00\x00\xff\xff", "ends with a sync flush marker");
        assert_eq!(ok(&decompress(ZLIB, &blob, Some(body.len() as u64), MAX)), body);
        assert_eq!(ok(&decompress(ZLIB, &blob, None, MAX)), body);
        // and the Java-style stream still counts against the limits
        let declared = body.len() as u64 - 1;
        assert_eq!(
            problem(decompress(ZLIB, &blob, Some(declared), MAX)),
            Problem::BombDeclared { codec: "ZLIB", declared }
        );
    }

    #[test]
    fn zlib_ignores_what_follows_the_end_of_the_stream() {
        let mut blob = compress(ZLIB, b"abc");
        blob.extend_from_slice(b"trailing garbage");
        assert_eq!(ok(&decompress(ZLIB, &blob, Some(3), MAX)), b"abc");
    }

    #[test]
    fn zlib_cut_stream_keeps_what_inflated_like_decompressobj() {
        let body = text(50_000);
        let blob = compress(ZLIB, &body);
        let result = decompress(ZLIB, &blob[..blob.len() / 2], Some(body.len() as u64), MAX);
        let data = result.data.expect("what inflated is kept");
        assert!(data.len() < body.len() && body.starts_with(&data));
        assert_eq!(
            result.problem,
            Some(Problem::SizeMismatch { codec: "ZLIB", declared: body.len() as u64, actual: data.len() as u64 })
        );
        assert_eq!(ok(&decompress(ZLIB, b"", Some(0), MAX)), b"", "no input, no output, no error");
    }

    #[test]
    fn bomb_with_a_declared_size() {
        let zeros = vec![0u8; 4 << 20];
        for (codec, name) in CODECS {
            let blob = compress(codec, &zeros);
            assert!(blob.len() < 1 << 20, "{name}: a small input");
            let result = decompress(codec, &blob, Some(1000), MAX);
            assert_eq!(problem(result), Problem::BombDeclared { codec: name, declared: 1000 }, "{name}");
        }
    }

    #[test]
    fn bomb_without_a_declared_size() {
        let zeros = vec![0u8; 4 << 20];
        for (codec, name) in CODECS {
            let blob = compress(codec, &zeros);
            for max in [1 << 20, (4 << 20) - 1] {
                let result = decompress(codec, &blob, None, max);
                assert_eq!(problem(result), Problem::BombLimit { codec: name, limit: max }, "{name}");
            }
            assert_eq!(ok(&decompress(codec, &blob, None, 4 << 20)).len(), 4 << 20, "{name}: at the limit");
        }
    }

    #[test]
    fn declared_size_too_small_is_a_bomb() {
        let body = text(20_000);
        for (codec, name) in CODECS {
            let blob = compress(codec, &body);
            for declared in [0, 1, body.len() as u64 - 100, body.len() as u64 - 1] {
                let result = decompress(codec, &blob, Some(declared), MAX);
                assert_eq!(problem(result), Problem::BombDeclared { codec: name, declared }, "{name}");
            }
        }
    }

    #[test]
    fn declared_size_too_large_keeps_the_data_with_a_size_mismatch() {
        let body = text(20_000);
        for (codec, name) in CODECS {
            let blob = compress(codec, &body);
            for extra in [1, 100, 1 << 20] {
                let declared = body.len() as u64 + extra;
                let result = decompress(codec, &blob, Some(declared), MAX);
                assert_eq!(result.data.as_deref(), Some(body.as_slice()), "{name}");
                let actual = body.len() as u64;
                assert_eq!(result.problem, Some(Problem::SizeMismatch { codec: name, declared, actual }), "{name}");
            }
        }
    }

    #[test]
    fn corrupt_input_fails_with_the_library_message() {
        let garbage: Vec<u8> = (0..=255u8).cycle().take(512).collect();
        let expected = [
            (LZ4, "the offset to copy is not contained in the decompressed buffer"),
            (ZLIB, "Error -3 while decompressing data: incorrect header check"),
            (ZSTD, "Unknown frame descriptor"),
            (SNAPPY, "snappy: corrupt input (expected valid offset but got offset 2; dst position: 0)"),
        ];
        for (codec, message) in expected {
            assert_eq!(failed_message(decompress(codec, &garbage, Some(1000), MAX)), message, "{codec}");
            assert_eq!(failed_message(decompress(codec, &garbage, None, MAX)), message, "{codec}");
        }
        let empty = [
            (LZ4, "expected another byte, found none"),
            (ZSTD, "incomplete frame"),
            (SNAPPY, "snappy: corrupt input (empty)"),
        ];
        for (codec, message) in empty {
            assert_eq!(failed_message(decompress(codec, b"", Some(0), MAX)), message, "{codec}");
        }
    }

    #[test]
    fn corrupt_zlib_streams_name_the_fault_as_zlib_does() {
        let body = text(20_000);
        let blob = compress(ZLIB, &body);
        let mut bad_check = blob.clone();
        *bad_check.last_mut().unwrap() ^= 1;
        assert_eq!(
            failed_message(decompress(ZLIB, &bad_check, None, MAX)),
            "Error -3 while decompressing data: incorrect data check"
        );
        // every flipped byte of a real stream either fails with zlib's message or inflates something; a
        // distance reaching before the start of the stream is an error (miniz_oxide would read zeros there)
        let mut messages = std::collections::BTreeSet::new();
        for i in (0..blob.len()).step_by(3) {
            let mut flipped = blob.clone();
            flipped[i] ^= 0x55;
            if let Some(Problem::Failed { error, .. }) = decompress(ZLIB, &flipped, None, MAX).problem {
                messages.insert(error);
            }
        }
        for error in &messages {
            assert!(
                error.starts_with("Error -3 while decompressing data: ") || error == "Error 2 while decompressing data"
            );
            assert!(!error.ends_with(FAST_LOOP_MESSAGE) && !error.ends_with("invalid input data"), "{error}");
        }
        assert!(messages.contains("Error -3 while decompressing data: invalid distance too far back"));
    }

    #[test]
    fn corrupt_input_never_panics_nor_escapes_the_limit() {
        let body = text(30_000);
        for (codec, _) in CODECS {
            let blob = compress(codec, &body);
            for seed in 1..200u64 {
                let mut bad = blob.clone();
                let at = (seed as usize * 7919) % bad.len();
                bad[at] ^= (seed as u8) | 1;
                let cut = &bad[..bad.len() - (seed as usize % 5)];
                for declared in [None, Some(body.len() as u64)] {
                    let result = decompress(codec, cut, declared, 40_000);
                    if let Some(data) = &result.data {
                        assert!(data.len() <= declared.unwrap_or(40_000) as usize);
                    }
                    if let Some(Problem::Failed { error, .. }) = &result.problem {
                        assert!(error.chars().count() <= 200 && !error.contains('\n'));
                    }
                }
            }
        }
    }

    #[test]
    fn truncated_input_never_gives_the_original_back() {
        let body = text(20_000);
        for (codec, name) in CODECS {
            let blob = compress(codec, &body);
            let result = decompress(codec, &blob[..blob.len() / 2], Some(body.len() as u64), MAX);
            assert!(result.problem.is_some(), "{name}");
            assert_ne!(result.data.as_deref(), Some(body.as_slice()), "{name}");
        }
    }

    #[test]
    fn lz4_block_cut_after_a_literal_run_fails_as_with_liblz4() {
        // A capture's LZ4 block: lz4_flex alone accepts 306 of its prefixes (every cut just after a literal
        // run); liblz4 1.10's LZ4_decompress_safe accepts only these 7, with these sizes.
        let block = include_bytes!("../tests/vectors/lz4_1.bin");
        let accepted: Vec<(usize, usize)> = (1..=block.len())
            .filter_map(|cut| decompress(LZ4, &block[..cut], None, MAX).data.map(|d| (cut, d.len())))
            .collect();
        assert_eq!(accepted, [(102, 100), (119, 271), (144, 504), (162, 737), (180, 970), (198, 1203), (1456, 23300)]);
        assert_eq!(
            failed_message(decompress(LZ4, &block[..106], Some(23300), MAX)),
            "the block does not end with literals as the LZ4 format requires"
        );
    }

    #[test]
    fn lz4_end_of_block_rules_follow_the_output_limit() {
        // 20 literals then a 40-byte match: the match ends 5 bytes before the end only if the block says so
        let mut block = vec![0xf0 | 0x0f, 20 - 15];
        block.extend_from_slice(&text(20));
        block.extend_from_slice(&[20, 0, 40 - 19]); // offset 20, match length 40
        block.extend_from_slice(&[0x50]);
        block.extend_from_slice(b"tail!");
        let body = decompress(LZ4, &block, None, MAX).data.expect("conformant").into_owned();
        assert_eq!(body.len(), 65);
        assert_eq!(ok(&decompress(LZ4, &block, Some(65), MAX)), body);
        // with 4 final literals, the match covers the last 5 bytes of a 64-byte block: liblz4 refuses that in
        // a buffer of 64 bytes, not in a larger one
        let mut short_tail = block[..block.len() - 6].to_vec();
        short_tail.extend_from_slice(&[0x40, b't', b'a', b'i', b'!']);
        assert_eq!(ok(&decompress(LZ4, &short_tail, None, MAX)).len(), 64);
        assert_eq!(
            failed_message(decompress(LZ4, &short_tail, Some(64), MAX)),
            "a match covers the last 5 bytes of the block, which must be literals"
        );
        let result = decompress(LZ4, &short_tail, Some(70), MAX);
        assert_eq!(result.problem, Some(Problem::SizeMismatch { codec: "LZ4", declared: 70, actual: 64 }));
        // with a single final literal, the first literal run ends within 8 bytes of the end of the input
        let mut shorter = block[..block.len() - 6].to_vec();
        shorter.extend_from_slice(&[0x10, b'!']);
        assert_eq!(
            failed_message(decompress(LZ4, &shorter, None, MAX)),
            "the block does not end with literals as the LZ4 format requires"
        );
        // an empty block is a lone zero token; the output size 0 allows nothing else
        assert_eq!(ok(&decompress(LZ4, &[0x00], Some(0), MAX)), b"");
        assert!(matches!(problem(decompress(LZ4, &[0x01], Some(0), MAX)), Problem::Failed { .. }));
        assert_eq!(ok(&decompress(LZ4, &[0x01], None, MAX)), b"");
        // offset 0 is invalid (the format says so; liblz4 copies garbage)
        let zero_offset = [0x10, b'a', 0x00, 0x00, 0x50, b'a', b'b', b'c', b'd', b'e'];
        assert_eq!(failed_message(decompress(LZ4, &zero_offset, None, MAX)), "0 is not a valid match offset");
    }

    #[test]
    fn lz4_grows_towards_the_limit_without_a_declared_size() {
        let body = text(4096).repeat(768); // 3 MiB: beyond FIRST_GUESS and 4× the input
        let blob = compress(LZ4, &body);
        assert!(blob.len() * 4 < body.len());
        assert_eq!(ok(&decompress(LZ4, &blob, None, MAX)), body);
        assert_eq!(
            problem(decompress(LZ4, &blob, None, (3 << 20) - 1)),
            Problem::BombLimit { codec: "LZ4", limit: (3 << 20) - 1 }
        );
    }

    #[test]
    fn snappy_refuses_a_huge_header_before_allocating() {
        let lying = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]; // claims 4 GiB - 1
        assert_eq!(
            problem(decompress(SNAPPY, &lying, None, 1000)),
            Problem::BombLimit { codec: "SNAPPY", limit: 1000 }
        );
        assert_eq!(
            problem(decompress(SNAPPY, &lying, Some(500), 1000)),
            Problem::BombDeclared { codec: "SNAPPY", declared: 500 }
        );
        let mut short = compress(SNAPPY, b"x".repeat(100).as_slice());
        short.extend_from_slice(b"extra");
        assert!(failed_message(decompress(SNAPPY, &short, None, 1000)).starts_with("snappy: corrupt input"));
    }

    #[test]
    fn zstd_reads_every_frame_and_skips_skippable_ones() {
        let frame = compress(ZSTD, b"hello ".repeat(10).as_slice());
        let skippable = [&[0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0][..], b"abcd"].concat();
        assert_eq!(ok(&decompress(ZSTD, &[frame.clone(), frame.clone()].concat(), None, 1000)), b"hello ".repeat(20));
        assert_eq!(ok(&decompress(ZSTD, &[skippable, frame.clone()].concat(), None, 1000)), b"hello ".repeat(10));
        let trailing = [frame.clone(), b"garbage!".to_vec()].concat();
        assert_eq!(failed_message(decompress(ZSTD, &trailing, None, 1000)), "Unknown frame descriptor");
        assert_eq!(failed_message(decompress(ZSTD, &frame[..frame.len() - 3], None, 1000)), "incomplete frame");
    }

    #[test]
    fn zstd_and_zlib_stop_one_byte_past_the_limit() {
        let body = text(1 << 20);
        for codec in [ZLIB, ZSTD] {
            let blob = compress(codec, &body);
            let limit = body.len() as u64 - 1;
            assert!(matches!(problem(decompress(codec, &blob, None, limit)), Problem::BombLimit { .. }));
            let mut out = Bounded::new(limit as usize + 1, 1024);
            loop {
                let n = out.space().len();
                if n == 0 {
                    break;
                }
                out.advance(n);
            }
            assert!(out.buf.capacity() <= limit as usize + 1, "the buffer never outgrows limit + 1");
        }
    }

    /// Payloads from captures/03_compression_*.pcap (pulsar-client 3.13, C++), as the pure-Python codecs decompressed
    /// them: (name, block, declared uncompressed_size, sha256 of the output).
    const CAPTURED: [(&str, &[u8], u64, &str); 8] = [
        (
            "lz4_0",
            include_bytes!("../tests/vectors/lz4_0.bin"),
            4096,
            "1dcc9e701a19c18ced279dd714c9007c796938c95c1b011a4042b5e279442582",
        ),
        (
            "lz4_1",
            include_bytes!("../tests/vectors/lz4_1.bin"),
            23300,
            "604962198b4d90468127dfc20aa021334e2db4b8b92d385298b8392612da3696",
        ),
        (
            "zlib_0",
            include_bytes!("../tests/vectors/zlib_0.bin"),
            4096,
            "acd2910bef046f5c69e0448ddc9627582e5aa780fe3e9158c424af1d0b6f6b91",
        ),
        (
            "zlib_1",
            include_bytes!("../tests/vectors/zlib_1.bin"),
            23500,
            "40688ac80585c5e8aa65a3e70f35074134c8653aafff7e3580dc85a19ce168fa",
        ),
        (
            "zstd_0",
            include_bytes!("../tests/vectors/zstd_0.bin"),
            4096,
            "06fe849492bd8524827e237cd3c004f3eafa38debb750e070bd38f6ed44e39f2",
        ),
        (
            "zstd_1",
            include_bytes!("../tests/vectors/zstd_1.bin"),
            23500,
            "d98c2e469335ee11e2723008a0c9f1434cc7f33560cb245ffc29c19a29cc993b",
        ),
        (
            "snappy_0",
            include_bytes!("../tests/vectors/snappy_0.bin"),
            4096,
            "7e6bfde45bfad95200e85e39d64fb6e3f831016c119c458b8c590ef942be03a4",
        ),
        (
            "snappy_1",
            include_bytes!("../tests/vectors/snappy_1.bin"),
            23900,
            "763442a8c4dd59bf9d5483c4bca06bde3dab0208ddb7d757c1257e7be8dbfcf0",
        ),
    ];

    fn sha256_hex(data: &[u8]) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn captured_payloads_decompress_as_in_python() {
        for (name, block, declared, sha) in CAPTURED {
            let codec = match name.split('_').next().unwrap() {
                "lz4" => LZ4,
                "zlib" => ZLIB,
                "zstd" => ZSTD,
                _ => SNAPPY,
            };
            let out = ok(&decompress(codec, block, Some(declared), MAX));
            assert_eq!((out.len() as u64, sha256_hex(&out).as_str()), (declared, sha), "{name}");
            assert_eq!(ok(&decompress(codec, block, None, MAX)), out, "{name} without uncompressed_size");
            let less = declared - 1;
            assert_eq!(problem(decompress(codec, block, Some(less), MAX)).case(), "bomb_declared", "{name}");
        }
    }

    /// `data` in Snappy's framing format, as pulsar-rs writes it (the snap crate's frame encoder).
    fn framed(data: &[u8]) -> Vec<u8> {
        let mut encoder = snap::write::FrameEncoder::new(Vec::new());
        std::io::Write::write_all(&mut encoder, data).unwrap();
        encoder.into_inner().unwrap()
    }

    #[test]
    fn snappy_framing_is_recognised_decoded_and_said() {
        let data = [text(150_000), noise(20_000, 7)].concat(); // several chunks, compressed and not
        let payload = framed(&data);
        assert!(payload.starts_with(SNAPPY_STREAM_ID));
        for declared in [Some(data.len() as u64), None] {
            let result = decompress(SNAPPY, &payload, declared, MAX);
            assert!(result.snappy_framed);
            assert_eq!((ok(&result), result.problem), (data.clone(), None));
        }
        let raw = compress(SNAPPY, &data);
        assert!(!decompress(SNAPPY, &raw, None, MAX).snappy_framed, "the raw block format is Pulsar's own");
        assert!(!decompress(LZ4, &compress(LZ4, &data), None, MAX).snappy_framed);
    }

    #[test]
    fn snappy_framing_checks_every_chunk_and_its_bounds() {
        let data = text(150_000);
        let payload = framed(&data);
        // a chunk's checksum (the first data chunk's, after the 10-byte stream identifier and its header)
        let mut bad = payload.clone();
        bad[14] ^= 1;
        let message = failed_message(decompress(SNAPPY, &bad, None, MAX));
        assert!(message.contains("checksum"), "{message}");
        // cut in a chunk
        let message = failed_message(decompress(SNAPPY, &payload[..payload.len() - 3], None, MAX));
        assert!(message.contains("runs past the end"), "{message}");
        // a reserved chunk type
        let reserved = [SNAPPY_STREAM_ID, &[0x02, 1, 0, 0, 0]].concat();
        assert!(failed_message(decompress(SNAPPY, &reserved, None, MAX)).contains("reserved"));
        // skippable chunks and padding are skipped
        let padded = [&payload[..10], &[0xfe, 2, 0, 0, 9, 9], &[0x80, 1, 0, 0, 9], &payload[10..]].concat();
        assert_eq!(ok(&decompress(SNAPPY, &padded, None, MAX)), data);
        // the limits hold as for the raw format: the declared size, then the cap
        let less = Some(data.len() as u64 - 1);
        assert_eq!(problem(decompress(SNAPPY, &payload, less, MAX)).case(), "bomb_declared");
        assert_eq!(problem(decompress(SNAPPY, &payload, None, 100_000)).case(), "bomb_limit");
        let over = decompress(SNAPPY, &payload, less, MAX);
        assert!(over.snappy_framed, "said framed even when refused");
    }

    #[test]
    fn one_line_is_the_first_line_cut_to_200_characters() {
        assert_eq!(one_line("first\nsecond"), "first");
        assert_eq!(one_line("a\rb"), "a");
        assert_eq!(one_line("x\u{2028}y"), "x");
        assert_eq!(one_line(&"é".repeat(300)), "é".repeat(200));
        assert_eq!(one_line(""), "error");
    }
}
