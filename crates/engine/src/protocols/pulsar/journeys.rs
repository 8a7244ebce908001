//! The open message journeys of a capture, stored compactly: one message's life from its SEND through its
//! SEND_RECEIPT (which names its ledger and entry) to every MESSAGE that delivers it and every ACK of those
//! deliveries. `dissector/analysis/journeys.py` reads the records and calls this store with their scalars,
//! through the binding and the generic face `crate::journeys::JourneyTracker` (`Protocol::journeys`); the
//! store hands each journey back when it closes (at the end, or as the oldest when too many are open).
//!
//! Memory is bounded as the Python tracker bounded it (the same caps, the same order): at most `max_open`
//! journeys (beyond: the oldest opened is closed and counted), at most `max_milestones` deliveries and acks kept
//! over all of them and `MAX_MILESTONES_PER_JOURNEY` for one (beyond: counted), `MAX_PENDING_SENDS` SENDs
//! waiting for their receipt and `MAX_DELIVERY_MEMORY` MESSAGE frames an ACK can still be matched to (the
//! oldest forgotten). Names (topics, producers, consumers, subscriptions, ack types) are held once each and
//! referred to by a u32, freed when nothing refers to them; numbers are fixed-width fields (which of them are
//! absent in a byte of flags); a journey's deliveries and acks are linked lists in two shared pools; everything
//! grows a block at a time (no reallocation holds a table twice). 112 bytes an open journey (and about 10 for
//! its place in the key index), 32 a delivery (its consumer held once for all of them) and 48 an ack, against
//! about 500 and 150 as Python objects.
//! Connection numbers are held as u32 and a SEND's num_messages as i32 (its type on the wire).

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::rc::Rc;

use hashbrown::HashTable;

pub use crate::journeys::{AckFields, MessageFields, ReceiptInfo, Receipted, SendFields};
use crate::journeys::{
    AckedEntries, ClosedJourney, JourneyAck, JourneyCounts, JourneyDelivery, JourneyHead, JourneySend, JourneyTracker,
};
use crate::FastMap;

pub const MAX_OPEN_JOURNEYS: usize = 300_000;
pub const MAX_PENDING_SENDS: usize = 100_000;
pub const MAX_DELIVERY_MEMORY: usize = 200_000;
pub const MAX_MILESTONES_TOTAL: usize = 1_000_000;
pub const MAX_MILESTONES_PER_JOURNEY: u16 = 1_000;

/// A name held by `Names`; `NO_NAME` for an absent one (None in the records).
pub type NameId = u32;
pub const NO_NAME: NameId = u32::MAX;
/// The end of a pool's linked list.
const END: u32 = u32::MAX;
/// Items a block holds (`Blocks`, `Pool`).
const BLOCK: usize = 4096;

/// Names held once each, with the number of fields that refer to each (freed, its id reused, at zero).
#[derive(Default)]
pub struct Names {
    ids: FastMap<Rc<str>, NameId>,
    slots: Vec<(Option<Rc<str>>, u32)>,
    free: Vec<NameId>,
}

impl Names {
    /// The id of `text`, one more reference to it.
    pub fn acquire(&mut self, text: Option<&str>) -> NameId {
        let Some(text) = text else { return NO_NAME };
        if let Some(&id) = self.ids.get(text) {
            self.slots[id as usize].1 += 1;
            return id;
        }
        let shared: Rc<str> = Rc::from(text);
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = (Some(shared.clone()), 1);
                id
            }
            None => {
                self.slots.push((Some(shared.clone()), 1));
                (self.slots.len() - 1) as NameId
            }
        };
        self.ids.insert(shared, id);
        id
    }

    /// The id of `text` if some field holds it (no reference taken); `Some(NO_NAME)` for None.
    pub fn find(&self, text: Option<&str>) -> Option<NameId> {
        match text {
            None => Some(NO_NAME),
            Some(text) => self.ids.get(text).copied(),
        }
    }

    pub fn retain(&mut self, id: NameId) {
        if id != NO_NAME {
            self.slots[id as usize].1 += 1;
        }
    }

    pub fn release(&mut self, id: NameId) {
        if id == NO_NAME {
            return;
        }
        let slot = &mut self.slots[id as usize];
        slot.1 -= 1;
        if slot.1 == 0 {
            if let Some(text) = slot.0.take() {
                self.ids.remove(&text);
            }
            self.free.push(id);
        }
    }

    pub fn get(&self, id: NameId) -> Option<&str> {
        if id == NO_NAME {
            return None;
        }
        self.slots[id as usize].0.as_deref()
    }

    /// Names held now.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// A journey is keyed by (topic, ledger id, entry id): ledger ids are per topic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct JourneyKey {
    pub ledger: u64,
    pub entry: u64,
    pub topic: NameId,
}

/// A SEND (of a journey, or waiting for its receipt).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SendInfo {
    pub index: u64,
    pub time: f64,
    pub conn: u32,
    pub producer_id: Option<u64>,
    pub sequence_id: Option<u64>,
    /// the command's num_messages, 1 when absent or 0
    pub messages: i32,
    pub producer: NameId,
    pub topic: NameId,
}

/// A SendInfo in 48 bytes, the presence of its ids in the holder's flags.
#[derive(Clone, Copy, Debug, Default)]
struct PackedSend {
    index: u64,
    time: f64,
    producer_id: u64,
    sequence_id: u64,
    conn: u32,
    messages: i32,
    producer: NameId,
    topic: NameId,
}

const HAS_SEND: u8 = 1;
const HAS_RECEIPT: u8 = 2;
const HAS_PRODUCER_ID: u8 = 4;
const HAS_SEQUENCE_ID: u8 = 8;
const HAS_CONSUMER_ID: u8 = 1;

impl PackedSend {
    fn pack(send: &SendInfo) -> (PackedSend, u8) {
        let flags = if send.producer_id.is_some() { HAS_PRODUCER_ID } else { 0 }
            | if send.sequence_id.is_some() { HAS_SEQUENCE_ID } else { 0 };
        let packed = PackedSend {
            index: send.index,
            time: send.time,
            producer_id: send.producer_id.unwrap_or(0),
            sequence_id: send.sequence_id.unwrap_or(0),
            conn: send.conn,
            messages: send.messages,
            producer: send.producer,
            topic: send.topic,
        };
        (packed, flags)
    }

