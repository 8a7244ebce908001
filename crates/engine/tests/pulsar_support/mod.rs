//! Shared by the `pulsar_*` integration tests: the wire bytes they decode, made independently of the decoder.
//!
//! Commands and metadata are encoded by `prost-reflect` (DynamicMessage) over a descriptor pool compiled here by
//! `protox` from the .proto contract; frames, checksums (the `crc32c` crate) and compressed payloads (the codec
//! crates' compressors) are assembled by hand as the protocol lays them out. `expected` turns a DynamicMessage
//! into the value the decoder's JSON contract promises for it (pb.rs: fields in number order, enums by name,
//! bytes as base64, strings as text), without any of the decoder's code.
#![allow(dead_code)]

use pulsar_dissect_engine::model::Decoded;
use pulsar_dissect_engine::value::{Text, Value};

use std::io::Write;
use std::sync::OnceLock;

use base64::Engine as _;
use prost::Message as _;
use prost_reflect::{
    Cardinality, DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, ReflectMessage,
};

pub use prost_reflect::Value as PV;

#[path = "../rng/mod.rs"]
mod rng;
pub use rng::Rng;

pub const MIB: u64 = 1 << 20;

/// The descriptor pool of proto/pulsar (PulsarApi.proto and PulsarMarkers.proto), compiled once.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto/pulsar");
        let set = protox::compile(["PulsarApi.proto", "PulsarMarkers.proto"], [dir]).expect("the .proto compiles");
        DescriptorPool::from_file_descriptor_set(set).expect("a valid descriptor set")
    })
}

pub fn descriptor(name: &str) -> MessageDescriptor {
    let full = if name.contains('.') { name.to_owned() } else { format!("pulsar.proto.{name}") };
    pool().get_message_by_name(&full).unwrap_or_else(|| panic!("{full} is in the schema"))
}

// ------------------------------------------------------------------------------------------ values to set

pub fn int(v: i64) -> PV {
    PV::I64(v)
}

pub fn uint(v: u64) -> PV {
    PV::U64(v)
}

pub fn st(v: &str) -> PV {
    PV::String(v.to_owned())
}

pub fn by(v: &[u8]) -> PV {
    PV::Bytes(v.to_vec().into())
}

pub fn sub(m: DynamicMessage) -> PV {
    PV::Message(m)
}

pub fn list(items: Vec<PV>) -> PV {
    PV::List(items)
}

/// `v` made the kind the field holds: integers of any width, an enum given by its name (a string) or number.
fn coerce(kind: &Kind, v: PV) -> PV {
    let n = |v: &PV| match v {
        PV::I64(x) => *x as i128,
        PV::U64(x) => *x as i128,
        PV::I32(x) => *x as i128,
        PV::U32(x) => *x as i128,
        other => panic!("{other:?} is not an integer"),
    };
    match (kind, v) {
        (Kind::Int32 | Kind::Sint32 | Kind::Sfixed32, v @ (PV::I64(_) | PV::U64(_))) => PV::I32(n(&v) as i32),
        (Kind::Int64 | Kind::Sint64 | Kind::Sfixed64, v @ (PV::I64(_) | PV::U64(_))) => PV::I64(n(&v) as i64),
        (Kind::Uint32 | Kind::Fixed32, v @ (PV::I64(_) | PV::U64(_))) => PV::U32(n(&v) as u32),
        (Kind::Uint64 | Kind::Fixed64, v @ (PV::I64(_) | PV::U64(_))) => PV::U64(n(&v) as u64),
        (Kind::Enum(e), PV::String(name)) => {
            PV::EnumNumber(e.get_value_by_name(&name).unwrap_or_else(|| panic!("{name} in {}", e.full_name())).number())
        }
        (Kind::Enum(_), v @ (PV::I64(_) | PV::U64(_))) => PV::EnumNumber(n(&v) as i32),
        (Kind::Float, PV::F64(x)) => PV::F32(x as f32),
        (_, v) => v,
    }
}

/// A message of type `name` with `fields` set (by name; integers and enums as `coerce` takes them).
pub fn msg(name: &str, fields: &[(&str, PV)]) -> DynamicMessage {
    let desc = descriptor(name);
    let mut m = DynamicMessage::new(desc.clone());
    for (field, value) in fields {
        let fd = desc.get_field_by_name(field).unwrap_or_else(|| panic!("{field} in {}", desc.full_name()));
        let value = match value.clone() {
            PV::List(items) if fd.is_list() => PV::List(items.into_iter().map(|v| coerce(&fd.kind(), v)).collect()),
            v => coerce(&fd.kind(), v),
        };
        m.try_set_field(&fd, value).unwrap_or_else(|e| panic!("{field}: {e}"));
    }
    m
}

