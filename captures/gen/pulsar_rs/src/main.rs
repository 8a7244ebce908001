//! Drives the pulsar-rs client (crate `pulsar` 6.9.1) through one capture scenario against a running broker and
//! prints, as one JSON document on stdout, what the client API reported: the send receipts, the received
//! messages (ids, payloads, metadata) and every ack / nack the application issued. Progress goes to stderr.
//!
//! usage: pulsarrs-capture-gen <scenario> <pulsar-url> [codec]
//!   basic                  non-batched producer, 10 messages with properties and a key; Exclusive consumer acks
//!   batch [codec]          batching producer (batch of 5), 20 messages (+ 2 non-batched when compressed);
//!                          Exclusive consumer acks each
//!   nack                   batched + non-batched messages; Shared consumer nacks some, then acks the redeliveries
//!   produce-cross [codec]  produce only (batched compressed + 2 plain ones), for another client to consume
//!   partitioned            non-batched producer on a partitioned topic, routed by key (RoutingPolicy::RoundRobin)
//!   many                   3 producers (3 topics) and 2 consumers on one client, i.e. one connection
//!   errors                 what the broker refuses: a producer name in use, a second Exclusive producer, a second
//!                          Exclusive consumer, a send after close
//!   seek-cumulative        produce, then cumulative_ack_with_id and seek by time from a consumer at Latest
//!
//! codec: none | snappy | lz4 | zstd | zlib
//!
//! Nothing here derives a value from the wire: every field comes from a pulsar-rs API return value.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use pulsar::compression::{Compression, CompressionLz4, CompressionSnappy, CompressionZlib, CompressionZstd};
use pulsar::consumer::InitialPosition;
use pulsar::proto::{MessageIdData, MessageMetadata};
use pulsar::routing_policy::RoutingPolicy;
use pulsar::{
    CommandSendReceipt, Consumer, ConsumerOptions, OperationRetryOptions, Producer, ProducerOptions, Pulsar, SubType,
    TokioExecutor,
};
use serde_json::{json, Value};

type Client = Pulsar<TokioExecutor>;
type BytesConsumer = Consumer<Vec<u8>, TokioExecutor>;

const BATCH_SIZE: u32 = 5;

fn log(text: &str) {
    eprintln!("[pulsarrs-gen] {text}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn id_json(id: &MessageIdData) -> Value {
    json!({
        "ledger_id": id.ledger_id,
        "entry_id": id.entry_id,
        "partition": id.partition,
        "batch_index": id.batch_index,
        "batch_size": id.batch_size,
        "ack_set": id.ack_set,
    })
}

fn receipt_json(receipt: &CommandSendReceipt) -> Value {
    json!({
        "producer_id": receipt.producer_id,
        "sequence_id": receipt.sequence_id,
        "highest_sequence_id": receipt.highest_sequence_id,
        "message_id": receipt.message_id.as_ref().map(id_json),
    })
}

fn metadata_json(meta: &MessageMetadata) -> Value {
    let properties: BTreeMap<&str, &str> =
        meta.properties.iter().map(|kv| (kv.key.as_str(), kv.value.as_str())).collect();
    json!({
        "producer_name": meta.producer_name,
        "sequence_id": meta.sequence_id,
        "publish_time_ms": meta.publish_time,
        "properties": properties,
        "partition_key": meta.partition_key,
        "partition_key_b64_encoded": meta.partition_key_b64_encoded,
        "ordering_key_hex": meta.ordering_key.as_deref().map(hex),
        "event_time_ms": meta.event_time,
        "compression": meta.compression,
        "uncompressed_size": meta.uncompressed_size,
        "num_messages_in_batch": meta.num_messages_in_batch,
    })
}

fn compression_for(codec: &str) -> Option<Compression> {
    match codec {
        "none" => None,
        "snappy" => Some(Compression::Snappy(CompressionSnappy::default())),
        "lz4" => Some(Compression::Lz4(CompressionLz4::default())),
        "zstd" => Some(Compression::Zstd(CompressionZstd::default())),
        "zlib" => Some(Compression::Zlib(CompressionZlib::default())),
        other => panic!("unknown codec {other}"),
    }
}

/// One message the scenario sends: its bytes and the API-level attributes given to the builder.
struct Outgoing {
    payload: Vec<u8>,
    properties: Vec<(String, String)>,
    key: Option<String>,
}

fn outgoing(scenario: &str, index: usize, filler_repeats: usize, key_count: usize) -> Outgoing {
    let mut text = format!("pulsar-rs {scenario} message {index:03} ");
    text.push_str(&"the quick brown fox jumps over the lazy dog ".repeat(filler_repeats));
    Outgoing {
        payload: text.into_bytes(),
        properties: vec![("idx".into(), index.to_string()), ("scenario".into(), scenario.into())],
        key: (key_count > 0).then(|| format!("key-{}", index % key_count)),
    }
}

fn sent_record(
    index: usize,
    producer_name: &str,
    message: &Outgoing,
    receipt: Result<CommandSendReceipt, String>,
) -> Value {
    let properties: BTreeMap<&str, &str> = message.properties.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut record = json!({
        "i": index,
        "producer": producer_name,
        "payload_hex": hex(&message.payload),
        "payload_len": message.payload.len(),
        "properties": properties,
        "key": message.key,
    });
    match receipt {
        Ok(receipt) => record["receipt"] = receipt_json(&receipt),
        Err(error) => record["send_error"] = json!(error),
    }
    record
}

async fn make_producer(
    client: &Client,
    topic: &str,
    name: &str,
    batch_size: Option<u32>,
    compression: Option<Compression>,
) -> Result<Producer<TokioExecutor>, pulsar::Error> {
    let options = ProducerOptions {
        batch_size,
        // Flushes a partial batch; the scenarios send multiples of the batch size, so it is only a safety net.
        batch_timeout: batch_size.map(|_| Duration::from_millis(200)),
        compression,
        ..Default::default()
    };
    client.producer().with_topic(topic).with_name(name).with_options(options).build().await
}

/// Queues every message first (so batching can group them), then awaits each send future in order.
async fn send_all(producer: &mut Producer<TokioExecutor>, producer_name: &str, messages: &[Outgoing]) -> Vec<Value> {
    let mut futures = Vec::new();
    for message in messages {
        let mut builder = producer.create_message().with_content(message.payload.clone());
        for (key, value) in &message.properties {
            builder = builder.with_property(key.clone(), value.clone());
        }
        if let Some(key) = &message.key {
            builder = builder.with_key(key.clone());
        }
        futures.push(builder.send_non_blocking().await);
    }
    let mut records = Vec::new();
    for (index, (message, queued)) in messages.iter().zip(futures).enumerate() {
        let receipt = match queued {
            Ok(future) => future.await.map_err(|e| format!("{e}")),
            Err(e) => Err(format!("{e}")),
        };
        records.push(sent_record(index, producer_name, message, receipt));
    }
    records
}

/// Sends one message at a time and waits for its receipt before the next (the non-batched path).
async fn send_one_by_one(
    producer: &mut Producer<TokioExecutor>,
    producer_name: &str,
    messages: &[Outgoing],
) -> Vec<Value> {
    let mut records = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        records.extend(send_all(producer, producer_name, std::slice::from_ref(message)).await.into_iter().map(
            |mut record| {
                record["i"] = json!(index);
                record
            },
        ));
    }
    records
}

