//! Waiting for readiness: arming a select for the current waiter, queueing
//! the others, promoting the next one when a wait is done, cancelling.

use rustler::sys::ErlNifPid;
use rustler::{Encoder, Env, Term};

use super::ctx::Ctx;
use super::notice::{notify, Notice};
use crate::atoms;
use crate::error::{Error, Result};
use crate::readiness;
use crate::socket::{Phase, Socket, State, Waiter};
use crate::stats;
use crate::sys::env::EnvRef;
use crate::sys::msg::{self, same_pid};
use crate::sys::resource::Obj;
use crate::sys::select::{self, Dir};

/// Registers `caller` as waiting for `dir` readiness. If it is (or becomes) the
/// current waiter its select is armed; otherwise it queues and will be sent a
/// select message when its turn comes. On an error the caller is not left
/// registered (a later close would send it an abort no one waits for).
pub fn wait<'a>(
    env: Env<'a>,
    obj: Obj<'_, Socket>,
    sock: Term<'a>,
    dir: Dir,
    caller: &ErlNifPid,
    handle: Term<'a>,
) -> Result<()> {
    wait_with(env, obj, sock, dir, caller, handle, false)
}

/// [`wait`] for a read by one of nifsock's own blocking `recv(S, 0)` calls
/// (`handle` an integer, no flags): a readiness drain may read for it and
/// send it the result instead of its select message (the waiter's `eager`).
pub fn wait_eager<'a>(
    env: Env<'a>,
    obj: Obj<'_, Socket>,
    sock: Term<'a>,
    caller: &ErlNifPid,
    handle: Term<'a>,
) -> Result<()> {
    wait_with(
        env,
        obj,
        sock,
        Dir::Read,
        caller,
        handle,
        handle.is_integer(),
    )
}

fn wait_with<'a>(
    env: Env<'a>,
    obj: Obj<'_, Socket>,
    sock: Term<'a>,
    dir: Dir,
    caller: &ErlNifPid,
    handle: Term<'a>,
    eager: bool,
) -> Result<()> {
    let s = obj.get();
    let mut guard = s.lock();
    let st = &mut *guard;
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    let r = register(env, obj, st, dir, caller, handle, eager).and_then(|arm| {
        if arm {
            let fd = s.with_fd(|fd| fd)?;
            let m = (atoms::nifsock_tag(), sock, atoms::select(), handle).encode(env);
            // The readiness set, when on: no system call once registered.
            let armed = match dir {
                Dir::Read => readiness::arm(obj, st, fd),
                Dir::Write => readiness::arm_write(obj, st, fd),
            };
            match armed {
                Some(readiness::Arm::Armed) => return Ok(()),
                Some(readiness::Arm::ReadyNow) => {
                    msg::send(env, caller, m);
                    return Ok(());
                }
                None => {}
            }
            select::arm(env, obj, fd, dir, caller, m).map_err(|_| Error::Os(libc::EINVAL))?;
            st.selected = true;
            stats::SELECTS.incr();
            tracing::trace!(fd, op = "select", ?dir);
        }
        Ok(())
    });
    if r.is_err() {
        forget(Ctx::Nif(env), obj, st, dir, caller);
    }
    r
}

