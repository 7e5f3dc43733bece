//! The resource `enif_select` needs for the readiness set's own fd (the pump
//! variant of the readiness prototype): a type with a no-op stop callback, one
//! object per library, never released (the set lives as long as the library).

use std::ffi::{c_int, c_void};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use rustler::sys::{
    enif_alloc_resource, enif_init_resource_type, enif_select_x, ErlNifEnv, ErlNifEvent, ErlNifPid,
    ErlNifResourceDtor, ErlNifResourceFlags, ErlNifResourceStop, ErlNifResourceType,
    ErlNifResourceTypeInit, ERL_NIF_SELECT_READ,
};
use rustler::{Env, Term};

static SET_TYPE: AtomicPtr<ErlNifResourceType> = AtomicPtr::new(ptr::null_mut());
static SET_OBJ: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());

const SELECT_CUSTOM_MSG: i32 = 16;

unsafe extern "C" fn noop_dtor(_env: *mut ErlNifEnv, _obj: *mut c_void) {}
unsafe extern "C" fn noop_stop(
    _env: *mut ErlNifEnv,
    _obj: *mut c_void,
    _e: ErlNifEvent,
    _d: c_int,
) {
}

type InitResourceTypeFn = unsafe extern "C" fn(
    *mut ErlNifEnv,
    *const std::ffi::c_char,
    *const ErlNifResourceTypeInit,
    c_int,
    *mut c_int,
) -> *const ErlNifResourceType;

/// Registers (or takes over) the set's resource type; from the NIF's `load`.
pub fn register(env: Env) -> bool {
    let init = ErlNifResourceTypeInit {
        dtor: noop_dtor as *const ErlNifResourceDtor,
        stop: noop_stop as *const ErlNifResourceStop,
        down: ptr::null(),
        members: 2,
        dyncall: ptr::null(),
    };
    let mut tried: c_int = 0;
    // SAFETY: as in resource::register: the same C function with its enum flags
    // parameters (ABI int) written as c_int.
    let init_fn: InitResourceTypeFn = unsafe {
        std::mem::transmute::<
            unsafe extern "C" fn(
                *mut ErlNifEnv,
                *const std::ffi::c_char,
                *const ErlNifResourceTypeInit,
                ErlNifResourceFlags,
                *mut ErlNifResourceFlags,
            ) -> *const ErlNifResourceType,
            InitResourceTypeFn,
        >(enif_init_resource_type)
    };
    // SAFETY: called from `load` with its env; static name; ERTS copies `init`.
    let rt = unsafe {
        init_fn(
            env.as_c_arg(),
            c"nifsock_rdset".as_ptr(),
            &init,
            1 | 2,
            &mut tried,
        )
    };
    SET_TYPE.store(rt.cast_mut(), Ordering::Release);
    !rt.is_null()
}

fn obj() -> Option<*mut c_void> {
    let o = SET_OBJ.load(Ordering::Acquire);
    if !o.is_null() {
        return Some(o);
    }
    let rt = SET_TYPE.load(Ordering::Acquire);
    if rt.is_null() {
        return None;
    }
    // SAFETY: rt is a registered type; 1 byte is a valid size. The reference is
    // never released: the object lives as long as the library.
    let fresh = unsafe { enif_alloc_resource(rt, 1) };
    if fresh.is_null() {
        return None;
    }
    match SET_OBJ.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Some(fresh),
        // Lost a race: keep the winner's (the loser's object leaks, once).
        Err(winner) => Some(winner),
    }
}

/// One-shot READ select on the set's fd for `pid` with `msg` (in `env`).
pub fn arm(env: Env, fd: RawFd, pid: &ErlNifPid, msg: Term) -> bool {
    let Some(o) = obj() else { return false };
    // SAFETY: env is the calling process's env and msg lives in it; o is a live
    // object of a type with a stop callback; fd is the set's open epoll fd.
    let r = unsafe {
        enif_select_x(
            env.as_c_arg(),
            fd,
            ERL_NIF_SELECT_READ | SELECT_CUSTOM_MSG,
            o,
            pid,
            msg.as_c_arg(),
            ptr::null_mut(),
        )
    };
    r >= 0
}