async fn make_consumer(
    client: &Client,
    topic: &str,
    subscription: &str,
    name: &str,
    sub_type: SubType,
) -> Result<BytesConsumer, pulsar::Error> {
    client
        .consumer()
        .with_topic(topic)
        .with_subscription(subscription)
        .with_consumer_name(name)
        .with_subscription_type(sub_type)
        .with_options(ConsumerOptions::default().with_initial_position(InitialPosition::Earliest))
        .build()
        .await
}

/// What the consumer stream handed over: a message, an error, the end of the stream, or nothing in time.
enum Next {
    Message(Box<pulsar::consumer::Message<Vec<u8>>>, Value),
    Error(String),
    Ended,
    TimedOut,
}

async fn next_message(consumer: &mut BytesConsumer, wait: Duration, started: Instant) -> Next {
    match tokio::time::timeout(wait, consumer.next()).await {
        Err(_) => Next::TimedOut,
        Ok(None) => Next::Ended,
        Ok(Some(Err(e))) => Next::Error(format!("{e}")),
        Ok(Some(Ok(message))) => {
            let record = json!({
                "t_ms": started.elapsed().as_millis() as u64,
                "topic": message.topic,
                "message_id": id_json(message.message_id()),
                "message_data_batch_size": message.message_id.batch_size,
                "payload_hex": hex(&message.payload.data),
                "payload_len": message.payload.data.len(),
                "key": message.key(),
                "metadata": metadata_json(message.metadata()),
                // pulsar-rs keeps CommandMessage.redelivery_count internal (dead-letter only): not in its API.
                "redelivery_count": Value::Null,
            });
            Next::Message(Box::new(message), record)
        }
    }
}

/// Receives `expected` messages (or until an idle timeout) and acks each one as it arrives.
async fn receive_and_ack(consumer: &mut BytesConsumer, expected: usize, events: &mut Vec<Value>) -> usize {
    let started = Instant::now();
    let mut received = 0;
    while received < expected {
        match next_message(consumer, Duration::from_secs(10), started).await {
            Next::Message(message, mut record) => {
                let ack = consumer.ack(&message).await.map_err(|e| format!("{e}"));
                record["app_action"] = json!("ack");
                record["ack_result"] = json!(ack.err().unwrap_or_else(|| "ok".into()));
                events.push(json!({"event": "received", "message": record}));
                received += 1;
            }
            Next::Error(error) => events.push(json!({"event": "stream_error", "error": error})),
            Next::Ended => {
                events.push(json!({"event": "stream_ended"}));
                break;
            }
            Next::TimedOut => {
                events.push(json!({"event": "receive_timeout", "after_s": 10}));
                break;
            }
        }
    }
    received
}

async fn close_producer(producer: &mut Producer<TokioExecutor>, name: &str, events: &mut Vec<Value>) {
    let result = producer.close().await.map_err(|e| format!("{e}"));
    events.push(
        json!({"event": "producer_close", "producer": name, "result": result.err().unwrap_or_else(|| "ok".into())}),
    );
}

async fn close_consumer(consumer: &mut BytesConsumer, events: &mut Vec<Value>) {
    let result = consumer.close().await.map_err(|e| format!("{e}"));
    events.push(json!({"event": "consumer_close", "result": result.err().unwrap_or_else(|| "ok".into())}));
}