    fn unpack(&self, flags: u8) -> SendInfo {
        SendInfo {
            index: self.index,
            time: self.time,
            conn: self.conn,
            producer_id: (flags & HAS_PRODUCER_ID != 0).then_some(self.producer_id),
            sequence_id: (flags & HAS_SEQUENCE_ID != 0).then_some(self.sequence_id),
            messages: self.messages,
            producer: self.producer,
            topic: self.topic,
        }
    }
}

/// The consumer a MESSAGE went to: held once for all its deliveries (`Consumers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConsumerInfo {
    consumer_id: u64,
    pub conn: u32,
    pub consumer: NameId,
    pub subscription: NameId,
    flags: u8,
}

impl ConsumerInfo {
    pub fn consumer_id(&self) -> Option<u64> {
        (self.flags & HAS_CONSUMER_ID != 0).then_some(self.consumer_id)
    }
}

/// The consumers the kept deliveries went to, each held once with the number of deliveries that refer to it
/// (freed, its id reused, at zero); each holds a reference to its names.
#[derive(Default)]
struct Consumers {
    ids: FastMap<ConsumerInfo, u32>,
    slots: Vec<(ConsumerInfo, u32)>,
    free: Vec<u32>,
}

impl Consumers {
    /// The id of `info`, one more reference to it; whether it is new (then it holds the names' references).
    fn acquire(&mut self, info: ConsumerInfo) -> (u32, bool) {
        if let Some(&id) = self.ids.get(&info) {
            self.slots[id as usize].1 += 1;
            return (id, false);
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = (info, 1);
                id
            }
            None => {
                self.slots.push((info, 1));
                (self.slots.len() - 1) as u32
            }
        };
        self.ids.insert(info, id);
        (id, true)
    }

    /// One reference less; the consumer when it is freed (its names to release).
    fn release(&mut self, id: u32) -> Option<ConsumerInfo> {
        let slot = &mut self.slots[id as usize];
        slot.1 -= 1;
        if slot.1 > 0 {
            return None;
        }
        let info = slot.0;
        self.ids.remove(&info);
        self.free.push(id);
        Some(info)
    }

    fn get(&self, id: u32) -> &ConsumerInfo {
        &self.slots[id as usize].0
    }
}

/// One MESSAGE frame delivering the journey's entry (on the journey's topic).
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    pub index: u64,
    pub time: f64,
    /// its `ConsumerInfo` (`JourneyStore::consumer`)
    pub consumer: u32,
    pub redelivery_count: u32,
    next: u32,
}

/// One ACK (or a validation_error's discard) of one of the journey's deliveries.
#[derive(Clone, Copy, Debug)]
pub struct Ack {
    pub index: u64,
    pub time: f64,
    /// the MESSAGE frame acknowledged
    pub delivery: u64,
    pub conn: u32,
    pub ack_type: NameId,
    /// the validation_error: the client dropped the delivery unread
    pub discarded: NameId,
    /// the batch entries acknowledged (`JourneyStore::ack_set`), `NO_ACK_SET` for the whole entry
    pub batches: u32,
    next: u32,
}

pub const NO_ACK_SET: u32 = u32::MAX;

/// A batch-index ack's entries: Pulsar's ack_set (a bitset of the entries still NOT acknowledged, 64-bit words,
/// the first word first) over `width` entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckSet {
    pub words: Box<[u64]>,
    pub width: u64,
}

impl AckSet {
    pub fn covers(&self, entry: u64) -> bool {
        let word = self.words.get((entry / 64) as usize).copied().unwrap_or(0);
        entry < self.width && word >> (entry % 64) & 1 == 0
    }
}

/// A queue in blocks of `BLOCK` items: it grows a block at a time (no reallocation copies the whole) and
/// frees a block once its last item left at the front.
struct Blocks<T> {
    blocks: VecDeque<Vec<T>>,
    /// items already taken from the first block
    taken: usize,
    len: usize,
}

impl<T> Default for Blocks<T> {
    fn default() -> Self {
        Blocks { blocks: VecDeque::new(), taken: 0, len: 0 }
    }
}

impl<T: Copy> Blocks<T> {
    fn push_back(&mut self, item: T) {
        if self.blocks.back().is_none_or(|block| block.len() == BLOCK) {
            self.blocks.push_back(Vec::with_capacity(BLOCK));
        }
        self.blocks.back_mut().expect("a block").push(item);
        self.len += 1;
    }

    fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.blocks[0][self.taken];
        self.taken += 1;
        self.len -= 1;
        if self.taken == BLOCK {
            self.blocks.pop_front();
            self.taken = 0;
        }
        Some(item)
    }

    fn get(&self, at: usize) -> Option<&T> {
        if at >= self.len {
            return None;
        }
        let at = self.taken + at;
        Some(&self.blocks[at / BLOCK][at % BLOCK])
    }

    fn get_mut(&mut self, at: usize) -> &mut T {
        assert!(at < self.len);
        let at = self.taken + at;
        &mut self.blocks[at / BLOCK][at % BLOCK]
    }

    fn back(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|at| self.get(at))
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// An item of a pool's linked lists.
trait Linked: Copy {
    fn next(&self) -> u32;
    fn set_next(&mut self, next: u32);
}

impl Linked for Delivery {
    fn next(&self) -> u32 {
        self.next
    }
    fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

impl Linked for Ack {
    fn next(&self) -> u32 {
        self.next
    }
    fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

/// Items in blocks, each in a singly linked list (a journey's deliveries, or its acks, newest first); freed
/// places are linked in a list of their own and reused.
struct Pool<T> {
    blocks: Vec<Vec<T>>,
    free: u32,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool { blocks: Vec::new(), free: END }
    }
}

/// A journey's list in a pool: its newest item, and how many.
#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    len: u16,
}

impl Default for List {
    fn default() -> Self {
        List { head: END, len: 0 }
    }
}

impl<T: Linked> Pool<T> {
    fn at(&self, at: u32) -> &T {
        &self.blocks[at as usize / BLOCK][at as usize % BLOCK]
    }

