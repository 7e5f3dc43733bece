//! A borrowed erl_nif environment: the calling process's env of a NIF, or the
//! env ERTS hands a resource callback. Only made from those, so functions
//! taking one may pass it to erl_nif.

use rustler::sys::ErlNifEnv;
use rustler::Env;

/// An env valid for the duration of the current NIF call or callback.
#[derive(Clone, Copy, Debug)]
pub struct EnvRef(*mut ErlNifEnv);

impl EnvRef {
    /// The env of a NIF call.
    pub fn of(env: Env) -> EnvRef {
        EnvRef(env.as_c_arg())
    }

    /// The env ERTS passed to a resource callback (may be NULL).
    pub(super) fn from_callback(raw: *mut ErlNifEnv) -> EnvRef {
        EnvRef(raw)
    }

    pub(super) fn raw(self) -> *mut ErlNifEnv {
        self.0
    }
}