async fn scenario_basic(client: &Client) -> Result<Value, pulsar::Error> {
    let topic = "persistent://public/default/rs-basic";
    let producer_name = "rs-basic-producer";
    let messages: Vec<Outgoing> = (0..10).map(|i| outgoing("basic", i, 1, 3)).collect();
    let mut events = Vec::new();
    let mut producer = make_producer(client, topic, producer_name, None, None).await?;
    let sent = send_one_by_one(&mut producer, producer_name, &messages).await;
    let mut consumer = make_consumer(client, topic, "rs-basic-sub", "rs-basic-consumer", SubType::Exclusive).await?;
    let received = receive_and_ack(&mut consumer, messages.len(), &mut events).await;
    close_consumer(&mut consumer, &mut events).await;
    close_producer(&mut producer, producer_name, &mut events).await;
    Ok(json!({
        "topic": topic,
        "producers": [{"name": producer_name, "batch_size": null, "compression": "none"}],
        "consumer": {"subscription": "rs-basic-sub", "name": "rs-basic-consumer", "sub_type": "Exclusive",
                     "initial_position": "Earliest"},
        "sent": sent,
        "events": events,
        "summary": {"sent": messages.len(), "received": received},
    }))
}

async fn scenario_batch(client: &Client, codec: &str) -> Result<Value, pulsar::Error> {
    let topic = format!("persistent://public/default/rs-batch-{codec}");
    let batch_name = format!("rs-batch-{codec}");
    let batched: Vec<Outgoing> = (0..20).map(|i| outgoing(&format!("batch-{codec}"), i, 4, 4)).collect();
    let mut events = Vec::new();
    let mut batch_producer =
        make_producer(client, &topic, &batch_name, Some(BATCH_SIZE), compression_for(codec)).await?;
    let mut sent = send_all(&mut batch_producer, &batch_name, &batched).await;
    let mut producers =
        vec![json!({"name": batch_name, "batch_size": BATCH_SIZE, "batch_timeout_ms": 200, "compression": codec})];
    let mut expected = batched.len();
    // A compressed non-batched message takes another code path (uncompressed_size, no num_messages_in_batch).
    let mut single = None;
    if codec != "none" {
        let single_name = format!("rs-single-{codec}");
        let singles: Vec<Outgoing> = (0..2).map(|i| outgoing(&format!("single-{codec}"), i, 40, 0)).collect();
        let mut producer = make_producer(client, &topic, &single_name, None, compression_for(codec)).await?;
        sent.extend(send_one_by_one(&mut producer, &single_name, &singles).await);
        producers.push(json!({"name": single_name, "batch_size": null, "compression": codec}));
        expected += singles.len();
        single = Some((producer, single_name));
    }
    let subscription = format!("rs-batch-{codec}-sub");
    let mut consumer = make_consumer(client, &topic, &subscription, "rs-batch-consumer", SubType::Exclusive).await?;
    let received = receive_and_ack(&mut consumer, expected, &mut events).await;
    close_consumer(&mut consumer, &mut events).await;
    close_producer(&mut batch_producer, &batch_name, &mut events).await;
    if let Some((mut producer, name)) = single {
        close_producer(&mut producer, &name, &mut events).await;
    }
    Ok(json!({
        "topic": topic,
        "producers": producers,
        "consumer": {"subscription": subscription, "name": "rs-batch-consumer", "sub_type": "Exclusive",
                     "initial_position": "Earliest"},
        "sent": sent,
        "events": events,
        "summary": {"sent": expected, "received": received},
    }))
}

