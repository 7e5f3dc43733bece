//! The socket resource: fd ownership, the open → closing → closed state under
//! one short mutex, and the processes waiting for readiness.
//!
//! Locks: `state` (waiters, phase) and `fd` (see `fd_cell`). `state` is never
//! held while `fd` is locked for writing, nor while calling enif_select(STOP)
//! (its direct stop callback takes `state`).
//!
//! The gen_tcp layer's state (`Active`, `TcpOpts`) is in `tcp.rs`.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use rustler::sys::ErlNifPid;
use rustler::OwnedBinary;

use crate::core::family::Family;
pub use crate::core::fd_cell::FdCell;
use crate::core::limits::{SCRATCH_CAP, STREAM_THRESHOLD};
use crate::core::traffic::Traffic;
use crate::core::yield_read::YieldRead;
use crate::stats;
use crate::sys::handles::{HandleStore, Saved};
use crate::sys::msg::Monitor;
use crate::sys::select::Dir;

pub use tcp::{Active, Tags, TcpOpts};

pub mod rd;
mod tcp;

/// The layout version of what a socket resource object holds. An upgrade
/// runs the new library's code on objects the old one allocated, so a build
/// refuses to take over from one with another version (with the rustc
/// version and the size, this makes the fingerprint in lib.rs). Bump it with
/// any change to a type stored in a `Socket` (here, `tcp.rs`, `rd.rs`, and the
/// `core`/`sys` types they embed) or to the meaning of a field, and with any
/// change to what an upgrade carries over: the slot order of `stats`, the
/// readiness `Shared` state (`readiness/set.rs`), `sys::carry::Carry`, the
/// driver's `Hooks` or port kinds, or the dist park table (`sys::distdrv`).
pub const LAYOUT: u32 = 4;

/// Lifecycle of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Usable.
    Open,
    /// close started: no new waits; the fd is being stopped/closed.
    Closing,
    /// The fd is closed (or handed to a closer).
    Closed,
}

/// A process waiting for readiness, with the handle its messages carry.
#[derive(Debug)]
pub struct Waiter {
    /// Who waits.
    pub pid: ErlNifPid,
    /// The select handle (saved in the socket's handle store).
    pub handle: Saved,
    /// A monitor, held only while others queue behind this waiter.
    pub mon: Option<Monitor>,
    /// The wait belongs to one of nifsock's own blocking calls (its handle is
    /// an integer, never a user's reference): its messages must not outlive
    /// the call.
    pub internal: bool,
    /// `promote` already sent it its select message: no select is armed for it.
    pub told: bool,
    /// A blocking `recv(S, 0)` without flags (`nifsock:recv/4`'s own wait):
    /// a readiness drain may read for it and send it the result
    /// (`{'$nifsock', recv, Handle, Result}`) instead of its select message.
    pub eager: bool,
}

impl Waiter {
    /// `pid` waiting with the saved `handle` (`internal`: see the field).
    pub fn new(pid: ErlNifPid, handle: Saved, internal: bool) -> Waiter {
        Waiter {
            pid,
            handle,
            mon: None,
            internal,
            told: false,
            eager: false,
        }
    }

    /// The waiter with its `eager` flag set to `on`.
    pub fn eager(mut self, on: bool) -> Waiter {
        self.eager = on;
        self
    }
}

/// The waiters of one direction: the one whose select is armed, then a FIFO.
#[derive(Debug, Default)]
pub struct Waiters {
    /// Armed.
    pub current: Option<Waiter>,
    /// Queued behind `current`, activated one by one.
    pub queue: VecDeque<Waiter>,
}

impl Waiters {
    fn is_empty(&self) -> bool {
        self.current.is_none() && self.queue.is_empty()
    }
}

/// A recv(S, N) in progress: the result binary, filled so far.
pub struct Partial {
    /// Exactly N bytes.
    pub buf: OwnedBinary,
    /// Bytes received.
    pub filled: usize,
}

/// Bytes that a timed-out `nifsock_tcp` send accepted but could not write.
/// They go out before any later data (gen_tcp keeps them queued too), so a
/// timeout never cuts a packet. Allocated only when a send times out.
#[derive(Debug, Default)]
pub struct SendRest {
    /// The bytes; `buf[off..]` are still to be written.
    pub buf: Vec<u8>,
    /// How many of `buf` are written.
    pub off: usize,
}

impl SendRest {
    /// The bytes still to be written.
    pub fn unsent(&self) -> &[u8] {
        self.buf.get(self.off..).unwrap_or(&[])
    }
}