    fn at_mut(&mut self, at: u32) -> &mut T {
        &mut self.blocks[at as usize / BLOCK][at as usize % BLOCK]
    }

    fn push(&mut self, head: &mut u32, mut item: T) {
        item.set_next(*head);
        let at = if self.free != END {
            let at = self.free;
            self.free = self.at(at).next();
            *self.at_mut(at) = item;
            at
        } else {
            if self.blocks.last().is_none_or(|block| block.len() == BLOCK) {
                self.blocks.push(Vec::with_capacity(BLOCK));
            }
            let last = self.blocks.len() - 1;
            self.blocks[last].push(item);
            (last * BLOCK + self.blocks[last].len() - 1) as u32
        };
        *head = at;
    }

    /// The list's items, oldest first.
    fn items(&self, list: List) -> Vec<&T> {
        let mut items = Vec::with_capacity(list.len as usize);
        let mut at = list.head;
        while at != END {
            let item = self.at(at);
            items.push(item);
            at = item.next();
        }
        items.reverse();
        items
    }

    /// Frees the list's places, giving each item to `drop` first.
    fn free_list(&mut self, list: List, mut drop: impl FnMut(&T)) {
        let mut at = list.head;
        while at != END {
            let item = *self.at(at);
            drop(&item);
            let free = self.free;
            self.at_mut(at).set_next(free);
            self.free = at;
            at = item.next();
        }
    }
}

/// One open journey in 112 bytes; its deliveries and acks live in the store's pools.
#[derive(Clone, Copy, Debug)]
pub struct Journey {
    ledger: u64,
    entry: u64,
    send: PackedSend,
    receipt_index: u64,
    receipt_time: f64,
    topic: NameId,
    receipt_conn: u32,
    deliveries: u32,
    acks: u32,
    deliveries_len: u16,
    acks_len: u16,
    pub deliveries_dropped: u32,
    pub acks_dropped: u32,
    flags: u8,
}

impl Journey {
    fn new(key: JourneyKey) -> Self {
        Journey {
            ledger: key.ledger,
            entry: key.entry,
            send: PackedSend::default(),
            receipt_index: 0,
            receipt_time: 0.0,
            topic: key.topic,
            receipt_conn: 0,
            deliveries: END,
            acks: END,
            deliveries_len: 0,
            acks_len: 0,
            deliveries_dropped: 0,
            acks_dropped: 0,
            flags: 0,
        }
    }

    pub fn key(&self) -> JourneyKey {
        JourneyKey { ledger: self.ledger, entry: self.entry, topic: self.topic }
    }

    pub fn send(&self) -> Option<SendInfo> {
        (self.flags & HAS_SEND != 0).then(|| self.send.unpack(self.flags))
    }

    pub fn receipt(&self) -> Option<ReceiptInfo> {
        (self.flags & HAS_RECEIPT != 0).then_some(ReceiptInfo {
            index: self.receipt_index,
            time: self.receipt_time,
            conn: self.receipt_conn,
        })
    }

    fn set_send(&mut self, send: &SendInfo) {
        let (packed, flags) = PackedSend::pack(send);
        self.send = packed;
        self.flags |= HAS_SEND | flags;
    }

    fn set_receipt(&mut self, receipt: ReceiptInfo) {
        (self.receipt_index, self.receipt_time, self.receipt_conn) = (receipt.index, receipt.time, receipt.conn);
        self.flags |= HAS_RECEIPT;
    }

    fn deliveries_list(&self) -> List {
        List { head: self.deliveries, len: self.deliveries_len }
    }

    fn acks_list(&self) -> List {
        List { head: self.acks, len: self.acks_len }
    }
}

/// A MESSAGE frame remembered for the ACKs: its journey's key and its batch size (`NO_SIZE`: none).
#[derive(Clone, Copy)]
struct Remembered {
    key: JourneyKey,
    batch_size: u64,
}

const NO_SIZE: u64 = u64::MAX;

impl Remembered {
    fn batch_size(&self) -> Option<u64> {
        (self.batch_size != NO_SIZE).then_some(self.batch_size)
    }
}

/// The last `limit` MESSAGE frames by index (frames come in index order: a binary search finds one); a frame
/// that comes out of order waits in a map of its own, as bounded.
struct DeliveryMemory {
    limit: usize,
    ordered: Blocks<(u64, Remembered)>,
    out_of_order: FastMap<u64, Remembered>,
    out_of_order_order: VecDeque<u64>,
}

impl DeliveryMemory {
    fn new(limit: usize) -> Self {
        DeliveryMemory {
            limit,
            ordered: Blocks::default(),
            out_of_order: FastMap::default(),
            out_of_order_order: VecDeque::new(),
        }
    }

    /// Remembers a frame; the ones forgotten go to `forgotten` (their names to release).
    fn add(&mut self, index: u64, remembered: Remembered, forgotten: &mut Vec<Remembered>) {
        if self.ordered.back().is_some_and(|&(last, _)| index <= last) || index >= 1 << 63 {
            if let Some(old) = self.out_of_order.insert(index, remembered) {
                forgotten.push(old); // the same index again: its place in the order is kept
            } else {
                self.out_of_order_order.push_back(index);
            }
            if self.out_of_order.len() > self.limit {
                while let Some(oldest) = self.out_of_order_order.pop_front() {
                    if let Some(old) = self.out_of_order.remove(&oldest) {
                        forgotten.push(old);
                        break;
                    }
                }
            }
            return;
        }
        self.ordered.push_back((index, remembered));
        if self.ordered.len() > self.limit {
            forgotten.extend(self.ordered.pop_front().map(|(_, r)| r));
        }
    }

    fn get(&self, index: u64) -> Option<Remembered> {
        let (mut low, mut high) = (0, self.ordered.len());
        while low < high {
            let middle = (low + high) / 2;
            let &(at, remembered) = self.ordered.get(middle).expect("in range");
            match at.cmp(&index) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Some(remembered),
            }
        }
        self.out_of_order.get(&index).copied()
    }

    fn len(&self) -> usize {
        self.ordered.len() + self.out_of_order.len()
    }
}

