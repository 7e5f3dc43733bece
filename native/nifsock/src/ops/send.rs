//! send: the iolist's binaries go out with one sendmsg (writev with flags) per
//! IOV_MAX entries, never flattened into one binary first.

use rustler::{Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::args::{self, Mode, Sock};
use crate::codec::reply;
use crate::core::errno::is_would_block;
use crate::error::Error;
use crate::lifecycle;
use crate::socket::Socket;
use crate::stats;
use crate::sys::iovec::IoVec;
use crate::sys::select::Dir;
use crate::sys::syscall;

enum Sent {
    All,
    Partial(usize),
    Failed(i32, usize),
}

fn write_all(s: &Socket, fd: std::os::fd::RawFd, entries: &[libc::iovec], flags: i32) -> Sent {
    let mut written = 0usize;
    let mut rest = entries;
    while !rest.is_empty() {
        let n_entries = rest.len().min(syscall::IOV_MAX);
        let (chunk, tail) = rest.split_at(n_entries);
        let chunk_bytes: usize = chunk.iter().map(|v| v.iov_len).sum();
        match syscall::sendv(fd, chunk, flags) {
            Ok(n) => {
                s.count_write(n);
                written += n;
                if n < chunk_bytes {
                    return Sent::Partial(written);
                }
            }
            Err(e) if is_would_block(e) => {
                stats::WRITES_EAGAIN.incr();
                return Sent::Partial(written);
            }
            Err(libc::EINTR) => continue,
            Err(e) => return Sent::Failed(e, written),
        }
        rest = tail;
    }
    Sent::All
}

/// send(Sock, IOVec, Flags, Handle, Mode). Returns `ok`, `{select, Written}`
/// (a select is armed), `{partial, Written}` (Mode zero), `{error, R}` or
/// `{error, {R, Written}}`.
pub fn send<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    iov: Term<'a>,
    flags: i32,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    let iov = IoVec::inspect(env, iov).ok_or(rustler::Error::BadArg)?;
    let caller = args::caller(env)?;
    let sent = match sock
        .s
        .with_fd(|fd| write_all(sock.s, fd, iov.entries(), flags))
    {
        Ok(s) => s,
        Err(e) => return reply::error(env, e),
    };
    match sent {
        Sent::All => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            Ok(atoms::ok().encode(env))
        }
        Sent::Failed(e, 0) => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            reply::error(env, Error::Os(e))
        }
        Sent::Failed(e, n) => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            reply::error_with(env, Error::Os(e), Some(n.encode(env)))
        }
        Sent::Partial(n) => match mode {
            Mode::Zero => Ok((atoms::more(), n).encode(env)),
            Mode::Wait | Mode::Nowait => {
                match lifecycle::wait(env, sock.obj, sock.term, Dir::Write, &caller, handle) {
                    Ok(()) => Ok((atoms::select(), n).encode(env)),
                    Err(e) if n == 0 => reply::error(env, e),
                    Err(e) => reply::error_with(env, e, Some(n.encode(env))),
                }
            }
        },
    }
}
