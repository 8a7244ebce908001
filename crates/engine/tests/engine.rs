//! The engine composed (`Engine`): real captures through every stage, judged by their manifests' frame census
//! (tshark's reassembly and a minimal frame split, `captures/gen/census.py`, not this engine), and a third
//! protocol — a toy, defined here — plugged in through the `Protocol` trait alone, end to end.

mod capture_support;
mod toy_support;

use std::collections::BTreeMap;

use pulsar_dissect_engine::analysis::table::{CommandSpec, CommandTable};
use pulsar_dissect_engine::analysis::{Event, Frame, Session, Sessions, Waiting};
use pulsar_dissect_engine::engine::{Count, FindingTexts, Item, JsonLines, ProtocolSetup, Settings, Sink};
use pulsar_dissect_engine::model::{Decoded, Finding};
use pulsar_dissect_engine::protocols::{by_name, DecodeCaps, Depth, Limits, Protocol, REGISTRY};
use pulsar_dissect_engine::records::{Expert, Message, NoFront, RecordStyle, SinkResult};
use pulsar_dissect_engine::sinks::timeline::{LinePlans, TimelineLines};
use pulsar_dissect_engine::timeline::{FieldPlan, Format, Line, LineFacts, ProtocolPlan};
use pulsar_dissect_engine::transport::net::tcp_segment;
use pulsar_dissect_engine::transport::splitter::{Framing, PduLength};
use pulsar_dissect_engine::value::{entry, Map, Text, Value};
use pulsar_dissect_engine::{name, Engine};

use capture_support::{reader, root};
use toy_support::toy_table;

/// The registry's protocols on their usual ports, with empty command tables (no pairing: the census counts
/// frames, not answers).
fn registry_setups() -> Vec<ProtocolSetup> {
    let ports = |name: &str| -> Vec<(u16, String)> {
        match name {
            "pulsar" => vec![(6650, "broker".into()), (6651, "broker".into())],
            "tubemq" => vec![(8715, "master".into()), (8123, "broker".into())],
            _ => vec![],
        }
    };
    REGISTRY
        .iter()
        .map(|&protocol| ProtocolSetup {
            protocol,
            ports: ports(protocol.name()),
            client_role: "client".into(),
            server_roles: vec![if protocol.name() == "tubemq" { "master" } else { "broker" }.into()],
            max_frame_size: 64 << 20,
            table: Box::new(CommandTable::default),
        })
        .collect()
}

/// Per client endpoint and direction, the frames by type, and those with a valid / an invalid checksum.
#[derive(Default, Debug, PartialEq)]
struct Census {
    by_type: BTreeMap<String, u64>,
    with_crc32c: u64,
    crc32c_bad: u64,
}

#[derive(Default)]
struct CensusSink {
    streams: BTreeMap<(String, String), Census>,
}

impl Sink for CensusSink {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        if let Item::Frame { frame, .. } = item {
            let (client, direction) = if frame.direction == "to_client" {
                (frame.dst, "broker_to_client")
            } else {
                (frame.src, "client_to_broker")
            };
            let census = self.streams.entry((client.to_owned(), direction.to_owned())).or_default();
            *census.by_type.entry(frame.pdu.type_name.as_str().to_owned()).or_default() += 1;
            let checksum = frame.pdu.payload().map(|section| section.checksum.name().as_str());
            census.with_crc32c += matches!(checksum, Some("valid" | "invalid")) as u64;
            census.crc32c_bad += (checksum == Some("invalid")) as u64;
        }
        Ok(())
    }
}

fn capture_bytes(stem: &str) -> Option<Vec<u8>> {
    let dir = root().join("captures");
    [".pcap", ".pcap.gz"].iter().find_map(|ext| std::fs::read(dir.join(format!("{stem}{ext}"))).ok())
}