/// Shared subscription: the first delivery of some messages is nacked (pulsar-rs sends the redeliver request at
/// once), every other delivery is acked; ends when the stream has been idle for a while.
async fn scenario_nack(client: &Client) -> Result<Value, pulsar::Error> {
    let topic = "persistent://public/default/rs-nack";
    let batch_name = "rs-nack-batched";
    let single_name = "rs-nack-single";
    let batched: Vec<Outgoing> = (0..10).map(|i| outgoing("nack-batched", i, 1, 0)).collect();
    let singles: Vec<Outgoing> = (0..3).map(|i| outgoing("nack-single", i, 1, 0)).collect();
    let nack_batched = [2usize, 7];
    let nack_single = [1usize];
    let mut events = Vec::new();
    let mut batch_producer = make_producer(client, topic, batch_name, Some(BATCH_SIZE), None).await?;
    let mut sent = send_all(&mut batch_producer, batch_name, &batched).await;
    let mut single_producer = make_producer(client, topic, single_name, None, None).await?;
    sent.extend(send_one_by_one(&mut single_producer, single_name, &singles).await);

    let mut consumer = make_consumer(client, topic, "rs-nack-sub", "rs-nack-consumer", SubType::Shared).await?;
    let started = Instant::now();
    let mut nacked_once = std::collections::HashSet::new();
    let mut deliveries = 0;
    let idle = Duration::from_secs(4);
    loop {
        match next_message(&mut consumer, idle, started).await {
            Next::Message(message, mut record) => {
                deliveries += 1;
                let producer = message.metadata().producer_name.clone();
                let index: usize = message
                    .metadata()
                    .properties
                    .iter()
                    .find(|kv| kv.key == "idx")
                    .and_then(|kv| kv.value.parse().ok())
                    .unwrap_or(usize::MAX);
                let to_nack =
                    if producer == batch_name { nack_batched.contains(&index) } else { nack_single.contains(&index) };
                if to_nack && nacked_once.insert((producer.clone(), index)) {
                    let result = consumer.nack(&message).await.map_err(|e| format!("{e}"));
                    record["app_action"] = json!("nack");
                    record["nack_result"] = json!(result.err().unwrap_or_else(|| "ok".into()));
                } else {
                    let result = consumer.ack(&message).await.map_err(|e| format!("{e}"));
                    record["app_action"] = json!("ack");
                    record["ack_result"] = json!(result.err().unwrap_or_else(|| "ok".into()));
                }
                events.push(json!({"event": "received", "message": record}));
            }
            Next::Error(error) => events.push(json!({"event": "stream_error", "error": error})),
            Next::Ended => {
                events.push(json!({"event": "stream_ended"}));
                break;
            }
            Next::TimedOut => {
                events.push(json!({"event": "idle_timeout", "after_s": idle.as_secs(), "t_ms": started.elapsed().as_millis() as u64}));
                break;
            }
        }
    }
    close_consumer(&mut consumer, &mut events).await;
    close_producer(&mut batch_producer, batch_name, &mut events).await;
    close_producer(&mut single_producer, single_name, &mut events).await;
    Ok(json!({
        "topic": topic,
        "producers": [{"name": batch_name, "batch_size": BATCH_SIZE, "batch_timeout_ms": 200, "compression": "none"},
                      {"name": single_name, "batch_size": null, "compression": "none"}],
        "consumer": {"subscription": "rs-nack-sub", "name": "rs-nack-consumer", "sub_type": "Shared",
                     "initial_position": "Earliest"},
        "nack_plan": {"first_delivery_of": {batch_name: nack_batched, single_name: nack_single}},
        "sent": sent,
        "events": events,
        "summary": {"sent": batched.len() + singles.len(), "deliveries": deliveries, "nacks": nacked_once.len()},
    }))
}

/// The message ids the send futures returned, per sent record: (producer, index, id).
fn receipt_ids(sent: &[Value]) -> Vec<(String, usize, MessageIdData)> {
    let mut ids = Vec::new();
    for record in sent {
        let outgoing_index = record["i"].as_u64().unwrap_or_default() as usize;
        let producer = record["producer"].as_str().unwrap_or_default().to_string();
        let id = &record["receipt"]["message_id"];
        if id.is_null() {
            continue;
        }
        let as_i32 = |v: &Value| v.as_i64().map(|n| n as i32);
        ids.push((
            producer,
            outgoing_index,
            MessageIdData {
                ledger_id: id["ledger_id"].as_u64().unwrap_or_default(),
                entry_id: id["entry_id"].as_u64().unwrap_or_default(),
                partition: as_i32(&id["partition"]),
                batch_index: as_i32(&id["batch_index"]),
                batch_size: as_i32(&id["batch_size"]),
                ..Default::default()
            },
        ));
    }
    ids
}

/// pulsar-rs retries ProducerBusy / ConsumerBusy / ServiceNotReady forever by default; a call here is bounded.
async fn bounded<T, E: std::fmt::Display>(
    seconds: u64,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(Duration::from_secs(seconds), call).await {
        Err(_) => Err(format!("no answer within {seconds} s (tokio timeout in the generator)")),
        Ok(result) => result.map_err(|e| format!("{e}")),
    }
}

fn outcome<T>(result: &Result<T, String>) -> Value {
    match result {
        Ok(_) => json!("ok"),
        Err(error) => json!(error),
    }
}

