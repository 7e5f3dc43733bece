//! sendfile(2) from an open file to the socket, non-blocking: on EAGAIN the
//! caller waits for writability (a select), never a scheduler.

use rustler::{Env, Term};

use crate::codec::args::{Mode, Sock};
use crate::core::errno::is_would_block;
use crate::error::Error;
use crate::lifecycle;
use crate::socket::Socket;
use crate::stats;
use crate::sys::msg;
use crate::sys::select::Dir;
use crate::sys::syscall;

use crate::core::limits::{SENDFILE_CHUNK as CHUNK, SENDFILE_MAX_CALLS as MAX_CALLS};

enum Pumped {
    /// Count reached or end of file.
    Done(u64),
    /// The socket buffer is full: wait for writability.
    Blocked(u64),
    /// Yield to Erlang, then call again.
    More(u64),
    Failed(i32, u64),
}

fn pump(s: &Socket, sock_fd: i32, file_fd: i32, mut offset: i64, count: u64) -> Pumped {
    let mut sent: u64 = 0;
    for _ in 0..MAX_CALLS {
        let want = if count == 0 {
            CHUNK as u64
        } else {
            (count - sent).min(CHUNK as u64)
        };
        if want == 0 {
            return Pumped::Done(sent);
        }
        match syscall::sendfile(
            sock_fd,
            file_fd,
            &mut offset,
            usize::try_from(want).unwrap_or(CHUNK),
        ) {
            Ok(0) => return Pumped::Done(sent),
            Ok(n) => {
                s.count_write(n);
                sent += n as u64;
                if count != 0 && sent >= count {
                    return Pumped::Done(sent);
                }
            }
            Err(e) if is_would_block(e) => {
                stats::WRITES_EAGAIN.incr();
                return Pumped::Blocked(sent);
            }
            Err(libc::EINTR) => {}
            Err(e) => return Pumped::Failed(e, sent),
        }
    }
    Pumped::More(sent)
}

/// What a sendfile call did (each with the bytes sent by it).
pub enum Outcome {
    /// Count reached or end of file.
    Done(u64),
    /// Call again (yielding to Erlang between calls).
    More(u64),
    /// A select is armed: call again after its message.
    Select(u64),
}

/// A failed sendfile: the reason, and the bytes sent before it when the
/// reply carries them (`{error, {R, Sent}}`).
pub type Failed = (Error, Option<u64>);

/// sendfile(Sock, FileFd, Offset, Count, Handle, Mode).
pub fn sendfile<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    file_fd: i32,
    offset: i64,
    count: u64,
    handle: Term<'a>,
    mode: Mode,
) -> Result<Outcome, Failed> {
    let caller = msg::self_pid(env).ok_or((Error::BadArg, None))?;
    // As send: one writer at a time (see `Socket::write_turn`).
    let _turn = sock.s.write_turn();
    let turn = lifecycle::write_turn(sock.obj, &caller);
    let pumped = if turn.behind() {
        Pumped::Blocked(0)
    } else {
        sock.s
            .with_fd(|fd| pump(sock.s, fd, file_fd, offset, count))
            .map_err(|e| (e, None))?
    };
    match pumped {
        Pumped::Done(n) => {
            lifecycle::write_ended(env, sock.obj, turn, &caller);
            Ok(Outcome::Done(n))
        }
        Pumped::More(n) => Ok(Outcome::More(n)),
        Pumped::Failed(e, n) => {
            // A failed write ends this writer's turn, as a completed one
            // does: a writer queued behind it must not wait for it forever.
            lifecycle::write_ended(env, sock.obj, turn, &caller);
            Err((Error::Os(e), (n > 0).then_some(n)))
        }
        Pumped::Blocked(n) => match mode {
            Mode::Zero => Ok(Outcome::More(n)),
            Mode::Wait | Mode::Nowait | Mode::Yielded => {
                lifecycle::wait(env, sock.obj, sock.term, Dir::Write, &caller, handle)
                    .map_err(|e| (e, Some(n)))?;
                Ok(Outcome::Select(n))
            }
        },
    }
}
