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
use pulsar::{
    CommandSendReceipt, Consumer, ConsumerOptions, Producer, ProducerOptions, Pulsar, SubType, TokioExecutor,
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
    let mut receipt_ids: Vec<(String, usize, MessageIdData)> = Vec::new();
    for record in &sent {
        let outgoing_index = record["i"].as_u64().unwrap_or_default() as usize;
        let producer = record["producer"].as_str().unwrap_or_default().to_string();
        let id = &record["receipt"]["message_id"];
        if id.is_null() {
            continue;
        }
        let as_i32 = |v: &Value| v.as_i64().map(|n| n as i32);
        receipt_ids.push((
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

#[tokio::main]
async fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("pulsar=info")).init();
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: {} <basic|batch|nack|produce-cross> <pulsar-url> [codec]", args[0]);
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
