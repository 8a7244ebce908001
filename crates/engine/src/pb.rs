//! Protobuf wire format → the JSON contract's plain data, driven by the schema (no generated code).
//!
//! The semantics are those of the official runtime (upb), which the contract was first written against:
//! a singular scalar's last occurrence wins, a singular message occurring twice is merged, a field sent
//! with the wrong wire type or a closed-enum value the schema does not know is an unknown field, and only
//! fields present on the wire appear. Map keys come in field-number order. Bytes become base64 text;
//! strings that are not UTF-8 keep their bytes as backslash escapes (nothing hidden).

use base64::Engine as _;

use crate::schema::{Field, Kind, Schema};
use crate::value::{entry, text, Map, Text, Value};

const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;
const MAX_DEPTH: u32 = 100; // as upb: deeper nesting is refused, not a stack overflow

/// Elements of repeated fields one parse keeps over its whole message tree by default (nested messages, and
/// the values of repeated scalars, packed or not; `Options.max_repeated_elements`); beyond, they are skipped
/// and counted (`Parsed::elided`). Two bytes on the wire (an empty nested message) became about a kilobyte in
/// memory once parsed, valued and checked: a 2 MB ACK of a million empty message ids took 740 MB. Clients
/// send a few thousand at most (the Java client's ack grouping flushes at 1,000).
pub const DEFAULT_MAX_REPEATED_ELEMENTS: usize = 100_000;

/// What is left of a parse's repeated elements, and what it skipped.
struct Budget {
    left: usize,
    elided: usize,
}

impl Budget {
    fn new(max_repeated: usize) -> Budget {
        Budget { left: max_repeated, elided: 0 }
    }

    /// Whether one more element is kept (else it is counted).
    fn take(&mut self) -> bool {
        if self.left == 0 {
            self.elided += 1;
            return false;
        }
        self.left -= 1;
        true
    }

    /// The packed values kept: the first `left` of them (the rest counted).
    fn take_packed<'a>(&mut self, kind: Kind, b: &'a [u8]) -> &'a [u8] {
        let width = match kind.wire_type() {
            1 => 8,
            5 => 4,
            _ => 0,
        };
        let count = b.len().checked_div(width).unwrap_or_else(|| b.iter().filter(|&&byte| byte & 0x80 == 0).count());
        if count <= self.left {
            self.left -= count;
            return b;
        }
        let keep = self.left;
        self.elided += count - keep;
        self.left = 0;
        let end = if width > 0 {
            keep * width
        } else {
            // after the keep-th byte that ends a varint
            b.iter()
                .enumerate()
                .filter(|(_, &byte)| byte & 0x80 == 0)
                .nth(keep.wrapping_sub(1))
                .map_or(0, |(i, _)| i + 1)
        };
        &b[..end]
    }
}

#[derive(Debug)]
pub struct WireError;

#[derive(Clone, Copy)]
pub enum Val<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Bytes(&'a [u8]),
}

pub enum Slot<'a> {
    Scalar(Val<'a>),
    Packed(&'a [u8]),
    Message(Parsed<'a>),
}

/// One message read off the wire: its known fields (position in the schema's field list, value) in wire
/// order, and the numbers of the fields the schema does not know.
pub struct Parsed<'a> {
    pub msg: usize,
    pub raw: &'a [u8],
    pub slots: Vec<(u16, Slot<'a>)>,
    pub unknown: Vec<u32>,
    /// Elements of repeated fields skipped beyond the parse's limit (set on the message a parse returns, over
    /// its whole tree; 0 on the messages within).
    pub elided: usize,
}

#[inline]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let mut result: u64 = 0;
    let mut shift = 0u32;
    while *pos < buf.len() {
        let b = buf[*pos];
        *pos += 1;
        if shift < 64 {
            result |= ((b & 0x7f) as u64) << shift;
        }
        if b & 0x80 == 0 {
            return Ok(result);
        }
        shift += 7;
        if shift >= 70 {
            return Err(WireError);
        }
    }
    Err(WireError)
}

fn skip_group(buf: &[u8], pos: &mut usize, number: u32, depth: u32) -> Result<(), WireError> {
    if depth > MAX_DEPTH {
        return Err(WireError);
    }
    loop {
        let key = read_varint(buf, pos)?;
        let (n, wt) = ((key >> 3) as u32, (key & 7) as u8);
        if wt == 4 {
            return if n == number { Ok(()) } else { Err(WireError) };
        }
        read_value(buf, pos, wt, n, depth + 1)?;
    }
}

#[inline]
fn read_value<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    wt: u8,
    number: u32,
    depth: u32,
) -> Result<Option<Val<'a>>, WireError> {
    Ok(Some(match wt {
        0 => Val::Varint(read_varint(buf, pos)?),
        1 => {
            let b = buf.get(*pos..*pos + 8).ok_or(WireError)?;
            *pos += 8;
            Val::Fixed64(u64::from_le_bytes(b.try_into().unwrap()))
        }
        2 => {
            let len = read_varint(buf, pos)?;
            let end = pos.checked_add(usize::try_from(len).map_err(|_| WireError)?).ok_or(WireError)?;
            let b = buf.get(*pos..end).ok_or(WireError)?;
            *pos = end;
            Val::Bytes(b)
        }
        5 => {
            let b = buf.get(*pos..*pos + 4).ok_or(WireError)?;
            *pos += 4;
            Val::Fixed32(u32::from_le_bytes(b.try_into().unwrap()))
        }
        3 => {
            skip_group(buf, pos, number, depth)?;
            return Ok(None);
        }
        _ => return Err(WireError),
    }))
}

