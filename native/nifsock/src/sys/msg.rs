//! Processes: the caller's pid, monitors on socket objects, and sending
//! messages from NIFs and from callbacks (whose envs are not process-bound).

use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::Deref;
use std::sync::{Mutex, PoisonError};

use rustler::sys::{
    enif_alloc_env, enif_clear_env, enif_compare_monitors, enif_demonitor_process, enif_free_env,
    enif_is_process_alive, enif_monitor_process, enif_self, enif_send, ErlNifEnv, ErlNifMonitor,
    ErlNifPid, ErlNifTerm,
};
use rustler::{Env, LocalPid, Term};

use super::env::EnvRef;
use super::resource::Obj;

/// A monitor held by a socket object on a process.
#[derive(Clone, Copy, Debug)]
pub struct Monitor(ErlNifMonitor);

impl PartialEq for Monitor {
    fn eq(&self, other: &Self) -> bool {
        // SAFETY: both point to initialised monitors for the duration of the call.
        unsafe { enif_compare_monitors(&self.0, &other.0) == 0 }
    }
}

impl Monitor {
    /// Wraps a monitor ERTS handed to a down callback.
    pub fn from_raw(mon: ErlNifMonitor) -> Monitor {
        Monitor(mon)
    }
}

/// Compares two pids for identity. The same term is the same pid (a local
/// pid is an immediate, so that is the common answer, with no call into
/// ERTS); otherwise ERTS compares them.
pub fn same_pid(a: &ErlNifPid, b: &ErlNifPid) -> bool {
    // SAFETY: ErlNifPid is #[repr(C)] with one field, the pid's ERL_NIF_TERM
    // (erl_nif.h's `typedef struct { ERL_NIF_TERM pid; } ErlNifPid`): reading
    // that word through a cast pointer to the struct is a plain copy.
    let same_term = unsafe {
        *std::ptr::from_ref(a).cast::<rustler::sys::ErlNifTerm>()
            == *std::ptr::from_ref(b).cast::<rustler::sys::ErlNifTerm>()
    };
    same_term || LocalPid::from_c_arg(*a) == LocalPid::from_c_arg(*b)
}

/// The pid of the process calling the NIF (None off a process env).
pub fn self_pid(env: Env) -> Option<ErlNifPid> {
    let mut pid = MaybeUninit::<ErlNifPid>::uninit();
    // SAFETY: env is the NIF's own env; pid is a valid out-pointer, initialised
    // when enif_self returns non-NULL.
    unsafe {
        if enif_self(env.as_c_arg(), pid.as_mut_ptr()).is_null() {
            None
        } else {
            Some(pid.assume_init())
        }
    }
}

/// Whether the local process `pid` is alive (not exiting), from a normal
/// scheduler thread: a NIF or a driver callback (a readiness drain).
pub fn is_alive(pid: &ErlNifPid) -> bool {
    // SAFETY: enif_is_process_alive reads the env only to ask whether the
    // thread is a scheduler (erl_nif.c's execution_state with no process
    // out-pointer ignores the env), so NULL is allowed; on a normal scheduler
    // it is erts_proc_lookup, a lock-free process table lookup that is NULL
    // for an exiting process. pid is a valid pointer for the call.
    unsafe { enif_is_process_alive(std::ptr::null_mut(), pid) != 0 }
}

/// Decodes a local pid term.
pub fn pid_of(term: Term) -> Option<ErlNifPid> {
    term.decode::<LocalPid>().ok().map(|p| *p.as_c_arg())
}

/// A pid as a term.
pub fn pid_term<'a>(env: Env<'a>, pid: &ErlNifPid) -> Term<'a> {
    rustler::Encoder::encode(&LocalPid::from_c_arg(*pid), env)
}

/// Makes `obj` monitor `pid`. None if the process is not alive.
pub fn monitor<T>(env: EnvRef, obj: Obj<'_, T>, pid: &ErlNifPid) -> Option<Monitor> {
    let mut mon = MaybeUninit::<ErlNifMonitor>::uninit();
    // SAFETY: obj is a live resource of a type with a down callback; pid and mon
    // are valid pointers; mon is initialised when the call returns 0.
    unsafe {
        if enif_monitor_process(env.raw(), obj.as_ptr(), pid, mon.as_mut_ptr()) == 0 {
            Some(Monitor(mon.assume_init()))
        } else {
            None
        }
    }
}

/// Removes a monitor set by [`monitor`]. Harmless if it already fired.
pub fn demonitor<T>(env: EnvRef, obj: Obj<'_, T>, mon: &Monitor) {
    // SAFETY: obj is a live resource and mon a monitor created on it.
    unsafe {
        enif_demonitor_process(env.raw(), obj.as_ptr(), &mon.0);
    }
}

/// Sends `msg` (a term of the NIF's own env) to `pid`.
pub fn send(env: Env, pid: &ErlNifPid, msg: Term) -> bool {
    // SAFETY: env is the calling process's env and msg lives in it (msg_env NULL).
    unsafe { enif_send(env.as_c_arg(), pid, std::ptr::null_mut(), msg.as_c_arg()) != 0 }
}

/// A process-independent env for building messages outside a NIF call (in
/// callbacks). Freed on drop.
pub struct MsgEnv(*mut ErlNifEnv);

impl MsgEnv {
    /// Allocates a new env.
    pub fn new() -> Option<MsgEnv> {
        // SAFETY: enif_alloc_env has no preconditions.
        let env = unsafe { enif_alloc_env() };
        if env.is_null() {
            None
        } else {
            Some(MsgEnv(env))
        }
    }

