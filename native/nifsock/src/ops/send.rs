//! send: the iolist's binaries go out with one sendmsg (writev with flags) per
//! IOV_MAX entries, never flattened into one binary first (one entry: one
//! send, `syscall::sendv`).

use rustler::{Env, Term};

use crate::codec::args::{Mode, Sock};
use crate::core::errno::is_would_block;
use crate::error::Error;
use crate::lifecycle;
use crate::socket::Socket;
use crate::stats;
use crate::sys::iovec::{self, IoVec, Unwalked};
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
    /// Nothing was sent: the data is not binaries alone (byte integers),
    /// or more pieces than fit the stack and not a flat list: the caller
    /// flattens it (`erlang:iolist_to_iovec/1`) and sends that.
    Flatten,
}

/// A failed send: the reason and how many bytes went out before it.
pub type Failed = (Error, usize);

/// send(Sock, Data, Flags, Handle, Mode): the bytes of `Data`, a binary or
/// a list of binaries (nested, with binary tails), go out with sendmsg, one
/// call per IOV_MAX entries.
///
/// `Data` of a few binaries, or of at most `GATHER_MAX` pieces (small
/// binaries copied together are one), is sent with no allocation
/// ([`iovec::with_iolist`]); only a longer one, a flat list of binaries, is
/// inspected with `enif_inspect_iovec`, which allocates the vector and, for
/// heap binaries (every binary of up to 64 bytes), a refc binary to copy them
/// into, left on the caller's heap for its next GC: two allocations per send
/// of a short reply. Anything else is [`Outcome::Flatten`], sending nothing.
pub fn send<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    data: Term<'a>,
    flags: i32,
    handle: Term<'a>,
    mode: Mode,
) -> Result<Outcome, Failed> {
    if !data.is_list() && !data.is_binary() {
        return Err((Error::BadArg, 0));
    }
    match iovec::with_iolist(data, |e| send_entries(env, sock, e, flags, handle, mode)) {
        Ok(r) => return r,
        Err(Unwalked::NotIodata) => return Err((Error::BadArg, 0)),
        Err(Unwalked::Other) => {}
    }
    match IoVec::inspect(env, data) {
        Some(iov) => send_entries(env, sock, iov.entries(), flags, handle, mode),
        None => Ok(Outcome::Flatten),
    }
}

/// [`send`] of entries the caller has inspected already (an [`IoVec`] or a
/// [`iovec::with_iolist`] iolist), borrowed from `env`.
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
    let turn = lifecycle::write_turn(sock.obj, &caller);
    let sent = if turn.behind() {
        // Another send is part-way through: queue behind it, write nothing.
        Sent::Partial(0)
    } else {
        sock.s
            .with_fd(|fd| write_all(sock.s, fd, entries, flags))
            .map_err(|e| (e, 0))?
    };
    match sent {
        Sent::All => {
            lifecycle::write_ended(env, sock.obj, turn, &caller);
            Ok(Outcome::All)
        }
        Sent::Failed(e, n) => {
            lifecycle::write_ended(env, sock.obj, turn, &caller);
            Err((Error::Os(e), n))
        }
        Sent::Partial(n) => match mode {
            Mode::Zero => Ok(Outcome::More(n)),
            Mode::Wait | Mode::Nowait | Mode::Yielded => {
                lifecycle::wait(env, sock.obj, sock.term, Dir::Write, &caller, handle)
                    .map_err(|e| (e, n))?;
                Ok(Outcome::Select(n))
            }
        },
    }
}
