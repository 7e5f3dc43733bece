//! The NIF of `nifsock_dist`'s port carrier.

use rustler::{Env, NifResult, Term};

use crate::codec::args::Sock;
use crate::codec::reply;
use crate::ops::dist;
use crate::sys::distdrv;

/// Hands the socket's connection to the dist port `port` (a port of the
/// driver opened as `"libnifsock dist"`, before its attach `port_control`):
/// see `ops::dist::attach`. `{error, closed}` on a closed socket, `{error,
/// {invalid, port}}` when `port` is no such port.
#[rustler::nif]
fn dist_attach<'a>(env: Env<'a>, sock: Sock<'a>, port: Term<'a>) -> NifResult<Term<'a>> {
    let id = distdrv::local_port_id(env, port).ok_or(rustler::Error::BadArg)?;
    reply::unit(env, dist::attach(env, sock.obj, id))
}