/// pulsar-rs cannot read pulsar-lite's MESSAGE frames (they carry no magic/CRC32C and pulsar-rs always reads
/// one), so this variant drives the nack/ack API by message id instead: the ids are those the send futures
/// returned (with batch_index for batched messages). The Shared consumer subscribes at Latest, after the sends,
/// so the broker has nothing to dispatch to it.
async fn scenario_nack_by_id(client: &Client) -> Result<Value, pulsar::Error> {
    let topic = "persistent://public/default/rs-nack";
    let batch_name = "rs-nack-batched";
    let single_name = "rs-nack-single";
    let batched: Vec<Outgoing> = (0..10).map(|i| outgoing("nack-batched", i, 1, 0)).collect();
    let singles: Vec<Outgoing> = (0..3).map(|i| outgoing("nack-single", i, 1, 0)).collect();
    let mut events = Vec::new();
    let mut batch_producer = make_producer(client, topic, batch_name, Some(BATCH_SIZE), None).await?;
    let mut sent = send_all(&mut batch_producer, batch_name, &batched).await;
    let mut single_producer = make_producer(client, topic, single_name, None, None).await?;
    sent.extend(send_one_by_one(&mut single_producer, single_name, &singles).await);
    let receipt_ids = receipt_ids(&sent);
    let mut consumer = client
        .consumer()
        .with_topic(topic)
        .with_subscription("rs-nack-sub")
        .with_consumer_name("rs-nack-consumer")
        .with_subscription_type(SubType::Shared)
        .with_options(ConsumerOptions::default().with_initial_position(InitialPosition::Latest))
        .build()
        .await?;
    let to_nack = [(batch_name, 2usize), (batch_name, 7), (single_name, 1)];
    let mut calls = Vec::new();
    for (producer, index, id) in &receipt_ids {
        if to_nack.contains(&(producer.as_str(), *index)) {
            let result = consumer.nack_with_id(topic, id.clone()).await.map_err(|e| format!("{e}"));
            calls.push(json!({"call": "nack_with_id", "producer": producer, "i": index, "message_id": id_json(id),
                              "result": result.err().unwrap_or_else(|| "ok".into())}));
        }
    }
    // Let the redeliver requests go out on their own before the acks.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (producer, index, id) in &receipt_ids {
        let result = consumer.ack_with_id(topic, id.clone()).await.map_err(|e| format!("{e}"));
        calls.push(json!({"call": "ack_with_id", "producer": producer, "i": index, "message_id": id_json(id),
                          "result": result.err().unwrap_or_else(|| "ok".into())}));
    }
    let started = Instant::now();
    match next_message(&mut consumer, Duration::from_secs(3), started).await {
        Next::Message(_, record) => events.push(json!({"event": "received", "message": record})),
        Next::Error(error) => events.push(json!({"event": "stream_error", "error": error})),
        Next::Ended => events.push(json!({"event": "stream_ended"})),
        Next::TimedOut => events.push(json!({"event": "receive_timeout", "after_s": 3})),
    }
    close_consumer(&mut consumer, &mut events).await;
    close_producer(&mut batch_producer, batch_name, &mut events).await;
    close_producer(&mut single_producer, single_name, &mut events).await;
    Ok(json!({
        "topic": topic,
        "producers": [{"name": batch_name, "batch_size": BATCH_SIZE, "batch_timeout_ms": 200, "compression": "none"},
                      {"name": single_name, "batch_size": null, "compression": "none"}],
        "consumer": {"subscription": "rs-nack-sub", "name": "rs-nack-consumer", "sub_type": "Shared",
                     "initial_position": "Latest"},
        "sent": sent,
        "api_calls": calls,
        "events": events,
        "summary": {"sent": batched.len() + singles.len(), "nack_calls": to_nack.len(),
                    "ack_calls": receipt_ids.len()},
    }))
}

/// Produces only: a batched, compressed producer, then a plain non-batched one, for another client to consume.
async fn scenario_produce_cross(client: &Client, codec: &str) -> Result<Value, pulsar::Error> {
    let topic = format!("persistent://public/default/rs-cross-{codec}");
    let batch_name = format!("rs-cross-{codec}");
    let plain_name = "rs-cross-plain";
    let batched: Vec<Outgoing> = (0..10).map(|i| outgoing(&format!("cross-{codec}"), i, 4, 2)).collect();
    let plain: Vec<Outgoing> = (0..2).map(|i| outgoing("cross-plain", i, 1, 0)).collect();
    let mut events = Vec::new();
    let mut batch_producer =
        make_producer(client, &topic, &batch_name, Some(BATCH_SIZE), compression_for(codec)).await?;
    let mut sent = send_all(&mut batch_producer, &batch_name, &batched).await;
    let mut plain_producer = make_producer(client, &topic, plain_name, None, None).await?;
    sent.extend(send_one_by_one(&mut plain_producer, plain_name, &plain).await);
    close_producer(&mut batch_producer, &batch_name, &mut events).await;
    close_producer(&mut plain_producer, plain_name, &mut events).await;
    Ok(json!({
        "topic": topic,
        "producers": [{"name": batch_name, "batch_size": BATCH_SIZE, "batch_timeout_ms": 200, "compression": codec},
                      {"name": plain_name, "batch_size": null, "compression": "none"}],
        "sent": sent,
        "events": events,
        "summary": {"sent": batched.len() + plain.len()},
    }))
}

/// A partitioned topic (the broker makes every new topic partitioned: broker-partitioned.toml). The producer routes
/// by key: pulsar-rs uses the key only with an explicit RoutingPolicy::RoundRobin (None means round-robin only).
async fn scenario_partitioned(client: &Client) -> Result<Value, pulsar::Error> {
    let topic = "persistent://public/default/rs-partitioned";
    let producer_name = "rs-part-producer";
    let messages: Vec<Outgoing> = (0..12).map(|i| outgoing("partitioned", i, 1, 4)).collect();
    let mut events = Vec::new();
    let options = ProducerOptions { routing_policy: Some(RoutingPolicy::RoundRobin), ..Default::default() };
    let mut producer =
        client.producer().with_topic(topic).with_name(producer_name).with_options(options).build().await?;
    let partitions = producer.partitions();
    let sent = send_one_by_one(&mut producer, producer_name, &messages).await;
    close_producer(&mut producer, producer_name, &mut events).await;
    Ok(json!({
        "topic": topic,
        "partitions_of_the_producer": partitions,
        "producers": [{"name": producer_name, "batch_size": null, "compression": "none",
                       "routing_policy": "RoundRobin (a keyed message goes to murmur3(key) % partitions)"}],
        "sent": sent,
        "events": events,
        "summary": {"sent": messages.len()},
    }))
}

