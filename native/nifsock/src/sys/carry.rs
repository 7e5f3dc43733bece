//! State that outlives one loaded copy of the library: what an upgrade hands
//! from the old library to the new one through ERTS's `priv_data` pointer.
//!
//! Each `dlopen`ed copy of the library has its own statics, so a counter kept
//! in a `static` would start again from zero in a new copy while the old
//! copy's closer thread still counts into the old one. The counters therefore
//! live in one heap block, the [`Carry`], made by the first `load` and adopted
//! by every `upgrade` (ERTS passes the old library's `priv_data` to the new
//! one's upgrade), and never freed (see [`release`]).
//! Each copy reads it through its own [`CARRY`] pointer (one load more per
//! counter bump than a plain static, no system call, no allocation). The
//! block also keeps what the readiness layer must share across copies (its
//! state as a [`shared`] value, the set's select object, the port's hooks).
//!
//! A `Carry` also holds the build's layout fingerprint: after an upgrade the
//! new library's code runs on socket objects the old one allocated (their
//! dtor, stop and down callbacks are taken over), which is sound only if both
//! builds lay the socket out the same way; a different fingerprint refuses
//! the upgrade.
//!
//! [`USERS`] counts the ERTS library records this copy serves: two while the
//! same file is loaded twice (an upgrade from the same path gets the same copy
//! from `dlopen`), and when it drops to zero the copy's own threads must stop,
//! since its code is about to be unmapped.

use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Counter slots in a [`Carry`] (`stats` uses the first ones).
pub const SLOTS: usize = 32;

const MAGIC: u64 = u64::from_be_bytes(*b"nifsock1");

/// Values kept for the layers above (one per [`Named`]: see [`shared`]).
const VALUES: usize = 4;

/// A value of the layers above: its key ([`key_of`]) and the leaked box.
#[repr(C)]
struct Value {
    key: AtomicU64,
    ptr: AtomicPtr<c_void>,
}

/// The block shared by every library generation of the module.
#[repr(C)]
pub struct Carry {
    /// [`MAGIC`]: the first two fields keep their place in every version.
    magic: u64,
    /// The layout fingerprint of the build that made the block.
    fingerprint: u64,
    /// ERTS library records using this block.
    libs: AtomicUsize,
    /// Upgrades this block went through.
    upgrades: AtomicU64,
    /// The counters (`stats`).
    counters: [AtomicU64; SLOTS],
    /// The values of [`shared`].
    values: [Value; VALUES],
    /// The readiness set's select object (`resource::arm_set`): `enif_select`
    /// on the set's fd must keep using one object, whichever copy arms it.
    pub(super) set_obj: AtomicPtr<c_void>,
    /// The `HOOKS` static of the copy whose driver runs the readiness port
    /// (`driver`): each copy's load or upgrade points it at its own hooks.
    pub(super) port_hooks: AtomicPtr<c_void>,
}

impl Carry {
    const fn new(fingerprint: u64) -> Carry {
        Carry {
            magic: MAGIC,
            fingerprint,
            libs: AtomicUsize::new(0),
            upgrades: AtomicU64::new(0),
            counters: [const { AtomicU64::new(0) }; SLOTS],
            values: [const {
                Value {
                    key: AtomicU64::new(0),
                    ptr: AtomicPtr::new(std::ptr::null_mut()),
                }
            }; VALUES],
            set_obj: AtomicPtr::new(std::ptr::null_mut()),
            port_hooks: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

/// Counts into this before `load` runs (nothing does; the pointer is never null).
static LOCAL: Carry = Carry::new(0);

/// The block this copy uses: [`LOCAL`] until `load` or `upgrade` sets it.
static CARRY: AtomicPtr<Carry> = AtomicPtr::new(std::ptr::addr_of!(LOCAL).cast_mut());

/// ERTS library records this copy serves.
static USERS: AtomicUsize = AtomicUsize::new(0);

pub(super) fn current() -> &'static Carry {
    // SAFETY: CARRY points at LOCAL or at a block made by `create`, which is
    // never freed.
    unsafe { &*CARRY.load(Ordering::Acquire) }
}

fn is_local(p: *mut Carry) -> bool {
    std::ptr::eq(p, std::ptr::addr_of!(LOCAL))
}

/// Counter slot `i` of the shared block (None past [`SLOTS`]).
pub fn counter(i: usize) -> Option<&'static AtomicU64> {
    current().counters.get(i)
}

/// ERTS library records sharing the block (2 between an upgrade and the
/// purge of the old code).
pub fn libs() -> u64 {
    current().libs.load(Ordering::Relaxed) as u64
}

/// Upgrades the shared block went through.
pub fn upgrades() -> u64 {
    current().upgrades.load(Ordering::Relaxed)
}

/// The key of a value: its name and its type's size and alignment (FNV-1a).
/// Not `TypeId`, which differs between builds of the same source from another
/// directory. Never 0. A `const fn`: [`Named::new`] computes it at compile
/// time, so [`shared`] (on the readiness hot path) hashes nothing.
const fn key_of<T>(name: &str) -> u64 {
    const fn fold(mut h: u64, mut bytes: &[u8]) -> u64 {
        while let [b, rest @ ..] = bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
            bytes = rest;
        }
        h
    }
    let h = fold(0xcbf2_9ce4_8422_2325, name.as_bytes());
    let h = fold(h, &std::mem::size_of::<T>().to_le_bytes());
    fold(h, &std::mem::align_of::<T>().to_le_bytes()) | 1
}

