//! The statistics counted on a thread of their own while the caller's thread reads, reassembles, decodes and
//! analyses the next packets (`stats` on a capture, as `--json` writes its lines on the pool). The statistics
//! are counted in capture order, so one thread counts them all: the caller's thread hands over each frame
//! owned (a [`RecordJob`], as for the pool) and each event's record, in batches; the counting thread makes
//! each frame's record (the engine's `stats_record`: only what the statistics read) and adds it. The figures
//! are the same as counting in place (tests: `crates/engine/tests/sinks.rs`, `tests/test_parallel_records.py`).
//!
//! Memory stays bounded as the pool's: about a quarter of `Options.pool_bytes` of decoded frames, as the pool
//! weighs them, are out at once (`StatsFeed::start` says why a quarter); the caller's thread waits for the
//! oldest batch before it hands over one more.

use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::pooled::{batch_shape, RecordJob};
use crate::engine::{event_record, stats_record, with_record, EventItem, FindingTexts, Item, Sink};
use crate::records::{RecordStyle, SinkError, SinkResult};
use crate::stats::Stats;
use crate::value::Map;

/// What the statistics count, in capture order.
pub enum Fed {
    /// A frame the engine decoded: its record is made on the counting thread.
    Frame(RecordJob),
    /// A record made already (an event's, a frame's made on the caller's thread).
    Record(Map),
}

impl Fed {
    fn weight(&self) -> usize {
        match self {
            Fed::Frame(job) => job.weight(),
            Fed::Record(_) => 256,
        }
    }
}

/// A batch counted: its frames' records and their problems, or the error that stopped it; and the batch, to
/// be freed on the caller's thread, which made it (see `pooled.rs: Written`).
struct Counted {
    frames: u64,
    problems: u64,
    error: Option<SinkError>,
    batch: Vec<Fed>,
}

fn count_batch(stats: &Mutex<Stats>, batch: Vec<Fed>, style: RecordStyle) -> Counted {
    let mut counted = Counted { frames: 0, problems: 0, error: None, batch: Vec::new() };
    let mut stats = lock(stats);
    for item in &batch {
        match item {
            Fed::Frame(job) => match job.with_input(|input| stats_record(input, style)) {
                Ok((problems, record)) => {
                    counted.frames += 1;
                    counted.problems += problems as u64;
                    if let Some(record) = record {
                        stats.add(&record);
                    }
                }
                Err(error) => {
                    counted.error = Some(error);
                    break;
                }
            },
            Fed::Record(record) => stats.add(record),
        }
    }
    counted.batch = batch;
    counted
}

/// The statistics, even if a thread panicked while it held them (a panic is not expected; the figures are
/// still plain counters).
pub fn lock(stats: &Mutex<Stats>) -> MutexGuard<'_, Stats> {
    stats.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The caller's side of the counting thread.
pub struct StatsFeed {
    batch: Vec<Fed>,
    weight: usize,
    batch_weight: usize,
    max_out: usize,
    /// Batches handed over and not yet counted.
    out: usize,
    sender: Option<mpsc::SyncSender<Vec<Fed>>>,
    counted: mpsc::Receiver<Counted>,
    worker: Option<JoinHandle<()>>,
    /// Frames whose records were counted, and their problems (what --strict counts).
    pub frames: u64,
    pub problems: u64,
}