#[test]
fn every_pulsar_capture_decodes_to_its_manifests_frame_census() {
    let mut checked = 0;
    let mut manifests: Vec<_> = std::fs::read_dir(root().join("captures"))
        .expect("the shipped captures")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    manifests.sort();
    let engine = Engine::new(registry_setups(), Settings::default());
    for manifest in manifests {
        let stem = manifest.file_stem().and_then(|s| s.to_str()).expect("a name").to_owned();
        let text = std::fs::read_to_string(&manifest).expect("readable");
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let Some(streams) = json["derived_frame_census"]["streams"].as_array() else { continue };
        let Some(bytes) = capture_bytes(&stem) else { continue };
        let mut sink = CensusSink::default();
        engine.run(&mut reader(bytes), &mut sink).expect("no sink error");
        for stream in streams {
            let client = stream["client"].as_str().expect("a client endpoint");
            for direction in ["client_to_broker", "broker_to_client"] {
                let want = &stream[direction];
                let by_type = want["by_type"].as_object().expect("frames by type");
                let expected = Census {
                    by_type: by_type.iter().map(|(k, v)| (k.clone(), v.as_u64().expect("a count"))).collect(),
                    with_crc32c: want["with_crc32c"].as_u64().unwrap_or(0),
                    crc32c_bad: want["crc32c_bad"].as_u64().unwrap_or(0),
                };
                let got = sink.streams.remove(&(client.to_owned(), direction.to_owned())).unwrap_or_default();
                assert_eq!(got, expected, "{stem}: {client} {direction}");
            }
        }
        assert!(sink.streams.is_empty(), "{stem}: streams the census does not have: {:?}", sink.streams.keys());
        checked += 1;
    }
    assert!(checked >= 15, "the census of every shipped Pulsar capture is checked ({checked})");
}

#[test]
fn a_run_counts_every_packet_and_a_connection_off_the_ports_is_never_decoded() {
    let bytes = capture_bytes("01_basic_nonbatched").expect("a shipped capture");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("captures/01_basic_nonbatched.json")).expect("its manifest"),
    )
    .expect("JSON");
    // tshark's count of the packets of each TCP conversation: all the capture holds (its filter is the port)
    let packets_in_manifest: u64 = manifest["tcp_conversations_tshark"]
        .as_array()
        .expect("tshark's conversations")
        .iter()
        .map(|c| c["frames_total"].as_u64().expect("a count"))
        .sum();
    let frames: u64 = manifest["derived_frame_census"]["streams"]
        .as_array()
        .expect("streams")
        .iter()
        .flat_map(|s| [&s["client_to_broker"]["frames"], &s["broker_to_client"]["frames"]])
        .map(|n| n.as_u64().expect("a count"))
        .sum();
    let mut count = Count::default();
    let packets = Engine::new(registry_setups(), Settings::default()).run(&mut reader(bytes.clone()), &mut count);
    assert_eq!(packets.expect("no sink error"), packets_in_manifest);
    assert_eq!(count.frames, frames, "every frame of the manifest's census");
    // the same packets with no protocol on their port: not a frame, not an event
    let elsewhere = registry_setups()
        .into_iter()
        .map(|setup| ProtocolSetup { ports: vec![(16650, "broker".into())], ..setup })
        .collect();
    let mut none = Count::default();
    Engine::new(elsewhere, Settings::default()).run(&mut reader(bytes), &mut none).expect("no sink error");
    assert_eq!((none.frames, none.events), (0, 0));
}

// ------------------------------------------------------------------------------------------ a toy protocol

/// A third protocol, known to nothing outside this file: a 2-byte big-endian length, then `Q` (a question) or
/// `A` (an answer) and a one-byte id. Its questions open the id, its answers answer it.
struct Toy;

struct ToyFraming;

impl Framing for ToyFraming {
    fn pdu_length(&self, buf: &[u8], _max_size: usize) -> PduLength {
        match buf {
            [hi, lo, ..] => PduLength::Complete(2 + u16::from_be_bytes([*hi, *lo]) as usize),
            _ => PduLength::NeedMore,
        }
    }
}

