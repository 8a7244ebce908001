//! Reassembly of chunked messages across frames (MessageMetadata uuid / chunk_id / num_chunks_from_msg), as each
//! end of the connection sees them (`docs/chunks.md` has the facts, from the official clients' code).
//!
//! Towards the broker (SEND) every chunk is stored as it comes: chunks are reassembled per (producer,
//! producer_name, uuid), and a chunk seen before is a duplicate (`chunk.duplicate`), never the start of
//! something new.
//!
//! Towards the client (MESSAGE) the model is the consumer of the C++ client 4.2.0
//! (`ConsumerImpl::processMessageChunk`): one cache per consumer, keyed by uuid, of at most `client_max_pending`
//! messages (maxPendingChunkedMessage), expired on the client's timer after `client_expire_s`
//! (expireTimeOfIncompleteChunkedMessageMs). A duplicate or out-of-order chunk, a chunk with nothing cached for
//! it, a full cache, an expiry, a bad checksum or a failed decompression make the consumer drop the message:
//! the frame then says so (`chunk.dropped_by_client`, with the reason) and no frame claims it `reassembled`.
//!
//! Uncompressed messages are hashed as the chunks arrive, so memory stays small however large the message;
//! compressed ones must be kept until the last chunk (the codec ran over the whole message), bounded by the
//! decompression limit. At most `max_pending` messages are reassembled at once, and the chunks kept for
//! decompression hold at most `max_kept_bytes` in all (`chunk.abandoned` for the oldest beyond either). What
//! is remembered of finished or dropped messages (to tell a duplicate from an orphan) is a few ids, capped too.

use std::cell::Cell;
use std::rc::Rc;

use sha2::{Digest, Sha256};

use crate::analysis::bounded::OrderedMap;
use crate::analysis::{map_get, round3, Ident, TO_CLIENT};
use crate::budget::{MemoryBudget, Reservation};
use crate::codecs::{self, Problem};
use crate::model::Finding;
use crate::protocols::pulsar::payload::decompression_finding;
use crate::protocols::pulsar::problems::PulsarProblem;
use crate::value::{entry, Map, Text, Value};
use crate::{finding, name};

pub const CLIENT_MAX_PENDING: usize = 10; // C++ ConsumerConfiguration maxPendingChunkedMessage, default
pub const CLIENT_EXPIRE_S: f64 = 60.0; // C++ expireTimeOfIncompleteChunkedMessageMs, default (in seconds)
const FRAMES_SHOWN: usize = 20; // frame indexes a finding lists at most

/// Whose chunks: the frame's direction and its producer or consumer id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChunkSource {
    pub direction: String,
    pub actor: Ident,
}

impl ChunkSource {
    fn to_client(&self) -> bool {
        self.direction == TO_CLIENT
    }
}

/// One message in reassembly: its source, the producer name (towards the broker only) and its uuid.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct MessageKey {
    source: ChunkSource,
    producer: Option<Ident>,
    uuid: Ident,
}

/// A chunk's MessageMetadata fields, as the chunk assembler reads them.
pub struct ChunkMetadata<'a> {
    metadata: &'a Map,
}

impl<'a> ChunkMetadata<'a> {
    pub fn new(metadata: &'a Map) -> Self {
        ChunkMetadata { metadata }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        map_get(self.metadata, key)
    }

    fn int(&self, key: &str) -> i64 {
        self.get(key).and_then(Value::as_i64).unwrap_or(0)
    }

    fn uuid(&self) -> Value {
        self.get("uuid").cloned().unwrap_or_else(|| Value::from(String::new()))
    }
}

struct Partial {
    uuid: Value,
    num_chunks: i64,
    total_size: Option<i64>,
    compression: i64,
    uncompressed_size: Option<u64>,
    next_chunk: i64,
    size: u64,
    frames: Vec<u64>,
    sha: Sha256,
    kept: Option<Vec<Vec<u8>>>,
    first: Option<ChunkDigest>, // chunk 0's: tells a repeat from a restart
    lost: bool,                 // a chunk not captured whole: the payload cannot be recovered
    last_time: Option<f64>,     // when its last chunk came (the client's expiry clock)
}

