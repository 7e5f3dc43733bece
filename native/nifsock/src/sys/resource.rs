//! Resource types registered by hand so they have `dtor`, `stop` and `down`
//! callbacks (Rustler 0.39 registers its resource types with `stop = NULL`,
//! and `enif_select(STOP)` on such a type crashes the VM).
//!
//! Generic over the Rust value a resource object holds: a [`Kind`] names its
//! type and callbacks; this module knows nothing of what the value is.
//! [`Obj`] borrows a live object for a lifetime, as socket2's `SockRef<'s>`
//! borrows an fd: it is only made from a decoded term (living as long as the
//! term), inside a callback (living for the callback), or from an [`Owned`]
//! reference (living as long as the borrow of it).
//!
//! Also the readiness set's own resource (`register_set`, `arm_set`), the one
//! object the pump source's `enif_select` on the set's fd needs.

use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use std::os::fd::RawFd;

use rustler::sys::{
    enif_alloc_resource, enif_get_resource, enif_init_resource_type, enif_keep_resource,
    enif_make_resource, enif_release_resource, enif_select_x, ErlNifEnv, ErlNifEvent,
    ErlNifMonitor, ErlNifPid, ErlNifResourceDown, ErlNifResourceDtor, ErlNifResourceFlags,
    ErlNifResourceStop, ErlNifResourceType, ErlNifResourceTypeInit, ERL_NIF_SELECT_READ,
};
use rustler::{Env, Term};

use super::carry;
use super::env::EnvRef;

/// Where a kind's registered resource type is kept; reset by every `load` (a
/// delete + purge + reload runs `load` again against the same loaded library).
pub struct TypeSlot(AtomicPtr<ErlNifResourceType>);

impl TypeSlot {
    /// An empty slot, for a `static`.
    pub const fn new() -> TypeSlot {
        TypeSlot(AtomicPtr::new(ptr::null_mut()))
    }

    fn get(&self) -> *mut ErlNifResourceType {
        self.0.load(Ordering::Acquire)
    }
}

/// A Rust value kept in resource objects, and what ERTS's callbacks do with it.
pub trait Kind: Sized + Send + Sync + 'static {
    /// The resource type's name (a reload takes over the type of this name).
    const NAME: &'static CStr;
    /// The static holding the registered type.
    fn slot() -> &'static TypeSlot;
    /// The last reference is gone; runs before the value is dropped in place.
    fn dtor(&self);
    /// `enif_select(STOP)` completed: the fd may now be closed.
    fn stop(obj: Obj<'_, Self>, env: EnvRef, direct: bool);
    /// A process the object monitors died.
    fn down(obj: Obj<'_, Self>, env: EnvRef, pid: ErlNifPid, mon: ErlNifMonitor);
}

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

/// Opens (or, in an upgrade, takes over) the resource type `name` with the
/// callbacks of `init`: null on failure. From `load` or `upgrade` only.
fn open_type(env: Env, name: &CStr, init: &ErlNifResourceTypeInit) -> *mut ErlNifResourceType {
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
    // SAFETY: called from `load` or `upgrade` with its env; the name is a
    // NUL-terminated static string and `init` outlives the call (ERTS copies
    // it). With TAKEOVER, ERTS gives the existing type of this name (objects
    // the old library made included) this library's callbacks.
    let rt = unsafe {
        init_fn(
            env.as_c_arg(),
            name.as_ptr(),
            init,
            ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER,
            &mut tried,
        )
    };
    rt.cast_mut()
}

/// Registers (or takes over) the resource type of `T`. Returns false on failure.
pub fn register<T: Kind>(env: Env) -> bool {
    let init = ErlNifResourceTypeInit {
        dtor: dtor_trampoline::<T> as *const ErlNifResourceDtor,
        stop: stop_trampoline::<T> as *const ErlNifResourceStop,
        down: down_trampoline::<T> as *const ErlNifResourceDown,
        members: 3,
        dyncall: ptr::null(),
    };
    let rt = open_type(env, T::NAME, &init);
    T::slot().0.store(rt, Ordering::Release);
    !rt.is_null()
}

/// Bytes asked of `enif_alloc_resource` for a `T`: room to align it inside.
pub const fn alloc_size<T>() -> usize {
    size_of::<T>() + align_of::<T>()
}

fn aligned<T>(obj: *mut c_void) -> *mut T {
    let addr = obj as usize;
    let align = align_of::<T>();
    let offset = (align - addr % align) % align;
    obj.cast::<u8>().wrapping_add(offset).cast::<T>()
}

/// A live resource object holding a `T`, borrowed for `'a`.
///
/// Only made from a pointer ERTS gave us (a decoded term, a callback argument)
/// or from an [`Owned`] reference, for no longer than that term, callback or
/// borrow keeps the object alive.
pub struct Obj<'a, T> {
    ptr: *mut c_void,
    _life: PhantomData<&'a T>,
}

