//! Select handles kept by a socket while processes wait on it, so a close can
//! send each waiter `{'$nifsock', S, abort, {Handle, closed}}`.
//!
//! Immediate handles (small integers, atoms: what nifsock's own blocking calls
//! and active mode use) are kept as they are, with no env. Other handles (user
//! references, with `nowait`) are copied into one env per socket, allocated on
//! the first such wait and freed whenever no one waits, so an idle socket holds
//! no env.
//!
//! A [`Saved`] can't be used past the store's `clear`: each one carries the
//! store's epoch (0 for immediates, valid in every env), `clear` starts a new
//! epoch, and `load`/`equals` refuse a handle of an older one, so a waiter
//! kept by mistake past a clear is a lost message, never a read of freed memory.

use rustler::sys::{enif_alloc_env, enif_free_env, enif_make_copy, ErlNifEnv, ErlNifTerm};
use rustler::{Env, Term};

/// A term saved in a [`HandleStore`], and the store epoch it belongs to.
/// Packed to 12 bytes so a waiter holding one stays the size it was.
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
pub struct Saved {
    term: ErlNifTerm,
    epoch: u32,
}

/// The per-socket env holding saved handles.
#[derive(Debug)]
pub struct HandleStore {
    env: Option<EnvPtr>,
    /// Non-immediate handles saved now belong to this epoch (never 0).
    epoch: u32,
}

impl Default for HandleStore {
    fn default() -> Self {
        HandleStore {
            env: None,
            epoch: 1,
        }
    }
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
            return Some(Saved {
                term: term.as_c_arg(),
                epoch: 0,
            });
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
        // SAFETY: env is our live env; term is valid in the caller's env.
        let term = unsafe { enif_make_copy(env, term.as_c_arg()) };
        Some(Saved {
            term,
            epoch: self.epoch,
        })
    }

    /// The saved term if it is still valid: an immediate, or a copy in the
    /// current env.
    fn live(&self, saved: Saved) -> Option<ErlNifTerm> {
        let epoch = saved.epoch;
        (epoch == 0 || epoch == self.epoch).then_some(saved.term)
    }

    /// The saved term when it is an immediate (an atom or a small integer:
    /// the same word in every env), with no copy; None for a copied one.
    pub fn immediate<'a>(&self, env: Env<'a>, saved: Saved) -> Option<Term<'a>> {
        let (term, epoch) = (saved.term, saved.epoch);
        // SAFETY: epoch 0 is only given to immediates (`save`), valid in any env.
        (epoch == 0).then(|| unsafe { Term::new(env, term) })
    }

    /// Copies a saved term into `env`; None for a handle of an earlier epoch.
    pub fn load<'a>(&self, env: Env<'a>, saved: Saved) -> Option<Term<'a>> {
        let term = self.live(saved)?;
        // SAFETY: term is an immediate or lives in this store's env, which has
        // not been freed since it was saved (its epoch is the current one).
        Some(unsafe { Term::new(env, enif_make_copy(env.as_c_arg(), term)) })
    }

    /// Compares a saved term with `term` (false for a handle of an earlier epoch).
    pub fn equals(&self, saved: Saved, term: Term) -> bool {
        let Some(s) = self.live(saved) else {
            return false;
        };
        // SAFETY: both terms are valid (s as in `load`); enif_compare reads them only.
        unsafe { rustler::sys::enif_compare(s, term.as_c_arg()) == 0 }
    }

    /// Forgets every saved term and frees the env; handles saved before are
    /// refused from now on.
    pub fn clear(&mut self) {
        if let Some(e) = self.env.take() {
            self.epoch = self.epoch.checked_add(1).unwrap_or(1);
            // SAFETY: allocated in `save`; the epoch moved on, so no Saved
            // pointing into it is dereferenced after this.
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
