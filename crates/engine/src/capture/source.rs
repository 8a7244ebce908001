//! Where a capture's bytes come from: a file opened here, a Python file object (the binding's ``capture.rs``),
//! and gzip over either — multi-member, with the behaviour and the error texts of Python's ``gzip`` module (what the
//! reader says when a compressed capture is cut or corrupt is what it said when Python read it).

use std::fs::File;
use std::io::{self, Read};

use flate2::{Crc, Decompress, FlushDecompress, Status};

/// An error of another world (a Python exception), carried through the reader untouched: the reader links
/// no Python, so that its tests run without it.
pub type Foreign = Box<dyn std::any::Any + Send + Sync>;

/// Why a read failed.
pub enum SourceError {
    /// An I/O error of a file opened here.
    Io(io::Error),
    /// An exception of a Python file object's read (the binding decides which end the capture and which
    /// propagate).
    Foreign(Foreign),
    /// The gzip stream is cut or corrupt: the text Python gave, ``Type: message``.
    Gzip(String),
}

/// A byte stream read in pieces.
pub trait Source: Send + Sync {
    /// Append at most about `max` bytes to `out` (one read: fewer when fewer are there yet); 0 at the end.
    fn read(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, SourceError>;

    /// Read again from `offset` (counted from the first byte this source gave), where the source can: the
    /// next `read` is not affected. None when it cannot.
    fn read_again(&mut self, _offset: u64, _max: usize, _out: &mut Vec<u8>) -> Option<usize> {
        None
    }
}

/// A file opened by the core.
pub struct FileSource(pub File);

impl Source for FileSource {
    fn read(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, SourceError> {
        read_into(&mut self.0, max, out).map_err(SourceError::Io)
    }

    fn read_again(&mut self, offset: u64, max: usize, out: &mut Vec<u8>) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        let len = out.len();
        out.resize(len + max, 0);
        let n = self.0.read_at(&mut out[len..], offset).unwrap_or(0);
        out.truncate(len + n);
        Some(n)
    }
}

/// Bytes in memory (the core's own tests).
pub struct SliceSource {
    pub data: Vec<u8>,
    pub pos: usize,
    /// At most this many bytes per read (short reads on purpose), 0: no limit.
    pub piece: usize,
}

impl Source for SliceSource {
    fn read_again(&mut self, offset: u64, max: usize, out: &mut Vec<u8>) -> Option<usize> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(self.data.len());
        let end = self.data.len().min(start.saturating_add(max));
        out.extend_from_slice(&self.data[start..end]);
        Some(end - start)
    }

    fn read(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, SourceError> {
        let piece = if self.piece == 0 { max } else { max.min(self.piece) };
        let end = self.data.len().min(self.pos.saturating_add(piece));
        let n = end - self.pos;
        out.reserve_exact(n);
        out.extend_from_slice(&self.data[self.pos..end]);
        self.pos = end;
        Ok(n)
    }
}

/// One `read` of at most `max` bytes appended to `out`, retried when interrupted by a signal.
fn read_into(reader: &mut impl Read, max: usize, out: &mut Vec<u8>) -> io::Result<usize> {
    let len = out.len();
    out.reserve_exact(max); // what is read decides the size, not the doubling of a vector
    out.resize(len + max, 0);
    loop {
        match reader.read(&mut out[len..]) {
            Ok(n) => {
                out.truncate(len + n);
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.truncate(len);
                return Err(e);
            }
        }
    }
}

// -------------------------------------------------------------------------------------------------- gzip
/// Python's gzip reads the compressed stream 8 KiB at a time (io.DEFAULT_BUFFER_SIZE): a corrupt stream loses
/// the output of the piece in which the error is found, as it did there.
const INPUT_PIECE: usize = 8192;
/// Bytes asked of the underlying source at a time.
const SOURCE_READ: usize = 1 << 20;
/// Output produced per inflate call (the limit of one read is reached in steps, never allocated at once).
const OUTPUT_STEP: usize = 256 << 10;

const EOF_MESSAGE: &str = "EOFError: Compressed file ended before the end-of-stream marker was reached";

enum Member {
    /// A gzip header is expected (or the end of the stream).
    Start,
    /// Inside a member's deflate data.
    Data,
    /// The member's deflate data ended: its trailer is next.
    End,
}

/// gzip (RFC 1952) over another source, members one after the other, as Python's ``gzip.GzipFile`` reads it:
/// each ``read`` is one of its ``read1`` calls (one inflate call over at most 8 KiB of input), the CRC and
/// length checked at each member's end, zero padding between members skipped.
pub struct Gzip<S: Source> {
    inner: S,
    inner_done: bool,
    /// Compressed bytes read from `inner` and not used yet, from `input_pos`.
    input: Vec<u8>,
    input_pos: usize,
    /// Bytes `inner` gave so far; where the current member's deflate data starts (both as offsets in `inner`).
    inner_total: u64,
    member_start: u64,
    inflater: Decompress,
    member: Member,
    crc: Crc,
}

impl<S: Source> Gzip<S> {
    /// `read_ahead`: bytes already read from `inner` (the start of the stream).
    pub fn new(inner: S, read_ahead: Vec<u8>) -> Gzip<S> {
        let inner_total = read_ahead.len() as u64;
        Gzip {
            inner,
            inner_done: false,
            input: read_ahead,
            input_pos: 0,
            inner_total,
            member_start: 0,
            inflater: Decompress::new(false),
            member: Member::Start,
            crc: Crc::new(),
        }
    }

