//! The decoder's plain data in Rust: a tree of values, what a dict of the JSON contract holds on the Python
//! side. Rust code reads it (`get`, `as_i64`, ...); a front end turns it into its own objects in one step
//! (the Python binding's `convert.rs`); the native output writes it as JSON (`write_json`: byte for byte what
//! `dissector/output/jsonl.dumps` writes).
//!
//! Keys and names the contract declares (schema fields, enum values, record keys, finding ids) are
//! [`Name`]s: static text plus a front end's form of it made once (the binding's interned Python string), so
//! neither decoding nor conversion allocates a key.

use std::borrow::Cow;
use std::fmt;
use std::ptr;
use std::sync::atomic::AtomicPtr;

/// A name the contract declares: its text, and a slot where a front end keeps its own form of it (the Python
/// binding: the interned string, made the first time the name crosses, held by a plain pointer and never
/// released). The engine never reads the slot, so nothing in decoding depends on a front end.
pub struct Name {
    text: Cow<'static, str>,
    front: AtomicPtr<()>,
    /// Nothing in it to escape in JSON (true of every name the contract declares): written as it is.
    json_plain: bool,
    /// `,"text":`, made the first time the name is written as a JSON object's key (a record writes a few keys
    /// per message: one copy each instead of four pushes).
    json_key: std::sync::OnceLock<Box<[u8]>>,
}

impl Name {
    pub const fn new(text: &'static str) -> Name {
        Name {
            text: Cow::Borrowed(text),
            front: AtomicPtr::new(ptr::null_mut()),
            json_plain: json_plain(text.as_bytes()),
            json_key: std::sync::OnceLock::new(),
        }
    }

    /// A name read at run time (the schema's): it lives as long as the table holding it.
    pub fn owned(text: String) -> Name {
        let json_plain = json_plain(text.as_bytes());
        Name {
            text: Cow::Owned(text),
            front: AtomicPtr::new(ptr::null_mut()),
            json_plain,
            json_key: std::sync::OnceLock::new(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The slot where a front end keeps its own form of this name, made the first time it needs it and
    /// never released (the Python binding: the interned `str`). The engine never reads it.
    pub fn front_slot(&self) -> &AtomicPtr<()> {
        &self.front
    }

    /// The name as an object's key: `"text":`, after a comma unless `first`.
    pub fn write_json_key(&self, first: bool, out: &mut Vec<u8>) {
        let key = self.json_key.get_or_init(|| {
            let mut key = vec![b','];
            self.write_json(&mut key);
            key.push(b':');
            key.into_boxed_slice()
        });
        out.extend_from_slice(if first { &key[1..] } else { key });
    }

    pub fn write_json(&self, out: &mut Vec<u8>) {
        if self.json_plain {
            out.push(b'"');
            out.extend_from_slice(self.text.as_bytes());
            out.push(b'"');
        } else {
            write_json_str(&self.text, out);
        }
    }
}

/// `name!("text")`: a `&'static Name` made once per call site (as PyO3's `intern!`).
#[macro_export]
macro_rules! name {
    ($text:expr) => {{
        static NAME: $crate::value::Name = $crate::value::Name::new($text);
        &NAME
    }};
}

/// A string value or a map key: a declared name, or text read off the wire.
#[derive(Clone)]
pub enum Text {
    Name(&'static Name),
    Owned(String),
}

impl Text {
    pub fn as_str(&self) -> &str {
        match self {
            Text::Name(name) => name.as_str(),
            Text::Owned(text) => text,
        }
    }

    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Text::Name(name) => name.write_json(out),
            Text::Owned(text) => write_json_str(text, out),
        }
    }
}

/// Names and texts compare and print as their text.
macro_rules! compared_and_printed_as_text {
    ($($t:ty),*) => {$(
        impl PartialEq for $t {
            fn eq(&self, other: &$t) -> bool {
                self.as_str() == other.as_str()
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self.as_str(), f)
            }
        }
    )*};
}
compared_and_printed_as_text!(Name, Text);

/// A map's entries in insertion order (the order of a Python dict, and of the JSON object); keys unique.
pub type Map = Vec<(Text, Value)>;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    /// Only for a uint64 above `i64::MAX`: every other integer is an `Int`.
    UInt(u64),
    Float(f64),
    Str(Text),
    /// Kept as bytes on the Python side (a message's `payload`, `ordering_key`); never in the JSON contract.
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Map(Map),
}

