//! nifsock_tcp's accept: the new socket inherits the listener's options and
//! starts in its active mode, delivering inline what is already there.

use super::active::deliver;
use crate::codec::args::{Mode, Sock};
use crate::error::Result;
use crate::ops::conn::Accepted;
use crate::socket::Active;
use rustler::sys::ErlNifPid;
use rustler::{Env, Term};

/// accept for `nifsock_tcp`: the accepted socket inherits the listener's
/// framing and `buffer` and starts in its active mode, delivering inline what
/// is already there (no select, no pump hop for a request that arrived with
/// the connection), for the pump `pump`.
pub fn accept<'a>(
    env: Env<'a>,
    l: Sock<'a>,
    handle: Term<'a>,
    mode: Mode,
    pump: &ErlNifPid,
) -> Result<Accepted<'a>> {
    let r = crate::ops::conn::accept(env, l, handle, mode);
    let Ok(Accepted::Socket(new)) = r else {
        return r;
    };
    let (active, priority) = {
        let lt = l.s.lock().tcp;
        (lt.accept_active, lt.priority)
    };
    if let Some(p) = priority {
        // Linux doesn't copy SO_PRIORITY at accept (gen_tcp's accepted sockets have it).
        let _ = crate::ops::sockopt::set_priority(new.s, p);
    }
    // `buffer` ({otp, rcvbuf}), as inet's accepted sockets have the listener's.
    new.s.set_rcvbuf(l.s.rcvbuf());
    if active != Active::Off {
        new.s.lock().tcp.active = active;
        deliver(env, new, pump);
    }
    Ok(Accepted::Socket(new))
}
