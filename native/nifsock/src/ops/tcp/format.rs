//! The socket's format (packet framing, mode, header, send timeout) and what
//! nifsock_tcp reads back: `send_info`, `get_opts`.

use super::active_term;
use crate::atoms;
use crate::codec::args::Sock;
use crate::codec::reply;
use crate::core::packet::{self, Packet};
use crate::error::Error;
use crate::socket::Phase;
use rustler::{Encoder, Env, NifResult, Term};

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