/// SENDs waiting for their receipt, by frame index, the oldest forgotten first.
#[derive(Default)]
struct PendingSends {
    sends: FastMap<u64, (PackedSend, u8)>,
    order: VecDeque<u64>,
}

impl PendingSends {
    /// Adds a SEND; returns the one it replaces or the one forgotten to keep `MAX_PENDING_SENDS`.
    fn add(&mut self, send: &SendInfo) -> Option<SendInfo> {
        let replaced = self.sends.insert(send.index, PackedSend::pack(send));
        if let Some((old, flags)) = replaced {
            return Some(old.unpack(flags)); // the same index again keeps its place
        }
        self.order.push_back(send.index);
        if self.sends.len() > MAX_PENDING_SENDS {
            while let Some(oldest) = self.order.pop_front() {
                if let Some((old, flags)) = self.sends.remove(&oldest) {
                    return Some(old.unpack(flags));
                }
            }
        }
        // answered ones leave stale places in the order: dropped in bulk, now and then
        if self.order.len() > 2 * self.sends.len() + 1024 {
            let sends = &self.sends;
            self.order.retain(|index| sends.contains_key(index));
        }
        None
    }

    fn take(&mut self, index: u64) -> Option<SendInfo> {
        self.sends.remove(&index).map(|(send, flags)| send.unpack(flags))
    }
}

/// The open journeys (oldest opened first) and what joins frames to them.
pub struct JourneyStore {
    max_open: usize,
    max_milestones: usize,
    open: Blocks<Journey>,
    /// the open journeys by key: each entry the low 32 bits of a seq (`seq_of`), the key read from the journey
    /// (4 bytes a place, not the 32 of a map of keys)
    by_key: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    /// the seq of the oldest open journey (`open`'s first)
    first_seq: u64,
    pub names: Names,
    deliveries: Pool<Delivery>,
    consumers: Consumers,
    acks: Pool<Ack>,
    ack_sets: Vec<AckSet>,
    free_ack_sets: Vec<u32>,
    pending: PendingSends,
    memory: DeliveryMemory,
    /// journeys closed and not yet taken (`take_closed`), with their seq
    closed: VecDeque<(u64, Journey)>,
    milestones: usize,
    /// journeys closed because too many were open
    pub closed_early: u64,
    /// deliveries and acks of closed journeys counted, not kept
    pub milestones_dropped: u64,
    forgotten: Vec<Remembered>,
}

impl Default for JourneyStore {
    fn default() -> Self {
        JourneyStore::new(MAX_OPEN_JOURNEYS, MAX_MILESTONES_TOTAL)
    }
}

impl JourneyStore {
    /// `max_open` is at least 1 (a journey is closed only after it took the frame that opened it).
    pub fn new(max_open: usize, max_milestones: usize) -> Self {
        JourneyStore {
            max_open: max_open.max(1),
            max_milestones,
            open: Blocks::default(),
            by_key: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            first_seq: 0,
            names: Names::default(),
            deliveries: Pool::default(),
            consumers: Consumers::default(),
            acks: Pool::default(),
            ack_sets: Vec::new(),
            free_ack_sets: Vec::new(),
            pending: PendingSends::default(),
            memory: DeliveryMemory::new(MAX_DELIVERY_MEMORY),
            closed: VecDeque::new(),
            milestones: 0,
            closed_early: 0,
            milestones_dropped: 0,
            forgotten: Vec::new(),
        }
    }

    /// Deliveries and acks kept by the open journeys.
    pub fn milestones(&self) -> usize {
        self.milestones
    }

    pub fn open_len(&self) -> usize {
        self.open.len()
    }

    pub fn remembered_deliveries(&self) -> usize {
        self.memory.len()
    }

    pub fn send(&mut self, send: SendFields<'_>) {
        let info = SendInfo {
            index: send.index,
            time: send.time,
            conn: send.conn,
            producer_id: send.producer_id,
            sequence_id: send.sequence_id,
            messages: send.messages,
            producer: self.names.acquire(send.producer),
            topic: self.names.acquire(send.topic),
        };
        if let Some(old) = self.pending.add(&info) {
            self.release_send(&old);
        }
    }

    /// A SEND_RECEIPT answering the SEND at `answers` (None: not known), naming (ledger, entry) in `ids`; its
    /// journey's topic is the producer's (`topic`; when empty or absent, the SEND's).
    pub fn receipt(
        &mut self,
        answers: Option<u64>,
        ids: Option<(u64, u64)>,
        topic: Option<&str>,
        receipt: ReceiptInfo,
    ) -> Option<Receipted> {
        let pending = answers.and_then(|index| self.pending.take(index));
        let Some((ledger, entry)) = ids else {
            if let Some(send) = pending {
                self.release_send(&send);
            }
            return None;
        };
        let topic = match topic.filter(|t| !t.is_empty()) {
            Some(topic) => self.names.acquire(Some(topic)),
            None => match &pending {
                Some(send) => {
                    self.names.retain(send.topic);
                    send.topic
                }
                None => NO_NAME,
            },
        };
        let (seq, at) = self.journey(JourneyKey { ledger, entry, topic });
        self.names.release(topic); // the journey holds its own reference
        let journey = self.open.get_mut(at);
        let mut send_joined = false;
        match pending {
            Some(send) if journey.flags & HAS_SEND == 0 => {
                journey.set_send(&send);
                send_joined = true;
            }
            Some(send) => self.release_send(&send),
            None => {}
        }
        self.open.get_mut(at).set_receipt(receipt);
        Some(Receipted { seq, send_joined })
    }

