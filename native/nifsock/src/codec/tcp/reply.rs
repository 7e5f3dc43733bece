//! What nifsock_tcp's operations return, and the replies made of it.

use rustler::{Atom, Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::reply::{self, Recv};
use crate::core::packet::Packet;
use crate::error::Error;
use crate::socket::{Active, Tags, TcpOpts};

/// How a passive `nifsock_tcp` recv ended.
pub enum TcpRecv<'a> {
    /// A packet, shaped by `packet` (`{ok, Data}`).
    Packet(Term<'a>),
    /// Plain raw binary mode: the socket-level recv's outcome.
    Raw(Recv<'a>),
    /// A select is armed (`select`).
    Select,
    /// `{error, R}`.
    Failed(Error),
}

/// The reply to a `nifsock_tcp` recv.
pub fn recv<'a>(env: Env<'a>, r: TcpRecv<'a>) -> NifResult<Term<'a>> {
    match r {
        TcpRecv::Packet(data) => Ok((atoms::ok(), data).encode(env)),
        TcpRecv::Raw(r) => reply::recv(env, r),
        TcpRecv::Select => Ok(atoms::select().encode(env)),
        TcpRecv::Failed(e) => reply::error(env, e),
    }
}

/// What `nifsock_tcp:send/2` needs to know before it sends.
#[derive(Debug, Clone, Copy)]
pub struct SendInfo {
    /// Packet framing (a `{packet, N}` header is added in Erlang).
    pub packet: Packet,
    /// `send_timeout` (`None`: infinity).
    pub send_timeout: Option<u32>,
    /// Bytes of a timed-out send are queued and go out first.
    pub queued: bool,
}

/// `{Packet, SendTimeout, Queued}`.
pub fn send_info<'a>(env: Env<'a>, i: &SendInfo) -> Term<'a> {
    (
        packet_mode(env, i.packet),
        timeout(env, i.send_timeout),
        i.queued,
    )
        .encode(env)
}

/// `{select, N, SendTimeout}`: `tcp_send` wrote `n` bytes and armed a select
/// for the rest.
pub fn send_select(env: Env, n: usize, send_timeout: Option<u32>) -> Term {
    (atoms::select(), n, timeout(env, send_timeout)).encode(env)
}

/// A socket's `nifsock_tcp` options as `tcp_getopts` reads them.
#[derive(Debug, Clone, Copy)]
pub struct TcpView {
    /// The options.
    pub tcp: TcpOpts,
    /// A listener reports the active mode it passes on.
    pub listening: bool,
    /// Bytes queued by timed-out sends.
    pub send_pend: usize,
}

/// The options as a map: active, packet, packet_size, mode, send_timeout,
/// exit_on_close, line_delimiter, the layer options (`header`, the
/// watermarks, `delay_send`, `send_timeout_close`, `show_econnreset`,
/// `deliver`, `tags`) and `send_pend`.
pub fn getopts<'a>(env: Env<'a>, v: &TcpView) -> NifResult<Term<'a>> {
    let t = &v.tcp;
    let active_mode = if v.listening {
        t.accept_active
    } else {
        t.active
    };
    let mode = if t.list {
        atoms::list()
    } else {
        atoms::binary()
    };
    let deliver = if t.deliver_port {
        atoms::port()
    } else {
        atoms::term()
    };
    let pairs: [(Atom, Term<'a>); 17] = [
        (atoms::active(), active(env, active_mode)),
        (atoms::packet(), packet_mode(env, t.packet)),
        (atoms::packet_size(), t.packet_size.encode(env)),
        (atoms::mode(), mode.encode(env)),
        (atoms::send_timeout(), timeout(env, t.send_timeout)),
        (atoms::exit_on_close(), (!t.keep_open).encode(env)),
        (atoms::line_delimiter(), t.line_delimiter.0.encode(env)),
        (atoms::header(), t.header.encode(env)),
        (atoms::high_watermark(), t.send_watermarks.high.encode(env)),
        (atoms::low_watermark(), t.send_watermarks.low.encode(env)),
        (
            atoms::high_msgq_watermark(),
            t.msgq_watermarks.high.encode(env),
        ),
        (
            atoms::low_msgq_watermark(),
            t.msgq_watermarks.low.encode(env),
        ),
        (atoms::delay_send(), t.delay_send.encode(env)),
        (
            atoms::send_timeout_close(),
            t.send_timeout_close.encode(env),
        ),
        (atoms::show_econnreset(), t.show_econnreset.encode(env)),
        (atoms::deliver(), deliver.encode(env)),
        (atoms::tags(), tags(env, &t.tags)),
    ];
    let mut keys: Vec<Term> = pairs.iter().map(|(k, _)| k.encode(env)).collect();
    let mut vals: Vec<Term> = pairs.iter().map(|(_, v)| *v).collect();
    keys.push(atoms::send_pend().encode(env));
    vals.push(v.send_pend.encode(env));
    Term::map_from_term_arrays(env, &keys, &vals).map_err(|_| rustler::Error::BadArg)
}

/// `{ok, Active, Tags}`: controlling_process's first step (the mode to
/// restore, the tags of the messages to hand over).
pub fn paused<'a>(env: Env<'a>, a: Active, t: &Tags) -> Term<'a> {
    (atoms::ok(), active(env, a), tags(env, t)).encode(env)
}

/// `false | true | once | N`.
pub fn active<'a>(env: Env<'a>, a: Active) -> Term<'a> {
    match a {
        Active::Off => false.encode(env),
        Active::Forever => true.encode(env),
        Active::Once => atoms::once().encode(env),
        Active::Count(n) => n.encode(env),
    }
}

/// `{Data, Closed, Error, Passive}`.
pub fn tags<'a>(env: Env<'a>, t: &Tags) -> Term<'a> {
    (t.data, t.closed, t.error, t.passive).encode(env)
}

fn packet_mode<'a>(env: Env<'a>, p: Packet) -> Term<'a> {
    match p {
        Packet::Raw => atoms::raw().encode(env),
        Packet::Line => atoms::line().encode(env),
        Packet::Len(n) => n.encode(env),
    }
}

fn timeout<'a>(env: Env<'a>, t: Option<u32>) -> Term<'a> {
    match t {
        Some(ms) => ms.encode(env),
        None => atoms::infinity().encode(env),
    }
}