/// One map entry under a declared key.
pub fn entry(key: &'static Name, value: impl Into<Value>) -> (Text, Value) {
    (Text::Name(key), value.into())
}

macro_rules! int_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(v.into())
            }
        }
    )*};
}
int_from!(i32, u32, i64);

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        match i64::try_from(v) {
            Ok(v) => Value::Int(v),
            Err(_) => Value::UInt(v),
        }
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::from(v as u64)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(Text::Owned(v))
    }
}

impl From<&'static Name> for Value {
    fn from(v: &'static Name) -> Value {
        Value::Str(Text::Name(v))
    }
}

impl From<Text> for Value {
    fn from(v: Text) -> Value {
        Value::Str(v)
    }
}

impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Value {
        Value::List(v)
    }
}

impl From<Map> for Value {
    fn from(v: Map) -> Value {
        Value::Map(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

impl Value {
    /// The value under `key` of a map (None for a missing key or a value that is not a map).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map()?.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Python's truth value of the value (what `if value:` decides).
    pub fn truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Int(v) => *v != 0,
            Value::UInt(v) => *v != 0,
            Value::Float(v) => *v != 0.0,
            Value::Str(text) => !text.as_str().is_empty(),
            Value::Bytes(bytes) => !bytes.is_empty(),
            Value::List(items) => !items.is_empty(),
            Value::Map(entries) => !entries.is_empty(),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(v) => u64::try_from(*v).ok(),
            Value::UInt(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(t) => Some(t.as_str()),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    // ---------------------------------------------------------------------------------------------- JSON

    /// The value as JSON, exactly as `dissector/output/jsonl.dumps` writes it: orjson's form (no spaces,
    /// non-ASCII raw, shortest round-trip floats, NaN and infinities as null), then C1 controls escaped.
    /// Bytes, which the contract never holds, are written as `jsonl`'s fallback writes them: text with
    /// `\xNN` for what is not UTF-8.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            Value::Int(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
            Value::UInt(v) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
            Value::Float(v) if v.is_finite() => out.extend_from_slice(zmij::Buffer::new().format_finite(*v).as_bytes()),
            Value::Float(_) => out.extend_from_slice(b"null"),
            Value::Str(text) => text.write_json(out),
            Value::Bytes(bytes) => write_json_str(&text_lossless(bytes), out),
            Value::List(items) => write_json_array(items, out, Value::write_json),
            Value::Map(entries) => write_json_map(entries, out),
        }
    }
}

/// Writes a JSON object field by field, for code that holds its fields apart rather than as a [`Map`].
pub struct JsonObject<'o> {
    out: &'o mut Vec<u8>,
    empty: bool,
}

impl<'o> JsonObject<'o> {
    pub fn start(out: &'o mut Vec<u8>) -> JsonObject<'o> {
        out.push(b'{');
        JsonObject { out, empty: true }
    }

    /// The key, and the output to write its value to.
    pub fn key(&mut self, key: &Name) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        key.write_json(self.out);
        self.out.push(b':');
        self.out
    }

    /// A key known only at run time (a note's, a table's), and the output to write its value to.
    pub fn key_str(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        write_json_str(key, self.out);
        self.out.push(b':');
        self.out
    }

    pub fn field(&mut self, key: &Name, value: &Value) {
        value.write_json(self.key(key));
    }

    pub fn field_or_null(&mut self, key: &Name, value: Option<&Value>) {
        value.unwrap_or(&Value::Null).write_json(self.key(key));
    }