pub fn parse<'a>(schema: &Schema, msg: usize, buf: &'a [u8]) -> Result<Parsed<'a>, WireError> {
    parse_limited(schema, msg, buf, DEFAULT_MAX_REPEATED_ELEMENTS)
}

/// [`parse`], keeping at most `max_repeated` elements of repeated fields over the message's tree.
pub fn parse_limited<'a>(
    schema: &Schema,
    msg: usize,
    buf: &'a [u8],
    max_repeated: usize,
) -> Result<Parsed<'a>, WireError> {
    let mut budget = Budget::new(max_repeated);
    let mut parsed = parse_at(schema, msg, buf, 0, &mut budget)?;
    parsed.elided = budget.elided;
    Ok(parsed)
}

/// [`parse`] into `out`, whose lists keep their capacity: a reader of many small messages (a batch's
/// entries) allocates once.
pub fn parse_into<'a>(
    schema: &Schema,
    msg: usize,
    buf: &'a [u8],
    out: &mut Parsed<'a>,
    max_repeated: usize,
) -> Result<(), WireError> {
    out.msg = msg;
    out.raw = buf;
    out.slots.clear();
    out.unknown.clear();
    let mut budget = Budget::new(max_repeated);
    parse_fields(schema, msg, buf, 0, out, &mut budget)?;
    out.elided = budget.elided;
    Ok(())
}

impl Parsed<'_> {
    /// An empty message, for [`parse_into`].
    pub fn empty() -> Parsed<'static> {
        Parsed { msg: 0, raw: &[], slots: Vec::new(), unknown: Vec::new(), elided: 0 }
    }
}

fn parse_at<'a>(
    schema: &Schema,
    msg: usize,
    buf: &'a [u8],
    depth: u32,
    budget: &mut Budget,
) -> Result<Parsed<'a>, WireError> {
    let mut out = Parsed { msg, raw: buf, slots: Vec::new(), unknown: Vec::new(), elided: 0 };
    parse_fields(schema, msg, buf, depth, &mut out, budget)?;
    Ok(out)
}

