//! The problem id enums (`src/problems.rs`, `src/protocols/*/problems.rs`): unique ids of the registry's
//! form, each variant's id and name agreeing, and each protocol's `problem_ids()` its enum's list.

use std::collections::HashSet;

use pulsar_dissect_engine::finding;
use pulsar_dissect_engine::problems::{CaptureProblem, GenericProblem};
use pulsar_dissect_engine::protocols::pulsar::problems::PulsarProblem;
use pulsar_dissect_engine::protocols::tubemq::problems::TubeMqProblem;
use pulsar_dissect_engine::protocols::{by_name, REGISTRY};
use pulsar_dissect_engine::value::{entry, Value};

/// Every enum's ids, by the enum's name.
fn all_enums() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("GenericProblem", GenericProblem::IDS),
        ("CaptureProblem", CaptureProblem::IDS),
        ("PulsarProblem", PulsarProblem::IDS),
        ("TubeMqProblem", TubeMqProblem::IDS),
    ]
}

#[test]
fn ids_are_unique_across_all_enums() {
    let mut seen = HashSet::new();
    let mut twice = Vec::new();
    for (_, ids) in all_enums() {
        for id in ids {
            if !seen.insert(*id) {
                twice.push(*id);
            }
        }
    }
    assert_eq!(twice, Vec::<&str>::new());
    assert_eq!(seen.len(), 89);
}

/// `group.name`: lower-case letters and underscores either side of one dot (`dissector/problems.py` takes the
/// group off the part before the dot; upper-case ids are events, not findings).
fn well_formed(id: &str) -> bool {
    let part = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    matches!(id.split_once('.'), Some((group, name)) if part(group) && part(name))
}

#[test]
fn every_id_is_group_dot_name() {
    let bad: Vec<&str> =
        all_enums().into_iter().flat_map(|(_, ids)| ids.iter().copied()).filter(|id| !well_formed(id)).collect();
    assert_eq!(bad, Vec::<&str>::new());
    assert!(!well_formed("GAP") && !well_formed("a.b.c") && !well_formed("a.") && !well_formed("chunk.Lost"));
}

#[test]
fn the_protocol_enums_keep_to_their_group() {
    assert!(TubeMqProblem::IDS.iter().all(|id| id.starts_with("tubemq.")));
    assert!(CaptureProblem::IDS.iter().all(|id| id.starts_with("capture.")));
    assert!(PulsarProblem::IDS.iter().all(|id| !id.starts_with("tubemq.") && !id.starts_with("capture.")));
}

#[test]
fn each_variant_gives_its_id_and_one_name() {
    fn check<P: Copy + std::fmt::Debug>(
        all: &[P],
        ids: &[&str],
        id: fn(P) -> &'static str,
        name: fn(P) -> &'static str,
    ) {
        assert_eq!(all.len(), ids.len());
        for (variant, expected) in all.iter().zip(ids) {
            assert_eq!(id(*variant), *expected, "{variant:?}");
            assert_eq!(name(*variant), *expected, "{variant:?}");
        }
    }
    check(PulsarProblem::ALL, PulsarProblem::IDS, PulsarProblem::id, |p| p.name().as_str());
    check(TubeMqProblem::ALL, TubeMqProblem::IDS, TubeMqProblem::id, |p| p.name().as_str());
    check(GenericProblem::ALL, GenericProblem::IDS, GenericProblem::id, |p| p.name().as_str());
    check(CaptureProblem::ALL, CaptureProblem::IDS, CaptureProblem::id, |p| p.name().as_str());
    // one Name per variant, made once: every finding of an id shares it
    assert!(std::ptr::eq(PulsarProblem::ChunkLost.name(), PulsarProblem::ChunkLost.name()));
    assert!(!std::ptr::eq(PulsarProblem::ChunkLost.name(), PulsarProblem::ChunkMissing.name()));
}

#[test]
fn each_protocols_problem_ids_are_its_enums() {
    assert_eq!(by_name("pulsar").expect("pulsar").problem_ids(), PulsarProblem::IDS);
    assert_eq!(by_name("tubemq").expect("tubemq").problem_ids(), TubeMqProblem::IDS);
    // every protocol of the registry is checked above
    let mut names: Vec<&str> = REGISTRY.iter().map(|p| p.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["pulsar", "tubemq"]);
}

#[test]
fn finding_takes_the_variant_and_keeps_its_params_in_order() {
    let f = finding!(PulsarProblem::PayloadMetadataSize, "size" => 7i64, "left" => 3i64);
    assert_eq!(f.id.as_str(), "payload.metadata_size");
    let keys: Vec<&str> = f.params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["size", "left"]);
    assert_eq!(
        f.params,
        vec![entry(pulsar_dissect_engine::name!("size"), 7i64), entry(pulsar_dissect_engine::name!("left"), 3i64)]
    );
    assert_eq!(f.params[0].1, Value::Int(7));
    let mut json = Vec::new();
    f.write_json(&mut json);
    assert_eq!(String::from_utf8(json).unwrap(), r#"{"id":"payload.metadata_size","params":{"size":7,"left":3}}"#);
}
