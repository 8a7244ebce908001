//! The ids of the findings Pulsar's decoding and conversation state make (registered by
//! `dissector/protocols/pulsar/problems.py`); [`Pulsar::problem_ids`](crate::protocols::Protocol::problem_ids)
//! is [`PulsarProblem::IDS`].

use crate::problems::problems;

problems! {
    /// A Pulsar finding's id.
    pub enum PulsarProblem {
        AckValidationError => "ack.validation_error",
        AckWholeEntry => "ack.whole_entry",
        ActorUsedAfterClose => "actor.used_after_close",
        BatchCountMismatch => "batch.count_mismatch",
        BatchMalformed => "batch.malformed",
        ChecksumInvalid => "checksum.invalid",
        ChunkAbandoned => "chunk.abandoned",
        ChunkDroppedByClient => "chunk.dropped_by_client",
        ChunkDuplicate => "chunk.duplicate",
        ChunkLost => "chunk.lost",
        ChunkMissing => "chunk.missing",
        ChunkOrphan => "chunk.orphan",
        ChunkRestarted => "chunk.restarted",
        ChunkSizeMismatch => "chunk.size_mismatch",
        ChunkTooLarge => "chunk.too_large",
        CommandExtraSubcommands => "command.extra_subcommands",
        CommandMissingRequired => "command.missing_required",
        CommandMissingSubcommand => "command.missing_subcommand",
        CommandNoType => "command.no_type",
        CommandTrailingBytes => "command.trailing_bytes",
        CommandUnknownEnum => "command.unknown_enum",
        CommandUnknownFields => "command.unknown_fields",
        CommandUnknownType => "command.unknown_type",
        CommandUnparsable => "command.unparsable",
        ConsumerUnacked => "consumer.unacked",
        FlowOverrun => "flow.overrun",
        FrameCmdSize => "frame.cmd_size",
        FrameSizeMismatch => "frame.size_mismatch",
        FrameTooShort => "frame.too_short",
        FrameTruncated => "frame.truncated",
        LookupRedirectLoop => "lookup.redirect_loop",
        MarkerUnparsable => "marker.unparsable",
        MessageChecksumRequired => "message.checksum_required",
        MessageEarlyDelivery => "message.early_delivery",
        MessageRedelivered => "message.redelivered",
        PayloadBrokerEntryMetadata => "payload.broker_entry_metadata",
        PayloadChecksumCut => "payload.checksum_cut",
        PayloadDecompression => "payload.decompression",
        PayloadIncomplete => "payload.incomplete",
        PayloadMetadataMissingRequired => "payload.metadata_missing_required",
        PayloadMetadataSize => "payload.metadata_size",
        PayloadMetadataUnparsable => "payload.metadata_unparsable",
        PayloadSnappyFramed => "payload.snappy_framed",
        ProducerExclusiveConflict => "producer.exclusive_conflict",
        SendUnknownProducer => "send.unknown_producer",
        SequenceGap => "sequence.gap",
        SequenceRegression => "sequence.regression",
        ServerError => "server.error",
    }
}
