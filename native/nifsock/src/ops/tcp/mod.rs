//! `nifsock_tcp`'s data path: gen_tcp-style active delivery and packet-framed
//! recv.
//!
//! An active socket's readiness goes to a shared pump process (one per
//! scheduler, not per connection), whose NIF call reads and sends the owner
//! one `{nifsock, S, Data}` message per packet, straight from here. Turning a
//! socket active first tries to read inline, so data that is already there
//! costs no select and no pump hop.

use rustler::sys::ErlNifPid;
use rustler::{Encoder, Env, NewBinary, NifResult, Term};

use crate::atoms;
use crate::codec::args::{self, Mode, Sock};
use crate::codec::reply;
use crate::core::gen_tcp_opts::{self, Shape};
use crate::core::limits::{MAX_DELIVERY_READS, MAX_EXACT_LEN};
use crate::core::packet::{self, Bounds, Found, Packet};
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::ops::conn::Accepted;
use crate::ops::scratch_read::{self, ScratchRead};
use crate::socket::{Active, Phase, TcpOpts};
use crate::stats;
use crate::sys::msg;
use crate::sys::select::Dir;

pub mod opts;
pub mod send;

fn binary_term<'a>(env: Env<'a>, bytes: &[u8]) -> Term<'a> {
    let mut b = NewBinary::new(env, bytes.len());
    b.as_mut_slice().copy_from_slice(bytes);
    b.into()
}

/// A packet as the owner gets it: a binary, a list (list mode), or, in
/// binary mode with `{header, N}`, `[B1, ..., BN | Rest]` (gen_tcp's shape).
fn data_term<'a>(env: Env<'a>, bytes: &[u8], opts: &TcpOpts) -> Term<'a> {
    let shape = if opts.list {
        Shape::List
    } else {
        gen_tcp_opts::shape(bytes.len(), opts.header)
    };
    match shape {
        Shape::Binary => binary_term(env, bytes),
        Shape::List => {
            let items: Vec<Term<'a>> = bytes.iter().map(|b| b.encode(env)).collect();
            items.encode(env)
        }
        Shape::Header(n) => {
            let (head, rest) = bytes.split_at(n.min(bytes.len()));
            head.iter()
                .rev()
                .fold(binary_term(env, rest), |tail, b| tail.list_prepend(*b))
        }
    }
}

enum Read {
    /// Bytes arrived; `true` when the read came back short (queue emptied).
    Got(bool),
    WouldBlock,
    Eof,
    Failed(i32),
}

/// One recv into the scratch buffer, appended to `pending`.
fn read_into(sock: &Sock, pending: &mut Vec<u8>, rcvbuf: usize) -> Read {
    let r = sock.s.with_fd(|fd| {
        match scratch_read::recv(sock.s, fd, rcvbuf, 0, |got| pending.extend_from_slice(got)) {
            ScratchRead::Bytes((), n) => Read::Got(n < rcvbuf),
            ScratchRead::Eof => Read::Eof,
            ScratchRead::WouldBlock => {
                stats::READS_EAGAIN.incr();
                Read::WouldBlock
            }
            ScratchRead::Interrupted => Read::Got(false),
            ScratchRead::Failed(e) => Read::Failed(e),
        }
    });
    r.unwrap_or(Read::Failed(libc::EBADF))
}

/// The first deliverable packet of `pending` under `opts` (`len` > 0 asks
/// exactly that many bytes in raw mode); `rcvbuf` is the socket's `buffer`,
/// which bounds a line as inet's buffer does.
fn frame(opts: &TcpOpts, len: usize, pending: &[u8], rcvbuf: usize) -> Found {
    match opts.packet {
        Packet::Raw if len > 0 => {
            if pending.len() >= len {
                Found::Packet {
                    consumed: len,
                    payload: 0..len,
                }
            } else {
                Found::Incomplete
            }
        }
        p => {
            let bounds = Bounds {
                limit: opts.packet_size,
                trunc: rcvbuf,
                delimiter: opts.line_delimiter.0,
            };
            packet::first(p, pending, bounds)
        }
    }
}

fn tagged<'a>(env: Env<'a>, tag: rustler::Atom, sock: Term<'a>) -> Term<'a> {
    (tag, sock).encode(env)
}

/// Closes a socket whose stream ended (`exit_on_close`, gen_tcp's default), or
/// whose send timed out under `send_timeout_close`. Never blocks: a lingering
/// close goes to the closer thread.
pub fn close_ended(env: Env, sock: Sock) {
    lifecycle::close_never_blocking(lifecycle::Ctx::Nif(env), sock.obj);
}

