//! The library's `ErlNifEntry`, built by hand.
//!
//! rustler 0.39's `init!` fills only `load` (`ErlNifEntry::new` leaves
//! `upgrade` and `unload` NULL), so ERTS refuses to load a second library for
//! the module: `code:load_file(nifsock_nif)` fails with "Upgrade not supported
//! by this NIF library". This entry has the same NIF table (the functions
//! `#[rustler::nif]` collects) and all three callbacks; they move the shared
//! block of `carry` through `priv_data` and call the plain Rust [`Callbacks`].

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

use rustler::codegen_runtime::ErlNifEntry;
use rustler::sys::{ErlNifEnv, ErlNifFunc, ErlNifTerm};
use rustler::{Env, Term};

use super::carry::{self, Carry};

/// What the library does at each ERTS callback.
pub struct Callbacks {
    /// The module's first library: register the resource types (false fails the load).
    pub load: fn(Env, Term) -> bool,
    /// A newer library replaces a loaded one (ERTS runs it with the other
    /// normal schedulers blocked): take the resource types over (false vetoes).
    pub upgrade: fn(Env, Term) -> bool,
    /// This copy of the library serves no library record any more (its code
    /// is about to be unmapped): stop its threads.
    pub retire: fn(),
    /// The layout fingerprint of this build (see `carry`).
    pub fingerprint: fn() -> u64,
}

struct Built {
    entry: ErlNifEntry,
    callbacks: &'static Callbacks,
}

// SAFETY: the entry's pointers are to static strings and to the leaked NIF
// table, all immutable after `entry` builds them; ERTS only reads them.
unsafe impl Send for Built {}
// SAFETY: as above.
unsafe impl Sync for Built {}

static BUILT: OnceLock<Built> = OnceLock::new();

fn callbacks() -> Option<&'static Callbacks> {
    BUILT.get().map(|b| b.callbacks)
}

/// The entry ERTS's `nif_init` returns for module `name` (built once per copy).
pub fn entry(name: &'static CStr, cb: &'static Callbacks) -> *const ErlNifEntry {
    // SAFETY: a no-op on Linux (the enif_* symbols are linked directly); it
    // fills rustler's table of them where they are not, as init! does.
    unsafe { rustler::codegen_runtime::internal_write_symbols() };
    let built = BUILT.get_or_init(|| {
        let funcs: &'static [ErlNifFunc] = Box::leak(
            rustler::codegen_runtime::inventory::iter::<rustler::Nif>()
                .map(rustler::Nif::get_def)
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        let mut entry = ErlNifEntry::new(name, funcs, load);
        entry.upgrade = Some(upgrade);
        entry.unload = Some(unload);
        Built {
            entry,
            callbacks: cb,
        }
    });
    &built.entry
}

fn fingerprint() -> u64 {
    callbacks().map_or(0, |c| (c.fingerprint)())
}

unsafe extern "C" fn load(
    env: *mut ErlNifEnv,
    priv_data: *mut *mut c_void,
    info: ErlNifTerm,
) -> c_int {
    let Some(cb) = callbacks() else { return 1 };
    if priv_data.is_null() {
        return 1;
    }
    let block = carry::create(fingerprint());
    let ok = std::panic::catch_unwind(|| {
        // SAFETY: env is the env ERTS passes to load, valid for this call;
        // info is a term in it.
        let env = unsafe { Env::new_init_env(&env, env) };
        // SAFETY: as above.
        let info = unsafe { Term::new(env, info) };
        // What init!'s load does first: rustler's own resource types (nifsock
        // has none; its types are registered by hand in `resource`).
        rustler::codegen_runtime::ResourceRegistration::register_all_collected(env).is_ok()
            && (cb.load)(env, info)
    })
    .unwrap_or(false);
    if !ok {
        carry::uncreate(block);
        return 1;
    }
    // SAFETY: priv_data is ERTS's out-pointer for this library's private data.
    unsafe { *priv_data = block.cast() };
    0
}

unsafe extern "C" fn upgrade(
    env: *mut ErlNifEnv,
    priv_data: *mut *mut c_void,
    old_priv_data: *mut *mut c_void,
    info: ErlNifTerm,
) -> c_int {
    let Some(cb) = callbacks() else { return 4 };
    if priv_data.is_null() || old_priv_data.is_null() {
        return 1;
    }
    // SAFETY: ERTS passes a pointer to the old library's private data.
    let old: *mut Carry = unsafe { *old_priv_data }.cast();
    if let Some(code) = carry::upgrade_refusal(old, fingerprint()) {
        return code;
    }
    let before = carry::adopt(old);
    let ok = std::panic::catch_unwind(|| {
        // SAFETY: as in load.
        let env = unsafe { Env::new_init_env(&env, env) };
        // SAFETY: as in load.
        let info = unsafe { Term::new(env, info) };
        // As in load (rustler opens its types with CREATE only, so one would
        // veto the upgrade: nifsock has none).
        rustler::codegen_runtime::ResourceRegistration::register_all_collected(env).is_ok()
            && (cb.upgrade)(env, info)
    })
    .unwrap_or(false);
    if !ok {
        carry::unadopt(old, before);
        return 4;
    }
    // SAFETY: priv_data is ERTS's out-pointer for the new library's data.
    unsafe { *priv_data = old.cast() };
    0
}

unsafe extern "C" fn unload(_env: *mut ErlNifEnv, priv_data: *mut c_void) {
    if carry::leave() {
        if let Some(cb) = callbacks() {
            let _ = std::panic::catch_unwind(cb.retire);
        }
    }
    carry::release(priv_data.cast());
}