    fn available(&self) -> usize {
        self.input.len() - self.input_pos
    }

    /// The offset in `inner` of the next input byte.
    fn input_offset(&self) -> u64 {
        self.inner_total - self.available() as u64
    }

    /// Make `n` input bytes available, or all there are until the end.
    fn want(&mut self, n: usize) -> Result<(), SourceError> {
        while self.available() < n && !self.inner_done {
            if self.input_pos > 0 {
                self.input.drain(..self.input_pos);
                self.input_pos = 0;
            }
            match self.inner.read(SOURCE_READ.max(n), &mut self.input)? {
                0 => self.inner_done = true,
                got => self.inner_total += got as u64,
            }
        }
        Ok(())
    }

    /// Up to `n` input bytes (fewer only at the end), consumed.
    fn take(&mut self, n: usize) -> Result<&[u8], SourceError> {
        self.want(n)?;
        let start = self.input_pos;
        self.input_pos += n.min(self.available());
        Ok(&self.input[start..self.input_pos])
    }

    /// Exactly `n` input bytes, or Python's EOFError.
    fn take_exact(&mut self, n: usize) -> Result<&[u8], SourceError> {
        self.want(n)?;
        if self.available() < n {
            self.input_pos = self.input.len();
            return Err(SourceError::Gzip(EOF_MESSAGE.to_owned()));
        }
        self.take(n)
    }

    /// A member's header; false at the end of the stream.
    fn header(&mut self) -> Result<bool, SourceError> {
        let magic = self.take(2)?;
        if magic.is_empty() {
            return Ok(false);
        }
        if magic != [0x1f, 0x8b] {
            return Err(SourceError::Gzip(format!("BadGzipFile: Not a gzipped file ({})", python_bytes_repr(magic))));
        }
        let fixed = self.take_exact(8)?;
        let (method, flags) = (fixed[0], fixed[1]);
        if method != 8 {
            return Err(SourceError::Gzip("BadGzipFile: Unknown compression method".to_owned()));
        }
        if flags & 4 != 0 {
            let extra = self.take_exact(2)?;
            let length = u16::from_le_bytes([extra[0], extra[1]]) as usize;
            self.take_exact(length)?;
        }
        for flag in [8u8, 16] {
            // a file name, a comment: up to a zero byte (or the end)
            if flags & flag != 0 {
                while let [byte] = self.take(1)? {
                    if *byte == 0 {
                        break;
                    }
                }
            }
        }
        if flags & 2 != 0 {
            self.take_exact(2)?;
        }
        Ok(true)
    }

    /// A member's trailer checked, then the zero bytes that may pad it skipped.
    fn trailer(&mut self) -> Result<(), SourceError> {
        let trailer = self.take_exact(8)?;
        let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
        if crc != self.crc.sum() {
            return Err(SourceError::Gzip(format!("BadGzipFile: CRC check failed {crc:#x} != {:#x}", self.crc.sum())));
        }
        if size != self.crc.amount() {
            return Err(SourceError::Gzip("BadGzipFile: Incorrect length of data produced".to_owned()));
        }
        loop {
            self.want(1)?;
            match self.input.get(self.input_pos) {
                Some(0) => self.input_pos += 1,
                _ => return Ok(()),
            }
        }
    }

