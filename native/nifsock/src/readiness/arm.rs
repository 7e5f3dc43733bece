//! Arming, disarming and unregistering a socket's read and write waits (under
//! its state lock, held by the caller).

use std::os::fd::RawFd;

use super::direct;
use super::set;
use crate::core::backlog;
use crate::socket::{Socket, State};
use crate::stats;
use crate::sys::epoll;
use crate::sys::resource::{Kept, Obj};
use crate::sys::select::Dir;

/// What `arm` did: `Armed` (the waiter will be told on the next edge) or
/// `ReadyNow` (an edge came before the arm: tell the waiter now).
pub use crate::core::read_edge::Wait as Arm;

/// Arms a read wait on the socket whose state is `st` (locked by the caller).
/// None: the path is off or the fd could not be registered; use enif_select.
pub fn arm(obj: Obj<'_, Socket>, st: &mut State, fd: RawFd) -> Option<Arm> {
    if !set::enabled() {
        leave_stopped(st, Some(fd));
        return None;
    }
    if st.rd.key.is_none() {
        register_while_on(obj, st, fd, epoll::IN)?;
    }
    st.rd.unarmed_since = 0;
    Some(st.rd.edge.arm())
}

/// Arms a write (or connect) wait on the socket whose state is `st` (locked
/// by the caller). The first write wait adds `EPOLLOUT` to the fd's
/// registration (the fd is added with it, or, already in the set for reads,
/// modified once); later ones make no system call. None: the path is off or
/// the fd could not be registered; use enif_select.
pub fn arm_write(obj: Obj<'_, Socket>, st: &mut State, fd: RawFd) -> Option<Arm> {
    st.rd.w_set = false;
    if !set::enabled() {
        leave_stopped(st, Some(fd));
        return None;
    }
    match st.rd.key {
        None => {
            register_while_on(obj, st, fd, epoll::IN | epoll::OUT)?;
            st.rd.out = true;
        }
        Some(k) if !st.rd.out => {
            if st.rd.direct {
                // its input is the port's: in the set for writes only
                set::add(fd, k, epoll::OUT)?;
            } else {
                set::modify(fd, k, epoll::IN | epoll::OUT)?;
            }
            st.rd.out = true;
        }
        Some(_) => {}
    }
    st.rd.w_set = true;
    if st.rd.w_ready || st.rd.w_hup {
        st.rd.w_ready = false;
        st.rd.w_armed = false;
        Some(Arm::ReadyNow)
    } else {
        st.rd.w_armed = true;
        Some(Arm::Armed)
    }
}

/// A write is about to be tried: an edge the set saw before it is no news
/// for the wait that may follow it (without this, a read edge, which reports
/// `EPOLLOUT` too while the socket is writable, would leave `w_ready` set
/// and wake the next write wait at once). Edges after this point are kept.
pub fn write_attempt(st: &mut State) {
    st.rd.w_ready = false;
}

/// Whether the peer shut down or the socket failed (see `ReadEdge::hup`).
pub fn hup(st: &State) -> bool {
    st.rd.edge.hup()
}

/// No read edge kept and no hang-up (the socket's state `st` locked): bytes
/// that came since the socket's last read made no edge, so none came (in the
/// set an edge with nobody armed is kept; off it, a wait's enif_select
/// reports bytes already there).
pub fn nothing_new(st: &State) -> bool {
    !st.rd.edge.kept() && !st.rd.edge.hup()
}

/// Disarms the current `dir` wait when it went through the set: Some(true)
/// if it was still armed (so no message was sent for it), Some(false) if its
/// message was sent; None when it did not (it was enif_select'ed: cancel
/// that). A read wait goes through the set whenever the fd is in it; a write
/// wait when `arm_write` armed it there.
pub fn cancel(st: &mut State, dir: Dir) -> Option<bool> {
    match dir {
        Dir::Read if st.rd.key.is_some() => Some(st.rd.edge.cancel()),
        Dir::Write if st.rd.w_set => {
            st.rd.w_set = false;
            Some(std::mem::replace(&mut st.rd.w_armed, false))
        }
        _ => None,
    }
}

/// Registers the socket whose state is `st` (locked) in the set for
/// `events`; None if that fails, or if the source stopped meanwhile (perhaps
/// after its evacuation looked at the table: nothing would serve the wait),
/// and then the socket is out of the set again.
fn register_while_on(obj: Obj<'_, Socket>, st: &mut State, fd: RawFd, events: u32) -> Option<()> {
    st.rd.key = Some(set::register(obj, fd, events)?);
    if set::enabled() {
        return Some(());
    }
    leave_stopped(st, Some(fd));
    None
}

/// The socket whose state is `st` (locked) leaves a set whose source stopped
/// (`fd`, its open fd, is taken out of the set): from a wait that arms after
/// the stop, so that this wait, an enif_select, is the one its cancel and
/// close find (a read wait goes through the set whenever the socket is in
/// it: `cancel`), and from the stop's evacuation. The slot's reference is not
/// the last one (the caller holds the socket), so it is dropped here.
pub(super) fn leave_stopped(st: &mut State, fd: Option<RawFd>) {
    if st.rd.key.is_some() {
        st.rd.direct = false;
        drop(unregister(st, fd));
    }
}

