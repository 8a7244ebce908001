//! Text from the wire, made safe for any renderer: the one escape of wire strings (`safe`), and the forms in
//! which values are shown as text — Python's `str()` and `json.dumps` of a value, dates of epoch
//! milliseconds, bytes fields, message ids, payload previews. The timeline line (`timeline.rs`) uses them
//! directly; Python's renderers call them through the binding (`dissector/output/text.py`), so there is one
//! implementation of each.
//!
//! Wire strings are untrusted: a topic name may hold terminal escape sequences, bidi overrides, rich markup
//! or newlines. `safe` makes any value printable, single-line and length-limited: every character Python's
//! `str.isprintable` rejects (controls, format characters such as U+202E, separators other than the space,
//! unassigned code points) is written as Python's `unicode_escape` writes it (`\x1b`, `\u202e`); the
//! renderers append the result as plain text, never parsed as markup.

use std::cmp::Ordering;
use std::fmt::Write as _;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

use crate::printable::NOT_PRINTABLE;
pub use crate::printable::UNICODE_VERSION;
use crate::value::{text_lossless, Value};

/// The length limit of `safe` when none is given (`text.MAX_VALUE`).
pub const MAX_VALUE: i64 = 60;

/// Python's `str.isprintable` for one character (the table is generated from Python's Unicode database).
pub fn is_printable(c: char) -> bool {
    let code = c as u32;
    if (0x20..0x7f).contains(&code) {
        return true;
    }
    NOT_PRINTABLE
        .binary_search_by(|&(start, end)| {
            if end < code {
                Ordering::Less
            } else if start > code {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        })
        .is_err()
}

/// One character as Python's `unicode_escape` codec writes it.
fn push_escaped_char(c: char, out: &mut String) {
    let code = c as u32;
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        _ if code < 0x100 => {
            let _ = write!(out, "\\x{code:02x}");
        }
        _ if code < 0x10000 => {
            let _ = write!(out, "\\u{code:04x}");
        }
        _ => {
            let _ = write!(out, "\\U{code:08x}");
        }
    }
}

/// `text` with every character that is not printable escaped (no length limit).
pub fn push_escaped(text: &str, out: &mut String) {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        if is_printable(c) {
            out.push(c);
        } else {
            push_escaped_char(c, out);
        }
    }
}

/// How many leading characters Python's `text[:end]` keeps of a text of `count` characters.
fn slice_end(count: usize, end: i64) -> usize {
    if end >= 0 {
        (end as u64).min(count as u64) as usize
    } else {
        count.saturating_sub(end.unsigned_abs().min(count as u64) as usize)
    }
}

/// Cut what was appended to `out` since `start` to `limit` characters, the last one `…` (Python's
/// `text[:limit - 1] + "…"` when `len(text) > limit`).
fn cut(out: &mut String, start: usize, limit: i64) {
    let written = &out[start..];
    let count = if written.is_ascii() { written.len() } else { written.chars().count() };
    if (count as i64) <= limit {
        return;
    }
    let keep = slice_end(count, limit.saturating_sub(1));
    let end = written.char_indices().nth(keep).map_or(written.len(), |(i, _)| i);
    out.truncate(start + end);
    out.push('…');
}

/// `safe` of a text: escaped, then cut to `limit` characters.
pub fn push_safe_text(text: &str, limit: i64, out: &mut String) {
    if (text.len() as i64) <= limit && text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        out.push_str(text); // the common case: short printable ASCII
        return;
    }
    // escaping never makes a character shorter: the first limit + 1 characters decide what is shown (a 64 MiB
    // payload's preview is not escaped whole first)
    let text = match usize::try_from(limit) {
        Ok(limit) => text.char_indices().nth(limit.saturating_add(1)).map_or(text, |(end, _)| &text[..end]),
        Err(_) => text,
    };
    let start = out.len();
    push_escaped(text, out);
    cut(out, start, limit);
}

