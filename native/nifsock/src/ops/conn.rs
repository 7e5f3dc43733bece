//! Making sockets: open, adopt an fd, accept (accept4, one syscall), connect.

use std::os::fd::RawFd;

use rustler::{Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::args::{self, Mode, Sock};
use crate::codec::reply;
use crate::core::family::Family;
use crate::core::opts;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::socket::{Active, Socket, TcpOpts};
use crate::stats;
use crate::sys::msg;
use crate::sys::resource::Owned;
use crate::sys::select::Dir;
use crate::sys::syscall;

/// Wraps a fresh fd in a socket owned (and monitored) by the caller.
pub fn wrap<'a>(
    env: Env<'a>,
    fd: RawFd,
    family: Family,
    close_may_block: bool,
    tcp: TcpOpts,
) -> Result<Term<'a>> {
    stats::FDS.up();
    let Some(owner) = msg::self_pid(env) else {
        lifecycle::close_fd(fd, lifecycle::How::Unwrapped);
        return Err(Error::BadArg);
    };
    let Some(owned) = Owned::new(Socket::new(fd, family, owner, close_may_block)) else {
        // Owned::new failed before the Socket was stored: nothing else has the fd.
        lifecycle::close_fd(fd, lifecycle::How::Unwrapped);
        return Err(Error::Os(libc::ENOMEM));
    };
    let obj = owned.obj();
    let mon = msg::monitor(crate::sys::env::EnvRef::of(env), obj, &owner);
    {
        let mut st = obj.get().lock();
        st.owner_mon = mon;
        st.tcp = tcp;
    }
    let term = lifecycle::sock_term(env, obj);
    drop(owned); // the term holds the object now
    Ok(term)
}

/// socket(2), non-blocking and close-on-exec.
pub fn open<'a>(env: Env<'a>, family: Family, protocol: i32) -> Result<Term<'a>> {
    let fd = syscall::socket(family.raw(), libc::SOCK_STREAM, protocol)?;
    wrap(env, fd, family, false, TcpOpts::default())
}

/// Adopts a foreign fd (a dup of it unless `dup` is false). Its linger state is
/// unknown to us, so it is read once here; the close path never asks again.
pub fn adopt<'a>(env: Env<'a>, fd: RawFd, dup: bool) -> Result<Term<'a>> {
    let mut b = [0u8; 8];
    let n = syscall::getsockopt(fd, libc::SOL_SOCKET, libc::SO_TYPE, &mut b)?;
    if opts::int_parse(b.get(..n).unwrap_or(&[])) != Some(libc::SOCK_STREAM) {
        return Err(Error::Invalid("type"));
    }
    let n = syscall::getsockopt(fd, libc::SOL_SOCKET, libc::SO_DOMAIN, &mut b)?;
    let family = opts::int_parse(b.get(..n).unwrap_or(&[]))
        .and_then(Family::from_raw)
        .ok_or(Error::Invalid("domain"))?;
    let n = syscall::getsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, &mut b)?;
    stats::GETSOCKOPTS.add(3);
    let may_block = opts::linger_parse(b.get(..n).unwrap_or(&[]))
        .is_none_or(|(on, secs)| opts::linger_blocks(on, secs));
    let own = if dup { syscall::dup_cloexec(fd)? } else { fd };
    if let Err(e) = syscall::set_nonblocking(own) {
        if dup {
            syscall::close(own);
        }
        return Err(Error::Os(e));
    }
    wrap(env, own, family, may_block, TcpOpts::default())
}

/// accept(L, Handle, Mode): `{ok, S}`, `select`, `{error, R}`.
pub fn accept<'a>(env: Env<'a>, l: Sock<'a>, handle: Term<'a>, mode: Mode) -> NifResult<Term<'a>> {
    let caller = args::caller(env)?;
    loop {
        let r = match l.s.with_fd(syscall::accept) {
            Ok(r) => r,
            Err(e) => return reply::error(env, e),
        };
        match r {
            Ok(fd) => {
                tracing::trace!(fd, op = "accept");
                lifecycle::done(env, l.obj, Dir::Read, &caller);
                // Linux copies SO_LINGER to the accepted socket: inherit our record of
                // it, and nifsock_tcp's framing options (never the active mode).
                let tcp = TcpOpts {
                    active: Active::Off,
                    ..l.s.lock().tcp
                };
                let accepted = wrap(env, fd, l.s.family, l.s.close_may_block(), tcp);
                if accepted.is_ok() {
                    l.s.count_accept();
                }
                return reply::value(env, accepted);
            }
            Err(e) if e == libc::EAGAIN || e == libc::EWOULDBLOCK => {
                stats::ACCEPTS_EAGAIN.incr();
                return match mode {
                    Mode::Zero => {
                        lifecycle::done(env, l.obj, Dir::Read, &caller);
                        reply::error(env, Error::Timeout)
                    }
                    Mode::Wait | Mode::Nowait => {
                        match lifecycle::wait(env, l.obj, l.term, Dir::Read, &caller, handle) {
                            Ok(()) => Ok(atoms::select().encode(env)),
                            Err(e) => reply::error(env, e),
                        }
                    }
                };
            }
            // The connection died in the backlog, or a signal: try the next one.
            Err(libc::ECONNABORTED) | Err(libc::EINTR) => continue,
            Err(e) => {
                tracing::debug!(op = "accept", errno = e);
                lifecycle::done(env, l.obj, Dir::Read, &caller);
                return reply::error(env, Error::Os(e));
            }
        }
    }
}

/// connect(S, Addr, Handle, Mode): `ok`, `select` (in progress), `{error, R}`.
pub fn connect<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    addr: Term<'a>,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    let a = match crate::codec::addr::decode(addr, sock.s.family) {
        Ok(a) => a,
        Err(e) => return reply::error(env, e),
    };
    let caller = args::caller(env)?;
    let r = match sock.s.with_fd(|fd| syscall::connect(fd, &a)) {
        Ok(r) => r,
        Err(e) => return reply::error(env, e),
    };
    match r {
        Ok(()) => Ok(atoms::ok().encode(env)),
        Err(e)
            if e == libc::EINPROGRESS || (e == libc::EAGAIN && sock.s.family == Family::Local) =>
        {
            sock.s.lock().connecting = true;
            if mode == Mode::Zero {
                return reply::error(env, Error::Timeout);
            }
            match lifecycle::wait(env, sock.obj, sock.term, Dir::Write, &caller, handle) {
                Ok(()) => Ok(atoms::select().encode(env)),
                Err(e) => reply::error(env, e),
            }
        }
        Err(e) => reply::error(env, Error::Os(e)),
    }
}

/// Finishes a connect after its select message: reads SO_ERROR.
pub fn connect_finish<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let caller = args::caller(env)?;
    let mut b = [0u8; 4];
    let r = sock
        .s
        .with_fd(|fd| syscall::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut b));
    lifecycle::done(env, sock.obj, Dir::Write, &caller);
    sock.s.lock().connecting = false;
    match r {
        Err(e) => reply::error(env, e),
        Ok(Err(e)) => reply::error(env, Error::Os(e)),
        Ok(Ok(_)) => match i32::from_ne_bytes(b) {
            0 => Ok(atoms::ok().encode(env)),
            e => reply::error(env, Error::Os(e)),
        },
    }
}