pub fn encode(m: &DynamicMessage) -> Vec<u8> {
    m.encode_to_vec()
}

/// The number of the BaseCommand type `type_name` (BaseCommand.Type).
pub fn type_number(type_name: &str) -> i32 {
    let base = descriptor("BaseCommand");
    let ty = base.get_field_by_name("type").expect("BaseCommand.type");
    let Kind::Enum(e) = ty.kind() else { panic!("type is an enum") };
    e.get_value_by_name(type_name).unwrap_or_else(|| panic!("{type_name} is a command type")).number()
}

/// The BaseCommand field carrying the sub-command of type `type_name`: its number is the type's.
pub fn sub_field(type_name: &str) -> FieldDescriptor {
    descriptor("BaseCommand").get_field(type_number(type_name) as u32).expect("a sub-command field")
}

/// The sub-command of type `type_name` with `fields` set.
pub fn sub_command(type_name: &str, fields: &[(&str, PV)]) -> DynamicMessage {
    let Kind::Message(m) = sub_field(type_name).kind() else { panic!("a message field") };
    msg(m.full_name(), fields)
}

/// BaseCommand { type, sub-command } encoded.
pub fn base_command(type_name: &str, sub_cmd: &DynamicMessage) -> Vec<u8> {
    let mut base = DynamicMessage::new(descriptor("BaseCommand"));
    base.set_field_by_name("type", PV::EnumNumber(type_number(type_name)));
    base.set_field(&sub_field(type_name), PV::Message(sub_cmd.clone()));
    encode(&base)
}

// ------------------------------------------------------------------------------------------------ frames

/// [TOTAL_SIZE][CMD_SIZE][command]: a command without payload.
pub fn simple_frame(command: &[u8]) -> Vec<u8> {
    let mut f = ((command.len() + 4) as u32).to_be_bytes().to_vec();
    f.extend((command.len() as u32).to_be_bytes());
    f.extend(command);
    f
}

/// The payload section after the command: ([0x0e02][size][BEM])? ([0x0e01][CRC32C])? [size][metadata][payload].
pub fn section(bem: Option<&[u8]>, crc: bool, metadata: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(bem) = bem {
        out.extend([0x0e, 0x02]);
        out.extend((bem.len() as u32).to_be_bytes());
        out.extend(bem);
    }
    let mut checked = (metadata.len() as u32).to_be_bytes().to_vec();
    checked.extend(metadata);
    checked.extend(payload);
    if crc {
        // CRC32C covers everything after the checksum field to the end of the frame
        out.extend([0x0e, 0x01]);
        out.extend(crc32c::crc32c(&checked).to_be_bytes());
    }
    out.extend(checked);
    out
}

/// [TOTAL_SIZE][CMD_SIZE][command][section]: TOTAL_SIZE counts everything after itself.
pub fn frame_with(command: &[u8], section: &[u8]) -> Vec<u8> {
    let mut f = ((4 + command.len() + section.len()) as u32).to_be_bytes().to_vec();
    f.extend((command.len() as u32).to_be_bytes());
    f.extend(command);
    f.extend(section);
    f
}

pub fn payload_frame(command: &[u8], bem: Option<&[u8]>, crc: bool, metadata: &[u8], payload: &[u8]) -> Vec<u8> {
    frame_with(command, &section(bem, crc, metadata, payload))
}

/// The SEND command of producer 7, sequence 42.
pub fn send_command() -> Vec<u8> {
    base_command("SEND", &sub_command("SEND", &[("producer_id", int(7)), ("sequence_id", int(42))]))
}

/// The MESSAGE command of consumer 3 for message 11:22, with `ack_set` when not empty.
pub fn message_command(ack_set: &[i64]) -> Vec<u8> {
    let id = msg("MessageIdData", &[("ledgerId", int(11)), ("entryId", int(22))]);
    let mut fields = vec![("consumer_id", int(3)), ("message_id", sub(id))];
    if !ack_set.is_empty() {
        fields.push(("ack_set", list(ack_set.iter().map(|&w| int(w)).collect())));
    }
    base_command("MESSAGE", &sub_command("MESSAGE", &fields))
}