    /// A MESSAGE delivering (ledger, entry) of `topic`; returns its journey's seq.
    pub fn message(&mut self, message: MessageFields<'_>) -> u64 {
        let topic = self.names.acquire(message.topic);
        let key = JourneyKey { ledger: message.ledger, entry: message.entry, topic };
        let (seq, at) = self.journey(key);
        let kept = self.open.get_mut(at).deliveries_len;
        if self.room(kept) {
            let info = ConsumerInfo {
                consumer_id: message.consumer_id.unwrap_or(0),
                conn: message.conn,
                consumer: self.names.acquire(message.consumer),
                subscription: self.names.acquire(message.subscription),
                flags: if message.consumer_id.is_some() { HAS_CONSUMER_ID } else { 0 },
            };
            let (consumer, new) = self.consumers.acquire(info);
            if !new {
                self.names.release(info.consumer); // the consumer held already holds its names
                self.names.release(info.subscription);
            }
            let delivery = Delivery {
                index: message.index,
                time: message.time,
                consumer,
                redelivery_count: message.redelivery_count,
                next: END,
            };
            let journey = self.open.get_mut(at);
            self.deliveries.push(&mut journey.deliveries, delivery);
            journey.deliveries_len += 1;
        } else {
            self.open.get_mut(at).deliveries_dropped += 1;
        }
        // the memory holds the topic reference taken above
        let batch_size = message.batch_size.filter(|&size| size < 1 << 63).unwrap_or(NO_SIZE);
        self.memory.add(message.index, Remembered { key, batch_size }, &mut self.forgotten);
        self.release_forgotten();
        seq
    }

    /// An ACK: each delivery it acknowledges (or discards) that is remembered and whose journey is open gets
    /// an ack. Returns the seqs of the journeys it joined, in order (one per delivery).
    pub fn ack(&mut self, ack: &AckFields<'_>) -> Vec<u64> {
        let cumulative = ack.ack_type == Some("Cumulative");
        let mut joined = Vec::new();
        let marked = ack.acks.iter().map(|&d| (d, None)).chain(ack.discards.iter().map(|&d| (d, ack.discarded)));
        for (delivery, discarded) in marked {
            let Some(known) = self.memory.get(delivery) else { continue };
            let Some(seq) = self.find(&known.key) else { continue };
            let at = (seq - self.first_seq) as usize;
            let ids = (known.key.ledger, known.key.entry);
            let batches = match ack.ack_sets.iter().rev().find(|s| (s.0, s.1) == ids) {
                Some((_, _, words)) if !cumulative => {
                    let width = match known.batch_size() {
                        Some(size) if size > 0 => size,
                        _ => 64 * words.len() as u64,
                    };
                    self.add_ack_set(AckSet { words: words.clone().into_boxed_slice(), width })
                }
                _ => NO_ACK_SET,
            };
            let kept = self.open.get_mut(at).acks_len;
            if self.room(kept) {
                let item = Ack {
                    index: ack.index,
                    time: ack.time,
                    delivery,
                    conn: ack.conn,
                    ack_type: self.names.acquire(ack.ack_type),
                    discarded: self.names.acquire(discarded),
                    batches,
                    next: END,
                };
                let journey = self.open.get_mut(at);
                self.acks.push(&mut journey.acks, item);
                journey.acks_len += 1;
            } else {
                self.open.get_mut(at).acks_dropped += 1;
                self.release_ack_set(batches);
            }
            joined.push(seq);
        }
        joined
    }

    /// The open journeys a REDELIVER_UNACKNOWLEDGED_MESSAGES names: by (ledger, entry) on `topic`, and those of
    /// the deliveries it hands back. Each seq once.
    pub fn redelivered(&self, topic: Option<&str>, ids: &[(u64, u64)], redelivers: &[u64]) -> Vec<u64> {
        let mut keys: Vec<JourneyKey> = Vec::new();
        if let Some(topic) = self.names.find(topic) {
            keys.extend(ids.iter().map(|&(ledger, entry)| JourneyKey { ledger, entry, topic }));
        }
        keys.extend(redelivers.iter().filter_map(|&d| self.memory.get(d)).map(|r| r.key));
        let mut seqs: Vec<u64> = keys.iter().filter_map(|key| self.find(key)).collect();
        seqs.sort_unstable();
        seqs.dedup();
        seqs
    }

    /// The open journey of `seq`.
    pub fn get(&self, seq: u64) -> Option<&Journey> {
        let at = seq.checked_sub(self.first_seq)?;
        self.open.get(usize::try_from(at).ok()?)
    }

    /// Closes every open journey, oldest first (`take_closed` hands them out).
    pub fn finish(&mut self) {
        while self.close_next() {}
    }

    /// Closes the oldest open journey, if any (`take_closed` hands it out): closing them one at a time, each
    /// taken before the next, holds no second table of them.
    pub fn close_next(&mut self) -> bool {
        let any = self.open.len() > 0;
        self.close_oldest();
        any
    }

    /// The next journey closed and its seq, if any: read it (`deliveries`, `acks`, `names`), then give it to
    /// `free`.
    pub fn take_closed(&mut self) -> Option<(u64, Journey)> {
        self.closed.pop_front()
    }

    /// The journey's deliveries, oldest first.
    pub fn deliveries(&self, journey: &Journey) -> Vec<&Delivery> {
        self.deliveries.items(journey.deliveries_list())
    }

    /// The journey's acks, oldest first.
    pub fn acks(&self, journey: &Journey) -> Vec<&Ack> {
        self.acks.items(journey.acks_list())
    }

    /// The consumer a delivery went to.
    pub fn consumer(&self, delivery: &Delivery) -> &ConsumerInfo {
        self.consumers.get(delivery.consumer)
    }

    pub fn ack_set(&self, id: u32) -> Option<&AckSet> {
        (id != NO_ACK_SET).then(|| &self.ack_sets[id as usize])
    }

    /// Gives back what a closed journey held (its milestones' places, its names).
    pub fn free(&mut self, journey: Journey) {
        let names = &mut self.names;
        names.release(journey.topic);
        if let Some(send) = journey.send() {
            names.release(send.producer);
            names.release(send.topic);
        }
        let consumers = &mut self.consumers;
        self.deliveries.free_list(journey.deliveries_list(), |d| {
            if let Some(info) = consumers.release(d.consumer) {
                names.release(info.consumer);
                names.release(info.subscription);
            }
        });
        let mut sets = Vec::new();
        self.acks.free_list(journey.acks_list(), |a| {
            names.release(a.ack_type);
            names.release(a.discarded);
            sets.push(a.batches);
        });
        for set in sets {
            self.release_ack_set(set);
        }
    }

    // ------------------------------------------------------------------ bookkeeping

