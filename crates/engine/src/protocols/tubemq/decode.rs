//! One TubeMQ frame → [`Decoded`]: the header and blocks, the RPC envelope (RpcConnHeader, Request- or
//! ResponseHeader, RequestBody / RspResponseBody / RspExceptionBody), the method's message inside it, and
//! the application messages a SendMessageRequestP2B or a GetMessageResponseB2C carries, each checked as the
//! consumer checks it. A pure function of the bytes.

use super::framing::{u32_at, HEADER_SIZE, MAX_BLOCK_SIZE};
use super::problems::TubeMqProblem;
use super::{error_code_name, event_type_name, info, service_name, tube, TubeSchema, EXCEPTION};
use super::{TubeBody, WholeMessages};
use crate::model::{Decoded, Finding};
use crate::pb::{self, read_varint, Parsed};
use crate::protocols::protocol::DecodeCaps;
use crate::value::{entry, Map, Text, Value};
use crate::{finding, name};

/// java.util.zip.CRC32 of the data, masked to a non-negative int (CheckSum.crc32).
pub fn message_checksum(data: &[u8]) -> i64 {
    (crc32fast::hash(data) & 0x7FFF_FFFF) as i64
}

/// The next length-delimited message (writeDelimitedTo) of the concatenated block bytes.
fn delimited<'a>(data: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let length = usize::try_from(read_varint(data, pos).ok()?).ok()?;
    let end = pos.checked_add(length).filter(|&end| end <= data.len())?;
    let message = &data[*pos..end];
    *pos = end;
    Some(message)
}

struct Frame<'a> {
    t: &'static TubeSchema,
    findings: Vec<Finding>,
    rpc: Map,
    data: &'a [u8],
    pos: usize,
    /// `max_batch_entries`: the messages a record lists at most; `max_repeated_elements`.
    caps: DecodeCaps,
    /// Set when the frame carries more messages than it lists.
    whole: Option<Box<WholeMessages>>,
}

impl<'a> Frame<'a> {
    /// The next envelope message, parsed; a finding when it is missing or does not parse.
    fn next(&mut self, msg: usize, what: &'static str) -> Option<Parsed<'a>> {
        let Some(bytes) = delimited(self.data, &mut self.pos) else {
            self.findings.push(finding!(TubeMqProblem::EnvelopeCut, "message" => what.to_owned()));
            return None;
        };
        match pb::parse(self.t.schema, msg, bytes) {
            Ok(parsed) => Some(parsed),
            Err(_) => {
                self.findings.push(finding!(TubeMqProblem::Unparsable, "message" => what.to_owned()));
                None
            }
        }
    }

    fn int(&self, parsed: &Parsed<'_>, number: u32) -> Option<i64> {
        parsed.varint(self.t.schema, number).map(|v| v as i64)
    }

    /// A varint field as the signed int32 / int64 the schema declares.
    fn int32(&self, parsed: &Parsed<'_>, number: u32) -> Option<i64> {
        self.int(parsed, number).map(|v| v as i32 as i64)
    }

    /// The method's message read from `bytes` into the command; its required fields checked.
    fn command<'b>(&mut self, msg: usize, type_name: &str, bytes: &'b [u8]) -> Option<(Parsed<'b>, Value)> {
        match pb::parse_limited(self.t.schema, msg, bytes, self.caps.max_repeated_elements) {
            Ok(parsed) => {
                if parsed.elided > 0 {
                    self.findings.push(finding!(crate::problems::GenericProblem::ProtobufRepeatedElided,
                        "message" => type_name.to_owned(), "elided" => parsed.elided,
                        "kept" => self.caps.max_repeated_elements));
                }
                let errors = parsed.init_errors(self.t.schema);
                if !errors.is_empty() {
                    self.findings.push(finding!(TubeMqProblem::MissingRequired, "type" => type_name.to_owned(),
                                                "fields" => errors.into_iter().map(Value::from).collect::<Vec<_>>()));
                }
                let value = parsed.to_value(self.t.schema);
                Some((parsed, value))
            }
            Err(_) => {
                self.findings.push(finding!(TubeMqProblem::Unparsable, "message" => type_name.to_owned()));
                None
            }
        }
    }
}