/// One client, so one connection: a batched producer with keys and properties, a plain one and a ZSTD one on three
/// topics, sending at the same time; then two consumers at Latest (nothing is dispatched to them: pulsar-rs could
/// not read pulsar-lite's MESSAGE frames) ack by the ids the sends returned, one individually, one cumulatively.
async fn scenario_many(client: &Client) -> Result<Value, pulsar::Error> {
    let (topic_a, topic_b, topic_c) = (
        "persistent://public/default/rs-many-a",
        "persistent://public/default/rs-many-b",
        "persistent://public/default/rs-many-c",
    );
    let (name_a, name_b, name_c) = ("rs-many-batched", "rs-many-plain", "rs-many-zstd");
    let batched: Vec<Outgoing> = (0..10).map(|i| outgoing("many-batched", i, 1, 4)).collect();
    let plain: Vec<Outgoing> = (0..4)
        .map(|i| Outgoing { properties: Vec::new(), ..outgoing("many-plain", i, 0, 0) })
        .collect();
    let zstd: Vec<Outgoing> = (0..3).map(|i| outgoing("many-zstd", i, 6, 0)).collect();
    let mut events = Vec::new();
    let mut producer_a = make_producer(client, topic_a, name_a, Some(BATCH_SIZE), None).await?;
    let mut producer_b = make_producer(client, topic_b, name_b, None, None).await?;
    let mut producer_c = make_producer(client, topic_c, name_c, None, compression_for("zstd")).await?;
    let (sent_a, sent_b, sent_c) = futures::join!(
        send_all(&mut producer_a, name_a, &batched),
        send_one_by_one(&mut producer_b, name_b, &plain),
        send_one_by_one(&mut producer_c, name_c, &zstd),
    );
    let sent: Vec<Value> = sent_a.into_iter().chain(sent_b).chain(sent_c).collect();
    let ids = receipt_ids(&sent);
    let subscribe_latest = |topic: &'static str, subscription: &'static str, name: &'static str, sub_type| {
        client
            .consumer()
            .with_topic(topic)
            .with_subscription(subscription)
            .with_consumer_name(name)
            .with_subscription_type(sub_type)
            .with_options(ConsumerOptions::default().with_initial_position(InitialPosition::Latest))
            .build::<Vec<u8>>()
    };
    let mut consumer_a = subscribe_latest(topic_a, "rs-many-a-sub", "rs-many-consumer-a", SubType::Shared).await?;
    let mut consumer_b = subscribe_latest(topic_b, "rs-many-b-sub", "rs-many-consumer-b", SubType::Exclusive).await?;
    let mut calls = Vec::new();
    for (producer, index, id) in ids.iter().filter(|(producer, _, _)| producer == name_a) {
        let result = consumer_a.ack_with_id(topic_a, id.clone()).await.map_err(|e| format!("{e}"));
        calls.push(json!({"call": "ack_with_id", "consumer": "rs-many-consumer-a", "producer": producer, "i": index,
                          "message_id": id_json(id), "result": outcome(&result)}));
    }
    if let Some((producer, index, id)) = ids.iter().filter(|(producer, _, _)| producer == name_b).last() {
        let result = consumer_b.cumulative_ack_with_id(topic_b, id.clone()).await.map_err(|e| format!("{e}"));
        calls.push(json!({"call": "cumulative_ack_with_id", "consumer": "rs-many-consumer-b", "producer": producer,
                          "i": index, "message_id": id_json(id), "result": outcome(&result)}));
    }
    let connections = consumer_a.connections().await.map(|urls| urls.iter().map(|u| u.to_string()).collect::<Vec<_>>());
    calls.push(json!({"call": "connections", "consumer": "rs-many-consumer-a",
                      "result": connections.map_err(|e| format!("{e}")).map_or_else(|e| json!(e), |v| json!(v))}));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (consumer, name) in [(&mut consumer_a, "rs-many-consumer-a"), (&mut consumer_b, "rs-many-consumer-b")] {
        let result = consumer.close().await.map_err(|e| format!("{e}"));
        events.push(json!({"event": "consumer_close", "consumer": name, "result": outcome(&result)}));
    }
    close_producer(&mut producer_a, name_a, &mut events).await;
    close_producer(&mut producer_b, name_b, &mut events).await;
    close_producer(&mut producer_c, name_c, &mut events).await;
    Ok(json!({
        "topics": [topic_a, topic_b, topic_c],
        "topic": topic_a,
        "producers": [{"name": name_a, "topic": topic_a, "batch_size": BATCH_SIZE, "batch_timeout_ms": 200,
                       "compression": "none", "keys_and_properties": true},
                      {"name": name_b, "topic": topic_b, "batch_size": null, "compression": "none",
                       "keys_and_properties": false},
                      {"name": name_c, "topic": topic_c, "batch_size": null, "compression": "zstd",
                       "keys_and_properties": "properties only"}],
        "consumers": [{"subscription": "rs-many-a-sub", "name": "rs-many-consumer-a", "topic": topic_a,
                       "sub_type": "Shared", "initial_position": "Latest"},
                      {"subscription": "rs-many-b-sub", "name": "rs-many-consumer-b", "topic": topic_b,
                       "sub_type": "Exclusive", "initial_position": "Latest"}],
        "sent": sent,
        "api_calls": calls,
        "events": events,
        "summary": {"sent": batched.len() + plain.len() + zstd.len()},
    }))
}