/// Printable, single-line, length-limited text for a value that came off the wire: a string as it is, a
/// dict or a list as compact JSON (non-ASCII escaped, as Python's `json.dumps`), anything else as Python's
/// `str()`; then escaped and cut to `limit` characters.
pub fn push_safe(value: &Value, limit: i64, out: &mut String) {
    match value {
        Value::Str(text) => push_safe_text(text.as_str(), limit, out),
        _ => {
            let mut text = String::new();
            match value {
                Value::List(_) | Value::Map(_) => push_json(value, &mut text),
                _ => push_py_str(value, &mut text),
            }
            push_safe_text(&text, limit, out);
        }
    }
}

pub fn safe(value: &Value, limit: i64) -> String {
    let mut out = String::new();
    push_safe(value, limit, &mut out);
    out
}

// ------------------------------------------------------------------------------------------ Python forms

/// Python's `str()` of a value (a list or a dict: as compact JSON, see [`push_json`]); not escaped.
pub fn push_py_str(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Int(v) => out.push_str(itoa::Buffer::new().format(*v)),
        Value::UInt(v) => out.push_str(itoa::Buffer::new().format(*v)),
        Value::Float(v) => push_float_repr(*v, out),
        Value::Str(text) => out.push_str(text.as_str()),
        Value::Bytes(bytes) => push_bytes_repr(bytes, out),
        Value::List(_) | Value::Map(_) => push_json(value, out),
    }
}

/// Python's `repr()` of a float: the shortest digits that read back the same, in fixed notation from 1e-4
/// up to 1e16, else in exponent notation (`1e+16`, `1.5e-05`).
pub fn push_float_repr(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("nan");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "inf" } else { "-inf" });
        return;
    }
    let shortest = format!("{v:e}"); // e.g. "-1.2345e-5": Rust's shortest round-trip digits
    let (mantissa, exponent) = shortest.split_once('e').unwrap_or((&shortest, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let mut digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if digits.len() >= 15 {
        even_on_a_tie(v.abs(), exponent, &mut digits);
    }
    let point = exponent + 1; // the value is 0.DIGITS × 10^point
    if negative {
        out.push('-');
    }
    if point <= -4 || point > 16 {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.unsigned_abs());
    } else if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', point.unsigned_abs() as usize));
        out.push_str(&digits);
    } else if point as usize >= digits.len() {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
        out.push_str(".0");
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
}

/// When the value lies exactly halfway between two shortest digit strings that both read back as it (a coarse
/// double: 562949953421312.25 reads back from ...312.2 and ...312.3), Python's repr (David Gay's dtoa) takes
/// the even one; Rust's shortest formatting may take the other. (At a power of two the gap below is half the
/// gap above, so only one of them may read back: that one stays.) Only long digit strings can tie, and their
/// exact expansion is then short.
fn even_on_a_tie(v: f64, exponent: i32, digits: &mut String) {
    let n = digits.len();
    let exact = format!("{v:.800e}"); // exact: a double's expansion ends within 767 significant digits
    let exact: Vec<u8> = exact.split_once('e').map_or("", |(m, _)| m).bytes().filter(u8::is_ascii_digit).collect();
    let tie = exact.get(n) == Some(&b'5') && exact[n + 1..].iter().all(|&d| d == b'0');
    if !tie {
        return;
    }
    let floor = &exact[..n];
    let Some(last) = floor.iter().rposition(|&d| d != b'9') else { return };
    let mut above = floor.to_vec();
    above[last] += 1;
    above[last + 1..].fill(b'0');
    let reads_back = |candidate: &[u8]| {
        let text = format!("0.{}e{}", String::from_utf8_lossy(candidate), exponent + 1);
        text.parse::<f64>().is_ok_and(|read| read == v)
    };
    let even = if floor[n - 1].is_multiple_of(2) { floor } else { &above[..] };
    if reads_back(floor) && reads_back(&above) {
        *digits = String::from_utf8_lossy(even).into_owned();
    }
}

/// Python's `repr()` of bytes: `b'...'` with `\t`, `\n`, `\r`, `\\`, the quote and `\xNN` escapes.
pub fn push_bytes_repr(bytes: &[u8], out: &mut String) {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') { b'"' } else { b'\'' };
    out.push('b');
    out.push(quote as char);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if b == quote => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push(quote as char);
}

