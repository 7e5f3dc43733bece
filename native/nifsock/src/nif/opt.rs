//! setopt/getopt NIFs.

use rustler::{Env, NifResult, Term};

use crate::nif::args::{self, Sock};
use crate::sockopt;

#[rustler::nif]
fn setopt<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    level: Term<'a>,
    name: Term<'a>,
    value: Term<'a>,
) -> NifResult<Term<'a>> {
    let r = sockopt::target(level, name).and_then(|t| sockopt::set(sock.s, t, value));
    args::unit(env, r)
}

#[rustler::nif]
fn getopt<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    level: Term<'a>,
    name: Term<'a>,
) -> NifResult<Term<'a>> {
    let r = sockopt::target(level, name).and_then(|t| sockopt::get(env, sock.s, t));
    args::value(env, r)
}
