//! pulsar-dissect's compiled core: Pulsar frame decoding (sizes, BaseCommand, payload section, CRC32C,
//! decompression, batches, markers) producing the plain data of the protocol boundary (``model.Decoded``),
//! walked off the schema compiled from the .proto contract.
//!
//! Python binds the classes of its plain data once (``bind``); ``decode_frame`` then returns instances of
//! them, so what crosses the boundary is the same whatever decodes.

use std::collections::HashMap;
use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

pub mod analysis;
pub mod codecs;
mod frame;
pub mod model;
mod payload;
pub mod pb;
pub mod pulsar;
mod schema;
pub mod value;

use schema::Schema;

/// MessageMetadata and friends: the field numbers and message types the payload decoder reads, looked up by
/// name in the schema once.
pub struct Fields {
    pub metadata: usize,
    pub single: usize,
    pub broker_entry_metadata: usize,
    pub sequence_id: u32,
    pub properties: u32,
    pub kv_key: u32,
    pub kv_value: u32,
    pub partition_key: u32,
    pub compression: u32,
    pub uncompressed_size: u32,
    pub num_messages_in_batch: u32,
    pub event_time: u32,
    pub encryption_keys: u32,
    pub ek_key: u32,
    pub ordering_key: u32,
    pub marker_type: u32,
    pub null_value: u32,
    pub uuid: u32,
    pub num_chunks_from_msg: u32,
    pub chunk_id: u32,
    pub null_partition_key: u32,
    pub brief: Vec<(&'static str, u32)>,
    pub markers: HashMap<i32, usize>,
}

pub struct Core {
    pub schema: &'static Schema,
    pub base_command: usize,
    pub type_names: HashMap<i32, String>,
    pub compression_names: HashMap<i32, String>,
    pub send: i32,
    pub message: i32,
    pub message_ack_set: u32,
    pub m: Fields,
    pub decoded_class: Py<PyAny>,
    pub section_class: Py<PyAny>,
    pub finding_class: Py<PyAny>,
}

static CORE: OnceLock<Core> = OnceLock::new();
static SCHEMA: OnceLock<Schema> = OnceLock::new();

/// The schema, loaded once (it needs no bound class: the command table reads it before any decoding).
fn schema(py: Python<'_>) -> &'static Schema {
    SCHEMA.get_or_init(|| Schema::load(py))
}

fn number(schema: &Schema, msg: usize, name: &str) -> u32 {
    schema.messages[msg].field_by_name(name).unwrap_or_else(|| panic!("field {name} is in the schema")).number
}

impl Core {
    fn new(py: Python<'_>, decoded: Py<PyAny>, section: Py<PyAny>, finding: Py<PyAny>) -> Core {
        let schema: &'static Schema = schema(py);
        let base_command = schema.message("pulsar.proto.BaseCommand");
        let type_names: HashMap<i32, String> = schema.enum_type("pulsar.proto.BaseCommand.Type").names.clone();
        let compression_names = schema.enum_type("pulsar.proto.CompressionType").names.clone();
        let by_name = |name: &str| *type_names.iter().find(|(_, n)| n.as_str() == name).expect("a command type").0;
        let (send, message) = (by_name("SEND"), by_name("MESSAGE"));
        let message_cmd = schema.message("pulsar.proto.CommandMessage");
        let md = schema.message("pulsar.proto.MessageMetadata");
        let kv = schema.message("pulsar.proto.KeyValue");
        let ek = schema.message("pulsar.proto.EncryptionKeys");
        let n = |name: &str| number(schema, md, name);
        let markers = [
            (10, "pulsar.proto.ReplicatedSubscriptionsSnapshotRequest"),
            (11, "pulsar.proto.ReplicatedSubscriptionsSnapshotResponse"),
            (12, "pulsar.proto.ReplicatedSubscriptionsSnapshot"),
            (13, "pulsar.proto.ReplicatedSubscriptionsUpdate"),
        ]
        .into_iter()
        .map(|(t, name)| (t, schema.message(name)))
        .collect();
        let m = Fields {
            metadata: md,
            single: schema.message("pulsar.proto.SingleMessageMetadata"),
            broker_entry_metadata: schema.message("pulsar.proto.BrokerEntryMetadata"),
            sequence_id: n("sequence_id"),
            properties: n("properties"),
            kv_key: number(schema, kv, "key"),
            kv_value: number(schema, kv, "value"),
            partition_key: n("partition_key"),
            compression: n("compression"),
            uncompressed_size: n("uncompressed_size"),
            num_messages_in_batch: n("num_messages_in_batch"),
            event_time: n("event_time"),
            encryption_keys: n("encryption_keys"),
            ek_key: number(schema, ek, "key"),
            ordering_key: n("ordering_key"),
            marker_type: n("marker_type"),
            null_value: n("null_value"),
            uuid: n("uuid"),
            num_chunks_from_msg: n("num_chunks_from_msg"),
            chunk_id: n("chunk_id"),
            null_partition_key: n("null_partition_key"),
            brief: payload::BRIEF_METADATA.iter().map(|name| (*name, n(name))).collect(),
            markers,
        };
        let message_ack_set = number(schema, message_cmd, "ack_set");
        Core {
            schema,
            base_command,
            type_names,
            compression_names,
            send,
            message,
            message_ack_set,
            m,
            decoded_class: decoded,
            section_class: section,
            finding_class: finding,
        }
    }

    pub fn decoded<'py>(
        &self,
        py: Python<'py>,
        type_name: &str,
        command: Option<Bound<'py, PyAny>>,
        size: usize,
        findings: Bound<'py, PyList>,
        body: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.decoded_class.bind(py).call1((type_name, command, size, findings, body))
    }
}

pub fn finding<'py>(py: Python<'py>, core: &Core, id: &str, params: &[(&str, Bound<'py, PyAny>)]) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    for (k, v) in params {
        dict.set_item(PyString::intern(py, k), v)?;
    }
    core.finding_class.bind(py).call1((id, dict))
}

fn core() -> PyResult<&'static Core> {
    CORE.get().ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("pulsar_dissect_core.bind() was not called"))
}