/// After a passive recv saw the end of the stream (`reset`: a connection
/// reset): closes unless `exit_on_close` is off, and returns what recv
/// returns, as gen_tcp: `{error, closed}`, or `{error, econnreset}` for a
/// reset under `show_econnreset`.
pub fn ended<'a>(env: Env<'a>, sock: Sock<'a>, reset: bool) -> Term<'a> {
    let (keep_open, show) = {
        let st = sock.s.lock();
        (st.tcp.keep_open, st.tcp.show_econnreset)
    };
    if !keep_open {
        close_ended(env, sock);
    }
    let reason = if reset && show {
        Error::Os(libc::ECONNRESET)
    } else {
        Error::Closed
    };
    (atoms::error(), reason).encode(env)
}

/// Puts bytes back in front of the stream (a timed-out recv's partial data), so
/// the next recv sees them first, as gen_tcp keeps them.
pub fn unread<'a>(env: Env<'a>, sock: Sock<'a>, bytes: rustler::Binary<'a>) -> Term<'a> {
    if !bytes.is_empty() {
        let mut st = sock.s.lock();
        let mut v = bytes.as_slice().to_vec();
        v.extend_from_slice(&st.pending);
        st.pending = v;
    }
    atoms::ok().encode(env)
}

/// Reads and delivers to the owner what the active mode allows; re-arms the
/// select for `pump` when more may come. Called by the pump on readiness and
/// by `set_active` when a socket turns active.
pub fn deliver<'a>(env: Env<'a>, sock: Sock<'a>, pump: &ErlNifPid) -> NifResult<Term<'a>> {
    let _serial = sock.s.delivery_lock();
    let (owner, mut opts, mut pending) = {
        let mut st = sock.s.lock();
        if st.phase != Phase::Open {
            return Ok(atoms::ok().encode(env));
        }
        if st.tcp.active == Active::Off {
            drop(st);
            // No longer active: hand readiness on to whoever waits behind the pump.
            lifecycle::done(env, sock.obj, Dir::Read, pump);
            return Ok(atoms::ok().encode(env));
        }
        (st.owner, st.tcp, std::mem::take(&mut st.pending))
    };
    let rcvbuf = sock.s.rcvbuf();
    let mut reads = 0;
    let mut rearm = false;
    let mut drained = false;
    let mut ended = false;
    while opts.active != Active::Off {
        match frame(&opts, 0, &pending, rcvbuf) {
            Found::Packet { consumed, payload } => {
                let data = data_term(env, pending.get(payload).unwrap_or(&[]), &opts);
                msg::send(env, &owner, (atoms::nifsock(), sock.term, data).encode(env));
                pending.drain(..consumed.min(pending.len()));
                opts.active = match opts.active {
                    Active::Once => Active::Off,
                    Active::Count(n) if n <= 1 => {
                        msg::send(
                            env,
                            &owner,
                            tagged(env, atoms::nifsock_passive(), sock.term),
                        );
                        Active::Off
                    }
                    Active::Count(n) => Active::Count(n - 1),
                    other => other,
                };
            }
            Found::TooLarge => {
                // As inet: what was read is dropped with the bad packet.
                pending.clear();
                let m = (atoms::nifsock_error(), sock.term, Error::Os(libc::EMSGSIZE)).encode(env);
                msg::send(env, &owner, m);
                msg::send(env, &owner, tagged(env, atoms::nifsock_closed(), sock.term));
                opts.active = Active::Off;
                ended = true;
            }
            Found::Incomplete if drained || reads >= MAX_DELIVERY_READS => {
                rearm = true;
                break;
            }
            Found::Incomplete => {
                reads += 1;
                match read_into(&sock, &mut pending, rcvbuf) {
                    // Short read: the queue is empty; deliver what framed, then
                    // arm without the EAGAIN read.
                    Read::Got(true) => drained = true,
                    Read::Got(false) => {}
                    Read::WouldBlock => {
                        rearm = true;
                        break;
                    }
                    // A reset reads as a close, as gen_tcp without show_econnreset
                    // (with it: `{nifsock_error, S, econnreset}`, then closed).
                    Read::Failed(e) if e != libc::ECONNRESET || opts.show_econnreset => {
                        let m = (atoms::nifsock_error(), sock.term, Error::Os(e)).encode(env);
                        msg::send(env, &owner, m);
                        msg::send(env, &owner, tagged(env, atoms::nifsock_closed(), sock.term));
                        opts.active = Active::Off;
                        ended = true;
                    }
                    Read::Eof | Read::Failed(_) => {
                        msg::send(env, &owner, tagged(env, atoms::nifsock_closed(), sock.term));
                        opts.active = Active::Off;
                        ended = true;
                    }
                }
            }
        }
    }
    {
        let mut st = sock.s.lock();
        st.pending = pending;
        // setopts may have changed the mode meanwhile: only our own count moves.
        if st.tcp.active != Active::Off {
            st.tcp.active = opts.active;
        }
        if st.tcp.active == Active::Off {
            rearm = false;
        }
    }
    if ended && !opts.keep_open {
        lifecycle::done(env, sock.obj, Dir::Read, pump);
        close_ended(env, sock);
        return Ok(atoms::ok().encode(env));
    }
    if rearm {
        let handle = atoms::active().encode(env);
        if let Err(e) = lifecycle::wait(env, sock.obj, sock.term, Dir::Read, pump, handle) {
            tracing::debug!(op = "select", ?e, "active re-arm failed");
        }
    } else {
        lifecycle::done(env, sock.obj, Dir::Read, pump);
    }
    Ok(atoms::ok().encode(env))
}