impl<T> Clone for Obj<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Obj<'_, T> {}

impl<T> PartialEq for Obj<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }
}

impl<T> Eq for Obj<'_, T> {}

impl<T> std::fmt::Debug for Obj<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Obj").field(&self.ptr).finish()
    }
}

// SAFETY: a resource object is shared memory managed by ERTS; ERTS allows
// resource pointers to be used from any thread while a reference is held, and
// the value is only reached as `&T`, so `T: Sync` is what sharing needs.
unsafe impl<T: Sync> Send for Obj<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Obj<'_, T> {}

impl<'a, T> Obj<'a, T> {
    /// The value stored in this object.
    pub fn get(self) -> &'a T {
        // SAFETY: every Obj points at an object allocated by `Owned::new`, which
        // wrote an initialised T at the aligned address (a decoded term is
        // checked to be of T's resource type), and the object stays alive for
        // 'a (see the type's contract), so the reference can't outlive it.
        unsafe { &*aligned::<T>(self.ptr) }
    }

    /// The raw object pointer, for erl_nif calls.
    pub fn as_ptr(self) -> *mut c_void {
        self.ptr
    }

    /// A term for this resource in `env` (keeps the object alive while the term lives).
    pub fn make_term<'e>(self, env: Env<'e>) -> Term<'e> {
        // SAFETY: the object is alive (type contract) and env is a valid env of the caller.
        unsafe { Term::new(env, enif_make_resource(env.as_c_arg(), self.ptr)) }
    }

    /// Only for the trampolines: ERTS passed `ptr` to a running callback.
    fn from_callback(ptr: *mut c_void) -> Obj<'a, T> {
        Obj {
            ptr,
            _life: PhantomData,
        }
    }
}

impl<'a, T: Kind> Obj<'a, T> {
    /// The object a resource term of `T`'s type points to (None for any other
    /// term); borrowed for as long as the term lives.
    pub fn decode(term: Term<'a>) -> Option<Obj<'a, T>> {
        let rt = T::slot().get();
        if rt.is_null() {
            return None;
        }
        let mut out: *const c_void = ptr::null();
        // SAFETY: term belongs to the calling env; out is a valid out-pointer.
        let ok =
            unsafe { enif_get_resource(term.get_env().as_c_arg(), term.as_c_arg(), rt, &mut out) };
        if ok == 0 || out.is_null() {
            return None;
        }
        Some(Obj {
            ptr: out.cast_mut(),
            _life: PhantomData,
        })
    }
}

/// An owned reference to a freshly allocated object; released on drop, after
/// a term has taken its own reference.
pub struct Owned<T> {
    ptr: *mut c_void,
    _value: PhantomData<T>,
}

impl<T: Kind> Owned<T> {
    /// Allocates a resource object holding `value`. None (and `value` dropped)
    /// if the type isn't registered or the allocation fails.
    pub fn new(value: T) -> Option<Owned<T>> {
        let rt = T::slot().get();
        if rt.is_null() {
            return None;
        }
        // SAFETY: rt is a registered resource type; the size is non-zero.
        let obj = unsafe { enif_alloc_resource(rt, alloc_size::<T>()) };
        if obj.is_null() {
            return None;
        }
        // SAFETY: obj points to alloc_size::<T>() writable bytes; the aligned
        // address plus size_of::<T>() stays within them, and it is properly aligned.
        unsafe { ptr::write(aligned::<T>(obj), value) };
        Some(Owned {
            ptr: obj,
            _value: PhantomData,
        })
    }
}

impl<T> Owned<T> {
    /// The object, borrowed while this reference is held.
    pub fn obj(&self) -> Obj<'_, T> {
        Obj {
            ptr: self.ptr,
            _life: PhantomData,
        }
    }
}

impl<T> Owned<T> {
    /// A term for the object in `env`, giving up this reference: the term
    /// keeps the object alive from now on, so the object is borrowed for as
    /// long as the env's terms live.
    pub fn into_term<'e>(self, env: Env<'e>) -> (Term<'e>, Obj<'e, T>) {
        let obj = Obj {
            ptr: self.ptr,
            _life: PhantomData,
        };
        let term = obj.make_term(env);
        drop(self);
        (term, obj)
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: we hold the reference enif_alloc_resource returned; releasing it
        // once here is the matching release.
        unsafe { enif_release_resource(self.ptr) };
    }
}