pub fn decode(frame: &[u8], missing: usize, brief: bool) -> Decoded {
    decode_within(frame, missing, brief, DecodeCaps::decompressing(0))
}

/// `decode` within `caps`: the record lists at most `max_batch_entries` of the messages a frame carries (every
/// one is still read, checked and counted: the body's `whole`); a message keeps `max_repeated_elements`.
pub fn decode_within(frame: &[u8], missing: usize, brief: bool, caps: DecodeCaps) -> Decoded {
    let t = tube();
    let size = frame.len() + missing;
    let mut findings = Vec::new();
    let (Some(serial), Some(list_size)) = (u32_at(frame, 4), u32_at(frame, 8)) else {
        findings.push(finding!(TubeMqProblem::TooShort, "length" => frame.len()));
        return Decoded { type_name: Text::Name(name!("MALFORMED")), command: None, size, findings, body: None };
    };
    // the blocks' bytes, joined: block boundaries fall anywhere, also inside a varint
    let mut data = Vec::with_capacity(frame.len().saturating_sub(HEADER_SIZE));
    let (mut pos, mut blocks, mut widest) = (HEADER_SIZE, 0u32, 0usize);
    while blocks < list_size {
        let Some(length) = u32_at(frame, pos) else { break };
        let start = pos + 4;
        let end = start.saturating_add(length as usize);
        data.extend_from_slice(&frame[start.min(frame.len())..end.min(frame.len())]);
        widest = widest.max(length as usize);
        pos = end;
        blocks += 1;
    }
    if widest > MAX_BLOCK_SIZE {
        findings.push(finding!(TubeMqProblem::BlockOversized, "length" => widest, "limit" => MAX_BLOCK_SIZE));
    }
    let cut = missing > 0 || pos > frame.len() || blocks < list_size;
    if cut {
        findings.push(finding!(TubeMqProblem::Truncated, "captured" => frame.len(), "size" => size));
    }
    let mut rpc = vec![entry(name!("blocks"), list_size)];
    let mut f = Frame { t, findings, rpc: Vec::new(), data: &data, pos: 0, caps, whole: None };
    let (type_name, command, messages) = envelope(&mut f, brief);
    // bytes after the last message of a whole envelope (a broken one said why already)
    if !cut && f.pos < data.len() && type_name.as_str() != "MALFORMED" {
        f.findings.push(finding!(TubeMqProblem::TrailingBytes, "length" => data.len() - f.pos));
    }
    rpc.append(&mut f.rpc);
    let body = TubeBody { serial, rpc, messages, whole: f.whole };
    Decoded { type_name, command, size, findings: f.findings, body: Some(Box::new(body)) }
}

/// The envelope and the method's message: (type, command, messages).
fn envelope(f: &mut Frame<'_>, brief: bool) -> (Text, Option<Value>, Vec<Value>) {
    let malformed = (Text::Name(name!("MALFORMED")), None, Vec::new());
    let t = f.t;
    let Some(header) = f.next(t.conn_header, "RpcConnHeader") else { return malformed };
    let flag = f.int32(&header, 1);
    let kind = match flag {
        Some(0) => "request",
        Some(1) => "response",
        _ => {
            f.findings.push(finding!(TubeMqProblem::BadFlag, "flag" => flag.map_or(Value::Null, Value::from)));
            return malformed;
        }
    };
    f.rpc.push(entry(name!("kind"), kind.to_owned()));
    for (number, key) in [(2, name!("trace_id")), (3, name!("span_id")), (4, name!("parent_id"))] {
        if let Some(id) = f.int(&header, number) {
            f.rpc.push(entry(key, id));
        }
    }
    if kind == "request" {
        let Some(request_header) = f.next(t.request_header, "RequestHeader") else { return malformed };
        service(f, &request_header, 1, 2);
        let Some(body) = f.next(t.request_body, "RequestBody") else { return malformed };
        let method = f.int32(&body, 1);
        if let Some(timeout) = f.int(&body, 2) {
            f.rpc.push(entry(name!("timeout_ms"), timeout));
        }
        let bytes = body.bytes(t.schema, 3).unwrap_or_default();
        method_message(f, method, true, bytes, brief)
    } else {
        let Some(response_header) = f.next(t.response_header, "ResponseHeader") else { return malformed };
        let status = f.int32(&response_header, 1);
        let status_name = match status {
            Some(0) => "SUCCESS",
            Some(1) => "ERROR",
            Some(2) => "FATAL",
            _ => "UNKNOWN",
        };
        f.rpc.push(entry(name!("status"), status_name.to_owned()));
        service(f, &response_header, 2, 3);
        if status == Some(0) {
            let Some(body) = f.next(t.response_body, "RspResponseBody") else { return malformed };
            let method = f.int32(&body, 1);
            let bytes = body.bytes(t.schema, 2).unwrap_or_default();
            method_message(f, method, false, bytes, brief)
        } else {
            let Some(body) = f.next(t.exception_body, EXCEPTION) else { return malformed };
            let exception = body.to_value(t.schema);
            let name_of = exception.get("exceptionName").and_then(Value::as_str).unwrap_or("").to_owned();
            let first_line = exception
                .get("stackTrace")
                .and_then(Value::as_str)
                .and_then(|s| s.lines().next())
                .unwrap_or("")
                .to_owned();
            let short = name_of.rsplit('.').next().unwrap_or(&name_of).to_owned();
            f.findings.push(if short == "StandbyException" {
                finding!(TubeMqProblem::StandbyMaster, "exception" => name_of, "message" => first_line)
            } else {
                finding!(TubeMqProblem::Exception, "exception" => name_of, "status" => status_name.to_owned(),
                         "message" => first_line)
            });
            (Text::Name(name!("RspExceptionBody")), Some(exception), Vec::new())
        }
    }
}