impl Protocol for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn framing(&self) -> Box<dyn Framing> {
        Box::new(ToyFraming)
    }

    fn decode(&self, pdu: &[u8], _missing: usize, _caps: DecodeCaps, _depth: Depth) -> Decoded {
        let (type_name, command) = match pdu.get(2..) {
            Some([b'Q', id, ..]) => ("QUESTION", Some(Value::Map(vec![entry(name!("id"), *id as i64)]))),
            Some([b'A', id, ..]) => ("ANSWER", Some(Value::Map(vec![entry(name!("id"), *id as i64)]))),
            _ => ("MALFORMED", None),
        };
        Decoded { type_name: Text::Owned(type_name.into()), command, size: pdu.len(), findings: vec![], body: None }
    }

    fn confirms(&self, type_name: &str, has_findings: bool) -> bool {
        !has_findings && type_name != "MALFORMED"
    }

    fn sessions(&self, _limits: &Limits) -> Option<Box<dyn Sessions>> {
        None
    }

    fn timeline_pieces(&self, _facts: &LineFacts, _line: &mut Line) {}

    fn problem_ids(&self) -> &'static [&'static str] {
        &[]
    }
}

static TOY: Toy = Toy;

/// A classic pcap (Ethernet, IPv4, TCP) of the segments: (time, from the client, sequence number, flags,
/// payload), between 10.0.0.1:40000 and 10.0.0.2:7777.
fn pcap(segments: &[(f64, bool, u32, u8, &[u8])]) -> Vec<u8> {
    let mut out = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    out.extend([0u8; 8]);
    out.extend(65535u32.to_le_bytes());
    out.extend(1u32.to_le_bytes());
    for &(time, from_client, seq, flags, payload) in segments {
        let (src, dst, sport, dport) = if from_client {
            ([10, 0, 0, 1], [10, 0, 0, 2], 40000u16, 7777u16)
        } else {
            ([10, 0, 0, 2], [10, 0, 0, 1], 7777, 40000)
        };
        let mut p = vec![0u8; 12];
        p.extend([0x08, 0x00]);
        let total = (20 + 20 + payload.len()) as u16;
        p.extend([0x45, 0]);
        p.extend(total.to_be_bytes());
        p.extend([0, 0, 0x40, 0, 64, 6, 0, 0]);
        p.extend(src);
        p.extend(dst);
        p.extend(sport.to_be_bytes());
        p.extend(dport.to_be_bytes());
        p.extend(seq.to_be_bytes());
        p.extend(0u32.to_be_bytes());
        p.extend([0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        p.extend(payload);
        let (secs, micros) = (time.trunc() as u32, ((time.fract()) * 1e6).round() as u32);
        out.extend(secs.to_le_bytes());
        out.extend(micros.to_le_bytes());
        out.extend((p.len() as u32).to_le_bytes());
        out.extend((p.len() as u32).to_le_bytes());
        out.extend(p);
    }
    out
}

/// The toy's connection opened at time 1 (SYN, SYN-ACK, ACK: the client's next byte is 100, the server's 500),
/// then `segments`.
fn opened_toy_connection(segments: &[(f64, bool, u32, u8, &[u8])]) -> Vec<u8> {
    let mut all: Vec<(f64, bool, u32, u8, &[u8])> =
        vec![(1.0, true, 99, 0x02, b""), (1.001, false, 499, 0x12, b""), (1.002, true, 100, 0x10, b"")];
    all.extend_from_slice(segments);
    pcap(&all)
}

/// Texts that name the finding: the engine needs a front end's texts, none of them is asserted here.
struct IdTexts;

impl FindingTexts for IdTexts {
    fn expert(&mut self, finding: &Finding) -> Expert<NoFront> {
        Expert { id: finding.id, severity: name!("warning"), message: Message::Owned(finding.id.as_str().into()) }
    }
}

fn toy_engine() -> Engine {
    let setup = ProtocolSetup {
        protocol: &TOY,
        ports: vec![(7777, "server".into())],
        client_role: "client".into(),
        server_roles: vec!["server".into()],
        max_frame_size: 1 << 16,
        table: Box::new(toy_table),
    };
    Engine::new(vec![setup], Settings { depth: Depth::Full, ..Settings::default() })
}

#[test]
fn a_third_protocol_plugs_in_through_the_trait_alone() {
    assert!(by_name("toy").is_none(), "the toy is in no registry: the engine takes it as it is handed in");
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const PSH_ACK: u8 = 0x18;
    const FIN_ACK: u8 = 0x11;
    let capture = pcap(&[
        (1.0, true, 99, SYN, b""),
        (1.001, false, 499, SYN | ACK, b""),
        (1.002, true, 100, ACK, b""),
        // two questions in one segment, the second cut across two
        (1.010, true, 100, PSH_ACK, b"\x00\x02Q\x07\x00\x02Q"),
        (1.011, true, 107, PSH_ACK, b"\x09"),
        (1.060, false, 500, PSH_ACK, b"\x00\x02A\x07"),
        (1.100, true, 108, FIN_ACK, b""),
    ]);
    let mut lines = JsonLines::new(IdTexts, RecordStyle::default());
    toy_engine().run(&mut reader(capture), &mut lines).expect("no sink error");
    let records: Vec<serde_json::Value> = lines
        .out
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("a JSON line"))
        .collect();
    let frames: Vec<&serde_json::Value> = records.iter().filter(|r| r.get("index").is_some()).collect();
    let kinds: Vec<&str> = frames.iter().map(|f| f["type"].as_str().expect("a type")).collect();
    assert_eq!(kinds, ["QUESTION", "QUESTION", "ANSWER"]);
    assert_eq!(frames.iter().map(|f| f["protocol"].as_str()).collect::<Vec<_>>(), [Some("toy"); 3]);
    assert_eq!(frames[0]["direction"], "to_server");
    assert_eq!(frames[2]["direction"], "to_client");
    assert_eq!(frames[1]["command"]["id"], 9, "the question cut across two segments, reassembled");
    // the answer answers the first question (frame 1), 50 ms after it
    assert_eq!(frames[2]["answers"], 1);
    assert_eq!(frames[2]["latency_ms"], 50.0);
    // the second question was never answered: said at the end, as an event
    let unanswered: Vec<&serde_json::Value> = records.iter().filter(|r| r["type"] == "UNANSWERED").collect();
    assert_eq!(unanswered.len(), 1, "{records:?}");
    let types: Vec<&str> = records.iter().filter_map(|r| r["type"].as_str()).collect();
    assert!(types.contains(&"CONNECTION_OPENED") && types.contains(&"CONNECTION_CLOSED"), "{types:?}");
}

#[test]
fn the_toy_frames_records_carry_no_body_keys() {
    let capture =
        pcap(&[(2.0, true, 0, 0x02, b""), (2.001, false, 0, 0x12, b""), (2.002, true, 1, 0x18, b"\x00\x02Q\x01")]);
    let mut lines = JsonLines::new(IdTexts, RecordStyle::default());
    toy_engine().run(&mut reader(capture), &mut lines).expect("no sink error");
    let text = String::from_utf8(lines.out).expect("UTF-8");
    let frame: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .find(|r: &serde_json::Value| r.get("index").is_some())
        .expect("a frame");
    let keys: Vec<&str> = frame.as_object().expect("an object").keys().map(String::as_str).collect();
    for key in ["checksum", "metadata", "messages", "serial", "rpc"] {
        assert!(!keys.contains(&key), "{key} is a protocol's body key, not the toy's: {keys:?}");
    }
    assert_eq!(frame["command"], serde_json::json!({"id": 1}));
}

/// `engine`'s run driven a step at a time (`Engine::start`), what the stages make held for `hold` packets
/// before it is analysed, into JSON lines.
fn held_run(engine: &Engine, capture: Vec<u8>, hold: usize) -> Vec<u8> {
    let mut lines = JsonLines::new(IdTexts, RecordStyle::default());
    let mut capture = reader(capture);
    let mut run = engine.start(&mut lines);
    let (mut held, mut packets) = (Vec::new(), 0);
    while let Ok(Some(packet)) = capture.next_packet() {
        let orig_len = usize::try_from(packet.orig_len).expect("a length");
        let linktype = u32::try_from(packet.linktype).expect("a link type");
        let data = capture.data(&packet);
        if let Some(segment) = tcp_segment(packet.index as i64, packet.timestamp, linktype, data, orig_len) {
            run.feed_segment(&segment, &mut held);
        }
        packets += 1;
        if packets % hold == 0 {
            for made in held.drain(..) {
                run.analyse(made, &mut lines).expect("no sink error");
            }
        }
    }
    run.finish_stages(&mut held);
    for made in held.drain(..) {
        run.analyse(made, &mut lines).expect("no sink error");
    }
    run.finish(&mut lines).expect("no sink error");
    lines.out
}

#[test]
fn what_the_stages_made_analysed_later_gives_the_same_lines_as_analysed_at_once() {
    let toy = opened_toy_connection(&[
        (1.010, true, 100, 0x18, b"\x00\x02Q\x07\x00\x02Q"),
        (1.011, true, 107, 0x18, b"\x09"),
        (1.060, false, 500, 0x18, b"\x00\x02A\x07"),
        (41.0, true, 108, 0x11, b""),
    ]);
    let pulsar = capture_bytes("01_basic_nonbatched").expect("a shipped capture");
    for (engine, capture) in [(toy_engine(), toy), (Engine::new(registry_setups(), Settings::default()), pulsar)] {
        let mut at_once = JsonLines::new(IdTexts, RecordStyle::default());
        engine.run(&mut reader(capture.clone()), &mut at_once).expect("no sink error");
        assert!(at_once.lines > 3, "frames and events made");
        for hold in [1, 2, 5, usize::MAX] {
            let held = held_run(&engine, capture.clone(), hold);
            assert!(held == at_once.out, "held for {hold} packets: not the lines of the run at once");
        }
    }
}

// ------------------------------------------------------------------------------------ the timeline's sink

/// The plans a front end declares, here in Rust: a few of Pulsar's and the toy's types with their key fields (a
/// type not listed shows its first scalar fields); which protocols were asked for, in order.
#[derive(Default)]
struct RustPlans {
    asked: Vec<String>,
}

impl LinePlans for RustPlans {
    fn plan(&mut self, protocol: &str) -> SinkResult<Option<ProtocolPlan>> {
        self.asked.push(protocol.to_owned());
        let field =
            |label: &str, key: &str| FieldPlan::new(label.into(), vec![key.into()], "text", None).expect("shown");
        let (pieces, types) = match protocol {
            "pulsar" => (
                Some("pulsar"),
                vec![
                    ("CONNECT", "type", vec![field("client", "client_version"), field("proto", "protocol_version")]),
                    ("SEND", "type_payload", vec![field("prod", "producer_id"), field("seq", "sequence_id")]),
                ],
            ),
            "toy" => (None, vec![("QUESTION", "type", vec![field("asks", "id")])]),
            _ => return Ok(None),
        };
        let mut plan = ProtocolPlan::new(pieces).expect("pieces the engine has");
        for (type_name, role, fields) in types {
            plan.add_type(type_name.into(), role, Some(fields)).expect("a role");
        }
        Ok(Some(plan))
    }
}

/// Texts that show what they were made from: a finding's or an event's id and the names of its parameters; a
/// connection's events are notes, the rest warnings.
struct ParamTexts;

impl FindingTexts for ParamTexts {
    fn expert(&mut self, finding: &Finding) -> Expert<NoFront> {
        let id = finding.id.as_str();
        let keys: Vec<&str> = finding.params.iter().map(|(key, _)| key.as_str()).collect();
        let severity = if id.starts_with("CONNECTION_") { name!("note") } else { name!("warning") };
        Expert { id: finding.id, severity, message: Message::Owned(format!("text of {id} ({})", keys.join(","))) }
    }
}

fn timeline_format() -> Format {
    let labels = [("request_id", "req"), ("producer_id", "prod"), ("sequence_id", "seq")];
    Format::new(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), Default::default(), false, false)
}

