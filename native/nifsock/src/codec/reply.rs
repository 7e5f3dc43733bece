//! The reply shapes every NIF shares: `ok`, `{ok, V}`, `{error, Reason}`;
//! and the outcomes operations return whose replies are shared (`Recv`,
//! `Progress`), declared here beside their encoders (codec sits below ops).

use rustler::{Binary, Encoder, Env, NewBinary, NifResult, OwnedBinary, Term};

use crate::atoms;
use crate::error::{Error, Result};

/// `{error, Reason}`; a BadArg error raises badarg instead.
pub fn error<'a>(env: Env<'a>, e: Error) -> NifResult<Term<'a>> {
    if e == Error::BadArg {
        return Err(rustler::Error::BadArg);
    }
    Ok((atoms::error(), e).encode(env))
}

/// `{error, {Reason, Extra}}`, or `{error, Reason}` when there is no extra.
pub fn error_with<'a>(env: Env<'a>, e: Error, extra: Option<Term<'a>>) -> NifResult<Term<'a>> {
    match extra {
        None => error(env, e),
        Some(x) => Ok((atoms::error(), (e, x)).encode(env)),
    }
}

/// `ok`, or `{error, Reason}`.
pub fn unit<'a>(env: Env<'a>, r: Result<()>) -> NifResult<Term<'a>> {
    match r {
        Ok(()) => Ok(atoms::ok().encode(env)),
        Err(e) => error(env, e),
    }
}

/// `{ok, V}`, or `{error, Reason}`.
pub fn value<'a>(env: Env<'a>, r: Result<Term<'a>>) -> NifResult<Term<'a>> {
    match r {
        Ok(v) => Ok((atoms::ok(), v).encode(env)),
        Err(e) => error(env, e),
    }
}

/// How a recv call ended.
pub enum Recv<'a> {
    /// The bytes (`{ok, Bin}`).
    Data(Binary<'a>),
    /// The per-call read bound was reached with a partial read kept in the
    /// socket: call again (`more`).
    More,
    /// A select is armed (`select`); in nowait mode with the bytes read so
    /// far handed back (`{select, Partial}`).
    Select(Option<Binary<'a>>),
    /// Failed (`{error, R}`), with the bytes read so far when there are
    /// some (`{error, {R, Partial}}`).
    Failed(Error, Option<Binary<'a>>),
    /// Nothing read: call `erlang:yield()`, then again in mode `yielded`
    /// (`yield`; `core::yield_read`).
    Yield,
}

/// A recv's reply: `{ok, Bin}`, `more`, `select`, `{select, Partial}`,
/// `yield`, `{error, R}` or `{error, {R, Partial}}`.
pub fn recv<'a>(env: Env<'a>, r: Recv<'a>) -> NifResult<Term<'a>> {
    match r {
        Recv::Data(b) => Ok((atoms::ok(), b).encode(env)),
        Recv::More => Ok(atoms::more().encode(env)),
        Recv::Select(None) => Ok(atoms::select().encode(env)),
        Recv::Select(Some(p)) => Ok((atoms::select(), p).encode(env)),
        Recv::Failed(e, p) => error_with(env, e, p.map(|b| b.to_term(env))),
        Recv::Yield => Ok(atoms::yield_().encode(env)),
    }
}

/// A call that either finished or armed a select for the caller to wait on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Done (`ok`).
    Done,
    /// Wait for the select message, then call again (`select`).
    Select,
}

/// `ok`, `select`, or `{error, Reason}`.
pub fn progress<'a>(env: Env<'a>, r: Result<Progress>) -> NifResult<Term<'a>> {
    match r {
        Ok(Progress::Done) => Ok(atoms::ok().encode(env)),
        Ok(Progress::Select) => Ok(atoms::select().encode(env)),
        Err(e) => error(env, e),
    }
}

/// The first `n` bytes of `owned` (a direct read into it) as a binary term:
/// `owned` itself, shrunk in place, or a copy when it can't be shrunk.
pub fn read_binary(env: Env<'_>, mut owned: OwnedBinary, n: usize) -> Binary<'_> {
    if n == owned.len() || owned.realloc(n) {
        return Binary::from_owned(owned, env);
    }
    let mut bin = NewBinary::new(env, n);
    bin.as_mut_slice()
        .copy_from_slice(owned.as_slice().get(..n).unwrap_or(&[]));
    bin.into()
}
