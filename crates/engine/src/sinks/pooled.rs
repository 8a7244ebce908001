//! The frames' JSON lines written on a pool of threads (rayon's global pool) while the caller's thread reads,
//! reassembles, decodes and analyses the next packets. A record depends only on its frame, its notes and the
//! texts of its findings, so the frame is handed over owned ([`RecordJob`]), in batches; each batch's lines
//! come back through its own channel, and the batches are joined in the order they were handed over, so the
//! output is the same bytes as writing each record in place (tests: `crates/engine/tests/sinks.rs`,
//! `tests/test_parallel_records.py`).
//!
//! Memory stays bounded: about `Options.pool_bytes` of decoded frames are out at once, in batches of at most
//! [`BATCH_WEIGHT`]; the caller's thread waits for the oldest before it hands over one more.
//!
//! Rayon's pool, which `records.rs` also splits a large batch's messages over (one pool, one knob:
//! `RAYON_NUM_THREADS`; records written on the pool do not split, `records.rs: par_items` sees it is on the
//! pool). A pool of the engine's own std threads was tried: the same bytes, but on 20 unanswered SENDs of
//! 64 MiB each `--json` peaked at 296 MB against 166 MB (memory freed but kept by the allocator: 164 MB with
//! `MIMALLOC_PURGE_DELAY=0`).

use std::collections::VecDeque;
use std::sync::{mpsc, Arc};

use crate::analysis::Frame;
use crate::budget::{MemoryBudget, Reservation};
use crate::engine::{
    event_record, with_record, write_json_line, EventItem, FindingTexts, Item, RunContext, Shared, Sink,
};
use crate::frame_record::RecordInput;
use crate::model::{Decoded, Finding};
use crate::records::{Expert, Message, NoFront, RecordStyle, SinkError, SinkResult};
use crate::value::{write_json_map, Map, Name};

/// A batch's weight at most, about the bytes its frames hold decoded: large enough that handing a batch over
/// costs little beside writing it, small enough that the pool starts soon.
const BATCH_WEIGHT: usize = 1 << 20;

/// What a frame's record reads, owned, so it can be written on another thread.
pub struct RecordJob {
    pub index: u64,
    pub conn: u64,
    pub time: f64,
    pub packet: u64,
    pub first_packet: i64,
    /// protocol, src, dst, direction.
    pub route: [Arc<str>; 4],
    pub pdu: Arc<Decoded>,
    /// The decoder's then the analysis' findings: id, severity, text.
    pub expert: Vec<(&'static Name, &'static Name, String)>,
    pub notes: Map,
    /// The frame's bytes, when kept (`Options.keep_frame_bytes`): copied, the caller's are not kept.
    pub data: Option<Box<[u8]>>,
}

/// A batch's weight and how many batches may be out at once, for a budget of `budget` bytes of decoded frames
/// handed over and not yet done with: the budget (`Options.pool_bytes`, 16 MiB) lets a run of small frames
/// (the caller's thread's work) and a run of large batches (the other side's) overlap.
pub fn batch_shape(budget: usize) -> (usize, usize) {
    let batch_weight = (budget / 32).clamp(1, BATCH_WEIGHT);
    (batch_weight, (budget / batch_weight).max(1))
}

impl RecordJob {
    /// The job of a frame a sink is given with its shared parts (and its bytes if kept), the texts of its
    /// findings from `texts`.
    pub fn of(
        texts: &mut impl FindingTexts,
        frame: &Frame,
        first_packet: i64,
        shared: Shared<'_>,
        findings: &[Finding],
        notes: Map,
        data: Option<&[u8]>,
    ) -> SinkResult<RecordJob> {
        let expert = frame
            .pdu
            .findings
            .iter()
            .chain(findings)
            .map(|finding| {
                let Expert { id, severity, message } = texts.expert(finding);
                let text = match message {
                    Message::Owned(text) => text,
                    Message::Front(never) => match never {},
                };
                (id, severity, text)
            })
            .collect();
        Ok(RecordJob {
            index: frame.index,
            conn: frame.conn,
            time: frame.time,
            packet: frame.packet,
            first_packet,
            route: shared.route.clone(),
            pdu: Arc::clone(shared.pdu),
            expert,
            notes,
            data: data.map(Box::from),
        })
    }