/// The service type and protocol version of a request or response header.
fn service(f: &mut Frame<'_>, header: &Parsed<'_>, service_field: u32, version_field: u32) {
    if let Some(service_type) = f.int32(header, service_field) {
        f.rpc.push(entry(name!("service_type"), service_type));
        if let Some(service) = service_name(service_type) {
            f.rpc.push(entry(name!("service"), service.to_owned()));
        }
    }
    if let Some(version) = f.int32(header, version_field) {
        f.rpc.push(entry(name!("protocol_version"), version));
    }
}

/// The message of method `method` in `bytes`: the request's or the response's, by the method table.
fn method_message(
    f: &mut Frame<'_>,
    method: Option<i64>,
    request: bool,
    bytes: &[u8],
    brief: bool,
) -> (Text, Option<Value>, Vec<Value>) {
    let Some(method) = method else {
        f.findings.push(finding!(TubeMqProblem::Unparsable,
                                 "message" => (if request { "RequestBody" } else { "RspResponseBody" }).to_owned()));
        return (Text::Name(name!("MALFORMED")), None, Vec::new());
    };
    f.rpc.push(entry(name!("method"), method));
    let Some(&(spec, request_msg, response_msg)) = f.t.method(method) else {
        f.findings.push(finding!(TubeMqProblem::UnknownMethod, "method" => method, "length" => bytes.len()));
        // one type for every unknown id (the id is in `rpc`), with an empty command: its response still pairs
        return (
            Text::Name(if request { name!("UNKNOWN_REQUEST") } else { name!("UNKNOWN_RESPONSE") }),
            Some(Value::Map(Map::new())),
            Vec::new(),
        );
    };
    f.rpc.push(entry(name!("method_name"), spec.constant.to_owned()));
    // a request for a method of another service: the server refuses it ("No method N in service S")
    let service_type = f.rpc.iter().find(|(k, _)| k.as_str() == "service_type").and_then(|(_, v)| v.as_i64());
    if let (true, Some(service_type)) = (request, service_type) {
        if service_type != spec.service_type {
            f.findings
                .push(finding!(TubeMqProblem::ServiceMismatch, "method" => method, "service_type" => service_type,
                                     "expected" => spec.service_type));
        }
    }
    let (msg, message_name) = if request { (request_msg, spec.request) } else { (response_msg, spec.response) };
    let (Some(msg), Some(message_name)) = (msg, message_name) else {
        // declared by upstream, never encoded by it: named, its bytes not decoded
        f.findings
            .push(finding!(TubeMqProblem::UndecodableMethod, "method" => method, "name" => spec.constant.to_owned(),
                                 "length" => bytes.len()));
        let suffix = if request { "REQUEST" } else { "RESPONSE" };
        return (Text::Owned(format!("{}_{suffix}", spec.constant)), Some(Value::Map(Map::new())), Vec::new());
    };
    let Some((parsed, mut command)) = f.command(msg, message_name, bytes) else {
        return (Text::Owned(message_name.to_owned()), None, Vec::new());
    };
    let messages = match message_name {
        "SendMessageRequestP2B" => sent_message(f, &parsed, &mut command, brief),
        "GetMessageResponseB2C" => delivered_messages(f, &parsed, &mut command, brief),
        _ => Vec::new(),
    };
    if !request {
        error_code(f, message_name, &command);
    }
    if let Value::Map(map) = &mut command {
        read_descriptions(map);
    }
    (Text::Owned(message_name.to_owned()), Some(command), messages)
}

