//! One memory budget shared by every holder of bytes from the wire (out-of-order bytes, compressed chunks,
//! decoded frames waiting to be written): each keeps its own cap as well, and each reserves from the budget
//! what it holds. A holder that can let go of something (its oldest) does so when the budget is over, and
//! says so as it says its own cap was passed; a holder that cannot (a queue of frames) waits instead.
//!
//! The count is one atomic: a reservation may be released on another thread than the one that made it.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `Options.memory_budget`'s default: with one payload decompressed (`max_decompressed`, 64 MiB) and what the
/// tool itself takes, a command stays under 256 MB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 128 << 20;

/// Bytes the holders of one run may hold together. Cloned, it is the same budget (one count).
#[derive(Clone)]
pub struct MemoryBudget {
    shared: Arc<Shared>,
}

struct Shared {
    limit: u64,
    held: AtomicU64,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> MemoryBudget {
        MemoryBudget { shared: Arc::new(Shared { limit, held: AtomicU64::new(0) }) }
    }

    /// A budget that never refuses (a holder alone, as in tests of one stage).
    pub fn unlimited() -> MemoryBudget {
        MemoryBudget::new(u64::MAX)
    }

    /// A new budget of the same size, holding nothing: one run's own count when settings are reused.
    pub fn fresh(&self) -> MemoryBudget {
        MemoryBudget::new(self.limit())
    }

    pub fn limit(&self) -> u64 {
        self.shared.limit
    }

    /// The bytes reserved now, over every holder.
    pub fn held(&self) -> u64 {
        self.shared.held.load(Ordering::Relaxed)
    }

    /// Whether the holders hold more than the limit: the one that finds it so lets go of something.
    pub fn is_over(&self) -> bool {
        self.held() > self.shared.limit
    }

    /// A reservation of nothing yet, released (whatever it then holds) when dropped.
    pub fn reservation(&self) -> Reservation {
        Reservation { budget: self.clone(), bytes: 0 }
    }
}

impl Default for MemoryBudget {
    fn default() -> MemoryBudget {
        MemoryBudget::unlimited()
    }
}

impl fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBudget").field("limit", &self.limit()).field("held", &self.held()).finish()
    }
}

/// What one holder has reserved from a budget; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: MemoryBudget,
    bytes: u64,
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn budget(&self) -> &MemoryBudget {
        &self.budget
    }

    /// Reserve `extra` more bytes if the budget has room for them; refused, nothing is counted.
    pub fn try_grow(&mut self, extra: u64) -> bool {
        let held = &self.budget.shared.held;
        let limit = self.budget.shared.limit;
        let granted = held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                now.checked_add(extra).filter(|&after| after <= limit)
            })
            .is_ok();
        if granted {
            self.bytes += extra;
        }
        granted
    }

    /// Count `extra` more bytes whether or not the budget has room (they are already held): the caller then
    /// asks `is_over` and lets go of something.
    pub fn grow(&mut self, extra: u64) {
        let held = &self.budget.shared.held;
        let _ = held.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| Some(now.saturating_add(extra)));
        self.bytes += extra;
    }

    /// Give back `less` bytes (at most what is reserved).
    pub fn shrink(&mut self, less: u64) {
        let less = less.min(self.bytes);
        self.budget.shared.held.fetch_sub(less, Ordering::Relaxed);
        self.bytes -= less;
    }

    /// Reserve exactly `bytes` (growing as `grow` does, or shrinking).
    pub fn set(&mut self, bytes: u64) {
        if bytes >= self.bytes {
            self.grow(bytes - self.bytes);
        } else {
            self.shrink(self.bytes - bytes);
        }
    }

    pub fn is_over(&self) -> bool {
        self.budget.is_over()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.shrink(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_add_up_and_are_given_back_when_dropped() {
        let budget = MemoryBudget::new(100);
        let mut a = budget.reservation();
        let mut b = budget.reservation();
        assert!(a.try_grow(60));
        assert!(b.try_grow(40));
        assert_eq!((budget.held(), a.bytes(), b.bytes()), (100, 60, 40));
        assert!(!budget.is_over());
        a.shrink(10);
        assert_eq!(budget.held(), 90);
        drop(b);
        assert_eq!(budget.held(), 50);
        a.set(5);
        assert_eq!(budget.held(), 5);
        drop(a);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn the_budget_refuses_what_would_pass_it_and_counts_nothing_then() {
        let budget = MemoryBudget::new(100);
        let mut a = budget.reservation();
        let mut b = budget.reservation();
        assert!(a.try_grow(70));
        assert!(!b.try_grow(31));
        assert_eq!((budget.held(), b.bytes()), (70, 0));
        assert!(b.try_grow(30));
        assert!(!a.try_grow(1));
        assert!(!a.try_grow(u64::MAX)); // no overflow
        assert_eq!(budget.held(), 100);
    }

    #[test]
    fn bytes_already_held_are_counted_and_the_budget_says_it_is_over() {
        let budget = MemoryBudget::new(100);
        let mut a = budget.reservation();
        a.grow(150);
        assert!(a.is_over() && budget.held() == 150);
        a.shrink(1_000); // at most what it holds
        assert!(!budget.is_over() && budget.held() == 0 && a.bytes() == 0);
    }

    #[test]
    fn a_clone_is_the_same_budget_and_fresh_a_new_one() {
        let budget = MemoryBudget::new(10);
        let same = budget.clone();
        let mut a = same.reservation();
        a.grow(8);
        assert_eq!(budget.held(), 8);
        let fresh = budget.fresh();
        assert_eq!((fresh.limit(), fresh.held()), (10, 0));
    }

    #[test]
    fn a_reservation_may_be_released_on_another_thread() {
        let budget = MemoryBudget::new(1 << 20);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let mut held = budget.reservation();
                assert!(held.try_grow(1000));
                std::thread::spawn(move || drop(held))
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(budget.held(), 0);
        assert!(MemoryBudget::unlimited().reservation().try_grow(u64::MAX));
    }
}
