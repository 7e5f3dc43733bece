//! nifsock_tcp's terms: the message tags tuple.

use rustler::{Atom, Encoder, Env, NifResult, Term};

use crate::socket::Tags;

/// `{Data, Closed, Error, Passive}` (nifsock_tcp has made `nifsock` and
/// `gen_tcp` this tuple); anything else raises badarg.
pub fn decode_tags(t: Term) -> NifResult<Tags> {
    let (data, closed, error, passive): (Atom, Atom, Atom, Atom) = t.decode()?;
    Ok(Tags {
        data,
        closed,
        error,
        passive,
    })
}

/// `{Data, Closed, Error, Passive}`.
pub fn tags_term<'a>(env: Env<'a>, t: &Tags) -> Term<'a> {
    (t.data, t.closed, t.error, t.passive).encode(env)
}
