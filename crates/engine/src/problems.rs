//! Problem ids as enums, so the compiler checks every id the engine emits: each protocol declares its own in
//! its folder (`protocols/<name>/problems.rs`), and this module the ids of the generic stages — the analysis's
//! request/response pairing and the transport's damaged frames ([`GenericProblem`]), the capture reader's
//! notes ([`CaptureProblem`]). `dissector/problems.py` (and the Python modules it names) registers each id with
//! its severity and text; `tests/test_contract.py` reads the ids off the `Variant => "id"` lines of these files.
//!
//! A variant gives its id text ([`id`](GenericProblem::id)) and its declared [`Name`](crate::value::Name)
//! ([`name`](GenericProblem::name), made once for all its findings), which `finding!` takes as the
//! [`Finding`](crate::model::Finding)'s id.

/// `problems! { pub enum X { Variant => "group.id", ... } }`: the enum, and for it `ALL` (its variants in
/// declaration order), `IDS` (their ids, in the same order), `id()` and `name()`.
macro_rules! problems {
    (
        $(#[$meta:meta])*
        $vis:vis enum $enum:ident {
            $($(#[$vmeta:meta])* $variant:ident => $id:literal),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $enum {
            $($(#[$vmeta])* $variant),*
        }

        impl $enum {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$enum] = &[$($enum::$variant),*];
            /// Every id, in declaration order (`IDS[v as usize] == v.id()`).
            pub const IDS: &'static [&'static str] = &[$($id),*];

            /// The id's text, as `dissector/problems.py` registers it.
            pub const fn id(self) -> &'static str {
                $enum::IDS[self as usize]
            }

            /// The id as a declared name: one per variant, made once (a finding allocates nothing for it).
            pub fn name(self) -> &'static $crate::value::Name {
                static NAMES: [$crate::value::Name; $enum::IDS.len()] = [$($crate::value::Name::new($id)),*];
                &NAMES[self as usize]
            }
        }
    };
}

pub(crate) use problems;

problems! {
    /// The findings of the generic stages: the analysis's request/response pairing, and the transport's frames
    /// damaged by a gap or the capture's end (made where the pipeline hands a PDU to decoding).
    pub enum GenericProblem {
        FrameCutAtEnd => "frame.cut_at_end",
        FrameGapDamaged => "frame.gap_damaged",
        FrameOversizedHead => "frame.oversized_head",
        ProtobufRepeatedElided => "protobuf.repeated_elided",
        RequestDuplicateId => "request.duplicate_id",
        ResponseBeforeRequest => "response.before_request",
        ResponseSlow => "response.slow",
        ResponseUnmatched => "response.unmatched",
    }
}

problems! {
    /// The capture reader's notes about the file (`capture::Note`; registered by `dissector/capture/files.py`).
    pub enum CaptureProblem {
        BlockSkipped => "capture.block_skipped",
        CaplenBeyondBlock => "capture.caplen_beyond_block",
        Concatenated => "capture.concatenated",
        LinktypeReservedBits => "capture.linktype_reserved_bits",
        ModifiedPcap => "capture.modified_pcap",
        PcapVersion => "capture.pcap_version",
        PcapngVersion => "capture.pcapng_version",
        ShortBlock => "capture.short_block",
        SimpleBlockSkipped => "capture.simple_block_skipped",
        SimpleBlockTime => "capture.simple_block_time",
        UndefinedInterface => "capture.undefined_interface",
        UnsupportedLinktype => "capture.unsupported_linktype",
    }
}
