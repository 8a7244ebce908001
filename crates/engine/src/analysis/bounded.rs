//! Bounded state for the analysis: tables that remember insertion order and forget their oldest entries, and
//! saying so (`STATE_DROPPED`) when a cap makes them forget.

use std::hash::Hash;

use super::Event;
use crate::name;
use crate::value::{entry, Map, Name};

pub use crate::ordered::OrderedMap;
pub use crate::FastMap;

/// Insert; beyond `cap` forget the oldest entry. True when an entry was forgotten.
pub fn remember_bounded<K: Hash + Eq + Clone, V>(table: &mut OrderedMap<K, V>, key: K, value: V, cap: usize) -> bool {
    table.insert(key, value);
    if table.len() > cap {
        table.pop_oldest();
        return true;
    }
    false
}

/// What the caps of one connection dropped: a STATE_DROPPED event at the first drop of each kind, and the
/// total when the connection closes (so a one-sided capture says it once, not once per frame).
pub struct DropCounter {
    conn: u64,
    dropped: Vec<Dropped>, // in the order of their first drop
}

struct Dropped {
    option: &'static Name,
    what: &'static Name,
    limit: u64,
    count: u64,
}

impl DropCounter {
    pub fn new(conn: u64) -> DropCounter {
        DropCounter { conn, dropped: Vec::new() }
    }

    pub fn drop(
        &mut self,
        option: &'static Name,
        what: &'static Name,
        limit: u64,
        time: f64,
        packet: u64,
    ) -> Option<Event> {
        if let Some(known) = self.dropped.iter_mut().find(|d| d.option == option) {
            known.count += 1;
            return None;
        }
        self.dropped.push(Dropped { option, what, limit, count: 1 });
        Some(state_dropped(self.conn, option, what, limit, 1, time, packet))
    }

    pub fn close(&self, time: f64, packet: u64, out: &mut Vec<Event>) {
        for d in self.dropped.iter().filter(|d| d.count > 1) {
            out.push(state_dropped(self.conn, d.option, d.what, d.limit, d.count, time, packet));
        }
    }
}

fn state_dropped(
    conn: u64,
    option: &'static Name,
    what: &'static Name,
    limit: u64,
    count: u64,
    time: f64,
    packet: u64,
) -> Event {
    let details: Map = vec![
        entry(name!("option"), option),
        entry(name!("what"), what),
        entry(name!("limit"), limit),
        entry(name!("dropped"), count),
    ];
    Event::new(name!("STATE_DROPPED"), time, packet, Some(conn), details)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_oldest_first_and_keeps_places() {
        let mut table = OrderedMap::new();
        let dropped: Vec<bool> = (0..10).map(|i| remember_bounded(&mut table, i, i * 10, 4)).collect();
        assert_eq!(table.keys().copied().collect::<Vec<_>>(), vec![6, 7, 8, 9]);
        assert_eq!(dropped, [[false; 4].as_slice(), [true; 6].as_slice()].concat());
        table.insert(6, 0); // replaced in place
        table.move_to_end(&7);
        assert_eq!(table.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(), vec![(6, 0), (8, 80), (9, 90), (7, 70)]);
        assert_eq!(table.remove(&8), Some(80));
        assert_eq!(table.pop_oldest(), Some((6, 0)));
        assert_eq!(table.keys().copied().collect::<Vec<_>>(), vec![9, 7]);
    }
}
