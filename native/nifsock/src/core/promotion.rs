//! When a hot socket's input moves from the readiness set to the readiness
//! port (`readiness/direct.rs`): after [`PROMOTE_AFTER`] reads in a row that
//! a drain served with the socket the only one in its batch, while the port
//! holds fewer than [`HOLD_MAX`] fds for input.
//!
//! Alone in its batch, a held fd saves the set's `epoll_wait` per event: the
//! scheduler's own poll names the socket. Served among other sockets'
//! events, the set's one `epoll_wait` serves them all, each reported once
//! (edge-triggered), where held fds would each cost a port task and the
//! level-triggered scheduler pollset's second look at the fd; such a read
//! starts the count again. Sockets promoted while a server was quiet stay
//! held when it gets busy; [`HOLD_MAX`] bounds how many.

/// Reads in a row, each alone in its batch, before the input moves.
pub const PROMOTE_AFTER: u8 = 16;

/// Most fds the port holds for input at once.
pub const HOLD_MAX: usize = 16;

/// One read served by a drain whose batch had `crowd` socket events (0:
/// outside a batch), for a socket with `hits` such reads in a row before
/// it, while the port holds `held` fds for input: its new count, and
/// whether its input moves to the port now. A socket refused for the cap
/// starts its count again, so it asks again [`PROMOTE_AFTER`] reads later.
pub fn count_hit(hits: u8, crowd: usize, held: usize) -> (u8, bool) {
    if crowd > 1 {
        return (0, false);
    }
    let hits = hits.saturating_add(1);
    if hits < PROMOTE_AFTER {
        return (hits, false);
    }
    if held >= HOLD_MAX {
        return (0, false);
    }
    (hits, true)
}

#[cfg(test)]
mod tests {
    use super::{count_hit, HOLD_MAX, PROMOTE_AFTER};

    #[test]
    fn alone_in_its_batch_promotes_after_the_count() {
        let mut hits = 0;
        for i in 1..PROMOTE_AFTER {
            let (h, promote) = count_hit(hits, 1, 0);
            assert_eq!((h, promote), (i, false));
            hits = h;
        }
        assert_eq!(count_hit(hits, 1, 0), (PROMOTE_AFTER, true));
        assert_eq!(
            count_hit(PROMOTE_AFTER - 1, 0, HOLD_MAX - 1),
            (PROMOTE_AFTER, true)
        );
        assert_eq!(count_hit(u8::MAX, 1, 0), (u8::MAX, true));
    }

    #[test]
    fn a_crowded_batch_starts_the_count_again() {
        let (h, _) = count_hit(0, 1, 0);
        assert_eq!(count_hit(h, 2, 0), (0, false));
        assert_eq!(count_hit(PROMOTE_AFTER - 1, 2, 0), (0, false));
        assert_eq!(count_hit(0, 64, 0), (0, false));
    }

    #[test]
    fn a_full_port_refuses_and_the_count_starts_again() {
        assert_eq!(count_hit(PROMOTE_AFTER - 1, 1, HOLD_MAX), (0, false));
        assert_eq!(count_hit(PROMOTE_AFTER - 1, 1, HOLD_MAX + 3), (0, false));
        // below the cap the same read promotes
        assert_eq!(
            count_hit(PROMOTE_AFTER - 1, 1, HOLD_MAX - 1),
            (PROMOTE_AFTER, true)
        );
    }
}
