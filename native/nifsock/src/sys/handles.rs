//! Select handles kept by a socket while processes wait on it, so a close can
//! send each waiter `{'$nifsock', S, abort, {Handle, closed}}`.
//!
//! Immediate handles (small integers, atoms: what nifsock's own blocking calls
//! and active mode use) are kept as they are, with no env. Other handles (user
//! references, with `nowait`) are copied into one env per socket, allocated on
//! the first such wait and freed whenever no one waits, so an idle socket holds
//! no env.

use rustler::sys::{enif_alloc_env, enif_free_env, enif_make_copy, ErlNifEnv, ErlNifTerm};
use rustler::{Env, Term};

/// A term saved in a [`HandleStore`]; valid until the store is cleared.
#[derive(Clone, Copy, Debug)]
pub struct Saved(ErlNifTerm);

/// The per-socket env holding saved handles.
#[derive(Debug, Default)]
pub struct HandleStore {
    env: Option<EnvPtr>,
    count: usize,
}

#[derive(Debug)]
struct EnvPtr(*mut ErlNifEnv);

// SAFETY: the env is only used under the socket's state mutex; ERTS envs made by
// enif_alloc_env are not tied to a thread.
unsafe impl Send for EnvPtr {}

impl HandleStore {
    /// Keeps `term`: as it is if it is an immediate, else a copy in the store's env.
    pub fn save(&mut self, term: Term) -> Option<Saved> {
        if is_immediate(term) {
            return Some(Saved(term.as_c_arg()));
        }
        let env = match &self.env {
            Some(e) => e.0,
            None => {
                // SAFETY: no preconditions.
                let e = unsafe { enif_alloc_env() };
                if e.is_null() {
                    return None;
                }
                self.env = Some(EnvPtr(e));
                e
            }
        };
        self.count += 1;
        // SAFETY: env is our live env; term is valid in the caller's env.
        Some(Saved(unsafe { enif_make_copy(env, term.as_c_arg()) }))
    }

    /// Copies a saved term into `env`.
    pub fn load<'a>(&self, env: Env<'a>, saved: Saved) -> Term<'a> {
        // SAFETY: saved was made by `save` on this store and the store hasn't been
        // cleared since (callers drop every Saved before `clear`).
        unsafe { Term::new(env, enif_make_copy(env.as_c_arg(), saved.0)) }
    }

    /// Compares a saved term with `term`.
    pub fn equals(&self, saved: Saved, term: Term) -> bool {
        // SAFETY: both terms are valid; enif_compare reads them only.
        unsafe { rustler::sys::enif_compare(saved.0, term.as_c_arg()) == 0 }
    }

    /// Forgets every saved term and frees the env (call only when no `Saved`
    /// is held any more).
    pub fn clear(&mut self) {
        self.count = 0;
        if let Some(e) = self.env.take() {
            // SAFETY: allocated in `save`; no Saved from it is used after this.
            unsafe { enif_free_env(e.0) };
        }
    }
}

/// Terms whose word is the whole term (valid in every env): atoms and small
/// integers (60-bit on 64-bit VMs; 28-bit on 32-bit ones).
fn is_immediate(term: Term) -> bool {
    if term.is_atom() {
        return true;
    }
    const SMALL: i64 = if cfg!(target_pointer_width = "64") {
        1 << 59
    } else {
        1 << 27
    };
    term.is_integer()
        && term
            .decode::<i64>()
            .is_ok_and(|i| (-SMALL..SMALL).contains(&i))
}

impl Drop for HandleStore {
    fn drop(&mut self) {
        if let Some(e) = self.env.take() {
            // SAFETY: allocated in `save`, freed once here.
            unsafe { enif_free_env(e.0) };
        }
    }
}