    /// zlib-rs names an error its fast loop finds only as a bad state (`codecs::FAST_LOOP_MESSAGE`); zlib,
    /// which Python uses, names it. Decode the member again from its start, where the source can be read
    /// again: at full speed up to `call_start` (the start of the inflate call that failed), then 8 bytes at a
    /// time, which keeps zlib-rs in its slow loop, where it names the error as zlib does.
    fn slow_error(&mut self, call_start: u64) -> Option<String> {
        let mut inflater = Decompress::new(false);
        let mut scratch = vec![0u8; OUTPUT_STEP];
        let mut chunk = Vec::new();
        let mut offset = self.member_start;
        loop {
            chunk.clear();
            let fast = offset < call_start;
            let want = if fast { (call_start - offset).min(SOURCE_READ as u64) as usize } else { SOURCE_READ };
            let got = self.inner.read_again(offset, want, &mut chunk)?;
            if got == 0 {
                return None;
            }
            let piece = if fast { got } else { 8 };
            let mut pos = 0;
            while pos < got {
                let end = got.min(pos + piece);
                let (in_before, out_before) = (inflater.total_in(), inflater.total_out());
                match inflater.decompress(&chunk[pos..end], &mut scratch, FlushDecompress::Sync) {
                    Err(error) => return Some(crate::codecs::zlib_error_text(&error)),
                    Ok(Status::StreamEnd) => return None,
                    Ok(_) if inflater.total_in() == in_before && inflater.total_out() == out_before => return None,
                    Ok(_) => pos += (inflater.total_in() - in_before) as usize,
                }
            }
            offset += got as u64;
        }
    }

    /// One inflate call over at most 8 KiB of input, at most `max` bytes out: (bytes out, input given).
    fn inflate(&mut self, max: usize, out: &mut Vec<u8>) -> Result<(usize, usize), SourceError> {
        self.want(INPUT_PIECE)?;
        let end = self.input.len().min(self.input_pos + INPUT_PIECE);
        let given = end - self.input_pos;
        let start_len = out.len();
        let call_start = self.input_offset();
        let mut pos = self.input_pos;
        loop {
            let space = (max - (out.len() - start_len)).min(OUTPUT_STEP);
            if space == 0 {
                break;
            }
            let len = out.len();
            out.reserve_exact(space);
            out.resize(len + space, 0);
            let (in_before, out_before) = (self.inflater.total_in(), self.inflater.total_out());
            let status = self.inflater.decompress(&self.input[pos..end], &mut out[len..], FlushDecompress::Sync);
            let produced = (self.inflater.total_out() - out_before) as usize;
            out.truncate(len + produced);
            let status = match status {
                Ok(status) => status,
                Err(error) => {
                    out.truncate(start_len);
                    self.input_pos = end;
                    let text = match error.message() {
                        Some(crate::codecs::FAST_LOOP_MESSAGE) => self.slow_error(call_start),
                        _ => None,
                    };
                    let text = text.unwrap_or_else(|| crate::codecs::zlib_error_text(&error));
                    return Err(SourceError::Gzip(format!("error: {text}")));
                }
            };
            pos += (self.inflater.total_in() - in_before) as usize;
            if let Status::StreamEnd = status {
                self.member = Member::End;
                break;
            }
            if produced < space {
                break; // the input is used up
            }
        }
        self.input_pos = pos; // what was not used is read again (Python's prepend)
        let produced = out.len() - start_len;
        self.crc.update(&out[start_len..]);
        Ok((produced, given))
    }
}

impl<S: Source> Source for Gzip<S> {
    fn read(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, SourceError> {
        if max == 0 {
            return Ok(0);
        }
        loop {
            if let Member::End = self.member {
                self.trailer()?;
                self.inflater.reset(false);
                self.member = Member::Start;
            }
            if let Member::Start = self.member {
                self.crc.reset();
                if !self.header()? {
                    return Ok(0);
                }
                self.member = Member::Data;
                self.member_start = self.input_offset();
            }
            let (produced, given) = self.inflate(max, out)?;
            if produced > 0 {
                return Ok(produced);
            }
            if given == 0 {
                return Err(SourceError::Gzip(EOF_MESSAGE.to_owned()));
            }
        }
    }
}

/// Python's ``repr`` of a bytes object.
fn python_bytes_repr(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') { '"' } else { '\'' };
    let mut text = String::from("b");
    text.push(quote);
    for &b in bytes {
        match b {
            b'\\' => text.push_str("\\\\"),
            b'\t' => text.push_str("\\t"),
            b'\n' => text.push_str("\\n"),
            b'\r' => text.push_str("\\r"),
            _ if b == quote as u8 => {
                text.push('\\');
                text.push(quote);
            }
            0x20..=0x7e => text.push(b as char),
            _ => text.push_str(&format!("\\x{b:02x}")),
        }
    }
    text.push(quote);
    text
}

#[cfg(test)]
mod tests {
    use super::python_bytes_repr;

    #[test]
    fn bytes_repr_as_python() {
        assert_eq!(python_bytes_repr(b"ab"), "b'ab'");
        assert_eq!(python_bytes_repr(b"\x00\xff"), "b'\\x00\\xff'");
        assert_eq!(python_bytes_repr(b"'"), "b\"'\"");
        assert_eq!(python_bytes_repr(b"'\""), "b'\\'\"'");
        assert_eq!(python_bytes_repr(b"\n\\"), "b'\\n\\\\'");
    }
}
