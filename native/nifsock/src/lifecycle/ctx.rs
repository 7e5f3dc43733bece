//! Where a lifecycle step runs: a NIF call (a process env) or an ERTS callback.

use rustler::Env;

use crate::sys::env::EnvRef;

/// Where a call comes from: a NIF (a process env) or an ERTS callback.
#[derive(Clone, Copy)]
pub enum Ctx<'a> {
    /// A NIF call.
    Nif(Env<'a>),
    /// A callback, with the env ERTS gave it.
    Callback(EnvRef),
}

impl Ctx<'_> {
    pub(super) fn raw(self) -> EnvRef {
        match self {
            Ctx::Nif(env) => EnvRef::of(env),
            Ctx::Callback(raw) => raw,
        }
    }
}