/// Python's `json.dumps(value, separators=(",", ":"))`: everything outside printable ASCII escaped
/// (`\u00e9`, surrogate pairs above the BMP), floats as `repr`, NaN and infinities as `NaN` / `Infinity`,
/// bytes as their text (`\xNN` for what is not UTF-8).
pub fn push_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(_) | Value::UInt(_) => push_py_str(value, out),
        Value::Float(v) if v.is_nan() => out.push_str("NaN"),
        Value::Float(v) if v.is_infinite() => out.push_str(if *v > 0.0 { "Infinity" } else { "-Infinity" }),
        Value::Float(v) => push_float_repr(*v, out),
        Value::Str(text) => push_json_str(text.as_str(), out),
        Value::Bytes(bytes) => push_json_str(&text_lossless(bytes), out),
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json(item, out);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_str(key.as_str(), out);
                out.push(':');
                push_json(item, out);
            }
            out.push('}');
        }
    }
}

fn push_json_str(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

// ------------------------------------------------------------------------------------------------ dates

/// A UTC date and time, to the microsecond.
pub struct Utc {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub micro: u32,
}

/// `datetime.fromtimestamp(t, timezone.utc)`: microseconds rounded half to even, as Python rounds them;
/// None where Python fails (not finite, beyond its time_t, a year outside 1..=9999).
pub fn utc(t: f64) -> Option<Utc> {
    if !t.is_finite() {
        return None;
    }
    let mut seconds = t.trunc();
    let scaled = (t - seconds) * 1e6;
    let mut micro = scaled.round();
    if (scaled - micro).abs() == 0.5 {
        micro = 2.0 * (scaled / 2.0).round();
    }
    if micro >= 1e6 {
        micro -= 1e6;
        seconds += 1.0;
    } else if micro < 0.0 {
        micro += 1e6;
        seconds -= 1.0;
    }
    if !(-9.2e18..9.2e18).contains(&seconds) {
        return None;
    }
    let seconds = seconds as i64;
    let (days, of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // days since 1970-01-01 → civil date (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(1..=9999).contains(&year) {
        return None;
    }
    Some(Utc {
        year,
        month,
        day,
        hour: (of_day / 3600) as u32,
        minute: (of_day / 60 % 60) as u32,
        second: (of_day % 60) as u32,
        micro: micro as u32,
    })
}

impl Utc {
    /// `YYYY-MM-DD HH:MM:SS` (the year unpadded below 1000, as glibc's `%Y`).
    fn push_date_time(&self, separator: char, out: &mut String) {
        let _ = write!(
            out,
            "{}-{:02}-{:02}{separator}{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        );
    }
}

/// A time as the timeline's `--absolute-time` shows it: `2024-05-01 12:00:00.123456 UTC`.
pub fn push_utc_time(t: f64, out: &mut String) -> bool {
    match utc(t) {
        Some(when) => {
            when.push_date_time(' ', out);
            let _ = write!(out, ".{:06} UTC", when.micro);
            true
        }
        None => false,
    }
}

/// Epoch milliseconds as a UTC date and time to the millisecond (a SEEK's publish time, a delayed
/// delivery): `2024-05-01T12:00:00.123Z`; a value that is no such date as `safe` shows it.
pub fn push_date_ms(value: &Value, out: &mut String) {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: beyond, no date in range anyway
    let millis = match value {
        Value::Int(v) => Some(*v as f64),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Float(v) if v.is_finite() => Some(v.trunc()),
        Value::Str(text) => text.as_str().trim().replace('_', "").parse::<i64>().ok().map(|v| v as f64),
        _ => None,
    };
    let when = millis.filter(|m| m.abs() <= EXACT).and_then(|m| utc(m / 1000.0));
    match when {
        Some(when) => {
            when.push_date_time('T', out);
            let _ = write!(out, ".{:03}Z", when.micro / 1000);
        }
        None => push_safe(value, MAX_VALUE, out),
    }
}

pub fn date_ms(value: &Value) -> String {
    let mut out = String::new();
    push_date_ms(value, &mut out);
    out
}

// ------------------------------------------------------------------------------------------------ bytes

/// How a bytes field is shown: text when UTF-8 (`Text`), else hex; `Hex`: always hex, unspaced (a schema
/// version is a number); `Spaced`: always hex, spaced as the payload preview.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BytesKind {
    Text,
    Hex,
    Spaced,
}

impl BytesKind {
    pub fn from_name(name: &str) -> BytesKind {
        match name {
            "text" => BytesKind::Text,
            "hex" => BytesKind::Hex,
            _ => BytesKind::Spaced,
        }
    }
}

/// Standard base64 as Python's `b64decode(validate=True)` reads it: the alphabet only, padding required.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

pub fn b64_decode(text: &str) -> Option<Vec<u8>> {
    BASE64.decode(text).ok()
}

fn push_hex(bytes: &[u8], spaced: bool, out: &mut String) {
    for (i, b) in bytes.iter().enumerate() {
        if spaced && i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{b:02x}");
    }
}

/// Raw bytes as `kind` shows them, limited to `limit` characters; true when shown as hex.
pub fn push_shown_bytes(raw: &[u8], kind: BytesKind, limit: i64, out: &mut String) -> bool {
    if kind == BytesKind::Text {
        if let Ok(text) = std::str::from_utf8(raw) {
            push_safe_text(text, limit, out);
            return false;
        }
    }
    let mut hex = String::with_capacity(raw.len() * 3);
    push_hex(raw, kind != BytesKind::Hex, &mut hex);
    out.push_str(&hex[..slice_end(hex.len(), limit)]); // hex is ASCII: characters are bytes
    true
}

/// A bytes field of a record (base64 text, as protobuf's JSON mapping writes bytes) as `kind` shows it; a
/// value that is not base64 as `safe` shows it. True when shown as hex.
pub fn push_shown_b64(value: &Value, kind: BytesKind, limit: i64, out: &mut String) -> bool {
    match value.as_str().and_then(b64_decode) {
        Some(raw) => push_shown_bytes(&raw, kind, limit, out),
        None => {
            push_safe(value, limit, out);
            false
        }
    }
}

// ------------------------------------------------------------------------------------------ message ids

/// A message id as the timeline shows it: `ledger:entry`, then `:pN` (partition), `:bN` (batch index),
/// `(partial)` (an ack of some entries of a batch); `earliest` / `latest`; a list as its first four ids.
/// Takes both the command's form (`ledgerId`, `entryId`) and a message record's (`ledger_id`, `entry_id`).
pub fn push_message_id(mid: &Value, out: &mut String) {
    match mid {
        Value::Map(_) => {
            let snake = mid.get("ledger_id").is_some();
            let field = |camel: &str, snake_name: &str| mid.get(if snake { snake_name } else { camel });
            let (ledger, entry) = (field("ledgerId", "ledger_id"), field("entryId", "entry_id"));
            match (ledger, entry) {
                (Some(Value::UInt(u64::MAX)), Some(Value::UInt(u64::MAX))) => return out.push_str("earliest"),
                (Some(Value::Int(i64::MAX)), Some(Value::Int(i64::MAX))) => return out.push_str("latest"),
                _ => {}
            }
            let part = |value: Option<&Value>, out: &mut String| match value {
                Some(value) => push_escaped(&py_str(value), out),
                None => out.push('?'),
            };
            let shown = |value: Option<&Value>| value.is_some_and(|v| !v.is_null() && !is_minus_one(v));
            part(ledger, out);
            out.push(':');
            // a record's id always has entry_id; a missing one reads as None, as Python's .get gives
            part(if snake { Some(entry.unwrap_or(&Value::Null)) } else { entry }, out);
            let partition = mid.get("partition");
            if shown(partition) {
                out.push_str(":p");
                part(partition, out);
            }
            let batch_index = mid.get("batch_index");
            if shown(batch_index) {
                out.push_str(":b");
                part(batch_index, out);
            }
            if !snake && mid.get("ack_set").is_some_and(Value::truthy) {
                out.push_str("(partial)");
            }
        }
        Value::List(ids) => {
            for (i, id) in ids.iter().take(4).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_message_id(id, out);
            }
            if ids.len() > 4 {
                out.push('…');
            }
        }
        _ => push_safe(mid, MAX_VALUE, out),
    }
}