/// `engine`'s run over `capture` into the timeline's sink: its lines, and the sink after.
fn timeline_run(engine: &Engine, capture: Vec<u8>) -> (String, TimelineLines<ParamTexts, RustPlans>) {
    let mut lines = TimelineLines::new(ParamTexts, RustPlans::default());
    let mut format = timeline_format();
    engine.run(&mut reader(capture), &mut lines.with_format(&mut format)).expect("no sink error");
    (String::from_utf8(std::mem::take(&mut lines.out)).expect("UTF-8"), lines)
}

#[test]
fn a_pulsar_capture_through_the_engine_gives_its_timeline_lines() {
    let capture = capture_bytes("01_basic_nonbatched").expect("a shipped capture");
    let (text, lines) = timeline_run(&Engine::new(registry_setups(), Settings::default()), capture);
    let text: Vec<&str> = text.lines().collect();
    // (no command table: no answers paired, no producer named)
    let expected = [
        // an event's line: its text from the texts, made from its details, its parameters and where it is
        "     -  +0.000000 p1    c1 → 36602 CONNECTION_OPENED \
         text of CONNECTION_OPENED (client,broker,mid_stream,server_role,server,offset,length)",
        // a type the plan declares: its fields
        "     1  +0.000152 p4    c1 → 36602 CONNECT          client=Pulsar-CPP-v4.2.0 proto=20",
        // a type it does not: its first scalar fields, labelled by the format
        "     3  +0.001515 p8    c1 → 36602 PARTITIONED_METADATA topic=persistent://public/default/basic-1 req=1",
        // the protocol's own pieces after the declared fields
        "     9  +0.002944 p14   c1 → 36602 SEND             prod=0 seq=0 msgs=1 bytes=16 crc=ok",
        "    37  +0.012681 p41   c1 ← 36602 MESSAGE          consumer_id=0 redelivery_count=0 msgs=1 bytes=16",
        "     -  +2.517980 p70   c1 CONNECTION_CLOSED \
         text of CONNECTION_CLOSED (how,bytes_to_broker,bytes_to_client,closed_by,offset,length)",
    ];
    for line in expected {
        assert!(text.contains(&line), "no line {line:?} in\n{}", text.join("\n"));
    }
    assert_eq!((text.len(), lines.frames, lines.problems), (61, 59, 0), "59 frames, 2 events, no problem");
    assert_eq!(lines.plans.asked, ["pulsar"], "a protocol's plan is asked for once");
}

