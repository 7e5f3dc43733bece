//! Making sockets: open, adopt an fd, accept (accept4, one syscall), connect.

use std::os::fd::RawFd;
use std::path::Path;

use rustler::{Env, Term};
use socket2::SockAddr;

use crate::codec::args::{Mode, Sock};
use crate::core::errno::is_would_block;
use crate::core::family::Family;
use crate::core::opts;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::socket::{Active, Socket, TcpOpts};
use crate::stats;
use crate::sys::msg;
use crate::sys::netns;
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
) -> Result<Sock<'a>> {
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
    let (res, obj) = owned.into_term(env); // the term holds the object now
    Ok(Sock {
        term: crate::codec::args::sock_term(env, res),
        obj,
        s: obj.get(),
    })
}

/// What accept did.
pub enum Accepted<'a> {
    /// A connection: its new socket.
    Socket(Sock<'a>),
    /// None yet: the caller waits for its select message.
    Select,
}

/// What connect did.
pub enum Connected {
    /// Connected now.
    Now,
    /// In progress: the caller waits for its select message, then finishes.
    Select,
}

/// socket(2), non-blocking and close-on-exec; made in the network namespace
/// that the file `netns` names, when given (`open/4`'s `netns`).
pub fn open<'a>(
    env: Env<'a>,
    family: Family,
    protocol: i32,
    netns: Option<&Path>,
) -> Result<Sock<'a>> {
    let fd = match netns {
        None => syscall::socket(family.raw(), libc::SOCK_STREAM, protocol)?,
        Some(path) => netns::socket_in(path, family.raw(), libc::SOCK_STREAM, protocol)?,
    };
    wrap(env, fd, family, false, TcpOpts::default())
}

/// Adopts a foreign fd (a dup of it unless `dup` is false). Its linger state is
/// unknown to us, so it is read once here; the close path never asks again.
pub fn adopt<'a>(env: Env<'a>, fd: RawFd, dup: bool) -> Result<Sock<'a>> {
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
    let sock = wrap(env, own, family, may_block, TcpOpts::default())?;
    // the caller's fd (or, not dup'ed, the fd itself) stays theirs too
    sock.s.share_fd();
    Ok(sock)
}

/// accept4 on listener `l`: a new socket, `Select` (wait for readiness), or an error.
pub fn accept<'a>(env: Env<'a>, l: Sock<'a>, handle: Term<'a>, mode: Mode) -> Result<Accepted<'a>> {
    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
    loop {
        match l.s.with_fd(syscall::accept)? {
            Ok(fd) => {
                tracing::trace!(fd, op = "accept");
                lifecycle::done(env, l.obj, Dir::Read, &caller);
                // Linux copies SO_LINGER to the accepted socket: inherit our record of
                // it, and nifsock_tcp's framing options (never the active mode).
                let tcp = TcpOpts {
                    active: Active::Off,
                    ..l.s.lock().tcp
                };
                let accepted = wrap(env, fd, l.s.family, l.s.close_may_block(), tcp)?;
                l.s.count_accept();
                return Ok(Accepted::Socket(accepted));
            }
            Err(e) if is_would_block(e) => {
                stats::ACCEPTS_EAGAIN.incr();
                return match mode {
                    Mode::Zero => {
                        lifecycle::done(env, l.obj, Dir::Read, &caller);
                        Err(Error::Timeout)
                    }
                    Mode::Wait | Mode::Nowait | Mode::Yielded => {
                        lifecycle::wait(env, l.obj, l.term, Dir::Read, &caller, handle)?;
                        Ok(Accepted::Select)
                    }
                };
            }
            // The connection died in the backlog, or a signal: try the next one.
            Err(libc::ECONNABORTED) | Err(libc::EINTR) => continue,
            Err(e) => {
                tracing::debug!(op = "accept", errno = e);
                lifecycle::done(env, l.obj, Dir::Read, &caller);
                return Err(Error::Os(e));
            }
        }
    }
}

/// connect(S, Addr, Handle, Mode): connected now, `Select` (in progress), or an error.
pub fn connect<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    addr: Term<'a>,
    handle: Term<'a>,
    mode: Mode,
) -> Result<Connected> {
    let a = crate::codec::addr::decode(addr, sock.s.family)?;
    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
    match sock.s.with_fd(|fd| syscall::connect(fd, &a))? {
        Ok(()) => Ok(Connected::Now),
        Err(e)
            if e == libc::EINPROGRESS || (e == libc::EAGAIN && sock.s.family == Family::Local) =>
        {
            sock.s.lock().connecting = true;
            if mode == Mode::Zero {
                return Err(Error::Timeout);
            }
            lifecycle::wait(env, sock.obj, sock.term, Dir::Write, &caller, handle)?;
            Ok(Connected::Select)
        }
        Err(e) => Err(Error::Os(e)),
    }
}

/// Finishes a connect after its select message: reads SO_ERROR.
pub fn connect_finish<'a>(env: Env<'a>, sock: Sock<'a>) -> Result<()> {
    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
    let mut b = [0u8; 4];
    let r = sock
        .s
        .with_fd(|fd| syscall::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut b));
    lifecycle::done(env, sock.obj, Dir::Write, &caller);
    sock.s.lock().connecting = false;
    r?.map_err(Error::Os)?;
    match i32::from_ne_bytes(b) {
        0 => Ok(()),
        e => Err(Error::Os(e)),
    }
}

/// bind(2).
pub fn bind(sock: Sock, a: &SockAddr) -> Result<()> {
    sock.s
        .with_fd(|fd| syscall::bind(fd, a))?
        .map_err(Error::Os)
}

/// listen(2); the socket is a listener from now on.
pub fn listen(sock: Sock, backlog: i32) -> Result<()> {
    sock.s
        .with_fd(|fd| syscall::listen(fd, backlog))?
        .map_err(Error::Os)?;
    sock.s.lock().listening = true;
    Ok(())
}

/// shutdown(2); `how` is SHUT_RD, SHUT_WR or SHUT_RDWR.
pub fn shutdown(sock: Sock, how: i32) -> Result<()> {
    sock.s
        .with_fd(|fd| syscall::shutdown(fd, how))?
        .map_err(Error::Os)
}
