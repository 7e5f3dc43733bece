//! State that outlives one loaded copy of the library: what an upgrade hands
//! from the old library to the new one through ERTS's `priv_data` pointer.
//!
//! Each `dlopen`ed copy of the library has its own statics, so a counter kept
//! in a `static` would start again from zero in a new copy while the old
//! copy's closer thread still counts into the old one. The counters therefore
//! live in one heap block, the [`Carry`], made by the first `load` and adopted
//! by every `upgrade` (ERTS passes the old library's `priv_data` to the new
//! one's upgrade); it is freed by the `unload` of the last library using it.
//! Each copy reads it through its own [`CARRY`] pointer (one load more per
//! counter bump than a plain static, no system call, no allocation).
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

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Counter slots in a [`Carry`] (`stats` uses the first ones).
pub const SLOTS: usize = 32;

const MAGIC: u64 = u64::from_be_bytes(*b"nifsock1");

/// Set in [`Carry::flags`] once a library made the readiness epoll set (its
/// slot table lives in that copy's statics: see `upgrade_refusal`).
pub const READINESS_USED: u32 = 1;

/// The block shared by every library generation of the module.
#[repr(C)]
pub struct Carry {
    /// [`MAGIC`]: the first two fields keep their place in every version.
    magic: u64,
    /// The layout fingerprint of the build that made the block.
    fingerprint: u64,
    /// ERTS library records using this block.
    libs: AtomicUsize,
    /// [`READINESS_USED`].
    flags: AtomicU32,
    /// Upgrades this block went through.
    upgrades: AtomicU64,
    /// The counters (`stats`).
    counters: [AtomicU64; SLOTS],
}

impl Carry {
    const fn new(fingerprint: u64) -> Carry {
        Carry {
            magic: MAGIC,
            fingerprint,
            libs: AtomicUsize::new(0),
            flags: AtomicU32::new(0),
            upgrades: AtomicU64::new(0),
            counters: [const { AtomicU64::new(0) }; SLOTS],
        }
    }
}

/// Counts into this before `load` runs (nothing does; the pointer is never null).
static LOCAL: Carry = Carry::new(0);

/// The block this copy uses: [`LOCAL`] until `load` or `upgrade` sets it.
static CARRY: AtomicPtr<Carry> = AtomicPtr::new(std::ptr::addr_of!(LOCAL).cast_mut());

/// ERTS library records this copy serves.
static USERS: AtomicUsize = AtomicUsize::new(0);

fn current() -> &'static Carry {
    // SAFETY: CARRY points at LOCAL or at a block made by `create` that is
    // freed only by the `unload` that drops its last library; this copy's code
    // runs no more once its last library is unloaded, so the block outlives
    // every read made through this pointer.
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

/// Records that this library made the readiness set.
pub fn note_flag(flag: u32) {
    current().flags.fetch_or(flag, Ordering::AcqRel);
}

/// `load`: makes the shared block (or, on a second load of the same copy,
/// keeps the one it has) and returns it for `priv_data`.
pub(super) fn create(fingerprint: u64) -> *mut Carry {
    let mine = CARRY.load(Ordering::Acquire);
    let block = if is_local(mine) {
        let fresh = Box::into_raw(Box::new(Carry::new(fingerprint)));
        CARRY.store(fresh, Ordering::Release);
        fresh
    } else {
        mine
    };
    // SAFETY: block is a live heap block (just made, or held by this copy).
    unsafe { (*block).libs.fetch_add(1, Ordering::AcqRel) };
    USERS.fetch_add(1, Ordering::AcqRel);
    block
}

/// Why `upgrade` must refuse the old library's block, as the veto code ERTS
/// reports (`Library upgrade-call unsuccessful (N)`): 1 the old library
/// predates upgrades (no block), 2 another layout, 3 the old library's
/// readiness set is in use by another copy.
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
    // SAFETY: the same layout as ours (same fingerprint).
    let flags = unsafe { (*old).flags.load(Ordering::Acquire) };
    let same_copy = std::ptr::eq(CARRY.load(Ordering::Acquire), old);
    if flags & READINESS_USED != 0 && !same_copy {
        return Some(3);
    }
    None
}

/// `upgrade`: this copy uses the old library's block from now on.
pub(super) fn adopt(old: *mut Carry) {
    // SAFETY: `upgrade_refusal` accepted old: a live block of our layout.
    let block = unsafe { &*old };
    block.libs.fetch_add(1, Ordering::AcqRel);
    block.upgrades.fetch_add(1, Ordering::Relaxed);
    CARRY.store(old, Ordering::Release);
    USERS.fetch_add(1, Ordering::AcqRel);
}

/// Undoes [`adopt`] when the upgrade fails after it.
pub(super) fn unadopt(old: *mut Carry) {
    // SAFETY: as in adopt; the old library still holds it.
    let block = unsafe { &*old };
    block.libs.fetch_sub(1, Ordering::AcqRel);
    block.upgrades.fetch_sub(1, Ordering::Relaxed);
    if USERS.fetch_sub(1, Ordering::AcqRel) == 1 {
        CARRY.store(std::ptr::addr_of!(LOCAL).cast_mut(), Ordering::Release);
    }
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

/// `unload` of one library record, last step: drops its use of `block`
/// (freed by the last user, once nothing of this copy runs any more).
pub(super) fn release(block: *mut Carry) {
    if block.is_null() || is_local(block) {
        return;
    }
    // SAFETY: block is the priv_data `create` or `adopt` returned for this
    // library record, still counted in `libs`.
    let last = unsafe { (*block).libs.fetch_sub(1, Ordering::AcqRel) } == 1;
    if last {
        if std::ptr::eq(CARRY.load(Ordering::Acquire), block) {
            CARRY.store(std::ptr::addr_of!(LOCAL).cast_mut(), Ordering::Release);
        }
        // SAFETY: made by Box::into_raw in `create`; no library uses it any
        // more and this copy's threads have stopped, so no pointer to it is
        // read after this.
        drop(unsafe { Box::from_raw(block) });
    }
}
