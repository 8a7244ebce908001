"""Message journeys: one message's life across connections, from the records the CLI makes.

SEND → SEND_RECEIPT (joined by the analysis: the receipt ``answers`` its SEND; publish latency), the receipt's
message id → every MESSAGE that delivers that entry (to any consumer, any subscription, any connection;
``redelivery_count``; a followed message also keeps the REDELIVER_UNACKNOWLEDGED_MESSAGES that asked for it
again), and each delivery → the ACK that acknowledges it (the analysis lists the MESSAGE frames
an ACK covers in ``acks``, cumulative acks included; a batch-index ack's ``ack_set`` says which entries of the
batch it covers). A journey is keyed by (topic, ledger id, entry id): ledger ids are per topic, so the same
``L:E`` may name a message on each of several topics.

Plain data in, plain data out; memory is bounded (the oldest unfinished journeys are closed and counted when
there are too many) so a capture of any length can be followed. The open journeys live in the engine
(``_core.JourneyStore``: fixed-width fields, names held once, 112 bytes a journey, 32 a delivery, 48 an ack);
this module reads each record's few scalars for it and gets each journey back, as a ``Journey``, when it closes.
Used by ``report`` (every journey, summarised) and ``follow --message`` (one message's frames, kept here).
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from dissector import _core

# the protocol whose records these are and whose journey store the engine keeps (``_core.JourneyStore`` reaches
# it by this name through the registry: ``Protocol::journeys``)
PROTOCOL = "pulsar"
# the caps of that store (crates/engine/src/protocols/pulsar/journeys.rs), which keeps them:
MAX_OPEN_JOURNEYS = 300_000  # journeys still followed; beyond it the oldest is finished (its later frames lost)
MAX_PENDING_SENDS = 100_000  # SENDs waiting for their receipt
MAX_DELIVERY_MEMORY = 200_000  # MESSAGE frames an ACK can still be matched to
MAX_MILESTONES_TOTAL = 1_000_000  # deliveries and acks kept over all open journeys (beyond: counted, not kept)
MAX_MILESTONES_PER_JOURNEY = 1_000  # deliveries, and acks, kept for one entry (a redelivery storm stays bounded)
# kept here:
MAX_FRAMES_PER_JOURNEY = 10_000  # frames kept for one followed message (a redelivery storm stays bounded)

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
    # as the engine's store hands it back when it closes: tuples, None where nothing was kept
    send: tuple | None = None  # SEND_FIELDS
    receipt: tuple | None = None  # RECEIPT_FIELDS
    deliveries: list | None = None  # tuples: DELIVERY_FIELDS
    acks: list | None = None  # tuples: ACK_FIELDS (delivery: the MESSAGE frame acknowledged; batches: AckedEntries)
    frames: list | None = None  # the records, for a followed message only
    frames_dropped: int = 0
    deliveries_dropped: int = 0  # beyond MAX_MILESTONES_PER_JOURNEY or MAX_MILESTONES_TOTAL: counted, not kept
    acks_dropped: int = 0

    @property
    def send_info(self) -> dict | None:
        return dict(zip(SEND_FIELDS, self.send)) if self.send is not None else None

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


def _covers(ack: dict, batch: int | None) -> bool:
    """Whether an ACK acknowledges the message: the whole entry (``batch`` None: a cumulative ack, or one
    without ack_set), or that entry of the batch."""
    return ack["batches"] is None or (batch is not None and batch in ack["batches"])


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


class AckedEntries:
    """The entries of a batch a batch-index ACK acknowledges (``in``): Pulsar's ack_set, a bitset (64-bit words,
    the first word first) of the entries still NOT acknowledged over ``width`` entries (the batch's size), read
    where asked rather than spread into a set (a batch may claim millions)."""

    __slots__ = ("words", "width")

    def __init__(self, words: tuple[int, ...], width: int) -> None:
        self.words = words
        self.width = width

    def __contains__(self, entry: object) -> bool:
        if type(entry) is not int or not 0 <= entry < self.width:
            return False
        word = entry >> 6
        return word >= len(self.words) or not self.words[word] >> (entry & 63) & 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AckedEntries) and (self.words, self.width) == (other.words, other.width)

    def __hash__(self) -> int:
        return hash((self.words, self.width))

    def __repr__(self) -> str:
        return f"AckedEntries({self.words!r}, {self.width})"


_WORD = 0xFFFF_FFFF_FFFF_FFFF


class JourneyTracker:
    """Follows every message of a stream of records (``add`` each, in capture order; ``finish`` at the end).

    ``wanted(journey)``: journeys whose records are kept (``follow --message``; asked when a frame joins a
    journey not followed yet, with its topic, ids and SEND as known then, so a SEND is known from its receipt
    on); None keeps none.
    ``on_finish(journey)``: called once per journey when it is closed (at the end, or when memory is full)."""

    def __init__(self, *, wanted: Callable[["Journey"], bool] | None = None,
                 on_finish: Callable[[Journey], None] | None = None, max_open: int = MAX_OPEN_JOURNEYS,
                 max_milestones: int = MAX_MILESTONES_TOTAL) -> None:
        self.wanted = wanted
        self.on_finish = on_finish
        self.max_open = max_open
        self.max_milestones = max_milestones
        # the open journeys, in the engine (oldest opened first); each comes back through _closed
        self.store = _core.JourneyStore(PROTOCOL, self._closed, AckedEntries, max(1, max_open), max_milestones)
        # for wanted only: the followed journeys by the store's seq (their frames), and the SEND records
        # waiting for their receipt (forgotten as the store forgets their SENDs)
        self.followed: dict[int, Journey] = {}
        self.pending_records: OrderedDict[int, dict] = OrderedDict()

    @property
    def closed_early(self) -> int:
        """Journeys closed because too many were open."""
        return self.store.closed_early

    @property
    def milestones(self) -> int:
        """Deliveries and acks kept by the open journeys."""
        return self.store.milestones

    @property
    def milestones_dropped(self) -> int:
        """Deliveries and acks of closed journeys counted, not kept."""
        return self.store.milestones_dropped

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
        self.store.finish()

    # ------------------------------------------------------------------ steps

    def _send(self, rec: dict) -> None:
        cmd, producer = rec.get("command") or {}, rec.get("producer") or {}
        self.store.send(rec["index"], rec["time"], rec["conn"], producer.get("name"), cmd.get("producer_id"),
                        cmd.get("sequence_id"), cmd.get("num_messages") or 1, producer.get("topic"))
        if self.wanted is not None:
            self.pending_records[rec["index"]] = rec
            if len(self.pending_records) > MAX_PENDING_SENDS:
                self.pending_records.popitem(last=False)

    def _receipt(self, rec: dict) -> None:
        ids = _wire_id((rec.get("command") or {}).get("message_id"))
        ledger, entry = ids if ids is not None else (None, None)
        done = self.store.receipt(rec.get("answers"), ledger, entry, (rec.get("producer") or {}).get("topic"),
                                  rec["index"], rec["time"], rec["conn"])
        if self.wanted is None:
            return
        pending = self.pending_records.pop(rec.get("answers"), None) if type(rec.get("answers")) is int else None
        if done is None:
            return
        seq, send_joined = done
        if send_joined:
            self._keep(seq, pending)
        self._keep(seq, rec)

    def _message(self, rec: dict) -> None:
        ids = _wire_id((rec.get("command") or {}).get("message_id"))
        if ids is None:
            return
        consumer = rec.get("consumer") or {}
        cmd = rec["command"]
        seq = self.store.message(ids[0], ids[1], consumer.get("topic"), rec["index"], rec["time"], rec["conn"],
                                 consumer.get("name"), cmd.get("consumer_id"), consumer.get("subscription"),
                                 cmd.get("redelivery_count") or 0,
                                 (rec.get("metadata") or {}).get("num_messages_in_batch"))
        if self.wanted is not None:
            self._keep(seq, rec)

    def _ack(self, rec: dict) -> None:
        cmd = rec.get("command") or {}
        ack_sets = None
        for item in cmd.get("message_id") or ():
            ids = _wire_id(item)
            if ids is not None and item.get("ack_set"):
                ack_set = item["ack_set"]
                words = [w & _WORD if type(w) is int else 0 for w in ack_set] if isinstance(ack_set, list) else []
                if words:  # (an ack_set that is no list acknowledges the whole entry)
                    ack_sets = ack_sets or []
                    ack_sets.append((*ids, words))
        # an ACK with a validation_error says which deliveries the client dropped unread (``discards``)
        joined = self.store.ack(rec["index"], rec["time"], rec["conn"], cmd.get("ack_type"), ack_sets,
                                rec.get("acks"), rec.get("discards"), cmd.get("validation_error"))
        if self.wanted is not None:
            for seq in joined:
                self._keep(seq, rec)

    def _redeliver(self, rec: dict) -> None:
        """A consumer asks for messages again (a negative ack, an ack timeout, or every unacknowledged one): the
        frame joins the journeys of the messages it names, and of the deliveries the analysis says it hands
        back (``redelivers``: a request naming none hands back every unacknowledged one)."""
        if self.wanted is None:  # only a followed message keeps frames
            return
        ids = [ids for ids in map(_wire_id, (rec.get("command") or {}).get("message_ids") or ()) if ids is not None]
        for seq in self.store.redelivered((rec.get("consumer") or {}).get("topic"), ids, rec.get("redelivers")):
            self._keep(seq, rec)

    # ------------------------------------------------------------------ bookkeeping

    def _keep(self, seq: int, rec: dict | None) -> None:
        if rec is None or self.wanted is None:
            return
        journey = self.followed.get(seq)
        if journey is None:
            known = self.store.peek(seq)
            if known is None:
                return
            journey = Journey(known[0], known[1], known[2], known[3])
            if not self.wanted(journey):
                return
            journey.frames = []
            self.followed[seq] = journey
        if journey.frames and journey.frames[-1] is rec:  # an ACK covering several deliveries of one journey
            return
        if len(journey.frames) < MAX_FRAMES_PER_JOURNEY:
            journey.frames.append(rec)
        else:
            journey.frames_dropped += 1

    def _closed(self, seq: int, topic: str | None, ledger: int, entry: int, send: tuple | None,
                receipt: tuple | None, deliveries: list | None, acks: list | None, deliveries_dropped: int,
                acks_dropped: int) -> None:
        journey = Journey(topic, ledger, entry, send, receipt, deliveries, acks,
                          deliveries_dropped=deliveries_dropped, acks_dropped=acks_dropped)
        followed = self.followed.pop(seq, None) if self.followed else None
        if followed is not None:
            journey.frames, journey.frames_dropped = followed.frames, followed.frames_dropped
        if self.on_finish is not None:
            self.on_finish(journey)


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
