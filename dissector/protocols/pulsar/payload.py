"""The payload section of SEND and MESSAGE frames, as plain values (decoded by the compiled core).

Layout after the BaseCommand (big-endian)::

    ([0x0e02][BEM_SIZE u32][BrokerEntryMetadata])?   broker → client only
    ([0x0e01][CRC32C u32])?                           CRC32C over everything after it to the end of the frame
    [METADATA_SIZE u32][MessageMetadata][payload]

The payload is then decrypted (impossible here), decompressed and, when ``num_messages_in_batch`` is present,
split into ``[SMM_SIZE u32][SingleMessageMetadata][payload]`` entries.

An application message (a whole non-batched payload, one batch entry, or one chunk) is a plain dict:
``payload_size`` (None only for an entry of an encrypted batch) and ``payload`` (bytes, None when it cannot
be recovered) always; then only the fields present on the wire: batch_index, sequence_id, partition_key,
ordering_key (bytes), properties, event_time, null_value, null_partition_key, compacted_out, acked,
encrypted, and for a chunk chunk_id, num_chunks, uuid. With ``Options.summary`` the metadata keeps only the
fields one-line views show and the session reads (``crates/engine/src/protocols/pulsar/payload.rs: BRIEF_METADATA``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...problems import Finding


@dataclass(slots=True)
class PayloadSection:
    """The payload section of a SEND or MESSAGE frame, as plain values."""

    checksum: str = "absent"  # valid | invalid | absent | unverified (frame damaged by a capture gap)
    checksum_wire: int | None = None
    checksum_computed: int | None = None
    broker_entry_metadata: dict | None = None
    metadata: dict | None = None  # MessageMetadata in the JSON contract's form
    metadata_size: int | None = None
    compression: int = 0  # the codec's number, also one this schema does not know
    payload_size: int = 0  # bytes as on the wire (compressed, encrypted, batched)
    uncompressed_size: int | None = None  # bytes after decompression, when it was decompressed
    encrypted: bool = False
    messages: list[dict] = field(default_factory=list)
    marker: dict | None = None  # decoded PulsarMarkers message
    findings: list[Finding] = field(default_factory=list)
    # when messages lists fewer than the frame carries (an encrypted batch; a batch beyond max_batch_entries):
    # {"count", "bytes"} of them all, the record's messages_summary
    messages_whole: dict | None = None
