//! When a blocking `recv(S, 0)` yields before it reads (`ops::recv`).
//!
//! A read that emptied the socket's receive queue makes the next blocking
//! call arm its wait without trying a read (the read would find nothing:
//! `Socket::take_drained`). On a busy scheduler that guess is wrong: a
//! request/response server's process sends its reply and calls `recv` at
//! once, but if it first lets the other runnable processes run
//! (`erlang:yield()`), the peer's next request is usually there by the time
//! it reads, and that one read replaces the wait, the readiness drain's
//! read and its message (what gen_tcp's passive `recv` gets from its port
//! being scheduled after the process). On an idle scheduler the yield comes
//! straight back and the read finds nothing: a wasted `recvfrom`.
//!
//! So each socket keeps score: a yield is tried while its reads after
//! yields find data; after [`MISSES`] misses in a row it stops yielding for
//! [`PAUSE`] waits, then tries once more. After [`LEAVE_AFTER`] hits in a
//! row the socket leaves the readiness set (`readiness::leave`): its edges,
//! which nobody waits for while its reads keep finding data, cost a drain
//! each; the next wait adds it again, and that add reports data already
//! there.

/// Misses in a row (a read after a yield found nothing) that stop yields.
pub const MISSES: u8 = 2;

/// Waits that arm at once after the misses, before the next yield.
pub const PAUSE: u8 = 32;

/// Hits in a row (reads after yields that found data) after which the
/// socket leaves the readiness set.
pub const LEAVE_AFTER: u8 = 16;

/// One socket's score, packed in a `u32` (kept in an atomic by the socket):
/// misses in a row, waits left in the pause, hits in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct YieldRead {
    misses: u8,
    paused: u8,
    hits: u8,
}

impl YieldRead {
    pub fn from_bits(b: u32) -> Self {
        let [misses, paused, hits, _] = b.to_le_bytes();
        YieldRead {
            misses,
            paused,
            hits,
        }
    }

    pub fn bits(self) -> u32 {
        u32::from_le_bytes([self.misses, self.paused, self.hits, 0])
    }

    /// A blocking `recv(S, 0)` found the queue drained by the last read:
    /// whether it yields and reads (true) or arms its wait now.
    pub fn should_yield(&mut self) -> bool {
        if self.paused > 0 {
            self.paused -= 1;
            return false;
        }
        true
    }

    /// The read after a yield found data (`true`) or nothing. True when the
    /// socket should leave the readiness set now (the [`LEAVE_AFTER`]th hit
    /// in a row; once per run of hits).
    pub fn outcome(&mut self, got: bool) -> bool {
        if got {
            self.misses = 0;
            self.hits = self.hits.saturating_add(1);
            return self.hits == LEAVE_AFTER;
        }
        self.hits = 0;
        self.misses = self.misses.saturating_add(1);
        if self.misses >= MISSES {
            self.misses = 0;
            self.paused = PAUSE;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::{YieldRead, LEAVE_AFTER, MISSES, PAUSE};

    #[test]
    fn yields_while_reads_after_yields_find_data() {
        let mut y = YieldRead::default();
        for _ in 0..100 {
            assert!(y.should_yield());
            let _ = y.outcome(true);
        }
        // one miss between hits does not stop it
        assert!(!y.outcome(false));
        assert!(y.should_yield());
        let _ = y.outcome(true);
        assert!(y.should_yield());
    }

    #[test]
    fn misses_in_a_row_pause_then_it_tries_again() {
        let mut y = YieldRead::default();
        for _ in 0..MISSES {
            assert!(y.should_yield());
            assert!(!y.outcome(false));
        }
        for _ in 0..PAUSE {
            assert!(!y.should_yield());
        }
        assert!(y.should_yield());
        // a miss on the retry counts from zero again
        assert!(!y.outcome(false));
        assert!(y.should_yield());
        assert!(!y.outcome(false));
        assert!(!y.should_yield());
    }

    #[test]
    fn bits_round_trip() {
        let mut y = YieldRead::default();
        for _ in 0..3 {
            let _ = y.outcome(true);
        }
        for _ in 0..MISSES {
            let _ = y.outcome(false);
        }
        let _ = y.should_yield();
        let _ = y.outcome(true);
        let back = YieldRead::from_bits(y.bits());
        assert_eq!(back, y);
        assert_eq!(YieldRead::from_bits(0), YieldRead::default());
    }

    #[test]
    fn a_run_of_hits_leaves_the_set_once() {
        let mut y = YieldRead::default();
        for i in 1..=40u8 {
            assert_eq!(y.outcome(true), i == LEAVE_AFTER);
        }
        // a miss starts the run again
        assert!(!y.outcome(false));
        for i in 1..=LEAVE_AFTER {
            assert_eq!(y.outcome(true), i == LEAVE_AFTER);
        }
    }
}
