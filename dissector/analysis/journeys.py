"""Message journeys: one message's life across connections, from the records the CLI makes.

SEND → SEND_RECEIPT (joined by the analysis: the receipt ``answers`` its SEND; publish latency), the receipt's
message id → every MESSAGE that delivers that entry (to any consumer, any subscription, any connection;
``redelivery_count``; a followed message also keeps the REDELIVER_UNACKNOWLEDGED_MESSAGES that asked for it
again), and each delivery → the ACK that acknowledges it (the analysis lists the MESSAGE frames
an ACK covers in ``acks``, cumulative acks included; a batch-index ack's ``ack_set`` says which entries of the
batch it covers). A journey is keyed by (topic, ledger id, entry id): ledger ids are per topic, so the same
``L:E`` may name a message on each of several topics.

Plain data in, plain data out; memory is bounded (the oldest unfinished journeys are closed and counted when
there are too many) so a capture of any length can be followed. Used by ``report`` (every journey, summarised)
and ``follow --message`` (one message's frames).
"""

from __future__ import annotations

import marshal
import math
import re
import sys
from array import array
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

MAX_OPEN_JOURNEYS = 300_000  # journeys still followed; beyond it the oldest is finished (its later frames lost)
MAX_PENDING_SENDS = 100_000  # SENDs waiting for their receipt
MAX_DELIVERY_MEMORY = 200_000  # MESSAGE frames an ACK can still be matched to
MAX_MILESTONES_TOTAL = 1_000_000  # deliveries and acks kept over all open journeys (beyond: counted, not kept)
MAX_MILESTONES_PER_JOURNEY = 1_000  # deliveries, and acks, kept for one entry (a redelivery storm stays bounded)
MAX_FRAMES_PER_JOURNEY = 10_000  # frames kept for one followed message (a redelivery storm stays bounded)
# journeys kept as objects (the most recently touched); the other open ones wait packed in bytes, a third of the
# memory: a capture's open journeys were 1.4 KB each, 286 MB for 200,000
HOT_JOURNEYS = 2_000

_MESSAGE_ID = re.compile(r"(\d+):(\d+)(?::(-?\d+))?")


SEND_FIELDS = ("index", "time", "conn", "producer", "producer_id", "sequence_id", "messages", "topic")
RECEIPT_FIELDS = ("index", "time", "conn")
DELIVERY_FIELDS = ("index", "time", "conn", "topic", "consumer", "consumer_id", "subscription", "redelivery_count")
ACK_FIELDS = ("index", "time", "conn", "ack_type", "delivery", "batches", "discarded")


class MessageIdError(ValueError):
    """A message id that is not LEDGER:ENTRY[:BATCH]."""


@dataclass(frozen=True)
class MessageRef:
    """A message as the user names it: LEDGER:ENTRY, with the batch index of one entry of a batch."""

    ledger: int
    entry: int
    batch: int | None = None

    @classmethod
    def parse(cls, text: str) -> "MessageRef":
        match = _MESSAGE_ID.fullmatch(text.strip())
        if match is None:
            raise MessageIdError(f"--message takes LEDGER:ENTRY[:BATCH] (e.g. 12:34 or 12:34:5), not {text!r}")
        batch = int(match.group(3)) if match.group(3) is not None else None
        if batch is not None and batch < 0:
            raise MessageIdError(f"--message: the batch index must be 0 or more, not {batch}")
        return cls(int(match.group(1)), int(match.group(2)), batch)

    def __str__(self) -> str:
        return f"{self.ledger}:{self.entry}" + (f":{self.batch}" if self.batch is not None else "")


def _wire_id(value: Any) -> tuple[int, int] | None:
    """(ledger, entry) of a command's message id (protobuf JSON names: ledgerId, entryId)."""
    if not isinstance(value, dict):
        return None
    ledger, entry = value.get("ledgerId"), value.get("entryId")
    if isinstance(ledger, int) and isinstance(entry, int):
        return ledger, entry
    return None