impl StatsFeed {
    /// `budget`: about the bytes of decoded frames handed over and not yet counted, at most. None if no
    /// thread could be started (the caller counts in place).
    pub fn start(stats: Arc<Mutex<Stats>>, style: RecordStyle, budget: usize) -> Option<StatsFeed> {
        // a quarter: the frames of a summary decode (what `stats` reads) hold about four times what
        // `RecordJob::weight` guesses (16 MiB of budget held 40 to 70 MiB more on the benchmark capture), and
        // the thread keeps up with less
        let (batch_weight, max_out) = batch_shape(budget / 4);
        let (sender, batches) = mpsc::sync_channel::<Vec<Fed>>(max_out);
        let (give_back, counted) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("pulsar-dissect stats".into())
            .spawn(move || {
                for batch in batches {
                    if give_back.send(count_batch(&stats, batch, style)).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(StatsFeed {
            batch: Vec::new(),
            weight: 0,
            batch_weight,
            max_out,
            out: 0,
            sender: Some(sender),
            counted,
            worker: Some(worker),
            frames: 0,
            problems: 0,
        })
    }

    /// Something to count after everything before it; waits for the oldest batch when too many are out.
    pub fn push(&mut self, item: Fed) -> SinkResult<()> {
        self.weight += item.weight();
        self.batch.push(item);
        if self.weight >= self.batch_weight {
            self.hand_over()?;
        }
        while let Ok(counted) = self.counted.try_recv() {
            self.absorb(counted)?;
        }
        while self.out > self.max_out {
            self.take_oldest()?;
        }
        Ok(())
    }

    fn hand_over(&mut self) -> SinkResult<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.weight = 0;
        let sender = self.sender.as_ref().ok_or(STOPPED)?;
        sender.send(batch).map_err(|_| STOPPED)?;
        self.out += 1;
        Ok(())
    }

    fn take_oldest(&mut self) -> SinkResult<()> {
        let counted = self.counted.recv().map_err(|_| STOPPED)?;
        self.absorb(counted)
    }

    fn absorb(&mut self, counted: Counted) -> SinkResult<()> {
        self.out = self.out.saturating_sub(1);
        self.frames += counted.frames;
        self.problems += counted.problems;
        drop(counted.batch);
        match counted.error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Everything handed over counted (waiting for the thread).
    pub fn settle(&mut self) -> SinkResult<()> {
        self.hand_over()?;
        while self.out > 0 {
            self.take_oldest()?;
        }
        Ok(())
    }
}

/// The counting thread ended without its answer (a panic: not seen, but not assumed).
const STOPPED: SinkError = SinkError::Stopped("counting the statistics on their thread failed");

impl Drop for StatsFeed {
    fn drop(&mut self) {
        self.sender = None; // the thread's loop ends with the channel
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// [`crate::engine::Statistics`] counted on a thread of their own: each frame handed with its shared parts
/// has its record made there, any other item's record is made in its place; the same figures
/// ([`Self::settled`]). Counts in place if no thread could be started.
pub struct CountedStatistics<T: FindingTexts> {
    pub texts: T,
    style: RecordStyle,
    stats: Arc<Mutex<Stats>>,
    feed: Option<StatsFeed>,
    /// Frames counted in place, and their problems.
    frames: u64,
    problems: u64,
}

impl<T: FindingTexts> CountedStatistics<T> {
    /// `budget`: about the bytes of decoded frames handed over and not yet counted, at most (0: counted in place).
    pub fn new(texts: T, stats: Stats, budget: usize) -> CountedStatistics<T> {
        // as `stats` reads the records: the summary record
        let style = RecordStyle { summary: true, payload_bytes: false };
        CountedStatistics::sharing(texts, Arc::new(Mutex::new(stats)), style, budget)
    }

    /// Into statistics its owner reads too (after [`Self::settle`]), the records made in `style`; `budget` 0:
    /// counted in place, on the caller's thread.
    pub fn sharing(texts: T, stats: Arc<Mutex<Stats>>, style: RecordStyle, budget: usize) -> CountedStatistics<T> {
        let feed = if budget > 0 { StatsFeed::start(Arc::clone(&stats), style, budget) } else { None };
        CountedStatistics { texts, style, stats, feed, frames: 0, problems: 0 }
    }

    /// A record made already (a front end's frame's, an event's), counted after everything before it.
    pub fn add_record(&mut self, record: Map) -> SinkResult<()> {
        match &mut self.feed {
            Some(feed) => feed.push(Fed::Record(record)),
            None => {
                lock(&self.stats).add(&record);
                Ok(())
            }
        }
    }

    /// The statistics, everything handed over counted; the frames counted and their problems.
    pub fn settled(&mut self) -> SinkResult<(MutexGuard<'_, Stats>, u64, u64)> {
        let (frames, problems) = self.settle()?;
        Ok((lock(&self.stats), frames, problems))
    }

    /// Everything handed over counted (waiting for the thread): the frames counted and their problems.
    pub fn settle(&mut self) -> SinkResult<(u64, u64)> {
        let (mut frames, mut problems) = (self.frames, self.problems);
        if let Some(feed) = &mut self.feed {
            feed.settle()?;
            (frames, problems) = (frames + feed.frames, problems + feed.problems);
        }
        Ok((frames, problems))
    }
}

impl<T: FindingTexts> Sink for CountedStatistics<T> {
    fn item(&mut self, item: Item<'_>) -> SinkResult<()> {
        match item {
            Item::Frame { frame, first_packet, notes, findings, shared: Some(shared), data, .. }
                if self.feed.is_some() =>
            {
                let notes = notes.into_owned();
                let job = RecordJob::of(&mut self.texts, frame, first_packet, shared, findings, notes, data)?;
                match &mut self.feed {
                    Some(feed) => feed.push(Fed::Frame(job)),
                    None => Ok(()),
                }
            }
            Item::Frame { frame, first_packet, notes, findings, data, .. } => {
                let style = self.style;
                let (problems, record) =
                    with_record(&mut self.texts, frame, first_packet, &notes, findings, data, |input| {
                        stats_record(input, style)
                    })?;
                self.frames += 1;
                self.problems += problems as u64;
                match record {
                    Some(record) => self.add_record(record),
                    None => Ok(()),
                }
            }
            Item::Event(EventItem { kind, time, conn, details, .. }) => {
                self.add_record(event_record(kind, time, conn, details))
            }
        }
    }
}