/// Everything under the state mutex.
pub struct State {
    /// Lifecycle.
    pub phase: Phase,
    /// The fd has been given to enif_select: it must be stopped before close.
    pub selected: bool,
    /// The controlling process.
    pub owner: ErlNifPid,
    /// Monitor on the owner: its death closes the socket.
    pub owner_mon: Option<Monitor>,
    /// recv/accept waiters.
    pub readers: Waiters,
    /// send/connect waiters.
    pub writers: Waiters,
    /// Saved select handles.
    pub handles: HandleStore,
    /// A partial recv(S, N).
    pub partial: Option<Partial>,
    /// An fd the stop callback took while close(2) may block, for the caller to
    /// close off the normal schedulers.
    pub pending_close: Option<RawFd>,
    /// listen/2 was called.
    pub listening: bool,
    /// A nonblocking connect is in progress.
    pub connecting: bool,
    /// `nifsock_tcp` options.
    pub tcp: TcpOpts,
    /// Bytes read but not yet framed into a packet (`nifsock_tcp`).
    pub pending: Vec<u8>,
    /// The unsent rest of timed-out `nifsock_tcp` sends.
    pub send_rest: Option<Box<SendRest>>,
    /// Read readiness from nifsock's own epoll set (when that path is on).
    pub rd: rd::SockRd,
}

impl State {
    /// The waiters of `dir`.
    pub fn waiters(&mut self, dir: Dir) -> &mut Waiters {
        match dir {
            Dir::Read => &mut self.readers,
            Dir::Write => &mut self.writers,
        }
    }

    /// The waiters of `dir` and the handle store, borrowed together.
    pub fn waiters_and_handles(&mut self, dir: Dir) -> (&mut Waiters, &mut HandleStore) {
        let q = match dir {
            Dir::Read => &mut self.readers,
            Dir::Write => &mut self.writers,
        };
        (q, &mut self.handles)
    }

    fn no_waiters(&self) -> bool {
        self.readers.is_empty() && self.writers.is_empty()
    }

    /// Forgets saved handles when nobody waits any more.
    pub fn compact(&mut self) {
        if self.no_waiters() {
            self.handles.clear();
        }
    }
}

/// One socket.
pub struct Socket {
    /// The fd.
    pub fd: FdCell,
    /// Its address family.
    pub family: Family,
    /// SO_LINGER is on with a positive timeout: close(2) may block.
    close_may_block: AtomicBool,
    /// Most bytes one recv(S, 0) returns (`{otp, rcvbuf}`).
    rcvbuf: AtomicUsize,
    /// Size of the last recv(S, 0) result: large ones mean a stream.
    last_read: AtomicUsize,
    /// The last read came back short: the receive queue was empty then.
    /// Only a blocking call (whose wait is internal) may act on it: see
    /// `recv::recv`.
    drained: AtomicBool,
    /// Whether a blocking recv(S, 0) that finds `drained` yields and reads
    /// (`core::yield_read`'s score, its bits).
    yield_read: AtomicU32,
    /// A send met the peer's reset (ECONNRESET). The kernel reports a reset
    /// once; the reads after it see the end of the stream, which gen_tcp's
    /// `show_econnreset` still reports as the reset.
    peer_reset: AtomicBool,
    /// Another descriptor may refer to the fd's open file (an adopted fd, or
    /// one `{otp, fd}` handed out): close must then take it out of the
    /// readiness set itself, as closing the fd won't (see `readiness::unregister`).
    fd_shared: AtomicBool,
    state: Mutex<State>,
    /// Serialises active deliveries so messages keep the stream's order.
    delivery: Mutex<()>,
    /// Serialises writers: held from the check that no other writer is ahead
    /// through the write and, when it is partial, the registration as the
    /// current write waiter, so two senders' bytes never interleave.
    write_turn: Mutex<()>,
    /// Bytes and calls each way (`counters` of `nifsock:info/1`).
    traffic: Traffic,
}

impl Socket {
    /// A socket owning `fd`, controlled by `owner`.
    pub fn new(fd: RawFd, family: Family, owner: ErlNifPid, close_may_block: bool) -> Socket {
        stats::SOCKETS.up();
        Socket {
            fd: FdCell::new(fd),
            family,
            close_may_block: AtomicBool::new(close_may_block),
            rcvbuf: AtomicUsize::new(SCRATCH_CAP),
            last_read: AtomicUsize::new(0),
            drained: AtomicBool::new(false),
            yield_read: AtomicU32::new(0),
            peer_reset: AtomicBool::new(false),
            fd_shared: AtomicBool::new(false),
            state: Mutex::new(State {
                phase: Phase::Open,
                selected: false,
                owner,
                owner_mon: None,
                readers: Waiters::default(),
                writers: Waiters::default(),
                handles: HandleStore::default(),
                partial: None,
                pending_close: None,
                listening: false,
                connecting: false,
                tcp: TcpOpts::default(),
                pending: Vec::new(),
                rd: rd::SockRd::default(),
                send_rest: None,
            }),
            delivery: Mutex::new(()),
            write_turn: Mutex::new(()),
            traffic: Traffic::default(),
        }
    }

    /// Locks the state (a poisoned lock is still usable: no invariant spans a panic).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the fd while no one can close it; Err(Closed) once it is gone.
    pub fn with_fd<R>(&self, f: impl FnOnce(RawFd) -> R) -> crate::error::Result<R> {
        self.fd.with(f).ok_or(crate::error::Error::Closed)
    }