impl Partial {
    fn kept_bytes(&self) -> usize {
        self.kept.as_ref().map_or(0, |kept| kept.iter().map(Vec::len).sum())
    }
}

/// A message in progress, as `pending` shows it.
pub struct PendingMessage {
    pub uuid: Value,
    pub frames: Vec<u64>,
    pub seen: i64,
    pub num_chunks: i64,
}

/// The chunked-message cache of one consumer, as the client keeps it.
#[derive(Default)]
struct ClientCache {
    cache: OrderedMap<Ident, MessageKey>, // uuid -> message, in the order chunk 0 came
    next_fire: Option<f64>,               // the client's expiry timer, started by the consumer's first chunk
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum GoneState {
    Complete,
    Dropped,   // by the client
    Broken,    // cannot be reassembled here
    Abandoned, // this tool's cap
}

/// A message no longer in progress.
struct Gone {
    state: GoneState,
    frame: u64,
    first: Option<ChunkDigest>,
}

/// (length, CRC-32) of a chunk.
type ChunkDigest = (usize, u32);

fn digest(chunk: &[u8]) -> ChunkDigest {
    let mut crc = flate2::Crc::new();
    crc.update(chunk);
    (chunk.len(), crc.sum())
}

/// One chunk as it reaches the assembler.
pub struct Chunk<'a> {
    pub frame: u64,
    pub metadata: ChunkMetadata<'a>,
    pub compression: i64,
    /// Its payload; None when not captured whole.
    pub payload: Option<&'a [u8]>,
    /// When it came (the client's expiry clock; None: no expiry).
    pub time: Option<f64>,
    /// Its checksum failed (the client discards the frame).
    pub bad_checksum: bool,
}

pub struct ChunkAssembler {
    partials: OrderedMap<MessageKey, Partial>,
    consumers: OrderedMap<ChunkSource, ClientCache>,
    gone: OrderedMap<MessageKey, Gone>,
    max_decompressed: u64,
    max_pending: usize,
    max_kept: u64,
    kept_bytes: u64, // bytes of compressed chunks held, over every message in progress
    // the bytes held over every connection's assembler and their cap (`sharing`); None: this one alone
    total: Option<(Rc<Cell<u64>>, u64)>,
    // the same bytes in the run's memory budget, which other holders share (`budgeted`)
    reserved: Option<Reservation>,
    remembered: usize, // finished messages and consumers remembered
    mid_stream: Option<bool>,
    client_max: usize,
    client_expire: f64,
}

impl ChunkAssembler {
    /// `mid_stream`: whether the connection was first seen after its start (None: not known); only when it is
    /// known not to be can a chunk with no chunk 0 before it be called one the client never had.
    pub fn new(
        max_decompressed: u64,
        max_pending: usize,
        max_kept_bytes: Option<u64>,
        mid_stream: Option<bool>,
        client_max_pending: usize,
        client_expire_s: f64,
    ) -> ChunkAssembler {
        ChunkAssembler {
            partials: OrderedMap::new(),
            consumers: OrderedMap::new(),
            gone: OrderedMap::new(),
            max_decompressed,
            max_pending,
            max_kept: max_kept_bytes.unwrap_or(max_decompressed),
            kept_bytes: 0,
            total: None,
            reserved: None,
            remembered: (4 * max_pending).max(64),
            mid_stream,
            client_max: client_max_pending,
            client_expire: client_expire_s,
        }
    }

    /// Count the chunks held in `held` too, shared with the other connections' assemblers: past `limit` in
    /// all, the connection whose chunk passes it gives up its oldest message (`chunk.abandoned`, `total_bytes`).
    pub fn sharing(mut self, held: Rc<Cell<u64>>, limit: u64) -> ChunkAssembler {
        self.total = Some((held, limit));
        self
    }

    /// Reserve the chunks held from `budget` too: when it is over, the connection whose chunk passes it gives
    /// up its oldest message (`chunk.abandoned`, `memory_budget`).
    pub fn budgeted(mut self, budget: &MemoryBudget) -> ChunkAssembler {
        self.reserved = Some(budget.reservation());
        self
    }

