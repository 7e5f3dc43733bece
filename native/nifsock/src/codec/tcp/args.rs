//! The arguments nifsock_tcp's NIFs take, decoded.

use rustler::{Atom, NifResult, Term};

use crate::atoms;
use crate::codec::args;
use crate::core::gen_tcp_opts::{msgq_watermark, send_watermark};
use crate::core::packet::Packet;
use crate::error::Error;
use crate::socket::Tags;

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