fn parse_fields<'a>(
    schema: &Schema,
    msg: usize,
    buf: &'a [u8],
    depth: u32,
    out: &mut Parsed<'a>,
    budget: &mut Budget,
) -> Result<(), WireError> {
    if depth > MAX_DEPTH {
        return Err(WireError);
    }
    let ty = &schema.messages[msg];
    let mut pos = 0usize;
    while pos < buf.len() {
        let key = read_varint(buf, &mut pos)?;
        let number = u32::try_from(key >> 3).unwrap_or(u32::MAX);
        let wt = (key & 7) as u8;
        if number == 0 || number > MAX_FIELD_NUMBER || wt == 4 {
            return Err(WireError);
        }
        let value = match read_value(buf, &mut pos, wt, number, depth)? {
            Some(v) => v,
            None => {
                out.unknown.push(number);
                continue;
            }
        };
        let Some(fi) = ty.field(number) else {
            out.unknown.push(number);
            continue;
        };
        let field = &ty.fields[fi];
        let expected = field.kind.wire_type();
        if field.repeated && wt == expected && !budget.take() {
            continue;
        }
        let slot = if wt == expected {
            match (field.kind, value) {
                (Kind::Message(sub), Val::Bytes(b)) => {
                    let child = parse_at(schema, sub, b, depth + 1, budget)?;
                    if !field.repeated {
                        // a singular message sent twice is merged, as parsing the concatenation would
                        if let Some((_, Slot::Message(prev))) =
                            out.slots.iter_mut().rev().find(|(i, _)| *i as usize == fi)
                        {
                            prev.slots.extend(child.slots);
                            prev.unknown.extend(child.unknown);
                            continue;
                        }
                    }
                    Slot::Message(child)
                }
                (Kind::Enum(e), Val::Varint(v)) => {
                    if !schema.enums[e].contains(v as i32) {
                        out.unknown.push(number); // a closed enum: a value it does not know is an unknown field
                        continue;
                    }
                    Slot::Scalar(value)
                }
                _ => Slot::Scalar(value),
            }
        } else if wt == 2 && field.repeated && expected != 2 {
            if let (Kind::Enum(e), Val::Bytes(b)) = (field.kind, value) {
                // unknown values of a packed closed enum become unknown fields; the known ones stay
                let mut p = 0;
                while p < b.len() {
                    let v = read_varint(b, &mut p)?;
                    if !schema.enums[e].contains(v as i32) && !out.unknown.contains(&number) {
                        out.unknown.push(number);
                    }
                }
            }
            match value {
                Val::Bytes(b) => Slot::Packed(budget.take_packed(field.kind, b)),
                _ => unreachable!(),
            }
        } else {
            out.unknown.push(number); // the wrong wire type for this field: upb keeps it as unknown
            continue;
        };
        out.slots.push((fi as u16, slot));
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------ values

fn scalar_value(schema: &'static Schema, kind: Kind, v: Val<'_>) -> Value {
    match (kind, v) {
        (Kind::Int32, Val::Varint(x)) => Value::from(x as i32),
        (Kind::Int64, Val::Varint(x)) => Value::from(x as i64),
        (Kind::UInt32, Val::Varint(x)) => Value::from(x as u32),
        (Kind::UInt64, Val::Varint(x)) => Value::from(x),
        (Kind::SInt32, Val::Varint(x)) => {
            let x = x as u32;
            Value::from(((x >> 1) as i32) ^ -((x & 1) as i32))
        }
        (Kind::SInt64, Val::Varint(x)) => Value::from(((x >> 1) as i64) ^ -((x & 1) as i64)),
        (Kind::Bool, Val::Varint(x)) => Value::Bool(x != 0),
        (Kind::Enum(e), Val::Varint(x)) => match schema.enums[e].name(x as i32) {
            Some(name) => Value::from(name),
            None => Value::from(x as i32),
        },
        (Kind::String, Val::Bytes(b)) => Value::Str(text(b)),
        (Kind::Bytes, Val::Bytes(b)) => Value::from(b64(b)),
        (Kind::Fixed32, Val::Fixed32(x)) => Value::from(x),
        (Kind::SFixed32, Val::Fixed32(x)) => Value::from(x as i32),
        (Kind::Float, Val::Fixed32(x)) => Value::Float(f32::from_bits(x) as f64),
        (Kind::Fixed64, Val::Fixed64(x)) => Value::from(x),
        (Kind::SFixed64, Val::Fixed64(x)) => Value::from(x as i64),
        (Kind::Double, Val::Fixed64(x)) => Value::Float(f64::from_bits(x)),
        _ => Value::Null, // unreachable: parse checked the wire type
    }
}

pub fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn packed_values<'a>(kind: Kind, b: &'a [u8]) -> Result<Vec<Val<'a>>, WireError> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < b.len() {
        out.push(match kind.wire_type() {
            0 => Val::Varint(read_varint(b, &mut p)?),
            1 => {
                let v = b.get(p..p + 8).ok_or(WireError)?;
                p += 8;
                Val::Fixed64(u64::from_le_bytes(v.try_into().unwrap()))
            }
            5 => {
                let v = b.get(p..p + 4).ok_or(WireError)?;
                p += 4;
                Val::Fixed32(u32::from_le_bytes(v.try_into().unwrap()))
            }
            _ => return Err(WireError),
        });
    }
    Ok(out)
}

