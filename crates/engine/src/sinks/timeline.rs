//! `--plain`'s timeline as a sink: each frame's line ([`crate::timeline`]) appended to a byte buffer, no record
//! made for it, and each event's line, made from its record as the front end's renderer makes it. What a front
//! end owns comes in through traits: the texts of findings and events ([`FindingTexts`]) and
//! each protocol's plan ([`LinePlans`]: the key fields of its command types, the style of their names), asked
//! the first time a frame of the protocol is met. The [`Format`] (the plans learnt, the time origin) is the
//! caller's, lent for each item: a front end that makes other lines with it too (the Python renderer's event
//! lines of what it holds itself) shares its plans and origin.

use crate::analysis::intern;
use crate::engine::{with_record, FindingTexts, Item, Sink};
use crate::model::Finding;
use crate::name;
use crate::records::{notes_replace_a_key, MapSink, RecordStyle, SinkResult};
use crate::timeline::{FindingText, Format, FrameAt, Line, LineFacts, ProtocolPlan};
use crate::value::{entry, Value};

/// The timeline plan of a protocol, which the front end declares (the Python one: from the protocol's command
/// table, `dissector/output/timeline.py: timeline_plan`).
pub trait LinePlans {
    /// The plan of `protocol`, or None: no protocol of that name (its lines show undeclared fields).
    fn plan(&mut self, protocol: &str) -> SinkResult<Option<ProtocolPlan>>;
}

/// The lines written so far and what the sink keeps between items; a [`Sink`] once lent a [`Format`]
/// ([`TimelineLines::with_format`]).
pub struct TimelineLines<T: FindingTexts, P: LinePlans> {
    pub texts: T,
    pub plans: P,
    /// The lines, each ending in a newline.
    pub out: Vec<u8>,
    /// Frames' lines written, and the problems of every line (what --strict counts: an event that is no note
    /// is one).
    pub frames: u64,
    pub problems: u64,
    findings: Vec<FindingText>,
    line: Line,
}

impl<T: FindingTexts, P: LinePlans> TimelineLines<T, P> {
    pub fn new(texts: T, plans: P) -> TimelineLines<T, P> {
        TimelineLines {
            texts,
            plans,
            out: Vec::new(),
            frames: 0,
            problems: 0,
            findings: Vec::new(),
            line: Line::default(),
        }
    }

    /// These lines as a sink, made with `format`.
    pub fn with_format<'s>(&'s mut self, format: &'s mut Format) -> TimelineSink<'s, T, P> {
        TimelineSink { lines: self, format }
    }

    /// A frame's line, made from the frame itself (its decoded data, the analysis' notes and findings), or from
    /// its record when a note replaces one of the record's own keys (as the record shows it).
    fn frame(&mut self, format: &mut Format, item: Item<'_>) -> SinkResult<()> {
        let Item::Frame { frame, first_packet, notes, findings, data, .. } = item else { return Ok(()) };
        if !format.knows(frame.protocol) {
            let plan = self.plans.plan(frame.protocol)?;
            format.learn(frame.protocol, plan);
        }
        self.line.clear();
        if notes_replace_a_key(&notes) {
            let style = RecordStyle { summary: !format.previews(), payload_bytes: format.previews() };
            let (problems, record) =
                with_record(&mut self.texts, frame, first_packet, &notes, findings, data, |input| {
                    let mut sink = MapSink::new(None);
                    crate::frame_record::build_record(&mut sink, input, style)
                        .map(|problems| (problems, sink.into_record()))
                })?;
            format.make_line(&LineFacts::of_record(&record.unwrap_or_default()), &mut self.line);
            self.problems += problems as u64;
        } else {
            self.findings.clear();
            for finding in frame.pdu.findings.iter().chain(findings) {
                let expert = self.texts.expert(finding);
                let message = expert.message.to_owned_text()?;
                self.findings.push(FindingText { note: expert.severity.as_str() == "note", message });
            }
            let at = FrameAt {
                index: frame.index,
                time: frame.time,
                packet: frame.packet as i64,
                first_packet,
                conn: frame.conn,
                protocol: frame.protocol,
                src: frame.src,
                dst: frame.dst,
                direction: frame.direction,
            };
            format.make_line(&LineFacts::of_frame(at, frame.pdu, &notes, &self.findings), &mut self.line);
            self.problems += self.findings.iter().filter(|f| !f.note).count() as u64;
        }
        self.push_line();
        self.frames += 1;
        Ok(())
    }

    /// An event's line, made from its record as the front end's renderer reads it: type, time, packet, its text,
    /// connection and route.
    fn event(&mut self, format: &mut Format, item: Item<'_>) -> SinkResult<()> {
        let Item::Event(event) = item else { return Ok(()) };
        // its text, asked as a finding's is (the kinds are the engine's few names, each interned once)
        let finding = Finding { id: intern(event.kind), params: event.text_params() };
        let expert = self.texts.expert(&finding);
        let mut record = vec![
            entry(name!("type"), event.kind.to_owned()),
            entry(name!("time"), Value::Float(event.time)),
            entry(name!("packet"), event.packet),
            entry(name!("message"), expert.message.to_owned_text()?),
        ];
        if let Some(conn) = event.conn {
            record.push(entry(name!("conn"), conn));
        }
        if let Some(src) = event.src {
            record.push(entry(name!("src"), src.to_owned()));
            for (key, text) in [(name!("dst"), event.dst), (name!("direction"), event.direction)] {
                record.push(entry(key, text.map_or(Value::Null, |text| Value::from(text.to_owned()))));
            }
        }
        self.line.clear();
        format.make_line(&LineFacts::of_record(&record), &mut self.line);
        self.push_line();
        self.problems += (expert.severity.as_str() != "note") as u64;
        Ok(())
    }

    fn push_line(&mut self) {
        self.out.extend_from_slice(self.line.text.as_bytes());
        self.out.push(b'\n');
    }
}

/// [`TimelineLines`] with the format its lines are made with.
pub struct TimelineSink<'s, T: FindingTexts, P: LinePlans> {
    lines: &'s mut TimelineLines<T, P>,
    format: &'s mut Format,
}

impl<T: FindingTexts, P: LinePlans> Sink for TimelineSink<'_, T, P> {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { .. } => self.lines.frame(self.format, item),
            Item::Event(_) => self.lines.event(self.format, item),
        }
    }
}
