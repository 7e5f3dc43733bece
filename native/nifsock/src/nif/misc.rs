//! Names, ownership and introspection NIFs.

use rustler::{Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::addr::{self, Family};
use crate::codec::args::Sock;
use crate::codec::reply;
use crate::ops::owner;
use crate::socket::Phase;
use crate::stats;
use crate::sys::msg;

#[rustler::nif]
fn sockname<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    reply::value(env, owner::sockname(sock).map(|a| addr::encode(env, &a)))
}

#[rustler::nif]
fn peername<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    reply::value(env, owner::peername(sock).map(|a| addr::encode(env, &a)))
}

/// Moves ownership (and the owner monitor) to `pid`. Only the owner may.
#[rustler::nif]
fn controlling_process<'a>(env: Env<'a>, sock: Sock<'a>, pid: Term<'a>) -> NifResult<Term<'a>> {
    let new = msg::pid_of(pid).ok_or(rustler::Error::BadArg)?;
    reply::unit(env, owner::controlling_process(env, sock, &new))
}

/// Per-socket information, as a map.
#[rustler::nif]
fn info<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let i = owner::info(sock);
    let state = match i.phase {
        Phase::Open => atoms::open(),
        Phase::Closing => atoms::closing(),
        Phase::Closed => atoms::closed(),
    };
    let mut rstates = vec![state];
    if i.listening {
        rstates.push(atoms::listening());
    }
    if i.selected {
        rstates.push(atoms::selected());
    }
    let protocol = if i.family == Family::Local {
        atoms::default()
    } else {
        atoms::tcp()
    };
    let pairs: Vec<(Term, Term)> = vec![
        (atoms::domain().encode(env), i.family.atom().encode(env)),
        (atoms::r#type().encode(env), atoms::stream().encode(env)),
        (atoms::protocol().encode(env), protocol.encode(env)),
        (atoms::ctrl().encode(env), msg::pid_term(env, &i.owner)),
        (atoms::owner().encode(env), msg::pid_term(env, &i.owner)),
        (atoms::ctype().encode(env), atoms::normal().encode(env)),
        (atoms::rstates().encode(env), rstates.encode(env)),
        (atoms::wstates().encode(env), vec![state].encode(env)),
        (atoms::num_readers().encode(env), i.readers.encode(env)),
        (atoms::num_writers().encode(env), i.writers.encode(env)),
        (atoms::num_acceptors().encode(env), i.acceptors.encode(env)),
        (
            atoms::close_may_block().encode(env),
            i.close_may_block.encode(env),
        ),
        (
            atoms::counters().encode(env),
            counter_map(env, i.traffic.snapshot())?,
        ),
        (
            atoms::readiness().encode(env),
            counter_map(env, i.readiness)?,
        ),
        (
            atoms::active().encode(env),
            crate::codec::tcp::active(env, i.active),
        ),
        (atoms::pending().encode(env), i.pending.encode(env)),
    ];
    let (k, v): (Vec<Term>, Vec<Term>) = pairs.into_iter().unzip();
    Term::map_from_term_arrays(env, &k, &v).map_err(|_| rustler::Error::BadArg)
}

/// A map of counters named by atoms.
fn counter_map<'a, V: Encoder>(
    env: Env<'a>,
    counters: impl IntoIterator<Item = (&'static str, V)>,
) -> NifResult<Term<'a>> {
    let mut keys = Vec::new();
    let mut vals = Vec::new();
    for (k, v) in counters {
        keys.push(rustler::Atom::from_str(env, k)?.encode(env));
        vals.push(v.encode(env));
    }
    Term::map_from_term_arrays(env, &keys, &vals).map_err(|_| rustler::Error::BadArg)
}

/// Process-wide counters, as a map.
#[rustler::nif]
fn stats(env: Env<'_>) -> NifResult<Term<'_>> {
    counter_map(
        env,
        stats::snapshot(crate::sys::resource::alloc_size::<crate::socket::Socket>()),
    )
}