    /// The seq and place in `open` of the journey of `key`, opened if none is (closing the oldest when too many
    /// are). `key.topic` is the caller's reference; the journey takes one of its own when it opens.
    fn journey(&mut self, key: JourneyKey) -> (u64, usize) {
        if let Some(seq) = self.find(&key) {
            return (seq, (seq - self.first_seq) as usize);
        }
        self.names.retain(key.topic);
        let seq = self.first_seq + self.open.len() as u64;
        self.open.push_back(Journey::new(key));
        let (open, hasher, first) = (&self.open, &self.hasher, self.first_seq);
        let key_of = |low: &u32| open.get(low.wrapping_sub(first as u32) as usize).expect("open").key();
        self.by_key.insert_unique(hasher.hash_one(key), seq as u32, |low| hasher.hash_one(key_of(low)));
        if self.open.len() > self.max_open {
            self.closed_early += 1;
            self.close_oldest();
        }
        (seq, (seq - self.first_seq) as usize)
    }

    fn close_oldest(&mut self) {
        let Some(journey) = self.open.pop_front() else { return };
        let seq = self.first_seq;
        self.first_seq += 1;
        if let Ok(place) = self.by_key.find_entry(self.hasher.hash_one(journey.key()), |&low| low == seq as u32) {
            place.remove();
        }
        self.milestones -= journey.deliveries_len as usize + journey.acks_len as usize;
        self.milestones_dropped += u64::from(journey.deliveries_dropped) + u64::from(journey.acks_dropped);
        self.closed.push_back((seq, journey));
    }

    /// The seq of the open journey of `key`.
    fn find(&self, key: &JourneyKey) -> Option<u64> {
        let (open, first) = (&self.open, self.first_seq);
        let seq_of = |low: u32| first + u64::from(low.wrapping_sub(first as u32));
        let found = self.by_key.find(self.hasher.hash_one(key), |&low| {
            open.get((seq_of(low) - first) as usize).is_some_and(|j| j.key() == *key)
        });
        found.map(|&low| seq_of(low))
    }

    /// Whether one more delivery or ack can be kept in a list of `len` (taking its place when it can).
    fn room(&mut self, len: u16) -> bool {
        if len >= MAX_MILESTONES_PER_JOURNEY || self.milestones >= self.max_milestones {
            return false;
        }
        self.milestones += 1;
        true
    }

    fn release_send(&mut self, send: &SendInfo) {
        self.names.release(send.producer);
        self.names.release(send.topic);
    }

    fn release_forgotten(&mut self) {
        for remembered in std::mem::take(&mut self.forgotten) {
            self.names.release(remembered.key.topic);
        }
    }

    fn add_ack_set(&mut self, set: AckSet) -> u32 {
        match self.free_ack_sets.pop() {
            Some(id) => {
                self.ack_sets[id as usize] = set;
                id
            }
            None => {
                self.ack_sets.push(set);
                (self.ack_sets.len() - 1) as u32
            }
        }
    }

    fn release_ack_set(&mut self, id: u32) {
        if id != NO_ACK_SET {
            self.ack_sets[id as usize].words = Box::new([]);
            self.free_ack_sets.push(id);
        }
    }
}

/// Pulsar's journeys behind the generic face: the names read, the journey closed handed out as plain data.
impl JourneyStore {
    fn sent(&self, send: &SendInfo) -> JourneySend<'_> {
        JourneySend {
            index: send.index,
            time: send.time,
            conn: send.conn,
            producer: self.names.get(send.producer),
            producer_id: send.producer_id,
            sequence_id: send.sequence_id,
            messages: send.messages,
            topic: self.names.get(send.topic),
        }
    }

    fn head_of(&self, journey: &Journey) -> JourneyHead<'_> {
        let key = journey.key();
        let send = journey.send().map(|send| self.sent(&send));
        JourneyHead { topic: self.names.get(key.topic), ledger: key.ledger, entry: key.entry, send }
    }

    fn closed_view(&self, seq: u64, journey: &Journey) -> ClosedJourney<'_> {
        let deliveries = self
            .deliveries(journey)
            .into_iter()
            .map(|d| {
                let consumer = self.consumer(d);
                JourneyDelivery {
                    index: d.index,
                    time: d.time,
                    conn: consumer.conn,
                    consumer: self.names.get(consumer.consumer),
                    consumer_id: consumer.consumer_id(),
                    subscription: self.names.get(consumer.subscription),
                    redelivery_count: d.redelivery_count,
                }
            })
            .collect();
        let acks = self
            .acks(journey)
            .into_iter()
            .map(|a| JourneyAck {
                index: a.index,
                time: a.time,
                conn: a.conn,
                ack_type: self.names.get(a.ack_type),
                delivery: a.delivery,
                batches: self.ack_set(a.batches).map(|set| AckedEntries { words: &set.words, width: set.width }),
                discarded: self.names.get(a.discarded),
            })
            .collect();
        ClosedJourney {
            seq,
            head: self.head_of(journey),
            receipt: journey.receipt(),
            deliveries,
            acks,
            deliveries_dropped: journey.deliveries_dropped,
            acks_dropped: journey.acks_dropped,
        }
    }
}

impl JourneyTracker for JourneyStore {
    fn send(&mut self, send: SendFields<'_>) {
        JourneyStore::send(self, send)
    }

    fn receipt(
        &mut self,
        answers: Option<u64>,
        ids: Option<(u64, u64)>,
        topic: Option<&str>,
        receipt: ReceiptInfo,
    ) -> Option<Receipted> {
        JourneyStore::receipt(self, answers, ids, topic, receipt)
    }

    fn message(&mut self, message: MessageFields<'_>) -> u64 {
        JourneyStore::message(self, message)
    }

    fn ack(&mut self, ack: &AckFields<'_>) -> Vec<u64> {
        JourneyStore::ack(self, ack)
    }

    fn redelivered(&self, topic: Option<&str>, ids: &[(u64, u64)], redelivers: &[u64]) -> Vec<u64> {
        JourneyStore::redelivered(self, topic, ids, redelivers)
    }