/// The fields of the Python classes the core builds positionally, in order.
const DECODED_FIELDS: [&str; 5] = ["type", "command", "size", "findings", "body"];
pub const SECTION_FIELDS: [&str; 14] = [
    "checksum", "checksum_wire", "checksum_computed", "broker_entry_metadata", "metadata", "metadata_size",
    "compression", "payload_size", "uncompressed_size", "encrypted", "messages", "marker", "findings", "records",
];

fn check_fields(cls: &Bound<'_, PyAny>, expected: &[&str]) -> PyResult<()> {
    let fields: Vec<String> = cls.getattr("__dataclass_fields__")?.call_method0("keys")?.try_iter()?
        .map(|k| k.and_then(|k| k.extract::<String>()))
        .collect::<PyResult<_>>()?;
    if fields != expected {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "{} has fields {fields:?}; the core builds it with {expected:?}", cls.getattr("__name__")?)));
    }
    Ok(())
}

/// Give the core the classes of the plain data it returns: Decoded, PayloadSection and Finding (checked: the
/// core fills their fields by position).
#[pyfunction]
fn bind(py: Python<'_>, decoded: Py<PyAny>, section: Py<PyAny>, finding: Py<PyAny>) -> PyResult<()> {
    check_fields(decoded.bind(py), &DECODED_FIELDS)?;
    check_fields(section.bind(py), &SECTION_FIELDS)?;
    let _ = CORE.get_or_init(|| Core::new(py, decoded, section, finding));
    Ok(())
}

/// Decode one frame (``missing`` bytes lost at its end); returns a ``Decoded``.
#[pyfunction]
#[pyo3(signature = (frame, missing=0, max_decompressed=64 * 1024 * 1024, brief=false))]
fn decode_frame<'py>(py: Python<'py>, frame: &[u8], missing: usize, max_decompressed: u64, brief: bool) -> PyResult<Bound<'py, PyAny>> {
    frame::decode_frame(py, core()?, frame, missing, max_decompressed, brief)
}