/// Puts `caller` in `dir`'s waiters; true if it is the current one (its
/// select is to be armed).
fn register(
    env: Env,
    obj: Obj<'_, Socket>,
    st: &mut State,
    dir: Dir,
    caller: &ErlNifPid,
    handle: Term,
    eager: bool,
) -> Result<bool> {
    let internal = handle.is_integer();
    let State {
        readers,
        writers,
        handles,
        ..
    } = st;
    let (q, other) = match dir {
        Dir::Read => (readers, writers),
        Dir::Write => (writers, readers),
    };
    // The caller re-arming is the only waiter: its old handle is dead, so the
    // store can start afresh (100,000 nowait polls keep one handle, not all).
    let alone = q.queue.is_empty() && other.current.is_none() && other.queue.is_empty();
    match &mut q.current {
        None => {
            let saved = handles.save(handle).ok_or(Error::Os(libc::ENOMEM))?;
            q.current = Some(Waiter::new(*caller, saved, internal).eager(eager));
            Ok(true)
        }
        Some(w) if same_pid(&w.pid, caller) => {
            if !handles.equals(w.handle, handle) {
                if alone {
                    handles.clear();
                }
                w.handle = handles.save(handle).ok_or(Error::Os(libc::ENOMEM))?;
                w.internal = internal;
            }
            w.told = false;
            w.eager = eager;
            Ok(true)
        }
        Some(w) => {
            // Someone else is armed. They must be watched while others queue,
            // or their death would strand the queue.
            if w.mon.is_none() {
                w.mon = msg::monitor(EnvRef::of(env), obj, &w.pid);
            }
            let saved = handles.save(handle).ok_or(Error::Os(libc::ENOMEM))?;
            if w.mon.is_none() {
                // The current waiter is dead: take its place.
                q.current = Some(Waiter::new(*caller, saved, internal).eager(eager));
                return Ok(true);
            }
            match q.queue.iter_mut().find(|w| same_pid(&w.pid, caller)) {
                Some(queued) => {
                    queued.handle = saved;
                    queued.internal = internal;
                    queued.eager = eager;
                }
                None => q
                    .queue
                    .push_back(Waiter::new(*caller, saved, internal).eager(eager)),
            }
            Ok(false)
        }
    }
}

/// Removes `caller` from `dir`'s waiters (a failed `wait`), handing the turn on.
fn forget(ctx: Ctx, obj: Obj<'_, Socket>, st: &mut State, dir: Dir, caller: &ErlNifPid) {
    let q = st.waiters(dir);
    if q.current.as_ref().is_some_and(|w| same_pid(&w.pid, caller)) {
        if let Some(w) = q.current.take() {
            unwatch(ctx, obj, &w);
        }
        promote(ctx, obj, st, dir);
    } else if let Some(pos) = q.queue.iter().position(|w| same_pid(&w.pid, caller)) {
        if let Some(w) = q.queue.remove(pos) {
            unwatch(ctx, obj, &w);
        }
    }
}

/// Hands the turn to the next live queued waiter with a select message.
pub(super) fn promote(ctx: Ctx, obj: Obj<'_, Socket>, st: &mut State, dir: Dir) {
    let (q, handles) = st.waiters_and_handles(dir);
    while let Some(mut next) = q.queue.pop_front() {
        if !q.queue.is_empty() && next.mon.is_none() {
            next.mon = msg::monitor(ctx.raw(), obj, &next.pid);
            if next.mon.is_none() {
                continue; // died while queued
            }
        }
        notify(ctx, obj, handles, &next.pid, next.handle, Notice::Select);
        next.told = true;
        q.current = Some(next);
        return;
    }
}

pub(super) fn unwatch(ctx: Ctx, obj: Obj<'_, Socket>, w: &Waiter) {
    if let Some(m) = &w.mon {
        msg::demonitor(ctx.raw(), obj, m);
    }
}

/// Where a writer stands against the socket's other writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteTurn {
    /// Another process's write is in progress (its partial send waits for
    /// room, or it is queued): queue behind it instead of writing, or the
    /// two sends' bytes would interleave.
    Behind,
    /// The caller is the current write waiter: write, then `done`.
    Current,
    /// No writer waits, the caller neither: write; a completed write needs
    /// no `done` (only the caller could have queued itself since).
    Alone,
}

impl WriteTurn {
    /// Whether the caller must queue behind another writer.
    pub fn behind(self) -> bool {
        self == WriteTurn::Behind
    }
}

