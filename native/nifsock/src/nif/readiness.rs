//! NIFs of the readiness prototype's pump source (`nifsock_readiness`).

use rustler::{Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::args;
use crate::core::promotion::Rule;
use crate::readiness;
use crate::sys::msg;

/// Whether the caller is the pump: the process registered as
/// `nifsock_readiness` (it registers before it turns the pump on). Any other
/// caller would take the set's select over from it (an fd selects for one
/// pid), or turn the source over under the driver, and leave every wait in
/// the set unserved.
fn is_pump(env: Env<'_>) -> NifResult<bool> {
    let caller = args::caller(env)?;
    Ok(env
        .whereis_pid(atoms::nifsock_readiness())
        .is_some_and(|pid| msg::same_pid(pid.as_c_arg(), &caller)))
}

/// Turns the pump source on or off (the pump process only; not while the
/// driver source is on).
#[rustler::nif]
fn readiness_pump(env: Env<'_>, on: bool) -> NifResult<Term<'_>> {
    Ok(if is_pump(env)? && readiness::set_pump(on) {
        if !on {
            readiness::pump_stopped(env);
        }
        atoms::ok().encode(env)
    } else {
        (atoms::error(), atoms::invalid()).encode(env)
    })
}

/// The pump's call on `{'$nifsock', readiness, select, batch}`: drains a batch
/// and re-arms the select on the set's fd for the caller.
#[rustler::nif]
fn readiness_pump_drain(env: Env<'_>) -> NifResult<Term<'_>> {
    if !is_pump(env)? || !readiness::pump_on() {
        return Ok((atoms::error(), atoms::invalid()).encode(env));
    }
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

/// Which hot sockets' input moves to the readiness port (`core::promotion`):
/// `alone` or `any` (the application env `port_hold`, `alone` unless set,
/// applied by `nifsock_nif`'s load through `nifsock_readiness:port_hold/0`).
/// `{error, {invalid, port_hold}}` for another atom.
#[rustler::nif]
fn readiness_port_hold(env: Env<'_>, rule: rustler::Atom) -> Term<'_> {
    let rule = if rule == atoms::any() {
        Rule::Any
    } else if rule == atoms::alone() {
        Rule::Alone
    } else {
        return (atoms::error(), (atoms::invalid(), atoms::port_hold())).encode(env);
    };
    readiness::set_port_rule(rule);
    atoms::ok().encode(env)
}