    fn head(&self, seq: u64) -> Option<JourneyHead<'_>> {
        self.get(seq).map(|journey| self.head_of(journey))
    }

    fn close_next(&mut self) -> bool {
        JourneyStore::close_next(self)
    }

    fn next_closed(&mut self, read: &mut dyn FnMut(&ClosedJourney<'_>)) -> bool {
        let Some((seq, journey)) = self.take_closed() else { return false };
        read(&self.closed_view(seq, &journey));
        self.free(journey);
        true
    }

    fn counts(&self) -> JourneyCounts {
        JourneyCounts {
            open: self.open_len(),
            milestones: self.milestones(),
            closed_early: self.closed_early,
            milestones_dropped: self.milestones_dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(store: &mut JourneyStore, index: u64, sequence_id: u64) {
        store.send(SendFields {
            index,
            time: index as f64,
            conn: 1,
            producer: Some("p"),
            producer_id: Some(7),
            sequence_id: Some(sequence_id),
            messages: 1,
            topic: Some("t"),
        });
    }

    fn receipt(store: &mut JourneyStore, answers: u64, index: u64, entry: u64) -> Option<Receipted> {
        let info = ReceiptInfo { index, time: index as f64 + 0.5, conn: 1 };
        store.receipt(Some(answers), Some((1, entry)), Some("t"), info)
    }

    fn message(store: &mut JourneyStore, index: u64, entry: u64, redelivery_count: u32) -> u64 {
        store.message(MessageFields {
            ledger: 1,
            entry,
            topic: Some("t"),
            index,
            time: index as f64,
            conn: 2,
            consumer: Some("c"),
            consumer_id: Some(0),
            subscription: Some("s"),
            redelivery_count,
            batch_size: Some(10),
        })
    }

    fn ack<'a>(index: u64, ack_type: &'a str, acks: Vec<u64>) -> AckFields<'a> {
        AckFields {
            index,
            time: index as f64,
            conn: 2,
            ack_type: Some(ack_type),
            ack_sets: Vec::new(),
            acks,
            discards: Vec::new(),
            discarded: None,
        }
    }

    /// A closed journey's entry, its deliveries' indexes and its acks' (index, delivery).
    type Closed = (u64, Vec<u64>, Vec<(u64, u64)>);

    /// Every closed journey, freed.
    fn closed(store: &mut JourneyStore) -> Vec<Closed> {
        let mut out = Vec::new();
        while let Some((_, journey)) = store.take_closed() {
            let deliveries = store.deliveries(&journey).iter().map(|d| d.index).collect();
            let acks = store.acks(&journey).iter().map(|a| (a.index, a.delivery)).collect();
            out.push((journey.key().entry, deliveries, acks));
            store.free(journey);
        }
        out
    }

    #[test]
    fn a_receipt_joins_its_send_and_names_the_journey() {
        let mut store = JourneyStore::default();
        send(&mut store, 1, 40);
        assert_eq!(receipt(&mut store, 1, 2, 5), Some(Receipted { seq: 0, send_joined: true }));
        // a receipt of nothing pending joins the journey without a send; an unknown id opens none
        assert_eq!(receipt(&mut store, 99, 3, 6), Some(Receipted { seq: 1, send_joined: false }));
        assert_eq!(store.receipt(Some(1), None, Some("t"), ReceiptInfo::default()), None);
        let journey = store.get(0).unwrap();
        let sent = journey.send().unwrap();
        assert_eq!((sent.index, sent.sequence_id, store.names.get(sent.producer)), (1, Some(40), Some("p")));
        assert_eq!(journey.receipt().unwrap().index, 2);
        assert_eq!(store.names.get(journey.key().topic), Some("t"));
    }

    #[test]
    fn the_oldest_opened_closes_first_when_too_many_are_open_and_is_counted() {
        let mut store = JourneyStore::new(3, 100);
        for entry in 0..5 {
            message(&mut store, 10 + entry, entry, 0);
            message(&mut store, 20 + entry, 0, 1); // touching the oldest does not keep it open
        }
        // entry 3 closes entry 0, which its touch opens again (closing 1); entry 4 closes 2
        assert_eq!(store.closed_early, 3);
        let early: Vec<u64> = closed(&mut store).iter().map(|c| c.0).collect();
        assert_eq!(early, [0, 1, 2]);
        store.finish();
        let rest: Vec<u64> = closed(&mut store).iter().map(|c| c.0).collect();
        assert_eq!(rest, [3, 0, 4]);
        assert_eq!((store.milestones(), store.open_len()), (0, 0));
    }

    #[test]
    fn milestones_past_the_budget_are_counted_and_the_budget_comes_back() {
        let mut store = JourneyStore::new(100, 5);
        for index in 0..8 {
            message(&mut store, index, index % 2, 0);
        }
        assert_eq!(store.milestones(), 5);
        store.finish();
        let kept: usize = closed(&mut store).iter().map(|c| c.1.len()).sum();
        assert_eq!((kept, store.milestones_dropped, store.milestones()), (5, 3, 0));
        message(&mut store, 100, 9, 0);
        assert_eq!(store.milestones(), 1);
    }

    #[test]
    fn a_redelivery_storm_keeps_one_journey_bounded() {
        let mut store = JourneyStore::default();
        let storm = 2 * u64::from(MAX_MILESTONES_PER_JOURNEY) + 7;
        for i in 0..storm {
            message(&mut store, 2 * i, 9, i as u32);
            assert_eq!(store.ack(&ack(2 * i + 1, "Individual", vec![2 * i])), [0]);
        }
        store.finish();
        let (_, journey) = store.take_closed().unwrap();
        let cap = usize::from(MAX_MILESTONES_PER_JOURNEY);
        assert_eq!((store.deliveries(&journey).len(), store.acks(&journey).len()), (cap, cap));
        assert_eq!(journey.deliveries_dropped as u64, storm - cap as u64);
        let counts: Vec<u32> = store.deliveries(&journey).iter().map(|d| d.redelivery_count).take(3).collect();
        assert_eq!(counts, [0, 1, 2]);
        assert_eq!(journey.acks_dropped as u64, storm - cap as u64);
        store.free(journey);
        assert_eq!(store.milestones_dropped, 2 * (storm - cap as u64));
    }

    #[test]
    fn acks_join_the_deliveries_they_acknowledge_cumulative_ones_too() {
        let mut store = JourneyStore::default();
        for entry in 0..3 {
            message(&mut store, 10 + entry, entry, 0);
        }
        // a cumulative ack lists every delivery it covers; unknown deliveries are skipped
        assert_eq!(store.ack(&ack(20, "Cumulative", vec![10, 11, 999])), [0, 1]);
        let mut discard = ack(21, "Individual", Vec::new());
        discard.discards = vec![12];
        discard.discarded = Some("ChecksumMismatch");
        assert_eq!(store.ack(&discard), [2]);
        store.finish();
        let mut done = Vec::new();
        while let Some((_, journey)) = store.take_closed() {
            let names = &store.names;
            let acks =
                store.acks(&journey).into_iter().map(|a| (a.delivery, names.get(a.ack_type), names.get(a.discarded)));
            done.push(acks.map(|(d, t, x)| (d, t.map(str::to_owned), x.map(str::to_owned))).collect::<Vec<_>>());
            store.free(journey);
        }
        let cumulative = Some("Cumulative".to_owned());
        let discard = (12, Some("Individual".to_owned()), Some("ChecksumMismatch".to_owned()));
        assert_eq!(done, [vec![(10, cumulative.clone(), None)], vec![(11, cumulative, None)], vec![discard]]);
    }

    #[test]
    fn a_batch_index_ack_covers_the_entries_whose_bits_are_cleared() {
        let mut store = JourneyStore::default();
        message(&mut store, 10, 4, 0); // a batch of 10 entries
        let mut batch_ack = ack(11, "Individual", vec![10]);
        batch_ack.ack_sets = vec![(1, 3, vec![0]), (1, 4, vec![1018])]; // 1018: entries 0 and 2 acknowledged
        store.ack(&batch_ack);
        let mut cumulative = ack(12, "Cumulative", vec![10]);
        cumulative.ack_sets = batch_ack.ack_sets.clone(); // a cumulative ack covers the whole entry
        store.ack(&cumulative);
        store.finish();
        let (_, journey) = store.take_closed().unwrap();
        let sets: Vec<u32> = store.acks(&journey).iter().map(|a| a.batches).collect();
        let set = store.ack_set(sets[0]).unwrap();
        let covered: Vec<u64> = (0..70).filter(|&i| set.covers(i)).collect();
        assert_eq!((covered, set.width), (vec![0, 2], 10));
        assert_eq!(sets[1], NO_ACK_SET);
        store.free(journey);
    }

    #[test]
    fn redeliveries_join_the_same_journey_and_acks_of_any_of_them_count() {
        let mut store = JourneyStore::default();
        send(&mut store, 1, 0);
        receipt(&mut store, 1, 2, 5);
        let first = message(&mut store, 3, 5, 0);
        let again = message(&mut store, 4, 5, 1);
        assert_eq!(first, again);
        assert_eq!(store.ack(&ack(5, "Individual", vec![4, 3])), [first, first]);
        assert_eq!(store.redelivered(Some("t"), &[(1, 5), (1, 77)], &[3]), [first]);
        assert_eq!(store.redelivered(Some("other"), &[(1, 5)], &[]), Vec::<u64>::new());
        store.finish();
        let (_, deliveries, acks) = closed(&mut store).remove(0);
        assert_eq!((deliveries, acks), (vec![3, 4], vec![(5, 4), (5, 3)]));
    }

    #[test]
    fn an_ack_of_a_closed_journey_joins_none_and_pending_sends_forget_the_oldest() {
        let mut store = JourneyStore::new(1, 100);
        message(&mut store, 1, 0, 0);
        message(&mut store, 2, 1, 0); // closes entry 0
        assert!(store.ack(&ack(3, "Individual", vec![1])).is_empty());
        for index in 0..MAX_PENDING_SENDS as u64 + 5 {
            send(&mut store, 1000 + index, index);
        }
        assert_eq!(receipt(&mut store, 1000, 9, 7).map(|r| r.send_joined), Some(false)); // forgotten
        assert_eq!(receipt(&mut store, 1005, 9, 8).map(|r| r.send_joined), Some(true));
    }

    #[test]
    fn the_delivery_memory_forgets_the_oldest_and_keeps_frames_out_of_order() {
        let mut memory = DeliveryMemory::new(3);
        let mut forgotten = Vec::new();
        let at = |entry| Remembered { key: JourneyKey { ledger: 1, entry, topic: 0 }, batch_size: NO_SIZE };
        for index in 10..14 {
            memory.add(index, at(index), &mut forgotten);
        }
        assert_eq!(forgotten.len(), 1);
        assert!(memory.get(10).is_none() && memory.get(13).is_some() && memory.len() == 3);
        memory.add(5, at(5), &mut forgotten); // lower than the last: kept beside the ordered ones
        assert_eq!(memory.get(5).map(|r| r.key.entry), Some(5));
        assert_eq!(memory.get(11).map(|r| r.key.entry), Some(11));
    }

    #[test]
    fn every_name_is_freed_when_every_journey_is() {
        let mut store = JourneyStore::new(2, 100);
        for i in 0..20 {
            send(&mut store, 100 * i, i);
            receipt(&mut store, 100 * i, 100 * i + 1, i);
            message(&mut store, 100 * i + 2, i, 0);
            store.ack(&ack(100 * i + 3, "Individual", vec![100 * i + 2]));
            closed(&mut store);
        }
        store.finish();
        closed(&mut store);
        // only the delivery memory still names the topic
        assert_eq!(store.names.len(), 1);
        assert_eq!(store.names.find(Some("p")), None);
    }

    #[test]
    fn a_journey_and_a_milestone_stay_small() {
        assert_eq!(std::mem::size_of::<Journey>(), 112);
        assert_eq!((std::mem::size_of::<Delivery>(), std::mem::size_of::<Ack>()), (32, 48));
    }

    #[test]
    fn blocks_free_their_front_as_it_empties() {
        let mut blocks = Blocks::default();
        for i in 0..(2 * BLOCK + 5) {
            blocks.push_back(i);
        }
        for i in 0..(BLOCK + 1) {
            assert_eq!(blocks.pop_front(), Some(i));
        }
        assert_eq!((blocks.blocks.len(), blocks.len(), blocks.get(0)), (2, BLOCK + 4, Some(&(BLOCK + 1))));
        assert_eq!(blocks.back(), Some(&(2 * BLOCK + 4)));
    }
}
