//! The pipeline's summary as partial statistics: each decoding task counts its own connections' frames as it
//! makes their rows ([`Summary::frame`], from the tables' typed values), and hands over one small JSON text;
//! the driver merges the parts ([`Summary::merge`]). Counts and sums merge exactly. Latencies merge as
//! [`LatencySketch`]es: their values kept exactly while few (then percentiles are what `stats` gives), else
//! log-binned with a stated relative error.
//!
//! The parts of one run cover disjoint connections (a connection is read by one task), so the connections'
//! count is a sum.

use std::collections::BTreeMap;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use serde::{Deserialize, Serialize};

/// Values a sketch keeps exactly; beyond, it bins them.
pub const EXACT_VALUES: usize = 1024;

/// The relative error of a percentile read from the bins: a value v is counted in the bin of
/// `ceil(log_γ v)`, γ = (1 + α) / (1 − α), and read back as the bin's middle, within α of v.
pub const RELATIVE_ERROR: f64 = 0.01;

fn gamma() -> f64 {
    (1.0 + RELATIVE_ERROR) / (1.0 - RELATIVE_ERROR)
}

/// Latencies of one kind: count, total and max exactly; the values, or their bins.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySketch {
    pub count: u64,
    pub total: f64,
    pub max: Option<f64>,
    /// Every value, while there are at most `EXACT_VALUES`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<f64>,
    /// Once binned: (bin, count), bins in order; a value ≤ 0 is in bin `i32::MIN` (read as 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<(i32, u64)>,
}

fn bin_of(value: f64) -> i32 {
    if value <= 0.0 {
        return i32::MIN;
    }
    (value.ln() / gamma().ln()).ceil() as i32
}

fn bin_value(bin: i32) -> f64 {
    if bin == i32::MIN {
        return 0.0;
    }
    let g = gamma();
    2.0 * g.powi(bin) / (g + 1.0)
}

impl LatencySketch {
    pub fn add(&mut self, value: f64) {
        self.count += 1;
        self.total += value;
        if self.max.is_none_or(|max| value > max) {
            self.max = Some(value);
        }
        if self.bins.is_empty() && self.values.len() < EXACT_VALUES {
            self.values.push(value);
        } else if self.bins.is_empty() {
            self.bin(&[value]);
        } else {
            let bin = bin_of(value);
            match self.bins.binary_search_by_key(&bin, |(b, _)| *b) {
                Ok(at) => self.bins[at].1 += 1,
                Err(at) => self.bins.insert(at, (bin, 1)),
            }
        }
    }

    /// `values` into the bins (the kept ones too, the first time).
    fn bin(&mut self, values: &[f64]) {
        let mut bins: BTreeMap<i32, u64> = self.bins.drain(..).collect();
        for value in std::mem::take(&mut self.values).iter().chain(values) {
            *bins.entry(bin_of(*value)).or_default() += 1;
        }
        self.bins = bins.into_iter().collect();
    }

    pub fn merge(&mut self, other: &LatencySketch) {
        self.count += other.count;
        self.total += other.total;
        if let Some(max) = other.max {
            if self.max.is_none_or(|m| max > m) {
                self.max = Some(max);
            }
        }
        if self.bins.is_empty() && other.bins.is_empty() && self.values.len() + other.values.len() <= EXACT_VALUES {
            self.values.extend_from_slice(&other.values);
            return;
        }
        let mut bins: BTreeMap<i32, u64> = self.bins.drain(..).collect();
        for (bin, n) in &other.bins {
            *bins.entry(*bin).or_default() += n;
        }
        self.bins = bins.into_iter().collect();
        self.bin(&other.values);
    }

    /// Whether the percentiles are the values' own.
    pub fn exact(&self) -> bool {
        self.bins.is_empty()
    }

    /// The nearest-rank percentile (q in 0..=100), as `stats` reads it from its values: exact while the
    /// values are kept, else within `RELATIVE_ERROR` of it.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q / 100.0 * self.count as f64).ceil() as u64).max(1);
        if self.exact() {
            let mut sorted = self.values.clone();
            sorted.sort_by(f64::total_cmp);
            return sorted.get(rank as usize - 1).copied();
        }
        let mut seen = 0;
        for (bin, n) in &self.bins {
            seen += n;
            if seen >= rank {
                // never above the largest value seen
                return Some(self.max.map_or(bin_value(*bin), |max| bin_value(*bin).min(max)));
            }
        }
        self.max
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.total / self.count as f64)
    }
}

