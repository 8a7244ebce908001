//! What Pulsar's frames are to the statistics (`crate::stats`), and what those read from their commands: the
//! answers to the `Protocol` trait's questions for the statistics, as plain data.

use crate::protocols::protocol::{ChunkFacts, CompletedChunks, Delivered, PublishFacts, StatsRole};
use crate::value::count as int;
use crate::value::{Map, Name, Value};

/// The command keys the functions below read.
pub static COMMAND_KEYS: [&str; 7] = [
    "client_version",
    "protocol_version",
    "server_version",
    "error",
    "message_id",
    "redelivery_count",
    "messagePermits",
];

/// The record keys `publish_facts` reads (`messages_summary`, `messages` the statistics keep anyway).
pub static RECORD_KEYS: [&str; 3] = ["metadata", "reassembled", "uncompressed_size"];
/// The keys of a message `publish_facts` reads.
pub static MESSAGE_KEYS: [&str; 2] = ["uuid", "chunk_id"];

/// What a frame of `type_name` is to the statistics.
pub fn role(type_name: &str) -> Option<StatsRole> {
    Some(match type_name {
        "CONNECT" => StatsRole::ConnectRequest,
        "CONNECTED" => StatsRole::ConnectAnswer,
        "SEND" => StatsRole::Publish,
        "SEND_RECEIPT" => StatsRole::PublishAccepted,
        "SEND_ERROR" => StatsRole::PublishRefused,
        "MESSAGE" => StatsRole::Delivery,
        "ACK" => StatsRole::Ack,
        "FLOW" => StatsRole::Permits,
        "ERROR" => StatsRole::ErrorAnswer,
        _ => return None,
    })
}

/// The value under `key`; a JSON null counts as absent.
fn get<'a>(map: &'a Map, key: &str) -> Option<&'a Value> {
    crate::analysis::map_get(map, key).filter(|v| !v.is_null())
}

/// The versions a CONNECT (the client's and the protocol's) or a CONNECTED (the broker's) names; an absent
/// field is shown as "" or 0, a null one as null.
pub fn connection_facts(role: StatsRole, command: &Map) -> Vec<(&'static Name, Value)> {
    let field = |key: &str, default: Value| crate::analysis::map_get(command, key).map_or(default, Value::clone);
    match role {
        StatsRole::ConnectRequest => vec![
            (crate::name!("client_version"), field("client_version", Value::from(String::new()))),
            (crate::name!("protocol_version"), field("protocol_version", Value::Int(0))),
        ],
        StatsRole::ConnectAnswer => {
            vec![(crate::name!("server_version"), field("server_version", Value::from(String::new())))]
        }
        _ => Vec::new(),
    }
}

/// A FLOW's permits.
pub fn permits(command: &Map) -> i64 {
    int(get(command, "messagePermits"))
}

/// A MESSAGE's entry (ledger and entry id as one number: less memory than a pair) and whether its
/// `redelivery_count` says it came before.
pub fn delivered(command: &Map) -> Delivered {
    let id = get(command, "message_id").and_then(Value::as_map);
    let part = |key: &str| int(id.and_then(|id| get(id, key))) as u64;
    Delivered {
        entry: Some((u128::from(part("ledgerId")) << 64) | u128::from(part("entryId"))),
        redelivered: get(command, "redelivery_count").is_some_and(Value::truthy),
    }
}

/// The error an ERROR or SEND_ERROR names, as Python's `str()` shows it.
pub fn error(command: &Map) -> Option<String> {
    get(command, "error").map(crate::text::py_str)
}

/// What a SEND record (summary or full) says of its batch and compression: its `metadata`'s
/// `num_messages_in_batch` and `compression` (other than `NONE`), and, compressed, its `uncompressed_size` or
/// the chunk it is (`messages_summary.chunk`, or its first message's `chunk_id` and `uuid`) with the
/// `reassembled` message its last chunk completes.
pub fn publish_facts(record: &Map) -> PublishFacts {
    let Some(metadata) = get(record, "metadata").and_then(Value::as_map) else {
        return PublishFacts::default();
    };
    let present = |map: &Map, key: &str| crate::analysis::map_get(map, key).is_some();
    let batched_messages =
        present(metadata, "num_messages_in_batch").then(|| int(get(metadata, "num_messages_in_batch")));
    let codec = crate::analysis::map_get(metadata, "compression").map(crate::text::py_str).filter(|c| c != "NONE");
    if codec.is_none() {
        return PublishFacts { batched_messages, ..PublishFacts::default() };
    }
    PublishFacts {
        batched_messages,
        codec,
        uncompressed_size: present(record, "uncompressed_size").then(|| int(get(record, "uncompressed_size"))),
        chunk: chunk_message(record).map(|message| ChunkFacts { message, completed: completed_chunks(record) }),
    }
}

/// The uuid of the chunked message a SEND record is a chunk of, as Python's `str()` shows it.
fn chunk_message(record: &Map) -> Option<String> {
    let py_str = |uuid: Option<&Value>| uuid.map_or_else(|| "None".to_owned(), crate::text::py_str);
    if let Some(summary) = get(record, "messages_summary").and_then(Value::as_map) {
        return get(summary, "chunk").and_then(Value::as_map).and_then(|c| get(c, "uuid")).map(|u| py_str(Some(u)));
    }
    let first = get(record, "messages")?.as_list()?.first()?.as_map()?;
    if crate::analysis::map_get(first, "chunk_id").is_some() {
        get(first, "uuid").map(|u| py_str(Some(u)))
    } else {
        None
    }
}

/// The message a last chunk's record says it completed (`reassembled`).
fn completed_chunks(record: &Map) -> Option<CompletedChunks> {
    let whole = get(record, "reassembled").and_then(Value::as_map)?;
    Some(CompletedChunks {
        message: get(whole, "uuid").and_then(Value::as_str).map(str::to_owned),
        frames: get(whole, "chunks").and_then(Value::as_list).unwrap_or(&[]).iter().map(Value::as_i64).collect(),
        plain_size: get(whole, "payload_size").map(|size| int(Some(size))),
    })
}