#[test]
fn a_toy_protocols_lines_show_its_plan_and_a_findings_text() {
    let capture = opened_toy_connection(&[
        (1.010, true, 100, 0x18, b"\x00\x02Q\x07"),
        // the answer to the question, and one to a question never asked
        (1.060, false, 500, 0x18, b"\x00\x02A\x07\x00\x02A\x05"),
        (1.100, true, 104, 0x11, b""),
    ]);
    let (text, lines) = timeline_run(&toy_engine(), capture);
    let expected = [
        "     -  +0.000000 p1    c1 → 40000 CONNECTION_OPENED \
         text of CONNECTION_OPENED (client,server,mid_stream,server_role,offset,length)",
        "     1  +0.010000 p4    c1 → 40000 QUESTION         asks=7",
        "     2  +0.060000 p5    c1 ← 40000 ANSWER           id=7 ⟵ #1 50.000ms",
        "     3  +0.060000 p5    c1 ← 40000 ANSWER           id=5",
        "        ⚠ text of response.unmatched (type,key)",
        "     -  +0.100000 p6    c1 CONNECTION_CLOSED \
         text of CONNECTION_CLOSED (how,bytes_to_server,bytes_to_client,closed_by,offset,length)",
    ];
    assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    assert_eq!((lines.frames, lines.problems), (3, 1), "the unmatched answer's finding is a problem, notes are not");
    assert_eq!(lines.plans.asked, ["toy"]);
}

