//! TubeMQ (Apache InLong), the second protocol: its framing (`framing`), its method table (here: the one
//! place that says which message a method id carries), its frame decoder (`decode`), the structured strings
//! inside its messages (`info`) and its pieces of a timeline line (`timeline`).
//!
//! The schema is compiled from proto/tubemq/ (the contract) like Pulsar's from proto/pulsar/.

use std::sync::OnceLock;

use crate::analysis::Sessions;
use crate::line::{Line, LineFacts, PayloadFacts};
use std::borrow::Cow;

use crate::model::{Body, BodyField, Decoded, DecodedBody, Finding};
use crate::protocols::protocol::{DecodeCaps, Depth, Limits, Protocol};
use crate::schema::Schema;
use crate::transport::splitter::Framing;
use crate::value::{Map, Value};

/// The descriptor set of proto/tubemq, compiled by build.rs.
static DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tubemq_descriptor.bin"));

pub mod decode;
pub mod framing;
pub mod info;
pub mod problems;
pub mod record;
pub mod session;
pub mod timeline;

pub use decode::decode;

/// One RPC method: its id (RequestBody.method / RspResponseBody.method), the constant upstream names it by
/// (RpcConstants, without `RPC_MSG_`), the service type its requests carry (RequestHeader.serviceType), and
/// the messages its request and response carry; None for the methods upstream declares but never encodes
/// (PbEnDecoder refuses them).
pub struct Method {
    pub id: i32,
    pub constant: &'static str,
    pub service_type: i64,
    pub request: Option<&'static str>,
    pub response: Option<&'static str>,
}

impl Method {
    /// The role of the server that answers it: the master (MasterService), else a broker.
    pub fn server_role(&self) -> &'static str {
        if self.service_type == MASTER {
            "master"
        } else {
            "broker"
        }
    }
}

const fn method(
    id: i32,
    constant: &'static str,
    service_type: i64,
    request: Option<&'static str>,
    response: Option<&'static str>,
) -> Method {
    Method { id, constant, service_type, request, response }
}

/// RequestHeader.serviceType of each method's requests (RpcConstants.RPC_SERVICE_TYPE_*; the clients' calls)
const MASTER: i64 = 1;
const BROKER_READ: i64 = 2;
const BROKER_WRITE: i64 = 3;

/// RpcConstants' method ids and PbEnDecoder's request / response classes.
pub static METHODS: [Method; 21] = [
    method(1, "MASTER_PRODUCER_REGISTER", MASTER, Some("RegisterRequestP2M"), Some("RegisterResponseM2P")),
    method(2, "MASTER_PRODUCER_HEARTBEAT", MASTER, Some("HeartRequestP2M"), Some("HeartResponseM2P")),
    method(3, "MASTER_PRODUCER_CLOSECLIENT", MASTER, Some("CloseRequestP2M"), Some("CloseResponseM2P")),
    method(4, "MASTER_CONSUMER_REGISTER", MASTER, Some("RegisterRequestC2M"), Some("RegisterResponseM2C")),
    method(5, "MASTER_CONSUMER_HEARTBEAT", MASTER, Some("HeartRequestC2M"), Some("HeartResponseM2C")),
    method(6, "MASTER_CONSUMER_CLOSECLIENT", MASTER, Some("CloseRequestC2M"), Some("CloseResponseM2C")),
    method(7, "MASTER_BROKER_REGISTER", MASTER, Some("RegisterRequestB2M"), Some("RegisterResponseM2B")),
    method(8, "MASTER_BROKER_HEARTBEAT", MASTER, Some("HeartRequestB2M"), Some("HeartResponseM2B")),
    method(9, "MASTER_BROKER_CLOSECLIENT", MASTER, Some("CloseRequestB2M"), Some("CloseResponseM2B")),
    method(11, "BROKER_PRODUCER_REGISTER", BROKER_WRITE, None, None),
    method(12, "BROKER_PRODUCER_HEARTBEAT", BROKER_WRITE, None, None),
    method(
        13,
        "BROKER_PRODUCER_SENDMESSAGE",
        BROKER_WRITE,
        Some("SendMessageRequestP2B"),
        Some("SendMessageResponseB2P"),
    ),
    method(14, "BROKER_PRODUCER_CLOSE", BROKER_WRITE, None, None),
    method(15, "BROKER_CONSUMER_REGISTER", BROKER_READ, Some("RegisterRequestC2B"), Some("RegisterResponseB2C")),
    method(16, "BROKER_CONSUMER_HEARTBEAT", BROKER_READ, Some("HeartBeatRequestC2B"), Some("HeartBeatResponseB2C")),
    method(17, "BROKER_CONSUMER_GETMESSAGE", BROKER_READ, Some("GetMessageRequestC2B"), Some("GetMessageResponseB2C")),
    method(18, "BROKER_CONSUMER_COMMIT", BROKER_READ, Some("CommitOffsetRequestC2B"), Some("CommitOffsetResponseB2C")),
    method(19, "BROKER_CONSUMER_CLOSE", BROKER_READ, None, None),
    method(20, "MASTER_CONSUMER_REGISTER_V2", MASTER, Some("RegisterRequestC2MV2"), Some("RegisterResponseM2CV2")),
    method(21, "MASTER_CONSUMER_HEARTBEAT_V2", MASTER, Some("HeartRequestC2MV2"), Some("HeartResponseM2CV2")),
    method(22, "MASTER_CONSUMER_GET_PART_META", MASTER, Some("GetPartMetaRequestC2M"), Some("GetPartMetaResponseM2C")),
];

