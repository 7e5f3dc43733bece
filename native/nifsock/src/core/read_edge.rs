//! The read side of a socket in an edge-triggered readiness set: who is told
//! about an edge. An edge-triggered set reports bytes once, when they arrive;
//! each edge must reach exactly one reader, or be kept (sticky) for the next
//! read wait, or be used up by a read that saw the bytes. Kept under the
//! socket's state lock (`readiness/` in the NIF does the locking and the
//! system calls; this is the protocol alone, so its unit tests run without a
//! VM).

/// What arming a read wait found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The waiter will be told on the next edge.
    Armed,
    /// An edge (or a hang-up) came before the arm: tell the waiter now.
    ReadyNow,
}

/// Where a read edge went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// Nobody was armed: kept for the next arm.
    Kept,
    /// The armed waiter takes it (now unarmed): the caller serves it.
    Waiter,
}

/// A socket's read readiness.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadEdge {
    /// The current read waiter is waiting for an edge.
    armed: bool,
    /// An edge came while nobody was armed (the next arm consumes it).
    ready: bool,
    /// The peer shut down or the socket failed (EPOLLRDHUP/HUP/ERR): that
    /// condition persists but gives no further edge, so every later wait is
    /// ready at once and a short read is no proof the queue is empty.
    hup: bool,
}

impl ReadEdge {
    /// Arms a read wait: ready at once when an edge was kept or the peer hung up.
    pub fn arm(&mut self) -> Wait {
        if self.ready || self.hup {
            self.ready = false;
            self.armed = false;
            Wait::ReadyNow
        } else {
            self.armed = true;
            Wait::Armed
        }
    }

    /// Arms again without looking at kept edges: the waiter's own read just
    /// found nothing (EAGAIN) after every edge so far.
    pub fn rearm(&mut self) {
        self.armed = true;
    }

    /// An edge from the set (`hup`: with a hang-up or error).
    pub fn edge(&mut self, hup: bool) -> Edge {
        self.hup |= hup;
        if self.armed {
            self.armed = false;
            Edge::Waiter
        } else {
            self.ready = true;
            Edge::Kept
        }
    }

    /// An edge a drain has no budget for: kept when nobody is armed (false);
    /// true when a waiter is armed, which stays armed for a later drain.
    pub fn edge_deferred(&mut self, hup: bool) -> bool {
        self.hup |= hup;
        if !self.armed {
            self.ready = true;
        }
        self.armed
    }

    /// Disarms the wait: whether it was still armed (so nobody was told).
    pub fn cancel(&mut self) -> bool {
        std::mem::replace(&mut self.armed, false)
    }

    /// A delivery's reads follow: they see every byte that came before this
    /// point, so an edge kept earlier is used up by them; one that comes
    /// later is kept again (nobody is armed meanwhile).
    pub fn reads_follow(&mut self) {
        self.ready = false;
    }

    /// A delivery that took the edge gives its wait up without reading to
    /// EAGAIN (the socket turned passive, or its count ran out): the edge may
    /// be the last one for bytes still unread, so it is kept for the next
    /// wait, which is told at once (at worst one read that finds nothing).
    pub fn gave_up(&mut self) {
        self.ready = true;
    }

    /// After a delivery that read and armed again ([`ReadEdge::rearm`]):
    /// whether it is to be served again without waiting for an edge (`more`:
    /// it stopped at its read bound; or an edge or a hang-up came during its
    /// reads). The kept edge is taken.
    pub fn take_pending(&mut self, more: bool) -> bool {
        if more || self.ready || self.hup {
            self.ready = false;
            true
        } else {
            false
        }
    }

    /// Whether a read waiter is armed.
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// Whether an edge is kept for the next wait.
    pub fn kept(&self) -> bool {
        self.ready
    }

    /// Whether the peer hung up or the socket failed.
    pub fn hup(&self) -> bool {
        self.hup
    }

