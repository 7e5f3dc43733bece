//! Closing: the close protocol (every waiter told, STOP, the fd closed exactly
//! once), the linger rule (close(2) runs inline unless SO_LINGER may make it
//! block; then on a dirty I/O scheduler or the closer thread), and `close_fd`,
//! where every socket fd nifsock counted is closed.

use std::os::fd::RawFd;

use super::closer;
use super::ctx::Ctx;
use super::notice::{notify, undefined_in, Notice};
use super::waiters::unwatch;
use crate::error::{Error, Result};
use crate::readiness;
use crate::socket::{Phase, Socket, State, Waiter};
use crate::stats;
use crate::sys::msg::{self};
use crate::sys::resource::Obj;
use crate::sys::select::{self, Dir, Stop};

/// How a close ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The fd is closed, or will be by a scheduled stop callback.
    Done,
    /// close(2) may block (lingering): the fd waits in `pending_close` for the
    /// caller to close it off the normal schedulers.
    Lingering,
}

/// Closes the socket: every waiter gets an abort message, the fd leaves the
/// poll set (STOP) and is closed exactly once.
pub fn close(ctx: Ctx, obj: Obj<'_, Socket>) -> Result<Closed> {
    let s = obj.get();
    // The readiness slot's reference: dropped at the end, with no lock held.
    let mut rd_slot = None;
    let selected = {
        let mut st = s.lock();
        if st.phase != Phase::Open {
            return Err(Error::Closed);
        }
        st.phase = Phase::Closing;
        // A read wait armed in the readiness set: disarmed (its waiter gets the
        // abort), then the fd leaves the set while still open.
        let rd_armed = readiness::cancel(&mut st, Dir::Read);
        // Likewise a write wait armed there (its writer gets the abort).
        let wr_armed = readiness::cancel(&mut st, Dir::Write);
        if rd_armed.is_some() {
            // The fd leaves the set by itself when closed (its open file is
            // released), unless another descriptor keeps that file open.
            let fd = s.with_fd(|fd| fd).ok().filter(|_| s.fd_shared());
            rd_slot = readiness::unregister(&mut st, fd);
        }
        if let Some(m) = st.owner_mon.take() {
            msg::demonitor(ctx.raw(), obj, &m);
        }
        let State {
            readers,
            writers,
            handles,
            ..
        } = &mut *st;
        for (dir, q) in [(Dir::Read, readers), (Dir::Write, writers)] {
            if let Some(w) = q.current.take() {
                unwatch(ctx, obj, &w);
                let in_set = match dir {
                    Dir::Read => rd_armed,
                    Dir::Write => wr_armed,
                };
                if !told_to_retry(ctx, obj, s, dir, &w, in_set) {
                    notify(ctx, obj, handles, &w.pid, w.handle, Notice::AbortClosed);
                }
            }
            for w in q.queue.drain(..) {
                unwatch(ctx, obj, &w);
                notify(ctx, obj, handles, &w.pid, w.handle, Notice::AbortClosed);
            }
        }
        st.handles.clear();
        st.send_rest = None;
        st.selected
    };
    let mut stop_scheduled = false;
    if selected {
        let fd = s.with_fd(|fd| fd)?;
        match select::stop(ctx.raw(), obj, fd, undefined_in(ctx.raw())) {
            Stop::Called => {}
            Stop::Scheduled => stop_scheduled = true,
            Stop::Failed(e) => {
                tracing::debug!(fd, op = "close", e, "stop refused; closing directly");
                if let Some(fd) = take_and_close_nonblocking(s) {
                    s.lock().pending_close = Some(fd);
                }
            }
        }
    } else if let Some(fd) = take_and_close_nonblocking(s) {
        s.lock().pending_close = Some(fd);
    }
    let mut st = s.lock();
    if !stop_scheduled {
        st.phase = Phase::Closed;
    }
    let r = if st.pending_close.is_some() {
        Closed::Lingering
    } else {
        Closed::Done
    };
    drop(st);
    drop(rd_slot);
    Ok(r)
}