/// The type name of an exception response (its message: no method id travels with it).
pub const EXCEPTION: &str = "RspExceptionBody";

/// RequestHeader.serviceType values (RpcConstants).
pub fn service_name(service_type: i64) -> Option<&'static str> {
    Some(match service_type {
        1 => "MasterService",
        2 => "BrokerReadService",
        3 => "BrokerWriteService",
        4 => "BrokerAdminService",
        5 => "MasterAdminService",
        _ => return None,
    })
}

/// TErrCodeConstants: the names of the error codes responses carry.
pub fn error_code_name(code: i64) -> Option<&'static str> {
    Some(match code {
        200 => "SUCCESS",
        201 => "NOT_READY",
        301 => "MOVED",
        400 => "BAD_REQUEST",
        401 => "UNAUTHORIZED",
        402 => "CONNECT_RETURN_NULL",
        403 => "FORBIDDEN",
        404 => "NOT_FOUND",
        405 => "ALL_PARTITION_FROZEN",
        406 => "NO_PARTITION_ASSIGNED",
        407 => "ALL_PARTITION_WAITING",
        408 => "ALL_PARTITION_INUSE",
        410 => "PARTITION_OCCUPIED",
        411 => "HB_NO_NODE",
        412 => "DUPLICATE_PARTITION",
        415 => "CERTIFICATE_FAILURE",
        419 => "SERVER_RECEIVE_OVERFLOW",
        420 => "CLIENT_SHUTDOWN",
        421 => "CLIENT_HIGH_FREQUENCY_REQUEST",
        422 => "PARTITION_UNSUBSCRIBABLE",
        423 => "PARTITION_UNPUBLISHABLE",
        424 => "CLIENT_INCONSISTENT_CONSUMETYPE",
        425 => "CLIENT_INCONSISTENT_TOPICSET",
        426 => "CLIENT_INCONSISTENT_FILTERSET",
        427 => "CLIENT_INCONSISTENT_SESSIONKEY",
        428 => "CLIENT_INCONSISTENT_SELECTBIG",
        429 => "CLIENT_INCONSISTENT_SOURCECOUNT",
        430 => "CLIENT_DUPLICATE_INDEXID",
        431 => "TOPIC_NOT_DEPLOYED",
        440 => "PARAMETER_MSG_NULL",
        441 => "PARAMETER_MSG_TOPIC_BLANK",
        442 => "PARAMETER_MSG_BODY_EMPTY",
        443 => "PARAMETER_MSG_TOPIC_UNPUBLISHED",
        444 => "PARAMETER_MSG_TOPIC_NO_PARTITION",
        445 => "PARAMETER_MSG_OVER_MAX_LENGTH",
        450 => "CONSUME_GROUP_FORBIDDEN",
        452 => "SERVER_CONSUME_SPEED_LIMIT",
        455 => "CONSUME_CONTENT_FORBIDDEN",
        500 => "INTERNAL_SERVER_ERROR",
        503 => "SERVICE_UNAVAILABLE",
        510 => "INTERNAL_SERVER_ERROR_MSGSET_NULL",
        599 => "UNSPECIFIED_ABNORMAL",
        _ => return None,
    })
}

/// EventProto.opType (EventType): what a rebalance event asks of a consumer.
pub fn event_type_name(op_type: i64) -> Option<&'static str> {
    Some(match op_type {
        1 => "CONNECT",
        2 => "DISCONNECT",
        3 => "REPORT",
        4 => "REFRESH",
        5 => "STOPREBALANCE",
        10 => "ONLY_CONNECT",
        20 => "ONLY_DISCONNECT",
        -1 => "UNKNOWN",
        _ => return None,
    })
}

