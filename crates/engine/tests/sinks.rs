//! The sinks that work on threads of their own (`sinks/`): `PooledJsonLines` writes the same bytes as
//! `JsonLines`, and `CountedStatistics` counts the same figures as `Statistics`, over every shipped capture,
//! whatever the budget (one frame out at a time, or many batches), and with frames handed without their shared
//! parts (written or counted in their place, after everything before them).

mod capture_support;

use pulsar_dissect_engine::analysis::table::CommandTable;
use pulsar_dissect_engine::budget::MemoryBudget;
use pulsar_dissect_engine::engine::{
    FindingTexts, Item, JsonLines, ProtocolSetup, RunContext, Settings, Sink, Statistics,
};
use pulsar_dissect_engine::model::Finding;
use pulsar_dissect_engine::protocols::REGISTRY;
use pulsar_dissect_engine::records::{Expert, Message, NoFront, RecordStyle, SinkResult};
use pulsar_dissect_engine::sinks::counted::CountedStatistics;
use pulsar_dissect_engine::sinks::pooled::PooledJsonLines;
use pulsar_dissect_engine::stats::Stats;
use pulsar_dissect_engine::{name, Engine};

use capture_support::{reader, root};

/// The registry's protocols on their usual ports.
fn engine() -> Engine {
    engine_with(Settings::default())
}

/// The same, keeping each frame's bytes for its record (`frame_bytes`).
fn engine_keeping_bytes() -> Engine {
    engine_with(Settings { keep_frame_bytes: true, ..Settings::default() })
}

fn engine_with(settings: Settings) -> Engine {
    let setups = REGISTRY
        .iter()
        .map(|&protocol| {
            let (ports, role): (Vec<u16>, &str) =
                if protocol.name() == "tubemq" { (vec![8715, 8123], "master") } else { (vec![6650, 6651], "broker") };
            ProtocolSetup {
                protocol,
                ports: ports.into_iter().map(|port| (port, role.to_owned())).collect(),
                client_role: "client".into(),
                server_roles: vec![role.into()],
                max_frame_size: 64 << 20,
                table: Box::new(CommandTable::default),
            }
        })
        .collect();
    Engine::new(setups, settings)
}

/// Texts that name the finding (a front end's would come from its templates).
struct IdTexts;

impl FindingTexts for IdTexts {
    fn expert(&mut self, finding: &Finding) -> Expert<NoFront> {
        Expert { id: finding.id, severity: name!("warning"), message: Message::Owned(finding.id.as_str().into()) }
    }
}

/// Every shipped capture (pcap, pcapng, gzipped), by name.
fn captures() -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    for dir in ["captures", "captures/tubemq"] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else { continue };
        for entry in entries {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if [".pcap", ".pcapng", ".pcap.gz"].iter().any(|ext| name.ends_with(ext)) {
                found.push((name, std::fs::read(&path).expect("readable")));
            }
        }
    }
    found.sort();
    assert!(found.len() >= 15, "the shipped captures are found ({})", found.len());
    found
}

/// A sink fed every other frame without its shared parts (so its record is made in its place).
struct Unshared<S> {
    sink: S,
    frames: u64,
}

impl<S: Sink> Sink for Unshared<S> {
    fn start(&mut self, run: &RunContext) {
        self.sink.start(run);
    }

    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { frame, first_packet, notes, findings, answered, shared, data } => {
                self.frames += 1;
                let shared = if self.frames.is_multiple_of(2) { None } else { shared };
                self.sink.item(Item::Frame { frame, first_packet, notes, findings, answered, shared, data })
            }
            event => self.sink.item(event),
        }
    }
}

fn pooled_lines(capture: &[u8], budget: usize, unshared: bool) -> (Vec<u8>, u64) {
    pooled_lines_of(&engine(), capture, budget, unshared)
}

fn pooled_lines_of(engine: &Engine, capture: &[u8], budget: usize, unshared: bool) -> (Vec<u8>, u64) {
    let mut lines = Unshared { sink: PooledJsonLines::new(IdTexts, RecordStyle::default(), budget), frames: 0 };
    match unshared {
        true => engine.run(&mut reader(capture.to_vec()), &mut lines),
        false => engine.run(&mut reader(capture.to_vec()), &mut lines.sink),
    }
    .expect("no sink error");
    let pieces = lines.sink.take(true).expect("the pool's lines");
    (pieces.concat(), lines.sink.frames + lines.sink.events)
}