    pub fn kept_bytes(&self) -> u64 {
        self.kept_bytes
    }

    fn hold(&mut self, bytes: u64) {
        self.kept_bytes += bytes;
        if let Some((held, _)) = &self.total {
            held.set(held.get() + bytes);
        }
        if let Some(reserved) = &mut self.reserved {
            reserved.grow(bytes);
        }
    }

    fn release(&mut self, bytes: u64) {
        let bytes = bytes.min(self.kept_bytes);
        self.kept_bytes -= bytes;
        if let Some((held, _)) = &self.total {
            held.set(held.get().saturating_sub(bytes));
        }
        if let Some(reserved) = &mut self.reserved {
            reserved.shrink(bytes);
        }
    }

    /// The cap passed, if any: this connection's (`bytes`), every connection's (`total_bytes`) or the run's
    /// memory budget (`memory_budget`).
    fn over_cap(&self) -> Option<(Text, Value)> {
        if self.kept_bytes > self.max_kept {
            return Some(entry(name!("bytes"), self.max_kept));
        }
        if let Some((held, limit)) = &self.total {
            if held.get() > *limit {
                return Some(entry(name!("total_bytes"), *limit));
            }
        }
        // the budget last: named only when the assembler's own caps were not passed
        match &self.reserved {
            Some(reserved) if self.kept_bytes > 0 && reserved.is_over() => {
                Some(entry(name!("memory_budget"), reserved.budget().limit()))
            }
            _ => None,
        }
    }

    /// Feed one chunk; returns the reassembled message (uuid, payload_size, payload_sha256, chunks: frame
    /// indexes) when this was its last chunk and the receiver gets the message; findings go to `findings`.
    pub fn add(&mut self, source: &ChunkSource, chunk: &Chunk, findings: &mut Vec<Finding>) -> Option<Map> {
        if source.to_client() {
            self.delivered(source, chunk, findings)
        } else {
            self.published(source, chunk, findings)
        }
    }

    /// Messages still being reassembled (not those whose payload is already known to be lost).
    pub fn pending(&self) -> Vec<PendingMessage> {
        self.partials
            .values()
            .filter(|p| !p.lost)
            .map(|p| PendingMessage {
                uuid: p.uuid.clone(),
                frames: p.frames.clone(),
                seen: p.next_chunk,
                num_chunks: p.num_chunks,
            })
            .collect()
    }

    // ------------------------------------------------------------------------------ towards the broker

    fn published(&mut self, source: &ChunkSource, chunk: &Chunk, findings: &mut Vec<Finding>) -> Option<Map> {
        let md = &chunk.metadata;
        let (cid, n, uuid) = (md.int("chunk_id"), md.int("num_chunks_from_msg"), md.uuid());
        let producer = md.get("producer_name").map_or_else(|| Ident::Str(String::new()), |v| Ident::of(Some(v)));
        let full = MessageKey { source: source.clone(), producer: Some(producer), uuid: Ident::of(Some(&uuid)) };
        match self.partials.get(&full).map(|p| (p.next_chunk, p.first)) {
            None => {
                let gone = self.gone.get(&full).map(|g| (g.state, g.first));
                if cid == 0 {
                    if let (Some((GoneState::Complete, first)), Some(payload)) = (gone, chunk.payload) {
                        if first == Some(digest(payload)) {
                            findings.push(finding!(PulsarProblem::ChunkDuplicate, "chunk_id" => cid, "uuid" => uuid));
                            return None;
                        }
                    }
                    self.start(&full, chunk, findings);
                } else if gone.is_none() {
                    findings.push(
                        finding!(PulsarProblem::ChunkOrphan, "chunk_id" => cid, "num_chunks" => n, "uuid" => uuid),
                    );
                    return None;
                } else {
                    if gone.is_some_and(|(state, _)| state == GoneState::Complete) {
                        findings.push(finding!(PulsarProblem::ChunkDuplicate, "chunk_id" => cid, "uuid" => uuid));
                    }
                    return None; // a message already said to be broken or abandoned: nothing more to say
                }
            }
            Some((next_chunk, first)) if cid < next_chunk => {
                let restarted = cid == 0 && first.is_some() && chunk.payload.is_some_and(|p| Some(digest(p)) != first);
                if !restarted {
                    findings.push(finding!(PulsarProblem::ChunkDuplicate, "chunk_id" => cid, "uuid" => uuid));
                    return None;
                }
                // chunk 0 again with other bytes: the producer started the message over
                let num_chunks = self.partials.get(&full).map_or(0, |p| p.num_chunks);
                findings.push(finding!(PulsarProblem::ChunkRestarted, "uuid" => uuid, "seen" => next_chunk,
                             "num_chunks" => num_chunks));
                self.forget(&full);
                self.start(&full, chunk, findings);
            }
            Some((next_chunk, _)) if cid > next_chunk => {
                self.forget(&full);
                self.remember(&full, GoneState::Broken, chunk.frame, None);
                findings.push(
                    finding!(PulsarProblem::ChunkMissing, "chunk_id" => cid, "uuid" => uuid, "expected" => next_chunk),
                );
                return None;
            }
            Some(_) => {}
        }
        if !self.partials.contains_key(&full) || !self.append(&full, cid, chunk, findings) {
            return None;
        }
        let part = self.forget(&full)?;
        self.remember(&full, GoneState::Complete, chunk.frame, part.first);
        Some(self.complete(part, findings).0)
    }

