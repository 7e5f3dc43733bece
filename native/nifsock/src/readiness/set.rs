//! The epoll set, the source's mode, and the generation-tagged slot table.
//!
//! They live in one [`Shared`] value kept in the block `sys::carry` hands
//! from library to library: after an upgrade the new copy's code serves the
//! same set, slots and backlog (the sockets registered there keep their keys).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::core::backlog::Wakeup;
use crate::socket::Socket;
use crate::stats;
use crate::sys::carry;
use crate::sys::epoll;
use crate::sys::resource::{Kept, Obj};
use crate::sys::syscall;

pub(super) struct Set {
    pub(super) epfd: RawFd,
    pub(super) efd: RawFd,
}

impl Set {
    /// The set's wake-up: its eventfd (level-triggered in the set).
    pub(super) fn wakeup(&self) -> EventFd {
        EventFd(self.efd)
    }
}

/// The eventfd that wakes the set for the backlog and the port's releases.
pub(super) struct EventFd(RawFd);

impl Wakeup for EventFd {
    fn kick(&self) {
        epoll::kick(self.0);
    }
    fn clear(&self) {
        epoll::clear(self.0);
    }
}

struct Slot {
    gen: u32,
    obj: Option<Kept<Socket>>,
}

#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// What the readiness port holds a socket fd for (`direct`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Held {
    /// Input selected; events go to the socket of this slot key.
    Read(u64),
    /// Input given back to the set (the fd stays held until its close).
    Paused,
    /// Its socket closed: closed at `stop_select`; `true` if close(2) may
    /// block (SO_LINGER set after the fd moved: the closer thread closes it).
    Closing(bool),
}

/// The readiness layer's state, shared by every library generation.
#[derive(Default)]
pub(super) struct Shared {
    set: OnceLock<Set>,
    /// Which source is on: [`OFF`], [`DRIVER`] or [`PUMP`].
    mode: AtomicU8,
    table: Mutex<Table>,
    /// Slot keys whose delivery stopped at its read bound: served by the next drain.
    pub(super) backlog: Mutex<Vec<u64>>,
    /// The fds the readiness port holds itself (`direct`), by fd number.
    pub(super) held: Mutex<Vec<Option<Held>>>,
    /// Held fds whose socket closed: the port lets them go in its next drain.
    pub(super) releases: Mutex<Vec<RawFd>>,
    /// Whether the port ever held an fd (closes skip the table until then).
    pub(super) any_held: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Puts `new` in a `held` entry (the caller holds the lock), keeping
    /// the count of fds held for input (`stats::PORT_READING`); returns what
    /// was there.
    pub(super) fn retag(&self, entry: &mut Option<Held>, new: Option<Held>) -> Option<Held> {
        let was = std::mem::replace(entry, new);
        match (is_read(&was), is_read(entry)) {
            (false, true) => stats::PORT_READING.up(),
            (true, false) => stats::PORT_READING.down(),
            _ => {}
        }
        was
    }
}

fn is_read(h: &Option<Held>) -> bool {
    matches!(h, Some(Held::Read(_)))
}

/// The size of the shared state, for the upgrade fingerprint.
pub fn shared_size() -> usize {
    std::mem::size_of::<Shared>()
}

/// Makes the shared state (or finds the old library's); from load/upgrade.
static SHARED: carry::Named<Shared> = carry::Named::new("readiness::Shared");

pub(super) fn init() -> bool {
    carry::init_shared(&SHARED)
}

/// The shared state (None before the library's load).
pub(super) fn shared() -> Option<&'static Shared> {
    carry::shared(&SHARED)
}
/// Per-wait enif_select (the default).
const OFF: u8 = 0;
/// The set is selected by a driver port and drained in its `ready_input`.
const DRIVER: u8 = 1;
/// The set's fd is enif_select'ed once per batch by a pump process, which
/// drains it in a NIF call.
const PUMP: u8 = 2;

/// The eventfd's key in the set (no slot has it: indices are < 2^32 - 1).
pub(super) const EFD_KEY: u64 = u64::MAX;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn key(idx: u32, gen: u32) -> u64 {
    (u64::from(gen) << 32) | u64::from(idx)
}

fn split(k: u64) -> (usize, u32) {
    ((k & 0xffff_ffff) as usize, (k >> 32) as u32)
}

pub(super) fn get() -> Option<&'static Set> {
    shared()?.set.get()
}

fn ensure() -> Option<&'static Set> {
    let sh = shared()?;
    if let Some(s) = sh.set.get() {
        return Some(s);
    }
    let epfd = epoll::create().ok()?;
    let Ok(efd) = epoll::eventfd() else {
        syscall::close(epfd);
        return None;
    };
    // Level-triggered: the set stays readable until a drain clears the counter.
    if epoll::add(epfd, efd, libc::EPOLLIN as u32, EFD_KEY).is_err() {
        syscall::close(efd);
        syscall::close(epfd);
        return None;
    }
    if sh.set.set(Set { epfd, efd }).is_err() {
        // Another caller won the race; keep its set.
        syscall::close(efd);
        syscall::close(epfd);
    }
    sh.set.get()
}