/// A second client (its own connection) with bounded retries, for the calls the broker should refuse.
async fn refusing_client(url: &str) -> Result<Client, pulsar::Error> {
    Pulsar::builder(url, TokioExecutor)
        .with_operation_retry_options(OperationRetryOptions {
            operation_timeout: Duration::from_secs(5),
            retry_delay: Duration::from_millis(500),
            max_retries: Some(1),
        })
        .build()
        .await
}

/// What the broker refuses, as the API reports it. Each refused call is made from its own client (connection), so
/// a refusal that closes the connection does not take the others with it.
async fn scenario_errors(client: &Client, url: &str) -> Result<Value, pulsar::Error> {
    let topic = "persistent://public/default/rs-errors";
    let exclusive_name = "rs-err-exclusive";
    let mut calls = Vec::new();
    let mut events = Vec::new();
    let exclusive = ProducerOptions { access_mode: Some(pulsar::proto::ProducerAccessMode::Exclusive as i32), ..Default::default() };
    let first = bounded(
        20,
        client.producer().with_topic(topic).with_name(exclusive_name).with_options(exclusive.clone()).build(),
    )
    .await;
    calls.push(json!({"call": "producer.build", "client": "main", "producer": exclusive_name,
                      "access_mode": "Exclusive", "result": outcome(&first)}));
    let mut first = first.ok();
    let messages: Vec<Outgoing> = (0..3).map(|i| outgoing("errors", i, 1, 0)).collect();
    let sent = match first.as_mut() {
        Some(producer) => send_one_by_one(producer, exclusive_name, &messages).await,
        None => Vec::new(),
    };

    let second_client = refusing_client(url).await?;
    let same_name = bounded(20, second_client.producer().with_topic(topic).with_name(exclusive_name).build()).await;
    calls.push(json!({"call": "producer.build", "client": "second", "producer": exclusive_name,
                      "access_mode": "Shared (default)", "expected": "refused: the name is in use on the topic",
                      "result": outcome(&same_name)}));
    let third_client = refusing_client(url).await?;
    let other_exclusive = bounded(
        20,
        third_client.producer().with_topic(topic).with_name("rs-err-other").with_options(exclusive.clone()).build(),
    )
    .await;
    calls.push(json!({"call": "producer.build", "client": "third", "producer": "rs-err-other",
                      "access_mode": "Exclusive", "expected": "refused: the topic has an Exclusive producer",
                      "result": outcome(&other_exclusive)}));

    let subscribe = |client: &Client, name: &'static str| {
        client
            .consumer()
            .with_topic(topic)
            .with_subscription("rs-err-sub")
            .with_consumer_name(name)
            .with_subscription_type(SubType::Exclusive)
            .with_options(ConsumerOptions::default().with_initial_position(InitialPosition::Latest))
            .build::<Vec<u8>>()
    };
    let consumer_one = bounded(20, subscribe(client, "rs-err-consumer-1")).await;
    calls.push(json!({"call": "consumer.build", "client": "main", "consumer": "rs-err-consumer-1",
                      "subscription": "rs-err-sub", "sub_type": "Exclusive", "result": outcome(&consumer_one)}));
    let fourth_client = refusing_client(url).await?;
    let consumer_two = bounded(20, subscribe(&fourth_client, "rs-err-consumer-2")).await;
    calls.push(json!({"call": "consumer.build", "client": "fourth", "consumer": "rs-err-consumer-2",
                      "subscription": "rs-err-sub", "sub_type": "Exclusive",
                      "expected": "refused: the Exclusive subscription has a consumer", "result": outcome(&consumer_two)}));

    if let Some(producer) = first.as_mut() {
        let closed = bounded(10, producer.close()).await;
        calls.push(json!({"call": "producer.close", "client": "main", "producer": exclusive_name,
                          "result": outcome(&closed)}));
        let late = outgoing("errors-after-close", 0, 1, 0);
        let queued = bounded(10, producer.create_message().with_content(late.payload.clone()).send_non_blocking()).await;
        let queue_result = outcome(&queued);
        let receipt = match queued {
            Ok(future) => bounded(10, future).await.map(|receipt| receipt_json(&receipt)),
            Err(error) => Err(error),
        };
        // Not in `sent`: no receipt came back (a SEND may still have gone out: see the README).
        calls.push(json!({"call": "send after producer.close", "client": "main", "producer": exclusive_name,
                          "payload_hex": hex(&late.payload), "send_non_blocking_result": queue_result,
                          "result": outcome(&receipt), "receipt": receipt.as_ref().ok()}));
    }
    for (consumer, name) in [(consumer_one, "rs-err-consumer-1"), (consumer_two, "rs-err-consumer-2")] {
        if let Ok(mut consumer) = consumer {
            let result = bounded(10, consumer.close()).await;
            events.push(json!({"event": "consumer_close", "consumer": name, "result": outcome(&result)}));
        }
    }
    for (producer, name) in [(same_name, exclusive_name), (other_exclusive, "rs-err-other")] {
        if let Ok(mut producer) = producer {
            let result = bounded(10, producer.close()).await;
            events.push(json!({"event": "producer_close", "producer": name, "result": outcome(&result)}));
        }
    }
    Ok(json!({
        "topic": topic,
        "producers": [{"name": exclusive_name, "batch_size": null, "compression": "none", "access_mode": "Exclusive"}],
        "sent": sent,
        "api_calls": calls,
        "events": events,
        "summary": {"sent": messages.len()},
    }))
}

