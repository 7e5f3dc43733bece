//! Names, ownership and introspection NIFs.

use rustler::{Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::codec::addr;
use crate::codec::args::{self, Sock};
use crate::codec::reply;
use crate::error::Error;
use crate::socket::Phase;
use crate::stats;
use crate::sys::env::EnvRef;
use crate::sys::{msg, syscall};

#[rustler::nif]
fn sockname<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let r = sock
        .s
        .with_fd(syscall::sockname)
        .and_then(|r| r.map_err(Error::Os));
    reply::value(env, r.map(|a| addr::encode(env, &a)))
}

#[rustler::nif]
fn peername<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let r = sock
        .s
        .with_fd(syscall::peername)
        .and_then(|r| r.map_err(Error::Os));
    reply::value(env, r.map(|a| addr::encode(env, &a)))
}

/// Moves ownership (and the owner monitor) to `pid`. Only the owner may.
#[rustler::nif]
fn controlling_process<'a>(env: Env<'a>, sock: Sock<'a>, pid: Term<'a>) -> NifResult<Term<'a>> {
    let new = msg::pid_of(pid).ok_or(rustler::Error::BadArg)?;
    let caller = args::caller(env)?;
    // Wait for an active delivery in progress: after this returns, active
    // messages go to the new owner only.
    let _serial = sock.s.delivery_lock();
    let mut st = sock.s.lock();
    if st.phase != Phase::Open {
        return reply::error(env, Error::Closed);
    }
    if !msg::same_pid(&st.owner, &caller) {
        return reply::error(env, Error::NotOwner);
    }
    if msg::same_pid(&new, &caller) {
        return Ok(atoms::ok().encode(env));
    }
    let Some(mon) = msg::monitor(EnvRef::of(env), sock.obj, &new) else {
        return reply::error(env, Error::Os(libc::ESRCH))
            .or_else(|_| reply::error(env, Error::BadArg));
    };
    if let Some(old) = st.owner_mon.replace(mon) {
        msg::demonitor(EnvRef::of(env), sock.obj, &old);
    }
    st.owner = new;
    Ok(atoms::ok().encode(env))
}

/// Per-socket information, as a map.
#[rustler::nif]
fn info<'a>(env: Env<'a>, sock: Sock<'a>) -> NifResult<Term<'a>> {
    let st = sock.s.lock();
    let state = match st.phase {
        Phase::Open => atoms::open(),
        Phase::Closing => atoms::closing(),
        Phase::Closed => atoms::closed(),
    };
    let mut rstates = vec![state];
    if st.listening {
        rstates.push(atoms::listening());
    }
    if st.selected {
        rstates.push(atoms::selected());
    }
    let count = |w: &crate::socket::Waiters| usize::from(w.current.is_some()) + w.queue.len();
    let (readers, acceptors) = if st.listening {
        (0, count(&st.readers))
    } else {
        (count(&st.readers), 0)
    };
    let pairs: Vec<(Term, Term)> = vec![
        (
            atoms::domain().encode(env),
            sock.s.family.atom().encode(env),
        ),
        (atoms::r#type().encode(env), atoms::stream().encode(env)),
        (
            atoms::protocol().encode(env),
            if sock.s.family == addr::Family::Local {
                atoms::default()
            } else {
                atoms::tcp()
            }
            .encode(env),
        ),
        (atoms::ctrl().encode(env), msg::pid_term(env, &st.owner)),
        (atoms::owner().encode(env), msg::pid_term(env, &st.owner)),
        (atoms::ctype().encode(env), atoms::normal().encode(env)),
        (atoms::rstates().encode(env), rstates.encode(env)),
        (atoms::wstates().encode(env), vec![state].encode(env)),
        (atoms::num_readers().encode(env), readers.encode(env)),
        (
            atoms::num_writers().encode(env),
            count(&st.writers).encode(env),
        ),
        (atoms::num_acceptors().encode(env), acceptors.encode(env)),
        (
            atoms::close_may_block().encode(env),
            sock.s.close_may_block().encode(env),
        ),
        (
            atoms::counters().encode(env),
            counter_map(env, sock.s.traffic().snapshot())?,
        ),
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
