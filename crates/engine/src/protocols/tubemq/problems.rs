//! The ids of the findings TubeMQ's decoding makes (registered by `dissector/protocols/tubemq/problems.py`);
//! [`TubeMq::problem_ids`](crate::protocols::Protocol::problem_ids) is [`TubeMqProblem::IDS`].

use crate::problems::problems;

problems! {
    /// A TubeMQ finding's id.
    pub enum TubeMqProblem {
        BadFlag => "tubemq.bad_flag",
        BlockOversized => "tubemq.block_oversized",
        ChecksumInvalid => "tubemq.checksum_invalid",
        ConsumeWait => "tubemq.consume_wait",
        EnvelopeCut => "tubemq.envelope_cut",
        ErrorCode => "tubemq.error_code",
        Exception => "tubemq.exception",
        MessageAttributes => "tubemq.message_attributes",
        MessagesTruncated => "tubemq.messages_truncated",
        MissingRequired => "tubemq.missing_required",
        ServiceMismatch => "tubemq.service_mismatch",
        StandbyMaster => "tubemq.standby_master",
        TooShort => "tubemq.too_short",
        TrailingBytes => "tubemq.trailing_bytes",
        Truncated => "tubemq.truncated",
        UndecodableMethod => "tubemq.undecodable_method",
        UnknownMethod => "tubemq.unknown_method",
        Unparsable => "tubemq.unparsable",
    }
}