/// A response's errCode other than 200 (SUCCESS) is a problem; an empty poll (GetMessage's 404 and the
/// partition-wait codes) is a note, as consumers poll until data comes.
fn error_code(f: &mut Frame<'_>, message_name: &str, command: &Value) {
    let Some(code) = command.get("errCode").and_then(Value::as_i64) else { return };
    if code == 200 {
        return;
    }
    let text = command.get("errMsg").and_then(Value::as_str).unwrap_or("").to_owned();
    let code_name = error_code_name(code).map_or(Value::Null, |n| Value::from(n.to_owned()));
    let waiting = message_name == "GetMessageResponseB2C" && matches!(code, 404..=408);
    f.findings.push(if waiting {
        finding!(TubeMqProblem::ConsumeWait, "code" => code, "name" => code_name, "message" => text)
    } else {
        finding!(TubeMqProblem::ErrorCode, "type" => message_name.to_owned(), "code" => code, "name" => code_name,
                 "message" => text)
    });
}

/// The structured strings a command holds, read into `<field>_decoded` beside them (also inside a rebalance
/// event), and the event's operation named.
fn read_descriptions(map: &mut Map) {
    let mut added = Vec::new();
    for (key, value) in map.iter_mut() {
        if let Value::Map(inner) = value {
            read_descriptions(inner);
            continue;
        }
        let Some(read) = info::reader(key.as_str()) else { continue };
        let decoded: Vec<Value> = match value {
            Value::List(items) => items.iter().map(|v| v.as_str().and_then(read).unwrap_or(Value::Null)).collect(),
            Value::Str(text) => vec![read(text.as_str()).unwrap_or(Value::Null)],
            _ => continue,
        };
        added.push((Text::Owned(format!("{}_decoded", key.as_str())), Value::List(decoded)));
    }
    if let Some(op) = map.iter().find(|(k, _)| k.as_str() == "opType").and_then(|(_, v)| v.as_i64()) {
        if map.iter().any(|(k, _)| k.as_str() == "rebalanceId") {
            if let Some(name) = event_type_name(op) {
                added.push(entry(name!("opType_name"), name.to_owned()));
            }
        }
    }
    map.extend(added);
}

/// Remove `field` from the command map (its bytes become the messages' records).
fn take_field(command: &mut Value, field: &str) {
    if let Value::Map(map) = command {
        map.retain(|(k, _)| k.as_str() != field);
    }
}