/// A name for a value of type `T` in the shared block: every build that
/// names a value `name` gives it the same type (the upgrade fingerprint
/// covers the type's layout).
pub struct Named<T> {
    /// [`key_of`] the name and `T`.
    key: u64,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T> Named<T> {
    /// The value called `name` (one type per name, in every build).
    pub const fn new(name: &'static str) -> Named<T> {
        Named {
            key: key_of::<T>(name),
            _t: std::marker::PhantomData,
        }
    }
}

/// Makes the shared block's value `n` if it has none (an upgrade finds the
/// old library's). From `load`/`upgrade`; false if every value slot is taken.
/// The value is never freed (nor is the block).
pub fn init_shared<T: Default + Send + Sync + 'static>(n: &Named<T>) -> bool {
    let key = n.key;
    for v in &current().values {
        match v
            .key
            .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                let fresh = Box::into_raw(Box::<T>::default());
                v.ptr.store(fresh.cast(), Ordering::Release);
                return true;
            }
            Err(k) if k == key => return true,
            Err(_) => {}
        }
    }
    false
}

/// The shared block's value `n` (None before [`init_shared`] made it).
pub fn shared<T: Send + Sync + 'static>(n: &Named<T>) -> Option<&'static T> {
    let key = n.key;
    let v = current()
        .values
        .iter()
        .find(|v| v.key.load(Ordering::Acquire) == key)?;
    let p = v.ptr.load(Ordering::Acquire).cast::<T>();
    // SAFETY: a value with this key was made by `init_shared` from a Box<T>
    // of the type every build gives this name (`Named`), in a build with this
    // fingerprint (same compiler and layout version, so the same layout of
    // T), is never freed, and is only reached as &T.
    unsafe { p.as_ref() }
}

/// `load`: makes the shared block (or, when this copy was loaded before and
/// fully unloaded, takes its block up again) and returns it for `priv_data`.
pub(super) fn create(fingerprint: u64) -> *mut Carry {
    let mine = CARRY.load(Ordering::Acquire);
    let block = if is_local(mine) {
        let fresh = Box::into_raw(Box::new(Carry::new(fingerprint)));
        CARRY.store(fresh, Ordering::Release);
        fresh
    } else {
        mine
    };
    // SAFETY: block is a heap block made by `create` (just now, or for an
    // earlier load of this copy), never freed.
    unsafe { (*block).libs.fetch_add(1, Ordering::AcqRel) };
    USERS.fetch_add(1, Ordering::AcqRel);
    block
}

/// Why `upgrade` must refuse the old library's block, as the veto code ERTS
/// reports (`Library upgrade-call unsuccessful (N)`): 1 the old library
/// predates upgrades (no block), 2 another layout.
pub(super) fn upgrade_refusal(old: *mut Carry, fingerprint: u64) -> Option<i32> {
    if old.is_null() {
        return Some(1);
    }
    // SAFETY: a non-null priv_data of this module's library is a block made by
    // `create` of some nifsock build that has it; every version keeps `magic`
    // and `fingerprint` first (repr(C)), so reading them is valid whatever
    // the rest holds. The old library is loaded (its unload runs after this).
    let (magic, fp) = unsafe { ((*old).magic, (*old).fingerprint) };
    if magic != MAGIC || fp != fingerprint {
        return Some(2);
    }
    None
}

/// `upgrade`: this copy uses the old library's block from now on. Returns
/// the block it used before, for [`unadopt`].
pub(super) fn adopt(old: *mut Carry) -> *mut Carry {
    // SAFETY: `upgrade_refusal` accepted old: a block of our layout, never freed.
    let block = unsafe { &*old };
    block.libs.fetch_add(1, Ordering::AcqRel);
    block.upgrades.fetch_add(1, Ordering::Relaxed);
    USERS.fetch_add(1, Ordering::AcqRel);
    CARRY.swap(old, Ordering::AcqRel)
}

/// Undoes [`adopt`] when the upgrade fails after it.
pub(super) fn unadopt(old: *mut Carry, before: *mut Carry) {
    // SAFETY: as in adopt; the old library still holds it.
    let block = unsafe { &*old };
    block.libs.fetch_sub(1, Ordering::AcqRel);
    block.upgrades.fetch_sub(1, Ordering::Relaxed);
    USERS.fetch_sub(1, Ordering::AcqRel);
    CARRY.store(before, Ordering::Release);
}

/// Undoes [`create`] when `load` fails after it (ERTS runs no unload then).
pub(super) fn uncreate(block: *mut Carry) {
    let _ = leave();
    release(block);
}

/// `unload` of one library record, first step: true when this copy serves
/// no library any more (its threads must stop before [`release`]).
pub(super) fn leave() -> bool {
    USERS.fetch_sub(1, Ordering::AcqRel) == 1
}

/// `unload` of one library record, last step: drops its use of `block`.
/// The block itself is never freed (one per node, a few hundred bytes): a
/// copy whose driver outlives the module's last library may still read it,
/// and a later load of this copy takes it up again (see [`create`]).
pub(super) fn release(block: *mut Carry) {
    if block.is_null() || is_local(block) {
        return;
    }
    // SAFETY: block is the priv_data `create` or `adopt` returned for this
    // library record: a block made by `create`, never freed.
    unsafe { (*block).libs.fetch_sub(1, Ordering::AcqRel) };
}