#[test]
fn the_lent_formats_plans_and_origin_are_the_callers() {
    let capture =
        pcap(&[(2.0, true, 0, 0x02, b""), (2.001, false, 0, 0x12, b""), (2.25, true, 1, 0x18, b"\x00\x02Q\x01")]);
    let mut format = timeline_format();
    format.origin = Some(1.5);
    let mut plan = ProtocolPlan::new(None).expect("a plan");
    let field = FieldPlan::new("known_as".into(), vec!["id".into()], "text", None).expect("shown");
    plan.add_type("QUESTION".into(), "type", Some(vec![field])).expect("a role");
    format.learn("toy", Some(plan));
    let mut lines = TimelineLines::new(ParamTexts, RustPlans::default());
    toy_engine().run(&mut reader(capture), &mut lines.with_format(&mut format)).expect("no sink error");
    let text = String::from_utf8(lines.out).expect("UTF-8");
    let question = text.lines().find(|line| line.contains("QUESTION")).expect("the question's line");
    assert_eq!(question, "     1  +0.750000 p3    c1 → 40000 QUESTION         known_as=1");
    assert!(lines.plans.asked.is_empty(), "the format knew the toy's plan: {:?}", lines.plans.asked);
}

/// The toy again, whose session notes a `type` on each frame: a note that replaces a key of the record.
struct RenamingToy;

