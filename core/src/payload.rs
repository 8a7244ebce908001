//! The payload section of SEND and MESSAGE frames (after the BaseCommand, big-endian):
//!
//! ```text
//! ([0x0e02][BEM_SIZE u32][BrokerEntryMetadata])?   broker → client only
//! ([0x0e01][CRC32C u32])?                           CRC32C over everything after it to the end of the frame
//! [METADATA_SIZE u32][MessageMetadata][payload]
//! ```
//!
//! The payload is then decrypted (impossible here), decompressed and, when ``num_messages_in_batch`` is
//! present, split into ``[SMM_SIZE u32][SingleMessageMetadata][payload]`` entries. Every message is a plain
//! dict: ``payload_size`` and ``payload`` always, then only the fields present on the wire.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::codecs::{self, Problem};
use crate::pb::{self, b64, text, Parsed};
use crate::{finding, Core};

const MAGIC_CRC32C: u16 = 0x0e01;
const MAGIC_BROKER_ENTRY_METADATA: u16 = 0x0e02;

pub struct Section<'py> {
    pub checksum: &'static str,
    pub checksum_wire: Option<u32>,
    pub checksum_computed: Option<u32>,
    pub broker_entry_metadata: Option<Bound<'py, PyAny>>,
    pub metadata: Option<Bound<'py, PyAny>>,
    pub metadata_size: Option<usize>,
    pub compression: i64,
    pub payload_size: usize,
    pub uncompressed_size: Option<usize>,
    pub encrypted: bool,
    pub messages: Bound<'py, PyList>,
    pub marker: Option<Bound<'py, PyAny>>,
    pub findings: Bound<'py, PyList>,
    pub records: Option<Bound<'py, PyList>>,
}

impl<'py> Section<'py> {
    pub fn into_py(self, py: Python<'py>, core: &Core) -> PyResult<Bound<'py, PyAny>> {
        use pyo3::IntoPyObjectExt;
        // positional, in PayloadSection's field order: no keyword dict to build and parse per frame
        let args = [
            self.checksum.into_bound_py_any(py)?,
            self.checksum_wire.into_bound_py_any(py)?,
            self.checksum_computed.into_bound_py_any(py)?,
            self.broker_entry_metadata.into_bound_py_any(py)?,
            self.metadata.into_bound_py_any(py)?,
            self.metadata_size.into_bound_py_any(py)?,
            self.compression.into_bound_py_any(py)?,
            self.payload_size.into_bound_py_any(py)?,
            self.uncompressed_size.into_bound_py_any(py)?,
            self.encrypted.into_bound_py_any(py)?,
            self.messages.into_any(),
            self.marker.into_bound_py_any(py)?,
            self.findings.into_any(),
            self.records.into_bound_py_any(py)?,
        ];
        core.section_class.bind(py).call1(pyo3::types::PyTuple::new(py, args)?)
    }
}

fn u16_at(b: &[u8], pos: usize) -> u16 {
    u16::from_be_bytes([b[pos], b[pos + 1]])
}

fn u32_at(b: &[u8], pos: usize) -> u32 {
    u32::from_be_bytes(b[pos..pos + 4].try_into().unwrap())
}

fn int<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> Bound<'py, PyAny> {
    use pyo3::IntoPyObjectExt;
    v.into_bound_py_any(py).expect("an int converts")
}

fn parse_error(core: &Core, msg: usize) -> String {
    format!("Error parsing message with type '{}'", core.schema.messages[msg].full_name)
}