    /// Held by a writer for its turn (see `write_turn`); taken before the
    /// state lock, never while holding it.
    pub fn write_turn(&self) -> MutexGuard<'_, ()> {
        self.write_turn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serialises active deliveries (see `delivery`).
    pub fn delivery_lock(&self) -> MutexGuard<'_, ()> {
        self.delivery.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the state as [`Socket::lock`], but when it says the socket is
    /// active, first waits out a delivery in progress: a delivery sends its
    /// last message (the one of `{active, once}`, or the passive message)
    /// before it records that the socket is passive, so an owner that has
    /// that message and calls `recv` or `getopts` at once must not find the
    /// old mode. Not with the state lock held (deliveries take it inside
    /// theirs).
    pub fn lock_after_delivery(&self) -> MutexGuard<'_, State> {
        let st = self.lock();
        if st.tcp.active == Active::Off {
            return st;
        }
        drop(st);
        drop(self.delivery_lock());
        self.lock()
    }

    /// Whether close(2) may block.
    pub fn close_may_block(&self) -> bool {
        self.close_may_block.load(Ordering::Relaxed)
    }

    /// Records the linger state after a successful setsockopt(SO_LINGER).
    pub fn set_close_may_block(&self, v: bool) {
        self.close_may_block.store(v, Ordering::Relaxed);
    }

    /// `{otp, rcvbuf}`.
    pub fn rcvbuf(&self) -> usize {
        self.rcvbuf.load(Ordering::Relaxed)
    }

    /// Whether the last reads were large (read straight into binaries).
    pub fn streaming(&self) -> bool {
        self.last_read.load(Ordering::Relaxed) >= STREAM_THRESHOLD
    }

    /// Records that another descriptor may refer to the fd's open file.
    pub fn share_fd(&self) {
        self.fd_shared.store(true, Ordering::Release);
    }

    /// Whether another descriptor may refer to the fd's open file.
    pub fn fd_shared(&self) -> bool {
        self.fd_shared.load(Ordering::Acquire)
    }

    /// Records that a send met the peer's reset.
    pub fn note_peer_reset(&self) {
        self.peer_reset.store(true, Ordering::Relaxed);
    }

    /// Whether a send met the peer's reset.
    pub fn peer_reset(&self) -> bool {
        self.peer_reset.load(Ordering::Relaxed)
    }

    /// Records whether the last read emptied the receive queue.
    pub fn set_drained(&self, v: bool) {
        self.drained.store(v, Ordering::Relaxed);
    }

    /// Whether the last read emptied the receive queue; clears the mark.
    pub fn take_drained(&self) -> bool {
        self.drained.swap(false, Ordering::Relaxed)
    }

    /// A blocking recv(S, 0) found the queue drained by the last read:
    /// whether it yields and reads rather than arm its wait now. (Only the
    /// reading process updates the score; two readers racing may lose an
    /// update, which moves a heuristic, nothing else.)
    pub fn yield_first(&self) -> bool {
        let mut y = YieldRead::from_bits(self.yield_read.load(Ordering::Relaxed));
        let r = y.should_yield();
        self.yield_read.store(y.bits(), Ordering::Relaxed);
        r
    }

    /// The read a recv made after its yield found data (`true`) or nothing;
    /// true when the socket should leave the readiness set now.
    pub fn yielded(&self, got: bool) -> bool {
        let mut y = YieldRead::from_bits(self.yield_read.load(Ordering::Relaxed));
        let leave = y.outcome(got);
        self.yield_read.store(y.bits(), Ordering::Relaxed);
        leave
    }

    /// Records a recv(S, 0) result size.
    pub fn note_read(&self, n: usize) {
        self.last_read.store(n, Ordering::Relaxed);
    }

    /// A recv that returned `n` > 0 bytes.
    pub fn count_read(&self, n: usize) {
        stats::READS.incr();
        stats::BYTES_IN.add(n as u64);
        self.traffic.read(n);
    }

    /// A recv with MSG_PEEK: a syscall, but no bytes consumed (they are
    /// counted when read).
    pub fn count_peek(&self) {
        stats::READS.incr();
    }

    /// A sendmsg or sendfile that wrote `n` bytes.
    pub fn count_write(&self, n: usize) {
        stats::WRITES.incr();
        stats::BYTES_OUT.add(n as u64);
        self.traffic.write(n);
    }

    /// A connection accepted on this listener.
    pub fn count_accept(&self) {
        stats::ACCEPTS.incr();
        self.traffic.accepted();
    }

    /// The per-socket counters.
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    /// Sets `{otp, rcvbuf}`.
    pub fn set_rcvbuf(&self, n: usize) {
        self.rcvbuf.store(n, Ordering::Relaxed);
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        stats::SOCKETS.down();
    }
}