def acked_batch_indexes(ack_set: Any, size: int | None) -> set[int] | None:
    """The batch indexes an ACK's ``ack_set`` acknowledges, or None when it acknowledges the whole entry.

    Pulsar's ack_set is a bitset (64-bit words, little end first) of the entries of the batch still NOT
    acknowledged: a cleared bit is an acknowledged entry."""
    if not isinstance(ack_set, list) or not ack_set:
        return None
    bits = 0
    for i, word in enumerate(ack_set):
        if isinstance(word, int):
            bits |= (word & 0xFFFF_FFFF_FFFF_FFFF) << (64 * i)
    width = size if isinstance(size, int) and size > 0 else 64 * len(ack_set)
    return {i for i in range(width) if not bits >> i & 1}


@dataclass(slots=True)
class Journey:
    """One entry (a message, or a batch of them) from its SEND to its last ACK."""

    topic: str | None
    ledger: int
    entry: int
    # compact while open (a capture holds hundreds of thousands): tuples, and lists made on first use
    send: tuple | None = None  # SEND_FIELDS
    receipt: tuple | None = None  # RECEIPT_FIELDS
    deliveries: list | None = None  # tuples: DELIVERY_FIELDS
    acks: list | None = None  # tuples: ACK_FIELDS (delivery: the MESSAGE frame acknowledged)
    frames: list | None = None  # the records, for a followed message only
    frames_dropped: int = 0
    deliveries_dropped: int = 0  # beyond MAX_MILESTONES_PER_JOURNEY: counted, not kept
    acks_dropped: int = 0
    # (topic, ledger, entry) as one tuple, which the tracker's deliveries share (not a new one each)
    key: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = (self.topic, self.ledger, self.entry)

    @property
    def send_info(self) -> dict | None:
        return dict(zip(SEND_FIELDS, self.send)) if self.send is not None else None

    def packed(self) -> bytes:
        """The journey's milestones in bytes (``unpacked`` with its key makes it again), as marshal writes them."""
        return marshal.dumps((self.send, self.receipt, self.deliveries, self.acks, self.deliveries_dropped,
                              self.acks_dropped))

    @classmethod
    def unpacked(cls, key: tuple, data: bytes) -> "Journey":
        send, receipt, deliveries, acks, deliveries_dropped, acks_dropped = marshal.loads(data)
        journey = cls(*key, send, receipt, deliveries, acks, deliveries_dropped=deliveries_dropped,
                      acks_dropped=acks_dropped)
        journey.key = key  # the tuple it was found by, not one more
        return journey

    def summary(self, batch: int | None = None) -> dict:
        """Plain data: the journey's milestones and latencies (ms; None where a milestone was not seen). With
        ``batch``, an ACK counts only when it covers that entry of the batch."""
        send = self.send_info
        receipt = dict(zip(RECEIPT_FIELDS, self.receipt)) if self.receipt is not None else None
        send_time = send["time"] if send else None
        publish = _ms(receipt["time"] - send_time) if receipt and send_time is not None else None
        deliveries = []
        seen_subscriptions: set = set()
        redeliveries = 0
        acks = [dict(zip(ACK_FIELDS, a)) for a in self.acks or ()]
        for d in self.deliveries or ():
            d = dict(zip(DELIVERY_FIELDS, d))
            sub = (d.get("topic"), d.get("subscription"))
            repeat = sub in seen_subscriptions or (d.get("redelivery_count") or 0) > 0
            redeliveries += repeat
            seen_subscriptions.add(sub)
            ack = next((a for a in acks if a["delivery"] == d["index"] and _covers(a, batch)), None)
            deliveries.append({
                **d, "redelivery": repeat,
                "delay_ms": _ms(d["time"] - send_time) if send_time is not None else None,
                "ack_index": ack["index"] if ack else None,
                "ack_type": ack["ack_type"] if ack else None,
                # the ACK's validation_error: the client dropped the message unread (the application never had it)
                "discarded": ack["discarded"] if ack else None,
                "ack_latency_ms": _ms(ack["time"] - d["time"]) if ack else None,
                "send_to_ack_ms": _ms(ack["time"] - send_time) if ack and send_time is not None else None,
            })
        return {
            "topic": self.topic, "message_id": f"{self.ledger}:{self.entry}" + (f":{batch}" if batch is not None
                                                                                 else ""),
            "ledger": self.ledger, "entry": self.entry, "batch": batch,
            "send": send, "receipt": receipt, "publish_latency_ms": publish,
            "deliveries": deliveries, "subscriptions": len(seen_subscriptions), "redeliveries": redeliveries,
            "acked": sum(1 for d in deliveries if d["ack_index"] is not None and d["discarded"] is None),
            "discarded": sum(1 for d in deliveries if d["discarded"] is not None),
            "deliveries_dropped": self.deliveries_dropped, "acks_dropped": self.acks_dropped,
        }