impl<'a> Parsed<'a> {
    /// The message as a map of the JSON contract.
    pub fn to_value(&self, schema: &'static Schema) -> Value {
        let mut map = Map::with_capacity(self.slots.len() + usize::from(!self.unknown.is_empty()));
        if self.slots.is_sorted_by_key(|(f, _)| *f) {
            // as encoders write them: no reordering to pay for
            for run in self.slots.chunk_by(|a, b| a.0 == b.0) {
                self.push_field(&mut map, schema, run[0].0, run.iter().map(|(_, slot)| slot));
            }
        } else {
            let mut sorted: Vec<&(u16, Slot<'a>)> = self.slots.iter().collect();
            sorted.sort_by_key(|(f, _)| *f); // stable: wire order within a field
            for run in sorted.chunk_by(|a, b| a.0 == b.0) {
                self.push_field(&mut map, schema, run[0].0, run.iter().map(|(_, slot)| slot));
            }
        }
        if !self.unknown.is_empty() {
            let mut numbers = self.unknown.clone();
            numbers.sort_unstable();
            numbers.dedup();
            map.push(entry(crate::name!("_unknown_fields"), numbers.into_iter().map(Value::from).collect::<Vec<_>>()));
        }
        Value::Map(map)
    }

    /// Field ``fi`` (its occurrences on the wire: ``slots``) into ``map``, unless it holds nothing.
    fn push_field<'s>(
        &'s self,
        map: &mut Map,
        schema: &'static Schema,
        fi: u16,
        slots: impl Iterator<Item = &'s Slot<'a>>,
    ) {
        let field = &schema.messages[self.msg].fields[fi as usize];
        if let Some(value) = self.field_value(schema, field, slots) {
            map.push((Text::Name(&field.name), value));
        }
    }

