//! The analysis joined (`analysis::join::Join`), fed frames and events of a front end's own types directly
//! (no capture, no stages): a toy protocol whose questions open an id and whose answers answer it.

mod toy_support;

use pulsar_dissect_engine::analysis::join::{Flush, Join};
use pulsar_dissect_engine::analysis::{Event, EventHead, Frame, PairingOptions, ProtocolAnalysis};
use pulsar_dissect_engine::model::{Decoded, Finding};
use pulsar_dissect_engine::name;
use pulsar_dissect_engine::value::{entry, Map, Text, Value};

use toy_support::toy_table;

fn toy_analysis() -> ProtocolAnalysis {
    ProtocolAnalysis { table: toy_table(), default_to_server: "to_server".into(), sessions: None }
}

fn decoded(type_name: &str, id: i64) -> Decoded {
    Decoded {
        type_name: Text::Owned(type_name.into()),
        command: Some(Value::Map(vec![entry(name!("id"), id)])),
        size: 4,
        findings: vec![],
        body: None,
    }
}

/// A front end's own frame: the join hands it back as it was given.
struct ToyFrame {
    index: u64,
    conn: u64,
    to_server: bool,
    time: f64,
    pdu: Decoded,
}

impl ToyFrame {
    fn view(&self) -> Frame<'_> {
        Frame {
            index: self.index,
            protocol: "toy",
            conn: self.conn,
            src: if self.to_server { "10.0.0.1:40000" } else { "10.0.0.2:7777" },
            dst: if self.to_server { "10.0.0.2:7777" } else { "10.0.0.1:40000" },
            direction: if self.to_server { "to_server" } else { "to_client" },
            time: self.time,
            packet: self.index,
            pdu: &self.pdu,
        }
    }
}