/// Sets the active mode (`true`, `false`, `once`, or N, additive as inet's)
/// and, when active, starts delivering for `pump`.
pub fn set_active<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    value: Term<'a>,
    pump: Term<'a>,
) -> NifResult<Term<'a>> {
    let pump = msg::pid_of(pump).ok_or(rustler::Error::BadArg)?;
    // Wait for a delivery in progress: once this returns, no message of the
    // old mode can still be sent (a passive caller must not see late data).
    let serial = sock.s.delivery_lock();
    let now = {
        let mut st = sock.s.lock();
        if st.phase != Phase::Open {
            return reply::error(env, Error::Closed);
        }
        let next = if let Ok(b) = value.decode::<bool>() {
            if b {
                Active::Forever
            } else {
                Active::Off
            }
        } else if value
            .decode::<rustler::Atom>()
            .is_ok_and(|a| a == atoms::once())
        {
            Active::Once
        } else if let Ok(n) = value.decode::<i32>() {
            if !(-32768..=32767).contains(&n) {
                return reply::error(env, Error::Invalid("active"));
            }
            // A listener counts the mode it passes on to accepted sockets.
            let listening = st.listening;
            let slot = if listening {
                &mut st.tcp.accept_active
            } else {
                &mut st.tcp.active
            };
            let base = match *slot {
                Active::Count(c) => c,
                _ => 0,
            };
            let total = base + n;
            if total > 32767 {
                return reply::error(env, Error::Invalid("active"));
            }
            if total <= 0 {
                *slot = Active::Off;
                drop(st);
                msg::send(
                    env,
                    &args::caller(env)?,
                    tagged(env, atoms::nifsock_passive(), sock.term),
                );
                return Ok(atoms::ok().encode(env));
            }
            Active::Count(total)
        } else {
            return reply::error(env, Error::Invalid("active"));
        };
        if st.listening {
            // A listener doesn't read: it passes the mode on to accepted sockets.
            st.tcp.accept_active = next;
            return Ok(atoms::ok().encode(env));
        }
        st.tcp.active = next;
        next
    };
    drop(serial);
    if now == Active::Off {
        return Ok(atoms::ok().encode(env));
    }
    deliver(env, sock, &pump)
}

/// accept for `nifsock_tcp`: the accepted socket inherits the listener's
/// framing and `buffer` and starts in its active mode, delivering inline what
/// is already there (no select, no pump hop for a request that arrived with
/// the connection). The outer error is a badarg (a bad pump pid).
pub fn accept<'a>(
    env: Env<'a>,
    l: Sock<'a>,
    handle: Term<'a>,
    mode: Mode,
    pump: Term<'a>,
) -> NifResult<Result<Accepted<'a>>> {
    let pump = msg::pid_of(pump).ok_or(rustler::Error::BadArg)?;
    let r = crate::ops::conn::accept(env, l, handle, mode);
    let Ok(Accepted::Socket(new)) = r else {
        return Ok(r);
    };
    let (active, priority) = {
        let lt = l.s.lock().tcp;
        (lt.accept_active, lt.priority)
    };
    if let Some(p) = priority {
        // Linux doesn't copy SO_PRIORITY at accept (gen_tcp's accepted sockets have it).
        let _ = crate::ops::sockopt::set_priority(new.s, p);
    }
    // `buffer` ({otp, rcvbuf}), as inet's accepted sockets have the listener's.
    new.s.set_rcvbuf(l.s.rcvbuf());
    if active != Active::Off {
        new.s.lock().tcp.active = active;
        deliver(env, new, &pump)?;
    }
    Ok(Ok(Accepted::Socket(new)))
}