#[allow(clippy::too_many_arguments)]
pub fn decode_section<'py>(
    py: Python<'py>,
    core: &Core,
    frame: &[u8],
    mut pos: usize,
    damaged: bool,
    ack_set: Option<&[u64]>,
    max_decompressed: u64,
    brief: bool,
) -> PyResult<Section<'py>> {
    let mut sec = Section {
        checksum: "absent",
        checksum_wire: None,
        checksum_computed: None,
        broker_entry_metadata: None,
        metadata: None,
        metadata_size: None,
        compression: 0,
        payload_size: 0,
        uncompressed_size: None,
        encrypted: false,
        messages: PyList::empty(py),
        marker: None,
        findings: PyList::empty(py),
        records: None,
    };
    let end = frame.len();
    let schema = &core.schema;
    if end - pos >= 2 && u16_at(frame, pos) == MAGIC_BROKER_ENTRY_METADATA {
        if end - pos < 6 {
            sec.findings.append(finding(py, core, "payload.broker_entry_metadata", &[("case", PyString::new(py, "cut").into_any())])?)?;
            return Ok(sec);
        }
        let size = u32_at(frame, pos + 2) as usize;
        let start = pos + 6;
        if start + size > end {
            sec.findings.append(finding(py, core, "payload.broker_entry_metadata", &[
                ("case", PyString::new(py, "size").into_any()),
                ("size", int(py, size)),
            ])?)?;
            return Ok(sec);
        }
        match pb::parse(schema, core.m.broker_entry_metadata, &frame[start..start + size]) {
            Ok(bem) => sec.broker_entry_metadata = Some(bem.to_dict(py, schema)?.into_any()),
            Err(_) => sec.findings.append(finding(py, core, "payload.broker_entry_metadata", &[
                ("case", PyString::new(py, "unparsable").into_any()),
                ("error", PyString::new(py, &parse_error(core, core.m.broker_entry_metadata)).into_any()),
            ])?)?,
        }
        pos = start + size;
    }
    if end - pos >= 2 && u16_at(frame, pos) == MAGIC_CRC32C {
        if end - pos < 6 {
            sec.findings.append(finding(py, core, "payload.checksum_cut", &[])?)?;
            return Ok(sec);
        }
        let wire = u32_at(frame, pos + 2);
        sec.checksum_wire = Some(wire);
        pos += 6;
        if damaged {
            sec.checksum = "unverified";
        } else {
            let computed = crc32c::crc32c(&frame[pos..]);
            sec.checksum_computed = Some(computed);
            if computed == wire {
                sec.checksum = "valid";
            } else {
                sec.checksum = "invalid";
                sec.findings.append(finding(py, core, "checksum.invalid", &[("wire", int(py, wire)), ("computed", int(py, computed))])?)?;
            }
        }
    }
    if end - pos < 4 {
        sec.findings.append(finding(py, core, "payload.metadata_size", &[])?)?;
        return Ok(sec);
    }
    let msize = u32_at(frame, pos) as usize;
    pos += 4;
    if pos + msize > end {
        sec.findings.append(finding(py, core, "payload.metadata_size", &[("size", int(py, msize)), ("left", int(py, end - pos))])?)?;
        return Ok(sec);
    }
    let md = match pb::parse(schema, core.m.metadata, &frame[pos..pos + msize]) {
        Ok(md) => md,
        Err(_) => {
            sec.findings.append(finding(py, core, "payload.metadata_unparsable", &[
                ("error", PyString::new(py, &parse_error(core, core.m.metadata)).into_any()),
            ])?)?;
            return Ok(sec);
        }
    };
    sec.metadata = Some(if brief { brief_metadata(py, core, &md)? } else { md.to_dict(py, schema)?.into_any() });
    sec.metadata_size = Some(msize);
    let errors = md.init_errors(schema);
    if !errors.is_empty() {
        sec.findings.append(finding(py, core, "payload.metadata_missing_required", &[("fields", PyList::new(py, errors)?.into_any())])?)?;
    }
    let payload = &frame[pos + msize..];
    sec.payload_size = payload.len();
    let f = &core.m;
    if damaged {
        sec.findings.append(finding(py, core, "payload.incomplete", &[("captured", int(py, payload.len()))])?)?;
        let msg = PyDict::new(py);
        msg.set_item(pyo3::intern!(py, "payload_size"), payload.len())?;
        msg.set_item(pyo3::intern!(py, "payload"), py.None())?;
        if md.has(schema, f.chunk_id) && md.has(schema, f.uuid) {
            // a damaged chunk: its message is lost (chunk.lost)
            msg.set_item(pyo3::intern!(py, "chunk_id"), get_i32(&md, core, f.chunk_id))?;
            msg.set_item(pyo3::intern!(py, "num_chunks"), get_i32(&md, core, f.num_chunks_from_msg))?;
            msg.set_item(pyo3::intern!(py, "uuid"), text(py, md.bytes(schema, f.uuid).unwrap_or_default()))?;
        }
        sec.messages.append(msg)?;
        return Ok(sec);
    }
    decode_messages(py, core, &mut sec, &md, payload, ack_set, max_decompressed)?;
    Ok(sec)
}

