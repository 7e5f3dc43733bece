//! A socket's part of the readiness set (`readiness/`), kept in its `State`
//! under the state mutex. All false/None unless the `driver` or `pump`
//! readiness source is on and the socket has waited for a read or a write.

use crate::core::read_edge::ReadEdge;

/// Read and write readiness from nifsock's own epoll set.
#[derive(Debug, Default)]
pub struct SockRd {
    /// The slot key (`generation << 32 | index`), once the fd is in the set.
    pub key: Option<u64>,
    /// Who is told about a read edge (armed waiter, kept edge, hang-up).
    pub edge: ReadEdge,
    /// The slot key is in the drain's backlog (at most once).
    pub queued: bool,
    /// The fd is in the set with `EPOLLOUT` too (from its first write or
    /// connect wait on).
    pub out: bool,
    /// The current write waiter is waiting for an edge in the set.
    pub w_armed: bool,
    /// A write edge came while no writer was armed (the next write arm consumes it).
    pub w_ready: bool,
    /// The socket failed or hung up (EPOLLERR/HUP): every later write wait is
    /// ready at once (the write then reports the error). Not EPOLLRDHUP: a
    /// peer that only shut down its side can still be written to.
    pub w_hup: bool,
    /// The current write wait was armed in the set, not with enif_select
    /// (so cancelling it costs no system call).
    pub w_set: bool,
    /// The fd's input is selected by the readiness port itself (it left the
    /// set for reads; see `readiness/direct.rs`).
    pub direct: bool,
    /// Reads in a row the drain served with the socket the only one in its
    /// batch, since the fd joined the set or left the port.
    pub hits: u8,
    /// Times the port gave the fd's input back to the set.
    pub demotions: u8,
    /// When the port first reported the held input with no reader armed, in
    /// the current stretch of such reports (`readiness/direct.rs`'s clock; 0:
    /// none since the last arm): a stretch as long as its grace period
    /// (`UNARMED_GRACE_US`) gives the input back to the set.
    pub unarmed_since: u32,
    /// When the port last reported it so (a gap of the grace period ends the
    /// stretch: the input was read meanwhile without an arm).
    pub unarmed_last: u32,
    /// An active delivery sent the owner data since its last send (the next
    /// send may be the reply to it: `ops::tcp::active::reply_sent`).
    pub delivered: bool,
    /// The owner sent after a delivery (a reply) at least once.
    pub replied: bool,
    /// Data came after such a reply: the peer talks request/response on
    /// this connection (a `Connection: close` exchange never gets here).
    pub conversing: bool,
    /// An owner of the socket keeps its messages off its heap: its reads
    /// after yields are not made (`ops::tcp::active::read_after_yield`).
    pub no_reply_yield: bool,
    /// The owner sent its reply and yields, then reads the peer's next
    /// bytes itself; meanwhile its read wait is disarmed, so a drain keeps
    /// the edge instead of delivering (`readiness::hold_for_reply`).
    pub reply_yield: bool,
}