/// Decompress a payload (``codec`` as MessageMetadata.compression), bounded by ``declared_size`` and
/// ``max_size``: returns (bytes or None, payload.decompression finding or None).
#[pyfunction]
#[pyo3(signature = (codec, data, declared_size, max_size))]
fn decompress<'py>(py: Python<'py>, codec: i64, data: &[u8], declared_size: Option<u64>, max_size: u64) -> PyResult<(Option<Bound<'py, PyBytes>>, Option<Bound<'py, PyAny>>)> {
    let core = core()?;
    let result = codecs::decompress(codec, data, declared_size, max_size);
    let problem = match &result.problem {
        Some(p) => Some(payload::decompression_finding(py, core, p)?),
        None => None,
    };
    Ok((result.data.map(|d| PyBytes::new(py, d.as_ref())), problem))
}

/// The records (JSON contract) of a frame's messages; ``base`` is a MESSAGE command's message_id. The frame
/// decoder fills ``PayloadSection.records`` with these unless it decoded briefly.
#[pyfunction]
#[pyo3(signature = (messages, base=None))]
fn message_records<'py>(py: Python<'py>, messages: Bound<'py, PyList>, base: Option<Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyList>> {
    payload::message_records(py, &messages, base.as_ref())
}

/// The BaseCommand type names by number, as the schema declares them.
#[pyfunction]
fn command_types(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (n, name) in &schema(py).enum_type("pulsar.proto.BaseCommand.Type").names {
        out.set_item(*n, PyString::new(py, name))?;
    }
    Ok(out)
}

/// BaseCommand's sub-command fields by number (the field for type N is field N), as the schema declares them.
#[pyfunction]
fn subcommand_fields(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let schema = schema(py);
    let types = &schema.enum_type("pulsar.proto.BaseCommand.Type").names;
    let out = PyDict::new(py);
    for f in &schema.messages[schema.message("pulsar.proto.BaseCommand")].fields {
        if types.contains_key(&(f.number as i32)) {
            out.set_item(f.number, f.name.bind(py))?;
        }
    }
    Ok(out)
}

fn subcommand_type(schema: &Schema, type_num: u32) -> Option<usize> {
    let base = &schema.messages[schema.message("pulsar.proto.BaseCommand")];
    match base.fields.get(base.field(type_num)?)?.kind {
        schema::Kind::Message(m) => Some(m),
        _ => None,
    }
}

/// Whether ``data`` parses whole, with every required field set: the BaseCommand carrying the sub-command of
/// type ``type_num`` (``base``), or that sub-command alone. What framing asks of a candidate frame start.
#[pyfunction]
fn command_complete(py: Python<'_>, type_num: u32, data: &[u8], base: bool) -> bool {
    let schema = schema(py);
    let sub = if base {
        match pb::parse(schema, schema.message("pulsar.proto.BaseCommand"), data) {
            Ok(parsed) => match parsed.message(schema, type_num) {
                Some(sub) => return sub.init_errors(schema).is_empty(),
                None => return false,
            },
            Err(_) => return false,
        }
    } else {
        subcommand_type(schema, type_num)
    };
    match sub.map(|m| pb::parse(schema, m, data)) {
        Some(Ok(parsed)) => parsed.init_errors(schema).is_empty(),
        _ => false,
    }
}

/// Whether the complete fields of ``data`` (the first bytes of the sub-command of type ``type_num``) fit its
/// schema: known field numbers, each with its wire type; a field cut at the end is fine.
#[pyfunction]
fn prefix_plausible(py: Python<'_>, type_num: u32, data: &[u8]) -> bool {
    let schema = schema(py);
    let Some(msg) = subcommand_type(schema, type_num) else { return false };
    pb::plausible_prefix(schema, msg, data)
}

#[pymodule]
fn pulsar_dissect_core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bind, m)?)?;
    m.add_function(wrap_pyfunction!(decode_frame, m)?)?;
    m.add_function(wrap_pyfunction!(decompress, m)?)?;
    m.add_function(wrap_pyfunction!(message_records, m)?)?;
    m.add_function(wrap_pyfunction!(command_types, m)?)?;
    m.add_function(wrap_pyfunction!(subcommand_fields, m)?)?;
    m.add_function(wrap_pyfunction!(command_complete, m)?)?;
    m.add_function(wrap_pyfunction!(prefix_plausible, m)?)?;
    analysis::binding::register(m)?;
    Ok(())
}