    /// About the bytes the frame holds decoded, and what writing its record costs.
    pub fn weight(&self) -> usize {
        512 + self.pdu.size
            + 64 * self.pdu.body.as_ref().map_or(0, |b| b.message_count())
            + self.data.as_ref().map_or(0, |d| 2 * d.len())
    }

    /// The decompressed payload bytes it holds beyond that (a 60 KB frame may hold 64 MiB): what pool_bytes
    /// bounds as well, while it waits to be written.
    pub fn held(&self) -> usize {
        self.pdu.body.as_ref().map_or(0, |b| b.held_bytes())
    }

    /// Append the record's JSON line to `out`; returns its problems.
    fn write(&self, out: &mut Vec<u8>, style: RecordStyle) -> SinkResult<usize> {
        self.with_input(|input| write_json_line(out, input, style))
    }

    /// `f` of the record's input.
    pub fn with_input<R>(&self, f: impl FnOnce(&RecordInput<'_, NoFront>) -> R) -> R {
        let [protocol, src, dst, direction] = &self.route;
        let frame = Frame {
            index: self.index,
            protocol,
            conn: self.conn,
            src,
            dst,
            direction,
            time: self.time,
            packet: self.packet,
            pdu: &self.pdu,
        };
        let expert: Vec<Expert<NoFront>> = self
            .expert
            .iter()
            .map(|(id, severity, text)| Expert { id, severity, message: Message::Owned(text.clone()) })
            .collect();
        let input = RecordInput {
            frame: &frame,
            route: None,
            first_packet: self.first_packet,
            expert: &expert,
            protocol_keys: None,
            notes: &self.notes,
            data: self.data.as_deref(),
        };
        f(&input)
    }
}

/// A batch's lines, how many records they are and their problems; or the error that stopped it.
struct Written {
    lines: Vec<u8>,
    frames: u64,
    problems: u64,
    error: Option<SinkError>,
    /// The jobs, freed on the caller's thread, which made them: mimalloc frees memory across threads
    /// through a queue its owner empties later, which cost the pool (the busier side) a tenth of its time.
    jobs: Vec<RecordJob>,
}

fn write_batch(jobs: Vec<RecordJob>, weight: usize, style: RecordStyle) -> Written {
    // (the lines take about twice the frames' bytes: few reallocations)
    let mut written =
        Written { lines: Vec::with_capacity(weight * 2), frames: 0, problems: 0, error: None, jobs: Vec::new() };
    for job in &jobs {
        match job.write(&mut written.lines, style) {
            Ok(problems) => {
                written.frames += 1;
                written.problems += problems as u64;
            }
            Err(error) => {
                written.error = Some(error);
                break;
            }
        }
    }
    written.jobs = jobs;
    written
}

/// Where finished lines go: after the lines written in place since the last piece (`lines`), as pieces of
/// their own (each handed on as it is), and the counts of records and problems.
pub struct LinesOut<'a> {
    pub lines: &'a mut Vec<u8>,
    pub pieces: &'a mut Vec<Vec<u8>>,
    pub frames: &'a mut u64,
    pub problems: &'a mut u64,
}

/// The batches handed to the pool, in order, and the one being filled.
pub struct PooledLines {
    style: RecordStyle,
    batch: Vec<RecordJob>,
    weight: usize,
    /// A batch's weight.
    batch_weight: usize,
    /// Each batch out: its lines to come, the decompressed bytes it holds, and its frames' bytes reserved in
    /// the run's memory budget (given back when it is taken).
    running: VecDeque<(mpsc::Receiver<Written>, usize, Reservation)>,
    /// Batches already written and appended by `finished` (when the pool happened to be done), still counted
    /// as out until `push` or `finish_all` takes them in turn: what the budget counts then depends on the
    /// input alone, never on the threads' timing (other holders drop by it).
    done: VecDeque<(usize, Reservation)>,
    /// Batches out at once at most (written, or waiting for a thread of the pool): see [`batch_shape`].
    max_running: usize,
    /// The decompressed bytes the batch being filled holds, and those out (`RecordJob::held`); beyond
    /// `budget`, the oldest batch out is waited for (one batch may be out whatever the run's budget says, if it
    /// holds no more than `budget`).
    held: usize,
    held_running: usize,
    budget: usize,
    /// The run's memory budget, shared with the other holders of wire bytes: while it is over, the oldest batch
    /// out is waited for (as beyond `budget`); nothing is dropped.
    memory: MemoryBudget,
}

