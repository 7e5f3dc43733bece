//! The reply shapes every NIF shares: `ok`, `{ok, V}`, `{error, Reason}`.

use rustler::{Encoder, Env, NifResult, Term};

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
