//! A hash map that remembers insertion order, as a Python dict does: the one the transport's and the
//! analysis' bounded tables (and the statistics) forget their oldest entries with.

use std::collections::VecDeque;
use std::hash::Hash;

use crate::FastMap;

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

    /// The oldest entry; the stale order entries before it are dropped on the way, so a loop that looks at
    /// the oldest and removes it stays linear.
    pub fn oldest(&mut self) -> Option<(&K, &V)> {
        while let Some((stamp, key)) = self.order.front() {
            if self.entries.get(key).is_some_and(|(_, s)| s == stamp) {
                break;
            }
            self.order.pop_front();
        }
        let (_, key) = self.order.front()?;
        self.entries.get_key_value(key).map(|(k, (v, _))| (k, v))
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

    /// The values, in no particular order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.values_mut().map(|(v, _)| v)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
    }

    /// Give memory back when the table holds far fewer entries than it has room for: a table trimmed to a
    /// smaller share of a budget would otherwise keep the room of its largest size (a hash map never shrinks
    /// by itself), and tables that filled one after another would add up to more than the budget.
    pub fn shrink_if_sparse(&mut self) {
        if self.entries.capacity() > 4 * self.entries.len().max(256) {
            let entries = &self.entries;
            self.order.retain(|(stamp, key)| entries.get(key).is_some_and(|(_, s)| s == stamp));
            self.entries.shrink_to_fit();
            self.order.shrink_to_fit();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_order_entries_do_not_pile_up() {
        let mut table = OrderedMap::new();
        for i in 0..10_000u64 {
            table.insert(i, ());
            table.remove(&i);
        }
        assert!(table.order.len() <= 64);
    }

    #[test]
    fn a_trimmed_table_gives_its_room_back() {
        let mut table = OrderedMap::new();
        for i in 0..100_000u64 {
            table.insert(i, i);
        }
        let full = table.entries.capacity();
        while table.len() > 1000 {
            table.pop_oldest();
        }
        table.shrink_if_sparse();
        assert!(table.entries.capacity() * 16 < full, "{} of {full}", table.entries.capacity());
        assert_eq!(table.keys().next(), Some(&99_000));
        assert_eq!(table.len(), 1000);
    }

    #[test]
    fn looking_at_the_oldest_drops_stale_entries_in_front() {
        let mut table = OrderedMap::new();
        for i in 0..100u64 {
            table.insert(i, i);
        }
        for i in 0..99u64 {
            let (k, _) = table.oldest().map(|(k, v)| (*k, *v)).unwrap();
            assert_eq!(k, i);
            table.remove(&k);
        }
        assert_eq!(table.oldest().map(|(k, _)| *k), Some(99));
        assert_eq!(table.order.len(), 1);
    }
}