fn is_minus_one(value: &Value) -> bool {
    matches!(value, Value::Int(-1)) || matches!(value, Value::Float(v) if *v == -1.0)
}

pub fn py_str(value: &Value) -> String {
    let mut out = String::new();
    push_py_str(value, &mut out);
    out
}

// --------------------------------------------------------------------------------------------- payloads

/// Bytes of a payload preview shown as hex at most.
const PREVIEW_HEX: usize = 48;
/// Characters of a payload preview shown as text at most.
const PREVIEW_TEXT: i64 = 120;

/// A message's payload as `--payload` shows it: text when UTF-8, else hex, or why it is not there. Takes a
/// message record (`payload_text` / `payload_b64`, as JSON writes it) or a decoded message (`payload` bytes).
pub fn push_payload_preview(message: &Value, out: &mut String) {
    let payload = match (message.get("payload_text"), message.get("payload_b64"), message.get("payload")) {
        (Some(Value::Str(text)), _, _) => PreviewOf::Text(text.as_str()),
        (Some(value), _, _) => PreviewOf::Other { b64: false, value },
        (None, Some(Value::Str(b64)), _) => PreviewOf::B64(b64.as_str()),
        (None, Some(value), _) => PreviewOf::Other { b64: true, value },
        (None, None, Some(Value::Bytes(raw))) => PreviewOf::Bytes(raw),
        _ => PreviewOf::Nothing,
    };
    let encrypted = message.get("encrypted").is_some_and(Value::truthy);
    push_preview(message.get("payload_size").unwrap_or(&Value::Null), payload, encrypted, out);
}