def _shared(text: Any) -> Any:
    """One object for equal names (the records make new strings every frame): a packed journey then writes its
    topic, producer, consumer and subscription once and refers back (7 MB less for perf_big's 201,054)."""
    return sys.intern(text) if type(text) is str else text


def _covers(ack: dict, batch: int | None) -> bool:
    """Whether an ACK acknowledges the message: the whole entry (``batch`` None: a cumulative ack, or one
    without ack_set), or that entry of the batch."""
    return ack["batches"] is None or (batch is not None and batch in ack["batches"])


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


class JourneyTracker:
    """Follows every message of a stream of records (``add`` each, in capture order; ``finish`` at the end).

    ``wanted(journey)``: journeys whose records are kept (``follow --message``; asked when a frame joins the
    journey, so a SEND is known from its receipt on); None keeps none.
    ``on_finish(journey)``: called once per journey when it is closed (at the end, or when memory is full)."""

    def __init__(self, *, wanted: Callable[["Journey"], bool] | None = None,
                 on_finish: Callable[[Journey], None] | None = None, max_open: int = MAX_OPEN_JOURNEYS,
                 max_milestones: int = MAX_MILESTONES_TOTAL) -> None:
        self.wanted = wanted
        self.on_finish = on_finish
        self.max_open = max_open
        # every open journey, oldest first: a Journey, or its bytes (``Journey.packed``) when not touched lately
        # (an OrderedDict: a dict's first item, popped again and again, is found by skipping the ones removed)
        self.open: OrderedDict[tuple, Journey | bytes] = OrderedDict()
        self.hot: OrderedDict[tuple, None] = OrderedDict()  # the keys of the unpacked ones, least recent first
        self.pending_sends: OrderedDict[int, tuple[dict, dict | None]] = OrderedDict()  # SEND index -> info, rec
        self.deliveries = Deliveries(MAX_DELIVERY_MEMORY)  # MESSAGE index -> journey key, batch size
        self.closed_early = 0  # journeys closed because too many were open
        self.max_milestones = max_milestones
        self.milestones = 0  # deliveries and acks kept by the open journeys
        self._dropped = 0  # deliveries and acks of closed journeys counted, not kept

    def add(self, rec: dict) -> None:
        if "index" not in rec or rec.get("protocol", "pulsar") != "pulsar":
            return
        kind = rec["type"]
        if kind == "SEND":
            self._send(rec)
        elif kind == "SEND_RECEIPT":
            self._receipt(rec)
        elif kind == "MESSAGE":
            self._message(rec)
        elif kind == "ACK":
            self._ack(rec)
        elif kind == "REDELIVER_UNACKNOWLEDGED_MESSAGES":
            self._redeliver(rec)

    def finish(self) -> None:
        while self.open:
            self._close(self._pop_oldest())

    # ------------------------------------------------------------------ steps

    def _send(self, rec: dict) -> None:
        cmd, producer = rec.get("command") or {}, rec.get("producer") or {}
        info = (rec["index"], rec["time"], rec["conn"], _shared(producer.get("name")), cmd.get("producer_id"),
                cmd.get("sequence_id"), cmd.get("num_messages") or 1, _shared(producer.get("topic")))
        self.pending_sends[rec["index"]] = (info, rec if self.wanted is not None else None)
        if len(self.pending_sends) > MAX_PENDING_SENDS:
            self.pending_sends.popitem(last=False)

    def _receipt(self, rec: dict) -> None:
        ids = _wire_id((rec.get("command") or {}).get("message_id"))
        pending = self.pending_sends.pop(rec.get("answers"), None)
        if ids is None:
            return
        producer = rec.get("producer") or {}
        topic = _shared(producer.get("topic")) or (pending[0][SEND_FIELDS.index("topic")] if pending else None)
        journey = self._journey(topic, *ids)
        if pending is not None and journey.send is None:
            journey.send = pending[0]
            self._keep(journey, pending[1])
        journey.receipt = (rec["index"], rec["time"], rec["conn"])
        self._keep(journey, rec)

    def _message(self, rec: dict) -> None:
        ids = _wire_id((rec.get("command") or {}).get("message_id"))
        if ids is None:
            return
        consumer = rec.get("consumer") or {}
        topic = _shared(consumer.get("topic"))
        journey = self._journey(topic, *ids)
        cmd = rec["command"]
        size = (rec.get("metadata") or {}).get("num_messages_in_batch")
        if journey.deliveries is None:
            journey.deliveries = []
        if self._room(journey.deliveries):
            journey.deliveries.append((rec["index"], rec["time"], rec["conn"], topic, _shared(consumer.get("name")),
                                       cmd.get("consumer_id"), _shared(consumer.get("subscription")),
                                       cmd.get("redelivery_count") or 0))
        else:
            journey.deliveries_dropped += 1
        self.deliveries.add(rec["index"], journey.key, size)
        self._keep(journey, rec)

    def _ack(self, rec: dict) -> None:
        cmd = rec.get("command") or {}
        ack_type = cmd.get("ack_type")
        ack_sets = {}
        for item in cmd.get("message_id") or ():
            ids = _wire_id(item)
            if ids is not None and item.get("ack_set"):
                ack_sets[ids] = item["ack_set"]
        # an ACK with a validation_error says which deliveries the client dropped unread (``discards``)
        error = cmd.get("validation_error")
        marked = [(d, None) for d in rec.get("acks") or ()] + [(d, error) for d in rec.get("discards") or ()]
        for delivery, discarded in marked:
            known = self.deliveries.get(delivery)
            if known is None:
                continue
            key, size = known
            if key not in self.open:
                continue
            journey = self._touch(key)
            batches = None
            if ack_type != "Cumulative" and (key[1], key[2]) in ack_sets:
                batches = acked_batch_indexes(ack_sets[(key[1], key[2])], size)
            if journey.acks is None:
                journey.acks = []
            if self._room(journey.acks):
                journey.acks.append((rec["index"], rec["time"], rec["conn"], _shared(ack_type), delivery,
                                     frozenset(batches) if batches is not None else None, discarded))
            else:
                journey.acks_dropped += 1
            self._keep(journey, rec)

    def _redeliver(self, rec: dict) -> None:
        """A consumer asks for messages again (a negative ack, an ack timeout, or every unacknowledged one): the
        frame joins the journeys of the messages it names, and of the deliveries the analysis says it hands
        back (``redelivers``: a request naming none hands back every unacknowledged one)."""
        if self.wanted is None:  # only a followed message keeps frames
            return
        topic = (rec.get("consumer") or {}).get("topic")
        keys = {(topic, *ids) for ids in map(_wire_id, (rec.get("command") or {}).get("message_ids") or ())
                if ids is not None}
        keys.update(known[0] for known in map(self.deliveries.get, rec.get("redelivers") or ()) if known)
        for key in keys:
            if key in self.open:
                self._keep(self._touch(key), rec)

    # ------------------------------------------------------------------ bookkeeping

    def _journey(self, topic, ledger: int, entry: int) -> Journey:
        key = (topic, ledger, entry)
        if key in self.open:
            return self._touch(key)
        journey = Journey(topic, ledger, entry)
        self.open[journey.key] = journey
        self._warm(journey.key)
        if len(self.open) > self.max_open:
            self.closed_early += 1
            self._close(self._pop_oldest())
        return journey

    def _touch(self, key: tuple) -> Journey:
        """The open journey of ``key`` as an object, now the most recently touched (unpacked if it was packed)."""
        journey = self.open[key]
        if isinstance(journey, bytes):
            journey = self.open[key] = Journey.unpacked(key, journey)  # a key assigned again keeps its place
        self._warm(key)
        return journey

    def _warm(self, key: tuple) -> None:
        self.hot[key] = None
        self.hot.move_to_end(key)
        while len(self.hot) > HOT_JOURNEYS:
            cold, _ = self.hot.popitem(last=False)
            journey = self.open[cold]
            if journey.frames is None:  # a followed message keeps its records: it stays an object
                self.open[cold] = journey.packed()

    def _pop_oldest(self) -> Journey:
        key, journey = self.open.popitem(last=False)
        self.hot.pop(key, None)
        return Journey.unpacked(key, journey) if isinstance(journey, bytes) else journey

    def _keep(self, journey: Journey, rec: dict | None) -> None:
        if rec is None or self.wanted is None or not self.wanted(journey):
            return
        if journey.frames is None:
            journey.frames = []
        if journey.frames and journey.frames[-1] is rec:  # an ACK covering several deliveries of one journey
            return
        if len(journey.frames) < MAX_FRAMES_PER_JOURNEY:
            journey.frames.append(rec)
        else:
            journey.frames_dropped += 1

    def _room(self, milestones: list) -> bool:
        """Whether one more delivery or ack can be kept in ``milestones`` (taking its place when it can)."""
        if len(milestones) >= MAX_MILESTONES_PER_JOURNEY or self.milestones >= self.max_milestones:
            return False
        self.milestones += 1
        return True

    @property
    def milestones_dropped(self) -> int:
        return self._dropped

    def _close(self, journey: Journey) -> None:
        self.milestones -= len(journey.deliveries or ()) + len(journey.acks or ())
        self._dropped += journey.deliveries_dropped + journey.acks_dropped
        if self.on_finish is not None:
            self.on_finish(journey)