fn active_term<'a>(env: Env<'a>, a: Active) -> Term<'a> {
    match a {
        Active::Off => false.encode(env),
        Active::Forever => true.encode(env),
        Active::Once => atoms::once().encode(env),
        Active::Count(n) => n.encode(env),
    }
}

/// The first step of `nifsock_tcp:controlling_process/2`, as gen_tcp's: the
/// owner makes the socket passive (waiting out a delivery in progress), so
/// no message arrives while it hands over the ones already in its mailbox,
/// and learns the mode to restore afterwards (a listener's: the mode it
/// passes on). `{ok, Active}`, or `{error, not_owner | closed}`.
pub fn pause<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let caller = args::caller(env)?;
    let _serial = sock.s.delivery_lock();
    let mut guard = sock.s.lock();
    let st = &mut *guard;
    if st.phase != Phase::Open {
        return reply::error(env, Error::Closed);
    }
    if !msg::same_pid(&st.owner, &caller) {
        return reply::error(env, Error::NotOwner);
    }
    let slot = if st.listening {
        &mut st.tcp.accept_active
    } else {
        &mut st.tcp.active
    };
    let old = std::mem::replace(slot, Active::Off);
    Ok((atoms::ok(), active_term(env, old)).encode(env))
}

fn packet_term<'a>(env: Env<'a>, p: Packet) -> Term<'a> {
    match p {
        Packet::Raw => atoms::raw().encode(env),
        Packet::Line => atoms::line().encode(env),
        Packet::Len(n) => n.encode(env),
    }
}

fn timeout_term<'a>(env: Env<'a>, t: Option<u32>) -> Term<'a> {
    match t {
        Some(ms) => ms.encode(env),
        None => atoms::infinity().encode(env),
    }
}

/// `{Packet, SendTimeout, Queued}` for `nifsock_tcp:send/2` (`Queued`: bytes
/// of a timed-out send wait to go out first).
pub fn send_info<'a>(env: Env<'a>, sock: Sock<'a>) -> Term<'a> {
    let (t, queued) = {
        let st = sock.s.lock();
        (st.tcp, st.send_rest.is_some())
    };
    (
        packet_term(env, t.packet),
        timeout_term(env, t.send_timeout),
        queued,
    )
        .encode(env)
}

/// `nifsock_tcp` options as a map: active, packet, packet_size, mode,
/// send_timeout, exit_on_close, line_delimiter, the options of `tcp_opts`,
/// and `send_pend` (bytes queued by timed-out sends).
pub fn get_opts<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let st = sock.s.lock();
    if st.phase != Phase::Open {
        return reply::error(env, Error::Closed);
    }
    let t = st.tcp;
    let active = active_term(
        env,
        if st.listening {
            t.accept_active
        } else {
            t.active
        },
    );
    let mode = if t.list {
        atoms::list()
    } else {
        atoms::binary()
    };
    let keys = [
        atoms::active(),
        atoms::packet(),
        atoms::packet_size(),
        atoms::mode(),
        atoms::send_timeout(),
        atoms::exit_on_close(),
        atoms::line_delimiter(),
    ];
    let vals = [
        active,
        packet_term(env, t.packet),
        t.packet_size.encode(env),
        mode.encode(env),
        timeout_term(env, t.send_timeout),
        (!t.keep_open).encode(env),
        t.line_delimiter.0.encode(env),
    ];
    let send_pend = st.send_rest.as_ref().map_or(0, |r| r.unsent().len());
    let mut keys: Vec<Term> = keys.iter().map(|k| k.encode(env)).collect();
    let mut vals = vals.to_vec();
    for (k, v) in crate::ops::tcp::opts::get(env, &t) {
        keys.push(k);
        vals.push(v);
    }
    keys.push(atoms::send_pend().encode(env));
    vals.push(send_pend.encode(env));
    Term::map_from_term_arrays(env, &keys, &vals).map_err(|_| rustler::Error::BadArg)
}

/// The format options `set_format` takes besides the packet mode and send
/// timeout (which it decodes itself).
pub struct Format {
    /// `packet_size`.
    pub packet_size: usize,
    /// `{mode, list}`.
    pub list: bool,
    /// `{exit_on_close, false}`.
    pub keep_open: bool,
    /// `line_delimiter` (0..255).
    pub line_delimiter: u8,
}