/// What the summary groups a frame's messages by.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MessageGroup {
    pub protocol: Option<String>,
    pub topic: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub conn: Option<i64>,
    pub producer_id: Option<i64>,
    pub producer_name: Option<String>,
    pub consumer_id: Option<i64>,
    pub subscription: Option<String>,
    /// The messages were sent by a client (true) or received by one (false), as the protocol says of the type.
    pub sent: Option<bool>,
}

/// A frame's message group as its values are read (borrowed: most frames' group is the one before theirs).
#[derive(Clone, Copy, Default)]
pub struct GroupOf<'a> {
    pub protocol: Option<&'a str>,
    pub topic: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub conn: Option<i64>,
    pub producer_id: Option<i64>,
    pub producer_name: Option<&'a str>,
    pub consumer_id: Option<i64>,
    pub subscription: Option<&'a str>,
    pub sent: Option<bool>,
}

impl GroupOf<'_> {
    fn is(&self, group: &MessageGroup) -> bool {
        self.protocol == group.protocol.as_deref()
            && self.topic == group.topic.as_deref()
            && self.kind == group.kind.as_deref()
            && self.conn == group.conn
            && self.producer_id == group.producer_id
            && self.producer_name == group.producer_name.as_deref()
            && self.consumer_id == group.consumer_id
            && self.subscription == group.subscription.as_deref()
            && self.sent == group.sent
    }

    fn owned(&self) -> MessageGroup {
        MessageGroup {
            protocol: owned(self.protocol),
            topic: owned(self.topic),
            kind: owned(self.kind),
            conn: self.conn,
            producer_id: self.producer_id,
            producer_name: owned(self.producer_name),
            consumer_id: self.consumer_id,
            subscription: owned(self.subscription),
            sent: self.sent,
        }
    }
}

/// A group's figures: messages, their payload bytes (None while no message had a size) and frames.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageFigures {
    pub messages: u64,
    pub payload: Option<i64>,
    pub frames: u64,
}

/// One frame as the summary counts it (the tables' values).
pub struct FrameFigures<'a> {
    pub protocol: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub conn: Option<i64>,
    pub time: Option<f64>,
    /// The frame's messages' group and each message's payload size.
    pub group: GroupOf<'a>,
    pub payload_sizes: &'a [Option<i64>],
    /// An answer's request type and latency.
    pub latency: Option<(Option<&'a str>, f64)>,
    /// Its findings: (id, severity).
    pub findings: &'a [(Option<&'a str>, Option<&'a str>)],
}

/// A key of two optional texts: (protocol, frame type), (protocol, request type), (problem id, severity).
pub type Pair = (Option<String>, Option<String>);

/// The partial (or merged) statistics of the pipeline's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub frames: u64,
    pub connections: u64,
    pub first_time: Option<f64>,
    pub last_time: Option<f64>,
    /// (protocol, frame type) → frames
    pub types: Vec<(Pair, u64)>,
    pub messages: Vec<(MessageGroup, MessageFigures)>,
    /// (protocol, request type) → latencies
    pub latency: Vec<(Pair, LatencySketch)>,
    /// (id, severity) → count
    pub problems: Vec<(Pair, u64)>,
}

/// A summary being made: maps, turned into the lists of a [`Summary`] when taken.
#[derive(Default)]
pub struct SummaryMaker {
    frames: u64,
    connections: foldhash::HashSet<i64>,
    first_time: Option<f64>,
    last_time: Option<f64>,
    types: PairMap<u64>,
    messages: BTreeMap<MessageGroup, MessageFigures>,
    /// The group of the last frame with messages (its entry found again without a key made).
    last_group: Option<MessageGroup>,
    latency: PairMap<LatencySketch>,
    problems: PairMap<u64>,
}

fn owned(text: Option<&str>) -> Option<String> {
    text.map(str::to_owned)
}

/// A map keyed by two optional texts, found by the borrowed texts: most frames find their entry, and a key
/// made for each (two strings, dropped at once) with a tree's comparisons cost 4 % of a decoding task.
struct PairMap<V> {
    entries: HashTable<(Pair, V)>,
    hasher: foldhash::fast::FixedState,
}

impl<V> Default for PairMap<V> {
    fn default() -> Self {
        PairMap { entries: HashTable::new(), hasher: foldhash::fast::FixedState::default() }
    }
}

impl<V: Default> PairMap<V> {
    fn hash(&self, a: Option<&str>, b: Option<&str>) -> u64 {
        self.hasher.hash_one((a, b))
    }

    /// The entry of (a, b), made only when new.
    fn entry(&mut self, a: Option<&str>, b: Option<&str>) -> &mut V {
        let hash = self.hash(a, b);
        let hasher = &self.hasher;
        let entry = self.entries.entry(
            hash,
            |(key, _)| key.0.as_deref() == a && key.1.as_deref() == b,
            |(key, _)| hasher.hash_one((key.0.as_deref(), key.1.as_deref())),
        );
        &mut entry.or_insert_with(|| ((owned(a), owned(b)), V::default())).into_mut().1
    }

