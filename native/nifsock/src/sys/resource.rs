//! The socket resource type, registered by hand so it has `dtor`, `stop` and
//! `down` callbacks (Rustler 0.39 registers its resource types with
//! `stop = NULL`, and `enif_select(STOP)` on such a type crashes the VM).
//!
//! A resource object holds one [`Socket`] written into memory from
//! `enif_alloc_resource`. [`Obj`] is a borrowed pointer to such an object, valid
//! while a term or a callback keeps the resource alive.

use std::ffi::{c_int, c_void};
use std::mem::{align_of, size_of};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use rustler::sys::{
    enif_alloc_resource, enif_get_resource, enif_init_resource_type, enif_make_resource,
    enif_release_resource, ErlNifEnv, ErlNifEvent, ErlNifMonitor, ErlNifPid, ErlNifResourceDown,
    ErlNifResourceDtor, ErlNifResourceFlags, ErlNifResourceStop, ErlNifResourceType,
    ErlNifResourceTypeInit,
};
use rustler::{Decoder, Env, NifResult, Term};

use super::env::EnvRef;
use crate::socket::Socket;

/// The registered resource type; reset by every `load` (a delete + purge +
/// reload runs `load` again against the same loaded library).
static SOCKET_TYPE: AtomicPtr<ErlNifResourceType> = AtomicPtr::new(ptr::null_mut());

const ERL_NIF_RT_CREATE: c_int = 1;
const ERL_NIF_RT_TAKEOVER: c_int = 2;

/// `enif_init_resource_type` with the flags as a plain `c_int`: rustler::sys
/// declares `ErlNifResourceFlags` as a Rust enum, so `CREATE | TAKEOVER` can't be
/// written in its type. Same C ABI (an int).
type InitResourceTypeFn = unsafe extern "C" fn(
    *mut ErlNifEnv,
    *const std::ffi::c_char,
    *const ErlNifResourceTypeInit,
    c_int,
    *mut c_int,
) -> *const ErlNifResourceType;

/// Callbacks the resource type forwards to, in plain Rust.
pub struct Callbacks {
    /// The object is being destroyed; runs before its memory is freed.
    pub dtor: fn(&Socket),
    /// `enif_select(STOP)` completed: the fd may now be closed.
    pub stop: fn(Obj, EnvRef, bool),
    /// A monitored process died.
    pub down: fn(Obj, EnvRef, ErlNifPid, ErlNifMonitor),
}

static CALLBACKS: AtomicPtr<Callbacks> = AtomicPtr::new(ptr::null_mut());

/// Registers (or takes over) the socket resource type. Returns false on failure.
pub fn register(env: Env, callbacks: &'static Callbacks) -> bool {
    CALLBACKS.store(ptr::from_ref(callbacks).cast_mut(), Ordering::Release);
    let init = ErlNifResourceTypeInit {
        dtor: dtor_trampoline as *const ErlNifResourceDtor,
        stop: stop_trampoline as *const ErlNifResourceStop,
        down: down_trampoline as *const ErlNifResourceDown,
        members: 3,
        dyncall: ptr::null(),
    };
    let mut tried: c_int = 0;
    // SAFETY: enif_init_resource_type has this exact C signature except that its
    // flags parameters are `ErlNifResourceFlags` (a C enum, ABI int); transmuting
    // between function pointer types with ABI-identical parameters is sound.
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
    // SAFETY: called from `load` with its env; the name is a NUL-terminated static
    // string and `init` outlives the call (ERTS copies it).
    let rt = unsafe {
        init_fn(
            env.as_c_arg(),
            c"nifsock_socket".as_ptr(),
            &init,
            ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER,
            &mut tried,
        )
    };
    SOCKET_TYPE.store(rt.cast_mut(), Ordering::Release);
    !rt.is_null()
}

/// Bytes to ask `enif_alloc_resource` for: room to align a `Socket` inside it.
pub const ALLOC_SIZE: usize = size_of::<Socket>() + align_of::<Socket>();

fn aligned(obj: *mut c_void) -> *mut Socket {
    let addr = obj as usize;
    let align = align_of::<Socket>();
    let offset = (align - addr % align) % align;
    obj.cast::<u8>().wrapping_add(offset).cast::<Socket>()
}

/// A pointer to a live socket resource object.
///
/// Only made from a pointer ERTS gave us (a decoded term, a callback argument)
/// or from a fresh allocation; valid while that term, callback or [`Owned`]
/// keeps the object alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Obj(*mut c_void);

// SAFETY: a resource object is shared memory managed by ERTS; the `Socket` in it
// is Sync (Mutex/RwLock/atomics) and ERTS allows resource pointers to be used
// from any thread while a reference is held.
unsafe impl Send for Obj {}
// SAFETY: as above.
unsafe impl Sync for Obj {}