#[test]
fn json_lines_written_on_the_pool_are_the_same_bytes_as_in_place() {
    let mut frames = 0;
    for (name, capture) in captures() {
        let mut lines = JsonLines::new(IdTexts, RecordStyle::default());
        engine().run(&mut reader(capture.clone()), &mut lines).expect("no sink error");
        frames += lines.lines;
        // one frame out at a time; a few frames a batch; the default 16 MiB
        for budget in [1, 64 << 10, 16 << 20] {
            let (pooled, written) = pooled_lines(&capture, budget, false);
            assert!(pooled == lines.out, "{name}, budget {budget}: the pool's lines differ");
            assert_eq!(written, lines.lines, "{name}, budget {budget}: lines counted");
        }
        let (pooled, _) = pooled_lines(&capture, 64 << 10, true);
        assert!(pooled == lines.out, "{name}: frames written in their place among the pool's differ");
    }
    assert!(frames > 1_000, "the captures' lines are many ({frames})");
}

#[test]
fn lines_taken_without_waiting_come_in_order() {
    let (name, capture) = captures().into_iter().max_by_key(|(_, c)| c.len()).expect("a capture");
    let mut whole = JsonLines::new(IdTexts, RecordStyle::default());
    engine().run(&mut reader(capture.clone()), &mut whole).expect("no sink error");

    /// Takes what the pool has finished after every item, as the binding does between batches of packets.
    struct Taking(PooledJsonLines<IdTexts>, Vec<u8>);
    impl Sink for Taking {
        fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
            self.0.item(item)?;
            self.1.extend(self.0.take(false)?.concat());
            Ok(())
        }
    }
    let mut taking = Taking(PooledJsonLines::new(IdTexts, RecordStyle::default(), 64 << 10), Vec::new());
    engine().run(&mut reader(capture), &mut taking).expect("no sink error");
    let rest = taking.0.take(true).expect("the rest");
    taking.1.extend(rest.concat());
    assert!(taking.1 == whole.out, "{name}: the lines taken as they finish differ");
}

/// The figures two statistics are compared by.
fn figures(stats: &Stats) -> String {
    format!(
        "frames {} types {:?} events {:?} expert {:?} errors {:?} conns {} producers {} consumers {} clients {} \
         topics {:?} throughput {:?} latency {:?}",
        stats.frames,
        stats.types.entries,
        stats.events.entries,
        stats.expert.entries,
        stats.server_errors.entries,
        stats.conns.len(),
        stats.producers.len(),
        stats.consumers.len(),
        stats.clients.len(),
        stats.topics.keys().collect::<Vec<_>>(),
        stats.throughput,
        stats.latency.entries.iter().map(|(kind, lat)| (kind, lat.sample.seen, lat.total)).collect::<Vec<_>>(),
    )
}

fn new_stats() -> Stats {
    Stats::new(1000, 1000, 10_000, 256)
}

#[test]
fn statistics_counted_on_their_thread_are_the_same_figures() {
    let mut frames = 0;
    for (name, capture) in captures() {
        let mut in_place = Statistics { texts: IdTexts, stats: new_stats() };
        engine().run(&mut reader(capture.clone()), &mut in_place).expect("no sink error");
        let want = figures(&in_place.stats);
        frames += in_place.stats.frames;
        // (budget 0: counted in place)
        for (budget, unshared) in [(0, false), (1, false), (64 << 10, false), (16 << 20, false), (64 << 10, true)] {
            let mut counted = Unshared { sink: CountedStatistics::new(IdTexts, new_stats(), budget), frames: 0 };
            match unshared {
                true => engine().run(&mut reader(capture.clone()), &mut counted),
                false => engine().run(&mut reader(capture.clone()), &mut counted.sink),
            }
            .expect("no sink error");
            let (stats, counted_frames, _) = counted.sink.settled().expect("counted");
            assert_eq!(figures(&stats), want, "{name}, budget {budget}, unshared {unshared}");
            assert_eq!(counted_frames, stats.frames as u64, "{name}: the frames counted are the records'");
        }
    }
    assert!(frames > 1_000, "the captures' frames are many ({frames})");
}

/// Watches the run's memory budget after every item a pooled sink is given.
struct Watching {
    sink: PooledJsonLines<IdTexts>,
    budget: Option<MemoryBudget>,
    most_held: u64,
}

impl Sink for Watching {
    fn start(&mut self, run: &RunContext) {
        self.budget = Some(run.memory_budget.clone());
        self.sink.start(run);
    }

    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        self.sink.item(item)?;
        let held = self.budget.as_ref().map_or(0, MemoryBudget::held);
        self.most_held = self.most_held.max(held);
        Ok(())
    }
}

#[test]
fn the_pool_reserves_its_frames_from_the_runs_budget() {
    let (name, capture) = captures().into_iter().max_by_key(|(_, c)| c.len()).expect("a capture");
    // one frame a batch, and a batch out until the next frame takes it: the run's budget holds it meanwhile
    let mut watching =
        Watching { sink: PooledJsonLines::new(IdTexts, RecordStyle::default(), 1), budget: None, most_held: 0 };
    engine().run(&mut reader(capture), &mut watching).expect("no sink error");
    watching.sink.take(true).expect("the pool's lines");
    assert!(watching.budget.is_some(), "{name}: the run started its sink");
    // (a frame's weight is 512 bytes at least)
    assert!(watching.most_held >= 512, "{name}: the run's budget held {} bytes at most", watching.most_held);
}

