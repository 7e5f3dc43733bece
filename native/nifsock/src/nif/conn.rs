//! NIFs that make, connect and end sockets.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustler::{Atom, Binary, Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::addr::{self, Family};
use crate::codec::args::{Mode, Sock};
use crate::codec::reply;
use crate::error::{Error, Result};
use crate::lifecycle::{self, Closed, Ctx};
use crate::ops::conn::{self, Accepted, Connected};

fn protocol(p: Term) -> Option<i32> {
    if let Ok(i) = p.decode::<i32>() {
        return Some(i);
    }
    let a: Atom = p.decode().ok()?;
    if a == atoms::default() {
        Some(0)
    } else if a == atoms::tcp() {
        // For a local socket too: the kernel answers EPROTONOSUPPORT, as socket does.
        Some(libc::IPPROTO_TCP)
    } else {
        None
    }
}

/// `open/4`'s `netns`: `undefined`, or the namespace file's name (bytes).
fn netns_path<'a>(t: Term<'a>) -> Option<Option<&'a Path>> {
    if t.decode::<Atom>().ok() == Some(atoms::undefined()) {
        return Some(None);
    }
    let b: Binary<'a> = t.decode().ok()?;
    Some(Some(Path::new(OsStr::from_bytes(b.as_slice()))))
}

#[rustler::nif]
fn open<'a>(
    env: Env<'a>,
    family: Atom,
    ty: Atom,
    proto: Term<'a>,
    netns: Term<'a>,
) -> NifResult<Term<'a>> {
    let Some(family) = Family::from_atom(family) else {
        return reply::error(env, Error::Invalid("domain"));
    };
    if ty != atoms::stream() {
        return reply::error(env, Error::Invalid("type"));
    }
    let Some(proto) = protocol(proto) else {
        return reply::error(env, Error::Invalid("protocol"));
    };
    let Some(netns) = netns_path(netns) else {
        return reply::error(env, Error::Invalid("netns"));
    };
    reply::value(env, conn::open(env, family, proto, netns).map(|s| s.term))
}

#[rustler::nif]
fn adopt(env: Env<'_>, fd: i32, dup: bool) -> NifResult<Term<'_>> {
    if fd < 0 {
        return reply::error(env, Error::Invalid("fd"));
    }
    reply::value(env, conn::adopt(env, fd, dup).map(|s| s.term))
}

#[rustler::nif]
fn bind<'a>(env: Env<'a>, sock: Sock<'a>, a: Term<'a>) -> NifResult<Term<'a>> {
    if sock.s.family == Family::Local && addr::is_ip_name(a) {
        // As socket: `any`, `loopback` and `broadcast` are IP addresses.
        return reply::error(env, Error::Os(libc::EAFNOSUPPORT));
    }
    let r = addr::decode(a, sock.s.family).and_then(|a| conn::bind(sock, &a));
    reply::unit(env, r)
}

#[rustler::nif]
fn listen<'a>(env: Env<'a>, sock: Sock<'a>, backlog: i32) -> NifResult<Term<'a>> {
    reply::unit(env, conn::listen(sock, backlog))
}

#[rustler::nif]
fn accept<'a>(env: Env<'a>, l: Sock<'a>, handle: Term<'a>, mode: Mode) -> NifResult<Term<'a>> {
    accepted(env, conn::accept(env, l, handle, mode))
}

#[rustler::nif]
fn connect<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    a: Term<'a>,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    match conn::connect(env, sock, a, handle, mode) {
        Ok(Connected::Now) => Ok(atoms::ok().encode(env)),
        Ok(Connected::Select) => Ok(atoms::select().encode(env)),
        Err(e) => reply::error(env, e),
    }
}

#[rustler::nif]
fn connect_finish<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    reply::unit(env, conn::connect_finish(env, sock))
}

/// close: `ok`, `{error, closed}`, or `linger` (call finish_close, a dirty NIF).
#[rustler::nif]
fn close<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    match lifecycle::close(Ctx::Nif(env), sock.obj) {
        Ok(Closed::Done) => Ok(atoms::ok().encode(env)),
        Ok(Closed::Lingering) => Ok(atoms::linger().encode(env)),
        Err(e) => reply::error(env, e),
    }
}

/// The blocking half of a lingering close, on a dirty I/O scheduler.
#[rustler::nif(schedule = "DirtyIo")]
fn finish_close<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    lifecycle::finish_lingering_close(sock.obj);
    Ok(atoms::ok().encode(env))
}

#[rustler::nif]
fn shutdown<'a>(env: Env<'a>, sock: Sock<'a>, how: Atom) -> NifResult<Term<'a>> {
    shutdown_how(env, sock, how)
}

/// shutdown(2) with `read | write | read_write`.
pub fn shutdown_how<'a>(env: Env<'a>, sock: Sock<'a>, how: Atom) -> NifResult<Term<'a>> {
    let how = if how == atoms::read() {
        libc::SHUT_RD
    } else if how == atoms::write() {
        libc::SHUT_WR
    } else if how == atoms::read_write() {
        libc::SHUT_RDWR
    } else {
        return reply::error(env, Error::Invalid("how"));
    };
    reply::unit(env, conn::shutdown(sock, how))
}

/// accept's reply: `{ok, S}`, `select`, or `{error, Reason}`.
pub(super) fn accepted<'a>(env: Env<'a>, r: Result<Accepted<'a>>) -> NifResult<Term<'a>> {
    match r {
        Ok(Accepted::Socket(s)) => Ok((atoms::ok(), s.term).encode(env)),
        Ok(Accepted::Select) => Ok(atoms::select().encode(env)),
        Err(e) => reply::error(env, e),
    }
}