/// MessageMetadata with its required fields (producer "p", sequence 42, published at 1.7e12 ms) and `more`.
pub fn metadata(more: &[(&str, PV)]) -> DynamicMessage {
    let mut fields =
        vec![("producer_name", st("p")), ("sequence_id", int(42)), ("publish_time", int(1_700_000_000_000))];
    fields.extend(more.iter().cloned());
    msg("MessageMetadata", &fields)
}

/// A SEND frame with a checksum: metadata `md`, payload `payload`.
pub fn send_frame(md: &DynamicMessage, payload: &[u8]) -> Vec<u8> {
    payload_frame(&send_command(), None, true, &encode(md), payload)
}

/// One batch entry: [SMM_SIZE][SingleMessageMetadata][payload].
pub fn batch_entry(smm: &DynamicMessage, payload: &[u8]) -> Vec<u8> {
    let smm = encode(smm);
    let mut out = (smm.len() as u32).to_be_bytes().to_vec();
    out.extend(smm);
    out.extend(payload);
    out
}

/// A SingleMessageMetadata whose payload_size is right for `payload`, with `more`.
pub fn smm(payload: &[u8], more: &[(&str, PV)]) -> DynamicMessage {
    let mut fields = vec![("payload_size", int(payload.len() as i64))];
    fields.extend(more.iter().cloned());
    msg("SingleMessageMetadata", &fields)
}

// ----------------------------------------------------------------------------------------------- codecs

pub const LZ4: i64 = 1;
pub const ZLIB: i64 = 2;
pub const ZSTD: i64 = 3;
pub const SNAPPY: i64 = 4;

/// `data` compressed as Pulsar's codecs write it: raw LZ4 block, zlib, zstd frame, raw snappy.
pub fn compress(codec: i64, data: &[u8]) -> Vec<u8> {
    match codec {
        LZ4 => lz4_flex::block::compress(data),
        ZLIB => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        ZSTD => zstd::bulk::compress(data, 3).unwrap(),
        SNAPPY => snap::raw::Encoder::new().compress_vec(data).unwrap(),
        _ => panic!("codec {codec}"),
    }
}

/// zlib as Java's Deflater with SYNC_FLUSH writes it: the stream is never finished (no final block).
pub fn zlib_sync_flushed(data: &[u8]) -> Vec<u8> {
    let mut c = flate2::Compress::new(flate2::Compression::default(), true);
    let mut out = Vec::with_capacity(data.len() + 64);
    c.compress_vec(data, &mut out, flate2::FlushCompress::Sync).unwrap();
    assert_eq!(c.total_in() as usize, data.len(), "the whole input went in");
    out
}

// -------------------------------------------------------------------------------------- expected values

fn scalar(kind: &Kind, v: &PV) -> Value {
    match (kind, v) {
        (Kind::Enum(e), PV::EnumNumber(n)) => match e.get_value(*n) {
            Some(ev) => Value::Str(Text::Owned(ev.name().to_owned())),
            None => Value::Int(*n as i64),
        },
        (_, PV::Bool(b)) => Value::Bool(*b),
        (_, PV::I32(x)) => Value::Int(*x as i64),
        (_, PV::I64(x)) => Value::Int(*x),
        (_, PV::U32(x)) => Value::Int(*x as i64),
        (_, PV::U64(x)) => match i64::try_from(*x) {
            Ok(x) => Value::Int(x),
            Err(_) => Value::UInt(*x),
        },
        (_, PV::F32(x)) => Value::Float(*x as f64),
        (_, PV::F64(x)) => Value::Float(*x),
        (_, PV::String(s)) => Value::Str(Text::Owned(s.clone())),
        (_, PV::Bytes(b)) => Value::Str(Text::Owned(base64::engine::general_purpose::STANDARD.encode(b))),
        (_, PV::Message(m)) => expected(m),
        (_, other) => panic!("no expectation for {other:?}"),
    }
}