fn get_i32(md: &Parsed, core: &Core, number: u32) -> i32 {
    md.varint(&core.schema, number).map(|v| v as i32).unwrap_or(0)
}

fn properties<'py>(py: Python<'py>, core: &Core, md: &Parsed, number: u32) -> PyResult<Bound<'py, PyDict>> {
    let schema = &core.schema;
    let out = PyDict::new(py);
    for kv in md.messages(schema, number) {
        let key = text(py, kv.bytes(schema, core.m.kv_key).unwrap_or_default());
        let value = text(py, kv.bytes(schema, core.m.kv_value).unwrap_or_default());
        out.set_item(key, value)?;
    }
    Ok(out)
}

fn decode_messages<'py>(
    py: Python<'py>,
    core: &Core,
    sec: &mut Section<'py>,
    md: &Parsed,
    payload: &[u8],
    ack_set: Option<&[u64]>,
    max_decompressed: u64,
) -> PyResult<()> {
    let schema = &core.schema;
    let f = &core.m;
    let mut compression = md.varint(schema, f.compression).map(|v| v as i32 as i64).unwrap_or(0);
    if !md.has(schema, f.compression) {
        // a closed enum: a codec this schema does not know (a newer client) parses as absent and would read as
        // NONE; never treat such a payload as uncompressed
        if let Some(raw) = md.raw_unknown_varint(f.compression) {
            compression = raw as i64;
        }
    }
    sec.compression = compression;
    let sequence_id = md.varint(schema, f.sequence_id).unwrap_or(0);
    if md.messages(schema, f.encryption_keys).next().is_some() {
        // the payload (compressed, batched) is ciphertext; the metadata stays in the clear
        sec.encrypted = true;
        if md.has(schema, f.num_messages_in_batch) {
            // one placeholder per message, so counts stay right although sizes and contents are unknown
            for i in 0..get_i32(md, core, f.num_messages_in_batch).max(0) {
                let msg = PyDict::new(py);
                msg.set_item(pyo3::intern!(py, "payload_size"), py.None())?;
                msg.set_item(pyo3::intern!(py, "payload"), py.None())?;
                msg.set_item(pyo3::intern!(py, "batch_index"), i)?;
                msg.set_item(pyo3::intern!(py, "encrypted"), true)?;
                sec.messages.append(msg)?;
            }
        } else {
            let msg = single_message(py, core, md, None, payload.len())?;
            msg.set_item(pyo3::intern!(py, "encrypted"), true)?;
            sec.messages.append(msg)?;
        }
        return Ok(());
    }
    if md.has(schema, f.chunk_id) && md.has(schema, f.uuid) {
        // a chunk is a slice of the (compressed) whole message: decompressed only after reassembly
        let msg = PyDict::new(py);
        msg.set_item(pyo3::intern!(py, "payload_size"), payload.len())?;
        msg.set_item(pyo3::intern!(py, "payload"), PyBytes::new(py, payload))?;
        msg.set_item(pyo3::intern!(py, "sequence_id"), sequence_id)?;
        msg.set_item(pyo3::intern!(py, "properties"), properties(py, core, md, f.properties)?)?;
        msg.set_item(pyo3::intern!(py, "chunk_id"), get_i32(md, core, f.chunk_id))?;
        msg.set_item(pyo3::intern!(py, "num_chunks"), get_i32(md, core, f.num_chunks_from_msg))?;
        msg.set_item(pyo3::intern!(py, "uuid"), text(py, md.bytes(schema, f.uuid).unwrap_or_default()))?;
        sec.messages.append(msg)?;
        return Ok(());
    }
    let mut data: Cow<[u8]> = Cow::Borrowed(payload);
    if compression != 0 {
        let declared = if md.has(schema, f.uncompressed_size) { md.varint(schema, f.uncompressed_size).map(|v| v as u32 as u64) } else { None };
        let result = codecs::decompress(compression, payload, declared, max_decompressed);
        if let Some(problem) = &result.problem {
            sec.findings.append(decompression_finding(py, core, problem)?)?;
        }
        match result.data {
            None => {
                let msg = PyDict::new(py);
                msg.set_item(pyo3::intern!(py, "payload_size"), payload.len())?;
                msg.set_item(pyo3::intern!(py, "payload"), py.None())?;
                msg.set_item(pyo3::intern!(py, "sequence_id"), sequence_id)?;
                sec.messages.append(msg)?;
                return Ok(());
            }
            Some(out) => {
                sec.uncompressed_size = Some(out.len());
                data = Cow::Owned(out.into());
            }
        }
    }
    if md.has(schema, f.marker_type) {
        decode_marker(py, core, sec, get_i32(md, core, f.marker_type), &data)?;
    }
    if md.has(schema, f.num_messages_in_batch) {
        split_batch(py, core, &data, get_i32(md, core, f.num_messages_in_batch) as i64, sec, ack_set)?;
        return Ok(());
    }
    let msg = single_message(py, core, md, Some(&data), data.len())?;
    sec.messages.append(msg)?;
    Ok(())
}