    fn field_value<'s>(
        &'s self,
        schema: &'static Schema,
        field: &Field,
        slots: impl Iterator<Item = &'s Slot<'a>>,
    ) -> Option<Value> {
        if field.repeated {
            let mut list = Vec::new();
            for slot in slots {
                match slot {
                    Slot::Scalar(v) => list.push(scalar_value(schema, field.kind, *v)),
                    Slot::Message(m) => list.push(m.to_value(schema)),
                    Slot::Packed(b) => {
                        for v in packed_values(field.kind, b).unwrap_or_default() {
                            if let (Kind::Enum(e), Val::Varint(x)) = (field.kind, v) {
                                if !schema.enums[e].contains(x as i32) {
                                    continue;
                                }
                            }
                            list.push(scalar_value(schema, field.kind, v));
                        }
                    }
                }
            }
            return (!list.is_empty()).then_some(Value::List(list));
        }
        match slots.last()? {
            Slot::Scalar(v) => Some(scalar_value(schema, field.kind, *v)),
            Slot::Message(m) => Some(m.to_value(schema)),
            Slot::Packed(_) => None,
        }
    }

    // -------------------------------------------------------------------- typed access for the decoder

    /// The last varint on the wire under ``number`` at this message's top level, known or not (e.g. a
    /// closed-enum value the schema does not know, kept among the unknown fields).
    pub fn raw_unknown_varint(&self, number: u32) -> Option<u64> {
        if !self.unknown.contains(&number) {
            return None;
        }
        let (buf, mut pos, mut last) = (self.raw, 0usize, None);
        while pos < buf.len() {
            let key = read_varint(buf, &mut pos).ok()?;
            let (n, wt) = ((key >> 3) as u32, (key & 7) as u8);
            match read_value(buf, &mut pos, wt, n, 0).ok()? {
                Some(Val::Varint(v)) if n == number => last = Some(v),
                _ => {}
            }
        }
        last
    }

    fn last(&self, schema: &Schema, number: u32) -> Option<&Slot<'a>> {
        let fi = schema.messages[self.msg].field(number)? as u16;
        self.slots.iter().rev().find(|(f, _)| *f == fi).map(|(_, s)| s)
    }

    pub fn has(&self, schema: &Schema, number: u32) -> bool {
        self.last(schema, number).is_some()
    }

    pub fn varint(&self, schema: &Schema, number: u32) -> Option<u64> {
        match self.last(schema, number)? {
            Slot::Scalar(Val::Varint(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn bytes(&self, schema: &Schema, number: u32) -> Option<&'a [u8]> {
        match self.last(schema, number)? {
            Slot::Scalar(Val::Bytes(b)) => Some(b),
            _ => None,
        }
    }

    pub fn message(&self, schema: &Schema, number: u32) -> Option<&Parsed<'a>> {
        match self.last(schema, number)? {
            Slot::Message(m) => Some(m),
            _ => None,
        }
    }

    pub fn messages(&self, schema: &Schema, number: u32) -> impl Iterator<Item = &Parsed<'a>> {
        let fi = schema.messages[self.msg].field(number).map(|f| f as u16);
        self.slots.iter().filter_map(move |(f, s)| match s {
            Slot::Message(m) if Some(*f) == fi => Some(m),
            _ => None,
        })
    }

    /// The values of a repeated varint field (packed or not), e.g. a MESSAGE's ack_set.
    pub fn varints(&self, schema: &Schema, number: u32) -> Vec<u64> {
        let Some(fi) = schema.messages[self.msg].field(number) else { return Vec::new() };
        let kind = schema.messages[self.msg].fields[fi].kind;
        let mut out = Vec::new();
        for (f, s) in &self.slots {
            if *f as usize != fi {
                continue;
            }
            match s {
                Slot::Scalar(Val::Varint(v)) => out.push(*v),
                Slot::Packed(b) => {
                    out.extend(packed_values(kind, b).unwrap_or_default().into_iter().filter_map(|v| match v {
                        Val::Varint(x) => Some(x),
                        _ => None,
                    }))
                }
                _ => {}
            }
        }
        out
    }

    /// Field numbers present on the wire, known fields first (schema order), as ListFields would list them.
    pub fn present_numbers(&self, schema: &Schema) -> Vec<u32> {
        let ty = &schema.messages[self.msg];
        let mut numbers: Vec<u32> = self.slots.iter().map(|(f, _)| ty.fields[*f as usize].number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        numbers
    }

    /// The paths of required fields not set, as the runtime's FindInitializationErrors gives them.
    pub fn init_errors(&self, schema: &Schema) -> Vec<String> {
        let mut out = Vec::new();
        if !self.initialized(schema) {
            self.collect_init_errors(schema, "", &mut out);
        }
        out
    }

    /// Whether every required field is set, here and in the messages within (no paths made).
    fn initialized(&self, schema: &Schema) -> bool {
        let ty = &schema.messages[self.msg];
        ty.required.iter().all(|&fi| self.slots.iter().any(|(f, _)| *f == fi))
            && self.slots.iter().all(|(_, s)| match s {
                Slot::Message(m) => m.initialized(schema),
                _ => true,
            })
    }

    fn collect_init_errors(&self, schema: &Schema, prefix: &str, out: &mut Vec<String>) {
        let ty = &schema.messages[self.msg];
        for &fi in &ty.required {
            if !self.slots.iter().any(|(f, _)| *f == fi) {
                out.push(format!("{prefix}{}", ty.fields[fi as usize].name.as_str()));
            }
        }
        for &fi in &ty.message_fields {
            let field = &ty.fields[fi as usize];
            if field.repeated {
                let mut i = 0;
                for (f, s) in &self.slots {
                    if *f == fi {
                        if let Slot::Message(m) = s {
                            m.collect_init_errors(schema, &format!("{prefix}{}[{i}].", field.name.as_str()), out);
                        }
                        i += 1;
                    }
                }
            } else if let Some(Slot::Message(m)) = self.slots.iter().rev().find(|(f, _)| *f == fi).map(|(_, s)| s) {
                m.collect_init_errors(schema, &format!("{prefix}{}.", field.name.as_str()), out);
            }
        }
    }
}

/// Whether the complete fields of ``buf`` fit message ``msg``: known numbers with their wire types (a
/// repeated field may come packed); a field cut off at the end of ``buf`` is fine.
pub fn plausible_prefix(schema: &Schema, msg: usize, buf: &[u8]) -> bool {
    let ty = &schema.messages[msg];
    let mut pos = 0usize;
    while pos < buf.len() {
        let start = pos;
        let Ok(key) = read_varint(buf, &mut pos) else { return start + 10 > buf.len() };
        let (number, wt) = (key >> 3, (key & 7) as u8);
        let Some(field) = u32::try_from(number).ok().and_then(|n| ty.field(n)).map(|i| &ty.fields[i]) else {
            return false;
        };
        let expected = if field.repeated && wt == 2 { 2 } else { field.kind.wire_type() };
        if wt != expected {
            return false;
        }
        match wt {
            0 => {
                let at = pos;
                if read_varint(buf, &mut pos).is_err() {
                    return at + 10 > buf.len();
                }
            }
            2 => {
                let at = pos;
                match read_varint(buf, &mut pos) {
                    Ok(len) => pos = pos.saturating_add(len as usize),
                    Err(_) => return at + 10 > buf.len(),
                }
            }
            1 => pos += 8,
            _ => pos += 4,
        }
    }
    true
}