impl PooledLines {
    /// `budget`: about the bytes of decoded frames handed over and not yet written, at most.
    pub fn new(style: RecordStyle, budget: usize, memory: MemoryBudget) -> PooledLines {
        let (batch_weight, max_running) = batch_shape(budget);
        PooledLines {
            style,
            batch: Vec::new(),
            weight: 0,
            batch_weight,
            running: VecDeque::new(),
            done: VecDeque::new(),
            max_running,
            held: 0,
            held_running: 0,
            budget,
            memory,
        }
    }

    /// Whether any record is still to be written.
    pub fn is_idle(&self) -> bool {
        self.batch.is_empty() && self.running.is_empty() && self.done.is_empty()
    }

    /// A record to write after every one before it; waits for the oldest batch when too many are out.
    pub fn push(&mut self, job: RecordJob, out: &mut LinesOut<'_>) -> SinkResult<()> {
        self.weight += job.weight();
        self.held += job.held();
        self.batch.push(job);
        if self.weight >= self.batch_weight || self.held >= self.batch_weight {
            self.hand_over();
        }
        loop {
            let out_now = self.done.len() + self.running.len();
            let within = self.held_running <= self.budget;
            // one batch may be out whatever the run's budget says (the pool works while this thread decodes),
            // but not one holding more decompressed bytes than `budget`: the next frame's payload would be
            // decompressed beside it (two 64 MiB payloads at once, and a peak that varied with the threads'
            // timing: 163 or 291 MiB on 20 SENDs of 64 MiB each)
            if out_now == 0 || (out_now <= self.max_running && within && (out_now == 1 || !self.memory.is_over())) {
                break;
            }
            self.take_oldest(out)?;
        }
        Ok(())
    }

    fn hand_over(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let jobs = std::mem::take(&mut self.batch);
        let weight = std::mem::take(&mut self.weight);
        let held = std::mem::take(&mut self.held);
        let style = self.style;
        let mut reserved = self.memory.reservation();
        reserved.grow((weight + held) as u64);
        let (sender, receiver) = mpsc::sync_channel(1);
        rayon::spawn(move || {
            let _ = sender.send(write_batch(jobs, weight, style));
        });
        self.running.push_back((receiver, held, reserved));
        self.held_running += held;
    }

    /// The oldest batch out taken: its lines appended (unless `finished` appended them already), its reservation
    /// given back to the budget.
    fn take_oldest(&mut self, out: &mut LinesOut<'_>) -> SinkResult<()> {
        if let Some((held, _reserved)) = self.done.pop_front() {
            self.held_running -= held;
            return Ok(());
        }
        let Some((receiver, held, _reserved)) = self.running.pop_front() else { return Ok(()) };
        self.held_running -= held;
        // a sender dropped without sending (a panic on the pool, or no pool: not seen, but not assumed)
        let written =
            receiver.recv().map_err(|_| SinkError::Stopped("writing JSON lines on the thread pool failed"))?;
        self.append(written, out)
    }

    fn append(&mut self, written: Written, out: &mut LinesOut<'_>) -> SinkResult<()> {
        if !out.lines.is_empty() {
            out.pieces.push(std::mem::take(out.lines));
        }
        out.pieces.push(written.lines);
        drop(written.jobs);
        *out.frames += written.frames;
        *out.problems += written.problems;
        match written.error {
            Some(error) => {
                self.running.clear();
                self.done.clear();
                self.batch.clear();
                (self.held, self.held_running) = (0, 0);
                Err(error)
            }
            None => Ok(()),
        }
    }

    /// Every record handed over, written, appended to `out` in order (waiting for the pool).
    pub fn finish_all(&mut self, out: &mut LinesOut<'_>) -> SinkResult<()> {
        self.hand_over();
        while !self.running.is_empty() || !self.done.is_empty() {
            self.take_oldest(out)?;
        }
        Ok(())
    }

    /// The batches already written, appended to `out` in order, without waiting; the one being filled is
    /// handed over (so the pool works while the caller writes what it has).
    pub fn finished(&mut self, out: &mut LinesOut<'_>) -> SinkResult<()> {
        self.hand_over();
        while let Some((receiver, _, _)) = self.running.front() {
            match receiver.try_recv() {
                Ok(written) => {
                    if let Some((_, held, reserved)) = self.running.pop_front() {
                        self.done.push_back((held, reserved));
                    }
                    self.append(written, out)?;
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    // the batches before it taken in turn, then its error
                    while !self.done.is_empty() {
                        self.take_oldest(out)?;
                    }
                    return self.take_oldest(out);
                }
            }
        }
        Ok(())
    }
}