/// The schema and the envelope's message types, looked up once.
pub struct TubeSchema {
    pub schema: &'static Schema,
    pub conn_header: usize,
    pub request_header: usize,
    pub request_body: usize,
    pub response_header: usize,
    pub response_body: usize,
    pub exception_body: usize,
    /// by method id: the schema's request and response message types
    pub methods: Vec<(&'static Method, Option<usize>, Option<usize>)>,
}

static SCHEMA: OnceLock<Schema> = OnceLock::new();
static TUBE: OnceLock<TubeSchema> = OnceLock::new();

pub fn tube() -> &'static TubeSchema {
    TUBE.get_or_init(|| {
        let schema = SCHEMA.get_or_init(|| Schema::load(DESCRIPTOR));
        let message = |name: &str| schema.message(name);
        TubeSchema {
            schema,
            conn_header: message("RpcConnHeader"),
            request_header: message("RequestHeader"),
            request_body: message("RequestBody"),
            response_header: message("ResponseHeader"),
            response_body: message("RspResponseBody"),
            exception_body: message("RspExceptionBody"),
            methods: METHODS.iter().map(|m| (m, m.request.map(message), m.response.map(message))).collect(),
        }
    })
}

impl TubeSchema {
    pub fn method(&self, id: i64) -> Option<&(&'static Method, Option<usize>, Option<usize>)> {
        self.methods.iter().find(|(m, _, _)| m.id as i64 == id)
    }
}

/// The checksums of a frame's messages in one word: `invalid` if one is, `valid` if each was checked and
/// holds, else `absent` (the producer's -1: none supplied).
pub fn checksum_verdict(messages: &[crate::value::Value]) -> &'static str {
    fn verdict(m: &crate::value::Value) -> &str {
        m.get("checksum").and_then(crate::value::Value::as_str).unwrap_or("absent")
    }
    if messages.iter().any(|m| verdict(m) == "invalid") {
        "invalid"
    } else if !messages.is_empty() && messages.iter().all(|m| verdict(m) == "valid") {
        "valid"
    } else {
        "absent"
    }
}

/// Whether `name` is the type of a decodable method's request or response, or an exception.
pub fn known_type(name: &str) -> bool {
    name == EXCEPTION || METHODS.iter().any(|m| m.request == Some(name) || m.response == Some(name))
}

/// A TubeMQ frame's envelope (what is not its command) and the messages it carries.
#[derive(Debug, Default)]
pub struct TubeBody {
    /// the frame header's serial number: what pairs a response with its request
    pub serial: u32,
    /// the envelope in the JSON contract's form: kind, service, method, protocol version, status ...
    pub rpc: Map,
    /// the application messages (maps: `payload_size`, `payload` as bytes, then their fields); at most
    /// `max_batch_entries`
    pub messages: Vec<Value>,
    /// When the frame carries more messages than `messages` lists: all of them counted and checked.
    pub whole: Option<Box<WholeMessages>>,
}

/// Every message of a frame that carries more than its record lists.
#[derive(Debug)]
pub struct WholeMessages {
    /// The record's `messages_summary`: count and bytes.
    pub summary: Value,
    /// The checksums' verdict over all of them (`checksum_verdict`'s words).
    pub checksum: &'static str,
}

impl TubeBody {
    /// The checksums' verdict of every message the frame carries.
    pub fn checksum(&self) -> &'static str {
        self.whole.as_ref().map_or_else(|| checksum_verdict(&self.messages), |whole| whole.checksum)
    }

    /// The envelope back from what a front end holds of it ([`DecodedBody::fields`] by name).
    pub fn from_fields(mut fields: Map) -> TubeBody {
        let mut take = |name: &str| match fields.iter().position(|(key, _)| key.as_str() == name) {
            Some(at) => fields.swap_remove(at).1,
            None => Value::Null,
        };
        let whole = match take("messages_whole") {
            Value::List(pair) if pair.len() == 2 => {
                let [summary, checksum]: [Value; 2] = pair.try_into().expect("two items");
                let checksum =
                    ["invalid", "valid"].into_iter().find(|v| Some(*v) == checksum.as_str()).unwrap_or("absent");
                Some(Box::new(WholeMessages { summary, checksum }))
            }
            _ => None,
        };
        TubeBody {
            serial: take("serial").as_u64().and_then(|serial| u32::try_from(serial).ok()).unwrap_or(0),
            rpc: match take("rpc") {
                Value::Map(rpc) => rpc,
                _ => Map::new(),
            },
            messages: match take("messages") {
                Value::List(messages) => messages,
                _ => Vec::new(),
            },
            whole,
        }
    }
}