    pub fn end(self) {
        self.out.push(b'}');
    }
}

pub fn write_json_map(entries: &Map, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        key.write_json(out);
        out.push(b':');
        value.write_json(out);
    }
    out.push(b'}');
}

/// `[...]`, each item written by `write`.
pub fn write_json_array<T>(items: &[T], out: &mut Vec<u8>, write: impl Fn(&T, &mut Vec<u8>)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(item, out);
    }
    out.push(b']');
}

/// What each byte of a string becomes in JSON: 0 itself, `u` `\u00xx`, [`C1_LEAD`] `\u00xx` of the next
/// byte when that makes a C1 control (U+0080..U+009F, which a terminal would obey), [`E2_LEAD`] `\u20xx`
/// when the three bytes are a line or paragraph separator or a bidi control (U+2028..U+202E,
/// U+2066..U+2069: JSON allows them raw, but they end lines for `str.splitlines` and JavaScript, and
/// reorder what a terminal shows), else `\` and the letter. DEL (0x7f) is `\u007f`.
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[0x7f] = b'u';
    table[0xc2] = C1_LEAD;
    table[0xe2] = E2_LEAD;
    table
};
const C1_LEAD: u8 = 0xc2;
const E2_LEAD: u8 = 0xe2;

const fn json_plain(bytes: &[u8]) -> bool {
    let mut i = 0;
    while i < bytes.len() {
        if ESCAPE[bytes[i] as usize] != 0 {
            return false;
        }
        i += 1;
    }
    true
}

/// How many bytes from `i` (a lead byte in [`ESCAPE`]) make one character to escape: 2 for a C1 control,
/// 3 for U+2028..U+202E or U+2066..U+2069, else 0 (the character is written as it is).
fn escaped_run(code: u8, bytes: &[u8], i: usize) -> usize {
    match code {
        C1_LEAD => usize::from(matches!(bytes.get(i + 1), Some(0x80..=0x9f))) * 2,
        E2_LEAD => match (bytes.get(i + 1), bytes.get(i + 2)) {
            (Some(0x80), Some(0xa8..=0xae)) | (Some(0x81), Some(0xa6..=0xa9)) => 3,
            _ => 0,
        },
        _ => 1,
    }
}

/// A string as JSON: orjson's escapes (the short ones, else `\u00xx`), and C1 controls, DEL, U+2028/U+2029 and
/// bidi controls as `\uXXXX` (as `dissector/output/jsonl.py` writes them).
pub fn write_json_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let u00 = |control: u8| [b'\\', b'u', b'0', b'0', HEX[(control >> 4) as usize], HEX[(control & 15) as usize]];
    let bytes = s.as_bytes();
    // a long string (a payload with --payload) gets its exact room first, and room for the rest of its line
    // (not touched unless used): growing the line as its escapes come, or as the record's last keys come, would
    // hold the line twice while it moves
    let room = if bytes.len() >= EXACT_ROOM_FROM { escapes_extra(bytes) + EXACT_ROOM_FROM } else { 0 };
    out.reserve(bytes.len() + 2 + room);
    out.push(b'"');
    let mut done = 0;
    for (i, code, run) in escape_runs(bytes) {
        out.extend_from_slice(&bytes[done..i]);
        match code {
            C1_LEAD => out.extend_from_slice(&u00(bytes[i + 1])),
            // U+2028..U+202E: E2 80 A8..AE; U+2066..U+2069: E2 81 A6..A9 (the low byte is 0x28.. / 0x66..)
            E2_LEAD => {
                let low = if bytes[i + 1] == 0x80 { bytes[i + 2] - 0x80 } else { bytes[i + 2] - 0x40 };
                out.extend_from_slice(&[b'\\', b'u', b'2', b'0', HEX[(low >> 4) as usize], HEX[(low & 15) as usize]]);
            }
            b'u' => out.extend_from_slice(&u00(bytes[i])),
            letter => out.extend_from_slice(&[b'\\', letter]),
        }
        done = i + run;
    }
    out.extend_from_slice(&bytes[done..]);
    out.push(b'"');
}

