//! sendfile(2) from an open file to the socket, non-blocking: on EAGAIN the
//! caller waits for writability (a select), never a scheduler.

use rustler::{Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::args::{self, Mode, Sock};
use crate::codec::reply;
use crate::core::errno::is_would_block;
use crate::error::Error;
use crate::lifecycle;
use crate::socket::Socket;
use crate::stats;
use crate::sys::select::Dir;
use crate::sys::syscall;

use crate::core::limits::{SENDFILE_CHUNK as CHUNK, SENDFILE_MAX_CALLS as MAX_CALLS};

enum Outcome {
    /// Count reached or end of file.
    Done(u64),
    /// The socket buffer is full: wait for writability.
    Blocked(u64),
    /// Yield to Erlang, then call again.
    More(u64),
    Failed(i32, u64),
}

fn pump(s: &Socket, sock_fd: i32, file_fd: i32, mut offset: i64, count: u64) -> Outcome {
    let mut sent: u64 = 0;
    for _ in 0..MAX_CALLS {
        let want = if count == 0 {
            CHUNK as u64
        } else {
            (count - sent).min(CHUNK as u64)
        };
        if want == 0 {
            return Outcome::Done(sent);
        }
        match syscall::sendfile(
            sock_fd,
            file_fd,
            &mut offset,
            usize::try_from(want).unwrap_or(CHUNK),
        ) {
            Ok(0) => return Outcome::Done(sent),
            Ok(n) => {
                s.count_write(n);
                sent += n as u64;
                if count != 0 && sent >= count {
                    return Outcome::Done(sent);
                }
            }
            Err(e) if is_would_block(e) => {
                stats::WRITES_EAGAIN.incr();
                return Outcome::Blocked(sent);
            }
            Err(libc::EINTR) => {}
            Err(e) => return Outcome::Failed(e, sent),
        }
    }
    Outcome::More(sent)
}

/// sendfile(Sock, FileFd, Offset, Count, Handle, Mode): `{ok, Sent}` (done),
/// `{more, Sent}` (call again), `{select, Sent}` (wait for the select message),
/// `{error, R}` or `{error, {R, Sent}}`.
pub fn sendfile<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    file_fd: i32,
    offset: i64,
    count: u64,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    let caller = args::caller(env)?;
    let outcome = match sock
        .s
        .with_fd(|fd| pump(sock.s, fd, file_fd, offset, count))
    {
        Ok(o) => o,
        Err(e) => return reply::error(env, e),
    };
    match outcome {
        Outcome::Done(n) => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            Ok((atoms::ok(), n).encode(env))
        }
        Outcome::More(n) => Ok((atoms::more(), n).encode(env)),
        Outcome::Failed(e, 0) => reply::error(env, Error::Os(e)),
        Outcome::Failed(e, n) => reply::error_with(env, Error::Os(e), Some(n.encode(env))),
        Outcome::Blocked(n) => match mode {
            Mode::Zero => Ok((atoms::more(), n).encode(env)),
            Mode::Wait | Mode::Nowait => {
                match lifecycle::wait(env, sock.obj, sock.term, Dir::Write, &caller, handle) {
                    Ok(()) => Ok((atoms::select(), n).encode(env)),
                    Err(e) => reply::error_with(env, e, Some(n.encode(env))),
                }
            }
        },
    }
}