/// Produces a batched and a plain series and closes the producers, then an Exclusive consumer at Latest (nothing dispatched) acks
/// cumulatively up to a batched message by id and seeks by a publish time in the future (pulsar-rs then resubscribes).
async fn scenario_seek_cumulative(client: &Client) -> Result<Value, pulsar::Error> {
    let topic = "persistent://public/default/rs-seek";
    let (batch_name, plain_name) = ("rs-seek-batched", "rs-seek-plain");
    let batched: Vec<Outgoing> = (0..10).map(|i| outgoing("seek-batched", i, 1, 2)).collect();
    let plain: Vec<Outgoing> = (0..4).map(|i| outgoing("seek-plain", i, 1, 0)).collect();
    let mut events = Vec::new();
    let mut batch_producer = make_producer(client, topic, batch_name, Some(BATCH_SIZE), None).await?;
    let mut sent = send_all(&mut batch_producer, batch_name, &batched).await;
    let mut plain_producer = make_producer(client, topic, plain_name, None, None).await?;
    sent.extend(send_one_by_one(&mut plain_producer, plain_name, &plain).await);
    let ids = receipt_ids(&sent);
    // Closed first: a refused seek may take the connection (and with it the producers) down.
    close_producer(&mut batch_producer, batch_name, &mut events).await;
    close_producer(&mut plain_producer, plain_name, &mut events).await;
    let mut consumer = client
        .consumer()
        .with_topic(topic)
        .with_subscription("rs-seek-sub")
        .with_consumer_name("rs-seek-consumer")
        .with_subscription_type(SubType::Exclusive)
        .with_options(ConsumerOptions::default().with_initial_position(InitialPosition::Latest))
        .build::<Vec<u8>>()
        .await?;
    let mut calls = Vec::new();
    if let Some((producer, index, id)) = ids.iter().find(|(producer, index, _)| producer == batch_name && *index == 7) {
        let result = bounded(10, consumer.cumulative_ack_with_id(topic, id.clone())).await;
        calls.push(json!({"call": "cumulative_ack_with_id", "producer": producer, "i": index,
                          "message_id": id_json(id), "result": outcome(&result)}));
    }
    let future_ms = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64)
        + 3_600_000;
    let result = bounded(20, consumer.seek(None, None, Some(future_ms), client.clone())).await;
    calls.push(json!({"call": "seek", "timestamp_ms": future_ms, "note": "one hour after now", "result": outcome(&result)}));
    let started = Instant::now();
    let mut received = 0;
    match next_message(&mut consumer, Duration::from_secs(3), started).await {
        Next::Message(_, record) => {
            received += 1;
            events.push(json!({"event": "received", "message": record}))
        }
        Next::Error(error) => events.push(json!({"event": "stream_error", "error": error})),
        Next::Ended => events.push(json!({"event": "stream_ended"})),
        Next::TimedOut => events.push(json!({"event": "receive_timeout", "after_s": 3})),
    }
    close_consumer(&mut consumer, &mut events).await;
    Ok(json!({
        "topic": topic,
        "producers": [{"name": batch_name, "batch_size": BATCH_SIZE, "batch_timeout_ms": 200, "compression": "none"},
                      {"name": plain_name, "batch_size": null, "compression": "none"}],
        "consumer": {"subscription": "rs-seek-sub", "name": "rs-seek-consumer", "sub_type": "Exclusive",
                     "initial_position": "Latest"},
        "sent": sent,
        "api_calls": calls,
        "events": events,
        "summary": {"sent": batched.len() + plain.len(), "received": received},
    }))
}

#[tokio::main]
async fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("pulsar=info")).init();
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: {} <basic|batch|nack|nack-by-id|produce-cross|partitioned|many|errors|seek-cumulative> <pulsar-url> [codec]", args[0]);
        std::process::exit(2);
    }
    let (scenario, url) = (args[1].as_str(), args[2].as_str());
    let codec = args.get(3).map(String::as_str).unwrap_or("none");
    log(&format!("scenario {scenario} codec {codec} broker {url}"));
    let client: Client = match Pulsar::builder(url, TokioExecutor).build().await {
        Ok(client) => client,
        Err(e) => {
            println!("{}", json!({"fatal_error": format!("client build: {e}")}));
            std::process::exit(1);
        }
    };
    let result = match scenario {
        "basic" => scenario_basic(&client).await,
        "batch" => scenario_batch(&client, codec).await,
        "nack" => scenario_nack(&client).await,
        "nack-by-id" => scenario_nack_by_id(&client).await,
        "produce-cross" => scenario_produce_cross(&client, codec).await,
        "partitioned" => scenario_partitioned(&client).await,
        "many" => scenario_many(&client).await,
        "errors" => scenario_errors(&client, url).await,
        "seek-cumulative" => scenario_seek_cumulative(&client).await,
        other => {
            eprintln!("unknown scenario {other}");
            std::process::exit(2);
        }
    };
    let mut report = match result {
        Ok(report) => report,
        Err(e) => json!({"fatal_error": format!("{e}")}),
    };
    report["client"] = json!({"crate": "pulsar", "version": "6.9.1", "features": ["tokio-runtime", "compression"]});
    println!("{}", serde_json::to_string_pretty(&report).expect("report serializes"));
    log("done");
}