/// Strings from this long are measured before they are written (`write_json_str`).
const EXACT_ROOM_FROM: usize = 1 << 20;

/// The bytes `write_json_str`'s escapes add to a string's own: each escape is 6 bytes (\uXXXX) but a letter's
/// (2).
fn escapes_extra(bytes: &[u8]) -> usize {
    escape_runs(bytes)
        .map(|(_, code, run)| match code {
            C1_LEAD | E2_LEAD | b'u' => 6 - run,
            _ => 1,
        })
        .sum()
}

/// The runs of bytes `write_json_str` escapes, in order: (where, its [`ESCAPE`] code, its length).
fn escape_runs(bytes: &[u8]) -> impl Iterator<Item = (usize, u8, usize)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            // most text has nothing to escape: skip it eight bytes at a time
            if let Some(word) = bytes.get(i..i + 8) {
                if !may_need_escape(u64::from_le_bytes(word.try_into().unwrap_or_default())) {
                    i += 8;
                    continue;
                }
            }
            let code = ESCAPE[bytes[i] as usize];
            let run = if code == 0 { 0 } else { escaped_run(code, bytes, i) };
            if run == 0 {
                i += 1;
                continue;
            }
            let at = i;
            i += run;
            return Some((at, code, run));
        }
        None
    })
}

/// Whether any of eight bytes may be one [`ESCAPE`] marks: a control (below 0x20), `"`, `\\`, DEL or any byte
/// from 0x80 (the leads of C1 controls and of U+2028.., which the table then looks at). Never a false "no"; a
/// false "yes" only sends those bytes through the table.
#[inline]
fn may_need_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |n: u64| word.wrapping_sub(ONES * n) & !word & HIGH; // some byte < n (n <= 128)
    let equal = |b: u64| {
        let x = word ^ (ONES * b);
        x.wrapping_sub(ONES) & !x & HIGH
    };
    (below(0x20) | equal(b'"' as u64) | equal(b'\\' as u64) | equal(0x7f) | (word & HIGH)) != 0
}

/// Bytes as text: UTF-8 where they are, each byte that is not as `\xNN` (Python's `backslashreplace`), so
/// nothing on the wire is hidden.
pub fn text_lossless(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// A protobuf ``string`` (proto2 does not check UTF-8) as text, see [`text_lossless`].
pub fn text(bytes: &[u8]) -> Text {
    Text::Owned(match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => text_lossless(bytes),
    })
}

/// A number as a count reads it: 0 when absent or not a number, a flag as 0 or 1, a uint64 beyond `i64::MAX`
/// as `i64::MAX`.
pub fn count(value: Option<&Value>) -> i64 {
    match value {
        Some(Value::Int(v)) => *v,
        Some(Value::UInt(v)) => i64::try_from(*v).unwrap_or(i64::MAX),
        Some(Value::Bool(b)) => i64::from(*b),
        _ => 0,
    }
}

