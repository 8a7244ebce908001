//! What Pulsar's frames are to the statistics (`crate::stats`), and what those read from their commands: the
//! answers to the `Protocol` trait's questions for the statistics, as plain data.

use crate::protocols::protocol::{Delivered, StatsRole};
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