/// Sets packet framing, delivery format and send timeout.
pub fn set_format<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    packet: Term<'a>,
    send_timeout: Term<'a>,
    f: Format,
) -> NifResult<Term<'a>> {
    let send_timeout = match send_timeout.decode::<u32>() {
        Ok(ms) => Some(ms),
        Err(_)
            if send_timeout
                .decode::<rustler::Atom>()
                .is_ok_and(|a| a == atoms::infinity()) =>
        {
            None
        }
        Err(_) => return reply::error(env, Error::Invalid("send_timeout")),
    };
    let p = if let Ok(n) = packet.decode::<u64>() {
        match n {
            0 => Packet::Raw,
            1 | 2 | 4 => Packet::Len(n as u8),
            _ => return reply::error(env, Error::Invalid("packet")),
        }
    } else {
        match packet
            .atom_to_string()
            .map_err(|_| rustler::Error::BadArg)?
            .as_str()
        {
            "raw" => Packet::Raw,
            "line" => Packet::Line,
            _ => return reply::error(env, Error::Invalid("packet")),
        }
    };
    let mut st = sock.s.lock();
    if st.phase != Phase::Open {
        return reply::error(env, Error::Closed);
    }
    st.tcp.keep_open = f.keep_open;
    st.tcp.packet = p;
    st.tcp.packet_size = f.packet_size;
    st.tcp.list = f.list;
    st.tcp.send_timeout = send_timeout;
    st.tcp.line_delimiter = packet::Delimiter(f.line_delimiter);
    Ok(atoms::ok().encode(env))
}

/// Passive recv for `nifsock_tcp`: a packet (or `len` bytes, or what's there).
pub fn recv<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    len: usize,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    let (opts, mut pending) = {
        let mut st = sock.s.lock();
        if st.phase != Phase::Open {
            return reply::error(env, Error::Closed);
        }
        if st.tcp.active != Active::Off || (len > 0 && st.tcp.packet != Packet::Raw) {
            return reply::error(env, Error::Os(libc::EINVAL));
        }
        if len > MAX_EXACT_LEN {
            return reply::error(env, Error::Os(libc::ENOMEM));
        }
        if st.partial.is_some() {
            // bytes of a timed-out exact recv: serve them through `pending`
            if let Some(p) = st.partial.take() {
                let mut v = p.buf.as_slice().get(..p.filled).unwrap_or(&[]).to_vec();
                v.extend_from_slice(&st.pending);
                st.pending = v;
            }
        }
        if st.tcp.packet == Packet::Raw
            && st.pending.is_empty()
            && !st.tcp.list
            && st.tcp.header == 0
        {
            drop(st);
            // nifsock_tcp has no nowait: partial bytes stay in the socket.
            let mode = if mode == Mode::Nowait {
                Mode::Wait
            } else {
                mode
            };
            return crate::ops::recv::recv(env, sock, len, 0, handle, mode);
        }
        (st.tcp, std::mem::take(&mut st.pending))
    };
    let caller = args::caller(env)?;
    let put_back = |pending: Vec<u8>| sock.s.lock().pending = pending;
    let rcvbuf = sock.s.rcvbuf();
    loop {
        match frame(&opts, len, &pending, rcvbuf) {
            Found::Packet { consumed, payload } => {
                let data = data_term(env, pending.get(payload).unwrap_or(&[]), &opts);
                pending.drain(..consumed.min(pending.len()));
                put_back(pending);
                lifecycle::done(env, sock.obj, Dir::Read, &caller);
                return Ok((atoms::ok(), data).encode(env));
            }
            Found::TooLarge => {
                // As inet: what was read is dropped with the bad packet
                // (`pending` was taken out of the socket); nifsock_tcp then
                // ends the stream as at end of file.
                drop(pending);
                return reply::error(env, Error::Os(libc::EMSGSIZE));
            }
            Found::Incomplete => match read_into(&sock, &mut pending, rcvbuf) {
                Read::Got(_) => {}
                Read::WouldBlock => {
                    put_back(pending);
                    if mode == Mode::Zero {
                        return reply::error(env, Error::Timeout);
                    }
                    return match lifecycle::wait(
                        env,
                        sock.obj,
                        sock.term,
                        Dir::Read,
                        &caller,
                        handle,
                    ) {
                        Ok(()) => Ok(atoms::select().encode(env)),
                        Err(e) => reply::error(env, e),
                    };
                }
                Read::Eof => {
                    put_back(pending);
                    return reply::error(env, Error::Closed);
                }
                Read::Failed(e) => {
                    put_back(pending);
                    return reply::error(env, Error::Os(e));
                }
            },
        }
    }
}