/// Bytes of the `payload`s of messages decoded as maps (what keeping them costs).
pub fn payload_bytes(messages: &[Value]) -> usize {
    messages.iter().filter_map(|m| m.get("payload")).map(|p| p.as_bytes().map_or(0, <[u8]>::len)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_strings_room_is_its_escaped_length() {
        let unit = "plain \"q\"\\ \n\u{1}\u{7f}\u{85}\u{2028}\u{2067}é\u{e2}";
        let text = unit.repeat((EXACT_ROOM_FROM / unit.len()) + 1);
        let mut out = Vec::new();
        write_json_str(&text, &mut out);
        assert_eq!(out.len(), text.len() + 2 + escapes_extra(text.as_bytes()));
        assert_eq!(out.capacity(), out.len() + EXACT_ROOM_FROM); // room made once, never grown
    }

    fn json(v: &Value) -> String {
        let mut out = Vec::new();
        v.write_json(&mut out);
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// The escapes written one character at a time, as `serde_json` would read them back plus ours: the
    /// reference the word-at-a-time skip in `write_json_str` must equal.
    fn escaped_by_char(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                }
                _ => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn word_skip_escapes_every_position() {
        let specials =
            ["\"", "\\", "\n", "\u{1}", "\u{7f}", "\u{85}", "\u{2028}", "\u{202e}", "\u{2069}", "é", "\u{2030}", "€"];
        for len in 0..20 {
            for at in 0..=len {
                for special in specials {
                    let text: String = "a".repeat(at) + special + &"b".repeat(len - at);
                    let mut out = Vec::new();
                    write_json_str(&text, &mut out);
                    assert_eq!(String::from_utf8(out).unwrap(), escaped_by_char(&text), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn scalars() {
        assert_eq!(json(&Value::Null), "null");
        assert_eq!(json(&Value::Bool(true)), "true");
        assert_eq!(json(&Value::Int(i64::MIN)), "-9223372036854775808");
        assert_eq!(json(&Value::from(u64::MAX)), "18446744073709551615");
        assert_eq!(Value::from(u64::MAX), Value::UInt(u64::MAX));
        assert_eq!(Value::from(7u64), Value::Int(7));
    }

    #[test]
    fn floats_as_orjson() {
        // orjson 3.13's forms (checked against it on many more values by tests/test_core_values.py)
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-7, "1e-7"),
            (1e-5, "0.00001"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345678901234568e20, "1.2345678901234568e+20"),
            (5e-324, "5e-324"),
            (1.0 / 3.0, "0.3333333333333333"),
            (f64::NAN, "null"),
            (f64::INFINITY, "null"),
            (f64::NEG_INFINITY, "null"),
        ];
        for (v, expected) in cases {
            assert_eq!(json(&Value::Float(v)), expected, "{v:?}");
        }
    }

    #[test]
    fn strings_escaped_as_orjson_then_c1() {
        let s = "a\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f}\u{7f}\"\\/ é\u{80}\u{85}\u{9f}\u{a0}\u{2028}";
        assert_eq!(
            json(&Value::from(s.to_string())),
            "\"a\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f\\u007f\\\"\\\\/ é\\u0080\\u0085\\u009f\u{a0}\\u2028\""
        );
        assert_eq!(json(&Value::from("Â".to_string())), "\"Â\""); // U+00C2 is 0xC3 0x82: no escape
        assert_eq!(json(&Value::from("\u{c2}x".to_string())), "\"\u{c2}x\"");
    }

    #[test]
    fn separators_and_bidi_controls_escaped() {
        let s = "\u{2027}\u{2028}\u{2029}\u{202a}\u{202e}\u{202f}\u{2065}\u{2066}\u{2069}\u{206a}→…";
        assert_eq!(
            json(&Value::from(s.to_string())),
            "\"\u{2027}\\u2028\\u2029\\u202a\\u202e\u{202f}\u{2065}\\u2066\\u2069\u{206a}→…\""
        );
        assert_eq!(json(&Value::from("\u{2028}".to_string())), "\"\\u2028\""); // at the very end
    }

    #[test]
    fn bytes_as_the_fallback_writes_them() {
        assert_eq!(json(&Value::Bytes(b"ok\xff\xc3".to_vec())), "\"ok\\\\xff\\\\xc3\"");
        assert_eq!(text_lossless(b"a\xe2\x82b\xf0\x9f\x98\x80"), "a\\xe2\\x82b\u{1f600}");
    }

    #[test]
    fn containers_keep_their_order() {
        let v = Value::Map(vec![
            entry(crate::name!("b"), 1i64),
            (Text::Owned("a".into()), Value::List(vec![Value::Null, Value::from(Some(2i64)), Value::Map(Vec::new())])),
        ]);
        assert_eq!(json(&v), "{\"b\":1,\"a\":[null,2,{}]}");
        assert_eq!(v.get("a").and_then(Value::as_list).map(<[Value]>::len), Some(3));
        assert_eq!(v.get("b").and_then(Value::as_i64), Some(1));
        assert_eq!(v.get("c"), None);
        assert_eq!(json(&Value::List(Vec::new())), "[]");
    }
}
