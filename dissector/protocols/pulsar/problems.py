"""The problem ids of the Pulsar protocol: declared here once, with their severity and message template."""

from __future__ import annotations

from ...problems import ERROR, NOTE, WARNING, Pieces, register


def _actor(name: str | None, ident) -> str:
    return f"{name!r} ({ident})" if name else str(ident)


# -- framing and BaseCommand
register("frame.too_short", ERROR, "frame of {length} bytes is too short for its size fields")
register("frame.size_mismatch", ERROR, "TOTAL_SIZE {total_size} does not match the {following} bytes that follow it")
register("frame.cmd_size", ERROR, "CMD_SIZE {cmd_size} is larger than TOTAL_SIZE {total_size} allows")
register("frame.truncated", ERROR, "command cut short")
register("command.unparsable", ERROR, "BaseCommand does not parse: {error}")
register("command.no_type", ERROR, "BaseCommand has no type field")
register("command.unknown_type", WARNING, "unknown command type {number}")
register("command.missing_subcommand", ERROR, "{type} frame has no {field} field")
register("command.extra_subcommands", WARNING, lambda p: "BaseCommand also carries sub-commands for "
         + ", ".join(p["types"]))
register("command.unknown_fields", WARNING, lambda p: "BaseCommand has fields unknown to this dissector: "
         + ", ".join(map(str, p["fields"])))
register("command.missing_required", ERROR, lambda p: f"{p['type']} lacks required fields: " + ", ".join(p["fields"]))
register("command.unknown_enum", WARNING, lambda p: f"{p['type']} required fields hold values unknown to this "
         "dissector: " + ", ".join(p["fields"]))
register("command.trailing_bytes", WARNING, "{length} unexpected bytes after a {type} command (only SEND and "
         "MESSAGE carry a payload)")

# -- payload section
register("payload.broker_entry_metadata", ERROR, lambda p: {
    "cut": "broker entry metadata header cut short",
    "size": f"broker entry metadata size {p.get('size')} runs past the end of the frame",
    "unparsable": f"broker entry metadata does not parse: {p.get('error')}",
}[p["case"]])
register("payload.checksum_cut", ERROR, "checksum field cut short")
register("checksum.invalid", ERROR, "checksum mismatch: frame says 0x{wire:08x}, computed 0x{computed:08x}")
register("payload.metadata_size", ERROR, lambda p: "payload section has no metadata size" if "size" not in p else
         f"metadata size {p['size']} runs past the end of the frame ({p['left']} bytes left)")
register("payload.metadata_unparsable", ERROR, "MessageMetadata does not parse: {error}")
register("payload.metadata_missing_required", ERROR, lambda p: "MessageMetadata lacks required fields: "
         + ", ".join(p["fields"]))
register("payload.incomplete", WARNING, "payload incomplete: only {captured} bytes of it are in the capture")
register("payload.decompression", ERROR, lambda p: _DECOMPRESSION[p["case"]].format(**p))
register("payload.snappy_framed", WARNING, "SNAPPY payload in Snappy's framing format (stream identifier sNaPpY), "
         "as pulsar-rs writes it: the Java and C++ clients read only raw Snappy blocks and cannot decompress it")
register("batch.malformed", ERROR, lambda p: f"batch entry {p['entry']}: " + _BATCH[p["case"]].format(**p))
register("batch.count_mismatch", ERROR, "batch holds {entries} entries but num_messages_in_batch is {expected}")
register("batch.entries_truncated", NOTE, "batch of {entries} entries: its record lists the first {kept} "
         "(max_batch_entries), {more} more are counted in messages_summary, not listed",
         "A batch holds more entries than the max_batch_entries option lets a record list: every entry is read "
         "and counted (messages_summary, stats), only the first are kept as messages. Raise it with "
         "-o max_batch_entries=N.")
register("marker.unparsable", ERROR, "marker body ({marker}) does not parse: {error}")

_DECOMPRESSION = {
    "unknown_codec": "unknown compression type {codec}: payload left compressed",
    "over_limit": "{codec}: uncompressed_size {declared} exceeds the --max-decompressed limit of {limit} bytes; "
                  "not decompressed",
    "bomb_declared": "{codec}: output would exceed uncompressed_size {declared}; not decompressed",
    "bomb_limit": "{codec}: output would exceed the {limit}-byte limit (decompression bomb or wrong "
                  "uncompressed_size); not decompressed",
    "failed": "{codec} decompression failed: {error}",
    "size_mismatch": "{codec}: uncompressed_size says {declared} bytes but the payload decompressed to {actual}",
}
_BATCH = {
    "stray": "{left} stray bytes after the last entry",
    "metadata_size": "metadata size {size} runs past the end of the payload",
    "unparsable": "SingleMessageMetadata does not parse: {error}",
    "no_payload_size": "SingleMessageMetadata has no payload_size",
    "payload_size": "payload_size {size} runs past the end of the payload ({left} bytes left)",
}