/// Takes the socket out of the set at close: frees its slot and, given `fd`
/// (still open), removes the fd from the epoll set. Without it, closing the
/// fd does that (epoll drops a registration when the open file is released):
/// one epoll_ctl less per connection. Until then, and for a file another
/// descriptor keeps open, its edges carry the freed slot's key, which no
/// longer matches (`set::lookup`: the generation moved on) and is ignored.
/// Returns the slot's reference, for the caller to drop once it holds no
/// socket lock.
pub fn unregister(st: &mut State, fd: Option<RawFd>) -> Option<Kept<Socket>> {
    let k = st.rd.key.take()?;
    st.rd.edge.leave();
    st.rd.queued = false;
    st.rd.out = false;
    st.rd.w_armed = false;
    st.rd.w_ready = false;
    st.rd.w_set = false;
    if let (Some(set), Some(fd)) = (set::get(), fd) {
        epoll::del(set.epfd, fd);
    }
    set::free_slot(k)
}

/// The socket's reads keep finding their data after yields
/// (`core::yield_read`), so its edges only cost drains: it leaves the set
/// (an `EPOLL_CTL_DEL`; its slot is freed), unless it waits for anything
/// there now, waits for writes there, or its input is the port's. Its next
/// read wait adds it again (`arm`), and the add reports data already
/// there. `fd` is the socket's, open (the caller holds its state lock with
/// the socket open). Returns the slot's reference, for the caller to drop
/// once it holds no socket lock.
pub fn leave(st: &mut State, fd: RawFd) -> Option<Kept<Socket>> {
    if st.rd.key.is_none()
        || st.rd.out
        || st.rd.direct
        || st.rd.queued
        || st.rd.edge.armed()
        || st.readers.current.is_some()
    {
        return None;
    }
    st.rd.hits = 0;
    stats::SET_LEAVES.incr();
    unregister(st, Some(fd))
}

/// After a delivery from a drain: counts it toward handing the socket's
/// input to the port (`direct::served`), then waits for the next edge, or,
/// when more may already be there and the set has its input, comes back in
/// a later drain.
pub fn rearm_direct(obj: Obj<'_, Socket>, more: bool) {
    let s = obj.get();
    let mut st = s.lock();
    let Some(k) = st.rd.key else { return };
    st.rd.edge.rearm();
    direct::served(obj, &mut st, k);
    if st.rd.direct {
        // the port holds its input: a level-triggered pollset reports what
        // is left after other work
        return;
    }
    if st.rd.edge.take_pending(more) && !std::mem::replace(&mut st.rd.queued, true) {
        drop(st);
        push(k);
    }
}

/// An active socket's owner sent its reply and will yield, then read the
/// peer's next bytes itself (`ops::tcp::active::reply_sent`): its read wait
/// in the set is disarmed, so an edge that comes meanwhile is kept (no drain
/// delivers it) and the owner's read after the yield uses it up. Only for a
/// socket whose input the set has (not the port's), with no backlog entry,
/// and armed now. Returns whether it was disarmed.
pub fn hold_for_reply(st: &mut State) -> bool {
    if st.rd.key.is_none() || st.rd.direct || st.rd.queued || !st.rd.edge.cancel() {
        return false;
    }
    st.rd.reply_yield = true;
    true
}

/// Ends a [`hold_for_reply`] without the owner's read: the socket turned
/// passive while its owner yielded after a reply, or the owner makes no read
/// after its yield. Its read wait is armed again, and an edge kept meanwhile
/// goes to a later drain, which delivers it (or, the socket now passive,
/// hands the wait on: a queued passive `recv` would otherwise wait behind
/// the disarmed one until the owner's read after its yield).
pub fn end_reply_hold(obj: Obj<'_, Socket>) {
    let s = obj.get();
    let mut st = s.lock();
    if !std::mem::replace(&mut st.rd.reply_yield, false) {
        return;
    }
    let Some(k) = st.rd.key else { return };
    st.rd.edge.rearm();
    if st.rd.edge.take_pending(false) && !std::mem::replace(&mut st.rd.queued, true) {
        drop(st);
        push(k);
    }
}

/// Before an active delivery gives up its read wait without having read to
/// EAGAIN (the socket turned passive, or its count ran out): the edge it took
/// is kept for the next read wait (`ReadEdge::gave_up`; without it a passive
/// `recv` that found nothing just before that edge and armed just after the
/// give-up waited for the peer's next bytes: seen as a distribution input
/// handler stalled until the peer's tick, ~30 s).
pub fn keep_ready(obj: Obj<'_, Socket>) {
    let s = obj.get();
    let mut st = s.lock();
    if st.rd.key.is_some() {
        st.rd.edge.gave_up();
    }
}

/// A delivery's reads follow (the socket's state locked by the caller): an
/// edge kept before them is used up by them (`ReadEdge::reads_follow`);
/// without it a delivery that read to EAGAIN would still arm `ReadyNow`: a
/// needless wake-up, and a message of the socket's from another sender.
pub fn reads_follow(st: &mut State) {
    st.rd.edge.reads_follow();
}

/// After the pump's own delivery stopped at its read bound and its wait was
/// armed again: a later drain serves the rest, after other work, instead of
/// an immediate select message to the pump (which would loop the pump
/// through the whole stream in one time slice, a NIF call costing one
/// reduction however much it reads).
pub fn defer_armed(obj: Obj<'_, Socket>) {
    let s = obj.get();
    let mut st = s.lock();
    let Some(k) = st.rd.key else { return };
    if st.rd.edge.armed() && !std::mem::replace(&mut st.rd.queued, true) {
        drop(st);
        push(k);
    }
}

/// Queues a slot key in the backlog (its `queued` just set, or still set for
/// an entry a drain had no budget for) and wakes the set.
pub(super) fn push(k: u64) {
    if let (Some(sh), Some(set)) = (set::shared(), set::get()) {
        backlog::push(&sh.backlog, k, &set.wakeup());
    }
}