/// One application message: its data split as the consumer splits it (`[attrLen][attributes][payload]`
/// when flag bit 0 is set), its checksum checked (`checksum_wire` -1: not supplied).
fn message_record(
    f: &mut Frame<'_>,
    data: &[u8],
    flag: Option<i64>,
    checksum_wire: Option<i64>,
    id: Option<i64>,
    brief: bool,
) -> Value {
    let mut fields: Map = Vec::with_capacity(8);
    let (mut payload, mut attributes) = (data, None);
    if flag.is_some_and(|flag| flag & 1 == 1) {
        match data.get(..4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]])) {
            Some(length) if length >= 0 && (length as usize) <= data.len() - 4 => {
                let length = length as usize;
                attributes = Some(crate::value::text(&data[4..4 + length]));
                payload = &data[4 + length..];
            }
            other => f
                .findings
                .push(finding!(TubeMqProblem::MessageAttributes, "message_id" => id.map_or(Value::Null, Value::from),
                "attr_len" => other.map_or(Value::Null, |n| Value::from(n as i64)), "data_size" => data.len())),
        }
    }
    fields.push(entry(name!("payload_size"), payload.len()));
    if !brief {
        fields.push(entry(name!("payload"), Value::Bytes(payload.to_vec())));
    }
    if let Some(id) = id {
        fields.push(entry(name!("message_id"), id));
    }
    if let Some(flag) = flag {
        fields.push(entry(name!("flag"), flag));
    }
    if let Some(attributes) = attributes {
        fields.push((Text::Name(name!("attributes")), Value::Str(attributes)));
    }
    // the checksum as the consumer checks it; the producer's -1 means it supplied none
    let computed = checksum_wire.filter(|&wire| wire != -1).map(|_| message_checksum(data));
    let verdict = match (checksum_wire, computed) {
        (Some(wire), Some(computed)) if wire == computed => name!("valid"),
        (Some(wire), Some(computed)) => {
            f.findings
                .push(finding!(TubeMqProblem::ChecksumInvalid, "message_id" => id.map_or(Value::Null, Value::from),
                                     "wire" => wire, "computed" => computed));
            name!("invalid")
        }
        _ => name!("absent"),
    };
    fields.push(entry(name!("checksum"), verdict));
    if let Some(wire) = checksum_wire {
        fields.push(entry(name!("checksum_wire"), wire));
    }
    if let (Some(computed), true) = (computed, verdict.as_str() == "invalid") {
        fields.push(entry(name!("checksum_computed"), computed));
    }
    Value::Map(fields)
}

/// SendMessageRequestP2B: data, flag, checkSum (the producer's -1: not supplied).
fn sent_message(f: &mut Frame<'_>, parsed: &Parsed<'_>, command: &mut Value, brief: bool) -> Vec<Value> {
    let s = f.t.schema;
    let Some(data) = parsed.bytes(s, 4) else { return Vec::new() };
    let flag = parsed.varint(s, 5).map(|v| v as i32 as i64);
    let checksum = parsed.varint(s, 6).map(|v| v as i32 as i64);
    take_field(command, "data");
    vec![message_record(f, data, flag, checksum, None, brief)]
}

/// GetMessageResponseB2C: the TransferedMessages (messageId, checkSum, payLoadData, flag). Beyond
/// `max_messages` (an empty message is two bytes: a frame can carry millions) each is still read and checked,
/// but only counted: its bytes, and its problems, which the truncation's finding counts.
fn delivered_messages(f: &mut Frame<'_>, parsed: &Parsed<'_>, command: &mut Value, brief: bool) -> Vec<Value> {
    let s = f.t.schema;
    let mut out = Vec::new();
    let (mut count, mut bytes, mut invalid, mut unlisted_problems) = (0usize, 0i64, false, 0usize);
    for m in parsed.messages(s, 4) {
        let data = m.bytes(s, 3).unwrap_or_default();
        let id = m.varint(s, 1).map(|v| v as i64);
        let checksum = m.varint(s, 2).map(|v| v as i32 as i64);
        let flag = m.varint(s, 4).map(|v| v as i32 as i64);
        let listed = count < f.caps.max_batch_entries;
        let before = f.findings.len();
        let record = message_record(f, data, flag, checksum, id, brief || !listed);
        count += 1;
        bytes += record.get("payload_size").and_then(Value::as_i64).unwrap_or(0);
        invalid |= record.get("checksum").and_then(Value::as_str) == Some("invalid");
        if listed {
            out.push(record);
        } else {
            unlisted_problems += f.findings.len() - before;
            f.findings.truncate(before);
        }
    }
    if count > out.len() {
        let kept = out.len();
        f.findings.push(finding!(TubeMqProblem::MessagesTruncated, "messages" => count, "kept" => kept,
                                 "more" => count - kept, "unlisted_problems" => unlisted_problems));
        let summary = Value::Map(vec![entry(name!("count"), count), entry(name!("bytes"), bytes)]);
        // the frame's verdict over every message, listed or not
        let checksum = if invalid { "invalid" } else { super::checksum_verdict(&out) };
        f.whole = Some(Box::new(WholeMessages { summary, checksum }));
    }
    take_field(command, "messages");
    out
}