# -- chunked messages (texts number chunks from 1, as the timeline line does; params keep the wire chunk_id)
register("chunk.restarted", WARNING, "chunked message {uuid!r} restarted after {seen} of {num_chunks} chunks")
register("chunk.abandoned", WARNING, lambda p: (
    f"more than {p['limit']} chunked messages in progress" if "limit" in p
    else f"more than {p['total_bytes']} bytes of compressed chunks held over every connection "
         "(max_chunk_bytes_total)" if "total_bytes" in p
    else f"the memory budget ({p['memory_budget']} bytes) spent over every holder (memory_budget)"
         if "memory_budget" in p
    else f"more than {p['bytes']} bytes of compressed chunks held (max_chunk_bytes)")
    + f": gave up on {p['uuid']!r} after {p['seen']} of {p['num_chunks']} chunks")
register("chunk.orphan", WARNING, lambda p: f"chunk {p['chunk_id'] + 1}/{p['num_chunks']} of {p['uuid']!r} without "
         "its first chunk in the capture")
register("chunk.duplicate", WARNING, lambda p: f"duplicate chunk {p['chunk_id'] + 1} of {p['uuid']!r}")
register("chunk.missing", ERROR, lambda p: f"chunk {p['chunk_id'] + 1} of {p['uuid']!r} arrived but chunk "
         f"{p['expected'] + 1} is missing; message {p['uuid']!r} cannot be reassembled")
register("chunk.lost", WARNING, lambda p: f"chunk {p['chunk_id'] + 1} of {p['uuid']!r} is not all in the capture; "
         "the message's payload cannot be recovered")
register("chunk.dropped_by_client", WARNING, lambda p: {
    "duplicate": lambda: f"chunk {p['chunk_id'] + 1}/{p['num_chunks']} of {p['uuid']!r} again after {p['seen']} "
                         "chunk(s): the consumer drops the message; the application never gets it",
    "out_of_order": lambda: f"chunk {p['chunk_id'] + 1}/{p['num_chunks']} of {p['uuid']!r} while the consumer "
                            f"expects chunk {p['expected'] + 1}: it drops the message ({p['seen']} chunk(s) held); "
                            "the application never gets it",
    "uncached": lambda: f"chunk {p['chunk_id'] + 1}/{p['num_chunks']} of {p['uuid']!r}: the consumer holds nothing "
                        "of this message (" + (f"dropped at frame {p['dropped_at']}" if "dropped_at" in p
                                               else "its first chunk was not delivered on this connection")
                        + ") and discards the chunk",
    "checksum": lambda: f"chunk {p['chunk_id'] + 1}/{p['num_chunks']} of {p['uuid']!r} fails its checksum: the "
                        "consumer discards it, so the message cannot complete",
    "cache_full": lambda: f"more than {p['limit']} chunked messages in progress for this consumer: it drops "
                          f"{p['uuid']!r} after {p['seen']} of {p['num_chunks']} chunks",
    "expired": lambda: f"no chunk of {p['uuid']!r} for {p['idle_s']:.1f} s: the consumer's {p['expire_s']:g} s "
                       f"expiry drops it after {p['seen']} of {p['num_chunks']} chunks",
    "decompression": lambda: f"the consumer cannot decompress the reassembled {p['uuid']!r} ({p['seen']} chunks) "
                             "and drops it",
}[p["reason"]](), "the consumer (C++ client 4.2, ConsumerImpl::processMessageChunk) drops a chunked message: the "
   "application never gets it (reason: duplicate, out_of_order, uncached, checksum, cache_full, expired, "
   "decompression)")
register("chunk.size_mismatch", ERROR, "chunks of {uuid!r} add up to {size} bytes, total_chunk_msg_size says {total}")
register("chunk.too_large", WARNING, "compressed chunked message {uuid!r} is larger than the decompression limit")
register("UNFINISHED_CHUNKS", WARNING, "chunked message {uuid!r}: {seen} of {num_chunks} chunks seen (frames "
         "{chunks}); the rest is not in the capture")

# -- the conversation
register("server.error", ERROR, lambda p: f"broker answered {p['type']} {p['error']}"
         + (f": {p['message']}" if p.get("message") is not None else ""))
register("send.unknown_producer", WARNING, "SEND for producer {producer_id}, which was not created on this connection")
register("sequence.regression", NOTE, lambda p: f"sequence_id {p['first']} after {p['previous']} from producer "
         + _actor(p.get("name"), p["producer_id"]))
register("sequence.gap", NOTE, lambda p: f"sequence_id jumps from {p['previous']} to {p['first']} "
         f"({p['first'] - p['previous'] - 1} not sent on this connection)")
