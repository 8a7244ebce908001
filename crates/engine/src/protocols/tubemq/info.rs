//! The structured strings TubeMQ's messages carry (broker, partition, subscription and topic descriptions),
//! read into maps. The formats are those the reference implementation writes and splits (BrokerInfo,
//! Partition, SubscribeInfo, DataConverterUtil.convertTopicInfo), not the older ones the .proto comments give.

use crate::name;
use crate::value::{entry, Map, Value};

/// `brokerId:host[:port]`
fn broker(text: &str, out: &mut Map) -> Option<()> {
    let mut parts = text.split(':');
    let id: i64 = parts.next()?.trim().parse().ok()?;
    let host = parts.next()?;
    out.push(entry(name!("broker_id"), id));
    out.push(entry(name!("host"), host.to_owned()));
    if let Some(port) = parts.next() {
        out.push(entry(name!("port"), port.trim().parse::<i64>().ok()?));
    }
    parts.next().is_none().then_some(())
}

/// `topic:partitionId`
fn topic_partition(text: &str, out: &mut Map) -> Option<()> {
    let (topic, partition) = text.rsplit_once(':')?;
    out.push(entry(name!("topic"), topic.to_owned()));
    out.push(entry(name!("partition"), partition.trim().parse::<i64>().ok()?));
    Some(())
}

/// A broker description: `brokerId:host:port`.
pub fn broker_info(text: &str) -> Option<Value> {
    let mut out = Map::new();
    broker(text, &mut out)?;
    Some(Value::Map(out))
}

/// A partition: `brokerId:host:port#topic:partitionId`.
pub fn partition_info(text: &str) -> Option<Value> {
    let (b, p) = text.split_once('#')?;
    let mut out = Map::new();
    broker(b, &mut out)?;
    topic_partition(p, &mut out)?;
    Some(Value::Map(out))
}

/// A subscription: `consumerId@group#brokerId:host:port#topic:partitionId`.
pub fn subscribe_info(text: &str) -> Option<Value> {
    let mut segments = text.split('#');
    let (consumer, group) = segments.next()?.split_once('@')?;
    let mut out = vec![entry(name!("consumer_id"), consumer.to_owned()), entry(name!("group"), group.to_owned())];
    broker(segments.next()?, &mut out)?;
    topic_partition(segments.next()?, &mut out)?;
    segments.next().is_none().then_some(Value::Map(out))
}

/// A topic's placement: `topic#brokerId:partitions:stores[,brokerId:partitions:stores...][#maxMsgSize]`.
pub fn topic_info(text: &str) -> Option<Value> {
    let mut segments = text.trim().split('#');
    let topic = segments.next()?;
    let mut brokers = Vec::new();
    for placement in segments.next()?.split(',') {
        let mut numbers = placement.split(':').map(|n| n.trim().parse::<i64>().ok());
        let (id, partitions, stores) = (numbers.next()??, numbers.next()??, numbers.next()??);
        if numbers.next().is_some() {
            return None;
        }
        brokers.push(Value::Map(vec![
            entry(name!("broker_id"), id),
            entry(name!("partitions"), partitions),
            entry(name!("stores"), stores),
        ]));
    }
    let mut out = vec![entry(name!("topic"), topic.to_owned()), entry(name!("brokers"), Value::List(brokers))];
    match segments.next() {
        None | Some("") => {}
        Some(size) => out.push(entry(name!("max_msg_size"), size.trim().parse::<i64>().ok()?)),
    }
    segments.next().is_none().then_some(Value::Map(out))
}

/// The reader of a string field of this name, if it holds one of these descriptions.
pub fn reader(field: &str) -> Option<fn(&str) -> Option<Value>> {
    Some(match field {
        "brokerInfos" => broker_info,
        "topicInfos" | "topicInfo" => topic_info,
        "subscribeInfo" => subscribe_info,
        "partitionInfo" => partition_info,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_descriptions() {
        let p = partition_info("3:10.0.0.1:8123#orders:2").unwrap();
        assert_eq!(p.get("broker_id").and_then(Value::as_i64), Some(3));
        assert_eq!(p.get("topic").and_then(Value::as_str), Some("orders"));
        assert_eq!(p.get("partition").and_then(Value::as_i64), Some(2));
        let s = subscribe_info("c-1@g1#3:broker-a:8123#topic-x:0").unwrap();
        assert_eq!(s.get("group").and_then(Value::as_str), Some("g1"));
        assert_eq!(s.get("host").and_then(Value::as_str), Some("broker-a"));
        let t = topic_info("orders#1:4:2,2:4:2#1048576").unwrap();
        assert_eq!(t.get("brokers").and_then(Value::as_list).map(<[Value]>::len), Some(2));
        assert_eq!(t.get("max_msg_size").and_then(Value::as_i64), Some(1048576));
        assert!(topic_info("orders").is_none());
        assert!(partition_info("x:host:1#t:p").is_none());
        assert!(subscribe_info("nogroup#1:h:1#t:0").is_none());
    }
}
