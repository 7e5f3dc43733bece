//! When a hot socket's input moves from the readiness set to the readiness
//! port (`readiness/direct.rs`), by one of two rules ([`Rule`]: the
//! application env `port_hold`, `alone` unless set).
//!
//! [`Rule::Alone`]: after [`PROMOTE_AFTER`] reads in a row that a drain
//! served with the socket the only one in its batch, while the port holds
//! fewer than [`HOLD_MAX`] fds for input. Alone in its batch, a held fd saves
//! the set's `epoll_wait` per event: the scheduler's own poll names the
//! socket. Served among other sockets' events, the set's one `epoll_wait`
//! serves them all, each reported once (edge-triggered), where held fds
//! would each cost a port task and the level-triggered scheduler pollset's
//! second look at the fd; such a read starts the count again. Sockets
//! promoted while a server was quiet stay held when it gets busy;
//! [`HOLD_MAX`] bounds how many.
//!
//! [`Rule::Any`] (for active sockets; passive ones keep `Alone`, as their
//! reads after yields take input the port holds): after [`PROMOTE_AFTER`]
//! reads in a row, crowded or not, with no cap: every active socket the
//! drain keeps delivering to is held, as inet_drv's active sockets sit in the
//! scheduler pollset. Keep-alive over 64 connections: one `epoll_wait` of the
//! set less per batch (the scheduler's poll, made anyway, names the fds), for
//! 1-7 % more CPU per request on OTP 27 and 29 (a port task per fd, and the
//! level-triggered pollset's second look).

/// Which sockets' input may move to the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Only sockets served alone in their batch, at most [`HOLD_MAX`] held.
    Alone,
    /// Any (active) socket the drain keeps serving, no cap.
    Any,
}

/// Reads in a row (each alone in its batch, under [`Rule::Alone`]) before the
/// input moves.
pub const PROMOTE_AFTER: u8 = 16;

/// Most fds the port holds for input at once under [`Rule::Alone`].
pub const HOLD_MAX: usize = 16;

/// One read served by a drain whose batch had `crowd` socket events (0:
/// outside a batch), for a socket (`active` or passive) with `hits` counted
/// reads in a row before it, while the port holds `held` fds for input: its
/// new count, and whether its input moves to the port now. [`Rule::Any`]
/// applies to active sockets only; under [`Rule::Alone`] a crowded read
/// starts the count again, and a socket refused for the cap starts its count
/// again, so it asks again [`PROMOTE_AFTER`] reads later.
pub fn count_hit(rule: Rule, active: bool, hits: u8, crowd: usize, held: usize) -> (u8, bool) {
    let rule = if active { rule } else { Rule::Alone };
    if rule == Rule::Alone && crowd > 1 {
        return (0, false);
    }
    let hits = hits.saturating_add(1);
    if hits < PROMOTE_AFTER {
        return (hits, false);
    }
    if rule == Rule::Alone && held >= HOLD_MAX {
        return (0, false);
    }
    (hits, true)
}

#[cfg(test)]
mod tests {
    use super::{count_hit, Rule, HOLD_MAX, PROMOTE_AFTER};
    use Rule::{Alone, Any};

    #[test]
    fn alone_in_its_batch_promotes_after_the_count() {
        let mut hits = 0;
        for i in 1..PROMOTE_AFTER {
            let (h, promote) = count_hit(Alone, true, hits, 1, 0);
            assert_eq!((h, promote), (i, false));
            hits = h;
        }
        assert_eq!(count_hit(Alone, true, hits, 1, 0), (PROMOTE_AFTER, true));
        assert_eq!(
            count_hit(Alone, true, PROMOTE_AFTER - 1, 0, HOLD_MAX - 1),
            (PROMOTE_AFTER, true)
        );
        assert_eq!(count_hit(Alone, true, u8::MAX, 1, 0), (u8::MAX, true));
    }

    #[test]
    fn a_crowded_batch_starts_the_count_again() {
        let (h, _) = count_hit(Alone, true, 0, 1, 0);
        assert_eq!(count_hit(Alone, true, h, 2, 0), (0, false));
        assert_eq!(count_hit(Alone, true, PROMOTE_AFTER - 1, 2, 0), (0, false));
        assert_eq!(count_hit(Alone, true, 0, 64, 0), (0, false));
    }

    #[test]
    fn a_full_port_refuses_and_the_count_starts_again() {
        assert_eq!(
            count_hit(Alone, true, PROMOTE_AFTER - 1, 1, HOLD_MAX),
            (0, false)
        );
        assert_eq!(
            count_hit(Alone, true, PROMOTE_AFTER - 1, 1, HOLD_MAX + 3),
            (0, false)
        );
        // below the cap the same read promotes
        assert_eq!(
            count_hit(Alone, true, PROMOTE_AFTER - 1, 1, HOLD_MAX - 1),
            (PROMOTE_AFTER, true)
        );
    }

    #[test]
    fn under_any_a_crowded_read_counts_and_there_is_no_cap() {
        let mut hits = 0;
        for i in 1..PROMOTE_AFTER {
            let (h, promote) = count_hit(Any, true, hits, 64, 0);
            assert_eq!((h, promote), (i, false));
            hits = h;
        }
        assert_eq!(count_hit(Any, true, hits, 64, 0), (PROMOTE_AFTER, true));
        assert_eq!(
            count_hit(Any, true, PROMOTE_AFTER - 1, 2, HOLD_MAX * 100),
            (PROMOTE_AFTER, true)
        );
        // the same reads under Alone: the crowd and the cap refuse
        assert_eq!(count_hit(Alone, true, PROMOTE_AFTER - 1, 2, 0), (0, false));
        assert_eq!(
            count_hit(Alone, true, PROMOTE_AFTER - 1, 1, HOLD_MAX),
            (0, false)
        );
    }

    #[test]
    fn a_passive_socket_keeps_alone_under_any() {
        assert_eq!(count_hit(Any, false, PROMOTE_AFTER - 1, 2, 0), (0, false));
        assert_eq!(
            count_hit(Any, false, PROMOTE_AFTER - 1, 1, HOLD_MAX),
            (0, false)
        );
        assert_eq!(
            count_hit(Any, false, PROMOTE_AFTER - 1, 1, 0),
            (PROMOTE_AFTER, true)
        );
    }
}
