//! The readiness drain's backlog: slot keys of sockets a drain is to serve
//! again (a delivery stopped at its read bound, an edge over a drain's
//! budget), and the wake-up that makes the set readable for them (an
//! eventfd in the set, level-triggered, so ERTS runs a drain).
//!
//! The rule this module keeps: **while the backlog holds an entry, a wake-up
//! is pending.** A push adds its entry, then wakes. A drain whose events
//! include the wake-up clears it *before* it takes its entries: an entry
//! pushed before that take is served by this drain, and one pushed after it
//! wakes after the clear, so its wake-up stays. (Clearing the wake-up when
//! the drain met it among its events, after the backlog was taken, stranded
//! an entry pushed in between, its wake-up consumed: its socket, armed and
//! with bytes waiting, was never served again, seen as a TLS transfer stalled
//! with the last record in the kernel's receive queue.)

use std::sync::{Mutex, MutexGuard};

/// The wake-up of the set (the eventfd's counter).
pub trait Wakeup {
    /// Makes the set readable until cleared.
    fn kick(&self);
    /// Clears every kick so far.
    fn clear(&self);
}

fn lock(q: &Mutex<Vec<u64>>) -> MutexGuard<'_, Vec<u64>> {
    q.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds `key` to the backlog `queue`, then wakes the set.
pub fn push(queue: &Mutex<Vec<u64>>, key: u64, wake: &impl Wakeup) {
    lock(queue).push(key);
    wake.kick();
}

/// A drain's share of the backlog: at most `max` entries, oldest first.
/// `woken`: the wake-up was among the drain's events; it is cleared first.
/// Entries left over wake the set again, for a later drain.
pub fn take(queue: &Mutex<Vec<u64>>, woken: bool, max: usize, wake: &impl Wakeup) -> Vec<u64> {
    if woken {
        wake.clear();
    }
    let (head, left) = {
        let mut q = lock(queue);
        let n = q.len().min(max);
        let rest = q.split_off(n);
        let head = std::mem::replace(&mut *q, rest);
        (head, !q.is_empty())
    };
    if left {
        wake.kick();
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// An eventfd's counter; `on_clear` runs inside the clear (another
    /// thread's push landing there).
    struct Counter<'a> {
        kicks: Cell<u64>,
        on_clear: Option<&'a dyn Fn()>,
    }

    impl<'a> Counter<'a> {
        fn new(on_clear: Option<&'a dyn Fn()>) -> Counter<'a> {
            Counter {
                kicks: Cell::new(0),
                on_clear,
            }
        }
    }

    impl Wakeup for Counter<'_> {
        fn kick(&self) {
            self.kicks.set(self.kicks.get() + 1);
        }
        fn clear(&self) {
            if let Some(f) = self.on_clear {
                f();
            }
            self.kicks.set(0);
        }
    }

    /// The invariant: entries left in the backlog have a wake-up pending.
    fn holds(queue: &Mutex<Vec<u64>>, wake: &Counter) -> bool {
        lock(queue).is_empty() || wake.kicks.get() > 0
    }

    #[test]
    fn an_entry_pushed_after_the_take_keeps_its_wake_up() {
        let q = Mutex::new(Vec::new());
        let w = Counter::new(None);
        push(&q, 1, &w);
        assert_eq!(take(&q, true, 64, &w), vec![1]);
        assert_eq!(w.kicks.get(), 0, "served: no wake-up left");
        // a delivery served in this drain stops at its read bound
        push(&q, 2, &w);
        assert!(holds(&q, &w), "entry 2 stranded");
        assert_eq!(take(&q, true, 64, &w), vec![2]);
        assert!(holds(&q, &w));
    }

    #[test]
    fn an_entry_whose_wake_up_the_clear_consumed_is_served_by_the_drain() {
        let q = Mutex::new(Vec::new());
        // another thread's push: entry added and kicked just before the clear
        let push_3 = || lock(&q).push(3);
        let w = Counter::new(Some(&push_3));
        push(&q, 1, &w);
        let got = take(&q, true, 64, &w);
        assert_eq!(got, vec![1, 3], "the clear took entry 3's wake-up");
        assert!(holds(&q, &w));
    }

    #[test]
    fn entries_over_the_batch_wake_the_set_again() {
        let q = Mutex::new(Vec::new());
        let w = Counter::new(None);
        for k in 0..5 {
            push(&q, k, &w);
        }
        assert_eq!(take(&q, true, 2, &w), vec![0, 1]);
        assert!(w.kicks.get() > 0);
        assert_eq!(take(&q, true, 2, &w), vec![2, 3]);
        assert_eq!(take(&q, true, 2, &w), vec![4]);
        assert_eq!(w.kicks.get(), 0);
        assert!(holds(&q, &w));
    }

    #[test]
    fn a_drain_not_woken_leaves_the_wake_up_alone() {
        let q = Mutex::new(Vec::new());
        let w = Counter::new(None);
        push(&q, 7, &w);
        // woken by a socket's event: the wake-up was not among the events
        assert_eq!(take(&q, false, 64, &w), vec![7]);
        assert_eq!(w.kicks.get(), 1, "left for the drain that meets it");
    }
}
