//! Message journeys through their generic face: a protocol's store reached by name in the registry
//! (`Protocol::journeys`), fed the fields of a SEND, its receipt, two deliveries and their acks, and each
//! closed journey read back as plain data (`ClosedJourney`), its names read from the store.

use pulsar_dissect_engine::journeys::{
    AckFields, AckedEntries, ClosedJourney, JourneyAck, JourneyCounts, JourneyDelivery, JourneyHead, JourneyTracker,
    MessageFields, ReceiptInfo, Receipted, SendFields,
};
use pulsar_dissect_engine::protocols::{by_name, REGISTRY};

fn store_of(protocol: &str) -> Option<Box<dyn JourneyTracker>> {
    by_name(protocol).expect("a protocol of the registry").journeys(10, 100)
}

fn delivery(ledger: u64, entry: u64, index: u64, redelivery_count: u32) -> MessageFields<'static> {
    MessageFields {
        ledger,
        entry,
        topic: Some("persistent://t"),
        index,
        time: index as f64,
        conn: 2,
        consumer: Some("c"),
        consumer_id: Some(4),
        subscription: Some("s"),
        redelivery_count,
        batch_size: Some(3),
    }
}

/// Every journey closed, as owned text (the names borrowed from the store are read inside `next_closed`).
fn closed(store: &mut dyn JourneyTracker) -> Vec<String> {
    let mut out = Vec::new();
    while store.next_closed(&mut |journey: &ClosedJourney| out.push(format!("{journey:?}"))) {}
    out
}

#[test]
fn the_registry_says_which_protocols_keep_journeys() {
    let keeping: Vec<&str> = REGISTRY.iter().filter(|p| p.journeys(1, 1).is_some()).map(|p| p.name()).collect();
    assert_eq!(keeping, ["pulsar"]);
    assert!(store_of("tubemq").is_none());
}

#[test]
fn a_journey_closed_comes_back_as_plain_data() {
    let mut store = store_of("pulsar").expect("Pulsar keeps journeys");
    let send = SendFields {
        index: 1,
        time: 1.0,
        conn: 1,
        producer: Some("p"),
        producer_id: Some(7),
        sequence_id: Some(40),
        messages: 3,
        topic: Some("persistent://t"),
    };
    store.send(send);
    let receipt = ReceiptInfo { index: 2, time: 2.5, conn: 1 };
    assert_eq!(store.receipt(Some(1), Some((9, 5)), None, receipt), Some(Receipted { seq: 0, send_joined: true }));
    assert_eq!(store.message(delivery(9, 5, 3, 0)), 0);
    assert_eq!(store.message(delivery(9, 5, 6, 1)), 0);
    let ack = AckFields {
        index: 7,
        time: 7.0,
        conn: 2,
        ack_type: Some("Individual"),
        ack_sets: vec![(9, 5, vec![0b100])],
        acks: vec![6],
        discards: vec![3],
        discarded: Some("ChecksumMismatch"),
    };
    assert_eq!(store.ack(&ack), [0, 0]);
    assert_eq!(store.redelivered(Some("persistent://t"), &[(9, 5)], &[]), [0]);
    // the SEND comes back as it was fed
    let head = JourneyHead { topic: Some("persistent://t"), ledger: 9, entry: 5, send: Some(send) };
    assert_eq!(store.head(0), Some(head));
    assert_eq!(store.head(1), None);
    assert_eq!(store.counts(), JourneyCounts { open: 1, milestones: 4, closed_early: 0, milestones_dropped: 0 });

    assert!(closed(store.as_mut()).is_empty(), "nothing closed before the end");
    assert!(store.close_next());
    assert!(!store.close_next());
    let words = [0b100u64];
    let delivered = |index: u64, redelivery_count| JourneyDelivery {
        index,
        time: index as f64,
        conn: 2,
        consumer: Some("c"),
        consumer_id: Some(4),
        subscription: Some("s"),
        redelivery_count,
    };
    let acked = |delivery: u64, batches, discarded| JourneyAck {
        index: 7,
        time: 7.0,
        conn: 2,
        ack_type: Some("Individual"),
        delivery,
        batches,
        discarded,
    };
    let want = ClosedJourney {
        seq: 0,
        head,
        receipt: Some(receipt),
        deliveries: vec![delivered(3, 0), delivered(6, 1)],
        acks: vec![
            acked(6, Some(AckedEntries { words: &words, width: 3 }), None),
            acked(3, Some(AckedEntries { words: &words, width: 3 }), Some("ChecksumMismatch")),
        ],
        deliveries_dropped: 0,
        acks_dropped: 0,
    };
    assert_eq!(closed(store.as_mut()), [format!("{want:?}")]);
    assert_eq!(store.counts(), JourneyCounts::default(), "the journey freed");
}
