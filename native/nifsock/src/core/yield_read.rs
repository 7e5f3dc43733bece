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
//!
//! A leave and its re-add are two `epoll_ctl`s. They pay when the run of
//! hits goes on well past the leave (a hot socket's runs are hundreds long
//! on a quiet machine); when it ends within [`LEAVE_PAID`] hits of it, the
//! socket's next leave waits for [`LEAVE_AFTER_UNPAID`] hits, until a leave
//! pays again. So however the traffic is timed, leaves cost at most
//! 2 / (LEAVE_AFTER + LEAVE_PAID + 1) `epoll_ctl` per request (0.041):
//! within the 0.05 the readiness set is held to on steady keep-alive.
//! (Always waiting for 48 hits instead kept that bound but cost 2% of
//! keep-alive CPU per request on OTP 27.)

/// Misses in a row (a read after a yield found nothing) that stop yields.
pub const MISSES: u8 = 2;

/// Waits that arm at once after the misses, before the next yield.
pub const PAUSE: u8 = 32;

/// Hits in a row (reads after yields that found data) after which the
/// socket leaves the readiness set.
pub const LEAVE_AFTER: u8 = 16;

/// Hits after a leave that make it pay (the run went on that long).
pub const LEAVE_PAID: u8 = 32;

/// Hits in a row before a leave while the socket's last leave did not pay.
pub const LEAVE_AFTER_UNPAID: u8 = 80;

/// One socket's score, packed in a `u32` (kept in an atomic by the socket):
/// misses in a row, waits left in the pause, hits in a row, and whether its
/// last leave did not pay (non-zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct YieldRead {
    misses: u8,
    paused: u8,
    hits: u8,
    unpaid: u8,
}

impl YieldRead {
    pub fn from_bits(b: u32) -> Self {
        let [misses, paused, hits, unpaid] = b.to_le_bytes();
        YieldRead {
            misses,
            paused,
            hits,
            unpaid,
        }
    }

    pub fn bits(self) -> u32 {
        u32::from_le_bytes([self.misses, self.paused, self.hits, self.unpaid])
    }

    /// Hits in a row that make the socket leave the set.
    fn leave_after(self) -> u8 {
        if self.unpaid != 0 {
            LEAVE_AFTER_UNPAID
        } else {
            LEAVE_AFTER
        }
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
    /// in a row, or the [`LEAVE_AFTER_UNPAID`]th; once per run of hits).
    pub fn outcome(&mut self, got: bool) -> bool {
        let after = self.leave_after();
        if got {
            self.misses = 0;
            self.hits = self.hits.saturating_add(1);
            return self.hits == after;
        }
        if self.hits >= after {
            // this run left the set: did it go on long enough to pay?
            self.unpaid = u8::from(self.hits - after < LEAVE_PAID);
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
    use super::{YieldRead, LEAVE_AFTER, LEAVE_AFTER_UNPAID, LEAVE_PAID, MISSES, PAUSE};

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
        for i in 1..=3 * LEAVE_AFTER {
            assert_eq!(y.outcome(true), i == LEAVE_AFTER);
        }
        // a miss starts the run again
        assert!(!y.outcome(false));
        for i in 1..=LEAVE_AFTER {
            assert_eq!(y.outcome(true), i == LEAVE_AFTER);
        }
    }

    #[test]
    fn a_leave_that_did_not_pay_makes_the_next_wait_longer() {
        let mut y = YieldRead::default();
        // the leaves in a run of `hits` hits ended by a miss
        let run = |y: &mut YieldRead, hits: u8| -> usize {
            let left = (1..=hits).filter(|_| y.outcome(true)).count();
            let _ = y.outcome(false);
            assert!(y.should_yield());
            left
        };
        // left at 16, the run ended 31 hits later: unpaid
        assert_eq!(run(&mut y, LEAVE_AFTER + LEAVE_PAID - 1), 1);
        // so 79 hits do not leave, nor 16
        assert_eq!(run(&mut y, LEAVE_AFTER_UNPAID - 1), 0);
        let back = YieldRead::from_bits(y.bits());
        assert_eq!(back, y);
        // 80 do; that run ends 32 later: paid
        assert_eq!(run(&mut y, LEAVE_AFTER_UNPAID + LEAVE_PAID), 1);
        // so the next leaves at 16 again
        let mut i = 0u8;
        while !y.outcome(true) {
            i += 1;
        }
        assert_eq!(i + 1, LEAVE_AFTER);
    }

    /// Whatever the timing (runs of k1 and k2 hits in turn, each ended by
    /// a miss, for every k1 and k2), leaves and their re-adds stay under
    /// 2 / 49 `epoll_ctl` per read, beyond the first leave.
    #[test]
    fn leaves_cost_at_most_two_calls_per_49_reads() {
        let top = 2 * u32::from(LEAVE_AFTER_UNPAID);
        for k1 in 0..=top {
            for k2 in 0..=top {
                let mut y = YieldRead::default();
                let (mut reads, mut leaves) = (0u32, 0u32);
                let mut first = true;
                while reads < 4_000 {
                    if !y.should_yield() {
                        reads += 1;
                        continue;
                    }
                    let k = if first { k1 } else { k2 };
                    first = !first;
                    for _ in 0..k {
                        leaves += u32::from(y.outcome(true));
                        reads += 1;
                    }
                    let _ = y.outcome(false);
                    reads += 1;
                }
                assert!(
                    49 * (leaves.saturating_sub(1)) <= reads,
                    "runs {k1}, {k2}: {leaves} leaves in {reads} reads"
                );
            }
        }
    }
}