    /// The entries in the keys' order (as a `BTreeMap` gives them).
    fn into_sorted(self) -> Vec<(Pair, V)> {
        let mut entries: Vec<(Pair, V)> = self.entries.into_iter().collect();
        entries.sort_unstable_by(|x, y| x.0.cmp(&y.0));
        entries
    }
}

impl SummaryMaker {
    pub fn frame(&mut self, frame: FrameFigures<'_>) {
        self.frames += 1;
        if let Some(conn) = frame.conn {
            self.connections.insert(conn);
        }
        if let Some(time) = frame.time {
            self.first_time = Some(self.first_time.map_or(time, |t| t.min(time)));
            self.last_time = Some(self.last_time.map_or(time, |t| t.max(time)));
        }
        *self.types.entry(frame.protocol, frame.kind) += 1;
        if !frame.payload_sizes.is_empty() {
            if !self.last_group.as_ref().is_some_and(|last| frame.group.is(last)) {
                self.last_group = Some(frame.group.owned());
            }
            let group = self.last_group.as_ref().expect("set above");
            let figures = match self.messages.get_mut(group) {
                Some(figures) => figures,
                None => self.messages.entry(group.clone()).or_default(),
            };
            figures.messages += frame.payload_sizes.len() as u64;
            figures.frames += 1;
            for size in frame.payload_sizes.iter().flatten() {
                figures.payload = Some(figures.payload.unwrap_or(0) + size);
            }
        }
        if let Some((request_type, latency)) = frame.latency {
            // a request refused keeps its latency apart (`REQUEST→ANSWER`), as `stats` does
            let refused = |answer: &str| {
                crate::protocols::of_record(frame.protocol)
                    .and_then(|p| p.stats_role(answer))
                    .is_some_and(crate::protocols::StatsRole::answers_with_error)
            };
            match (request_type, frame.kind.filter(|&answer| refused(answer))) {
                (Some(request), Some(answer)) => {
                    let kind = super::refused_kind(request, answer);
                    self.latency.entry(frame.protocol, Some(&kind)).add(latency)
                }
                _ => self.latency.entry(frame.protocol, request_type).add(latency),
            }
        }
        for (id, severity) in frame.findings {
            *self.problems.entry(*id, *severity) += 1;
        }
    }

    /// A problem that is no frame's finding (an event worse than a note).
    pub fn problem(&mut self, id: &str, severity: &str) {
        *self.problems.entry(Some(id), Some(severity)) += 1;
    }

    /// The summary so far, and a fresh start.
    pub fn take(&mut self) -> Summary {
        let taken = std::mem::take(self);
        Summary {
            frames: taken.frames,
            connections: taken.connections.len() as u64,
            first_time: taken.first_time,
            last_time: taken.last_time,
            types: taken.types.into_sorted(),
            messages: taken.messages.into_iter().collect(),
            latency: taken.latency.into_sorted(),
            problems: taken.problems.into_sorted(),
        }
    }
}

fn merge_counts<K: Ord + Clone>(into: &mut Vec<(K, u64)>, other: &[(K, u64)]) {
    let mut map: BTreeMap<K, u64> = into.drain(..).collect();
    for (key, n) in other {
        *map.entry(key.clone()).or_default() += n;
    }
    *into = map.into_iter().collect();
}

impl Summary {
    /// Another part added to this one.
    pub fn merge(&mut self, other: &Summary) {
        self.frames += other.frames;
        self.connections += other.connections;
        for (mine, theirs, earlier) in
            [(&mut self.first_time, other.first_time, true), (&mut self.last_time, other.last_time, false)]
        {
            if let Some(t) = theirs {
                *mine = Some(mine.map_or(t, |m| if earlier { m.min(t) } else { m.max(t) }));
            }
        }
        merge_counts(&mut self.types, &other.types);
        merge_counts(&mut self.problems, &other.problems);
        let mut messages: BTreeMap<MessageGroup, MessageFigures> = self.messages.drain(..).collect();
        for (group, figures) in &other.messages {
            let mine = messages.entry(group.clone()).or_default();
            mine.messages += figures.messages;
            mine.frames += figures.frames;
            if let Some(payload) = figures.payload {
                mine.payload = Some(mine.payload.unwrap_or(0) + payload);
            }
        }
        self.messages = messages.into_iter().collect();
        let mut latency: BTreeMap<_, LatencySketch> = self.latency.drain(..).collect();
        for (key, sketch) in &other.latency {
            latency.entry(key.clone()).or_default().merge(sketch);
        }
        self.latency = latency.into_iter().collect();
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain data")
    }