/// Whether the current waiter `w` of `dir` already has (or is being sent) its
/// select message, when it belongs to one of nifsock's blocking calls: that
/// call will try again, meet the closed socket and return, so an abort would
/// stay behind in its mailbox. Its select is cancelled here when still armed
/// (then it is not told, and gets the abort). Users' nowait waits get their
/// abort regardless, as socket sends it, and pay no cancel.
/// `in_set`: the wait went through the readiness set, and whether it was
/// still armed there (then it has no enif_select to cancel).
fn told_to_retry(
    ctx: Ctx,
    obj: Obj<'_, Socket>,
    s: &Socket,
    dir: Dir,
    w: &Waiter,
    in_set: Option<bool>,
) -> bool {
    if !w.internal {
        return false;
    }
    if w.told {
        return true;
    }
    if let Some(armed) = in_set {
        return !armed;
    }
    match s.with_fd(|fd| fd) {
        Ok(fd) => !select::cancel(ctx.raw(), obj, fd, dir, undefined_in(ctx.raw())),
        Err(_) => false,
    }
}

/// Where a socket fd's close(2) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// Here: close(2) can't block (no SO_LINGER timeout).
    Inline,
    /// Here, on a dirty I/O scheduler (the second half of a lingering close/1).
    Dirty,
    /// On the closer thread: a lingering close where no dirty scheduler is at
    /// hand (callbacks, gen_tcp's exit_on_close).
    Closer,
    /// Here, uncounted by the close counters: the fd never became a socket.
    Unwrapped,
}

/// Closes a socket fd nifsock counts in `stats::FDS`, where `how` says.
pub fn close_fd(fd: RawFd, how: How) {
    match how {
        How::Inline => {
            tracing::trace!(fd, op = "close", "inline");
            closer::release(fd);
            stats::CLOSES_INLINE.incr();
        }
        How::Dirty => {
            tracing::debug!(fd, op = "close", "lingering close on a dirty scheduler");
            closer::release(fd);
            stats::CLOSES_DIRTY.incr();
        }
        How::Closer => closer::close_later(fd),
        How::Unwrapped => closer::release(fd),
    }
}

/// The linger rule: takes the socket's fd and closes it here unless close(2)
/// may block (SO_LINGER on with a positive timeout); then the fd is handed
/// back, for the caller to close off the normal schedulers.
pub(super) fn take_and_close_nonblocking(s: &Socket) -> Option<RawFd> {
    let fd = s.fd.take()?;
    if readiness::release(fd, s.close_may_block()) {
        // the readiness port holds it: closed once ERTS lets it go
        return None;
    }
    if s.close_may_block() {
        return Some(fd);
    }
    close_fd(fd, How::Inline);
    None
}

/// Closes an fd the readiness port held, once ERTS let it go (its
/// `stop_select`): on the closer thread if close(2) may block.
pub fn close_released(fd: RawFd, lingering: bool) {
    close_fd(fd, if lingering { How::Closer } else { How::Inline });
}

/// Hands a lingering fd left in `pending_close` to the closer thread.
pub(super) fn pending_to_closer(s: &Socket) {
    if let Some(fd) = s.lock().pending_close.take() {
        close_fd(fd, How::Closer);
    }
}

/// Closes the socket without blocking the caller: a lingering close goes to
/// the closer thread. For closes nobody waits on (owner death, gen_tcp's
/// exit_on_close, send_timeout_close); errors (already closed) are ignored.
pub fn close_never_blocking(ctx: Ctx, obj: Obj<'_, Socket>) {
    if let Ok(Closed::Lingering) = close(ctx, obj) {
        pending_to_closer(obj.get());
    }
}

/// The blocking half of a lingering close; runs on a dirty I/O scheduler.
pub fn finish_lingering_close(obj: Obj<'_, Socket>) {
    let fd = obj.get().lock().pending_close.take();
    if let Some(fd) = fd {
        close_fd(fd, How::Dirty);
    }
}
