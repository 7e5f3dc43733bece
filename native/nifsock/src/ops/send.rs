//! send: the iolist's binaries go out with one sendmsg (writev with flags) per
//! IOV_MAX entries, never flattened into one binary first.

use rustler::{Env, Term};

use crate::codec::args::{Mode, Sock};
use crate::core::errno::is_would_block;
use crate::error::Error;
use crate::lifecycle;
use crate::socket::Socket;
use crate::stats;
use crate::sys::iovec::IoVec;
use crate::sys::msg;
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
            Err(e) => {
                if e == libc::ECONNRESET {
                    s.note_peer_reset();
                }
                return Sent::Failed(e, written);
            }
        }
        rest = tail;
    }
    Sent::All
}

/// What a send did.
pub enum Outcome {
    /// Everything went out.
    All,
    /// This many bytes went out; a select is armed for the rest.
    Select(usize),
    /// This many bytes went out (mode zero: no select).
    More(usize),
}

/// A failed send: the reason and how many bytes went out before it.
pub type Failed = (Error, usize);

/// send(Sock, IOVec, Flags, Handle, Mode): the binaries go out with sendmsg,
/// one call per IOV_MAX entries.
pub fn send<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    iov: Term<'a>,
    flags: i32,
    handle: Term<'a>,
    mode: Mode,
) -> Result<Outcome, Failed> {
    let iov = IoVec::inspect(env, iov).ok_or((Error::BadArg, 0))?;
    send_entries(env, sock, iov.entries(), flags, handle, mode)
}

/// [`send`] of entries the caller has inspected already (an [`IoVec`] or a
/// [`Gathered`](crate::sys::iovec::Gathered) iolist), borrowed from `env`.
pub fn send_entries<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    entries: &[libc::iovec],
    flags: i32,
    handle: Term<'a>,
    mode: Mode,
) -> Result<Outcome, Failed> {
    let caller = msg::self_pid(env).ok_or((Error::BadArg, 0))?;
    // Held until this send is done or registered as the current writer.
    let _turn = sock.s.write_turn();
    let sent = if lifecycle::writer_ahead(sock.obj, &caller) {
        // Another send is part-way through: queue behind it, write nothing.
        Sent::Partial(0)
    } else {
        sock.s
            .with_fd(|fd| write_all(sock.s, fd, entries, flags))
            .map_err(|e| (e, 0))?
    };
    match sent {
        Sent::All => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            Ok(Outcome::All)
        }
        Sent::Failed(e, n) => {
            lifecycle::done(env, sock.obj, Dir::Write, &caller);
            Err((Error::Os(e), n))
        }
        Sent::Partial(n) => match mode {
            Mode::Zero => Ok(Outcome::More(n)),
            Mode::Wait | Mode::Nowait => {
                lifecycle::wait(env, sock.obj, sock.term, Dir::Write, &caller, handle)
                    .map_err(|e| (e, n))?;
                Ok(Outcome::Select(n))
            }
        },
    }
}