/// A front end's own event: a tag the test recognises when it comes back.
struct ToyEvent(&'static str);

/// What the join flushed, in order, as plain data; `fail_frames`: refuse every frame's notes.
#[derive(Default)]
struct Log {
    seen: Vec<String>,
    fail_frames: bool,
}

impl Flush<ToyFrame, ToyEvent> for Log {
    type Error = String;

    fn input(&mut self, event: &ToyEvent) -> Result<(), String> {
        self.seen.push(format!("input {}", event.0));
        Ok(())
    }

    fn annotated(
        &mut self,
        frame: &ToyFrame,
        notes: Map,
        findings: Vec<Finding>,
        answered: Option<(f64, u64)>,
    ) -> Result<(), String> {
        if self.fail_frames {
            return Err(format!("refused {}", frame.index));
        }
        let answers = notes.iter().find(|(key, _)| key.as_str() == "answers").map(|(_, value)| value.clone());
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        self.seen.push(format!("frame {} answers={answers:?} answered={answered:?} findings={ids:?}", frame.index));
        Ok(())
    }

    fn event(&mut self, event: Event) -> Result<(), String> {
        self.seen.push(format!("event {} conn={:?}", event.kind.as_str(), event.conn));
        Ok(())
    }

    fn misplaced(&mut self, what: &'static str) -> String {
        format!("misplaced: {what}")
    }
}

fn join() -> Join {
    Join::new(PairingOptions {
        request_timeout: 30.0,
        request_timeout_value: Value::Int(30),
        max_pending_requests: 100,
    })
}

fn feed(join: &mut Join, frame: &ToyFrame, log: &mut Log, sightings: &mut u32) -> Result<(), String> {
    join.frame(
        &frame.view(),
        || {
            *sightings += 1;
            Ok(toy_analysis())
        },
        frame,
        log,
    )
}

fn opened(join: &mut Join, conn: u64, time: f64, log: &mut Log) -> Result<(), String> {
    let head = EventHead { kind: "CONNECTION_OPENED", conn: Some(conn), time, packet: 0, mid_stream: false };
    join.event(head, &ToyEvent("opened"), log)
}

#[test]
fn a_frame_comes_back_with_its_pairing_and_the_protocol_is_added_once() {
    let (mut join, mut log, mut sightings) = (join(), Log::default(), 0);
    opened(&mut join, 1, 1.0, &mut log).expect("flushed");
    let question = ToyFrame { index: 1, conn: 1, to_server: true, time: 1.0, pdu: decoded("QUESTION", 7) };
    let answer = ToyFrame { index: 2, conn: 1, to_server: false, time: 1.25, pdu: decoded("ANSWER", 7) };
    feed(&mut join, &question, &mut log, &mut sightings).expect("flushed");
    feed(&mut join, &answer, &mut log, &mut sightings).expect("flushed");
    assert_eq!(sightings, 1, "the protocol's analysis is made on its first frame only");
    assert!(join.knows_protocol("toy"));
    assert_eq!(
        log.seen,
        [
            "input opened",
            "frame 1 answers=None answered=None findings=[]",
            "frame 2 answers=Some(Int(1)) answered=Some((1.0, 1)) findings=[]",
        ]
    );
}

#[test]
fn a_question_left_open_is_unanswered_after_its_closing_event_or_at_the_end() {
    let (mut join, mut log, mut sightings) = (join(), Log::default(), 0);
    opened(&mut join, 1, 1.0, &mut log).expect("flushed");
    opened(&mut join, 2, 1.0, &mut log).expect("flushed");
    for (index, conn) in [(1, 1), (2, 2)] {
        let question = ToyFrame { index, conn, to_server: true, time: 1.0, pdu: decoded("QUESTION", 1) };
        feed(&mut join, &question, &mut log, &mut sightings).expect("flushed");
    }
    log.seen.clear();
    let head = EventHead { kind: "CONNECTION_CLOSED", conn: Some(1), time: 2.0, packet: 3, mid_stream: false };
    join.event(head, &ToyEvent("closed"), &mut log).expect("flushed");
    // the closing event itself first, then what the close leaves
    assert_eq!(log.seen, ["input closed", "event UNANSWERED conn=Some(1)"]);
    log.seen.clear();
    join.finish(&mut log).expect("flushed");
    assert_eq!(log.seen, ["event UNANSWERED conn=Some(2)"]);
}

#[test]
fn the_clock_reports_a_question_waiting_past_the_timeout() {
    let (mut join, mut log, mut sightings) = (join(), Log::default(), 0);
    opened(&mut join, 1, 1.0, &mut log).expect("flushed");
    let question = ToyFrame { index: 1, conn: 1, to_server: true, time: 1.0, pdu: decoded("QUESTION", 3) };
    feed(&mut join, &question, &mut log, &mut sightings).expect("flushed");
    log.seen.clear();
    join.tick(20.0, &mut log).expect("flushed");
    assert!(log.seen.is_empty(), "not yet overdue: {:?}", log.seen);
    join.tick(40.0, &mut log).expect("flushed");
    assert_eq!(log.seen, ["event OVERDUE conn=Some(1)"]);
}

#[test]
fn a_sink_error_stops_that_items_flush_and_leaves_nothing_for_the_next() {
    let (mut join, mut log, mut sightings) = (join(), Log::default(), 0);
    opened(&mut join, 1, 1.0, &mut log).expect("flushed");
    log.fail_frames = true;
    let question = ToyFrame { index: 1, conn: 1, to_server: true, time: 1.0, pdu: decoded("QUESTION", 5) };
    assert_eq!(feed(&mut join, &question, &mut log, &mut sightings), Err("refused 1".to_owned()));
    log.fail_frames = false;
    log.seen.clear();
    let answer = ToyFrame { index: 2, conn: 1, to_server: false, time: 1.5, pdu: decoded("ANSWER", 5) };
    feed(&mut join, &answer, &mut log, &mut sightings).expect("flushed");
    // the refused frame's outputs are not flushed again with the next frame's
    assert_eq!(log.seen.len(), 1, "{:?}", log.seen);
    assert!(log.seen[0].starts_with("frame 2 answers=Some(Int(1))"), "{:?}", log.seen);
}

#[test]
fn a_protocol_whose_analysis_cannot_be_made_is_an_error_and_is_tried_again() {
    let (mut join, mut log) = (join(), Log::default());
    let question = ToyFrame { index: 1, conn: 1, to_server: true, time: 1.0, pdu: decoded("QUESTION", 5) };
    let refused = join.frame(&question.view(), || Err("no table".to_owned()), &question, &mut log);
    assert_eq!(refused, Err("no table".to_owned()));
    assert!(!join.knows_protocol("toy") && log.seen.is_empty());
    let mut sightings = 0;
    feed(&mut join, &question, &mut log, &mut sightings).expect("flushed");
    assert_eq!((sightings, log.seen.len()), (1, 1));
}
