//! NIFs of `nifsock_tcp`'s data path.

use rustler::{Env, NifResult, Term};

use crate::codec::args::{self, Mode, Sock};
use crate::codec::reply;
use crate::ops::tcp;

/// The pump's call on readiness: deliver to the owner, re-arm.
#[rustler::nif]
fn tcp_deliver<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let pump = args::caller(env)?;
    tcp::active::deliver(env, sock, &pump)
}

#[rustler::nif]
fn tcp_set_active<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    value: Term<'a>,
    pump: Term<'a>,
) -> NifResult<Term<'a>> {
    tcp::active::set_active(env, sock, value, pump)
}

// One argument per format option, as nifsock_tcp keeps them: decoded here.
#[allow(clippy::too_many_arguments)]
#[rustler::nif]
fn tcp_set_format<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    packet: Term<'a>,
    packet_size: usize,
    list: bool,
    send_timeout: Term<'a>,
    keep_open: bool,
    line_delimiter: u8,
) -> NifResult<Term<'a>> {
    let format = tcp::format::Format {
        packet_size,
        list,
        keep_open,
        line_delimiter,
    };
    tcp::format::set_format(env, sock, packet, send_timeout, format)
}

/// shutdown/2 for `nifsock_tcp`: as gen_tcp, a listening socket is not
/// connected (`nifsock:shutdown/2` does what `socket`'s does: on Linux it
/// stops the listener).
#[rustler::nif]
fn tcp_shutdown<'a>(env: Env<'a>, sock: Sock<'a>, how: rustler::Atom) -> NifResult<Term<'a>> {
    let open_listener = {
        let st = sock.s.lock();
        st.listening && st.phase == crate::socket::Phase::Open
    };
    // A closed one is `closed`, as gen_tcp's.
    if open_listener {
        return reply::error(env, crate::error::Error::Os(libc::ENOTCONN));
    }
    crate::nif::conn::shutdown_how(env, sock, how)
}

#[rustler::nif]
fn tcp_ended<'a>(env: Env<'a>, sock: Sock<'a>, reset: bool) -> Term<'a> {
    tcp::ended(env, sock, reset)
}

/// Sets gen_tcp options kept beside the framing (`tcp_opts`).
#[rustler::nif]
fn tcp_setopts<'a>(env: Env<'a>, sock: Sock<'a>, opts: Term<'a>) -> NifResult<Term<'a>> {
    crate::ops::tcp::opts::set_opts(env, sock, opts)
}

/// A send timed out with `rest` unsent: queue it (or close, `send_timeout_close`).
#[rustler::nif]
fn tcp_send_timeout<'a>(env: Env<'a>, sock: Sock<'a>, rest: Term<'a>) -> NifResult<Term<'a>> {
    crate::ops::tcp::send::timed_out(env, sock, rest)
}

/// `tcp_send_timeout` for a rest too large to copy on a normal scheduler.
#[rustler::nif(schedule = "DirtyCpu")]
fn tcp_send_timeout_dirty<'a>(env: Env<'a>, sock: Sock<'a>, rest: Term<'a>) -> NifResult<Term<'a>> {
    crate::ops::tcp::send::timed_out(env, sock, rest)
}

/// Writes what timed-out sends left queued.
#[rustler::nif]
fn tcp_flush<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    crate::ops::tcp::send::flush(env, sock, handle, mode)
}

#[rustler::nif]
fn tcp_unread<'a>(env: Env<'a>, sock: Sock<'a>, bytes: rustler::Binary<'a>) -> Term<'a> {
    tcp::unread(env, sock, bytes)
}

#[rustler::nif]
fn tcp_accept<'a>(
    env: Env<'a>,
    l: Sock<'a>,
    handle: Term<'a>,
    mode: Mode,
    pump: Term<'a>,
) -> NifResult<Term<'a>> {
    let r = tcp::accept::accept(env, l, handle, mode, pump)?;
    super::conn::accepted(env, r)
}

#[rustler::nif]
fn tcp_send_info<'a>(env: Env<'a>, sock: Sock<'a>) -> Term<'a> {
    tcp::format::send_info(env, sock)
}

#[rustler::nif]
fn tcp_getopts<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    tcp::format::get_opts(env, sock)
}

#[rustler::nif]
fn tcp_recv<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    len: usize,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    tcp::recv::recv(env, sock, len, handle, mode)
}

/// controlling_process's first step: passive now, `{ok, ModeToRestore}`.
#[rustler::nif]
fn tcp_pause<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    tcp::active::pause(env, sock)
}

/// The socket's message tags `{Data, Closed, Error, Passive}`, also once it is
/// closed (nifsock_tcp's close/1 takes a closed message out of the mailbox).
#[rustler::nif]
fn tcp_tags<'a>(env: Env<'a>, sock: Sock<'a>) -> Term<'a> {
    let tags = sock.s.lock().tcp.tags;
    crate::codec::tcp::tags_term(env, &tags)
}
