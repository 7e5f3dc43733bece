//! NIFs of `nifsock_tcp`'s data path: decode (`codec::args`, `codec::tcp`),
//! call `ops::tcp`, encode (`codec::reply`, `codec::tcp`).

use rustler::{Binary, Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::addr;
use crate::codec::args::{self, Mode, Sock};
use crate::codec::{reply, tcp as codec};
use crate::core::packet::Packet;
use crate::ops::{owner, send, tcp};
use crate::sys::iovec::{self, IoVec};
use crate::sys::msg;

fn pump_pid(pump: Term) -> NifResult<rustler::sys::ErlNifPid> {
    msg::pid_of(pump).ok_or(rustler::Error::BadArg)
}

/// The pump's call on readiness: deliver to the owner, re-arm.
#[rustler::nif]
fn tcp_deliver<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let pump = args::caller(env)?;
    tcp::active::deliver(env, sock, &pump);
    Ok(atoms::ok().encode(env))
}

#[rustler::nif]
fn tcp_set_active<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    value: Term<'a>,
    pump: Term<'a>,
) -> NifResult<Term<'a>> {
    let pump = pump_pid(pump)?;
    let value = codec::decode_active(value);
    reply::unit(env, tcp::active::set_active(env, sock, value, &pump))
}

// One argument per format option, as nifsock_tcp keeps them.
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
    let send_timeout = match codec::decode_send_timeout(send_timeout) {
        Ok(t) => t,
        Err(e) => return reply::error(env, e),
    };
    let packet = match codec::decode_packet(packet)? {
        Ok(p) => p,
        Err(e) => return reply::error(env, e),
    };
    let format = tcp::format::Format {
        packet,
        packet_size,
        list,
        send_timeout,
        keep_open,
        line_delimiter,
    };
    reply::unit(env, tcp::format::set_format(sock, format))
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
fn tcp_ended<'a>(env: Env<'a>, sock: Sock<'a>, reset: bool) -> NifResult<Term<'a>> {
    reply::error(env, tcp::ended(env, sock, reset))
}

/// Sets gen_tcp options kept beside the framing (`tcp_opts`).
#[rustler::nif]
fn tcp_setopts<'a>(env: Env<'a>, sock: Sock<'a>, opts: Term<'a>) -> NifResult<Term<'a>> {
    match codec::decode_settings(opts)? {
        Ok(settings) => reply::unit(env, tcp::opts::set_opts(sock, &settings)),
        Err(e) => reply::error(env, e),
    }
}

/// A send timed out with `rest` unsent: queue it (or close, `send_timeout_close`).
#[rustler::nif]
fn tcp_send_timeout<'a>(env: Env<'a>, sock: Sock<'a>, rest: Term<'a>) -> NifResult<Term<'a>> {
    let iov = IoVec::inspect(env, rest).ok_or(rustler::Error::BadArg)?;
    reply::unit(env, tcp::send::timed_out(env, sock, &iov))
}

/// `tcp_send_timeout` for a rest too large to copy on a normal scheduler.
#[rustler::nif(schedule = "DirtyCpu")]
fn tcp_send_timeout_dirty<'a>(env: Env<'a>, sock: Sock<'a>, rest: Term<'a>) -> NifResult<Term<'a>> {
    let iov = IoVec::inspect(env, rest).ok_or(rustler::Error::BadArg)?;
    reply::unit(env, tcp::send::timed_out(env, sock, &iov))
}

/// Writes what timed-out sends left queued.
#[rustler::nif]
fn tcp_flush<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    reply::progress(env, tcp::send::flush(env, sock, handle, mode))
}

#[rustler::nif]
fn tcp_unread<'a>(env: Env<'a>, sock: Sock<'a>, bytes: Binary<'a>) -> Term<'a> {
    tcp::unread(sock, bytes.as_slice());
    atoms::ok().encode(env)
}

#[rustler::nif]
fn tcp_accept<'a>(
    env: Env<'a>,
    l: Sock<'a>,
    handle: Term<'a>,
    mode: Mode,
    pump: Term<'a>,
) -> NifResult<Term<'a>> {
    let pump = pump_pid(pump)?;
    super::conn::accepted(env, tcp::accept::accept(env, l, handle, mode, &pump))
}

#[rustler::nif]
fn tcp_send_info<'a>(env: Env<'a>, sock: Sock<'a>) -> Term<'a> {
    codec::send_info(env, &tcp::format::send_info(sock))
}

/// `nifsock_tcp:send/2` of a binary (as `[Bin]`) or of an iolist of nested
/// lists of binaries (at most `GATHER_MAX` of them, no byte integers) in one
/// call when nothing is to be added or written first (no `{packet, N}`
/// header, nothing queued by a timed-out send) and `send_timeout` is not 0:
/// then it is `nifsock_nif:send(S, iolist_to_iovec(Data), [], Handle, wait)`,
/// with `{select, N, Timeout}` for its `{select, N}` (the caller's wait needs
/// the timeout). Otherwise it sends nothing and returns `tcp_send_info`'s
/// `{Packet, Timeout, Queued}`.
#[rustler::nif]
fn tcp_send<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    iov: Term<'a>,
    handle: Term<'a>,
) -> NifResult<Term<'a>> {
    tcp_send_gathered(env, sock, iov, handle, Gather::Walk)
}