pub fn decompression_finding<'py>(py: Python<'py>, core: &Core, problem: &Problem) -> PyResult<Bound<'py, PyAny>> {
    let s = |v: &str| PyString::new(py, v).into_any();
    let mut params: Vec<(&str, Bound<'py, PyAny>)> = vec![("case", s(problem.case()))];
    match problem {
        Problem::UnknownCodec { codec } => params.push(("codec", int(py, *codec))),
        Problem::OverLimit { codec, declared, limit } => {
            params.extend([("codec", s(codec)), ("declared", int(py, *declared)), ("limit", int(py, *limit))])
        }
        Problem::BombDeclared { codec, declared } => params.extend([("codec", s(codec)), ("declared", int(py, *declared))]),
        Problem::BombLimit { codec, limit } => params.extend([("codec", s(codec)), ("limit", int(py, *limit))]),
        Problem::Failed { codec, error } => params.extend([("codec", s(codec)), ("error", s(error))]),
        Problem::SizeMismatch { codec, declared, actual } => {
            params.extend([("codec", s(codec)), ("declared", int(py, *declared)), ("actual", int(py, *actual))])
        }
    }
    finding(py, core, "payload.decompression", &params)
}

/// A non-batched message: its per-message fields live in the MessageMetadata.
fn single_message<'py>(py: Python<'py>, core: &Core, md: &Parsed, payload: Option<&[u8]>, size: usize) -> PyResult<Bound<'py, PyDict>> {
    let schema = &core.schema;
    let f = &core.m;
    let msg = PyDict::new(py);
    msg.set_item(pyo3::intern!(py, "payload_size"), size)?;
    match payload {
        Some(p) => msg.set_item(pyo3::intern!(py, "payload"), PyBytes::new(py, p))?,
        None => msg.set_item(pyo3::intern!(py, "payload"), py.None())?,
    }
    msg.set_item(pyo3::intern!(py, "sequence_id"), md.varint(schema, f.sequence_id).unwrap_or(0))?;
    if let Some(key) = md.bytes(schema, f.partition_key) {
        msg.set_item(pyo3::intern!(py, "partition_key"), text(py, key))?;
    }
    if let Some(key) = md.bytes(schema, f.ordering_key) {
        msg.set_item(pyo3::intern!(py, "ordering_key"), PyBytes::new(py, key))?;
    }
    msg.set_item(pyo3::intern!(py, "properties"), properties(py, core, md, f.properties)?)?;
    if let Some(t) = md.varint(schema, f.event_time) {
        msg.set_item(pyo3::intern!(py, "event_time"), t)?;
    }
    if md.varint(schema, f.null_value).unwrap_or(0) != 0 {
        msg.set_item(pyo3::intern!(py, "null_value"), true)?;
    }
    if md.varint(schema, f.null_partition_key).unwrap_or(0) != 0 {
        msg.set_item(pyo3::intern!(py, "null_partition_key"), true)?;
    }
    Ok(msg)
}