    /// The socket leaves the set: nobody armed, no edge kept (a hang-up stays
    /// known).
    pub fn leave(&mut self) {
        self.armed = false;
        self.ready = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edge_with_nobody_armed_is_kept_for_the_next_wait() {
        let mut r = ReadEdge::default();
        assert_eq!(r.edge(false), Edge::Kept);
        assert_eq!(r.arm(), Wait::ReadyNow);
        // used up: the wait after waits
        assert_eq!(r.arm(), Wait::Armed);
        assert_eq!(r.edge(false), Edge::Waiter);
        assert!(!r.armed());
    }

    #[test]
    fn a_delivery_that_gives_up_hands_its_edge_to_the_next_wait() {
        // The lost wake-up (fe4763f): an active delivery took the edge, found
        // the socket passive and gave up without reading; a passive recv
        // whose read found nothing before the edge arms after the give-up.
        let mut r = ReadEdge::default();
        assert_eq!(r.arm(), Wait::Armed); // the active wait
        assert_eq!(r.edge(false), Edge::Waiter); // bytes: the delivery runs
        r.gave_up();
        assert_eq!(r.arm(), Wait::ReadyNow, "the recv must be told");
    }

    #[test]
    fn a_delivery_that_reads_uses_up_earlier_edges_only() {
        let mut r = ReadEdge::default();
        assert_eq!(r.arm(), Wait::Armed);
        assert_eq!(r.edge(false), Edge::Waiter);
        // a second edge before the delivery's reads: they see those bytes
        assert_eq!(r.edge(false), Edge::Kept);
        r.reads_follow();
        // read to EAGAIN: nothing more, no needless wake-up
        r.rearm();
        assert!(!r.take_pending(false));
        assert!(r.armed());
        // an edge during the reads (after reads_follow) is not lost
        let mut r = ReadEdge::default();
        assert_eq!(r.arm(), Wait::Armed);
        assert_eq!(r.edge(false), Edge::Waiter);
        r.reads_follow();
        assert_eq!(r.edge(false), Edge::Kept);
        r.rearm();
        assert!(r.take_pending(false));
        // stopped at its read bound: served again though no edge came
        let mut r = ReadEdge::default();
        assert_eq!(r.arm(), Wait::Armed);
        assert_eq!(r.edge(false), Edge::Waiter);
        r.reads_follow();
        r.rearm();
        assert!(r.take_pending(true));
    }

    #[test]
    fn a_hang_up_makes_every_later_wait_ready() {
        let mut r = ReadEdge::default();
        assert_eq!(r.arm(), Wait::Armed);
        assert_eq!(r.edge(true), Edge::Waiter);
        assert!(r.hup());
        for _ in 0..3 {
            assert_eq!(r.arm(), Wait::ReadyNow);
        }
        r.reads_follow();
        r.rearm();
        assert!(r.take_pending(false));
        r.leave();
        assert!(r.hup(), "leaving the set does not forget the hang-up");
    }

    #[test]
    fn a_deferred_edge_keeps_the_waiter_armed_or_is_kept() {
        let mut r = ReadEdge::default();
        assert!(!r.edge_deferred(false));
        assert_eq!(r.arm(), Wait::ReadyNow);
        assert_eq!(r.arm(), Wait::Armed);
        assert!(r.edge_deferred(false));
        assert!(r.armed());
    }

    #[test]
    fn cancel_says_whether_the_waiter_was_told() {
        let mut r = ReadEdge::default();
        assert!(!r.cancel());
        assert_eq!(r.arm(), Wait::Armed);
        assert!(r.cancel());
        assert!(!r.cancel());
        // told: the edge went to it, cancel finds it unarmed
        assert_eq!(r.arm(), Wait::Armed);
        assert_eq!(r.edge(false), Edge::Waiter);
        assert!(!r.cancel());
        // an edge kept while cancelled is there for the next wait
        assert_eq!(r.edge(false), Edge::Kept);
        r.leave();
        assert_eq!(r.arm(), Wait::Armed);
    }
}