    pub fn from_json(text: &str) -> Result<Summary, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nearest_rank(values: &[f64], q: f64) -> f64 {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = ((q / 100.0 * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    #[test]
    fn few_values_give_the_exact_nearest_rank_percentiles() {
        let values: Vec<f64> = (1..=200).map(|i| (i * 37 % 101) as f64 / 7.0).collect();
        let mut sketch = LatencySketch::default();
        values.iter().for_each(|v| sketch.add(*v));
        assert!(sketch.exact());
        for q in [50.0, 90.0, 99.0, 100.0] {
            assert_eq!(sketch.percentile(q), Some(nearest_rank(&values, q)));
        }
    }

    #[test]
    fn many_values_stay_within_the_stated_error_and_merge_as_one() {
        let values: Vec<f64> = (0..20_000).map(|i| 0.01 + ((i * 7919) % 10_007) as f64 * 0.37).collect();
        let mut whole = LatencySketch::default();
        values.iter().for_each(|v| whole.add(*v));
        let mut parts = [LatencySketch::default(), LatencySketch::default(), LatencySketch::default()];
        for (i, v) in values.iter().enumerate() {
            parts[i % 3].add(*v);
        }
        let mut merged = LatencySketch::default();
        parts.iter().for_each(|p| merged.merge(p));
        assert!(!whole.exact() && !merged.exact());
        assert_eq!((merged.count, merged.max), (whole.count, whole.max));
        assert_eq!(merged.bins, whole.bins, "binning does not depend on how the values were split");
        for q in [50.0, 90.0, 99.0] {
            let want = nearest_rank(&values, q);
            let got = merged.percentile(q).expect("values");
            assert!((got - want).abs() <= RELATIVE_ERROR * want + 1e-12, "p{q}: {got} against {want}");
        }
    }

    #[test]
    fn exact_parts_merge_exactly_until_there_are_too_many() {
        let mut a = LatencySketch::default();
        let mut b = LatencySketch::default();
        (0..EXACT_VALUES / 2).for_each(|i| a.add(i as f64));
        (0..EXACT_VALUES / 2).for_each(|i| b.add(i as f64 + 0.5));
        let mut merged = a.clone();
        merged.merge(&b);
        assert!(merged.exact() && merged.values.len() == EXACT_VALUES);
        merged.merge(&b);
        assert!(!merged.exact() && merged.values.is_empty());
        assert_eq!(merged.bins.iter().map(|(_, n)| n).sum::<u64>(), merged.count);
    }

    #[test]
    fn a_summary_survives_its_json_and_parts_add_up() {
        let mut maker = SummaryMaker::default();
        let group = MessageGroup { protocol: Some("p".into()), topic: Some("t".into()), ..Default::default() };
        maker.frame(FrameFigures {
            protocol: Some("p"),
            kind: Some("SEND"),
            conn: Some(1),
            time: Some(2.0),
            group: GroupOf { protocol: Some("p"), topic: Some("t"), ..Default::default() },
            payload_sizes: &[Some(3), None],
            latency: None,
            findings: &[(Some("x"), Some("warning"))],
        });
        let part = maker.take();
        let back = Summary::from_json(&part.to_json()).expect("its own JSON");
        assert_eq!(back, part);
        let mut merged = Summary::default();
        merged.merge(&part);
        merged.merge(&back);
        assert_eq!((merged.frames, merged.connections), (2, 2));
        assert_eq!(merged.messages, vec![(group, MessageFigures { messages: 4, payload: Some(6), frames: 2 })]);
        assert_eq!(merged.problems, vec![((Some("x".into()), Some("warning".into())), 2)]);
    }

    #[test]
    fn a_request_refused_keeps_its_latency_apart_as_stats_does() {
        let mut maker = SummaryMaker::default();
        for (kind, latency) in [("SEND_RECEIPT", 5.0), ("SEND_ERROR", 0.5), ("SEND_ERROR", 0.7)] {
            maker.frame(FrameFigures {
                protocol: Some("pulsar"),
                kind: Some(kind),
                conn: Some(1),
                time: Some(1.0),
                group: GroupOf::default(),
                payload_sizes: &[],
                latency: Some((Some("SEND"), latency)),
                findings: &[],
            });
        }
        let counts: Vec<(Option<String>, u64)> =
            maker.take().latency.into_iter().map(|((_, kind), sketch)| (kind, sketch.count)).collect();
        assert_eq!(counts, [(Some("SEND".into()), 1), (Some("SEND→SEND_ERROR".into()), 2)]);
    }
}