    /// An `Env` view, to use Rustler encoders.
    pub fn with<R>(&self, f: impl for<'a> FnOnce(Env<'a>) -> R) -> R {
        let marker = ();
        // SAFETY: the env is valid until self is dropped, and the closure can't
        // keep terms past it (the lifetime is local to the closure).
        let env = unsafe { Env::new(&marker, self.0) };
        f(env)
    }

    /// Sends `msg` (built in this env) to `pid`; `caller` is the callback's env or NULL.
    /// The env is emptied by the send (ERTS clears it).
    pub fn send(&self, caller: EnvRef, pid: &ErlNifPid, msg: ErlNifTerm) -> bool {
        // SAFETY: msg was built in self.0; caller is a callback env or NULL, both allowed.
        unsafe { enif_send(caller.raw(), pid, self.0, msg) != 0 }
    }
}

impl MsgEnv {
    /// This env as the caller env of erl_nif calls made from a driver callback:
    /// a process-independent env (its process id is ERTS_INVALID_PID), the
    /// same shape as the envs ERTS hands resource callbacks.
    pub fn caller(&self) -> EnvRef {
        EnvRef::from_callback(self.0)
    }

    /// Builds a message with `f` in this env, sends it to `pid` and empties
    /// the env for the next message. `caller`: the running NIF's env, or None
    /// from a driver callback (a port task on a normal scheduler). False if
    /// `pid` is not alive.
    pub fn emit_from(
        &self,
        caller: Option<Env>,
        pid: &ErlNifPid,
        f: impl for<'a> FnOnce(Env<'a>) -> Term<'a>,
    ) -> bool {
        let m = self.with(|env| f(env).as_c_arg());
        let caller = caller.map_or(std::ptr::null_mut(), |e| e.as_c_arg());
        // SAFETY: m was built in self.0; caller is the running NIF's env or
        // NULL. A NULL caller env is what a driver callback can pass: on a
        // normal scheduler enif_send then looks the receiver up with
        // erts_proc_lookup (the thread is managed) and queues with
        // erts_queue_message, taking only the receiver's msgq lock, which
        // ranks after the port lock the callback holds (erl_lock_check.c);
        // see doc/readiness-research.md.
        let ok = unsafe { enif_send(caller, pid, self.0, m) != 0 };
        // SAFETY: self.0 is our env; after a send its heap belongs to the
        // message, so it must be cleared before reuse (and on failure too).
        unsafe { enif_clear_env(self.0) };
        ok
    }
}

impl MsgEnv {
    /// Runs `f` with this env as scratch space, then empties it (terms made
    /// there can't outlive `f`).
    pub fn scratch<R>(&self, f: impl for<'a> FnOnce(Env<'a>) -> R) -> R {
        let r = self.with(f);
        // SAFETY: self.0 is our env; no term of it outlives `with`'s closure.
        unsafe { enif_clear_env(self.0) };
        r
    }
}

impl Drop for MsgEnv {
    fn drop(&mut self) {
        // SAFETY: allocated by enif_alloc_env in `new`, freed once.
        unsafe { enif_free_env(self.0) };
    }
}

// SAFETY: an env made by enif_alloc_env is process-independent and not tied
// to a thread; a MsgEnv is used by its one owner at a time (moved, never
// shared: it is not Sync).
unsafe impl Send for MsgEnv {}

/// The env the last readiness drain gave back, for the next one: a drain
/// (one per `ready_input` or pump call) takes it instead of allocating and
/// initialising an env (with its phony process) and freeing it again. An
/// env left here when the library is purged is not freed (one per library
/// instance).
static SPARE: Mutex<Option<MsgEnv>> = Mutex::new(None);

/// A [`MsgEnv`] taken from the spare slot (or new when it is empty or taken),
/// given back emptied on drop (or freed when another one was given back first).
pub struct ReusedEnv(ManuallyDrop<MsgEnv>);

impl ReusedEnv {
    /// The spare env, or a new one; None if none can be allocated.
    pub fn take() -> Option<ReusedEnv> {
        let spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner).take();
        spare
            .or_else(MsgEnv::new)
            .map(|e| ReusedEnv(ManuallyDrop::new(e)))
    }
}

impl Deref for ReusedEnv {
    type Target = MsgEnv;
    fn deref(&self) -> &MsgEnv {
        &self.0
    }
}

impl Drop for ReusedEnv {
    fn drop(&mut self) {
        // SAFETY: the env is taken out once, here, and self is not used after.
        let env = unsafe { ManuallyDrop::take(&mut self.0) };
        // SAFETY: our env; no term of it outlives the drain that used it
        // (`emit_from` and `scratch` clear it after each use; this is for
        // anything else, e.g. a lifecycle call that used it as caller env).
        unsafe { enif_clear_env(env.0) };
        let mut spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.is_none() {
            *spare = Some(env);
        }
        // else `env` is freed here
    }
}

/// Runs `f` with an `Env` view of a raw env a callback was given.
pub fn with_raw_env<R>(raw: EnvRef, f: impl for<'a> FnOnce(Env<'a>) -> R) -> R {
    let marker = ();
    // SAFETY: raw is the env ERTS passed to the running callback, valid for its
    // duration; terms made through it can't escape the closure.
    let env = unsafe { Env::new(&marker, raw.raw()) };
    f(env)
}