    // ------------------------------------------------------------------------------ towards the client

    fn delivered(&mut self, source: &ChunkSource, chunk: &Chunk, findings: &mut Vec<Finding>) -> Option<Map> {
        let md = &chunk.metadata;
        let (cid, n, uuid) = (md.int("chunk_id"), md.int("num_chunks_from_msg"), md.uuid());
        if n <= 1 || md.get("num_messages_in_batch").is_some() {
            return None; // the client takes it for a whole message, not a chunk (isChunkedMessage)
        }
        if chunk.bad_checksum {
            // discarded before any chunk handling: the cache is left as it was, this chunk never reaches it
            findings.push(finding!(PulsarProblem::ChunkDroppedByClient, "reason" => name!("checksum"), "uuid" => uuid,
                                   "chunk_id" => cid, "num_chunks" => n));
            return None;
        }
        self.consumer(source);
        if let (Some(time), Some(false)) = (chunk.time, self.mid_stream) {
            self.expire(source, time, chunk.frame, findings);
        }
        let uuid_key = Ident::of(Some(&uuid));
        let full = MessageKey { source: source.clone(), producer: None, uuid: uuid_key.clone() };
        match self.partials.get(&full).map(|p| (p.next_chunk, p.lost)) {
            None => {
                if cid != 0 {
                    self.uncached(&full, cid, n, uuid, findings);
                    return None;
                }
                while let Some(oldest) = self.cache_to_drop(source) {
                    let limit = self.client_max;
                    self.client_drop(
                        &oldest,
                        name!("cache_full"),
                        chunk.frame,
                        findings,
                        None,
                        vec![entry(name!("limit"), limit)],
                    );
                }
                self.start(&full, chunk, findings);
                if !self.partials.contains_key(&full) {
                    return None; // abandoned at once (max_pending)
                }
                if let Some(consumer) = self.consumers.get_mut(source) {
                    consumer.cache.insert(uuid_key, full.clone());
                }
            }
            Some((next_chunk, lost)) if cid != next_chunk => {
                if cid > next_chunk && lost {
                    // frames of this message were lost from the capture: the client may have had the chunks between
                    self.forget(&full);
                    self.remember(&full, GoneState::Broken, chunk.frame, None);
                    findings.push(finding!(PulsarProblem::ChunkMissing, "chunk_id" => cid, "uuid" => uuid,
                                       "expected" => next_chunk));
                    return None;
                }
                if cid < next_chunk {
                    findings.push(finding!(PulsarProblem::ChunkDuplicate, "chunk_id" => cid, "uuid" => uuid));
                }
                let reason = if cid < next_chunk { name!("duplicate") } else { name!("out_of_order") };
                self.client_drop(
                    &full,
                    reason,
                    chunk.frame,
                    findings,
                    Some(cid),
                    vec![entry(name!("expected"), next_chunk)],
                );
                return None;
            }
            Some(_) => {}
        }
        if !self.append(&full, cid, chunk, findings) {
            return None;
        }
        let part = self.forget(&full)?;
        let (num_chunks, seen, frames, first) = (part.num_chunks, part.frames.len(), shown(&part.frames), part.first);
        let (whole, client_fails) = self.complete(part, findings);
        if client_fails {
            self.remember(&full, GoneState::Dropped, chunk.frame, None);
            findings.push(
                finding!(PulsarProblem::ChunkDroppedByClient, "reason" => name!("decompression"), "uuid" => uuid,
                                   "chunk_id" => cid, "num_chunks" => num_chunks, "seen" => seen, "frames" => frames),
            );
            return None;
        }
        self.remember(&full, GoneState::Complete, chunk.frame, first);
        Some(whole)
    }

