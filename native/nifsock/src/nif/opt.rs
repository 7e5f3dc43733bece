//! setopt/getopt NIFs.

use rustler::{Env, NifResult, Term};

use crate::codec::args::Sock;
use crate::codec::{reply, sockopt as codec};
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