impl DecodedBody for TubeBody {
    fn serial(&self) -> Option<u64> {
        Some(self.serial as u64)
    }

    /// What a timeline line shows of the envelope: the messages carried.
    fn line_facts(&self) -> PayloadFacts<'_> {
        PayloadFacts {
            messages: Some(self.messages.as_slice()),
            summary: self.whole.as_ref().map(|whole| &whole.summary),
            checksum: self.whole.as_ref().map(|whole| whole.checksum),
            ..PayloadFacts::default()
        }
    }

    fn message_count(&self) -> usize {
        self.messages.len()
    }

    fn held_bytes(&self) -> usize {
        crate::value::payload_bytes(&self.messages)
    }

    fn protocol(&self) -> &'static str {
        TubeMq.name()
    }

    /// serial, rpc, messages, and when the frame carries more messages than it lists, `messages_whole`:
    /// [summary, checksum verdict].
    fn fields(&self, visit: &mut dyn FnMut(&'static str, BodyField<'_>)) {
        visit("serial", BodyField::Int(self.serial.into()));
        visit("rpc", BodyField::Map(&self.rpc));
        visit("messages", BodyField::List(Cow::Borrowed(&self.messages)));
        if let Some(whole) = &self.whole {
            let pair = vec![whole.summary.clone(), Value::from(whole.checksum.to_owned())];
            visit("messages_whole", BodyField::Owned(Value::List(pair)));
        }
    }
}

impl Decoded {
    /// TubeMQ's envelope, when the frame is TubeMQ's.
    pub fn tube(&self) -> Option<&TubeBody> {
        self.body_as()
    }
}

/// Apache InLong TubeMQ's RPC protocol.
pub struct TubeMq;

impl Protocol for TubeMq {
    fn name(&self) -> &'static str {
        "tubemq"
    }

    fn framing(&self) -> Box<dyn Framing> {
        Box::new(framing::TubeMqFraming)
    }

    fn decode(&self, pdu: &[u8], missing: usize, caps: DecodeCaps, depth: Depth) -> Decoded {
        decode::decode_within(pdu, missing, depth == Depth::Brief, caps)
    }

    /// A whole envelope of a method the table knows (its type is then a message name).
    fn confirms(&self, type_name: &str, has_findings: bool) -> bool {
        !has_findings && known_type(type_name)
    }

    /// `methods`: (id, constant, server role, request message, response message) of each method, None for a
    /// message upstream declares but never encodes.
    fn tables(&self) -> Vec<(&'static str, Vec<Vec<Value>>)> {
        let text = |s: &'static str| Value::from(s.to_owned());
        let methods = METHODS.iter().map(|m| {
            vec![
                Value::from(m.id),
                text(m.constant),
                text(m.server_role()),
                m.request.map_or(Value::Null, text),
                m.response.map_or(Value::Null, text),
            ]
        });
        vec![("methods", methods.collect())]
    }

    fn body_from_fields(&self, fields: Map, _findings: Vec<Finding>) -> Option<Body> {
        Some(Box::new(TubeBody::from_fields(fields)))
    }

    fn sessions(&self, _limits: &Limits) -> Option<Box<dyn Sessions>> {
        Some(Box::new(session::TubeSessions))
    }

    fn timeline_pieces(&self, facts: &LineFacts, line: &mut Line) {
        timeline::pieces(facts, line)
    }

    fn client_messages(&self, type_name: &str) -> Option<bool> {
        match type_name {
            "SendMessageRequestP2B" => Some(true),
            "GetMessageResponseB2C" => Some(false),
            _ => None,
        }
    }

    /// A response's `errCode` other than 200 (SUCCESS), by its name in the error code table.
    fn error_of(&self, command: &Map) -> Option<String> {
        let code = crate::analysis::map_get(command, "errCode").and_then(Value::as_i64).filter(|&c| c != 200)?;
        Some(error_code_name(code).map_or_else(|| code.to_string(), str::to_owned))
    }

    fn stats_command_keys(&self) -> &'static [&'static str] {
        &["errCode"]
    }

    fn problem_ids(&self) -> &'static [&'static str] {
        problems::TubeMqProblem::IDS
    }
}
