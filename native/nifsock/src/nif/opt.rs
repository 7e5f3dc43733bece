//! setopt/getopt NIFs.

use rustler::{Env, NifResult, Term};

use crate::codec::args::Sock;
use crate::codec::reply;
use crate::ops::sockopt;

#[rustler::nif]
fn setopt<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    level: Term<'a>,
    name: Term<'a>,
    value: Term<'a>,
) -> NifResult<Term<'a>> {
    let r = sockopt::target(level, name).and_then(|t| sockopt::set(sock.s, t, value));
    reply::unit(env, r)
}

#[rustler::nif]
fn getopt<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    level: Term<'a>,
    name: Term<'a>,
) -> NifResult<Term<'a>> {
    let r = sockopt::target(level, name).and_then(|t| sockopt::get(env, sock.s, t));
    reply::value(env, r)
}