// ------------------------------------------------------------------------------- frames whose bytes are kept

/// The captures whose `--json` records with their bytes kept the binding wrote before its kept frames went
/// through the sinks (`tests/golden/kept_frame_bytes/`, see its README).
const KEPT_BYTES_CAPTURES: [&str; 3] =
    ["01_basic_nonbatched.pcap", "05_cumulative_ack.pcap", "tubemq/tubemq_consumer_broker.pcap"];

fn kept_bytes_capture(name: &str) -> Vec<u8> {
    std::fs::read(root().join("captures").join(name)).expect("a shipped capture")
}

/// Each frame line's index and its `frame_bytes` (None without), in order.
fn frame_bytes_by_index(lines: &[u8]) -> Vec<(u64, Option<String>)> {
    lines
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice::<serde_json::Value>(line).expect("a JSON line"))
        .filter_map(|record| {
            let index = record.get("index")?.as_u64()?;
            Some((index, record.get("frame_bytes").and_then(|b| b.as_str()).map(str::to_owned)))
        })
        .collect()
}

fn golden_kept_bytes(capture: &str) -> Vec<u8> {
    use std::io::Read;
    let file = capture.rsplit('/').next().expect("a name");
    let path = root().join("tests/golden/kept_frame_bytes").join(format!("{file}.jsonl.gz"));
    let mut lines = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("the golden lines"))
        .read_to_end(&mut lines)
        .expect("gzip");
    lines
}

#[test]
fn kept_frame_bytes_are_written_by_json_lines_as_the_binding_wrote_them() {
    for capture in KEPT_BYTES_CAPTURES {
        let data = kept_bytes_capture(capture);
        let mut kept = JsonLines::new(IdTexts, RecordStyle::default());
        engine_keeping_bytes().run(&mut reader(data.clone()), &mut kept).expect("no sink error");
        let ours = frame_bytes_by_index(&kept.out);
        let golden = frame_bytes_by_index(&golden_kept_bytes(capture));
        assert!(golden.len() > 10 && golden.iter().all(|(_, b)| b.is_some()), "{capture}: golden frames with bytes");
        assert_eq!(ours, golden, "{capture}: each frame's frame_bytes as the binding wrote them");

        // the key comes last; without it, the line is the one written without the bytes
        let mut plain = JsonLines::new(IdTexts, RecordStyle::default());
        engine().run(&mut reader(data), &mut plain).expect("no sink error");
        let cut: Vec<u8> = kept
            .out
            .split(|&b| b == b'\n')
            .flat_map(|line| {
                let text = std::str::from_utf8(line).expect("UTF-8");
                let cut = text.find(",\"frame_bytes\":\"").map_or(text.to_owned(), |at| format!("{}}}", &text[..at]));
                cut.into_bytes().into_iter().chain([b'\n'])
            })
            .collect();
        assert!(cut[..cut.len() - 1] == plain.out[..], "{capture}: the records besides their frame_bytes");
    }
}

#[test]
fn kept_frame_bytes_written_on_the_pool_are_the_same_bytes_as_in_place() {
    let engine = engine_keeping_bytes();
    for capture in KEPT_BYTES_CAPTURES {
        let data = kept_bytes_capture(capture);
        let mut lines = JsonLines::new(IdTexts, RecordStyle::default());
        engine.run(&mut reader(data.clone()), &mut lines).expect("no sink error");
        assert!(lines.out.windows(14).any(|w| w == b"\"frame_bytes\":"), "{capture}: bytes kept");
        for (budget, unshared) in [(1, false), (16 << 20, false), (64 << 10, true)] {
            let (pooled, written) = pooled_lines_of(&engine, &data, budget, unshared);
            assert!(pooled == lines.out, "{capture}, budget {budget}, unshared {unshared}: the pool's lines differ");
            assert_eq!(written, lines.lines, "{capture}: lines counted");
        }
    }
}

#[test]
fn kept_frame_bytes_leave_the_statistics_as_they_were() {
    for capture in KEPT_BYTES_CAPTURES {
        let data = kept_bytes_capture(capture);
        let mut plain = Statistics { texts: IdTexts, stats: new_stats() };
        engine().run(&mut reader(data.clone()), &mut plain).expect("no sink error");
        for budget in [0, 64 << 10] {
            let mut counted = CountedStatistics::new(IdTexts, new_stats(), budget);
            engine_keeping_bytes().run(&mut reader(data.clone()), &mut counted).expect("no sink error");
            let (stats, _, _) = counted.settled().expect("counted");
            assert_eq!(figures(&stats), figures(&plain.stats), "{capture}, budget {budget}");
        }
    }
}
