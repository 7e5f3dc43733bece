//! nifsock_tcp's terms: the arguments its NIFs decode (active mode, packet
//! mode, send timeout, the layer options, the message tags), the outcomes its
//! operations return, and every term it builds: replies, the packet shapes
//! and the active-mode messages (built while delivering, from a NIF or a
//! readiness callback, so `ops::tcp::active` calls the message encoders).

use rustler::{Atom, Encoder, Env, NewBinary, NifResult, Term};

use crate::atoms;
use crate::codec::args;
use crate::codec::reply::{self, Recv};
use crate::core::gen_tcp_opts::{self, msgq_watermark, send_watermark, Shape};
use crate::core::packet::Packet;
use crate::error::Error;
use crate::socket::{Active, Tags, TcpOpts};

// ---------------------------------------------------------------------------
// Arguments

/// `{active, _}` as given (`tcp_set_active`): what it means depends on the
/// socket (a count adds to the one it has).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveArg {
    /// `true` / `false`.
    Flag(bool),
    /// `once`.
    Once,
    /// An integer N (added to the current count).
    Add(i32),
}

/// Decodes `true | false | once | N`; anything else is `Invalid("active")`.
pub fn decode_active(t: Term) -> Result<ActiveArg, Error> {
    if let Ok(b) = t.decode::<bool>() {
        Ok(ActiveArg::Flag(b))
    } else if t.decode::<Atom>().is_ok_and(|a| a == atoms::once()) {
        Ok(ActiveArg::Once)
    } else if let Ok(n) = t.decode::<i32>() {
        Ok(ActiveArg::Add(n))
    } else {
        Err(Error::Invalid("active"))
    }
}

/// `raw | line | 0 | 1 | 2 | 4`: another integer or atom is
/// `Invalid("packet")`, another term a badarg.
pub fn decode_packet(t: Term) -> NifResult<Result<Packet, Error>> {
    if let Ok(n) = t.decode::<u64>() {
        return Ok(match n {
            0 => Ok(Packet::Raw),
            1 | 2 | 4 => Ok(Packet::Len(n as u8)),
            _ => Err(Error::Invalid("packet")),
        });
    }
    let name = t.atom_to_string().map_err(|_| rustler::Error::BadArg)?;
    Ok(match name.as_str() {
        "raw" => Ok(Packet::Raw),
        "line" => Ok(Packet::Line),
        _ => Err(Error::Invalid("packet")),
    })
}

/// A send timeout in ms (`None`: `infinity`); else `Invalid("send_timeout")`.
pub fn decode_send_timeout(t: Term) -> Result<Option<u32>, Error> {
    match t.decode::<u32>() {
        Ok(ms) => Ok(Some(ms)),
        Err(_) if t.decode::<Atom>().is_ok_and(|a| a == atoms::infinity()) => Ok(None),
        Err(_) => Err(Error::Invalid("send_timeout")),
    }
}

/// `{Data, Closed, Error, Passive}` (nifsock_tcp has made `nifsock` and
/// `gen_tcp` this tuple); anything else raises badarg.
pub fn decode_tags(t: Term) -> NifResult<Tags> {
    let (data, closed, error, passive): (Atom, Atom, Atom, Atom) = t.decode()?;
    Ok(Tags {
        data,
        closed,
        error,
        passive,
    })
}

/// One of the gen_tcp options kept beside the framing (`tcp_setopts`), decoded.
#[derive(Debug, Clone, Copy)]
pub enum Setting {
    /// `{header, N}`.
    Header(u32),
    /// `{high_watermark, N}` (inet_drv's value).
    HighWatermark(u32),
    /// `{low_watermark, N}`.
    LowWatermark(u32),
    /// `{high_msgq_watermark, N}`.
    HighMsgq(u32),
    /// `{low_msgq_watermark, N}`.
    LowMsgq(u32),
    /// `{delay_send, B}`.
    DelaySend(bool),
    /// `{send_timeout_close, B}`.
    SendTimeoutClose(bool),
    /// `{show_econnreset, B}`.
    ShowEconnreset(bool),
    /// `{deliver, port}` (true) or `{deliver, term}`.
    DeliverPort(bool),
    /// `{tags, {D, C, E, P}}`.
    Tags(Tags),
}

fn bad() -> rustler::Error {
    rustler::Error::BadArg
}