    /// The oldest message of a full client cache, which the client drops before caching a new one.
    fn cache_to_drop(&self, source: &ChunkSource) -> Option<MessageKey> {
        let consumer = self.consumers.get(source)?;
        if consumer.cache.is_empty() || consumer.cache.len() < self.client_max {
            return None;
        }
        consumer.cache.values().next().cloned()
    }

    /// A chunk after the first with nothing cached for its message: the client discards it.
    fn uncached(&self, full: &MessageKey, cid: i64, n: i64, uuid: Value, findings: &mut Vec<Finding>) {
        match self.gone.get(full) {
            None if self.mid_stream == Some(false) => {
                findings
                    .push(finding!(PulsarProblem::ChunkDroppedByClient, "reason" => name!("uncached"), "uuid" => uuid,
                                       "chunk_id" => cid, "num_chunks" => n));
            }
            None => {
                // its chunk 0 may have come before the capture did
                findings
                    .push(finding!(PulsarProblem::ChunkOrphan, "chunk_id" => cid, "num_chunks" => n, "uuid" => uuid));
            }
            Some(gone) if gone.state == GoneState::Complete => {
                // a chunk of a message the client already has: discarded, and nothing is lost
                findings.push(finding!(PulsarProblem::ChunkDuplicate, "chunk_id" => cid, "uuid" => uuid));
            }
            Some(gone) if gone.state == GoneState::Dropped => {
                findings
                    .push(finding!(PulsarProblem::ChunkDroppedByClient, "reason" => name!("uncached"), "uuid" => uuid,
                                       "chunk_id" => cid, "num_chunks" => n, "dropped_at" => gone.frame));
            }
            // broken or abandoned: what the client holds is not known here, and the message was reported already
            Some(_) => {}
        }
    }

    /// The client drops the message in progress at `full`; `chunk_id` is this frame's when the drop is about
    /// it, `more` says why.
    fn client_drop(
        &mut self,
        full: &MessageKey,
        reason: &'static crate::value::Name,
        frame: u64,
        findings: &mut Vec<Finding>,
        chunk_id: Option<i64>,
        more: Map,
    ) {
        let Some(part) = self.forget(full) else { return };
        self.remember(full, GoneState::Dropped, frame, None);
        let mut params = vec![entry(name!("reason"), reason), entry(name!("uuid"), part.uuid.clone())];
        if let Some(cid) = chunk_id {
            params.push(entry(name!("chunk_id"), cid));
        }
        params.extend([
            entry(name!("num_chunks"), part.num_chunks),
            entry(name!("seen"), part.frames.len()),
            entry(name!("frames"), shown(&part.frames)),
        ]);
        params.extend(more);
        findings.push(Finding { id: PulsarProblem::ChunkDroppedByClient.name(), params });
    }