class Deliveries:
    """The last ``limit`` MESSAGE frames by index, each with its journey's key and batch size, in three flat
    arrays searched by bisection (frames come in index order): a dict of tuples took 245 bytes a delivery, this
    takes about 24. A frame that comes out of order waits in a small dict instead."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.indexes = array("q")
        self.keys: list[tuple] = []
        self.sizes = array("q")  # -1: no batch size
        self.start = 0  # entries before it are forgotten (removed in bulk, now and then)
        self.out_of_order: OrderedDict[int, tuple[tuple, int | None]] = OrderedDict()

    def add(self, index: int, key: tuple, size: int | None) -> None:
        if self.indexes and index <= self.indexes[-1] or not -2**63 <= index < 2**63:
            self.out_of_order[index] = (key, size)
            if len(self.out_of_order) > self.limit:
                self.out_of_order.popitem(last=False)
            return
        self.indexes.append(index)
        self.keys.append(key)
        self.sizes.append(size if isinstance(size, int) and 0 <= size < 2**63 else -1)
        if len(self.indexes) - self.start > self.limit:
            self.start += 1
            if self.start >= self.limit:  # amortised: one bulk removal per ``limit`` frames
                del self.indexes[:self.start], self.keys[:self.start], self.sizes[:self.start]
                self.start = 0

    def get(self, index: Any) -> tuple[tuple, int | None] | None:
        if not isinstance(index, int):
            return None
        at = bisect_left(self.indexes, index, self.start)
        if at < len(self.indexes) and self.indexes[at] == index:
            size = self.sizes[at]
            return self.keys[at], (size if size >= 0 else None)
        return self.out_of_order.get(index)

    def __len__(self) -> int:
        return len(self.indexes) - self.start + len(self.out_of_order)


def follow_message(records: Iterator[dict], ref: MessageRef, topics: set[str] | None = None) -> list[Journey]:
    """The journeys of one message id (one per topic that has it, unless ``topics`` narrows them), with their
    records in capture order; for ``ref.batch``, the ACKs that do not cover that entry of the batch are left
    out (for a whole entry every ACK that touches it is shown; its summary counts the acks of the whole
    entry). ``records`` is consumed."""
    def wanted(journey: Journey) -> bool:
        return journey.ledger == ref.ledger and journey.entry == ref.entry and \
            (not topics or _topic_in(journey.topic, topics))

    return _followed(records, wanted, lambda journey: ref.batch)


def follow_sequence(records: Iterator[dict], producers: set[str], sequence_id: int,
                    topics: set[str] | None = None) -> list[tuple[Journey, int | None]]:
    """The journeys of a producer's message by its sequence id (the producer by name, id or id@cN as
    ``--producer`` takes it), with the batch index of that message when its SEND was a batch."""
    def wanted(journey: Journey) -> bool:
        send = journey.send_info
        if send is None or (topics and not _topic_in(journey.topic, topics)):
            return False
        named = send["producer"] in producers or str(send["producer_id"]) in producers or \
            f"{send['producer_id']}@c{send['conn']}" in producers
        first = send["sequence_id"]
        return named and isinstance(first, int) and first <= sequence_id < first + max(1, send["messages"])

    def batch(journey: Journey) -> int | None:
        send = journey.send_info
        return sequence_id - send["sequence_id"] if send["messages"] > 1 else None

    journeys = _followed(records, wanted, batch)
    return [(journey, batch(journey)) for journey in journeys]


def _followed(records: Iterator[dict], wanted: Callable[[Journey], bool],
              batch_of: Callable[[Journey], int | None]) -> list[Journey]:
    found: list[Journey] = []
    tracker = JourneyTracker(wanted=wanted, on_finish=lambda j: found.append(j) if wanted(j) else None)
    for rec in records:
        tracker.add(rec)
    tracker.finish()
    for journey in found:
        batch = batch_of(journey)
        if batch is not None:  # the acks of other entries of the batch are not this message's
            covering = {a[0] for a in journey.acks or () if _covers(dict(zip(ACK_FIELDS, a)), batch)}
            journey.frames = [r for r in journey.frames if r["type"] != "ACK" or r["index"] in covering]
        journey.frames = sorted(journey.frames or (), key=lambda r: r["index"])
    return sorted(found, key=lambda j: (j.frames[0]["index"] if j.frames else 0))


def _topic_in(topic: str | None, wanted: set[str]) -> bool:
    return topic is not None and (topic in wanted or topic.rsplit("/", 1)[-1] in wanted)


# ---------------------------------------------------------------------- distributions

# Log-spaced latency bins shared by every histogram of the report: 10 per decade from 1 µs to 1000 s.
BIN_EDGES_MS = [round(10 ** (k / 10), 6) for k in range(-30, 61)]


def bin_of(ms: float) -> int:
    """The histogram bin of a latency: 0 below the first edge, len(BIN_EDGES_MS) at or beyond the last."""
    if ms <= 0 or ms < BIN_EDGES_MS[0]:
        return 0
    k = math.floor(math.log10(ms) * 10 + 1e-9) + 31
    return min(max(k, 0), len(BIN_EDGES_MS))


class Distribution:
    """Counts in the log bins (exact, every value), with count, min, max and mean."""

    def __init__(self) -> None:
        self.bins = [0] * (len(BIN_EDGES_MS) + 1)
        self.count = 0
        self.total = 0.0
        self.min: float | None = None
        self.max: float | None = None

    def add(self, ms: float) -> None:
        self.bins[bin_of(ms)] += 1
        self.count += 1
        self.total += ms
        self.min = ms if self.min is None else min(self.min, ms)
        self.max = ms if self.max is None else max(self.max, ms)

    def result(self) -> dict:
        return {"count": self.count, "min": self.min, "max": self.max,
                "mean": round(self.total / self.count, 3) if self.count else None,
                "p50": self._quantile(0.5), "p99": self._quantile(0.99), "bins": self.bins}

    def _quantile(self, q: float) -> float | None:
        """The upper edge of the bin holding the nearest-rank quantile (within a tenth of a decade)."""
        if not self.count:
            return None
        rank, seen = max(1, math.ceil(q * self.count)), 0
        for i, n in enumerate(self.bins):
            seen += n
            if seen >= rank:
                return min(BIN_EDGES_MS[min(i, len(BIN_EDGES_MS) - 1)], self.max)
        return self.max