/// `nifsock_tcp:send/2` of iodata that `iolist_size/1` found short (the
/// caller's bound, `?FLAT_SEND_MAX`): as [`tcp_send`], its bytes copied
/// together ([`iovec::with_flat`]: one erl_nif call, not one per binary).
#[rustler::nif]
fn tcp_send_flat<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    data: Term<'a>,
    handle: Term<'a>,
) -> NifResult<Term<'a>> {
    tcp_send_gathered(env, sock, data, handle, Gather::Flat)
}

/// How [`tcp_send_gathered`] makes the data's iovec entries.
enum Gather {
    /// [`iovec::with_iolist`]: nested lists of binaries sent as they are.
    Walk,
    /// [`iovec::with_flat`]: the bytes copied together.
    Flat,
}

/// [`tcp_send`]'s checks, then the send of `data`'s entries; when they
/// can't be made that way, nothing is sent and `tcp_send_info`'s tuple sends
/// the caller to erlang:iolist_to_iovec/1's path (which raises badarg for
/// data that is not iodata).
fn tcp_send_gathered<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    data: Term<'a>,
    handle: Term<'a>,
    how: Gather,
) -> NifResult<Term<'a>> {
    let info = tcp::format::send_info(sock);
    if matches!(info.packet, Packet::Len(_)) || info.queued || info.send_timeout == Some(0) {
        return Ok(codec::send_info(env, &info));
    }
    let send = |e: &[libc::iovec]| send::send_entries(env, sock, e, 0, handle, Mode::Wait);
    let gathered = match how {
        Gather::Walk => iovec::with_iolist(data, send),
        Gather::Flat => iovec::with_flat(data, send),
    };
    let Ok(sent) = gathered else {
        return Ok(codec::send_info(env, &info));
    };
    match sent {
        // the caller's wait needs the timeout
        Ok(send::Outcome::Select(n)) => Ok(codec::send_select(env, n, info.send_timeout)),
        // a reply: `erlang:yield()`, then `tcp_read_after_yield/2`
        Ok(send::Outcome::All) if tcp::active::reply_sent(env, sock) => {
            Ok(atoms::yield_().encode(env))
        }
        r => super::io::sent(env, r),
    }
}

/// `nifsock_tcp:send/2`'s call after the yield its send's `yield` asked for:
/// delivers what the peer sent meanwhile (`ops::tcp::active::read_after_yield`;
/// `on_heap`: the caller's `message_queue_data` is `on_heap`, else it made no
/// yield and nothing is read).
#[rustler::nif]
fn tcp_read_after_yield<'a>(env: Env<'a>, sock: Sock<'a>, on_heap: bool) -> Term<'a> {
    tcp::active::read_after_yield(env, sock, on_heap);
    atoms::ok().encode(env)
}

/// Turns the yields after an active socket's replies on or off (application
/// env `reply_yield`, from `nifsock_nif`'s load).
#[rustler::nif]
fn reply_yield(on: bool) -> rustler::Atom {
    tcp::active::set_reply_yield(on);
    atoms::ok()
}

/// `nifsock_tcp:peername/1`: `{ok, {IP, Port}}` or `{ok, {local, Path}}`.
#[rustler::nif]
fn tcp_peername<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    reply::value(
        env,
        owner::peername(sock).map(|a| addr::encode_inet(env, &a)),
    )
}

/// `nifsock_tcp:sockname/1`: `{ok, {IP, Port}}` or `{ok, {local, Path}}`.
#[rustler::nif]
fn tcp_sockname<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    reply::value(
        env,
        owner::sockname(sock).map(|a| addr::encode_inet(env, &a)),
    )
}

#[rustler::nif]
fn tcp_getopts<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    match tcp::format::get_opts(sock) {
        Ok(view) => codec::getopts(env, &view),
        Err(e) => reply::error(env, e),
    }
}

#[rustler::nif]
fn tcp_recv<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    len: usize,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    codec::recv(env, tcp::recv::recv(env, sock, len, handle, mode))
}

/// controlling_process's first step: passive now, `{ok, ModeToRestore, Tags}`.
#[rustler::nif]
fn tcp_pause<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    match tcp::active::pause(env, sock) {
        Ok((active, tags)) => Ok(codec::paused(env, active, &tags)),
        Err(e) => reply::error(env, e),
    }
}

/// controlling_process with nothing in the caller's mailbox: `ok` once a
/// passive socket is `Pid`'s, or tcp_pause/1's `{ok, ModeToRestore, Tags}`
/// for an active one (paused, still the caller's).
#[rustler::nif]
fn tcp_move<'a>(env: Env<'a>, sock: Sock<'a>, pid: Term<'a>) -> NifResult<Term<'a>> {
    let new = msg::pid_of(pid).ok_or(rustler::Error::BadArg)?;
    match tcp::active::pause_or_move(env, sock, &new) {
        Ok(None) => Ok(atoms::ok().encode(env)),
        Ok(Some((active, tags))) => Ok(codec::paused(env, active, &tags)),
        Err(e) => reply::error(env, e),
    }
}

/// The socket's message tags `{Data, Closed, Error, Passive}`, also once it is
/// closed (nifsock_tcp's close/1 takes a closed message out of the mailbox),
/// once no delivery is in progress (see `tags_after_delivery`).
#[rustler::nif]
fn tcp_tags<'a>(env: Env<'a>, sock: Sock<'a>) -> Term<'a> {
    codec::tags(env, &tcp::active::tags_after_delivery(sock))
}
