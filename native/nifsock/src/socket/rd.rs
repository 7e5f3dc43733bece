//! A socket's part of the readiness set (`readiness/`), kept in its `State`
//! under the state mutex. All false/None unless the `driver` or `pump`
//! readiness source is on and the socket has waited for a read.

/// Read readiness from nifsock's own epoll set.
#[derive(Debug, Default)]
pub struct SockRd {
    /// The slot key (`generation << 32 | index`), once the fd is in the set.
    pub key: Option<u64>,
    /// The current read waiter is waiting for an edge.
    pub armed: bool,
    /// An edge came while nobody was armed (the next arm consumes it).
    pub ready: bool,
    /// The peer shut down or the socket failed (EPOLLRDHUP/HUP/ERR): that
    /// condition persists but gives no further edge, so every later wait is
    /// ready at once and a short read is no proof the queue is empty.
    pub hup: bool,
    /// The slot key is in the drain's backlog (at most once).
    pub queued: bool,
}