/// What a payload preview is made of: a message's `payload_text`, `payload_b64`, its bytes, or none.
pub enum PreviewOf<'a> {
    Text(&'a str),
    B64(&'a str),
    /// A `payload_text` (or `payload_b64`) that is no string.
    Other {
        b64: bool,
        value: &'a Value,
    },
    Bytes(&'a [u8]),
    Nothing,
}

/// [`push_payload_preview`] of a message's parts (a front end's message read without copying its payload):
/// only a payload's first characters or bytes are looked at twice, never the whole copied.
pub fn push_preview(size: &Value, payload: PreviewOf<'_>, encrypted: bool, out: &mut String) {
    let str_preview = |text: &str, out: &mut String| {
        out.push_str("payload: ");
        let shown_from = out.len();
        push_safe_text(text, PREVIEW_TEXT, out);
        if text != &out[shown_from..] {
            let _ = write!(out, " ({} bytes)", py_str(size));
        }
    };
    let hex_preview = |len: usize, head: &[u8], out: &mut String| {
        let _ = write!(out, "payload ({len} bytes, hex): ");
        push_hex(&head[..head.len().min(PREVIEW_HEX)], true, out);
        if len > PREVIEW_HEX {
            out.push_str(" …");
        }
    };
    match payload {
        PreviewOf::Text(text) => str_preview(text, out),
        PreviewOf::B64(b64) => match b64_head(b64, PREVIEW_HEX) {
            Some((len, head)) => hex_preview(len, &head, out),
            None => {
                out.push_str("payload (base64): ");
                push_safe_text(b64, PREVIEW_TEXT, out);
            }
        },
        PreviewOf::Other { b64: true, value } => {
            out.push_str("payload (base64): ");
            push_safe(value, PREVIEW_TEXT, out);
        }
        PreviewOf::Other { b64: false, value } => {
            out.push_str("payload: ");
            push_safe(value, PREVIEW_TEXT, out);
            let _ = write!(out, " ({} bytes)", py_str(size));
        }
        PreviewOf::Bytes(raw) => match std::str::from_utf8(raw) {
            Ok(text) => str_preview(text, out),
            Err(_) => hex_preview(raw.len(), raw, out),
        },
        PreviewOf::Nothing if encrypted => {
            out.push_str("payload: encrypted");
            if !size.is_null() {
                let _ = write!(out, ", {} bytes", py_str(size));
            }
        }
        PreviewOf::Nothing => {
            let _ = write!(out, "payload: {} bytes (not recovered)", py_str(size));
        }
    }
}

/// A base64 text's decoded length and its first `keep` bytes, None when it is not base64 (as [`b64_decode`]
/// reads it); checked a piece at a time, never decoded whole.
pub fn b64_head(text: &str, keep: usize) -> Option<(usize, Vec<u8>)> {
    const PIECE: usize = 4 * 1024; // (a multiple of 4: pieces are whole quanta)
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut head = Vec::new();
    let mut len = 0usize;
    let mut buf = Vec::with_capacity(PIECE / 4 * 3);
    let mut rest = text;
    while !rest.is_empty() {
        let (piece, after) = rest.split_at(rest.len().min(PIECE));
        // padding only at the very end: a piece before the last holds none
        if !after.is_empty() && piece.contains('=') {
            return None;
        }
        buf.clear();
        BASE64.decode_vec(piece, &mut buf).ok()?;
        if head.len() < keep {
            head.extend_from_slice(&buf[..buf.len().min(keep - head.len())]);
        }
        len += buf.len();
        rest = after;
    }
    Some((len, head))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Value {
        Value::from(text.to_owned())
    }

    #[test]
    fn escapes_what_python_does_not_print() {
        assert_eq!(safe(&s("a\x1b[31mb\x07\u{9b}\u{202e}z"), 60), "a\\x1b[31mb\\x07\\x9b\\u202ez");
        assert_eq!(safe(&s("tab\there\n"), 60), "tab\\there\\n");
        assert_eq!(safe(&s("\u{e0001}x"), 60), "\\U000e0001x");
        assert_eq!(safe(&s("[/x] é 日本"), 60), "[/x] é 日本");
    }

    #[test]
    fn a_preview_is_the_same_of_a_long_payload_and_of_its_head() {
        let long = "é\n\"x\"\t".repeat(100_000);
        let mut whole = String::new();
        push_escaped(&long, &mut whole);
        cut(&mut whole, 0, PREVIEW_TEXT);
        let mut preview = String::new();
        push_safe_text(&long, PREVIEW_TEXT, &mut preview);
        assert_eq!(preview, whole);
        let raw: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let b64 = crate::pb::b64(&raw);
        assert_eq!(b64_head(&b64, PREVIEW_HEX), Some((raw.len(), raw[..PREVIEW_HEX].to_vec())));
        let padded_inside = format!("QQ=={}", &b64[..8192]);
        assert_eq!((b64_head(&padded_inside, 4), b64_decode(&padded_inside)), (None, None));
    }

    #[test]
    fn cuts_to_the_limit_in_characters() {
        assert_eq!(safe(&s("abcdef"), 4), "abc…");
        assert_eq!(safe(&s("abcd"), 4), "abcd");
        assert_eq!(safe(&s("ééééé"), 3), "éé…");
        assert_eq!(safe(&s("\x01\x02"), 5), "\\x01…");
    }

    #[test]
    fn python_forms() {
        let f = |v: f64| py_str(&Value::Float(v));
        assert_eq!(
            [f(1e16), f(1e15), f(1e-5), f(0.0001), f(-0.0), f(1.5), f(123.456), f(1.5e300)],
            ["1e+16", "1000000000000000.0", "1e-05", "0.0001", "-0.0", "1.5", "123.456", "1.5e+300"]
        );
        assert_eq!([f(f64::NAN), f(f64::INFINITY), f(f64::NEG_INFINITY)], ["nan", "inf", "-inf"]);
        assert_eq!(py_str(&Value::Bool(true)), "True");
        assert_eq!(py_str(&Value::Null), "None");
        assert_eq!(py_str(&Value::Bytes(b"a'\x00\\".to_vec())), "b\"a'\\x00\\\\\"");
        let map = Value::Map(vec![(
            crate::value::Text::Owned("k".into()),
            Value::List(vec![Value::Float(1.0), s("é\u{7f}😀")]),
        )]);
        assert_eq!(safe(&map, 100), "{\"k\":[1.0,\"\\u00e9\\u007f\\ud83d\\ude00\"]}");
    }

    #[test]
    fn dates() {
        assert_eq!(date_ms(&Value::Int(1_700_000_000_123)), "2023-11-14T22:13:20.123Z");
        assert_eq!(date_ms(&Value::Int(-1)), "1969-12-31T23:59:59.999Z");
        assert_eq!(date_ms(&Value::Int(i64::MAX)), "9223372036854775807");
        assert_eq!(date_ms(&Value::Null), "None");
        let mut out = String::new();
        assert!(push_utc_time(1_700_000_000.5, &mut out));
        assert_eq!(out, "2023-11-14 22:13:20.500000 UTC");
    }
}