// The MessageMetadata fields one-line views show and the session reads: what a summary decode keeps, in
// this order (the order of the record's keys).
pub const BRIEF_METADATA: [&str; 12] = [
    "producer_name", "compression", "uncompressed_size", "num_messages_in_batch", "schema_version", "encryption_algo",
    "marker_type", "uuid", "chunk_id", "num_chunks_from_msg", "total_chunk_msg_size", "deliver_at_time",
];

fn brief_metadata<'py>(py: Python<'py>, core: &Core, md: &Parsed) -> PyResult<Bound<'py, PyAny>> {
    let schema = &core.schema;
    let out = PyDict::new(py);
    for (name, number) in &core.m.brief {
        if !md.has(schema, *number) {
            continue;
        }
        let value: Bound<'py, PyAny> = match *name {
            "compression" => {
                let v = md.varint(schema, *number).unwrap_or(0) as i32;
                match core.compression_names.get(&v) {
                    Some(n) => PyString::new(py, n).into_any(),
                    None => int(py, v),
                }
            }
            "schema_version" => PyString::new(py, &b64(md.bytes(schema, *number).unwrap_or_default())).into_any(),
            "producer_name" | "encryption_algo" | "uuid" => text(py, md.bytes(schema, *number).unwrap_or_default()).into_any(),
            "uncompressed_size" => int(py, md.varint(schema, *number).unwrap_or(0) as u32),
            "deliver_at_time" => int(py, md.varint(schema, *number).unwrap_or(0) as i64),
            _ => int(py, md.varint(schema, *number).unwrap_or(0) as i32),
        };
        out.set_item(*name, value)?;
    }
    let keys = PyList::empty(py);
    for k in md.messages(schema, core.m.encryption_keys) {
        let d = PyDict::new(py);
        d.set_item(pyo3::intern!(py, "key"), text(py, k.bytes(schema, core.m.ek_key).unwrap_or_default()))?;
        keys.append(d)?;
    }
    if !keys.is_empty() {
        out.set_item(pyo3::intern!(py, "encryption_keys"), keys)?;
    }
    Ok(out.into_any())
}

