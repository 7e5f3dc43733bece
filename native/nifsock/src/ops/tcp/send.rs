//! What `nifsock_tcp` does when a send times out: as gen_tcp, the bytes the
//! send could not write stay queued in the socket (so a timeout never cuts a
//! `{packet, N}` frame and later data never overtakes them) and the next
//! send, from whichever process, writes them first; with
//! `{send_timeout_close, true}` the socket is closed instead.
//!
//! Nothing here runs on a send that completes: `tcp::send_info` tells
//! `nifsock_tcp:send/2` whether a rest is queued, under the lock it already
//! takes.

use rustler::{Env, Term};

use crate::codec::args::{Mode, Sock};
use crate::codec::reply::Progress;
use crate::core::errno::is_would_block;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::socket::{Phase, SendRest, Socket};
use crate::stats;
use crate::sys::iovec::IoVec;
use crate::sys::msg;
use crate::sys::select::Dir;
use crate::sys::syscall;

/// A send timed out with `rest` (an I/O vector: the bytes it did not write)
/// unsent: queue them (a copy: `nifsock_tcp` calls the dirty-scheduler entry
/// point for a large rest), or close the socket under `send_timeout_close`.
pub fn timed_out(env: Env, sock: Sock, iov: &IoVec) -> Result<()> {
    let close = {
        let mut st = sock.s.lock();
        if st.phase != Phase::Open {
            return Err(Error::Closed);
        }
        if st.tcp.send_timeout_close {
            true
        } else if iov.size() == 0 {
            false
        } else {
            let r = st.send_rest.get_or_insert_with(Box::default);
            // Drop the written front only once it is most of the buffer, so
            // repeated timeouts don't move the unsent bytes each time.
            if r.off > r.buf.len() / 2 {
                let off = r.off.min(r.buf.len());
                r.buf.drain(..off);
                r.off = 0;
            }
            r.buf.reserve(iov.size());
            for b in iov.slices() {
                r.buf.extend_from_slice(b);
            }
            false
        }
    };
    if close {
        crate::ops::tcp::close_ended(env, sock);
    }
    Ok(())
}

enum Flushed {
    Drained,
    Blocked,
    Failed(i32),
    /// The fd is being closed.
    Gone,
}

fn write_rest(s: &Socket, fd: std::os::fd::RawFd, rest: &mut SendRest) -> Flushed {
    loop {
        let unsent = rest.unsent();
        if unsent.is_empty() {
            return Flushed::Drained;
        }
        match syscall::send(fd, unsent, 0) {
            Ok(n) => {
                let partial = n < unsent.len();
                s.count_write(n);
                rest.off += n;
                if partial {
                    // the socket buffer is full: wait for room (no EAGAIN call)
                    return Flushed::Blocked;
                }
            }
            Err(e) if is_would_block(e) => {
                stats::WRITES_EAGAIN.incr();
                return Flushed::Blocked;
            }
            Err(libc::EINTR) => {}
            Err(e) => {
                if e == libc::ECONNRESET {
                    s.note_peer_reset();
                }
                return Flushed::Failed(e);
            }
        }
    }
}

/// Writes the queued rest: `Done` once it is all out (or there is none),
/// `Select` when the caller must wait for its select message (Mode wait),
/// `timeout` instead in Mode zero, the error when the write fails (the rest
/// is dropped: the stream is broken).
///
/// The rest is written under the state lock, so two processes flushing at
/// once take turns and neither can write between its bytes.
pub fn flush<'a>(env: Env<'a>, sock: Sock<'a>, handle: Term<'a>, mode: Mode) -> Result<Progress> {
    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
    // As send: one writer at a time (see `Socket::write_turn`).
    let _turn = sock.s.write_turn();
    let turn = lifecycle::write_turn(sock.obj, &caller);
    let outcome = {
        let mut guard = sock.s.lock();
        let st = &mut *guard;
        if st.phase != Phase::Open {
            return Err(Error::Closed);
        }
        let outcome = match st.send_rest.as_deref_mut() {
            _ if turn.behind() => Flushed::Blocked,
            None => Flushed::Drained,
            Some(rest) => match sock.s.with_fd(|fd| write_rest(sock.s, fd, rest)) {
                Ok(f) => f,
                Err(_) => Flushed::Gone,
            },
        };
        if !matches!(outcome, Flushed::Blocked) {
            st.send_rest = None;
        }
        outcome
    };
    match outcome {
        Flushed::Drained => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            Ok(Progress::Done)
        }
        Flushed::Failed(e) => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            Err(Error::Os(e))
        }
        Flushed::Gone => Err(Error::Closed),
        Flushed::Blocked if mode == Mode::Zero => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            Err(Error::Timeout)
        }
        Flushed::Blocked => {
            lifecycle::wait(env, sock.obj, sock.term, Dir::Write, &caller, handle)?;
            Ok(Progress::Select)
        }
    }
}
