//! The plain data of the protocol boundary in Rust: what decoding one frame gives. They mirror the Python
//! classes the binding turns them into (`dissector/model.py: Decoded`, `dissector/problems.py: Finding`,
//! `dissector/protocols/pulsar/payload.py: PayloadSection`) field for field.

use crate::name;
use crate::value::{write_json_array, write_json_map, JsonObject, Map, Name, Text, Value};

/// One problem or observation: a registered id and the values its message is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub id: &'static Name,
    pub params: Map,
}

/// `finding!(ID, KEY => VALUE, ...)`: a [`Finding`] whose id and keys are declared names (string literals).
#[macro_export]
macro_rules! finding {
    ($id:literal $(, $key:literal => $value:expr)* $(,)?) => {
        $crate::model::Finding {
            id: $crate::name!($id),
            params: vec![$($crate::value::entry($crate::name!($key), $value)),*],
        }
    };
}

/// One frame, decoded.
#[derive(Debug)]
pub struct Decoded {
    /// The command's name as the schema declares it, or `UNKNOWN(n)` / `MALFORMED`.
    pub type_name: Text,
    /// The sub-command's fields (a map of the JSON contract); None when it could not be decoded.
    pub command: Option<Value>,
    /// Bytes of the frame on the wire, header included (lost bytes counted).
    pub size: usize,
    /// The frame's own findings, then those of its payload section (the same, in the same order).
    pub findings: Vec<Finding>,
    /// What the protocol carries beside its command: Pulsar's payload section (SEND, MESSAGE), TubeMQ's RPC
    /// envelope and messages.
    pub body: Option<Body>,
}

#[derive(Debug)]
pub enum Body {
    Payload(PayloadSection),
    Tube(TubeBody),
}

/// A TubeMQ frame's envelope (what is not its command) and the messages it carries.
#[derive(Debug, Default)]
pub struct TubeBody {
    /// the frame header's serial number: what pairs a response with its request
    pub serial: u32,
    /// the envelope in the JSON contract's form: kind, service, method, protocol version, status ...
    pub rpc: Map,
    /// the application messages (maps: `payload_size`, `payload` as bytes, then their fields)
    pub messages: Vec<Value>,
}

impl Decoded {
    /// Pulsar's payload section, when the frame has one.
    pub fn payload(&self) -> Option<&PayloadSection> {
        match &self.body {
            Some(Body::Payload(section)) => Some(section),
            _ => None,
        }
    }

    /// TubeMQ's envelope, when the frame is TubeMQ's.
    pub fn tube(&self) -> Option<&TubeBody> {
        match &self.body {
            Some(Body::Tube(body)) => Some(body),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Checksum {
    #[default]
    Absent,
    Valid,
    Invalid,
    /// The frame lost bytes to a capture gap: the checksum cannot be computed.
    Unverified,
}

impl Checksum {
    pub fn name(self) -> &'static Name {
        match self {
            Checksum::Absent => crate::name!("absent"),
            Checksum::Valid => crate::name!("valid"),
            Checksum::Invalid => crate::name!("invalid"),
            Checksum::Unverified => crate::name!("unverified"),
        }
    }
}

/// The payload section of a SEND or MESSAGE frame.
#[derive(Debug, Default)]
pub struct PayloadSection {
    pub checksum: Checksum,
    pub checksum_wire: Option<u32>,
    pub checksum_computed: Option<u32>,
    pub broker_entry_metadata: Option<Value>,
    /// MessageMetadata in the JSON contract's form (briefly: only the fields one-line views show).
    pub metadata: Option<Value>,
    pub metadata_size: Option<usize>,
    /// The codec's number, also one this schema does not know.
    pub compression: i64,
    /// Bytes as on the wire (compressed, encrypted, batched).
    pub payload_size: usize,
    /// Bytes after decompression, when it was decompressed.
    pub uncompressed_size: Option<usize>,
    pub encrypted: bool,
    /// The application messages (maps: `payload_size`, `payload` as bytes, then the fields present).
    pub messages: Vec<Value>,
    /// A batch not split yet (a `Depth::BatchesLater` or `Brief` decode): its messages are `messages_split`'s.
    pub batch_later: Option<Box<crate::protocols::pulsar::payload::BatchLater>>,
    /// The decoded PulsarMarkers message.
    pub marker: Option<Value>,
    pub findings: Vec<Finding>,
}

impl PayloadSection {
    /// The messages, a batch kept whole split now.
    pub fn messages_split(&self) -> std::borrow::Cow<'_, [Value]> {
        match &self.batch_later {
            Some(batch) => std::borrow::Cow::Owned(batch.messages()),
            None => std::borrow::Cow::Borrowed(&self.messages),
        }
    }

    /// How many messages the section holds (also those of a batch not split yet).
    pub fn message_count(&self) -> usize {
        self.batch_later.as_ref().map_or(self.messages.len(), |batch| batch.entries)
    }
}

impl Finding {
    /// `{"id": ..., "params": {...}}`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut object = JsonObject::start(out);
        self.id.write_json(object.key(name!("id")));
        write_json_map(&self.params, object.key(name!("params")));
        object.end();
    }
}

impl Decoded {
    /// What the decoder knows of the frame's record, as JSON: its type, size, command and findings, and for
    /// a payload section its fields with the messages' records in place of the messages (whose payloads the
    /// contract does not hold; none when it was decoded `brief`ly).
    pub fn write_json(&self, out: &mut Vec<u8>, brief: bool) {
        let mut object = JsonObject::start(out);
        self.type_name.write_json(object.key(name!("type")));
        object.field(name!("size"), &Value::from(self.size));
        object.field_or_null(name!("command"), self.command.as_ref());
        write_json_array(&self.findings, object.key(name!("findings")), Finding::write_json);
        if let Some(section) = self.payload() {
            let base = if self.type_name.as_str() == "MESSAGE" {
                self.command.as_ref().and_then(|c| c.get("message_id"))
            } else {
                None
            };
            section.write_json(object.key(name!("payload")), (!brief).then_some(base));
        }
        object.end();
    }
}

impl PayloadSection {
    /// `messages`: write the messages' records, with this MESSAGE command's message_id.
    fn write_json(&self, out: &mut Vec<u8>, messages: Option<Option<&Value>>) {
        let mut object = JsonObject::start(out);
        self.checksum.name().write_json(object.key(name!("checksum")));
        object.field(name!("checksum_wire"), &Value::from(self.checksum_wire));
        object.field(name!("checksum_computed"), &Value::from(self.checksum_computed));
        object.field_or_null(name!("broker_entry_metadata"), self.broker_entry_metadata.as_ref());
        object.field_or_null(name!("metadata"), self.metadata.as_ref());
        object.field(name!("metadata_size"), &Value::from(self.metadata_size));
        object.field(name!("compression"), &Value::from(self.compression));
        object.field(name!("payload_size"), &Value::from(self.payload_size));
        object.field(name!("uncompressed_size"), &Value::from(self.uncompressed_size));
        object.field(name!("encrypted"), &Value::Bool(self.encrypted));
        object.field_or_null(name!("marker"), self.marker.as_ref());
        if let Some(base) = messages {
            let mut sink = crate::records::JsonSink::new(object.key(name!("messages")));
            // a JSON sink writes bytes only: it has no error to give
            let _ = crate::records::write_messages::<crate::records::NoFront>(
                &mut sink,
                crate::records::Key::Item,
                &self.messages_split(),
                base,
                false,
            );
        }
        object.end();
    }
}