register("message.redelivered", NOTE, Pieces("message {ledger}:{entry} delivered again",
                                             ("present", "first_frame", " (delivery {delivery}, first in frame {first_frame})"),
                                             ("truthy", "redelivery_count", ", redelivery_count {redelivery_count}"),
                                             # what asked for it (a negative ack and an ack timeout send the same
                                             # REDELIVER: the wire cannot tell them apart)
                                             ("present", "cause", "; cause {cause}"),
                                             ("present", "cause_frame", " (frame {cause_frame})"),
                                             ("present", "cause_conn", " (subscribed before on c{cause_conn})")))
register("REDELIVERED", WARNING, lambda p: f"{p['more_messages']} more message(s) delivered more than once to "
         f"consumer {_actor(p.get('name'), p['consumer_id'])} ({p['count']} deliveries; max_redelivered_reported)"
         if "more_messages" in p else
         f"message {p['ledger']}:{p['entry']} delivered {p['count']} time(s) "
         f"to consumer {_actor(p.get('name'), p['consumer_id'])} (frames {_frames(p['frames'], p['count'])})"
         + (f", redelivery_count up to {p['redelivery_count']}" if p.get("redelivery_count") else ""),
         "one per message a consumer got more than once (or the broker marked redelivered), said when the "
         "consumer closes or its connection ends")
register("producer.exclusive_conflict", WARNING, lambda p: f"{p['mode']} producer on {p['topic']} while producer "
         f"{_actor(p.get('other_name'), p['other_producer_id'])} ({p['other_mode']}, connection c{p['other_conn']}) "
         "still holds it")
def _held(p: dict) -> str:
    return (f"SUBSCRIBE (frame {p['subscribe_frame']}, {p['type']}) to {p['subscription']} on {p['topic']} while "
            f"consumer {_actor(p.get('other_name'), p['other_consumer_id'])} on c{p['other_conn']} holds it Exclusive")


register("subscribe.exclusive_held", WARNING, lambda p: _held(p) + f": refused ({p['error']})",
         "the broker refused a SUBSCRIBE, of any type, to a subscription another consumer holds Exclusive (its "
         "SUBSCRIBE succeeded; it has neither closed, nor sought, nor lost its connection)")
register("SUBSCRIBE_HELD_AT_END", WARNING, lambda p: _held(p) + ": never answered",
         "a SUBSCRIBE to a subscription another consumer held Exclusive got no answer before its connection ended "
         "(subscribe.exclusive_held, unanswered: a broker may close the connection instead of refusing)")
register("flow.overrun", WARNING, lambda p: "broker pushed a MESSAGE to consumer "
         + _actor(p.get("name"), p["consumer_id"]) + " with no permits left")
register("lookup.redirect_loop", WARNING, "lookup of {topic} redirected {limit} times on this connection")

register("actor.used_after_close", WARNING, lambda p: f"{p['type']} for {p['actor']} "
         + _actor(p.get("name"), p["id"]) + " after the client closed it")
register("actor.closed_again", NOTE, lambda p: f"{p['type']} for {p['actor']} " + _actor(p.get("name"), p["id"])
         + ", closed already")
register("consumer.unacked", WARNING, lambda p: f"consumer {_actor(p.get('name'), p['consumer_id'])} closed with "
         f"{p['count']} delivered MESSAGE frame(s) never acknowledged (frames {_frames(p['frames'], p['count'])})")
register("ack.validation_error", WARNING, lambda p: f"consumer {_actor(p.get('name'), p['consumer_id'])} could not "
         f"read {p['messages']} message id(s) ({p['error']}) and acknowledged them with that error: the broker counts "
         "them acknowledged, the application never received them"
         + (f" (MESSAGE frames {_frames(p['frames'], len(p['frames']))})" if p.get("frames") else ""))
register("ack.whole_entry", NOTE, "ack of {ledger}:{entry} with batch_index {batch_index} and no ack_set: the broker "
         "acknowledges the whole entry (every message of its batch); later acks of its other messages add nothing")
register("message.checksum_required", WARNING, "MESSAGE without the magic number and CRC32C to a client ({client_version}) "
         "that rejects such frames: pulsar-rs 6.9.1 fails to decode it and drops the connection")
register("UNACKED_AT_END", WARNING, lambda p: f"consumer {_actor(p.get('name'), p['consumer_id'])} had {p['count']} "
         f"delivered MESSAGE frame(s) never acknowledged when its connection ended (frames "
         f"{_frames(p['frames'], p['count'])})")
register("message.early_delivery", WARNING, lambda p: f"delivered {p['early_ms'] / 1000:.3f} s before its "
         "deliver_at_time")


def _frames(frames: list, count: int) -> str:
    return ", ".join(map(str, frames)) + (f", … ({count})" if count > len(frames) else "")


register("NOT_PULSAR", ERROR, "this direction speaks {protocol}; it is not decoded",
         "TLS, HTTP or SSH on a Pulsar port")