/// A driver port opened: the fd it selects for input.
pub(super) fn on_port_start() -> Option<RawFd> {
    let set = ensure()?;
    shared()?.mode.store(DRIVER, Ordering::Release);
    Some(set.epfd)
}

/// The driver port closed: new waits go back to enif_select (sockets already
/// in the set keep their registration; the owner of the port never exits).
pub(super) fn on_port_stop() {
    if let Some(sh) = shared() {
        let _ = sh
            .mode
            .compare_exchange(DRIVER, OFF, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// Whether a set-based source is on.
pub fn enabled() -> bool {
    shared().is_some_and(|sh| sh.mode.load(Ordering::Acquire) != OFF)
}

/// Turns the pump source on (or, with false, off). False if the set can't be
/// made or the driver source is on.
pub fn set_pump(on: bool) -> bool {
    let Some(sh) = shared() else { return false };
    if !on {
        let _ = sh
            .mode
            .compare_exchange(PUMP, OFF, Ordering::AcqRel, Ordering::Acquire);
        return true;
    }
    if ensure().is_none() {
        return false;
    }
    // Off (or already the pump) to the pump; never over the driver source.
    match sh
        .mode
        .compare_exchange(OFF, PUMP, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => true,
        Err(mode) => mode == PUMP,
    }
}

/// Whether the pump source is on.
pub fn pump_on() -> bool {
    shared().is_some_and(|sh| sh.mode.load(Ordering::Acquire) == PUMP)
}

/// Adds `fd` to the set (for `events`, edge-triggered) under a fresh slot
/// holding a reference to `obj`.
pub(super) fn register(obj: Obj<'_, Socket>, fd: RawFd, events: u32) -> Option<u64> {
    let sh = shared()?;
    let set = sh.set.get()?;
    let k = {
        let mut t = lock(&sh.table);
        let idx = match t.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(t.slots.len())
                    .ok()
                    .filter(|i| *i < u32::MAX)?;
                t.slots.push(Slot { gen: 0, obj: None });
                i
            }
        };
        let slot = t.slots.get_mut(idx as usize)?;
        slot.obj = Some(Kept::new(obj));
        key(idx, slot.gen)
    };
    if epoll::add(set.epfd, fd, events | epoll::ET, k).is_err() {
        // The caller holds a term of obj: this drop is never the last reference.
        drop(free_slot(k));
        return None;
    }
    Some(k)
}

/// Adds `fd` back to the set under its slot key `k` (for `events`, edge-triggered).
pub(super) fn add(fd: RawFd, k: u64, events: u32) -> Option<()> {
    let set = get()?;
    epoll::add(set.epfd, fd, events | epoll::ET, k).ok()
}

/// Takes `fd` out of the set (its slot stays).
pub(super) fn remove(fd: RawFd) {
    if let Some(set) = get() {
        epoll::del(set.epfd, fd);
    }
}

/// Changes the events of a registered `fd` (key `k`) to `events`, edge-triggered.
pub(super) fn modify(fd: RawFd, k: u64, events: u32) -> Option<()> {
    let set = get()?;
    epoll::modify(set.epfd, fd, events | epoll::ET, k).ok()
}

/// Frees the slot of `k` (bumping its generation); its reference, for the
/// caller to drop once it holds no socket lock.
pub(super) fn free_slot(k: u64) -> Option<Kept<Socket>> {
    let (idx, gen) = split(k);
    let mut t = lock(&shared()?.table);
    let slot = t.slots.get_mut(idx)?;
    if slot.gen != gen {
        return None;
    }
    slot.gen = slot.gen.wrapping_add(1);
    let kept = slot.obj.take();
    if let Ok(i) = u32::try_from(idx) {
        t.free.push(i);
    }
    kept
}

/// Every registered socket with its slot key (a snapshot: `evacuate`).
pub(super) fn registered() -> Vec<(u64, Kept<Socket>)> {
    let Some(sh) = shared() else {
        return Vec::new();
    };
    let t = lock(&sh.table);
    t.slots
        .iter()
        .enumerate()
        .filter_map(|(i, slot)| {
            let obj = slot.obj.clone()?;
            Some((key(u32::try_from(i).ok()?, slot.gen), obj))
        })
        .collect()
}

/// The socket of slot key `k`, if the slot still has that generation.
pub(super) fn lookup(k: u64) -> Option<Kept<Socket>> {
    let (idx, gen) = split(k);
    let t = lock(&shared()?.table);
    let slot = t.slots.get(idx)?;
    if slot.gen != gen {
        return None;
    }
    slot.obj.clone()
}