/// A counted reference to a live object, taken with `enif_keep_resource`
/// (the readiness slot table holds one per registered socket); released on
/// drop. While it is held the object stays alive, so [`Kept::obj`] borrows it
/// for as long as the `Kept` is borrowed.
pub struct Kept<T> {
    ptr: *mut c_void,
    _value: PhantomData<T>,
}

// SAFETY: as for Obj: ERTS allows a held resource to be used from any thread,
// and the value is only reached as `&T`.
unsafe impl<T: Sync> Send for Kept<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Kept<T> {}

impl<T> Kept<T> {
    /// Takes a reference on `obj` (alive for the borrow, so its count is > 0).
    pub fn new(obj: Obj<'_, T>) -> Kept<T> {
        // SAFETY: obj is alive (Obj's contract), so its reference count is > 0.
        unsafe { enif_keep_resource(obj.ptr) };
        Kept {
            ptr: obj.ptr,
            _value: PhantomData,
        }
    }

    /// The object, borrowed while this reference is held.
    pub fn obj(&self) -> Obj<'_, T> {
        Obj {
            ptr: self.ptr,
            _life: PhantomData,
        }
    }
}

impl<T> Clone for Kept<T> {
    fn clone(&self) -> Kept<T> {
        Kept::new(self.obj())
    }
}

impl<T> Drop for Kept<T> {
    fn drop(&mut self) {
        // SAFETY: matches the enif_keep_resource in `new`.
        unsafe { enif_release_resource(self.ptr) };
    }
}

unsafe extern "C" fn dtor_trampoline<T: Kind>(_env: *mut ErlNifEnv, obj: *mut c_void) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        T::dtor(Obj::<T>::from_callback(obj).get());
    }));
    // SAFETY: the destructor runs once, when the last reference is gone: the
    // value written by Owned::new is dropped in place and never used again.
    unsafe { ptr::drop_in_place(aligned::<T>(obj)) };
}

unsafe extern "C" fn stop_trampoline<T: Kind>(
    env: *mut ErlNifEnv,
    obj: *mut c_void,
    _event: ErlNifEvent,
    is_direct_call: c_int,
) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        T::stop(
            Obj::from_callback(obj),
            EnvRef::from_callback(env),
            is_direct_call != 0,
        );
    }));
}

unsafe extern "C" fn down_trampoline<T: Kind>(
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
        T::down(
            Obj::from_callback(obj),
            EnvRef::from_callback(env),
            pid,
            mon,
        );
    }));
}

// The resource `enif_select` needs for the readiness set's own fd (the pump
// readiness source): a type with a no-op stop callback, one object, never
// released (the set lives as long as the library), kept in the block an
// upgrade carries over (ERTS refuses a select on the fd with another object).

static SET_TYPE: TypeSlot = TypeSlot::new();

const SELECT_CUSTOM_MSG: c_int = 16;

unsafe extern "C" fn noop_dtor(_env: *mut ErlNifEnv, _obj: *mut c_void) {}

unsafe extern "C" fn noop_stop(
    _env: *mut ErlNifEnv,
    _obj: *mut c_void,
    _e: ErlNifEvent,
    _d: c_int,
) {
}

/// Registers (or takes over) the set's resource type; from `load` or `upgrade`.
pub fn register_set(env: Env) -> bool {
    let init = ErlNifResourceTypeInit {
        dtor: noop_dtor as *const ErlNifResourceDtor,
        stop: noop_stop as *const ErlNifResourceStop,
        down: ptr::null(),
        members: 2,
        dyncall: ptr::null(),
    };
    let rt = open_type(env, c"nifsock_rdset", &init);
    SET_TYPE.0.store(rt, Ordering::Release);
    !rt.is_null()
}

fn set_obj() -> Option<*mut c_void> {
    let slot = &carry::current().set_obj;
    let o = slot.load(Ordering::Acquire);
    if !o.is_null() {
        return Some(o);
    }
    let rt = SET_TYPE.get();
    if rt.is_null() {
        return None;
    }
    // SAFETY: rt is a registered type; 1 byte is a valid size. The reference is
    // never released: the object lives as long as the library.
    let fresh = unsafe { enif_alloc_resource(rt, 1) };
    if fresh.is_null() {
        return None;
    }
    match slot.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Some(fresh),
        // Lost a race: keep the winner's (the loser's object leaks, once).
        Err(winner) => Some(winner),
    }
}

/// One-shot READ select on the readiness set's fd for `pid` with `msg` (in `env`).
pub fn arm_set(env: Env, fd: RawFd, pid: &ErlNifPid, msg: Term) -> bool {
    let Some(o) = set_obj() else { return false };
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