struct Renaming;

impl Sessions for Renaming {
    fn open(&mut self, _conn: u64, _mid_stream: bool) -> Box<dyn Session> {
        Box::new(Renaming)
    }
}

impl Session for Renaming {
    fn on_frame(
        &mut self,
        _frame: &Frame,
        _spec: Option<&CommandSpec>,
        _request: Option<&Waiting>,
        notes: &mut Map,
        _findings: &mut Vec<Finding>,
        _events: &mut Vec<Event>,
    ) {
        notes.push(entry(name!("type"), "RENAMED".to_owned()));
    }

    fn close(&mut self, _time: f64, _packet: u64, _events: &mut Vec<Event>) {}
}

impl Protocol for RenamingToy {
    fn name(&self) -> &'static str {
        "toy"
    }
    fn framing(&self) -> Box<dyn Framing> {
        TOY.framing()
    }
    fn decode(&self, pdu: &[u8], missing: usize, caps: DecodeCaps, depth: Depth) -> Decoded {
        TOY.decode(pdu, missing, caps, depth)
    }
    fn confirms(&self, type_name: &str, has_findings: bool) -> bool {
        TOY.confirms(type_name, has_findings)
    }
    fn sessions(&self, _limits: &Limits) -> Option<Box<dyn Sessions>> {
        Some(Box::new(Renaming))
    }
    fn timeline_pieces(&self, _facts: &LineFacts, _line: &mut Line) {}
    fn problem_ids(&self) -> &'static [&'static str] {
        &[]
    }
}

static RENAMING_TOY: RenamingToy = RenamingToy;

#[test]
fn a_frame_whose_note_replaces_a_key_has_the_line_of_its_record() {
    let capture = opened_toy_connection(&[
        (1.010, true, 100, 0x18, b"\x00\x02Q\x07"),
        (1.060, false, 500, 0x18, b"\x00\x02A\x05"),
    ]);
    let setup = ProtocolSetup {
        protocol: &RENAMING_TOY,
        ports: vec![(7777, "server".into())],
        client_role: "client".into(),
        server_roles: vec!["server".into()],
        max_frame_size: 1 << 16,
        table: Box::new(toy_table),
    };
    let (text, lines) = timeline_run(&Engine::new(vec![setup], Settings::default()), capture);
    let frames: Vec<&str> = text.lines().filter(|line| !line.starts_with("     -")).collect();
    // (the record's type is the note's: no plan for it, the command's first scalar fields)
    let expected = [
        "     1  +0.010000 p4    c1 → 40000 RENAMED          id=7",
        "     2  +0.060000 p5    c1 ← 40000 RENAMED          id=5",
        "        ⚠ text of response.unmatched (type,key)",
    ];
    assert_eq!(frames, expected);
    assert!(text.contains("UNANSWERED"), "the question is never answered: {text}");
    assert_eq!((lines.frames, lines.problems), (2, 2), "the record's problem counted, and the UNANSWERED event");
}