fn batch_problem<'py>(py: Python<'py>, core: &Core, entry: usize, case: &str, more: &[(&str, Bound<'py, PyAny>)]) -> PyResult<Bound<'py, PyAny>> {
    let mut params: Vec<(&str, Bound<'py, PyAny>)> = vec![("entry", int(py, entry)), ("case", PyString::new(py, case).into_any())];
    params.extend(more.iter().cloned());
    finding(py, core, "batch.malformed", &params)
}

/// Split a batch payload into its entries; keep every readable entry even when the batch is damaged.
fn split_batch<'py>(
    py: Python<'py>,
    core: &Core,
    payload: &[u8],
    expected: i64,
    sec: &mut Section<'py>,
    ack_set: Option<&[u64]>,
) -> PyResult<()> {
    let schema = &core.schema;
    let end = payload.len();
    let mut pos = 0usize;
    let mut index = 0usize;
    let problems = &sec.findings;
    while pos < end {
        if end - pos < 4 {
            problems.append(batch_problem(py, core, index, "stray", &[("left", int(py, end - pos))])?)?;
            break;
        }
        let smm_size = u32_at(payload, pos) as usize;
        pos += 4;
        if pos + smm_size > end {
            problems.append(batch_problem(py, core, index, "metadata_size", &[("size", int(py, smm_size))])?)?;
            break;
        }
        let smm = match pb::parse(schema, core.m.single, &payload[pos..pos + smm_size]) {
            Ok(smm) => smm,
            Err(_) => {
                let error = PyString::new(py, &parse_error(core, core.m.single)).into_any();
                problems.append(batch_problem(py, core, index, "unparsable", &[("error", error)])?)?;
                break;
            }
        };
        pos += smm_size;
        let msg = PyDict::new(py);
        msg.set_item(pyo3::intern!(py, "payload_size"), -1)?;
        msg.set_item(pyo3::intern!(py, "payload"), py.None())?;
        msg.set_item(pyo3::intern!(py, "batch_index"), index)?;
        msg.set_item(pyo3::intern!(py, "properties"), properties(py, core, &smm, 1)?)?;
        // SingleMessageMetadata, by field number: 2 partition_key, 4 compacted_out, 5 event_time,
        // 7 ordering_key, 8 sequence_id, 9 null_value, 10 null_partition_key
        for number in smm.present_numbers(schema) {
            match number {
                2 => msg.set_item(pyo3::intern!(py, "partition_key"), text(py, smm.bytes(schema, 2).unwrap_or_default()))?,
                4 => msg.set_item(pyo3::intern!(py, "compacted_out"), smm.varint(schema, 4).unwrap_or(0) != 0)?,
                5 => msg.set_item(pyo3::intern!(py, "event_time"), smm.varint(schema, 5).unwrap_or(0))?,
                7 => msg.set_item(pyo3::intern!(py, "ordering_key"), PyBytes::new(py, smm.bytes(schema, 7).unwrap_or_default()))?,
                8 => msg.set_item(pyo3::intern!(py, "sequence_id"), smm.varint(schema, 8).unwrap_or(0))?,
                9 => msg.set_item(pyo3::intern!(py, "null_value"), smm.varint(schema, 9).unwrap_or(0) != 0)?,
                10 => msg.set_item(pyo3::intern!(py, "null_partition_key"), smm.varint(schema, 10).unwrap_or(0) != 0)?,
                _ => {}
            }
        }
        let Some(size) = smm.varint(schema, 3).map(|v| v as i32 as i64) else {
            problems.append(batch_problem(py, core, index, "no_payload_size", &[])?)?;
            break;
        };
        if size < 0 || pos + size as usize > end {
            problems.append(batch_problem(py, core, index, "payload_size", &[("size", int(py, size)), ("left", int(py, end - pos))])?)?;
            break;
        }
        let size = size as usize;
        msg.set_item(pyo3::intern!(py, "payload_size"), size)?;
        msg.set_item(pyo3::intern!(py, "payload"), PyBytes::new(py, &payload[pos..pos + size]))?;
        pos += size;
        if let Some(words) = ack_set {
            if !words.is_empty() && !bit(words, index) {
                msg.set_item(pyo3::intern!(py, "acked"), true)?;
            }
        }
        sec.messages.append(msg)?;
        index += 1;
    }
    if sec.messages.len() as i64 != expected {
        problems.append(finding(py, core, "batch.count_mismatch", &[("entries", int(py, sec.messages.len())), ("expected", int(py, expected))])?)?;
    }
    Ok(())
}

/// java.util.BitSet.toLongArray layout: bit i lives in word i / 64 at position i % 64.
fn bit(words: &[u64], i: usize) -> bool {
    words.get(i >> 6).map(|w| (w >> (i & 63)) & 1 == 1).unwrap_or(false)
}

fn decode_marker<'py>(py: Python<'py>, core: &Core, sec: &mut Section<'py>, marker_type: i32, payload: &[u8]) -> PyResult<()> {
    let Some(&msg) = core.m.markers.get(&marker_type) else {
        return Ok(()); // transaction markers carry no body
    };
    match pb::parse(&core.schema, msg, payload) {
        Ok(m) => sec.marker = Some(m.to_dict(py, &core.schema)?.into_any()),
        Err(_) => {
            let full = &core.schema.messages[msg].full_name;
            let short = full.rsplit('.').next().unwrap_or(full);
            sec.findings.append(finding(py, core, "marker.unparsable", &[
                ("marker", PyString::new(py, short).into_any()),
                ("error", PyString::new(py, &parse_error(core, msg)).into_any()),
            ])?)?;
        }
    }
    Ok(())
}

// The keys of a message record after payload_size, payload_sha256 and message_id, in this order.
const RECORD_ORDER: [&str; 14] = [
    "batch_index", "sequence_id", "partition_key", "ordering_key", "properties", "event_time", "null_value",
    "null_partition_key", "compacted_out", "acked", "encrypted", "chunk_id", "num_chunks", "uuid",
];

/// RECORD_ORDER as Python strings, made once (``intern!`` keeps each in a static).
fn record_keys(py: Python<'_>) -> [&Bound<'_, PyString>; 14] {
    use pyo3::intern;
    [
        intern!(py, "batch_index"), intern!(py, "sequence_id"), intern!(py, "partition_key"),
        intern!(py, "ordering_key"), intern!(py, "properties"), intern!(py, "event_time"), intern!(py, "null_value"),
        intern!(py, "null_partition_key"), intern!(py, "compacted_out"), intern!(py, "acked"),
        intern!(py, "encrypted"), intern!(py, "chunk_id"), intern!(py, "num_chunks"), intern!(py, "uuid"),
    ]
}

/// The records of a frame's messages (the JSON contract's ``messages``): sizes, the payload's SHA-256, for a
/// MESSAGE frame each one's id (``base``: the command's message_id), then the fields present, ordering_key
/// as text when UTF-8 (else ``ordering_key_b64``). The payload itself stays in the messages, for the session
/// and ``--payload``.
pub fn message_records<'py>(py: Python<'py>, messages: &Bound<'py, PyList>, base: Option<&Bound<'py, PyDict>>)
    -> PyResult<Bound<'py, PyList>> {
    use sha2::{Digest, Sha256};
    let out = PyList::empty(py);
    let minus_one = int(py, -1);
    let keys = record_keys(py);
    for m in messages.iter() {
        let m = m.cast::<PyDict>()?;
        let rec = PyDict::new(py);
        rec.set_item(pyo3::intern!(py, "payload_size"), m.get_item(pyo3::intern!(py, "payload_size"))?)?;
        match m.get_item(pyo3::intern!(py, "payload"))? {
            Some(p) if !p.is_none() => {
                let digest = Sha256::digest(p.cast::<PyBytes>()?.as_bytes());
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let mut hex = String::with_capacity(64);
                for b in digest.iter() {
                    hex.push(HEX[(b >> 4) as usize] as char);
                    hex.push(HEX[(b & 15) as usize] as char);
                }
                rec.set_item(pyo3::intern!(py, "payload_sha256"), hex)?;
            }
            _ => rec.set_item(pyo3::intern!(py, "payload_sha256"), py.None())?,
        }
        if let Some(base) = base {
            let id = PyDict::new(py);
            id.set_item(pyo3::intern!(py, "ledger_id"), base.get_item(pyo3::intern!(py, "ledgerId"))?)?;
            id.set_item(pyo3::intern!(py, "entry_id"), base.get_item(pyo3::intern!(py, "entryId"))?)?;
            id.set_item(pyo3::intern!(py, "partition"), base.get_item(pyo3::intern!(py, "partition"))?.unwrap_or_else(|| minus_one.clone()))?;
            let batch_index = m.get_item(pyo3::intern!(py, "batch_index"))?.filter(|v| !v.is_none());
            id.set_item(pyo3::intern!(py, "batch_index"), batch_index.unwrap_or_else(|| minus_one.clone()))?;
            rec.set_item(pyo3::intern!(py, "message_id"), id)?;
        }
        for (key, name) in RECORD_ORDER.iter().zip(keys.iter()) {
            let Some(value) = m.get_item(*name)? else { continue };
            if *key == "ordering_key" {
                let raw = value.cast::<PyBytes>()?.as_bytes();
                match std::str::from_utf8(raw) {
                    Ok(text) => rec.set_item(pyo3::intern!(py, "ordering_key"), text)?,
                    Err(_) => rec.set_item(pyo3::intern!(py, "ordering_key_b64"), b64(raw))?,
                }
            } else {
                rec.set_item(*name, value)?;
            }
        }
        out.append(rec)?;
    }
    Ok(out)
}
