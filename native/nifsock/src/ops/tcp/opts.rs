//! The gen_tcp options `nifsock_tcp` keeps in the socket beside its framing
//! (`header`, the watermarks, `delay_send`, `send_timeout_close`,
//! `show_econnreset`, `deliver`, `tags`): set from a list in the order gen_tcp applies
//! them, read back by `tcp::get_opts`, copied to accepted sockets with the
//! rest of `TcpOpts`.

use rustler::{Atom, Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::args::{self, Sock};
use crate::codec::reply;
use crate::codec::tcp::{decode_tags, tags_term};
use crate::core::gen_tcp_opts::{msgq_watermark, send_watermark};
use crate::error::Error;
use crate::socket::{Phase, Tags, TcpOpts};

/// One option, decoded.
#[derive(Debug, Clone, Copy)]
enum Setting {
    Header(u32),
    HighWatermark(u32),
    LowWatermark(u32),
    HighMsgq(u32),
    LowMsgq(u32),
    DelaySend(bool),
    SendTimeoutClose(bool),
    ShowEconnreset(bool),
    DeliverPort(bool),
    Tags(Tags),
}

fn bad() -> rustler::Error {
    rustler::Error::BadArg
}

/// Decodes `{Name, Value}` (integers as their low 32 bits, as prim_inet
/// sends them). A wrong type raises badarg; a message queue watermark that
/// gen_tcp refuses is `Invalid`.
fn decode(t: Term) -> NifResult<Result<Setting, Error>> {
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

fn apply(t: &mut TcpOpts, s: Setting) {
    match s {
        Setting::Header(n) => t.header = n,
        Setting::HighWatermark(n) => t.send_watermarks.set_high(n),
        Setting::LowWatermark(n) => t.send_watermarks.set_low(n),
        Setting::HighMsgq(n) => t.msgq_watermarks.set_high(n),
        Setting::LowMsgq(n) => t.msgq_watermarks.set_low(n),
        Setting::DelaySend(b) => t.delay_send = b,
        Setting::SendTimeoutClose(b) => t.send_timeout_close = b,
        Setting::ShowEconnreset(b) => t.show_econnreset = b,
        Setting::DeliverPort(b) => t.deliver_port = b,
        Setting::Tags(tags) => t.tags = tags,
    }
}

/// Sets the options of `list` (`[{Name, Value}]`), in its order (the
/// watermark pairs depend on it); all or none.
pub fn set_opts<'a>(env: Env<'a>, sock: Sock<'a>, list: Term<'a>) -> NifResult<Term<'a>> {
    let mut settings = Vec::new();
    for t in args::proper_list(list)? {
        match decode(t)? {
            Ok(s) => settings.push(s),
            Err(e) => return reply::error(env, e),
        }
    }
    let mut st = sock.s.lock();
    if st.phase != Phase::Open {
        return reply::error(env, Error::Closed);
    }
    let mut t = st.tcp;
    for s in settings {
        apply(&mut t, s);
    }
    st.tcp = t;
    Ok(atoms::ok().encode(env))
}

/// The options of this module as `(key, value)` pairs, for `tcp::get_opts`.
pub fn get<'a>(env: Env<'a>, t: &TcpOpts) -> [(Term<'a>, Term<'a>); 10] {
    let deliver = if t.deliver_port {
        atoms::port()
    } else {
        atoms::term()
    };
    let kv = |k: Atom, v: Term<'a>| (k.encode(env), v);
    [
        kv(atoms::header(), t.header.encode(env)),
        kv(atoms::high_watermark(), t.send_watermarks.high.encode(env)),
        kv(atoms::low_watermark(), t.send_watermarks.low.encode(env)),
        kv(
            atoms::high_msgq_watermark(),
            t.msgq_watermarks.high.encode(env),
        ),
        kv(
            atoms::low_msgq_watermark(),
            t.msgq_watermarks.low.encode(env),
        ),
        kv(atoms::delay_send(), t.delay_send.encode(env)),
        kv(
            atoms::send_timeout_close(),
            t.send_timeout_close.encode(env),
        ),
        kv(atoms::show_econnreset(), t.show_econnreset.encode(env)),
        kv(atoms::deliver(), deliver.encode(env)),
        kv(atoms::tags(), tags_term(env, &t.tags)),
    ]
}
