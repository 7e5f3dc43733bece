//! NIFs of the readiness prototype's pump source (`nifsock_readiness`).

use rustler::{Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::args;
use crate::readiness;

/// Turns the pump source on or off.
#[rustler::nif]
fn readiness_pump(env: Env<'_>, on: bool) -> Term<'_> {
    if readiness::set_pump(on) {
        atoms::ok().encode(env)
    } else {
        (atoms::error(), atoms::invalid()).encode(env)
    }
}

/// The pump's call on `{'$nifsock', readiness, select, batch}`: drains a batch
/// and re-arms the select on the set's fd for the caller.
#[rustler::nif]
fn readiness_pump_drain(env: Env<'_>) -> NifResult<Term<'_>> {
    let pump = args::caller(env)?;
    let m = (
        atoms::nifsock_tag(),
        atoms::readiness(),
        atoms::select(),
        atoms::batch(),
    )
        .encode(env);
    Ok(if readiness::pump_drain(env, &pump, m) {
        atoms::ok().encode(env)
    } else {
        (atoms::error(), atoms::invalid()).encode(env)
    })
}
