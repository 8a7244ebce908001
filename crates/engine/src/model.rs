//! The plain data of the protocol boundary in Rust: what decoding one frame gives, whatever the protocol (its
//! body is the protocol's, seen through [`DecodedBody`]). They mirror the Python classes the binding turns them into
//! (`dissector/model.py: Decoded`, `dissector/problems.py: Finding`) field for field.

use std::any::Any;
use std::borrow::Cow;
use std::fmt::Debug;

use crate::line::PayloadFacts;
use crate::name;
use crate::value::{write_json_array, write_json_map, JsonObject, Map, Name, Text, Value};

/// What a protocol's frames carry beside their command (Pulsar's payload section, TubeMQ's RPC envelope), as
/// the generic code sees it: the questions it asks of any body. Its record keys are written by the protocol
/// whose body it is (`protocols::write_body_keys`, which downcasts it through `Any`).
pub trait DecodedBody: Any + Debug + Send + Sync {
    /// The frame's serial number, for a protocol that numbers its frames (pairing by serial).
    fn serial(&self) -> Option<u64> {
        None
    }
    /// What a timeline line shows of the body.
    fn line_facts(&self) -> PayloadFacts<'_>;
    /// How many messages the body holds (what writing their records costs).
    fn message_count(&self) -> usize;
    /// Bytes of payload the body holds beyond the frame's own (decompressed): what keeping it costs.
    fn held_bytes(&self) -> usize;
    /// The body in `Decoded::write_json`'s object (brief: without its messages' records).
    fn write_json(&self, _pdu: &Decoded, _object: &mut JsonObject<'_>, _brief: bool) {}
    /// The name of the protocol whose body it is (`Protocol::name`): a front end that binds a class to the
    /// protocol's bodies makes that class of it.
    fn protocol(&self) -> &'static str;
    /// The body as plain data for a front end: `visit` is given its fields one by one (a name and its value),
    /// in the order of its protocol's `Protocol::body_fields` when those are declared, borrowed where the body
    /// holds them. Its protocol's `Protocol::body_from_fields` makes the body back from them.
    fn fields(&self, visit: &mut dyn FnMut(&'static str, BodyField<'_>));
}

/// One field of a body as a front end sees it ([`DecodedBody::fields`]): scalars as they are, the rest
/// borrowed where the body holds it (a front end converts every frame's body it is given: no copies).
#[derive(Debug)]
pub enum BodyField<'a> {
    /// No value (absent).
    Null,
    Bool(bool),
    Int(i64),
    /// A word from a fixed set (a verdict).
    Name(&'static Name),
    /// A value the body holds.
    Value(&'a Value),
    /// A value made for the occasion.
    Owned(Value),
    /// A map the body holds.
    Map(&'a Map),
    /// A list of values, borrowed or made for the occasion.
    List(Cow<'a, [Value]>),
    /// The body's findings, with which the frame's findings end: a front end makes them once, for both (a
    /// class it binds to the body holds them in its field `findings`).
    Findings(&'a [Finding]),
}

impl<'a> BodyField<'a> {
    /// An optional value the body holds (None: `Null`).
    pub fn optional(value: Option<&'a Value>) -> BodyField<'a> {
        value.map_or(BodyField::Null, BodyField::Value)
    }

    /// An optional count or number (None: `Null`).
    pub fn number(value: Option<u64>) -> BodyField<'a> {
        match value.map(i64::try_from) {
            None => BodyField::Null,
            Some(Ok(value)) => BodyField::Int(value),
            Some(Err(_)) => BodyField::Owned(Value::from(value)),
        }
    }
}

/// A frame's body: the protocol's own type behind [`DecodedBody`].
pub type Body = Box<dyn DecodedBody>;

impl Decoded {
    /// The body, when it is of the protocol's type `B`.
    pub fn body_as<B: DecodedBody>(&self) -> Option<&B> {
        let body: &dyn Any = self.body.as_deref()?;
        body.downcast_ref()
    }
}

/// One problem or observation: a registered id and the values its message is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub id: &'static Name,
    pub params: Map,
}

/// `finding!(PROBLEM, KEY => VALUE, ...)`: a [`Finding`] whose id is a problem enum's variant
/// (`PulsarProblem::ChunkLost`, see [`crate::problems`]) and whose keys are declared names (string literals).
#[macro_export]
macro_rules! finding {
    ($id:expr $(, $key:literal => $value:expr)* $(,)?) => {
        $crate::model::Finding {
            id: ($id).name(),
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
        if let Some(body) = &self.body {
            body.write_json(self, &mut object, brief);
        }
        object.end();
    }
}