/// Decodes `{Name, Value}` (integers as their low 32 bits, as prim_inet
/// sends them). A wrong type raises badarg; a message queue watermark that
/// gen_tcp refuses is `Invalid`.
fn decode_setting(t: Term) -> NifResult<Result<Setting, Error>> {
    let (name, v): (Atom, Term) = t.decode()?;
    let low32 = || v.decode::<u32>().map_err(|_| bad());
    let flag = || v.decode::<bool>().map_err(|_| bad());
    let msgq = || -> NifResult<Result<u32, Error>> {
        Ok(msgq_watermark(low32()?).ok_or(Error::Invalid("msgq_watermark")))
    };
    Ok(Ok(if name == atoms::header() {
        Setting::Header(low32()?)
    } else if name == atoms::high_watermark() {
        Setting::HighWatermark(send_watermark(low32()?))
    } else if name == atoms::low_watermark() {
        Setting::LowWatermark(send_watermark(low32()?))
    } else if name == atoms::high_msgq_watermark() {
        match msgq()? {
            Ok(n) => Setting::HighMsgq(n),
            Err(e) => return Ok(Err(e)),
        }
    } else if name == atoms::low_msgq_watermark() {
        match msgq()? {
            Ok(n) => Setting::LowMsgq(n),
            Err(e) => return Ok(Err(e)),
        }
    } else if name == atoms::delay_send() {
        Setting::DelaySend(flag()?)
    } else if name == atoms::send_timeout_close() {
        Setting::SendTimeoutClose(flag()?)
    } else if name == atoms::show_econnreset() {
        Setting::ShowEconnreset(flag()?)
    } else if name == atoms::deliver() {
        let a: Atom = v.decode()?;
        if a == atoms::port() {
            Setting::DeliverPort(true)
        } else if a == atoms::term() {
            Setting::DeliverPort(false)
        } else {
            return Err(bad());
        }
    } else if name == atoms::tags() {
        Setting::Tags(decode_tags(v)?)
    } else {
        return Err(bad());
    }))
}

/// Decodes `[{Name, Value}]`, in its order: the first invalid value is the
/// error (a wrong type raises badarg).
pub fn decode_settings(list: Term) -> NifResult<Result<Vec<Setting>, Error>> {
    let mut settings = Vec::new();
    for t in args::proper_list(list)? {
        match decode_setting(t)? {
            Ok(s) => settings.push(s),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(settings))
}

// ---------------------------------------------------------------------------
// Outcomes and replies

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

// ---------------------------------------------------------------------------
// Packets and active-mode messages

fn binary<'a>(env: Env<'a>, bytes: &[u8]) -> Term<'a> {
    let mut b = NewBinary::new(env, bytes.len());
    b.as_mut_slice().copy_from_slice(bytes);
    b.into()
}

/// A packet as the owner gets it: a binary, a list (list mode), or, in
/// binary mode with `{header, N}`, `[B1, ..., BN | Rest]` (gen_tcp's shape).
pub fn packet<'a>(env: Env<'a>, bytes: &[u8], opts: &TcpOpts) -> Term<'a> {
    let shape = if opts.list {
        Shape::List
    } else {
        gen_tcp_opts::shape(bytes.len(), opts.header)
    };
    match shape {
        Shape::Binary => binary(env, bytes),
        Shape::List => {
            let items: Vec<Term<'a>> = bytes.iter().map(|b| b.encode(env)).collect();
            items.encode(env)
        }
        Shape::Header(n) => {
            let (head, rest) = bytes.split_at(n.min(bytes.len()));
            head.iter()
                .rev()
                .fold(binary(env, rest), |tail, b| tail.list_prepend(*b))
        }
    }
}

/// `{Data, S, Packet}`, tagged with the socket's data tag.
pub fn data_msg<'a>(env: Env<'a>, sock: Term<'a>, bytes: &[u8], opts: &TcpOpts) -> Term<'a> {
    (opts.tags.data, sock, packet(env, bytes, opts)).encode(env)
}

/// The handle of an active socket's select for its pump (`active`).
pub fn active_handle(env: Env) -> Term {
    atoms::active().encode(env)
}

/// `{Tag, S}`: a closed or passive message.
pub fn tagged<'a>(env: Env<'a>, tag: Atom, sock: Term<'a>) -> Term<'a> {
    (tag, sock).encode(env)
}

/// `{Error, S, Reason}`.
pub fn error_msg<'a>(env: Env<'a>, tag: Atom, sock: Term<'a>, e: Error) -> Term<'a> {
    (tag, sock, e).encode(env)
}