/// Where `caller` stands against the socket's other writers. Call with the
/// socket's write turn held, right before writing: write readiness the set
/// saw before this point is forgotten (the write sees the socket's state
/// itself).
pub fn write_turn(obj: Obj<'_, Socket>, caller: &ErlNifPid) -> WriteTurn {
    let s = obj.get();
    let mut st = s.lock();
    readiness::write_attempt(&mut st);
    match &st.writers.current {
        Some(w) if same_pid(&w.pid, caller) => WriteTurn::Current,
        Some(_) => WriteTurn::Behind,
        None if st.writers.queue.is_empty() => WriteTurn::Alone,
        None => WriteTurn::Behind,
    }
}

/// `caller`'s write, begun at `turn`, ended (all written, or failed): it
/// leaves the write waiters, and the next one gets its turn. A writer that
/// was `Alone` is in no queue (only it could have queued itself since), so
/// that costs nothing.
pub fn write_ended(env: Env, obj: Obj<'_, Socket>, turn: WriteTurn, caller: &ErlNifPid) {
    if turn != WriteTurn::Alone {
        done(env, obj, Dir::Write, caller);
    }
}

/// `caller` completed an operation in `dir`: it no longer waits.
pub fn done(env: Env, obj: Obj<'_, Socket>, dir: Dir, caller: &ErlNifPid) {
    done_ctx(Ctx::Nif(env), obj, dir, caller);
}

/// [`done`] from a NIF or a callback (a readiness drain).
pub fn done_ctx(ctx: Ctx, obj: Obj<'_, Socket>, dir: Dir, caller: &ErlNifPid) {
    let s = obj.get();
    let mut st = s.lock();
    let q = st.waiters(dir);
    if q.current.is_none() && q.queue.is_empty() {
        return;
    }
    if q.current.as_ref().is_some_and(|w| same_pid(&w.pid, caller)) {
        if let Some(w) = q.current.take() {
            unwatch(ctx, obj, &w);
        }
        if dir == Dir::Write {
            // A write wait still armed in the set must not fire for the next writer.
            let _ = readiness::cancel(&mut st, Dir::Write);
        }
        promote(ctx, obj, &mut st, dir);
    } else if let Some(pos) = q.queue.iter().position(|w| same_pid(&w.pid, caller)) {
        if let Some(w) = q.queue.remove(pos) {
            unwatch(ctx, obj, &w);
        }
    }
    st.compact();
}

/// Result of `cancel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// Removed before any message was sent.
    Ok,
    /// A select message was already sent: the caller must flush it.
    SelectSent,
    /// No such wait.
    NotFound,
}

/// Cancels `caller`'s wait in `dir` with `handle`.
pub fn cancel(
    env: Env,
    obj: Obj<'_, Socket>,
    dir: Dir,
    caller: &ErlNifPid,
    handle: Term,
) -> Result<Cancelled> {
    let s = obj.get();
    let mut guard = s.lock();
    let st = &mut *guard;
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    let ctx = Ctx::Nif(env);
    let (q, handles) = st.waiters_and_handles(dir);
    let matches = |w: &Waiter| same_pid(&w.pid, caller) && handles.equals(w.handle, handle);
    let outcome = if q.current.as_ref().is_some_and(matches) {
        if let Some(w) = q.current.take() {
            unwatch(ctx, obj, &w);
        }
        let fd = s.with_fd(|fd| fd)?;
        let was_armed = readiness::cancel(st, dir).unwrap_or_else(|| {
            let undefined = atoms::undefined().encode(env).as_c_arg();
            select::cancel(EnvRef::of(env), obj, fd, dir, undefined)
        });
        promote(ctx, obj, st, dir);
        if was_armed {
            Cancelled::Ok
        } else {
            Cancelled::SelectSent
        }
    } else if let Some(pos) = q.queue.iter().position(matches) {
        if let Some(w) = q.queue.remove(pos) {
            unwatch(ctx, obj, &w);
        }
        Cancelled::Ok
    } else {
        Cancelled::NotFound
    };
    st.compact();
    Ok(outcome)
}