/// What the decoder's JSON contract promises for `m`: the fields set, in field-number order.
pub fn expected(m: &DynamicMessage) -> Value {
    let mut fields: Vec<FieldDescriptor> = m.descriptor().fields().filter(|f| m.has_field(f)).collect();
    fields.sort_by_key(FieldDescriptor::number);
    let mut map = Vec::new();
    for f in fields {
        let v = m.get_field(&f);
        let value = match &*v {
            PV::List(items) => Value::List(items.iter().map(|i| scalar(&f.kind(), i)).collect()),
            other => scalar(&f.kind(), other),
        };
        map.push((Text::Owned(f.name().to_owned()), value));
    }
    Value::Map(map)
}

/// A message of type `desc` with every required field set, recursively: integers from the field number (so
/// that each differs from its default), strings "f<number>", bytes [number], enums their last value.
pub fn required_filled(desc: &MessageDescriptor) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    for f in desc.fields().filter(|f| f.cardinality() == Cardinality::Required) {
        let n = f.number();
        let v = match f.kind() {
            Kind::Message(sub) => PV::Message(required_filled(&sub)),
            Kind::Enum(e) => PV::EnumNumber(e.values().last().expect("an enum value").number()),
            Kind::String => PV::String(format!("f{n}")),
            Kind::Bytes => PV::Bytes(vec![n as u8, 0xff].into()),
            Kind::Bool => PV::Bool(true),
            Kind::Double => PV::F64(n as f64 + 0.5),
            Kind::Float => PV::F32(n as f32 + 0.5),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => PV::I32(-(n as i32) - 1),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => PV::I64(-(n as i64) - 1),
            Kind::Uint32 | Kind::Fixed32 => PV::U32(n + 100),
            Kind::Uint64 | Kind::Fixed64 => PV::U64(n as u64 + 1000),
        };
        m.set_field(&f, v);
    }
    m
}

// ------------------------------------------------------------------------------------------ decoded frames

/// A whole frame, fully decoded, with a 1 MiB decompression limit.
pub fn full(frame: &[u8]) -> Decoded {
    pulsar_dissect_engine::protocols::pulsar::decode(frame, 0, MIB, false)
}

pub fn ids(d: &Decoded) -> Vec<&str> {
    d.findings.iter().map(|f| f.id.as_str()).collect()
}

/// The param `key` of the first finding `id`.
pub fn param<'d>(d: &'d Decoded, id: &str, key: &str) -> Option<&'d Value> {
    let f = d.findings.iter().find(|f| f.id.as_str() == id)?;
    f.params.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
}

pub fn json(value: &Value) -> String {
    let mut out = Vec::new();
    value.write_json(&mut out);
    String::from_utf8(out).expect("JSON is UTF-8")
}

pub fn s(v: &str) -> Value {
    Value::Str(Text::Owned(v.to_owned()))
}

/// A map value from (key, value) pairs.
pub fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (Text::Owned(k.to_owned()), v)).collect())
}

pub fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

// ------------------------------------------------------------------------------------------ differential

/// Whether the runtime's message holds nothing the JSON contract shows differently: no unknown fields, no enum
/// value the schema does not know (prost-reflect keeps those as open-enum numbers, the contract as unknown
/// fields), no NaN (which equals nothing).
pub fn comparable(m: &DynamicMessage) -> bool {
    if m.unknown_fields().next().is_some() {
        return false;
    }
    m.fields().all(|(f, v)| {
        let values: Vec<&PV> = match v {
            PV::List(items) => items.iter().collect(),
            other => vec![other],
        };
        values.into_iter().all(|v| match (f.kind(), v) {
            (Kind::Enum(e), PV::EnumNumber(n)) => e.get_value(*n).is_some(),
            (_, PV::Message(sub)) => comparable(sub),
            (_, PV::F32(x)) => !x.is_nan(),
            (_, PV::F64(x)) => !x.is_nan(),
            _ => true,
        })
    })
}

/// `value` without the decoder's `_unknown_fields` entries, at any depth.
pub fn without_unknown_fields(value: &Value) -> Value {
    match value {
        Value::Map(entries) => Value::Map(
            entries
                .iter()
                .filter(|(k, _)| k.as_str() != "_unknown_fields")
                .map(|(k, v)| (k.clone(), without_unknown_fields(v)))
                .collect(),
        ),
        Value::List(items) => Value::List(items.iter().map(without_unknown_fields).collect()),
        other => other.clone(),
    }
}

/// A length-delimited field `number` holding `bytes`.
pub fn field_bytes(number: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for mut v in [(number as u64) << 3 | 2, bytes.len() as u64] {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    out.extend(bytes);
    out
}
