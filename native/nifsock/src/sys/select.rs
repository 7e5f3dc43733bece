//! `enif_select_x` in the VM's own poll set, with our custom message.

use std::os::fd::RawFd;

use rustler::sys::{
    enif_select, enif_select_x, ErlNifPid, ErlNifTerm, ERL_NIF_SELECT_READ, ERL_NIF_SELECT_STOP,
    ERL_NIF_SELECT_WRITE,
};
use rustler::{Env, Term};

use super::env::EnvRef;
use super::resource::Obj;

const SELECT_CANCEL: i32 = 8;
const SELECT_CUSTOM_MSG: i32 = 16;
/// Return bit: the stop callback was called directly, inside enif_select.
const STOP_CALLED: i32 = 1;
/// Return bit: the stop callback will be called later, on another thread.
const STOP_SCHEDULED: i32 = 2;

/// Readiness direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Readable (recv, accept).
    Read,
    /// Writable (send, connect).
    Write,
}

impl Dir {
    fn flag(self) -> i32 {
        match self {
            Dir::Read => ERL_NIF_SELECT_READ,
            Dir::Write => ERL_NIF_SELECT_WRITE,
        }
    }
}

/// Arms a one-shot select: when `fd` is ready in `dir`, ERTS sends `msg` to `pid`.
/// Returns the negative enif_select result on failure.
pub fn arm<T>(
    env: Env,
    obj: Obj<'_, T>,
    fd: RawFd,
    dir: Dir,
    pid: &ErlNifPid,
    msg: Term,
) -> Result<(), i32> {
    // SAFETY: env is the calling process's env, msg belongs to it (msg_env NULL
    // means "msg is in env"), obj is a live socket resource of a type with a stop
    // callback, and fd is the open fd that resource owns.
    let r = unsafe {
        enif_select_x(
            env.as_c_arg(),
            fd,
            dir.flag() | SELECT_CUSTOM_MSG,
            obj.as_ptr(),
            pid,
            msg.as_c_arg(),
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        Err(r)
    } else {
        Ok(())
    }
}

/// Cancels an armed select in `dir`. Returns true if a select was still
/// armed (so no message was or will be sent for it).
pub fn cancel<T>(env: EnvRef, obj: Obj<'_, T>, fd: RawFd, dir: Dir, undefined: ErlNifTerm) -> bool {
    // SAFETY: env is the caller's env (or a callback env), obj a live resource,
    // fd its open fd. CANCEL with a NULL pid only looks at the armed state.
    let r = unsafe {
        enif_select(
            env.raw(),
            fd,
            dir.flag() | SELECT_CANCEL,
            obj.as_ptr(),
            std::ptr::null(),
            undefined,
        )
    };
    r > 0 && (r & (dir.flag() << 4)) != 0
}

/// Outcome of `stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The stop callback already ran on this thread.
    Called,
    /// The stop callback will run later, on another thread.
    Scheduled,
    /// enif_select refused (the fd was never selected, or an error).
    Failed(i32),
}

/// Asks ERTS to remove `fd` from its poll set and call the stop callback when it
/// is safe to close it. The caller must hold no lock the stop callback takes.
pub fn stop<T>(env: EnvRef, obj: Obj<'_, T>, fd: RawFd, undefined: ErlNifTerm) -> Stop {
    // SAFETY: obj is a live socket resource whose type has a stop callback
    // (registered in resource::register); fd is the fd it owns, not yet closed.
    let r = unsafe {
        enif_select(
            env.raw(),
            fd,
            ERL_NIF_SELECT_STOP,
            obj.as_ptr(),
            std::ptr::null(),
            undefined,
        )
    };
    if r < 0 {
        Stop::Failed(r)
    } else if r & STOP_CALLED != 0 {
        Stop::Called
    } else if r & STOP_SCHEDULED != 0 {
        Stop::Scheduled
    } else {
        Stop::Failed(r)
    }
}