/// [`crate::engine::JsonLines`] on the pool: each frame handed with its shared parts is written there, any
/// other item in its place after every line before it; the same bytes, in pieces ([`Self::take`]).
pub struct PooledJsonLines<T: FindingTexts> {
    pub texts: T,
    style: RecordStyle,
    pooled: PooledLines,
    /// Lines written in place since the last piece.
    lines: Vec<u8>,
    /// Lines finished, in order.
    pieces: Vec<Vec<u8>>,
    /// Frames' records written and their problems; events' lines written.
    pub frames: u64,
    pub problems: u64,
    pub events: u64,
}

impl<T: FindingTexts> PooledJsonLines<T> {
    /// `budget`: about the bytes of decoded frames handed over and not yet written, at most. The batches out
    /// reserve from the run's memory budget, given by [`Sink::start`] (until then, a budget that never refuses).
    pub fn new(texts: T, style: RecordStyle, budget: usize) -> PooledJsonLines<T> {
        PooledJsonLines {
            texts,
            style,
            pooled: PooledLines::new(style, budget, MemoryBudget::unlimited()),
            lines: Vec::new(),
            pieces: Vec::new(),
            frames: 0,
            problems: 0,
            events: 0,
        }
    }

    fn out(&mut self) -> (&mut PooledLines, LinesOut<'_>) {
        let out = LinesOut {
            lines: &mut self.lines,
            pieces: &mut self.pieces,
            frames: &mut self.frames,
            problems: &mut self.problems,
        };
        (&mut self.pooled, out)
    }

    /// A line written in place by `write` (given the lines and the texts), after every line before it (waiting
    /// for the pool): for a record the caller makes itself (a front end's frame the engine never decoded).
    pub fn in_place(&mut self, write: impl FnOnce(&mut Vec<u8>, &mut T) -> SinkResult<()>) -> SinkResult<()> {
        let (pooled, mut out) = self.out();
        pooled.finish_all(&mut out)?;
        write(&mut self.lines, &mut self.texts)
    }

    /// The lines written so far, in order, as pieces: all of them (`wait`: waiting for the pool), or those
    /// finished, the rest handed over to be written. (Lines written in place come before any batch still out:
    /// writing in place waited for every batch.)
    pub fn take(&mut self, wait: bool) -> SinkResult<Vec<Vec<u8>>> {
        let (pooled, mut out) = self.out();
        match wait {
            true => pooled.finish_all(&mut out)?,
            false => pooled.finished(&mut out)?,
        }
        if !self.lines.is_empty() {
            self.pieces.push(std::mem::take(&mut self.lines));
        }
        Ok(std::mem::take(&mut self.pieces))
    }
}

impl<T: FindingTexts> Sink for PooledJsonLines<T> {
    /// The batches out reserve from the run's memory budget from now on.
    fn start(&mut self, run: &RunContext) {
        self.pooled.memory = run.memory_budget.clone();
    }

    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { frame, first_packet, notes, findings, shared: Some(shared), data, .. } => {
                let notes = notes.into_owned();
                let job = RecordJob::of(&mut self.texts, frame, first_packet, shared, findings, notes, data)?;
                let (pooled, mut out) = self.out();
                pooled.push(job, &mut out)
            }
            Item::Frame { frame, first_packet, notes, findings, shared: None, data, .. } => {
                let style = self.style;
                let mut problems = 0;
                self.in_place(|out, texts| {
                    problems = with_record(texts, frame, first_packet, &notes, findings, data, |input| {
                        write_json_line(out, input, style)
                    })?;
                    Ok(())
                })?;
                self.frames += 1;
                self.problems += problems as u64;
                Ok(())
            }
            Item::Event(EventItem { kind, time, conn, details, .. }) => {
                self.in_place(|out, _| {
                    write_json_map(&event_record(kind, time, conn, details), out);
                    out.push(b'\n');
                    Ok(())
                })?;
                self.events += 1;
                Ok(())
            }
        }
    }
}
