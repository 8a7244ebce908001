//! Message journeys, whatever the protocol: one message's life from the request that published it (its SEND)
//! through the answer that stored it (its receipt, which names its id in the topic: a ledger and an entry) to
//! every delivery of it to a consumer and every ack of those deliveries. A protocol that has them keeps them
//! in its own store behind [`JourneyTracker`] (`Protocol::journeys`); a front end feeds it each frame's few
//! scalars (the fields below, plain data) and reads each journey back when it closes, as plain data
//! ([`ClosedJourney`]), the names borrowed from the store.

/// The fields of a SEND, as the records give them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendFields<'a> {
    pub index: u64,
    pub time: f64,
    pub conn: u32,
    pub producer: Option<&'a str>,
    pub producer_id: Option<u64>,
    pub sequence_id: Option<u64>,
    /// the messages it carries (its command's count, 1 when absent or 0)
    pub messages: i32,
    pub topic: Option<&'a str>,
}

/// Where and when a receipt was seen.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReceiptInfo {
    pub index: u64,
    pub time: f64,
    pub conn: u32,
}

/// The fields of a delivery (a MESSAGE frame), as the records give them.
#[derive(Clone, Copy, Debug)]
pub struct MessageFields<'a> {
    pub ledger: u64,
    pub entry: u64,
    pub topic: Option<&'a str>,
    pub index: u64,
    pub time: f64,
    pub conn: u32,
    pub consumer: Option<&'a str>,
    pub consumer_id: Option<u64>,
    pub subscription: Option<&'a str>,
    pub redelivery_count: u32,
    /// the entries of its batch, if it is one
    pub batch_size: Option<u64>,
}

/// The fields of an ACK, as the records give them: `acks` the deliveries (their frames' indexes) it
/// acknowledges, `discards` the ones it drops unread (`discarded`: why); `ack_sets` the (ledger, entry,
/// bitset words) of its acks of a batch's entries (a later one for the same entry wins).
#[derive(Clone, Debug)]
pub struct AckFields<'a> {
    pub index: u64,
    pub time: f64,
    pub conn: u32,
    pub ack_type: Option<&'a str>,
    pub ack_sets: Vec<(u64, u64, Vec<u64>)>,
    pub acks: Vec<u64>,
    pub discards: Vec<u64>,
    pub discarded: Option<&'a str>,
}

/// What a receipt did: the journey it joined, and whether the SEND it answers joined it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receipted {
    pub seq: u64,
    pub send_joined: bool,
}

/// A journey's SEND, its names read: the fields it was fed.
pub type JourneySend<'a> = SendFields<'a>;

/// What identifies a journey, and its SEND if known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JourneyHead<'a> {
    pub topic: Option<&'a str>,
    pub ledger: u64,
    pub entry: u64,
    pub send: Option<JourneySend<'a>>,
}

/// One delivery of a journey's message (on the journey's topic).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JourneyDelivery<'a> {
    pub index: u64,
    pub time: f64,
    pub conn: u32,
    pub consumer: Option<&'a str>,
    pub consumer_id: Option<u64>,
    pub subscription: Option<&'a str>,
    pub redelivery_count: u32,
}

/// The entries of a batch an ack acknowledges: a bitset of those still NOT acknowledged (64-bit words, the
/// first word first) over `width` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckedEntries<'a> {
    pub words: &'a [u64],
    pub width: u64,
}

/// One ack (or a drop unread) of one of a journey's deliveries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JourneyAck<'a> {
    pub index: u64,
    pub time: f64,
    pub conn: u32,
    pub ack_type: Option<&'a str>,
    /// the delivery acknowledged (its frame's index)
    pub delivery: u64,
    /// None: the whole entry
    pub batches: Option<AckedEntries<'a>>,
    /// why the delivery was dropped unread, if it was
    pub discarded: Option<&'a str>,
}

/// A journey closed, as a front end reads it: oldest deliveries and acks first, and those counted but not kept.
#[derive(Clone, Debug, PartialEq)]
pub struct ClosedJourney<'a> {
    pub seq: u64,
    pub head: JourneyHead<'a>,
    pub receipt: Option<ReceiptInfo>,
    pub deliveries: Vec<JourneyDelivery<'a>>,
    pub acks: Vec<JourneyAck<'a>>,
    pub deliveries_dropped: u32,
    pub acks_dropped: u32,
}

/// The store's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JourneyCounts {
    /// journeys open now
    pub open: usize,
    /// deliveries and acks kept by the open journeys
    pub milestones: usize,
    /// journeys closed because too many were open
    pub closed_early: u64,
    /// deliveries and acks of closed journeys counted, not kept
    pub milestones_dropped: u64,
}

/// A protocol's store of open message journeys, fed frame by frame in capture order. Journeys are numbered
/// (`seq`) in the order they open; a closed journey waits to be read (`next_closed`).
pub trait JourneyTracker {
    /// A SEND (it waits for the receipt that answers it).
    fn send(&mut self, send: SendFields<'_>);
    /// A receipt answering the SEND at `answers` (None: not known), naming (ledger, entry) in `ids`, on
    /// `topic` (when empty or absent, the SEND's). None without ids.
    fn receipt(
        &mut self,
        answers: Option<u64>,
        ids: Option<(u64, u64)>,
        topic: Option<&str>,
        receipt: ReceiptInfo,
    ) -> Option<Receipted>;
    /// A delivery: its journey's seq.
    fn message(&mut self, message: MessageFields<'_>) -> u64;
    /// An ACK: the seqs of the journeys it joined, in order (one per delivery it acknowledges or drops).
    fn ack(&mut self, ack: &AckFields<'_>) -> Vec<u64>;
    /// The open journeys a redelivery request names: by (ledger, entry) on `topic`, and those of the
    /// deliveries (frame indexes) it hands back. Each seq once, in order.
    fn redelivered(&self, topic: Option<&str>, ids: &[(u64, u64)], redelivers: &[u64]) -> Vec<u64>;
    /// The open journey `seq`, if it is open.
    fn head(&self, seq: u64) -> Option<JourneyHead<'_>>;
    /// Closes the oldest open journey; false when none was open.
    fn close_next(&mut self) -> bool;
    /// The next journey closed given to `read`, then freed; false when none is waiting.
    fn next_closed(&mut self, read: &mut dyn FnMut(&ClosedJourney<'_>)) -> bool;
    fn counts(&self) -> JourneyCounts;
}
