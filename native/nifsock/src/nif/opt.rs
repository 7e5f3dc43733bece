//! setopt/getopt NIFs.

use rustler::{Binary, Env, NewBinary, NifResult, Term};

use crate::codec::args::Sock;
use crate::codec::{reply, sockopt as codec};
use crate::error::Error;
use crate::ops::sockopt;

#[rustler::nif]
fn setopt<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    level: Term<'a>,
    name: Term<'a>,
    value: Term<'a>,
) -> NifResult<Term<'a>> {
    let r = codec::target(level, name)
        .and_then(|t| codec::decode_set(t, value))
        .and_then(|opt| sockopt::set(sock.s, opt));
    reply::unit(env, r)
}

#[rustler::nif]
fn getopt<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    level: Term<'a>,
    name: Term<'a>,
) -> NifResult<Term<'a>> {
    let r = codec::target(level, name)
        .and_then(|t| sockopt::get(sock.s, t))
        .and_then(|v| codec::encode(env, v));
    reply::value(env, r)
}

/// The largest buffer `tcp_getopt_raw` takes: inet_drv's (its 64 KiB reply
/// buffer less the reply's header), so that what gen_tcp refuses is refused.
const MAX_RAW_GETOPT: usize = 65522;

/// nifsock_tcp's `{raw, Level, Opt, Bin}` getopt: getsockopt with a buffer
/// holding `init` (its size is the buffer's), `{ok, Bytes}` with what the
/// kernel wrote. A buffer above `MAX_RAW_GETOPT` is `{error, einval}`.
#[rustler::nif]
fn tcp_getopt_raw<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    level: i32,
    name: i32,
    init: Binary<'a>,
) -> NifResult<Term<'a>> {
    if init.len() > MAX_RAW_GETOPT {
        return reply::error(env, Error::Os(libc::EINVAL));
    }
    let mut nb = NewBinary::new(env, init.len());
    nb.as_mut_slice().copy_from_slice(init.as_slice());
    let r = sockopt::get_raw_into(sock.s, level, name, nb.as_mut_slice());
    let bin: Binary = nb.into();
    let r = r.and_then(|n| {
        bin.make_subbinary(0, n)
            .map(|b| b.to_term(env))
            .map_err(|_| Error::Os(libc::EINVAL))
    });
    reply::value(env, r)
}
