//! Bounded state for the analysis: tables that remember insertion order and forget their oldest entries, and
//! saying so (`STATE_DROPPED`) when a cap makes them forget.

use std::collections::VecDeque;
use std::hash::Hash;

use super::Event;
use crate::name;
use crate::value::{entry, Map, Name};

pub use crate::FastMap;

/// A hash map that keeps the order in which keys were first inserted (as a Python dict): replacing a
/// value keeps its place, `pop_oldest` and iteration go oldest first, removal by key is O(1).
///
/// The order is a queue of (stamp, key); a removed or moved key leaves a stale queue entry behind (its stamp
/// no longer matches), skipped when met and compacted away once stale entries outnumber live ones.
pub struct OrderedMap<K, V> {
    entries: FastMap<K, (V, u64)>,
    order: VecDeque<(u64, K)>,
    next_stamp: u64,
}

impl<K: Hash + Eq + Clone, V> Default for OrderedMap<K, V> {
    fn default() -> Self {
        OrderedMap { entries: FastMap::default(), order: VecDeque::new(), next_stamp: 0 }
    }
}

impl<K: Hash + Eq + Clone, V> OrderedMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(v, _)| v)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.entries.get_mut(key).map(|(v, _)| v)
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// Insert or replace (a replaced value keeps its place).
    pub fn insert(&mut self, key: K, value: V) {
        if let Some(slot) = self.entries.get_mut(&key) {
            slot.0 = value;
            return;
        }
        let stamp = self.stamp();
        self.order.push_back((stamp, key.clone()));
        self.entries.insert(key, (value, stamp));
    }

    /// Move an existing key to the newest place.
    pub fn move_to_end(&mut self, key: &K) {
        let stamp = self.stamp();
        if let Some(slot) = self.entries.get_mut(key) {
            slot.1 = stamp;
            self.order.push_back((stamp, key.clone()));
            self.compact_if_stale();
        }
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let removed = self.entries.remove(key).map(|(v, _)| v);
        if removed.is_some() {
            self.compact_if_stale();
        }
        removed
    }

    pub fn pop_oldest(&mut self) -> Option<(K, V)> {
        while let Some((stamp, key)) = self.order.pop_front() {
            if self.entries.get(&key).is_some_and(|(_, s)| *s == stamp) {
                let (value, _) = self.entries.remove(&key)?;
                return Some((key, value));
            }
        }
        None
    }

    pub fn oldest(&self) -> Option<(&K, &V)> {
        self.iter().next()
    }

    /// Entries oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.order.iter().filter_map(move |(stamp, key)| match self.entries.get_key_value(key) {
            Some((k, (v, s))) if s == stamp => Some((k, v)),
            _ => None,
        })
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
    }

    fn stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }

    fn compact_if_stale(&mut self) {
        if self.order.len() > 2 * self.entries.len() + 32 {
            let entries = &self.entries;
            self.order.retain(|(stamp, key)| entries.get(key).is_some_and(|(_, s)| s == stamp));
        }
    }
}

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

    pub fn drop(&mut self, option: &'static Name, what: &'static Name, limit: u64, time: f64, packet: u64) -> Option<Event> {
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

fn state_dropped(conn: u64, option: &'static Name, what: &'static Name, limit: u64, count: u64, time: f64, packet: u64) -> Event {
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

    #[test]
    fn stale_order_entries_do_not_pile_up() {
        let mut table = OrderedMap::new();
        for i in 0..10_000u64 {
            table.insert(i, ());
            table.remove(&i);
        }
        assert!(table.order.len() <= 64);
    }
}