    /// Run the client's expiry timer up to `now`: it fires every `client_expire_s` from the consumer's first
    /// chunk and drops messages from the oldest while their last chunk is older than that.
    fn expire(&mut self, source: &ChunkSource, now: f64, frame: u64, findings: &mut Vec<Finding>) {
        let period = self.client_expire;
        if period <= 0.0 {
            return;
        }
        let Some(consumer) = self.consumers.get_mut(source) else { return };
        let Some(mut fire) = consumer.next_fire else {
            consumer.next_fire = Some(now + period);
            return;
        };
        while fire < now {
            let cached: Vec<MessageKey> = match self.consumers.get(source) {
                Some(consumer) if !consumer.cache.is_empty() => consumer.cache.values().cloned().collect(),
                _ => {
                    let next = fire + ((now - fire) / period).ceil() * period;
                    if let Some(consumer) = self.consumers.get_mut(source) {
                        consumer.next_fire = Some(next);
                    }
                    return;
                }
            };
            for full in cached {
                let last_time = self.partials.get(&full).and_then(|p| p.last_time);
                let Some(last_time) = last_time.filter(|last| fire > last + period) else { break };
                self.client_drop(
                    &full,
                    name!("expired"),
                    frame,
                    findings,
                    None,
                    vec![
                        entry(name!("idle_s"), Value::Float(round3(fire - last_time))),
                        entry(name!("expire_s"), Value::Float(period)),
                    ],
                );
            }
            fire += period;
            if let Some(consumer) = self.consumers.get_mut(source) {
                consumer.next_fire = Some(fire);
            }
        }
    }

    /// The consumer's cache, made at its first chunk; beyond `remembered` consumers an idle one is forgotten.
    fn consumer(&mut self, source: &ChunkSource) {
        if self.consumers.contains_key(source) {
            return;
        }
        self.consumers.insert(source.clone(), ClientCache::default());
        if self.consumers.len() > self.remembered {
            let idle = self.consumers.iter().find(|(k, c)| c.cache.is_empty() && *k != source).map(|(k, _)| k.clone());
            if let Some(idle) = idle {
                self.consumers.remove(&idle);
            }
        }
    }

    // ------------------------------------------------------------------------------------ both directions

    fn start(&mut self, full: &MessageKey, chunk: &Chunk, findings: &mut Vec<Finding>) {
        let md = &chunk.metadata;
        let total_size = md.get("total_chunk_msg_size").and_then(Value::as_i64);
        let mut part = Partial {
            uuid: md.uuid(),
            num_chunks: md.int("num_chunks_from_msg"),
            total_size,
            compression: chunk.compression,
            uncompressed_size: md.get("uncompressed_size").and_then(Value::as_u64),
            next_chunk: 0,
            size: 0,
            frames: Vec::new(),
            sha: Sha256::new(),
            kept: None,
            first: None,
            lost: false,
            last_time: None,
        };
        if part.compression != 0 && total_size.unwrap_or(0) <= self.max_decompressed as i64 {
            part.kept = Some(Vec::new());
        }
        self.gone.remove(full);
        self.partials.insert(full.clone(), part);
        if self.partials.len() > self.max_pending {
            let limit = self.max_pending;
            self.abandon_oldest(findings, entry(name!("limit"), limit));
        }
    }

    /// Add the next chunk; whether the message is now complete.
    fn append(&mut self, full: &MessageKey, cid: i64, chunk: &Chunk, findings: &mut Vec<Finding>) -> bool {
        let Some(part) = self.partials.get_mut(full) else { return false };
        part.next_chunk = cid + 1;
        part.frames.push(chunk.frame);
        part.last_time = chunk.time;
        if cid == 0 {
            if let Some(payload) = chunk.payload {
                part.first = Some(digest(payload));
            }
        }
        match chunk.payload {
            None => {
                findings.push(finding!(PulsarProblem::ChunkLost, "chunk_id" => cid, "uuid" => part.uuid.clone()));
                part.lost = true;
                // let go of the compressed chunks held: they can never be decompressed
                let released = part.kept_bytes() as u64;
                part.kept = None;
                self.release(released);
            }
            Some(payload) if !part.lost => {
                part.size += payload.len() as u64;
                match part.kept.as_mut() {
                    Some(kept) => {
                        kept.push(payload.to_vec());
                        self.hold(payload.len() as u64);
                        while !self.partials.is_empty() {
                            let Some(why) = self.over_cap() else { break };
                            self.abandon_oldest(findings, why);
                        }
                        if !self.partials.contains_key(full) {
                            return false; // this very message was the oldest
                        }
                    }
                    None => part.sha.update(payload),
                }
            }
            Some(_) => {}
        }
        self.partials.get(full).is_some_and(|p| p.next_chunk >= p.num_chunks)
    }

