//! NIFs that move bytes and manage waits.

use rustler::{Atom, Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::args::{self, Mode, Sock};
use crate::codec::reply;
use crate::error::Error;
use crate::lifecycle::{self, Cancelled};
use crate::ops::{recv, send, sendfile};
use crate::sys::select::Dir;

#[rustler::nif]
fn recv<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    len: Term<'a>,
    flags: Term<'a>,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    let len: usize = len.decode().map_err(|_| rustler::Error::BadArg)?;
    let flags = args::msg_flags(flags)?;
    reply::recv(env, recv::recv(env, sock, len, flags, handle, mode))
}

/// Turns the yields of blocking `recv(S, 0)` calls on or off (application
/// env `recv_yield`, from `nifsock_nif`'s load).
#[rustler::nif]
fn recv_yield(on: bool) -> rustler::Atom {
    recv::set_recv_yield(on);
    atoms::ok()
}

#[rustler::nif]
fn take_partial<'a>(env: Env<'a>, sock: Sock<'a>) -> Term<'a> {
    recv::take_partial(env, sock).to_term(env)
}

#[rustler::nif]
fn send<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    iov: Term<'a>,
    flags: Term<'a>,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    let flags = args::msg_flags(flags)?;
    sent(env, send::send(env, sock, iov, flags, handle, mode))
}

/// A send's reply: `ok`, `{select, N}`, `{more, N}` (mode zero only), `iovec`
/// (flatten the data and send again), or the
/// error with the bytes written before it, if any.
pub(super) fn sent<'a>(
    env: Env<'a>,
    r: std::result::Result<send::Outcome, send::Failed>,
) -> NifResult<Term<'a>> {
    match r {
        Ok(send::Outcome::All) => Ok(atoms::ok().encode(env)),
        Ok(send::Outcome::Select(n)) => Ok((atoms::select(), n).encode(env)),
        Ok(send::Outcome::More(n)) => Ok((atoms::more(), n).encode(env)),
        Ok(send::Outcome::Flatten) => Ok(atoms::iovec().encode(env)),
        Err((e, 0)) => reply::error(env, e),
        Err((e, n)) => reply::error_with(env, e, Some(n.encode(env))),
    }
}

#[rustler::nif]
fn sendfile<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    file_fd: i32,
    offset: i64,
    count: u64,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    if file_fd < 0 || offset < 0 {
        return reply::error(env, Error::Invalid("sendfile"));
    }
    match sendfile::sendfile(env, sock, file_fd, offset, count, handle, mode) {
        Ok(sendfile::Outcome::Done(n)) => Ok((atoms::ok(), n).encode(env)),
        Ok(sendfile::Outcome::More(n)) => Ok((atoms::more(), n).encode(env)),
        Ok(sendfile::Outcome::Select(n)) => Ok((atoms::select(), n).encode(env)),
        Err((e, None)) => reply::error(env, e),
        Err((e, Some(n))) => reply::error_with(env, e, Some(n.encode(env))),
    }
}

/// cancel(S, Op, Handle): `ok`, `select_sent` (flush the message), `not_found`, `{error, closed}`.
#[rustler::nif]
fn cancel<'a>(env: Env<'a>, sock: Sock<'a>, op: Atom, handle: Term<'a>) -> NifResult<Term<'a>> {
    let dir = if op == atoms::recv() || op == atoms::accept() {
        Dir::Read
    } else if op == atoms::send() || op == atoms::connect() || op == atoms::sendfile() {
        Dir::Write
    } else {
        return reply::error(env, Error::Invalid("select_info"));
    };
    let caller = args::caller(env)?;
    match lifecycle::cancel(env, sock.obj, dir, &caller, handle) {
        Ok(Cancelled::Ok) => Ok(atoms::ok().encode(env)),
        Ok(Cancelled::SelectSent) => Ok(atoms::select_sent().encode(env)),
        Ok(Cancelled::NotFound) => Ok(atoms::not_found().encode(env)),
        Err(e) => reply::error(env, e),
    }
}
