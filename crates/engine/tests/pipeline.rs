//! The stages joined (`engine::pipeline`), driven as a front end drives them: a real capture through a
//! `StreamProtocol` of the test's own, on the broker's port and by detection off every port, numbered only
//! (`count_only`), and with a decoder that fails.

mod capture_support;

use std::cell::Cell;
use std::sync::Arc;

use pulsar_dissect_engine::model::{Decoded, Finding};
use pulsar_dissect_engine::pipeline::{DecodeSettings, Made, Pipeline, PipelineSettings, StreamProtocol};
use pulsar_dissect_engine::protocols::{by_name, DecodeCaps, Depth, Protocol};
use pulsar_dissect_engine::transport::net::tcp_segment;
use pulsar_dissect_engine::transport::reassembly::Config;
use pulsar_dissect_engine::transport::splitter::Framing;
use pulsar_dissect_engine::value::Value;

use capture_support::{reader, root};

/// Pulsar from the registry, with the senders of two commands declared (what detection learns the sides
/// from), and a decoder that fails from the `fail_at`-th PDU on.
struct TestPulsar {
    core: &'static dyn Protocol,
    name: Arc<str>,
    framing: Box<dyn Framing>,
    ports: Vec<(u16, String)>,
    roles: Vec<String>,
    decoded: Cell<u64>,
    fail_at: Option<u64>,
}

#[derive(Debug, PartialEq)]
struct DecoderFailed(u64);

impl TestPulsar {
    fn new(ports: &[u16], fail_at: Option<u64>) -> TestPulsar {
        let core = by_name("pulsar").expect("Pulsar in the registry");
        TestPulsar {
            core,
            name: Arc::from("pulsar"),
            framing: core.framing(),
            ports: ports.iter().map(|&p| (p, "broker".to_owned())).collect(),
            roles: vec!["broker".to_owned()],
            decoded: Cell::new(0),
            fail_at,
        }
    }
}

impl StreamProtocol for TestPulsar {
    type Decoded = Decoded;
    type Error = DecoderFailed;

    fn name(&self) -> &Arc<str> {
        &self.name
    }
    fn framing(&self) -> &dyn Framing {
        self.framing.as_ref()
    }
    fn ports(&self) -> &[(u16, String)] {
        &self.ports
    }
    fn client_role(&self) -> &str {
        "client"
    }
    fn server_roles(&self) -> &[String] {
        &self.roles
    }
    fn max_frame_size(&self) -> Option<usize> {
        None
    }
    fn sender(&self, type_name: &str) -> Option<&str> {
        match type_name {
            "CONNECT" | "PRODUCER" | "SUBSCRIBE" => Some("client"),
            "CONNECTED" | "PRODUCER_SUCCESS" => Some("broker"),
            _ => None,
        }
    }
    fn decode(&self, data: &[u8], missing: i64, how: &DecodeSettings) -> Result<Decoded, DecoderFailed> {
        let n = self.decoded.get() + 1;
        self.decoded.set(n);
        if self.fail_at.is_some_and(|at| n >= at) {
            return Err(DecoderFailed(n));
        }
        Ok(self.core.decode(data, usize::try_from(missing).unwrap_or(0), how.caps, how.depth))
    }
    fn confirms(&self, decoded: &mut Decoded) -> Result<bool, DecoderFailed> {
        Ok(self.core.confirms(decoded.type_name.as_str(), !decoded.findings.is_empty()))
    }
    fn type_name(&self, decoded: &Decoded) -> Result<String, DecoderFailed> {
        Ok(decoded.type_name.as_str().to_owned())
    }
    fn size(&self, decoded: &Decoded) -> Result<Value, DecoderFailed> {
        Ok(decoded.size.into())
    }
    fn with_finding_first(&self, mut decoded: Decoded, finding: Finding) -> Result<Decoded, DecoderFailed> {
        decoded.findings.insert(0, finding);
        Ok(decoded)
    }
}

fn settings(detect: bool) -> PipelineSettings {
    PipelineSettings {
        detect,
        detect_budget: 64 * 1024,
        max_frame_size: None,
        keep_frame_bytes: false,
        extra_ports: Vec::new(),
        reassembly: Config::default(),
        decode: DecodeSettings { caps: DecodeCaps::decompressing(64 << 20), depth: Depth::Full },
    }
}

/// Every packet of a shipped capture through the pipeline: what it made, and the error that stopped it.
fn run(stem: &str, pipeline: &mut Pipeline<TestPulsar>) -> (Vec<Made<Decoded>>, Option<DecoderFailed>) {
    let bytes = std::fs::read(root().join(format!("captures/{stem}.pcap"))).expect("a shipped capture");
    let mut reader = reader(bytes);
    let mut made = Vec::new();
    while let Ok(Some(packet)) = reader.next_packet() {
        let linktype = u32::try_from(packet.linktype).expect("a link type");
        let orig_len = usize::try_from(packet.orig_len).expect("a length");
        let data = reader.data(&packet);
        if let Some(seg) = tcp_segment(packet.index as i64, packet.timestamp, linktype, data, orig_len) {
            if let Err(error) = pipeline.feed_segment(&seg, &mut made) {
                return (made, Some(error));
            }
        }
    }
    let error = pipeline.finish(&mut made).err();
    (made, error)
}

