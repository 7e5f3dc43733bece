//! The messages a waiter is sent: `select` (try again) and `abort` (closed),
//! built in the caller's env or, from a callback, in a fresh one.

use rustler::sys::ErlNifPid;
use rustler::{Encoder, Env, Term};

use super::ctx::Ctx;
use crate::atoms;
use crate::socket::Socket;
use crate::sys::env::EnvRef;
use crate::sys::handles::{HandleStore, Saved};
use crate::sys::msg::{self, MsgEnv};
use crate::sys::resource::Obj;

/// The socket term users hold: `{'$nifsock', Resource}`.
pub fn sock_term<'a>(env: Env<'a>, obj: Obj<'_, Socket>) -> Term<'a> {
    crate::codec::args::sock_term(env, obj.make_term(env))
}

/// What to tell a waiter.
#[derive(Clone, Copy)]
pub(super) enum Notice {
    /// `{'$nifsock', S, select, Handle}`: try again.
    Select,
    /// `{'$nifsock', S, abort, {Handle, closed}}`.
    AbortClosed,
}

fn build<'a>(env: Env<'a>, obj: Obj<'_, Socket>, handle: Term<'a>, notice: Notice) -> Term<'a> {
    let sock = sock_term(env, obj);
    match notice {
        Notice::Select => (atoms::nifsock_tag(), sock, atoms::select(), handle).encode(env),
        Notice::AbortClosed => (
            atoms::nifsock_tag(),
            sock,
            atoms::abort(),
            (handle, atoms::closed()),
        )
            .encode(env),
    }
}

pub(super) fn notify(
    ctx: Ctx,
    obj: Obj<'_, Socket>,
    handles: &HandleStore,
    pid: &ErlNifPid,
    handle: Saved,
    notice: Notice,
) {
    match ctx {
        Ctx::Nif(env) => {
            let Some(h) = handles.load(env, handle) else {
                return;
            };
            let m = build(env, obj, h, notice);
            msg::send(env, pid, m);
        }
        Ctx::Callback(raw) => {
            let Some(menv) = MsgEnv::new() else { return };
            let m = menv.with(|env| {
                let h = handles.load(env, handle)?;
                Some(build(env, obj, h, notice).as_c_arg())
            });
            if let Some(m) = m {
                menv.send(raw, pid, m);
            }
        }
    }
}

pub(super) fn undefined_in(raw: EnvRef) -> rustler::sys::ErlNifTerm {
    msg::with_raw_env(raw, |env| atoms::undefined().encode(env).as_c_arg())
}