impl Obj {
    /// The socket stored in this object.
    pub fn socket<'a>(self) -> &'a Socket {
        // SAFETY: every Obj points at an object allocated by `Owned::new`, which
        // wrote an initialised Socket at the aligned address, and the object is
        // alive while the Obj is used (see the type's contract). The lifetime is
        // tied to the caller's use of the Obj, which never outlives the object.
        unsafe { &*aligned(self.0) }
    }

    /// The raw object pointer, for erl_nif calls.
    pub fn as_ptr(self) -> *mut c_void {
        self.0
    }

    /// A term for this resource in `env` (keeps the object alive while the term lives).
    pub fn make_term<'a>(self, env: Env<'a>) -> Term<'a> {
        // SAFETY: the object is alive (type contract) and env is a valid env of the caller.
        unsafe { Term::new(env, enif_make_resource(env.as_c_arg(), self.0)) }
    }
}

/// An owned reference to a freshly allocated socket object; released on drop,
/// after a term has taken its own reference.
pub struct Owned(Obj);

impl Owned {
    /// Allocates a resource object holding `socket`. None if the type isn't registered.
    pub fn new(socket: Socket) -> Option<Owned> {
        let rt = SOCKET_TYPE.load(Ordering::Acquire);
        if rt.is_null() {
            return None;
        }
        // SAFETY: rt is a registered resource type; the size is non-zero.
        let obj = unsafe { enif_alloc_resource(rt, ALLOC_SIZE) };
        if obj.is_null() {
            return None;
        }
        // SAFETY: obj points to ALLOC_SIZE writable bytes; the aligned address
        // plus size_of::<Socket>() stays within them, and it is properly aligned.
        unsafe { ptr::write(aligned(obj), socket) };
        Some(Owned(Obj(obj)))
    }

    /// The object.
    pub fn obj(&self) -> Obj {
        self.0
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: we hold the reference enif_alloc_resource returned; releasing it
        // once here is the matching release.
        unsafe { enif_release_resource(self.0 .0) };
    }
}

/// A socket resource decoded from a term argument.
#[derive(Clone, Copy)]
pub struct ResArg<'a> {
    /// The object.
    pub obj: Obj,
    /// Its socket.
    pub socket: &'a Socket,
}

impl<'a> Decoder<'a> for ResArg<'a> {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let rt = SOCKET_TYPE.load(Ordering::Acquire);
        if rt.is_null() {
            return Err(rustler::Error::BadArg);
        }
        let mut out: *const c_void = ptr::null();
        // SAFETY: term belongs to the calling env; out is a valid out-pointer.
        let ok =
            unsafe { enif_get_resource(term.get_env().as_c_arg(), term.as_c_arg(), rt, &mut out) };
        if ok == 0 || out.is_null() {
            return Err(rustler::Error::BadArg);
        }
        let obj = Obj(out.cast_mut());
        Ok(ResArg {
            obj,
            socket: obj.socket(),
        })
    }
}

fn callbacks() -> Option<&'static Callbacks> {
    let cb = CALLBACKS.load(Ordering::Acquire);
    // SAFETY: only ever set from a `&'static Callbacks` in `register`.
    unsafe { cb.as_ref() }
}

unsafe extern "C" fn dtor_trampoline(_env: *mut ErlNifEnv, obj: *mut c_void) {
    let obj = Obj(obj);
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(cb) = callbacks() {
            (cb.dtor)(obj.socket());
        }
    }));
    // SAFETY: the destructor runs once, when the last reference is gone: the
    // Socket written by Owned::new is dropped in place and never used again.
    unsafe { ptr::drop_in_place(aligned(obj.0)) };
}

unsafe extern "C" fn stop_trampoline(
    env: *mut ErlNifEnv,
    obj: *mut c_void,
    _event: ErlNifEvent,
    is_direct_call: c_int,
) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(cb) = callbacks() {
            (cb.stop)(Obj(obj), EnvRef::from_callback(env), is_direct_call != 0);
        }
    }));
}

unsafe extern "C" fn down_trampoline(
    env: *mut ErlNifEnv,
    obj: *mut c_void,
    pid: *const ErlNifPid,
    mon: *const ErlNifMonitor,
) {
    if pid.is_null() || mon.is_null() {
        return;
    }
    // SAFETY: ERTS passes valid pointers to the dead pid and the monitor for the
    // duration of the callback; both are plain data and copied here.
    let (pid, mon) = unsafe { (*pid, *mon) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(cb) = callbacks() {
            (cb.down)(Obj(obj), EnvRef::from_callback(env), pid, mon);
        }
    }));
}