/// A frame as (number, type, src, dst, direction).
type FrameOutline = (u64, String, String, String, String);

/// Each frame's outline; each note as its kind and connection.
fn outline(made: &[Made<Decoded>]) -> (Vec<FrameOutline>, Vec<(String, Option<u64>)>) {
    let mut frames = Vec::new();
    let mut notes = Vec::new();
    for item in made {
        match item {
            Made::Frame(place, decoded) => frames.push((
                place.index,
                decoded.type_name.as_str().to_owned(),
                place.src.to_string(),
                place.dst.to_string(),
                place.direction.to_string(),
            )),
            Made::Note(note) => notes.push((note.kind.clone(), note.conn)),
        }
    }
    (frames, notes)
}

#[test]
fn detection_off_every_port_finds_the_frames_and_sides_the_port_gives() {
    let (on_port, error) =
        run("01_basic_nonbatched", &mut Pipeline::new(settings(false), vec![TestPulsar::new(&[6650], None)]));
    assert_eq!(error, None);
    let (detected, error) =
        run("01_basic_nonbatched", &mut Pipeline::new(settings(true), vec![TestPulsar::new(&[], None)]));
    assert_eq!(error, None);
    let (on_port, detected) = (outline(&on_port), outline(&detected));
    assert!(on_port.0.len() > 10, "a capture with frames");
    assert!(on_port.0.iter().any(|f| f.4 == "to_broker") && on_port.0.iter().any(|f| f.4 == "to_client"));
    assert_eq!(detected.0, on_port.0, "the same frames, numbered alike, with the same sides");
    assert_eq!(detected.1, on_port.1, "the same notes: each connection opened and closed");
}

#[test]
fn a_connection_opens_with_its_client_server_and_role_and_closes_with_its_bytes() {
    let mut pipeline = Pipeline::new(settings(false), vec![TestPulsar::new(&[6650], None)]);
    let (made, _) = run("01_basic_nonbatched", &mut pipeline);
    let notes: Vec<_> = made.iter().filter_map(|m| if let Made::Note(n) = m { Some(n) } else { None }).collect();
    let opened = notes.iter().find(|n| n.kind == "CONNECTION_OPENED").expect("an opened connection");
    let keys: Vec<&str> = opened.details.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["client", "broker", "mid_stream"]);
    let at = opened.at.as_ref().expect("its sides");
    assert_eq!((&*at.direction, at.offset, at.length), ("to_broker", None, None));
    assert!(at.dst.ends_with(":6650"), "the server is on the port: {}", at.dst);
    let closed = notes.iter().find(|n| n.kind == "CONNECTION_CLOSED").expect("a closed connection");
    let keys: Vec<&str> = closed.details.iter().map(|(k, _)| k.as_str()).collect();
    assert!(keys.starts_with(&["how", "bytes_to_broker", "bytes_to_client"]), "{keys:?}");
    assert!(closed.at.is_none());
}

#[test]
fn counting_only_numbers_every_frame_as_decoding_does() {
    let (decoded, _) =
        run("03_compression_zlib", &mut Pipeline::new(settings(false), vec![TestPulsar::new(&[6650], None)]));
    let frames = decoded.iter().filter(|m| matches!(m, Made::Frame(..))).count() as u64;
    let mut counting = Pipeline::new(settings(false), vec![TestPulsar::new(&[6650], None)]);
    counting.count_only = true;
    let (made, error) = run("03_compression_zlib", &mut counting);
    assert_eq!(error, None);
    assert!(made.iter().all(|m| matches!(m, Made::Note(_))), "no frame decoded");
    assert_eq!(counting.numbering().0, frames);
    assert_eq!(counting.protocols()[0].decoded.get(), 0, "the decoder never called");
}

#[test]
fn a_decoders_error_stops_the_stages_after_what_came_before() {
    let mut pipeline = Pipeline::new(settings(false), vec![TestPulsar::new(&[6650], Some(5))]);
    let (made, error) = run("01_basic_nonbatched", &mut pipeline);
    assert_eq!(error, Some(DecoderFailed(5)));
    let numbers: Vec<u64> =
        made.iter().filter_map(|m| if let Made::Frame(place, _) = m { Some(place.index) } else { None }).collect();
    assert_eq!(numbers, [1, 2, 3, 4], "the frames decoded before the error, in order");
}

#[test]
fn traffic_on_no_port_is_counted_by_port_never_decoded() {
    let mut pipeline = Pipeline::new(settings(false), vec![TestPulsar::new(&[16650], None)]);
    let (made, error) = run("01_basic_nonbatched", &mut pipeline);
    assert_eq!(error, None);
    assert!(made.is_empty());
    assert_eq!(pipeline.protocols()[0].decoded.get(), 0);
    let busiest = pipeline.other.summary(1);
    assert_eq!(busiest.len(), 1);
    assert_eq!(busiest[0].0, 6650, "the broker's port, guessed from the SYNs");
    assert!(busiest[0].1 >= 1 && busiest[0].2 > 0);
}