    /// No longer in progress (the chunks held stay with the returned part, for `complete`).
    fn forget(&mut self, full: &MessageKey) -> Option<Partial> {
        let part = self.partials.remove(full)?;
        self.release(part.kept_bytes() as u64);
        if full.source.to_client() {
            if let Some(consumer) = self.consumers.get_mut(&full.source) {
                consumer.cache.remove(&full.uuid);
            }
        }
        Some(part)
    }

    fn remember(&mut self, full: &MessageKey, state: GoneState, frame: u64, first: Option<ChunkDigest>) {
        self.gone.remove(full);
        self.gone.insert(full.clone(), Gone { state, frame, first });
        if self.gone.len() > self.remembered {
            self.gone.pop_oldest();
        }
    }

    fn abandon_oldest(&mut self, findings: &mut Vec<Finding>, why: (Text, Value)) {
        let Some(full) = self.partials.keys().next().cloned() else { return };
        let Some(oldest) = self.forget(&full) else { return };
        self.remember(&full, GoneState::Abandoned, oldest.frames.last().copied().unwrap_or(0), None);
        findings.push(Finding {
            id: PulsarProblem::ChunkAbandoned.name(),
            params: vec![
                why,
                entry(name!("uuid"), oldest.uuid),
                entry(name!("seen"), oldest.next_chunk),
                entry(name!("num_chunks"), oldest.num_chunks),
            ],
        });
    }

    /// The reassembled message, and whether the client's decompression would fail on it too.
    fn complete(&self, mut part: Partial, findings: &mut Vec<Finding>) -> (Map, bool) {
        let lost = |part: Partial| {
            vec![
                entry(name!("uuid"), part.uuid),
                entry(name!("payload_size"), Value::Null),
                entry(name!("payload_sha256"), Value::Null),
                entry(name!("chunks"), frames_value(&part.frames)),
            ]
        };
        if part.lost {
            return (lost(part), false);
        }
        if let Some(total) = part.total_size.filter(|total| part.size as i128 != *total as i128) {
            findings.push(finding!(PulsarProblem::ChunkSizeMismatch, "uuid" => part.uuid.clone(), "size" => part.size,
                         "total" => total));
        }
        let mut size = part.size;
        if let Some(kept) = part.kept.take() {
            let joined = kept.concat();
            let result = codecs::decompress(part.compression, &joined, part.uncompressed_size, self.max_decompressed);
            let client_fails = result.problem.as_ref().is_some_and(client_fails_too);
            if let Some(problem) = &result.problem {
                findings.push(decompression_finding(problem));
            }
            let Some(data) = result.data else { return (lost(part), client_fails) };
            part.sha.update(&data);
            size = data.len() as u64;
        } else if part.compression != 0 {
            findings.push(finding!(PulsarProblem::ChunkTooLarge, "uuid" => part.uuid.clone()));
            return (lost(part), false);
        }
        let sha = part.sha.finalize();
        let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
        (
            vec![
                entry(name!("uuid"), part.uuid),
                entry(name!("payload_size"), size),
                entry(name!("payload_sha256"), hex),
                entry(name!("chunks"), frames_value(&part.frames)),
            ],
            false,
        )
    }
}

/// payload.decompression cases in which the client's codec fails as well (not this tool's own limits, and not
/// an unknown codec, which the C++ client passes through as if uncompressed).
impl Drop for ChunkAssembler {
    /// A connection forgotten with messages in progress gives their bytes back to every connection's count.
    fn drop(&mut self) {
        self.release(self.kept_bytes);
    }
}

fn client_fails_too(problem: &Problem) -> bool {
    matches!(problem, Problem::Failed { .. } | Problem::BombDeclared { .. })
}

fn frames_value(frames: &[u64]) -> Value {
    Value::List(frames.iter().map(|&f| Value::from(f)).collect())
}

fn shown(frames: &[u64]) -> Value {
    frames_value(&frames[..frames.len().min(FRAMES_SHOWN)])
}
